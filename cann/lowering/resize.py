"""Resize (``graph.resize``) of the H and W axes of an NC1HWC0 tensor on the AI Core.

The source index and weight maps are computed at compile time (static shapes) with the ONNX
specification's arithmetic (``onnx/reference/ops/op_resize.py``: ratio 1 at exact integers,
neighbours clamped to the axis, i.e. edge padding), the source coordinates in exact rational
arithmetic so that a coordinate that is an integer is one (float64 can land beside it):

* **nearest** is pure data movement. Per plane (one ``[H][W][16]`` C0 block of an image) and per
  run of output rows that share a source row, the output row is gathered into UB by a few burst
  copies, each one an arithmetic progression of output columns reading an arithmetic progression
  of source columns (one 16-channel block per burst; a 2x upsample is 2 copies, a source stride of 0
  repeats a column), then written to all the output rows of the run with one copy whose source
  stride is 0.
* **linear** is separable: a W pass gathers, for each source row needed, the left and right
  neighbour columns (two gathers as above) and combines them with per-position weight tables
  (constants, ``vmul`` + ``vadd``); an H pass combines two W-passed rows with scalar weights
  (``vmuls`` + ``vadd``). W-passed rows are cached in UB while consecutive output rows reuse them.

Planes are spread over the cores (SPMD, ``block_dim`` up to the core count).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from cann.dialects.tile import Space
from cann.lowering.common import NC1HWC0, DevTensor, Lowering


def exact_scale(scale: float) -> Fraction:
    """The rational a scale factor stands for: the simplest ``p / q`` (``q <= 2**20``) that rounds to
    the float (a ratio of sizes, ``out / in``, computed in float64), otherwise the float's exact
    binary value (a float32 ``scales`` input: 2.5 and 0.75 are exact)."""
    f = Fraction(scale).limit_denominator(1 << 20)
    return f if float(f) == scale else Fraction(scale)


def source_coords(ctm: str, in_size: int, out_size: int, scale: float,
                  roi: tuple[float, float] | None = None) -> list[Fraction]:
    """Source coordinate of every output position along one axis, in exact rational arithmetic
    (the spec's formulas, ``onnx/reference/ops/op_resize.py``): a coordinate that is an integer stays
    one, where float32 or float64 can land on either side (half_pixel_symmetric, input 9, scale 2.5:
    output 18 is at exactly 7). ``roi`` = (start, end) for tf_crop_and_resize.

    Raises ValueError for an unknown mode."""
    s = exact_scale(scale)
    out_w = s * in_size
    ys = [Fraction(y) for y in range(out_size)]
    half = Fraction(1, 2)
    if ctm == "align_corners":
        return [Fraction(0)] * out_size if out_w == 1 else [y * (in_size - 1) / (out_w - 1) for y in ys]
    if ctm == "asymmetric":
        return [y / s for y in ys]
    if ctm == "pytorch_half_pixel":
        return [-half] * out_size if out_w == 1 else [(y + half) / s - half for y in ys]
    if ctm == "half_pixel":
        return [(y + half) / s - half for y in ys]
    if ctm == "half_pixel_symmetric":
        offset = Fraction(in_size, 2) * (1 - out_size / out_w)
        return [offset + (y + half) / s - half for y in ys]
    if ctm == "tf_crop_and_resize":
        r0, r1 = Fraction(roi[0]), Fraction(roi[1])
        if out_w == 1:
            return [(r1 - r0) * (in_size - 1) / 2 + r0 * (in_size - 1)] * out_size
        return [y * (r1 - r0) * (in_size - 1) / (out_w - 1) + r0 * (in_size - 1) for y in ys]
    raise ValueError(f"coordinate_transformation_mode {ctm!r}")


def nearest_upper(ratio: Fraction, nearest_mode: str) -> bool:
    """Whether nearest mode reads the upper neighbour at a non-integer coordinate whose fractional
    part is ``ratio`` (exact: a tie is exactly 1/2)."""
    half = Fraction(1, 2)
    return {"round_prefer_floor": ratio > half, "round_prefer_ceil": ratio >= half, "floor": False,
            "ceil": True}[nearest_mode]


def axis_map(mode: str, ctm: str, nearest_mode: str, in_size: int, out_size: int, scale: float):
    """(i0, i1, w1): output position o reads ``(1 - w1[o]) * x[i0[o]] + w1[o] * x[i1[o]]``
    (nearest: w1 is 0, i0 the chosen source). Indices are clamped to ``[0, in_size)``; an exact
    integer coordinate reads that source alone."""
    if math.isclose(scale, 1.0) and out_size == in_size:  # the reference skips such an axis
        idx = np.arange(in_size)
        return idx, idx, np.zeros(in_size)
    i0 = np.zeros(out_size, np.int64)
    i1 = np.zeros(out_size, np.int64)
    w1 = np.zeros(out_size)
    for o, x in enumerate(source_coords(ctm, in_size, out_size, scale)):
        fl = math.floor(x)
        if x == fl:  # ratio 1 on the left pair (the reference's rule): source fl exactly
            lo, hi, ratio = fl - 1, fl, Fraction(1)
        else:
            lo, hi, ratio = fl, fl + 1, x - fl
        a, b = min(max(lo, 0), in_size - 1), min(max(hi, 0), in_size - 1)
        if mode == "nearest":
            i0[o] = i1[o] = b if x == fl or nearest_upper(ratio, nearest_mode) else a
        else:
            i0[o], i1[o] = a, b
            w1[o] = 0.0 if a == b else float(ratio)
    return i0, i1, w1


def progressions(idx: np.ndarray) -> list[tuple[int, int, int, int, int]]:
    """Cover output positions 0..n-1 by arithmetic progressions (o0, do, count, s0, ds) such that
    position ``o0 + k*do`` reads source ``s0 + k*ds`` (ds >= 0): few DMA copies per row."""
    idx = [int(v) for v in idx]
    n = len(idx)
    best = None
    for p in range(1, min(n, 64) + 1):  # a period p: idx[o + p] - idx[o] constant
        diffs = {idx[o + p] - idx[o] for o in range(n - p)}
        if len(diffs) <= 1:
            d = diffs.pop() if diffs else 0
            if d >= 0:
                best = [(j, p, len(range(j, n, p)), idx[j], d) for j in range(min(p, n))]
                break
    runs = []  # fallback: maximal runs of consecutive positions with a constant step
    o = 0
    while o < n:
        if o + 1 < n and idx[o + 1] >= idx[o]:
            d = idx[o + 1] - idx[o]
            e = o + 1
            while e + 1 < n and idx[e + 1] - idx[e] == d:
                e += 1
            runs.append((o, 1, e - o + 1, idx[o], d))
            o = e + 1
        else:
            runs.append((o, 1, 1, idx[o], 0))
            o += 1
    return best if best is not None and len(best) <= len(runs) else runs


def _gather_row(kb, src, dst, src_row_off: int, progs) -> None:
    """UB ``dst`` [Wo][16] <- columns of the GM source row starting at ``src_row_off``."""
    for o0, do, cnt, s0, ds in progs:
        if cnt > 1 and do == 1 and ds == 1:
            kb.copy(src, dst, src_offset=src_row_off + s0 * 16, dst_offset=o0 * 16, burst=cnt * 16)
        else:
            kb.copy(src, dst, src_offset=src_row_off + s0 * 16, dst_offset=o0 * 16, nburst=cnt, burst=16,
                    src_stride=ds * 16, dst_stride=do * 16)


def resize(lw: Lowering, x: DevTensor, mode: str, ctm: str, nearest_mode: str, scales, out_shape, loc) -> DevTensor:
    """Resize of the H and W axes (see the module docstring). Output rows are built in UB in
    segments of ``cols`` output columns (the whole row when its buffers fit in UB), so any width
    fits: each segment gathers its own source columns and, for linear, reads its slice of the
    weight tables."""
    x = lw.as_format(x, NC1HWC0, lw.dtype, loc)
    n_, c_, h_, w_ = x.shape
    _, _, ho_, wo_ = out_shape
    hi0, hi1, hw1 = axis_map(mode, ctm, nearest_mode, h_, ho_, scales[0])
    wi0, wi1, ww1 = axis_map(mode, ctm, nearest_mode, w_, wo_, scales[1])
    dt, isz = lw.dtype, lw.dtype.itemsize
    row = wo_ * 16
    linear = mode == "linear" and (hw1.any() or ww1.any())
    nbuf = 9 if linear else 2
    seg_bytes = lambda c: nbuf * (-(-c * 16 * isz // 256) * 256)
    cols = wo_ if seg_bytes(wo_) <= lw.usable("ub") else max(1, lw.usable("ub") // nbuf // 256 * 256 // (16 * isz))
    c1 = x.c1
    planes = n_ * c1
    y = lw.gm_tensor(tuple(out_shape), NC1HWC0)
    kb = lw.kernel("resize", loc, {"cols": cols})
    cols = kb.tiling["cols"]
    kb.tiling["planes"] = planes
    xa, ya = kb.arg(x), kb.arg(y)
    kb.partition(planes)
    kb.block_offset(xa, h_ * w_ * 16)
    kb.block_offset(ya, ho_ * row)
    segs = [(o0, min(cols, wo_ - o0)) for o0 in range(0, wo_, cols)]  # (first output column, count)
    p0 = [progressions(wi0[o0:o0 + sc]) for o0, sc in segs]
    # runs of output rows with the same source rows and weight
    groups: list[tuple[int, int]] = []  # (first output row, count)
    for ho in range(ho_):
        if groups and hi0[ho] == hi0[ho - 1] and hi1[ho] == hi1[ho - 1] and hw1[ho] == hw1[ho - 1]:
            groups[-1] = (groups[-1][0], groups[-1][1] + 1)
        else:
            groups.append((ho, 1))
    seg_row = cols * 16  # elements of a segment buffer

    if not linear:
        bufs = [kb.alloc(Space.UB, seg_row, dt) for _ in range(2)]

        def body(first: int, last: bool = False) -> None:
            k = 0
            for (o0, sc), prog in zip(segs, p0):
                for ho, rep in groups:
                    ub = bufs[k % 2]
                    k += 1
                    _gather_row(kb, xa, ub, (first * h_ + int(hi0[ho])) * w_ * 16, prog)
                    kb.copy(ub, ya, dst_offset=(first * ho_ + ho) * row + o0 * 16, nburst=rep, burst=sc * 16,
                            src_stride=0, dst_stride=row)

        kb.for_tiles(planes, body)
        lw.launch(kb)
        return y

    p1 = [progressions(wi1[o0:o0 + sc]) for o0, sc in segs]
    w_lin = bool(ww1.any())
    t0 = np.repeat((1.0 - ww1).astype(np.float32), 16).astype(dt)
    t1 = np.repeat(ww1.astype(np.float32), 16).astype(dt)
    ta, tb = kb.arg(lw.constant(t0, "ND")), kb.arg(lw.constant(t1, "ND"))
    tab0, tab1 = kb.alloc(Space.UB, seg_row, dt), kb.alloc(Space.UB, seg_row, dt)
    ga, gb = kb.alloc(Space.UB, seg_row, dt), kb.alloc(Space.UB, seg_row, dt)
    slots = [kb.alloc(Space.UB, seg_row, dt) for _ in range(3)]
    outs = [kb.alloc(Space.UB, seg_row, dt) for _ in range(2)]

    def load_tables(o0: int, sc: int) -> None:
        kb.copy(ta, tab0, src_offset=o0 * 16, burst=sc * 16)
        kb.copy(tb, tab1, src_offset=o0 * 16, burst=sc * 16)

    if w_lin and len(segs) == 1:
        load_tables(0, wo_)

    def segment(first: int, o0: int, sc: int, q0, q1) -> None:
        n = sc * 16
        cache: dict[int, int] = {}  # source row -> slot
        order: list[int] = []
        if w_lin and len(segs) > 1:
            load_tables(o0, sc)

        def w_pass(hs: int, keep: set[int]):
            if hs in cache:
                return slots[cache[hs]]
            free = [s for s in range(3) if s not in cache.values()]
            if not free:
                victim = next(r for r in order if r not in keep)
                order.remove(victim)
                free = [cache.pop(victim)]
            s = free[0]
            cache[hs] = s
            order.append(hs)
            base = (first * h_ + hs) * w_ * 16
            if not w_lin:
                _gather_row(kb, xa, slots[s], base, q0)
                return slots[s]
            _gather_row(kb, xa, ga, base, q0)
            _gather_row(kb, xa, gb, base, q1)
            kb.vec("mul", slots[s], ga, tab0, count=n)
            kb.vec("mul", gb, gb, tab1, count=n)
            kb.vec("add", slots[s], slots[s], gb, count=n)
            return slots[s]

        for k, (ho, rep) in enumerate(groups):
            a_, b_, wb = int(hi0[ho]), int(hi1[ho]), float(hw1[ho])
            r0 = w_pass(a_, {a_, b_})
            dst_off = (first * ho_ + ho) * row + o0 * 16
            if wb == 0.0 or a_ == b_:
                kb.copy(r0, ya, dst_offset=dst_off, nburst=rep, burst=n, src_stride=0, dst_stride=row)
                continue
            r1 = w_pass(b_, {a_, b_})
            o = outs[k % 2]
            kb.vec("muls", o, r0, count=n, scalar=1.0 - wb)
            kb.vec("muls", ga, r1, count=n, scalar=wb)
            kb.vec("add", o, o, ga, count=n)
            kb.copy(o, ya, dst_offset=dst_off, nburst=rep, burst=n, src_stride=0, dst_stride=row)

    def body(first: int, last: bool = False) -> None:
        for (o0, sc), q0, q1 in zip(segs, p0, p1):
            segment(first, o0, sc, q0, q1)

    kb.for_tiles(planes, body)
    lw.launch(kb)
    return y
