"""``cann-compile``: compile a model to an offline model (``.om``), in the spirit of Huawei's ATC.

    cann-compile model.onnx -o model.om
    cann-compile --model=model.onnx --framework=5 --output=model --soc_version=Ascend910 \\
        --input_shape="input:1,3,224,224" --precision_mode=force_fp16
    cann-compile model.onnx --emit tile -o -          # print the tile-level IR
    cann-compile model.pb --framework=3 --input_shape="input:1,224,224,3" -o model.om   # TensorFlow
    cann-compile model.ascend.mlir -o model.om        # finish the pipeline from a stage's text IR
    cann-compile model.onnx -o model.om --tune        # tune the convolutions first (model.kb.json)
    cann-compile model.onnx --precision_mode allow_mix_precision -o model.om   # fp16, overflow-prone nodes fp32
    cann-compile model.onnx --calibrate-keep-dtype keep.txt && cann-compile model.onnx --keep_dtype keep.txt -o m.om
    cann-compile model.onnx --device-memory 1048576 -o m.om   # fail (exit 2) when the model needs more than 1 MiB
    cann-compile fcn.onnx --spatial-split 2x2 -o big.om       # one program per device of a 2x2 grid (mpiexec -n 4 cann-run)

A thin wrapper over :func:`cann.compile` / :func:`cann.compiler.emit`. User mistakes print
``error: <location>: <message>`` and exit 2 without leaving an output file.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import click

from cann.errors import CannError
from cann.hw.config import available_socs
from cann.options import DEFAULT_OPT_LEVEL, DEFAULT_PRECISION_MODE, DEFAULT_SOC, PRECISION_MODES, validate_options
from cann.tools._cli import run_command

STAGES = ("graph", "tile", "ascend", "asm")
LOG_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
              "error": logging.ERROR, "null": None}
SUFFIX_FRAMEWORK = {".onnx": "5", ".pb": "3", ".mlir": "mlir"}


def _framework(model: str, framework: str | None) -> str:
    if framework is None:
        framework = SUFFIX_FRAMEWORK.get(Path(model).suffix.lower())
        if framework is None:
            raise CannError(model, "cannot infer the framework from the file suffix; "
                                   "use --framework 5 (ONNX) or --framework 3 (TensorFlow)")
    return framework


def _configure_logging(level: str) -> None:
    """Route the ``cann`` loggers to stderr at ``level`` (``null``: silence them)."""
    logger = logging.getLogger("cann")
    for h in [h for h in logger.handlers if getattr(h, "_cann_cli", False)]:
        logger.removeHandler(h)
    logger.disabled = LOG_LEVELS[level] is None
    if logger.disabled:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler._cann_cli = True  # type: ignore[attr-defined]
    handler.setFormatter(logging.Formatter("%(levelname)s: %(name)s: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(LOG_LEVELS[level])


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("model_arg", metavar="MODEL", required=False)
@click.option("--model", "model_opt", metavar="PATH", help="Model file (ATC spelling of MODEL).")
@click.option("--framework", metavar="3|5", help="3 = TensorFlow, 5 = ONNX (default: from the file suffix; "
              "a .mlir file is the text IR of a stage).")
@click.option("-o", "--output", metavar="PATH", help="Output .om ('.om' appended when missing; an existing directory "
              "is an error); with --emit, a text file or '-'.")
@click.option("--soc_version", metavar="NAME", help=f"Target SoC: {', '.join(available_socs())} (default {DEFAULT_SOC}).")
@click.option("--input_shape", metavar="NAME:D0,D1,..;...", help="Static input shapes; a name is split at its last colon.")
@click.option("--precision_mode", metavar="MODE",
              help=f"{', '.join(PRECISION_MODES)} (default {DEFAULT_PRECISION_MODE}; see README 'Precision modes').")
@click.option("--out_nodes", metavar="NAME;...", help="Model outputs to keep, ';'-separated: tensor names or "
              "ATC's node_name:output_index.")
@click.option("--log", "log_level", type=click.Choice(tuple(LOG_LEVELS)), default="warning", show_default=True)
@click.option("--fusion_switch_file", metavar="PATH", help="ATC fusion switch file (JSON or 'Pass:off' lines).")
@click.option("--fusion-report", "fusion_report", metavar="PATH",
              help="Write which model nodes each kernel runs (fusion groups) as JSON.")
@click.option("--aicore_num", metavar="N|", help="AI cores a kernel may use (ATC form 'N' or 'N|'; default: all).")
@click.option("--emit", type=click.Choice(STAGES), help="Write this stage's text instead of an .om.")
@click.option("-O", "opt_level", metavar="0|1", help="-O0: conservative baseline code; -O1 (default): optimized "
              "(fusion, task auto-pipelining).")
@click.option("--first-load-segment", "first_load_segment", metavar="BYTES",
              help="-O1: bytes of the first segment of each kernel's first load, so compute starts when it has "
                   "landed (0: the default rule, -1: no segmentation).")
@click.option("--kb", "kb", metavar="PATH|none", help="A knowledge base of tuned tilings (docs/autotune.md), read on "
              "top of the one cann ships: its entries for this SoC, precision mode and compiler version are "
              "applied to the operators they fit. 'none': neither (the default rules only). With --tune: the user "
              "knowledge base the tuned kernels are added to (created if missing; default: OUTPUT with .kb.json "
              "for .om).")
@click.option("--tune", "tune", is_flag=True, help="Operator tuning first: measure candidate tilings of each "
              "convolution the knowledge base misses with the timing-only simulator, add the best to --kb, then "
              "compile with it.")
@click.option("--job_type", "job_type", metavar="2", help="AOE's tuning mode: 2 = operator tuning (--tune); "
              "1 (subgraph tuning) is not supported.")
@click.option("--tune-trials", "tune_trials", metavar="N", help="With --tune: measured candidate tilings per "
              "convolution, the default tiling included (default 3).")
@click.option("--tune-jobs", "tune_jobs", metavar="N", help="With --tune: processes measuring in parallel "
              "(default: the CPUs available; the knowledge base written does not depend on it).")
@click.option("--keep_dtype", "keep_dtype", metavar="PATH", help="ATC keep_dtype file: ONNX node names, one a line, "
              "kept in float32 under an fp16 precision mode (docs/precision.md).")
@click.option("--calibrate-keep-dtype", "calibrate", metavar="OUT", help="Run the float32 model on onnxruntime with "
              "seeded random inputs (or --calibration-inputs) and write the nodes whose values leave float16's range "
              "as a --keep_dtype file OUT; no -o needed.")
@click.option("--calibration-inputs", "calibration_npz", metavar="NPZ", help="Calibration inputs (.npz: input name "
              "-> array) for --calibrate-keep-dtype and --precision_mode allow_mix_precision.")
@click.option("--gm-reuse", "gm_reuse", metavar="on|off", help="Device memory plan: on (default): activations "
              "and workspaces whose lifetimes do not intersect share global memory; off: each gets its own bytes "
              "(recorded in the .om; docs/core-model.md, 'Device memory plan').")
@click.option("--disable_reuse_memory", "disable_reuse_memory", metavar="0|1", help="ATC's spelling of --gm-reuse: "
              "0 (default) reuse on, 1 reuse off.")
@click.option("--device-memory", "device_memory", metavar="BYTES", help="The device (HBM) memory one device has, in "
              "bytes (default: the SoC's gm_bytes): the compile fails when the model's peak global memory (the .om's "
              "gm_size) exceeds it.")
@click.option("--spatial-split", "spatial_split", metavar="RxC", help="Split the image's H and W over an R x C device "
              "grid with halo exchanges (docs/large-images.md): the output is a bundle of per-device programs, run "
              "with mpiexec -n R*C cann-run; with --emit graph, the partitioned graph IR.")
@click.option("--spatial-depth", "spatial_depth", metavar="D", help="With --spatial-split: window layers per halo "
              "exchange (default 1; more: wider halos, fewer messages, redundant compute).")
def cli(model_arg, model_opt, framework, output, soc_version, input_shape, precision_mode, out_nodes,
        log_level, fusion_switch_file, fusion_report, aicore_num, emit, opt_level, first_load_segment, kb,
        tune, job_type, tune_trials, tune_jobs, keep_dtype, calibrate, calibration_npz, gm_reuse,
        disable_reuse_memory, device_memory, spatial_split, spatial_depth) -> int:
    """Compile MODEL (ONNX, a frozen TensorFlow GraphDef .pb, or the .mlir text of a stage: graph, tile or
    ascend IR as --emit or cann-opt write it) into an offline model for the simulated Ascend AI Core."""
    if model_arg and model_opt and model_arg != model_opt:
        raise CannError("--model", f"two different models given: '{model_arg}' and '{model_opt}'")
    model = model_arg or model_opt
    if not model:
        raise CannError("cann-compile", "no model given (cann-compile MODEL -o OUT)")
    if not output and not calibrate:
        raise CannError("cann-compile", "no output given (-o/--output)")
    _configure_logging(log_level)
    fw = _framework(model, framework)
    if not os.path.exists(model):
        raise CannError(model, "no such file")
    if os.path.isdir(model):
        raise CannError(model, "is a directory, not a model file")
    from cann.fileio import check_no_overwrite

    om_path = output if not output or emit or output == "-" or output.endswith(".om") or os.path.isdir(output) \
        else output + ".om"
    check_no_overwrite({"-o": om_path, "-o weights (.npz)": f"{output}.npz" if emit and output != "-" else None,
                        "--fusion-report": fusion_report, "--calibrate-keep-dtype": calibrate},
                       [("the model", model), ("the --keep_dtype file", keep_dtype),
                        ("the --fusion_switch_file", fusion_switch_file), ("the --calibration-inputs file", calibration_npz)])
    options = dict(soc_version=soc_version, precision_mode=precision_mode, input_shape=input_shape,
                   out_nodes=out_nodes, opt_level=opt_level, fusion_switch_file=fusion_switch_file,
                   aicore_num=aicore_num, framework=fw, first_load_segment=first_load_segment, keep_dtype=keep_dtype)
    gm_reuse = _gm_reuse(gm_reuse, disable_reuse_memory)
    validate_options(**options, gm_reuse=gm_reuse)  # every flag's error before any work
    tune, trials, jobs = _tune_flags(tune, job_type, tune_trials, tune_jobs)
    capacity = _count("--device-memory", device_memory, "a whole number of bytes")
    if capacity is not None and emit:
        raise CannError("--device-memory", "applies to an .om (the model's gm_size), not to --emit")
    depth = _count("--spatial-depth", spatial_depth, "a whole number of window layers per exchange")
    if depth is not None and not spatial_split:
        raise CannError("--spatial-depth", "applies to --spatial-split only")
    if spatial_split:
        return _spatial(model, output, emit, spatial_split, depth or 1, capacity, options, kb, gm_reuse,
                        dict(tune=tune, calibrate=calibrate, keep_dtype=keep_dtype, fusion_report=fusion_report,
                             fusion_switch_file=fusion_switch_file, first_load_segment=first_load_segment,
                             aicore_num=aicore_num))
    if tune and kb == "none":
        raise CannError("--kb", "none: --tune adds the tuned kernels to a knowledge base; give its path "
                                "(default without --kb: OUTPUT with .kb.json)")
    cal_inputs = _npz(calibration_npz) if calibration_npz else None
    if calibrate:
        if fw != "5":
            raise CannError("--calibrate-keep-dtype", "calibrates an ONNX model (onnxruntime runs the reference)")
        from cann.calibration import calibrate_keep_dtype
        from cann.compiler import check_writable

        check_writable(calibrate)
        kept = calibrate_keep_dtype(model, cal_inputs, out=calibrate)
        print(f"{calibrate}: {len(kept)} nodes beyond float16's range written (use --keep_dtype {calibrate})",
              file=sys.stderr)
        if not output:
            return 0
    if cal_inputs is not None:
        options["calibration_inputs"] = cal_inputs
    if tune:
        from cann.autotune import check_kb_path

        kb = kb or _default_kb(output)
        check_kb_path(kb)  # a bad path or file: the error before any work, nothing written
    elif kb:
        from cann.passes.tile_search_kb import NO_KB, load as load_kb

        if kb != NO_KB:
            load_kb(kb)  # a missing or malformed file: its error before any work
    if kb:
        options["kb"] = kb
    if tune and output not in ("-", None):
        from cann.compiler import check_writable

        check_writable(output if emit or output.endswith(".om") or os.path.isdir(output) else output + ".om")
    if tune:
        _run_tune(model, kb, trials, jobs, None if log_level != "null" else False, options)
    if emit:
        from cann.compiler import emit as emit_stage

        if output == "-":
            emit_stage(model, emit, sys.stdout, **options)
            sys.stdout.flush()
        else:  # written atomically; large constants go to OUTPUT.npz beside it
            emit_stage(model, emit, output, **options)
            print(f"{output}: {emit} IR written", file=sys.stderr)
        return 0

    import json

    import cann
    from cann.compiler import check_writable
    from cann.fileio import atomic_write_bytes

    if output == "-":
        raise CannError("-o", "an .om cannot be written to stdout; give a file name (or use --emit)")
    if os.path.isdir(output):
        raise CannError(output, "is a directory: give the output file (e.g. "
                                f"{os.path.join(output, Path(model).stem + '.om')})")
    if not output.endswith(".om"):
        output += ".om"
    check_writable(output)
    compiled = cann.compile(model, **options, gm_reuse=gm_reuse)
    check_device_memory(model, compiled.om.gm_size, compiled.om.soc_version, capacity)  # before anything is written
    if fusion_report:  # the report first: if the .om cannot be written, the report goes again
        atomic_write_bytes(fusion_report, (json.dumps(compiled.fusion_report, indent=1) + "\n").encode())
    try:
        compiled.save(output)
    except BaseException:
        if fusion_report:
            os.unlink(fusion_report)
        raise
    om = compiled.om
    size = os.path.getsize(output)
    level = "" if fw == "mlir" else f", -O{opt_level or DEFAULT_OPT_LEVEL}"
    tuned = "".join(f", {'shipped knowledge base' if role == 'shipped' else f'knowledge base {kb}'} sha256 {d[:16]}"
                    for role, d in (x.split(":", 1) for x in om.knowledge_bases))
    mixed = ""
    if getattr(compiled, "kept_fp32", None) is not None:
        k, n = compiled.kept_fp32
        mixed = f", {k} of {n} nodes kept in fp32 ({100.0 * k / max(n, 1):.1f}%)"
    print(f"{output}: {len(om.kernels)} kernels, {len(om.launches)} launches, {size} bytes "
          f"({om.soc_version}, {om.precision_mode}{level}{tuned}{mixed})")
    from cann.codegen.om import memory_line

    print(f"{output}: {memory_line(om)}")
    return 0


def _spatial(model, output, emit, grid, depth, capacity, options, kb, gm_reuse, unsupported) -> int:
    """``--spatial-split``: the partitioned graph IR (``--emit graph``) or the bundle of per-device programs."""
    from cann.passes.graph_spatial_partition import parse_grid

    for flag, value in unsupported.items():
        if value:
            raise CannError("--spatial-split", f"cannot be combined with --{flag.replace('_', '-')} yet")
    try:
        R, C = parse_grid(grid)
    except ValueError as e:
        raise CannError("--spatial-split", str(e)) from None
    if emit and emit != "graph":
        raise CannError("--emit", f"{emit}: with --spatial-split only the graph IR (--emit graph) is one module")
    if options["framework"] == "mlir":
        raise CannError(model, "--spatial-split compiles a model (ONNX or TensorFlow), not a stage's .mlir text")
    from cann.compiler import check_writable

    if emit:
        from cann.dialects.weights import print_module
        from cann.fileio import atomic_write_bytes
        from cann.spatial.compile import partition_module

        o = validate_options(input_shape=options["input_shape"], out_nodes=options["out_nodes"],
                             framework=options["framework"])
        module, _ = partition_module(model, f"{R}x{C}", depth, input_shape=o.input_shape, out_nodes=o.out_nodes,
                                     framework=o.framework)
        if output == "-":
            print_module(module, sys.stdout)
        else:
            check_writable(output)
            import io

            text = io.StringIO()
            print_module(module, text, weights_path=str(output) + ".npz")
            atomic_write_bytes(output, text.getvalue().encode())
        return 0
    if not output.endswith(".om"):
        output += ".om"
    check_writable(output)
    from cann.spatial.compile import compile_spatial

    opts = {k: options[k] for k in ("soc_version", "precision_mode", "input_shape", "out_nodes", "opt_level",
                                    "framework")}
    bundle = compile_spatial(model, f"{R}x{C}", depth=depth, kb=kb, device_memory=capacity, gm_reuse=gm_reuse,
                             **opts)
    bundle.save(output)
    peak = max(r["peak_bytes"] for r in bundle.manifest["ranks"])
    print(f"{output}: {R}x{C} devices, {len(bundle.models)} segments, {len(bundle.manifest['exchanges'])} halo "
          f"exchanges, {os.path.getsize(output)} bytes, peak device memory {peak} bytes "
          f"({bundle.manifest['soc_version']}, {bundle.manifest['precision_mode']})")
    return 0


def check_device_memory(where: str, gm_size: int, soc_version: str, capacity: int | None = None) -> None:
    """Raise :class:`CannError` at ``where`` when a model's peak global memory ``gm_size`` (bytes: weights,
    inputs, outputs and activations as the GM planner lays them out) exceeds one device's memory:
    ``capacity`` bytes, or the SoC's ``gm_bytes`` when ``None``."""
    if capacity is None:
        from cann.hw.config import load_soc

        capacity, source = load_soc(soc_version).gm_bytes, f"{soc_version}'s gm_bytes"
    else:
        source = "--device-memory"
    if gm_size > capacity:
        raise CannError(where, f"needs {gm_size} bytes of device memory (peak gm_size, {gm_size / 2**30:.3g} GiB), "
                               f"more than one device's {capacity} bytes ({source}, {capacity / 2**30:.3g} GiB); "
                               "split the image over devices (--spatial-split RxC) or use a smaller input")


def _count(flag: str, text: str | None, what: str) -> int | None:
    if text is None:
        return None
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise CannError(flag, f"'{text}': {what}, at least 1")
    return n


def _gm_reuse(gm_reuse: str | None, disable_reuse_memory: str | None) -> str | None:
    """``--gm-reuse`` merged with ATC's ``--disable_reuse_memory`` (0: reuse, 1: none).

    Raises:
        CannError: ``--disable_reuse_memory`` not 0 or 1, or contradicting ``--gm-reuse``.
    """
    if disable_reuse_memory is None:
        return gm_reuse
    value = disable_reuse_memory.strip()
    if value not in ("0", "1"):
        raise CannError("--disable_reuse_memory", f"expected 0 (memory reuse, the default) or 1 (none), "
                                                  f"got '{disable_reuse_memory}'")
    atc = "off" if value == "1" else "on"
    if gm_reuse is not None and gm_reuse.strip().lower() != atc:
        raise CannError("--gm-reuse", f"'{gm_reuse}' contradicts --disable_reuse_memory {value}")
    return atc


def _tune_flags(tune: bool, job_type: str | None, trials: str | None,
                jobs: str | None) -> tuple[bool, int, int | None]:
    """(tune or not, measured candidates per kernel, processes) from --tune, AOE's --job_type,
    --tune-trials and --tune-jobs."""
    if job_type is not None:
        if job_type.strip() == "1":
            raise CannError("--job_type", "1 (subgraph tuning) is not supported; 2 = operator tuning (--tune)")
        if job_type.strip() != "2":
            raise CannError("--job_type", f"'{job_type}': 2 = operator tuning (1, subgraph tuning, is not supported)")
        tune = True
    from cann.autotune import DEFAULT_TRIALS

    for flag, value in (("--tune-trials", trials), ("--tune-jobs", jobs)):
        if value is not None and not tune:
            raise CannError(flag, "applies to --tune (or --job_type 2) only")
    n = _count("--tune-trials", trials, "a whole number of measured tilings per kernel")
    return tune, n or DEFAULT_TRIALS, _count("--tune-jobs", jobs, "a whole number of processes")


def _default_kb(output: str) -> str:
    """--tune's knowledge base without --kb: next to the output (model.om -> model.kb.json)."""
    if output == "-":
        raise CannError("--tune", "the output is stdout: name the knowledge base to write with --kb PATH")
    return (output[:-3] if output.endswith(".om") else output) + ".kb.json"


def _run_tune(model: str, kb: str, trials: int, jobs: int | None, progress: bool | None, options: dict) -> None:
    from cann.autotune import tune

    opts = {k: v for k, v in options.items() if k != "kb"}
    report = tune(model, kb, trials=trials, jobs=jobs, progress=progress, **opts)
    gain = sum(t.default_cycles - t.best_cycles for t in report.tuned)
    print(f"{kb}: {len(report.tuned)} convolutions tuned ({trials} trials each, {gain} cycles saved alone), "
          f"{report.hits} already in the knowledge base", file=sys.stderr)


def _npz(path: str) -> dict:
    import numpy as np

    try:
        with np.load(path) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError) as e:
        raise CannError("--calibration-inputs", f"{path}: cannot read an .npz: {e}") from None


def main(argv: Sequence[str] | None = None) -> None:
    run_command(cli, argv, "cann-compile")


if __name__ == "__main__":
    main()
