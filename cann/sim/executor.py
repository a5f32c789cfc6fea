"""Run an offline model (:class:`cann.codegen.om.OfflineModel`) on the simulated AI Cores.

:func:`run_model` allocates the global-memory arena, loads the weights, places the inputs, runs
every launch in order and copies the outputs out. A launch of a kernel with ``block_dim`` B runs
its instruction stream once per block index ``0..B-1`` (SPMD), in waves of ``cores`` blocks; the
launch's time is the sum over waves of the slowest core's cycles, and the GM bandwidth is shared
among the ``min(B, cores)`` active cores (docs/core-model.md). Blocks executing the same code run
in lockstep on the lanes of one multi-lane :class:`~cann.sim.core.AICore` per core kind
(:mod:`cann.sim.lockstep`), with the result of running them one after another; otherwise block
``b`` runs alone on lane ``b % cores``.

Core state between launches: the on-chip buffers are *not* cleared between launches and their
contents at a launch's start are unspecified (kernels never rely on leftover state; the compiler
initialises everything it reads), but fresh cores are used for every :func:`run_model` call, so a
model's results never depend on an earlier run.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from functools import lru_cache

import numpy as np

from cann.codegen.om import FP16_PRECISION_MODES, OfflineModel, validate
from cann.errors import CannError, Diagnostic, FloatOverflowWarning
from cann.hw import isa
from cann.hw.config import SocSpec, load_soc
from cann.sim.core import AICore, KernelStats, LaneMismatch, SimError, nonfinite
from cann.sim.stats import RATIO_COLUMNS, RESOURCE, LaunchStats, RunStats, add_launch, ideal_cycles  # noqa: F401 (API)
from cann.sim.timing import CHECK_MODES, SimWarning, Timing

from cann.sim import atomic, l2 as l2model, lockstep
from cann.sim.spmd import check_control, dynamic_instructions, stream

#: the most instructions one run_model call executes, summed over launches and blocks (counted from
#: the loop counts before anything runs: docs/om-format.md, "Running"); about 13 times the light
#: VGG-19's 299038 -- a model over it is refused rather than simulated for hours
MAX_DYNAMIC_INSTRUCTIONS = 4_000_000

_CUBE_PIPES = {isa.Pipe.M, isa.Pipe.MTE1}
_FLOATS = {isa.DTYPES[0], isa.DTYPES[1], isa.DTYPES[9]}  # float16, float32, bfloat16


def _place_inputs(om: OfflineModel, inputs: dict[str, np.ndarray], gm: np.ndarray) -> None:
    declared = {t.name: t for t in om.inputs}
    unknown = [n for n in inputs if n not in declared]
    problems = []
    for n in unknown:
        problems.append((f"input '{n}'", f"unknown input (model inputs: {', '.join(declared) or 'none'})"))
    for t in om.inputs:
        if t.name not in inputs:
            problems.append((f"input '{t.name}'", f"missing input (expected shape {tuple(t.shape)} {t.dtype})"))
            continue
        a = np.asarray(inputs[t.name])
        want = np.dtype(t.dtype)
        if tuple(a.shape) != tuple(t.shape):
            problems.append((f"input '{t.name}'", f"shape mismatch: expected {tuple(t.shape)}, got {tuple(a.shape)}"))
            continue
        if a.dtype != want:
            problems.append((f"input '{t.name}'", f"dtype mismatch: expected {want}, got {a.dtype}"))
            continue
        raw = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
        gm[t.gm_offset:t.gm_offset + raw.size] = raw
    if problems:
        raise CannError.many([Diagnostic(loc, msg) for loc, msg in problems])


def core_kind(spec: SocSpec, prog: list[isa.Instr], name: str) -> str:
    """Which cores run ``prog``: "aicore" on a coupled SoC; on a separated one "aic" for a kernel
    using the cube side (M, MTE1, L1/L0 buffers) and "aiv" for a vector-only kernel.

    Raises:
        CannError: a kernel using both the cube and the vector unit on a separated SoC.
    """
    if spec.coupled:
        return "aicore"
    cube = vec = False
    for ins in prog:
        d = ins.defn
        if d.group == "sync":
            continue
        if d.pipe in _CUBE_PIPES or d.mnemonic in ("copy_gm_to_l1", "copy_gm_to_l1_nd2nz"):
            cube = True
        elif d.pipe == isa.Pipe.V:
            vec = True
    if cube and vec:
        raise CannError(f"kernel '{name}'", f"uses both the cube and the vector unit: {spec.name} has separated "
                                            f"cube (AIC) and vector (AIV) cores that share data only through GM")
    return "aic" if cube else "aiv"


def _overflow_message(om: OfflineModel, li: int, name: str, run: KernelStats, nodes: tuple[str, ...]) -> tuple[str, str]:
    where = f"kernel '{name}'" + (f" (model nodes {', '.join(nodes)})" if nodes else "")
    msg = (f"float overflow: launch {li} wrote inf/NaN computed from finite operands (first at instruction "
           f"{run.overflow} `{run.overflow_op}`)")
    if om.precision_mode in FP16_PRECISION_MODES:
        msg += (f"; precision_mode {om.precision_mode} computes in float16 (largest finite value 65504): "
                f"compile with --precision_mode allow_mix_precision (overflowing nodes kept in float32), "
                f"--keep_dtype FILE (the nodes to keep; cann-compile --calibrate-keep-dtype FILE writes one) "
                f"or --precision_mode must_keep_origin_dtype (all float32)")
    return where, msg


@lru_cache(maxsize=1024)
def _decoded(code: bytes, num_args: int, name: str, soc: str) -> tuple[list[isa.Instr], str]:
    """A kernel's decoded, checked program and core kind on SoC ``soc``, cached across runs of a
    model (the program list is shared: nothing mutates it).

    Raises:
        CannError: the code does not decode, or its SPMD control is malformed.
    """
    try:
        prog = isa.decode(code)
    except ValueError as e:
        raise CannError(f"kernel '{name}'", f"cannot decode: {e}") from None
    try:
        check_control(prog, num_args)
    except ValueError as e:
        raise CannError(f"kernel '{name}'", str(e)) from None
    return prog, core_kind(load_soc(soc), prog, name)


@lru_cache(maxsize=4096)
def _dynamic(code: bytes, num_args: int, name: str, soc: str, block_dim: int) -> int:
    """:func:`cann.sim.spmd.dynamic_instructions` of a launch of the kernel ``_decoded`` returns,
    cached across runs of a model (a pass over the program per launch otherwise)."""
    return dynamic_instructions(_decoded(code, num_args, name, soc)[0], block_dim)


#: idle cores of finished runs, per (SoC spec, lanes): a run starts from a reset one (the state of a new
#: core) and keeps its caches of checked fields, operand views and vector plans
_IDLE: dict[tuple[int, int], AICore] = {}


def _acquire(spec: SocSpec, lanes: int) -> AICore:
    """A core of ``spec`` with ``lanes`` lanes in the state of a new one (zeroed buffers and registers)."""
    core = _IDLE.pop((id(spec), lanes), None)
    if core is None or core.spec is not spec:  # (an idle core keeps its spec alive: the id is its own)
        return AICore(spec, lanes=lanes)
    core.reset()
    return core


def _release(core: AICore) -> None:
    """Keep ``core`` (its run finished) for the next run of its SoC."""
    _IDLE[(id(core.spec), core.lanes)] = core


#: lockstep plans per (program, block_dim, arguments, arena size, cores, SoC), the program held
_PLANS: dict[tuple, tuple] = {}
#: whether a program has register-addressed copies, by its id (the program held)
_DMA_REG: dict[int, tuple] = {}
#: L2 fractions per (program, block_dim, arguments, SoC), the program held
_L2: dict[tuple, tuple] = {}


def l2_fractions(prog: list[isa.Instr], block_dim: int, args: tuple[int, ...], spec: SocSpec,
                  cores: int) -> list[tuple]:
    """Per block of a launch of ``prog`` on ``cores`` cores, its L2 fractions
    (:func:`cann.sim.l2.launch_fractions`); no hits when a block's control is malformed (the
    per-block path reports it)."""
    if block_dim < 2:
        return [()] * block_dim
    key = (id(prog), block_dim, args, spec, cores)
    hit = _L2.get(key)
    if hit is None or hit[0] is not prog:
        try:
            blocks = [stream(prog, b, args) for b in range(block_dim)]
        except ValueError:
            return [()] * block_dim
        if len(_L2) >= 1024:
            _L2.clear()
        hit = _L2[key] = (prog, l2model.launch_fractions(blocks, spec, cores))
    return hit[1]


def check_atomic(prog: list[isa.Instr], k, args: tuple[int, ...], sim_checks: str, stats: RunStats) -> None:
    """The cross-block check of atomic adds (:mod:`cann.sim.atomic`) of one launch of kernel ``k``:
    a ``SimError`` with ``sim_checks="error"``, a :class:`SimWarning` and ``stats.problems`` with
    ``"warn"``, nothing with ``"off"``."""
    if sim_checks == "off":
        return
    for msg in atomic.launch_problems(prog, k.block_dim, args):
        if sim_checks == "error":
            raise SimError(f"kernel '{k.name}'", msg)
        warnings.warn(f"kernel '{k.name}': {msg}", SimWarning, stacklevel=3)
        stats.problems.append((f"kernel '{k.name}'", msg))


def _run_lockstep(core: AICore, prog: list[isa.Instr], la, k, spec: SocSpec, gm: np.ndarray, ncores: int,
                  timings: dict[tuple, Timing], name, fr: list[tuple], **kw) -> list[KernelStats] | None:
    """Run a launch's blocks in lockstep groups (:mod:`cann.sim.lockstep`); None (GM untouched) when
    it must run block by block. ``fr[b]``: block b's L2 fractions; ``timings``: schedules by
    (stream id, L2 fractions)."""
    args = tuple(la.args)
    key = (id(prog), k.block_dim, args, gm.size, ncores, spec.name)
    hit = _PLANS.get(key)
    if hit is None or hit[0] is not prog:
        try:
            blocks = [stream(prog, b, args) for b in range(k.block_dim)]
        except ValueError:
            return None  # the per-block path reports it at its block
        if len(_PLANS) >= 1024:
            _PLANS.clear()
        hit = _PLANS[key] = (prog, blocks, lockstep.plan(blocks, spec, gm.size, ncores))
    _, blocks, p = hit
    if p is None:
        return None
    groups, bases, regions, same, loose, watch = p
    guard = lockstep.Guard(gm, regions, watch, k.block_dim)
    core.guard = guard if watch else None
    runs: list[KernelStats] = [None] * k.block_dim  # in block order
    try:
        for g, same_timing in zip(groups, same):
            own = [(blocks[b][0], blocks[b][1], timings.get((id(blocks[b][0]), fr[b])), loose[b]) for b in g]
            guard.ids = np.array(g, guard.dt)
            core.block_idx = g[0]
            res = core.run_lanes(blocks[g[0]][0], gm, [bases[b] for b in g], [name(b) for b in g], own=own,
                                 same_timing=same_timing and len({fr[b] for b in g}) == 1,
                                 l2=[fr[b] for b in g], **kw)
            for b, r in zip(g, res):
                runs[b] = r
                timings.setdefault((id(blocks[b][0]), fr[b]), r.timing)
    except (lockstep.Conflict, LaneMismatch, SimError):
        guard.restore()  # undo the launch's GM writes: the per-block path runs it (and reports any error in order)
        return None
    finally:
        core.guard = None
    return runs


def prepare(om: OfflineModel, sim_checks: str, max_instructions: int) -> tuple[SocSpec, dict]:
    """``(spec, {kernel index: (program, core kind)})`` of a model about to run, after checking
    ``sim_checks``, the model (:func:`cann.codegen.om.validate`) and the work budget (as
    :func:`run_model`, which raises what this raises)."""
    if sim_checks not in CHECK_MODES:
        raise CannError("--sim-checks", f"must be one of {', '.join(CHECK_MODES)}, got '{sim_checks}'")
    validate(om, "<model>", code=False)
    spec = load_soc(om.soc_version)
    decoded: dict[int, tuple[list[isa.Instr], str]] = {}
    instrs = blocks = 0
    for li, la in enumerate(om.launches):
        k = om.kernels[la.kernel]
        if la.kernel not in decoded:
            decoded[la.kernel] = _decoded(k.code, k.num_args, k.name, spec.name)
        instrs += _dynamic(k.code, k.num_args, k.name, spec.name, k.block_dim)
        blocks += k.block_dim
        if instrs + blocks > max_instructions:
            raise CannError("<model>", f"the launches up to launch {li} ('{k.name}') execute {instrs} instructions "
                                       f"in {blocks} blocks, over the simulator's budget of {max_instructions} "
                                       f"instructions + blocks (docs/om-format.md, \"Running\")")
    return spec, decoded


def shares_timing(prog: list[isa.Instr], args: tuple[int, ...], sim_checks: str) -> bool:
    """Whether the blocks of a launch of ``prog`` running the same stream share its schedule: costs
    depend on sizes, not addresses, and the sync checks compare one core's own accesses, whose GM
    addresses move per argument; only arguments at the same address (aliasing) or register-addressed
    copies (data-dependent) make each core's check its own (and "warn" reports every block's)."""
    if sim_checks == "warn" or len(set(args)) != len(args):
        return False
    hit = _DMA_REG.get(id(prog))
    if hit is None or hit[0] is not prog:
        if len(_DMA_REG) >= 1024:
            _DMA_REG.clear()
        hit = _DMA_REG[id(prog)] = (prog, any(ins.defn.group == "dma_reg" for ins in prog))
    return not hit[1]


def run_model(om: OfflineModel, inputs: dict[str, np.ndarray], *, sim_checks: str = "error",
              max_instructions: int = MAX_DYNAMIC_INSTRUCTIONS,
              on_launch: Callable[[int, np.ndarray], None] | None = None) -> tuple[dict[str, np.ndarray], RunStats]:
    """Run ``om`` on ``inputs`` (name -> array); returns (outputs by name, stats).

    Inputs must match the declared shape and dtype exactly (as onnxruntime requires).
    ``sim_checks``: "error" (default) makes races, deadlocking waits and flags set twice errors;
    "warn" reports them as :class:`cann.sim.timing.SimWarning` warnings (also in
    ``RunStats.problems``) and goes on; "off" skips the race detector. ``max_instructions``: the
    most instructions the run may execute over all launches and blocks, plus one per block (its
    setup), counted from the loop counts before anything runs. The first kernel producing inf/NaN
    from finite operands (float overflow) is reported as a :class:`cann.errors.FloatOverflowWarning`
    (and in ``RunStats.overflow``), naming its model nodes (``Kernel.nodes``, recorded in the
    ``.om``): the first kernel that writes inf/NaN to GM after one of its instructions turned finite
    operands into inf/NaN, in a run whose inputs are all finite. ``on_launch(index, gm)``, when
    given, is called after each launch with the launch index and the GM arena (uint8, read it only:
    the per-layer dumps of :mod:`cann.accuracy`); it changes nothing else.

    Raises:
        CannError: an invalid model (:func:`cann.codegen.om.validate`), more than
            ``max_instructions`` instructions, a global-memory arena this host cannot allocate, bad
            inputs (naming each input, expected vs got), a kernel mixing cube and vector work on a
            separated SoC, a bad ``sim_checks``.
        SimError: an invalid instruction (bounds, alignment, fields), located at the instruction;
            with ``sim_checks="error"`` a race, deadlock or double set.
    """
    spec, decoded = prepare(om, sim_checks, max_instructions)
    try:
        gm = np.zeros(om.gm_size, np.uint8)
    except MemoryError:
        raise CannError("<model>", f"cannot allocate the {om.gm_size}-byte global-memory arena on this host") from None
    if om.weights:
        w = np.frombuffer(om.weights, np.uint8)
        gm[om.weights_offset:om.weights_offset + w.size] = w
    _place_inputs(om, inputs, gm)
    # overflow detection needs finite inputs (an inf given is not an overflow of the model's)
    detect = all(np.dtype(t.dtype) not in _FLOATS or not nonfinite(np.asarray(inputs[t.name])) for t in om.inputs)

    cores: dict[str, AICore] = {}  # per core kind, one lane per physical core
    stats = RunStats(0, 0, [], spec.name, spec.clock_mhz)
    for li, la in enumerate(om.launches):
        k = om.kernels[la.kernel]
        prog, kind = decoded[la.kernel]
        ncores = spec.core_count("aiv" if kind == "aiv" else "aic")
        active = min(k.block_dim, ncores)
        core = cores.get(kind)
        if core is None:
            core = cores[kind] = _acquire(spec, ncores)
        share = shares_timing(prog, tuple(la.args), sim_checks)  # cores running the same stream
        timings: dict[tuple, Timing] = {}  # (stream id, L2 fractions) -> schedule
        # reads of GM bytes that several blocks read are served by the L2 (cann.sim.l2): timing only
        fr = l2_fractions(prog, k.block_dim, tuple(la.args), spec, ncores)
        check_atomic(prog, k, tuple(la.args), sim_checks, stats)

        def name(b: int) -> str:
            return k.name if k.block_dim == 1 else f"{k.name}[block {b}]"

        # blocks running the same code execute together (cann.sim.lockstep) when that is exact
        locked = _run_lockstep(core, prog, la, k, spec, gm, ncores, timings, name, fr, checks=sim_checks,
                           active_cores=active, detect_overflow=detect) \
            if share and lockstep.ENABLED and k.block_dim > 1 else None
        runs = locked or []
        for b in range(k.block_dim if locked is None else 0):
            core.block_idx = b
            try:
                bprog, bargs = stream(prog, b, tuple(la.args))
            except ValueError as e:
                raise CannError(f"kernel '{k.name}'", f"block {b}: {e}") from None
            runs.append(core.run(bprog, gm, bargs, name(b), checks=sim_checks, active_cores=active,
                                 detect_overflow=detect, timing=timings.get((id(bprog), fr[b])) if share else None,
                                 lane=b % ncores, l2=fr[b]))
            if share:
                timings.setdefault((id(bprog), fr[b]), runs[-1].timing)
        for run in runs:
            if stats.overflow is None and run.overflow is not None:
                stats.overflow = _overflow_message(om, li, k.name, run, k.nodes)
        add_launch(stats, li, k, kind, spec, runs, ncores, la.work)
        if on_launch is not None:
            on_launch(li, gm)

    for core in cores.values():
        _release(core)
    if stats.overflow is not None:
        warnings.warn(": ".join(stats.overflow), FloatOverflowWarning, stacklevel=2)
    outputs = {}
    for t in om.outputs:
        dt = np.dtype(t.dtype)
        n = math.prod(t.shape)
        outputs[t.name] = gm[t.gm_offset:t.gm_offset + n * dt.itemsize].view(dt).reshape(t.shape).copy()
    return outputs, stats
