"""Disassemble instruction code: as a listing, or back into parseable ``ascend`` IR.

``disassemble_code`` gives one line per instruction, ``  <index>: <pipe> <asm>`` (the pipe that
executes it, as ``isa.Instr.pipe``; the assembly as ``isa.Instr.asm``)::

      0: MTE2 copy_gm_to_ub dst=0, src_arg=0, src=0, nburst=1, burst=256, src_stride=0, dst_stride=0
      1: S pipe_barrier pipe=6

``kernel_text_from_code`` gives an ``ascend.kernel`` op that ``cann-opt`` parses, so the kernels of
an ``.om`` can be inspected and re-run through passes.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp

from cann.dialects.ascend import KernelOp, instr_to_op
from cann.errors import CannError
from cann.hw import isa


def decode_code(code: bytes, where: str = "<code>") -> list[isa.Instr]:
    """``isa.decode``, with a corrupt stream reported as a ``CannError`` at ``where``."""
    try:
        return isa.decode(code)
    except ValueError as e:
        raise CannError(where, f"corrupt instruction code: {e}") from None


def disassemble_code(code: bytes, where: str = "<code>") -> str:
    """One line per instruction: ``  <index>: <pipe name> <asm>`` (newline-terminated)."""
    return "".join(f"  {i}: {ins.pipe.name} {ins.asm()}\n" for i, ins in enumerate(decode_code(code, where)))


def _inferred_num_args(instrs: list[isa.Instr]) -> int:
    args = [v for ins in instrs for f, v in zip(ins.defn.field_names, ins.values) if f.endswith("_arg")]
    return max(args) + 1 if args else 0


def kernel_op_from_code(name: str, code: bytes, *, block_dim: int = 1, num_args: int | None = None) -> KernelOp:
    """An ``ascend.kernel`` holding the decoded instructions (num_args inferred from ``*_arg`` if None)."""
    instrs = decode_code(code, f"@{name}")
    if num_args is None:
        num_args = _inferred_num_args(instrs)
    return KernelOp(name, block_dim, num_args, [instr_to_op(ins) for ins in instrs])


def kernel_text_from_code(name: str, code: bytes, *, block_dim: int = 1, num_args: int | None = None) -> str:
    """The ``ascend.kernel`` text of decoded ``code`` (parseable by ``cann-opt``)."""
    return str(kernel_op_from_code(name, code, block_dim=block_dim, num_args=num_args)) + "\n"


def module_from_kernels(kernels) -> ModuleOp:
    """A module of ``ascend.kernel`` ops from ``(name, block_dim, num_args, code)`` tuples or
    ``cann.codegen.om.Kernel`` records (e.g. ``read_om(path).kernels``)."""
    ops = []
    for k in kernels:
        name, block_dim, num_args, code = (k.name, k.block_dim, k.num_args, k.code) if hasattr(k, "code") else k
        ops.append(kernel_op_from_code(name, code, block_dim=block_dim, num_args=num_args))
    return ModuleOp(ops)
