"""SPMD specialization: the instruction stream one core of a ``block_dim`` launch executes.

A kernel runs the same code on every core (DESIGN.md principle 5). Block-dependent control and
hardware loops are resolved by each core's scalar unit before the other pipes see the
instructions:

* ``block_offset arg, stride`` moves kernel argument ``arg``'s GM base by ``block_idx * stride``
  bytes (``block_offset_mod arg, stride, modulo`` by ``(block_idx % modulo) * stride``,
  ``block_offset_div arg, stride, divisor`` by ``(block_idx // divisor) * stride``: together a
  two-level split in one code); ``block_if lo, hi`` ... ``block_endif`` keeps what is between them only on cores with
  ``lo <= block_idx < hi``;
* ``loop_begin count`` ... ``loop_end`` repeats its body ``count`` times; a ``loop_offset arg,
  stride`` in the body moves argument ``arg``'s GM addresses by ``i * stride`` bytes in iteration
  ``i``, so the body is written once however many tiles it walks over; a ``loop_rotate space, base,
  size, copies, step`` remaps the on-chip addresses of a multi-buffered region to copy
  ``(c + i*step) % copies`` and a ``loop_rotate_event`` the event ids of flags in the same way
  (several levels of nesting add their ``i*step``); a ``loop_step field_no, step`` advances that field
  of the next work instruction (an on-chip address after any rotation, img2col's ``m_start``) by
  ``i*step`` (:mod:`cann.hw.loops`: the target skips sync and control instructions, so inserted
  synchronisation does not move it), a ``loop_clamp field_no, step, offset, lo, hi`` by
  ``clamp(offset + i*step, lo, hi)`` (the border tiles of a loop in its one body).

The control instructions stay in the stream (they cost scalar cycles). :func:`stream` gives a core's
instructions as a :class:`Stream` that walks the loop structure lazily, so a loop is never expanded
into memory proportional to its trip count.

:func:`check_control` validates a kernel's control structure and :func:`dynamic_instructions`
counts the instructions a launch executes over all its blocks from the loop counts and block
ranges, in time proportional to the code's size (never expanding a loop), so a runner can refuse
an absurd amount of work before it allocates or expands anything.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterator
from functools import cache

from cann.hw import isa, loops


@cache
def gm_fields(defn: isa.InstrDef) -> tuple[tuple[int, int], ...]:
    """(arg field index, byte offset field index) of each GM operand of an instruction."""
    names = defn.field_names
    return tuple((names.index(a), names.index(o)) for a, o in (("src_arg", "src"), ("dst_arg", "dst"))
                 if a in names and o in names)


def _shifted(ins: isa.Instr, shift: dict[int, int]) -> isa.Instr:
    fields = gm_fields(ins.defn)
    if not fields:
        return ins
    values = list(ins.values)
    for a, o in fields:
        values[o] += shift.get(values[a], 0)
    return isa.Instr(ins.defn, tuple(values))


#: the two-level block offsets and the field holding their group size (>= 1)
_GROUPED = {"block_offset_mod": "modulo", "block_offset_div": "divisor"}


def _group_size(ins: isa.Instr) -> int:
    return getattr(ins, _GROUPED[ins.defn.mnemonic])


_CONTROL = ("loop_offset", "loop_rotate", "loop_rotate_event", "loop_step", "loop_clamp")  # run once per loop entry


class _Stepped:
    """A body instruction some ``loop_step`` s / ``loop_clamp`` s advance: ``steps`` ``((field, loop
    level, cann.hw.loops.Step), ...)`` (level: nesting depth of the owner loop, 0 = outermost);
    ``defn`` is the instruction's."""

    __slots__ = ("ins", "steps", "defn")

    def __init__(self, ins: isa.Instr, steps: tuple):
        self.ins, self.steps, self.defn = ins, steps, ins.defn


def _with_steps(code: list[isa.Instr]) -> list:
    """``code`` with every loop_step target wrapped as a :class:`_Stepped` (:func:`cann.hw.loops.step_targets`)."""
    targets = loops.step_targets(code)
    if not targets:
        return code
    level: dict[int, int] = {}
    depth = 0
    for i, ins in enumerate(code):
        m = ins.defn.mnemonic
        if m == "loop_begin":
            level[i] = depth
            depth += 1
        elif m == "loop_end":
            depth -= 1
    out = list(code)
    for t, steps in targets.items():
        out[t] = _Stepped(code[t], tuple((s.field, level[s.owner], s) for s in steps if s.step or s.clamp is not None))
    return out


_FLAGS = ("set_flag", "wait_flag")


def _rotation_key(ins: isa.Instr) -> tuple[tuple, int]:
    """``(key, step)`` of a loop_rotate (``("a", space, base, size, copies)``) or a
    loop_rotate_event (``("e", src_pipe, dst_pipe, base, copies)``)."""
    v = ins.values
    if ins.defn.mnemonic == "loop_rotate":
        return ("a", v[0], v[1], v[2], v[3]), v[4]
    return ("e", v[0], v[1], v[2], v[3]), v[4]


def _rotated(ins: isa.Instr, rot: tuple) -> isa.Instr:
    """``ins`` with its on-chip addresses (or its flag's event) remapped by the active rotations
    ``rot`` (``((key, phase), ...)``, phase in 0..copies-1): the first rotation whose region holds
    an address moves it to copy ``(c + phase) % copies``."""
    m = ins.defn.mnemonic
    v = ins.values
    if m in _FLAGS:
        sp, dp, e = v
        for (kind, a, b, base, copies), ph in rot:
            if kind == "e" and a == sp and b == dp and base <= e < base + copies:
                return isa.Instr(ins.defn, (sp, dp, base + (e - base + ph) % copies))
        return ins
    fields = isa.address_fields(ins)
    if not fields:
        return ins
    values = None
    for fi, space in fields:
        addr = v[fi]
        for (kind, sp, base, size, copies), ph in rot:
            if kind == "a" and sp == space and base <= addr < base + copies * size:
                c, off = divmod(addr - base, size)
                if values is None:
                    values = list(v)
                values[fi] = base + (c + ph) % copies * size + off
                break
    return ins if values is None else isa.Instr(ins.defn, tuple(values))


def _tree(prog: list[isa.Instr]) -> list:
    """``prog`` (no block control) as a list of instructions and loops ``(loop_begin, its
    loop_offset / loop_rotate instructions, ((arg, stride), ...), ((rotation key, step), ...),
    body tree, loop_end)``; O(code size)."""
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
        rotations: dict[tuple, int] = {}
        offs, inner, d = [], [], 0
        for b in prog[i + 1:j - 1]:
            bm = b.defn.mnemonic
            if bm in _CONTROL and d == 0:
                if bm == "loop_offset":
                    offsets[b.arg] = offsets.get(b.arg, 0) + b.stride
                elif bm not in ("loop_step", "loop_clamp"):  # they act through their target (_Stepped)
                    key, step = _rotation_key(b)
                    rotations[key] = rotations.get(key, 0) + step
                offs.append(b)  # costed once
                continue
            d += {"loop_begin": 1, "loop_end": -1}.get(bm, 0)
            inner.append(b)
        rots = tuple((k, st % k[4]) for k, st in rotations.items() if st % k[4])
        out.append((ins, tuple(offs), tuple(offsets.items()), rots, _tree(inner), prog[j - 1]))
        i = j
    return out


def _walk(items: list, shift: dict[int, int] | None, rot: tuple, cache: dict,
          its: tuple = ()) -> Iterator[isa.Instr]:
    """The instructions of ``items`` with GM ``shift`` (arg -> bytes) and active rotations ``rot``
    (sorted ``((key, phase), ...)``); ``cache``: rotation state -> {id(instruction): rotated one},
    so a rotated body builds each of its instructions once per state, not once per iteration;
    ``its``: the iteration of each enclosing loop, outermost first (for ``loop_step``)."""
    rc = cache.get(rot) if rot else None
    if rot and rc is None:
        rc = cache[rot] = {}
    for x in items:
        if type(x) is _Stepped:  # rotated as its static form (cached), then advanced by its steps
            y = x.ins
            if rc is not None:
                z = rc.get(id(y))
                if z is None:
                    z = rc[id(y)] = _rotated(y, rot)
                y = z
            if x.steps:
                values = list(y.values)
                for fld, lvl, step in x.steps:
                    values[fld] += step.at(its[lvl])
                y = isa.Instr(y.defn, tuple(values))
            yield y if not shift else _shifted(y, shift)
            continue
        if type(x) is not tuple:
            if rc is not None:
                y = rc.get(id(x))
                if y is None:
                    y = rc[id(x)] = _rotated(x, rot)
                x = y
            yield x if not shift else _shifted(x, shift)
            continue
        begin, offs, strides, rots, body, end = x
        yield from offs  # the loop_offset / loop_rotate instructions run once, before the loop
        yield begin
        if body:  # an empty body: nothing to repeat, however many times
            if not strides and not rots:
                for it in range(begin.count):
                    yield from _walk(body, shift, rot, cache, its + (it,))
            else:
                states = [rot]
                if rots:  # the rotation state repeats with the copies' lcm: computed once per entry
                    period = math.lcm(*(k[4] for k, _ in rots))
                    states = []
                    for it in range(min(begin.count, period)):
                        ph = dict(rot)
                        for k, st in rots:
                            ph[k] = (ph.get(k, 0) + it * st) % k[4]
                        states.append(tuple(sorted((k, p) for k, p in ph.items() if p)))
                period = len(states)
                for it in range(begin.count):
                    s = shift
                    if strides:
                        s = dict(shift) if shift else {}
                        for a, st in strides:
                            s[a] = s.get(a, 0) + it * st
                    yield from _walk(body, s, states[it % period], cache, its + (it,))
        yield end


#: the most instructions one :class:`Stream` keeps after its first walk (a longer stream is walked
#: again each time: memory never grows with a loop's trip count)
STREAM_HOLD = 1 << 16
#: the most instructions all kept streams hold together; the least recently walked are dropped first
HOLD_TOTAL = 1 << 20
_held: OrderedDict[Stream, int] = OrderedDict()  # kept streams -> their length, least recent first
_held_total = 0


def _hold(s: Stream, instrs: list[isa.Instr]) -> None:
    global _held_total
    s._walked = instrs
    _held[s] = len(instrs)
    _held_total += len(instrs)
    while _held_total > HOLD_TOTAL:
        old, n = _held.popitem(last=False)
        old._walked = None
        _held_total -= n


class Stream:
    """The instruction stream of one core, produced lazily: every iteration walks the loop
    structure again (O(nesting depth) memory, never proportional to a trip count), except that a
    stream of at most :data:`STREAM_HOLD` instructions keeps its first complete walk (within
    :data:`HOLD_TOTAL` over all streams), so the timing pass and later runs of a model reuse it.

    ``code``: the core's static instructions (block control resolved, loops not expanded)."""

    def __init__(self, code: list[isa.Instr]):
        self.code = code
        self._tree = _tree(_with_steps(code))
        self._cache: dict = {}  # rotation state -> {id(static instruction): its rotated form}
        self._walked: list[isa.Instr] | None = None  # the kept walk
        #: the pipes of the instructions that access a buffer (not sync / SPMD control), sorted
        self.accessing = sorted({ins.defn.pipe for ins in code if ins.defn.group not in ("sync", "spmd")})

    @property
    def tree(self) -> list:
        """The loop structure, never expanded: instructions (a ``loop_step`` target wrapped with its
        steps, the instruction as ``.ins``) and loops ``(loop_begin, its loop_offset / loop_rotate
        instructions, ((arg, stride), ...), ((rotation key, step), ...), body tree, loop_end)``."""
        return self._tree

    def __iter__(self) -> Iterator[isa.Instr]:
        if self._walked is not None:
            _held.move_to_end(self)
            return iter(self._walked)
        return self._walk_and_keep()

    def _walk_and_keep(self) -> Iterator[isa.Instr]:
        kept: list[isa.Instr] | None = []
        for ins in _walk(self._tree, None, (), self._cache):
            if kept is not None:
                kept.append(ins)
                if len(kept) > STREAM_HOLD:
                    kept = None
            yield ins
        if kept is not None and self._walked is None:
            _hold(self, kept)


_OPEN = {"loop_begin": "loop_end", "block_if": "block_endif"}
_CLOSE = {v: k for k, v in _OPEN.items()}


def _rotation_problem(ins: isa.Instr) -> str | None:
    v = dict(zip(ins.defn.field_names, ins.values))
    if v["copies"] < 1:
        return f"copies {v['copies']} (at least 1)"
    if v["step"] < 0:
        return f"step {v['step']} is negative"
    if v["base"] < 0:
        return f"base {v['base']} is negative"
    if ins.defn.mnemonic == "loop_rotate":
        if v["space"] not in isa.SPACE_NAMES:
            return f"space {v['space']} is not an on-chip buffer code {sorted(isa.SPACE_NAMES)}"
        if v["size"] < 1:
            return f"size {v['size']} (at least 1)"
        return None
    pipes = {int(p) for p in isa.Pipe if p not in (isa.Pipe.ALL,)}
    if v["src_pipe"] not in pipes or v["dst_pipe"] not in pipes or v["src_pipe"] == v["dst_pipe"]:
        return f"pipes {v['src_pipe']} -> {v['dst_pipe']} (two different single pipes expected)"
    return None


def check_control(prog: list[isa.Instr], num_args: int) -> None:
    """Check the SPMD control instructions of a kernel taking ``num_args`` GM arguments.

    ``loop_begin``/``loop_end`` and ``block_if``/``block_endif`` nest properly with each other,
    loop counts are >= 0, ``block_offset``/``block_offset_mod``/``block_offset_div``/``loop_offset``
    name an existing argument, a ``block_offset_mod`` modulo and a ``block_offset_div`` divisor are >= 1, and
    ``loop_rotate``/``loop_rotate_event`` are inside a loop with ``copies >= 1``, ``step >= 0``,
    ``base >= 0`` and (loop_rotate) a known space (:data:`cann.hw.isa.SPACE_CODES`) and
    ``size >= 1``, (loop_rotate_event) two different single pipes; every ``loop_step`` / ``loop_clamp``
    is in a loop and applies to a steppable (clampable) field of a work instruction of it, a clamp
    with ``lo <= hi`` (:func:`cann.hw.loops.step_targets`).
    Whether a rotated or stepped window fits its buffer is checked by the simulator's bounds checks
    on the addresses it produces.

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
        elif m in ("block_offset", "block_offset_mod", "block_offset_div", "loop_offset") and \
                not 0 <= ins.arg < num_args:
            raise ValueError(f"instruction {i}: {m} of kernel argument {ins.arg}, the kernel takes {num_args}")
        elif m in _GROUPED and _group_size(ins) < 1:
            raise ValueError(f"instruction {i}: {m} {_GROUPED[m]} {_group_size(ins)} (>= 1 expected)")
        elif m in ("loop_rotate", "loop_rotate_event"):
            problem = _rotation_problem(ins)
            if problem is None and not any(o == "loop_begin" for o, _ in stack):
                problem = "outside a loop_begin .. loop_end"
            if problem is not None:
                raise ValueError(f"instruction {i}: {m} {problem}")
    if stack:
        m, i = stack[-1]
        raise ValueError(f"instruction {i}: {m} without a matching {_OPEN[m]}")
    loops.step_targets(prog)


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
        elif m in _CONTROL:
            total += once * blocks
        else:
            total += mult * blocks
    return total


class _Plan:
    """Per program: its ``block_if`` ranges, and per pattern of taken ``block_if`` s the resolved
    code (a list or a :class:`Stream`) with the block offsets it executes, so that the cores of a
    launch taking the same sections share one stream (built once, its rotated forms cached)."""

    def __init__(self, prog: list[isa.Instr]):
        self.prog = prog  # held, so the id keying this plan is not reused while it is cached
        self.spmd = any(ins.defn.group == "spmd" for ins in prog)
        self.ranges = [(ins.lo, ins.hi) for ins in prog if ins.defn.mnemonic == "block_if"]
        self.by_pattern: dict[tuple[bool, ...], tuple] = {}


_PLANS: dict[int, _Plan] = {}
_MAX_PLANS = 512


def stream(prog: list[isa.Instr], block_idx: int,
           args: tuple[int, ...]) -> tuple[list[isa.Instr] | Stream, tuple[int, ...]]:
    """``(instructions, args)`` of core ``block_idx``: ``prog`` itself when it has no SPMD control,
    else a re-iterable :class:`Stream` expanding the loops lazily (block control resolved and
    the structure checked here, in time proportional to the code, once per pattern of the
    ``block_if`` sections a core takes: cores with the same pattern share the stream). The
    resolution is cached per ``prog`` object (at most 512): a program list must not be changed
    after it has been streamed.

    Raises:
        ValueError: unbalanced block_if/block_endif or loop_begin/loop_end, or a block_offset
            naming a missing argument.
    """
    plan = _PLANS.get(id(prog))
    if plan is None or plan.prog is not prog:
        if len(_PLANS) >= _MAX_PLANS:
            _PLANS.clear()
        plan = _PLANS[id(prog)] = _Plan(prog)
    if not plan.spmd:
        return prog, args
    pattern = tuple(lo <= block_idx < hi for lo, hi in plan.ranges)
    hit = plan.by_pattern.get(pattern)
    if hit is None:
        hit = plan.by_pattern[pattern] = _resolve(prog, block_idx, len(args))
    code, offsets = hit
    bases = list(args)
    for arg, stride, modulo, divisor in offsets:
        bases[arg] += (block_idx % modulo if modulo else block_idx // divisor) * stride
    return code, tuple(bases)


def _resolve(prog: list[isa.Instr], block_idx: int, num_args: int) -> tuple:
    """``(code, ((arg, stride, modulo or 0, divisor or 1), ...))``: ``prog`` with the block control
    of core ``block_idx`` resolved, and the block offsets it executes."""
    out: list[isa.Instr] = []
    offsets: list[tuple[int, int, int, int]] = []
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
        elif m in ("block_offset", "block_offset_mod", "block_offset_div"):
            if not 0 <= ins.arg < num_args:
                raise ValueError(f"instruction {i}: {m} of missing kernel argument {ins.arg}")
            if m in _GROUPED and _group_size(ins) < 1:
                raise ValueError(f"instruction {i}: {m} {_GROUPED[m]} {_group_size(ins)} (>= 1 expected)")
            offsets.append((ins.arg, ins.stride, ins.modulo if m == "block_offset_mod" else 0,
                            ins.divisor if m == "block_offset_div" else 1))
        out.append(ins)
    if depth:
        raise ValueError("block_if without block_endif")
    if any(ins.defn.mnemonic in ("loop_begin", "loop_end") for ins in out):
        return Stream(out), tuple(offsets)
    return out, tuple(offsets)


def specialize(prog: list[isa.Instr], block_idx: int, args: tuple[int, ...]) -> tuple[list[isa.Instr], tuple[int, ...]]:
    """``(instructions, args)`` of core ``block_idx``, loops expanded into a list (:func:`stream`
    materialized: for tests and small programs; the simulator runs the stream).

    Raises:
        ValueError: as :func:`stream`.
    """
    instrs, bases = stream(prog, block_idx, args)
    return list(instrs), bases
