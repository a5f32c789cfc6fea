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
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
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
from cann.frontend.onnx_fold import FoldError, fold_node
from cann.frontend.onnx_function import function_body, merged_opsets
from cann.options import resolve_out_nodes

__all__ = ["import_onnx", "SUPPORTED_OPS"]

#: operators whose output shrinks by a sliding window: an empty output from a non-empty input means the
#: window is longer than the padded input (onnx_spatial.check_window_fits reports it)
_WINDOW_OPS = frozenset({"Conv", "MaxPool", "AveragePool", "LpPool"})


class _Unsupported(Exception):
    """Raised by a converter: this node cannot be imported (one diagnostic). ``needs_constant``:
    the tensors whose compile-time values would make it importable (see ``Diagnostic``)."""

    def __init__(self, message: str, needs_constant: tuple[str, ...] = ()):
        super().__init__(message)
        self.needs_constant = tuple(needs_constant)


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
        for vi in (*graph.input, *graph.output, *graph.value_info):  # onnx's shape inference aborts on them
            for i, d in enumerate(_dims(vi.type) or ()):
                if isinstance(d, int) and d < 0:
                    raise CannError(vi.name, f"dimension {i} is negative ({d})")
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
            from cann.frontend.onnx_spatial import infer_shapes_pool_rule

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
        if self.diags:
            raise CannError.many(self.diags)

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
        from cann.frontend.onnx_spatial import floor_mode_equivalent

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
    for i in range(2):  # (onnx's shape inference has checked the signs)
        if (kernel[i] - 1) * dil[i] + 1 > in_shape[i] + pads[i] + pads[i + 2]:
            raise _bad_attr(node, "kernel_shape", list(kernel), f"the (dilated) window is larger than the padded "
                                                                f"input {list(in_shape)}")
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
    # empty inputs add nothing (e.g. the pass-through part of a full-width RotaryEmbedding)
    names = [n for n in node.input if n and not (n in imp.consts and imp.consts[n].size == 0)] or [node.input[0]]
    vals = [imp.value(n) for n in names]
    if len(vals) == 1 and g._shape(vals[0]) == tuple(_out_type(imp, node).get_shape()):
        return [vals[0]]
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
            raise _Unsupported(f"{node.op_type} with a non-constant {extra} (data-dependent shape)", (extra,))
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


def _single_axis(imp, node, name, a, x: SSAValue, op_cls) -> list[SSAValue]:
    """Softmax / Hardmax: one axis from opset 13; before, over the flattened
    [prod(dims[:axis]), prod(dims[axis:])] matrix (the opset < 13 rule)."""
    s = g._shape(x)
    r = len(s)
    axis = int(a.get("axis", 1 if imp.opset < 13 else -1))
    if not -r <= axis < r:
        raise _bad_attr(node, "axis", axis, f"out of range for rank {r}")
    axis %= r
    if imp.opset >= 13 or axis == r - 1:
        return [imp.emit(op_cls(x, axis), name).results[0]]
    flat = imp.emit(g.ReshapeOp(x, [math.prod(s[:axis]), math.prod(s[axis:])]), name).results[0]
    y = imp.emit(op_cls(flat, 1), name).results[0]
    return [imp.emit(g.ReshapeOp(y, list(s)), name).results[0]]


@_converter("Softmax")
def _softmax(imp, node, name, a):
    return _single_axis(imp, node, name, a, imp.value(node.input[0]), g.SoftmaxOp)


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


@_converter("Size")
def _size_op(imp, node, name, a):
    """The element count of a static tensor is a constant (int64 scalar)."""
    imp.consts[node.output[0]] = np.array(math.prod(imp.tensor_type(node.input[0], name).get_shape()), np.int64)
    return [None]


@_converter("Range", "ConstantOfShape")
def _shape_valued(imp, node, name, a):
    """Shape-valued ops fold at compile time (the importer folds them when their inputs are
    constant); a runtime operand would make the output shape data-dependent."""
    runtime = tuple(n for n in node.input if n and not imp.is_const(n))
    if not runtime:  # constant inputs the folder could not evaluate (it reports why)
        raise _Unsupported(f"{node.op_type} has no device kernel")
    raise _Unsupported(f"{node.op_type} with a non-constant input '{runtime[0]}' (data-dependent shape)", runtime)




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
# elementwise math, reductions, pad / slice, normalization, casts


def _float_input(imp: _Importer, node: onnx.NodeProto, i: int = 0) -> SSAValue:
    v = imp.value(node.input[i])
    if not isinstance(g._elt(v), (g.Float32Type, g.Float16Type)):
        raise _Unsupported(f"{node.op_type} on {g.numpy_dtype(g._elt(v)).name} tensors is not supported "
                           "(float16 and float32 only)")
    return v


def _const_input(imp: _Importer, node: onnx.NodeProto, i: int, what: str) -> np.ndarray | None:
    """The constant value of optional input ``i`` (None when absent)."""
    if len(node.input) <= i or not node.input[i]:
        return None
    n = node.input[i]
    if not imp.is_const(n):
        raise _Unsupported(f"{node.op_type} with a non-constant {what} input '{n}'", (n,))
    return np.asarray(imp.consts[n])


_UNARY_OPS = {
    "Sigmoid": g.SigmoidOp, "Tanh": g.TanhOp, "Exp": g.ExpOp, "Log": g.LogOp, "Sqrt": g.SqrtOp,
    "Reciprocal": g.ReciprocalOp, "Abs": g.AbsOp, "Neg": g.NegOp, "Erf": g.ErfOp, "Softplus": g.SoftplusOp,
}


@_converter(*_UNARY_OPS)
def _unary_op(imp, node, name, a):
    x = _float_input(imp, node)
    return [imp.emit(_UNARY_OPS[node.op_type](x), name).results[0]]


@_converter("Elu", "Selu", "LeakyRelu", "HardSigmoid")
def _param_unary(imp, node, name, a):
    x = _float_input(imp, node)
    if node.op_type == "Elu":
        op = g.EluOp(x, alpha=a.get("alpha", 1.0))
    elif node.op_type == "Selu":
        op = g.SeluOp(x, alpha=a.get("alpha", 1.67326319217681884765625),
                      gamma=a.get("gamma", 1.05070102214813232421875))
    elif node.op_type == "LeakyRelu":
        op = g.LeakyReluOp(x, alpha=a.get("alpha", 0.01))
    else:
        op = g.HardSigmoidOp(x, alpha=a.get("alpha", 0.2), beta=a.get("beta", 0.5))
    return [imp.emit(op, name).results[0]]


@_converter("Gelu")
def _gelu(imp, node, name, a):
    x = _float_input(imp, node)
    approx = a.get("approximate", b"none")
    approx = approx.decode() if isinstance(approx, bytes) else approx
    if approx not in g.GELU_APPROXIMATIONS:
        raise _bad_attr(node, "approximate", approx)
    return [imp.emit(g.GeluOp(x, approx), name).results[0]]


@_converter("Clip")
def _clip(imp, node, name, a):
    x = _float_input(imp, node)
    if imp.opset < 11:
        lo, hi = a.get("min", -math.inf), a.get("max", math.inf)
    elif any(len(node.input) > i and node.input[i] and not imp.is_const(node.input[i]) for i in (1, 2)):
        # tensor bounds: max(x, min) then min(., max), broadcasting
        y = x
        for i, cls in ((1, g.MaxOp), (2, g.MinOp)):
            if len(node.input) > i and node.input[i]:
                y = imp.emit(cls(y, imp.value(node.input[i])), name).results[0]
        return [y]
    else:
        lo_a, hi_a = _const_input(imp, node, 1, "min"), _const_input(imp, node, 2, "max")
        lo = float(lo_a.reshape(-1)[0]) if lo_a is not None else -math.inf
        hi = float(hi_a.reshape(-1)[0]) if hi_a is not None else math.inf
    return [imp.emit(g.ClipOp(x, min=float(lo), max=float(hi)), name).results[0]]


def _emit_unary(imp, name, cls, x, **p):
    return imp.emit(cls(x, **p) if p else cls(x), name).results[0]


def _scalar_const(imp, name, value: float, like: SSAValue) -> SSAValue:
    arr = np.asarray(value, dtype=g.numpy_dtype(g._elt(like)))
    return imp.emit(g.make_constant(arr, name), name).results[0]


@_converter("Softsign", "HardSwish", "Celu", "PRelu", "Swish")
def _composite(imp, node, name, a):
    """Activations written with other graph ops (one kernel each)."""
    x = _float_input(imp, node)
    t = node.op_type
    if t == "Softsign":  # x / (1 + |x|)
        d = _emit_unary(imp, name, g.AbsOp, x)
        d = imp.emit(g.AddOp(d, _scalar_const(imp, name, 1.0, x)), name).results[0]
        return [imp.emit(g.DivOp(x, d), name).results[0]]
    if t == "HardSwish":  # x * hard_sigmoid(x; 1/6, 1/2)
        h = _emit_unary(imp, name, g.HardSigmoidOp, x, alpha=1.0 / 6, beta=0.5)
        return [imp.emit(g.MulOp(x, h), name).results[0]]
    if t == "Swish":  # x * sigmoid(alpha x)
        alpha = float(a.get("alpha", 1.0))
        s = x if alpha == 1.0 else imp.emit(g.MulOp(x, _scalar_const(imp, name, alpha, x)), name).results[0]
        return [imp.emit(g.MulOp(x, _emit_unary(imp, name, g.SigmoidOp, s)), name).results[0]]
    if t == "Celu":  # alpha * elu(x / alpha)
        alpha = float(a.get("alpha", 1.0))
        s = imp.emit(g.MulOp(x, _scalar_const(imp, name, 1.0 / alpha, x)), name).results[0]
        e = _emit_unary(imp, name, g.EluOp, s, alpha=1.0)
        return [imp.emit(g.MulOp(e, _scalar_const(imp, name, alpha, x)), name).results[0]]
    # PRelu: relu(x) - slope * relu(-x)   (slope broadcasts to x; opset < 7 per-channel slope)
    slope = imp.value(node.input[1])
    xs, ss = g._shape(x), g._shape(slope)
    if g.broadcast_shapes(xs, ss) != xs:
        if len(ss) == 1 and len(xs) >= 2 and ss[0] == xs[1]:
            slope = imp.emit(g.ReshapeOp(slope, [ss[0]] + [1] * (len(xs) - 2)), name).results[0]
        else:
            raise _Unsupported(f"PRelu slope of shape {list(ss)} does not broadcast to {list(xs)}")
    pos = _emit_unary(imp, name, g.ReluOp, x)
    neg = _emit_unary(imp, name, g.ReluOp, _emit_unary(imp, name, g.NegOp, x))
    neg = imp.emit(g.MulOp(neg, slope, TensorType(g._elt(x), xs)), name).results[0]
    return [imp.emit(g.SubOp(pos, neg), name).results[0]]


_VARIADIC = {"Max": g.MaxOp, "Min": g.MinOp, "Sum": g.AddOp, "Mean": g.AddOp}


@_converter("Max", "Min", "Mean")
def _variadic(imp, node, name, a):
    vals = [_float_input(imp, node, i) for i in range(len(node.input)) if node.input[i]]
    cls = _VARIADIC[node.op_type]
    out = _out_type(imp, node)
    acc = vals[0]
    for v in vals[1:]:
        acc = imp.emit(cls(acc, v), name).results[0]
    if node.op_type == "Mean" and len(vals) > 1:
        acc = imp.emit(g.MulOp(acc, _scalar_const(imp, name, 1.0 / len(vals), acc)), name).results[0]
    if g._shape(acc) != tuple(out.get_shape()):
        raise _Unsupported("variadic result shape differs from shape inference")
    return [acc]


@_converter("Pow")
def _pow(imp, node, name, a):
    x = _float_input(imp, node)
    y = imp.value(node.input[1])
    if g._elt(y) != g._elt(x):
        if imp.is_const(node.input[1]):
            y = imp.emit(g.make_constant(np.asarray(imp.consts[node.input[1]]).astype(g.numpy_dtype(g._elt(x))),
                                         node.input[1]), name).results[0]
        else:
            raise _Unsupported("Pow with an exponent of another dtype (non-constant)")
    return [imp.emit(g.PowOp(x, y, _out_type(imp, node)), name).results[0]]


_REDUCE = {"ReduceSum": "sum", "ReduceMean": "mean", "ReduceMax": "max", "ReduceMin": "min", "ReduceProd": "prod",
           "ReduceL1": "l1", "ReduceL2": "l2", "ReduceSumSquare": "sum_square", "ReduceLogSum": "log_sum",
           "ReduceLogSumExp": "log_sum_exp"}


def _reduce_no_axes(imp: _Importer, name: str, kind: str, x: SSAValue) -> SSAValue:
    """A reduction of ``kind`` over no axis (empty axes with ``noop_with_empty_axes=1``, or a rank-0
    input): each element reduced alone, so the elementwise part remains: x*x (sum_square), log x
    (log_sum), |x| (l1, l2: sqrt(x*x)), x for sum, mean, max, min, prod and log_sum_exp (log(exp x))."""
    if kind == "sum_square":
        return imp.emit(g.MulOp(x, x), name).results[0]
    if kind == "log_sum":
        return imp.emit(g.LogOp(x), name).results[0]
    if kind in ("l1", "l2"):
        return imp.emit(g.AbsOp(x), name).results[0]
    return x


@_converter(*_REDUCE)
def _reduce(imp, node, name, a):
    x = _float_input(imp, node)
    r = len(g._shape(x))
    axes_as_input = imp.opset >= (13 if node.op_type == "ReduceSum" else 18)
    if axes_as_input:
        arr = _const_input(imp, node, 1, "axes")
        axes = [] if arr is None else [int(v) for v in arr.reshape(-1)]
        noop = int(a.get("noop_with_empty_axes", 0))
    else:
        axes = list(a.get("axes", []))
        noop = 0
    keepdims = int(a.get("keepdims", 1))
    if any(not -r <= ax < r for ax in axes):
        raise _bad_attr(node, "axes", axes, f"out of range for rank {r}")
    if (not axes and noop) or r == 0:  # no axis reduced: the elementwise part stays (onnx PR 7394)
        return [_reduce_no_axes(imp, name, _REDUCE[node.op_type], x)]
    axes = sorted({ax % r for ax in axes}) if axes else list(range(r))
    if 0 in g._shape(x):
        raise _Unsupported("reduction of an empty tensor")
    op = g.ReduceOp(x, _REDUCE[node.op_type], axes, bool(keepdims), _out_type(imp, node))
    return [imp.emit(op, name).results[0]]


@_converter("Pad")
def _pad(imp, node, name, a):
    x = imp.value(node.input[0])
    if g.numpy_dtype(g._elt(x)) not in (np.float16, np.float32, np.int32, np.int64):
        raise _Unsupported(f"Pad on {g.numpy_dtype(g._elt(x)).name} tensors is not supported (float16, float32, int32, "
                           "int64)")
    s = g._shape(x)
    r = len(s)
    mode = a.get("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode not in g.PAD_MODES:
        raise _bad_attr(node, "mode", mode)
    if imp.opset < 11:
        pads = list(a.get("pads", a.get("paddings", [])))
        value = float(a.get("value", 0.0))
    else:
        parr = _const_input(imp, node, 1, "pads")
        pads = [int(v) for v in parr.reshape(-1)]
        varr = _const_input(imp, node, 2, "constant_value")
        value = float(varr.reshape(-1)[0]) if varr is not None and varr.size else 0.0
        axes_arr = _const_input(imp, node, 3, "axes")
        if axes_arr is not None:
            axes = [int(v) % r for v in axes_arr.reshape(-1)]
            full = [0] * (2 * r)
            for j, ax in enumerate(axes):
                full[ax], full[ax + r] = pads[j], pads[j + len(axes)]
            pads = full
    if len(pads) != 2 * r:
        raise _bad_attr(node, "pads", pads, f"expected {2 * r} values")
    if mode == "reflect" and any(max(pads[i], pads[i + r]) >= s[i] for i in range(r) if pads[i] or pads[i + r]):
        raise _bad_attr(node, "pads", pads, "reflect pads must be smaller than the axis")
    op = g.PadOp(x, pads, mode, value)
    if op.res.type != _out_type(imp, node):
        raise _Unsupported("Pad result shape differs from shape inference")
    return [imp.emit(op, name).results[0]]


@_converter("Slice")
def _slice(imp, node, name, a):
    x = imp.value(node.input[0])
    s = g._shape(x)
    r = len(s)
    if imp.opset < 10:
        starts, ends = list(a["starts"]), list(a["ends"])
        axes = list(a.get("axes", range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts = [int(v) for v in _const_input(imp, node, 1, "starts").reshape(-1)]
        ends = [int(v) for v in _const_input(imp, node, 2, "ends").reshape(-1)]
        ax = _const_input(imp, node, 3, "axes")
        axes = [int(v) for v in ax.reshape(-1)] if ax is not None else list(range(len(starts)))
        st = _const_input(imp, node, 4, "steps")
        steps = [int(v) for v in st.reshape(-1)] if st is not None else [1] * len(starts)
    full_s, full_e, full_p = [0] * r, list(s), [1] * r
    for st_, en, ax, sp in zip(starts, ends, axes, steps):
        if not -r <= ax < r:
            raise _bad_attr(node, "axes", axes, f"out of range for rank {r}")
        ax %= r
        d = s[ax]
        if sp == 0:
            raise _bad_attr(node, "steps", steps, "a step is 0")
        st_ = st_ + d if st_ < 0 else st_
        en = en + d if en < 0 else en
        if sp > 0:
            st_, en = min(max(st_, 0), d), min(max(en, 0), d)
        else:
            st_, en = min(max(st_, 0), d - 1), min(max(en, -1), d - 1)
        full_s[ax], full_e[ax], full_p[ax] = st_, en, sp
    if full_s == [0] * r and full_e == list(s) and full_p == [1] * r:
        return [x]
    out = _out_type(imp, node)
    op = g.SliceOp(x, full_s, full_e, full_p)
    if tuple(op.res.type.get_shape()) != tuple(out.get_shape()):
        raise _Unsupported(f"Slice result shape {list(op.res.type.get_shape())} differs from shape inference "
                           f"{list(out.get_shape())}")
    return [imp.emit(op, name).results[0]]


@_converter("LayerNormalization")
def _layer_norm(imp, node, name, a):
    x = _float_input(imp, node)
    r = len(g._shape(x))
    axis = int(a.get("axis", -1))
    if not -r <= axis < r:
        raise _bad_attr(node, "axis", axis, f"out of range for rank {r}")
    axis %= r
    eps = float(a.get("epsilon", 1e-5))
    scale = imp.value(node.input[1])
    bias = imp.value(node.input[2]) if len(node.input) > 2 and node.input[2] else None
    extra = [o for o in node.output[1:] if o]
    if not extra:
        return [imp.emit(g.LayerNormOp(x, scale, bias, axis, eps), name).results[0]]
    # Mean / InvStdDev requested: the same computation written with graph ops
    axes = list(range(axis, r))
    mean = imp.emit(g.ReduceOp(x, "mean", axes, True), name).results[0]
    d = imp.emit(g.SubOp(x, mean), name).results[0]
    var = imp.emit(g.ReduceOp(imp.emit(g.MulOp(d, d), name).results[0], "mean", axes, True), name).results[0]
    var = imp.emit(g.AddOp(var, _scalar_const(imp, name, eps, var)), name).results[0]
    inv = _emit_unary(imp, name, g.ReciprocalOp, _emit_unary(imp, name, g.SqrtOp, var))
    y = imp.emit(g.MulOp(imp.emit(g.MulOp(d, inv), name).results[0], scale, x.type), name).results[0]
    if bias is not None:
        y = imp.emit(g.AddOp(y, bias, x.type), name).results[0]
    return [y, mean, inv]


@_converter("Cast", "CastLike")
def _cast(imp, node, name, a):
    out = _out_type(imp, node)
    if imp.is_const(node.input[0]):  # CastLike of a constant: fold
        imp.consts[node.output[0]] = np.asarray(imp.consts[node.input[0]]).astype(g.numpy_dtype(out.get_element_type()))
        return [None]
    x = imp.value(node.input[0])
    src, dst = g._elt(x), out.get_element_type()
    if src == dst:
        return [x]
    floats = (g.Float32Type, g.Float16Type)
    if isinstance(src, floats) and isinstance(dst, floats):
        return [imp.emit(g.CastOp(x, dst), name).results[0]]
    raise _Unsupported(f"{node.op_type} from {g.numpy_dtype(src).name} to {g.numpy_dtype(dst).name} is not supported")


def _softmax_decomposed(imp, x, axis: int, name: str, log: bool) -> SSAValue:
    """(Log)Softmax over ``axis`` with graph ops: x - max, exp, sum, divide (or minus log of the sum)."""
    m = imp.emit(g.ReduceOp(x, "max", [axis], True), name).results[0]
    d = imp.emit(g.SubOp(x, m), name).results[0]
    e = _emit_unary(imp, name, g.ExpOp, d)
    s = imp.emit(g.ReduceOp(e, "sum", [axis], True), name).results[0]
    if log:
        return imp.emit(g.SubOp(d, _emit_unary(imp, name, g.LogOp, s)), name).results[0]
    return imp.emit(g.DivOp(e, s), name).results[0]


@_converter("LogSoftmax")
def _log_softmax(imp, node, name, a):
    x = _float_input(imp, node)
    s = g._shape(x)
    r = len(s)
    axis = int(a.get("axis", 1 if imp.opset < 13 else -1))
    if not -r <= axis < r:
        raise _bad_attr(node, "axis", axis, f"out of range for rank {r}")
    axis %= r
    if imp.opset >= 13 or axis == r - 1:
        return [_softmax_decomposed(imp, x, axis, name, True)]
    flat = imp.emit(g.ReshapeOp(x, [math.prod(s[:axis]), math.prod(s[axis:])]), name).results[0]
    y = _softmax_decomposed(imp, flat, 1, name, True)
    return [imp.emit(g.ReshapeOp(y, s), name).results[0]]


@_converter("Split")
def _split(imp, node, name, a):
    x = imp.value(node.input[0])
    s = g._shape(x)
    r = len(s)
    axis = int(a.get("axis", 0))
    if not -r <= axis < r:
        raise _bad_attr(node, "axis", axis, f"out of range for rank {r}")
    axis %= r
    outs = []
    start = 0
    for o in node.output:
        t = imp.tensor_type(o, name)
        n = t.get_shape()[axis]
        st, en = [0] * r, list(s)
        st[axis], en[axis] = start, start + n
        start += n
        if n == 0:  # an empty tensor is fully known: a constant its consumers fold or drop
            imp.consts[o] = np.zeros(t.get_shape(), g.numpy_dtype(t.get_element_type()))
            outs.append(None)
            continue
        outs.append(x if n == s[axis] else imp.emit(g.SliceOp(x, st, en, [1] * r), name).results[0])
    return outs


@_converter("Expand")
def _expand(imp, node, name, a):
    x = imp.value(node.input[0])
    _const_input(imp, node, 1, "shape")
    out = _out_type(imp, node)
    if tuple(out.get_shape()) == g._shape(x):
        return [x]
    if 0 in tuple(out.get_shape()):
        raise _Unsupported("Expand to an empty tensor")
    return [imp.emit(g.ExpandOp(x, out.get_shape()), name).results[0]]


@_converter("Gather")
def _gather(imp, node, name, a):
    data = imp.value(node.input[0])
    r = len(g._shape(data))
    axis = int(a.get("axis", 0))
    if not -r <= axis < r:
        raise _bad_attr(node, "axis", axis, f"out of range for rank {r}")
    idx = imp.value(node.input[1])
    if g.numpy_dtype(g._elt(idx)) not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise _Unsupported(f"Gather with {g.numpy_dtype(g._elt(idx)).name} indices (int32 or int64 expected)")
    return [imp.emit(g.GatherOp(data, idx, axis % r), name).results[0]]


@_converter("Where")
def _where(imp, node, name, a):
    cond, x, y = (imp.value(n) for n in node.input[:3])
    if g.numpy_dtype(g._elt(x)).kind != "f":
        raise _Unsupported(f"Where on {g.numpy_dtype(g._elt(x)).name} tensors is not supported (float16 and float32 only)")
    return [imp.emit(g.WhereOp(cond, x, y), name).results[0]]


# ---------------------------------------------------------------------------------------------
# Resize, ConvTranspose


def _str_attr(a: dict[str, Any], key: str, default: str) -> str:
    v = a.get(key, default)
    return v.decode() if isinstance(v, bytes) else v


@_converter("Resize")
def _resize(imp, node, name, a):
    """Resize of H and W of a 4-D NCHW tensor; scales / sizes constant (opsets 10, 11, 13, 18, 19)."""
    x = _float_input(imp, node)
    s = g._shape(x)
    r = len(s)
    mode = _str_attr(a, "mode", "nearest")
    if mode not in g.RESIZE_MODES:
        raise _bad_attr(node, "mode", mode, "only nearest and linear are supported")
    if imp.opset < 11:  # Resize-10: X, scales; the Upsample rule (asymmetric, floor)
        ctm, nearest_mode = "asymmetric", "floor"
        scales = _const_input(imp, node, 1, "scales")
        sizes = roi = None
    else:
        ctm = _str_attr(a, "coordinate_transformation_mode", "half_pixel")
        nearest_mode = _str_attr(a, "nearest_mode", "round_prefer_floor")
        roi = _const_input(imp, node, 1, "roi") if ctm == "tf_crop_and_resize" else None
        scales = _const_input(imp, node, 2, "scales")
        sizes = _const_input(imp, node, 3, "sizes")
        if scales is not None and scales.size == 0:
            scales = None
        if sizes is not None and sizes.size == 0:
            sizes = None
    del roi
    if ctm not in g.RESIZE_COORD_MODES or (ctm == "half_pixel_symmetric" and imp.opset < 19):
        raise _bad_attr(node, "coordinate_transformation_mode", ctm)
    if mode == "nearest" and nearest_mode not in g.RESIZE_NEAREST_MODES:
        raise _bad_attr(node, "nearest_mode", nearest_mode)
    for key in ("exclude_outside", "antialias"):
        if int(a.get(key, 0)):
            raise _bad_attr(node, key, int(a[key]))
    if r != 4:
        raise _Unsupported(f"Resize of a rank-{r} tensor is not supported (4-D NCHW only)")
    axes = [int(v) % r for v in a.get("axes", range(r))]
    if len(set(axes)) != len(axes):
        raise _bad_attr(node, "axes", list(a["axes"]))
    full_scale = resize_scales(node, a, s, axes, scales, sizes)
    out = _out_type(imp, node)
    os_ = tuple(out.get_shape())
    if os_[:2] != s[:2] or full_scale[0] != 1.0 or full_scale[1] != 1.0:
        raise _Unsupported("Resize of the N or C axis is not supported (H and W only)")
    if 0 in os_:
        raise _Unsupported("Resize with an empty result")
    op = g.ResizeOp(x, out, mode=mode, coordinate_transformation_mode=ctm, nearest_mode=nearest_mode,
                    scales=full_scale[2:])
    return [imp.emit(op, name).results[0]]


def resize_scales(node: onnx.NodeProto, a: dict[str, Any], s: Sequence[int], axes: list[int],
                  scales: np.ndarray | None, sizes: np.ndarray | None) -> list[float]:
    """The scale of every axis of a Resize of input shape ``s``, from ``scales`` or ``sizes`` (over
    ``axes``) and ``keep_aspect_ratio_policy``, by the specification's rules."""
    r = len(s)
    if (scales is None) == (sizes is None):
        raise _Unsupported("Resize needs exactly one of the scales and sizes inputs")
    full_scale = [1.0] * r
    if scales is not None:
        vals = [float(v) for v in scales.reshape(-1)]
        if len(vals) != len(axes):
            raise _Unsupported(f"Resize scales has {len(vals)} values for {len(axes)} axes")
        for ax, v in zip(axes, vals):
            full_scale[ax] = v
        return full_scale
    vals = [int(v) for v in sizes.reshape(-1)]
    if len(vals) != len(axes):
        raise _Unsupported(f"Resize sizes has {len(vals)} values for {len(axes)} axes")
    full_size = list(s)
    for ax, v in zip(axes, vals):
        full_size[ax] = v
    full_scale = [full_size[i] / s[i] for i in range(r)]
    policy = _str_attr(a, "keep_aspect_ratio_policy", "stretch")
    if policy != "stretch":
        if policy not in ("not_larger", "not_smaller"):
            raise _bad_attr(node, "keep_aspect_ratio_policy", policy)
        sc = (min if policy == "not_larger" else max)(full_scale[i] for i in axes)
        full_scale = [sc if i in axes else 1.0 for i in range(r)]
    return full_scale


@_converter("ConvTranspose")
def _conv_transpose(imp, node, name, a):
    x = _float_input(imp, node)
    w = imp.value(node.input[1])
    b = imp.value(node.input[2]) if len(node.input) > 2 and node.input[2] else None
    xs, ws = g._shape(x), g._shape(w)
    if len(ws) != 4 or len(xs) != 4:
        raise _bad_attr(node, "kernel_shape", list(ws[2:]), "only 2-D ConvTranspose is supported")
    ks = list(a.get("kernel_shape", ws[2:]))
    if ks != list(ws[2:]):
        raise _bad_attr(node, "kernel_shape", ks, "does not match the weight shape")
    strides = list(a.get("strides", [1, 1]))
    dil = list(a.get("dilations", [1, 1]))
    op_ = list(a.get("output_padding", [0, 0]))
    for key, v in (("strides", strides), ("dilations", dil), ("output_padding", op_)):
        if len(v) != 2:
            raise _bad_attr(node, key, v, "only 2-D is supported")
    auto = _str_attr(a, "auto_pad", "NOTSET")
    if auto not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise _bad_attr(node, "auto_pad", auto)
    out = _out_type(imp, node)
    os_ = list(out.get_shape())
    eff = [d * (k - 1) + 1 for d, k in zip(dil, ks)]
    full = [strides[i] * (xs[i + 2] - 1) + op_[i] + eff[i] for i in range(2)]
    if "pads" in a and auto in ("NOTSET", "VALID"):  # as the spec's reference: explicit pads win
        pads = list(a["pads"])
        if len(pads) != 4:
            raise _bad_attr(node, "pads", pads, "only 2-D is supported")
        begin = pads[:2]
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        shape = list(a.get("output_shape", [xs[i + 2] * strides[i] for i in range(2)]))[-2:]
        total = [full[i] - shape[i] for i in range(2)]
        begin = [t // 2 if auto == "SAME_UPPER" else t - t // 2 for t in total]
    else:
        begin = [0, 0]
    if min(begin) < 0:
        raise _bad_attr(node, "pads", begin, "a negative begin padding")
    end = [full[i] - begin[i] - os_[2 + i] for i in range(2)]
    op = g.ConvTransposeOp(x, w, b, out, strides=strides, pads=begin + end, dilations=dil, output_padding=op_,
                           group=int(a.get("group", 1)))
    return [imp.emit(op, name).results[0]]


SUPPORTED_OPS = sorted(set(_CONVERTERS) | {"Constant", "ConstantOfShape"})

from cann.frontend import onnx_composite  # noqa: E402,F401  (registers RMS/Group/Instance/Lp/MVN normalization, Attention)
from cann.frontend import onnx_int  # noqa: E402,F401  (comparisons, boolean logic, integer math, int/bool casts)
from cann.frontend import onnx_math  # noqa: E402,F401  (trig / hyperbolic family, Mish, ThresholdedRelu, Shrink, GlobalMaxPool)


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
