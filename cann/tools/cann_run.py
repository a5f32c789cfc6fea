"""``cann-run``: run an offline model (``.om``) on the simulated Ascend AI Core.

    cann-run model.om                                   # seeded generated inputs (it says which)
    cann-run model.om --input x=x.npy --output out.npz
    cann-run model.om --input inputs.npz --compare model.onnx
    cann-run model.om --profile --profile-csv prof.csv --trace trace.json
    cann-run model.om --timing-only                     # cycles and profile only, no values
    cann-run model.om --compare model.onnx --all-layers --csv layers.csv   # per layer (docs/accuracy.md)
    cann-run model.om --input x.npy --output y.npy      # a single-output model's output as .npy
    mpiexec -n 4 cann-run big.om --input x.npy --output y.npy   # a model compiled with --spatial-split 2x2

A thin wrapper over :func:`cann.load` and ``Model.run``. User mistakes print
``error: <location>: <message>`` and exit 2; a ``--compare`` (or a layer of ``--all-layers``) beyond
tolerance exits 1. Inputs must have the declared dtypes exactly; a float overflow in the run is one
``warning:`` line. ``--timing-only`` runs ``Model.time`` (docs/core-model.md, "Timing-only runs"):
the cycles and the profile of a full run, without computing values, so it takes no inputs and
writes no outputs.
"""

from __future__ import annotations

import math
import os
import sys
import warnings
import zipfile
from collections.abc import Sequence
from pathlib import Path

import click
import ml_dtypes
import numpy as np

from cann.accuracy import default_tolerance, errors, reference_outputs, reference_session
from cann.codegen.om import memory_line
from cann.errors import CannError, Diagnostic, FloatOverflowWarning
from cann.fileio import atomic_output
from cann.tools._cli import run_command

BF16 = np.dtype(ml_dtypes.bfloat16)


_NPY_MAGIC, _ZIP_MAGIC = b"\x93NUMPY", b"PK\x03\x04"


def _load_array_file(path: str):
    """An array (.npy) or the arrays of an archive (.npz, a dict by member name); never unpickles (a
    pickled object array is an error)."""
    try:
        with open(path, "rb") as f:
            head = f.read(6)
    except FileNotFoundError:
        raise CannError(path, "no such file") from None
    except OSError as e:
        raise CannError(path, f"cannot read: {e.strerror or e}") from None
    if not head.startswith((_NPY_MAGIC, _ZIP_MAGIC)):
        raise CannError(path, "not a .npy or .npz file (it starts with neither the NumPy nor the zip magic)")
    what = path
    try:
        data = np.load(path, allow_pickle=False)
        if isinstance(data, np.ndarray):
            return data
        with data:  # an .npz: read every member now, so a bad one is reported here
            out = {}
            for key in data.files:
                what = f"{path}: member '{key}'"
                out[key] = data[key]
            return out
    except ValueError as e:
        if "allow_pickle" in str(e):
            raise CannError(what, "holds Python objects (a pickled array): save numeric arrays with np.save") from None
        raise CannError(what, f"cannot read as .npy/.npz: {_first_line(e)}") from None
    except (OSError, EOFError, zipfile.BadZipFile, KeyError) as e:
        raise CannError(what, f"cannot read as .npy/.npz: {_first_line(e)}") from None
    except Exception as e:  # noqa: BLE001 - numpy parses the header with tokenize/ast and may raise anything
        raise CannError(what, f"cannot read as .npy/.npz: {type(e).__name__}: {_first_line(e)}") from None


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [""])[0]


def gather_inputs(specs: Sequence[str], model_inputs) -> dict[str, np.ndarray]:
    """Resolve ``--input`` values (NAME=FILE.npy, FILE.npz, FILE.npy) against the model's inputs."""
    names = [t.name for t in model_inputs]
    given: dict[str, np.ndarray] = {}

    def put(name: str, value: np.ndarray, source: str) -> None:
        if name not in names:
            raise CannError(source, f"'{name}' is not an input of the model (inputs: {', '.join(names)})")
        if name in given:
            raise CannError(source, f"input '{name}' is given twice")
        given[name] = value

    for spec in specs:
        name, sep, path = spec.partition("=")
        if sep and name not in names and not os.path.exists(spec):
            raise CannError(spec, f"'{name}' is not an input of the model (inputs: {', '.join(names)})")
        if sep and name in names:
            data = _load_array_file(path)
            if isinstance(data, dict):
                raise CannError(path, f"expected a .npy array for input '{name}', got an .npz archive")
            put(name, data, path)
            continue
        data = _load_array_file(spec)
        if isinstance(data, np.ndarray):
            if len(names) != 1:
                raise CannError(spec, f"a bare .npy needs a single-input model; this one has {len(names)} "
                                      f"inputs: use --input NAME={spec}")
            put(names[0], data, spec)
        else:
            for key, value in data.items():
                put(key, value, spec)
    missing = [n for n in names if n not in given]
    if missing:
        raise CannError("--input", f"no value for model input(s): {', '.join(missing)}")
    return given


def check_inputs(inputs: dict[str, np.ndarray], model_inputs) -> dict[str, np.ndarray]:
    """Check shapes and dtypes against the model (one diagnostic per bad input, naming the input,
    the expected shape and dtype and the given ones). As ``Model.run`` and onnxruntime, the dtype
    must be the declared one (nothing is cast); the only conversion is that a saved bfloat16 array,
    which loads back as raw 2-byte records, is viewed as bfloat16. Returns what runs."""
    problems, checked = [], {}
    for t in model_inputs:
        a = np.asarray(inputs[t.name])
        want = np.dtype(t.dtype)
        if want == BF16 and a.dtype.kind == "V" and a.dtype.itemsize == 2 and a.shape == tuple(t.shape):
            a = a.view(BF16)  # np.save of a bfloat16 array loads back as raw 2-byte records
        if tuple(a.shape) != tuple(t.shape) or a.dtype != want:
            problems.append(CannError(t.name, f"expected shape {tuple(t.shape)} {t.dtype}, got shape "
                                              f"{tuple(a.shape)} {np.asarray(inputs[t.name]).dtype}").diagnostics[0])
        checked[t.name] = a
    if problems:
        raise CannError.many(problems)
    return checked


def random_inputs(model_inputs, seed: int) -> tuple[dict[str, np.ndarray], list[str]]:
    """Standard-normal floats (drawn in float32, as ``cann.testing.random_inputs``), integers uniform
    in [0, 10), booleans fair coins; one seeded stream over the inputs in order. Returns the inputs
    and, per input, what it got (``"x: standard normal float32"``)."""
    rng = np.random.default_rng(seed)
    out, got = {}, []
    for t in model_inputs:
        dt = np.dtype(t.dtype)
        if dt.kind == "f" or dt == BF16:
            out[t.name] = rng.standard_normal(t.shape, dtype=np.float32).astype(dt)
            got.append(f"{t.name}: standard normal {t.dtype}")
        elif dt.kind in "iu":
            out[t.name] = rng.integers(0, 10, size=t.shape).astype(dt)
            got.append(f"{t.name}: integers in [0, 10) {t.dtype}")
        else:
            out[t.name] = rng.random(t.shape) < 0.5
            got.append(f"{t.name}: fair-coin {t.dtype}")
    return out, got


def _at_least(value: int | None, low: int) -> int | None:
    if value is not None and value < low:
        raise click.BadParameter(f"must be >= {low}, got {value}")
    return value


def _tolerance(ctx, param, value):
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise click.BadParameter(f"must be a finite number >= 0, got {value}")
    return value


def summary(name: str, a: np.ndarray) -> str:
    line = f"{name}: shape={tuple(a.shape)} dtype={a.dtype}"
    if a.size:
        f = a.astype(np.float64)
        with np.errstate(all="ignore"):  # +inf and -inf (an fp16 overflow) average to nan: no numpy warning
            line += f" min={f.min():.6g} max={f.max():.6g} mean={f.mean():.6g}"
        if a.ndim == 2:
            am = np.argmax(a, axis=1).tolist()
            line += f" argmax={am[:8]}{'...' if len(am) > 8 else ''}"
    return line


def _print_info(om) -> None:
    """The metadata of an offline model, one fact a line."""
    print(f"soc_version: {om.soc_version}")
    print(f"precision_mode: {om.precision_mode}")
    for kind, ts in (("input", om.inputs), ("output", om.outputs)):
        for t in ts:
            print(f"{kind}: {t.name} shape={tuple(t.shape)} dtype={t.dtype}")
    print(f"kernels: {len(om.kernels)}  launches: {len(om.launches)}  gm_size: {om.gm_size}")
    print(memory_line(om))
    for d in om.knowledge_bases or ("none",):
        role, _, digest = d.partition(":")
        print(f"knowledge base: {role}" + (f" sha256 {digest}" if digest else ""))


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("om", metavar="MODEL.om")
@click.option("--input", "input_specs", multiple=True, metavar="NAME=FILE.npy | FILE.npz | FILE.npy",
              help="Input values (repeatable). Default: seeded standard-normal inputs (a --spatial-split model: "
              "required, .npy).")
@click.option("--seed", type=int, callback=lambda c, p, v: _at_least(v, 0), default=0, show_default=True,
              help="Seed of the generated inputs (>= 0).")
@click.option("--output", metavar="OUT.npz|OUT.npy", help="Write the outputs (.npz: keys = output names; .npy: the "
              "output of a single-output model).")
@click.option("--compare", metavar="MODEL.onnx", help="Compare the outputs with onnxruntime (CPU).")
@click.option("--tolerance", type=float, callback=_tolerance, help="Largest rel_l2_err accepted by --compare "
              "(and by each layer of --all-layers; default 1e-2 for force_fp16/allow_fp32_to_fp16/allow_mix_precision, "
              "else 1e-4).")
@click.option("--profile", is_flag=True, help="Print the per-launch profile (cycles, time, msprof pipe ratios, "
              "GM bytes, the compiled bound and its binding resource, model / executed MACs, the ideal bound "
              "and ideal_pct) and a total line.")
@click.option("--profile-csv", metavar="PATH", help="Write the profile as CSV, one row per launch and a total row.")
@click.option("--trace", metavar="PATH", help="Write a Chrome trace-event JSON timeline (opens in Perfetto).")
@click.option("--sim-checks", type=click.Choice(["error", "warn", "off"]), default="error", show_default=True,
              help="Simulator race/deadlock/double-set checks: errors, warnings, or no race detector.")
@click.option("--timing-only", is_flag=True, help="Simulate the timing only (no values: no inputs, no outputs, "
              "much faster): print the cycles and the profile, identical to a full run's.")
@click.option("--max-instructions", type=int, callback=lambda c, p, v: _at_least(v, 1), default=None,
              help="The simulation's work budget: instructions executed over all launches and blocks, plus one "
                   "per block (default 4000000, docs/om-format.md); a model needing more is refused before it runs.")
@click.option("--all-layers", is_flag=True, help="With --compare: compare every layer's GM tensor with onnxruntime "
              "and name the first node beyond --tolerance (docs/accuracy.md).")
@click.option("--info", is_flag=True, help="Print the model's metadata (SoC, precision mode, inputs, outputs, "
              "kernels, launches, the knowledge bases it was compiled with) and run nothing.")
@click.option("--csv", "layers_csv", metavar="PATH", help="With --all-layers: write the per-layer rows (node, op, "
              "tensor, status, kernel, launch, shape, max_abs_err, rel_l2_err, cosine_similarity) as CSV.")
def cli(om, input_specs, seed, output, compare, tolerance, profile, profile_csv, trace, sim_checks,
        timing_only, max_instructions, all_layers, info, layers_csv) -> int:
    """Run MODEL.om on the simulated Ascend AI Core.

    A model compiled with --spatial-split RxC runs one device per MPI rank: mpiexec -n R*C cann-run
    MODEL.om --input x.npy --output y.npy (existing .npy files, memory-mapped; docs/large-images.md)."""
    import cann
    from cann.fileio import check_no_overwrite
    from cann.spatial.bundle import is_bundle

    outputs = {"--output": output, "--profile-csv": profile_csv, "--trace": trace, "--csv": layers_csv}
    for path in outputs.values():  # before any work: the model's load and the (long) simulation
        if path and os.path.isdir(path):
            raise CannError(path, "cannot write: is a directory")
        if path and not Path(path).parent.is_dir():
            raise CannError(path, f"cannot write: directory {Path(path).parent} does not exist")
    files = [s.split("=", 1)[1] if "=" in s and not os.path.exists(s) else s for s in input_specs]
    check_no_overwrite(outputs, [("the model", om), ("the --compare model", compare),
                                 *(("an --input file", f) for f in files)])
    if output and not output.endswith((".npz", ".npy")):  # was: an .npz archive under any name
        raise CannError(output, "--output writes .npz (every output, by name) or .npy (a single output): "
                                "name the file OUT.npz or OUT.npy")
    if is_bundle(om):
        return _run_spatial(om, input_specs, output, dict(compare=compare, profile=profile, profile_csv=profile_csv,
                                                          trace=trace, timing_only=timing_only, all_layers=all_layers,
                                                          info=info, csv=layers_csv, tolerance=tolerance))
    if info:
        from cann.codegen.om import read_om

        _print_info(read_om(om))
        return 0

    if timing_only:
        for option, given in (("--compare", compare), ("--output", output), ("--input", input_specs)):
            if given:
                raise CannError("--timing-only", f"computes no values: it cannot be combined with {option}")
    model = cann.load(om)
    kw = {} if max_instructions is None else {"max_instructions": max_instructions}
    if sim_checks != "error":
        kw["sim_checks"] = sim_checks
    if timing_only:
        _simulate(om, model, model.time, **kw)
        _report(model.last_run, True, profile_csv, trace, model.om)
        return 0
    plan = _layer_plan(model, str(om), compare, all_layers, layers_csv)
    names = [t.name for t in model.outputs] + (plan.tensors() if plan else [])
    sess = reference_session(compare, names) if compare else None
    if input_specs:
        inputs = gather_inputs(input_specs, model.inputs)
    else:
        inputs, got = random_inputs(model.inputs, seed)
        print(f"note: no --input given: generated inputs (seed {seed}): {'; '.join(got) or 'none'}", file=sys.stderr)
    inputs = check_inputs(inputs, model.inputs)
    run = (lambda x, **k: plan.run(model, x, **k)) if plan else model.run
    outputs = _simulate(om, model, run, inputs, **kw)
    overflow = getattr(model.last_run, "overflow", None)
    if overflow:
        print(f"warning: {overflow[0]}: {overflow[1]}", file=sys.stderr)
    outputs = {t.name: np.asarray(outputs[t.name]).astype(t.dtype, copy=False) for t in model.outputs}
    for name, a in outputs.items():
        print(summary(name, a))
    status = 0
    if compare:
        precision = getattr(model, "precision_mode", None)
        if precision is None:
            from cann.codegen.om import read_om

            precision = read_om(om).precision_mode
        tol = tolerance if tolerance is not None else default_tolerance(precision)
        refs = reference_outputs(sess, compare, inputs, list(outputs))
        for name, y in outputs.items():
            r = refs[name]
            if r.shape != y.shape:
                print(f"{name}: shape mismatch: got {y.shape}, onnxruntime gives {r.shape}")
                status = 1
                continue
            max_abs, rel_l2 = errors(y, r)
            print(f"{name}: max_abs_err={max_abs:.3e} rel_l2_err={rel_l2:.3e}")
            if not rel_l2 <= tol:  # also catches NaN
                status = 1
        if status:
            print(f"cann-run: outputs differ from onnxruntime by more than rel_l2_err {tol:g}", file=sys.stderr)
        if plan:
            layer_refs = reference_outputs(sess, compare, inputs, plan.tensors())
            status = max(status, _report_layers(plan, plan.compare(layer_refs, tol), tol, layers_csv))
    if output and output.endswith(".npy"):  # the one output as an array
        if len(outputs) != 1:
            raise CannError(output, f"a .npy holds one array; the model has {len(outputs)} outputs: use .npz")
        with atomic_output(output, "wb") as f:
            np.save(f, next(iter(outputs.values())))
    elif output:  # written once the run (and any comparison) went through: no file on an error
        with atomic_output(output, "wb") as f:
            np.savez(f, **outputs)
    _report(getattr(model, "last_run", None), profile, profile_csv, trace, getattr(model, "om", None))
    return status


def _run_spatial(om: str, input_specs, output: str | None, unsupported: dict) -> int:
    """One rank of a spatially partitioned model (``cann-compile --spatial-split``) under ``mpiexec``: inputs and
    the output are memory-mapped ``.npy`` files, each rank reads and writes only its block; rank 0 prints the
    simulated step time (cann.spatial.run). An error every rank meets alike (cann.spatial.run.on_every_rank)
    is printed by rank 0 only; the other ranks exit with status 2 quietly."""
    from cann.spatial.run import format_time

    try:
        rec, head = _spatial_rank(om, input_specs, output, unsupported)
    except CannError as e:
        if getattr(e, "every_rank", False):
            from mpi4py import MPI

            if MPI.COMM_WORLD.rank:
                raise SystemExit(2) from None
        raise
    if rec["time"] is not None:
        print(format_time(rec["time"], head.grid))
        if output:
            print(f"{output}: written by {head.ranks} devices")
    return 0


def _spatial_rank(om: str, input_specs, output: str | None, unsupported: dict):
    """``_run_spatial``'s checks of the command line (the same on every rank), then this rank's run."""
    from cann.spatial.run import on_every_rank, run_mpi_rank

    try:
        head = _spatial_checks(om, input_specs, output, unsupported)
    except CannError as e:
        raise on_every_rank(e) from None
    return run_mpi_rank(om, head[1], output), head[0]


def _spatial_checks(om: str, input_specs, output: str | None, unsupported: dict):
    """(the bundle's header, input name -> .npy path) of a spatial run's command line."""
    for flag, value in unsupported.items():
        if value:
            raise CannError(f"--{flag.replace('_', '-')}", f"does not apply to {om}, a spatially partitioned model")
    from cann.spatial.bundle import load_bundle

    head = load_bundle(om, blobs=set())
    names = [spec["name"] for spec in head.manifest["inputs"]]
    inputs = {}
    for spec in input_specs:
        name, sep, path = spec.partition("=")
        if not sep:
            if len(names) != 1:
                raise CannError(spec, f"a bare .npy needs a single-input model: use --input NAME={spec}")
            name, path = names[0], spec
        if name not in names:
            raise CannError(spec, f"'{name}' is not an input of the model (inputs: {', '.join(names)})")
        if not path.endswith(".npy") or not os.path.isfile(path):
            raise CannError(path, "a spatially partitioned model reads its inputs from existing .npy files "
                                  "(memory-mapped: each device reads only its block)")
        inputs[name] = path
    missing = [n for n in names if n not in inputs]
    if missing:
        raise CannError("--input", f"no .npy for model input(s): {', '.join(missing)} (a spatially partitioned "
                                   "model takes no generated inputs)")
    if output is not None:
        if not output.endswith(".npy") or len(head.manifest["outputs"]) != 1:
            raise CannError(output, "a spatially partitioned model writes its single output to a .npy file")
    return head, inputs


def _simulate(om, model, fn, *args, **kw):
    """``fn(*args, **kw)`` (``model.run`` or ``model.time``) with the simulator's warnings printed
    as ``warning:`` lines after it, and its errors located at the ``.om`` file."""
    from cann.sim.timing import SimWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SimWarning)
        warnings.simplefilter("ignore", FloatOverflowWarning)
        try:
            result = fn(*args, **kw)
        except CannError as e:  # the simulator names the model "<model>": here it is the .om file
            raise CannError(diagnostics=[Diagnostic(str(om) if d.location == "<model>" else d.location, d.message,
                                                    d.needs_constant) for d in e.diagnostics]) from None
    for loc, msg in getattr(model.last_run, "problems", ()):
        print(f"warning: {loc}: {msg}", file=sys.stderr)
    return result


def _report(run, profile: bool, profile_csv: str | None, trace: str | None, om=None) -> None:
    """The cycles line, then the profile table and the device memory line of ``om``
    (``profile``), CSV and trace files asked for."""
    if run is None:
        return
    print(f"cycles: {run.cycles}  instructions: {run.instructions}")
    if profile or profile_csv or trace:
        from cann.sim import profile as prof

        if profile:
            print(prof.format_profile(run))
            if om is not None:
                print(memory_line(om))
        if profile_csv:
            prof.write_profile_csv(run, profile_csv)
        if trace:
            prof.write_trace(run, trace)


def _layer_plan(model, om: str, compare: str | None, all_layers: bool, layers_csv: str | None):
    """``--all-layers``: the .om's GM tensors mapped to ``compare``'s ONNX tensors (cann.accuracy)."""
    if layers_csv and not all_layers:
        raise CannError("--csv", "writes the per-layer comparison: give --all-layers too")
    if not all_layers:
        return None
    if not compare:
        raise CannError("--all-layers", "needs --compare MODEL.onnx (the model the .om was compiled from)")
    from cann.accuracy import plan_layers

    plan = plan_layers(compare, model.om, om)
    for note in plan.notes:
        print(f"note: {note}", file=sys.stderr)
    return plan


def _report_layers(plan, rows, tol: float, layers_csv: str | None) -> int:
    """Print (or write as CSV) the per-layer rows, a count line and the first diverging node; 1 if one diverged."""
    from cann import accuracy

    if layers_csv:
        accuracy.write_csv(rows, layers_csv)
    else:
        for line in accuracy.format_rows(rows):
            print(line)
    first = accuracy.first_divergence(rows)
    print(accuracy.summary(rows))
    print(accuracy.divergence_message(plan, first, tol))
    return int(first is not None)


def main(argv: Sequence[str] | None = None) -> None:
    run_command(cli, argv, "cann-run")


if __name__ == "__main__":
    main()
