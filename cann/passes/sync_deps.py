"""The dependence model of ``ascend-insert-sync{mode=flags}`` (:mod:`cann.passes.sync_flags`): a
kernel's instructions as items (instructions with their byte footprints, fenced regions: hardware
loops and block_ifs), how one loop body sees an access (GM moving by ``loop_offset``, on-chip
addresses rotating by ``loop_rotate``), the iteration distance at which two accesses conflict, and
the knowledge order of the vector clocks.

Footprints are the race checker's (:func:`cann.hw.footprint.footprints`). Global memory is keyed
per kernel argument (arguments are distinct buffers): a ``copy_gm_to_ub_reg`` reads anywhere in its
argument, and an argument moved by ``block_offset`` after it was accessed overlaps everywhere.
Knowledge of a pipe is ``(iterations back, body position)``: everything of that pipe up to the
position, that many iterations before the current one (:data:`NONE`: nothing).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cann.dialects.ascend import AscendInstrOp, op_to_instr
from cann.errors import CannError
from cann.hw import isa
from cann.hw.config import SocSpec
from cann.hw.footprint import BUFS, footprints
from cann.hw.loops import Step, step_targets, variants

NP = len(isa.Pipe) - 1  # pipes S .. MTE3
GM = BUFS.index("gm")
GM_KEY = 100  # access buffer key of kernel argument a: GM_KEY + a
SPAN = 1 << 40  # synthetic GM distance between two kernel arguments
BIG = 1 << 62  # "anywhere in the argument"
NONE = (1 << 30, -1)  # knowledge of nothing: (iterations back, body position)


# ------------------------------------------------------------------------------------------ items

@dataclass
class Ins:
    """One work instruction: its op, pipe (HIVM number) and footprints (filled by :func:`fill_accesses`)."""

    op: AscendInstrOp
    pipe: int
    accs: list  # (buffer key, lo, hi, is_write)
    #: the loop_steps / loop_clamps applying to it: (field index, step, owner loop key, owner trip
    #: count, clamp: None or (offset, lo, hi))
    steps: list = field(default_factory=list)
    #: per access, {owner loop key: (trip count, bytes it moves per iteration)} (loop_step s)
    moves: list = field(default_factory=list)


@dataclass
class Region:
    """A fenced region: a hardware loop (``ctrl``: its loop_offset / loop_rotate) or a block_if."""

    open: AscendInstrOp
    ctrl: list
    body: list
    close: AscendInstrOp

    @property
    def is_loop(self) -> bool:
        return self.open.DEFN.mnemonic == "loop_begin"


@dataclass
class Ctrl:
    """Other SPMD control (block_offset): passes through."""

    op: AscendInstrOp


@dataclass
class Loop:
    """What the analysis of one loop body needs: trip count, GM strides per argument, rotations."""

    count: int
    strides: dict
    rots: dict  # (space, base, size, copies) -> step % copies (nonzero)
    key: int = 0  # the loop's identity: id of its body list (the owner key of its loop_steps)


def parse(ops: list, where: str) -> list:
    """The flat instruction list as items (instructions, fenced regions, control); each
    instruction carries the ``loop_step`` s that advance it (:func:`cann.hw.loops.step_targets`, the
    resolution the simulator uses) as ``(field, step, owner loop key, owner trip count, clamp)``.

    Raises:
        CannError: unbalanced loops or block sections, loop control outside a loop, or a
            ``loop_step`` without a valid target.
    """
    try:
        targets = step_targets([op_to_instr(op) for op in ops])
    except ValueError as e:
        raise CannError(where, str(e)) from None
    owners: dict[int, tuple[int, int]] = {}  # loop_begin index -> (key of its body, trip count)
    stack: list[tuple[AscendInstrOp | None, list, list]] = [(None, [], [])]
    for i, op in enumerate(ops):
        m = op.DEFN.mnemonic
        top = stack[-1]
        if m in ("loop_begin", "block_if"):
            stack.append((op, [], []))
            if m == "loop_begin":
                owners[i] = (id(stack[-1][2]), op.field("count"))
        elif m in ("loop_end", "block_endif"):
            want = "loop_begin" if m == "loop_end" else "block_if"
            if top[0] is None or top[0].DEFN.mnemonic != want:
                raise CannError(where, f"{m} without a matching {want}")
            stack.pop()
            stack[-1][2].append(Region(top[0], top[1], top[2], op))
        elif m in ("loop_offset", "loop_rotate"):
            if top[0] is None or top[0].DEFN.mnemonic != "loop_begin":
                raise CannError(where, f"{m} outside a loop_begin .. loop_end")
            top[1].append(op)
        elif op.DEFN.group == "spmd":
            top[2].append(Ctrl(op))
        else:
            steps = [(s.field, s.step, *owners[s.owner], s.clamp) for s in targets.get(i, ())]
            top[2].append(Ins(op, int(op.DEFN.pipe), [], steps))
    if len(stack) > 1:
        raise CannError(where, f"{stack[-1][0].DEFN.mnemonic} without its end")
    return stack[0][2]


def walk_ins(items: list):
    """The instructions and control items of ``items``, nested regions included, in order."""
    for it in items:
        if isinstance(it, Region):
            yield from walk_ins(it.body)
        else:
            yield it


def fill_accesses(items: list, spec: SocSpec, nargs: int) -> None:
    """Each instruction's footprints, GM keyed by argument (:data:`GM_KEY` + arg, byte offsets)."""
    fps = footprints(spec)
    args = tuple(i * SPAN + SPAN // 2 for i in range(max(nargs, 1)))
    seen: set[int] = set()
    unbounded: set[int] = set()
    flat = list(walk_ins(items))
    for it in flat:  # an argument moved after it was accessed: its offsets no longer compare
        if isinstance(it, Ctrl):
            if it.op.DEFN.mnemonic in ("block_offset", "block_offset_mod", "block_offset_div") and it.op.field("arg") in seen:
                unbounded.add(it.op.field("arg"))
            continue
        for f in ("src_arg", "dst_arg"):
            if f in it.op.DEFN.field_names:
                seen.add(it.op.field(f))
    for it in flat:
        if isinstance(it, Ctrl):
            continue
        ins = op_to_instr(it.op)
        fn = fps[ins.mnemonic]
        reg = ins.defn.group == "dma_reg"
        accs = fn(ins.values, args, 0)[0] if reg else fn(ins.values, args)[0]
        moved = {}  # owner -> the accesses one step of it gives
        if any(c is not None for *_, c in it.steps):
            # clamped: each access as the hull of every position it takes, fixed in every scope
            steps = [Step(f, st, owner, c) for f, st, owner, _, c in it.steps]
            counts = {owner: count for _, _, owner, count, _ in it.steps}
            hull = [(fn(x.values, args, 0) if reg else fn(x.values, args))[0] for x in variants(ins, steps, counts)]
            accs = [(buf, min(h[k][1] for h in hull), max(h[k][2] for h in hull), w)
                    for k, (buf, _, _, w) in enumerate(accs)]
        else:
            for f, st, owner, count, _ in it.steps:
                values = list(moved[owner][1].values) if owner in moved else list(ins.values)
                values[f] += st
                moved[owner] = (count, isa.Instr(ins.defn, tuple(values)))
        moved = {o: (c, (fn(x.values, args, 0) if reg else fn(x.values, args))[0]) for o, (c, x) in moved.items()}
        for k, (buf, lo, hi, w) in enumerate(accs):
            if hi <= lo:
                continue
            mv = {o: (c, a[k][1] - lo) for o, (c, a) in moved.items() if a[k][1] != lo}
            it.moves.append(mv)
            if buf == GM:
                arg = lo // SPAN
                base = arg * SPAN + SPAN // 2
                if reg or arg in unbounded:
                    it.accs.append((GM_KEY + arg, -BIG, BIG, w))
                else:
                    it.accs.append((GM_KEY + arg, lo - base, hi - base, w))
            else:
                it.accs.append((buf, lo, hi, w))


# -------------------------------------------------------------------------------- distances

def view(acc: tuple, loop: Loop | None, regions: list, moves: dict | None = None) -> tuple:
    """An access as the analysis of one scope sees it: ``("g", key, lo, hi, w, stride)`` (GM moving
    by ``stride`` per iteration, or an on-chip access a ``loop_step`` of this loop moves),
    ``("r", key, lo, hi, w, rot, copy, rlo, rhi)`` (in a region the loop rotates) or ``("p", key, lo,
    hi, w)`` (fixed; an access straddling a rotated copy is widened to every position it can take).
    ``moves``: ``{owner loop key: (trip count, bytes per iteration)}`` of an access loop_steps move;
    it is widened over the iterations of the loops other than this scope's (they are fixed while
    this scope runs, at a value unknown here), and over every copy when it is in a rotated region."""
    buf, lo, hi, w = acc
    if moves:
        own = 0
        for key, (count, s) in moves.items():
            if loop is not None and key == loop.key:
                own = s
            else:
                lo, hi = lo + min(0, (count - 1) * s), hi + max(0, (count - 1) * s)
        n = (loop.count - 1) * own if loop is not None else 0
        for space, base, size, copies in regions:
            if space == buf and lo + min(0, n) < base + copies * size and base < hi + max(0, n):
                return ("p", buf, min(base, lo + min(0, n)), max(base + copies * size, hi + max(0, n)), w)
        return ("g", buf, lo, hi, w, own) if own else ("p", buf, lo, hi, w)
    if buf >= GM_KEY:
        return ("g", buf, lo, hi, w, loop.strides.get(buf - GM_KEY, 0) if loop else 0)
    for space, base, size, copies in regions:
        if space == buf and base <= lo < base + copies * size:
            c, rlo = divmod(lo - base, size)
            rhi = rlo + (hi - lo)
            if rhi > size:  # straddles its copy: every copy it can be rotated to
                return ("p", buf, base, base + (copies - 1) * size + rhi, w)
            key = (space, base, size, copies)
            if loop is not None and key in loop.rots:
                return ("r", buf, lo, hi, w, key, c, rlo, rhi)
            return ("p", buf, lo, hi, w)
    return ("p", buf, lo, hi, w)


def hull(v: tuple, loop: Loop | None = None) -> tuple[int, int]:
    """The byte range a viewed access can take in any iteration (of ``loop``)."""
    if v[0] == "r":
        space, base, size, copies = v[5]
        return base, base + copies * size
    if v[0] == "g" and loop is not None and v[2] != -BIG:
        n = (loop.count - 1) * v[5]
        return v[2] + min(0, n), v[3] + max(0, n)
    return v[2], v[3]


def distance(x: tuple, y: tuple, dmin: int, dmax: int, loop: Loop | None) -> int | None:
    """The smallest d in [dmin, dmax] at which access ``x`` of iteration k - d and access ``y`` of
    iteration k conflict (same bytes, one of them a write), or None."""
    if dmin > dmax or x[1] != y[1] or not (x[4] or y[4]):
        return None
    if x[0] == "g" and y[0] == "g" and x[5] == y[5]:  # both move alike: their distance is fixed
        s = x[5]
        if s == 0 or x[2] == -BIG or y[2] == -BIG:
            return dmin if x[2] < y[3] and y[2] < x[3] else None
        # x shifted by -d*s overlaps y: x.lo - d*s < y.hi and y.lo < x.hi - d*s
        if s > 0:
            lo_d = (x[2] - y[3]) // s + 1
            hi_d = -((y[2] - x[3]) // s) - 1  # ceil((x.hi - y.lo) / s) - 1
        else:
            t = -s
            lo_d = (y[2] - x[3]) // t + 1
            hi_d = -((x[2] - y[3]) // t) - 1
        d = max(dmin, lo_d)
        return d if d <= min(dmax, hi_d) else None
    if x[0] == "r" and y[0] == "r" and x[5] == y[5]:
        if not (x[7] < y[8] and y[7] < x[8]):
            return None
        copies = x[5][3]
        step = loop.rots[x[5]]
        for d in range(dmin, min(dmax, dmin + copies - 1) + 1):  # same copy: d*step = cx - cy
            if (d * step - (x[6] - y[6])) % copies == 0:
                return d
        return None
    xl, xh = hull(x, loop)
    yl, yh = hull(y, loop)
    return dmin if xl < yh and yl < xh else None


# ------------------------------------------------------------------------------- knowledge

def covers(k: tuple, r: tuple) -> bool:
    """Does knowledge ``k`` include position ``r`` (both ``(iterations back, position)``)?"""
    return k[0] < r[0] or (k[0] == r[0] and k[1] >= r[1])


def newer(x: tuple, y: tuple) -> tuple:
    """The larger of two knowledges."""
    return x if covers(x, y) else y


def shift(k: tuple, d: int) -> tuple:
    """Knowledge ``k`` seen from ``d`` iterations later."""
    return k if k == NONE else (k[0] + d, k[1])


def loop_info(region: Region, where: str) -> Loop:
    """The trip count, GM strides per argument and active rotations of a loop region.

    Raises:
        CannError: a loop_rotate with copies or size below 1.
    """
    strides: dict[int, int] = {}
    rots: dict[tuple, int] = {}
    for op in region.ctrl:
        if op.DEFN.mnemonic == "loop_offset":
            strides[op.field("arg")] = strides.get(op.field("arg"), 0) + op.field("stride")
        else:
            key = (op.field("space"), op.field("base"), op.field("size"), op.field("copies"))
            if key[3] < 1 or key[2] < 1:
                raise CannError(where, f"loop_rotate with copies {key[3]}, size {key[2]} (at least 1)")
            rots[key] = (rots.get(key, 0) + op.field("step")) % key[3]
    return Loop(region.open.field("count"), strides, {k: s for k, s in rots.items() if s}, id(region.body))


def check_regions(items: list, where: str) -> list:
    """Every loop_rotate region of the kernel; two different regions of one buffer must not overlap."""
    found: list = []

    def visit(its):
        for it in its:
            if isinstance(it, Region):
                for op in it.ctrl:
                    if op.DEFN.mnemonic == "loop_rotate":
                        key = (op.field("space"), op.field("base"), op.field("size"), op.field("copies"))
                        if key not in found:
                            found.append(key)
                visit(it.body)

    visit(items)
    for i, (s1, b1, z1, c1) in enumerate(found):
        for s2, b2, z2, c2 in found[i + 1:]:
            if s1 == s2 and b1 < b2 + z2 * c2 and b2 < b1 + z1 * c1:
                raise CannError(where, f"loop_rotate regions [{b1}, {b1 + z1 * c1}) and [{b2}, {b2 + z2 * c2}) "
                                       f"of {isa.SPACE_NAMES.get(s1, s1)} overlap: ascend-insert-sync cannot order them")
    return found
