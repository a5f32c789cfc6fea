"""Parallel-pipe timing, sync checking and race detection of one kernel run on one core.

The functional result comes from executing instructions in program order (:mod:`cann.sim.core`);
this module computes *when* each instruction runs on a model where every pipe (S, V, M, MTE1,
MTE2, MTE3) executes its own instructions in order and pipes overlap, ordered across pipes only by
``set_flag``/``wait_flag`` and ``pipe_barrier`` (DESIGN.md principle 4, docs/core-model.md):

* an instruction on pipe ``p`` starts when ``p`` is free and ends ``cost`` cycles later;
* ``set_flag(src, dst, e)`` runs on ``src`` after its earlier work and sets flag ``(src, dst, e)``
  at its end; setting a flag that is already set is an error ("set twice without a wait");
* ``wait_flag(src, dst, e)`` runs on ``dst``: it starts no earlier than the flag's set time, then
  clears the flag; a wait whose flag no earlier ``set_flag`` has set can never be satisfied in
  program order: a deadlock error; a flag still set when the kernel ends (never waited: the
  event id leaks into the next kernel) is an error too, and so is a ``set_flag`` that sets its
  flag *in time* before the previous wait of that flag cleared it (program order had the wait
  first, but the setting pipe ran ahead: on hardware the two settings merge);
* ``pipe_barrier(ALL)`` starts when every pipe is free and every pipe resumes after it;
  ``pipe_barrier(X)`` orders instructions within pipe ``X`` (already in order in this model) and
  occupies ``X`` for its cost.

One pass over the instruction list with per-pipe "free at" times and flag-set times (a max-plus
recurrence); no per-cycle loop.

Race detection uses vector clocks: every pipe keeps, per other pipe, the count of that pipe's
instructions known to happen before its current point (advanced by a wait through the clock the
matching set captured, and joined across all pipes by ``pipe_barrier(ALL)``). Every instruction's
operand footprints (the bounding byte range of each operand, per buffer; GM by arena address) are
kept per buffer and pipe in counter order; a new access is compared only with the other pipes'
accesses newer than what its pipe knows (a bisect), so a synchronized program compares few pairs.
Any overlapping pair, one of them a write, on different pipes with no happens-before path is a race.
"""

from __future__ import annotations

import sys
import warnings
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from cann.errors import CannError
from cann.hw import isa
from cann.hw.config import SocSpec
from cann.hw.footprint import BUFS, footprints
from cann.sim.l2 import SCALE as L2_SCALE, read_arg_field

#: pipes of the timing model, indexed by their HIVM number (PIPE_S = 0 ... PIPE_MTE3 = 5)
PIPES = tuple(p.name for p in isa.Pipe if p is not isa.Pipe.ALL)
NPIPES = len(PIPES)
_ALL = isa.Pipe.ALL.value
#: checker modes: "error" raises, "warn" reports and continues, "off" skips the race detector
CHECK_MODES = ("error", "warn", "off")
_MAX_REPORTS = 20  # problems reported per kernel run in "warn" mode
_PRUNE_EVERY = 4096  # instructions between two prunings of the race detector's access history


class SimWarning(UserWarning):
    """A simulator check downgraded to a warning (``sim_checks="warn"``)."""


@dataclass
class Timing:
    """The schedule of one kernel run on one core."""

    cycles: int
    busy: list[int]  # per pipe (PIPES order), cycles with the launch's shared GM bandwidth
    busy_full: list[int]  # per pipe, GM DMA at the full per-core rate (the roofline's pipe terms)
    gm_read_bytes: int
    gm_write_bytes: int
    start: np.ndarray  # per recorded instruction (the first ``record``): start cycle
    end: np.ndarray  # per recorded instruction: end cycle
    pipe: np.ndarray  # per recorded instruction: pipe index (PIPES)
    problems: list[tuple[str, str]] = field(default_factory=list)  # (location, message) in warn mode
    l2_read_bytes: int = 0  # of gm_read_bytes, the bytes served by the L2 (cann.sim.l2)
    instructions: int = 0  # instructions timed (every one of the run, also past ``record``)
    macs: int = 0  # m*k*n of the mmads plus repeat*mask of the vmlas (padding included)


def _range(buf: int, lo: int, hi: int) -> str:
    return f"{BUFS[buf].upper()} [{lo}, {hi})"


def _prune(acc_w: list, acc_r: list, touched: set[tuple[int, int]], vc: list[list[int]],
           accessing: list[int]) -> None:
    """Drop the accesses of pipe ``q`` that every other accessing pipe ``p`` already knows happened
    before (counter <= vc[p][q]): vector clocks only grow, so no later access compares with them."""
    for b, q in touched:
        known = min((vc[p][q] for p in accessing if p != q), default=None)
        for lst in (acc_w[b][q], acc_r[b][q]):
            cs = lst[0]
            if not cs:
                continue
            cut = len(cs) if known is None else bisect_right(cs, known)
            if cut:
                for x in lst:
                    del x[:cut]


def _any_index(fn, v: tuple, args: tuple[int, ...], bound: int) -> tuple:
    """The footprint of a ``copy_gm_to_ub_reg`` (``fn``: its footprint function) over every register
    value in ``[0, bound)``: its GM range widened to the union of the ranges (timing-only runs)."""
    first, r, w = fn(v, args, 0)
    last = fn(v, args, max(bound - 1, 0))[0]
    return tuple((b, min(lo, lo2), max(hi, hi2), wr) for (b, lo, hi, wr), (_, lo2, hi2, _) in zip(first, last)), r, w


def schedule(instrs: Iterable[isa.Instr], spec: SocSpec, costs: dict, full_costs: dict, args: tuple[int, ...],
             kernel_name: str = "kernel", checks: str = "error", SimError=CannError,
             reg_values: list[int] | None = None, record: int | None = None, l2: tuple[int, ...] = (),
             reg_bounds: bool = False) -> Timing:
    """Time ``instrs`` (already executed and validated) on parallel in-order pipes and check sync.

    ``costs`` / ``full_costs``: mnemonic -> cost function of the field values, with the launch's
    shared GM bandwidth and at the full per-core rate, both with the L2 fractions ``l2`` (per
    kernel argument, units of 1 / :data:`cann.sim.l2.SCALE`), which also give the returned
    ``l2_read_bytes``. ``checks``: one of :data:`CHECK_MODES`.
    ``reg_values``: the register value each ``copy_gm_to_ub_reg`` used, in program order (recorded
    by the functional run), so its GM footprint is the bytes it really read; ``reg_bounds`` (a
    timing-only run: no register values) makes it the bytes any index the last ``ld_idx`` of its
    register allows could read (``[0, bound)``; 0 before any ``ld_idx``). ``instrs`` is iterated
    once (a list or a :class:`cann.sim.spmd.Stream`); ``record``: how many instructions' start/end/pipe
    the returned :class:`Timing` keeps (None: all). Access history every other accessing pipe already
    orders before its current point is dropped, so a synchronized loop keeps bounded history.

    Raises:
        SimError: (``checks != "warn"``) a race, a wait that can never be satisfied (deadlock), a
            flag set twice without a wait, located at the later instruction, or a flag still set when
            the kernel ends (located at its last instruction).
    """
    if checks not in CHECK_MODES:
        raise ValueError(f"checks must be one of {CHECK_MODES}, got {checks!r}")
    race_on = checks != "off"
    warn = checks == "warn"
    problems: list[tuple[str, str]] = []
    fps = footprints(spec)
    scalar = spec.latency.scalar
    rec = sys.maxsize if record is None else record
    start: list[int] = []
    end: list[int] = []
    pipe_of: list[int] = []
    free = [0] * NPIPES
    busy = [0] * NPIPES
    busy_full = [0] * NPIPES
    gm_r = gm_w = l2_r = 0
    l2_fields = {m: read_arg_field(m) for m in ("copy_gm_to_l1", "copy_gm_to_ub", "copy_gm_to_l1_nd2nz")} \
        if l2 else {}
    flags: dict[tuple[int, int, int], tuple[int, list[int], int]] = {}
    cleared: dict[tuple[int, int, int], tuple[int, int]] = {}  # flag -> (cycle, instruction) of its last wait
    cnt = [0] * NPIPES
    vc = [[0] * NPIPES for _ in range(NPIPES)]
    # per buffer, per pipe: [counters, lo, hi, instr index, instr] for writes and for reads
    acc_w = [[([], [], [], [], []) for _ in range(NPIPES)] for _ in BUFS]
    acc_r = [[([], [], [], [], []) for _ in range(NPIPES)] for _ in BUFS]
    # the pipes that access any buffer: only they ever compare with another pipe's history
    accessing = getattr(instrs, "accessing", None)
    if accessing is None:
        accessing = sorted({ins.defn.pipe for ins in instrs if ins.defn.group not in ("sync", "spmd")})
    next_prune = _PRUNE_EVERY
    touched: set[tuple[int, int]] = set()
    owners: list[set[int]] = [set() for _ in BUFS]  # pipes with recorded accesses, per buffer
    fp_cache: dict[str, dict[tuple, tuple]] = {}
    reg_iter = iter(reg_values or ())
    reg_bound: dict[int, int] | None = {} if reg_bounds else None  # register -> its last ld_idx's bound
    macs = 0

    def problem(i: int, ins: isa.Instr, msg: str) -> None:
        where = f"{kernel_name}: instruction {i} `{ins.asm()}`"
        if not warn:
            raise SimError(where, msg)
        if len(problems) < _MAX_REPORTS:
            problems.append((where, msg))
            warnings.warn(f"{where}: {msg}", SimWarning, stacklevel=4)

    def race(i: int, ins: isa.Instr, p: int, buf: int, lo: int, hi: int, w: bool, j: int, a: isa.Instr, q: int,
             lo2: int, hi2: int, w2: bool):
        problem(i, ins, f"data race with instruction {j} `{a.asm()}` ({PIPES[q]}): {PIPES[p]} "
                        f"{'writes' if w else 'reads'} {_range(buf, lo, hi)}, {PIPES[q]} {'writes' if w2 else 'reads'} "
                        f"{_range(buf, lo2, hi2)}, overlapping {_range(buf, max(lo, lo2), min(hi, hi2))}, with no "
                        f"happens-before path (missing set_flag/wait_flag or pipe_barrier)")

    i = -1
    for i, ins in enumerate(instrs):
        d = ins.defn
        v = ins.values
        m = d.mnemonic
        if d.group == "sync":
            if m == "pipe_barrier":
                x = v[0]
                if x == _ALL:
                    t = max(free) + scalar
                    free = [t] * NPIPES
                    p = 0
                    if i < rec:
                        start.append(t - scalar)
                        end.append(t)
                        pipe_of.append(0)
                    busy[0] += scalar
                    busy_full[0] += scalar
                    cnt[0] += 1
                    if race_on:
                        j = [max(col) for col in zip(*vc)]
                        j[0] = max(j[0], cnt[0])
                        vc = [list(j) for _ in range(NPIPES)]
                        for b, q in touched:  # everything before is ordered before everything after
                            for lst in (acc_w[b][q], acc_r[b][q]):
                                for x_ in lst:
                                    x_.clear()
                        touched.clear()
                        for o in owners:
                            o.clear()
                    continue
                p = x
            else:
                sp, dp, ev = v
                p = sp if m == "set_flag" else dp
            s = free[p]
            if m == "wait_flag":
                key = (sp, dp, ev)
                f = flags.pop(key, None)
                if f is None:
                    problem(i, ins, f"deadlock: wait_flag {PIPES[sp]}->{PIPES[dp]} event {ev} waits for a flag "
                                    f"that no earlier set_flag sets (pipe {PIPES[dp]} would block forever)")
                else:
                    if f[0] > s:
                        s = f[0]
                    cleared[key] = (s, i)
                    if race_on:
                        row = vc[dp]
                        snap = f[1]
                        for q in range(NPIPES):
                            if snap[q] > row[q]:
                                row[q] = snap[q]
            e = s + scalar
            free[p] = e
            if i < rec:
                start.append(s)
                end.append(e)
                pipe_of.append(p)
            busy[p] += scalar
            busy_full[p] += scalar
            cnt[p] += 1
            vc[p][p] = cnt[p]
            if m == "set_flag":
                key = (sp, dp, ev)
                if key in flags:
                    problem(i, ins, f"set_flag {PIPES[sp]}->{PIPES[dp]} event {ev} is already set by instruction "
                                    f"{flags[key][2]} with no wait_flag in between (an event id set twice)")
                elif key in cleared and e < cleared[key][0]:
                    problem(i, ins, f"set_flag {PIPES[sp]}->{PIPES[dp]} event {ev} sets the flag at cycle {e}, before "
                                    f"wait_flag instruction {cleared[key][1]} clears its previous setting at cycle "
                                    f"{cleared[key][0]} (the two settings merge: an event id reused too early)")
                flags[key] = (e, list(vc[sp]), i)
            continue

        p = d.pipe
        c = costs[m](v)
        s = free[p]
        e = s + c
        free[p] = e
        if i < rec:
            start.append(s)
            end.append(e)
            pipe_of.append(p)
        busy[p] += c
        fn = fps[m]
        if d.group == "dma_reg":
            busy_full[p] += full_costs[m](v)
            if reg_bound is None:
                accs, r, w = fn(v, args, next(reg_iter, 0))
            else:
                accs, r, w = _any_index(fn, v, args, reg_bound.get(v[7], 1))
            gm_r += r
        elif d.group == "dma" or d.group == "nd2nz":
            busy_full[p] += full_costs[m](v)
            accs, r, w = fn(v, args)
            gm_r += r
            gm_w += w
            if l2_fields and r:
                a = v[l2_fields[m]]
                if a < len(l2):
                    l2_r += r * l2[a] // L2_SCALE
        else:
            busy_full[p] += c
            if m == "mmad":
                macs += v[4] * v[5] * v[6]
            elif m == "vmla":  # one multiply-accumulate per active lane of each repeat
                macs += v[4] * v[5]
            elif reg_bound is not None and m == "ld_idx":
                reg_bound[v[0]] = v[3]
            if not race_on:  # its footprint serves the race detector only
                continue
            cache = fp_cache.get(m)
            if cache is None:
                cache = fp_cache[m] = {}
            accs = cache.get(v)
            if accs is None:
                accs = fn(v, args)[0]
                if len(cache) < 8192:
                    cache[v] = accs
        if not race_on:
            continue
        cnt[p] += 1
        k = cnt[p]
        row = vc[p]
        row[p] = k
        if i >= next_prune:
            next_prune = i + _PRUNE_EVERY
            _prune(acc_w, acc_r, touched, vc, accessing)
        for buf, lo, hi, wr in accs:
            if hi <= lo:
                continue
            wb = acc_w[buf]
            rb = acc_r[buf]
            own = owners[buf]
            for q in own:
                if q == p:
                    continue
                known = row[q]
                for (cs, los, his, idx, ins2), w2 in (((wb[q], True), (rb[q], False)) if wr else ((wb[q], True),)):
                    if not cs or cs[-1] <= known:
                        continue
                    first = bisect_right(cs, known)
                    if len(cs) - first > 64:  # a long unordered tail: compare in numpy
                        hit = np.flatnonzero((np.asarray(los[first:]) < hi) & (np.asarray(his[first:]) > lo))
                        if hit.size:
                            t = first + int(hit[0])
                            race(i, ins, p, buf, lo, hi, wr, idx[t], ins2[t], q, los[t], his[t], w2)
                        continue
                    for t in range(first, len(cs)):
                        if los[t] < hi and lo < his[t]:
                            race(i, ins, p, buf, lo, hi, wr, idx[t], ins2[t], q, los[t], his[t], w2)
                            break
            lst = (wb if wr else rb)[p]
            lst[0].append(k)
            lst[1].append(lo)
            lst[2].append(hi)
            lst[3].append(i)
            lst[4].append(ins)
            if p not in own:
                own.add(p)
                touched.add((buf, p))
    for (sp, dp, ev), (_, _, j) in sorted(flags.items(), key=lambda kv: kv[1][2]):
        problem(i, ins, f"set_flag {PIPES[sp]}->{PIPES[dp]} event {ev} of instruction {j} is never waited: the "
                        f"kernel ends with the event set (a leaked event id)")
    return Timing(max(free) if i >= 0 else 0, busy, busy_full, gm_r, gm_w, np.array(start, np.int64),
                  np.array(end, np.int64), np.array(pipe_of, np.int8), problems, l2_r, i + 1, macs)


#: schedules of earlier runs, least recently used first: ``(id(instrs), args, checks, record, active
#: cores, L2 fractions, spec, reg_bounds) -> (instrs, Timing)``; the stream object is held, so its id is not reused
#: meanwhile
_SCHEDULES: OrderedDict[tuple, tuple] = OrderedDict()
#: the most instruction records (start, end, pipe: 17 bytes each) all cached schedules hold together
SCHEDULE_RECORDS = 1 << 22
_held_records = 0


def cached_schedule(instrs: Iterable[isa.Instr], spec: SocSpec, costs: dict, full_costs: dict,
                    args: tuple[int, ...], active_cores: int, kernel_name: str = "kernel", checks: str = "error",
                    SimError=CannError, reg_values: list[int] | None = None,
                    record: int | None = None, l2: tuple[int, ...] = (), reg_bounds: bool = False) -> Timing:
    """:func:`schedule`, reusing the result of an earlier call on the same ``instrs`` object (a
    decoded program or a :class:`cann.sim.spmd.Stream`, which do not change), argument bases, SoC,
    ``checks``, ``record``, ``active_cores``, ``l2`` and ``reg_bounds`` (``costs`` must be the cost functions of
    ``spec`` with GM bandwidth shared among ``active_cores`` cores and the L2 fractions ``l2``).
    A schedule depends on nothing else: not
    on data, except through register-addressed copies (``reg_values`` non-empty: never cached), and
    ``checks="warn"`` reports its problems on every run (never cached). A run that raises caches
    nothing. Repeated runs of a model pay for timing once.

    Raises:
        SimError: as :func:`schedule`.
    """
    global _held_records
    if checks == "warn" or reg_values:
        return schedule(instrs, spec, costs, full_costs, args, kernel_name, checks, SimError, reg_values, record, l2,
                        reg_bounds)
    key = (id(instrs), tuple(args), checks, record, active_cores, l2, spec, reg_bounds)
    hit = _SCHEDULES.get(key)
    if hit is not None and hit[0] is instrs:
        _SCHEDULES.move_to_end(key)
        return hit[1]
    t = schedule(instrs, spec, costs, full_costs, args, kernel_name, checks, SimError, reg_values, record, l2,
                 reg_bounds)
    old = _SCHEDULES.pop(key, None)
    if old is not None:
        _held_records -= len(old[1].start)
    _SCHEDULES[key] = (instrs, t)
    _held_records += len(t.start)
    while _held_records > SCHEDULE_RECORDS and _SCHEDULES:
        _, (_, dropped) = _SCHEDULES.popitem(last=False)
        _held_records -= len(dropped.start)
    return t


def clear_schedules() -> None:
    """Forget every cached schedule (the next run of any kernel times it afresh: cold-run
    measurements, and tests comparing two ways of computing a schedule)."""
    global _held_records
    _SCHEDULES.clear()
    _held_records = 0
