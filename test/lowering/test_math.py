"""AI Core lowerings of cann/lowering/math.py, run on the simulator against numpy (fp32 mode)."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import cann

F = TensorProto.FLOAT


def run(nodes, inputs: dict[str, np.ndarray], out_shape, inits=None, opset=18, mode="must_keep_origin_dtype"):
    g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info(n, F, a.shape) for n, a in inputs.items()],
                          [helper.make_tensor_value_info("y", F, out_shape)],
                          [numpy_helper.from_array(np.asarray(a), n) for n, a in (inits or {}).items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    return cann.compile(m, precision_mode=mode).run(inputs)["y"]


rng = np.random.default_rng(0)
X = rng.standard_normal((2, 3, 4)).astype(np.float32)


@pytest.mark.parametrize("a_shape,b_shape", [((2, 3, 4), (4,)), ((2, 1, 4), (3, 1)), ((1,), (2, 3, 4)),
                                             ((3, 4), (2, 1, 1))])
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Max", "Min"])
def test_broadcast_binary(op, a_shape, b_shape):
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = (rng.uniform(0.5, 2, b_shape) * rng.choice([-1, 1], b_shape)).astype(np.float32)
    ref = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide, "Max": np.maximum,
           "Min": np.minimum}[op](a, b)
    y = run([helper.make_node(op, ["a", "b"], ["y"])], {"a": a, "b": b}, ref.shape)
    np.testing.assert_allclose(y, ref, rtol=1e-6, atol=1e-7)


def _erf(x):
    return np.vectorize(math.erf)(x.astype(np.float64))


@pytest.mark.parametrize("op,attrs,ref", [
    ("Sigmoid", {}, lambda x: 1 / (1 + np.exp(-x))),
    ("Tanh", {}, np.tanh),
    ("Erf", {}, _erf),
    ("Softplus", {}, lambda x: np.logaddexp(0, x.astype(np.float64))),
    ("Elu", {"alpha": 0.5}, lambda x: np.where(x > 0, x, 0.5 * (np.exp(x) - 1))),
    ("LeakyRelu", {"alpha": 0.1}, lambda x: np.where(x > 0, x, 0.1 * x)),
    ("HardSigmoid", {}, lambda x: np.clip(0.2 * x + 0.5, 0, 1)),
    ("Gelu", {}, lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2)))),
    ("Gelu", {"approximate": "tanh"}, lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))),
])
def test_unary(op, attrs, ref):
    x = np.concatenate([rng.standard_normal(50) * 3, [0.0, -1e-3, 1e-3, 30.0, -30.0, 100.0, -100.0]]).astype(np.float32)
    y = run([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": x}, x.shape, opset=20)
    np.testing.assert_allclose(y, ref(x), rtol=1e-5, atol=3e-7)


@pytest.mark.parametrize("kind", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                                  "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp"])
@pytest.mark.parametrize("axes", [[0], [1], [2], [0, 2], [1, 2], [0, 1, 2]])
def test_reduce(kind, axes):
    x = rng.uniform(0.5, 1.5, (5, 7, 9)).astype(np.float32)
    f = {"ReduceSum": np.sum, "ReduceMean": np.mean, "ReduceMax": np.max, "ReduceMin": np.min, "ReduceProd": np.prod,
         "ReduceL1": lambda a, axis, keepdims: np.sum(np.abs(a), axis=axis, keepdims=keepdims),
         "ReduceL2": lambda a, axis, keepdims: np.sqrt(np.sum(a * a, axis=axis, keepdims=keepdims)),
         "ReduceSumSquare": lambda a, axis, keepdims: np.sum(a * a, axis=axis, keepdims=keepdims),
         "ReduceLogSumExp": lambda a, axis, keepdims: np.log(np.sum(np.exp(a), axis=axis, keepdims=keepdims))}[kind]
    ref = f(x, axis=tuple(axes), keepdims=False)
    y = run([helper.make_node(kind, ["x", "axes"], ["y"], keepdims=0)], {"x": x}, ref.shape,
            inits={"axes": np.array(axes, np.int64)})
    np.testing.assert_allclose(y, ref, rtol=1e-5)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad(mode):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    pads = [0, 1, 2, 1, 2, 3]
    ref = np.pad(x, [(0, 1), (1, 2), (2, 3)], mode=mode, **({"constant_values": 1.5} if mode == "constant" else {}))
    inits = {"pads": np.array(pads, np.int64), "v": np.array(1.5, np.float32)}
    y = run([helper.make_node("Pad", ["x", "pads", "v"], ["y"], mode=mode)], {"x": x}, ref.shape, inits=inits)
    np.testing.assert_array_equal(y, ref)


def test_slice_negative_steps():
    x = rng.standard_normal((4, 5, 6)).astype(np.float32)
    ref = x[3:0:-2, :, 5:-7:-2]
    inits = {"s": np.array([3, 5, 0], np.int64), "e": np.array([0, -7, 5], np.int64),
             "a": np.array([0, 2, 1], np.int64), "p": np.array([-2, -2, 1], np.int64)}
    y = run([helper.make_node("Slice", ["x", "s", "e", "a", "p"], ["y"])], {"x": x}, ref.shape, inits=inits)
    np.testing.assert_array_equal(y, ref)


def test_layer_norm():
    x = rng.standard_normal((3, 4, 8)).astype(np.float32)
    s, b = rng.standard_normal(8).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    mu = x.mean(-1, keepdims=True)
    ref = (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * s + b
    y = run([helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"])], {"x": x}, ref.shape,
            inits={"s": s, "b": b}, opset=17)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)


def test_fp16_mode_broadcast():
    a, b = X, rng.standard_normal((3, 1)).astype(np.float32)
    y = run([helper.make_node("Add", ["a", "b"], ["y"])], {"a": a, "b": b}, a.shape, mode="force_fp16")
    ref = a + b
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) < 1e-2


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_softmax_and_log_softmax_any_axis(axis):
    x = rng.standard_normal((3, 4, 5)).astype(np.float32) * 3
    e = np.exp(x - x.max(axis, keepdims=True))
    sm = e / e.sum(axis, keepdims=True)
    y = run([helper.make_node("Softmax", ["x"], ["y"], axis=axis)], {"x": x}, x.shape, opset=13)
    np.testing.assert_allclose(y, sm, rtol=1e-5, atol=1e-7)
    y = run([helper.make_node("LogSoftmax", ["x"], ["y"], axis=axis)], {"x": x}, x.shape, opset=13)
    np.testing.assert_allclose(y, np.log(sm), rtol=1e-5, atol=1e-6)


def test_expand_and_split():
    x = rng.standard_normal((3, 1)).astype(np.float32)
    y = run([helper.make_node("Expand", ["x", "s"], ["y"])], {"x": x}, (2, 3, 4),
            inits={"s": np.array([2, 1, 4], np.int64)})
    np.testing.assert_array_equal(y, np.broadcast_to(x, (2, 3, 4)))
    x = rng.standard_normal((2, 6)).astype(np.float32)
    y = run([helper.make_node("Split", ["x", "sp"], ["a", "y"], axis=1)], {"x": x}, (2, 4),
            inits={"sp": np.array([2, 4], np.int64)})
    np.testing.assert_array_equal(y, x[:, 2:])
