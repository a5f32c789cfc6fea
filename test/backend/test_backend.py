"""cann.backend: the ONNX backend API, and its specialization of models on input shapes and on
the values of inputs the compiler needs as constants (checked against onnx's reference)."""

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import cann.backend as backend
from cann.errors import CannError

F = TensorProto.FLOAT


def _model(nodes, inputs, outputs, opset=18, inits=()):
    g = helper.make_graph(nodes, "m", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _check(model, feeds, rtol=1e-5, atol=1e-6):
    rep = backend.prepare(model)
    got = rep.run(feeds)
    want = ReferenceEvaluator(model).run(None, feeds)
    assert len(got) == len(want)
    for g_, w in zip(got, want):
        assert g_.shape == w.shape and g_.dtype == w.dtype
        np.testing.assert_allclose(g_, w, rtol=rtol, atol=atol)
    return rep


def test_static_model_compiles_in_prepare():
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [helper.make_tensor_value_info("x", F, [2, 3])],
               [helper.make_tensor_value_info("y", F, [2, 3])])
    rep = backend.prepare(m)
    assert rep.model is not None and rep.dynamic_inputs == () and rep.constant_inputs == ()
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    np.testing.assert_array_equal(rep.run([x])[0], np.maximum(x, 0))


def test_runtime_axes_input_is_specialized_per_value():
    m = _model([helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)],
               [helper.make_tensor_value_info("x", F, [2, 3, 4]),
                helper.make_tensor_value_info("axes", TensorProto.INT64, [1])],
               [helper.make_tensor_value_info("y", F, ["a", "b"])])
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    rep = backend.prepare(m)
    assert rep.model is None and rep.constant_inputs == ("axes",)
    np.testing.assert_allclose(rep.run([x, np.array([1])])[0], x.sum(axis=1))
    np.testing.assert_allclose(rep.run([x, np.array([-1])])[0], x.sum(axis=2))
    np.testing.assert_allclose(rep.run([x, np.array([1])])[0], x.sum(axis=1))
    assert len(rep._cache) == 2  # one compiled model per axes value


def test_conv_weight_fed_as_graph_input():
    m = _model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
               [helper.make_tensor_value_info("x", F, [1, 3, 6, 6]),
                helper.make_tensor_value_info("w", F, [4, 3, 3, 3])],
               [helper.make_tensor_value_info("y", F, [1, 4, 6, 6])], opset=11)
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((1, 3, 6, 6), np.float32), "w": rng.standard_normal((4, 3, 3, 3), np.float32)}
    rep = _check(m, feeds, rtol=1e-4, atol=1e-4)
    assert rep.constant_inputs == ("w",)


def test_symbolic_batch_compiles_per_batch():
    m = _model([helper.make_node("Softmax", ["x"], ["y"], axis=-1)],
               [helper.make_tensor_value_info("x", F, ["N", 5])], [helper.make_tensor_value_info("y", F, ["N", 5])])
    rep = backend.prepare(m)
    assert rep.dynamic_inputs == ("x",)
    for n in (1, 3):
        x = np.linspace(-2, 2, 5 * n, dtype=np.float32).reshape(n, 5)
        y = rep.run([x])[0]
        assert y.shape == (n, 5)
        e = np.exp(x - x.max(-1, keepdims=True))
        np.testing.assert_allclose(y, e / e.sum(-1, keepdims=True), rtol=1e-5)


def test_runtime_range_inputs_fold_as_shape_values():
    m = _model([helper.make_node("Range", ["s", "l", "d"], ["r"]), helper.make_node("Add", ["x", "r"], ["y"])],
               [helper.make_tensor_value_info(n, F, []) for n in "sld"] + [helper.make_tensor_value_info("x", F, [4])],
               [helper.make_tensor_value_info("y", F, [4])])
    feeds = {"s": np.array(1, np.float32), "l": np.array(9, np.float32), "d": np.array(2, np.float32),
             "x": np.array([10, 20, 30, 40], np.float32)}
    rep = _check(m, feeds)
    assert set(rep.constant_inputs) == {"s", "l", "d"}


def test_size_and_empty_reduction():
    m = _model([helper.make_node("Size", ["x"], ["n"]),
                helper.make_node("ReduceSum", ["e", "axes"], ["s"], keepdims=1),
                helper.make_node("ReduceMax", ["e"], ["mx"], axes=[1], keepdims=0)],
               [helper.make_tensor_value_info("x", F, [2, 3]), helper.make_tensor_value_info("e", F, [2, 0, 4])],
               [helper.make_tensor_value_info("n", TensorProto.INT64, []),
                helper.make_tensor_value_info("s", F, [2, 1, 4]),
                helper.make_tensor_value_info("mx", F, [2, 4])],
               opset=17, inits=[helper.make_tensor("axes", TensorProto.INT64, [1], [1])])
    out = backend.prepare(m).run({"x": np.zeros((2, 3), np.float32), "e": np.zeros((2, 0, 4), np.float32)})
    assert out[0].dtype == np.int64 and out[0] == 6
    np.testing.assert_array_equal(out[1], np.zeros((2, 1, 4), np.float32))
    np.testing.assert_array_equal(out[2], np.full((2, 4), -np.inf, np.float32))  # the spec's empty max


def test_unsupported_operator_still_fails_in_prepare():
    m = _model([helper.make_node("RandomUniformLike", ["x"], ["y"], name="rnd0")],
               [helper.make_tensor_value_info("x", F, [3, 3])], [helper.make_tensor_value_info("y", F, [3, 3])])
    with pytest.raises(CannError) as e:
        backend.prepare(m)
    assert e.value.lines() == ["error: rnd0: unsupported operator RandomUniformLike (opset 18)"]


def test_data_dependent_input_that_is_not_a_graph_input_is_not_specialized():
    # the Reshape shape is computed from a runtime tensor: no graph input can be folded for it
    m = _model([helper.make_node("Abs", ["s"], ["s2"], name="abs0"),
                helper.make_node("Reshape", ["x", "s2"], ["y"], name="reshape0")],
               [helper.make_tensor_value_info("x", F, [2, 3]), helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
               [helper.make_tensor_value_info("y", F, ["a", "b"])])
    with pytest.raises(CannError) as e:
        backend.prepare(m)
    assert any("reshape0" in line or "abs0" in line for line in e.value.lines())


def test_specialized_model_reports_a_missing_input():
    m = _model([helper.make_node("ReduceSum", ["x", "axes"], ["y"])],
               [helper.make_tensor_value_info("x", F, [2, 3]),
                helper.make_tensor_value_info("axes", TensorProto.INT64, [1])],
               [helper.make_tensor_value_info("y", F, [1, 1])])
    rep = backend.prepare(m)
    with pytest.raises(CannError, match="axes: input not given"):
        rep.run({"x": np.zeros((2, 3), np.float32)})


def test_runtime_class_indices_stay_runtime():
    # NegativeLogLikelihoodLoss with a runtime target: its function body gathers on the device,
    # the backend does not compile the targets in
    node = helper.make_node("NegativeLogLikelihoodLoss", ["x", "t"], ["y"], reduction="mean", ignore_index=1)
    m = _model([node], [helper.make_tensor_value_info("x", F, [4, 3, 2]),
                        helper.make_tensor_value_info("t", TensorProto.INT64, [4, 2])],
               [helper.make_tensor_value_info("y", F, [])])
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 3, 2)).astype(np.float32)
    rep = backend.prepare(m)
    assert rep.constant_inputs == () and rep.model is not None
    for t in (np.array([[0, 2], [1, 1], [2, 0], [0, 0]]), np.array([[2, 2], [0, 1], [1, 0], [2, 1]])):
        (got,) = rep.run({"x": x, "t": t})
        (want,) = ReferenceEvaluator(m).run(None, {"x": x, "t": t})
        assert got.shape == want.shape == ()
        np.testing.assert_allclose(got, want, rtol=1e-5)
