"""``tile-multi-buffer``: a buffer count for every on-chip buffer a tile kernel refills.

Per ``tile.kernel``: the kernel is lowered with one copy of every buffer (the code
``convert-tile-to-ascend`` emits) and each ``tile.alloc`` is analysed for its *generations*
(:mod:`cann.lowering.generations`). A buffer is a candidate when it runs at least two generations
and renaming them is legal (every read reads bytes written in its own generation). Candidates get
``n`` copies, recorded as the alloc's ``buffers`` property, as long as the SoC's capacities (L1,
L0A, L0B, L0C, UB usable bytes, with :func:`cann.lowering.convert_tile_to_ascend.layout`'s
alignment) hold them; while a space overflows, its largest multi-copied candidate (the later one
of equal sizes) loses a copy. Buffers that are not candidates keep one copy (the property is
removed).

Options: ``buffers`` (0: the rule, 2 copies; 1: no multi-buffering; 2 or 3: that many where legal
and fitting). A kernel's ``tile.tiling`` entry ``buffers`` (pinned through
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
from cann.dialects.tile import space_of
from cann.errors import CannError
from cann.hw import isa
from cann.hw.config import SocSpec, load_soc
from cann.lowering.convert_tile_to_ascend import layout, single_buffered_code
from cann.lowering.generations import accesses, analyse

#: the copies the rule gives each candidate
DEFAULT_BUFFERS = 2
MAX_BUFFERS = 3


def kernel_buffers(fn: func.FuncOp, soc: SocSpec, buffers: int) -> list[int]:
    """The buffer count of each ``tile.alloc`` of tile kernel ``fn`` (in order) with ``buffers``
    copies asked for every candidate (see the module docstring)."""
    allocs = [op for op in fn.body.block.ops if isinstance(op, tile.AllocOp)]
    counts = [1] * len(allocs)
    if buffers <= 1 or not allocs:
        return counts
    code, lay = single_buffered_code(fn, soc)
    accs = [accesses(ins, soc) for ins in code]
    sizes = []
    for k, op in enumerate(allocs):
        space = space_of(op.res)
        size = lay.pitch[k]  # one copy: its byte size
        sizes.append(size)
        g = analyse(code, soc, isa.SPACE_CODES[space.value], lay.base[k], size, accs)
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
    """Record a buffer count (``buffers`` on ``tile.alloc``) for every refilled on-chip buffer.

    Option ``buffers``: 0 = the rule (2 copies), 1 = none, 2 or 3 = that many (where legal and
    fitting); a kernel's ``tile.tiling`` ``buffers`` overrides it."""

    name = "tile-multi-buffer"
    buffers: int = 0

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if not 0 <= self.buffers <= MAX_BUFFERS:
            raise CannError("tile-multi-buffer", f"buffers = {self.buffers}: 0 (the rule), 1, 2 or 3 expected")
        soc_attr = op.attributes.get("tile.soc")
        soc = load_soc(soc_attr.data if isinstance(soc_attr, StringAttr) else "Ascend910")
        for fn in list(op.body.block.ops):
            if not (isinstance(fn, func.FuncOp) and "tile.kernel" in fn.attributes):
                continue
            n = _pinned(fn, self.buffers) or DEFAULT_BUFFERS
            allocs = [a for a in fn.body.block.ops if isinstance(a, tile.AllocOp)]
            for a, c in zip(allocs, kernel_buffers(fn, soc, n)):
                if c > 1:
                    a.properties["buffers"] = IntegerAttr(c, i64)
                else:
                    a.properties.pop("buffers", None)
