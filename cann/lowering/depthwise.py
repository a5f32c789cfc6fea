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
round, GM pointers moved by one plane), and the output rows in contiguous shares over
``m_blocks`` groups of cores (``block_offset_mod``), so that small maps with few channels still
use every core; each share in bands (a short first / last band optional) chosen by a replay of
the simulator's pipeline (:mod:`cann.lowering.depthwise_bands`). The weights, bias and epilogue
tables of a plane arrive in one DMA; only the input rows the stored outputs read are loaded. Bias and
the fused elementwise epilogue (:class:`cann.lowering.cube.Epilogue`: ReLU, Clip, a residual Add,
...) run on the band in UB before its single write to GM.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np

from cann.dialects.tile import Space
from cann.lowering.common import NC1HWC0, DevTensor, Lowering, narrow, plane_row_split, unsupported
from cann.lowering.cube import Epilogue
from cann.lowering.depthwise_bands import choose, group_rows, makespan, split


def is_depthwise(w_shape: tuple[int, ...], cin: int, group: int) -> bool:
    """Whether a Conv with weight ``w_shape`` [Cout, Cin/group, KH, KW] is depthwise (one input and
    one output channel per group)."""
    return group > 1 and group == cin and w_shape[0] == cin and w_shape[1] == 1


def _plane_tables(w: np.ndarray, b: np.ndarray | None, tables: list[np.ndarray], n_: int, lanes: int,
                  dtype: np.dtype) -> np.ndarray:
    """The per-plane constants ``[N][C1][T][lanes]`` of one DMA per plane: the taps' weights
    (``[C, 1, KH, KW]``, row ``tap`` repeating the 16 channel weights of the tap ``lanes / 16``
    times: a broadcast operand; ``lanes`` 16 when 16 channels fill one 32 B block, which the
    vector unit then reads for every block of a repeat), then the bias ``b`` [C] (when given), then each epilogue table [C]; the same
    for each image, so that every plane's rows are one plane stride further on."""
    c, _, kh, kw = w.shape
    c1 = math.ceil(c / 16)
    rows = [np.zeros((c1 * 16, kh * kw), np.float32)]
    rows[0][:c] = w.reshape(c, kh * kw)
    for v in ([b] if b is not None else []) + list(tables):
        col = np.zeros((c1 * 16, 1), np.float32)
        col[:c, 0] = np.asarray(v, np.float32).reshape(-1)
        rows.append(col)
    t = np.concatenate(rows, axis=1).reshape(c1, 16, -1).transpose(0, 2, 1)  # [c1][row][16]
    t = np.tile(t[:, :, None, :], (1, 1, lanes // 16, 1)).reshape(c1, t.shape[1], lanes)
    return narrow(np.ascontiguousarray(np.tile(t[None], (n_, 1, 1, 1))), dtype)


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
    dt, isz = lw.dtype, lw.dtype.itemsize
    # table row width: one 32 B block of 16 channels (read with block stride 0), else a whole repeat
    tw = 16 if 16 * isz == lw.soc.vector.block_bytes else lw.lanes
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

    has_bias = b is not None and bool(np.any(b))
    n_rows = len(taps) + has_bias + len(epi.tables)  # rows of the per-plane table
    bias_row, table_row0 = len(taps), len(taps) + has_bias

    def ub_bytes(rows: int) -> int:
        return (sh * in_rows(rows) * wp * 16 + out_tiles * span(rows)[0] * 16 + n_rows * tw) * isz

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
    if pins.get("rows", 1) < 1 or pins.get("first_rows", 0) < 0 or pins.get("last_rows", 0) < 0:
        raise unsupported(loc, f"depthwise Conv: tiling rows = {pins.get('rows')}, first_rows = "
                               f"{pins.get('first_rows')}, last_rows = {pins.get('last_rows')}: rows >= 1, "
                               f"first_rows / last_rows >= 0 (0: none)")
    m_blocks = min(m_cap, ho_)
    plane_elems = [0]  # elements of one phase plane (set once the band height is chosen)

    def band_io(r0: int, r1: int):
        """The band's input DMAs ``(src_offset, dst_offset, nburst, src_stride)`` (plane-relative,
        elements; bursts of one input row) and the zeros ``(offset, count, unit, stride)`` written
        after them: every element the taps read (padding rows and columns, rows past the map)."""
        count, t_rows = span(r1 - r0)
        # rows the stored outputs read; past them only the unstored columns of the last row (and
        # the repeats' rounding) read, up to ``reach``: zeros there, not a loaded row
        t_need = r1 - r0 + halo
        reach = sw * (count - 1) + halo * wp + (kw_ - 1) * dw + 1
        loads, zeros = [], []
        for q in range(sh):
            base = q * plane_elems[0]
            # padded input row of phase q, step t: r0*sh + q + sh*t; real row = that - pt
            real = [t for t in range(t_rows) if 0 <= r0 * sh + q + sh * t - pt < h_]
            if not real or real[0] >= t_need:
                zeros.append((base, t_rows * wp * 16, 1, 1))
                continue
            ta, tb = real[0], min(real[-1] + 1, t_need)
            loads.append(((r0 * sh + q + sh * ta - pt) * w_ * 16, base + (ta * wp + pl) * 16, tb - ta, sh * w_ * 16))
            if ta > 0:
                zeros.append((base, ta * wp * 16, 1, 1))
            if tb < t_need or real[-1] + 1 <= tb:
                if tb < t_rows:
                    zeros.append((base + tb * wp * 16, (t_rows - tb) * wp * 16, 1, 1))
            elif reach > tb * wp:
                zeros.append((base + tb * wp * 16, (reach - tb * wp) * 16, 1, 1))
            if pl:
                zeros.append((base + ta * wp * 16, tb - ta, pl * 16, wp * 16))
            if wp > pl + w_:
                zeros.append((base + (ta * wp + pl + w_) * 16, tb - ta, (wp - pl - w_) * 16, wp * 16))
        return loads, zeros

    # -- the pipeline estimate (the simulator's costs, cann/sim/cost.py, from the SoC's figures)
    lat, bw, vsp = lw.soc.latency, lw.soc.bandwidth, lw.soc.vector
    slow = {"exp", "ln", "rec", "sqrt", "div"}
    active = n_blocks * m_blocks

    def dma(nburst: int, elems: int, path: int, l2: float = 0.0) -> int:
        """A DMA's cycles, the share ``l2`` of its bytes read from the L2 (cann/sim/l2.py)."""
        nbytes = nburst * elems * isz
        hit = int(nbytes * l2)
        nbytes -= hit
        return lat.mte_startup + max(-(-nbytes // path), -(-nbytes * active // bw.gm_total)) + \
            -(-hit // lw.soc.l2.rate) + lat.burst_overhead * max(nburst - 1, 0)

    # L2 shares: a byte k blocks read comes from the L2 for (k - 1) / k of each read; the plane
    # tables are read by each of the m_blocks groups, input rows by the groups whose bands reach them
    shares = group_rows(ho_, m_blocks)
    reach = [(max(0, a * sh - pt), min(h_, (b - 1) * sh - pt + (kh_ - 1) * dh + 2)) for a, b in shares]
    readers = np.zeros(h_ + 1, np.int64)
    for lo, hi in reach:
        readers[lo:hi] += 1
    x_l2 = {a: float(np.mean((readers[lo:hi] - 1) / readers[lo:hi])) if hi > lo else 0.0
            for (a, _), (lo, hi) in zip(shares, reach)}

    def vop(count: int, unit: int = 16, strided: bool = False, per: int = 1) -> int:
        """Cycles of one tile ``vec`` of ``count`` units (convert_tile_to_ascend's split)."""
        if not strided:
            reps = -(-count * unit * isz // vsp.repeat_bytes)
            return -(-reps // vsp.max_repeat) * lat.vector_startup + reps * per
        cols, reps = unit * isz // vsp.block_bytes, -(-count // vsp.blocks_per_repeat)
        return cols * (-(-reps // vsp.max_repeat) * lat.vector_startup + reps * per)

    def load(r0: int, r1: int, l2: float = 0.0) -> int:
        return sum(dma(n, w_ * 16, bw.gm_to_ub, l2) for _, _, n, _ in band_io(r0, r1)[0]) + \
            len(residuals) * dma(r1 - r0, wo_ * 16, bw.gm_to_ub)

    def vec(r0: int, r1: int) -> int:
        count = span(r1 - r0)[0]
        c = sum(vop(n, u, u != st) for _, n, u, st in band_io(r0, r1)[1])
        c += len(taps) * vop(count, 16, sw > 1) + has_bias * vop(count)
        return c + sum(vop(count, per=vsp.cycles_per_repeat_transcendental if st[0] in slow else
                           vsp.cycles_per_repeat) for st in epi.steps)

    def store(r0: int, r1: int) -> int:
        return dma(r1 - r0, wo_ * 16, bw.ub_to_gm)

    rounds = -(-planes // n_blocks)
    table = dma(1, n_rows * tw, bw.gm_to_ub, (m_blocks - 1) / m_blocks)

    def cost(bands) -> int:
        l2 = x_l2.get(bands[0][0], 0.0)
        return makespan(bands, rounds, lambda r0, r1: load(r0, r1, l2), vec, store, table)

    rows, first, last = choose(ho_, m_blocks, fit, cost, pins)
    plane_elems[0] = in_rows(rows) * wp * 16
    plan = [split(r0, r1, rows, first, last) for r0, r1 in group_rows(ho_, m_blocks)]
    kb.block_dim = n_blocks * m_blocks
    kb.tiling.update(rows=rows, first_rows=first, last_rows=last, block_dim=kb.block_dim, n_blocks=n_blocks,
                     m_blocks=m_blocks)
    if m_blocks > 1:
        kb.block_modulo = n_blocks

    x_plane, y_plane = h_ * w_ * 16, ho_ * wo_ * 16
    tb = _plane_tables(w, b if has_bias else None, epi.tables, n_, tw, dt)
    y = lw.gm_tensor(tuple(out_shape), NC1HWC0)
    xa, ta, ya = kb.arg(x), kb.arg(lw.constant(tb, "ND")), kb.arg(y)
    kb.block_offset(xa, x_plane)
    kb.block_offset(ta, n_rows * tw)
    kb.block_offset(ya, y_plane)
    res_args = []
    for r in residuals:
        a = kb.arg(r, fresh=True)
        kb.block_offset(a, y_plane)
        res_args.append(a)

    ub_in = kb.alloc(Space.UB, sh * plane_elems[0], dt)
    ub_t = kb.alloc(Space.UB, n_rows * tw, dt)
    tile_elems = span(rows)[0] * 16
    bufs = {"acc": kb.alloc(Space.UB, tile_elems, dt)}
    for i in range(len(res_args)):
        bufs[f"r{i}"] = kb.alloc(Space.UB, tile_elems, dt)
    for t in temps:
        bufs[t] = kb.alloc(Space.UB, tile_elems, dt)
    acc = bufs["acc"]

    def operand(name: str) -> tuple:
        """(buffer, offset) of a step operand: a row of the plane table or a tile."""
        if name.startswith("c"):
            return ub_t, (table_row0 + int(name[1:])) * tw
        return bufs[name], 0

    item = [0]  # the for_tiles item (plane) of the round being emitted: core 0's; the block's own by its offsets

    def band_code(r0: int, r1: int) -> None:
        """Output rows r0..r1 of the core's plane: load, taps, bias, epilogue, store. Each band's
        buffer is its own generation (multi-buffered by tile-multi-buffer): it writes every
        element its taps read, zeros for padding."""
        nr = r1 - r0
        xo, yo = item[0] * x_plane, item[0] * y_plane
        count = span(nr)[0]
        loads, zeros = band_io(r0, r1)
        for src, dst, n, stride in loads:
            kb.copy(xa, ub_in, src_offset=xo + src, dst_offset=dst, nburst=n, burst=w_ * 16, src_stride=stride,
                    dst_stride=wp * 16)
        # the zeros after every load: the vector unit's writes next to the band's DMA (same buffer)
        # must not hold the next band's load back behind this band's taps
        for off, n, unit, stride in zeros:
            kb.vec("dup", ub_in, count=n, unit=unit, dst_offset=off, dst_stride=stride, scalar=0.0)
        for k, (i, j) in enumerate(taps):
            q, dq = (i * dh) % sh, (i * dh) // sh
            src = q * plane_elems[0] + (dq * wp + j * dw) * 16
            kb.vec("mla" if k else "mul", acc, ub_in, ub_t, count=count, unit=16, src0_offset=src,
                   src0_stride=sw * 16, src1_offset=k * tw, src1_stride=0)
        if has_bias:
            kb.vec("add", acc, acc, ub_t, count=count, unit=16, src1_offset=bias_row * tw, src1_stride=0)
        for i, ra in enumerate(res_args):
            kb.copy(ra, bufs[f"r{i}"], src_offset=yo + r0 * wo_ * 16, nburst=nr, burst=wo_ * 16, src_stride=wo_ * 16,
                    dst_stride=wq * 16)
        for op, d, s0, *more in epi.steps:
            s1 = more[0] if more else None
            scalar = more[1] if len(more) > 1 else 0.0
            b0, o0 = operand(s0)
            b1, o1 = operand(s1) if s1 else (None, 0)
            kw = dict(src1_stride=0) if s1 is not None and s1.startswith("c") else {}
            kb.vec(op, bufs[d], b0, b1, count=count, unit=16, scalar=scalar, src0_offset=o0, src1_offset=o1, **kw)
        kb.copy(acc, ya, dst_offset=yo + r0 * wo_ * 16, nburst=nr, burst=wo_ * 16, src_stride=wq * 16, dst_stride=wo_ * 16)

    def plane_code(first: int, last: bool = False) -> None:
        item[0] = first  # a ragged last round's planes: ``first`` items past the block's own
        kb.copy(ta, ub_t, src_offset=first * n_rows * tw, burst=n_rows * tw)
        mine = plan[grp]
        kb.roll(len(mine), lambda i: band_code(*mine[i]), clamp=True)

    for grp in range(m_blocks):
        with kb.core_group(grp * n_blocks, n_blocks) if m_blocks > 1 else contextlib.nullcontext():
            kb.for_tiles(planes, plane_code, cores=n_blocks)
    lw.launch(kb)
    return y
