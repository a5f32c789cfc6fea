"""Shared helpers of the graph-level dialects (``graph``, its integer ops in ``graph_int`` and ``graph.fused``):
shape and element-type accessors, property builders, verifier checks, numpy <-> xDSL dtypes.
A leaf below the op definitions, so the op modules import it and not each other."""

from __future__ import annotations

from collections.abc import Sequence

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import (
    BFloat16Type,
    DenseArrayBase,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    Signedness,
    TensorType,
    f32,
    i64,
)
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import IRDLOperation
from xdsl.utils.exceptions import VerifyException

# --------------------------------------------------------------------------------------------
# helpers


def _shape(value: SSAValue | Attribute) -> tuple[int, ...]:
    t = value.type if isinstance(value, SSAValue) else value
    assert isinstance(t, TensorType)
    return tuple(t.get_shape())


def _elt(value: SSAValue) -> Attribute:
    t = value.type
    assert isinstance(t, TensorType)
    return t.get_element_type()


def _ints(attr: DenseArrayBase) -> tuple[int, ...]:
    return tuple(int(v) for v in attr.get_values())


def i64_array(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, [int(v) for v in values])


def i64_attr(value: int) -> IntegerAttr:
    return IntegerAttr(int(value), i64)


def f32_attr(value: float) -> FloatAttr:
    return FloatAttr(float(value), f32)


def _check_static(op: IRDLOperation) -> None:
    for v in (*op.operands, *op.results):
        t = v.type
        if isinstance(t, TensorType) and not t.has_static_shape():
            raise VerifyException(f"'{op.name}' expects static tensor shapes, got {t}")


def _check_same_elt(op: IRDLOperation) -> None:
    elts = {_elt(v) for v in (*op.operands, *op.results)}
    if len(elts) > 1:
        raise VerifyException(f"'{op.name}' expects one element type for all operands and results")


def _check_len(op: IRDLOperation, prop: str, n: int) -> tuple[int, ...]:
    vals = _ints(getattr(op, prop))
    if len(vals) != n:
        raise VerifyException(f"'{op.name}' expects {prop} to have {n} elements, got {len(vals)}")
    return vals


def _check_rank(op: IRDLOperation, what: str, value: SSAValue, rank: int) -> tuple[int, ...]:
    s = _shape(value)
    if len(s) != rank:
        raise VerifyException(f"'{op.name}' expects {what} of rank {rank}, got {len(s)}")
    return s


def _expect_shape(op: IRDLOperation, expected: Sequence[int] | Sequence[Sequence[int]]) -> None:
    got = _shape(op.results[0])
    options = [tuple(e) for e in expected] if expected and isinstance(expected[0], (tuple, list)) else [tuple(expected)]
    if got not in options:
        want = " or ".join("x".join(map(str, o)) for o in options)
        raise VerifyException(f"'{op.name}' result shape {'x'.join(map(str, got))} does not match expected {want}")


def broadcast_shapes(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...] | None:
    """Numpy/ONNX multidirectional broadcasting; None when incompatible."""
    n = max(len(a), len(b))
    pa = (1,) * (n - len(a)) + tuple(a)
    pb = (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(pa, pb):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            return None
    return tuple(out)


def pool_output_size(size: int, k: int, s: int, pad_begin: int, pad_end: int, d: int, ceil_mode: bool) -> int:
    """The specification's Conv / pooling output length of one axis: ``(size + pads - eff) / s + 1``
    rounded down, or up with ``ceil_mode``, where a last window that would start inside the end
    padding (at index ``size + pad_begin`` of the padded axis or later) is dropped (onnx's shape
    inference applies that rule from opset 22 only; onnxruntime and the reference evaluator at every
    opset). ``eff = (k - 1) * d + 1``. May be 0 or negative (a window longer than the padded input)."""
    num = size + pad_begin + pad_end - ((k - 1) * d + 1)
    if not ceil_mode:
        return num // s + 1
    out = -(-num // s) + 1
    if out > 1 and (out - 1) * s >= size + pad_begin:
        out -= 1
    return out


def _check_window_fits(op: IRDLOperation, hw: Sequence[int], k: Sequence[int], p: Sequence[int],
                       d: Sequence[int], out: Sequence[int]) -> None:
    """A Conv / pool window (kernel ``k``, dilations ``d``, pads top, left, bottom, right) longer than
    the padded input ``hw``: output ``out`` 0 or negative, the feature map is reduced away."""
    if min(out) >= 1:
        return
    eff = [(k[i] - 1) * d[i] + 1 for i in range(2)]
    raise VerifyException(f"'{op.name}' window {eff[0]}x{eff[1]} is larger than the padded input "
                          f"{hw[0] + p[0] + p[2]}x{hw[1] + p[1] + p[3]}: the output would be {out[0]}x{out[1]}")



def numpy_dtype(t: Attribute) -> np.dtype:
    """Numpy dtype of an xDSL element type."""
    if isinstance(t, Float32Type):
        return np.dtype(np.float32)
    if isinstance(t, Float16Type):
        return np.dtype(np.float16)
    if isinstance(t, Float64Type):
        return np.dtype(np.float64)
    if isinstance(t, BFloat16Type):
        return np.dtype(ml_dtypes.bfloat16)
    if isinstance(t, IntegerType):
        w = t.width.data
        if w == 1:
            return np.dtype(np.bool_)
        unsigned = t.signedness.data == Signedness.UNSIGNED
        return np.dtype(f"{'u' if unsigned else ''}int{w}")
    raise ValueError(f"no numpy dtype for {t}")


def element_type(dtype: np.dtype) -> Attribute:
    """xDSL element type of a numpy dtype."""
    from xdsl.dialects.builtin import f16, f64, i1

    dtype = np.dtype(dtype)
    if dtype == np.float32:
        return f32
    if dtype == np.float16:
        return f16
    if dtype == np.float64:
        return f64
    if dtype == ml_dtypes.bfloat16:
        return BFloat16Type()
    if dtype == np.bool_:
        return i1
    if dtype.kind == "i":
        return IntegerType(dtype.itemsize * 8)
    if dtype.kind == "u":
        return IntegerType(dtype.itemsize * 8, Signedness.UNSIGNED)
    raise ValueError(f"unsupported dtype {dtype}")
