"""Knowledge bases (``tile-search-kb``, docs/autotune.md): the file format's checks, its
deterministic writing, and a tuned tiling applied by ``cann.compile(kb=...)`` and
``cann-compile --kb`` to the model's convolutions of its signature."""

import hashlib
import json
import subprocess
import sys

import numpy as np
import pytest

import cann
from cann.compiler import lower
from cann.dialects.ascend import kernels
from cann.passes import tile_search_kb
from cann.passes.tile_search_kb import compiler_version, dump, load, signature
from cann.testing import random_inputs, run_onnxruntime, test_model


def _entry(sig: str, tiling: dict, **kw) -> dict:
    e = {"op": "Conv", "signature": sig, "soc": "Ascend910", "precision_mode": "force_fp16",
         "compiler": compiler_version(), "tiling": tiling, "cycles": 0}
    e.update(kw)
    return e


def _first_conv(model) -> str:
    return signature(next(o for o in lower(model, until="graph").walk() if o.name == "graph.conv2d"))


def _conv_tiling(module) -> dict:
    k = next(k for k in kernels(module) if k.sym_name.data == "conv2d_0")
    return {f: v.value.data for f, v in k.attributes["tile.tiling"].data.items()}


def test_signature_names_the_shapes_and_attributes():
    assert _first_conv(test_model("squeezenet")) == \
        "x=1x3x224x224 w=64x3x3x3 strides=2,2 pads=0,0,0,0 dilations=1,1 group=1"


def test_compile_applies_the_entry_of_its_signature(tmp_path):
    m = test_model("squeezenet")
    sig = _first_conv(m)
    kb = tmp_path / "kb.json"
    kb.write_text(dump([_entry(sig, {"rows": 2, "m_blocks": 4}),  # the last entry of a key wins
                        _entry(sig, {"rows": 3, "m_blocks": 5}),
                        _entry(sig, {"rows": 1}, precision_mode="must_keep_origin_dtype"),  # not this compile's
                        _entry("x=1x1x1x1 w=1x1x1x1 strides=1,1 pads=0,0,0,0 dilations=1,1 group=1", {"rows": 1})]))
    t = _conv_tiling(lower(m, kb=kb))
    assert (t["rows"], t["m_blocks"]) == (3, 5)
    assert _conv_tiling(lower(m, kb=kb, tiling={"conv2d_0": {"rows": 4}}))["rows"] == 4  # a name pin wins
    x = random_inputs(m)
    ref = run_onnxruntime(m, x)
    y = cann.compile(m, kb=kb).run(x)
    for k, r in ref.items():
        assert np.linalg.norm(y[k] - r) / np.linalg.norm(r) <= 1e-2
    # another compiler version's entries do not apply
    kb.write_text(dump([_entry(sig, {"rows": 3, "m_blocks": 5}, compiler="0.0.1")]))
    assert _conv_tiling(lower(m, kb=kb)) == _conv_tiling(lower(m))


def test_dump_is_deterministic_and_loads_back(tmp_path):
    entries = [_entry("s", {"rows": 2, "n_blocks": 1})]
    p = tmp_path / "kb.json"
    p.write_text(dump(entries))
    assert dump(entries) == dump([dict(reversed(list(entries[0].items())))])
    kb = load(p)
    assert kb.entries == tuple(entries) and len(kb.digest) == 64


@pytest.mark.parametrize("text,message", [
    ("{", r"not valid JSON"),
    ('{"format": "other", "version": 1, "entries": []}', r"not a knowledge base \(expected \"format\": "
                                                          r"\"cann-knowledge-base\", \"version\": 1\)"),
    ('{"format": "cann-knowledge-base", "version": 1, "entries": {}}', r"\"entries\" must be a list"),
    ('{"format": "cann-knowledge-base", "version": 1, "entries": [{"op": "Conv"}]}',
     r"entry 0: field 'signature' \(str\) missing or of another type"),
    (json.dumps({"format": "cann-knowledge-base", "version": 1, "entries": [_entry("s", {"rows": 1.5})]}),
     r"entry 0: tiling values are integers, got \{'rows': 1.5\}"),
])
def test_malformed_files_are_one_line_errors(tmp_path, text, message):
    p = tmp_path / "kb.json"
    p.write_text(text)
    with pytest.raises(cann.CannError, match=rf"^error: {p}.*{message}"):
        load(p)


def test_cann_compile_refuses_a_bad_kb_before_any_work(tmp_path, fire_onnx):
    out = tmp_path / "m.om"
    r = subprocess.run([sys.executable, "-m", "cann.tools.cann_compile", str(fire_onnx), "-o", str(out),
                        "--kb", str(tmp_path / "none.json")], capture_output=True, text=True)
    assert r.returncode == 2 and not out.exists()
    assert r.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'none.json'}: cannot read the knowledge base: No such file or directory"]


def test_cann_compile_names_the_kb_and_its_digest(tmp_path, fire_onnx):
    import hashlib
    import onnx

    kb = tmp_path / "kb.json"
    kb.write_text(dump([_entry(_first_conv(onnx.load(fire_onnx)), {"rows": 1})]))
    r = subprocess.run([sys.executable, "-m", "cann.tools.cann_compile", str(fire_onnx), "-o", str(tmp_path / "m.om"),
                        "--kb", str(kb)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert f"knowledge base {kb} sha256 {hashlib.sha256(kb.read_bytes()).hexdigest()[:16]})" in r.stdout


def _matmul_relu(m=32, k=64, n=48):
    """Y = Relu(A @ B): A [m, k] a float32 input, B a constant (a fused cube_epilogue group at -O1)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    b = np.random.default_rng(0).standard_normal((k, n)).astype(np.float32) / 8
    g = helper.make_graph([helper.make_node("MatMul", ["A", "B"], ["P"], name="mm"),
                           helper.make_node("Relu", ["P"], ["Y"], name="relu")], "mmr",
                          [helper.make_tensor_value_info("A", TensorProto.FLOAT, [m, k])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [m, n])],
                          [numpy_helper.from_array(b, "B")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _matmul_entry(model, tiling: dict) -> dict:
    sig = signature(next(o for o in lower(model, until="graph").walk() if o.name == "graph.matmul"))
    return _entry(sig, tiling, op="MatMul")


def _kernel_tiling(module, name: str) -> dict:
    k = next(k for k in kernels(module) if k.sym_name.data == name)
    return {f: v.value.data for f, v in k.attributes["tile.tiling"].data.items()}


def _close(model, compiled, tol=1e-2):
    x = random_inputs(model)
    ref = run_onnxruntime(model, x)
    y = compiled.run(x)
    for k, r in ref.items():
        assert np.linalg.norm(y[k] - r) / np.linalg.norm(r) <= tol


def test_gemm_signature_and_entry_applied_to_a_fused_matmul(tmp_path):
    m = _matmul_relu()
    e = _matmul_entry(m, {"m_blocks": 2, "n_blocks": 3, "step_k": 1, "m": 16})
    assert e["signature"] == "a=32x64 b=64x48 dtype=f32"
    kb = tmp_path / "kb.json"
    kb.write_text(dump([e]))
    t = _kernel_tiling(lower(m, kb=kb), "matmul_0")
    assert (t["m_blocks"], t["n_blocks"], t["step_k"], t["m"], t["block_dim"]) == (2, 3, 1, 16, 6)
    assert _kernel_tiling(lower(m, kb=kb, tiling={"matmul_0": {"n_blocks": 1}}), "matmul_0")["n_blocks"] == 1
    _close(m, cann.compile(m, kb=kb))


def test_gemm_op_signature_names_transposition():
    from onnx import TensorProto, helper, numpy_helper

    b = np.ones((48, 64), np.float32)
    g = helper.make_graph([helper.make_node("Gemm", ["A", "B"], ["Y"], transB=1)], "g",
                          [helper.make_tensor_value_info("A", TensorProto.FLOAT, [32, 64])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [32, 48])],
                          [numpy_helper.from_array(b, "B")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    op = next(o for o in lower(model, until="graph").walk() if o.name == "graph.gemm")
    assert signature(op) == "a=32x64 b=48x64 transA=0 transB=1 dtype=f32"


def test_shipped_kb_is_read_by_default_under_a_users_and_none_turns_it_off(tmp_path, monkeypatch):
    from cann.passes import tile_search_kb

    m = _matmul_relu()
    shipped = tmp_path / "Ascend910.json"
    shipped.write_text(dump([_matmul_entry(m, {"m_blocks": 2, "n_blocks": 1})]))
    monkeypatch.setattr(tile_search_kb, "shipped_path", lambda soc: tmp_path / f"{soc}.json")
    assert _kernel_tiling(lower(m), "matmul_0")["block_dim"] == 2  # default compile: the shipped entry
    default = _kernel_tiling(lower(m, kb="none"), "matmul_0")
    assert default["block_dim"] != 2 and _kernel_tiling(lower(m, kb=False), "matmul_0") == default
    user = tmp_path / "user.json"
    user.write_text(dump([_matmul_entry(m, {"m_blocks": 1, "n_blocks": 3})]))
    assert _kernel_tiling(lower(m, kb=user), "matmul_0")["block_dim"] == 3  # the user's entry wins
    sha = hashlib.sha256(shipped.read_bytes()).hexdigest()
    assert cann.compile(m).om.knowledge_bases == (f"shipped:{sha}",)
    assert cann.compile(m, kb=user).om.knowledge_bases == \
        (f"shipped:{sha}", f"user:{hashlib.sha256(user.read_bytes()).hexdigest()}")
    assert cann.compile(m, kb="none").om.knowledge_bases == ()


def test_a_refused_shipped_entry_falls_back_inside_a_fused_group(tmp_path, monkeypatch):
    from cann.passes import tile_search_kb

    m = _matmul_relu()
    (tmp_path / "Ascend910.json").write_text(dump([_matmul_entry(m, {"m_blocks": 64, "m": 24})]))
    monkeypatch.setattr(tile_search_kb, "shipped_path", lambda soc: tmp_path / f"{soc}.json")
    module = lower(m)
    assert _kernel_tiling(module, "matmul_0") == _kernel_tiling(lower(m, kb="none"), "matmul_0")
    assert [k.sym_name.data for k in kernels(module)] == [k.sym_name.data for k in kernels(lower(m, kb="none"))]
    _close(m, cann.compile(m))


def test_a_refused_user_entry_is_an_error_naming_file_and_signature(tmp_path):
    m = _matmul_relu()
    kb = tmp_path / "kb.json"
    kb.write_text(dump([_matmul_entry(m, {"m_blocks": 64})]))
    with pytest.raises(cann.CannError) as e:
        cann.compile(m, kb=kb)
    assert str(e.value).splitlines() == [
        f"error: {kb}: MatMul entry 'a=32x64 b=64x48 dtype=f32': tiling {{'m_blocks': 64}} refused by the kernel "
        "(mm: Gemm: tiling m_blocks = 64 x n_blocks = 1 needs 64 cores, 32 available)"]


def test_the_om_records_the_digests_and_cann_run_info_prints_them(tmp_path):
    import onnx

    m = _matmul_relu()
    src = tmp_path / "m.onnx"
    onnx.save(m, src)
    kb = tmp_path / "kb.json"
    kb.write_text(dump([_matmul_entry(m, {"m_blocks": 2})]))
    outs = []
    for name in ("a.om", "b.om"):
        r = subprocess.run([sys.executable, "-m", "cann.tools.cann_compile", str(src), "-o", str(tmp_path / name),
                            "--kb", str(kb)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        outs.append((tmp_path / name).read_bytes())
    assert outs[0] == outs[1]  # same inputs and flags, same bytes
    user = hashlib.sha256(kb.read_bytes()).hexdigest()
    shipped = load(tile_search_kb.shipped_path("Ascend910")).digest
    assert f"shipped knowledge base sha256 {shipped[:16]}, knowledge base {kb} sha256 {user[:16]})" in r.stdout
    r = subprocess.run([sys.executable, "-m", "cann.tools.cann_run", str(tmp_path / "a.om"), "--info"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-2:] == [f"knowledge base: shipped sha256 {shipped}",
                                          f"knowledge base: user sha256 {user}"]
    r = subprocess.run([sys.executable, "-m", "cann.tools.cann_compile", str(src), "-o", str(tmp_path / "c.om"),
                        "--kb", "none"], capture_output=True, text=True)
    assert r.returncode == 0 and "knowledge base" not in r.stdout
    r = subprocess.run([sys.executable, "-m", "cann.tools.cann_run", str(tmp_path / "c.om"), "--info"],
                       capture_output=True, text=True)
    assert r.stdout.splitlines()[-1] == "knowledge base: none"


def test_entries_apply_to_the_core_count_they_were_tuned_for(tmp_path):
    m = _matmul_relu()
    kb = tmp_path / "kb.json"
    kb.write_text(dump([_matmul_entry(m, {"m_blocks": 2, "n_blocks": 1}),
                        {**_matmul_entry(m, {"m_blocks": 1, "n_blocks": 2}), "aicore_num": 4}]))
    assert _kernel_tiling(lower(m, kb=kb), "matmul_0")["block_dim"] == 2  # all 32 cores: the first entry
    four = _kernel_tiling(lower(m, kb=kb, aicore_num=4), "matmul_0")
    assert (four["m_blocks"], four["n_blocks"]) == (1, 2)
    assert _kernel_tiling(lower(m, kb=kb, aicore_num=8), "matmul_0") == \
        _kernel_tiling(lower(m, kb="none", aicore_num=8), "matmul_0")  # no entry for 8 cores
