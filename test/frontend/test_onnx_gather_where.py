"""ONNX import of Gather and Where (FileCheck'd graph ops) and their errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from cann.errors import CannError
from cann.frontend.onnx import import_onnx

FILECHECK = str(Path(sys.executable).parent / "filecheck")


def _model(nodes, inputs, outputs, inits=None):
    g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                          [helper.make_tensor_value_info(n, t, None) for n, t in outputs],
                          [numpy_helper.from_array(np.asarray(a), n) for n, a in (inits or {}).items()])
    return onnx.shape_inference.infer_shapes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]))


def filecheck(text: str, checks: str, tmp_path: Path) -> None:
    f = tmp_path / "checks.txt"
    f.write_text(checks)
    r = subprocess.run([FILECHECK, str(f)], input=text, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr + "\n--- input ---\n" + text


def test_gather_runtime_int64_indices(tmp_path):
    m = _model([helper.make_node("Gather", ["w", "ids"], ["y"], axis=-2)], [("ids", TensorProto.INT64, [1, 16])],
               [("y", TensorProto.FLOAT)], {"w": np.zeros((3, 128, 64), np.float32)})
    filecheck(str(import_onnx(m)), """
CHECK: func.func @main(%{{.*}}: tensor<1x16xi64>
CHECK: %[[W:.*]] = graph.constant
CHECK: graph.gather %[[W]], %{{.*}} {axis = 1 : i64} : (tensor<3x128x64xf32>, tensor<1x16xi64>) -> tensor<3x1x16x64xf32>
""", tmp_path)


def test_gather_constant_indices(tmp_path):
    m = _model([helper.make_node("Gather", ["x", "i"], ["y"], axis=1)], [("x", TensorProto.FLOAT, [2, 5])],
               [("y", TensorProto.FLOAT)], {"i": np.array([-1, 0], np.int32)})
    filecheck(str(import_onnx(m)), """
CHECK: graph.constant dense<[-1, 0]> : tensor<2xi32>
CHECK: graph.gather {{.*}} {axis = 1 : i64} : (tensor<2x5xf32>, tensor<2xi32>) -> tensor<2x2xf32>
""", tmp_path)


def test_where(tmp_path):
    m = _model([helper.make_node("Where", ["c", "a", "x"], ["y"])], [("x", TensorProto.FLOAT, [1, 2, 4, 4])],
               [("y", TensorProto.FLOAT)], {"c": np.triu(np.ones((4, 4), bool), 1), "a": np.array(-np.inf, np.float32)})
    filecheck(str(import_onnx(m)), """
CHECK: graph.where %{{.*}}, %{{.*}}, %{{.*}} : (tensor<4x4xi1>, tensor<f32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
""", tmp_path)


def test_where_on_narrow_integers_is_a_clear_error():
    m = _model([helper.make_node("Where", ["c", "a", "b"], ["y"])],
               [("c", TensorProto.BOOL, [4]), ("a", TensorProto.UINT16, [4]), ("b", TensorProto.UINT16, [4])],
               [("y", TensorProto.UINT16)])
    with pytest.raises(CannError, match="Where on uint16 tensors is not supported"):
        import_onnx(m)


def test_gather_axis_out_of_range():
    m = _model([helper.make_node("Gather", ["x", "i"], ["y"], axis=0)], [("x", TensorProto.FLOAT, [2, 5])],
               [("y", TensorProto.FLOAT)], {"i": np.array([0], np.int64)})
    m.graph.node[0].attribute[0].i = 3
    with pytest.raises(CannError):
        import_onnx(m)
