"""Float constants narrowed to float16 saturate at +-65504 instead of overflowing to inf
(cann.lowering.common.narrow / narrow_scalar): an attention mask built as (1 - m) * finfo(float32).min,
as PyTorch exporters write it, gave 0 * -inf = NaN for every kept position under force_fp16."""

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import cann
from cann.lowering.common import narrow, narrow_scalar

F32_MIN = float(np.finfo(np.float32).min)


def test_narrow_saturates_finite_values_and_keeps_inf_nan():
    x = np.array([F32_MIN, -70000.0, -65504.0, 1.5, 65520.0, 3e38, np.inf, -np.inf, np.nan], np.float32)
    y = narrow(x, np.float16)
    assert y.dtype == np.float16
    np.testing.assert_array_equal(y[:6], np.array([-65504, -65504, -65504, 1.5, 65504, 65504], np.float16))
    assert np.isposinf(y[6]) and np.isneginf(y[7]) and np.isnan(y[8])
    # must not: widening, same dtype and integer casts are plain casts
    assert narrow(np.array([60000], np.float16), np.float32)[0] == np.float32(np.float16(60000))
    np.testing.assert_array_equal(narrow(np.array([F32_MIN], np.float32), np.float32), [F32_MIN])
    # the in-range fast path (min / max, no masks) and the NaN / out-of-range ones give the same values
    rng = np.random.default_rng(0).uniform(-6e4, 6e4, 1000).astype(np.float32)
    np.testing.assert_array_equal(narrow(rng, np.float16), rng.astype(np.float16))
    assert np.isnan(narrow(np.array([np.nan, 1.0], np.float32), np.float16)).tolist() == [True, False]
    np.testing.assert_array_equal(narrow(np.array([np.nan, 7e4], np.float32), np.float16)[1:], [65504])
    assert narrow(np.array([], np.float32), np.float16).dtype == np.float16
    np.testing.assert_array_equal(narrow(np.array([7, -3], np.int64), np.int32), [7, -3])


def test_narrow_scalar():
    assert narrow_scalar(F32_MIN, np.float16) == -65504.0
    assert narrow_scalar(1e6, np.float16) == 65504.0
    assert narrow_scalar(0.25, np.float16) == 0.25
    assert narrow_scalar(F32_MIN, np.float32) == F32_MIN
    assert narrow_scalar(float("-inf"), np.float16) == float("-inf")


def _mask_model():
    # bias = (1 - m) * finfo(float32).min; p = Softmax(s + bias): the masked positions get ~0
    inits = [numpy_helper.from_array(np.array(1.0, np.float32), "one"),
             numpy_helper.from_array(np.array(F32_MIN, np.float32), "big")]
    nodes = [helper.make_node("Sub", ["one", "m"], ["inv"], name="inv"),
             helper.make_node("Mul", ["inv", "big"], ["bias"], name="bias"),
             helper.make_node("Add", ["s", "bias"], ["sc"], name="add"),
             helper.make_node("Softmax", ["sc"], ["p"], name="softmax", axis=-1)]
    g = helper.make_graph(nodes, "mask", [helper.make_tensor_value_info("s", TensorProto.FLOAT, [1, 8]),
                                          helper.make_tensor_value_info("m", TensorProto.FLOAT, [1, 8])],
                          [helper.make_tensor_value_info("p", TensorProto.FLOAT, [1, 8])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.parametrize("precision_mode", ["force_fp16", "must_keep_origin_dtype"])
def test_float32_min_attention_mask(precision_mode):
    model = _mask_model()
    feeds = {"s": np.linspace(-1, 1, 8, dtype=np.float32).reshape(1, 8),
             "m": np.array([[1, 1, 1, 1, 1, 1, 0, 0]], np.float32)}
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    out = cann.compile(model, precision_mode=precision_mode).run(feeds)["p"]
    assert np.isfinite(out).all()
    tol = 1e-2 if precision_mode == "force_fp16" else 1e-5
    assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < tol
    np.testing.assert_array_equal(out[0, 6:], [0, 0])


def test_conv_weight_beyond_float16_range_saturates():
    # a 1x1 conv weight of 1e5 (beyond float16) is stored as 65504: finite outputs, not inf
    w = numpy_helper.from_array(np.array([[[[1e5]], [[1.0]]]], np.float32), "w")
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], name="conv")], "c",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 2, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 2, 2])], [w])
    x = np.full((1, 2, 2, 2), 0.5, np.float32)
    out = cann.compile(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])).run({"x": x})["y"]
    np.testing.assert_array_equal(out, np.full((1, 1, 2, 2), np.float16(65504 * 0.5 + 0.5), np.float32))


@pytest.mark.parametrize("src", [np.float16, np.float32, np.float64, np.int32])
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_weight_layouts_narrow_first_with_the_same_bytes(src, dtype):
    """fractal_z and gemv.b_layout narrow the weight before padding and reordering it (fewer bytes
    moved): the bytes are those of the layout built in float32 and narrowed last, saturation included."""
    from cann.lowering.cube import fractal_z
    from cann.lowering.gemv import b_layout

    rng = np.random.default_rng(0)
    b = rng.standard_normal((37, 53)) * (1e5 if src != np.float16 else 1e3)
    if np.dtype(src).kind == "f":
        b[0, 0], b[1, 1], b[2, 2] = np.inf, np.nan, -1e39  # -1e39: -inf in float32 (as the old order cast it)
    with np.errstate(over="ignore", invalid="ignore"):
        b = b.astype(src)
        f32 = b.astype(np.float32)
    for k0 in (16, 8):  # [K/k0][N1][16][k0], K and N zero-padded
        kp, np_ = -(-37 // k0) * k0, 64
        ref = np.zeros((kp, np_), np.float32)
        ref[:37, :53] = f32
        ref = narrow(np.ascontiguousarray(ref.reshape(kp // k0, k0, np_ // 16, 16).transpose(0, 2, 3, 1)), dtype)
        got = fractal_z(b, k0, dtype)
        assert got.dtype == np.dtype(dtype) and got.tobytes() == ref.tobytes()
    for nt in (16, 48):  # [T][C][nt][lanes] of B^T, the last tile compact
        t, last = -(-53 // nt), 53 - (-(-53 // nt) - 1) * nt
        ref = np.zeros((t * nt, 128), np.float32)
        ref[:53, :37] = f32.T
        ref = ref.reshape(t, nt, 1, 128).transpose(0, 2, 1, 3)
        ref = narrow(np.concatenate([ref[:t - 1].reshape(-1), ref[t - 1, :, :last].reshape(-1)]), dtype)
        got = b_layout(b, nt, 128, dtype)
        assert got.dtype == np.dtype(dtype) and got.tobytes() == ref.tobytes()
