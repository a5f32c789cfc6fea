"""Gradient splitting (issue 16 item 4): which contiguous segments of the gradients, in backward
order, are allreduced together. Every strategy returns segments (lists of gradient indices of a
:class:`cann.training.step_sim.StepProfile`); all are scored by
:func:`cann.training.step_sim.simulate` only.

Strategies (:data:`STRATEGIES`; the sources are ``../shared/reference/scale-out.md`` §1):

* ``one``: one segment of every gradient (no overlap with the backward pass).
* ``per-tensor``: one allreduce per gradient.
* ``ddp``: PyTorch DDP's default buckets [G4][G4b]: gradients in backward order (DDP rebuilds its
  buckets in the observed ready order after the first iteration), a bucket closes once it holds
  at least its cap, 1 MiB for the first bucket, 25 MiB for the others (no tensor is split).
* ``hccl``: HCCL's default ``set_split_strategy_by_size([96.54, 3.46])`` [G1], by bytes in
  backward order (below for how percentages become segments).
* ``mindspore``: MindSpore's ResNet-50 ``all_reduce_fusion_config=[85, 160]`` [G7]. Its indices
  are split points of MindSpore's parameter list; we apply them **by position in our backward-
  order gradient list**: segments ``[0, 84]``, ``[85, 159]``, ``[160, L-1]`` (points >= L dropped).
* ``mgwfbp``: MG-WFBP's merge rule [G8] (HKBU-HPML/MG-WFBP@507f409, ``_generate_groups_mgwfbp``),
  with each gradient a layer: walking the gradients in backward order, gradient ``i`` is merged
  into ``i+1`` when its allreduce would not end before ``i+1`` is produced and either it cannot
  start before then or the wait merging adds is below the startup cost saved (the link model's
  latency part); the communication start times are recomputed after each merge.
* ``auto``: :func:`plan_auto`, the exact dynamic program below.

``--split-strategy`` also takes HCCL's explicit forms (:func:`parse`): ``idx:E1,E2,...``
(``set_split_strategy_by_idx``: ascending inclusive end indices, the last one L-1) and
``size:P1,P2,...`` (``set_split_strategy_by_size``: percentages of the gradient bytes summing to
100), each at most 8 segments. A size list becomes segments by cumulative bytes in backward order:
segment k ends at the first gradient whose cumulative bytes reach ``P1 + ... + Pk`` percent of the
total (gradients are never split; a segment left empty is dropped) -- ASSUMPTION: HCCL does not
document its rounding.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from cann.errors import CannError
from cann.training.step_sim import CommModel, StepProfile

STRATEGIES = ("one", "per-tensor", "ddp", "hccl", "mindspore", "mgwfbp", "auto")
#: HCCL's limit on the number of segments of its split APIs [G1]
HCCL_MAX_SEGMENTS = 8
HCCL_DEFAULT_SIZES = (96.54, 3.46)
MINDSPORE_RESNET50 = (85, 160)
DDP_FIRST_BUCKET = 1 << 20
DDP_BUCKET_CAP = 25 << 20
_WHERE = "--split-strategy"


@dataclass(frozen=True)
class SplitSpec:
    """A parsed ``--split-strategy``: ``kind`` one of :data:`STRATEGIES`, ``idx`` or ``size``, with
    ``values`` for the last two."""

    kind: str
    values: tuple[float, ...] = ()

    def __str__(self) -> str:
        if self.kind in ("idx", "size"):
            return f"{self.kind}:" + ",".join(f"{v:g}" for v in self.values)
        return self.kind


def parse(text: str) -> SplitSpec:
    """Parse a ``--split-strategy`` value (module docstring).

    Raises:
        CannError: an unknown name, a malformed list, indices not ascending or negative,
            percentages not positive or not summing to 100, more than 8 segments.
    """
    t = text.strip()
    if t in STRATEGIES:
        return SplitSpec(t)
    kind, sep, rest = t.partition(":")
    if not sep or kind not in ("idx", "size"):
        raise CannError(_WHERE, f"'{text}' is none of {', '.join(STRATEGIES)}, idx:E1,E2,... or size:P1,P2,...")
    try:
        nums = [float(v) for v in rest.split(",")] if kind == "size" else [int(v) for v in rest.split(",")]
    except ValueError:
        raise CannError(_WHERE, f"'{text}': expected a comma-separated list of "
                                f"{'numbers' if kind == 'size' else 'integers'}") from None
    if len(nums) > HCCL_MAX_SEGMENTS:
        raise CannError(_WHERE, f"'{text}': {len(nums)} segments, HCCL allows at most {HCCL_MAX_SEGMENTS}")
    if kind == "idx":
        if nums[0] < 0 or any(b <= a for a, b in zip(nums, nums[1:])):
            raise CannError(_WHERE, f"'{text}': end indices must be >= 0 and strictly ascending")
    else:
        if any(not math.isfinite(v) or v <= 0 for v in nums) or abs(sum(nums) - 100) > 1e-6:
            raise CannError(_WHERE, f"'{text}': percentages must be > 0 and sum to 100 (they sum to {sum(nums):g})")
    return SplitSpec(kind, tuple(nums))


def _from_ends(ends: Sequence[int]) -> list[list[int]]:
    out, lo = [], 0
    for e in ends:
        if e >= lo:
            out.append(list(range(lo, e + 1)))
            lo = e + 1
    return out


def by_idx(ends: Sequence[int], count: int) -> list[list[int]]:
    """HCCL's ``set_split_strategy_by_idx``: inclusive ascending ends, the last ``count - 1``.

    Raises:
        CannError: the last end is not ``count - 1``.
    """
    if ends[-1] != count - 1:
        raise CannError(_WHERE, f"idx:{','.join(map(str, ends))}: the last end index must be {count - 1} "
                                f"(the model has {count} gradients)")
    return _from_ends(ends)


def by_size(percents: Sequence[float], nbytes: Sequence[int]) -> list[list[int]]:
    """HCCL's ``set_split_strategy_by_size`` on gradients of ``nbytes`` (module docstring)."""
    total = sum(nbytes)
    ends, cum, k, goal = [], 0, 0, 0.0
    goals = []
    for p in percents:
        goal += p
        goals.append(goal / 100 * total)
    goals[-1] = total
    for i, n in enumerate(nbytes):
        cum += n
        while k < len(goals) and cum >= goals[k] - 1e-9 * total:
            ends.append(i)
            k += 1
    ends[-1] = len(nbytes) - 1
    return _from_ends(ends)


def ddp(nbytes: Sequence[int], first: int = DDP_FIRST_BUCKET, cap: int = DDP_BUCKET_CAP) -> list[list[int]]:
    """PyTorch DDP's bucket assignment (module docstring)."""
    out, cur, size, limit = [], [], 0, first
    for i, n in enumerate(nbytes):
        cur.append(i)
        size += n
        if size >= limit:
            out.append(cur)
            cur, size, limit = [], 0, cap
    if cur:
        out.append(cur)
    return out


def mindspore(count: int, points: Sequence[int] = MINDSPORE_RESNET50) -> list[list[int]]:
    """MindSpore's ``all_reduce_fusion_config`` split points by position (module docstring)."""
    return _from_ends([p - 1 for p in points if 0 < p < count] + [count - 1])


def mgwfbp(profile: StepProfile, comm: CommModel) -> list[list[int]]:
    """MG-WFBP's merged-gradient rule (module docstring), gradients in backward order."""
    ready = profile.ready_times()
    n = len(ready)
    size = list(profile.nbytes)
    tc = [comm.allreduce(s) for s in size]
    alpha = comm.startup()

    def starts() -> list[float]:
        c = [0.0] * n
        c[0] = ready[0]
        for i in range(1, n):
            c[i] = max(c[i - 1] + tc[i - 1], ready[i])
        return c

    c = starts()
    groups, group = [], []
    for i in range(n - 1):
        group.append(i)
        nxt = ready[i + 1]
        merged = False
        if nxt < c[i] + tc[i] and (c[i] > nxt or nxt - c[i] < alpha):
            tc[i] = 0.0
            size[i + 1] += size[i]
            size[i] = 0
            tc[i + 1] = comm.allreduce(size[i + 1])
            c = starts()
            merged = True
        if not merged:
            groups.append(group)
            group = []
    group.append(n - 1)
    groups.append(group)
    return groups


def plan_auto(profile: StepProfile, comm: CommModel, max_segments: int | None = None) -> list[list[int]]:
    """The contiguous segments (in backward order) minimizing the simulated iteration time, and among
    those the fewest segments (fewer collectives; HCCL allows at most 8).

    Exact dynamic program: with ``r_i`` the time gradient ``i`` is produced and ``c(n)`` the
    allreduce of ``n`` bytes, the earliest end of the collectives covering gradients ``0..i`` with
    the last segment ``j+1..i`` is ``F[i] = min_j max(F[j], max r_{j+1..i}) + c(S(j+1..i))``
    (``F[-1] = 0``). The step simulation's FIFO stream gives exactly this recurrence for contiguous
    segments, and ``max(F[j], r)`` is nondecreasing in ``F[j]``, so keeping only the earliest end per
    prefix loses nothing: ``F[L-1]`` is the least last-collective end and ``max(compute end,
    F[L-1]) + update`` the least iteration time (O(L^2)). The same recurrence with the number of
    segments ``k`` as a second index (``F[k][i]``, O(L^2) per level) then finds the fewest segments
    reaching that time; ``max_segments``: the best plan of at most that many segments.
    """
    ready = profile.ready_times()
    n = len(ready)
    prefix = [0]
    for b in profile.nbytes:
        prefix.append(prefix[-1] + b)
    inf = math.inf
    floor = profile.compute_end  # a last collective ending by then gives the same iteration time
    if max_segments is None:
        f = [0.0] + [inf] * n
        for i in range(1, n + 1):
            r = -inf
            for j in range(i - 1, -1, -1):  # last segment: gradients j..i-1
                r = max(r, ready[j])
                f[i] = min(f[i], max(f[j], r) + comm.allreduce(prefix[i] - prefix[j]))
        goal = max(f[n], floor)
        kmax = n
    else:
        goal, kmax = None, max(1, min(max_segments, n))
    # levels[k][i]: (earliest end, split j) of gradients 0..i-1 in exactly k segments
    levels = [[(0.0, -1)] + [(inf, -1)] * n]
    for k in range(1, kmax + 1):
        prev, cur = levels[-1], [(inf, -1)] * (n + 1)
        for i in range(k, n + 1):
            r, top = -inf, (inf, -1)
            for j in range(i - 1, k - 2, -1):
                r = max(r, ready[j])
                if prev[j][0] == inf:
                    continue
                t = max(prev[j][0], r) + comm.allreduce(prefix[i] - prefix[j])
                if t < top[0]:
                    top = (t, j)
            cur[i] = top
        levels.append(cur)
        if goal is not None and max(cur[n][0], floor) <= goal * (1 + 1e-12):
            break
    best = min(range(1, len(levels)), key=lambda k: (max(levels[k][n][0], floor), k))
    segs, i, k = [], n, best
    while k > 0:
        j = levels[k][i][1]
        segs.append(list(range(j, i)))
        i, k = j, k - 1
    return segs[::-1]


def plan(spec: SplitSpec | str, profile: StepProfile, comm: CommModel) -> list[list[int]]:
    """The segments of strategy ``spec`` (a :class:`SplitSpec` or its text) for ``profile``."""
    if isinstance(spec, str):
        spec = parse(spec)
    n = len(profile.names)
    if spec.kind == "one":
        return [list(range(n))]
    if spec.kind == "per-tensor":
        return [[i] for i in range(n)]
    if spec.kind == "ddp":
        return ddp(profile.nbytes)
    if spec.kind == "hccl":
        return by_size(HCCL_DEFAULT_SIZES, profile.nbytes)
    if spec.kind == "size":
        return by_size(spec.values, profile.nbytes)
    if spec.kind == "idx":
        return by_idx([int(v) for v in spec.values], n)
    if spec.kind == "mindspore":
        return mindspore(n)
    if spec.kind == "mgwfbp":
        return mgwfbp(profile, comm)
    return plan_auto(profile, comm)


def segment_ends(segments: Sequence[Sequence[int]]) -> list[int]:
    """HCCL's ``idxList`` of contiguous ``segments``: each segment's last index."""
    return [s[-1] for s in segments]
