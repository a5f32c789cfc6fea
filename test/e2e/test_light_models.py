"""The nine light ONNX models (DESIGN.md weight recipe) compiled and simulated vs onnxruntime.

Every output and the logits (the input of the final Softmax) must agree within the precision
mode's relative L2 tolerance, with the same top-1 class.
"""

import numpy as np
import pytest

import cann
from cann import testing

TOLERANCE = {"force_fp16": 1e-2, "must_keep_origin_dtype": 1e-4}
SLOW = {"vgg19", "inception_v1", "inception_v2", "densenet121", "shufflenet", "resnet50"}


def _params():
    for name in testing.LIGHT_MODELS:
        for pm in TOLERANCE:
            marks = [pytest.mark.slow] if name in SLOW else []
            yield pytest.param(name, pm, marks=marks, id=f"{name}-{pm}")


def rel_l2(y: np.ndarray, r: np.ndarray) -> float:
    return float(np.linalg.norm((y.astype(np.float64) - r).ravel()) / max(np.linalg.norm(r.ravel()), 1e-30))


@pytest.mark.parametrize("name,precision_mode", list(_params()))
def test_light_model_matches_onnxruntime(name, precision_mode):
    model = testing.test_model(name)
    inputs = testing.random_inputs(model)
    ref = testing.run_onnxruntime(model, inputs)
    compiled = cann.compile(model, precision_mode=precision_mode)
    out = compiled.run(inputs)
    assert set(out) == set(ref)
    assert len(ref) >= 2 or name == "densenet121"  # the output and the logits
    for key, r in ref.items():
        y = out[key]
        assert y.shape == r.shape and y.dtype == r.dtype, key
        err = rel_l2(y, r)
        assert err <= TOLERANCE[precision_mode], f"{key}: rel_l2 {err:.3g}"
        flat_y, flat_r = y.reshape(y.shape[0], -1), r.reshape(r.shape[0], -1)
        assert (flat_y.argmax(axis=1) == flat_r.argmax(axis=1)).all(), key
    assert compiled.last_run.cycles > 0 and compiled.last_run.instructions > 0
