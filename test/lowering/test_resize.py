"""Resize on the AI Core (cann/lowering/resize.py) against the ONNX specification's reference
(``onnx.reference``: the oracle where onnxruntime disagrees, e.g. half_pixel_symmetric, which
onnxruntime lacks), in both precision modes, plus the compile-time index maps alone."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import cann
from cann.errors import CannError
from cann.lowering.resize import axis_map, progressions

TOL = {"force_fp16": 1e-2, "must_keep_origin_dtype": 1e-4}
CTMS = ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric"]
NEAREST = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]


def resize_model(shape, *, scales=None, sizes=None, opset=19, axes=None, **attrs):
    inits = []
    inputs = ["x"]
    if opset < 11:
        inits.append(numpy_helper.from_array(np.asarray(scales, np.float32), "scales"))
        inputs.append("scales")
    else:
        if opset < 13:  # roi is a required input before opset 13
            inits.append(numpy_helper.from_array(np.zeros(0, np.float32), "roi"))
        inputs.append("roi" if opset < 13 else "")
        if scales is not None:
            inits.append(numpy_helper.from_array(np.asarray(scales, np.float32), "scales"))
            inputs.append("scales")
        else:
            inputs.append("")
            inits.append(numpy_helper.from_array(np.asarray(sizes, np.int64), "sizes"))
            inputs.append("sizes")
    if axes is not None:
        attrs["axes"] = axes
    node = helper.make_node("Resize", inputs, ["y"], name="resize", **attrs)
    g = helper.make_graph([node], "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    m = onnx.shape_inference.infer_shapes(m)
    out = [vi for vi in m.graph.output]
    assert out[0].type.tensor_type.HasField("shape")
    return m


def rel_l2(y, r):
    r = r.astype(np.float64)
    return float(np.linalg.norm(y.astype(np.float64) - r) / max(np.linalg.norm(r), 1e-30))


def check(m, shape, modes=tuple(TOL)):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    if m.opset_import[0].version < 11:
        # onnx.reference cannot run Resize-10 (it reads input 1 as roi); onnxruntime implements
        # its rule (asymmetric coordinates, floor when upsampling)
        import onnxruntime as ort

        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        ref = sess.run(None, {"x": x})[0]
    else:
        ref = ReferenceEvaluator(m).run(None, {"x": x})[0]
    errs = {}
    for pm in modes:
        y = cann.compile(m, precision_mode=pm).run({"x": x})["y"]
        assert y.shape == ref.shape
        errs[pm] = rel_l2(y, ref)
        assert errs[pm] <= TOL[pm], (pm, errs[pm])
    return errs


# shape, scales (H, W): 2x, non-integer up, downsampling, mixed
SCALES = [((1, 20, 5, 7), (2.0, 2.0)), ((2, 3, 6, 5), (1.7, 2.5)), ((1, 17, 9, 10), (0.6, 0.5)),
          ((1, 8, 4, 6), (3.0, 0.75))]


@pytest.mark.parametrize("ctm", CTMS)
@pytest.mark.parametrize("nearest_mode", NEAREST)
def test_nearest(ctm, nearest_mode):
    shape, sc = SCALES[(CTMS.index(ctm) + NEAREST.index(nearest_mode)) % len(SCALES)]
    m = resize_model(shape, scales=[1, 1, *sc], mode="nearest", coordinate_transformation_mode=ctm,
                     nearest_mode=nearest_mode)
    check(m, shape)


@pytest.mark.parametrize("ctm", CTMS)
@pytest.mark.parametrize("case", range(len(SCALES)))
def test_linear(ctm, case):
    shape, sc = SCALES[case]
    m = resize_model(shape, scales=[1, 1, *sc], mode="linear", coordinate_transformation_mode=ctm)
    check(m, shape)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("sizes", [(1, 4, 9, 11), (1, 4, 3, 2), (1, 4, 8, 1)])
def test_sizes(mode, sizes):
    shape = (1, 4, 6, 5)
    m = resize_model(shape, sizes=sizes, mode=mode, coordinate_transformation_mode="pytorch_half_pixel")
    check(m, shape)


@pytest.mark.parametrize("opset", [10, 11, 13, 18, 19])
def test_opsets(opset):
    shape = (1, 5, 4, 6)
    attrs = {"mode": "nearest"}
    kw = {"scales": [1, 1, 2, 1.5]}
    if opset >= 18:
        kw = {"sizes": [9, 7], "axes": [2, 3]}
        attrs.update(keep_aspect_ratio_policy="not_larger")
    check(resize_model(shape, opset=opset, **kw, **attrs), shape)


def test_fpn_style_matches_onnxruntime():
    """nearest / asymmetric / floor 2x as PyTorch exports F.interpolate: onnxruntime agrees with the spec."""
    import onnxruntime as ort

    shape = (1, 32, 8, 8)
    m = resize_model(shape, scales=[1, 1, 2, 2], opset=18, mode="nearest",
                     coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    r = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    for pm in TOL:
        y = cann.compile(m, precision_mode=pm).run({"x": x})["y"]
        assert rel_l2(y, r) <= TOL[pm]


@pytest.mark.parametrize("attrs,what", [
    ({"mode": "bicubic"}, "mode"),
    ({"mode": "cubic", "coordinate_transformation_mode": "centered"}, "coordinate_transformation_mode"),
    ({"mode": "nearest", "antialias": 1}, "antialias"),
    ({"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize"}, "coordinate_transformation_mode"),
])
def test_unsupported_attributes_name_node_op_and_attribute(attrs, what):
    m = resize_model((1, 2, 4, 4), scales=[1, 1, 2, 2], **attrs)
    with pytest.raises(CannError) as e:
        cann.compile(m)
    msg = str(e.value)
    assert "resize" in msg and "Resize" in msg and what in msg, msg


def test_resizing_channels_runs_as_matrices():
    """Axes other than H, W (here C) take the per-axis MatMul form (cann/frontend/onnx_spatial.py)."""
    check(resize_model((1, 2, 4, 4), scales=[1, 2, 1, 1], mode="nearest"), (1, 2, 4, 4))
    check(resize_model((1, 3, 4, 4), scales=[1, 1.5, 1, 2], mode="linear"), (1, 3, 4, 4))


def test_axis_map_and_progressions():
    i0, _, w = axis_map("nearest", "asymmetric", "floor", 4, 8, 2.0)
    assert i0.tolist() == [0, 0, 1, 1, 2, 2, 3, 3] and not w.any()
    assert progressions(i0) == [(0, 2, 4, 0, 1), (1, 2, 4, 0, 1)]  # 2 copies per row
    assert progressions(np.arange(5)) == [(0, 1, 5, 0, 1)]  # one burst
    i0, i1, w = axis_map("linear", "half_pixel", "", 2, 4, 2.0)
    assert i0.tolist() == [0, 0, 0, 1] and i1.tolist() == [0, 1, 1, 1]
    assert np.allclose(w, [0, 0.25, 0.75, 0])  # o=1: x=0.25 -> 0.75*x0 + 0.25*x1


def test_import_filecheck(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    from cann.frontend.onnx import import_onnx

    cases = [
        (resize_model((1, 8, 4, 4), scales=[1, 1, 2, 2], opset=18, mode="nearest",
                      coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
         'CHECK: graph.resize %{{.*}} {mode = "nearest", coordinate_transformation_mode = "asymmetric", '
         'nearest_mode = "floor", scales = array<f64: 2.000000e+00, 2.000000e+00>} : tensor<1x8x4x4xf32> -> '
         'tensor<1x8x8x8xf32>'),
        (resize_model((1, 2, 6, 5), sizes=[1, 2, 4, 7], mode="linear"),
         'CHECK: graph.resize {{.*}}mode = "linear", coordinate_transformation_mode = "half_pixel", '
         'nearest_mode = "round_prefer_floor", scales = array<f64: 0.66666666666666663, 1.400000e+00>} '
         ': tensor<1x2x6x5xf32> -> tensor<1x2x4x7xf32>'),
        (resize_model((1, 2, 4, 4), scales=[1, 1, 1.5, 2], opset=10, mode="nearest"),
         'CHECK: graph.resize {{.*}}coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"'),
    ]
    for m, check in cases:
        f = tmp_path / "checks.txt"
        f.write_text(check + "\n")
        text = str(import_onnx(m))
        r = subprocess.run([str(Path(sys.executable).parent / "filecheck"), str(f)], input=text,
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr + "\n--- input ---\n" + text
