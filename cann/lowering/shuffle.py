"""Channel shuffle (``graph.channel_shuffle``) in the NC1HWC0 layout, on the vector unit.

Output channel ``j`` is input channel ``s(j) = (j % g) * (C / g) + j // g``
(:func:`cann.dialects.graph_layout.shuffle_source`). In NC1HWC0 a channel is a lane of the C0 = 16
lanes of each position, so the shuffle moves lanes between positions' blocks; DMA would move single
elements. The kernel instead, per tile of ``P`` positions (a multiple of 16, the cores splitting the
H*W positions of every image):

1. loads the tile's C1 blocks, one burst of ``P*16`` elements each (one DMA);
2. transposes every 16 positions x 16 lanes matrix (``vtranspose``) into a position-group-major
   buffer ``T[q][c][16]``: row ``(q, c)`` holds channel ``c`` at the 16 positions of group ``q``;
3. permutes the rows: for each residue ``r < g`` the output rows ``j = r, r + g, ...`` take the input
   rows ``r*C/g, r*C/g + 1, ...``: one strided ``vmov`` of ``C/g`` 32-byte rows per (group, residue);
   the output's padding channels (``C`` up to ``C1*16``) are zeroed (``vdup``);
4. transposes back and stores the output C1 blocks, one burst each.

Every DMA burst is a whole run of ``P*16`` elements; the lane moves are vector work.
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.ir import Attribute

from cann.dialects import tile
from cann.dialects.tile import Space
from cann.lowering import data
from cann.lowering.common import NC1HWC0, DevTensor, Lowering

#: lanes per position block (C0) and positions per transposed matrix
C0 = 16


def channel_shuffle(lw: Lowering, t: DevTensor, group: int, loc: Attribute | None) -> DevTensor:
    """``graph.channel_shuffle`` of ``t`` ([N, C, H, W], C a multiple of ``group``) in NC1HWC0, in the
    precision's dtype; other ranks go through an ND reshape, transpose and reshape.

    Returns the shuffled tensor (NC1HWC0 for 4-D input)."""
    shape = t.shape
    if len(shape) != 4:
        n, c = shape[0], shape[1]
        split = data.reshape(lw, t, (n, group, c // group, *shape[2:]), loc)
        moved = data.transpose(lw, split, (0, 2, 1, *range(3, len(shape) + 1)), loc)
        return data.reshape(lw, moved, shape, loc)
    t = lw.as_format(t, NC1HWC0, lw.dtype, loc)
    n_, c_, h_, w_ = shape
    hw, c1 = h_ * w_, t.c1
    per = c_ // group
    out = lw.gm_tensor(shape, NC1HWC0, lw.dtype)
    dt = lw.dtype
    isz = dt.itemsize
    kb = lw.kernel("channel_shuffle", loc)
    src, dst = kb.arg(t), kb.arg(out)
    # four UB buffers of c1 * pos * 16 elements: the load, the transposed, the permuted and the output tile
    cap = max(C0, (lw.usable("ub") // (4 * c1 * C0 * isz)) // C0 * C0)
    per_core = math.ceil(hw / lw.cores)
    pos = min(cap, max(C0, math.ceil(per_core / C0) * C0))
    pos = math.ceil(hw / math.ceil(hw / pos))  # even tiles
    pos = math.ceil(pos / C0) * C0
    tiles = math.ceil(hw / pos)
    kb.tiling["positions"] = pos
    size = c1 * pos * C0
    a = kb.alloc(Space.UB, size, dt)
    tr = kb.alloc(Space.UB, size, dt)
    pm = kb.alloc(Space.UB, size, dt)
    b = kb.alloc(Space.UB, size, dt)
    kb.partition(tiles)
    kb.block_offset(src, pos * C0)
    kb.block_offset(dst, pos * C0)
    pad = c1 * C0 - c_

    def body(first: int, last: bool = False) -> None:
        p0 = first * pos
        p = hw - (tiles - 1) * pos if last else pos
        groups = math.ceil(p / C0)
        with kb.loop(n_, {src: c1 * hw * C0, dst: c1 * hw * C0}):  # one image's code, looped
            kb.copy(src, a, src_offset=p0 * C0, nburst=c1, burst=p * C0, src_stride=hw * C0, dst_stride=pos * C0)
            for blk in range(c1):  # [blk][q*16 + i][lane] -> T[q][blk*16 + lane][i]
                kb.emit(tile.TransposeBlocksOp(tr, a, count=groups, dst_offset=blk * C0 * C0,
                                               src_offset=blk * pos * C0, dst_stride=c1 * C0 * C0,
                                               src_stride=C0 * C0))
            for q in range(groups):
                row0 = q * c1 * C0 * C0
                for r in range(group):
                    kb.vec("mov", pm, tr, count=per, unit=C0, dst_offset=row0 + r * C0, src0_offset=row0 + r * per * C0,
                           dst_stride=group * C0, src0_stride=C0)
                if pad:
                    kb.vec("dup", pm, count=pad * C0, dst_offset=row0 + c_ * C0, scalar=0.0)
            for blk in range(c1):  # back: T[q][blk*16 + lane][i] -> [blk][q*16 + i][lane]
                kb.emit(tile.TransposeBlocksOp(b, pm, count=groups, dst_offset=blk * pos * C0,
                                               src_offset=blk * C0 * C0, dst_stride=C0 * C0,
                                               src_stride=c1 * C0 * C0))
            kb.copy(b, dst, dst_offset=p0 * C0, nburst=c1, burst=p * C0, src_stride=pos * C0, dst_stride=hw * C0)

    kb.for_tiles(tiles, body, partial_last=hw % pos != 0)
    lw.launch(kb)
    return out
