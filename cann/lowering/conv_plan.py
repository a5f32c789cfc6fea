"""A convolution's tiling plan: its geometry, the feature-map windows and copies, the cost model and the choice.

Pure functions of the shapes, the pinned values and the SoC (:class:`cann.hw.config.SocSpec`),
used by the lowering (:func:`cann.lowering.conv.conv2d`) and by AutoTune (:mod:`cann.autotune`,
which ranks candidate tilings by :func:`conv_plan`'s estimate).

Tiling (recorded on each kernel as ``tile.tiling``, overridable per kernel): ``n`` output channels
and ``k`` reduction columns per L0B tile, ``m`` output positions per L0A tile (:func:`default_tiles`);
for Conv ``rows`` output rows per L1 feature-map tile and, when split, ``cols`` output columns of one
row (both pinned: ``rows`` x ``cols`` rectangles), ``c1`` input C1 blocks per L1 load (partial sums
accumulate in L0C) and ``taps`` (1: one 1x1 sub-convolution per kernel tap), chosen by
:func:`conv_plan` among the tilings that fit as the cheapest by :func:`conv_cycles`. Defaults fill
L0A/L0B and keep the accumulator of a whole tile in L0C; every axis is split as far as the SoC's
buffers need, so no size is refused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from cann.hw.config import SocSpec
from cann.lowering.common import Lowering, unsupported
from cann.lowering.cube import round_up


def default_tiles(lw: Lowering, m_hint: int, n1: int, k_total: int, k0: int) -> tuple[int, int, int]:
    """(m, n, k): ``n`` (a divisor of the padded N, at most 128) small enough that the N tiles
    occupy every core, ``m`` up to 128, ``k`` filling one copy's budget of L0A / L0B
    (ascend-core.md §2.1 via the SoC, :meth:`Lowering.usable`)."""
    isz = lw.dtype.itemsize
    target = max(1, min(8, n1 // min(lw.cores, n1)))
    n = 16 * max(d for d in range(1, target + 1) if n1 % d == 0)
    m = min(128, round_up(m_hint, 16))
    l0a, l0b = lw.usable("l0a"), lw.usable("l0b")
    k = min(l0a // (m * isz), l0b // (n * isz))
    k = max(k0, k // k0 * k0)
    return m, n, min(k, round_up(k_total, k0))


def channel_tiles(np_: int, n_t: int, loc) -> int:
    if n_t % 16 or np_ % n_t:
        raise unsupported(loc, f"tiling: n = {n_t} must be a multiple of 16 dividing {np_}")
    return np_ // n_t



def used_taps(k: int, dil: int, stride: int, pad: int, size: int, out: int) -> tuple[int, int]:
    """Kernel taps ``[lo, hi)`` along one axis that read real input for some output position
    (tap ``i`` reads ``o*stride - pad + i*dil``, ``0 <= o < out``); ``(0, k)`` if none does."""
    used = []
    for i in range(k):
        o = max(0, -(-(pad - i * dil) // stride))
        if o < out and o * stride - pad + i * dil < size:
            used.append(i)
    return (used[0], used[-1] + 1) if used else (0, k)


def input_window(o0: int, o1: int, stride: int, pad: int, off: int, dil: int, k: int,
            size: int) -> tuple[int, int, int, int]:
    """Input span of outputs ``[o0, o1)`` along one axis: ``(start, end)`` in padded coordinates
    and the real positions ``[lo, hi)`` within it (``hi <= lo``: the span reads only padding)."""
    start = o0 * stride - pad + off
    end = (o1 - 1) * stride - pad + off + dil * (k - 1) + 1
    return start, end, max(start, 0), min(end, size)


@dataclass(frozen=True)
class ConvGeom:
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


def fm_copy(nr: int, nq: int, nc: int, w: int, c0: int, isz: int, align: int) -> str | None:
    """How the convolution's feature-map load (``cann.lowering.conv._load_fm``) copies a ``[nc][nr][nq][c0]``
    feature-map tile of a ``w``-wide map into L1 so that every copy's L1 address is on an ``align``-byte
    boundary (the SoC's L1 alignment): ``"whole"`` (whole rows, one copy), ``"lines"`` (a copy per
    row), ``"blocks"`` (a copy per C1 block), or None when no way keeps the addresses aligned (only
    an NC1HWC0_C04 map with several C1 blocks and a partial row: its 4-channel pixels are 8 or 16
    bytes; an NC1HWC0 pixel is 32 or 64)."""
    if nq == w:
        return "whole"
    line, plane = nq * c0 * isz % align == 0, nr * nq * c0 * isz % align == 0
    lines = "lines" if nr == 1 or line else None
    blocks = "blocks" if nc == 1 or plane else None
    if nr <= nc:
        return lines or blocks
    return blocks or lines


def fm_copies_aligned(g: ConvGeom, rows: int, cols: int, c1: int, isz: int, align: int) -> bool:
    """Whether every feature-map load of a whole-kernel tiling (``rows`` x ``cols`` output tiles, ``c1``
    C1 blocks per load) has an aligned way to L1 (:func:`fm_copy`)."""
    if g.c0 * isz % align == 0:
        return True
    for ho0 in range(0, g.ho, rows):
        _, _, r0, r1 = input_window(ho0, min(g.ho, ho0 + rows), g.sh, g.pt, 0, g.dh, g.kh, g.h)
        for wo0 in range(0, g.wo, cols):
            _, _, q0, q1 = input_window(wo0, min(g.wo, wo0 + cols), g.sw, g.pl, 0, g.dw, g.kw, g.w)
            for ca in range(0, g.c1in, c1):
                if r1 > r0 and q1 > q0 and fm_copy(r1 - r0, q1 - q0, min(g.c1in, ca + c1) - ca, g.w, g.c0, isz,
                                                    align) is None:
                    return False
    return True


#: the exponent of the p-norm combining a convolution's pipe streams in :func:`conv_cycles` (equal
#: streams cost 2^(1/p) of one)
CONV_OVERLAP_NORM = 4


def conv_cycles(g: ConvGeom, soc: SocSpec, taps: bool, rows: int, cols: int, c1: int, isz: int, k_t: int, n_t: int,
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
    k_all = round_up(groups * g.c1in * kk, cube.k0(isz))
    m_pad = round_up(rows * cols, 16)
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
        stages = (fm_cycles, img2col, mmad, m_pad * n_t * (4 / max(bw.l0c_to_ub, 1) + isz / gm_bw)
                  + m_sub * (lat.mte_startup + 3 * lat.vector_startup))
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


def conv_plan(geo: ConvGeom, pins: dict[str, int], soc: SocSpec, m_cap: int, l1_budget: int, isz: int, m_t: int,
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
    by ``conv_cycles``
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
            if c1 < 1 or round_up(rows * cols, 16) > m_cap or fm(c1, rows, cols) > l1_budget:
                c1 = max(c1, 1)
                refused = (f"Conv: tiling rows = {rows}, cols = {cols}, c1 = {c1} needs {round_up(rows * cols, 16)} "
                           f"L0C positions ({m_cap} available) and {fm(c1, rows, cols)} bytes of L1 "
                           f"({l1_budget} available)")
                continue
            if not taps and not fm_copies_aligned(g, rows, cols, c1, isz, soc.buffer("l1").align):
                refused = (f"Conv: tiling rows = {rows}, cols = {cols}: an NC1HWC0_C04 feature-map load would "
                           f"start off an L1 alignment boundary")
                continue
            # groups only for tiles of at least one fractal's 16 positions (no padded M just to use cores)
            blocks = min(m_blocks_cap, math.ceil(g.ho / rows) * math.ceil(g.wo / cols)) if rows * cols >= 16 or \
                "m_blocks" in pins else 1
            cost = conv_cycles(g, soc, taps, rows, cols, c1, isz, k_t, n_t, m_t, rounds, blocks, blocks * n_cores,
                                shared)
            if best is None or cost < best[0]:
                best = (cost, rows, cols, c1, blocks)
    if best is None:  # only with pinned values: unpinned, one position of one C1 block always fits
        raise unsupported(loc, refused)
    return taps, best[1], best[2], best[3], best[4], best[0]


@dataclass(frozen=True)
class CoreSplit:
    """A convolution's work split over the cores and its feature-map tiling: ``i_blocks`` groups of
    cores taking every ``i_blocks``-th image, each of ``m_blocks`` groups (of its share of the output
    tiles) x ``n_blocks`` cores (a channel tile per core per round; ``block_dim`` is the product);
    ``taps``, ``rows``, ``cols``, ``c1``: :func:`conv_plan`'s, with its estimate ``cycles`` of one image."""

    i_blocks: int
    n_blocks: int
    m_blocks: int
    taps: bool
    rows: int
    cols: int
    c1: int
    cycles: float


def split_cores(geo: ConvGeom, pins: dict[str, int], soc: SocSpec, all_cores: int, cores: int, n_tiles: int,
                batch: int, image: tuple[int, ...], m_cap: int, l1_budget: int, isz: int, m_t: int, n_t: int,
                k_t: int, loc) -> CoreSplit:
    """The cheapest split of a convolution of ``n_tiles`` output-channel tiles and ``batch`` images over
    ``cores`` cores (``all_cores`` for a pinned ``m_blocks``), with its tiling (:func:`conv_plan`).

    The cores form groups of ``n_blocks`` (each core a channel tile per round) over ``m_blocks`` groups
    of output tiles: fewer channel groups re-read the feature map less, more re-read the weights less;
    fewer channel groups, and more image groups, are taken only for a clear (3%) gain. ``i_blocks``
    (image groups) divides the batch, and with two or more it divides neither the channel tiles nor
    any of ``image`` (elements of one image of each per-image argument) unevenly over the channel
    groups. Pinned ``n_blocks`` / ``m_blocks`` / ``i_blocks`` fix their axis.

    Raises:
        CannError: a pinned value out of its range, or pins that leave no tiling (:func:`conv_plan`).
    """

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
            limit = (all_cores if "m_blocks" in pins else cores) // i_blocks  # a pinned split may use every core
            if m_blocks_cap < 1 or n_blocks * m_blocks_cap > limit:
                raise unsupported(loc, f"Conv: tiling m_blocks = {m_blocks_cap} needs {n_blocks} x {m_blocks_cap} "
                                       f"cores, {limit} available")
            plan = conv_plan(geo, pins, soc, m_cap, l1_budget, isz, m_t, n_t, k_t,
                             math.ceil(n_tiles / n_blocks), loc, m_blocks_cap, n_blocks * i_blocks, n_blocks)
            if best is None or plan[5] < best[1][5] * 0.97:  # fewer channel groups only for a clear gain
                best = (n_blocks, plan)
        return best

    # the batch: i_blocks groups of cores taking every i_blocks-th image (a divisor of the batch; each
    # group's cores move their image arguments by a whole number of elements per channel group)
    if "i_blocks" in pins:
        i_opts = [pins["i_blocks"]]
        if batch % i_opts[0] or not 1 <= i_opts[0] <= cores:
            raise unsupported(loc, f"Conv: tiling i_blocks = {i_opts[0]}: a divisor of the batch {batch} up to "
                                   f"{cores} cores")
    else:
        i_opts = [d for d in range(1, min(batch, cores) + 1) if batch % d == 0]
    choice = None
    for i_blocks in i_opts:
        nb, plan = split(cores // i_blocks, i_blocks)
        if i_blocks > 1 and (n_tiles % nb or any(v % nb for v in image)):
            if "i_blocks" in pins:
                raise unsupported(loc, f"Conv: tiling i_blocks = {i_blocks} with {nb} channel groups: the channel "
                                       f"tiles ({n_tiles}) and an image's elements must divide evenly")
            continue
        cost = plan[5] * (batch // i_blocks)
        if choice is None or cost < choice[0] * 0.97:  # more image groups only for a clear gain
            choice = (cost, i_blocks, nb, plan)
    _, i_blocks, n_blocks, (taps, rows, cols, c1, m_blocks, cycles) = choice
    return CoreSplit(i_blocks, n_blocks, m_blocks, taps, rows, cols, c1, cycles)
