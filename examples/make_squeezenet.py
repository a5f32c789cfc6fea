"""Write examples/squeezenet.onnx: the onnx package's light SqueezeNet (SqueezeNet 1.1 layers) with generated weights.

The light model carries the real architecture with constant weights; the weights are replaced by
``cann.testing.generate_weights(model, seed=0)`` (the project's one documented recipe), so the
file is deterministic: running this script again writes the same bytes.

Run by hand:  python examples/make_squeezenet.py
"""

from pathlib import Path

import onnx

from cann.testing import generate_weights, light_model_path

LIMIT = 5 * 1000 * 1000  # bytes; the example must stay small enough to live in git


def main() -> None:
    model = generate_weights(onnx.load(light_model_path("squeezenet")), seed=0)
    onnx.checker.check_model(model)
    data = model.SerializeToString()
    if len(data) > LIMIT:
        raise SystemExit(f"squeezenet.onnx would be {len(data)} bytes (> {LIMIT})")
    out = Path(__file__).resolve().parent / "squeezenet.onnx"
    out.write_bytes(data)
    print(f"wrote {out} ({len(data)} bytes)")


if __name__ == "__main__":
    main()
