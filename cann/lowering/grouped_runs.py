"""Grouped convolution whose groups do not fill whole C0 blocks, per run of output blocks: no
all-zero 16x16 weight fractal multiplied, no layout change.

Where :func:`cann.lowering.grouped.super_group` finds no packing (ShuffleNet's groups of 28, 34, 68
or 136 channels; groups of 24), each output C1 block ``j`` reads the input C1 blocks of the groups
its 16 channels belong to: the window ``lo_j .. hi_j`` (blocks straddling two groups included,
their other group's lanes weighted zero). Consecutive output blocks with the same window form a
*run*: one dense convolution of ``wi`` input blocks (from block ``lo``) to ``wo`` output blocks
(from block ``jo``), K = ``wi*KH*KW*16``, N = ``wo*16``. Every 16x16 weight fractal of a run holds
a real weight: each of its input blocks carries channels of a group whose outputs are in each of
its output blocks (the window is the span of those groups' inputs, and a run's blocks share its
groups). The MACs executed are about those of padding each group to whole blocks (ShuffleNet's 3
groups of 68: 73 block pairs per tap where padded groups take 75 and the dense block-diagonal
convolution 169), without moving channels.

float32 fractals are 16x8 (K0 = 8): a straddled block's half may hold only the other group's
lanes. For a 1x1 kernel the windows are therefore taken in 8-channel *slices*
(:func:`slice_channels`): K is the window's channels, so a run starts at ``k_start`` 8 inside its
first block and ends mid-block where its groups do, and no 16x8 fractal is all zero. (KxK kernels
keep whole blocks: their K interleaves the taps inside each block, so a half block is no
contiguous K range; a straddled 3x3 float32 run still multiplies such halves.)

Work split: images over ``n_blocks`` cores, the items (output row band, run, chunk of ``n1`` of the
run's output blocks) over ``m_blocks`` groups of cores, longest first onto the least loaded group;
the band height and chunk width are those of the least estimated makespan (small maps: narrower
chunks, re-reading the run's input; large maps: more bands, re-reading its weights). Per item:
the run's input rows into L1, img2col (from the run's first block) + mmad over K chunks, the bias
and fused epilogue per M subtile, one write of the chunk's output blocks to GM.
"""

from __future__ import annotations

import contextlib
import heapq
import math

import numpy as np

from cann.dialects import tile
from cann.dialects.tile import Space
from cann.lowering.common import NC1HWC0, DevTensor, Lowering, plane_row_split, unsupported
from cann.lowering.conv_plan import input_window
from cann.lowering.cube import CubeTiles, Epilogue, bias_table, fractal_z


def _ceil(a: int, b: int) -> int:
    return -(-a // b) * b


def runs(cin: int, cout: int, group: int, q: int = 16) -> list[tuple[int, int, int, int]]:
    """``(lo, wi, jo, wo)`` per run: input slices ``lo .. lo+wi-1`` of ``q`` channels (16: C1
    blocks; 8: the float32 K0 of a 1x1 convolution) feed output blocks ``jo .. jo+wo-1``
    (consecutive output blocks whose groups read the same input slices)."""
    cin_g, cout_g = cin // group, cout // group
    out: list[list[int]] = []
    for j in range(math.ceil(cout / 16)):
        g0, g1 = 16 * j // cout_g, (min(cout, 16 * j + 16) - 1) // cout_g
        lo, hi = g0 * cin_g // q, ((g1 + 1) * cin_g - 1) // q
        if out and out[-1][0] == lo and out[-1][1] == hi - lo + 1:
            out[-1][3] += 1
        else:
            out.append([lo, hi - lo + 1, j, 1])
    return [tuple(r) for r in out]


def slice_channels(k0: int, kh: int, kw: int) -> int:
    """Channels per input slice of the runs: ``k0`` for a 1x1 kernel whose K0 is under a C0 block
    (float32: 8; K is then the window's channels, so a run may start or end mid-block and no 16x8
    fractal holds only another group's lanes), else the C0 block (16)."""
    return k0 if kh * kw == 1 and k0 < 16 else 16


def run_weights(w: np.ndarray, group: int, k0: int, dt: np.dtype) -> list[np.ndarray]:
    """Per run (:func:`runs` in slices of :func:`slice_channels`), the Zn matrix ``[K/k0][wo][16][k0]``
    (K ordered (c1, kh, kw, c0) over the run's input window) of ``w`` [Cout, Cin/group, KH, KW]: the
    weights the kernel loads."""
    cout, cin_g, kh_, kw_ = w.shape
    cout_g = cout // group
    q = slice_channels(k0, kh_, kw_)
    mats = []
    for lo, wi, jo, wo in runs(cin_g * group, cout, group, q):
        dense = np.zeros((wo * 16, wi * q, kh_, kw_), np.float32)
        for o in range(wo * 16):
            oc = jo * 16 + o
            if oc < cout:
                i0 = (oc // cout_g) * cin_g - lo * q
                dense[o, i0:i0 + cin_g] = w[oc]
        bmat = dense.reshape(wo * 16, wi, q, kh_, kw_).transpose(1, 3, 4, 2, 0).reshape(wi * q * kh_ * kw_, wo * 16)
        mats.append(fractal_z(bmat, k0, dt))
    return mats


def band_mmad(kb, tiles: CubeTiles, l1_fm, l0c, window: dict, m_pad: int, m_t: int, kdim: int, k_t: int,
              nt: int, load_weights, koff: int = 0) -> None:
    """One band's products into ``l0c`` (fp32, ``[nt/16][m_pad][16]``): per K chunk of ``k_t`` of
    ``kdim`` (elements, multiples of k0) ``load_weights(kt0, kt)`` (L0B), then a hardware loop over
    the M subtiles of ``m_t`` of ``m_pad`` positions: img2col of ``l1_fm`` (its map and kernel fields
    ``window``, K from ``koff + kt0``) into L0A and ``mmad`` (``nt`` output channels), the first
    chunk initializing."""
    init = 1
    for kt0 in range(0, kdim, k_t):
        kt = min(k_t, kdim - kt0)
        load_weights(kt0, kt)

        def subtile(i: int, kt0=kt0, kt=kt, init=init) -> None:
            ms0 = i * m_t
            ms = min(m_t, m_pad - ms0)
            kb.emit(tile.Img2colOp(l1_fm, tiles.l0a, **window, m_start=ms0, m_count=ms, k_start=koff + kt0,
                                   k_count=kt))
            kb.emit(tile.MmadOp(tiles.l0a, tiles.l0b, l0c, c_offset=ms0 * nt, m=ms, k=kt, n=nt, init=init))

        kb.roll(-(-m_pad // m_t), subtile)
        init = 0


def band_out(kb, tiles: CubeTiles, ya, l0c, off0: int, nblk: int, m_valid: int, m_pad: int, m_t: int, nt: int,
             plane: int) -> None:
    """One band's output: a hardware loop over its M subtiles of ``m_t`` positions (``m_valid`` real of
    ``m_pad``), each reading its residuals, running the epilogue on ``l0c`` (None: a band past the map,
    bias only) and writing ``nblk`` C1 blocks of ``valid * 16`` elements at ``off0`` + the subtile's
    positions into ``ya`` (C1 blocks ``plane`` elements apart)."""

    def out_subtile(i: int) -> None:
        ms0 = i * m_t
        ms = min(m_t, m_pad - ms0)
        valid = min(ms, m_valid - ms0)
        if valid <= 0:
            return
        off = off0 + ms0 * 16
        for j, ra in enumerate(tiles.residual_args):
            kb.copy(ra, tiles.bufs[f"r{j}"], src_offset=off, nburst=nblk, burst=valid * 16, src_stride=plane)
        tiles.epilogue(l0c, ms0 * nt, nblk, valid, ms)
        kb.copy(tiles.ub_out, ya, dst_offset=off, nburst=nblk, burst=valid * 16, dst_stride=plane)

    kb.roll(-(-m_pad // m_t), out_subtile)


def run_grouped_conv2d(lw: Lowering, x: DevTensor, w: np.ndarray, b: np.ndarray | None, strides, pads, dilations,
                       group: int, out_shape: tuple[int, ...], loc, kernel_hint: str = "gconv2d",
                       epilogue: Epilogue | None = None, pins: dict[str, int] | None = None) -> DevTensor | None:
    """Grouped 2-D convolution of NC1HWC0 ``x`` [N, Cin, H, W] by constant ``w`` [Cout, Cin/group, KH,
    KW], bias ``b`` [Cout] or None, then the fused ``epilogue``, per run of output blocks
    (:func:`runs`): NC1HWC0 ``out_shape`` [N, Cout, Ho, Wo] in the device dtype; None when one output
    row of the widest run does not fit L0C / L1 (the caller keeps the dense convolution).

    Tiling (``tile.tiling``, pinnable): ``rows`` output rows per band, ``n1`` output blocks per
    chunk of a run, ``n_blocks`` cores over the images, ``m_blocks`` groups of cores over the (band,
    run, chunk) items, ``m`` / ``k`` the L0A tile. Unpinned, ``rows`` and ``n1`` are those of the
    least estimated makespan (an estimate from the SoC's bandwidths, latencies and cube rate).

    Raises:
        CannError: the fused epilogue's tiles do not fit UB, or a pinned tiling beyond the cores or buffers.
    """
    n_, cin, h_, w_ = x.shape
    cout, cin_g, kh_, kw_ = w.shape
    q = slice_channels(lw.soc.cube.k0(lw.dtype.itemsize), kh_, kw_)
    rs_ = runs(cin, cout, group, q)
    # per run: its first C1 block, its C1 blocks, the K offset of its first slice in that block
    win = [(lo * q // 16, ((lo + wi) * q - 1) // 16 - lo * q // 16 + 1, lo * q % 16) for lo, wi, _, _ in rs_]
    x = lw.as_format(x, NC1HWC0, lw.dtype, loc)
    epi = epilogue or Epilogue()
    epi.residuals = [lw.as_format(r, NC1HWC0, lw.dtype, loc) for r in epi.residuals]
    _, _, ho_, wo_ = out_shape
    sh, sw = strides
    pt, pl = pads[0], pads[1]
    dh, dw = dilations
    dt, isz, lanes = lw.dtype, lw.dtype.itemsize, lw.lanes
    k0 = lw.soc.cube.k0(isz)
    c1i, c1o = math.ceil(cin / 16), math.ceil(cout / 16)
    mats = run_weights(w, group, k0, dt)
    offs = [0]
    for m in mats:
        offs.append(offs[-1] + m.size)
    wi_max, n_t = max(r[1] for r in win), max(r[3] for r in rs_) * 16
    kmax = _ceil(max(r[1] for r in rs_) * q * kh_ * kw_, k0)

    m_t = min(128, _ceil(ho_ * wo_, 16))
    k_t = min(lw.usable("l0a") // (m_t * isz), lw.usable("l0b") // (n_t * isz)) // k0 * k0
    k_t = max(k0, min(k_t, kmax))
    kb = lw.kernel(kernel_hint, loc, {"m": m_t, "k": k_t}, pins)
    pins = dict(kb.tiling)
    m_t, k_t = kb.tiling["m"], kb.tiling["k"]
    if m_t % 16 or k_t % k0 or m_t * k_t * isz > lw.usable("l0a") or k_t * n_t * isz > lw.usable("l0b"):
        raise unsupported(loc, f"grouped Conv: tiling m = {m_t}, k = {k_t}: multiples of 16 and {k0} within L0A / L0B")
    n_blocks, m_cap = plane_row_split(loc, "grouped Conv", pins, n_, lw.cores)
    if n_ % n_blocks:
        if "n_blocks" in pins:
            raise unsupported(loc, f"grouped Conv: tiling n_blocks = {n_blocks} must divide the {n_} images")
        n_blocks = max(d for d in range(1, n_blocks + 1) if n_ % d == 0)
        m_cap = pins.get("m_blocks", max(1, lw.cores // n_blocks))
    l0c_pos = lw.usable("l0c") // (n_t * 4) // 16 * 16
    l1_budget = lw.usable("l1") - k_t * n_t * isz

    def fm_rows(rows: int) -> int:
        return min(h_, (rows - 1) * sh + dh * (kh_ - 1) + 1)

    fit = [r for r in range(1, ho_ + 1)
           if _ceil(r * wo_, 16) <= l0c_pos and wi_max * fm_rows(r) * w_ * 16 * isz <= l1_budget]
    if not fit:
        return None
    bw, lat, cube = lw.soc.bandwidth, lw.soc.latency, lw.soc.cube
    rate = cube.fp32_rate_divisor if isz == 4 else 1

    def item_cycles(r0: int, r1: int, ri: int, c0: int, cn: int, active: int) -> float:
        """Estimated cycles of one item (the shape of conv_plan.conv_cycles, no overlap)."""
        wi = win[ri][1]
        gm_bw = min(bw.gm_to_l1, bw.gm_total / max(1, active))
        kdim, nt = _ceil(rs_[ri][1] * q * kh_ * kw_, k0), cn * 16
        m_pad = _ceil((r1 - r0) * wo_, 16)
        m_sub, k_tiles = math.ceil(m_pad / m_t), math.ceil(kdim / k_t)
        fm = wi * fm_rows(r1 - r0) * w_ * 16 * isz
        return (fm / gm_bw + lat.mte_startup + k_tiles * 2 * lat.mte_startup + kdim * nt * isz / gm_bw
                + m_sub * k_tiles * (lat.cube_startup + lat.mte_startup) + m_pad * kdim * isz / bw.l1_to_l0a
                + m_pad / cube.m0 * kdim / k0 * nt / cube.n0 * rate
                + m_pad * nt * (4 / max(bw.l0c_to_ub, 1) + isz / gm_bw) + m_sub * (lat.mte_startup + 3 * lat.vector_startup))

    def plan(rows: int, n1: int):
        """(makespan, items per group of cores): the items (output row band, run, chunk of at most
        ``n1`` of the run's output blocks) longest first onto the least loaded of up to ``m_cap``
        groups of cores, each group's items in band, run, chunk order."""
        bands = [(r0, min(ho_, r0 + rows)) for r0 in range(0, ho_, rows)]
        items = [(r0, r1, ri, c0, min(n1, r[3] - c0)) for r0, r1 in bands for ri, r in enumerate(rs_)
                 for c0 in range(0, r[3], n1)]
        groups = min(m_cap, len(items))
        cost = {it: item_cycles(*it, groups * n_blocks) for it in items}
        heap = [(0.0, g) for g in range(groups)]
        mine = [[] for _ in range(groups)]
        for it in sorted(items, key=lambda it: (-cost[it], it)):
            load, g = heapq.heappop(heap)
            mine[g].append(it)
            heapq.heappush(heap, (load + cost[it], g))
        return max(h[0] for h in heap), [sorted(m, key=lambda it: (it[2], it[3], it[0])) for m in mine]

    wo_max = n_t // 16
    # the band heights of distinct band counts (evenest bands) that fit, chunk widths of 1/1 .. 1/8 run
    heights = ([min(pins["rows"], fit[-1])] if "rows" in pins
               else sorted({math.ceil(ho_ / nb) for nb in range(1, ho_ + 1)} & set(fit)))
    widths = [pins["n1"]] if "n1" in pins else sorted({math.ceil(wo_max / d) for d in (1, 2, 4, 8)})
    if not 1 <= widths[0] <= wo_max:
        raise unsupported(loc, f"grouped Conv: tiling n1 = {widths[0]}: 1 to {wo_max} output blocks")
    rows, n1 = min(((r, c) for r in heights for c in widths), key=lambda rc: (plan(*rc)[0], -rc[0], -rc[1]))
    mine = plan(rows, n1)[1]
    m_blocks = len(mine)
    kb.block_dim = n_blocks * m_blocks
    kb.tiling.update(rows=rows, n1=n1, block_dim=kb.block_dim, n_blocks=n_blocks, m_blocks=m_blocks)
    if m_blocks > 1:
        kb.block_modulo = n_blocks

    x_step, y_step = c1i * h_ * w_ * 16, c1o * ho_ * wo_ * 16
    y = lw.gm_tensor(tuple(out_shape), NC1HWC0)
    wc = lw.constant(np.concatenate([m.reshape(-1) for m in mats]), "FRACTAL_Z")
    bt = lw.constant(bias_table(b, cout, lanes, dt), "ND")
    xa, wa, ba, ya = kb.arg(x), kb.arg(wc), kb.arg(bt), kb.arg(y)
    kb.block_offset(xa, x_step)
    kb.block_offset(ya, y_step)
    tiles = CubeTiles(lw, kb, k_t, n_t, m_t, 0, epi)
    for v in epi.tables:
        tiles.table_args.append(kb.arg(lw.constant(bias_table(v, v.size, lanes, dt), "ND")))
    for r in epi.residuals:
        a = kb.arg(r, fresh=True)
        kb.block_offset(a, y_step)
        tiles.residual_args.append(a)
    l1_fm = kb.alloc(Space.L1, wi_max * fm_rows(rows) * w_ * 16, dt)
    l0c = kb.alloc(Space.L0C, _ceil(rows * wo_, 16) * n_t, np.dtype(np.float32))
    cw = input_window(0, wo_, sw, pl, 0, dw, kw_, w_)

    def real_band(r0: int, r1: int) -> bool:
        _, _, flo, fhi = input_window(r0, r1, sh, pt, 0, dh, kh_, h_)
        return fhi > flo and cw[3] > cw[2]

    def run_code(r0: int, r1: int, ri: int, c0: int, cn: int, resident: bool = False) -> None:
        """One item; ``resident``: its weights are already in L0B (the core's previous item had the
        same run and chunk, K in one tile)."""
        _, ws, jo, wo_run = rs_[ri]
        lo, wi, koff = win[ri]
        jo, wo = jo + c0, cn
        nt, kdim = wo * 16, _ceil(ws * q * kh_ * kw_, k0)
        m_valid = (r1 - r0) * wo_
        m_pad = _ceil(m_valid, 16)
        rs, re, flo, fhi = input_window(r0, r1, sh, pt, 0, dh, kh_, h_)
        real = fhi > flo and cw[3] > cw[2]
        if real:
            kb.copy(xa, l1_fm, src_offset=(lo * h_ + flo) * w_ * 16, nburst=wi, burst=(fhi - flo) * w_ * 16,
                    src_stride=h_ * w_ * 16, dst_stride=(fhi - flo) * w_ * 16)
            def load_weights(kt0: int, kt: int, src0=offs[ri], c0=c0, wo=wo, wo_run=wo_run, kdim=kdim) -> None:
                if resident and kdim <= k_t:
                    return
                k1t, src = kt // k0, src0 + ((kt0 // k0) * wo_run + c0) * 16 * k0
                if cn == wo_run:  # the whole run: one burst
                    kb.copy(wa, tiles.l1_w, src_offset=src, burst=k1t * wo * 16 * k0)
                else:
                    kb.copy(wa, tiles.l1_w, src_offset=src, nburst=k1t, burst=wo * 16 * k0, src_stride=wo_run * 16 * k0,
                            dst_stride=wo * 16 * k0)
                kb.emit(tile.Load2dOp(tiles.l1_w, tiles.l0b, count=k1t * wo, src_stride=16 * k0, dst_stride=16 * k0))

            band_mmad(kb, tiles, l1_fm, l0c, dict(
                fm_c1=wi, fm_h=fhi - flo, fm_w=w_, pad_t=flo - rs, pad_b=re - fhi, pad_l=cw[2] - cw[0],
                pad_r=cw[1] - cw[3], stride_h=sh, stride_w=sw, kernel_h=kh_, kernel_w=kw_, dil_h=dh, dil_w=dw,
                fm_c1_stride=(fhi - flo) * w_ * 16), m_pad, m_t, kdim, k_t, nt, load_weights, koff)  # packed, as copied
        tiles.load_bias(ba, jo * 16, nt)
        tiles.load_tables(jo * 16, nt)
        band_out(kb, tiles, ya, l0c if real else None, jo * ho_ * wo_ * 16 + r0 * wo_ * 16, wo, m_valid, m_pad, m_t,
                 nt, ho_ * wo_ * 16)

    for grp in range(m_blocks):
        its = mine[grp]
        with kb.core_group(grp * n_blocks, n_blocks) if m_blocks > 1 else contextlib.nullcontext():
            kb.for_tiles(n_, lambda first, last=False, its=its: kb.roll(
                len(its), lambda i: run_code(*its[i], resident=i > 0 and its[i - 1][2:] == its[i][2:]
                                             and real_band(*its[i - 1][:2])), clamp=True), cores=n_blocks)
    lw.launch(kb)
    return y
