"""Benchmark: the GEMM suite -- one MatMul per shape, judged by its share of the ideal bound.

    python benchmarks/gemm.py [--soc Ascend910] [--precision-mode force_fp16] [--max-macs N] [--kb PATH|none] [MxKxN ...]

Each model is a single ONNX MatMul: A [M, K] float16 graph input, B [K, N] float16 initializer
(seeded standard normal), Y [M, N] float16. It is compiled (``-O1``), run on the simulator and
checked against numpy (float32 products of the float16 inputs). One row per shape: the launches,
simulated cycles, the ideal cycles and ``ideal_pct`` (Σ ideal ÷ Σ cycles over the model's
launches, docs/core-model.md), the GEMM launch's own ``ideal_pct``, executed ÷ model MACs,
the relative L2 error, and compile / simulation wall-clock seconds; then the median and the worst
``ideal_pct``. ``--max-macs`` skips shapes with more MACs (slow to simulate) and says so.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import cann
from cann.compiler import PRECISION_MODES

#: M x K x N of the suite (AutoTune issue)
SHAPES = [(128, 768, 768), (128, 768, 3072), (128, 3072, 768), (512, 768, 768), (512, 768, 3072),
          (512, 3072, 768), (1, 4096, 4096), (32, 4096, 4096), (512, 4096, 4096), (512, 4096, 11008),
          (512, 11008, 4096), (256, 256, 256), (1024, 1024, 1024), (2048, 2048, 2048)]


def matmul_model(m: int, k: int, n: int, seed: int = 0) -> onnx.ModelProto:
    """Y[M, N] = A[M, K] @ B[K, N]; A a float16 graph input, B a float16 initializer."""
    b = np.random.default_rng(seed).standard_normal((k, n)).astype(np.float16)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["A", "B"], ["Y"], name="matmul")], f"gemm_{m}x{k}x{n}",
        [helper.make_tensor_value_info("A", TensorProto.FLOAT16, [m, k])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT16, [m, n])],
        initializer=[numpy_helper.from_array(b, "B")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def _shape(s: str) -> tuple[int, int, int]:
    m, k, n = (int(x) for x in s.lower().split("x"))
    return m, k, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("shapes", nargs="*", type=_shape, default=SHAPES, help="MxKxN (default: the suite)")
    ap.add_argument("--soc", default="Ascend910")
    ap.add_argument("--precision-mode", default="force_fp16", choices=PRECISION_MODES)
    ap.add_argument("--max-macs", type=float, default=0, help="skip shapes with more MACs (0: run all)")
    ap.add_argument("--kb", default=None, help="a knowledge base on top of the shipped one ('none': neither; "
                                               "default: the shipped one, as cann.compile)")
    args = ap.parse_args()

    print(f"soc: {args.soc}  precision_mode: {args.precision_mode}")
    print(f"{'M x K x N':>20} {'launches':>8} {'cycles':>11} {'ideal':>9} {'ideal_pct':>9} {'gemm_pct':>8} "
          f"{'exec/model':>10} {'rel_l2':>9} {'compile_s':>9} {'sim_s':>7}")
    pcts = []
    for m, k, n in args.shapes:
        label = f"{m}x{k}x{n}"
        if args.max_macs and m * k * n > args.max_macs:
            print(f"{label:>20}  skipped: {m * k * n:.3g} MACs > --max-macs")
            continue
        model = matmul_model(m, k, n)
        a = np.random.default_rng(1).standard_normal((m, k)).astype(np.float16)
        t0 = time.perf_counter()
        compiled = cann.compile(model, soc_version=args.soc, precision_mode=args.precision_mode, kb=args.kb)
        t1 = time.perf_counter()
        y = compiled.run({"A": a})["Y"]
        t2 = time.perf_counter()
        ref = a.astype(np.float32) @ numpy_helper.to_array(model.graph.initializer[0]).astype(np.float32)
        err = float(np.linalg.norm(y.astype(np.float32) - ref) / max(np.linalg.norm(ref), 1e-30))
        run = compiled.last_run
        gemm = [x for x in run.kernels if x.model_macs]
        pcts.append(run.ideal_pct)
        print(f"{label:>20} {len(run.kernels):>8} {run.cycles:>11} {run.ideal_cycles:>9} {run.ideal_pct:>9.2f} "
              f"{run.ideal_pct_of(gemm):>8.2f} {run.executed_macs / max(run.model_macs, 1):>10.3f} {err:>9.2e} "
              f"{t1 - t0:>9.1f} {t2 - t1:>7.1f}", flush=True)
    if pcts:
        print(f"ideal_pct median: {statistics.median(pcts):.2f}  worst: {min(pcts):.2f}  shapes: {len(pcts)}")


if __name__ == "__main__":
    main()
