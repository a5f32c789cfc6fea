"""Multi-core scaling: simulated cycles of a test model on 1 to 32 cores at batch 1 and 8 (issue 13:
batch 8 on 32 cores at least 16x faster than on 1 core).

Each (batch, cores) point compiles ``cann.testing.test_model(model)`` at that batch
(``cann.testing.with_batch``) with ``aicore_num=cores`` and times it with the timing-only simulator
(``Model.time``: the cycles of a full run, no values). Prints per point the cycles, the speedup over
one core at the same batch, the cycles per image and ``ideal_pct`` (against the whole chip's bound,
docs/core-model.md).

Usage: ``PYTHONPATH=. python benchmarks/scaling.py [model] [--batches 1 8] [--cores 1 2 4 8 16 32]``
"""

from __future__ import annotations

import argparse

import cann
from cann.testing import test_model, with_batch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", nargs="?", default="resnet50", help="cann.testing.test_model name")
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--cores", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32])
    args = ap.parse_args()
    base = test_model(args.model)
    print(f"{'batch':>5s} {'cores':>5s} {'cycles':>10s} {'speedup':>8s} {'cycles/image':>12s} {'ideal_pct':>9s}")
    for b in args.batches:
        model = with_batch(base, b)
        one = None
        for n in args.cores:
            stats = cann.compile(model, aicore_num=n).time()
            one = one or (stats.cycles if n == 1 else None)
            speedup = f"{one / stats.cycles:8.2f}" if one else f"{'-':>8s}"
            print(f"{b:5d} {n:5d} {stats.cycles:10d} {speedup} {stats.cycles // b:12d} {stats.ideal_pct:9.2f}", flush=True)


if __name__ == "__main__":
    main()
