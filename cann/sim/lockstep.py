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

import numpy as np

from cann.hw import isa
from cann.hw.footprint import footprints
from cann.hw.config import SocSpec

#: module switch: False runs every launch block by block (tests compare the two paths)
ENABLED = True

_CONTROL = frozenset({"loop_begin", "loop_end", "loop_offset", "loop_rotate", "loop_rotate_event",
                      "block_offset", "block_offset_mod", "block_if", "block_endif"})
_GM_FIELDS = (("src_arg", "src"), ("dst_arg", "dst"))


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
        names = d.field_names
        gm = [(names.index(a), names.index(o)) for a, o in _GM_FIELDS if a in names and o in names]
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


def plan(blocks: list[tuple[object, tuple[int, ...]]], extents: dict[int, dict | None], gm_size: int,
         cores: int) -> list[list[int]] | None:
    """The lockstep groups of a launch, or None when it must run block by block.

    ``blocks[b]``: block ``b``'s ``(stream, argument bases)``; ``extents[id(stream)]``: its
    :func:`gm_extents`. Groups are lists of consecutive block indices of one wave (``cores``
    blocks) running the same stream, in block order."""
    reads, writes = [], []  # (lo, hi, block) in arena bytes
    for b, (code, args) in enumerate(blocks):
        ext = extents[id(code)]
        if ext is None:
            return None
        for a, (rlo, rhi, wlo, whi) in ext.items():
            if not 0 <= a < len(args):
                return None
            for lo, hi, out in ((rlo, rhi, reads), (wlo, whi, writes)):
                if lo < hi:
                    lo, hi = args[a] + lo, args[a] + hi
                    if lo < 0 or hi > gm_size:
                        return None  # a GM fault: the per-block path reports it in order
                    out.append((lo, hi, b))
    if writes and len(blocks) > 1:
        w = np.array(writes, np.int64)
        acc = np.array(writes + reads, np.int64)
        clash = (w[:, None, 0] < acc[None, :, 1]) & (acc[None, :, 0] < w[:, None, 1]) & (w[:, None, 2] != acc[None, :, 2])
        if clash.any():
            return None  # blocks race on GM: keep the sequential result
    groups: list[list[int]] = []
    for b, (code, _) in enumerate(blocks):
        if groups and b % cores and blocks[groups[-1][-1]][0] is code:
            groups[-1].append(b)
        else:
            groups.append([b])
    return groups
