"""Row bands of the depthwise kernel (:mod:`cann.lowering.depthwise`) and the pipeline estimate that
chooses them.

Each group of cores computes a contiguous share of the output rows (:func:`group_rows`), in bands
(:func:`split`): an optional short *first* band (the vector unit starts after a short load), bands
of ``rows`` rows (one code, a hardware loop), the remainder, and an optional short *last* band (the
store nobody overlaps is short). :func:`makespan` replays what the simulator's schedule does with
such a band list on one core -- MTE2 loads, V work and MTE3 stores on their own pipes, the input
and the accumulator in two copies each (``tile-multi-buffer``), the per-plane table load waiting
for the previous plane's last tap -- from per-band cycle costs the kernel computes from the SoC's
figures. No hardware number lives here.
"""

from __future__ import annotations

from typing import Callable

Bands = list[tuple[int, int]]


def group_rows(ho: int, groups: int) -> Bands:
    """``groups`` contiguous shares ``(r0, r1)`` of ``ho`` rows, the first ``ho % groups`` one row
    longer (every share non-empty: ``groups <= ho``)."""
    base, extra = divmod(ho, groups)
    out, r0 = [], 0
    for g in range(groups):
        r1 = r0 + base + (g < extra)
        out.append((r0, r1))
        r0 = r1
    return out


def split(r0: int, r1: int, rows: int, first: int = 0, last: int = 0) -> Bands:
    """Bands of rows ``r0..r1``: ``first`` rows (0: none), bands of ``rows``, the remainder, then
    ``last`` rows (0: none); a short band is dropped where the share has no room beyond it."""
    n = r1 - r0
    sizes = []
    if first and n > first:
        sizes.append(first)
        n -= first
    tail = last if last and n > last else 0
    n -= tail
    sizes += [rows] * (n // rows) + ([n % rows] if n % rows else [])
    if tail:
        sizes.append(tail)
    out, r = [], r0
    for s in sizes:
        out.append((r, r + s))
        r += s
    return out


def makespan(bands: Bands, planes: int, load: Callable[[int, int], int], vec: Callable[[int, int], int],
             store: Callable[[int, int], int], table: int) -> int:
    """Cycles of one core running ``bands`` on each of its ``planes`` planes: per plane the table
    load (MTE2; its single buffer waits for the previous plane's last vector op), then per band
    ``load(r0, r1)`` on MTE2, ``vec(r0, r1)`` on V and ``store(r0, r1)`` on MTE3, with two copies
    of the input (a load waits for the vector work two bands back) and of the accumulator (the
    vector work waits for the store two bands back; one band back across a loop boundary)."""
    # runs of bands of one height are one code in a hardware loop; the synchronization fences a
    # loop's entry and exit: the first band past the boundary waits for the previous band's
    # vector work (its load) and store (its vector work), not for those two bands back
    sizes = [r1 - r0 for r0, r1 in bands]
    run = [i > 0 and sizes[i] == sizes[i - 1] or i + 1 < len(sizes) and sizes[i] == sizes[i + 1]
           for i in range(len(sizes))]
    fence = [i > 0 and (run[i] or run[i - 1]) and not (run[i] and run[i - 1] and sizes[i] == sizes[i - 1])
             for i in range(len(sizes))]
    mte2 = v = 0
    v_hist = [0, 0]  # vector ends of the last two bands
    s_hist = [0, 0]  # store ends of the last two bands
    for _ in range(planes):
        mte2 = max(mte2, v) + table
        t_end = mte2
        for i, (r0, r1) in enumerate(bands):
            back = -1 if fence[i] else -2
            mte2 = max(mte2, v_hist[back]) + load(r0, r1)
            v = max(mte2, v, s_hist[back], t_end) + vec(r0, r1)
            s = max(v, s_hist[-1]) + store(r0, r1)
            v_hist = [v_hist[-1], v]
            s_hist = [s_hist[-1], s]
    return s_hist[-1]


def choose(ho: int, groups: int, fit: int, cost: Callable[[Bands], int],
           pins: dict[str, int]) -> tuple[int, int, int]:
    """``(rows, first, last)`` minimising ``cost`` of the slowest group's band list (ties: the
    lowest band height, i.e. the smallest buffers, then no short bands); pinned fields are kept (a pinned ``rows`` without pinned
    ``first`` / ``last`` means uniform bands). ``fit``: the tallest band UB holds."""
    shares = group_rows(ho, groups)
    # the border shares (padding) and one inner share of each length stand for all
    inner = {r1 - r0: (r0, r1) for r0, r1 in shares[1:-1]}
    shares = sorted({shares[0], shares[-1], *inner.values()})
    tallest = max(r1 - r0 for r0, r1 in shares)
    if "rows" in pins:
        row_opts = [max(1, min(pins["rows"], fit, ho))]
    else:
        row_opts = list(range(1, min(fit, tallest) + 1))
    best = None
    for rows in row_opts:
        short = range(0, min(rows, 3)) if "rows" not in pins else [0]
        for first in ([pins["first_rows"]] if "first_rows" in pins else short):
            for last in ([pins["last_rows"]] if "last_rows" in pins else short):
                if first >= rows and "first_rows" not in pins or last >= rows and "last_rows" not in pins:
                    continue
                c = max(cost(split(r0, r1, rows, first, last)) for r0, r1 in shares)
                key = (c, rows, first + last)
                if best is None or key < best[0]:
                    best = (key, (rows, first, last))
    return best[1]
