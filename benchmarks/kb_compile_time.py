"""Benchmark: what the shipped knowledge base costs at compile time and gives at run time (issue 13).

    PYTHONPATH=. python benchmarks/kb_compile_time.py [model] [--repeat 3]

Compiles a test model (light ResNet-50 by default; Ascend910, force_fp16, -O1) untuned (``kb="none"``:
the default rules only) and warm (the default compile: the shipped knowledge base), interleaved,
``--repeat`` times each; prints the median wall and CPU time of each, their ratios (the issue's bar: at
most 1.2), the entries applied, and each compile's simulated cycles (timing-only run) and ``ideal_pct``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import cann
from cann.compiler import lower
from cann.testing import test_model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", default="resnet50", help="cann.testing.test_model name")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-cycles", dest="cycles", action="store_false", help="skip the timing-only runs")
    args = ap.parse_args()
    model = test_model(args.model)
    times: dict[str, list[float]] = {"untuned": [], "warm": []}
    cpu: dict[str, list[float]] = {"untuned": [], "warm": []}
    compiled = {}
    for _ in range(args.repeat):
        for label, kb in (("untuned", "none"), ("warm", None)):
            t0, c0 = time.perf_counter(), time.process_time()
            compiled[label] = cann.compile(model, kb=kb)
            times[label].append(time.perf_counter() - t0)
            cpu[label].append(time.process_time() - c0)
    applied = sum(1 for o in lower(model, until="graph").walk() if "tile.kb" in o.attributes)
    print(f"{args.model}: knowledge-base entries applied: {applied}; "
          f"knowledge bases: {', '.join(compiled['warm'].om.knowledge_bases) or 'none'}")
    for label, ts in times.items():
        st = compiled[label].time() if args.cycles else None
        print(f"{label:>8}: compile median {statistics.median(ts):6.2f} s wall ({', '.join(f'{t:.2f}' for t in ts)}), "
              f"{statistics.median(cpu[label]):6.2f} s CPU ({', '.join(f'{t:.2f}' for t in cpu[label])})"
              + (f"  cycles {st.cycles:,}  ideal_pct {st.ideal_pct:.2f}" if st else ""))
    print(f"warm / untuned compile time: {statistics.median(times['warm']) / statistics.median(times['untuned']):.3f} "
          f"wall, {statistics.median(cpu['warm']) / statistics.median(cpu['untuned']):.3f} CPU (a loaded machine: "
          "CPU time is the steadier figure)")


if __name__ == "__main__":
    main()
