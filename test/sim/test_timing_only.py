"""Timing-only runs (``Model.time``, :mod:`cann.sim.timing_only`): the same cycles, per-pipe busy
cycles, bytes, instruction counts and profile as a full run, on real models; no values; the
conservative footprint of register-addressed copies."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import cann
from cann.hw import isa
from cann.hw.config import load_soc
from cann.sim.cost import cost_functions
from cann.sim.executor import RunStats
from cann.sim.timing import clear_schedules, schedule
from cann.testing import random_inputs, test_model

rng = np.random.default_rng(0)


def _graph(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                          [helper.make_tensor_value_info(n, t, None) for n, t in outputs],
                          [numpy_helper.from_array(a, n) for n, a in inits])
    return onnx.shape_inference.infer_shapes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]))


def _core(k):
    return (k.cycles, k.instructions, k.busy_by_pipe, k.busy_full_by_pipe, k.gm_read_bytes, k.gm_write_bytes,
            k.l2_read_bytes, k.serial_cycles, k.executed_macs)


def _assert_same_timing(model, inputs, **kw) -> RunStats:
    """A full run and a timing-only run of ``model``, each computing its schedules afresh, agree
    on every number; returns the timing-only stats."""
    clear_schedules()
    model.run(inputs, **kw)
    full = model.last_run
    clear_schedules()
    st = model.time(**kw)
    assert isinstance(st, RunStats) and model.last_run is st
    assert (st.cycles, st.instructions) == (full.cycles, full.instructions)
    assert len(st.kernels) == len(full.kernels)
    for a, b in zip(st.kernels, full.kernels):
        assert a.profile() == b.profile(), a.name
        assert a.busy_by_pipe == b.busy_by_pipe and a.waves == b.waves
        assert [_core(c) for c in a.cores] == [_core(c) for c in b.cores], a.name
    assert st.overflow is None and st.problems == full.problems
    return st


@pytest.mark.parametrize("name", ["resnet50", "squeezenet"])
def test_light_models(name):
    m = test_model(name)
    st = _assert_same_timing(cann.compile(m, precision_mode="force_fp16"), random_inputs(m))
    assert st.cycles == sum(k.cycles for k in st.kernels) > 0  # the full run's, launch by launch
    assert max(k.block_dim for k in st.kernels) == 32 and any(k.l2_read_bytes for k in st.kernels)


def test_gemm():
    b = (rng.standard_normal((768, 768)) / 28).astype(np.float16)
    m = _graph([helper.make_node("MatMul", ["A", "B"], ["Y"])], [("A", TensorProto.FLOAT16, [128, 768])],
               [("Y", TensorProto.FLOAT16)], [("B", b)])
    model, x = cann.compile(m), {"A": rng.standard_normal((128, 768)).astype(np.float16)}
    st = _assert_same_timing(model, x)
    assert st.executed_macs >= 128 * 768 * 768
    _assert_same_timing(model, x, sim_checks="warn")  # every block its own schedule and checks


@pytest.mark.parametrize("soc", ["Ascend910", "Ascend910B1"])  # coupled; separated (aiv cores)
def test_elementwise_and_softmax(soc):
    shape = [8, 64, 28, 28]
    m = _graph([helper.make_node("Add", ["x", "y"], ["s"]), helper.make_node("Relu", ["s"], ["r"]),
                helper.make_node("Softmax", ["r"], ["z"], axis=-1)],
               [("x", TensorProto.FLOAT, shape), ("y", TensorProto.FLOAT, shape)], [("r", TensorProto.FLOAT),
                                                                                    ("z", TensorProto.FLOAT)])
    x = {n: rng.standard_normal(shape).astype(np.float32) for n in "xy"}
    st = _assert_same_timing(cann.compile(m, soc_version=soc, precision_mode="must_keep_origin_dtype"), x)
    assert any(k.block_dim > 1 for k in st.kernels)
    assert {k.core_kind for k in st.kernels} == {"aicore" if soc == "Ascend910" else "aiv"}
    _assert_same_timing(cann.compile(m, soc_version=soc), x, sim_checks="off")


def test_gather_runtime_indices():
    # register-addressed copies: the data-dependent path (conservative footprints, same cycles)
    table = rng.standard_normal((20, 24)).astype(np.float32)
    m = _graph([helper.make_node("Gather", ["w", "i"], ["y"], axis=0)], [("i", TensorProto.INT64, [2, 5])],
               [("y", TensorProto.FLOAT)], [("w", table)])
    model = cann.compile(m)
    assert any(ins.defn.group == "dma_reg" for k in model.om.kernels for ins in isa.decode(k.code))
    for idx in (np.zeros((2, 5), np.int64), rng.integers(-20, 20, (2, 5))):
        _assert_same_timing(model, {"i": idx})


def test_time_needs_no_inputs_and_validates_sim_checks():
    m = _graph([helper.make_node("Relu", ["x"], ["y"])], [("x", TensorProto.FLOAT, [4, 16])], [("y", TensorProto.FLOAT)])
    model = cann.compile(m)
    st = model.time()
    assert st.cycles > 0 and st.instructions > 0 and model.last_run is st
    with pytest.raises(cann.CannError, match="--sim-checks: must be one of error, warn, off, got 'loud'"):
        model.time(sim_checks="loud")
    with pytest.raises(cann.CannError, match="over the simulator's budget of 1 instructions"):
        model.time(max_instructions=1)


def _gather_race(reg_stride: int):
    """ld_idx (bound 10) then a register-addressed read of one 64-byte row of argument 1, and an
    unsynchronized MTE3 write of row 7 of the same argument."""
    barrier = isa.make("pipe_barrier", pipe=int(isa.Pipe.ALL))
    return [isa.make("ld_idx", reg=0, dtype=1, src=0, bound=10), barrier,
            isa.make("copy_gm_to_ub_reg", dst=1024, src_arg=1, src=0, nburst=1, burst=64, reg=0,
                     reg_stride=reg_stride),
            isa.make("copy_ub_to_gm", dst_arg=1, dst=7 * 64, src=2048, nburst=1, burst=64, src_stride=0, dst_stride=0)]


def test_register_copy_footprint_is_every_allowed_index():
    spec = load_soc("Ascend910")
    costs, full = cost_functions(spec)
    prog = _gather_race(64)
    # the full run knows the register held 3: row 3 does not overlap the write of row 7
    real = schedule(prog, spec, costs, full, (0, 4096), "k", reg_values=[3])
    assert real.problems == []
    # timing-only: any row in [0, 10) may be read -- the race with the write of row 7 is reported
    with pytest.raises(cann.CannError, match=r"data race .* overlapping GM \[4544, 4608\)"):
        schedule(prog, spec, costs, full, (0, 4096), "k", reg_bounds=True)
    t = schedule(prog, spec, costs, full, (0, 4096), "k", checks="off", reg_bounds=True)
    assert (t.cycles, t.busy, t.gm_read_bytes, t.instructions) == (real.cycles, real.busy, real.gm_read_bytes, 4)
    # rows 0..9 with a stride that keeps them before row 7's bytes: no race
    assert schedule(_gather_race(8), spec, costs, full, (0, 4096), "k", reg_bounds=True).problems == []
