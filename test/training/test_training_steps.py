"""Training steps on the simulator against PyTorch (issue 16 item 2), in must_keep_origin_dtype:
the gradient of every parameter at the initial weights (rel L2 <= 1e-4) and the losses of 20
optimizer steps (within 1e-3 relative) for a small ResNet-style CNN (BatchNorm in training mode,
its running statistics too; Momentum) and the GPT block fixture (Adam). The references come from PyTorch autograd through
test/fixtures/torch/make_training.py; this test does not import torch."""

from pathlib import Path

import numpy as np
import pytest

from cann.training import Adam, Momentum, Trainer

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "torch"


def check_gradients(grads: dict[str, np.ndarray], ref) -> dict[str, float]:
    """rel L2 per parameter. A reference whose norm is below 1e-6 of the largest gradient norm is
    zero up to float rounding (the key bias of attention: softmax ignores a per-row constant), so
    its relative error means nothing; ours must then be as small."""
    assert sorted(grads) == sorted(k[5:] for k in ref.files if k.startswith("grad/"))
    scale = max(float(np.linalg.norm(ref[f"grad/{k}"])) for k in grads)
    errs = {}
    for k, g in grads.items():
        r = ref[f"grad/{k}"]
        assert g.shape == r.shape, k
        if np.linalg.norm(r) < 1e-6 * scale:
            assert np.linalg.norm(g) < 1e-6 * scale, k
            continue
        errs[k] = float(np.linalg.norm(g - r) / np.linalg.norm(r))
    bad = {k: e for k, e in errs.items() if e > 1e-4}
    assert not bad, bad
    return errs


def run_steps(trainer: Trainer, batches, ref, key: str) -> list[float]:
    losses = []
    for t in range(20):
        inputs, target = batches[t % len(batches)]
        losses.append(trainer.step(inputs, target))
        if t == 0:
            check_gradients(trainer.gradients, ref)
            assert trainer.gradients  # gradients=True keeps them
    expected = ref[key]
    assert losses[-1] < 0.5 * losses[0]  # the loss decreases
    rel = np.abs(np.asarray(losses) - expected) / np.abs(expected)
    assert rel.max() <= 1e-3, list(zip(losses, expected))
    return losses


@pytest.mark.slow
def test_small_resnet_momentum_matches_pytorch():
    ref = np.load(FIXTURES / "train_cnn.npz")
    trainer = Trainer.from_model(str(FIXTURES / "train_cnn.onnx"), optimizer=Momentum(lr=0.05, alpha=0.9, beta=1.0),
                                 gradients=True)
    assert len(trainer.params) == 20  # 5 convs, 6 BatchNorm scale/bias pairs, Linear weight and bias
    batches = [({"image": ref["image"][i]}, ref["target"][i]) for i in range(2)]
    losses = run_steps(trainer, batches, ref, "losses_momentum")
    assert abs(losses[0] - 2.3108205795288086) < 1e-5
    # BatchNorm's running statistics after 20 steps (momentum 0.1, unbiased variance), as PyTorch's
    stats = {k[len("running/"):]: ref[k] for k in ref.files if k.startswith("running/")}
    assert sorted(trainer.buffers) == sorted(stats) and len(stats) == 12
    for k, v in stats.items():
        assert np.linalg.norm(trainer.buffers[k] - v) / np.linalg.norm(v) < 1e-5, k


@pytest.mark.slow
def test_gpt_block_adam_matches_pytorch():
    ref = np.load(FIXTURES / "train_gpt.npz")
    trainer = Trainer.from_model(str(FIXTURES / "gpt_block.onnx"), optimizer=Adam(lr=0.002, epsilon=1e-6),
                                 gradients=True)
    assert len(trainer.params) == 22  # embeddings, 3 LayerNorms, 7 Linear layers
    run_steps(trainer, [({"input_ids": ref["input_ids"]}, ref["target"])], ref, "losses_adam")
