"""Large constants in text IR: dense_resource handles + sidecar .npz (docs/ir-text.md)."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from xdsl.dialects.builtin import DenseResourceAttr, ModuleOp

from cann.dialects.graph import ConstantOp, constant_value, make_constant
from cann.dialects.weights import WEIGHTS_ATTR, graph_context, parse_module, print_module
from cann.errors import CannError
from cann.frontend.onnx import import_onnx
from cann.testing import generate_weights, light_model_path


def _constants(m: ModuleOp) -> list[np.ndarray]:
    return [np.asarray(constant_value(op)) for op in m.walk() if isinstance(op, ConstantOp)]


def test_make_constant_and_value_roundtrip():
    for arr in (np.arange(6, dtype=np.float32).reshape(2, 3), np.array([1, -2], np.int64),
                np.ones((2, 2), np.float16), np.array([True, False])):
        op = make_constant(arr, "c")
        v = constant_value(op)
        assert v.dtype == arr.dtype and v.shape == arr.shape
        np.testing.assert_array_equal(v, arr)
        assert op.location.desc.data == "c"


def test_print_parse_roundtrip(tmp_path):
    model = generate_weights(onnx.load(light_model_path("squeezenet")))
    module = import_onnx(model)
    text_path, npz = tmp_path / "m.mlir", tmp_path / "m.weights.npz"
    buf = io.StringIO()
    print_module(module, buf, npz)
    text = buf.getvalue()
    text_path.write_text(text)
    assert f'{WEIGHTS_ATTR} = "m.weights.npz"' in text
    assert "dense_resource<conv1_w_0> : tensor<64x3x3x3xf32>" in text
    assert len(text) < 50_000  # nothing large inline
    assert WEIGHTS_ATTR not in module.attributes  # the input module is untouched
    keys = set(np.load(npz).files)
    assert "conv1_w_0" in keys and "fire2_squeeze1x1_w_0" in keys  # '/' sanitized

    back = parse_module(text, graph_context(), tmp_path)
    back.verify()
    a, b = _constants(module), _constants(back)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)

    # deterministic: same text, same npz bytes
    buf2 = io.StringIO()
    npz2 = tmp_path / "again.npz"
    print_module(module, buf2, npz2)
    assert buf2.getvalue().replace("again.npz", "m.weights.npz") == text
    assert npz2.read_bytes() == npz.read_bytes()

    # parsing twice in one process keeps the keys (xDSL would rename them otherwise)
    again = parse_module(text, graph_context(), tmp_path)
    assert len(_constants(again)) == len(a)

    # the text parses in cann-opt and prints back unchanged (handles kept)
    cann_opt = Path(sys.executable).parent / "cann-opt"
    if cann_opt.exists():
        r = subprocess.run([str(cann_opt), str(text_path)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == text.strip()


def test_unresolved_resource_and_missing_npz(tmp_path):
    text = """builtin.module attributes {graph.weights = "w.npz"} {
  %0 = graph.constant dense_resource<w0> : tensor<4x8xf32>
}"""
    from xdsl.parser import Parser

    raw = Parser(graph_context(), text).parse_module()
    (op,) = [o for o in raw.walk() if isinstance(o, ConstantOp)]
    assert isinstance(op.value, DenseResourceAttr)
    with pytest.raises(CannError, match="unresolved dense_resource"):
        constant_value(op)
    with pytest.raises(CannError) as e:
        parse_module(text, graph_context(), tmp_path)
    # was "cannot read weights file: [Errno 2] No such file or directory: '<the location again>'"
    assert str(e.value) == (f"error: {tmp_path / 'w.npz'}: cannot read the weights file of the text's "
                            "graph.weights attribute: No such file or directory")
    np.savez(tmp_path / "w.npz", w0=np.zeros((4, 9), np.float32))
    with pytest.raises(CannError, match="does not match tensor<4x8xf32>"):
        parse_module(text, graph_context(), tmp_path)
    np.savez(tmp_path / "w.npz", w0=np.ones((4, 8), np.float32))
    m = parse_module(text, graph_context(), tmp_path)
    (op,) = [o for o in m.walk() if isinstance(o, ConstantOp)]
    np.testing.assert_array_equal(constant_value(op), np.ones((4, 8), np.float32))


def test_large_constants_on_a_stream_carry_their_blobs(tmp_path):
    # e.g. `cann-compile --emit graph -o -`, `cann-opt ... > f.mlir`: the IR stays short, the blobs
    # follow it in a dialect_resources section, and the text parses back on its own
    a = np.arange(32, dtype=np.float32)
    m = ModuleOp([make_constant(a, "big:0")])
    out = io.StringIO()
    print_module(m, out)
    text = out.getvalue()
    assert 'graph.constant dense_resource<big_0> : tensor<32xf32> loc("big:0")' in text
    assert "graph.weights" not in text
    assert text.endswith('{-#\n  dialect_resources: {\n    builtin: {\n      big_0: "0x04000000'
                         + a.tobytes().hex() + '"\n    }\n  }\n#-}\n')
    back = parse_module(text, graph_context(), tmp_path)
    (op,) = [o for o in back.walk() if isinstance(o, ConstantOp)]
    np.testing.assert_array_equal(constant_value(op), a)
    assert op.location.desc.data == "big:0"  # the name survives the text
    # a later text naming the same key in a sidecar reads the sidecar, not the earlier blob
    np.savez(tmp_path / "w.npz", big_0=np.ones(32, np.float32))
    other = ('builtin.module attributes {graph.weights = "w.npz"} {\n'
             '  %0 = graph.constant dense_resource<big_0> : tensor<32xf32>\n}\n')
    (op,) = [o for o in parse_module(other, graph_context(), tmp_path).walk() if isinstance(o, ConstantOp)]
    np.testing.assert_array_equal(constant_value(op), np.ones(32, np.float32))
    # a blob of the wrong size is an error naming the key
    with pytest.raises(CannError) as e:
        parse_module(text.replace("0x04000000", "0x0400000000"), graph_context(), tmp_path)
    assert e.value.lines() == ["error: big_0: the dialect_resources blob has 129 bytes; tensor<32xf32> needs 128"]
    small = ModuleOp([make_constant(np.arange(4, dtype=np.float32), "s"), make_constant(np.broadcast_to(np.float32(2), (64,)), "splat")])
    buf = io.StringIO()
    print_module(small, buf)
    assert "dense<[0.000000e+00, 1.000000e+00, 2.000000e+00, 3.000000e+00]>" in buf.getvalue()


@pytest.mark.parametrize("with_sidecar", [True, False])
def test_non_finite_constants_survive_the_text(tmp_path, with_sidecar):
    """xDSL prints -inf/NaN as hex bit patterns (``dense<0xff800000>``) and parses them back as the
    integer 4286578688.0 (the GPT block's causal-mask -inf became +4.3e9 through --emit graph):
    such constants go to blobs, a rank-0 one keeping its rank."""
    values = {"ninf": np.float32(-np.inf), "nan": np.float32(np.nan),
              "mixed": np.array([1.0, np.inf, -2.0], np.float32), "half": np.array([np.inf, 0], np.float16),
              "fine": np.float32(0.5)}
    m = ModuleOp([make_constant(np.asarray(v), k) for k, v in values.items()])
    buf = io.StringIO()
    print_module(m, buf, tmp_path / "w.npz" if with_sidecar else None)
    text = buf.getvalue()
    assert "0xff800000" not in text and "dense_resource<ninf> : tensor<f32>" in text
    assert "dense<5.000000e-01> : tensor<f32>" in text  # finite scalars stay inline
    back = parse_module(text, graph_context(), tmp_path)
    back.verify()
    got = {op.location.desc.data: np.asarray(constant_value(op)) for op in back.walk() if isinstance(op, ConstantOp)}
    for k, v in values.items():
        v = np.asarray(v)
        assert got[k].shape == v.shape and got[k].dtype == v.dtype, k
        np.testing.assert_array_equal(got[k], v)
