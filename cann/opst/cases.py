"""msopst case files: loading, checking and expanding them into sub-cases exactly as msopst does.

A case file is a JSON list of cases (Huawei msopst's format)::

    [{"case_name": "Test_Add_001", "op": "Add",
      "input_desc": [{"name": "A", "format": ["ND"], "type": ["float16", "float32"],
                      "shape": [[2, 16]], "data_distribute": ["uniform"], "value_range": [[0.1, 1.0]]},
                     ...],
      "output_desc": [{"name": "C", "format": ["ND"], "type": ["float16", "float32"], "shape": [[2, 16]]}],
      "attr": [{"name": "alpha", "type": "float", "value": 1.0}],
      "calc_expect_func_file": "expect.py:calc", "error_threshold": [0.01, 0.05], "expect": "success"}]

Expansion (re-implemented from msopst's ``tools/msopst/st/interface/subcase_design_cross.py``,
``SubCaseDesignCross._cross_tensor`` / ``subcase_generate`` / ``_get_sub_test_cases``, and
``subcase_design_fuzz.py``, ``SubCaseDesignFuzz.subcase_generate``, Ascend/msopgen):

* each *tensor* is crossed on its own, in the order ``format, shape, type, data_distribute,
  value_range`` for inputs and ``format, shape, type`` for outputs (``itertools.product``, the
  first key outermost); ``ori_format`` / ``ori_shape`` are zipped with ``format`` / ``shape``;
  ``data_distribute`` defaults to ``["uniform"]``, ``value_range`` to ``[[0.1, 1.0]]``;
* tensors are *not* crossed with each other: every input and output must list the same number
  of formats, of types and of shapes, every input must give the same number of combinations, and
  sub-case ``i`` takes combination ``i`` of every input. Outputs give fewer combinations when
  inputs list several distributions or ranges; then msopst takes output combination
  ``i % len(output_desc)`` (its indexing, kept so that names and types match msopst's); with a
  single input the *outputs'* combination count is the sub-case count (msopst's ``_get_count``),
  so that input's extra distributions / ranges are not all run;
* names: ``<case_name>_case_NNN_<format>_<type>`` (``_sub_case_`` when any field lists more than
  one entry; ``/`` in the case name becomes ``_``), NNN counting from 001 per case;
* ``fuzz_impl: "fuzz.py:func"`` (function default ``fuzz_branch``) and ``fuzz_case_num``
  (1..2000): the function is called ``fuzz_case_num`` times; each call returns a dict or a list
  of dicts ``{"input_desc": {name: {field: value}}, "output_desc": ..., "attr": {name: {"value": v}}}``
  whose entries replace the fields written ``"fuzz"``; sub-cases ``<case_name>_fuzz_case_NNN_<format>_<type>``.

Every problem is a :class:`~cann.errors.CannError` located at ``file: case[i].field``.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
from pathlib import Path

from cann.errors import CannError

#: msopst's type names (``st/config/white_list_config.json`` subset the simulator can run) -> numpy
TYPES = {"float16": "float16", "float32": "float32", "float": "float32", "float64": "float64",
         "double": "float64", "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
         "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64", "bool": "bool"}
FORMATS = ("ND", "NCHW", "NHWC", "NC1HWC0", "FRACTAL_Z", "FRACTAL_NZ", "HWCN", "NDHWC", "NCDHW")
DISTRIBUTIONS = ("uniform", "normal", "beta", "laplace", "triangular", "relu", "sigmoid", "softmax", "tanh")
INPUT_CROSS = ("format", "shape", "type", "data_distribute", "value_range")
OUTPUT_CROSS = ("format", "shape", "type")
DEFAULT_ERROR_THRESHOLD = (0.01, 0.05)
MAX_FUZZ_CASE_NUM = 2000
REQUIRED = ("op", "input_desc", "output_desc", "case_name")


class _Where:
    def __init__(self, path: Path, index: int, prefix: str = ""):
        self.path, self.index, self.prefix = path, index, prefix

    def at(self, prefix: str) -> "_Where":
        return _Where(self.path, self.index, prefix)

    def err(self, field: str, message: str) -> CannError:
        return CannError(f"{self.path}: case[{self.index}].{self.prefix}{field}", message)


def load_json(path: str | Path) -> list[dict]:
    """The list of case objects in ``path`` (a single object is accepted as a one-case list)."""
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except OSError as e:
        raise CannError(str(p), f"cannot read: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise CannError(f"{p}:{e.lineno}", f"not JSON: {e.msg}") from None
    except UnicodeDecodeError as e:  # a binary file (an .onnx given for the case file): not a traceback
        raise CannError(str(p), f"not JSON: not UTF-8 text (byte {e.start})") from None
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not all(isinstance(c, dict) for c in data):
        raise CannError(str(p), "a case file is a JSON list of case objects")
    return data


def _str_list(w: _Where, desc: dict, field: str, allowed, default=None) -> list:
    v = desc.get(field, default)
    if v is None:
        raise w.err(field, "missing")
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list) or not v or not all(isinstance(s, str) for s in v):
        raise w.err(field, f"a non-empty list of strings, not {v!r}")
    for s in v:
        if allowed is not None and s not in allowed:
            raise w.err(field, f"{s!r} is not one of {', '.join(allowed)}")
    return v


def _list_list(w: _Where, desc: dict, field: str, default=None, numbers=float) -> list:
    v = desc.get(field, default)
    if v is None:
        raise w.err(field, "missing")
    if isinstance(v, list) and (not v or not isinstance(v[0], list)):
        v = [v]  # msopst accepts one shape written flat
    ok = isinstance(v, list) and v and all(isinstance(s, list) and all(
        isinstance(x, (int, float)) and not isinstance(x, bool) for x in s) for s in v)
    if not ok:
        raise w.err(field, f"a non-empty list of lists of numbers, not {v!r}")
    if field == "shape":
        for s in v:
            if any(not isinstance(x, int) or x < 0 for x in s):
                raise w.err(field, f"dimensions are non-negative integers, not {s!r}")
    if field == "value_range":
        for r in v:
            if len(r) != 2 or r[0] > r[1]:
                raise w.err(field, f"a range is [low, high] with low <= high, not {r!r}")
    return v


def _tensor_fields(w: _Where, desc: dict, kind: str) -> dict:
    """The per-field lists of one input/output description (msopst ``_make_input_desc_list``)."""
    f = {"format": _str_list(w, desc, "format", FORMATS),
         "shape": _list_list(w, desc, "shape"),
         "type": _str_list(w, desc, "type", tuple(TYPES))}
    if kind == "input_desc":
        has_value = desc.get("value") is not None
        f["data_distribute"] = (_str_list(w, desc, "data_distribute", DISTRIBUTIONS) if
                                "data_distribute" in desc and not has_value else ["uniform"])
        f["value_range"] = (_list_list(w, desc, "value_range") if
                            "value_range" in desc and not has_value else [[0.1, 1.0]])
        if has_value:
            if any(len(x) > 1 for x in f.values()):
                raise w.err("value", "with a value, every other field lists one entry only")
            if not isinstance(desc["value"], (list, str, int, float)):
                raise w.err("value", "a list of numbers or a .bin file")
            f["value"] = [desc["value"]]
    for extra in ("ori_format", "ori_shape"):
        if extra in desc:
            vals = desc[extra] if isinstance(desc[extra], list) else [desc[extra]]
            base = f["format" if extra == "ori_format" else "shape"]
            if len(vals) != len(base):
                raise w.err(extra, f"lists {len(vals)} entries, {extra[4:]} lists {len(base)}")
            f[extra] = vals
    return f


def _cross(fields: dict, keys: tuple[str, ...]) -> list[dict]:
    """One tensor's combinations: the product of ``keys`` (``ori_*`` riding along their base)."""
    cols = []
    for k in keys:
        if k == "format" and "ori_format" in fields:
            cols.append([{"format": a, "ori_format": b} for a, b in zip(fields["format"], fields["ori_format"])])
        elif k == "shape" and "ori_shape" in fields:
            cols.append([{"shape": a, "ori_shape": b} for a, b in zip(fields["shape"], fields["ori_shape"])])
        else:
            cols.append([{k: v} for v in fields[k]])
    if "value" in fields:
        cols.append([{"value": fields["value"][0]}])
    out = []
    for combo in itertools.product(*cols):
        d = {}
        for part in combo:
            d.update(part)
        out.append(d)
    return out


def _attrs(w: _Where, case: dict, fuzz: dict | None = None) -> list[dict]:
    attrs = case.get("attr", [])
    if not isinstance(attrs, list):
        raise w.err("attr", "a list of {name, type, value}")
    seen, out = set(), []
    for j, a in enumerate(attrs):
        if not isinstance(a, dict) or not {"name", "type", "value"} <= set(a):
            raise w.err(f"attr[{j}]", "needs name, type and value")
        if a["name"] in seen:
            raise w.err(f"attr[{j}].name", f"{a['name']!r} given twice")
        seen.add(a["name"])
        a = dict(a)
        if a["value"] == "fuzz":
            a["value"] = _fuzz_field(w, fuzz, "attr", a["name"], "value", f"attr[{j}].value")
        out.append(a)
    return out


def _error_threshold(w: _Where, case: dict):
    t = case.get("error_threshold")
    if t is None:
        return None
    if (not isinstance(t, list) or len(t) != 2 or not all(isinstance(x, (int, float)) for x in t)
            or not all(0 <= x <= 1 for x in t)):
        raise w.err("error_threshold", f"a pair [relative error, failing share] in [0, 1], not {t!r}")
    return [float(x) for x in t]


def _common(w: _Where, case: dict, sub: dict, attrs: list[dict]) -> dict:
    if attrs:
        sub["attr"] = attrs
    f = case.get("calc_expect_func_file")
    if f is not None:
        if not isinstance(f, str) or f.count(":") != 1 or not f.split(":")[0].endswith(".py"):
            raise w.err("calc_expect_func_file", f"'file.py:function', not {f!r}")
        file, func = f.split(":")
        sub["calc_expect_func_file"] = str((w.path.parent / file).resolve())
        sub["calc_expect_func_file_func"] = func.strip()
    thr = _error_threshold(w, case)
    if thr is not None:
        sub["error_threshold"] = thr
    expect = case.get("expect", "success")
    if expect not in ("success", "failed"):
        raise w.err("expect", f"'success' or 'failed', not {expect!r}")
    sub["expect"] = expect
    sub["json_path"] = str(w.path)
    return sub


def _named(descs: list[dict], combos: list[dict]) -> list[dict]:
    return [dict(c, name=d["name"]) if d.get("name") else dict(c) for d, c in zip(descs, combos)]


def expand_cross(w: _Where, case: dict) -> list[dict]:
    """The sub-cases of a non-fuzz case (msopst ``SubCaseDesignCross.subcase_generate``)."""
    ins_d, outs_d = case["input_desc"], case["output_desc"]
    if not isinstance(ins_d, list) or not isinstance(outs_d, list) or not outs_d:
        raise w.err("output_desc" if isinstance(ins_d, list) else "input_desc", "a (non-empty) list of tensor descriptions")
    ins = [_tensor_fields(w.at(f"input_desc[{j}]."), d, "input_desc") for j, d in enumerate(ins_d)]
    outs = [_tensor_fields(w.at(f"output_desc[{j}]."), d, "output_desc") for j, d in enumerate(outs_d)]
    multi = any(len(v) > 1 for f in ins + outs for v in f.values())
    if ins:
        for key in ("format", "type", "shape"):
            n = len(ins[0][key])
            for k, f in [(f"input_desc[{j}]", f) for j, f in enumerate(ins)] + [
                    (f"output_desc[{j}]", f) for j, f in enumerate(outs)]:
                if len(f[key]) != n:
                    raise w.err(f"{k}.{key}", f"every input and output lists the same number of {key}s "
                                f"({n} in input_desc[0], {len(f[key])} here)")
    in_cases = [_cross(f, INPUT_CROSS) for f in ins]
    out_cases = [_cross(f, OUTPUT_CROSS) for f in outs]
    # msopst's ``_get_count``: with two or more inputs the inputs give the count, else the outputs
    # do (so a single input's extra distributions / ranges are dropped, as msopst drops them)
    lists = in_cases if len(in_cases) > 1 else out_cases
    if len({len(c) for c in lists}) != 1:
        raise w.err("input_desc" if len(in_cases) > 1 else "output_desc",
                    f"the tensors give different numbers of combinations: {[len(c) for c in lists]}")
    count = len(lists[0])
    prefix = case["case_name"].replace("/", "_") + ("_sub_case_" if multi else "_case_")
    attrs = _attrs(w, case)
    subs = []
    for i in range(count):
        oi = i if i < len(out_cases[0]) else i % len(out_cases)  # msopst's indexing, kept on purpose
        sub = {"op": case["op"],
               "input_desc": _named(ins_d, [c[i] for c in in_cases]),
               "output_desc": _named(outs_d, [c[oi] for c in out_cases])}
        o = sub["output_desc"][0]
        sub["case_name"] = f"{prefix}{i + 1:03d}_{o['format']}_{o['type']}"
        subs.append(_common(w, case, sub, attrs))
    return subs


def _fuzz_field(w: _Where, fuzz: dict | None, kind: str, name, field: str, where: str):
    try:
        return fuzz[kind][name][field]
    except (KeyError, TypeError):
        raise w.err(where, f"is 'fuzz' but the fuzz function returned no {kind}[{name!r}][{field!r}]") from None


def _fuzz_function(w: _Where, spec):
    if not isinstance(spec, str) or spec.count(":") > 1:
        raise w.err("fuzz_impl", f"'fuzz.py[:function]', not {spec!r}")
    file, _, func = spec.partition(":")
    func = func.strip() or "fuzz_branch"
    path = (w.path.parent / file).resolve()
    if path.suffix != ".py" or not path.is_file():
        raise w.err("fuzz_impl", f"{path} is no Python file")
    mod_spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(mod_spec)
    try:
        mod_spec.loader.exec_module(mod)
    except Exception as e:  # noqa: BLE001 - the user's file
        raise w.err("fuzz_impl", f"{path} failed to import: {type(e).__name__}: {e}") from None
    if not callable(getattr(mod, func, None)):
        raise w.err("fuzz_impl", f"{path} has no function {func}")
    return getattr(mod, func)


def expand_fuzz(w: _Where, case: dict) -> list[dict]:
    """The sub-cases of a fuzz case (msopst ``SubCaseDesignFuzz.subcase_generate``)."""
    fn = _fuzz_function(w, case["fuzz_impl"])
    n = case.get("fuzz_case_num")
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_FUZZ_CASE_NUM:
        raise w.err("fuzz_case_num", f"an integer in [1, {MAX_FUZZ_CASE_NUM}], not {n!r}")
    prefix = case["case_name"].replace("/", "_") + "_fuzz_case_"
    subs = []
    for _ in range(n):
        ret = fn()
        rets = [ret] if isinstance(ret, dict) else ret
        if not isinstance(rets, list) or not all(isinstance(r, dict) for r in rets):
            raise w.err("fuzz_impl", f"the fuzz function returns a dict or a list of dicts, not {type(ret).__name__}")
        for fz in rets:
            sub = {"op": case["op"]}
            for kind in ("input_desc", "output_desc"):
                descs = []
                for j, d in enumerate(case[kind]):
                    d = {k: (_fuzz_field(w, fz, kind, d.get("name"), k, f"{kind}[{j}].{k}") if v == "fuzz" else v)
                         for k, v in d.items()}
                    f = _tensor_fields(w.at(f"{kind}[{j}]."), d, kind)
                    for k, v in f.items():
                        if len(v) > 1:
                            raise w.err(f"{kind}[{j}].{k}", "a fuzz case lists one profile per field")
                    descs.append(dict({k: v[0] for k, v in f.items()}, **({"name": d["name"]} if d.get("name") else {})))
                sub[kind] = descs
            o = sub["output_desc"][0]
            sub["case_name"] = f"{prefix}{len(subs) + 1:03d}_{o['format']}_{o['type']}"
            subs.append(_common(w, case, sub, _attrs(w, case, fz)))
    return subs


def expand_file(path: str | Path, case_names: list[str] | None = None) -> list[dict]:
    """All sub-cases of a case file, in msopst's order; ``case_names`` keeps only those cases."""
    p = Path(path)
    subs, seen = [], set()
    for i, case in enumerate(load_json(p)):
        w = _Where(p, i)
        if case.get("compile_flag"):
            continue
        for k in REQUIRED:
            if k not in case:
                raise w.err(k, "missing (required: " + ", ".join(REQUIRED) + ")")
        if not isinstance(case["case_name"], str) or not case["case_name"]:
            raise w.err("case_name", "a non-empty string")
        if case["case_name"] in seen:
            raise w.err("case_name", f"{case['case_name']!r} is used twice")
        seen.add(case["case_name"])
        if case_names and case["case_name"] not in case_names:
            continue
        subs += expand_fuzz(w, case) if case.get("fuzz_impl") else expand_cross(w, case)
    if not subs:
        raise CannError(str(p), "no case to run" + (f" named {', '.join(case_names)}" if case_names else ""))
    return subs
