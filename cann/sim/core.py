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

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import islice

import ml_dtypes
import numpy as np

from cann.errors import CannError
from cann.hw import isa
from cann.hw.config import SocSpec
from cann.sim.blas import single_threaded
from cann.sim.cost import L0C_ITEMSIZE, CostModel
from cann.sim.timing import BUFS, PIPES, Timing, footprints, schedule

_F32 = np.dtype(np.float32)
_U8 = np.dtype(np.uint8)
_PIPE_NAMES = PIPES
_ALL_PIPES = {p.value for p in isa.Pipe}
_FLAG_PIPES = _ALL_PIPES - {isa.Pipe.ALL.value}
_F16_TO_F32 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)
_PLAN_CACHE = 8192  # cached vector-instruction plans per mnemonic
_UB = BUFS.index("ub")  # the UB's index in the timing model's footprints
#: per kernel run on one core, the instructions whose records (``KernelStats.program``, ``Timing``
#: start/end/pipe) are kept for traces: memory stays bounded however long a loop runs
RECORD_LIMIT = 1 << 16
_RECENT = 1024  # instructions kept to find the UB writer of a copy_ub_to_gm (overflow detection)
_MAX_SLAB = 64 << 20  # bytes of the padded feature-map window one img2col may build (a simulator limit)
#: float dtype -> (unsigned view, exponent mask): a value is inf/NaN iff all its exponent bits are set
_EXP_BITS = {np.dtype(np.float16): (np.dtype(np.uint16), 0x7C00), np.dtype(ml_dtypes.bfloat16): (np.dtype(np.uint16), 0x7F80),
             _F32: (np.dtype(np.uint32), 0x7F800000)}
#: vector instructions that can overflow: turn finite operands into inf/NaN (a division by zero, log 0
#: or the root of a negative number is not an overflow)
_CAN_OVERFLOW = frozenset({"vadd", "vsub", "vmul", "vdiv", "vadds", "vmuls", "vexp", "vrec"})
#: the divisor's operand index in a plan's views (dst, src0, src1, scalar)
_DIVISOR = {"vdiv": 2, "vrec": 1}


def _written_dtype(ins: isa.Instr) -> np.dtype | None:
    """The dtype of what ``ins`` writes to UB, when it computes (DMA and compares: None)."""
    g, v = ins.defn.group, ins.values
    if g in ("vector", "reduce", "broadcast", "select", "fixpipe"):
        return isa.DTYPES.get(v[0])
    if g == "vconv":
        return np.dtype(np.float16) if ins.defn.mnemonic == "vconv_f322f16" else _F32
    if g == "convert":
        return isa.DTYPES.get(v[1])
    return None


def nonfinite(a: np.ndarray) -> bool:
    """Whether float array ``a`` (any strides) holds an inf or NaN; False for other dtypes.
    Reads the exponent bits (several times faster than ``np.isfinite`` on float16)."""
    bits = _EXP_BITS.get(a.dtype)
    if bits is None or a.size == 0:
        return False
    u, mask = bits
    return int(np.bitwise_and(a.view(u), u.type(mask)).max()) == mask


def nonfinite_lanes(a: np.ndarray) -> np.ndarray:
    """Per index of ``a``'s leading (core) axis, whether that slice holds an inf or NaN (bool array;
    all False for non-float dtypes)."""
    n = a.shape[0]
    bits = _EXP_BITS.get(a.dtype)
    if bits is None or a.size == 0:
        return np.zeros(n, bool)
    u, mask = bits
    return np.bitwise_and(a.view(u), u.type(mask)).reshape(n, -1).max(axis=1) == mask


def _any_nonfinite(arrays, n: int) -> np.ndarray:
    """Per lane, whether any of ``arrays`` (each with the leading core axis) holds inf/NaN there."""
    out = np.zeros(n, bool)
    for x in arrays:
        out |= nonfinite_lanes(x)
    return out


_CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "gt": np.greater, "ge": np.greater_equal,
        "le": np.less_equal}


def _round(x: np.ndarray, mode: str) -> np.ndarray:
    """float64 ``x`` rounded to integral values by ``mode`` (:data:`cann.hw.isa.ROUND_MODES`)."""
    if mode == "rint":
        return np.rint(x)
    if mode == "round":  # ties away from zero (exact in float64 for float16 / float32 inputs)
        return np.copysign(np.floor(np.abs(x) + 0.5), x)
    return {"floor": np.floor, "ceil": np.ceil, "trunc": np.trunc}[mode](x)


def convert(s: np.ndarray, ddt: np.dtype, mode: str) -> np.ndarray:
    """vconv semantics: float -> int rounds by ``mode``, saturates and takes NaN to 0; float ->
    same float rounds to an integral value; int -> float and float narrowing round to nearest even;
    int64 -> int32 keeps the low 32 bits."""
    if s.dtype.kind == "f" and (ddt.kind in "iu" or ddt == s.dtype):
        x = _round(s.astype(np.float64), mode)
        if ddt.kind == "f":
            return x.astype(ddt)
        info = np.iinfo(ddt)
        x = np.where(np.isnan(x), 0.0, x)
        out = np.clip(x, info.min, info.max).astype(ddt)
        return np.where(x >= float(info.max), ddt.type(info.max), out)
    return s.astype(ddt)


class SimError(CannError):
    """A program error found by the simulator (bounds, alignment, invalid field, ...)."""


class LaneMismatch(Exception):
    """A lockstep result that cannot be mapped to a lane's own stream (run its block alone)."""


class _Fault(Exception):
    """Raised by instruction handlers; :meth:`AICore.run` adds the location. ``lane``: the core of a
    lockstep group it happens in (None: all of them)."""

    def __init__(self, msg: str, lane: int | None = None):
        super().__init__(msg)
        self.lane = lane


@dataclass
class KernelStats:
    """One kernel run on one core.

    ``cycles``: the parallel-pipe schedule's length; ``busy_by_pipe``: cycles each pipe is busy
    (S, V, M, MTE1, MTE2, MTE3); ``busy_full_by_pipe``: the same with GM copies at the full
    per-core rate (no sharing among cores: the compiled bound's pipe terms); ``serial_cycles``: the sum of
    all costs (the fully serialized model); ``timing``: start/end/pipe of the first
    :data:`RECORD_LIMIT` instructions;
    ``problems``: sync/race findings reported as warnings (``checks="warn"``);
    ``executed_macs``: the multiply-accumulates of the ``mmad`` instructions run (m*k*n each,
    padding included).
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
    executed_macs: int = 0  # m*k*n summed over the mmad instructions run (padding included)
    #: float overflow: index of the first instruction that produced inf/NaN from finite operands, when
    #: the kernel then wrote inf/NaN to GM (an inf that stays on chip, as exp(-x) in a sigmoid, is not
    #: reported); else None
    overflow: int | None = None
    overflow_op: str | None = None  # the mnemonic of instruction ``overflow``


def _view(buf: np.ndarray, offset: int, shape: tuple, strides: tuple, dt: np.dtype = _U8) -> np.ndarray:
    """A writable strided view of ``buf``'s bytes (bounds are checked by the caller; the stride of a
    dimension of size 1 is never used, so it is not passed on: it may be any field value)."""
    if 1 in shape:
        strides = tuple(0 if n == 1 else s for n, s in zip(shape, strides))
    return np.ndarray(shape, dt, buffer=buf, offset=offset, strides=strides)


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


class AICore:
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
        self._cost_models: dict[int, CostModel] = {}
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
        self._plan_caches: list[dict] = []  # cached operand views, valid for the current lanes only
        self._exec: dict[str, callable] = {}
        self._cost: dict[str, callable] = {}
        for d in isa.INSTRUCTIONS:
            self._exec[d.mnemonic] = self._handler(d)
            self._cost[d.mnemonic] = self.costs.fn(d.mnemonic)

    # -----------------------------------------------------------------------------------------
    # driver

    def reset(self) -> None:
        """Zero every on-chip buffer of every lane."""
        for b in self.mem.values():
            b.fill(0)

    def cost_model(self, active_cores: int = 1) -> CostModel:
        """The cost model with GM bandwidth shared among ``active_cores`` cores."""
        cm = self._cost_models.get(active_cores)
        if cm is None:
            cm = self._cost_models[active_cores] = self.costs if active_cores == 1 else CostModel(self.spec, active_cores)
        return cm

    def run(self, instrs: list[isa.Instr], gm: np.ndarray, args: tuple[int, ...],
            kernel_name: str = "kernel", *, checks: str = "error", active_cores: int = 1,
            detect_overflow: bool = True, timing: Timing | None = None, lane: int = 0) -> KernelStats:
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
        ``lanes`` cores' buffers to use.

        Raises:
            SimError: the first invalid instruction (bounds, alignment, field values); with
                ``checks="error"`` a race, a deadlocking wait or a flag set twice.
        """
        return self.run_lanes(instrs, gm, [args], [kernel_name], lane0=lane, checks=checks,
                              active_cores=active_cores, detect_overflow=detect_overflow, timing=timing)[0]

    def run_lanes(self, instrs: list[isa.Instr], gm: np.ndarray, args: list[tuple[int, ...]], names: list[str], *,
                  lane0: int = 0, lane_step: int = 1, checks: str = "error", active_cores: int = 1,
                  detect_overflow: bool = True, timing: Timing | None = None,
                  own: list[tuple] | None = None, same_timing: bool = False) -> list[KernelStats]:
        """:meth:`run` of the same ``instrs`` on lanes ``lane0 + j * lane_step`` (j < ``len(args)``) in
        lockstep, lane j with argument bases ``args[j]`` (the same number of arguments each) and
        named ``names[j]`` in errors; returns one :class:`KernelStats` per lane (shared schedule:
        computed with ``args[0]`` unless ``timing`` is given). ``own[j]``: ``(stream, args, timing or
        None, loose)`` when lane j's block runs its own stream, one that ``instrs`` with ``args[j]``
        executes exactly (:func:`cann.sim.lockstep.congruent`): its records are that stream's, and so
        is its schedule unless ``same_timing`` (every lane takes the first lane's: the caller knows
        they are equal); ``loose``: the streams differ in synchronization instructions (instruction
        count from its own schedule; an overflow origin there raises :class:`LaneMismatch`).

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
            for c in self._plan_caches:
                c.clear()
        self.gm = gm
        self.args = tuple(int(a) for a in args[0])
        self._bases = [tuple(int(a[k]) for a in args) for k in range(len(args[0]))]
        self._steps = [_step(b) for b in self._bases]
        self.regs = self._regs[lane0]
        self.reg_trace = []
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
        full = self._cost
        shared = full if active_cores == 1 else {m: self.cost_model(active_cores).fn(m) for m in full}
        own = own or [(instrs, args[j], None, False) for j in range(n)]
        times: dict[int, Timing] = {} if timing is None else {id(instrs): timing}
        out = []
        for j, (code, cargs, t, loose) in enumerate(own):
            if loose and origin[j] is not None:
                raise LaneMismatch(f"{names[j]}: an overflow origin at an index of another stream")
            if t is None:
                t = out[0].timing if same_timing and out else times.get(id(code))
            if t is None:
                t = schedule(code, self.spec, shared, full, tuple(cargs), names[j], checks, SimError, self.reg_trace,
                             record=RECORD_LIMIT)
            times.setdefault(id(code), t)
            count = i + 1
            if loose:  # its own stream's length: the schedule records every instruction up to RECORD_LIMIT
                count = len(t.start) if len(t.start) < RECORD_LIMIT else sum(1 for _ in code)
            out.append(KernelStats(int(t.cycles), count, dict(zip(_PIPE_NAMES, t.busy)),
                                   dict(zip(_PIPE_NAMES, t.busy_full)), t.gm_read_bytes, t.gm_write_bytes,
                                   sum(t.busy), t, t.problems, program if code is instrs else _Recorded(code),
                                   macs, overflow[j], overflow_op[j] if overflow[j] is not None else None))
        return out

    def _handler(self, d: isa.InstrDef):
        m = d.mnemonic
        if d.group == "dma":
            return {"copy_gm_to_l1": lambda v: self._dma_in("l1", v),
                    "copy_gm_to_ub": lambda v: self._dma_in("ub", v),
                    "copy_ub_to_gm": self._dma_out}[m]
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
        if d.group == "fixpipe" and self.spec.bandwidth.l0c_to_ub <= 0:
            def absent(v):
                raise _Fault(f"{m}: {self.spec.name} has no L0C -> UB path ({self.spec.core_type} cores; "
                             f"see docs/core-model.md)")
            return absent
        return {"nd2nz": self._nd2nz, "load2d": self._load2d, "img2col": self._img2col, "mmad": self._mmad,
                "fixpipe": self._l0c_to_ub, "broadcast": self._vbrcb}[d.group]

    # -----------------------------------------------------------------------------------------
    # checks

    def _onchip(self, buf: str, what: str, addr: int, nbytes: int) -> None:
        """``addr`` aligned and ``[addr, addr + nbytes)`` inside the usable part of ``buf``."""
        al = self.align[buf]
        if addr % al:
            raise _Fault(f"{what}: {buf.upper()} address {addr} is not aligned to {al} bytes")
        lim = self.limit[buf]
        if addr < 0 or addr + nbytes > lim:
            extra = f" ({self.spec.buffer(buf).reserved} reserved bytes at the end)" if lim < self.bufs[buf].size else ""
            raise _Fault(f"{what}: {buf.upper()} bytes [{addr}, {addr + nbytes}) outside the buffer "
                         f"(capacity {lim} bytes{extra})")

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
        """The ``(n,) + shape`` view of on-chip buffer ``buf`` at byte ``offset`` on the run's ``n`` lanes."""
        mem = self.mem[buf]
        size = mem.shape[1]
        return _view(mem, self._lane0 * size + offset, (self._n,) + shape, (self._lane_step * size,) + strides, dt)

    def _gm(self, arg: int, off: int, shape: tuple, strides: tuple, dt: np.dtype = _U8,
            write: bool = False) -> np.ndarray | list:
        """GM operand ``args[arg] + off`` (checked by :meth:`_gm_addr`): one ``(n,) + shape`` view when
        the lanes' bases are evenly spaced, else a list of one ``shape`` view per lane. A ``guard``
        (:class:`cann.sim.lockstep.Guard`) sees the access first."""
        bases, step = self._bases[arg], self._steps[arg]
        if self.guard is not None:
            self.guard.access(bases, step, off, shape, strides, dt.itemsize, write)
        if step is not None:
            return _view(self.gm, bases[0] + off, (self._n,) + shape, (step,) + strides, dt)
        return [_view(self.gm, b + off, shape, strides, dt) for b in bases]

    @staticmethod
    def _put(dst: np.ndarray | list, src: np.ndarray) -> None:
        """``dst[...] = src`` for a lane-axis view or a per-lane list of views (written in lane order)."""
        if type(dst) is list:
            for j, d in enumerate(dst):
                d[...] = src[j]
        else:
            dst[...] = src

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
    # MTE: DMA, nd2nz, load2d, img2col

    @staticmethod
    def _bursts(nburst: int, burst: int, src_stride: int, dst_stride: int) -> None:
        AICore._positive(nburst=nburst, burst=burst)
        AICore._nonneg(src_stride=src_stride, dst_stride=dst_stride)
        if nburst > 1 and dst_stride < burst:
            raise _Fault(f"dst_stride {dst_stride} < burst {burst}: destination bursts overlap")

    @staticmethod
    def _shape(nburst: int, burst: int, ss: int, ds: int) -> tuple[tuple, tuple, tuple]:
        """(shape, source strides, destination strides) of a burst copy (one run when contiguous)."""
        if nburst == 1 or (ss == burst and ds == burst):
            return (nburst * burst,), (1,), (1,)
        return (nburst, burst), (ss, 1), (ds, 1)

    def _dma_in(self, buf: str, v) -> None:
        dst, src_arg, src, nburst, burst, ss, ds = v
        self._bursts(nburst, burst, ss, ds)
        self._gm_addr("src", src_arg, src, (nburst - 1) * ss + burst)
        self._onchip(buf, "dst", dst, (nburst - 1) * ds + burst)
        shape, sst, dst_st = self._shape(nburst, burst, ss, ds)
        d, g = self._v(buf, dst, shape, dst_st), self._gm(src_arg, src, shape, sst)
        if type(g) is list:
            for j, x in enumerate(g):
                d[j] = x
        else:
            d[...] = g

    def _reg(self, reg: int) -> None:
        if not 0 <= reg < len(self.regs):
            raise _Fault(f"reg {reg} outside [0, {len(self.regs)})")

    def _one_lane(self, m: str) -> None:
        if self._n != 1:
            raise _Fault(f"{m}: data-dependent addressing runs on one core at a time (simulator contract, "
                         f"cann.sim.lockstep)")

    def _ld_idx(self, v) -> None:
        self._one_lane("ld_idx")
        reg, code, src, bound = v
        self._reg(reg)
        dt = isa.IDX_DTYPES.get(code)
        if dt is None:
            raise _Fault(f"invalid index dtype code {code} (valid: "
                         f"{', '.join(f'{k}={d}' for k, d in isa.IDX_DTYPES.items())})")
        self._positive(bound=bound)
        if src % dt.itemsize:
            raise _Fault(f"src: UB address {src} is not aligned to the {dt} element size {dt.itemsize}")
        if src < 0 or src + dt.itemsize > self.limit["ub"]:
            raise _Fault(f"src: UB bytes [{src}, {src + dt.itemsize}) outside the buffer (capacity {self.limit['ub']} bytes)")
        x = int(self._v("ub", src, (), (), dt)[0])
        idx = x + bound if x < 0 else x
        if not 0 <= idx < bound:
            raise _Fault(f"index {x} out of range [{-bound}, {bound - 1}] (bound {bound}): a Gather index outside "
                         f"the data tensor")
        self.regs[reg] = idx

    def _dma_reg(self, v) -> None:
        self._one_lane("copy_gm_to_ub_reg")
        dst, src_arg, src, nburst, burst, ss, ds, reg, rs = v
        self._reg(reg)
        self._nonneg(reg_stride=rs)
        self._dma_in("ub", (dst, src_arg, src + self.regs[reg] * rs, nburst, burst, ss, ds))
        self.reg_trace.append(self.regs[reg])

    def _vsel(self, v) -> None:
        code, dst, cond, s0, s1, repeat, mask, db, cb, s0b, s1b, dr, cr, s0r, s1r = v
        dt, lanes, e = self._vec_check(code, repeat, mask, "vsel")
        isz = dt.itemsize
        ops = [(dst, db, dr), (cond, cb, cr), (s0, s0b, s0r), (s1, s1b, s1r)]
        for what, (base, blk, rep) in zip(("dst", "cond", "src0", "src1"), ops):
            self._operand(what, base, blk, rep, repeat, mask, e, isz)
        for d, c, a, b in self._pieces(ops, repeat, mask, lanes, e, dt):
            np.copyto(d, np.where(c != 0, a, b))

    def _dma_out(self, v) -> None:
        dst_arg, dst, src, nburst, burst, ss, ds = v
        self._bursts(nburst, burst, ss, ds)
        self._onchip("ub", "src", src, (nburst - 1) * ss + burst)
        self._gm_addr("dst", dst_arg, dst, (nburst - 1) * ds + burst)
        shape, sst, dst_st = self._shape(nburst, burst, ss, ds)
        self._put(self._gm(dst_arg, dst, shape, dst_st, write=True), self._v("ub", src, shape, sst))

    def _nd2nz(self, v) -> None:
        code, dst, src_arg, src, rows, cols, stride = v
        dt = self._fdtype(code)
        self._positive(rows=rows, cols=cols)
        self._nonneg(src_row_stride=stride)
        isz = dt.itemsize
        c0 = self._blk_bytes // isz
        c1, r16 = -(-cols // c0), -(-rows // self._m0) * self._m0
        row_bytes = cols * isz
        self._gm_addr("src", src_arg, src, (rows - 1) * stride + row_bytes)
        self._onchip("l1", "dst", dst, c1 * r16 * c0 * isz)
        g = self._gm(src_arg, src, (rows, row_bytes), (stride, 1))
        mat = (np.stack(g) if type(g) is list else np.ascontiguousarray(g)).view(dt)  # (n, rows, cols)
        n = self._n
        out = self._v("l1", dst, (c1, r16, c0), (r16 * c0 * isz, c0 * isz, isz), dt)
        if rows == r16 and cols == c1 * c0:
            out[...] = mat.reshape(n, rows, c1, c0).transpose(0, 2, 1, 3)
        else:
            pad = np.zeros((n, r16, c1 * c0), dt)
            pad[:, :rows, :cols] = mat
            out[...] = pad.reshape(n, r16, c1, c0).transpose(0, 2, 1, 3)

    def _load2d(self, v) -> None:
        space, dst, src, repeat, ss, ds = v
        if space not in (isa.L0A, isa.L0B):
            raise _Fault(f"invalid dst_space {space} (valid: {isa.L0A} = L0A, {isa.L0B} = L0B)")
        f = self._frac
        self._positive(repeat=repeat)
        self._nonneg(src_stride=ss, dst_stride=ds)
        if repeat > 1 and ds < f:
            raise _Fault(f"dst_stride {ds} < {f}: destination fractals overlap")
        buf = "l0a" if space == isa.L0A else "l0b"
        self._onchip("l1", "src", src, (repeat - 1) * ss + f)
        self._onchip(buf, "dst", dst, (repeat - 1) * ds + f)
        shape, sst, dst_st = self._shape(repeat, f, ss, ds)
        self._v(buf, dst, shape, dst_st)[...] = self._v("l1", src, shape, sst)

    def _img2col(self, v) -> None:
        (code, dst, src, c1, fh, fw, pt, pb, pl, pr, sh, sw, kh, kw, dh, dw, m_start, m_count, k_start, k_count) = v
        dt = self._fdtype(code)
        isz = dt.itemsize
        c0 = self._n0  # NC1HWC0 with C0 = 16 for both dtypes
        k0 = self.spec.cube.k0(isz)
        self._positive(fm_c1=c1, fm_h=fh, fm_w=fw, stride_h=sh, stride_w=sw, kernel_h=kh, kernel_w=kw,
                       dil_h=dh, dil_w=dw, m_count=m_count, k_count=k_count)
        self._nonneg(pad_t=pt, pad_b=pb, pad_l=pl, pad_r=pr, m_start=m_start, k_start=k_start)
        if m_count % self._m0:
            raise _Fault(f"m_count {m_count} is not a multiple of {self._m0}")
        if k_start % k0 or k_count % k0:
            raise _Fault(f"k_start {k_start} and k_count {k_count} must be multiples of k0 = {k0}")
        ho = (fh + pt + pb - dh * (kh - 1) - 1) // sh + 1
        wo = (fw + pl + pr - dw * (kw - 1) - 1) // sw + 1
        if ho < 1 or wo < 1:
            raise _Fault(f"empty output: {ho}x{wo} positions for a {fh}x{fw} map, kernel {kh}x{kw}, "
                         f"dilation {dh}x{dw}, pads t{pt} b{pb} l{pl} r{pr}")
        self._onchip("l1", "src", src, c1 * fh * fw * c0 * isz)
        self._onchip("l0a", "dst", dst, m_count * k_count * isz)
        n = self._n
        m0 = self._m0
        # the destination as the (n, m_count, k_count) matrix split into fractals: (n, m1, m0, k1, k0)
        dst5 = self._v("l0a", dst, (m_count // m0, m0, k_count // k0, k0),
                       (k_count * m0 * isz, k0 * isz, m0 * k0 * isz, isz), dt)
        m_hi = min(m_start + m_count, ho * wo)
        k_per_c1 = kh * kw * c0
        k_total = c1 * k_per_c1
        k_hi = min(k_start + k_count, k_total)
        if m_hi > m_start and k_hi > k_start:
            # the slab of the padded map the wanted rows (output rows oh0..oh1) and columns (c1 ca..cb) read
            oh0, oh1 = m_start // wo, (m_hi - 1) // wo
            ca, cb = k_start // k_per_c1, (k_hi - 1) // k_per_c1 + 1
            p0, p1 = oh0 * sh, oh1 * sh + dh * (kh - 1) + 1  # padded rows [p0, p1)
            wp = fw + pl + pr
            slab_bytes = (cb - ca) * (p1 - p0) * wp * c0 * isz
            if slab_bytes > _MAX_SLAB:
                raise _Fault(f"the padded window this img2col reads ({cb - ca} x {p1 - p0} x {wp} x {c0} elements) "
                             f"exceeds the simulator's {_MAX_SLAB}-byte limit (pads, strides or dilation too large)")
            r0, r1 = max(p0, pt), min(p1, pt + fh)  # padded rows holding real data
            fm = self._v("l1", src, (c1, fh, fw, c0), (fh * fw * c0 * isz, fw * c0 * isz, c0 * isz, isz), dt)
            full = m_hi - m_start == m_count and k_hi - k_start == k_count
            out = None if full else np.zeros((n, m_count, k_count), dt)
            chunk = max(1, _MAX_SLAB // slab_bytes)  # lanes per slab (memory stays bounded)
            for j0 in range(0, n, chunk):
                nj = min(chunk, n - j0)
                if r0 == p0 and r1 == p1 and wp == fw:  # no padding in the window: read the map in place
                    slab = fm[j0:j0 + nj, ca:cb, r0 - pt:r1 - pt]
                else:
                    slab = np.zeros((nj, cb - ca, p1 - p0, wp, c0), dt)
                    if r1 > r0:
                        slab[:, :, r0 - p0:r1 - p0, pl:pl + fw] = fm[j0:j0 + nj, ca:cb, r0 - pt:r1 - pt]
                s = slab.strides
                shape = (nj, cb - ca, oh1 - oh0 + 1, wo, kh, kw, c0)
                strides = (s[0], s[1], s[2] * sh, s[3] * sw, s[2] * dh, s[3] * dw, s[4])  # unused (maybe huge) at size 1
                win = np.lib.stride_tricks.as_strided(
                    slab, shape, tuple(0 if k == 1 else st for k, st in zip(shape, strides)), writeable=False)
                # every position of output rows oh0..oh1 (one copy), then the wanted rows and columns
                rows = win.transpose(0, 2, 3, 1, 4, 5, 6).reshape(nj, (oh1 - oh0 + 1) * wo, -1)
                rows = rows[:, m_start - oh0 * wo:m_hi - oh0 * wo, k_start - ca * k_per_c1:k_hi - ca * k_per_c1]
                if full:
                    dst5[j0:j0 + nj] = rows.reshape(dst5[j0:j0 + nj].shape)
                else:
                    out[j0:j0 + nj, :m_hi - m_start, :k_hi - k_start] = rows
            if full:
                return
        else:
            out = np.zeros((n, m_count, k_count), dt)
        dst5[...] = out.reshape(dst5.shape)

    # -----------------------------------------------------------------------------------------
    # cube

    def _mmad(self, v) -> None:
        code, dst, a, b, m, k, n, init = v
        dt = self._fdtype(code)
        isz = dt.itemsize
        k0, m0, n0 = self.spec.cube.k0(isz), self._m0, self._n0
        self._positive(m=m, k=k, n=n)
        if m % m0 or n % n0 or k % k0:
            raise _Fault(f"m={m}, n={n} must be multiples of {m0}/{n0} and k={k} a multiple of k0 = {k0}")
        if init not in (0, 1):
            raise _Fault(f"init must be 0 or 1, got {init}")
        self._onchip("l0a", "a", a, m * k * isz)
        self._onchip("l0b", "b", b, k * n * isz)
        self._onchip("l0c", "dst", dst, m * n * L0C_ITEMSIZE)
        nl = self._n
        # A: (m1, k1, m0, k0) fractals read as the (m, k) matrix; B: (k1, n1, n0, k0) as (k, n)
        A = self._as_f32("l0a", a, (m // m0, m0, k // k0, k0), (k * m0 * isz, k0 * isz, m0 * k0 * isz, isz),
                         dt).reshape(nl, m, k)
        B = self._as_f32("l0b", b, (k // k0, k0, n // n0, n0), (n * k0 * isz, isz, n0 * k0 * isz, k0 * isz),
                         dt).reshape(nl, k, n)
        # one BLAS gemm per lane, each as the single-core product (np.matmul loops over the lane axis)
        C = np.matmul(A, B).reshape(nl, m, n // n0, n0).transpose(0, 2, 1, 3)
        out = self._v("l0c", dst, (n // n0, m, n0), (m * n0 * 4, n0 * 4, 4), _F32)
        if init:
            out[...] = C
        else:
            out += C

    def _as_f32(self, buf: str, off: int, shape: tuple, strides: tuple, dt: np.dtype) -> np.ndarray:
        """The elements of ``dt`` at byte ``off`` of ``buf`` (``shape``, byte ``strides``) on every lane
        as a new C-ordered ``(n,) + shape`` float32 array (float16 through a 64 Ki-entry table:
        exact, and faster than numpy's float16 cast)."""
        if dt.itemsize == 2:
            return np.take(_F16_TO_F32, self._v(buf, off, shape, strides, np.dtype(np.uint16)))
        return np.ascontiguousarray(self._v(buf, off, shape, strides, _F32))

    def _l0c_to_ub(self, v) -> None:
        code, dst, src, n1, m, src_m = v
        dt = self._fdtype(code)
        self._positive(n1=n1, m=m)
        if src_m < m:
            raise _Fault(f"src_m {src_m} < m {m}")
        n0, isz = self._n0, dt.itemsize
        self._onchip("l0c", "src", src, n1 * src_m * n0 * L0C_ITEMSIZE)
        self._onchip("ub", "dst", dst, n1 * m * n0 * isz)
        s = self._v("l0c", src, (n1, m, n0), (src_m * n0 * 4, n0 * 4, 4), _F32)
        d = self._v("ub", dst, (n1, m, n0), (m * n0 * isz, n0 * isz, isz), dt)
        np.copyto(d, s, casting="unsafe")
        self._watch(d, s)

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

    # -----------------------------------------------------------------------------------------
    # vector

    def _vec_check(self, code: int, repeat: int, mask: int, mnemonic: str | None = None) -> tuple[np.dtype, int, int]:
        dt = self._dtype(code)
        if mnemonic is not None and code not in isa.VEC_DTYPES.get(mnemonic, isa.FLOAT_CODES):
            ok = ", ".join(str(isa.DTYPES[c]) for c in sorted(isa.VEC_DTYPES.get(mnemonic, isa.FLOAT_CODES)))
            raise _Fault(f"{mnemonic} does not compute on {dt} (code {code}); it takes {ok}")
        if not 1 <= repeat <= self._max_repeat:
            raise _Fault(f"repeat {repeat} outside [1, {self._max_repeat}]")
        lanes = self._rep_bytes // dt.itemsize
        if not 1 <= mask <= lanes:
            raise _Fault(f"mask {mask} outside [1, {lanes}] for {dt}")
        return dt, lanes, self._blk_bytes // dt.itemsize

    def _operand(self, what: str, base: int, blk: int, rep: int, repeat: int, mask: int, e: int, isz: int) -> None:
        """Bounds/alignment of a repeat-model UB operand (``e`` lanes per block)."""
        if blk < 0 or rep < 0:
            raise _Fault(f"{what} strides must be >= 0 (blk {blk}, rep {rep})")
        bb = self._blk_bytes
        nfull, rem = divmod(mask, e)
        last = (repeat - 1) * rep * bb
        hi = last + (nfull - 1) * blk * bb + bb if nfull else 0
        if rem:
            hi = max(hi, last + nfull * blk * bb + rem * isz)
        self._onchip("ub", what, base, hi)

    def _pieces(self, ops, repeat: int, mask: int, lanes: int, e: int, dt: np.dtype) -> list[list[np.ndarray]]:
        """Views of the active lanes of each operand ``(base, blk, rep)``: one or two pieces of same-shape views."""
        ub, isz, bb = self._v, dt.itemsize, self._blk_bytes
        if all(blk == 1 for _, blk, _ in ops):
            if mask == lanes and all(rep == self._nblk for _, _, rep in ops):
                n = repeat * lanes
                return [[ub("ub", base, (n,), (isz,), dt) for base, _, _ in ops]]
            return [[ub("ub", base, (repeat, mask), (rep * bb, isz), dt) for base, _, rep in ops]]
        nfull, rem = divmod(mask, e)
        out = []
        if nfull:
            out.append([ub("ub", base, (repeat, nfull, e), (rep * bb, blk * bb, isz), dt) for base, blk, rep in ops])
        if rem:
            out.append([ub("ub", base + nfull * blk * bb, (repeat, rem), (rep * bb, isz), dt)
                        for base, blk, rep in ops])
        return out

    def _make_vector(self, m: str):
        f32 = _F32
        binary = {"vadd": np.add, "vsub": np.subtract, "vmul": np.multiply, "vmax": np.maximum, "vmin": np.minimum,
                  "vand": np.bitwise_and, "vor": np.bitwise_or, "vxor": np.bitwise_xor}
        scalar = {"vadds": np.add, "vmuls": np.multiply, "vmaxs": np.maximum}
        unary = {"vabs": np.abs}
        unary32 = {"vexp": np.exp, "vln": np.log, "vsqrt": np.sqrt, "vrec": lambda x: np.divide(1.0, x, dtype=f32)}

        if m in binary or m == "vdiv":
            nsrc = 2
            if m == "vdiv":
                def op(d, s0, s1, sc):
                    np.copyto(d, np.divide(s0, s1, dtype=f32), casting="unsafe")
            else:
                uf = binary[m]

                def op(d, s0, s1, sc):
                    uf(s0, s1, out=d)
        elif m in scalar:
            nsrc = 1
            uf = scalar[m]

            def op(d, s0, sc):
                uf(s0, sc, out=d)
        elif m == "vrelu":
            nsrc = 1

            def op(d, s0, sc):
                np.maximum(s0, d.dtype.type(0), out=d)
        elif m == "vmov":
            nsrc = 1

            def op(d, s0, sc):
                np.copyto(d, s0)
        elif m in unary:
            nsrc = 1
            uf = unary[m]

            def op(d, s0, sc):
                uf(s0, out=d)
        elif m in unary32:
            nsrc = 1
            uf = unary32[m]

            def op(d, s0, sc):
                np.copyto(d, uf(s0.astype(f32)), casting="unsafe")
        elif m == "vdup":
            nsrc = 0

            def op(d, sc):
                d[...] = sc
        else:  # pragma: no cover - table and simulator out of sync
            raise NotImplementedError(m)

        # validated operand views per distinct field tuple: the buffers are never reallocated, so a
        # plan stays valid for the core's lifetime (tiled kernels repeat the same UB instructions)
        plans: dict[tuple, list] = {}
        # overflow detection: the plan's float views, and whether the destination overlaps a source
        watched: dict[tuple, tuple[bool, bool]] = {}
        self._plan_caches += [plans, watched]  # cleared when the run's lanes change
        watch_op = m in _CAN_OVERFLOW
        divisor = _DIVISOR.get(m)

        def run(v) -> None:
            plan = plans.get(v)
            if plan is not None:
                if watch_op and self._ovf_watch is not None and watched[v][0]:
                    return checked(plan, watched[v][1])
                for views in plan:
                    op(*views)
                return
            code, dst, s0, s1, repeat, mask, db, s0b, s1b, dr, s0r, s1r, sc = v
            dt, lanes, e = self._vec_check(code, repeat, mask, m)
            isz = dt.itemsize
            ops = [(dst, db, dr)]
            self._operand("dst", dst, db, dr, repeat, mask, e, isz)
            if nsrc >= 1:
                self._operand("src0", s0, s0b, s0r, repeat, mask, e, isz)
                ops.append((s0, s0b, s0r))
            if nsrc == 2:
                self._operand("src1", s1, s1b, s1r, repeat, mask, e, isz)
                ops.append((s1, s1b, s1r))
            scv = dt.type(sc)
            plan = [(*views, scv) for views in self._pieces(ops, repeat, mask, lanes, e, dt)]
            if len(plans) >= _PLAN_CACHE:
                plans.clear()
                watched.clear()
            plans[v] = plan
            # aliasing within one lane (every lane's operands sit at the same offsets)
            watched[v] = (dt in _EXP_BITS, any(np.may_share_memory(p[0][0], x[0]) for p in plan for x in p[1:-1]))
            if watch_op and self._ovf_watch is not None and watched[v][0]:
                return checked(plan, watched[v][1])
            for views in plan:
                op(*views)

        def checked(plan, alias: bool) -> None:
            # operands are checked after the op unless the destination overlaps them
            n = self._n
            srcs = [x for p in plan for x in p[1:-1]]
            bad_in = _any_nonfinite(srcs, n) if alias else None
            for views in plan:
                op(*views)
            hit = _any_nonfinite([p[0] for p in plan], n) & self._ovf_watch
            if not hit.any() or not all(np.isfinite(p[-1]) for p in plan):
                return
            hit &= ~(bad_in if alias else _any_nonfinite(srcs, n))
            if divisor is not None:  # a quotient overflows where its divisor is not zero (x / 0 is a division by zero)
                quot = np.zeros(n, bool)
                for p in plan:
                    quot |= (~np.isfinite(p[0]) & (p[divisor] != 0)).reshape(n, -1).any(axis=1)
                hit &= quot
            self._hit(hit)

        return run

    def _vconv(self, v, sdt: np.dtype, ddt: np.dtype) -> None:
        code, dst, s0, s1, repeat, mask, db, s0b, s1b, dr, s0r, s1r, sc = v
        n = self._rep_bytes // max(sdt.itemsize, ddt.itemsize)  # elements per repeat (64)
        if not 1 <= repeat <= self._max_repeat:
            raise _Fault(f"repeat {repeat} outside [1, {self._max_repeat}]")
        if not 1 <= mask <= n:
            raise _Fault(f"mask {mask} outside [1, {n}]")
        self._nonneg(dst_rep=dr, src0_rep=s0r)
        bb = self._blk_bytes
        self._onchip("ub", "dst", dst, (repeat - 1) * dr * bb + mask * ddt.itemsize)
        self._onchip("ub", "src0", s0, (repeat - 1) * s0r * bb + mask * sdt.itemsize)
        s = self._v("ub", s0, (repeat, mask), (s0r * bb, sdt.itemsize), sdt)
        d = self._v("ub", dst, (repeat, mask), (dr * bb, ddt.itemsize), ddt)
        if ddt.itemsize < sdt.itemsize and self._ovf_watch is not None:
            bad = nonfinite_lanes(s)
            np.copyto(d, s, casting="unsafe")
            self._watch(d, bad=bad)
            return
        np.copyto(d, s, casting="unsafe")

    def _contiguous(self, what: str, base: int, rep: int, repeat: int, mask: int, dt: np.dtype) -> np.ndarray:
        """The (repeat, mask) lanes of a contiguous-lane operand (vcmpv, vconv), bounds checked."""
        self._nonneg(**{f"{what}_rep": rep})
        bb = self._blk_bytes
        self._onchip("ub", what, base, (repeat - 1) * rep * bb + mask * dt.itemsize)
        return self._v("ub", base, (repeat, mask), (rep * bb, dt.itemsize), dt)

    def _vcmpv(self, v) -> None:
        code, mode, dst, s0, s1, repeat, mask, dr, s0r, s1r = v
        dt, lanes, e = self._vec_check(code, repeat, mask, "vcmpv")
        fn = _CMP.get(isa.CMP_MODES.get(mode, ""))
        if fn is None:
            raise _Fault(f"invalid compare mode {mode} (valid: {', '.join(f'{k}={n}' for k, n in isa.CMP_MODES.items())})")
        a = self._contiguous("src0", s0, s0r, repeat, mask, dt)
        b = self._contiguous("src1", s1, s1r, repeat, mask, dt)
        d = self._contiguous("dst", dst, dr, repeat, mask, _U8)
        np.copyto(d, fn(a, b), casting="unsafe")

    def _vconv_round(self, v) -> None:
        sc, dc, rnd, dst, s0, repeat, mask, dr, s0r = v
        sdt, ddt = self._dtype(sc), self._dtype(dc)
        modes = isa.VCONV_PAIRS.get((sc, dc))
        if modes is None:
            raise _Fault(f"no vconv from {sdt} to {ddt} (pairs: " +
                         ", ".join(f"{isa.DTYPES[a]}->{isa.DTYPES[b]}" for a, b in isa.VCONV_PAIRS) + ")")
        if rnd not in modes:
            raise _Fault(f"vconv {sdt}->{ddt} takes round modes "
                         f"{', '.join(f'{k}={isa.ROUND_MODES[k]}' for k in sorted(modes))}, got {rnd}")
        n = self._rep_bytes // max(sdt.itemsize, ddt.itemsize)
        if not 1 <= repeat <= self._max_repeat:
            raise _Fault(f"repeat {repeat} outside [1, {self._max_repeat}]")
        if not 1 <= mask <= n:
            raise _Fault(f"mask {mask} outside [1, {n}]")
        s = self._contiguous("src0", s0, s0r, repeat, mask, sdt)
        d = self._contiguous("dst", dst, dr, repeat, mask, ddt)
        bad = nonfinite_lanes(s) if self._ovf_watch is not None and ddt in _EXP_BITS else None
        np.copyto(d, convert(s, ddt, isa.ROUND_MODES[rnd]), casting="unsafe")
        if ddt in _EXP_BITS:
            self._watch(d, bad=bad)

    def _reduce(self, v, is_max: bool) -> None:
        code, dst, s0, s1, repeat, mask, db, s0b, s1b, dr, s0r, s1r, sc = v
        dt, lanes, e = self._vec_check(code, repeat, mask, "vcmax" if is_max else "vcadd")
        isz = dt.itemsize
        self._operand("src0", s0, s0b, s0r, repeat, mask, e, isz)
        self._onchip("ub", "dst", dst, repeat * isz)
        acc = None
        n = self._n
        for (p,) in self._pieces([(s0, s0b, s0r)], repeat, mask, lanes, e, dt):
            p = p.reshape(n, repeat, -1)
            # a float sum per lane, exactly as on one core (numpy's summation order follows the layout)
            r = p.max(axis=2) if is_max else np.stack([p[j].sum(axis=1, dtype=_F32) for j in range(n)])
            acc = r if acc is None else (np.maximum(acc, r) if is_max else acc + r)
        d = self._v("ub", dst, (repeat,), (isz,), dt)
        np.copyto(d, acc, casting="unsafe")
        if not is_max:  # a float32 sum narrowed to float16 may overflow
            self._watch(d, acc)

    def _vbrcb(self, v) -> None:
        code, dst, s0, s1, repeat, mask, db, s0b, s1b, dr, s0r, s1r, sc = v
        dt = self._dtype(code)
        if not 1 <= repeat <= self._max_repeat:
            raise _Fault(f"repeat {repeat} outside [1, {self._max_repeat}]")
        isz, n = dt.itemsize, repeat * self._rep_bytes
        self._onchip("ub", "src0", s0, isz)
        self._onchip("ub", "dst", dst, n)
        self._v("ub", dst, (n // isz,), (isz,), dt)[...] = self._v("ub", s0, (), (), dt)[:, None]

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
