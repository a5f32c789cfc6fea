"""SPMD specialization: the instruction stream one core of a ``block_dim`` launch executes.

A kernel runs the same code on every core (DESIGN.md principle 5). Block-dependent control and
hardware loops are resolved by each core's scalar unit before the other pipes see the
instructions:

* ``block_offset arg, stride`` moves kernel argument ``arg``'s GM base by ``block_idx * stride``
  bytes (``block_offset_mod arg, stride, modulo`` by ``(block_idx % modulo) * stride``); ``block_if lo, hi`` ... ``block_endif`` keeps what is between them only on cores with
  ``lo <= block_idx < hi``;
* ``loop_begin count`` ... ``loop_end`` repeats its body ``count`` times; a ``loop_offset arg,
  stride`` in the body moves argument ``arg``'s GM addresses by ``i * stride`` bytes in iteration
  ``i``, so the body is written once however many tiles it walks over.

The control instructions stay in the stream (they cost scalar cycles). :func:`stream` gives a core's
instructions as a :class:`Stream` that walks the loop structure lazily, so a loop is never expanded
into memory proportional to its trip count.

:func:`check_control` validates a kernel's control structure and :func:`dynamic_instructions`
counts the instructions a launch executes over all its blocks from the loop counts and block
ranges, in time proportional to the code's size (never expanding a loop), so a runner can refuse
an absurd amount of work before it allocates or expands anything.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache

from cann.hw import isa


@cache
def _gm_fields(defn: isa.InstrDef) -> tuple[tuple[int, int], ...]:
    """(arg field index, byte offset field index) of each GM operand of an instruction."""
    names = defn.field_names
    return tuple((names.index(a), names.index(o)) for a, o in (("src_arg", "src"), ("dst_arg", "dst"))
                 if a in names and o in names)


def _shifted(ins: isa.Instr, shift: dict[int, int]) -> isa.Instr:
    fields = _gm_fields(ins.defn)
    if not fields:
        return ins
    values = list(ins.values)
    for a, o in fields:
        values[o] += shift.get(values[a], 0)
    return isa.Instr(ins.defn, tuple(values))


def _tree(prog: list[isa.Instr]) -> list:
    """``prog`` (no block control) as a list of instructions and loops ``(loop_begin, its
    loop_offset instructions, ((arg, stride), ...), body tree, loop_end)``; O(code size)."""
    out: list = []
    i = 0
    while i < len(prog):
        ins = prog[i]
        m = ins.defn.mnemonic
        if m == "loop_end":
            raise ValueError(f"instruction {i}: loop_end without loop_begin")
        if m != "loop_begin":
            out.append(ins)
            i += 1
            continue
        depth, j = 1, i + 1
        while j < len(prog) and depth:
            depth += {"loop_begin": 1, "loop_end": -1}.get(prog[j].defn.mnemonic, 0)
            j += 1
        if depth:
            raise ValueError(f"instruction {i}: loop_begin without loop_end")
        offsets: dict[int, int] = {}
        offs, inner, d = [], [], 0
        for b in prog[i + 1:j - 1]:
            bm = b.defn.mnemonic
            if bm == "loop_offset" and d == 0:
                offsets[b.arg] = offsets.get(b.arg, 0) + b.stride
                offs.append(b)  # costed once
                continue
            d += {"loop_begin": 1, "loop_end": -1}.get(bm, 0)
            inner.append(b)
        out.append((ins, tuple(offs), tuple(offsets.items()), _tree(inner), prog[j - 1]))
        i = j
    return out


def _walk(items: list, shift: dict[int, int] | None) -> Iterator[isa.Instr]:
    for x in items:
        if type(x) is not tuple:
            yield x if not shift else _shifted(x, shift)
            continue
        begin, offs, strides, body, end = x
        yield from offs  # the loop_offset instructions run once, before the loop
        yield begin
        if body:  # an empty body: nothing to repeat, however many times
            if not strides:
                for _ in range(begin.count):
                    yield from _walk(body, shift)
            else:
                for it in range(begin.count):
                    s = dict(shift) if shift else {}
                    for a, st in strides:
                        s[a] = s.get(a, 0) + it * st
                    yield from _walk(body, s)
        yield end


class Stream:
    """The instruction stream of one core, produced lazily: every iteration walks the loop
    structure again (O(nesting depth) memory, never proportional to a trip count).

    ``code``: the core's static instructions (block control resolved, loops not expanded)."""

    def __init__(self, code: list[isa.Instr]):
        self.code = code
        self._tree = _tree(code)

    def __iter__(self) -> Iterator[isa.Instr]:
        return _walk(self._tree, None)


_OPEN = {"loop_begin": "loop_end", "block_if": "block_endif"}
_CLOSE = {v: k for k, v in _OPEN.items()}


def check_control(prog: list[isa.Instr], num_args: int) -> None:
    """Check the SPMD control instructions of a kernel taking ``num_args`` GM arguments.

    ``loop_begin``/``loop_end`` and ``block_if``/``block_endif`` nest properly with each other,
    loop counts are >= 0, ``block_offset``/``block_offset_mod``/``loop_offset`` name an existing
    argument and a ``block_offset_mod`` modulo is >= 1.

    Raises:
        ValueError: the first violation, naming the instruction index.
    """
    stack: list[tuple[str, int]] = []
    for i, ins in enumerate(prog):
        m = ins.defn.mnemonic
        if m in _OPEN:
            if m == "loop_begin" and ins.count < 0:
                raise ValueError(f"instruction {i}: loop_begin count {ins.count} is negative")
            stack.append((m, i))
        elif m in _CLOSE:
            if not stack or stack[-1][0] != _CLOSE[m]:
                inner = f" inside the {stack[-1][0]} of instruction {stack[-1][1]}" if stack else ""
                raise ValueError(f"instruction {i}: {m} without a matching {_CLOSE[m]}{inner}")
            stack.pop()
        elif m in ("block_offset", "block_offset_mod", "loop_offset") and not 0 <= ins.arg < num_args:
            raise ValueError(f"instruction {i}: {m} of kernel argument {ins.arg}, the kernel takes {num_args}")
        elif m == "block_offset_mod" and ins.modulo < 1:
            raise ValueError(f"instruction {i}: block_offset_mod modulo {ins.modulo} (>= 1 expected)")
    if stack:
        m, i = stack[-1]
        raise ValueError(f"instruction {i}: {m} without a matching {_OPEN[m]}")


def dynamic_instructions(prog: list[isa.Instr], block_dim: int) -> int:
    """Instructions executed by a launch of ``prog`` on ``block_dim`` blocks, summed over the blocks
    (what :func:`stream` yields per block), computed from the loop counts and the block_if
    ranges in one pass over ``prog``. ``prog`` must pass :func:`check_control`."""
    total = 0
    mult, lo, hi = 1, 0, block_dim  # product of the enclosing loops' counts; blocks executing here
    once = 1  # the product outside the innermost loop: its control instructions run once per entry
    stack: list[tuple[int, int, int, int]] = []
    for ins in prog:
        m = ins.defn.mnemonic
        if m in _OPEN:
            stack.append((mult, lo, hi, once))
            if m == "block_if":
                lo, hi = max(lo, ins.lo), min(hi, ins.hi)
        blocks = max(0, hi - lo)
        if m == "loop_begin":
            total += mult * blocks
            once, mult = mult, mult * ins.count
        elif m in _CLOSE:
            mult, lo, hi, once = stack.pop()
            total += mult * max(0, hi - lo) if m == "loop_end" else mult * blocks
        elif m == "loop_offset":
            total += once * blocks
        else:
            total += mult * blocks
    return total


def stream(prog: list[isa.Instr], block_idx: int,
           args: tuple[int, ...]) -> tuple[list[isa.Instr] | Stream, tuple[int, ...]]:
    """``(instructions, args)`` of core ``block_idx``: ``prog`` itself when it has no SPMD control,
    else a re-iterable :class:`Stream` expanding the loops lazily (block control resolved and
    the structure checked here, in time proportional to the code).

    Raises:
        ValueError: unbalanced block_if/block_endif or loop_begin/loop_end, or a block_offset
            naming a missing argument.
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
        elif m in ("block_offset", "block_offset_mod"):
            if not 0 <= ins.arg < len(bases):
                raise ValueError(f"instruction {i}: {m} of missing kernel argument {ins.arg}")
            if m == "block_offset_mod" and ins.modulo < 1:
                raise ValueError(f"instruction {i}: block_offset_mod modulo {ins.modulo} (>= 1 expected)")
            bases[ins.arg] += (block_idx if m == "block_offset" else block_idx % ins.modulo) * ins.stride
        out.append(ins)
    if depth:
        raise ValueError("block_if without block_endif")
    if any(ins.defn.mnemonic in ("loop_begin", "loop_end") for ins in out):
        return Stream(out), tuple(bases)
    return out, tuple(bases)


def specialize(prog: list[isa.Instr], block_idx: int, args: tuple[int, ...]) -> tuple[list[isa.Instr], tuple[int, ...]]:
    """``(instructions, args)`` of core ``block_idx``, loops expanded into a list (:func:`stream`
    materialized: for tests and small programs; the simulator runs the stream).

    Raises:
        ValueError: as :func:`stream`.
    """
    instrs, bases = stream(prog, block_idx, args)
    return list(instrs), bases
