"""The nine light ONNX models (generated weights): accuracy against onnxruntime, compile and
simulation seconds, simulated cycles and instructions, per precision mode.

    python benchmarks/light_models.py [--precision-mode force_fp16 must_keep_origin_dtype] [model ...]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import cann
from cann import testing


def rel_l2(y: np.ndarray, r: np.ndarray) -> float:
    return float(np.linalg.norm((y.astype(np.float64) - r).ravel()) / max(np.linalg.norm(r.ravel()), 1e-30))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", default=testing.LIGHT_MODELS)
    ap.add_argument("--precision-mode", nargs="+", default=["force_fp16", "must_keep_origin_dtype"])
    args = ap.parse_args()
    print(f"{'model':<14} {'precision_mode':<23} {'output rel_l2':>13} {'logits rel_l2':>13} {'top1':>5} "
          f"{'compile s':>9} {'sim s':>6} {'cycles':>10} {'instructions':>12} {'kernels':>7}")
    for name in args.models:
        model = testing.test_model(name)
        x = testing.random_inputs(model)
        ref = testing.run_onnxruntime(model, x)
        logits = testing.softmax_input(model)
        for pm in args.precision_mode:
            t0 = time.perf_counter()
            compiled = cann.compile(model, precision_mode=pm)
            t1 = time.perf_counter()
            out = compiled.run(x)
            t2 = time.perf_counter()
            outs = [k for k in ref if k != logits]
            err_out = max(rel_l2(out[k], ref[k]) for k in outs)
            err_log = rel_l2(out[logits], ref[logits]) if logits in ref else float("nan")
            top1 = all((out[k].reshape(out[k].shape[0], -1).argmax(1) == ref[k].reshape(ref[k].shape[0], -1).argmax(1)).all()
                       for k in ref)
            st = compiled.last_run
            print(f"{name:<14} {pm:<23} {err_out:>13.2e} {err_log:>13.2e} {'yes' if top1 else 'NO':>5} "
                  f"{t1 - t0:>9.1f} {t2 - t1:>6.1f} {st.cycles:>10} {st.instructions:>12} {len(compiled.om.kernels):>7}")


if __name__ == "__main__":
    main()
