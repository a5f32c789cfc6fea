"""ONNX importers for spatial operators of other ranks than the 2-D kernels', written with them.

Registered in the converter table of :mod:`cann.frontend.onnx_registry` when imported (the driver
:mod:`cann.frontend.onnx` imports it); 4-D (2-D spatial) nodes keep their own converters
(:mod:`cann.frontend.onnx_core`), everything below runs on the AI Core:

* **Conv, ConvTranspose, MaxPool, AveragePool** with one spatial axis: ``[N, C, L]`` is viewed as
  ``[N, C, 1, L]`` and the 2-D kernel runs with a height-1 window (every attribute: ``auto_pad``,
  ``pads``, ``strides``, ``dilations``, ``group``, ``output_padding`` / ``output_shape``,
  ``ceil_mode``, ``count_include_pad``);
* **MaxPool, AveragePool** with three or more spatial axes: pooling is separable per axis (a max of
  maxima; an average of averages, whose divisor is the product of the per-axis counts with or
  without the pads), so a 2-D pool over the last two axes is followed by one ``(k, 1)`` pool per
  remaining axis on a view ``[N, C * outer, d, inner]`` (reshapes only, no data movement);
* **LpPool** (every rank): ``(sum |x|^p)^(1/p)`` over the window: ``|x|^p`` elementwise, a
  separable sum pool (AveragePool counting the zero pads, times the window size; ``ceil_mode``
  becomes extra zero padding at the end), then ``sqrt`` / ``pow(1/p)``;
* **Resize** with ``mode='cubic'``, ``antialias=1``, ``tf_crop_and_resize``, or of other axes or
  ranks than H, W of a 4-D tensor: resizing is linear and separable, so each resized axis is a
  MatMul on the cube with a compile-time ``[in, out]`` weight matrix built with the spec's
  arithmetic (coefficients, ``cubic_coeff_a``, ``exclude_outside``, antialias footprints, edge
  clamping); ``tf_crop_and_resize``'s extrapolated positions have zero weights plus a constant
  ``extrapolation_value`` added after the axis, as the reference does axis by axis.

Shapes of every rank (2-D included): a pool with ``ceil_mode`` drops a last window that would start
inside the end padding (:func:`pool_output_size`; the importer's shape inference applies it through
:func:`infer_shapes_pool_rule`), and a Conv / pool window longer than the padded input is a one-line
error on the node (:func:`check_window_fits`).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import onnx
from onnx import helper
from xdsl.dialects.builtin import TensorType

from cann.dialects import graph as g
from cann.frontend.onnx_core import _conv as _conv2d
from cann.frontend.onnx_core import _conv_transpose as _conv_transpose2d
from cann.frontend.onnx_core import _pool as _pool2d
from cann.frontend.onnx_core import _resize as _resize2d
from cann.dialects.graph_base import pool_output_size  # noqa: F401  (the rule this module's shapes follow)
from cann.frontend.onnx_registry import (
    check_window_fits,
    _bad_attr, _invalid_attr,
    _check_unused_outputs,
    _const,
    _const_input,
    _converter,
    _dims,
    _emit_unary,
    _float_input,
    _mul,
    _out_type,
    _reshape,
    _scalar_const,
    _str_attr,
    _transpose,
    _Unsupported,
    resize_scales,
)
from cann.lowering.resize import nearest_upper, source_coords


def _spatial_nd(node, a, in_shape, kernel, ceil_mode: bool = False):
    """strides, pads (begins then ends), dilations for ``len(kernel)`` spatial axes; auto_pad resolved."""
    n = len(kernel)
    strides = [int(v) for v in a.get("strides", [1] * n)]
    dil = [int(v) for v in a.get("dilations", [1] * n)]
    pads = [int(v) for v in a.get("pads", [0] * (2 * n))]
    for key, v, want in (("strides", strides, n), ("dilations", dil, n), ("pads", pads, 2 * n)):
        if len(v) != want:
            raise _bad_attr(node, key, v, f"expected {want} values for {n} spatial axes")
    if min(strides) < 1 or min(dil) < 1 or min(pads) < 0:
        raise _bad_attr(node, "strides", strides, "strides and dilations must be positive, pads non-negative")
    auto = _str_attr(a, "auto_pad", "NOTSET")
    if auto == "VALID":
        pads = [0] * (2 * n)
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = [0] * (2 * n)
        for i in range(n):
            out = -(-in_shape[i] // strides[i])
            total = max(0, (out - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 - in_shape[i])
            small, big = total // 2, total - total // 2
            pads[i], pads[i + n] = (small, big) if auto == "SAME_UPPER" else (big, small)
    elif auto != "NOTSET":
        raise _bad_attr(node, "auto_pad", auto)
    return strides, pads, dil


_POOLS = ("MaxPool", "AveragePool", "LpPool")


def floor_mode_candidate(node: onnx.NodeProto) -> bool:
    """Whether ``node`` is an ONNX-domain pool with ceil_mode=1 (one :func:`floor_mode_equivalent` may change)."""
    return node.domain in ("", "ai.onnx") and node.op_type in _POOLS and any(
        at.name == "ceil_mode" and helper.get_attribute_value(at) for at in node.attribute)


def floor_mode_equivalent(node: onnx.NodeProto, in_shape) -> onnx.NodeProto | None:
    """For a ceil_mode pool whose last window onnx's shape inference keeps but the spec drops: the same
    node in floor mode with explicit pads, for which onnx infers the spec's output shape (used for shape
    inference only). None for every other node."""
    if node.domain not in ("", "ai.onnx") or node.op_type not in _POOLS:
        return None
    a = {at.name: helper.get_attribute_value(at) for at in node.attribute}
    ks = [int(v) for v in a.get("kernel_shape", [])]
    if not int(a.get("ceil_mode", 0)) or in_shape is None or len(in_shape) != len(ks) + 2 or \
            any(not isinstance(v, int) for v in in_shape):
        return None
    r = len(ks)
    try:
        strides, pads, dil = _spatial_nd(node, a, in_shape[2:], ks)
    except _Unsupported:
        return None  # reported by the converter
    want = [pool_output_size(in_shape[2 + i], ks[i], strides[i], pads[i], pads[i + r], dil[i], True) for i in range(r)]
    kept = [-(-(in_shape[2 + i] + pads[i] + pads[i + r] - (ks[i] - 1) * dil[i] - 1) // strides[i]) + 1
            for i in range(r)]
    if want == kept or min(want) < 1:
        return None
    # floor((L + pb + pe' - eff) / s) + 1 == want for the smallest non-negative pe'
    ends = [max(0, (want[i] - 1) * strides[i] + (ks[i] - 1) * dil[i] + 1 - in_shape[2 + i] - pads[i]) for i in range(r)]
    rep = onnx.NodeProto()
    rep.CopyFrom(node)
    del rep.attribute[:]
    rep.attribute.extend(at for at in node.attribute if at.name not in ("auto_pad", "pads", "ceil_mode"))
    rep.attribute.extend([helper.make_attribute("pads", pads[:r] + ends), helper.make_attribute("ceil_mode", 0)])
    return rep


def infer_shapes_pool_rule(model: onnx.ModelProto, infer) -> onnx.ModelProto:
    """``infer(model)`` (onnx's shape inference of the ``ModelProto`` ``model``), corrected for the
    ceil_mode drop rule of :func:`pool_output_size`: each pool that needs it is replaced *in model*
    (a copy made for inference; the importer converts the original nodes) by its floor-mode
    equivalent, the shapes declared for every tensor it feeds are cleared (an exporter may have
    written onnx's too-long ones), and inference runs again. The pools are found on a probe copy
    without declared shapes, so a model that declares the spec's shapes (as onnxruntime accepts) is
    not refused for disagreeing with onnx's inference; a pool downstream of a changed one waits for
    the next round, its input shape being stale."""
    if not any(floor_mode_candidate(n) for n in model.graph.node):
        return infer(model)
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    del probe.graph.value_info[:]
    for vi in probe.graph.output:
        if vi.type.HasField("tensor_type"):
            vi.type.tensor_type.ClearField("shape")
    all_stale: set[str] = set()
    while True:
        ig = infer(probe).graph
        types = {vi.name: vi.type for vi in (*ig.input, *ig.value_info, *ig.output)}
        stale: set[str] = set()
        changed = False
        for node, pnode in zip(model.graph.node, probe.graph.node):
            if any(n in stale for n in node.input):
                stale.update(o for o in node.output if o)
                continue
            t = types.get(node.input[0]) if node.input else None
            rep = floor_mode_equivalent(node, _dims(t) if t is not None else None)
            if rep is not None:
                node.CopyFrom(rep)
                pnode.CopyFrom(rep)
                stale.update(o for o in node.output if o)
                changed = True
        all_stale |= stale
        if not changed:
            break
    keep = [vi for vi in model.graph.value_info if vi.name not in all_stale]
    del model.graph.value_info[:]
    model.graph.value_info.extend(keep)
    for vi in model.graph.output:
        if vi.name in all_stale and vi.type.HasField("tensor_type"):
            vi.type.tensor_type.ClearField("shape")
    return infer(model)


def _check_shape(imp, node, y):
    want = list(_out_type(imp, node).get_shape())
    if list(g._shape(y)) != want:
        raise _Unsupported(f"{node.op_type} result shape {list(g._shape(y))} differs from shape inference {want}")
    return y


def _pool_pass(imp, name, kind, x4, out_hw, k, s, p, d, cm, cip):
    """One 2-D pool on a 4-D view; ``p`` = (top, left, bottom, right)."""
    n, c = g._shape(x4)[:2]
    rt = TensorType(g._elt(x4), [n, c, *out_hw])
    if kind == "max":
        op = g.MaxPoolOp(x4, rt, kernel_shape=k, strides=s, pads=p, dilations=d, ceil_mode=cm)
    else:
        op = g.AvgPoolOp(x4, rt, kernel_shape=k, strides=s, pads=p, dilations=d, ceil_mode=cm, count_include_pad=cip)
    return imp.emit(op, name).results[0]


def _separable_pool(imp, name, kind, x, out_sp, ks, strides, pads, dil, cm, cip):
    """A pool over every spatial axis of ``x`` ([N, C, *spatial]) as 2-D pools on reshaped views."""
    s = g._shape(x)
    n, c, sp = s[0], s[1], list(s[2:])
    r = len(sp)
    if r == 1:
        y = _pool_pass(imp, name, kind, _reshape(imp, name, x, [n, c, 1, sp[0]]), [1, out_sp[0]], [1, ks[0]],
                       [1, strides[0]], [0, pads[0], 0, pads[1]], [1, dil[0]], cm, cip)
        return _reshape(imp, name, y, [n, c, out_sp[0]])
    # the last two axes
    outer = c * math.prod(sp[:-2])
    y = _pool_pass(imp, name, kind, _reshape(imp, name, x, [n, outer, sp[-2], sp[-1]]), out_sp[-2:], ks[-2:],
                   strides[-2:], [pads[r - 2], pads[r - 1], pads[2 * r - 2], pads[2 * r - 1]], dil[-2:], cm, cip)
    cur = sp[:-2] + list(out_sp[-2:])
    # then each remaining axis, innermost first: view [N, C * outer, d, inner], a (k, 1) window
    for i in range(r - 3, -1, -1):
        o = c * math.prod(cur[:i])
        inner = math.prod(cur[i + 1:])
        y = _pool_pass(imp, name, kind, _reshape(imp, name, y, [n, o, cur[i], inner]), [out_sp[i], inner],
                       [ks[i], 1], [strides[i], 1], [pads[i], 0, pads[i + r], 0], [dil[i], 1], cm, cip)
        cur[i] = out_sp[i]
    return _reshape(imp, name, y, [n, c, *out_sp])


@_converter("MaxPool", "AveragePool")
def _pool_nd(imp, node, name, a):
    x = _float_input(imp, node)
    s = g._shape(x)
    ks = [int(v) for v in a.get("kernel_shape", [])]
    if len(s) == 4:
        if len(ks) == 2:
            try:
                strides, pads, dil = _spatial_nd(node, a, s[2:], ks)
            except _Unsupported:
                return _pool2d(imp, node, name, a)  # (it reports the attribute)
            check_window_fits(node, s[2:], ks, strides, pads, dil, bool(int(a.get("ceil_mode", 0))))
        return _pool2d(imp, node, name, a)
    if len(s) < 3 or len(ks) != len(s) - 2:
        raise _invalid_attr(node, "kernel_shape", ks, f"does not match the rank-{len(s)} input")
    if node.op_type == "MaxPool":
        _check_unused_outputs(imp, node, 1)
        if a.get("storage_order", 0) not in (0, 1):
            raise _bad_attr(node, "storage_order", a["storage_order"])
    strides, pads, dil = _spatial_nd(node, a, s[2:], ks)
    cm = int(a.get("ceil_mode", 0))
    cip = int(a.get("count_include_pad", 0))
    check_window_fits(node, s[2:], ks, strides, pads, dil, bool(cm))
    out = list(_out_type(imp, node).get_shape())
    if 0 in out:
        raise _Unsupported(f"{node.op_type} with an empty result")
    kind = "max" if node.op_type == "MaxPool" else "avg"
    return [_separable_pool(imp, name, kind, x, out[2:], ks, strides, pads, dil, cm, cip)]


@_converter("LpPool")
def _lp_pool(imp, node, name, a):
    x = _float_input(imp, node)
    s = g._shape(x)
    ks = [int(v) for v in a.get("kernel_shape", [])]
    if len(s) < 3 or len(ks) != len(s) - 2:
        raise _invalid_attr(node, "kernel_shape", ks, f"does not match the rank-{len(s)} input")
    p = float(a.get("p", 2))
    if p <= 0:
        raise _bad_attr(node, "p", a.get("p"), "must be positive")
    r = len(ks)
    strides, pads, dil = _spatial_nd(node, a, s[2:], ks)
    check_window_fits(node, s[2:], ks, strides, pads, dil, bool(int(a.get("ceil_mode", 0))))
    out = list(_out_type(imp, node).get_shape())
    if 0 in out:
        raise _Unsupported("LpPool with an empty result")
    # ceil_mode (and any output longer than the floor rule) becomes zero padding at the end: the
    # zeros add nothing to the sum, and every window then lies in the padded input
    for i in range(r):
        eff = (ks[i] - 1) * dil[i] + 1
        need = (out[2 + i] - 1) * strides[i] + eff - s[2 + i] - pads[i]
        pads[i + r] = max(pads[i + r], need)
    if p == 1:
        xp = _emit_unary(imp, name, g.AbsOp, x)
    elif p == 2:
        xp = _mul(imp, name, x, x)
    else:
        xp = imp.emit(g.PowOp(_emit_unary(imp, name, g.AbsOp, x), _scalar_const(imp, name, p, x)), name).results[0]
    avg = _separable_pool(imp, name, "avg", xp, out[2:], ks, strides, pads, dil, 0, 1)
    total = _mul(imp, name, avg, _scalar_const(imp, name, float(math.prod(ks)), avg))
    if p == 1:
        return [total]
    if p == 2:
        return [_emit_unary(imp, name, g.SqrtOp, total)]
    return [imp.emit(g.PowOp(total, _scalar_const(imp, name, 1.0 / p, total)), name).results[0]]


def _conv_3d(imp, node, name, a, x):
    """3-D Conv: the D axis folded into the batch, one 2-D Conv over H, W with the ``kd`` depth
    slices of the weight stacked on the output channels, then ``kd`` strided Slices of the
    zero-padded D axis summed (``y[od] = sum_j z_j[od*sd + j*dd - pad]``)."""
    n, c, d, h, wd = g._shape(x)
    w = _const_input(imp, node, 1, "W")
    if w.ndim != 5:
        raise _Unsupported(f"Conv of a 3-D input with a rank-{w.ndim} weight")
    ks = [int(v) for v in a.get("kernel_shape", w.shape[2:])]
    if ks != list(w.shape[2:]):
        raise _invalid_attr(node, "kernel_shape", ks, "does not match the weight shape")
    group = int(a.get("group", 1))
    m, cg, kd, kh, kw = w.shape
    if group < 1 or m % group or c != cg * group:
        raise _bad_attr(node, "group", group, f"does not divide {c} input and {m} output channels")
    mg = m // group
    strides, pads, dil = _spatial_nd(node, a, [d, h, wd], ks)
    check_window_fits(node, [d, h, wd], ks, strides, pads, dil)
    out = list(_out_type(imp, node).get_shape())
    od, oh, ow = out[2:]
    # W2[gi*(kd*Mg) + j*Mg + ml] = w[gi*Mg + ml, :, j]
    w2 = np.ascontiguousarray(np.transpose(w.reshape(group, mg, cg, kd, kh, kw), (0, 3, 1, 2, 4, 5))
                              .reshape(group * kd * mg, cg, kh, kw))
    xt = _reshape(imp, name, _transpose(imp, name, x, [0, 2, 1, 3, 4]), [n * d, c, h, wd])
    rt = TensorType(g._elt(x), [n * d, group * kd * mg, oh, ow])
    z = imp.emit(g.Conv2DOp(xt, _const(imp, name, w2, x), None, rt, strides=strides[1:],
                            pads=[pads[1], pads[2], pads[4], pads[5]], dilations=dil[1:], group=group),
                 name).results[0]
    rest = group * kd * mg * oh * ow
    z = _reshape(imp, name, z, [n, d, rest])
    dp = d + pads[0] + pads[3]
    if pads[0] or pads[3]:
        z = imp.emit(g.PadOp(z, [0, pads[0], 0, 0, pads[3], 0], "constant", 0.0), name).results[0]
    z = _reshape(imp, name, z, [n, dp, group, kd, mg, oh * ow])
    sd, dd = strides[0], dil[0]
    acc = None
    for j in range(kd):
        st = j * dd
        t = imp.emit(g.SliceOp(z, [0, st, 0, j, 0, 0], [n, st + (od - 1) * sd + 1, group, j + 1, mg, oh * ow],
                               [1, sd, 1, 1, 1, 1]), name).results[0]
        acc = t if acc is None else imp.emit(g.AddOp(acc, t), name).results[0]
    y = _transpose(imp, name, _reshape(imp, name, acc, [n, od, m, oh, ow]), [0, 2, 1, 3, 4])
    if len(node.input) > 2 and node.input[2]:
        y = imp.emit(g.AddOp(y, _reshape(imp, name, imp.value(node.input[2]), [m, 1, 1, 1])), name).results[0]
    return y


def _input_and_weight_1d(imp, node, a):
    """Conv / ConvTranspose of a 1-D input: (x, its shape, the constant rank-3 weight, kernel_shape)."""
    x = _float_input(imp, node)
    w = _const_input(imp, node, 1, "W")
    if w.ndim != 3:
        raise _Unsupported(f"{node.op_type} of a 1-D input with a rank-{w.ndim} weight")
    ks = [int(v) for v in a.get("kernel_shape", w.shape[2:])]
    if ks != list(w.shape[2:]):
        raise _invalid_attr(node, "kernel_shape", ks, "does not match the weight shape")
    return x, g._shape(x), w, ks


@_converter("Conv")
def _conv_nd(imp, node, name, a):
    x = imp.value(node.input[0])
    if len(g._shape(x)) > 5:
        raise _bad_attr(node, "kernel_shape", list(a.get("kernel_shape", g._shape(imp.value(node.input[1]))[2:])),
                        "1-D, 2-D and 3-D Conv are supported")
    if len(g._shape(x)) == 5:
        return [_check_shape(imp, node, _conv_3d(imp, node, name, a, _float_input(imp, node)))]
    if len(g._shape(x)) != 3:
        ws = g._shape(imp.value(node.input[1]))
        ks = [int(v) for v in a.get("kernel_shape", ws[2:])]
        if len(g._shape(x)) == 4 and len(ks) == 2:
            try:
                strides, pads, dil = _spatial_nd(node, a, g._shape(x)[2:], ks)
            except _Unsupported:
                return _conv2d(imp, node, name, a)  # (it reports the attribute)
            check_window_fits(node, g._shape(x)[2:], ks, strides, pads, dil)
        return _conv2d(imp, node, name, a)
    x, (n, c, length), w, ks = _input_and_weight_1d(imp, node, a)
    strides, pads, dil = _spatial_nd(node, a, [length], ks)
    check_window_fits(node, [length], ks, strides, pads, dil)
    b = imp.value(node.input[2]) if len(node.input) > 2 and node.input[2] else None
    out = list(_out_type(imp, node).get_shape())
    w4 = _const(imp, name, w.reshape(w.shape[0], w.shape[1], 1, w.shape[2]), x)
    rt = TensorType(g._elt(x), [out[0], out[1], 1, out[2]])
    op = g.Conv2DOp(_reshape(imp, name, x, [n, c, 1, length]), w4, b, rt, strides=[1, strides[0]],
                    pads=[0, pads[0], 0, pads[1]], dilations=[1, dil[0]], group=int(a.get("group", 1)))
    return [_reshape(imp, name, imp.emit(op, name).results[0], out)]


def _conv_transpose_3d(imp, name, x, w, b, strides, begin, end, dil, opad, group, out):
    """3-D ConvTranspose: the D axis folded into the batch, one 2-D ConvTranspose over H, W with the
    ``kd`` depth slices of the weight stacked on the output channels, then the D axis scattered and
    summed: slice ``j`` lands at ``i*sd + j*dd - pad`` (a zero Pad interleaves the stride, Slice /
    Pad shift it), ``kd`` Adds."""
    n, c, d, h, wd = g._shape(x)
    _, mg, kd, kh, kw = w.shape
    m = mg * group
    od, oh, ow = out[2:]
    # W2[c, j*Mg + ml] = w[c, ml, j]: output channel gi*(kd*Mg) + j*Mg + ml
    w2 = np.ascontiguousarray(np.transpose(w, (0, 2, 1, 3, 4)).reshape(c, kd * mg, kh, kw))
    xt = _reshape(imp, name, _transpose(imp, name, x, [0, 2, 1, 3, 4]), [n * d, c, h, wd])
    rt = TensorType(g._elt(x), [n * d, group * kd * mg, oh, ow])
    z = imp.emit(g.ConvTransposeOp(xt, _const(imp, name, w2, x), None, rt, strides=strides[1:],
                                   pads=[begin[1], begin[2], end[1], end[2]], dilations=dil[1:],
                                   output_padding=opad[1:], group=group), name).results[0]
    z = _reshape(imp, name, z, [n, d, group, kd, mg, oh * ow])
    sd, dd, bd = strides[0], dil[0], begin[0]
    y_rest = group * mg * oh * ow
    acc = None
    for j in range(kd):
        t = imp.emit(g.SliceOp(z, [0, 0, 0, j, 0, 0], [n, d, group, j + 1, mg, oh * ow], [1] * 6), name).results[0]
        t = _reshape(imp, name, t, [n, d, 1, y_rest])
        if sd > 1:
            t = imp.emit(g.PadOp(t, [0, 0, 0, 0, 0, 0, sd - 1, 0], "constant", 0.0), name).results[0]
        t = _reshape(imp, name, t, [n, d * sd, y_rest])
        length = d * sd
        off = j * dd - bd  # position of t[0] in the output
        if off < 0:
            if -off >= length:
                continue
            t = imp.emit(g.SliceOp(t, [0, -off, 0], [n, length, y_rest], [1, 1, 1]), name).results[0]
            length += off
            off = 0
        if off >= od:
            continue
        if off + length > od:
            t = imp.emit(g.SliceOp(t, [0, 0, 0], [n, od - off, y_rest], [1, 1, 1]), name).results[0]
            length = od - off
        if off or off + length < od:
            t = imp.emit(g.PadOp(t, [0, off, 0, 0, od - off - length, 0], "constant", 0.0), name).results[0]
        acc = t if acc is None else imp.emit(g.AddOp(acc, t), name).results[0]
    if acc is None:
        acc = _const(imp, name, np.zeros((n, od, y_rest)), x)
    y = _transpose(imp, name, _reshape(imp, name, acc, [n, od, m, oh, ow]), [0, 2, 1, 3, 4])
    if b is not None:
        y = imp.emit(g.AddOp(y, _reshape(imp, name, b, [m, 1, 1, 1])), name).results[0]
    return y


def _conv_transpose_pads(node, a, xs, ks, nsp):
    """strides, dilations, output_padding, begin pads for ``nsp`` spatial axes (the spec's rules)."""
    strides = [int(v) for v in a.get("strides", [1] * nsp)]
    dil = [int(v) for v in a.get("dilations", [1] * nsp)]
    op_ = [int(v) for v in a.get("output_padding", [0] * nsp)]
    for key, v in (("strides", strides), ("dilations", dil), ("output_padding", op_)):
        if len(v) != nsp:
            raise _bad_attr(node, key, v, f"expected {nsp} values")
    auto = _str_attr(a, "auto_pad", "NOTSET")
    if auto not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise _bad_attr(node, "auto_pad", auto)
    eff = [dil[i] * (ks[i] - 1) + 1 for i in range(nsp)]
    full = [strides[i] * (xs[2 + i] - 1) + op_[i] + eff[i] for i in range(nsp)]
    if "pads" in a and auto in ("NOTSET", "VALID"):
        pads = [int(v) for v in a["pads"]]
        if len(pads) != 2 * nsp:
            raise _bad_attr(node, "pads", pads, f"expected {2 * nsp} values")
        begin = pads[:nsp]
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        shape = [int(v) for v in a.get("output_shape", [xs[2 + i] * strides[i] for i in range(nsp)])][-nsp:]
        total = [full[i] - shape[i] for i in range(nsp)]
        begin = [t // 2 if auto == "SAME_UPPER" else t - t // 2 for t in total]
    else:
        begin = [0] * nsp
    if min(begin) < 0:
        raise _bad_attr(node, "pads", begin, "a negative begin padding")
    return strides, dil, op_, begin, full


@_converter("ConvTranspose")
def _conv_transpose_nd(imp, node, name, a):
    x = imp.value(node.input[0])
    if len(g._shape(x)) > 5:
        raise _bad_attr(node, "kernel_shape", list(a.get("kernel_shape", g._shape(imp.value(node.input[1]))[2:])),
                        "1-D, 2-D and 3-D ConvTranspose are supported")
    if len(g._shape(x)) == 5:
        x = _float_input(imp, node)
        xs = g._shape(x)
        w = _const_input(imp, node, 1, "W")
        if w.ndim != 5 or w.shape[0] != xs[1]:
            raise _Unsupported(f"ConvTranspose of a 3-D input with a weight of shape {list(w.shape)}")
        ks = [int(v) for v in a.get("kernel_shape", w.shape[2:])]
        if ks != list(w.shape[2:]):
            raise _invalid_attr(node, "kernel_shape", ks, "does not match the weight shape")
        group = int(a.get("group", 1))
        if group < 1 or xs[1] % group:
            raise _bad_attr(node, "group", group)
        strides, dil, op_, begin, full = _conv_transpose_pads(node, a, xs, ks, 3)
        out = list(_out_type(imp, node).get_shape())
        end = [full[i] - begin[i] - out[2 + i] for i in range(3)]
        b = imp.value(node.input[2]) if len(node.input) > 2 and node.input[2] else None
        return [_conv_transpose_3d(imp, name, x, w, b, strides, begin, end, dil, op_, group, out)]
    if len(g._shape(x)) != 3:
        return _conv_transpose2d(imp, node, name, a)
    x, (n, c, length), w, ks = _input_and_weight_1d(imp, node, a)
    stride = [int(v) for v in a.get("strides", [1])]
    dil = [int(v) for v in a.get("dilations", [1])]
    op_ = [int(v) for v in a.get("output_padding", [0])]
    for key, v in (("strides", stride), ("dilations", dil), ("output_padding", op_)):
        if len(v) != 1:
            raise _bad_attr(node, key, v, "expected 1 value for 1 spatial axis")
    auto = _str_attr(a, "auto_pad", "NOTSET")
    if auto not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise _bad_attr(node, "auto_pad", auto)
    out = list(_out_type(imp, node).get_shape())
    eff = dil[0] * (ks[0] - 1) + 1
    full = stride[0] * (length - 1) + op_[0] + eff
    if "pads" in a and auto in ("NOTSET", "VALID"):
        pads = [int(v) for v in a["pads"]]
        if len(pads) != 2:
            raise _bad_attr(node, "pads", pads, "expected 2 values for 1 spatial axis")
        begin = pads[0]
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        shape = [int(v) for v in a.get("output_shape", [length * stride[0]])][-1]
        total = full - shape
        begin = total // 2 if auto == "SAME_UPPER" else total - total // 2
    else:
        begin = 0
    if begin < 0:
        raise _bad_attr(node, "pads", begin, "a negative begin padding")
    end = full - begin - out[2]
    b = imp.value(node.input[2]) if len(node.input) > 2 and node.input[2] else None
    w4 = _const(imp, name, w.reshape(w.shape[0], w.shape[1], 1, w.shape[2]), x)
    rt = TensorType(g._elt(x), [out[0], out[1], 1, out[2]])
    op = g.ConvTransposeOp(_reshape(imp, name, x, [n, c, 1, length]), w4, b, rt, strides=[1, stride[0]],
                           pads=[0, begin, 0, end], dilations=[1, dil[0]], output_padding=[0, op_[0]],
                           group=int(a.get("group", 1)))
    return [_reshape(imp, name, imp.emit(op, name).results[0], out)]


@_converter("Col2Im")
def _col2im(imp, node, name, a):
    """Col2Im (2-D and 3-D images): the columns ``[N, C*K, L]`` viewed as ``[N, C*K, *blocks]`` are
    a ConvTranspose with a constant one-hot weight (column ``c*K + k`` feeds channel ``c`` at
    kernel offset ``k``): the cube sums the overlapping blocks; strides, dilations, pads as the
    node's."""
    x = _float_input(imp, node)
    xs = g._shape(x)
    img = [int(v) for v in _const_input(imp, node, 1, "image_shape").reshape(-1)]
    blk = [int(v) for v in _const_input(imp, node, 2, "block_shape").reshape(-1)]
    nsp = len(img)
    if nsp not in (2, 3) or len(blk) != nsp:
        raise _Unsupported(f"Col2Im of a {len(img)}-D image (2-D and 3-D supported)")
    strides, pads, dil = _spatial_nd(node, a, img, blk)
    k = math.prod(blk)
    if len(xs) != 3 or xs[1] % k:
        raise _Unsupported(f"Col2Im input of shape {list(xs)} for blocks {blk}")
    n, ck, length = xs
    c = ck // k
    eff = [(blk[i] - 1) * dil[i] + 1 for i in range(nsp)]
    o = [(img[i] + pads[i] + pads[i + nsp] - eff[i]) // strides[i] + 1 for i in range(nsp)]
    if math.prod(o) != length or min(o) < 1:
        raise _Unsupported(f"Col2Im input length {length} is not the {'x'.join(map(str, o))} blocks of the image")
    w = np.zeros((ck, c, *blk))
    for ci in range(c):
        for kk, off in enumerate(np.ndindex(*blk)):
            w[(ci * k + kk, ci, *off)] = 1.0
    begin, end, opad = [], [], []
    for i in range(nsp):
        full = strides[i] * (o[i] - 1) + eff[i]
        op_ = max(0, img[i] + pads[i] - full)
        begin.append(pads[i])
        end.append(full + op_ - pads[i] - img[i])
        opad.append(op_)
    xv = _reshape(imp, name, x, [n, ck, *o])
    if nsp == 3:
        return [_conv_transpose_3d(imp, name, xv, w, None, strides, begin, end, dil, opad, 1, [n, c, *img])]
    rt = TensorType(g._elt(x), [n, c, *img])
    op = g.ConvTransposeOp(xv, _const(imp, name, w, x), None, rt, strides=strides,
                           pads=begin + end, dilations=dil, output_padding=opad, group=1)
    return [imp.emit(op, name).results[0]]


def _affine_base(sizes, align_corners: bool) -> np.ndarray:
    """The homogeneous base grid ``[prod(sizes), r + 1]`` (x first, as the spec's reference)."""
    axes = []
    for n in sizes:
        if align_corners:
            a = np.arange(-1, 1 + 0.0001, 2.0 / (n - 1)) if n > 1 else np.array([-1.0])
        else:
            step = 2.0 / n
            a = np.arange(-1 + step / 2, 1, step)
        axes.append(a[:n])
    mesh = np.meshgrid(*axes, indexing="ij")
    cols = [m.reshape(-1) for m in reversed(mesh)] + [np.ones(math.prod(sizes))]
    return np.stack(cols, 1)


@_converter("AffineGrid")
def _affine_grid(imp, node, name, a):
    """``grid[n] = base @ theta[n]^T``: one cube MatMul of theta ``[N*r, r+1]`` with the constant
    transposed base grid, then a Transpose to ``[N, *spatial, r]``."""
    theta = _float_input(imp, node)
    ts = g._shape(theta)
    size = [int(v) for v in _const_input(imp, node, 1, "size").reshape(-1)]
    if len(size) not in (4, 5):
        raise _Unsupported(f"AffineGrid size {size} (4 or 5 values expected)")
    sp = size[2:]
    r = len(sp)
    if ts != (size[0], r, r + 1):
        raise _Unsupported(f"AffineGrid theta of shape {list(ts)} for size {size}")
    base = _affine_base(sp, bool(int(a.get("align_corners", 0))))
    y = imp.emit(g.MatMulOp(_reshape(imp, name, theta, [size[0] * r, r + 1]), _const(imp, name, base.T, theta)),
                 name).results[0]
    y = _transpose(imp, name, _reshape(imp, name, y, [size[0], r, math.prod(sp)]), [0, 2, 1])
    return [_check_shape(imp, node, _reshape(imp, name, y, [size[0], *sp, r]))]


@_converter("MaxUnpool")
def _max_unpool(imp, node, name, a):
    """The pooled values written at the (constant) flat positions of ``I`` in the unpooled shape
    (then placed in the corner of ``output_shape``): one Gather (DMA) of ``[x, 0]``."""
    x = imp.value(node.input[0])
    xs = g._shape(x)
    idx = _const_input(imp, node, 1, "I").astype(np.int64).reshape(-1)
    ks = [int(v) for v in a.get("kernel_shape", [])]
    nsp = len(xs) - 2
    if len(ks) != nsp:
        raise _invalid_attr(node, "kernel_shape", ks, f"does not match the rank-{len(xs)} input")
    strides = [int(v) for v in a.get("strides", [1] * nsp)]
    pads = [int(v) for v in a.get("pads", [0] * (2 * nsp))]
    inferred = [xs[0], xs[1]] + [(xs[2 + i] - 1) * strides[i] - (pads[i] + pads[nsp + i]) + ks[i] for i in range(nsp)]
    out = list(_out_type(imp, node).get_shape())
    if idx.size != math.prod(xs) or len(out) != len(xs) or any(o < i for o, i in zip(out, inferred)):
        raise _Unsupported(f"MaxUnpool indices / output_shape are inconsistent with the input {list(xs)}")
    total = math.prod(inferred)
    if ((idx < 0) | (idx >= total)).any():
        raise _Unsupported("MaxUnpool index out of range")
    pos = np.ravel_multi_index(np.unravel_index(idx, inferred), out)
    table = np.full(math.prod(out), idx.size, np.int64)  # the appended zero
    table[pos] = np.arange(idx.size)
    zero = _const(imp, name, np.zeros(1), x)
    from cann.frontend.onnx_rearrange import _const_gather

    y = _const_gather(imp, name, [x, zero], table)
    return [_check_shape(imp, node, _reshape(imp, name, y, out))]


# ---------------------------------------------------------------------------------------------
# Resize as per-axis MatMuls


def _cubic_coeffs(ratio: float, A: float) -> np.ndarray:
    r = ratio
    return np.array([((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A,
                     ((A + 2) * r - (A + 3)) * r * r + 1,
                     ((A + 2) * (1 - r) - (A + 3)) * (1 - r) * (1 - r) + 1,
                     ((A * ((1 - r) + 1) - 5 * A) * ((1 - r) + 1) + 8 * A) * ((1 - r) + 1) - 4 * A])


def _cubic_coeffs_aa(ratio: float, scale: float, A: float) -> np.ndarray:
    scale = min(scale, 1.0)

    def f(x: float) -> float:
        x = abs(x)
        if x <= 1:
            return (A + 2) * x ** 3 - (A + 3) * x * x + 1
        if x < 2:
            return A * x ** 3 - 5 * A * x * x + 8 * A * x - 4 * A
        return 0.0

    i0 = int(np.floor(-2 / scale) + 1)
    c = np.array([f(scale * (i - ratio)) for i in range(i0, 2 - i0)])
    return c / c.sum()


def _linear_coeffs_aa(ratio: float, scale: float) -> np.ndarray:
    scale = min(scale, 1.0)
    start = int(np.floor(-1 / scale) + 1)
    args = (np.arange(start, start + 2 - 2 * start) - ratio) * scale
    c = np.clip(1 - np.abs(args), 0, 1)
    return c / c.sum()


def resize_matrix(mode: str, ctm: str, in_size: int, out_size: int, scale: float, *, cubic_a: float = -0.75,
                  exclude_outside: bool = False, antialias: bool = False, nearest_mode: str = "round_prefer_floor",
                  roi: tuple[float, float] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(W, extrapolated): output position o of the axis is ``sum_i W[o, i] x[i]``, or the
    extrapolation value where ``extrapolated[o]`` (tf_crop_and_resize only); the spec's arithmetic
    (``onnx/reference/ops/op_resize.py``) on exact rational source coordinates
    (:func:`cann.lowering.resize.source_coords`: exact integers and ties stay exact), the
    coefficients in float64."""
    w = np.zeros((out_size, in_size), np.float64)
    extrap = np.zeros(out_size, np.bool_)
    for o, x in enumerate(source_coords(ctm, in_size, out_size, scale, roi)):
        xi = math.floor(x)
        ratio = Fraction(1) if x == xi else x - xi
        if mode == "cubic":
            c = _cubic_coeffs_aa(float(ratio), scale, cubic_a) if antialias else _cubic_coeffs(float(ratio), cubic_a)
        elif mode == "linear":
            c = _linear_coeffs_aa(float(ratio), scale) if antialias else np.array([1 - float(ratio), float(ratio)])
        else:  # nearest: the upper of the pair [floor, floor + 1] (ratio 1 at an integer: the left pair)
            up = x == xi or nearest_upper(ratio, nearest_mode)
            c = np.array([0.0, 1.0] if up else [1.0, 0.0])
        c = np.asarray(c, np.float64)
        n = len(c)
        pad = (n + 1) // 2
        xp = x + pad
        pp = math.floor(xp)
        frac = xp - pp
        if n % 2 == 0:
            off = -(n // 2) if frac == 0 else -(n // 2) + 1
        else:
            off = -((n - 1) // 2) + (0 if frac <= Fraction(1, 2) else 1)
        idx = pp + off + np.arange(n) - pad
        if exclude_outside:
            c = np.where((idx < 0) | (idx >= in_size), 0.0, c)
            tot = c.sum()
            c = c / (tot if tot != 0 else 1.0)
        if ctm == "tf_crop_and_resize" and (x < 0 or x > in_size - 1):
            extrap[o] = True
            continue
        np.add.at(w[o], np.clip(idx, 0, in_size - 1), c)
    return w, extrap


def _matrix_resize_needed(a, mode: str, ctm: str, rank: int, axes_moved: bool) -> bool:
    return (mode == "cubic" or int(a.get("antialias", 0)) != 0 or int(a.get("exclude_outside", 0)) != 0
            or ctm == "tf_crop_and_resize" or rank != 4 or axes_moved)


@_converter("Resize")
def _resize_nd(imp, node, name, a):
    x = _float_input(imp, node)
    s = g._shape(x)
    r = len(s)
    mode = _str_attr(a, "mode", "nearest")
    out = list(_out_type(imp, node).get_shape())
    if imp.opset < 11:
        return _resize2d(imp, node, name, a)
    ctm = _str_attr(a, "coordinate_transformation_mode", "half_pixel")
    if not _matrix_resize_needed(a, mode, ctm, r, r == 4 and out[:2] != list(s[:2])):
        return _resize2d(imp, node, name, a)
    if mode not in ("nearest", "linear", "cubic"):
        raise _bad_attr(node, "mode", mode)
    if ctm not in (*g.RESIZE_COORD_MODES, "tf_crop_and_resize") or (ctm == "half_pixel_symmetric" and imp.opset < 19):
        raise _bad_attr(node, "coordinate_transformation_mode", ctm)
    nearest_mode = _str_attr(a, "nearest_mode", "round_prefer_floor")
    if nearest_mode not in g.RESIZE_NEAREST_MODES:
        raise _bad_attr(node, "nearest_mode", nearest_mode)
    antialias = int(a.get("antialias", 0))
    if antialias and mode == "nearest":
        raise _bad_attr(node, "antialias", antialias, "not defined for mode='nearest'")
    axes = [int(v) for v in a.get("axes", range(r))]
    if any(not -r <= v < r for v in axes) or len({v % r for v in axes}) != len(axes):
        raise _bad_attr(node, "axes", axes)
    axes = [v % r for v in axes]
    scales = _const_input(imp, node, 2, "scales")
    sizes = _const_input(imp, node, 3, "sizes")
    if scales is not None and scales.size == 0:
        scales = None
    if sizes is not None and sizes.size == 0:
        sizes = None
    full_scale = resize_scales(node, a, s, axes, scales, sizes)
    roi_full = None
    if ctm == "tf_crop_and_resize":
        roi = _const_input(imp, node, 1, "roi")
        if roi is None or roi.size != 2 * len(axes):
            raise _bad_attr(node, "coordinate_transformation_mode", ctm, "needs a constant roi of 2 values per axis")
        rv = [float(v) for v in roi.reshape(-1)]
        roi_full = [(0.0, 1.0)] * r
        for j, ax in enumerate(axes):
            roi_full[ax] = (rv[j], rv[j + len(axes)])
    if 0 in out:
        raise _Unsupported("Resize with an empty result")
    ev = float(a.get("extrapolation_value", 0.0))
    y = x
    cur = list(s)
    # the last axis first (no transpose), then the others, each moved last and back
    for ax in sorted(range(r), key=lambda i: -i):
        roi_ax = roi_full[ax] if roi_full is not None else None
        if math.isclose(full_scale[ax], 1.0) and out[ax] == cur[ax] and (
                roi_ax is None or (math.isclose(roi_ax[0], 0.0) and math.isclose(roi_ax[1], 1.0))):
            continue
        w, extrap = resize_matrix(mode, ctm, cur[ax], out[ax], full_scale[ax], cubic_a=float(a.get("cubic_coeff_a", -0.75)),
                                  exclude_outside=bool(int(a.get("exclude_outside", 0))), antialias=bool(antialias),
                                  nearest_mode=nearest_mode, roi=roi_ax)
        perm = [i for i in range(r) if i != ax] + [ax]
        t = _transpose(imp, name, y, perm)
        ts = list(g._shape(t))
        m = _reshape(imp, name, t, [math.prod(ts[:-1]), ts[-1]])
        m = imp.emit(g.MatMulOp(m, _const(imp, name, w.T, x)), name).results[0]
        if extrap.any():
            m = imp.emit(g.AddOp(m, _const(imp, name, np.where(extrap, ev, 0.0).reshape(1, -1), x)), name).results[0]
        t = _reshape(imp, name, m, ts[:-1] + [out[ax]])
        inv = [perm.index(i) for i in range(r)]
        y = _transpose(imp, name, t, inv)
        cur[ax] = out[ax]
    if list(g._shape(y)) != out:
        raise _Unsupported(f"Resize result shape {list(g._shape(y))} differs from shape inference {out}")
    return [y]
