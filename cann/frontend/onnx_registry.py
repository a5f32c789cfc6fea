"""The ONNX converter registry and the toolkit the converters share (no converter lives here).

* the table ``_CONVERTERS`` (operator type -> converter) that :func:`_converter` fills; each
  converter module (:mod:`cann.frontend.onnx_core`, ``onnx_composite``, ``onnx_spatial``,
  ``onnx_rearrange``, ``onnx_losses``, ``onnx_signal``, ``onnx_int``, ``onnx_math``) registers its
  operators when imported, and the driver :mod:`cann.frontend.onnx` imports them all and derives
  ``SUPPORTED_OPS`` from the table;
* :class:`_Unsupported`, the one-diagnostic error a converter raises;
* :class:`Importer`, what converters use of the driver's importer (a Protocol: this module imports
  no converter module and not the driver);
* helpers reading a node (constant inputs, attribute strings, result types) and graph-op builders.

A converter is ``(importer, node, name, attrs) -> list of result values`` (one per ONNX output,
``None`` for an output recorded as a constant in ``importer.consts``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np
import onnx
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation, SSAValue

from cann.dialects import graph as g
from cann.dialects.graph_base import pool_output_size


class Importer(Protocol):
    """What converters use of the importer (:class:`cann.frontend.onnx._Importer`)."""

    model: onnx.ModelProto
    #: the default-domain opset the node being converted follows
    opset: int
    #: tensor name -> inferred type; name -> compile-time value; name -> imported SSA value
    types: dict[str, onnx.TypeProto]
    consts: dict[str, np.ndarray]
    values: dict[str, SSAValue]

    def is_const(self, name: str) -> bool: ...

    def emit(self, op: Operation, loc: str) -> Operation: ...

    def value(self, name: str) -> SSAValue: ...

    def tensor_type(self, name: str, node: str) -> TensorType: ...

    def expand_function(self, node: onnx.NodeProto, name: str) -> bool: ...


class _Unsupported(Exception):
    """Raised by a converter: this node cannot be imported (one diagnostic). ``needs_constant``:
    the tensors whose compile-time values would make it importable (see ``Diagnostic``)."""

    def __init__(self, message: str, needs_constant: tuple[str, ...] = ()):
        super().__init__(message)
        self.needs_constant = tuple(needs_constant)


def _dims(t: onnx.TypeProto) -> list[int | str | None] | None:
    if not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
        return None
    out: list[int | str | None] = []
    for d in t.tensor_type.shape.dim:
        if d.HasField("dim_value"):
            out.append(d.dim_value)
        elif d.HasField("dim_param"):
            out.append(d.dim_param)
        else:
            out.append(None)
    return out


# ---------------------------------------------------------------------------------------------
# converters: (importer, node, name, attrs) -> list of result values (one per ONNX output)

_Conv = Callable[[Importer, onnx.NodeProto, str, dict[str, Any]], list[SSAValue | None]]
_CONVERTERS: dict[str, _Conv] = {}
_NEVER_FOLD: set[str] = set()


def _converter(*op_types: str):
    def deco(fn: _Conv) -> _Conv:
        for t in op_types:
            _CONVERTERS[t] = fn
        return fn

    return deco


def _bad_attr(node: onnx.NodeProto, attr: str, value: Any, why: str = "") -> _Unsupported:
    """A valid attribute value this compiler does not implement."""
    return _Unsupported(f"unsupported attribute value {attr}={value!r} of {node.op_type}{': ' + why if why else ''}")


def _invalid_attr(node: onnx.NodeProto, attr: str, value: Any, why: str) -> _Unsupported:
    """An attribute value the ONNX spec rejects (it contradicts the operands): an invalid model."""
    return _Unsupported(f"invalid model: {node.op_type} attribute {attr}={value!r} {why}")


def _out_type(imp: Importer, node: onnx.NodeProto, i: int = 0) -> TensorType:
    return imp.tensor_type(node.output[i], node.name)


def _check_unused_outputs(imp: Importer, node: onnx.NodeProto, keep: int) -> None:
    extra = [o for o in node.output[keep:] if o]
    if not extra:
        return
    used = {n for nd in imp.model.graph.node for n in nd.input} | {o.name for o in imp.model.graph.output}
    for o in extra:
        if o in used:
            raise _Unsupported(f"output {o} of {node.op_type} is not supported (inference only)")


def _float_input(imp: Importer, node: onnx.NodeProto, i: int = 0) -> SSAValue:
    v = imp.value(node.input[i])
    if not isinstance(g._elt(v), (g.Float32Type, g.Float16Type)):
        raise _Unsupported(f"{node.op_type} on {g.numpy_dtype(g._elt(v)).name} tensors is not supported "
                           "(float16 and float32 only)")
    return v


def _const_input(imp: Importer, node: onnx.NodeProto, i: int, what: str) -> np.ndarray | None:
    """The constant value of optional input ``i`` (None when absent)."""
    if len(node.input) <= i or not node.input[i]:
        return None
    n = node.input[i]
    if not imp.is_const(n):
        raise _Unsupported(f"{node.op_type} with a non-constant {what} input '{n}'", (n,))
    return np.asarray(imp.consts[n])


def _str_attr(a: dict[str, Any], key: str, default: str) -> str:
    v = a.get(key, default)
    return v.decode() if isinstance(v, bytes) else v


# ---------------------------------------------------------------------------------------------
# helpers shared by converters


def _emit_unary(imp, name, cls, x, **p):
    return imp.emit(cls(x, **p) if p else cls(x), name).results[0]


def _scalar_const(imp, name, value: float, like: SSAValue) -> SSAValue:
    arr = np.asarray(value, dtype=g.numpy_dtype(g._elt(like)))
    return imp.emit(g.make_constant(arr, name), name).results[0]


def _softmax_axis(imp: Importer, node: onnx.NodeProto, a: dict[str, Any], rank: int) -> int:
    """The axis of a Softmax-family node (LogSoftmax, Hardmax), in [0, rank): default 1 before opset
    13, -1 from 13. Raises ``_Unsupported`` naming the attribute when it is out of range."""
    axis = int(a.get("axis", 1 if imp.opset < 13 else -1))
    if not -rank <= axis < rank:
        raise _bad_attr(node, "axis", axis, f"out of range for rank {rank}")
    return axis % rank


def _single_axis(imp, node, name, a, x: SSAValue, op_cls) -> list[SSAValue]:
    """Softmax / Hardmax: one axis from opset 13; before, over the flattened
    [prod(dims[:axis]), prod(dims[axis:])] matrix (the opset < 13 rule)."""
    s = g._shape(x)
    r = len(s)
    axis = _softmax_axis(imp, node, a, r)
    if imp.opset >= 13 or axis == r - 1:
        return [imp.emit(op_cls(x, axis), name).results[0]]
    flat = imp.emit(g.ReshapeOp(x, [math.prod(s[:axis]), math.prod(s[axis:])]), name).results[0]
    y = imp.emit(op_cls(flat, 1), name).results[0]
    return [imp.emit(g.ReshapeOp(y, list(s)), name).results[0]]


def _softmax_decomposed(imp, x, axis: int, name: str, log: bool) -> SSAValue:
    """(Log)Softmax over ``axis`` with graph ops: x - max, exp, sum, divide (or minus log of the sum)."""
    m = imp.emit(g.ReduceOp(x, "max", [axis], True), name).results[0]
    d = imp.emit(g.SubOp(x, m), name).results[0]
    e = _emit_unary(imp, name, g.ExpOp, d)
    s = imp.emit(g.ReduceOp(e, "sum", [axis], True), name).results[0]
    if log:
        return imp.emit(g.SubOp(d, _emit_unary(imp, name, g.LogOp, s)), name).results[0]
    return imp.emit(g.DivOp(e, s), name).results[0]


def resize_scales(node: onnx.NodeProto, a: dict[str, Any], s: Sequence[int], axes: list[int],
                  scales: np.ndarray | None, sizes: np.ndarray | None) -> list[float]:
    """The scale of every axis of a Resize of input shape ``s``, from ``scales`` or ``sizes`` (over
    ``axes``) and ``keep_aspect_ratio_policy``, by the specification's rules."""
    r = len(s)
    if (scales is None) == (sizes is None):
        raise _Unsupported("Resize needs exactly one of the scales and sizes inputs")
    full_scale = [1.0] * r
    if scales is not None:
        vals = [float(v) for v in scales.reshape(-1)]
        if len(vals) != len(axes):
            raise _Unsupported(f"Resize scales has {len(vals)} values for {len(axes)} axes")
        for ax, v in zip(axes, vals):
            full_scale[ax] = v
        return full_scale
    vals = [int(v) for v in sizes.reshape(-1)]
    if len(vals) != len(axes):
        raise _Unsupported(f"Resize sizes has {len(vals)} values for {len(axes)} axes")
    full_size = list(s)
    for ax, v in zip(axes, vals):
        full_size[ax] = v
    full_scale = [full_size[i] / s[i] for i in range(r)]
    policy = _str_attr(a, "keep_aspect_ratio_policy", "stretch")
    if policy != "stretch":
        if policy not in ("not_larger", "not_smaller"):
            raise _bad_attr(node, "keep_aspect_ratio_policy", policy)
        sc = (min if policy == "not_larger" else max)(full_scale[i] for i in axes)
        full_scale = [sc if i in axes else 1.0 for i in range(r)]
    return full_scale


# ---------------------------------------------------------------------------------------------
# graph-op builders: the op appended at ``name`` (none for an identity reshape / transpose), its result


def _add(imp, name, a, b):
    return imp.emit(g.AddOp(a, b), name).results[0]


def _sub(imp, name, a, b):
    return imp.emit(g.SubOp(a, b), name).results[0]


def _mul(imp, name, a, b):
    return imp.emit(g.MulOp(a, b), name).results[0]


def _reduce(imp, name, x, kind, axes, keepdims=True):
    return imp.emit(g.ReduceOp(x, kind, list(axes), keepdims), name).results[0]


def _reshape(imp, name, x, shape):
    shape = [int(d) for d in shape]
    if list(g._shape(x)) == shape:
        return x
    return imp.emit(g.ReshapeOp(x, shape), name).results[0]


def _transpose(imp, name, x, perm):
    if list(perm) == list(range(len(perm))):
        return x
    return imp.emit(g.TransposeOp(x, list(perm)), name).results[0]


def _const(imp, name, arr, like):
    arr = np.asarray(arr, dtype=g.numpy_dtype(g._elt(like)))
    return imp.emit(g.make_constant(arr, name), name).results[0]  # rank 0 stays rank 0


def check_window_fits(node: onnx.NodeProto, in_spatial, ks, strides, pads, dil, ceil_mode: bool = False) -> list[int]:
    """The spatial output sizes of a Conv / pool window over ``in_spatial`` (pads: begins then ends);
    raises ``_Unsupported`` (one line: the window, the padded input and the output it would give) when
    one is 0 or negative, i.e. the window is longer than the padded input: the feature map is
    convolved or pooled away (onnx's inference then gives 0, or -1 after its C++ rounding)."""
    r = len(ks)
    out = [pool_output_size(in_spatial[i], ks[i], strides[i], pads[i], pads[i + r], dil[i], ceil_mode)
           for i in range(r)]
    if min(out) >= 1:
        return out
    x = lambda v: "x".join(map(str, v))
    eff = [(k - 1) * d + 1 for k, d in zip(ks, dil)]
    padded = [in_spatial[i] + pads[i] + pads[i + r] for i in range(r)]
    what = "pools the feature map away" if node.op_type != "Conv" else "convolves the feature map away"
    ext = f" (extent {x(eff)} with dilations {x(dil)})" if eff != list(ks) else ""
    raise _Unsupported(f"{node.op_type} {what}: its {x(ks)} window{ext} is larger than the padded input "
                       f"{x(padded)} (input {x(in_spatial)}, pads {list(pads)}), so the output would be {x(out)}")
