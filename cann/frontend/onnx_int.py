"""ONNX converters for comparisons, boolean logic, integer arithmetic, casts between integer,
bool and float dtypes, and rounding (registered in the converter table of
:mod:`cann.frontend.onnx_registry` when imported, several wrapping the float converters of
:mod:`cann.frontend.onnx_core`; the driver :mod:`cann.frontend.onnx` imports it).

Computed dtypes: float16 / float32 (the precision mode's dtype on the device), int32 and int64
(int64 arithmetic is an ASSUMPTION of the core model, docs/core-model.md), bool (one byte 0/1).
Other integer widths (int8, uint8, int16, ...) are rejected naming the node and the dtype. The
lowerings are in :mod:`cann.lowering.compare`.
"""

from __future__ import annotations


import numpy as np

from cann.dialects import graph as g
from cann.dialects import graph_int as gi
from cann.frontend import onnx_core  # noqa: F401  (registered first: the converters _install wraps)
from cann.frontend.onnx_registry import _CONVERTERS, _bad_attr, _const_input, _converter, _out_type, _Unsupported

#: dtypes the device computes on (besides float16/float32): int32, int64, bool
INT_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))
#: narrow integers: int16 computed as int16; int8 / uint8 compared and maxed in float16 (exact)
NARROW_DTYPES = (np.dtype(np.int16), np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.uint32))
FLOAT_DTYPES = (np.dtype(np.float16), np.dtype(np.float32))
CAST_DTYPES = FLOAT_DTYPES + INT_DTYPES + (np.dtype(np.bool_), np.dtype(np.int8), np.dtype(np.uint8))


def _dt(v) -> np.dtype:
    return g.numpy_dtype(g._elt(v))


def _input(imp, node, i: int, allowed: tuple[np.dtype, ...], what: str = ""):
    v = imp.value(node.input[i])
    if _dt(v) not in allowed:
        raise _Unsupported(f"{node.op_type}{what} on {_dt(v).name} tensors is not supported "
                           f"({', '.join(d.name for d in allowed)})")
    return v


_COMPARE = {"Equal": "eq", "Less": "lt", "Greater": "gt", "LessOrEqual": "le", "GreaterOrEqual": "ge"}


@_converter(*_COMPARE)
def _compare(imp, node, name, a):
    allowed = FLOAT_DTYPES + INT_DTYPES + NARROW_DTYPES + ((np.dtype(np.bool_),) if node.op_type == "Equal" else ())
    x = _input(imp, node, 0, allowed)
    y = _input(imp, node, 1, allowed)
    if _dt(x) != _dt(y):
        raise _Unsupported(f"{node.op_type} of {_dt(x).name} and {_dt(y).name} tensors")
    if _dt(x) == np.bool_:  # a == b on booleans: not (a xor b)
        d = imp.emit(gi.LogicalOp(x, y, "xor"), name).results[0]
        return [imp.emit(gi.NotOp(d), name).results[0]]
    return [imp.emit(gi.CompareOp(x, y, _COMPARE[node.op_type]), name).results[0]]


@_converter("And", "Or", "Xor")
def _logical(imp, node, name, a):
    b = (np.dtype(np.bool_),)
    x, y = _input(imp, node, 0, b), _input(imp, node, 1, b)
    return [imp.emit(gi.LogicalOp(x, y, node.op_type.lower()), name).results[0]]


@_converter("Not")
def _not(imp, node, name, a):
    return [imp.emit(gi.NotOp(_input(imp, node, 0, (np.dtype(np.bool_),))), name).results[0]]


@_converter("Floor", "Ceil", "Round")
def _round(imp, node, name, a):
    x = _input(imp, node, 0, FLOAT_DTYPES)
    return [imp.emit(gi.RoundOp(x, node.op_type.lower()), name).results[0]]


@_converter("Sign")
def _sign(imp, node, name, a):
    return [imp.emit(gi.SignOp(_input(imp, node, 0, FLOAT_DTYPES + INT_DTYPES)), name).results[0]]


@_converter("IsNaN")
def _isnan(imp, node, name, a):
    return [imp.emit(gi.IsNaNOp(_input(imp, node, 0, FLOAT_DTYPES)), name).results[0]]


@_converter("IsInf")
def _isinf(imp, node, name, a):
    x = _input(imp, node, 0, FLOAT_DTYPES)
    pos, neg = int(a.get("detect_positive", 1)), int(a.get("detect_negative", 1))
    return [imp.emit(gi.IsInfOp(x, pos, neg), name).results[0]]


@_converter("ArgMax", "ArgMin")
def _arg_reduce(imp, node, name, a):
    x = _input(imp, node, 0, FLOAT_DTYPES + INT_DTYPES)
    r = len(g._shape(x))
    axis = int(a.get("axis", 0))
    if not -r <= axis < r:
        raise _bad_attr(node, "axis", axis, f"out of range for rank {r}")
    if 0 in g._shape(x):
        raise _Unsupported(f"{node.op_type} of an empty tensor")
    op = gi.ArgReduceOp(x, node.op_type[3:].lower(), axis % r, int(a.get("keepdims", 1)),
                        int(a.get("select_last_index", 0)))
    if op.res.type != _out_type(imp, node):
        raise _Unsupported(f"{node.op_type} result type differs from shape inference")
    return [imp.emit(op, name).results[0]]


@_converter("Mod")
def _mod(imp, node, name, a):
    x, y = imp.value(node.input[0]), imp.value(node.input[1])
    if _dt(x) != _dt(y):
        raise _Unsupported(f"Mod of {_dt(x).name} and {_dt(y).name} tensors")
    if _dt(x).kind == "f":
        raise _Unsupported(f"Mod on {_dt(x).name} tensors is not supported (integer tensors only: a float remainder "
                           "through a rounded quotient is not exact)")
    fmod = int(a.get("fmod", 0))
    return [imp.emit(gi.ModOp(x, y, fmod), name).results[0]]


# -- integer forms of existing converters: the float path is the original converter -------------

def _int_or(original, int_conv, i: int = 0):
    """``int_conv`` when input ``i`` is an integer tensor, else the original (float) converter."""
    def conv(imp, node, name, a):
        if g.numpy_dtype(imp.tensor_type(node.input[i], name).get_element_type()).kind in "iu":
            return int_conv(imp, node, name, a)
        return original(imp, node, name, a)
    return conv


def _int_variadic(imp, node, name, a):
    vals = [_input(imp, node, i, INT_DTYPES + NARROW_DTYPES) for i in range(len(node.input)) if node.input[i]]
    cls = {"Max": g.MaxOp, "Min": g.MinOp}[node.op_type]
    acc = vals[0]
    for v in vals[1:]:
        if _dt(v) != _dt(acc):
            raise _Unsupported(f"{node.op_type} of {_dt(acc).name} and {_dt(v).name} tensors")
        acc = imp.emit(cls(acc, v), name).results[0]
    return [acc]


def _int_unary(imp, node, name, a):
    x = _input(imp, node, 0, INT_DTYPES)
    return [imp.emit({"Abs": g.AbsOp, "Neg": g.NegOp}[node.op_type](x), name).results[0]]


def _int_clip(imp, node, name, a):
    x = _input(imp, node, 0, INT_DTYPES + NARROW_DTYPES)
    y = x
    for i, cls in ((1, g.MaxOp), (2, g.MinOp)):
        if len(node.input) > i and node.input[i]:
            b = imp.value(node.input[i])
            if _dt(b) != _dt(x):
                raise _Unsupported(f"Clip bound of dtype {_dt(b).name} on a {_dt(x).name} tensor")
            y = imp.emit(cls(y, b, x.type), name).results[0]
    return [y]


def _int_where(imp, node, name, a):
    cond, x, y = (imp.value(n) for n in node.input[:3])
    ok = INT_DTYPES + FLOAT_DTYPES + (np.dtype(np.int8), np.dtype(np.uint8))
    if _dt(x) not in ok:
        raise _Unsupported(f"Where on {_dt(x).name} tensors is not supported ({', '.join(d.name for d in ok)})")
    return [imp.emit(g.WhereOp(cond, x, y), name).results[0]]


def _pow(original):
    """A float base with a runtime integer exponent: the exponent converted to the base's dtype
    (a Cast kernel) first; everything else: the original converter."""
    def conv(imp, node, name, a):
        x, y = imp.value(node.input[0]), node.input[1]
        if _dt(x) in FLOAT_DTYPES and not imp.is_const(y) and _dt(imp.value(y)) in INT_DTYPES:
            yf = imp.emit(g.CastOp(imp.value(y), g._elt(x)), name).results[0]
            return [imp.emit(g.PowOp(x, yf, _out_type(imp, node)), name).results[0]]
        return original(imp, node, name, a)
    return conv


def _bool_reduce(original):
    """ReduceMax / ReduceMin of a bool tensor (any / all): the bools as 0/1 floats (a Cast kernel),
    the float reduction, then != 0 back to bool."""
    def conv(imp, node, name, a):
        x = imp.value(node.input[0])
        if _dt(x) != np.bool_:
            return original(imp, node, name, a)
        from xdsl.dialects.builtin import f32

        r = len(g._shape(x))
        if imp.opset >= 18:
            arr = _const_input(imp, node, 1, "axes")
            axes = [] if arr is None else [int(v) for v in arr.reshape(-1)]
            noop = int(a.get("noop_with_empty_axes", 0))
        else:
            axes, noop = list(a.get("axes", [])), 0
        if (not axes and noop) or r == 0:  # no axis reduced: any / all of one element
            return [x]
        axes = sorted({ax % r for ax in axes}) if axes else list(range(r))
        if 0 in g._shape(x):
            raise _Unsupported(f"{node.op_type} of an empty bool tensor")
        out = _out_type(imp, node)
        xf = imp.emit(g.CastOp(x, f32), name).results[0]
        red = imp.emit(g.ReduceOp(xf, node.op_type[6:].lower(), axes, bool(int(a.get("keepdims", 1)))), name).results[0]
        if g._shape(red) != tuple(out.get_shape()):
            raise _Unsupported(f"{node.op_type} result shape differs from shape inference")
        return [imp.emit(g.CastOp(red, out.get_element_type()), name).results[0]]
    return conv


def _cast(original):
    def conv(imp, node, name, a):
        if imp.is_const(node.input[0]):
            return original(imp, node, name, a)
        out = _out_type(imp, node)
        x = imp.value(node.input[0])
        src, dst = _dt(x), g.numpy_dtype(out.get_element_type())
        if src in FLOAT_DTYPES and dst in FLOAT_DTYPES or src == dst:
            return original(imp, node, name, a)
        for d in (src, dst):
            if d not in CAST_DTYPES:
                raise _Unsupported(f"{node.op_type} from {src.name} to {dst.name} is not supported "
                                   f"({', '.join(c.name for c in CAST_DTYPES)})")
        return [imp.emit(g.CastOp(x, out.get_element_type()), name).results[0]]
    return conv


def _install() -> None:
    for t in ("Max", "Min"):
        _CONVERTERS[t] = _int_or(_CONVERTERS[t], _int_variadic)
    for t in ("Abs", "Neg"):
        _CONVERTERS[t] = _int_or(_CONVERTERS[t], _int_unary)
    _CONVERTERS["Clip"] = _int_or(_CONVERTERS["Clip"], _int_clip)
    _CONVERTERS["Where"] = _int_or(_CONVERTERS["Where"], _int_where, 1)
    _CONVERTERS["Pow"] = _pow(_CONVERTERS["Pow"])
    for t in ("ReduceMax", "ReduceMin"):
        _CONVERTERS[t] = _bool_reduce(_CONVERTERS[t])
    for t in ("Cast", "CastLike"):
        _CONVERTERS[t] = _cast(_CONVERTERS[t])


_install()
