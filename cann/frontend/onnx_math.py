"""ONNX importers for the float math operators computed by the vector programs of
:mod:`cann.lowering.transcendental` (registered in the converter table of
:mod:`cann.frontend.onnx_registry` when imported; the driver :mod:`cann.frontend.onnx` imports it):

* **Sin, Cos, Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh** -> ``graph.sin`` ... (one
  elementwise kernel each);
* **Mish** -> ``graph.mish`` (one program, ``x n / (n + 2)`` with ``n = e^x (e^x + 2)``, instead
  of tanh of softplus, which loses relative precision for small |x|);
* **ThresholdedRelu** (``alpha``) -> ``graph.thresholded_relu``; **Shrink** (``bias``, ``lambd``)
  -> ``graph.shrink``;
* **Hardmax** (``axis``; opset < 13 over the flattened trailing dimensions, as Softmax) ->
  ``graph.hardmax`` (:mod:`cann.lowering.hardmax`: first maximum, ties to the lowest index);
* **Det** -> ``graph.det`` (:mod:`cann.lowering.det`: Gaussian elimination with partial pivoting
  over a batch of matrices, float vector ops);
* **GlobalMaxPool** -> ``graph.reduce`` (max) over the spatial axes, keepdims (the reduction
  kernel of :func:`cann.lowering.math.reduce`); **GlobalLpPool** (``p``) -> ``graph.reduce`` l1 / l2,
  or ``|x|^p``, a sum reduction and ``^(1/p)`` for other p.

An attribute the operator does not define is an unsupported-attribute error naming the node.
"""

from __future__ import annotations

from cann.dialects import graph as g
from cann.frontend.onnx_registry import (
    _bad_attr,
    _converter,
    _emit_unary,
    _float_input,
    _scalar_const,
    _single_axis,
    _Unsupported,
)

_TRIG = {
    "Sin": g.SinOp, "Cos": g.CosOp, "Tan": g.TanOp, "Asin": g.AsinOp, "Acos": g.AcosOp, "Atan": g.AtanOp,
    "Sinh": g.SinhOp, "Cosh": g.CoshOp, "Asinh": g.AsinhOp, "Acosh": g.AcoshOp, "Atanh": g.AtanhOp,
    "Mish": g.MishOp,
}
#: op type -> its attributes (name -> default)
_ATTRS = {"ThresholdedRelu": {"alpha": 1.0}, "Shrink": {"bias": 0.0, "lambd": 0.5}}


def _check_attrs(node, a, known) -> None:
    for k in a:
        if k not in known:
            raise _bad_attr(node, k, a[k], f"{node.op_type} has no attribute '{k}'")


@_converter(*_TRIG)
def _trig(imp, node, name, a):
    _check_attrs(node, a, ())
    x = _float_input(imp, node)
    return [imp.emit(_TRIG[node.op_type](x), name).results[0]]


@_converter("ThresholdedRelu", "Shrink")
def _thresholds(imp, node, name, a):
    known = _ATTRS[node.op_type]
    _check_attrs(node, a, known)
    x = _float_input(imp, node)
    p = {k: float(a.get(k, d)) for k, d in known.items()}
    cls = g.ThresholdedReluOp if node.op_type == "ThresholdedRelu" else g.ShrinkOp
    return [imp.emit(cls(x, **p), name).results[0]]


@_converter("GlobalMaxPool")
def _global_max_pool(imp, node, name, a):
    _check_attrs(node, a, ())
    x = _float_input(imp, node)
    r = len(g._shape(x))
    if r < 3:
        raise _Unsupported(f"GlobalMaxPool input must have rank >= 3, got rank {r}")
    return [imp.emit(g.ReduceOp(x, "max", list(range(2, r)), keepdims=True), name).results[0]]


@_converter("Hardmax")
def _hardmax(imp, node, name, a):
    _check_attrs(node, a, ("axis",))
    return _single_axis(imp, node, name, a, _float_input(imp, node), g.HardmaxOp)


@_converter("GlobalLpPool")
def _global_lp_pool(imp, node, name, a):
    """``(sum |x|^p)^(1/p)`` over the spatial axes: reduce l1 / l2 (p = 1, 2), else ``|x|^p``
    (``graph.pow``), a sum reduction and ``^(1/p)``."""
    _check_attrs(node, a, ("p",))
    x = _float_input(imp, node)
    r = len(g._shape(x))
    if r < 3:
        raise _Unsupported(f"GlobalLpPool input must have rank >= 3, got rank {r}")
    p = float(a.get("p", 2))
    if p <= 0:
        raise _bad_attr(node, "p", a.get("p"), "must be positive")
    axes = list(range(2, r))
    if p in (1.0, 2.0):
        return [imp.emit(g.ReduceOp(x, "l1" if p == 1 else "l2", axes, keepdims=True), name).results[0]]
    xp = imp.emit(g.PowOp(_emit_unary(imp, name, g.AbsOp, x), _scalar_const(imp, name, p, x)), name).results[0]
    total = imp.emit(g.ReduceOp(xp, "sum", axes, keepdims=True), name).results[0]
    return [imp.emit(g.PowOp(total, _scalar_const(imp, name, 1.0 / p, total)), name).results[0]]


@_converter("Det")
def _det(imp, node, name, a):
    _check_attrs(node, a, ())
    x = _float_input(imp, node)
    s = g._shape(x)
    if len(s) < 2 or s[-1] != s[-2]:
        raise _Unsupported(f"Det of shape {list(s)}: the last two dimensions must be equal")
    return [imp.emit(g.DetOp(x), name).results[0]]
