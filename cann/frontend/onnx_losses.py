"""ONNX NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss with constant targets.

Registered in the converter table of :mod:`cann.frontend.onnx_registry` when imported (the driver
:mod:`cann.frontend.onnx` imports it). The class indices (``target`` / ``labels``) must be
constants; the scores and the optional ``weight`` are device tensors:

* ``loss[n, d] = ReduceSum_c(x * O)`` with the compile-time ``O[n, c, d] = -w[c]`` where ``c`` is
  the target of ``(n, d)`` and the target is not ``ignore_index``, else 0 (vector kernels); a
  constant ``weight`` (and the ``1 / sum of weights`` of ``mean``) is folded into ``O``, a runtime
  one is broadcast over the class axis (``x * w``), and ``mean`` then divides by
  ``ReduceSum(O * w)`` on the device;
* ``sum`` / ``mean`` are ReduceSum kernels, with the reference's rules for ``ignore_index``
  without weights;
* SoftmaxCrossEntropyLoss applies LogSoftmax over axis 1 first (max / sum reductions, ``exp`` /
  ``ln`` on the vector unit) and can return it as ``log_prob``.
"""

from __future__ import annotations

import math

import numpy as np

from cann.dialects import graph as g
from cann.frontend.onnx_registry import (
    _bad_attr,
    _const,
    _const_input,
    _converter,
    _float_input,
    _mul,
    _reduce,
    _reshape,
    _softmax_decomposed,
    _str_attr,
    _Unsupported,
)


def _nll(imp, node, name, a, x, sce: bool):
    xs = g._shape(x)
    if len(xs) < 2 or 0 in xs:
        raise _Unsupported(f"{node.op_type} input of shape {list(xs)} (rank >= 2, not empty)")
    n, c = xs[0], xs[1]
    rest = list(xs[2:])
    t = _const_input(imp, node, 1, "labels" if sce else "target").astype(np.int64)
    if list(t.shape) != [n, *rest]:
        raise _Unsupported(f"{node.op_type} target of shape {list(t.shape)} for input {list(xs)}")
    ii = int(a["ignore_index"]) if "ignore_index" in a else None
    red = _str_attr(a, "reduction", "mean")
    if red not in ("none", "sum", "mean"):
        raise _bad_attr(node, "reduction", red)
    keep = np.ones(t.shape, np.bool_) if ii is None else t != ii
    bad = t[keep & ((t < 0) | (t >= c))]
    if bad.size:
        raise _Unsupported(f"{node.op_type} target {int(bad[0])} out of range [0, {c - 1}]")
    # O[n, c, d] = -1 where c is the (kept) target of (n, d), else 0; the picked scores are
    # ReduceSum_c(x * O): vector kernels, no element-wise addressing
    onehot = (np.arange(c).reshape(1, c, *[1] * len(rest)) == t.reshape(n, 1, *rest)) & keep.reshape(n, 1, *rest)
    o = np.where(onehot, -1.0, 0.0)
    d = int(np.prod(rest, dtype=np.int64))
    x3 = _reshape(imp, name, x, [n, c, d])  # every rank as [N, C, D]: the class-axis kernels stay 3-D
    wname = node.input[2] if len(node.input) > 2 and node.input[2] else None
    axes_all = list(range(len(t.shape)))
    if wname is not None and not imp.is_const(wname):
        wt = _float_input(imp, node, 2)
        if g._shape(wt) != (c,) or g._elt(wt) != g._elt(x):
            raise _Unsupported(f"{node.op_type} weight of shape {list(g._shape(wt))} for {c} classes")
        wb = _reshape(imp, name, wt, [1, c, 1])
        oc = _const(imp, name, o.reshape(n, c, d), x)
        loss = _reduce(imp, name, _mul(imp, name, _mul(imp, name, x3, wb), oc), "sum", [1], keepdims=False)
        loss = _reshape(imp, name, loss, list(t.shape))
        if red == "none":
            return loss
        s = _reduce(imp, name, loss, "sum", axes_all, keepdims=False)
        if red == "sum":
            return s
        # mean = sum(loss) / sum(w[t]); ReduceSum(w_b * O) = -sum(w[t])
        ws = _reduce(imp, name, _mul(imp, name, oc, wb), "sum", [0, 1, 2], keepdims=False)
        q = imp.emit(g.DivOp(_reshape(imp, name, s, [1]), _reshape(imp, name, ws, [1])), name).results[0]
        return _reshape(imp, name, _mul(imp, name, q, _const(imp, name, [-1.0], x)), [])
    if wname is not None:
        wv = np.asarray(imp.consts[wname], np.float64).reshape(-1)
        if wv.size != c:
            raise _Unsupported(f"{node.op_type} weight of {wv.size} values for {c} classes")
        o = o * wv.reshape(1, c, *[1] * len(rest))
        wsum = float(np.where(keep, wv[np.clip(t, 0, c - 1)], 0.0).sum())
    else:
        counts_ignored = ii is not None if sce else ii != -1
        wsum = float(keep.sum()) if counts_ignored else float(keep.size)
    if red == "mean":
        o = o / wsum if wsum else o * np.nan
    loss = _reduce(imp, name, _mul(imp, name, x3, _const(imp, name, o.reshape(n, c, d), x)), "sum", [1], keepdims=False)
    loss = _reshape(imp, name, loss, list(t.shape))
    if red == "none":
        return loss
    return _reduce(imp, name, loss, "sum", axes_all, keepdims=False)


def _body_for_runtime_targets(imp, node, name):
    """Runtime class indices are data, not compile-time constants: import the operator's
    function body instead (its GatherElements picks the scores on the device). None when the
    targets are constant (the one-hot form below applies)."""
    if len(node.input) > 1 and node.input[1] and not imp.is_const(node.input[1]) and imp.expand_function(node, name):
        return [imp.values.get(o) for o in node.output]
    return None


@_converter("NegativeLogLikelihoodLoss")
def _nll_loss(imp, node, name, a):
    body = _body_for_runtime_targets(imp, node, name)
    if body is not None:
        return body
    x = _float_input(imp, node)
    return [_nll(imp, node, name, a, x, False)]


@_converter("SoftmaxCrossEntropyLoss")
def _sce_loss(imp, node, name, a):
    body = _body_for_runtime_targets(imp, node, name)
    if body is not None:
        return body
    x = _float_input(imp, node)
    if len(g._shape(x)) < 2:
        raise _Unsupported("SoftmaxCrossEntropyLoss of a rank-1 input")
    xs = g._shape(x)
    # the log-softmax over the class axis on the [N, C, D] view (3-D reductions), then back
    lp = _reshape(imp, name, _softmax_decomposed(imp, _reshape(imp, name, x, [xs[0], xs[1], math.prod(xs[2:])]), 1,
                                                 name, True), list(xs))
    loss = _nll(imp, node, name, a, lp, True)
    return [loss, lp][: len(node.output)]
