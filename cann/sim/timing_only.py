"""Timing-only simulation: a model's cycles and profile without computing any value.

:func:`time_model` gives the :class:`~cann.sim.executor.RunStats` of :func:`cann.sim.executor.run_model`
-- every launch's cycles, per-pipe busy cycles, GM / L2 bytes, instruction counts, executed MACs,
the compiled and ideal bounds -- without the functional run: no global-memory arena, no input, no
numpy work on buffer contents. Each block's instruction stream (:func:`cann.sim.spmd.stream`: SPMD
control and hardware loops resolved exactly as in a full run) is timed by
:func:`cann.sim.timing.cached_schedule` with the same cost functions (GM bandwidth shared among
the launch's active cores, the L2 fractions of :mod:`cann.sim.l2`), the same flag, barrier and
wave scheduling, and the same schedule sharing between blocks, so the numbers are identical to a
full run's: a schedule depends on the instructions' fields only, never on data.

What a timing-only run does not do (docs/core-model.md, "Timing-only runs"):

* the functional interpreter's per-instruction checks (operands inside their buffers, alignment,
  field values) and the Gather index-range check of ``ld_idx`` (the index is data): the compiled
  code is trusted (the compiler's own checks hold), and a model the full run rejects for such a
  fault may time without error;
* float overflow detection (no values);
* data-dependent addressing: ``copy_gm_to_ub_reg`` (Gather rows addressed by a register that
  ``ld_idx`` loads from UB) costs the same whatever the register holds (its size fields give the
  cycles), and for the race detector its GM footprint is conservative: every row any index the
  register's last ``ld_idx`` allows (``[0, bound)``) could read.

The synchronization checks stay: races (operand footprints need no values), deadlocking waits,
flags set twice or leaked, as ``sim_checks`` says (``"off"`` skips the race detector: faster).
"""

from __future__ import annotations

from cann.codegen.om import OfflineModel
from cann.errors import CannError
from cann.hw.config import SocSpec
from cann.sim.core import RECORD_LIMIT, KernelStats, SimError, _Recorded
from cann.sim.cost import cost_functions
from cann.sim.executor import MAX_DYNAMIC_INSTRUCTIONS, check_atomic, l2_fractions, prepare, shares_timing
from cann.sim.stats import RunStats, add_launch
from cann.sim.spmd import stream
from cann.sim.timing import PIPES, Timing, cached_schedule


def time_model(om: OfflineModel, *, sim_checks: str = "error",
               max_instructions: int = MAX_DYNAMIC_INSTRUCTIONS) -> RunStats:
    """The statistics of running ``om`` (:func:`cann.sim.executor.run_model`'s ``RunStats``, with
    identical cycles, pipe busy cycles and bytes) computed without values: no inputs, no outputs,
    ``overflow`` always None. ``sim_checks`` and ``max_instructions`` as in ``run_model``.

    Raises:
        CannError: an invalid model, more than ``max_instructions`` instructions, a bad
            ``sim_checks``, a kernel mixing cube and vector work on a separated SoC, a malformed
            block control.
        SimError: with ``sim_checks="error"`` a race, deadlock or flag set twice (not the
            functional interpreter's operand checks: see the module docstring).
    """
    spec, decoded = prepare(om, sim_checks, max_instructions)
    stats = RunStats(0, 0, [], spec.name, spec.clock_mhz)
    for li, la in enumerate(om.launches):
        k = om.kernels[la.kernel]
        prog, kind = decoded[la.kernel]
        ncores = spec.core_count("aiv" if kind == "aiv" else "aic")
        args = tuple(la.args)
        share = shares_timing(prog, args, sim_checks)
        fr = l2_fractions(prog, k.block_dim, args, spec, ncores)
        check_atomic(prog, k, args, sim_checks, stats)
        reg_bounds = any(ins.defn.group == "dma_reg" for ins in prog)
        timings: dict[tuple, Timing] = {}  # (stream id, L2 fractions) -> schedule, when shared
        runs = []
        for b in range(k.block_dim):
            try:
                bprog, bargs = stream(prog, b, args)
            except ValueError as e:
                raise CannError(f"kernel '{k.name}'", f"block {b}: {e}") from None
            key = (id(bprog), fr[b])
            t = timings.get(key) if share else None
            if t is None:
                t = _schedule(bprog, bargs, spec, min(k.block_dim, ncores), fr[b],
                              k.name if k.block_dim == 1 else f"{k.name}[block {b}]", sim_checks, reg_bounds)
                if share:
                    timings[key] = t
            runs.append(_stats(t, bprog))
        add_launch(stats, li, k, kind, spec, runs, ncores, la.work)
    return stats


def _schedule(code, args: tuple[int, ...], spec: SocSpec, active: int, l2: tuple, name: str, checks: str,
              reg_bounds: bool) -> Timing:
    shared, full = cost_functions(spec, active, l2)
    return cached_schedule(code, spec, shared, full, args, active, name, checks, SimError, record=RECORD_LIMIT,
                           l2=l2, reg_bounds=reg_bounds)


def _stats(t: Timing, code) -> KernelStats:
    """A block's :class:`KernelStats` from its schedule (the fields a full run derives from the same
    schedule; ``program``: the stream's first instructions, walked if a trace asks)."""
    return KernelStats(int(t.cycles), t.instructions, dict(zip(PIPES, t.busy)), dict(zip(PIPES, t.busy_full)),
                       t.gm_read_bytes, t.gm_write_bytes, sum(t.busy), t, t.problems, _Recorded(code), t.macs,
                       None, None, t.l2_read_bytes)
