"""cann-opt: exit codes and exact one-line errors (lit's `not` cannot check for exactly 2)."""

import os
import subprocess
import sys

import pytest

GOOD = """func.func @f(%a: i32) -> i32 {
  %0 = arith.addi %a, %a : i32
  %1 = arith.addi %a, %a : i32
  %2 = arith.muli %0, %1 : i32
  func.return %2 : i32
}
"""

INVALID = """func.func @f(%a: i32) -> i32 {
  %0 = "arith.addi"(%a, %a) : (i32, i32) -> i64
  func.return %a : i32
}
"""


def cann_opt(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "cann.tools.cann_opt", *map(str, args)],
                          capture_output=True, text=True, input=stdin)


@pytest.fixture
def good(tmp_path):
    p = tmp_path / "good.mlir"
    p.write_text(GOOD)
    return p


def test_console_script_runs(good):
    exe = os.path.join(os.path.dirname(sys.executable), "cann-opt")
    r = subprocess.run([exe, str(good), "-p", "cse"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "arith.muli %0, %0" in r.stdout


def test_cse_and_stdin(good):
    r = cann_opt("-p", "cse,dce", stdin=GOOD)
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout.count("arith.addi") == 1


def test_project_registries_are_registered():
    from cann.dialects import ALL_DIALECTS
    from cann.passes import ALL_PASSES
    from cann.tools.cann_opt import CannOptMain

    main = CannOptMain(args=[])
    for name in ALL_PASSES:
        assert name in main.available_passes
    assert set(ALL_DIALECTS) <= set(main.ctx.registered_dialect_names)
    for name in ("cse", "dce", "canonicalize"):
        assert name in main.available_passes


def test_unknown_pass(good):
    r = cann_opt(good, "-p", "cse,no-such-pass")
    assert r.returncode == 2
    assert r.stderr == "error: no-such-pass: unknown pass (cann-opt --help lists the available passes)\n"
    assert r.stdout == ""


def test_unknown_pass_option(good):
    r = cann_opt(good, "-p", "cse{bogus=1}")
    assert r.returncode == 2
    assert r.stderr.splitlines() == ["error: cse: bad pass option bogus: no such option (it takes no options)"]


@pytest.mark.parametrize("option, message", [
    ("graph-recompose{gelu=2}", "graph-recompose: bad pass option gelu=2: expected true or false"),
    ("convert-graph-to-tile{aicore_num=x}", "convert-graph-to-tile: bad pass option aicore_num=x: expected an integer"),
    ("graph-fuse-ub{max_ops=-3}", "graph-fuse-ub: bad pass option max_ops=-3: the largest group in ops, at least 1 (1: no fusion)"),
])
def test_bad_pass_option_value_names_option_and_kind(good, option, message):
    # was: xDSL's "bad pass option: Incompatible types: given (2,), expected <class 'bool'>", and max_ops=-3 accepted
    r = cann_opt(good, "-p", option)
    assert (r.returncode, r.stderr, r.stdout) == (2, f"error: {message}\n", "")


def test_help_gives_each_pass_a_whole_sentence():
    # was: the docstring's first line, cut mid-sentence ("... (option ``mode``: ``barrier`` or ``flags``;")
    r = cann_opt("--help")
    assert r.returncode == 0
    lines = r.stdout[r.stdout.index("cann passes"):].splitlines()
    summaries = [ln.strip() for ln in lines if ln.startswith("      ")]
    assert len(summaries) >= 13 and all(s.endswith(".") and "``" not in s for s in summaries), summaries


def test_malformed_pipeline(good):
    r = cann_opt(good, "-p", "cse,,dce")
    assert r.returncode == 2
    assert r.stderr == "error: -p 'cse,,dce': column 5: Expected pass name here\n"


def test_parse_error(tmp_path):
    p = tmp_path / "bad.mlir"
    p.write_text("func.func @f( {\n")
    r = cann_opt(p)
    assert r.returncode == 2
    assert r.stderr == f"error: {p}:1:15: Expected argument or type\n"


def test_verification_failure(tmp_path):
    p = tmp_path / "invalid.mlir"
    p.write_text(INVALID)
    r = cann_opt(p)
    assert r.returncode == 2
    assert r.stderr == (f"error: {p}: 'arith.addi' op result 'result' at position 0 does not verify: "
                        "attribute i32 expected from variable 'T', but got i64\n")


def test_verify_diagnostics_keeps_xdsl_behaviour(tmp_path):
    p = tmp_path / "invalid.mlir"
    p.write_text(INVALID)
    r = cann_opt(p, "--verify-diagnostics")
    assert r.returncode == 0
    assert "Operation does not verify" in r.stdout


def test_missing_file(tmp_path):
    r = cann_opt(tmp_path / "missing.mlir")
    assert r.returncode == 2
    assert r.stderr == f"error: {tmp_path / 'missing.mlir'}: cannot open: No such file or directory\n"


def test_unwritable_output(good, tmp_path):
    out = tmp_path / "no" / "out.mlir"
    r = cann_opt(good, "-o", out)
    assert r.returncode == 2
    assert r.stderr == f"error: {out}: cannot write: No such file or directory\n"


def test_bad_flag(good):
    r = cann_opt(good, "--no-such-flag")
    assert r.returncode == 2
    assert r.stderr == "error: cann-opt: unrecognized arguments: --no-such-flag\n"


def test_print_ir_after_all_goes_to_stderr(good):
    r = cann_opt(good, "-p", "cse,dce", "--print-ir-after-all")
    assert r.returncode == 0
    assert "IR Dump" not in r.stdout
    dumps = [ln for ln in r.stderr.splitlines() if "IR Dump After" in ln]
    assert dumps == ["// -----// IR Dump After cse //----- //", "// -----// IR Dump After dce //----- //"]


def test_time_passes_on_stderr(good):
    r = cann_opt(good, "-p", "cse,dce", "--time-passes")
    assert r.returncode == 0
    assert "took" not in r.stdout and "pass " not in r.stdout
    lines = r.stderr.splitlines()
    assert [ln.split(":")[0] for ln in lines] == ["pass cse", "pass dce"]
    for ln in lines:
        assert ln.endswith(" s") and float(ln.split(": ")[1][:-2]) >= 0


def test_internal_error_is_exit_1(good, monkeypatch, capsys):
    from xdsl.transforms.common_subexpression_elimination import CommonSubexpressionElimination

    from cann.tools import cann_opt as mod

    def boom(self, ctx, op):
        raise RuntimeError("bug in a pass")

    monkeypatch.setattr(CommonSubexpressionElimination, "apply", boom)
    with pytest.raises(SystemExit) as e:
        mod.main([str(good), "-p", "cse"])
    assert e.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith("internal error: RuntimeError: bug in a pass\n")
    assert "Traceback" in err


def test_output_file_written_atomically(good, tmp_path):
    out = tmp_path / "out.mlir"
    r = cann_opt(good, "-p", "cse", "-o", out)
    assert r.returncode == 0 and "arith.muli %0, %0" in out.read_text()
    bad = tmp_path / "bad.mlir"
    bad.write_text("func.func @f( {\n")
    out2 = tmp_path / "out2.mlir"
    r = cann_opt(bad, "-o", out2)
    assert r.returncode == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.mlir", "good.mlir", "out.mlir"]


def test_reader_going_away_is_quiet(tmp_path):
    """`cann-opt big.mlir | head -1`: no 'cannot open: Broken pipe' against the input (issue 10, item 16)."""
    big = tmp_path / "big.mlir"
    body = "\n".join(f"  %{i + 1} = arith.addi %{i}, %{i} : i32" for i in range(20000))
    big.write_text(f"func.func @f(%0: i32) -> i32 {{\n{body}\n  func.return %20000 : i32\n}}\n")
    cmd = f"'{sys.executable}' -m cann.tools.cann_opt '{big}'"
    r = subprocess.run(["bash", "-c", f"{cmd} | head -1"], capture_output=True, text=True)
    assert r.stdout == "builtin.module {\n" and r.stderr == ""
    # a reader that is gone before anything is written: always a broken pipe, ended quietly with 1
    r = subprocess.run(["bash", "-c", f"{cmd} | true; echo status=${{PIPESTATUS[0]}}"], capture_output=True, text=True)
    assert r.stdout == "status=1\n" and r.stderr == ""


def test_frontend_flag_and_target_choice(tmp_path):
    txt = tmp_path / "g.txt"
    txt.write_text(GOOD)
    r = cann_opt("-f", "mlir", txt, "-p", "cse")
    assert r.returncode == 0 and "arith.muli %0, %0" in r.stdout
    r = cann_opt(txt)
    assert r.returncode == 2
    assert r.stderr == f"error: {txt}: Unrecognized file extension 'txt' (give -f mlir to parse it as MLIR text)\n"
    for target in ("llvm", "riscv-asm", "wgsl"):
        r = cann_opt(txt, "-f", "mlir", "-t", target)
        assert r.returncode == 2
        assert r.stderr == f"error: cann-opt: argument -t/--target: invalid choice: '{target}' (choose from mlir)\n"


def test_only_generic_xdsl_passes_are_offered():
    from cann.passes import ALL_PASSES
    from cann.tools.cann_opt import CannOptMain

    main = CannOptMain(args=[])
    assert set(main.available_passes) == set(ALL_PASSES) | {"canonicalize", "cse", "dce"}
    assert set(main.available_targets) == {"mlir"}


def test_bad_pass_option_names_the_pass_option(tmp_path):
    p = tmp_path / "m.mlir"
    p.write_text("builtin.module {\n}\n")
    r = cann_opt(p, "-p", "convert-graph-to-tile{soc=Ascend999}")
    assert r.returncode == 2
    assert r.stderr == ("error: convert-graph-to-tile: bad pass option soc=Ascend999: unknown SoC 'Ascend999' "
                        "(known: Ascend310, Ascend910, Ascend910B1)\n")


@pytest.mark.parametrize("passes", [(), ("-p", "cse")])
def test_unwritable_output_with_weights_names_the_file_asked_for(tmp_path, passes):
    """Graph IR with dense_resource weights, -o in a missing directory: the error names the .mlir
    asked for (not its .npz sidecar, which was reported when the weights were written first)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from cann.compiler import emit

    w = numpy_helper.from_array(np.arange(64, dtype=np.float32).reshape(8, 8), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])], [w])
    src = tmp_path / "g.mlir"
    emit(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), "graph", src)
    assert "dense_resource<w>" in src.read_text() and (tmp_path / "g.mlir.npz").exists()
    out = tmp_path / "no" / "out.mlir"
    r = cann_opt(src, *passes, "-o", out)
    assert r.returncode == 2
    assert r.stderr == f"error: {out}: cannot write: No such file or directory\n"


def test_a_module_without_main_names_the_functions_it_defines(tmp_path):
    p = tmp_path / "f.mlir"
    p.write_text("func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {\n  func.return %x : tensor<2xf32>\n}\n")
    r = cann_opt(p, "-p", "convert-graph-to-tile{soc=Ascend910}")
    assert r.returncode == 2
    assert r.stderr == ("error: convert-graph-to-tile: the module has no func.func @main (the entry function must "
                        "be named @main; it defines @f)\n")


def test_empty_input_is_named_as_such(tmp_path):
    # was "error: <file>:1:1: Could not parse entire input!" for an empty file or stdin
    p = tmp_path / "empty.mlir"
    p.write_text("\n")
    r = cann_opt(p, "-p", "cse")
    assert (r.returncode, r.stdout, r.stderr) == (2, "", f"error: {p}: empty input: no module to read\n")
    r = cann_opt(stdin="")
    assert (r.returncode, r.stderr) == (2, "error: stdin: empty input: no module to read\n")
