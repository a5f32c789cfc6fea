"""Constant folding for the ONNX importer: the values of one node whose inputs are all known.

:func:`fold_node` evaluates a node at import time. Most operators run on the specification's
reference implementation (``onnx.reference``); the ones whose reference implementation has
hidden limits run on numpy here instead:

* ``GatherElements``: the reference selects with ``np.choose``, which takes at most 64 choices
  (an axis of 64 or more entries fails);
* ``GatherND``, ``ScatterND``, ``ScatterElements``: the reference loops in Python over every
  index (measured: 0.25-0.9 s per 100,000 indices, so a large table takes minutes); here one
  fancy-indexing expression (20-250x faster);
* ``Softsign``: the reference writes into the result of ``np.abs``, a numpy scalar (not an
  array) for a rank-0 operand, and fails.

Every folded value keeps the exact shape and dtype the operator defines: operands are passed as
they are (a rank-0 tensor stays rank 0), and each result is checked against the output type
ONNX shape inference gives the node (``expected``): a dtype the reference computes in another
precision is cast to the defined dtype; a shape that contradicts it is a :class:`FoldError`.
A :class:`FoldError` means "not computable at compile time": the importer then runs the node as
a device kernel where it has one, and reports the message only where it has none.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

__all__ = ["FoldError", "fold_node", "NUMPY_FOLDS"]


class FoldError(Exception):
    """The node cannot be evaluated at compile time (message: why, one line)."""


def _axis(a: dict[str, Any], rank: int, key: str = "axis", default: int = 0) -> int:
    axis = int(a.get(key, default))
    if not -rank <= axis < rank:
        raise FoldError(f"{key}={axis} is out of range for rank {rank}")
    return axis % rank


def _index(idx: np.ndarray, n: int, what: str) -> np.ndarray:
    """``idx`` as int64 in [0, n): negative entries count from the end; others are an error."""
    idx = np.asarray(idx, dtype=np.int64)
    if idx.size and (idx.min() < -n or idx.max() >= n):
        raise FoldError(f"{what} out of range [-{n}, {n - 1}]")
    return np.where(idx < 0, idx + n, idx)


def _gather_elements(ins: Sequence[np.ndarray], a: dict[str, Any]) -> list[np.ndarray]:
    data, idx = ins
    if data.ndim == 0 or idx.ndim != data.ndim:
        raise FoldError(f"GatherElements needs indices of the data's rank {data.ndim} >= 1, got rank {idx.ndim}")
    axis = _axis(a, data.ndim)
    idx = _index(idx, data.shape[axis], "an index")
    if any(i > d for k, (i, d) in enumerate(zip(idx.shape, data.shape)) if k != axis):
        raise FoldError(f"indices shape {idx.shape} exceeds the data shape {data.shape} off the axis")
    data = data[tuple(slice(None) if k == axis else slice(0, i) for k, i in enumerate(idx.shape))]
    return [np.take_along_axis(data, idx, axis)]


def _reduction(a: dict[str, Any]) -> str:
    r = a.get("reduction", "none")
    return r.decode() if isinstance(r, bytes) else r


_UFUNCS: dict[str, Callable[..., Any]] = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _scatter(out: np.ndarray, where: tuple[np.ndarray, ...], updates: np.ndarray, reduction: str) -> np.ndarray:
    if reduction == "none":
        out[where] = updates  # duplicate indices: the last update wins (as the reference's loop)
    elif reduction in _UFUNCS:
        _UFUNCS[reduction].at(out, where, updates)
    else:
        raise FoldError(f"unknown reduction '{reduction}'")
    return out


def _scatter_elements(ins: Sequence[np.ndarray], a: dict[str, Any]) -> list[np.ndarray]:
    data, idx, upd = ins
    if data.ndim == 0 or idx.ndim != data.ndim or upd.shape != idx.shape:
        raise FoldError(f"ScatterElements: indices {idx.shape} and updates {upd.shape} must have the data's rank")
    axis = _axis(a, data.ndim)
    idx = _index(idx, data.shape[axis], "an index")
    where = list(np.indices(idx.shape, sparse=True))
    where[axis] = idx
    return [_scatter(data.copy(), tuple(where), upd, _reduction(a))]


def _nd_where(data: np.ndarray, idx: np.ndarray, batch_dims: int) -> tuple[tuple[np.ndarray, ...], tuple[int, ...]]:
    """The fancy index that picks GatherND/ScatterND's slices from ``data`` reshaped to
    (prod(batch dims), *data.shape[batch_dims:]), and the output's leading shape."""
    if idx.ndim < 1 or idx.shape[-1] > data.ndim - batch_dims or idx.shape[:batch_dims] != data.shape[:batch_dims]:
        raise FoldError(f"indices shape {idx.shape} does not address data of shape {data.shape} "
                        f"(batch_dims={batch_dims})")
    k = idx.shape[-1]
    nb = int(np.prod(data.shape[:batch_dims], dtype=np.int64))
    idx = idx.reshape(nb, -1, k)
    cols = tuple(_index(idx[..., i], data.shape[batch_dims + i], "an index") for i in range(k))
    batch = np.arange(nb).reshape(nb, 1)
    return (batch, *cols), data.shape[:batch_dims]


def _gather_nd(ins: Sequence[np.ndarray], a: dict[str, Any]) -> list[np.ndarray]:
    data, idx = ins
    bd = int(a.get("batch_dims", 0))
    where, lead = _nd_where(data, idx, bd)
    flat = data.reshape(-1, *data.shape[bd:])
    out = flat[where]
    return [out.reshape(*lead, *idx.shape[bd:-1], *data.shape[bd + idx.shape[-1]:])]


def _scatter_nd(ins: Sequence[np.ndarray], a: dict[str, Any]) -> list[np.ndarray]:
    data, idx, upd = ins
    where, _ = _nd_where(data, idx, 0)
    k = idx.shape[-1]
    want = idx.shape[:-1] + data.shape[k:]
    if upd.shape != want:
        raise FoldError(f"updates shape {upd.shape}, the indices and data define {want}")
    out = data.copy().reshape(1, *data.shape)
    _scatter(out, where, upd.reshape(1, -1, *data.shape[k:]), _reduction(a))
    return [out.reshape(data.shape)]


def _constant_of_shape(ins: Sequence[np.ndarray], a: dict[str, Any]) -> list[np.ndarray]:
    v = numpy_helper.to_array(a["value"]).reshape(-1) if "value" in a else np.zeros(1, np.float32)
    shape = tuple(int(d) for d in np.asarray(ins[0]).reshape(-1))
    if any(d < 0 for d in shape):
        raise FoldError(f"negative dimension in shape {list(shape)}")
    return [np.broadcast_to(v.reshape(()), shape)]


def _softsign(ins: Sequence[np.ndarray], a: dict[str, Any]) -> list[np.ndarray]:
    x = ins[0]
    return [np.asarray(x / (1 + np.abs(x)), dtype=x.dtype)]


#: op_type -> numpy evaluation, for the default domain (the reference implementation's limits
#: are in the module docstring); every other operator is folded by ``onnx.reference``
NUMPY_FOLDS: dict[str, Callable[[Sequence[np.ndarray], dict[str, Any]], list[np.ndarray]]] = {
    "ConstantOfShape": _constant_of_shape,
    "GatherElements": _gather_elements,
    "GatherND": _gather_nd,
    "ScatterND": _scatter_nd,
    "ScatterElements": _scatter_elements,
    "Scatter": _scatter_elements,  # opset 9-10 spelling of ScatterElements (no reduction)
    "Softsign": _softsign,
}


def _reference(node: onnx.NodeProto, ins: Sequence[np.ndarray | None], opset_imports: Sequence[onnx.OperatorSetIdProto],
               ir_version: int) -> list[np.ndarray]:
    from onnx.reference import ReferenceEvaluator

    feeds: dict[str, np.ndarray] = {}
    vis = []
    for n, arr in zip(node.input, ins):
        if n and n not in feeds:
            feeds[n] = np.asarray(arr)  # as it is: a rank-0 tensor stays rank 0
            vis.append(helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(arr.dtype), arr.shape))
    outs = [helper.make_value_info(o, onnx.TypeProto()) for o in node.output if o]
    gr = helper.make_graph([node], "fold", vis, outs)
    m = helper.make_model(gr, opset_imports=list(opset_imports), ir_version=ir_version)
    res = iter(ReferenceEvaluator(m).run(None, feeds))
    return [np.asarray(next(res)) if o else None for o in node.output]


def _as_defined(value: np.ndarray, t: onnx.TypeProto | None, op_type: str, out: str) -> np.ndarray:
    """``value`` in the dtype and shape that ``t`` (the output's inferred type) defines."""
    if t is None or not t.HasField("tensor_type"):
        return value
    tt = t.tensor_type
    if tt.elem_type:
        dt = np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type))
        if value.dtype != dt:
            value = value.astype(dt)
    if tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
        shape = tuple(d.dim_value for d in tt.shape.dim)
        if value.shape != shape:
            raise FoldError(f"{op_type} computed output '{out}' of shape {value.shape}; "
                            f"the operator defines {shape}")
    return value


def fold_node(node: onnx.NodeProto, ins: Sequence[np.ndarray | None], opset_imports: Sequence[onnx.OperatorSetIdProto],
              ir_version: int, expected: Sequence[onnx.TypeProto | None] = ()) -> list[np.ndarray | None]:
    """The values of ``node``'s outputs: one array per entry of ``node.output`` (None for an
    omitted one). ``ins`` holds the input values (None for an omitted optional input),
    ``opset_imports`` the opsets the node follows, ``expected`` the inferred type of each output
    (None: unknown). Raises :class:`FoldError` (one line) when the values cannot be computed at
    compile time."""
    a = {x.name: helper.get_attribute_value(x) for x in node.attribute}
    default = node.domain in ("", "ai.onnx")
    try:
        if default and node.op_type == "Constant" and "value" in a:
            vals = [numpy_helper.to_array(a["value"])]
        elif default and node.op_type in ("Identity", "Dropout"):
            if node.op_type == "Dropout" and len(ins) > 2 and ins[2] is not None and bool(ins[2]):
                raise FoldError("Dropout in training mode is random")
            vals = [ins[0]] + ([np.ones(ins[0].shape, np.bool_)] if len(node.output) > 1 else [])
        elif default and node.op_type in NUMPY_FOLDS:
            vals = NUMPY_FOLDS[node.op_type]([np.asarray(x) if x is not None else None for x in ins], a)
        else:
            vals = _reference(node, ins, opset_imports, ir_version)
        if len(vals) < len(node.output):
            raise FoldError(f"{node.op_type} computed {len(vals)} outputs, the node has {len(node.output)}")
        return [None if not o else _as_defined(np.asarray(v), expected[i] if i < len(expected) else None,
                                                node.op_type, o)
                for i, (o, v) in enumerate(zip(node.output, vals))]
    except FoldError:
        raise
    except Exception as e:  # the evaluator's own failure: one line
        raise FoldError(str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__) from None
