"""``cann-opst create``: a starting msopst case file for an ONNX operator, from its schema
(``onnx.defs.get_schema``), the analogue of msopst's ``create`` from an operator's .ini.

Inputs and outputs get the schema's formal names, the types their type constraint allows that
msopst names (``tensor(float)`` -> ``float32``, ``tensor(double)`` -> ``float64``, ...; only the
float types when the operator has them, as fp16/fp32 is what an AI Core computes), format ``ND``,
a default shape ``[1, 3, 8, 8]`` (``DEFAULT_SHAPES`` for the inputs of Conv, Gemm, MatMul,
BatchNormalization ... that must fit it) and ``value_range [[0.1, 1.0]]``; the output shapes are
onnx's shape inference on those inputs (``DEFAULT_SHAPE`` when it cannot tell); variadic inputs appear twice; optional inputs are left out. ``attr``
lists the attributes with a default value and the required ones (placeholders: int 1,
listInt ``[2, 2]``, float 1.0, to be edited), in msopst's types (``int``, ``float``, ``str``,
``listInt``, ``listFloat``, ``listStr``).
"""

from __future__ import annotations

import onnx
import numpy as np
import onnx.shape_inference
from onnx import AttributeProto, helper

from cann.errors import CannError

ONNX_TO_MSOPST = {"float16": "float16", "float": "float32", "double": "float64", "int8": "int8",
                  "int16": "int16", "int32": "int32", "int64": "int64", "uint8": "uint8", "uint16": "uint16",
                  "uint32": "uint32", "uint64": "uint64", "bool": "bool"}
_ATTR_TYPES = {AttributeProto.INT: "int", AttributeProto.FLOAT: "float", AttributeProto.STRING: "str",
               AttributeProto.INTS: "listInt", AttributeProto.FLOATS: "listFloat", AttributeProto.STRINGS: "listStr"}
DEFAULT_SHAPE = [1, 3, 8, 8]
#: inputs whose default shape must fit the others' (the rest get DEFAULT_SHAPE)
DEFAULT_SHAPES = {"Conv": {"W": [4, 3, 3, 3], "B": [4]}, "ConvTranspose": {"W": [3, 4, 3, 3], "B": [4]},
                  "Gemm": {"A": [4, 8], "B": [8, 16], "C": [16]}, "MatMul": {"A": [4, 8], "B": [8, 16]},
                  "BatchNormalization": {k: [3] for k in ("scale", "B", "input_mean", "input_var")},
                  "InstanceNormalization": {"scale": [3], "B": [3]}, "PRelu": {"slope": [3, 1, 1]}}


def _output_shapes(op_type: str, inputs: list[dict], attrs: list[dict], n_out: int) -> list | None:
    """The outputs' shapes onnx infers for the default inputs (None when it cannot)."""
    names = [d["name"] for d in inputs]
    node = helper.make_node(op_type, names, [f"out{i}" for i in range(n_out)],
                            **{a["name"]: a["value"] for a in attrs})
    dtype = helper.np_dtype_to_tensor_dtype(np.dtype(inputs[0]["type"][-1])) if inputs else 1
    graph = helper.make_graph([node], op_type, [helper.make_tensor_value_info(
        d["name"], helper.np_dtype_to_tensor_dtype(np.dtype(d["type"][-1])), d["shape"][0])
        for d in inputs], [helper.make_tensor_value_info(f"out{i}", dtype, None) for i in range(n_out)])
    try:
        inferred = onnx.shape_inference.infer_shapes(helper.make_model(graph), strict_mode=True)
    except Exception:  # noqa: BLE001 - a default the operator rejects: leave the shapes to the user
        return None
    shapes = []
    for vi in inferred.graph.output:
        dims = vi.type.tensor_type.shape.dim
        if not vi.type.tensor_type.HasField("shape") or any(not d.HasField("dim_value") for d in dims):
            return None
        shapes.append([d.dim_value for d in dims])
    return shapes


def _types(schema, type_str: str) -> list[str]:
    allowed = next((c.allowed_type_strs for c in schema.type_constraints if c.type_param_str == type_str),
                   [type_str])
    names = [ONNX_TO_MSOPST[t[len("tensor("):-1]] for t in allowed
             if t.startswith("tensor(") and t[len("tensor("):-1] in ONNX_TO_MSOPST]
    floats = [t for t in names if t in ("float16", "float32")]
    return floats or names


#: placeholders for required attributes (no default in the schema): to be edited
_REQUIRED_PLACEHOLDER = {AttributeProto.INT: 1, AttributeProto.FLOAT: 1.0, AttributeProto.STRING: "",
                         AttributeProto.INTS: [2, 2], AttributeProto.FLOATS: [1.0], AttributeProto.STRINGS: []}


def _attr(a) -> dict | None:
    if a.required and a.type in _REQUIRED_PLACEHOLDER:
        return {"name": a.name, "type": _ATTR_TYPES[a.type], "value": _REQUIRED_PLACEHOLDER[a.type]}
    if not a.default_value.name and a.default_value.type == AttributeProto.UNDEFINED:
        return None
    t = _ATTR_TYPES.get(a.default_value.type)
    if t is None:
        return None
    v = helper.get_attribute_value(a.default_value)
    if isinstance(v, bytes):
        v = v.decode()
    elif isinstance(v, list):
        v = [x.decode() if isinstance(x, bytes) else x for x in v]
    return {"name": a.name, "type": t, "value": v}


def create_case(op_type: str, opset: int | None = None) -> list[dict]:
    """A one-case msopst case list for ``op_type`` (see the module doc).

    Raises:
        CannError: the operator is unknown to onnx, or none of its types has an msopst name.
    """
    try:
        schema = onnx.defs.get_schema(op_type, opset or onnx.defs.onnx_opset_version(), "")
    except onnx.defs.SchemaError:
        raise CannError("--op", f"{op_type} is no ONNX operator") from None
    inputs = []
    for p in schema.inputs:
        if p.option == onnx.defs.OpSchema.FormalParameterOption.Optional:
            continue
        n = 2 if p.option == onnx.defs.OpSchema.FormalParameterOption.Variadic else 1
        for k in range(n):
            types = _types(schema, p.type_str)
            if not types:
                raise CannError("--op", f"{op_type}: input {p.name} has no type msopst names")
            inputs.append({"name": p.name if n == 1 else f"{p.name}{k}", "format": ["ND"],
                           "type": types, "shape": [DEFAULT_SHAPES.get(op_type, {}).get(p.name, DEFAULT_SHAPE)],
                           "data_distribute": ["uniform"],
                           "value_range": [[0.1, 1.0]]})
    outputs = []
    for p in schema.outputs:
        if p.option == onnx.defs.OpSchema.FormalParameterOption.Optional:
            continue
        types = _types(schema, p.type_str)
        outputs.append({"name": p.name, "format": ["ND"], "type": types, "shape": [DEFAULT_SHAPE]})
    # msopst wants every input and output to list the same number of types and formats
    n = min([len(d["type"]) for d in inputs + outputs] or [1])
    for d in inputs + outputs:
        d["type"] = d["type"][:n]
    attrs = [x for x in (_attr(a) for _, a in sorted(schema.attributes.items())) if x is not None]
    shapes = _output_shapes(op_type, inputs, attrs, len(outputs))
    for d, shape in zip(outputs, shapes or []):
        d["shape"] = [shape]
    case = {"case_name": f"Test_{op_type}_001", "op": op_type, "input_desc": inputs, "output_desc": outputs}
    if attrs:
        case["attr"] = attrs
    case["error_threshold"] = [0.01, 0.05]
    return [case]
