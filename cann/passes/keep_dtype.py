"""``keep-dtype``: graph ops that stay float32 under an fp16 precision mode (ATC's ``--keep_dtype``,
and the automatic choice of ``--precision_mode allow_mix_precision``).

Under ``force_fp16`` the device computes every float tensor in float16 (largest finite value
65504); a node listed here keeps float32. The pass marks each kept op with the unit attribute
``cann.keep_dtype`` (a ``graph.fused`` group is kept whole when one of its ops is listed) and makes
the precision boundaries explicit: every float operand that a kept op reads from an fp16 op, and
every value a kept op passes to an fp16 op, goes through a ``graph.cast`` whose
``cann.device_dtype`` attribute ("f32" or "f16") names the device dtype it converts to (the graph
types, the ONNX ones, do not change). ``convert-graph-to-tile`` lowers kept ops in float32 and the
casts to ``vconv`` conversion kernels. The module records ``cann.kept_fp32 = [kept, total]``: graph
ops (members of fused groups counted one by one; constants, casts and reshapes not counted). Data
movement (:data:`DATA_OPS`: Reshape, Transpose, Concat, ...) reading a kept op's result is kept too.

Options: ``nodes`` (ONNX node names, comma-separated: a node a graph pass removed, such as a
BatchNormalization folded into its Conv, keeps nothing, its Conv must be listed), ``rules``
(also keep the op kinds of :data:`RULE_OPS`, ATC's overflow-prone operators: reductions, Softmax,
exponentials, normalizations). Without either the pass changes nothing.

:func:`parse_keep_dtype` reads ATC's keep_dtype file (one node name per line).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr,
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    TensorType,
    UnitAttr,
    i64,
)
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from cann.errors import CannError

KEEP = "cann.keep_dtype"
DEVICE_DTYPE = "cann.device_dtype"
KEPT_FP32 = "cann.kept_fp32"

#: op kinds kept in float32 by ``rules`` (ATC's allow_mix_precision black list, in spirit: results
#: that are sums over many elements or exponentials of their inputs, which float16 overflows first)
RULE_OPS = frozenset({"graph.softmax", "graph.reduce", "graph.lrn", "graph.layer_norm", "graph.exp",
                      "graph.pow", "graph.log", "graph.softplus", "graph.sinh", "graph.cosh", "graph.mish"})

_FLOATS = (Float16Type, Float32Type, Float64Type, BFloat16Type)

#: data-movement ops: kept when a float operand comes from a kept op
DATA_OPS = frozenset({"graph.reshape", "graph.transpose", "graph.slice", "graph.expand", "graph.pad",
                      "graph.concat", "graph.gather"})

#: ops that do not compute (not counted in the kept share)
_NOT_COUNTED = frozenset({"graph.constant", "graph.cast", "graph.reshape", "func.return", "graph.yield"})


def parse_keep_dtype(path: str | os.PathLike) -> list[tuple[str, int]]:
    """ATC's keep_dtype file: one ONNX node name per line (surrounding blanks stripped; empty lines
    and lines starting with ``#`` skipped). Returns ``(name, line number)`` pairs in file order.

    Raises:
        CannError: ``<path>: cannot read ...`` (location ``--keep_dtype``) or ``<path>:<line>: node
            'X' is listed twice``.
    """
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise CannError("--keep_dtype", f"{os.fspath(path)}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    out: list[tuple[str, int]] = []
    seen: dict[str, int] = {}
    for i, line in enumerate(lines, 1):
        name = line.strip()
        if not name or name.startswith("#"):
            continue
        if name in seen:
            raise CannError(f"{os.fspath(path)}:{i}", f"node '{name}' is listed twice (first on line {seen[name]})")
        seen[name] = i
        out.append((name, i))
    return out


def _loc_name(op: Operation) -> str:
    desc = getattr(op.location, "desc", None)
    return desc.data if desc is not None else ""


def _members(op: Operation) -> list[Operation]:
    if op.name == "graph.fused":
        return [o for o in op.regions[0].block.ops if o.name not in _NOT_COUNTED]
    return [op] if op.name not in _NOT_COUNTED else []


def _float_tensor(v: SSAValue) -> bool:
    return isinstance(v.type, TensorType) and isinstance(v.type.element_type, _FLOATS)


def _cast(rw: Rewriter, v: SSAValue, dtype: str, before: Operation) -> SSAValue:
    from cann.dialects import graph

    c = graph.CastOp(v, v.type.element_type)
    c.attributes[DEVICE_DTYPE] = StringAttr(dtype)
    c.location = before.location
    rw.insert_op(c, InsertPoint.before(before))
    return c.res


def keep_ops(module: ModuleOp, nodes: set[str], rules: bool) -> tuple[int, int]:
    """Mark and cast-bound the kept ops of ``module``'s main function (see the module docstring).

    Returns:
        ``(kept, total)`` computing graph ops.
    """
    from cann.dialects import main_function

    main = main_function(module, "keep-dtype")
    body = main.body.block
    kept_ops: set[Operation] = set()
    kept = total = 0
    for op in body.ops:
        members = _members(op)
        total += len(members)
        if DEVICE_DTYPE in op.attributes:  # a boundary of an earlier run
            continue
        named = [op] if op.name != "graph.fused" else list(op.regions[0].block.ops)
        listed = any(_loc_name(o) in nodes or (rules and o.name in RULE_OPS) for o in named)
        # data movement (no arithmetic) follows a kept producer rather than converting its values
        follows = op.name in DATA_OPS and any(isinstance(v.owner, Operation) and v.owner in kept_ops
                                              for v in op.operands)
        if listed or follows:
            kept_ops.add(op)
            op.attributes[KEEP] = UnitAttr()
            kept += len(members)
    rw = Rewriter()
    for op in list(body.ops):  # casts into kept ops, and from kept ops into fp16 ops
        if isinstance(op, func.ReturnOp) or op.name in ("graph.constant", "graph.cast"):
            continue
        mine = op in kept_ops
        operands = list(op.operands)
        if op.name == "graph.fused":  # a group reads the values its region uses from outside
            inner = {r for o in op.regions[0].block.walk() for r in o.results}
            operands = [v for o in op.regions[0].block.walk() for v in o.operands if v not in inner]
        for v in dict.fromkeys(operands):
            src = v.owner  # model inputs arrive as they are (float32) and are converted by their reader
            if not isinstance(src, Operation) or src.name == "graph.constant" or not _float_tensor(v):
                continue
            if (src in kept_ops) == mine:
                continue
            c = _cast(rw, v, "f32" if mine else "f16", op)
            for o in ([op] if op.name != "graph.fused" else list(op.regions[0].block.walk())):
                for i, operand in enumerate(o.operands):
                    if operand is v:
                        o.operands[i] = c
    module.attributes[KEPT_FP32] = ArrayAttr([IntegerAttr(kept, i64), IntegerAttr(total, i64)])
    return kept, total


@dataclass(frozen=True)
class KeepDtypePass(ModulePass):
    """Keep listed ONNX nodes (and with ``rules``, overflow-prone op kinds) in float32 (module docstring).

    Options: ``nodes`` (comma-separated ONNX node names), ``rules`` (keep :data:`RULE_OPS` too).
    """

    name = "keep-dtype"
    nodes: str = ""
    rules: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        names = {n.strip() for n in self.nodes.split(",") if n.strip()}
        if not names and not self.rules:
            return
        if any(o.name.startswith(("tile.", "ascend.")) for o in op.walk()):
            raise CannError("keep-dtype", "the input is not graph-level IR: nodes are kept before convert-graph-to-tile")
        keep_ops(op, names, self.rules)
