"""Loop rolling: the tile-level code of consecutive iterations that differ only in where they
address global memory becomes one hardware loop.

A lowering emits the code of each iteration of a tile loop (an output row tile, a chunk of a plane,
a K tile) as it would unrolled. :func:`runs` compares consecutive iterations: two iterations are the
same code when their ops match one by one (name, operands, every property) except the offsets
into GM arguments, and when each GM argument's offsets all move by one constant number of elements
from one iteration to the next. A maximal run of such iterations is emitted as
``tile.loop_begin {count}`` + one ``tile.loop_offset`` per moving argument + the first iteration's
code + ``tile.loop_end`` (the hardware loop of ``cann/hw/isa.py``); first and last iterations that
differ (padding at a border, a partial tile, an ``init`` flag) stay as they are. A kernel's code size
then depends on its tiling, not on its tensor sizes.
"""

from __future__ import annotations

from xdsl.ir import Operation, SSAValue

from cann.dialects import tile
from cann.dialects.tile import Space, space_of


def _gm_offset_fields(op: Operation) -> tuple[tuple[str, SSAValue], ...]:
    """``(property name, GM argument)`` of each GM offset of a tile instruction (``src_offset`` of a
    GM ``src``, ...); none for other ops."""
    if not isinstance(op, tile._TileInstr):
        return ()
    out = []
    for name in op.ARGS:
        prop = f"{name}_offset"
        if prop in op.INTS:
            v = op.operand(name)
            if space_of(v) == Space.GM:
                out.append((prop, v))
    return tuple(out)


def _key(op: Operation) -> tuple[tuple, tuple[tuple[SSAValue, int], ...]]:
    """(the op's structure without its GM offsets, ((GM argument, offset in elements), ...))."""
    gm = _gm_offset_fields(op)
    skip = {p for p, _ in gm}
    props = tuple(sorted((k, v) for k, v in op.properties.items() if k not in skip))
    attrs = tuple(sorted(op.attributes.items()))
    structure = (op.name, tuple(op.operands), props, attrs)
    return structure, tuple((v, op.properties[p].value.data) for p, v in gm)


def _iteration_key(ops: list[Operation]) -> tuple[tuple, tuple[tuple[SSAValue, int], ...]]:
    keys = [_key(op) for op in ops]
    return tuple(k[0] for k in keys), tuple(x for k in keys for x in k[1])


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


def runs(iterations: list[list[Operation]]) -> list[tuple[int, int, dict[SSAValue, int]]]:
    """``(first iteration, count, elements each GM argument moves per iteration)`` for each maximal
    run of iterations that are one iteration's code moved through GM, in order; a run of one is an
    iteration kept as it is."""
    keys = [_iteration_key(ops) for ops in iterations]
    out: list[tuple[int, int, dict[SSAValue, int]]] = []
    i = 0
    while i < len(keys):
        j, step = i + 1, None
        while j < len(keys) and keys[j][0] == keys[i][0]:
            d = _delta(keys[j - 1][1], keys[j][1])
            if d is None or (step is not None and d != step):
                break
            step = d
            j += 1
        out.append((i, j - i, step or {}))
        i = j
    return out


def discard(ops: list[Operation]) -> None:
    """Drop ops that were built but are not emitted (their operand uses go with them)."""
    for op in ops:
        op.drop_all_references()

