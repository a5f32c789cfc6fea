"""ONNX Det (``graph.det``): determinants of a batch of n x n matrices on the vector unit.

The matrices are laid out element-major (a :func:`cann.lowering.math.gather` transpose to
``[n*n, B]``), so element ``(i, j)`` of every matrix of a chunk of the batch is one contiguous UB
row and Gaussian elimination with partial pivoting runs on whole rows of matrices at once:

* pivot of column k: ``m = max_i |a_ik|`` (``vabs``, ``vmax``) over rows i >= k; the first row
  reaching it, ``w_i = (1 - step(m - |a_ik|)) * free`` (the exact float step of
  :mod:`cann.lowering.transcendental`, as Hardmax), is swapped with row k by ``vsel``s; a swap
  negates the determinant (``sign *= 2 w_k - 1``);
* elimination: ``a_ij -= (a_ik / p) * a_kj`` for i, j > k, ``p`` the pivot; a zero pivot (a
  singular matrix) divides by ``p + 1`` instead (``p + (1 - step(|p|))``), so no NaN appears and the
  product of pivots is 0;
* det = sign * prod p.

The code is O(n^3) vector instructions per chunk of the batch (n <= 16).
"""

from __future__ import annotations

import math

import numpy as np

from cann.dialects import tile
from cann.dialects.tile import Space
from cann.lowering import math as mathk
from cann.lowering.common import ND, DevTensor, Lowering, ub_chunk, unsupported

MAX_N = 16


def det(lw: Lowering, x: DevTensor, loc) -> DevTensor:
    x = mathk._nd(lw, x, loc)
    shape = tuple(x.shape)
    n = shape[-1]
    b_ = math.prod(shape[:-2])
    if n == 0 or b_ == 0:
        raise unsupported(loc, "Det of an empty tensor")
    if n > MAX_N:
        raise unsupported(loc, f"Det of {n} x {n} matrices (at most {MAX_N} x {MAX_N})")
    nn = n * n
    xt = x if b_ == 1 else mathk.gather(lw, x, (nn, b_), (1, nn), 0, loc, "det_transpose")
    isz = lw.dtype.itemsize
    chunk = min(ub_chunk(lw, (nn + 8) * isz + 1, 256), max(256, -(-b_ // 256) * 256))
    out = lw.gm_tensor(shape[:-2], ND)
    kb = lw.kernel("det", loc)
    kb.tiling["chunk"] = chunk
    xa, ya = kb.arg(xt), kb.arg(out)
    a = [kb.alloc(Space.UB, chunk, lw.dtype) for _ in range(nn)]
    m, w, t, free, acc, sgn, one = (kb.alloc(Space.UB, chunk, lw.dtype) for _ in range(7))
    scale = (2.0 ** 100, 2.0 ** 49) if lw.dtype == np.float32 else (2.0 ** 12, 2.0 ** 12)
    kb.vec("dup", one, count=chunk, scalar=1.0)

    def step(d, s, c):  # d = 1 if s > 0 else 0
        kb.vec("relu", d, s, count=c)
        for sc in scale:
            kb.vec("muls", d, d, count=c, scalar=sc)
        kb.vec("min", d, d, one, count=c)

    def sel(d, cond, s0, s1, c):
        kb.emit(tile.SelectOp(d, cond, s0, s1, count=c))

    for c0 in range(0, b_, chunk):
        c = min(chunk, b_ - c0)
        for e in range(nn):
            kb.copy(xa, a[e], src_offset=e * b_ + c0, burst=c)
        kb.vec("dup", acc, count=c, scalar=1.0)
        kb.vec("dup", sgn, count=c, scalar=1.0)
        for k in range(n):
            col = [a[i * n + k] for i in range(k, n)]
            if len(col) > 1:
                # m = max |a_ik|
                kb.vec("abs", m, col[0], count=c)
                for r in col[1:]:
                    kb.vec("abs", t, r, count=c)
                    kb.vec("max", m, m, t, count=c)
                kb.vec("dup", free, count=c, scalar=1.0)
                for i in range(k, n):
                    kb.vec("abs", t, a[i * n + k], count=c)
                    kb.vec("sub", t, m, t, count=c)
                    step(t, t, c)
                    kb.vec("muls", t, t, count=c, scalar=-1.0)
                    kb.vec("adds", t, t, count=c, scalar=1.0)          # is_max
                    kb.vec("mul", t, t, free, count=c)                 # first one: w_i
                    kb.vec("sub", free, free, t, count=c)
                    if i == k:
                        kb.vec("muls", w, t, count=c, scalar=2.0)      # a swap negates the sign
                        kb.vec("adds", w, w, count=c, scalar=-1.0)
                        kb.vec("mul", sgn, sgn, w, count=c)
                        continue
                    for j in range(k, n):                               # swap rows k and i where w_i
                        kb.vec("mov", w, a[k * n + j], count=c)
                        sel(a[k * n + j], t, a[i * n + j], a[k * n + j], c)
                        sel(a[i * n + j], t, w, a[i * n + j], c)
            p = a[k * n + k]
            kb.vec("mul", acc, acc, p, count=c)
            if k == n - 1:
                break
            kb.vec("abs", t, p, count=c)
            step(t, t, c)
            kb.vec("muls", t, t, count=c, scalar=-1.0)
            kb.vec("adds", t, t, count=c, scalar=1.0)
            kb.vec("add", t, t, p, count=c)                            # p, or 1 when p == 0
            for i in range(k + 1, n):
                kb.vec("div", w, a[i * n + k], t, count=c)             # f = a_ik / p
                for j in range(k + 1, n):
                    kb.vec("mul", m, w, a[k * n + j], count=c)
                    kb.vec("sub", a[i * n + j], a[i * n + j], m, count=c)
        kb.vec("mul", acc, acc, sgn, count=c)
        kb.copy(acc, ya, dst_offset=c0, burst=c)
    lw.launch(kb)
    return out
