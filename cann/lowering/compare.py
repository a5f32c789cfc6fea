"""Comparisons, boolean logic, integer arithmetic, casts and rounding as AI Core vector kernels.

Device dtypes: float tensors are computed in the precision mode's dtype, int32 and int64 as
they are (int64 lanes: an ASSUMPTION of the core model, docs/core-model.md), bool tensors as one
byte 0/1 per element (``uint8`` lanes of ``vcmpv``, ``vconv`` and ``vsel``).

Every op here is one :func:`program` kernel: a straight-line vector program over same-sized ND
operands in UB chunks, each named buffer with its own dtype (operands are broadcast to the result
shape first by a DMA gather, :func:`cann.lowering.math.broadcast_to`). The instructions:

* comparisons: ``vcmpv`` (one 0/1 byte per lane); Not/And/Or/Xor on bool bytes: ``vxor``/``vand``/
  ``vor`` on int16 lanes (two bytes per lane; Not is xor with 0x0101);
* casts: ``vconv`` chains (bool -> float16 [-> float32 / int32 -> int64]; float -> int32 / int64
  truncates toward zero, as ONNX; int -> float rounds to nearest even); to bool: ``vcmpv ne 0``;
* Floor / Ceil / Round: ``vconv`` to the same float dtype with rounding floor / ceil / rint (ONNX
  Round is half to even);
* Sign: ``(x > 0) - (x < 0)`` from two ``vcmpv`` converted to the dtype; IsNaN: ``x != x``;
  IsInf: ``x == +inf`` / ``x == -inf`` against ``vdup`` buffers;
* ArgMax / ArgMin (:func:`arg_reduce`): the axis moved outermost (DMA transpose), then a hardware
  loop over its rows keeps the running extreme (``vmax``/``vmin``) and its row index (``vsel`` on
  int32 lanes with the ``vcmpv`` mask converted by ``vconv``), converted to int64 at the end;
* integer Add/Sub/Mul/Max/Min/Abs/Neg: ``vadd``/``vsub``/``vmul``/``vmax``/``vmin``/``vabs``/``vmuls``
  on int32 (int64: add/sub/max/min, Neg as 0 - x; Mul and Abs of int64 are refused: no int64
  multiply on the modeled vector unit).
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import IntegerType
from xdsl.ir import Operation, SSAValue

from cann.dialects import tile
from cann.dialects.tile import Space
from cann.lowering import math as mathk
from cann.lowering.common import ND, DevTensor, Lowering, np_dtype, ub_chunk, unsupported

BOOL = np.dtype(np.bool_)
F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
BF16 = np.dtype(ml_dtypes.bfloat16)  # storage only: converted to float32 by vconv
I32, I64 = np.dtype(np.int32), np.dtype(np.int64)
I16, U8, I8 = np.dtype(np.int16), np.dtype(np.uint8), np.dtype(np.int8)
U16, U32 = np.dtype(np.uint16), np.dtype(np.uint32)
#: narrow integers are computed in a wider dtype that holds every value exactly: 8-bit compared
#: and maxed in float16, added / multiplied in int32; uint16 in int32, uint32 in int64. Results
#: narrow back by keeping the low bits (the same wrap as numpy / ONNX).
NARROW = (U8, I8, U16, U32)
_WIDE_CMP = {U8: F16, I8: F16, U16: I32, U32: I64}
_WIDE_ARITH = {U8: I32, I8: I32, U16: I32, U32: I64}

#: graph ops lowered here whatever their dtype
OWN_OPS = frozenset({"graph.compare", "graph.logical", "graph.not", "graph.round", "graph.sign", "graph.is_nan",
                     "graph.is_inf", "graph.arg_reduce", "graph.mod"})
#: graph ops lowered here when their result is an integer tensor (or a cast involving int / bool)
INT_OPS = frozenset({"graph.add", "graph.sub", "graph.mul", "graph.div", "graph.max", "graph.min", "graph.abs",
                     "graph.neg", "graph.pow", "graph.clip", "graph.where"})

Step = tuple  # (op, dst, src0[, src1[, scalar]]) or ("select", dst, cond, a, b)


def handles(op: Operation) -> bool:
    """Whether :func:`lower` is the lowering of graph op ``op`` (``graph.where`` of any dtype is
    :func:`cann.lowering.select.lower_where`'s, which builds on this module)."""
    if op.name == "graph.where":
        return False
    if op.name in OWN_OPS:
        return True
    if op.name == "graph.cast":
        src, dst = np_dtype(op.operands[0].type.element_type), np_dtype(op.results[0].type.element_type)
        return src.kind != "f" or dst.kind != "f"
    return op.name in INT_OPS and bool(op.results) and isinstance(op.results[0].type.element_type, IntegerType)


def device_dtype(lw: Lowering, dt: np.dtype, loc) -> np.dtype:
    """The dtype a tensor of ONNX dtype ``dt`` is computed in on the device."""
    dt = np.dtype(dt)
    if dt.kind == "f":
        return lw.dtype
    if dt in (I32, I64, BOOL, I16, U8, I8, U16, U32, BF16):  # bfloat16: stored, converted by vconv
        return dt
    raise unsupported(loc, f"{dt.name} tensors are not computed on by the AI Core (float16, float32, int32, int64, "
                           f"int16, int8, uint8, uint16, uint32, bool)")


def _widen(inputs: list[DevTensor], wide: dict | None = None) -> tuple[list[Step], dict[str, np.dtype], list[str]]:
    """Narrow operands converted exactly to their compute dtype (``wide``, default the comparison
    one): (steps, temporaries, the names to compute on)."""
    wide = _WIDE_CMP if wide is None else wide
    steps, temps, names = [], {}, []
    for i, t in enumerate(inputs):
        if t.dtype in NARROW:
            st, tt = convert_steps(f"x{i}", f"w{i}", t.dtype, wide[t.dtype], f"v{i}_", None)
            steps += st
            temps.update(tt, **{f"w{i}": wide[t.dtype]})
            names.append(f"w{i}")
        else:
            names.append(f"x{i}")
    return steps, temps, names


def operand(conv, v: SSAValue, loc) -> DevTensor:
    """Graph value ``v`` as an ND device tensor in its device dtype (constants included)."""
    lw: Lowering = conv.lw
    dt = device_dtype(lw, np_dtype(v.type.element_type), loc)
    if v not in conv.values and v in conv.consts and dt.kind != "f":
        arr = np.asarray(conv.consts[v]).astype(dt)
        conv.values[v] = lw.constant(arr.reshape(-1), ND, arr.shape)
    t = conv.tensor(v, loc)
    return mathk._nd(lw, t, loc) if t.dtype.kind == "f" else t


def _scalar(conv, v: SSAValue):
    c = conv.consts.get(v)
    if c is not None and np.asarray(c).size == 1:
        return np.asarray(c).reshape(-1)[0].item()
    return None


# ---------------------------------------------------------------------------------------------
# the kernel


def program(lw: Lowering, hint: str, loc, inputs: list[DevTensor], steps: list[Step], types: dict[str, np.dtype],
            out_shape, consts: dict[str, tuple[np.dtype, float]] | None = None) -> DevTensor:
    """Run ``steps`` over same-sized ND ``inputs`` (``x<i>``, in their dtypes) chunk by chunk into
    ``y``; ``types`` gives the dtype of ``y`` and every temporary, ``consts`` the ``vdup``-filled
    buffers (name -> (dtype, value))."""
    shape = tuple(out_shape)
    size = math.prod(shape)
    if size == 0:
        raise unsupported(loc, f"{hint} with an empty result")
    if any(t.size != size for t in inputs):
        raise unsupported(loc, f"{hint}: operands of shapes {[list(t.shape) for t in inputs]}")
    consts = dict(consts or {})
    dts = {f"x{i}": t.dtype for i, t in enumerate(inputs)}
    dts.update({k: np.dtype(v) for k, v in types.items()})
    dts.update({k: np.dtype(v[0]) for k, v in consts.items()})
    per_elem = sum(d.itemsize for d in dts.values())
    chunk = min(ub_chunk(lw, per_elem + 1, 256), max(256, -(-size // 256) * 256))
    out = lw.gm_tensor(shape, ND, dts["y"])
    kb = lw.kernel(hint, loc)
    kb.tiling["chunk"] = chunk
    srcs = [kb.arg(t) for t in inputs]
    dst = kb.arg(out)
    bufs = {n: kb.alloc(Space.UB, chunk, d) for n, d in dts.items()}
    for cn, (_, cv) in consts.items():
        kb.vec("dup", bufs[cn], count=chunk, scalar=float(cv))

    def chunk_ops(q0: int, q: int) -> None:
        for i, s in enumerate(srcs):
            kb.copy(s, bufs[f"x{i}"], src_offset=q0, burst=q)
        for st in steps:
            if st[0] == "select":
                _, d, c, a, b = st
                kb.emit(tile.SelectOp(bufs[d], bufs[c], bufs[a], bufs[b], count=q))
                continue
            op, d, s0 = st[0], st[1], st[2]
            s1 = st[3] if len(st) > 3 else None
            sc = st[4] if len(st) > 4 else 0.0
            kb.vec(op, bufs[d], bufs[s0] if s0 else None, bufs[s1] if s1 else None, count=q, scalar=sc)
        kb.copy(bufs["y"], dst, dst_offset=q0, burst=q)

    # SPMD over equal chunks (hardware loop per core); the last, shorter one runs on its own core
    n_chunks = math.ceil(size / chunk)
    kb.partition(n_chunks)
    for v in dict.fromkeys((*srcs, dst)):  # an operand used twice moves once
        kb.block_offset(v, chunk)
    kb.for_tiles(n_chunks, lambda first, last=False: chunk_ops(
        first * chunk, size - (n_chunks - 1) * chunk if last else chunk), partial_last=size % chunk != 0)
    lw.launch(kb)
    return out


# ---------------------------------------------------------------------------------------------
# conversions between device dtypes (vconv chains)

#: one vconv step of a conversion path: (src, dst) -> the intermediate dtypes
_VIA = {
    (BOOL, F16): (), (BOOL, F32): (F16,), (BOOL, I32): (F16,), (BOOL, I64): (F16, I32),
    (F16, F32): (), (F32, F16): (), (F32, I32): (), (F16, I32): (), (I32, F32): (), (I32, F16): (),
    (I32, I64): (), (I64, I32): (), (F32, I64): (), (I64, F32): (), (F16, I64): (F32,), (I64, F16): (F32,),
    (U8, F16): (), (U8, F32): (F16,), (U8, I32): (F16,), (U8, I64): (F16, I32),
    (I8, F16): (), (I8, F32): (F16,), (I8, I32): (F16,), (I8, I64): (F16, I32),
    (F16, U8): (), (F32, U8): (F32, F16), (F16, I8): (), (F32, I8): (F32, F16),
    (U16, I32): (), (U32, I64): (), (I32, U8): (), (I32, I8): (), (I32, U16): (), (I64, U32): (),
    (I16, I32): (), (I32, I16): (), (I16, F32): (I32,), (U16, F32): (I32,),
    (BF16, F32): (), (F32, BF16): (),
}


def convert_steps(src: str, dst: str, sdt: np.dtype, ddt: np.dtype, tmp: str, loc) -> tuple[list[Step], dict]:
    """Steps converting buffer ``src`` (``sdt``) into ``dst`` (``ddt``) with ONNX Cast semantics
    (float -> int truncates toward zero, to bool is != 0); returns (steps, temporaries' dtypes)."""
    if sdt == ddt:
        return [("mov", dst, src)], {}
    if ddt == BOOL:  # x != 0
        return [("dup", tmp + "z", None, None, 0.0), ("cmp_ne", dst, src, tmp + "z")], {tmp + "z": sdt}
    if BF16 in (sdt, ddt) and F16 in (sdt, ddt):
        raise unsupported(loc, "bfloat16 tensors need a float32 precision mode (must_keep_origin_dtype or force_fp32): float16 cannot hold their range")
    if (sdt, ddt) not in _VIA:
        raise unsupported(loc, f"no conversion from {sdt.name} to {ddt.name} on the AI Core")
    chain = [sdt, *_VIA[(sdt, ddt)], ddt]
    steps, temps, cur = [], {}, src
    for i, (a, b) in enumerate(zip(chain, chain[1:])):
        out = dst if i == len(chain) - 2 else f"{tmp}{i}"
        if out != dst:
            temps[out] = b
        # float -> int truncates toward zero; a float32 -> 8-bit cast truncates in float32 first, so
        # that the float16 step in between is exact (no double rounding)
        trunc = (a.kind == "f" and b.kind in "iu") or (a == b == F32)
        steps.append(("cast_trunc" if trunc else "cast", out, cur))
        cur = out
    return steps, temps


# ---------------------------------------------------------------------------------------------
# graph ops


def _broadcast(lw, conv, vals, shape, loc) -> list[DevTensor]:
    return [mathk.broadcast_to(lw, operand(conv, v, loc), shape, loc) for v in vals]


def lower(conv, op: Operation) -> DevTensor:
    lw: Lowering = conv.lw
    loc, name = op.location, op.name
    shape = tuple(op.results[0].type.get_shape())
    res_dt = np_dtype(op.results[0].type.element_type)
    if name == "graph.compare":
        a, b = _broadcast(lw, conv, op.operands, shape, loc)
        if a.dtype != b.dtype:
            raise unsupported(loc, f"comparison of {a.dtype.name} and {b.dtype.name} tensors")
        steps, temps, (n0, n1) = _widen([a, b])
        return program(lw, "compare", loc, [a, b], steps + [("cmp_" + op.kind.data, "y", n0, n1)],
                       {"y": BOOL, **temps}, shape)
    if name == "graph.logical":
        a, b = _broadcast(lw, conv, op.operands, shape, loc)
        return program(lw, "logical_" + op.kind.data, loc, [a, b], [(op.kind.data, "y", "x0", "x1")], {"y": BOOL},
                       shape)
    if name == "graph.not":  # xor with 1 in every byte (int16 lanes of 0x0101)
        x = operand(conv, op.operands[0], loc)
        return program(lw, "not", loc, [x], [("xor", "y", "x0", "c1")], {"y": BOOL}, shape,
                       {"c1": (np.dtype(np.int16), 0x0101)})
    if name == "graph.round":
        x = operand(conv, op.operands[0], loc)
        mode = {"floor": "floor", "ceil": "ceil", "round": "rint"}[op.mode.data]
        return program(lw, op.mode.data, loc, [x], [("cast_" + mode, "y", "x0")], {"y": x.dtype}, shape)
    if name == "graph.is_nan":
        x = operand(conv, op.operands[0], loc)
        return program(lw, "is_nan", loc, [x], [("cmp_ne", "y", "x0", "x0")], {"y": BOOL}, shape)
    if name == "graph.is_inf":
        return _is_inf(lw, conv, op, shape, loc)
    if name == "graph.arg_reduce":
        return arg_reduce(lw, operand(conv, op.operands[0], loc), op.kind.data, op.axis.value.data,
                          bool(op.select_last_index.value.data), shape, loc)
    if name in ("graph.mod", "graph.div"):
        return _div_mod(lw, conv, op, shape, device_dtype(lw, res_dt, loc), loc)
    if name == "graph.sign":
        return _sign(lw, operand(conv, op.operands[0], loc), shape, loc)
    if name == "graph.cast":
        x = operand(conv, op.operands[0], loc)
        ddt = device_dtype(lw, res_dt, loc)
        steps, temps = convert_steps("x0", "y", x.dtype, ddt, "t", loc)
        return program(lw, "cast", loc, [x], steps, {"y": ddt, **temps}, shape)
    return _int_math(lw, conv, op, shape, device_dtype(lw, res_dt, loc), loc)


def _is_inf(lw, conv, op, shape, loc) -> DevTensor:
    x = operand(conv, op.operands[0], loc)
    pos, neg = op.detect_positive.value.data, op.detect_negative.value.data
    steps: list[Step] = []
    consts = {}
    if pos and neg:
        steps = [("abs", "t0", "x0"), ("cmp_eq", "y", "t0", "cp")]
        consts["cp"] = (x.dtype, math.inf)
    elif pos or neg:
        steps = [("cmp_eq", "y", "x0", "cp")]
        consts["cp"] = (x.dtype, math.inf if pos else -math.inf)
    else:  # nothing detected: x < x is false everywhere (NaN included)
        steps = [("cmp_lt", "y", "x0", "x0")]
    return program(lw, "is_inf", loc, [x], steps, {"y": BOOL, "t0": x.dtype}, shape, consts)


def _sign(lw, x: DevTensor, shape, loc) -> DevTensor:
    """sign(x) = (x > 0) - (x < 0): two vcmpv, converted to x's dtype, subtracted (NaN -> 0)."""
    dt = x.dtype
    gt, t = convert_steps("p", "a", BOOL, dt, "u", loc)
    lt, t2 = convert_steps("n", "b", BOOL, dt, "w", loc)
    steps = [("cmp_gt", "p", "x0", "z"), ("cmp_lt", "n", "x0", "z"), *gt, *lt, ("sub", "y", "a", "b")]
    return program(lw, "sign", loc, [x], steps, {"y": dt, "p": BOOL, "n": BOOL, "a": dt, "b": dt, **t, **t2}, shape,
                   {"z": (dt, 0.0)})


_INT_BINARY = {"graph.add": "add", "graph.sub": "sub", "graph.mul": "mul", "graph.max": "max", "graph.min": "min"}


def _int_math(lw, conv, op, shape, dt: np.dtype, loc) -> DevTensor:
    name = op.name
    kind = name.split(".", 1)[1]
    if name in _INT_BINARY:
        if dt == I64 and kind == "mul":
            raise unsupported(loc, "Mul of int64 tensors: the modeled vector unit has no int64 multiply")
        a, b = _broadcast(lw, conv, op.operands, shape, loc)
        if dt in NARROW:  # computed in a wider dtype, the low bits kept
            wide = _WIDE_CMP if kind in ("max", "min") else _WIDE_ARITH
            if wide[dt] == I64 and kind == "mul":
                raise unsupported(loc, f"Mul of {dt.name} tensors: the modeled vector unit has no int64 multiply")
            steps, temps, (n0, n1) = _widen([a, b], wide)
            back, t2 = convert_steps("w", "y", wide[dt], dt, "n", loc)
            steps += [(_INT_BINARY[name], "w", n0, n1), *back]
            return program(lw, kind, loc, [a, b], steps, {"y": dt, "w": wide[dt], **temps, **t2}, shape)
        return program(lw, kind, loc, [a, b], [(_INT_BINARY[name], "y", "x0", "x1")], {"y": dt}, shape)
    if name in ("graph.abs", "graph.neg"):
        x = operand(conv, op.operands[0], loc)
        if dt in NARROW:
            raise unsupported(loc, f"{name.split('.')[1].capitalize()} of {dt.name} tensors is not supported")
        if name == "graph.abs":
            if dt == I64:  # |x| = max(x, 0 - x)
                steps = [("sub", "t0", "z", "x0"), ("max", "y", "x0", "t0")]
                return program(lw, "abs", loc, [x], steps, {"y": dt, "t0": dt}, shape, {"z": (dt, 0)})
            return program(lw, "abs", loc, [x], [("abs", "y", "x0")], {"y": dt}, shape)
        return program(lw, "neg", loc, [x], [("sub", "y", "z", "x0")], {"y": dt}, shape, {"z": (dt, 0)})
    raise unsupported(loc, f"{name.split('.', 1)[1]} on {dt.name} tensors is not supported on the AI Core")


def arg_reduce(lw: Lowering, x: DevTensor, kind: str, axis: int, last: bool, out_shape, loc) -> DevTensor:
    """ArgMax / ArgMin along ``axis`` (first index of the extreme, or the last with ``last``)."""
    shape = tuple(x.shape)
    kept = [i for i in range(len(shape)) if i != axis]
    k_, r_ = shape[axis], math.prod(shape[i] for i in kept)
    if any(shape[i] != 1 for i in kept if i < axis):  # move the axis outermost: [K, R]
        st = mathk._dense_strides(shape)
        perm = [axis] + kept
        x = mathk.gather(lw, x, [shape[p] for p in perm], [st[p] for p in perm], 0, loc, "arg_transpose")
    dt = x.dtype
    if k_ > 2**24:
        raise unsupported(loc, f"Arg{kind.capitalize()} over {k_} elements (indices are counted in int32 lanes "
                               f"converted from float16 masks: at most 2^24)")
    cmp = {("max", False): "cmp_gt", ("max", True): "cmp_ge", ("min", False): "cmp_lt", ("min", True): "cmp_le"}
    mask_steps, mask_temps = convert_steps("m", "mi", BOOL, I32, "mt", loc)
    types = {"row": dt, "acc": dt, "m": BOOL, "mi": I32, "k": I32, "idx": I32, "y": I64, **mask_temps}
    per_elem = sum(np.dtype(d).itemsize for d in types.values())
    chunk = min(ub_chunk(lw, per_elem + 1, 256), max(256, -(-r_ // 256) * 256))
    out = lw.gm_tensor((r_,), ND, I64)
    kb = lw.kernel("arg" + kind, loc, {"cols": chunk})
    chunk = kb.tiling["cols"]
    xa, ya = kb.arg(x), kb.arg(out)
    b = {n: kb.alloc(Space.UB, chunk, d) for n, d in types.items()}
    for c0 in range(0, r_, chunk):
        c = min(chunk, r_ - c0)
        kb.copy(xa, b["acc"], src_offset=c0, burst=c)
        kb.vec("dup", b["idx"], count=c, scalar=0.0)
        kb.vec("dup", b["k"], count=c, scalar=0.0)
        if k_ > 1:
            with kb.loop(k_ - 1, {xa: r_}):  # rows 1..K-1: one row's code, the source moved per iteration
                kb.copy(xa, b["row"], src_offset=r_ + c0, burst=c)
                kb.vec("adds", b["k"], b["k"], count=c, scalar=1.0)
                kb.vec(cmp[(kind, last)], b["m"], b["row"], b["acc"], count=c)
                kb.vec(kind, b["acc"], b["acc"], b["row"], count=c)
                for op, d, s0 in mask_steps:
                    kb.vec(op, b[d], b[s0], count=c)
                kb.emit(tile.SelectOp(b["idx"], b["mi"], b["k"], b["idx"], count=c))
        kb.vec("cast", b["y"], b["idx"], count=c)
        kb.copy(b["y"], ya, dst_offset=c0, burst=c)
    lw.launch(kb)
    return lw.view(out, tuple(out_shape))


#: integers whose quotient a float32 division gives exactly (|a| < 2^23): trunc(f32(a) / f32(b))
_EXACT_DIV = (U8, I8, I16, U16)


def _div_mod(lw, conv, op, shape, dt: np.dtype, loc) -> DevTensor:
    """Integer Div (quotient truncated toward zero) and Mod (fmod 1: a - trunc(a/b)*b; fmod 0: that
    plus b where the remainder is nonzero and its sign differs from b's), for 8- and 16-bit
    integers: the quotient from a float32 division is exact there; int32 / int64 are refused."""
    kind = op.name.split(".")[1]
    if dt not in _EXACT_DIV:
        raise unsupported(loc, f"{kind.capitalize()} of {dt.name} tensors: the vector unit divides in floating point, "
                               f"exact only for 8- and 16-bit integers")
    a, b = _broadcast(lw, conv, op.operands, shape, loc)
    steps: list[Step] = []
    types: dict[str, np.dtype] = {"y": dt, "af": F32, "bf": F32, "q": I32}
    for i in (0, 1):
        st, tt = convert_steps(f"x{i}", "af" if i == 0 else "bf", dt, F32, f"c{i}_", loc)
        steps += st
        types.update(tt)
    steps += [("div", "af", "af", "bf"), ("cast_trunc", "q", "af")]
    if kind == "div":
        back, tt = convert_steps("q", "y", I32, dt, "n", loc)
        return program(lw, "div", loc, [a, b], steps + back, {**types, **tt}, shape)
    for i, n in ((0, "ai"), (1, "bi")):  # exact int32 copies of the operands
        st, tt = convert_steps(f"x{i}", n, dt, I32, f"e{i}_", loc)
        steps += st
        types.update(tt, **{n: I32})
    steps += [("mul", "q", "q", "bi"), ("sub", "r", "ai", "q")]
    types["r"] = I32
    if not op.fmod.value.data:  # the sign of the divisor
        fix, tt = convert_steps("c", "ci", BOOL, I32, "f", loc)
        steps += [("dup", "z", None, None, 0.0), ("cmp_ne", "nz", "r", "z"), ("cmp_lt", "sr", "r", "z"),
                  ("cmp_lt", "sb", "bi", "z"), ("xor", "c", "sr", "sb"), ("and", "c", "c", "nz"), *fix,
                  ("mul", "ci", "ci", "bi"), ("add", "r", "r", "ci")]
        types.update(tt, z=I32, nz=BOOL, sr=BOOL, sb=BOOL, c=BOOL, ci=I32)
    back, tt = convert_steps("r", "y", I32, dt, "n", loc)
    return program(lw, "mod", loc, [a, b], steps + back, {**types, **tt}, shape)
