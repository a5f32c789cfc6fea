"""Compile options: one table that validates every option of :func:`cann.compile` and ``cann-compile``.

Each option is named by its ATC flag (``--soc_version``, ``--aicore_num``, ...), which is the
location of its errors in the Python API and on the command line alike. A value may be given the
way the command line spells it (a string: ``aicore_num="8|"``, ``input_shape="x:1,3,224,224"``,
``out_nodes="a;b:0"``, ``opt_level="1"``) or as the Python value (``8``, ``{"x": (1, 3, 224, 224)}``,
``["a", "b:0"]``, ``1``); :func:`validate_options` returns the normalized :class:`CompileOptions`.

``cann-opt`` checks the same values given as pass options (``convert-graph-to-tile{soc=...}``)
with :func:`check_pass_options`, naming the pass option instead of the flag.
"""

from __future__ import annotations

import numbers
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from cann.codegen.om import FP16_PRECISION_MODES, PRECISION_MODES  # noqa: F401  (the modes an .om records: one list)
from cann.errors import CannError, Diagnostic

OPT_LEVELS = (0, 1)
DEFAULT_SOC = "Ascend910"
DEFAULT_PRECISION_MODE = "force_fp16"
DEFAULT_OPT_LEVEL = 1
#: ATC's framework numbers and the names the API accepts for them; "mlir" is cann's own text IR.
FRAMEWORKS = {3: "tensorflow", 5: "onnx", "tensorflow": "tensorflow", "tf": "tensorflow", "onnx": "onnx",
              "mlir": "mlir"}


class BadValue(Exception):
    """A bad option value (the message only; the caller adds the location)."""


def split_last_colon(entry: str, flag: str) -> tuple[str, str]:
    """``"x:0:1,3"`` -> ``("x:0", "1,3")``: tensor names may contain colons, values do not.

    Raises:
        CannError: no colon, or nothing before it (location ``flag``).
    """
    name, sep, value = entry.rpartition(":")
    if not sep or not name:
        raise CannError(flag, f"'{entry}' is not of the form NAME:VALUE")
    return name, value


def _soc(value) -> str:
    from cann.hw.config import soc_name_problem

    if problem := soc_name_problem(value):
        raise BadValue(problem)
    return value


def _precision_mode(value) -> str:
    if value not in PRECISION_MODES:
        raise BadValue(f"unknown precision mode {value!r} (known: {', '.join(PRECISION_MODES)})")
    return value


def _opt_level(value) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or value not in OPT_LEVELS:
        raise BadValue(f"unknown optimization level {value!r} (known: 0, 1)")
    return value


def _first_load_segment(value) -> int:
    """Bytes of the first segment of a kernel's first load (``tile-multi-buffer``'s
    ``first_segment_bytes``): 0 the rule, -1 none."""
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < -1:
        raise BadValue(f"expected a byte count (0: the default rule, -1: no segmentation), got {value!r}")
    return value


def _aicore_num(value) -> int:
    """ATC's ``N`` or ``N|`` (cube cores; the vector count after '|' is ignored on a coupled core)."""
    if isinstance(value, str):
        head = value.split("|", 1)[0].strip()
        if head.isdigit():
            value = int(head)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BadValue(f"expected a positive core count like 8 or '8|', got {value!r}")
    return value


def _input_shape(value) -> dict[str, tuple[int, ...]]:
    """``"a:1,3,224,224;b:1,10"`` or ``{"a": (1, 3, 224, 224)}`` -> ``{"a": (1, 3, 224, 224), ...}``."""
    shapes: dict[str, tuple[int, ...]] = {}
    if isinstance(value, str):
        for entry in value.split(";"):
            entry = entry.strip()
            if not entry:
                continue
            name, dims = split_last_colon(entry, "--input_shape")
            if name in shapes:
                raise BadValue(f"input '{name}' is given twice")
            try:
                shapes[name] = tuple(int(d) for d in dims.split(","))
            except ValueError:
                raise BadValue(f"'{entry}': dimensions must be comma-separated integers") from None
    elif isinstance(value, Mapping):
        for name, dims in value.items():
            try:
                shape = tuple(dims)
            except TypeError:
                raise BadValue(f"'{name}': expected a sequence of dimensions, got {dims!r}") from None
            if not isinstance(name, str) or not all(isinstance(d, numbers.Integral) and not isinstance(d, bool)
                                                    for d in shape):
                raise BadValue(f"'{name}': dimensions must be integers, got {dims!r}")
            shapes[name] = tuple(int(d) for d in shape)
    else:
        raise BadValue(f"expected 'NAME:D0,D1,...;...' or a dict name -> shape, got {value!r}")
    for name, shape in shapes.items():
        if any(d < 1 for d in shape):
            raise BadValue(f"'{name}:{','.join(map(str, shape))}': dimensions must be positive "
                           f"(dynamic shapes are not supported)")
    if not shapes:
        raise BadValue("no shape given")
    return shapes


def _out_nodes(value) -> list[str]:
    """``"a;b:0"`` or ``["a", "b:0"]`` -> ``["a", "b:0"]`` (each a tensor name, or ATC's ``node:output_index``)."""
    if isinstance(value, str):
        nodes = [n.strip() for n in value.split(";") if n.strip()]
    elif isinstance(value, (list, tuple)) and all(isinstance(n, str) for n in value):
        nodes = [n.strip() for n in value]
        if not all(nodes):
            raise BadValue("an empty output name")
    else:
        raise BadValue(f"expected 'NAME;...' or a list of names, got {value!r}")
    if not nodes:
        raise BadValue("no output given")
    if len(set(nodes)) != len(nodes):
        raise BadValue(f"an output is given twice: {'; '.join(nodes)}")
    return nodes


def _fusion_switch_file(value) -> dict[str, bool]:
    from cann.passes.fusion_switch import parse_fusion_switch

    if not isinstance(value, (str, os.PathLike)):
        raise BadValue(f"expected a file path, got {value!r}")
    return parse_fusion_switch(value)  # its own errors name the file and line


def _keep_dtype(value) -> tuple[tuple[str, str], ...]:
    """ATC's keep_dtype file (a path: one node name per line) or a list of node names ->
    ``((name, where), ...)``, ``where`` the file and line (``FILE:3``) or ``keep_dtype[i]``."""
    if isinstance(value, (str, os.PathLike)):
        from cann.passes.keep_dtype import parse_keep_dtype

        return tuple((name, f"{os.fspath(value)}:{line}") for name, line in parse_keep_dtype(value))
    if isinstance(value, (list, tuple)) and all(isinstance(n, str) and n.strip() for n in value):
        names = [n.strip() for n in value]
        if len(set(names)) != len(names):
            raise BadValue(f"a node is listed twice: {', '.join(names)}")
        return tuple((n, f"keep_dtype[{i}]") for i, n in enumerate(names))
    raise BadValue(f"expected a keep_dtype file path or a list of node names, got {value!r}")


#: the values of ``--gm-reuse`` and what they mean
GM_REUSE = {"on": True, "off": False}


def _gm_reuse(value) -> bool:
    """``"on"`` / ``"off"`` or a bool -> whether activations and workspaces share GM."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in GM_REUSE:
        return GM_REUSE[value.strip().lower()]
    raise BadValue(f"expected on or off, got {value!r}")


def _framework(value) -> str:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or value not in FRAMEWORKS:
        raise BadValue(f"unsupported framework {value!r} (3 = TensorFlow, 5 = ONNX)")
    return FRAMEWORKS[value]


@dataclass(frozen=True)
class Option:
    """One compile option: its ``cann.compile`` keyword, ATC flag, pass option (if any) and check."""

    name: str
    flag: str
    check: Callable[[Any], Any]
    help: str
    pass_option: str | None = None  # its name as a ``convert-graph-to-tile`` option


#: every compile option, by its ``cann.compile`` keyword
OPTIONS: dict[str, Option] = {o.name: o for o in (
    Option("soc_version", "--soc_version", _soc, "target SoC (a file of cann/hw/socs)", "soc"),
    Option("precision_mode", "--precision_mode", _precision_mode, ", ".join(PRECISION_MODES), "precision_mode"),
    Option("opt_level", "-O", _opt_level, "0: one kernel per op, barrier sync, one copy of each buffer; 1: fusion, "
           "flag sync, multi-buffering and segmented first loads"),
    Option("first_load_segment", "--first-load-segment", _first_load_segment,
           "bytes of the first segment of a kernel's first load at -O1 (0: the rule, -1: none)", "first_segment_bytes"),
    Option("aicore_num", "--aicore_num", _aicore_num, "AI cores a kernel may use (N or N|)", "aicore_num"),
    Option("input_shape", "--input_shape", _input_shape, "static input shapes"),
    Option("out_nodes", "--out_nodes", _out_nodes, "model outputs (tensor names or node:output_index)"),
    Option("fusion_switch_file", "--fusion_switch_file", _fusion_switch_file, "ATC fusion switch file"),
    Option("framework", "--framework", _framework, "3 = TensorFlow, 5 = ONNX"),
    Option("gm_reuse", "--gm-reuse", _gm_reuse, "on (default): activations and workspaces whose lifetimes do not "
           "intersect share device memory; off: each its own bytes"),
    Option("keep_dtype", "--keep_dtype", _keep_dtype, "ATC keep_dtype file: ONNX nodes kept in float32 under an "
           "fp16 precision mode"),
)}


@dataclass(frozen=True)
class CompileOptions:
    """Validated compile options (``None``: not given)."""

    soc_version: str = DEFAULT_SOC
    precision_mode: str = DEFAULT_PRECISION_MODE
    opt_level: int = DEFAULT_OPT_LEVEL
    first_load_segment: int = 0
    aicore_num: int | None = None
    input_shape: dict[str, tuple[int, ...]] | None = None
    out_nodes: list[str] | None = None
    fusion: dict[str, bool] | None = None  # from fusion_switch_file
    framework: str | None = None
    keep_dtype: tuple[tuple[str, str], ...] | None = None  # (node name, where it was listed)
    gm_reuse: bool = True
    given: frozenset[str] = frozenset()  # the options given explicitly (not None)


def validate_options(**values) -> CompileOptions:
    """Check and normalize compile options (keywords of :data:`OPTIONS`; ``None`` = not given).

    Raises:
        CannError: one diagnostic per bad option, located at its flag (``--aicore_num``), e.g.
            an unknown SoC or precision mode, ``aicore_num`` below 1 or above the SoC's core count,
            a malformed shape, an unreadable fusion switch file.
    """
    unknown = sorted(set(values) - set(OPTIONS))
    if unknown:
        raise CannError("cann.compile", f"unknown option(s): {', '.join(unknown)} (known: {', '.join(OPTIONS)})")
    out: dict[str, Any] = {}
    problems: list[Diagnostic] = []
    for name, opt in OPTIONS.items():
        value = values.get(name)
        if value is None:
            continue
        try:
            out[name] = opt.check(value)
        except BadValue as e:
            problems.append(Diagnostic(opt.flag, str(e)))
        except CannError as e:
            problems += e.diagnostics
    soc = out.get("soc_version", DEFAULT_SOC)
    if out.get("aicore_num") is not None and "--soc_version" not in {d.location for d in problems}:
        try:
            _check_core_count(out["aicore_num"], soc)
        except BadValue as e:
            problems.append(Diagnostic("--aicore_num", str(e)))
    if out.get("first_load_segment") is not None and out.get("opt_level", DEFAULT_OPT_LEVEL) == 0:
        problems.append(Diagnostic("--first-load-segment", "applies at -O1 (task auto-pipelining); -O0 keeps one "
                                                           "copy of every buffer and whole loads"))
    if out.get("keep_dtype") and out.get("precision_mode", DEFAULT_PRECISION_MODE) not in FP16_PRECISION_MODES:
        problems.append(Diagnostic("--keep_dtype", f"applies to the float16 precision modes "
                                                   f"({', '.join(FP16_PRECISION_MODES)}): under "
                                                   f"{out['precision_mode']} every node is float32 already"))
    if problems:
        raise CannError.many(problems)
    given = frozenset(out)
    if "fusion_switch_file" in out:
        out["fusion"] = out.pop("fusion_switch_file")
    return CompileOptions(**out, given=given)


def _check_core_count(n: int, soc_name: str) -> None:
    from cann.hw.config import load_soc

    cores = load_soc(soc_name).ai_core_count
    if n > cores:
        raise BadValue(f"{n} cores requested; {soc_name} has {cores}")


def check_pass_options(pass_name: str, pass_op) -> None:
    """Check a pass's options that are compile options (``convert-graph-to-tile{soc=...
    precision_mode=... aicore_num=...}``) with the same table; ``aicore_num=0`` means all cores,
    and an option left at ``None`` is not given.

    Raises:
        CannError: located at the pass, naming the option (``bad pass option soc=X: unknown SoC ...``).
    """
    problems = []
    bad = set()
    for opt in OPTIONS.values():
        if opt.pass_option is None or not hasattr(pass_op, opt.pass_option):
            continue
        value = getattr(pass_op, opt.pass_option)
        if value is None or opt.name == "aicore_num" and value == 0:  # not given / all cores
            continue
        try:
            opt.check(value)
            if opt.name == "aicore_num" and "soc_version" not in bad:
                _check_core_count(value, getattr(pass_op, "soc", DEFAULT_SOC))
        except (BadValue, CannError) as e:
            bad.add(opt.name)
            msg = str(e) if isinstance(e, BadValue) else e.diagnostics[0].message
            problems.append(Diagnostic(pass_name, f"bad pass option {opt.pass_option}={value}: {msg}"))
    if problems:
        raise CannError.many(problems)


def resolve_out_nodes(entries: list[str], tensors: set[str], node_outputs: Mapping[str, list[str]]) -> list[str]:
    """Tensor names for ``--out_nodes`` entries: a tensor name stays; ATC's ``node_name:output_index``
    becomes that node's output (``node_outputs``: node name -> its output tensor names).

    Raises:
        CannError: an entry naming neither a tensor nor an output of a node (one line per entry).
    """
    out, problems = [], []
    for entry in entries:
        if entry in tensors:
            out.append(entry)
            continue
        node, sep, index = entry.rpartition(":")
        outputs = node_outputs.get(node) if sep else None
        if outputs is not None and index.isdigit() and int(index) < len(outputs) and outputs[int(index)]:
            out.append(outputs[int(index)])
        elif outputs is not None:
            problems.append(Diagnostic(entry, f"node '{node}' has no output {index} (it has {len(outputs)})"))
        else:
            problems.append(Diagnostic(entry, "output names no tensor of the model (nor node_name:output_index)"))
    if problems:
        raise CannError.many(problems)
    return out
