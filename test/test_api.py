"""``cann.compile``'s ``tiling`` pins: kernels' tilings fixed from the Python API (the hook AutoTune's
knowledge base uses), checked by ``convert-graph-to-tile``."""

import numpy as np
import pytest

import cann
from cann.compiler import lower
from cann.dialects.ascend import kernels
from cann.testing import random_inputs, run_onnxruntime, test_model


def _tilings(module) -> dict:
    return {k.sym_name.data: {f: v.value.data for f, v in k.attributes["tile.tiling"].data.items()}
            for k in kernels(module) if "tile.tiling" in k.attributes}


def test_tiling_pins_a_kernel_and_still_matches():
    m = test_model("squeezenet")
    free = _tilings(lower(m))["conv2d_0"]
    pinned = _tilings(lower(m, tiling={"conv2d_0": {"rows": 2, "m_blocks": 4}}))["conv2d_0"]
    assert free["rows"] != 2 and (pinned["rows"], pinned["m_blocks"]) == (2, 4)
    x = random_inputs(m)
    ref = run_onnxruntime(m, x)
    y = cann.compile(m, tiling={"conv2d_0": {"rows": 2, "m_blocks": 4}}).run(x)
    for k, r in ref.items():
        assert np.linalg.norm(y[k] - r) / np.linalg.norm(r) <= 1e-2


def test_tiling_beyond_the_buffers_is_an_error():
    """A pin the fused kernel (conv + relu) refuses is reported, not dropped: the group's fallback to
    one kernel per op names its conv conv2d_0 again (it was conv2d_1, and the pin silently unused)."""
    with pytest.raises(cann.CannError, match=r"^error: n0: tiling: n = 24 must be a multiple of 16 dividing 64$"):
        cann.compile(test_model("squeezenet"), tiling={"conv2d_0": {"n": 24}})
