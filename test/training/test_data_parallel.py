"""Data parallelism on MPI (issue 16 item 3): P ranks, each on its shard of the batch, with
SyncBatchNorm and gradients summed by segmented Iallreduce, end every step with bit-identical
weights on all ranks and the weights of one device on the whole batch (fp32, <= 1e-5 relative).
Multi-rank runs go through :func:`cann.testing.run_mpi` (oversubscribed, with a timeout)."""

import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from cann.errors import CannError
from cann.hw.links import load_cluster
from cann.testing import run_mpi
from cann.training import Adam, Momentum, Trainer
from cann.training.data_parallel import DataParallelTrainer, split_program
from cann.training.step_sim import CommModel

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "torch"
CNN = FIXTURES / "train_cnn.onnx"  # batch 4: 5 convs, 6 BatchNorms, Linear
STEPS = 2
OPT = dict(lr=0.05, alpha=0.9, beta=1.0)


def optimizer(name: str = "momentum"):
    return Momentum(**OPT) if name == "momentum" else Adam(lr=1e-3)


def batches():
    ref = np.load(FIXTURES / "train_cnn.npz")
    return [({"image": ref["image"][i]}, ref["target"][i]) for i in range(2)]


_ONE_DEVICE = {}


def one_device_run(name: str):
    """STEPS steps of the single-device Trainer on the whole batch: losses, then weights and running
    stats, then the last step's gradients (cached per optimizer)."""
    if name not in _ONE_DEVICE:
        trainer = Trainer.from_model(str(CNN), optimizer=optimizer(name), gradients=True)
        losses = [trainer.step(*batches()[t % 2]) for t in range(STEPS)]
        _ONE_DEVICE[name] = losses, {**trainer.params, **trainer.buffers}, trainer.gradients
    return _ONE_DEVICE[name]


@pytest.fixture
def one_device():
    return one_device_run("momentum")


RANK_SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    from mpi4py import MPI
    sys.path.insert(0, sys.argv[3])
    from test_data_parallel import CNN, STEPS, batches, optimizer
    from cann.training.data_parallel import DataParallelTrainer
    trainer = DataParallelTrainer(str(CNN), optimizer=optimizer(sys.argv[4]), segment_bytes=int(sys.argv[2]))
    losses = [trainer.step(*batches()[t % 2]) for t in range(STEPS)]
    np.savez(f"{sys.argv[1]}/rank{trainer.rank}.npz", **trainer.params, **trainer.buffers)
    if trainer.rank == 0:
        print(repr((losses, trainer.cycles, trainer.comm_seconds, trainer.comm_bytes)))
""")


@pytest.mark.parametrize("ranks,opt", [(2, "momentum"), (4, "momentum"), (2, "adam")])
def test_ranks_match_one_device_on_the_whole_batch(ranks, opt, tmp_path):
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    segment = 4096  # bytes: the 20 gradients (about 11 KB) go in several segments
    r = run_mpi(ranks, [sys.executable, script, tmp_path, segment, Path(__file__).parent, opt], timeout=240)
    losses, cycles, seconds, nbytes = eval(r.stdout)
    ref_losses, ref, _ = one_device_run(opt)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-6)
    weights = [np.load(tmp_path / f"rank{i}.npz") for i in range(ranks)]
    assert sorted(weights[0].files) == sorted(ref) and len(ref) == 20 + 12  # parameters + running statistics
    for w in weights[1:]:  # every rank holds the same bits
        for k in ref:
            assert np.array_equal(w[k], weights[0][k]), k
    for k, v in ref.items():
        assert np.linalg.norm(weights[0][k] - v) / np.linalg.norm(v) <= 1e-5, k
    # simulated time: per segment 2(p-1) alpha + 2(p-1)/p n beta of the ring's link; positive compute cycles
    assert cycles > 0 and nbytes > 0
    assert seconds >= CommModel(ranks).allreduce(nbytes) - 1e-15


def test_one_rank_is_the_single_device_program(one_device):
    """The split program on one rank (no MPI peers) computes what the fused program does, gradients too."""
    trainer = DataParallelTrainer(str(CNN), optimizer=optimizer(), gradients=True)
    losses = [trainer.step(*batches()[t % 2]) for t in range(STEPS)]
    ref_losses, ref, grads = one_device
    assert sorted(trainer.gradients) == sorted(grads) and len(grads) == 20
    for k, g in grads.items():
        assert np.linalg.norm(trainer.gradients[k] - g) / np.linalg.norm(g) <= 1e-6, k
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-6)
    for k, v in ref.items():
        assert np.linalg.norm({**trainer.params, **trainer.buffers}[k] - v) / np.linalg.norm(v) <= 1e-6, k
    assert trainer.comm_seconds == 0.0 and trainer.step_cycles() == trainer.cycles > 0


def test_split_program_cuts_at_the_cross_rank_sums():
    """Per BatchNorm two forward sums (mean, variance) and two backward ones (their cotangents: every
    BatchNorm follows a conv whose weight needs them), the two branches of the downsampling block
    sharing cuts; then the 20 gradients together, after which only the optimizer update is left."""
    from cann.compiler import import_model
    from cann.training import build

    program = build(import_model(str(CNN)), optimizer=Momentum(), ranks=2)
    stages, consts, results = split_program(program.module)
    sums = [s.sums for s in stages]
    assert all(s.module is not None for s in stages)
    kinds = [res for s in sums[:-2] for _, res in s]
    assert len(kinds) == 6 * 4 and len(stages) == 22  # 24 statistics sums in 20 cuts
    assert max(len(s) for s in sums[:-2]) == 2
    assert len(sums[-2]) == 20 and sums[-1] == []  # the gradients; then the update stage
    for s in stages:
        text = str(s.module)
        assert "cross_rank_sum" not in text
    assert len(results) == len(program.outputs) and not consts


class FakeComm:
    def __init__(self, size):
        self.size = size

    def Get_size(self):  # noqa: N802 (mpi4py's name)
        return self.size

    def Get_rank(self):  # noqa: N802
        return 0


def test_batch_not_divisible_by_the_ranks():
    with pytest.raises(CannError, match=r"input 'image': batch 4 does not divide by 3 ranks"):
        DataParallelTrainer(str(CNN), comm=FakeComm(3))


def test_ring_allreduce_cost_of_the_link_model():
    """The trainer's link time is :class:`CommModel`'s ring, checked here against the formula by hand."""
    link = load_cluster().link_between(0, 1)
    n = 1 << 20
    assert CommModel(2).allreduce(n) == pytest.approx(2 * link.latency + n / link.bandwidth, rel=1e-12)
    assert CommModel(1).allreduce(n) == 0.0 and CommModel(4).allreduce(0) == 0.0
    ring = [load_cluster().link_between(i, (i + 1) % 4) for i in range(4)]
    expected = max(6 * x.latency + 1.5 * n / x.bandwidth for x in ring)  # the slowest link of the ring
    assert CommModel(4).allreduce(n) == pytest.approx(expected, rel=1e-12)
    assert CommModel(4).allreduce(n) > CommModel(2).allreduce(n)


def test_cann_train_data_parallel_on_two_ranks(one_device, tmp_path):
    """``mpiexec -n 2 cann-train --data-parallel``: rank 0 prints the losses and cycles and writes the weights."""
    ref = np.load(FIXTURES / "train_cnn.npz")
    data = tmp_path / "data.npz"
    np.savez(data, image=ref["image"], target=ref["target"])
    out = tmp_path / "w.npz"
    code = "from cann.tools.cann_train import main; main()"
    r = run_mpi(2, [sys.executable, "-c", code, CNN, "--data", data, "--lr", "0.05", "--steps", STEPS,
                    "--data-parallel", "--output", out], timeout=240)
    lines = r.stdout.splitlines()
    assert [ln.split(":")[0] for ln in lines] == ["step 1", "step 2"]
    assert "over 2 ranks" in lines[0]
    losses = [float(ln.split()[3]) for ln in lines]
    np.testing.assert_allclose(losses, one_device[0], rtol=1e-5)
    w = np.load(out)
    for k, v in one_device[1].items():
        assert np.linalg.norm(w[k] - v) / np.linalg.norm(v) <= 1e-5, k


@pytest.mark.parametrize("strategy", ["auto", "idx:3,10,19"])
def test_cann_train_split_strategy_gives_the_default_weights(one_device, tmp_path, strategy):
    """``--split-strategy``: the planned segments drive the Iallreduce; the weights are the default run's
    (the 1 MiB fixed segments: one segment here) bit for bit on 2 ranks, the plan is printed."""
    ref = np.load(FIXTURES / "train_cnn.npz")
    data = tmp_path / "data.npz"
    np.savez(data, image=ref["image"], target=ref["target"])
    code = "from cann.tools.cann_train import main; main()"
    outs = {}
    for name, extra in (("default", []), ("split", ["--split-strategy", strategy])):
        outs[name] = tmp_path / f"{name}.npz"
        r = run_mpi(2, [sys.executable, "-c", code, CNN, "--data", data, "--lr", "0.05", "--steps", STEPS,
                        "--data-parallel", "--output", outs[name], *extra], timeout=300)
        if extra:
            head = r.stdout.splitlines()[0]
            assert head.startswith(f"split {strategy}: ") and "(backward order); simulated step" in head, head
            ends = eval(head.split("end indices ")[1].split(" (")[0])
            assert ends[-1] == 19 and ends == sorted(ends)
            if strategy.startswith("idx:"):
                assert ends == [3, 10, 19]
    a, b = np.load(outs["default"]), np.load(outs["split"])
    assert sorted(a.files) == sorted(b.files)
    for k in a.files:
        assert np.array_equal(a[k], b[k]), k


def test_split_plan_on_one_rank():
    """The trainer's plan: segments of parameter names in backward order (the fc layer's first), each
    gradient once, scored by the step simulation; the summed gradients are the unsplit ones."""
    trainer = DataParallelTrainer(str(CNN), optimizer=optimizer(), gradients=True, split_strategy="per-tensor")
    assert [s[0] for s in trainer.segments[:2]] == ["fc.bias", "fc.weight"]
    assert sorted(n for s in trainer.segments for n in s) == sorted(trainer.program.params)
    assert trainer.step_result.tail == pytest.approx(trainer.profile.update)  # one rank: no communication
    trainer.step(*batches()[0])
    plain = DataParallelTrainer(str(CNN), optimizer=optimizer(), gradients=True)
    plain.step(*batches()[0])
    for k, g in plain.gradients.items():
        assert np.array_equal(trainer.gradients[k], g), k


def test_cann_train_batch_not_divisible(tmp_path):
    ref = np.load(FIXTURES / "train_cnn.npz")
    data = tmp_path / "data.npz"
    np.savez(data, image=ref["image"], target=ref["target"])
    code = "from cann.tools.cann_train import main; main()"
    with pytest.raises(RuntimeError, match=r"error: input 'image': batch 4 does not divide by 3 ranks"):
        run_mpi(3, [sys.executable, "-c", code, CNN, "--data", data, "--data-parallel"], timeout=120)
