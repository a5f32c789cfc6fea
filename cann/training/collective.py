"""The cross-rank sum of data-parallel training programs (issue 16 item 3).

``train.cross_rank_sum`` marks a value whose result is the sum of that value over every rank of the
data-parallel group (MPI allreduce, ``MPI.SUM``). It never reaches the compiler:
:func:`cann.training.data_parallel.split_program` cuts the program at these ops and the host runs the
allreduce between the pieces. Its gradient rule makes SyncBatchNorm's backward exact: if ``y = sum_r
x_r`` and each rank ``r`` holds ``dL/dy_r`` for its copy of ``y``, then ``dL/dx_r = sum_r' dL/dy_r'``, again a
cross-rank sum.

``kind``: ``stat`` (BatchNorm statistics and their backward: cut where the value is ready) or ``grad``
(a parameter's gradient: all of them are reduced together after the backward pass, in segments).
"""

from __future__ import annotations

from xdsl.dialects.builtin import StringAttr, TensorType
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, prop_def, result_def
from xdsl.ir import SSAValue

from cann.training.autodiff import gradient_rule
from cann.training.builder import GraphBuilder

KINDS = ("stat", "grad")


@irdl_op_definition
class CrossRankSumOp(IRDLOperation):
    """``res = sum over ranks of x`` (same shape and type as ``x``)."""

    name = "train.cross_rank_sum"
    x = operand_def(TensorType)
    res = result_def(TensorType)
    kind = prop_def(StringAttr)

    def __init__(self, x: SSAValue, kind: str = "stat"):
        assert kind in KINDS, kind
        super().__init__(operands=[x], result_types=[x.type], properties={"kind": StringAttr(kind)})


def cross_rank_sum(b: GraphBuilder, x: SSAValue, kind: str = "stat") -> SSAValue:
    return b.op(CrossRankSumOp(x, kind), "cross_rank_sum")


@gradient_rule("train.cross_rank_sum")
def _cross_rank_sum(b, op, g):
    return (cross_rank_sum(b, g, "stat"),)
