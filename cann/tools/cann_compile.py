"""``cann-compile``: compile a model to an offline model (``.om``), in the spirit of Huawei's ATC.

    cann-compile model.onnx -o model.om
    cann-compile --model=model.onnx --framework=5 --output=model --soc_version=Ascend910 \\
        --input_shape="input:1,3,224,224" --precision_mode=force_fp16
    cann-compile model.onnx --emit tile -o -          # print the tile-level IR
    cann-compile model.pb --framework=3 --input_shape="input:1,224,224,3" -o model.om   # TensorFlow

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
from cann.tools._cli import run_command

PRECISION_MODES = ("force_fp16", "allow_fp32_to_fp16", "must_keep_origin_dtype", "force_fp32")
STAGES = ("graph", "tile", "ascend", "asm")
LOG_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
              "error": logging.ERROR, "null": None}
FRAMEWORKS = {3: "TensorFlow", 5: "ONNX"}
SUFFIX_FRAMEWORK = {".onnx": 5, ".pb": 3}


def split_last_colon(entry: str, flag: str) -> tuple[str, str]:
    """``"x:0:1,3"`` -> ``("x:0", "1,3")``: tensor names may contain colons, values do not."""
    name, sep, value = entry.rpartition(":")
    if not sep or not name:
        raise CannError(flag, f"'{entry}' is not of the form NAME:VALUE")
    return name, value


def parse_input_shape(text: str) -> dict[str, tuple[int, ...]]:
    """``"a:1,3,224,224;b:1,10"`` -> ``{"a": (1, 3, 224, 224), "b": (1, 10)}``."""
    shapes: dict[str, tuple[int, ...]] = {}
    for entry in text.split(";"):
        if not entry.strip():
            continue
        name, dims = split_last_colon(entry.strip(), "--input_shape")
        try:
            shape = tuple(int(d) for d in dims.split(","))
        except ValueError:
            raise CannError("--input_shape", f"'{entry}': dimensions must be comma-separated integers") from None
        if any(d < 1 for d in shape):
            raise CannError("--input_shape", f"'{entry}': dimensions must be positive (dynamic shapes are not supported)")
        if name in shapes:
            raise CannError("--input_shape", f"input '{name}' is given twice")
        shapes[name] = shape
    if not shapes:
        raise CannError("--input_shape", "no shape given")
    return shapes


def parse_out_nodes(text: str) -> list[str]:
    """``"a;b:0"`` -> ``["a", "b:0"]`` (each a tensor name, or ``node:output_index``)."""
    nodes = [n.strip() for n in text.split(";") if n.strip()]
    if not nodes:
        raise CannError("--out_nodes", "no output given")
    return nodes


def _framework(model: str, framework: int | None) -> int:
    if framework is None:
        framework = SUFFIX_FRAMEWORK.get(Path(model).suffix.lower())
        if framework is None:
            raise CannError(model, "cannot infer the framework from the file suffix; "
                                   "use --framework 5 (ONNX) or --framework 3 (TensorFlow)")
    if framework not in FRAMEWORKS:
        raise CannError("--framework", f"unsupported framework {framework} (3 = TensorFlow, 5 = ONNX)")
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


def parse_aicore_num(text: str) -> int:
    """ATC's ``--aicore_num``: ``N`` or ``N|`` (cube cores; the vector count after '|' is ignored
    on a coupled core).

    Raises:
        CannError: not a positive integer.
    """
    head = text.split("|", 1)[0].strip()
    if not head.isdigit() or int(head) < 1:
        raise CannError("--aicore_num", f"expected a positive core count like '8' or '8|', got '{text}'")
    return int(head)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("model_arg", metavar="MODEL", required=False)
@click.option("--model", "model_opt", metavar="PATH", help="Model file (ATC spelling of MODEL).")
@click.option("--framework", type=int, help="3 = TensorFlow, 5 = ONNX (default: from the file suffix).")
@click.option("-o", "--output", metavar="PATH", help="Output .om ('.om' appended when missing); with --emit, a text file or '-'.")
@click.option("--soc_version", default="Ascend910", show_default=True, help="Target SoC.")
@click.option("--input_shape", metavar="NAME:D0,D1,..;...", help="Static input shapes; a name is split at its last colon.")
@click.option("--precision_mode", type=click.Choice(PRECISION_MODES), default="force_fp16", show_default=True)
@click.option("--out_nodes", metavar="NAME;...", help="Model outputs to keep, ';'-separated.")
@click.option("--log", "log_level", type=click.Choice(tuple(LOG_LEVELS)), default="warning", show_default=True)
@click.option("--fusion_switch_file", metavar="PATH", help="ATC fusion switch file (JSON).")
@click.option("--fusion-report", "fusion_report", metavar="PATH",
              help="Write which model nodes each kernel runs (fusion groups) as JSON.")
@click.option("--aicore_num", metavar="N|", help="AI cores a kernel may use (ATC form 'N' or 'N|'; default: all).")
@click.option("--emit", type=click.Choice(STAGES), help="Write this stage's text instead of an .om.")
@click.option("-O", "opt_level", type=click.Choice(["0", "1"]), default="1", show_default=True,
              help="-O0: conservative baseline code; -O1: optimized.")
def cli(model_arg, model_opt, framework, output, soc_version, input_shape, precision_mode, out_nodes,
        log_level, fusion_switch_file, fusion_report, aicore_num, emit, opt_level) -> int:
    """Compile MODEL (ONNX, or a frozen TensorFlow GraphDef .pb) into an offline model for the simulated Ascend AI Core."""
    if model_arg and model_opt and model_arg != model_opt:
        raise CannError("--model", f"two different models given: '{model_arg}' and '{model_opt}'")
    model = model_arg or model_opt
    if not model:
        raise CannError("cann-compile", "no model given (cann-compile MODEL -o OUT)")
    if not output:
        raise CannError("cann-compile", "no output given (-o/--output)")
    _configure_logging(log_level)
    fw = _framework(model, framework)
    if not os.path.exists(model):
        raise CannError(model, "no such file")
    if os.path.isdir(model):
        raise CannError(model, "is a directory, not a model file")
    options = dict(
        soc_version=soc_version,
        precision_mode=precision_mode,
        input_shape=parse_input_shape(input_shape) if input_shape is not None else None,
        out_nodes=parse_out_nodes(out_nodes) if out_nodes is not None else None,
        opt_level=int(opt_level),
        fusion_switch_file=fusion_switch_file,
        aicore_num=parse_aicore_num(aicore_num) if aicore_num is not None else None,
        framework=fw,
    )
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
    from cann.fileio import atomic_write_bytes

    if output == "-":
        raise CannError("-o", "an .om cannot be written to stdout; give a file name (or use --emit)")
    if not output.endswith(".om"):
        output += ".om"
    compiled = cann.compile(model, **options)
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
    print(f"{output}: {len(om.kernels)} kernels, {len(om.launches)} launches, {size} bytes "
          f"({soc_version}, {precision_mode}, -O{opt_level})")
    return 0


def main(argv: Sequence[str] | None = None) -> None:
    run_command(cli, argv, "cann-compile")


if __name__ == "__main__":
    main()
