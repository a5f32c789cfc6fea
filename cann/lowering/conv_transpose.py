"""ConvTranspose (``graph.conv_transpose``) as a convolution on the cube.

``y[o, Y] = sum x[c, i] * W[c, o, k]`` over ``Y = i*s - pad_begin + k*d``. The input is scattered
into a zero-filled, stride-dilated NC1HWC0 buffer (a DMA kernel: ``vdup`` zeros, then per input
row one copy whose bursts are the 16-channel blocks of the row, ``dst_stride = stride_w * 16``),
with input row ``i`` at buffer row ``d*(k-1) - pad_begin + i*s`` (rows falling outside are
cropped: a pad larger than ``d*(k-1)``; a row wider than UB is copied in UB-sized pieces); the buffer is as tall as the output plus the dilated
kernel minus one, so ``output_padding`` / ``output_shape`` need no special case. Then
:func:`cann.lowering.conv.conv2d` runs on the buffer with no padding, stride 1, the same dilation
and the weight spatially flipped with input and output channels swapped (per group).
"""

from __future__ import annotations

import numpy as np

from cann.dialects.tile import Space
from cann.lowering.common import NC1HWC0, DevTensor, Lowering, ub_chunk
from cann.lowering.conv import conv2d
from cann.lowering.cube import Epilogue


def conv_weight(w: np.ndarray, group: int) -> np.ndarray:
    """ConvTranspose weight [Cin, Cout/g, KH, KW] -> the equivalent Conv weight [Cout, Cin/g, KH, KW]."""
    cin, og, kh, kw = w.shape
    cg = cin // group
    out = np.empty((og * group, cg, kh, kw), np.float32)
    for g in range(group):
        blk = w[g * cg:(g + 1) * cg]  # [cg, og, kh, kw]
        out[g * og:(g + 1) * og] = blk.transpose(1, 0, 2, 3)[:, :, ::-1, ::-1]
    return out


def scatter(lw: Lowering, x: DevTensor, strides, offsets, buf_hw, loc) -> DevTensor:
    """A zero NC1HWC0 tensor of spatial size ``buf_hw`` with ``x[.., i, j, :]`` at
    ``(offsets[0] + i*strides[0], offsets[1] + j*strides[1])`` (positions outside are dropped)."""
    x = lw.as_format(x, NC1HWC0, lw.dtype, loc)
    n_, c_, h_, w_ = x.shape
    hb, wb = buf_hw
    sh, sw = strides
    oh, ow = offsets
    out = lw.gm_tensor((n_, c_, hb, wb), NC1HWC0)
    c1 = x.c1
    planes = n_ * c1
    kb = lw.kernel("dilate_scatter", loc)
    xa, ya = kb.arg(x), kb.arg(out)
    kb.partition(planes)
    kb.block_offset(xa, h_ * w_ * 16)
    kb.block_offset(ya, hb * wb * 16)
    dt = lw.dtype
    chunk = ub_chunk(lw, dt.itemsize * 2)
    chunk = min(chunk, -(-hb * wb * 16 // 256) * 256)
    zero = kb.alloc(Space.UB, chunk, dt)
    rows_ub = kb.alloc(Space.UB, chunk, dt)
    kb.vec("dup", zero, count=chunk, scalar=0.0)
    # input rows and columns that land inside the buffer (two intervals)
    js = [j for j in range(w_) if 0 <= ow + j * sw < wb]
    is_ = [i for i in range(h_) if 0 <= oh + i * sh < hb]
    seg = min(len(js), chunk // 16)  # input columns per copy: a whole row, or UB-sized pieces of one
    kb.tiling["cols"] = seg
    per = max(1, chunk // (max(seg, 1) * 16))  # input rows per copy
    plane_b = hb * wb * 16

    def body(first: int, last: bool = False) -> None:
        base_b = first * plane_b
        for q0 in range(0, plane_b, chunk):
            kb.copy(zero, ya, dst_offset=base_b + q0, burst=min(chunk, plane_b - q0))
        if not js or not is_:
            return
        j_end = js[-1] + 1
        for k0 in range(0, len(is_), per):
            grp = is_[k0:k0 + per]
            i_lo = grp[0]
            for s0 in range(js[0], j_end, seg):
                sc = min(seg, j_end - s0)
                src_off = ((first * h_ + i_lo) * w_ + s0) * 16
                if sc == w_:  # whole rows: one contiguous burst
                    kb.copy(xa, rows_ub, src_offset=src_off, burst=len(grp) * w_ * 16)
                else:
                    kb.copy(xa, rows_ub, src_offset=src_off, nburst=len(grp), burst=sc * 16, src_stride=w_ * 16,
                            dst_stride=sc * 16)
                for i in grp:
                    src = (i - i_lo) * sc * 16
                    dst = base_b + ((oh + i * sh) * wb + ow + s0 * sw) * 16
                    if sw == 1:
                        kb.copy(rows_ub, ya, src_offset=src, dst_offset=dst, burst=sc * 16)
                    else:
                        kb.copy(rows_ub, ya, src_offset=src, dst_offset=dst, nburst=sc, burst=16, src_stride=16,
                                dst_stride=sw * 16)

    kb.for_tiles(planes, body)
    lw.launch(kb)
    return out


def conv_transpose(lw: Lowering, x: DevTensor, w: np.ndarray, b: np.ndarray | None, strides, pads, dilations,
                   group: int, out_shape, loc, epilogue: Epilogue | None = None) -> DevTensor:
    _, _, kh, kw = w.shape
    _, _, ho, wo = out_shape
    dh, dw = dilations
    eh, ew = dh * (kh - 1) + 1, dw * (kw - 1) + 1
    hb, wb = ho + eh - 1, wo + ew - 1
    offs = (eh - 1 - pads[0], ew - 1 - pads[1])
    buf = scatter(lw, x, strides, offs, (hb, wb), loc)
    return conv2d(lw, buf, conv_weight(w.astype(np.float32), group), b, (1, 1), (0, 0, 0, 0), (dh, dw), group,
                  tuple(out_shape), loc, kernel_hint="conv_transpose", epilogue=epilogue)
