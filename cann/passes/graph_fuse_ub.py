"""``graph-fuse-ub``: group ops into ``graph.fused`` regions that lower to one kernel (UB fusion).

* ``cube_epilogue``: a Conv / Gemm / MatMul and the elementwise ops after it (bias, residual
  Add, Relu, Sigmoid, BatchNormalization, Mul/Add by per-channel constants, ...), applied on the
  L0C -> UB path before the single write to GM (ATC's ``TbeConvEltwiseFusionPass`` family);
* ``elementwise``: chains of elementwise and per-channel-broadcast ops, one vector kernel whose
  intermediates stay in UB (ATC's ``TbeEltwiseFusionPass``);
* ``reduction``: such a chain and the last-axis Softmax consuming it, one kernel per row.

Legality (:func:`fusable`) is separate from profitability: a callback (default
:func:`fits_in_ub`, which checks the UB buffers the fused kernel needs against the SoC's UB)
decides whether a legal group is worth forming, as MLIR's fusion control functions do. A value
used outside the group is never fused away (that would compute it twice or write it anyway).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from cann.dialects import graph
from cann.dialects.graph_fused import FusedOp, YieldOp
from cann.hw.config import load_soc

CUBE_HEADS = (graph.Conv2DOp, graph.GemmOp, graph.MatMulOp)
BINARY = (graph.AddOp, graph.SubOp, graph.MulOp, graph.DivOp)
UNARY = (graph.ReluOp, graph.SigmoidOp, graph.ClipOp, graph.GeluOp, graph.ErfOp, graph.EluOp, graph.SeluOp,
         graph.LeakyReluOp, graph.SoftplusOp, graph.ExpOp, graph.SqrtOp, graph.AbsOp, graph.LogOp,
         graph.ReciprocalOp, graph.NegOp)
#: ops an elementwise group may contain
ELEMENTWISE = (*BINARY, *UNARY, graph.BatchNormOp)


def _is_const(v: SSAValue) -> bool:
    return isinstance(v.owner, graph.ConstantOp)


def _users(v: SSAValue) -> list[Operation]:
    return [u.operation for u in v.uses]


def _broadcast_const_ok(c: SSAValue, shape: tuple[int, ...]) -> bool:
    """A scalar, or a per-channel ([C], [C,1,1], [1,C,1,1]) constant against a 4-D ``shape``."""
    cs = tuple(c.type.get_shape())
    n = int(np.prod(cs)) if cs else 1
    if n == 1:
        return True
    if len(shape) == 4:
        full = (1,) * (4 - len(cs)) + cs
        return full == (1, shape[1], 1, 1)
    if len(shape) in (2, 3):  # Gemm/MatMul output: a per-column (last dimension) constant
        return len(cs) <= len(shape) and cs[-1] == shape[-1] and all(d == 1 for d in cs[:-1])
    return False


def fusable(op: Operation, group: list[Operation], cur: SSAValue) -> bool:
    """Legality: can ``op``, a user of ``cur`` (a value of ``group``), join ``group``?"""
    if not isinstance(op, ELEMENTWISE) or op.results[0].type != cur.type:
        return False
    inside = {r for g in group for r in g.results}
    shape = tuple(cur.type.get_shape())
    if isinstance(op, graph.BatchNormOp):
        return op.x is cur and all(_is_const(v) for v in (op.scale, op.bias, op.mean, op.var))
    if isinstance(op, UNARY):
        if isinstance(op, graph.GeluOp) and op.approximate.data != "none":
            return False  # the tanh form needs a constant buffer the fused kernels do not carry
        return op.operands[0] is cur
    a, b = op.operands
    other = b if a is cur else a
    if other in inside:
        return True
    if _is_const(other):
        return _broadcast_const_ok(other, shape)
    # a second dynamic tensor (residual Add): same shape; for subtraction/division the order matters
    # but the lowering keeps operand order, so any binary op is fine
    return other.type == cur.type


def head_ok(op: Operation) -> bool:
    """Legality of an elementwise group's first op: its dynamic operands have its result type and
    its constant operands broadcast as a fused kernel can read them (see ``_broadcast_const_ok``)."""
    res = op.results[0].type
    if isinstance(op, graph.BatchNormOp):  # [C] parameters are per channel here
        return op.x.type == res and all(_is_const(v) for v in (op.scale, op.bias, op.mean, op.var))
    shape = tuple(res.get_shape())
    return all(_broadcast_const_ok(v, shape) if _is_const(v) else v.type == res for v in op.operands)


def fits_in_ub(group: list[Operation], ub_bytes: int, itemsize: int = 2) -> bool:
    """Profitability: the fused kernel's UB buffers fit (one tile per dynamic input and temporary,
    at least 4 KiB each) and the group saves at least one GM round trip."""
    if len(group) < 2:
        return False
    inside = {r for g in group for r in g.results}
    dynamic = {v for g in group for v in g.operands if v not in inside and not _is_const(v)}
    buffers = len(dynamic) + len(group) + 2
    return buffers * 4096 <= ub_bytes


def _grow(head: Operation, max_ops: int) -> list[Operation]:
    group = [head]
    cur = head.results[0]
    block = head.parent_block()
    while len(group) < max_ops:
        users = _users(cur)
        if any(u.parent_block() is not block for u in users):  # already in another group
            break
        if len(users) == 1 and fusable(users[0], group, cur):
            group.append(users[0])
            cur = users[0].results[0]
            continue
        # x * sigmoid(x) (swish): a unary user whose result and x meet in one binary op
        if len(users) == 2:
            u1, u2 = sorted(users, key=lambda u: isinstance(u, BINARY))
            if (isinstance(u1, UNARY) and isinstance(u2, BINARY) and fusable(u1, group, cur)
                    and set(u2.operands) == {cur, u1.results[0]} and len(_users(u1.results[0])) == 1):
                group += [u1, u2]
                cur = u2.results[0]
                continue
        break
    return group


def _wrap(group: list[Operation], kind: str) -> FusedOp:
    last = group[-1]
    block = last.parent_block()
    result = last.results[0]
    fused = FusedOp(kind, result.type, [])
    fused.location = group[0].location
    block.insert_op_before(fused, last)
    for op in group:
        op.detach()
        fused.body.block.add_op(op)
    yld = YieldOp(result)
    result.replace_uses_with_if(fused.res, lambda use: use.operation is not yld)  # before the yield exists
    fused.body.block.add_op(yld)
    return fused


def fuse(module: ModuleOp, ub_bytes: int, *, cube_epilogue: bool = True, elementwise: bool = True,
         max_ops: int = 8, reduction: bool = True) -> list[FusedOp]:
    """Form the fused groups of every function of ``module`` whose UB buffers fit ``ub_bytes``
    (:func:`fits_in_ub`); returns them in order."""
    made = []
    for fn in [op for op in module.walk() if isinstance(op, func.FuncOp)]:
        for op in list(fn.body.block.ops):
            if op.parent_block() is not fn.body.block:  # already moved into a group
                continue
            if isinstance(op, CUBE_HEADS) and cube_epilogue:
                if isinstance(op, graph.MatMulOp) and not _is_const(op.b):
                    continue  # a MatMul of two tensors is a batched kernel without an epilogue
                kind = "cube_epilogue"
            elif isinstance(op, ELEMENTWISE) and elementwise and head_ok(op):
                kind = "elementwise"
            else:
                continue
            group = _grow(op, max_ops)
            if kind == "elementwise" and reduction:
                tail = group[-1].results[0]
                users = _users(tail)
                if (len(users) == 1 and isinstance(users[0], graph.SoftmaxOp) and users[0].results[0].type == tail.type
                        and users[0].axis.value.data == len(tail.type.get_shape()) - 1
                        and users[0].parent_block() is op.parent_block()):
                    group.append(users[0])
                    kind = "reduction"
            if len(group) > 1 and fits_in_ub(group, ub_bytes):
                made.append(_wrap(group, kind))
    return made


@dataclass(frozen=True)
class GraphFuseUbPass(ModulePass):
    """Form ``graph.fused`` groups, each lowered to one kernel whose intermediates stay in UB: a cube op
    and its elementwise epilogue, elementwise chains, such a chain and its last-axis Softmax.

    Options: ``cube-epilogue``, ``elementwise`` and ``reduction`` switch each kind (ATC fusion switch file),
    ``max-ops`` bounds a group (at least 1; 1 forms none), ``ub-bytes`` is the UB budget the
    profitability check uses in bytes (0: the usable UB of ``soc``'s description, ``cann/hw``;
    Ascend910: 253,952). See the module docstring.

    Raises:
        ValueError: ``max_ops`` below 1 or ``ub_bytes`` below 0 (``max_ops=0: ...``: cann-opt's bad
            pass option); an unknown ``soc`` is reported by cann-opt's option check (cann.options).
    """

    name = "graph-fuse-ub"
    cube_epilogue: bool = True
    elementwise: bool = True
    reduction: bool = True
    max_ops: int = 8
    ub_bytes: int = 0
    soc: str = "Ascend910"

    def __post_init__(self) -> None:
        if self.max_ops < 1:
            raise ValueError(f"max_ops={self.max_ops}: the largest group in ops, at least 1 (1: no fusion)")
        if self.ub_bytes < 0:
            raise ValueError(f"ub_bytes={self.ub_bytes}: the UB budget in bytes, at least 1 (0: the SoC's UB)")

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        fuse(op, self.ub_bytes or load_soc(self.soc).buffer("ub").usable, cube_epilogue=self.cube_epilogue,
             elementwise=self.elementwise, max_ops=self.max_ops, reduction=self.reduction)
