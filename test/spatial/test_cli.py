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


def test_spatial_split_honours_gm_reuse(tmp_path):
    """--gm-reuse off (or ATC's --disable_reuse_memory 1) plans every segment without reuse: recorded in each
    segment's .om and a larger peak; before, --spatial-split ignored the flag (the same bytes either way)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    ws = [numpy_helper.from_array(rng.standard_normal((8, c, 3, 3)).astype(np.float32), f"w{i}")
          for i, c in enumerate((3, 8, 8))]
    nodes = [n for i in range(3) for n in (
        helper.make_node("Conv", ["x" if i == 0 else f"r{i - 1}", f"w{i}"], [f"c{i}"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", [f"c{i}"], [f"r{i}" if i < 2 else "y"]))]
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 16, 16])], initializer=ws)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), tmp_path / "c.onnx")
    peaks = {}
    for name, flags in (("on", []), ("off", ["--gm-reuse", "off"]), ("atc", ["--disable_reuse_memory", "1"])):
        r = run("cann_compile", "c.onnx", "--spatial-split", "1x2", "--spatial-depth", "3", *flags, "-o", f"{name}.om",
                cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        b = load_bundle(tmp_path / f"{name}.om")
        assert {m.gm_reuse for m in b.models} == {name == "on"}
        peaks[name] = max(rk["peak_bytes"] for rk in b.manifest["ranks"])
    assert (tmp_path / "off.om").read_bytes() == (tmp_path / "atc.om").read_bytes()
    assert peaks["off"] > peaks["on"], peaks


def test_cann_run_help_says_how_to_run_a_bundle(tmp_path):
    r = run("cann_run", "--help", cwd=tmp_path)
    assert r.returncode == 0
    text = " ".join(r.stdout.split())
    assert "--spatial-split RxC runs one device per MPI rank: mpiexec -n R*C cann-run MODEL.om --input x.npy" in text
