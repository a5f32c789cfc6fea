"""The chip-wide L2 cache: which GM reads of a launch are served by the L2 instead of HBM.

Model (docs/core-model.md, "L2"): within one kernel launch, a GM byte that ``k`` blocks of the
launch read comes from HBM once and from the L2 the other ``k - 1`` times. The blocks run
concurrently, so no block is "first": each of the ``k`` reads is charged ``(k - 1) / k`` at the
L2 rate (``SocSpec.l2.rate``) and ``1 / k`` at the HBM rate. When the launch reads more distinct
bytes than the L2 holds (``SocSpec.l2.size``), only blocks reading the byte together (same wave,
same code, same argument base: the same point of the same stream) are sure to share it; the L2
share between such groups is scaled by ``size / distinct bytes`` (:func:`launch_fractions`).
A block re-reading its own bytes is not a hit (only sharing between the blocks of a launch is
modeled), writes go to HBM, and a launch starts with an empty L2.

The granularity is per (block, kernel argument): :func:`read_intervals` computes, once per
instruction stream, the exact byte intervals its GM reads touch per argument (relative to the
argument's base; loops enumerated with numpy from their ``loop_offset`` strides, never walked
instruction by instruction), and :func:`launch_fractions` turns the blocks' intervals into one
L2 fraction per (block, argument) in units of 1 / :data:`SCALE`, which the cost model applies to
every read of that argument (:class:`cann.sim.cost.CostModel`). Register-addressed copies
(``copy_gm_to_ub_reg``: data-dependent addresses) are neither hits nor counted.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from cann.hw import isa
from cann.hw.config import SocSpec
from cann.sim.spmd import Stream

#: L2 fractions are integers in units of 1 / SCALE (the cost model's ``l2`` tuples)
SCALE = 1024
#: the most burst intervals one instruction may enumerate over its loops, and the most intervals a
#: launch may combine; past them the instruction's argument (or the launch) gets no L2 hits
MAX_INTERVALS = 1 << 21
#: offsets, sizes and strides (bytes) at or past this are no GM address (int64 arithmetic stays exact)
_HUGE = 1 << 48


@cache
def read_arg_field(mnemonic: str) -> int | None:
    """Field index of the GM source argument of an L2-modeled read (``copy_gm_to_l1``,
    ``copy_gm_to_ub``, ``copy_gm_to_l1_nd2nz``), else None."""
    d = isa.BY_MNEMONIC[mnemonic]
    if d.group not in ("dma", "nd2nz") or "src_arg" not in d.field_names:
        return None
    return d.field_names.index("src_arg")


def _burst_shape(ins: isa.Instr) -> tuple[int, int, int, int, int] | None:
    """``(arg, offset, nburst, burst, stride)`` of an L2-modeled GM read, else None."""
    m = ins.defn.mnemonic
    if read_arg_field(m) is None:
        return None
    v = ins.values
    if ins.defn.group == "nd2nz":  # dtype, dst, src_arg, src, rows, cols, src_row_stride
        isz = isa.DTYPES[v[0]].itemsize if v[0] in isa.DTYPES else 2
        return v[2], v[3], v[4], v[5] * isz, v[6]
    _, a, src, nb, b, ss, _ = v  # dst, src_arg, src, nburst, burst, src_stride, dst_stride
    return a, src, nb, b, ss


def merge(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals ``[lo, hi)`` as sorted, disjoint, non-adjacent intervals."""
    keep = hi > lo
    lo, hi = lo[keep], hi[keep]
    if lo.size <= 1:
        return lo.astype(np.int64), hi.astype(np.int64)
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], hi[order]
    reach = np.maximum.accumulate(hi)
    start = np.ones(lo.size, bool)
    start[1:] = lo[1:] > reach[:-1]
    first = np.flatnonzero(start)
    last = np.append(first[1:], lo.size) - 1
    return lo[first].astype(np.int64), reach[last].astype(np.int64)


def _instr_intervals(shape, levels) -> tuple[int, np.ndarray, np.ndarray] | None:
    """The intervals one read touches over its enclosing loops ``levels`` (``(count, {arg: stride})``,
    outermost first), relative to its argument's base; None when there are too many."""
    a, off, nb, b, ss = shape
    if any(abs(x) >= _HUGE for x in (off, nb, b, ss)) or \
            any(abs(st) >= _HUGE for _, strides in levels for st in strides.values()):
        return None  # fields past any GM (a corrupt model): no hits; the run reports the address itself
    if nb < 1 or b < 1:
        return a, np.zeros(0, np.int64), np.zeros(0, np.int64)
    if ss <= b or nb == 1:  # contiguous or overlapping bursts: one interval
        starts, length = np.array([off], np.int64), (nb - 1) * ss + b
    else:
        if nb > MAX_INTERVALS:
            return None
        starts, length = off + np.arange(nb, dtype=np.int64) * ss, b
    for count, strides in levels:
        st = strides.get(a, 0)
        if st == 0 or count <= 1:  # the iterations re-read the same bytes
            continue
        if starts.size * count > MAX_INTERVALS:
            return None
        starts = (starts[None, :] + np.arange(count, dtype=np.int64)[:, None] * st).reshape(-1)
    return a, starts, starts + length


def _store_shape(ins: isa.Instr, mnemonic: str) -> tuple[int, int, int, int, int] | None:
    """``(arg, offset, nburst, burst, stride)`` of a GM store ``mnemonic``, else None."""
    if ins.defn.mnemonic != mnemonic:
        return None
    dst_arg, dst, _, nb, b, _, ds = ins.values[:7]
    return dst_arg, dst, nb, b, ds


def read_intervals(code) -> dict[int, tuple[np.ndarray, np.ndarray] | None]:
    """Per kernel argument, the merged byte intervals ``(lo, hi)`` (relative to the argument's
    base) that the L2-modeled GM reads of ``code`` touch; None for an argument with a read too
    large to enumerate (:data:`MAX_INTERVALS`). ``code``: a core's instructions, a list or a
    :class:`cann.sim.spmd.Stream` (its loop tree is used: loops are not walked)."""
    return intervals(code, "read")


def intervals(code, kind: str) -> dict[int, tuple[np.ndarray, np.ndarray] | None]:
    """As :func:`read_intervals`, for the GM accesses of ``kind``: ``read`` (the L2-modeled reads),
    ``write`` (``copy_ub_to_gm``) or ``add`` (``copy_ub_to_gm_add``)."""
    shape_of = _burst_shape if kind == "read" else \
        (lambda ins: _store_shape(ins, "copy_ub_to_gm" if kind == "write" else "copy_ub_to_gm_add"))
    parts: dict[int, list] = {}
    bad: set[int] = set()

    def visit(items, levels):
        for x in items:
            if type(x) is tuple:  # (loop_begin, offs, strides, rots, body, loop_end)
                begin, _, strides, _, body, _ = x
                if begin.count > 0:
                    visit(body, levels + ((begin.count, dict(strides)),))
                continue
            ins = x if type(x) is isa.Instr else x.ins  # a loop_step target: its GM fields are not stepped
            if ins.defn.group not in ("dma", "nd2nz"):
                continue
            shape = shape_of(ins)
            if shape is None:
                continue
            r = _instr_intervals(shape, levels)
            if r is None:
                bad.add(shape[0])
            else:
                parts.setdefault(r[0], []).append((r[1], r[2]))

    visit(code.tree if isinstance(code, Stream) else code, ())
    out: dict[int, tuple[np.ndarray, np.ndarray] | None] = {a: None for a in bad}
    for a, lst in parts.items():
        if a not in bad:
            out[a] = merge(*lst[0]) if len(lst) == 1 else \
                merge(np.concatenate([x[0] for x in lst]), np.concatenate([x[1] for x in lst]))
    return out


_INTERVALS: dict[int, tuple] = {}  # id(code) -> (code, read_intervals(code)); the code object held


def _cached_intervals(code) -> dict:
    hit = _INTERVALS.get(id(code))
    if hit is None or hit[0] is not code:
        if len(_INTERVALS) >= 4096:
            _INTERVALS.clear()
        hit = _INTERVALS[id(code)] = (code, read_intervals(code))
    return hit[1]


def launch_fractions(blocks: list[tuple[object, tuple[int, ...]]], spec: SocSpec,
                     cores: int | None = None) -> list[tuple[int, ...]]:
    """The L2 fraction of every (block, argument) of a launch, in units of 1 / :data:`SCALE`.

    ``blocks[b]``: ``(code, argument bases)`` of block ``b`` (:func:`cann.sim.spmd.stream`);
    ``cores``: blocks per wave (block ``b`` runs in wave ``b // cores``; None: one wave).

    Per argument, the blocks of one wave running the same code with the same base for it form a
    *group*: they read the same bytes at the same point of their streams, together. At a byte
    read through the argument by ``k`` blocks in ``G`` groups, the L2 serves ``(k - G) + (G - 1) *
    scale`` of the ``k`` reads, ``scale = min(1, l2.size / distinct bytes the launch reads)``: the
    first group fetches it from HBM, the other members of a group find it in the L2, and another
    group (another time) finds it there if the launch's footprint fits. Each of the ``k`` reads is
    charged that share / ``k``; a block's fraction is the mean over the bytes it reads through the
    argument, rounded down. A block without any shared byte gets ``()`` (no L2: the plain HBM
    formulas). Vectorized over groups and intervals.
    """
    n = len(blocks)
    if n < 2:
        return [()] * n
    cores = cores or n
    nargs = max(len(bases) for _, bases in blocks)
    per_arg = []  # per argument: (group of each block or -1, group sizes, group los, group his, owner of each interval)
    all_lo, all_hi = [], []
    total = 0
    for a in range(nargs):
        groups: dict[tuple, int] = {}
        of_block = [-1] * n
        sizes: list[int] = []
        los, his, owners = [], [], []
        for b, (code, bases) in enumerate(blocks):
            if a >= len(bases):
                continue
            x = _cached_intervals(code).get(a)
            if x is None or not x[0].size:
                continue
            key = (b // cores, id(code), bases[a])
            g = groups.get(key)
            if g is None:
                g = groups[key] = len(sizes)
                sizes.append(0)
                total += x[0].size
                if total > MAX_INTERVALS:
                    return [()] * n
                los.append(x[0] + bases[a])
                his.append(x[1] + bases[a])
                owners.append(np.full(x[0].size, g, np.int64))
            sizes[g] += 1
            of_block[b] = g
        if sizes:
            lo, hi = np.concatenate(los), np.concatenate(his)
            per_arg.append((of_block, np.array(sizes, np.int64), lo, hi, np.concatenate(owners)))
            all_lo.append(lo)
            all_hi.append(hi)
        else:
            per_arg.append(None)
    if not all_lo:
        return [()] * n
    ulo, uhi = merge(np.concatenate(all_lo), np.concatenate(all_hi))
    distinct = int((uhi - ulo).sum())
    scale = min(1.0, spec.l2.size / distinct)
    frac = np.zeros((n, nargs), np.int64)
    for a, entry in enumerate(per_arg):
        if entry is None:
            continue
        of_block, sizes, lo, hi, owner = entry
        if sizes.sum() < 2:
            continue
        points = np.unique(np.concatenate([lo, hi]))
        dk = np.zeros(points.size, np.int64)
        dg = np.zeros(points.size, np.int64)
        at_lo, at_hi = np.searchsorted(points, lo), np.searchsorted(points, hi)
        np.add.at(dk, at_lo, sizes[owner])
        np.add.at(dk, at_hi, -sizes[owner])
        np.add.at(dg, at_lo, 1)
        np.add.at(dg, at_hi, -1)
        k = np.cumsum(dk)[:-1]  # blocks reading segment [points[i], points[i + 1]) through the argument
        g = np.cumsum(dg)[:-1]  # their groups
        if not (k > 1).any():
            continue
        hits = np.where(k > 1, ((k - g) + (g - 1) * scale) / np.maximum(k, 1), 0.0) * np.diff(points)
        cum = np.concatenate([[0.0], np.cumsum(hits)])
        ghits = np.bincount(owner, cum[at_hi] - cum[at_lo], sizes.size)
        gbytes = np.bincount(owner, (hi - lo).astype(np.float64), sizes.size)
        gfrac = np.minimum(np.floor(ghits / np.maximum(gbytes, 1) * SCALE + 1e-9), SCALE).astype(np.int64)
        ob = np.array(of_block, np.int64)
        frac[ob >= 0, a] = gfrac[ob[ob >= 0]]
    out = []
    for row in frac.tolist():
        while row and not row[-1]:
            row.pop()
        out.append(tuple(row))
    return out
