"""SoC descriptions: buffer sizes, alignments, cube shape, bandwidths and latencies.

The data lives in ``cann/hw/socs/<name>.toml`` (one file per SoC, every figure with its source in
``../shared/reference/ascend-core.md`` or marked as an assumption) and is validated into frozen
dataclasses here. Nothing else in the project writes a capacity, bandwidth or latency as a literal.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from cann.errors import CannError

_SOC_DIR = Path(__file__).parent / "socs"

#: On-chip buffers by their names in the ``tile`` and ``ascend`` dialects.
BUFFER_NAMES = ("l1", "l0a", "l0b", "l0c", "ub")


@dataclass(frozen=True)
class BufferSpec:
    """One on-chip buffer: ``size`` and ``reserved`` in bytes, ``align`` in bytes."""

    size: int
    align: int
    reserved: int = 0

    @property
    def usable(self) -> int:
        """Bytes a kernel may allocate (size minus the compiler-reserved tail)."""
        return self.size - self.reserved


@dataclass(frozen=True)
class CubeSpec:
    """Cube unit shape: one fractal mmad is m0 x k0 x n0 per cycle (fp16)."""

    m0: int
    n0: int
    k0_fp16: int
    k0_fp32: int
    fp32_rate_divisor: int
    fractal_bytes: int

    def k0(self, itemsize: int) -> int:
        """Fractal K0 for an element size in bytes (2: fp16, 4: fp32)."""
        return self.k0_fp16 if itemsize == 2 else self.k0_fp32

    def macs_per_cycle(self, itemsize: int) -> int:
        """Multiply-accumulates per cycle of one cube for inputs of ``itemsize`` bytes (2: fp16,
        4: the modeled fp32 mode): one m0 x k0 x n0 fractal step per cycle, taking
        ``fp32_rate_divisor`` cycles in fp32 -- the rate of the simulator's ``mmad`` cost.
        Ascend910: 16*16*16 = 4096 (fp16), 16*8*16 / 4 = 512 (fp32)."""
        macs = self.m0 * self.k0(itemsize) * self.n0
        return macs // self.fp32_rate_divisor if itemsize == 4 else macs


@dataclass(frozen=True)
class VectorSpec:
    """Vector unit: ``block_bytes`` per DataBlock, ``blocks_per_repeat`` blocks per repeat."""

    block_bytes: int
    blocks_per_repeat: int
    max_repeat: int
    cycles_per_repeat: int
    cycles_per_repeat_transcendental: int
    cycles_per_repeat_int64: int  # int64 lanes as pairs of int32 lanes (ASSUMPTION, cann.hw.isa)

    @property
    def repeat_bytes(self) -> int:
        return self.block_bytes * self.blocks_per_repeat


@dataclass(frozen=True)
class BandwidthSpec:
    """Per-path bandwidths in bytes per cycle per core; 0 = the path does not exist on this SoC.

    ``gm_total`` is the whole chip's global-memory bandwidth in bytes per cycle, shared by the cores
    moving data at the same time (docs/core-model.md, "GM sharing").
    """

    gm_to_l1: int
    gm_to_ub: int
    l1_to_l0a: int
    l1_to_l0b: int
    l0c_to_ub: int
    ub_to_gm: int
    gm_total: int
    l0c_to_gm: int = 0  # FixPipe (separated cores)
    l0c_to_l1: int = 0  # FixPipe (separated cores)


@dataclass(frozen=True)
class L2Spec:
    """The chip-wide L2 cache in front of GM (docs/core-model.md, "L2"): ``size`` in bytes,
    ``rate`` the bytes per cycle per core at which a read served by the L2 arrives."""

    size: int
    rate: int


@dataclass(frozen=True)
class LatencySpec:
    """Fixed costs in cycles (assumptions: see docs/core-model.md)."""

    mte_startup: int
    burst_overhead: int
    vector_startup: int
    cube_startup: int
    scalar: int


@dataclass(frozen=True)
class SocSpec:
    """A whole SoC description (see ``cann/hw/socs/*.toml``)."""

    name: str
    arch: str
    core_type: str  # "coupled" (one core: cube + vector) or "separated" (AIC cube cores, AIV vector cores)
    ai_core_count: int  # cores a kernel's blocks are spread over (coupled: AI Cores; separated: AIC)
    clock_mhz: int
    buffers: tuple[tuple[str, BufferSpec], ...]
    cube: CubeSpec
    vector: VectorSpec
    bandwidth: BandwidthSpec
    latency: LatencySpec
    l2: L2Spec
    event_ids: int
    cube_core_count: int = 0  # cores holding a cube unit (coupled: = ai_core_count)
    vector_core_count: int = 0  # stand-alone vector cores (AIV; 0 on coupled parts)
    reserved_event_ids: int = 0  # the highest event ids kept for the runtime (not for manual use)
    has_fixpipe: bool = False  # FixPipe pipe (PIPE_FIX) on the cube core
    gm_bytes: int = 0  # device (global) memory in bytes: the largest GM arena an .om may ask for
    max_block_dim: int = 0  # the largest block_dim of one kernel launch

    def buffer(self, name: str) -> BufferSpec:
        """The spec of on-chip buffer ``name`` (one of ``BUFFER_NAMES``)."""
        return dict(self.buffers)[name]

    @property
    def coupled(self) -> bool:
        return self.core_type == "coupled"

    def core_count(self, kind: str) -> int:
        """Cores of ``kind`` ("aicore" on coupled parts; "aic" or "aiv" on separated ones)."""
        if kind == "aiv":
            return self.vector_core_count
        return self.cube_core_count


def available_socs() -> list[str]:
    """Names accepted by ``--soc_version``."""
    return list(_known_socs())


@cache
def _known_socs() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in _SOC_DIR.glob("*.toml")))


def load_soc(name: str) -> SocSpec:
    """Load and validate ``cann/hw/socs/<name>.toml``; ``name`` is a file stem there, never a path.

    Raises:
        CannError: (location ``--soc_version``) a name that is not one of :func:`available_socs`
            (the message lists them); (location the file) an unreadable or invalid description.
    """
    problem = soc_name_problem(name)
    if problem:
        raise CannError("--soc_version", problem)
    return _load(name)


def soc_name_problem(name) -> str | None:
    """Why ``name`` is not a SoC name of ``cann/hw/socs/`` (a path is never one), or None."""
    known = _known_socs()
    if isinstance(name, str) and name in known:
        return None
    path = isinstance(name, str) and any(c in name for c in "/\\")
    msg = f"SoC '{name}' is a path, not a name" if path else f"unknown SoC '{name}'"
    return f"{msg} (known: {', '.join(known)})"


@cache
def _load(name: str) -> SocSpec:
    path = _SOC_DIR / f"{name}.toml"
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise CannError(str(path), f"invalid SoC description: {e}") from None
    try:
        buffers = tuple((b, BufferSpec(**raw["buffers"][b])) for b in BUFFER_NAMES)
        spec = SocSpec(
            name=raw["name"],
            arch=raw["arch"],
            core_type=raw["core_type"],
            ai_core_count=int(raw["ai_core_count"]),
            clock_mhz=int(raw["clock_mhz"]),
            buffers=buffers,
            cube=CubeSpec(**raw["cube"]),
            vector=VectorSpec(**raw["vector"]),
            bandwidth=BandwidthSpec(**raw["bandwidth"]),
            latency=LatencySpec(**raw["latency"]),
            l2=L2Spec(**raw["l2"]),
            event_ids=int(raw["sync"]["event_ids"]),
            cube_core_count=int(raw.get("cube_core_count", raw["ai_core_count"])),
            vector_core_count=int(raw.get("vector_core_count", 0)),
            reserved_event_ids=int(raw["sync"].get("reserved_event_ids", 0)),
            has_fixpipe=bool(raw.get("has_fixpipe", False)),
            gm_bytes=int(raw["gm_bytes"]),
            max_block_dim=int(raw["max_block_dim"]),
        )
    except KeyError as e:
        raise CannError(str(path), f"invalid SoC description: missing key {e}") from None
    except (TypeError, ValueError, AttributeError) as e:
        raise CannError(str(path), f"invalid SoC description: {e}") from None
    _validate(spec, str(path))
    return spec


def _validate(spec: SocSpec, where: str) -> None:
    def bad(msg: str):
        raise CannError(where, f"invalid SoC description: {msg}")

    if spec.core_type not in ("coupled", "separated"):
        bad(f"core_type must be 'coupled' or 'separated', got '{spec.core_type}'")
    for f in ("name", "arch", "core_type"):
        if not isinstance(getattr(spec, f), str):
            bad(f"{f} must be a string")
    for name, v in (("cube", spec.cube), ("vector", spec.vector), ("latency", spec.latency),
                    ("bandwidth", spec.bandwidth), ("l2", spec.l2), *((f"buffers.{b}", x) for b, x in spec.buffers)):
        for f, x in vars(v).items():
            if not isinstance(x, int) or isinstance(x, bool) or x < 0:
                bad(f"{name}.{f} must be a non-negative integer, got {x!r}")
    if spec.ai_core_count < 1 or spec.clock_mhz < 1 or spec.event_ids < 1:
        bad("ai_core_count, clock_mhz and sync.event_ids must be >= 1")
    if spec.gm_bytes < 1 or spec.max_block_dim < 1:
        bad("gm_bytes and max_block_dim must be >= 1")
    if not 0 <= spec.reserved_event_ids < spec.event_ids:
        bad("sync.reserved_event_ids must be in [0, event_ids)")
    if spec.coupled:
        if spec.vector_core_count != 0 or spec.cube_core_count != spec.ai_core_count:
            bad("a coupled SoC has cube_core_count = ai_core_count and no separate vector cores")
        if spec.has_fixpipe:
            bad("a coupled SoC has no FixPipe (L0C -> UB goes through the vector unit)")
    else:
        if spec.cube_core_count != spec.ai_core_count or spec.vector_core_count < 1:
            bad("a separated SoC has cube_core_count = ai_core_count and vector_core_count >= 1")
        if not spec.has_fixpipe or spec.bandwidth.l0c_to_gm <= 0:
            bad("a separated SoC needs has_fixpipe = true and a positive bandwidth.l0c_to_gm")
    bw = spec.bandwidth
    for f in ("gm_to_l1", "gm_to_ub", "l1_to_l0a", "l1_to_l0b", "ub_to_gm", "gm_total"):
        if getattr(bw, f) <= 0:
            bad(f"bandwidth.{f} must be > 0")
    if spec.l2.size <= 0 or spec.l2.rate <= 0:
        bad("l2.size and l2.rate must be > 0")
    for f in ("l0c_to_ub", "l0c_to_gm", "l0c_to_l1"):
        if getattr(bw, f) < 0:
            bad(f"bandwidth.{f} must be >= 0 (0: no such path)")
    if spec.coupled and bw.l0c_to_ub <= 0:
        bad("a coupled SoC needs bandwidth.l0c_to_ub > 0")
    for bname, b in spec.buffers:
        if b.size <= 0 or b.align <= 0 or b.size % b.align:
            bad(f"buffer {bname}: size must be a positive multiple of align")
        if not 0 <= b.reserved < b.size:
            bad(f"buffer {bname}: reserved must be in [0, size)")
