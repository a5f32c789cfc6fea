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


@dataclass(frozen=True)
class VectorSpec:
    """Vector unit: ``block_bytes`` per DataBlock, ``blocks_per_repeat`` blocks per repeat."""

    block_bytes: int
    blocks_per_repeat: int
    max_repeat: int
    cycles_per_repeat: int
    cycles_per_repeat_transcendental: int

    @property
    def repeat_bytes(self) -> int:
        return self.block_bytes * self.blocks_per_repeat


@dataclass(frozen=True)
class BandwidthSpec:
    """Per-path bandwidths in bytes per cycle per core."""

    gm_to_l1: int
    gm_to_ub: int
    l1_to_l0a: int
    l1_to_l0b: int
    l0c_to_ub: int
    ub_to_gm: int


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
    core_type: str
    ai_core_count: int
    clock_mhz: int
    buffers: tuple[tuple[str, BufferSpec], ...]
    cube: CubeSpec
    vector: VectorSpec
    bandwidth: BandwidthSpec
    latency: LatencySpec
    event_ids: int

    def buffer(self, name: str) -> BufferSpec:
        """The spec of on-chip buffer ``name`` (one of ``BUFFER_NAMES``)."""
        return dict(self.buffers)[name]


def available_socs() -> list[str]:
    """Names accepted by ``--soc_version``."""
    return sorted(p.stem for p in _SOC_DIR.glob("*.toml"))


@cache
def load_soc(name: str) -> SocSpec:
    """Load and validate ``cann/hw/socs/<name>.toml``.

    Raises:
        CannError: unknown SoC name (the message lists the known ones) or an invalid file.
    """
    path = _SOC_DIR / f"{name}.toml"
    if not path.is_file():
        raise CannError("--soc_version", f"unknown SoC '{name}' (known: {', '.join(available_socs())})")
    raw = tomllib.loads(path.read_text())
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
            event_ids=int(raw["sync"]["event_ids"]),
        )
    except (KeyError, TypeError) as e:
        raise CannError(str(path), f"invalid SoC description: {e}") from None
    for bname, b in spec.buffers:
        if b.size <= 0 or b.align <= 0 or b.size % b.align:
            raise CannError(str(path), f"buffer {bname}: size must be a positive multiple of align")
    return spec
