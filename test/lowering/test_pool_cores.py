"""Pooling spread over the cores: the C1 planes of an image, and groups of output rows when the
planes leave cores idle (``m_blocks``), each group its own code; numerics against onnxruntime."""

import sys
from pathlib import Path

import numpy as np
import pytest

import cann
from cann import testing

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from conftest import compile_pinned, pool_model  # noqa: E402


RESNET_POOL = dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])


@pytest.mark.parametrize("batch", [1, 3])
def test_resnet_max_pool_uses_every_core(batch):
    """ResNet-50's pool (64 channels = 4 C1 planes, 112 -> 56): 8 groups of 4 cores, each its rows
    of output tiles; the batch stays a loop around one image's code."""
    m = pool_model("MaxPool", batch, 64, 112, **RESNET_POOL)
    x = testing.random_inputs(m)
    ref = testing.run_onnxruntime(m, x)["y"]
    compiled, tilings = compile_pinned(m, "force_fp16")
    t = tilings["max_pool_0"]
    assert (t["block_dim"], t["m_blocks"]) == (32, 8)
    y = compiled.run(x)["y"]
    assert np.array_equal(y, ref.astype(np.float16).astype(np.float32))  # a max is exact in float16 here


@pytest.mark.parametrize("op,attrs", [("MaxPool", RESNET_POOL),
                                      ("AveragePool", dict(kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1]))])
def test_pinned_row_groups(op, attrs):
    """m_blocks pinned: 1 keeps the planes on 4 cores (must not split), 3 splits the rows unevenly;
    both match onnxruntime (an AveragePool's border divisors per group too)."""
    m = pool_model(op, 1, 64, 30, **attrs)
    x = testing.random_inputs(m)
    ref = testing.run_onnxruntime(m, x)["y"]
    name = "max_pool_0" if op == "MaxPool" else "avg_pool_0"
    for pin, block_dim in ((1, 4), (3, 12)):
        compiled, tilings = compile_pinned(m, "must_keep_origin_dtype", {name: {"m_blocks": pin}})
        assert tilings[name]["block_dim"] == block_dim
        y = compiled.run(x)["y"]
        assert np.linalg.norm(y - ref) / np.linalg.norm(ref) <= 1e-5


def test_planes_fill_the_cores_no_row_groups():
    """512 channels (32 C1 planes) on 32 cores: no row groups."""
    compiled, tilings = compile_pinned(pool_model("MaxPool", 1, 512, 14, **RESNET_POOL), "force_fp16")
    assert "m_blocks" not in tilings["max_pool_0"] and tilings["max_pool_0"]["block_dim"] == 32


def test_pinned_row_groups_beyond_the_rows_is_an_error():
    with pytest.raises(cann.CannError, match=r"^error: .*Pool: tiling m_blocks = 9: 1 to 8 \(the row tiles, "
                                             r"4 cores each, at most 32 cores\)"):
        compile_pinned(pool_model("MaxPool", 1, 64, 16, **RESNET_POOL), "force_fp16", {"max_pool_0": {"m_blocks": 9}})
