"""The ascend dialect checked against the instruction table (DESIGN.md principle 3)."""

from __future__ import annotations

import math

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, Float64Type, FloatAttr, IntegerAttr, ModuleOp, i64
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import MemoryWriteEffect, Pure
from xdsl.utils.exceptions import VerifyException

from cann.dialects.ascend import (
    INSTRUCTION_OPS,
    OP_BY_MNEMONIC,
    Ascend,
    AscendInstrOp,
    KernelOp,
    instr_error,
    instr_to_op,
    make_op,
    op_to_instr,
)
from cann.dialects.ascend import ops as ascend_ops
from cann.hw import isa


def _ctx() -> Context:
    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(Ascend)
    return ctx


def _valid_values(d: isa.InstrDef) -> dict:
    """A valid instance of every instruction (each field set to something legal)."""
    v = {f.name: (0.25 if f.kind == "f" else 0) for f in d.fields}
    ones = ("nburst", "burst", "repeat", "rows", "cols", "n1", "fm_c1", "fm_h", "fm_w", "stride_h", "stride_w",
            "kernel_h", "kernel_w", "dil_h", "dil_w", "init", "bound")
    for n in ones:
        if n in v:
            v[n] = 1
    for n in ("m", "k", "n", "m_count", "k_count", "src_m"):
        if n in v:
            v[n] = 16
    if "mask" in v:
        v["mask"] = 64
    if d.mnemonic == "load2d":
        v["dst_space"] = isa.L0B
    if d.mnemonic in ("set_flag", "wait_flag"):
        v.update(src_pipe=int(isa.Pipe.MTE2), dst_pipe=int(isa.Pipe.V), event=7)
    if d.mnemonic == "pipe_barrier":
        v["pipe"] = int(isa.Pipe.ALL)
    if d.mnemonic == "loop_rotate":
        v.update(space=isa.SPACE_CODES["ub"], base=0, size=512, copies=2, step=1)
    if d.mnemonic == "loop_rotate_event":
        v.update(src_pipe=int(isa.Pipe.MTE2), dst_pipe=int(isa.Pipe.V), base=0, copies=2, step=1)
    if d.mnemonic == "block_offset_mod":
        v.update(modulo=4)
    if d.mnemonic == "block_offset_div":
        v.update(divisor=4)
    if d.group == "img2col":  # a 1x1 map's C1 block, packed
        v["fm_c1_stride"] = 16 * 2
    if d.mnemonic == "copy_ub_to_gm_add":  # whole float16 elements
        v["burst"] = 2
    if d.mnemonic in isa.VEC_DTYPES:  # a dtype the instruction computes on
        v["dtype"] = min(isa.VEC_DTYPES[d.mnemonic])
    return v


def _camel(m: str) -> str:
    return "".join(p.capitalize() for p in m.split("_")) + "Op"


def test_every_instruction_has_an_op_matching_the_table():
    assert [c.DEFN for c in INSTRUCTION_OPS] == list(isa.INSTRUCTIONS)
    assert set(OP_BY_MNEMONIC) == set(isa.BY_MNEMONIC)
    dialect_ops = {op.name: op for op in Ascend.operations}
    for d in isa.INSTRUCTIONS:
        cls = OP_BY_MNEMONIC[d.mnemonic]
        assert cls.name == f"ascend.{d.mnemonic}"
        assert dialect_ops[cls.name] is cls
        assert cls.__name__ == _camel(d.mnemonic)
        assert getattr(ascend_ops, cls.__name__) is cls
        assert cls.PIPE == d.pipe
        opdef = cls.get_irdl_definition()
        assert [name for name, _ in opdef.properties.items()] == list(d.field_names)
        assert not opdef.operands and not opdef.results and not opdef.regions
        assert cls.has_trait(MemoryWriteEffect) and not cls.has_trait(Pure)


def test_generated_names():
    assert OP_BY_MNEMONIC["copy_gm_to_l1_nd2nz"].__name__ == "CopyGmToL1Nd2nzOp"
    assert OP_BY_MNEMONIC["vconv_f322f16"].__name__ == "VconvF322f16Op"
    assert ascend_ops.MmadOp.name == "ascend.mmad"


@pytest.mark.parametrize("d", isa.INSTRUCTIONS, ids=lambda d: d.mnemonic)
def test_instr_op_roundtrip(d: isa.InstrDef):
    ins = isa.make(d.mnemonic, **_valid_values(d))
    assert instr_error(d, ins.values) is None
    op = instr_to_op(ins)
    op.verify()
    assert op_to_instr(op) == ins
    for f, v in zip(d.fields, ins.values):
        attr = op.properties[f.name]
        if f.kind == "f":
            assert isinstance(attr, FloatAttr) and isinstance(attr.type, Float64Type) and attr.value.data == v
        else:
            assert isinstance(attr, IntegerAttr) and attr.type == i64 and attr.value.data == v
    # custom text -> parse -> same instruction
    text = str(op)
    assert text.startswith(f"ascend.{d.mnemonic} ")
    parsed = Parser(_ctx(), text).parse_op()
    assert op_to_instr(parsed) == ins
    # the textual form is the instruction's assembly
    assert text.removeprefix("ascend.").split(",")[0] == ins.asm().split(",")[0]


@pytest.mark.parametrize("value", [0.5, 0.1, 1 / 3, -2.0, 1e-300, 5e-324, 65504.0, math.inf, -math.inf, -0.0])
def test_float_text_is_exact(value):
    op = make_op("vadds", dtype=0, repeat=1, mask=128, scalar=value)
    parsed = Parser(_ctx(), str(op)).parse_op()
    got = parsed.field("scalar")
    assert got == value and math.copysign(1, got) == math.copysign(1, value)
    # and through the generic form
    import io

    s = io.StringIO()
    Printer(stream=s, print_generic_format=True).print_op(op)
    assert Parser(_ctx(), s.getvalue()).parse_op().field("scalar") == value


def test_nan_roundtrips():
    op = make_op("vdup", dtype=0, repeat=1, mask=128, scalar=math.nan)
    assert "scalar=nan" in str(op)
    assert math.isnan(Parser(_ctx(), str(op)).parse_op().field("scalar"))


def test_exec_pipe_follows_isa():
    assert make_op("set_flag", src_pipe=4, dst_pipe=1).exec_pipe == isa.Pipe.MTE2
    assert make_op("wait_flag", src_pipe=4, dst_pipe=1).exec_pipe == isa.Pipe.V
    assert make_op("mmad").exec_pipe == isa.Pipe.M


def test_make_op_rejects_unknown_fields():
    with pytest.raises(KeyError):
        make_op("mmad", q=1)


def test_verifier_rejects_bad_values():
    with pytest.raises(VerifyException, match="repeat must be in 1..255"):
        make_op("vadd", repeat=0, mask=1).verify()


@pytest.mark.parametrize("mnemonic, fields, message", [
    ("loop_rotate", dict(space=0, size=64, copies=2), "space must be an on-chip buffer code [1, 2, 3, 4, 5] "
                                                      "(1 = l1, 2 = l0a, 3 = l0b, 4 = l0c, 5 = ub), got 0"),
    ("loop_rotate", dict(space=5, size=0, copies=2), "size must be >= 1, got 0"),
    ("block_offset_mod", dict(stride=64, modulo=0), "modulo must be >= 1, got 0"),
    ("block_offset_div", dict(stride=64, divisor=0), "divisor must be >= 1, got 0"),
    ("loop_rotate", dict(space=5, size=64, copies=0), "copies must be >= 1, got 0"),
    ("loop_rotate", dict(space=5, size=64, copies=2, step=-1), "step must be >= 0, got -1"),
    ("loop_rotate_event", dict(src_pipe=4, dst_pipe=4, copies=2), "src_pipe and dst_pipe must differ, both are MTE2"),
    ("loop_rotate_event", dict(src_pipe=4, dst_pipe=1, base=7, copies=2), "copies must be in 1..1, got 2"),
])
def test_rotation_operand_checks(mnemonic, fields, message):
    ins = isa.make(mnemonic, **fields)
    assert instr_error(ins.defn, ins.values) == message


def test_kernel_builds_and_prints():
    k = KernelOp("k", 2, 1, [make_op("copy_gm_to_ub", nburst=1, burst=32), make_op("pipe_barrier", pipe=6)])
    m = ModuleOp([k])
    m.verify()
    text = str(m)
    assert "ascend.kernel @k attributes {block_dim = 2 : i64, num_args = 1 : i64} {" in text
    again = Parser(_ctx(), text).parse_module()
    again.verify()
    assert str(again) == text
    assert [type(o) for o in k.instructions] == [ascend_ops.CopyGmToUbOp, ascend_ops.PipeBarrierOp]
    assert all(isinstance(o, AscendInstrOp) for o in k.instructions)
