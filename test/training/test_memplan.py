"""cann-memplan: ZeRO's byte model per device (issue 16 item 5), its CLI's table and one-line errors."""

import subprocess
import sys
from pathlib import Path

import pytest

from cann.errors import CannError
from cann.tools import cann_memplan as cli_mod
from cann.training import memplan

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "torch"


def run(*args):
    with pytest.raises(SystemExit) as e:
        cli_mod.main(list(args))
    return e.value.code


def totals(out: str) -> list[str]:
    return [line.split()[-2] for line in out.splitlines()[2:] if line.startswith(("none", "ZeRO"))]


def test_zero_paper_7_5b_on_64_devices(capsys):
    """ZeRO (SC'20) Table 1's 7.5B row at Nd = 64: 120 / 31.4 / 16.6 / 1.9 GB."""
    assert run("--params", "7.5e9", "--ranks", "64") == 0
    out = capsys.readouterr().out
    assert totals(out) == ["120.0", "31.4", "16.6", "1.9"]
    assert "7,500,000,000 parameters on 64 data-parallel devices, adam in mixed precision (2 + 2 + 12 bytes" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines()[2:]}
    assert rows["none"][1:8:2] == ["15.0", "15.0", "90.0", "120.0"]
    assert rows["ZeRO-1"][1:8:2] == ["15.0", "15.0", "1.4", "31.4"]
    assert rows["ZeRO-2"][1:8:2] == ["15.0", "0.2", "1.4", "16.6"]
    assert rows["ZeRO-3"][1:8:2] == ["0.2", "0.2", "1.4", "1.9"]


def test_megatron_8_3b_on_8_devices(capsys):
    """8.3B on one 8-device server: 132.8 GB of unsharded states, 16.6 GB at stage 3."""
    assert run("--params", "8.3e9", "--ranks", "8") == 0
    assert totals(capsys.readouterr().out) == ["132.8", "45.6", "31.1", "16.6"]
    assert run("--params", "8.3e9", "--ranks", "8", "--zero", "3") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1].split() == ["ZeRO-3", "2.1", "GB", "2.1", "GB", "12.4", "GB", "16.6", "GB"]
    assert len(out) == 3


def test_api_bytes():
    p = memplan.plan(7.5e9, 64, 2)
    assert (p.weights, p.gradients, p.optimizer) == (15e9, 2 * 7.5e9 / 64, 12 * 7.5e9 / 64)
    assert memplan.plan(1e6, 4, 0, optimizer="momentum", precision="fp32").total == 12e6
    assert memplan.plan(1e6, 4, 3, optimizer="sgd", precision="fp32").total == 2e6
    assert memplan.plan(1e6, 4, 1, activations=5e5).total == 4e6 + 12e6 / 4 + 5e5
    assert memplan.gb(31.40625e9) == "31.4 GB"


@pytest.mark.parametrize("args, message", [
    (("--params", "-1"), "error: --params: must be a positive finite number, got '-1'"),
    (("--params", "lots"), "error: --params: expected a number of parameters such as 7.5e9, got 'lots'"),
    (("--params", "1e9", "--zero", "4"), "error: --zero: '4' is not one of '0', '1', '2', '3'."),
    (("--params", "1e9", "--ranks", "0"), "error: --ranks: must be >= 1, got 0"),
    ((), "error: --params: give exactly one of --params and --model"),
    (("--params", "1e9", "--batch", "2"), "error: --batch: needs --model (activations are measured on a model file)"),
    (("--params", "1e9", "--recompute"), "error: --recompute: needs --model and --batch"),
    (("--model", "/nonexistent.onnx"), "error: /nonexistent.onnx: no such file"),
    (("--model", "/"), "error: /: is not a file"),
])
def test_bad_flags_exit_2_with_one_line(capsys, args, message):
    assert run(*args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(message), err
    if args[:1] == ("--model",):  # was "cannot read as ONNX: [Errno 2] No such file or directory: '/nonexistent.onnx'"
        assert err == [message]


def test_api_errors():
    with pytest.raises(CannError, match="--zero: must be one of 0, 1, 2, 3, got 5"):
        memplan.plan(1e9, 8, 5)
    with pytest.raises(CannError, match="--ranks: must be an integer >= 1"):
        memplan.plan(1e9, 0, 1)


def test_model_file_parameters_and_activations(capsys):
    """A model file: its trainable parameters (BatchNorm statistics excluded) and the GM planner's
    activation bytes at a batch, scaled from the model's fixed batch of 1; recomputation keeps less."""
    model = str(FIXTURES / "resnext.onnx")
    assert memplan.model_parameters(model) == 17898
    full = memplan.activation_bytes(model, 4)
    assert full == 2000384 == 4 * memplan.activation_bytes(model, 1)  # input in NC1HWC0_C04 (3x32x32): 4, not 16 lanes
    assert memplan.activation_bytes(model, 4, recompute=True) == 1311232
    assert run("--model", model, "--batch", "4", "--ranks", "2", "--zero", "2", "--recompute") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("17,898 parameters on 2 data-parallel devices")
    assert out[1].split() == ["stage", "weights", "gradients", "optimizer", "activations", "total"]
    assert out[-1] == "activations per device: 1,311,232 bytes (GM planner, batch 4, square-root recomputation)"


def test_console_script_entry_point():
    text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert 'cann-memplan = "cann.tools.cann_memplan:main"' in text
    r = subprocess.run([sys.executable, "-m", "cann.tools.cann_memplan", "--params", "7.5e9", "--ranks", "64",
                        "--zero", "1"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.splitlines()[-1].split()[-2] == "31.4"


def test_a_small_model_is_shown_in_mb(capsys):
    """1M parameters (16 MB of states unsharded): decimal MB, not a table of 0.0 GB."""
    assert run("--params", "1e6", "--ranks", "4") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("per device, decimal MB:")
    assert out[2].split() == ["none", "2.0", "MB", "2.0", "MB", "12.0", "MB", "16.0", "MB"]
    assert out[5].split() == ["ZeRO-3", "0.5", "MB", "0.5", "MB", "3.0", "MB", "4.0", "MB"]
