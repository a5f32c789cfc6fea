"""Shared by the hardware-loop tests: run a ``y = x + 1`` program on one simulated core."""

from __future__ import annotations

import numpy as np

from cann.hw.config import load_soc
from cann.sim.core import AICore
from cann.sim.spmd import check_control, dynamic_instructions, stream


def run_x_plus_1(prog: list, n: int) -> tuple[AICore, np.ndarray]:
    """Run ``prog`` (argument 0: ``n`` fp16 inputs, argument 1: ``n`` fp16 outputs) on one core with
    seeded standard-normal inputs; asserts the outputs are ``x + 1`` and that the core executed the
    instruction count :func:`dynamic_instructions` predicts. Returns the core and ``x``."""
    x = np.random.default_rng(0).standard_normal(n).astype(np.float16)
    gm = np.zeros(4 * n, np.uint8)
    gm[:2 * n] = x.view(np.uint8)
    check_control(prog, 2)
    core = AICore(load_soc("Ascend910"))
    instrs, args = stream(prog, 0, (0, 2 * n))
    stats = core.run(instrs, gm, args, "k")
    np.testing.assert_array_equal(gm[2 * n:].view(np.float16), x + np.float16(1))
    assert stats.instructions == dynamic_instructions(prog, 1)
    return core, x
