"""ONNX Gather as an AI Core kernel (``graph.gather``).

The data tensor is seen as ``[outer][n][inner]`` (``n`` the gathered axis); the output is
``[outer][K][inner]`` for ``K`` indices. Every index moves ``outer`` bursts of ``inner`` elements
GM -> UB -> GM.

* **Constant indices** (wrapped and range-checked at compile time): the copies are fixed DMA bursts;
  runs of consecutive indices become one burst (split into UB-sized pieces when longer than UB).
* **Runtime indices** (an int32/int64 tensor): the kernel loads the indices into UB; per index the
  scalar unit loads it into a register (``ld_idx``, which wraps negative values by ``+ n`` and
  faults on an index outside ``[-n, n)``), then ``copy_gm_to_ub_reg`` reads the rows at
  ``register * inner`` (the real Ascend pattern: the scalar unit reads indices and issues copies);
  a row longer than UB moves in UB-sized pieces.
  The scalar loads read the indices in either width, so int64 indices need no conversion kernel.

Data of any GM dtype (float16/32, int32/64) is moved by DMA only; float constants take the
precision mode's dtype.
"""

from __future__ import annotations

import math

import numpy as np

from cann.dialects.tile import Space
from cann.hw import isa
from cann.lowering.common import ND, DevTensor, Lowering, narrow, ub_chunk, unsupported


def _align(lw: Lowering, elems: int, isz: int) -> int:
    bb = lw.soc.vector.block_bytes
    return -(-elems * isz // bb) * bb // isz


def lower_gather(conv, op) -> DevTensor:
    lw: Lowering = conv.lw
    loc = op.location
    axis = op.axis.value.data
    out_shape = tuple(op.results[0].type.get_shape())
    if math.prod(out_shape) == 0:
        raise unsupported(loc, "Gather with an empty result")
    dshape = tuple(op.data.type.get_shape())
    if op.data in conv.consts:
        arr = np.asarray(conv.consts[op.data])
        arr = narrow(arr, lw.dtype) if arr.dtype.kind == "f" else arr
        if arr.dtype not in (lw.dtype, np.dtype(np.int32), np.dtype(np.int64)):
            raise unsupported(loc, f"Gather of {arr.dtype} data is not supported")
        data = lw.constant(np.ascontiguousarray(arr).reshape(-1), ND, arr.shape)
    else:
        data = conv.tensor(op.data, loc)
        if data.dtype.kind == "f":
            data = lw.as_format(data, ND, None, loc)
        elif data.fmt != ND:
            raise unsupported(loc, "Gather of integer data not in ND format")
    outer = math.prod(dshape[:axis])
    n = dshape[axis]
    inner = math.prod(dshape[axis + 1:])
    out = lw.gm_tensor(out_shape, ND, data.dtype)
    if op.indices in conv.consts:
        idx = np.asarray(conv.consts[op.indices]).astype(np.int64).reshape(-1)
        bad = idx[(idx < -n) | (idx >= n)]
        if bad.size:
            raise unsupported(loc, f"Gather index {int(bad[0])} out of range [{-n}, {n - 1}] for axis {axis}")
        _const_gather(lw, data, out, np.where(idx < 0, idx + n, idx), outer, n, inner, loc)
    else:
        ind = conv.tensor(op.indices, loc)
        if ind.dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
            raise unsupported(loc, f"Gather indices of dtype {ind.dtype} (int32 or int64 expected)")
        _runtime_gather(lw, data, ind, out, outer, n, inner, loc)
    return out


def _const_gather(lw: Lowering, data: DevTensor, out: DevTensor, idx: np.ndarray, outer: int, n: int, inner: int,
                  loc) -> None:
    k_total = idx.size
    isz = data.dtype.itemsize
    kb = lw.kernel("gather", loc)
    sa, da = kb.arg(data), kb.arg(out)
    chunk = ub_chunk(lw, isz, 256)
    kb.tiling["chunk"] = chunk
    buf = kb.alloc(Space.UB, chunk, data.dtype)
    runs: list[tuple[int, int, int]] = []  # (first output position, first index, length)
    for k, i in enumerate(idx.tolist()):
        if runs and runs[-1][1] + runs[-1][2] == i and runs[-1][0] + runs[-1][2] == k:
            runs[-1] = (runs[-1][0], runs[-1][1], runs[-1][2] + 1)
        else:
            runs.append((k, i, 1))
    for k0, i0, ln in runs:
        burst = ln * inner
        if burst > chunk:  # one outer row at a time, the burst split into UB-sized pieces
            for o in range(outer):
                for b0 in range(0, burst, chunk):
                    b = min(chunk, burst - b0)
                    kb.copy(sa, buf, src_offset=(o * n + i0) * inner + b0, burst=b)
                    kb.copy(buf, da, dst_offset=(o * k_total + k0) * inner + b0, burst=b)
            continue
        per = max(1, chunk // burst)
        for o0 in range(0, outer, per):
            oc = min(per, outer - o0)
            kb.copy(sa, buf, src_offset=(o0 * n + i0) * inner, nburst=oc, burst=burst, src_stride=n * inner,
                    dst_stride=burst)
            kb.copy(buf, da, dst_offset=(o0 * k_total + k0) * inner, nburst=oc, burst=burst, src_stride=burst,
                    dst_stride=k_total * inner)
    lw.launch(kb)


def _runtime_gather(lw: Lowering, data: DevTensor, ind: DevTensor, out: DevTensor, outer: int, n: int, inner: int,
                    loc) -> None:
    from cann.dialects import tile

    k_total = ind.size
    isz = data.dtype.itemsize
    kb = lw.kernel("gather", loc)
    sa, ia, da = kb.arg(data), kb.arg(ind), kb.arg(out)
    ub = lw.usable("ub")
    ichunk = min(_align(lw, k_total, ind.dtype.itemsize), 1024)
    ibuf = kb.alloc(Space.UB, ichunk, ind.dtype)
    avail = (ub - 2 * 256 - ichunk * ind.dtype.itemsize) // isz
    if inner > avail:  # rows longer than UB: per index and outer row, UB-sized pieces of the row
        piece = avail // _align(lw, 1, isz) * _align(lw, 1, isz)
        kb.tiling["piece"] = piece
        buf = kb.alloc(Space.UB, piece, data.dtype)
        reg = 0
        for q0 in range(0, k_total, ichunk):
            q = min(ichunk, k_total - q0)
            kb.copy(ia, ibuf, src_offset=q0, burst=q)
            for j in range(q):
                r = reg % isa.SCALAR_REGS
                reg += 1
                kb.emit(tile.LoadIndexOp(ibuf, src_offset=j, reg=r, bound=n))
                for o in range(outer):
                    for b0 in range(0, inner, piece):
                        b = min(piece, inner - b0)
                        kb.emit(tile.CopyIndexedOp(sa, buf, src_offset=o * n * inner + b0, dst_offset=0, nburst=1,
                                                   burst=b, src_stride=b, dst_stride=b, reg=r, reg_stride=inner))
                        kb.copy(buf, da, dst_offset=(o * k_total + q0 + j) * inner + b0, burst=b)
        lw.launch(kb)
        return
    # rows of outer per slot, and slots (indices) staged before a flush
    oc = max(1, min(outer, avail // _align(lw, inner, isz)))
    row = inner if oc == 1 else None
    slot = _align(lw, oc * inner, isz)
    nslot = max(1, min(k_total, avail // slot, isa.SCALAR_REGS))
    buf = kb.alloc(Space.UB, nslot * slot, data.dtype)
    contiguous = outer == 1 and slot == inner  # slots land back to back in the output
    reg = 0
    for q0 in range(0, k_total, ichunk):
        q = min(ichunk, k_total - q0)
        kb.copy(ia, ibuf, src_offset=q0, burst=q)
        for o0 in range(0, outer, oc):
            ocn = min(oc, outer - o0)
            for s0 in range(0, q, nslot):
                sn = min(nslot, q - s0)
                for j in range(sn):
                    r = reg % isa.SCALAR_REGS
                    reg += 1
                    kb.emit(tile.LoadIndexOp(ibuf, src_offset=s0 + j, reg=r, bound=n))
                    kb.emit(tile.CopyIndexedOp(sa, buf, src_offset=o0 * n * inner, dst_offset=j * slot, nburst=ocn,
                                               burst=inner, src_stride=n * inner, dst_stride=inner, reg=r,
                                               reg_stride=inner))
                k = q0 + s0
                if contiguous:
                    kb.copy(buf, da, dst_offset=k * inner, burst=sn * inner)
                else:
                    for j in range(sn):
                        kb.copy(buf, da, src_offset=j * slot, dst_offset=(o0 * k_total + k + j) * inner, nburst=ocn,
                                burst=inner, src_stride=inner, dst_stride=k_total * inner)
    del row
    lw.launch(kb)
