"""Malformed ONNX models found by fuzzing (test/test_fuzz.py): each is one CannError naming the
node or tensor, never an abort inside onnx's shape inference or a numpy exception."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import cann

F = TensorProto.FLOAT


def _model(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def _error(model) -> list[str]:
    with pytest.raises(cann.CannError) as e:
        cann.compile(model)
    return e.value.lines()


@pytest.mark.parametrize("where", ["input", "output"])
def test_negative_dimension(where):
    # onnx's Slice shape inference aborted the process (a failed std::clamp assertion) on x: 3x-3
    shape_in, shape_out = ([3, -3], [3, 2]) if where == "input" else ([3, 8], [3, -2])
    inits = [numpy_helper.from_array(np.array([v], np.int64), n) for n, v in (("s", 2), ("e", 4), ("a", 1))]
    m = _model([helper.make_node("Slice", ["x", "s", "e", "a"], ["y"], name="slice")],
               [helper.make_tensor_value_info("x", F, shape_in)], [helper.make_tensor_value_info("y", F, shape_out)],
               inits)
    name, i, d = ("x", 1, -3) if where == "input" else ("y", 1, -2)
    assert _error(m) == [f"error: {name}: dimension {i} is negative ({d})"]


def test_initializer_data_of_another_size_than_its_dims():
    w = numpy_helper.from_array(np.ones((4, 2, 3, 3), np.float32), "w")
    w.dims[1] = 1  # 72 values, dims say 36
    m = _model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv")],
               [helper.make_tensor_value_info("x", F, [1, 2, 6, 6])], [helper.make_tensor_value_info("y", F, ["n", "c", "h", "w"])],
               [w])
    [line] = _error(m)
    assert line.startswith("error: w: initializer data does not match its dims [4, 1, 3, 3]: "), line


@pytest.mark.parametrize("attrs, message", [
    (dict(kernel_shape=[2, 2**40]), f"its 2x{2**40} window is larger than the padded input 6x6 (input 6x6, pads "
                                    f"[0, 0, 0, 0]), so the output would be 5x{7 - 2**40}"),
    (dict(kernel_shape=[2, 9]), "its 2x9 window is larger than the padded input 6x6 (input 6x6, pads [0, 0, 0, 0]), "
                                "so the output would be 5x-2"),
])
def test_pool_window_larger_than_the_padded_input(attrs, message):
    m = _model([helper.make_node("AveragePool", ["x"], ["y"], name="pool", **attrs)],
               [helper.make_tensor_value_info("x", F, [1, 4, 6, 6])], [helper.make_tensor_value_info("y", F, ["n", "c", "h", "w"])])
    assert _error(m) == [f"error: pool: AveragePool pools the feature map away: {message}"]

