"""Kernels tile along every axis, so no legal model is refused for its size (issue 11.3): planes,
rows and runs larger than UB are split and partial sums accumulate on chip. Each case compares
with onnxruntime; the sizes cover the old "does not fit in UB" limits (GlobalAveragePool failed
from 90x90 in float16, 64x64 in float32)."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import cann
from cann import testing

MODES = ["force_fp16", "must_keep_origin_dtype"]
TOL = {"force_fp16": 1e-2, "must_keep_origin_dtype": 1e-4}


def _model(op: str, in_shape, out_shape, inits=(), extra_inputs=(), opset=13, **attrs):
    node = helper.make_node(op, ["x", *extra_inputs, *[i.name for i in inits]], ["y"], **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, in_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)], list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _compare(model, mode: str, x=None, spec_reference: bool = False):
    """Compile, run and compare with onnxruntime (with ``spec_reference``, with the ONNX
    specification's ``onnx.reference`` evaluator instead)."""
    x = x if x is not None else testing.random_inputs(model)
    if spec_reference:
        from onnx.reference import ReferenceEvaluator

        ref = ReferenceEvaluator(model).run(None, x)[0]
    else:
        ref = testing.run_onnxruntime(model, x)["y"]
    compiled = cann.compile(model, precision_mode=mode)
    y = compiled.run(x)["y"]
    assert y.shape == ref.shape
    err = np.linalg.norm(y - ref) / max(np.linalg.norm(ref), 1e-30)
    assert err <= TOL[mode], err
    return compiled


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("size", [1, 7, 64, 89, 90, 91, 112, 128, 256])
def test_global_average_pool_any_plane(mode, size):
    _compare(_model("GlobalAveragePool", [1, 20, size, size], [1, 20, 1, 1]), mode)


@pytest.mark.parametrize("mode", MODES)
def test_global_average_pool_sums_in_float32(mode):
    """256x256 positive values: a float16 sum of a plane would overflow (65536 > 65504)."""
    m = _model("GlobalAveragePool", [2, 3, 256, 256], [2, 3, 1, 1])
    x = {"x": np.random.default_rng(1).uniform(0.9, 1.5, (2, 3, 256, 256)).astype(np.float32)}
    _compare(m, mode, x)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op,in_shape,out_shape,attrs", [
    # one output row of 70000 positions: column tiles
    ("MaxPool", [1, 16, 3, 70000], [1, 16, 3, 70000], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    # border windows with fewer taps (a divisor table read per column tile)
    ("AveragePool", [1, 20, 5, 40001], [1, 20, 3, 20001],
     {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": 0}),
    # one output position's window (9000 x 2 taps) larger than UB: window blocks accumulate
    ("AveragePool", [1, 16, 9000, 3], [1, 16, 1, 2], {"kernel_shape": [9000, 2]}),
    ("MaxPool", [1, 16, 9000, 3], [1, 16, 1, 2], {"kernel_shape": [9000, 2]}),
    # a wide window: blocks of window columns
    ("MaxPool", [1, 16, 2, 90000], [1, 16, 1, 2], {"kernel_shape": [2, 89999], "dilations": [1, 1]}),
])
def test_pool_tiles_rows_columns_and_windows(mode, op, in_shape, out_shape, attrs):
    _compare(_model(op, in_shape, out_shape, **attrs), mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", [[2, 100000], [3, 200001]])
def test_softmax_long_rows(mode, shape):
    """Rows longer than UB (or than float16 can count): three chunked passes per row."""
    _compare(_model("Softmax", shape, shape, axis=-1), mode)


@pytest.mark.parametrize("mode", MODES)
def test_fused_softmax_long_rows(mode):
    """An elementwise prologue fused into a long-row Softmax runs again in every pass."""
    shape = [2, 150000]
    nodes = [helper.make_node("Mul", ["x", "s"], ["m"]), helper.make_node("Add", ["m", "x2"], ["a"]),
             helper.make_node("Softmax", ["a"], ["y"], axis=-1)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in ("x", "x2")],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
                          [numpy_helper.from_array(np.array(0.5, np.float32), "s")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    compiled = _compare(m, mode)
    assert any(k.name.startswith("fused_softmax") for k in compiled.om.kernels)


@pytest.mark.parametrize("mode", MODES)
def test_softmax_flat_long_row_float16_sum(mode):
    """70000 equal values: the sum of exp(0) = 70000 exceeds float16's range; partial sums of
    chunks that cannot overflow accumulate in float32."""
    shape = [1, 70000]
    x = {"x": np.full(shape, 0.25, np.float32)}
    _compare(_model("Softmax", shape, shape, axis=-1), mode, x)


def _resize_model(shape, scales, **attrs):
    out = [shape[0], shape[1], int(shape[2] * scales[0]), int(shape[3] * scales[1])]
    inits = [numpy_helper.from_array(np.array([1, 1, *scales], np.float32), "scales")]
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape,scales,attrs", [
    ([1, 16, 2, 6000], (2.0, 2.0), {"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
                                    "nearest_mode": "floor"}),
    ([1, 20, 3, 5000], (2.0, 1.5), {"mode": "linear", "coordinate_transformation_mode": "half_pixel"}),
    ([1, 16, 4, 9000], (0.5, 1.0), {"mode": "linear", "coordinate_transformation_mode": "half_pixel"}),
])
def test_resize_output_rows_wider_than_ub(mode, shape, scales, attrs):
    """Output rows whose buffers exceed UB are built in column segments. The oracle is the
    specification's reference: onnxruntime 1.32 computes linear half_pixel source coordinates in
    float32, 1.3e-4 relative L2 off the specification at 7500 output columns (this kernel is 5e-8
    from the reference in float32)."""
    _compare(_resize_model(shape, scales, **attrs), mode, spec_reference=True)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("strides,w_", [([1, 1], 4000), ([2, 2], 2000)])
def test_conv_transpose_input_rows_wider_than_ub(mode, strides, w_):
    """The stride-dilating scatter copies an input row wider than UB (4000 x 16 channels: 2 x 64000
    bytes of its two buffers in float16; 2000 x 16 in float32) in pieces. The widths keep the
    convolution's output row (4001) within what the cube kernel takes."""
    w = numpy_helper.from_array((np.random.default_rng(2).standard_normal((16, 4, 1, 2)) / 4).astype(np.float32), "w")
    h_ = 2
    out = [1, 4, (h_ - 1) * strides[0] + 1, (w_ - 1) * strides[1] + 2]
    _compare(_model("ConvTranspose", [1, 16, h_, w_], out, inits=[w], strides=strides), mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("runtime", [True, False])
def test_gather_rows_longer_than_ub(mode, runtime):
    """Gather of 200000-element rows (runtime indices: register-addressed copies; constant ones:
    fixed bursts), each row in UB-sized pieces; axis 1 with an outer axis of 2."""
    data = np.random.default_rng(3).standard_normal((2, 5, 200000)).astype(np.float32)
    idx = np.array([4, -1, 0], np.int64)
    d = numpy_helper.from_array(data, "d")
    if runtime:
        node = helper.make_node("Gather", ["d", "x"], ["y"], axis=1)
        g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.INT64, [3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 200000])], [d])
        x = {"x": idx}
    else:
        node = helper.make_node("Gather", ["x", "i"], ["y"], axis=1)
        g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5, 200000])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 200000])],
                              [numpy_helper.from_array(idx, "i")])
        x = {"x": data}
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    _compare(m, mode, x)
