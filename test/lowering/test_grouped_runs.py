"""Grouped convolutions whose groups do not fill whole C0 blocks (cann/lowering/grouped_runs.py):
per run of output blocks over the input blocks their groups read, against onnxruntime (race
checker on; batch 2, 1x1 and 3x3, stride 2, fp16 / fp32, fused residual + ReLU), no all-zero 16x16
weight fractal loaded, and the MACs executed are the runs' block pairs, not ``group`` x
(ShuffleNet's group-3 / group-4 1x1 convolutions; groups of 24 and 28)."""

import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import cann
from cann import testing
from cann.lowering.grouped_runs import run_weights, runs, slice_channels

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from conftest import compile_checked  # noqa: E402

TOL = {"force_fp16": 1e-2, "must_keep_origin_dtype": 1e-4}


def grouped_model(n, cin, cout, h, group, k, stride, relu_residual=False):
    """Conv [n, cin, h, h] (k x k, padding k // 2, ``group``) -> y, optionally + x then Relu."""
    rng = np.random.default_rng(1)
    wt = (rng.standard_normal((cout, cin // group, k, k)) / np.sqrt(cin * k * k / group)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    p = k // 2
    ho = (h + 2 * p - k) // stride + 1
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c" if relu_residual else "y"], pads=[p] * 4,
                              strides=[stride, stride], group=group)]
    if relu_residual:
        nodes += [helper.make_node("Add", ["c", "x"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, cin, h, h])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, cout, ho, ho])],
                          [numpy_helper.from_array(wt, "w"), numpy_helper.from_array(b, "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


CASES = [  # n, cin, cout, h, group, k, stride
    (2, 204, 204, 8, 3, 1, 1),   # ShuffleNet group 3, 68 channels per group, batch 2
    (1, 102, 204, 9, 3, 3, 2),   # 34 -> 68 per group, 3x3, stride 2
    (2, 112, 112, 7, 4, 1, 1),   # group 4, 28 per group
    (1, 112, 112, 10, 4, 3, 2),  # 28 per group, 3x3 stride 2
    (2, 48, 48, 8, 2, 3, 1),     # group 2, 24 per group (cin a multiple of 16, blocks sharing no group)
    (1, 24, 48, 8, 3, 1, 1),     # 8 -> 16 per group, cin not a multiple of 16
]


@pytest.mark.parametrize("precision_mode", TOL)
@pytest.mark.parametrize("n,cin,cout,h,group,k,stride", CASES)
def test_runs_match_onnxruntime(n, cin, cout, h, group, k, stride, precision_mode):
    compiled, _ = compile_checked(grouped_model(n, cin, cout, h, group, k, stride), precision_mode,
                                  TOL[precision_mode])
    names = [kern.name for kern in compiled.last_run.kernels]
    assert "gconv2d_0" in names and not any(nm.startswith("conv2d") for nm in names), names


@pytest.mark.parametrize("precision_mode", TOL)
def test_runs_with_fused_residual_relu(precision_mode):
    """The fused epilogue's residual is read per run's output blocks (68 channels per group)."""
    compiled, _ = compile_checked(grouped_model(2, 204, 204, 6, 3, 1, 1, relu_residual=True), precision_mode,
                                  TOL[precision_mode])
    names = [kern.name for kern in compiled.last_run.kernels]
    assert "gconv2d_0" in names and not any(nm.startswith(("conv2d", "add", "relu")) for nm in names), names


@pytest.mark.parametrize("cin,cout,group,k", [(204, 204, 3, 1), (136, 272, 4, 1), (112, 112, 4, 3),
                                               (48, 48, 2, 3), (24, 48, 3, 1), (544, 544, 4, 1)])
def test_no_all_zero_weight_fractal(cin, cout, group, k):
    """The Zn weights the kernel loads, per run of output blocks, float16: every 16x16 fractal holds
    a real weight (all weights 1, so only structural zeros)."""
    w = np.ones((cout, cin // group, k, k), np.float32)
    mats = run_weights(w, group, 16, np.dtype(np.float16))
    assert len(mats) == len(runs(cin, cout, group))
    for (lo, wi, jo, wo), z in zip(runs(cin, cout, group), mats):
        assert z.shape == (wi * k * k, wo, 16, 16)
        assert np.all(np.abs(z.astype(np.float32)).sum(axis=(2, 3)) > 0), (lo, wi, jo, wo)
    # fewer block pairs than the dense block-diagonal conv multiplies
    assert sum(wi * wo for _, wi, _, wo in runs(cin, cout, group)) < -(-cin // 16) * -(-cout // 16)


@pytest.mark.parametrize("cin,cout,group", [(204, 204, 3), (136, 272, 4), (112, 112, 4), (112, 24, 4),
                                            (24, 48, 3), (544, 544, 4), (48, 48, 2)])
def test_no_all_zero_fp32_fractal_in_1x1_runs(cin, cout, group):
    """float32 (K0 = 8), 1x1: runs over 8-channel input slices (slice_channels), so no 16x8 fractal
    holds only another group's lanes (with whole C1 blocks, ShuffleNet's 28 / 34 / 68 / 136 per
    group had 7-35% of them all zero: a block straddling two groups)."""
    w = np.ones((cout, cin // group, 1, 1), np.float32)
    mats = run_weights(w, group, 8, np.dtype(np.float32))
    rs = runs(cin, cout, group, 8)
    assert slice_channels(8, 1, 1) == 8 and slice_channels(16, 1, 1) == 16 and slice_channels(8, 3, 3) == 16
    assert len(mats) == len(rs)
    for (lo, wi, jo, wo), z in zip(rs, mats):
        assert z.shape == (wi, wo, 16, 8)
        assert np.all(np.abs(z).sum(axis=(2, 3)) > 0), (lo, wi, jo, wo)


def test_fp32_1x1_runs_execute_their_slice_pairs():
    """ShuffleNet's first grouped conv shape (group 4 of 28, 1x1) in float32 on 8x8: the mmads run
    K = the run's 8-channel slices x 8, N its output blocks x 16, per 16-position M tile: the
    slice pairs of runs(..., 8), not the 16-channel blocks' (values against onnxruntime)."""
    model = grouped_model(1, 112, 112, 8, 4, 1, 1)
    compiled, _ = compile_checked(model, "must_keep_origin_dtype", TOL["must_keep_origin_dtype"])
    (kern,) = [kk for kk in compiled.last_run.kernels if kk.name.startswith("gconv2d")]
    pairs8 = sum(wi * wo for _, wi, _, wo in runs(112, 112, 4, 8))
    pairs16 = sum(wi * wo for _, wi, _, wo in runs(112, 112, 4))
    assert kern.executed_macs == pairs8 * 8 * 16 * 64 < pairs16 * 16 * 16 * 64, (kern.executed_macs, pairs8)


def test_runs_of_shufflenet_group_3():
    """3 groups of 68: blocks 0-3 read input blocks 0-4, block 4 (channels 64-79, groups 0 and 1)
    blocks 0-8, ...: 73 block pairs, against 13 x 13 = 169 dense."""
    assert runs(204, 204, 3) == [(0, 5, 0, 4), (0, 9, 4, 1), (4, 5, 5, 3), (4, 9, 8, 1), (8, 5, 9, 4)]


def test_runs_execute_their_block_pairs_not_group_times():
    """68 channels per group in 3 groups, 1x1 on 16x16 (rows of 16 positions: no M padding): 73
    block pairs of 16x16 per position, where the dense block-diagonal conv did 169 (13 x 13)."""
    model = grouped_model(1, 204, 204, 16, 3, 1, 1)
    compiled = cann.compile(model, precision_mode="force_fp16")
    compiled.run(testing.random_inputs(model))
    (kern,) = [kk for kk in compiled.last_run.kernels if kk.name.startswith("gconv2d")]
    assert kern.work.model_macs == 204 * 68 * 256
    assert kern.executed_macs == 73 * 16 * 16 * 256, (kern.executed_macs, kern.work.model_macs)


@pytest.mark.parametrize("precision_mode", TOL)
@pytest.mark.parametrize("k,pins", [(3, {"n1": 1, "rows": 3}), (3, {"n1": 3, "m_blocks": 2}),
                                    (3, {"n1": 2, "rows": 7, "m_blocks": 1}),
                                    (1, {"n1": 4, "rows": 1, "m_blocks": 1})])  # the last: weights kept in L0B
def test_pinned_chunks_and_bands_match(k, pins, precision_mode):
    """Runs split into chunks of n1 output blocks (weights read with a stride over K), bands, groups
    of cores, a core's consecutive items of one chunk reusing its weights: the same values (3
    groups of 68, batch 2, 3x3 and 1x1)."""
    compiled, tilings = compile_checked(grouped_model(2, 204, 204, 7, 3, k, 1), precision_mode, TOL[precision_mode],
                                        {"gconv2d_0": pins})
    assert all(tilings["gconv2d_0"][k] == v for k, v in pins.items()), tilings["gconv2d_0"]
