"""Wrong numbers and degenerate shapes in pooling, reductions, Resize and Conv import (issue 10,
items 2, 3, 4, 9). Compiled, run on the simulator, compared with onnxruntime (the reference
evaluator or the spec in numpy where a test says why)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import cann
from cann.errors import CannError
from cann.testing import run_onnxruntime

F = TensorProto.FLOAT
FP32 = "must_keep_origin_dtype"


def _model(nodes, inputs, outputs, inits=None, opset=22):
    """A model with onnx's inferred shapes written into it (as exporters do): for the ceil_mode
    pools those are the too-long ones, which the importer must not trust."""
    nodes = nodes if isinstance(nodes, list) else [nodes]
    g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info(n, F, s) for n, s in inputs],
                          [helper.make_tensor_value_info(o, F, None) for o in outputs],
                          [numpy_helper.from_array(np.asarray(a), n) for n, a in (inits or {}).items()])
    return onnx.shape_inference.infer_shapes(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]))


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def _rel_l2(out, ref):
    out, ref = np.asarray(out, np.float64), np.asarray(ref, np.float64)
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30))


def _run(model, feeds, mode=FP32):
    return cann.compile(model, precision_mode=mode).run(feeds)


def _check_ort(model, feeds, mode=FP32, tol=None):
    ref = run_onnxruntime(model, feeds)
    out = _run(model, feeds, mode)
    for name, r in ref.items():
        assert out[name].shape == r.shape, name
        assert np.isfinite(out[name]).all(), name
        err = _rel_l2(out[name], r)
        assert err <= (tol or (1e-4 if mode == FP32 else 1e-2)), f"{name}: rel L2 {err:.3g}"
    return out


# ---------------------------------------------------------------------------------------------
# item 2: ceil_mode drops a last window that would start inside the end padding

# (input shape, attributes); in each, at least one axis has a window that the ceil formula adds
# but that starts in the end padding (marked), so the spec's output is one shorter there
CEIL_POOLS = [
    # the issue's example: last axis 5, pads 1+1, k 3, s 3: ceil(4/3)+1 = 3 windows, the third at
    # padded index 6 = 5 + 1 -> dropped; output [1, 2, 2, 3, 2]
    ((1, 2, 3, 6, 5), dict(kernel_shape=[3, 3, 3], strides=[3, 3, 3], pads=[1] * 6)),
    ((1, 2, 5), dict(kernel_shape=[3], strides=[3], pads=[1, 1])),  # 1-D, dropped
    ((2, 3, 6, 5), dict(kernel_shape=[3, 3], strides=[3, 3], pads=[1, 1, 1, 1])),  # W dropped, H kept
    ((1, 2, 5, 8), dict(kernel_shape=[3, 2], strides=[3, 2], pads=[1, 0, 1, 1])),  # both dropped
    ((1, 2, 6), dict(kernel_shape=[2], strides=[3], pads=[0, 1], dilations=[2])),  # dilated, dropped
    ((1, 1, 4, 4, 8), dict(kernel_shape=[2, 2, 3], strides=[2, 2, 3], pads=[0, 1, 1, 0, 1, 1])),  # D, H kept
    ((1, 2, 3), dict(kernel_shape=[1], strides=[3])),  # no pads: the ceil window starts past the end
]


POOL_KINDS = {"max": ("MaxPool", {}), "avg": ("AveragePool", {"count_include_pad": 0}),
              "avg_cip": ("AveragePool", {"count_include_pad": 1}), "lp2": ("LpPool", {"p": 2}),
              "lp1": ("LpPool", {"p": 1})}
# LpPool has ceil_mode from opset 18, AveragePool dilations from opset 19
CEIL_CASES = [pytest.param(POOL_KINDS[k][0], POOL_KINDS[k][1], shape, attrs, opset, id=f"{k}-{shape}-{opset}")
              for k in POOL_KINDS for shape, attrs in CEIL_POOLS for opset in (11, 19, 22)
              if not (k.startswith("lp") and opset < 18)
              and not (k.startswith("avg") and opset < 19 and "dilations" in attrs)]


@pytest.mark.parametrize("op,extra,shape,attrs,opset", CEIL_CASES)
def test_pool_ceil_mode_drops_window_in_end_padding(op, extra, shape, attrs, opset):
    m = _model(helper.make_node(op, ["x"], ["y"], ceil_mode=1, **attrs, **extra), [("x", shape)], ["y"], opset=opset)
    ref = run_onnxruntime(m, {"x": _x(*shape)})["y"]
    # onnxruntime and the reference evaluator drop the window at every opset; onnx's shape
    # inference (1.23) applies the rule from opset 22 only
    from cann.frontend.onnx_spatial import pool_output_size

    declared = [d.dim_value for d in m.graph.output[0].type.tensor_type.shape.dim]
    assert (list(ref.shape) == declared) == (opset >= 22)
    r = len(attrs["kernel_shape"])
    pads, st, dil = attrs.get("pads", [0] * 2 * r), attrs["strides"], attrs.get("dilations", [1] * r)
    assert list(ref.shape[2:]) == [pool_output_size(shape[2 + i], attrs["kernel_shape"][i], st[i], pads[i], pads[r + i],
                                                    dil[i], True) for i in range(r)]
    assert ReferenceEvaluator(m).run(None, {"x": _x(*shape)})[0].shape == ref.shape
    _check_ort(m, {"x": _x(*shape)})


def test_pool_ceil_mode_issue_example_shape_and_fp16():
    """MaxPool 3-D, kernel 3, stride 3, pads 1, ceil_mode=1 on [1, 2, 3, 6, 5] -> [1, 2, 2, 3, 2];
    the dropped window came out as -65504 in fp16."""
    shape = (1, 2, 3, 6, 5)
    m = _model(helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3] * 3, strides=[3] * 3, pads=[1] * 6,
                                ceil_mode=1), [("x", shape)], ["y"], opset=19)
    out = _check_ort(m, {"x": _x(*shape)}, mode="force_fp16")
    assert out["y"].shape == (1, 2, 2, 3, 2)
    assert out["y"].min() > -10


def test_pool_ceil_mode_model_declaring_spec_shapes_is_accepted():
    """A model that declares the spec's shapes (as an exporter computing them the spec's way does)
    for the corrected pool and a tensor after it: onnx's strict inference disagrees with them, but
    the model is valid (onnxruntime runs it); it was refused with 'ONNX shape inference failed'."""
    nodes = [helper.make_node("MaxPool", ["x"], ["a"], kernel_shape=[3] * 3, strides=[3] * 3, pads=[1] * 6,
                              ceil_mode=1),
             helper.make_node("Relu", ["a"], ["y"])]
    g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", F, [1, 2, 3, 6, 5])],
                          [helper.make_tensor_value_info("y", F, [1, 2, 2, 3, 2])],
                          value_info=[helper.make_tensor_value_info("a", F, [1, 2, 2, 3, 2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    x = _x(1, 2, 3, 6, 5)
    out = _run(m, {"x": x})
    ref = ReferenceEvaluator(m).run(None, {"x": x})[0]
    assert out["y"].shape == ref.shape == (1, 2, 2, 3, 2)
    np.testing.assert_allclose(out["y"], ref, rtol=1e-6, atol=1e-6)


def test_pool_ceil_mode_chain_reinfers_downstream_shapes():
    """A corrected pool feeds a Relu and a second ceil_mode pool whose own drop depends on the
    corrected length (and the model declares onnx's too-long shapes for all of them)."""
    nodes = [helper.make_node("MaxPool", ["x"], ["a"], kernel_shape=[3, 3], strides=[3, 3], pads=[1] * 4, ceil_mode=1),
             helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("AveragePool", ["b"], ["c"], kernel_shape=[1, 1], strides=[2, 2], ceil_mode=1),
             helper.make_node("Shape", ["c"], ["s"]),
             helper.make_node("Cast", ["s"], ["sf"], to=F),
             helper.make_node("ReduceSum", ["c", "s1"], ["d"], keepdims=1),
             helper.make_node("Gather", ["sf", "i3"], ["sf_last"], axis=0),
             helper.make_node("Add", ["d", "sf_last"], ["y"])]
    # W: 11 -> MaxPool ceil((11+2-3)/3)+1 = 5, the fifth at 12 = 11 + 1 dropped -> 4; then a 1-wide
    # window with stride 2: ceil(3/2)+1 = 3, the third at 4 = 4 + 0 -> dropped -> 2 (onnx: 5 -> 3)
    m = _model(nodes, [("x", (1, 2, 5, 11))], ["y", "c"],
               inits={"s1": np.array([3], np.int64), "i3": np.array(3, np.int64)}, opset=19)
    x = _x(1, 2, 5, 11)
    out = _run(m, {"x": x})
    # onnxruntime's optimized graph folds Shape(c) from onnx's too-long inferred shape (it gives 3
    # for the last dimension; with optimizations off, 2): the reference evaluator is the oracle
    ref = ReferenceEvaluator(m).run(None, {"x": x})
    assert out["c"].shape == ref[1].shape == (1, 2, 1, 2)
    np.testing.assert_allclose(out["c"], ref[1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["y"], ref[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["y"] - out["c"].sum(axis=3, keepdims=True), 2.0, rtol=1e-5)


def test_pool_output_size_rule():
    from cann.frontend.onnx_spatial import pool_output_size

    assert pool_output_size(5, 3, 3, 1, 1, 1, True) == 2
    assert pool_output_size(6, 3, 3, 1, 1, 1, True) == 3
    assert pool_output_size(5, 3, 3, 1, 1, 1, False) == 2
    assert pool_output_size(4, 1, 3, 0, 0, 1, True) == 2
    assert pool_output_size(2, 5, 1, 1, 1, 1, False) == 0


# ---------------------------------------------------------------------------------------------
# item 3: reductions over no axis keep their elementwise part

REDUCE_OPS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
              "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]


def _reduce_input(op, shape):
    """Positive for ReduceLogSum, of both signs (none near 0) otherwise; a negative scalar at rank 0."""
    if not shape:
        return np.asarray(1.7 if op == "ReduceLogSum" else -1.3, np.float32)
    x = _x(*shape, seed=3)
    x = np.abs(x) + 0.5 if op == "ReduceLogSum" else np.where(np.abs(x) < 0.3, 0.7, x)
    return np.asarray(x, np.float32)


def _reduce_model(op, shape, axes_input, opset, **attrs):
    ins, inits = ["x"], {}
    if axes_input is not None:
        ins.append("axes")
        inits["axes"] = np.asarray(axes_input, np.int64)
    return _model(helper.make_node(op, ins, ["y"], **attrs), [("x", shape)], ["y"], inits=inits, opset=opset)


@pytest.mark.parametrize("op", REDUCE_OPS)
@pytest.mark.parametrize("axes_input", [None, []], ids=["no_axes_input", "empty_axes"])
def test_reduce_noop_with_empty_axes(op, axes_input):
    """ReduceSumSquare [2, 3, 4], axes=[], noop_with_empty_axes=1 is x*x, not x (onnx PR 7394;
    onnxruntime and the reference evaluator agree)."""
    shape = (2, 3, 4)
    x = _reduce_input(op, shape)
    m = _reduce_model(op, shape, axes_input, 18, noop_with_empty_axes=1, keepdims=0)
    ref = run_onnxruntime(m, {"x": x})["y"]
    np.testing.assert_allclose(ReferenceEvaluator(m).run(None, {"x": x})[0], ref, rtol=1e-6)
    want = {"ReduceSumSquare": x * x, "ReduceLogSum": np.log(x), "ReduceL1": np.abs(x), "ReduceL2": np.abs(x)}
    np.testing.assert_allclose(ref, want.get(op, x), rtol=1e-6)
    out = _run(m, {"x": x})["y"]
    assert out.shape == shape
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("op", REDUCE_OPS)
@pytest.mark.parametrize("opset,axes_input,attrs", [
    (11, None, {}), (18, None, {}), (18, None, {"noop_with_empty_axes": 1}), (18, [], {"keepdims": 0})],
    ids=["opset11", "opset18", "opset18_noop", "opset18_empty_axes"])
def test_reduce_rank0(op, opset, axes_input, attrs):
    """A rank-0 input has no axis to reduce: the result is the elementwise part of the reduction.
    onnxruntime is the oracle, checked against the spec in numpy (the reference evaluator of onnx
    1.23.2 fails on a rank-0 ReduceLogSum / ReduceLogSumExp: its result is a numpy scalar)."""
    x = _reduce_input(op, ())
    m = _reduce_model(op, (), axes_input, opset, **attrs)
    ref = run_onnxruntime(m, {"x": x})["y"]
    want = {"ReduceSumSquare": x * x, "ReduceLogSum": np.log(x), "ReduceL1": np.abs(x), "ReduceL2": np.abs(x)}
    np.testing.assert_allclose(ref, want.get(op, x), rtol=1e-6)
    out = _run(m, {"x": x})["y"]
    assert out.shape == ref.shape == ()
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("op", REDUCE_OPS)
def test_reduce_empty_axes_without_noop_reduces_all(op):
    shape = (2, 3, 4)
    x = _reduce_input(op, shape)
    _check_ort(_reduce_model(op, shape, [], 18, keepdims=1), {"x": x})


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("value", [True, False])
def test_reduce_bool_rank0(op, value):
    g = helper.make_graph([helper.make_node(op, ["x"], ["y"])], "t",
                          [helper.make_tensor_value_info("x", TensorProto.BOOL, [])],
                          [helper.make_tensor_value_info("y", TensorProto.BOOL, [])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
    x = np.asarray(value)
    ref = run_onnxruntime(m, {"x": x})["y"]
    out = _run(m, {"x": x})["y"]
    assert out.shape == ref.shape == () and out.dtype == np.bool_
    assert bool(out) == bool(ref) == value


# ---------------------------------------------------------------------------------------------
# item 4: Resize source coordinates that are exact integers (or exact halves) stay exact
#
# The oracle is the spec's formulas in exact rational arithmetic (below): onnxruntime computes in
# float32 and the reference evaluator in float64, and each lands on the wrong side of some exact
# coordinate (half_pixel_symmetric, input 9, scale 2.5, nearest ceil: the coordinate of output 13
# is exactly 5, the reference evaluator reads 6; of output 18 exactly 7, cann read 8).

def _spec_coords(ctm, n_in, n_out, scale, roi=None):
    h = Fraction(1, 2)
    out_w = scale * n_in
    xs = []
    for y in map(Fraction, range(n_out)):
        if ctm == "half_pixel":
            x = (y + h) / scale - h
        elif ctm == "pytorch_half_pixel":
            x = (y + h) / scale - h if n_out > 1 else Fraction(0)
        elif ctm == "half_pixel_symmetric":
            x = Fraction(n_in, 2) * (1 - n_out / out_w) + (y + h) / scale - h
        elif ctm == "align_corners":
            x = y * (n_in - 1) / (out_w - 1)
        elif ctm == "asymmetric":
            x = y / scale
        else:  # tf_crop_and_resize
            x = y * (roi[1] - roi[0]) * (n_in - 1) / (out_w - 1) + roi[0] * (n_in - 1)
        xs.append(x)
    return xs


def _spec_axis(mode, nearest_mode, xs, n_in):
    """[n_out, n_in] weights of one axis by the spec, exactly; None rows are extrapolated."""
    w = np.zeros((len(xs), n_in))
    clamp = lambda i: min(max(i, 0), n_in - 1)
    for o, x in enumerate(xs):
        fl = math.floor(x)
        r = x - fl
        if mode == "nearest":
            up = {"round_prefer_floor": r > Fraction(1, 2), "round_prefer_ceil": r >= Fraction(1, 2),
                  "floor": False, "ceil": True}[nearest_mode] and r != 0
            w[o, clamp(fl + 1 if up else fl)] = 1.0
        else:
            w[o, clamp(fl)] += float(1 - r)
            w[o, clamp(fl + 1)] += float(r)
    return w


def _ties(xs):
    return sum(1 for x in xs if (2 * x).denominator == 1)


# (coordinate mode, input length, ("scales", s) | ("sizes", n)): every case has exact integer or
# exact half coordinates (asserted)
TIE_CASES = [
    ("half_pixel_symmetric", 9, ("scales", 2.5)),   # the issue's case: integers at 13, 18
    ("half_pixel_symmetric", 8, ("scales", 0.75)),
    ("half_pixel_symmetric", 6, ("sizes", 3)),     # as half_pixel: 2y + 1/2
    ("half_pixel", 8, ("scales", 0.5)),             # every coordinate a half
    ("half_pixel", 9, ("scales", 2.5)),
    ("half_pixel", 8, ("scales", 1.25)),
    ("pytorch_half_pixel", 6, ("scales", 0.5)),
    ("pytorch_half_pixel", 7, ("sizes", 15)),
    ("align_corners", 5, ("sizes", 9)),             # y / 2: integers and halves
    ("align_corners", 7, ("sizes", 10)),            # y * 2 / 3: integers every third
    ("asymmetric", 4, ("scales", 2.5)),
    ("asymmetric", 5, ("scales", 4.0)),
    ("asymmetric", 7, ("sizes", 3)),                # y * 7 / 3
]
NEAREST = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]


def _resize_case(ctm, n_in, how, rank, mode, nearest_mode):
    shape = (1, 2, n_in, n_in) if rank == 4 else (2, 3, n_in)
    nax = 2 if rank == 4 else 1
    if how[0] == "scales":
        scale = Fraction(float(np.float32(how[1])))
        n_out = math.floor(n_in * scale)
        arr = {"scales": np.array([1.0] * (rank - nax) + [how[1]] * nax, np.float32)}
        ins = ["x", "", "scales"]
    else:
        n_out = how[1]
        scale = Fraction(n_out, n_in)
        arr = {"sizes": np.array(list(shape[:rank - nax]) + [n_out] * nax, np.int64)}
        ins = ["x", "", "", "sizes"]
    node = helper.make_node("Resize", ins, ["y"], mode=mode, coordinate_transformation_mode=ctm,
                            nearest_mode=nearest_mode)
    m = _model(node, [("x", shape)], ["y"], inits=arr, opset=19)
    xs = _spec_coords(ctm, n_in, n_out, scale)
    assert _ties(xs) > 0
    w = _spec_axis(mode, nearest_mode, xs, n_in)
    x = _x(*shape, seed=5)
    ref = np.einsum("...i,oi->...o", x.astype(np.float64), w)
    if rank == 4:
        ref = np.einsum("nchw,oh->ncow", ref, w)
    return m, x, ref


@pytest.mark.parametrize("rank", [4, 3], ids=["4d_kernel", "3d_matrix"])
@pytest.mark.parametrize("ctm,n_in,how", TIE_CASES, ids=[f"{c[0]}-{c[1]}-{c[2][0]}{c[2][1]}" for c in TIE_CASES])
@pytest.mark.parametrize("nearest_mode", NEAREST)
def test_resize_nearest_exact_ties(nearest_mode, ctm, n_in, how, rank):
    m, x, ref = _resize_case(ctm, n_in, how, rank, "nearest", nearest_mode)
    out = _run(m, {"x": x})["y"]
    assert out.shape == ref.shape
    np.testing.assert_array_equal(out, ref.astype(np.float32))


@pytest.mark.parametrize("rank", [4, 3], ids=["4d_kernel", "3d_matrix"])
@pytest.mark.parametrize("ctm,n_in,how", TIE_CASES, ids=[f"{c[0]}-{c[1]}-{c[2][0]}{c[2][1]}" for c in TIE_CASES])
def test_resize_linear_exact_ties(ctm, n_in, how, rank):
    m, x, ref = _resize_case(ctm, n_in, how, rank, "linear", "round_prefer_floor")
    out = _run(m, {"x": x})["y"]
    assert out.shape == ref.shape
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("n_out", [5, 9, 17])
@pytest.mark.parametrize("nearest_mode", NEAREST)
def test_resize_tf_crop_and_resize_exact_ties(nearest_mode, n_out):
    """roi [0.25, 0.75] of 9 samples: x = y * 4 / (n_out - 1) + 2 (integers, halves, quarters)."""
    roi = np.array([0.25, 0.75], np.float32)
    node = helper.make_node("Resize", ["x", "roi", "", "sizes"], ["y"], mode="nearest",
                            coordinate_transformation_mode="tf_crop_and_resize", nearest_mode=nearest_mode, axes=[2])
    m = _model(node, [("x", (2, 3, 9))], ["y"], inits={"roi": roi, "sizes": np.array([n_out], np.int64)}, opset=19)
    xs = _spec_coords("tf_crop_and_resize", 9, n_out, Fraction(n_out, 9), roi=(Fraction(1, 4), Fraction(3, 4)))
    assert _ties(xs) > 0
    x = _x(2, 3, 9, seed=6)
    ref = np.einsum("...i,oi->...o", x.astype(np.float64), _spec_axis("nearest", nearest_mode, xs, 9))
    np.testing.assert_array_equal(_run(m, {"x": x})["y"], ref.astype(np.float32))


def test_resize_issue_example_matches_onnxruntime():
    """half_pixel_symmetric, ceil, width 9, scale 2.5: output 18 reads source 7 (was 8); here
    onnxruntime is exact on every position."""
    m, x, ref = _resize_case("half_pixel_symmetric", 9, ("scales", 2.5), 4, "nearest", "ceil")
    x = np.broadcast_to(np.arange(9, dtype=np.float32), (1, 2, 9, 9)).copy()
    out = _run(m, {"x": x})["y"]
    np.testing.assert_array_equal(out, run_onnxruntime(m, {"x": x})["y"])
    assert out[0, 0, 0, 18] == 7 and out[0, 0, 0, 13] == 5


# ---------------------------------------------------------------------------------------------
# item 9: a window longer than the padded input is a one-line error naming the node

def _w(*shape):
    return {"w": np.ones(shape, np.float32)}


# (node, input shape, initializers, message after "error: <node name>: ")
DEGENERATE = [
    (helper.make_node("Conv", ["x", "w"], ["y"], name="conv_0x0"), (1, 2, 4, 4), _w(3, 2, 5, 5),
     "Conv convolves the feature map away: its 5x5 window is larger than the padded input 4x4 (input 4x4, "
     "pads [0, 0, 0, 0]), so the output would be 0x0"),
    (helper.make_node("Conv", ["x", "w"], ["y"], name="conv_neg", pads=[1, 0, 0, 0]), (1, 2, 2, 3), _w(3, 2, 5, 5),
     "Conv convolves the feature map away: its 5x5 window is larger than the padded input 3x3 (input 2x3, "
     "pads [1, 0, 0, 0]), so the output would be -1x-1"),
    (helper.make_node("Conv", ["x", "w"], ["y"], name="conv1d", dilations=[2]), (1, 2, 6), _w(3, 2, 4),
     "Conv convolves the feature map away: its 4 window (extent 7 with dilations 2) is larger than the padded "
     "input 6 (input 6, pads [0, 0]), so the output would be 0"),
    (helper.make_node("Conv", ["x", "w"], ["y"], name="conv3d"), (1, 2, 4, 6, 6), _w(3, 2, 5, 3, 3),
     "Conv convolves the feature map away: its 5x3x3 window is larger than the padded input 4x6x6 (input 4x6x6, "
     "pads [0, 0, 0, 0, 0, 0]), so the output would be 0x4x4"),
    (helper.make_node("MaxPool", ["x"], ["y"], name="max2d", kernel_shape=[5, 5]), (1, 2, 3, 3), {},
     "MaxPool pools the feature map away: its 5x5 window is larger than the padded input 3x3 (input 3x3, "
     "pads [0, 0, 0, 0]), so the output would be -1x-1"),
    (helper.make_node("AveragePool", ["x"], ["y"], name="avg2d", kernel_shape=[5, 5], pads=[1, 1, 0, 0]),
     (1, 2, 3, 3), {},
     "AveragePool pools the feature map away: its 5x5 window is larger than the padded input 4x4 (input 3x3, "
     "pads [1, 1, 0, 0]), so the output would be 0x0"),
    (helper.make_node("AveragePool", ["x"], ["y"], name="avg1d", kernel_shape=[5], count_include_pad=1), (1, 2, 3), {},
     "AveragePool pools the feature map away: its 5 window is larger than the padded input 3 (input 3, "
     "pads [0, 0]), so the output would be -1"),
    (helper.make_node("MaxPool", ["x"], ["y"], name="max3d", kernel_shape=[2, 5, 2], strides=[2, 2, 2]),
     (1, 2, 4, 3, 4), {},
     "MaxPool pools the feature map away: its 2x5x2 window is larger than the padded input 4x3x4 (input 4x3x4, "
     "pads [0, 0, 0, 0, 0, 0]), so the output would be 2x0x2"),
    (helper.make_node("LpPool", ["x"], ["y"], name="lp", kernel_shape=[4, 4]), (1, 2, 3, 3), {},
     "LpPool pools the feature map away: its 4x4 window is larger than the padded input 3x3 (input 3x3, "
     "pads [0, 0, 0, 0]), so the output would be 0x0"),
]


def _degenerate_model(node, shape, inits):
    g = helper.make_graph([node], "t", [helper.make_tensor_value_info("x", F, shape)],
                          [helper.make_tensor_value_info("y", F, None)],
                          [numpy_helper.from_array(a, n) for n, a in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    return onnx.shape_inference.infer_shapes(m)  # onnx gives 0 or negative sizes (C++ rounding)


def _cli(*args):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "cann.tools.cann_compile", *map(str, args)],
                          capture_output=True, text=True)


@pytest.mark.parametrize("node,shape,inits,msg", DEGENERATE, ids=[c[0].name for c in DEGENERATE])
def test_window_larger_than_padded_input(node, shape, inits, msg, tmp_path):
    m = _degenerate_model(node, shape, inits)
    with pytest.raises(CannError) as e:
        cann.compile(m)
    assert str(e.value) == f"error: {node.name}: {msg}"
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    r = _cli(p, "-o", tmp_path / "m.om")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.splitlines() == [f"error: {node.name}: {msg}"]
    assert not (tmp_path / "m.om").exists()


def test_network_pooling_the_map_away_names_the_pool(tmp_path):
    """A small input on a network that pools it away (light ResNet-50 on 8x8 and 64x64: the final
    7x7 AveragePool sees a 1x1 / 2x2 map): one line naming that node and the cause (it was 'result
    shape 1x256x0x0 does not match expected 1x256x-1x-1' on another node)."""
    from cann.testing import test_model

    m = test_model("resnet50")
    dims = m.graph.input[0].type.tensor_type.shape.dim
    dims[2].dim_param, dims[3].dim_param = "H", "W"
    del m.graph.value_info[:]
    pool = next(n for n in m.graph.node if n.op_type == "AveragePool")
    name = m.graph.input[0].name
    for hw, side in ((8, 1), (64, 2)):
        with pytest.raises(CannError) as e:
            cann.compile(m, input_shape={name: (1, 3, hw, hw)})
        assert str(e.value) == (f"error: {pool.name}: AveragePool pools the feature map away: its 7x7 window is "
                                f"larger than the padded input {side}x{side} (input {side}x{side}, pads [0, 0, 0, 0]), "
                                f"so the output would be {side - 6}x{side - 6}")
    p = tmp_path / "r50.onnx"
    onnx.save(m, p)
    r = _cli(p, "--input_shape", f"{name}:1,3,8,8", "-o", tmp_path / "r50.om")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.splitlines() == [f"error: {pool.name}: AveragePool pools the feature map away: its 7x7 window is "
                                     "larger than the padded input 1x1 (input 1x1, pads [0, 0, 0, 0]), so the output "
                                     "would be -5x-5"]
    assert not (tmp_path / "r50.om").exists()


def test_negative_inferred_dimension_is_an_error():
    """ConvTranspose with pads larger than its full output: onnx infers [1, 3, -2, -2]."""
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="ct", pads=[3, 3, 3, 3])
    m = _degenerate_model(node, (1, 2, 2, 2), _w(2, 3, 3, 3))
    with pytest.raises(CannError) as e:
        cann.compile(m)
    assert str(e.value) == "error: ct: shape inference gave tensor 'y' a negative dimension: [1, 3, -2, -2]"


def test_resize_scale_of_sizes_is_exact():
    """A scale that is a ratio of sizes (float64 out / in, also another axis's under
    keep_aspect_ratio_policy) is that ratio exactly; a float32 scales value is its own exact value."""
    from cann.lowering.resize import exact_scale, source_coords

    assert exact_scale(7 / 6) == Fraction(7, 6) and exact_scale(22 / 9) == Fraction(22, 9)
    assert exact_scale(2.5) == Fraction(5, 2)
    f32 = float(np.float32(0.6))
    assert exact_scale(f32) == Fraction(f32) != Fraction(3, 5)
    # align_corners 4 -> 7 at scale 7/6 (not 7/4: the other axis's): x = y * 3 / (14/3 - 1) = 9y / 11
    assert source_coords("align_corners", 4, 4, 7 / 6) == [Fraction(9 * y, 11) for y in range(4)]
    # half_pixel 6 -> 7: x = (y + 1/2) * 6/7 - 1/2 = (12y - 1) / 14: y = 3 is exactly 5/2
    assert source_coords("half_pixel", 6, 7, 7 / 6)[3] == Fraction(5, 2)


@pytest.mark.parametrize("nearest_mode", NEAREST)
def test_resize_keep_aspect_ratio_exact_ties(nearest_mode):
    """sizes [9, 9] of a [4, 7] map with not_larger: both axes scale by 9/7 (4 -> 5 rows, 7 -> 9
    columns); on H, whose own out / in is 5/4, the coordinate (y + 1/2) * 7/9 - 1/2 of row 4 is
    exactly 3 (float64: 2.9999999999999996, read as 2 by floor). Against the spec in exact arithmetic."""
    shape = (1, 2, 4, 7)
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="nearest", nearest_mode=nearest_mode,
                            keep_aspect_ratio_policy="not_larger", axes=[2, 3])
    m = _model(node, [("x", shape)], ["y"], inits={"sizes": np.array([9, 9], np.int64)}, opset=19)
    out_hw = [d.dim_value for d in m.graph.output[0].type.tensor_type.shape.dim][2:]
    assert out_hw == [5, 9]
    scale = Fraction(9, 7)
    xs = [_spec_coords("half_pixel", n_in, n_out, scale) for n_in, n_out in zip(shape[2:], out_hw)]
    assert xs[0][4] == 3
    ws = [_spec_axis("nearest", nearest_mode, c, n_in) for c, n_in in zip(xs, shape[2:])]
    x = _x(*shape, seed=7)
    ref = np.einsum("nchw,oh,pw->ncop", x.astype(np.float64), ws[0], ws[1])
    out = _run(m, {"x": x})["y"]
    np.testing.assert_array_equal(out, ref.astype(np.float32))
