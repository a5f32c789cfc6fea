"""cann-compile: ATC-style flags, one-line errors with exit 2, no partial output.

Tests marked `# needs the compiler` call `cann.compile` / `cann.compiler.emit` for real."""

import os
import re
import subprocess
import sys

import pytest

from cann.errors import CannError
from cann.options import split_last_colon, validate_options


def parse_input_shape(text):
    return validate_options(input_shape=text).input_shape


def parse_out_nodes(text):
    return validate_options(out_nodes=text).out_nodes


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
    assert_user_error(r, "error: --precision_mode: unknown precision mode 'bogus' (known: force_fp16, "
                         "allow_fp32_to_fp16, must_keep_origin_dtype, force_fp32, allow_mix_precision)")
    assert sorted(os.listdir(tmp_path)) == ["fire.onnx"]


def test_malformed_input_shape(fire_onnx, tmp_path):
    r = cann_compile(fire_onnx, "-o", tmp_path / "out.om", "--input_shape=data:1,3,x,16")
    assert_user_error(r, "error: --input_shape: 'data:1,3,x,16': dimensions must be comma-separated integers")
    assert sorted(os.listdir(tmp_path)) == ["fire.onnx"]


def test_bad_log_level_and_opt_level(fire_onnx, tmp_path):
    r = cann_compile(fire_onnx, "-o", tmp_path / "o.om", "--log=loud")
    assert_user_error(r, "error: --log: 'loud' is not one of 'debug', 'info', 'warning', 'error', 'null'.")
    r = cann_compile(fire_onnx, "-o", tmp_path / "o.om", "-O2")
    assert_user_error(r, "error: -O: unknown optimization level 2 (known: 0, 1)")


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
    sw.write_text('{"Switch": {"UBFusion": {"ALL": "off"}}}')
    with pytest.raises(SystemExit) as e:
        mod.main(["--model", str(fire_onnx), "--framework=5", "--output", str(tmp_path / "net"),
                  "--soc_version=Ascend310", "--input_shape", "x:0:1,3;data:1,3,16,16",
                  "--precision_mode", "force_fp32", "--out_nodes", "prob;logits", "--log", "null",
                  "--fusion_switch_file", str(sw), "-O0"])
    assert e.value.code == 0
    # the flags' text goes to the API, which validates it (cann.options: one validation for both)
    assert seen == dict(model=str(fire_onnx), soc_version="Ascend310", precision_mode="force_fp32",
                        input_shape="x:0:1,3;data:1,3,16,16", out_nodes="prob;logits",
                        opt_level="0", fusion_switch_file=str(sw), aicore_num=None, framework="5",
                        first_load_segment=None, keep_dtype=None, gm_reuse=None)
    out = tmp_path / "net.om"
    size = out.stat().st_size
    assert capsys.readouterr().out == f"{out}: 1 kernels, 1 launches, {size} bytes (Ascend310, force_fp32, -O0)\n" \
                                      f"{out}: device memory 64 bytes: weights 0, activations 64 (reuse off)\n"


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
    assert calls == [("tile", None), ("graph", "0"), ("asm", None)]  # None: the API's default (-O1)


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
    from cann.passes.tile_search_kb import load, shipped_path

    shipped = load(shipped_path("Ascend910")).digest  # a default compile reads the shipped knowledge base
    summary, memory = r.stdout.splitlines()
    assert summary.endswith(f"(Ascend910, force_fp16, -O1, shipped knowledge base sha256 {shipped[:16]})")
    assert memory == f"{out}: device memory {om.gm_size} bytes: weights {len(om.weights)}, activations " \
                     f"{om.gm_size - len(om.weights)} (reuse on; {om.gm_size_no_reuse - len(om.weights)} without)"
    assert om.gm_reuse and om.gm_size < om.gm_size_no_reuse
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
    # --emit to a missing directory: one line naming the file asked for (not its weights sidecar)
    r = cann_compile(fire_onnx, "--emit", "graph", "-o", tmp_path / "nodir" / "g.mlir")
    assert r.returncode == 2
    assert r.stderr.splitlines() == [f"error: {tmp_path / 'nodir' / 'g.mlir'}: cannot write: No such file or directory"]


# -- one validation for the API and the CLI (issue 10, item 12) -----------------------------------


@pytest.mark.parametrize("kwargs, flags, line", [
    (dict(aicore_num=0), ["--aicore_num", "0"], "error: --aicore_num: expected a positive core count like 8 or '8|', got 0"),
    (dict(aicore_num="abc"), ["--aicore_num", "abc"],
     "error: --aicore_num: expected a positive core count like 8 or '8|', got 'abc'"),
    (dict(aicore_num=33), ["--aicore_num", "33|"], "error: --aicore_num: 33 cores requested; Ascend910 has 32"),
    (dict(soc_version="Ascend999"), ["--soc_version", "Ascend999"],
     "error: --soc_version: unknown SoC 'Ascend999' (known: Ascend310, Ascend910, Ascend910B1)"),
    (dict(precision_mode="fp8"), ["--precision_mode", "fp8"], "error: --precision_mode: unknown precision mode 'fp8' "
     "(known: force_fp16, allow_fp32_to_fp16, must_keep_origin_dtype, force_fp32, allow_mix_precision)"),
    (dict(opt_level=2), ["-O", "2"], "error: -O: unknown optimization level 2 (known: 0, 1)"),
    (dict(input_shape={"data": (1, 3, -1, 16)}), ["--input_shape", "data:1,3,-1,16"],
     "error: --input_shape: 'data:1,3,-1,16': dimensions must be positive (dynamic shapes are not supported)"),
    (dict(out_nodes=[]), ["--out_nodes", ";"], "error: --out_nodes: no output given"),
    (dict(first_load_segment=-5), ["--first-load-segment", "-5"],
     "error: --first-load-segment: expected a byte count (0: the default rule, -1: no segmentation), got -5"),
    (dict(first_load_segment="4k"), ["--first-load-segment", "4k"],
     "error: --first-load-segment: expected a byte count (0: the default rule, -1: no segmentation), got '4k'"),
    (dict(first_load_segment="--5"), ["--first-load-segment=--5"],
     "error: --first-load-segment: expected a byte count (0: the default rule, -1: no segmentation), got '--5'"),
    (dict(first_load_segment=4096, opt_level=0), ["--first-load-segment", "4096", "-O0"],
     "error: --first-load-segment: applies at -O1 (task auto-pipelining); -O0 keeps one copy of every buffer and "
     "whole loads"),
    (dict(fusion_switch_file="/nonexistent/sw.json"), ["--fusion_switch_file", "/nonexistent/sw.json"],
     "error: /nonexistent/sw.json: cannot read fusion switch file: No such file or directory"),
])
def test_api_and_cli_validate_options_alike(fire_onnx, tmp_path, kwargs, flags, line):
    import cann

    with pytest.raises(CannError) as e:
        cann.compile(fire_onnx, **kwargs)
    assert e.value.lines() == [line]
    assert_user_error(cann_compile(fire_onnx, "-o", tmp_path / "o.om", *flags), line)
    assert sorted(os.listdir(tmp_path)) == ["fire.onnx"]


def test_every_bad_option_is_reported():
    with pytest.raises(CannError) as e:
        validate_options(soc_version="Ascend999", aicore_num=0, opt_level="x")
    assert [ln.split(":")[1].strip() for ln in e.value.lines()] == ["--soc_version", "-O", "--aicore_num"]


def test_option_spellings_normalize_alike():
    a = validate_options(aicore_num="8|", input_shape="x:0:1,3", out_nodes="a;b:0", opt_level="0", framework="5")
    b = validate_options(aicore_num=8, input_shape={"x:0": [1, 3]}, out_nodes=["a", "b:0"], opt_level=0, framework=5)
    assert a == b
    assert (a.aicore_num, a.input_shape, a.out_nodes, a.opt_level, a.framework) == (8, {"x:0": (1, 3)}, ["a", "b:0"], 0, "onnx")
    defaults = validate_options()
    assert (defaults.soc_version, defaults.precision_mode, defaults.opt_level, defaults.given) == \
        ("Ascend910", "force_fp16", 1, frozenset())
    with pytest.raises(CannError) as e:
        validate_options(bogus=1)
    assert e.value.lines()[0].startswith("error: cann.compile: unknown option(s): bogus")


# -- separated-core SoCs (issue 10, item 17) ---------------------------------------------------


def test_separated_soc_refuses_mixed_kernels_at_compile_time(fire_onnx, tmp_path):
    r = cann_compile(fire_onnx, "--soc_version", "Ascend910B1", "-o", tmp_path / "o.om")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    why = ("uses both the cube and the vector unit: Ascend910B1 has separated cube (AIC) and vector (AIV) cores, "
           "and cann does not split kernels between them yet (only vector-only kernels compile for it)")
    assert lines[0] == f"error: kernel 'conv2d_0': {why}"
    assert len(lines) == 5 and all(ln.endswith(why) for ln in lines)  # the five convolutions, each named
    assert sorted(os.listdir(tmp_path)) == ["fire.onnx"]


def test_separated_soc_compiles_and_runs_vector_only_kernels(tmp_path):
    import numpy as np
    import onnx
    from onnx import TensorProto as T, helper

    import cann

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", T.FLOAT, [2, 64])],
                          [helper.make_tensor_value_info("y", T.FLOAT, [2, 64])])
    path = tmp_path / "v.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    m = cann.compile(path, soc_version="Ascend910B1", precision_mode="force_fp32")
    x = np.random.default_rng(0).standard_normal((2, 64), dtype=np.float32)
    np.testing.assert_allclose(m.run({"x": x})["y"], np.maximum(x, 0) + x, rtol=1e-6)


# -- output paths (issue 10, items 20 and 23) --------------------------------------------------


def test_output_directory_is_an_error(fire_onnx, tmp_path):
    (tmp_path / "out").mkdir()
    assert_user_error(cann_compile(fire_onnx, "-o", tmp_path / "out"),
                      f"error: {tmp_path / 'out'}: is a directory: give the output file (e.g. {tmp_path / 'out' / 'fire.om'})")
    assert_user_error(cann_compile(fire_onnx, "--emit", "graph", "-o", tmp_path / "out"),
                      f"error: {tmp_path / 'out'}: cannot write: is a directory")
    assert sorted(os.listdir(tmp_path)) == ["fire.onnx", "out"] and os.listdir(tmp_path / "out") == []


# -- --out_nodes node_name:output_index and cann-run --compare on it (issue 10, item 18) ---------


def _mlp(path):
    import numpy as np
    import onnx
    from onnx import TensorProto as T, helper, numpy_helper

    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array((rng.standard_normal((8, 16)) / 4).astype(np.float32), "w1")
    w2 = numpy_helper.from_array((rng.standard_normal((16, 4)) / 4).astype(np.float32), "w2")
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h1"], name="mm1"),
             helper.make_node("Relu", ["h1"], ["h2"], name="relu"),
             helper.make_node("MatMul", ["h2", "w2"], ["y"], name="mm2")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, [2, 8])],
                          [helper.make_tensor_value_info("y", T.FLOAT, [2, 4])], [w1, w2])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_out_nodes_node_output_index_and_compare_on_intermediate_outputs(tmp_path):
    import numpy as np

    import cann

    model = _mlp(tmp_path / "mlp.onnx")
    om = tmp_path / "mlp.om"
    r = cann_compile(model, "--out_nodes", "relu:0;y", "-o", om, "--precision_mode", "force_fp32")
    assert r.returncode == 0, r.stderr
    assert [t.name for t in cann.load(om).outputs] == ["h2", "y"]  # relu:0 is the tensor h2
    r = subprocess.run([sys.executable, "-m", "cann.tools.cann_run", str(om), "--compare", str(model)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    errs = {m[0]: float(m[1]) for m in re.findall(r"^(\w+): max_abs_err=\S+ rel_l2_err=(\S+)$", r.stdout, re.M)}
    assert set(errs) == {"h2", "y"} and max(errs.values()) < 1e-5
    # the same values as onnxruntime's intermediate tensor, computed independently
    x = np.random.default_rng(1).standard_normal((2, 8), dtype=np.float32)
    got = cann.compile(model, out_nodes="relu:0", precision_mode="force_fp32").run({"x": x})["h2"]
    w1 = [i for i in __import__("onnx").load(model).graph.initializer if i.name == "w1"][0]
    from onnx import numpy_helper

    np.testing.assert_allclose(got, np.maximum(x @ numpy_helper.to_array(w1), 0), rtol=1e-5, atol=1e-6)


def test_out_nodes_bad_node_or_index(tmp_path):
    model = _mlp(tmp_path / "mlp.onnx")
    assert_user_error(cann_compile(model, "--out_nodes", "relu:3;nope;mm2:0", "-o", tmp_path / "o.om"),
                      "error: relu:3: node 'relu' has no output 3 (it has 1)",
                      "error: nope: output names no tensor of the model (nor node_name:output_index)")
    assert sorted(os.listdir(tmp_path)) == ["mlp.onnx"]


def test_reference_session_exposes_intermediate_tensors(fire_onnx):
    import numpy as np

    from cann.tools.cann_run import reference_session

    sess = reference_session(str(fire_onnx), ["prob", "fire2_concat"])
    assert [o.name for o in sess.get_outputs()] == ["prob", "logits", "fire2_concat"]
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16), dtype=np.float32)
    concat, = sess.run(["fire2_concat"], {"data": x})
    assert concat.shape == (1, 32, 8, 8) and (concat >= 0).all()  # two Relu outputs, concatenated
    with pytest.raises(CannError) as e:
        reference_session(str(fire_onnx), ["nope"])
    assert e.value.lines() == [f"error: {fire_onnx}: has no tensor 'nope' (outputs: prob, logits)"]


def test_output_naming_the_model_is_refused(fire_onnx, tmp_path):
    # was: `--emit graph -o MODEL` and `--fusion-report MODEL` replaced the ONNX model by text, exit 0
    before = fire_onnx.read_bytes()
    said = f"error: {fire_onnx}: cannot write: it is the model ({fire_onnx}), an input of this command; give another file"
    assert_user_error(cann_compile(fire_onnx, "--emit", "graph", "-o", fire_onnx), said)
    assert_user_error(cann_compile(fire_onnx, "--fusion-report", fire_onnx, "-o", tmp_path / "m.om"), said)
    assert_user_error(cann_compile(fire_onnx, "--fusion-report", tmp_path / "m.om", "-o", tmp_path / "m"),
                      f"error: {tmp_path / 'm.om'}: cannot write: it is also the -o file; give another file")
    assert fire_onnx.read_bytes() == before and sorted(os.listdir(tmp_path)) == ["fire.onnx"]
