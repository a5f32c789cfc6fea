"""Loop rolling of iterations whose on-chip fields step linearly (:mod:`cann.lowering.rolling`):
which runs become loops and with which steps, what stays unrolled, and a conv whose M subtiles
are one hardware loop: the same code at two map sizes, results matching onnxruntime."""

from __future__ import annotations

import json

import numpy as np
from onnx import TensorProto, helper, numpy_helper
from xdsl.dialects.builtin import f16
from xdsl.ir import Block
from xdsl.passes import PassPipeline

from cann import testing
from cann.codegen.offline import build_offline_model
from cann.compiler import import_model, make_context, stage_pipelines
from cann.dialects import tile
from cann.lowering.convert_graph_to_tile import ConvertGraphToTilePass
from cann.passes import ALL_PASSES
from cann.runtime import Model
from cann.dialects.tile import Space
from cann.lowering import rolling


def _bufs():
    blk = Block(arg_types=[tile.buffer_type(Space.GM, f16, 4096)])
    ub = tile.AllocOp(Space.UB, f16, 4096)
    blk.add_op(ub)
    return blk.args[0], ub.res


def _iteration(gm, ub, gm_off: int, ub_off: int, count: int = 256):
    return [tile.CopyOp(gm, ub, src_offset=gm_off, dst_offset=ub_off, nburst=1, burst=count, src_stride=count,
                        dst_stride=count)]


def test_runs_step_on_chip_offsets_by_a_constant():
    gm, ub = _bufs()
    its = [_iteration(gm, ub, 256 * i, 512 * i) for i in range(4)]
    assert rolling.runs(its) == [(0, 4, {gm: 256}, {(0, "dst_offset"): 512})]


def test_runs_keep_iterations_whose_on_chip_field_does_not_step_linearly():
    # UB offsets 0, 512, 1536: the third iteration starts another run (a step of 1024 after 512)
    gm, ub = _bufs()
    its = [_iteration(gm, ub, 256 * i, off) for i, off in enumerate((0, 512, 1536))]
    assert rolling.runs(its) == [(0, 2, {gm: 256}, {(0, "dst_offset"): 512}), (2, 1, {}, {})]
    # a partial last iteration (another burst) is peeled
    its = [_iteration(gm, ub, 256 * i, 256 * i, 256 if i < 3 else 64) for i in range(4)]
    assert [r[:2] for r in rolling.runs(its)] == [(0, 3), (3, 1)]


def test_runs_do_not_step_ops_inside_a_nested_loop():
    # a tile.loop_step applies to the loop around it: an op of an inner loop differing in its UB
    # offset from one outer iteration to the next is not the same code
    gm, ub = _bufs()

    def it(off):
        return [tile.LoopBeginOp(2), *_iteration(gm, ub, 0, off), tile.LoopEndOp()]

    assert [r[:2] for r in rolling.runs([it(0), it(512), it(1024)])] == [(0, 1), (1, 1), (2, 1)]
    assert rolling.runs([it(0), it(0)]) == [(0, 2, {gm: 0}, {})]


def _conv(hw: int):
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.standard_normal((32, 16, 1, 1)) / 4).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(32).astype(np.float32), "b")
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv", kernel_shape=[1, 1])
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, hw, hw])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, hw, hw])], [w, b])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def _compile_pinned(model, pins):
    module = import_model(model)
    ctx = make_context()
    (_, graph), _, (_, ascend) = stage_pipelines("Ascend910", "force_fp16", 1, 0)
    PassPipeline.parse_spec(ALL_PASSES, graph).apply(ctx, module)
    ConvertGraphToTilePass(precision_mode="force_fp16", tiling=json.dumps(pins)).apply(ctx, module)
    PassPipeline.parse_spec(ALL_PASSES, ascend).apply(ctx, module)
    return Model(build_offline_model(module))


def test_conv_m_subtiles_are_one_loop_whatever_the_map_size():
    # rows = 2 output rows per tile, m = 32 positions per L0A subtile: a 32-wide map has 2 subtiles
    # per tile, a 48-wide one 3; both roll into one loop (+ the code around it): the same code
    sizes = {}
    for hw in (32, 48):
        m = _conv(hw)
        x = testing.random_inputs(m)
        ref = testing.run_onnxruntime(m, x)["y"]
        model = _compile_pinned(m, {"conv2d_0": {"rows": 2, "m": 32, "n": 32, "k": 16, "block_dim": 1}})
        y = model.run(x)["y"]
        assert np.linalg.norm(y - ref) / np.linalg.norm(ref) <= 1e-2
        sizes[hw] = {k.name: len(k.code) for k in model.om.kernels}["conv2d_0"]
    assert sizes[32] == sizes[48]


def _global_avg_pool(hw: int):
    node = helper.make_node("AveragePool", ["x"], ["y"], name="pool", kernel_shape=[hw, hw], strides=[hw, hw])
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, hw, hw])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 1, 1])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def test_pool_window_blocks_are_nested_loops_whatever_the_kernel_size():
    # a global 12x12 / 24x24 average in 4x4 blocks of taps: 3x3 / 6x6 blocks, rows of blocks one loop,
    # the blocks of a row an inner one (only GM moves): the same code, results matching onnxruntime
    sizes = {}
    for hw in (12, 24):
        m = _global_avg_pool(hw)
        x = testing.random_inputs(m)
        ref = testing.run_onnxruntime(m, x)["y"]
        model = _compile_pinned(m, {"avg_pool_0": {"rows": 1, "cols": 1, "krows": 4, "kcols": 4, "block_dim": 1}})
        y = model.run(x)["y"]
        assert np.linalg.norm(y - ref) / np.linalg.norm(ref) <= 1e-2
        sizes[hw] = {k.name: len(k.code) for k in model.om.kernels}["avg_pool_0"]
    assert sizes[12] == sizes[24]
