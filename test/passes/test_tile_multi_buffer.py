"""tile-multi-buffer + convert-tile-to-ascend on real ONNX models: the renamed, rotated kernels
compute what single-buffered ones compute (bit for bit) and what onnxruntime computes, with the
race checker on (barrier synchronization)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from xdsl.passes import PassPipeline

from cann.codegen.offline import build_offline_model
from cann.compiler import lower, make_context
from cann.dialects import tile
from cann.passes import ALL_PASSES
from cann.runtime import Model


def _model(nodes, inputs, outputs, inits=()) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _add(n: int) -> onnx.ModelProto:
    vi = [helper.make_tensor_value_info(s, TensorProto.FLOAT16, [1, n]) for s in "xyz"]
    return _model([helper.make_node("Add", ["x", "y"], ["z"], name="add")], vi[:2], vi[2:])


def _conv() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.standard_normal((32, 16, 3, 3)) / 12).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(32).astype(np.float32), "b")
    return _model([helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1], name="conv")],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 32, 32])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 32, 32])], [w, b])


def _gemm() -> onnx.ModelProto:
    rng = np.random.default_rng(1)
    w = numpy_helper.from_array((rng.standard_normal((512, 256)) / 22).astype(np.float32), "w")
    c = numpy_helper.from_array(rng.standard_normal(256).astype(np.float32), "c")
    return _model([helper.make_node("Gemm", ["a", "w", "c"], ["y"], name="gemm")],
                  [helper.make_tensor_value_info("a", TensorProto.FLOAT, [256, 512])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [256, 256])], [w, c])


def _compile(model: onnx.ModelProto, buffers: int, pin: dict | None = None, segment: int = 0):
    """(Model, its ascend module, its tile-level buffer counts per kernel) with tile-multi-buffer."""
    module = lower(model, until="graph")
    ctx = make_context()
    tiling = '{tiling="%s"}' % json.dumps(pin).replace('"', '\\"') if pin else ""
    PassPipeline.parse_spec(ALL_PASSES, f"convert-graph-to-tile{tiling},tile-multi-buffer{{buffers={buffers} "
                                        f"first_segment_bytes={segment}}}").apply(ctx, module)
    counts = {fn.sym_name.data: [a.copies for a in fn.body.block.ops if isinstance(a, tile.AllocOp)]
              for fn in module.body.block.ops if "tile.kernel" in fn.attributes}
    PassPipeline.parse_spec(ALL_PASSES, "convert-tile-to-ascend,ascend-insert-sync").apply(ctx, module)
    return Model(build_offline_model(module)), module, counts


def _mnemonics(module, kernel: str) -> list[str]:
    k = next(op for op in module.body.block.ops if getattr(op, "sym_name", None) and op.sym_name.data == kernel)
    return [op.name for op in k.walk() if op.name.startswith("ascend.") and op.name != "ascend.kernel"]


def _reference(model: onnx.ModelProto, inputs: dict) -> np.ndarray:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, inputs)[0]


def _run(m: Model, inputs: dict) -> np.ndarray:
    return next(iter(m.run(inputs, sim_checks="error").values()))


def test_add_on_one_core_rotates_three_double_buffered_chunks():
    n = 1 << 16
    rng = np.random.default_rng(0)
    inputs = {"x": rng.standard_normal((1, n)).astype(np.float16), "y": rng.standard_normal((1, n)).astype(np.float16)}
    pin = {"add_0": {"block_dim": 1, "chunk": 16384}}
    single, _, c1 = _compile(_add(n), 1, pin)
    double, mod, c2 = _compile(_add(n), 2, pin)
    assert c1["add_0"] == [1, 1, 1] and c2["add_0"] == [2, 2, 2]
    ops = _mnemonics(mod, "add_0")
    assert ops.count("ascend.loop_rotate") == 3 and ops.count("ascend.loop_begin") == 1
    want = _reference(_add(n), inputs)
    np.testing.assert_array_equal(_run(double, inputs), want)
    np.testing.assert_array_equal(_run(single, inputs), want)


@pytest.mark.parametrize("buffers", [2, 3])
def test_add_over_cores_with_ragged_rounds(buffers):
    # 100000 elements in chunks of 8192: 13 chunks over the cores, the last one partial, guarded
    n = 100000
    rng = np.random.default_rng(1)
    inputs = {"x": rng.standard_normal((1, n)).astype(np.float16), "y": rng.standard_normal((1, n)).astype(np.float16)}
    m, _, counts = _compile(_add(n), buffers, {"add_0": {"block_dim": 4, "chunk": 8192}})
    assert counts["add_0"] == [buffers] * 3
    np.testing.assert_array_equal(_run(m, inputs), _reference(_add(n), inputs))


@pytest.mark.parametrize("make, atol", [(_conv, 2e-2), (_gemm, 2e-2)])
def test_conv_and_gemm_renamed_compute_the_same_bits(make, atol):
    model = make()
    name = model.graph.input[0].name
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    inputs = {name: np.random.default_rng(2).standard_normal(shape).astype(np.float32)}
    base, base_mod, _ = _compile(model, 1)
    want = _run(base, inputs)
    np.testing.assert_allclose(want, _reference(model, inputs), atol=atol, rtol=atol)
    for buffers in (2, 3):
        m, mod, counts = _compile(model, buffers)
        cube = next(k for k in counts if k.startswith(("conv", "gemm")))
        assert buffers in counts[cube], counts  # some buffer of the cube kernel is multi-buffered
        assert str(mod) != str(base_mod)  # ... and its generations moved to other copies
        np.testing.assert_array_equal(_run(m, inputs), want)


def test_tiling_pin_overrides_the_option():
    pin = {"add_0": {"block_dim": 1, "chunk": 16384, "buffers": 1}}
    _, _, counts = _compile(_add(1 << 16), 2, pin)
    assert counts["add_0"] == [1, 1, 1]
    pin["add_0"]["buffers"] = 3
    _, _, counts = _compile(_add(1 << 16), 1, pin)
    # 3 copies of three 32 KiB chunks (288 KiB) exceed the UB's 248 KiB: the later of the equal
    # buffers (the output) keeps one copy
    assert counts["add_0"] == [3, 3, 1]
    pin["add_0"]["chunk"] = 8192
    _, _, counts = _compile(_add(1 << 16), 1, pin)
    assert counts["add_0"] == [3, 3, 3]


def test_chunks_filling_the_ub_keep_one_copy():
    # the default chunk gives the three buffers all of UB: a second copy of any does not fit
    _, _, counts = _compile(_add(1 << 16), 2, {"add_0": {"block_dim": 1}})
    assert counts["add_0"] == [1, 1, 1]


def _channel_add(c: int, hw: int) -> onnx.ModelProto:
    bias = numpy_helper.from_array(np.linspace(-1, 1, c, dtype=np.float16).reshape(1, c, 1, 1), "bias")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT16, [1, c, hw, hw])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT16, [1, c, hw, hw])
    return _model([helper.make_node("Add", ["x", "bias"], ["y"], name="add")], [x], [y], [bias])


@pytest.mark.parametrize("make, pin, segment, dma", [
    # the default rule: the first of two straight-line 70.5 KiB chunks in 4 segments (3 more loads of
    # each input, 3 more stores)
    (lambda: _add(1 << 16), {"add_0": {"block_dim": 1}}, 0, 9),
    # 8 KiB segments of the 32 KiB chunks of a rotated double-buffered loop
    (lambda: _add(1 << 16), {"add_0": {"block_dim": 1, "chunk": 16384}}, 8192, 9),
    # a per-channel table (its small load is skipped), then 16 KiB segments of a 64x64 plane
    (lambda: _channel_add(32, 64), {"add_0": {"block_dim": 1}}, 16384, None),
])
def test_segmented_first_load_computes_the_same(make, pin, segment, dma):
    model = make()
    inputs = {i.name: np.random.default_rng(3).standard_normal(
        [d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float16) for i in model.graph.input}
    base, base_mod, _ = _compile(model, 1, pin, segment=1 << 30)  # one segment: left as it is
    m, mod, _ = _compile(model, 2, pin, segment)
    dmas = [o for o in _mnemonics(mod, "add_0") if o.startswith("ascend.copy_")]
    base_dmas = [o for o in _mnemonics(base_mod, "add_0") if o.startswith("ascend.copy_")]
    assert len(dmas) > len(base_dmas)
    if dma is not None:
        assert len(dmas) - len(base_dmas) == dma
    np.testing.assert_array_equal(_run(m, inputs), _run(base, inputs))
    np.testing.assert_array_equal(_run(m, inputs), _reference(model, inputs))
