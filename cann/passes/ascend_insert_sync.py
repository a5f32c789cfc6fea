"""``ascend-insert-sync``: make every kernel's instruction stream correct on overlapping pipes.

Mode ``barrier`` (the default, the -O0 strategy) is conservative: between two consecutive
non-sync instructions A (pipe P) and B (pipe Q != P) it inserts ``ascend.pipe_barrier pipe=6``
(PIPE_ALL) right before B, unless the sync instructions already between them order P before Q:

* a ``pipe_barrier`` on ALL, or
* a ``set_flag src_pipe=P, dst_pipe=Q, event=e`` followed by the matching ``wait_flag``.

Scalar-pipe work instructions (``ld_idx``: an index read from UB into a register) are ordinary
instructions on pipe S here: the MTE2 copy that fills the index buffer is ordered before the S
read, and the S register write before the register-addressed MTE2 copy (``copy_gm_to_ub_reg``), so
the race checker (which tracks UB bytes and the scalar registers) sees no race. Only sync and SPMD
control instructions are skipped. Runs on one pipe get nothing (each pipe executes in order); a barrier on a single pipe does not
order two pipes, so it does not count. Every kernel with instructions also ends with a PIPE_ALL
barrier (added unless its last instruction already is one). Existing sync instructions are left as
they are; no barrier is duplicated, so the pass is idempotent.

By induction every pair of instructions on different pipes is then ordered by program order,
which makes the program race-free on any timing model where pipes overlap.

Mode ``flags`` (the -O1 strategy) puts set_flag / wait_flag pairs only where a dependence crosses
pipes, from the footprints the race checker uses; see :mod:`cann.passes.sync_flags`. Both modes read
the SoC from the module's ``tile.soc`` attribute (default ``Ascend910``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from cann.dialects.ascend import AscendInstrOp, KernelOp, is_sync, kernels, make_op
from cann.errors import CannError
from cann.hw import isa
from cann.hw.config import SocSpec, load_soc
from cann.options import DEFAULT_SOC
from cann.passes.sync_flags import insert_flags


def _is_full_barrier(op) -> bool:
    return isinstance(op, AscendInstrOp) and op.DEFN.mnemonic == "pipe_barrier" and op.field("pipe") == isa.Pipe.ALL


def _ordered_by(syncs: list[AscendInstrOp], p: isa.Pipe, q: isa.Pipe) -> bool:
    """Do the sync instructions ``syncs`` (in order, between an op on p and one on q) order p before q?"""
    pending_events: set[int] = set()
    for s in syncs:
        if _is_full_barrier(s):
            return True
        m = s.DEFN.mnemonic
        if m == "set_flag" and s.field("src_pipe") == p and s.field("dst_pipe") == q:
            pending_events.add(s.field("event"))
        elif m == "wait_flag" and s.field("src_pipe") == p and s.field("dst_pipe") == q:
            if s.field("event") in pending_events:
                return True
    return False


def _barrier() -> AscendInstrOp:
    return make_op("pipe_barrier", pipe=int(isa.Pipe.ALL))


def insert_barriers(kernel: KernelOp, spec: SocSpec | None = None) -> int:
    """Mode ``barrier`` on one kernel; returns the number of barriers inserted."""
    added = 0
    prev_pipe: isa.Pipe | None = None
    syncs: list[AscendInstrOp] = []
    ops = kernel.instructions
    for op in ops:
        if is_sync(op):
            syncs.append(op)
            continue
        if op.DEFN.mnemonic == "loop_end":  # the back edge: the next iteration starts over
            if prev_pipe is not None and not any(_is_full_barrier(x) for x in syncs):
                Rewriter.insert_op(_barrier(), InsertPoint.before(op))
                added += 1
            prev_pipe, syncs = None, []
            continue
        if op.DEFN.group == "spmd":  # per-core control resolved by the scalar unit: no data moves
            continue
        pipe = op.exec_pipe
        if prev_pipe is not None and pipe != prev_pipe and not _ordered_by(syncs, prev_pipe, pipe):
            Rewriter.insert_op(_barrier(), InsertPoint.before(op))
            added += 1
        prev_pipe, syncs = pipe, []
    if ops and not _is_full_barrier(ops[-1]):
        Rewriter.insert_op(_barrier(), InsertPoint.at_end(kernel.body.block))
        added += 1
    return added


#: mode name -> kernel rewriter (kernel, SoC) -> number of sync instructions it added / holds
_MODES: dict[str, Callable[[KernelOp, SocSpec], int]] = {"barrier": insert_barriers, "flags": insert_flags}


@dataclass(frozen=True)
class AscendInsertSyncPass(ModulePass):
    """Insert synchronisation between pipes into every ``ascend.kernel``: a ``pipe_barrier`` at every pipe
    change (``mode=barrier``) or set_flag / wait_flag pairs for the cross-pipe dependences only (``mode=flags``).

    ``free_barriers`` (flags only, default true): a barrier replaces a consumer's pairs where
    that is no slower; false keeps every pair, as the wait-deletion test needs."""

    name = "ascend-insert-sync"

    mode: str = "barrier"
    free_barriers: bool = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        rewrite = _MODES.get(self.mode)
        if rewrite is None:
            raise CannError(self.name, f"unknown mode '{self.mode}' (known: {', '.join(sorted(_MODES))})")
        soc = op.attributes.get("tile.soc")
        spec = load_soc(soc.data if soc is not None else DEFAULT_SOC)
        for kernel in kernels(op):
            if rewrite is insert_flags:
                insert_flags(kernel, spec, free_barriers=self.free_barriers)
            else:
                rewrite(kernel, spec)
