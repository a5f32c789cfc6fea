"""``graph-fold-batch-norm``: fold inference BatchNormalization and per-channel affine constants.

Hardware-independent graph fusion (ATC's ``ConvBatchnormFusionPass``):

* ``batch_norm(conv2d(x, w, b))`` -> ``conv2d(x, w * s, (b - mean) * s + beta)`` with
  ``s = scale / sqrt(var + eps)``, when the conv has no other user;
* ``mul(y, c)`` / ``add(y, c)`` / ``sub(y, c)`` / ``div(y, c)`` by a per-channel constant ``c`` (shape
  ``[C]``, ``[C, 1, 1]`` or ``[1, C, 1, 1]``, or a scalar) fold into a producer ``y`` that is a
  single-use ``conv2d`` (weights and bias) or ``batch_norm`` (scale and bias), as Caffe2 exports
  emit after BN.

All values folded must be constants; results are computed in float64 and stored in the original
dtype.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
)

from cann.dialects import graph


def _const(v: SSAValue | None) -> np.ndarray | None:
    if v is not None and isinstance(v.owner, graph.ConstantOp):
        return np.asarray(graph.constant_value(v.owner), np.float64)
    return None


def _single_use(v: SSAValue) -> bool:
    return sum(1 for _ in v.uses) == 1


def _per_channel(c: np.ndarray, channels: int, rank: int) -> np.ndarray | None:
    """``c`` as a [channels] vector if it broadcasts per channel (axis 1) against a rank-``rank`` tensor."""
    if c.size == 1:
        return np.full(channels, float(c.reshape(-1)[0]))
    shape = c.shape
    if c.size != channels or len(shape) > rank:
        return None
    full = (1,) * (rank - len(shape)) + tuple(shape)
    return c.reshape(-1) if rank >= 2 and full[1] == channels and c.size == channels else None


def _new_const(rewriter: PatternRewriter, before: Operation, value: np.ndarray, dtype, hint: str) -> SSAValue:
    op = graph.make_constant(np.ascontiguousarray(value.astype(dtype)), hint)
    rewriter.insert(op, _before(before))
    return op.results[0]


def _before(op: Operation):
    from xdsl.rewriter import InsertPoint

    return InsertPoint.before(op)


def _conv_with(rewriter, conv: graph.Conv2DOp, scale: np.ndarray, shift: np.ndarray, anchor: Operation) -> Operation:
    """conv2d with weights * scale (per output channel) and bias * scale + shift."""
    w = _const(conv.w)
    b = _const(conv.b) if conv.b is not None else np.zeros(w.shape[0])
    dt = graph.constant_value(conv.w.owner).dtype
    name = getattr(conv.location, "desc", None)
    hint = name.data if name is not None else "conv"
    w2 = _new_const(rewriter, conv, w * scale.reshape(-1, 1, 1, 1), dt, hint + "_w_folded")
    b2 = _new_const(rewriter, conv, b * scale + shift, dt, hint + "_b_folded")
    new = graph.Conv2DOp(conv.x, w2, b2, conv.res.type, strides=conv.strides.get_values(),
                         pads=conv.pads.get_values(), dilations=conv.dilations.get_values(),
                         group=conv.group.value.data)
    new.location = conv.location
    rewriter.insert(new, _before(conv))
    return new


class FoldBatchNormIntoConv(RewritePattern):
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, graph.BatchNormOp):
            return
        conv = op.x.owner
        if not isinstance(conv, graph.Conv2DOp) or not _single_use(op.x) or _const(conv.w) is None:
            return
        if conv.b is not None and _const(conv.b) is None:
            return
        params = [_const(v) for v in (op.scale, op.bias, op.mean, op.var)]
        if any(p is None for p in params):
            return
        gamma, beta, mean, var = (p.reshape(-1) for p in params)
        s = gamma / np.sqrt(var + op.epsilon.value.data)
        new = _conv_with(rewriter, conv, s, beta - mean * s, op)
        rewriter.replace_all_uses_with(op.results[0], new.results[0])
        rewriter.erase(op)
        rewriter.erase(conv)


class FoldAffineIntoProducer(RewritePattern):
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        kind = {graph.MulOp: "mul", graph.AddOp: "add", graph.SubOp: "sub", graph.DivOp: "div"}.get(type(op))
        if kind is None:
            return
        a, b = op.operands
        if _const(b) is None and kind in ("mul", "add"):
            a, b = b, a
        c = _const(b)
        prod = a.owner
        if c is None or not isinstance(prod, (graph.Conv2DOp, graph.BatchNormOp)) or not _single_use(a):
            return
        if op.results[0].type != a.type:  # the constant must not broadcast the tensor up
            return
        shape = a.type.get_shape()
        v = _per_channel(c, shape[1], len(shape)) if len(shape) >= 2 else None
        if v is None:
            return
        one, zero = np.ones_like(v), np.zeros_like(v)
        scale, shift = {"mul": (v, zero), "div": (1.0 / v, zero), "add": (one, v), "sub": (one, -v)}[kind]
        if isinstance(prod, graph.Conv2DOp):
            if _const(prod.w) is None or (prod.b is not None and _const(prod.b) is None):
                return
            new = _conv_with(rewriter, prod, scale, shift, op)
        else:
            params = [_const(x) for x in (prod.scale, prod.bias)]
            if any(p is None for p in params):
                return
            gamma, beta = (p.reshape(-1) for p in params)
            dt = graph.constant_value(prod.scale.owner).dtype
            g2 = _new_const(rewriter, prod, gamma * scale, dt, "bn_scale_folded")
            b2 = _new_const(rewriter, prod, beta * scale + shift, dt, "bn_bias_folded")
            new = graph.BatchNormOp(prod.x, g2, b2, prod.mean, prod.var, prod.epsilon.value.data)
            new.location = prod.location
            rewriter.insert(new, _before(prod))
        rewriter.replace_all_uses_with(op.results[0], new.results[0])
        rewriter.erase(op)
        rewriter.erase(prod)


@dataclass(frozen=True)
class GraphFoldBatchNormPass(ModulePass):
    """Fold BatchNormalization and per-channel affine constants into convolutions (see module doc)."""

    name = "graph-fold-batch-norm"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(GreedyRewritePatternApplier([FoldBatchNormIntoConv(), FoldAffineIntoProducer()]),
                             apply_recursively=True).rewrite_module(op)
