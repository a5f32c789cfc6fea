"""Running expanded msopst sub-cases on the simulated AI Core and writing msopst's ``st_report.json``.

Per sub-case (a dict from :func:`cann.opst.cases.expand_file`):

1. inputs: the ``value`` given (a list, or a ``.bin`` file of the input's type next to the JSON),
   else drawn from ``data_distribute`` / ``value_range`` as msopst's data generator does
   (``uniform``: [low, high); ``normal``: mean low, deviation |high|; ``relu`` / ``sigmoid`` /
   ``softmax`` / ``tanh``: uniform, then that function; ...), with a generator seeded by
   ``seed`` and the sub-case name (same file, same seed: same bytes);
2. the operator runs through :func:`cann.op` (one-node ONNX model, compiled for ``soc_version`` /
   ``precision_mode``, run on the simulator);
3. the expectation: the user's ``calc_expect_func_file`` (called msopst's way: each named input
   as ``{"value", "dtype", "shape", "format"}``, each named output as ``{"dtype", "shape",
   "format"}``, each attribute by name; returns an array or a list of arrays) or else onnx's
   reference evaluator on the same node;
4. every output is compared with :func:`cann.opst.compare.compare` and ``error_threshold``, and
   its shape with the declared ``output_desc`` shape;
5. stages ``run_simulator`` and ``compare_data`` go into the report; a case's status is
   ``failed`` when a stage failed; it counts as a success when its status equals its ``expect``.
"""

from __future__ import annotations

import importlib.util
import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper

from cann.errors import CannError
from cann.fileio import atomic_output
from cann.mixed import node_spec, op, tensor_type
from cann.opst.cases import DEFAULT_ERROR_THRESHOLD, TYPES
from cann.opst.compare import compare


@dataclass
class CaseResult:
    """One sub-case's outcome: ``status`` "success"/"failed", ``stages`` (msopst stage dicts),
    per-output ``verdicts``, and the data written (paths)."""

    case: dict
    status: str = "success"
    stages: list = field(default_factory=list)
    verdicts: list = field(default_factory=list)
    paths: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.case["case_name"]

    @property
    def ok(self) -> bool:
        return self.status == self.case.get("expect", "success")

    def stage(self, name: str, ok: bool, result=None) -> None:
        self.stages.append({"status": "success" if ok else "failed", "result": result, "stage_name": name})
        if not ok:
            self.status = "failed"


def generate(shape, dtype: str, distribution: str, low: float, high: float, rng: np.random.Generator):
    """Input data as msopst's ``DataGenerator.gen_data`` defines the distributions."""
    np_type = np.dtype(TYPES[dtype])
    if np_type == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if distribution == "normal":
        data = rng.normal(low, abs(high) + 1e-4, size=shape)
    elif distribution == "beta":
        data = rng.beta(abs(low) + 1e-4, abs(high) + 1e-4, size=shape)
    elif distribution == "laplace":
        data = rng.laplace(low, abs(high) + 1e-4, size=shape)
    elif distribution == "triangular":
        data = rng.triangular(low, rng.uniform(low, high), high, size=shape) if high > low else np.full(shape, low)
    else:
        data = rng.uniform(low, high, size=shape)
        if distribution == "relu":
            data = np.maximum(0, data)
        elif distribution == "sigmoid":
            data = 1 / (1 + np.exp(-data))
        elif distribution == "softmax":
            data = np.exp(data) / np.sum(np.exp(data))
        elif distribution == "tanh":
            data = np.tanh(data)
    return data.astype(np_type)


def _input(desc: dict, rng, where: str) -> np.ndarray:
    np_type = np.dtype(TYPES[desc["type"]])
    v = desc.get("value")
    if v is None:
        lo, hi = desc["value_range"]
        return generate(tuple(desc["shape"]), desc["type"], desc["data_distribute"], lo, hi, rng)
    if isinstance(v, str):
        p = Path(where).parent / v
        try:
            a = np.fromfile(p, np_type)
        except OSError as e:
            raise CannError(f"{where}: value", f"cannot read {p}: {e.strerror}") from None
    else:
        a = np.asarray(v, np_type)
    if a.size != int(np.prod(desc["shape"], dtype=np.int64)):
        raise CannError(f"{where}: value", f"{a.size} values for shape {desc['shape']}")
    return a.reshape(desc["shape"])


def _attr_value(a: dict):
    if a["type"] in ("type", "data_type"):
        return helper.np_dtype_to_tensor_dtype(np.dtype(TYPES[a["value"]]))
    return a["value"]


def reference(case: dict, inputs: list[np.ndarray], n_out: int) -> list[np.ndarray]:
    """Outputs of onnx's reference evaluator on the sub-case's node."""
    from onnx.reference import ReferenceEvaluator

    attrs = {a["name"]: _attr_value(a) for a in case.get("attr", [])}
    spec = node_spec(case["op"], tuple(inputs), "", None, n_out, attrs, case["case_name"])
    names = spec.input_names[:len(inputs)]
    graph = helper.make_graph(
        [spec.node(names, spec.output_names, case["op"])], case["op"],
        [helper.make_value_info(n, tensor_type(a)) for n, a in zip(names, inputs)],
        [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in spec.output_names])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", spec.opset)])
    sess = ReferenceEvaluator(model)
    return [np.asarray(o) for o in sess.run(None, dict(zip(names, inputs)))]


def _load_function(path: str, func: str, where: str):
    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    if spec is None:
        raise CannError(where, f"{path} is not a Python file")
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except OSError as e:
        raise CannError(where, f"cannot read {path}: {e.strerror}") from None
    if not callable(getattr(mod, func, None)):
        raise CannError(where, f"{path} has no function {func}")
    return getattr(mod, func)


def user_expectation(case: dict, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """The user's ``calc_expect_func_file`` outputs, called with msopst's arguments."""
    fn = _load_function(case["calc_expect_func_file"], case["calc_expect_func_file_func"],
                        f"{case['json_path']}: {case['case_name']}: calc_expect_func_file")
    kw = {}
    for d, a in zip(case["input_desc"], inputs):
        if d.get("name"):
            kw[d["name"]] = {"value": a, "dtype": d["type"], "shape": tuple(d["shape"]), "format": d["format"]}
    for d in case["output_desc"]:
        if d.get("name"):
            kw[d["name"]] = {"dtype": d["type"], "shape": tuple(d["shape"]), "format": d["format"]}
    for a in case.get("attr", []):
        kw[a["name"]] = a["value"]
    out = fn(**kw)
    return [np.asarray(o) for o in (out if isinstance(out, (list, tuple)) else [out])]


def run_case(case: dict, *, seed: int = 0, soc_version: str | None = None, precision_mode: str | None = None,
             data_dir: Path | None = None) -> CaseResult:
    """Run one sub-case; never raises for a failure of the operator (it is a failed stage)."""
    res = CaseResult(case)
    where = f"{case['json_path']}: {case['case_name']}"
    rng = np.random.default_rng([seed, zlib.crc32(case["case_name"].encode())])
    inputs = [_input(d, rng, case["json_path"]) for d in case["input_desc"]]
    n_out = len(case["output_desc"])
    attrs = {a["name"]: _attr_value(a) for a in case.get("attr", [])}
    try:
        out = op(case["op"], *inputs, outputs=n_out, soc_version=soc_version, precision_mode=precision_mode, **attrs)
        real = list(out) if isinstance(out, tuple) else [out]
        res.stage("run_simulator", True)
    except CannError as e:
        res.stage("run_simulator", False, f"{where}: {e}")
        return res
    try:
        expect = user_expectation(case, inputs) if case.get("calc_expect_func_file") else reference(case, inputs, n_out)
    except CannError:
        raise
    except Exception as e:  # noqa: BLE001 - the user's function or the reference failing is a failed stage
        res.stage("compare_data", False, f"expectation failed: {type(e).__name__}: {e}")
        return res
    thr = case.get("error_threshold") or list(DEFAULT_ERROR_THRESHOLD)
    ok = len(expect) == len(real)
    shape_msgs = []
    for i, (r, e) in enumerate(zip(real, expect)):
        v = compare(r, e, thr)
        res.verdicts.append(v)
        ok = ok and v.passed
        declared = tuple(case["output_desc"][i]["shape"])
        if tuple(r.shape) != declared:  # msopst would size the output buffer from the declared shape
            ok = False
            shape_msgs.append(f"output {i} has shape {list(r.shape)}, output_desc[{i}].shape is {list(declared)}")
    if data_dir is not None:
        res.paths = _save(data_dir, case, inputs, real, expect)
    msg = "; ".join(f"output {i}: {v.result}, {v.message}" for i, v in enumerate(res.verdicts))
    if len(expect) != len(real):
        msg = f"the expectation gives {len(expect)} outputs, the operator {len(real)}"
    msg = "; ".join(shape_msgs + [msg])
    res.stage("compare_data", ok, msg)
    return res


def _save(d: Path, case: dict, inputs, real, expect) -> dict:
    d.mkdir(parents=True, exist_ok=True)
    paths = {"input_data_path": [], "planned_output_data_paths": [], "expect_data_paths": []}
    name = case["case_name"]
    for key, arrays, tag in (("input_data_path", inputs, "input"), ("planned_output_data_paths", real, "output"),
                             ("expect_data_paths", expect, "expect_output")):
        for i, a in enumerate(arrays):
            p = d / f"{name}_{tag}_{i}.bin"
            with atomic_output(p, "wb") as f:
                f.write(np.ascontiguousarray(a).tobytes())
            paths[key].append(str(p))
    return paths


def report(results: list[CaseResult], run_cmd: str) -> dict:
    """msopst's ``st_report.json`` content (``OpSTReport._to_json_obj``)."""
    cases = []
    for r in results:
        case_info = {"case_name": r.name, "op_params": {k: v for k, v in r.case.items() if k != "json_path"},
                     "input_data_path": r.paths.get("input_data_path", []),
                     "expect_data_paths": r.paths.get("expect_data_paths", []),
                     "planned_output_data_paths": r.paths.get("planned_output_data_paths", [])}
        cases.append({"case_name": r.name, "status": r.status, "expect": r.case.get("expect", "success"),
                      "trace_detail": {"st_case_info": case_info, "stage_result": r.stages}})
    ok = sum(r.ok for r in results)
    return {"run_cmd": run_cmd, "report_list": cases,
            "summary": {"test case count": len(results), "success count": ok, "failed count": len(results) - ok}}


def write_report(path: Path, content: dict) -> None:
    with atomic_output(path) as f:
        json.dump(content, f, indent=4)
        f.write("\n")


def summary_table(results: list[CaseResult]) -> str:
    """A readable table: case, status (expected), worst pass share, largest error, verdict."""
    rows = [("case", "status", "expect", "within%", "max rel err", "")]
    for r in results:
        pct = min((v.pass_percent for v in r.verdicts), default=float("nan"))
        mx = max((v.max_error for v in r.verdicts), default=float("nan"))
        rows.append((r.name, r.status, r.case.get("expect", "success"), f"{pct:.2f}", f"{mx:.4g}",
                     "ok" if r.ok else "UNEXPECTED"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    for r in results:
        if not r.ok:
            why = next((f"{s['stage_name']}: {s['result']}" for s in r.stages if s["status"] != "success"),
                       "every stage succeeded")
            lines.append(f"{r.name}: {why}")
    ok = sum(r.ok for r in results)
    lines.append(f"{len(results)} cases: {ok} as expected, {len(results) - ok} not")
    return "\n".join(lines)


def run_file_cases(cases: list[dict], **kw) -> list[CaseResult]:
    return [run_case(c, **kw) for c in cases]


