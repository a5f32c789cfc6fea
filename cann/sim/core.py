"""Functional + (serialized) timing model of one AI Core.

:class:`AICore` holds one zero-initialised ``uint8`` array per on-chip buffer (L1, L0A, L0B, L0C,
UB, sized from the :class:`~cann.hw.config.SocSpec`) and executes decoded instructions
(:mod:`cann.hw.isa`) in program order with whole-array numpy: every operand is a strided
``np.ndarray`` view built directly on the buffer bytes (no Python loops over elements, bursts or
repeats). Semantics are those documented in :mod:`cann.hw.isa` and ``docs/core-model.md``.

With ``lanes`` > 1 the core is that many identical cores run in lockstep (:meth:`AICore.run_lanes`):
every buffer has a leading core axis and one numpy call executes an instruction on all of them.

Every instruction is checked before it runs: operands inside their buffer (the UB's reserved tail
is off-limits; GM operands inside the arena), on-chip base addresses aligned to the buffer's
``align``, field values valid. A violation raises :class:`SimError` located at
``<kernel>: instruction <i> `<asm>``` and naming the buffer, the byte range and the limit.

Timing: after the functional run, :func:`cann.sim.timing.schedule` times the same instructions on
parallel in-order pipes (S, V, M, MTE1, MTE2, MTE3) ordered across pipes only by flags and barriers,
each instruction costing :class:`~cann.sim.cost.CostModel` cycles, and checks the synchronization:
races, deadlocking waits, flags set twice (errors, or warnings with ``checks="warn"``).
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import islice

import numpy as np

from cann.errors import CannError
from cann.hw import isa
from cann.hw.config import SocSpec
from cann.sim.blas import single_threaded
from cann.sim.cost import CostModel, cost_functions
from cann.sim.lanes import _F32, _U8, _Fault, _view, lane_grid, nonfinite  # noqa: F401 (nonfinite: API)
from cann.sim.memo import Memo, Verified
from cann.sim.mte import TransferUnit
from cann.sim.overflow import OverflowWatch
from cann.sim.timing import PIPES, Timing, cached_schedule
from cann.sim.uniform import SharedLanes, Uniform
from cann.sim.vector import VectorUnit

_PIPE_NAMES = PIPES
_ALL_PIPES = {p.value for p in isa.Pipe}
_FLAG_PIPES = _ALL_PIPES - {isa.Pipe.ALL.value}
#: per kernel run on one core, the instructions whose records (``KernelStats.program``, ``Timing``
#: start/end/pipe) are kept for traces: memory stays bounded however long a loop runs
RECORD_LIMIT = 1 << 16
_VIEW_CACHE = 1 << 14  # on-chip operand views kept by AICore._v
#: lane sets (first lane, count, step) whose operand views and vector plans a core keeps: a model's
#: launches run on a few of them in turn (28 blocks, then 32, ...), and a warm run finds them all
_LANE_SETS = 16
_CUBE_IN = ("l0a", "l0b")  # the buffers mmad reads
_RECENT = 1024  # instructions kept to find the UB writer of a copy_ub_to_gm (overflow detection)


class SimError(CannError):
    """A program error found by the simulator (bounds, alignment, invalid field, ...)."""


class LaneMismatch(Exception):
    """A lockstep result that cannot be mapped to a lane's own stream (run its block alone)."""


@dataclass
class KernelStats:
    """One kernel run on one core.

    ``cycles``: the parallel-pipe schedule's length; ``busy_by_pipe``: cycles each pipe is busy
    (S, V, M, MTE1, MTE2, MTE3); ``busy_full_by_pipe``: the same with GM copies at the full
    per-core rate (no sharing among cores: the compiled bound's pipe terms); ``serial_cycles``: the sum of
    all costs (the fully serialized model); ``timing``: start/end/pipe of the first
    :data:`RECORD_LIMIT` instructions;
    ``problems``: sync/race findings reported as warnings (``checks="warn"``);
    ``executed_macs``: the multiply-accumulates run: of the ``mmad`` instructions (m*k*n each,
    padding included) and of the ``vmla`` instructions (repeat * mask each: every active lane).
    """

    cycles: int
    instructions: int
    busy_by_pipe: dict[str, int] = field(default_factory=dict)
    busy_full_by_pipe: dict[str, int] = field(default_factory=dict)
    gm_read_bytes: int = 0
    gm_write_bytes: int = 0
    serial_cycles: int = 0
    timing: Timing | None = field(default=None, repr=False)
    problems: list[tuple[str, str]] = field(default_factory=list)
    #: the first :data:`RECORD_LIMIT` instructions run (for traces; ``timing`` holds as many records)
    program: list | None = field(default=None, repr=False)
    executed_macs: int = 0  # m*k*n of the mmads plus repeat*mask of the vmlas run (padding included)
    #: float overflow: index of the first instruction that produced inf/NaN from finite operands, when
    #: the kernel then wrote inf/NaN to GM (an inf that stays on chip, as exp(-x) in a sigmoid, is not
    #: reported); else None
    overflow: int | None = None
    overflow_op: str | None = None  # the mnemonic of instruction ``overflow``
    #: of ``gm_read_bytes``, the bytes served by the chip's L2 (shared with other blocks of the
    #: launch, :mod:`cann.sim.l2`); the rest came from HBM
    l2_read_bytes: int = 0


class _Recorded(Sequence):
    """The first :data:`RECORD_LIMIT` instructions of a stream, walked when first looked at."""

    def __init__(self, stream):
        self._stream = stream
        self._list: list | None = None

    def _items(self) -> list:
        if self._list is None:
            self._list = list(islice(iter(self._stream), RECORD_LIMIT))
        return self._list

    def __len__(self) -> int:
        return len(self._items())

    def __getitem__(self, i):
        return self._items()[i]

    def __eq__(self, other) -> bool:
        return list(self) == list(other)


def _step(bases: tuple[int, ...]) -> int | None:
    """The common difference of ``bases`` (0 for one base), None when they are not an arithmetic
    progression."""
    if len(bases) < 2:
        return 0
    d = bases[1] - bases[0]
    return d if all(b - a == d for a, b in zip(bases, bases[1:])) else None


class AICore(TransferUnit, VectorUnit, OverflowWatch, SharedLanes):
    """One AI Core -- or ``lanes`` identical cores run in lockstep: on-chip buffers plus an
    instruction interpreter.

    ``run(instrs, gm, args, kernel_name)`` executes a kernel on one core (lane ``lane``);
    :meth:`run_lanes` executes the same instruction stream on ``n`` consecutive lanes at once, each
    with its own GM argument bases: every on-chip buffer has a leading core axis (``lanes`` rows of
    the buffer's size), so one numpy call executes an instruction for all of them. Buffers keep their
    contents between runs unless :meth:`reset` is called. ``bufs[name]``: lane 0's bytes (1-D).
    """

    def __init__(self, spec: SocSpec, block_idx: int = 0, lanes: int = 1):
        if lanes < 1:
            raise ValueError(f"lanes must be >= 1, got {lanes}")
        self.spec = spec
        #: this core's block index in the current launch (SPMD; 0 for block_dim 1)
        self.block_idx = block_idx
        self.lanes = lanes
        #: per buffer, ``lanes`` rows of its bytes (row j: core j's buffer)
        self.mem: dict[str, np.ndarray] = {n: np.zeros((lanes, b.size), np.uint8) for n, b in spec.buffers}
        self.bufs: dict[str, np.ndarray] = {n: m[0] for n, m in self.mem.items()}
        self.limit: dict[str, int] = {n: b.usable for n, b in spec.buffers}
        self.align: dict[str, int] = {n: b.align for n, b in spec.buffers}
        self.costs = CostModel(spec)
        v = spec.vector
        self._rep_bytes = v.repeat_bytes
        self._blk_bytes = v.block_bytes
        self._nblk = v.blocks_per_repeat
        self._max_repeat = v.max_repeat
        self._m0, self._n0 = spec.cube.m0, spec.cube.n0
        self._frac = spec.cube.fractal_bytes
        self.gm = np.zeros(0, np.uint8)
        self.args: tuple[int, ...] = ()  # the first lane's argument bases
        self._lane0, self._n, self._lane_step = 0, 1, 1  # the lanes of the current run: lane0 + j * lane_step
        #: lanes below this index may hold nonzero on-chip bytes (:meth:`reset` zeroes only those, so
        #: the pages of lanes no run used stay untouched: a 32-lane core costs one lane's memory)
        self._used = 0
        self._bases: list[tuple[int, ...]] = []  # per argument, its base on each lane of the run
        self._steps: list[int | None] = []  # per argument, the bases' common difference (None: not arithmetic)
        #: the scalar unit's registers (ld_idx writes them, copy_gm_to_ub_reg reads them), per lane;
        #: ``regs`` is the current lane's (data-dependent addressing runs one lane at a time)
        self._regs: list[list[int]] = [[0] * isa.SCALAR_REGS for _ in range(lanes)]
        self.regs: list[int] = self._regs[0]
        self.reg_trace: list[int] = []  # register value of each copy_gm_to_ub_reg run (for the timing model)
        #: overflow detection: ``_ovf_watch`` the lanes still watching (None: none); handlers OR into
        #: ``_ovf_hit`` the lanes where a result is inf/NaN from finite operands; run_lanes() records
        #: the first such instruction per lane and stops watching it
        self._ovf_watch: np.ndarray | None = None
        self._ovf_hit: np.ndarray | None = None
        #: the GM access checker of a lockstep launch (cann.sim.lockstep.Guard), None outside one
        self.guard = None
        self._flags_ok: set[tuple] = set()  # set_flag / wait_flag field values already validated
        #: per lane set (lane0, n, lane_step), the caches of operand views built for those lanes (a view
        #: holds all of them): ``"views"``: :meth:`_v`'s; a vector mnemonic: its plans (VectorUnit)
        self._lane_caches: dict[tuple[int, int, int], defaultdict[str, dict]] = {}
        self._caches = self._lane_set_caches((0, 1, 1))  # the current lane set's
        self._views: dict[tuple, np.ndarray] = self._caches["views"]
        self._geometry: dict[tuple, tuple] = {}  # checked img2col fields -> their geometry (TransferUnit)
        self._uni = Uniform()  # the on-chip bytes identical on every lane of the current run
        #: mmad's float32 operands by (buffer, address, shape, strides, dtype, lane layout) -> (buffer,
        #: lo, hi, array), valid until the next write of bytes [lo, hi) or run
        #: (TransferUnit._f32_operand, _stale); ``_f32_tok``: those of bytes holding a content token
        #: (cann.sim.memo), by token; ``_f32_bytes``: their arrays' bytes
        self._f32: dict[tuple, tuple] = {}
        self._f32_tok: dict[tuple, tuple] = {}
        self._f32_bytes = 0
        self._memo = Memo()  # img2col results kept while their map is unwritten (cann.sim.memo)
        self._verified = Verified()  # mmad's float32 B operands kept across runs (cann.sim.memo)
        self._exec: dict[str, callable] = {}
        self._cost: dict[str, callable] = {}
        for d in isa.INSTRUCTIONS:
            self._exec[d.mnemonic] = self._handler(d)
            self._cost[d.mnemonic] = self.costs.fn(d.mnemonic)

    # -----------------------------------------------------------------------------------------
    # driver

    def reset(self) -> None:
        """Put every lane in the state of a new core: on-chip buffers and scalar registers zeroed (only
        the lanes a run used since the last reset are rewritten, and lane 0, which ``bufs`` exposes), no
        GM guard (the caches of checked fields, operand views and vector plans stay: they depend on
        the fields and the buffers' places only)."""
        for b in self.mem.values():
            b[:max(self._used, 1)].fill(0)  # lane 0: also what `bufs` exposes to callers
        self._used = 0
        for r in self._regs:
            r[:] = [0] * len(r)
        self._uni.clear()
        self.guard = None
        self._verified.next_run()  # (its entries stay: they are checked against the bytes)

    def _cost_fns(self, active_cores: int, l2: tuple[int, ...]) -> tuple[dict, dict]:
        """(shared, full) cost functions by mnemonic (:func:`cann.sim.cost.cost_functions`)."""
        return cost_functions(self.spec, active_cores, l2)

    def run(self, instrs: list[isa.Instr], gm: np.ndarray, args: tuple[int, ...],
            kernel_name: str = "kernel", *, checks: str = "error", active_cores: int = 1,
            detect_overflow: bool = True, timing: Timing | None = None, lane: int = 0,
            l2: tuple[int, ...] = ()) -> KernelStats:
        """Execute ``instrs`` in program order against the GM arena ``gm`` (1-D contiguous uint8),
        then time them on parallel pipes and check their synchronization.

        ``instrs`` is iterated twice, one instruction at a time (execution, then timing): a list or
        a re-iterable :class:`cann.sim.spmd.Stream`, never held whole in memory here.

        ``args[i]`` is the GM byte offset bound to kernel argument ``i``. ``checks``: "error"
        (default), "warn" (report races, deadlocks and double sets as :class:`SimWarning` and in
        ``KernelStats.problems``) or "off" (no race detector; sync errors still raise).
        ``active_cores``: cores of the launch sharing the GM bandwidth. ``detect_overflow``: record in
        ``KernelStats.overflow`` the first instruction producing inf/NaN from finite operands when the
        kernel then writes inf/NaN to GM. ``timing``: the schedule of another core of the launch that
        ran the same instruction stream (its cycles, pipe times and sync checks hold for this one:
        see :func:`cann.sim.executor.run_model`); None computes it. ``lane``: which of the
        ``lanes`` cores' buffers to use. ``l2``: per kernel argument, the share of its GM reads
        served by the L2 (:func:`cann.sim.l2.launch_fractions`; ``()``: all from HBM): timing only.

        Raises:
            SimError: the first invalid instruction (bounds, alignment, field values); with
                ``checks="error"`` a race, a deadlocking wait or a flag set twice.
        """
        return self.run_lanes(instrs, gm, [args], [kernel_name], lane0=lane, checks=checks,
                              active_cores=active_cores, detect_overflow=detect_overflow, timing=timing,
                              l2=[l2])[0]

    def run_lanes(self, instrs: list[isa.Instr], gm: np.ndarray, args: list[tuple[int, ...]], names: list[str], *,
                  lane0: int = 0, lane_step: int = 1, checks: str = "error", active_cores: int = 1,
                  detect_overflow: bool = True, timing: Timing | None = None,
                  own: list[tuple] | None = None, same_timing: bool = False,
                  l2: list[tuple[int, ...]] | None = None) -> list[KernelStats]:
        """:meth:`run` of the same ``instrs`` on lanes ``lane0 + j * lane_step`` (j < ``len(args)``) in
        lockstep, lane j with argument bases ``args[j]`` (the same number of arguments each) and
        named ``names[j]`` in errors; returns one :class:`KernelStats` per lane (shared schedule:
        computed with ``args[0]`` unless ``timing`` is given). ``own[j]``: ``(stream, args, timing or
        None, loose)`` when lane j's block runs its own stream, one that ``instrs`` with ``args[j]``
        executes exactly (:func:`cann.sim.lockstep.congruent`): its records are that stream's, and so
        is its schedule unless ``same_timing`` (every lane takes the first lane's: the caller knows
        they are equal); ``loose``: the streams differ in synchronization instructions (instruction
        count from its own schedule; an overflow origin there raises :class:`LaneMismatch`).
        ``l2[j]``: lane j's L2 fractions (as :meth:`run`; None: none on any lane); lanes sharing a
        schedule (``timing``, ``same_timing``) must have equal ones.

        Each instruction runs on every lane before the next one runs, so the result equals running
        the lanes one after another only when no lane writes GM bytes another lane reads or
        writes, and no instruction reads the scalar registers (``ld_idx``, ``copy_gm_to_ub_reg``
        run on one lane only): the caller's contract (:mod:`cann.sim.lockstep`). A fault names the
        first lane it happens on.

        Raises:
            SimError: as :meth:`run`; ValueError: bad lanes, arguments or ``gm``.
        """
        if gm.dtype != _U8 or gm.ndim != 1 or not gm.flags.c_contiguous or not gm.flags.writeable:
            raise ValueError("gm must be a writable 1-D contiguous uint8 array")
        n = len(args)
        if n < 1 or len(names) != n or lane_step < 1 or not 0 <= lane0 <= self.lanes - 1 - (n - 1) * lane_step or \
                len({len(a) for a in args}) != 1:
            raise ValueError(f"{n} lanes from lane {lane0} step {lane_step} with {len(names)} names on a core of "
                             f"{self.lanes} lanes, argument counts {sorted({len(a) for a in args})}")
        if (lane0, n, lane_step) != (self._lane0, self._n, self._lane_step):
            self._lane0, self._n, self._lane_step = lane0, n, lane_step
            self._caches = self._lane_set_caches((lane0, n, lane_step))
            self._views = self._caches["views"]
        self._used = max(self._used, lane0 + (n - 1) * lane_step + 1)
        self.gm = gm
        self.args = tuple(int(a) for a in args[0])
        self._bases = [tuple(int(a[k]) for a in args) for k in range(len(args[0]))]
        self._steps = [_step(b) for b in self._bases]
        self.regs = self._regs[lane0]
        self.reg_trace = []
        self._uni.clear()
        self._f32.clear()  # the buffers may have been written from outside since the last run
        self._f32_tok.clear()
        self._f32_bytes = 0
        self._memo.clear()
        execs = self._exec
        i = -1
        ins = None
        origin: list[int | None] = [None] * n
        overflow: list[int | None] = [None] * n
        overflow_op: list[str | None] = [None] * n
        pending = 0  # lanes with an origin and no overflow yet
        macs = 0
        program: list[isa.Instr] = []  # the first RECORD_LIMIT instructions (for traces)
        recent: deque[isa.Instr] = deque(maxlen=_RECENT)  # the instructions before the current one
        self._ovf_watch, self._ovf_hit = (np.ones(n, bool) if detect_overflow else None), None
        try:
            with np.errstate(all="ignore"), single_threaded():
                for i, ins in enumerate(instrs):
                    m = ins.defn.mnemonic
                    v = ins.values
                    execs[m](v)
                    if m == "mmad":
                        macs += v[4] * v[5] * v[6]
                    elif m == "vmla":  # one multiply-accumulate per active lane of each repeat
                        macs += v[4] * v[5]
                    if self._ovf_hit is not None:
                        for j in np.flatnonzero(self._ovf_hit).tolist():
                            origin[j], overflow_op[j] = i, m
                            pending += 1
                        self._ovf_watch &= ~self._ovf_hit
                        self._ovf_hit = None
                        if not self._ovf_watch.any():
                            self._ovf_watch = None
                    elif pending and m == "copy_ub_to_gm":
                        lanes = [j for j in range(n) if origin[j] is not None and overflow[j] is None]
                        for j in self._writes_nonfinite(ins, i, recent, instrs, lanes):
                            overflow[j] = origin[j]
                            pending -= 1
                    if detect_overflow:
                        recent.append(ins)
                    if i < RECORD_LIMIT:
                        program.append(ins)
        except _Fault as e:
            raise SimError(f"{names[e.lane or 0]}: instruction {i} `{ins.asm()}`", str(e)) from None
        finally:
            self.gm = np.zeros(0, np.uint8)
            self._ovf_watch = self._ovf_hit = None
            for buf, lo, hi, rep in self._uni.take_all():  # every lane holds its bytes again
                self._copy_lanes(buf, lo, hi, rep)
        own = own or [(instrs, args[j], None, False) for j in range(n)]
        l2 = l2 or [()] * n
        times: dict[tuple, Timing] = {} if timing is None else {(id(instrs), l2[0]): timing}
        out = []
        for j, (code, cargs, t, loose) in enumerate(own):
            if loose and origin[j] is not None:
                raise LaneMismatch(f"{names[j]}: an overflow origin at an index of another stream")
            if t is None:
                t = out[0].timing if same_timing and out else times.get((id(code), l2[j]))
            if t is None:
                shared, full = self._cost_fns(active_cores, l2[j])
                t = cached_schedule(code, self.spec, shared, full, tuple(cargs), active_cores, names[j], checks,
                                    SimError, self.reg_trace, record=RECORD_LIMIT, l2=l2[j])
            times.setdefault((id(code), l2[j]), t)
            count = i + 1
            if loose:  # its own stream's length: the schedule records every instruction up to RECORD_LIMIT
                count = len(t.start) if len(t.start) < RECORD_LIMIT else sum(1 for _ in code)
            out.append(KernelStats(int(t.cycles), count, dict(zip(_PIPE_NAMES, t.busy)),
                                   dict(zip(_PIPE_NAMES, t.busy_full)), t.gm_read_bytes, t.gm_write_bytes,
                                   sum(t.busy), t, t.problems, program if code is instrs else _Recorded(code),
                                   macs, overflow[j], overflow_op[j] if overflow[j] is not None else None,
                                   t.l2_read_bytes))
        return out

    def _lane_set_caches(self, lanes: tuple[int, int, int]) -> defaultdict[str, dict]:
        """The view and plan caches of lane set ``lanes`` (lane0, n, lane_step), kept across runs (the
        buffers are never reallocated, so a view stays valid); at most :data:`_LANE_SETS` sets are
        kept (all are dropped when one more is needed)."""
        c = self._lane_caches.get(lanes)
        if c is None:
            if len(self._lane_caches) >= _LANE_SETS:
                self._lane_caches.clear()
            c = self._lane_caches[lanes] = defaultdict(dict)
        return c

    def _handler(self, d: isa.InstrDef):
        m = d.mnemonic
        if d.group == "dma":
            return {"copy_gm_to_l1": lambda v: self._dma_in("l1", v),
                    "copy_gm_to_ub": lambda v: self._dma_in("ub", v),
                    "copy_ub_to_gm": self._dma_out, "copy_ub_to_gm_add": self._dma_add}[m]
        if d.group == "vector":
            return self._make_vector(m)
        if d.group == "vconv":
            src, dst = (_F32, np.dtype(np.float16)) if m == "vconv_f322f16" else (np.dtype(np.float16), _F32)
            return lambda v: self._vconv(v, src, dst)
        if d.group == "reduce":
            return lambda v: self._reduce(v, m == "vcmax")
        if d.group == "sync":
            return self._pipe_barrier if m == "pipe_barrier" else self._flag
        if d.group == "spmd":  # resolved per core before the run (cann.sim.spmd); scalar cost only
            return lambda v: None
        if d.group == "scalar":
            return self._ld_idx
        if d.group == "dma_reg":
            return self._dma_reg
        if d.group == "select":
            return self._vsel
        if d.group == "compare":
            return self._vcmpv
        if d.group == "convert":
            return self._vconv_round
        if d.group == "transpose":
            return self._vtranspose
        if d.group == "fixpipe" and self.spec.bandwidth.l0c_to_ub <= 0:
            def absent(v):
                raise _Fault(f"{m}: {self.spec.name} has no L0C -> UB path ({self.spec.core_type} cores; "
                             f"see docs/core-model.md)")
            return absent
        if m == "img2col_c04":
            return self._img2col_c04
        return {"nd2nz": self._nd2nz, "load2d": self._load2d, "img2col": self._img2col, "mmad": self._mmad,
                "fixpipe": self._l0c_to_ub, "broadcast": self._vbrcb}[d.group]

    # -----------------------------------------------------------------------------------------
    # checks

    def _onchip(self, buf: str, what: str, addr: int, nbytes: int, dense: bool = False) -> None:
        """``addr`` aligned and ``[addr, addr + nbytes)`` inside the usable part of ``buf``; a ``"dst"``
        operand (the bytes an instruction writes; ``dense``: every one of them) gets its owed lane copies
        made (dense: those outside it only stay owed) and stops being of known lane classes
        (:mod:`cann.sim.uniform`)."""
        al = self.align[buf]
        if addr % al:
            raise _Fault(f"{what}: {buf.upper()} address {addr} is not aligned to {al} bytes")
        lim = self.limit[buf]
        if addr < 0 or addr + nbytes > lim:
            extra = f" ({self.spec.buffer(buf).reserved} reserved bytes at the end)" if lim < self.bufs[buf].size else ""
            raise _Fault(f"{what}: {buf.upper()} bytes [{addr}, {addr + nbytes}) outside the buffer "
                         f"(capacity {lim} bytes{extra})")
        if what == "dst":
            if self._f32 and buf in _CUBE_IN:  # mmad's float32 operands converted from these bytes are stale
                self._stale(buf, addr, addr + nbytes)
            self._memo.written(buf, addr, addr + nbytes)
            if self._n > 1:  # about to be written: no longer of known lane classes
                self._written(buf, addr, nbytes, dense)

    def _gm_addr(self, what: str, arg: int, off: int, nbytes: int) -> int:
        """Checks GM operand ``[base + off, base + off + nbytes)`` of argument ``arg`` on every lane
        (a fault names the first lane outside the arena); returns the first lane's address."""
        if not 0 <= arg < len(self.args):
            raise _Fault(f"{what}: kernel argument {arg} does not exist ({len(self.args)} arguments)")
        bases = self._bases[arg]
        size = self.gm.size
        if min(bases) + off < 0 or max(bases) + off + nbytes > size:
            for j, base in enumerate(bases):
                addr = base + off
                if addr < 0 or addr + nbytes > size:
                    raise _Fault(f"{what}: GM bytes [{addr}, {addr + nbytes}) (argument {arg} at {base} + {off}) "
                                 f"outside the global-memory arena of {size} bytes", j)
        return bases[0] + off

    def _v(self, buf: str, offset: int, shape: tuple, strides: tuple, dt: np.dtype = _U8) -> np.ndarray:
        """The ``(n,) + shape`` view of on-chip buffer ``buf`` at byte ``offset`` on the run's ``n`` lanes
        (cached: the buffers are never reallocated; callers do not modify the view object itself)."""
        key = (buf, offset, shape, strides, dt)
        v = self._views.get(key)
        if v is None:
            if len(self._views) >= _VIEW_CACHE:
                self._views.clear()
            mem = self.mem[buf]
            size = mem.shape[1]
            v = self._views[key] = _view(mem, self._lane0 * size + offset, (self._n,) + shape,
                                         (self._lane_step * size,) + strides, dt)
        return v

    def _gm(self, arg: int, off: int, shape: tuple, strides: tuple, dt: np.dtype = _U8,
            write: bool = False, lanes: slice | None = None) -> np.ndarray | list:
        """GM operand ``args[arg] + off`` (checked by :meth:`_gm_addr`): one ``(n,) + shape`` view when
        the lanes' bases are evenly spaced, one ``(n // q, q) + shape`` view when they form a grid
        (:func:`cann.sim.lanes.lane_grid`), else a list of one ``shape`` view per lane; ``lanes``: those
        lanes only (a slice; their bases evenly spaced or all equal). A ``guard``
        (:class:`cann.sim.lockstep.Guard`) sees the access first."""
        bases, step = self._bases[arg], self._steps[arg]
        if self.guard is not None:
            self.guard.access(bases, step, off, shape, strides, dt.itemsize, write)
        if lanes is not None:
            bases = bases[lanes]
            step = _step(bases)
        if step is not None:
            return _view(self.gm, bases[0] + off, (len(bases),) + shape, (step,) + strides, dt)
        g = lane_grid(bases)
        if g is not None:
            q, s1, s2 = g
            return _view(self.gm, bases[0] + off, (len(bases) // q, q) + shape, (s1, s2) + strides, dt)
        return [_view(self.gm, b + off, shape, strides, dt) for b in bases]

    @staticmethod
    def _put(dst: np.ndarray | list, src: np.ndarray) -> None:
        """``dst[...] = src`` for a lane-axis (or lane-grid) view or a per-lane list of views (written in
        lane order)."""
        if type(dst) is list:
            for j, d in enumerate(dst):
                d[...] = src[j]
        else:
            dst[...] = src.reshape(dst.shape) if dst.ndim > src.ndim else src

    @staticmethod
    def _dtype(code: int) -> np.dtype:
        dt = isa.DTYPES.get(code)
        if dt is None:
            raise _Fault(f"invalid dtype code {code} (valid: {', '.join(f'{k}={v}' for k, v in isa.DTYPES.items())})")
        return dt

    @staticmethod
    def _fdtype(code: int) -> np.dtype:
        """A dtype code the cube and the MTE format conversions take (float16 / float32)."""
        dt = AICore._dtype(code)
        if code not in isa.FLOAT_CODES:
            raise _Fault(f"dtype {dt} (code {code}): the cube and format conversions take float16 / float32 only")
        return dt

    @staticmethod
    def _positive(**kw: int) -> None:
        for k, x in kw.items():
            if x < 1:
                raise _Fault(f"{k} must be >= 1, got {x}")

    @staticmethod
    def _nonneg(**kw: int) -> None:
        for k, x in kw.items():
            if x < 0:
                raise _Fault(f"{k} must be >= 0, got {x}")

    # -----------------------------------------------------------------------------------------
    # sync (no functional effect)

    def _flag(self, v) -> None:
        if v in self._flags_ok:
            return
        sp, dp, ev = v
        for name, p in (("src_pipe", sp), ("dst_pipe", dp)):
            if p not in _FLAG_PIPES:
                raise _Fault(f"invalid {name} {p} (valid: " + ", ".join(f"{q.value}={q.name}" for q in isa.Pipe
                                                                         if q.value in _FLAG_PIPES) + ")")
        if not 0 <= ev < self.spec.event_ids:
            raise _Fault(f"event id {ev} outside [0, {self.spec.event_ids})")
        self._flags_ok.add(v)

    def _pipe_barrier(self, v) -> None:
        (p,) = v
        if p not in _ALL_PIPES:
            raise _Fault(f"invalid pipe {p} (valid: " + ", ".join(f"{q.value}={q.name}" for q in isa.Pipe) + ")")
