"""``@cann.jit``: compile a whole Python function for the simulated AI Core, once per signature.

The function is either

* a plain Python function whose array arguments are computed on with :func:`cann.op` (and
  ``+ - * / @``): it is *traced*, run once with :class:`cann.mixed.Tracer` arguments that record
  every ``cann.op`` call into one ONNX graph, so the whole function is one model (graph fusion,
  UB fusion and pipelining apply across its operators); or
* an onnxscript function (``@onnxscript.script()``): its ONNX function, with model-local functions
  it calls inlined, is the graph; positional arguments are its tensor inputs, keyword arguments
  its attributes.

The signature is the shapes and dtypes of the array arguments, the values of the others (they are
Python constants of the trace: a new value traces again) and the compile options; the model is
compiled and cached by :mod:`cann.mixed_cache` (memory and disk). Numpy arrays the function uses
that are not arguments are constants of the graph, fixed at the first trace of a signature.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import inspect
import textwrap
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import onnx
import onnx.inliner
from onnx import helper

from cann.errors import CannError
from cann.mixed import _STATE, Trace, Tracer, active_trace, infer_error, relocate, tensor_type, user_location
from cann.mixed_cache import CACHE
from cann.options import CompileOptions, validate_options

#: signatures a jitted function keeps compiled models for (least recently used dropped first)
MAX_SIGNATURES = 32


@dataclass
class _Compiled:
    model: object  # cann.runtime.Model
    inputs: tuple[str, ...]  # graph input per array argument, in argument order
    consts: tuple[str, ...]  # inputs compiled in as constants
    outputs: tuple[str, ...]
    single: bool  # the function returns one value (not a tuple)
    onnx_model: onnx.ModelProto


class JitFunction:
    """A function compiled per signature (see the module doc); call it like the function.

    Attributes:
        last_run: the :class:`cann.sim.executor.RunStats` of the last call (``profile`` too).
        traces: how many signatures were traced (and compiled or found in the cache) so far.
    """

    def __init__(self, fn, options: CompileOptions):
        self.fn = fn
        self.options = options
        self.is_onnxscript = _is_onnxscript(fn)
        functools.update_wrapper(self, fn.function if self.is_onnxscript else fn)
        self.last_run = None
        self.traces = 0
        self._compiled: OrderedDict[tuple, _Compiled] = OrderedDict()

    def __get__(self, obj, objtype=None):
        """As a method: the instance is the first (static) argument."""
        return self if obj is None else functools.partial(self, obj)

    @property
    def profile(self):
        """The last call's :class:`cann.sim.executor.RunStats` (cycles, per-kernel records, ideal_pct)."""
        return self.last_run

    def __call__(self, *args, **kwargs):
        """Run on the simulator; returns what the function returns (arrays for traced values).

        Raises:
            CannError: located at the line of the function that caused it (a ``cann.op`` call, an
                onnxscript statement) or at this call: unsupported operators, bad attributes, types
                onnx rejects, a traced value used as a Python value.
        """
        if active_trace() is not None and not self.is_onnxscript:
            return self.fn(*args, **kwargs)  # called from a function being traced: inlined
        where = user_location()
        key, arrays = self._signature(args, kwargs)
        entry = self._compiled.get(key)
        if entry is None:
            entry = self._build(args, kwargs, where)
            self._compiled[key] = entry
            while len(self._compiled) > MAX_SIGNATURES:
                self._compiled.popitem(last=False)
        else:
            self._compiled.move_to_end(key)
        feeds = {n: a for n, a in zip(entry.inputs, arrays) if n not in entry.consts}
        try:
            out = entry.model.run(feeds)
        except CannError as e:
            raise relocate(e, {}, where) from None
        self.last_run = _STATE.last_run = entry.model.last_run
        values = tuple(out[n] for n in entry.outputs)
        return values[0] if entry.single else values

    def to_onnx(self, *args, **kwargs) -> onnx.ModelProto:
        """The ONNX model these arguments compile (graph inputs: the array arguments, in order;
        before constant inputs are compiled in), e.g. to run it on onnxruntime."""
        return self._trace(args, kwargs, user_location())[0]

    # -- signature and compilation --------------------------------------------------------------

    def _signature(self, args, kwargs) -> tuple[tuple, list[np.ndarray]]:
        """The cache key of a call and its array arguments (the graph inputs, in order)."""
        key, arrays = [], []
        for name, v, tensor in self._bound(args, kwargs):
            if tensor:
                a = np.asarray(v)
                arrays.append(a)
                key.append(("array", name, a.shape, a.dtype.str))
            else:
                key.append(("static", name, _static_key(v)))
        return tuple(key), arrays

    def _bound(self, args, kwargs) -> list[tuple[str, object, bool]]:
        """(name, value, is a graph input) of each argument: positional ones by parameter name
        (``*args`` items as ``args_0``, ...), keyword ones by keyword. Arrays are graph inputs,
        except an onnxscript function's keyword arguments (attributes)."""
        if self.is_onnxscript:
            return ([(f"arg{i}", a, _is_array(a)) for i, a in enumerate(args)]
                    + [(k, v, False) for k, v in sorted(kwargs.items())])
        try:
            bound = inspect.signature(self.fn).bind(*args, **kwargs)
        except TypeError as e:
            raise CannError(user_location(), f"{self.__name__}(): {e}") from None
        out = []
        for name, v in bound.arguments.items():
            kind = bound.signature.parameters[name].kind
            if kind is inspect.Parameter.VAR_POSITIONAL:
                out += [(f"{name}_{i}", x, _is_array(x)) for i, x in enumerate(v)]
            elif kind is inspect.Parameter.VAR_KEYWORD:
                out += [(k, x, _is_array(x)) for k, x in sorted(v.items())]
            else:
                out.append((name, v, _is_array(v)))
        return out

    def _build(self, args, kwargs, where: str) -> _Compiled:
        model, inputs, outputs, single, lines = self._trace(args, kwargs, where)
        feeds = dict(zip(inputs, (np.asarray(v) for _, v, tensor in self._bound(args, kwargs) if tensor)))
        try:
            compiled, consts = CACHE.get(model, feeds, self.options)
        except CannError as e:
            raise relocate(e, lines, where) from None
        self.traces += 1
        return _Compiled(compiled, tuple(inputs), consts, tuple(outputs), single, model)

    def _trace(self, args, kwargs, where: str):
        """(model, input names, output names, single result, node lines) for these arguments."""
        if self.is_onnxscript:
            return _onnxscript_model(self.fn, args, kwargs, where)
        trace = Trace(self.__name__)
        bound = inspect.signature(self.fn).bind(*args, **kwargs)
        inputs = []
        for name, v in bound.arguments.items():
            kind = bound.signature.parameters[name].kind
            if kind is inspect.Parameter.VAR_POSITIONAL:
                bound.arguments[name] = tuple(self._arg(trace, f"{name}_{i}", x, inputs) for i, x in enumerate(v))
            elif kind is inspect.Parameter.VAR_KEYWORD:
                bound.arguments[name] = {k: self._arg(trace, k, x, inputs) for k, x in sorted(v.items())}
            else:
                bound.arguments[name] = self._arg(trace, name, v, inputs)
        call_args, call_kwargs = bound.args, bound.kwargs
        with trace:
            result = self.fn(*call_args, **call_kwargs)
        single = not isinstance(result, (tuple, list))
        results = [result] if single else list(result)
        for i, r in enumerate(results):
            if not isinstance(r, Tracer) or r.trace is not trace:
                raise CannError(where, f"{self.__name__}(): result {i} has type {type(r).__name__}, not a value computed "
                                       "from the arguments with cann.op")
        model = trace.model(results)
        return model, inputs, [o.name for o in model.graph.output], single, trace.lines

    @staticmethod
    def _arg(trace: Trace, name: str, v, inputs: list[str]):
        if isinstance(v, (np.ndarray, np.generic)):
            inputs.append(name)
            return trace.argument(name, np.asarray(v))
        return v


def _is_array(v) -> bool:
    return isinstance(v, (np.ndarray, np.generic))


def _static_key(v):
    """A hashable key of a non-input argument's value: arrays (also inside lists, tuples and dicts)
    by their bytes, other unhashable values by ``repr``."""
    if _is_array(v):
        a = np.asarray(v)
        return ("ndarray", a.shape, a.dtype.str, hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest())
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, tuple(_static_key(x) for x in v))
    if isinstance(v, dict):
        return ("dict", tuple(sorted((repr(k), _static_key(x)) for k, x in v.items())))
    try:
        hash(v)
        return (type(v).__name__, v)
    except TypeError:
        return (type(v).__name__, repr(v))


def jit(fn=None, *, soc_version: str | None = None, precision_mode: str | None = None, opt_level: int | None = None):
    """Decorator: compile ``fn`` (a Python function of :func:`cann.op` calls, or an onnxscript
    function) for the simulated AI Core, once per signature; ``@cann.jit`` or
    ``@cann.jit(soc_version=..., precision_mode=..., opt_level=...)`` (as :func:`cann.compile`).

    Returns:
        JitFunction: called like ``fn``; ``.last_run`` / ``.profile`` hold the last run's profile,
        ``.to_onnx(*args)`` the ONNX model a signature compiles.

    Raises:
        CannError: bad options (at decoration).
    """
    try:
        options = validate_options(soc_version=soc_version, precision_mode=precision_mode, opt_level=opt_level)
    except CannError as e:
        raise relocate(e, {}, user_location()) from None
    if fn is None:
        return lambda f: JitFunction(f, options)
    return JitFunction(fn, options)


# ---------------------------------------------------------------------------------------------
# onnxscript functions


def _is_onnxscript(fn) -> bool:
    return type(fn).__module__.startswith("onnxscript") and hasattr(fn, "to_function_proto")


def _onnxscript_model(fn, args, kwargs, where: str):
    """The model of an onnxscript function called with ``args`` (tensors) and ``kwargs``
    (attributes): one call of the function, inlined (with the functions it calls)."""
    inputs = [v.name for v in fn.function_ir.inputs]
    name = fn.function_ir.name
    if len(args) != len(inputs):
        raise CannError(where, f"{name}(): takes {len(inputs)} tensor input(s) ({', '.join(inputs)}), got {len(args)}")
    known = {a.name for a in fn.function_ir.attrs}
    for k in kwargs:
        if k not in known:
            raise CannError(where, f"{name}(): unknown attribute '{k}' (known: {', '.join(sorted(known)) or 'none'})")
    arrays = []
    for i, a in enumerate(args):
        if not isinstance(a, (np.ndarray, np.generic)):
            raise CannError(where, f"{name}(): input {i} has type {type(a).__name__}, not an array")
        arrays.append(np.asarray(a))
    functions, opsets = [], {}
    for f in [fn, *fn.function_ir.get_called_functions().values()]:
        proto = f.to_function_proto()
        _annotate_lines(proto, f)
        functions.append(proto)
        for o in proto.opset_import:
            opsets.setdefault(o.domain, o.version)
    top = functions[0]
    opsets[top.domain] = 1
    outputs = [f"{o}" for o in top.output]
    call = helper.make_node(top.name, inputs, outputs, domain=top.domain, name=name)
    for k, v in kwargs.items():
        call.attribute.append(helper.make_attribute(k, v))
    graph = helper.make_graph([call], name, [helper.make_value_info(n, tensor_type(a)) for n, a in zip(inputs, arrays)],
                              [helper.make_value_info(o, onnx.TypeProto()) for o in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in sorted(opsets.items())],
                              functions=functions)
    try:
        model = onnx.inliner.inline_local_functions(model)
    except Exception as e:  # onnx raises plain RuntimeErrors here
        raise CannError(where, f"{name}(): onnx cannot inline it: {str(e).strip().splitlines()[0]}") from None
    del model.functions[:]
    keep = [o for o in model.opset_import if o.domain != top.domain]
    del model.opset_import[:]
    model.opset_import.extend(keep)
    lines = {}
    for k, node in enumerate(model.graph.node):
        src = next((p.value for p in node.metadata_props if p.key == "cann.source"), where)
        node.name = f"{node.op_type}_{k}"
        del node.metadata_props[:]
        lines[node.name] = (src, node.op_type)
    try:
        inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
    except onnx.shape_inference.InferenceError as e:
        raise infer_error(str(e), lines, where) from None
    types = {vi.name: vi.type for vi in inferred.graph.output}
    for o in model.graph.output:
        o.type.CopyFrom(types.get(o.name, o.type))
    return model, inputs, outputs, len(outputs) == 1, lines


_BINOPS = {ast.Add: "Add", ast.Sub: "Sub", ast.Mult: "Mul", ast.Div: "Div", ast.MatMult: "MatMul",
           ast.Pow: "Pow", ast.Mod: "Mod", ast.BitAnd: "And", ast.BitOr: "Or"}
_CMPOPS = {ast.Lt: "Less", ast.LtE: "LessOrEqual", ast.Gt: "Greater", ast.GtE: "GreaterOrEqual", ast.Eq: "Equal"}


def _annotate_lines(proto: onnx.FunctionProto, fn) -> None:
    """Give each node of an onnxscript function the ``file:line`` of the statement that made it
    (metadata ``cann.source``): the calls and operators of its source in evaluation order, matched
    by operator type (best effort; unmatched nodes take the previous node's line)."""
    try:
        lines, start = inspect.getsourcelines(fn.function)
        path = inspect.getsourcefile(fn.function) or "<unknown>"
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return
    calls: list[tuple[str, int]] = []

    class Visit(ast.NodeVisitor):
        def visit_Call(self, node):
            self.generic_visit(node)
            f = node.func
            calls.append((f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", ""), node.lineno))

        def visit_BinOp(self, node):
            self.generic_visit(node)
            calls.append((_BINOPS.get(type(node.op), ""), node.lineno))

        def visit_UnaryOp(self, node):
            self.generic_visit(node)
            calls.append(("Neg" if isinstance(node.op, ast.USub) else "Not", node.lineno))

        def visit_Compare(self, node):
            self.generic_visit(node)
            calls.append((_CMPOPS.get(type(node.ops[0]), ""), node.lineno))

    Visit().visit(tree)
    line = next((n.lineno for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)), 1)
    pos = 0
    for node in proto.node:
        j = next((j for j in range(pos, len(calls)) if calls[j][0] == node.op_type), None)
        if j is not None:
            line, pos = calls[j][1], j + 1
        helper.set_metadata_props(node, {"cann.source": f"{path}:{start + line - 1}"})
