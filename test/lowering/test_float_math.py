"""The float math of cann/lowering/transcendental.py and hardmax.py, run on the simulator against
onnx.reference.ReferenceEvaluator / numpy: the trigonometric and hyperbolic family, Tanh, Mish,
ThresholdedRelu, Shrink, Hardmax, GlobalMaxPool."""

from __future__ import annotations

import io

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import cann
import cann.compiler

F = TensorProto.FLOAT
FP32 = "must_keep_origin_dtype"
rng = np.random.default_rng(7)


def _model(op, shape, opset=22, name="n0", **attrs):
    g = helper.make_graph([helper.make_node(op, ["x"], ["y"], name=name, **attrs)], "t",
                          [helper.make_tensor_value_info("x", F, shape)], [helper.make_tensor_value_info("y", F, shape)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _run(m, x, mode=FP32):
    compiled = cann.compile(m, precision_mode=mode)
    return compiled.run({"x": x})["y"], compiled


def _logu(lo, hi, n):
    return np.exp(rng.uniform(np.log(lo), np.log(hi), n))


def _sym(x):
    return np.concatenate([x, -x])


#: op -> (float64 reference, inputs spanning the domain: tiny to large magnitudes)
CASES = {
    "Sin": (np.sin, _sym(np.concatenate([_logu(1e-30, 1e6, 1500), rng.uniform(0, 10, 500)]))),
    "Cos": (np.cos, _sym(np.concatenate([_logu(1e-30, 1e6, 1500), rng.uniform(0, 10, 500)]))),
    "Tan": (np.tan, _sym(np.concatenate([_logu(1e-30, 1e6, 1500), rng.uniform(0, 10, 500)]))),
    "Asin": (np.arcsin, _sym(np.concatenate([_logu(1e-38, 1, 1500), rng.uniform(0, 1, 500)]))),
    "Acos": (np.arccos, _sym(np.concatenate([_logu(1e-38, 1, 1500), rng.uniform(0, 1, 500)]))),
    "Atan": (np.arctan, _sym(_logu(1e-38, 1e38, 2000))),
    "Tanh": (np.tanh, _sym(np.concatenate([_logu(1e-38, 100, 1500), rng.uniform(0, 3, 500)]))),
    "Sinh": (np.sinh, _sym(np.concatenate([_logu(1e-38, 88.9, 1500), rng.uniform(0, 5, 500)]))),
    "Cosh": (np.cosh, _sym(np.concatenate([_logu(1e-38, 88.9, 1500), rng.uniform(0, 5, 500)]))),
    "Asinh": (np.arcsinh, _sym(_logu(1e-38, 1e38, 2000))),
    "Acosh": (np.arccosh, 1 + _logu(1e-7, 1e38, 2000)),
    "Atanh": (np.arctanh, _sym(np.concatenate([_logu(1e-38, 1, 1500), rng.uniform(0, 1, 500)]))),
    "Mish": (lambda x: x * np.tanh(np.log1p(np.exp(x))),
             np.concatenate([rng.uniform(-100, 100, 2000), _sym(_logu(1e-38, 100, 1000))])),
}


@pytest.mark.parametrize("op", sorted(CASES))
def test_fp32_accuracy(op):
    """Within 4 ulp (relative 5e-7) of the exact function over the whole tested domain."""
    ref_fn, x = CASES[op]
    x = x.astype(np.float32)
    y, _ = _run(_model(op, x.shape), x)
    with np.errstate(all="ignore"):
        r = ref_fn(x.astype(np.float64))
    normal = np.abs(r) > np.finfo(np.float32).tiny
    np.testing.assert_allclose(y[normal], r[normal], rtol=5e-7, atol=0)
    np.testing.assert_allclose(y[~normal], r[~normal], rtol=0, atol=1e-44)


@pytest.mark.parametrize("op", sorted(CASES))
def test_matches_reference_evaluator(op):
    """The spec's reference implementation on the conformance-style inputs, ONNX's tolerances tightened."""
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    if op in ("Asin", "Acos", "Atanh"):
        x = rng.uniform(-0.999, 0.999, (3, 4, 5)).astype(np.float32)
    elif op == "Acosh":
        x = rng.uniform(1, 10, (3, 4, 5)).astype(np.float32)
    m = _model(op, x.shape)
    y, _ = _run(m, x)
    np.testing.assert_allclose(y, ReferenceEvaluator(m).run(None, {"x": x})[0], rtol=1e-6, atol=1e-7)


SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 1e-45, -1e-45, 2.0, -2.0], np.float32)


@pytest.mark.parametrize("op", ["Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Tanh", "Sinh", "Cosh", "Asinh",
                                "Acosh", "Atanh"])
def test_special_values(op):
    """Zeros keep their value, infinities and domain edges give numpy's results (NaN outside the domain)."""
    ref_fn = CASES[op][0]
    y, _ = _run(_model(op, SPECIAL.shape), SPECIAL)
    with np.errstate(all="ignore"):
        r = ref_fn(SPECIAL.astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(y, r, rtol=1e-6, atol=0)  # equal_nan by default


@pytest.mark.parametrize("op", ["Sin", "Cos", "Atan", "Asinh", "Tanh", "Mish", "Acos"])
def test_force_fp16(op):
    """fp16 storage: the program runs in fp32 between vconv's; the result is the reference rounded to fp16."""
    ref_fn, x = CASES[op]
    x = x[np.abs(x) < 6e4].astype(np.float16).astype(np.float32)
    y, _ = _run(_model(op, x.shape), x, "force_fp16")
    with np.errstate(all="ignore"):
        r = ref_fn(x.astype(np.float64))
    ok = np.abs(r) < 6e4
    np.testing.assert_allclose(y[ok], r[ok], rtol=1e-3, atol=1e-7)


def test_mish_small_arguments_keep_relative_precision():
    """tanh(softplus(x)) for x -> -inf and |x| -> 0: the conformance case fails at rtol 1e-3 with the
    composite form (9.6e-7 absolute error near x = -10)."""
    x = np.concatenate([-_logu(5, 100, 1000), _sym(_logu(1e-20, 1e-2, 1000))]).astype(np.float32)
    y, _ = _run(_model("Mish", x.shape), x)
    r = x.astype(np.float64) * np.tanh(np.log1p(np.exp(x.astype(np.float64))))
    np.testing.assert_allclose(y, r, rtol=5e-7, atol=2e-45)  # subnormal results: half an ulp


def test_programs_run_on_the_vector_unit():
    """No host math: the kernel is the vector unit's instructions (vsel for the branches), between DMAs."""
    m = _model("Atan", (300,))
    buf = io.StringIO()
    cann.compiler.emit(m, "asm", buf, precision_mode=FP32)
    ops = {ln.split()[2] for ln in buf.getvalue().splitlines() if ln.startswith("  ")}
    assert {"vmuls", "vadds", "vmul", "vdiv", "vsel", "vabs", "vmin", "vrelu"} <= ops
    assert ops <= {"copy_gm_to_ub", "copy_ub_to_gm", "pipe_barrier", "set_flag", "wait_flag"} | {
        o for o in ops if o.startswith("v")}


def _neighbours(c):
    c = np.float32(c)
    return [np.nextafter(c, np.float32(-np.inf)), c, np.nextafter(c, np.float32(np.inf))]


@pytest.mark.parametrize("alpha", [1.0, 2.0, -0.5, 0.0])
def test_thresholded_relu_exact(alpha):
    x = np.concatenate([rng.standard_normal(200) * 3, _neighbours(alpha), [0.0, -0.0, np.inf, -np.inf, 1e-45]])
    x = x.astype(np.float32)
    y, _ = _run(_model("ThresholdedRelu", x.shape, alpha=alpha), x)
    np.testing.assert_array_equal(y, np.where(x > np.float32(alpha), x, 0).astype(np.float32))


@pytest.mark.parametrize("bias,lambd", [(0.0, 1.5), (1.5, 1.5), (0.25, 0.5), (0.0, 0.0)])
def test_shrink_exact(bias, lambd):
    x = np.concatenate([rng.standard_normal(200) * 3, _neighbours(lambd), _neighbours(-lambd),
                        [0.0, np.inf, -np.inf]]).astype(np.float32)
    m = _model("Shrink", x.shape, opset=9, bias=bias, lambd=lambd)
    y, _ = _run(m, x)
    np.testing.assert_array_equal(y, ReferenceEvaluator(m).run(None, {"x": x})[0])


@pytest.mark.parametrize("shape,axis,opset", [((3, 4, 5), 0, 13), ((3, 4, 5), 1, 13), ((3, 4, 5), 2, 13),
                                              ((3, 4, 5), -1, 13), ((2, 3, 4), 1, 11), ((6, 700), 1, 13),
                                              ((2, 3, 4, 5), 2, 13)])
@pytest.mark.parametrize("mode", [FP32, "force_fp16"])
def test_hardmax(shape, axis, opset, mode):
    """Ties (many equal values) go to the first index, as the reference's argmax."""
    x = rng.integers(-3, 4, shape).astype(np.float32)  # many ties
    x.reshape(-1)[:7] = [np.inf, np.inf, -np.inf, 1e-45, 0.0, -0.0, 5.0][: x.size]
    m = _model("Hardmax", shape, opset=opset, axis=axis)
    y, _ = _run(m, x, mode)
    if opset >= 13:
        ref = ReferenceEvaluator(m).run(None, {"x": x})[0]
    else:  # the spec's flattened [prod(dims[:axis]), prod(dims[axis:])] rule (the evaluator applies opset 13's)
        flat = x.reshape(int(np.prod(shape[:axis])), -1)
        ref = np.zeros_like(flat)
        ref[np.arange(flat.shape[0]), flat.argmax(axis=1)] = 1
        ref = ref.reshape(shape)
    np.testing.assert_array_equal(y, ref)


def test_hardmax_nearly_equal_values():
    """Values one ulp apart (and subnormal differences) are told apart."""
    base = np.float32(1.2345)
    x = np.array([[base, np.nextafter(base, np.float32(2)), base],
                  [1.4e-45, 0.0, 2.8e-45], [-1.4e-45, -0.0, 0.0]], np.float32)
    m = _model("Hardmax", x.shape, opset=13)
    y, _ = _run(m, x)
    np.testing.assert_array_equal(y, [[0, 1, 0], [0, 0, 1], [0, 1, 0]])


@pytest.mark.parametrize("shape", [(1, 3, 5, 5), (2, 20, 7), (1, 2, 3, 4, 5)])
def test_global_max_pool(shape):
    x = rng.standard_normal(shape).astype(np.float32)
    m = helper.make_model(helper.make_graph(
        [helper.make_node("GlobalMaxPool", ["x"], ["y"])], "t", [helper.make_tensor_value_info("x", F, shape)],
        [helper.make_tensor_value_info("y", F, shape[:2] + (1,) * (len(shape) - 2))]),
        opset_imports=[helper.make_opsetid("", 22)])
    y = cann.compile(m, precision_mode=FP32).run({"x": x})["y"]
    np.testing.assert_array_equal(y, x.max(axis=tuple(range(2, len(shape))), keepdims=True))


@pytest.mark.parametrize("p", [1, 2, 3, 4])
@pytest.mark.parametrize("mode", [FP32, "force_fp16"])
def test_global_lp_pool(p, mode):
    """(sum |x|^p)^(1/p) over the spatial axes (onnx.reference has no GlobalLpPool: numpy in float64)."""
    shape = (2, 3, 5, 4)
    x = rng.standard_normal(shape).astype(np.float32)
    m = helper.make_model(helper.make_graph(
        [helper.make_node("GlobalLpPool", ["x"], ["y"], p=p)], "t", [helper.make_tensor_value_info("x", F, shape)],
        [helper.make_tensor_value_info("y", F, (2, 3, 1, 1))]), opset_imports=[helper.make_opsetid("", 22)])
    y = cann.compile(m, precision_mode=mode).run({"x": x})["y"]
    ref = (np.abs(x.astype(np.float64)) ** p).sum(axis=(2, 3), keepdims=True) ** (1.0 / p)
    np.testing.assert_allclose(y, ref, rtol=1e-5 if mode == FP32 else 3e-3)


def _det_model(shape):
    return helper.make_model(helper.make_graph(
        [helper.make_node("Det", ["x"], ["y"])], "t", [helper.make_tensor_value_info("x", F, shape)],
        [helper.make_tensor_value_info("y", F, shape[:-2])]), opset_imports=[helper.make_opsetid("", 22)])


@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (3, 3), (3, 2, 2), (5, 4, 4), (2, 3, 6, 6), (700, 3, 3), (8, 8)])
def test_det(shape):
    x = rng.standard_normal(shape).astype(np.float32)
    y = cann.compile(_det_model(shape), precision_mode=FP32).run({"x": x})["y"]
    ref = np.linalg.det(x.astype(np.float64))
    scale = np.prod(np.linalg.norm(x.astype(np.float64), axis=-1), axis=-1)  # Hadamard's bound
    np.testing.assert_allclose(y, ref, rtol=0, atol=1e-6 * scale.max())
    np.testing.assert_allclose(y, ReferenceEvaluator(_det_model(shape)).run(None, {"x": x})[0], rtol=1e-4, atol=1e-5)


def test_det_pivoting_and_singular():
    """A zero leading entry needs a row swap (sign flip); singular matrices give 0, not NaN."""
    x = np.array([[[0, 1, 2], [1, 0, 3], [4, -3, 8]],      # pivot swap
                  [[1, 2, 3], [2, 4, 6], [1, 1, 1]],       # rank 2
                  [[0, 0, 0], [1, 2, 3], [4, 5, 6]],       # zero row
                  [[0, 0, 1], [0, 1, 0], [1, 0, 0]],       # permutation, det -1
                  [[2, 0, 0], [0, 3, 0], [0, 0, 4]]], np.float32)
    y = cann.compile(_det_model(x.shape), precision_mode=FP32).run({"x": x})["y"]
    np.testing.assert_allclose(y, np.linalg.det(x.astype(np.float64)), atol=1e-5)
    assert not np.isnan(y).any()


def test_det_force_fp16():
    x = rng.standard_normal((6, 3, 3)).astype(np.float16).astype(np.float32)
    y = cann.compile(_det_model(x.shape), precision_mode="force_fp16").run({"x": x})["y"]
    np.testing.assert_allclose(y, np.linalg.det(x.astype(np.float64)), rtol=0, atol=2e-2)


def test_bad_attribute_is_an_error_naming_the_node():
    m = _model("Hardmax", (2, 3), opset=13, name="hm_7", axis=2)
    with pytest.raises(cann.CannError, match=r"hm_7.*'axis'|axis.*hm_7"):
        cann.compile(m)
