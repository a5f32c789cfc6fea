"""Overflow detection of the simulated AI Core (:class:`cann.sim.core.AICore`): which lanes of a
lockstep run produced inf/NaN from finite operands (the handlers call :meth:`OverflowWatch._watch`),
and whether a ``copy_ub_to_gm`` then wrote inf/NaN to GM (:meth:`OverflowWatch._writes_nonfinite`).
See ``KernelStats.overflow``."""

from __future__ import annotations

from collections import deque
from itertools import islice

import numpy as np

from cann.hw import isa
from cann.sim.lanes import _EXP_BITS, _F32, nonfinite_lanes
from cann.sim.timing import BUFS, footprints

_UB = BUFS.index("ub")  # the UB's index in the timing model's footprints


def _written_dtype(ins: isa.Instr) -> np.dtype | None:
    """The dtype of what ``ins`` writes to UB, when it computes (DMA and compares: None)."""
    g, v = ins.defn.group, ins.values
    if g in ("vector", "reduce", "broadcast", "select", "fixpipe", "transpose"):
        return isa.DTYPES.get(v[0])
    if g == "vconv":
        return np.dtype(np.float16) if ins.defn.mnemonic == "vconv_f322f16" else _F32
    if g == "convert":
        return isa.DTYPES.get(v[1])
    return None



class OverflowWatch:
    """Mixin of :class:`cann.sim.core.AICore`: the overflow watch (``_ovf_watch``: the lanes still
    watching, None: none; handlers OR into ``_ovf_hit`` the lanes where a result is inf/NaN from
    finite operands)."""

    def _writes_nonfinite(self, out: isa.Instr, i: int, recent: deque, instrs, lanes: list[int]) -> list[int]:
        """Which of ``lanes`` copy_ub_to_gm ``out`` (instruction ``i`` of ``instrs``) copied inf/NaN out
        on: its UB bytes read as the float dtype of the latest earlier instruction writing them (none,
        or not a float: no lane). Searches ``recent`` (the instructions just before ``i``) first, and
        the stream again from its start only when the writer is older than that window."""
        _, _, src, nburst, burst, ss, _ = out.values
        hi = src + (nburst - 1) * ss + burst
        fps = footprints(self.spec)

        def writes(ins: isa.Instr) -> bool:
            accs = fps[ins.defn.mnemonic](ins.values, self.args)[0]
            return any(b == _UB and w and lo < hi and src < h for b, lo, h, w in accs)

        writer = next((ins for ins in reversed(recent) if writes(ins)), None)
        if writer is None and i > len(recent):
            for ins in islice(iter(instrs), i - len(recent)):
                if writes(ins):
                    writer = ins
        if writer is None:
            return []
        dt = _written_dtype(writer)
        if dt not in _EXP_BITS or burst % dt.itemsize or src % dt.itemsize or ss % dt.itemsize:
            return []
        bad = nonfinite_lanes(self._v("ub", src, (nburst, burst // dt.itemsize), (ss, dt.itemsize), dt))
        return [j for j in lanes if bad[j]]

    def _watch(self, dst: np.ndarray, *srcs: np.ndarray, bad: np.ndarray | None = None) -> None:
        """Overflow detection: flag the lanes where ``dst`` holds inf/NaN while no source does (sources
        not overwritten by the instruction: an in-place operation checks its sources beforehand, and
        passes the lanes where they held inf/NaN as ``bad``)."""
        if self._ovf_watch is None:
            return
        hit = nonfinite_lanes(dst) & self._ovf_watch
        if hit.any():
            if bad is not None:
                hit &= ~bad
            for x in srcs:
                hit &= ~nonfinite_lanes(x)
            self._hit(hit)

    def _hit(self, lanes: np.ndarray) -> None:
        """Record an overflow origin on ``lanes`` (a bool mask; those still watching)."""
        lanes = lanes & self._ovf_watch
        if lanes.any():
            self._ovf_hit = lanes if self._ovf_hit is None else self._ovf_hit | lanes
