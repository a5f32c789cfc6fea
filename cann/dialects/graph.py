"""The ``graph`` dialect: tensor-level, value-semantics operators normalized from ONNX.

Every op works on builtin ``TensorType`` values with static shapes. Semantic data lives in
properties; integer lists are ``DenseArrayBase`` i64 (``array<i64: 1, 1>``), float scalars
``FloatAttr`` f32, integer scalars ``IntegerAttr`` i64. Properties print in the op's attribute
dictionary, e.g.::

    %y = graph.conv2d %x, %w, %b {dilations = array<i64: 1, 1>, group = 1 : i64,
           pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>}
           : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32>

Large constants are never printed inline: see :mod:`cann.dialects.weights` and ``docs/ir-text.md``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import (
    I64,
    BFloat16Type,
    BytesAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    DenseResourceAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    NameLoc,
    NoneAttr,
    Signedness,
    StringAttr,
    TensorType,
    f32,
    i64,
)
from xdsl.ir import Attribute, Dialect, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import ConstantLike, Pure
from xdsl.utils.exceptions import VerifyException

from cann.dialects.graph_base import (  # noqa: F401  (re-exported: the graph dialect's helpers)
    _shape,
    _elt,
    _ints,
    i64_array,
    i64_attr,
    f32_attr,
    _check_static,
    _check_same_elt,
    _check_len,
    _check_rank,
    _expect_shape,
    broadcast_shapes,
    pool_output_size,
    _check_window_fits,
    numpy_dtype,
    element_type,
)


@irdl_op_definition
class ConstantOp(IRDLOperation):
    """``%c = graph.constant dense<...> : tensor<...>`` (or ``dense_resource<key> : tensor<...>``)."""

    name = "graph.constant"
    value = prop_def(base(DenseIntOrFPElementsAttr) | base(DenseResourceAttr))
    res = result_def(TensorType)
    traits = traits_def(Pure(), ConstantLike())

    def __init__(self, value: DenseIntOrFPElementsAttr | DenseResourceAttr):
        super().__init__(properties={"value": value}, result_types=[value.type])

    def verify_(self) -> None:
        if self.value.type != self.res.type:
            raise VerifyException(f"'graph.constant' value type {self.value.type} does not match result type {self.res.type}")
        _check_static(self)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_attribute(self.value)
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> ConstantOp:
        pos = parser.pos
        value = parser.parse_attribute()
        if not isinstance(value, (DenseIntOrFPElementsAttr, DenseResourceAttr)):
            parser.raise_error("graph.constant expects a dense or dense_resource attribute", pos, parser.pos)
        if not isinstance(value.type, TensorType):
            parser.raise_error("graph.constant expects a tensor-typed value", pos, parser.pos)
        attrs = parser.parse_optional_attr_dict()
        op = cls(value)
        op.attributes.update(attrs)
        return op


def constant_value(op: ConstantOp) -> np.ndarray:
    """The constant's value as a numpy array of the result's shape and dtype (a zero-copy view).

    A ``dense_resource`` value must first be resolved with :func:`cann.dialects.weights.resolve_weights`.
    """
    value = op.value
    if isinstance(value, DenseResourceAttr):
        from cann.errors import CannError

        raise CannError(
            value.resource_handle.data,
            "constant is an unresolved dense_resource (load the module with its weights file)",
        )
    t = value.type
    dtype = numpy_dtype(t.get_element_type())
    shape = tuple(t.get_shape())
    raw = value.data.data
    n = math.prod(shape)
    if dtype == np.bool_:
        arr = np.frombuffer(raw, dtype=np.int8).astype(np.bool_)
    else:
        arr = np.frombuffer(raw, dtype=dtype)
    if arr.size == 1 and n != 1:  # splat
        return np.broadcast_to(arr.reshape(()), shape)
    return arr.reshape(shape)


def dense_attr(array: np.ndarray) -> DenseIntOrFPElementsAttr:
    array = np.asarray(array)
    t = TensorType(element_type(array.dtype), array.shape)
    if array.dtype == np.bool_:
        array = array.astype(np.int8)
    if array.size > 1 and all(st == 0 for st in array.strides):  # a broadcast scalar: store a splat
        array = array.reshape(-1)[:1]
    return DenseIntOrFPElementsAttr(t, BytesAttr(np.ascontiguousarray(array).tobytes()))


def make_constant(array: np.ndarray, name_hint: str) -> ConstantOp:
    """A ``graph.constant`` holding ``array`` (copied as bytes), located at ``NameLoc(name_hint)``."""
    op = ConstantOp(dense_attr(array))
    if name_hint:
        op.location = name_loc(name_hint)
    return op


def name_loc(name: str) -> NameLoc:
    """``loc("name")``: the location of an op imported from a named ONNX node or tensor."""
    return NameLoc(StringAttr(name), NoneAttr())




class _ElementwiseUnary(IRDLOperation):
    T: ClassVar = VarConstraint("T", base(TensorType))
    x = operand_def(T)
    res = result_def(T)
    traits = traits_def(Pure())
    assembly_format = "$x attr-dict `:` type($res)"

    def __init__(self, x: SSAValue):
        super().__init__(operands=[x], result_types=[x.type])

    def verify_(self) -> None:
        _check_static(self)


@irdl_op_definition
class ReluOp(_ElementwiseUnary):
    """``%y = graph.relu %x : tensor<...>``"""

    name = "graph.relu"


class _Binary(IRDLOperation):
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    res = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$lhs `,` $rhs attr-dict `:` `(` type($lhs) `,` type($rhs) `)` `->` type($res)"

    def __init__(self, lhs: SSAValue, rhs: SSAValue, result_type: Attribute | None = None):
        if result_type is None:
            shape = broadcast_shapes(_shape(lhs), _shape(rhs))
            result_type = TensorType(_elt(lhs), shape if shape is not None else _shape(lhs))
        super().__init__(operands=[lhs, rhs], result_types=[result_type])

    def verify_(self) -> None:
        _check_static(self)
        _check_same_elt(self)
        shape = broadcast_shapes(_shape(self.lhs), _shape(self.rhs))
        if shape is None:
            raise VerifyException(
                f"'{self.name}' operands are not broadcastable: {self.lhs.type} and {self.rhs.type}"
            )
        _expect_shape(self, shape)


@irdl_op_definition
class AddOp(_Binary):
    """``%z = graph.add %x, %y : (tensor<...>, tensor<...>) -> tensor<...>``"""

    name = "graph.add"


@irdl_op_definition
class SubOp(_Binary):
    name = "graph.sub"


@irdl_op_definition
class MulOp(_Binary):
    name = "graph.mul"


@irdl_op_definition
class DivOp(_Binary):
    name = "graph.div"


@irdl_op_definition
class Conv2DOp(IRDLOperation):
    """``graph.conv2d %x, %w[, %b] {dilations, group, pads, strides} : (...) -> ...``; pads = top, left, bottom, right."""

    name = "graph.conv2d"
    x = operand_def(TensorType)
    w = operand_def(TensorType)
    b = opt_operand_def(TensorType)
    res = result_def(TensorType)
    strides = prop_def(DenseArrayBase[I64])
    pads = prop_def(DenseArrayBase[I64])
    dilations = prop_def(DenseArrayBase[I64])
    group = prop_def(IntegerAttr[I64])
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = (
        "$x `,` $w (`,` $b^)? attr-dict `:` `(` type($x) `,` type($w) (`,` type($b)^)? `)` `->` type($res)"
    )

    def __init__(self, x, w, b, result_type, *, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), group=1):
        super().__init__(
            operands=[x, w, b],
            result_types=[result_type],
            properties={
                "strides": i64_array(strides),
                "pads": i64_array(pads),
                "dilations": i64_array(dilations),
                "group": i64_attr(group),
            },
        )

    def verify_(self) -> None:
        _check_static(self)
        _check_same_elt(self)
        n, c, h, w = _check_rank(self, "input", self.x, 4)
        o, ci, kh, kw = _check_rank(self, "weight", self.w, 4)
        s = _check_len(self, "strides", 2)
        p = _check_len(self, "pads", 4)
        d = _check_len(self, "dilations", 2)
        g = self.group.value.data
        if g < 1 or c % g or o % g:
            raise VerifyException(f"'graph.conv2d' group {g} must divide input channels {c} and output channels {o}")
        if ci * g != c:
            raise VerifyException(f"'graph.conv2d' weight expects {ci * g} input channels (group {g}), input has {c}")
        if min(s) < 1 or min(d) < 1 or min(p) < 0:
            raise VerifyException("'graph.conv2d' expects positive strides and dilations and non-negative pads")
        if self.b is not None and _shape(self.b) != (o,):
            raise VerifyException(f"'graph.conv2d' bias must have shape {o}, got {'x'.join(map(str, _shape(self.b)))}")
        ho = pool_output_size(h, kh, s[0], p[0], p[2], d[0], False)
        wo = pool_output_size(w, kw, s[1], p[1], p[3], d[1], False)
        _check_window_fits(self, (h, w), (kh, kw), p, d, (ho, wo))
        _expect_shape(self, (n, o, ho, wo))


@irdl_op_definition
class BatchNormOp(IRDLOperation):
    """``graph.batch_norm %x, %scale, %bias, %mean, %var {epsilon = 1e-05 : f32} : (...) -> ...`` (inference)."""

    name = "graph.batch_norm"
    x = operand_def(TensorType)
    scale = operand_def(TensorType)
    bias = operand_def(TensorType)
    mean = operand_def(TensorType)
    var = operand_def(TensorType)
    res = result_def(TensorType)
    epsilon = prop_def(FloatAttr)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = (
        "$x `,` $scale `,` $bias `,` $mean `,` $var attr-dict `:` "
        "`(` type($x) `,` type($scale) `,` type($bias) `,` type($mean) `,` type($var) `)` `->` type($res)"
    )

    def __init__(self, x, scale, bias, mean, var, epsilon: float = 1e-5):
        super().__init__(operands=[x, scale, bias, mean, var], result_types=[x.type],
                         properties={"epsilon": f32_attr(epsilon)})

    def verify_(self) -> None:
        _check_static(self)
        _check_same_elt(self)
        xs = _shape(self.x)
        if len(xs) < 2:
            raise VerifyException(f"'graph.batch_norm' expects input of rank >= 2, got {len(xs)}")
        for what in ("scale", "bias", "mean", "var"):
            if _shape(getattr(self, what)) != (xs[1],):
                raise VerifyException(f"'graph.batch_norm' expects {what} of shape {xs[1]} (channels)")
        if self.res.type != self.x.type:
            raise VerifyException("'graph.batch_norm' result type must equal the input type")


class _Pool(IRDLOperation):
    x = operand_def(TensorType)
    res = result_def(TensorType)
    kernel_shape = prop_def(DenseArrayBase[I64])
    strides = prop_def(DenseArrayBase[I64])
    pads = prop_def(DenseArrayBase[I64])
    dilations = prop_def(DenseArrayBase[I64])
    ceil_mode = prop_def(IntegerAttr[I64])
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$x attr-dict `:` type($x) `->` type($res)"

    def verify_(self) -> None:
        _check_static(self)
        _check_same_elt(self)
        n, c, h, w = _check_rank(self, "input", self.x, 4)
        k = _check_len(self, "kernel_shape", 2)
        s = _check_len(self, "strides", 2)
        p = _check_len(self, "pads", 4)
        d = _check_len(self, "dilations", 2)
        if min(k) < 1 or min(s) < 1 or min(d) < 1 or min(p) < 0:
            raise VerifyException(f"'{self.name}' expects positive kernel, strides, dilations and non-negative pads")
        cm = self.ceil_mode.value.data
        if cm not in (0, 1):
            raise VerifyException(f"'{self.name}' expects ceil_mode 0 or 1")
        ho = pool_output_size(h, k[0], s[0], p[0], p[2], d[0], bool(cm))
        wo = pool_output_size(w, k[1], s[1], p[1], p[3], d[1], bool(cm))
        _check_window_fits(self, (h, w), k, p, d, (ho, wo))
        _expect_shape(self, (n, c, ho, wo))


def _pool_props(kernel_shape, strides, pads, dilations, ceil_mode) -> dict[str, Attribute]:
    return {
        "kernel_shape": i64_array(kernel_shape),
        "strides": i64_array(strides),
        "pads": i64_array(pads),
        "dilations": i64_array(dilations),
        "ceil_mode": i64_attr(ceil_mode),
    }


@irdl_op_definition
class MaxPoolOp(_Pool):
    """``graph.max_pool %x {ceil_mode, dilations, kernel_shape, pads, strides} : tensor<...> -> tensor<...>``"""

    name = "graph.max_pool"

    def __init__(self, x, result_type, *, kernel_shape, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), ceil_mode=0):
        super().__init__(operands=[x], result_types=[result_type],
                         properties=_pool_props(kernel_shape, strides, pads, dilations, ceil_mode))


@irdl_op_definition
class AvgPoolOp(_Pool):
    """``graph.avg_pool %x {ceil_mode, count_include_pad, dilations, kernel_shape, pads, strides} : ... -> ...``"""

    name = "graph.avg_pool"
    count_include_pad = prop_def(IntegerAttr[I64])

    def __init__(self, x, result_type, *, kernel_shape, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1),
                 ceil_mode=0, count_include_pad=0):
        props = _pool_props(kernel_shape, strides, pads, dilations, ceil_mode)
        props["count_include_pad"] = i64_attr(count_include_pad)
        super().__init__(operands=[x], result_types=[result_type], properties=props)

    def verify_(self) -> None:
        super().verify_()
        if self.count_include_pad.value.data not in (0, 1):
            raise VerifyException("'graph.avg_pool' expects count_include_pad 0 or 1")


@irdl_op_definition
class GlobalAvgPoolOp(IRDLOperation):
    """``graph.global_avg_pool %x : tensor<NxCxHxW> -> tensor<NxCx1x1>``"""

    name = "graph.global_avg_pool"
    x = operand_def(TensorType)
    res = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$x attr-dict `:` type($x) `->` type($res)"

    def __init__(self, x: SSAValue):
        s = _shape(x)
        super().__init__(operands=[x], result_types=[TensorType(_elt(x), (*s[:2], *([1] * (len(s) - 2))))])

    def verify_(self) -> None:
        _check_static(self)
        _check_same_elt(self)
        s = _shape(self.x)
        if len(s) < 3:
            raise VerifyException(f"'graph.global_avg_pool' expects input of rank >= 3, got {len(s)}")
        _expect_shape(self, (*s[:2], *([1] * (len(s) - 2))))


@irdl_op_definition
class GemmOp(IRDLOperation):
    """``graph.gemm %a, %b[, %c] {alpha, beta, trans_a, trans_b} : (...) -> tensor<MxN>``"""

    name = "graph.gemm"
    a = operand_def(TensorType)
    b = operand_def(TensorType)
    c = opt_operand_def(TensorType)
    res = result_def(TensorType)
    alpha = prop_def(FloatAttr)
    beta = prop_def(FloatAttr)
    trans_a = prop_def(IntegerAttr[I64])
    trans_b = prop_def(IntegerAttr[I64])
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = (
        "$a `,` $b (`,` $c^)? attr-dict `:` `(` type($a) `,` type($b) (`,` type($c)^)? `)` `->` type($res)"
    )

    def __init__(self, a, b, c, result_type, *, alpha=1.0, beta=1.0, trans_a=0, trans_b=0):
        super().__init__(operands=[a, b, c], result_types=[result_type], properties={
            "alpha": f32_attr(alpha), "beta": f32_attr(beta),
            "trans_a": i64_attr(trans_a), "trans_b": i64_attr(trans_b)})

    def verify_(self) -> None:
        _check_static(self)
        _check_same_elt(self)
        a = _check_rank(self, "A", self.a, 2)
        b = _check_rank(self, "B", self.b, 2)
        ta, tb = self.trans_a.value.data, self.trans_b.value.data
        if ta not in (0, 1) or tb not in (0, 1):
            raise VerifyException("'graph.gemm' expects trans_a and trans_b to be 0 or 1")
        m, k = (a[1], a[0]) if ta else a
        k2, n = (b[1], b[0]) if tb else b
        if k != k2:
            raise VerifyException(f"'graph.gemm' inner dimensions differ: {k} and {k2}")
        if self.c is not None and broadcast_shapes(_shape(self.c), (m, n)) != (m, n):
            raise VerifyException(f"'graph.gemm' C is not broadcastable to {m}x{n}")
        _expect_shape(self, (m, n))


def matmul_shape(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...] | None:
    """numpy.matmul result shape; None when incompatible."""
    if not a or not b:
        return None
    pa = (1, *a) if len(a) == 1 else tuple(a)
    pb = (*b, 1) if len(b) == 1 else tuple(b)
    if pa[-1] != pb[-2]:
        return None
    batch = broadcast_shapes(pa[:-2], pb[:-2])
    if batch is None:
        return None
    out = (*batch, pa[-2], pb[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


@irdl_op_definition
class MatMulOp(IRDLOperation):
    """``graph.matmul %a, %b : (tensor<MxK>, tensor<KxN>) -> tensor<MxN>`` (numpy.matmul semantics)."""

    name = "graph.matmul"
    a = operand_def(TensorType)
    b = operand_def(TensorType)
    res = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$a `,` $b attr-dict `:` `(` type($a) `,` type($b) `)` `->` type($res)"

    def __init__(self, a: SSAValue, b: SSAValue, result_type: Attribute | None = None):
        if result_type is None:
            result_type = TensorType(_elt(a), matmul_shape(_shape(a), _shape(b)))
        super().__init__(operands=[a, b], result_types=[result_type])

    def verify_(self) -> None:
        _check_static(self)
        _check_same_elt(self)
        shape = matmul_shape(_shape(self.a), _shape(self.b))
        if shape is None:
            raise VerifyException(f"'graph.matmul' operand shapes are incompatible: {self.a.type} and {self.b.type}")
        _expect_shape(self, shape)


@irdl_op_definition
class ConcatOp(IRDLOperation):
    """``graph.concat %a, %b {axis = 1 : i64} : (tensor<...>, tensor<...>) -> tensor<...>``"""

    name = "graph.concat"
    inputs = var_operand_def(TensorType)
    res = result_def(TensorType)
    axis = prop_def(IntegerAttr[I64])
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$inputs attr-dict `:` `(` type($inputs) `)` `->` type($res)"

    def __init__(self, inputs: Sequence[SSAValue], axis: int, result_type: Attribute | None = None):
        if result_type is None:
            s = list(_shape(inputs[0]))
            s[axis] = sum(_shape(v)[axis] for v in inputs)
            result_type = TensorType(_elt(inputs[0]), s)
        super().__init__(operands=[list(inputs)], result_types=[result_type], properties={"axis": i64_attr(axis)})

    def verify_(self) -> None:
        _check_static(self)
        _check_same_elt(self)
        if not self.inputs:
            raise VerifyException("'graph.concat' expects at least one input")
        shapes = [_shape(v) for v in self.inputs]
        r = len(shapes[0])
        ax = self.axis.value.data
        if not 0 <= ax < r:
            raise VerifyException(f"'graph.concat' axis {ax} out of range for rank {r}")
        for s in shapes:
            if len(s) != r or any(s[i] != shapes[0][i] for i in range(r) if i != ax):
                raise VerifyException("'graph.concat' inputs must agree in rank and every dimension but axis")
        out = list(shapes[0])
        out[ax] = sum(s[ax] for s in shapes)
        _expect_shape(self, out)


@irdl_op_definition
class ReshapeOp(IRDLOperation):
    """``graph.reshape %x : tensor<1x512x1x1xf32> -> tensor<1x512xf32>``"""

    name = "graph.reshape"
    x = operand_def(TensorType)
    res = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$x attr-dict `:` type($x) `->` type($res)"

    def __init__(self, x: SSAValue, shape: Sequence[int]):
        super().__init__(operands=[x], result_types=[TensorType(_elt(x), list(shape))])

    def verify_(self) -> None:
        _check_static(self)
        _check_same_elt(self)
        if math.prod(_shape(self.x)) != math.prod(_shape(self.res)):
            raise VerifyException("'graph.reshape' must keep the number of elements")


@irdl_op_definition
class TransposeOp(IRDLOperation):
    """``graph.transpose %x {perm = array<i64: 0, 2, 1>} : tensor<...> -> tensor<...>``"""

    name = "graph.transpose"
    x = operand_def(TensorType)
    res = result_def(TensorType)
    perm = prop_def(DenseArrayBase[I64])
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$x attr-dict `:` type($x) `->` type($res)"

    def __init__(self, x: SSAValue, perm: Sequence[int]):
        s = _shape(x)
        super().__init__(operands=[x], result_types=[TensorType(_elt(x), [s[p] for p in perm])],
                         properties={"perm": i64_array(perm)})

    def verify_(self) -> None:
        _check_static(self)
        _check_same_elt(self)
        s = _shape(self.x)
        perm = _ints(self.perm)
        if sorted(perm) != list(range(len(s))):
            raise VerifyException(f"'graph.transpose' perm {list(perm)} is not a permutation of 0..{len(s) - 1}")
        _expect_shape(self, [s[p] for p in perm])


class _SingleAxisOp(IRDLOperation):
    """An op of one tensor, same type out, along one ``axis`` (opset >= 13 semantics)."""

    T: ClassVar = VarConstraint("T", base(TensorType))
    x = operand_def(T)
    res = result_def(T)
    axis = prop_def(IntegerAttr[I64])
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$x attr-dict `:` type($res)"

    def __init__(self, x: SSAValue, axis: int):
        super().__init__(operands=[x], result_types=[x.type], properties={"axis": i64_attr(axis)})

    def verify_(self) -> None:
        _check_static(self)
        r = len(_shape(self.x))
        ax = self.axis.value.data
        if not 0 <= ax < r:
            raise VerifyException(f"'{self.name}' axis {ax} out of range for rank {r}")


@irdl_op_definition
class SoftmaxOp(_SingleAxisOp):
    """``graph.softmax %x {axis = 1 : i64} : tensor<...>`` (single-axis softmax, opset >= 13 semantics)."""

    name = "graph.softmax"


@irdl_op_definition
class HardmaxOp(_SingleAxisOp):
    """``graph.hardmax %x {axis = 1 : i64} : tensor<...>``: 1 at the first maximum along ``axis``,
    0 elsewhere (single-axis, opset >= 13 semantics)."""

    name = "graph.hardmax"


@irdl_op_definition
class DetOp(IRDLOperation):
    """``graph.det %x : tensor<...xNxNxf32> -> tensor<...xf32>``: determinants of square matrices."""

    name = "graph.det"
    x = operand_def(TensorType)
    res = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$x attr-dict `:` type($x) `->` type($res)"

    def __init__(self, x: SSAValue):
        s = _shape(x)
        super().__init__(operands=[x], result_types=[TensorType(_elt(x), s[:-2])])

    def verify_(self) -> None:
        _check_static(self)
        _check_same_elt(self)
        s = _shape(self.x)
        if len(s) < 2 or s[-1] != s[-2]:
            raise VerifyException(f"'graph.det' expects [..., N, N] matrices, got shape {list(s)}")
        if tuple(_shape(self.res)) != tuple(s[:-2]):
            raise VerifyException(f"'graph.det' result shape must be {list(s[:-2])}")


@irdl_op_definition
class LRNOp(IRDLOperation):
    """``graph.lrn %x {alpha, beta, bias, size} : tensor<...>`` (across channels, ONNX LRN)."""

    name = "graph.lrn"
    T: ClassVar = VarConstraint("T", base(TensorType))
    x = operand_def(T)
    res = result_def(T)
    size = prop_def(IntegerAttr[I64])
    alpha = prop_def(FloatAttr)
    beta = prop_def(FloatAttr)
    bias = prop_def(FloatAttr)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$x attr-dict `:` type($res)"

    def __init__(self, x: SSAValue, *, size: int, alpha: float = 1e-4, beta: float = 0.75, bias: float = 1.0):
        super().__init__(operands=[x], result_types=[x.type], properties={
            "size": i64_attr(size), "alpha": f32_attr(alpha), "beta": f32_attr(beta), "bias": f32_attr(bias)})

    def verify_(self) -> None:
        _check_static(self)
        if len(_shape(self.x)) < 2:
            raise VerifyException("'graph.lrn' expects input of rank >= 2")
        if self.size.value.data < 1:
            raise VerifyException("'graph.lrn' expects size >= 1")


# --------------------------------------------------------------------------------------------
# elementwise math (unary, with optional f32 parameters) and more binary ops


class _ParamUnary(_ElementwiseUnary):
    """A unary elementwise op whose f32 parameters are properties (``PARAMS``: name -> default)."""

    PARAMS: ClassVar[dict[str, float]] = {}
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(self, x: SSAValue, **params: float):
        unknown = set(params) - set(self.PARAMS)
        if unknown:
            raise TypeError(f"{self.name}: unknown parameters {sorted(unknown)}")
        props = {k: f32_attr(params.get(k, d)) for k, d in self.PARAMS.items()}
        IRDLOperation.__init__(self, operands=[x], result_types=[x.type], properties=props)

    def param(self, name: str) -> float:
        return float(self.properties[name].value.data)


def _unary(cls_name: str, op_name: str, doc: str, params: dict[str, float] | None = None) -> type:
    body: dict = {"name": op_name, "__doc__": doc, "__qualname__": cls_name, "__module__": __name__}
    base_cls = _ElementwiseUnary
    if params:
        base_cls = _ParamUnary
        body["PARAMS"] = dict(params)
        body["__annotations__"] = {"PARAMS": ClassVar}
        for k in params:
            body[k] = prop_def(FloatAttr)
    return irdl_op_definition(type(cls_name, (base_cls,), body))


SigmoidOp = _unary("SigmoidOp", "graph.sigmoid", "``graph.sigmoid %x : tensor<...>``: 1 / (1 + exp(-x)).")
TanhOp = _unary("TanhOp", "graph.tanh", "``graph.tanh %x : tensor<...>``")
ExpOp = _unary("ExpOp", "graph.exp", "``graph.exp %x : tensor<...>``")
LogOp = _unary("LogOp", "graph.log", "``graph.log %x : tensor<...>`` (natural logarithm)")
SqrtOp = _unary("SqrtOp", "graph.sqrt", "``graph.sqrt %x : tensor<...>``")
ReciprocalOp = _unary("ReciprocalOp", "graph.reciprocal", "``graph.reciprocal %x : tensor<...>``: 1 / x.")
AbsOp = _unary("AbsOp", "graph.abs", "``graph.abs %x : tensor<...>``")
NegOp = _unary("NegOp", "graph.neg", "``graph.neg %x : tensor<...>``")
ErfOp = _unary("ErfOp", "graph.erf", "``graph.erf %x : tensor<...>``")
SoftplusOp = _unary("SoftplusOp", "graph.softplus", "``graph.softplus %x : tensor<...>``: ln(1 + exp(x)).")
EluOp = _unary("EluOp", "graph.elu", "``graph.elu %x {alpha = 1.0 : f32} : tensor<...>``", {"alpha": 1.0})
SeluOp = _unary("SeluOp", "graph.selu", "``graph.selu %x {alpha, gamma} : tensor<...>``",
                {"alpha": 1.67326319217681884765625, "gamma": 1.05070102214813232421875})
LeakyReluOp = _unary("LeakyReluOp", "graph.leaky_relu", "``graph.leaky_relu %x {alpha = 0.01 : f32} : tensor<...>``",
                     {"alpha": 0.01})
HardSigmoidOp = _unary("HardSigmoidOp", "graph.hard_sigmoid",
                       "``graph.hard_sigmoid %x {alpha, beta} : tensor<...>``: max(0, min(1, alpha*x + beta)).",
                       {"alpha": 0.2, "beta": 0.5})
# trigonometric / hyperbolic family and more activations (vector programs of cann/lowering/transcendental.py)
SinOp = _unary("SinOp", "graph.sin", "``graph.sin %x : tensor<...>``")
CosOp = _unary("CosOp", "graph.cos", "``graph.cos %x : tensor<...>``")
TanOp = _unary("TanOp", "graph.tan", "``graph.tan %x : tensor<...>``")
AsinOp = _unary("AsinOp", "graph.asin", "``graph.asin %x : tensor<...>``")
AcosOp = _unary("AcosOp", "graph.acos", "``graph.acos %x : tensor<...>``")
AtanOp = _unary("AtanOp", "graph.atan", "``graph.atan %x : tensor<...>``")
SinhOp = _unary("SinhOp", "graph.sinh", "``graph.sinh %x : tensor<...>``")
CoshOp = _unary("CoshOp", "graph.cosh", "``graph.cosh %x : tensor<...>``")
AsinhOp = _unary("AsinhOp", "graph.asinh", "``graph.asinh %x : tensor<...>``")
AcoshOp = _unary("AcoshOp", "graph.acosh", "``graph.acosh %x : tensor<...>``")
AtanhOp = _unary("AtanhOp", "graph.atanh", "``graph.atanh %x : tensor<...>``")
MishOp = _unary("MishOp", "graph.mish", "``graph.mish %x : tensor<...>``: x * tanh(ln(1 + exp(x))).")
ThresholdedReluOp = _unary("ThresholdedReluOp", "graph.thresholded_relu",
                           "``graph.thresholded_relu %x {alpha = 1.0 : f32} : tensor<...>``: x if x > alpha else 0.",
                           {"alpha": 1.0})
ShrinkOp = _unary("ShrinkOp", "graph.shrink",
                  "``graph.shrink %x {bias = 0.0 : f32, lambd = 0.5 : f32} : tensor<...>``: x - bias if x > lambd, "
                  "x + bias if x < -lambd, else 0.", {"bias": 0.0, "lambd": 0.5})


@irdl_op_definition
class ClipOp(_ParamUnary):
    """``graph.clip %x {min = 0.0 : f32, max = 6.0 : f32} : tensor<...>`` (infinite bounds: no bound)."""

    name = "graph.clip"
    PARAMS: ClassVar[dict[str, float]] = {"min": -math.inf, "max": math.inf}
    min = prop_def(FloatAttr)
    max = prop_def(FloatAttr)


GELU_APPROXIMATIONS = ("none", "tanh")


@irdl_op_definition
class GeluOp(_ElementwiseUnary):
    """``graph.gelu %x {approximate = "none"} : tensor<...>`` ("none": erf form, "tanh": tanh form)."""

    name = "graph.gelu"
    approximate = prop_def(StringAttr)
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(self, x: SSAValue, approximate: str = "none"):
        IRDLOperation.__init__(self, operands=[x], result_types=[x.type],
                               properties={"approximate": StringAttr(approximate)})

    def verify_(self) -> None:
        super().verify_()
        if self.approximate.data not in GELU_APPROXIMATIONS:
            raise VerifyException(f"'graph.gelu' approximate must be one of {', '.join(GELU_APPROXIMATIONS)}, "
                                  f"got '{self.approximate.data}'")


@irdl_op_definition
class MaxOp(_Binary):
    """``%z = graph.max %x, %y : (...) -> ...`` (elementwise, broadcasting)"""

    name = "graph.max"


@irdl_op_definition
class MinOp(_Binary):
    name = "graph.min"


@irdl_op_definition
class PowOp(_Binary):
    name = "graph.pow"


# --------------------------------------------------------------------------------------------
# reductions, layout


REDUCE_KINDS = ("sum", "mean", "max", "min", "prod", "l1", "l2", "sum_square", "log_sum", "log_sum_exp")


def reduce_shape(shape: Sequence[int], axes: Sequence[int], keepdims: bool) -> tuple[int, ...]:
    ax = set(axes)
    if keepdims:
        return tuple(1 if i in ax else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in ax)


@irdl_op_definition
class ReduceOp(IRDLOperation):
    """``graph.reduce %x {kind = "sum", axes = array<i64: 1>, keepdims = 1 : i64} : tensor<...> -> tensor<...>``

    ``axes``: sorted, distinct, non-negative, non-empty (the importer resolves ONNX's empty-axes rules)."""

    name = "graph.reduce"
    x = operand_def(TensorType)
    res = result_def(TensorType)
    kind = prop_def(StringAttr)
    axes = prop_def(DenseArrayBase[I64])
    keepdims = prop_def(IntegerAttr[I64])
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$x attr-dict `:` type($x) `->` type($res)"

    def __init__(self, x: SSAValue, kind: str, axes: Sequence[int], keepdims: bool = True,
                 result_type: Attribute | None = None):
        if result_type is None:
            result_type = TensorType(_elt(x), reduce_shape(_shape(x), axes, keepdims))
        super().__init__(operands=[x], result_types=[result_type], properties={
            "kind": StringAttr(kind), "axes": i64_array(axes), "keepdims": i64_attr(int(keepdims))})

    def verify_(self) -> None:
        _check_static(self)
        _check_same_elt(self)
        if self.kind.data not in REDUCE_KINDS:
            raise VerifyException(f"'graph.reduce' kind must be one of {', '.join(REDUCE_KINDS)}, got '{self.kind.data}'")
        s = _shape(self.x)
        axes = _ints(self.axes)
        if not axes or list(axes) != sorted(set(axes)) or axes[0] < 0 or axes[-1] >= len(s):
            raise VerifyException(f"'graph.reduce' axes {list(axes)} must be sorted, distinct and in [0, {len(s)})")
        kd = self.keepdims.value.data
        if kd not in (0, 1):
            raise VerifyException("'graph.reduce' expects keepdims 0 or 1")
        _expect_shape(self, reduce_shape(s, axes, bool(kd)))


PAD_MODES = ("constant", "reflect", "edge")


@irdl_op_definition
class PadOp(IRDLOperation):
    """``graph.pad %x {pads = array<i64: b0, b1, e0, e1>, mode = "constant", value = 0.0 : f32} : ... -> ...``

    ``pads`` in ONNX order (all begins, then all ends), one pair per axis; negative values crop."""

    name = "graph.pad"
    x = operand_def(TensorType)
    res = result_def(TensorType)
    pads = prop_def(DenseArrayBase[I64])
    mode = prop_def(StringAttr)
    value = prop_def(FloatAttr)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$x attr-dict `:` type($x) `->` type($res)"

    def __init__(self, x: SSAValue, pads: Sequence[int], mode: str = "constant", value: float = 0.0):
        s = _shape(x)
        r = len(s)
        out = [s[i] + pads[i] + pads[i + r] for i in range(r)]
        super().__init__(operands=[x], result_types=[TensorType(_elt(x), out)], properties={
            "pads": i64_array(pads), "mode": StringAttr(mode), "value": f32_attr(value)})

    def verify_(self) -> None:
        _check_static(self)
        _check_same_elt(self)
        s = _shape(self.x)
        r = len(s)
        p = _check_len(self, "pads", 2 * r)
        if self.mode.data not in PAD_MODES:
            raise VerifyException(f"'graph.pad' mode must be one of {', '.join(PAD_MODES)}, got '{self.mode.data}'")
        out = [s[i] + p[i] + p[i + r] for i in range(r)]
        if min(out, default=1) < 0:
            raise VerifyException("'graph.pad' negative pads remove more than the whole axis")
        if self.mode.data == "reflect" and any(max(p[i], p[i + r]) >= s[i] for i in range(r) if p[i] or p[i + r]):
            raise VerifyException("'graph.pad' reflect pads must be smaller than the axis")
        _expect_shape(self, out)


def slice_length(start: int, end: int, step: int) -> int:
    if step > 0:
        return max(0, -(-(end - start) // step))
    return max(0, -(-(start - end) // -step))


@irdl_op_definition
class SliceOp(IRDLOperation):
    """``graph.slice %x {starts, ends, steps} : tensor<...> -> tensor<...>``: one entry per axis, static,
    already clamped (ONNX Slice semantics: for a negative step, ``end`` may be -1 meaning "before 0")."""

    name = "graph.slice"
    x = operand_def(TensorType)
    res = result_def(TensorType)
    starts = prop_def(DenseArrayBase[I64])
    ends = prop_def(DenseArrayBase[I64])
    steps = prop_def(DenseArrayBase[I64])
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$x attr-dict `:` type($x) `->` type($res)"

    def __init__(self, x: SSAValue, starts: Sequence[int], ends: Sequence[int], steps: Sequence[int]):
        out = [slice_length(a, b, c) for a, b, c in zip(starts, ends, steps)]
        super().__init__(operands=[x], result_types=[TensorType(_elt(x), out)], properties={
            "starts": i64_array(starts), "ends": i64_array(ends), "steps": i64_array(steps)})

    def verify_(self) -> None:
        _check_static(self)
        _check_same_elt(self)
        s = _shape(self.x)
        r = len(s)
        st, en, sp = (_check_len(self, k, r) for k in ("starts", "ends", "steps"))
        for i in range(r):
            if sp[i] == 0:
                raise VerifyException("'graph.slice' steps must be non-zero")
            lo, hi = (0, s[i]) if sp[i] > 0 else (-1, s[i] - 1)
            if not (lo <= st[i] <= hi and lo <= en[i] <= hi) or (sp[i] > 0 and st[i] > s[i]):
                raise VerifyException(f"'graph.slice' axis {i}: start {st[i]} / end {en[i]} not clamped to the axis")
        _expect_shape(self, [slice_length(a, b, c) for a, b, c in zip(st, en, sp)])


@irdl_op_definition
class LayerNormOp(IRDLOperation):
    """``graph.layer_norm %x, %scale[, %bias] {axis = -1 : i64, epsilon = 1e-05 : f32} : (...) -> ...``

    Normalizes over axes ``axis..rank-1`` (``axis`` normalized to be non-negative); ``scale`` and
    ``bias`` broadcast unidirectionally to the shape of ``x`` (as ONNX's LayerNormalization: a
    ``1xCx1x1`` scale with ``axis = 1`` on ``NxCxHxW`` is valid)."""

    name = "graph.layer_norm"
    x = operand_def(TensorType)
    scale = operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    res = result_def(TensorType)
    axis = prop_def(IntegerAttr[I64])
    epsilon = prop_def(FloatAttr)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = (
        "$x `,` $scale (`,` $bias^)? attr-dict `:` `(` type($x) `,` type($scale) (`,` type($bias)^)? `)` `->` type($res)"
    )

    def __init__(self, x: SSAValue, scale: SSAValue, bias: SSAValue | None, axis: int, epsilon: float = 1e-5):
        super().__init__(operands=[x, scale, bias], result_types=[x.type],
                         properties={"axis": i64_attr(axis), "epsilon": f32_attr(epsilon)})

    def verify_(self) -> None:
        _check_static(self)
        _check_same_elt(self)
        s = _shape(self.x)
        ax = self.axis.value.data
        if not 0 <= ax < len(s):
            raise VerifyException(f"'graph.layer_norm' axis {ax} out of range for rank {len(s)}")
        for what in ("scale", "bias"):
            v = getattr(self, what)
            if v is not None and broadcast_shapes(_shape(v), s) != tuple(s):
                raise VerifyException(f"'graph.layer_norm' {what} does not broadcast to the input shape "
                                      f"{'x'.join(map(str, s))}")
        if self.res.type != self.x.type:
            raise VerifyException("'graph.layer_norm' result type must equal the input type")


@irdl_op_definition
class ExpandOp(IRDLOperation):
    """``graph.expand %x : tensor<3x1xf32> -> tensor<2x3x4xf32>``: broadcast to the result shape."""

    name = "graph.expand"
    x = operand_def(TensorType)
    res = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$x attr-dict `:` type($x) `->` type($res)"

    def __init__(self, x: SSAValue, shape: Sequence[int]):
        super().__init__(operands=[x], result_types=[TensorType(_elt(x), list(shape))])

    def verify_(self) -> None:
        _check_static(self)
        _check_same_elt(self)
        if broadcast_shapes(_shape(self.x), _shape(self.res)) != _shape(self.res):
            raise VerifyException(f"'graph.expand' cannot broadcast {self.x.type} to {self.res.type}")


@irdl_op_definition
class CastOp(IRDLOperation):
    """``graph.cast %x : tensor<...xf32> -> tensor<...xf16>``: elementwise dtype conversion (the
    target dtype is the result's element type)."""

    name = "graph.cast"
    x = operand_def(TensorType)
    res = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$x attr-dict `:` type($x) `->` type($res)"

    def __init__(self, x: SSAValue, to: Attribute):
        super().__init__(operands=[x], result_types=[TensorType(to, _shape(x))])

    def verify_(self) -> None:
        _check_static(self)
        if _shape(self.x) != _shape(self.res):
            raise VerifyException("'graph.cast' must keep the shape")


@irdl_op_definition
class GatherOp(IRDLOperation):
    """``graph.gather %data, %indices {axis = 0 : i64} : (tensor<128x64xf32>, tensor<1x16xi64>) -> tensor<1x16x64xf32>``:
    ONNX Gather (result shape data[:axis] + indices + data[axis+1:]; negative indices wrap)."""

    name = "graph.gather"
    data = operand_def(TensorType)
    indices = operand_def(TensorType)
    axis = prop_def(IntegerAttr)
    res = result_def(TensorType)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$data `,` $indices attr-dict `:` `(` type($data) `,` type($indices) `)` `->` type($res)"

    def __init__(self, data: SSAValue, indices: SSAValue, axis: int):
        ds, ix = _shape(data), _shape(indices)
        shape = ds[:axis] + ix + ds[axis + 1:]
        super().__init__(operands=[data, indices], properties={"axis": i64_attr(axis)},
                         result_types=[TensorType(_elt(data), shape)])

    def verify_(self) -> None:
        _check_static(self)
        ds, ix = _shape(self.data), _shape(self.indices)
        axis = self.axis.value.data
        if not 0 <= axis < len(ds):
            raise VerifyException(f"'graph.gather' axis {axis} out of range for rank {len(ds)}")
        if numpy_dtype(_elt(self.indices)) not in (np.dtype(np.int32), np.dtype(np.int64)):
            raise VerifyException("'graph.gather' expects int32 or int64 indices")
        if _elt(self.res) != _elt(self.data):
            raise VerifyException("'graph.gather' result element type must be the data's")
        _expect_shape(self, ds[:axis] + ix + ds[axis + 1:])


@irdl_op_definition
class WhereOp(IRDLOperation):
    """``graph.where %cond, %x, %y : (tensor<...xi1>, tensor<...>, tensor<...>) -> tensor<...>``:
    ONNX Where (cond ? x : y, multidirectional broadcasting)."""

    name = "graph.where"
    cond = operand_def(TensorType)
    x = operand_def(TensorType)
    y = operand_def(TensorType)
    res = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = ("$cond `,` $x `,` $y attr-dict `:` `(` type($cond) `,` type($x) `,` type($y) `)` "
                       "`->` type($res)")

    def __init__(self, cond: SSAValue, x: SSAValue, y: SSAValue):
        shape = broadcast_shapes(broadcast_shapes(_shape(cond), _shape(x)) or (), _shape(y))
        super().__init__(operands=[cond, x, y], result_types=[TensorType(_elt(x), shape or _shape(x))])

    def verify_(self) -> None:
        _check_static(self)
        if numpy_dtype(_elt(self.cond)) != np.bool_:
            raise VerifyException("'graph.where' expects a boolean (i1) condition")
        if _elt(self.x) != _elt(self.y) or _elt(self.res) != _elt(self.x):
            raise VerifyException("'graph.where' expects x, y and the result to share one element type")
        xy = broadcast_shapes(_shape(self.x), _shape(self.y))
        shape = broadcast_shapes(_shape(self.cond), xy) if xy is not None else None
        if shape is None:
            raise VerifyException("'graph.where' operands are not broadcastable")
        _expect_shape(self, shape)



# --------------------------------------------------------------------------------------------
# Resize, ConvTranspose

RESIZE_MODES = ("nearest", "linear")
RESIZE_COORD_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric")
RESIZE_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


@irdl_op_definition
class ResizeOp(IRDLOperation):
    """``graph.resize %x {mode = "nearest", coordinate_transformation_mode = "asymmetric",
    nearest_mode = "floor", scales = array<f64: 2.0, 2.0>} : tensor<1x8x4x4xf32> -> tensor<1x8x8x8xf32>``

    ONNX Resize of the two spatial axes (H, W) of a 4-D NCHW tensor. ``scales`` are the per-axis
    scale factors the coordinate transformation divides by (the ``scales`` input, or output size /
    input size when the model gives ``sizes``); the output size is the result type's."""

    name = "graph.resize"
    x = operand_def(TensorType)
    res = result_def(TensorType)
    mode = prop_def(StringAttr)
    coordinate_transformation_mode = prop_def(StringAttr)
    nearest_mode = prop_def(StringAttr)
    scales = prop_def(DenseArrayBase)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$x attr-dict `:` type($x) `->` type($res)"

    def __init__(self, x: SSAValue, result_type: Attribute, *, mode: str, coordinate_transformation_mode: str,
                 nearest_mode: str, scales: Sequence[float]):
        from xdsl.dialects.builtin import f64

        super().__init__(operands=[x], result_types=[result_type], properties={
            "mode": StringAttr(mode), "coordinate_transformation_mode": StringAttr(coordinate_transformation_mode),
            "nearest_mode": StringAttr(nearest_mode),
            "scales": DenseArrayBase.from_list(f64, [float(s) for s in scales])})

    def scale_values(self) -> tuple[float, ...]:
        return tuple(float(v) for v in self.scales.get_values())

    def verify_(self) -> None:
        _check_static(self)
        _check_same_elt(self)
        n, c, h, w = _check_rank(self, "input", self.x, 4)
        for prop, allowed in (("mode", RESIZE_MODES), ("coordinate_transformation_mode", RESIZE_COORD_MODES),
                              ("nearest_mode", RESIZE_NEAREST_MODES)):
            v = getattr(self, prop).data
            if v not in allowed:
                raise VerifyException(f"'graph.resize' {prop} must be one of {', '.join(allowed)}, got '{v}'")
        if not isinstance(self.scales.elt_type, Float64Type):
            raise VerifyException("'graph.resize' expects scales as array<f64: ...>")
        s = self.scale_values()
        if len(s) != 2 or min(s) <= 0:
            raise VerifyException(f"'graph.resize' expects 2 positive scales (H, W), got {list(s)}")
        ho, wo = _shape(self.res)[2:] if len(_shape(self.res)) == 4 else (0, 0)
        if len(_shape(self.res)) != 4 or _shape(self.res)[:2] != (n, c) or ho < 1 or wo < 1:
            raise VerifyException(f"'graph.resize' result must be {n}x{c}xHoxWo with Ho, Wo >= 1, got "
                                  f"{'x'.join(map(str, _shape(self.res)))}")


@irdl_op_definition
class ConvTransposeOp(IRDLOperation):
    """``graph.conv_transpose %x, %w[, %b] {dilations, group, output_padding, pads, strides} : (...) -> ...``

    2-D transposed convolution; ``w`` is [Cin, Cout/group, KH, KW] (ONNX layout); pads = top,
    left, bottom, right, resolved from ``auto_pad`` / ``output_shape`` (a negative end pad extends
    the output). Output size per axis: ``s*(in-1) + output_padding + d*(k-1) + 1 - pad_begin - pad_end``."""

    name = "graph.conv_transpose"
    x = operand_def(TensorType)
    w = operand_def(TensorType)
    b = opt_operand_def(TensorType)
    res = result_def(TensorType)
    strides = prop_def(DenseArrayBase[I64])
    pads = prop_def(DenseArrayBase[I64])
    dilations = prop_def(DenseArrayBase[I64])
    output_padding = prop_def(DenseArrayBase[I64])
    group = prop_def(IntegerAttr[I64])
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = (
        "$x `,` $w (`,` $b^)? attr-dict `:` `(` type($x) `,` type($w) (`,` type($b)^)? `)` `->` type($res)"
    )

    def __init__(self, x, w, b, result_type, *, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1),
                 output_padding=(0, 0), group=1):
        super().__init__(operands=[x, w, b], result_types=[result_type], properties={
            "strides": i64_array(strides), "pads": i64_array(pads), "dilations": i64_array(dilations),
            "output_padding": i64_array(output_padding), "group": i64_attr(group)})

    @staticmethod
    def output_dim(size: int, k: int, s: int, d: int, p0: int, p1: int, op: int) -> int:
        return s * (size - 1) + op + d * (k - 1) + 1 - p0 - p1

    def verify_(self) -> None:
        _check_static(self)
        _check_same_elt(self)
        n, c, h, w = _check_rank(self, "input", self.x, 4)
        ci, og, kh, kw = _check_rank(self, "weight", self.w, 4)
        s = _check_len(self, "strides", 2)
        p = _check_len(self, "pads", 4)
        d = _check_len(self, "dilations", 2)
        op = _check_len(self, "output_padding", 2)
        g = self.group.value.data
        if g < 1 or c % g:
            raise VerifyException(f"'graph.conv_transpose' group {g} must divide input channels {c}")
        if ci != c:
            raise VerifyException(f"'graph.conv_transpose' weight expects {ci} input channels, input has {c}")
        if min(s) < 1 or min(d) < 1 or min(op) < 0 or p[0] < 0 or p[1] < 0:
            raise VerifyException("'graph.conv_transpose' expects positive strides and dilations, non-negative "
                                  "output_padding and begin pads")
        if self.b is not None and _shape(self.b) != (og * g,):
            raise VerifyException(f"'graph.conv_transpose' bias must have shape {og * g}, got "
                                  f"{'x'.join(map(str, _shape(self.b)))}")
        ho = self.output_dim(h, kh, s[0], d[0], p[0], p[2], op[0])
        wo = self.output_dim(w, kw, s[1], d[1], p[1], p[3], op[1])
        if ho < 1 or wo < 1:
            raise VerifyException(f"'graph.conv_transpose' output would be empty ({ho}x{wo})")
        _expect_shape(self, (n, og * g, ho, wo))


from cann.dialects.graph_fused import FusedOp, YieldOp  # noqa: E402  (UB fusion groups)
from cann.dialects.graph_int import GRAPH_INT_OPS  # noqa: E402  (comparisons, boolean logic, rounding)
from cann.dialects.graph_dist import HaloExchangeOp  # noqa: E402  (spatial partitioning, issue 15)
from cann.dialects.graph_layout import GRAPH_LAYOUT_OPS  # noqa: E402  (channel shuffle)

Graph = Dialect(
    "graph",
    [
        FusedOp,
        YieldOp,
        ConstantOp,
        Conv2DOp,
        BatchNormOp,
        ReluOp,
        AddOp,
        SubOp,
        MulOp,
        DivOp,
        MaxPoolOp,
        AvgPoolOp,
        GlobalAvgPoolOp,
        GemmOp,
        MatMulOp,
        ConcatOp,
        ReshapeOp,
        TransposeOp,
        SoftmaxOp,
        LRNOp,
        SigmoidOp, TanhOp, ExpOp, LogOp, SqrtOp, ReciprocalOp, AbsOp, NegOp, ErfOp, SoftplusOp,
        EluOp, SeluOp, LeakyReluOp, ClipOp, HardSigmoidOp, GeluOp,
        SinOp, CosOp, TanOp, AsinOp, AcosOp, AtanOp, SinhOp, CoshOp, AsinhOp, AcoshOp, AtanhOp,
        MishOp, ThresholdedReluOp, ShrinkOp, HardmaxOp, DetOp,
        MaxOp, MinOp, PowOp,
        ReduceOp, PadOp, SliceOp, LayerNormOp, CastOp, ExpandOp,
        ResizeOp, ConvTransposeOp,
        GatherOp, WhereOp,
        *GRAPH_INT_OPS,
        HaloExchangeOp,
        *GRAPH_LAYOUT_OPS,
    ],
    [],
)
