"""Profile and timeline of a simulated run (:class:`cann.sim.executor.RunStats`).

* :func:`profile_rows` / :func:`format_profile` / :func:`write_profile_csv`: one row per kernel
  launch with msprof PipeUtilization column names, the compiled bound and the ideal bound
  (docs/core-model.md, "Profile");
* :func:`trace_events` / :func:`write_trace`: Chrome trace-event JSON (opens in Perfetto and
  chrome://tracing), one track per pipe per core, one "X" event per instruction.
"""

from __future__ import annotations

import csv
import json
import os

from cann.fileio import atomic_output
from cann.sim.stats import RATIO_COLUMNS, RunStats
from cann.sim.timing import PIPES

#: profile columns, in order
COLUMNS = ("launch", "kernel", "block_dim", "core_kind", "cycles", "time_us", *(c for c, _, _ in RATIO_COLUMNS),
           "gm_read_bytes", "gm_write_bytes", "l2_read_bytes", "hbm_read_bytes", "compiled_bound_cycles",
           "compiled_bound_pct", "bound",
           "model_macs", "executed_macs", "compulsory_bytes", "ideal_cycles", "ideal_pct")


def profile_rows(stats: RunStats) -> list[dict[str, object]]:
    """One dict per launch (keys :data:`COLUMNS`; a ratio is None where the core has no such unit)."""
    return [k.profile() for k in stats.kernels]


def total_row(stats: RunStats) -> dict[str, object]:
    """Totals over the launches: cycles, time_us, GM bytes (read, written, read from the L2 and
    from HBM), compiled bound, MACs, compulsory bytes,
    ideal cycles; the percentages are Σ bound / Σ cycles."""
    return {"cycles": stats.cycles, "time_us": stats.time_us,
            "gm_read_bytes": sum(k.gm_read_bytes for k in stats.kernels),
            "gm_write_bytes": sum(k.gm_write_bytes for k in stats.kernels),
            "l2_read_bytes": sum(k.l2_read_bytes for k in stats.kernels),
            "hbm_read_bytes": sum(k.hbm_read_bytes for k in stats.kernels),
            "compiled_bound_cycles": stats.compiled_bound, "compiled_bound_pct": stats.compiled_bound_pct,
            "model_macs": stats.model_macs, "executed_macs": stats.executed_macs,
            "compulsory_bytes": sum(k.work.compulsory_bytes for k in stats.kernels),
            "ideal_cycles": stats.ideal_cycles, "ideal_pct": stats.ideal_pct}


def _fmt(v: object) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 1e6 else f"{v:.6g}"
    return str(v)


def format_profile(stats: RunStats) -> str:
    """A whitespace-aligned table (header = :data:`COLUMNS`, "-" where a core has no such unit)
    plus a ``total:`` line."""
    rows = [[_fmt(r[c]) for c in COLUMNS] for r in profile_rows(stats)]
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c) for i, c in enumerate(COLUMNS)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(COLUMNS, widths)).rstrip()]
    lines += ["  ".join(x.ljust(w) for x, w in zip(r, widths)).rstrip() for r in rows]
    t = total_row(stats)
    lines.append(f"total: launches={len(stats.kernels)} " + " ".join(f"{k}={_fmt(v)}" for k, v in t.items()))
    return "\n".join(lines)


def write_profile_csv(stats: RunStats, path: str | os.PathLike) -> None:
    """The profile rows as CSV with a header row (empty cells where a core has no such unit), then
    a model row with ``launch`` = ``total`` holding :func:`total_row` (other cells empty);
    written atomically."""
    def cell(v: object) -> object:
        return "" if v is None else (f"{v:.6g}" if isinstance(v, float) else v)

    with atomic_output(path, "w") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(COLUMNS)
        for r in profile_rows(stats):
            w.writerow([cell(r[c]) for c in COLUMNS])
        t = {"launch": "total", **total_row(stats)}
        w.writerow([cell(t.get(c)) for c in COLUMNS])


def _core_name(kind: str, core: int) -> str:
    return {"aicore": "AICore", "aic": "AIC", "aiv": "AIV"}[kind] + f" {core}"


def trace_events(stats: RunStats, *, launches: list[int] | None = None, max_cores: int | None = None) -> dict:
    """Chrome trace-event JSON object: ``{"traceEvents": [...], "displayTimeUnit": "ns"}``.

    Launches run one after another from time 0 (ts and dur in microseconds at the SoC clock). One
    process per core (``pid`` = core number, named "AICore n" / "AIC n" / "AIV n"), one thread per
    pipe (``tid`` = HIVM pipe number, named S, V, M, MTE1, MTE2, MTE3), one "X" event per
    instruction: name = mnemonic, args = {"asm", "kernel", "launch", "block", "index"}.
    ``launches`` restricts the events to those launch indices (time stays absolute); ``max_cores``
    keeps only the first cores of each launch.
    """
    mhz = float(stats.clock_mhz)
    pid_of: dict[tuple[str, int], int] = {}
    meta: list[dict] = []
    events: list[dict] = []
    t0 = 0
    wanted = None if launches is None else set(launches)
    for k in stats.kernels:
        if wanted is None or k.index in wanted:
            ncores = max(1, max(len(w) for w in k.waves)) if k.waves else 1
            wave_t = t0
            for w in k.waves:
                for b in w:
                    core = b % ncores
                    if max_cores is not None and core >= max_cores:
                        continue
                    key = (k.core_kind, core)
                    pid = pid_of.get(key)
                    if pid is None:
                        pid = pid_of[key] = len(pid_of)
                        meta.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                                     "args": {"name": _core_name(k.core_kind, core)}})
                        meta.append({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0,
                                     "args": {"sort_index": pid}})
                        for ti, pname in enumerate(PIPES):
                            meta.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": ti,
                                         "args": {"name": pname}})
                            meta.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": ti,
                                         "args": {"sort_index": ti}})
                    run = k.cores[b]
                    tm = run.timing
                    if tm is None:
                        continue
                    prog = run.program or ()
                    starts = ((tm.start + wave_t) / mhz).tolist()
                    durs = ((tm.end - tm.start) / mhz).tolist()
                    pipes = tm.pipe.tolist()
                    for i, ins in enumerate(prog):
                        events.append({"name": ins.mnemonic, "cat": k.name, "ph": "X", "pid": pid, "tid": pipes[i],
                                       "ts": starts[i], "dur": durs[i],
                                       "args": {"asm": ins.asm(), "kernel": k.name, "launch": k.index, "block": b,
                                                "index": i}})
                wave_t += max(k.cores[b].cycles for b in w)
        t0 += k.cycles
    return {"traceEvents": meta + events, "displayTimeUnit": "ns",
            "otherData": {"soc": stats.soc, "clock_mhz": stats.clock_mhz, "cycles": stats.cycles}}


def write_trace(stats: RunStats, path: str | os.PathLike, **kw) -> None:
    """Write :func:`trace_events` as JSON, atomically."""
    data = trace_events(stats, **kw)
    with atomic_output(path, "w") as f:
        json.dump(data, f, separators=(",", ":"))
