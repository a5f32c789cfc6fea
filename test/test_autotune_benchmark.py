"""benchmarks/autotune.py's machinery (issue 13 item 8): candidates, measurement, cache, tau and regret
on one small convolution and one small GEMM."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def bm():
    spec = importlib.util.spec_from_file_location("autotune_benchmark", ROOT / "benchmarks" / "autotune.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def test_selection_is_seeded_and_covers_top_and_sample(bm):
    idx, drawn = bm.selection(100, 5, 10, "sig")
    assert (idx, drawn) == bm.selection(100, 5, 10, "sig")  # the same every run
    assert set(range(5)) <= set(idx) and set(drawn) <= set(idx) and len(drawn) == 10
    assert bm.selection(100, 5, 10, "other")[1] != drawn
    assert bm.selection(8, 5, 10, "sig") == (list(range(8)), list(range(8)))  # small space: every candidate
    assert bm.selection(100, 5, -1, "sig")[0] == list(range(100))  # --all


@pytest.mark.parametrize("kind, spec", [
    ("conv", None),  # filled below: a 3x3 convolution
    ("gemm", (64, 128, 96)),
])
def test_evaluate_measures_and_caches(bm, tmp_path, kind, spec):
    from cann.autotune import ConvShape

    if kind == "conv":
        spec = ("x=1x32x14x14 w=32x32x3x3", ConvShape((1, 32, 14, 14), (32, 32, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)))
    target = bm.build(kind, spec)
    assert len(target.cands) > 10
    ests = [e for _, e in target.cands]
    assert ests == sorted(ests)  # cheapest estimate first
    cache = bm.Cache(tmp_path / "c.jsonl")
    r = bm.evaluate(target, cache, top=3, sample=8, salt="s")
    assert -1.0 <= r.tau <= 1.0 and not math.isnan(r.tau)
    assert r.regret >= 0 and r.best_cycles <= r.default_cycles
    assert r.measured >= 9 and r.space == len(target.cands)
    assert all(c > 0 for _, _, c in r.runs)
    # a second run reads every measurement from the file: the same numbers, nothing simulated
    again = bm.evaluate(bm.build(kind, spec), bm.Cache(tmp_path / "c.jsonl"), top=3, sample=8, salt="s")
    assert again.hits == again.measured and (again.tau, again.regret, again.runs) == (r.tau, r.regret, r.runs)
    # another fingerprint of the downstream sources: nothing reused
    stale = bm.evaluate(bm.build(kind, spec), bm.Cache(tmp_path / "c.jsonl"), top=3, sample=8, salt="t")
    assert stale.hits < stale.measured / 2 and stale.runs == r.runs


def test_fingerprint_follows_the_downstream_sources(bm, tmp_path):
    for rel in bm.DOWNSTREAM:
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if rel.endswith(".py"):
            p.write_text("x = 1\n")
        else:
            p.mkdir(exist_ok=True)
            (p / "a.py").write_text("y = 1\n")
    before = bm.fingerprint(tmp_path)
    (tmp_path / "cann/sim/a.py").write_text("y = 2\n")
    assert bm.fingerprint(tmp_path) != before


def test_module_key_hashes_constants_by_their_bytes(bm):
    """The cache key prints each dense constant as the sha256 of its bytes: an equal weight gives the
    same key, a changed one (one element) another; printing never unpacks the weight."""
    from xdsl.dialects.builtin import BytesAttr, DenseIntOrFPElementsAttr

    from cann.dialects import tile

    target = bm.build("gemm", (32, 64, 48))
    pins = target.cands[0][0]
    one, two = target.tile(pins), target.tile(pins)
    assert bm.module_key(one, "s") == bm.module_key(two, "s")
    assert bm.module_key(one, "s") != bm.module_key(one, "t")  # the downstream sources' fingerprint
    (weight, *_) = [op for op in two.walk() if isinstance(op, tile.ConstantOp)]
    data = bytearray(weight.value.data.data)
    data[0] ^= 1  # one bit of the first element
    weight.properties["value"] = DenseIntOrFPElementsAttr(weight.value.type, BytesAttr(bytes(data)))
    assert bm.module_key(one, "s") != bm.module_key(two, "s")
    data[0] ^= 1  # the same bytes again, in a new attribute
    weight.properties["value"] = DenseIntOrFPElementsAttr(weight.value.type, BytesAttr(bytes(data)))
    assert bm.module_key(one, "s") == bm.module_key(two, "s")


def test_report_reads_saved_results(bm, tmp_path, capsys):
    """``--report`` rebuilds the rows from ``--json`` files; a later file's row of a shape replaces
    the earlier one's."""
    import json

    def row(label, tau, regret):
        return {"label": label, "op": "MatMul", "sig": label, "space": 10, "measured": 5, "tau": tau,
                "regret": regret, "default_cycles": 110, "best_cycles": 100, "best_pins": {}, "default_tiling": {},
                "seconds": 1.0, "hits": 0, "runs": []}

    (tmp_path / "a.json").write_text(json.dumps([row("1x2x3", 0.5, 0.1), row("4x5x6", 0.9, 0.0)]))
    (tmp_path / "b.json").write_text(json.dumps([row("1x2x3", 0.7, 0.0)]))
    done = bm.load_results([tmp_path / "a.json", tmp_path / "b.json"])
    assert [(r.label, r.tau) for r in done] == [("1x2x3", 0.7), ("4x5x6", 0.9)]
    med, geo = bm.summary(done)["gemm"]
    assert med == pytest.approx(0.8) and geo == pytest.approx(0.0)
