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
    (_, graph), _, (_, ascend) = stage_pipelines("Ascend910", "force_fp16", 1, 0, kb="none")
    PassPipeline.parse_spec(ALL_PASSES, graph).apply(ctx, module)
    ConvertGraphToTilePass(precision_mode="force_fp16", tiling=json.dumps(pins)).apply(ctx, module)
    PassPipeline.parse_spec(ALL_PASSES, ascend).apply(ctx, module)
    return Model(build_offline_model(module))


def _code_sizes(make_model, sizes, kernel: str, tiling: dict) -> list[int]:
    """The code bytes of ``kernel`` in ``make_model(size)`` for each size, ``tiling`` pinned; each
    model's output matching onnxruntime."""
    out = []
    for size in sizes:
        m = make_model(size)
        x = testing.random_inputs(m)
        ref = testing.run_onnxruntime(m, x)["y"]
        model = _compile_pinned(m, {kernel: tiling})
        y = model.run(x)["y"]
        assert np.linalg.norm(y - ref) / np.linalg.norm(ref) <= 1e-2
        out.append({k.name: len(k.code) for k in model.om.kernels}[kernel])
    return out


def test_conv_m_subtiles_are_one_loop_whatever_the_map_size():
    # rows = 2 output rows per tile, m = 32 positions per L0A subtile: a 32-wide map has 2 subtiles
    # per tile, a 48-wide one 3; both roll into one loop (+ the code around it): the same code
    a, b = _code_sizes(_conv, (32, 48), "conv2d_0", {"rows": 2, "m": 32, "n": 32, "k": 16, "block_dim": 1})
    assert a == b


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
    a, b = _code_sizes(_global_avg_pool, (12, 24), "avg_pool_0",
                       {"rows": 1, "cols": 1, "krows": 4, "kcols": 4, "block_dim": 1})
    assert a == b


def test_fit_a_line_but_for_its_ends():
    assert rolling.fit([5, 9]) == (4, [])
    assert rolling.fit([0, 10, 20, 30]) == (10, [])
    # first value 3 off the line 10 i (pad of the first tile), last one moved back by 4 (a tail)
    d, clamps = rolling.fit([3, 10, 20, 26])
    assert d == 10
    vals = [3 + 10 * i + sum(min(max(off + i * st, lo), hi) for st, off, lo, hi in clamps) for i in range(4)]
    assert vals == [3, 10, 20, 26]
    assert rolling.fit([0, 1, 3, 6, 10]) is None  # not linear in the middle


def test_clamped_runs_fold_the_border_iterations():
    # tiles of 256 elements over 704: the last moved back to start at 448 (a GM offset off the line)
    # and the first with a shorter burst (a pad): one loop with clamped steps; plain runs split it
    gm, ub = _bufs()
    offs = [0, 256, 448]
    its = [[tile.CopyOp(gm, ub, src_offset=off, dst_offset=0, nburst=1, burst=192 if i == 0 else 256,
                        src_stride=256, dst_stride=256)] for i, off in enumerate(offs)]
    assert [r[:2] for r in rolling.runs(its)] == [(0, 1), (1, 2)]
    (run,) = rolling.clamped_runs(its)
    first, count, gm_step, steps, clamps = run
    assert (first, count, steps) == (0, 3, {})
    for (k, prop), cl in clamps.items():
        base = its[0][k].properties[prop].value.data
        seq = [base + gm_step.get(gm, 0) * i * (prop == "src_offset")
               + sum(min(max(off + i * st, lo), hi) for st, off, lo, hi in cl) for i in range(3)]
        want = [it[k].properties[prop].value.data for it in its]
        assert seq == want, prop


def test_clamped_runs_step_ops_of_nested_loops():
    # an op of an inner loop whose UB offset moves with the outer loop: one run, the step named on it
    gm, ub = _bufs()

    def it(off):
        return [tile.LoopBeginOp(2), *_iteration(gm, ub, 0, off), tile.LoopEndOp()]

    runs = rolling.clamped_runs([it(0), it(512), it(1024)])
    assert runs == [(0, 3, {}, {(1, "dst_offset"): 512}, {})]
    assert rolling.depths(it(0)) == [0, 1, 0]


def _padded_conv(h: int):
    rng = np.random.default_rng(1)
    w = numpy_helper.from_array((rng.standard_normal((32, 32, 3, 3)) / 8).astype(np.float32), "w")
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, h, 12])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, h, 12])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def test_a_padded_conv_is_the_same_code_at_two_heights():
    # 3 output rows per tile: a 9-row map has 3 row tiles (the first reading the top pad, the last the
    # bottom one), a 21-row one 7: the row tiles are one loop whose img2col pads (in the M-subtile
    # loops nested in it) and feature-map windows are clamped steps: the same code at both heights
    a, b = _code_sizes(_padded_conv, (9, 21), "conv2d_0", {"rows": 3, "m": 16, "n": 32, "k": 144, "block_dim": 1})
    assert a == b
