"""Which instruction each ``loop_step`` of a kernel's static code advances, and with which loop.

A ``loop_step field_no, step`` (:mod:`cann.hw.isa`) applies to the next *work* instruction after it:
the first one whose group is neither ``sync`` (set_flag, wait_flag, pipe_barrier) nor ``spmd``
(loop and block control, other loop_steps), so synchronisation inserted into a loop body does not
change what it applies to. It steps with its *owner*, the innermost ``loop_begin`` enclosing the
``loop_step`` itself; the target may sit in a loop nested in the owner (a field of an inner loop's
instruction moving with the outer loop) but not past a ``block_if`` / ``block_endif`` (cores skipping
a section would step another instruction) nor past the owner's ``loop_end``.

A ``loop_clamp field_no, step, offset, lo, hi, up`` resolves the same way, its owner ``up`` loops out
from the innermost one enclosing it (an instruction of a nested loop moving with an outer loop);
iteration ``i`` of its owner advances the field by ``clamp(offset + i*step, lo, hi)`` instead of
``i*step`` (:meth:`Step.at`).

One resolution shared by the simulator (:mod:`cann.sim.spmd`), the generation analysis of
multi-buffering (:mod:`cann.lowering.generations`), the flag synchronisation
(:mod:`cann.passes.sync_deps`) and the checks of the ascend dialect.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

from cann.hw import isa

_SKIP = ("sync", "spmd")
_STEPS = ("loop_step", "loop_clamp")


class Step(NamedTuple):
    """One ``loop_step`` (``clamp`` None) or ``loop_clamp`` (``clamp`` = ``(offset, lo, hi)``) applying
    to an instruction: its ``field`` index, ``step`` and ``owner`` (index of the owner loop_begin)."""

    field: int
    step: int
    owner: int
    clamp: tuple[int, int, int] | None = None

    def at(self, i: int) -> int:
        """How far iteration ``i`` of the owner loop advances the field."""
        if self.clamp is None:
            return i * self.step
        off, lo, hi = self.clamp
        return min(max(off + i * self.step, lo), hi)

    def corners(self, count: int) -> set[int]:
        """Iterations of a loop of ``count`` iterations among which the advance takes its extremes
        and between which it is linear: the ends and, for a clamp, where it starts and stops
        saturating."""
        out = {0, max(count - 1, 0)}
        if self.clamp is not None and self.step:
            off, lo, hi = self.clamp
            for b in (lo, hi):  # the iterations around where off + i*step crosses b
                q = (b - off) // self.step
                out |= {min(max(q + d, 0), max(count - 1, 0)) for d in (0, 1)}
        return out


def variants(ins: isa.Instr, steps, counts: dict[int, int]) -> list[isa.Instr]:
    """``ins`` at every combination of the :meth:`Step.corners` of its owner loops (``counts``: owner
    -> trip count), its static values included: any quantity linear in the fields (a footprint's
    bounds) takes its extremes over all iterations among these. One instruction when no step
    applies."""
    owners = list(dict.fromkeys(s.owner for s in steps))
    if not owners:
        return [ins]
    corners = []
    for o in owners:
        c = set()
        for s in steps:
            if s.owner == o:
                c |= s.corners(counts.get(o, 1))
        corners.append(sorted(c))
    out = []
    for combo in itertools.product(*corners):
        it = dict(zip(owners, combo))
        values = list(ins.values)
        for s in steps:
            values[s.field] += s.at(it[s.owner])
        out.append(isa.Instr(ins.defn, tuple(values)))
    return out


def step_targets(prog: list) -> dict[int, list[Step]]:
    """``{target index: [Step, ...]}`` for the loop_steps and loop_clamps of ``prog`` (a list of
    :class:`cann.hw.isa.Instr`), in program order per target.

    Raises:
        ValueError: a loop_step outside a loop, with no work instruction after it in its loop (or
            one past a block_if / block_endif), or naming a field its target does not have or that
            is not steppable (:func:`cann.hw.isa.step_fields`; for a loop_clamp
            :func:`cann.hw.isa.clamp_fields`), or a loop_clamp with ``lo > hi``, naming the instruction index.
    """
    out: dict[int, list[Step]] = {}
    loops: list[int] = []
    pending: list[tuple] = []  # (index, field, step, owner, clamp, innermost loop at the step)
    for i, ins in enumerate(prog):
        m = ins.defn.mnemonic
        if m in _STEPS:
            if not loops:
                raise ValueError(f"instruction {i}: {m} outside a loop_begin .. loop_end")
            clamp, owner = None, loops[-1]
            if m == "loop_clamp":
                clamp, up = tuple(ins.values[2:5]), ins.values[5]
                if clamp[1] > clamp[2]:
                    raise ValueError(f"instruction {i}: loop_clamp lo {clamp[1]} > hi {clamp[2]}")
                if not 0 <= up < len(loops):
                    raise ValueError(f"instruction {i}: loop_clamp up {up}, but {len(loops)} loop(s) enclose it")
                owner = loops[-1 - up]
            pending.append((i, ins.values[0], ins.values[1], owner, clamp, loops[-1]))
            continue
        if m == "loop_begin":
            loops.append(i)
        elif m == "loop_end":
            if pending and loops and pending[0][5] == loops[-1]:
                raise ValueError(f"instruction {pending[0][0]}: {prog[pending[0][0]].defn.mnemonic} with no work "
                                 f"instruction after it in its loop (loop_end at {i})")
            if loops:
                loops.pop()
        elif m in ("block_if", "block_endif") and pending:
            raise ValueError(f"instruction {pending[0][0]}: {prog[pending[0][0]].defn.mnemonic} applying across the "
                             f"{m} at {i}")
        if ins.defn.group in _SKIP or not pending:
            continue
        names = ins.defn.field_names
        for j, fld, step, owner, clamp, _ in pending:
            what = "loop_step" if clamp is None else "loop_clamp"
            allowed = isa.step_fields(ins.defn) if clamp is None else isa.clamp_fields(ins.defn)
            if not 0 <= fld < len(names):
                raise ValueError(f"instruction {j}: {what} field {fld} of {m}, which has {len(names)} fields")
            if fld not in allowed:
                ok = ", ".join(names[k] for k in sorted(allowed)) or "none"
                kind = "steppable" if clamp is None else "clampable"
                raise ValueError(f"instruction {j}: {what} field {fld} ({names[fld]}) of {m} is not {kind} "
                                 f"({kind}: {ok})")
            out.setdefault(i, []).append(Step(fld, step, owner, clamp))
        pending = []
    if pending:
        raise ValueError(f"instruction {pending[0][0]}: {prog[pending[0][0]].defn.mnemonic} with no work instruction "
                         f"after it in its loop")
    return out
