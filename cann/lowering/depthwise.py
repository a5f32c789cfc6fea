"""Depthwise convolution on the vector unit: only the real multiply-accumulates.

A depthwise Conv (``group == Cin == Cout``, weight ``[C, 1, KH, KW]``) over an NC1HWC0 tensor is,
for each C1 block of each image (a *plane* ``[H][W][16]``: each C0 lane one channel), a sum over
the kernel taps of shifted input windows times a per-channel weight vector. The cube would multiply
a block-diagonal 16x16 fractal per tap (16x the MACs, 258x with the C1 blocks of the densified
weight); here each tap is one vector instruction, ``vmul`` (the first) or ``vmla`` into the accumulator, so
the executed element multiplications are ``N * C1*16 * Ho * Wq * KH * KW`` with ``Wq`` the output
row pitch (``Wo`` plus at most ``ceil((KW-1)*dw / sw)`` columns): real MACs times at most
``16*C1 / C`` (channel padding) times ``Wq / Wo``.

Layout in UB (one band of ``rows`` output rows of one plane): the input rows the band reads, split
into ``sh`` *phase planes* (phase ``q`` holds padded input rows ``r0*sh + q + sh*t``), each row
``Wp = sw * Wq`` columns wide with the left / right padding as zero columns. Output position
``p = t*Wq + c`` of tap ``(i, j)`` then reads phase ``(i*dh) % sh`` at flat column
``sw*p + ((i*dh) // sh) * Wp + j*dw``: one vector instruction (strided by ``sw`` 32-byte blocks)
per tap covers the whole band; the ``Wq - Wo`` extra columns per row are computed and not stored.

Work split: the ``N * C1`` planes over groups of cores (``n_blocks``: each core one plane per
round, GM pointers moved by one plane), and the output rows in bands over ``m_blocks`` groups of
cores (``block_offset_mod``), so that small maps with few channels still use every core. Bias and
the fused elementwise epilogue (:class:`cann.lowering.cube.Epilogue`: ReLU, Clip, a residual Add,
...) run on the band in UB before its single write to GM.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np

from cann.dialects.tile import Space
from cann.lowering.common import NC1HWC0, DevTensor, Lowering, narrow, plane_row_split, unsupported
from cann.lowering.cube import Epilogue, bias_table


def is_depthwise(w_shape: tuple[int, ...], cin: int, group: int) -> bool:
    """Whether a Conv with weight ``w_shape`` [Cout, Cin/group, KH, KW] is depthwise (one input and
    one output channel per group)."""
    return group > 1 and group == cin and w_shape[0] == cin and w_shape[1] == 1


def _tap_table(w: np.ndarray, n_: int, lanes: int, dtype: np.dtype) -> np.ndarray:
    """Weights ``[C, 1, KH, KW]`` as rows of ``lanes`` elements ``[N][C1][KH*KW][lanes]``: row
    ``(c1, tap)`` repeats the 16 channel weights of the tap (one broadcast vector repeat); the same
    for each image, so that every plane's table is one plane stride further on."""
    c, _, kh, kw = w.shape
    c1 = math.ceil(c / 16)
    wp = np.zeros((c1 * 16, kh * kw), np.float32)
    wp[:c] = w.reshape(c, kh * kw)
    t = wp.reshape(c1, 16, kh * kw).transpose(0, 2, 1)  # [c1][tap][16]
    t = np.tile(t[:, :, None, :], (1, 1, lanes // 16, 1)).reshape(c1, kh * kw, lanes)
    return narrow(np.ascontiguousarray(np.tile(t[None], (n_, 1, 1, 1))), dtype)


def _plane_table(v: np.ndarray | None, c: int, n_: int, lanes: int, dtype: np.dtype) -> np.ndarray:
    """A per-channel vector as one row of ``lanes`` per C1 block, repeated for each image."""
    return np.ascontiguousarray(np.tile(bias_table(v, c, lanes, dtype), (n_, 1)))


def _bands(ho: int, rows: int, clean) -> list[tuple[int, int]]:
    """Output row bands ``(r0, r1)`` of at most ``rows`` rows: the rows that read top padding in one
    short band, then bands of ``rows`` while ``clean(r0, rows)`` (the band reads no padding: every
    such band is the same code, one hardware loop), then the rest in bands of ``rows``. A border
    band's own code runs outside the loop, unoverlapped: the short one keeps that cheap."""
    top = 0
    while top < ho and not clean(top, 1):
        top += 1
        if top == rows or top == ho:  # padding all the way: uniform bands
            return [(r0, min(ho, r0 + rows)) for r0 in range(0, ho, rows)]
    out = [(0, top)] if top else []
    r0 = top
    while r0 + rows <= ho and clean(r0, rows):
        out.append((r0, r0 + rows))
        r0 += rows
    out += [(r, min(ho, r + rows)) for r in range(r0, ho, rows)]
    return out


def depthwise_conv2d(lw: Lowering, x: DevTensor, w: np.ndarray, b: np.ndarray | None, strides, pads, dilations,
                     out_shape: tuple[int, ...], loc, kernel_hint: str = "dwconv2d",
                     epilogue: Epilogue | None = None, pins: dict[str, int] | None = None) -> DevTensor | None:
    """Depthwise 2-D convolution of an NC1HWC0 tensor ``x`` [N, C, H, W] by constant weights ``w``
    [C, 1, KH, KW] and bias ``b`` [C] (or None), then the fused ``epilogue``: an NC1HWC0 tensor
    ``out_shape`` [N, C, Ho, Wo] in the device dtype. Any kernel size, stride, pad and dilation.

    Tiling (``tile.tiling``, pinnable per kernel): ``rows`` output rows per band, ``n_blocks`` cores
    over the planes, ``m_blocks`` groups of cores over the bands.

    Returns None when one output row's band does not fit UB (a map thousands of columns wide): the
    caller runs the cube convolution, which tiles columns.

    Raises:
        CannError: that, with a fused epilogue (the fused group then falls back to one kernel per
            op, and the Conv alone to the cube), or a pinned tiling beyond the cores.
    """
    x = lw.as_format(x, NC1HWC0, lw.dtype, loc)
    epi = epilogue or Epilogue()
    residuals = [lw.as_format(r, NC1HWC0, lw.dtype, loc) for r in epi.residuals]
    n_, c_, h_, w_ = x.shape
    _, _, ho_, wo_ = out_shape
    kh_, kw_ = w.shape[2:]
    sh, sw = strides
    pt, pl = pads[0], pads[1]
    dh, dw = dilations
    dt, isz, lanes = lw.dtype, lw.dtype.itemsize, lw.lanes
    c1 = x.c1
    planes = n_ * c1
    taps = [(i, j) for i in range(kh_) for j in range(kw_)]
    # output row pitch Wq and input row pitch Wp = sw * Wq: every column an output reads is in its row
    wq = max(math.ceil((w_ + pl) / sw), math.ceil(((wo_ - 1) * sw + (kw_ - 1) * dw + 1) / sw))
    wp = sw * wq
    halo = ((kh_ - 1) * dh) // sh  # extra rows per phase plane beyond the band's rows

    upr = lw.lanes // 16  # output positions per vector repeat

    def span(rows: int) -> tuple[int, int]:
        """(output positions computed, rows of each phase plane) of a band of ``rows`` output rows:
        whole repeats (no masked tail instruction), and every input element they read (the unstored
        columns of the last rows read into rows past the band's window)."""
        count = -(-rows * wq // upr) * upr
        reach = sw * (count - 1) + halo * wp + (kw_ - 1) * dw + 1
        return count, max(rows + halo + 1, -(-reach // wp))

    def in_rows(rows: int) -> int:  # rows of one phase plane
        return span(rows)[1]

    temps = epi.temps
    out_tiles = 1 + len(residuals) + len(temps)  # acc, residuals, temporaries

    def ub_bytes(rows: int) -> int:
        tables = (len(taps) + 1 + len(epi.tables)) * lanes
        return (sh * in_rows(rows) * wp * 16 + out_tiles * span(rows)[0] * 16 + tables) * isz

    budget = lw.usable("ub")
    fit = 0
    for rows in range(1, ho_ + 1):
        if ub_bytes(rows) > budget:
            break
        fit = rows
    if fit == 0:  # rows too wide for UB: the cube's tiled convolution (a fused group first falls back)
        if epi.steps or epi.residuals or epi.tables:
            raise unsupported(loc, f"depthwise Conv: one output row needs {ub_bytes(1)} bytes of UB "
                                   f"({out_tiles} row tiles of {wq} columns), {budget} available")
        return None

    cores = lw.cores
    kb = lw.kernel(kernel_hint, loc, {}, pins)
    pins = dict(kb.tiling)
    n_blocks, m_cap = plane_row_split(loc, "depthwise Conv", pins, planes, cores)
    n_ops = len(taps) + len(epi.steps) + 5  # taps, bias, epilogue, padding

    def cost(r: int) -> float:
        """Estimated cycles of the busiest core for bands of ``r`` rows (the shape of
        ``cann/sim/cost.py``): the first band's load, then per band the longer of the next load and
        the vector work, the last store; plus one band's load and store where a border band, code
        of its own outside the hardware loop, runs unoverlapped. Used only to choose ``rows``."""
        nb = math.ceil(ho_ / r)
        groups = min(m_cap, nb)
        per_group = math.ceil(nb / groups) * math.ceil(planes / n_blocks)
        lat, bw = lw.soc.latency, lw.soc.bandwidth
        rate = min(bw.gm_to_ub, bw.gm_total / max(1, groups * n_blocks))
        load = sh * lat.mte_startup + sh * (r + halo + 1) * w_ * 16 * isz / rate
        store = lat.mte_startup + r * wo_ * 16 * isz / min(bw.ub_to_gm, bw.gm_total / max(1, groups * n_blocks))
        vec = n_ops * (lat.vector_startup + span(r)[0] // upr)
        border = (pt > 0 or ho_ * sh + halo > h_ + pt) and nb > 1
        return load + per_group * max(vec, load) + store + (load + store if border else 0)

    if "rows" in pins:
        rows = max(1, min(pins["rows"], fit, ho_))
    else:  # the cheapest band height; balanced: the same band count with rows as even as possible
        rows = min(range(1, min(fit, ho_) + 1), key=lambda r: (cost(r), r))
        rows = math.ceil(ho_ / math.ceil(ho_ / rows))
    bands = _bands(ho_, rows, lambda r0, nr: all(0 <= r0 * sh + q + sh * t - pt < h_ for q in range(sh)
                                                 for t in range(span(nr)[1])))
    m_blocks = min(m_cap, len(bands))
    kb.block_dim = n_blocks * m_blocks
    kb.tiling.update(rows=rows, block_dim=kb.block_dim, n_blocks=n_blocks, m_blocks=m_blocks)
    if m_blocks > 1:
        kb.block_modulo = n_blocks

    x_plane, y_plane = h_ * w_ * 16, ho_ * wo_ * 16
    wt = lw.constant(_tap_table(w, n_, lanes, dt), "ND")
    bt = lw.constant(_plane_table(b, c_, n_, lanes, dt), "ND") if b is not None and np.any(b) else None
    y = lw.gm_tensor(tuple(out_shape), NC1HWC0)
    xa, wa, ya = kb.arg(x), kb.arg(wt), kb.arg(y)
    kb.block_offset(xa, x_plane)
    kb.block_offset(wa, len(taps) * lanes)
    kb.block_offset(ya, y_plane)
    ba = None
    if bt is not None:
        ba = kb.arg(bt)
        kb.block_offset(ba, lanes)
    table_args = []
    for v in epi.tables:
        a = kb.arg(lw.constant(_plane_table(v, v.size, n_, lanes, dt), "ND"))
        kb.block_offset(a, lanes)
        table_args.append(a)
    res_args = []
    for r in residuals:
        a = kb.arg(r, fresh=True)
        kb.block_offset(a, y_plane)
        res_args.append(a)

    plane_rows = in_rows(rows)
    ub_in = kb.alloc(Space.UB, sh * plane_rows * wp * 16, dt)
    ub_w = kb.alloc(Space.UB, len(taps) * lanes, dt)
    ub_b = kb.alloc(Space.UB, lanes, dt) if ba is not None else None
    tile_elems = span(rows)[0] * 16
    bufs = {"acc": kb.alloc(Space.UB, tile_elems, dt)}
    for i in range(len(res_args)):
        bufs[f"r{i}"] = kb.alloc(Space.UB, tile_elems, dt)
    for i in range(len(table_args)):
        bufs[f"c{i}"] = kb.alloc(Space.UB, lanes, dt)
    for t in temps:
        bufs[t] = kb.alloc(Space.UB, tile_elems, dt)
    acc = bufs["acc"]
    plane_elems = plane_rows * wp * 16

    item = [0]  # the for_tiles item (plane) of the round being emitted: core 0's; the block's own by its offsets

    def band_code(r0: int, r1: int) -> None:
        """Output rows r0..r1 of the core's plane: load, taps, bias, epilogue, store."""
        nr = r1 - r0
        xo, yo = item[0] * x_plane, item[0] * y_plane
        count, t_rows = span(nr)
        zeros = []  # (offset, count, unit, stride) of padding to write after the loads
        for q in range(sh):
            base = q * plane_elems
            # padded input row of phase q, step t: r0*sh + q + sh*t; real row = that - pt. Every
            # element the taps read is written here (zeros for padding): no stale data, and each
            # band's buffer is its own generation (multi-buffered by tile-multi-buffer)
            real = [t for t in range(t_rows) if 0 <= r0 * sh + q + sh * t - pt < h_]
            if not real:
                zeros.append((base, t_rows * wp * 16, 1, 1))
                continue
            ta, tb = real[0], real[-1] + 1
            kb.copy(xa, ub_in, src_offset=xo + (r0 * sh + q + sh * ta - pt) * w_ * 16, dst_offset=base + (ta * wp + pl) * 16,
                    nburst=tb - ta, burst=w_ * 16, src_stride=sh * w_ * 16, dst_stride=wp * 16)
            if ta > 0:
                zeros.append((base, ta * wp * 16, 1, 1))
            if tb < t_rows:
                zeros.append((base + tb * wp * 16, (t_rows - tb) * wp * 16, 1, 1))
            if pl:
                zeros.append((base + ta * wp * 16, tb - ta, pl * 16, wp * 16))
            if wp > pl + w_:
                zeros.append((base + (ta * wp + pl + w_) * 16, tb - ta, (wp - pl - w_) * 16, wp * 16))
        # the zeros after every load: the vector unit's writes next to the band's DMA (same buffer)
        # must not hold the next band's load back behind this band's taps
        for off, n, unit, stride in zeros:
            kb.vec("dup", ub_in, count=n, unit=unit, dst_offset=off, dst_stride=stride, scalar=0.0)
        for k, (i, j) in enumerate(taps):
            q, dq = (i * dh) % sh, (i * dh) // sh
            src = q * plane_elems + (dq * wp + j * dw) * 16
            kb.vec("mla" if k else "mul", acc, ub_in, ub_w, count=count, unit=16, src0_offset=src,
                   src0_stride=sw * 16, src1_offset=k * lanes, src1_stride=0)
        if ub_b is not None:
            kb.vec("add", acc, acc, ub_b, count=count, unit=16, src1_stride=0)
        for i, ra in enumerate(res_args):
            kb.copy(ra, bufs[f"r{i}"], src_offset=yo + r0 * wo_ * 16, nburst=nr, burst=wo_ * 16, src_stride=wo_ * 16,
                    dst_stride=wq * 16)
        for op, d, s0, *more in epi.steps:
            s1 = more[0] if more else None
            scalar = more[1] if len(more) > 1 else 0.0
            kw = dict(src1_stride=0 if s1.startswith("c") else None) if s1 is not None else {}
            kb.vec(op, bufs[d], bufs[s0], bufs[s1] if s1 else None, count=count, unit=16, scalar=scalar, **kw)
        kb.copy(acc, ya, dst_offset=yo + r0 * wo_ * 16, nburst=nr, burst=wo_ * 16, src_stride=wq * 16, dst_stride=wo_ * 16)

    per_block = [len(bands) // m_blocks + (i < len(bands) % m_blocks) for i in range(m_blocks)]
    starts = [sum(per_block[:i]) for i in range(m_blocks + 1)]

    def plane_code(first: int, last: bool = False) -> None:
        item[0] = first  # a ragged last round's planes: ``first`` items past the block's own
        kb.copy(wa, ub_w, src_offset=first * len(taps) * lanes, burst=len(taps) * lanes)
        if ub_b is not None:
            kb.copy(ba, ub_b, src_offset=first * lanes, burst=lanes)
        for i, a in enumerate(table_args):
            kb.copy(a, bufs[f"c{i}"], src_offset=first * lanes, burst=lanes)
        mine = bands[starts[grp]:starts[grp + 1]]
        kb.roll(len(mine), lambda i: band_code(*mine[i]), clamp=True)

    for grp in range(m_blocks):
        with kb.core_group(grp * n_blocks, n_blocks) if m_blocks > 1 else contextlib.nullcontext():
            kb.for_tiles(planes, plane_code, cores=n_blocks)
    lw.launch(kb)
    return y
