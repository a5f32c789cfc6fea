"""``ascend-insert-sync{mode=flags}`` on the simulator: race-free (the race checker on), every flag
set is waited by the end, same results as ``mode=barrier`` and onnxruntime, fewer cycles; and the
wait-deletion test (issue 12 item 5).

Deletion test: a wait_flag is deleted together with the set_flag it matches (the simulator does
not check for a flag left set at kernel end, and a reused event id would then be "set twice"
instead of racing, so deleting the pair is the faithful way to drop one ordering). The drains after
a loop (the waits that empty a loop-carried group) are not deleted: they order nothing inside.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from xdsl.passes import PassPipeline

from cann import testing
from cann.codegen.offline import build_offline_model
from cann.compiler import check_core_types, load_text, lower, make_context
from cann.dialects.ascend import kernels, op_to_instr
from cann.dialects.weights import print_module
from cann.errors import CannError
from cann.hw import isa
from cann.hw.config import load_soc
from cann.hw.footprint import footprints
from cann.passes import ALL_PASSES
from cann.runtime import Model, load
from cann.sim.core import AICore
from cann.sim.spmd import specialize, stream

SPEC = load_soc("Ascend910")
LIT = os.path.join(os.path.dirname(__file__), "ascend_insert_sync_flags.mlir")
FLAGS = "ascend-insert-sync{mode=flags}"
FLAGS_ALL = "ascend-insert-sync{mode=flags free_barriers=false}"


def _sync(module, spec: str):
    PassPipeline.parse_spec(ALL_PASSES, spec).apply(make_context(), module)
    return module


def _run_kernel(kernel, gm: np.ndarray, args: tuple[int, ...]):
    """Run every block of ``kernel`` with the race checker on; returns the per-block stats."""
    prog = [op_to_instr(op) for op in kernel.instructions]
    stats = []
    for b in range(kernel.block_dim.value.data):
        instrs, bargs = stream(prog, b, args)
        stats.append(AICore(SPEC).run(instrs, gm, bargs, kernel.kernel_name, checks="error"))
    return stats


def _unwaited(kernel) -> list[tuple[int, int, int]]:
    """Flags still set at the end of block 0's run (loops and event rotation applied)."""
    prog = [op_to_instr(op) for op in kernel.instructions]
    pending: set[tuple[int, int, int]] = set()
    for ins in specialize(prog, 0, tuple(range(0, 1 << 20, 1 << 16)))[0]:
        if ins.mnemonic == "set_flag":
            assert ins.values not in pending, f"set twice: {ins.asm()}"
            pending.add(ins.values)
        elif ins.mnemonic == "wait_flag":
            assert ins.values in pending, f"wait without set: {ins.asm()}"
            pending.discard(ins.values)
    return sorted(pending)


_ROTATED = {"rotated", "forward", "toofar", "cube_loop"}


@pytest.mark.parametrize("name", ["raw", "war_waw", "gm", "independent", "implied", "reuse", "exhaust", "loop",
                                  "inplace", "blocks", "nested",
                                  *sorted(_ROTATED)])
def test_lit_kernels_race_free_and_same_results(name):
    """The lit test's kernels (sreg needs index data: covered by the Gather models elsewhere) run
    race-free with flags, leave no flag set, and compute what the barrier version computes."""
    results = {}
    for spec in ("ascend-insert-sync", FLAGS, FLAGS_ALL):
        module = _sync(load_text(LIT), spec)
        kernel = next(k for k in kernels(module) if k.kernel_name == name)
        gm = np.random.default_rng(0).uniform(-1, 1, 1 << 17).astype(np.float16).view(np.uint8).copy()
        _run_kernel(kernel, gm, (0, 1 << 16))
        assert _unwaited(kernel) == []
        results[spec] = gm
    assert np.array_equal(results[FLAGS], results["ascend-insert-sync"])
    assert np.array_equal(results[FLAGS_ALL], results["ascend-insert-sync"])


def test_rotated_loop_overlaps_pipes():
    """Double buffers with rotating events let MTE2, V and MTE3 overlap: fewer cycles than one
    barrier per hop, and the busy pipes sum to more than the kernel's cycles."""
    cycles = {}
    for spec in ("ascend-insert-sync", FLAGS):
        kernel = next(k for k in kernels(_sync(load_text(LIT), spec)) if k.kernel_name == "rotated")
        gm = np.zeros(1 << 17, np.uint8)
        (st,) = _run_kernel(kernel, gm, (0, 1 << 16))
        cycles[spec] = st.cycles
        overlap = sum(st.busy_by_pipe.values()) / st.cycles
    assert cycles[FLAGS] < cycles["ascend-insert-sync"]
    assert overlap > 1.2


# ------------------------------------------------------------------------------------- models

def _model(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def _vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def add_model(shape=(1, 64, 32, 32)):
    return _model([helper.make_node("Add", ["x", "y"], ["z"])], [_vi("x", shape), _vi("y", shape)], [_vi("z", shape)])


def conv_relu_model(c=16, h=16, w=16, k=32):
    rng = np.random.default_rng(0)
    wt = numpy_helper.from_array(rng.standard_normal((k, c, 3, 3)).astype(np.float32) * 0.1, "W")
    b = numpy_helper.from_array(rng.standard_normal(k).astype(np.float32), "B")
    return _model([helper.make_node("Conv", ["x", "W", "B"], ["t"], pads=[1, 1, 1, 1]),
                   helper.make_node("Relu", ["t"], ["y"])], [_vi("x", (1, c, h, w))], [_vi("y", (1, k, h, w))],
                  [wt, b])


def gemm_model(m=64, k=128, n=96):
    rng = np.random.default_rng(1)
    wt = numpy_helper.from_array(rng.standard_normal((k, n)).astype(np.float32) * 0.1, "W")
    b = numpy_helper.from_array(rng.standard_normal(n).astype(np.float32), "B")
    return _model([helper.make_node("Gemm", ["x", "W", "B"], ["y"])], [_vi("x", (m, k))], [_vi("y", (m, n))], [wt, b])


def softmax_model(shape=(256, 1000)):
    return _model([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], [_vi("x", shape)], [_vi("y", shape)])


MODELS = {"add": add_model, "conv_relu": conv_relu_model, "gemm": gemm_model, "softmax": softmax_model,
          "squeezenet": lambda: testing.test_model("squeezenet")}
#: models whose kernels have work that can overlap today (the others are one load, one compute,
#: one store per core, or a single-buffered loop: flags can only tie the barriers there)
OVERLAPS = {"conv_relu", "gemm", "squeezenet"}


def compile_with(model: onnx.ModelProto, sync: str) -> tuple[Model, object]:
    """``model`` lowered to tile, then ``convert-tile-to-ascend`` and the given sync pass."""
    module = lower(model, until="tile")
    _sync(module, f"convert-tile-to-ascend,{sync}")
    check_core_types(module)
    return Model(build_offline_model(module)), module


def _rel_l2(y, r):
    return float(np.linalg.norm((y.astype(np.float64) - r).ravel()) / max(np.linalg.norm(r.ravel()), 1e-30))


@pytest.mark.parametrize("name", list(MODELS))
def test_models_flags_match_onnxruntime_with_fewer_cycles(name):
    model = MODELS[name]()
    inputs = testing.random_inputs(model)
    ref = testing.run_onnxruntime(model, inputs)
    cycles = {}
    for sync in ("ascend-insert-sync{mode=barrier}", FLAGS):
        compiled, module = compile_with(model, sync)
        out = compiled.run(inputs, sim_checks="error")
        for key, r in ref.items():
            assert _rel_l2(out[key], r) <= 1e-2, key
        cycles[sync] = compiled.last_run.cycles
        if sync == FLAGS:
            assert all(_unwaited(k) == [] for k in kernels(module))
    if name in OVERLAPS:
        assert cycles[FLAGS] < cycles["ascend-insert-sync{mode=barrier}"]
    else:
        assert cycles[FLAGS] <= cycles["ascend-insert-sync{mode=barrier}"]


def test_flags_are_deterministic():
    """Same input, same bytes."""
    texts = []
    for _ in range(2):
        _, module = compile_with(conv_relu_model(), FLAGS)
        texts.append(str(module))
    assert texts[0] == texts[1]


# ------------------------------------------------------------------------------ deletion test

_RACE = re.compile(r"instruction \d+ `(\w+)[^`]*`: data race with instruction \d+ `(\w+)[^`]*` \((\w+)\): "
                   r"(\w+) (?:writes|reads)")


def _waits_and_sets(kernel) -> list[tuple[int, int]]:
    """(wait index, index of the set it matches) for each wait_flag that is not a loop drain."""
    ops = kernel.instructions
    scope: list[int] = []
    stack: list[int] = []
    for i, op in enumerate(ops):
        m = op.DEFN.mnemonic
        if m == "loop_begin":
            stack.append(i)
        scope.append(stack[-1] if stack else -1)
        if m == "loop_end":
            stack.pop()
    out = []
    for w, op in enumerate(ops):
        if op.DEFN.mnemonic != "wait_flag":
            continue
        j = w - 1
        while j >= 0 and ops[j].DEFN.mnemonic == "wait_flag":
            j -= 1
        if j >= 0 and ops[j].DEFN.mnemonic == "loop_end":
            continue  # a drain
        key = op.values
        before = [i for i in range(w) if ops[i].DEFN.mnemonic == "set_flag" and ops[i].values == key
                  and scope[i] == scope[w]]
        waits_between = before and any(ops[i].DEFN.mnemonic == "wait_flag" and ops[i].values == key
                                       for i in range(before[-1] + 1, w))
        if before and not waits_between:
            out.append((w, before[-1]))
            continue
        after = [i for i in range(w + 1, len(ops)) if ops[i].DEFN.mnemonic == "set_flag"
                 and ops[i].values == key and scope[i] == scope[w] and scope[w] >= 0]
        assert after, f"no set_flag for wait {w} `{op_to_instr(op).asm()}`"
        out.append((w, after[-1]))  # loop-carried: set later in the body, waited next iteration
    return out


def _unordered_conflicts(om, kernel_name: str) -> list[str]:
    """Independent check: replay every block of the kernel's launch with a full vector clock per
    instruction (no pruning, no bounding shortcuts) and list conflicting accesses on two pipes
    that no set/wait or barrier orders."""
    fps = footprints(SPEC)
    k_index = next(i for i, k in enumerate(om.kernels) if k.name == kernel_name)
    prog = isa.decode(om.kernels[k_index].code)
    found = []
    for launch in om.launches:
        if launch.kernel != k_index:
            continue
        for b in range(om.kernels[k_index].block_dim):
            instrs, args = specialize(prog, b, tuple(launch.args))
            clock = [[0] * 6 for _ in range(6)]
            flags = {}
            seen = []  # (pipe, its count, accesses)
            for ins in instrs:
                m, g = ins.mnemonic, ins.defn.group
                if m == "pipe_barrier":
                    if ins.pipe == isa.Pipe.ALL:
                        top = [max(col) for col in zip(*clock)]
                        clock = [list(top) for _ in range(6)]
                    continue
                if m == "set_flag":
                    flags[ins.values] = list(clock[ins.values[0]])
                    continue
                if m == "wait_flag":
                    snap = flags.pop(ins.values)
                    q = ins.values[1]
                    clock[q] = [max(a, c) for a, c in zip(clock[q], snap)]
                    continue
                if g == "spmd":
                    continue
                p = int(ins.defn.pipe)
                clock[p][p] += 1
                accs = fps[m](ins.values, args, 0)[0] if g == "dma_reg" else fps[m](ins.values, args)[0]
                for p2, n2, accs2, asm2 in seen:
                    if p2 == p or clock[p][p2] >= n2:
                        continue
                    if any(b1 == b2 and lo1 < hi2 and lo2 < hi1 and (w1 or w2)
                           for b1, lo1, hi1, w1 in accs for b2, lo2, hi2, w2 in accs2):
                        found.append(f"{asm2} / {ins.asm()}")
                seen.append((p, clock[p][p], accs, ins.asm()))
    return found


_KERNELS = {"conv_relu": "conv2d_0", "gemm": "gemm_0", "add": "add_0", "softmax": "softmax_0"}


@pytest.mark.parametrize("name", list(_KERNELS))
def test_deleting_each_wait_is_a_race_or_redundant(name, tmp_path):
    model = MODELS[name]()
    inputs = testing.random_inputs(model)
    _, module = compile_with(model, FLAGS_ALL)
    kernel = next(k for k in kernels(module) if k.kernel_name == _KERNELS[name])
    pairs = _waits_and_sets(kernel)
    assert pairs, "the kernel has flag pairs to delete"
    races = 0
    for n, (w, s) in enumerate(pairs):
        mod = module.clone()
        k2 = next(k for k in kernels(mod) if k.kernel_name == _KERNELS[name])
        ops = k2.instructions
        p_name, q_name = (isa.Pipe(v).name for v in ops[w].values[:2])
        for i in sorted((w, s), reverse=True):
            ops[i].detach()
            ops[i].erase()
        if n == 0:  # one case through cann-compile's .mlir input (ascend-stage IR), then the .om
            path = tmp_path / "deleted.mlir"
            with open(path, "w") as f:
                print_module(mod, f, weights_path=str(path) + ".npz")
            exe = os.path.join(os.path.dirname(sys.executable), "cann-compile")
            subprocess.run([exe, str(path), "-o", str(tmp_path / "deleted.om")], check=True)
            compiled = load(tmp_path / "deleted.om")
        else:
            compiled = Model(build_offline_model(mod))
        try:
            compiled.run(inputs, sim_checks="error")
        except CannError as e:
            match = _RACE.search(str(e))
            assert match, str(e)
            assert match.group(1) not in ("set_flag", "wait_flag") and match.group(2) not in ("set_flag", "wait_flag")
            assert q_name in (match.group(3), match.group(4)), str(e)  # the consumer's pipe races
            assert _unordered_conflicts(compiled.om, _KERNELS[name]), "the independent check misses this race"
            races += 1
        else:
            assert _unordered_conflicts(compiled.om, _KERNELS[name]) == [], f"deleting wait {w} was not redundant"
    print(f"{name}: {races} of {len(pairs)} deletions reported as races")
    assert races >= 1


def test_the_sync_pass_resolves_loop_steps_as_the_simulator_does():
    # the same resolution (cann.hw.loops.step_targets): the step applies to the next work
    # instruction, and a loop_step with none before its loop's end is the same one-line error
    from cann.dialects.ascend import instr_to_op
    from cann.errors import CannError
    from cann.hw import isa
    from cann.passes.sync_deps import Ins, Region, parse

    mm = isa.make("mmad", dtype=0, dst=0, a=0, b=0, m=16, k=16, n=16, init=1)
    good = [isa.make("loop_begin", count=3), isa.make("loop_step", field_no=1, step=1024), mm, isa.make("loop_end")]
    (loop,) = parse([instr_to_op(i) for i in good], "k")
    assert isinstance(loop, Region)
    (ins,) = [it for it in loop.body if isinstance(it, Ins)]
    assert ins.steps == [(1, 1024, id(loop.body), 3, None)]
    bad = [isa.make("loop_begin", count=3), mm, isa.make("loop_step", field_no=1, step=1024), isa.make("loop_end")]
    with pytest.raises(CannError) as e:
        parse([instr_to_op(i) for i in bad], "k")
    assert e.value.lines() == ["error: k: instruction 2: loop_step with no work instruction after it in its loop "
                               "(loop_end at 3)"]


def test_a_loop_starved_of_event_ids_is_fenced_not_its_body():
    """Regression (GEMM 512x4096x11008: 309,209 cycles instead of 240,891 with unfenced loops):
    the ids the scope around the K loop kept for its own pairs (the one waited just before the
    loop, the peeled N tile's after it) left the loop's second L1 stream without ids, so a
    PIPE_ALL barrier ran in every K iteration. Now such a loop is fenced instead (a barrier before
    and after it, once per N tile): its body keeps both streams on rotating flags."""
    k, n = 4096, 11008
    b = np.random.default_rng(0).standard_normal((k, n)).astype(np.float16)
    graph = helper.make_graph([helper.make_node("MatMul", ["A", "B"], ["Y"])], "g",
                              [helper.make_tensor_value_info("A", TensorProto.FLOAT16, [512, k])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT16, [512, n])],
                              [numpy_helper.from_array(b, "B")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    tiling = {"matmul_0": {"k": 64, "m": 256, "m_blocks": 2, "n": 240, "n_blocks": 16, "step_k": 4}}
    module = lower(model, tiling=tiling, kb=False)
    (kernel,) = kernels(module)
    names = [op.DEFN.mnemonic for op in kernel.instructions]
    depth, k_loops = 0, []  # the K loops: the loops inside the N-tile loop
    for i, m in enumerate(names):
        if m == "loop_begin":
            depth += 1
            if depth == 2:
                k_loops.append(i)
        depth -= m == "loop_end"
    assert len(k_loops) == 1  # the two block rows (m_blocks) run one code (block_offset_div)
    for i in k_loops:
        body = names[i:names.index("loop_end", i)]
        assert "pipe_barrier" not in body
        j = i - 1
        while names[j] == "set_flag":  # its pre-sets go inside the fence
            j -= 1
        assert names[j] == "pipe_barrier"  # the fence
    a = np.random.default_rng(1).standard_normal((512, k)).astype(np.float16)
    y = Model(build_offline_model(module)).run({"A": a}, sim_checks="error")["Y"]
    ref = a.astype(np.float32) @ b.astype(np.float32)
    assert _rel_l2(y, ref) < 1e-3
