"""Models exported by PyTorch's ONNX exporter (test/fixtures/torch, made by make_models.py with
PyTorch 2.13, which is not a test dependency): compiled, run on the simulator and compared with
onnxruntime's outputs saved beside them.

Each output must be within the precision mode's relative L2 tolerance of onnxruntime's; a
classifier output (logits) must also agree on the top-1 class of every row.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

import cann

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "torch"
TOLERANCE = {"force_fp16": 1e-2, "must_keep_origin_dtype": 1e-4}
# name -> outputs that are classifier scores (top-1 must agree): the last axis holds the classes.
MODELS = {
    "gpt_block": {"logits"},  # next-token logits [1, 16, 128]: top-1 per position
    "resnext": {"logits"},  # [1, 10]
    "resnext_legacy": {"logits"},  # the same network exported with dynamo=False
    "mobilenet_v2": {"logits"},  # [1, 10]; 224x224 input, depthwise convs on the vector unit
    "fpn": set(),  # dense [1, 8, 64, 64] map
    # BERT-style encoder exported without token_type_ids (zero buffer -> Expand -> GatherElements), by
    # both exporters: hidden states [1, 64, 64] and pooler output [1, 64]
    "bert_encoder": set(),
    "bert_encoder_legacy": set(),
    "swin_block": set(),  # Swin-style (shifted) window attention, exported with dynamo=False: [1, 16, 64]
}


def rel_l2(y: np.ndarray, r: np.ndarray) -> float:
    r = r.astype(np.float64)
    return float(np.linalg.norm((y.astype(np.float64) - r).ravel()) / max(np.linalg.norm(r.ravel()), 1e-30))


def _fixture(name: str):
    path = FIXTURES / f"{name}.onnx"
    graph = onnx.load(path, load_external_data=False).graph
    data = np.load(FIXTURES / f"{name}.npz")
    inputs = {i.name: data[i.name] for i in graph.input}
    ref = {o.name: data[o.name] for o in graph.output}
    return path, inputs, ref


@pytest.mark.parametrize("precision_mode", list(TOLERANCE))
@pytest.mark.parametrize("name", list(MODELS))
def test_exported_model_matches_onnxruntime(name, precision_mode):
    path, inputs, ref = _fixture(name)
    model = cann.compile(str(path), precision_mode=precision_mode)
    out = model.run(inputs)
    assert set(out) == set(ref)
    for key, r in ref.items():
        y = out[key]
        assert y.shape == r.shape and y.dtype == r.dtype, (key, y.shape, y.dtype, r.shape, r.dtype)
        err = rel_l2(y, r)
        assert err <= TOLERANCE[precision_mode], f"{key}: rel_l2 {err:.3g}"
        if key in MODELS[name]:
            top_y = y.reshape(-1, y.shape[-1]).argmax(axis=1)
            top_r = r.reshape(-1, r.shape[-1]).argmax(axis=1)
            assert (top_y == top_r).all(), f"{key}: top-1 differs at rows {np.flatnonzero(top_y != top_r).tolist()}"
    assert model.last_run.cycles > 0 and model.last_run.instructions > 0


def test_fixtures_are_small_and_self_contained():
    for name in MODELS:
        path = FIXTURES / f"{name}.onnx"
        assert path.stat().st_size <= 5 * 1024 * 1024, name
        m = onnx.load(path)
        onnx.checker.check_model(m)
        assert not any(t.data_location == onnx.TensorProto.EXTERNAL for t in m.graph.initializer), name
