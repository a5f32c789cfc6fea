"""Benchmark: a timing-only run (``Model.time``) against a full run (``Model.run``) of light ResNet-50.

    python benchmarks/timing_only.py [--precision-mode force_fp16|must_keep_origin_dtype] [--repeat 3]

Compiles light ResNet-50 (batch 1, generated weights) once and saves its ``.om``; then each
measurement runs in a fresh Python process that loads the ``.om`` (nothing cached: the first call
decodes the kernels, builds their streams and times every schedule, as when AutoTune measures a
newly compiled candidate) and calls the simulator twice: ``cold`` is the first call, ``warm`` the
second (schedules cached: a full run then pays for the values only). Full and timing-only
processes alternate, ``--repeat`` of each; the medians are printed as plain ``name: value`` lines,
with the cycles of both modes (identical by construction: docs/core-model.md, "Timing-only runs").
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np


def _child(mode: str, path: str, checks: str) -> None:
    import cann

    model = cann.load(path)
    rng = np.random.default_rng(0)
    inputs = {t.name: rng.standard_normal(t.shape, dtype=np.float32).astype(t.dtype) for t in model.inputs}
    seconds = []
    for _ in range(2):
        t = time.perf_counter()
        if mode == "full":
            model.run(inputs, sim_checks=checks)
        else:
            model.time(sim_checks=checks)
        seconds.append(time.perf_counter() - t)
    run = model.last_run
    print(json.dumps({"cold": seconds[0], "warm": seconds[1], "cycles": run.cycles,
                      "busy": [k.busy_by_pipe for k in run.kernels]}))


def _measure(mode: str, path: str, checks: str) -> dict:
    r = subprocess.run([sys.executable, __file__, "--child", mode, path, checks], capture_output=True, text=True,
                       check=True)
    return json.loads(r.stdout.splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--precision-mode", default="force_fp16")
    ap.add_argument("--repeat", type=int, default=3, help="processes per mode (default 3)")
    ap.add_argument("--sim-checks", default="error", choices=["error", "warn", "off"])
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(*args.child)
        return

    import cann
    from cann.testing import test_model

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "resnet50.om")
        cann.compile(test_model("resnet50"), precision_mode=args.precision_mode).save(path)
        runs: dict[str, list[dict]] = {"full": [], "timing_only": []}
        for _ in range(args.repeat):  # interleaved, so both see the same machine load
            for mode in runs:
                runs[mode].append(_measure(mode, path, args.sim_checks))
    med = {(mode, k): float(np.median([r[k] for r in rs])) for mode, rs in runs.items() for k in ("cold", "warm")}
    cycles = {mode: {r["cycles"] for r in rs} for mode, rs in runs.items()}
    same_busy = all(r["busy"] == runs["full"][0]["busy"] for rs in runs.values() for r in rs)
    print("model: light_resnet50 batch 1 (generated weights, seed 0)")
    print(f"precision_mode: {args.precision_mode}")
    print(f"sim_checks: {args.sim_checks}")
    print(f"cycles_full: {' '.join(map(str, sorted(cycles['full'])))}")
    print(f"cycles_timing_only: {' '.join(map(str, sorted(cycles['timing_only'])))}")
    print(f"identical_cycles_and_pipe_busy: {cycles['full'] == cycles['timing_only'] and same_busy}")
    for k in ("cold", "warm"):
        print(f"full_{k}_seconds_median: {med['full', k]:.3f}")
        print(f"timing_only_{k}_seconds_median: {med['timing_only', k]:.3f}")
        print(f"speedup_{k}: {med['full', k] / med['timing_only', k]:.1f}")


if __name__ == "__main__":
    main()
