"""ONNX import at the edges of the specification: LayerNormalization's Scale/B broadcast to X, empty
(zero-size) tensors, opsets beyond the installed onnx, outputs without a dtype, graphs without outputs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import cann
from cann.errors import CannError
from cann.testing import run_onnxruntime

CANN_COMPILE = str(Path(sys.executable).parent / "cann-compile")
MODES = ["force_fp16", "must_keep_origin_dtype"]


def _model(nodes, inputs, outputs, inits=None, opset=18):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                          [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
                          [numpy_helper.from_array(np.asarray(a), n) for n, a in (inits or {}).items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _rel(got, want):
    return np.linalg.norm(np.asarray(got, np.float64) - want) / max(np.linalg.norm(want), 1e-30)


# -- LayerNormalization: Scale and B broadcast to X (issue 10.5) --------------------------------
# onnxruntime 1.32 rejects a [1, C, 1, 1] Scale with axis=1; the spec only asks Scale/B to be
# unidirectionally broadcastable to X, so the reference evaluator is the oracle.


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("stats", [False, True])
def test_layer_norm_scale_broadcasts_to_input(mode, stats):
    rng = np.random.default_rng(0)
    inits = {"s": rng.standard_normal((1, 4, 1, 1)).astype(np.float32),
             "b": rng.standard_normal((1, 4, 1, 1)).astype(np.float32)}
    outs = ["y", "mean", "inv"] if stats else ["y"]
    shapes = {"y": [2, 4, 3, 5], "mean": [2, 1, 1, 1], "inv": [2, 1, 1, 1]}
    m = _model([helper.make_node("LayerNormalization", ["x", "s", "b"], outs, axis=1)],
               [("x", T.FLOAT, [2, 4, 3, 5])], [(o, T.FLOAT, shapes[o]) for o in outs], inits, opset=17)
    x = rng.standard_normal((2, 4, 3, 5)).astype(np.float32)
    want = dict(zip(outs, ReferenceEvaluator(m).run(None, {"x": x})))
    got = cann.compile(m, precision_mode=mode).run({"x": x})
    for o in outs:
        assert got[o].shape == want[o].shape
        assert _rel(got[o], want[o]) < (2e-3 if mode == "force_fp16" else 1e-6), o


def test_layer_norm_scale_that_does_not_broadcast_is_one_error():
    m = _model([helper.make_node("LayerNormalization", ["x", "s"], ["y"], name="ln", axis=1)],
               [("x", T.FLOAT, [2, 4, 3])], [("y", T.FLOAT, [2, 4, 3])], {"s": np.ones((1, 5, 1), np.float32)}, opset=17)
    with pytest.raises(CannError) as e:
        cann.compile(m)
    assert e.value.lines() == ["error: ln: invalid model: 'graph.layer_norm' scale does not broadcast to the input shape 2x4x3"]
