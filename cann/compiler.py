"""The compiler driver: an ordered table of stages, each a pass pipeline ``cann-opt -p`` accepts.

``graph``   the imported model (ONNX or TensorFlow -> graph dialect: shapes inferred, constants
            folded), then ``graph-fold-transposes`` (layout transposes cancelled / sunk)
``tile``    ``convert-graph-to-tile{...}``: kernels over on-chip buffers, one per op
``ascend``  ``convert-tile-to-ascend,ascend-insert-sync``: instructions, conservatively synchronized
``asm``     the encoded kernels' disassembly

:func:`compile` runs every stage and encodes the result into an offline model; :func:`emit`
stops at a stage and writes its text (large constants go to a sidecar ``.npz``, see
docs/ir-text.md).
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import IO

import onnx
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import PassPipeline

from cann.fileio import atomic_write_bytes
from cann.errors import CannError
from cann.hw.config import load_soc

STAGES = ("graph", "tile", "ascend", "asm")
PRECISION_MODES = ("force_fp16", "allow_fp32_to_fp16", "must_keep_origin_dtype", "force_fp32")


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
                    aicore_num: int = 0, fusion: dict[str, bool] | None = None) -> list[tuple[str, str]]:
    """``(stage, pipeline)`` pairs after import; each pipeline string can be pasted into ``cann-opt -p``.

    ``-O0`` is the conservative baseline: one kernel per op, barrier synchronization. ``-O1`` adds
    graph fusion (BatchNormalization folding) and UB fusion (``graph.fused`` kernels), each of
    which ``fusion`` (from an ATC fusion switch file, :mod:`cann.passes.fusion_switch`) can turn off.
    """
    from cann.passes.fusion_switch import PASSES, graph_pipeline

    graph_passes = ["graph-fold-transposes"]
    if opt_level >= 1:
        graph_passes += graph_pipeline(fusion or {name: True for name in PASSES})
    return [
        ("graph", ",".join(graph_passes)),
        ("tile", f"convert-graph-to-tile{{soc={soc_version} precision_mode={precision_mode}"
                 + (f" aicore_num={aicore_num}" if aicore_num else "") + "}"),
        ("ascend", "convert-tile-to-ascend,ascend-insert-sync"),
    ]


def _check_options(soc_version: str, precision_mode: str, opt_level: int) -> None:
    load_soc(soc_version)
    if precision_mode not in PRECISION_MODES:
        raise CannError("--precision_mode", f"unknown precision mode '{precision_mode}' "
                                            f"(known: {', '.join(PRECISION_MODES)})")
    if opt_level not in (0, 1):
        raise CannError("-O", f"unknown optimization level {opt_level} (known: 0, 1)")


FRAMEWORKS = {3: "tensorflow", 5: "onnx", "tensorflow": "tensorflow", "tf": "tensorflow", "onnx": "onnx"}


def model_framework(model, framework: int | str | None = None) -> str:
    """``"onnx"`` or ``"tensorflow"``: from ``framework`` (ATC's 3 = TensorFlow, 5 = ONNX, or a name),
    else from the model (a ``GraphDef``, serialized bytes, or a path whose suffix is ``.pb``)."""
    if framework is not None:
        if framework not in FRAMEWORKS:
            raise CannError("--framework", f"unsupported framework {framework!r} (3 = TensorFlow, 5 = ONNX)")
        return FRAMEWORKS[framework]
    if isinstance(model, onnx.ModelProto):
        return "onnx"
    if type(model).__name__ == "GraphDef" or isinstance(model, (bytes, bytearray, memoryview)):
        return "tensorflow"
    if isinstance(model, (str, os.PathLike)) and Path(model).suffix.lower() == ".pb":
        return "tensorflow"
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


def lower(model: str | os.PathLike | onnx.ModelProto, *, soc_version: str = "Ascend910",
          precision_mode: str = "force_fp16", input_shape: dict[str, tuple[int, ...]] | None = None,
          out_nodes: list[str] | None = None, opt_level: int = 1, until: str = "ascend",
          fusion_switch_file: str | None = None, aicore_num: int | None = None,
          framework: int | str | None = None) -> ModuleOp:
    """Import ``model`` and run the stages up to and including ``until`` (a name in ``STAGES``).

    ``framework``: 3 / ``"tensorflow"`` or 5 / ``"onnx"``; by default a ``.pb`` path, bytes or a
    ``GraphDef`` are TensorFlow and everything else ONNX.

    Raises:
        CannError: bad options, a malformed or unsupported model.
    """
    from cann.passes import ALL_PASSES

    _check_options(soc_version, precision_mode, opt_level)
    fusion = None
    if fusion_switch_file is not None:
        from cann.passes.fusion_switch import parse_fusion_switch

        fusion = parse_fusion_switch(fusion_switch_file)
    module = import_model(model, framework=framework, input_shape=input_shape, out_nodes=out_nodes)
    ctx = make_context()
    for stage, spec in stage_pipelines(soc_version, precision_mode, opt_level, aicore_num or 0, fusion):
        if STAGES.index(stage) > STAGES.index(until if until != "asm" else "ascend"):
            break
        PassPipeline.parse_spec(ALL_PASSES, spec).apply(ctx, module)
        if stage == "graph":  # the model work of each node, for the profile's ideal bound
            from cann.passes.analysis.ideal import annotate_work

            annotate_work(module, precision_mode)
    return module


def compile(model: str | os.PathLike | onnx.ModelProto, *, soc_version: str = "Ascend910",
            precision_mode: str = "force_fp16", input_shape: dict[str, tuple[int, ...]] | None = None,
            out_nodes: list[str] | None = None, opt_level: int = 1, fusion_switch_file: str | None = None,
            aicore_num: int | None = None, framework: int | str | None = None,
            fusion_report: str | os.PathLike | None = None):
    """Compile an ONNX model (a path or a ``ModelProto``) or a frozen TensorFlow GraphDef (a ``.pb``
    path, its bytes or a ``GraphDef``; ``framework=3`` for another suffix) for the modeled AI Core.

    ``aicore_num`` caps the cores each kernel is spread over (default: all of the SoC's).
    ``fusion_report``: a path where the fusion report (JSON, :mod:`cann.codegen.report`) is written;
    the report is also ``Model.fusion_report``.

    Returns:
        cann.runtime.Model: runs on the simulator (``Model.run``), saves as ``.om`` (``Model.save``).

    Raises:
        CannError: bad options, a malformed model, unsupported operators (one diagnostic per node).
    """
    from cann.codegen.offline import build_offline_model
    from cann.runtime import Model

    module = lower(model, soc_version=soc_version, precision_mode=precision_mode, input_shape=input_shape,
                   out_nodes=out_nodes, opt_level=opt_level, fusion_switch_file=fusion_switch_file,
                   aicore_num=aicore_num, framework=framework)
    from cann.codegen.report import fusion_report as make_report, report_json

    compiled = Model(build_offline_model(module))
    compiled.fusion_report = make_report(module)
    if fusion_report is not None:
        atomic_write_bytes(fusion_report, report_json(module).encode())
    return compiled


def emit(model: str | os.PathLike | onnx.ModelProto, stage: str, out: IO[str] | str | os.PathLike, **options) -> None:
    """Write the text of ``stage`` (``graph``, ``tile``, ``ascend`` or ``asm``) to ``out``.

    For a path, large constants go to ``<out>.npz`` next to it (docs/ir-text.md); on a stream
    small ones are inline and large ones are handles whose blobs are not saved.
    """
    from cann.dialects.weights import print_module

    if stage not in STAGES:
        raise CannError("--emit", f"unknown stage '{stage}' (known: {', '.join(STAGES)})")
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
