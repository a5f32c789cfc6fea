"""cann-opst: msopst's case expansion, pass rule, report and CLI (cann/opst, cann/tools/cann_opst.py).

The expected counts and names are derived by hand from msopst's code (Ascend/msopgen,
tools/msopst/st/interface/subcase_design_cross.py ``SubCaseDesignCross._cross_tensor`` /
``_get_sub_test_cases``, subcase_design_fuzz.py ``SubCaseDesignFuzz.subcase_generate``); the
verdicts from compare_data.py ``CompareData._get_error_percent`` (see cann/opst/compare.py)."""

import json

import numpy as np
import pytest

from cann.errors import CannError
from cann.opst.cases import expand_file
from cann.opst.compare import compare
from cann.opst.create import create_case
from cann.tools.cann_opst import main


def _t(name, types=("float32",), shapes=([2, 16],), ranges=None, formats=("ND",), **kw):
    d = {"name": name, "format": list(formats), "type": list(types), "shape": [list(s) for s in shapes]}
    if ranges is not None:
        d["value_range"] = [list(r) for r in ranges]
    d.update(kw)
    return d


def _case(name="Test_Add", inputs=None, outputs=None, **kw):
    c = {"case_name": name, "op": "Add", "input_desc": inputs or [_t("A"), _t("B")], "output_desc": outputs or [_t("C")]}
    c.update(kw)
    return c


def _write(tmp_path, cases, name="c.json"):
    p = tmp_path / name
    p.write_text(json.dumps(cases))
    return p


def _names(tmp_path, cases):
    return [c["case_name"] for c in expand_file(_write(tmp_path, cases))]


# --- expansion -------------------------------------------------------------------------------

def test_single_profile_is_one_case(tmp_path):
    assert _names(tmp_path, [_case()]) == ["Test_Add_case_001_ND_float32"]


def test_types_are_zipped_across_tensors_not_crossed(tmp_path):
    io = dict(types=("float16", "float32"))
    subs = expand_file(_write(tmp_path, [_case(inputs=[_t("A", **io), _t("B", **io)], outputs=[_t("C", **io)])]))
    assert [c["case_name"] for c in subs] == ["Test_Add_sub_case_001_ND_float16", "Test_Add_sub_case_002_ND_float32"]
    assert [[d["type"] for d in c["input_desc"]] for c in subs] == [["float16", "float16"], ["float32", "float32"]]


def test_cross_order_and_msopst_output_indexing(tmp_path):
    # per input: 1 format x 2 shapes x 2 types x 1 distribution x 2 ranges = 8 sub-cases; the output
    # has 4 combinations, so sub-cases 5..8 take output combination i % len(output_desc) = 0
    kw = dict(types=("float16", "float32"), shapes=([2, 16], [4, 8]))
    ins = [_t("A", ranges=([0.1, 1.0], [-1.0, 1.0]), **kw), _t("B", ranges=([0.1, 1.0], [-1.0, 1.0]), **kw)]
    subs = expand_file(_write(tmp_path, [_case(inputs=ins, outputs=[_t("C", **kw)])]))
    assert [c["case_name"] for c in subs] == [
        "Test_Add_sub_case_001_ND_float16", "Test_Add_sub_case_002_ND_float32",
        "Test_Add_sub_case_003_ND_float16", "Test_Add_sub_case_004_ND_float32",
        "Test_Add_sub_case_005_ND_float16", "Test_Add_sub_case_006_ND_float16",
        "Test_Add_sub_case_007_ND_float16", "Test_Add_sub_case_008_ND_float16"]
    a = [(c["input_desc"][0]["shape"], c["input_desc"][0]["type"], c["input_desc"][0]["value_range"]) for c in subs]
    assert a[:4] == [([2, 16], "float16", [0.1, 1.0]), ([2, 16], "float16", [-1.0, 1.0]),
                     ([2, 16], "float32", [0.1, 1.0]), ([2, 16], "float32", [-1.0, 1.0])]
    assert a[4] == ([4, 8], "float16", [0.1, 1.0])
    assert subs[1]["output_desc"][0]["type"] == "float32"  # msopst pairs input combo 2 with output combo 2
    assert subs[0]["input_desc"][0]["data_distribute"] == "uniform"


def test_ori_format_and_ori_shape_ride_along(tmp_path):
    kw = dict(formats=("ND", "NCHW"), shapes=([1, 4, 2, 2], [1, 4, 4, 4]), types=("float32", "float32"),
              ori_format=["ND", "NCHW"], ori_shape=[[1, 4, 2, 2], [1, 4, 4, 4]])
    subs = expand_file(_write(tmp_path, [_case(inputs=[_t("A", **kw), _t("B", **kw)], outputs=[_t("C", **kw)])]))
    assert len(subs) == 8  # (format, ori_format) 2 x (shape, ori_shape) 2 x type 2, not 2 x 2 x 2 x 2 x 2
    assert subs[0]["input_desc"][0]["ori_format"] == "ND" and subs[4]["input_desc"][0]["format"] == "NCHW"


def test_counting_restarts_per_case_and_slash_in_name(tmp_path):
    assert _names(tmp_path, [_case("a/b"), _case("second")]) == ["a_b_case_001_ND_float32", "second_case_001_ND_float32"]
    assert [c["case_name"] for c in expand_file(_write(tmp_path, [_case("a"), _case("b")]), ["b"])] == ["b_case_001_ND_float32"]


def test_fuzz_expansion(tmp_path):
    (tmp_path / "fz.py").write_text(
        "import itertools\n_n = itertools.count()\n"
        "def fuzz_branch():\n"
        "    k = next(_n)\n"
        "    return [{'input_desc': {'A': {'shape': [k + 1, 4]}, 'B': {'shape': [k + 1, 4]}},"
        " 'output_desc': {'C': {'shape': [k + 1, 4]}}, 'attr': {}} for _ in range(2)]\n")
    f = "fuzz"
    c = _case(inputs=[_t("A", shape=f), _t("B", shape=f)], outputs=[_t("C", shape=f)], fuzz_impl="fz.py",
              fuzz_case_num=3)
    for d in c["input_desc"] + c["output_desc"]:
        d["shape"] = "fuzz"
    subs = expand_file(_write(tmp_path, [c]))
    assert [s["case_name"] for s in subs] == [f"Test_Add_fuzz_case_{i:03d}_ND_float32" for i in range(1, 7)]
    assert [s["input_desc"][0]["shape"] for s in subs] == [[1, 4], [1, 4], [2, 4], [2, 4], [3, 4], [3, 4]]


@pytest.mark.parametrize("edit, where", [
    (lambda c: c.pop("op"), "case[0].op"),
    (lambda c: c["input_desc"][1].update(type=["float16", "float32"]), "case[0].input_desc[1].type"),
    (lambda c: c["input_desc"][0].update(type=["float16", "float32"], value=[1.0]), "case[0].input_desc[0].value"),
    (lambda c: c.update(error_threshold=[0.01]), "case[0].error_threshold"),
    (lambda c: c["input_desc"][0].update(type=["float8"]), "case[0].input_desc[0].type"),
    (lambda c: c["input_desc"][0].update(value_range=[[1.0, 0.0]]), "case[0].input_desc[0].value_range"),
    (lambda c: c.update(fuzz_impl="nope.py", fuzz_case_num=2), "case[0].fuzz_impl"),
    (lambda c: c.update(calc_expect_func_file="expect"), "case[0].calc_expect_func_file"),
])
def test_bad_input_names_file_and_field(tmp_path, edit, where):
    c = _case()
    edit(c)
    p = _write(tmp_path, [c])
    with pytest.raises(CannError) as e:
        expand_file(p)
    assert str(e.value).startswith(f"error: {p}: {where}: ")


# --- pass rule -------------------------------------------------------------------------------

@pytest.mark.parametrize("plant, thr, result, pct", [
    (lambda r: r, (0.01, 0.05), "Pass", 100.0),
    (lambda r: r + np.float32(0.01), (0.01, 0.05), "Pass", 100.0),        # 0.01/1.01 is within 0.01
    (lambda r: _bump(r, 50, 1.05), (0.01, 0.05), "Pass", 95.0),           # 5% errors of 0.0476: pass (>=)
    (lambda r: _bump(r, 51, 1.05), (0.01, 0.05), "Failed", 94.9),         # 5.1%: fail
    (lambda r: _bump(r, 51, 1.05), (0.01, 0.1), "Pass", 94.9),
    (lambda r: _bump(r, 1, 1.2), (0.01, 0.05), "Failed", 99.9),            # one error of 0.167 >= 0.1
    (lambda r: _bump(r, 1000, 1.05), (0.05, 0.0), "Pass", 100.0),         # 0.0476 < 0.05
    (lambda r: _bump(r, 1, np.nan), (0.01, 0.05), "Failed", 99.9),         # NaN: an error here (not in msopst)
])
def test_msopst_pass_rule(plant, thr, result, pct):
    expect = np.ones(1000, np.float32)
    v = compare(plant(expect.copy()), expect, thr)
    assert (v.result, round(v.pass_percent, 1)) == (result, pct)


def test_absolute_floor_for_small_values():
    expect = np.full(100, 1e-3, np.float32)
    assert compare(expect * 5, expect).result == "Pass"  # |diff| 4e-3 < 0.01: not an error
    assert compare(np.zeros(3), np.zeros(4)).result == "Failed"


def _bump(a, n, factor):
    a[:n] = a[:n] * np.float32(factor)
    return a


# --- end to end: planted errors in the expectation function ----------------------------------

EXPECT = """
import numpy as np
def _plant(A, B, n, delta):
    r = (A["value"] + B["value"]).astype(np.float32)
    r.flat[:n] += delta
    return r
def exact(A, B, C): return _plant(A, B, 0, 0.0)
def plus_1e2_all(A, B, C): return _plant(A, B, 100, 1e-2)
def plus_2e2_5(A, B, C): return _plant(A, B, 5, 2e-2)
def plus_2e2_6(A, B, C): return _plant(A, B, 6, 2e-2)
def plus_12e2_1(A, B, C): return _plant(A, B, 1, 0.12)
"""

# (function, error_threshold, expected status): A = B = 0.5, so C = 1.0 exactly, 100 elements
PLANTED = [("exact", None, "success"), ("plus_1e2_all", None, "success"), ("plus_2e2_5", None, "success"),
           ("plus_2e2_6", None, "failed"), ("plus_2e2_6", [0.01, 0.1], "success"), ("plus_12e2_1", None, "failed"),
           ("plus_2e2_6", [0.03, 0.05], "success")]


def _planted_file(tmp_path, expects=None):
    (tmp_path / "expect.py").write_text(EXPECT)
    half = dict(shapes=([2, 50],), value=[0.5] * 100)
    cases = []
    for i, (fn, thr, status) in enumerate(PLANTED):
        c = _case(f"planted{i}_{fn}", inputs=[_t("A", **half), _t("B", **half)], outputs=[_t("C", shapes=([2, 50],))],
                  calc_expect_func_file=f"expect.py:{fn}")
        if thr:
            c["error_threshold"] = thr
        if expects:
            c["expect"] = expects[i]
        cases.append(c)
    return _write(tmp_path, cases)


def _run(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


@pytest.mark.parametrize("precision_mode", ["force_fp16", "must_keep_origin_dtype"])
def test_planted_errors_give_msopst_verdicts(tmp_path, capsys, precision_mode):
    p = _planted_file(tmp_path)
    code, out, _ = _run(["run", str(p), "--out", str(tmp_path / "o"), "--precision_mode", precision_mode], capsys)
    assert code == 1
    rpt = json.loads((tmp_path / "o" / "st_report.json").read_text())
    assert [c["status"] for c in rpt["report_list"]] == [s for _, _, s in PLANTED]
    assert rpt["summary"] == {"test case count": 7, "success count": 5, "failed count": 2}
    assert "7 cases: 5 as expected, 2 not" in out


def test_expected_failures_count_as_success_and_report_structure(tmp_path, capsys):
    p = _planted_file(tmp_path, expects=[s for _, _, s in PLANTED])
    code, out, _ = _run(["run", str(p), "--out", str(tmp_path / "o")], capsys)
    assert code == 0
    rpt = json.loads((tmp_path / "o" / "st_report.json").read_text())
    assert set(rpt) == {"run_cmd", "report_list", "summary"}
    assert rpt["summary"] == {"test case count": 7, "success count": 7, "failed count": 0}
    c = rpt["report_list"][3]
    assert (c["case_name"], c["status"], c["expect"]) == ("planted3_plus_2e2_6_case_001_ND_float32", "failed", "failed")
    assert [s["stage_name"] for s in c["trace_detail"]["stage_result"]] == ["run_simulator", "compare_data"]
    assert [s["status"] for s in c["trace_detail"]["stage_result"]] == ["success", "failed"]
    assert "6 of 100 elements" in c["trace_detail"]["stage_result"][1]["result"]
    info = c["trace_detail"]["st_case_info"]
    assert info["op_params"]["op"] == "Add" and len(info["expect_data_paths"]) == 1
    expect = np.fromfile(info["expect_data_paths"][0], np.float32)
    assert np.count_nonzero(expect != 1.0) == 6


def test_run_is_deterministic(tmp_path, capsys):
    p = _write(tmp_path, [_case(inputs=[_t("A", ranges=([-2, 2],)), _t("B")])])
    for d in ("o1", "o2"):
        assert _run(["run", str(p), "--out", str(tmp_path / d), "--seed", "7"], capsys)[0] == 0
    f = "data/Test_Add_case_001_ND_float32_input_0.bin"
    a, b = ((tmp_path / d / f).read_bytes() for d in ("o1", "o2"))
    assert a == b and np.frombuffer(a, np.float32).min() < -1  # drawn from value_range [-2, 2]


def test_cli_bad_input_exits_2_with_one_line(tmp_path, capsys):
    c = _case()
    c["input_desc"][0]["type"] = ["float16", "float32"]
    p = _write(tmp_path, [c])
    code, _, err = _run(["run", str(p), "--out", str(tmp_path / "o")], capsys)
    assert code == 2
    assert err.strip().splitlines() == [f"error: {p}: case[0].input_desc[1].type: every input and output lists the "
                                        "same number of types (2 in input_desc[0], 1 here)"]
    code, _, err = _run(["run", str(tmp_path / "missing.json")], capsys)
    assert code == 2 and err.startswith(f"error: {tmp_path / 'missing.json'}: cannot read")


# --- create ----------------------------------------------------------------------------------

def test_create_from_schema(tmp_path, capsys):
    out = tmp_path / "add.json"
    assert _run(["create", "--op", "Add", "-o", str(out)], capsys)[0] == 0
    [case] = json.loads(out.read_text())
    assert [d["name"] for d in case["input_desc"]] == ["A", "B"]
    assert case["input_desc"][0]["type"] == ["float16", "float32"] and case["input_desc"][0]["format"] == ["ND"]
    assert [c["case_name"] for c in expand_file(out)] == ["Test_Add_001_sub_case_001_ND_float16",
                                                         "Test_Add_001_sub_case_002_ND_float32"]
    assert _run(["run", str(out), "--out", str(tmp_path / "o")], capsys)[0] == 0


def test_create_attributes_and_unknown_op(capsys):
    [case] = create_case("LRN")
    assert {a["name"]: (a["type"], a["value"]) for a in case["attr"]} == {
        "alpha": ("float", pytest.approx(1e-4)), "beta": ("float", 0.75), "bias": ("float", 1.0),
        "size": ("int", 1)}  # required, no default: a placeholder
    assert _run(["create", "--op", "Addd"], capsys)[1:] == ("", "error: --op: Addd is no ONNX operator\n")


@pytest.mark.parametrize("op", ["Conv", "Gemm", "MatMul", "MaxPool", "LRN", "Concat", "BatchNormalization", "Softmax"])
def test_created_case_files_run_and_pass(tmp_path, capsys, op):
    out = tmp_path / f"{op}.json"
    assert _run(["create", "--op", op, "-o", str(out)], capsys)[0] == 0
    code, stdout, _ = _run(["run", str(out), "--out", str(tmp_path / "o")], capsys)
    assert code == 0, stdout
    assert "2 cases: 2 as expected, 0 not" in stdout  # float16 and float32


def test_fuzz_attribute_and_one_profile_rule(tmp_path):
    (tmp_path / "fz.py").write_text("def g():\n    return {'attr': {'axis': {'value': 0}}}\n")
    c = _case(fuzz_impl="fz.py:g", fuzz_case_num=2, attr=[{"name": "axis", "type": "int", "value": "fuzz"}])
    subs = expand_file(_write(tmp_path, [c]))
    assert [s["attr"] for s in subs] == [[{"name": "axis", "type": "int", "value": 0}]] * 2
    c["input_desc"][0]["type"] = ["float16", "float32"]
    p = _write(tmp_path, [c])
    with pytest.raises(CannError, match=r"case\[0\]\.input_desc\[0\]\.type: a fuzz case lists one profile per field"):
        expand_file(p)


def test_declared_output_shape_is_checked(tmp_path, capsys):
    p = _write(tmp_path, [_case(outputs=[_t("C", shapes=([4, 8],))])])  # Add of two [2, 16]: same size, other shape
    code, out, _ = _run(["run", str(p), "--out", str(tmp_path / "o")], capsys)
    assert code == 1
    assert "compare_data: output 0 has shape [2, 16], output_desc[0].shape is [4, 8]" in out


def test_no_command_is_one_line(capsys):
    # was "error: cann-opst: Usage: cann-opst [OPTIONS] COMMAND [ARGS]..." and the rest of the help, as the error
    assert _run([], capsys) == (2, "", "error: cann-opst: no command given (commands: create, run; cann-opst --help)\n")


def test_binary_case_file_is_a_one_line_error(tmp_path, capsys):
    # was: internal error: UnicodeDecodeError (a traceback, exit 1) for `cann-opst run model.onnx`
    p = tmp_path / "model.onnx"
    p.write_bytes(b"\x08\x07\x12\xb0binary")
    code, out, err = _run(["run", str(p), "--out", str(tmp_path / "o")], capsys)
    assert (code, out, err) == (2, "", f"error: {p}: not JSON: not UTF-8 text (byte 3)\n")
    assert not (tmp_path / "o").exists()


def test_bad_option_exits_2(tmp_path, capsys):
    p = _write(tmp_path, [_case()])
    code, _, err = _run(["run", str(p), "--precision_mode", "bogus"], capsys)
    assert code == 2 and err.startswith("error: --precision_mode: unknown precision mode 'bogus'")


def test_docs_commands_run_as_pasted(tmp_path, capsys, monkeypatch):
    """Every ``cann-opst`` line of docs/opst.md's sh block, run as from the repository root (/tmp ->
    tmp_path): in a copy of its test/opst, so that a line without ``--out`` writes its default
    ``st_out/`` there, not into the source tree."""
    import glob
    import re
    import shlex
    import shutil
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    block = re.search(r"```sh\n(.*?)```", (root / "docs" / "opst.md").read_text(), re.S).group(1)
    work = tmp_path / "repo"
    shutil.copytree(root / "test" / "opst", work / "test" / "opst")
    monkeypatch.chdir(work)
    lines = [ln.split("#")[0].strip() for ln in block.splitlines() if ln.startswith("cann-opst ")]
    assert len(lines) == 5
    for line in lines:
        argv = []
        for a in shlex.split(line.replace("/tmp/", f"{tmp_path}/"))[1:]:
            argv += sorted(glob.glob(a)) if "*" in a else [a]
        code, out, err = _run(argv, capsys)
        assert code == 0, (line, out, err)
    assert json.loads((work / "st_out" / "st_report.json").read_text())["run_cmd"].startswith(
        "cann-opst run test/opst/conv.json -c Conv1x1_s2")  # the default --out, relative to the cwd
    rpt = json.loads((tmp_path / "suite_st" / "st_report.json").read_text())
    assert rpt["run_cmd"].startswith("cann-opst run test/opst/add.json test/opst/averagepool.json")
    assert rpt["summary"]["failed count"] == 0 and rpt["summary"]["test case count"] >= 20


def test_single_input_counts_from_outputs_like_msopst(tmp_path):
    # msopst _get_count: one input -> the outputs' 2 combinations, not the input's 2 x 2 = 4
    kw = dict(types=("float16", "float32"))
    c = _case(inputs=[_t("X", ranges=([0.1, 1.0], [-1.0, 1.0]), **kw)], outputs=[_t("Y", **kw)])
    c["op"] = "Relu"
    subs = expand_file(_write(tmp_path, [c]))
    assert [s["case_name"] for s in subs] == ["Test_Add_sub_case_001_ND_float16", "Test_Add_sub_case_002_ND_float32"]
    assert [(s["input_desc"][0]["type"], s["input_desc"][0]["value_range"]) for s in subs] == [
        ("float16", [0.1, 1.0]), ("float16", [-1.0, 1.0])]


def test_missing_expectation_function_exits_2(tmp_path, capsys):
    (tmp_path / "expect.py").write_text("def f(A, B, C):\n    return A['value'] + B['value']\n")
    p = _write(tmp_path, [_case(calc_expect_func_file="expect.py:g")])
    code, _, err = _run(["run", str(p), "--out", str(tmp_path / "o")], capsys)
    assert code == 2
    assert err == (f"error: {p}: Test_Add_case_001_ND_float32: calc_expect_func_file: "
                   f"{tmp_path / 'expect.py'} has no function g\n")
    p = _write(tmp_path, [_case(calc_expect_func_file="expect.py:f")])
    assert _run(["run", str(p), "--out", str(tmp_path / "o")], capsys)[0] == 0
