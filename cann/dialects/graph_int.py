"""Graph ops of comparisons, boolean logic and rounding (``graph`` dialect; registered in
:mod:`cann.dialects.graph`).

Booleans are ``i1`` tensors (on the device: one byte 0/1 per element, docs/core-model.md).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from xdsl.dialects.builtin import IntegerAttr, StringAttr, TensorType, i1, i64
from xdsl.ir import SSAValue
from xdsl.irdl import IRDLOperation, ParsePropInAttrDict, irdl_op_definition, operand_def, prop_def, result_def, traits_def
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from cann.dialects.graph_base import _check_static, _elt, _expect_shape, _shape, broadcast_shapes, i64_attr, numpy_dtype

COMPARE_KINDS = ("eq", "lt", "gt", "le", "ge")
LOGICAL_KINDS = ("and", "or", "xor")
ROUND_MODES = ("floor", "ceil", "round")


def _bool_result(a: SSAValue, b: SSAValue | None = None) -> TensorType:
    shape = _shape(a) if b is None else broadcast_shapes(_shape(a), _shape(b))
    return TensorType(i1, shape if shape is not None else _shape(a))


def _is_bool(v: SSAValue) -> bool:
    return numpy_dtype(_elt(v)).kind == "b"


class _BoolBinary(IRDLOperation):
    KINDS: ClassVar[tuple[str, ...]] = ()
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    kind = prop_def(StringAttr)
    res = result_def(TensorType)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$lhs `,` $rhs attr-dict `:` `(` type($lhs) `,` type($rhs) `)` `->` type($res)"

    def __init__(self, lhs: SSAValue, rhs: SSAValue, kind: str):
        super().__init__(operands=[lhs, rhs], properties={"kind": StringAttr(kind)},
                         result_types=[_bool_result(lhs, rhs)])

    def verify_(self) -> None:
        _check_static(self)
        if self.kind.data not in self.KINDS:
            raise VerifyException(f"'{self.name}' kind must be one of {', '.join(self.KINDS)}, got '{self.kind.data}'")
        if _elt(self.lhs) != _elt(self.rhs):
            raise VerifyException(f"'{self.name}' operands must share one element type")
        if not _is_bool(self.res):
            raise VerifyException(f"'{self.name}' result must be boolean (i1)")
        shape = broadcast_shapes(_shape(self.lhs), _shape(self.rhs))
        if shape is None:
            raise VerifyException(f"'{self.name}' operands are not broadcastable")
        _expect_shape(self, shape)


@irdl_op_definition
class CompareOp(_BoolBinary):
    """``%c = graph.compare %a, %b {kind = "lt"} : (tensor<...xf32>, tensor<...xf32>) -> tensor<...xi1>``:
    ONNX Equal / Less / Greater / LessOrEqual / GreaterOrEqual (broadcasting)."""

    name = "graph.compare"
    KINDS: ClassVar[tuple[str, ...]] = COMPARE_KINDS


@irdl_op_definition
class LogicalOp(_BoolBinary):
    """``%c = graph.logical %a, %b {kind = "and"} : (tensor<...xi1>, tensor<...xi1>) -> tensor<...xi1>``:
    ONNX And / Or / Xor (broadcasting)."""

    name = "graph.logical"
    KINDS: ClassVar[tuple[str, ...]] = LOGICAL_KINDS

    def verify_(self) -> None:
        super().verify_()
        if not _is_bool(self.lhs):
            raise VerifyException("'graph.logical' operands must be boolean (i1)")


@irdl_op_definition
class NotOp(IRDLOperation):
    """``%c = graph.not %a : tensor<...xi1>``: ONNX Not."""

    name = "graph.not"
    x = operand_def(TensorType)
    res = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$x attr-dict `:` type($x) `->` type($res)"

    def __init__(self, x: SSAValue):
        super().__init__(operands=[x], result_types=[x.type])

    def verify_(self) -> None:
        _check_static(self)
        if not _is_bool(self.x) or self.x.type != self.res.type:
            raise VerifyException("'graph.not' takes and returns one boolean (i1) tensor type")


@irdl_op_definition
class RoundOp(IRDLOperation):
    """``%y = graph.round %x {mode = "floor"} : tensor<...>``: ONNX Floor / Ceil / Round (Round: half
    to even) on a float tensor."""

    name = "graph.round"
    x = operand_def(TensorType)
    mode = prop_def(StringAttr)
    res = result_def(TensorType)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$x attr-dict `:` type($x) `->` type($res)"

    def __init__(self, x: SSAValue, mode: str):
        super().__init__(operands=[x], properties={"mode": StringAttr(mode)}, result_types=[x.type])

    def verify_(self) -> None:
        _check_static(self)
        if self.mode.data not in ROUND_MODES:
            raise VerifyException(f"'graph.round' mode must be one of {', '.join(ROUND_MODES)}")
        if numpy_dtype(_elt(self.x)).kind != "f" or self.x.type != self.res.type:
            raise VerifyException("'graph.round' takes and returns one float tensor type")


@irdl_op_definition
class SignOp(IRDLOperation):
    """``%y = graph.sign %x : tensor<...>``: ONNX Sign (-1, 0 or 1 in x's dtype)."""

    name = "graph.sign"
    x = operand_def(TensorType)
    res = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$x attr-dict `:` type($x) `->` type($res)"

    def __init__(self, x: SSAValue):
        super().__init__(operands=[x], result_types=[x.type])

    def verify_(self) -> None:
        _check_static(self)
        if self.x.type != self.res.type:
            raise VerifyException("'graph.sign' result type must be the operand's")


@irdl_op_definition
class IsNaNOp(IRDLOperation):
    """``%c = graph.is_nan %x : tensor<...xf32> -> tensor<...xi1>``: ONNX IsNaN."""

    name = "graph.is_nan"
    x = operand_def(TensorType)
    res = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$x attr-dict `:` type($x) `->` type($res)"

    def __init__(self, x: SSAValue):
        super().__init__(operands=[x], result_types=[_bool_result(x)])

    def verify_(self) -> None:
        _check_static(self)
        if not _is_bool(self.res) or _shape(self.res) != _shape(self.x):
            raise VerifyException("'graph.is_nan' returns a boolean (i1) tensor of the operand's shape")


@irdl_op_definition
class IsInfOp(IRDLOperation):
    """``%c = graph.is_inf %x {detect_positive = 1, detect_negative = 1} : tensor<...xf32> -> tensor<...xi1>``:
    ONNX IsInf."""

    name = "graph.is_inf"
    x = operand_def(TensorType)
    detect_positive = prop_def(IntegerAttr)
    detect_negative = prop_def(IntegerAttr)
    res = result_def(TensorType)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$x attr-dict `:` type($x) `->` type($res)"

    def __init__(self, x: SSAValue, detect_positive: int = 1, detect_negative: int = 1):
        super().__init__(operands=[x], result_types=[_bool_result(x)],
                         properties={"detect_positive": i64_attr(detect_positive),
                                     "detect_negative": i64_attr(detect_negative)})

    def verify_(self) -> None:
        _check_static(self)
        if not _is_bool(self.res) or _shape(self.res) != _shape(self.x):
            raise VerifyException("'graph.is_inf' returns a boolean (i1) tensor of the operand's shape")


GRAPH_INT_OPS = (CompareOp, LogicalOp, NotOp, RoundOp, SignOp, IsNaNOp, IsInfOp)


@irdl_op_definition
class ArgReduceOp(IRDLOperation):
    """``%i = graph.arg_reduce %x {kind = "max", axis = 1, keepdims = 1, select_last_index = 0} :
    tensor<...> -> tensor<...xi64>``: ONNX ArgMax / ArgMin (int64 indices along ``axis``)."""

    name = "graph.arg_reduce"
    x = operand_def(TensorType)
    kind = prop_def(StringAttr)
    axis = prop_def(IntegerAttr)
    keepdims = prop_def(IntegerAttr)
    select_last_index = prop_def(IntegerAttr)
    res = result_def(TensorType)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$x attr-dict `:` type($x) `->` type($res)"

    def __init__(self, x: SSAValue, kind: str, axis: int, keepdims: int, select_last_index: int):
        s = _shape(x)
        shape = tuple(1 if i == axis else d for i, d in enumerate(s) if keepdims or i != axis)
        super().__init__(operands=[x], result_types=[TensorType(i64, shape)],
                         properties={"kind": StringAttr(kind), "axis": i64_attr(axis), "keepdims": i64_attr(keepdims),
                                     "select_last_index": i64_attr(select_last_index)})

    def verify_(self) -> None:
        _check_static(self)
        if self.kind.data not in ("max", "min"):
            raise VerifyException("'graph.arg_reduce' kind must be max or min")
        s, ax = _shape(self.x), self.axis.value.data
        if not 0 <= ax < len(s):
            raise VerifyException(f"'graph.arg_reduce' axis {ax} out of range for rank {len(s)}")
        keep = self.keepdims.value.data
        _expect_shape(self, tuple(1 if i == ax else d for i, d in enumerate(s) if keep or i != ax))
        if numpy_dtype(_elt(self.res)) != np.int64:
            raise VerifyException("'graph.arg_reduce' result must be int64")


@irdl_op_definition
class ModOp(IRDLOperation):
    """``%r = graph.mod %a, %b {fmod = 0} : (tensor<...>, tensor<...>) -> tensor<...>``: ONNX Mod
    (``fmod`` 0: the sign of the divisor, integers only; 1: the sign of the dividend)."""

    name = "graph.mod"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    fmod = prop_def(IntegerAttr)
    res = result_def(TensorType)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$lhs `,` $rhs attr-dict `:` `(` type($lhs) `,` type($rhs) `)` `->` type($res)"

    def __init__(self, lhs: SSAValue, rhs: SSAValue, fmod: int):
        shape = broadcast_shapes(_shape(lhs), _shape(rhs))
        super().__init__(operands=[lhs, rhs], properties={"fmod": i64_attr(fmod)},
                         result_types=[TensorType(_elt(lhs), shape if shape is not None else _shape(lhs))])

    def verify_(self) -> None:
        _check_static(self)
        if _elt(self.lhs) != _elt(self.rhs) or _elt(self.res) != _elt(self.lhs):
            raise VerifyException("'graph.mod' operands and result must share one element type")
        shape = broadcast_shapes(_shape(self.lhs), _shape(self.rhs))
        if shape is None:
            raise VerifyException("'graph.mod' operands are not broadcastable")
        _expect_shape(self, shape)


GRAPH_INT_OPS = GRAPH_INT_OPS + (ArgReduceOp, ModOp)
