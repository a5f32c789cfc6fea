"""Cube kernels tile along every axis (issue 11.3): no legal Conv / MatMul is refused for size.

A grid of convolutions (channels x dilations x map sizes, 3x3 kernels, padding = dilation) in both
precision modes against onnxruntime, each asserting which tiling path its kernel took (whole rows,
input-channel chunks accumulated in L0C, a row split into column chunks, one kernel tap at a time,
taps that only read padding dropped); pinned tilings exercise the same paths on small shapes, also
with a fused residual epilogue; pinned tilings beyond the buffers are errors; MatMul with K, N and
M = 50,000 (and the float32 -> float16 conversion over more chunks than cores that N = 50,000
exposed).
"""

import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import cann
from cann import testing

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from conftest import compile_checked, compile_pinned  # noqa: E402

TOL = {"force_fp16": 1e-2, "must_keep_origin_dtype": 1e-4}


def conv_model(cin, cout, h, w, d, k=3, stride=1, pads=None, group=1):
    """One Conv [1, cin, h, w] -> [1, cout, ho, wo], padding = dilation unless ``pads`` given."""
    pads = [d * (k // 2)] * 4 if pads is None else list(pads)
    rng = np.random.default_rng(0)
    wt = (rng.standard_normal((cout, cin // group, k, k)) / np.sqrt(cin * k * k / group)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], dilations=[d, d], pads=pads, strides=[stride, stride],
                            group=group)
    ho = (h + pads[0] + pads[2] - d * (k - 1) - 1) // stride + 1
    wo = (w + pads[1] + pads[3] - d * (k - 1) - 1) // stride + 1
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, cin, h, w])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, cout, ho, wo])],
                          [numpy_helper.from_array(wt, "w"), numpy_helper.from_array(b, "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def check(model, precision_mode, pins=None, aicore_num=0):
    compiled, tilings = compile_checked(model, precision_mode, TOL[precision_mode], pins, aicore_num)
    return tilings["conv2d_0"] if "conv2d_0" in tilings else tilings, compiled


def _whole(t):
    return "cols" not in t and "c1" not in t and "taps" not in t


def _chunks(t):
    return "c1" in t and "cols" not in t and "taps" not in t


def _cols(t):
    return "cols" in t and t["rows"] == 1 and "taps" not in t


def _taps(t):
    return t.get("taps") == 1 and t["img2col_kernels"] == {(1, 1)}


def _cropped(path):
    """``path``, and the 3x3 runs as a 1x1: its off-centre taps only ever read padding."""
    return lambda t: path(t) and t["img2col_kernels"] == {(1, 1)}


# (cin, h, w, dilation, precision mode, which path the kernel takes)
GRID = [
    (16, 16, 16, 1, "force_fp16", _whole),
    (16, 16, 16, 12, "must_keep_origin_dtype", _whole),
    (16, 65, 65, 36, "force_fp16", _whole),
    (960, 16, 16, 12, "force_fp16", _whole),               # 60 C1 blocks x 16 rows fit L1 in fp16
    (960, 16, 16, 12, "must_keep_origin_dtype", _whole),   # and in fp32 (960 KB: rows clamped to the map)
    (960, 16, 16, 24, "force_fp16", _cropped(_whole)),     # DeepLabV3 ASPP: off-centre taps read only
    (960, 16, 16, 24, "must_keep_origin_dtype", _cropped(_whole)),  # padding, the 3x3 is a 1x1
    (960, 16, 16, 36, "force_fp16", _cropped(_whole)),
    (960, 16, 16, 36, "must_keep_origin_dtype", _cropped(_whole)),
    (960, 65, 65, 12, "force_fp16", _chunks),
    (2048, 16, 16, 12, "force_fp16", _chunks),             # 128 C1 blocks x 16 x 16 > L1: channel chunks
    (2048, 16, 16, 12, "must_keep_origin_dtype", _chunks),
    (2048, 16, 16, 24, "force_fp16", _cropped(_chunks)),   # a 1x1: 2 x 64 C1 blocks beat 2 row tiles
    # a wide row: only the middle kernel row ever reads the one input row (a 1x3 kernel)
    # (cols pinned to the whole row: the estimate prefers two column chunks of 208 since the conv model
    # counts overlapped pipes; the whole row in channel chunks is the path covered here)
    (2048, 1, 400, 12, "must_keep_origin_dtype", lambda t: "c1" in t and t.get("cols") == 400 and "taps" not in t
     and t["img2col_kernels"] == {(1, 3)}),
    (960, 1, 400, 36, "force_fp16", lambda t: _whole(t) and t["img2col_kernels"] == {(1, 3)}),
    (16, 65, 65, 1, "must_keep_origin_dtype", _whole),
    (16, 1, 5000, 1, "force_fp16", _cols),                 # 5000 positions > L0C: column chunks
    (16, 1, 5000, 24, "must_keep_origin_dtype", _cols),
    (16, 130, 130, 64, "must_keep_origin_dtype", _taps),   # a 129 x 130 window of 16 fp32 channels > L1
]


#: pins beyond ``m_blocks`` that keep a grid point on its path whatever the cost model prefers (the
#: cropped 2048-channel 1x1 runs as 2 row tiles of every channel by the estimate since the conv model
#: counts overlapped pipes; the channel-chunk path of a cropped kernel is what this point covers)
PINS = {(2048, 16, 16, 24, "force_fp16"): {"rows": 16}, (2048, 1, 400, 12, "must_keep_origin_dtype"): {"cols": 400}}


@pytest.mark.parametrize("cin,h,w,d,precision_mode,path", GRID,
                         ids=[f"{c}ch-{h}x{w}-d{d}-{m[:4]}" for c, h, w, d, m, _ in GRID])
def test_conv_grid_matches_onnxruntime(cin, h, w, d, precision_mode, path):
    """The single-group planner's paths (m_blocks pinned to 1: every core takes every output tile of
    its channel tile); the row split over groups of cores is tested below."""
    pins = {"m_blocks": 1, **PINS.get((cin, h, w, d, precision_mode), {})}
    tiling, _ = check(conv_model(cin, 32, h, w, d), precision_mode, {"conv2d_0": pins})
    assert path(tiling), str(tiling)


@pytest.mark.parametrize("precision_mode", TOL)
@pytest.mark.parametrize("cout,h,w,kw,pins,expect", [
    # 2 channel tiles x 16 groups of 20 two-row tiles = all 32 cores; 3x3 pad 1 stride 1
    (32, 40, 40, dict(k=3, pads=(1, 1, 1, 1)), {"rows": 2, "n_blocks": 2}, {"block_dim": 32, "m_blocks": 16}),
    # strided 7x7 with uneven pads: groups at the borders read padding, inner ones real rows
    (16, 30, 30, dict(k=7, stride=2, pads=(3, 2, 3, 2)), {"rows": 2}, {"m_blocks": 8, "block_dim": 8}),
    # pinned: 3 groups of 2 channel tiles; 8 row tiles split 3 / 3 / 2
    (32, 16, 16, dict(k=3, pads=(1, 1, 1, 1)), {"m_blocks": 3, "rows": 2, "n_blocks": 2},
     {"m_blocks": 3, "block_dim": 6}),
    # 5 channel tiles over groups of 2 cores: rounds of 2, 2 and a ragged 1 (guarded inside each group)
    (80, 12, 12, dict(k=3, pads=(1, 1, 1, 1)), {"m_blocks": 3, "rows": 4, "n_blocks": 2},
     {"m_blocks": 3, "n_blocks": 2, "block_dim": 6}),
    # 5 channel tiles on 3 cores, one group: rounds of 3 and a ragged 2
    (80, 12, 12, dict(k=3, pads=(1, 1, 1, 1)), {"m_blocks": 1, "n_blocks": 3}, {"n_blocks": 3, "block_dim": 3}),
])
def test_conv_rows_split_over_core_groups(precision_mode, cout, h, w, kw, pins, expect):
    """Output tiles split over groups of cores (``m_blocks``; block_offset_mod moves the channel
    pointers by block_idx % n_tiles): outputs match onnxruntime on every group, borders included."""
    model = conv_model(16, cout, h, w, 1, **kw)
    tiling, _ = check(model, precision_mode, {"conv2d_0": pins} if pins else None)
    assert {k: tiling[k] for k in expect} == expect, tiling


def test_conv_m_blocks_beyond_the_cores_is_an_error():
    with pytest.raises(cann.CannError, match=r"Conv: tiling m_blocks = 40 needs 2 x 40 cores, 32 available"):
        compile_pinned(conv_model(16, 32, 16, 16, 1), "force_fp16", {"conv2d_0": {"m_blocks": 40}})


def test_conv_n_blocks_beyond_the_channel_tiles_is_an_error():
    with pytest.raises(cann.CannError, match=r"Conv: tiling n_blocks = 3: 1 to 2 \(the channel tiles, at most the "
                                             r"cores\)"):
        compile_pinned(conv_model(16, 32, 16, 16, 1), "force_fp16", {"conv2d_0": {"n_blocks": 3}})


@pytest.mark.parametrize("precision_mode", TOL)
@pytest.mark.parametrize("pins,kw", [
    ({"cols": 5, "c1": 1}, dict(stride=2, pads=(3, 1, 2, 4))),   # column chunks x channel chunks, strided
    # a ragged last channel chunk (3 C1 / 2) (this case was group=2, groups of 24 channels, which
    # ran the dense block-diagonal path; grouped_runs.py now runs such groups without it)
    ({"cols": 7, "c1": 2, "n": 16}, dict()),
    ({"taps": 1, "rows": 3, "c1": 2}, dict(stride=2)),          # taps x channel chunks x row tiles
    ({"taps": 1, "cols": 4}, dict(pads=(0, 2, 3, 5))),          # taps x column chunks, asymmetric pads
    ({"rows": 2}, dict(pads=(6, 6, 6, 6), k=3, d=1)),           # whole rows, tiles that read only padding
    ({"taps": 1, "rows": 1}, dict(pads=(6, 6, 6, 6), k=3, d=1)),
])
def test_pinned_split_paths(pins, kw, precision_mode):
    d = kw.pop("d", 2)
    tiling, _ = check(conv_model(48, 48, 9, 21, d, **kw), precision_mode, {"conv2d_0": pins})
    assert {k: tiling[k] for k in pins} == pins


@pytest.mark.parametrize("precision_mode", TOL)
@pytest.mark.parametrize("pins", [{"cols": 5, "c1": 1}, {"taps": 1, "rows": 2, "c1": 2}, {"taps": 1, "cols": 7}])
def test_split_paths_with_fused_residual_epilogue(pins, precision_mode):
    """Conv + Add(residual) + Relu fused into the conv kernel: the residual tiles are read at each
    split tile's output position."""
    m = conv_model(48, 48, 9, 21, 2)
    m.graph.node[0].output[0] = "c"
    m.graph.node.extend([helper.make_node("Add", ["c", "x"], ["s"]), helper.make_node("Relu", ["s"], ["y"])])
    tiling, compiled = check(m, precision_mode, {"conv2d_0": pins})
    assert {k: tiling[k] for k in pins} == pins
    assert [k.name for k in compiled.om.kernels if "relu" in k.name or "add" in k.name] == []


def test_pinned_tiling_beyond_l0c_is_an_error():
    with pytest.raises(cann.CannError, match=r"^error: Conv_0: Conv: tiling rows = 9, cols = 600, c1 = 1 needs "
                                             r"5408 L0C positions \(4096 available\)"):
        compile_pinned(conv_model(16, 16, 9, 600, 1), "force_fp16", {"conv2d_0": {"rows": 9}})


def test_pinned_c1_takes_the_rows_that_fit():
    """All 128 C1 blocks of 2048 fp32 channels pinned in one load: at most 7 input rows (5 output
    rows) fit L1 (the tallest tile is not refused; 4 rows split the 16 evenly)."""
    _, tilings = compile_pinned(conv_model(2048, 16, 16, 16, 1), "must_keep_origin_dtype",
                                {"conv2d_0": {"c1": 128, "m_blocks": 1}})
    assert (tilings["conv2d_0"]["c1"], tilings["conv2d_0"]["rows"]) == (128, 4)


def test_pinned_rows_wider_than_l0c_is_an_error():
    with pytest.raises(cann.CannError, match=r"^error: Conv_0: Conv: tiling rows = 2 needs whole rows of 5000 "
                                             r"positions \(4096 fit L0C\)$"):
        compile_pinned(conv_model(16, 16, 2, 5000, 1), "force_fp16", {"conv2d_0": {"rows": 2}})


def test_no_does_not_fit_message_in_cube():
    import inspect

    from cann.lowering import batch_matmul, conv, conv_plan, conv_tiles, cube

    for module in (cube, conv, conv_plan, conv_tiles, batch_matmul):
        assert "does not fit" not in inspect.getsource(module)


def matmul_model(m, k, n, const_b):
    rng = np.random.default_rng(0)
    inputs = [helper.make_tensor_value_info("a", TensorProto.FLOAT, [m, k])]
    inits = []
    if const_b:
        inits.append(numpy_helper.from_array((rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32), "b"))
    else:
        inputs.append(helper.make_tensor_value_info("b", TensorProto.FLOAT, [k, n]))
    g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "g", inputs,
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("precision_mode", TOL)
@pytest.mark.parametrize("m,k,n,const_b", [(4, 50000, 16, True), (4, 50000, 16, False),
                                           (4, 64, 50000, True), (4, 64, 50000, False), (50000, 64, 16, True)])
def test_matmul_huge_k_n_and_m(m, k, n, const_b, precision_mode):
    model = matmul_model(m, k, n, const_b)
    x = testing.random_inputs(model)
    ref = testing.run_onnxruntime(model, x)["y"]
    y = cann.compile(model, precision_mode=precision_mode).run(x)["y"]
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) <= TOL[precision_mode]


@pytest.mark.parametrize("cols", [10000, 13068])  # 25 chunks of 25,344 elements + a partial one; exactly 33
def test_dtype_conversion_over_more_chunks_than_cores(cols):
    """The float32 <-> float16 conversion kernel (trans_data) with more chunks than cores: the rounds
    after the first read and write their own chunks (they re-did the first round's; a MatMul with
    N = 50,000 came out wrong in float16)."""
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, cols])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, cols])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    x = testing.random_inputs(model)
    y = cann.compile(model, precision_mode="force_fp16").run(x)["y"]
    np.testing.assert_allclose(y, np.maximum(x["x"], 0), rtol=1e-3, atol=1e-3)


def _batched(m, batch: int):
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_value = batch
    m.graph.output[0].type.tensor_type.shape.dim[0].dim_value = batch
    return m


@pytest.mark.parametrize("precision_mode", TOL)
def test_batch_spreads_over_idle_cores(precision_mode):
    """Batch 8 of a 32-channel 7x7 conv: one image fills its channel groups (2 in float16, 4 in
    float32) x 1 row tile, so groups of cores take every i_blocks-th image (block offsets by
    (block_idx // n_blocks) % i_blocks)."""
    tiling, _ = check(_batched(conv_model(32, 32, 7, 7, 1), 8), precision_mode)
    assert (tiling["i_blocks"], tiling["block_dim"]) == (8, {"force_fp16": 16, "must_keep_origin_dtype": 32}[precision_mode])


def test_pinned_image_groups():
    m = _batched(conv_model(32, 32, 7, 7, 1), 6)
    tiling, _ = check(m, "force_fp16", {"conv2d_0": {"i_blocks": 3}})
    # 3 image groups leave 10 cores to an image: 2 channel groups x 3 groups of its 7 rows
    assert (tiling["i_blocks"], tiling["m_blocks"], tiling["block_dim"]) == (3, 3, 18)
    with pytest.raises(cann.CannError, match=r"^error: .*Conv: tiling i_blocks = 4: a divisor of the batch 6 up "
                                             r"to 32 cores"):
        compile_pinned(m, "force_fp16", {"conv2d_0": {"i_blocks": 4}})
