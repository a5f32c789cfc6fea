"""ONNX importer: an ONNX model becomes a ``builtin.module`` holding ``func.func @main`` of ``graph`` ops.

Steps: load, ``onnx.checker.check_model`` plus what it lets through (an opset newer than the
installed onnx defines, an output without a dtype, no outputs), fix symbolic input dimensions
(``input_shape``), run
ONNX shape inference (``strict_mode``, ``data_prop``), then walk the nodes the outputs depend
on in topological order:

* a node whose inputs are all constants is evaluated at import time
  (:mod:`cann.frontend.onnx_fold`) and becomes constant data (emitted as ``graph.constant``
  where a non-constant op uses it); a node it cannot evaluate runs as its device kernel;
* a node whose outputs are all zero-size tensors becomes empty constants (no kernel);
* ``Dropout`` (inference) and ``Identity`` forward their input;
* every other supported node becomes ``graph`` ops located at ``NameLoc(node name)``;
* unsupported operators and attribute values are collected and raised together as one
  :class:`~cann.errors.CannError` with one diagnostic per node.

Result types always come from ONNX shape inference, never re-derived here.

This module is the driver: the converters live in the ``onnx_*`` converter modules (imported
here, each registering its operators in the table of :mod:`cann.frontend.onnx_registry`, which
also holds the helpers they share), and ``SUPPORTED_OPS`` is read off that table.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np
import onnx
from onnx import helper, numpy_helper
from xdsl.dialects import func
from xdsl.dialects.builtin import BFloat16Type, DictionaryAttr, ModuleOp, StringAttr, TensorType
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.utils.exceptions import VerifyException

from cann.dialects import graph as g
from cann.errors import CannError, Diagnostic
from cann.fileio import parse_protobuf
from cann.frontend import onnx_composite  # noqa: F401  (registers RMS/Group/Instance/Lp/MVN normalization, Attention)
from cann.frontend import onnx_core  # noqa: F401  (registers Conv, pools, elementwise, reductions, Resize, ...)
from cann.frontend import onnx_int  # noqa: F401  (comparisons, boolean logic, integer math, int/bool casts)
from cann.frontend import onnx_losses  # noqa: F401  (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss)
from cann.frontend import onnx_math  # noqa: F401  (trig / hyperbolic, Mish, ThresholdedRelu, Shrink, GlobalMaxPool)
from cann.frontend import onnx_rearrange  # noqa: F401  (DepthToSpace, Tile, Trilu, CumSum, Einsum, ...)
from cann.frontend import onnx_signal  # noqa: F401  (DFT, STFT)
from cann.frontend.onnx_fold import FoldError, fold_node
from cann.frontend.onnx_function import function_body, merged_opsets
from cann.frontend.onnx_registry import _CONVERTERS, _NEVER_FOLD, _Conv, _dims, _Unsupported
from cann.frontend.onnx_spatial import floor_mode_equivalent, infer_shapes_pool_rule  # (registers N-D Conv, pools)
from cann.options import resolve_out_nodes
from cann.tensor_trace import note, tracing

__all__ = ["import_onnx", "SUPPORTED_OPS"]

#: operators whose output shrinks by a sliding window: an empty output from a non-empty input means the
#: window is longer than the padded input (onnx_registry.check_window_fits reports it)
_WINDOW_OPS = frozenset({"Conv", "MaxPool", "AveragePool", "LpPool"})


def _np_dtype(elem_type: int) -> np.dtype:
    return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))


def _load(model: str | os.PathLike | onnx.ModelProto) -> tuple[onnx.ModelProto, str]:
    if isinstance(model, onnx.ModelProto):
        return model, model.graph.name or "<model>"
    path = os.fspath(model)
    m = parse_protobuf(onnx.ModelProto(), path, "an ONNX model")
    if m.ir_version == 0 or not m.HasField("graph"):
        raise CannError(path, "not an ONNX model: no IR version or graph")
    try:
        onnx.load_external_data_for_model(m, os.path.dirname(os.path.abspath(path)))
    except Exception as e:
        raise CannError(path, f"cannot load external data: {e}") from None
    return m, path


_BF16 = onnx.TensorProto.BFLOAT16


def _elem(elem_type: int, exc: type[Exception]):
    """The xDSL element type a tensor of an ONNX element type is computed in; ``exc`` when it has
    none. bfloat16 is a storage dtype (the vector unit computes in float32, ascend-core.md): inside
    the graph a bfloat16 tensor is float32, converted at the model's inputs and outputs and rounded
    where a Cast produces bfloat16."""
    if elem_type == _BF16:
        return g.f32
    try:
        return g.element_type(_np_dtype(elem_type))
    except Exception:
        name = onnx.TensorProto.DataType.Name(elem_type) if elem_type in onnx.TensorProto.DataType.values() else elem_type
        raise exc(f"unsupported dtype {name}") from None


def _attrs(node: onnx.NodeProto) -> dict[str, Any]:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _node_name(node: onnx.NodeProto, index: int) -> str:
    return node.name or f"{node.op_type}_{index}"




#: the newest opset of each domain the installed onnx defines (its schemas, shape inference and
#: reference implementation stop there)
_KNOWN_OPSETS = {"": onnx.defs.onnx_opset_version(), "ai.onnx.ml": onnx.defs.onnx_ml_opset_version()}


def _check_declared(model: onnx.ModelProto, where: str) -> None:
    """What ``onnx.checker`` lets through but onnxruntime refuses: an opset newer than the
    installed onnx defines, a graph output without an element type (one-line :class:`CannError`)."""
    for o in model.opset_import:
        domain = "" if o.domain == "ai.onnx" else o.domain
        newest = _KNOWN_OPSETS.get(domain)
        if newest is not None and o.version > newest:
            raise CannError(where, f"opset {o.version} of domain {domain or 'ai.onnx'} is newer than the newest "
                                   f"the installed onnx {onnx.__version__} defines ({newest})")
    for vi in model.graph.output:
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type == onnx.TensorProto.UNDEFINED:
            raise CannError(vi.name, "graph output has no element type (elem_type 0, UNDEFINED)")


class _Importer:
    def __init__(self, model: onnx.ModelProto, where: str):
        self.model = model
        self.where = where
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
        #: the opsets the node being converted follows (a function body's own, while expanding one)
        self.opset_imports = list(model.opset_import)
        self.types: dict[str, onnx.TypeProto] = {}
        self.consts: dict[str, np.ndarray] = {}
        self.values: dict[str, SSAValue] = {}
        self.const_values: dict[str, SSAValue] = {}
        self.poisoned: set[str] = set()
        self.diags: list[Diagnostic] = []
        self.block: Block | None = None
        #: tensor name -> the function-body node that produced it (bodies of expanded functions)
        self.body_producer: dict[str, onnx.NodeProto] = {}
        self.input_names: set[str] = set()

    # -- values ------------------------------------------------------------------------------

    def is_const(self, name: str) -> bool:
        return name == "" or name in self.consts

    def emit(self, op: Operation, loc: str) -> Operation:
        """Append ``op`` (named ``loc``) after verifying it: a model whose tensors contradict each
        other (a Reshape to another element count, a Conv input with the wrong channel count) is a
        one-line error on that node, not an invalid module."""
        op.location = g.name_loc(loc)
        try:
            if not isinstance(op, func.ReturnOp):  # (a return verifies against its function)
                op.verify()
        except VerifyException as e:
            raise _Unsupported(f"invalid model: {str(e).strip().splitlines()[0]}") from None
        assert self.block is not None
        self.block.add_op(op)
        return op

    def value(self, name: str) -> SSAValue:
        if name in self.values:
            return self.values[name]
        if name in self.consts:
            if name not in self.const_values:
                c = self.consts[name]
                c = c.astype(np.float32) if c.dtype == ml_dtypes.bfloat16 else c
                self.const_values[name] = self.emit(g.make_constant(c, name), name).results[0]
            return self.const_values[name]
        raise CannError(name, "tensor has no producer")

    def tensor_type(self, name: str, node: str) -> TensorType:
        if name in self.consts:
            a = self.consts[name]
            return TensorType(g.f32 if a.dtype == ml_dtypes.bfloat16 else g.element_type(a.dtype), a.shape)
        t = self.types.get(name)
        dims = _dims(t) if t is not None else None
        if t is None or dims is None or any(not isinstance(d, int) for d in dims):
            raise _Unsupported(f"shape inference left the shape of tensor '{name}' unknown")
        if min(dims, default=0) < 0:
            raise _Unsupported(f"shape inference gave tensor '{name}' a negative dimension: {dims}")
        return TensorType(_elem(t.tensor_type.elem_type, _Unsupported), dims)

    # -- folding -----------------------------------------------------------------------------

    def fold(self, node: onnx.NodeProto) -> list[np.ndarray | None]:
        """The values of ``node``'s outputs (all its inputs are constants), in the shapes and
        dtypes the operator defines; :class:`FoldError` when they cannot be computed here."""
        ins = [self.consts[n] if n else None for n in node.input]
        expected = [self.types.get(o) if o else None for o in node.output]
        return fold_node(node, ins, self.opset_imports, self.model.ir_version or 8, expected)

    # -- entry -------------------------------------------------------------------------------

    def run(self, input_shape: dict[str, tuple[int, ...]] | None, out_nodes: list[str] | None) -> ModuleOp:
        model = self.model
        try:
            onnx.checker.check_model(model)
        except onnx.checker.ValidationError as e:
            raise CannError(self.where, f"invalid ONNX model: {str(e).strip().splitlines()[0]}") from None
        graph = model.graph
        _check_declared(model, self.where)
        init_names = {i.name for i in graph.initializer}
        inputs = [i for i in graph.input if i.name not in init_names]
        self.input_names = {i.name for i in inputs}

        # fix symbolic input dimensions
        input_shape = dict(input_shape or {})
        names = {i.name for i in inputs}
        for n in input_shape:
            if n not in names:
                raise CannError(n, f"input_shape names no model input (inputs: {', '.join(sorted(names))})")
        for vi in graph.input:  # onnx's shape inference aborts on them
            for i, d in enumerate(_dims(vi.type) or ()):
                if isinstance(d, int) and d < 0:
                    raise CannError(vi.name, f"dimension {i} is negative ({d})")
        fixed = onnx.ModelProto()
        fixed.CopyFrom(model)
        negative = []  # declared negative dimensions of computed tensors, reported after the nodes
        for vi in (*fixed.graph.output, *fixed.graph.value_info):
            # (a window longer than its input, as onnx's own inference writes it): inference computes
            # the shape again, and the node producing it reports the cause first
            bad = [(i, d) for i, d in enumerate(_dims(vi.type) or ()) if isinstance(d, int) and d < 0]
            if bad:
                negative.append(Diagnostic(vi.name, f"dimension {bad[0][0]} is negative ({bad[0][1]})"))
                vi.type.tensor_type.ClearField("shape")
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
                        example = ",".join(str(x) if isinstance(x, int) else "1" for x in dims)
                        raise CannError(vi.name, f"dimension {i} is symbolic ({what}); fix it with input_shape, "
                                                 f"e.g. --input_shape \"{vi.name}:{example}\"")
        try:
            inferred = infer_shapes_pool_rule(fixed, lambda m: onnx.shape_inference.infer_shapes(
                m, check_type=True, strict_mode=True, data_prop=True))
        except Exception as e:
            raise CannError(self.where, f"ONNX shape inference failed: {str(e).strip().splitlines()[-1]}") from None
        ig = inferred.graph
        for vi in (*ig.input, *ig.value_info, *ig.output):
            self.types[vi.name] = vi.type
        for init in graph.initializer:
            try:
                self.consts[init.name] = numpy_helper.to_array(init)
            except (ValueError, TypeError) as e:  # data of another size than its dims say, an unknown type
                raise CannError(init.name, f"initializer data does not match its dims {list(init.dims)}: {e}") from None

        producers: dict[str, int] = {}
        for i, node in enumerate(graph.node):
            for o in node.output:
                if o:
                    producers[o] = i
        known = producers.keys() | init_names | {i.name for i in inputs}
        outputs = (resolve_out_nodes(list(out_nodes), known, {n.name: list(n.output) for n in graph.node if n.name})
                   if out_nodes else [o.name for o in graph.output])
        if not outputs:
            raise CannError(self.where, "the graph has no outputs (and no out_nodes name any)")

        # nodes the outputs depend on (graph.node is topologically sorted per the ONNX spec)
        needed: set[int] = set()
        stack = [producers[o] for o in outputs if o in producers]
        while stack:
            i = stack.pop()
            if i in needed:
                continue
            needed.add(i)
            stack.extend(producers[n] for n in _reads(graph.node[i]) if n in producers)

        # function signature
        arg_types = []
        for vi in inputs:
            arg_types.append(self.tensor_type_of_input(vi))
        self.block = Block(arg_types=arg_types)
        for vi, arg in zip(inputs, self.block.args):
            self.values[vi.name] = arg
            if isinstance(arg.type.get_element_type(), BFloat16Type):  # computed in float32
                self.values[vi.name] = self.emit(g.CastOp(arg, g.f32), vi.name).results[0]
            shape = arg.type.get_shape()
            if 0 in shape:  # an empty input is fully known: its consumers fold (e.g. an empty reduction)
                self.consts[vi.name] = np.zeros(shape, g.numpy_dtype(arg.type.get_element_type()))

        for i, node in enumerate(graph.node):
            if i in needed:
                self.convert_node(node, i)
        if self.diags or negative:
            raise CannError.many(self.diags or negative)

        results = []
        for o in outputs:
            if o in self.values:
                results.append(self.values[o])
            else:
                results.append(self.value(o))
            t = self.types.get(o)
            if t is not None and t.HasField("tensor_type") and t.tensor_type.elem_type == _BF16:
                results[-1] = self.emit(g.CastOp(results[-1], BFloat16Type()), o).results[0]
        self.emit(func.ReturnOp(*results), "return")
        if tracing():  # (cann.accuracy: which value is which ONNX tensor, its consumers, the folded tensors)
            note("onnx_values", dict(self.values))
            note("onnx_uses", {o: [(u.operation, u.index) for u in v.uses] for o, v in self.values.items()})
            note("onnx_constants", set(self.consts))
        ftype = func.FunctionType.from_lists(arg_types, [r.type for r in results])
        fn = func.FuncOp("main", ftype, Region(self.block))
        fn.arg_attrs = _arg_attrs([vi.name for vi in inputs])
        fn.res_attrs = _arg_attrs(outputs)
        return ModuleOp([fn])

    def tensor_type_of_input(self, vi: onnx.ValueInfoProto) -> TensorType:
        t = self.types.get(vi.name, vi.type)
        dims = _dims(t)
        assert dims is not None and all(isinstance(d, int) for d in dims)
        if t.tensor_type.elem_type == _BF16:
            return TensorType(BFloat16Type(), dims)
        try:
            return TensorType(_elem(t.tensor_type.elem_type, ValueError), dims)
        except ValueError as e:
            raise CannError(vi.name, f"model input: {e}") from None

    def _static(self, name: str) -> bool:
        t = self.types.get(name)
        dims = _dims(t) if t is not None else None
        return dims is not None and all(isinstance(d, int) for d in dims)

    def infer_node(self, node: onnx.NodeProto) -> None:
        """Fill in output types that whole-model shape inference left unknown (typically inside
        expanded functions, where shapes come from Shape/Reshape chains): with the inputs folded
        so far as initializers, onnx's shape inference runs again on this one node."""
        if all(not o or self._static(o) for o in node.output):
            return
        inits, vis = [], []
        for n in dict.fromkeys(i for i in node.input if i):
            if n in self.consts:
                inits.append(numpy_helper.from_array(np.asarray(self.consts[n]), n))
            elif n in self.types:
                vis.append(helper.make_value_info(n, self.types[n]))
            else:
                return
        outs = [helper.make_value_info(o, onnx.TypeProto()) for o in node.output if o]
        x0 = self.types.get(node.input[0]) if node.input and node.input[0] in self.types else None
        node = floor_mode_equivalent(node, _dims(x0) if x0 is not None else None) or node  # the ceil_mode rule
        g = helper.make_graph([node], "infer", vis, outs, initializer=inits)
        m = helper.make_model(g, opset_imports=list(self.opset_imports), ir_version=self.model.ir_version or 8)
        try:
            inferred = onnx.shape_inference.infer_shapes(m, strict_mode=True, data_prop=True)
        except Exception:
            return  # the conversion reports the unknown shape
        for vi in (*inferred.graph.output, *inferred.graph.value_info):
            if vi.name in node.output and not self._static(vi.name):
                dims = _dims(vi.type)
                if dims is not None and all(isinstance(d, int) for d in dims):
                    self.types[vi.name] = vi.type

    def empty_outputs(self, node: onnx.NodeProto) -> bool:
        """When every output of ``node`` is a zero-size tensor (shape inference gives a static
        shape with a 0), record them as (empty) constants and return True: zero-size tensors are
        legal ONNX, need no kernel, and their consumers see them as known values."""
        outs = [o for o in node.output if o]
        if node.op_type in _WINDOW_OPS and node.domain in ("", "ai.onnx"):
            return False  # a window longer than its padded input is an error on the node, not an empty map
        empty = {}
        for o in outs:
            t = self.types.get(o)
            dims = _dims(t) if t is not None else None
            if dims is None or not all(isinstance(d, int) for d in dims) or 0 not in dims:
                return False
            empty[o] = np.zeros(dims, _np_dtype(t.tensor_type.elem_type))
        self.consts.update(empty)
        return bool(outs)

    def opset_name(self, node: onnx.NodeProto) -> str:
        """The opset ``node`` follows, as diagnostics name it: ``opset 17`` for the default
        domain, ``com.example opset 1`` for another (``... not imported`` when the model imports
        no version of that domain)."""
        if node.domain in ("", "ai.onnx"):
            return f"opset {self.opset}"
        v = next((o.version for o in self.opset_imports if o.domain == node.domain), None)
        return f"{node.domain} opset {v}" if v is not None else f"{node.domain} opset not imported"

    def expand_function(self, node: onnx.NodeProto, name: str) -> bool:
        """Import the function body of ``node``'s schema in its place (see
        :mod:`cann.frontend.onnx_function`); False when the schema defines none."""
        domain = node.domain if node.domain != "ai.onnx" else ""
        opset = next((o.version for o in self.opset_imports if (o.domain or "") == domain), None)
        if opset is None:
            return False
        types = [None if not n else self.types.get(n) if n not in self.consts else
                 helper.make_tensor_type_proto(helper.np_dtype_to_tensor_dtype(self.consts[n].dtype), self.consts[n].shape)
                 for n in node.input]
        try:
            body = function_body(node, opset, types, f"{name}/")
        except ValueError as e:
            raise _Unsupported(f"cannot expand the function {node.op_type} (opset {opset}): {e}") from None
        if body is None:
            return False
        saved = self.opset, self.opset_imports
        self.opset_imports = merged_opsets(self.opset_imports, body.opset_import)
        self.opset = next((o.version for o in self.opset_imports if not o.domain), self.opset)
        try:
            for k, inner in enumerate(body.nodes):
                self.body_producer.update((o, inner) for o in inner.output if o)
                self.convert_node(inner, k)
        finally:
            self.opset, self.opset_imports = saved
        return True

    def inputs_behind(self, names: Sequence[str]) -> tuple[str, ...]:
        """``names`` with each tensor of an expanded function body (a name the model never
        spells, e.g. HannWindow's Range length) replaced by the model inputs its value comes
        from, traced back through the body to the function node's inputs: knowing those at
        compile time makes it a constant by folding (what :mod:`cann.backend` specializes on).
        A tensor that depends on anything else is kept as it is."""
        out: list[str] = []
        for n in names:
            found, stack, seen = [], [n], set()
            while stack:
                t = stack.pop()
                if not t or t in seen or t in self.consts:
                    continue
                seen.add(t)
                if t in self.body_producer:
                    stack.extend(self.body_producer[t].input)
                elif t in self.input_names:
                    found.append(t)
                else:  # a model-level intermediate: not a value the user feeds
                    found = [n]
                    break
            out.extend(found)
        return tuple(dict.fromkeys(out))

    def inline_branch(self, node: onnx.NodeProto) -> None:
        """An ``If`` whose condition is a constant is the branch it selects: that subgraph's nodes
        are imported in its place (folding where their inputs are constants, as kernels
        otherwise; they read outer-scope tensors by name) and its outputs become the If's."""
        cond = np.asarray(self.consts[node.input[0]])
        if cond.size != 1:
            raise _Unsupported(f"If condition of shape {list(cond.shape)} (one element expected)")
        branch = _attrs(node)["then_branch" if bool(cond.reshape(-1)[0]) else "else_branch"]
        for vi in (*branch.value_info, *branch.output):
            if vi.name not in self.types and _dims(vi.type) is not None:
                self.types[vi.name] = vi.type
        for init in branch.initializer:
            self.consts[init.name] = numpy_helper.to_array(init)
        for k, inner in enumerate(branch.node):
            self.convert_node(inner, k)
        for o, bo in zip(node.output, branch.output):
            if not o:
                continue
            if bo.name in self.poisoned:
                self.poisoned.add(o)
            elif bo.name in self.consts:
                self.consts[o] = self.consts[bo.name]
            else:
                self.values[o] = self.value(bo.name)

    def convert_node(self, node: onnx.NodeProto, index: int) -> None:
        name = _node_name(node, index)
        if any(n in self.poisoned for n in node.input):
            self.poisoned.update(node.output)
            if node.domain not in ("", "ai.onnx") or node.op_type not in _CONVERTERS:
                # downstream of another problem, but unsupported in its own right: say so too
                self.diags.append(Diagnostic(name, _unsupported_op(node, self.opset_name(node))))
            return
        try:
            if node.op_type == "If" and node.domain in ("", "ai.onnx") and self.is_const(node.input[0]):
                self.inline_branch(node)
                return
            self.infer_node(node)
            unfoldable: FoldError | None = None
            # (an operator ONNX does not define, e.g. of a custom domain, has no evaluator: unsupported)
            if (all(self.is_const(n) for n in node.input) and node.op_type not in _NEVER_FOLD
                    and onnx.defs.has(node.op_type, "" if node.domain == "ai.onnx" else node.domain)):
                try:
                    vals = self.fold(node)
                except FoldError as e:  # not computable at compile time: a device kernel computes it
                    unfoldable = e
                else:
                    for o, v in zip(node.output, vals):
                        if o:
                            self.consts[o] = v
                    return
            if unfoldable is None and self.empty_outputs(node):
                return
            if node.domain not in ("", "ai.onnx") or node.op_type not in _CONVERTERS:
                if self.expand_function(node, name):
                    return
                if unfoldable is not None:
                    raise _Unsupported(_unfoldable(node, self.opset_name(node), unfoldable))
                raise _Unsupported(_unsupported_op(node, self.opset_name(node)))
            try:
                results = _CONVERTERS[node.op_type](self, node, name, _attrs(node))
            except (_Unsupported, CannError):
                if unfoldable is None:
                    raise
                # neither folded nor a kernel: the fold's failure is the cause to report
                raise _Unsupported(_unfoldable(node, self.opset_name(node), unfoldable)) from None
            for o, r in zip(node.output, results):
                if o and r is not None:
                    self.values[o] = r
            for o in node.output[len(results):]:
                if o:
                    self.poisoned.add(o)  # optional outputs we do not produce (used only if imported)
        except _Unsupported as e:
            self.diags.append(Diagnostic(name, str(e), self.inputs_behind(e.needs_constant)))
            self.poisoned.update(node.output)
        except CannError as e:
            self.diags.extend(e.diagnostics)
            self.poisoned.update(node.output)


def _reads(node: onnx.NodeProto) -> list[str]:
    """The tensors ``node`` reads: its inputs and the outer-scope tensors its subgraphs (If
    branches, Loop / Scan bodies) use by name."""
    names = list(node.input)
    for a in node.attribute:
        for sub in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
            for inner in sub.node:
                names.extend(_reads(inner))
    return names


def _unsupported_op(node: onnx.NodeProto, opset: str) -> str:
    dom = f"{node.domain}." if node.domain not in ("", "ai.onnx") else ""
    return f"unsupported operator {dom}{node.op_type} ({opset})"


def _unfoldable(node: onnx.NodeProto, opset: str, why: FoldError) -> str:
    return f"cannot evaluate constant {node.op_type} ({opset}): {why}"


def _arg_attrs(names: Sequence[str]) -> Any:
    from xdsl.dialects.builtin import ArrayAttr

    return ArrayAttr([DictionaryAttr({"graph.name": StringAttr(n)}) for n in names])


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


# ---------------------------------------------------------------------------------------------
# the converter table: every converter module is imported above (each registers its operators);
# what is left is the bfloat16 rounding of casts, wrapped around the final Cast / CastLike converters


def _rounds_to_bf16(original: _Conv) -> _Conv:
    """Cast / CastLike to bfloat16: the float32 the graph computes in, rounded to bfloat16 (to
    nearest even) and widened back (bfloat16 is a storage dtype, see ``_elem``)."""

    def conv(imp, node, name, a):
        res = original(imp, node, name, a)
        if node.op_type == "Cast":
            to_bf16 = a.get("to") == _BF16
        else:
            t = imp.types.get(node.input[1])
            c = imp.consts.get(node.input[1])
            to_bf16 = (c is not None and c.dtype == ml_dtypes.bfloat16) or (
                c is None and t is not None and t.HasField("tensor_type") and t.tensor_type.elem_type == _BF16)
        if not to_bf16 or res[0] is None:
            return res
        r = imp.emit(g.CastOp(res[0], BFloat16Type()), name).results[0]
        return [imp.emit(g.CastOp(r, g._elt(res[0])), name).results[0]]

    return conv


for _t in ("Cast", "CastLike"):
    _CONVERTERS[_t] = _rounds_to_bf16(_CONVERTERS[_t])

#: the operators the importer converts (``Constant`` is folded by the importer itself)
SUPPORTED_OPS = sorted(set(_CONVERTERS) | {"Constant", "ConstantOfShape"})
