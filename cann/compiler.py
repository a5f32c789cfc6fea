"""The compiler driver: an ordered table of stages, each a pass pipeline ``cann-opt -p`` accepts.

``graph``   the imported model (ONNX or TensorFlow -> graph dialect: shapes inferred, constants
            folded), then ``graph-fold-transposes`` (layout transposes cancelled / sunk)
``tile``    ``convert-graph-to-tile{...}``: kernels over on-chip buffers, one per op
``ascend``  ``convert-tile-to-ascend,ascend-insert-sync``: instructions, conservatively synchronized
``asm``     the encoded kernels' disassembly

The model may also be the text of a stage (a ``.mlir`` file that ``--emit`` or ``cann-opt`` wrote,
or an edited one): :func:`module_stage` detects its stage from its dialects and only the later
stages run.

:func:`compile` runs every stage and encodes the result into an offline model; :func:`emit`
stops at a stage and writes its text (large constants go to a sidecar ``.npz``, see
docs/ir-text.md).
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import IO

import onnx
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import PassPipeline

from cann.fileio import atomic_write_bytes
from cann.errors import CannError, Diagnostic
from cann.hw.config import load_soc
from cann.options import DEFAULT_SOC, OPTIONS, PRECISION_MODES, CompileOptions, validate_options  # noqa: F401

STAGES = ("graph", "tile", "ascend", "asm")
TEXT_STAGES = ("graph", "tile", "ascend")


def make_context() -> Context:
    """A context with every dialect the project's IR uses (loaded lazily)."""
    from xdsl.dialects.builtin import Builtin
    from xdsl.dialects.func import Func

    from cann.dialects import ALL_DIALECTS

    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(Func)
    for name, factory in ALL_DIALECTS.items():
        ctx.register_dialect(name, factory)
    return ctx


def stage_pipelines(soc_version: str, precision_mode: str, opt_level: int = 1,
                    aicore_num: int = 0, fusion: dict[str, bool] | None = None,
                    first_load_segment: int = 0, tiling: dict[str, dict[str, int]] | None = None,
                    kb: str | os.PathLike | bool | None = None, keep: tuple[str, ...] = (),
                    keep_rules: bool = False) -> list[tuple[str, str]]:
    """``(stage, pipeline)`` pairs after import; each pipeline string can be pasted into ``cann-opt -p``.

    ``-O0`` is the conservative baseline: one kernel per op, one copy of each buffer, barrier
    synchronization. ``-O1`` adds graph fusion (BatchNormalization folding) and UB fusion
    (``graph.fused`` kernels), each of which ``fusion`` (from an ATC fusion switch file,
    :mod:`cann.passes.fusion_switch`) can turn off, and task auto-pipelining (docs/pipelining.md):
    tilings planned for two copies of each refilled tile (``buffers=2``), ``tile-multi-buffer``
    (``first_load_segment``: its ``first_segment_bytes``, 0 the rule, -1 none) and flag
    synchronization (``ascend-insert-sync{mode=flags}``). ``tiling`` (kernel name -> {field: value})
    pins kernels' tilings (``convert-graph-to-tile{tiling=...}``); ``kb``, the knowledge bases whose
    tilings ``tile-search-kb`` records on the graph ops they fit (docs/autotune.md): None the
    package's shipped file, a path that file on top of the shipped one, ``"none"`` or False neither.
    ``keep`` (ONNX node names) and ``keep_rules`` (overflow-prone op kinds): ``keep-dtype``, the last
    graph pass, keeps them in float32 (docs/precision.md).
    """
    from cann.passes.fusion_switch import PASSES, graph_pipeline
    from cann.passes.tile_search_kb import resolve

    graph_passes = ["graph-channel-shuffle", "graph-fold-transposes"]
    if opt_level >= 1:
        graph_passes += graph_pipeline(fusion or {name: True for name in PASSES}, soc_version)
    user, shipped = resolve(kb if isinstance(kb, (bool, type(None))) else os.fspath(kb))
    if user or shipped:
        graph_passes.append("tile-search-kb{" + (f"kb={json.dumps(user)} " if user else "")
                            + f"shipped={'true' if shipped else 'false'} soc={soc_version} "
                            f"precision_mode={precision_mode}" + (f" aicore_num={aicore_num}" if aicore_num else "") + "}")
    if keep or keep_rules:
        graph_passes.append("keep-dtype{" + (f"nodes={json.dumps(','.join(keep))}" if keep else "")
                            + (" " if keep and keep_rules else "") + ("rules=true" if keep_rules else "") + "}")
    tile = (f"convert-graph-to-tile{{soc={soc_version} precision_mode={precision_mode}"
            + (f" aicore_num={aicore_num}" if aicore_num else "") + (" buffers=2" if opt_level >= 1 else "")
            + (f" tiling={json.dumps(json.dumps(tiling, sort_keys=True))}" if tiling else "") + "}")
    if opt_level >= 1:
        tile += ",tile-multi-buffer" + (f"{{first_segment_bytes={first_load_segment}}}" if first_load_segment else "")
    sync = "ascend-insert-sync{mode=flags}" if opt_level >= 1 else "ascend-insert-sync"
    return [("graph", ",".join(graph_passes)), ("tile", tile), ("ascend", f"convert-tile-to-ascend,{sync}")]


def model_framework(model, framework: int | str | None = None) -> str:
    """``"onnx"``, ``"tensorflow"`` or ``"mlir"``: from ``framework`` (ATC's 3 = TensorFlow, 5 = ONNX,
    or a name), else from the model (a ``GraphDef``, serialized bytes, or a path whose suffix is
    ``.pb``; ``.mlir``: cann's text IR of a stage)."""
    if framework is not None:
        return validate_options(framework=framework).framework
    if isinstance(model, ModuleOp):  # an in-memory module of a stage (e.g. cann.training's programs)
        return "mlir"
    if isinstance(model, onnx.ModelProto):
        return "onnx"
    if type(model).__name__ == "GraphDef" or isinstance(model, (bytes, bytearray, memoryview)):
        return "tensorflow"
    if isinstance(model, (str, os.PathLike)):
        suffix = Path(model).suffix.lower()
        if suffix in (".pb", ".mlir"):
            return {".pb": "tensorflow", ".mlir": "mlir"}[suffix]
    return "onnx"


def import_model(model, *, framework: int | str | None = None,
                 input_shape: dict[str, tuple[int, ...]] | None = None,
                 out_nodes: list[str] | None = None) -> ModuleOp:
    """Import an ONNX or TensorFlow model (see :func:`model_framework`) into a graph-dialect module."""
    if model_framework(model, framework) == "tensorflow":
        from cann.frontend.tf import import_tf

        return import_tf(model, input_shape=input_shape, out_nodes=out_nodes)
    from cann.frontend.onnx import import_onnx

    return import_onnx(model, input_shape=input_shape, out_nodes=out_nodes)


def module_stage(module: ModuleOp) -> str:
    """The stage a module's text belongs to (``graph``, ``tile`` or ``ascend``): the lowest-level
    cann dialect among its operations.

    Raises:
        CannError: the module holds no operation of a cann dialect.
    """
    found = {op.name.split(".", 1)[0] for op in module.walk()}
    for stage in reversed(TEXT_STAGES):
        if stage in found:
            return stage
    raise CannError("<module>", "no graph, tile or ascend operation: not the IR of a cann stage")


def load_text(path: str | os.PathLike) -> ModuleOp:
    """Parse and verify the text IR of a stage (as ``cann-compile --emit`` or ``cann-opt`` write it),
    resolving its large constants (docs/ir-text.md).

    Raises:
        CannError: unreadable file, parse error or failed verification (naming the file).
    """
    from xdsl.utils.exceptions import DiagnosticException, ParseError

    from cann.dialects.weights import parse_module

    where = os.fspath(path)
    try:
        text = Path(where).read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise CannError(where, f"cannot read: {getattr(e, 'strerror', None) or e}") from None
    try:
        module = parse_module(text, make_context(), os.path.dirname(os.path.abspath(where)), name=where)
        module.verify()
    except ParseError as e:
        raise CannError(str(e.span.get_location()), _first_line(e.msg)) from None
    except (DiagnosticException, ValueError) as e:
        raise CannError(where, _first_line(str(e))) from None
    return module


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    return lines[0] if lines else "unknown error"


#: options that only apply to importing a model (not to a stage's text IR)
_IMPORT_OPTIONS = ("input_shape", "out_nodes", "fusion_switch_file", "opt_level", "keep_dtype")


def _text_module(model, opts: CompileOptions) -> tuple[ModuleOp, str]:
    """The module of a ``.mlir`` file and its stage; options checked against what the stage fixed."""
    module = model.clone() if isinstance(model, ModuleOp) else load_text(model)
    stage = module_stage(module)
    where = "<module>" if isinstance(model, ModuleOp) else os.fspath(model)
    for name in _IMPORT_OPTIONS:
        if name in opts.given:
            raise CannError(OPTIONS[name].flag, f"does not apply to {where}: its {stage} IR is already imported"
                                                + (" and optimized" if name in ("opt_level", "fusion_switch_file") else ""))
    if stage != "graph":
        recorded = {"soc_version": "tile.soc", "precision_mode": "tile.precision_mode"}
        for name, attr in recorded.items():
            value = module.attributes.get(attr)
            value = getattr(value, "data", None)
            if name in opts.given and value is not None and getattr(opts, name) != value:
                raise CannError(OPTIONS[name].flag, f"{where} was lowered for {attr} = {value!r}, "
                                                    f"not {getattr(opts, name)!r}")
        for name in ("aicore_num", "first_load_segment"):
            if name in opts.given:
                raise CannError(OPTIONS[name].flag, f"does not apply to {where}: its {stage} IR is already lowered")
    return module, stage


def lower(model: str | os.PathLike | onnx.ModelProto, *, soc_version: str | None = None,
          precision_mode: str | None = None, input_shape: dict[str, tuple[int, ...]] | str | None = None,
          out_nodes: list[str] | str | None = None, opt_level: int | None = None, until: str = "ascend",
          fusion_switch_file: str | None = None, aicore_num: int | str | None = None,
          framework: int | str | None = None, first_load_segment: int | str | None = None,
          tiling: dict[str, dict[str, int]] | None = None, kb: str | os.PathLike | bool | None = None,
          keep_dtype: str | os.PathLike | list[str] | None = None,
          calibration_inputs: dict | None = None) -> ModuleOp:
    """Import ``model`` and run the stages up to and including ``until`` (a name in ``STAGES``).

    ``framework``: 3 / ``"tensorflow"`` or 5 / ``"onnx"``; by default a ``.pb`` path, bytes or a
    ``GraphDef`` are TensorFlow, a ``.mlir`` path the text IR of a stage (``graph``, ``tile`` or
    ``ascend``, detected from its dialects: only the later stages run) and everything else ONNX.
    Options are checked by :func:`cann.options.validate_options` (``None``: the default); ``tiling``
    (kernel name -> {field: value}) pins kernels' tilings, checked by ``convert-graph-to-tile``;
    ``kb``: None the shipped knowledge base, a path a user's on top of it, ``"none"`` / False
    neither (:mod:`cann.passes.tile_search_kb`). ``keep_dtype`` (ATC's file or a list of ONNX node
    names) and ``precision_mode="allow_mix_precision"`` (rules and a calibration run on
    ``calibration_inputs``, default seeded random ones): :func:`kept_nodes`.

    Raises:
        CannError: bad options, a malformed or unsupported model, a pinned tiling beyond the SoC.
    """
    from cann.passes import ALL_PASSES

    opts = validate_options(soc_version=soc_version, precision_mode=precision_mode, input_shape=input_shape,
                            out_nodes=out_nodes, opt_level=opt_level, fusion_switch_file=fusion_switch_file,
                            aicore_num=aicore_num, framework=framework, first_load_segment=first_load_segment,
                            keep_dtype=keep_dtype)
    last = until if until != "asm" else "ascend"
    if isinstance(model, ModuleOp) and module_stage(model) == "graph":
        # an in-memory graph module (e.g. a cann.training program) is compiled as a fresh import:
        # the graph passes run, so -O, fusion switches and keep_dtype apply
        for name in ("input_shape", "out_nodes"):
            if name in opts.given:
                raise CannError(OPTIONS[name].flag, "does not apply to <module>: its graph IR is already imported")
        module, done = model.clone(), None
    elif model_framework(model, framework) == "mlir":
        module, done = _text_module(model, opts)
        if STAGES.index(done) > STAGES.index(last):
            raise CannError("<module>" if isinstance(model, ModuleOp) else os.fspath(model),
                            f"holds {done} IR, past the requested stage '{until}'")
    else:
        module, done = import_model(model, framework=opts.framework, input_shape=opts.input_shape,
                                    out_nodes=opts.out_nodes), None
    keep = kept_nodes(model, module, opts, calibration_inputs) if done is None else ()
    ctx = make_context()
    for stage, spec in stage_pipelines(opts.soc_version, opts.precision_mode, opts.opt_level,
                                       opts.aicore_num or 0, opts.fusion, opts.first_load_segment, tiling, kb,
                                       keep, opts.precision_mode == "allow_mix_precision"):
        if done is not None and STAGES.index(stage) <= STAGES.index(done):
            continue
        if STAGES.index(stage) > STAGES.index(last):
            break
        PassPipeline.parse_spec(ALL_PASSES, spec).apply(ctx, module)
        if stage == "graph":  # the model work of each node, for the profile's ideal bound
            from cann.passes.analysis.ideal import annotate_work

            annotate_work(module, opts.precision_mode)
    return module


def kept_nodes(model, module: ModuleOp, opts: CompileOptions, inputs: dict | None = None) -> tuple[str, ...]:
    """The ONNX nodes kept in float32: those of ``opts.keep_dtype`` (each must name a node of the
    imported ``module``) and, under ``allow_mix_precision`` for an ONNX ``model``, those a calibration
    run on ``inputs`` finds beyond float16's range (:func:`cann.calibration.calibrate_keep_dtype`).

    Raises:
        CannError: ``FILE:LINE: node 'X' is not a node of the model ...`` (one per unknown name).
    """
    from cann.calibration import calibrate_keep_dtype, calibration_inputs, op_names

    names = op_names(module)
    listed = opts.keep_dtype or ()
    unknown = [Diagnostic(where, f"node '{n}' is not a node of the model that computes at run time")
               for n, where in listed if n not in names]
    if unknown:
        raise CannError.many(unknown)
    keep = [n for n, _ in listed]
    if opts.precision_mode == "allow_mix_precision" and model_framework(model, opts.framework) == "onnx":
        proto = onnx.load(os.fspath(model)) if isinstance(model, (str, os.PathLike)) else model
        feeds = inputs if inputs is not None else calibration_inputs(proto, shapes=opts.input_shape)
        keep += [n for n in calibrate_keep_dtype(proto, feeds, graph_names=names) if n not in keep]
    return tuple(keep)


def check_core_types(module: ModuleOp) -> None:
    """On a SoC with separated cube (AIC) and vector (AIV) cores, refuse kernels that use both
    units: the compiler emits coupled-core code, which such a SoC cannot run.

    Raises:
        CannError: one diagnostic per such kernel (``kernel 'NAME': uses both the cube and the vector unit ...``).
    """
    from cann.codegen.encode import module_kernels
    from cann.hw import isa
    from cann.sim.executor import core_kind

    soc = module.attributes.get("tile.soc")
    spec = load_soc(soc.data if soc is not None else DEFAULT_SOC)
    if spec.coupled:
        return
    problems = []
    for name, _block_dim, _num_args, code in module_kernels(module):
        try:
            core_kind(spec, isa.decode(code), name)
        except CannError:
            problems.append(Diagnostic(f"kernel '{name}'", f"uses both the cube and the vector unit: {spec.name} has "
                                       "separated cube (AIC) and vector (AIV) cores, and cann does not split "
                                       "kernels between them yet (only vector-only kernels compile for it)"))
    if problems:
        raise CannError.many(problems)


def compile(model: str | os.PathLike | onnx.ModelProto, *, soc_version: str | None = None,
            precision_mode: str | None = None, input_shape: dict[str, tuple[int, ...]] | str | None = None,
            out_nodes: list[str] | str | None = None, opt_level: int | None = None,
            fusion_switch_file: str | None = None, aicore_num: int | str | None = None,
            framework: int | str | None = None, fusion_report: str | os.PathLike | None = None,
            first_load_segment: int | str | None = None, tiling: dict[str, dict[str, int]] | None = None,
            kb: str | os.PathLike | bool | None = None, keep_dtype: str | os.PathLike | list[str] | None = None,
            calibration_inputs: dict | None = None, gm_reuse: bool | str | None = None):
    """Compile an ONNX model (a path or a ``ModelProto``), a frozen TensorFlow GraphDef (a ``.pb``
    path, its bytes or a ``GraphDef``; ``framework=3`` for another suffix) or the text IR of a stage
    (a ``.mlir`` path: the remaining stages run) for the modeled AI Core.

    Options (validated as ``cann-compile`` validates its flags, :mod:`cann.options`; each accepts
    the command line's spelling too): ``soc_version`` (default ``"Ascend910"``), ``precision_mode``
    (default ``"force_fp16"``), ``input_shape`` (``{"x": (1, 3, 224, 224)}`` or ``"x:1,3,224,224"``),
    ``out_nodes`` (tensor names or ATC's ``node:output_index``), ``opt_level`` (0 or 1, default 1),
    ``fusion_switch_file`` (a path), ``aicore_num`` (cores each kernel is spread over, 1 to the
    SoC's count; default all), ``first_load_segment`` (bytes of the first segment of each kernel's
    first load at ``-O1``: 0 the default rule, -1 no segmentation), ``tiling`` (kernel name -> {field:
    value}, e.g. ``{"conv2d_0": {"rows": 4}}``: pins kernels' tilings, docs/supported-ops.md names the
    fields; a pin beyond the SoC's buffers is an error), ``kb`` (knowledge bases of tuned tilings,
    docs/autotune.md: their entries for this SoC, precision mode and compiler version are applied to
    the graph ops of their signature; None, the default: the package's shipped file; a path: that
    file on top of the shipped one, its entries winning; ``"none"`` or False: neither). ``fusion_report``: a path where the fusion report (JSON,
    :mod:`cann.codegen.report`) is written; the report is also ``Model.fusion_report``.
    ``keep_dtype``: ATC's keep_dtype file (one ONNX node name per line) or a list of node names kept
    in float32 under an fp16 precision mode; ``precision_mode="allow_mix_precision"`` keeps
    overflow-prone op kinds and the nodes a calibration run on ``calibration_inputs`` (default:
    seeded uniform [0, 1) inputs) finds beyond float16's range (docs/precision.md).
    ``Model.kept_fp32`` is then ``(kept, total)`` graph ops. ``gm_reuse`` (default on; ``"off"`` or
    False: every activation and workspace gets its own device memory): activations and workspaces
    whose lifetimes do not intersect share GM (:mod:`cann.codegen.gm_plan`; recorded in the ``.om``).

    Returns:
        cann.runtime.Model: runs on the simulator (``Model.run``), saves as ``.om`` (``Model.save``).

    Raises:
        CannError: bad options, a malformed model, unsupported operators (one diagnostic per node),
            kernels a separated-core SoC (Ascend910B1) cannot run yet.
    """
    from cann.codegen.offline import build_offline_model
    from cann.runtime import Model

    reuse = validate_options(gm_reuse=gm_reuse).gm_reuse  # its error before any work
    module = lower(model, soc_version=soc_version, precision_mode=precision_mode, input_shape=input_shape,
                   out_nodes=out_nodes, opt_level=opt_level, fusion_switch_file=fusion_switch_file,
                   aicore_num=aicore_num, framework=framework, first_load_segment=first_load_segment,
                   tiling=tiling, kb=kb, keep_dtype=keep_dtype, calibration_inputs=calibration_inputs)
    check_core_types(module)
    from cann.codegen.report import fusion_report as make_report, report_json

    compiled = Model(build_offline_model(module, reuse))
    compiled.fusion_report = make_report(module)
    kept = module.attributes.get("cann.kept_fp32")
    compiled.kept_fp32 = tuple(a.value.data for a in kept.data) if kept is not None else None
    if fusion_report is not None:
        atomic_write_bytes(fusion_report, report_json(module).encode())
    return compiled


def check_writable(path: str | os.PathLike) -> None:
    """Fail early, naming ``path``, when it cannot be written: a missing directory, or ``path`` is a directory.

    Raises:
        CannError: ``<path>: cannot write: ...``.
    """
    p = Path(path)
    if p.is_dir():
        raise CannError(str(p), "cannot write: is a directory")
    if not p.parent.is_dir():
        raise CannError(str(p), "cannot write: No such file or directory")


def emit(model: str | os.PathLike | onnx.ModelProto, stage: str, out: IO[str] | str | os.PathLike, **options) -> None:
    """Write the text of ``stage`` (``graph``, ``tile``, ``ascend`` or ``asm``) to ``out``.

    For a path, large constants go to ``<out>.npz`` next to it (docs/ir-text.md); on a stream
    their blobs follow the module in a ``{-# dialect_resources #-}`` section.

    Raises:
        CannError: as :func:`lower`; ``out`` a directory or in a missing directory (naming ``out``).
    """
    from cann.dialects.weights import print_module

    if stage not in STAGES:
        raise CannError("--emit", f"unknown stage '{stage}' (known: {', '.join(STAGES)})")
    if isinstance(out, (str, os.PathLike)):
        check_writable(out)
    module = lower(model, until=stage, **options)
    if stage == "asm":
        from cann.codegen.disasm import disassemble_code
        from cann.codegen.encode import module_kernels

        text = io.StringIO()
        for name, block_dim, num_args, code in module_kernels(module):
            text.write(f"kernel {name} (block_dim={block_dim}, num_args={num_args}):\n")
            text.write(disassemble_code(code, name))
    else:
        text = io.StringIO()
        print_module(module, text, weights_path=str(out) + ".npz" if isinstance(out, (str, os.PathLike)) else None)
    if isinstance(out, (str, os.PathLike)):
        atomic_write_bytes(out, text.getvalue().encode())
    else:
        out.write(text.getvalue())
