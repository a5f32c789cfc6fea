"""Per-layer accuracy comparison (cann.accuracy, ``cann-run --compare M.onnx --all-layers``): the first
diverging node of a planted fp16 overflow and of a planted wrong weight, the CSV's columns and values
against independent computations, the statuses of fused and folded tensors, one-line errors."""

import csv
import math

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import cann
from cann import accuracy, tensor_trace
from cann.tools import cann_run

X = np.random.default_rng(1).standard_normal((1, 8, 8, 8), dtype=np.float32)


def chain(scale: float = 1.0, w2_delta: float = 0.0) -> onnx.ModelProto:
    """conv1 -> relu1 -> pool1 -> scale (Mul by a constant) -> conv2 -> pool2: each node but conv1
    (fused with relu1) writes its own tensor to GM."""
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((16, 8, 3, 3)).astype(np.float32) * 0.2
    w2 = rng.standard_normal((16, 16, 1, 1)).astype(np.float32) * 0.3
    w2[3, 5, 0, 0] += w2_delta
    nodes = [h.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             h.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             h.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             h.make_node("Mul", ["p1", "s"], ["m"], name="scale"),
             h.make_node("Conv", ["m", "w2"], ["c2"], name="conv2"),
             h.make_node("MaxPool", ["c2"], ["y"], name="pool2", kernel_shape=[2, 2], strides=[2, 2])]
    inits = [nh.from_array(w1, "w1"), nh.from_array(w2, "w2"), nh.from_array(np.array(scale, np.float32), "s")]
    g = h.make_graph(nodes, "chain", [h.make_tensor_value_info("x", T.FLOAT, [1, 8, 8, 8])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 16, 4, 4])], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def grouped(w2_delta: float = 0.0) -> onnx.ModelProto:
    """conv1 -> bn -> relu (BatchNormalization folded into conv1, relu fused: one kernel) and
    conv2 -> sig -> add(sig, conv2) (one fused kernel)."""
    rng = np.random.default_rng(2)
    w1 = rng.standard_normal((8, 8, 3, 3)).astype(np.float32) * 0.2
    w2 = rng.standard_normal((16, 8, 1, 1)).astype(np.float32) * 0.3
    w2[0, 0, 0, 0] += w2_delta
    bn = [nh.from_array(a.astype(np.float32), n) for a, n in
          ((rng.uniform(0.5, 1.5, 8), "g"), (rng.standard_normal(8), "b"), (rng.standard_normal(8) * 0.1, "mu"),
           (rng.uniform(0.5, 1.5, 8), "var"))]
    nodes = [h.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             h.make_node("BatchNormalization", ["c1", "g", "b", "mu", "var"], ["n1"], name="bn"),
             h.make_node("Relu", ["n1"], ["r1"], name="relu"),
             h.make_node("Conv", ["r1", "w2"], ["c2"], name="conv2"),
             h.make_node("Sigmoid", ["c2"], ["s2"], name="sig"),
             h.make_node("Add", ["s2", "c2"], ["y"], name="add")]
    g = h.make_graph(nodes, "grouped", [h.make_tensor_value_info("x", T.FLOAT, [1, 8, 8, 8])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 16, 8, 8])],
                     [nh.from_array(w1, "w1"), nh.from_array(w2, "w2"), *bn])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("accuracy")
    models = {"chain": chain(), "over": chain(scale=30000.0), "wrong": chain(w2_delta=1.0), "grouped": grouped(),
              "grouped_wrong": grouped(w2_delta=2.0)}
    for name, m in models.items():
        onnx.save(m, d / f"{name}.onnx")
    for name in ("chain", "over", "grouped"):
        cann.compile(str(d / f"{name}.onnx")).save(d / f"{name}.om")
    np.save(d / "x.npy", X)
    return d


def run(*args) -> int:
    with pytest.raises(SystemExit) as e:
        cann_run.main([str(a) for a in args])
    return e.value.code


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def reference(model_path, names):
    m = onnx.load(model_path)
    m.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names if n not in {o.name for o in m.graph.output})
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip(names, sess.run(names, {"x": X})))


def test_csv_columns_and_values(files, tmp_path, capsys):
    om, model = files / "chain.om", files / "chain.onnx"
    assert run(om, "--input", f"x={files / 'x.npy'}", "--output", tmp_path / "plain.npz") == 0
    plain = capsys.readouterr().out
    table = tmp_path / "layers.csv"
    assert run(om, "--input", f"x={files / 'x.npy'}", "--compare", model, "--all-layers", "--csv", table,
               "--output", tmp_path / "out.npz") == 0
    out = capsys.readouterr().out.splitlines()
    # the run itself is unchanged: same outputs, same cycles
    assert [ln for ln in plain.splitlines() if ln.startswith("cycles:")] == [ln for ln in out if ln.startswith("cycles:")]
    np.testing.assert_array_equal(np.load(tmp_path / "plain.npz")["y"], np.load(tmp_path / "out.npz")["y"])
    assert out[-3:-1] == ["layers: 5 compared (0 diverged), 1 fused",
                          "all 5 compared tensors within rel_l2_err 0.01 of onnxruntime"]
    rows = read_csv(table)
    assert tuple(rows[0]) == accuracy.COLUMNS
    assert [(r["node"], r["op"], r["tensor"], r["status"], r["kernel"]) for r in rows] == [
        ("conv1", "Conv", "c1", "fused", "conv2d_0"), ("relu1", "Relu", "r1", "ok", "conv2d_0"),
        ("pool1", "MaxPool", "p1", "ok", "max_pool_0"), ("scale", "Mul", "m", "ok", "mul_0"),
        ("conv2", "Conv", "c2", "ok", "conv2d_1"), ("pool2", "MaxPool", "y", "ok", "max_pool_1")]
    assert rows[0]["max_abs_err"] == rows[0]["rel_l2_err"] == rows[0]["cosine_similarity"] == ""
    assert rows[1]["shape"] == "1x16x8x8" and rows[5]["shape"] == "1x16x4x4"
    # the values: an intermediate tensor kept as an output (--out_nodes: converted to NCHW float32 by the
    # device) and the model output give the same errors, computed here independently
    kept = tmp_path / "kept.om"
    cann.compile(str(model), out_nodes="r1;c2;y").save(kept)
    got = cann.load(str(kept)).run({"x": X})
    ref = reference(model, ["r1", "c2", "y"])
    for row in (rows[1], rows[4], rows[5]):
        y, r = got[row["tensor"]].astype(np.float64).ravel(), ref[row["tensor"]].astype(np.float64).ravel()
        assert float(row["max_abs_err"]) == float(np.abs(y - r).max())
        assert float(row["rel_l2_err"]) == pytest.approx(np.linalg.norm(y - r) / np.linalg.norm(r), rel=1e-12)
        assert float(row["cosine_similarity"]) == pytest.approx(y @ r / np.linalg.norm(y) / np.linalg.norm(r), rel=1e-12)
        assert 0 < float(row["rel_l2_err"]) < 2e-3


def test_names_planted_fp16_overflow(files, tmp_path, capsys):
    table = tmp_path / "over.csv"
    assert run(files / "over.om", "--input", f"x={files / 'x.npy'}", "--compare", files / "over.onnx",
               "--all-layers", "--csv", table) == 1
    out, err = capsys.readouterr()
    line = next(ln for ln in out.splitlines() if ln.startswith("first diverging node"))
    assert line.startswith("first diverging node: 'scale' (Mul), tensor 'm', kernel 'mul_0' (launch 3): "
                           "rel_l2_err inf > 0.01, max_abs_err inf")
    assert "warning: kernel 'mul_0' (model nodes scale): float overflow" in err  # the overflow check agrees
    status = {r["node"]: r["status"] for r in read_csv(table)}
    assert status == {"conv1": "fused", "relu1": "ok", "pool1": "ok", "scale": "diverged", "conv2": "diverged",
                      "pool2": "diverged"}


def test_names_planted_wrong_weight(files, capsys):
    args = ("--input", f"x={files / 'x.npy'}", "--all-layers")
    assert run(files / "chain.om", "--compare", files / "wrong.onnx", *args) == 1
    out, err = capsys.readouterr()
    assert "\nfirst diverging node: 'conv2' (Conv), tensor 'c2', kernel 'conv2d_1' (launch 4): rel_l2_err " in out
    assert "relu1 (Relu) r1 [conv2d_0]: " in out and "scale (Mul) m [mul_0]: " in out  # before it: compared, fine
    assert f"note: {files / 'chain.om'}: its weights differ from those of {files / 'wrong.onnx'}: first in a " \
           f"constant of launch 4 (kernel 'conv2d_1')" in err
    assert run(files / "chain.om", "--compare", files / "wrong.onnx", *args, "--tolerance", "0.5") == 0  # 0.22 < 0.5
    assert "\nall 5 compared tensors within rel_l2_err 0.5 of onnxruntime\n" in capsys.readouterr().out


def test_fused_group_and_folded_batch_norm(files, tmp_path, capsys):
    """A wrong weight inside a fused kernel names the kernel's output node and the nodes fused with
    it; BatchNormalization folded into its Conv is compared as the tensor the Conv now produces."""
    table = tmp_path / "g.csv"
    assert run(files / "grouped.om", "--input", f"x={files / 'x.npy'}", "--compare", files / "grouped.onnx",
               "--all-layers", "--csv", table) == 0
    assert [(r["node"], r["status"], r["kernel"]) for r in read_csv(table)] == [
        ("conv1", "rewritten", ""), ("bn", "fused", "conv2d_0"), ("relu", "ok", "conv2d_0"),
        ("conv2", "fused", "conv2d_1"), ("sig", "fused", "conv2d_1"), ("add", "ok", "conv2d_1")]
    capsys.readouterr()
    assert run(files / "grouped.om", "--input", f"x={files / 'x.npy'}", "--compare", files / "grouped_wrong.onnx",
               "--all-layers") == 1
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("first diverging"))
    assert line.startswith("first diverging node: 'add' (Add), tensor 'y', kernel 'conv2d_1' (launch 2): ")
    assert line.endswith("; the kernel also computes conv2, sig (fused: only its last tensor is in GM)")


def test_python_api_and_O0(files, tmp_path):
    """An -O0 .om (no fusion) maps too: every node's tensor is compared; compare_layers returns the rows."""
    om = tmp_path / "chain_O0.om"
    cann.compile(str(files / "chain.onnx"), opt_level=0).save(om)
    plan, rows, first, tol = accuracy.compare_layers(om, files / "wrong.onnx", {"x": X})
    assert tol == 1e-2 and [r.status for r in rows] == ["ok", "ok", "ok", "ok", "diverged", "diverged"]
    assert (first.node, first.kernel) == ("conv2", "conv2d_1")
    assert all(r.launch is not None for r in rows) and plan.notes


def test_bad_input_is_one_line_exit_2(files, tmp_path, capsys):
    om = files / "chain.om"
    other = tmp_path / "other.onnx"
    m = chain()
    m.graph.input[0].type.tensor_type.shape.dim[2].dim_value = 16
    onnx.save(m, other)
    renamed = tmp_path / "renamed.onnx"
    m = chain()
    m.graph.input[0].name = m.graph.node[0].input[0] = "z"
    onnx.save(m, renamed)
    extra = tmp_path / "extra.onnx"  # the same inputs and outputs, another graph
    m = chain()
    m.graph.node.insert(3, h.make_node("Sigmoid", ["p1"], ["p1b"], name="sig"))
    m.graph.node[4].input[0] = "p1b"
    onnx.save(m, extra)
    cases = [
        ((om, "--compare", tmp_path / "nope.onnx", "--all-layers"), f"error: {tmp_path / 'nope.onnx'}: no such file"),
        ((om, "--compare", other, "--all-layers"),
         f"error: {other}: input 'x' is float32 [1, 8, 16, 8], {om} takes float32 [1, 8, 8, 8]"),
        ((om, "--compare", renamed, "--all-layers"), f"error: {renamed}: its inputs (z) are not those of {om} (x): "
                                                     "compare with the model it was compiled from"),
        ((om, "--compare", files / "grouped.onnx", "--all-layers"), None),
        ((om, "--compare", extra, "--all-layers"),
         f"error: {om}: its launches are not those {extra} compiles to (Ascend910, force_fp16, -O1 or -O0): "
         "compare with the model it was compiled from, compiled without --fusion_switch_file or --keep_dtype"),
        ((om, "--all-layers"), "error: --all-layers: needs --compare MODEL.onnx (the model the .om was compiled from)"),
        ((om, "--csv", tmp_path / "t.csv"), "error: --csv: writes the per-layer comparison: give --all-layers too"),
        ((om, "--compare", files / "chain.onnx", "--all-layers", "--csv", tmp_path / "no" / "t.csv"), None),
    ]
    for args, want in cases:
        assert run(*args) == 2, args
        err = capsys.readouterr().err.splitlines()
        err = [ln for ln in err if not ln.startswith("note:")]
        assert len(err) == 1 and err[0].startswith("error: "), (args, err)
        if want is not None:
            assert err[0] == want
    assert not (tmp_path / "t.csv").exists()


def test_layout_and_metrics():
    a = np.arange(2 * 20 * 3 * 2, dtype=np.float16).reshape(2, 20, 3, 2)  # C = 20: two C1 blocks, 12 padding
    dev = np.zeros((2, 2, 3, 2, 16), np.float16)
    for c in range(20):
        dev[:, c // 16, :, :, c % 16] = a[:, c]
    np.testing.assert_array_equal(accuracy.to_onnx_layout(dev.reshape(-1).view(np.uint8), "NC1HWC0", a.shape,
                                                          np.dtype(np.float16)), a)
    np.testing.assert_array_equal(accuracy.to_onnx_layout(a.reshape(-1).view(np.uint8), "ND", a.shape,
                                                          np.dtype(np.float16)), a)
    cos = accuracy.cosine_similarity
    assert cos(np.zeros(3), np.zeros(3)) == 1.0 and cos(np.zeros(3), np.ones(3)) == 0.0
    assert cos(np.array([1.0, 0]), np.array([0, 2.0])) == 0.0 and cos(np.array([2.0]), np.array([3.0])) == 1.0
    assert math.isnan(cos(np.array([np.inf, 1]), np.ones(2)))
    max_abs, rel = accuracy.errors(np.array([np.inf, 1.0]), np.ones(2))
    assert max_abs == math.inf and rel == math.inf
    assert accuracy.default_tolerance("force_fp16") == 1e-2 and accuracy.default_tolerance("force_fp32") == 1e-4


def test_trace_records_only_inside_capture():
    tensor_trace.note("k", 1)  # no capture: nothing recorded, nothing raised
    with tensor_trace.capture() as rec:
        tensor_trace.note("k", 2)
    assert rec == {"k": 2}


@pytest.mark.slow
def test_docs_wrong_weight_example_prints_what_docs_say(tmp_path, capsys, monkeypatch):
    """docs/accuracy.md's second example (SqueezeNet, a bias off by 0.5), its commands as pasted (/tmp ->
    tmp_path): every line the page says it prints is printed (the page had drifted to 2.527e-05 / 1.183e-03)."""
    import re
    import subprocess
    import sys
    from pathlib import Path

    from cann.tools import cann_compile

    root = Path(__file__).resolve().parent.parent
    page = (root / "docs" / "accuracy.md").read_text()
    block = page[page.index("A wrong weight is found the same way"):]
    commands = re.search(r"```sh\n(.*?)```", block, re.S).group(1).replace("/tmp/", f"{tmp_path}/")
    said = re.search(r"says\n\n```\n(.*?)```", block, re.S).group(1).replace("/tmp/", f"{tmp_path}/").splitlines()
    lines = commands.replace("\\\n", "").splitlines()
    assert [ln.split()[0] for ln in lines] == ["cann-compile", "python", "cann-run"]
    monkeypatch.chdir(root)
    with pytest.raises(SystemExit) as e:
        cann_compile.main(lines[0].split()[1:])
    assert e.value.code == 0
    code = lines[1].split('"')[1]
    subprocess.run([sys.executable, "-c", code], check=True)
    capsys.readouterr()
    assert run(*lines[2].split()[1:]) == 1
    out, err = capsys.readouterr()
    printed = set(out.splitlines()) | set(err.splitlines())
    assert [ln for ln in said if ln not in printed] == []
