"""Channel gathers in the NC1HWC0 layout on the vector unit: the channel shuffle
(``graph.channel_shuffle``) and channel concats at offsets that are not whole C0 blocks; and
(:func:`block_concat`) channel concats of whole blocks, DMA only, over the cores.

Output channel ``j`` of a gather is channel ``c`` of input ``i`` (``sources[j] = (i, c)``): for the
shuffle ``c = (j % g) * (C / g) + j // g`` (:func:`cann.dialects.graph_layout.shuffle_source`), for a
concat the inputs' channels one after another. In NC1HWC0 a channel is a lane of the C0 = 16 lanes of
each position, so a gather moves lanes between blocks, which DMA could only do one element per burst.
The kernel instead, per tile of ``P`` positions (a multiple of 16; the cores split the H*W positions of
every image):

1. loads each input's C1 blocks of the tile, one burst of ``P*16`` elements per block (one DMA per input);
2. transposes every 16 positions x 16 lanes matrix (``vtranspose``) into a position-group-major buffer
   ``T[q][row][16]``: row ``(q, base_i + c)`` holds channel ``c`` of input ``i`` at the 16 positions of
   group ``q``;
3. moves the rows to the output rows: a run of source channels ``c, c+1, ...`` of one input landing on
   output channels ``j, j+d, j+2d, ...`` is one strided ``vmov`` of 32-byte rows per group (the shuffle
   has ``g`` runs, a concat one per input); the output's padding channels (``C`` up to ``C1*16``) are
   zeroed (``vdup``);
4. transposes back and stores the output's C1 blocks, one burst each (one DMA).

Every DMA burst is a whole run of ``P*16`` elements; the lane moves are vector work.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.ir import Attribute

from cann.dialects import tile
from cann.dialects.graph_layout import shuffle_source
from cann.dialects.tile import Space
from cann.lowering.common import NC1HWC0, DevTensor, Lowering, unsupported

#: lanes per position block (C0), also the positions per transposed matrix
C0 = 16
MAT = C0 * C0


def transpose_blocks(kb, dst, src, count: int, *, dst_offset: int, src_offset: int, dst_stride: int = MAT,
                     src_stride: int = MAT, dst_row: int = C0, src_row: int = C0) -> None:
    """``count`` 16x16 transposes (``tile.transpose_blocks``; offsets, strides and row pitches in elements)."""
    if count > 0:
        kb.emit(tile.TransposeBlocksOp(dst, src, count=count, dst_offset=dst_offset, src_offset=src_offset,
                                       dst_stride=dst_stride, src_stride=src_stride, dst_row=dst_row,
                                       src_row=src_row))


def _runs(sources: Sequence[tuple[int, int]]) -> list[tuple[int, int, int, int, int]]:
    """``sources`` as runs ``(input, first channel, first output, length, output step)``: consecutive
    channels of one input landing on outputs ``j, j + d, j + 2d, ...`` (``d >= 1``)."""
    order = sorted(range(len(sources)), key=lambda j: sources[j])
    runs: list[list[int]] = []
    for j in order:
        i, c = sources[j]
        if runs:
            ri, rc, rj, n, d = runs[-1]
            step = j - (rj + (n - 1) * d)
            if ri == i and c == rc + n and step >= 1 and (n == 1 or step == d):
                runs[-1] = [ri, rc, rj, n + 1, step]
                continue
        runs.append([i, c, j, 1, 1])
    return [tuple(r) for r in runs]


def gather_fits(lw: Lowering, inputs: Sequence[DevTensor], c_out: int) -> bool:
    """Whether :func:`channel_gather`'s four UB tiles fit for 16 positions (else the caller goes through ND)."""
    rows = sum(math.ceil(t.shape[1] / C0) for t in inputs) * C0 + math.ceil(c_out / C0) * C0
    return 2 * rows * C0 * lw.dtype.itemsize <= lw.usable("ub")


def block_concat_fits(lw: Lowering, c_out: int) -> bool:
    """Whether :func:`block_concat`'s output tile fits for 16 positions."""
    return math.ceil(c_out / C0) * C0 * C0 * lw.dtype.itemsize <= lw.usable("ub")


def channel_gather(lw: Lowering, inputs: Sequence[DevTensor], sources: Sequence[tuple[int, int]], hint: str,
                   loc: Attribute | None) -> DevTensor:
    """The [N, len(sources), H, W] NC1HWC0 tensor whose channel ``j`` is channel ``sources[j][1]`` of
    ``inputs[sources[j][0]]`` (4-D tensors of one N, H, W, converted to NC1HWC0 in the precision's
    dtype); one kernel named ``<hint>_<i>``.

    Raises:
        CannError: inputs that are not 4-D or disagree in N, H, W (naming the node)."""
    if any(len(t.shape) != 4 for t in inputs) or len({(t.shape[0], *t.shape[2:]) for t in inputs}) != 1:
        raise unsupported(loc, f"a channel gather needs 4-D inputs of one N, H, W, got "
                               f"{', '.join(str(list(t.shape)) for t in inputs)}")
    ins = [lw.as_format(t, NC1HWC0, lw.dtype, loc) for t in inputs]
    n_, _, h_, w_ = ins[0].shape
    hw, c_out = h_ * w_, len(sources)
    out = lw.gm_tensor((n_, c_out, h_, w_), NC1HWC0, lw.dtype)
    c1o = out.c1
    dt = lw.dtype
    isz = dt.itemsize
    base = [0]
    for t in ins:
        base.append(base[-1] + t.c1 * C0)
    rows_in, rows_out = base[-1], c1o * C0
    kb = lw.kernel(hint, loc)
    srcs, dst = [kb.arg(t) for t in ins], kb.arg(out)
    # UB: the loaded and the transposed input tiles, the permuted and the output tile
    cap = max(C0, (lw.usable("ub") // (2 * (rows_in + rows_out) * isz)) // C0 * C0)
    pos = min(cap, max(C0, math.ceil(math.ceil(hw / lw.cores) / C0) * C0))
    pos = math.ceil(math.ceil(hw / math.ceil(hw / pos)) / C0) * C0  # even tiles
    tiles = math.ceil(hw / pos)
    kb.tiling["positions"] = pos
    a = kb.alloc(Space.UB, rows_in * pos, dt)
    tr = kb.alloc(Space.UB, rows_in * pos, dt)
    pm = kb.alloc(Space.UB, rows_out * pos, dt)
    b = kb.alloc(Space.UB, rows_out * pos, dt)
    kb.partition(tiles)
    for s in srcs:
        kb.block_offset(s, pos * C0)
    kb.block_offset(dst, pos * C0)
    runs = _runs(sources)

    def body(first: int, last: bool = False) -> None:
        p0 = first * pos
        p = hw - (tiles - 1) * pos if last else pos
        groups = math.ceil(p / C0)
        strides = {s: t.c1 * hw * C0 for s, t in zip(srcs, ins)}
        with kb.loop(n_, {**strides, dst: c1o * hw * C0}):  # one image's code, looped
            for s, t, r0 in zip(srcs, ins, base):
                kb.copy(s, a, src_offset=p0 * C0, dst_offset=r0 * pos, nburst=t.c1, burst=p * C0,
                        src_stride=hw * C0, dst_stride=pos * C0)
            for r0, t in zip(base, ins):  # [blk][q*16 + i][lane] -> T[q][r0 + blk*16 + lane][i]
                for blk in range(t.c1):
                    transpose_blocks(kb, tr, a, groups, dst_offset=(r0 + blk * C0) * C0,
                                     src_offset=(r0 + blk * C0) * pos, dst_stride=rows_in * C0)
            for q in range(groups):
                for i, c, j, cnt, d in runs:
                    kb.vec("mov", pm, tr, count=cnt, unit=C0, dst_offset=(q * rows_out + j) * C0,
                           src0_offset=(q * rows_in + base[i] + c) * C0, dst_stride=d * C0, src0_stride=C0)
                if rows_out > c_out:
                    kb.vec("dup", pm, count=(rows_out - c_out) * C0, dst_offset=(q * rows_out + c_out) * C0,
                           scalar=0.0)
            for blk in range(c1o):  # back: T[q][blk*16 + lane][i] -> [blk][q*16 + i][lane]
                transpose_blocks(kb, b, pm, groups, dst_offset=blk * pos * C0, src_offset=blk * MAT,
                                 src_stride=rows_out * C0)
            kb.copy(b, dst, dst_offset=p0 * C0, nburst=c1o, burst=p * C0, src_stride=pos * C0, dst_stride=hw * C0)

    kb.for_tiles(tiles, body, partial_last=hw % pos != 0)
    lw.launch(kb)
    return out


def block_concat(lw: Lowering, inputs: Sequence[DevTensor], loc: Attribute | None) -> DevTensor:
    """Channel concat of 4-D tensors that each start on a C0 block (every input but the last a whole
    number of blocks): per tile of positions, each input's C1 blocks load straight into their place in
    the output tile (one DMA per input, a burst of ``P*16`` elements per block) and the tile stores in
    one DMA; the positions are split over the cores as in :func:`channel_gather` (kernel ``concat_<i>``).
    The last input's padding lanes are the output's."""
    ins = [lw.as_format(t, NC1HWC0, lw.dtype, loc) for t in inputs]
    n_, _, h_, w_ = ins[0].shape
    hw, c_out = h_ * w_, sum(t.shape[1] for t in ins)
    out = lw.gm_tensor((n_, c_out, h_, w_), NC1HWC0, lw.dtype)
    c1o, isz = out.c1, lw.dtype.itemsize
    kb = lw.kernel("concat", loc)
    srcs, dst = [kb.arg(t) for t in ins], kb.arg(out)
    cap = max(C0, (lw.usable("ub") // (c1o * C0 * isz)) // C0 * C0)
    pos = min(cap, max(4 * C0, math.ceil(math.ceil(hw / lw.cores) / C0) * C0))
    pos = math.ceil(math.ceil(hw / math.ceil(hw / pos)) / C0) * C0
    tiles = math.ceil(hw / pos)
    kb.tiling["positions"] = pos
    b = kb.alloc(Space.UB, c1o * C0 * pos, lw.dtype)
    kb.partition(tiles)
    for s in srcs:
        kb.block_offset(s, pos * C0)
    kb.block_offset(dst, pos * C0)

    def body(first: int, last: bool = False) -> None:
        p0 = first * pos
        p = hw - (tiles - 1) * pos if last else pos
        strides = {s: t.c1 * hw * C0 for s, t in zip(srcs, ins)}
        with kb.loop(n_, {**strides, dst: c1o * hw * C0}):
            blk = 0
            for s, t in zip(srcs, ins):
                kb.copy(s, b, src_offset=p0 * C0, dst_offset=blk * pos * C0, nburst=t.c1, burst=p * C0,
                        src_stride=hw * C0, dst_stride=pos * C0)
                blk += t.c1
            kb.copy(b, dst, dst_offset=p0 * C0, nburst=c1o, burst=p * C0, src_stride=pos * C0, dst_stride=hw * C0)

    kb.for_tiles(tiles, body, partial_last=hw % pos != 0)
    lw.launch(kb)
    return out


def channel_shuffle(lw: Lowering, t: DevTensor, group: int, loc: Attribute | None) -> DevTensor | None:
    """``graph.channel_shuffle`` of a 4-D ``t`` ([N, C, H, W], C a multiple of ``group``): the NC1HWC0
    result of :func:`channel_gather` (kernel ``channel_shuffle_<i>``); None when its tiles do not fit UB."""
    c = t.shape[1]
    if not gather_fits(lw, [t], c):
        return None
    return channel_gather(lw, [t], [(0, shuffle_source(c, group, j)) for j in range(c)], "channel_shuffle", loc)
