"""The ``tile`` dialect: kernels over on-chip buffers, one level above the instruction set.

A tile-level module has two parts:

* **Kernels**: ``func.func`` ops with the unit attribute ``tile.kernel``, whose arguments are
  flat global-memory buffers (``memref<N x T, #tile<space gm>>``). Their bodies allocate flat
  on-chip buffers (``tile.alloc``) and move and compute tiles of data with the ops below. Offsets,
  counts and strides are in **elements** of the buffers' element type; address assignment,
  repeat/mask/stride encoding and pipe binding happen in ``convert-tile-to-ascend``. Each kernel
  carries its tiling as the attribute ``tile.tiling`` (a dictionary; the seam for AutoTune) and its
  ``tile.block_dim``.
* **The host program** ``func.func @main``: graph inputs and outputs, device constants
  (``tile.constant``), global-memory tensors (``tile.gm_alloc``), views (``tile.view``) and kernel
  launches (``tile.launch``) in execution order.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseIntOrFPElementsAttr,
    DenseResourceAttr,
    FloatAttr,
    IntegerAttr,
    MemRefType,
    NameLoc,
    StringAttr,
    SymbolRefAttr,
    f64,
    i64,
)
from xdsl.ir import Attribute, Dialect, Operation, SSAValue, SpacedOpaqueSyntaxAttribute
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    base,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import MemoryReadEffect, MemoryWriteEffect
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum


class Space(StrEnum):
    """Memory spaces of the modeled core (names of cann.hw.config.BUFFER_NAMES plus gm)."""

    GM = "gm"
    L1 = "l1"
    L0A = "l0a"
    L0B = "l0b"
    L0C = "l0c"
    UB = "ub"


@irdl_attr_definition
class SpaceAttr(EnumAttribute[Space], SpacedOpaqueSyntaxAttribute):
    """``#tile<space ub>``: the memory space of a buffer (memref memory_space)."""

    name = "tile.space"


def space_of(value: SSAValue) -> Space:
    """The memory space of a buffer value.

    Raises:
        VerifyException: the value is not a memref in a tile memory space.
    """
    t = value.type
    if not isinstance(t, MemRefType) or not isinstance(t.memory_space, SpaceAttr):
        raise VerifyException(f"expected a memref in a #tile<space ...>, got {t}")
    return t.memory_space.data


def fused_nodes(kernel: Operation) -> list[str]:
    """The model nodes a kernel function (tile or ascend level) computes: its ``tile.fused_nodes``
    (a fused group's, in order), else the one node of its location, else none."""
    nodes = kernel.attributes.get("tile.fused_nodes")
    if isinstance(nodes, ArrayAttr):
        return [n.data for n in nodes.data]
    return [kernel.location.desc.data] if isinstance(kernel.location, NameLoc) else []


def loop_form(kernel: Operation) -> bool:
    """Whether a kernel function (tile or ascend level) was lowered in its loop form: ``loops`` = 1
    in its ``tile.tiling`` (code independent of the map size: loops of one iteration stay loops,
    and multi-buffering and synchronization treat them as repeating)."""
    t = kernel.attributes.get("tile.tiling")
    v = t.data.get("loops") if t is not None else None
    return v is not None and v.value.data == 1


def buffer_type(space: Space, elem: Attribute, count: int) -> MemRefType:
    """A flat buffer type ``memref<count x elem, #tile<space S>>``."""
    return MemRefType(elem, [count], memory_space=SpaceAttr(space))


@functools.lru_cache(maxsize=1 << 14)
def _i64(value: int) -> IntegerAttr:
    """The i64 ``IntegerAttr`` of ``value``, one shared per value (attributes are immutable; building
    and verifying a new one per instruction field was a large part of lowering a big kernel)."""
    return IntegerAttr(value, i64)


class _TileInstr(IRDLOperation):
    """Shared text form: ``tile.op %a, %b {key = value, ...} : type, type``.

    Subclasses list their integer properties in ``INTS`` and float ones in ``FLOATS``; operands
    are the variadic ``args`` (named by ``ARGS``: buffers read and written).
    """

    ARGS: ClassVar[tuple[str, ...]] = ()
    INTS: ClassVar[tuple[str, ...]] = ()
    FLOATS: ClassVar[tuple[str, ...]] = ()
    STRS: ClassVar[tuple[str, ...]] = ()

    args = var_operand_def(MemRefType)
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(self, *args: SSAValue, **fields):
        props: dict[str, Attribute] = {}
        for k in self.INTS:
            props[k] = _i64(int(fields.pop(k, 0)))
        for k in self.FLOATS:
            props[k] = FloatAttr(float(fields.pop(k, 0.0)), f64)
        for k in self.STRS:
            props[k] = StringAttr(str(fields.pop(k)))
        if fields:
            raise TypeError(f"{self.name}: unknown fields {sorted(fields)}")
        super().__init__(operands=[list(args)], properties=props)

    def field(self, name: str):
        a = self.properties[name]
        if isinstance(a, IntegerAttr):
            return a.value.data
        if isinstance(a, FloatAttr):
            return a.value.data
        return a.data

    def operand(self, name: str) -> SSAValue:
        return self.args[self.ARGS.index(name)]

    def verify_(self) -> None:
        if len(self.args) != len(self.ARGS):
            raise VerifyException(f"{self.name} expects {len(self.ARGS)} operands ({', '.join(self.ARGS)})")
        for k in (*self.INTS, *self.FLOATS, *self.STRS):
            if k not in self.properties:
                raise VerifyException(f"{self.name} is missing field '{k}'")
        for a in self.args:
            space_of(a)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list(self.args, printer.print_operand)
        items = []
        for k in (*self.INTS, *self.FLOATS, *self.STRS):
            v = self.field(k)
            items.append(f"{k} = {v!r}" if isinstance(v, float) else (f'{k} = "{v}"' if isinstance(v, str) else f"{k} = {v}"))
        printer.print_string(" {" + ", ".join(items) + "} : ")
        printer.print_list([a.type for a in self.args], printer.print_attribute)

    @classmethod
    def parse(cls, parser: Parser):
        ops = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_unresolved_operand)
        fields: dict[str, object] = {}

        def entry():
            key = parser.parse_identifier()
            parser.parse_punctuation("=")
            if key in cls.STRS:
                fields[key] = parser.parse_str_literal()
            elif key in cls.FLOATS:
                fields[key] = parser.parse_float()
            else:
                fields[key] = parser.parse_integer()

        parser.parse_comma_separated_list(parser.Delimiter.BRACES, entry)
        parser.parse_punctuation(":")
        types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
        operands = parser.resolve_operands(ops, types, parser.pos)
        return cls(*operands, **fields)


def _instr(name: str, args: Sequence[str], ints: Sequence[str] = (), floats: Sequence[str] = (),
           strs: Sequence[str] = (), doc: str = "") -> type[_TileInstr]:
    body: dict[str, object] = {
        "name": f"tile.{name}", "ARGS": tuple(args), "INTS": tuple(ints), "FLOATS": tuple(floats),
        "STRS": tuple(strs), "__doc__": doc,
        "__annotations__": {k: ClassVar for k in ("ARGS", "INTS", "FLOATS", "STRS")},
    }
    body.update({k: prop_def(IntegerAttr) for k in ints})
    body.update({k: prop_def(FloatAttr) for k in floats})
    body.update({k: prop_def(StringAttr) for k in strs})
    cls = type("".join(p.capitalize() for p in name.split("_")) + "Op", (_TileInstr,), body)
    return irdl_op_definition(cls)


_DMA = ("src_offset", "dst_offset", "nburst", "burst", "src_stride", "dst_stride")

CopyOp = _instr("copy", ("src", "dst"), _DMA,
                doc="Burst copy between GM and L1/UB: nburst bursts of burst elements, strides start to start.")
CopyAddOp = _instr("copy_add", ("src", "dst"), _DMA,
                   doc="UB -> GM burst copy adding to GM (atomic add, copy_ub_to_gm_add): each float element "
                       "of dst becomes dst + src (float32 sum rounded to dst's dtype); blocks of a launch may "
                       "add to the same elements.")
CopyNd2nzOp = _instr("copy_nd2nz", ("src", "dst"), ("src_offset", "dst_offset", "rows", "cols", "src_row_stride"),
                     doc="GM row-major rows x cols -> L1 NZ [c1][rows16][c0], zero padded.")
Load2dOp = _instr("load2d", ("src", "dst"), ("src_offset", "dst_offset", "count", "src_stride", "dst_stride"),
                  doc="L1 -> L0A/L0B: count fractals (512 B each); strides in elements.")
Img2colOp = _instr("img2col", ("src", "dst"),
                   ("src_offset", "dst_offset", "fm_c1", "fm_h", "fm_w", "pad_t", "pad_b", "pad_l", "pad_r",
                    "stride_h", "stride_w", "kernel_h", "kernel_w", "dil_h", "dil_w",
                    "m_start", "m_count", "k_start", "k_count", "fm_c1_stride"),
                   doc="load3d of a [c1][h][w][16] feature map in L1 into a Zz matrix in L0A; C1 block c at "
                       "src_offset + c*fm_c1_stride (elements, >= h*w*16; packed when equal).")
Img2colC04Op = _instr("img2col_c04", ("src", "dst"), Img2colOp.INTS,
                      doc="load3d of a [c1][h][w][4] (NC1HWC0_C04) feature map in L1 into a Zz matrix in L0A; "
                          "K index ((c1*kernel_h + kh)*kernel_w + kw)*4 + c0.")
MmadOp = _instr("mmad", ("a", "b", "c"), ("a_offset", "b_offset", "c_offset", "m", "k", "n", "init"),
                doc="c (L0C, Nz fp32) (init ? = : +=) a (L0A, Zz) x b (L0B, Zn).")
CopyL0cToUbOp = _instr("copy_l0c_to_ub", ("src", "dst"), ("src_offset", "dst_offset", "n1", "m", "src_m"),
                       doc="L0C Nz fp32 [n1][src_m][16] rows 0..m -> UB [n1][m][16] in the UB buffer's dtype.")
VecOp = _instr("vec", ("dst", "src0", "src1"),
               ("dst_offset", "src0_offset", "src1_offset", "count", "unit", "dst_stride", "src0_stride",
                "src1_stride"), ("scalar",), ("op",),
               doc="Vector op over count units of unit contiguous elements; operand i's unit u starts at "
                   "offset_i + u*stride_i (stride 0: broadcast of one unit dividing a 256 B repeat, laid out to fill "
                   "the repeat -- a unit of one 32 B block is read by every block, stride 0). Ops: add sub "
                   "mul div max min (binary), adds muls maxs mins (scalar), relu exp ln rec sqrt abs mov (unary), "
                   "dup, cast (dense, dtype of dst/src0 differ), mla (dst += src0 * src1), cadd (row sums: dst element "
                   "u = sum of src0's unit u, unit <= one repeat). Unused operands repeat dst.")
ReduceOp = _instr("reduce", ("dst", "src", "scratch"), ("dst_offset", "src_offset", "scratch_offset", "count"),
                  strs=("op",), doc="dst[0] = max/add over count contiguous elements of src (scratch: UB work space).")
BroadcastOp = _instr("broadcast", ("dst", "src"), ("dst_offset", "src_offset", "count"),
                     doc="dst[0:count*lanes] = src element (count repeats of 256 B).")

BlockOffsetOp = _instr("block_offset", ("buf",), ("stride",),
                      doc="SPMD: for the rest of the kernel, GM argument buf is seen block_idx * stride elements "
                          "further on each core.")

BlockOffsetModOp = _instr("block_offset_mod", ("buf",), ("stride", "modulo"),
                          doc="SPMD: for the rest of the kernel, GM argument buf is seen (block_idx mod modulo) * "
                              "stride elements further on each core (cores split in groups of modulo).")

BlockOffsetDivOp = _instr("block_offset_div", ("buf",), ("stride", "divisor"),
                          doc="SPMD: for the rest of the kernel, GM argument buf is seen (block_idx div divisor) * "
                              "stride elements further on each core (the row tile of a two-level split).")

LoadIndexOp = _instr("load_index", ("src",), ("src_offset", "reg", "bound"),
                     doc="Scalar register reg = element src_offset of the UB index buffer src (int32/int64), "
                         "negative values wrapped by + bound, outside [0, bound) an error (ld_idx).")
CopyIndexedOp = _instr("copy_indexed", ("src", "dst"), (*_DMA, "reg", "reg_stride"),
                       doc="GM -> UB burst copy whose source offset adds register reg * reg_stride elements "
                           "(copy_gm_to_ub_reg).")
SelectOp = _instr("select", ("dst", "cond", "src0", "src1"), ("dst_offset", "cond_offset", "src0_offset",
                                                             "src1_offset", "count"),
                  doc="dst = cond != 0 ? src0 : src1 over count contiguous elements of each (vsel); cond holds "
                      "0/1 in the data dtype.")

TransposeBlocksOp = _instr("transpose_blocks", ("dst", "src"), ("dst_offset", "src_offset", "count", "dst_stride",
                                                                 "src_stride", "dst_row", "src_row"),
                           doc="count 16x16 matrices (elements): row r of matrix i, at src_offset + i*src_stride + "
                               "r*src_row, is written as column r of the matrix at dst_offset + i*dst_stride, whose "
                               "rows are dst_row apart (vtranspose); UB only.")

LoopOffsetOp = _instr("loop_offset", ("buf",), ("stride",),
                     doc="In the enclosing tile.loop_begin, iteration i sees GM argument buf i * stride elements "
                         "further on.")

TILE_INSTRS = (LoopOffsetOp, BlockOffsetOp, BlockOffsetModOp, BlockOffsetDivOp, CopyOp, CopyAddOp, CopyNd2nzOp, Load2dOp, Img2colOp, Img2colC04Op, MmadOp, CopyL0cToUbOp, VecOp, ReduceOp, BroadcastOp,
               LoadIndexOp, CopyIndexedOp, SelectOp, TransposeBlocksOp)


@irdl_op_definition
class BlockIfOp(IRDLOperation):
    """``tile.block_if {lo = 0 : i64, hi = 3 : i64}``: what follows, up to ``tile.block_endif``, runs
    only on the cores with ``lo <= block_idx < hi`` (SPMD tails)."""

    name = "tile.block_if"
    lo = prop_def(IntegerAttr)
    hi = prop_def(IntegerAttr)
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "attr-dict"

    def __init__(self, lo: int, hi: int):
        super().__init__(properties={"lo": IntegerAttr(lo, i64), "hi": IntegerAttr(hi, i64)})


@irdl_op_definition
class LoopBeginOp(IRDLOperation):
    """``tile.loop_begin {count = 4 : i64}``: what follows, up to ``tile.loop_end``, runs ``count``
    times; ``tile.loop_offset`` ops in it move GM arguments per iteration (hardware loop)."""

    name = "tile.loop_begin"
    count = prop_def(IntegerAttr)
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "attr-dict"

    def __init__(self, count: int):
        super().__init__(properties={"count": IntegerAttr(count, i64)})


@irdl_op_definition
class LoopStepOp(IRDLOperation):
    """``tile.loop_step {field = "c_offset", step = 64 : i64}``: in the enclosing ``tile.loop_begin``,
    iteration i sees integer property ``field`` of the next op (a tile instruction; only other
    ``tile.loop_step`` ops between) advanced by ``i * step``: the offset (elements) into an on-chip
    operand (``dst_offset`` of a UB ``dst``, ``c_offset`` of ``tile.mmad``, ...) or
    ``tile.img2col``'s ``m_start`` / ``k_start`` (positions, columns). Lowered to the ISA's
    ``loop_step`` on every instruction the op becomes (``convert-tile-to-ascend`` checks the op
    lowers to the same instructions stepping linearly).

    With ``offset``, ``lo`` and ``hi`` (``lo <= hi``) the advance is ``clamp(offset + i * step, lo,
    hi)`` (ISA ``loop_clamp``): the border tiles of a loop share its body, e.g. a GM offset
    (``src_offset`` of a GM ``src``), a copy's ``nburst`` / ``burst`` or img2col's window (``fm_h``,
    ``fm_w`` and the pads) that only the first or last iteration changes. With ``up`` (default 0) the
    step is of the loop that many levels out from the innermost one around the op (an op of a
    nested loop moving with an outer loop; lowered to ``loop_clamp``)."""

    name = "tile.loop_step"
    field = prop_def(StringAttr)
    step = prop_def(IntegerAttr)
    offset = opt_prop_def(IntegerAttr)
    lo = opt_prop_def(IntegerAttr)
    hi = opt_prop_def(IntegerAttr)
    up = opt_prop_def(IntegerAttr)
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "attr-dict"

    def __init__(self, field: str, step: int, clamp: tuple[int, int, int] | None = None, up: int = 0):
        props = {"field": StringAttr(field), "step": IntegerAttr(step, i64)}
        if clamp is not None:
            props.update(offset=IntegerAttr(clamp[0], i64), lo=IntegerAttr(clamp[1], i64),
                         hi=IntegerAttr(clamp[2], i64))
        if up:
            props["up"] = IntegerAttr(up, i64)
        super().__init__(properties=props)

    @property
    def levels_up(self) -> int:
        """How many loops out from the innermost one around the op the stepping loop is."""
        return self.up.value.data if self.up is not None else 0

    @property
    def clamp(self) -> tuple[int, int, int] | None:
        """``(offset, lo, hi)`` of a clamped step, None for a linear one."""
        if self.lo is None:
            return None
        return (self.offset.value.data if self.offset is not None else 0, self.lo.value.data, self.hi.value.data)

    def verify_(self) -> None:
        given = [p is not None for p in (self.lo, self.hi)]
        if any(given) and not all(given) or self.offset is not None and not all(given):
            raise VerifyException("tile.loop_step: a clamped step gives lo and hi (and optionally offset)")
        if self.up is not None and self.up.value.data < 0:
            raise VerifyException(f"tile.loop_step: up {self.up.value.data} < 0")
        if all(given) and self.lo.value.data > self.hi.value.data:
            raise VerifyException(f"tile.loop_step: lo {self.lo.value.data} > hi {self.hi.value.data}")


@irdl_op_definition
class LoopEndOp(IRDLOperation):
    """``tile.loop_end``: ends the innermost ``tile.loop_begin``."""

    name = "tile.loop_end"
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())
    assembly_format = "attr-dict"


@irdl_op_definition
class BlockEndifOp(IRDLOperation):
    """``tile.block_endif``: ends the innermost ``tile.block_if``."""

    name = "tile.block_endif"
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())
    assembly_format = "attr-dict"


@irdl_op_definition
class AllocOp(IRDLOperation):
    """``%b = tile.alloc : memref<N x T, #tile<space ub>>``: an on-chip buffer for the whole kernel.

    Optional property ``buffers`` (``%b = tile.alloc {buffers = 2 : i64} : ...``, default 1): the
    copies of the buffer ``convert-tile-to-ascend`` allocates, successive generations of its
    contents rotating through them (multi-buffering, set by ``tile-multi-buffer``)."""

    name = "tile.alloc"
    buffers = opt_prop_def(IntegerAttr)
    res = result_def(MemRefType)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "attr-dict `:` type($res)"

    def __init__(self, space: Space, elem: Attribute, count: int, buffers: int = 1):
        props = {"buffers": IntegerAttr(buffers, i64)} if buffers != 1 else {}
        super().__init__(result_types=[buffer_type(space, elem, count)], properties=props)

    @property
    def copies(self) -> int:
        """The buffer count (``buffers``, 1 when absent)."""
        return 1 if self.buffers is None else self.buffers.value.data

    def verify_(self) -> None:
        if space_of(self.res) == Space.GM:
            raise VerifyException("tile.alloc allocates on-chip buffers; use tile.gm_alloc in @main for GM")
        if self.copies < 1:
            raise VerifyException(f"tile.alloc buffers must be >= 1, got {self.copies}")


@irdl_op_definition
class GmAllocOp(IRDLOperation):
    """``%t = tile.gm_alloc {format = "NC1HWC0", shape = array<i64: ...>} : memref<...>``: a GM tensor."""

    name = "tile.gm_alloc"
    format = prop_def(StringAttr)
    shape = prop_def(Attribute)
    res = result_def(MemRefType)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "attr-dict `:` type($res)"


@irdl_op_definition
class ConstantOp(IRDLOperation):
    """``%w = tile.constant {format = "FRACTAL_Z", value = dense<...>} : memref<...>``: device-format data."""

    name = "tile.constant"
    format = prop_def(StringAttr)
    value = prop_def(base(DenseIntOrFPElementsAttr) | base(DenseResourceAttr))
    res = result_def(MemRefType)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "attr-dict `:` type($res)"


@irdl_op_definition
class ViewOp(IRDLOperation):
    """``%v = tile.view %t {format, shape, offset} : memref<...> -> memref<...>``: the same GM bytes
    seen with another logical shape (Reshape, Flatten), starting ``offset`` elements in."""

    name = "tile.view"
    src = operand_def(MemRefType)
    format = prop_def(StringAttr)
    shape = prop_def(Attribute)
    offset = opt_prop_def(IntegerAttr)
    res = result_def(MemRefType)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$src attr-dict `:` type($src) `->` type($res)"


@irdl_op_definition
class LaunchOp(IRDLOperation):
    """``tile.launch @kernel(%a, %b) : memref<...>, memref<...>``: run a kernel on GM tensors."""

    name = "tile.launch"
    kernel = prop_def(SymbolRefAttr)
    args = var_operand_def(MemRefType)
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())
    assembly_format = "$kernel `(` $args `)` attr-dict `:` type($args)"

    def __init__(self, kernel: str, args: Sequence[SSAValue]):
        super().__init__(operands=[list(args)], properties={"kernel": SymbolRefAttr(kernel)})


Tile = Dialect(
    "tile",
    [*TILE_INSTRS, BlockIfOp, BlockEndifOp, LoopBeginOp, LoopStepOp, LoopEndOp, AllocOp, GmAllocOp, ConstantOp, ViewOp, LaunchOp],
    [SpaceAttr],
)
