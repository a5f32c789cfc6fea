"""The ``ascend`` dialect: one op per AI Core instruction, generated from ``cann.hw.isa``.

See :mod:`cann.dialects.ascend.ops` for the textual forms.
"""

from xdsl.ir import Dialect

from cann.dialects.ascend.checks import instr_error, limits
from cann.dialects.ascend.ops import (
    INSTRUCTION_OPS,
    OP_BY_MNEMONIC,
    SYNC_MNEMONICS,
    AscendInstrOp,
    KernelOp,
    instr_to_op,
    is_sync,
    kernels,
    make_op,
    op_to_instr,
)

Ascend = Dialect("ascend", [KernelOp, *INSTRUCTION_OPS], [])

__all__ = [
    "Ascend",
    "AscendInstrOp",
    "INSTRUCTION_OPS",
    "KernelOp",
    "OP_BY_MNEMONIC",
    "SYNC_MNEMONICS",
    "instr_error",
    "instr_to_op",
    "is_sync",
    "kernels",
    "limits",
    "make_op",
    "op_to_instr",
]
