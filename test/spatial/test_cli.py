"""cann-compile --spatial-split / --spatial-depth and cann-run on a bundle: flags, errors, .npy output."""

import subprocess
import sys

import numpy as np
import onnx
import pytest

from cann.spatial.bundle import is_bundle, load_bundle
from test_device_memory import conv_model  # noqa: E402  (test/spatial is on sys.path under pytest's rootdir)


def run(tool, *args, cwd):
    return subprocess.run([sys.executable, "-m", f"cann.tools.{tool}", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd)


@pytest.fixture
def model_dir(tmp_path):
    onnx.save(conv_model(), tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32))
    return tmp_path


def test_output_npy_for_a_single_output_model(model_dir):
    assert run("cann_compile", "m.onnx", "-o", "m.om", cwd=model_dir).returncode == 0
    r = run("cann_run", "m.om", "--input", "x.npy", "--output", "y.npy", cwd=model_dir)
    assert r.returncode == 0, r.stderr
    r = run("cann_run", "m.om", "--input", "x.npy", "--output", "y.npz", cwd=model_dir)
    assert r.returncode == 0, r.stderr
    assert np.array_equal(np.load(model_dir / "y.npy"), np.load(model_dir / "y.npz")["y"])


def test_spatial_bundle_written(model_dir):
    r = run("cann_compile", "m.onnx", "--spatial-split", "1x2", "-o", "big", cwd=model_dir)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("big.om: 1x2 devices, 2 segments, 1 halo exchanges, ")
    assert is_bundle(model_dir / "big.om") and not is_bundle(model_dir / "m.onnx")
    b = load_bundle(model_dir / "big.om")
    assert b.grid == (1, 2) and b.manifest["exchanges"][0]["need"] == [[0, 16, 0, 9], [0, 16, 7, 16]]
    again = run("cann_compile", "m.onnx", "--spatial-split", "1x2", "-o", "again.om", cwd=model_dir)
    assert again.returncode == 0 and (model_dir / "again.om").read_bytes() == (model_dir / "big.om").read_bytes()


def test_spatial_emit_graph(model_dir):
    r = run("cann_compile", "m.onnx", "--spatial-split", "2x1", "--emit", "graph", "-o", "-", cwd=model_dir)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("graph.halo_exchange") == 2 and "func.func @main_r1_c0" in r.stdout


@pytest.mark.parametrize("args, message", [
    (["--spatial-split", "2by2", "-o", "b.om"],
     "error: --spatial-split: '2by2': the device grid is ROWSxCOLUMNS with both at least 1, e.g. 2x2"),
    (["--spatial-depth", "2", "-o", "b.om"], "error: --spatial-depth: applies to --spatial-split only"),
    (["--spatial-split", "2x2", "--spatial-depth", "0", "-o", "b.om"],
     "error: --spatial-depth: '0': a whole number of window layers per exchange, at least 1"),
    (["--spatial-split", "2x2", "--emit", "tile", "-o", "-"],
     "error: --emit: tile: with --spatial-split only the graph IR (--emit graph) is one module"),
    (["--spatial-split", "1x32", "-o", "b.om"], "error: input 'x': image 16x16 cannot be split over a 1x32 grid"),
])
def test_spatial_flag_errors(model_dir, args, message):
    r = run("cann_compile", "m.onnx", *args, cwd=model_dir)
    assert r.returncode == 2 and r.stderr.splitlines() == [message]
    assert not (model_dir / "b.om").exists()


def test_cann_run_bundle_flag_errors(model_dir):
    assert run("cann_compile", "m.onnx", "--spatial-split", "1x2", "-o", "big.om", cwd=model_dir).returncode == 0
    r = run("cann_run", "big.om", "--input", "x.npy", "--compare", "m.onnx", cwd=model_dir)
    assert r.returncode == 2 and r.stderr.splitlines() == [
        "error: --compare: does not apply to big.om, a spatially partitioned model"]
    r = run("cann_run", "big.om", "--input", "x.npy", "--output", "y.npz", cwd=model_dir)
    assert r.returncode == 2 and r.stderr.splitlines() == [
        "error: y.npz: a spatially partitioned model writes its single output to a .npy file"]
    r = run("cann_run", "big.om", cwd=model_dir)
    assert r.returncode == 2 and "no .npy for model input(s): x" in r.stderr
