"""Gather (constant and runtime indices, any axis, negative indices, integer data) and Where
(constant condition, scalar and broadcast operands) on the simulated AI Core vs onnxruntime, in
both precision modes; integer model inputs and outputs keep their dtype."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import cann
from cann.errors import CannError
from cann.testing import run_onnxruntime

TOL = {"force_fp16": 1e-2, "must_keep_origin_dtype": 1e-4}
MODES = list(TOL)
rng = np.random.default_rng(0)


def _model(nodes, inputs, outputs, inits=None):
    g = helper.make_graph(
        nodes, "t",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in inputs.items()],
        [helper.make_tensor_value_info(n, t, None) for n, t in outputs],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in (inits or {}).items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    return onnx.shape_inference.infer_shapes(m)


def _check(m, inputs, mode):
    model = cann.compile(m, precision_mode=mode)
    out = model.run(inputs)
    ref = run_onnxruntime(m, inputs)
    for k, r in ref.items():
        y = out[k]
        assert y.shape == r.shape and y.dtype == r.dtype, (k, y.shape, y.dtype, r.shape, r.dtype)
        if r.dtype.kind in "iu":
            np.testing.assert_array_equal(y, r)
        else:
            err = np.linalg.norm((y - r).astype(np.float64)) / max(np.linalg.norm(r.astype(np.float64)), 1e-30)
            assert err <= TOL[mode], err
    return model


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("idt", [np.int64, np.int32])
@pytest.mark.parametrize("axis,dshape,ishape", [(0, (20, 24), (2, 5)), (1, (3, 10, 16), (7,)), (2, (2, 3, 9), (4, 2)),
                                                (-1, (40, 6), ())])
def test_gather_runtime_indices(mode, idt, axis, dshape, ishape):
    n = dshape[axis]
    table = rng.standard_normal(dshape).astype(np.float32)
    idx = rng.integers(-n, n, ishape).astype(idt)
    m = _model([helper.make_node("Gather", ["w", "i"], ["y"], axis=axis)], {"i": idx}, [("y", TensorProto.FLOAT)],
               {"w": table})
    _check(m, {"i": idx}, mode)


@pytest.mark.parametrize("mode", MODES)
def test_gather_runtime_data_constant_indices(mode):
    x = rng.standard_normal((4, 6, 8)).astype(np.float32)
    idx = np.array([[5, -1], [0, 1]], np.int64)  # the run 0, 1 is one burst
    m = _model([helper.make_node("Gather", ["x", "i"], ["y"], axis=1)], {"x": x}, [("y", TensorProto.FLOAT)],
               {"i": idx})
    _check(m, {"x": x}, mode)


def test_gather_integer_data_keeps_dtype():
    x = rng.integers(-1000, 1000, (6, 5)).astype(np.int64)
    i = np.array([2, -1, 0], np.int32)
    m = _model([helper.make_node("Gather", ["x", "i"], ["y"], axis=0)], {"x": x, "i": i}, [("y", TensorProto.INT64)])
    model = _check(m, {"x": x, "i": i}, "force_fp16")
    assert [t.dtype for t in model.inputs] == ["int64", "int32"] or [np.dtype(t.dtype) for t in model.inputs] == [
        np.dtype(np.int64), np.dtype(np.int32)]


def test_runtime_index_out_of_range_is_a_sim_error():
    table = np.zeros((8, 16), np.float32)
    m = _model([helper.make_node("Gather", ["w", "i"], ["y"])], {"i": np.zeros(3, np.int64)},
               [("y", TensorProto.FLOAT)], {"w": table})
    model = cann.compile(m)
    with pytest.raises(CannError, match=r"ld_idx .*index 8 out of range \[-8, 7\]"):
        model.run({"i": np.array([1, 8, 2], np.int64)})


def test_constant_index_out_of_range_is_a_compile_error():
    x = np.zeros((8, 16), np.float32)
    m = _model([helper.make_node("Gather", ["x", "i"], ["y"])], {"x": x}, [("y", TensorProto.FLOAT)],
               {"i": np.array([9], np.int64)})
    with pytest.raises(CannError, match="index 9 out of range"):
        cann.compile(m)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", ["scalar_x", "scalar_y", "tensors", "broadcast_all"])
def test_where_constant_condition(mode, case):
    shape = (2, 3, 16, 16)
    cond = np.triu(np.ones((16, 16), bool), 1)
    x = rng.standard_normal(shape).astype(np.float32)
    inits = {"c": cond}
    inputs = {"x": x}
    if case == "scalar_x":
        inits["a"] = np.array(-np.inf, np.float32)
        ins = ["c", "a", "x"]
    elif case == "scalar_y":
        inits["a"] = np.array(2.5, np.float32)
        ins = ["c", "x", "a"]
    elif case == "tensors":
        inputs["z"] = rng.standard_normal(shape).astype(np.float32)
        ins = ["c", "x", "z"]
    else:
        inputs["z"] = rng.standard_normal((3, 1, 16)).astype(np.float32)
        inits["c"] = rng.random((16, 1)) < 0.5
        ins = ["c", "x", "z"]
    m = _model([helper.make_node("Where", ins, ["w"]), helper.make_node("Softmax", ["w"], ["y"], axis=-1)],
               inputs, [("w", TensorProto.FLOAT), ("y", TensorProto.FLOAT)], inits)
    model = cann.compile(m, precision_mode=mode)
    out = model.run(inputs)
    ref = run_onnxruntime(m, inputs)
    assert not np.isnan(out["y"]).any()  # -inf masked softmax: exact zeros, no NaN
    np.testing.assert_array_equal(np.isinf(out["w"]), np.isinf(ref["w"]))
    fin = np.isfinite(ref["w"])
    np.testing.assert_allclose(out["w"][fin], ref["w"][fin], rtol=TOL[mode] * 2, atol=TOL[mode])
    if case == "scalar_x":
        assert (out["y"][..., cond.nonzero()[0], cond.nonzero()[1]] == 0).all()
    err = np.linalg.norm(out["y"] - ref["y"]) / np.linalg.norm(ref["y"])
    assert err <= TOL[mode]


def test_where_all_true_condition_is_a_copy():
    x = rng.standard_normal((4, 8)).astype(np.float32)
    m = _model([helper.make_node("Where", ["c", "x", "a"], ["y"])], {"x": x}, [("y", TensorProto.FLOAT)],
               {"c": np.ones((4, 8), bool), "a": np.array(0.0, np.float32)})
    _check(m, {"x": x}, "must_keep_origin_dtype")
