"""Issue 17 item 4: --keep_dtype and --precision_mode allow_mix_precision.

The light models as onnx ships them (constant 0.02 weights, no generated ones) run on the inputs the
onnx backend test generates for them (``arange(n) / n``): their activations grow layer after layer,
and six of the nine overflow float16 under force_fp16 (densenet121, inception_v2 and shufflenet stay
finite; measured on the simulator). Kept in float32 where they leave float16's range, their logits
(the input of the final Softmax) are finite and within rel L2 1e-2 of onnxruntime.
"""

import subprocess
import sys
import re
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import cann
from cann import testing
from cann.calibration import calibrate_keep_dtype
from cann.errors import CannError

OVERFLOWING = ["squeezenet", "bvlc_alexnet", "zfnet512", "inception_v1", "resnet50", "vgg19"]
SLOW = {"zfnet512", "inception_v1", "resnet50", "vgg19"}


def shipped(name: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray], str]:
    """The shipped light model with its logits exposed, the onnx backend test's inputs, the logits' name."""
    model = testing.expose_logits(onnx.load(testing.light_model_path(name)))
    feeds = {}
    inits = {i.name for i in model.graph.initializer}
    for x in model.graph.input:
        if x.name not in inits:
            shape = tuple(d.dim_value or 1 for d in x.type.tensor_type.shape.dim)
            n = int(np.prod(shape))
            feeds[x.name] = (np.arange(n).reshape(shape) / n).astype(np.float32)
    return model, feeds, testing.softmax_input(model)


def rel_l2(y, r) -> float:
    """In float64: the squares of vgg19's logits (3.7e31) overflow float32."""
    y, r = y.astype(np.float64).ravel(), r.astype(np.float64).ravel()
    return float(np.linalg.norm(y - r) / max(np.linalg.norm(r), 1e-30))


def check_logits(compiled, model, feeds, logits):
    ref = testing.run_onnxruntime(model, feeds)[logits]
    with warnings.catch_warnings():
        warnings.simplefilter("error", cann.FloatOverflowWarning)  # must not: no overflow left
        y = compiled.run(feeds)[logits]
    assert np.isfinite(y).all()
    assert np.abs(ref).max() > 65504  # float16 cannot hold these logits
    assert rel_l2(y, ref) <= 1e-2


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW else []) for n in OVERFLOWING])
def test_allow_mix_precision_keeps_overflowing_layers(name):
    model, feeds, logits = shipped(name)
    compiled = cann.compile(model, precision_mode="allow_mix_precision")
    assert compiled.precision_mode == "allow_mix_precision"
    kept, total = compiled.kept_fp32
    assert 0 < kept < total  # the first layers stay float16
    check_logits(compiled, model, feeds, logits)


def test_force_fp16_overflows_where_mixed_precision_does_not():
    model, feeds, logits = shipped("squeezenet")
    with pytest.warns(cann.FloatOverflowWarning, match="allow_mix_precision"):
        y = cann.compile(model, precision_mode="force_fp16").run(feeds)[logits]
    assert not np.isfinite(y).all()


def test_calibrated_keep_dtype_file(tmp_path):
    model, feeds, logits = shipped("squeezenet")
    path = tmp_path / "keep.txt"
    names = calibrate_keep_dtype(model, feeds, out=path)
    assert path.read_text().splitlines() == names
    # the fire modules grow past 65504 / 16 from fire6 on; the first layers are not listed
    assert "n0" not in names and names[-1] == "n65"
    compiled = cann.compile(model, precision_mode="force_fp16", keep_dtype=str(path))
    assert compiled.kept_fp32[0] >= len(names) - 1 and compiled.kept_fp32[1] == 65
    check_logits(compiled, model, feeds, logits)


def _tiny() -> onnx.ModelProto:
    """x -> Mul(1000) 'scale' -> Relu 'act' -> Softmax 'soft' (x of 100: 1e5 overflows float16)."""
    k = helper.make_tensor("k", TensorProto.FLOAT, [1], [1000.0])
    nodes = [helper.make_node("Mul", ["x", "k"], ["m"], name="scale"),
             helper.make_node("Relu", ["m"], ["r"], name="act"),
             helper.make_node("Softmax", ["r"], ["y"], name="soft", axis=1)]
    g = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16])], [k])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_keep_dtype_list_runs_listed_nodes_in_fp32():
    x = np.linspace(0, 0.1, 32, dtype=np.float32).reshape(2, 16)
    ref = testing.run_onnxruntime(_tiny(), {"x": x})["y"]
    compiled = cann.compile(_tiny(), keep_dtype=["scale", "act", "soft"])
    assert compiled.kept_fp32 == (3, 3)
    y = compiled.run({"x": x})["y"]
    assert rel_l2(y, ref) <= 1e-5  # float32 throughout (float16 alone is ~1e-3 off)
    assert rel_l2(cann.compile(_tiny()).run({"x": x})["y"], ref) > 1e-4


def test_keep_dtype_errors(tmp_path):
    bad = tmp_path / "keep.txt"
    bad.write_text("scale\n# a comment\n\nnot_a_node\n")
    with pytest.raises(CannError, match=rf"^error: {bad}:4: node 'not_a_node' is not a node of the model that computes at run time$"):
        cann.compile(_tiny(), keep_dtype=str(bad))
    bad.write_text("scale\nact\nscale\n")
    with pytest.raises(CannError, match=rf"^error: {bad}:3: node 'scale' is listed twice \(first on line 1\)$"):
        cann.compile(_tiny(), keep_dtype=str(bad))
    with pytest.raises(CannError, match=r"^error: --keep_dtype: .*missing.txt: cannot read: No such file or directory$"):
        cann.compile(_tiny(), keep_dtype=str(tmp_path / "missing.txt"))
    with pytest.raises(CannError, match=r"^error: --keep_dtype: applies to the float16 precision modes .*under must_keep_origin_dtype"):
        cann.compile(_tiny(), keep_dtype=["scale"], precision_mode="must_keep_origin_dtype")
    with pytest.raises(CannError, match=r"^error: keep_dtype\[1\]: node 'nope' is not a node"):
        cann.compile(_tiny(), keep_dtype=["scale", "nope"])


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "cann.tools.cann_compile", *map(str, args)], capture_output=True, text=True)


def _summary(stdout: str, mode: str, level: int, kept: str):
    """cann-compile's summary line ends with the mode, level, the shipped knowledge base's digest and ``kept``."""
    return re.search(rf"\(Ascend910, {mode}, -O{level}, shipped knowledge base sha256 [0-9a-f]{{16}}, "
                     rf"{re.escape(kept)}\)$", stdout.strip(), re.M)


def test_cli_calibrate_keep_dtype_and_summary(tmp_path):
    onnx.save(_tiny(), tmp_path / "tiny.onnx")
    x = np.full((2, 16), 100.0, np.float32)  # 1e5 after 'scale': beyond float16
    np.savez(tmp_path / "cal.npz", x=x)
    keep = tmp_path / "keep.txt"
    r = _cli(tmp_path / "tiny.onnx", "--calibrate-keep-dtype", keep, "--calibration-inputs", tmp_path / "cal.npz")
    assert r.returncode == 0, r.stderr
    assert keep.read_text() == "scale\nact\nsoft\n"
    r = _cli(tmp_path / "tiny.onnx", "--keep_dtype", keep, "-o", tmp_path / "t.om")
    assert r.returncode == 0, r.stderr
    assert _summary(r.stdout, "force_fp16", 1, "3 of 3 nodes kept in fp32 (100.0%)"), r.stdout
    # random calibration inputs stay small: only the rule (Softmax) keeps fp32; at -O1 the three
    # nodes are one fused kernel (Mul, Relu into the Softmax), kept whole
    r = _cli(tmp_path / "tiny.onnx", "--precision_mode", "allow_mix_precision", "-O0", "-o", tmp_path / "m.om")
    assert r.returncode == 0, r.stderr
    assert _summary(r.stdout, "allow_mix_precision", 0, "1 of 3 nodes kept in fp32 (33.3%)"), r.stdout
    r = _cli(tmp_path / "tiny.onnx", "--precision_mode", "allow_mix_precision", "-o", tmp_path / "m.om")
    assert _summary(r.stdout, "allow_mix_precision", 1, "3 of 3 nodes kept in fp32 (100.0%)"), r.stdout
    keep.write_text("scale\nbogus\n")
    r = _cli(tmp_path / "tiny.onnx", "--keep_dtype", keep, "-o", tmp_path / "t.om")
    assert r.returncode == 2
    assert r.stderr == f"error: {keep}:2: node 'bogus' is not a node of the model that computes at run time\n"
