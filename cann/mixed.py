"""Mixed programming: call one ONNX operator on the simulated AI Core from Python (:func:`op`), and
the tracing that turns a Python function of ``cann.op`` calls into one ONNX graph (:class:`Trace`,
used by :func:`cann.jit`, :mod:`cann.mixed_jit`).

``cann.op("Conv", x, w, strides=[2, 2])`` builds a one-node ONNX model (attributes typed from the
operator's schema, ``onnx.defs.get_schema``), checks the node and infers its output types with
onnx, compiles it with :func:`cann.compile` (once per signature: :mod:`cann.mixed_cache`), runs it
on the simulator and returns numpy arrays. Inputs are graph inputs; those the compiler needs as
constants (a Conv / ConvTranspose weight, a Reshape shape, reduction axes, Pad pads, ...) are
compiled in with the values given, so a new value of such an input compiles a new model.
Problems are :class:`cann.CannError`\\ s located at the caller's line (``file.py:12``).
"""

from __future__ import annotations

import difflib
import operator
import re
import threading
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import AttributeProto, TypeProto, helper, numpy_helper

from cann.errors import CannError, Diagnostic
from cann.mixed_cache import CACHE, user_frame
from cann.options import validate_options

_STATE = threading.local()
#: integer inputs up to this many elements are given to onnx shape inference as values (a Reshape
#: shape, Slice starts, reduction axes: output shapes depend on them)
_SHAPE_VALUE_LIMIT = 64


def user_location() -> str:
    """``file:line`` of the innermost calling frame outside the ``cann`` package."""
    f = user_frame()
    return f"{f.f_code.co_filename}:{f.f_lineno}" if f is not None else "<unknown>"


def last_run():
    """The :class:`cann.sim.executor.RunStats` of this thread's last :func:`op` or ``@cann.jit`` run
    (None before the first)."""
    return getattr(_STATE, "last_run", None)


def active_trace() -> "Trace | None":
    return getattr(_STATE, "trace", None)


# ---------------------------------------------------------------------------------------------
# one node: schema, attributes, arity, output types


@dataclass
class NodeSpec:
    """One checked operator call: ``inputs`` are arrays, :class:`Tracer`\\ s or None (an absent
    optional input); ``input_names`` / ``output_names`` the schema's formal names."""

    op_type: str
    domain: str
    opset: int
    inputs: list
    input_names: list[str]
    output_names: list[str]
    attributes: list[AttributeProto]
    where: str

    def node(self, inputs: list[str], outputs: list[str], name: str) -> onnx.NodeProto:
        n = helper.make_node(self.op_type, inputs, outputs, name=name, domain=self.domain or None)
        n.attribute.extend(self.attributes)
        return n

    def error(self, message: str) -> CannError:
        return CannError(self.where, f"{self.op_type}: {message}")


def default_opset(domain: str) -> int:
    """The newest opset of ``domain`` the installed onnx defines (what :func:`op` uses by default)."""
    if domain in ("", "ai.onnx"):
        return onnx.defs.onnx_opset_version()
    if domain == "ai.onnx.ml":
        return onnx.defs.onnx_ml_opset_version()
    return 1


def node_spec(op_type: str, inputs: tuple, domain: str, opset: int | None, outputs: int | None,
              attributes: dict, where: str) -> NodeSpec:
    """Check an operator call against its ONNX schema.

    Raises:
        CannError: an unknown operator (with close names), a wrong number of inputs or outputs, an
            unknown, missing or mistyped attribute, an input that is not an array.
    """
    if not isinstance(op_type, str) or not op_type:
        raise CannError(where, f"the operator type must be a non-empty string, not {op_type!r}")
    domain = "" if domain == "ai.onnx" else domain
    opset = default_opset(domain) if opset is None else opset
    if isinstance(opset, bool) or not isinstance(opset, int) or opset < 1:
        raise CannError(where, f"{op_type}: opset={opset!r} is not an opset version (a positive int)")
    try:
        schema = onnx.defs.get_schema(op_type, opset, domain)
    except onnx.defs.SchemaError:
        known = sorted({s.name for s in onnx.defs.get_all_schemas_with_history() if s.domain == domain})
        close = difflib.get_close_matches(op_type, known, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise CannError(where, f"{op_type}: unknown ONNX operator in domain '{domain or 'ai.onnx'}' at opset "
                               f"{opset}{hint}") from None
    if schema.deprecated:
        raise CannError(where, f"{op_type}: deprecated at opset {opset} of domain '{domain or 'ai.onnx'}'")
    ins = list(inputs)
    while ins and ins[-1] is None:
        ins.pop()
    ins = [_as_input(v, op_type, i, where) for i, v in enumerate(ins)]
    if not schema.min_input <= len(ins) <= schema.max_input:
        raise CannError(where, f"{op_type} takes {_range(schema.min_input, schema.max_input)} input"
                               f"{'' if schema.max_input == 1 else 's'}, got {len(ins)}")
    attrs = [_attribute(schema, op_type, k, v, where) for k, v in attributes.items()]
    for name, a in schema.attributes.items():
        if a.required and name not in attributes:
            raise CannError(where, f"{op_type}: missing required attribute '{name}'")
    n_out = _output_count(schema, op_type, outputs, attributes, ins, where)
    in_names = _formal_names(schema.inputs, len(ins))
    out_names = [n if n not in in_names else n + "_out" for n in _formal_names(schema.outputs, n_out)]
    return NodeSpec(op_type, domain, opset, ins, in_names, out_names, attrs, where)


def _range(lo: int, hi: int) -> str:
    return str(lo) if lo == hi else f"{lo} or more" if hi > 1000 else f"{lo} to {hi}"


def _as_input(v, op_type: str, i: int, where: str):
    """An input as an array (Python numbers and lists: float32, int64 or bool) or a Tracer."""
    if v is None or isinstance(v, (Tracer, np.ndarray)):
        return v
    if isinstance(v, np.generic):
        return np.asarray(v)
    if isinstance(v, (bool, int, float, list, tuple)):
        a = np.asarray(v)
        if a.dtype == np.float64:
            a = a.astype(np.float32)
        if a.dtype.kind in "biuf":
            return a
    raise CannError(where, f"{op_type}: input {i} has type {type(v).__name__}, not an array")


def _formal_names(params, count: int) -> list[str]:
    names = []
    for i in range(count):
        p = params[min(i, len(params) - 1)]
        variadic = p.option == onnx.defs.OpSchema.FormalParameterOption.Variadic
        names.append(f"{p.name}_{i - len(params) + 1}" if variadic else p.name)
    return names


def _output_count(schema, op_type: str, outputs, attributes: dict, ins: list, where: str) -> int:
    formal = schema.outputs
    if outputs is not None:
        if isinstance(outputs, bool) or not isinstance(outputs, int) or \
                not schema.min_output <= outputs <= schema.max_output:
            raise CannError(where, f"{op_type}: outputs={outputs!r}, but it has "
                                   f"{_range(schema.min_output, schema.max_output)} outputs")
        return outputs
    if formal and formal[-1].option == onnx.defs.OpSchema.FormalParameterOption.Variadic:
        n = attributes.get("num_outputs")
        if n is None and op_type == "Split" and "split" in attributes:  # opsets before 13
            n = len(attributes["split"])
        if n is None and op_type == "Split" and len(ins) > 1 and isinstance(ins[1], np.ndarray):
            n = ins[1].size
        if n is None:
            raise CannError(where, f"{op_type}: has a variable number of outputs: pass outputs=N")
        return len(formal) - 1 + int(n)
    single = [i for i, p in enumerate(formal) if p.option == onnx.defs.OpSchema.FormalParameterOption.Single]
    return max(single[-1] + 1 if single else 1, 1)


_ATTR_KINDS = {
    AttributeProto.FLOAT: ("a float", float), AttributeProto.INT: ("an int", operator.index),
    AttributeProto.STRING: ("a string", lambda v: v if isinstance(v, (str, bytes)) else _bad()),
    AttributeProto.FLOATS: ("a list of floats", lambda v: [float(x) for x in _seq(v)]),
    AttributeProto.INTS: ("a list of ints", lambda v: [operator.index(x) for x in _seq(v)]),
    AttributeProto.STRINGS: ("a list of strings",
                             lambda v: [x if isinstance(x, (str, bytes)) else _bad() for x in _seq(v)]),
    AttributeProto.TENSOR: ("an array", lambda v: numpy_helper.from_array(np.asarray(v))),
}


def _bad():
    raise TypeError


def _seq(v):
    if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
        raise TypeError
    return list(np.asarray(v).reshape(-1).tolist() if isinstance(v, np.ndarray) else v)


def _attribute(schema, op_type: str, name: str, value, where: str) -> AttributeProto:
    if name not in schema.attributes:
        known = ", ".join(sorted(schema.attributes)) or "none"
        raise CannError(where, f"{op_type}: unknown attribute '{name}' (known: {known})")
    kind = schema.attributes[name].type
    what, convert = _ATTR_KINDS.get(kind, (None, None))
    if convert is None:
        raise CannError(where, f"{op_type}: attribute '{name}' of type {AttributeProto.AttributeType.Name(kind)} "
                               "cannot be given to cann.op")
    try:
        if isinstance(value, bool) and kind in (AttributeProto.FLOAT, AttributeProto.FLOATS):
            raise TypeError
        return helper.make_attribute(name, convert(value), attr_type=kind)
    except (TypeError, ValueError, OverflowError):
        raise CannError(where, f"{op_type}: attribute {name}={value!r} is not {what}") from None


def _clean(message: str) -> str:
    """onnx's checker / shape-inference message as one line, without its bracketed prefixes."""
    line = next((ln.strip() for ln in str(message).splitlines() if ln.strip()), "invalid node")
    line = re.sub(r"\[\w+\]\s*", "", line)
    line = re.sub(r"\(op_type:[^)]*\):?\s*", "", line)
    line = re.sub(r"^Inference error\(s\):\s*", "", line)
    return line.strip() or "invalid node"


def infer_error(message: str, lines: dict[str, tuple[str, str]], where: str) -> CannError:
    """onnx's shape-inference ``message`` located at the line of the node it names (``lines``: node
    name -> (``file:line``, op type)), else at ``where``."""
    m = re.search(r"node name: ([^)]*)\)", message)
    if m and m.group(1) in lines:
        loc, op_type = lines[m.group(1)]
        return CannError(loc, f"{op_type}: {_clean(message)}")
    return CannError(where, _clean(message))


def infer_outputs(spec: NodeSpec, in_names: list[str], in_types: list[TypeProto | None],
                  out_names: list[str]) -> list[TypeProto]:
    """Check the node and infer its output types (``in_types``: None for an absent input; the
    values of a small integer array input, or a small 1-D float one such as Resize's scales, are
    given to shape inference).

    Raises:
        CannError: the node is invalid or its types do not fit the schema (onnx's message).
    """
    node = spec.node(in_names, out_names, spec.op_type)
    opsets = [helper.make_opsetid(spec.domain, spec.opset)]
    if spec.domain:
        opsets.append(helper.make_opsetid("", default_opset("")))
    vis, inits = [], []
    for name, t, v in zip(in_names, in_types, spec.inputs):
        if isinstance(v, np.ndarray) and v.size <= _SHAPE_VALUE_LIMIT and \
                (v.dtype.kind in "iu" or (v.dtype.kind == "f" and v.ndim == 1)):  # shapes, Resize's scales
            inits.append(numpy_helper.from_array(np.array(v, order="C"), name))
        elif name:
            vis.append(helper.make_value_info(name, t))
    graph = helper.make_graph([node], "op", vis, [helper.make_value_info(o, TypeProto()) for o in out_names], inits)
    model = helper.make_model(graph, opset_imports=opsets)
    try:
        ctx = onnx.checker.C.CheckerContext()
        ctx.ir_version = model.ir_version
        ctx.opset_imports = {o.domain: o.version for o in opsets}
        onnx.checker.check_node(node, ctx)
        inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as e:
        given = ", ".join(_describe(t) for t in in_types if t is not None)  # "Incompatible dimensions": of what
        raise spec.error(f"{_clean(str(e))} (inputs: {given})" if given else _clean(str(e))) from None
    types = {vi.name: vi.type for vi in inferred.graph.output}
    out = []
    for o in out_names:
        t = types.get(o)
        if t is None or not t.tensor_type.elem_type:
            raise spec.error(f"onnx cannot infer the type of output '{o}'")
        out.append(t)
    return out


def _describe(t: TypeProto) -> str:
    """``(1, 3, 8, 8) float32`` for a tensor type (``?`` for a dimension without a value)."""
    tt = t.tensor_type
    dims = tuple(d.dim_value if d.HasField("dim_value") else "?" for d in tt.shape.dim)
    dtype = helper.tensor_dtype_to_np_dtype(tt.elem_type).name if tt.elem_type else "?"
    return f"{dims} {dtype}".replace("'", "")


def tensor_type(a: np.ndarray) -> TypeProto:
    return helper.make_tensor_type_proto(helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)


def relocate(e: CannError, lines: dict[str, tuple[str, str]], where: str) -> CannError:
    """``e`` with each diagnostic located at user code: a node's at its call's ``file:line``
    (``lines``: node name -> (location, op type)), any other at ``where`` (its old location kept
    in the message)."""
    diags = []
    for d in e.diagnostics:
        if d.location in lines:
            loc, op_type = lines[d.location]
            msg = d.message if op_type in d.message else f"{op_type}: {d.message}"
            diags.append(Diagnostic(loc, msg, d.needs_constant))
        else:
            diags.append(Diagnostic(where, f"{d.location}: {d.message}" if d.location else d.message,
                                    d.needs_constant))
    return CannError.many(diags)


# ---------------------------------------------------------------------------------------------
# cann.op


def op(op_type: str, *inputs, domain: str = "", opset: int | None = None, outputs: int | None = None,
       soc_version: str | None = None, precision_mode: str | None = None, **attributes):
    """Run one ONNX operator on the simulated AI Core.

    ``inputs``: numpy arrays (Python numbers and lists become float32 / int64 / bool arrays), in
    the operator's input order; ``None`` for an absent optional input. ``attributes``: the
    operator's attributes, converted to the types its schema declares (``strides=[2, 2]``,
    ``alpha=1`` is the float 1.0). ``opset``: the ONNX opset of ``domain`` (default: the newest
    the installed onnx defines). ``outputs``: how many outputs to compute (default: the schema's
    required outputs; ``num_outputs`` or the ``split`` input for Split). ``soc_version`` /
    ``precision_mode``: as :func:`cann.compile` (default Ascend910, force_fp16: float32 tensors
    are computed in float16 on the device; ``must_keep_origin_dtype`` keeps float32).

    The model is compiled once per signature (operator, attributes, input shapes and dtypes,
    values of the inputs compiled in as constants, options) and cached in memory and on disk
    (:mod:`cann.mixed_cache`); :func:`last_run` gives the run's profile. Inside a ``@cann.jit``
    function the call is recorded into the traced graph instead (and returns traced values).

    Returns:
        np.ndarray, or a tuple of arrays for several outputs (dtypes as onnxruntime's).

    Raises:
        CannError: located at the caller's ``file:line``: an unknown operator, bad arity or
            attribute, types onnx rejects, an operator or attribute value cann does not support.
    """
    where = user_location()
    spec = node_spec(op_type, inputs, domain, opset, outputs, attributes, where)
    trace = active_trace()
    if trace is not None:
        if soc_version is not None or precision_mode is not None:
            raise spec.error("soc_version / precision_mode inside a @cann.jit function: give them to @cann.jit")
        return trace.record(spec)
    if any(isinstance(v, Tracer) for v in spec.inputs):
        raise spec.error("a traced value used outside the @cann.jit function that traced it")
    try:
        opts = validate_options(soc_version=soc_version, precision_mode=precision_mode)
    except CannError as e:
        raise relocate(e, {}, where) from None
    names = [n for n, v in zip(spec.input_names, spec.inputs) if v is not None]
    feeds = {n: v for n, v in zip(spec.input_names, spec.inputs) if v is not None}
    in_names = [n if v is not None else "" for n, v in zip(spec.input_names, spec.inputs)]
    types = [tensor_type(v) if v is not None else None for v in spec.inputs]
    out_types = infer_outputs(spec, in_names, types, spec.output_names)
    graph = helper.make_graph(
        [spec.node(in_names, spec.output_names, op_type)], op_type,
        [helper.make_value_info(n, tensor_type(feeds[n])) for n in names],
        [helper.make_value_info(o, t) for o, t in zip(spec.output_names, out_types)])
    opsets = [helper.make_opsetid(spec.domain, spec.opset)] + ([helper.make_opsetid("", default_opset(""))]
                                                                 if spec.domain else [])
    model = helper.make_model(graph, opset_imports=opsets)
    try:
        compiled, consts = CACHE.get(model, feeds, opts)
        result = compiled.run({n: a for n, a in feeds.items() if n not in consts})
    except CannError as e:
        raise relocate(e, {op_type: (where, op_type), "": (where, op_type)}, where) from None
    _STATE.last_run = compiled.last_run
    values = tuple(result[o] for o in spec.output_names)
    return values[0] if len(values) == 1 else values


# ---------------------------------------------------------------------------------------------
# tracing


class Tracer:
    """A value of a function being traced by ``@cann.jit``: a tensor of the graph under
    construction, with its ``shape`` (dimensions; None when onnx cannot infer it) and ``dtype``.
    It has no value: compute on it with :func:`cann.op` (or ``+ - * / @ < <= > >=`` and unary ``-``,
    which call ``cann.op``); numpy functions and ``bool()`` on it raise a :class:`CannError`."""

    __array_priority__ = 1000  # ndarray (op) Tracer -> the Tracer's reflected operator

    def __init__(self, trace: "Trace", name: str, ttype: TypeProto):
        self.trace, self.name = trace, name
        tt = ttype.tensor_type
        self.dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type))
        self.shape = (tuple(d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim)
                      if tt.HasField("shape") else None)

    @property
    def ndim(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    def __repr__(self) -> str:
        return f"Tracer({self.name}, shape={self.shape}, dtype={self.dtype})"

    def _no_value(self, *args, **kwargs):
        raise CannError(user_location(), f"traced value '{self.name}' (shape {self.shape}, {self.dtype}) has no "
                                         "value while @cann.jit traces: compute on it with cann.op")

    __array__ = __bool__ = __float__ = __int__ = __index__ = __iter__ = _no_value

    def __getattr__(self, name: str):
        if name.startswith("__"):  # protocols numpy and Python probe (hasattr) stay AttributeErrors
            raise AttributeError(name)
        raise CannError(user_location(), f"traced value '{self.name}' has no attribute '{name}' (it has shape, dtype "
                                         "and ndim): compute on it with cann.op")

    def _operand(self, o):
        return o if isinstance(o, (Tracer, np.ndarray)) else np.asarray(o, dtype=self.dtype)

    def __add__(self, o): return op("Add", self, self._operand(o))
    def __radd__(self, o): return op("Add", self._operand(o), self)
    def __sub__(self, o): return op("Sub", self, self._operand(o))
    def __rsub__(self, o): return op("Sub", self._operand(o), self)
    def __mul__(self, o): return op("Mul", self, self._operand(o))
    def __rmul__(self, o): return op("Mul", self._operand(o), self)
    def __truediv__(self, o): return op("Div", self, self._operand(o))
    def __rtruediv__(self, o): return op("Div", self._operand(o), self)
    def __matmul__(self, o): return op("MatMul", self, self._operand(o))
    def __rmatmul__(self, o): return op("MatMul", self._operand(o), self)
    def __neg__(self): return op("Neg", self)
    def __lt__(self, o): return op("Less", self, self._operand(o))
    def __le__(self, o): return op("LessOrEqual", self, self._operand(o))
    def __gt__(self, o): return op("Greater", self, self._operand(o))
    def __ge__(self, o): return op("GreaterOrEqual", self, self._operand(o))


class Trace:
    """The ONNX graph a ``@cann.jit`` function's ``cann.op`` calls build (active in this thread
    inside ``with trace:``). ``lines``: node name -> (``file:line`` of its call, op type)."""

    def __init__(self, name: str):
        self.name = name
        self.nodes: list[onnx.NodeProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.types: dict[str, TypeProto] = {}
        self.opsets: dict[str, int] = {}
        self.lines: dict[str, tuple[str, str]] = {}
        self._count: dict[str, int] = {}

    def __enter__(self) -> "Trace":
        if active_trace() is not None:
            raise CannError(user_location(), "@cann.jit functions do not nest while tracing")
        _STATE.trace = self
        return self

    def __exit__(self, *exc) -> None:
        _STATE.trace = None

    def _fresh(self, base: str) -> str:
        k = self._count.get(base, 0)
        self._count[base] = k + 1
        return f"{base}_{k}"

    def argument(self, name: str, a: np.ndarray) -> Tracer:
        """A graph input for argument ``name`` with the array's shape and dtype."""
        t = tensor_type(a)
        self.inputs.append(helper.make_value_info(name, t))
        self.types[name] = t
        return Tracer(self, name, t)

    def constant(self, a: np.ndarray) -> str:
        name = self._fresh("const")
        self.initializers.append(numpy_helper.from_array(np.array(a, order="C"), name))
        self.types[name] = tensor_type(a)
        return name

    def record(self, spec: NodeSpec):
        """Add ``spec``'s node; its outputs as Tracers (a tuple for several)."""
        have = self.opsets.setdefault(spec.domain, spec.opset)
        if have != spec.opset:
            raise spec.error(f"opset {spec.opset} of domain '{spec.domain or 'ai.onnx'}', but an earlier call of "
                             f"this @cann.jit function used opset {have} (one opset per domain)")
        names = []
        for v in spec.inputs:
            if isinstance(v, Tracer) and v.trace is not self:
                raise spec.error(f"traced value '{v.name}' belongs to another @cann.jit trace")
            names.append("" if v is None else v.name if isinstance(v, Tracer) else self.constant(v))
        node_name = self._fresh(spec.op_type)
        outs = [node_name if len(spec.output_names) == 1 else f"{node_name}_{o}" for o in spec.output_names]
        types = infer_outputs(spec, names, [self.types.get(n) if n else None for n in names], outs)
        self.nodes.append(spec.node(names, outs, node_name))
        self.lines[node_name] = (spec.where, spec.op_type)
        values = []
        for o, t in zip(outs, types):
            self.types[o] = t
            values.append(Tracer(self, o, t))
        return values[0] if len(values) == 1 else tuple(values)

    def model(self, results: list[Tracer]) -> onnx.ModelProto:
        """The traced ONNX model whose outputs are ``results`` (an argument or a repeated result is
        copied by an Identity node: ONNX outputs are distinct tensors that nodes produce)."""
        outputs, seen = [], {vi.name for vi in self.inputs}
        for r in results:
            name = r.name
            if name in seen:
                node_name = self._fresh("Identity")
                self.nodes.append(helper.make_node("Identity", [name], [node_name], name=node_name))
                name = node_name
            seen.add(name)
            outputs.append(helper.make_value_info(name, self.types[r.name]))
        opsets = dict(self.opsets) or {"": default_opset("")}
        opsets.setdefault("", default_opset(""))
        graph = helper.make_graph(self.nodes, self.name, self.inputs, outputs, self.initializers)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in sorted(opsets.items())])
