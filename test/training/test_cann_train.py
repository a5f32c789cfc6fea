"""cann-train: the losses it prints are the Trainer's (PyTorch's, test_training_steps.py), its
--output holds the trained parameters, and bad input exits 2 with one line."""

from pathlib import Path

import numpy as np
import pytest

from cann.tools import cann_train as mod

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "torch"


def run(*args):
    with pytest.raises(SystemExit) as e:
        mod.main([str(a) for a in args])
    return e.value.code


def test_gpt_block_two_adam_steps(capsys, tmp_path):
    ref = np.load(FIXTURES / "train_gpt.npz")
    out = tmp_path / "w.npz"
    assert run(FIXTURES / "gpt_block.onnx", "--data", FIXTURES / "train_gpt.npz", "--optimizer", "adam",
               "--lr", "2e-3", "--steps", "2", "--output", out) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split(":")[0] for ln in lines] == ["step 1", "step 2"]
    losses = [float(ln.split()[-1]) for ln in lines]
    assert np.allclose(losses, ref["losses_adam"][:2], rtol=1e-5)
    w = np.load(out)
    assert len(w.files) == 22 and w["tok.weight"].shape == (128, 64)


@pytest.mark.parametrize("args, message", [
    (("--data", FIXTURES / "train_gpt.npz"), "error: {gpt}: no array for image (it holds grad/embedding_1, grad/fc1.bias"),
    (("--data", FIXTURES / "train_cnn.npz", "--steps", "0"), "error: --steps: 0 is not in the range x>=1."),
    (("--data", FIXTURES / "train_cnn.npz", "--loss", "hinge"), "error: --loss: 'hinge' is not one of"),
])
def test_bad_input_exits_2_with_one_line(capsys, args, message):
    assert run(FIXTURES / "train_cnn.onnx", *args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(message.format(gpt=FIXTURES / "train_gpt.npz")), err
