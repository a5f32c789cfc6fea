"""ONNX converters of the operators with their own ``graph`` op (registered in
:mod:`cann.frontend.onnx_registry`'s table when imported; the driver :mod:`cann.frontend.onnx`
imports this module): Conv, BatchNormalization, elementwise arithmetic and activations, pools,
Gemm / MatMul, Concat, Reshape family, Transpose, Softmax, LRN, Dropout / Identity, Shape, Size,
reductions, Pad, Slice, LayerNormalization, Cast, LogSoftmax, Split, Expand, Gather, Where, 2-D
Resize and ConvTranspose. Other ranks, and operators written with these ops, are in the other
``onnx_*`` converter modules (some wrap or replace converters registered here).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from xdsl.dialects.builtin import TensorType
from xdsl.ir import SSAValue

from cann.dialects import graph as g
from cann.frontend.onnx_registry import (
    Importer,
    _softmax_axis,
    check_window_fits,
    _bad_attr, _invalid_attr,
    _check_unused_outputs,
    _const_input,
    _converter,
    _emit_unary,
    _float_input,
    _out_type,
    _scalar_const,
    _single_axis,
    _softmax_decomposed,
    _str_attr,
    _Unsupported,
    resize_scales,
)


def _spatial(node: onnx.NodeProto, a: dict[str, Any], in_shape: Sequence[int], kernel: Sequence[int],
             ceil_mode: bool = False) -> tuple[list[int], list[int], list[int]]:
    """strides, pads (top, left, bottom, right), dilations; auto_pad resolved to explicit pads."""
    strides = list(a.get("strides", [1, 1]))
    dil = list(a.get("dilations", [1, 1]))
    pads = list(a.get("pads", [0, 0, 0, 0]))
    if len(strides) != 2:
        raise _bad_attr(node, "strides", strides, "only 2-D is supported")
    if len(dil) != 2:
        raise _bad_attr(node, "dilations", dil, "only 2-D is supported")
    if len(pads) != 4:
        raise _bad_attr(node, "pads", pads, "only 2-D is supported")
    auto = a.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto == "VALID":
        pads = [0, 0, 0, 0]
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = [0, 0, 0, 0]
        for i in range(2):
            out = -(-in_shape[i] // strides[i])
            total = max(0, (out - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 - in_shape[i])
            small, big = total // 2, total - total // 2
            pads[i], pads[i + 2] = (small, big) if auto == "SAME_UPPER" else (big, small)
    elif auto != "NOTSET":
        raise _bad_attr(node, "auto_pad", auto)
    check_window_fits(node, in_shape, kernel, strides, pads, dil)
    return strides, pads, dil


@_converter("Conv")
def _conv(imp, node, name, a):
    x = imp.value(node.input[0])
    w = imp.value(node.input[1])
    b = imp.value(node.input[2]) if len(node.input) > 2 and node.input[2] else None
    ws = g._shape(w)
    if len(ws) != 4:
        raise _bad_attr(node, "kernel_shape", list(ws[2:]), "only 2-D convolution is supported")
    ks = list(a.get("kernel_shape", ws[2:]))
    if ks != list(ws[2:]):
        raise _invalid_attr(node, "kernel_shape", ks, "does not match the weight shape")
    strides, pads, dil = _spatial(node, a, g._shape(x)[2:], ks)
    op = g.Conv2DOp(x, w, b, _out_type(imp, node), strides=strides, pads=pads, dilations=dil, group=a.get("group", 1))
    return [imp.emit(op, name).results[0]]


@_converter("BatchNormalization")
def _bn(imp, node, name, a):
    if a.get("training_mode", 0):
        raise _bad_attr(node, "training_mode", a["training_mode"], "only inference is supported")
    if imp.opset < 7 and not a.get("is_test", 1):
        raise _bad_attr(node, "is_test", a.get("is_test"), "only inference is supported")
    _check_unused_outputs(imp, node, 1)
    x, s, b, m, v = (imp.value(n) for n in node.input[:5])
    if len(g._shape(x)) < 2:
        raise _Unsupported("BatchNormalization input must have rank >= 2")
    op = g.BatchNormOp(x, s, b, m, v, epsilon=a.get("epsilon", 1e-5))
    return [imp.emit(op, name).results[0]]


@_converter("Relu")
def _relu(imp, node, name, a):
    return [imp.emit(g.ReluOp(imp.value(node.input[0])), name).results[0]]


_BINARY = {"Add": g.AddOp, "Sub": g.SubOp, "Mul": g.MulOp, "Div": g.DivOp}


@_converter("Add", "Sub", "Mul", "Div")
def _binary(imp, node, name, a):
    if imp.opset < 7 and a.get("broadcast", 0) and "axis" in a:
        raise _bad_attr(node, "axis", a["axis"], "legacy axis broadcasting is not supported")
    lhs, rhs = imp.value(node.input[0]), imp.value(node.input[1])
    return [imp.emit(_BINARY[node.op_type](lhs, rhs, _out_type(imp, node)), name).results[0]]


@_converter("Sum")
def _sum(imp, node, name, a):
    vals = [imp.value(n) for n in node.input]
    acc = vals[0]
    if len(vals) == 1:
        return [acc]
    out = _out_type(imp, node)
    for i, v in enumerate(vals[1:]):
        rt = out if i == len(vals) - 2 else None
        acc = imp.emit(g.AddOp(acc, v, rt), name).results[0]
    return [acc]


@_converter("MaxPool", "AveragePool")
def _pool(imp, node, name, a):
    x = imp.value(node.input[0])
    ks = list(a.get("kernel_shape", []))
    if len(ks) != 2 or len(g._shape(x)) != 4:
        raise _bad_attr(node, "kernel_shape", ks, "only 2-D pooling is supported")
    if node.op_type == "MaxPool":
        _check_unused_outputs(imp, node, 1)
        if a.get("storage_order", 0) not in (0, 1):
            raise _bad_attr(node, "storage_order", a["storage_order"])
    strides, pads, dil = _spatial(node, a, g._shape(x)[2:], ks)
    cm = int(a.get("ceil_mode", 0))
    rt = _out_type(imp, node)
    if node.op_type == "MaxPool":
        op = g.MaxPoolOp(x, rt, kernel_shape=ks, strides=strides, pads=pads, dilations=dil, ceil_mode=cm)
    else:
        op = g.AvgPoolOp(x, rt, kernel_shape=ks, strides=strides, pads=pads, dilations=dil, ceil_mode=cm,
                         count_include_pad=int(a.get("count_include_pad", 0)))
    return [imp.emit(op, name).results[0]]


@_converter("GlobalAveragePool")
def _gap(imp, node, name, a):
    x = imp.value(node.input[0])
    if len(g._shape(x)) < 3:
        raise _Unsupported("GlobalAveragePool input must have rank >= 3")
    return [imp.emit(g.GlobalAvgPoolOp(x), name).results[0]]


@_converter("Gemm")
def _gemm(imp, node, name, a):
    if imp.opset < 7 and a.get("broadcast", 1) == 0:
        raise _bad_attr(node, "broadcast", 0)
    av, bv = imp.value(node.input[0]), imp.value(node.input[1])
    cv = imp.value(node.input[2]) if len(node.input) > 2 and node.input[2] else None
    op = g.GemmOp(av, bv, cv, _out_type(imp, node), alpha=a.get("alpha", 1.0), beta=a.get("beta", 1.0),
                  trans_a=a.get("transA", 0), trans_b=a.get("transB", 0))
    return [imp.emit(op, name).results[0]]


@_converter("MatMul")
def _matmul(imp, node, name, a):
    av, bv = imp.value(node.input[0]), imp.value(node.input[1])
    return [imp.emit(g.MatMulOp(av, bv, _out_type(imp, node)), name).results[0]]


@_converter("Concat")
def _concat(imp, node, name, a):
    # empty inputs add nothing (e.g. the pass-through part of a full-width RotaryEmbedding)
    names = [n for n in node.input if n and not (n in imp.consts and imp.consts[n].size == 0)] or [node.input[0]]
    vals = [imp.value(n) for n in names]
    if len(vals) == 1 and g._shape(vals[0]) == tuple(_out_type(imp, node).get_shape()):
        return [vals[0]]
    rank = len(g._shape(vals[0]))
    axis = int(a.get("axis", 1))  # opset < 4 default
    if not -rank <= axis < rank:
        raise _bad_attr(node, "axis", axis, f"out of range for rank {rank}")
    axis %= rank
    return [imp.emit(g.ConcatOp(vals, axis, _out_type(imp, node)), name).results[0]]


@_converter("Reshape", "Flatten", "Unsqueeze", "Squeeze")
def _reshape(imp, node, name, a):
    x = imp.value(node.input[0])
    for extra in node.input[1:]:
        if extra and not imp.is_const(extra):
            raise _Unsupported(f"{node.op_type} with a non-constant {extra} (data-dependent shape)", (extra,))
    rt = _out_type(imp, node)
    if rt.get_element_type() != g._elt(x):
        raise _Unsupported("result element type differs from the input")
    return [imp.emit(g.ReshapeOp(x, rt.get_shape()), name).results[0]]


@_converter("Transpose")
def _transpose(imp, node, name, a):
    x = imp.value(node.input[0])
    r = len(g._shape(x))
    perm = list(a.get("perm", range(r - 1, -1, -1)))
    if sorted(perm) != list(range(r)):
        raise _bad_attr(node, "perm", perm)
    return [imp.emit(g.TransposeOp(x, perm), name).results[0]]


@_converter("Softmax")
def _softmax(imp, node, name, a):
    return _single_axis(imp, node, name, a, imp.value(node.input[0]), g.SoftmaxOp)


@_converter("LRN")
def _lrn(imp, node, name, a):
    x = imp.value(node.input[0])
    if "size" not in a:
        raise _Unsupported("LRN without a size attribute")
    op = g.LRNOp(x, size=a["size"], alpha=a.get("alpha", 1e-4), beta=a.get("beta", 0.75), bias=a.get("bias", 1.0))
    return [imp.emit(op, name).results[0]]


@_converter("Dropout", "Identity")
def _forward(imp, node, name, a):
    if node.op_type == "Dropout":
        if len(node.input) > 2 and node.input[2] and (not imp.is_const(node.input[2]) or bool(imp.consts[node.input[2]])):
            raise _Unsupported("Dropout in training mode is not supported")
        _check_unused_outputs(imp, node, 1)
    return [imp.value(node.input[0])]


@_converter("Shape")
def _shape_op(imp, node, name, a):
    """The shape of a static tensor is a constant."""
    s = np.array(imp.tensor_type(node.input[0], name).get_shape(), np.int64)
    if imp.opset >= 15:
        s = s[int(a.get("start", 0)) : int(a.get("end", len(s)))]
    imp.consts[node.output[0]] = s
    return [None]


@_converter("Size")
def _size_op(imp, node, name, a):
    """The element count of a static tensor is a constant (int64 scalar)."""
    imp.consts[node.output[0]] = np.array(math.prod(imp.tensor_type(node.input[0], name).get_shape()), np.int64)
    return [None]


@_converter("Range", "ConstantOfShape")
def _shape_valued(imp, node, name, a):
    """Shape-valued ops fold at compile time (the importer folds them when their inputs are
    constant); a runtime operand would make the output shape data-dependent."""
    runtime = tuple(n for n in node.input if n and not imp.is_const(n))
    if not runtime:  # constant inputs the folder could not evaluate (it reports why)
        raise _Unsupported(f"{node.op_type} has no device kernel")
    raise _Unsupported(f"{node.op_type} with a non-constant input '{runtime[0]}' (data-dependent shape)", runtime)


# ---------------------------------------------------------------------------------------------
# elementwise math, reductions, pad / slice, normalization, casts


_UNARY_OPS = {
    "Sigmoid": g.SigmoidOp, "Tanh": g.TanhOp, "Exp": g.ExpOp, "Log": g.LogOp, "Sqrt": g.SqrtOp,
    "Reciprocal": g.ReciprocalOp, "Abs": g.AbsOp, "Neg": g.NegOp, "Erf": g.ErfOp, "Softplus": g.SoftplusOp,
}


@_converter(*_UNARY_OPS)
def _unary_op(imp, node, name, a):
    x = _float_input(imp, node)
    return [imp.emit(_UNARY_OPS[node.op_type](x), name).results[0]]


@_converter("Elu", "Selu", "LeakyRelu", "HardSigmoid")
def _param_unary(imp, node, name, a):
    x = _float_input(imp, node)
    if node.op_type == "Elu":
        op = g.EluOp(x, alpha=a.get("alpha", 1.0))
    elif node.op_type == "Selu":
        op = g.SeluOp(x, alpha=a.get("alpha", 1.67326319217681884765625),
                      gamma=a.get("gamma", 1.05070102214813232421875))
    elif node.op_type == "LeakyRelu":
        op = g.LeakyReluOp(x, alpha=a.get("alpha", 0.01))
    else:
        op = g.HardSigmoidOp(x, alpha=a.get("alpha", 0.2), beta=a.get("beta", 0.5))
    return [imp.emit(op, name).results[0]]


@_converter("Gelu")
def _gelu(imp, node, name, a):
    x = _float_input(imp, node)
    approx = a.get("approximate", b"none")
    approx = approx.decode() if isinstance(approx, bytes) else approx
    if approx not in g.GELU_APPROXIMATIONS:
        raise _bad_attr(node, "approximate", approx)
    return [imp.emit(g.GeluOp(x, approx), name).results[0]]


@_converter("Clip")
def _clip(imp, node, name, a):
    x = _float_input(imp, node)
    if imp.opset < 11:
        lo, hi = a.get("min", -math.inf), a.get("max", math.inf)
    elif any(len(node.input) > i and node.input[i] and not imp.is_const(node.input[i]) for i in (1, 2)):
        # tensor bounds: max(x, min) then min(., max), broadcasting
        y = x
        for i, cls in ((1, g.MaxOp), (2, g.MinOp)):
            if len(node.input) > i and node.input[i]:
                y = imp.emit(cls(y, imp.value(node.input[i])), name).results[0]
        return [y]
    else:
        lo_a, hi_a = _const_input(imp, node, 1, "min"), _const_input(imp, node, 2, "max")
        lo = float(lo_a.reshape(-1)[0]) if lo_a is not None else -math.inf
        hi = float(hi_a.reshape(-1)[0]) if hi_a is not None else math.inf
    return [imp.emit(g.ClipOp(x, min=float(lo), max=float(hi)), name).results[0]]


@_converter("Softsign", "HardSwish", "Celu", "PRelu", "Swish")
def _composite(imp, node, name, a):
    """Activations written with other graph ops (one kernel each)."""
    x = _float_input(imp, node)
    t = node.op_type
    if t == "Softsign":  # x / (1 + |x|)
        d = _emit_unary(imp, name, g.AbsOp, x)
        d = imp.emit(g.AddOp(d, _scalar_const(imp, name, 1.0, x)), name).results[0]
        return [imp.emit(g.DivOp(x, d), name).results[0]]
    if t == "HardSwish":  # x * hard_sigmoid(x; 1/6, 1/2)
        h = _emit_unary(imp, name, g.HardSigmoidOp, x, alpha=1.0 / 6, beta=0.5)
        return [imp.emit(g.MulOp(x, h), name).results[0]]
    if t == "Swish":  # x * sigmoid(alpha x)
        alpha = float(a.get("alpha", 1.0))
        s = x if alpha == 1.0 else imp.emit(g.MulOp(x, _scalar_const(imp, name, alpha, x)), name).results[0]
        return [imp.emit(g.MulOp(x, _emit_unary(imp, name, g.SigmoidOp, s)), name).results[0]]
    if t == "Celu":  # alpha * elu(x / alpha)
        alpha = float(a.get("alpha", 1.0))
        s = imp.emit(g.MulOp(x, _scalar_const(imp, name, 1.0 / alpha, x)), name).results[0]
        e = _emit_unary(imp, name, g.EluOp, s, alpha=1.0)
        return [imp.emit(g.MulOp(e, _scalar_const(imp, name, alpha, x)), name).results[0]]
    # PRelu: relu(x) - slope * relu(-x)   (slope broadcasts to x; opset < 7 per-channel slope)
    slope = imp.value(node.input[1])
    xs, ss = g._shape(x), g._shape(slope)
    if g.broadcast_shapes(xs, ss) != xs:
        if len(ss) == 1 and len(xs) >= 2 and ss[0] == xs[1]:
            slope = imp.emit(g.ReshapeOp(slope, [ss[0]] + [1] * (len(xs) - 2)), name).results[0]
        else:
            raise _Unsupported(f"PRelu slope of shape {list(ss)} does not broadcast to {list(xs)}")
    pos = _emit_unary(imp, name, g.ReluOp, x)
    neg = _emit_unary(imp, name, g.ReluOp, _emit_unary(imp, name, g.NegOp, x))
    neg = imp.emit(g.MulOp(neg, slope, TensorType(g._elt(x), xs)), name).results[0]
    return [imp.emit(g.SubOp(pos, neg), name).results[0]]


_VARIADIC = {"Max": g.MaxOp, "Min": g.MinOp, "Sum": g.AddOp, "Mean": g.AddOp}


@_converter("Max", "Min", "Mean")
def _variadic(imp, node, name, a):
    vals = [_float_input(imp, node, i) for i in range(len(node.input)) if node.input[i]]
    cls = _VARIADIC[node.op_type]
    out = _out_type(imp, node)
    acc = vals[0]
    for v in vals[1:]:
        acc = imp.emit(cls(acc, v), name).results[0]
    if node.op_type == "Mean" and len(vals) > 1:
        acc = imp.emit(g.MulOp(acc, _scalar_const(imp, name, 1.0 / len(vals), acc)), name).results[0]
    if g._shape(acc) != tuple(out.get_shape()):
        raise _Unsupported("variadic result shape differs from shape inference")
    return [acc]


@_converter("Pow")
def _pow(imp, node, name, a):
    x = _float_input(imp, node)
    y = imp.value(node.input[1])
    if g._elt(y) != g._elt(x):
        if imp.is_const(node.input[1]):
            y = imp.emit(g.make_constant(np.asarray(imp.consts[node.input[1]]).astype(g.numpy_dtype(g._elt(x))),
                                         node.input[1]), name).results[0]
        else:
            raise _Unsupported("Pow with an exponent of another dtype (non-constant)")
    return [imp.emit(g.PowOp(x, y, _out_type(imp, node)), name).results[0]]


_REDUCE = {"ReduceSum": "sum", "ReduceMean": "mean", "ReduceMax": "max", "ReduceMin": "min", "ReduceProd": "prod",
           "ReduceL1": "l1", "ReduceL2": "l2", "ReduceSumSquare": "sum_square", "ReduceLogSum": "log_sum",
           "ReduceLogSumExp": "log_sum_exp"}


def _reduce_no_axes(imp: Importer, name: str, kind: str, x: SSAValue) -> SSAValue:
    """A reduction of ``kind`` over no axis (empty axes with ``noop_with_empty_axes=1``, or a rank-0
    input): each element reduced alone, so the elementwise part remains: x*x (sum_square), log x
    (log_sum), |x| (l1, l2: sqrt(x*x)), x for sum, mean, max, min, prod and log_sum_exp (log(exp x))."""
    if kind == "sum_square":
        return imp.emit(g.MulOp(x, x), name).results[0]
    if kind == "log_sum":
        return imp.emit(g.LogOp(x), name).results[0]
    if kind in ("l1", "l2"):
        return imp.emit(g.AbsOp(x), name).results[0]
    return x


@_converter(*_REDUCE)
def _reduce(imp, node, name, a):
    x = _float_input(imp, node)
    r = len(g._shape(x))
    axes_as_input = imp.opset >= (13 if node.op_type == "ReduceSum" else 18)
    if axes_as_input:
        arr = _const_input(imp, node, 1, "axes")
        axes = [] if arr is None else [int(v) for v in arr.reshape(-1)]
        noop = int(a.get("noop_with_empty_axes", 0))
    else:
        axes = list(a.get("axes", []))
        noop = 0
    keepdims = int(a.get("keepdims", 1))
    if any(not -r <= ax < r for ax in axes):
        raise _bad_attr(node, "axes", axes, f"out of range for rank {r}")
    if (not axes and noop) or r == 0:  # no axis reduced: the elementwise part stays (onnx PR 7394)
        return [_reduce_no_axes(imp, name, _REDUCE[node.op_type], x)]
    axes = sorted({ax % r for ax in axes}) if axes else list(range(r))
    if 0 in g._shape(x):
        raise _Unsupported("reduction of an empty tensor")
    op = g.ReduceOp(x, _REDUCE[node.op_type], axes, bool(keepdims), _out_type(imp, node))
    return [imp.emit(op, name).results[0]]


@_converter("Pad")
def _pad(imp, node, name, a):
    x = imp.value(node.input[0])
    if g.numpy_dtype(g._elt(x)) not in (np.float16, np.float32, np.int32, np.int64):
        raise _Unsupported(f"Pad on {g.numpy_dtype(g._elt(x)).name} tensors is not supported (float16, float32, int32, "
                           "int64)")
    s = g._shape(x)
    r = len(s)
    mode = a.get("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode not in g.PAD_MODES:
        raise _bad_attr(node, "mode", mode)
    if imp.opset < 11:
        pads = list(a.get("pads", a.get("paddings", [])))
        value = float(a.get("value", 0.0))
    else:
        parr = _const_input(imp, node, 1, "pads")
        pads = [int(v) for v in parr.reshape(-1)]
        varr = _const_input(imp, node, 2, "constant_value")
        value = float(varr.reshape(-1)[0]) if varr is not None and varr.size else 0.0
        axes_arr = _const_input(imp, node, 3, "axes")
        if axes_arr is not None:
            axes = [int(v) % r for v in axes_arr.reshape(-1)]
            full = [0] * (2 * r)
            for j, ax in enumerate(axes):
                full[ax], full[ax + r] = pads[j], pads[j + len(axes)]
            pads = full
    if len(pads) != 2 * r:
        raise _bad_attr(node, "pads", pads, f"expected {2 * r} values")
    if mode == "reflect" and any(max(pads[i], pads[i + r]) >= s[i] for i in range(r) if pads[i] or pads[i + r]):
        raise _bad_attr(node, "pads", pads, "reflect pads must be smaller than the axis")
    op = g.PadOp(x, pads, mode, value)
    if op.res.type != _out_type(imp, node):
        raise _Unsupported("Pad result shape differs from shape inference")
    return [imp.emit(op, name).results[0]]


@_converter("Slice")
def _slice(imp, node, name, a):
    x = imp.value(node.input[0])
    s = g._shape(x)
    r = len(s)
    if imp.opset < 10:
        starts, ends = list(a["starts"]), list(a["ends"])
        axes = list(a.get("axes", range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts = [int(v) for v in _const_input(imp, node, 1, "starts").reshape(-1)]
        ends = [int(v) for v in _const_input(imp, node, 2, "ends").reshape(-1)]
        ax = _const_input(imp, node, 3, "axes")
        axes = [int(v) for v in ax.reshape(-1)] if ax is not None else list(range(len(starts)))
        st = _const_input(imp, node, 4, "steps")
        steps = [int(v) for v in st.reshape(-1)] if st is not None else [1] * len(starts)
    full_s, full_e, full_p = [0] * r, list(s), [1] * r
    for st_, en, ax, sp in zip(starts, ends, axes, steps):
        if not -r <= ax < r:
            raise _bad_attr(node, "axes", axes, f"out of range for rank {r}")
        ax %= r
        d = s[ax]
        if sp == 0:
            raise _bad_attr(node, "steps", steps, "a step is 0")
        st_ = st_ + d if st_ < 0 else st_
        en = en + d if en < 0 else en
        if sp > 0:
            st_, en = min(max(st_, 0), d), min(max(en, 0), d)
        else:
            st_, en = min(max(st_, 0), d - 1), min(max(en, -1), d - 1)
        full_s[ax], full_e[ax], full_p[ax] = st_, en, sp
    if full_s == [0] * r and full_e == list(s) and full_p == [1] * r:
        return [x]
    out = _out_type(imp, node)
    op = g.SliceOp(x, full_s, full_e, full_p)
    if tuple(op.res.type.get_shape()) != tuple(out.get_shape()):
        raise _Unsupported(f"Slice result shape {list(op.res.type.get_shape())} differs from shape inference "
                           f"{list(out.get_shape())}")
    return [imp.emit(op, name).results[0]]


@_converter("LayerNormalization")
def _layer_norm(imp, node, name, a):
    x = _float_input(imp, node)
    r = len(g._shape(x))
    axis = int(a.get("axis", -1))
    if not -r <= axis < r:
        raise _bad_attr(node, "axis", axis, f"out of range for rank {r}")
    axis %= r
    eps = float(a.get("epsilon", 1e-5))
    scale = imp.value(node.input[1])
    bias = imp.value(node.input[2]) if len(node.input) > 2 and node.input[2] else None
    extra = [o for o in node.output[1:] if o]
    if not extra:
        return [imp.emit(g.LayerNormOp(x, scale, bias, axis, eps), name).results[0]]
    # Mean / InvStdDev requested: the same computation written with graph ops
    axes = list(range(axis, r))
    mean = imp.emit(g.ReduceOp(x, "mean", axes, True), name).results[0]
    d = imp.emit(g.SubOp(x, mean), name).results[0]
    var = imp.emit(g.ReduceOp(imp.emit(g.MulOp(d, d), name).results[0], "mean", axes, True), name).results[0]
    var = imp.emit(g.AddOp(var, _scalar_const(imp, name, eps, var)), name).results[0]
    inv = _emit_unary(imp, name, g.ReciprocalOp, _emit_unary(imp, name, g.SqrtOp, var))
    y = imp.emit(g.MulOp(imp.emit(g.MulOp(d, inv), name).results[0], scale, x.type), name).results[0]
    if bias is not None:
        y = imp.emit(g.AddOp(y, bias, x.type), name).results[0]
    return [y, mean, inv]


@_converter("Cast", "CastLike")
def _cast(imp, node, name, a):
    out = _out_type(imp, node)
    if imp.is_const(node.input[0]):  # CastLike of a constant: fold
        imp.consts[node.output[0]] = np.asarray(imp.consts[node.input[0]]).astype(g.numpy_dtype(out.get_element_type()))
        return [None]
    x = imp.value(node.input[0])
    src, dst = g._elt(x), out.get_element_type()
    if src == dst:
        return [x]
    floats = (g.Float32Type, g.Float16Type)
    if isinstance(src, floats) and isinstance(dst, floats):
        return [imp.emit(g.CastOp(x, dst), name).results[0]]
    raise _Unsupported(f"{node.op_type} from {g.numpy_dtype(src).name} to {g.numpy_dtype(dst).name} is not supported")


@_converter("LogSoftmax")
def _log_softmax(imp, node, name, a):
    x = _float_input(imp, node)
    s = g._shape(x)
    r = len(s)
    axis = _softmax_axis(imp, node, a, r)
    if imp.opset >= 13 or axis == r - 1:
        return [_softmax_decomposed(imp, x, axis, name, True)]
    flat = imp.emit(g.ReshapeOp(x, [math.prod(s[:axis]), math.prod(s[axis:])]), name).results[0]
    y = _softmax_decomposed(imp, flat, 1, name, True)
    return [imp.emit(g.ReshapeOp(y, s), name).results[0]]


@_converter("Split")
def _split(imp, node, name, a):
    x = imp.value(node.input[0])
    s = g._shape(x)
    r = len(s)
    axis = int(a.get("axis", 0))
    if not -r <= axis < r:
        raise _bad_attr(node, "axis", axis, f"out of range for rank {r}")
    axis %= r
    outs = []
    start = 0
    for o in node.output:
        t = imp.tensor_type(o, name)
        n = t.get_shape()[axis]
        st, en = [0] * r, list(s)
        st[axis], en[axis] = start, start + n
        start += n
        if n == 0:  # an empty tensor is fully known: a constant its consumers fold or drop
            imp.consts[o] = np.zeros(t.get_shape(), g.numpy_dtype(t.get_element_type()))
            outs.append(None)
            continue
        outs.append(x if n == s[axis] else imp.emit(g.SliceOp(x, st, en, [1] * r), name).results[0])
    return outs


@_converter("Expand")
def _expand(imp, node, name, a):
    x = imp.value(node.input[0])
    _const_input(imp, node, 1, "shape")
    out = _out_type(imp, node)
    if tuple(out.get_shape()) == g._shape(x):
        return [x]
    if 0 in tuple(out.get_shape()):
        raise _Unsupported("Expand to an empty tensor")
    return [imp.emit(g.ExpandOp(x, out.get_shape()), name).results[0]]


@_converter("Gather")
def _gather(imp, node, name, a):
    data = imp.value(node.input[0])
    r = len(g._shape(data))
    axis = int(a.get("axis", 0))
    if not -r <= axis < r:
        raise _bad_attr(node, "axis", axis, f"out of range for rank {r}")
    idx = imp.value(node.input[1])
    if g.numpy_dtype(g._elt(idx)) not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise _Unsupported(f"Gather with {g.numpy_dtype(g._elt(idx)).name} indices (int32 or int64 expected)")
    return [imp.emit(g.GatherOp(data, idx, axis % r), name).results[0]]


@_converter("Where")
def _where(imp, node, name, a):
    cond, x, y = (imp.value(n) for n in node.input[:3])
    if g.numpy_dtype(g._elt(x)).kind != "f":
        raise _Unsupported(f"Where on {g.numpy_dtype(g._elt(x)).name} tensors is not supported (float16 and float32 only)")
    return [imp.emit(g.WhereOp(cond, x, y), name).results[0]]


# ---------------------------------------------------------------------------------------------
# Resize, ConvTranspose


@_converter("Resize")
def _resize(imp, node, name, a):
    """Resize of H and W of a 4-D NCHW tensor; scales / sizes constant (opsets 10, 11, 13, 18, 19)."""
    x = _float_input(imp, node)
    s = g._shape(x)
    r = len(s)
    mode = _str_attr(a, "mode", "nearest")
    if mode not in g.RESIZE_MODES:
        raise _bad_attr(node, "mode", mode, "only nearest and linear are supported")
    if imp.opset < 11:  # Resize-10: X, scales; the Upsample rule (asymmetric, floor)
        ctm, nearest_mode = "asymmetric", "floor"
        scales = _const_input(imp, node, 1, "scales")
        sizes = roi = None
    else:
        ctm = _str_attr(a, "coordinate_transformation_mode", "half_pixel")
        nearest_mode = _str_attr(a, "nearest_mode", "round_prefer_floor")
        roi = _const_input(imp, node, 1, "roi") if ctm == "tf_crop_and_resize" else None
        scales = _const_input(imp, node, 2, "scales")
        sizes = _const_input(imp, node, 3, "sizes")
        if scales is not None and scales.size == 0:
            scales = None
        if sizes is not None and sizes.size == 0:
            sizes = None
    del roi
    if ctm not in g.RESIZE_COORD_MODES or (ctm == "half_pixel_symmetric" and imp.opset < 19):
        raise _bad_attr(node, "coordinate_transformation_mode", ctm)
    if mode == "nearest" and nearest_mode not in g.RESIZE_NEAREST_MODES:
        raise _bad_attr(node, "nearest_mode", nearest_mode)
    for key in ("exclude_outside", "antialias"):
        if int(a.get(key, 0)):
            raise _bad_attr(node, key, int(a[key]))
    if r != 4:
        raise _Unsupported(f"Resize of a rank-{r} tensor is not supported (4-D NCHW only)")
    axes = [int(v) % r for v in a.get("axes", range(r))]
    if len(set(axes)) != len(axes):
        raise _bad_attr(node, "axes", list(a["axes"]))
    full_scale = resize_scales(node, a, s, axes, scales, sizes)
    out = _out_type(imp, node)
    os_ = tuple(out.get_shape())
    if os_[:2] != s[:2] or full_scale[0] != 1.0 or full_scale[1] != 1.0:
        raise _Unsupported("Resize of the N or C axis is not supported (H and W only)")
    if 0 in os_:
        raise _Unsupported("Resize with an empty result")
    op = g.ResizeOp(x, out, mode=mode, coordinate_transformation_mode=ctm, nearest_mode=nearest_mode,
                    scales=full_scale[2:])
    return [imp.emit(op, name).results[0]]


@_converter("ConvTranspose")
def _conv_transpose(imp, node, name, a):
    x = _float_input(imp, node)
    w = imp.value(node.input[1])
    b = imp.value(node.input[2]) if len(node.input) > 2 and node.input[2] else None
    xs, ws = g._shape(x), g._shape(w)
    if len(ws) != 4 or len(xs) != 4:
        raise _bad_attr(node, "kernel_shape", list(ws[2:]), "only 2-D ConvTranspose is supported")
    ks = list(a.get("kernel_shape", ws[2:]))
    if ks != list(ws[2:]):
        raise _invalid_attr(node, "kernel_shape", ks, "does not match the weight shape")
    strides = list(a.get("strides", [1, 1]))
    dil = list(a.get("dilations", [1, 1]))
    op_ = list(a.get("output_padding", [0, 0]))
    for key, v in (("strides", strides), ("dilations", dil), ("output_padding", op_)):
        if len(v) != 2:
            raise _bad_attr(node, key, v, "only 2-D is supported")
    auto = _str_attr(a, "auto_pad", "NOTSET")
    if auto not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise _bad_attr(node, "auto_pad", auto)
    out = _out_type(imp, node)
    os_ = list(out.get_shape())
    eff = [d * (k - 1) + 1 for d, k in zip(dil, ks)]
    full = [strides[i] * (xs[i + 2] - 1) + op_[i] + eff[i] for i in range(2)]
    if "pads" in a and auto in ("NOTSET", "VALID"):  # as the spec's reference: explicit pads win
        pads = list(a["pads"])
        if len(pads) != 4:
            raise _bad_attr(node, "pads", pads, "only 2-D is supported")
        begin = pads[:2]
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        shape = list(a.get("output_shape", [xs[i + 2] * strides[i] for i in range(2)]))[-2:]
        total = [full[i] - shape[i] for i in range(2)]
        begin = [t // 2 if auto == "SAME_UPPER" else t - t // 2 for t in total]
    else:
        begin = [0, 0]
    if min(begin) < 0:
        raise _bad_attr(node, "pads", begin, "a negative begin padding")
    end = [full[i] - begin[i] - os_[2 + i] for i in range(2)]
    op = g.ConvTransposeOp(x, w, b, out, strides=strides, pads=begin + end, dilations=dil, output_padding=op_,
                           group=int(a.get("group", 1)))
    return [imp.emit(op, name).results[0]]
