"""Data-movement kernels: format/dtype conversion (``trans_data``), Concat, Transpose.

All of them stage data through UB with MTE2 (GM -> UB) and MTE3 (UB -> GM) burst copies. Layout
changes that move lanes use 16x16 vector transposes in UB instead of element-sized DMA bursts:
NCHW <-> NC1HWC0 (:mod:`cann.lowering.transdata`) and channel concats at offsets inside a C0 block
(the channel gather of :mod:`cann.lowering.shuffle`).
"""

from __future__ import annotations

import contextlib
import math

import numpy as np
from xdsl.ir import Attribute

from cann.dialects.tile import Space
from cann.lowering.common import ND, NC1HWC0, NC1HWC0_C04, DevTensor, Lowering, ub_chunk, unsupported
from cann.lowering.shuffle import block_concat, block_concat_fits, channel_gather, gather_fits
from cann.lowering.small_cin import trans_data_c04
from cann.lowering.transdata import nc1hwc0_to_nchw, nchw_to_nc1hwc0


def _cast_chunk(kb, src_buf, dst_buf, n: int) -> None:
    kb.vec("cast", dst_buf, src_buf, count=n)


def trans_data(lw: Lowering, t: DevTensor, fmt: str, dtype: np.dtype, loc: Attribute | None) -> DevTensor:
    """Convert ``t`` to ``fmt`` (ND, NC1HWC0 or, from ND, NC1HWC0_C04) and ``dtype``; returns the new GM tensor."""
    if fmt == NC1HWC0_C04:
        return trans_data_c04(lw, t, dtype, loc)
    if fmt == NC1HWC0 and len(t.shape) != 4:
        raise unsupported(loc, f"NC1HWC0 needs a 4-D tensor, got shape {list(t.shape)}")
    out = lw.gm_tensor(t.shape, fmt, dtype)
    cast = t.dtype != out.dtype
    kb = lw.kernel("trans_data", loc)
    if t.fmt != out.fmt and t.shape[2] * t.shape[3] > 1:  # rows in, 16x16 vector transposes, blocks out
        (nchw_to_nc1hwc0 if out.fmt == NC1HWC0 else nc1hwc0_to_nchw)(lw, kb, t, out)
        lw.launch(kb)
        return out
    src, dst = kb.arg(t), kb.arg(out)
    per_elem = t.dtype.itemsize + (out.dtype.itemsize * 2 if cast else 0) + out.dtype.itemsize
    chunk = ub_chunk(lw, per_elem)
    kb.tiling["chunk"] = chunk
    a = kb.alloc(Space.UB, chunk, t.dtype)
    b = kb.alloc(Space.UB, chunk, out.dtype) if cast else a

    def move(src_off, dst_off, n, src_gather=1, dst_scatter=1):
        """n elements: GM src (every src_gather-th) -> UB -> GM dst (every dst_scatter-th)."""
        kb.copy(src, a, src_offset=src_off, nburst=n if src_gather > 1 else 1,
                burst=1 if src_gather > 1 else n, src_stride=src_gather, dst_stride=1)
        if cast:
            _cast_chunk(kb, a, b, n)
        kb.copy(b, dst, dst_offset=dst_off, nburst=n if dst_scatter > 1 else 1,
                burst=1 if dst_scatter > 1 else n, src_stride=1, dst_stride=dst_scatter)

    if t.fmt == out.fmt:  # dtype change only: same storage order; chunks spread over the cores
        n_chunks = math.ceil(t.size / chunk)
        kb.partition(n_chunks)
        kb.block_offset(src, chunk)
        kb.block_offset(dst, chunk)
        # a round's items start at ``first * chunk`` past the block offset: the hardware loop's
        # offsets hold inside the loop only, so the guarded last round addresses its items itself
        kb.for_tiles(n_chunks, lambda first, last=False: move(
            first * chunk, first * chunk, t.size - (n_chunks - 1) * chunk if last else chunk),
                     partial_last=t.size % chunk != 0)
    elif out.fmt == NC1HWC0:  # ND (NCHW) -> NC1HWC0
        n_, c_, h_, w_ = t.shape
        hw, c1 = h_ * w_, out.c1
        zero = None
        if c_ % 16:  # the padding channels: written as zeros by one contiguous burst, before the real ones
            zero = kb.alloc(Space.UB, chunk, out.dtype)
            kb.vec("dup", zero, count=chunk, scalar=0.0)
        # H*W == 1 (more positions: transdata.py, above): [N][C1][1][1][16] is [N][C1*16], contiguous
        with kb.loop(n_, {src: c_, dst: c1 * 16}):  # one image's code, looped
            for c0 in range(0, c_, chunk):
                move(c0, c0, min(chunk, c_ - c0))
            if zero is not None:
                kb.copy(zero, dst, dst_offset=c_, burst=c1 * 16 - c_)
    else:  # NC1HWC0 -> ND (NCHW)
        n_, c_, h_, w_ = t.shape
        hw, c1 = h_ * w_, t.c1
        with kb.loop(n_, {src: c1 * 16, dst: c_}):  # H*W == 1, as above: contiguous
            for c0 in range(0, c_, chunk):
                move(c0, c0, min(chunk, c_ - c0))
    lw.launch(kb)
    return out


def concat(lw: Lowering, inputs: list[DevTensor], axis: int, out_shape: tuple[int, ...], loc) -> DevTensor:
    """Concat: channel concat of NC1HWC0 tensors (axis 1 of 4-D: whole C0 blocks by DMA when every input
    starts on a block, else the lane-moving channel gather; both in :mod:`cann.lowering.shuffle`) or any
    axis of ND tensors (also the channel concats whose NC1HWC0 tiles would not fit UB)."""
    if len(out_shape) == 4 and axis == 1 and all(len(t.shape) == 4 for t in inputs) and \
            all(t.shape[2:] == inputs[0].shape[2:] for t in inputs):
        starts = np.cumsum([0] + [t.shape[1] for t in inputs[:-1]])
        distinct = len({id(t) for t in inputs}) == len(inputs)  # a tensor given twice (Tile): the ND path
        if any(s % 16 for s in starts):  # an input starting inside a C0 block: lanes move
            if distinct and gather_fits(lw, inputs, out_shape[1]):
                return channel_gather(lw, inputs, [(i, c) for i, t in enumerate(inputs) for c in range(t.shape[1])],
                                      "concat", loc)
        elif block_concat_fits(lw, out_shape[1]):
            return block_concat(lw, inputs, loc)  # whole C0 blocks, positions over the cores
    # integer ND tensors of one dtype are moved as they are (DMA only); float ones in the precision's dtype
    dt = inputs[0].dtype
    if not (dt.kind in "iu" and all(t.dtype == dt and t.fmt == ND for t in inputs)):
        dt = lw.dtype
    ins = [lw.as_format(t, ND, dt, loc) for t in inputs]
    out = lw.gm_tensor(out_shape, ND, dt)
    kb = lw.kernel("concat", loc)
    dst = kb.arg(out)
    outer = math.prod(out_shape[:axis])
    inner_out = math.prod(out_shape[axis:])
    chunk = ub_chunk(lw, dt.itemsize)
    kb.tiling["chunk"] = chunk
    buf = kb.alloc(Space.UB, chunk, dt)
    off = 0
    for t in ins:
        src = kb.arg(t)
        inner = math.prod(t.shape[axis:])
        with kb.loop(outer, {src: inner, dst: inner_out}):  # one hardware loop over the outer index
            for p0 in range(0, inner, chunk):
                p = min(chunk, inner - p0)
                kb.copy(src, buf, src_offset=p0, burst=p)
                kb.copy(buf, dst, dst_offset=off + p0, burst=p)
        off += inner
    lw.launch(kb)
    return out


def transpose(lw: Lowering, t: DevTensor, perm: tuple[int, ...], loc) -> DevTensor:
    """Transpose of an ND tensor: the longest run contiguous in both layouts moves as one burst,
    the next output axis is the burst count, the remaining axes are hardware loops. A run longer
    than UB moves in UB-sized pieces, one burst (a loop iteration) at a time."""
    dt = t.dtype if t.dtype.kind in "iu" and t.fmt == ND else lw.dtype  # integers: moved as they are
    t = lw.as_format(t, ND, dt, loc)
    shape = t.shape
    out_shape = tuple(shape[p] for p in perm)
    out = lw.gm_tensor(out_shape, ND, dt)
    src_strides = [math.prod(shape[i + 1:]) for i in range(len(shape))]
    # collapse the trailing output axes that are also trailing, in order, in the input
    run, k = 1, len(perm)
    while k > 0 and perm[k - 1] == len(shape) - (len(perm) - k) - 1:
        run *= out_shape[k - 1]
        k -= 1
    kb = lw.kernel("transpose", loc)
    src, dst = kb.arg(t), kb.arg(out)
    chunk = ub_chunk(lw, dt.itemsize)
    kb.tiling["chunk"] = chunk
    buf = kb.alloc(Space.UB, chunk, dt)
    if k == 0:  # identity permutation
        for p0 in range(0, t.size, chunk):
            p = min(chunk, t.size - p0)
            kb.copy(src, buf, src_offset=p0, burst=p)
            kb.copy(buf, dst, dst_offset=p0, burst=p)
        lw.launch(kb)
        return out
    nb_axis = k - 1  # output axis used as the burst count
    nb, nb_stride = out_shape[nb_axis], src_strides[perm[nb_axis]]
    per = max(1, chunk // run)
    # the other output axes are nested hardware loops (innermost first in the list below), so the
    # kernel's code is one output row's copies whatever the tensor's rank and size
    with contextlib.ExitStack() as loops:
        for a in range(nb_axis):
            if out_shape[a] > 1:
                loops.enter_context(kb.loop(out_shape[a], {src: src_strides[perm[a]], dst: math.prod(out_shape[a + 1:])}))
        if run > chunk:  # a run longer than UB: one more loop over the bursts, each run in UB-sized pieces
            with kb.loop(nb, {src: nb_stride, dst: run}):
                for p0 in range(0, run, chunk):
                    p = min(chunk, run - p0)
                    kb.copy(src, buf, src_offset=p0, burst=p)
                    kb.copy(buf, dst, dst_offset=p0, burst=p)
        else:
            for b0 in range(0, nb, per):
                cnt = min(per, nb - b0)
                kb.copy(src, buf, src_offset=b0 * nb_stride, nburst=cnt, burst=run, src_stride=nb_stride,
                        dst_stride=run)
                kb.copy(buf, dst, dst_offset=b0 * run, burst=cnt * run)
    lw.launch(kb)
    return out


def reshape(lw: Lowering, t: DevTensor, shape: tuple[int, ...], loc) -> DevTensor:
    """Reshape/Flatten: a view of the ND bytes (converting from NC1HWC0 first if needed)."""
    t = lw.as_format(t, ND, None, loc)
    return lw.view(t, shape)
