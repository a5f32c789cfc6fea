"""Lockstep execution of the blocks of a launch: which blocks may run together, and how.

The blocks of a launch that take the same ``block_if`` sections run the same instruction stream
(:func:`cann.sim.spmd.stream` returns one object for them) on different data: only their GM
argument bases differ. :meth:`cann.sim.core.AICore.run_lanes` executes such blocks together, each
instruction once for all of them (one lane per block). That gives exactly the result of running the
blocks one after another (the per-block path of :func:`cann.sim.executor.run_model`) when

* no instruction's addresses depend on data (``ld_idx`` / ``copy_gm_to_ub_reg``: per-core
  registers), and every control instruction is one this module knows;
* no block accesses GM outside the arena (so the only faults are those of the instruction's
  fields and on-chip operands, the same on every lane: the first lane, the lowest block, reports);
* no block writes GM bytes another block of the launch reads or writes (a cross-block race:
  sequentially the later block wins or sees the earlier one's data, which lockstep would not
  reproduce).

:func:`gm_extents` bounds each argument's read and written GM bytes of a stream from its static
code (loop counts and ``loop_offset`` strides; exact: every extreme is reached), and
:func:`plan` checks the last two conditions with them for every block. When any condition fails,
the launch runs block by block as before. Groups are runs of consecutive blocks of one wave with
the same stream, so block ``b`` still runs on core (lane) ``b % cores`` and the on-chip buffers
a core keeps between launches are the same as with the per-block path.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from cann.hw import isa
from cann.hw.footprint import footprints
from cann.hw.config import SocSpec
from cann.sim.lanes import lane_grid
from cann.sim.spmd import gm_fields

#: module switch: False runs every launch block by block (tests compare the two paths)
ENABLED = True

_CONTROL = frozenset({"loop_begin", "loop_end", "loop_offset", "loop_rotate", "loop_rotate_event", "loop_step",
                      "loop_clamp",
                      "block_offset", "block_offset_mod", "block_offset_div", "block_if", "block_endif"})
#: resolved before a core runs: their fields do not change what the core executes
_NO_EFFECT = frozenset({"block_if", "block_endif"})


class _Zeros:
    """Argument bases all 0: footprints relative to the argument's base."""

    def __getitem__(self, i: int) -> int:
        return 0


_ZERO = _Zeros()


def gm_extents(code: list[isa.Instr], spec: SocSpec) -> dict[int, tuple[int, int, int, int]] | None:
    """Per kernel argument, ``(read_lo, read_hi, write_lo, write_hi)``: the bounding GM byte ranges
    (relative to the argument's base; ``lo > hi`` when none) that the stream with static code
    ``code`` (block control resolved: :attr:`cann.sim.spmd.Stream.code`) reads and writes over all
    loop iterations. None when they cannot be known statically (register-addressed copies, an
    unknown control instruction, a GM operand without an argument field)."""
    fps = footprints(spec)
    offsets: dict[int, dict[int, int]] = {}  # loop_begin index -> {arg: stride per iteration}
    stack: list[tuple[int, dict[int, int]]] = []
    for i, ins in enumerate(code):
        d = ins.defn
        if d.group in ("scalar", "dma_reg") or (d.group == "spmd" and d.mnemonic not in _CONTROL):
            return None
        if d.mnemonic == "loop_begin":
            stack.append((i, {}))
        elif d.mnemonic == "loop_end":
            if not stack:
                return None
            j, o = stack.pop()
            offsets[j] = o
        elif d.mnemonic == "loop_offset" and stack:
            o = stack[-1][1]
            o[ins.arg] = o.get(ins.arg, 0) + ins.stride
    if stack:
        return None
    ext: dict[int, list[int]] = {}
    loops: list[tuple[int, dict[int, int]]] = []  # enclosing loops: (count, strides)
    dead = 0  # enclosing loops that never run their body
    for i, ins in enumerate(code):
        d = ins.defn
        m = d.mnemonic
        if m == "loop_begin":
            loops.append((ins.count, offsets[i]))
            dead += ins.count < 1
            continue
        if m == "loop_end":
            c, _ = loops.pop()
            dead -= c < 1
            continue
        if dead or d.group in ("sync", "spmd"):
            continue
        gm = gm_fields(d)
        accs = [x for x in fps[m](ins.values, _ZERO)[0] if x[0] == 0]
        if not accs:
            continue
        if len(gm) != 1 or len(accs) != 1:
            return None
        arg = ins.values[gm[0][0]]
        _, lo, hi, w = accs[0]
        for c, st in loops:
            s = (c - 1) * st.get(arg, 0)
            lo, hi = lo + min(0, s), hi + max(0, s)
        e = ext.setdefault(arg, [1 << 62, -(1 << 62), 1 << 62, -(1 << 62)])
        k = 2 if w else 0
        e[k], e[k + 1] = min(e[k], lo), max(e[k + 1], hi)
    return {a: tuple(e) for a, e in ext.items()}


_EXTENTS: dict[int, tuple] = {}


def _extents(code: list[isa.Instr], spec: SocSpec):
    """:func:`gm_extents`, cached per code object."""
    hit = _EXTENTS.get(id(code))
    if hit is None or hit[0] is not code or hit[1] != spec.name:
        if len(_EXTENTS) >= 4096:
            _EXTENTS.clear()
        hit = _EXTENTS[id(code)] = (code, spec.name, gm_extents(code, spec))
    return hit[2]


class Conflict(Exception):
    """Two blocks of a lockstep launch access the same GM bytes, one of them writing: the launch must
    run block by block (after :meth:`Guard.restore`)."""


_NONE, _MANY = 0xFFFF, 0xFFFE


@lru_cache(maxsize=4096)
def _apart(bases: tuple[int, ...], ext: int) -> bool:
    """Whether accesses of ``ext`` bytes at ``bases`` (one per lane) cannot meet: no two lanes write
    the same bytes, so a write needs no check of that after marking."""
    s = sorted(bases)
    return all(b - a >= ext for a, b in zip(s, s[1:]))


def _untouched(x: np.ndarray) -> bool:
    """Whether no block wrote (read) any of the bytes of writer (reader) view ``x``: the usual case,
    one reduction instead of the per-byte test ("none" is the largest value of the marks' dtype)."""
    return int(x.min()) == np.iinfo(x.dtype).max


class Guard:
    """Watches the GM accesses of a lockstep launch inside the bytes it may write (``regions``,
    disjoint sorted ``(lo, hi)``): per byte the block that wrote it and the block(s) that read it.
    :meth:`access` raises :class:`Conflict` when a block writes bytes another block read or wrote,
    or reads bytes another block wrote, or an access straddles a region's edge. The regions' bytes
    are saved first, so :meth:`restore` undoes the launch's GM writes. ``blocks``: the launch's
    block count; the marks are ``uint8`` when it leaves room for "none" and "several" (255, 254),
    else ``uint16`` (``dt``; set ``ids`` in it)."""

    def __init__(self, gm: np.ndarray, regions: list[tuple[int, int]], watch: bool = True, blocks: int = _MANY):
        self.gm = gm
        self.regions = regions
        self.saved = [gm[lo:hi].copy() for lo, hi in regions]
        self.dt = np.dtype(np.uint8) if blocks < 0xFE else np.dtype(np.uint16)
        self.none, self.many = (0xFF, 0xFE) if self.dt.itemsize == 1 else (_NONE, _MANY)
        # per region byte: the block that wrote / read it (only when watching: see plan's ``watch``)
        self.writer = [np.full(hi - lo, self.none, self.dt) for lo, hi in regions] if watch else []
        self.reader = [np.full(hi - lo, self.none, self.dt) for lo, hi in regions] if watch else []
        self.ids = np.zeros(0, self.dt)  # the block of each lane of the current group

    def restore(self) -> None:
        for (lo, hi), b in zip(self.regions, self.saved):
            self.gm[lo:hi] = b

    def _region(self, lo: int, hi: int) -> int | None:
        """The region holding ``[lo, hi)``, None when it meets none; :class:`Conflict` when it
        straddles a region's edge."""
        for r, (rlo, rhi) in enumerate(self.regions):
            if lo < rhi and rlo < hi:
                if not (rlo <= lo and hi <= rhi):
                    raise Conflict
                return r
        return None

    def access(self, bases: tuple[int, ...], step: int | None, off: int, shape: tuple, strides: tuple, isz: int,
               write: bool) -> None:
        """A GM operand at ``bases[j] + off`` on lane j (byte strides, elements of ``isz`` bytes)."""
        ext = sum((k - 1) * st for k, st in zip(shape, strides)) + isz
        lo, hi = min(bases) + off, max(bases) + off + ext
        if not any(lo < rhi and rlo < hi for rlo, rhi in self.regions):
            return
        n = len(bases)
        dt, none = self.dt, self.none
        z = dt.itemsize  # bytes per mark
        shape_b = shape + (isz,)
        strides_b = tuple(0 if k == 1 else z * st for k, st in zip(shape, strides)) + (z,)

        def view(r, buf, addr, sh, st):
            return np.ndarray(sh, dt, buffer=buf, offset=z * (addr - self.regions[r][0]), strides=st)

        grid = None  # the lanes as one strided axis (evenly spaced bases) or a (p, q) grid of them
        if write and n > 1:
            if step is not None:
                grid = (n,), (z * step,)
            else:
                g = lane_grid(tuple(bases))
                if g is not None:
                    grid = (n // g[0], g[0]), (z * g[1], z * g[2])
        if grid is not None:
            r = None
            try:
                r = self._region(lo, hi)
            except Conflict:
                pass  # the lanes span several regions: lane by lane below
            if r is not None:
                me = self.ids.reshape(grid[0] + (1,) * len(shape_b))
                sh, st = grid[0] + shape_b, grid[1] + strides_b
                w, rd = view(r, self.writer[r], bases[0] + off, sh, st), view(r, self.reader[r], bases[0] + off, sh, st)
                if not (_untouched(w) and _untouched(rd) or
                        ((w == none) | (w == me)).all() and ((rd == none) | (rd == me)).all()):
                    raise Conflict
                w[...] = me
                if not _apart(tuple(bases), ext) and not (w == me).all():  # two lanes wrote the same bytes
                    raise Conflict
                return
        for j, base in enumerate(bases):  # lane by lane, in block order
            r = self._region(base + off, base + off + ext)
            if r is None:
                continue
            me = self.ids[j]
            w = view(r, self.writer[r], base + off, shape_b, strides_b)
            rd = view(r, self.reader[r], base + off, shape_b, strides_b)
            if not (_untouched(w) or ((w == none) | (w == me)).all()):
                raise Conflict
            if write:
                if not (_untouched(rd) or ((rd == none) | (rd == me)).all()):
                    raise Conflict
                w[...] = me
            else:
                rd[...] = np.where((rd == none) | (rd == me), me, dt.type(self.many))


_CONGRUENT: dict[tuple, tuple] = {}


def _functional(code: list[isa.Instr]) -> list[isa.Instr]:
    """``code`` without the instructions that only order pipes (flags, barriers, event rotations)."""
    return [x for x in code if x.defn.group != "sync" and x.defn.mnemonic != "loop_rotate_event"]


def _sync_ok(code: list[isa.Instr], spec: SocSpec) -> bool:
    """Every synchronization instruction of ``code`` has valid fields, rotated event ids included
    (so running the code without them cannot skip a fault)."""
    flag_pipes = {p.value for p in isa.Pipe if p is not isa.Pipe.ALL}
    for x in code:
        m, v = x.defn.mnemonic, x.values
        if m in ("set_flag", "wait_flag"):
            if v[0] not in flag_pipes or v[1] not in flag_pipes or not 0 <= v[2] < spec.event_ids:
                return False
        elif m == "pipe_barrier":
            if v[0] not in {p.value for p in isa.Pipe}:
                return False
        elif m == "loop_rotate_event" and x.base + x.copies > spec.event_ids:
            return False
    return True


def congruent(a: list[isa.Instr], b: list[isa.Instr], spec: SocSpec | None = None) -> dict[int, int] | None:
    """``{arg: delta}`` when static codes ``a`` and ``b`` are the same instructions except for GM
    offsets that differ by one constant per argument (``b`` = ``a`` with argument ``arg``'s base
    moved by ``delta``), else None. With ``spec``: the same comparison of their functional
    instructions only (:func:`_functional`; ``b``'s synchronization fields valid): ``a`` then
    computes what ``b`` computes, though its instruction indices and schedule differ. Cached per
    pair of code objects."""
    if a is b:
        return {}
    key = (id(a), id(b), spec is not None)
    hit = _CONGRUENT.get(key)
    if hit is not None and hit[0] is a and hit[1] is b:
        return hit[2]
    deltas: dict[int, int] | None = {}
    xs, ys = (a, b) if spec is None else (_functional(a), _functional(b))
    if len(xs) != len(ys) or (spec is not None and not _sync_ok(b, spec)):
        deltas = None
    else:
        for x, y in zip(xs, ys):
            if x.defn is not y.defn:
                deltas = None
                break
            gm = gm_fields(x.defn)
            if not gm:
                if x is y or x.values == y.values or x.defn.mnemonic in _NO_EFFECT:
                    continue
                deltas = None
                break
            xv, yv = list(x.values), list(y.values)
            for fa, fo in gm:
                if xv[fa] != yv[fa]:
                    break
                d = yv[fo] - xv[fo]
                if deltas.setdefault(xv[fa], d) != d:
                    break
                yv[fo] = xv[fo]
            else:
                if xv == yv:
                    continue
            deltas = None
            break
    if len(_CONGRUENT) >= 4096:
        _CONGRUENT.clear()
    _CONGRUENT[key] = (a, b, deltas)
    return deltas


def plan(blocks: list[tuple[object, tuple[int, ...]]], spec: SocSpec, gm_size: int, cores: int):
    """The lockstep plan of a launch, or None when it must run block by block: ``(groups, bases,
    regions, same, loose, watch)``. ``blocks[b]``: block ``b``'s ``(stream, argument bases)``. A group is
    at most ``cores`` blocks (increasing indices) whose streams are :func:`congruent` to the first
    one's; groups come in the order of their first blocks. ``bases[b]``: block ``b``'s argument bases for running its
    group's first stream (its own moved by the deltas); ``regions``: the disjoint GM byte ranges
    the launch may write (for :class:`Guard`); ``same[i]``: every block of group i accesses each
    argument's GM bytes apart from every other argument's, so their schedules are equal (the
    streams differ only in each argument's GM offsets by a constant: costs depend on sizes, and the
    race checks compare accesses of one argument, which keep their relative positions);
    ``loose[b]``: block b's stream is only functionally congruent to its group's first (its
    synchronization differs: own instruction count, indices and schedule); ``watch``: some
    block's written bytes may meet another block's accesses (bounding ranges), so the launch needs
    a watching :class:`Guard`."""
    if len(blocks) >= _MANY:  # block ids must fit the guard's marks
        return None
    groups: list[list[int]] = []
    bases: list[tuple[int, ...]] = [()] * len(blocks)
    loose = [False] * len(blocks)
    for b, (code, args) in enumerate(blocks):
        for g in groups:
            if len(g) >= cores:
                continue
            head = getattr(blocks[g[0]][0], "code", blocks[g[0]][0])
            deltas = congruent(head, getattr(code, "code", code))
            if deltas is None:
                deltas = congruent(head, getattr(code, "code", code), spec)
                if deltas is None:
                    continue
                loose[b] = True
            moved = list(args)
            for a, d in deltas.items():
                if not 0 <= a < len(moved):
                    return None
                moved[a] += d
            bases[b] = tuple(moved)
            g.append(b)
            break
        else:
            groups.append([b])
            bases[b] = tuple(args)
    extents: dict[int, tuple] = {}
    writes = []
    bwrites = []  # (lo, hi, block) of every argument's written bytes
    spans_all = []  # (lo, hi, block) of every argument's bytes
    same = []
    for g in groups:
        code = blocks[g[0]][0]
        if id(code) not in extents:
            extents[id(code)] = (code, _extents(getattr(code, "code", code), spec))
        ext = extents[id(code)][1]
        if ext is None:
            return None
        apart = True
        for b in g:
            args = bases[b]
            spans = []
            writes_b = []
            for a, (rlo, rhi, wlo, whi) in ext.items():
                if not 0 <= a < len(args):
                    return None
                for lo, hi, w in ((rlo, rhi, False), (wlo, whi, True)):
                    if lo < hi:
                        lo, hi = args[a] + lo, args[a] + hi
                        if lo < 0 or hi > gm_size:
                            return None  # a GM fault: the per-block path reports it in order
                        if w:
                            writes.append((lo, hi))
                lo, hi = min(rlo, wlo), max(rhi, whi)
                spans.append((args[a] + lo, args[a] + hi))
                if wlo < whi:
                    writes_b.append((args[a] + wlo, args[a] + whi, b))
                spans_all.append((args[a] + lo, args[a] + hi, b))
            spans.sort()
            apart = apart and not loose[b] and all(x[1] <= y[0] for x, y in zip(spans, spans[1:]))
            bwrites.extend(writes_b)
        same.append(apart)
    regions: list[tuple[int, int]] = []
    for lo, hi in sorted(writes):
        if regions and lo <= regions[-1][1]:
            regions[-1] = (regions[-1][0], max(regions[-1][1], hi))
        else:
            regions.append((lo, hi))
    watch = False  # can a block's written bytes meet another block's (bounding ranges)?
    if bwrites and len(blocks) > 1:
        w = np.array(bwrites, np.int64)
        acc = np.array(spans_all, np.int64)
        watch = bool(((w[:, None, 0] < acc[None, :, 1]) & (acc[None, :, 0] < w[:, None, 1]) &
                      (w[:, None, 2] != acc[None, :, 2])).any())
    return groups, bases, regions, same, loose, watch
