"""``cann-train``: train a model on the simulated AI Core (docs/training.md).

    cann-train model.onnx --data batches.npz --optimizer adam --lr 2e-3 --steps 20 --output-model trained.onnx

``--data``: an ``.npz`` with one array per model input and ``target`` (of the model output's
shape: one-hot labels for ``softmax_cross_entropy``); arrays with one more leading axis than the
model's input are a list of batches, used in turn. Prints the loss of each step (before its
update); ``--output`` writes the trained parameters (by initializer name), ``--output-model`` the
model with them. Under ``mpiexec -n P``, ``--data-parallel`` trains on P simulated devices and
``--zero 1|2|3`` shards optimizer states, gradients and weights (:mod:`cann.training.zero`);
``--report-memory`` prints the model-state bytes one rank held. A thin wrapper over
:class:`cann.training.Trainer`. User mistakes print ``error: <location>: <message>`` and exit 2.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import click
import numpy as np

from cann.errors import CannError
from cann.tools._cli import run_command


def _batches(data: dict[str, np.ndarray], program, where: str, ranks: int = 1) -> list[tuple[dict, np.ndarray]]:
    """The batches of ``data`` for ``program`` (``ranks`` > 1: ``program`` is a data-parallel
    shard's, the data holds the global batch, ``ranks`` times the shard's)."""
    fn = program.module.body.block.first_op
    shapes = {d.data["graph.name"].data: tuple(t.get_shape())
              for d, t in zip(fn.arg_attrs.data, fn.function_type.inputs.data)}
    names = [*program.inputs, "target"]
    shapes = {n: ((s[0] * ranks, *s[1:]) if n in names and s else s) for n, s in shapes.items()}
    missing = [n for n in names if n not in data]
    if missing:
        held = sorted(data)
        listed = ", ".join(held[:8]) + (f", ... ({len(held)} arrays)" if len(held) > 8 else "")
        raise CannError(where, f"no array for {', '.join(missing)} (it holds {listed or 'nothing'})")
    count = None
    for n in names:
        rank, shape = len(shapes[n]), shapes[n]
        arr = data[n]
        k = 1 if arr.ndim == rank else arr.shape[0] if arr.ndim == rank + 1 else None
        if k is None or tuple(arr.shape[-rank:] if rank else ()) != shape:
            raise CannError(f"{where}: '{n}'", f"shape {list(arr.shape)} is neither {list(shape)} nor a list of "
                                               f"such batches")
        if k != 1 or arr.ndim == rank + 1:
            if count not in (None, k):
                raise CannError(f"{where}: '{n}'", f"{k} batches, other arrays have {count}")
            count = k
    count = count or 1
    pick = lambda a, rank, i: a if a.ndim == rank else a[i]  # noqa: E731
    out = []
    for i in range(count):
        inputs = {n: pick(data[n], len(shapes[n]), i) for n in program.inputs}
        out.append((inputs, pick(data["target"], len(shapes["target"]), i)))
    return out


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("model", metavar="MODEL.onnx")
@click.option("--data", required=True, metavar="DATA.npz", help="Model inputs and 'target' (one batch, or batches "
              "along a leading axis).")
@click.option("--loss", type=click.Choice(["softmax_cross_entropy", "mse"]), default="softmax_cross_entropy",
              show_default=True)
@click.option("--optimizer", type=click.Choice(["momentum", "adam"]), default="momentum", show_default=True,
              help="ONNX ai.onnx.preview.training Momentum (alpha 0.9, beta 1: PyTorch's SGD momentum) or Adam.")
@click.option("--lr", type=float, default=None, help="Learning rate, a finite number >= 0 (default 0.01 for "
              "momentum, 0.001 for adam).")
@click.option("--steps", type=click.IntRange(min=1), default=20, show_default=True)
@click.option("--precision-mode", "--precision_mode", "precision_mode", default="must_keep_origin_dtype", show_default=True,
              help="As cann-compile's --precision_mode.")
@click.option("--output", metavar="WEIGHTS.npz", help="Write the trained parameters (and BatchNorm's running "
              "statistics) by initializer name.")
@click.option("--output-model", metavar="TRAINED.onnx", help="Write MODEL.onnx with its initializers replaced by "
              "the trained values (compile it with cann-compile).")
@click.option("--data-parallel", is_flag=True, help="Under mpiexec -n P: one simulated device per rank, each on its "
              "1/P of the batch (SyncBatchNorm, gradients averaged by segmented allreduce); prints each step's "
              "simulated cycles (compute + the link model's allreduce). Rank 0 prints and writes.")
@click.option("--segment-bytes", type=click.IntRange(min=4), default=1 << 20, show_default=True,
              help="With --data-parallel: the fixed size of the allreduce segments.")
@click.option("--zero", type=click.Choice(["0", "1", "2", "3"]), default="0", show_default=True,
              help="With --data-parallel: ZeRO sharding stage (1 optimizer states, 2 + gradients: reduce-scatter, "
              "3 + weights: all-gathered per stage of the program); 0 none.")
@click.option("--report-memory", is_flag=True, help="With --data-parallel: print the model-state bytes one rank held "
              "in the last step (weights, gradients, optimizer states) beside cann-memplan's fp32 byte model.")
@click.option("--split-strategy", metavar="STRATEGY", help="With --data-parallel: the gradient segments (instead of "
              "--segment-bytes): auto (the split minimizing the simulated step), one, per-tensor, ddp, hccl, "
              "mindspore, mgwfbp, or HCCL's forms idx:E1,E2,... (ascending end indices in backward order) and "
              "size:P1,P2,... (percentages of the gradient bytes), at most 8 segments (docs/training.md).")
@click.option("--link-model", type=click.Choice(["ring", "hierarchical"]), default="ring", show_default=True,
              help="With --split-strategy: the allreduce cost model the plan and the step simulation use.")
def cli(model, data, loss, optimizer, lr, steps, precision_mode, output, output_model, data_parallel,
        segment_bytes, zero, report_memory, split_strategy, link_model) -> int:
    """Train MODEL.onnx for --steps steps on the simulated Ascend AI Core."""
    from cann.compiler import check_writable
    from cann.fileio import atomic_output, check_no_overwrite
    from cann.tools.cann_run import _load_array_file
    from cann.training import Adam, Momentum, Trainer, build

    if lr is not None and not (math.isfinite(lr) and lr >= 0):  # PyTorch's optimizers refuse lr < 0 too
        raise CannError("--lr", f"the learning rate must be a finite number >= 0, got {lr!r}")
    if not os.path.isfile(model):  # the model before its data: the first argument's mistake first
        raise CannError(model, "no such file" if not os.path.exists(model) else "is not a model file")
    for path in (output, output_model):
        if path:
            check_writable(path)
    check_no_overwrite({"--output": output, "--output-model": output_model},
                       [("the model", model), ("the --data file", data)])
    arrays = _load_array_file(data)
    if not isinstance(arrays, dict):
        raise CannError(data, "expected an .npz archive (model inputs and 'target'), got a .npy array")
    spec = None
    if split_strategy is not None:
        from cann.training.grad_split import parse

        if not data_parallel:
            raise CannError("--split-strategy", "only with --data-parallel")
        spec = parse(split_strategy)
    opt = Adam(lr=lr if lr is not None else 0.001) if optimizer == "adam" else Momentum(lr=lr if lr is not None else 0.01)
    lead, zero = True, int(zero)
    for flag, given in (("--zero", zero), ("--report-memory", report_memory)):
        if given and not data_parallel:
            raise CannError(flag, "needs --data-parallel (sharding and its memory report are per MPI rank)")
    if zero and spec is not None:
        raise CannError("--split-strategy", "not with --zero (sharded training reduce-scatters in --segment-bytes "
                        "segments)")
    if data_parallel and zero:
        from cann.training.zero import ShardedTrainer

        trainer = ShardedTrainer(model, zero=zero, loss=loss, optimizer=opt, segment_bytes=segment_bytes,
                                 precision_mode=precision_mode)
        batches = _batches(arrays, trainer.program, data, trainer.ranks)
        lead = trainer.rank == 0
    elif data_parallel:
        from cann.training.data_parallel import DataParallelTrainer

        trainer = DataParallelTrainer(model, loss=loss, optimizer=opt, segment_bytes=segment_bytes,
                                      precision_mode=precision_mode, split_strategy=spec, link_model=link_model)
        batches = _batches(arrays, trainer.program, data, trainer.ranks)
        lead = trainer.rank == 0
        if lead and trainer.segments is not None:
            r = trainer.step_result
            ends = [sum(len(s) for s in trainer.segments[:k + 1]) - 1 for k in range(len(trainer.segments))]
            print(f"split {spec}: {len(ends)} segments, end indices {ends} (backward order); simulated step "
                  f"{r.iteration * 1e6:.1f} us, communication tail {r.tail * 1e6:.1f} us", flush=True)
    else:
        program = build(model, loss=loss, optimizer=opt)
        batches = _batches(arrays, program, data)
        trainer = Trainer(program, precision_mode=precision_mode)
    for t in range(steps):
        inputs, target = batches[t % len(batches)]
        value = trainer.step(inputs, target)
        if data_parallel and lead:
            what = f"collectives (ZeRO-{zero})" if zero else "allreduce"
            print(f"step {t + 1}: loss {value:.6f} cycles {trainer.step_cycles():.0f} (compute {trainer.cycles:.0f}, "
                  f"{what} {trainer.step_cycles() - trainer.cycles:.0f} for {trainer.comm_bytes} bytes "
                  f"over {trainer.ranks} ranks)", flush=True)
        elif lead:
            print(f"step {t + 1}: loss {value:.6f}", flush=True)
    trained = {**trainer.params, **trainer.buffers}  # (ZeRO-3 all-gathers the weights: every rank takes part)
    if report_memory and lead:
        for line in memory_report(trainer, zero, optimizer):
            print(line)
    if not lead:
        return 0
    if output:
        with atomic_output(output, "wb") as f:
            np.savez(f, **trained)
    if output_model:
        import onnx

        proto = onnx.load(model)
        for i, init in enumerate(proto.graph.initializer):
            if init.name in trained:
                proto.graph.initializer[i].CopyFrom(onnx.numpy_helper.from_array(trained[init.name], init.name))
        with atomic_output(output_model, "wb") as f:
            f.write(proto.SerializeToString())
    return 0


def memory_report(trainer, zero: int, optimizer: str) -> list[str]:
    """The lines of ``--report-memory``: the model-state bytes the rank held in the last step
    (:attr:`DataParallelTrainer.memory`) beside :func:`cann.training.memplan.plan`'s fp32 bytes."""
    from cann.training.memplan import plan

    params = sum(v.size for v in trainer.params.values()) if zero < 3 else \
        sum(math.prod(s) for s in trainer.shapes.values())
    want = plan(params, trainer.ranks, zero, optimizer=optimizer, precision="fp32")
    held = trainer.memory
    lines = [f"memory per rank (ZeRO-{zero}, {trainer.ranks} ranks, {params:,} parameters, bytes held / memplan fp32):"]
    for key, label in (("weights", "weights"), ("gradients", "gradients"), ("optimizer", "optimizer states")):
        lines.append(f"  {label}: {held[key]:,} / {getattr(want, key):,.0f}")
    if zero:
        pad = trainer.size * trainer.ranks - params
        lines.append(f"  (shards: {trainer.size:,} elements per rank, {pad:,} of padding over all ranks; "
                     f"temporary buffers peak {held['temporary']:,})")
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    run_command(cli, argv, "cann-train")


if __name__ == "__main__":
    main()
