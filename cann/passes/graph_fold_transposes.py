"""``graph-fold-transposes``: cancel layout transposes and sink them through elementwise ops.

An NHWC model imports as ``transpose(NHWC->NCHW) -> conv -> transpose(NCHW->NHWC)`` per layer
(cann/frontend/tf.py). This pass removes the pairs between layers:

* ``transpose(transpose(x, p), q)`` becomes one transpose with the composed permutation, or
  ``x`` when the composition is the identity; an identity transpose is ``x``; a transpose of
  a (dense) constant is a constant;
* a transpose sinks below its users when every user is elementwise-compatible: a unary
  elementwise op (``graph.relu``, ``graph.sigmoid``, ``graph.clip``, ``graph.cast``, ...), a
  broadcasting binary op whose other operand is a constant (permuted accordingly), a transpose
  with the same permutation, or a value computed from this transpose by unary ops only (it will
  be a transpose of the same permutation once those have sunk), or ``graph.reduce`` (axes
  renumbered); then ``op(transpose(x)) -> transpose(op(x))``.

Sinking moves a transpose toward the next layer's inverse transpose, where the pair cancels;
it never adds a transpose to the program (a transpose with a user it cannot sink below stays
where it is). The pass is idempotent.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, ModuleOp, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from cann.dialects import graph as g


def _perm(t: g.TransposeOp) -> tuple[int, ...]:
    return g._ints(t.perm)


def _dense_const(v: SSAValue) -> np.ndarray | None:
    op = v.owner
    if isinstance(op, g.ConstantOp) and isinstance(op.value, DenseIntOrFPElementsAttr):
        return np.asarray(g.constant_value(op))
    return None


def _unary_types() -> tuple[type, ...]:
    return tuple(t for t in (getattr(g, "_ElementwiseUnary", None), getattr(g, "CastOp", None)) if t is not None)


def _is_unary(op: Operation) -> bool:
    return isinstance(op, _unary_types()) and len(op.operands) == 1


def _binary_types() -> tuple[type, ...]:
    return (g._Binary,)


def _from_unary_chain(v: SSAValue, root: SSAValue, depth: int = 0) -> bool:
    """``v`` is ``root`` or computed from it by elementwise ops whose other operands are constants or
    themselves computed so (each will be a transpose of the same permutation once sunk)."""
    if v is root:
        return True
    op = v.owner
    if depth > 32 or not isinstance(op, Operation):
        return False
    if _is_unary(op):
        return _from_unary_chain(op.operands[0], root, depth + 1)
    if isinstance(op, _binary_types()) and len(g._shape(v)) == len(g._shape(root)):
        chained = [o for o in op.operands if _dense_const(o) is None]
        return bool(chained) and all(_from_unary_chain(o, root, depth + 1) for o in chained)
    return False


def _copy_loc(new: Operation, old: Operation) -> Operation:
    if getattr(old, "location", None) is not None:
        new.location = old.location
    return new


def _sinkable_use(t: g.TransposeOp, user: Operation) -> bool:
    r = len(g._shape(t.res))
    p = _perm(t)
    if isinstance(user, g.TransposeOp) or _is_unary(user):
        return True
    if isinstance(user, getattr(g, "ReduceOp", ())):
        return True
    if isinstance(user, _binary_types()):
        if len(g._shape(user.results[0])) != r:
            return False
        for other in user.operands:
            if other is t.res:
                continue
            if isinstance(other.owner, g.TransposeOp) and _perm(other.owner) == p and len(g._shape(other)) == r:
                continue
            c = _dense_const(other)
            if c is not None and c.ndim <= r:
                continue
            if _from_unary_chain(other, t.res):
                continue
            return False
        return True
    return False


class FoldTransposePattern(RewritePattern):
    """Compose / cancel transposes of transposes; drop identities; fold transposes of constants."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: g.TransposeOp, rewriter: PatternRewriter) -> None:
        p = _perm(op)
        if not op.res.uses:
            rewriter.erase(op)
            return
        if list(p) == list(range(len(p))):
            rewriter.replace(op, [], [op.x])
            return
        c = _dense_const(op.x)
        if c is not None:
            new = _copy_loc(g.make_constant(np.ascontiguousarray(np.transpose(c, p)), ""), op.x.owner)
            rewriter.replace(op, new)
            return
        inner = op.x.owner
        if isinstance(inner, g.TransposeOp):
            q = _perm(inner)
            composed = [q[i] for i in p]
            if composed == list(range(len(composed))):
                rewriter.replace(op, [], [inner.x])
            else:
                rewriter.replace(op, _copy_loc(g.TransposeOp(inner.x, composed), op))


class SinkTransposePattern(RewritePattern):
    """``op(transpose(x, p)) -> transpose(op(x), p)`` for every user of a transpose, when all can sink."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, t: g.TransposeOp, rewriter: PatternRewriter) -> None:
        users = [u.operation for u in t.res.uses]
        if not users or not all(_sinkable_use(t, u) for u in users):
            return
        changed = False
        # unary users and reductions first, so that binary users see their other operand sunk
        for user in sorted(set(users), key=lambda u: 0 if _is_unary(u) or isinstance(u, getattr(g, "ReduceOp", ())) else 1):
            if isinstance(user, g.TransposeOp) or user.parent is None:
                continue
            if _is_unary(user):
                changed |= self._unary(t, user, rewriter)
            elif isinstance(user, getattr(g, "ReduceOp", ())):
                changed |= self._reduce(t, user, rewriter)
            else:
                changed |= self._binary(t, user, rewriter)
        if changed and not t.res.uses:
            rewriter.erase(t)

    @staticmethod
    def _unary(t: g.TransposeOp, user: Operation, rewriter: PatternRewriter) -> bool:
        x = t.x
        rt = TensorType(user.results[0].type.get_element_type(), g._shape(x))
        new = _copy_loc(type(user).create(operands=[x], result_types=[rt], properties=dict(user.properties),
                                          attributes=dict(user.attributes)), user)
        back = _copy_loc(g.TransposeOp(new.results[0], _perm(t)), t)
        rewriter.replace(user, [new, back], [back.res])
        return True

    @staticmethod
    def _reduce(t: g.TransposeOp, user: g.ReduceOp, rewriter: PatternRewriter) -> bool:
        p = _perm(t)
        axes = g._ints(user.axes)
        keep = bool(user.keepdims.value.data)
        new_axes = sorted(p[a] for a in axes)
        red = _copy_loc(g.ReduceOp(t.x, user.kind.data, new_axes, keep), user)
        ops: list[Operation] = [red]
        if keep:
            out = _copy_loc(g.TransposeOp(red.res, p), t)
            ops.append(out)
        else:
            kept_src = [p[i] for i in range(len(p)) if i not in axes]  # source axis of each result axis
            order = sorted(kept_src)
            q = [order.index(s) for s in kept_src]
            out = red
            if q != list(range(len(q))):
                out = _copy_loc(g.TransposeOp(red.res, q), t)
                ops.append(out)
        rewriter.replace(user, ops, [out.results[0]])
        return True

    @staticmethod
    def _binary(t: g.TransposeOp, user: Operation, rewriter: PatternRewriter) -> bool:
        p = _perm(t)
        r = len(p)
        inv = list(np.argsort(p))
        ops: list[Operation] = []
        operands = []
        for other in user.operands:
            if other is t.res:
                operands.append(t.x)
                continue
            o = other.owner
            if isinstance(o, g.TransposeOp) and _perm(o) == p:
                operands.append(o.x)
                continue
            c = _dense_const(other)
            if c is None:
                return False  # a unary chain not sunk yet: retried once it is
            if c.size == 1:  # a scalar broadcasts the same either way
                operands.append(other)
                continue
            c = c.reshape((1,) * (r - c.ndim) + c.shape)
            cop = _copy_loc(g.make_constant(np.ascontiguousarray(np.transpose(c, inv)), ""), o)
            ops.append(cop)
            operands.append(cop.res)
        shape = g.broadcast_shapes(g._shape(operands[0]), g._shape(operands[1]))
        if shape is None or tuple(shape[i] for i in p) != g._shape(user.results[0]):
            return False
        new = _copy_loc(type(user).create(operands=operands,
                                          result_types=[TensorType(user.results[0].type.get_element_type(), shape)],
                                          properties=dict(user.properties), attributes=dict(user.attributes)), user)
        back = _copy_loc(g.TransposeOp(new.results[0], p), t)
        rewriter.replace(user, [*ops, new, back], [back.res])
        return True


@dataclass(frozen=True)
class GraphFoldTransposesPass(ModulePass):
    """Cancel transpose pairs and sink transposes through elementwise ops and reductions."""

    name = "graph-fold-transposes"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(
            GreedyRewritePatternApplier([FoldTransposePattern(), SinkTransposePattern()]),
            apply_recursively=True,
        ).rewrite_module(op)
