"""Which instruction each ``loop_step`` of a kernel's static code advances, and with which loop.

A ``loop_step field_no, step`` (:mod:`cann.hw.isa`) applies to the next *work* instruction after it:
the first one whose group is neither ``sync`` (set_flag, wait_flag, pipe_barrier) nor ``spmd``
(loop and block control, other loop_steps), so synchronisation inserted into a loop body does not
change what it applies to. It steps with its *owner*, the innermost ``loop_begin`` enclosing the
``loop_step`` itself; the target may sit in a loop nested in the owner (a field of an inner loop's
instruction moving with the outer loop) but not past a ``block_if`` / ``block_endif`` (cores skipping
a section would step another instruction) nor past the owner's ``loop_end``.

One resolution shared by the simulator (:mod:`cann.sim.spmd`), the generation analysis of
multi-buffering (:mod:`cann.lowering.generations`) and the checks of the ascend dialect.
"""

from __future__ import annotations

from cann.hw import isa

_SKIP = ("sync", "spmd")


def step_targets(prog: list) -> dict[int, list[tuple[int, int, int]]]:
    """``{target index: [(field index, step, owner loop_begin index), ...]}`` for the loop_steps of
    ``prog`` (a list of :class:`cann.hw.isa.Instr`), in program order per target.

    Raises:
        ValueError: a loop_step outside a loop, with no work instruction after it in its loop (or
            one past a block_if / block_endif), or naming a field its target does not have or that
            is not steppable (:func:`cann.hw.isa.step_fields`), naming the instruction index.
    """
    out: dict[int, list[tuple[int, int, int]]] = {}
    loops: list[int] = []
    pending: list[tuple[int, int, int, int]] = []  # (loop_step index, field, step, owner)
    for i, ins in enumerate(prog):
        m = ins.defn.mnemonic
        if m == "loop_step":
            if not loops:
                raise ValueError(f"instruction {i}: loop_step outside a loop_begin .. loop_end")
            pending.append((i, ins.values[0], ins.values[1], loops[-1]))
            continue
        if m == "loop_begin":
            loops.append(i)
        elif m == "loop_end":
            if pending and loops and pending[0][3] == loops[-1]:
                raise ValueError(f"instruction {pending[0][0]}: loop_step with no work instruction after it "
                                 f"in its loop (loop_end at {i})")
            if loops:
                loops.pop()
        elif m in ("block_if", "block_endif") and pending:
            raise ValueError(f"instruction {pending[0][0]}: loop_step applying across the {m} at {i}")
        if ins.defn.group in _SKIP or not pending:
            continue
        names = ins.defn.field_names
        steppable = isa.step_fields(ins.defn)
        for j, fld, step, owner in pending:
            if not 0 <= fld < len(names):
                raise ValueError(f"instruction {j}: loop_step field {fld} of {m}, which has {len(names)} fields")
            if fld not in steppable:
                ok = ", ".join(names[k] for k in sorted(steppable)) or "none"
                raise ValueError(f"instruction {j}: loop_step field {fld} ({names[fld]}) of {m} is not steppable "
                                 f"(steppable: {ok})")
            out.setdefault(i, []).append((fld, step, owner))
        pending = []
    if pending:
        raise ValueError(f"instruction {pending[0][0]}: loop_step with no work instruction after it in its loop")
    return out
