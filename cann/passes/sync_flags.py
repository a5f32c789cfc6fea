"""``ascend-insert-sync{mode=flags}``: set_flag / wait_flag pairs only where a dependence crosses pipes.

The kernel's existing synchronisation (``set_flag``, ``wait_flag``, ``pipe_barrier``,
``loop_rotate_event``) is dropped and recomputed, so the mode is idempotent.

**Dependences** come from each instruction's byte footprints, the table the race checker uses
(:func:`cann.hw.footprint.footprints`): two instructions on different pipes whose footprints in one
buffer overlap, one of them writing (RAW, WAR, WAW). Global memory is addressed per kernel argument
(arguments are distinct buffers; a ``copy_gm_to_ub_reg`` reads anywhere in its argument, and an
argument moved by ``block_offset`` after it was accessed is treated as overlapping everywhere); the
scalar registers (``ld_idx`` -> ``copy_gm_to_ub_reg``) are a buffer as in the race checker.

**Placement**: for a consumer B on pipe q and its most recent conflicting producer A on pipe p,
``set_flag p->q`` goes right after A and ``wait_flag p->q`` right before B, unless q already knows
A happened before: every pipe carries a vector clock of what it knows of every other pipe, and a
wait imports the setter's clock (transitively), so a dependence implied by earlier pairs gets none.

**Event ids** per (p, q) pipe pair are ``0 .. event_ids - reserved_event_ids - 1`` (the SoC's
``[sync]`` table), the lowest id free over the pair's program-order lifetime (from its set to its
wait; an id is reused once its previous wait is done). When none is free the set moves later (to
the first point where an id is free, still after A); when that is impossible a ``pipe_barrier``
(PIPE_ALL) goes before B instead.

**Regions**: a PIPE_ALL barrier fences every ``block_if`` region (a barrier first thing inside
it, and one after a run of consecutive regions, so a core skipping a region pays nothing for it;
no pair crosses a fence). A hardware loop is no fence: the scope around it sees it through proxies
(:mod:`cann.passes.sync_loops`), and pairs cross it. Only when the event ids the scope keeps around
a loop leave a pair inside it (or in a loop nested in it) without an id, the loop is fenced after
all, a barrier right before and right after it, so that it keeps only the ids of pairs alive
across it: one barrier per entry instead of one per iteration. Inside a loop body, besides the dependences within an
iteration, B in iteration k depends on A in iteration k - d (d >= 1) when their footprints meet
there: GM addresses move by ``loop_offset`` strides and addresses in a ``loop_rotate`` region move
to copy ``(c + i*step) % copies``, so d is the smallest distance at which the two footprints land
on the same bytes (distance 1 for unmoved buffers). An on-chip access a ``loop_step`` of the loop
moves is a footprint moving by its bytes per iteration (exact distance against an access moving
alike, the hull of its iterations against others); moved by an enclosing loop's step, or in a
rotated region, it counts as everything it can cover while the scope runs. Such a loop-carried pair uses ``d`` event ids
(``d + 1`` when A precedes B in the body) rotating with ``loop_rotate_event ... copies step=1``
(none for one id), pre-set before the loop and drained after it, so every set is waited.
A ``loop_rotate`` region must not partially overlap another one of the same buffer (CannError).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

from cann.dialects.ascend import AscendInstrOp, KernelOp, make_op
from cann.dialects.tile import loop_form
from cann.errors import CannError
from cann.hw import isa
from cann.hw.config import SocSpec
from cann.passes.sync_deps import (
    BIG,
    NONE,
    NP,
    Ctrl,
    Ins,
    Loop,
    Region,
    check_regions,
    covers,
    distance,
    fill_accesses,
    loop_info,
    newer,
    parse,
    shift,
    view,
    walk_ins,
)
from cann.passes.sync_loops import Proxy, expand, place_hoisted, reserved_for, same_loop, virtual_raw_only

_ALL = int(isa.Pipe.ALL)
_SYNC = ("set_flag", "wait_flag", "pipe_barrier", "loop_rotate_event")


@dataclass
class _Pair:
    p: int
    q: int
    a: int  # producer position in the scope
    b: int  # consumer position
    d: int  # iteration distance
    gs: int = 0  # set gap (set before item gs)
    base: int = -1  # event id (a group's first id)
    barrier: bool = False  # replaced by a pipe_barrier before b
    ahead: int = 0  # iterations the producer's pipe may run ahead of the consumer's wait (loops)

    @property
    def copies(self) -> int:
        """Rotating ids: enough that an id is set again only after its previous wait has run."""
        return max(self.d if self.a > self.b else self.d + 1, self.d + self.ahead, 1)


@dataclass
class _Ctx:
    spec: SocSpec
    nids: int
    free_barriers: bool = True
    regions: list = field(default_factory=list)  # every loop_rotate region of the kernel
    pipes: frozenset = frozenset()  # the pipes the kernel's instructions use
    where: str = ""
    scopes: dict = field(default_factory=dict)  # id of a scope's item list -> its analysis (_scope)
    starved: int = 0  # pairs that became barriers for want of an event id (nested scopes included)
    #: the kernel's loops are synchronised as if any trip count (tiling ``loops`` = 1: loop-carried
    #: pairs at every distance, not only those its count reaches), so its code does not depend on them
    any_count: bool = False


def _analyse(items: list, loop: Loop | None, ctx: _Ctx,
             forced: frozenset = frozenset()) -> tuple[list[_Pair], set[int]]:
    """Phase 1 on one scope: the flag pairs needed (vector clocks, transitive), with a PIPE_ALL
    barrier before each position of ``forced``. Also returns the positions (outside loops) where one
    barrier would replace the consumer's pairs at no cost: a barrier waits for every pipe, so
    it is as early as the pair when everything before the consumer on every other pipe already
    happened before the producer (the producer is its pipe's last instruction), and it delays no
    later work when the next instruction of every third pipe waits for the producer anyway; it then
    costs one scalar instruction instead of two."""
    # barrier points: (position, the last position they order); a region is one, so is a forced barrier
    marks = [(i, i) if _fence(it) else (i, i - 1) for i, it in enumerate(items) if _fence(it) or i in forced]
    views: dict[int, list] = {}
    by_buf: dict[int, list[list]] = {}  # buffer key -> per pipe [(pos, view), ...] in order
    for pos, it in enumerate(items):
        if isinstance(it, Ins):
            views[pos] = [view(a, loop, ctx.regions, mv) for a, mv in zip(it.accs, it.moves)]
            for v in views[pos]:
                by_buf.setdefault(v[1], [[] for _ in range(NP)])[it.pipe].append((pos, v))
    carried = loop is not None  # any loop may repeat: its code does not depend on its trip count
    start = (1, marks[-1][1]) if carried and marks else NONE
    K = [[start] * NP for _ in range(NP)]
    hist = [([-1], [list(K[q])]) for q in range(NP)]  # per pipe: positions, knowledge vectors
    pairs: list[_Pair] = []

    def needs(pos: int, q: int, known: list) -> dict[int, tuple]:
        """pipe -> the most recent conflicting access (iterations back, position) of that pipe the
        instruction at ``pos`` (pipe q) must follow, skipping what ``known`` already covers."""
        req: dict[int, tuple] = {}
        for v in views[pos]:
            lists = by_buf[v[1]]
            for p in range(NP):
                if p == q or not lists[p]:
                    continue
                lst = lists[p]
                kq = known[p]
                j = bisect_right(lst, (pos,)) - 1
                while j >= 0:
                    a, x = lst[j]
                    if same_loop(items, a, pos) or virtual_raw_only(x, v):
                        j -= 1
                        continue
                    if covers(kq, (0, a)) or (p in req and covers(req[p], (0, a))):
                        break
                    if distance(x, v, 0, 0, loop) is not None:
                        req[p] = (0, a) if p not in req else newer(req[p], (0, a))
                        break
                    j -= 1
                if carried and (p not in req or req[p][0] > 0) and kq[0] > 0:
                    for a, x in lst:  # (another iteration's loop region is another instance)
                        if virtual_raw_only(x, v):
                            continue
                        d = distance(x, v, 1, BIG if ctx.any_count else loop.count - 1, loop)
                        if d is None or covers(kq, (d, a)):
                            continue
                        req[p] = (d, a) if p not in req else newer(req[p], (d, a))
        return req

    # in a loop: what each instruction will know once its own dependences are met (whatever meets
    # them), the lower bound of a producer later in the body (program order: an earlier iteration)
    will_know = {pos: needs(pos, it.pipe, [NONE] * NP) for pos, it in enumerate(items)
                 if carried and isinstance(it, Ins)}

    def snapshot(p: int, r: tuple, b: int) -> list:
        d, a = r
        ps, vs = hist[p]
        if a < b:
            vec = list(vs[bisect_right(ps, a) - 1])
        else:  # later in the body, not analysed yet: what p knows now, and a fence between
            vec = list(K[p])
            f = [upto for x, upto in marks if b < x <= a]
            if f:
                vec = [newer(k, (0, f[-1])) for k in vec]
            for x in range(b, a + 1):
                if items[x].__class__ is Ins and items[x].pipe == p:
                    for r2, k2 in will_know[x].items():
                        vec[r2] = newer(vec[r2], k2)
        vec = [shift(k, d) for k in vec]
        vec[p] = (d, a)
        return vec

    for pos, it in enumerate(items):
        if pos in forced or _fence(it):
            known = (0, pos) if _fence(it) else (0, pos - 1)
            for q in range(NP):
                K[q] = [known] * NP
                hist[q][0].append(pos)
                hist[q][1].append(list(K[q]))
        if not isinstance(it, Ins):
            continue
        q = it.pipe
        req = needs(pos, q, K[q])
        unmet = {p: r for p, r in req.items() if not covers(K[q][p], r)}
        while unmet:
            snaps = {p: snapshot(p, r, pos) for p, r in unmet.items()}

            def score(p):
                joined = [newer(k, s) for k, s in zip(K[q], snaps[p])]
                return sum(covers(joined[p2], r2) for p2, r2 in unmet.items()), -p

            best = max(unmet, key=score)
            d, a = unmet[best]
            pairs.append(_Pair(best, q, a, pos, d, gs=a + 1))
            K[q] = [newer(k, s) for k, s in zip(K[q], snaps[best])]
            unmet = {p: r for p, r in unmet.items() if not covers(K[q][p], r)}
        hist[q][0].append(pos)
        hist[q][1].append(list(K[q]))
    return pairs, _cheap_barriers(items, pairs, hist, snapshot, carried, forced, ctx.pipes), hist


def _cheap_barriers(items: list, pairs: list[_Pair], hist: list, snapshot, wrap: bool, forced,
                    used: frozenset = frozenset()) -> set[int]:
    """The consumer positions where a barrier is no slower than the pair (see :func:`_analyse`);
    ``used``: the pipes of the kernel (in a loop body that leaves one of them without work, no
    barrier is free: that pipe may still run code from before the loop, loops being no fence).
    ``wrap``: the scope is a repeating loop body (the neighbours of an instruction may be in the
    previous or the next iteration)."""
    by_b: dict[int, list[_Pair]] = {}
    for pr in pairs:
        by_b.setdefault(pr.b, []).append(pr)
    n = len(items)
    pipes = [it.pipe if isinstance(it, Ins) else -1 for it in items]  # -1: a fence (or control)
    stops = {i for i, it in enumerate(items) if _fence(it)} | set(forced)

    at = [[x for x in range(n) if pipes[x] == r] for r in range(NP)]
    stop_list = sorted(stops)

    def stop_in(lo: int, hi: int) -> bool:  # a barrier or fence before an item in (lo, hi]
        i = bisect_right(stop_list, lo)
        return i < len(stop_list) and stop_list[i] <= hi

    def nearest(b: int, r: int, step: int) -> tuple[int, int] | None:
        """(iterations away, position) of the nearest instruction of pipe r before (step -1) or
        after (+1) position b (in a loop, b itself one iteration away counts: the consumer's own
        previous run holds its pipe, so a barrier would wait for it), None when a fence or barrier
        comes first or there is none."""
        xs = at[r]
        if step < 0:
            i = bisect_right(xs, b - 1) - 1
            if i >= 0:
                return None if stop_in(xs[i], b) else (0, xs[i])
            if not wrap or not xs or stop_in(-1, b) or stop_in(xs[-1], n):
                return None
            return 1, xs[-1]
        i = bisect_right(xs, b)
        if i < len(xs):
            return None if stop_in(b, xs[i]) else (0, xs[i])
        if not wrap or not xs or stop_in(b, n) or stop_in(-1, xs[0]):
            return None
        return 1, xs[0]

    # a loop body runs beside the code around it (loops are no fence): a pipe with no work in the
    # body may be busy with work from before the loop, which a barrier would wait for
    idle = wrap and any(not at[r] for r in used)
    out: set[int] = set()
    for b, prs in by_b.items():
        if idle or any(pr.d > 1 or (pr.d == 1 and pr.a < pr.b) for pr in prs):
            continue
        q = prs[0].q
        producers = {pr.p for pr in prs}
        joined = [NONE] * NP
        ok = True
        for pr in prs:
            between = range(pr.a + 1, b) if pr.d == 0 else [*range(pr.a + 1, n), *range(b)]
            if any(pipes[x] == pr.p for x in between):  # the producer is its pipe's last
                ok = False
                break
            joined = [newer(k, s) for k, s in zip(joined, snapshot(pr.p, (pr.d, pr.a), b))]
        for r in range(NP):
            if not ok:
                break
            if r in producers:
                continue
            last = nearest(b, r, -1)
            if last is not None and not covers(joined[r], last):
                ok = False
            elif r != q and (nxt := nearest(b, r, 1)) is not None:
                ps, vs = hist[r]
                known = vs[bisect_right(ps, nxt[1]) - 1]
                ok = all(covers(known[pr.p], (nxt[0] + pr.d, pr.a)) for pr in prs)
        if ok:
            out.add(b)
    return out


def _shares(pr: _Pair) -> bool:
    """A one-id pair within an iteration: its id can serve others too."""
    return pr.d == 0 and pr.copies == 1


def _allocate(pairs: list[_Pair], reserved: dict, ctx: _Ctx, hist: list, carried: int = 0) -> dict:
    """Phase 2: event ids, so that no id is set again before its previous wait has run *in time*
    (a set while the flag is still set merges the two settings).

    In a repeating loop body (``carried``: its trip count, 0 elsewhere) a pair whose producer's pipe
    may run ahead of the consumer's wait (from what that pipe knows at its set, ``hist``) gets ids
    of its own, held for the whole loop and rotating (``loop_rotate_event``) over that many
    iterations (over every iteration when nothing orders the producer after the consumer; a
    barrier when the loop has more iterations than there are ids); the one-id pairs share ids as
    below, an id's first set of an iteration also ordered after its last wait of the iteration before. Elsewhere
    (straight-line code), the pairs within the scope reuse ids: the lowest id whose previous wait
    the set's pipe is ordered after (it knows the consumer that wait guarded has run), the set
    moved later if needed. A pair that cannot get an id becomes a barrier. Returns the ids held for
    the whole loop per pipe pair (held by nested scopes too)."""

    def knows_at(p: int, gap: int) -> list:
        ps, vs = hist[p]
        j = bisect_right(ps, gap - 1) - 1
        return vs[j] if j >= 0 else [NONE] * len(vs[0] if vs else [])

    def ordered_after(p: int, gap: int, q: int, b: int) -> int | None:
        """The first gap >= ``gap`` where a set on pipe p runs after pipe q's item ``b`` (None: none)."""
        ps, vs = hist[p]
        for k in range(max(bisect_right(ps, gap - 1) - 1, 0), len(ps)):
            if covers(vs[k][q], (0, b)):
                return max(gap, ps[k] + 1)
        return None

    for pr in pairs:  # a scope emitted again (a loop fenced after all, see _emit) starts afresh
        pr.gs, pr.base, pr.barrier, pr.ahead = pr.a + 1, -1, False, 0
    held: dict[tuple[int, int], set[int]] = {}
    if carried:
        for pr in pairs:
            k = knows_at(pr.p, pr.gs)
            known = k[pr.q] if k else NONE
            if known == NONE:  # never ordered after its consumer: a distinct id for every iteration
                pr.ahead = carried
                continue
            # the producer's pipe, at its set, has seen the consumer of ``known[0]`` iterations back
            pr.ahead = known[0] if known[1] >= pr.b else known[0] + 1
    for pr in pairs:
        if pr.barrier or _shares(pr):
            continue
        key = (pr.p, pr.q)
        busy = reserved.get(key, set()) | held.get(key, set())
        for base in range(ctx.nids - pr.copies + 1):
            ids = set(range(base, base + pr.copies))
            if not ids & busy:
                pr.base = base
                held.setdefault(key, set()).update(ids)
                break
        else:
            pr.barrier = True
            ctx.starved += 1
    last: dict[tuple[int, int], dict[int, int]] = {}  # per pipe pair and id: its last wait's position
    first: dict[tuple[int, int], dict[int, _Pair]] = {}  # ... and its first pair (in a loop body)
    for pr in sorted((pr for pr in pairs if not pr.barrier and _shares(pr)), key=lambda x: (x.gs, x.b)):
        key = (pr.p, pr.q)
        busy = reserved.get(key, set()) | held.get(key, set())
        lw, fp = last.setdefault(key, {}), first.setdefault(key, {})
        options = []
        for e in range(ctx.nids):
            if e in busy:
                continue
            g = pr.gs if e not in lw else ordered_after(pr.p, max(pr.gs, lw[e] + 1), pr.q, lw[e])
            if g is None or g > pr.b:
                continue
            # in a loop the id's first set, one iteration later, must run after this wait
            if carried and e in fp and not covers(knows_at(fp[e].p, fp[e].gs)[pr.q], (1, pr.b)):
                continue
            options.append((g, e))
        if not options:
            pr.barrier = True
            ctx.starved += 1
            continue
        pr.gs, pr.base = min(options)
        lw[pr.base] = pr.b
        fp.setdefault(pr.base, pr)
    return held


# ---------------------------------------------------------------------------------- emission

def _flag(m: str, p: int, q: int, e: int) -> AscendInstrOp:
    return make_op(m, src_pipe=p, dst_pipe=q, event=e)


def _barrier() -> AscendInstrOp:
    return make_op("pipe_barrier", pipe=_ALL)


def _fence(it) -> bool:
    """A block_if region: a PIPE_ALL barrier orders everything around it (a loop is not one)."""
    return isinstance(it, Region) and not it.is_loop


def _scope(items: list, loop: Loop | None, ctx: _Ctx) -> tuple:
    """One scope's analysis, once: ``(items with the proxies of its loops, pairs, forced barrier
    positions, knowledge history, the (p, q) pipe pairs of its flags)``."""
    key = id(items)
    got = ctx.scopes.get(key)
    if got is not None:
        return got
    items = expand(items, loop, ctx.regions, ctx.where, lambda r: _scope(r.body, loop_info(r, ctx.where), ctx)[4])
    forced: frozenset = frozenset()
    pairs, cheap, hist = _analyse(items, loop, ctx)
    if not ctx.free_barriers:
        cheap = set()
    while cheap - forced:  # each barrier can make another pair the only one left at its consumer
        forced |= cheap
        pairs, cheap, hist = _analyse(items, loop, ctx, forced)
    got = (items, pairs, forced, hist, {(pr.p, pr.q) for pr in pairs})
    ctx.scopes[key] = got
    return got


def _emit(items: list, loop: Loop | None, reserved: dict, ctx: _Ctx, where: str) -> tuple[list, list[_Pair], list]:
    """The scope's instructions with its synchronisation; returns (ops, loop-carried pairs, the
    id groups of nested loops whose pre-sets and drains move out of this loop scope: see
    :func:`cann.passes.sync_loops.place_hoisted`)."""
    items, pairs, cheap, hist, _ = _scope(items, loop, ctx)
    # any loop may repeat: its code does not depend on its trip count
    held = _allocate(pairs, reserved, ctx, hist, max(loop.count, 2) if loop is not None else 0)
    inner = {k: set(v) for k, v in reserved.items()}
    for k, v in held.items():
        inner.setdefault(k, set()).update(v)
    sets: dict[int, list] = {}
    waits: dict[int, list] = {}
    barriers: set[int] = set(cheap)
    for pr in pairs:
        if pr.barrier:
            barriers.add(pr.b)
            continue
        wait_id = pr.base + (-pr.d) % pr.copies  # iteration m waits the id set in iteration m - d
        sets.setdefault(pr.gs, []).append(_flag("set_flag", pr.p, pr.q, pr.base))
        waits.setdefault(pr.b, []).append(_flag("wait_flag", pr.p, pr.q, wait_id))
    out: list = []
    cands: list = []  # (start, end, (p, q, ids)) of the nested loops' hoistable id groups
    for g in range(len(items) + 1):
        out += sets.get(g, [])
        out += waits.get(g, [])
        # a loop body's first barrier goes last: the same point between two iterations, and it
        # then meets the exit fence instead of the entry one
        if g in barriers and not (loop is not None and g == 0) or (g == len(items) and loop is not None
                                                                    and 0 in barriers):
            out.append(_barrier())
        if g == len(items):
            break
        it = items[g]
        if isinstance(it, Region):
            res = inner
            if it.is_loop:
                res = {k: set(v) for k, v in inner.items()}
                keep = reserved_for(it, items, pairs, hist, lambda pr: 1 if _shares(pr) else pr.copies,
                                    loop is not None)
                for k, v in keep.items():
                    res.setdefault(k, set()).update(v)
            start = len(out)
            starved = ctx.starved
            ops, hoist = _emit_region(it, res, ctx, where)
            if it.is_loop and ctx.starved > starved:
                # the ids this scope's pairs keep around the loop starve it: fence it instead (a
                # PIPE_ALL barrier before and after it orders every pair waited before it or set
                # after it), so that it keeps from them only the ids of the pairs alive across it
                ctx.starved = starved
                res = {k: set(v) for k, v in inner.items()}
                for k, v in reserved_for(it, items, pairs, hist, lambda pr: 1 if _shares(pr) else pr.copies,
                                         loop is not None, fenced=True).items():
                    res.setdefault(k, set()).update(v)
                ops, hoist = _emit_region(it, res, ctx, where)
                out.append(_barrier())  # its nested loops' pre-sets and drains go inside the fence
                start = len(out)
                out += ops
                cands += [(start, len(out), h) for h in hoist]
                out.append(_barrier())
            else:
                out += ops
                cands += [(start, len(out), h) for h in hoist]
            nxt = items[g + 1] if g + 1 < len(items) else None
            if not it.is_loop and not _fence(nxt):
                out.append(_barrier())  # after a run of block_ifs: whichever of them ran is done
        elif type(it) is not Proxy:
            out.append(it.op)
    out, hoisted = place_hoisted(out, cands, loop is not None)
    return out, [pr for pr in pairs if not pr.barrier and (pr.d > 0 or pr.copies > 1)], hoisted


def _emit_region(region: Region, reserved: dict, ctx: _Ctx, where: str) -> tuple[list, list]:
    """A region's ops; for a loop also its id groups whose pre-sets and drains are left to the
    enclosing scope (:func:`cann.passes.sync_loops.place_hoisted`): ``(p, q, ids)``."""
    if not region.is_loop:
        body, _, _ = _emit(region.body, None, reserved, ctx, where)
        return [region.open, _barrier(), *body, region.close], []  # fenced before its body; after, see _emit
    loop = loop_info(region, where)
    body, groups, hoist = _emit(region.body, loop, reserved, ctx, where)
    pre, rot, drain = [], [], []
    for pr in groups:
        c = pr.copies
        if c > 1:
            rot.append(make_op("loop_rotate_event", src_pipe=pr.p, dst_pipe=pr.q, base=pr.base, copies=c, step=1))
        if pr.d == 0:  # set and wait in the same iteration: nothing before or after the loop
            continue
        d = pr.d
        if c == d:  # every id is pre-set and every id drained, whatever the trip count
            hoist.append((pr.p, pr.q, tuple(range(pr.base, pr.base + c))))
            continue

        def wait_of(m: int, c: int = c, d: int = d) -> int:  # the id offset iteration m waits
            return (m - d) % c

        pre += [_flag("set_flag", pr.p, pr.q, pr.base + wait_of(m)) for m in range(d)]  # iterations -d .. -1
        left = [k % c for k in range(max(0, loop.count - d), loop.count)]  # sets never waited in the loop
        left += [wait_of(m) for m in range(loop.count, d)]  # pre-sets no iteration waited
        drain += [_flag("wait_flag", pr.p, pr.q, pr.base + e) for e in sorted(left)]
    return [*pre, region.open, *region.ctrl, *rot, *body, region.close, *drain], hoist



def insert_flags(kernel: KernelOp, spec: SocSpec, *, free_barriers: bool = True) -> int:
    """Mode ``flags`` on one kernel (see the module docstring); returns the number of sync
    instructions in the result. ``free_barriers``: replace a consumer's pairs by a PIPE_ALL
    barrier where that is no slower (:func:`_analyse`); False keeps every pair.

    Raises:
        CannError: unbalanced loops / block_ifs, loop_offset or loop_rotate outside a loop,
            overlapping loop_rotate regions of one buffer, or a SoC with no usable event id.
    """
    where = f"ascend-insert-sync: kernel '{kernel.kernel_name}'"
    nids = spec.event_ids - spec.reserved_event_ids
    if nids < 1:
        raise CannError(where, f"{spec.name} leaves no event id for flags (event_ids {spec.event_ids}, "
                               f"reserved {spec.reserved_event_ids})")
    block = kernel.body.block
    ops = list(block.ops)
    for op in ops:
        op.detach()
    kept = []
    for op in ops:
        if op.DEFN.mnemonic in _SYNC:
            op.erase()
        else:
            kept.append(op)
    items = parse(kept, where)
    ctx = _Ctx(spec, nids, free_barriers, where=where, any_count=loop_form(kernel))
    ctx.regions = check_regions(items, where)
    fill_accesses(items, spec, kernel.num_args.value.data)
    ctx.pipes = frozenset(it.pipe for it in walk_ins(items) if isinstance(it, Ins))
    out, _, _ = _emit(items, None, {}, ctx, where)
    if any(not isinstance(it, Ctrl) for it in items):
        out.append(_barrier())
    final: list = []
    work_seen = False
    for op in out:
        m = op.DEFN.mnemonic
        is_barrier = m == "pipe_barrier"
        if is_barrier and (not work_seen or (final and final[-1].DEFN.mnemonic == "pipe_barrier")):
            continue  # nothing before it to order, or a second barrier in a row
        if m == "loop_begin" or op.DEFN.group not in ("spmd", "sync"):
            work_seen = True
        final.append(op)
    block.add_ops(final)
    return sum(1 for op in final if op.DEFN.group == "sync")
