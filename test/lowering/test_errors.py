"""Lowering errors name the ONNX node (one line per problem) instead of producing wrong numbers."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import cann


def _model(nodes, inputs, outputs):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def test_unsupported_lowering_names_the_node_once():
    """Only the failing node is reported, not the nodes downstream of it."""
    m = _model([helper.make_node("Transpose", ["a"], ["t"], name="tr"),
                helper.make_node("Gather", ["t", "i"], ["y"], name="gather_1"),
                helper.make_node("Relu", ["y"], ["z"], name="relu_2")],
               [("a", [4, 3])], [("z", [1, 4])])
    m.graph.initializer.append(numpy_helper.from_array(np.array([7], np.int64), "i"))
    with pytest.raises(cann.CannError) as e:
        cann.compile(m)
    assert e.value.lines() == [
        "error: gather_1: Gather index 7 out of range [-3, 2] for axis 0",
    ]


def test_unknown_precision_mode():
    m = _model([helper.make_node("Relu", ["a"], ["y"], name="r")], [("a", [1, 4])], [("y", [1, 4])])
    with pytest.raises(cann.CannError, match="unknown precision mode 'fp8'"):
        cann.compile(m, precision_mode="fp8")


def test_unknown_soc():
    m = _model([helper.make_node("Relu", ["a"], ["y"], name="r")], [("a", [1, 4])], [("y", [1, 4])])
    with pytest.raises(cann.CannError, match="unknown SoC 'Ascend999'"):
        cann.compile(m, soc_version="Ascend999")


def test_convert_graph_to_tile_on_tile_ir_is_one_error(tmp_path):
    import subprocess
    import sys

    src = tmp_path / "t.mlir"
    src.write_text('builtin.module {\n  %0 = tile.alloc : memref<16xf16, #tile<space ub>>\n}\n')
    r = subprocess.run([sys.executable, "-m", "cann.tools.cann_opt", str(src), "-p", "convert-graph-to-tile"],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.splitlines() == ["error: convert-graph-to-tile: the input is not graph-level IR (it holds "
                                     "tile.alloc); this pass lowers what the importer produces"]
