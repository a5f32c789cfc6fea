"""Cube kernels: Conv (img2col + mmad) and MatMul of two tensors (nd2nz + load2d + mmad); Gemm /
MatMul by a constant is :mod:`cann.lowering.gemm` (it shares the epilogue machinery here).

Weights are constants, stored in GM in the cube's layout at compile time: FRACTAL_Z
(``[K1][N1][16][k0]``, the Zn layout L0B takes) with ``K`` ordered ``(c1, kh, kw, c0)`` as img2col
produces it (ascend-core.md §2.3). Grouped convolutions are computed as one dense convolution with
a block-diagonal weight (exact; costs ``group`` times the MACs: a later issue maps depthwise
convolutions to the vector unit).

Tiling (recorded on each kernel as ``tile.tiling``, overridable per kernel): ``n`` output channels
and ``k`` reduction columns per L0B tile, ``m`` output positions per L0A tile; for Conv ``rows``
output rows per L1 feature-map tile and, when split, ``cols`` output columns of one row (both pinned:
``rows`` x ``cols`` rectangles), ``c1``
input C1 blocks per L1 load (partial sums accumulate in L0C) and ``taps`` (1: one 1x1
sub-convolution per kernel tap), ``loops`` (1: a ragged last output tile is moved back to end at the
map's edge, joining the tile loops; 0, the default: it has its own code, computing no overlap).
Defaults fill L0A/L0B and keep the accumulator of a whole tile in
L0C; every axis is split as far as the SoC's buffers need, so no size is refused.

A Conv's output tiles are nested hardware loops (rows of tiles of a core group, the column tiles of
each row; :func:`_emit_tiles`), the border tiles joining them through ``loop_clamp``: the kernel's
code grows with its tiling and core groups, not with its feature map.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from cann.dialects import tile
from cann.dialects.tile import Space
from cann.hw.config import SocSpec
from cann.lowering import small_cin
from cann.lowering.common import (ND, NC1HWC0, NC1HWC0_C04, DevTensor, KernelBuilder, Lowering, narrow, narrow_f32,
                                   unsupported)


def _ceil(a: int, b: int) -> int:
    return -(-a // b) * b


def fractal_z(bmat: np.ndarray, k0: int, dtype: np.dtype) -> np.ndarray:
    """A ``[K, N]`` matrix in the Zn layout ``[K/k0][N1][16][k0]`` (K padded to k0, N to 16)."""
    k, n = bmat.shape
    kp, np_ = _ceil(k, k0), _ceil(n, 16)
    padded = np.zeros((kp, np_), dtype)  # narrowed first (the same bytes, fewer moved)
    padded[:k, :n] = narrow_f32(bmat, dtype)
    return np.ascontiguousarray(padded.reshape(kp // k0, k0, np_ // 16, 16).transpose(0, 2, 3, 1))


def bias_table(bias: np.ndarray | None, n: int, lanes: int, dtype: np.dtype) -> np.ndarray:
    """Per-C0-block rows of ``lanes`` elements: row j repeats bias[16j:16j+16] (one vector repeat)."""
    n1 = math.ceil(n / 16)
    b = np.zeros(n1 * 16, np.float32)
    if bias is not None:
        b[:n] = bias.reshape(-1)
    return narrow(np.ascontiguousarray(np.tile(b.reshape(n1, 1, 16), (1, lanes // 16, 1)).reshape(n1, lanes)), dtype)


@dataclass
class Epilogue:
    """Elementwise ops fused after a cube op (UB fusion), applied to each output tile in UB.

    ``steps`` use the names ``acc`` (the output tile), ``r<i>`` (tiles of ``residuals[i]``, GM
    tensors of the output's shape, read at the output tile's position), ``c<i>`` (per-output-channel
    constants ``tables[i]``, shape [N]) and any other name for a UB temporary; see vector.Step.
    """

    steps: list = field(default_factory=list)
    tables: list[np.ndarray] = field(default_factory=list)
    residuals: list[DevTensor] = field(default_factory=list)

    @property
    def temps(self) -> list[str]:
        names = {v for s in self.steps for v in s[1:4] if isinstance(v, str)}
        return sorted(n for n in names if n != "acc" and n[0] not in "rc")


class _CubeTiles:
    """Buffers and epilogue shared by the conv and gemm kernels."""

    def __init__(self, lw: Lowering, kb: KernelBuilder, k_tile: int, n_tile: int, m_tile: int, l1_extra: int,
                 epi: Epilogue | None = None, l1_k: int | None = None, ub_n: int | None = None,
                 l0b_k: int | None = None):
        """``l1_k``: K rows of the L1 weight tile (default ``k_tile``); ``ub_n``: columns of the UB
        output tiles (default ``n_tile``: the epilogue of a wider tile runs in column chunks);
        ``l0b_k``: K rows of the L0B tile (default ``k_tile``; more: every K tile resident)."""
        dt = lw.dtype
        self.lw, self.kb, self.dt = lw, kb, dt
        self.k0 = lw.soc.cube.k0(dt.itemsize)
        self.l1_w = kb.alloc(Space.L1, (l1_k or k_tile) * n_tile, dt)
        self.l0a = kb.alloc(Space.L0A, m_tile * k_tile, dt)
        self.l0b = kb.alloc(Space.L0B, (l0b_k or k_tile) * n_tile, dt)
        self.ub_bias = kb.alloc(Space.UB, (n_tile // 16) * lw.lanes, dt)
        ub_n = ub_n or n_tile
        self.ub_out = kb.alloc(Space.UB, ub_n * m_tile, dt)
        self.epi = epi or Epilogue()
        self.bufs = {"acc": self.ub_out}
        for i in range(len(self.epi.residuals)):
            self.bufs[f"r{i}"] = kb.alloc(Space.UB, ub_n * m_tile, dt)
        for i in range(len(self.epi.tables)):
            self.bufs[f"c{i}"] = kb.alloc(Space.UB, (n_tile // 16) * lw.lanes, dt)
        tiles = 1 + len(self.epi.residuals) + len(self.epi.temps)
        need = (tiles * ub_n * m_tile + (1 + len(self.epi.tables)) * (n_tile // 16) * lw.lanes) * dt.itemsize
        if need > lw.usable("ub"):  # raised during graph -> tile: a fused group falls back to one kernel per op
            raise unsupported(kb.loc, f"fused epilogue needs {need} bytes of UB ({tiles} output tiles), "
                                      f"{lw.usable('ub')} available")
        for t in self.epi.temps:
            self.bufs[t] = kb.alloc(Space.UB, ub_n * m_tile, dt)
        self.table_args = []
        self.residual_args = []
        self.has_bias = True  # False: no bias (load_bias and the epilogue's adds are skipped)

    def bind(self, n_t: int, out_stride: int, lanes: int) -> None:
        """Kernel arguments of the epilogue's GM operands, moved per core like the output."""
        kb, lw = self.kb, self.lw
        for v in self.epi.tables:
            a = kb.arg(lw.constant(bias_table(v, v.size, lanes, self.dt), "ND"))
            kb.block_offset(a, n_t // 16 * lanes)
            self.table_args.append(a)
        for r in self.epi.residuals:
            a = kb.arg(r, fresh=True)  # its own pointer: moved per core like the output
            kb.block_offset(a, out_stride)
            self.residual_args.append(a)

    def load_tables(self, nt0: int, nt: int) -> None:
        lanes = self.lw.lanes
        for i, a in enumerate(self.table_args):
            self.kb.copy(a, self.bufs[f"c{i}"], src_offset=(nt0 // 16) * lanes, burst=(nt // 16) * lanes)

    def apply_epilogue(self, n1t: int, valid: int) -> None:
        """The fused steps on ub_out ([n1t][valid][16]), one C0 block of channels at a time."""
        kb, lanes = self.kb, self.lw.lanes
        for j in range(n1t):
            for op, d, s0, *more in self.epi.steps:
                s1 = more[0] if more else None
                scalar = more[1] if len(more) > 1 else 0.0

                def at(name):
                    return j * lanes if name.startswith("c") else j * valid * 16

                kw = {}
                if s1 is not None:
                    kw = dict(src1_offset=at(s1), src1_stride=0 if s1.startswith("c") else None)
                kb.vec(op, self.bufs[d], self.bufs[s0], self.bufs[s1] if s1 else None, count=valid, unit=16,
                       dst_offset=at(d), src0_offset=at(s0), scalar=scalar, **kw)

    def load_weights(self, w, n1_total: int, kt0: int, kt: int, nt0: int, nt: int):
        k0, kb = self.k0, self.kb
        k1t, n1t = kt // k0, nt // 16
        kb.copy(w, self.l1_w, src_offset=((kt0 // k0) * n1_total + nt0 // 16) * 16 * k0, nburst=k1t,
                burst=n1t * 16 * k0, src_stride=n1_total * 16 * k0, dst_stride=n1t * 16 * k0)
        kb.emit(tile.Load2dOp(self.l1_w, self.l0b, count=k1t * n1t, src_stride=16 * k0, dst_stride=16 * k0))

    def load_bias(self, table, nt0: int, nt: int):
        if not self.has_bias:
            return
        lanes = self.lw.lanes
        self.kb.copy(table, self.ub_bias, src_offset=(nt0 // 16) * lanes, burst=(nt // 16) * lanes)

    def epilogue(self, l0c, c_offset: int, n1t: int, valid: int, src_m: int):
        """L0C -> UB (zeros when ``l0c`` is None: the tile read only padding), + bias; the caller
        writes ub_out ([n1t][valid][16]) to GM."""
        kb, lanes = self.kb, self.lw.lanes
        if l0c is None:
            kb.vec("dup", self.ub_out, count=n1t * valid * 16, scalar=0.0)
        else:
            kb.emit(tile.CopyL0cToUbOp(l0c, self.ub_out, src_offset=c_offset, n1=n1t, m=valid, src_m=src_m))
        for j in range(n1t if self.has_bias else 0):
            kb.vec("add", self.ub_out, self.ub_out, self.ub_bias, count=valid, unit=16, dst_offset=j * valid * 16,
                   src0_offset=j * valid * 16, src1_offset=j * lanes, src1_stride=0)
        self.apply_epilogue(n1t, valid)


def _default_tiles(lw: Lowering, m_hint: int, n1: int, k_total: int, k0: int) -> tuple[int, int, int]:
    """(m, n, k): ``n`` (a divisor of the padded N, at most 128) small enough that the N tiles
    occupy every core, ``m`` up to 128, ``k`` filling one copy's budget of L0A / L0B
    (ascend-core.md §2.1 via the SoC, :meth:`Lowering.usable`)."""
    isz = lw.dtype.itemsize
    target = max(1, min(8, n1 // min(lw.cores, n1)))
    n = 16 * max(d for d in range(1, target + 1) if n1 % d == 0)
    m = min(128, _ceil(m_hint, 16))
    l0a, l0b = lw.usable("l0a"), lw.usable("l0b")
    k = min(l0a // (m * isz), l0b // (n * isz))
    k = max(k0, k // k0 * k0)
    return m, n, min(k, _ceil(k_total, k0))


def _n_tiles(np_: int, n_t: int, loc) -> int:
    if n_t % 16 or np_ % n_t:
        raise unsupported(loc, f"tiling: n = {n_t} must be a multiple of 16 dividing {np_}")
    return np_ // n_t


def _used_taps(k: int, dil: int, stride: int, pad: int, size: int, out: int) -> tuple[int, int]:
    """Kernel taps ``[lo, hi)`` along one axis that read real input for some output position
    (tap ``i`` reads ``o*stride - pad + i*dil``, ``0 <= o < out``); ``(0, k)`` if none does."""
    used = []
    for i in range(k):
        o = max(0, -(-(pad - i * dil) // stride))
        if o < out and o * stride - pad + i * dil < size:
            used.append(i)
    return (used[0], used[-1] + 1) if used else (0, k)


def _window(o0: int, o1: int, stride: int, pad: int, off: int, dil: int, k: int,
            size: int) -> tuple[int, int, int, int]:
    """Input span of outputs ``[o0, o1)`` along one axis: ``(start, end)`` in padded coordinates
    and the real positions ``[lo, hi)`` within it (``hi <= lo``: the span reads only padding)."""
    start = o0 * stride - pad + off
    end = (o1 - 1) * stride - pad + off + dil * (k - 1) + 1
    return start, end, max(start, 0), min(end, size)


@dataclass(frozen=True)
class _ConvGeom:
    """A convolution's geometry after cropping taps that only ever read padding (pads may be
    negative then: the first output reads further in)."""

    c1in: int
    h: int
    w: int
    kh: int
    kw: int
    sh: int
    sw: int
    dh: int
    dw: int
    pt: int
    pl: int
    ho: int
    wo: int
    c0: int = 16  # the map's C0: 16 (NC1HWC0) or 4 (NC1HWC0_C04, cann.lowering.small_cin)
    resident: bool = False  # the weights are loaded once per core, not once per output tile

    def fm_bytes(self, taps: bool, c1: int, rows: int, cols: int, isz: int) -> int:
        """L1 bytes of a feature-map tile for ``rows`` x ``cols`` outputs and ``c1`` C1 blocks."""
        kh, kw = (1, 1) if taps else (self.kh, self.kw)
        fh = min(self.h, (rows - 1) * self.sh + self.dh * (kh - 1) + 1)
        fw = min(self.w, (cols - 1) * self.sw + self.dw * (kw - 1) + 1)
        return c1 * fh * fw * self.c0 * isz


def _fm_copy(nr: int, nq: int, nc: int, w: int, c0: int, isz: int, align: int) -> str | None:
    """How ``load_fm`` copies a ``[nc][nr][nq][c0]`` feature-map tile of a ``w``-wide map into L1 so that
    every copy's L1 address is on an ``align``-byte boundary (the SoC's L1 alignment): ``"whole"``
    (whole rows, one copy), ``"lines"`` (a copy per row), ``"blocks"`` (a copy per C1 block), or None
    when no way keeps the addresses aligned (only an NC1HWC0_C04 map with several C1 blocks and a
    partial row: its 4-channel pixels are 8 or 16 bytes; an NC1HWC0 pixel is 32 or 64)."""
    if nq == w:
        return "whole"
    line, plane = nq * c0 * isz % align == 0, nr * nq * c0 * isz % align == 0
    lines = "lines" if nr == 1 or line else None
    blocks = "blocks" if nc == 1 or plane else None
    if nr <= nc:
        return lines or blocks
    return blocks or lines


def _fm_copies_aligned(g: _ConvGeom, rows: int, cols: int, c1: int, isz: int, align: int) -> bool:
    """Whether every feature-map load of a whole-kernel tiling (``rows`` x ``cols`` output tiles, ``c1``
    C1 blocks per load) has an aligned way to L1 (:func:`_fm_copy`)."""
    if g.c0 * isz % align == 0:
        return True
    for ho0 in range(0, g.ho, rows):
        _, _, r0, r1 = _window(ho0, min(g.ho, ho0 + rows), g.sh, g.pt, 0, g.dh, g.kh, g.h)
        for wo0 in range(0, g.wo, cols):
            _, _, q0, q1 = _window(wo0, min(g.wo, wo0 + cols), g.sw, g.pl, 0, g.dw, g.kw, g.w)
            for ca in range(0, g.c1in, c1):
                if r1 > r0 and q1 > q0 and _fm_copy(r1 - r0, q1 - q0, min(g.c1in, ca + c1) - ca, g.w, g.c0, isz,
                                                    align) is None:
                    return False
    return True


#: the exponent of the p-norm combining a convolution's pipe streams in :func:`_conv_cycles` (equal
#: streams cost 2^(1/p) of one)
CONV_OVERLAP_NORM = 4


def _conv_cycles(g: _ConvGeom, soc: SocSpec, taps: bool, rows: int, cols: int, c1: int, isz: int, k_t: int, n_t: int,
                 m_t: int, rounds: int, m_blocks: int = 1, active: int = 1, shared: int = 0) -> float:
    """Estimated cycles of one image on the busiest core for a tiling (the SoC's bandwidths,
    latencies, L2 and cube rate; the shape of ``cann/sim/cost.py``), the output tiles split over
    ``m_blocks`` groups of cores and GM bandwidth shared by ``active`` cores; ``shared``: the cores
    reading each feature-map tile (the group's channel groups; 0: ``active // m_blocks``).

    The core's work is its output tiles x channel-tile rounds; the pipes run their streams
    concurrently (multi-buffered tiles): feature-map and weight loads (MTE2: of bytes ``k`` cores
    read, ``1/k`` from HBM at the shared bandwidth and the rest from the L2, docs/core-model.md
    "L2"), weight moves to L0B and img2col (MTE1), ``mmad`` (cube) and the epilogue (L0C -> UB ->
    GM), combined as a p-norm (:data:`CONV_OVERLAP_NORM`); plus the first loads (fill) and the last
    epilogue (drain), which nothing overlaps, and, when a K tile's M subtiles are a hardware loop
    (two or more whole ones: the loop is fenced by barriers), every K tile's weight load, which then
    waits for the loop before it. A ``rows`` x ``cols`` rectangle narrower than the map (pinned)
    loads its window a copy per input row or C1 block and, with more than one C0 block of channels,
    writes a copy per map row. Used only to choose among
    the tilings that fit."""
    bw, lat, cube = soc.bandwidth, soc.latency, soc.cube
    active = max(1, active)
    gm_bw = min(bw.gm_to_l1, bw.gm_total / active)
    shared = shared or max(1, active // max(1, m_blocks))

    def read(nbytes: float, readers: int) -> float:
        """Cycles of one core's read of ``nbytes`` that ``readers`` cores read (the L2 serves all but 1/k)."""
        hit = (readers - 1) / readers
        return nbytes * ((1 - hit) / gm_bw + hit / soc.l2.rate)

    groups = g.kh * g.kw if taps else 1
    kk = 16 if taps else g.kh * g.kw * g.c0
    tiles = math.ceil(math.ceil(g.ho / rows) * math.ceil(g.wo / cols) / m_blocks)
    loads = groups * math.ceil(g.c1in / c1)
    fm = g.fm_bytes(taps, g.c1in, rows, cols, isz) * groups  # every channel of every group's window
    k_tiles = loads * math.ceil(c1 * kk / k_t)
    k_all = _ceil(groups * g.c1in * kk, cube.k0(isz))
    m_pad = _ceil(rows * cols, 16)
    m_sub = math.ceil(m_pad / m_t)
    rate = cube.fp32_rate_divisor if isz == 4 else 1
    # a rectangle narrower than the map loads its window a copy per input row or per C1 block
    # (load_fm's "lines" / "blocks"), one whole-rows copy otherwise
    fh = min(g.h, (rows - 1) * g.sh + g.dh * ((1 if taps else g.kh) - 1) + 1)
    copies = min(fh, c1) if rows > 1 and cols < g.wo else 1
    img2col = k_tiles * m_sub * lat.mte_startup + m_pad * k_all * isz / bw.l1_to_l0a
    mmad = k_tiles * m_sub * lat.cube_startup + m_pad / cube.m0 * k_all / cube.k0(isz) * n_t / cube.n0 * rate
    if g.resident:  # one channel tile, weights loaded once: the tiles pipeline (load, img2col, mmad, write)
        fm_cycles = fm / gm_bw + loads * copies * lat.mte_startup
        weights = k_tiles * 2 * lat.mte_startup + k_all * n_t * isz * (1 / gm_bw + 1 / bw.l1_to_l0b)
        stages = (fm_cycles, img2col, mmad,
                  m_pad * n_t * (4 / max(bw.l0c_to_ub, 1) + isz / gm_bw) + m_sub * (lat.mte_startup + 3 * lat.vector_startup))
        return weights + sum(stages) + (tiles - 1) * max(stages)
    units = tiles * rounds  # (output tile, channel tile) pairs of the core
    fm_load = read(fm, shared) + loads * copies * lat.mte_startup
    w_gm = k_tiles * lat.mte_startup + read(k_all * n_t * isz, m_blocks)  # one round's weights to L1
    w_l0 = k_tiles * lat.mte_startup + k_all * n_t * isz / bw.l1_to_l0b  # ... and on to L0B
    # a rectangle narrower than the map with several C0 blocks writes each subtile a copy per map row
    writes = rows if rows > 1 and cols < g.wo and n_t > cube.n0 else 1
    epilogue = m_sub * (writes * lat.mte_startup + 3 * lat.vector_startup) + \
        m_pad * n_t * (4 / max(bw.l0c_to_ub, 1) + isz / min(bw.ub_to_gm, bw.gm_total / active))
    # a feature-map tile shared by the rounds is loaded before them, into a buffer the tile before
    # was still reading: nothing overlaps it; a tile loaded in C1 chunks loads them under the rounds
    exposed = tiles * fm_load if loads == 1 else fm_load
    streams = ((0 if loads == 1 else tiles * rounds * fm_load) + units * w_gm, units * (w_l0 + img2col),
               units * mmad, units * epilogue)
    fill = exposed + (w_gm + w_l0) / k_tiles
    drain = epilogue / m_sub
    fenced = units * (w_gm + w_l0) if m_pad // m_t >= 2 else 0
    return sum(x ** CONV_OVERLAP_NORM for x in streams) ** (1 / CONV_OVERLAP_NORM) + fill + drain + fenced


def _conv_plan(geo: _ConvGeom, pins: dict[str, int], soc: SocSpec, m_cap: int, l1_budget: int, isz: int, m_t: int,
               n_t: int, k_t: int, rounds: int, loc, m_blocks_cap: int = 1,
               n_cores: int = 1, shared: int = 0) -> tuple[bool, int, int, int, int, float]:
    """``(taps, rows, cols, c1, m_blocks, estimated cycles)``: whether the kernel runs as one 1x1 sub-convolution per
    kernel tap, the output rows, output columns and input C1 blocks of one L1 feature-map tile, and
    the groups of cores the output tiles are split over (each group of ``n_cores`` cores computing
    every output-channel tile of its share of the output tiles).

    Every tiling whose accumulators fit L0C (``m_cap`` positions) and whose feature-map tile fits
    ``l1_budget`` bytes is a candidate: whole output rows (any number), or one row in column chunks
    (``rows`` and ``cols`` both pinned: rectangles of several rows narrower than the map); each with
    as many input C1 blocks per load as fit (more loads accumulate in L0C), split over as many
    groups (at most ``m_blocks_cap``) as it has output tiles of at least 16 positions. The cheapest
    by ``_conv_cycles``
    wins. Kernel taps run one at a time only when a 16-column window of one C1 block overflows L1.
    Pinned values (``tiling``) fix their axis. ``shared``: the cores reading each feature-map tile
    (the channel groups of a group of cores; 0: ``n_cores``), whose reads the L2 serves.

    Raises:
        CannError: pinned values beyond the capacities.
    """
    g = geo
    if m_cap < 16 or l1_budget < 16 * isz:
        raise unsupported(loc, f"Conv: tiling n = {n_t}, k = {k_t} leaves no room for the feature map "
                               f"(L0C {m_cap} positions, L1 {max(l1_budget, 0)} bytes)")
    if "taps" in pins:
        taps = bool(pins["taps"])
    else:
        taps = g.fm_bytes(False, 1, 1, min(g.wo, 16), isz) > l1_budget

    def fm(c1: int, rows: int, cols: int) -> int:
        return g.fm_bytes(taps, c1, rows, cols, isz)

    if "cols" in pins:
        col_opts = [max(1, min(pins["cols"], g.wo))]
    else:
        widest = min(g.wo, m_cap)
        col_opts = sorted({*range(16, widest + 1, 16), *([g.wo] if g.wo <= m_cap else [])}, reverse=True)
        if not any(fm(1, 1, c) <= l1_budget for c in col_opts):
            col_opts = list(range(min(widest, 16), 0, -1))
    best, refused = None, ""
    for cols in col_opts:
        if "rows" in pins:
            row_opts = [max(1, min(pins["rows"], g.ho))]
        else:
            row_opts = range(max(1, min(g.ho, m_cap // cols)), 0, -1) if cols == g.wo else [1]
        for rows in row_opts:
            if rows > 1 and cols < g.wo and not ("cols" in pins and "rows" in pins):  # rectangles only pinned
                refused = refused or (f"Conv: tiling rows = {rows} needs whole rows of {g.wo} positions "
                                      f"({m_cap} fit L0C)")
                continue
            c1 = min(g.c1in, pins.get("c1") or l1_budget // fm(1, rows, cols))
            if c1 >= 1 and "c1" not in pins:
                c1 = math.ceil(g.c1in / math.ceil(g.c1in / c1))  # balanced loads: the same count, even K tiles
            if c1 < 1 or _ceil(rows * cols, 16) > m_cap or fm(c1, rows, cols) > l1_budget:
                c1 = max(c1, 1)
                refused = (f"Conv: tiling rows = {rows}, cols = {cols}, c1 = {c1} needs {_ceil(rows * cols, 16)} "
                           f"L0C positions ({m_cap} available) and {fm(c1, rows, cols)} bytes of L1 "
                           f"({l1_budget} available)")
                continue
            if not taps and not _fm_copies_aligned(g, rows, cols, c1, isz, soc.buffer("l1").align):
                refused = (f"Conv: tiling rows = {rows}, cols = {cols}: an NC1HWC0_C04 feature-map load would "
                           f"start off an L1 alignment boundary")
                continue
            # groups only for tiles of at least one fractal's 16 positions (no padded M just to use cores)
            blocks = min(m_blocks_cap, math.ceil(g.ho / rows) * math.ceil(g.wo / cols)) if rows * cols >= 16 or \
                "m_blocks" in pins else 1
            cost = _conv_cycles(g, soc, taps, rows, cols, c1, isz, k_t, n_t, m_t, rounds, blocks, blocks * n_cores,
                                shared)
            if best is None or cost < best[0]:
                best = (cost, rows, cols, c1, blocks)
    if best is None:  # only with pinned values: unpinned, one position of one C1 block always fits
        raise unsupported(loc, refused)
    return taps, best[1], best[2], best[3], best[4], best[0]


def _row_segments(ms0: int, valid: int, cols: int, ho0: int, wo0: int, wo: int) -> list[tuple[int, int, int]]:
    """``[(tile position, map position, count), ...]``: positions ``[ms0, ms0 + valid)`` of an output
    tile ``cols`` wide at (``ho0``, ``wo0``) of a ``wo``-wide map, one run per map row they cover
    (one run when the tile spans whole map rows)."""
    if cols == wo:
        return [(ms0, ho0 * wo + ms0, valid)]
    out, p = [], ms0
    while p < ms0 + valid:
        r, c = divmod(p, cols)
        cnt = min(cols - c, ms0 + valid - p)
        out.append((p, (ho0 + r) * wo + wo0 + c, cnt))
        p += cnt
    return out


def _emit_tiles(kb: KernelBuilder, mine: list[tuple[int, int]], n_ct: int, rows: int, cols: int, ho: int, wo: int,
                tile_code, move_back: bool) -> None:
    """Emit the output tiles ``mine`` (``(tile row, tile column)``, row-major and consecutive) of one
    core group as hardware loops whose counts are the only thing the map size changes: a partial
    first and last tile row as loops over their column tiles, the whole tile rows between as a loop
    over rows of a loop over columns (the border tiles' pads and windows through ``loop_clamp``).
    With ``move_back`` a ragged last tile (the map's edge inside it) of a loop of two or more is
    moved back to end at the edge: every tile of the loop is whole (it joins the loop) and the
    overlap is recomputed and rewritten with the same values by the same core; without, it is
    peeled (its own, smaller code)."""
    by_row: dict[int, list[int]] = {}
    for r, c in mine:
        by_row.setdefault(r, []).append(c)
    segs = list(by_row.items())
    full = [i for i, (_, cs) in enumerate(segs) if len(cs) == n_ct]  # consecutive: partial rows only at the ends
    first, last = (full[0], full[-1]) if full else (len(segs), len(segs) - 1)

    def col_of(c: int, cs: list[int]) -> int:
        return wo - cols if move_back and c * cols + cols > wo and len(cs) > 1 else c * cols

    def row_of(r: int, rs: list[int]) -> int:
        return ho - rows if move_back and r * rows + rows > ho and len(rs) > 1 else r * rows

    def one_row(ho0: int, cs: list[int]) -> None:
        kb.roll(len(cs), lambda j: tile_code(ho0, col_of(cs[j], cs)), clamp=True)

    if move_back and _tile_grid(kb, segs, n_ct, rows, cols, ho, wo, tile_code):
        return
    for r, cs in segs[:first]:
        one_row(r * rows, cs)
    whole = [segs[i][0] for i in range(first, last + 1)]
    if whole:
        kb.roll(len(whole), lambda i: one_row(row_of(whole[i], whole), segs[first + i][1]), clamp=True)
    for r, cs in segs[last + 1:]:
        one_row(r * rows, cs)


def _tile_grid(kb: KernelBuilder, segs: list[tuple[int, list[int]]], n_ct: int, rows: int, cols: int, ho: int,
               wo: int, tile_code) -> bool:
    """The loop form (tiling ``loops`` = 1) of one core group's output tiles ``segs`` (``(tile row,
    [tile columns])``, see :func:`_emit_tiles`) when they are a rectangle (one run of columns, or
    whole tile rows): one nest of hardware loops (:meth:`KernelBuilder.tile_loops`), loops of one
    iteration included, the last tile row / column of the map moved back to end at its edge, so the
    code does not depend on the counts (the map size). ``tile_code(ho0, wo0, lo, hi, grid=True)`` emits a tile
    whose windows are clipped at the map's low / high edges where ``lo`` / ``hi`` are true. False
    (nothing emitted) when the tiles are no rectangle, a tile is larger than the map, or the tiles
    are not one body (e.g. a kernel tap reading only padding in a border tile)."""
    cs = segs[0][1]
    if rows > ho or cols > wo or any(c != cs for _, c in segs) or cs != list(range(cs[0], cs[0] + len(cs))):
        return False
    n_rt, r_first = -(-ho // rows), segs[0][0]

    def tile_(idx, lo, hi) -> None:
        r, c = r_first + idx[0], cs[0] + idx[1]
        ho0 = ho - rows if hi[0] and r == n_rt - 1 else r * rows
        wo0 = wo - cols if hi[1] and c == n_ct - 1 else c * cols
        tile_code(ho0, wo0, lo, hi, grid=True)

    try:
        kb.tile_loops((len(segs), len(cs)), tile_)
    except ValueError:
        return False
    return True


def conv2d(lw: Lowering, x: DevTensor, w: np.ndarray, b: np.ndarray | None, strides, pads, dilations, group: int,
           out_shape: tuple[int, ...], loc, kernel_hint: str = "conv2d", epilogue: Epilogue | None = None,
           pins: dict[str, int] | None = None) -> DevTensor:
    """2-D convolution of an NC1HWC0 tensor by constant weights ``w`` [Cout, Cin/group, KH, KW],
    followed by the fused ``epilogue`` if any; ``pins``: tiling fields recorded on the graph op.

    Any size is tiled (``_conv_plan``): output-channel tiles over the cores, output rows (or column
    chunks of one row), input-channel chunks and K tiles accumulated in L0C, kernel taps one at a
    time when even a small window overflows L1. Kernel rows / columns that read only padding for
    every output are dropped (a dilated 3x3 on a map smaller than its dilation is a 1x1).

    Raises:
        CannError: a weight shape that does not match the input channels and ``group``, or a pinned
            tiling beyond the buffers' capacities.
    """
    c04 = small_cin.use_c04(x, w.shape[2], w.shape[3], lw.soc.cube.k0(lw.dtype.itemsize),
                            {**(pins or {}), **lw.tiling_overrides.get(lw.next_name(kernel_hint), {})})
    x = lw.as_format(x, NC1HWC0_C04 if c04 else NC1HWC0, lw.dtype, loc)
    c0in = small_cin.C04 if c04 else 16  # the input's C0
    if epilogue is not None:
        epilogue.residuals = [lw.as_format(r, NC1HWC0, lw.dtype, loc) for r in epilogue.residuals]
    n_, cin, h_, w_ = x.shape
    cout, cin_g, kh_, kw_ = w.shape
    if cin_g * group != cin or cout % group:
        raise unsupported(loc, f"Conv: weight shape {list(w.shape)} does not match {cin} input channels, group {group}")
    if group > 1:  # block-diagonal dense weight
        dense = np.zeros((cout, cin, kh_, kw_), np.float32)
        og = cout // group
        for g in range(group):
            dense[g * og:(g + 1) * og, g * cin_g:(g + 1) * cin_g] = w[g * og:(g + 1) * og]
        w = dense
    dt, isz = lw.dtype, lw.dtype.itemsize
    k0 = lw.soc.cube.k0(isz)
    sh, sw = strides
    pt, pl, _, _ = pads
    dh, dw = dilations
    _, _, ho_, wo_ = out_shape
    ia, ib = _used_taps(kh_, dh, sh, pt, h_, ho_)
    ja, jb = _used_taps(kw_, dw, sw, pl, w_, wo_)
    w = w[:, :, ia:ib, ja:jb]
    kh_, kw_ = ib - ia, jb - ja
    geo = _ConvGeom(x.c1, h_, w_, kh_, kw_, sh, sw, dh, dw, pt - ia * dh, pl - ja * dw, ho_, wo_, c0in)
    c1in = x.c1
    kdim = small_cin.c04_k(c1in, kh_, kw_, k0) if c04 else c1in * kh_ * kw_ * 16
    n1 = math.ceil(cout / 16)
    np_ = n1 * 16

    m_t, n_t, k_t = _default_tiles(lw, ho_ * wo_, n1, kdim, k0)
    if c04:  # few K columns: every output channel in one tile, the cores split the output positions
        n_t, k_t = small_cin.c04_tiles(lw, n1, kdim, m_t, k0)
    kb = lw.kernel(kernel_hint, loc, {"m": m_t, "n": n_t, "k": k_t}, pins)
    pins = dict(kb.tiling)
    if c04:  # one load holds every C04 block: K is packed across them
        pins.pop("c1", None)
        pins["taps"] = 0
    m_t, n_t, k_t = kb.tiling["m"], kb.tiling["n"], kb.tiling["k"]
    n_tiles = _n_tiles(np_, n_t, loc)
    kb.partition(n_tiles)  # SPMD over output-channel tiles ...
    cores = kb.block_dim if "block_dim" in pins else min(lw.cores, n_tiles * max(1, lw.cores // n_tiles))
    m_cap = lw.usable("l0c") // (n_t * 4) // 16 * 16  # accumulator positions of one tile in L0C
    # C04: one channel tile whose every K tile fits L0B: the weights, bias and tables are loaded
    # once per core, before the loops (every output tile of the core multiplies the same ones)
    resident = c04 and n_tiles == 1 and kdim * n_t * isz <= lw.usable("l0b")
    geo = dataclasses.replace(geo, resident=resident)
    l1_budget = lw.usable("l1") - (kdim if resident else k_t) * n_t * isz
    # ... over groups of n_blocks cores (each core a channel tile per round) and m_blocks groups of
    # output tiles: fewer channel groups re-read the feature map less, more re-read the weights less
    image = {"x": c1in * h_ * w_ * c0in, "y": n1 * ho_ * wo_ * 16}  # elements of one image

    def split(budget: int, i_blocks: int):
        """(n_blocks, plan) of one image on ``budget`` cores, ``i_blocks`` images at a time."""
        if "n_blocks" in pins:
            n_opts = [pins["n_blocks"]]
        else:
            n_opts = sorted({math.ceil(n_tiles / r) for r in range(1, 17)} & set(range(1, min(budget, n_tiles) + 1)),
                            reverse=True)
        best = None
        for n_blocks in n_opts:
            if not 1 <= n_blocks <= min(budget, n_tiles):
                raise unsupported(loc, f"Conv: tiling n_blocks = {n_blocks}: 1 to {min(budget, n_tiles)} "
                                       f"(the channel tiles, at most the cores)")
            m_blocks_cap = pins.get("m_blocks", max(1, budget // n_blocks))
            limit = (lw.cores if "m_blocks" in pins else cores) // i_blocks  # a pinned split may use every core
            if m_blocks_cap < 1 or n_blocks * m_blocks_cap > limit:
                raise unsupported(loc, f"Conv: tiling m_blocks = {m_blocks_cap} needs {n_blocks} x {m_blocks_cap} "
                                       f"cores, {limit} available")
            plan = _conv_plan(geo, pins, lw.soc, m_cap, l1_budget, isz, m_t, n_t, k_t,
                              math.ceil(n_tiles / n_blocks), loc, m_blocks_cap, n_blocks * i_blocks, n_blocks)
            if best is None or plan[5] < best[1][5] * 0.97:  # fewer channel groups only for a clear gain
                best = (n_blocks, plan)
        return best

    # the batch: i_blocks groups of cores taking every i_blocks-th image (a divisor of the batch; each
    # group's cores move their image arguments by a whole number of elements per channel group)
    if "i_blocks" in pins:
        i_opts = [pins["i_blocks"]]
        if n_ % i_opts[0] or not 1 <= i_opts[0] <= cores:
            raise unsupported(loc, f"Conv: tiling i_blocks = {i_opts[0]}: a divisor of the batch {n_} up to "
                                   f"{cores} cores")
    else:
        i_opts = [d for d in range(1, min(n_, cores) + 1) if n_ % d == 0]
    choice = None
    for i_blocks in i_opts:
        nb, plan = split(cores // i_blocks, i_blocks)
        if i_blocks > 1 and (n_tiles % nb or any(v % nb for v in image.values())):
            if "i_blocks" in pins:
                raise unsupported(loc, f"Conv: tiling i_blocks = {i_blocks} with {nb} channel groups: the channel "
                                       f"tiles ({n_tiles}) and an image's elements must divide evenly")
            continue
        cost = plan[5] * (n_ // i_blocks)
        if choice is None or cost < choice[0] * 0.97:  # more image groups only for a clear gain
            choice = (cost, i_blocks, nb, plan)
    _, i_blocks, n_blocks, (taps, rows, cols, c1c, m_blocks, _) = choice
    kb.block_dim = n_blocks * m_blocks * i_blocks
    kb.tiling["block_dim"] = kb.block_dim
    if m_blocks > 1 or i_blocks > 1:  # core b computes channel tiles b % n_blocks + i * n_blocks of its group's tiles
        kb.block_modulo = n_blocks
    if n_blocks < min(cores, n_tiles) or "n_blocks" in pins:
        kb.tiling["n_blocks"] = n_blocks
    if m_blocks > 1 or "m_blocks" in pins:
        kb.tiling["m_blocks"] = m_blocks
    if i_blocks > 1 or "i_blocks" in pins:
        kb.tiling["i_blocks"] = i_blocks
    kb.tiling["rows"] = rows
    if cols < wo_ or "cols" in pins:
        kb.tiling["cols"] = cols
    if c1c < c1in or "c1" in pins:
        kb.tiling["c1"] = c1c
    if taps or ("taps" in pins and not c04):
        kb.tiling["taps"] = int(taps)
    if c04:
        kb.tiling["c04"] = 1
    loops = pins.get("loops", 0)  # 1: ragged last tiles moved back into the loops (code size over cycles)
    if loops not in (0, 1):
        raise unsupported(loc, f"Conv: tiling loops = {loops}: 0 (ragged last tiles peeled) or 1 (moved back)")
    if "loops" in pins:
        kb.tiling["loops"] = loops

    # weight K order: (c1, kh, kw, c0) as img2col produces it, or per tap (kh, kw, c1, c0)
    if c04:  # (c1, kh, kw, c4), K padded to k0 by fractal_z
        bmat = small_cin.c04_weight_matrix(w, np_)
    else:
        wp = np.zeros((np_, c1in * 16, kh_, kw_), np.float32)
        wp[:cout, :cin] = w
        order = (3, 4, 1, 2, 0) if taps else (1, 3, 4, 2, 0)
        bmat = wp.reshape(np_, c1in, 16, kh_, kw_).transpose(order).reshape(kdim, np_)
    khg, kwg = (1, 1) if taps else (kh_, kw_)
    kk = khg * kwg * 16  # K columns of one C1 block in one group (NC1HWC0)
    img2col_op = tile.Img2colC04Op if c04 else tile.Img2colOp
    groups = [(i * dh, j * dw) for i in range(kh_) for j in range(kw_)] if taps else [(0, 0)]

    wz = lw.constant(fractal_z(bmat, k0, dt), "FRACTAL_Z", (kdim, np_))
    bt = lw.constant(bias_table(b, cout, lw.lanes, dt), "ND")
    y = lw.gm_tensor(out_shape, NC1HWC0)
    xa, wa, ba, ya = kb.arg(x), kb.arg(wz), kb.arg(bt), kb.arg(y)
    kb.block_offset(wa, n_t * k0)
    kb.block_offset(ba, n_t // 16 * lw.lanes)
    kb.block_offset(ya, n_t // 16 * ho_ * wo_ * 16)
    tiles = _CubeTiles(lw, kb, k_t, n_t, m_t, 0, epilogue, l1_k=kdim if resident else None,
                       l0b_k=kdim if resident else None)
    tiles.bind(n_t, n_t // 16 * ho_ * wo_ * 16, lw.lanes)
    l1_fm = kb.alloc(Space.L1, geo.fm_bytes(taps, c1c, rows, cols, isz) // isz, dt)
    l0c = kb.alloc(Space.L0C, _ceil(rows * cols, 16) * n_t, np.dtype(np.float32))
    per_image = {xa: image["x"], ya: image["y"]}
    per_image.update({ra: image["y"] for ra in tiles.residual_args})
    if i_blocks > 1:  # block b starts at image (b // n_blocks) % i_blocks: (b % (n_blocks*i_blocks) - b % n_blocks) / n_blocks
        for a, v in per_image.items():
            kb.emit(tile.BlockOffsetModOp(a, stride=v // n_blocks, modulo=n_blocks * i_blocks))
            if n_blocks > 1:
                kb.emit(tile.BlockOffsetModOp(a, stride=-(v // n_blocks), modulo=n_blocks))

    l1_align = lw.soc.buffer("l1").align

    # elements from one C1 block of an L1 feature-map tile to the next when it does not depend on the
    # tile: a block of the full window (the tiles of a grid; any tile with one block, where it is unused)
    fixed_pitch = geo.fm_bytes(taps, 1, rows, cols, isz) // isz

    def load_fm(ld) -> None:
        """x[image 0, C1 blocks ca..cb, rows r0..r1, columns q0..q1] -> l1_fm [cb-ca][r1-r0][q1-q0][C0],
        C1 block c at c * pitch."""
        _, (_, _, r0, r1), (_, _, q0, q1), ca, cb, how, pitch = ld  # how: only aligned ways (_conv_plan)
        nr, nq, nc, c0 = r1 - r0, q1 - q0, cb - ca, c0in
        src = (ca * h_ + r0) * w_ * c0 + q0 * c0
        step = pitch if nc > 1 else nr * nq * c0  # (one block: a stride no burst uses, as packed)
        if how == "whole":  # whole rows: one burst per C1 block
            kb.copy(xa, l1_fm, src_offset=src, nburst=nc, burst=nr * w_ * c0, src_stride=h_ * w_ * c0,
                    dst_stride=step)
        elif how == "lines":  # one copy per row, a burst per C1 block
            for r in range(nr):
                kb.copy(xa, l1_fm, src_offset=src + r * w_ * c0, dst_offset=r * nq * c0, nburst=nc,
                        burst=nq * c0, src_stride=h_ * w_ * c0, dst_stride=step)
        else:  # one copy per C1 block, a burst per row
            for c in range(nc):
                kb.copy(xa, l1_fm, src_offset=src + c * h_ * w_ * c0, dst_offset=c * pitch, nburst=nr,
                        burst=nq * c0, src_stride=w_ * c0, dst_stride=nq * c0)

    n_rt, n_ct = -(-ho_ // rows), -(-wo_ // cols)  # rows and columns of output tiles
    out_tiles = [(r, c) for r in range(n_rt) for c in range(n_ct)]
    per_block = [len(out_tiles) // m_blocks + (i < len(out_tiles) % m_blocks) for i in range(m_blocks)]
    starts = [sum(per_block[:i]) for i in range(m_blocks + 1)]
    n = 0  # image 0's code; the batch loop moves to the next image

    def tile_code(ho0: int, wo0: int, lo=(True, True), hi=(True, True), grid: bool = False) -> None:
        """One output tile (at output row ``ho0``, column ``wo0``, clipped to the map): its
        feature-map loads and every output-channel tile of this core. ``lo`` / ``hi`` (rows,
        columns): False leaves the tile and its input windows unclipped at that low / high edge
        (the virtual tiles of :func:`cann.lowering.rolling.border_plan`); ``grid``: a tile of
        :func:`_tile_grid` (its feature map copied a C1 block at a time, each at the fixed
        pitch of the full window, which img2col's ``fm_c1_stride`` reads)."""
        ho1 = min(ho_, ho0 + rows) if hi[0] else ho0 + rows
        wo1 = min(wo_, wo0 + cols) if hi[1] else wo0 + cols
        m_valid = (ho1 - ho0) * (wo1 - wo0)
        m_pad = _ceil(m_valid, 16)

        def clip(win, low: bool, high: bool):
            start, end, a, b_ = win
            return start, end, a if low else start, b_ if high else end

        loads = []  # (group, row window, column window, C1 blocks ca..cb) reading real input
        for gi, (oy, ox) in enumerate(groups):
            rw = _window(ho0, ho1, sh, geo.pt, oy, dh, khg, h_)
            cw = _window(wo0, wo1, sw, geo.pl, ox, dw, kwg, w_)
            if grid or (rw[3] > rw[2] and cw[3] > cw[2]):  # (a virtual tile may lie past the map)
                nr, nq = rw[3] - rw[2], cw[3] - cw[2]  # the real window
                rw, cw = clip(rw, lo[0], hi[0]), clip(cw, lo[1], hi[1])
                for ca in range(0, c1in, c1c):
                    cb = min(c1in, ca + c1c)
                    # a tile of a grid copies a burst per row of each C1 block (one copy per block
                    # whatever its window: the same ops in every tile); else the way its window allows
                    how = "blocks" if grid and c0in * isz % l1_align == 0 else _fm_copy(nr, nq, cb - ca, w_, c0in,
                                                                                       isz, l1_align)
                    # a grid's blocks at the fixed pitch: the same fields in every tile whatever its
                    # window (its window's size, a product of two clamps, is not one loop_clamp);
                    # else packed, where the way copied them (as aligned as _fm_copy found it)
                    fixed = (grid and how == "blocks") or cb - ca == 1
                    loads.append((gi, rw, cw, ca, cb, how, fixed_pitch if fixed else nr * nq * c0in))
        shared = len(loads) == 1  # one L1 tile serves every output-channel tile
        if shared:
            load_fm(loads[0])

        def body(first: int, last: bool = False, ho0=ho0, wo0=wo0, m_valid=m_valid, m_pad=m_pad,
                 loads=loads, shared=shared) -> None:
            nt0, nt = first * n_t, n_t
            init = 1
            for ld in loads:
                gi, (rs, re, r0, r1), (qs, qe, q0, q1), ca, cb, _, pitch = ld
                if not shared:
                    load_fm(ld)
                kbase, kc = ((0, kdim) if c04 else ((gi * c1in + ca) * kk, (cb - ca) * kk))
                for kt0 in range(0, kc, k_t):
                    kt = min(k_t, kc - kt0)
                    if not resident:
                        tiles.load_weights(wa, n1, kbase + kt0, kt, nt0, nt)

                    def subtile(s: int, kt0=kt0, kt=kt, init=init, ca=ca, cb=cb, rs=rs, re=re, r0=r0, r1=r1,
                                qs=qs, qe=qe, q0=q0, q1=q1, pitch=pitch) -> None:
                        ms0 = s * m_t
                        ms = min(m_t, m_pad - ms0)
                        kb.emit(img2col_op(
                            l1_fm, tiles.l0a, fm_c1=cb - ca, fm_h=r1 - r0, fm_w=q1 - q0, pad_t=r0 - rs,
                            pad_b=re - r1, pad_l=q0 - qs, pad_r=qe - q1, stride_h=sh, stride_w=sw,
                            kernel_h=khg, kernel_w=kwg, dil_h=dh, dil_w=dw, m_start=ms0, m_count=ms,
                            k_start=kt0, k_count=kt, fm_c1_stride=pitch))
                        kb.emit(tile.MmadOp(tiles.l0a, tiles.l0b, l0c, c_offset=ms0 * nt, m=ms, k=kt, n=nt,
                                            init=init, b_offset=kt0 * nt if resident else 0))

                    # the M subtiles: one hardware loop stepping m_start and the L0C offset
                    kb.roll(-(-m_pad // m_t), subtile)
                    init = 0
            if not resident:
                tiles.load_bias(ba, nt0, nt)
                tiles.load_tables(nt0, nt)
            n1t = nt // 16

            def out_subtile(s: int, nt0=nt0, nt=nt, ho0=ho0, wo0=wo0, m_valid=m_valid, m_pad=m_pad) -> None:
                ms0 = s * m_t
                ms = min(m_t, m_pad - ms0)
                valid = min(ms, m_valid - ms0)
                if valid <= 0:
                    return
                base = (n * n1 + nt0 // 16) * ho_ * wo_ * 16
                segs = _row_segments(ms0, valid, wo1 - wo0, ho0, wo0, wo_)
                n1t_ = n1t

                def move(src, dst, into_ub: bool, segs=segs, base=base, valid=valid, n1t=n1t_) -> None:
                    """GM <-> UB ([n1t][valid][16]) for the subtile's positions, a copy per map row
                    they cover (one when they are contiguous in the map; with one C0 block, one per
                    run of whole tile rows: a burst per row); the rows' copies are one loop."""
                    tw = wo1 - wo0
                    runs = []  # (tile position, map position, positions per burst, bursts)
                    for p0, gpos, cnt in segs:
                        joins = runs and runs[-1][2] == tw and runs[-1][0] + runs[-1][3] * tw == p0
                        if n1t == 1 and cnt == tw and joins:
                            runs[-1] = (*runs[-1][:3], runs[-1][3] + 1)
                        else:
                            runs.append((p0, gpos, cnt, 1))

                    def seg(i: int) -> None:
                        p0, gpos, cnt, nrow = runs[i]
                        gm, ub = base + gpos * 16, (p0 - ms0) * 16
                        if nrow > 1:  # one C0 block: a burst per map row
                            kb.copy(src, dst, src_offset=gm if into_ub else ub, dst_offset=ub if into_ub else gm,
                                    nburst=nrow, burst=cnt * 16, src_stride=wo_ * 16 if into_ub else cnt * 16,
                                    dst_stride=cnt * 16 if into_ub else wo_ * 16)
                            return
                        kb.copy(src, dst, src_offset=gm if into_ub else ub, dst_offset=ub if into_ub else gm,
                                nburst=n1t, burst=cnt * 16, src_stride=ho_ * wo_ * 16 if into_ub else valid * 16,
                                dst_stride=valid * 16 if into_ub else ho_ * wo_ * 16)
                    kb.roll(len(runs), seg)

                for i, ra in enumerate(tiles.residual_args):
                    move(ra, tiles.bufs[f"r{i}"], True)
                tiles.epilogue(l0c if loads else None, ms0 * nt, n1t, valid, ms)
                move(tiles.ub_out, ya, False)

            # the epilogue per M subtile: one hardware loop stepping the L0C offset and the output
            kb.roll(-(-m_pad // m_t), out_subtile)

        kb.for_tiles(n_tiles, body, cores=n_blocks)  # the channel tiles over the group's cores, in rounds

    if resident:
        tiles.load_weights(wa, n1, 0, kdim, 0, n_t)
        tiles.load_bias(ba, 0, n_t)
        tiles.load_tables(0, n_t)
    with kb.loop(n_ // i_blocks, {a: v * i_blocks for a, v in per_image.items()}):
        for grp in range(m_blocks):  # group grp: blocks (grp*i_blocks + image group)*n_blocks + channel group
            size = n_blocks * i_blocks
            with kb.core_group(grp * size, size) if m_blocks > 1 else contextlib.nullcontext():
                mine = out_tiles[starts[grp]:starts[grp + 1]]
                _emit_tiles(kb, mine, n_ct, rows, cols, ho_, wo_, tile_code, bool(loops))
    lw.launch(kb)
    return y


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
    kp = _ceil(k_, k0)
    n1 = math.ceil(n_ / 16)
    m_t = min(128, _ceil(m_, 16))
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
        n_pad = _ceil(ncols, 16)
        for mt0 in range(0, m_, m_t):
            rows = min(m_t, m_ - mt0)
            m_pad = _ceil(rows, 16)
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
