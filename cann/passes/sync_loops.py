"""Hardware loops as seen by the scope around them in ``ascend-insert-sync{mode=flags}``.

A loop is not a fence. In the scope that contains it, a loop region stands for what its pipes do
over all its iterations: a *begin* proxy per pipe q the loop uses, before the region, carrying the
hull of every access the loop's pipe-q instructions make in any iteration (a dependence of earlier
code on it puts its ``wait_flag ... q`` before the ``loop_begin``: every pipe-q instruction of the
loop comes after), and an *end* proxy per pipe after the region, with the same hull (a later
consumer's ``set_flag q ...`` goes after the ``loop_end``: it runs after the loop's pipe-q work).
The proxies of one loop do not depend on each other (inside, the loop body's own analysis orders
its pipes).

Event ids: the loop's pairs must not set an id of a pipe pair (p, q) while an earlier ``wait_flag``
of that id has not run yet. So a loop's scope keeps from it the ids of the scope's own pairs that
are set before it and waited after it, set after it before pipe p knows that q has left it, or
were waited before it without pipe p knowing (:func:`reserved_for`); and the ids
of one loop, used again by the next loop of the scope (or by the same loop in the next iteration
of the scope), are handed over by a handshake q -> p through a virtual buffer: each end proxy of
pipe q writes it, an *entry* proxy of pipe p before the next such loop reads it, so p sets those
ids again only once q has passed every wait of the earlier loop -- a pair only where p does not
already know that (vector clocks), and never at the end of the kernel.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from cann.dialects.ascend import make_op
from cann.passes.sync_deps import BIG, GM_KEY, Ins, Loop, Region, covers, loop_info

@dataclass
class Proxy(Ins):
    """A loop region's pipe in the scope around it (no instruction of its own: ``op`` is None)."""

    region: int = -1  # id of the loop region it stands for


def _walk(items: list, loops: list, where: str):
    """(instruction, loops enclosing it inside the region) for every instruction of ``items``."""
    for it in items:
        if isinstance(it, Region):
            inner = loops + [loop_info(it, where)] if it.is_loop else loops
            yield from _walk(it.body, inner, where)
        elif isinstance(it, Ins):
            yield it, loops


def hull(region: Region, regions: list, where: str) -> dict[int, list]:
    """``{pipe: [(buffer key, lo, hi, is_write), ...]}``: every byte each pipe of a loop region may
    access in any iteration (GM moved by the loops' ``loop_offset`` strides, on-chip accesses by
    their ``loop_step`` s over every owner's iterations and widened to every copy of a rotated
    buffer they touch)."""
    out: dict[int, dict] = {}
    for ins, loops in _walk([region], [], where):
        for (buf, lo, hi, w), mv in zip(ins.accs, ins.moves):
            if buf >= GM_KEY:
                if lo != -BIG:
                    for lp in loops:
                        n = (lp.count - 1) * lp.strides.get(buf - GM_KEY, 0)
                        lo, hi = lo + min(0, n), hi + max(0, n)
            else:
                for count, s in mv.values():
                    n = (count - 1) * s
                    lo, hi = lo + min(0, n), hi + max(0, n)
                for space, base, size, copies in regions:
                    if space == buf and lo < base + copies * size and base < hi:
                        lo, hi = min(lo, base), max(hi, base + copies * size)
            out.setdefault(ins.pipe, {})[(buf, lo, hi, w)] = None
    return {p: list(accs) for p, accs in sorted(out.items())}


def expand(items: list, loop: Loop | None, regions: list, where: str, pairs_of) -> list:
    """``items`` with every loop region between its entry and begin proxies and its end proxies
    (module docstring). ``pairs_of(region)``: the (p, q) pipe pairs the region's own body sets
    flags for (the handshakes)."""
    out: list = []
    vkeys: dict[tuple[int, int], int] = {}  # one virtual buffer per pipe pair, for the whole scope
    for it in items:
        if not (isinstance(it, Region) and it.is_loop):
            out.append(it)
            continue
        accs = hull(it, regions, where)
        rid = id(it)
        hs = sorted((p, q) for p, q in pairs_of(it) if p in accs and q in accs)
        for pq in hs:
            vkeys.setdefault(pq, -1 - len(vkeys))

        def proxy(pipe: int, a: list) -> Proxy:
            return Proxy(None, pipe, list(a), [], [{}] * len(a), rid)

        for p in sorted({p for p, _ in hs}):  # entry: p's sets of (p, q) ids wait for q's last loop
            out.append(proxy(p, [(vkeys[pq], 0, 1, False) for pq in hs if pq[0] == p]))
        out += [proxy(q, a) for q, a in accs.items()]
        out.append(it)
        for q, a in accs.items():
            out.append(proxy(q, a + [(vkeys[pq], 0, 1, True) for pq in hs if pq[1] == q]))
    return out


def virtual_raw_only(x: tuple, v: tuple) -> bool:
    """Whether producer view ``x`` and consumer view ``v`` of a handshake's virtual buffer (key < 0)
    are not its write and read (only that order is a dependence: end -> a later entry)."""
    return v[1] < 0 and not (x[4] and not v[4])


def same_loop(items: list, a: int, b: int) -> bool:
    """Are items ``a`` and ``b`` proxies of one loop region (no dependence between them)?"""
    x, y = items[a], items[b]
    return type(x) is Proxy and type(y) is Proxy and x.region == y.region


def span(items: list, region: Region) -> tuple[int, int]:
    """The first and last positions of ``region`` and its proxies in ``items``."""
    rid = id(region)
    pos = [i for i, it in enumerate(items) if it is region or (type(it) is Proxy and it.region == rid)]
    return pos[0], pos[-1]


def _knows(hist: list, p: int, gap: int, q: int, r: tuple) -> bool:
    """Does pipe p, at ``gap`` (before the waits and the item at that position), know pipe q's
    ``r`` = (iterations back, position)?"""
    ps, vs = hist[p]
    return covers(vs[bisect_right(ps, gap - 1) - 1][q], r)


def reserved_for(region: Region, items: list, pairs: list, hist: list, copies_of, in_loop: bool,
                 fenced: bool = False) -> dict:
    """Per (p, q) pipe pair, the event ids the scope's ``pairs`` keep from the loop ``region``
    (module docstring): set before it and waited after it; set after it (at or after its end
    proxies) while pipe p does not know that q has left it (the loop's last wait of the id may still
    be ahead), or, in a loop scope (``in_loop``), waited after it in an iteration pipe p does not
    know q finished when the loop starts again; or waited before it (at or before its begin
    proxies) without pipe p knowing (from the knowledge ``hist`` of the analysis). ``fenced``: the
    loop has a PIPE_ALL barrier before and after it: only the ids of pairs alive across it.
    ``copies_of(pair)``: how many ids from its base the pair holds."""
    g0, g1 = span(items, region)
    at = next(i for i in range(g0, g1 + 1) if items[i] is region)
    ends = {items[i].pipe: i for i in range(at + 1, g1 + 1)}  # the end proxy of each pipe
    out: dict[tuple[int, int], set[int]] = {}
    for pr in pairs:
        if pr.barrier or pr.base < 0:
            continue
        keep = pr.gs <= at < pr.b
        if fenced or keep:
            pass
        elif pr.gs > at:
            keep = pr.q in ends and not _knows(hist, pr.p, pr.gs, pr.q, (0, ends[pr.q])) or \
                in_loop and not _knows(hist, pr.p, g0, pr.q, (1, pr.b))
        else:
            keep = not _knows(hist, pr.p, at, pr.q, (0, pr.b))
        if keep:
            out.setdefault((pr.p, pr.q), set()).update(range(pr.base, pr.base + copies_of(pr)))
    return out


def _touches(op, p: int, q: int, ids: tuple) -> bool:
    """Does sync op ``op`` use an event id of ``ids`` for the pipe pair p -> q?"""
    m = op.DEFN.mnemonic
    if m not in ("set_flag", "wait_flag", "loop_rotate_event") or \
            (op.field("src_pipe"), op.field("dst_pipe")) != (p, q):
        return False
    if m == "loop_rotate_event":
        return op.field("base") < ids[-1] + 1 and ids[0] < op.field("base") + op.field("copies")
    return op.field("event") in ids


def place_hoisted(out: list, cands: list, in_loop: bool) -> tuple[list, list]:
    """Pre-sets and drains of nested loops' loop-carried id groups that rotate over exactly their
    distance (``copies == d``: every id is pre-set before the loop and every id drained after it,
    whatever the trip count). ``cands``: ``(start, end, (p, q, ids))``, the group's loop at
    ``out[start:end]``.

    In a loop scope (``in_loop``) a group whose ids (for its pipe pair) no other op of the scope
    uses is *hoisted*: nothing around its loop, the enclosing scope places it (returned), so the
    flags one entry of the loop leaves set serve the next entry as its pre-sets: iteration i < d
    of an entry waits id ``(i - d) % d``, set by one of the previous entry's last d iterations
    (an earlier producer on the same pipe: only more order), and the consumer's pipe is not
    stalled by a drain at every exit. Otherwise (or at the kernel's top level) the group's
    ``set_flag`` s go right before its loop and its ``wait_flag`` s right after.
    Returns (ops, hoisted groups)."""
    up, here = [], {}
    for start, end, (p, q, ids) in cands:
        if in_loop and not any(_touches(op, p, q, ids) for op in (*out[:start], *out[end:])):
            up.append((p, q, ids))
        else:
            here.setdefault((start, end), []).append((p, q, ids))
    for (start, end), groups in sorted(here.items(), reverse=True):  # later loops first: indices hold
        out[end:end] = [make_op("wait_flag", src_pipe=p, dst_pipe=q, event=e) for p, q, ids in groups for e in ids]
        out[start:start] = [make_op("set_flag", src_pipe=p, dst_pipe=q, event=e) for p, q, ids in groups for e in ids]
    return out, up
