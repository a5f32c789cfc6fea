"""Vector kernels: elementwise chains (with per-channel or scalar constants), BatchNormalization,
pooling, Softmax and LRN.

Elementwise kernels run over the storage of their operands in UB-sized chunks. Per-channel
constants of an NC1HWC0 tensor are stored as one 256-byte vector repeat per C0 block (the 16
channel values repeated), read with a repeat stride of 0 so that every repeat sees them.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np

from cann.dialects import tile
from cann.dialects.tile import Space
from cann.lowering.common import ND, NC1HWC0, DevTensor, Lowering, ub_chunk, unsupported
from cann.lowering.conv import conv2d
from cann.lowering.cube import bias_table

#: a step of an elementwise program: (op, dst, src0, src1, scalar); names: "x<i>" inputs,
#: "c<i>" per-channel tables, "y" the output, any other name a UB temporary
Step = tuple


def eltwise(lw: Lowering, hint: str, loc, inputs: list[DevTensor], steps: list[Step],
            tables: list[np.ndarray] = (), out_shape: tuple[int, ...] | None = None) -> DevTensor:
    """Run ``steps`` over same-shaped ``inputs``; ``tables`` are per-channel [C] constants."""
    shape = inputs[0].shape
    if any(t.shape != shape for t in inputs):
        raise unsupported(loc, f"elementwise operands of shapes {[list(t.shape) for t in inputs]}: "
                               "only equal shapes, per-channel and scalar constants are supported")
    fmt = NC1HWC0 if tables else inputs[0].fmt
    if tables and len(shape) != 4:
        raise unsupported(loc, f"per-channel constant on a {len(shape)}-D tensor")
    ins = [lw.as_format(t, fmt, lw.dtype, loc) for t in inputs]
    out = lw.gm_tensor(shape, fmt)
    kb = lw.kernel(hint, loc)
    srcs = [kb.arg(t) for t in ins]
    dst = kb.arg(out)
    lanes = lw.lanes
    tabs = [kb.arg(lw.constant(bias_table(v, shape[1], lanes, lw.dtype), "ND")) for v in tables]
    names = {v for s in steps for v in s[1:4] if isinstance(v, str)}
    temps = sorted(n for n in names if n[0] not in "xcy")  # intermediates: UB only, never GM
    nbuf = len(ins) + len(temps) + 1
    chunk = ub_chunk(lw, nbuf * lw.dtype.itemsize + 1, 256)
    if kb.tiling.get("chunk"):  # a pinned chunk (convert-graph-to-tile's tiling pin) may only shrink it
        chunk = min(chunk, max(256, kb.tiling["chunk"] // 256 * 256))
    if fmt == NC1HWC0:
        plane = out.storage_shape[2] * out.storage_shape[3] * 16
        nplanes = out.storage_shape[0] * out.storage_shape[1]
        chunk = min(chunk, plane)
    else:
        plane, nplanes = out.size, 1
        chunk = min(chunk, plane)
    kb.tiling["chunk"] = chunk
    bufs = {f"x{i}": kb.alloc(Space.UB, chunk, lw.dtype) for i in range(len(ins))}
    bufs["y"] = kb.alloc(Space.UB, chunk, lw.dtype)
    for t in temps:
        bufs[t] = kb.alloc(Space.UB, chunk, lw.dtype)
    for i in range(len(tabs)):
        bufs[f"c{i}"] = kb.alloc(Space.UB, lanes, lw.dtype)
    unit = 16 if fmt == NC1HWC0 else 1

    def chunk_ops(base: int, q: int) -> None:
        for i, src in enumerate(srcs):
            kb.copy(src, bufs[f"x{i}"], src_offset=base, burst=q)
        for op, d, s0, *more in steps:
            s1 = more[0] if more else None
            scalar = more[1] if len(more) > 1 else 0.0
            is_tab = isinstance(s1, str) and s1.startswith("c")
            kb.vec(op, bufs[d], bufs[s0], bufs[s1] if s1 else None, count=q // unit, unit=unit,
                   src1_stride=0 if is_tab else None, scalar=scalar)
        kb.copy(bufs["y"], dst, dst_offset=base, burst=q)

    if fmt == NC1HWC0:  # SPMD over the C1 planes of each image
        c1 = out.storage_shape[1]
        kb.partition(c1)
        for v in (*srcs, dst):
            kb.block_offset(v, plane)
        for tb in tabs:
            kb.block_offset(tb, lanes)
        def body(first: int, last: bool = False) -> None:
            for i, tb in enumerate(tabs):
                kb.copy(tb, bufs[f"c{i}"], src_offset=first * lanes, burst=lanes)
            starts = range(0, plane, chunk)  # the full chunks of a plane: one hardware loop
            kb.roll(len(starts), lambda i: chunk_ops(first * plane + starts[i], min(chunk, plane - starts[i])))

        with kb.loop(nplanes // c1, {v: c1 * plane for v in (*srcs, dst)}):  # one image's code, looped
            kb.for_tiles(c1, body)
    else:  # SPMD over equal chunks; the last, shorter one runs on its own core
        size = out.size
        n_chunks = math.ceil(size / chunk)
        kb.partition(n_chunks)
        for v in (*srcs, dst):
            kb.block_offset(v, chunk)

        def body(first: int, last: bool = False) -> None:
            chunk_ops(first * chunk, size - (n_chunks - 1) * chunk if last else chunk)

        kb.for_tiles(n_chunks, body, partial_last=size % chunk != 0)
    lw.launch(kb)
    return out


def batch_norm(lw: Lowering, x: DevTensor, scale, bias, mean, var, eps: float, loc) -> DevTensor:
    """Inference BatchNormalization: y = x * s + t with s = scale / sqrt(var + eps), t = bias - mean * s."""
    s = (scale / np.sqrt(var + eps)).astype(np.float32)
    t = (bias - mean * s).astype(np.float32)
    return eltwise(lw, "batch_norm", loc, [x], [("mul", "y", "x0", "c0"), ("add", "y", "y", "c1")], [s, t])


def _window_counts(size: int, out: int, k: int, s: int, d: int, p0: int, p1: int, include_pad: bool) -> np.ndarray:
    starts = np.arange(out) * s - p0
    taps = starts[:, None] + np.arange(k)[None, :] * d
    lo, hi = (-p0, size + p1) if include_pad else (0, size)
    return ((taps >= lo) & (taps < hi)).sum(axis=1)


def _largest(lo: int, hi: int, ok) -> int:
    """The largest ``v`` in ``[lo, hi]`` with ``ok(v)`` (``ok`` monotone, true at ``lo``)."""
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid - 1)
    return lo


def pool(lw: Lowering, x: DevTensor, kind: str, kernel, strides, pads, dilations, count_include_pad: bool,
         out_shape: tuple[int, ...], loc) -> DevTensor:
    """MaxPool / AveragePool over an NC1HWC0 tensor, SPMD over the C1 planes of each image.

    A tile is ``rows`` output rows by ``cols`` output columns; its window's input rows and columns
    (padding filled with the neutral value by ``vdup``) are loaded into UB by one multi-burst copy,
    then one vector op per window tap and output row combines them into the output tile. When even
    one output position's window is larger than UB, the window is split too, into blocks of
    ``krows`` x ``kcols`` taps that combine into the same output tile (the running max or sum stays
    in UB), so any size fits. Tiling preference: whole windows and rows, then fewer columns, then
    window blocks.

    Tiling ``loops`` = 1 (the loop form, whole windows): each core group's tiles are one loop nest
    whose code does not depend on the map (:func:`_pool_loops`); an AveragePool whose window is the
    whole map (no padding) is then the global average pool's kernel (:func:`global_avg_pool`).
    """
    x = lw.as_format(x, NC1HWC0, lw.dtype, loc)
    n_, c_, h_, w_ = x.shape
    _, _, ho_, wo_ = out_shape
    if kind == "avg" and tuple(kernel) == (h_, w_) and not any(pads) and tuple(dilations) == (1, 1) and \
            lw.tiling_overrides.get(lw.next_name("avg_pool"), {}).get("loops"):
        # a window over the whole map in the loop form: the global average pool's kernel (its rows
        # added in a hardware loop, a tree over one row), whose code does not grow with the map
        return global_avg_pool(lw, x, loc, hint="avg_pool")
    kh_, kw_ = kernel
    sh, sw = strides
    pt, pl, pb, pr = pads
    dh, dw = dilations
    c1 = x.c1
    isz = lw.dtype.itemsize
    cnt_h = _window_counts(h_, ho_, kh_, sh, dh, pt, pb, count_include_pad)
    cnt_w = _window_counts(w_, wo_, kw_, sw, dw, pl, pr, count_include_pad)
    uniform = kind == "max" or (cnt_h.min() == cnt_h.max() == kh_ and cnt_w.min() == cnt_w.max() == kw_)
    span = lambda n, s, k, d: (n - 1) * s + d * (k - 1) + 1  # input extent of n outputs of a k-tap window

    def need(r: int, wc: int, ki: int, kj: int) -> int:
        """UB bytes of a tile (each buffer rounded up to 256 bytes)."""
        rup = lambda e: -(-e * 16 * isz // 256) * 256
        return rup(span(r, sh, ki, dh) * span(wc, sw, kj, dw)) + rup(r * wc) * (1 if uniform else 2)

    ub = lw.usable("ub")
    fits = lambda r=1, wc=1, ki=1, kj=1: need(r, wc, ki, kj) <= ub
    tl = {"rows": 1, "cols": 1, "krows": 1, "kcols": 1}
    groups = max(1, lw.cores // min(c1, lw.cores))  # groups of cores the planes leave room for
    if fits(1, wo_, kh_, kw_):  # rows: as many as fit UB, but enough row tiles for every group
        tl.update(cols=wo_, krows=kh_, kcols=kw_,
                  rows=_largest(1, -(-ho_ // groups), lambda r: fits(r, wo_, kh_, kw_)))
    elif fits(1, 1, kh_, kw_):
        tl.update(krows=kh_, kcols=kw_, cols=_largest(1, wo_, lambda c: fits(1, c, kh_, kw_)))
    elif fits(1, 1, kh_, 1):
        tl.update(krows=kh_, kcols=_largest(1, kw_, lambda k: fits(1, 1, kh_, k)))
    else:
        tl.update(krows=_largest(1, kh_, lambda k: fits(1, 1, k, 1)))
    kb = lw.kernel(f"{kind}_pool", loc, tl)
    rows, cols, krows, kcols = (kb.tiling[k] for k in ("rows", "cols", "krows", "kcols"))
    y = lw.gm_tensor(out_shape, NC1HWC0)
    xa, ya = kb.arg(x), kb.arg(y)
    inb = kb.alloc(Space.UB, span(rows, sh, krows, dh) * span(cols, sw, kcols, dw) * 16, lw.dtype)
    outb = kb.alloc(Space.UB, rows * cols * 16, lw.dtype)
    fill = float(np.finfo(lw.dtype).min) if kind == "max" else 0.0
    op = "max" if kind == "max" else "add"
    if not uniform:
        div = (1.0 / (cnt_h[:, None] * cnt_w[None, :])).astype(np.float32)
        dtab = kb.arg(lw.constant(np.repeat(div[:, :, None], 16, axis=2).astype(lw.dtype), "ND"))
        divb = kb.alloc(Space.UB, rows * cols * 16, lw.dtype)
    n_blocks = kb.partition(c1)[0]  # SPMD over the C1 planes of each image ...
    row_tiles = len(range(0, ho_, rows))
    # ... and, when the planes leave cores idle, over groups of output rows (each group of n_blocks
    # cores its own code: the tiles at the top and bottom border differ)
    m_blocks = kb.tiling.get("m_blocks", min(row_tiles, max(1, lw.cores // n_blocks)))
    if not 1 <= m_blocks <= row_tiles or n_blocks * m_blocks > lw.cores:
        raise unsupported(loc, f"Pool: tiling m_blocks = {m_blocks}: 1 to {min(row_tiles, lw.cores // n_blocks)} "
                               f"(the row tiles, {n_blocks} cores each, at most {lw.cores} cores)")
    if m_blocks > 1:
        kb.block_dim = n_blocks * m_blocks
        kb.block_modulo = n_blocks  # block b: plane b % n_blocks of row group b // n_blocks
        kb.tiling.update(block_dim=kb.block_dim, m_blocks=m_blocks)
    kb.block_offset(xa, h_ * w_ * 16)
    kb.block_offset(ya, ho_ * wo_ * 16)

    def window_block(plane: int, ho0: int, r: int, wo0: int, wc: int, i0: int, ki: int, j0: int, kj: int) -> None:
        """Taps [i0, i0+ki) x [j0, j0+kj) of the r x wc output tile at (ho0, wo0) into ``outb``."""
        rin, win = span(r, sh, ki, dh), span(wc, sw, kj, dw)
        row0, col0 = ho0 * sh - pt + i0 * dh, wo0 * sw - pl + j0 * dw  # input position of inb[0, 0]
        r0, r1 = max(row0, 0), min(row0 + rin, h_)
        q0, q1 = max(col0, 0), min(col0 + win, w_)
        if not (r0 == row0 and q0 == col0 and r1 - r0 == rin and q1 - q0 == win):
            kb.vec("dup", inb, count=rin * win, unit=16, scalar=fill)
        if r1 > r0 and q1 > q0:
            kb.copy(xa, inb, src_offset=plane + (r0 * w_ + q0) * 16,
                    dst_offset=((r0 - row0) * win + q0 - col0) * 16, nburst=r1 - r0, burst=(q1 - q0) * 16,
                    src_stride=w_ * 16, dst_stride=win * 16)
        taps(r, wc, ki, kj, rin, win)

    def taps(r: int, wc: int, ki: int, kj: int, rin: int, win: int) -> None:
        """Combine the ``ki`` x ``kj`` taps loaded in ``inb`` (``rin`` x ``win`` positions) into ``outb``."""
        if r == 1 and wc == 1 and (ki == 1 or dh == 1) and (kj == 1 or dw == 1):
            # one output position, its taps dense in UB: a halving tree, then one op into the output
            _sum_positions(kb, inb, rin * win, op=op)
            kb.vec(op, outb, outb, inb, count=1, unit=16)
            return
        for i in range(ki):
            for j in range(kj):
                for ho in range(r):
                    kb.vec(op, outb, outb, inb, count=wc, unit=16, dst_offset=ho * wc * 16,
                           src0_offset=ho * wc * 16, src1_offset=((ho * sh + i * dh) * win + j * dw) * 16,
                           src1_stride=sw * 16)

    out_tiles = [(ho0, wo0) for ho0 in range(0, ho_, rows) for wo0 in range(0, wo_, cols)]

    def body(first: int, last: bool, n: int, group: range) -> None:
        """Plane ``first`` of image ``n``: the output tile rows ``group``."""
        c = first
        plane = (n * c1 + c) * h_ * w_ * 16

        def tile_code(ho0: int, wo0: int) -> None:
            r = min(rows, ho_ - ho0)
            wc = min(cols, wo_ - wo0)
            kb.vec("dup", outb, count=r * wc, unit=16, scalar=fill)
            # the kernel-window blocks: rows of blocks of one loop each, the blocks of a row in an inner
            # one (blocks reading only real input differ by where they read GM: hardware loops)
            i0s, j0s = range(0, kh_, krows), range(0, kw_, kcols)
            kb.roll(len(i0s), lambda a: kb.roll(len(j0s), lambda b: window_block(
                plane, ho0, r, wo0, wc, i0s[a], min(krows, kh_ - i0s[a]), j0s[b], min(kcols, kw_ - j0s[b]))))
            if kind == "avg":
                if uniform:
                    kb.vec("muls", outb, outb, count=r * wc, unit=16, scalar=1.0 / (kh_ * kw_))
                else:
                    kb.copy(dtab, divb, src_offset=(ho0 * wo_ + wo0) * 16, nburst=r, burst=wc * 16,
                            src_stride=wo_ * 16, dst_stride=wc * 16)
                    kb.vec("mul", outb, outb, divb, count=r * wc, unit=16)
            kb.copy(outb, ya, dst_offset=(((n * c1 + c) * ho_ + ho0) * wo_ + wo0) * 16, nburst=r,
                    burst=wc * 16, src_stride=wc * 16, dst_stride=wo_ * 16)

        ncols = len(range(0, wo_, cols))
        if loops:
            try:
                return _pool_loops(kb, geo, plane, group, (n * c1 + c) * ho_ * wo_ * 16, taps)
            except ValueError:  # border tiles that are not one body (padding beyond a border tile)
                pass  # the unrolled form below
        for_rows = [out_tiles[i:i + ncols] for i in range(0, len(out_tiles), ncols)][group.start:group.stop]
        # one iteration per row of tiles: the inner rows (no padding, full height) are one hardware loop
        # (and the tiles of a row, inner columns without padding, an inner one)
        kb.roll(len(for_rows), lambda i: kb.roll(len(for_rows[i]), lambda j: tile_code(*for_rows[i][j])))

    # the loop form (tiling ``loops`` = 1): whole tiles, the last moved back to end at the edge, the
    # padding filled by copies from a GM constant, each group's row tiles x column tiles one loop nest
    # whose code does not depend on the map (:func:`_pool_loops`)
    loops = bool(kb.tiling.get("loops")) and krows == kh_ and kcols == kw_
    geo = None
    if loops:
        r_, c_ = min(rows, ho_), min(cols, wo_)
        rin_, win_ = span(r_, sh, kh_, dh), span(c_, sw, kw_, dw)
        pad_rows = max(pt, span(ho_, sh, kh_, dh) - pt - h_, 1)
        fill_t = lw.constant(np.full(pad_rows * win_ * 16, fill, lw.dtype), "ND")
        geo = dict(r=r_, c=c_, rin=rin_, win=win_, ho=ho_, wo=wo_, h=h_, w=w_, sh=sh, sw=sw, pt=pt, pl=pl,
                   kh=kh_, kw=kw_, tiles=row_tiles if rows <= ho_ else 1, ncols=len(range(0, wo_, c_)),
                   xa=xa, ya=ya, inb=inb, outb=outb, fill=fill, fa=kb.arg(fill_t), kind=kind, uniform=uniform,
                   dtab=None if uniform else dtab, divb=None if uniform else divb)
    per_group = [row_tiles // m_blocks + (g < row_tiles % m_blocks) for g in range(m_blocks)]
    with kb.loop(n_, {xa: c1 * h_ * w_ * 16, ya: c1 * ho_ * wo_ * 16}):  # one image's code, looped
        for g in range(m_blocks):  # group g of cores: blocks g*n_blocks .. (g+1)*n_blocks - 1
            rows_g = range(sum(per_group[:g]), sum(per_group[:g + 1]))
            with kb.core_group(g * n_blocks, n_blocks) if m_blocks > 1 else contextlib.nullcontext():
                kb.for_tiles(c1, lambda first, last=False, rows_g=rows_g: body(first, last, 0, rows_g))
    lw.launch(kb)
    return y


def _pool_loops(kb, g: dict, plane: int, group: range, out_plane: int, taps) -> None:
    """The loop form of one core group's pooling tiles (see :func:`pool`): its output row tiles
    ``group`` x the column tiles as one nest of hardware loops (:meth:`KernelBuilder.tile_loops`).

    Every tile is whole (``r`` x ``c`` outputs); the last row / column tile of the map moves back
    to end at its edge (rewriting an overlap with the same values). The padding a border tile reads
    is filled by copies from the GM constant ``fa`` (the neutral value) before its input copy, one
    per padded side, each at most one row or column of the tile in the other tiles (which the
    input copy then overwrites): every tile runs the same instructions, the border ones with
    clamped sizes and offsets, and no vector op waits for a fill.

    Raises:
        ValueError: the tiles are not one body (padding reaching beyond the first or last tile).
    """
    r, c, rin, win = g["r"], g["c"], g["rin"], g["win"]
    tiles, ncols, h_, w_ = g["tiles"], g["ncols"], g["h"], g["w"]
    kb_copy = kb.copy

    def geometry(gt: int, u: int, lo, hi):
        ho0, wo0 = gt * r, u * c
        if hi[0] and gt == tiles - 1:
            ho0 = min(ho0, g["ho"] - r)
        if hi[1] and u == ncols - 1:
            wo0 = min(wo0, g["wo"] - c)
        row0, col0 = ho0 * g["sh"] - g["pt"], wo0 * g["sw"] - g["pl"]
        r0 = max(row0, 0) if lo[0] else row0
        r1 = min(row0 + rin, h_) if hi[0] else row0 + rin
        q0 = max(col0, 0) if lo[1] else col0
        q1 = min(col0 + win, w_) if hi[1] else col0 + win
        return ho0, wo0, row0, col0, r0, r1, q0, q1

    first = geometry(group.start, 0, (True, True), (True, True))
    last = geometry(group.stop - 1, ncols - 1, (True, True), (True, True))
    sides = (first[4] > first[2], last[2] + rin > last[5], first[6] > first[3], last[3] + win > last[7])
    fa, inb, outb = g["fa"], g["inb"], g["outb"]

    def tile(idx, lo, hi) -> None:
        ho0, wo0, row0, col0, r0, r1, q0, q1 = geometry(group.start + idx[0], idx[1], lo, hi)
        pt_, pb_, pl_, pr_ = r0 - row0, row0 + rin - r1, q0 - col0, col0 + win - q1
        whole = rin * win * 16  # (the strides of one burst: constant, not moved with the burst)
        if sides[0]:  # top rows (elsewhere: the first position, which the input copy overwrites)
            kb_copy(fa, inb, nburst=1, burst=pt_ * win * 16 if pt_ else 16, src_stride=whole, dst_stride=whole)
        if sides[1]:  # bottom rows (elsewhere: the first position of the last row)
            kb_copy(fa, inb, dst_offset=(rin - max(pb_, 1)) * win * 16, nburst=1,
                    burst=pb_ * win * 16 if pb_ else 16, src_stride=whole, dst_stride=whole)
        if sides[2]:  # left columns (elsewhere: one position)
            kb_copy(fa, inb, nburst=rin if pl_ else 1, burst=max(pl_, 1) * 16, src_stride=0, dst_stride=win * 16)
        if sides[3]:  # right columns
            kb_copy(fa, inb, dst_offset=(win - max(pr_, 1)) * 16, nburst=rin if pr_ else 1,
                    burst=max(pr_, 1) * 16, src_stride=0, dst_stride=win * 16)
        kb_copy(g["xa"], inb, src_offset=plane + (r0 * w_ + q0) * 16, dst_offset=(pt_ * win + pl_) * 16,
                nburst=r1 - r0, burst=(q1 - q0) * 16, src_stride=w_ * 16, dst_stride=win * 16)
        kb.vec("dup", outb, count=r * c, unit=16, scalar=g["fill"])
        taps(r, c, g["kh"], g["kw"], rin, win)
        if g["kind"] == "avg":
            if g["uniform"]:
                kb.vec("muls", outb, outb, count=r * c, unit=16, scalar=1.0 / (g["kh"] * g["kw"]))
            else:
                kb_copy(g["dtab"], g["divb"], src_offset=(ho0 * g["wo"] + wo0) * 16, nburst=r, burst=c * 16,
                        src_stride=g["wo"] * 16, dst_stride=c * 16)
                kb.vec("mul", outb, outb, g["divb"], count=r * c, unit=16)
        kb_copy(outb, g["ya"], dst_offset=out_plane + (ho0 * g["wo"] + wo0) * 16, nburst=r, burst=c * 16,
                src_stride=c * 16, dst_stride=g["wo"] * 16)

    if any(v <= 0 for v in (first[5] - first[4], first[7] - first[6], last[5] - last[4], last[7] - last[6])):
        raise ValueError("a border tile reads no input")
    kb.tile_loops((len(group), ncols), tile)


def _sum_positions(kb, buf, count: int, offset: int = 0, op: str = "add", width: int = 1) -> None:
    """Halve ``count`` positions of ``width`` x 16 lanes at ``offset`` of UB ``buf`` down to one by
    a tree of dense ``vadd``s (or ``op``: ``max``); the result lands at ``offset``."""
    n = count
    while n > 1:
        h = n // 2
        kb.vec(op, buf, buf, buf, count=h * width, unit=16, dst_offset=offset, src0_offset=offset,
               src1_offset=offset + (n - h) * width * 16)
        n -= h


def _gap_tiling(lw: Lowering, hw: int, total: int, parts: int = 1) -> tuple[int, int]:
    """(planes per group, positions per chunk) of a GlobalAveragePool kernel over ``total`` planes
    of ``hw`` positions: whole planes when one fits in UB with its float32 copy (``parts`` > 1:
    one plane, accumulators for ``total`` planes), else chunks (two storage buffers, one float32)."""
    isz = lw.dtype.itemsize
    cast = lw.dtype != np.float32
    budget = lw.usable("ub") - 5 * 256  # each buffer is rounded up to 256 bytes
    out_bytes = 16 * (4 + isz)  # per plane: float32 accumulator and the converted result
    fit = budget // (hw * 16 * (isz + 4 * cast) + out_bytes)
    if fit:
        return (1 if parts > 1 else max(1, min(fit, math.ceil(total / lw.cores)))), hw
    return 1, (budget - out_bytes) // (16 * (2 * isz + 4 * cast))


def global_avg_pool(lw: Lowering, x: DevTensor, loc, hint: str = "global_avg_pool") -> DevTensor:
    """GlobalAveragePool of an NC1HWC0 tensor: ``N*C1`` planes of ``[H*W][16]``.

    Sums are accumulated in float32 whatever the storage dtype (a float16 plane of 256x256 ones
    would overflow float16). Per chunk of positions: ``vconv`` to float32 (float16 storage), a
    halving tree of ``vadd``s down to one position, ``vadd`` into the plane's accumulator; at the
    end ``vmuls`` by ``1/(H*W)``, ``vconv`` back. A plane is read whole (groups of ``planes``
    planes by one copy) when it fits in UB, else in chunks of ``positions`` positions, alternating
    between two UB buffers in a hardware loop over chunk pairs; so any plane size fits.

    SPMD over the planes; with fewer planes than cores (at least twice as many parts of 128
    positions or more as planes) over the positions instead: core ``b`` sums part ``b``
    (``H*W / parts`` positions, the last part shorter) of every plane in a hardware loop over the
    planes, writing float32 partial sums
    ``[parts][planes][16]`` to GM; a one-core kernel (``global_avg_pool_sum``) adds the parts,
    scales and converts.

    Tiling ``loops`` = 1 with whole planes (the loop form): each plane is ``H*W / cols`` rows of
    ``cols`` positions (default W; a divisor of H*W), rows 1.. added into row 0 by one hardware loop,
    then the halving tree over that row: the code depends on ``cols``, not on the map. ``hint``
    names the kernel (``avg_pool`` for a whole-map AveragePool).
    """
    x = lw.as_format(x, NC1HWC0, lw.dtype, loc)
    n_, c_, h_, w_ = x.shape
    hw, total = h_ * w_, n_ * x.c1
    y = lw.gm_tensor((n_, c_, 1, 1), NC1HWC0)
    parts = min(lw.cores, hw // 128)  # parts of at least 128 positions (4 KiB in float16)
    if parts >= 2 * total:
        _gap_parts(lw, x, y, total, hw, parts, loc, hint)
    else:
        _gap_planes(lw, x, y, total, hw, loc, hint)
    return y


class _GapChunks:
    """UB buffers and code of :func:`global_avg_pool`'s sums: ``sum(base, n, slot)`` adds
    positions ``[base, base + n)`` of GM argument ``xa`` into accumulator slot ``slot`` of ``acc``."""

    def __init__(self, lw: Lowering, kb, xa, q: int, elems: int, chunked: bool, accs: int):
        f32 = np.dtype(np.float32)
        self.kb, self.xa, self.q, self.cast = kb, xa, q, lw.dtype != f32
        self.ins = [kb.alloc(Space.UB, elems, lw.dtype) for _ in range(1 + chunked)]
        self.wide = kb.alloc(Space.UB, elems, f32) if self.cast else None
        self.acc = kb.alloc(Space.UB, accs * 16, f32)

    def load(self, k: int, base: int, n: int):
        """Positions [base, base + n) into float32 UB (storage buffer k % 2); returns the buffer."""
        src = self.ins[k % len(self.ins)]
        self.kb.copy(self.xa, src, src_offset=base * 16, burst=n * 16)
        if self.cast:
            self.kb.vec("cast", self.wide, src, count=n * 16)
        return self.wide if self.cast else src

    def sum(self, base: int, n: int, slot: int = 0) -> None:
        kb, q = self.kb, self.q
        at = slot * 16
        kb.vec("dup", self.acc, count=1, unit=16, dst_offset=at, scalar=0.0)

        def chunk(k: int, b: int, m: int) -> None:
            buf = self.load(k, b, m)
            _sum_positions(kb, buf, m)
            kb.vec("add", self.acc, self.acc, buf, count=1, unit=16, dst_offset=at, src0_offset=at)

        pairs = n // q // 2
        if pairs:
            with kb.loop(pairs, {self.xa: 2 * q * 16}):
                chunk(0, base, q)
                chunk(1, base + q, q)
        for k, p0 in enumerate(range(2 * pairs * q, n, q)):
            chunk(k, base + p0, min(q, n - p0))


def _planes_fit(lw: Lowering, group: int, hw: int) -> bool:
    """Whether ``group`` whole planes of ``hw`` positions fit in UB with their float32 copy (the
    budget of :func:`_gap_tiling`)."""
    isz = lw.dtype.itemsize
    cast = lw.dtype != np.float32
    budget = lw.usable("ub") - 5 * 256
    return group * (hw * 16 * (isz + 4 * cast) + 16 * (4 + isz)) <= budget


def _gap_planes(lw: Lowering, x: DevTensor, y: DevTensor, total: int, hw: int, loc, hint: str) -> None:
    """GlobalAveragePool SPMD over groups of whole planes (see :func:`global_avg_pool`)."""
    w = x.shape[3]
    group, q = _gap_tiling(lw, hw, total)
    kb = lw.kernel(hint, loc, {"planes": group, "positions": q})
    group, q = kb.tiling["planes"], kb.tiling["positions"]
    # the loop form (tiling ``loops`` = 1) when the group's whole planes fit: the planes as rows of
    # ``cols`` positions (default the map's width; a divisor of H*W), so that the code depends on
    # ``cols``, not on the map
    rows_form = bool(kb.tiling.get("loops")) and _planes_fit(lw, group, hw)
    if rows_form:
        cols = math.gcd(hw, max(1, kb.tiling.get("cols", w)))
        kb.tiling["cols"] = cols
        q = hw
    xa, ya = kb.arg(x), kb.arg(y)
    chunked = q < hw
    bufs = _GapChunks(lw, kb, xa, q, (q if chunked else group * hw) * 16, chunked, group)
    acc = bufs.acc
    res = kb.alloc(Space.UB, group * 16, lw.dtype) if bufs.cast else acc
    items = math.ceil(total / group)
    kb.partition(items)
    kb.block_offset(xa, group * hw * 16)
    kb.block_offset(ya, group * 16)

    def body(first: int, last: bool = False) -> None:
        g = total - (items - 1) * group if last else group
        if rows_form:  # whole planes: each plane's rows added into its first row (a hardware loop), a tree over it
            buf = bufs.load(0, first * hw, g * hw)
            for j in range(g):
                kb.roll(hw // cols - 1, lambda r, j=j: kb.vec(
                    "add", buf, buf, buf, count=cols, unit=16, dst_offset=j * hw * 16, src0_offset=j * hw * 16,
                    src1_offset=(j * hw + (r + 1) * cols) * 16))
                _sum_positions(kb, buf, cols, j * hw * 16)
                kb.vec("mov", acc, buf, count=1, unit=16, dst_offset=j * 16, src0_offset=j * hw * 16)
        elif chunked:  # one plane in chunks
            for j in range(g):  # (more than one plane per group only when pinned so)
                bufs.sum((first + j) * hw, hw, j)
        else:  # whole planes: one copy, a tree per plane
            buf = bufs.load(0, first * hw, g * hw)
            for j in range(g):
                _sum_positions(kb, buf, hw, j * hw * 16)
                kb.vec("mov", acc, buf, count=1, unit=16, dst_offset=j * 16, src0_offset=j * hw * 16)
        kb.vec("muls", acc, acc, count=g, unit=16, scalar=1.0 / hw)
        if bufs.cast:
            kb.vec("cast", res, acc, count=g * 16)
        kb.copy(res, ya, dst_offset=first * 16, burst=g * 16)

    kb.for_tiles(items, body, partial_last=total % group != 0)
    lw.launch(kb)


def _gap_parts(lw: Lowering, x: DevTensor, y: DevTensor, total: int, hw: int, parts: int, loc, hint: str) -> None:
    """GlobalAveragePool SPMD over parts of the positions (see :func:`global_avg_pool`)."""
    f32 = np.dtype(np.float32)
    part = math.ceil(hw / parts)
    kb = lw.kernel(hint, loc, {"parts": math.ceil(hw / part)})
    parts = kb.partition(kb.tiling["parts"])[0]
    part = math.ceil(hw / parts)
    parts = math.ceil(hw / part)  # every part non-empty
    kb.tiling["parts"] = kb.tiling["block_dim"] = kb.block_dim = parts
    tail = hw - (parts - 1) * part
    _, q = _gap_tiling(lw, part, total, parts)
    kb.tiling["positions"] = q
    sums = lw.gm_tensor((parts * total * 16,), ND, f32)
    xa, sa = kb.arg(x), kb.arg(sums)
    bufs = _GapChunks(lw, kb, xa, q, min(q, part) * 16, q < part, 1)
    kb.block_offset(xa, part * 16)
    kb.block_offset(sa, total * 16)

    def planes(n: int) -> None:  # part of n positions of every plane, a hardware loop over planes
        with kb.loop(total, {xa: hw * 16, sa: 16}):
            bufs.sum(0, n)
            kb.copy(bufs.acc, sa, burst=16)

    if tail == part:
        planes(part)
    else:
        with kb.guard(0, parts - 1):
            planes(part)
        with kb.guard(parts - 1, parts):
            planes(tail)
    lw.launch(kb)
    fin = lw.kernel(hint + "_sum", loc, {"parts": parts})
    sa, ya = fin.arg(sums), fin.arg(y)
    buf = fin.alloc(Space.UB, parts * total * 16, f32)
    res = fin.alloc(Space.UB, total * 16, lw.dtype) if lw.dtype != f32 else buf
    fin.copy(sa, buf, burst=parts * total * 16)
    _sum_positions(fin, buf, parts, width=total)
    fin.vec("muls", buf, buf, count=total, unit=16, scalar=1.0 / hw)
    if res is not buf:
        fin.vec("cast", res, buf, count=total * 16)
    fin.copy(res, ya, burst=total * 16)
    lw.launch(fin)


def softmax(lw: Lowering, x: DevTensor, axis: int, loc, prologue: list[Step] | None = None,
            inputs: list[DevTensor] | None = None) -> DevTensor:
    """Softmax over the last axis of an ND tensor: max, subtract, exp, sum, divide, a row per core
    at a time (SPMD over rows). With a fused ``prologue`` (elementwise steps over same-shaped
    ``inputs`` named ``x<i>``, writing ``y``), the row is computed in UB first and never goes
    through GM.

    A row that fits in UB (``chunk`` = the row) is read once. A longer one (or, in float16, one of
    more elements than float16 can count, so that a sum of ``exp`` values at most 1 cannot
    overflow) is read in chunks of ``chunk`` elements in three passes, each a hardware loop over
    the whole chunks plus the tail: the running max, the running sum of ``exp(x - max)`` (float32
    partial sums), then ``exp(x - max) * (1 / sum)`` written out; the prologue runs again in each.
    """
    inputs = [lw.as_format(t, ND, lw.dtype, loc) for t in (inputs or [x])]
    x = inputs[0]
    if axis != len(x.shape) - 1:
        raise unsupported(loc, f"Softmax over axis {axis} of a {len(x.shape)}-D tensor (only the last axis)")
    if any(t.shape != x.shape for t in inputs):
        raise unsupported(loc, "fused Softmax inputs of different shapes")
    prologue = list(prologue or [])
    temps = sorted({v for st in prologue for v in st[1:4] if isinstance(v, str) and v[0] not in "xy"})
    cols = x.shape[-1]
    rows = math.prod(x.shape[:-1])
    lanes = lw.lanes
    isz = lw.dtype.itemsize
    f32 = np.dtype(np.float32)
    nbuf = 1 + (len(inputs) + len(temps) if prologue else 0)
    rup = lambda e, sz=isz: -(-e * sz // 256) * 256
    need = lambda q: nbuf * rup(q) + rup(2 * math.ceil(q / lanes) + 2 * lanes) + 4 * rup(lanes) + 2 * rup(64, 4)
    fit = _largest(1, cols, lambda q: need(q) <= lw.usable("ub"))
    kb = lw.kernel("softmax" if not prologue else "fused_softmax", loc,
                   {"chunk": min(fit, cols, int(np.finfo(lw.dtype).max))})
    chunk = kb.tiling["chunk"]
    y = lw.gm_tensor(x.shape, ND)
    srcs = [kb.arg(t) for t in inputs]
    ya = kb.arg(y)
    kb.partition(rows)  # SPMD over rows
    for a in (*srcs, ya):
        kb.block_offset(a, cols)
    xb = kb.alloc(Space.UB, chunk, lw.dtype)
    bufs = {"y": xb}
    if prologue:
        bufs.update({f"x{i}": kb.alloc(Space.UB, chunk, lw.dtype) for i in range(len(inputs))})
        bufs.update({t: kb.alloc(Space.UB, chunk, lw.dtype) for t in temps})
    bc = kb.alloc(Space.UB, lanes, lw.dtype)
    red = kb.alloc(Space.UB, lanes, lw.dtype)
    scratch = kb.alloc(Space.UB, 2 * math.ceil(chunk / lanes) + 2 * lanes, lw.dtype)

    def load(off: int, q: int) -> None:
        """Elements [off, off + q) of the row (after the prologue) into ``xb``."""
        if prologue:
            for i, a in enumerate(srcs):
                kb.copy(a, bufs[f"x{i}"], src_offset=off, burst=q)
            for op, d, s0, *more in prologue:
                s1 = more[0] if more else None
                kb.vec(op, bufs[d], bufs[s0], bufs[s1] if s1 else None, count=q,
                       scalar=more[1] if len(more) > 1 else 0.0)
        else:
            kb.copy(srcs[0], xb, src_offset=off, burst=q)

    def row(first: int, last: bool = False) -> None:
        load(first * cols, cols)
        kb.emit(tile.ReduceOp(red, xb, scratch, count=cols, op="max"))
        kb.emit(tile.BroadcastOp(bc, red, count=1))
        kb.vec("sub", xb, xb, bc, count=cols, src1_stride=0)
        kb.vec("exp", xb, xb, count=cols)
        kb.emit(tile.ReduceOp(red, xb, scratch, count=cols, op="add"))
        kb.emit(tile.BroadcastOp(bc, red, count=1))
        kb.vec("div", xb, xb, bc, count=cols, src1_stride=0)
        kb.copy(xb, ya, dst_offset=first * cols, burst=cols)

    if chunk == cols:
        kb.for_tiles(rows, row)
        lw.launch(kb)
        return y

    cast = lw.dtype != f32
    mx = kb.alloc(Space.UB, lanes, lw.dtype)
    acc = kb.alloc(Space.UB, 64, f32)  # float32 running sum (element 0)
    part = kb.alloc(Space.UB, 64, f32) if cast else red
    inv = kb.alloc(Space.UB, lanes, lw.dtype)
    full, tail = divmod(cols, chunk)

    def chunks(first: int, each) -> None:
        """``each(q)`` on every chunk of row ``first`` (loaded in ``xb``): the whole chunks as a
        hardware loop moving the GM arguments, then the tail."""
        with kb.loop(full, {a: chunk for a in (*srcs, ya)}):
            load(first * cols, chunk)
            each(first * cols, chunk)
        if tail:
            load(first * cols + full * chunk, tail)
            each(first * cols + full * chunk, tail)

    def running_max(off: int, q: int) -> None:
        kb.emit(tile.ReduceOp(red, xb, scratch, count=q, op="max"))
        kb.vec("max", mx, mx, red, count=1)

    def exp_shifted(q: int) -> None:
        kb.vec("sub", xb, xb, bc, count=q, src1_stride=0)
        kb.vec("exp", xb, xb, count=q)

    def running_sum(off: int, q: int) -> None:
        exp_shifted(q)
        kb.emit(tile.ReduceOp(red, xb, scratch, count=q, op="add"))
        if cast:
            kb.vec("cast", part, red, count=1)
        kb.vec("add", acc, acc, part, count=1)

    def normalize(off: int, q: int) -> None:
        exp_shifted(q)
        kb.vec("mul", xb, xb, inv, count=q, src1_stride=0)
        kb.copy(xb, ya, dst_offset=off, burst=q)

    def long_row(first: int, last: bool = False) -> None:
        kb.vec("dup", mx, count=1, scalar=float(np.finfo(lw.dtype).min))
        chunks(first, running_max)
        kb.emit(tile.BroadcastOp(bc, mx, count=1))
        kb.vec("dup", acc, count=1, scalar=0.0)
        chunks(first, running_sum)
        kb.vec("rec", acc, acc, count=1)
        if cast:
            kb.vec("cast", red, acc, count=1)
        kb.emit(tile.BroadcastOp(inv, red if cast else acc, count=1))
        chunks(first, normalize)

    kb.for_tiles(rows, long_row)
    lw.launch(kb)
    return y


def lrn(lw: Lowering, x: DevTensor, size: int, alpha: float, beta: float, bias: float, loc) -> DevTensor:
    """LRN across channels: the windowed sum of squares is a 1x1 convolution with a band matrix
    on the cube; the rest is y = x * exp(-beta * ln(bias + alpha / size * sumsq))."""
    n_, c_, h_, w_ = x.shape
    sq = eltwise(lw, "lrn_square", loc, [x], [("mul", "y", "x0", "x0")])
    lo, hi = (size - 1) // 2, math.ceil((size - 1) / 2)
    idx = np.arange(c_)
    band = ((idx[None, :] >= idx[:, None] - lo) & (idx[None, :] <= idx[:, None] + hi)).astype(np.float32)
    s = conv2d(lw, sq, band.reshape(c_, c_, 1, 1), None, (1, 1), (0, 0, 0, 0), (1, 1), 1, x.shape, loc,
               kernel_hint="lrn_sum")
    steps = [("muls", "t", "x0", None, alpha / size), ("adds", "t", "t", None, bias), ("ln", "t", "t", None),
             ("muls", "t", "t", None, -beta), ("exp", "t", "t", None), ("mul", "y", "x1", "t")]
    return eltwise(lw, "lrn", loc, [s, lw.as_format(x, NC1HWC0, lw.dtype, loc)], steps)
