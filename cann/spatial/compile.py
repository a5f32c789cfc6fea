"""Compile a model for an R x C device grid: import, ``graph-spatial-partition``, cut each device's function
at its exchanges and compile every segment with the usual stages (:mod:`cann.spatial.bundle`)."""

from __future__ import annotations

import os

import onnx
from xdsl.dialects import func
from xdsl.passes import PassPipeline

from cann.compiler import check_core_types, import_model, make_context, stage_pipelines
from cann.dialects import main_function
from cann.dialects.graph_base import _shape, numpy_dtype
from cann.errors import CannError
from cann.options import validate_options
from cann.passes.graph_spatial_partition import parse_grid
from cann.spatial.bundle import SpatialBundle, exchange_table, rank_segments


def _io(f: func.FuncOp, values, attrs) -> list[dict]:
    out = []
    for i, v in enumerate(values):
        d = attrs.data[i] if attrs is not None and i < len(attrs.data) else None
        name = d.data["graph.name"].data if d is not None and "graph.name" in d.data else f"output{i}"
        out.append({"name": name, "shape": list(_shape(v)), "dtype": str(numpy_dtype(v.type.get_element_type()))})
    return out


def compile_segment(module, opts, kb=None):
    """The offline model of one segment module (graph IR, ``@main``): every stage after import."""
    from cann.codegen.offline import build_offline_model
    from cann.passes import ALL_PASSES
    from cann.passes.analysis.ideal import annotate_work

    ctx = make_context()
    for stage, spec in stage_pipelines(opts.soc_version, opts.precision_mode, opts.opt_level, opts.aicore_num or 0,
                                       opts.fusion, opts.first_load_segment, None, kb):
        PassPipeline.parse_spec(ALL_PASSES, spec).apply(ctx, module)
        if stage == "graph":
            annotate_work(module, opts.precision_mode)
    check_core_types(module)
    return build_offline_model(module, opts.gm_reuse)


def partition_module(model, grid: str, depth: int = 1, *, input_shape=None, out_nodes=None, framework=None):
    """The graph module after ``graph-spatial-partition{grid depth}`` (one function per device) and the
    unpartitioned ``@main``'s inputs and outputs ({name, shape, dtype})."""
    from cann.passes import ALL_PASSES

    module = import_model(model, framework=framework, input_shape=input_shape, out_nodes=out_nodes)
    main = main_function(module, "--spatial-split")
    ret = list(main.body.block.ops)[-1]
    io = (_io(main, main.body.block.args, main.arg_attrs), _io(main, ret.operands, main.res_attrs))
    R, C = parse_grid(grid)
    spec = f"graph-fold-transposes,graph-spatial-partition{{grid={R}x{C} depth={depth}}}"
    PassPipeline.parse_spec(ALL_PASSES, spec).apply(make_context(), module)
    return module, io


def compile_spatial(model: str | os.PathLike | onnx.ModelProto, grid: str, *, depth: int = 1,
                    soc_version: str | None = None, precision_mode: str | None = None, opt_level: int | None = None,
                    input_shape=None, out_nodes=None, framework=None, kb=None,
                    device_memory: int | None = None, gm_reuse: bool | str | None = None) -> SpatialBundle:
    """Compile ``model`` for an ``RxC`` device grid (``grid``, e.g. ``"2x2"``); ``depth`` window layers per
    halo exchange. Options as :func:`cann.compile`. ``device_memory``: bytes one device has (default the SoC's
    ``gm_bytes``): every device's peak (its largest segment's ``gm_size`` plus the tensors it holds between
    segments) must fit. ``gm_reuse``: each segment's device memory plan, as :func:`cann.compile`'s.

    Raises:
        CannError: bad options or grid; an op needing the whole image (naming the node); a halo wider than a
            neighbour's slice; a device's peak beyond ``device_memory`` (naming the device and both numbers).
    """
    try:
        R, C = parse_grid(grid)
    except ValueError as e:
        raise CannError("--spatial-split", str(e)) from None
    if depth < 1:
        raise CannError("--spatial-depth", f"{depth}: window layers per exchange, at least 1")
    opts = validate_options(soc_version=soc_version, precision_mode=precision_mode, opt_level=opt_level,
                            input_shape=input_shape, out_nodes=out_nodes, framework=framework, gm_reuse=gm_reuse)
    module, (inputs, outputs) = partition_module(model, grid, depth, input_shape=opts.input_shape,
                                                 out_nodes=opts.out_nodes, framework=opts.framework)
    funcs = [f for f in module.ops if isinstance(f, func.FuncOp)]
    models, ranks = [], []
    compiled: dict[str, int] = {}  # segment text -> blob: devices with the same block shapes share code
    from cann.hw.config import load_soc

    capacity = device_memory or load_soc(opts.soc_version).gm_bytes
    for rank, f in enumerate(funcs):
        steps, mods, ins, outs, held = rank_segments(f, module.attributes)
        blob = []
        for m in mods:
            key = str(m)
            if key not in compiled:
                compiled[key] = len(models)
                models.append(compile_segment(m, opts, kb))
            blob.append(compiled[key])
        for st in steps:
            if "run" in st:
                st["run"] = blob[st["run"]]
        peak = held + max((models[b].gm_size for b in blob), default=0)
        if peak > capacity:
            raise CannError(f"device {rank} ({rank // C}, {rank % C})",
                            f"needs {peak} bytes of device memory (largest segment gm_size plus the tensors held "
                            f"between segments), more than one device's {capacity} bytes; use a finer grid")
        ranks.append({"steps": steps, "inputs": ins, "outputs": outs, "peak_bytes": peak})
    manifest = {"grid": [R, C], "depth": depth, "soc_version": opts.soc_version,
                "precision_mode": opts.precision_mode, "inputs": inputs, "outputs": outputs,
                "exchanges": exchange_table(funcs), "ranks": ranks}
    return SpatialBundle(manifest, models)
