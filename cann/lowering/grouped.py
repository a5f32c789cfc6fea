"""Grouped convolution on the cube, per packed group: no all-zero 16x16 fractal multiplied.

A Conv with ``1 < group < Cin`` (and not depthwise: :mod:`cann.lowering.depthwise`) is split into
*super-groups*: the fewest ``S`` consecutive groups whose input and output channels both fill whole
C0 blocks (``S*Cin_g`` and ``S*Cout_g`` multiples of 16; ``S = 16 / Cin_g`` for ResNeXt's narrow
groups, ``S = 1`` for groups of 16 channels or more). Each super-group is a dense convolution of
``wi = S*Cin_g/16`` input C1 blocks to ``wo = S*Cout_g/16`` output C1 blocks with a block-diagonal
weight inside it: K = ``wi*KH*KW*16`` instead of ``C1in*KH*KW*16``, so the MACs executed are
``Cin_g``-wide groups padded to 16 channels (``16/Cin_g`` x the real MACs when ``Cin_g < 16``, 1x
from 16 on) instead of ``group`` x. When some (input block, output block) pair of a super-group
shares no group (e.g. groups of 24 channels), its fractals would be all zero: :func:`grouped_conv2d`
runs :func:`cann.lowering.grouped_runs.run_grouped_conv2d` instead (runs of output blocks over the
input blocks their groups read).

Work split: the ``N * G'`` super-group planes over ``n_blocks`` cores (GM pointers moved by one
super-group: input, output, weights and tables are uniform in it), output row bands over
``m_blocks`` groups of cores. Per band: the input rows of the super-group's C1 blocks into L1,
img2col + mmad over K chunks, the bias and fused epilogue (:class:`cann.lowering.cube.Epilogue`)
per M subtile, one write to GM.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np

from cann.dialects.tile import Space
from cann.lowering.common import NC1HWC0, DevTensor, Lowering, plane_row_split, unsupported
from cann.lowering.conv_plan import input_window
from cann.lowering.cube import CubeTiles, Epilogue, bias_table, fractal_z
from cann.lowering.grouped_runs import band_mmad, band_out, run_grouped_conv2d


def _ceil(a: int, b: int) -> int:
    return -(-a // b) * b


def super_group(cin: int, cout: int, group: int) -> int | None:
    """``S``: groups per super-group, or None when grouped packing does not apply (Cin or Cout not
    a multiple of 16, or a super-group with a structurally all-zero fractal)."""
    cin_g, cout_g = cin // group, cout // group
    if cin % 16 or cout % 16:
        return None
    s = next(s for s in range(1, group + 1) if s * cin_g % 16 == 0 and s * cout_g % 16 == 0)
    if group % s:
        return None
    wi, wo = s * cin_g // 16, s * cout_g // 16
    for jo in range(wo):
        g0, g1 = 16 * jo // cout_g, (16 * jo + 15) // cout_g  # groups of output block jo
        used = {c // 16 for g in range(g0, g1 + 1) for c in range(g * cin_g, (g + 1) * cin_g)}
        if len(used) < wi:  # an input block no group of this output block reads: zero fractals
            return None
    return s


def super_group_weights(w: np.ndarray, group: int, s: int, k0: int, dt: np.dtype) -> list[np.ndarray]:
    """Per super-group of ``s`` groups, the dense [wo*16, wi*16, KH, KW] block-diagonal block of ``w``
    [Cout, Cin/group, KH, KW] as the Zn matrix (:func:`cann.lowering.cube.fractal_z`, K ordered
    (c1, kh, kw, c0)) the kernel loads: ``[K/k0][wo][16][k0]`` each."""
    cout, cin_g, kh_, kw_ = w.shape
    cout_g = cout // group
    wi, n_t = s * cin_g // 16, s * cout_g
    mats = []
    for sg in range(group // s):
        dense = np.zeros((n_t, wi * 16, kh_, kw_), np.float32)
        for gg in range(s):
            o0, i0 = gg * cout_g, gg * cin_g
            dense[o0:o0 + cout_g, i0:i0 + cin_g] = w[(sg * s + gg) * cout_g:(sg * s + gg + 1) * cout_g]
        bmat = dense.reshape(n_t, wi, 16, kh_, kw_).transpose(1, 3, 4, 2, 0).reshape(wi * 16 * kh_ * kw_, n_t)
        mats.append(fractal_z(bmat, k0, dt))
    return mats


def grouped_conv2d(lw: Lowering, x: DevTensor, w: np.ndarray, b: np.ndarray | None, strides, pads, dilations,
                   group: int, out_shape: tuple[int, ...], loc, kernel_hint: str = "gconv2d",
                   epilogue: Epilogue | None = None, pins: dict[str, int] | None = None) -> DevTensor | None:
    """Grouped 2-D convolution of NC1HWC0 ``x`` [N, Cin, H, W] by constant ``w`` [Cout, Cin/group, KH,
    KW], bias ``b`` [Cout] or None, then the fused ``epilogue``: NC1HWC0 ``out_shape`` [N, Cout, Ho,
    Wo] in the device dtype; where super-group packing does not apply (:func:`super_group`), that of
    :func:`cann.lowering.grouped_runs.run_grouped_conv2d` (None when it does not fit: the caller keeps
    the dense convolution).

    Tiling (``tile.tiling``, pinnable): ``rows`` output rows per band, ``n_blocks`` cores over the
    super-group planes, ``m_blocks`` groups of cores over the bands, ``m`` / ``k`` the L0A tile.

    Raises:
        CannError: the fused epilogue's tiles do not fit UB (the group falls back to one kernel per
            op), or a pinned tiling beyond the cores or buffers.
    """
    n_, cin, h_, w_ = x.shape
    cout, cin_g, kh_, kw_ = w.shape
    s = super_group(cin, cout, group)
    if s is None:
        return run_grouped_conv2d(lw, x, w, b, strides, pads, dilations, group, out_shape, loc, kernel_hint,
                                  epilogue, pins)
    x = lw.as_format(x, NC1HWC0, lw.dtype, loc)
    epi = epilogue or Epilogue()
    epi.residuals = [lw.as_format(r, NC1HWC0, lw.dtype, loc) for r in epi.residuals]
    cout_g = cout // group
    wi, wob = s * cin_g // 16, s * cout_g // 16
    gp = group // s  # super-groups
    planes = n_ * gp
    _, _, ho_, wo_ = out_shape
    sh, sw = strides
    pt, pl = pads[0], pads[1]
    dh, dw = dilations
    dt, isz, lanes = lw.dtype, lw.dtype.itemsize, lw.lanes
    k0 = lw.soc.cube.k0(isz)
    kdim = wi * kh_ * kw_ * 16
    n_t = wob * 16

    mats = super_group_weights(w, group, s, k0, dt)
    wz = np.ascontiguousarray(np.tile(np.stack(mats)[None], (n_, 1, 1, 1, 1, 1)))
    per_w = mats[0].size

    cores = lw.cores
    m_t = min(128, _ceil(ho_ * wo_, 16))
    k_t = min(lw.usable("l0a") // (m_t * isz), lw.usable("l0b") // (n_t * isz)) // k0 * k0
    k_t = max(k0, min(k_t, _ceil(kdim, k0)))
    kb = lw.kernel(kernel_hint, loc, {"m": m_t, "k": k_t}, pins)
    pins = dict(kb.tiling)
    m_t, k_t = kb.tiling["m"], kb.tiling["k"]
    if m_t % 16 or k_t % k0 or m_t * k_t * isz > lw.usable("l0a") or k_t * n_t * isz > lw.usable("l0b"):
        raise unsupported(loc, f"grouped Conv: tiling m = {m_t}, k = {k_t}: multiples of 16 and {k0} within L0A / L0B")
    n_blocks, m_cap = plane_row_split(loc, "grouped Conv", pins, planes, cores)
    if planes % n_blocks:  # whole rounds of planes: every round is the hardware loop's (band_code
        # addresses a block's plane by its block offsets only)
        if "n_blocks" in pins:
            raise unsupported(loc, f"grouped Conv: tiling n_blocks = {n_blocks} must divide the {planes} "
                                   f"super-group planes")
        n_blocks = max(d for d in range(1, n_blocks + 1) if planes % d == 0)
        m_cap = pins.get("m_blocks", max(1, cores // n_blocks))
    l0c_pos = lw.usable("l0c") // (n_t * 4) // 16 * 16
    l1_budget = lw.usable("l1") - k_t * n_t * isz

    def fm_rows(rows: int) -> int:
        return min(h_, (rows - 1) * sh + dh * (kh_ - 1) + 1)

    fit = [r for r in range(1, ho_ + 1)
           if _ceil(r * wo_, 16) <= l0c_pos and wi * fm_rows(r) * w_ * 16 * isz <= l1_budget]
    if not fit:
        raise unsupported(loc, f"grouped Conv: one output row of {wo_} positions does not fit L0C / L1")
    rows = min(pins.get("rows", fit[-1]), fit[-1])
    if "rows" not in pins:  # bands for every row group of cores, as even as possible
        rows = max(1, min(rows, math.ceil(ho_ / m_cap)))
        rows = math.ceil(ho_ / math.ceil(ho_ / rows))
    bands = [(r0, min(ho_, r0 + rows)) for r0 in range(0, ho_, rows)]
    m_blocks = min(m_cap, len(bands))
    kb.block_dim = n_blocks * m_blocks
    kb.tiling.update(rows=rows, block_dim=kb.block_dim, n_blocks=n_blocks, m_blocks=m_blocks)
    if m_blocks > 1:
        kb.block_modulo = n_blocks

    x_step, y_step = wi * h_ * w_ * 16, wob * ho_ * wo_ * 16
    y = lw.gm_tensor(tuple(out_shape), NC1HWC0)
    wc = lw.constant(wz.reshape(-1), "FRACTAL_Z")
    bt = lw.constant(np.ascontiguousarray(np.tile(bias_table(b, cout, lanes, dt), (n_, 1))), "ND")
    xa, wa, ba, ya = kb.arg(x), kb.arg(wc), kb.arg(bt), kb.arg(y)
    kb.block_offset(xa, x_step)
    kb.block_offset(wa, per_w)
    kb.block_offset(ba, wob * lanes)
    kb.block_offset(ya, y_step)
    tiles = CubeTiles(lw, kb, k_t, n_t, m_t, 0, epi)
    for v in epi.tables:  # per-channel tables as the bias: one super-group's rows per plane, per image
        a = kb.arg(lw.constant(np.ascontiguousarray(np.tile(bias_table(v, v.size, lanes, dt), (n_, 1))), "ND"))
        kb.block_offset(a, wob * lanes)
        tiles.table_args.append(a)
    for r in epi.residuals:
        a = kb.arg(r, fresh=True)
        kb.block_offset(a, y_step)
        tiles.residual_args.append(a)
    l1_fm = kb.alloc(Space.L1, wi * fm_rows(rows) * w_ * 16, dt)
    l0c = kb.alloc(Space.L0C, _ceil(rows * wo_, 16) * n_t, np.dtype(np.float32))
    cw = input_window(0, wo_, sw, pl, 0, dw, kw_, w_)

    def band_code(r0: int, r1: int) -> None:
        m_valid = (r1 - r0) * wo_
        m_pad = _ceil(m_valid, 16)
        rs, re, lo, hi = input_window(r0, r1, sh, pt, 0, dh, kh_, h_)
        real = hi > lo and cw[3] > cw[2]
        if real:
            kb.copy(xa, l1_fm, src_offset=lo * w_ * 16, nburst=wi, burst=(hi - lo) * w_ * 16,
                    src_stride=h_ * w_ * 16, dst_stride=(hi - lo) * w_ * 16)
            band_mmad(kb, tiles, l1_fm, l0c, dict(
                fm_c1=wi, fm_h=hi - lo, fm_w=w_, pad_t=lo - rs, pad_b=re - hi, pad_l=cw[2] - cw[0],
                pad_r=cw[1] - cw[3], stride_h=sh, stride_w=sw, kernel_h=kh_, kernel_w=kw_, dil_h=dh, dil_w=dw,
                fm_c1_stride=(hi - lo) * w_ * 16), m_pad, m_t, _ceil(kdim, k0), k_t, n_t,  # packed, as copied
                lambda kt0, kt: tiles.load_weights(wa, wob, kt0, kt, 0, n_t))
        tiles.load_bias(ba, 0, n_t)
        tiles.load_tables(0, n_t)
        band_out(kb, tiles, ya, l0c if real else None, r0 * wo_ * 16, wob, m_valid, m_pad, m_t, n_t, ho_ * wo_ * 16)

    per_block = [len(bands) // m_blocks + (i < len(bands) % m_blocks) for i in range(m_blocks)]
    starts = [sum(per_block[:i]) for i in range(m_blocks + 1)]
    for grp in range(m_blocks):
        mine = bands[starts[grp]:starts[grp + 1]]
        with kb.core_group(grp * n_blocks, n_blocks) if m_blocks > 1 else contextlib.nullcontext():
            kb.for_tiles(planes, lambda first, last=False, mine=mine: kb.roll(
                len(mine), lambda i: band_code(*mine[i]), clamp=True), cores=n_blocks)
    lw.launch(kb)
    return y

