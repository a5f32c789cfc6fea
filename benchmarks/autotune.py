"""Benchmark: the cube cost models against timing-only simulation on the fixed list (issue 13, items 3, 4, 8).

The fixed list (docs/autotune.md): every distinct convolution of ResNet-50 (input and weight shapes,
strides, pads, dilations of its dense Conv nodes, deduplicated) and the GEMM suite
(``benchmarks/gemm.py`` ``SHAPES``: one MatMul, A [M, K] float16 input, B [K, N] float16 initializer).
Ascend910, ``force_fp16``, ``-O1``, no knowledge base.

Per shape, the candidates are the lowering's own legal tilings with the lowering's own estimates:

* a convolution: :func:`cann.autotune.candidates` (channel groups ``n_blocks`` x output rows
  ``rows`` x row groups ``m_blocks``, every value the SoC's buffers and cores allow; estimate
  ``cann.lowering.conv_plan.conv_plan``), 200-560 per shape;
* a GEMM: every tiling ``cann.lowering.gemm.plan`` weighs for the default compile (core grid
  ``m_blocks`` x ``n_blocks``, L0C tile ``m`` x ``n``, ``k``, ``step_k``, ``a_panel``; estimate
  ``gemm._cost`` as the plan compares it), collected with ``gemm.considered()`` -- 500 to 11,000 per
  shape. (A GEMV kernel, M < 16, is the default's only; its candidates are the cube's.)

Each measured candidate is lowered with its tiling pinned on the kernel and timed with the
timing-only simulator (``Model.time``: the kernel's cycles). Exhaustive measurement of every
candidate (``--all``) is affordable for a convolution (about 0.5 s each) but not for the GEMMs'
thousands (up to 4 s each for the largest), so by default each shape measures a bounded, stated
subset: the default compile's tiling (the model's pick), the ``--top`` best estimated, and a
seeded uniform sample of ``--sample`` candidates (all of them when the space is smaller). Kendall's
tau (tau-b) is computed over the uniform sample (an unbiased estimate of the tau over all legal
candidates); the regret is the default's simulated cycles over the best simulated of everything
measured, minus one (a lower bound of the exhaustive regret when the space was sampled: the
model's near-best are measured, far-off ones only by sample).

Measurements are kept in a persistent cache (``--cache``, JSON lines) keyed by the sha256 of the
candidate's tile-stage module text, each dense constant in it printed as the sha256 of its bytes
(the lowering's output, so a changed lowering or weight layout re-measures)
together with a fingerprint of the sources downstream of it (tile-to-ascend lowering,
synchronization, codegen, the simulator, the SoC descriptions), so a stale entry is never reused.
Shapes run cheapest first over ``--jobs`` processes; the rows print in the list's order.

Usage::

    PYTHONPATH=. python benchmarks/autotune.py [--only conv|gemm] [--shapes N] [--skip N]
        [--top T] [--sample S | --all] [--jobs J] [--cache PATH] [--json PATH] [--kb-out PATH]
    PYTHONPATH=. python benchmarks/autotune.py --report RUN.json [MORE.json ...] [--markdown]

``--report`` prints the rows and the summary of results saved with ``--json`` (several files: runs
of parts of the list, e.g. by ``--skip`` / ``--shapes``) without measuring.

(needs scipy: ``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr
from xdsl.passes import PassPipeline
from xdsl.printer import Printer

from cann.autotune import Bench, ConvShape, candidates, conv_ops
from cann.compiler import lower, make_context, stage_pipelines
from cann.errors import CannError
from cann.hw.config import load_soc
from cann.passes.tile_search_kb import compiler_version, dump, signature
from cann.testing import test_model

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gemm import SHAPES as GEMM_SHAPES, matmul_model  # noqa: E402  (benchmarks/gemm.py)

SOC = "Ascend910"
PRECISION = "force_fp16"
ROOT = Path(__file__).resolve().parent.parent
#: the sources between the tile-stage module and the simulated cycles (their change invalidates the cache)
DOWNSTREAM = ("cann/lowering/convert_tile_to_ascend.py", "cann/lowering/common.py", "cann/lowering/generations.py",
              "cann/passes/ascend_insert_sync.py", "cann/passes/sync_deps.py", "cann/passes/sync_flags.py",
              "cann/passes/sync_loops.py", "cann/dialects", "cann/hw", "cann/codegen", "cann/sim", "cann/runtime.py")


def fingerprint(root: Path = ROOT) -> str:
    """sha256 of the :data:`DOWNSTREAM` sources (``.py`` and ``.json`` files, in path order)."""
    h = hashlib.sha256()
    for rel in DOWNSTREAM:
        p = root / rel
        for f in sorted(p.rglob("*")) if p.is_dir() else [p]:
            if f.suffix in (".py", ".json") and f.is_file():
                h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


class Cache:
    """Measured cycles by key, persisted as JSON lines (``{"key": ..., "cycles": ...}``) appended as
    they are measured (several processes may append; a torn last line is ignored). ``path`` None: in
    memory only."""

    def __init__(self, path: str | os.PathLike | None):
        self.path = Path(path) if path else None
        self.data: dict[str, int] = {}
        self.hits = self.misses = 0
        if self.path and self.path.exists():
            for line in self.path.read_text().splitlines():
                try:
                    e = json.loads(line)
                    self.data[e["key"]] = int(e["cycles"])
                except (ValueError, KeyError, TypeError):
                    continue

    def get(self, key: str) -> int | None:
        got = self.data.get(key)
        if got is None:
            self.misses += 1
        else:
            self.hits += 1
        return got

    def put(self, key: str, cycles: int) -> None:
        self.data[key] = cycles
        if self.path:
            with open(self.path, "a") as f:  # one short write: whole lines from concurrent processes
                f.write(json.dumps({"key": key, "cycles": cycles}) + "\n")


class _KeyPrinter(Printer):
    """The module's text with every dense constant printed as ``dense_sha256<HASH> : TYPE``, the
    sha256 of its raw bytes: xDSL unpacks a constant element by element to print it (53 s for the
    weight of a 512x4096x11008 GEMM), while the hash of its bytes changes exactly when they do."""

    def print_attribute(self, attribute) -> None:
        if isinstance(attribute, DenseIntOrFPElementsAttr):
            self.print_string(f"dense_sha256<{hashlib.sha256(attribute.data.data).hexdigest()}> : ")
            self.print_attribute(attribute.type)
            return
        super().print_attribute(attribute)


def module_key(module, salt: str) -> str:
    """sha256 of ``salt`` and the printed module, its dense constants by the sha256 of their bytes
    (:class:`_KeyPrinter`): a changed constant (bytes, element type or shape) changes the key."""
    import io

    buf = io.StringIO()
    _KeyPrinter(stream=buf).print_op(module)
    return hashlib.sha256(salt.encode() + b"\0" + buf.getvalue().encode()).hexdigest()


@dataclass
class Target:
    """One shape of the fixed list: its candidates ``(pins, estimate)`` and how to measure a tiling."""

    label: str
    op: str  # "Conv" or "MatMul"
    sig: str
    kernel: str
    cands: list[tuple[dict[str, int], float]] = field(default_factory=list)
    default: dict[str, int] = field(default_factory=dict)

    def tile(self, pins):  # -> tile-stage module
        raise NotImplementedError

    def measure(self, module) -> int:  # consumes the module
        raise NotImplementedError

    def tiling(self, module) -> dict[str, int]:
        return Bench.tiling(module) if self.kernel == "conv2d_0" else _tiling_of(module, self.kernel)


def _tiling_of(module, name: str) -> dict[str, int]:
    for op in module.body.block.ops:
        if getattr(op, "sym_name", None) is not None and op.sym_name.data == name:
            return {f: v.value.data for f, v in op.attributes["tile.tiling"].data.items()}
    raise CannError(name, "no such kernel")


class ConvTarget(Target):
    """A convolution: :class:`cann.autotune.Bench`'s single-Conv model and measurement."""

    def __init__(self, sig: str, shape: ConvShape):
        super().__init__(f"{'x'.join(map(str, shape.x))} {'x'.join(map(str, shape.w))} s{shape.strides[0]}",
                         "Conv", sig, "conv2d_0")
        self.shape = shape
        self.bench = Bench(shape, SOC, PRECISION)
        module = self.bench.tile(None)
        self.default = self.bench.tiling(module)
        self.cands = [(c.pins, c.estimate) for c in candidates(shape, self.default, load_soc(SOC), PRECISION)]

    def tile(self, pins):
        return self.bench.tile(pins)

    def measure(self, module) -> int:
        return self.bench.measure(module)

    def cost_hint(self) -> float:
        return len(self.cands) * 0.5


GEMM_FIELDS = ("m_blocks", "n_blocks", "m", "n", "k", "step_k", "a_panel")


class GemmTarget(Target):
    """A MatMul of the GEMM suite: the single-MatMul model, its kernel ``matmul_0``; the candidates
    are what ``gemm.plan`` weighs for the default compile."""

    def __init__(self, m: int, k: int, n: int):
        from cann.lowering import gemm

        self.mkn = (m, k, n)
        self.graph = lower(matmul_model(m, k, n), soc_version=SOC, precision_mode=PRECISION, kb="none", until="graph")
        (op,) = [o for o in self.graph.walk() if o.name == "graph.matmul"]
        super().__init__(f"{m}x{k}x{n}", "MatMul", signature(op), "matmul_0")
        with gemm.considered() as seen:
            module = self.tile(None)
        self.default = _tiling_of(module, self.kernel)
        out, keys = [], set()
        for p in seen:
            pins = {f: getattr(p, f) for f in GEMM_FIELDS}
            key = tuple(pins.values())
            if key not in keys:
                keys.add(key)
                out.append((pins, p.cycles))
        out.sort(key=lambda c: c[1])  # stable
        self.cands = out

    def tile(self, pins):
        module = self.graph.clone()
        stages = dict(stage_pipelines(SOC, PRECISION, 1, tiling={self.kernel: pins} if pins else None))
        from cann.passes import ALL_PASSES

        PassPipeline.parse_spec(ALL_PASSES, stages["tile"]).apply(make_context(), module)
        return module

    def measure(self, module) -> int:
        from cann.codegen.offline import build_offline_model
        from cann.passes import ALL_PASSES
        from cann.runtime import Model

        PassPipeline.parse_spec(ALL_PASSES, dict(stage_pipelines(SOC, PRECISION, 1))["ascend"]).apply(
            make_context(), module)
        stats = Model(build_offline_model(module)).time()
        return next(k.cycles for k in stats.kernels if k.name == self.kernel)

    def cost_hint(self) -> float:
        m, k, n = self.mkn
        return m * k * n / 1e8 + 20


def selection(n: int, top: int, sample: int, seed: str) -> tuple[list[int], list[int]]:
    """(indices to measure, indices of the uniform sample) among ``n`` candidates sorted by estimate:
    the ``top`` first and ``sample`` drawn uniformly (seeded by ``seed``: the same every run); all of
    them when ``sample`` is negative or at least ``n``."""
    if sample < 0 or sample >= n:
        every = list(range(n))
        return every, every
    rng = np.random.default_rng(int.from_bytes(hashlib.sha256(seed.encode()).digest()[:8], "little"))
    drawn = sorted(int(i) for i in rng.choice(n, size=sample, replace=False))
    return sorted(set(range(min(top, n))) | set(drawn)), drawn


@dataclass
class Result:
    label: str
    op: str
    sig: str
    space: int
    measured: int
    tau: float
    regret: float  # the default's simulated cycles over the best measured, minus one
    default_cycles: int
    best_cycles: int
    best_pins: dict[str, int]
    default_tiling: dict[str, int]
    seconds: float
    hits: int
    runs: list[tuple[dict[str, int], float, int]]  # (pins, estimate, cycles) of every measured candidate


def evaluate(target: Target, cache: Cache, top: int, sample: int, salt: str) -> Result:
    """Measure ``target``'s default and selected candidates (:func:`selection`); tau and regret."""
    t_start = time.perf_counter()
    hits0 = cache.hits

    def run(pins) -> tuple[int, dict[str, int]] | None:
        try:
            module = target.tile(pins)
        except CannError:  # the estimate's plan and the lowering disagree: not a candidate
            return None
        tiling = target.tiling(module)
        key = module_key(module, salt)
        got = cache.get(key)
        if got is None:
            got = target.measure(module)
            cache.put(key, got)
        return got, tiling

    default_cycles, default_tiling = run(None)
    idx, drawn = selection(len(target.cands), top, sample, target.sig)
    runs, by_idx = [], {}
    for i in idx:
        pins, est = target.cands[i]
        got = run(pins)
        if got is not None:
            by_idx[i] = len(runs)
            runs.append((pins, est, got[0]))
    sampled = [runs[by_idx[i]] for i in drawn if i in by_idx]
    tau = kendalltau([r[1] for r in sampled], [r[2] for r in sampled]).statistic if len(sampled) > 2 else float("nan")
    best = min([default_cycles] + [r[2] for r in runs])
    best_pins = min(runs, key=lambda r: r[2])[0] if runs and min(r[2] for r in runs) < default_cycles else {}
    return Result(target.label, target.op, target.sig, len(target.cands), len(runs) + 1, float(tau),
                  default_cycles / best - 1, default_cycles, best, best_pins, default_tiling,
                  time.perf_counter() - t_start, cache.hits - hits0, runs)


def targets(which: str, model: str = "resnet50") -> list[tuple[str, object]]:
    """The fixed list as (kind, spec): ``("conv", (sig, ConvShape))`` for every distinct dense
    convolution of ``model`` in model order, then ``("gemm", (M, K, N))`` for the GEMM suite."""
    out = []
    if which in ("all", "conv"):
        seen = {}
        for op in conv_ops(lower(test_model(model), soc_version=SOC, precision_mode=PRECISION, kb="none",
                                 until="graph")):
            seen.setdefault(signature(op), ConvShape.of(op))
        out += [("conv", item) for item in seen.items()]
    if which in ("all", "gemm"):
        out += [("gemm", s) for s in GEMM_SHAPES]
    return out


def build(kind: str, spec) -> Target:
    return ConvTarget(*spec) if kind == "conv" else GemmTarget(*spec)


def _hint(kind: str, spec) -> float:
    """A rough cost of a shape (cheapest first): a convolution's MACs, a GEMM's."""
    if kind == "conv":
        s = spec[1]
        return math.prod(s.out_hw) * math.prod(s.w) / 1e8
    return math.prod(spec) / 1e8 + 1


_WORK: dict = {}


def _work(i: int) -> tuple[int, Result]:
    kind, spec = _WORK["items"][i]
    cache = Cache(_WORK["cache"])
    return i, evaluate(build(kind, spec), cache, _WORK["top"], _WORK["sample"], _WORK["salt"])


def brief(pins: dict[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(pins.items())) or "(the default)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", nargs="?", default="resnet50", help="cann.testing.test_model name (its convolutions)")
    ap.add_argument("--only", choices=("all", "conv", "gemm"), default="all", help="which part of the list")
    ap.add_argument("--shapes", type=int, default=None, help="only the first N shapes (after --skip)")
    ap.add_argument("--skip", type=int, default=0, help="leave out the first N shapes")
    ap.add_argument("--top", type=int, default=16, help="the best estimated candidates measured per shape")
    ap.add_argument("--sample", type=int, default=80, help="candidates measured per shape by uniform sample")
    ap.add_argument("--all", action="store_true", help="measure every candidate (exhaustive; slow for GEMMs)")
    ap.add_argument("--jobs", type=int, default=1, help="processes measuring shapes in parallel")
    ap.add_argument("--cache", default=str(ROOT / ".autotune-cache.jsonl"),
                    help="persistent measurement cache ('' for none)")
    ap.add_argument("--markdown", action="store_true", help="also print the table for docs/autotune.md")
    ap.add_argument("--json", default=None, help="write every shape's result (and measured runs) here")
    ap.add_argument("--kb-out", default=None, help="write each shape's best tiling, where it beats the default, "
                                                   "as a knowledge base here")
    ap.add_argument("--report", nargs="+", default=None, metavar="JSON",
                    help="print the results saved by --json in these files (a later file's row of a shape "
                         "replaces an earlier one's) without measuring anything")
    args = ap.parse_args()
    if args.report:
        done = load_results(args.report)
        for r in done:
            _row(r)
        summary(done)
        if args.markdown:
            print(markdown(done))
        return
    t_all = time.perf_counter()
    items = targets(args.only, args.model)[args.skip:]
    items = items[:args.shapes] if args.shapes is not None else items
    salt = fingerprint()
    sample = -1 if args.all else args.sample
    _WORK.update(items=items, cache=args.cache or None, top=args.top, sample=sample, salt=salt)
    order = sorted(range(len(items)), key=lambda i: _hint(*items[i]))  # cheapest first
    print(f"{SOC} {PRECISION}: {len(items)} shapes; measured per shape: the default, the top {args.top} estimated, "
          f"{'every candidate' if args.all else f'{args.sample} sampled'}; cache {args.cache or 'none'}", flush=True)
    print(f"{'shape':>34s} {'space':>6s} {'meas':>5s} {'tau':>6s} {'regret':>7s} {'default':>8s} {'best':>8s} "
          f"{'hits':>5s} {'s':>5s}  best tiling")
    results: dict[int, Result] = {}
    if args.jobs > 1:
        import multiprocessing

        with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
            for i, r in pool.imap_unordered(_work, order):
                results[i] = r
                _row(r)
    else:
        for i in order:
            results[i] = _work(i)[1]
            _row(results[i])
    done = [results[i] for i in range(len(items))]
    print("in list order:")
    for r in done:
        _row(r)
    summary(done)
    print(f"wall {time.perf_counter() - t_all:.0f} s", flush=True)
    if args.markdown:
        print(markdown(done))
    if args.json:
        Path(args.json).write_text(json.dumps([r.__dict__ for r in done], indent=1, sort_keys=True))
    if args.kb_out:
        entries = [{"op": r.op, "signature": r.sig, "soc": SOC, "precision_mode": PRECISION,
                    "compiler": compiler_version(), "cycles": r.best_cycles, "tiling": r.best_pins}
                   for r in done if r.best_pins]
        Path(args.kb_out).write_text(dump(entries))
        print(f"{args.kb_out}: {len(entries)} entries")


def load_results(paths) -> list[Result]:
    """The :class:`Result` rows that ``--json`` wrote to ``paths``, in file order; a later row of the
    same shape (op and label) replaces an earlier one in its place."""
    by_shape: dict[tuple[str, str], Result] = {}
    for path in paths:
        for d in json.loads(Path(path).read_text()):
            r = Result(**d)
            by_shape[(r.op, r.label)] = r
    return list(by_shape.values())


def _row(r: Result) -> None:
    print(f"{r.label:>34s} {r.space:6d} {r.measured:5d} {r.tau:6.2f} {r.regret:7.1%} {r.default_cycles:8d} "
          f"{r.best_cycles:8d} {r.hits:5d} {r.seconds:5.0f}  {brief(r.best_pins)}", flush=True)


def markdown(done: list[Result]) -> str:
    """The rows of docs/autotune.md's table."""
    out = ["| shape | candidates | measured | tau | regret of the model's pick | its cycles | best measured | its tiling |",
           "|---|---|---|---|---|---|---|---|"]
    for r in done:
        shape = r.label.replace(" s", " stride ") if r.op == "Conv" else f"MatMul {r.label}"
        out.append(f"| {shape} | {r.space:,} | {r.measured} | {r.tau:.2f} | {r.regret:.1%} | {r.default_cycles:,} | "
                   f"{r.best_cycles:,} | {'`' + brief(r.best_pins) + '`' if r.best_pins else 'the pick'} |")
    return "\n".join(out)


def summary(done: list[Result]) -> dict[str, float]:
    """Median tau and geomean regret, over all shapes and per op; printed."""
    out = {}
    for name, rs in (("conv", [r for r in done if r.op == "Conv"]), ("gemm", [r for r in done if r.op != "Conv"]),
                     ("all", done)):
        taus = [r.tau for r in rs if not math.isnan(r.tau)]
        if not rs:
            continue
        med = statistics.median(taus) if taus else float("nan")
        geo = statistics.geometric_mean([1 + r.regret for r in rs]) - 1
        out[name] = (med, geo)
        print(f"{name}: {len(rs)} shapes: median tau {med:.2f}; geomean regret of the model's pick {geo:.1%}; "
              f"worst {max(r.regret for r in rs):.1%}", flush=True)
    return out


if __name__ == "__main__":
    main()
