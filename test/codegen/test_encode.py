"""Encoder and disassembler: text -> code -> decode gives back the same instructions."""

from __future__ import annotations

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.parser import Parser

from cann.codegen import om
from cann.codegen.disasm import (
    disassemble_code,
    kernel_op_from_code,
    kernel_text_from_code,
    module_from_kernels,
)
from cann.codegen.encode import kernel_code, module_kernels
from cann.dialects.ascend import Ascend, KernelOp, op_to_instr
from cann.errors import CannError
from cann.hw import isa

TEXT = """
ascend.kernel @vec_add attributes {block_dim = 4 : i64, num_args = 3 : i64} {
  ascend.copy_gm_to_ub dst=0, src_arg=0, src=0, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.copy_gm_to_ub dst=256, src_arg=1, src=0, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.pipe_barrier pipe=6
  ascend.vadds dtype=0, dst=512, src0=0, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=0.1
  ascend.set_flag src_pipe=1, dst_pipe=5, event=3
  ascend.wait_flag src_pipe=1, dst_pipe=5, event=3
  ascend.copy_ub_to_gm dst_arg=2, dst=0, src=512, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.pipe_barrier pipe=6
}
ascend.kernel @mm attributes {block_dim = 1 : i64, num_args = 0 : i64} {
  ascend.mmad dtype=0, dst=0, a=0, b=0, m=16, k=16, n=16, init=1
}
ascend.kernel @empty attributes {block_dim = 1 : i64, num_args = 0 : i64} {
}
"""


def _parse(text: str) -> ModuleOp:
    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(Ascend)
    m = Parser(ctx, text).parse_module()
    m.verify()
    return m


def _instrs(k: KernelOp) -> list[isa.Instr]:
    return [op_to_instr(op) for op in k.instructions]


def test_encode_decode_gives_identical_ops():
    m = _parse(TEXT)
    ks = [op for op in m.ops if isinstance(op, KernelOp)]
    got = module_kernels(m)
    assert [(n, b, a) for n, b, a, _ in got] == [("vec_add", 4, 3), ("mm", 1, 0), ("empty", 1, 0)]
    for k, (_, _, _, code) in zip(ks, got):
        assert code == kernel_code(k)
        assert isa.decode(code) == _instrs(k)
    assert got[2][3] == b""
    assert len(got[1][3]) == isa.BY_MNEMONIC["mmad"].struct.size
    # om.Kernel has the same field order
    assert om.Kernel(*got[0]).block_dim == 4


def test_code_to_text_to_code_is_identical():
    for name, block_dim, num_args, code in module_kernels(_parse(TEXT)):
        text = kernel_text_from_code(name, code, block_dim=block_dim, num_args=num_args)
        again = module_kernels(_parse(text))
        assert again == [(name, block_dim, num_args, code)]


def test_kernel_text_from_code():
    code = module_kernels(_parse(TEXT))[0][3]
    text = kernel_text_from_code("k", code)
    # num_args inferred from the *_arg fields
    assert text.splitlines()[0] == "ascend.kernel @k attributes {block_dim = 1 : i64, num_args = 3 : i64} {"
    assert text.splitlines()[1] == (
        "  ascend.copy_gm_to_ub dst=0, src_arg=0, src=0, nburst=1, burst=256, src_stride=0, dst_stride=0")
    assert "scalar=1.000000e-01" in text
    assert text.rstrip().endswith("}")
    assert kernel_op_from_code("k", b"").instructions == []


def test_disassemble_code():
    code = module_kernels(_parse(TEXT))[0][3]
    lines = disassemble_code(code).splitlines()
    assert lines == [
        "  0: MTE2 copy_gm_to_ub dst=0, src_arg=0, src=0, nburst=1, burst=256, src_stride=0, dst_stride=0",
        "  1: MTE2 copy_gm_to_ub dst=256, src_arg=1, src=0, nburst=1, burst=256, src_stride=0, dst_stride=0",
        "  2: S pipe_barrier pipe=6",
        "  3: V vadds dtype=0, dst=512, src0=0, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, "
        "dst_rep=8, src0_rep=8, src1_rep=8, scalar=0.1",
        "  4: V set_flag src_pipe=1, dst_pipe=5, event=3",
        "  5: MTE3 wait_flag src_pipe=1, dst_pipe=5, event=3",
        "  6: MTE3 copy_ub_to_gm dst_arg=2, dst=0, src=512, nburst=1, burst=256, src_stride=0, dst_stride=0",
        "  7: S pipe_barrier pipe=6",
    ]
    assert disassemble_code(b"") == ""


def test_module_from_om_kernels():
    ks = [om.Kernel(*t) for t in module_kernels(_parse(TEXT))]
    m = module_from_kernels(ks)
    m.verify()
    assert [tuple(t) for t in module_kernels(m)] == [(k.name, k.block_dim, k.num_args, k.code) for k in ks]


@pytest.mark.parametrize("code, msg", [
    (b"\xff\xff", "unknown opcode 65535 at byte 0"),
    (b"\x01", "truncated instruction at byte 0"),
    (isa.encode([isa.make("pipe_barrier", pipe=6)])[:-1], "truncated pipe_barrier at byte 0"),
])
def test_corrupt_code_is_a_user_error(code, msg):
    with pytest.raises(CannError, match=msg):
        disassemble_code(code, where="model.om: kernel 0")
    with pytest.raises(CannError, match="@k: corrupt instruction code"):
        kernel_text_from_code("k", code)
