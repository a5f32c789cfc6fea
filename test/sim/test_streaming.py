"""The simulator streams a core's instructions: a hardware loop is walked lazily, never expanded
into memory proportional to its trip count (issue 10 item 7), and the race detector drops the
access history every other pipe already orders before its current point."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from cann.codegen.om import IoTensor, Kernel, Launch, OfflineModel
from cann.hw import isa
from cann.hw.config import load_soc
from cann.sim.core import RECORD_LIMIT, AICore, SimError
from cann.sim.spmd import Stream, specialize, stream

SPEC = load_soc("Ascend910")


def _nested_copy_loop(outer: int, inner: int) -> list[isa.Instr]:
    """outer x inner iterations of 2 instructions: a 32-byte GM -> UB copy (MTE2) walking argument 0
    by 32 bytes per outer iteration, and a pipe_barrier(V)."""
    return [isa.make("loop_begin", count=outer), isa.make("loop_offset", arg=0, stride=32),
            isa.make("loop_begin", count=inner),
            isa.make("copy_gm_to_ub", dst=0, src_arg=0, src=0, nburst=1, burst=32),
            isa.make("pipe_barrier", pipe=isa.Pipe.V),
            isa.make("loop_end"), isa.make("loop_end")]


def _expected_cycles(outer: int, inner: int) -> int:
    lat, bw = SPEC.latency, SPEC.bandwidth
    mte2 = outer * inner * (lat.mte_startup + -(-32 // bw.gm_to_ub))
    vec = outer * inner * lat.scalar
    control = (3 + 2 * outer) * lat.scalar  # loop_offset, the outer loop_begin/loop_end, the inner ones per entry
    return max(mte2, vec, control)


def test_a_million_iteration_loop_runs_in_bounded_memory():
    # 10^6 iterations of 2 instructions in a child process: its peak RSS grows by far less than the
    # 2 * 10^6 instruction records (list slot, start, end, pipe: >= 80 bytes each, 160 MB) would take
    outer, inner = 1000, 1000
    code = textwrap.dedent(f"""
        import json, resource
        import numpy as np
        from cann.codegen.om import Kernel, Launch, OfflineModel
        from cann.hw import isa
        from cann.sim.executor import run_model

        def run(outer, inner, budget):
            om = OfflineModel("Ascend910", "force_fp16", (), (), 1 << 16, 0, b"",
                              (Kernel("walk", 1, 1, isa.encode(_nested_copy_loop(outer, inner))),), (Launch(0, (0,)),))
            return run_model(om, {{}}, max_instructions=budget)[1]

        run(2, 2, 100)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        st = run({outer}, {inner}, 3 * 10**6)
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        k = st.kernels[0].cores[0]
        print(json.dumps([st.cycles, st.instructions, (after - before) * 1024, len(k.program), len(k.timing.start)]))
    """)
    code = "from cann.hw import isa\n" + inspect.getsource(_nested_copy_loop) + code
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=".")
    cycles, instructions, grown, programs, records = json.loads(out.stdout)
    assert cycles == _expected_cycles(outer, inner)
    assert instructions == 2 * outer * inner + 3 + 2 * outer
    assert programs == records == RECORD_LIMIT  # the records a trace shows: the first RECORD_LIMIT
    assert grown < 40 << 20, grown


def test_stream_walks_nested_offsets_like_the_expansion():
    prog = _nested_copy_loop(3, 2)
    instrs, args = stream(prog, 0, (64,))
    assert isinstance(instrs, Stream) and args == (64,)
    srcs = [i.src for i in instrs if i.mnemonic == "copy_gm_to_ub"]
    assert srcs == [0, 0, 32, 32, 64, 64]
    assert [i.values for i in instrs] == [i.values for i in specialize(prog, 0, (64,))[0]]  # re-iterable
    plain = [isa.make("pipe_barrier", pipe=isa.Pipe.V)]
    assert stream(plain, 0, ())[0] is plain  # no SPMD control: the code itself


def _sync_loop(count: int, race_at_end: bool) -> list[isa.Instr]:
    """MTE2 copies GM -> UB, V doubles it, both ordered by flags each iteration; with ``race_at_end``
    after an MTE3 copy out of UB bytes [4096, 4128) (instruction 0) and before a V write of those
    bytes with no flag from MTE3: a race with instruction 0 however many iterations passed."""
    body = [isa.make("copy_gm_to_ub", dst=0, src_arg=0, src=0, nburst=1, burst=512),
            isa.make("set_flag", src_pipe=isa.Pipe.MTE2, dst_pipe=isa.Pipe.V, event=0),
            isa.make("wait_flag", src_pipe=isa.Pipe.MTE2, dst_pipe=isa.Pipe.V, event=0),
            isa.make("vmuls", dtype=0, dst=1024, src0=0, repeat=2, mask=128, dst_blk=1, src0_blk=1, dst_rep=8,
                     src0_rep=8, scalar=2.0),
            isa.make("set_flag", src_pipe=isa.Pipe.V, dst_pipe=isa.Pipe.MTE2, event=0),
            isa.make("wait_flag", src_pipe=isa.Pipe.V, dst_pipe=isa.Pipe.MTE2, event=0)]
    head = [isa.make("copy_ub_to_gm", dst_arg=0, dst=2048, src=4096, nburst=1, burst=32)] if race_at_end else []
    tail = [isa.make("vadds", dtype=0, dst=4096, src0=2048, repeat=1, mask=16, dst_blk=1, src0_blk=1, dst_rep=8,
                     src0_rep=8, scalar=1.0)] if race_at_end else []
    return head + [isa.make("loop_begin", count=count), *body, isa.make("loop_end")] + tail


@pytest.mark.parametrize("count", [1, 3000])
def test_race_with_an_access_older_than_the_pruned_history(count):
    # V never waited for the MTE3 copy of instruction 0: that access stays in the history (V does
    # not know it happened before) while the synchronized loop's accesses are dropped
    core = AICore(SPEC)
    instrs, args = stream(_sync_loop(count, True), 0, (0,))
    with pytest.raises(SimError) as e:
        core.run(instrs, np.zeros(4096, np.uint8), args, "k")
    n = 2 + 6 * count + 1
    assert e.value.lines() == [
        f"error: k: instruction {n} `vadds dtype=0, dst=4096, src0=2048, src1=0, repeat=1, mask=16, dst_blk=1, src0_blk=1, "
        f"src1_blk=0, dst_rep=8, src0_rep=8, src1_rep=0, scalar=1.0`: data race with instruction 0 `copy_ub_to_gm dst_arg=0, dst=2048, "
        f"src=4096, nburst=1, burst=32, src_stride=0, dst_stride=0` (MTE3): V writes UB [4096, 4128), MTE3 reads "
        f"UB [4096, 4128), overlapping UB [4096, 4128), with no happens-before path (missing set_flag/wait_flag "
        f"or pipe_barrier)"]


def test_a_synchronized_loop_keeps_bounded_race_history(monkeypatch):
    # the history the race detector holds does not grow with the trip count (every pipe that accesses
    # a buffer waits for the other each iteration)
    from cann.sim import timing

    sizes = {}
    real = timing._prune

    def spy(acc_w, acc_r, touched, vc, accessing):
        real(acc_w, acc_r, touched, vc, accessing)
        sizes[key] = max(sizes.get(key, 0), sum(len(lst[0]) for a in (acc_w, acc_r) for b in a for lst in b))

    monkeypatch.setattr(timing, "_prune", spy)
    for key in (2000, 20000):
        instrs, args = stream(_sync_loop(key, False), 0, (0,))
        st = AICore(SPEC).run(instrs, np.zeros(4096, np.uint8), args, "k")
        assert st.instructions == 6 * key + 2
    assert sizes[20000] == sizes[2000] < 64


@pytest.mark.parametrize("gap", [10, 3000])
def test_overflow_writer_found_however_far_back(gap):
    # the vmuls overflowing (instruction 4) is followed by a loop of `gap` pipe_barriers before the copy
    # out: past the window of recent instructions it is found by walking the stream again
    from cann.errors import FloatOverflowWarning
    from cann.sim.executor import run_model

    prog = [isa.make("copy_gm_to_ub", dst=0, src_arg=0, src=0, nburst=1, burst=512),
            isa.make("pipe_barrier", pipe=isa.Pipe.ALL)]
    prog += [isa.make("vmuls", dtype=0, dst=2048, src0=0 if i == 0 else 2048, repeat=2, mask=128, dst_blk=1,
                      src0_blk=1, dst_rep=8, src0_rep=8, scalar=2.0) for i in range(3)]
    prog += [isa.make("loop_begin", count=gap), isa.make("pipe_barrier", pipe=isa.Pipe.V), isa.make("loop_end"),
             isa.make("pipe_barrier", pipe=isa.Pipe.ALL),
             isa.make("copy_ub_to_gm", dst_arg=1, dst=0, src=2048, nburst=1, burst=512)]
    om = OfflineModel("Ascend910", "must_keep_origin_dtype", (IoTensor("x", (2, 128), "float16", 0),),
                      (IoTensor("y", (2, 128), "float16", 512),), 4096, 2048, b"",
                      (Kernel("k", 1, 2, isa.encode(prog)),), (Launch(0, (0, 512)),))
    with pytest.warns(FloatOverflowWarning):
        out, stats = run_model(om, {"x": np.full((2, 128), 10000, np.float16)})
    assert np.isinf(out["y"]).all()
    assert stats.overflow == ("kernel 'k'", "float overflow: launch 0 wrote inf/NaN computed from finite operands "
                                            "(first at instruction 4 `vmuls`)")
    assert stats.instructions == 5 + 2 + gap + 2


def test_a_short_stream_keeps_its_first_walk_and_a_long_one_does_not(monkeypatch):
    import cann.sim.spmd as spmd

    monkeypatch.setattr(spmd, "STREAM_HOLD", 12)
    short, _ = stream(_nested_copy_loop(3, 2), 0, (0,))  # 3 + 3 * (2 + 2 * 2) = 21 instructions
    assert isinstance(short, Stream)
    first = list(short)
    assert len(first) == 21 and short._walked is None  # over the limit: walked again each time
    monkeypatch.setattr(spmd, "STREAM_HOLD", 64)
    again = list(short)
    assert again == first and short._walked is not None
    kept = list(short)
    assert all(a is b for a, b in zip(kept, again))  # the kept objects themselves, not a new walk
    partial = stream(_nested_copy_loop(2, 2), 0, (0,))[0]
    next(iter(partial))  # an abandoned walk keeps nothing
    assert partial._walked is None


def test_kept_walks_are_dropped_least_recent_first_over_the_total(monkeypatch):
    import cann.sim.spmd as spmd

    monkeypatch.setattr(spmd, "HOLD_TOTAL", 30)
    monkeypatch.setattr(spmd, "_held", spmd.OrderedDict())
    monkeypatch.setattr(spmd, "_held_total", 0)
    a = Stream(_nested_copy_loop(3, 2))  # 21 instructions
    b = Stream(_nested_copy_loop(1, 2))  # 9
    c = Stream(_nested_copy_loop(1, 1))  # 7
    for s in (a, b):
        list(s)
    assert a._walked is not None and b._walked is not None and spmd._held_total == 30
    list(a)  # a walked again: now the most recent
    list(c)  # 37 > 30: b, the least recent, is dropped
    assert b._walked is None and a._walked is not None and c._walked is not None
    assert spmd._held_total == 28
