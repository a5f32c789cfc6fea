"""The loop form (tiling ``loops`` = 1) of pooling, the global average pool and trans_data: at one
pinned tiling a kernel's static instruction count stays within 5% when the feature map doubles
(issue 12, "Loops stay loops"), and the results match onnxruntime (race-checked runs) at both sizes."""

import sys
from pathlib import Path

import numpy as np
import pytest

from cann import testing
from cann.compiler import lower
from cann.dialects.ascend import kernels, op_to_instr

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from conftest import compile_pinned, pool_model  # noqa: E402


def _static(model, precision_mode: str, pins: dict) -> dict[str, int]:
    """Static instructions (loops not expanded) of each kernel, as benchmarks/codesize.py counts."""
    module = lower(model, until="ascend", precision_mode=precision_mode, tiling=pins, kb="none")
    return {k.sym_name.data: len([op_to_instr(op) for op in k.instructions]) for k in kernels(module)}


def _check(model, precision_mode: str, pins: dict) -> dict[str, dict]:
    """Compile with ``pins``, run (race-checked) against onnxruntime; returns the kernels' tilings."""
    compiled, tilings = compile_pinned(model, precision_mode, pins)
    x = testing.random_inputs(model)
    ref = testing.run_onnxruntime(model, x)["y"]
    y = compiled.run(x)["y"]
    tol = 2e-3 if precision_mode == "force_fp16" else 1e-5
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) <= tol
    return {k: {f: v for f, v in t.items() if f != "img2col_kernels"} for k, t in tilings.items()}


RESNET_MAX = dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])

CASES = [  # (op, batch, channels, small size, precision, kernels with a loop form, attributes)
    ("MaxPool", 1, 64, 56, "force_fp16", ["max_pool_0"], RESNET_MAX),
    ("MaxPool", 2, 16, 24, "must_keep_origin_dtype", ["max_pool_0"],
     dict(kernel_shape=[3, 3], strides=[2, 2], pads=[2, 2, 2, 2], dilations=[2, 2])),
    ("AveragePool", 1, 32, 20, "must_keep_origin_dtype", ["avg_pool_0"],
     dict(kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1], count_include_pad=0)),
    ("AveragePool", 1, 16, 18, "force_fp16", ["avg_pool_0"],
     dict(kernel_shape=[3, 3], strides=[2, 2], pads=[0, 0, 1, 1], count_include_pad=1)),
    ("AveragePool", 1, 2048, 7, "force_fp16", ["avg_pool_0"], dict(kernel_shape=[7, 7], strides=[1, 1])),
    ("GlobalAveragePool", 1, 2048, 7, "force_fp16", ["global_avg_pool_0"], {}),
    ("GlobalAveragePool", 2, 64, 12, "must_keep_origin_dtype", ["global_avg_pool_0"], {}),
    ("Identity", 1, 3, 112, "force_fp16", ["trans_data_0", "trans_data_1"], {}),
    ("Identity", 1, 20, 23, "must_keep_origin_dtype", ["trans_data_0", "trans_data_1"], {}),
    ("Identity", 2, 35, 17, "force_fp16", ["trans_data_0", "trans_data_1"], {}),
    ("Conv", 1, 3, 112, "force_fp16", ["trans_data_0"], {}),
    ("Conv", 2, 3, 36, "must_keep_origin_dtype", ["trans_data_0"], {}),
]


@pytest.mark.parametrize("op,batch,channels,size,precision_mode,names,attrs", CASES,
                         ids=[f"{c[0]}-{c[2]}x{c[3]}-{c[4]}" for c in CASES])
def test_loop_form_code_does_not_grow_with_the_map(op, batch, channels, size, precision_mode, names, attrs):
    small = pool_model(op, batch, channels, size, **attrs)
    tilings = _check(small, precision_mode, {k: {"loops": 1} for k in names})
    pins = {k: tilings[k] for k in names}
    for k in names:
        assert pins[k]["loops"] == 1
        if "rows" in pins[k]:  # as codesize.py pins: the row groups recorded only above 1
            pins[k].setdefault("m_blocks", 1)
    big_attrs = dict(attrs)
    if op == "AveragePool" and attrs["kernel_shape"][0] == size:  # a window over the whole map scales
        big_attrs["kernel_shape"] = [2 * size, 2 * size]
    big = pool_model(op, batch, channels, 2 * size, **big_attrs)
    assert {k: t for k, t in _check(big, precision_mode, pins).items() if k in names} == pins  # the pin held
    s, b = _static(small, precision_mode, pins), _static(big, precision_mode, pins)
    for k in names:
        assert 0.95 <= b[k] / s[k] <= 1.05, (k, s[k], b[k])


def test_whole_map_average_pool_takes_the_global_kernel_in_the_loop_form():
    """A 7x7 AveragePool over a 7x7 map under loops = 1 is the global average pool's loop form
    (planes, positions, cols), still named avg_pool_0; without the pin it is the window kernel."""
    m = pool_model("AveragePool", 1, 64, 7, kernel_shape=[7, 7], strides=[1, 1])
    assert {"planes", "cols"} <= set(_check(m, "force_fp16", {"avg_pool_0": {"loops": 1}})["avg_pool_0"])
    assert "planes" not in _check(m, "force_fp16", {})["avg_pool_0"]


def test_global_average_pool_pinned_planes_in_chunks():
    """Bug: GlobalAveragePool with ``planes`` > 1 pinned and ``positions`` below the plane (the
    224x224 tiling of ResNet-50's pool pinned at 448x448) summed only the first plane of each group."""
    m = pool_model("GlobalAveragePool", 1, 2048, 14)
    t = _check(m, "force_fp16", {"global_avg_pool_0": {"planes": 4, "positions": 49}})["global_avg_pool_0"]
    assert (t["planes"], t["positions"]) == (4, 49)


def test_padding_beyond_the_border_tile_keeps_the_unrolled_form():
    """Padding that a second row tile reads too (pads 3, one output row per tile) is not one loop
    body: the kernel falls back to today's code, with the same values."""
    m = pool_model("MaxPool", 1, 16, 12, kernel_shape=[7, 7], strides=[1, 1], pads=[3, 3, 3, 3])
    pins = {"max_pool_0": {"loops": 1, "rows": 1, "m_blocks": 1}}
    _check(m, "must_keep_origin_dtype", pins)
    module = lower(m, until="tile", precision_mode="must_keep_origin_dtype", tiling=pins, kb="none")
    assert "lo = " not in str(module)  # no clamped step: the border tiles are code of their own
