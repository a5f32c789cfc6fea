"""NCHW <-> NC1HWC0 format conversions with whole-row bursts and 16x16 vector transposes.

In NCHW a channel's H*W positions are contiguous; in NC1HWC0 a position's 16 channels of a C1 block
are. Converting by DMA alone moves one element per burst. These kernels instead, per tile of ``P``
positions (a multiple of 16; the cores split the H*W positions of every image) and per chunk of C1
blocks:

* NCHW -> NC1HWC0: load the chunk's channel rows of the tile (one DMA: a burst of ``P`` elements per
  channel), cast in UB when the dtype changes, zero the padding channels' rows (``C`` up to ``C1*16``),
  transpose each 16 channels x 16 positions matrix (``vtranspose``, source rows ``P`` apart) into
  ``[C1][P][16]``, store one burst of ``P*16`` elements per block;
* NC1HWC0 -> NCHW: the reverse (load the blocks, transpose with destination rows ``P`` apart, cast,
  store a burst of ``P`` elements per real channel).

:func:`cann.lowering.data.trans_data` uses them for every 4-D conversion with more than one position.
"""

from __future__ import annotations

import math

from cann.dialects.tile import Space
from cann.lowering.common import DevTensor, Lowering, unsupported
from cann.lowering.shuffle import transpose_blocks

C0 = 16
MAT = C0 * C0
#: fewest positions a core's tile gets (fewer cores, longer bursts, for small maps)
MIN_POSITIONS = 64


def _plan(lw: Lowering, hw: int, c1: int, row_bytes: int) -> tuple[int, int]:
    """(positions per tile, C1 blocks per chunk): ``row_bytes`` UB bytes per channel row and position."""
    budget = lw.usable("ub") // row_bytes  # channel rows x positions that fit
    per_core = max(MIN_POSITIONS, math.ceil(hw / lw.cores))
    pos = min(math.ceil(per_core / C0) * C0, math.ceil(hw / C0) * C0)
    cb = c1
    if cb * C0 * pos > budget:
        pos = max(C0, budget // (cb * C0) // C0 * C0)
        if cb * C0 * pos > budget:
            cb = max(1, budget // (C0 * pos))
    pos = math.ceil(math.ceil(hw / math.ceil(hw / pos)) / C0) * C0  # even tiles
    return pos, cb


def _pinned(lw: Lowering, kb, plan: tuple[int, int], c1: int, row_bytes: int) -> tuple[int, int]:
    """The planned (positions, blocks), or the kernel's pinned ones (``positions``: a multiple of
    16; ``blocks``: 1 to C1; their channel rows x positions within UB).

    Raises:
        CannError: a pinned value outside those bounds.
    """
    pos, cb = kb.tiling.get("positions", plan[0]), kb.tiling.get("blocks", plan[1])
    if (pos, cb) != plan and (pos < C0 or pos % C0 or not 1 <= cb <= c1 or cb * C0 * pos * row_bytes > lw.usable("ub")):
        raise unsupported(kb.loc, f"trans_data: tiling positions = {pos}, blocks = {cb}: positions a positive "
                                  f"multiple of {C0}, blocks 1 to {c1}, {cb * C0 * pos * row_bytes} UB bytes of "
                                  f"{lw.usable('ub')}")
    return pos, cb


def _rounds(kb, hw: int, pos: int, tiles: int, body) -> None:
    """Emit the tiles of ``pos`` positions (SPMD: core ``b`` does tiles ``r*block_dim + b``) by
    ``body(p0, p, last)`` (first position, positions, the partial last tile), loop form or not.

    The loop form (tiling ``loops`` = 1) makes every tile whole and moves the last round back by
    the positions it would run past the map (its tiles rewrite an overlap with the same values):
    the rounds are one hardware loop (a loop of one too) whose code does not depend on the map.
    One partial round runs as two on half the cores (its tiles could not move back); a map of
    fewer positions than a tile keeps the partial tile's own section."""
    b_dim = kb.block_dim
    rounds = math.ceil(tiles / b_dim)
    back = rounds * b_dim * pos - hw  # positions the last round runs past the map
    if kb.tiling.get("loops") and rounds == 1 and back > 0 and tiles > 1:
        # one partial round cannot move back (its first tiles start the map): two rounds on half the cores
        b_dim = kb.block_dim = kb.tiling["block_dim"] = math.ceil(tiles / 2)
        rounds, back = 2, 2 * b_dim * pos - hw
    if kb.tiling.get("loops") and hw >= pos and back <= (rounds - 1) * b_dim * pos:
        def tile_(idx, lo, hi):
            p0 = idx[0] * b_dim * pos - (back if hi[0] and idx[0] == rounds - 1 else 0)
            body(p0, pos, False)

        try:
            kb.tile_loops((rounds,), tile_)
            return
        except ValueError:  # not one body: the tiles of their own below
            pass
    kb.for_tiles(tiles, lambda first, last=False: body(first * pos, hw - (tiles - 1) * pos if last else pos, last),
                 partial_last=hw % pos != 0)


def nchw_to_nc1hwc0(lw: Lowering, kb, t: DevTensor, out: DevTensor) -> None:
    """Emit into ``kb`` the conversion of ND [N, C, H, W] ``t`` to NC1HWC0 ``out`` (dtype may change)."""
    src, dst = kb.arg(t), kb.arg(out)
    n_, c_, h_, w_ = t.shape
    hw, c1 = h_ * w_, out.c1
    cast = t.dtype != out.dtype
    row_bytes = t.dtype.itemsize + out.dtype.itemsize * (2 if cast else 1)
    pos, cb = _pinned(lw, kb, _plan(lw, hw, c1, row_bytes), c1, row_bytes)
    tiles = math.ceil(hw / pos)
    kb.tiling.update(positions=pos, blocks=cb)
    rows = cb * C0
    a = kb.alloc(Space.UB, rows * pos, t.dtype)
    a2 = kb.alloc(Space.UB, rows * pos, out.dtype) if cast else a
    b = kb.alloc(Space.UB, rows * pos, out.dtype)
    kb.partition(tiles)
    kb.block_offset(src, pos)
    kb.block_offset(dst, pos * C0)

    def body(p0: int, p: int, last: bool) -> None:
        groups = math.ceil(p / C0)
        with kb.loop(n_, {src: c_ * hw, dst: c1 * hw * C0}):  # one image's code, looped
            for blk0 in range(0, c1, cb):
                nb = min(cb, c1 - blk0)
                ch = min(nb * C0, c_ - blk0 * C0)  # real channels of the chunk
                kb.copy(src, a, src_offset=blk0 * C0 * hw + p0, nburst=ch, burst=p, src_stride=hw, dst_stride=pos)
                if cast:
                    kb.vec("cast", a2, a, count=ch * pos)
                if ch < nb * C0:
                    kb.vec("dup", a2, count=(nb * C0 - ch) * pos, dst_offset=ch * pos, scalar=0.0)
                for k in range(nb):  # channels [k*16, k*16 + 16) x positions -> [k][P][16]
                    transpose_blocks(kb, b, a2, groups, dst_offset=k * pos * C0, src_offset=k * C0 * pos,
                               src_stride=C0, src_row=pos)
                kb.copy(b, dst, dst_offset=blk0 * hw * C0 + p0 * C0, nburst=nb, burst=p * C0, src_stride=pos * C0,
                        dst_stride=hw * C0)

    _rounds(kb, hw, pos, tiles, body)


def nc1hwc0_to_nchw(lw: Lowering, kb, t: DevTensor, out: DevTensor) -> None:
    """Emit into ``kb`` the conversion of NC1HWC0 ``t`` to ND [N, C, H, W] ``out`` (dtype may change)."""
    src, dst = kb.arg(t), kb.arg(out)
    n_, c_, h_, w_ = t.shape
    hw, c1 = h_ * w_, t.c1
    cast = t.dtype != out.dtype
    row_bytes = t.dtype.itemsize * 2 + (out.dtype.itemsize if cast else 0)
    pos, cb = _pinned(lw, kb, _plan(lw, hw, c1, row_bytes), c1, row_bytes)
    tiles = math.ceil(hw / pos)
    kb.tiling.update(positions=pos, blocks=cb)
    rows = cb * C0
    b = kb.alloc(Space.UB, rows * pos, t.dtype)
    a = kb.alloc(Space.UB, rows * pos, t.dtype)
    a2 = kb.alloc(Space.UB, rows * pos, out.dtype) if cast else a
    kb.partition(tiles)
    kb.block_offset(src, pos * C0)
    kb.block_offset(dst, pos)

    def body(p0: int, p: int, last: bool) -> None:
        groups = math.ceil(p / C0)
        with kb.loop(n_, {src: c1 * hw * C0, dst: c_ * hw}):  # one image's code, looped
            for blk0 in range(0, c1, cb):
                nb = min(cb, c1 - blk0)
                ch = min(nb * C0, c_ - blk0 * C0)
                kb.copy(src, b, src_offset=blk0 * hw * C0 + p0 * C0, nburst=nb, burst=p * C0, src_stride=hw * C0,
                        dst_stride=pos * C0)
                for k in range(nb):  # [k][P][16] -> channels [k*16, k*16 + 16) x positions
                    transpose_blocks(kb, a, b, groups, dst_offset=k * C0 * pos, src_offset=k * pos * C0,
                               dst_stride=C0, dst_row=pos)
                if cast:
                    kb.vec("cast", a2, a, count=ch * pos)
                kb.copy(a2, dst, dst_offset=blk0 * C0 * hw + p0, nburst=ch, burst=p, src_stride=pos, dst_stride=hw)

    _rounds(kb, hw, pos, tiles, body)
