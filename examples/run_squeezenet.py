"""Compile examples/squeezenet.onnx, run it on the simulated AI Core and check it against onnxruntime.

    python examples/run_squeezenet.py [--precision-mode force_fp16|must_keep_origin_dtype] [--seed 0]

The input is seeded standard-normal data. The final Softmax's input (the logits) is exposed as an
extra output so that both the probabilities and the logits are compared (softmax outputs can
saturate or flatten and hide errors). Exits 1 if any output's rel_l2_err exceeds 1e-2.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import onnx

import cann
from cann.testing import expose_logits, random_inputs, run_onnxruntime

HERE = Path(__file__).resolve().parent
TOLERANCE = 1e-2


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(HERE / "squeezenet.onnx"))
    ap.add_argument("--precision-mode", default="force_fp16", choices=["force_fp16", "must_keep_origin_dtype"])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    model = expose_logits(onnx.load(args.model))
    inputs = random_inputs(model, seed=args.seed)

    t0 = time.perf_counter()
    compiled = cann.compile(model, precision_mode=args.precision_mode)
    t1 = time.perf_counter()
    outputs = compiled.run(inputs)
    t2 = time.perf_counter()
    reference = run_onnxruntime(model, inputs)

    name = model.graph.output[0].name
    probs = outputs[name].astype(np.float32)
    print(f"model: {Path(args.model).name} (precision_mode={args.precision_mode})")
    for k, v in inputs.items():
        print(f"input {k}: shape={tuple(v.shape)} dtype={v.dtype} (standard normal, seed={args.seed})")
    print(f"output {name}: shape={tuple(probs.shape)} dtype={outputs[name].dtype}")

    flat, ref_flat = probs.reshape(-1), reference[name].astype(np.float32).reshape(-1)
    top5 = np.argsort(-flat, kind="stable")[:5]
    print("top-5 (simulator): " + ", ".join(f"{int(c)}:{flat[c]:.4f}" for c in top5))
    ref_top5 = np.argsort(-ref_flat, kind="stable")[:5]
    print("top-5 (onnxruntime): " + ", ".join(f"{int(c)}:{ref_flat[c]:.4f}" for c in ref_top5))
    print(f"top-1 agreement: {'yes' if top5[0] == ref_top5[0] else 'NO'}")

    ok = True
    for out in model.graph.output:
        y = outputs[out.name].astype(np.float64).reshape(-1)
        r = reference[out.name].astype(np.float64).reshape(-1)
        max_abs = float(np.max(np.abs(y - r))) if y.size else 0.0
        rel_l2 = float(np.linalg.norm(y - r) / max(np.linalg.norm(r), 1e-30))
        label = "logits " if out.name != name else ""
        print(f"{label}{out.name}: max_abs_err={max_abs:.3e} rel_l2_err={rel_l2:.3e}")
        ok &= rel_l2 <= TOLERANCE

    stats = compiled.last_run
    print(f"simulated cycles: {stats.cycles}")
    print(f"instructions: {stats.instructions}")
    print(f"compile seconds: {t1 - t0:.2f}")
    print(f"simulate seconds: {t2 - t1:.2f}")
    print("PASS" if ok else f"FAIL: rel_l2_err > {TOLERANCE}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
