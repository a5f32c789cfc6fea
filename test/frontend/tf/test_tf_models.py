"""The TensorFlow fixture models (test/fixtures/tf, made by make_models.py with TensorFlow): compiled
and run on the simulator, compared with TensorFlow's saved outputs (TensorFlow is not a test
dependency); the imported graph alone, evaluated with numpy, is compared too."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from tf_graphdefs import FIXTURES, evaluate, rel_l2

import cann
from cann.compiler import make_context
from cann.frontend.tf import import_tf, load_graph_def
from cann.passes.graph_fold_transposes import GraphFoldTransposesPass

MODELS = ["resnet_style", "efficientnet_style", "transformer_encoder", "grouped_conv", "nested_calls"]
TOL = {"force_fp16": 1e-2, "must_keep_origin_dtype": 1e-4}


def _fixture(name):
    d = np.load(FIXTURES / f"{name}.npz")
    return FIXTURES / f"{name}.pb", {"input": d["input"]}, {k: d[k] for k in d.files if k != "input"}


@pytest.mark.parametrize("name", MODELS)
def test_imported_graph_matches_tensorflow(name):
    """The importer alone (numpy evaluation of the graph dialect), before and after graph-fold-transposes."""
    pb, x, ref = _fixture(name)
    m = import_tf(pb, input_shape={"input": x["input"].shape})
    before = evaluate(m, x)
    GraphFoldTransposesPass().apply(make_context(), m)
    after = evaluate(m, x)
    assert set(before) == set(ref)
    for k in ref:
        assert rel_l2(before[k], ref[k]) <= 1e-5, k
        assert rel_l2(after[k], ref[k]) <= 1e-5, k


@pytest.mark.parametrize("name", ["resnet_style", "efficientnet_style"])
def test_nhwc_layout_transposes_fold(name):
    """Only the model input's NHWC -> NCHW transpose is left once the pass ran."""
    pb, x, _ = _fixture(name)
    m = import_tf(pb, input_shape={"input": x["input"].shape})
    assert sum(op.name == "graph.transpose" for op in m.walk()) > 10
    GraphFoldTransposesPass().apply(make_context(), m)
    assert sum(op.name == "graph.transpose" for op in m.walk()) == 1


def test_grouped_conv_layers_are_inlined_function_calls():
    """Keras 3 freezes grouped / depthwise Conv2D layers as StatefulPartitionedCall nodes of library
    functions whose bodies name outputs ``node:out_arg:index``; inlined, they are grouped convolutions."""
    pb, x, _ = _fixture("grouped_conv")
    gd, _ = load_graph_def(pb)
    calls = [n for n in gd.node if n.op == "StatefulPartitionedCall"]
    assert len(calls) == 2 and len(gd.library.function) == 2
    assert any(i.count(":") == 2 for f in gd.library.function for n in f.node_def for i in n.input)
    m = import_tf(pb, input_shape={"input": x["input"].shape})
    convs = [op for op in m.walk() if op.name == "graph.conv2d"]
    assert sorted(op.group.value.data for op in convs) == [16, 32]
    assert {op.location.desc.data for op in convs} == {c.name + "/convolution" for c in calls}


def test_nested_calls_fixture_refers_to_second_outputs():
    """nested_calls: a library function calling another twice, the second call fed the first's
    second output (``StatefulPartitionedCall:output:1``); both graph outputs come from the calls."""
    pb, x, _ = _fixture("nested_calls")
    gd, _ = load_graph_def(pb)
    bodies = {f.signature.name: f for f in gd.library.function}
    outer = next(f for f in bodies.values() if any(n.op == "StatefulPartitionedCall" for n in f.node_def))
    assert sum(n.op == "StatefulPartitionedCall" for n in outer.node_def) == 2
    assert any(i.endswith(":output:1") for n in outer.node_def for i in n.input)
    m = import_tf(pb, input_shape={"input": x["input"].shape})
    assert sum(op.name == "graph.matmul" for op in m.walk()) == 2


@pytest.mark.parametrize("precision_mode", list(TOL))
@pytest.mark.parametrize("name", MODELS)
def test_model_matches_tensorflow(name, precision_mode):
    pb, x, ref = _fixture(name)
    model = cann.compile(pb, input_shape={"input": x["input"].shape}, precision_mode=precision_mode)
    out = model.run(x)
    assert set(out) == set(ref)
    for k in ref:
        assert out[k].shape == ref[k].shape
        err = rel_l2(out[k], ref[k])
        assert err <= TOL[precision_mode], f"{k}: rel_l2 {err}"


def test_compiling_a_pb_does_not_import_tensorflow(tmp_path):
    code = (
        "import sys, numpy as np, cann\n"
        f"m = cann.compile({str(FIXTURES / 'resnet_style.pb')!r}, input_shape={{'input:0': (1, 32, 32, 3)}})\n"
        "m.run({'input': np.zeros((1, 32, 32, 3), np.float32)})\n"
        "assert 'tensorflow' not in sys.modules, [k for k in sys.modules if 'tensorflow' in k]\n"
        "print('ok')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_cann_compile_framework_3(tmp_path):
    out = tmp_path / "m.om"
    r = subprocess.run([sys.executable, "-m", "cann.tools.cann_compile", "--model", str(FIXTURES / "resnet_style.pb"),
                        "--framework=3", "--input_shape", "input:0:1,32,32,3", "--out_nodes", "Identity_1:0;Identity",
                        "--output", str(tmp_path / "m")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    m = cann.load(out)
    pb, x, ref = _fixture("resnet_style")
    res = m.run(x)
    assert list(res) == ["Identity_1", "Identity"]  # ":0" is the default output index
    assert rel_l2(res["Identity"], ref["Identity"]) <= 1e-2
    assert rel_l2(res["Identity_1"], ref["Identity_1"]) <= 1e-2


def test_cann_compile_missing_input_shape_names_input_and_dimension(tmp_path):
    r = subprocess.run([sys.executable, "-m", "cann.tools.cann_compile", str(FIXTURES / "resnet_style.pb"),
                        "-o", str(tmp_path / "m.om")], capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "error: input: dimension 0 of input 'input' is unknown (shape ['?', 32, 32, 3]); fix it with input_shape, "
        'e.g. --input_shape "input:1,32,32,3"']
    assert not (tmp_path / "m.om").exists()


def test_cann_compile_not_a_graphdef(tmp_path):
    bad = tmp_path / "bad.pb"
    bad.write_bytes(b"this is not a protobuf \xff\xfe\x00")
    r = subprocess.run([sys.executable, "-m", "cann.tools.cann_compile", str(bad), "-o", str(tmp_path / "m.om")],
                       capture_output=True, text=True)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {bad}: not a TensorFlow GraphDef"), r.stderr
    assert not (tmp_path / "m.om").exists()
