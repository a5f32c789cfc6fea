"""TensorFlow importer: a frozen ``GraphDef`` (``.pb``, ATC ``--framework=3``) becomes a
``builtin.module`` holding ``func.func @main`` of ``graph`` ops.

The GraphDef is parsed with the protobuf message classes tensorboard ships
(``tensorboard.compat.proto``); TensorFlow itself is never imported. Steps:

* inputs are the ``Placeholder`` nodes the outputs depend on; every unknown dimension must be
  fixed with ``input_shape`` (names may carry a ``:0`` output index);
* outputs are ``out_nodes`` (``node`` or ``node:index``), by default every node with a data
  output that no other node consumes, in file order;
* function calls (``PartitionedCall``, ``StatefulPartitionedCall``, a node whose op names a
  function of the GraphDef's library: Keras 3 freezes grouped and depthwise convolutions so) are
  inlined first, as TensorFlow's graph optimizer does (:func:`inline_functions`);
* nodes are visited in topological order of their data inputs (control inputs ``^n`` are
  ignored). A node whose inputs are all constants is evaluated with numpy at import time and
  becomes constant data (so ``Shape`` / ``StridedSlice`` / ``Pack`` chains fold once the input
  shapes are static; ``Shape`` of a non-constant tensor is its static shape);
* every other supported node becomes ``graph`` ops located at ``NameLoc(node name)``. Layout is
  explicit: a ``data_format = NHWC`` convolution, pooling or batch normalization is written as
  ``graph.transpose`` (NHWC -> NCHW), the NCHW op, ``graph.transpose`` (NCHW -> NHWC); the
  ``graph-fold-transposes`` pass then cancels the pairs between layers;
* unsupported operators and attribute values are collected and raised together as one
  :class:`~cann.errors.CannError`, one diagnostic per node.

Result shapes are computed here (a GraphDef carries no reliable shape information) and checked
by the graph ops' verifiers.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, ModuleOp, StringAttr, TensorType
from xdsl.ir import Block, Operation, Region, SSAValue

from cann.dialects import graph as g
from cann.errors import CannError, Diagnostic
from cann.fileio import parse_protobuf

__all__ = ["import_tf", "load_graph_def", "inline_functions", "SUPPORTED_OPS"]

_NHWC_TO_NCHW = (0, 3, 1, 2)
_NCHW_TO_NHWC = (0, 2, 3, 1)


class _Unsupported(Exception):
    """Raised by a converter: this node cannot be imported (one diagnostic)."""


class _LazyOp:
    """A graph op class looked up when used: the math ops (graph.sigmoid, graph.reduce, ...) are
    newer than the core ones, and a missing one makes only the nodes that need it unsupported."""

    def __init__(self, name: str):
        self.name = name

    def __call__(self, *args, **kwargs):
        cls = getattr(g, self.name, None)
        if cls is None:
            raise _Unsupported(f"the graph dialect has no {self.name} yet")
        return cls(*args, **kwargs)


def _G(name: str) -> _LazyOp:
    return _LazyOp(name)


# ---------------------------------------------------------------------------------------------
# protobuf helpers

# tensorflow/core/framework/types.proto
_DTYPES: dict[int, Any] = {
    1: np.float32, 2: np.float64, 3: np.int32, 4: np.uint8, 5: np.int16, 6: np.int8, 9: np.int64,
    10: np.bool_, 17: np.uint16, 19: np.float16, 22: np.uint32, 23: np.uint64,
}
_DTYPE_NAMES = {1: "float32", 2: "float64", 3: "int32", 4: "uint8", 5: "int16", 6: "int8", 7: "string",
                9: "int64", 10: "bool", 14: "bfloat16", 17: "uint16", 19: "float16", 20: "resource",
                21: "variant", 22: "uint32", 23: "uint64"}


def _graph_pb2():
    from tensorboard.compat.proto import graph_pb2  # protobuf classes only: no TensorFlow runtime

    return graph_pb2


def _np_dtype(dt: int) -> np.dtype:
    if dt not in _DTYPES:
        raise _Unsupported(f"unsupported dtype {_DTYPE_NAMES.get(dt, dt)}")
    return np.dtype(_DTYPES[dt])


def tensor_to_numpy(t) -> np.ndarray:
    """A ``TensorProto`` as a numpy array (``tensor_content`` or the typed ``*_val`` fields)."""
    dtype = _np_dtype(t.dtype)
    shape = tuple(int(d.size) for d in t.tensor_shape.dim)
    n = math.prod(shape)
    if t.tensor_content:
        return np.frombuffer(t.tensor_content, dtype=dtype).reshape(shape).copy()
    if dtype == np.float16:
        vals = np.asarray(t.half_val, np.uint16).view(np.float16)
    elif dtype == np.float32:
        vals = np.asarray(t.float_val, np.float32)
    elif dtype == np.float64:
        vals = np.asarray(t.double_val, np.float64)
    elif dtype == np.int64:
        vals = np.asarray(t.int64_val, np.int64)
    elif dtype == np.uint64:
        vals = np.asarray(t.uint64_val, np.uint64)
    elif dtype == np.uint32:
        vals = np.asarray(t.uint32_val, np.uint32)
    elif dtype == np.bool_:
        vals = np.asarray(t.bool_val, np.bool_)
    else:  # int32, int16, int8, uint8, uint16
        vals = np.asarray(t.int_val, np.int64).astype(dtype)
    if vals.size == n:
        return vals.reshape(shape)
    if vals.size == 0:
        return np.zeros(shape, dtype)
    # TensorFlow repeats the last value to fill the tensor
    return np.concatenate([vals, np.full(n - vals.size, vals[-1], dtype)]).reshape(shape)


def _attr(node, name: str, default: Any = None) -> Any:
    """A node attribute as a Python value (lists as lists, strings decoded, tensors as numpy)."""
    if name not in node.attr:
        return default
    v = node.attr[name]
    kind = v.WhichOneof("value")
    if kind == "s":
        return v.s.decode(errors="replace")
    if kind in ("i", "f", "b", "type"):
        return getattr(v, kind)
    if kind == "shape":
        return v.shape
    if kind == "tensor":
        return tensor_to_numpy(v.tensor)
    if kind == "list":
        lv = v.list
        for f in ("i", "f", "s", "type", "b"):
            vals = list(getattr(lv, f))
            if vals:
                return [x.decode(errors="replace") for x in vals] if f == "s" else vals
        if list(lv.shape):
            return list(lv.shape)
        return []
    return default


def load_graph_def(model):
    """``model`` (a path, serialized bytes or a ``GraphDef``) as a ``GraphDef`` and a location."""
    graph_pb2 = _graph_pb2()
    if isinstance(model, graph_pb2.GraphDef):
        return model, "<graph>"
    if hasattr(model, "SerializeToString") and type(model).__name__ == "GraphDef":  # TensorFlow's own class
        gd = graph_pb2.GraphDef()
        gd.ParseFromString(model.SerializeToString())
        return gd, "<graph>"
    if isinstance(model, (bytes, bytearray, memoryview)):
        where = "<bytes>"
        gd = graph_pb2.GraphDef()
        try:
            gd.ParseFromString(bytes(model))
        except Exception as e:  # google.protobuf.message.DecodeError and friends
            raise CannError(where, f"not a TensorFlow GraphDef: {e}") from None
    else:
        where = os.fspath(model)
        gd = parse_protobuf(graph_pb2.GraphDef(), where, "a TensorFlow GraphDef")
    if not gd.node or any(not n.op for n in gd.node):
        raise CannError(where, "not a TensorFlow GraphDef: no nodes" if not gd.node else
                        "not a TensorFlow GraphDef: a node has no op")
    return gd, where


def split_tensor_name(name: str) -> tuple[str, int]:
    """``"node:1"`` -> ``("node", 1)``; ``"node"`` -> ``("node", 0)`` (split at the last colon)."""
    m = re.fullmatch(r"(.*):(\d+)", name)
    if m and m.group(1):
        return m.group(1), int(m.group(2))
    return name, 0


def _key(node: str, idx: int) -> str:
    return f"{node}:{idx}"


# ---------------------------------------------------------------------------------------------
# function calls: inlined from the GraphDef's function library before import

_CALL_OPS = ("PartitionedCall", "StatefulPartitionedCall")
# Output arguments of the operators with several single-tensor output arguments, in order (their
# OpDefs). Every other operator has one output argument (possibly a list: IdentityN, Unpack,
# ShapeN, Split, a call's ``output``), so its ``node:arg:i`` is its output ``i``.
_OUTPUT_ARGS: dict[str, tuple[str, ...]] = {
    "FusedBatchNorm": ("y", "batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2"),
    "FusedBatchNormV2": ("y", "batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2"),
    "FusedBatchNormV3": ("y", "batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2",
                         "reserve_space_3"),
    "TopKV2": ("values", "indices"), "Unique": ("y", "idx"), "UniqueV2": ("y", "idx"),
}


def _substitute_attr(value, bindings, fname: str, node_name: str) -> None:
    """Replace, in place, an ``AttrValue`` that is a function attribute ``placeholder`` (also inside a
    ``func`` value's attributes and lists of functions) by its binding."""
    kind = value.WhichOneof("value")
    if kind == "placeholder":
        name = value.placeholder
        if name not in bindings:
            raise CannError(node_name, f"function '{fname}' uses attribute '{name}', which its call does not set")
        value.CopyFrom(bindings[name])
    elif kind == "func":
        for v in value.func.attr.values():
            _substitute_attr(v, bindings, fname, node_name)
    elif kind == "list":
        for f in value.list.func:
            for v in f.attr.values():
                _substitute_attr(v, bindings, fname, node_name)


def _arg_count(arg, bindings) -> int:
    """The number of tensors of a function argument (an ``OpDef.ArgDef``): a list's length or 1."""
    if arg.number_attr:
        b = bindings.get(arg.number_attr)
        return int(b.i) if b is not None else 1
    if arg.type_list_attr:
        b = bindings.get(arg.type_list_attr)
        return len(b.list.type) if b is not None else 1
    return 1


def inline_functions(gd) -> list:
    """The nodes of ``gd`` with every function call replaced by the called function's body.

    A call is a ``PartitionedCall`` / ``StatefulPartitionedCall`` node (function in its ``f``
    attribute) or a node whose op names a function of ``gd.library`` (attributes on the node). As
    TensorFlow's inliner does, body node ``n`` of a call node ``c`` becomes ``c/n`` (a suffix
    ``_1``, ``_2``, ... when that name is taken), its attribute placeholders are bound to the
    call's attribute values (or the function's defaults), its ``arg`` / ``arg:i`` inputs become
    the call's inputs and its ``node:out_arg:index`` inputs become ``c/node:k`` (``k`` the flat
    output index); ``c`` itself becomes an ``IdentityN`` of the function's return values, so
    consumers of ``c:i`` and ``out_nodes`` naming it are unchanged. Calls inside bodies are
    inlined the same way (recursion is an error).

    Returns:
        The ``NodeDef``\\ s, in file order with each call's body after its ``IdentityN``.

    Raises:
        CannError: a call names no function of the library, passes the wrong number of inputs,
            leaves an attribute unbound, a function calls itself, or a body input names no
            argument or node.
    """
    funcs = {f.signature.name: f for f in gd.library.function}
    if not funcs and not any(n.op in _CALL_OPS for n in gd.node):
        return list(gd.node)
    from tensorboard.compat.proto.node_def_pb2 import NodeDef

    sigs = {fn: [o.name for o in fd.signature.output_arg] for fn, fd in funcs.items()}
    taken = {n.name for n in gd.node}
    out: list = []
    # (node, functions on the call chain that created it)
    work: list[tuple[Any, tuple[str, ...]]] = [(n, ()) for n in gd.node]
    work.reverse()
    while work:
        node, chain = work.pop()
        if node.op in _CALL_OPS:
            f = node.attr["f"].func if "f" in node.attr else None
            fname, bind_src = (f.name, f.attr) if f is not None else ("", {})
        elif node.op in funcs:
            fname, bind_src = node.op, node.attr
        else:
            out.append(node)
            continue
        if fname not in funcs:
            raise CannError(node.name, f"{node.op} calls function '{fname}', which the graph's function library "
                                       "does not define")
        if fname in chain:
            raise CannError(node.name, f"function '{fname}' calls itself (call chain {' -> '.join((*chain, fname))})")
        fdef = funcs[fname]
        sig = fdef.signature
        bindings = {a.name: a.default_value for a in sig.attr if a.HasField("default_value")}
        bindings.update(bind_src)
        # inputs: function argument -> the call's input tensors
        data_in = [i for i in node.input if not i.startswith("^")]
        args: dict[str, list[str]] = {}
        pos = 0
        for a in sig.input_arg:
            k = _arg_count(a, bindings)
            args[a.name] = data_in[pos:pos + k]
            pos += k
        if pos != len(data_in):
            raise CannError(node.name, f"{node.op} passes {len(data_in)} inputs to function '{fname}', "
                                       f"which takes {pos}")
        # body node names -> unique graph names
        names: dict[str, str] = {}
        for b in fdef.node_def:
            new = f"{node.name}/{b.name}"
            k = 0
            while new in taken:
                k += 1
                new = f"{node.name}/{b.name}_{k}"
            taken.add(new)
            names[b.name] = new
        ops = {b.name: b.op for b in fdef.node_def}

        def tensor(ref: str, fname=fname, args=args, names=names, ops=ops, node=node) -> str:
            """A body input (``arg``, ``arg:i`` or ``node:out_arg:index``) as a graph tensor name."""
            parts = ref.split(":")
            if len(parts) > 3 or not all(p.isdigit() for p in parts[2:]):
                raise CannError(node.name, f"function '{fname}': input '{ref}' is not arg, arg:i or node:out_arg:index")
            if parts[0] in args and len(parts) <= 2:
                i = int(parts[1]) if len(parts) == 2 and parts[1].isdigit() else 0
                if i >= len(args[parts[0]]):
                    raise CannError(node.name, f"function '{fname}': input '{ref}' is out of range")
                return args[parts[0]][i]
            if parts[0] not in names:
                raise CannError(node.name, f"function '{fname}': input '{ref}' names no argument or node of the body")
            if len(parts) == 1:
                return names[parts[0]]
            if len(parts) == 2 and parts[1].isdigit():
                idx = int(parts[1])
            else:
                arg, i = parts[1], int(parts[2]) if len(parts) == 3 else 0
                outs = _OUTPUT_ARGS.get(ops[parts[0]]) or sigs.get(ops[parts[0]])
                idx = i + (outs.index(arg) if outs and arg in outs else 0)
            return f"{names[parts[0]]}:{idx}" if idx else names[parts[0]]

        body = []
        for b in fdef.node_def:
            n = NodeDef()
            n.CopyFrom(b)
            n.name = names[b.name]
            del n.input[:]
            for ref in b.input:
                if ref.startswith("^"):
                    if ref[1:] in names:
                        n.input.append("^" + names[ref[1:]])
                else:
                    n.input.append(tensor(ref))
            for v in n.attr.values():
                _substitute_attr(v, bindings, fname, node.name)
            body.append((n, (*chain, fname)))
        ret = NodeDef(name=node.name, op="IdentityN")
        ret.input.extend(tensor(fdef.ret[o.name]) if o.name in fdef.ret else "" for o in sig.output_arg)
        if "" in ret.input:
            missing = next(o.name for o in sig.output_arg if o.name not in fdef.ret)
            raise CannError(node.name, f"function '{fname}' returns nothing for its output '{missing}'")
        out.append(ret)
        work.extend(reversed(body))
    return out


# ---------------------------------------------------------------------------------------------
# importer


class _Importer:
    def __init__(self, gd, where: str):
        self.gd = gd
        self.where = where
        self.nodes = {}
        for n in gd.node:
            if n.name in self.nodes:
                raise CannError(n.name, "two nodes have this name")
            self.nodes[n.name] = n
        self.nodes = {n.name: n for n in inline_functions(gd)}
        self.consts: dict[str, np.ndarray] = {}
        self.values: dict[str, SSAValue] = {}
        self.const_values: dict[str, SSAValue] = {}
        self.poisoned: set[str] = set()
        self.diags: list[Diagnostic] = []
        self.block: Block | None = None

    # -- values ------------------------------------------------------------------------------

    def emit(self, op: Operation, loc: str) -> SSAValue:
        op.location = g.name_loc(loc)
        assert self.block is not None
        self.block.add_op(op)
        return op.results[0] if op.results else None

    def is_const(self, key: str) -> bool:
        return key in self.consts

    def value(self, key: str) -> SSAValue:
        if key in self.values:
            return self.values[key]
        if key in self.consts:
            if key not in self.const_values:
                arr = self.consts[key]
                if arr.dtype == np.float64:
                    arr = arr.astype(np.float32)
                name = key[:-2] if key.endswith(":0") else key
                self.const_values[key] = self.emit(g.make_constant(arr, name), name)
            return self.const_values[key]
        raise CannError(key, "tensor has no producer")

    def const(self, key: str, node, what: str) -> np.ndarray:
        if key not in self.consts:
            raise _Unsupported(f"{node.op} with a non-constant {what} input '{key}'")
        return self.consts[key]

    # -- entry -------------------------------------------------------------------------------

    def run(self, input_shape: dict[str, Sequence[int]] | None, out_nodes: Sequence[str] | None) -> ModuleOp:
        nodes = self.nodes
        # outputs
        if out_nodes:
            outputs = []
            for o in out_nodes:
                n, i = split_tensor_name(o)
                if n not in nodes:
                    if o in nodes:
                        n, i = o, 0
                    else:
                        raise CannError(o, "out_nodes names no node of the graph")
                outputs.append((n, i, o if i else n))
        else:
            consumed = {split_tensor_name(i.lstrip("^"))[0] for nd in self.gd.node for i in nd.input}
            outputs = [(nd.name, 0, nd.name) for nd in self.gd.node
                       if nd.name not in consumed and nd.op not in ("NoOp", "Const", "Placeholder", "Assert")]
            if not outputs:
                raise CannError(self.where, "the graph has no output (give out_nodes)")

        # nodes the outputs depend on, in topological order (data inputs only)
        order: list[str] = []
        state: dict[str, int] = {}
        for start, _, _ in outputs:
            stack = [(start, False)]
            while stack:
                name, done = stack.pop()
                if done:
                    state[name] = 2
                    order.append(name)
                    continue
                if state.get(name):
                    if state[name] == 1:
                        raise CannError(name, "the graph has a cycle through this node")
                    continue
                if name not in nodes:
                    raise CannError(name, "input names no node of the graph")
                state[name] = 1
                stack.append((name, True))
                for inp in reversed(nodes[name].input):
                    if inp.startswith("^"):
                        continue
                    dep = split_tensor_name(inp)[0]
                    if state.get(dep) != 2:
                        if state.get(dep) == 1:
                            raise CannError(name, "the graph has a cycle through this node")
                        stack.append((dep, False))

        # inputs
        shapes = {}
        for n, s in (input_shape or {}).items():
            base, idx = split_tensor_name(n)
            if base not in nodes and n in nodes:
                base = n
            if base not in nodes or nodes[base].op != "Placeholder":
                phs = sorted(nd.name for nd in self.gd.node if nd.op == "Placeholder")
                raise CannError(n, f"input_shape names no Placeholder (inputs: {', '.join(phs)})")
            shapes[base] = tuple(int(d) for d in s)
        placeholders = [nodes[n] for n in order if nodes[n].op == "Placeholder"]
        arg_types = [self.placeholder_type(p, shapes.get(p.name)) for p in placeholders]
        self.block = Block(arg_types=arg_types)
        for p, arg in zip(placeholders, self.block.args):
            self.values[_key(p.name, 0)] = arg

        for name in order:
            node = nodes[name]
            if node.op != "Placeholder":
                self.convert_node(node)
        if self.diags:
            raise CannError.many(self.diags)

        results = []
        for n, i, _ in outputs:
            k = _key(n, i)
            if k not in self.values and k not in self.consts:
                raise CannError(n if not i else k, "output names no tensor of the graph")
            results.append(self.value(k))
        self.emit(func.ReturnOp(*results), "return")
        ftype = func.FunctionType.from_lists(arg_types, [r.type for r in results])
        fn = func.FuncOp("main", ftype, Region(self.block))
        fn.arg_attrs = ArrayAttr([DictionaryAttr({"graph.name": StringAttr(p.name)}) for p in placeholders])
        fn.res_attrs = ArrayAttr([DictionaryAttr({"graph.name": StringAttr(o)}) for _, _, o in outputs])
        return ModuleOp([fn])

    def placeholder_type(self, node, given: tuple[int, ...] | None) -> TensorType:
        try:
            elt = g.element_type(_np_dtype(_attr(node, "dtype", 1)))
        except _Unsupported as e:
            raise CannError(node.name, f"Placeholder: {e}") from None
        shp = _attr(node, "shape")
        dims = None
        if shp is not None and not shp.unknown_rank:
            dims = [int(d.size) for d in shp.dim]
        if given is not None:
            if dims is not None:
                if len(given) != len(dims):
                    raise CannError(node.name, f"input_shape has rank {len(given)}, the input has rank {len(dims)}")
                for i, (d, s) in enumerate(zip(dims, given)):
                    if d >= 0 and d != s:
                        raise CannError(node.name, f"input_shape dimension {i} is {s}, the model fixes it to {d}")
            return TensorType(elt, list(given))
        if dims is None:
            raise CannError(node.name, "input has an unknown rank; give its shape with input_shape")
        for i, d in enumerate(dims):
            if d < 0:
                example = ",".join(str(x) if x >= 0 else "1" for x in dims)
                raise CannError(node.name, f"dimension {i} of input '{node.name}' is unknown "
                                           f"(shape {['?' if x < 0 else x for x in dims]}); fix it with input_shape, "
                                           f"e.g. --input_shape \"{node.name}:{example}\"")
        return TensorType(elt, dims)

    def convert_node(self, node) -> None:
        ins = [split_tensor_name(i) for i in node.input if not i.startswith("^")]
        keys = [_key(n, i) for n, i in ins]
        if any(k in self.poisoned for k in keys):
            self.poison(node)
            return
        try:
            if node.op == "Const":
                self.consts[_key(node.name, 0)] = _attr(node, "value")
                return
            if node.op == "NoOp":
                return
            if node.op in _FOLD and all(k in self.consts for k in keys):
                try:
                    outs = _FOLD[node.op](node, [self.consts[k] for k in keys])
                except _Unsupported:
                    raise
                except Exception as e:
                    raise _Unsupported(f"cannot evaluate constant {node.op}: {e}") from None
                for i, v in enumerate(outs):
                    self.consts[_key(node.name, i)] = np.asarray(v)
                return
            if node.op not in _CONVERTERS:
                raise _Unsupported(f"unsupported operator {node.op}")
            results = _CONVERTERS[node.op](self, node, keys)
            for i, r in enumerate(results):
                if isinstance(r, np.ndarray):
                    self.consts[_key(node.name, i)] = r
                elif r is not None:
                    self.values[_key(node.name, i)] = r
        except _Unsupported as e:
            self.diags.append(Diagnostic(node.name, f"{node.op}: {e}" if not str(e).startswith("unsupported op")
                                         else str(e)))
            self.poison(node)
        except CannError as e:
            self.diags.extend(e.diagnostics)
            self.poison(node)

    def poison(self, node) -> None:
        for i in range(64):
            self.poisoned.add(_key(node.name, i))


# ---------------------------------------------------------------------------------------------
# numpy evaluation (constant folding): (node, input arrays) -> output arrays

_Fold = Callable[[Any, list[np.ndarray]], list[np.ndarray]]
_FOLD: dict[str, _Fold] = {}


def _folder(*ops: str):
    def deco(fn: _Fold) -> _Fold:
        for o in ops:
            _FOLD[o] = fn
        return fn

    return deco


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x).astype(x.dtype)


_NP_UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "Neg": np.negative, "Sqrt": np.sqrt, "Rsqrt": lambda x: 1 / np.sqrt(x), "Square": np.square,
    "Exp": np.exp, "Log": np.log, "Abs": np.abs, "Reciprocal": np.reciprocal, "Inv": np.reciprocal,
    "Relu": lambda x: np.maximum(x, 0), "Relu6": lambda x: np.clip(x, 0, 6), "Tanh": np.tanh,
    "Sigmoid": lambda x: 1 / (1 + np.exp(-x)), "Floor": np.floor, "Ceil": np.ceil,
    "Erf": _erf, "Erfc": lambda x: (1 - _erf(x)).astype(x.dtype),
    "Softplus": lambda x: np.logaddexp(0, x).astype(x.dtype),
}
_NP_BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "Add": np.add, "AddV2": np.add, "Sub": np.subtract, "Mul": np.multiply, "RealDiv": np.divide,
    "Div": lambda a, b: (a // b) if a.dtype.kind in "iu" else a / b, "FloorDiv": np.floor_divide,
    "FloorMod": np.mod, "Maximum": np.maximum, "Minimum": np.minimum, "Pow": np.power,
    "SquaredDifference": lambda a, b: np.square(a - b), "BiasAdd": None,
    "Equal": np.equal, "NotEqual": np.not_equal, "Less": np.less, "LessEqual": np.less_equal,
    "Greater": np.greater, "GreaterEqual": np.greater_equal, "LogicalAnd": np.logical_and,
    "LogicalOr": np.logical_or,
}


@_folder(*_NP_UNARY)
def _f_unary(node, a):
    return [np.asarray(_NP_UNARY[node.op](a[0])).astype(a[0].dtype)]


@_folder(*(k for k, v in _NP_BINARY.items() if v is not None))
def _f_binary(node, a):
    r = _NP_BINARY[node.op](a[0], a[1])
    return [np.asarray(r) if r.dtype == np.bool_ else np.asarray(r).astype(a[0].dtype)]


@_folder("BiasAdd")
def _f_bias_add(node, a):
    x, b = a
    if _attr(node, "data_format", "NHWC") == "NCHW" and x.ndim > 2:
        b = b.reshape((-1,) + (1,) * (x.ndim - 2))
    return [x + b]


@_folder("Identity", "StopGradient", "Snapshot", "PreventGradient", "CheckNumerics", "EnsureShape")
def _f_identity(node, a):
    return [a[0]]


@_folder("IdentityN")
def _f_identity_n(node, a):
    return list(a)


@_folder("Shape", "Size", "Rank", "ShapeN")
def _f_shape(node, a):
    dt = _np_dtype(_attr(node, "out_type", 3)) if node.op != "Rank" else np.int32
    if node.op == "Shape":
        return [np.array(a[0].shape, dt)]
    if node.op == "ShapeN":
        return [np.array(x.shape, dt) for x in a]
    if node.op == "Size":
        return [np.array(a[0].size, dt)]
    return [np.array(a[0].ndim, np.int32)]


@_folder("Cast")
def _f_cast(node, a):
    return [a[0].astype(_np_dtype(_attr(node, "DstT", 1)))]


@_folder("Reshape")
def _f_reshape(node, a):
    return [a[0].reshape([int(d) for d in a[1].reshape(-1)])]


@_folder("Transpose")
def _f_transpose(node, a):
    return [np.transpose(a[0], [int(p) for p in a[1].reshape(-1)])]


@_folder("ConcatV2")
def _f_concat(node, a):
    return [np.concatenate(a[:-1], axis=int(a[-1]))]


@_folder("Pack")
def _f_pack(node, a):
    return [np.stack(a, axis=int(_attr(node, "axis", 0)))]


@_folder("Unpack")
def _f_unpack(node, a):
    ax = int(_attr(node, "axis", 0))
    return [np.take(a[0], i, axis=ax) for i in range(a[0].shape[ax])]


@_folder("ExpandDims")
def _f_expand_dims(node, a):
    return [np.expand_dims(a[0], int(a[1].reshape(-1)[0]))]


@_folder("Squeeze")
def _f_squeeze(node, a):
    dims = _attr(node, "squeeze_dims", []) or []
    return [np.squeeze(a[0], axis=tuple(dims) if dims else None)]


@_folder("Fill")
def _f_fill(node, a):
    return [np.full([int(d) for d in a[0].reshape(-1)], a[1])]


@_folder("Range")
def _f_range(node, a):
    dt = _np_dtype(_attr(node, "Tidx", 3))
    return [np.arange(a[0], a[1], a[2]).astype(dt)]


@_folder("ZerosLike", "OnesLike")
def _f_like(node, a):
    return [np.zeros_like(a[0]) if node.op == "ZerosLike" else np.ones_like(a[0])]


@_folder("GatherV2")
def _f_gather(node, a):
    if int(_attr(node, "batch_dims", 0)):
        raise _Unsupported("GatherV2 with batch_dims is not supported")
    return [np.take(a[0], a[1], axis=int(a[2]))]


@_folder("Sum", "Prod", "Mean", "Max", "Min", "All", "Any")
def _f_reduce(node, a):
    fn = {"Sum": np.sum, "Prod": np.prod, "Mean": np.mean, "Max": np.max, "Min": np.min,
          "All": np.all, "Any": np.any}[node.op]
    axes = tuple(int(x) for x in a[1].reshape(-1))
    r = fn(a[0], axis=axes, keepdims=bool(_attr(node, "keep_dims", False)))
    return [np.asarray(r).astype(a[0].dtype)]


@_folder("StridedSlice")
def _f_strided_slice(node, a):
    idx = _strided_index(node, a[0].ndim, a[1], a[2], a[3])
    return [np.asarray(a[0][idx])]


@_folder("Slice")
def _f_slice(node, a):
    begin = [int(v) for v in a[1].reshape(-1)]
    size = [int(v) for v in a[2].reshape(-1)]
    idx = tuple(slice(b, None if s == -1 else b + s) for b, s in zip(begin, size))
    return [a[0][idx]]


@_folder("Select", "SelectV2")
def _f_select(node, a):
    return [np.where(a[0], a[1], a[2])]


@_folder("MatMul")
def _f_matmul(node, a):
    x = a[0].T if _attr(node, "transpose_a", False) else a[0]
    y = a[1].T if _attr(node, "transpose_b", False) else a[1]
    return [x @ y]


@_folder("Softmax")
def _f_softmax(node, a):
    e = np.exp(a[0] - a[0].max(axis=-1, keepdims=True))
    return [(e / e.sum(axis=-1, keepdims=True)).astype(a[0].dtype)]


def _strided_index(node, rank: int, begin, end, strides) -> tuple:
    """The numpy index of a StridedSlice (masks applied): a tuple of slices, ints, None, Ellipsis."""
    begin, end, strides = ([int(v) for v in x.reshape(-1)] for x in (begin, end, strides))
    bm, em, elm, nam, sam = (int(_attr(node, k, 0)) for k in
                             ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask"))
    idx: list[Any] = []
    for i, (b, e, s) in enumerate(zip(begin, end, strides)):
        bit = 1 << i
        if elm & bit:
            idx.append(Ellipsis)
        elif nam & bit:
            idx.append(None)
        elif sam & bit:
            idx.append(b)
        else:
            if s == 0:
                raise _Unsupported("StridedSlice with a zero stride")
            idx.append(slice(None if bm & bit else b, None if em & bit else e, s))
    return tuple(idx)


# ---------------------------------------------------------------------------------------------
# converters: (importer, node, input keys) -> results (SSAValue, numpy constant or None per output)

_Conv = Callable[[_Importer, Any, list[str]], list[Any]]
_CONVERTERS: dict[str, _Conv] = {}


def _converter(*ops: str):
    def deco(fn: _Conv) -> _Conv:
        for o in ops:
            _CONVERTERS[o] = fn
        return fn

    return deco


def _float_value(imp: _Importer, node, key: str) -> SSAValue:
    v = imp.value(key)
    if not isinstance(g._elt(v), (g.Float32Type, g.Float16Type)):
        raise _Unsupported(f"{node.op} on {g.numpy_dtype(g._elt(v)).name} tensors is not supported "
                           "(float16 and float32 only)")
    return v


def _like(imp: _Importer, node, value: float | np.ndarray, like: SSAValue) -> SSAValue:
    arr = np.asarray(value, dtype=g.numpy_dtype(g._elt(like)))
    return imp.emit(g.make_constant(arr, node.name), node.name)


def _operand(imp: _Importer, node, key: str, like: SSAValue) -> SSAValue:
    """Input ``key`` as a graph value of ``like``'s element type (constants converted)."""
    if key in imp.consts:
        arr = imp.consts[key]
        dt = g.numpy_dtype(g._elt(like))
        if arr.dtype != dt:
            return _like(imp, node, arr, like)
    v = imp.value(key)
    if g._elt(v) != g._elt(like):
        raise _Unsupported(f"operands of different dtypes ({g._elt(v)} and {g._elt(like)})")
    return v


def _check_data_format(node, allowed=("NHWC", "NCHW")) -> str:
    df = _attr(node, "data_format", "NHWC")
    if df not in allowed:
        raise _Unsupported(f"unsupported attribute value data_format={df!r}")
    return df


def _to_nchw(imp: _Importer, node, x: SSAValue, df: str) -> SSAValue:
    if len(g._shape(x)) != 4:
        raise _Unsupported(f"input must have rank 4, got {len(g._shape(x))}")
    return imp.emit(g.TransposeOp(x, _NHWC_TO_NCHW), node.name) if df == "NHWC" else x


def _from_nchw(imp: _Importer, node, y: SSAValue, df: str) -> SSAValue:
    return imp.emit(g.TransposeOp(y, _NCHW_TO_NHWC), node.name) if df == "NHWC" else y


def _spatial(node, df: str, in_hw: Sequence[int], k_hw: Sequence[int], attr_ksize: bool = False):
    """strides, dilations, pads (top, left, bottom, right) of a 2-D window op in NCHW terms."""
    hw = (1, 2) if df == "NHWC" else (2, 3)
    st = list(_attr(node, "strides", [1, 1, 1, 1]))
    dl = list(_attr(node, "dilations", [1, 1, 1, 1]))
    if len(st) != 4 or len(dl) != 4:
        raise _Unsupported(f"strides {st} / dilations {dl} must have 4 entries")
    strides = [st[hw[0]], st[hw[1]]]
    dil = [dl[hw[0]], dl[hw[1]]]
    if min(strides) < 1 or min(dil) < 1:
        raise _Unsupported(f"unsupported attribute value strides={st} / dilations={dl}")
    other = [i for i in range(4) if i not in hw]
    if any(st[i] != 1 for i in other) or any(dl[i] != 1 for i in other):
        raise _Unsupported(f"strides {st} / dilations {dl} on the batch or channel axis are not supported")
    padding = _attr(node, "padding", "VALID")
    if padding == "VALID":
        pads = [0, 0, 0, 0]
    elif padding == "SAME":  # the extra pixel goes to the end (bottom, right)
        pads = [0, 0, 0, 0]
        for i in range(2):
            out = -(-in_hw[i] // strides[i])
            total = max(0, (out - 1) * strides[i] + (k_hw[i] - 1) * dil[i] + 1 - in_hw[i])
            pads[i], pads[i + 2] = total // 2, total - total // 2
    elif padding == "EXPLICIT":
        ep = list(_attr(node, "explicit_paddings", []))
        if len(ep) != 8:
            raise _Unsupported(f"explicit_paddings {ep} must have 8 entries")
        if any(ep[2 * i] or ep[2 * i + 1] for i in other):
            raise _Unsupported("explicit padding of the batch or channel axis is not supported")
        pads = [ep[2 * hw[0]], ep[2 * hw[1]], ep[2 * hw[0] + 1], ep[2 * hw[1] + 1]]
    else:
        raise _Unsupported(f"unsupported attribute value padding={padding!r}")
    return strides, dil, pads


def _conv_out(n_in: int, k: int, s: int, d: int, p: int) -> int:
    return (n_in + p - (k - 1) * d - 1) // s + 1


@_converter("Conv2D", "DepthwiseConv2dNative")
def _conv2d(imp, node, keys):
    df = _check_data_format(node)
    x = _to_nchw(imp, node, _float_value(imp, node, keys[0]), df)
    w = imp.const(keys[1], node, "filter")
    if w.ndim != 4:
        raise _Unsupported(f"filter must have rank 4, got {w.ndim}")
    n, c, h, wd = g._shape(x)
    kh, kw, ci, m = w.shape
    if node.op == "Conv2D":
        if c % ci:
            raise _Unsupported(f"filter input channels {ci} do not divide the input channels {c}")
        group = c // ci
        w_oihw = np.transpose(w, (3, 2, 0, 1))
    else:  # [H, W, C, M] -> output channel c*M + m, one input channel each
        if ci != c:
            raise _Unsupported(f"filter channels {ci} differ from the input channels {c}")
        group = c
        w_oihw = np.transpose(w, (2, 3, 0, 1)).reshape(c * m, 1, kh, kw)
    strides, dil, pads = _spatial(node, df, (h, wd), (kh, kw))
    o = w_oihw.shape[0]
    ho = _conv_out(h, kh, strides[0], dil[0], pads[0] + pads[2])
    wo = _conv_out(wd, kw, strides[1], dil[1], pads[1] + pads[3])
    if ho < 1 or wo < 1:
        raise _Unsupported("the window is larger than the padded input")
    wv = imp.emit(g.make_constant(np.ascontiguousarray(w_oihw).astype(g.numpy_dtype(g._elt(x))), node.name + "/filter"),
                  node.name)
    rt = TensorType(g._elt(x), [n, o, ho, wo])
    y = imp.emit(g.Conv2DOp(x, wv, None, rt, strides=strides, pads=pads, dilations=dil, group=group), node.name)
    return [_from_nchw(imp, node, y, df)]


@_converter("MaxPool", "AvgPool")
def _pool(imp, node, keys):
    df = _check_data_format(node)
    x = _to_nchw(imp, node, _float_value(imp, node, keys[0]), df)
    hw = (1, 2) if df == "NHWC" else (2, 3)
    ks = list(_attr(node, "ksize", []))
    if len(ks) != 4 or any(ks[i] != 1 for i in range(4) if i not in hw):
        raise _Unsupported(f"unsupported attribute value ksize={ks}")
    k = [ks[hw[0]], ks[hw[1]]]
    n, c, h, w = g._shape(x)
    strides, _, pads = _spatial(node, df, (h, w), k)
    ho = _conv_out(h, k[0], strides[0], 1, pads[0] + pads[2])
    wo = _conv_out(w, k[1], strides[1], 1, pads[1] + pads[3])
    if ho < 1 or wo < 1:
        raise _Unsupported("the window is larger than the padded input")
    rt = TensorType(g._elt(x), [n, c, ho, wo])
    if node.op == "MaxPool":
        op = g.MaxPoolOp(x, rt, kernel_shape=k, strides=strides, pads=pads)
    else:  # TensorFlow's SAME average excludes the padding from the count
        op = g.AvgPoolOp(x, rt, kernel_shape=k, strides=strides, pads=pads, count_include_pad=0)
    return [_from_nchw(imp, node, imp.emit(op, node.name), df)]


@_converter("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")
def _fused_bn(imp, node, keys):
    if _attr(node, "is_training", True):
        raise _Unsupported("is_training=true is not supported (inference only)")
    df = _check_data_format(node)
    x = _float_value(imp, node, keys[0])
    xn = _to_nchw(imp, node, x, df)
    params = [imp.const(k, node, what).astype(g.numpy_dtype(g._elt(x)))
              for k, what in zip(keys[1:5], ("scale", "offset", "mean", "variance"))]
    c = g._shape(xn)[1]
    if any(p.shape != (c,) for p in params):
        raise _Unsupported(f"scale/offset/mean/variance must have shape [{c}]")
    vals = [imp.emit(g.make_constant(p, k[:-2] if k.endswith(":0") else k), node.name) for p, k in zip(params, keys[1:5])]
    y = imp.emit(g.BatchNormOp(xn, *vals, epsilon=float(_attr(node, "epsilon", 1e-4))), node.name)
    # outputs 1..5 (batch statistics, reserve space) are training outputs: not produced
    return [_from_nchw(imp, node, y, df)]


@_converter("BiasAdd", "BiasAddV1")
def _bias_add(imp, node, keys):
    x = _float_value(imp, node, keys[0])
    s = g._shape(x)
    df = _check_data_format(node, ("NHWC", "NCHW")) if node.op == "BiasAdd" else "NHWC"
    b = _operand(imp, node, keys[1], x)
    if len(g._shape(b)) != 1:
        raise _Unsupported("bias must have rank 1")
    if df == "NCHW" and len(s) > 2:
        b = imp.emit(g.ReshapeOp(b, [g._shape(b)[0]] + [1] * (len(s) - 2)), node.name)
    return [imp.emit(g.AddOp(x, b), node.name)]


_UNARY = {"Sigmoid": _G("SigmoidOp"), "Tanh": _G("TanhOp"), "Exp": _G("ExpOp"), "Log": _G("LogOp"), "Sqrt": _G("SqrtOp"),
          "Reciprocal": _G("ReciprocalOp"), "Inv": _G("ReciprocalOp"), "Abs": _G("AbsOp"), "Neg": _G("NegOp"), "Erf": _G("ErfOp"),
          "Softplus": _G("SoftplusOp"), "Relu": g.ReluOp}


@_converter(*_UNARY)
def _unary(imp, node, keys):
    return [imp.emit(_UNARY[node.op](_float_value(imp, node, keys[0])), node.name)]


@_converter("Relu6", "Elu", "Selu", "LeakyRelu", "Rsqrt", "Square", "Erfc")
def _activation(imp, node, keys):
    x = _float_value(imp, node, keys[0])
    t, name = node.op, node.name
    if t == "Relu6":
        return [imp.emit(_G("ClipOp")(x, min=0.0, max=6.0), name)]
    if t == "Elu":
        return [imp.emit(_G("EluOp")(x, alpha=1.0), name)]
    if t == "Selu":  # TensorFlow's constants
        return [imp.emit(_G("SeluOp")(x, alpha=1.6732632423543772848170429916717,
                                  gamma=1.0507009873554804934193349852946), name)]
    if t == "LeakyRelu":
        return [imp.emit(_G("LeakyReluOp")(x, alpha=float(_attr(node, "alpha", 0.2))), name)]
    if t == "Rsqrt":
        return [imp.emit(_G("ReciprocalOp")(imp.emit(_G("SqrtOp")(x), name)), name)]
    if t == "Square":
        return [imp.emit(g.MulOp(x, x), name)]
    # Erfc: 1 - erf(x)
    return [imp.emit(g.SubOp(_like(imp, node, 1.0, x), imp.emit(_G("ErfOp")(x), name)), name)]


_BINARY = {"Add": g.AddOp, "AddV2": g.AddOp, "Sub": g.SubOp, "Mul": g.MulOp, "RealDiv": g.DivOp,
           "Div": g.DivOp, "Maximum": _G("MaxOp"), "Minimum": _G("MinOp"), "Pow": _G("PowOp")}


@_converter(*_BINARY, "SquaredDifference")
def _binary(imp, node, keys):
    # the non-constant operand fixes the element type
    first = 0 if keys[0] not in imp.consts else 1
    like = _float_value(imp, node, keys[first])
    a, b = _operand(imp, node, keys[0], like), _operand(imp, node, keys[1], like)
    if g.broadcast_shapes(g._shape(a), g._shape(b)) is None:
        raise _Unsupported(f"operand shapes {list(g._shape(a))} and {list(g._shape(b))} do not broadcast")
    if node.op == "SquaredDifference":
        d = imp.emit(g.SubOp(a, b), node.name)
        return [imp.emit(g.MulOp(d, d), node.name)]
    return [imp.emit(_BINARY[node.op](a, b), node.name)]


@_converter("Identity", "StopGradient", "Snapshot", "PreventGradient", "EnsureShape")
def _identity(imp, node, keys):
    return [imp.value(keys[0])]


@_converter("IdentityN")
def _identity_n(imp, node, keys):
    return [imp.consts[k] if k in imp.consts else imp.value(k) for k in keys]


@_converter("Shape", "Size", "Rank", "ShapeN")
def _shape_op(imp, node, keys):
    """The shape of a static tensor is a constant."""
    arrs = [np.empty(g._shape(imp.value(k)), np.bool_) if k not in imp.consts else imp.consts[k] for k in keys]
    return _f_shape(node, arrs)


@_converter("Cast")
def _cast(imp, node, keys):
    x = imp.value(keys[0])
    dst = g.element_type(_np_dtype(_attr(node, "DstT", 1)))
    src = g._elt(x)
    if src == dst:
        return [x]
    floats = (g.Float32Type, g.Float16Type)
    if isinstance(src, floats) and isinstance(dst, floats):
        return [imp.emit(_G("CastOp")(x, dst), node.name)]
    raise _Unsupported(f"Cast from {g.numpy_dtype(src).name} to {g.numpy_dtype(dst).name} is not supported")


def _matmul_operand(imp, node, key: str, like: SSAValue, transpose: bool) -> SSAValue:
    """An operand of a matrix product, its last two axes swapped when ``transpose``."""
    if key in imp.consts:
        arr = imp.consts[key]
        if transpose:
            arr = np.swapaxes(arr, -1, -2)
        name = key[:-2] if key.endswith(":0") else key
        return imp.emit(g.make_constant(np.ascontiguousarray(arr).astype(g.numpy_dtype(g._elt(like))), name), node.name)
    v = _operand(imp, node, key, like)
    if transpose:
        r = len(g._shape(v))
        v = imp.emit(g.TransposeOp(v, [*range(r - 2), r - 1, r - 2]), node.name)
    return v


@_converter("MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3")
def _matmul(imp, node, keys):
    first = 0 if keys[0] not in imp.consts else 1
    like = _float_value(imp, node, keys[first])
    if node.op == "MatMul":
        ta, tb = bool(_attr(node, "transpose_a", False)), bool(_attr(node, "transpose_b", False))
    else:
        ta, tb = bool(_attr(node, "adj_x", False)), bool(_attr(node, "adj_y", False))
    a = _matmul_operand(imp, node, keys[0], like, ta)
    b = _matmul_operand(imp, node, keys[1], like, tb)
    sa, sb = g._shape(a), g._shape(b)
    if len(sa) < 2 or len(sb) < 2 or (node.op == "MatMul" and (len(sa) != 2 or len(sb) != 2)):
        raise _Unsupported(f"operands of rank {len(sa)} and {len(sb)} are not supported")
    if g.matmul_shape(sa, sb) is None:
        raise _Unsupported(f"operand shapes {list(sa)} and {list(sb)} are incompatible")
    return [imp.emit(g.MatMulOp(a, b), node.name)]


def _parse_einsum(eq: str) -> tuple[list[str], str]:
    eq = eq.replace(" ", "")
    if "->" not in eq or "." in eq:
        raise _Unsupported(f"equation {eq!r}: only explicit outputs without ellipsis are supported")
    lhs, out = eq.split("->")
    return lhs.split(","), out


@_converter("Einsum")
def _einsum(imp, node, keys):
    """Two-operand Einsum as transpose + reshape + (batched) matmul + reshape + transpose."""
    eq = _attr(node, "equation", "")
    ins, out = _parse_einsum(eq)
    if len(ins) != 2 or len(keys) != 2:
        raise _Unsupported(f"equation {eq!r}: only two operands are supported")
    sa_, sb_ = ins
    if any(len(set(s)) != len(s) for s in (sa_, sb_, out)):
        raise _Unsupported(f"equation {eq!r}: repeated indices (traces, diagonals) are not supported")
    first = 0 if keys[0] not in imp.consts else 1
    like = _float_value(imp, node, keys[first])
    shapes = []
    for k, s in zip(keys, ins):
        shp = imp.consts[k].shape if k in imp.consts else g._shape(imp.value(k))
        if len(shp) != len(s):
            raise _Unsupported(f"equation {eq!r}: operand '{s}' has rank {len(shp)}")
        shapes.append(shp)
    size: dict[str, int] = {}
    for s, shp in zip(ins, shapes):
        for ch, d in zip(s, shp):
            if size.setdefault(ch, d) != d:
                raise _Unsupported(f"equation {eq!r}: index '{ch}' has sizes {size[ch]} and {d} (broadcasting)")
    batch = [c for c in out if c in sa_ and c in sb_]
    contr = [c for c in sa_ if c in sb_ and c not in out]
    a_free = [c for c in out if c in sa_ and c not in sb_]
    b_free = [c for c in out if c in sb_ and c not in sa_]
    if set(out) - set(sa_) - set(sb_) or set(sa_) - set(out) - set(contr) or set(sb_) - set(out) - set(contr):
        raise _Unsupported(f"equation {eq!r}: indices summed over one operand only are not supported")
    bsz = math.prod(size[c] for c in batch)
    m, kk, n = (math.prod(size[c] for c in cs) for cs in (a_free, contr, b_free))
    a_shape = ([bsz] if batch else []) + [m, kk]
    b_shape = ([bsz] if batch else []) + [kk, n]

    def prep(key, spec, order, shape2):
        perm = [spec.index(c) for c in order]
        if key in imp.consts:
            arr = np.transpose(imp.consts[key], perm).reshape(shape2).astype(g.numpy_dtype(g._elt(like)))
            return imp.emit(g.make_constant(np.ascontiguousarray(arr), node.name + "/" + spec), node.name)
        v = _operand(imp, node, key, like)
        if perm != sorted(perm):
            v = imp.emit(g.TransposeOp(v, perm), node.name)
        if list(g._shape(v)) != list(shape2):
            v = imp.emit(g.ReshapeOp(v, shape2), node.name)
        return v

    a = prep(keys[0], sa_, batch + a_free + contr, a_shape)
    b = prep(keys[1], sb_, batch + contr + b_free, b_shape)
    y = imp.emit(g.MatMulOp(a, b), node.name)
    order = batch + a_free + b_free
    full = [size[c] for c in order]
    if list(g._shape(y)) != full:
        y = imp.emit(g.ReshapeOp(y, full), node.name)
    perm = [order.index(c) for c in out]
    if perm != sorted(perm):
        y = imp.emit(g.TransposeOp(y, perm), node.name)
    return [y]


_REDUCE = {"Mean": "mean", "Sum": "sum", "Max": "max", "Min": "min", "Prod": "prod"}


@_converter(*_REDUCE)
def _reduce(imp, node, keys):
    x = _float_value(imp, node, keys[0])
    r = len(g._shape(x))
    axes = [int(v) for v in imp.const(keys[1], node, "reduction_indices").reshape(-1)]
    if any(not -r <= a < r for a in axes):
        raise _Unsupported(f"reduction axes {axes} out of range for rank {r}")
    axes = sorted({a % r for a in axes})
    keep = bool(_attr(node, "keep_dims", False))
    if not axes:
        return [x]
    if 0 in g._shape(x):
        raise _Unsupported("reduction of an empty tensor")
    return [imp.emit(_G("ReduceOp")(x, _REDUCE[node.op], axes, keep), node.name)]


def _reshape_to(imp, node, x: SSAValue, shape: Sequence[int]) -> SSAValue:
    if tuple(shape) == g._shape(x):
        return x
    return imp.emit(g.ReshapeOp(x, list(shape)), node.name)


@_converter("Reshape")
def _reshape(imp, node, keys):
    x = imp.value(keys[0])
    shape = [int(d) for d in imp.const(keys[1], node, "shape").reshape(-1)]
    total = math.prod(g._shape(x))
    if shape.count(-1) > 1:
        raise _Unsupported(f"shape {shape} has more than one -1")
    if -1 in shape:
        known = math.prod(d for d in shape if d != -1)
        if known == 0 or total % known:
            raise _Unsupported(f"cannot reshape {list(g._shape(x))} to {shape}")
        shape[shape.index(-1)] = total // known
    if math.prod(shape) != total or min(shape, default=1) < 0:
        raise _Unsupported(f"cannot reshape {list(g._shape(x))} to {shape}")
    return [_reshape_to(imp, node, x, shape)]


@_converter("Squeeze")
def _squeeze(imp, node, keys):
    x = imp.value(keys[0])
    s = g._shape(x)
    r = len(s)
    dims = [d % r for d in (_attr(node, "squeeze_dims", []) or [])] if r else []
    if dims and any(s[d] != 1 for d in dims):
        raise _Unsupported(f"squeeze_dims {dims} names an axis whose size is not 1 (shape {list(s)})")
    out = [d for i, d in enumerate(s) if (i not in dims if dims else d != 1)]
    return [_reshape_to(imp, node, x, out)]


@_converter("ExpandDims")
def _expand_dims(imp, node, keys):
    x = imp.value(keys[0])
    s = list(g._shape(x))
    ax = int(imp.const(keys[1], node, "axis").reshape(-1)[0])
    if not -len(s) - 1 <= ax <= len(s):
        raise _Unsupported(f"axis {ax} out of range for rank {len(s)}")
    ax = ax % (len(s) + 1)
    return [_reshape_to(imp, node, x, s[:ax] + [1] + s[ax:])]


@_converter("Transpose")
def _transpose(imp, node, keys):
    x = imp.value(keys[0])
    r = len(g._shape(x))
    perm = [int(p) % max(r, 1) for p in imp.const(keys[1], node, "perm").reshape(-1)]
    if sorted(perm) != list(range(r)):
        raise _Unsupported(f"perm {perm} is not a permutation of 0..{r - 1}")
    if perm == list(range(r)):
        return [x]
    return [imp.emit(g.TransposeOp(x, perm), node.name)]


def _concat_values(imp, node, keys: list[str], axis: int, expand: bool) -> SSAValue:
    first = next((k for k in keys if k not in imp.consts), keys[0])
    like = imp.value(first)
    vals = [_operand(imp, node, k, like) for k in keys]
    r = len(g._shape(vals[0])) + (1 if expand else 0)
    if not -r <= axis < r:
        raise _Unsupported(f"axis {axis} out of range for rank {r}")
    axis %= r
    if expand:
        vals = [_reshape_to(imp, node, v, [*g._shape(v)[:axis], 1, *g._shape(v)[axis:]]) for v in vals]
    shapes = [g._shape(v) for v in vals]
    if any(len(s) != r or any(s[i] != shapes[0][i] for i in range(r) if i != axis) for s in shapes):
        raise _Unsupported(f"inputs of shapes {[list(s) for s in shapes]} do not concatenate on axis {axis}")
    if len(vals) == 1:
        return vals[0]
    return imp.emit(g.ConcatOp(vals, axis), node.name)


@_converter("ConcatV2")
def _concat(imp, node, keys):
    axis = int(imp.const(keys[-1], node, "axis").reshape(-1)[0])
    return [_concat_values(imp, node, keys[:-1], axis, False)]


@_converter("Pack")
def _pack(imp, node, keys):
    return [_concat_values(imp, node, keys, int(_attr(node, "axis", 0)), True)]


@_converter("Pad", "PadV2", "MirrorPad")
def _pad(imp, node, keys):
    x = _float_value(imp, node, keys[0])
    s = g._shape(x)
    r = len(s)
    p = imp.const(keys[1], node, "paddings").astype(np.int64)
    if p.shape != (r, 2):
        raise _Unsupported(f"paddings of shape {list(p.shape)} (expected [{r}, 2])")
    if p.min(initial=0) < 0:
        raise _Unsupported("negative paddings are not supported")
    pads = [int(v) for v in p[:, 0]] + [int(v) for v in p[:, 1]]
    value = 0.0
    mode = "constant"
    if node.op == "PadV2":
        value = float(imp.const(keys[2], node, "constant_values").reshape(-1)[0])
    if node.op == "MirrorPad":
        m = _attr(node, "mode", "REFLECT").upper()
        if m == "REFLECT":
            mode = "reflect"
            if any(max(p[i]) >= s[i] for i in range(r) if p[i].any()):
                raise _Unsupported(f"REFLECT paddings {p.tolist()} must be smaller than the axis (shape {list(s)})")
        elif m == "SYMMETRIC":
            return [_symmetric_pad(imp, node, x, p)]
        else:
            raise _Unsupported(f"unsupported attribute value mode={m!r}")
    if not any(pads):
        return [x]
    return [imp.emit(_G("PadOp")(x, pads, mode, value), node.name)]


def _symmetric_pad(imp, node, x: SSAValue, p: np.ndarray) -> SSAValue:
    """MirrorPad SYMMETRIC (the edge repeated): per axis, concat(reversed head, x, reversed tail)."""
    for ax in range(len(p)):
        before, after = int(p[ax, 0]), int(p[ax, 1])
        if not before and not after:
            continue
        s = g._shape(x)
        if max(before, after) > s[ax]:
            raise _Unsupported(f"SYMMETRIC paddings {p.tolist()} must not exceed the axis (shape {list(s)})")
        parts = []

        def rev(start: int, end: int) -> SSAValue:
            st = [0] * len(s)
            en = list(s)
            sp = [1] * len(s)
            st[ax], en[ax], sp[ax] = start, end, -1
            return imp.emit(_G("SliceOp")(x, st, en, sp), node.name)

        if before:
            parts.append(rev(before - 1, -1))
        parts.append(x)
        if after:
            parts.append(rev(s[ax] - 1, s[ax] - 1 - after))
        x = imp.emit(g.ConcatOp(parts, ax), node.name)
    return x


@_converter("Softmax")
def _softmax(imp, node, keys):
    x = _float_value(imp, node, keys[0])
    r = len(g._shape(x))
    if r < 1:
        raise _Unsupported("Softmax of a scalar")
    return [imp.emit(g.SoftmaxOp(x, r - 1), node.name)]


@_converter("StridedSlice", "Slice")
def _strided_slice(imp, node, keys):
    x = imp.value(keys[0])
    s = g._shape(x)
    r = len(s)
    if node.op == "Slice":
        begin = [int(v) for v in imp.const(keys[1], node, "begin").reshape(-1)]
        size = [int(v) for v in imp.const(keys[2], node, "size").reshape(-1)]
        idx = tuple(slice(b, None if z == -1 else b + z) for b, z in zip(begin, size))
    else:
        idx = _strided_index(node, r, *(imp.const(k, node, w) for k, w in zip(keys[1:4], ("begin", "end", "strides"))))
    # expand the ellipsis and resolve every entry against the input shape
    n_real = sum(1 for e in idx if e is not None and e is not Ellipsis)
    if n_real > r:
        raise _Unsupported(f"{n_real} indices for a tensor of rank {r}")
    full: list[Any] = []
    seen_ellipsis = False
    for e in idx:
        if e is Ellipsis:
            if not seen_ellipsis:
                full.extend([slice(None)] * (r - n_real))
            seen_ellipsis = True
        else:
            full.append(e)
    if not seen_ellipsis:
        full.extend([slice(None)] * (r - n_real))
    starts, ends, steps, out_shape = [], [], [], []
    axis = 0
    for e in full:
        if e is None:
            out_shape.append(1)
            continue
        d = s[axis]
        if isinstance(e, int):
            i = e + d if e < 0 else e
            if not 0 <= i < d:
                raise _Unsupported(f"index {e} out of range for axis {axis} of size {d}")
            starts.append(i), ends.append(i + 1), steps.append(1)
        else:
            st, en, sp = e.indices(d)
            ln = len(range(st, en, sp))
            if ln == 0:
                raise _Unsupported("an empty slice is not supported")
            if sp < 0 and en < -1:
                en = -1
            starts.append(st), ends.append(en), steps.append(sp)
            out_shape.append(ln)
        axis += 1
    y = x
    if (starts, ends, steps) != ([0] * r, list(s), [1] * r):
        y = imp.emit(_G("SliceOp")(x, starts, ends, steps), node.name)
    return [_reshape_to(imp, node, y, out_shape)]


def import_tf(
    model,
    *,
    input_shape: dict[str, Sequence[int]] | None = None,
    out_nodes: Sequence[str] | None = None,
) -> ModuleOp:
    """Import a frozen TensorFlow GraphDef (path, bytes or ``GraphDef``) into a ``graph`` module (verified).

    ``input_shape`` maps Placeholder names (``x`` or ``x:0``) to static shapes; ``out_nodes``
    lists output tensors (``node`` or ``node:index``; default: the graph's unconsumed nodes).

    Raises:
        CannError: not a GraphDef, unsupported operators (one diagnostic per node, all at once),
            an input dimension left unknown.
    """
    gd, where = load_graph_def(model)
    module = _Importer(gd, where).run(input_shape, out_nodes)
    module.verify()
    return module


SUPPORTED_OPS = sorted(set(_CONVERTERS) | {"Const", "Placeholder", "NoOp", *_CALL_OPS})
FOLDED_OPS = sorted(set(_FOLD) - set(_CONVERTERS))
