"""The ONNX backend node tests (every case the pinned onnx generates) through ``cann.backend``.

Each case recorded as passing in ``conformance.json`` must still pass (so neither committed pass
rate can fall); cases recorded as failing or unsupported are run too (they must not crash the
harness) and a case that starts passing is reported by ``conformance.py``, which regenerates the
record and ``docs/onnx-conformance.md``. Unsupported cases fail at import in milliseconds, so all
1,884 cases fit the suite's budget.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import conformance  # noqa: E402

RECORD = json.loads(conformance.SUMMARY.read_text())


def test_record_matches_pinned_onnx():
    import onnx

    assert RECORD["onnx"] == onnx.__version__, "regenerate with test/backend/conformance.py"
    assert sorted(RECORD["cases"]) == sorted(conformance.cases()), "the case list changed: regenerate"


def test_committed_rates_are_consistent():
    s = RECORD["summary"]
    statuses = list(RECORD["cases"].values())
    assert s["cases"] == len(statuses)
    assert s["pass"] == statuses.count("pass")
    assert s["pass_rate"] == round(s["pass"] / s["cases"], 4)
    table = conformance.supported_table()
    scope = [n for n in RECORD["cases"] if conformance.in_scope(conformance.cases()[n], table)]
    assert s["supported_cases"] == len(scope), "docs/supported-ops.md changed: regenerate the report"
    assert s["supported_pass"] == sum(RECORD["cases"][n] == "pass" for n in scope)
    doc = conformance.DOC.read_text()
    assert f"| all cases | {s['cases']} | {s['pass']} |" in doc
    assert f"| in scope | {s['supported_cases']} | {s['supported_pass']} |" in doc


def _chunks(names, n):
    return [names[i::n] for i in range(n)]


_NAMES = sorted(RECORD["cases"])
_SHARDS = 24


@pytest.mark.parametrize("shard", range(_SHARDS))
def test_cases(shard):
    """Every case of the shard runs; the ones recorded as passing must pass."""
    regressions = []
    for name in _chunks(_NAMES, _SHARDS)[shard]:
        r = conformance.run_case(name)
        if RECORD["cases"][name] == "pass" and r["status"] != "pass":
            regressions.append(f"{name}: {r['status']}: {r['reason']}")
    assert not regressions, "cases that passed before:\n" + "\n".join(regressions)


def test_case_timeout_counts_cpu_seconds():
    """The per-case limit is CPU time (ITIMER_PROF, so a loaded machine does not fail a case): a case
    over it fails with the limit named, and the timer is cleared afterwards."""
    import signal

    name = "test_sce_NCd1d2d3d4d5_mean_weight"  # the slowest passing case (about 23 CPU s)
    r = conformance.run_case(name, timeout=0.5)
    assert (r["status"], r["reason"]) == ("fail", "timeout after 0.5 CPU s")
    assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)
