"""ONNX importer: an ONNX model becomes a ``builtin.module`` holding ``func.func @main`` of ``graph`` ops.

Steps: load, ``onnx.checker.check_model``, fix symbolic input dimensions (``input_shape``), run
ONNX shape inference (``strict_mode``, ``data_prop``), then walk the nodes the outputs depend
on in topological order:

* a node whose inputs are all constants is evaluated at import time (``onnx.reference``) and
  becomes constant data (emitted as ``graph.constant`` where a non-constant op uses it);
* ``Dropout`` (inference) and ``Identity`` forward their input;
* every other supported node becomes ``graph`` ops located at ``NameLoc(node name)``;
* unsupported operators and attribute values are collected and raised together as one
  :class:`~cann.errors.CannError` with one diagnostic per node.

Result types always come from ONNX shape inference, never re-derived here.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper
from xdsl.dialects import func
from xdsl.dialects.builtin import DictionaryAttr, ModuleOp, StringAttr, TensorType
from xdsl.ir import Block, Operation, Region, SSAValue

from cann.dialects import graph as g
from cann.errors import CannError, Diagnostic

__all__ = ["import_onnx", "SUPPORTED_OPS"]


class _Unsupported(Exception):
    """Raised by a converter: this node cannot be imported (one diagnostic)."""


def _np_dtype(elem_type: int) -> np.dtype:
    return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))


def _load(model: str | os.PathLike | onnx.ModelProto) -> tuple[onnx.ModelProto, str]:
    if isinstance(model, onnx.ModelProto):
        return model, model.graph.name or "<model>"
    path = os.fspath(model)
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise CannError(path, f"cannot read model: {e.strerror or e}") from None
    m = onnx.ModelProto()
    try:
        m.ParseFromString(data)
    except Exception as e:  # google.protobuf.message.DecodeError and friends
        raise CannError(path, f"not an ONNX model: {e}") from None
    if m.ir_version == 0 or not m.HasField("graph"):
        raise CannError(path, "not an ONNX model: no IR version or graph")
    try:
        onnx.load_external_data_for_model(m, os.path.dirname(os.path.abspath(path)))
    except Exception as e:
        raise CannError(path, f"cannot load external data: {e}") from None
    return m, path


def _attrs(node: onnx.NodeProto) -> dict[str, Any]:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _node_name(node: onnx.NodeProto, index: int) -> str:
    return node.name or f"{node.op_type}_{index}"


def _dims(t: onnx.TypeProto) -> list[int | str | None] | None:
    if not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
        return None
    out: list[int | str | None] = []
    for d in t.tensor_type.shape.dim:
        if d.HasField("dim_value"):
            out.append(d.dim_value)
        elif d.HasField("dim_param"):
            out.append(d.dim_param)
        else:
            out.append(None)
    return out


class _Importer:
    def __init__(self, model: onnx.ModelProto, where: str):
        self.model = model
        self.where = where
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
        self.types: dict[str, onnx.TypeProto] = {}
        self.consts: dict[str, np.ndarray] = {}
        self.values: dict[str, SSAValue] = {}
        self.const_values: dict[str, SSAValue] = {}
        self.poisoned: set[str] = set()
        self.diags: list[Diagnostic] = []
        self.block: Block | None = None

    # -- values ------------------------------------------------------------------------------

    def is_const(self, name: str) -> bool:
        return name == "" or name in self.consts

    def emit(self, op: Operation, loc: str) -> Operation:
        op.location = g.name_loc(loc)
        assert self.block is not None
        self.block.add_op(op)
        return op

    def value(self, name: str) -> SSAValue:
        if name in self.values:
            return self.values[name]
        if name in self.consts:
            if name not in self.const_values:
                self.const_values[name] = self.emit(g.make_constant(self.consts[name], name), name).results[0]
            return self.const_values[name]
        raise CannError(name, "tensor has no producer")

    def tensor_type(self, name: str, node: str) -> TensorType:
        if name in self.consts:
            a = self.consts[name]
            return TensorType(g.element_type(a.dtype), a.shape)
        t = self.types.get(name)
        dims = _dims(t) if t is not None else None
        if t is None or dims is None or any(not isinstance(d, int) for d in dims):
            raise _Unsupported(f"shape inference left the shape of tensor '{name}' unknown")
        return TensorType(g.element_type(_np_dtype(t.tensor_type.elem_type)), dims)

    # -- folding -----------------------------------------------------------------------------

    def fold(self, node: onnx.NodeProto) -> list[np.ndarray]:
        a = _attrs(node)
        ins = [self.consts[n] if n else None for n in node.input]
        if node.domain in ("", "ai.onnx"):
            if node.op_type == "Constant" and "value" in a:
                return [numpy_helper.to_array(a["value"])]
            if node.op_type == "ConstantOfShape":
                v = numpy_helper.to_array(a["value"]).reshape(-1) if "value" in a else np.zeros(1, np.float32)
                shape = tuple(int(d) for d in ins[0])
                return [np.broadcast_to(v.reshape(()), shape)]
            if node.op_type in ("Identity", "Dropout"):
                return [ins[0]] + ([np.ones(ins[0].shape, np.bool_)] if len(node.output) > 1 else [])
        from onnx.reference import ReferenceEvaluator

        feeds = {}
        vis = []
        for n, arr in zip(node.input, ins):
            if n and n not in feeds:
                feeds[n] = np.ascontiguousarray(arr)
                vis.append(helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(arr.dtype), arr.shape))
        outs = [helper.make_value_info(o, onnx.TypeProto()) for o in node.output if o]
        gr = helper.make_graph([node], "fold", vis, outs)
        m = helper.make_model(gr, opset_imports=list(self.model.opset_import), ir_version=self.model.ir_version or 8)
        res = ReferenceEvaluator(m).run(None, feeds)
        return [np.asarray(r) for r in res]

    # -- entry -------------------------------------------------------------------------------

    def run(self, input_shape: dict[str, tuple[int, ...]] | None, out_nodes: list[str] | None) -> ModuleOp:
        model = self.model
        try:
            onnx.checker.check_model(model)
        except onnx.checker.ValidationError as e:
            raise CannError(self.where, f"invalid ONNX model: {str(e).strip().splitlines()[0]}") from None
        graph = model.graph
        init_names = {i.name for i in graph.initializer}
        inputs = [i for i in graph.input if i.name not in init_names]

        # fix symbolic input dimensions
        input_shape = dict(input_shape or {})
        names = {i.name for i in inputs}
        for n in input_shape:
            if n not in names:
                raise CannError(n, f"input_shape names no model input (inputs: {', '.join(sorted(names))})")
        fixed = onnx.ModelProto()
        fixed.CopyFrom(model)
        for vi in fixed.graph.input:
            if vi.name in init_names:
                continue
            dims = _dims(vi.type)
            if dims is None:
                raise CannError(vi.name, "model input has no tensor shape")
            if vi.name in input_shape:
                shape = tuple(int(d) for d in input_shape[vi.name])
                if len(shape) != len(dims):
                    raise CannError(vi.name, f"input_shape has rank {len(shape)}, the model input has rank {len(dims)}")
                for i, (d, s) in enumerate(zip(dims, shape)):
                    if isinstance(d, int) and d != s:
                        raise CannError(vi.name, f"input_shape dimension {i} is {s}, the model fixes it to {d}")
                del vi.type.tensor_type.shape.dim[:]
                for s in shape:
                    vi.type.tensor_type.shape.dim.add().dim_value = s
            else:
                for i, d in enumerate(dims):
                    if not isinstance(d, int):
                        what = f"'{d}'" if d else "unknown"
                        raise CannError(vi.name, f"dimension {i} is symbolic ({what}); fix it with input_shape")
        try:
            inferred = onnx.shape_inference.infer_shapes(fixed, check_type=True, strict_mode=True, data_prop=True)
        except Exception as e:
            raise CannError(self.where, f"ONNX shape inference failed: {str(e).strip().splitlines()[-1]}") from None
        ig = inferred.graph
        for vi in (*ig.input, *ig.value_info, *ig.output):
            self.types[vi.name] = vi.type
        for init in graph.initializer:
            self.consts[init.name] = numpy_helper.to_array(init)

        outputs = list(out_nodes) if out_nodes else [o.name for o in graph.output]
        producers: dict[str, int] = {}
        for i, node in enumerate(graph.node):
            for o in node.output:
                if o:
                    producers[o] = i
        known = producers.keys() | init_names | {i.name for i in inputs}
        for o in outputs:
            if o not in known:
                raise CannError(o, "output names no tensor of the model")

        # nodes the outputs depend on (graph.node is topologically sorted per the ONNX spec)
        needed: set[int] = set()
        stack = [producers[o] for o in outputs if o in producers]
        while stack:
            i = stack.pop()
            if i in needed:
                continue
            needed.add(i)
            stack.extend(producers[n] for n in graph.node[i].input if n in producers)

        # function signature
        arg_types = []
        for vi in inputs:
            arg_types.append(self.tensor_type_of_input(vi))
        self.block = Block(arg_types=arg_types)
        for vi, arg in zip(inputs, self.block.args):
            self.values[vi.name] = arg

        for i, node in enumerate(graph.node):
            if i in needed:
                self.convert_node(node, i)
        if self.diags:
            raise CannError.many(self.diags)

        results = []
        for o in outputs:
            if o in self.values:
                results.append(self.values[o])
            else:
                results.append(self.value(o))
        self.emit(func.ReturnOp(*results), "return")
        ftype = func.FunctionType.from_lists(arg_types, [r.type for r in results])
        fn = func.FuncOp("main", ftype, Region(self.block))
        fn.arg_attrs = _arg_attrs([vi.name for vi in inputs])
        fn.res_attrs = _arg_attrs(outputs)
        return ModuleOp([fn])

    def tensor_type_of_input(self, vi: onnx.ValueInfoProto) -> TensorType:
        t = self.types.get(vi.name, vi.type)
        dims = _dims(t)
        assert dims is not None and all(isinstance(d, int) for d in dims)
        return TensorType(g.element_type(_np_dtype(t.tensor_type.elem_type)), dims)

    def convert_node(self, node: onnx.NodeProto, index: int) -> None:
        name = _node_name(node, index)
        if any(n in self.poisoned for n in node.input):
            self.poisoned.update(node.output)
            return
        try:
            if all(self.is_const(n) for n in node.input) and node.op_type not in _NEVER_FOLD:
                try:
                    vals = self.fold(node)
                except Exception as e:
                    if node.domain not in ("", "ai.onnx") or node.op_type not in _CONVERTERS:
                        raise _Unsupported(f"cannot evaluate constant {node.op_type} (opset {self.opset}): {e}") from None
                    raise _Unsupported(f"cannot evaluate constant {node.op_type}: {e}") from None
                for o, v in zip(node.output, vals):
                    if o:
                        self.consts[o] = v
                return
            if node.domain not in ("", "ai.onnx") or node.op_type not in _CONVERTERS:
                dom = f"{node.domain}." if node.domain not in ("", "ai.onnx") else ""
                raise _Unsupported(f"unsupported operator {dom}{node.op_type} (opset {self.opset})")
            results = _CONVERTERS[node.op_type](self, node, name, _attrs(node))
            for o, r in zip(node.output, results):
                if o and r is not None:
                    self.values[o] = r
            for o in node.output[len(results):]:
                if o:
                    self.poisoned.add(o)  # optional outputs we do not produce (used only if imported)
        except _Unsupported as e:
            self.diags.append(Diagnostic(name, str(e)))
            self.poisoned.update(node.output)
        except CannError as e:
            self.diags.extend(e.diagnostics)
            self.poisoned.update(node.output)


def _arg_attrs(names: Sequence[str]) -> Any:
    from xdsl.dialects.builtin import ArrayAttr

    return ArrayAttr([DictionaryAttr({"graph.name": StringAttr(n)}) for n in names])


# ---------------------------------------------------------------------------------------------
# converters: (importer, node, name, attrs) -> list of result values (one per ONNX output)

_Conv = Callable[[_Importer, onnx.NodeProto, str, dict[str, Any]], list[SSAValue | None]]
_CONVERTERS: dict[str, _Conv] = {}
_NEVER_FOLD: set[str] = set()


def _converter(*op_types: str):
    def deco(fn: _Conv) -> _Conv:
        for t in op_types:
            _CONVERTERS[t] = fn
        return fn

    return deco


def _bad_attr(node: onnx.NodeProto, attr: str, value: Any, why: str = "") -> _Unsupported:
    return _Unsupported(f"unsupported attribute value {attr}={value!r} of {node.op_type}{': ' + why if why else ''}")


def _out_type(imp: _Importer, node: onnx.NodeProto, i: int = 0) -> TensorType:
    return imp.tensor_type(node.output[i], node.name)


def _check_unused_outputs(imp: _Importer, node: onnx.NodeProto, keep: int) -> None:
    extra = [o for o in node.output[keep:] if o]
    if not extra:
        return
    used = {n for nd in imp.model.graph.node for n in nd.input} | {o.name for o in imp.model.graph.output}
    for o in extra:
        if o in used:
            raise _Unsupported(f"output {o} of {node.op_type} is not supported (inference only)")


def _spatial(node: onnx.NodeProto, a: dict[str, Any], in_shape: Sequence[int], kernel: Sequence[int],
             ceil_mode: bool = False) -> tuple[list[int], list[int], list[int]]:
    """strides, pads (top, left, bottom, right), dilations; auto_pad resolved to explicit pads."""
    strides = list(a.get("strides", [1, 1]))
    dil = list(a.get("dilations", [1, 1]))
    pads = list(a.get("pads", [0, 0, 0, 0]))
    if len(strides) != 2:
        raise _bad_attr(node, "strides", strides, "only 2-D is supported")
    if len(dil) != 2:
        raise _bad_attr(node, "dilations", dil, "only 2-D is supported")
    if len(pads) != 4:
        raise _bad_attr(node, "pads", pads, "only 2-D is supported")
    auto = a.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto == "VALID":
        pads = [0, 0, 0, 0]
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = [0, 0, 0, 0]
        for i in range(2):
            out = -(-in_shape[i] // strides[i])
            total = max(0, (out - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 - in_shape[i])
            small, big = total // 2, total - total // 2
            pads[i], pads[i + 2] = (small, big) if auto == "SAME_UPPER" else (big, small)
    elif auto != "NOTSET":
        raise _bad_attr(node, "auto_pad", auto)
    return strides, pads, dil


@_converter("Conv")
def _conv(imp, node, name, a):
    x = imp.value(node.input[0])
    w = imp.value(node.input[1])
    b = imp.value(node.input[2]) if len(node.input) > 2 and node.input[2] else None
    ws = g._shape(w)
    if len(ws) != 4:
        raise _bad_attr(node, "kernel_shape", list(ws[2:]), "only 2-D convolution is supported")
    ks = list(a.get("kernel_shape", ws[2:]))
    if ks != list(ws[2:]):
        raise _bad_attr(node, "kernel_shape", ks, "does not match the weight shape")
    strides, pads, dil = _spatial(node, a, g._shape(x)[2:], ks)
    op = g.Conv2DOp(x, w, b, _out_type(imp, node), strides=strides, pads=pads, dilations=dil, group=a.get("group", 1))
    return [imp.emit(op, name).results[0]]


@_converter("BatchNormalization")
def _bn(imp, node, name, a):
    if a.get("training_mode", 0):
        raise _bad_attr(node, "training_mode", a["training_mode"], "only inference is supported")
    if imp.opset < 7 and not a.get("is_test", 1):
        raise _bad_attr(node, "is_test", a.get("is_test"), "only inference is supported")
    _check_unused_outputs(imp, node, 1)
    x, s, b, m, v = (imp.value(n) for n in node.input[:5])
    if len(g._shape(x)) < 2:
        raise _Unsupported("BatchNormalization input must have rank >= 2")
    op = g.BatchNormOp(x, s, b, m, v, epsilon=a.get("epsilon", 1e-5))
    return [imp.emit(op, name).results[0]]


@_converter("Relu")
def _relu(imp, node, name, a):
    return [imp.emit(g.ReluOp(imp.value(node.input[0])), name).results[0]]


_BINARY = {"Add": g.AddOp, "Sub": g.SubOp, "Mul": g.MulOp, "Div": g.DivOp}


@_converter("Add", "Sub", "Mul", "Div")
def _binary(imp, node, name, a):
    if imp.opset < 7 and a.get("broadcast", 0) and "axis" in a:
        raise _bad_attr(node, "axis", a["axis"], "legacy axis broadcasting is not supported")
    lhs, rhs = imp.value(node.input[0]), imp.value(node.input[1])
    return [imp.emit(_BINARY[node.op_type](lhs, rhs, _out_type(imp, node)), name).results[0]]


@_converter("Sum")
def _sum(imp, node, name, a):
    vals = [imp.value(n) for n in node.input]
    acc = vals[0]
    if len(vals) == 1:
        return [acc]
    out = _out_type(imp, node)
    for i, v in enumerate(vals[1:]):
        rt = out if i == len(vals) - 2 else None
        acc = imp.emit(g.AddOp(acc, v, rt), name).results[0]
    return [acc]


@_converter("MaxPool", "AveragePool")
def _pool(imp, node, name, a):
    x = imp.value(node.input[0])
    ks = list(a.get("kernel_shape", []))
    if len(ks) != 2 or len(g._shape(x)) != 4:
        raise _bad_attr(node, "kernel_shape", ks, "only 2-D pooling is supported")
    if node.op_type == "MaxPool":
        _check_unused_outputs(imp, node, 1)
        if a.get("storage_order", 0) not in (0, 1):
            raise _bad_attr(node, "storage_order", a["storage_order"])
    strides, pads, dil = _spatial(node, a, g._shape(x)[2:], ks)
    cm = int(a.get("ceil_mode", 0))
    rt = _out_type(imp, node)
    if node.op_type == "MaxPool":
        op = g.MaxPoolOp(x, rt, kernel_shape=ks, strides=strides, pads=pads, dilations=dil, ceil_mode=cm)
    else:
        op = g.AvgPoolOp(x, rt, kernel_shape=ks, strides=strides, pads=pads, dilations=dil, ceil_mode=cm,
                         count_include_pad=int(a.get("count_include_pad", 0)))
    return [imp.emit(op, name).results[0]]


@_converter("GlobalAveragePool")
def _gap(imp, node, name, a):
    x = imp.value(node.input[0])
    if len(g._shape(x)) < 3:
        raise _Unsupported("GlobalAveragePool input must have rank >= 3")
    return [imp.emit(g.GlobalAvgPoolOp(x), name).results[0]]


@_converter("Gemm")
def _gemm(imp, node, name, a):
    if imp.opset < 7 and a.get("broadcast", 1) == 0:
        raise _bad_attr(node, "broadcast", 0)
    av, bv = imp.value(node.input[0]), imp.value(node.input[1])
    cv = imp.value(node.input[2]) if len(node.input) > 2 and node.input[2] else None
    op = g.GemmOp(av, bv, cv, _out_type(imp, node), alpha=a.get("alpha", 1.0), beta=a.get("beta", 1.0),
                  trans_a=a.get("transA", 0), trans_b=a.get("transB", 0))
    return [imp.emit(op, name).results[0]]


@_converter("MatMul")
def _matmul(imp, node, name, a):
    av, bv = imp.value(node.input[0]), imp.value(node.input[1])
    return [imp.emit(g.MatMulOp(av, bv, _out_type(imp, node)), name).results[0]]


@_converter("Concat")
def _concat(imp, node, name, a):
    vals = [imp.value(n) for n in node.input if n]
    rank = len(g._shape(vals[0]))
    axis = int(a.get("axis", 1))  # opset < 4 default
    if not -rank <= axis < rank:
        raise _bad_attr(node, "axis", axis, f"out of range for rank {rank}")
    axis %= rank
    return [imp.emit(g.ConcatOp(vals, axis, _out_type(imp, node)), name).results[0]]


@_converter("Reshape", "Flatten", "Unsqueeze", "Squeeze")
def _reshape(imp, node, name, a):
    x = imp.value(node.input[0])
    for extra in node.input[1:]:
        if extra and not imp.is_const(extra):
            raise _Unsupported(f"{node.op_type} with a non-constant {extra} (data-dependent shape)")
    rt = _out_type(imp, node)
    if rt.get_element_type() != g._elt(x):
        raise _Unsupported("result element type differs from the input")
    return [imp.emit(g.ReshapeOp(x, rt.get_shape()), name).results[0]]


@_converter("Transpose")
def _transpose(imp, node, name, a):
    x = imp.value(node.input[0])
    r = len(g._shape(x))
    perm = list(a.get("perm", range(r - 1, -1, -1)))
    if sorted(perm) != list(range(r)):
        raise _bad_attr(node, "perm", perm)
    return [imp.emit(g.TransposeOp(x, perm), name).results[0]]


@_converter("Softmax")
def _softmax(imp, node, name, a):
    x = imp.value(node.input[0])
    s = g._shape(x)
    r = len(s)
    axis = int(a.get("axis", 1 if imp.opset < 13 else -1))
    if not -r <= axis < r:
        raise _bad_attr(node, "axis", axis, f"out of range for rank {r}")
    axis %= r
    if imp.opset >= 13 or axis == r - 1:
        return [imp.emit(g.SoftmaxOp(x, axis), name).results[0]]
    # opset < 13: softmax over the flattened [prod(dims[:axis]), prod(dims[axis:])] matrix
    flat = imp.emit(g.ReshapeOp(x, [math.prod(s[:axis]), math.prod(s[axis:])]), name).results[0]
    sm = imp.emit(g.SoftmaxOp(flat, 1), name).results[0]
    return [imp.emit(g.ReshapeOp(sm, s), name).results[0]]


@_converter("LRN")
def _lrn(imp, node, name, a):
    x = imp.value(node.input[0])
    if "size" not in a:
        raise _Unsupported("LRN without a size attribute")
    op = g.LRNOp(x, size=a["size"], alpha=a.get("alpha", 1e-4), beta=a.get("beta", 0.75), bias=a.get("bias", 1.0))
    return [imp.emit(op, name).results[0]]


@_converter("Dropout", "Identity")
def _forward(imp, node, name, a):
    if node.op_type == "Dropout":
        if len(node.input) > 2 and node.input[2] and (not imp.is_const(node.input[2]) or bool(imp.consts[node.input[2]])):
            raise _Unsupported("Dropout in training mode is not supported")
        _check_unused_outputs(imp, node, 1)
    return [imp.value(node.input[0])]


@_converter("Shape")
def _shape_op(imp, node, name, a):
    """The shape of a static tensor is a constant."""
    s = np.array(imp.tensor_type(node.input[0], name).get_shape(), np.int64)
    if imp.opset >= 15:
        s = s[int(a.get("start", 0)) : int(a.get("end", len(s)))]
    imp.consts[node.output[0]] = s
    return [None]


SUPPORTED_OPS = sorted(set(_CONVERTERS) | {"Constant", "ConstantOfShape"})


def import_onnx(
    model: str | os.PathLike | onnx.ModelProto,
    *,
    input_shape: dict[str, tuple[int, ...]] | None = None,
    out_nodes: list[str] | None = None,
) -> ModuleOp:
    """Import an ONNX model (path or ``ModelProto``) into a ``graph``-dialect module (verified)."""
    m, where = _load(model)
    module = _Importer(m, where).run(input_shape, out_nodes)
    module.verify()
    return module
