"""Gemm / MatMul by a constant on the cube: a 2-D split of the output over the cores.

``A`` [M, K] (ND, in GM) times a constant ``B`` [K, N] (stored at compile time in FRACTAL_Z,
``[K1][N1][16][k0]``) plus an optional bias and fused epilogue, in the spirit of Ascend C's
``TCubeTiling`` (docs/pipelining.md, "GEMM tiling"):

* **core blocks** -- the output is cut into ``m_blocks`` x ``n_blocks`` blocks of ``sm`` x ``sn``
  (multiples of 16), one per core (``block_dim = m_blocks * n_blocks``). Core ``b`` computes block
  ``(b // n_blocks, b % n_blocks)``: its N offset is a ``block_offset_mod`` of the weight, bias
  and output pointers, its M offset is in the code of its group of ``n_blocks`` cores
  (``KernelBuilder.core_group``); the last, narrower N block is guarded to its cores.
* **L0C tiles** -- each core walks its block in ``m`` x ``n`` accumulator tiles (fp32 in L0C), each
  reading its ``m`` rows of A and ``n`` columns of B once from GM, ``step_k`` x ``k`` columns of K per
  L1 load (``nd2nz`` for A, a burst copy of FRACTAL_Z for B); each L1 chunk feeds ``step_k`` cube
  steps of ``k`` (``load2d`` to L0A / L0B, ``mmad``) accumulating in L0C; then L0C -> UB, bias,
  epilogue, UB -> GM.
* **skew** -- with the A panel (a row of tiles keeping its A rows in L1 for the whole K), the row's
  N tiles may share the K chunks, tile ``j`` running chunk ``c`` in round ``c + j * skew`` in its own
  accumulator, so that MTE2 loads B for every running tile while the cube works.

The split is chosen by :func:`plan` from ``cann/hw`` figures only (cube rate, per-core and shared GM
bandwidth, L2 rate, L1 -> L0 bandwidths, startups, the buffers' usable bytes); every key may be
pinned through ``convert-graph-to-tile{tiling=...}``.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from dataclasses import dataclass

import numpy as np

from cann.dialects import tile
from cann.dialects.tile import Space
from cann.lowering import gemv
from cann.lowering.common import ND, DevTensor, Lowering, ub_chunk, unsupported
from cann.lowering.cube import CubeTiles, Epilogue, bias_table, fractal_z, round_up

#: cube steps of one L0C tile up to which its K chunks are unrolled rather than a hardware loop
#: (whose end is a barrier of every pipe: the next chunk's load cannot start under the last mmads)
UNROLL_STEPS = 16

#: a core's L0C tiles are unrolled up to this many tiles and this many cube steps over them (else a
#: hardware loop, whose end is a barrier of every pipe: a tile's epilogue would not overlap the next
#: tile's loads)
UNROLL_TILES = 8
UNROLL_TILE_STEPS = 64

#: an unpinned A panel (``a_panel``) is chosen only when estimated this much faster (its estimate is
#: divided by it): the smaller L0C tiles it pays off with cost more per tile than :func:`_cost` counts
#: (fitted with the 4-norm model: estimated / simulated gains 4.8% / -1.2% on 100x300x90, 5.3% / 0.5% on
#: 1024^3, 0.5% / -0.2% on 1x4096x4096, 11.2% / 11.6% on 256^3; kept with the pipeline model: on the
#: 7 smallest shapes of the GEMM suite the picks are the same with 1.0, and the median tau 0.948 / 0.940)
PANEL_MARGIN = 0.93

#: a core's L0C tiles in a hardware loop (:data:`UNROLL_TILES`) without the A panel: the share of its
#: cube (or MTE1) stream that waits for the loads instead of overlapping them (the loop's barrier
#: ends each tile; fitted to the simulator: 0.25 over 1,0.75,0.5,0.25,0 on 1024^3, 1x4096x4096, 256^3)
TILE_LOOP_WAIT = 0.25

#: the K chunks of a tile in a hardware loop (:data:`UNROLL_STEPS`) inside the tiles' loop: the share
#: of each chunk's steps (MTE1 and cube) that waits for its load (fitted as :data:`TILE_LOOP_WAIT`:
#: 0.5 over 1, 0.5, 0; a chunk loop in unrolled tiles overlaps its loads: 2048^3's 256 x 256 tiles)
CHUNK_LOOP_WAIT = 0.5
#: the A panel's N tiles one after another (``skew`` 0): the share of the per-tile imbalance (a row's
#: first tile loading A and B, the others B only, each bound by its own larger stream, against the
#: streams' totals) that the pipes do not hide (fitted: 1024^3 13,590 cycles sequential, 12,950 with
#: skew 1; 512x768x3072 14,035 / 13,572)
PANEL_WAIT = 0.5

#: contention of near-equal streams: :func:`_cost` adds the excess of the p-norm of the cube, MTE2 and
#: MTE1 streams over their largest (equal streams cost 2^(1/p) of one; the old model's p = 4 on the
#: total over-charged equal cube and MTE2 streams; fitted: p = 6 over 4, 6, 8, 12 and none on 8 shapes
#: of the GEMM suite, and 2048^3 picks the simulated-faster 256 x 256 tiles, 78,816 cycles, not the
#: 128 x 128 A panel's 83,815 that a plain max prefers)
OVERLAP_NORM = 6

#: bytes of zeros a memset launch keeps in UB (its stores re-read them: fewer vector repeats first)
ZERO_BYTES = 1024

#: while :func:`considered` collects: the list :func:`plan` appends every tiling it weighs to
_CONSIDERED: contextvars.ContextVar[list | None] = contextvars.ContextVar("gemm_considered", default=None)

#: the tiling keys of a gemm kernel (``tile.tiling``); a pinned ``sm`` / ``sn`` pins the block count giving it
KEYS = ("m_blocks", "n_blocks", "sm", "sn", "m", "n", "k", "step_k", "a_panel", "skew", "k_blocks", "block_dim")


@dataclass(frozen=True)
class GemmPlan:
    """A gemm kernel's tiling (see the module docstring); ``cycles`` is the estimate it was chosen by."""

    m_blocks: int
    n_blocks: int
    sm: int
    sn: int
    m: int
    n: int
    k: int
    step_k: int
    cycles: float
    a_panel: int = 0
    #: K split across cores: ``k_blocks`` groups of ``m_blocks * n_blocks`` cores, group ``p`` summing
    #: K columns ``p * k_part ..`` into the output with atomic adds (1: no split)
    k_blocks: int = 1
    k_part: int = 0
    #: with the A panel: the N tiles of a row share its K chunks, each ``skew`` chunks behind the
    #: previous, in accumulators of their own (0: the tiles one after another)
    skew: int = 0

    def as_tiling(self) -> dict[str, int]:
        split = {"k_blocks": self.k_blocks} if self.k_blocks > 1 else {}
        if self.skew:
            split["skew"] = self.skew
        return {"m_blocks": self.m_blocks, "n_blocks": self.n_blocks, "sm": self.sm, "sn": self.sn, "m": self.m,
                "n": self.n, "k": self.k, "step_k": self.step_k, "a_panel": self.a_panel, **split,
                "block_dim": self.m_blocks * self.n_blocks * self.k_blocks}


def _split(total16: int, parts: int) -> tuple[int, int]:
    """``(size, used)``: ``total16`` blocks of 16 cut into ``parts`` near-equal pieces of ``size``
    (a multiple of 16) and the pieces that are not empty."""
    size = math.ceil(total16 / parts)
    return size * 16, math.ceil(total16 / size)


def _cost(lw: Lowering, m_: int, k_: int, n_: int, sm: int, sn: int, cm: int, cn: int, kt: int, kc: int,
          gm: int, gn: int, parts: bool = False, a_panel: int = 0, skew: int = 0, one_code: bool = False):
    """Estimated cycles of the busiest core (the first block: ``min(sm, M)`` rows x ``min(sn, N)``
    columns, K = ``k_``), from its per-pipe streams and the loop structure :func:`gemm` emits.

    Streams (each pipe's busy cycles, as the simulator charges the instructions): cube (one ``mmad``
    of ``kt`` per step, padded rows and columns), MTE2 (``nd2nz`` of the A rows -- the real rows, once
    per row of tiles with ``a_panel`` -- and the burst copy of the B columns per L1 chunk; of the A
    rows the ``gn`` cores of a block row share, 1/gn from HBM and the rest from the L2; of the B
    columns the ``gm`` block rows share, the L2's part scaled by the share of the launch's bytes it
    holds, or all of it with ``one_code`` (:func:`one_code`: the block rows run one code, so the
    cores of a block column read its B columns together); docs/core-model.md "L2"), MTE1
    (``load2d`` to L0A / L0B per step) and MTE3 (UB -> GM).

    Combination (a pipeline: the binding stream plus what cannot overlap it): the first L1 chunk
    (``fill``) precedes every MTE1 / cube step; after the last L1 load its chunk's steps remain
    (``tail``: MTE1 and cube pipelined, the larger per step plus one of the other); after the last
    step, one tile's epilogue (``drain``). So the core takes ``max(mte2 + tail, fill + compute,
    fill + mte3) + drain``, ``compute`` being the MTE1 and cube streams pipelined. The earlier model
    (the streams as a 4-norm plus ``fill`` plus ``drain``) charged the fill a second time when MTE2
    binds (it is that stream's first load), missed the tail, and charged equal cube and MTE2
    streams 2^(1/4) of one; near-equal cube, MTE2 and MTE1 streams still contend: the excess of
    their :data:`OVERLAP_NORM`-norm over the largest is added. A hardware loop's end is a barrier
    of every pipe, so when the tiles are a loop (above :data:`UNROLL_TILES`): with the K chunks a
    loop too (above :data:`UNROLL_STEPS` steps) :data:`CHUNK_LOOP_WAIT` of every chunk's steps
    waits for its load; else, without the A panel, :data:`TILE_LOOP_WAIT` of the cube (or MTE1)
    stream waits for the tiles' loads. An A panel's N tiles one after another (``skew`` 0) are each
    bound by their own larger stream (the row's first tile loads A and B, the others B only):
    :data:`PANEL_WAIT` of that imbalance is added; a skew interleaves them (the streams' totals).

    Returns:
        The estimate in cycles (a float); with ``parts`` a dict of the terms (``cube``, ``mte2``,
        ``mte1``, ``mte3``, ``fill``, ``tail``, ``drain``, ``contention``, ``chunk_loop``, ``tile_loop``,
        ``panel_wait``, ``cycles``).
    """
    soc, isz = lw.soc, lw.dtype.itemsize
    bw, lat, cube = soc.bandwidth, soc.latency, soc.cube
    k0 = cube.k0(isz)
    kp = round_up(k_, k0)
    rows = min(sm, m_)  # the A rows the block reads (nd2nz moves the real rows)
    rp, cols = min(sm, round_up(m_, 16)), min(sn, round_up(n_, 16))  # padded rows (L0A, cube) and B columns
    tm, tn = math.ceil(rp / cm), math.ceil(cols / cn)
    tiles = tm * tn
    steps, csteps, loads = math.ceil(kp / kt), math.ceil(min(kc, kp) / kt), math.ceil(kp / kc)
    rate = cube.fp32_rate_divisor if isz == 4 else 1
    step_mac = lat.cube_startup + (cm // 16) * (cn // 16) * (kt // k0) * rate
    mac = tiles * steps * lat.cube_startup + (rp // 16) * (cols // 16) * (kp // k0) * rate
    active = gm * gn
    # L2 hits: A rows are read by the gn cores of a block row, which run one code (a "group",
    # docs/core-model.md "L2": always shared); B columns by gm groups, shared as far as the launch's
    # distinct bytes fit the L2 -- or by one group when every block runs one code
    scale = 1.0 if one_code else min(1.0, soc.l2.size / ((m_ * k_ + k_ * n_ + m_ * n_) * isz))
    hit_a, hit_b = (gn - 1) / gn, (gm - 1) / gm * scale
    a_times = 1 if a_panel else tn  # each A row is loaded once per row of tiles (a_panel) or per tile
    a_bytes, b_bytes = rows * k_ * isz * a_times, cols * kp * isz * tm
    hbm = a_bytes * (1 - hit_a) + b_bytes * (1 - hit_b)
    hbm_bw = min(bw.gm_to_l1, bw.gm_total / active)
    a_loads, b_loads = loads * tm * a_times, loads * tiles
    mte2_a = a_bytes * ((1 - hit_a) / hbm_bw + hit_a / soc.l2.rate) + a_loads * lat.mte_startup + \
        lat.burst_overhead * loads * (rows - tm) * a_times
    mte2 = mte2_a + b_bytes * ((1 - hit_b) / hbm_bw + hit_b / soc.l2.rate) + b_loads * lat.mte_startup + \
        lat.burst_overhead * tiles * (kp // k0 - loads)
    a_l0 = min(cm // 16, kt // k0)  # load2d instructions per step for A (+ one for B)
    step_mte1 = (a_l0 + 1) * lat.mte_startup + (cm * kt * isz) / bw.l1_to_l0a + (kt * cn * isz) / bw.l1_to_l0b
    mte1 = tiles * steps * (a_l0 + 1) * lat.mte_startup + rp * kp * isz * tn / bw.l1_to_l0a + \
        cols * kp * isz * tm / bw.l1_to_l0b
    wr_bw = min(bw.ub_to_gm, bw.gm_total / active)
    mte3 = rows * min(sn, n_) * isz / wr_bw + tiles * lat.mte_startup + lat.burst_overhead * rows * tn
    # the first L1 chunk (mostly from HBM), the steps after the last load, the last tile's epilogue
    ra = min(cm, rows)
    chunk_a, chunk_b = ra * min(kc, k_) * isz, cn * min(kc, kp) * isz
    fill = (chunk_a * (1 - hit_a) + chunk_b * (1 - hit_b)) / hbm_bw + (chunk_a * hit_a + chunk_b * hit_b) / \
        soc.l2.rate + 2 * lat.mte_startup + (ra + min(kc, kp) // k0) * lat.burst_overhead
    tail = csteps * max(step_mte1, step_mac) + min(step_mte1, step_mac)
    drain = cm * cn * 4 / bw.l0c_to_ub + cm * cn * isz / wr_bw + cm * lat.burst_overhead + 3 * lat.mte_startup
    serial = tiles * cm * cn * 4 / bw.l0c_to_ub if cm * cn * 4 * max(1, lw.buffers) > lw.usable("l0c") else 0
    compute = max(mac, mte1) + min(step_mac, step_mte1) + serial
    chunk_loop = loads * csteps > UNROLL_STEPS
    tile_loop = not (tiles <= UNROLL_TILES and tiles * steps <= UNROLL_TILE_STEPS)
    if tile_loop and chunk_loop:  # both loops: each chunk's load waits for part of the previous steps
        waits = CHUNK_LOOP_WAIT * tiles * loads * tail
    elif tile_loop and not a_panel:  # each tile's loads wait for part of the previous tile's steps
        waits = TILE_LOOP_WAIT * max(mac, mte1)
    else:
        waits = tail
    streams = (mac + serial, mte2, mte1)
    contention = sum(x ** OVERLAP_NORM for x in streams) ** (1 / OVERLAP_NORM) - max(streams)
    # the A panel's tiles one after another: a row's first tile loads the row's A as well as its B,
    # the others B only; each tile is bound by its own larger stream (no skew interleaving them)
    panel_wait = 0.0
    if a_panel and not skew and tn > 1:
        b_tile, c_tile = (mte2 - mte2_a) / tiles, max(mac, mte1) / tiles
        a_row = mte2_a / tm
        panel_wait = PANEL_WAIT * tm * (max(a_row + b_tile, c_tile) + (tn - 1) * max(b_tile, c_tile) -
                                        max(a_row + tn * b_tile, tn * c_tile))
    cycles = max(mte2 + waits, fill + compute, fill + mte3) + contention + drain + panel_wait
    if parts:
        return {"cube": mac + serial, "mte2": mte2, "mte1": mte1, "mte3": mte3, "fill": fill, "tail": tail,
                "drain": drain, "contention": contention, "chunk_loop": chunk_loop, "tile_loop": tile_loop,
                "panel_wait": panel_wait, "cycles": cycles}
    return cycles


def one_code(m_: int, n_: int, sm: int, sn: int, gm: int, gn: int, gk: int) -> bool:
    """Whether every core of a ``gm`` x ``gn`` grid of ``sm`` x ``sn`` blocks runs one code: the
    blocks are all whole (no ragged last row or column of blocks), there is more than one block row
    and no K split; block ``b``'s rows then move by ``b // gn`` (``block_offset_div``) and its
    columns by ``b % gn`` instead of each block row having its own code (``block_if``), so that
    the L2 model sees the cores of a block column read B together (docs/core-model.md "L2")."""
    return gk == 1 and gm > 1 and gm * sm == m_ and gn * sn == n_


def _max_skew(lw: Lowering, m_: int, sm: int, sn: int, cm: int, cn: int, kt: int, kc: int, kp: int) -> int:
    """The largest ``skew`` an A-panel tiling allows (0: none): the block's row has at least two N
    tiles, their fp32 accumulators fit L0C together, and its tiles and their K chunks are unrolled
    (:data:`UNROLL_TILES`, :data:`UNROLL_STEPS`); a skew of the chunks of a tile or more runs the
    tiles one after another (in their own accumulators)."""
    tn = math.ceil(sn / cn)
    tiles = math.ceil(min(sm, round_up(m_, 16)) / cm) * tn
    chunks, steps = math.ceil(kp / kc), math.ceil(kp / kt)
    if tn < 2 or tn * cm * cn * 4 > lw.usable("l0c") or chunks * math.ceil(kc / kt) > UNROLL_STEPS or \
            tiles > UNROLL_TILES or tiles * steps > UNROLL_TILE_STEPS:
        return 0
    return chunks


def _l0_k(lw: Lowering, cm: int, cn: int, k0: int, kp: int, whole: bool = False) -> int:
    """The K of one cube step: what fits L0A (``cm`` rows) and L0B (``cn`` columns), a multiple of
    ``k0`` (0: not even ``k0``); one copy's budget, or the whole buffers with ``whole``."""
    isz = lw.dtype.itemsize
    l0a, l0b = (lw.soc.buffer("l0a").usable, lw.soc.buffer("l0b").usable) if whole else \
        (lw.usable("l0a"), lw.usable("l0b"))
    k = min(l0a // (cm * isz), l0b // (cn * isz)) // k0 * k0
    return min(k, kp)


def _step_k(lw: Lowering, cm: int, cn: int, kt: int, kp: int) -> int:
    """Cube steps of ``kt`` per L1 load: as many as fit one copy's share of L1 (room for a second
    copy when the kernel is multi-buffered), balanced over the loads; at least 1."""
    isz = lw.dtype.itemsize
    budget = lw.usable("l1") // max(1, lw.buffers)
    steps = math.ceil(kp / kt)
    fit = max(1, budget // ((cm + cn) * kt * isz))
    loads = math.ceil(steps / fit)
    return math.ceil(steps / loads)


def plan(lw: Lowering, m_: int, k_: int, n_: int, pins: dict[str, int], loc, m_cap: int = 0) -> GemmPlan:
    """The tiling of an [M, K] x [K, N] gemm kernel: the cheapest by :func:`_cost` over the core grids
    (``m_blocks`` x ``n_blocks`` <= the cores, or the pinned ``block_dim``) and, per grid, the L0C
    tiles of up to 8 near-equal pieces of the block along each axis whose fp32 accumulator fits L0C
    (and, unpinned, at most ``m_cap`` rows: the fused epilogue's UB tiles), with and without the A
    panel, and with the panel ``skew`` 0 or 1 where :func:`_max_skew` allows. Pinned keys fix their value.

    Raises:
        CannError: a pinned value beyond the cores or the buffers' capacities; a ``skew`` without
            the A panel or beyond :func:`_max_skew`.
    """
    isz = lw.dtype.itemsize
    k0 = lw.soc.cube.k0(isz)
    kp = round_up(k_, k0)
    m16, n16 = math.ceil(m_ / 16), math.ceil(n_ / 16)
    cores = lw.cores
    for key in pins:
        if key not in KEYS:
            raise unsupported(loc, f"Gemm: unknown tiling key '{key}' (keys: {', '.join(KEYS)})")
    if pins.get("skew", 0) < 0:
        raise unsupported(loc, f"Gemm: tiling skew = {pins['skew']} must be 0 or more")
    if pins.get("skew", 0) and pins.get("a_panel", 1) == 0:
        raise unsupported(loc, f"Gemm: tiling skew = {pins['skew']} needs the A panel (a_panel = 1)")
    for key in ("m", "n", "k", "m_blocks", "n_blocks", "step_k", "block_dim", "sm", "sn", "k_blocks"):
        if key in pins and pins[key] < 1:
            raise unsupported(loc, f"Gemm: tiling {key} = {pins[key]} must be positive")
    if pins.get("a_panel", 0) not in (0, 1):
        raise unsupported(loc, f"Gemm: tiling a_panel = {pins['a_panel']} must be 0 or 1")
    for key in ("m", "n", "sm", "sn"):
        if key in pins and pins[key] % 16:
            raise unsupported(loc, f"Gemm: tiling {key} = {pins[key]} must be a multiple of 16")
    if "k" in pins and pins["k"] % k0:
        raise unsupported(loc, f"Gemm: tiling k = {pins['k']} must be a multiple of k0 = {k0}")
    gk = pins.get("k_blocks", 1)
    if gk > 1:  # K split: each group of cores plans its part of K
        if gk > kp // k0:
            raise unsupported(loc, f"Gemm: tiling k_blocks = {gk} exceeds the {kp // k0} K fractals of K = {k_}")
        if gk > cores:
            raise unsupported(loc, f"Gemm: tiling k_blocks = {gk} needs {gk} cores, {cores} available")
        k_part = math.ceil(kp // k0 / gk) * k0
        gk = math.ceil(kp / k_part)  # the parts that are not empty
        kp = k_part
    limit = min(cores, pins.get("block_dim", cores)) // gk
    # a block size pins the block count it gives (a recorded tiling pinned back gives itself)
    gm_pin = pins.get("m_blocks") or ("sm" in pins and _split(m16, math.ceil(m16 / (pins["sm"] // 16)))[1]) or None
    gn_pin = pins.get("n_blocks") or ("sn" in pins and _split(n16, math.ceil(n16 / (pins["sn"] // 16)))[1]) or None
    if (gm_pin or 1) * (gn_pin or 1) * gk > cores:
        raise unsupported(loc, f"Gemm: tiling m_blocks = {gm_pin or 1} x n_blocks = {gn_pin or 1}"
                               f"{f' x k_blocks = {gk}' if gk > 1 else ''} needs "
                               f"{(gm_pin or 1) * (gn_pin or 1) * gk} cores, {cores} available")
    l0c = lw.usable("l0c")
    l0c_full = l0c // 4  # accumulator elements (a tile above one copy's share runs single-buffered)
    if "m" in pins or "n" in pins:
        cm_, cn_ = pins.get("m", 16), pins.get("n", 16)
        if cm_ * cn_ * 4 > l0c:
            raise unsupported(loc, f"Gemm: tiling m = {cm_}, n = {cn_} needs {cm_ * cn_ * 4} bytes of L0C "
                                   f"(fp32 accumulators), {l0c} available")
        if _l0_k(lw, cm_, cn_, k0, kp, whole=True) < k0:
            raise unsupported(loc, f"Gemm: tiling m = {cm_}, n = {cn_} leaves no room for k = {k0} in L0A / L0B")
    best, refused = None, ""
    l0a_full, l0b_full = lw.soc.buffer("l0a").usable, lw.soc.buffer("l0b").usable
    for gm in ([gm_pin] if gm_pin else range(1, min(limit, m16) + 1)):
        sm, gm_used = _split(m16, min(gm, m16))
        if gm_used != gm and not gm_pin:
            continue
        for gn in ([gn_pin] if gn_pin else range(1, min(limit // gm, n16) + 1)):
            sn, gn_used = _split(n16, min(gn, n16))
            if gn_used != gn and not gn_pin:
                continue
            if gm_used * gn_used > limit and not (gm_pin and gn_pin):
                continue
            cms = [pins["m"]] if "m" in pins else sorted({c for c in (_split(sm // 16, t)[0] for t in range(1, 9))
                                                          if not m_cap or c <= m_cap} or {16})
            cns = [pins["n"]] if "n" in pins else sorted({_split(sn // 16, t)[0] for t in range(1, 9)})
            for cm in cms:
                for cn in cns:
                    if cm * cn > l0c_full:
                        continue
                    pinned_mn = "m" in pins or "n" in pins
                    kt = pins.get("k") or _l0_k(lw, cm, cn, k0, kp, whole=pinned_mn and
                                                _l0_k(lw, cm, cn, k0, kp) < k0)
                    if kt < k0:
                        continue
                    kt = min(kt, kp) if "k" not in pins else kt
                    if cm * kt * isz > l0a_full or kt * cn * isz > l0b_full:
                        refused = (f"Gemm: tiling k = {kt} with m = {cm}, n = {cn} needs {cm * kt * isz} bytes of "
                                   f"L0A and {kt * cn * isz} of L0B, {l0a_full} / {l0b_full} available")
                        continue
                    top = _step_k(lw, cm, cn, kt, kp)
                    sks = [pins["step_k"]] if "step_k" in pins else sorted({1, min(2, top)})
                    for sk in sks:
                        kc = min(sk * kt, round_up(kp, kt))
                        if (cm + cn) * kc * isz > lw.usable("l1"):
                            refused = (f"Gemm: tiling step_k = {sk} with m = {cm}, n = {cn}, k = {kt} needs "
                                       f"{(cm + cn) * kc * isz} bytes of L1, {lw.usable('l1')} available")
                            continue
                        # a_panel: the A rows of a row of L0C tiles stay in L1 (whole K) for its N tiles
                        aps = [pins["a_panel"]] if "a_panel" in pins else [0, 1] if sn > cn else [0]
                        for ap in aps:
                            if ap and (cm * kp + cn * kc) * isz > lw.usable("l1"):
                                refused = (f"Gemm: tiling a_panel = 1 with m = {cm}, n = {cn}, K = {k_} needs "
                                           f"{(cm * kp + cn * kc) * isz} bytes of L1, "
                                           f"{lw.usable('l1')} available")
                                continue
                            top_skew = _max_skew(lw, m_, sm, sn, cm, cn, kt, kc, kp) if ap else 0
                            if pins.get("skew", 0) > top_skew:
                                refused = (f"Gemm: tiling skew = {pins['skew']} with m = {cm}, n = {cn}, k = {kt}, "
                                           f"step_k = {sk}, a_panel = {ap} exceeds {top_skew} (the A panel's N "
                                           f"tiles, unrolled, their accumulators together in L0C)")
                                continue
                            for skw in ([pins["skew"]] if "skew" in pins else [0, 1] if top_skew > 1 else [0]):
                                cost = _cost(lw, m_, min(k_, kp), n_, sm, sn, cm, cn, kt, kc, gm_used, gn_used,
                                             a_panel=ap, skew=skw,
                                             one_code=one_code(m_, n_, sm, sn, gm_used, gn_used, gk))
                                if ap and "a_panel" not in pins:
                                    cost /= PANEL_MARGIN
                                cand = GemmPlan(gm_used, gn_used, sm, sn, cm, cn, kt, sk, cost, ap, gk, kp, skw)
                                if (seen := _CONSIDERED.get()) is not None:
                                    seen.append(cand)
                                if best is None or cost < best.cycles * 0.999:
                                    best = cand
    if best is None:
        raise unsupported(loc, refused or f"Gemm: no tiling within {limit} cores for the pinned values {pins}")
    for key, got in (("sm", best.sm), ("sn", best.sn)):
        if key in pins and pins[key] != got:
            raise unsupported(loc, f"Gemm: tiling {key} = {pins[key]} does not split the output evenly "
                                   f"(m_blocks = {best.m_blocks}, n_blocks = {best.n_blocks} give {key} = {got})")
    return best


@contextlib.contextmanager
def considered():
    """Collect every tiling :func:`plan` weighs while the block runs: a list of :class:`GemmPlan`
    (``cycles``: its estimate as the plan compares it, margins included), in the order weighed -- the
    lowering's own candidate space and cost model, for ``benchmarks/autotune.py``."""
    out: list[GemmPlan] = []
    token = _CONSIDERED.set(out)
    try:
        yield out
    finally:
        _CONSIDERED.reset(token)


def _choose(lw: Lowering, m_: int, k_: int, n_: int, epi: Epilogue, tiling: dict[str, int], loc,
            m_cap: int) -> tuple[GemmPlan | None, gemv.GemvPlan | None]:
    """The cube's plan or, for ``M`` below the cube's fractal height, the vector GEMV's when it is
    estimated cheaper (:mod:`cann.lowering.gemv`). A pinned ``vector`` (1 / 0) forces the path;
    otherwise pinned GEMV keys (``nt``, ``kc``) pin the vector path and pinned cube keys the cube."""
    vector = tiling.pop("vector", None)
    small = m_ < lw.soc.cube.m0
    if vector not in (None, 0, 1):
        raise unsupported(loc, f"Gemm: tiling vector = {vector} must be 0 or 1")
    if vector == 1 and not small:
        raise unsupported(loc, f"Gemm: tiling vector = 1 needs M < {lw.soc.cube.m0} (M = {m_}): the cube runs it")
    if vector is None and small:
        vector = 1 if {"nt", "kc"} & set(tiling) else 0 if set(KEYS[:-1]) & set(tiling) else None
    gp = None
    if small and vector != 0:
        gp = gemv.plan(lw, m_, k_, n_, epi, {k: v for k, v in tiling.items() if k in gemv.KEYS}, loc)
        if gp is None and vector == 1:
            raise unsupported(loc, f"Gemm: tiling vector = 1: A's {m_} rows of {k_} and the partial sums do not "
                                   f"fit UB ({lw.usable('ub')} bytes)")
    if vector == 1:
        return None, gp
    p = plan(lw, m_, k_, n_, tiling, loc, m_cap=m_cap)
    return p, (gp if gp is not None and gp.cycles < p.cycles else None)


def gemm(lw: Lowering, a: DevTensor, bmat: np.ndarray, bias: np.ndarray | None, loc,
         kernel_hint: str = "gemm", epilogue: Epilogue | None = None, pins: dict[str, int] | None = None) -> DevTensor:
    """``a`` [M, K] (ND) times constant ``bmat`` [K, N] (any numeric dtype: its values as float32,
    narrowed to the device dtype) plus optional ``bias`` [N]: ND [M, N] in the device dtype, followed
    by the fused ``epilogue`` if any. Any size is tiled (:func:`plan`); M < 16 runs on the vector unit
    when estimated cheaper (:func:`_choose`, :mod:`cann.lowering.gemv`);
    ``pins``: tiling fields recorded on the graph op (a knowledge base's), under the kernel-name pins.

    Raises:
        CannError: a non-2-D input, inner dimensions that differ, or a pinned tiling beyond the
            cores or buffers.
    """
    a = lw.as_format(a, ND, lw.dtype, loc)
    if epilogue is not None:
        epilogue.residuals = [lw.as_format(r, ND, lw.dtype, loc) for r in epilogue.residuals]
    if len(a.shape) != 2:
        raise unsupported(loc, f"Gemm: expected a 2-D input, got shape {list(a.shape)}")
    m_, k_ = a.shape
    kb_, n_ = bmat.shape
    if kb_ != k_:
        raise unsupported(loc, f"Gemm: inner dimensions differ ({k_} vs {kb_})")
    dt, isz = lw.dtype, lw.dtype.itemsize
    k0 = lw.soc.cube.k0(isz)
    kp = round_up(k_, k0)
    n1 = math.ceil(n_ / 16)
    np_ = n1 * 16
    kb = lw.kernel(kernel_hint, loc, pins=pins)
    epi = epilogue or Epilogue()
    ub_tiles = 2 + len(epi.residuals) + len(epi.temps)  # + the ND copy of the output tile
    # rows of an L0C tile whose epilogue fits UB 16 columns at a time (the tables of up to 512 columns)
    m_cap = (lw.usable("ub") - (1 + len(epi.tables)) * 32 * lw.lanes * isz) // (ub_tiles * 16 * isz) // 16 * 16
    tiling = dict(kb.tiling)
    p, gp = _choose(lw, m_, k_, n_, epi, tiling, loc, max(16, m_cap))
    if gp is not None:  # M < 16 on the vector unit: no padding of M to the cube's 16 rows
        return gemv.gemv(lw, kb, a, bmat, bias, loc, epilogue, gp)
    gk = p.k_blocks
    if gk > 1 and (bias is not None or epilogue is not None):
        raise unsupported(loc, "Gemm: tiling k_blocks > 1 (a K split summed by atomic adds) needs a MatMul "
                               "without bias or fused epilogue")
    kb.tiling.update(p.as_tiling())
    gm, gn, sm, sn, cm, cn, kt = p.m_blocks, p.n_blocks, p.sm, p.sn, p.m, p.n, p.k
    k_part = p.k_part if gk > 1 else kp  # K (padded) of one core's part
    kc = min(p.step_k * kt, round_up(k_part, kt))
    kb.block_dim = gm * gn * gk
    if (gm > 1 or gk > 1) and gn > 1:  # groups of gn cores: core b computes N block b % gn of M block b // gn
        kb.block_modulo = gn
    ns = sn if gn > 1 else 0  # GM elements the N block moves the output (0: one N block)

    wz = lw.constant(fractal_z(bmat, k0, dt), "FRACTAL_Z", (kp, np_))
    bt = lw.constant(bias_table(bias, n_, lw.lanes, dt), "ND")
    y = lw.gm_tensor((m_, n_), ND)
    aa, wa, ba, ya = kb.arg(a), kb.arg(wz), kb.arg(bt), kb.arg(y)
    kb.block_offset(wa, ns * k0)
    kb.block_offset(ba, ns // 16 * lw.lanes)
    kb.block_offset(ya, ns)
    # the epilogue's UB tiles: as many columns of the L0C tile at a time as fit
    ub_tables = (1 + len(epi.tables)) * (cn // 16) * lw.lanes * isz
    ew = max(16, min(cn, (lw.usable("ub") - ub_tables) // max(1, ub_tiles * cm * isz) // 16 * 16))
    ew = _split(cn // 16, math.ceil(cn / ew))[0]  # even pieces
    tiles = CubeTiles(lw, kb, kt, cn, cm, 0, epilogue, l1_k=kc, ub_n=ew)
    tiles.has_bias = bias is not None  # MatMul: no zero table loaded and added
    tiles.bind(ns, ns, lw.lanes)
    single = one_code(m_, n_, sm, sn, gm, gn, gk)
    if single:  # block b: rows of block b // gn (the output's residual operands too), columns of b % gn
        kb.block_row_offset(aa, sm * k_)
        for out in (ya, *tiles.residual_args):
            kb.block_row_offset(out, sm * n_)
    ub_nd = kb.alloc(Space.UB, cm * ew, dt)
    panel = p.a_panel
    l1_a = kb.alloc(Space.L1, cm * (k_part if panel else kc), dt)
    skew = p.skew
    # with a skew the N tiles of a row are live together, each in its own accumulator
    l0cs = [kb.alloc(Space.L0C, cm * cn, np.dtype(np.float32)) for _ in range(math.ceil(sn / cn) if skew else 1)]

    def l0c_tile(r0: int, rows: int, c0: int, cols: int, load_a: bool = True, kbase: int = 0, acc=None,
                 parts: bool = False):
        """Output rows r0.. (rows of them) x the core block's columns c0.. (cols): K (the part from
        ``kbase``) in L1 chunks of kc, each chunk in cube steps of kt accumulated in L0C (``acc``,
        default the first accumulator), then the epilogue (with a K split, added to GM). With the A
        panel (``panel``) chunk ``ci`` of A sits at its own place in L1, loaded only when ``load_a``
        (the row's first tile). With ``parts`` nothing is emitted: returns the chunks' emitters (a
        list, unrolled) and the epilogue's, for :func:`skewed_row` to interleave."""
        l0c = l0cs[0] if acc is None else acc
        m_pad, cnp = round_up(rows, 16), round_up(cols, 16)
        n1c = cnp // 16
        kend = min(kp, kbase + k_part)

        def chunk(ci: int) -> None:
            kc0 = kbase + ci * kc
            kcp = min(kc, kend - kc0)
            a0 = (kc0 - kbase) * m_pad if panel else 0  # the chunk's A fractals in L1
            if load_a:
                kb.emit(tile.CopyNd2nzOp(aa, l1_a, src_offset=r0 * k_ + kc0, dst_offset=a0, rows=rows,
                                         cols=min(kcp, k_ - kc0), src_row_stride=k_))
            kb.copy(wa, tiles.l1_w, src_offset=((kc0 // k0) * n1 + c0 // 16) * 16 * k0, nburst=kcp // k0,
                    burst=n1c * 16 * k0, src_stride=n1 * 16 * k0, dst_stride=n1c * 16 * k0)

            def step(s: int) -> None:
                ks = s * kt
                kt_s = min(kt, kcp - ks)
                k1t, m1 = kt_s // k0, m_pad // 16
                if k1t <= m1:  # one load2d per K fractal column (the M fractals are contiguous in L1)
                    for j in range(k1t):
                        kb.emit(tile.Load2dOp(l1_a, tiles.l0a, src_offset=a0 + (ks // k0 + j) * m_pad * k0, count=m1,
                                              src_stride=16 * k0, dst_offset=j * 16 * k0, dst_stride=k1t * 16 * k0))
                else:  # one per M fractal row
                    for i in range(m1):
                        kb.emit(tile.Load2dOp(l1_a, tiles.l0a, src_offset=a0 + (ks // k0) * m_pad * k0 + i * 16 * k0,
                                              count=k1t, src_stride=m_pad * k0, dst_offset=i * k1t * 16 * k0,
                                              dst_stride=16 * k0))
                kb.emit(tile.Load2dOp(tiles.l1_w, tiles.l0b, src_offset=(ks // k0) * n1c * 16 * k0,
                                      count=k1t * n1c, src_stride=16 * k0, dst_stride=16 * k0))
                kb.emit(tile.MmadOp(tiles.l0a, tiles.l0b, l0c, m=m_pad, k=kt_s, n=cnp,
                                    init=int(kc0 == kbase and s == 0)))

            for s in range(math.ceil(kcp / kt)):  # unrolled: a hardware loop ends in a barrier of every pipe
                step(s)

        chunks = math.ceil((kend - kbase) / kc)

        def epilogue() -> None:
            for e0 in range(0, cnp, ew):  # the epilogue, ew columns at a time
                ec = min(ew, cnp - e0)
                n1e = ec // 16
                tiles.load_bias(ba, c0 + e0, ec)
                tiles.load_tables(c0 + e0, ec)
                widths = [min(16, cols - (e0 + j * 16)) for j in range(n1e)]
                for i, ra in enumerate(tiles.residual_args):
                    for j, w in enumerate(widths):
                        if w > 0:
                            kb.copy(ra, tiles.bufs[f"r{i}"], src_offset=r0 * n_ + c0 + e0 + j * 16,
                                    dst_offset=j * rows * 16, nburst=rows, burst=w, src_stride=n_, dst_stride=16)
                tiles.epilogue(l0c, e0 * m_pad, n1e, rows, m_pad)
                # [n1e][rows][16] -> ND rows of ec (one strided vector move per C0 block), then one burst per row
                for j in range(n1e):
                    kb.vec("mov", ub_nd, tiles.ub_out, count=rows, unit=16, dst_offset=j * 16,
                           src0_offset=j * rows * 16, dst_stride=ec, src0_stride=16)
                if gk > 1:  # the K parts' partial sums meet in GM
                    kb.emit(tile.CopyAddOp(ub_nd, ya, src_offset=0, dst_offset=r0 * n_ + c0 + e0, nburst=rows,
                                           burst=min(ec, cols - e0), src_stride=ec, dst_stride=n_))
                else:
                    kb.copy(ub_nd, ya, dst_offset=r0 * n_ + c0 + e0, nburst=rows, burst=min(ec, cols - e0),
                            src_stride=ec, dst_stride=n_)

        if parts:
            return [lambda ci=ci: chunk(ci) for ci in range(chunks)], epilogue
        if chunks * math.ceil(kc / kt) <= UNROLL_STEPS:  # short: unrolled (no barrier ending a loop)
            for ci in range(chunks):
                chunk(ci)
        else:
            kb.roll(chunks, chunk)
        epilogue()
        return None

    def skewed_row(r0: int, rows: int, cols: int, kbase: int) -> None:
        """The N tiles of a row of L0C tiles (A panel) sharing the K chunks: tile ``j`` (accumulator
        ``j``) runs chunk ``c`` in round ``c + j * skew``, the tiles of a round in order, and its
        epilogue right after its last chunk: every round loads B for each running tile (A only in
        the first tile's chunks), so MTE2 stays busy while the cube works, and the tiles finish
        ``skew`` rounds apart, each epilogue overlapping the later tiles' chunks."""
        tn_ = math.ceil(cols / cn)
        plans = [l0c_tile(r0, rows, j * cn, min(cn, cols - j * cn), j == 0, kbase, l0cs[j], parts=True)
                 for j in range(tn_)]
        chunks = len(plans[0][0])
        for r in range(chunks + (tn_ - 1) * skew):
            for j, (steps, epilogue) in enumerate(plans):
                c = r - j * skew
                if 0 <= c < chunks:
                    steps[c]()
                    if c == chunks - 1:
                        epilogue()

    def block(m0: int, rows: int, cols: int, kbase: int = 0) -> None:
        """One core block: rows m0.. (rows of them) x the block's cols columns, in L0C tiles, over
        the K part from ``kbase``."""
        tm_, tn_ = math.ceil(rows / cm), math.ceil(cols / cn)
        # few tiles: unrolled (a hardware loop's end is a barrier of every pipe: a tile's epilogue
        # could not overlap the next tile's loads)
        unroll = tm_ * tn_ <= UNROLL_TILES and tm_ * tn_ * math.ceil(k_part / kt) <= UNROLL_TILE_STEPS

        def each(count: int, body) -> None:
            if unroll:
                for i in range(count):
                    body(i)
            else:
                kb.roll(count, body, clamp=True)

        def row(i: int) -> None:
            r0 = m0 + i * cm
            if skew:
                skewed_row(r0, min(cm, m0 + rows - r0), cols, kbase)
                return
            each(tn_, lambda j: l0c_tile(r0, min(cm, m0 + rows - r0), j * cn, min(cn, cols - j * cn),
                                         not panel or j == 0, kbase))
        each(tm_, row)

    last_cols = n_ - (gn - 1) * sn
    if single:
        block(0, sm, sn)
    else:
        for q in range(gk):  # K part q: cores q * gm * gn ..
            for g in range(gm):
                m0 = g * sm
                group = kb.core_group((q * gm + g) * gn, gn) if gm * gk > 1 else contextlib.nullcontext()
                with group:
                    if last_cols == sn:
                        block(m0, min(sm, m_ - m0), sn, q * k_part)
                    else:
                        if gn > 1:
                            with kb.guard(0, gn - 1):
                                block(m0, min(sm, m_ - m0), sn, q * k_part)
                        with kb.guard(gn - 1, gn):
                            block(m0, min(sm, m_ - m0), last_cols, q * k_part)
    if gk > 1:  # the atomic adds accumulate into zeros
        zero_fill(lw, y, loc)
    lw.launch(kb)
    return y


def zero_fill(lw: Lowering, t: DevTensor, loc) -> None:
    """A launch writing zeros over the whole of GM tensor ``t`` (memset, spread over the cores in
    chunks of 16-element multiples), so that a following launch can add into it. The zeros in UB
    are at most :data:`ZERO_BYTES`: a chunk is bursts of them re-read (source stride 0), so the
    vector unit fills little before the first store starts."""
    kb = lw.kernel("memset", loc)
    size = math.prod(t.shape)
    chunk = min(ub_chunk(lw, t.dtype.itemsize), round_up(math.ceil(size / lw.cores), 16))
    n_chunks = math.ceil(size / chunk)
    kb.partition(n_chunks)
    dst = kb.arg(t)
    z = min(chunk, ZERO_BYTES // t.dtype.itemsize)
    zero = kb.alloc(Space.UB, z, t.dtype)
    kb.block_offset(dst, chunk)
    kb.vec("dup", zero, count=z, scalar=0.0)

    def fill(first: int, last: bool = False) -> None:
        count = size - (n_chunks - 1) * chunk if last else chunk
        nb, rest = divmod(count, z)
        kb.copy(zero, dst, dst_offset=first * chunk, nburst=nb, burst=z, src_stride=0, dst_stride=z)
        kb.copy(zero, dst, dst_offset=first * chunk + nb * z, burst=rest)

    kb.for_tiles(n_chunks, fill, partial_last=size % chunk != 0)
    lw.launch(kb)

