"""A small builder of ``graph`` ops for the training-program passes: each method creates one op
before a fixed insertion point, locates it at ``NameLoc(<prefix>/<name>)`` and returns its result.

Shapes are static tuples; float scalars become rank-0 ``graph.constant`` values (as the ONNX
importer writes them), broadcast by the binary ops.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import TensorType, i1
from xdsl.ir import Block, Operation, SSAValue

from cann.dialects import graph
from cann.dialects.graph_int import CompareOp
from cann.dialects.graph_base import _shape, numpy_dtype


def shape(v: SSAValue) -> tuple[int, ...]:
    """The static shape of a tensor value."""
    return tuple(_shape(v))


class GraphBuilder:
    """Appends ``graph`` ops to ``block`` before ``before`` (None: at the end)."""

    def __init__(self, block: Block, before: Operation | None, prefix: str):
        self.block, self.before, self.prefix = block, before, prefix
        self._n = 0

    def op(self, op: Operation, name: str = "") -> SSAValue:
        self._n += 1
        op.location = graph.name_loc(f"{self.prefix}/{name or op.name.split('.')[-1]}_{self._n}")
        if self.before is None:
            self.block.add_op(op)
        else:
            self.block.insert_op_before(op, self.before)
        return op.results[0]

    # -- values ------------------------------------------------------------------------------
    def const(self, value, dtype=np.float32, name: str = "const") -> SSAValue:
        return self.op(graph.ConstantOp(graph.dense_attr(np.asarray(value, dtype=dtype))), name)

    def scalar_like(self, v: SSAValue, value: float) -> SSAValue:
        return self.const(np.asarray(value, dtype=numpy_dtype(v.type.element_type)))

    # -- elementwise -------------------------------------------------------------------------
    def add(self, a, b): return self.op(graph.AddOp(a, b))
    def sub(self, a, b): return self.op(graph.SubOp(a, b))
    def mul(self, a, b): return self.op(graph.MulOp(a, b))
    def div(self, a, b): return self.op(graph.DivOp(a, b))
    def neg(self, a): return self.op(graph.NegOp(a))
    def exp(self, a): return self.op(graph.ExpOp(a))
    def sqrt(self, a): return self.op(graph.SqrtOp(a))
    def erf(self, a): return self.op(graph.ErfOp(a))

    def scale(self, a: SSAValue, k: float) -> SSAValue:
        return a if k == 1.0 else self.mul(a, self.scalar_like(a, k))

    def compare(self, a, b, kind: str) -> SSAValue:
        return self.op(CompareOp(a, b, kind))

    def where(self, cond, a, b) -> SSAValue:
        return self.op(graph.WhereOp(cond, a, b))

    def cast(self, a, to) -> SSAValue:
        return self.op(graph.CastOp(a, to))

    # -- layout ------------------------------------------------------------------------------
    def reshape(self, a: SSAValue, s: Sequence[int]) -> SSAValue:
        return a if shape(a) == tuple(s) else self.op(graph.ReshapeOp(a, list(s)))

    def transpose(self, a: SSAValue, perm: Sequence[int]) -> SSAValue:
        return a if list(perm) == list(range(len(perm))) else self.op(graph.TransposeOp(a, list(perm)))

    def expand(self, a: SSAValue, s: Sequence[int]) -> SSAValue:
        return a if shape(a) == tuple(s) else self.op(graph.ExpandOp(a, list(s)))

    def reduce(self, a: SSAValue, kind: str, axes: Sequence[int], keepdims: bool = True) -> SSAValue:
        """``graph.reduce``; a sum or mean of a 4-D tensor over H and W (and more axes) first takes
        the mean over (2, 3), which lowers to the NC1HWC0 global-average-pool kernel instead of an
        ND transpose and reduction (BatchNorm's statistics and their gradients)."""
        axes = sorted(set(axes))
        if not axes:
            return a
        s = shape(a)
        if kind in ("sum", "mean") and len(s) == 4 and {2, 3} <= set(axes) and \
                numpy_dtype(a.type.element_type).kind == "f":
            hw = self.op(graph.ReduceOp(a, "mean", [2, 3], True))
            if kind == "sum":
                hw = self.scale(hw, float(s[2] * s[3]))
            rest = [ax for ax in axes if ax not in (2, 3)]
            y = self.op(graph.ReduceOp(hw, kind, rest, True)) if rest else hw
            return y if keepdims else self.reshape(y, [d for i, d in enumerate(s) if i not in axes])
        return self.op(graph.ReduceOp(a, kind, axes, keepdims))

    def slice(self, a: SSAValue, axis: int, start: int, end: int) -> SSAValue:
        s = shape(a)
        starts, ends = [0] * len(s), list(s)
        starts[axis], ends[axis] = start, end
        return self.op(graph.SliceOp(a, starts, ends, [1] * len(s)))

    def concat(self, vs: Sequence[SSAValue], axis: int) -> SSAValue:
        return vs[0] if len(vs) == 1 else self.op(graph.ConcatOp(list(vs), axis))

    def matmul(self, a, b) -> SSAValue:
        return self.op(graph.MatMulOp(a, b))

    def gemm(self, a, b, *, trans_a=0, trans_b=0, alpha=1.0) -> SSAValue:
        sa, sb = shape(a), shape(b)
        m = sa[1] if trans_a else sa[0]
        n = sb[0] if trans_b else sb[1]
        return self.op(graph.GemmOp(a, b, None, TensorType(a.type.element_type, [m, n]), alpha=alpha,
                                    trans_a=trans_a, trans_b=trans_b))

    def unbroadcast(self, g: SSAValue, target: Sequence[int]) -> SSAValue:
        """``g`` summed over the axes a broadcast to its shape added or stretched, reshaped to ``target``."""
        gs, target = shape(g), tuple(target)
        if gs == target:
            return g
        lead = len(gs) - len(target)
        axes = list(range(lead)) + [lead + i for i, d in enumerate(target) if d == 1 and gs[lead + i] != 1]
        return self.reshape(self.reduce(g, "sum", axes, True), target)

    def bool_type(self):
        return i1


def numel(s: Sequence[int]) -> int:
    return math.prod(s)
