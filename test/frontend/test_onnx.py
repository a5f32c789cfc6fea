"""ONNX importer: one-node models per operator, FileCheck'd; folding; errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from cann.dialects.graph import ConstantOp, constant_value
from cann.errors import CannError
from cann.frontend.onnx import import_onnx

FILECHECK = str(Path(sys.executable).parent / "filecheck")
F = TensorProto.FLOAT


def model(nodes, inputs, outputs, inits=None, opset=17, ir_version=8):
    """inputs/outputs: [(name, shape)] (shape None: left to shape inference); inits: name -> array."""
    g = helper.make_graph(
        nodes,
        "t",
        [helper.make_tensor_value_info(n, F, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, F, s) for n, s in outputs],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in (inits or {}).items()],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir_version)
    return _shaped_outputs(m)


def _shaped_outputs(m):
    """Give shapeless graph outputs the type ONNX shape inference finds (the checker wants a shape)."""
    ig = onnx.shape_inference.infer_shapes(m).graph
    inferred = {vi.name: vi for vi in (*ig.value_info, *ig.output)}
    for o in m.graph.output:
        if not o.type.tensor_type.HasField("shape") and o.name in inferred:
            o.type.CopyFrom(inferred[o.name].type)
    return m


def filecheck(text: str, checks: str, tmp_path: Path) -> None:
    f = tmp_path / "checks.txt"
    f.write_text(checks)
    r = subprocess.run([FILECHECK, str(f)], input=text, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr + "\n--- input ---\n" + text


def imported(m, **kw) -> str:
    module = import_onnx(m, **kw)
    return str(module)


W = np.ones((4, 3, 3, 3), np.float32)
B = np.zeros(4, np.float32)


def test_conv(tmp_path):
    n = helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv1", pads=[1, 1, 1, 1], strides=[2, 2])
    text = imported(model([n], [("x", [1, 3, 8, 8])], [("y", None)], {"w": W, "b": B}))
    filecheck(text, """
CHECK: func.func @main(%[[X:.*]]: tensor<1x3x8x8xf32> {graph.name = "x"}) -> (tensor<1x4x4x4xf32> {graph.name = "y"})
CHECK-DAG: %[[W:.*]] = graph.constant dense_resource<w> : tensor<4x3x3x3xf32>
CHECK-DAG: %[[B:.*]] = graph.constant dense<0.000000e+00> : tensor<4xf32>
CHECK: %[[Y:.*]] = graph.conv2d %[[X]], %[[W]], %[[B]] {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x4x4xf32>
CHECK: func.return %[[Y]]
""".replace("dense_resource<w>", "dense<1.000000e+00>"), tmp_path)


def test_conv_auto_pad_same_upper_odd_total(tmp_path):
    n = helper.make_node("Conv", ["x", "w"], ["y"], auto_pad="SAME_UPPER", strides=[2, 2], kernel_shape=[2, 2])
    w = np.ones((2, 3, 2, 2), np.float32)
    text = imported(model([n], [("x", [1, 3, 7, 7])], [("y", None)], {"w": w}))
    # out = 4, total pad = (4-1)*2 + 2 - 7 = 1: the odd one goes to the end (bottom, right)
    filecheck(text, "CHECK: graph.conv2d {{.*}} pads = array<i64: 0, 0, 1, 1>{{.*}} -> tensor<1x2x4x4xf32>\n", tmp_path)
    n = helper.make_node("Conv", ["x", "w"], ["y"], auto_pad="SAME_LOWER", strides=[2, 2], kernel_shape=[2, 2])
    text = imported(model([n], [("x", [1, 3, 7, 7])], [("y", None)], {"w": w}))
    filecheck(text, "CHECK: graph.conv2d {{.*}} pads = array<i64: 1, 1, 0, 0>{{.*}} -> tensor<1x2x4x4xf32>\n", tmp_path)


def test_conv_grouped(tmp_path):
    n = helper.make_node("Conv", ["x", "w"], ["y"], group=2)
    w = np.ones((4, 2, 1, 1), np.float32)
    text = imported(model([n], [("x", [1, 4, 5, 5])], [("y", None)], {"w": w}))
    filecheck(text, "CHECK: graph.conv2d {{.*}}group = 2 : i64{{.*}} -> tensor<1x4x5x5xf32>\n", tmp_path)


def test_conv_4d_is_unsupported():
    n = helper.make_node("Conv", ["x", "w"], ["y"], name="c4d")
    m = model([n], [("x", [1, 3, 4, 4, 4, 4])], [("y", None)], {"w": np.ones((2, 3, 1, 1, 1, 1), np.float32)})
    with pytest.raises(CannError) as e:
        import_onnx(m)
    (line,) = e.value.lines()
    assert line.startswith("error: c4d: unsupported attribute value kernel_shape=[1, 1, 1, 1] of Conv")


def test_batch_norm(tmp_path):
    n = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-3)
    c = np.ones(3, np.float32)
    text = imported(model([n], [("x", [1, 3, 4, 4])], [("y", None)], {"s": c, "b": c, "m": c, "v": c}))
    filecheck(text, """
CHECK: graph.batch_norm %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 1.000000e-03 : f32} : (tensor<1x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<1x3x4x4xf32>
""", tmp_path)


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
def test_binary_broadcast(op, tmp_path):
    n = helper.make_node(op, ["x", "y"], ["z"])
    text = imported(model([n], [("x", [2, 1, 4]), ("y", [3, 1])], [("z", None)]))
    filecheck(text, f"CHECK: graph.{op.lower()} %{{{{.*}}}}, %{{{{.*}}}} : (tensor<2x1x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>\n", tmp_path)


def test_relu_and_sum(tmp_path):
    nodes = [helper.make_node("Relu", ["a"], ["r"]), helper.make_node("Sum", ["r", "b", "c"], ["s"])]
    text = imported(model(nodes, [("a", [2, 3]), ("b", [2, 3]), ("c", [3])], [("s", None)]))
    filecheck(text, """
CHECK: %[[R:.*]] = graph.relu %{{.*}} : tensor<2x3xf32>
CHECK: %[[S1:.*]] = graph.add %[[R]], %{{.*}} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
CHECK: %[[S2:.*]] = graph.add %[[S1]], %{{.*}} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
CHECK: func.return %[[S2]]
""", tmp_path)


def test_max_pool_ceil_mode(tmp_path):
    n = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
    text = imported(model([n], [("x", [1, 2, 8, 8])], [("y", None)], opset=11))
    filecheck(text, """
CHECK: graph.max_pool %{{.*}} {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = 1 : i64} : tensor<1x2x8x8xf32> -> tensor<1x2x4x4xf32>
""", tmp_path)


def test_avg_pool(tmp_path):
    n = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1)
    text = imported(model([n], [("x", [1, 2, 8, 8])], [("y", None)]))
    filecheck(text, """
CHECK: graph.avg_pool %{{.*}} {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, ceil_mode = 0 : i64, count_include_pad = 1 : i64} : tensor<1x2x8x8xf32> -> tensor<1x2x8x8xf32>
""", tmp_path)


def test_global_avg_pool(tmp_path):
    n = helper.make_node("GlobalAveragePool", ["x"], ["y"])
    text = imported(model([n], [("x", [1, 2, 8, 8])], [("y", None)]))
    filecheck(text, "CHECK: graph.global_avg_pool %{{.*}} : tensor<1x2x8x8xf32> -> tensor<1x2x1x1xf32>\n", tmp_path)


def test_gemm_and_matmul(tmp_path):
    nodes = [
        helper.make_node("Gemm", ["a", "w", "c"], ["g"], alpha=0.5, transB=1),
        helper.make_node("MatMul", ["g", "m"], ["y"]),
    ]
    inits = {"w": np.ones((5, 3), np.float32), "c": np.ones(5, np.float32), "m": np.ones((5, 2), np.float32)}
    text = imported(model(nodes, [("a", [2, 3])], [("y", None)], inits))
    filecheck(text, """
CHECK: %[[G:.*]] = graph.gemm %{{.*}}, %{{.*}}, %{{.*}} {alpha = 5.000000e-01 : f32, beta = 1.000000e+00 : f32, trans_a = 0 : i64, trans_b = 1 : i64} : (tensor<2x3xf32>, tensor<5x3xf32>, tensor<5xf32>) -> tensor<2x5xf32>
CHECK: graph.matmul %[[G]], %{{.*}} : (tensor<2x5xf32>, tensor<5x2xf32>) -> tensor<2x2xf32>
""", tmp_path)


def test_concat_negative_axis(tmp_path):
    n = helper.make_node("Concat", ["a", "b"], ["y"], axis=-1)
    text = imported(model([n], [("a", [2, 3]), ("b", [2, 4])], [("y", None)]))
    filecheck(text, "CHECK: graph.concat %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x4xf32>) -> tensor<2x7xf32>\n", tmp_path)


def test_reshape_family(tmp_path):
    nodes = [
        helper.make_node("Reshape", ["x", "shape"], ["r"]),  # [0, -1]
        helper.make_node("Flatten", ["x"], ["f"], axis=2),
        helper.make_node("Unsqueeze", ["x", "axes"], ["u"]),
        helper.make_node("Squeeze", ["u", "axes"], ["s"]),
    ]
    inits = {"shape": np.array([0, -1], np.int64), "axes": np.array([0], np.int64)}
    text = imported(model(nodes, [("x", [2, 3, 4])], [("r", None), ("f", None), ("s", None)], inits))
    filecheck(text, """
CHECK: graph.reshape %{{.*}} : tensor<2x3x4xf32> -> tensor<2x12xf32>
CHECK: graph.reshape %{{.*}} : tensor<2x3x4xf32> -> tensor<6x4xf32>
CHECK: graph.reshape %{{.*}} : tensor<2x3x4xf32> -> tensor<1x2x3x4xf32>
CHECK: graph.reshape %{{.*}} : tensor<1x2x3x4xf32> -> tensor<2x3x4xf32>
""", tmp_path)


def test_unsqueeze_axes_attribute_before_13(tmp_path):
    n = helper.make_node("Unsqueeze", ["x"], ["u"], axes=[1, 3])
    text = imported(model([n], [("x", [2, 3])], [("u", None)], opset=11))
    filecheck(text, "CHECK: graph.reshape %{{.*}} : tensor<2x3xf32> -> tensor<2x1x3x1xf32>\n", tmp_path)


def test_transpose(tmp_path):
    n = helper.make_node("Transpose", ["x"], ["y"], perm=[0, 2, 1])
    text = imported(model([n], [("x", [2, 3, 4])], [("y", None)]))
    filecheck(text, "CHECK: graph.transpose %{{.*}} {perm = array<i64: 0, 2, 1>} : tensor<2x3x4xf32> -> tensor<2x4x3xf32>\n", tmp_path)
    n = helper.make_node("Transpose", ["x"], ["y"])
    text = imported(model([n], [("x", [2, 3, 4])], [("y", None)]))
    filecheck(text, "CHECK: graph.transpose %{{.*}} {perm = array<i64: 2, 1, 0>}\n", tmp_path)


def test_softmax_opset_11_flattens(tmp_path):
    n = helper.make_node("Softmax", ["x"], ["y"], axis=1)
    text = imported(model([n], [("x", [2, 3, 4])], [("y", None)], opset=11))
    filecheck(text, """
CHECK: %[[F:.*]] = graph.reshape %{{.*}} : tensor<2x3x4xf32> -> tensor<2x12xf32>
CHECK: %[[S:.*]] = graph.softmax %[[F]] {axis = 1 : i64} : tensor<2x12xf32>
CHECK: %[[R:.*]] = graph.reshape %[[S]] : tensor<2x12xf32> -> tensor<2x3x4xf32>
CHECK: func.return %[[R]]
""", tmp_path)


def test_softmax_opset_13_single_axis(tmp_path):
    n = helper.make_node("Softmax", ["x"], ["y"], axis=1)
    text = imported(model([n], [("x", [2, 3, 4])], [("y", None)], opset=13))
    filecheck(text, "CHECK-NOT: graph.reshape\nCHECK: graph.softmax %{{.*}} {axis = 1 : i64} : tensor<2x3x4xf32>\n", tmp_path)


def test_lrn(tmp_path):
    n = helper.make_node("LRN", ["x"], ["y"], size=5, alpha=2e-4, beta=0.75, bias=2.0)
    text = imported(model([n], [("x", [1, 8, 4, 4])], [("y", None)]))
    filecheck(text, "CHECK: graph.lrn %{{.*}} {size = 5 : i64, alpha = 2.000000e-04 : f32, beta = 7.500000e-01 : f32, bias = 2.000000e+00 : f32} : tensor<1x8x4x4xf32>\n", tmp_path)


def test_dropout_and_identity_forward(tmp_path):
    nodes = [helper.make_node("Dropout", ["x"], ["d"]), helper.make_node("Identity", ["d"], ["i"]),
             helper.make_node("Relu", ["i"], ["y"])]
    text = imported(model(nodes, [("x", [2, 3])], [("y", None)], opset=9, ir_version=4))
    filecheck(text, """
CHECK: func.func @main(%[[X:.*]]: tensor<2x3xf32>
CHECK-NEXT: %[[Y:.*]] = graph.relu %[[X]] : tensor<2x3xf32>
CHECK-NEXT: func.return %[[Y]]
""", tmp_path)


def test_locations_name_nodes():
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="my_relu"), helper.make_node("Relu", ["r"], ["y"])]
    module = import_onnx(model(nodes, [("x", [2])], [("y", None)]))
    locs = [op.location.desc.data for op in module.walk() if op.name == "graph.relu"]
    assert locs == ["my_relu", "Relu_1"]


# -- constant folding -------------------------------------------------------------------------


def test_constant_of_shape_is_folded(tmp_path):
    value = helper.make_tensor("v", F, [1], [0.25])
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["c"], value=value),
             helper.make_node("Add", ["x", "c"], ["y"])]
    m = model(nodes, [("x", [2, 3])], [("y", None)], {"shape": np.array([2, 3], np.int64)})
    module = import_onnx(m)
    filecheck(str(module), "CHECK-NOT: ConstantOfShape\nCHECK: graph.constant dense<2.500000e-01> : tensor<2x3xf32>\n", tmp_path)
    (cst,) = [op for op in module.walk() if isinstance(op, ConstantOp)]
    v = constant_value(cst)
    assert v.shape == (2, 3) and v.dtype == np.float32
    np.testing.assert_array_equal(v, np.full((2, 3), 0.25, np.float32))


def test_constant_chain_is_folded():
    # Caffe2 style: Unsqueeze + Mul + Add of 1-D constants, and a Shape chain feeding Reshape
    nodes = [
        helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(np.arange(3, dtype=np.float32), "k")),
        helper.make_node("Unsqueeze", ["k"], ["k2"], axes=[1, 2]),
        helper.make_node("Mul", ["k2", "two"], ["k3"]),
        helper.make_node("Add", ["k3", "two"], ["k4"]),
        helper.make_node("Mul", ["x", "k4"], ["xm"]),
        helper.make_node("Shape", ["xm"], ["s"]),
        helper.make_node("Slice", ["s", "zero", "one"], ["n"]),
        helper.make_node("Concat", ["n", "minus1"], ["target"], axis=0),
        helper.make_node("Reshape", ["xm", "target"], ["y"]),
    ]
    inits = {"two": np.array(2.0, np.float32), "zero": np.array([0], np.int64), "one": np.array([1], np.int64),
             "minus1": np.array([-1], np.int64)}
    m = model(nodes, [("x", [2, 3, 4, 4])], [("y", [2, 48])], inits, opset=11)
    module = import_onnx(m)
    ops = [op.name for op in module.walk()][2:]
    assert ops == ["graph.constant", "graph.mul", "graph.reshape", "func.return"]
    (cst,) = [op for op in module.walk() if isinstance(op, ConstantOp)]
    np.testing.assert_array_equal(constant_value(cst), (np.arange(3, dtype=np.float32) * 2 + 2).reshape(3, 1, 1))
    assert "graph.reshape %2 : tensor<2x3x4x4xf32> -> tensor<2x48xf32>" in str(module)


def test_ir3_initializers_listed_as_inputs(tmp_path):
    n = helper.make_node("Add", ["x", "w"], ["y"])
    m = model([n], [("x", [2]), ("w", [2])], [("y", None)], {"w": np.ones(2, np.float32)}, opset=9, ir_version=3)
    filecheck(imported(m), """
CHECK: func.func @main(%{{.*}}: tensor<2xf32> {graph.name = "x"}) -> (tensor<2xf32> {graph.name = "y"})
CHECK: graph.constant dense<1.000000e+00> : tensor<2xf32>
""", tmp_path)


# -- inputs and outputs ------------------------------------------------------------------------


def _symbolic():
    n = helper.make_node("Relu", ["x"], ["y"])
    g = helper.make_graph([n], "t", [helper.make_tensor_value_info("x", F, ["batch", 3])],
                          [helper.make_tensor_value_info("y", F, None)])
    return _shaped_outputs(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))


def test_symbolic_dim_must_be_fixed():
    with pytest.raises(CannError) as e:
        import_onnx(_symbolic())
    assert e.value.lines() == ["error: x: dimension 0 is symbolic ('batch'); fix it with input_shape, "
                              'e.g. --input_shape "x:1,3"']


def test_input_shape_fixes_symbolic_dim(tmp_path):
    text = imported(_symbolic(), input_shape={"x": (4, 3)})
    filecheck(text, "CHECK: graph.relu %{{.*}} : tensor<4x3xf32>\n", tmp_path)
    with pytest.raises(CannError, match="input_shape names no model input"):
        import_onnx(_symbolic(), input_shape={"nope": (1,)})
    with pytest.raises(CannError, match="dimension 1 is 4, the model fixes it to 3"):
        import_onnx(_symbolic(), input_shape={"x": (4, 4)})


def test_out_nodes(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Softmax", ["r"], ["y"]),
             helper.make_node("Relu", ["x"], ["unused"])]
    text = imported(model(nodes, [("x", [2, 3])], [("y", None)]), out_nodes=["r", "y"])
    filecheck(text, """
CHECK: -> (tensor<2x3xf32> {graph.name = "r"}, tensor<2x3xf32> {graph.name = "y"})
CHECK-COUNT-1: graph.relu
CHECK: graph.softmax
CHECK-NOT: graph.relu
""", tmp_path)
    with pytest.raises(CannError, match="error: nope: output names no tensor"):
        import_onnx(model(nodes, [("x", [2, 3])], [("y", None)]), out_nodes=["nope"])


# -- errors -------------------------------------------------------------------------------------


def test_not_onnx(tmp_path):
    p = tmp_path / "model.onnx"
    p.write_text("this is not a protobuf \x00\xff at all\n")
    with pytest.raises(CannError) as e:
        import_onnx(p)
    (line,) = e.value.lines()
    assert line.startswith(f"error: {p}: not an ONNX model")


def test_missing_file(tmp_path):
    with pytest.raises(CannError, match="cannot read model"):
        import_onnx(tmp_path / "missing.onnx")


def test_unsupported_operators_are_all_reported():
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="ok"),
        helper.make_node("NonZero", ["a"], ["b"], name="nz1"),
        helper.make_node("Cast", ["b"], ["c"], name="after_nz", to=F),
        helper.make_node("RandomUniformLike", ["x"], ["d"], name="ru"),
        helper.make_node("RandomNormalLike", ["x"], ["e"]),  # unnamed: RandomNormalLike_4
        helper.make_node("Sum", ["c", "d", "e"], ["y"]),
    ]
    m = model(nodes, [("x", [2, 3])], [("y", None)], opset=14)
    with pytest.raises(CannError) as e:
        import_onnx(m)
    assert e.value.lines() == [
        "error: nz1: unsupported operator NonZero (opset 14)",
        "error: ru: unsupported operator RandomUniformLike (opset 14)",
        "error: RandomNormalLike_4: unsupported operator RandomNormalLike (opset 14)",
    ]


def test_light_models_import():
    from cann.testing import LIGHT_MODELS, light_model_path

    for name in LIGHT_MODELS:
        if name == "vgg19":
            continue  # same operators as alexnet; its constants are large
        module = import_onnx(light_model_path(name))
        names = {op.name for op in module.walk()}
        assert names <= {"builtin.module", "func.func", "func.return"} | {
            f"graph.{n}" for n in ("constant", "conv2d", "batch_norm", "relu", "add", "mul", "max_pool", "avg_pool",
                                   "global_avg_pool", "gemm", "concat", "reshape", "transpose", "softmax", "lrn")}


def test_unsupported_nodes_downstream_of_each_other_are_all_reported():
    # a chain: each unsupported node is reported even though it consumes another one's output
    n = helper.make_node
    g = helper.make_graph([n("Relu", ["x"], ["a"], name="r"), n("RandomUniformLike", ["a"], ["b"], name="u1"),
                           n("RandomNormalLike", ["b"], ["c"], name="u2", seed=1.0), n("Relu", ["c"], ["d"], name="r2"),
                           n("RandomUniformLike", ["d"], ["y"], name="u3")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 4, 4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(CannError) as e:
        import_onnx(m)
    assert e.value.lines() == ["error: u1: unsupported operator RandomUniformLike (opset 13)",
                               "error: u2: unsupported operator RandomNormalLike (opset 13)",
                               "error: u3: unsupported operator RandomUniformLike (opset 13)"]
