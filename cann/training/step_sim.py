"""The event-level simulation of one data-parallel training step (issue 16 item 4): backward
kernels on the device, gradient allreduces on one communication stream, the optimizer update.

Every gradient-splitting strategy (:mod:`cann.training.grad_split`) is scored by :func:`simulate`
and nothing else. The model, stated once:

* **Device stream.** The forward pass takes ``profile.forward`` seconds, then the backward kernels
  run one after another, in order, each for its simulated time (``profile.kernels``: seconds and
  the gradients it produces). A gradient is *produced* when its kernel ends. The backward compute
  ends when the last kernel ends.
* **Communication stream (one, FIFO).** A *segment* is a set of gradients allreduced as one
  message of their summed bytes. Segments are issued in the order given; segment ``k`` starts when
  all its gradients are produced **and** segment ``k-1`` has finished (HCCL and DDP issue one
  collective after another on one stream). It lasts ``allreduce(bytes)`` seconds
  (:class:`CommModel`). Communication does not slow compute (ASSUMPTION: the collectives run on the
  link DMA engines, not on the AI Core's pipes).
* **Iteration time** = max(backward compute end, last collective end) + ``profile.update`` (the
  optimizer update needs every summed gradient). **Communication tail** = iteration time − backward
  compute end: the time after the backward pass spent on gradient aggregation and the update
  (MindInsight's "step tail", scale-out.md §1.1 [G7]). All times in seconds.

The simulation is a discrete-event loop (a heap of kernel-end and collective-end events), written
apart from the planner's recurrence so that the planner is checked against it, not against itself.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from cann.errors import CannError

#: link-model kinds of :class:`CommModel`
COMM_KINDS = ("ring", "hierarchical")


@dataclass(frozen=True)
class StepProfile:
    """What a step simulation needs of one device's training step.

    ``names``/``nbytes``: the gradients in backward (production) order and their sizes in bytes;
    ``kernels``: the backward kernels in execution order, each ``(seconds, indices of the gradients
    it produces)`` (a gradient produced by no kernel is ready at the start of the backward pass);
    ``forward``: seconds of the forward pass before them; ``update``: seconds of the optimizer update.

    Raises (:meth:`check`):
        CannError: mismatched lengths, a negative time or size, a gradient index out of range or
            produced twice.
    """

    names: tuple[str, ...]
    nbytes: tuple[int, ...]
    kernels: tuple[tuple[float, tuple[int, ...]], ...]
    forward: float = 0.0
    update: float = 0.0

    def check(self) -> StepProfile:
        if len(self.names) != len(self.nbytes) or not self.names:
            raise CannError("step profile", f"{len(self.names)} gradient names for {len(self.nbytes)} sizes")
        if any(n < 0 for n in self.nbytes) or self.forward < 0 or self.update < 0 or \
                any(t < 0 for t, _ in self.kernels):
            raise CannError("step profile", "negative time or size")
        seen: set[int] = set()
        for _, grads in self.kernels:
            for g in grads:
                if not 0 <= g < len(self.names) or g in seen:
                    raise CannError("step profile", f"gradient index {g} out of range or produced twice")
                seen.add(g)
        return self

    def ready_times(self) -> list[float]:
        """Seconds from the step's start at which each gradient is produced."""
        ready = [self.forward] * len(self.names)
        t = self.forward
        for dt, grads in self.kernels:
            t += dt
            for g in grads:
                ready[g] = t
        return ready

    @property
    def compute_end(self) -> float:
        """Seconds from the step's start to the end of the backward pass."""
        t = self.forward
        for dt, _ in self.kernels:  # (summed as ready_times and simulate sum: the same float)
            t += dt
        return t


@dataclass(frozen=True)
class CommModel:
    """The allreduce cost of ``ranks`` devices on a cluster of :mod:`cann.hw.links` (seconds).

    ``ring``: one ring over all devices ``0..p-1``, every step at the ring's slowest link:
    ``2(p-1) alpha + 2(p-1)/p n beta`` (alpha the link latency, beta = 1 / bandwidth). Inside one
    8-device Atlas 800 server this is PCIe between its two HCCS groups; beyond one server, RoCE.

    ``hierarchical`` (p a multiple of the server size d, more than one server): reduce-scatter in
    each server (a ring over its slowest internal link: ``(d-1) alpha_s + (d-1)/d n beta_s``), then
    d concurrent rings over the s = p/d servers, each on its 1/d share over its own RoCE port
    (``2(s-1) alpha_r + 2(s-1)/s (n/d) beta_r``), then all-gather in each server (as the
    reduce-scatter). This is Horovod's hierarchical allreduce (scale-out.md §1.2 [G12b]) and the
    two-level scheme HCCL applies across servers (ASSUMPTION: HCCL's inter-server algorithm is not
    documented in our sources); on one server it is the ring.
    """

    ranks: int
    kind: str = "ring"
    cluster: str | None = None

    def __post_init__(self):
        if self.kind not in COMM_KINDS:
            raise CannError("link model", f"unknown kind '{self.kind}' (known: {', '.join(COMM_KINDS)})")
        if self.ranks < 1:
            raise CannError("link model", f"ranks must be >= 1, got {self.ranks}")

    @cached_property
    def _terms(self) -> tuple[tuple[float, float], ...]:
        """The allreduce as a max of affine terms ``(seconds, seconds per byte)`` (class docstring)."""
        from cann.hw.links import DEFAULT_CLUSTER, load_cluster

        spec = load_cluster(self.cluster or DEFAULT_CLUSTER)
        p, d = self.ranks, spec.devices_per_server

        def ring_links(members):
            return {spec.link_between(members[i], members[(i + 1) % len(members)]) for i in range(len(members))}

        if p <= 1:
            return ((0.0, 0.0),)
        if self.kind == "ring" or p <= d or p % d:
            return tuple((2 * (p - 1) * ln.latency, 2 * (p - 1) / p / ln.bandwidth)
                         for ln in sorted(ring_links(range(p)), key=lambda ln: ln.name))
        s = p // d
        intra = [((d - 1) * ln.latency, (d - 1) / d / ln.bandwidth)
                 for ln in sorted(ring_links(range(d)), key=lambda ln: ln.name)]
        inter = [(2 * (s - 1) * ln.latency, 2 * (s - 1) / s / d / ln.bandwidth)
                 for ln in sorted(ring_links([i * d for i in range(s)]), key=lambda ln: ln.name)]
        # max_i f_i + max_j g_j = max_ij (f_i + g_j): the sum of the phases is again a max of affine terms
        return tuple((2 * a + c, 2 * b + e) for a, b in intra for c, e in inter)

    def startup(self) -> float:
        """The latency part of one allreduce (alpha terms only), seconds."""
        return max(a for a, _ in self._terms)

    def allreduce(self, nbytes: float) -> float:
        """Seconds to allreduce ``nbytes`` (0 bytes: no collective, 0 s)."""
        if nbytes <= 0:
            return 0.0
        return max(a + b * nbytes for a, b in self._terms)


@dataclass(frozen=True)
class StepResult:
    """The simulated step: ``iteration``, ``tail`` (both seconds, module docstring), ``compute_end``,
    ``comm_end`` (the last collective's end, 0 without any) and each segment's ``(start, end)``."""

    iteration: float
    tail: float
    compute_end: float
    comm_end: float
    segments: tuple[tuple[float, float], ...]


def segments_from_ends(ends: Sequence[int], count: int) -> list[list[int]]:
    """Contiguous segments of ``range(count)`` from ascending inclusive end indices (HCCL's idxList;
    the last must be ``count - 1``)."""
    out, lo = [], 0
    for e in ends:
        out.append(list(range(lo, e + 1)))
        lo = e + 1
    return out


def simulate(profile: StepProfile, segments: Sequence[Sequence[int]], comm: CommModel) -> StepResult:
    """Simulate one step of ``profile`` whose gradients are allreduced in ``segments`` (lists of
    gradient indices, issued in this order) under ``comm`` (module docstring).

    Raises:
        CannError: segments that do not cover every gradient exactly once.
    """
    n = len(profile.names)
    flat = sorted(g for s in segments for g in s)
    if flat != list(range(n)) or any(not s for s in segments):
        raise CannError("segments", f"must cover the {n} gradients exactly once, without empty segments")
    seg_of = {g: k for k, s in enumerate(segments) for g in s}
    missing = [len(s) for s in segments]
    size = [sum(profile.nbytes[g] for g in s) for s in segments]
    # events: (time, order, kind, payload); kinds: 0 kernel end, 1 collective end
    events: list[tuple[float, int, int, int]] = []
    order = 0
    t_dev = profile.forward
    produced_at_start = set(range(n)) - {g for _, gs in profile.kernels for g in gs}
    for g in sorted(produced_at_start):
        missing[seg_of[g]] -= 1
    for i, (dt, _) in enumerate(profile.kernels):
        t_dev += dt
        heapq.heappush(events, (t_dev, order, 0, i))
        order += 1
    compute_end = t_dev
    next_seg, busy_until, comm_end = 0, 0.0, 0.0
    spans: list[tuple[float, float]] = [(0.0, 0.0)] * len(segments)
    now = profile.forward

    def start_ready(now: float) -> None:
        nonlocal next_seg, busy_until, order
        # FIFO: the next segment in issue order starts once produced and the stream is free
        while next_seg < len(segments) and missing[next_seg] == 0 and busy_until <= now:
            end = now + comm.allreduce(size[next_seg])
            spans[next_seg] = (now, end)
            busy_until = end
            heapq.heappush(events, (end, order, 1, next_seg))
            order += 1
            next_seg += 1

    start_ready(now)
    while events:
        now, _, kind, idx = heapq.heappop(events)
        if kind == 0:
            for g in profile.kernels[idx][1]:
                missing[seg_of[g]] -= 1
        else:
            comm_end = max(comm_end, now)
        start_ready(now)
    if next_seg != len(segments):  # unreachable: every segment becomes ready by the last kernel
        raise CannError("segments", "a segment never started")
    end = max(compute_end, comm_end)
    return StepResult(end + profile.update, end + profile.update - compute_end, compute_end, comm_end, tuple(spans))
