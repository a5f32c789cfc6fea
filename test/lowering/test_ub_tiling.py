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


def _compare(model, mode: str, x=None):
    x = x if x is not None else testing.random_inputs(model)
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
