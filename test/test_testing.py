"""The test-model recipe: deterministic generated weights, logits exposed, models run in onnxruntime."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from cann.testing import (
    LIGHT_MODELS,
    expose_logits,
    generate_weights,
    light_model_path,
    random_inputs,
    run_onnxruntime,
    softmax_input,
    test_model,
    with_batch,
)


def _inits(m: onnx.ModelProto) -> dict[str, np.ndarray]:
    return {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}


def test_recipe_is_deterministic_and_replaces_constant_of_shape():
    base = onnx.load(light_model_path("inception_v2"))
    a, b, c = generate_weights(base, 0), generate_weights(base, 0), generate_weights(base, 1)
    assert a.SerializeToString() == b.SerializeToString()
    assert a.SerializeToString() != c.SerializeToString()
    assert not any(n.op_type == "ConstantOfShape" for n in a.graph.node)
    w = _inits(a)
    conv_w = w["conv1/7x7_s2_w_0"]
    assert conv_w.shape == (64, 3, 7, 7)
    assert abs(conv_w.std() * math.sqrt(3 * 7 * 7) - 1) < 0.05
    bn = next(n for n in a.graph.node if n.op_type == "BatchNormalization")
    for i in (1, 4):
        assert 0.5 <= w[bn.input[i]].min() and w[bn.input[i]].max() <= 1.5
    assert w[bn.input[2]].min() < 0  # bias: standard normal
    # integer shape tensors are kept
    assert all(v.dtype == np.int64 for k, v in w.items() if k.endswith("__SHAPE"))
    onnx.checker.check_model(a)


def test_densenet_scale_tensors_are_standard_normal():
    m = generate_weights(onnx.load(light_model_path("densenet121")))
    w = _inits(m)
    # Caffe2 scale layer: Unsqueeze + Mul on a 1-D tensor that does not feed BatchNormalization
    unsq = next(n for n in m.graph.node if n.op_type == "Unsqueeze")
    v = w[unsq.input[0]]
    assert v.ndim == 1 and v.min() < 0


def test_expose_logits():
    m = expose_logits(generate_weights(onnx.load(light_model_path("squeezenet"))))
    logits = softmax_input(m)
    assert [o.name for o in m.graph.output] == ["softmaxout_1", logits]
    dims = [d.dim_value for d in m.graph.output[1].type.tensor_type.shape.dim]
    assert dims == [1, 1000, 1, 1]
    dn = expose_logits(onnx.load(light_model_path("densenet121")))  # no final Softmax
    assert len(dn.graph.output) == 1


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n in ("vgg19", "zfnet512", "bvlc_alexnet") else n
             for n in LIGHT_MODELS])
def test_light_model_runs_in_onnxruntime(name):
    m = expose_logits(generate_weights(onnx.load(light_model_path(name))))
    onnx.checker.check_model(m)
    out = run_onnxruntime(m, random_inputs(m))
    for k, v in out.items():
        assert np.isfinite(v).all(), k
        print(f"{name}: {k} {v.shape} max={v.max():.4g} std={v.std():.4g}")


def test_with_batch_runs_a_batch_and_matches_onnxruntime():
    """SqueezeNet at batch 3: onnxruntime gives 3 rows, and the compiled model (its convs spread
    over image groups of cores) matches them, race-free."""
    import cann

    m = with_batch(test_model("squeezenet"), 3)
    x = random_inputs(m)
    ref = run_onnxruntime(m, x)
    assert {k: v.shape[0] for k, v in ref.items()} == {k: 3 for k in ref}
    y = cann.compile(m).run(x)
    for k, r in ref.items():
        assert np.linalg.norm(y[k] - r) / np.linalg.norm(r) <= 1e-2, k
