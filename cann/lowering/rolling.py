"""Loop rolling: the tile-level code of consecutive iterations that differ only in where they
address global memory becomes one hardware loop.

A lowering emits the code of each iteration of a tile loop (an output row tile, a chunk of a plane,
a K tile, an M subtile) as it would unrolled. :func:`runs` compares consecutive iterations: two
iterations are the same code when their ops match one by one (name, operands, every property)
except the offsets into GM arguments and the *steppable* fields (offsets into on-chip operands,
img2col's ``m_start`` / ``k_start``; of ops not inside a loop nested in the iteration), when each GM
argument's offsets all move by one constant number of elements from one iteration to the next,
and each steppable field by its own constant. A maximal run of such iterations is emitted as
``tile.loop_begin {count}`` + one ``tile.loop_offset`` per moving argument + the first iteration's
code, a ``tile.loop_step`` before each op whose field moves, + ``tile.loop_end`` (the hardware loop
of ``cann/hw/isa.py``); first and last iterations that
differ (padding at a border, a partial tile, an ``init`` flag) stay as they are. With
:func:`clamped_runs` (``KernelBuilder.roll(clamp=True)``) the first and last iterations join the loop
when they differ only in fields a ``loop_clamp`` can give them (a pad, a window stopping at the
edge), and ops of loops nested in the iteration may move too (their steps name the outer loop with
``up``). A kernel's code size then depends on its tiling, not on its tensor sizes.

:func:`border_plan` (``KernelBuilder.tile_loops``, the loop form of tiling ``loops`` = 1) goes one
step further: a grid of tiles is one loop nest whatever its counts (a loop of one iteration too),
the fields of its border tiles modelled from *virtual* tiles (the middle tiles' pattern extended)
and clamped steps present at every count, so the code is the same for any map.
"""

from __future__ import annotations

import itertools

from xdsl.ir import Operation, SSAValue

from cann.dialects import tile
from cann.dialects.tile import Space, space_of


#: non-offset integer properties a ``tile.loop_step`` may advance, per op name
_POSITION_FIELDS = {"tile.img2col": ("m_start", "k_start"), "tile.img2col_c04": ("m_start", "k_start")}


def _offset_fields(op: Operation) -> tuple[tuple[tuple[str, SSAValue], ...], tuple[str, ...]]:
    """``(((property, GM argument), ...), (on-chip property, ...))``: the offsets into GM arguments
    of a tile instruction (``src_offset`` of a GM ``src``, ...), and its properties a
    ``tile.loop_step`` may advance (offsets into on-chip operands, img2col's ``m_start`` /
    ``k_start``); none for other ops."""
    if not isinstance(op, tile._TileInstr):
        return (), ()
    gm, chip = [], []
    for name in op.ARGS:
        prop = f"{name}_offset"
        if prop in op.INTS:
            v = op.operand(name)
            if space_of(v) == Space.GM:
                gm.append((prop, v))
            else:
                chip.append(prop)
    return tuple(gm), (*chip, *_POSITION_FIELDS.get(op.name, ()))


def _shape(op: Operation, skip: set[str]) -> tuple:
    """What must match for two iterations' ``op`` to be one code: its name, operands, attributes
    and its properties but those in ``skip`` (the ones a loop may move)."""
    props = tuple(sorted((n, v) for n, v in op.properties.items() if n not in skip))
    return op.name, tuple(op.operands), props, tuple(sorted(op.attributes.items()))


def _iteration_key(ops: list[Operation]) -> tuple[tuple, tuple, tuple]:
    """``(structure, ((GM argument, offset), ...), (((op index, property), value), ...))`` of one
    iteration: the ops without their GM offsets and, outside loops nested in the iteration, without
    their steppable on-chip fields (a ``tile.loop_step`` applies to the loop around it only)."""
    structure, gm_vals, chip_vals = [], [], []
    depth = 0
    for k, op in enumerate(ops):
        if isinstance(op, tile.LoopEndOp):
            depth -= 1
        gm, chip = _offset_fields(op)
        if depth:
            chip = ()
        structure.append(_shape(op, {p for p, _ in gm} | set(chip)))
        gm_vals += [(v, op.properties[p].value.data) for p, v in gm]
        chip_vals += [((k, p), op.properties[p].value.data) for p in chip]
        if isinstance(op, tile.LoopBeginOp):
            depth += 1
    return tuple(structure), tuple(gm_vals), tuple(chip_vals)


def _delta(a: tuple, b: tuple) -> dict[SSAValue, int] | None:
    """Per GM argument, how far iteration ``b``'s offsets are from ``a``'s (one value per argument),
    or None when an argument's offsets do not all move by the same amount."""
    out: dict[SSAValue, int] = {}
    for (va, oa), (vb, ob) in zip(a, b):
        if va is not vb:
            return None
        d = ob - oa
        if out.setdefault(va, d) != d:
            return None
    return out


def runs(iterations: list[list[Operation]]) -> list[tuple[int, int, dict[SSAValue, int], dict[tuple[int, str], int]]]:
    """``(first iteration, count, elements each GM argument moves per iteration, {(op index,
    property): step})`` for each maximal run of iterations that are one iteration's code moved
    through GM, and whose steppable on-chip fields (offsets into L1/L0/UB operands, img2col
    ``m_start``) each move by one constant per iteration, in order; a run of one is an iteration
    kept as it is. Steps of 0 are left out."""
    keys = [_iteration_key(ops) for ops in iterations]
    out = []
    i = 0
    while i < len(keys):
        j, step, chip = i + 1, None, None
        while j < len(keys) and keys[j][0] == keys[i][0]:
            d = _delta(keys[j - 1][1], keys[j][1])
            c = {f: b - a for (f, a), (_, b) in zip(keys[j - 1][2], keys[j][2])}
            if d is None or (step is not None and (d != step or c != chip)):
                break
            step, chip = d, c
            j += 1
        out.append((i, j - i, step or {}, {f: v for f, v in (chip or {}).items() if v}))
        i = j
    return out


#: properties only a clamped ``tile.loop_step`` may move (the window of a border tile), per op name
_WINDOW = ("fm_h", "fm_w", "pad_t", "pad_b", "pad_l", "pad_r", "fm_c1_stride")
_CLAMP_FIELDS = {"tile.copy": ("nburst", "burst", "src_stride", "dst_stride"),
                 "tile.copy_add": ("nburst", "burst", "src_stride", "dst_stride"), "tile.img2col": _WINDOW,
                 "tile.img2col_c04": _WINDOW}


def _clamped_key(ops: list[Operation]) -> tuple[tuple, tuple, tuple]:
    """``(structure, ((op index, property, GM argument, value), ...), ((op index, property, value),
    ...))`` of one iteration for :func:`clamped_runs`: the structure leaves out the GM offsets and
    the steppable and clampable properties (of ops in loops nested in the iteration too: their
    steps name the iteration's loop with ``up``)."""
    structure, gm_vals, vals = [], [], []
    for k, op in enumerate(ops):
        gm, chip = _offset_fields(op)
        free = (*chip, *_CLAMP_FIELDS.get(op.name, ()))
        structure.append(_shape(op, {p for p, _ in gm} | set(free)))
        gm_vals += [(k, p, v, op.properties[p].value.data) for p, v in gm]
        vals += [(k, p, op.properties[p].value.data) for p in free]
    return tuple(structure), tuple(gm_vals), tuple(vals)


def depths(ops: list[Operation]) -> list[int]:
    """Per op, how many loops nested in the iteration enclose it."""
    out, depth = [], 0
    for op in ops:
        if isinstance(op, tile.LoopEndOp):
            depth -= 1
        out.append(depth)
        if isinstance(op, tile.LoopBeginOp):
            depth += 1
    return out


def fit(seq: list[int], prefer: int | None = None) -> tuple[int, list[tuple[int, int, int, int]]] | None:
    """``(d, clamps)`` with ``seq[i] == seq[0] + i*d + sum(clamp(off + i*step, lo, hi))`` over
    ``clamps`` ``[(step, off, lo, hi), ...]``, for a sequence linear but for its first and last
    values (at most two clamps: one for each end); None when its middle is not linear. Of three
    values (a middle of one point) the line with fewer clamps is taken, ``prefer`` (a step) on a tie."""
    n = len(seq)
    if n <= 2:
        return (seq[-1] - seq[0] if n == 2 else 0), []
    options = [seq[2] - seq[1]] if n > 3 else list(dict.fromkeys([seq[2] - seq[1], seq[1] - seq[0], 0]))
    if any(seq[i + 1] - seq[i] != options[0] for i in range(1, n - 2)):
        return None
    best = None
    for d in options:
        e0 = seq[0] - (seq[1] - d)  # the first value's deviation from the line
        e1 = seq[-1] - (seq[-2] + d)  # the last one's
        clamps = []
        if e0:  # -e0 from iteration 1 on
            clamps.append((-e0, 0, min(0, -e0), max(0, -e0)))
        if e1:  # +e1 in the last iteration only
            clamps.append((e1, -e1 * (n - 2), min(0, e1), max(0, e1)))
        key = (len(clamps) + (d != 0 and prefer == 0), d != prefer)
        if best is None or key < best[0]:
            best = (key, d, clamps)
    return best[1], best[2]


def _fit_run(keys: list) -> tuple[dict, dict, dict] | None:
    """For iterations of one structure: (elements each GM argument moves per iteration, {(op index,
    property): linear step}, {(op index, property): [clamp, ...]}), or None when not one loop body."""
    gm_step: dict[SSAValue, int] = {}
    steps: dict[tuple[int, str], int] = {}
    clamps: dict[tuple[int, str], list] = {}
    for col in range(len(keys[0][1])):
        k, p, v, _ = keys[0][1][col]
        f = fit([key[1][col][3] for key in keys], gm_step.get(v))
        if f is None:
            return None
        if gm_step.setdefault(v, f[0]) != f[0]:
            return None
        if f[1]:
            clamps[(k, p)] = f[1]
    for col in range(len(keys[0][2])):
        k, p, _ = keys[0][2][col]
        only_clamp = p in _CLAMP_FIELDS.get(keys[0][0][k][0], ())
        f = fit([key[2][col][2] for key in keys], 0 if only_clamp else None)
        if f is None:
            return None
        d, cl = f
        if only_clamp and d:  # no linear step: a clamp over the whole run
            n = len(keys)
            cl = [(d, 0, min(0, d * (n - 1)), max(0, d * (n - 1))), *cl]
            d = 0
        if d:
            steps[(k, p)] = d
        if cl:
            clamps[(k, p)] = cl
    return gm_step, steps, clamps


def clamped_runs(iterations: list[list[Operation]]) -> list[tuple[int, int, dict, dict, dict]]:
    """As :func:`runs`, also folding iterations whose fields are linear but for the first and last
    iteration (the tiles at a border: a pad, a window stopping at the edge, a last tile moved back)
    into the loop, their deviations as clamped steps, and moving fields of ops in nested loops too
    (:func:`depths` gives their ``up``): ``(first, count, GM moves, {(op index,
    property): step}, {(op index, property): [(step, offset, lo, hi), ...]})``. Fields that only a
    clamp may move (:data:`_CLAMP_FIELDS`: a copy's bursts and strides, img2col's window ``fm_h`` /
    ``fm_w`` / ``pad_t`` / ``pad_b`` / ``pad_l`` / ``pad_r``) may differ too."""
    keys = [_clamped_key(ops) for ops in iterations]
    out = []
    i = 0
    while i < len(keys):
        j, best = i + 1, ({}, {}, {})
        while j < len(keys) and keys[j][0] == keys[i][0]:
            f = _fit_run(keys[i:j + 1])
            if f is None:
                break
            best = f
            j += 1
        gm, st, cl = best
        out.append((i, j - i, {v: d for v, d in gm.items() if d}, st, cl))
        i = j
    return out


def discard(ops: list[Operation]) -> None:
    """Drop ops that were built but are not emitted (their operand uses go with them)."""
    for op in ops:
        op.drop_all_references()



def _values(ops: list[Operation]) -> tuple[tuple, dict]:
    """``(structure, {(op index, property): value})`` of one tile's ops: the structure of
    :func:`_clamped_key` and every field a loop may move (GM offsets, steppable and clampable
    properties), keyed by op and property; GM offsets also name their argument."""
    structure, gm, vals = _clamped_key(ops)
    out = {(k, p): x for k, p, _, x in gm}
    out.update({(k, p): x for k, p, x in vals})
    return structure, out


def _gm_args(ops: list[Operation]) -> dict[tuple[int, str], SSAValue]:
    return {(k, p): v for k, op in enumerate(ops) for p, v in _offset_fields(op)[0]}


def border_plan(counts: tuple[int, ...], capture) -> tuple[list[Operation], list[dict], dict, dict]:
    """The hardware-loop nest of a grid of tiles whose code is one body, the tiles at the borders
    of each dimension differing only in fields a ``loop_clamp`` can give them.

    ``capture(idx, lo, hi)`` returns the ops of tile ``idx`` (one index per dimension) built with
    its geometry clipped at the low edge in the dimensions where ``lo`` is true and at the high
    edge (a last tile moved back, a window stopping at the map's edge) where ``hi`` is true: all
    true is the tile itself, all false its *virtual* tile (the middle tiles' pattern extended,
    ignoring the edges). Every capture must build the same ops but for the movable fields.

    Fields are modelled as ``virtual(0) + sum_d (idx_d * lin_d + [idx_d == 0] * D_d +
    [idx_d == n_d - 1] * E_d)`` (``D_d``, ``E_d``: the low and high border deviations of dimension
    ``d``), checked against the real tiles at every corner (and a middle tile) of the grid.
    Returns ``(ops, [{field: linear step} per dimension], {argument: [GM stride per dimension]},
    {field: [(dimension, step, offset, lo, hi), ...]})``: ``ops`` are tile 0's (the static code);
    the clamps are present whatever the counts (a count of 1 included), so the code does not
    depend on them.

    Raises:
        ValueError: the tiles are not one body (another structure, a field not linear but for
            its borders, an argument whose offsets move by different strides, a size field with
            a linear step).
    """
    dims = len(counts)
    none, every = (False,) * dims, (True,) * dims
    unit = lambda d, v=1: tuple(v if j == d else 0 for j in range(dims))
    only = lambda d: tuple(j == d for j in range(dims))
    base_ops = capture((0,) * dims, none, none)
    structure, g0 = _values(base_ops)
    args = _gm_args(base_ops)
    rolled = []

    def vals(ops):
        s, v = _values(ops)
        rolled.append(ops)
        if s != structure:
            raise ValueError("border_plan: the tiles are not one code (their ops differ)")
        return v

    lin, low, high = [], [], []
    for d, n in enumerate(counts):
        g1 = vals(capture(unit(d), none, none))
        lin.append({f: g1[f] - g0[f] for f in g0 if g1[f] != g0[f]})
        lo_ = vals(capture((0,) * dims, only(d), none))
        low.append({f: lo_[f] - g0[f] for f in g0 if lo_[f] != g0[f]})
        last = unit(d, n - 1)
        hi_ = vals(capture(last, none, only(d)))
        high.append({f: hi_[f] - g0[f] - (n - 1) * lin[d].get(f, 0) for f in g0
                     if hi_[f] != g0[f] + (n - 1) * lin[d].get(f, 0)})

    def model(idx):
        return {f: g0[f] + sum(idx[d] * lin[d].get(f, 0) + (idx[d] == 0) * low[d].get(f, 0)
                               + (idx[d] == counts[d] - 1) * high[d].get(f, 0) for d in range(dims)) for f in g0}

    picks = [sorted({0, n - 1, min(1, n - 1), n // 2}) for n in counts]
    for idx in itertools.product(*picks):
        real = vals(capture(idx, every, every))
        if real != model(idx):
            bad = sorted(f for f in g0 if real[f] != model(idx)[f])
            raise ValueError(f"border_plan: tile {idx} is not linear but for its borders in {bad}")
    ops = capture((0,) * dims, every, tuple(n == 1 for n in counts))
    for o in rolled:
        discard(o)
    discard(base_ops)
    gm_steps: dict[SSAValue, list[int]] = {}
    for f, v in args.items():
        steps = [lin[d].get(f, 0) for d in range(dims)]
        if gm_steps.setdefault(v, steps) != steps:
            raise ValueError("border_plan: a GM argument's offsets move by different strides")
    clamp_only = {(k, p) for k, s in enumerate(structure) for p in _CLAMP_FIELDS.get(s[0], ())}
    clamps: dict[tuple[int, str], list] = {}
    chip: list[dict] = []
    for d, n in enumerate(counts):
        chip.append({f: s for f, s in lin[d].items() if f not in args})
        if any(f in clamp_only for f in chip[d]):
            raise ValueError("border_plan: a size field moves linearly (only a clamp may move it)")
        for f, dv in low[d].items():  # -dv from iteration 1 on
            clamps.setdefault(f, []).append((d, -dv, 0, min(0, -dv), max(0, -dv)))
        for f, e in high[d].items():  # +e in the last iteration only (tile 0's code has it when n == 1)
            clamps.setdefault(f, []).append((d, e, -e * (n - 2) if n > 1 else -e, min(0, e), max(0, e)))
    return ops, chip, gm_steps, clamps
