"""The statistics of a simulated model run: per launch (:class:`LaunchStats`) and in total
(:class:`RunStats`), with the profile derived from the per-core runs (msprof pipe ratios, the
compiled bound, the ideal bound; docs/core-model.md, "Profile"). Re-exported by
:mod:`cann.sim.executor`, which fills them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cann.codegen.om import LaunchWork
from cann.hw.config import SocSpec
from cann.sim.core import KernelStats
from cann.sim.timing import PIPES


#: msprof PipeUtilization columns: (column, core kind, pipe) -- kind "aic" for cube-side pipes,
#: "aiv" for vector-side ones; on a coupled core the cube-side pipes fill the aic_* columns and the
#: vector unit fills aiv_vec_ratio; aic_fixpipe_ratio has no pipe in this ISA (no FixPipe
#: instructions yet) and is 0 on parts with a FixPipe, empty on parts without one.
RATIO_COLUMNS = (
    ("aic_cube_ratio", "aic", "M"), ("aic_mte1_ratio", "aic", "MTE1"), ("aic_mte2_ratio", "aic", "MTE2"),
    ("aic_mte3_ratio", "aic", "MTE3"), ("aic_scalar_ratio", "aic", "S"), ("aic_fixpipe_ratio", "aic", "FIX"),
    ("aiv_vec_ratio", "aiv", "V"), ("aiv_mte2_ratio", "aiv", "MTE2"), ("aiv_mte3_ratio", "aiv", "MTE3"),
    ("aiv_scalar_ratio", "aiv", "S"),
)
#: the binding resource named after a pipe
RESOURCE = {"S": "scalar", "V": "vector", "M": "cube", "MTE1": "mte1", "MTE2": "mte2", "MTE3": "mte3"}


@dataclass
class LaunchStats:
    """One kernel launch: its per-core runs and the profile derived from them.

    ``cycles``: the launch's time (sum over waves of the slowest core); ``instructions``: executed
    over all cores; ``core_kind``: "aicore" (coupled), "aic" or "aiv" (separated);
    ``compiled_bound``: the lower bound of the code as compiled in cycles (each pipe's busy cycles
    at the full per-core rate, HBM bytes -- GM bytes minus L2 hits -- over ``gm_total``),
    ``bound``: its binding resource; ``l2_read_bytes``: of ``gm_read_bytes``, those served by the
    L2 (:mod:`cann.sim.l2`);
    ``work``: the model work the launch computes (from the ``.om``); ``executed_macs``: the
    MACs of the mmad and vmla instructions run on all cores (padding included); ``ideal_cycles``: the
    ideal bound of ``work`` on the whole SoC (:func:`ideal_cycles`). docs/core-model.md, "Profile".
    """

    index: int
    name: str
    block_dim: int
    core_kind: str
    clock_mhz: int
    cycles: int
    instructions: int
    cores: list[KernelStats] = field(default_factory=list, repr=False)
    waves: list[list[int]] = field(default_factory=list, repr=False)  # block indices per wave
    gm_read_bytes: int = 0
    gm_write_bytes: int = 0
    compiled_bound: int = 0
    bound: str = ""
    busy_by_pipe: dict[str, float] = field(default_factory=dict)  # mean over blocks
    has_fixpipe: bool = False
    work: LaunchWork = LaunchWork()
    executed_macs: int = 0
    ideal_cycles: int = 0
    l2_read_bytes: int = 0  # of gm_read_bytes, served by the L2 (read by several blocks: cann.sim.l2)

    @property
    def time_us(self) -> float:
        return self.cycles / self.clock_mhz

    @property
    def compiled_bound_pct(self) -> float:
        """100 x compiled_bound / cycles."""
        return _pct(self.compiled_bound, self.cycles)

    @property
    def model_macs(self) -> int:
        return self.work.model_macs

    @property
    def ideal_pct(self) -> float:
        """100 x ideal_cycles / cycles (0 for a launch computing no model work)."""
        return _pct(self.ideal_cycles, self.cycles)

    @property
    def hbm_read_bytes(self) -> int:
        """GM bytes read from HBM (``gm_read_bytes`` minus the L2 hits)."""
        return self.gm_read_bytes - self.l2_read_bytes

    @property
    def busy_by_pipe_ratio(self) -> dict[str, float]:
        return {p: (b / self.cycles if self.cycles else 0.0) for p, b in self.busy_by_pipe.items()}

    def ratios(self) -> dict[str, float | None]:
        """The msprof PipeUtilization ratios (:data:`RATIO_COLUMNS`); None where the core has no such unit."""
        r = self.busy_by_pipe_ratio
        out: dict[str, float | None] = {}
        for col, kind, pipe in RATIO_COLUMNS:
            if pipe == "FIX":
                out[col] = 0.0 if self.has_fixpipe and self.core_kind == "aic" else None
            elif self.core_kind == "aicore":
                out[col] = r[pipe] if (kind == "aic" and pipe != "V") or pipe == "V" else None
            elif self.core_kind == kind:
                out[col] = r[pipe]
            else:
                out[col] = None
        return out

    def profile(self) -> dict[str, object]:
        """One profile row: launch, kernel, block_dim, core_kind, cycles, time_us, the ratios,
        gm_read_bytes, gm_write_bytes, l2_read_bytes, hbm_read_bytes, compiled_bound_cycles,
        compiled_bound_pct, bound, model_macs, executed_macs, compulsory_bytes, ideal_cycles, ideal_pct."""
        return {"launch": self.index, "kernel": self.name, "block_dim": self.block_dim, "core_kind": self.core_kind,
                "cycles": self.cycles, "time_us": self.time_us, **self.ratios(),
                "gm_read_bytes": self.gm_read_bytes, "gm_write_bytes": self.gm_write_bytes,
                "l2_read_bytes": self.l2_read_bytes, "hbm_read_bytes": self.hbm_read_bytes,
                "compiled_bound_cycles": self.compiled_bound, "compiled_bound_pct": self.compiled_bound_pct,
                "bound": self.bound, "model_macs": self.model_macs, "executed_macs": self.executed_macs,
                "compulsory_bytes": self.work.compulsory_bytes, "ideal_cycles": self.ideal_cycles,
                "ideal_pct": self.ideal_pct}


def _pct(part: int, whole: int) -> float:
    return 100.0 * part / whole if whole else 0.0


@dataclass
class RunStats:
    """Totals over all launches and the per-launch records (``kernels``, also ``launches``)."""

    cycles: int
    instructions: int
    kernels: list[LaunchStats] = field(default_factory=list)
    soc: str = ""
    clock_mhz: int = 1
    problems: list[tuple[str, str]] = field(default_factory=list)
    #: the first float overflow (location, message): a kernel producing inf/NaN from finite operands
    overflow: tuple[str, str] | None = None

    @property
    def launches(self) -> list[LaunchStats]:
        return self.kernels

    @property
    def time_us(self) -> float:
        return self.cycles / self.clock_mhz

    @property
    def compiled_bound(self) -> int:
        """Σ of the launches' compiled bounds (cycles)."""
        return sum(k.compiled_bound for k in self.kernels)

    @property
    def compiled_bound_pct(self) -> float:
        return _pct(self.compiled_bound, self.cycles)

    @property
    def model_macs(self) -> int:
        return sum(k.model_macs for k in self.kernels)

    @property
    def executed_macs(self) -> int:
        return sum(k.executed_macs for k in self.kernels)

    @property
    def ideal_cycles(self) -> int:
        """Σ of the launches' ideal cycles."""
        return sum(k.ideal_cycles for k in self.kernels)

    @property
    def ideal_pct(self) -> float:
        """100 x Σ ideal_cycles / Σ cycles over the launches."""
        return _pct(self.ideal_cycles, self.cycles)

    def ideal_pct_of(self, launches: list[LaunchStats]) -> float:
        """100 x Σ ideal / Σ cycles over some of the launches (e.g. those with model MACs)."""
        return _pct(sum(k.ideal_cycles for k in launches), sum(k.cycles for k in launches))


def ideal_cycles(work: LaunchWork, spec: SocSpec) -> int:
    """The ideal bound of ``work`` on SoC ``spec`` in cycles, using every core of the SoC:
    the max of

    * ``ceil(model_macs / (spec.cube.macs_per_cycle(cube_itemsize) x cube cores))``;
    * ``ceil(sum_class(vector bytes_class x cycles per repeat_class) / (repeat_bytes x vector
      cores))`` with classes simple (``cycles_per_repeat``), transcendental
      (``cycles_per_repeat_transcendental``) and int64 (``cycles_per_repeat_int64``) -- i.e.
      element operations / (repeat_bytes / itemsize lanes x cores) weighted by the class's cost;
    * ``ceil(compulsory_bytes / gm_total)``.

    Cube cores: ``cube_core_count``; vector cores: ``vector_core_count`` on a separated SoC, else
    the AI Cores. 0 for no work.
    """
    cube, vec = spec.cube, spec.vector
    terms = [0, 0, -(-work.compulsory_bytes // spec.bandwidth.gm_total)]
    if work.model_macs:
        terms[0] = -(-work.model_macs // (cube.macs_per_cycle(work.cube_itemsize) * spec.core_count("aic")))
    vbytes = (work.vector_bytes * vec.cycles_per_repeat
              + work.vector_bytes_transcendental * vec.cycles_per_repeat_transcendental
              + work.vector_bytes_int64 * vec.cycles_per_repeat_int64)
    vcores = spec.ai_core_count if spec.coupled else spec.vector_core_count
    terms[1] = -(-vbytes // (vec.repeat_bytes * vcores))
    return max(terms)


def _launch_stats(li: int, name: str, block_dim: int, kind: str, spec: SocSpec, runs: list[KernelStats],
                  waves: list[list[int]], work: LaunchWork = LaunchWork()) -> LaunchStats:
    cycles = sum(max(runs[b].cycles for b in w) for w in waves)
    gm_r = sum(r.gm_read_bytes for r in runs)
    gm_w = sum(r.gm_write_bytes for r in runs)
    l2_r = sum(r.l2_read_bytes for r in runs)
    terms = {RESOURCE[p]: sum(max(runs[b].busy_full_by_pipe[p] for b in w) for w in waves) for p in PIPES}
    gm_total = spec.bandwidth.gm_total
    terms["gm_bandwidth"] = -(-(gm_r - l2_r + gm_w) // gm_total)  # HBM traffic: L2 hits do not use gm_total
    bound = max(terms, key=lambda k: terms[k])
    busy = {p: sum(r.busy_by_pipe[p] for r in runs) / len(runs) for p in PIPES}
    return LaunchStats(li, name, block_dim, kind, spec.clock_mhz, cycles, sum(r.instructions for r in runs),
                       runs, waves, gm_r, gm_w, terms[bound], bound, busy, spec.has_fixpipe, work,
                       sum(r.executed_macs for r in runs), ideal_cycles(work, spec), l2_r)


def add_launch(stats: RunStats, li: int, k, kind: str, spec: SocSpec, runs: list[KernelStats], ncores: int,
               work: LaunchWork) -> None:
    """Append launch ``li`` (kernel ``k`` run as ``runs``, one per block) to ``stats``: its
    :class:`LaunchStats` over waves of ``ncores`` blocks, its cycles, instructions and problems."""
    for run in runs:
        stats.problems += run.problems
    waves = [list(range(w, min(w + ncores, k.block_dim))) for w in range(0, k.block_dim, ncores)]
    ls = _launch_stats(li, k.name, k.block_dim, kind, spec, runs, waves, work)
    stats.kernels.append(ls)
    stats.cycles += ls.cycles
    stats.instructions += ls.instructions
