"""Gradient splitting (issue 16 item 4): the event-level step simulation on hand-computed cases,
the exact planner against exhaustive search, the baselines' rules and HCCL's --split-strategy forms."""

from __future__ import annotations

import itertools
from pathlib import Path
import random
import re

import numpy as np
import pytest

from cann.errors import CannError
from cann.training import grad_split as gs
from cann.training.step_sim import CommModel, StepProfile, simulate


class Affine:
    """A hand-checkable link model: a + b n seconds."""

    def __init__(self, a, b):
        self.a, self.b = a, b

    def allreduce(self, n):
        return 0.0 if n <= 0 else self.a + self.b * n

    def startup(self):
        return self.a


def profile(times, nbytes, forward=0.0, update=0.0):
    return StepProfile(tuple(f"g{i}" for i in range(len(nbytes))), tuple(nbytes),
                       tuple((t, (i,)) for i, t in enumerate(times)), forward, update).check()


def test_simulate_hand_computed():
    # kernels end at 1+1=2, 3, 4 (forward 1); comm 0.5 + 0.001 n
    p = profile([1, 1, 1], [1000, 500, 1000], forward=1.0, update=0.25)
    c = Affine(0.5, 0.001)
    one = simulate(p, [[0, 1, 2]], c)  # starts at 4, lasts 0.5 + 2.5
    assert (one.compute_end, one.comm_end, one.iteration) == (4.0, 7.0, 7.25)
    assert one.tail == pytest.approx(3.25)
    per = simulate(p, [[0], [1], [2]], c)
    # g0: 2 -> 3.5; g1: ready 3, stream busy until 3.5 -> 3.5 + 1.0 = 4.5; g2: 4.5 -> 6.0
    assert per.segments == ((2.0, 3.5), (3.5, 4.5), (4.5, 6.0))
    assert per.iteration == pytest.approx(6.25) and per.tail == pytest.approx(2.25)
    two = simulate(p, [[0, 1], [2]], c)  # 3 -> 5; 5 -> 6.5
    assert two.segments == ((3.0, 5.0), (5.0, 6.5)) and two.iteration == pytest.approx(6.75)


def test_simulate_compute_bound_and_shared_kernel():
    # one kernel produces two gradients; comm ends before compute: the tail is the update only
    p = StepProfile(("a", "b", "c"), (10, 10, 10), ((1.0, (0, 1)), (5.0, (2,)), (2.0, ())), 0.0, 0.5).check()
    r = simulate(p, [[0], [1], [2]], Affine(0.125, 0.0))
    assert r.segments == ((1.0, 1.125), (1.125, 1.25), (6.0, 6.125))
    assert r.compute_end == 8.0 and r.iteration == 8.5 and r.tail == 0.5


def test_simulate_rejects_bad_segments():
    p = profile([1, 1], [1, 1])
    with pytest.raises(CannError, match="exactly once"):
        simulate(p, [[0]], Affine(1, 0))
    with pytest.raises(CannError, match="exactly once"):
        simulate(p, [[0, 1], [1]], Affine(1, 0))


def test_ring_and_hierarchical_costs_by_hand():
    n = 1e8
    # 8 devices of one Atlas 800: HCCS inside each group of 4, PCIe between: the ring waits on PCIe
    ring8 = 2 * 7 * 5e-6 + 2 * 7 / 8 * n / 25e9
    assert CommModel(8).allreduce(n) == pytest.approx(ring8)
    assert CommModel(8, "hierarchical").allreduce(n) == pytest.approx(ring8)
    # 64 devices: a flat ring over RoCE, or 8 servers: intra reduce-scatter + 8 RoCE rings on n/8 + all-gather
    assert CommModel(64).allreduce(n) == pytest.approx(2 * 63 * 10e-6 + 2 * 63 / 64 * n / 12.5e9)
    intra = 7 * 5e-6 + 7 / 8 * n / 25e9
    inter = 2 * 7 * 10e-6 + 2 * 7 / 8 * (n / 8) / 12.5e9
    assert CommModel(64, "hierarchical").allreduce(n) == pytest.approx(2 * intra + inter)
    assert CommModel(64, "hierarchical").startup() == pytest.approx(2 * 7 * 5e-6 + 2 * 7 * 10e-6)
    assert CommModel(1).allreduce(n) == 0.0
    with pytest.raises(CannError, match="unknown kind 'tree'"):
        CommModel(8, "tree")


def _random_profile(rng, n):
    return profile([rng.uniform(0, 2e-3) for _ in range(n)], [rng.choice([256, 4096, 1 << 16, 1 << 20, 9 << 20])
                                                            for _ in range(n)], rng.uniform(0, 1e-2), 1e-4)


def _partitions(n):
    for cuts in itertools.product((False, True), repeat=n - 1):
        ends = [i for i, c in enumerate(cuts) if c] + [n - 1]
        yield gs._from_ends(ends)


@pytest.mark.parametrize("seed", range(6))
def test_auto_equals_exhaustive_small(seed):
    rng = random.Random(seed)
    n = rng.randint(1, 11)
    p = _random_profile(rng, n)
    comm = CommModel(rng.choice([8, 64, 512]), rng.choice(["ring", "hierarchical"]))
    best = min(simulate(p, s, comm).iteration for s in _partitions(n))
    plan = gs.plan_auto(p, comm)
    auto = simulate(p, plan, comm).iteration
    assert auto == pytest.approx(best, rel=1e-12, abs=0)
    # among the optimal splits, the fewest segments
    fewest = min(len(s) for s in _partitions(n) if simulate(p, s, comm).iteration <= best * (1 + 1e-12))
    assert len(plan) == fewest
    for s in gs.STRATEGIES:
        assert auto <= simulate(p, gs.plan(s, p, comm), comm).iteration * (1 + 1e-12)
    # with a bound on the number of segments: the best partition of at most k segments
    k = rng.randint(1, 3)
    bounded = min(simulate(p, s, comm).iteration for s in _partitions(n) if len(s) <= k)
    segs = gs.plan_auto(p, comm, max_segments=k)
    assert len(segs) <= k and simulate(p, segs, comm).iteration == pytest.approx(bounded, rel=1e-12)


def _exhaustive_vectorized(p, comm):
    """min over all 2^(n-1) contiguous partitions of the last collective's end (numpy, n <= 20)."""
    n = len(p.nbytes)
    ready = p.ready_times()
    masks = np.arange(1 << (n - 1), dtype=np.int64)
    end = np.zeros(masks.size)
    size = np.zeros(masks.size)
    for i in range(n):
        size += p.nbytes[i]
        cut = np.ones(masks.size, bool) if i == n - 1 else ((masks >> i) & 1).astype(bool)
        cost = np.array([comm.allreduce(s) for s in np.unique(size[cut])])
        lookup = dict(zip(np.unique(size[cut]), cost))
        c = np.vectorize(lookup.get, otypes=[float])(size[cut]) if cut.any() else 0
        end[cut] = np.maximum(end[cut], ready[i]) + c
        size[cut] = 0
    return masks, end


@pytest.mark.parametrize("seed", range(3))
def test_auto_equals_exhaustive_20_layers(seed):
    rng = random.Random(100 + seed)
    p = _random_profile(rng, 20)
    comm = CommModel([8, 64, 512][seed], "ring" if seed != 1 else "hierarchical")
    masks, end = _exhaustive_vectorized(p, comm)
    best = max(p.compute_end, float(end.min())) + p.update
    # the vectorized search agrees with the event simulation on its best and on random partitions
    for m in [int(masks[end.argmin()]), *rng.sample(range(masks.size), 5)]:
        ends = [i for i in range(19) if m >> i & 1] + [19]
        assert simulate(p, gs._from_ends(ends), comm).comm_end == pytest.approx(end[m], rel=1e-12)
    auto = simulate(p, gs.plan_auto(p, comm), comm).iteration
    assert auto == pytest.approx(best, rel=1e-12)


def test_baseline_rules():
    mb = 1 << 20
    assert gs.ddp([mb // 2, mb // 2, 10 * mb, 20 * mb, mb, 30 * mb, 4]) == [[0, 1], [2, 3], [4, 5], [6]]
    assert gs.mindspore(161) == [list(range(85)), list(range(85, 160)), [160]]
    assert gs.mindspore(100) == [list(range(85)), list(range(85, 100))]
    # HCCL's default by size: 96.54 % of the bytes first
    assert gs.by_size(gs.HCCL_DEFAULT_SIZES, [50, 46, 1, 3]) == [[0, 1, 2], [3]]
    assert gs.by_size([50, 50], [50, 50]) == [[0], [1]]
    assert gs.by_size([10, 90], [50, 50]) == [[0], [1]]  # a boundary inside a gradient: it ends there
    assert gs.by_size([60, 20, 20], [100]) == [[0]]  # segments left empty are dropped
    assert gs.by_idx([20, 100, 159], 160) == [list(range(21)), list(range(21, 101)), list(range(101, 160))]
    with pytest.raises(CannError, match="last end index must be 159"):
        gs.by_idx([20, 100], 160)


def test_mgwfbp_merges_when_comm_cannot_start():
    # comm 1 s startup: every gradient is ready before the previous allreduce could end -> merge all
    p = profile([0.1] * 4, [10] * 4)
    assert gs.mgwfbp(p, Affine(1.0, 0.0)) == [[0, 1, 2, 3]]
    # compute long enough to hide each allreduce: no merging (wait 0.9 > startup 0.1 saved)
    assert gs.mgwfbp(p, Affine(0.0001, 0.0)) == [[0], [1], [2], [3]]


@pytest.mark.parametrize("text, spec", [
    ("auto", gs.SplitSpec("auto")), (" ddp ", gs.SplitSpec("ddp")), ("idx:20,100,159", gs.SplitSpec("idx", (20, 100, 159))),
    ("size:96.54,3.46", gs.SplitSpec("size", (96.54, 3.46))), ("size:60,20,20", gs.SplitSpec("size", (60, 20, 20))),
    ("idx:0,1,2,3,4,5,6,7", gs.SplitSpec("idx", tuple(range(8)))),
])
def test_parse_good(text, spec):
    assert gs.parse(text) == spec
    assert gs.parse(str(spec)) == spec


@pytest.mark.parametrize("text, message", [
    ("best", "is none of one, per-tensor"), ("idx:", "comma-separated list of integers"),
    ("idx:1.5,2", "list of integers"), ("idx:5,3,9", "strictly ascending"), ("idx:-1,4", ">= 0"),
    ("idx:0,1,2,3,4,5,6,7,8", "9 segments, HCCL allows at most 8"), ("size:60,30", "sum to 100 (they sum to 90)"),
    ("size:110,-10", "must be > 0"), ("size:a,b", "list of numbers"), ("size:nan,100", "must be > 0"),
])
def test_parse_bad(text, message):
    with pytest.raises(CannError, match=re.escape(message)) as e:
        gs.parse(text)
    assert "\n" not in str(e.value) and "--split-strategy" in str(e.value)


def test_profile_from_the_simulator():
    """A training program's launches: the gradients in backward order (the last layer's first), each produced
    by the launch computing it; the forward and backward launches add up to the whole timing-only run."""
    from cann.training.grad_profile import time_program, to_profile, update_seconds

    cnn = Path(__file__).resolve().parent.parent / "fixtures" / "torch" / "train_cnn.onnx"
    t = time_program(str(cnn), precision_mode="must_keep_origin_dtype")
    p = to_profile(t, update=1e-6)
    assert p.names[:2] == ("fc.bias", "fc.weight") and p.names[-1] == "stem.weight" and len(p.names) == 20
    ready = p.ready_times()
    assert ready == sorted(ready) and ready[0] > p.forward > 0 and ready[-1] <= p.compute_end
    import cann
    from cann.training import build

    prog = build(str(cnn), optimizer=None)
    assert dict(zip(p.names, p.nbytes)) == {k: v.size * 4 for k, v in prog.params.items()}
    run = cann.compile(prog.module, precision_mode="must_keep_origin_dtype").time(sim_checks="off")
    assert p.compute_end == pytest.approx(run.cycles / 1e6 / load_clock(), rel=1e-12)
    u = update_seconds(1 << 16)
    assert 0 < u < update_seconds(1 << 20) and update_seconds(0) == 0.0


def load_clock():
    from cann.hw.config import load_soc
    from cann.options import DEFAULT_SOC

    return load_soc(DEFAULT_SOC).clock_mhz
