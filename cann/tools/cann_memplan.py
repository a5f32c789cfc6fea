"""``cann-memplan``: per-device memory of data-parallel training with ZeRO-like sharding.

    cann-memplan --params 7.5e9 --ranks 64                 # the table of stages 0-3 (ZeRO's 7.5B row)
    cann-memplan --params 8.3e9 --ranks 8 --zero 3
    cann-memplan --model resnet50.onnx --batch 32 --ranks 8 --recompute   # + activations from the GM planner

A thin wrapper over :mod:`cann.training.memplan`. Decimal GB (1e9 bytes) to one decimal. User
mistakes print ``error: <location>: <message>`` and exit 2.
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from cann.errors import CannError
from cann.tools._cli import run_command


def _params(ctx, param, value):
    if value is None:
        return None
    try:
        v = float(value)
    except ValueError:
        raise click.BadParameter(f"expected a number of parameters such as 7.5e9, got '{value}'") from None
    if not v > 0 or v != v or v == float("inf"):
        raise click.BadParameter(f"must be a positive finite number, got '{value}'")
    return v


def _positive(ctx, param, value):
    if value is not None and value < 1:
        raise click.BadParameter(f"must be >= 1, got {value}")
    return value


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--params", callback=_params, metavar="N", help="Number of parameters (e.g. 7.5e9).")
@click.option("--model", metavar="MODEL.onnx", help="Count the parameters of an ONNX model (instead of --params) "
              "and, with --batch, measure its activations with the GM planner.")
@click.option("--ranks", type=int, callback=_positive, default=1, show_default=True, help="Data-parallel devices.")
@click.option("--zero", type=click.Choice(["0", "1", "2", "3"]), default=None,
              help="Sharding stage: 0 none, 1 optimizer states, 2 + gradients, 3 + weights. Default: all.")
@click.option("--optimizer", type=click.Choice(["adam", "momentum", "sgd"]), default="adam", show_default=True)
@click.option("--precision", type=click.Choice(["mixed", "fp32"]), default="mixed", show_default=True,
              help="mixed: fp16 weights and gradients with fp32 master weights (ZeRO's 2 + 2 + 12 bytes for Adam).")
@click.option("--batch", type=int, callback=_positive, default=None, help="Per-device batch for --model's activations.")
@click.option("--recompute", is_flag=True, help="With --batch: square-root activation checkpointing.")
def cli(params, model, ranks, zero, optimizer, precision, batch, recompute) -> int:
    """Print per-device memory of weights, gradients, optimizer states (and activations)."""
    from cann.training import memplan

    if (params is None) == (model is None):
        raise CannError("--params", "give exactly one of --params and --model")
    if batch is not None and model is None:
        raise CannError("--batch", "needs --model (activations are measured on a model file)")
    if recompute and batch is None:
        raise CannError("--recompute", "needs --model and --batch")
    if model is not None:
        params = memplan.model_parameters(model)
    acts = None
    if batch is not None:
        acts = memplan.activation_bytes(model, batch, recompute=recompute,
                                        precision_mode="force_fp16" if precision == "mixed" else "must_keep_origin_dtype")
    stages = memplan.STAGES if zero is None else (int(zero),)
    for line in memplan.format_table(params, ranks, stages, optimizer=optimizer, precision=precision, activations=acts):
        print(line)
    if acts is not None:
        print(f"activations per device: {acts:,} bytes (GM planner, batch {batch}"
              + (", square-root recomputation)" if recompute else ")"))
    return 0


def main(argv: Sequence[str] | None = None) -> None:
    run_command(cli, argv, "cann-memplan")


if __name__ == "__main__":
    main()
