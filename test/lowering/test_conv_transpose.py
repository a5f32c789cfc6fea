"""ConvTranspose on the cube (cann/lowering/conv_transpose.py: dilate-scatter kernel + conv2d with
the flipped, channel-swapped weight) against the ONNX reference and onnxruntime, both precision
modes."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import cann
from cann.errors import CannError

TOL = {"force_fp16": 1e-2, "must_keep_origin_dtype": 1e-4}


def ct_model(xshape, wshape, bias=True, seed=0, **attrs):
    rng = np.random.default_rng(seed)
    fan_in = wshape[0] * wshape[2] * wshape[3] // attrs.get("group", 1)
    w = (rng.standard_normal(wshape) / np.sqrt(fan_in)).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w")]
    ins = ["x", "w"]
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(wshape[1] * attrs.get("group", 1)).astype(np.float32), "b"))
        ins.append("b")
    node = helper.make_node("ConvTranspose", ins, ["y"], name="deconv", **attrs)
    g = helper.make_graph([node], "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, xshape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return onnx.shape_inference.infer_shapes(m)


def rel_l2(y, r):
    r = r.astype(np.float64)
    return float(np.linalg.norm(y.astype(np.float64) - r) / max(np.linalg.norm(r), 1e-30))


CASES = {
    "basic": ((1, 1, 3, 3), (1, 2, 3, 3), {}),
    "stride_output_padding": ((1, 3, 3, 4), (3, 2, 3, 3), {"strides": [3, 2], "output_padding": [1, 1]}),
    "pads": ((1, 3, 3, 4), (3, 2, 3, 3), {"strides": [3, 2], "pads": [1, 2, 1, 2]}),
    "pads_beyond_kernel": ((1, 4, 6, 6), (4, 5, 3, 3), {"strides": [2, 2], "pads": [3, 2, 3, 4]}),
    "output_shape": ((1, 3, 3, 3), (3, 2, 3, 3), {"strides": [3, 2], "output_shape": [10, 8]}),
    "output_shape_and_padding": ((1, 3, 3, 3), (3, 2, 3, 3),
                                 {"strides": [3, 2], "output_shape": [10, 8], "output_padding": [1, 1]}),
    "same_upper": ((1, 2, 3, 3), (2, 2, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    "same_lower": ((1, 2, 3, 4), (2, 3, 2, 3), {"strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    "dilations": ((1, 2, 3, 3), (2, 2, 2, 2), {"dilations": [2, 2]}),
    "group_2": ((1, 4, 3, 3), (4, 3, 3, 3), {"group": 2, "strides": [2, 1]}),
    "depthwise": ((2, 20, 5, 5), (20, 1, 3, 3), {"group": 20, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "fpn_head": ((1, 40, 16, 16), (40, 8, 4, 4), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "wide_channels": ((1, 33, 7, 9), (33, 18, 2, 2), {"strides": [2, 2]}),
}


@pytest.mark.parametrize("precision_mode", list(TOL))
@pytest.mark.parametrize("case", list(CASES))
def test_conv_transpose(case, precision_mode):
    xs, ws, attrs = CASES[case]
    m = ct_model(xs, ws, bias=case != "basic", **attrs)
    x = np.random.default_rng(1).standard_normal(xs).astype(np.float32)
    if attrs.get("group", 1) > 1:
        # onnx.reference's grouped ConvTranspose is wrong (onnx 1.23.2: it slices W by output
        # channels and adds bias[0:Cout/group] to every group); onnxruntime is the oracle here
        import onnxruntime as ort

        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        ref = sess.run(None, {"x": x})[0]
    else:
        ref = ReferenceEvaluator(m).run(None, {"x": x})[0]
    y = cann.compile(m, precision_mode=precision_mode).run({"x": x})["y"]
    assert y.shape == ref.shape
    err = rel_l2(y, ref)
    assert err <= TOL[precision_mode], err


def test_matches_onnxruntime():
    import onnxruntime as ort

    xs, ws, attrs = CASES["fpn_head"]
    m = ct_model(xs, ws, **attrs)
    x = np.random.default_rng(2).standard_normal(xs).astype(np.float32)
    r = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    for pm in TOL:
        assert rel_l2(cann.compile(m, precision_mode=pm).run({"x": x})["y"], r) <= TOL[pm]


def test_runs_on_the_cube():
    from cann.frontend.onnx import import_onnx
    from cann.lowering.convert_graph_to_tile import convert_module

    xs, ws, attrs = CASES["fpn_head"]
    mod = import_onnx(ct_model(xs, ws, **attrs))
    convert_module(mod, "Ascend910", "force_fp16")
    text = str(mod)
    assert "tile.mmad" in text and "dilate_scatter" in text


def test_import_filecheck(tmp_path):
    from cann.frontend.onnx import import_onnx

    checks = {
        "stride_output_padding": "CHECK: graph.conv_transpose %{{.*}}, %{{.*}}, %{{.*}} {strides = array<i64: 3, 2>, "
                                 "pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, "
                                 "output_padding = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x3x3x4xf32>, tensor<3x2x3x3xf32>, "
                                 "tensor<2xf32>) -> tensor<1x2x10x10xf32>",
        "same_upper": "CHECK: graph.conv_transpose {{.*}}pads = array<i64: 0, 0, 1, 1>{{.*}} -> tensor<1x2x6x6xf32>",
        "output_shape": "CHECK: graph.conv_transpose {{.*}}pads = array<i64: 0, 0, -1, -1>{{.*}} -> tensor<1x2x10x8xf32>",
        "group_2": "CHECK: graph.conv_transpose {{.*}}group = 2 : i64{{.*}} -> tensor<1x6x7x5xf32>",
    }
    for case, check in checks.items():
        xs, ws, attrs = CASES[case]
        _filecheck(str(import_onnx(ct_model(xs, ws, **attrs))), check + "\n", tmp_path)


def _filecheck(text, checks, tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    f = tmp_path / "checks.txt"
    f.write_text(checks)
    r = subprocess.run([str(Path(sys.executable).parent / "filecheck"), str(f)], input=text, capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr + "\n--- input ---\n" + text


def test_4d_is_an_error_naming_the_attribute():
    """1-D, 2-D and 3-D run (cann/frontend/onnx_spatial.py); 4 spatial axes are refused."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((1, 1, 2, 2, 2, 2)).astype(np.float32), "w")
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="deconv4d")
    g = helper.make_graph([node], "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 1, 3, 3, 3, 3))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 1, 4, 4, 4, 4))], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    with pytest.raises(CannError, match="deconv4d.*kernel_shape.*ConvTranspose"):
        cann.compile(m)
