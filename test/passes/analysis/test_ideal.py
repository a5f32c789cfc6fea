"""The model work of each launch (cann.passes.analysis.ideal) and the ideal bound built on it,
against hand-computed values; ideal_pct <= 100 on every launch of the test models."""

from dataclasses import replace

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import cann
from cann import testing
from cann.codegen.om import LaunchWork
from cann.hw.config import load_soc
from cann.passes.analysis.ideal import split
from cann.sim.executor import ideal_cycles

SPEC = load_soc("Ascend910")


def _model(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
                          initializer=[numpy_helper.from_array(a, n) for n, a in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def _w(*shape, seed=0):
    return (np.random.default_rng(seed).standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype(np.float32)


def _run(model, **options):
    """(compiled model, the launch records with model work): compiled and simulated."""
    compiled = cann.compile(model, **options)
    compiled.run(testing.random_inputs(model))
    worked = [k for k in compiled.last_run.kernels if k.work != LaunchWork()]
    return compiled, worked


def test_conv_work_and_ideal():
    # x [1,64,56,56] * w [64,64,3,3] (+ b [64]), pads 1 -> y [1,64,56,56]
    m = _model([helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv", kernel_shape=[3, 3], pads=[1] * 4)],
               [("x", [1, 64, 56, 56])], [("y", [1, 64, 56, 56])], [("w", _w(64, 64, 3, 3)), ("b", _w(64))])
    _, (k,) = _run(m)
    macs = 1 * 64 * 56 * 56 * 64 * 3 * 3  # N*Cout*Hout*Wout*(Cin/group)*kh*kw = 115605504
    io = 2 * (64 * 56 * 56 + 64 * 64 * 9 + 64 + 64 * 56 * 56)  # fp16: x, w, b, y = 876672
    assert k.work == LaunchWork(model_macs=macs, cube_itemsize=2, compulsory_bytes=io)
    # max(ceil(MACs / (4096 * 32)), ceil(bytes / 1200)) = max(882, 731)
    assert k.ideal_cycles == 882 == ideal_cycles(k.work, SPEC)
    assert k.ideal_pct == pytest.approx(100 * 882 / k.cycles) and k.ideal_pct <= 100
    assert k.executed_macs >= macs and k.executed_macs % (16 * 16 * 16) == 0


def test_gemm_work_and_ideal():
    m = _model([helper.make_node("Gemm", ["a", "b", "c"], ["y"], name="gemm")],
               [("a", [64, 256])], [("y", [64, 128])], [("b", _w(256, 128)), ("c", _w(128))])
    _, (k,) = _run(m)
    io = 2 * (64 * 256 + 256 * 128 + 128 + 64 * 128)  # 114944
    assert k.work == LaunchWork(model_macs=64 * 128 * 256, cube_itemsize=2, compulsory_bytes=io)
    assert k.ideal_cycles == max(-(-64 * 128 * 256 // (4096 * 32)), -(-io // 1200)) == 96
    assert k.executed_macs >= 64 * 128 * 256 and k.ideal_pct <= 100


def test_gemm_fp32_cube_rate():
    m = _model([helper.make_node("Gemm", ["a", "b"], ["y"], name="gemm")],
               [("a", [512, 256])], [("y", [512, 256])], [("b", _w(256, 256))])
    _, (k,) = _run(m, precision_mode="must_keep_origin_dtype")
    io = 4 * (512 * 256 + 256 * 256 + 512 * 256)  # fp32 storage
    assert k.work == LaunchWork(model_macs=512 * 256 * 256, cube_itemsize=4, compulsory_bytes=io)
    # the fp32 cube: a 16 x 8 x 16 fractal step per fp32_rate_divisor (4) cycles = 512 MACs/cycle
    assert SPEC.cube.macs_per_cycle(4) == 512 and SPEC.cube.macs_per_cycle(2) == 4096
    assert k.ideal_cycles == max(-(-512 * 256 * 256 // (512 * 32)), -(-io // 1200)) == 2048
    assert k.ideal_pct <= 100


def test_grouped_conv_counts_real_macs():
    # group 8: each output channel sees 4 input channels; the densified kernel multiplies 8x as much
    m = _model([helper.make_node("Conv", ["x", "w"], ["y"], name="gconv", kernel_shape=[3, 3], pads=[1] * 4,
                                 group=8)],
               [("x", [1, 32, 8, 8])], [("y", [1, 32, 8, 8])], [("w", _w(32, 4, 3, 3))])
    _, (k,) = _run(m)
    macs = 1 * 32 * 8 * 8 * 4 * 3 * 3  # 73728
    io = 2 * (32 * 64 + 32 * 4 * 9 + 32 * 64)  # 10496
    assert k.work == LaunchWork(model_macs=macs, cube_itemsize=2, compulsory_bytes=io)
    assert k.ideal_cycles == max(1, -(-io // 1200)) == 9
    assert k.executed_macs >= 8 * macs


@pytest.mark.parametrize("op, field, per_repeat", [
    ("Relu", "vector_bytes", SPEC.vector.cycles_per_repeat),
    ("Exp", "vector_bytes_transcendental", SPEC.vector.cycles_per_repeat_transcendental),
])
def test_elementwise_and_transcendental_work(op, field, per_repeat):
    shape = [1, 64, 32, 32]
    m = _model([helper.make_node(op, ["x"], ["y"], name="f")], [("x", shape)], [("y", shape)])
    _, (k,) = _run(m)
    n = 64 * 32 * 32
    assert k.work == LaunchWork(**{field: 2 * n}, compulsory_bytes=2 * 2 * n)  # fp16 lanes; x and y once
    vector = -(-2 * n * per_repeat // (256 * 32))  # 16 (Relu), 64 (Exp): 256 B per repeat on 32 cores
    assert k.ideal_cycles == max(vector, -(-4 * n // 1200)) == 219 and k.ideal_pct <= 100


def test_softmax_work():
    m = _model([helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=-1)], [("x", [4, 1000])],
               [("y", [4, 1000])])
    _, (k,) = _run(m)
    assert k.work == LaunchWork(vector_bytes=2 * 4 * 4000, vector_bytes_transcendental=2 * 4000,
                                compulsory_bytes=2 * 2 * 4000)
    assert k.ideal_cycles == max(-(-(32000 + 4 * 8000) // 8192), -(-16000 // 1200)) == 14


def test_node_imported_as_several_ops_counts_its_io_once():
    """Softmax of opset 11 on [1, 1000, 1, 1] imports as reshape, softmax, reshape (one node name):
    its compulsory bytes are its input and output once (2 x 2000 fp16 bytes), not every op's
    operands and results summed (12000, which tripled SqueezeNet's softmax ideal cycles)."""
    g = helper.make_graph([helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=1)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1000, 1, 1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1000, 1, 1])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)])
    m.ir_version = 8
    _, (k,) = _run(m)
    assert k.work == LaunchWork(vector_bytes=2 * 4 * 1000, vector_bytes_transcendental=2 * 1000,
                                compulsory_bytes=2 * 2 * 1000)
    assert k.ideal_cycles == max(-(-(8000 + 4 * 2000) // 8192), -(-4000 // 1200)) == 4


@pytest.mark.parametrize("opt_level", [0, 1])
def test_fused_group_intermediates_are_not_compulsory(opt_level):
    # Conv -> Relu: fused at -O1 (one launch, the Conv's output stays on chip), two launches at -O0
    m = _model([helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1, 1]),
                helper.make_node("Relu", ["c"], ["y"], name="relu")],
               [("x", [1, 16, 8, 8])], [("y", [1, 16, 8, 8])], [("w", _w(16, 16, 1, 1))])
    _, worked = _run(m, opt_level=opt_level)
    conv = LaunchWork(model_macs=16 * 64 * 16, cube_itemsize=2, compulsory_bytes=2 * (1024 + 256 + 1024))
    relu = LaunchWork(vector_bytes=2 * 1024, compulsory_bytes=2 * 2 * 1024)
    if opt_level:
        assert [k.work for k in worked] == [replace(conv, vector_bytes=relu.vector_bytes)]
    else:
        assert [k.work for k in worked] == [conv, relu]


def test_where_counts_lanes_of_its_values():
    g = helper.make_graph([helper.make_node("Where", ["c", "x", "y"], ["z"], name="where")], "g",
                          [helper.make_tensor_value_info("c", TensorProto.BOOL, [4, 256]),
                           helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 256]),
                           helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 256])],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, [4, 256])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    _, (k,) = _run(m)
    # one select per element on float16 lanes; c (bool, 1 byte) + x + y + z (float16) moved once
    assert k.work == LaunchWork(vector_bytes=2 * 1024, compulsory_bytes=1024 + 3 * 2 * 1024)


def test_slice_and_gather_count_only_what_they_select():
    # a row of a [64, 1024] tensor; 4 rows of a [1000, 64] table: the rest of the data is never needed
    starts, ends, axes = (numpy_helper.from_array(np.array([v], np.int64), n) for n, v in
                          (("s", 3), ("e", 4), ("a", 0)))
    g = helper.make_graph(
        [helper.make_node("Slice", ["x", "s", "e", "a"], ["y"], name="slice"),
         helper.make_node("Gather", ["t", "i"], ["z"], name="gather", axis=0)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 1024]),
         helper.make_tensor_value_info("i", TensorProto.INT64, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1024]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [4, 64])],
        initializer=[starts, ends, axes, numpy_helper.from_array(_w(1000, 64), "t")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    compiled, worked = _run(m)
    works = sorted((k.work for k in worked), key=lambda w: w.compulsory_bytes)
    assert works == [LaunchWork(compulsory_bytes=2 * 4 * 64 + 8 * 4 + 2 * 4 * 64),  # rows read, indices, z
                     LaunchWork(compulsory_bytes=2 * 1024 + 2 * 1024)]  # the row read, y
    assert all(k.ideal_pct <= 100 for k in compiled.last_run.kernels)


@pytest.mark.parametrize("work, soc, expected", [
    (LaunchWork(vector_bytes=81920, vector_bytes_transcendental=8192), "Ascend910", 10 + 4),  # vector-bound
    (LaunchWork(vector_bytes_int64=8192), "Ascend910", 2),  # int64 lanes: cycles_per_repeat_int64 = 2
    (LaunchWork(model_macs=4096 * 32 * 7 + 1, cube_itemsize=2), "Ascend910", 8),  # rounded up
    (LaunchWork(model_macs=4096 * 2 * 5, cube_itemsize=2, compulsory_bytes=128 * 3), "Ascend310", 5),  # 2 cores
    (LaunchWork(compulsory_bytes=128 * 7), "Ascend310", 7),  # gm_total 128 B/cycle
    (LaunchWork(vector_bytes=256 * 48 * 3), "Ascend910B1", 3),  # 48 vector cores on a separated SoC
    (LaunchWork(), "Ascend910", 0),
])
def test_ideal_formula(work, soc, expected):
    assert ideal_cycles(work, load_soc(soc)) == expected


def test_split_is_exact_and_proportional():
    assert split(10, [1, 1, 1]) == [4, 3, 3]
    assert split(7, [0, 3, 1]) == [0, 5, 2]
    assert split(5, [0, 0]) == [3, 2]
    assert sum(split(123457, [5, 17, 0, 9])) == 123457


def test_multi_kernel_node_work_is_split():
    # LRN lowers to three kernels (square, window sum, scale): the node's work is shared among them
    m = _model([helper.make_node("LRN", ["x"], ["y"], name="lrn", size=5)], [("x", [1, 32, 8, 8])],
               [("y", [1, 32, 8, 8])])
    compiled, worked = _run(m)
    n = 32 * 64
    assert len(worked) == 3
    assert sum(k.work.vector_bytes for k in worked) == 2 * (5 + 3) * n
    assert sum(k.work.vector_bytes_transcendental for k in worked) == 2 * n
    assert sum(k.work.compulsory_bytes for k in worked) == 2 * 2 * n
    assert all(k.ideal_pct <= 100 for k in worked)


@pytest.mark.parametrize("name, precision_mode", [
    ("fire_net", "force_fp16"), ("fire_net", "must_keep_origin_dtype"), ("squeezenet", "force_fp16"),
    pytest.param("inception_v1", "force_fp16", marks=pytest.mark.slow),  # LRN: work split over 3 kernels
    pytest.param("shufflenet", "force_fp16", marks=pytest.mark.slow),  # grouped convolutions
])
def test_ideal_pct_at_most_100_on_every_launch(name, precision_mode, request):
    model = onnx.load(request.getfixturevalue("fire_onnx")) if name == "fire_net" else testing.test_model(name)
    compiled, worked = _run(model, precision_mode=precision_mode)
    run = compiled.last_run
    assert worked and run.model_macs > 0
    for k in run.kernels:
        assert 0 <= k.ideal_pct <= 100, (k.name, k.ideal_cycles, k.cycles, k.work)
        # executed_macs counts the cube's (mmad) MACs and the vector unit's vmla lanes; a depthwise
        # Conv's first tap is a vmul (not counted), so it reports its other taps' lanes only
        if k.name.startswith("dwconv2d"):
            assert 0 < k.executed_macs and k.model_macs > 0, k.name
        else:
            assert k.model_macs <= k.executed_macs, k.name
    assert run.ideal_pct == pytest.approx(100 * sum(k.ideal_cycles for k in run.kernels) / run.cycles)
    # every Conv / Gemm of the model is credited to exactly one launch
    cube_nodes = sum(1 for n in model.graph.node if n.op_type in ("Conv", "Gemm", "MatMul"))
    assert sum(1 for k in run.kernels if k.model_macs) == cube_nodes
