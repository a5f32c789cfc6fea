"""One line per real problem (issue 10.20): nodes downstream of a failed node add no cascading
diagnostics (also through graph.fused groups, which read their inputs inside their region), and an
unsupported custom-domain operator names its own domain's opset. Checked through cann.compile
(CannError lines) and through cann-compile (stderr, exit status 2, no output file)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

import cann
from cann.errors import CannError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from conftest import fire_net  # noqa: E402

CANN_COMPILE = str(Path(sys.executable).parent / "cann-compile")
n = helper.make_node


def _model(nodes, inputs, outputs, opsets=(("", 17),)):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(a, t, s) for a, t, s in inputs],
                          [helper.make_tensor_value_info(a, t, s) for a, t, s in outputs])
    return helper.make_model(g, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])


def _huge_fire_net():
    # a 100000 x 100000 image is larger than the device memory; every kernel after it is its consequence
    m = fire_net()
    for d in (2, 3):
        m.graph.input[0].type.tensor_type.shape.dim[d].dim_value = 100000
    return m


def _int64_mod_chain():
    # Mod of int64 is refused; the Cast / Relu / Mul after it are correct and must stay silent
    return _model([n("Mod", ["x", "y"], ["a"], name="mod"), n("Cast", ["a"], ["b"], name="cast", to=T.FLOAT),
                   n("Relu", ["b"], ["c"], name="relu"), n("Mul", ["c", "f"], ["d"], name="mul")],
                  [("x", T.INT64, [4, 8]), ("y", T.INT64, [4, 8]), ("f", T.FLOAT, [4, 8])], [("d", T.FLOAT, [4, 8])])


def _custom_ops():
    # a custom-domain op (unsupported), a supported op after it, and another custom op after that:
    # both custom ops are problems of their own; each names com.example's opset, not the default one
    return _model([n("Frobnicate", ["x"], ["a"], name="frob", domain="com.example"),
                   n("Relu", ["a"], ["b"], name="relu"),
                   n("Twiddle", ["b"], ["y"], name="twid", domain="com.example")],
                  [("x", T.FLOAT, [1, 4])], [("y", T.FLOAT, [1, 4])], opsets=(("", 13), ("com.example", 3)))


CASES = {
    "huge_input": (_huge_fire_net, ["error: data: the model input 1x3x100000x100000 needs 60000000000 bytes, more "
                                    "than the Ascend910 device memory (34359738368 bytes)"]),
    "int64_mod": (_int64_mod_chain, ["error: mod: Mod of int64 tensors: the vector unit divides in floating point, "
                                     "exact only for 8- and 16-bit integers"]),
    "custom_domain": (_custom_ops, ["error: frob: unsupported operator com.example.Frobnicate (com.example opset 3)",
                                    "error: twid: unsupported operator com.example.Twiddle (com.example opset 3)"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_compile_reports_the_real_cause_only(case):
    make, lines = CASES[case]
    with pytest.raises(CannError) as e:
        cann.compile(make())
    assert e.value.lines() == lines


@pytest.mark.parametrize("case", sorted(CASES))
def test_cann_compile_prints_the_real_cause_only(case, tmp_path):
    make, lines = CASES[case]
    path = tmp_path / "m.onnx"
    onnx.save(make(), path)
    r = subprocess.run([CANN_COMPILE, str(path), "-o", str(tmp_path / "m.om")], capture_output=True, text=True)
    assert r.returncode == 2, r.stderr
    assert r.stderr.splitlines() == lines
    assert not (tmp_path / "m.om").exists()


def test_custom_op_on_constants_is_unsupported_naming_its_domain():
    # all inputs constant, but ONNX defines no such operator: nothing can evaluate it
    m = _model([n("Constant", [], ["c"], value=helper.make_tensor("c", T.FLOAT, [4], [1, 2, 3, 4])),
                n("Frobnicate", ["c"], ["a"], name="frob", domain="com.example"), n("Add", ["x", "a"], ["y"])],
               [("x", T.FLOAT, [4])], [("y", T.FLOAT, [4])], opsets=(("", 17), ("com.example", 2)))
    with pytest.raises(CannError) as e:
        cann.compile(m)
    assert e.value.lines() == ["error: frob: unsupported operator com.example.Frobnicate (com.example opset 2)"]
