"""Convolution on the cube: img2col + mmad, output tiles over the cores as hardware loops.

Weights are constants, stored in GM in the cube's layout at compile time: FRACTAL_Z
(``[K1][N1][16][k0]``, the Zn layout L0B takes, :func:`cann.lowering.cube.fractal_z`) with ``K``
ordered ``(c1, kh, kw, c0)`` as img2col produces it (ascend-core.md §2.3). Grouped convolutions
reaching this kernel are computed as one dense convolution with a block-diagonal weight (exact;
costs ``group`` times the MACs: :mod:`cann.lowering.grouped` and :mod:`cann.lowering.depthwise`
take the groups that fit them).

The tiling is planned by :mod:`cann.lowering.conv_plan` (``m``, ``n``, ``k``, ``rows``, ``cols``,
``c1``, ``taps``) and, here, split over the cores (``n_blocks`` channel groups, ``m_blocks``
groups of output tiles, ``i_blocks`` groups of images), all recorded on the kernel as
``tile.tiling`` and overridable per kernel; ``loops`` (1: a ragged last output tile is moved back
to end at the map's edge, joining the tile loops; 0, the default: it has its own code, computing
no overlap). The output tiles are emitted by :mod:`cann.lowering.conv_tiles`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math

import numpy as np

from cann.dialects import tile
from cann.dialects.tile import Space
from cann.lowering import small_cin
from cann.lowering.common import NC1HWC0, NC1HWC0_C04, DevTensor, KernelBuilder, Lowering, unsupported
from cann.lowering.conv_plan import (ConvGeom, CoreSplit, channel_tiles, default_tiles, fm_copy, input_window,
                                     split_cores, used_taps)
from cann.lowering.conv_tiles import emit_tiles, row_segments
from cann.lowering.cube import CubeTiles, Epilogue, bias_table, fractal_z, round_up


def conv2d(lw: Lowering, x: DevTensor, w: np.ndarray, b: np.ndarray | None, strides, pads, dilations, group: int,
           out_shape: tuple[int, ...], loc, kernel_hint: str = "conv2d", epilogue: Epilogue | None = None,
           pins: dict[str, int] | None = None) -> DevTensor:
    """2-D convolution of an NC1HWC0 tensor by constant weights ``w`` [Cout, Cin/group, KH, KW],
    followed by the fused ``epilogue`` if any; ``pins``: tiling fields recorded on the graph op.

    Any size is tiled (:func:`cann.lowering.conv_plan.conv_plan`): output-channel tiles over the
    cores, output rows (or column chunks of one row), input-channel chunks and K tiles accumulated in
    L0C, kernel taps one at a time when even a small window overflows L1. Kernel rows / columns that
    read only padding for every output are dropped (a dilated 3x3 on a map smaller than its dilation
    is a 1x1).

    Phases: the geometry (taps cropped, a grouped weight made dense: :func:`_dense_weight`); the
    plan (L0 tiles, the core split and feature-map tiling: :func:`cann.lowering.conv_plan.split_cores`,
    recorded by :func:`_record_split`); the operands (the weight matrix in img2col's K order,
    :func:`_weight_matrix`, in FRACTAL_Z; the bias table; the kernel's arguments and buffers); the
    code of one output tile (its feature-map loads, :func:`_load_fm`, img2col + mmad per K tile and
    M subtile, the epilogue and store per M subtile, :func:`_move_subtile`), emitted per core group as
    loops by :func:`cann.lowering.conv_tiles.emit_tiles` inside the batch loop.

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
    w = _dense_weight(w, group, cin, loc)
    cout, _, kh_, kw_ = w.shape
    dt, isz = lw.dtype, lw.dtype.itemsize
    k0 = lw.soc.cube.k0(isz)
    sh, sw = strides
    pt, pl, _, _ = pads
    dh, dw = dilations
    _, _, ho_, wo_ = out_shape
    ia, ib = used_taps(kh_, dh, sh, pt, h_, ho_)
    ja, jb = used_taps(kw_, dw, sw, pl, w_, wo_)
    w = w[:, :, ia:ib, ja:jb]
    kh_, kw_ = ib - ia, jb - ja
    geo = ConvGeom(x.c1, h_, w_, kh_, kw_, sh, sw, dh, dw, pt - ia * dh, pl - ja * dw, ho_, wo_, c0in)
    c1in = x.c1
    kdim = small_cin.c04_k(c1in, kh_, kw_, k0) if c04 else c1in * kh_ * kw_ * 16
    n1 = math.ceil(cout / 16)
    np_ = n1 * 16

    m_t, n_t, k_t = default_tiles(lw, ho_ * wo_, n1, kdim, k0)
    if c04:  # few K columns: every output channel in one tile, the cores split the output positions
        n_t, k_t = small_cin.c04_tiles(lw, n1, kdim, m_t, k0)
    kb = lw.kernel(kernel_hint, loc, {"m": m_t, "n": n_t, "k": k_t}, pins)
    pins = dict(kb.tiling)
    if c04:  # one load holds every C04 block: K is packed across them
        pins.pop("c1", None)
        pins["taps"] = 0
    m_t, n_t, k_t = kb.tiling["m"], kb.tiling["n"], kb.tiling["k"]
    n_tiles = channel_tiles(np_, n_t, loc)
    kb.partition(n_tiles)  # SPMD over output-channel tiles ...
    cores = kb.block_dim if "block_dim" in pins else min(lw.cores, n_tiles * max(1, lw.cores // n_tiles))
    m_cap = lw.usable("l0c") // (n_t * 4) // 16 * 16  # accumulator positions of one tile in L0C
    # C04: one channel tile whose every K tile fits L0B: the weights, bias and tables are loaded
    # once per core, before the loops (every output tile of the core multiplies the same ones)
    resident = c04 and n_tiles == 1 and kdim * n_t * isz <= lw.usable("l0b")
    geo = dataclasses.replace(geo, resident=resident)
    l1_budget = lw.usable("l1") - (kdim if resident else k_t) * n_t * isz
    image = {"x": c1in * h_ * w_ * c0in, "y": n1 * ho_ * wo_ * 16}  # elements of one image
    # ... over groups of n_blocks cores, m_blocks groups of output tiles and i_blocks groups of images
    split = split_cores(geo, pins, lw.soc, lw.cores, cores, n_tiles, n_, tuple(image.values()), m_cap, l1_budget,
                        isz, m_t, n_t, k_t, loc)
    i_blocks, n_blocks, m_blocks = split.i_blocks, split.n_blocks, split.m_blocks
    taps, rows, cols, c1c = split.taps, split.rows, split.cols, split.c1
    loops = _record_split(kb, split, pins, cores, n_tiles, wo_, c1in, c04, loc)

    bmat = _weight_matrix(w, c1in, np_, kdim, taps, c04)
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
    tiles = CubeTiles(lw, kb, k_t, n_t, m_t, 0, epilogue, l1_k=kdim if resident else None,
                       l0b_k=kdim if resident else None)
    tiles.bind(n_t, n_t // 16 * ho_ * wo_ * 16, lw.lanes)
    l1_fm = kb.alloc(Space.L1, geo.fm_bytes(taps, c1c, rows, cols, isz) // isz, dt)
    l0c = kb.alloc(Space.L0C, round_up(rows * cols, 16) * n_t, np.dtype(np.float32))
    per_image = {xa: image["x"], ya: image["y"]}
    per_image.update({ra: image["y"] for ra in tiles.residual_args})
    # block b starts at image (b // n_blocks) % i_blocks: (b % (n_blocks*i_blocks) - b % n_blocks) / n_blocks
    if i_blocks > 1:
        for a, v in per_image.items():
            kb.emit(tile.BlockOffsetModOp(a, stride=v // n_blocks, modulo=n_blocks * i_blocks))
            if n_blocks > 1:
                kb.emit(tile.BlockOffsetModOp(a, stride=-(v // n_blocks), modulo=n_blocks))

    l1_align = lw.soc.buffer("l1").align

    # elements from one C1 block of an L1 feature-map tile to the next when it does not depend on the
    # tile: a block of the full window (the tiles of a grid; any tile with one block, where it is unused)
    fixed_pitch = geo.fm_bytes(taps, 1, rows, cols, isz) // isz

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
        :func:`cann.lowering.conv_tiles.tile_grid` (its feature map copied a C1 block at a time, each
        at the fixed pitch of the full window, which img2col's ``fm_c1_stride`` reads)."""
        ho1 = min(ho_, ho0 + rows) if hi[0] else ho0 + rows
        wo1 = min(wo_, wo0 + cols) if hi[1] else wo0 + cols
        m_valid = (ho1 - ho0) * (wo1 - wo0)
        m_pad = round_up(m_valid, 16)

        def clip(win, low: bool, high: bool):
            start, end, a, b_ = win
            return start, end, a if low else start, b_ if high else end

        loads = []  # (group, row window, column window, C1 blocks ca..cb) reading real input
        for gi, (oy, ox) in enumerate(groups):
            rw = input_window(ho0, ho1, sh, geo.pt, oy, dh, khg, h_)
            cw = input_window(wo0, wo1, sw, geo.pl, ox, dw, kwg, w_)
            if grid or (rw[3] > rw[2] and cw[3] > cw[2]):  # (a virtual tile may lie past the map)
                nr, nq = rw[3] - rw[2], cw[3] - cw[2]  # the real window
                rw, cw = clip(rw, lo[0], hi[0]), clip(cw, lo[1], hi[1])
                for ca in range(0, c1in, c1c):
                    cb = min(c1in, ca + c1c)
                    # a tile of a grid copies a burst per row of each C1 block (one copy per block
                    # whatever its window: the same ops in every tile); else the way its window allows
                    how = "blocks" if grid and c0in * isz % l1_align == 0 else fm_copy(nr, nq, cb - ca, w_, c0in,
                                                                                       isz, l1_align)
                    # a grid's blocks at the fixed pitch: the same fields in every tile whatever its
                    # window (its window's size, a product of two clamps, is not one loop_clamp);
                    # else packed, where the way copied them (as aligned as fm_copy found it)
                    fixed = (grid and how == "blocks") or cb - ca == 1
                    loads.append((gi, rw, cw, ca, cb, how, fixed_pitch if fixed else nr * nq * c0in))
        shared = len(loads) == 1  # one L1 tile serves every output-channel tile
        if shared:
            _load_fm(kb, xa, l1_fm, loads[0], h_, w_, c0in)

        def body(first: int, last: bool = False, ho0=ho0, wo0=wo0, m_valid=m_valid, m_pad=m_pad,
                 loads=loads, shared=shared) -> None:
            nt0, nt = first * n_t, n_t
            init = 1
            for ld in loads:
                gi, (rs, re, r0, r1), (qs, qe, q0, q1), ca, cb, _, pitch = ld
                if not shared:
                    _load_fm(kb, xa, l1_fm, ld, h_, w_, c0in)
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
                tw = wo1 - wo0
                segs = row_segments(ms0, valid, tw, ho0, wo0, wo_)
                for i, ra in enumerate(tiles.residual_args):
                    _move_subtile(kb, ra, tiles.bufs[f"r{i}"], True, segs, tw, base, ms0, valid, n1t, ho_, wo_)
                tiles.epilogue(l0c if loads else None, ms0 * nt, n1t, valid, ms)
                _move_subtile(kb, tiles.ub_out, ya, False, segs, tw, base, ms0, valid, n1t, ho_, wo_)

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
                emit_tiles(kb, mine, n_ct, rows, cols, ho_, wo_, tile_code, bool(loops))
    lw.launch(kb)
    return y


def _dense_weight(w: np.ndarray, group: int, cin: int, loc) -> np.ndarray:
    """``w`` [Cout, Cin/group, KH, KW] as one dense convolution's [Cout, Cin, KH, KW] weight, block-diagonal
    over the ``group`` groups (``w`` itself when ``group`` is 1).

    Raises:
        CannError: a weight shape that does not match ``cin`` input channels and ``group``.
    """
    cout, cin_g, kh_, kw_ = w.shape
    if cin_g * group != cin or cout % group:
        raise unsupported(loc, f"Conv: weight shape {list(w.shape)} does not match {cin} input channels, group {group}")
    if group == 1:
        return w
    dense = np.zeros((cout, cin, kh_, kw_), np.float32)
    og = cout // group
    for g in range(group):
        dense[g * og:(g + 1) * og, g * cin_g:(g + 1) * cin_g] = w[g * og:(g + 1) * og]
    return dense


def _record_split(kb: KernelBuilder, split: CoreSplit, pins: dict[str, int], cores: int, n_tiles: int, wo_: int,
                  c1in: int, c04: bool, loc) -> int:
    """Set the kernel's ``block_dim`` (and ``block_modulo``) from ``split`` and record in ``kb.tiling`` the
    values that differ from the whole-map defaults or were pinned; the ``loops`` value (0 or 1).

    Raises:
        CannError: a pinned ``loops`` other than 0 or 1.
    """
    i_blocks, n_blocks, m_blocks = split.i_blocks, split.n_blocks, split.m_blocks
    taps, rows, cols, c1c = split.taps, split.rows, split.cols, split.c1
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
    return loops


def _weight_matrix(w: np.ndarray, c1in: int, np_: int, kdim: int, taps: bool, c04: bool) -> np.ndarray:
    """The dense weight ``w`` [Cout, Cin, KH, KW] as the ``[kdim, np_]`` matrix (fp32) whose K order is
    img2col's: ``(c1, kh, kw, c0)``, or per tap ``(kh, kw, c1, c0)`` with ``taps``, or for a C04 map
    ``(c1, kh, kw, c4)`` (:func:`cann.lowering.small_cin.c04_weight_matrix`; K padded to k0 by
    :func:`cann.lowering.cube.fractal_z`); channels padded with zeros to ``c1in`` x 16 and ``np_``."""
    if c04:
        return small_cin.c04_weight_matrix(w, np_)
    cout, cin, kh_, kw_ = w.shape
    wp = np.zeros((np_, c1in * 16, kh_, kw_), np.float32)
    wp[:cout, :cin] = w
    order = (3, 4, 1, 2, 0) if taps else (1, 3, 4, 2, 0)
    return wp.reshape(np_, c1in, 16, kh_, kw_).transpose(order).reshape(kdim, np_)


def _load_fm(kb: KernelBuilder, xa, l1_fm, ld: tuple, h_: int, w_: int, c0in: int) -> None:
    """x[image 0, C1 blocks ca..cb, rows r0..r1, columns q0..q1] -> l1_fm [cb-ca][r1-r0][q1-q0][C0],
    C1 block c at c * pitch."""
    _, (_, _, r0, r1), (_, _, q0, q1), ca, cb, how, pitch = ld  # how: only aligned ways (conv_plan)
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


def _move_subtile(kb: KernelBuilder, src, dst, into_ub: bool, segs: list[tuple[int, int, int]], tw: int, base: int,
                  ms0: int, valid: int, n1t: int, ho_: int, wo_: int) -> None:
    """GM <-> UB ([n1t][valid][16]) for an M subtile's ``valid`` positions from tile position ``ms0`` of
    a ``tw``-wide output tile (``segs``: their runs per map row, :func:`cann.lowering.conv_tiles.row_segments`;
    ``base``: the GM offset of the tile's channel block in a ``ho_`` x ``wo_`` map), a copy per map row
    they cover (one when they are contiguous in the map; with one C0 block, one per run of whole tile
    rows: a burst per row); the rows' copies are one loop."""
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
