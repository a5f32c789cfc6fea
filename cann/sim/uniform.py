"""Lane classes of a lockstep run's on-chip bytes (:meth:`cann.sim.core.AICore.run_lanes`).

In a lockstep run the lanes (cores) often hold the same bytes: the cores of a convolution that
splits its output channels all load the same feature map from the same GM addresses into L1 and
build the same img2col matrix in L0A; only their weights differ (a convolution split over both
rows and channels has a few groups of such lanes). :class:`Uniform` records, per tracked buffer
(L1, L0A, L0B), byte ranges whose lane classes are known: ``rep[j]``, the first lane holding lane
j's bytes. The MTE and cube handlers (:mod:`cann.sim.mte`) then work on the first lane of each class
only: a GM load, load2d or img2col writes those lanes and owes the other lanes' copies; mmad converts
one A (or B) matrix per class and broadcasts it to the lanes' gemms (the same per-lane BLAS call,
so results are bit-identical: the skipped work would have produced the same bytes).

Rules (the handlers apply them): a GM copy gives its destination the classes of the lanes' GM
addresses (GM is shared: the same address holds the same bytes at that instant); load2d and img2col
give theirs the classes of their source; :meth:`cann.sim.core.AICore._onchip` drops the classes of
every instruction's destination before it runs, making the owed copies there first (a write that
covers its whole range skips those it overwrites). A handler that reads a range lane by lane
without using its classes makes the owed copies there first (:meth:`SharedLanes._flush`). At the
end of every run all owed copies are made and the record is emptied (the next run's lanes may
differ, and buffers may be read or written from outside between runs): every lane's bytes are then
exactly those of running it alone.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

#: the buffers whose lane classes are tracked (the cube's operand path)
TRACKED = ("l1", "l0a", "l0b")


class Layout(NamedTuple):
    """The lanes of a class vector ``rep`` (``rep[j]``: the first lane holding lane j's bytes).

    ``distinct``: the first lanes of the classes, increasing; ``step``: their common difference when
    they are ``0, step, 2 * step, ...`` (a strided view selects them), else None; ``inv[j]``: lane
    j's class (index into ``distinct``); ``block``: q when lane j's class is ``j // q`` (runs of q
    lanes share bytes), ``inter``: q when it is ``j % q`` (lanes q apart share bytes), else 0;
    ``others``: the lanes not first in their class, ``sources``: the first lane of each one's class."""

    distinct: tuple[int, ...]
    step: int | None
    inv: tuple[int, ...]
    block: int
    inter: int
    others: tuple[int, ...]
    sources: tuple[int, ...]


@lru_cache(maxsize=4096)
def classes(keys: tuple) -> tuple[int, ...] | None:
    """The class vector of lanes with ``keys`` (lane j's GM address, say): per lane the first lane
    with an equal key; None when every key differs (nothing shared)."""
    first: dict = {}
    rep = tuple(first.setdefault(k, j) for j, k in enumerate(keys))
    return None if len(first) == len(keys) else rep


@lru_cache(maxsize=4096)
def layout(rep: tuple[int, ...]) -> Layout:
    """The :class:`Layout` of class vector ``rep``."""
    distinct = tuple(sorted(set(rep)))
    where = {r: i for i, r in enumerate(distinct)}
    inv = tuple(where[r] for r in rep)
    n, c = len(rep), len(distinct)
    d = distinct[1] if c > 1 else 1
    step = d if distinct == tuple(range(0, c * d, d)) else None
    q = n // c
    block = q if n % c == 0 and inv == tuple(j // q for j in range(n)) else 0
    inter = c if n % c == 0 and inv == tuple(j % c for j in range(n)) else 0
    others = tuple(j for j in range(n) if rep[j] != j)
    return Layout(distinct, step, inv, block, inter, others, tuple(rep[j] for j in others))


class Uniform:
    """Per buffer of :data:`TRACKED`, sorted disjoint byte ranges ``(lo, hi, rep)`` of known lane
    classes: on every lane j of the current run, bytes ``[lo, hi)`` equal lane ``rep[j]``'s
    (``rep[j] <= j``; all zeros: the same bytes on every lane). Bytes in no range: nothing known.
    Addresses are byte offsets in the buffer; the lists stay short, so operations scan them."""

    __slots__ = ("ranges", "pending")

    def __init__(self) -> None:
        self.ranges: dict[str, list[tuple[int, int, tuple]]] = {b: [] for b in TRACKED}
        #: per buffer, ``(lo, hi, rep)`` ranges (inside ``ranges``) whose bytes so far sit on the first
        #: lane of each class only: the other lanes' copies are owed (:meth:`take`)
        self.pending: dict[str, list[tuple[int, int, tuple]]] = {b: [] for b in TRACKED}

    def clear(self) -> None:
        """Forget every range (no byte is known shared); pending copies must have been taken."""
        for r in self.ranges.values():
            r.clear()
        for r in self.pending.values():
            r.clear()

    def owe(self, buf: str, lo: int, hi: int, rep: tuple[int, int]) -> None:
        """Bytes ``[lo, hi)`` of ``buf``, just marked with classes ``rep``, were written on the first
        lane of each class only: the copies to the other lanes are owed."""
        self.pending[buf].append((lo, hi, rep))

    def take(self, buf: str, lo: int, hi: int, dense: bool = False) -> list[tuple[int, int, tuple]]:
        """Remove and return the owed ranges of ``buf`` meeting ``[lo, hi)`` (whole: the caller makes
        every lane's copy before the bytes are read lane by lane or overwritten). ``dense``: every byte
        of ``[lo, hi)`` is about to be overwritten on every lane: the copies inside it are not needed,
        those outside it stay owed, and nothing is returned."""
        r = self.pending.get(buf)
        if not r:
            return []
        hit = [x for x in r if x[0] < hi and lo < x[1]]
        if not hit:
            return []
        rest = [x for x in r if not (x[0] < hi and lo < x[1])]
        if dense:
            for a, b, rep in hit:
                if a < lo:
                    rest.append((a, lo, rep))
                if hi < b:
                    rest.append((hi, b, rep))
            hit = []
        self.pending[buf] = rest
        return hit

    def take_all(self) -> list[tuple[str, int, int, tuple]]:
        """Remove and return every owed range as ``(buf, lo, hi, rep)``."""
        out = [(b, lo, hi, rep) for b, r in self.pending.items() for lo, hi, rep in r]
        for r in self.pending.values():
            r.clear()
        return out

    def classes(self, buf: str, lo: int, hi: int) -> tuple[int, ...] | None:
        """The class vector of bytes ``[lo, hi)`` of ``buf`` (one range holds them all), None when
        not known (or ``buf`` is untracked)."""
        for a, b, rep in self.ranges.get(buf, ()):
            if a <= lo and hi <= b:
                return rep
        return None

    def mark(self, buf: str, lo: int, hi: int, rep: tuple[int, ...] | None) -> None:
        """Bytes ``[lo, hi)`` of ``buf`` now have lane classes ``rep`` (None: unknown; no-op for an
        untracked buffer). Adjacent ranges of equal classes merge."""
        r = self.ranges.get(buf)
        if r is None or hi <= lo:
            return
        self.drop(buf, lo, hi)
        if rep is None:
            return
        out = []
        for a, b, c in self.ranges[buf]:
            if c == rep and (b == lo or hi == a):
                lo, hi = min(lo, a), max(hi, b)
            else:
                out.append((a, b, c))
        out.append((lo, hi, rep))
        out.sort()
        self.ranges[buf] = out

    def drop(self, buf: str, lo: int, hi: int) -> None:
        """Bytes ``[lo, hi)`` of ``buf`` are about to be written: their classes are no longer
        known (no-op for an untracked buffer)."""
        r = self.ranges.get(buf)
        if not r:
            return
        out = []
        for a, b, c in r:
            if b <= lo or hi <= a:
                out.append((a, b, c))
                continue
            if a < lo:
                out.append((a, lo, c))
            if hi < b:
                out.append((hi, b, c))
        self.ranges[buf] = out


class SharedLanes:
    """Mixin of :class:`cann.sim.core.AICore`: making the owed lane copies of its :class:`Uniform`
    record ``_uni`` (on-chip views through ``_v``)."""

    def _written(self, buf: str, addr: int, nbytes: int, dense: bool = False) -> None:
        """Bytes ``[addr, addr + nbytes)`` of ``buf`` are about to be written (``dense``: every one of
        them, on every lane): make the owed copies there (dense: only those outside it stay owed) and
        forget their lane classes."""
        for a, b, rep in self._uni.take(buf, addr, addr + nbytes, dense):
            self._copy_lanes(buf, a, b, rep)
        self._uni.drop(buf, addr, addr + nbytes)

    def _flush(self, buf: str, lo: int, hi: int) -> None:
        """Make the owed lane copies (:meth:`cann.sim.uniform.Uniform.take`) of ``buf`` meeting
        ``[lo, hi)``: every lane then holds its bytes there."""
        for a, b, rep in self._uni.take(buf, lo, hi):
            self._copy_lanes(buf, a, b, rep)

    def _copy_lanes(self, buf: str, lo: int, hi: int, rep: tuple[int, ...]) -> None:
        """Copy bytes ``[lo, hi)`` of ``buf`` from the first lane of each class of ``rep`` to the others."""
        lanes = self._v(buf, lo, (hi - lo,), (1,))
        lay = layout(rep)
        if len(lay.distinct) == 1:
            lanes[1:] = lanes[:1]
        else:
            lanes[list(lay.others)] = lanes[list(lay.sources)]
