"""Deep fusion: kernel launches, GM traffic, simulated cycles and ``ideal_pct`` (Σ ideal ÷ Σ
cycles, docs/core-model.md) with all fusion switched off (an ATC fusion switch file with
GraphFusion and UBFusion ALL off) vs on (the -O1 default), and that the fused model still matches
onnxruntime. The ideal bound counts each launch's inputs and outputs as compulsory GM traffic, so
fusion lowers the ideal cycles too.

    python benchmarks/fusion.py [--precision-mode force_fp16] [model ...]

Models: light CNNs with generated weights (cann.testing), PyTorch exports under test/fixtures/torch/
(reference: onnxruntime's saved outputs) and Keras models under test/fixtures/tf/ (reference:
TensorFlow's saved outputs), by name. Prints one row per model.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
import onnx

import cann
from cann import testing

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ["resnet50", "inception_v2", "shufflenet", "densenet121", "transformer_encoder", "gpt_block"]


def _load(name: str):
    """(model, compile options, inputs, reference outputs) of a light model or a fixture."""
    torch_fixture = ROOT / "test" / "fixtures" / "torch" / f"{name}.onnx"
    tf_fixture = ROOT / "test" / "fixtures" / "tf" / f"{name}.pb"
    if torch_fixture.is_file():
        model = onnx.load(torch_fixture)
        data = np.load(torch_fixture.with_suffix(".npz"))
        inputs = {i.name: data[i.name] for i in model.graph.input}
        return model, {}, inputs, {o.name: data[o.name] for o in model.graph.output}
    if tf_fixture.is_file():  # a Keras model frozen to a GraphDef: TensorFlow's saved outputs
        data = np.load(tf_fixture.with_suffix(".npz"))
        inputs = {"input": data["input"]}
        refs = {k: data[k] for k in data.files if k != "input"}
        return str(tf_fixture), {"input_shape": {"input": data["input"].shape}}, inputs, refs
    model = testing.test_model(name)
    inputs = testing.random_inputs(model)
    return model, {}, inputs, testing.run_onnxruntime(model, inputs)


def measure(model, options, inputs, precision_mode: str, switch: str | None) -> dict:
    compiled = cann.compile(model, precision_mode=precision_mode, fusion_switch_file=switch, **options)
    out = compiled.run(inputs)
    st = compiled.last_run
    return {"kernels": len(compiled.om.launches),
            "gm_bytes": sum(k.gm_read_bytes + k.gm_write_bytes for k in st.kernels),
            "cycles": st.cycles, "ideal_pct": st.ideal_pct, "outputs": out}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", default=DEFAULT)
    ap.add_argument("--precision-mode", default="force_fp16")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        off = Path(tmp) / "all_off.json"
        off.write_text(json.dumps({"Switch": {"GraphFusion": {"ALL": "off"}, "UBFusion": {"ALL": "off"}}}))
        print(f"{'model':<20} {'kernels off':>11} {'on':>6} {'ratio':>6} {'GM MB off':>10} {'on':>8} {'ratio':>6} "
              f"{'cycles off':>11} {'on':>10} {'ratio':>6} {'ideal% off':>10} {'on':>6}  max rel_l2 vs reference (on)")
        for name in args.models:
            model, options, inputs, ref = _load(name)
            a = measure(model, options, inputs, args.precision_mode, str(off))
            b = measure(model, options, inputs, args.precision_mode, None)
            err = max(float(np.linalg.norm((b["outputs"][k] - r).ravel()) / max(np.linalg.norm(r.ravel()), 1e-30))
                      for k, r in ref.items())
            print(f"{name:<20} {a['kernels']:>11} {b['kernels']:>6} {b['kernels'] / a['kernels']:>6.2f} "
                  f"{a['gm_bytes'] / 1e6:>10.1f} {b['gm_bytes'] / 1e6:>8.1f} {b['gm_bytes'] / a['gm_bytes']:>6.2f} "
                  f"{a['cycles']:>11} {b['cycles']:>10} {b['cycles'] / a['cycles']:>6.2f} "
                  f"{a['ideal_pct']:>10.2f} {b['ideal_pct']:>6.2f}  {err:.2e}")


if __name__ == "__main__":
    main()
