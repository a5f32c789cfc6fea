"""MatMul of two tensors on the cube (nd2nz + load2d + mmad), batch dimensions broadcast.

MatMul by a constant (and Gemm) is :mod:`cann.lowering.gemm`; here both operands are GM tensors
computed at run time, so neither is stored in FRACTAL_Z at compile time: ``nd2nz`` puts each tile
in the cube's layout on its way to L1.
"""

from __future__ import annotations

import math

import numpy as np

from cann.dialects import tile
from cann.dialects.tile import Space
from cann.lowering.common import ND, DevTensor, Lowering, unsupported
from cann.lowering.cube import round_up


def batched_matmul(lw: Lowering, a: DevTensor, b: DevTensor, out_shape: tuple[int, ...], loc) -> DevTensor:
    """MatMul of two GM tensors ``a`` [..., M, K] and ``b`` [..., K, N] (batch dimensions broadcast
    as numpy.matmul does): ND ``out_shape`` [..., M, N].

    ``b`` is first transposed to [..., N, K] (a data kernel) so that, loaded with nd2nz, each
    batch's B lands in L1 already in the Zn layout L0B takes. Batches are spread over the cores; a
    single batch spreads its output-column tiles instead (M, N and K are all tiled: no size limit).
    """
    from cann.lowering.data import transpose

    a = lw.as_format(a, ND, lw.dtype, loc)
    b = lw.as_format(b, ND, lw.dtype, loc)
    *ab, m_, k_ = a.shape
    *bb, kb_, n_ = b.shape
    if kb_ != k_:
        raise unsupported(loc, f"MatMul: inner dimensions differ ({k_} vs {kb_})")
    batch = tuple(out_shape[:-2])
    nb = math.prod(batch)
    bt = transpose(lw, b, tuple(range(len(b.shape) - 2)) + (len(b.shape) - 1, len(b.shape) - 2), loc)
    idx = np.arange(nb).reshape(batch) if batch else np.zeros((), np.int64)
    a_idx = np.broadcast_to(np.arange(math.prod(ab)).reshape(tuple(ab)) if ab else 0, batch).reshape(-1)
    b_idx = np.broadcast_to(np.arange(math.prod(bb)).reshape(tuple(bb)) if bb else 0, batch).reshape(-1)
    del idx
    dt, isz = lw.dtype, lw.dtype.itemsize
    k0 = lw.soc.cube.k0(isz)
    kp = round_up(k_, k0)
    n1 = math.ceil(n_ / 16)
    m_t = min(128, round_up(m_, 16))
    n_t = min(128, n1 * 16)
    k_t = min(lw.usable("l0a") // (m_t * isz), lw.usable("l0b") // (n_t * isz)) // k0 * k0
    k_t = max(k0, min(k_t, kp))
    kb = lw.kernel("batch_matmul", loc, {"m": m_t, "n": n_t, "k": k_t})
    m_t, n_t, k_t = kb.tiling["m"], kb.tiling["n"], kb.tiling["k"]
    y = lw.gm_tensor(tuple(out_shape), ND)
    uniform = bool(np.all(np.diff(a_idx) == (a_idx[1] - a_idx[0] if nb > 1 else 0))) and \
        bool(np.all(np.diff(b_idx) == (b_idx[1] - b_idx[0] if nb > 1 else 0)))
    n_tiles = math.ceil(n_ / n_t)
    by_columns = nb == 1 and n_tiles > 1
    if uniform and nb > 1:  # SPMD over batches: every core moves its pointers by one batch
        kb.partition(nb)
    elif by_columns:  # SPMD over output-column tiles: B^T rows and Y columns move by one tile
        kb.partition(n_tiles)
    aa, ba, ya = kb.arg(a), kb.arg(bt), kb.arg(y)
    if by_columns:
        kb.block_offset(ba, n_t * k_)
        kb.block_offset(ya, n_t)
    elif kb.block_dim > 1:
        kb.block_offset(aa, int(a_idx[1] - a_idx[0]) * m_ * k_)
        kb.block_offset(ba, int(b_idx[1] - b_idx[0]) * n_ * k_)
        kb.block_offset(ya, m_ * n_)
    l1_a = kb.alloc(Space.L1, k_t * m_t, dt)
    l1_b = kb.alloc(Space.L1, k_t * n_t, dt)
    l0a = kb.alloc(Space.L0A, m_t * k_t, dt)
    l0b = kb.alloc(Space.L0B, k_t * n_t, dt)
    l0c = kb.alloc(Space.L0C, m_t * n_t, np.dtype(np.float32))
    ub = kb.alloc(Space.UB, m_t * n_t, dt)

    def block(a_off: int, b_off: int, y_off: int, nt0: int, ncols: int) -> None:
        """Output columns nt0 .. nt0+ncols of one batch, every M tile, K accumulated in L0C."""
        n_pad = round_up(ncols, 16)
        for mt0 in range(0, m_, m_t):
            rows = min(m_t, m_ - mt0)
            m_pad = round_up(rows, 16)
            for kt0 in range(0, kp, k_t):
                kt = min(k_t, kp - kt0)
                k1t = kt // k0
                kb.emit(tile.CopyNd2nzOp(aa, l1_a, src_offset=a_off + mt0 * k_ + kt0, rows=rows,
                                         cols=min(kt, k_ - kt0), src_row_stride=k_))
                for m1 in range(m_pad // 16):
                    kb.emit(tile.Load2dOp(l1_a, l0a, src_offset=m1 * 16 * k0, count=k1t, src_stride=m_pad * k0,
                                          dst_offset=m1 * k1t * 16 * k0, dst_stride=16 * k0))
                # B^T rows nt0.. in NZ = the Zn layout [k1][n1][16][k0]
                kb.emit(tile.CopyNd2nzOp(ba, l1_b, src_offset=b_off + nt0 * k_ + kt0, rows=ncols,
                                         cols=min(kt, k_ - kt0), src_row_stride=k_))
                kb.emit(tile.Load2dOp(l1_b, l0b, count=k1t * (n_pad // 16), src_stride=16 * k0,
                                      dst_stride=16 * k0))
                kb.emit(tile.MmadOp(l0a, l0b, l0c, m=m_pad, k=kt, n=n_pad, init=int(kt0 == 0)))
            kb.emit(tile.CopyL0cToUbOp(l0c, ub, n1=n_pad // 16, m=rows, src_m=m_pad))
            for j in range(n_pad // 16):
                kb.copy(ub, ya, src_offset=j * rows * 16, dst_offset=y_off + mt0 * n_ + nt0 + j * 16,
                        nburst=rows, burst=min(16, ncols - j * 16), src_stride=16, dst_stride=n_)

    def one(first: int, last: bool = False) -> None:
        a_off, b_off, y_off = int(a_idx[first]) * m_ * k_, int(b_idx[first]) * n_ * k_, first * m_ * n_
        for nt0 in range(0, n1 * 16, n_t):
            block(a_off, b_off, y_off, nt0, min(n_t, n_ - nt0))

    if by_columns:  # one batch: its output-column tiles over the cores (the last, partial one on its own)
        kb.for_tiles(n_tiles, lambda first, last=False: block(0, 0, 0, first * n_t,
                                                              n_ - (n_tiles - 1) * n_t if last else n_t),
                     partial_last=n_ % n_t != 0)
    elif kb.block_dim > 1:
        kb.for_tiles(nb, one)
    else:
        for i in range(nb):
            one(i)
    lw.launch(kb)
    return y

