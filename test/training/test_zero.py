"""Sharded data-parallel training (issue 16 item 5, ZeRO stages 1-3) on MPI ranks: the same weights
as unsharded data-parallel training (stage 0), every rank the same bits, the model-state bytes each
rank holds equal to cann-memplan's byte model (plus the partition's padding), the collectives
costed by the link model's ring formulas. Multi-rank runs go through :func:`cann.testing.run_mpi`."""

import json
import math
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from cann.errors import CannError
from cann.hw.links import load_cluster
from cann.testing import run_mpi
from cann.tools import cann_train
from cann.training import memplan
from cann.training.data_parallel import DataParallelTrainer, split_program
from cann.training.zero import ShardedTrainer, ring_seconds

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "fixtures" / "torch"
CNN = FIXTURES / "train_cnn.onnx"  # batch 4: 5 convs, 6 BatchNorms, Linear; 20 parameters, 5,266 elements
SEGMENT = 4096  # bytes: the collectives run in several segments

RANK_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    sys.path.insert(0, sys.argv[2])
    from test_data_parallel import CNN, STEPS, batches, optimizer
    from cann.training.data_parallel import DataParallelTrainer
    from cann.training.zero import ShardedTrainer
    out, opt, seg = sys.argv[1], sys.argv[3], int(sys.argv[4])
    report = {}
    for zero in (0, 1, 2, 3):
        kw = dict(optimizer=optimizer(opt), segment_bytes=seg)
        t = DataParallelTrainer(str(CNN), **kw) if zero == 0 else ShardedTrainer(str(CNN), zero=zero, **kw)
        losses = [t.step(*batches()[i % 2]) for i in range(STEPS)]
        seconds, nbytes = t.comm_seconds, t.comm_bytes
        np.savez(f"{out}/z{zero}_rank{t.rank}.npz", **t.params, **t.buffers)
        report[zero] = dict(losses=losses, memory=t.memory, seconds=seconds, bytes=nbytes,
                            size=getattr(t, "size", 0), cycles=t.cycles)
    if t.rank == 0:
        print(json.dumps(report))
""")


@pytest.mark.parametrize("ranks,opt", [(2, "momentum"), (4, "adam")])
def test_sharded_stages_match_unsharded(ranks, opt, tmp_path):
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    r = run_mpi(ranks, [sys.executable, script, tmp_path, HERE, opt, SEGMENT], timeout=240)
    report = {int(k): v for k, v in json.loads(r.stdout).items()}
    ref = np.load(tmp_path / "z0_rank0.npz")
    assert len(ref.files) == 20 + 12
    sizes = [v.size for v in _program().params.values()]
    nparams = sum(sizes)
    assert nparams == memplan.model_parameters(CNN) == 5266
    for zero in (1, 2, 3):
        w = [np.load(tmp_path / f"z{zero}_rank{i}.npz") for i in range(ranks)]
        assert sorted(w[0].files) == sorted(ref.files)
        for other in w[1:]:  # the gathered weights: the same bits on every rank
            assert all(np.array_equal(other[k], w[0][k]) for k in ref.files), zero
        if zero == 1 or ranks == 2:
            # stage 1 sums with the same allreduce; at 2 ranks reduce-scatter's a + b is allreduce's
            assert all(np.array_equal(w[0][k], ref[k]) for k in ref.files), zero
            assert report[zero]["losses"] == report[0]["losses"]
        else:  # 4 ranks: MPICH's reduce-scatter associates the 4 addends unlike its allreduce
            for k in ref.files:
                assert np.linalg.norm(w[0][k] - ref[k]) <= 1e-6 * np.linalg.norm(ref[k]), (zero, k)
            np.testing.assert_allclose(report[zero]["losses"], report[0]["losses"], rtol=1e-6)
    # memory: the bytes held equal memplan's fp32 byte model; a shard holds C elements (C P >= nparams)
    kinds = ("weights", "gradients", "optimizer")
    assert report[0]["memory"] == {k: getattr(memplan.plan(nparams, ranks, 0, optimizer=opt, precision="fp32"), k)
                                   for k in kinds}
    size = report[1]["size"]
    assert size == sum(-(-n // ranks) for n in sizes)  # ceil(n_i / P) per parameter
    pad = size * ranks - nparams
    assert 0 <= pad < 20 * ranks
    for zero in (1, 2, 3):
        want = memplan.plan(nparams, ranks, zero, optimizer=opt, precision="fp32")
        per = dict(zip(kinds, memplan.BYTES_PER_PARAM[("fp32", opt)]))
        for kind, sharded_from in zip(kinds, (3, 2, 1)):
            got = report[zero]["memory"][kind]
            if zero >= sharded_from:
                assert got == per[kind] * size == getattr(want, kind) + per[kind] * pad / ranks, (zero, kind)
            else:
                assert got == getattr(want, kind), (zero, kind)
        assert report[zero]["memory"]["temporary"] > 0
    # traffic: stage 1 = allreduce + all-gather; stage 2 swaps the allreduce for a reduce-scatter;
    # stage 3 gathers per stage (forward and backward), no final all-gather
    stats = report[0]["bytes"] - 4 * nparams
    assert report[1]["bytes"] == stats + 4 * nparams + 4 * size * ranks
    assert report[2]["bytes"] == stats + 2 * 4 * size * ranks
    assert report[3]["bytes"] > report[2]["bytes"]
    floor = ring_seconds("reduce_scatter", 4 * size * ranks, ranks) + ring_seconds("allgather", 4 * size * ranks, ranks)
    assert report[2]["seconds"] >= floor
    assert report[1]["cycles"] == report[2]["cycles"] > 0


def test_ring_collective_costs():
    n, link = 1 << 20, load_cluster().link_between(0, 1)
    assert ring_seconds("reduce_scatter", n, 2) == pytest.approx(link.latency + n / 2 / link.bandwidth, rel=1e-12)
    ring = [load_cluster().link_between(i, (i + 1) % 4) for i in range(4)]
    expect = max(3 * x.latency + 0.75 * n / x.bandwidth for x in ring)
    assert ring_seconds("allgather", n, 4) == pytest.approx(expect, rel=1e-12)
    expect = max(6 * x.latency + 1.5 * n / x.bandwidth for x in ring)
    assert ring_seconds("allreduce", n, 4) == pytest.approx(expect, rel=1e-12)
    assert ring_seconds("allgather", n, 1) == 0.0
    with pytest.raises(CannError, match="collective: unknown kind 'broadcast'"):
        ring_seconds("broadcast", n, 2)


@pytest.mark.parametrize("zero", [3])  # (stages 1-2 are checked on 2 and 4 ranks above; 3 has its own split)
def test_one_rank_is_the_unsharded_step(zero):
    """On one rank (no MPI peers) ZeRO-3 gives the unsharded runner's bits, with Adam."""
    from test_data_parallel import STEPS, batches, optimizer

    ref = _unsharded_adam()
    t = ShardedTrainer(str(CNN), zero=zero, optimizer=optimizer("adam"))
    losses = [t.step(*batches()[i % 2]) for i in range(STEPS)]
    assert losses == ref[0]
    params = t.params
    for k, v in ref[1].items():
        assert np.array_equal({**params, **t.buffers}[k], v), k


_REF = {}


def _unsharded_adam():
    from test_data_parallel import STEPS, batches, optimizer

    if "v" not in _REF:
        t = DataParallelTrainer(str(CNN), optimizer=optimizer("adam"))
        _REF["v"] = [t.step(*batches()[i % 2]) for i in range(STEPS)], {**t.params, **t.buffers}
    return _REF["v"]


def test_stage_3_recomputes_what_it_derives_from_the_weights():
    """ZeRO-3's split: no stage outputs a value computed from the weights alone (a forward stage's
    transposed weight would be a full copy kept for the backward pass); the backward stages read the
    weights themselves."""
    program = _program()
    plain, _, _ = split_program(program.module)
    stages, _, _ = split_program(program.module, list(program.params))
    assert len(stages) == len(plain) and [s.sums for s in stages] == [s.sums for s in plain]
    reads = lambda ss: sum(len(set(s.inputs) & set(program.params)) for s in ss)  # noqa: E731
    assert reads(stages) > reads(plain) > 0
    assert sum(len(s.outputs) for s in stages) < sum(len(s.outputs) for s in plain)
    # what ZeRO-3 gathers per stage: no stage needs half of the weights; forward + backward about 2 psi
    total = sum(v.size for v in program.params.values())
    gathered = [sum(program.params[n].size for n in s.inputs if n in program.params) for s in stages]
    assert max(gathered) < total / 2 and total < sum(gathered) < 2 * total


def _program():
    from cann.compiler import import_model
    from cann.training import build

    if "p" not in _REF:
        _REF["p"] = build(import_model(str(CNN)), optimizer=None, ranks=2)
    return _REF["p"]


class FakeComm:
    def Get_size(self):  # noqa: N802 (mpi4py's name)
        return 2

    def Get_rank(self):  # noqa: N802
        return 0


def test_bad_stage_and_gradients():
    with pytest.raises(CannError, match=r"--zero: sharding stage must be 1, 2 or 3 \(0: DataParallelTrainer\), got 4"):
        ShardedTrainer(str(CNN), zero=4, comm=FakeComm())
    with pytest.raises(CannError, match="gradients: sharded training keeps only each rank's slice"):
        ShardedTrainer(str(CNN), zero=2, comm=FakeComm(), gradients=True)


@pytest.mark.parametrize("args, message", [
    (("--zero", "4", "--data-parallel"), "error: --zero: '4' is not one of '0', '1', '2', '3'."),
    (("--zero", "two"), "error: --zero: 'two' is not one of '0', '1', '2', '3'."),
    (("--zero", "2"), "error: --zero: needs --data-parallel"),
    (("--report-memory",), "error: --report-memory: needs --data-parallel"),
])
def test_cann_train_bad_zero_exits_2_with_one_line(capsys, args, message):
    with pytest.raises(SystemExit) as e:
        cann_train.main([str(CNN), "--data", str(FIXTURES / "train_cnn.npz"), *args])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(message), err


def test_cann_train_zero_3_reports_memory(tmp_path):
    """``mpiexec -n 2 cann-train --data-parallel --zero 3 --report-memory``: the weights of one device
    on the whole batch, the bytes held per rank beside memplan's."""
    from test_data_parallel import STEPS, one_device_run

    out = tmp_path / "w.npz"
    code = "from cann.tools.cann_train import main; main()"
    r = run_mpi(2, [sys.executable, "-c", code, CNN, "--data", FIXTURES / "train_cnn.npz", "--lr", "0.05",
                    "--steps", STEPS, "--data-parallel", "--zero", "3", "--report-memory", "--output", out],
                timeout=240)
    lines = r.stdout.splitlines()
    assert [ln.split(":")[0] for ln in lines[:2]] == ["step 1", "step 2"]
    assert "collectives (ZeRO-3)" in lines[0] and "over 2 ranks" in lines[0]
    assert lines[2] == "memory per rank (ZeRO-3, 2 ranks, 5,266 parameters, bytes held / memplan fp32):"
    assert lines[3:6] == ["  weights: 10,532 / 10,532", "  gradients: 10,532 / 10,532",
                          "  optimizer states: 10,532 / 10,532"]
    assert lines[6].startswith("  (shards: 2,633 elements per rank, 0 of padding over all ranks; temporary")
    losses, ref, _ = one_device_run("momentum")
    np.testing.assert_allclose([float(ln.split()[3]) for ln in lines[:2]], losses, rtol=1e-5)
    w = np.load(out)
    assert sorted(w.files) == sorted(ref)
    for k, v in ref.items():
        assert np.linalg.norm(w[k] - v) <= 1e-5 * np.linalg.norm(v), k
    assert math.isfinite(float(lines[0].split()[5]))
