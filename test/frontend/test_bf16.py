"""bfloat16: a storage dtype. Model inputs and outputs stay bfloat16 in GM; the graph computes in
float32 (vconv bf16 <-> f32 on the vector unit), and a Cast to bfloat16 rounds to nearest even."""

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper

import cann
from cann.errors import CannError

BF = TensorProto.BFLOAT16


def _model(nodes, ins, outs, opset=21):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in ins],
                          [helper.make_tensor_value_info(n, t, s) for n, t, s in outs])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def test_cast_float_to_bf16_rounds_to_nearest_even():
    m = _model([helper.make_node("Cast", ["x"], ["y"], to=BF)], [("x", TensorProto.FLOAT, [6])], [("y", BF, [6])])
    # 1 + 2^-8 is a tie (rounds to 1), 1 + 3*2^-8 rounds up to 1 + 2^-6, NaN / inf survive
    x = np.array([1 + 2 ** -8, 1 + 3 * 2 ** -8, -3.14159, 1e30, np.inf, np.nan], np.float32)
    model = cann.compile(m, precision_mode="must_keep_origin_dtype")
    y = model.run({"x": x})["y"]
    assert y.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(y.view(np.uint16), x.astype(ml_dtypes.bfloat16).view(np.uint16))


def test_bf16_under_a_float16_precision_mode_is_an_error():
    # float16 cannot hold bfloat16's range (1e5 would become inf): refused, never wrong numbers
    m = _model([helper.make_node("Identity", ["x"], ["y"], name="id")], [("x", BF, [2])], [("y", BF, [2])])
    with pytest.raises(CannError, match="bfloat16 tensors need a float32 precision mode"):
        cann.compile(m, precision_mode="force_fp16")
    y = cann.compile(m, precision_mode="must_keep_origin_dtype").run({"x": np.array([1e5, -1e-7], ml_dtypes.bfloat16)})["y"]
    np.testing.assert_array_equal(y, np.array([1e5, -1e-7], ml_dtypes.bfloat16))


@pytest.mark.parametrize("precision_mode", ["must_keep_origin_dtype", "force_fp32"])
def test_bf16_inputs_and_outputs_stay_bf16(precision_mode, tmp_path):
    m = _model([helper.make_node("Mul", ["a", "b"], ["p"]), helper.make_node("Relu", ["p"], ["y"])],
               [("a", BF, [4, 8]), ("b", BF, [4, 8])], [("y", BF, [4, 8])])
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((4, 8)).astype(ml_dtypes.bfloat16) for _ in range(2))
    model = cann.compile(m, precision_mode=precision_mode)
    assert [t.dtype for t in (*model.inputs, *model.outputs)] == ["bfloat16"] * 3
    model.save(tmp_path / "m.om")
    y = cann.load(tmp_path / "m.om").run({"a": a, "b": b})["y"]
    want = np.maximum(a.astype(np.float32) * b.astype(np.float32), 0).astype(ml_dtypes.bfloat16)
    assert y.dtype == ml_dtypes.bfloat16
    # float32 compute rounds once, at the output
    np.testing.assert_array_equal(y, want)
