"""The communication cost model between devices: latency and bandwidth per link type (alpha-beta).

A cluster description (``cann/hw/clusters/<name>.toml``) places device ``i`` on server
``i // devices_per_server``, in group ``(i % devices_per_server) // group_size``: two devices of one group
talk over HCCS, of one server over PCIe, of two servers over RoCE. A message of ``n`` bytes over a link takes
``latency + n / bandwidth`` seconds (:meth:`LinkSpec.time`). Simulated time only: no figure here is measured
on the host.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from cann.errors import CannError

_DIR = Path(__file__).parent / "clusters"
LINK_TYPES = ("hccs", "pcie", "roce")
DEFAULT_CLUSTER = "Atlas800"


@dataclass(frozen=True)
class LinkSpec:
    """One link type: ``bandwidth`` bytes/s (one direction), ``latency`` s per message."""

    name: str
    bandwidth: float
    latency: float

    def time(self, nbytes: int) -> float:
        """Seconds to move ``nbytes`` in one message (0 bytes: no message, 0 s)."""
        return 0.0 if nbytes <= 0 else self.latency + nbytes / self.bandwidth


@dataclass(frozen=True)
class ClusterSpec:
    name: str
    devices_per_server: int
    group_size: int
    links: tuple[tuple[str, LinkSpec], ...]

    def link(self, kind: str) -> LinkSpec:
        return dict(self.links)[kind]

    def link_between(self, a: int, b: int) -> LinkSpec:
        """The link type devices ``a`` and ``b`` use (see the module docstring)."""
        sa, sb = divmod(a, self.devices_per_server), divmod(b, self.devices_per_server)
        if sa[0] != sb[0]:
            return self.link("roce")
        if sa[1] // self.group_size != sb[1] // self.group_size:
            return self.link("pcie")
        return self.link("hccs")


def available_clusters() -> list[str]:
    return sorted(p.stem for p in _DIR.glob("*.toml"))


@cache
def load_cluster(name: str = DEFAULT_CLUSTER) -> ClusterSpec:
    """Load and validate ``cann/hw/clusters/<name>.toml``.

    Raises:
        CannError: an unknown name (listing the known ones) or an invalid file (naming it and the field).
    """
    if name not in available_clusters():
        raise CannError("--cluster", f"unknown cluster '{name}' (known: {', '.join(available_clusters())})")
    path = _DIR / f"{name}.toml"
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
        links = []
        for kind in LINK_TYPES:
            spec = LinkSpec(kind, float(raw["links"][kind]["bandwidth"]), float(raw["links"][kind]["latency"]))
            if not (spec.bandwidth > 0 and spec.latency >= 0):
                raise ValueError(f"links.{kind}: bandwidth must be > 0 and latency >= 0")
            links.append((kind, spec))
        cluster = ClusterSpec(raw["name"], int(raw["devices_per_server"]), int(raw["group_size"]), tuple(links))
        if cluster.devices_per_server < 1 or not 1 <= cluster.group_size <= cluster.devices_per_server:
            raise ValueError("devices_per_server >= 1 and 1 <= group_size <= devices_per_server")
    except (OSError, tomllib.TOMLDecodeError, KeyError, TypeError, ValueError) as e:
        raise CannError(str(path), f"invalid cluster description: {type(e).__name__}: {e}") from None
    return cluster
