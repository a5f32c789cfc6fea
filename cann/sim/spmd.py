"""SPMD specialization: the instruction stream one core of a ``block_dim`` launch executes.

A kernel runs the same code on every core (DESIGN.md principle 5). Block-dependent control is
resolved by each core's scalar unit before the other pipes see the instructions:
``block_offset arg, stride`` moves kernel argument ``arg``'s GM base by ``block_idx * stride``
bytes, and ``block_if lo, hi`` ... ``block_endif`` keeps what is between them only on cores with
``lo <= block_idx < hi``. The control instructions stay in the stream (they cost scalar cycles).
"""

from __future__ import annotations

from cann.hw import isa


def specialize(prog: list[isa.Instr], block_idx: int, args: tuple[int, ...]) -> tuple[list[isa.Instr], tuple[int, ...]]:
    """``(instructions, args)`` of core ``block_idx``.

    Raises:
        ValueError: unbalanced block_if/block_endif, or a block_offset naming a missing argument.
    """
    if not any(ins.defn.group == "spmd" for ins in prog):
        return prog, args
    out: list[isa.Instr] = []
    bases = list(args)
    skip_depth = 0
    depth = 0
    for i, ins in enumerate(prog):
        m = ins.defn.mnemonic
        if m == "block_if":
            depth += 1
            if skip_depth or not (ins.lo <= block_idx < ins.hi):
                skip_depth += 1
                continue
        elif m == "block_endif":
            if depth == 0:
                raise ValueError(f"instruction {i}: block_endif without block_if")
            depth -= 1
            if skip_depth:
                skip_depth -= 1
                continue
        elif skip_depth:
            continue
        elif m == "block_offset":
            if not 0 <= ins.arg < len(bases):
                raise ValueError(f"instruction {i}: block_offset of missing kernel argument {ins.arg}")
            bases[ins.arg] += block_idx * ins.stride
        out.append(ins)
    if depth:
        raise ValueError("block_if without block_endif")
    return out, tuple(bases)
