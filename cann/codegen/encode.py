"""Encode ``ascend`` kernels to instruction code (the ``kernels`` section of an ``.om``).

The encoding is ``cann.hw.isa.encode`` of the kernel's instructions in program order; this module
only walks the IR.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp

from cann.dialects.ascend import KernelOp, kernels, op_to_instr
from cann.errors import CannError
from cann.hw import isa


def kernel_code(kernel: KernelOp) -> bytes:
    """The encoded instruction stream of one ``ascend.kernel``.

    Raises:
        CannError: the kernel holds something that is not an ascend instruction.
    """
    instrs = []
    for i, op in enumerate(kernel.body.block.ops if kernel.body.blocks else ()):
        try:
            instrs.append(op_to_instr(op))
        except TypeError as e:
            raise CannError(f"@{kernel.kernel_name}", f"instruction {i}: {e}") from None
    return isa.encode(instrs)


def module_kernels(module: ModuleOp) -> list[tuple[str, int, int, bytes]]:
    """``(name, block_dim, num_args, code)`` of every kernel of ``module``, in order.

    The tuple has the field order of ``cann.codegen.om.Kernel`` (``om.Kernel(*t)``).
    """
    return [
        (k.kernel_name, k.block_dim.value.data, k.num_args.value.data, kernel_code(k))
        for k in kernels(module)
    ]
