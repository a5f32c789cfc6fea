"""Benchmark: light ResNet-50 with generated weights, compiled and simulated, against onnxruntime.

    python benchmarks/resnet50.py [--precision-mode force_fp16|must_keep_origin_dtype] [--seed 0]

Prints plain ``name: value`` lines: compile, simulation and onnxruntime wall-clock seconds (same
input, same process; onnxruntime's session creation is reported separately from its run, CPU
execution provider), simulated cycles, instruction count, the compiled bound's and the ideal
bound's share of the cycles (``ideal_pct``: Σ ideal ÷ Σ cycles over every launch;
``ideal_pct_conv_gemm``: over the launches with model MACs only; docs/core-model.md), model and
executed MACs, the error of every output (the probabilities and the exposed logits) against
onnxruntime, and ``run_seconds_vs_onnxruntime``: ``Model.run`` wall time over onnxruntime's
``InferenceSession.run`` (session creation excluded), the median of 3 runs of each, interleaved in
this process (the simulation-speed target of the pipelining and AutoTune issues). The same runs'
CPU seconds (``time.process_time``: every thread of the process) are printed too: on a loaded
machine wall-clock time says more about the other processes than about either side.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import cann
from cann.compiler import PRECISION_MODES
from cann.testing import random_inputs, test_model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--precision-mode", default="force_fp16", choices=PRECISION_MODES)
    ap.add_argument("--seed", type=int, default=0, help="seed of the input (weights always use seed 0)")
    args = ap.parse_args()

    model = test_model("resnet50")
    inputs = random_inputs(model, seed=args.seed)

    t0 = time.perf_counter()
    compiled = cann.compile(model, precision_mode=args.precision_mode)
    t1 = time.perf_counter()
    outputs = compiled.run(inputs)
    t2 = time.perf_counter()
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    t3 = time.perf_counter()
    names = [o.name for o in sess.get_outputs()]
    reference = dict(zip(names, sess.run(names, inputs)))
    t4 = time.perf_counter()

    print("model: light_resnet50 (generated weights, seed 0)")
    print(f"precision_mode: {args.precision_mode}")
    print(f"compile_seconds: {t1 - t0:.2f}")
    print(f"simulate_seconds: {t2 - t1:.2f}")
    print(f"onnxruntime_session_seconds: {t3 - t2:.3f}")
    print(f"onnxruntime_seconds: {t4 - t3:.3f}")
    run = compiled.last_run
    cube = [k for k in run.kernels if k.model_macs]  # the Conv and Gemm launches
    print(f"cycles: {run.cycles}")
    print(f"instructions: {run.instructions}")
    print(f"compiled_bound_pct: {run.compiled_bound_pct:.1f}")
    print(f"model_macs: {run.model_macs}")
    print(f"executed_macs: {run.executed_macs}")
    print(f"ideal_cycles: {run.ideal_cycles}")
    print(f"ideal_pct: {run.ideal_pct:.2f}")
    print(f"ideal_pct_conv_gemm: {run.ideal_pct_of(cube):.2f}")
    sim_s, ort_s, sim_cpu, ort_cpu = [], [], [], []
    for _ in range(3):  # interleaved, so both see the same machine load
        t, c = time.perf_counter(), time.process_time()
        compiled.run(inputs)
        sim_s.append(time.perf_counter() - t)
        sim_cpu.append(time.process_time() - c)
        t, c = time.perf_counter(), time.process_time()
        sess.run(names, inputs)
        ort_s.append(time.perf_counter() - t)
        ort_cpu.append(time.process_time() - c)
    print(f"run_seconds_median: {np.median(sim_s):.3f}")
    print(f"onnxruntime_run_seconds_median: {np.median(ort_s):.4f}")
    print(f"run_seconds_vs_onnxruntime: {np.median(sim_s) / np.median(ort_s):.1f}")
    print(f"run_cpu_seconds_median: {np.median(sim_cpu):.3f}")
    print(f"onnxruntime_run_cpu_seconds_median: {np.median(ort_cpu):.4f}")
    for out in model.graph.output:
        y = outputs[out.name].astype(np.float64).reshape(-1)
        r = reference[out.name].astype(np.float64).reshape(-1)
        print(f"{out.name}_max_abs_err: {float(np.max(np.abs(y - r))):.3e}")
        print(f"{out.name}_rel_l2_err: {float(np.linalg.norm(y - r) / max(np.linalg.norm(r), 1e-30)):.3e}")


if __name__ == "__main__":
    main()
