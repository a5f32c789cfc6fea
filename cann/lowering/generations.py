"""Generations of an on-chip buffer in a kernel's instructions: what multi-buffering may rename.

A *generation* of a buffer (a byte region ``[base, base + size)`` of one on-chip space) is a
maximal run of accesses that starts with an instruction writing the buffer without reading it,
after the buffer has been read since the current generation began, or after a control boundary
(``loop_begin``, ``loop_end``, ``block_if``, ``block_endif``); consecutive writes of different
parts belong to one generation and an in-place read-modify-write stays in it. Accesses are the
byte ranges the race checker uses (:func:`cann.hw.footprint.footprints`); an ``mmad`` with
``init = 0`` also reads the L0C range it accumulates into.

Generations are numbered by a counter that follows execution: a hardware loop of ``count``
iterations whose body starts ``G`` generations per iteration is walked once (iteration 0's
numbers) and the counter then advances to ``start + count*G``. With ``copies`` copies of the
buffer, generation ``g`` uses copy ``g % copies``; a loop with ``G % copies != 0`` rotates its
body by ``G % copies`` copies per iteration (``loop_rotate``).

A hardware loop whose ``loop_step`` s move accesses of the buffer (an M-subtile loop writing the
parts of one accumulator) walks different parts of it, not one refill per iteration: its accesses
count as the whole range they step over, its begin and end are no boundary, and it may start at
most one generation, in its first iteration (a body that starts one and then reads, or starts
two, is illegal to rename); no ``loop_rotate`` for it. A ``loop_clamp`` ed write that runs before
anything in its loop body reads the spaces it writes (a border tile's input copy or padding fill,
clamped at the map's edge) is a refill of the buffer, not such a walk.

Renaming is *legal* when no access reaches across the buffer's edge (renaming moves an address
inside the buffer, not the bytes beyond it), every read reads only bytes written in its own
generation, and no read
depends on which copy a skipped ``block_if`` section or an earlier loop iteration left behind:
a read after a ``block_endif`` whose section started generations, before the next fresh write, and a
read at the start of a loop body (before its first fresh write) in a loop that starts
generations, are illegal.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cann.hw import isa
from cann.hw.config import SocSpec
from cann.hw.footprint import footprints
from cann.hw.loops import step_targets, variants

_BOUNDARIES = ("loop_begin", "loop_end", "block_if", "block_endif")


class _ZeroArgs:
    """GM argument bases for footprints: on-chip ranges do not depend on them."""

    def __getitem__(self, i: int) -> int:
        return 0


_ARGS = _ZeroArgs()


@dataclass
class Generations:
    """The generation analysis of one buffer region.

    ``gen[i]``: the generation counter at instruction ``i`` when it accesses the buffer (absent
    otherwise); ``loop_gens[i]``: for the ``loop_begin`` at index ``i``, the generations its body
    starts per iteration; ``total``: generations the kernel runs (over all loop iterations);
    ``problem``: why renaming is illegal (None: legal)."""

    gen: dict[int, int] = field(default_factory=dict)
    loop_gens: dict[int, int] = field(default_factory=dict)
    total: int = 0
    problem: str | None = None


def accesses(ins: isa.Instr, spec: SocSpec) -> tuple[tuple[int, int, int, bool], ...]:
    """``((space code, lo, hi, is_write), ...)``: the on-chip byte ranges ``ins`` reads and writes
    (the race checker's footprints, GM and scalar registers dropped; an accumulating ``mmad`` reads
    its L0C range too)."""
    accs = footprints(spec)[ins.defn.mnemonic](ins.values, _ARGS)[0]
    out = tuple(a for a in accs if 1 <= a[0] <= 5 and a[2] > a[1])
    if ins.defn.mnemonic == "mmad" and ins.values[7] == 0:
        out += tuple((b, lo, hi, False) for b, lo, hi, w in out if w)
    return out


def stepped_accesses(instrs: list[isa.Instr], spec: SocSpec, accs: list) -> tuple[list, dict[int, set[int]]]:
    """``(accs, moving)``: ``accs`` with the accesses of every ``loop_step`` target widened to what
    they cover over all iterations of the loops stepping them, and per instruction index of such a
    loop's ``loop_begin`` the on-chip spaces whose accesses it moves."""
    targets = step_targets(instrs)
    if not targets:
        return accs, {}
    accs = list(accs)
    moving: dict[int, set[int]] = {}
    for i, steps in targets.items():
        ins = instrs[i]
        if any(s.clamp is not None for s in steps):  # clamped: the hull of every position it takes
            hull = [accesses(x, spec) for x in variants(ins, steps, {s.owner: instrs[s.owner].count for s in steps})]
            hull = [h for h in hull if len(h) == len(accs[i])]  # (a window clamped to nothing drops out)
            # a clamped write refilling part of a range the same iteration already wrote (a border
            # tile's input copy after its padding fills) is a refill, not a walk through the buffer
            refill = all(w for _, _, _, w in accs[i]) and _refills(instrs, i, accs)
            for owner in dict.fromkeys(s.owner for s in steps):
                for k, (sp, lo, hi, w) in enumerate(accs[i]):
                    if not refill and any(h[k][1] != lo or h[k][2] != hi for h in hull):
                        moving.setdefault(owner, set()).add(sp)
            accs[i] = tuple((sp, min(h[k][1] for h in hull), max(h[k][2] for h in hull), w)
                            for k, (sp, _, _, w) in enumerate(accs[i]))
            continue
        lo_d = [0] * len(accs[i])
        hi_d = [0] * len(accs[i])
        for owner in dict.fromkeys(s.owner for s in steps):
            values = list(ins.values)
            for f, st, o, _ in steps:
                if o == owner:
                    values[f] += st
            moved = accesses(isa.Instr(ins.defn, tuple(values)), spec)
            n = max(instrs[owner].count - 1, 0)
            for k, ((sp, lo, hi, w), (_, lo1, hi1, _)) in enumerate(zip(accs[i], moved)):
                if lo1 != lo or hi1 != hi:
                    moving.setdefault(owner, set()).add(sp)
                lo_d[k] += min(0, n * (lo1 - lo), n * (hi1 - hi))
                hi_d[k] += max(0, n * (lo1 - lo), n * (hi1 - hi))
        accs[i] = tuple((sp, lo + a, hi + b, w) for (sp, lo, hi, w), a, b in zip(accs[i], lo_d, hi_d))
    return accs, moving


def _refills(instrs: list[isa.Instr], i: int, accs: list) -> bool:
    """Whether instruction ``i`` runs before anything in its loop body reads the on-chip spaces it
    writes (only writes of them since the innermost ``loop_begin``): it fills the buffer afresh."""
    spaces = {a[0] for a in accs[i]}
    for j in range(i - 1, -1, -1):
        m = instrs[j].defn.mnemonic
        if m == "loop_begin":
            return True
        if m in _BOUNDARIES:
            return False
        if any(sp in spaces and not w for sp, _, _, w in accs[j]):
            return False
    return False


def _covered(lo: int, hi: int, written: list[tuple[int, int]]) -> bool:
    pos = lo
    for a, b in sorted(written):
        if a > pos:
            break
        pos = max(pos, b)
        if pos >= hi:
            return True
    return pos >= hi


def analyse(instrs: list[isa.Instr], spec: SocSpec, space: int, base: int, size: int,
            accs: list | None = None, min_trips: int = 1) -> Generations:
    """The generations of buffer ``[base, base + size)`` of on-chip ``space`` (:data:`isa.SPACE_CODES`)
    in ``instrs`` (a kernel's static code, loops not expanded; ``accs``: :func:`accesses` of each
    instruction, when the caller has them). ``min_trips``: every loop counted as running at least
    that many iterations (a loop-form kernel's loops of one iteration as any count: the same
    buffers whatever the map size)."""
    res = Generations()
    end = base + size
    if accs is None:
        accs = [accesses(ins, spec) for ins in instrs]
    accs, moving = stepped_accesses(instrs, spec, accs)
    # loops whose iterations step accesses of this space: one pass over different parts of the
    # buffer, not a refill per iteration (their begin and end are no generation boundary)
    spanning = {j for j, spaces in moving.items() if space in spaces}
    cur = -1  # the current generation's number
    read_since = False
    boundary = True  # the next pure write starts a generation
    written: list[tuple[int, int]] = []
    post_block = False  # a block section started generations: reads before a fresh write are illegal
    loops: list[tuple[int, int, bool]] = []  # (loop_begin index, counter at entry, crossing read)
    blocks: list[int] = []  # counter at each open block_if
    counts: list[int] = []

    def illegal(i: int, why: str) -> None:
        if res.problem is None:
            res.problem = f"instruction {i} `{instrs[i].asm()}` {why}"

    for i, ins in enumerate(instrs):
        m = ins.defn.mnemonic
        if m in _BOUNDARIES:
            if m == "loop_begin":
                loops.append((i, cur, False))
                counts.append(max(ins.count, min_trips))
                boundary = boundary or i not in spanning
            elif m == "loop_end":
                j, cur0, crossing = loops.pop()
                count = counts.pop()
                g = cur - cur0
                if j in spanning:
                    if g > 1 or (g and (read_since or boundary)):
                        illegal(j, "starts a loop stepping through the buffer (loop_step) whose iterations "
                                   "refill it")
                    count = min(count, 1)  # the later iterations continue the generation
                else:
                    boundary = True
                res.loop_gens[j] = 0 if j in spanning else g
                if g and crossing:
                    illegal(j, "starts a loop whose body reads the buffer before refilling it")
                cur = cur0 + count * g
            elif m == "block_if":
                blocks.append(cur)
            else:
                post_block = post_block or cur != blocks.pop()
            if m in ("block_if", "block_endif"):
                boundary = True
            continue
        mine = [(lo, hi, w) for sp, lo, hi, w in accs[i]
                if sp == space and lo < end and hi > base]
        if not mine:
            continue
        for lo, hi, _ in mine:
            if lo < base or hi > end:  # renaming moves the address, not the part outside the buffer
                illegal(i, f"accesses bytes [{lo}, {hi}) across the edge of the buffer [{base}, {end})")
        reads = [(lo, hi) for lo, hi, w in mine if not w]
        writes = [(lo, hi) for lo, hi, w in mine if w]
        if writes and not reads and (read_since or boundary):
            cur += 1
            read_since = boundary = post_block = False
            written = []
        if reads:
            if post_block:
                illegal(i, "reads the buffer after a block_if section that refilled it")
            for k in range(len(loops) - 1, -1, -1):  # loops whose body has not started a generation yet
                if loops[k][1] != cur:
                    break
                loops[k] = (loops[k][0], cur, True)
            for lo, hi in reads:
                if not _covered(lo, hi, written):
                    illegal(i, f"reads bytes [{lo}, {hi}) not written in its generation")
            read_since = True
        written.extend(writes)
        res.gen[i] = cur
    res.total = cur + 1
    return res


def rename(instrs: list[isa.Instr], spec: SocSpec, regions: list[tuple[int, int, int, int, str]],
           where: str, every_loop: bool = False) -> list[isa.Instr]:
    """``instrs`` with each multi-buffered region renamed: ``regions`` lists ``(space, base, size,
    copies, name)`` (the region holds ``copies`` consecutive copies of ``size`` bytes from ``base``;
    ``instrs`` address copy 0). Generation ``g`` of a region uses copy ``g % copies``; a loop whose
    body starts ``G`` generations with ``G % copies != 0`` gets ``loop_rotate space, base, size,
    copies, G % copies`` after its ``loop_begin`` (and its ``loop_offset`` instructions); with
    ``every_loop`` (a loop-form kernel) every loop whose body starts generations gets one, its step
    possibly 0 (``G`` depends on the counts of the loops nested in it: the code must not).

    Raises:
        ValueError: renaming a region is illegal (see the module docstring), naming ``where``, the
            buffer and the first offending instruction.
    """
    accs = [accesses(ins, spec) for ins in instrs]
    shifts: dict[int, list[tuple[int, int, int, int]]] = {}  # instr -> (field, space, lo, hi, delta)
    rotates: dict[int, list[isa.Instr]] = {}
    for space, base, size, copies, name in regions:
        if copies <= 1:
            continue
        g = analyse(instrs, spec, space, base, size, accs)
        if g.problem is not None:
            raise ValueError(f"{where}: buffer {name} cannot have {copies} copies: {g.problem}")
        for i, gen in g.gen.items():
            c = gen % copies
            if c:
                shifts.setdefault(i, []).append((space, base, base + size, c * size))
        for j, n in g.loop_gens.items():
            if n % copies or (every_loop and n):
                rotates.setdefault(j, []).append(isa.make("loop_rotate", space=space, base=base, size=size,
                                                          copies=copies, step=n % copies))
    out: list[isa.Instr] = []
    pending: list[isa.Instr] = []
    for i, ins in enumerate(instrs):
        if pending and ins.defn.mnemonic != "loop_offset":
            out.extend(pending)
            pending = []
        sh = shifts.get(i)
        if sh:
            values = list(ins.values)
            for fi, sp in isa.address_fields(ins):
                for space, lo, hi, delta in sh:
                    if sp == space and lo <= ins.values[fi] < hi:
                        values[fi] += delta
                        break
            ins = isa.Instr(ins.defn, tuple(values))
        out.append(ins)
        if i in rotates:
            pending = rotates[i]
    out.extend(pending)
    return out
