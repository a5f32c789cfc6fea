"""Parallel-pipe timing, sync checking, race detection, GM sharing, profile and trace, on
hand-written instruction lists (values asserted)."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from cann.codegen.om import IoTensor, Kernel, Launch, OfflineModel
from cann.hw import isa
from cann.hw.config import available_socs, load_soc
from cann.sim import profile as prof
from cann.sim.core import AICore, SimError
from cann.sim.executor import run_model

SPEC = load_soc("Ascend910")
L, B = SPEC.latency, SPEC.bandwidth
P = isa.Pipe
cdiv = lambda a, b: -(-a // b)  # noqa: E731
TILE = 16384  # bytes per tile: 8192 fp16, 64 vector repeats


def run(prog, checks="error", gm=None, args=(0, 1 << 20)):
    core = AICore(SPEC)
    gm = np.zeros(2 << 20, np.uint8) if gm is None else gm
    return core.run(prog, gm, args, "k", checks=checks)


def copy_in(ub, g, n=TILE):
    return isa.make("copy_gm_to_ub", dst=ub, src_arg=0, src=g, nburst=1, burst=n)


def copy_out(ub, g, n=TILE):
    return isa.make("copy_ub_to_gm", dst_arg=1, dst=g, src=ub, nburst=1, burst=n)


def vmuls(ub, n=TILE, dst=None):
    return isa.make("vmuls", dtype=0, dst=ub if dst is None else dst, src0=ub, repeat=n // 256, mask=128, dst_blk=1,
                    src0_blk=1, dst_rep=8, src0_rep=8, scalar=2.0)


def setf(s, d, e=0):
    return isa.make("set_flag", src_pipe=s, dst_pipe=d, event=e)


def waitf(s, d, e=0):
    return isa.make("wait_flag", src_pipe=s, dst_pipe=d, event=e)


C_IN = L.mte_startup + TILE // B.gm_to_ub
C_OUT = L.mte_startup + TILE // B.ub_to_gm
C_V = L.vector_startup + TILE // 256 * SPEC.vector.cycles_per_repeat
S = L.scalar


def test_lone_instruction_costs_its_formula():
    for ins, c in ((copy_in(0, 0), C_IN), (vmuls(0), C_V), (copy_out(0, 0), C_OUT)):
        st = run([ins])
        assert st.cycles == c == st.serial_cycles
        t = st.timing
        assert t.start.tolist() == [0] and t.end.tolist() == [c]


def test_independent_pipes_overlap():
    st = run([copy_in(0, 0), vmuls(65536), copy_out(131072, 0)])
    assert st.cycles == max(C_IN, C_V, C_OUT) and st.serial_cycles == C_IN + C_V + C_OUT
    assert st.busy_by_pipe == {"S": 0, "V": C_V, "M": 0, "MTE1": 0, "MTE2": C_IN, "MTE3": C_OUT}


def test_flag_dependency_serializes_exactly():
    st = run([copy_in(0, 0), setf(P.MTE2, P.V), waitf(P.MTE2, P.V), vmuls(0)])
    assert st.cycles == C_IN + S + S + C_V == st.serial_cycles
    assert st.timing.start.tolist() == [0, C_IN, C_IN + S, C_IN + 2 * S]


def test_pipe_all_barrier_orders_everything():
    st = run([copy_in(0, 0), vmuls(65536), isa.make("pipe_barrier", pipe=P.ALL), copy_out(65536, 0), vmuls(0)])
    assert st.cycles == max(C_IN, C_V) + S + max(C_OUT, C_V)


def test_pipe_barrier_of_one_pipe_does_not_order_across_pipes():
    with pytest.raises(SimError, match="data race"):
        run([copy_in(0, 0), isa.make("pipe_barrier", pipe=P.V), vmuls(0)])
    st = run([copy_in(0, 0), isa.make("pipe_barrier", pipe=P.MTE2), copy_in(0, 0)])
    assert st.cycles == 2 * C_IN + S  # same pipe: in order, barrier occupies MTE2


# ---------------------------------------------------------------------------------------------
# the double-buffered copy-in -> vector -> copy-out loop


def vconv(src, dst, n=TILE):
    """fp32 -> fp16 of n bytes of fp32 (64 elements per repeat)."""
    return isa.make("vconv_f322f16", dst=dst, src0=src, repeat=n // 256, mask=64, dst_rep=4, src0_rep=8)


def pipeline(n: int, nbuf: int) -> list[isa.Instr]:
    """n fp32 tiles of TILE bytes through ``nbuf`` UB input buffers IN[b] and output buffers OUT[b]:
    MTE2 copy-in to IN[b], V converts to fp16 into OUT[b], MTE3 copies OUT[b] out. Flags: MTE2->V
    (data in), V->MTE3 (result ready), V->MTE2 (IN[b] free for the copy-in nbuf tiles later),
    MTE3->V (OUT[b] free). Every wait_flag is necessary (no priming or draining flags)."""
    prog = []
    for i in range(n):
        b = i % nbuf
        ub_in, ub_out = b * TILE, nbuf * TILE + b * TILE // 2
        if i >= nbuf:
            prog.append(waitf(P.V, P.MTE2, b))
        prog += [copy_in(ub_in, i * TILE), setf(P.MTE2, P.V, b), waitf(P.MTE2, P.V, b)]
        if i >= nbuf:
            prog.append(waitf(P.MTE3, P.V, b))
        prog.append(vconv(ub_in, ub_out))
        if i + nbuf < n:
            prog.append(setf(P.V, P.MTE2, b))
        prog += [setf(P.V, P.MTE3, b), waitf(P.V, P.MTE3, b), copy_out(ub_out, i * TILE // 2, TILE // 2)]
        if i + nbuf < n:
            prog.append(setf(P.MTE3, P.V, b))
    return prog


def _run_pipeline(prog, n, checks="error"):
    gm = np.zeros(2 << 20, np.uint8)
    x = np.random.default_rng(0).standard_normal(n * TILE // 4).astype(np.float32)
    gm[:x.nbytes] = x.view(np.uint8)
    st = run(prog, checks=checks, gm=gm)
    return st, x, gm[1 << 20:(1 << 20) + x.nbytes // 2].view(np.float16)


def test_double_buffered_loop_reaches_its_bound():
    n = 16
    st, x, y = _run_pipeline(pipeline(n, 2), n)
    np.testing.assert_array_equal(y, x.astype(np.float16))
    bound = max(st.busy_by_pipe.values())
    c_out = L.mte_startup + TILE // 2 // B.ub_to_gm
    assert bound == st.busy_by_pipe["MTE2"] == n * (C_IN + S) + (n - 2) * S
    assert st.busy_by_pipe["MTE3"] == n * (c_out + S) + (n - 2) * S
    assert st.cycles <= bound / 0.9
    single, x1, y1 = _run_pipeline(pipeline(n, 1), n)
    np.testing.assert_array_equal(y1, x1.astype(np.float16))
    assert single.cycles > max(single.busy_by_pipe.values()) / 0.9
    # single-buffered: each tile's copy-in waits for the previous tile's conversion, whose output
    # buffer waits for the previous copy-out
    assert single.cycles >= n * (C_IN + C_V) + c_out


@pytest.mark.filterwarnings("ignore::cann.sim.timing.SimWarning")
def test_removing_any_wait_flag_is_a_race():
    n = 6
    prog = pipeline(n, 2)
    waits = [i for i, ins in enumerate(prog) if ins.mnemonic == "wait_flag"]
    assert len(waits) == 2 * n + 2 * (n - 2)
    run(prog)  # the correct program is race-free
    for j in waits:
        mutated = prog[:j] + prog[j + 1:]
        st, _, _ = _run_pipeline(mutated, n, checks="warn")
        races = [msg for _, msg in st.problems if msg.startswith("data race")]
        assert races, f"removing instruction {j} `{prog[j].asm()}` was not reported"
        with pytest.raises(SimError, match="data race"):
            _run_pipeline(mutated, n)


def test_race_report_names_both_instructions_and_range():
    with pytest.raises(SimError) as ei:
        run([copy_in(1024, 0, 512), vmuls(0, 2048)])
    msg = str(ei.value)
    assert msg.startswith("error: k: instruction 1 `vmuls dtype=0, dst=0, src0=0")
    assert "data race with instruction 0 `copy_gm_to_ub dst=1024, src_arg=0, src=0, nburst=1, burst=512" in msg
    assert "(MTE2): V writes UB [0, 2048), MTE2 writes UB [1024, 1536), overlapping UB [1024, 1536)" in msg


def test_gm_race_and_read_read_is_not_a_race():
    with pytest.raises(SimError, match=r"MTE2 reads GM \[1048576, 1049088\).*MTE3 writes GM"):
        run([copy_out(0, 0, 512), isa.make("copy_gm_to_ub", dst=4096, src_arg=1, src=0, nburst=1, burst=512)])
    run([vmuls(0, dst=65536), copy_out(0, 0, 512), copy_in(131072, 0)])  # V and MTE3 read UB 0, MTE2 and V GM 0


def test_deadlock_and_double_set():
    with pytest.raises(SimError, match=r"instruction 0 `wait_flag.*deadlock: wait_flag MTE2->V event 3"):
        run([waitf(P.MTE2, P.V, 3)])
    with pytest.raises(SimError, match=r"instruction 1 `set_flag.*already set by instruction 0 with no wait_flag"):
        run([setf(P.MTE2, P.V, 1), setf(P.MTE2, P.V, 1)])
    run([setf(P.MTE2, P.V, 1), setf(P.MTE2, P.V, 2), waitf(P.MTE2, P.V, 1), setf(P.MTE2, P.V, 1),
         waitf(P.MTE2, P.V, 2), waitf(P.MTE2, P.V, 1)])
    with pytest.warns(UserWarning, match="deadlock"):
        st = run([waitf(P.MTE2, P.V, 3), vmuls(0)], checks="warn")
    assert len(st.problems) == 1 and st.cycles == S + C_V


def test_a_flag_set_again_before_its_wait_cleared_it_is_an_error():
    """Program order waits first, but the setting pipe (MTE2) runs ahead of the waiting one (V, busy
    with a vector op): the second set lands while the first is still set -- on hardware the two
    settings merge and the second wait hangs."""
    with pytest.raises(SimError, match=r"instruction 3 `set_flag.*event 0 sets the flag at cycle 2, before wait_flag "
                                       r"instruction 2 clears its previous setting at cycle \d+ \(the two settings "
                                       r"merge: an event id reused too early\)"):
        run([vmuls(0), setf(P.MTE2, P.V, 0), waitf(P.MTE2, P.V, 0), setf(P.MTE2, P.V, 0), waitf(P.MTE2, P.V, 0)])
    # ordered: V tells MTE2 it has waited before MTE2 sets again
    run([vmuls(0), setf(P.MTE2, P.V, 0), waitf(P.MTE2, P.V, 0), setf(P.V, P.MTE2, 1), waitf(P.V, P.MTE2, 1),
         setf(P.MTE2, P.V, 0), waitf(P.MTE2, P.V, 0)])


def test_a_flag_set_at_kernel_end_is_an_error():
    """A set never waited leaks its event id into the next kernel: reported at the last instruction,
    naming the set."""
    with pytest.raises(SimError, match=r"instruction 3 `vmuls.*set_flag MTE2->V event 4 of instruction 1 is never "
                                       r"waited: the kernel ends with the event set \(a leaked event id\)"):
        run([setf(P.MTE2, P.V, 3), setf(P.MTE2, P.V, 4), waitf(P.MTE2, P.V, 3), vmuls(0)])


def test_wait_before_set_in_program_order_is_a_deadlock():
    with pytest.raises(SimError, match="deadlock"):
        run([waitf(P.MTE2, P.V), setf(P.MTE2, P.V)])


# ---------------------------------------------------------------------------------------------
# run_model: multi-core, GM sharing, profile, trace


def _om(prog, block_dim=1, soc="Ascend910", n=TILE):
    return OfflineModel(soc, "force_fp16", (IoTensor("x", (n // 2,), "float16", 0),),
                        (IoTensor("y", (n // 2,), "float16", n),), 2 * n, 2 * n, b"",
                        (Kernel("k", block_dim, 2, isa.encode(prog)),), (Launch(0, (0, n)),))


SYNCED = [copy_in(0, 0), setf(P.MTE2, P.V), waitf(P.MTE2, P.V), vmuls(0), setf(P.V, P.MTE3), waitf(P.V, P.MTE3),
          copy_out(0, 0)]


def test_gm_bandwidth_shared_among_active_cores():
    x = np.ones(TILE // 2, np.float16)
    _, st = run_model(_om(SYNCED, 32), {"x": x})
    k = st.kernels[0]
    share = lambda nbytes: max(cdiv(nbytes, 64), cdiv(nbytes * 32, B.gm_total))  # noqa: E731
    # the 32 blocks read the same tile: 31/32 of each read comes from the L2 (docs/core-model.md,
    # "L2"), 1/32 from HBM at the shared rate; the writes all go to HBM at the shared rate
    hit = TILE * 31 // 32
    cin = L.mte_startup + share(TILE - hit) + cdiv(hit, SPEC.l2.rate)
    cout = L.mte_startup + share(TILE)
    assert cout > C_OUT
    assert k.cycles == cin + 2 * S + C_V + 2 * S + cout
    assert k.gm_read_bytes == k.gm_write_bytes == 32 * TILE and k.l2_read_bytes == 32 * hit
    # roofline: pipes at the full per-core rate vs the HBM bytes over the chip's bandwidth
    full_in = L.mte_startup + cdiv(TILE - hit, 64) + cdiv(hit, SPEC.l2.rate)
    assert k.compiled_bound == max(full_in + S, C_OUT + S, cdiv(32 * (TILE - hit) + 32 * TILE, B.gm_total))
    assert k.bound == "gm_bandwidth"


def test_profile_ratios_and_csv(tmp_path):
    x = np.ones(TILE // 2, np.float16)
    out, st = run_model(_om(SYNCED), {"x": x})
    np.testing.assert_array_equal(out["y"], x * 2)
    k = st.kernels[0]
    cyc = C_IN + C_V + C_OUT + 4 * S
    assert k.cycles == cyc and st.cycles == cyc
    r = k.profile()
    assert r["aic_mte2_ratio"] == pytest.approx((C_IN + S) / cyc)
    assert r["aiv_vec_ratio"] == pytest.approx((C_V + 2 * S) / cyc)
    assert r["aic_mte3_ratio"] == pytest.approx((C_OUT + S) / cyc)
    assert r["aic_cube_ratio"] == 0 and r["aic_scalar_ratio"] == 0
    assert r["aic_fixpipe_ratio"] is None and r["aiv_mte2_ratio"] is None  # coupled core
    assert r["gm_read_bytes"] == r["gm_write_bytes"] == TILE
    assert r["compiled_bound_cycles"] == C_OUT + S == C_IN + S and r["bound"] == "mte2"  # a tie: the first pipe
    assert r["compiled_bound_pct"] == pytest.approx(100 * (C_OUT + S) / cyc)
    assert r["time_us"] == pytest.approx(cyc / SPEC.clock_mhz)
    text = prof.format_profile(st)
    assert text.splitlines()[0].split() == list(prof.COLUMNS)
    assert text.splitlines()[-1].startswith(f"total: launches=1 cycles={cyc} ")
    path = tmp_path / "p.csv"
    prof.write_profile_csv(st, path)
    rows = list(csv.DictReader(path.open()))
    assert len(rows) == 2 and rows[0]["cycles"] == str(cyc) and rows[0]["aiv_mte2_ratio"] == ""
    assert list(rows[0]) == list(prof.COLUMNS)
    assert rows[1]["launch"] == "total" and rows[1]["cycles"] == str(cyc) and rows[1]["kernel"] == ""


def test_trace_json(tmp_path):
    x = np.ones(TILE // 2, np.float16)
    _, st = run_model(_om(SYNCED, 2), {"x": x})
    path = tmp_path / "t.json"
    prof.write_trace(st, path)
    data = json.loads(path.read_text())
    ev = data["traceEvents"]
    xs = [e for e in ev if e["ph"] == "X"]
    assert len(xs) == 2 * len(SYNCED)
    for e in xs:
        assert {"name", "ph", "pid", "tid", "ts", "dur", "args"} <= set(e) and e["dur"] > 0
        assert e["args"]["asm"].startswith(e["name"] + " ")
    threads = {(e["pid"], e["args"]["name"]) for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    assert threads == {(pid, p) for pid in (0, 1) for p in ("S", "V", "M", "MTE1", "MTE2", "MTE3")}
    procs = {e["args"]["name"] for e in ev if e["name"] == "process_name"}
    assert procs == {"AICore 0", "AICore 1"}
    last = max(e["ts"] + e["dur"] for e in xs)
    assert last == pytest.approx(st.cycles / SPEC.clock_mhz)


def test_socs_load_and_separated_part():
    assert {"Ascend910", "Ascend310", "Ascend910B1"} <= set(available_socs())
    s310, b1 = load_soc("Ascend310"), load_soc("Ascend910B1")
    assert s310.ai_core_count == 2 and s310.coupled
    assert (b1.core_type, b1.cube_core_count, b1.vector_core_count, b1.clock_mhz) == ("separated", 24, 48, 1850)
    assert (b1.buffer("l1").size, b1.buffer("l0c").size, b1.buffer("ub").size) == (512 << 10, 128 << 10, 192 << 10)
    assert b1.has_fixpipe and b1.bandwidth.l0c_to_ub == 0
    x = np.ones(TILE // 2, np.float16)
    out, st = run_model(_om(SYNCED, 48, soc="Ascend910B1"), {"x": x})  # a vector kernel on the AIVs
    np.testing.assert_array_equal(out["y"], x * 2)
    k = st.kernels[0]
    assert k.core_kind == "aiv" and len(k.waves) == 1
    r = k.profile()
    assert r["aiv_vec_ratio"] > 0 and r["aic_cube_ratio"] is None
    mixed = [isa.make("mmad", dtype=0, m=16, k=16, n=16, init=1), isa.make("pipe_barrier", pipe=P.ALL), vmuls(0)]
    with pytest.raises(Exception, match="separated cube"):
        run_model(_om(mixed, soc="Ascend910B1"), {"x": x})


def test_a_second_run_reuses_the_schedules_of_the_first(monkeypatch):
    # a schedule depends only on the stream, argument bases, SoC, checks and sharing cores: a second run
    # of the same model (other data) computes none, and gets the same cycles
    from cann.sim import timing

    calls = []
    orig = timing.schedule
    monkeypatch.setattr(timing, "schedule", lambda *a, **k: calls.append(1) or orig(*a, **k))
    monkeypatch.setattr(timing, "_SCHEDULES", timing.OrderedDict())
    monkeypatch.setattr(timing, "_held_records", 0)
    om = _om(SYNCED, 4)
    _, st1 = run_model(om, {"x": np.ones(TILE // 2, np.float16)})
    first = len(calls)
    _, st2 = run_model(om, {"x": np.full(TILE // 2, 3, np.float16)})
    assert first >= 1 and len(calls) == first
    assert st1.cycles == st2.cycles and st1.kernels[0].cores[0].busy_by_pipe == st2.kernels[0].cores[0].busy_by_pipe
    run_model(om, {"x": np.ones(TILE // 2, np.float16)}, sim_checks="off")  # another checks mode: its own
    assert len(calls) == 2 * first
    run_model(om, {"x": np.ones(TILE // 2, np.float16)}, sim_checks="warn")  # never cached: problems per run
    run_model(om, {"x": np.ones(TILE // 2, np.float16)}, sim_checks="warn")
    assert len(calls) == 2 * first + 2 * 4  # every block of both runs (warn mode shares nothing)


def test_cached_schedules_are_dropped_least_recent_first_over_the_record_budget(monkeypatch):
    from cann.sim import timing

    monkeypatch.setattr(timing, "_SCHEDULES", timing.OrderedDict())
    monkeypatch.setattr(timing, "_held_records", 0)
    monkeypatch.setattr(timing, "SCHEDULE_RECORDS", 10)
    costs = AICore(SPEC)._cost
    a, b = list(SYNCED), list(SYNCED)  # 7 records each
    ta = timing.cached_schedule(a, SPEC, costs, costs, (0, TILE), 1)
    assert timing.cached_schedule(a, SPEC, costs, costs, (0, TILE), 1) is ta
    timing.cached_schedule(b, SPEC, costs, costs, (0, TILE), 1)  # 14 > 10: a's is dropped
    assert timing._held_records == 7 and list(timing._SCHEDULES)[0][0] == id(b)
    assert timing.cached_schedule(a, SPEC, costs, costs, (0, TILE), 1) is not ta
