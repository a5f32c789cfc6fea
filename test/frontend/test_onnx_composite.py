"""Composite ONNX operators decomposed into graph ops (cann/frontend/onnx_composite.py), compiled and
run on the simulator in both precision modes, against ``onnx.reference.ReferenceEvaluator`` (the
spec's reference: onnxruntime's CPU provider lacks Attention-23's fully-masked-row rule and
RMSNormalization in older releases, so the reference evaluator is the oracle for every case here)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import cann
from cann.errors import CannError

MODES = {"force_fp16": 1e-2, "must_keep_origin_dtype": 1e-4}


def _model(node, inputs, outputs, inits=None, opset=23, out_shape=None):
    g = helper.make_graph([node], "t", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, out_shape) for n in outputs],
                          [numpy_helper.from_array(np.asarray(a), n) for n, a in (inits or {}).items()])
    return onnx.shape_inference.infer_shapes(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]))


def _rel_l2(out, ref):
    out, ref = np.asarray(out, np.float64), np.asarray(ref, np.float64)
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30))


def _check(model, feeds, mode, ref=None):
    ref = ref if ref is not None else ReferenceEvaluator(model).run(None, feeds)
    cm = cann.compile(model, precision_mode=mode)
    out = cm.run(feeds)
    for o, r in zip(model.graph.output, ref):
        got = out[o.name]
        assert got.shape == r.shape, o.name
        assert np.isfinite(got).all(), o.name
        err = _rel_l2(got, r)
        assert err <= MODES[mode], f"{o.name}: rel L2 {err:.3g}"
    return out, ref


def _rng():
    return np.random.default_rng(0)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("axis", [-1, 1])
def test_rms_normalization(mode, axis):
    r = _rng()
    x = r.standard_normal((2, 3, 8), dtype=np.float32)
    scale = r.standard_normal((3, 8) if axis == 1 else (8,)).astype(np.float32)
    m = _model(helper.make_node("RMSNormalization", ["x", "s"], ["y"], axis=axis, epsilon=1e-3),
               [("x", TensorProto.FLOAT, x.shape)], ["y"], {"s": scale})
    _check(m, {"x": x}, mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("opset", [21])  # onnx 1.23's checker rejects GroupNormalization-18 as deprecated
def test_group_normalization(mode, opset):
    r = _rng()
    x = r.standard_normal((2, 6, 3, 4), dtype=np.float32)
    n = 3 if opset < 21 else 6  # opset 18: per group, 21: per channel
    s, b = r.standard_normal(n).astype(np.float32), r.standard_normal(n).astype(np.float32)
    m = _model(helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=3, epsilon=1e-3),
               [("x", TensorProto.FLOAT, x.shape), ("s", TensorProto.FLOAT, [n]), ("b", TensorProto.FLOAT, [n])],
               ["y"], opset=opset, out_shape=x.shape)
    _check(m, {"x": x, "s": s, "b": b}, mode)


@pytest.mark.parametrize("mode", MODES)
def test_instance_normalization(mode):
    r = _rng()
    x = r.standard_normal((2, 3, 4, 5), dtype=np.float32)
    m = _model(helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"]),
               [("x", TensorProto.FLOAT, x.shape)], ["y"],
               {"s": r.standard_normal(3).astype(np.float32), "b": r.standard_normal(3).astype(np.float32)})
    _check(m, {"x": x}, mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("p", [1, 2])
def test_lp_normalization_zero_slice(mode, p):
    x = _rng().standard_normal((2, 3, 4), dtype=np.float32)
    x[:, 1, 2] = 0.0  # a zero norm along axis 0 and 1: the spec gives 0, not NaN
    x[1, :, 3] = 0.0
    m = _model(helper.make_node("LpNormalization", ["x"], ["y"], axis=1, p=p), [("x", TensorProto.FLOAT, x.shape)],
               ["y"], opset=22)
    # the spec's text and node tests: y = x / ||x||_p, 0 where the norm is 0. The reference evaluator
    # of onnx 1.23.2 computes the p = 1 norm as sum(x), not sum(|x|), so the oracle is numpy here
    norm = (np.abs(x) ** p).sum(1, keepdims=True) ** (1.0 / p)
    want = np.where(norm == 0, 0, x / np.where(norm == 0, 1, norm)).astype(np.float32)
    out, _ = _check(m, {"x": x}, mode, ref=[want])
    assert np.all(out["y"][1, :, 3] == 0)


@pytest.mark.parametrize("mode", MODES)
def test_mean_variance_normalization(mode):
    x = _rng().standard_normal((2, 3, 4, 5), dtype=np.float32)
    m = _model(helper.make_node("MeanVarianceNormalization", ["x"], ["y"], axes=[0, 2, 3]),
               [("x", TensorProto.FLOAT, x.shape)], ["y"], opset=18)
    _check(m, {"x": x}, mode)


# --------------------------------------------------------------------------------------------
# Attention


def _attn(inputs, outputs, feeds, opset=23, inits=None, **attrs):
    node = helper.make_node("Attention", inputs, outputs, **attrs)
    vis = [(n, TensorProto.FLOAT, feeds[n].shape) for n in inputs if n and n in feeds]
    return _model(node, vis, [o for o in outputs if o], inits, opset=opset)


@pytest.mark.parametrize("mode", MODES)
def test_attention_3d_gqa_causal_constant_mask(mode):
    r = _rng()
    feeds = {"q": r.standard_normal((2, 5, 4 * 8), dtype=np.float32),
             "k": r.standard_normal((2, 7, 2 * 8), dtype=np.float32),
             "v": r.standard_normal((2, 7, 2 * 6), dtype=np.float32)}
    mask = r.random((5, 6)) > 0.3  # shorter than kv_seq: padded with False
    mask[:, 0] = True
    m = _attn(["q", "k", "v", "mask"], ["y"], feeds, inits={"mask": mask}, q_num_heads=4, kv_num_heads=2,
              is_causal=1)
    _check(m, feeds, mode)


@pytest.mark.parametrize("mode", MODES)
def test_attention_4d_runtime_float_mask_fully_masked_row_softcap(mode):
    r = _rng()
    feeds = {"q": r.standard_normal((1, 2, 4, 8), dtype=np.float32),
             "k": r.standard_normal((1, 2, 6, 8), dtype=np.float32),
             "v": r.standard_normal((1, 2, 6, 8), dtype=np.float32),
             "mask": np.where(r.random((4, 6)) > 0.4, 0.0, -np.inf).astype(np.float32)}
    feeds["mask"][:, 1] = -0.5
    feeds["mask"][2, :] = -np.inf  # a fully masked row: probabilities and output 0 (the reference's rule)
    m = _attn(["q", "k", "v", "mask"], ["y", "", "", "p"], feeds, softcap=3.0, scale=0.2, qk_matmul_output_mode=3)
    out, ref = _check(m, feeds, mode)
    assert np.all(out["p"][:, :, 2] == 0) and np.all(out["y"][:, :, 2] == 0)
    masked = np.broadcast_to(np.isneginf(feeds["mask"]), out["p"].shape)
    assert np.all(out["p"][masked] == 0)  # exact zeros where the mask is -inf


@pytest.mark.parametrize("mode", MODES)
def test_attention_4d_past_present(mode):
    r = _rng()
    feeds = {"q": r.standard_normal((1, 4, 3, 8), dtype=np.float32),
             "k": r.standard_normal((1, 2, 3, 8), dtype=np.float32),
             "v": r.standard_normal((1, 2, 3, 8), dtype=np.float32),
             "pk": r.standard_normal((1, 2, 5, 8), dtype=np.float32),
             "pv": r.standard_normal((1, 2, 5, 8), dtype=np.float32)}
    m = _attn(["q", "k", "v", "", "pk", "pv"], ["y", "present_k", "present_v"], feeds, is_causal=1)
    _check(m, feeds, mode)


def test_attention_sliding_window_opset25():
    r = _rng()
    feeds = {"q": r.standard_normal((1, 2, 5, 8), dtype=np.float32),
             "k": r.standard_normal((1, 2, 5, 8), dtype=np.float32),
             "v": r.standard_normal((1, 2, 5, 8), dtype=np.float32)}
    m = _attn(["q", "k", "v"], ["y"], feeds, opset=25, is_causal=1, left_window_size=2)
    _check(m, feeds, "must_keep_origin_dtype")


@pytest.mark.parametrize("mode", MODES)
def test_attention_runtime_bool_mask(mode):
    # a runtime boolean mask is the float mask 0 / -inf (a Where on the device), padded with False
    r = _rng()
    feeds = {n: r.standard_normal((1, 2, 4, 8), dtype=np.float32) for n in ("q", "k", "v")}
    feeds["m"] = r.random((4, 3)) > 0.4
    feeds["m"][:, 0] = True
    node = helper.make_node("Attention", ["q", "k", "v", "m"], ["y"], name="attn", is_causal=1)
    vis = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 2, 4, 8]) for n in ("q", "k", "v")]
    vis.append(helper.make_tensor_value_info("m", TensorProto.BOOL, [4, 3]))
    g = helper.make_graph([node], "t", vis, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 4, 8])])
    _check(helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)]), feeds, mode)


def test_lp_normalization_bad_p():
    m = _model(helper.make_node("LpNormalization", ["x"], ["y"], p=3, name="lp"), [("x", TensorProto.FLOAT, [2, 3])],
               ["y"], opset=22)
    with pytest.raises(CannError, match="lp: unsupported attribute value p=3 of LpNormalization"):
        cann.compile(m)
