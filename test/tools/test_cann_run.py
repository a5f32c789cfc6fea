"""cann-run: input handling, summaries, --output, --compare, and one-line errors with exit 2.

In-process tests use a fake `cann.load` (a model whose `run` is onnxruntime plus controlled noise)
built on the real .om reader; tests marked `# needs the compiler` compile and simulate for real."""

import os
import re
import subprocess
import sys
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import onnxruntime as ort
import pytest

import cann
from cann.codegen.om import IoTensor, Kernel, Launch, OfflineModel, read_om, write_om
from cann.hw import isa
from cann.tools import cann_run as mod


def fake_om(precision_mode="force_fp16") -> OfflineModel:
    return OfflineModel(
        "Ascend910", precision_mode,
        inputs=(IoTensor("data", (1, 3, 16, 16), "float32", 0),),
        outputs=(IoTensor("prob", (1, 10), "float32", 3072), IoTensor("logits", (1, 10), "float32", 3112)),
        gm_size=4096, weights_offset=3200, weights=b"\1" * 64,
        kernels=(Kernel("net", 1, 2, isa.encode([isa.make("pipe_barrier", pipe=6)])),), launches=(Launch(0, (0, 3072)),),
    )


class FakeModel:
    noise = 0.0

    def __init__(self, om: OfflineModel, onnx_path):
        self.inputs, self.outputs, self.precision_mode = om.inputs, om.outputs, om.precision_mode
        self.sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
        self.last_run = None
        self.seen = None

    def run(self, inputs, **kw):
        self.seen, self.kw = inputs, kw
        prob, logits = self.sess.run(["prob", "logits"], inputs)
        self.last_run = SimpleNamespace(cycles=12345, instructions=678)
        return {"prob": prob * (1 + self.noise), "logits": logits * (1 + self.noise)}


@pytest.fixture
def fake(tmp_path, fire_onnx, monkeypatch):
    path = tmp_path / "fire.om"
    write_om(fake_om(), path)
    state = SimpleNamespace(path=path, onnx=fire_onnx, model=None)

    def load(p):
        state.model = FakeModel(read_om(p), fire_onnx)
        return state.model

    monkeypatch.setattr(cann, "load", load, raising=False)
    return state


def run(*args):
    with pytest.raises(SystemExit) as e:
        mod.main([str(a) for a in args])
    return e.value.code


def test_seeded_inputs_and_summary(fake, capsys):
    assert run(fake.path) == 0
    out, err = capsys.readouterr()
    assert err == "note: no --input given: generated inputs (seed 0): data: standard normal float32\n"
    lines = out.splitlines()
    assert re.fullmatch(r"prob: shape=\(1, 10\) dtype=float32 min=\S+ max=\S+ mean=0.1 argmax=\[\d\]", lines[0])
    assert lines[1].startswith("logits: shape=(1, 10) dtype=float32 ")
    assert lines[2] == "cycles: 12345  instructions: 678"
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16), dtype=np.float32)
    np.testing.assert_array_equal(fake.model.seen["data"], x)
    assert run(fake.path, "--seed", 7) == 0
    assert "(seed 7)" in capsys.readouterr().err
    assert not np.array_equal(fake.model.seen["data"], x)


def test_input_forms(fake, tmp_path, capsys):
    x = np.random.default_rng(3).standard_normal((1, 3, 16, 16)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.savez(tmp_path / "in.npz", data=x)
    for spec in (f"data={tmp_path / 'x.npy'}", tmp_path / "x.npy", tmp_path / "in.npz"):
        assert run(fake.path, "--input", spec) == 0
        np.testing.assert_array_equal(fake.model.seen["data"], x)
    assert "note:" not in capsys.readouterr().err


def test_output_npz(fake, tmp_path):
    out = tmp_path / "out.npz"
    assert run(fake.path, "--output", out) == 0
    with np.load(out) as z:
        assert sorted(z.files) == ["logits", "prob"]
        assert z["prob"].dtype == np.float32 and z["prob"].shape == (1, 10)
    assert sorted(os.listdir(tmp_path)) == ["fire.om", "fire.onnx", "out.npz"]


def test_output_unwritable(fake, tmp_path, capsys):
    assert run(fake.path, "--output", tmp_path / "no" / "out.npz") == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: {tmp_path / 'no' / 'out.npz'}: cannot write: directory {tmp_path / 'no'} does not exist"]
    assert fake.model is None  # checked before the model is loaded, let alone simulated


def test_output_of_another_suffix_is_refused_before_the_run(fake, tmp_path, capsys):
    # was: `--output o.txt` silently wrote an .npz archive named o.txt
    assert run(fake.path, "--output", tmp_path / "o.txt") == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: {tmp_path / 'o.txt'}: --output writes .npz (every output, by name) or .npy (a single output): "
        "name the file OUT.npz or OUT.npy"]
    assert fake.model is None and not (tmp_path / "o.txt").exists()


def test_compare_within_tolerance(fake, capsys):
    assert run(fake.path, "--compare", fake.onnx) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2] == "prob: max_abs_err=0.000e+00 rel_l2_err=0.000e+00"
    assert lines[3] == "logits: max_abs_err=0.000e+00 rel_l2_err=0.000e+00"
    assert lines[4].startswith("cycles: ")


def test_compare_beyond_tolerance_exits_1(fake, capsys, monkeypatch):
    monkeypatch.setattr(FakeModel, "noise", 0.05)
    assert run(fake.path, "--compare", fake.onnx) == 1
    out, err = capsys.readouterr()
    m = re.search(r"^prob: max_abs_err=(\S+) rel_l2_err=(\S+)$", out, re.M)
    assert float(m.group(1)) > 0 and abs(float(m.group(2)) - 0.05) < 1e-3
    assert "more than rel_l2_err 0.01" in err
    # a looser tolerance accepts it
    assert run(fake.path, "--compare", fake.onnx, "--tolerance", "10") == 0


def test_compare_default_tolerance_depends_on_precision(tmp_path, fire_onnx, monkeypatch, capsys):
    path = tmp_path / "fp32.om"
    write_om(fake_om("force_fp32"), path)
    monkeypatch.setattr(FakeModel, "noise", 1e-3)  # rel_l2 = 1e-3: fine for fp16, not for fp32
    monkeypatch.setattr(cann, "load", lambda p: FakeModel(read_om(p), fire_onnx), raising=False)
    assert run(path, "--compare", fire_onnx) == 1
    write_om(fake_om("force_fp16"), path)
    assert run(path, "--compare", fire_onnx) == 0


def test_errors_helper():
    y, r = np.array([1.0, 2.0, 2.0]), np.array([1.0, 2.0, 4.0])
    assert mod.errors(y, r) == (2.0, 2.0 / np.sqrt(21.0))
    assert mod.errors(np.ones(2), np.zeros(2)) == (1.0, np.sqrt(2) / 1e-30)


def test_shape_mismatch(fake, tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 8, 8), np.float32))
    assert run(fake.path, "--input", f"data={tmp_path / 'x.npy'}") == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: data: expected shape (1, 3, 16, 16) float32, got shape (1, 3, 8, 8) float32"]


def test_dtype_mismatch(fake, tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 16, 16), np.int32))
    assert run(fake.path, "--input", tmp_path / "x.npy") == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: data: expected shape (1, 3, 16, 16) float32, got shape (1, 3, 16, 16) int32"]


@pytest.mark.parametrize("given", [np.float64, np.float16, np.int64, np.bool_])
def test_input_dtype_must_be_the_declared_one(fake, tmp_path, capsys, given):
    # as onnxruntime and Model.run: a float64 array is not silently cast (a float16 one never was)
    np.save(tmp_path / "x.npy", np.ones((1, 3, 16, 16), given))
    assert run(fake.path, "--input", tmp_path / "x.npy") == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: data: expected shape (1, 3, 16, 16) float32, got shape (1, 3, 16, 16) {np.dtype(given)}"]
    assert fake.model.seen is None


def test_bad_input_specs(fake, tmp_path, capsys):
    np.savez(tmp_path / "wrong.npz", image=np.zeros((1, 3, 16, 16), np.float32))
    (tmp_path / "junk.npy").write_bytes(b"not numpy")
    cases = [
        (["--input", tmp_path / "missing.npy"], f"error: {tmp_path / 'missing.npy'}: no such file"),
        (["--input", tmp_path / "wrong.npz"],
         f"error: {tmp_path / 'wrong.npz'}: 'image' is not an input of the model (inputs: data)"),
        (["--input", f"data={tmp_path / 'missing.npy'}"], f"error: {tmp_path / 'missing.npy'}: no such file"),
    ]
    for args, line in cases:
        assert run(fake.path, *args) == 2
        assert capsys.readouterr().err.splitlines() == [line]
    assert run(fake.path, "--input", tmp_path / "junk.npy") == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: {tmp_path / 'junk.npy'}: not a .npy or .npz file (it starts with neither the NumPy nor the zip magic)"]
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    assert run(fake.path, "--input", tmp_path / "obj.npy") == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: {tmp_path / 'obj.npy'}: holds Python objects (a pickled array): save numeric arrays with np.save"]
    np.savez(tmp_path / "obj.npz", data=np.array([{"a": 1}], dtype=object))
    assert run(fake.path, "--input", tmp_path / "obj.npz") == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: {tmp_path / 'obj.npz'}: member 'data': holds Python objects (a pickled array): save numeric "
        f"arrays with np.save"]
    # a header numpy's tokenizer chokes on (found by test_fuzz.py: it was an internal error)
    h = b"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, "
    h += b" " * (53 - len(h)) + b"\n"
    (tmp_path / "tok.npy").write_bytes(b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h + bytes(16))
    assert run(fake.path, "--input", tmp_path / "tok.npy") == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: {tmp_path / 'tok.npy'}: cannot read as .npy/.npz: TokenError: ('EOF in multi-line statement', (2, 0))"]
    (tmp_path / "cut.npy").write_bytes((tmp_path / "obj.npy").read_bytes()[:20])
    assert run(fake.path, "--input", tmp_path / "cut.npy") == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {tmp_path / 'cut.npy'}: cannot read as .npy/.npz: "), err


def test_compare_bad_reference(fake, tmp_path, capsys):
    (tmp_path / "bad.onnx").write_bytes(b"garbage")
    assert run(fake.path, "--compare", tmp_path / "bad.onnx") == 2
    assert fake.model.seen is None  # checked before the (long) simulation
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {tmp_path / 'bad.onnx'}: onnxruntime cannot load the model: ")
    assert run(fake.path, "--compare", tmp_path / "none.onnx") == 2
    assert capsys.readouterr().err.splitlines() == [f"error: {tmp_path / 'none.onnx'}: no such file"]
    assert fake.model.seen is None


def test_corrupt_om_in_process(fake, tmp_path, capsys):
    data = fake.path.read_bytes()
    bad = tmp_path / "bad.om"
    for cut in (0, 10, 100, len(data) // 2, len(data) - 1):
        bad.write_bytes(data[:cut])
        assert run(bad) == 2
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and err[0].startswith(f"error: {bad}: "), err
    for i in (0, 9, 20, 40, 120, len(data) // 2, len(data) - 5):
        b = bytearray(data)
        b[i] ^= 0x10
        bad.write_bytes(bytes(b))
        assert run(bad) == 2
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and err[0].startswith(f"error: {bad}: "), err


@pytest.mark.parametrize("args, line", [
    (["--seed", "x"], "error: --seed: 'x' is not a valid integer."),
    (["--seed", "-1"], "error: --seed: must be >= 0, got -1"),
    (["--tolerance", "-1"], "error: --tolerance: must be a finite number >= 0, got -1.0"),
    (["--tolerance", "nan"], "error: --tolerance: must be a finite number >= 0, got nan"),
    (["--tolerance", "inf"], "error: --tolerance: must be a finite number >= 0, got inf"),
    (["--max-instructions", "0"], "error: --max-instructions: must be >= 1, got 0"),
])
def test_bad_flag(fake, capsys, args, line):
    assert run(fake.path, *args) == 2
    assert capsys.readouterr().err.splitlines() == [line]
    assert fake.model is None or fake.model.seen is None


def test_generated_inputs_say_what_each_input_got(tmp_path, fire_onnx, monkeypatch, capsys):
    om = replace(fake_om(), inputs=(IoTensor("data", (1, 3, 16, 16), "float32", 0), IoTensor("idx", (2,), "int64", 3072),
                                    IoTensor("mask", (2,), "bool", 3088)),
                 outputs=(IoTensor("prob", (1, 10), "float32", 3100),), launches=(Launch(0, (0, 3100)),))
    write_om(om, tmp_path / "m.om")
    seen = {}

    class Model:
        inputs, outputs, last_run = om.inputs, om.outputs, None

        def run(self, inputs, **kw):
            seen.update(inputs)
            return {"prob": np.zeros((1, 10), np.float32)}

    monkeypatch.setattr(cann, "load", lambda p: Model(), raising=False)
    assert run(tmp_path / "m.om") == 0
    assert capsys.readouterr().err.splitlines() == [
        "note: no --input given: generated inputs (seed 0): data: standard normal float32; "
        "idx: integers in [0, 10) int64; mask: fair-coin bool"]
    assert seen["idx"].dtype == np.int64 and set(seen["idx"].tolist()) <= set(range(10))
    assert seen["mask"].dtype == np.bool_


# -- with the real compiler, runtime and simulator --------------------------------------------


def cli(tool, *args):
    return subprocess.run([sys.executable, "-m", f"cann.tools.{tool}", *map(str, args)], capture_output=True, text=True)


@pytest.fixture
def compiled(fire_onnx, tmp_path):
    om = tmp_path / "fire.om"
    r = cli("cann_compile", fire_onnx, "-o", om)
    assert r.returncode == 0, r.stderr
    return om


def test_run_real(compiled, fire_onnx, tmp_path):  # needs the compiler
    r = cli("cann_run", compiled, "--compare", fire_onnx, "--output", tmp_path / "out.npz")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stderr.startswith("note: no --input given: generated inputs (seed 0): ")
    lines = r.stdout.splitlines()
    assert lines[0].startswith("prob: shape=(1, 10) dtype=float32 ")
    assert re.fullmatch(r"prob: max_abs_err=\S+ rel_l2_err=\S+", lines[2])
    assert re.fullmatch(r"logits: max_abs_err=\S+ rel_l2_err=\S+", lines[3])
    assert re.fullmatch(r"cycles: \d+  instructions: \d+", lines[4])
    with np.load(tmp_path / "out.npz") as z:
        assert sorted(z.files) == ["logits", "prob"]
    # deterministic cycle counts
    r2 = cli("cann_run", compiled)
    assert r2.stdout.splitlines()[-1] == lines[4]


@pytest.mark.parametrize("option", ["--compare", "--output", "--input"])
def test_timing_only_refuses_value_options(fake, tmp_path, capsys, option):
    value = {"--compare": fake.onnx, "--output": tmp_path / "o.npz", "--input": tmp_path / "x.npy"}[option]
    assert run(fake.path, "--timing-only", option, value) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: --timing-only: computes no values: it cannot be combined with {option}"]
    assert fake.model is None and sorted(os.listdir(tmp_path)) == ["fire.om", "fire.onnx"]


def test_timing_only_real(compiled, tmp_path, capsys):  # needs the compiler
    assert run(compiled, "--profile-csv", tmp_path / "full.csv", "--trace", tmp_path / "full.json") == 0
    full = capsys.readouterr().out.splitlines()
    assert run(compiled, "--timing-only", "--profile-csv", tmp_path / "timed.csv", "--trace", tmp_path / "timed.json") == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert err == ""  # no generated inputs: nothing is computed
    assert lines[0] == full[-1] and re.fullmatch(r"cycles: \d+  instructions: \d+", lines[0])  # the full run's
    assert lines[1].startswith("launch ") and lines[-2].startswith("total: ")  # the profile, always
    from cann.codegen.om import read_om

    om = read_om(compiled)  # then the device memory: weights and activations apart
    assert lines[-1] == f"device memory {om.gm_size} bytes: weights {len(om.weights)}, activations " \
                        f"{om.gm_size - len(om.weights)} (reuse on; {om.activation_bytes_no_reuse} without)"
    assert not any(ln.startswith(("prob:", "logits:")) for ln in lines)
    for ext in ("csv", "json"):
        assert (tmp_path / f"timed.{ext}").read_text() == (tmp_path / f"full.{ext}").read_text()
    assert sorted(os.listdir(tmp_path)) == ["fire.om", "fire.onnx", "full.csv", "full.json", "timed.csv", "timed.json"]


def test_run_real_profile_and_csv_report_both_bounds(compiled, tmp_path):  # needs the compiler
    csv_path = tmp_path / "p.csv"
    r = cli("cann_run", compiled, "--profile", "--profile-csv", csv_path)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    header = next(ln for ln in lines if ln.startswith("launch "))
    assert header.split()[-8:] == ["compiled_bound_cycles", "compiled_bound_pct", "bound", "model_macs",
                                   "executed_macs", "compulsory_bytes", "ideal_cycles", "ideal_pct"]
    assert "lower_bound" not in r.stdout and "roofline" not in r.stdout
    total = next(ln for ln in lines if ln.startswith("total: "))
    fields = dict(kv.split("=") for kv in total.split()[1:])
    # fire_net's Conv MACs, N*Cout*Hout*Wout*Cin*kh*kw: conv1, squeeze, expand1x1, expand3x3, conv10
    assert int(fields["model_macs"]) == 27648 + 8192 + 8192 + 73728 + 20480
    import csv

    rows = list(csv.DictReader(csv_path.open()))
    launches, tot = rows[:-1], rows[-1]
    assert tot["launch"] == "total" and int(tot["model_macs"]) == 138240
    assert sorted(int(x["model_macs"]) for x in launches if int(x["model_macs"])) == [8192, 8192, 20480, 27648,
                                                                                        73728]
    for x in launches:
        assert int(x["executed_macs"]) >= int(x["model_macs"])
        assert float(x["ideal_pct"]) == pytest.approx(100 * int(x["ideal_cycles"]) / int(x["cycles"]), rel=1e-5)
        assert float(x["ideal_pct"]) <= 100
    ideal, cycles = sum(int(x["ideal_cycles"]) for x in launches), sum(int(x["cycles"]) for x in launches)
    assert int(tot["ideal_cycles"]) == ideal and int(tot["cycles"]) == cycles == int(fields["cycles"])
    assert float(tot["ideal_pct"]) == pytest.approx(100 * ideal / cycles, rel=1e-5)
    assert float(fields["ideal_pct"]) == pytest.approx(100 * ideal / cycles, abs=1e-3)


def test_run_real_truncated_and_flipped(compiled, tmp_path):  # needs the compiler
    data = compiled.read_bytes()
    bad = tmp_path / "bad.om"
    for cut in (5, 64, len(data) // 3, len(data) - 1):
        bad.write_bytes(data[:cut])
        r = cli("cann_run", bad)
        assert r.returncode == 2 and "Traceback" not in r.stderr
        assert r.stderr.splitlines()[-1].startswith(f"error: {bad}: ")
    for i in (3, 8, 50, len(data) // 2, len(data) - 3):
        b = bytearray(data)
        b[i] ^= 0x01
        bad.write_bytes(bytes(b))
        r = cli("cann_run", bad)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith(f"error: {bad}: ")


def test_run_real_shape_mismatch(compiled, tmp_path):  # needs the compiler
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 32, 32), np.float32))
    r = cli("cann_run", compiled, "--input", f"data={tmp_path / 'x.npy'}", "--output", tmp_path / "o.npz")
    assert r.returncode == 2
    assert r.stderr.splitlines() == ["error: data: expected shape (1, 3, 16, 16) float32, got shape (1, 3, 32, 32) float32"]
    assert not (tmp_path / "o.npz").exists()


def test_run_real_missing_om(tmp_path):  # needs the runtime (cann.load)
    r = cli("cann_run", tmp_path / "none.om")
    assert r.returncode == 2
    assert r.stderr.splitlines() == [f"error: {tmp_path / 'none.om'}: cannot read: No such file or directory"]


@pytest.mark.slow
def test_squeezenet_light_compile_run_compare(tmp_path):  # needs the compiler (and cann.testing)
    import onnx

    from cann.testing import test_model

    model = tmp_path / "squeezenet.onnx"
    onnx.save(test_model("squeezenet"), model)
    r = cli("cann_compile", model, "-o", tmp_path / "squeezenet.om")
    assert r.returncode == 0, r.stderr
    r = cli("cann_run", tmp_path / "squeezenet.om", "--compare", model)
    assert r.returncode == 0, r.stdout + r.stderr
    compare = [ln for ln in r.stdout.splitlines() if "rel_l2_err=" in ln]
    assert len(compare) == 2  # the softmax output and the exposed logits
    for ln in compare:
        assert float(ln.rsplit("=", 1)[1]) <= 1e-2


def test_unknown_input_name_and_no_output_left_on_compare_error(tmp_path):  # needs the compiler
    import onnx
    from onnx import TensorProto, helper

    import cann

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    cann.compile(model).save(tmp_path / "m.om")
    np.save(tmp_path / "x.npy", np.ones((1, 4), np.float32))
    r = cli("cann_run", tmp_path / "m.om", "--input", f"nosuch={tmp_path / 'x.npy'}")
    assert r.returncode == 2
    assert r.stderr.splitlines()[-1] == f"error: nosuch={tmp_path / 'x.npy'}: 'nosuch' is not an input of the model (inputs: x)"
    other = helper.make_graph([helper.make_node("Relu", ["z"], ["y"], name="r")], "g",
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    onnx.save(helper.make_model(other, opset_imports=[helper.make_opsetid("", 13)]), tmp_path / "other.onnx")
    r = cli("cann_run", tmp_path / "m.om", "--input", str(tmp_path / "x.npy"), "--compare", tmp_path / "other.onnx",
                 "--output", tmp_path / "out.npz")
    assert r.returncode == 2 and not (tmp_path / "out.npz").exists()


def test_bf16_model_runs_from_saved_inputs_only(tmp_path):
    # np.save of a bfloat16 array loads back as raw 2-byte records (viewed as bf16); float32 is refused
    import ml_dtypes
    import onnx
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [2, 3])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), tmp_path / "bf.onnx")
    om = tmp_path / "bf.om"
    r = cli("cann_compile", tmp_path / "bf.onnx", "-o", om, "--precision_mode", "must_keep_origin_dtype")
    assert r.returncode == 0, r.stderr
    x = np.array([[1e5, -2.0, 0.5], [-1e-7, 3.0, -4.0]], np.float32)
    np.save(tmp_path / "x_bf.npy", x.astype(ml_dtypes.bfloat16))
    np.save(tmp_path / "x_f32.npy", x)
    r = cli("cann_run", om, "--input", f"x={tmp_path / 'x_bf.npy'}", "--output", tmp_path / "out.npz")
    assert r.returncode == 0, r.stderr
    y = np.load(tmp_path / "out.npz")["y"].view(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(y, np.maximum(x, 0).astype(ml_dtypes.bfloat16))
    # the declared dtype exactly, as onnxruntime: float32 is not rounded to bfloat16 silently
    r = cli("cann_run", om, "--input", f"x={tmp_path / 'x_f32.npy'}")
    assert r.returncode == 2
    assert r.stderr.splitlines() == ["error: x: expected shape (2, 3) bfloat16, got shape (2, 3) float32"]
    assert cli("cann_run", om).returncode == 0  # seeded random bf16 inputs


def test_model_contradicting_itself_is_a_one_line_error(tmp_path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    g = helper.make_graph([helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [5, 5])],
                          [numpy_helper.from_array(np.array([5, 5], np.int64), "s")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), tmp_path / "m.onnx")
    r = cli("cann_compile", tmp_path / "m.onnx", "-o", tmp_path / "m.om")
    assert r.returncode == 2 and not (tmp_path / "m.om").exists()
    assert r.stderr.splitlines() == ["error: rs: invalid model: 'graph.reshape' must keep the number of elements"]


def test_fp16_overflow_is_one_warning_line_and_budget_flag(tmp_path):  # needs the compiler
    import onnx
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("Mul", ["x", "x"], ["y"], name="square")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), tmp_path / "sq.onnx")
    om = tmp_path / "sq.om"
    assert cli("cann_compile", tmp_path / "sq.onnx", "-o", om).returncode == 0
    np.save(tmp_path / "x.npy", np.full((2, 16), 300, np.float32))  # 90000 > 65504
    r = cli("cann_run", om, "--input", tmp_path / "x.npy")
    assert r.returncode == 0, r.stderr
    assert re.fullmatch(  # the kernel's name and the instruction index are the lowering's; its node, the .om's
        r"warning: kernel '\w+' \(model nodes square\): float overflow: launch 1 wrote inf/NaN computed from finite operands \(first at "
        r"instruction \d+ `vmul`\); precision_mode force_fp16 computes in float16 "
        r"\(largest finite value 65504\): compile with --precision_mode allow_mix_precision \(overflowing nodes kept in "
        r"float32\), --keep_dtype FILE \(the nodes to keep; cann-compile --calibrate-keep-dtype FILE writes one\) or "
        r"--precision_mode must_keep_origin_dtype \(all float32\)\n",
        r.stderr)
    assert "min=inf max=inf" in r.stdout
    np.save(tmp_path / "x.npy", np.full((2, 16), 200, np.float32))
    r = cli("cann_run", om, "--input", tmp_path / "x.npy")
    assert r.returncode == 0 and r.stderr == "" and "min=40000 max=40000" in r.stdout
    r = cli("cann_run", om, "--input", tmp_path / "x.npy", "--max-instructions", "5")
    assert r.returncode == 2
    assert re.fullmatch(re.escape(f"error: {om}: ") + r"the launches up to launch \d \('\w+'\) execute \d+ instructions in \d+ "
                        r"blocks, over the simulator's budget of 5 instructions \+ blocks \(docs/om-format.md, "
                        r"\"Running\"\)\n", r.stderr)


def test_fp16_overflow_to_both_infinities_prints_no_numpy_warning(tmp_path):  # needs the compiler
    """+inf and -inf in one output average to nan: the summary says mean=nan and stderr holds the one
    overflow warning line only (numpy's 'invalid value encountered in reduce' came after it)."""
    import onnx
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("Mul", ["a", "b"], ["y"], name="prod")], "g",
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 16]) for n in "ab"],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), tmp_path / "p.onnx")
    om = tmp_path / "p.om"
    assert cli("cann_compile", tmp_path / "p.onnx", "-o", om).returncode == 0
    np.save(tmp_path / "a.npy", np.full((2, 16), 300, np.float32))
    np.save(tmp_path / "b.npy", np.where(np.arange(32).reshape(2, 16) % 2, 300, -300).astype(np.float32))
    r = cli("cann_run", om, "--input", f"a={tmp_path / 'a.npy'}", "--input", f"b={tmp_path / 'b.npy'}")
    assert r.returncode == 0, r.stderr
    assert "min=-inf max=inf mean=nan" in r.stdout
    assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith("warning: kernel '"), r.stderr


def test_output_naming_an_input_file_is_refused_before_the_run(compiled, fire_onnx, tmp_path):
    # was: `cann-run m.om --output m.om` replaced the model by its outputs (.npz bytes), exit 0; a directory
    # as --output failed only after the simulation
    before = compiled.read_bytes()
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((1, 3, 8, 8), np.float32))
    cases = [(("--output", compiled), f"{compiled}: cannot write: it is the model ({compiled}), an input of this command"),
             (("--profile-csv", compiled), f"{compiled}: cannot write: it is the model ({compiled}), an input of this command"),
             (("--compare", fire_onnx, "--output", fire_onnx),
              f"{fire_onnx}: cannot write: it is the --compare model ({fire_onnx}), an input of this command"),
             (("--input", f"data={x}", "--trace", x), f"{x}: cannot write: it is an --input file ({x}), an input of this command"),
             (("--trace", tmp_path / "t.json", "--profile-csv", tmp_path / "t.json"),
              f"{tmp_path / 't.json'}: cannot write: it is also the --profile-csv file"),
             (("--output", tmp_path), f"{tmp_path}: cannot write: is a directory")]
    for args, message in cases:
        r = cli("cann_run", compiled, *args)
        assert (r.returncode, r.stdout) == (2, ""), (args, r.stderr)
        assert r.stderr == f"error: {message}{'' if message.endswith('directory') else '; give another file'}\n"
    assert compiled.read_bytes() == before and not (tmp_path / "t.json").exists()


def test_no_model_says_it_is_missing():
    # was "error: MODEL.om: " (click's MissingParameter has an empty message)
    r = cli("cann_run")
    assert (r.returncode, r.stdout, r.stderr) == (2, "", "error: MODEL.om: missing argument (cann-run --help shows the usage)\n")
