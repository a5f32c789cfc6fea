"""ONNX Where as an AI Core kernel (``graph.where``): ``vsel`` over UB chunks.

The ``vsel`` condition is 0/1 in the data dtype (docs/core-model.md). A constant condition becomes
such a device constant (broadcast at compile time); a runtime one is a bool tensor (one byte 0/1
per element) converted in the kernel by ``vconv`` (uint8 -> float16 [-> float32 / int32 ->
int64]). X and Y broadcast to the result (:func:`cann.lowering.math.broadcast_to`); a scalar
constant X or Y is a ``vdup``-filled UB buffer. A constant condition that is all true or all false
needs no select. Integer (int32 / int64) X and Y select in their dtype.
"""

from __future__ import annotations

import math

import numpy as np

from cann.dialects import tile
from cann.dialects.tile import Space
from cann.lowering import math as mathk
from cann.lowering.common import ND, DevTensor, Lowering, np_dtype, ub_chunk, unsupported


def _operand(conv, v, shape, loc):
    """A float scalar (a constant of one element) or a device tensor broadcast to ``shape``."""
    lw: Lowering = conv.lw
    c = conv.consts.get(v)
    if c is not None and np.asarray(c).size == 1:
        return float(np.asarray(c).reshape(-1)[0])
    return mathk.broadcast_to(lw, mathk._nd(lw, conv.tensor(v, loc), loc), shape, loc)


def lower_where(conv, op) -> DevTensor:
    lw: Lowering = conv.lw
    loc = op.location
    shape = tuple(op.results[0].type.get_shape())
    size = math.prod(shape)
    if size == 0:
        raise unsupported(loc, "Where with an empty result")
    cc = conv.consts.get(op.cond)
    if cc is None or np_dtype(op.results[0].type.element_type).kind != "f":
        return _where_program(conv, op, shape, cc, loc)
    # float data, constant condition
    cb = np.broadcast_to(np.asarray(cc).astype(bool), shape)
    if cb.all() or not cb.any():  # one side only
        v = op.x if cb.all() else op.y
        s = _operand(conv, v, shape, loc)
        if isinstance(s, float):
            return mathk.dense(lw, "where", loc, [], [("dup", "y", None, None, s)], out_shape=shape)
        return s
    cond = lw.constant(np.ascontiguousarray(cb, dtype=lw.dtype).reshape(-1), ND, shape)
    x, y = _operand(conv, op.x, shape, loc), _operand(conv, op.y, shape, loc)
    return select(lw, cond, x, y, shape, loc)


def _where_program(conv, op, shape, cc, loc) -> DevTensor:
    """Where as one :func:`cann.lowering.compare.program`: a runtime bool condition converted to
    the data dtype in the kernel, or a constant one; X / Y broadcast tensors or vdup scalars."""
    from cann.lowering.compare import BOOL, convert_steps, device_dtype, operand, program

    lw: Lowering = conv.lw
    dt = device_dtype(lw, np_dtype(op.results[0].type.element_type), loc)
    inputs: list[DevTensor] = []
    consts: dict[str, tuple] = {}
    types: dict[str, np.dtype] = {"y": dt}
    steps: list = []
    if cc is not None:
        cb = np.broadcast_to(np.asarray(cc).astype(bool), shape)
        if cb.all() or not cb.any():  # one side only
            v = op.x if cb.all() else op.y
            c = conv.consts.get(v)
            if c is not None and np.asarray(c).size == 1:
                return program(lw, "where", loc, [], [("dup", "y", None, None, np.asarray(c).reshape(-1)[0].item())],
                               types, shape)
            return mathk.broadcast_to(lw, operand(conv, v, loc), shape, loc)
        inputs.append(lw.constant(np.ascontiguousarray(cb, dtype=dt).reshape(-1), ND, shape))
        cond = "x0"
    else:
        inputs.append(mathk.broadcast_to(lw, operand(conv, op.cond, loc), shape, loc))
        if dt.itemsize == 1:  # 8-bit data: the bool bytes are already 0/1 in the vsel format
            cond = "x0"
        else:
            conv_steps, temps = convert_steps("x0", "c", BOOL, dt, "t", loc)
            steps += conv_steps
            types.update(temps, c=dt)
            cond = "c"
    names = []
    for v, cname in ((op.x, "cx"), (op.y, "cy")):
        c = conv.consts.get(v)
        if c is not None and np.asarray(c).size == 1:
            consts[cname] = (dt, np.asarray(c).reshape(-1)[0].item())
            names.append(cname)
        else:
            inputs.append(mathk.broadcast_to(lw, operand(conv, v, loc), shape, loc))
            names.append(f"x{len(inputs) - 1}")
    steps.append(("select", "y", cond, names[0], names[1]))
    return program(lw, "where", loc, inputs, steps, types, shape, consts)


def select(lw: Lowering, cond: DevTensor, x: DevTensor | float, y: DevTensor | float, shape, loc) -> DevTensor:
    """out = cond != 0 ? x : y over same-shaped ND tensors (x, y may be float scalars)."""
    size = math.prod(shape)
    tensors = [cond] + [t for t in (x, y) if not isinstance(t, float)]
    isz = lw.dtype.itemsize
    chunk = min(ub_chunk(lw, 4 * isz + 1, 256), max(256, -(-size // 256) * 256))
    out = lw.gm_tensor(tuple(shape), ND)
    kb = lw.kernel("where", loc)
    kb.tiling["chunk"] = chunk
    args = {id(t): kb.arg(t) for t in tensors}
    dst = kb.arg(out)
    cbuf = kb.alloc(Space.UB, chunk, lw.dtype)
    bufs = []
    for t in (x, y):
        b = kb.alloc(Space.UB, chunk, lw.dtype)
        if isinstance(t, float):
            kb.vec("dup", b, count=chunk, scalar=t)
        bufs.append(b)
    ybuf = kb.alloc(Space.UB, chunk, lw.dtype)
    for q0 in range(0, size, chunk):
        q = min(chunk, size - q0)
        kb.copy(args[id(cond)], cbuf, src_offset=q0, burst=q)
        for t, b in zip((x, y), bufs):
            if not isinstance(t, float):
                kb.copy(args[id(t)], b, src_offset=q0, burst=q)
        kb.emit(tile.SelectOp(ybuf, cbuf, bufs[0], bufs[1], count=q))
        kb.copy(ybuf, dst, dst_offset=q0, burst=q)
    lw.launch(kb)
    return out
