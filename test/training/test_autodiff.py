"""Gradient rules (cann/training/autodiff.py) on the simulator against finite differences of
onnxruntime, the training-mode rewrites, the optimizers' step scalars against ONNX's reference
update functions, and the one-line errors."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as H
from onnx.reference import ReferenceEvaluator
from onnx.reference.ops.aionnx_preview_training.op_adam import _apply_adam
from onnx.reference.ops.aionnx_preview_training.op_momentum import _apply_momentum

import cann
from cann.errors import CannError
from cann.training import Adam, Momentum, Trainer, build
from cann.training.primitives import selection

RNG = np.random.default_rng(0)


def model(nodes, inits: dict[str, np.ndarray], x_shape, out_shape) -> onnx.ModelProto:
    g = H.make_graph(nodes, "t", [H.make_tensor_value_info("x", T.FLOAT, x_shape)],
                     [H.make_tensor_value_info("y", T.FLOAT, out_shape)],
                     [onnx.numpy_helper.from_array(v, k) for k, v in inits.items()])
    return H.make_model(g, opset_imports=[H.make_opsetid("", 18)])


def fd_gradients(m: onnx.ModelProto, x, target, eps=1e-4) -> dict[str, np.ndarray]:
    """Central differences of the mean squared error in float64 (onnx's reference evaluator on
    float64 values), the float parameters of more than one element perturbed as inputs."""
    trained = [i for i in m.graph.initializer if i.data_type == T.FLOAT and np.prod(i.dims) > 1]
    inits = {i.name: onnx.numpy_helper.to_array(i).astype(np.float64) for i in trained}
    m2 = onnx.ModelProto()
    m2.CopyFrom(m)
    for name, v in inits.items():
        m2.graph.input.append(H.make_tensor_value_info(name, T.DOUBLE, list(v.shape)))
    kept = [onnx.numpy_helper.from_array(a.astype(np.float64) if a.dtype == np.float32 else a, i.name)
            for i in m2.graph.initializer if i.name not in inits for a in [onnx.numpy_helper.to_array(i)]]
    del m2.graph.initializer[:]
    m2.graph.initializer.extend(kept)
    for vi in (*m2.graph.input, *m2.graph.output):
        vi.type.tensor_type.elem_type = T.DOUBLE
    sess = ReferenceEvaluator(m2)
    x64 = x.astype(np.float64)

    def loss(vals):
        y = np.asarray(sess.run(None, {"x": x64, **vals})[0], np.float64)
        return float(np.mean((y - target) ** 2))

    out = {}
    for name, v in inits.items():
        g = np.zeros_like(v)
        for i in np.ndindex(v.shape):
            for sign in (1, -1):
                w = v.copy()
                w[i] += sign * eps
                g[i] += sign * loss({**inits, name: w}) / (2 * eps)
        out[name] = g
    return out


def sim_gradients(m, x, target) -> tuple[dict[str, np.ndarray], float]:
    tp = build(m, loss="mse")
    compiled = cann.compile(tp.module, precision_mode="must_keep_origin_dtype")
    out = compiled.run({"x": x, "target": target, **tp.params})
    return {k: out[k + ".grad"] for k in tp.params}, float(out["loss"][0])


def test_rules_against_finite_differences():
    """Mul/Add/Sub/Div broadcasting, Sigmoid, Tanh, Exp, Sqrt, Log, AveragePool, MaxPool, Concat,
    Slice, Transpose, Reshape, Softmax, ReduceSum, MatMul by a parameter."""
    inits = {"p1": RNG.uniform(0.5, 1.5, (1, 3, 1, 1)).astype(np.float32),
             "p2": RNG.standard_normal(4).astype(np.float32),
             "w": (RNG.standard_normal((16, 5)) * 0.3).astype(np.float32),
             "one": np.ones((1,), np.float32), "axes": np.array([1], np.int64),
             "st": np.array([1], np.int64), "en": np.array([5], np.int64), "shape": np.array([2, 16], np.int64)}
    nodes = [
        H.make_node("Mul", ["x", "p1"], ["a"]),
        H.make_node("Sigmoid", ["a"], ["b"]),
        H.make_node("Add", ["a", "p2"], ["a2"]),
        H.make_node("Tanh", ["a2"], ["c"]),
        H.make_node("AveragePool", ["b"], ["d"], kernel_shape=[2, 2], strides=[2, 2]),
        H.make_node("MaxPool", ["c"], ["e"], kernel_shape=[2, 2], strides=[2, 2]),
        H.make_node("Concat", ["d", "e"], ["f"], axis=1),
        H.make_node("Mul", ["f", "f"], ["f2"]),
        H.make_node("Add", ["f2", "one"], ["f3"]),
        H.make_node("Sqrt", ["f3"], ["f4"]),
        H.make_node("Exp", ["f"], ["f5"]),
        H.make_node("Div", ["f5", "f4"], ["f6"]),
        H.make_node("Sub", ["f", "f6"], ["g"]),
        H.make_node("Slice", ["g", "st", "en", "axes"], ["h"]),
        H.make_node("Transpose", ["h"], ["i"], perm=[0, 2, 3, 1]),
        H.make_node("Reshape", ["i", "shape"], ["j"]),
        H.make_node("Softmax", ["j"], ["k"], axis=1),
        H.make_node("Log", ["k"], ["k2"]),
        H.make_node("ReduceSum", ["k2", "axes"], ["k3"], keepdims=1),
        H.make_node("Add", ["k2", "k3"], ["k4"]),
        H.make_node("MatMul", ["k4", "w"], ["y"]),
    ]
    m = model(nodes, inits, [2, 3, 4, 4], [2, 5])
    x = RNG.standard_normal((2, 3, 4, 4)).astype(np.float32)
    target = RNG.standard_normal((2, 5)).astype(np.float32)
    got, loss = sim_gradients(m, x, target)
    assert sorted(got) == ["p1", "p2", "w"]  # the integer and one-element initializers are not trained
    ref = fd_gradients(m, x, target)
    for k, g in got.items():
        err = np.linalg.norm(g - ref[k]) / np.linalg.norm(ref[k])
        assert err < 2e-4, (k, err)


def test_conv_rewrite_strided_padded_grouped_with_bias():
    """Conv (stride 2, asymmetric pads, dilation 1, groups 2, bias) through the im2col matmuls; Gemm
    with transB and a bias; both against finite differences."""
    inits = {"w": (RNG.standard_normal((4, 2, 3, 3)) * 0.3).astype(np.float32),
             "b": RNG.standard_normal(4).astype(np.float32),
             "fw": (RNG.standard_normal((3, 36)) * 0.2).astype(np.float32),
             "fb": RNG.standard_normal(3).astype(np.float32), "shape": np.array([2, 36], np.int64)}
    nodes = [H.make_node("Conv", ["x", "w", "b"], ["c"], strides=[2, 2], pads=[1, 0, 1, 1], group=2),
             H.make_node("Reshape", ["c", "shape"], ["r"]),
             H.make_node("Gemm", ["r", "fw", "fb"], ["y"], transB=1, alpha=0.5)]
    m = model(nodes, inits, [2, 4, 6, 6], [2, 3])
    x = RNG.standard_normal((2, 4, 6, 6)).astype(np.float32)
    target = RNG.standard_normal((2, 3)).astype(np.float32)
    got, _ = sim_gradients(m, x, target)
    ref = fd_gradients(m, x, target)
    for k, g in got.items():
        assert np.linalg.norm(g - ref[k]) / np.linalg.norm(ref[k]) < 2e-4, k


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_both_forms(approximate):
    inits = {"w": (RNG.standard_normal((3, 4)) * 0.8).astype(np.float32)}
    nodes = [H.make_node("MatMul", ["x", "w"], ["m"]), H.make_node("Gelu", ["m"], ["y"], approximate=approximate)]
    g = H.make_graph(nodes, "t", [H.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                     [H.make_tensor_value_info("y", T.FLOAT, [2, 4])], [onnx.numpy_helper.from_array(inits["w"], "w")])
    m = H.make_model(g, opset_imports=[H.make_opsetid("", 20)])
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    target = RNG.standard_normal((2, 4)).astype(np.float32)
    got, _ = sim_gradients(m, x, target)
    ref = fd_gradients(m, x, target)
    assert np.linalg.norm(got["w"] - ref["w"]) / np.linalg.norm(ref["w"]) < 2e-4


def test_clip_leaky_relu_abs_max_min():
    """ReLU6 (Clip 0..6), LeakyRelu, Abs, Max and Min (broadcasting) against finite differences."""
    inits = {"w": (RNG.standard_normal((3, 8)) * 3).astype(np.float32), "v": RNG.standard_normal(8).astype(np.float32),
             "lo": np.float32(0.0), "hi": np.float32(6.0)}
    nodes = [H.make_node("MatMul", ["x", "w"], ["m"]),
             H.make_node("Clip", ["m", "lo", "hi"], ["c"]),
             H.make_node("LeakyRelu", ["m"], ["l"], alpha=0.1),
             H.make_node("Abs", ["m"], ["a"]),
             H.make_node("Max", ["c", "v"], ["mx"]),
             H.make_node("Min", ["l", "v"], ["mn"]),
             H.make_node("Add", ["mx", "mn"], ["s"]),
             H.make_node("Add", ["s", "a"], ["y"])]
    m = model(nodes, inits, [4, 3], [4, 8])
    x = RNG.standard_normal((4, 3)).astype(np.float32)
    target = RNG.standard_normal((4, 8)).astype(np.float32)
    got, _ = sim_gradients(m, x, target)
    assert sorted(got) == ["v", "w"]
    ref = fd_gradients(m, x, target)
    for k, g in got.items():
        assert np.linalg.norm(g - ref[k]) / np.linalg.norm(ref[k]) < 2e-4, k


def test_selection_matrix():
    s = selection(5, 3, 2, 1, 1, 3)  # 5 inputs, kernel 3, stride 2, pad 1 -> 3 outputs
    assert s.shape == (5, 9)
    cols = [np.flatnonzero(s[:, c]).tolist() for c in range(9)]
    assert cols == [[], [1], [3], [0], [2], [4], [1], [3], []]  # tap t, output o reads o*2 + t - 1


def test_optimizer_scalars_follow_onnx():
    x, g, v = np.float32([1.0, -2.0]), np.float32([0.5, 0.25]), np.float32([0.1, 0.2])
    mo = Momentum(lr=0.1, alpha=0.9, beta=0.5)
    for step in (0, 3):
        s = mo.scalars(step)
        want, _ = _apply_momentum(np.float32(0.1), step, x, g, v, 0.0, 0.9, 0.5)
        assert np.allclose(x - s["lr"] * (0.9 * v + s["grad_coef"] * g), want)
    ad = Adam(lr=0.01)
    h = np.float32([0.3, 0.4])
    for step in (0, 4):
        want, v_new, h_new = _apply_adam(np.float32(0.01), step + 1, x, g, v, h, 0.0, 0.0, 0.9, 0.999, 1e-6)
        got = x - ad.scalars(step)["lr"] * (v_new / (np.sqrt(h_new) + 1e-6))
        assert np.allclose(got, want, rtol=1e-6)


def test_no_rule_names_the_node():
    inits = {"p": RNG.standard_normal((2, 3)).astype(np.float32)}
    m = model([H.make_node("Pow", ["x", "p"], ["y"], name="the_pow")], inits, [2, 3], [2, 3])
    with pytest.raises(CannError, match="the_pow: no gradient rule for graph.pow"):
        build(m, loss="mse")


def test_overlapping_max_pool_is_refused():
    inits = {"p": np.ones((1, 2, 1, 1), np.float32) * 2}
    nodes = [H.make_node("Mul", ["x", "p"], ["a"]),
             H.make_node("MaxPool", ["a"], ["y"], kernel_shape=[3, 3], strides=[2, 2], name="pool")]
    m = model(nodes, inits, [1, 2, 7, 7], [1, 2, 3, 3])
    with pytest.raises(CannError, match=r"pool: no gradient rule for graph.max_pool with kernel \[3, 3\], strides "
                                        r"\[2, 2\].*only windows tiling the input"):
        build(m, loss="mse")


def test_bad_arguments():
    inits = {"p": RNG.standard_normal((2, 3)).astype(np.float32)}
    m = model([H.make_node("Mul", ["x", "p"], ["y"])], inits, [2, 3], [2, 3])
    with pytest.raises(CannError, match="loss: unknown loss 'hinge' \\(known: softmax_cross_entropy, mse\\)"):
        build(m, loss="hinge")
    with pytest.raises(CannError, match="params: not initializers of the model: q"):
        build(m, params=["q"])
    with pytest.raises(CannError, match="optimizer: a Trainer needs a program built with an optimizer"):
        Trainer(build(m))


def test_program_signature():
    inits = {"p": RNG.standard_normal((2, 3)).astype(np.float32)}
    m = model([H.make_node("Mul", ["x", "p"], ["y"])], inits, [2, 3], [2, 3])
    tp = build(m, optimizer=Adam(), gradients=True)
    fn = tp.module.body.block.first_op
    names = [d.data["graph.name"].data for d in fn.arg_attrs.data]
    assert names == ["x", "target", "p", "lr", "p.momentum1", "p.momentum2"]
    assert tp.outputs == ["loss", "p", "p.momentum1", "p.momentum2", "p.grad"]
    assert [d.data["graph.name"].data for d in fn.res_attrs.data] == tp.outputs
