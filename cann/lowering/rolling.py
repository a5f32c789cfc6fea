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
differ (padding at a border, a partial tile, an ``init`` flag) stay as they are. A kernel's code size
then depends on its tiling, not on its tensor sizes.
"""

from __future__ import annotations

from xdsl.ir import Operation, SSAValue

from cann.dialects import tile
from cann.dialects.tile import Space, space_of


#: non-offset integer properties a ``tile.loop_step`` may advance, per op name
_POSITION_FIELDS = {"tile.img2col": ("m_start", "k_start")}


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
        skip = {p for p, _ in gm} | set(chip)
        props = tuple(sorted((n, v) for n, v in op.properties.items() if n not in skip))
        structure.append((op.name, tuple(op.operands), props, tuple(sorted(op.attributes.items()))))
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


def discard(ops: list[Operation]) -> None:
    """Drop ops that were built but are not emitted (their operand uses go with them)."""
    for op in ops:
        op.drop_all_references()

