"""Cross-block check of atomic-add stores (``copy_ub_to_gm_add``) in one kernel launch.

The blocks of a launch run concurrently on different cores; nothing orders one core's GM accesses
against another's. Several blocks may add to the same GM bytes with ``copy_ub_to_gm_add`` (the
memory side accumulates: the sum does not depend on the order, up to the rounding of each add,
and the simulator adds in block order), but a plain write (``copy_ub_to_gm``) of bytes that
*another* block adds to is a race: the plain value may land before or after the adds. Within one
block the MTE3 queue keeps its stores in order, so a block may write bytes plainly and then add
to them. Reads of added bytes by another block are races of the same kind; the GEMM K split never
reads its output, and this module checks only the writes.

:func:`launch_problems` computes, once per (program, block count, arguments), the exact byte
intervals each block's plain stores and atomic adds touch (loops enumerated from their
``loop_offset`` strides, :func:`cann.sim.l2.intervals`) and returns the conflicts, at most one
message per pair of kinds. Launches without an atomic add cost one scan of the program.
"""

from __future__ import annotations

import numpy as np

from cann.hw import isa
from cann.sim import l2 as l2model
from cann.sim.spmd import stream

ADD = "copy_ub_to_gm_add"
_CACHE: dict[tuple, tuple] = {}


def _absolute(iv: dict, bases: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray] | None:
    los, his = [], []
    for a, x in iv.items():
        if x is None:
            return None
        if a < len(bases):
            los.append(x[0] + bases[a])
            his.append(x[1] + bases[a])
    if not los:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return l2model.merge(np.concatenate(los), np.concatenate(his))


def launch_problems(prog: list[isa.Instr], block_dim: int, args: tuple[int, ...]) -> list[str]:
    """Messages naming each plain GM write of one block that meets GM bytes another block of the
    launch adds to (empty when the launch has no ``copy_ub_to_gm_add`` or no conflict; a block whose
    accesses are too many to enumerate is not checked)."""
    if block_dim < 2 or not any(ins.defn.mnemonic == ADD for ins in prog):
        return []
    key = (id(prog), block_dim, args)
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is prog:
        return hit[1]
    adds, writes = [], []
    for b in range(block_dim):
        try:
            code, bases = stream(prog, b, args)
        except ValueError:
            return []  # the run reports the malformed control at its block
        adds.append(_absolute(l2model.intervals(code, "add"), bases))
        writes.append(_absolute(l2model.intervals(code, "write"), bases))
    out = []
    for b, w in enumerate(writes):
        if w is None or not w[0].size:
            continue
        for o, a in enumerate(adds):
            if o == b or a is None or not a[0].size:
                continue
            # intervals of a that start before each write interval ends and end after it starts
            i = np.searchsorted(a[0], w[1], side="left") - 1  # last add interval starting before each end
            ok = i >= 0
            meet = np.zeros(w[0].size, bool)
            meet[ok] = a[1][i[ok]] > w[0][ok]
            if meet.any():
                j = int(np.flatnonzero(meet)[0])
                lo, hi = int(max(w[0][j], a[0][i[j]])), int(min(w[1][j], a[1][i[j]]))
                out.append(f"block {b} writes GM bytes [{lo}, {hi}) that block {o} adds to (copy_ub_to_gm_add): "
                           f"a race between cores")
                break
        if out:
            break
    if len(_CACHE) >= 1024:
        _CACHE.clear()
    _CACHE[key] = (prog, out)
    return out
