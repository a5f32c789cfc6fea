"""graph-spatial-partition on small ONNX models: the emulated partitioned run equals the unpartitioned cann
model (fp32) on uneven grids, with strides, dilations, pooling, Pad, nearest Resize, ConvTranspose, crops,
skip Adds and deeper halos; ops that need the whole image are one error each, naming the node."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import cann
from cann.errors import CannError
from cann.spatial.compile import compile_spatial, partition_module
from cann.spatial.run import run_emulated

FP32 = "must_keep_origin_dtype"


class Net:
    def __init__(self, seed=0):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.n = [], [], 0

    def w(self, shape):
        name = f"w{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(
            (self.rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype(np.float32), name))
        return name

    def op(self, kind, inputs, **attrs):
        self.n += 1
        out = f"{kind.lower()}{self.n}"
        self.nodes.append(helper.make_node(kind, inputs, [out], name=out, **attrs))
        return out

    def conv(self, x, cin, cout, k, s=1, p=0, d=1):
        return self.op("Relu", [self.op("Conv", [x, self.w((cout, cin, k, k)), self.w((cout,))], kernel_shape=[k, k],
                                        strides=[s, s], pads=[p] * 4, dilations=[d, d])])

    def model(self, x_shape, out, out_shape):
        g = helper.make_graph(self.nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, out_shape)], initializer=self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        m.ir_version = 8
        return m


def mixed_net():
    """stride-2 conv, dilated conv, 3x3/2 max pool with pad, explicit Pad, nearest x2 Resize, ConvTranspose k3 s2,
    a crop (Slice) and a skip Add."""
    n = Net()
    a = n.conv("x", 3, 4, 3, s=2, p=1)  # 19x23 -> 10x12
    b = n.conv(a, 4, 4, 3, p=2, d=2)  # 10x12
    c = n.op("MaxPool", [b], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])  # 5x6
    pads = n.op("Pad", [c, n.const(np.array([0, 0, 1, 2, 0, 0, 1, 0], np.int64))], mode="constant")  # 7x8
    d = n.conv(pads, 4, 4, 3)  # 5x6
    scales = n.const(np.array([1, 1, 2, 2], np.float32))
    up = n.op("Resize", [d, "", scales], mode="nearest", coordinate_transformation_mode="asymmetric",
              nearest_mode="floor")  # 10x12
    t = n.op("ConvTranspose", [up, n.w((4, 4, 3, 3))], kernel_shape=[3, 3], strides=[2, 2])  # 21x25
    crop = n.op("Slice", [t, n.const(np.array([1, 1], np.int64)), n.const(np.array([20, 24], np.int64)),
                          n.const(np.array([2, 3], np.int64))])  # 19x23
    skip = n.op("Conv", ["x", n.w((4, 3, 1, 1))], kernel_shape=[1, 1])
    s = n.op("Add", [crop, skip])
    return n.model([1, 3, 19, 23], s, [1, 4, 19, 23])


def _const(self, array):
    name = f"c{len(self.inits)}"
    self.inits.append(numpy_helper.from_array(array, name))
    return name


Net.const = _const


@pytest.fixture(scope="module")
def mixed():
    m = mixed_net()
    onnx.checker.check_model(m)
    x = np.random.default_rng(1).standard_normal((1, 3, 19, 23)).astype(np.float32)
    out = m.graph.output[0].name
    return m, x, out, cann.compile(m, precision_mode=FP32).run({"x": x})[out]


@pytest.mark.parametrize("grid, depth", [("1x2", 1), ("2x1", 1), ("2x3", 1), ("3x2", 2), ("1x3", 3)])
def test_partitioned_equals_unpartitioned(mixed, grid, depth):
    m, x, out, ref = mixed
    bundle = compile_spatial(m, grid, precision_mode=FP32, depth=depth)
    y = run_emulated(bundle, {"x": x})[0][out]
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) <= 1e-6


def test_depth_means_fewer_exchanges(mixed):
    m = mixed[0]
    counts = [len(compile_spatial(m, "2x2", precision_mode=FP32, depth=d).manifest["exchanges"]) for d in (1, 3)]
    assert counts[0] > counts[1] >= 1


def test_whole_image_ops_are_errors():
    n = Net()
    a = n.conv("x", 3, 4, 3, p=1)
    g = n.op("GlobalAveragePool", [a])
    f = n.op("Flatten", [g], axis=1)
    m = n.model([1, 3, 8, 8], f, [1, 4])
    with pytest.raises(CannError) as e:
        partition_module(m, "2x2")
    lines = e.value.lines()
    assert lines[0] == ("error: globalaveragepool3: 'graph.global_avg_pool' needs the whole image: it cannot follow a "
                        "spatially split tensor (spatial partitioning covers convolutions, pooling, ConvTranspose, "
                        "crops, nearest upsampling, BatchNorm, elementwise ops and channel Concat)")


def test_too_fine_a_grid_is_an_error():
    n = Net()
    a = n.conv("x", 3, 4, 3, s=2, p=1)
    m = n.model([1, 3, 8, 8], a, [1, 4, 4, 4])
    with pytest.raises(CannError, match=r"image 4x4 cannot be split over a 1x8 grid"):
        partition_module(m, "1x8")
    n = Net()
    a = n.conv("x", 3, 4, 7, p=3)
    m = n.model([1, 3, 8, 8], a, [1, 4, 8, 8])
    with pytest.raises(CannError, match="the halo is wider than a neighbour's slice"):
        partition_module(m, "1x4")
