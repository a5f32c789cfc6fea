"""``tile-multi-buffer``: a buffer count for every on-chip buffer a tile kernel refills.

Per ``tile.kernel``: the kernel is lowered with one copy of every buffer (the code
``convert-tile-to-ascend`` emits) and each ``tile.alloc`` is analysed for its *generations*
(:mod:`cann.lowering.generations`). A buffer is a candidate when it runs at least two generations
and renaming them is legal (every read reads bytes written in its own generation). Candidates get
``n`` copies, recorded as the alloc's ``buffers`` property (in a kernel of tiling ``loops`` = 1,
the loop form, a loop of one iteration counts as two: its buffers do not depend on the map size),
as long as the SoC's capacities (L1, L0A, L0B, L0C, UB usable bytes, with
:func:`cann.lowering.convert_tile_to_ascend.layout`'s alignment) hold them; while a space overflows, its largest multi-copied candidate (the later one
of equal sizes) loses a copy. Buffers that are not candidates keep one copy (the property is
removed).

Segmented first load (``first_segment_bytes``): a kernel's first *load group* -- a run of dense
GM -> UB copies (one burst each, disjoint destinations, ``L`` elements each), the run of ``tile.vec``
ops right after it computing over those ``L`` elements (dense operands, or broadcast sources of
stride 0) and the run of dense UB -> GM copies of ``L`` elements right after them -- is cut into
segments of ``S`` elements: the loads segment by segment (every input's segment 0, then segment 1,
...), each vector op split into the same ranges (op by op, as before), the stores segment by
segment. Each piece is the original op on a sub-range, so the result is unchanged; with flag
synchronization the vector unit starts when segment 0 has landed while the rest keeps loading.
``S`` is ``first_segment_bytes`` over the loads' element size, rounded down to a multiple of 256
elements (at least 256). 0 (the default rule): segments of a quarter of the load (rounded up to
256 elements) when the group is outside hardware loops (a once-per-kernel load: a loop body's
every iteration would pay the extra DMA startups) and at least 32 KiB; else none.

Options: ``buffers`` (0: the rule, 2 copies; 1: no multi-buffering; 2 or 3: that many where legal
and fitting), ``first_segment_bytes`` (0: the rule above; N > 0: segments of N bytes for the
first load group of more than N bytes, wherever it is; -1: no segmentation). A kernel's ``tile.tiling`` entry ``buffers`` (pinned through
``convert-graph-to-tile{tiling=...}``, e.g. ``{"add_0": {"buffers": 1}}``) overrides the option
for that kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, StringAttr, i64
from xdsl.passes import ModulePass

from cann.dialects import tile
from cann.dialects.tile import Space, loop_form, space_of
from cann.errors import CannError
from cann.hw import isa
from cann.hw.config import SocSpec, load_soc
from cann.lowering.common import np_dtype
from cann.lowering.convert_tile_to_ascend import layout, single_buffered_code
from cann.lowering.generations import accesses, analyse

#: the copies the rule gives each candidate
DEFAULT_BUFFERS = 2
MAX_BUFFERS = 3
#: segmented first load: segment granularity (elements), the default rule's minimum load and parts
SEGMENT_QUANTUM = 256
DEFAULT_SEGMENT_MIN_BYTES = 32 << 10
DEFAULT_SEGMENTS = 4


def _dense_copy(op, src_space: Space, dst_space: Space) -> bool:
    return (isinstance(op, tile.CopyOp) and space_of(op.operand("src")) == src_space
            and space_of(op.operand("dst")) == dst_space and op.field("nburst") == 1)


def _load_groups(fn: func.FuncOp):
    """The load groups of kernel ``fn`` in program order (see the module docstring): ``(loads, vecs,
    stores, elements, inside a loop)``; ``vecs`` empty when the run of loads is not followed by
    vector ops it can be cut with."""
    ops = list(fn.body.block.ops)
    depth, i = 0, 0
    while i < len(ops):
        op = ops[i]
        depth += isinstance(op, tile.LoopBeginOp) - isinstance(op, tile.LoopEndOp)
        if not _dense_copy(op, Space.GM, Space.UB):
            i += 1
            continue
        j = i
        while j < len(ops) and _dense_copy(ops[j], Space.GM, Space.UB):
            j += 1
        k = j
        while k < len(ops) and isinstance(ops[k], tile.VecOp):
            k += 1
        e = k
        while e < len(ops) and _dense_copy(ops[e], Space.UB, Space.GM):
            e += 1
        loads, vecs, stores = ops[i:j], ops[j:k], ops[k:e]
        n = loads[0].field("burst")
        ok = vecs and all(x.field("burst") == n for x in loads + stores) and _segmentable(loads, vecs, stores, n)
        yield loads, vecs if ok else [], stores, n, depth > 0
        i = max(j, 1 + i)


def _ranges_disjoint(ranges: list[tuple[object, int, int]]) -> bool:
    for a, (b1, lo1, hi1) in enumerate(ranges):
        for b2, lo2, hi2 in ranges[a + 1:]:
            if b1 is b2 and lo1 < hi2 and lo2 < hi1:
                return False
    return True


def _segmentable(loads, vecs, stores, n: int) -> bool:
    """Splitting the group into element ranges and reordering loads / stores by segment keeps
    its result: every vec is elementwise over the n elements (dense operands, broadcast sources),
    an operand in dst's buffer at dst's offset, loads and stores at disjoint places."""
    if not _ranges_disjoint([(x.operand("dst"), x.field("dst_offset"), x.field("dst_offset") + n) for x in loads]):
        return False
    if not _ranges_disjoint([(x.operand("dst"), x.field("dst_offset"), x.field("dst_offset") + n) for x in stores]):
        return False
    for v in vecs:
        unit = v.field("unit")
        if v.field("op") == "cadd":  # a row sum: not elementwise
            return False
        if v.field("count") * unit != n or SEGMENT_QUANTUM % unit or v.field("dst_stride") != unit:
            return False
        dst, doff = v.operand("dst"), v.field("dst_offset")
        for name in ("src0", "src1"):
            stride, off, buf = v.field(name + "_stride"), v.field(name + "_offset"), v.operand(name)
            if stride not in (unit, 0) or (buf is dst and (stride == 0 or off != doff)):
                return False
    return True


def segment_first_load(fn: func.FuncOp, segment_bytes: int) -> int:
    """Cut kernel ``fn``'s first load group into segments (see the module docstring); returns the
    number of segments (1: left as it is)."""
    for loads, vecs, stores, n, in_loop in _load_groups(fn):
        isz = np_dtype(loads[0].operand("dst").type.element_type).itemsize
        if segment_bytes:
            seg = max(SEGMENT_QUANTUM, segment_bytes // isz // SEGMENT_QUANTUM * SEGMENT_QUANTUM)
        elif n * isz < DEFAULT_SEGMENT_MIN_BYTES:
            continue
        elif in_loop:
            return 1
        else:
            seg = -(-n // DEFAULT_SEGMENTS // SEGMENT_QUANTUM) * SEGMENT_QUANTUM
        if seg >= n:
            continue  # a load of at most one segment (a table, a scalar) is not the first load
        if not vecs:
            return 1
        break
    else:
        return 1
    pieces = [(lo, min(n, lo + seg)) for lo in range(0, n, seg)]
    block = fn.body.block

    def copy_piece(x, lo: int, hi: int):
        f = {k: x.field(k) for k in x.INTS}
        f.update(src_offset=f["src_offset"] + lo, dst_offset=f["dst_offset"] + lo, burst=hi - lo,
                 src_stride=hi - lo, dst_stride=hi - lo)
        return tile.CopyOp(x.operand("src"), x.operand("dst"), **f)

    def vec_piece(v, lo: int, hi: int):
        f = {k: v.field(k) for k in (*v.INTS, *v.FLOATS, *v.STRS)}
        unit = f["unit"]
        f["count"] = (hi - lo) // unit
        for name in ("dst", "src0", "src1"):
            if f[name + "_stride"]:
                f[name + "_offset"] += lo
        return tile.VecOp(v.operand("dst"), v.operand("src0"), v.operand("src1"), **f)

    new = [copy_piece(x, lo, hi) for lo, hi in pieces for x in loads]
    new += [vec_piece(v, lo, hi) for v in vecs for lo, hi in pieces]
    new += [copy_piece(x, lo, hi) for lo, hi in pieces for x in stores]
    anchor = stores[-1] if stores else vecs[-1]
    block.insert_ops_after(new, anchor)
    for old in (*loads, *vecs, *stores):
        block.erase_op(old)
    return len(pieces)


def kernel_buffers(fn: func.FuncOp, soc: SocSpec, buffers: int) -> list[int]:
    """The buffer count of each ``tile.alloc`` of tile kernel ``fn`` (in order) with ``buffers``
    copies asked for every candidate (see the module docstring)."""
    allocs = [op for op in fn.body.block.ops if isinstance(op, tile.AllocOp)]
    counts = [1] * len(allocs)
    if buffers <= 1 or not allocs:
        return counts
    code, lay = single_buffered_code(fn, soc)
    accs = [accesses(ins, soc) for ins in code]
    trips = 2 if loop_form(fn) else 1  # the loop form: loops of one may repeat
    sizes = []
    for k, op in enumerate(allocs):
        space = space_of(op.res)
        size = lay.pitch[k]  # one copy: its byte size
        sizes.append(size)
        g = analyse(code, soc, isa.SPACE_CODES[space.value], lay.base[k], size, accs, trips)
        if g.problem is None and g.total >= 2:
            counts[k] = buffers
    while True:
        used = layout(allocs, soc, counts).used
        over = [s for s, u in used.items() if u > soc.buffer(s.value).usable]
        if not over:
            return counts
        space = over[0]
        k = max((k for k, op in enumerate(allocs) if counts[k] > 1 and space_of(op.res) == space),
                key=lambda k: (sizes[k], k))
        counts[k] -= 1


def _pinned(fn: func.FuncOp, default: int) -> int:
    tiling = fn.attributes.get("tile.tiling")
    pin = tiling.data.get("buffers") if tiling is not None else None
    if pin is None:
        return default
    n = pin.value.data
    if not 0 <= n <= MAX_BUFFERS:
        raise CannError(f"@{fn.sym_name.data}", f"tiling buffers = {n}: 0 (the rule), 1, 2 or 3 expected")
    return n


@dataclass(frozen=True)
class TileMultiBufferPass(ModulePass):
    """Record a buffer count (``buffers`` on ``tile.alloc``) for every refilled on-chip buffer and
    cut each kernel's first load into segments.

    Options: ``buffers`` (0 = the rule, 2 copies; 1 = none; 2 or 3 = that many where legal and
    fitting; a kernel's ``tile.tiling`` ``buffers`` overrides it), ``first_segment_bytes`` (0 = the
    rule; N = segments of N bytes; -1 = no segmentation)."""

    name = "tile-multi-buffer"
    buffers: int = 0
    first_segment_bytes: int = 0

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if not 0 <= self.buffers <= MAX_BUFFERS:
            raise CannError("tile-multi-buffer", f"buffers = {self.buffers}: 0 (the rule), 1, 2 or 3 expected")
        if self.first_segment_bytes < -1:
            raise CannError("tile-multi-buffer", f"first_segment_bytes = {self.first_segment_bytes}: 0 (the rule), "
                                                 "a positive byte count or -1 (no segmentation) expected")
        soc_attr = op.attributes.get("tile.soc")
        soc = load_soc(soc_attr.data if isinstance(soc_attr, StringAttr) else "Ascend910")
        for fn in list(op.body.block.ops):
            if not (isinstance(fn, func.FuncOp) and "tile.kernel" in fn.attributes):
                continue
            n = _pinned(fn, self.buffers) or DEFAULT_BUFFERS
            if self.first_segment_bytes >= 0:
                segment_first_load(fn, self.first_segment_bytes)
            allocs = [a for a in fn.body.block.ops if isinstance(a, tile.AllocOp)]
            for a, c in zip(allocs, kernel_buffers(fn, soc, n)):
                if c > 1:
                    a.properties["buffers"] = IntegerAttr(c, i64)
                else:
                    a.properties.pop("buffers", None)
