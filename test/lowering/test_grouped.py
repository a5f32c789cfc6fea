"""Grouped convolution per packed super-group (cann/lowering/grouped.py) against onnxruntime, the
MACs it executes, the per-run path where packing would multiply all-zero fractals, and the
ReduceMean-over-H,W lowering that makes PyTorch's two ResNeXt exports cost the same."""

import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import cann
from cann import testing
from cann.lowering.grouped import super_group

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_cube_tiling import TOL, check, conv_model  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "torch"


@pytest.mark.parametrize("precision_mode", TOL)
@pytest.mark.parametrize("cin,cout,h,group,stride", [
    (32, 32, 16, 2, 1),     # groups of 16: one C1 block each (S = 1)
    (64, 64, 12, 4, 2),     # groups of 16, strided
    (64, 128, 10, 2, 1),    # 32 in, 64 out per group: K 2 blocks, N 4 blocks
    (32, 32, 16, 8, 1),     # ResNeXt-style groups of 4 channels: 4 groups packed per C1 block
    (128, 128, 14, 32, 1),  # ResNeXt-50 32x4d's first grouped conv shape (groups of 4), smaller map
    (64, 64, 16, 8, 2),     # groups of 8, strided (the ResNeXt fixture's second block)
    (544, 544, 7, 34, 1),   # 34 super-group planes on 32 cores: whole rounds of 17 (a ragged round was wrong)
])
def test_grouped_matches_onnxruntime(cin, cout, h, group, stride, precision_mode):
    tiling, compiled = check(conv_model(cin, cout, h, h, 1, stride=stride, group=group), precision_mode)
    names = [k.name for k in compiled.last_run.kernels]
    assert "gconv2d_0" in names and not any(n.startswith("conv2d") for n in names), names


def test_grouped_executes_group_padded_macs_not_group_times():
    """Groups of 4 channels: 16/4 = 4x the real MACs (one 16x16 fractal per packed block, none
    all-zero), where the dense block-diagonal conv did group = 32x."""
    model = conv_model(128, 128, 16, 16, 1, group=32)
    compiled = cann.compile(model, precision_mode="force_fp16")
    compiled.run(testing.random_inputs(model))
    (k,) = [k for k in compiled.last_run.kernels if k.name.startswith("gconv2d")]
    assert k.executed_macs == 4 * k.work.model_macs, (k.executed_macs, k.work.model_macs)


def test_super_groups():
    assert super_group(32, 32, 8) == 4 and super_group(64, 64, 8) == 2 and super_group(256, 256, 4) == 1
    assert super_group(48, 48, 2) is None  # groups of 24: a packed block pair sharing no group
    assert super_group(24, 24, 2) is None  # channels not a multiple of 16: the dense path


def test_groups_of_24_run_per_output_block_runs():
    """Groups of 24 no longer keep the dense block-diagonal conv (test_grouped_runs.py): 7 block
    pairs per tap (grouped_runs.runs) where the dense conv multiplied 9, two of them all zero."""
    tiling, compiled = check(conv_model(48, 48, 16, 16, 1, group=2), "force_fp16")
    names = [k.name for k in compiled.last_run.kernels]
    assert "gconv2d_0" in names and "conv2d_0" not in names, names
    (k,) = [k for k in compiled.last_run.kernels if k.name == "gconv2d_0"]
    assert k.executed_macs == 7 * 16 * 16 * 9 * 256, k.executed_macs


def test_reduce_mean_over_hw_is_global_average_pool():
    for keepdims, out in ((1, [2, 20, 1, 1]), (0, [2, 20])):
        node = helper.make_node("ReduceMean", ["x"], ["y"], axes=[2, 3], keepdims=keepdims)
        g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 20, 7, 9])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        m.ir_version = 8
        x = testing.random_inputs(m)
        compiled = cann.compile(m, precision_mode="must_keep_origin_dtype")
        y = compiled.run(x)["y"]
        np.testing.assert_allclose(y, testing.run_onnxruntime(m, x)["y"], rtol=1e-5, atol=1e-6)
        names = [k.name for k in compiled.last_run.kernels]
        assert "global_avg_pool_0" in names and not any("reduce" in n for n in names), names


def test_resnext_dynamo_export_costs_what_the_legacy_export_does():
    cycles = {}
    for name in ("resnext", "resnext_legacy"):
        graph = onnx.load(FIXTURES / f"{name}.onnx", load_external_data=False).graph
        data = np.load(FIXTURES / f"{name}.npz")
        model = cann.compile(str(FIXTURES / f"{name}.onnx"), precision_mode="force_fp16")
        out = model.run({i.name: data[i.name] for i in graph.input})["logits"]
        assert np.linalg.norm(out - data["logits"]) / np.linalg.norm(data["logits"]) <= 1e-2
        cycles[name] = model.last_run.cycles
    assert cycles["resnext"] <= 1.05 * cycles["resnext_legacy"], cycles


def _fixture_grouped_convs():
    """(model, node, weight, group) of every grouped, non-depthwise Conv of the ResNeXt (both
    exports), ShuffleNet and MobileNetV2-style fixtures."""
    from onnx import numpy_helper

    from cann.lowering.depthwise import is_depthwise

    models = {n: onnx.load(FIXTURES / f"{n}.onnx") for n in ("resnext", "resnext_legacy", "mobilenet_v2")}
    models["shufflenet"] = testing.test_model("shufflenet")
    out = []
    for name, m in models.items():
        inits = {i.name: i for i in m.graph.initializer}
        for node in m.graph.node:
            group = next((a.i for a in node.attribute if a.name == "group"), 1)
            if node.op_type != "Conv" or group == 1:
                continue
            w = numpy_helper.to_array(inits[node.input[1]])
            if not is_depthwise(w.shape, w.shape[1] * group, group):
                out.append((name, node.name, w, group))
    return out


@pytest.mark.parametrize("k0,dtype", [(16, np.float16), (8, np.float32)])
def test_fixtures_multiply_no_all_zero_fractal(k0, dtype):
    """Every grouped convolution of the fixtures, as the lowering builds its weights (super-groups,
    else runs over 16- or, float32 1x1, 8-channel slices): no 16 x k0 weight fractal is all zero
    (all weights 1: only structural zeros). float32 (K0 = 8) included: ShuffleNet's 1x1 group-4
    convolutions had 7-35% of them all zero with runs over whole C1 blocks."""
    from cann.lowering.grouped import super_group_weights
    from cann.lowering.grouped_runs import run_weights

    convs = _fixture_grouped_convs()
    assert {c[0] for c in convs} == {"resnext", "resnext_legacy", "shufflenet"} and len(convs) == 36
    for name, node, w, group in convs:
        ones = np.ones_like(w)
        s = super_group(w.shape[1] * group, w.shape[0], group)
        mats = (super_group_weights(ones, group, s, k0, np.dtype(dtype)) if s
                else run_weights(ones, group, k0, np.dtype(dtype)))
        zero = sum(int((np.abs(z.astype(np.float32)).sum(axis=(2, 3)) == 0).sum()) for z in mats)
        assert zero == 0, (name, node, w.shape, group, zero)
