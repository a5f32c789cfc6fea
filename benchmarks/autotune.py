"""Benchmark: the conv tiling cost model against timing-only simulation (issue 13, items 3, 4, 8).

Every distinct convolution of a test model (ResNet-50 by default: input and weight shapes, strides,
pads, dilations) becomes a single-Conv ONNX model, compiled with each tiling of a grid and timed
with the timing-only simulator (``Model.time``: the cycles of a full run). The grid and the
measurement are the tuner's (:mod:`cann.autotune`: ``candidates``, ``Bench``): channel groups
``n_blocks`` x output rows per tile ``rows`` (``--rows``, and the default's) x row groups ``m_blocks``
(the fewest and the most the rows allow; ``--full``: the tuner's whole space), as far as the SoC's
buffers take them. The cost model's estimate of a tiling is the figure the lowering minimizes
(``cann.lowering.cube._conv_plan``). Per shape it prints the candidates, Kendall's tau (tau-b, scipy) between estimated
and simulated cycles, the regret of the model's pick (simulated cycles of the estimate's argmin over
the best simulated, minus one) and of the default compile; then the median tau and the geometric
mean regrets.

With ``--kb-out PATH`` the best simulated tiling of each shape is written as a knowledge base
(:mod:`cann.passes.tile_search_kb`; ``cann-compile --kb PATH`` applies it).

Usage: ``PYTHONPATH=. python benchmarks/autotune.py [model] [--shapes N] [--rows R ...] [--kb-out PATH]``
(needs scipy: ``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import math
import statistics

from scipy.stats import kendalltau

from cann.autotune import Bench, ConvShape, candidates, conv_ops
from cann.compiler import lower
from cann.hw.config import load_soc
from cann.passes.tile_search_kb import compiler_version, dump, signature
from cann.testing import test_model

SOC = "Ascend910"
PRECISION = "force_fp16"


def conv_shapes(model) -> list[tuple[str, ConvShape]]:
    """The distinct convolutions of ``model``: (knowledge-base signature, shape), in model order."""
    out = {}
    for op in conv_ops(lower(model, soc_version=SOC, precision_mode=PRECISION, until="graph")):
        out.setdefault(signature(op), ConvShape.of(op))
    return list(out.items())


def grid(cands, rows: set[int]) -> list:
    """The benchmark's grid within the tuner's space: ``rows`` per tile in ``rows``, ``m_blocks`` at
    1 and at its largest for each (n_blocks, rows)."""
    top = {}
    for c in cands:
        k = (c.pins["n_blocks"], c.pins["rows"])
        top[k] = max(top.get(k, 1), c.pins["m_blocks"])
    return [c for c in cands if c.pins["rows"] in rows
            and c.pins["m_blocks"] in (1, top[(c.pins["n_blocks"], c.pins["rows"])])]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", nargs="?", default="resnet50", help="cann.testing.test_model name")
    ap.add_argument("--shapes", type=int, default=None, help="only the first N distinct convolutions")
    ap.add_argument("--rows", type=int, nargs="+", default=[1, 2, 4, 7, 8, 14, 28],
                    help="output rows per tile to try (those above the map's height are skipped)")
    ap.add_argument("--full", action="store_true", help="every tiling of the tuner's space (slow)")
    ap.add_argument("--skip", type=int, default=0, help="leave out the first N distinct convolutions")
    ap.add_argument("--kb-out", default=None, help="write each shape's best tiling, where it beats the default, "
                                                   "as a knowledge base here")
    args = ap.parse_args()
    soc = load_soc(SOC)
    shapes = conv_shapes(test_model(args.model))[args.skip:args.shapes]
    print(f"{'x':>18s} {'w':>16s} {'s':>3s} {'cands':>5s} {'tau':>6s} {'regret':>7s} {'default':>8s} "
          f"{'best':>7s}  best tiling")
    taus, regrets, defaults, entries = [], [], [], []
    for sig, s in shapes:
        bench = Bench(s, SOC, PRECISION)
        module = bench.tile(None)
        t0 = bench.tiling(module)
        default_cycles = bench.measure(module)
        cands = candidates(s, t0, soc, PRECISION)
        if not args.full:
            cands = grid(cands, set(args.rows) | {t0["rows"]})
        runs = []
        for c in cands:
            runs.append((c.estimate, bench.measure(bench.tile(c.pins)), c.pins))
        est = [v[0] for v in runs]
        sim = [v[1] for v in runs]
        tau = kendalltau(est, sim).statistic if len(runs) > 2 else float("nan")
        best = min(sim)
        pick = sim[est.index(min(est))]
        taus.append(tau)
        regrets.append(pick / best)
        defaults.append(default_cycles / best)
        bt = min(runs, key=lambda v: v[1])[2]
        if best < default_cycles:  # an entry only where the search beats the default rule
            entries.append({"op": "Conv", "signature": sig, "soc": SOC, "precision_mode": PRECISION,
                            "compiler": compiler_version(), "cycles": best, "tiling": bt})
            if args.kb_out:  # written after every shape: an interrupted run keeps what it measured
                with open(args.kb_out, "w") as f:
                    f.write(dump(entries))
        brief = " ".join(f"{k}={v}" for k, v in sorted(bt.items()))
        print(f"{str(list(s.x)):>18s} {str(list(s.w)):>16s} {s.strides[0]:3d} {len(runs):5d} {tau:6.2f} "
              f"{pick / best - 1:7.1%} {default_cycles / best - 1:8.1%} {best:7d}  {brief}", flush=True)
    valid = [t for t in taus if not math.isnan(t)]
    print(f"shapes {len(shapes)}: median tau {statistics.median(valid):.2f}; geomean regret of the model's pick "
          f"{statistics.geometric_mean(regrets) - 1:.1%}, of the default tiling {statistics.geometric_mean(defaults) - 1:.1%}")
    if args.kb_out:
        with open(args.kb_out, "w") as f:
            f.write(dump(entries))
        print(f"{args.kb_out}: {len(entries)} entries")


if __name__ == "__main__":
    main()
