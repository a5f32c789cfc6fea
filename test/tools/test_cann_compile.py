"""cann-compile: ATC-style flags, one-line errors with exit 2, no partial output.

Tests marked `# needs the compiler` call `cann.compile` / `cann.compiler.emit` for real."""

import os
import subprocess
import sys

import pytest

from cann.errors import CannError
from cann.tools.cann_compile import parse_input_shape, parse_out_nodes, split_last_colon


def cann_compile(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "cann.tools.cann_compile", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd)


def assert_user_error(r, *lines):
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr
    assert r.stderr.splitlines() == list(lines)


# -- flag parsing (pure functions) ------------------------------------------------------------


def test_input_shape_splits_at_last_colon():
    assert parse_input_shape("x:0:1,3;y:2") == {"x:0": (1, 3), "y": (2,)}
    assert parse_input_shape("input:1,3,224,224") == {"input": (1, 3, 224, 224)}
    assert parse_input_shape(" a:1 ; b:2,2 ;") == {"a": (1,), "b": (2, 2)}


@pytest.mark.parametrize("text, message", [
    ("x", "'x' is not of the form NAME:VALUE"),
    (":1,3", "':1,3' is not of the form NAME:VALUE"),
    ("x:1,a", "'x:1,a': dimensions must be comma-separated integers"),
    ("x:", "'x:': dimensions must be comma-separated integers"),
    ("x:1,-1", "'x:1,-1': dimensions must be positive (dynamic shapes are not supported)"),
    ("x:1;x:2", "input 'x' is given twice"),
    (";", "no shape given"),
])
def test_input_shape_rejects(text, message):
    with pytest.raises(CannError) as e:
        parse_input_shape(text)
    assert e.value.lines() == [f"error: --input_shape: {message}"]


def test_out_nodes():
    assert parse_out_nodes("a;b:0;x:0:1") == ["a", "b:0", "x:0:1"]
    assert split_last_colon("x:0:1", "--out_nodes") == ("x:0", "1")
    with pytest.raises(CannError):
        parse_out_nodes(" ; ")


# -- user mistakes caught before compiling ----------------------------------------------------


def test_missing_model(tmp_path):
    r = cann_compile(tmp_path / "missing.onnx", "-o", tmp_path / "out.om")
    assert_user_error(r, f"error: {tmp_path / 'missing.onnx'}: no such file")
    assert os.listdir(tmp_path) == []


def test_bad_precision_mode(fire_onnx, tmp_path):
    r = cann_compile(fire_onnx, "-o", tmp_path / "out.om", "--precision_mode", "bogus")
    assert_user_error(r, "error: --precision_mode: 'bogus' is not one of 'force_fp16', 'allow_fp32_to_fp16', "
                         "'must_keep_origin_dtype', 'force_fp32'.")
    assert sorted(os.listdir(tmp_path)) == ["fire.onnx"]


def test_malformed_input_shape(fire_onnx, tmp_path):
    r = cann_compile(fire_onnx, "-o", tmp_path / "out.om", "--input_shape=data:1,3,x,16")
    assert_user_error(r, "error: --input_shape: 'data:1,3,x,16': dimensions must be comma-separated integers")
    assert sorted(os.listdir(tmp_path)) == ["fire.onnx"]


def test_bad_log_level_and_opt_level(fire_onnx, tmp_path):
    r = cann_compile(fire_onnx, "-o", tmp_path / "o.om", "--log=loud")
    assert_user_error(r, "error: --log: 'loud' is not one of 'debug', 'info', 'warning', 'error', 'null'.")
    r = cann_compile(fire_onnx, "-o", tmp_path / "o.om", "-O2")
    assert_user_error(r, "error: -O: '2' is not one of '0', '1'.")


def test_unknown_flag(fire_onnx, tmp_path):
    r = cann_compile(fire_onnx, "-o", tmp_path / "o.om", "--soc_versoin", "Ascend910")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.splitlines() == ["error: --soc_versoin: no such option; did you mean --soc_version?"]


def test_bad_emit_stage(fire_onnx, tmp_path):
    r = cann_compile(fire_onnx, "--emit", "llvm", "-o", "-")
    assert_user_error(r, "error: --emit: 'llvm' is not one of 'graph', 'tile', 'ascend', 'asm'.")


def test_no_model_no_output(fire_onnx):
    assert_user_error(cann_compile("-o", "x.om"), "error: cann-compile: no model given (cann-compile MODEL -o OUT)")
    assert_user_error(cann_compile(fire_onnx), "error: cann-compile: no output given (-o/--output)")


def test_conflicting_models(fire_onnx, tmp_path):
    r = cann_compile(fire_onnx, "--model", tmp_path / "other.onnx", "-o", tmp_path / "o.om")
    assert_user_error(r, f"error: --model: two different models given: '{fire_onnx}' and '{tmp_path / 'other.onnx'}'")


def test_tensorflow_framework_3_not_a_graphdef(tmp_path):
    pb = tmp_path / "model.pb"
    pb.write_bytes(b"\x0a\x00")  # one empty NodeDef: parses, but is no GraphDef
    assert_user_error(cann_compile(pb, "-o", tmp_path / "o.om"),
                      f"error: {pb}: not a TensorFlow GraphDef: a node has no op")
    assert_user_error(cann_compile("--model", pb, "--framework", "3", "--output", tmp_path / "o"),
                      f"error: {pb}: not a TensorFlow GraphDef: a node has no op")
    assert_user_error(cann_compile("--model", pb, "--framework", "0", "--output", tmp_path / "o"),
                      "error: --framework: unsupported framework 0 (3 = TensorFlow, 5 = ONNX)")
    assert os.listdir(tmp_path) == ["model.pb"]


def test_unknown_suffix_needs_framework(tmp_path):
    m = tmp_path / "model.bin"
    m.write_bytes(b"")
    assert_user_error(cann_compile(m, "-o", tmp_path / "o.om"),
                      f"error: {m}: cannot infer the framework from the file suffix; "
                      "use --framework 5 (ONNX) or --framework 3 (TensorFlow)")


def test_om_to_stdout_is_refused(fire_onnx):
    assert_user_error(cann_compile(fire_onnx, "-o", "-"),
                      "error: -o: an .om cannot be written to stdout; give a file name (or use --emit)")


def test_internal_error_is_exit_1(fire_onnx, tmp_path, monkeypatch, capsys):
    import cann
    from cann.tools import cann_compile as mod

    def boom(*a, **k):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(cann, "compile", boom, raising=False)
    with pytest.raises(SystemExit) as e:
        mod.main([str(fire_onnx), "-o", str(tmp_path / "o.om")])
    assert e.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith("internal error: ZeroDivisionError: a bug\n") and "Traceback" in err
    assert sorted(os.listdir(tmp_path)) == ["fire.onnx"]


def test_options_are_passed_to_the_api(fire_onnx, tmp_path, monkeypatch, capsys):
    """The CLI is a thin wrapper: every flag reaches cann.compile (checked with a fake)."""
    import cann
    from cann.codegen.om import IoTensor, Kernel, Launch, OfflineModel, write_om
    from cann.hw import isa
    from cann.tools import cann_compile as mod

    seen = {}

    class Fake:
        om = OfflineModel("Ascend310", "force_fp32", (IoTensor("data", (1, 3), "float32", 0),), (),
                          64, 0, b"", (Kernel("k", 1, 1, isa.encode([isa.make("pipe_barrier", pipe=6)])),),
                          (Launch(0, (0,)),))
        fusion_report = {"kernels": [], "summary": {}}

        def save(self, path):
            write_om(self.om, path)

    def fake_compile(model, **kw):
        seen.update(kw, model=model)
        return Fake()

    monkeypatch.setattr(cann, "compile", fake_compile, raising=False)
    sw = tmp_path / "switch.json"
    with pytest.raises(SystemExit) as e:
        mod.main(["--model", str(fire_onnx), "--framework=5", "--output", str(tmp_path / "net"),
                  "--soc_version=Ascend310", "--input_shape", "x:0:1,3;data:1,3,16,16",
                  "--precision_mode", "force_fp32", "--out_nodes", "prob;logits", "--log", "null",
                  "--fusion_switch_file", str(sw), "-O0"])
    assert e.value.code == 0
    assert seen == dict(model=str(fire_onnx), soc_version="Ascend310", precision_mode="force_fp32",
                        input_shape={"x:0": (1, 3), "data": (1, 3, 16, 16)}, out_nodes=["prob", "logits"],
                        opt_level=0, fusion_switch_file=str(sw), aicore_num=None, framework=5)
    out = tmp_path / "net.om"
    size = out.stat().st_size
    assert capsys.readouterr().out == f"{out}: 1 kernels, 1 launches, {size} bytes (Ascend310, force_fp32, -O0)\n"


def test_emit_options_and_atomic_file(fire_onnx, tmp_path, monkeypatch, capsys):
    import cann.tools.cann_compile as mod

    calls = []

    def fake_emit(model, stage, out, **kw):  # like cann.compiler.emit: a path is written only on success
        calls.append((stage, kw["opt_level"]))
        if stage == "asm":
            from cann.errors import CannError

            raise CannError("conv1", "unsupported")
        if isinstance(out, (str, os.PathLike)):
            with open(out, "w") as f:
                f.write(f"// {stage}\n")
        else:
            out.write(f"// {stage}\n")

    import types

    monkeypatch.setitem(sys.modules, "cann.compiler", types.SimpleNamespace(emit=fake_emit))
    with pytest.raises(SystemExit) as e:
        mod.main([str(fire_onnx), "--emit", "tile", "-o", str(tmp_path / "t.mlir")])
    assert e.value.code == 0 and (tmp_path / "t.mlir").read_text() == "// tile\n"
    with pytest.raises(SystemExit) as e:
        mod.main([str(fire_onnx), "--emit=graph", "-O0", "-o", "-"])
    assert e.value.code == 0 and capsys.readouterr().out == "// graph\n"
    with pytest.raises(SystemExit) as e:  # a failing stage leaves no file behind
        mod.main([str(fire_onnx), "--emit", "asm", "-o", str(tmp_path / "a.s")])
    assert e.value.code == 2
    assert capsys.readouterr().err.splitlines() == ["error: conv1: unsupported"]
    assert sorted(os.listdir(tmp_path)) == ["fire.onnx", "t.mlir"]
    assert calls == [("tile", 1), ("graph", 0), ("asm", 1)]


# -- with the real compiler -------------------------------------------------------------------


def test_not_onnx(tmp_path):  # needs the compiler
    m = tmp_path / "model.onnx"
    m.write_bytes(b"this is not a protobuf \xff\xfe")
    r = cann_compile(m, "-o", tmp_path / "out.om")
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {m}: ")
    assert os.listdir(tmp_path) == ["model.onnx"]


def test_compile_fire_net(fire_onnx, tmp_path):  # needs the compiler
    from cann.codegen.om import read_om

    r = cann_compile(fire_onnx, "--output", tmp_path / "fire")
    assert r.returncode == 0, r.stderr
    out = tmp_path / "fire.om"
    om = read_om(out)
    assert om.soc_version == "Ascend910" and om.precision_mode == "force_fp16"
    assert [t.name for t in om.inputs] == ["data"] and [t.name for t in om.outputs] == ["prob", "logits"]
    assert r.stdout.startswith(f"{out}: {len(om.kernels)} kernels, ")
    assert r.stdout.rstrip().endswith("(Ascend910, force_fp16, -O1)")
    # deterministic: same flags -> same bytes
    r2 = cann_compile("--model", fire_onnx, "--output", tmp_path / "again.om")
    assert r2.returncode == 0, r2.stderr
    assert (tmp_path / "again.om").read_bytes() == out.read_bytes()


def test_compile_console_script_with_atc_spellings(fire_onnx, tmp_path):  # needs the compiler
    exe = os.path.join(os.path.dirname(sys.executable), "cann-compile")
    r = subprocess.run([exe, f"--model={fire_onnx}", "--framework=5", f"--output={tmp_path / 'm'}",
                        "--soc_version=Ascend910", "--input_shape=data:1,3,16,16",
                        "--precision_mode=must_keep_origin_dtype", "--log=error"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    from cann.codegen.om import read_om

    assert read_om(tmp_path / "m.om").precision_mode == "must_keep_origin_dtype"


@pytest.mark.parametrize("stage", ["graph", "tile", "ascend", "asm"])
def test_emit_stages(fire_onnx, tmp_path, stage):  # needs the compiler
    r = cann_compile(fire_onnx, "--emit", stage, "-o", "-")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip()
    r = cann_compile(fire_onnx, f"--emit={stage}", "-o", tmp_path / f"{stage}.txt")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / f"{stage}.txt").read_text().strip()
    # the IR stages keep large constants out of the text, in a sidecar .npz (docs/ir-text.md)
    sidecar = [f"{stage}.txt.npz"] if stage != "asm" else []
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["fire.onnx", f"{stage}.txt", *sidecar])


@pytest.mark.parametrize("stage", ["graph", "tile", "ascend"])
def test_emitted_ir_parses_in_cann_opt(fire_onnx, tmp_path, stage):  # needs the compiler
    ir = tmp_path / f"{stage}.mlir"
    assert cann_compile(fire_onnx, "--emit", stage, "-o", ir).returncode == 0
    r = subprocess.run([sys.executable, "-m", "cann.tools.cann_opt", str(ir)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_unknown_input_shape_name(fire_onnx, tmp_path):  # needs the compiler
    r = cann_compile(fire_onnx, "-o", tmp_path / "o.om", "--input_shape", "nope:1,3,16,16")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith("error: ")
    assert "nope" in r.stderr
    assert sorted(os.listdir(tmp_path)) == ["fire.onnx"]


def test_emit_failure_leaves_no_file(tmp_path):  # the real emit: nothing written when a stage fails
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("Frobnicate", ["a"], ["y"], name="t0", domain="com.example")], "g",
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    model = tmp_path / "custom.onnx"
    import onnx

    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.example", 1)]),
              model)
    r = cann_compile(model, "--emit", "tile", "-o", tmp_path / "t.mlir")
    assert r.returncode == 2
    assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith("error: t0: unsupported operator"), r.stderr
    assert sorted(os.listdir(tmp_path)) == ["custom.onnx"]


def test_fusion_report_lists_fused_nodes(fire_onnx, tmp_path):
    import json

    report = tmp_path / "fusion.json"
    r = cann_compile(fire_onnx, "-o", tmp_path / "m.om", "--fusion-report", report)
    assert r.returncode == 0, r.stderr
    data = json.loads(report.read_text())
    conv1 = [k for k in data["kernels"] if k["kernel"] == "conv2d_0"][0]
    assert conv1 == {"kernel": "conv2d_0", "fusion": "cube_epilogue", "nodes": ["conv1", "conv1_relu"]}
    assert data["summary"]["fused_kernels"] == 5  # the five Conv+Relu pairs


def test_no_output_left_when_a_second_output_cannot_be_written(fire_onnx, tmp_path):
    # the .om directory is missing: the fusion report written first is removed again
    r = cann_compile(fire_onnx, "-o", tmp_path / "nodir" / "m.om", "--fusion-report", tmp_path / "f.json")
    assert r.returncode == 2 and r.stderr.startswith(f"error: {tmp_path / 'nodir' / 'm.om'}: cannot write")
    assert sorted(os.listdir(tmp_path)) == ["fire.onnx"]
    # --emit to a missing directory: one line, no traceback (the weights sidecar is written first)
    r = cann_compile(fire_onnx, "--emit", "graph", "-o", tmp_path / "nodir" / "g.mlir")
    assert r.returncode == 2
    assert r.stderr.splitlines() == [f"error: {tmp_path / 'nodir' / 'g.mlir.npz'}: cannot write: No such file or directory"]
