"""UB fusion never changes results beyond the precision mode's tolerance, and the fusion switch
file is parsed as ATC parses it (errors name file and line)."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import cann
from cann import testing
from cann.passes.fusion_switch import parse_fusion_switch

TOL = {"force_fp16": 1e-2, "must_keep_origin_dtype": 1e-4}


def _model():
    """conv -> mul(per-channel) -> add(residual) -> relu -> swish -> sub/div by constants (both
    operand orders): all of it one cube kernel with an epilogue."""
    rng = np.random.default_rng(0)
    c = 24
    inits = [numpy_helper.from_array((rng.standard_normal((c, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(c).astype(np.float32), "b"),
             numpy_helper.from_array(rng.uniform(0.5, 1.5, (c, 1, 1)).astype(np.float32), "k"),
             numpy_helper.from_array(np.array(0.25, np.float32), "q"),
             numpy_helper.from_array(rng.uniform(1.0, 2.0, (1, c, 1, 1)).astype(np.float32), "d")]
    n = helper.make_node
    nodes = [n("Conv", ["x", "w", "b"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             n("Mul", ["c", "k"], ["ck"], name="scale"),
             n("Add", ["ck", "x"], ["res"], name="residual"),
             n("Relu", ["res"], ["r"], name="relu"),
             n("Sigmoid", ["r"], ["sg"], name="sig"),
             n("Mul", ["r", "sg"], ["sw"], name="swish"),
             n("Sub", ["q", "sw"], ["s1"], name="rsub"),
             n("Div", ["s1", "d"], ["s2"], name="div"),
             n("Sub", ["s2", "q"], ["y"], name="sub")]
    g = helper.make_graph(nodes, "fuse", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 9, 7])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, 9, 7])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("precision_mode", list(TOL))
def test_fused_kernels_match_onnxruntime_and_unfused(precision_mode):
    m = _model()
    x = testing.random_inputs(m)
    ref = testing.run_onnxruntime(m, x)["y"]
    fused = cann.compile(m, precision_mode=precision_mode)
    plain = cann.compile(m, precision_mode=precision_mode, opt_level=0)
    # the per-channel Mul folds into the conv weights; the other seven ops are its epilogue
    assert [k.name for k in fused.om.kernels if "trans_data" not in k.name] == ["conv2d_0"]
    assert len([k for k in plain.om.kernels if "trans_data" not in k.name]) >= 9  # one (or more) per op
    for model in (fused, plain):
        y = model.run(x)["y"]
        err = np.linalg.norm(y - ref) / np.linalg.norm(ref)
        assert err <= TOL[precision_mode], err


def test_switch_file_json_and_text(tmp_path):
    j = tmp_path / "s.json"
    j.write_text('{"Switch": {"GraphFusion": {"ALL": "off"}, "UBFusion": {"ALL": "on", "TbeEltwiseFusionPass": "off"}}}')
    assert parse_fusion_switch(j) == {"ConvBatchnormFusionPass": False, "LayerNormFusionPass": False,
                                      "GeluFusionPass": False, "TbeConvElemwiseFusionPass": True,
                                      "TbeEltwiseFusionPass": False, "TbeReduceElemwiseFusionPass": True}
    t = tmp_path / "s.cfg"
    t.write_text("# comment\nALL:off\nTbeConvElemwiseFusionPass:on\nGeluFusionPass:on\n")
    assert parse_fusion_switch(t) == {"ConvBatchnormFusionPass": False, "LayerNormFusionPass": False,
                                      "GeluFusionPass": True, "TbeConvElemwiseFusionPass": True,
                                      "TbeEltwiseFusionPass": False, "TbeReduceElemwiseFusionPass": False}


def test_malformed_switch_files(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"Switch": {"GraphFusion": {"ALL": "of"}}')
    with pytest.raises(cann.CannError) as e:
        parse_fusion_switch(bad)
    assert e.value.lines() == [f"error: {bad}:1: malformed JSON: Expecting ',' delimiter"]
    txt = tmp_path / "bad.cfg"
    txt.write_text("NoSuchPass:off\nTbeEltwiseFusionPass=off\nTbeEltwiseFusionPass:maybe\n")
    with pytest.raises(cann.CannError) as e:
        parse_fusion_switch(txt)
    assert e.value.lines() == [
        f"error: {txt}:1: unknown fusion pass 'NoSuchPass'",
        f"error: {txt}:2: expected 'PassName:on|off', got 'TbeEltwiseFusionPass=off'",
        f"error: {txt}:3: expected \"on\" or \"off\", got 'maybe'",
    ]
    with pytest.raises(cann.CannError, match="cannot read fusion switch file"):
        parse_fusion_switch(tmp_path / "missing.cfg")


def test_elementwise_group_matches_onnxruntime():
    # BN (not after a conv) -> Relu -> Add of another input: one vector kernel
    rng = np.random.default_rng(1)
    c = 20
    inits = [numpy_helper.from_array(rng.uniform(0.5, 1.5, c).astype(np.float32), "s"),
             numpy_helper.from_array(rng.standard_normal(c).astype(np.float32), "b"),
             numpy_helper.from_array(rng.standard_normal(c).astype(np.float32), "m"),
             numpy_helper.from_array(rng.uniform(0.5, 1.5, c).astype(np.float32), "v")]
    n = helper.make_node
    nodes = [n("BatchNormalization", ["x", "s", "b", "m", "v"], ["bn"], name="bn"),
             n("Relu", ["bn"], ["r"], name="relu"), n("Add", ["r", "z"], ["y"], name="add")]
    vi = [helper.make_tensor_value_info(k, TensorProto.FLOAT, [2, c, 5, 6]) for k in ("x", "z")]
    g = helper.make_graph(nodes, "eltwise", vi, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, c, 5, 6])],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    x = testing.random_inputs(m)
    ref = testing.run_onnxruntime(m, x)["y"]
    for pm, tol in TOL.items():
        model = cann.compile(m, precision_mode=pm)
        assert [k.name for k in model.om.kernels if "trans_data" not in k.name] == ["fused_eltwise_0"]
        y = model.run(x)["y"]
        assert np.linalg.norm(y - ref) / np.linalg.norm(ref) <= tol


def test_softmax_with_its_elementwise_producers_is_one_kernel():
    # attention-style: softmax(scores * scale + mask), one row kernel
    rng = np.random.default_rng(2)
    n = helper.make_node
    inits = [numpy_helper.from_array(np.array(0.125, np.float32), "scale")]
    nodes = [n("Mul", ["s", "scale"], ["a"], name="scale_mul"), n("Add", ["a", "mask"], ["b"], name="mask_add"),
             n("Softmax", ["b"], ["y"], name="softmax", axis=-1)]
    shape = [2, 4, 16, 40]
    vi = [helper.make_tensor_value_info(k, TensorProto.FLOAT, shape) for k in ("s", "mask")]
    g = helper.make_graph(nodes, "attn", vi, [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    x = {"s": (rng.standard_normal(shape) * 4).astype(np.float32),
         "mask": np.where(rng.random(shape) < 0.2, -1e4, 0.0).astype(np.float32)}
    ref = testing.run_onnxruntime(m, x)["y"]
    for pm, tol in TOL.items():
        model = cann.compile(m, precision_mode=pm)
        assert [k.name for k in model.om.kernels if "trans_data" not in k.name] == ["fused_softmax_0"]
        (row,) = [k for k in model.fusion_report["kernels"] if k["kernel"] == "fused_softmax_0"]
        assert row == {"kernel": "fused_softmax_0", "fusion": "reduction", "nodes": ["scale_mul", "mask_add", "softmax"]}
        y = model.run(x)["y"]
        assert np.linalg.norm(y - ref) / np.linalg.norm(ref) <= tol


def test_relu6_epilogue_matches_onnxruntime():
    # Conv + Clip(0, 6) (Relu6) + residual Add: one cube kernel
    rng = np.random.default_rng(3)
    c = 16
    inits = [numpy_helper.from_array((rng.standard_normal((c, c, 1, 1)) * 3).astype(np.float32), "w"),
             numpy_helper.from_array(np.array(0.0, np.float32), "lo"), numpy_helper.from_array(np.array(6.0, np.float32), "hi")]
    n = helper.make_node
    nodes = [n("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1, 1]),
             n("Clip", ["c", "lo", "hi"], ["r6"], name="relu6"), n("Add", ["r6", "x"], ["y"], name="res")]
    g = helper.make_graph(nodes, "r6", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 6, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, 6, 6])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    x = testing.random_inputs(m)
    ref = testing.run_onnxruntime(m, x)["y"]
    assert ref.max() > 6 and ref.min() < 0  # both bounds bind somewhere
    for pm, tol in TOL.items():
        model = cann.compile(m, precision_mode=pm)
        assert [k.name for k in model.om.kernels if "trans_data" not in k.name] == ["conv2d_0"]
        y = model.run(x)["y"]
        assert np.linalg.norm(y - ref) / np.linalg.norm(ref) <= tol


def test_gelu_and_elu_epilogues_match_onnxruntime():
    # Gemm + GELU (erf form, recomposed) on the cube's output tiles; a Conv + Elu likewise
    rng = np.random.default_rng(4)
    n = helper.make_node
    inits = [numpy_helper.from_array((rng.standard_normal((64, 96)) / 8).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(96).astype(np.float32), "b"),
             numpy_helper.from_array(np.array(1.4142135, np.float32), "sq"),
             numpy_helper.from_array(np.array(1.0, np.float32), "one"),
             numpy_helper.from_array(np.array(0.5, np.float32), "half")]
    nodes = [n("MatMul", ["x", "w"], ["m"], name="fc"), n("Add", ["m", "b"], ["h"], name="bias"),
             n("Div", ["h", "sq"], ["a"], name="div"), n("Erf", ["a"], ["e"], name="erf"),
             n("Add", ["e", "one"], ["e1"], name="add1"), n("Mul", ["h", "e1"], ["g"], name="mul"),
             n("Mul", ["g", "half"], ["y"], name="gelu_half"), n("Elu", ["y"], ["z"], name="elu", alpha=0.7)]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [20, 64])],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, [20, 96])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    x = testing.random_inputs(m)
    ref = testing.run_onnxruntime(m, x)["z"]
    for pm, tol in TOL.items():
        model = cann.compile(m, precision_mode=pm)
        assert [k.name for k in model.om.kernels if "trans_data" not in k.name] == ["matmul_0"]
        y = model.run(x)["z"]
        assert np.linalg.norm(y - ref) / np.linalg.norm(ref) <= tol


def test_elementwise_group_head_with_a_last_axis_constant_is_not_fused():
    """A group's first op whose constant broadcasts along the last axis of a 4-D tensor (not per
    channel) stays unfused: the fused kernel's tables are per channel (the attention-mask pattern
    of an expanded Attention once crashed here)."""
    rng = np.random.default_rng(2)
    c = rng.standard_normal((1, 8)).astype(np.float32)
    n = helper.make_node
    g = helper.make_graph([n("Add", ["c", "x"], ["a"]), n("Add", ["a", "z"], ["y"])], "g",
                          [helper.make_tensor_value_info(v, TensorProto.FLOAT, [2, 1, 1, 8]) for v in "xz"],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 1, 1, 8])],
                          [numpy_helper.from_array(c, "c")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    feeds = {v: rng.standard_normal((2, 1, 1, 8)).astype(np.float32) for v in "xz"}
    model = cann.compile(m, precision_mode="must_keep_origin_dtype")
    np.testing.assert_allclose(model.run(feeds)["y"], c + feeds["x"] + feeds["z"], rtol=1e-6)
    assert not any(k.name.startswith("fused") for k in model.om.kernels)
