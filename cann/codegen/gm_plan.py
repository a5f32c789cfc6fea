"""The static global-memory (GM) plan of a host program: where each GM tensor of ``@main`` lives.

Layout of the arena (bytes, every start 64-byte aligned)::

    [ model inputs | weights (every tile.constant) | activations and workspaces (tile.gm_alloc) ]

The model inputs come first, one after the other, never shared (the caller writes them before the
first launch, and an input may also be an output). The weights follow, never shared. Each
``tile.gm_alloc`` (an activation a kernel writes, or a kernel's workspace) is a *buffer* with a
lifetime over the launch order: ``[first, last]``, the first and the last launch (``tile.launch``,
numbered from 0) with an argument that is the buffer or a ``tile.view`` of it (views alias their
source's bytes: a Reshape or Flatten shares its input's storage, so uses of a view are uses of the
buffer it views). A model output lives to the end (launch count ``n``); a buffer no launch uses is
live over the whole program ``[0, n]`` (its bytes stay the arena's initial zeros).

With ``reuse`` (the default; ATC reuses activation memory the same way) two buffers whose
lifetimes do not intersect may share bytes. A kernel reads its inputs while it writes its outputs,
so lifetimes are closed intervals: a buffer last read by launch ``i`` and one first written by
launch ``i`` never share. Offsets are assigned by the *greedy-by-size* strategy of TensorFlow Lite's
memory planners (Pisarchyk and Lee, "Efficient Memory Management for Deep Neural Net Inference",
2020): buffers in decreasing size (then first use, then program order), each at the smallest gap
between the already placed buffers its lifetime intersects where it fits, else above the highest
of them. Placing the large activations first leaves few holes. The same best fit is also tried
with ties broken by the longer lifetime, and in first-use order (what a run-time allocator such
as onnxruntime's, whose memory pattern replays it, sees); the smallest arena wins (the first of
equal ones), never more than program order. On the light zoo and the exported fixtures the result
is the lower bound (the largest sum of simultaneously live buffers, :attr:`GmPlan.live_peak`)
for 12 of 14 models, ResNet-50 included, and at most 20% above it (``benchmarks/memory.py``);
greedy by size alone was 11% above on ResNet-50, first-use order alone up to 28% above. Without
``reuse`` every buffer gets its own bytes in program order (the layout before reuse existed).

:func:`plan_memory` checks its result in every compile (not only in tests): no two buffers live
at the same launch overlap (:func:`check_plan`), so no launch, on any of its cores, writes bytes
another live tensor holds. The plan is deterministic: it depends only on the program.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.dialects import func
from xdsl.ir import SSAValue

from cann.dialects import tile
from cann.dialects.graph_base import numpy_dtype as np_dtype
from cann.errors import CannError

ALIGN = 64  # bytes: every tensor, the weights section and the arena start at a multiple of it


def align(n: int) -> int:
    """``n`` rounded up to a multiple of :data:`ALIGN`."""
    return -(-n // ALIGN) * ALIGN


def nbytes(v: SSAValue) -> int:
    """Bytes of the memref value ``v`` (dense, its element type's size)."""
    t = v.type
    return int(np.prod(t.get_shape())) * np_dtype(t.element_type).itemsize


@dataclass(frozen=True)
class Buffer:
    """A ``tile.gm_alloc`` of ``@main``: ``index`` its place among them (program order), ``size``
    its bytes rounded up to :data:`ALIGN`, live from launch ``first`` to launch ``last`` inclusive
    (``last`` = the launch count for a model output)."""

    index: int
    size: int
    first: int
    last: int

    def overlaps_in_time(self, other: Buffer) -> bool:
        return self.first <= other.last and other.first <= self.last


@dataclass(frozen=True)
class GmPlan:
    """A GM plan: ``offset`` (byte offset of every GM value of ``@main``: its arguments,
    ``tile.constant``, ``tile.gm_alloc`` and ``tile.view`` results), the weights section's offset
    and bytes, ``size`` (the arena's bytes, a multiple of :data:`ALIGN`, at least one ALIGN),
    ``reuse``, the buffers with their ``arena`` offsets (relative to ``arena_offset``, where the
    activations start), ``unshared`` (bytes the buffers take without reuse) and ``live_peak``
    (the most bytes of buffers live at one launch: no plan of these buffers is smaller)."""

    offset: dict[SSAValue, int]
    weights_offset: int
    weights: bytes
    size: int
    reuse: bool
    arena_offset: int
    buffers: tuple[Buffer, ...]
    arena: tuple[int, ...]  # per buffer, its offset from arena_offset
    unshared: int
    live_peak: int
    allocs: tuple[SSAValue, ...] = ()  # the tile.gm_alloc results, in the order of ``buffers``

    def lifetime(self, v: SSAValue) -> tuple[int, int] | None:
        """(first, last) launch of the buffer ``v`` is or views; None for an input or a constant
        (its bytes are its own for the whole program)."""
        root = _root(v)[0]
        if root in self.allocs:
            b = self.buffers[self.allocs.index(root)]
            return b.first, b.last
        return None

    @property
    def activation_bytes(self) -> int:
        """The arena's bytes that are not weights: model inputs, activations, workspaces."""
        return self.size - len(self.weights)


def _root(v: SSAValue) -> tuple[SSAValue, int]:
    """(the value ``v`` is a view of, through any chain of ``tile.view``, byte offset in it)."""
    off = 0
    while isinstance(v.owner, tile.ViewOp):
        op = v.owner
        off += (op.offset.value.data if op.offset is not None else 0) * np_dtype(op.res.type.element_type).itemsize
        v = op.src
    return v, off


def lifetimes(main: func.FuncOp) -> tuple[list[SSAValue], list[Buffer]]:
    """The ``tile.gm_alloc`` results of ``main`` in program order and their :class:`Buffer`."""
    allocs = [op.res for op in main.body.block.ops if isinstance(op, tile.GmAllocOp)]
    index = {v: i for i, v in enumerate(allocs)}
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    n = 0
    for op in main.body.block.ops:
        if isinstance(op, tile.LaunchOp):
            for a in op.args:
                i = index.get(_root(a)[0])
                if i is not None:
                    first.setdefault(i, n)
                    last[i] = n
            n += 1
    for op in main.body.block.ops:
        if isinstance(op, func.ReturnOp):
            for v in op.operands:
                i = index.get(_root(v)[0])
                if i is not None:
                    first.setdefault(i, 0)
                    last[i] = n
    return allocs, [Buffer(i, align(nbytes(v)), first.get(i, 0), last.get(i, n)) for i, v in enumerate(allocs)]


#: the orders :func:`assign` places the buffers in, each with best fit; the smallest arena wins
#: (the first of equal ones): greedy by size, ties by first use; by size, ties by the longer
#: lifetime; by first use (the order a run-time allocator sees them)
ORDERS = (
    lambda b: (-b.size, b.first, b.index),
    lambda b: (-b.size, b.first - b.last, b.first, b.index),
    lambda b: (b.first, b.index),
)


def assign(buffers: list[Buffer], reuse: bool = True) -> list[int]:
    """Each buffer's offset in the activation arena (see the module docstring): program order
    without ``reuse``; with it, the smallest of the best-fit placements in the :data:`ORDERS`
    and program order (reuse never grows the arena)."""
    if not reuse:
        out, top = [], 0
        for b in buffers:
            out.append(top)
            top += b.size
        return out
    best = assign(buffers, False)
    for order in ORDERS:
        cand = _best_fit(buffers, sorted(buffers, key=order))
        if _end(buffers, cand) < _end(buffers, best):
            best = cand
    return best


def _end(buffers: list[Buffer], arena: list[int]) -> int:
    return max((o + b.size for o, b in zip(arena, buffers)), default=0)


def _best_fit(buffers: list[Buffer], order: list[Buffer]) -> list[int]:
    """Offsets placing ``order``'s buffers one by one, each at the smallest gap between the placed
    buffers its lifetime intersects where it fits, else above the highest of them."""
    placed: list[tuple[int, Buffer]] = []  # (offset, buffer), kept sorted by offset
    out = [0] * len(buffers)
    for b in order:
        best, best_gap, top = None, None, 0
        for off, o in placed:
            if not b.overlaps_in_time(o):
                continue
            gap = off - top
            if gap >= b.size and (best_gap is None or gap < best_gap):
                best, best_gap = top, gap
            top = max(top, off + o.size)
        off = top if best is None else best
        out[b.index] = off
        placed.append((off, b))
        placed.sort(key=lambda p: (p[0], p[1].index))
    return out


def live_peak(buffers: list[Buffer]) -> int:
    """The most bytes of buffers live at one launch."""
    events: dict[int, int] = {}
    for b in buffers:
        events[b.first] = events.get(b.first, 0) + b.size
        events[b.last + 1] = events.get(b.last + 1, 0) - b.size
    peak = cur = 0
    for t in sorted(events):
        cur += events[t]
        peak = max(peak, cur)
    return peak


def check_plan(buffers: list[Buffer], arena: list[int], names: list[str] | None = None) -> None:
    """Raise if two buffers live at the same launch overlap in the arena.

    Raises:
        CannError: naming the two buffers (``names``, else ``gm_alloc #i``), their byte ranges and
            lifetimes (an internal error of the planner: the kernels would corrupt a live tensor).
    """
    def name(i: int) -> str:
        return names[i] if names else f"gm_alloc #{i}"

    order = sorted(range(len(buffers)), key=lambda i: (arena[i], i))
    active: list[int] = []  # buffers whose byte range may still reach the next start
    for i in order:
        b = buffers[i]
        active = [j for j in active if arena[j] + buffers[j].size > arena[i]]
        for j in active:
            o = buffers[j]
            if b.size and o.size and b.overlaps_in_time(o):
                raise CannError("gm plan", f"{name(j)} [{arena[j]}, {arena[j] + o.size}) live at launches "
                                           f"{o.first}..{o.last} overlaps {name(i)} [{arena[i]}, {arena[i] + b.size}) "
                                           f"live at launches {b.first}..{b.last}")
        active.append(i)


def plan_memory(main: func.FuncOp, reuse: bool = True) -> GmPlan:
    """The GM plan of host program ``main`` (module docstring), checked by :func:`check_plan`.

    Raises:
        CannError: two simultaneously live buffers overlap (a planner bug; never expected).
    """
    offset: dict[SSAValue, int] = {}
    top = 0
    for a in main.body.block.args:
        offset[a] = top
        top = align(top + nbytes(a))
    weights_offset = top
    blobs: list[bytes] = []
    wtop = 0
    for op in main.body.block.ops:
        if isinstance(op, tile.ConstantOp):
            offset[op.res] = weights_offset + wtop
            data = op.value.data.data
            blobs.append(data + bytes(align(len(data)) - len(data)))
            wtop += align(len(data))
    base = weights_offset + wtop
    allocs, buffers = lifetimes(main)
    arena = assign(buffers, reuse)
    check_plan(buffers, arena)
    for v, off in zip(allocs, arena):
        offset[v] = base + off
    for op in main.body.block.ops:
        if isinstance(op, tile.ViewOp):
            root, off = _root(op.res)
            offset[op.res] = offset[root] + off
    end = max((off + b.size for off, b in zip(arena, buffers)), default=0)
    return GmPlan(offset, weights_offset, b"".join(blobs), max(align(base + end), ALIGN), reuse, base,
                  tuple(buffers), tuple(arena), sum(b.size for b in buffers), live_peak(buffers), tuple(allocs))
