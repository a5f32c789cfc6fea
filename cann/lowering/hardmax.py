"""ONNX Hardmax (``graph.hardmax``) on the vector unit: 1 at the first maximum along the axis.

The axis is moved outermost (a :func:`cann.lowering.math.gather` transpose when there are outer
dimensions), so the tensor is ``[K, R]`` row-major; ``m`` = the max over the K rows
(:func:`cann.lowering.math.reduce`). One kernel then walks the rows in order, per chunk of
columns, keeping ``free`` (1 until a column has met its maximum, then 0):

    is_max = 1 - step(m - x_k)      (m - x_k >= 0, and > 0 exactly when x_k < m)
    y_k    = is_max * free
    free   = free - y_k

``step`` is the exact float step of :mod:`cann.lowering.transcendental` (``min(relu(d) * 2^149,
1)`` in fp32, ``* 2^24`` in fp16: every positive difference of two distinct values reaches 1
under IEEE gradual underflow), so ties resolve to the first index as the ONNX reference
(``argmax``) does; no integer compare is needed. Infinite inputs are clamped to the dtype's
finite range first (``inf - inf`` would be NaN); the ordering is kept except between
``+-inf`` and ``+-max`` of the dtype.
"""

from __future__ import annotations

import math

import numpy as np

from cann.dialects.tile import Space
from cann.lowering import math as mathk
from cann.lowering.common import ND, DevTensor, Lowering, ub_chunk, unsupported


def hardmax(lw: Lowering, x: DevTensor, axis: int, loc) -> DevTensor:
    x = mathk._nd(lw, x, loc)
    shape = tuple(x.shape)
    size = math.prod(shape)
    if size == 0:
        raise unsupported(loc, "Hardmax of an empty tensor")
    k_ = shape[axis]
    outer, inner = math.prod(shape[:axis]), math.prod(shape[axis + 1:])
    r_ = outer * inner
    xt = x
    if outer > 1 and k_ > 1:  # [outer, K, inner] -> [K, outer, inner]
        xt = mathk.gather(lw, x, (k_, outer, inner), (inner, k_ * inner, 1), 0, loc, "hardmax_transpose")
    m = mathk.reduce(lw, lw.view(xt, (k_, r_)), "max", [0], (r_,), loc)
    fmax = float(np.finfo(lw.dtype).max)
    scale = (2.0 ** 100, 2.0 ** 49) if lw.dtype == np.float32 else (2.0 ** 12, 2.0 ** 12)
    isz = lw.dtype.itemsize
    chunk = min(ub_chunk(lw, 5 * isz + 1, 256), max(256, -(-r_ // 256) * 256))
    yt = lw.gm_tensor((k_, r_), ND)
    kb = lw.kernel("hardmax", loc)
    kb.tiling["chunk"] = chunk
    xa, ma, ya = kb.arg(xt), kb.arg(m), kb.arg(yt)
    mb, xb, free, one, hi = (kb.alloc(Space.UB, chunk, lw.dtype) for _ in range(5))
    kb.vec("dup", one, count=chunk, scalar=1.0)
    kb.vec("dup", hi, count=chunk, scalar=fmax)
    for c0 in range(0, r_, chunk):
        c = min(chunk, r_ - c0)
        kb.copy(ma, mb, src_offset=c0, burst=c)
        kb.vec("maxs", mb, mb, count=c, scalar=-fmax)
        kb.vec("min", mb, mb, hi, count=c)
        kb.vec("dup", free, count=c, scalar=1.0)
        for k in range(k_):
            kb.copy(xa, xb, src_offset=k * r_ + c0, burst=c)
            kb.vec("maxs", xb, xb, count=c, scalar=-fmax)
            kb.vec("min", xb, xb, hi, count=c)
            kb.vec("sub", xb, mb, xb, count=c)                      # d = m - x >= 0
            kb.vec("relu", xb, xb, count=c)
            for s in scale:
                kb.vec("muls", xb, xb, count=c, scalar=s)
            kb.vec("min", xb, xb, one, count=c)                     # step(d)
            kb.vec("muls", xb, xb, count=c, scalar=-1.0)
            kb.vec("adds", xb, xb, count=c, scalar=1.0)             # is_max
            kb.vec("mul", xb, xb, free, count=c)                    # first one only
            kb.vec("sub", free, free, xb, count=c)
            kb.copy(xb, ya, dst_offset=k * r_ + c0, burst=c)
    lw.launch(kb)
    if outer > 1 and k_ > 1:  # [K, outer, inner] -> [outer, K, inner]
        return mathk.gather(lw, yt, shape, _back_strides(shape, axis, outer, inner), 0, loc, "hardmax_transpose")
    return lw.view(yt, shape)


def _back_strides(shape, axis, outer, inner):
    """Strides into the [K, outer, inner] result for each axis of ``shape``."""
    st = [0] * len(shape)
    acc = inner
    for d in range(axis - 1, -1, -1):  # outer axes, row-major inside the outer block
        st[d] = acc
        acc *= shape[d]
    st[axis] = outer * inner
    acc = 1
    for d in range(len(shape) - 1, axis, -1):
        st[d] = acc
        acc *= shape[d]
    return st
