"""The ``ascend`` dialect's operations: one op per instruction of ``cann.hw.isa.INSTRUCTIONS``.

The instruction op classes are generated from the table (DESIGN.md principle 3): for instruction
``copy_gm_to_ub`` the class is ``CopyGmToUbOp``, the op ``ascend.copy_gm_to_ub``, with one property
per field in table order (``i64`` ``IntegerAttr`` for kind ``"i"``, ``f64`` ``FloatAttr`` for kind
``"f"``). All of them share one textual form, the instruction's assembly::

    ascend.mmad dtype=0, dst=0, a=0, b=0, m=16, k=16, n=16, init=1
    ascend.vadds dtype=0, dst=0, src0=0, src1=0, repeat=1, mask=128, ..., scalar=5.000000e-01

Fields are written in table order, each exactly once. Floats print as ``%.6e`` when that is exact,
else with 17 significant digits; infinities and NaN print as ``inf``, ``-inf`` and ``nan``.

Kernels are ``ascend.kernel`` symbol ops holding the instruction stream in one block::

    ascend.kernel @add attributes {block_dim = 1 : i64, num_args = 3 : i64} {
      ascend.copy_gm_to_ub dst=0, src_arg=0, src=0, nburst=1, burst=256, src_stride=0, dst_stride=0
      ...
    }

Every instruction op has memory effects (read and write), never ``Pure``: the greedy rewriter
would delete them as dead code.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable, Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    prop_def,
    region_def,
    traits_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import (
    HasParent,
    IsolatedFromAbove,
    MemoryReadEffect,
    MemoryWriteEffect,
    NoTerminator,
    SymbolOpInterface,
)
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.mlir_lexer import MLIRTokenKind

from cann.dialects.ascend.checks import instr_error
from cann.hw import isa

_F64 = Float64Type()


# ---------------------------------------------------------------------------------------------
# instruction ops


def _format_float(value: float) -> str:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    short = f"{value:.6e}"
    return short if float(short) == value else f"{value:.16e}"


class AscendInstrOp(IRDLOperation):
    """Base of every generated instruction op; ``DEFN`` is its row of the instruction table."""

    DEFN: ClassVar[isa.InstrDef]
    PIPE: ClassVar[isa.Pipe]  # the table's pipe (see exec_pipe for set_flag / wait_flag)

    def __init__(self, **fields: int | float):
        """Build from field values by name; omitted fields are 0 (as ``isa.make``)."""
        d = self.DEFN
        unknown = set(fields) - set(d.field_names)
        if unknown:
            raise KeyError(f"{d.mnemonic}: unknown fields {sorted(unknown)}")
        super().__init__(properties=_properties(d, [fields.get(f.name, 0) for f in d.fields]))

    # -- access ---------------------------------------------------------------------------------

    @property
    def values(self) -> tuple:
        """Field values in table order (ints and floats)."""
        return tuple(self.properties[f.name].value.data for f in self.DEFN.fields)

    def field(self, name: str) -> int | float:
        return self.properties[name].value.data

    @property
    def exec_pipe(self) -> isa.Pipe:
        """The pipe that executes it (the table's pipe; set_flag: src_pipe; wait_flag: dst_pipe)."""
        return op_to_instr(self).pipe

    # -- verification ---------------------------------------------------------------------------

    def verify_(self) -> None:
        d = self.DEFN
        for f in d.fields:
            attr = self.properties.get(f.name)
            want = FloatAttr if f.kind == "f" else IntegerAttr
            if not isinstance(attr, want):
                raise VerifyException(f"field {f.name} must be {'an f64' if f.kind == 'f' else 'an i64'} attribute")
            if f.kind == "f" and not isinstance(attr.type, Float64Type):
                raise VerifyException(f"field {f.name} must be an f64 attribute")
            if f.kind == "i" and attr.type != i64:
                raise VerifyException(f"field {f.name} must be an i64 attribute")
        extra = set(self.properties) - set(d.field_names)
        if extra:
            raise VerifyException(f"unknown fields {sorted(extra)}")
        if (msg := instr_error(d, self.values)) is not None:
            raise VerifyException(msg)

    # -- textual form ---------------------------------------------------------------------------

    def print(self, printer: Printer) -> None:
        parts = []
        for f in self.DEFN.fields:
            attr = self.properties.get(f.name)
            if f.kind == "f" and isinstance(attr, FloatAttr):
                text = _format_float(attr.value.data)
            elif f.kind == "i" and isinstance(attr, IntegerAttr):
                text = str(attr.value.data)
            else:  # an ill-typed property: print it as an attribute (the verifier reports it)
                text = str(attr)
            parts.append(f"{f.name}={text}")
        printer.print_string(" " + ", ".join(parts))
        if self.attributes:
            printer.print_op_attributes(self.attributes, print_keyword=True)

    @classmethod
    def parse(cls, parser: Parser) -> AscendInstrOp:
        d = cls.DEFN
        values = []
        for i, f in enumerate(d.fields):
            if i:
                parser.parse_punctuation(",", f" between fields of {d.mnemonic}")
            pos = parser.pos
            name = parser.parse_identifier(context_msg=f" (field {f.name} of {d.mnemonic})")
            if name != f.name:
                parser.raise_error(f"{d.mnemonic}: expected field '{f.name}', got '{name}' (fields in order: "
                                   f"{', '.join(d.field_names)})", pos, parser.pos)
            parser.parse_punctuation("=")
            values.append(_parse_float(parser) if f.kind == "f" else parser.parse_integer(allow_boolean=False))
        op = cls.create(properties=_properties(d, values))
        if (attrs := parser.parse_optional_attr_dict_with_keyword()) is not None:
            op.attributes.update(attrs.data)
        return op


def _parse_float(parser: Parser) -> float:
    negative = parser.parse_optional_punctuation("-") is not None
    tok = parser._current_token  # noqa: SLF001 (no public peek in xDSL 0.75)
    if tok.kind == MLIRTokenKind.BARE_IDENT and tok.text in ("inf", "nan"):
        parser.parse_identifier()
        value = math.inf if tok.text == "inf" else math.nan
    elif tok.kind == MLIRTokenKind.INTEGER_LIT and tok.text.lower().startswith("0x"):
        bits = parser.parse_integer(allow_boolean=False, allow_negative=False)
        value = struct.unpack("<d", struct.pack("<Q", bits))[0]
    else:
        value = float(parser.parse_number(context_msg=" (float field)"))
    return -value if negative else value


def _properties(d: isa.InstrDef, values: Sequence) -> dict[str, Attribute]:
    props: dict[str, Attribute] = {}
    for f, v in zip(d.fields, values, strict=True):
        props[f.name] = FloatAttr(float(v), _F64) if f.kind == "f" else IntegerAttr(int(v), i64)
    return props


def _camel(mnemonic: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in mnemonic.split("_")) + "Op"


def _make_op_class(d: isa.InstrDef) -> type[AscendInstrOp]:
    ns: dict = {
        "__module__": __name__,
        "__qualname__": _camel(d.mnemonic),
        "__doc__": f"``{d.mnemonic}`` (opcode {d.opcode}, pipe {d.pipe.name}, {d.group}): {d.doc}",
        "name": f"ascend.{d.mnemonic}",
        "__annotations__": {"DEFN": "ClassVar[isa.InstrDef]", "PIPE": "ClassVar[isa.Pipe]"},
        "DEFN": d,
        "PIPE": d.pipe,
        "traits": traits_def(MemoryReadEffect(), MemoryWriteEffect()),
    }
    for f in d.fields:
        ns[f.name] = prop_def(FloatAttr if f.kind == "f" else IntegerAttr[I64])
    return irdl_op_definition(type(_camel(d.mnemonic), (AscendInstrOp,), ns))


#: generated op classes, in table order
INSTRUCTION_OPS: tuple[type[AscendInstrOp], ...] = tuple(_make_op_class(d) for d in isa.INSTRUCTIONS)
OP_BY_MNEMONIC: dict[str, type[AscendInstrOp]] = {c.DEFN.mnemonic: c for c in INSTRUCTION_OPS}
globals().update({c.__name__: c for c in INSTRUCTION_OPS})  # CopyGmToUbOp, MmadOp, VaddOp, ...

#: mnemonics of the synchronisation instructions
SYNC_MNEMONICS = frozenset(d.mnemonic for d in isa.INSTRUCTIONS if d.group == "sync")


def op_to_instr(op: Operation) -> isa.Instr:
    """The ``isa.Instr`` of an instruction op (values as in the table: ints, floats)."""
    if not isinstance(op, AscendInstrOp):
        raise TypeError(f"not an ascend instruction op: {op.name}")
    d = op.DEFN
    return isa.Instr(d, tuple(float(v) if f.kind == "f" else int(v) for f, v in zip(d.fields, op.values)))


def instr_to_op(instr: isa.Instr) -> AscendInstrOp:
    """A new (detached) instruction op for ``instr``."""
    cls = OP_BY_MNEMONIC[instr.defn.mnemonic]
    return cls.create(properties=_properties(instr.defn, instr.values))


def make_op(mnemonic: str, **fields: int | float) -> AscendInstrOp:
    """``instr_to_op(isa.make(mnemonic, **fields))``: omitted fields are 0."""
    return OP_BY_MNEMONIC[mnemonic](**fields)


def is_sync(op: Operation) -> bool:
    return isinstance(op, AscendInstrOp) and op.DEFN.mnemonic in SYNC_MNEMONICS


# ---------------------------------------------------------------------------------------------
# kernel


@irdl_op_definition
class KernelOp(IRDLOperation):
    """``ascend.kernel @name attributes {block_dim = B : i64, num_args = N : i64} { instructions }``.

    An SPMD kernel: the instruction stream (one block, no terminator) runs on ``block_dim`` cores;
    ``num_args`` global-memory arguments are addressed by the ``*_arg`` fields.
    """

    name = "ascend.kernel"

    sym_name = prop_def(StringAttr)
    block_dim = prop_def(IntegerAttr[I64])
    num_args = prop_def(IntegerAttr[I64])
    body = region_def("single_block")

    traits = traits_def(SymbolOpInterface(), IsolatedFromAbove(), NoTerminator(), HasParent(ModuleOp))

    _PROPS: ClassVar[tuple[str, ...]] = ("block_dim", "num_args")

    def __init__(self, sym_name: str, block_dim: int, num_args: int, ops: Iterable[Operation] = ()):
        super().__init__(
            properties={
                "sym_name": StringAttr(sym_name),
                "block_dim": IntegerAttr(block_dim, i64),
                "num_args": IntegerAttr(num_args, i64),
            },
            regions=[Region(Block(list(ops)))],
        )

    @property
    def kernel_name(self) -> str:
        return self.sym_name.data

    @property
    def instructions(self) -> list[AscendInstrOp]:
        return list(self.body.block.ops) if self.body.blocks else []

    def verify_(self) -> None:
        if self.block_dim.value.data < 1:
            raise VerifyException(f"block_dim must be >= 1, got {self.block_dim.value.data}")
        nargs = self.num_args.value.data
        if nargs < 0:
            raise VerifyException(f"num_args must be >= 0, got {nargs}")
        if len(self.body.blocks) != 1:
            raise VerifyException("body must have exactly one block")
        if self.body.block.args:
            raise VerifyException("body must have no block arguments")
        for i, op in enumerate(self.body.block.ops):
            if not isinstance(op, AscendInstrOp):
                raise VerifyException(f"instruction {i}: only ascend instructions may appear in a kernel, "
                                      f"found {op.name}")
            for f in ("src_arg", "dst_arg"):
                if f in op.DEFN.field_names and not 0 <= op.field(f) < nargs:
                    raise VerifyException(f"instruction {i} ({op.DEFN.mnemonic}): {f}={op.field(f)} is out of "
                                          f"range for num_args = {nargs}")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        attrs = {n: self.properties[n] for n in self._PROPS if n in self.properties}
        attrs.update(self.attributes)
        printer.print_op_attributes(attrs, print_keyword=True)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False, print_empty_block=False)

    @classmethod
    def parse(cls, parser: Parser) -> KernelOp:
        sym = parser.parse_symbol_name()
        attrs = parser.parse_optional_attr_dict_with_keyword()
        attrs = dict(attrs.data) if attrs is not None else {}
        props: dict[str, Attribute] = {"sym_name": sym}
        for n in cls._PROPS:
            if n not in attrs:
                parser.raise_error(f"ascend.kernel: missing attribute {n}")
            props[n] = attrs.pop(n)
        pos = parser.pos
        region = parser.parse_region()
        if not region.blocks:
            region.add_block(Block())
        if region.blocks.first.args:
            parser.raise_error("ascend.kernel: the body takes no block arguments", pos, parser.pos)
        return cls.create(properties=props, attributes=attrs, regions=[region])


def kernels(module: ModuleOp) -> list[KernelOp]:
    """The kernels of a module, in order."""
    return [op for op in module.walk() if isinstance(op, KernelOp)]
