"""TensorFlow importer: small hand-built GraphDefs per operator, FileCheck'd over the printed graph IR
and evaluated with numpy; folding; errors (all unsupported nodes at once, unknown dimensions)."""

from __future__ import annotations

import numpy as np
import pytest
from tf_graphdefs import G, Func, Placeholder, Type, evaluate, filecheck, rel_l2

from cann.errors import CannError
from cann.frontend.tf import import_tf, inline_functions, load_graph_def

RNG = np.random.default_rng(0)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def imported(gr: G, **kw) -> str:
    return str(import_tf(gr.bytes(), **kw))


def run(gr: G, feeds, **kw):
    return evaluate(import_tf(gr.bytes(), **kw), feeds)


def test_conv2d_nhwc_same_is_explicit_transposes(tmp_path):
    gr = G()
    gr.ph("x", [1, 7, 7, 3])
    w = rand(2, 2, 3, 4)
    gr.const("w", w)
    gr.node("conv", "Conv2D", ["x", "w"], strides=[1, 2, 2, 1], padding="SAME", data_format="NHWC", T=Type(1))
    text = imported(gr)
    # out = 4, total pad = (4-1)*2 + 2 - 7 = 1: TensorFlow puts the odd pixel at the end (bottom, right)
    filecheck(text, """
CHECK: func.func @main(%{{.*}}: tensor<1x7x7x3xf32> {graph.name = "x"}) -> (tensor<1x4x4x4xf32> {graph.name = "conv"})
CHECK: %[[T:.*]] = graph.transpose %{{.*}} {perm = array<i64: 0, 3, 1, 2>} : tensor<1x7x7x3xf32> -> tensor<1x3x7x7xf32> loc("conv")
CHECK: %[[W:.*]] = graph.constant {{.*}} : tensor<4x3x2x2xf32>
CHECK: %[[C:.*]] = graph.conv2d %[[T]], %[[W]] {strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 1, 1>, {{.*}}group = 1 : i64} : {{.*}} -> tensor<1x4x4x4xf32>
CHECK: %[[B:.*]] = graph.transpose %[[C]] {perm = array<i64: 0, 2, 3, 1>} : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
CHECK: func.return %[[B]]
""".replace(' loc("conv")', ""), tmp_path)
    x = rand(1, 7, 7, 3)
    xp = np.pad(x, ((0, 0), (0, 1), (0, 1), (0, 0)))
    ref = np.stack([np.stack([np.einsum("hwc,hwco->o", xp[0, 2 * i:2 * i + 2, 2 * j:2 * j + 2], w)
                              for j in range(4)]) for i in range(4)])[None]
    assert rel_l2(run(gr, {"x": x})["conv"], ref) < 1e-6


def test_conv2d_nchw_and_explicit_padding(tmp_path):
    gr = G()
    gr.ph("x", [1, 3, 5, 5])
    gr.const("w", rand(3, 3, 3, 2))
    gr.node("c", "Conv2D", ["x", "w"], strides=[1, 1, 1, 1], padding="EXPLICIT", data_format="NCHW",
            explicit_paddings=[0, 0, 0, 0, 1, 2, 0, 1], dilations=[1, 1, 2, 1])
    filecheck(imported(gr), """
CHECK-NOT: graph.transpose
CHECK: graph.conv2d {{.*}}pads = array<i64: 1, 0, 2, 1>, dilations = array<i64: 2, 1>{{.*}} -> tensor<1x2x4x4xf32>
""", tmp_path)


def test_depthwise_conv_is_grouped(tmp_path):
    gr = G()
    gr.ph("x", [1, 6, 6, 3])
    w = rand(3, 3, 3, 2)
    gr.const("w", w)
    gr.node("dw", "DepthwiseConv2dNative", ["x", "w"], strides=[1, 1, 1, 1], padding="VALID")
    filecheck(imported(gr), """
CHECK: graph.conv2d {{.*}}group = 3 : i64} : (tensor<1x3x6x6xf32>, tensor<6x1x3x3xf32>) -> tensor<1x6x4x4xf32>
""", tmp_path)
    x = rand(1, 6, 6, 3)
    ref = np.zeros((1, 4, 4, 6))
    for i in range(4):
        for j in range(4):
            ref[0, i, j] = np.einsum("hwc,hwcm->cm", x[0, i:i + 3, j:j + 3], w).reshape(-1)
    assert rel_l2(run(gr, {"x": x})["dw"], ref) < 1e-6


def test_fused_batch_norm_and_bias_add(tmp_path):
    gr = G()
    gr.ph("x", [1, 4, 4, 3])
    for n in ("s", "o", "m"):
        gr.const(n, rand(3))
    gr.const("v", RNG.uniform(0.5, 1.5, 3).astype(np.float32))
    gr.node("bn", "FusedBatchNormV3", ["x", "s", "o", "m", "v"], epsilon=1e-3, is_training=False)
    gr.const("b", rand(3))
    gr.node("ba", "BiasAdd", ["bn", "b"], data_format="NHWC")
    filecheck(imported(gr), """
CHECK: graph.transpose
CHECK: graph.batch_norm {{.*}} {epsilon = 1.000000e-03 : f32} : (tensor<1x3x4x4xf32>
CHECK: graph.transpose
CHECK: graph.add %{{.*}}, %{{.*}} : (tensor<1x4x4x3xf32>, tensor<3xf32>) -> tensor<1x4x4x3xf32>
""", tmp_path)
    gr2 = G()
    gr2.ph("x", [1, 3, 2, 2])
    gr2.const("b", rand(3))
    gr2.node("ba", "BiasAdd", ["x", "b"], data_format="NCHW")
    filecheck(imported(gr2), "CHECK: graph.reshape {{.*}} -> tensor<3x1x1xf32>\nCHECK: graph.add\n", tmp_path)


def test_pooling_same_semantics(tmp_path):
    gr = G()
    gr.ph("x", [1, 5, 5, 2])
    gr.node("mp", "MaxPool", ["x"], ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="SAME")
    gr.node("ap", "AvgPool", ["x"], ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1], padding="SAME")
    filecheck(imported(gr, out_nodes=["mp", "ap"]), """
CHECK: graph.max_pool {{.*}}pads = array<i64: 0, 0, 1, 1>{{.*}} -> tensor<1x2x3x3xf32>
CHECK: graph.avg_pool {{.*}}pads = array<i64: 1, 1, 1, 1>{{.*}}count_include_pad = 0 : i64} {{.*}} -> tensor<1x2x3x3xf32>
""", tmp_path)
    x = rand(1, 5, 5, 2)
    out = run(gr, {"x": x}, out_nodes=["ap"])["ap"]
    # TensorFlow's SAME average: the corner window covers 2x2 real pixels and divides by 4
    assert np.allclose(out[0, 0, 0], x[0, :2, :2].mean(axis=(0, 1)), atol=1e-6)


@pytest.mark.parametrize("op, fn", [
    ("Relu", lambda x: np.maximum(x, 0)), ("Relu6", lambda x: np.clip(x, 0, 6)),
    ("Elu", lambda x: np.where(x > 0, x, np.exp(x) - 1)),
    ("Selu", lambda x: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * (np.exp(x) - 1))),
    ("Sigmoid", lambda x: 1 / (1 + np.exp(-x))), ("Tanh", np.tanh), ("Softplus", lambda x: np.logaddexp(0, x)),
    ("Erf", None), ("Erfc", None), ("Rsqrt", lambda x: 1 / np.sqrt(np.abs(x))),
    ("Sqrt", lambda x: np.sqrt(np.abs(x))), ("Square", np.square), ("Neg", np.negative),
])
def test_unary(op, fn):
    import math

    if op == "Erf":
        fn = np.vectorize(math.erf)
    if op == "Erfc":
        fn = np.vectorize(math.erfc)
    gr = G()
    gr.ph("x", [2, 3])
    src = "x"
    if op in ("Rsqrt", "Sqrt"):
        gr.node("a", "Abs", ["x"])
        src = "a"
    gr.node("y", op, [src])
    x = rand(2, 3) * 2
    assert rel_l2(run(gr, {"x": x})["y"], fn(x)) < 1e-6


@pytest.mark.parametrize("op, fn", [
    ("Add", np.add), ("AddV2", np.add), ("Sub", np.subtract), ("Mul", np.multiply), ("RealDiv", np.divide),
    ("Maximum", np.maximum), ("Minimum", np.minimum), ("SquaredDifference", lambda a, b: (a - b) ** 2),
    ("Pow", lambda a, b: np.abs(a) ** b),
])
def test_binary_broadcast(op, fn):
    gr = G()
    gr.ph("x", [2, 1, 4])
    gr.ph("y", [3, 1])
    a = "x"
    if op == "Pow":
        gr.node("ax", "Abs", ["x"])
        a = "ax"
    gr.node("z", op, [a, "y"])
    x, y = rand(2, 1, 4), rand(3, 1)
    out = run(gr, {"x": x, "y": y})["z"]
    assert out.shape == (2, 3, 4)
    assert rel_l2(out, fn(x if op != "Pow" else x, y)) < 1e-6


def test_swish_is_mul_of_sigmoid(tmp_path):
    gr = G()
    gr.ph("x", [1, 8])
    gr.node("s", "Sigmoid", ["x"])
    gr.node("m", "Mul", ["x", "s"])
    gr.node("out", "IdentityN", ["m", "x"])
    filecheck(imported(gr, out_nodes=["out:0"]), """
CHECK: %[[S:.*]] = graph.sigmoid %[[X:.*]] : tensor<1x8xf32>
CHECK: %[[M:.*]] = graph.mul %[[X]], %[[S]]
CHECK: func.return %[[M]]
""", tmp_path)


def test_matmul_transpose_flags_and_batch_matmul(tmp_path):
    gr = G()
    gr.ph("a", [5, 4])
    w = rand(3, 5)
    gr.const("w", w)
    gr.node("mm", "MatMul", ["a", "w"], transpose_a=True, transpose_b=True)
    gr.ph("p", [2, 3, 4])
    gr.ph("q", [2, 6, 4])
    gr.node("bmm", "BatchMatMulV2", ["p", "q"], adj_x=False, adj_y=True)
    text = imported(gr, out_nodes=["mm", "bmm"])
    filecheck(text, """
CHECK: %[[TA:.*]] = graph.transpose %{{.*}} {perm = array<i64: 1, 0>} : tensor<5x4xf32> -> tensor<4x5xf32>
CHECK: %[[W:.*]] = graph.constant {{.*}} : tensor<5x3xf32>
CHECK: graph.matmul %[[TA]], %[[W]] : (tensor<4x5xf32>, tensor<5x3xf32>) -> tensor<4x3xf32>
CHECK: graph.transpose %{{.*}} {perm = array<i64: 0, 2, 1>} : tensor<2x6x4xf32> -> tensor<2x4x6xf32>
CHECK: graph.matmul {{.*}} -> tensor<2x3x6xf32>
""", tmp_path)
    a, p, q = rand(5, 4), rand(2, 3, 4), rand(2, 6, 4)
    out = run(gr, {"a": a, "p": p, "q": q}, out_nodes=["mm", "bmm"])
    assert rel_l2(out["mm"], a.T @ w.T) < 1e-6
    assert rel_l2(out["bmm"], p @ q.transpose(0, 2, 1)) < 1e-6


@pytest.mark.parametrize("eq, sa, sb", [
    ("BTNH,BSNH->BNTS", (1, 5, 2, 3), (1, 4, 2, 3)),   # attention scores (Keras MultiHeadAttention)
    ("BNTS,BSNH->BTNH", (1, 2, 5, 4), (1, 4, 2, 3)),   # attention-weighted values
    ("abc,cde->abde", (1, 5, 6), (6, 2, 3)),           # EinsumDense projections
    ("abcd,cde->abe", (1, 5, 2, 3), (2, 3, 6)),        # EinsumDense output projection
])
def test_einsum(eq, sa, sb):
    gr = G()
    gr.ph("a", list(sa))
    b = rand(*sb)
    if eq.startswith("abc") or eq.startswith("abcd"):
        gr.const("b", b)
        feeds = {}
    else:
        gr.ph("b", list(sb))
        feeds = {"b": b}
    gr.node("e", "Einsum", ["a", "b"], equation=eq, N=2)
    a = rand(*sa)
    out = run(gr, {"a": a, **feeds})["e"]
    assert rel_l2(out, np.einsum(eq.replace("B", "z").replace("T", "t").replace("N", "n").replace("H", "h")
                                 .replace("S", "s"), a, b)) < 1e-6


def test_reductions(tmp_path):
    gr = G()
    gr.ph("x", [2, 3, 4])
    gr.const("ax", np.array([1, -1], np.int32))
    gr.node("mean", "Mean", ["x", "ax"], keep_dims=True)
    gr.node("sum", "Sum", ["x", "ax"], keep_dims=False)
    gr.node("max", "Max", ["x", "ax"], keep_dims=False)
    text = imported(gr, out_nodes=["mean", "sum", "max"])
    filecheck(text, """
CHECK: graph.reduce %{{.*}} {kind = "mean", axes = array<i64: 1, 2>, keepdims = 1 : i64} : tensor<2x3x4xf32> -> tensor<2x1x1xf32>
CHECK: graph.reduce %{{.*}} {kind = "sum", axes = array<i64: 1, 2>, keepdims = 0 : i64} : tensor<2x3x4xf32> -> tensor<2xf32>
CHECK: graph.reduce %{{.*}} {kind = "max"
""", tmp_path)


def test_shape_ops(tmp_path):
    gr = G()
    gr.ph("x", [2, 1, 3])
    gr.const("shape", np.array([3, -1], np.int32))
    gr.node("r", "Reshape", ["x", "shape"])
    gr.node("sq", "Squeeze", ["x"], squeeze_dims=[1])
    gr.const("ax", np.array(0, np.int32))
    gr.node("ed", "ExpandDims", ["sq", "ax"])
    gr.const("perm", np.array([2, 0, 1], np.int32))
    gr.node("tr", "Transpose", ["x", "perm"])
    gr.const("cax", np.array(-1, np.int32))
    gr.node("cat", "ConcatV2", ["x", "x", "cax"], N=2)
    gr.node("pk", "Pack", ["sq", "sq"], axis=1, N=2)
    outs = ["r", "ed", "tr", "cat", "pk"]
    filecheck(imported(gr, out_nodes=outs), """
CHECK: graph.reshape {{.*}} -> tensor<3x2xf32>
CHECK: graph.reshape {{.*}} -> tensor<2x3xf32>
CHECK: graph.reshape {{.*}} -> tensor<1x2x3xf32>
CHECK: graph.transpose {{.*}} -> tensor<3x2x1xf32>
CHECK: graph.concat {{.*}} {axis = 2 : i64} {{.*}} -> tensor<2x1x6xf32>
CHECK: graph.concat {{.*}} {axis = 1 : i64} {{.*}} -> tensor<2x2x3xf32>
""", tmp_path)
    x = rand(2, 1, 3)
    out = run(gr, {"x": x}, out_nodes=outs)
    assert np.array_equal(out["pk"], np.stack([x[:, 0], x[:, 0]], axis=1))
    assert np.array_equal(out["tr"], x.transpose(2, 0, 1))


@pytest.mark.parametrize("op, mode", [("Pad", None), ("PadV2", None), ("MirrorPad", "REFLECT"),
                                      ("MirrorPad", "SYMMETRIC")])
def test_pads(op, mode):
    gr = G()
    gr.ph("x", [1, 4, 5])
    p = np.array([[0, 0], [1, 2], [2, 1]], np.int32)
    gr.const("p", p)
    ins = ["x", "p"]
    if op == "PadV2":
        gr.const("v", np.array(1.5, np.float32))
        ins.append("v")
    gr.node("y", op, ins, **({"mode": mode} if mode else {}))
    x = rand(1, 4, 5)
    ref = (np.pad(x, p, constant_values=1.5 if op == "PadV2" else 0) if mode is None
           else np.pad(x, p, mode=mode.lower()))
    assert np.allclose(run(gr, {"x": x})["y"], ref)


@pytest.mark.parametrize("begin, end, strides, masks, expect", [
    ([1, 0], [3, 0], [1, 1], dict(end_mask=2), lambda x: x[1:3, :]),
    ([0, -1], [0, 0], [1, -1], dict(begin_mask=1, end_mask=3), lambda x: x[:, ::-1]),
    ([1], [2], [1], dict(shrink_axis_mask=1), lambda x: x[1]),
    ([0, 0, 1], [0, 0, 4], [1, 1, 2], dict(ellipsis_mask=1, new_axis_mask=2), lambda x: x[..., None, 1:4:2]),
    ([-2, 0], [0, 3], [1, 1], dict(end_mask=1), lambda x: x[-2:, 0:3]),
])
def test_strided_slice(begin, end, strides, masks, expect, tmp_path):
    gr = G()
    gr.ph("x", [4, 5])
    gr.const("b", np.array(begin, np.int32))
    gr.const("e", np.array(end, np.int32))
    gr.const("s", np.array(strides, np.int32))
    gr.node("y", "StridedSlice", ["x", "b", "e", "s"], **masks)
    x = rand(4, 5)
    out = run(gr, {"x": x})["y"]
    assert np.array_equal(out, expect(x).astype(np.float64))
    # the same slice of a constant folds at import
    gc = G()
    gc.const("x", x)
    gc.const("b", np.array(begin, np.int32))
    gc.const("e", np.array(end, np.int32))
    gc.const("s", np.array(strides, np.int32))
    gc.node("y", "StridedSlice", ["x", "b", "e", "s"], **masks)
    assert np.array_equal(run(gc, {})["y"], expect(x).astype(np.float64))


def test_shape_strided_slice_pack_chain_folds(tmp_path):
    """Keras' dynamic-batch Reshape: Shape -> StridedSlice -> Pack -> Reshape folds once shapes are static."""
    gr = G()
    gr.ph("x", [-1, 4, 3])
    gr.node("shp", "Shape", ["x"], out_type=Type(3))
    gr.const("b", np.array([0], np.int32))
    gr.const("e", np.array([1], np.int32))
    gr.const("s", np.array([1], np.int32))
    gr.node("n", "StridedSlice", ["shp", "b", "e", "s"], shrink_axis_mask=1)
    gr.const("m1", np.array(-1, np.int32))
    gr.node("packed", "Pack", ["n", "m1"], axis=0, N=2)
    gr.node("r", "Reshape", ["x", "packed"])
    gr.node("ident", "Identity", ["r"])
    gr.node("noop", "NoOp", [])
    gr.node("sg", "StopGradient", ["ident", "^noop"])  # control inputs are ignored
    text = imported(gr, input_shape={"x:0": (2, 4, 3)})
    filecheck(text, """
CHECK: func.func @main(%{{.*}}: tensor<2x4x3xf32> {graph.name = "x"}) -> (tensor<2x12xf32> {graph.name = "sg"})
CHECK-NOT: graph.constant
CHECK: graph.reshape %{{.*}} : tensor<2x4x3xf32> -> tensor<2x12xf32>
CHECK-NEXT: func.return
""", tmp_path)


def test_constant_subgraph_folds_and_cast(tmp_path):
    gr = G()
    gr.ph("x", [3])
    gr.const("a", np.array([1, 2, 3], np.float32))
    gr.const("b", np.array([2], np.int32))
    gr.node("bf", "Cast", ["b"], SrcT=Type(3), DstT=Type(1))
    gr.node("c", "Mul", ["a", "bf"])
    gr.node("y", "Add", ["x", "c"])
    gr.node("h", "Cast", ["y"], SrcT=Type(1), DstT=Type(19))
    filecheck(imported(gr), """
CHECK: %[[C:.*]] = graph.constant dense<[2.000000e+00, 4.000000e+00, 6.000000e+00]> : tensor<3xf32>
CHECK: graph.add %{{.*}}, %[[C]]
CHECK: graph.cast %{{.*}} : tensor<3xf32> -> tensor<3xf16>
""", tmp_path)


def test_softmax_last_axis(tmp_path):
    gr = G()
    gr.ph("x", [2, 5])
    gr.node("sm", "Softmax", ["x"])
    filecheck(imported(gr), "CHECK: graph.softmax %{{.*}} {axis = 1 : i64} : tensor<2x5xf32>\n", tmp_path)


# -- function calls (inlined from the library) ---------------------------------------------------


def _library_graph() -> G:
    """x, y -> StatefulPartitionedCall of ``outer`` (alpha bound to 0.25), which calls ``inner``
    through a PartitionedCall (alpha forwarded as a placeholder) and directly (alpha = 0.5, T left
    to its default), takes
    ``inner``'s second output by name, and sums a list argument through ``pair_sum``."""
    gr = G()
    inner = gr.function("inner", [("x", {"type": 0, "type_attr": "T"})], ["y", "z"],
                        {"y": "lr:activations:0", "z": "m:z:0"}, attrs=[("T", "type", Type(1)), ("alpha", "float")])
    inner.node("lr", "LeakyRelu", ["x"], alpha=Placeholder("alpha"), T=Placeholder("T"))
    inner.node("two", "Const", value=np.array(2.0, np.float32), dtype=Placeholder("T"))
    inner.node("m", "Mul", ["x", "two:output:0"], T=Placeholder("T"))
    pair = gr.function("pair_sum", [("xs", {"number_attr": "N"})], ["s"], {"s": "a:z:0"},
                       attrs=[("N", "int", 1)])
    pair.node("a", "AddV2", ["xs:0", "xs:1"])
    outer = gr.function("outer", ["a", "b"], ["sum", "prod"], {"sum": "p:s:0", "prod": "mul:z:0"},
                        attrs=[("alpha", "float")])
    outer.node("c1", "PartitionedCall", ["a"], f=Func("inner", T=Type(1), alpha=Placeholder("alpha")))
    outer.node("c2", "inner", ["b", "^c1"], alpha=0.5)  # T: the function's default
    outer.node("idn", "IdentityN", ["c1:output:0", "c2:z:0"])  # c2's second output argument
    outer.node("p", "pair_sum", ["c1:output:0", "c2:y:0"], N=2)
    outer.node("mul", "Mul", ["idn:output:1", "p:s:0"])
    gr.ph("x", [2, 3])
    gr.ph("y", [2, 3])
    gr.node("call", "StatefulPartitionedCall", ["x", "y"], f=Func("outer", alpha=0.25))
    gr.node("first", "Identity", ["call"])
    gr.node("second", "Relu", ["call:1"])
    return gr


def test_function_calls_inline_nested_with_attributes():
    x, y = rand(2, 3), rand(2, 3)
    out = run(_library_graph(), {"x": x, "y": y})

    def leaky(v, a):
        return np.where(v >= 0, v, a * v)

    s = leaky(x, 0.25) + leaky(y, 0.5)
    assert list(out) == ["first", "second"]
    assert rel_l2(out["first"], s) < 1e-6
    assert rel_l2(out["second"], np.maximum(2 * y * s, 0)) < 1e-6


def test_function_call_body_is_named_under_the_call():
    gr = _library_graph()
    gr.node("call/c2", "Identity", ["x"])  # takes the name the inliner would give
    gd, _ = load_graph_def(gr.bytes())
    nodes = {n.name: n for n in inline_functions(gd)}
    assert nodes["call"].op == "IdentityN" and list(nodes["call"].input) == ["call/p", "call/mul"]
    assert nodes["call/c2"].op == "Identity" and nodes["call/c2_1"].op == "IdentityN"
    # node:out_arg:index -> flat output index; arg -> the call's input; nested body under the nested call
    assert list(nodes["call/idn"].input) == ["call/c1", "call/c2_1:1"]
    assert list(nodes["call/c1/lr"].input) == ["x"] and list(nodes["call/c2_1/lr"].input) == ["y"]
    assert list(nodes["call/c2_1/m"].input) == ["y", "call/c2_1/two"]
    assert list(nodes["call/p/a"].input) == ["call/c1", "call/c2_1"]
    assert nodes["call/c1/lr"].attr["alpha"].f == 0.25 and nodes["call/c2_1/lr"].attr["alpha"].f == 0.5
    assert nodes["call/c1/lr"].attr["T"].type == 1 and nodes["call/c2_1/two"].attr["dtype"].type == 1
    m = import_tf(gr.bytes(), out_nodes=["call:1"])
    relus = [(op.location.desc.data, op.alpha.value.data) for op in m.walk() if op.name == "graph.leaky_relu"]
    assert relus == [("call/c1/lr", 0.25), ("call/c2_1/lr", 0.5)]


def test_function_call_errors():
    gr = G()
    gr.ph("x", [2])
    gr.node("call", "PartitionedCall", ["x"], f=Func("missing"))
    with pytest.raises(CannError) as e:
        import_tf(gr.bytes())
    assert e.value.lines() == ["error: call: PartitionedCall calls function 'missing', which the graph's "
                               "function library does not define"]

    gr = G()
    f = gr.function("loop", ["a"], ["b"], {"b": "again:output:0"})
    f.node("again", "PartitionedCall", ["a"], f=Func("loop"))
    gr.ph("x", [2])
    gr.node("call", "PartitionedCall", ["x"], f=Func("loop"))
    with pytest.raises(CannError) as e:
        import_tf(gr.bytes())
    assert e.value.lines() == ["error: call/again: function 'loop' calls itself (call chain loop -> loop)"]

    gr = G()
    f = gr.function("scaled", ["a"], ["b"], {"b": "r:activations:0"}, attrs=[("alpha", "float")])
    f.node("r", "LeakyRelu", ["a"], alpha=Placeholder("alpha"))
    gr.ph("x", [2])
    gr.node("call", "PartitionedCall", ["x"], f=Func("scaled"))
    with pytest.raises(CannError) as e:
        import_tf(gr.bytes())
    assert e.value.lines() == ["error: call: function 'scaled' uses attribute 'alpha', which its call does not set"]

    for ref, msg in (("nope:output:0", "names no argument or node of the body"),
                     ("r:activations:x", "is not arg, arg:i or node:out_arg:index"),
                     ("a:3", "is out of range")):
        bad = G()
        f = bad.function("f", ["a"], ["b"], {"b": ref})
        f.node("r", "Relu", ["a"])
        bad.ph("x", [2])
        bad.node("call", "PartitionedCall", ["x"], f=Func("f"))
        with pytest.raises(CannError) as e:
            import_tf(bad.bytes())
        assert e.value.lines() == [f"error: call: function 'f': input '{ref}' {msg}"]

    gr.gd.node[-1].op = "scaled"  # a direct call: attributes on the node
    gr.gd.node[-1].attr["alpha"].f = 0.1
    gr.gd.node[-1].input.append("x")
    with pytest.raises(CannError) as e:
        import_tf(gr.bytes())
    assert e.value.lines() == ["error: call: scaled passes 2 inputs to function 'scaled', which takes 1"]


# -- errors -------------------------------------------------------------------------------------


def test_unsupported_ops_all_listed():
    gr = G()
    gr.ph("x", [1, 4])
    gr.node("top", "TopKV2", ["x", "x"])
    gr.node("r", "Relu", ["x"])
    gr.node("where", "Where", ["r"])
    gr.node("out", "AddN", ["top", "where"])
    with pytest.raises(CannError) as e:
        import_tf(gr.bytes())
    assert e.value.lines() == ["error: top: unsupported operator TopKV2", "error: where: unsupported operator Where"]


def test_unsupported_attribute_names_node():
    gr = G()
    gr.ph("x", [1, 4, 4, 3])
    for n in ("s", "o", "m", "v"):
        gr.const(n, np.ones(3, np.float32))
    gr.node("bn", "FusedBatchNormV3", ["x", "s", "o", "m", "v"], is_training=True)
    with pytest.raises(CannError) as e:
        import_tf(gr.bytes())
    assert e.value.lines() == ["error: bn: FusedBatchNormV3: is_training=true is not supported (inference only)"]


def test_missing_input_shape_names_input_and_dimension():
    gr = G()
    gr.ph("images", [-1, 8, -1, 3])
    gr.node("r", "Relu", ["images"])
    with pytest.raises(CannError) as e:
        import_tf(gr.bytes())
    assert e.value.lines() == ["error: images: dimension 0 of input 'images' is unknown "
                               "(shape ['?', 8, '?', 3]); fix it with input_shape, "
                               'e.g. --input_shape "images:1,8,1,3"']
    with pytest.raises(CannError) as e:
        import_tf(gr.bytes(), input_shape={"images:0": (1, 9, 8, 3)})
    assert e.value.lines() == ["error: images: input_shape dimension 1 is 9, the model fixes it to 8"]
    assert "tensor<1x8x5x3xf32>" in str(import_tf(gr.bytes(), input_shape={"images:0": (1, 8, 5, 3)}))
    with pytest.raises(CannError) as e:
        import_tf(gr.bytes(), input_shape={"nope": (1,)})
    assert e.value.lines() == ["error: nope: input_shape names no Placeholder (inputs: images)"]


def test_bad_out_node():
    gr = G()
    gr.ph("x", [2])
    gr.node("r", "Relu", ["x"])
    with pytest.raises(CannError) as e:
        import_tf(gr.bytes(), out_nodes=["nothing:0"])
    assert e.value.lines() == ["error: nothing:0: out_nodes names no node of the graph"]


def test_not_a_graphdef(tmp_path):
    p = tmp_path / "x.pb"
    p.write_bytes(b"\x08\x96\x01")
    with pytest.raises(CannError) as e:
        import_tf(p)
    (line,) = e.value.lines()
    assert line.startswith(f"error: {p}: not a TensorFlow GraphDef")
