"""Issue 15 Done-when: the partitioned FCN8s-style fixture (test/fixtures/torch/fcn8s.onnx: VGG-like encoder,
score layers on two skips, ConvTranspose upsampling, crops) gives the unpartitioned cann model's output on
grids 1x2, 2x1, 2x2 and 1x4 (fp32: rel L2 <= 1e-6, the unpartitioned one within 1e-4 of onnxruntime; fp16
within 1e-2 of onnxruntime); real MPI runs through cann-run with 2 and 4 ranks (mpiexec from the venv, with
a timeout); --device-memory: the unpartitioned compile fails, the 2x2 one fits and runs."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import cann
from cann.spatial.compile import compile_spatial
from cann.spatial.run import run_emulated, step_time
from cann.testing import run_mpi

pytestmark = pytest.mark.slow

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "torch"
MODEL = str(FIXTURE / "fcn8s.onnx")


def rel(a, b):
    return float(np.linalg.norm(a.astype(np.float64) - b) / np.linalg.norm(b))


@pytest.fixture(scope="module")
def data():
    z = np.load(FIXTURE / "fcn8s.npz")
    return z["image"], z["score"]


_BUNDLES = {}


def bundle_for(grid, precision_mode):
    """One compile per (grid, precision) for the whole module (compiles dominate this file's time)."""
    key = (grid, precision_mode)
    if key not in _BUNDLES:
        _BUNDLES[key] = compile_spatial(MODEL, grid, precision_mode=precision_mode)
    return _BUNDLES[key]


@pytest.fixture(scope="module")
def single_fp32(data):
    model = cann.compile(MODEL, precision_mode="must_keep_origin_dtype")
    return model, model.run({"image": data[0]})["score"]


@pytest.mark.parametrize("grid", ["1x2", "2x1", "2x2", "1x4"])
def test_fp32_equals_unpartitioned(grid, data, single_fp32):
    image, ort = data
    model, single = single_fp32
    assert rel(single, ort) <= 1e-4
    bundle = bundle_for(grid, "must_keep_origin_dtype")
    out, stats = run_emulated(bundle, {"image": image})
    assert out["score"].shape == ort.shape
    assert rel(out["score"], single) <= 1e-6
    R, C = bundle.grid
    assert len(stats) == R * C and all(any(k == "exchange" for k, _, _ in s) for s in stats)
    t = step_time(bundle, stats)
    assert t["halo_bytes_step"] > 0 and 0 < t["step"] and all(h <= e for h, e in zip(t["hidden"], t["exchange"]))


def test_fp16_2x2_within_onnxruntime_tolerance(data):
    image, ort = data
    bundle = bundle_for("2x2", "force_fp16")
    out, _ = run_emulated(bundle, {"image": image})
    assert rel(out["score"], ort) <= 1e-2
    single = cann.compile(MODEL, precision_mode="force_fp16").run({"image": image})["score"]
    assert rel(out["score"], single) <= 1e-3


def cli(tool, *args, cwd):
    return subprocess.run([sys.executable, "-m", f"cann.tools.{tool}", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd)


@pytest.mark.parametrize("grid, ranks", [("1x2", 2), ("2x2", 4)])
def test_mpi_cann_run(grid, ranks, data, single_fp32, tmp_path):
    """cann-compile --spatial-split (1x2; the 2x2 bundle of the equivalence test saved), then mpiexec -n R*C
    cann-run with memory-mapped .npy input and output."""
    image, _ = data
    np.save(tmp_path / "x.npy", image)
    if grid == "1x2":
        r = cli("cann_compile", MODEL, "--spatial-split", grid, "--precision_mode", "must_keep_origin_dtype",
                "-o", "big.om", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert f"big.om: {grid} devices" in r.stdout
    else:
        bundle_for(grid, "must_keep_origin_dtype").save(tmp_path / "big.om")
    run = run_mpi(ranks, [sys.executable, "-m", "cann.tools.cann_run", tmp_path / "big.om", "--input",
                          tmp_path / "x.npy", "--output", tmp_path / "y.npy"], timeout=600, cwd=tmp_path)
    assert f"spatial {grid}: simulated step" in run.stdout, run.stdout + run.stderr
    y = np.load(tmp_path / "y.npy")
    assert rel(y, single_fp32[1]) <= 1e-6


def test_device_memory_unpartitioned_fails_2x2_fits(data, tmp_path):
    image, ort = data
    single = cann.compile(MODEL, precision_mode="force_fp16")
    gm = single.om.gm_size
    bundle = bundle_for("2x2", "force_fp16")
    peaks = [r["peak_bytes"] for r in bundle.manifest["ranks"]]
    capacity = max(peaks)
    assert capacity < gm  # the image does not fit one device with this capacity, each quarter does
    r = cli("cann_compile", MODEL, "--device-memory", capacity, "-o", "m.om", cwd=tmp_path)
    assert r.returncode == 2 and f"needs {gm} bytes of device memory" in r.stderr
    assert not (tmp_path / "m.om").exists()
    fits = compile_spatial(MODEL, "2x2", precision_mode="force_fp16", device_memory=capacity)
    assert fits.to_bytes() == bundle.to_bytes()  # deterministic, and every device's peak fits
    out, _ = run_emulated(fits, {"image": image})
    assert rel(out["score"], ort) <= 1e-2
    with pytest.raises(cann.CannError, match=r"device 0 \(0, 0\): needs \d+ bytes of device memory"):
        compile_spatial(MODEL, "2x2", precision_mode="force_fp16", device_memory=min(peaks) - 1)
