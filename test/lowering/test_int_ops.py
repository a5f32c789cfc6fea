"""Comparisons, boolean logic, integer arithmetic, int/bool casts and rounding on the simulated AI
Core, against onnx.reference (cann/lowering/compare.py, cann/frontend/onnx_int.py)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper
from onnx.reference import ReferenceEvaluator

import cann

MODES = ("must_keep_origin_dtype", "force_fp16")
RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 70)).astype(np.float32) * 3
B = RNG.standard_normal((3, 70)).astype(np.float32) * 3
B[0, :5] = A[0, :5]  # some equal pairs
AI = RNG.integers(-6, 6, (3, 70)).astype(np.int64)
BI = RNG.integers(-6, 6, (70,)).astype(np.int64)
BA = RNG.integers(0, 2, (3, 70)).astype(bool)
BB = RNG.integers(0, 2, (3, 70)).astype(bool)
AN = A.copy()
AN[0, 1], AN[1, 1], AN[2, 2] = np.nan, np.inf, -np.inf


def _model(op, ins, outs, **attrs):
    n = helper.make_node(op, [i[0] for i in ins], [o[0] for o in outs], name="n0", **attrs)
    g = helper.make_graph([n], "g", [helper.make_tensor_value_info(a, t, s) for a, t, s in ins],
                          [helper.make_tensor_value_info(a, t, s) for a, t, s in outs])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def _check(op, ins, outs, feeds, modes=MODES, **attrs):
    m = _model(op, ins, outs, **attrs)
    ref = ReferenceEvaluator(m).run(None, feeds)
    for pm in modes:
        got = cann.compile(m, precision_mode=pm).run(feeds)
        for (name, *_), r in zip(outs, ref):
            g = got[name]
            assert g.dtype == r.dtype and g.shape == r.shape, (pm, g.dtype, r.dtype)
            if r.dtype.kind == "f":
                tol = 1e-6 if pm == "must_keep_origin_dtype" else 2e-3 * max(1.0, float(np.nanmax(np.abs(r))))
                np.testing.assert_allclose(g, r, atol=tol, rtol=1e-6 if pm == "must_keep_origin_dtype" else 0,
                                           equal_nan=True, err_msg=pm)
            else:
                np.testing.assert_array_equal(g, r, err_msg=pm)


def _f(name, shape=(3, 70), t=TP.FLOAT):
    return (name, t, list(shape))


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
def test_float_comparisons(op):
    _check(op, [_f("a"), _f("b")], [_f("y", t=TP.BOOL)], {"a": A, "b": B})


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
@pytest.mark.parametrize("dt,t", [(np.int64, TP.INT64), (np.int32, TP.INT32)])
def test_integer_comparisons_broadcast(op, dt, t):
    _check(op, [_f("a", t=t), _f("b", (70,), t)], [_f("y", t=TP.BOOL)], {"a": AI.astype(dt), "b": BI.astype(dt)},
           modes=MODES[:1])


def test_int64_compare_is_exact_beyond_int32():
    a = np.array([2**40, -2**40, 2**33 + 1, 5], np.int64)
    b = np.array([2**40 + 1, -2**40, 2**33, 5], np.int64)
    _check("Less", [_f("a", (4,), TP.INT64), _f("b", (4,), TP.INT64)], [_f("y", (4,), TP.BOOL)], {"a": a, "b": b},
           modes=MODES[:1])


def test_nan_compares_false():
    _check("Equal", [_f("a"), _f("b")], [_f("y", t=TP.BOOL)], {"a": AN, "b": AN}, modes=MODES[:1])


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logical(op):
    _check(op, [_f("a", t=TP.BOOL), _f("b", t=TP.BOOL)], [_f("y", t=TP.BOOL)], {"a": BA, "b": BB})


def test_not_and_bool_equal():
    _check("Not", [_f("a", t=TP.BOOL)], [_f("y", t=TP.BOOL)], {"a": BA}, modes=MODES[:1])
    _check("Equal", [_f("a", t=TP.BOOL), _f("b", t=TP.BOOL)], [_f("y", t=TP.BOOL)], {"a": BA, "b": BB},
           modes=MODES[:1])


@pytest.mark.parametrize("t,dt", [(TP.FLOAT, np.float32), (TP.INT64, np.int64), (TP.INT32, np.int32)])
def test_where_runtime_condition(t, dt):
    x = (A * 10).astype(dt)
    y = (B[0] * 10).astype(dt)
    _check("Where", [_f("c", t=TP.BOOL), _f("a", t=t), _f("b", (70,), t)], [_f("y", t=t)], {"c": BA, "a": x, "b": y})


@pytest.mark.parametrize("to,t_to", [(np.int64, TP.INT64), (np.int32, TP.INT32), (np.bool_, TP.BOOL),
                                     (np.float16, TP.FLOAT16)])
def test_cast_from_float(to, t_to):
    x = A * 10
    x[0, :4] = [2.5, -2.5, -0.7, 0.0]  # truncation toward zero
    _check("Cast", [_f("a")], [_f("y", t=t_to)], {"a": x}, modes=MODES[:1], to=t_to)


@pytest.mark.parametrize("src,t_src,to,t_to", [
    (np.int64, TP.INT64, np.float32, TP.FLOAT), (np.int32, TP.INT32, np.float32, TP.FLOAT),
    (np.bool_, TP.BOOL, np.float32, TP.FLOAT), (np.bool_, TP.BOOL, np.int64, TP.INT64),
    (np.int32, TP.INT32, np.int64, TP.INT64), (np.int64, TP.INT64, np.int32, TP.INT32),
    (np.int64, TP.INT64, np.bool_, TP.BOOL), (np.bool_, TP.BOOL, np.float16, TP.FLOAT16),
])
def test_cast_int_bool(src, t_src, to, t_to):
    x = BA if src == np.bool_ else (AI * 1000).astype(src)
    _check("Cast", [_f("a", t=t_src)], [_f("y", t=t_to)], {"a": x}, modes=MODES[:1], to=t_to)


@pytest.mark.parametrize("op", ["Floor", "Ceil", "Round", "Sign"])
def test_rounding_and_sign(op):
    x = A.copy()
    x[0, :6] = [0.5, 1.5, 2.5, -0.5, -1.5, 0.0]  # Round: half to even
    _check(op, [_f("a")], [_f("y")], {"a": x})


def test_integer_sign_isnan_isinf():
    _check("Sign", [_f("a", t=TP.INT64)], [_f("y", t=TP.INT64)], {"a": AI}, modes=MODES[:1])
    _check("IsNaN", [_f("a")], [_f("y", t=TP.BOOL)], {"a": AN})
    for pos, neg in ((1, 1), (1, 0), (0, 1), (0, 0)):
        _check("IsInf", [_f("a")], [_f("y", t=TP.BOOL)], {"a": AN}, modes=MODES[:1], detect_positive=pos,
               detect_negative=neg)


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Max", "Min"])
def test_int32_arithmetic(op):
    _check(op, [_f("a", t=TP.INT32), _f("b", (70,), TP.INT32)], [_f("y", t=TP.INT32)],
           {"a": AI.astype(np.int32) * 1000, "b": BI.astype(np.int32) * 77}, modes=MODES[:1])


@pytest.mark.parametrize("op", ["Add", "Sub", "Max", "Min"])
def test_int64_arithmetic(op):
    a = AI * (2**35)
    _check(op, [_f("a", t=TP.INT64), _f("b", (70,), TP.INT64)], [_f("y", t=TP.INT64)], {"a": a, "b": BI},
           modes=MODES[:1])


@pytest.mark.parametrize("op,t,dt", [("Abs", TP.INT64, np.int64), ("Neg", TP.INT64, np.int64),
                                     ("Abs", TP.INT32, np.int32), ("Neg", TP.INT32, np.int32)])
def test_integer_unary(op, t, dt):
    _check(op, [_f("a", t=t)], [_f("y", t=t)], {"a": AI.astype(dt)}, modes=MODES[:1])


def test_integer_clip_with_bounds():
    m = _model("Clip", [_f("a", t=TP.INT64), ("lo", TP.INT64, []), ("hi", TP.INT64, [])], [_f("y", t=TP.INT64)])
    feeds = {"a": AI, "lo": np.array(-2, np.int64), "hi": np.array(3, np.int64)}
    got = cann.compile(m, precision_mode="must_keep_origin_dtype").run(feeds)["y"]
    np.testing.assert_array_equal(got, np.clip(AI, -2, 3))


def test_large_tensor_spans_several_chunks():
    a = np.random.default_rng(5).integers(-3, 3, (300, 300)).astype(np.int32)
    b = np.random.default_rng(6).integers(-3, 3, (300, 300)).astype(np.int32)
    _check("Less", [_f("a", (300, 300), TP.INT32), _f("b", (300, 300), TP.INT32)], [_f("y", (300, 300), TP.BOOL)],
           {"a": a, "b": b}, modes=MODES[:1])


def test_unsupported_dtype_and_int64_mul_name_the_node():
    m = _model("Equal", [_f("a", t=TP.UINT64), _f("b", t=TP.UINT64)], [_f("y", t=TP.BOOL)])
    with pytest.raises(cann.CannError) as e:
        cann.compile(m)
    assert e.value.lines() == ["error: n0: Equal on uint64 tensors is not supported (float16, float32, int32, "
                               "int64, int16, int8, uint8, uint16, uint32, bool)"]
    m = _model("Mul", [_f("a", t=TP.INT64), _f("b", t=TP.INT64)], [_f("y", t=TP.INT64)])
    with pytest.raises(cann.CannError) as e:
        cann.compile(m)
    assert e.value.lines() == ["error: n0: Mul of int64 tensors: the modeled vector unit has no int64 multiply"]


def test_kernels_use_the_integer_instructions():
    from cann.hw import isa

    m = _model("Less", [_f("a", t=TP.INT64), _f("b", t=TP.INT64)], [_f("y", t=TP.BOOL)])
    om = cann.compile(m, precision_mode="must_keep_origin_dtype").om
    text = "\n".join(i.asm() for k in om.kernels for i in isa.decode(k.code))
    assert "vcmpv dtype=5, mode=2" in text  # int64 lanes, lt
    m = _model("Cast", [_f("a")], [_f("y", t=TP.INT32)], to=TP.INT32)
    om = cann.compile(m, precision_mode="must_keep_origin_dtype").om
    text = "\n".join(i.asm() for k in om.kernels for i in isa.decode(k.code))
    assert "vconv src_dtype=1, dst_dtype=2, round=4" in text  # float32 -> int32, trunc


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("axis,keepdims,last", [(0, 1, 0), (1, 0, 0), (2, 1, 1), (-1, 0, 1), (1, 1, 1)])
@pytest.mark.parametrize("dt,t", [(np.float32, TP.FLOAT), (np.int64, TP.INT64)])
def test_arg_max_min(op, axis, keepdims, last, dt, t):
    x = np.random.default_rng(7).integers(-3, 3, (3, 4, 70)).astype(dt)  # ties: first / last index matters
    ax = axis % 3
    shp = [1 if i == ax else d for i, d in enumerate(x.shape) if keepdims or i != ax]
    n = helper.make_node(op, ["x"], ["y"], name="n0", axis=axis, keepdims=keepdims, select_last_index=last)
    g = helper.make_graph([n], "g", [helper.make_tensor_value_info("x", t, list(x.shape))],
                          [helper.make_tensor_value_info("y", TP.INT64, shp)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    ref = ReferenceEvaluator(m).run(None, {"x": x})[0]
    got = cann.compile(m, precision_mode="must_keep_origin_dtype").run({"x": x})["y"]
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("dt,t", [(np.uint8, TP.UINT8), (np.int8, TP.INT8), (np.int16, TP.INT16)])
def test_narrow_integers_compare_max_min(dt, t):
    info = np.iinfo(dt)
    rng = np.random.default_rng(11)
    a = rng.integers(info.min, info.max, (3, 70), endpoint=True).astype(dt)
    b = rng.integers(info.min, info.max, (70,), endpoint=True).astype(dt)
    a[0, :5] = b[:5]
    for op in ("Equal", "Less", "GreaterOrEqual"):
        _check(op, [_f("a", t=t), _f("b", (70,), t)], [_f("y", t=TP.BOOL)], {"a": a, "b": b}, modes=MODES[:1])
    for op in ("Max", "Min"):
        _check(op, [_f("a", t=t), _f("b", (70,), t)], [_f("y", t=t)], {"a": a, "b": b}, modes=MODES[:1])


def test_int16_arithmetic_wraps_and_uint32_mul_is_refused():
    a = np.array([30000, -30000, 7, -1], np.int16)
    b = np.array([10000, -10000, 9, 3], np.int16)
    for op in ("Add", "Sub", "Mul"):
        _check(op, [_f("a", (4,), TP.INT16), _f("b", (4,), TP.INT16)], [_f("y", (4,), TP.INT16)], {"a": a, "b": b},
               modes=MODES[:1])
    m = _model("Mul", [_f("a", t=TP.UINT32), _f("b", t=TP.UINT32)], [_f("y", t=TP.UINT32)])
    with pytest.raises(cann.CannError, match="Mul of uint32 tensors: the modeled vector unit has no int64 multiply"):
        cann.compile(m)


def test_float_to_8bit_cast_truncates_without_double_rounding():
    x = np.array([3.9999998, -3.9999998, 255.75, 0.3, 127.9, -128.5], np.float32)
    _check("Cast", [_f("a", (6,))], [_f("y", (6,), TP.INT8)], {"a": np.clip(x, -128.9, 127.9)}, modes=MODES[:1],
           to=TP.INT8)
    _check("Cast", [_f("a", (6,))], [_f("y", (6,), TP.UINT8)], {"a": np.abs(x)}, modes=MODES[:1], to=TP.UINT8)
    _check("Cast", [_f("a", (6,), TP.UINT8)], [_f("y", (6,), TP.FLOAT)], {"a": np.arange(250, 256).astype(np.uint8)},
           modes=MODES[:1], to=TP.FLOAT)


def test_clip_and_where_on_int8():
    x = np.arange(-60, 60, dtype=np.int8).reshape(3, 40)
    m = _model("Clip", [_f("a", (3, 40), TP.INT8), ("lo", TP.INT8, []), ("hi", TP.INT8, [])], [_f("y", (3, 40), TP.INT8)])
    got = cann.compile(m, precision_mode="must_keep_origin_dtype").run(
        {"a": x, "lo": np.array(-5, np.int8), "hi": np.array(17, np.int8)})["y"]
    np.testing.assert_array_equal(got, np.clip(x, -5, 17))
    _check("Where", [_f("c", (3, 40), TP.BOOL), _f("a", (3, 40), TP.INT8), _f("b", (40,), TP.INT8)],
           [_f("y", (3, 40), TP.INT8)], {"c": BA[:, :40], "a": x, "b": x[0]}, modes=MODES[:1])


def test_pow_with_an_integer_exponent_tensor():
    x = np.abs(A[:, :10]) + 0.5
    y = np.random.default_rng(3).integers(-2, 4, (3, 10)).astype(np.int64)
    _check("Pow", [_f("a", (3, 10)), _f("b", (3, 10), TP.INT64)], [_f("y", (3, 10))], {"a": x, "b": y},
           modes=MODES[:1])


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect"])
def test_pad_integer_tensors(mode):
    x = AI[:, :8].astype(np.int32)
    n = helper.make_node("Pad", ["x", "p", "v"], ["y"], name="n0", mode=mode)
    g = helper.make_graph([n], "g", [helper.make_tensor_value_info("x", TP.INT32, [3, 8])],
                          [helper.make_tensor_value_info("y", TP.INT32, [5, 11])],
                          [helper.make_tensor("p", TP.INT64, [4], [1, 2, 1, 1]),
                           helper.make_tensor("v", TP.INT32, [], [-7])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    ref = ReferenceEvaluator(m).run(None, {"x": x})[0]
    got = cann.compile(m, precision_mode="must_keep_origin_dtype").run({"x": x})["y"]
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("dt,t", [(np.uint8, TP.UINT8), (np.int8, TP.INT8), (np.uint16, TP.UINT16),
                                  (np.uint32, TP.UINT32)])
def test_narrow_add_sub_wrap_and_unsigned_compare(dt, t):
    info = np.iinfo(dt)
    rng = np.random.default_rng(12)
    a = rng.integers(info.min, info.max, (3, 70), endpoint=True).astype(dt)  # sums overflow: numpy wraps
    b = rng.integers(info.min, info.max, (70,), endpoint=True).astype(dt)
    ops = ["Add", "Sub", "Max"] + (["Mul"] if dt != np.uint32 else [])
    for op in ops:
        _check(op, [_f("a", t=t), _f("b", (70,), t)], [_f("y", t=t)], {"a": a, "b": b}, modes=MODES[:1])
    _check("Less", [_f("a", t=t), _f("b", (70,), t)], [_f("y", t=TP.BOOL)], {"a": a, "b": b}, modes=MODES[:1])


@pytest.mark.parametrize("dt,t", [(np.uint8, TP.UINT8), (np.int8, TP.INT8), (np.int16, TP.INT16),
                                  (np.uint16, TP.UINT16)])
@pytest.mark.parametrize("op,attrs", [("Div", {}), ("Mod", {"fmod": 0}), ("Mod", {"fmod": 1})])
def test_exact_integer_div_mod(dt, t, op, attrs):
    info = np.iinfo(dt)
    rng = np.random.default_rng(13)
    a = rng.integers(info.min, info.max, (3, 70), endpoint=True).astype(dt)
    b = rng.integers(info.min, info.max, (70,), endpoint=True).astype(dt)
    b[b == 0] = 3
    b[:4] = [1, 2, 3, 7]
    _check(op, [_f("a", t=t), _f("b", (70,), t)], [_f("y", t=t)], {"a": a, "b": b}, modes=MODES[:1], **attrs)


def test_int32_div_and_float_mod_are_refused():
    m = _model("Div", [_f("a", t=TP.INT32), _f("b", t=TP.INT32)], [_f("y", t=TP.INT32)])
    with pytest.raises(cann.CannError, match="n0: Div of int32 tensors: the vector unit divides in floating point"):
        cann.compile(m)
    m = _model("Mod", [_f("a"), _f("b")], [_f("y")], fmod=1)
    with pytest.raises(cann.CannError, match="n0: Mod on float32 tensors is not supported"):
        cann.compile(m)


def test_large_kernels_spread_over_cores_and_same_operand_twice():
    a = np.random.default_rng(21).integers(-50, 50, (700, 301)).astype(np.int32)
    m = _model("Equal", [_f("a", (700, 301), TP.INT32), _f("b", (700, 301), TP.INT32)], [_f("y", (700, 301), TP.BOOL)])
    model = cann.compile(m, precision_mode="must_keep_origin_dtype")
    b = a.copy()
    b[::3] += 1
    np.testing.assert_array_equal(model.run({"a": a, "b": b})["y"], a == b)
    assert max(k.block_dim for k in model.om.kernels) > 1
    n = helper.make_node("Less", ["a", "a"], ["y"], name="n0")
    g = helper.make_graph([n], "g", [helper.make_tensor_value_info("a", TP.INT32, [700, 301])],
                          [helper.make_tensor_value_info("y", TP.BOOL, [700, 301])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    got = cann.compile(m, precision_mode="must_keep_origin_dtype").run({"a": a})["y"]
    assert not got.any()


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
def test_bool_reduce_max_min(op):
    x = np.random.default_rng(31).integers(0, 2, (4, 5, 6)).astype(bool)
    x[0] = True
    n = helper.make_node(op, ["x", "axes"], ["y"], name="n0", keepdims=0)  # bool inputs: opset 20
    g = helper.make_graph([n], "g", [helper.make_tensor_value_info("x", TP.BOOL, [4, 5, 6])],
                          [helper.make_tensor_value_info("y", TP.BOOL, [4, 6])],
                          [helper.make_tensor("axes", TP.INT64, [1], [1])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
    ref = ReferenceEvaluator(m).run(None, {"x": x})[0]
    got = cann.compile(m).run({"x": x})["y"]
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, ref)
