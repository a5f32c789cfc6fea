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


def test_trained_model_is_written_and_compiles(capsys, tmp_path):
    """--output-model: the ONNX model with the trained initializers (BatchNorm's running statistics
    included); its inference on the simulator equals onnxruntime's."""
    import onnx

    import cann

    out = tmp_path / "trained.onnx"
    weights = tmp_path / "w.npz"
    assert run(FIXTURES / "train_cnn.onnx", "--data", FIXTURES / "train_cnn.npz", "--lr", "0.05", "--steps", "1",
               "--output-model", out, "--output", weights) == 0
    w = np.load(weights)
    assert len(w.files) == 32  # 20 parameters, 12 running statistics
    trained = {i.name: onnx.numpy_helper.to_array(i) for i in onnx.load(out).graph.initializer}
    original = {i.name: onnx.numpy_helper.to_array(i) for i in onnx.load(FIXTURES / "train_cnn.onnx").graph.initializer}
    assert sorted(trained) == sorted(original)
    for k in w.files:
        np.testing.assert_array_equal(trained[k], w[k])
        assert not np.array_equal(trained[k], original[k]), k  # one step moved every value
    import onnxruntime as ort

    x = np.load(FIXTURES / "train_cnn.npz")["image"][1]
    ref = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, {"image": x})[0]
    got = cann.compile(str(out), precision_mode="must_keep_origin_dtype").run({"image": x})["logits"]
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-5


@pytest.mark.parametrize("args, message", [
    (("--data", FIXTURES / "train_gpt.npz"), "error: {gpt}: no array for image (it holds grad/embedding_1, grad/fc1.bias"),
    (("--data", FIXTURES / "train_cnn.npz", "--steps", "0"), "error: --steps: 0 is not in the range x>=1."),
    (("--data", FIXTURES / "train_cnn.npz", "--loss", "hinge"), "error: --loss: 'hinge' is not one of"),
    (("--data", FIXTURES / "train_cnn.npz", "--lr", "-1"), "error: --lr: the learning rate must be a finite number "
                                                           ">= 0, got -1.0"),
    (("--data", FIXTURES / "train_cnn.npz", "--lr", "nan"), "error: --lr: the learning rate must be a finite number "
                                                            ">= 0, got nan"),
    (("--data", FIXTURES / "train_cnn.npz", "--precision-mode", "bogus"),
     "error: --precision_mode: unknown precision mode 'bogus'"),  # the location is a spelling cann-train takes
    (("--data", FIXTURES / "train_cnn.npz", "--data-parallel", "--split-strategy", "idx:5,3"),
     "error: --split-strategy: 'idx:5,3': end indices must be >= 0 and strictly ascending"),
    (("--data", FIXTURES / "train_cnn.npz", "--data-parallel", "--split-strategy", "size:50,40"),
     "error: --split-strategy: 'size:50,40': percentages must be > 0 and sum to 100 (they sum to 90)"),
    (("--data", FIXTURES / "train_cnn.npz", "--data-parallel", "--split-strategy", "idx:" + ",".join(map(str, range(9)))),
     "error: --split-strategy: 'idx:0,1,2,3,4,5,6,7,8': 9 segments, HCCL allows at most 8"),
    (("--data", FIXTURES / "train_cnn.npz", "--data-parallel", "--split-strategy", "fastest"),
     "error: --split-strategy: 'fastest' is none of one, per-tensor, ddp, hccl, mindspore, mgwfbp, auto"),
    (("--data", FIXTURES / "train_cnn.npz", "--split-strategy", "auto"), "error: --split-strategy: only with --data-parallel"),
    (("--data", FIXTURES / "train_cnn.npz", "--data-parallel", "--zero", "2", "--split-strategy", "auto"),
     "error: --split-strategy: not with --zero (sharded training reduce-scatters in --segment-bytes segments)"),
])
def test_bad_input_exits_2_with_one_line(capsys, args, message):
    assert run(FIXTURES / "train_cnn.onnx", *args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(message.format(gpt=FIXTURES / "train_gpt.npz")), err


def test_missing_model_named_before_data_and_outputs_spare_inputs(capsys, tmp_path):
    # was: `cann-train missing.onnx --data missing.npz` named the data; `--output DATA.npz` replaced the data
    assert run(tmp_path / "m.onnx", "--data", tmp_path / "d.npz") == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'm.onnx'}: no such file\n"
    data = FIXTURES / "train_cnn.npz"
    before = data.read_bytes()
    assert run(FIXTURES / "train_cnn.onnx", "--data", data, "--output", data) == 2
    assert capsys.readouterr().err == (f"error: {data}: cannot write: it is the --data file ({data}), an input of "
                                       "this command; give another file\n")
    assert data.read_bytes() == before
