"""GM reuse end to end (issue 14 item 6): with activations sharing device memory, models give
bit-identical outputs and cycles to the layout without reuse, race-free, even when the arena starts
full of NaN bytes (no kernel reads GM bytes it did not write first); the CLI flag, its ATC
spelling, the .om record and the device memory lines of cann-compile and cann-run --info."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

import cann
from cann.codegen.om import read_om
from cann.sim import executor

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from conftest import fire_net  # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "torch"


class _NanArena:
    """numpy for cann.sim.executor, whose GM arena (the one uint8 vector it allocates) starts all
    0xFF bytes: NaN in float16 and float32, -1 in the integers."""

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def zeros(shape, dtype=float, *args, **kw):
        if dtype is np.uint8 and isinstance(shape, int):
            return np.full(shape, 0xFF, np.uint8)
        return np.zeros(shape, dtype, *args, **kw)


def _same_with_and_without_reuse(model, inputs, precision_mode, monkeypatch):
    off = cann.compile(model, precision_mode=precision_mode, gm_reuse="off")
    on = cann.compile(model, precision_mode=precision_mode)
    assert not off.om.gm_reuse and on.om.gm_reuse
    assert on.om.gm_size < off.om.gm_size and on.om.gm_size_no_reuse == off.om.gm_size
    assert on.om.weights == off.om.weights and on.om.kernels == off.om.kernels
    a = off.run(inputs)
    with monkeypatch.context() as m:
        m.setattr(executor, "np", _NanArena())
        b = on.run(inputs)  # sim_checks="error": a race is an error
    for k in a:
        assert a[k].tobytes() == b[k].tobytes(), k
    assert on.last_run.cycles == off.last_run.cycles
    return a


def test_fire_net_is_bit_identical_with_reuse_on_a_nan_arena(monkeypatch):
    model = fire_net()
    x = {"data": np.random.default_rng(0).standard_normal((1, 3, 16, 16), dtype=np.float32)}
    for pm in ("force_fp16", "must_keep_origin_dtype"):
        _same_with_and_without_reuse(model, x, pm, monkeypatch)


@pytest.mark.parametrize("name", ["mobilenet_v2", "swin_block", "gpt_block", "fpn"])
def test_exported_models_are_bit_identical_with_reuse_on_a_nan_arena(name, monkeypatch):
    path = FIXTURES / f"{name}.onnx"
    graph = onnx.load(path, load_external_data=False).graph
    data = np.load(FIXTURES / f"{name}.npz")
    out = _same_with_and_without_reuse(str(path), {i.name: data[i.name] for i in graph.input}, "force_fp16",
                                       monkeypatch)
    for o in graph.output:  # and still onnxruntime's values
        r = data[o.name].astype(np.float64)
        assert np.linalg.norm(out[o.name].astype(np.float64) - r) <= 1e-2 * np.linalg.norm(r)


def _tool(tool, *args):
    return subprocess.run([sys.executable, "-m", f"cann.tools.{tool}", *map(str, args)], capture_output=True,
                          text=True)


def test_cli_flag_is_recorded_and_printed(fire_onnx, tmp_path):
    runs = {}
    for name, flags in (("on", ()), ("off", ("--gm-reuse", "off")), ("atc0", ("--disable_reuse_memory", "0")),
                        ("atc1", ("--disable_reuse_memory=1",)), ("both", ("--gm-reuse=OFF", "--disable_reuse_memory=1"))):
        r = _tool("cann_compile", fire_onnx, "-o", tmp_path / f"{name}.om", *flags)
        assert r.returncode == 0, r.stderr
        runs[name] = (r.stdout.splitlines()[-1], (tmp_path / f"{name}.om").read_bytes())
    on, off = read_om(tmp_path / "on.om"), read_om(tmp_path / "off.om")
    assert on.gm_reuse and not off.gm_reuse and on.gm_size_no_reuse == off.gm_size > on.gm_size
    # the same flags give the same bytes; ATC's spelling is the same option
    assert runs["atc0"][1] == runs["on"][1] and runs["atc1"][1] == runs["both"][1] == runs["off"][1]
    w = len(on.weights)
    assert runs["on"][0] == f"{tmp_path / 'on.om'}: device memory {on.gm_size} bytes: weights {w}, activations " \
                            f"{on.gm_size - w} (reuse on; {off.gm_size - w} without)"
    assert runs["off"][0] == f"{tmp_path / 'off.om'}: device memory {off.gm_size} bytes: weights {w}, activations " \
                             f"{off.gm_size - w} (reuse off)"
    r = _tool("cann_run", tmp_path / "on.om", "--info")
    assert r.returncode == 0 and f"gm_size: {on.gm_size}\n" + runs["on"][0].split(": ", 1)[1] + "\n" in r.stdout


@pytest.mark.parametrize("flags, message", [
    (("--gm-reuse", "maybe"), "error: --gm-reuse: expected on or off, got 'maybe'"),
    (("--disable_reuse_memory", "2"), "error: --disable_reuse_memory: expected 0 (memory reuse, the default) or 1 "
                                      "(none), got '2'"),
    (("--gm-reuse", "on", "--disable_reuse_memory", "1"), "error: --gm-reuse: 'on' contradicts --disable_reuse_memory 1"),
])
def test_cli_flag_errors(fire_onnx, tmp_path, flags, message):
    r = _tool("cann_compile", fire_onnx, "-o", tmp_path / "x.om", *flags)
    assert r.returncode == 2 and r.stderr.splitlines() == [message]
    assert not (tmp_path / "x.om").exists()


def test_api_option_error():
    with pytest.raises(cann.CannError) as e:
        cann.compile("missing.onnx", gm_reuse="sometimes")
    assert e.value.lines() == ["error: --gm-reuse: expected on or off, got 'sometimes'"]
