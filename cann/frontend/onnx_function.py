"""Operators the ONNX specification defines as functions, expanded into their function bodies.

Many ONNX operators (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss, RotaryEmbedding,
CenterCropPad, ...) come with a *function body* in their schema: the same computation written with
simpler operators, sometimes built for the node's attributes and input types (a context-dependent
function). Where the importer has no converter of its own for such an operator, it imports the
body instead, as onnxruntime does for function operators; the body's nodes then go through the
ordinary converters (and may be functions themselves).
"""

from __future__ import annotations

from dataclasses import dataclass

import onnx
from onnx import AttributeProto, FunctionProto, NodeProto, OperatorSetIdProto, TypeProto, defs


@dataclass(frozen=True)
class FunctionBody:
    """The nodes standing for one operator (renamed into the caller's graph) and the opsets
    their semantics follow (the function's own ``opset_import``)."""

    nodes: tuple[NodeProto, ...]
    opset_import: tuple[OperatorSetIdProto, ...]


def function_body(node: NodeProto, opset: int, input_types: list[TypeProto | None],
                  prefix: str) -> FunctionBody | None:
    """The function body of ``node`` at ``opset`` (the model's opset of the node's domain), or
    None when its schema defines none.

    ``input_types``: the type of each of the node's inputs (None for an absent optional input);
    context-dependent functions are built from them. Internal tensors are renamed
    ``prefix + name``; the function's formal inputs and outputs become the node's.

    Raises:
        ValueError: onnx cannot build the body for these attributes and types (the message says why).
    """
    try:
        schema = defs.get_schema(node.op_type, opset, node.domain)
    except defs.SchemaError:
        return None
    proto = None
    plain = [v for v in schema.function_opset_versions if v <= opset]
    dependent = [v for v in schema.context_dependent_function_opset_versions if v <= opset]
    if dependent and (not plain or max(dependent) >= max(plain)):
        types = [(t if t is not None else TypeProto()).SerializeToString() for t in input_types]
        full = NodeProto()
        full.CopyFrom(node)
        _add_defaults(full, schema)
        try:
            data = schema.get_context_dependent_function_with_opset_version(max(dependent), full.SerializeToString(), types)
        except Exception as e:  # onnx raises plain RuntimeErrors here
            raise ValueError(str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__) from None
        proto = FunctionProto()
        proto.ParseFromString(data)
    elif plain:
        proto = FunctionProto()
        proto.ParseFromString(schema.get_function_with_opset_version(max(plain)))
    if proto is None or not proto.node:
        return None
    attrs = {a.name: a for a in node.attribute}
    for name, a in schema.attributes.items():
        if name not in attrs and a.default_value and a.default_value.type != AttributeProto.UNDEFINED:
            attrs[name] = a.default_value
    rename: dict[str, str] = {"": ""}
    for i, formal in enumerate(proto.input):
        rename[formal] = node.input[i] if i < len(node.input) else ""
    for i, formal in enumerate(proto.output):
        if i < len(node.output) and node.output[i]:
            rename[formal] = node.output[i]
    nodes = []
    for k, inner in enumerate(proto.node):
        n = NodeProto()
        n.CopyFrom(inner)
        n.name = f"{prefix}{inner.name or inner.op_type + '_' + str(k)}"
        del n.input[:], n.output[:], n.attribute[:]
        n.input.extend(rename.get(x, prefix + x) for x in inner.input)
        n.output.extend(rename.get(x, prefix + x) for x in inner.output)
        for a in inner.attribute:
            if a.ref_attr_name:
                if a.ref_attr_name in attrs:
                    b = AttributeProto()
                    b.CopyFrom(attrs[a.ref_attr_name])
                    b.name = a.name
                    n.attribute.append(b)
            else:
                n.attribute.append(a)
        nodes.append(n)
    return FunctionBody(tuple(nodes), tuple(proto.opset_import))


def _add_defaults(node: NodeProto, schema: defs.OpSchema) -> None:
    have = {a.name for a in node.attribute}
    for name, a in schema.attributes.items():
        if name not in have and a.default_value and a.default_value.type != AttributeProto.UNDEFINED:
            node.attribute.append(a.default_value)


def merged_opsets(model: list[OperatorSetIdProto], body: tuple[OperatorSetIdProto, ...]) -> list[OperatorSetIdProto]:
    """The model's opset imports with the function body's versions taking precedence."""
    out = {o.domain or "": o.version for o in model}
    out.update({o.domain or "": o.version for o in body})
    return [onnx.helper.make_opsetid(d, v) for d, v in sorted(out.items())]
