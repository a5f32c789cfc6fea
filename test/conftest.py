"""Shared test helpers: small ONNX models with generated weights (DESIGN.md recipe)."""

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from xdsl.dialects import func
from xdsl.passes import PassPipeline


def _weight(rng, shape):
    """DESIGN.md recipe: rank >= 2 normal with std 1/sqrt(fan_in); 1-D standard normal."""
    if len(shape) >= 2:
        fan_in = int(np.prod(shape[1:]))
        return (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32)
    return rng.standard_normal(shape).astype(np.float32)


def fire_net(seed: int = 0) -> onnx.ModelProto:
    """A SqueezeNet-style net: conv, one fire module (squeeze 1x1, expand 1x1 + 3x3, concat),
    global average pool, 1x1 classifier conv, flatten, softmax. Input 'data' 1x3x16x16."""
    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def conv(name, x, cin, cout, k, pad=0, stride=1):
        w, b = f"{name}_w", f"{name}_b"
        inits.append(numpy_helper.from_array(_weight(rng, (cout, cin, k, k)), w))
        inits.append(numpy_helper.from_array(_weight(rng, (cout,)), b))
        nodes.append(helper.make_node("Conv", [x, w, b], [name], name=name, kernel_shape=[k, k],
                                      pads=[pad] * 4, strides=[stride, stride]))
        nodes.append(helper.make_node("Relu", [name], [name + "_relu"], name=name + "_relu"))
        return name + "_relu"

    x = conv("conv1", "data", 3, 16, 3, pad=1, stride=2)
    s = conv("fire2_squeeze", x, 16, 8, 1)
    e1 = conv("fire2_expand1x1", s, 8, 16, 1)
    e3 = conv("fire2_expand3x3", s, 8, 16, 3, pad=1)
    nodes.append(helper.make_node("Concat", [e1, e3], ["fire2_concat"], name="fire2_concat", axis=1))
    c = conv("conv10", "fire2_concat", 32, 10, 1)
    nodes.append(helper.make_node("GlobalAveragePool", [c], ["pool10"], name="pool10"))
    nodes.append(helper.make_node("Flatten", ["pool10"], ["logits"], name="flatten", axis=1))
    nodes.append(helper.make_node("Softmax", ["logits"], ["prob"], name="prob", axis=1))
    graph = helper.make_graph(
        nodes, "fire_net",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("prob", TensorProto.FLOAT, [1, 10]),
         helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


@pytest.fixture
def fire_onnx(tmp_path):
    p = tmp_path / "fire.onnx"
    onnx.save(fire_net(), p)
    return p


def pool_model(op: str, batch: int, channels: int, size: int, **attrs) -> onnx.ModelProto:
    """A one-node float32 model ``y = op(x)``, x ``[batch, channels, size, size]``: a pooling op
    (``MaxPool`` / ``AveragePool`` with ``kernel_shape``, ``strides``, optional ``pads`` and
    ``dilations``, or ``GlobalAveragePool``); ``"Identity"`` is a 1x1 MaxPool (the model is then
    the two layout conversions); ``"Conv"`` a 3x3 convolution to 16 channels with seeded weights
    (3 input channels: the NCHW -> NC1HWC0_C04 trans_data through the cube)."""
    if op == "Conv":
        w = numpy_helper.from_array((np.random.default_rng(0).standard_normal((16, channels, 3, 3)) / 5)
                                    .astype(np.float32), "w")
        g = helper.make_graph(
            [helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])], "conv",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, channels, size, size])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 16, size, size])], [w])
    else:
        if op == "GlobalAveragePool":
            out = 1
        elif op == "Identity":
            op, attrs, out = "MaxPool", dict(kernel_shape=[1, 1]), size
        else:
            (k, _), (s, _) = attrs["kernel_shape"], attrs["strides"]
            p0, _, p1, _ = attrs.get("pads", [0, 0, 0, 0])
            d = attrs.get("dilations", [1, 1])[0]
            out = (size + p0 + p1 - d * (k - 1) - 1) // s + 1
        g = helper.make_graph(
            [helper.make_node(op, ["x"], ["y"], **attrs)], "pool",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, channels, size, size])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, channels, out, out])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def compile_pinned(model, precision_mode, pins=None, aicore_num=0):
    """Compile like ``cann.compile`` with kernel tilings pinned; returns (Model, {kernel: tiling})."""
    from cann.codegen.offline import build_offline_model
    from cann.compiler import import_model, make_context, stage_pipelines
    from cann.dialects import tile
    from cann.lowering.convert_graph_to_tile import ConvertGraphToTilePass
    from cann.passes import ALL_PASSES
    from cann.runtime import Model

    module = import_model(model)
    ctx = make_context()
    # the default rule and the pins only: no knowledge base (a shipped entry would change the tiling)
    (_, graph), _, (_, ascend) = stage_pipelines("Ascend910", precision_mode, 1, aicore_num, kb="none")
    PassPipeline.parse_spec(ALL_PASSES, graph).apply(ctx, module)
    ConvertGraphToTilePass(precision_mode=precision_mode, tiling=json.dumps(pins or {}),
                           aicore_num=aicore_num).apply(ctx, module)
    tilings = {}
    for op in module.walk():
        if isinstance(op, func.FuncOp) and "tile.tiling" in op.attributes:
            t = {k: v.value.data for k, v in op.attributes["tile.tiling"].data.items()}
            t["img2col_kernels"] = {(i.field("kernel_h"), i.field("kernel_w")) for i in op.walk()
                                    if isinstance(i, tile.Img2colOp)}
            tilings[op.sym_name.data] = t
    PassPipeline.parse_spec(ALL_PASSES, ascend).apply(ctx, module)
    return Model(build_offline_model(module)), tilings


def compile_checked(model, precision_mode, tol: float, pins=None, aicore_num=0):
    """:func:`compile_pinned`, run on seeded inputs (race checker on) with output ``y`` checked against
    onnxruntime to rel L2 ``tol``; returns (Model, {kernel: tiling})."""
    import numpy as np

    from cann import testing

    x = testing.random_inputs(model)
    ref = testing.run_onnxruntime(model, x)["y"]
    compiled, tilings = compile_pinned(model, precision_mode, pins, aicore_num)
    y = compiled.run(x)["y"]
    assert y.shape == ref.shape
    err = np.linalg.norm(y - ref) / np.linalg.norm(ref)
    assert err <= tol, err
    return compiled, tilings
