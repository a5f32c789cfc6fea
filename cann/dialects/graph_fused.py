"""``graph.fused`` / ``graph.yield``: a group of graph ops that lowers to one kernel (UB fusion).

``%r = graph.fused "cube_epilogue" : tensor<...> { ...ops...; graph.yield %v : tensor<...> }``

The region holds the fused ops in order; they use values defined outside (the group's inputs and
constants) and the region's own results; ``graph.yield`` names the group's result. Kinds (recorded
in the IR; the lowering reads them):

* ``cube_epilogue``: a Conv/Gemm/MatMul followed by elementwise ops applied on the L0C -> UB path
  before the one write to GM;
* ``elementwise``: a chain of elementwise ops computed in UB, intermediates never written to GM;
* ``reduction``: elementwise producers and the Softmax (last axis) that consumes them, one kernel
  per row.
"""

from __future__ import annotations

from xdsl.dialects.builtin import StringAttr, TensorType
from xdsl.ir import Block, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    lazy_traits_def,
    operand_def,
    prop_def,
    region_def,
    result_def,
)
from xdsl.traits import HasParent, IsTerminator
from xdsl.utils.exceptions import VerifyException

FUSION_KINDS = ("cube_epilogue", "elementwise", "reduction")


@irdl_op_definition
class YieldOp(IRDLOperation):
    """``graph.yield %v : tensor<...>``: the result of the enclosing ``graph.fused``."""

    name = "graph.yield"
    value = operand_def(TensorType)
    traits = lazy_traits_def(lambda: (IsTerminator(), HasParent(FusedOp)))
    assembly_format = "$value attr-dict `:` type($value)"

    def __init__(self, value: SSAValue):
        super().__init__(operands=[value])


@irdl_op_definition
class FusedOp(IRDLOperation):
    """A fused group (see the module docstring); ``kind`` is one of ``FUSION_KINDS``."""

    name = "graph.fused"
    kind = prop_def(StringAttr)
    res = result_def(TensorType)
    body = region_def("single_block")
    assembly_format = "$kind attr-dict `:` type($res) $body"

    def __init__(self, kind: str, result_type: TensorType, ops: list):
        super().__init__(properties={"kind": StringAttr(kind)}, result_types=[result_type],
                         regions=[Region(Block(ops))])

    @property
    def ops(self) -> list:
        """The fused ops in order, without the terminator."""
        return [op for op in self.body.block.ops if not isinstance(op, YieldOp)]

    def verify_(self) -> None:
        if self.kind.data not in FUSION_KINDS:
            raise VerifyException(f"unknown fusion kind '{self.kind.data}' (known: {', '.join(FUSION_KINDS)})")
        last = self.body.block.last_op
        if not isinstance(last, YieldOp):
            raise VerifyException("graph.fused must end with graph.yield")
        if last.value.type != self.res.type:
            raise VerifyException(f"yields {last.value.type} but the result is {self.res.type}")
        if len(self.body.block.args):
            raise VerifyException("graph.fused takes no block arguments")
