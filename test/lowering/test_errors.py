"""Lowering errors name the ONNX node (one line per problem) instead of producing wrong numbers."""

import pytest
from onnx import TensorProto, helper

import cann


def _model(nodes, inputs, outputs):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def test_unsupported_broadcast_names_every_node():
    m = _model([helper.make_node("Add", ["a", "b"], ["y"], name="add_1"),
                helper.make_node("Mul", ["y", "b"], ["z"], name="mul_2")],
               [("a", [1, 4, 4, 4]), ("b", [1, 1, 4, 4])], [("z", [1, 4, 4, 4])])
    with pytest.raises(cann.CannError) as e:
        cann.compile(m)
    assert e.value.lines() == [
        "error: add_1: add: broadcasting [1, 4, 4, 4] with [1, 1, 4, 4] is not supported yet",
    ]


def test_unknown_precision_mode():
    m = _model([helper.make_node("Relu", ["a"], ["y"], name="r")], [("a", [1, 4])], [("y", [1, 4])])
    with pytest.raises(cann.CannError, match="unknown precision mode 'fp8'"):
        cann.compile(m, precision_mode="fp8")


def test_unknown_soc():
    m = _model([helper.make_node("Relu", ["a"], ["y"], name="r")], [("a", [1, 4])], [("y", [1, 4])])
    with pytest.raises(cann.CannError, match="unknown SoC 'Ascend999'"):
        cann.compile(m, soc_version="Ascend999")
