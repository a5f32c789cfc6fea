"""Knowledge bases (``tile-search-kb``, docs/autotune.md): the file format's checks, its
deterministic writing, and a tuned tiling applied by ``cann.compile(kb=...)`` and
``cann-compile --kb`` to the model's convolutions of its signature."""

import json
import subprocess
import sys

import numpy as np
import pytest

import cann
from cann.compiler import lower
from cann.dialects.ascend import kernels
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
