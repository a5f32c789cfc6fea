"""Function operators: an op without a converter whose schema has a function body is imported as
that body (cann.frontend.onnx_function), with the body's opset and the node's attributes."""

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import cann.backend as backend
from cann.errors import CannError
from cann.frontend.onnx import import_onnx

F = TensorProto.FLOAT


def _rope_model():
    # RotaryEmbedding-23 has a context-dependent function body (Slice / Gather / Mul / Add / Concat)
    node = helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y"], name="rope", rotary_embedding_dim=4,
                            interleaved=1, num_heads=2)
    g = helper.make_graph([node], "g",
                          [helper.make_tensor_value_info("x", F, [1, 3, 16]), helper.make_tensor_value_info("cos", F, [8, 2]),
                           helper.make_tensor_value_info("sin", F, [8, 2]),
                           helper.make_tensor_value_info("pos", TensorProto.INT64, [1, 3])],
                          [helper.make_tensor_value_info("y", F, [1, 3, 16])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)])


def test_function_body_replaces_the_op_and_matches_the_reference():
    m = _rope_model()
    text = str(import_onnx(m))
    assert "RotaryEmbedding" not in text and "graph.mul" in text and "graph.concat" in text
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((1, 3, 16), np.float32), "cos": rng.standard_normal((8, 2), np.float32),
             "sin": rng.standard_normal((8, 2), np.float32), "pos": np.array([[0, 3, 7]], np.int64)}
    (got,) = backend.prepare(m).run(feeds)
    (want,) = ReferenceEvaluator(m).run(None, feeds)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_problem_inside_a_function_body_names_the_body_node():
    node = helper.make_node("Bernoulli", ["x"], ["y"], name="bern", seed=1.0)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", F, [4])],
                          [helper.make_tensor_value_info("y", F, [4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(CannError) as e:
        import_onnx(m)
    # the body follows its own opset (15), and random numbers have no AI Core kernel
    assert e.value.lines()[0] == "error: bern/RandomUniformLike_0: unsupported operator RandomUniformLike (opset 15)"


def test_float64_is_rejected_not_computed_in_float32():
    node = helper.make_node("Relu", ["x"], ["y"])
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(CannError, match="dtype float64 is not supported on the AI Core"):
        backend.prepare(m, precision_mode="must_keep_origin_dtype")


def test_full_width_rotary_embedding_with_its_empty_pass_through_split():
    # the body splits off an empty pass-through part (Split with a zero-size output) and concats it back
    node = helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y"], name="rope")
    g = helper.make_graph([node], "g",
                          [helper.make_tensor_value_info("x", F, [2, 3, 5, 8]), helper.make_tensor_value_info("cos", F, [16, 4]),
                           helper.make_tensor_value_info("sin", F, [16, 4]),
                           helper.make_tensor_value_info("pos", TensorProto.INT64, [2, 5])],
                          [helper.make_tensor_value_info("y", F, [2, 3, 5, 8])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)])
    rng = np.random.default_rng(1)
    feeds = {"x": rng.standard_normal((2, 3, 5, 8), np.float32), "cos": rng.standard_normal((16, 4), np.float32),
             "sin": rng.standard_normal((16, 4), np.float32), "pos": rng.integers(0, 16, (2, 5))}
    (got,) = backend.prepare(m).run(feeds)
    (want,) = ReferenceEvaluator(m).run(None, feeds)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
