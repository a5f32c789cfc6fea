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



def test_conv_kernel_shape_contradicting_the_weight_is_an_invalid_model():
    # the spec's kernel_shape must equal the weight's spatial shape: invalid, not "unsupported"
    m = _model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv", kernel_shape=[5, 5])],
               [("x", T.FLOAT, [1, 3, 8, 8])], [("y", T.FLOAT, [1, 4, 4, 4])], {"w": np.ones((4, 3, 3, 3), np.float32)})
    with pytest.raises(CannError) as e:
        cann.compile(m)
    assert e.value.lines() == ["error: conv: invalid model: Conv attribute kernel_shape=[5, 5] does not match the "
                               "weight shape"]

def test_layer_norm_scale_that_does_not_broadcast_is_one_error():
    m = _model([helper.make_node("LayerNormalization", ["x", "s"], ["y"], name="ln", axis=1)],
               [("x", T.FLOAT, [2, 4, 3])], [("y", T.FLOAT, [2, 4, 3])], {"s": np.ones((1, 5, 1), np.float32)}, opset=17)
    with pytest.raises(CannError) as e:
        cann.compile(m)
    assert e.value.lines() == ["error: ln: invalid model: 'graph.layer_norm' scale does not broadcast to the input shape 2x4x3"]


# -- zero-size tensors flow through (issue 10.6) -------------------------------------------------
# onnxruntime can return a non-empty result for a negative-step Slice whose clamped range is empty
# (docs/reference oracles.md): the reference evaluator and numpy's x[0:5:-1] are the oracles.

_I = lambda n, v: (n, np.array(v, np.int64))  # noqa: E731


def _slice_model(extra_nodes, outputs, shape=(10,)):
    nodes = [helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["e"], name="sl")] + extra_nodes
    return _model(nodes, [("x", T.FLOAT, list(shape))], outputs,
                  dict([_I("st", [0]), _I("en", [5]), _I("ax", [0]), _I("sp", [-1])]))


def _run_both(m, x, mode, tmp_path):
    """(compiled model's outputs, the same after a save / load round trip of the .om)."""
    model = cann.compile(m, precision_mode=mode)
    model.save(tmp_path / "m.om")
    return model.run({"x": x}), cann.load(tmp_path / "m.om").run({"x": x})


@pytest.mark.parametrize("mode", MODES)
def test_empty_slice_is_a_model_output(mode, tmp_path):
    m = _slice_model([helper.make_node("Relu", ["x"], ["r"])], [("e", T.FLOAT, [0]), ("r", T.FLOAT, [10])])
    x = np.arange(10, dtype=np.float32) - 4
    want = dict(zip(["e", "r"], ReferenceEvaluator(m).run(None, {"x": x})))
    assert want["e"].shape == x[0:5:-1].shape == (0,)
    for got in _run_both(m, x, mode, tmp_path):
        assert got["e"].shape == (0,) and got["e"].dtype == np.float32
        np.testing.assert_array_equal(got["r"], want["r"])


@pytest.mark.parametrize("mode", MODES)
def test_empty_slice_feeds_concat(mode, tmp_path):
    m = _slice_model([helper.make_node("Concat", ["e", "x", "e"], ["y"], axis=0)], [("y", T.FLOAT, [10])])
    x = np.random.default_rng(0).standard_normal(10).astype(np.float32)
    for got in _run_both(m, x, mode, tmp_path):
        assert got["y"].shape == (10,)
        np.testing.assert_allclose(got["y"], np.concatenate([x[0:5:-1], x, x[0:5:-1]]), rtol=1e-3 if mode == "force_fp16" else 0)


@pytest.mark.parametrize("mode", MODES)
def test_empty_tensors_through_elementwise_reduce_and_split(mode, tmp_path):
    # an empty 2-D slice: Relu keeps it empty (an output), ReduceSum over the empty axis is 0,
    # and a Split with a zero-size part gives an empty output next to the full one
    nodes = [helper.make_node("Slice", ["x", "st", "en", "ax"], ["e"]), helper.make_node("Relu", ["e"], ["er"]),
             helper.make_node("ReduceSum", ["e", "ax"], ["s"], keepdims=0),
             helper.make_node("Add", ["s", "x1"], ["y"]),
             helper.make_node("Split", ["x", "parts"], ["p0", "p1"], axis=0)]
    m = _model(nodes, [("x", T.FLOAT, [3, 4])],
               [("er", T.FLOAT, [0, 4]), ("y", T.FLOAT, [3, 4]), ("p0", T.FLOAT, [0, 4]), ("p1", T.FLOAT, [3, 4])],
               dict([_I("st", [1]), _I("en", [1]), _I("ax", [0]), _I("parts", [0, 3]),
                     ("x1", np.arange(12, dtype=np.float32).reshape(3, 4))]))
    x = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    want = dict(zip(["er", "y", "p0", "p1"], ReferenceEvaluator(m).run(None, {"x": x})))
    for got in _run_both(m, x, mode, tmp_path):
        for k, w in want.items():
            assert got[k].shape == w.shape and got[k].dtype == w.dtype, k
            np.testing.assert_allclose(got[k], w, rtol=1e-3 if mode == "force_fp16" else 0)


# -- what the checker lets through but onnxruntime refuses (issue 10.11) -------------------------


def _relu(opset=18, out_type=T.FLOAT, outputs=True, extra_opsets=()):
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [helper.make_tensor_value_info("x", T.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", out_type, [2])] if outputs else [])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), *extra_opsets])


_NEWEST = onnx.defs.onnx_opset_version()
_V = onnx.__version__
BAD_MODELS = [
    (_relu(99), "{where}: opset 99 of domain ai.onnx is newer than the newest the installed onnx {v} defines ({n})"),
    (_relu(_NEWEST + 1), "{where}: opset {n1} of domain ai.onnx is newer than the newest the installed onnx {v} defines ({n})"),
    (_relu(extra_opsets=[helper.make_opsetid("ai.onnx.ml", 99)]),
     "{where}: opset 99 of domain ai.onnx.ml is newer than the newest the installed onnx {v} defines ({nml})"),
    (_relu(out_type=T.UNDEFINED), "y: graph output has no element type (elem_type 0, UNDEFINED)"),
    (_relu(outputs=False), "{where}: the graph has no outputs (and no out_nodes name any)"),
]


def _expected(text, where):
    return "error: " + text.format(where=where, v=_V, n=_NEWEST, n1=_NEWEST + 1, nml=onnx.defs.onnx_ml_opset_version())


@pytest.mark.parametrize("m, text", BAD_MODELS, ids=["opset99", "opset_next", "ml_opset99", "elem_type0", "no_outputs"])
def test_declared_model_errors(m, text, tmp_path):
    with pytest.raises(CannError) as e:
        cann.compile(m)
    assert e.value.lines() == [_expected(text, "g")]
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    r = subprocess.run([CANN_COMPILE, str(path), "-o", str(tmp_path / "m.om")], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.splitlines() == [_expected(text, str(path))], r.stderr
    assert not (tmp_path / "m.om").exists()


def test_newest_known_opset_compiles():
    x = np.array([-1.0, 2.0], np.float32)
    np.testing.assert_array_equal(cann.compile(_relu(_NEWEST)).run({"x": x})["y"], [0.0, 2.0])


def test_out_nodes_name_the_outputs_of_a_graph_without_outputs():
    out = cann.compile(_relu(outputs=False), out_nodes=["y"]).run({"x": np.array([-1.0, 2.0], np.float32)})
    np.testing.assert_array_equal(out["y"], [0.0, 2.0])
