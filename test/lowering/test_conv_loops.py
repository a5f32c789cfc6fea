"""Conv kernels whose code size does not grow with the feature map (issue 12, "loops stay loops").

Each case compiles one convolution at a map size and at twice its height and width with the same
pinned tiling (rows x cols output tiles, the core groups), and asserts the kernel's static
instruction count (loops not expanded) grows by at most 5%, and that both sizes match onnxruntime,
run with the race checker on: the column tiles of a tile row and the tile rows of a core group are
nested hardware loops, the border tiles (pads, a ragged last tile moved back to the map's edge)
joining them through ``loop_clamp`` (with tiling ``loops`` = 1, else a ragged last tile is peeled).
Without the pin the loops' counts must be at least 3 at the smaller size (the flags
``ascend-insert-sync`` gives a loop depend on its count below that); with ``loops`` = 1 a core
group's tiles are one loop nest whatever its counts (one tile at the small size, a 2x2 grid at the
large) and its flags are loop-carried at every distance.
"""

import sys
from pathlib import Path

import pytest
from onnx import helper

import cann
from cann import testing
from cann.compiler import lower
from cann.dialects.ascend import kernels

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from conftest import compile_checked  # noqa: E402
from test_cube_tiling import conv_model  # noqa: E402

TOL = 1e-2


def static_count(model, pins) -> int:
    """Instructions of ``conv2d_0``'s code with ``pins`` pinned (loops not expanded)."""
    module = lower(model, until="ascend", tiling=pins)
    (k,) = [k for k in kernels(module) if k.sym_name.data == "conv2d_0"]
    return len(list(k.instructions))


# (cin, cout, h, kernel, stride, tiling of conv2d_0): the map is h x h, then 2h x 2h
CASES = [
    (16, 16, 15, 3, 2, {"rows": 3, "cols": 3, "n": 16, "m_blocks": 1, "loops": 1}),  # strided, ragged row, column
    (16, 48, 20, 3, 1, {"rows": 1, "cols": 8, "n": 48, "m_blocks": 1, "loops": 1}),  # column chunks, 3 C0 blocks
    (16, 16, 26, 3, 1, {"rows": 1, "cols": 6, "n": 16, "m_blocks": 1}),  # ragged last column peeled (loops 0)
    # one tile per core group at the small size, a 2x2 grid at the large (loops of one iteration)
    (16, 16, 8, 3, 1, {"rows": 8, "cols": 8, "n": 16, "k": 144, "m_blocks": 1, "loops": 1}),  # whole tiles
    (16, 16, 15, 3, 2, {"rows": 8, "cols": 8, "n": 16, "k": 144, "m_blocks": 1, "loops": 1}),  # strided, last moved back
    (16, 32, 8, 3, 1, {"rows": 4, "cols": 8, "n": 16, "k": 144, "m_blocks": 2, "loops": 1}),  # two core groups
    # ResNet-50's conv2d_44 narrowed (3x3 stride 2, a whole 7x7 output tile, its k / m pins): four C1
    # blocks copied one at a time, each at the fixed pitch of the full window (img2col fm_c1_stride):
    # at a window clipped at both edges the packed pitch was a product of two clamps, no loop_clamp,
    # and the 2x2 grid kept the rolled form (39 -> 239 instructions)
    (64, 16, 14, 3, 2, {"rows": 7, "cols": 7, "n": 16, "k": 256, "m": 64, "m_blocks": 1, "loops": 1}),
]


@pytest.mark.parametrize("cin,cout,h,k,stride,tiling", CASES)
def test_code_size_and_values(cin, cout, h, k, stride, tiling):
    pins = {"conv2d_0": dict(tiling)}
    counts = []
    for size in (h, 2 * h):
        model = conv_model(cin, cout, size, size, 1, k=k, stride=stride, pads=[k // 2] * 4)
        _, tilings = compile_checked(model, "force_fp16", TOL, pins)
        got = tilings["conv2d_0"]
        assert got["rows"] == tiling["rows"] and got.get("cols", tiling["cols"]) == tiling["cols"]
        counts.append(static_count(model, pins))
    assert counts[1] <= counts[0] * 1.05, counts


@pytest.mark.parametrize("pins", [
    {"rows": 3, "cols": 8, "n": 32, "m_blocks": 3},   # rectangles, 2 C0 blocks: a copy per map row; uneven groups
    {"rows": 2, "cols": 5, "n": 16, "m_blocks": 4},   # a group starting and ending inside a tile row
    {"rows": 2, "cols": 5, "n": 16, "m_blocks": 4, "loops": 1},  # ... ragged last row and columns moved back
    {"rows": 4, "cols": 6, "m": 16, "n": 16},         # M subtiles of 16 across the rectangle's rows
])
def test_rectangles_with_fused_residual_epilogue(pins):
    """Conv + Add(residual) + Relu fused into the conv kernel, ``rows`` x ``cols`` rectangle tiles: the
    residual is read and the output written per map row of each M subtile (race checker on)."""
    m = conv_model(32, 32, 11, 19, 1)
    m.graph.node[0].output[0] = "c"
    m.graph.node.extend([helper.make_node("Add", ["c", "x"], ["s"]), helper.make_node("Relu", ["s"], ["y"])])
    _, tilings = compile_checked(m, "force_fp16", TOL, {"conv2d_0": pins})
    assert {k: tilings["conv2d_0"][k] for k in pins} == pins


def test_loops_pin_is_0_or_1():
    with pytest.raises(cann.CannError, match=r"Conv: tiling loops = 2: 0 \(ragged last tiles peeled\) or 1"):
        compile_checked(conv_model(16, 16, 8, 8, 1), "force_fp16", TOL, {"conv2d_0": {"loops": 2}})


def test_rectangles_over_a_batch_in_fp32():
    """Two images over two image groups (``i_blocks``), fp32 (k0 = 8), rectangles with moved-back
    ragged tiles: the tile loops sit inside the batch loop and the image groups' block offsets."""
    m = testing.with_batch(conv_model(16, 32, 10, 13, 1), 2)
    pins = {"rows": 3, "cols": 4, "n": 16, "m_blocks": 1, "i_blocks": 2, "loops": 1}
    _, tilings = compile_checked(m, "must_keep_origin_dtype", 1e-4, {"conv2d_0": pins})
    assert {k: tilings["conv2d_0"][k] for k in pins} == pins
