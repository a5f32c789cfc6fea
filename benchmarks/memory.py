"""Device memory plan: the GM arena of each model with activation reuse off and on (issue 14 item 6).

    python benchmarks/memory.py [--precision-mode force_fp16] [model ...]

Compiles each model once (-O1) and plans its GM twice (``cann.codegen.gm_plan``): without reuse
(``--gm-reuse off``: every activation and workspace its own bytes) and with it (the default).
Columns, bytes: ``arena off`` / ``on`` (``gm_size``), ``weights``, ``act off`` / ``act on`` (the
arena minus the weights: model inputs, activations, workspaces), ``ratio`` (act on / act off) and
``bound`` (the model inputs plus the most bytes of buffers live at one launch: no plan of these
buffers is smaller; ``over``: act on / bound). Nothing is simulated: the plan does not change the
kernels (test/e2e/test_gm_reuse.py checks that outputs and cycles are bit-identical).

Models: the light zoo models of the test suite (generated weights, cann.testing), the PyTorch
exports under test/fixtures/torch/ and the Keras models under test/fixtures/tf/, by name.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from cann import testing
from cann.codegen.gm_plan import plan_memory
from cann.compiler import lower
from cann.dialects import main_function

ROOT = Path(__file__).resolve().parent.parent
TORCH = ROOT / "test" / "fixtures" / "torch"
TF = ROOT / "test" / "fixtures" / "tf"
DEFAULT = [*testing.LIGHT_MODELS, *sorted(p.stem for p in TORCH.glob("*.onnx")), *sorted(p.stem for p in TF.glob("*.pb"))]


def _model(name: str):
    """(model, lower() options) of a light model or a fixture, by name."""
    if (TORCH / f"{name}.onnx").is_file():
        return str(TORCH / f"{name}.onnx"), {}
    if (TF / f"{name}.pb").is_file():
        import numpy as np

        data = np.load(TF / f"{name}.npz")
        return str(TF / f"{name}.pb"), {"input_shape": {"input": data["input"].shape}}
    return testing.test_model(name), {}


def measure(name: str, precision_mode: str) -> dict:
    """The plan of ``name`` without and with reuse (bytes), and the lower bound."""
    model, options = _model(name)
    main = main_function(lower(model, precision_mode=precision_mode, **options), name)
    off, on = plan_memory(main, reuse=False), plan_memory(main, reuse=True)
    weights = len(on.weights)
    inputs = on.weights_offset
    return {"arena_off": off.size, "arena_on": on.size, "weights": weights, "act_off": off.size - weights,
            "act_on": on.size - weights, "bound": inputs + on.live_peak, "buffers": len(on.buffers)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", default=DEFAULT)
    ap.add_argument("--precision-mode", default="force_fp16")
    args = ap.parse_args()
    print(f"{'model':<22} {'buffers':>7} {'arena off':>11} {'arena on':>11} {'weights':>11} {'act off':>11} "
          f"{'act on':>10} {'ratio':>6} {'bound':>10} {'over':>5} {'s':>5}")
    for name in args.models:
        t = time.perf_counter()
        m = measure(name, args.precision_mode)
        print(f"{name:<22} {m['buffers']:>7} {m['arena_off']:>11,} {m['arena_on']:>11,} {m['weights']:>11,} "
              f"{m['act_off']:>11,} {m['act_on']:>10,} {m['act_on'] / m['act_off']:>6.3f} {m['bound']:>10,} "
              f"{m['act_on'] / m['bound']:>5.2f} {time.perf_counter() - t:>5.1f}", flush=True)


if __name__ == "__main__":
    main()
