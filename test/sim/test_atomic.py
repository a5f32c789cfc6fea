"""copy_ub_to_gm_add (atomic-add store): values, cost, and the cross-block race check."""

from __future__ import annotations

import numpy as np
import pytest

from cann.codegen.om import IoTensor, Kernel, Launch, OfflineModel
from cann.hw import isa
from cann.hw.config import load_soc
from cann.sim.core import SimError
from cann.sim.cost import CostModel
from cann.sim.executor import run_model
from cann.sim.timing import SimWarning
from cann.sim.timing_only import time_model

SPEC = load_soc("Ascend910")


def _model(prog, block_dim, x_rows=8, y_rows=1, dtype="float16"):
    return OfflineModel("Ascend910", "force_fp16", (IoTensor("x", (x_rows, 128), dtype, 0),),
                        (IoTensor("y", (y_rows, 128), dtype, 32768),), 1 << 16, (1 << 16) - 256, b"",
                        (Kernel("k", block_dim, 2, isa.encode(prog)),), (Launch(0, (0, 32768)),))


def _load(in_stride, code=0, isz=2):
    return [isa.make("block_offset", arg=0, stride=in_stride),
            isa.make("copy_gm_to_ub", dst=0, src_arg=0, src=0, nburst=1, burst=128 * isz),
            isa.make("pipe_barrier", pipe=isa.Pipe.ALL)]


def _add(code=0, isz=2, dst=0):
    return isa.make("copy_ub_to_gm_add", dst_arg=1, dst=dst, src=0, nburst=1, burst=128 * isz, dtype=code)


@pytest.mark.parametrize("dtype,code", [("float16", 0), ("float32", 1)])
def test_blocks_adding_to_the_same_row_sum_in_block_order(dtype, code):
    isz = np.dtype(dtype).itemsize
    x = np.random.default_rng(0).standard_normal((8, 128)).astype(dtype)
    out, stats = run_model(_model(_load(128 * isz, code, isz) + [_add(code, isz)], 8, dtype=dtype), {"x": x})
    want = np.zeros(128, dtype)
    for row in x:  # each add: float32 sum rounded to the dtype, blocks in order
        want = (want.astype(np.float32) + row.astype(np.float32)).astype(dtype)
    np.testing.assert_array_equal(out["y"][0], want)
    assert not stats.problems


def test_an_add_costs_a_plain_store_of_its_bytes():
    cm = CostModel(SPEC, 32)
    plain = isa.make("copy_ub_to_gm", dst_arg=1, dst=0, src=0, nburst=4, burst=512, src_stride=512, dst_stride=1024)
    add = isa.make("copy_ub_to_gm_add", dst_arg=1, dst=0, src=0, nburst=4, burst=512, src_stride=512,
                   dst_stride=1024, dtype=0)
    assert cm.cost(add) == cm.cost(plain) > 0


def _mixed():
    """Block 0 writes y plainly; blocks 1.. add to it: a race between cores."""
    return _load(256) + [isa.make("block_if", lo=0, hi=1),
                         isa.make("copy_ub_to_gm", dst_arg=1, dst=0, src=0, nburst=1, burst=256),
                         isa.make("block_endif"),
                         isa.make("block_if", lo=1, hi=4), _add(), isa.make("block_endif")]


def test_a_plain_write_of_bytes_another_block_adds_to_is_reported():
    x = np.ones((8, 128), np.float16)
    with pytest.raises(SimError, match=r"block 0 writes GM bytes \[32768, 33024\) that block 1 adds to"):
        run_model(_model(_mixed(), 4), {"x": x})
    with pytest.raises(SimError, match="a race between cores"):
        time_model(_model(_mixed(), 4))
    with pytest.warns(SimWarning, match="block 0 writes GM bytes"):
        _, stats = run_model(_model(_mixed(), 4), {"x": x}, sim_checks="warn")
    assert stats.problems and "adds to" in stats.problems[0][1]
    run_model(_model(_mixed(), 4), {"x": x}, sim_checks="off")  # not checked


def test_a_block_may_write_then_add_to_its_own_bytes():
    # each block writes its own row, then adds x to it: ordered on its MTE3 queue, no race
    x = np.arange(4 * 128, dtype=np.float16).reshape(4, 128) / 64
    prog = _load(256) + [isa.make("block_offset", arg=1, stride=256),
                         isa.make("copy_ub_to_gm", dst_arg=1, dst=0, src=0, nburst=1, burst=256),
                         isa.make("pipe_barrier", pipe=isa.Pipe.ALL), _add()]
    out, stats = run_model(_model(prog, 4, 4, 4), {"x": x})
    np.testing.assert_array_equal(out["y"], (x.astype(np.float32) * 2).astype(np.float16))
    assert not stats.problems


def test_an_add_of_partial_elements_is_a_fault():
    x = np.ones((8, 128), np.float32)
    prog = _load(512, 1, 4) + [isa.make("copy_ub_to_gm_add", dst_arg=1, dst=0, src=0, nburst=1, burst=6, dtype=1)]
    with pytest.raises(SimError, match="not whole float32 elements"):
        run_model(_model(prog, 1, dtype="float32"), {"x": x})
