"""Training-mode rewrites of the ``graph`` ops whose lowering needs constant weights or whose
training semantics differ from inference, into ops that lower with runtime operands and have
gradient rules (:mod:`cann.training.autodiff`):

* ``graph.conv2d`` -> im2col as two matmuls by constant 0/1 selection matrices (one per spatial
  axis, every kernel tap at once; padding rows and columns select nothing: columns on the right,
  rows on the left, so one transpose orders the taps), then one (batched, per group) matmul by the
  runtime weight in its own [O, C/g, KH, KW] order. The cube's conv lowering takes only constant weights
  (``cann.lowering.conv.conv2d``); the weights of a training step are values.
* ``graph.gemm`` -> ``graph.matmul`` (+ transposes, ``alpha``, ``beta * C``), for the same reason.
* ``graph.batch_norm`` -> batch statistics (training mode, PyTorch's ``BatchNorm2d.train()``):
  ``(x - mean) / sqrt(var + eps) * scale + bias`` with the biased variance over every axis but 1;
  the running statistics are updated as PyTorch does (momentum 0.1, unbiased variance).
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Block

from cann.dialects import graph
from cann.dialects.graph_base import _ints
from cann.training.builder import GraphBuilder, shape


def selection(size: int, k: int, stride: int, dilation: int, pad: int, out: int) -> np.ndarray:
    """The [size, k*out] 0/1 matrix whose column ``t*out + o`` selects input index
    ``o*stride + t*dilation - pad`` (an all-zero column where that index is padding)."""
    m = np.zeros((size, k * out), np.float32)
    for t in range(k):
        for o in range(out):
            i = o * stride + t * dilation - pad
            if 0 <= i < size:
                m[i, t * out + o] = 1.0
    return m


def conv_as_matmul(b: GraphBuilder, op: graph.Conv2DOp):
    """``op``'s result computed by matmuls (module docstring)."""
    x, w = op.x, op.w
    n, c, h, wd = shape(x)
    o, cg, kh, kw = shape(w)
    _, _, ho, wo = shape(op.res)
    s, p, d = (tuple(_ints(getattr(op, a))) for a in ("strides", "pads", "dilations"))
    g = op.group.value.data
    og = o // g
    if (kh, kw) == (1, 1) and s == (1, 1) and not any(p):
        cols = b.reshape(x, (n, g, cg, h * wd))  # [N, g, Cg, P]: P in (h, w) order
        y = b.matmul(b.reshape(w, (g, og, cg)), cols)
        y = b.reshape(y, (n, o, ho, wo))
    else:
        sw = b.const(selection(wd, kw, s[1], d[1], p[1], wo), name="im2col_w")    # [W, kw*Wo]
        sht = b.const(selection(h, kh, s[0], d[0], p[0], ho).T.copy(), name="im2col_h")  # [kh*Ho, H]
        t = b.matmul(b.reshape(x, (n * c * h, wd)), sw)                           # [NCH, kw*Wo]
        t = b.matmul(sht, b.reshape(t, (n * c, h, kw * wo)))                      # [NC, kh*Ho, kw*Wo]
        t = b.transpose(b.reshape(t, (n * c * kh, ho, kw, wo)), (0, 2, 1, 3))     # [NC kh, kw, Ho, Wo]
        cols = b.reshape(t, (n, g, cg * kh * kw, ho * wo))                        # K (c, kh, kw), P (ho, wo)
        y = b.matmul(b.reshape(w, (g, og, cg * kh * kw)), cols)                   # [N, g, Og, Ho*Wo]
        y = b.reshape(y, (n, o, ho, wo))
    if op.b is not None:
        y = b.add(y, b.reshape(op.b, (o, 1, 1)))
    return y


def gemm_as_matmul(b: GraphBuilder, op: graph.GemmOp):
    a = b.transpose(op.a, (1, 0)) if op.trans_a.value.data else op.a
    w = b.transpose(op.b, (1, 0)) if op.trans_b.value.data else op.b
    y = b.scale(b.matmul(a, w), float(op.alpha.value.data))
    if op.c is not None:
        y = b.add(y, b.scale(op.c, float(op.beta.value.data)))
    return y


#: PyTorch's BatchNorm momentum (ONNX's momentum attribute 0.9 = 1 - this): the weight of the batch
#: statistics in the running ones
BN_MOMENTUM = 0.1


def batch_norm_training(b: GraphBuilder, op: graph.BatchNormOp, running: list | None = None, ranks: int = 0):
    """Batch-statistics BatchNorm; appends to ``running`` (if given) ``(running_mean, running_var,
    new_mean, new_var)``: ``(1 - m) r + m batch`` with m = :data:`BN_MOMENTUM` and, as PyTorch, the
    unbiased batch variance for the running variance.

    ``ranks`` > 0: SyncBatchNorm over ``ranks`` data-parallel shards of equal size: the mean and the
    (biased, two-pass) variance are the global batch's, from cross-rank sums of the per-shard sums
    (:mod:`cann.training.collective`)."""
    x = op.x
    xs = shape(x)
    axes = [i for i in range(len(xs)) if i != 1]
    cshape = (xs[1],) + (1,) * (len(xs) - 2)
    if ranks:
        from cann.training.collective import cross_rank_sum

        count = ranks
        for a in axes:
            count *= xs[a]
        mean = b.scale(cross_rank_sum(b, b.reduce(x, "sum", axes, True)), 1.0 / count)
        xc = b.sub(x, mean)
        var = b.scale(cross_rank_sum(b, b.reduce(b.mul(xc, xc), "sum", axes, True)), 1.0 / count)
    else:
        mean = b.reduce(x, "mean", axes, True)
        xc = b.sub(x, mean)
        var = b.reduce(b.mul(xc, xc), "mean", axes, True)
    inv = b.div(b.scalar_like(x, 1.0), b.sqrt(b.add(var, b.scalar_like(x, float(op.epsilon.value.data)))))
    y = b.mul(b.mul(xc, inv), b.reshape(op.scale, cshape))
    if running is not None:
        n = max(ranks, 1)
        for a in axes:
            n *= xs[a]
        m = BN_MOMENTUM
        c = (xs[1],)
        new_mean = b.add(b.scale(op.mean, 1 - m), b.scale(b.reshape(mean, c), m))
        new_var = b.add(b.scale(op.var, 1 - m), b.scale(b.reshape(var, c), m * n / max(n - 1, 1)))
        running.append((op.mean, op.var, new_mean, new_var))
    return b.add(y, b.reshape(op.bias, cshape))


REWRITES = {"graph.conv2d": conv_as_matmul, "graph.gemm": gemm_as_matmul, "graph.batch_norm": batch_norm_training}


def rewrite_for_training(block: Block, running: list | None = None, ranks: int = 0) -> int:
    """Replace every op of :data:`REWRITES` in ``block`` by its training-mode form (in place);
    returns how many were rewritten. ``running``: collects BatchNorm's running-statistics updates
    (:func:`batch_norm_training`); ``ranks``: its SyncBatchNorm form (data parallelism)."""
    count = 0
    for op in list(block.ops):
        fn = REWRITES.get(op.name)
        if fn is None:
            continue
        name = op.location.desc.data if isinstance(op.location, graph.NameLoc) else op.name
        b = GraphBuilder(block, op, f"{name}/train")
        y = batch_norm_training(b, op, running, ranks) if isinstance(op, graph.BatchNormOp) else fn(b, op)
        op.results[0].replace_all_uses_with(y)
        block.erase_op(op)
        count += 1
    return count


