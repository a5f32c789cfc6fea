"""Hardware loops: a kernel is written once per image / per round of tiles, so the code of the
per-image kernels does not grow with the batch (DESIGN.md principle 5), and results still match
onnxruntime."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import cann
from cann import testing
from cann.hw import isa
from cann.sim.spmd import specialize


def _net(batch: int):
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array((rng.standard_normal((32, 3, 3, 3)) / 5).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(32).astype(np.float32), "b"),
             numpy_helper.from_array((rng.standard_normal((10, 32 * 4 * 4)) / 20).astype(np.float32), "fw")]
    n = helper.make_node
    nodes = [n("Conv", ["x", "w", "b"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             n("Relu", ["c"], ["r"], name="relu"),
             n("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
             n("Sigmoid", ["p"], ["s"], name="sig"), n("Mul", ["p", "s"], ["sw"], name="swish"),
             n("Flatten", ["sw"], ["f"], name="flat"), n("Gemm", ["f", "fw"], ["y"], name="fc", transB=1)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 10])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("precision_mode,tol", [("force_fp16", 1e-2), ("must_keep_origin_dtype", 1e-4)])
def test_kernel_code_does_not_grow_with_batch(precision_mode, tol):
    sizes = {}
    for batch in (4, 16):
        m = _net(batch)
        x = testing.random_inputs(m)
        ref = testing.run_onnxruntime(m, x)["y"]
        # the Gemm on the cube at both batches (4 rows would run on the vector unit, gemv.py: another code)
        model = cann.compile(m, precision_mode=precision_mode, tiling={"gemm_0": {"vector": 0}})
        y = model.run(x)["y"]
        assert np.linalg.norm(y - ref) / np.linalg.norm(ref) <= tol
        sizes[batch] = {k.name: len(k.code) for k in model.om.kernels}
    # per-image kernels (NCHW -> NC1HWC0, pooling, elementwise on NC1HWC0) are written once per image
    per_image = ["trans_data_0", "max_pool_0", "fused_eltwise_0"]
    assert {k: sizes[4][k] for k in per_image} == {k: sizes[16][k] for k in per_image}
    # the conv gives the cores one image leaves idle further images (i_blocks) instead of groups of
    # output rows, each with its own code: the larger batch has no more code
    assert sizes[16]["conv2d_0"] <= sizes[4]["conv2d_0"]
    # kernels over flat [batch, ...] data differ at most by their tail (a partial last chunk or repeat)
    assert all(abs(sizes[16][k] - sizes[4][k]) <= 128 for k in sizes[4] if k not in per_image + ["conv2d_0"])


def test_loop_expansion_moves_gm_operands_per_iteration():
    prog = [isa.make("loop_begin", count=3), isa.make("loop_offset", arg=1, stride=64),
            isa.make("copy_gm_to_ub", dst=0, src_arg=0, src=8, nburst=1, burst=32),
            isa.make("copy_ub_to_gm", dst_arg=1, dst=4, src=0, nburst=1, burst=32),
            isa.make("loop_end")]
    out, args = specialize(prog, 0, (100, 200))
    assert args == (100, 200)
    copies = [(i.mnemonic, i.values) for i in out if i.defn.group == "dma"]
    # argument 1 moves 64 bytes per iteration; argument 0 has no loop_offset and stays
    assert copies == [("copy_gm_to_ub", (0, 0, 8, 1, 32, 0, 0)), ("copy_ub_to_gm", (1, 4, 0, 1, 32, 0, 0)),
                      ("copy_gm_to_ub", (0, 0, 8, 1, 32, 0, 0)), ("copy_ub_to_gm", (1, 68, 0, 1, 32, 0, 0)),
                      ("copy_gm_to_ub", (0, 0, 8, 1, 32, 0, 0)), ("copy_ub_to_gm", (1, 132, 0, 1, 32, 0, 0))]
    assert [i.mnemonic for i in out].count("loop_begin") == 1  # control costs scalar cycles once


def test_nested_loops_and_unbalanced_loops():
    prog = [isa.make("loop_begin", count=2), isa.make("loop_offset", arg=0, stride=1000),
            isa.make("loop_begin", count=2), isa.make("loop_offset", arg=0, stride=10),
            isa.make("copy_gm_to_ub", dst=0, src_arg=0, src=0, nburst=1, burst=32),
            isa.make("loop_end"), isa.make("loop_end")]
    out, _ = specialize(prog, 0, (0,))
    assert [i.src for i in out if i.mnemonic == "copy_gm_to_ub"] == [0, 10, 1000, 1010]
    with pytest.raises(ValueError, match="loop_begin without loop_end"):
        specialize(prog[:-1], 0, (0,))
    with pytest.raises(ValueError, match="loop_end without loop_begin"):
        specialize(prog[4:], 0, (0,))


def _data_model(nodes, ins, out):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in ins],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("kind", ["transpose", "concat", "broadcast"])
def test_data_movement_kernels_loop_over_outer_axes(kind):
    """Transpose, Concat and broadcast gathers with small contiguous runs (a rank-6 tensor, the
    moved axis innermost) are nested hardware loops: the code does not grow with the outer axes,
    and the values match numpy."""
    sizes, rng = {}, np.random.default_rng(1)
    for outer in (2, 6):
        shape = (outer, 3, 4, 2, 5, 3)
        if kind == "transpose":
            m = _data_model([helper.make_node("Transpose", ["a"], ["y"], perm=[0, 2, 3, 4, 5, 1])], [("a", shape)],
                            [outer, 4, 2, 5, 3, 3])
            feeds = {"a": rng.standard_normal(shape).astype(np.float32)}
            want = feeds["a"].transpose(0, 2, 3, 4, 5, 1)
        elif kind == "concat":
            m = _data_model([helper.make_node("Concat", ["a", "b"], ["y"], axis=5)], [("a", shape), ("b", shape)],
                            [*shape[:5], 6])
            feeds = {k: rng.standard_normal(shape).astype(np.float32) for k in "ab"}
            want = np.concatenate([feeds["a"], feeds["b"]], axis=5)
        else:
            small = (outer, 1, 4, 1, 5, 1)
            m = _data_model([helper.make_node("Add", ["a", "b"], ["y"])], [("a", shape), ("b", small)], list(shape))
            feeds = {"a": rng.standard_normal(shape).astype(np.float32), "b": rng.standard_normal(small).astype(np.float32)}
            want = feeds["a"] + feeds["b"]
        model = cann.compile(m, precision_mode="must_keep_origin_dtype")
        np.testing.assert_allclose(model.run(feeds)["y"], want, rtol=1e-6)
        sizes[outer] = {k.name: len(k.code) for k in model.om.kernels if k.name.startswith(kind)}
    assert sizes[2] and sizes[2] == sizes[6]
