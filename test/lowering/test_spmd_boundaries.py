"""Kernels that split their work into SPMD rounds and UB chunks, at sizes just below, at and just
above each round and tail boundary (issue 10.1: the last partial round of the dtype-converting
``trans_data`` read round 0's data again, so a float32 [512, 3072] Relu in force_fp16 was wrong
from element 811,008 on).

The boundaries are not literals: the core count comes from the SoC description (``cann/hw``) and
each kernel's chunk (``chunk`` / ``rows`` / ``cols`` of its recorded tiling, which the lowering
derives from the SoC's UB size) is read from the tile-level IR of a probe compile. Every case is
compared elementwise with onnxruntime, so one wrong element in a tail fails the test.
"""

import math

import numpy as np
import pytest
from onnx import TensorProto, helper

import cann
from cann import testing
from cann.compiler import lower
from cann.hw.config import load_soc

SOC = "Ascend910"
CORES = load_soc(SOC).ai_core_count
MODES = ["force_fp16", "must_keep_origin_dtype"]
_NP = {TensorProto.FLOAT: np.float32, TensorProto.INT32: np.int32, TensorProto.INT64: np.int64}


def _model(op: str, in_shapes, out_shape, dtype=TensorProto.FLOAT, inits=(), opset=13, **attrs):
    names = [f"x{i}" for i in range(len(in_shapes))]
    node = helper.make_node(op, names + [i.name for i in inits], ["y"], **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, dtype, s) for n, s in zip(names, in_shapes)],
                          [helper.make_tensor_value_info("y", dtype, out_shape)], list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _tilings(model, mode: str, cores: int) -> dict[str, dict[str, int]]:
    """kernel name -> its recorded tiling (tile-level IR of ``model``)."""
    module = lower(model, precision_mode=mode, until="tile", aicore_num=cores)
    return {op.sym_name.data: {k: v.value.data for k, v in op.attributes["tile.tiling"].data.items()}
            for op in module.ops if "tile.tiling" in op.attributes}


def _chunk(model, mode: str, hint: str, key: str = "chunk", cores: int = CORES) -> int:
    return next(t[key] for name, t in _tilings(model, mode, cores).items() if name.startswith(hint))


def _around(items: int, per_item: int) -> list[int]:
    """Sizes one below, at and one above ``items`` whole items of ``per_item``."""
    return [items * per_item - 1, items * per_item, items * per_item + 1]


def _check(model, mode: str, cores: int = CORES, seed: int = 0, scale: float = 1.0):
    """Compile and run ``model`` on ``cores`` cores; every output element must match onnxruntime
    (floats: within the mode's tolerance, relative to 1 + |reference|, after multiplying both by
    ``scale``: Softmax outputs of long rows and means of many positions are small)."""
    rng = np.random.default_rng(seed)
    x = {}
    for vi in model.graph.input:
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        dt = _NP[vi.type.tensor_type.elem_type]
        x[vi.name] = (rng.standard_normal(shape).astype(dt) if dt == np.float32
                      else rng.integers(-1000, 1000, shape).astype(dt))
    ref = testing.run_onnxruntime(model, x)["y"]
    y = cann.compile(model, precision_mode=mode, aicore_num=cores).run(x)["y"]
    assert y.shape == ref.shape
    if ref.dtype.kind in "iu":
        bad = np.nonzero(y.reshape(-1) != ref.reshape(-1))[0]
    else:
        tol = 1e-2 if mode == "force_fp16" else 1e-5
        y, ref = y * scale, ref * scale
        bad = np.nonzero(np.abs(y - ref).reshape(-1) > tol * (1 + np.abs(ref).reshape(-1)))[0]
    assert bad.size == 0, f"{bad.size} wrong elements, first at flat index {bad[0]}"


def test_issue_relu_512x3072_fp16():
    """The reported case: a float32 [512, 3072] Relu in the default precision mode."""
    _check(_model("Relu", [[512, 3072]], [512, 3072]), "force_fp16")


def _nd_sizes(mode: str) -> list[int]:
    """Flat sizes around one and two full SPMD rounds, and a ragged last round, of every kernel of a
    1-D Relu (trans_data in, the ND elementwise kernel, trans_data out)."""
    probe = _model("Relu", [[1 << 22]], [1 << 22])
    sizes = set()
    for name, t in _tilings(probe, mode, CORES).items():
        c = t["chunk"]
        sizes.update(_around(CORES, c))  # exactly one full round
        sizes.update(_around(2 * CORES, c))  # two full rounds
        sizes.add((CORES + 3) * c + c // 2)  # a ragged last round with a partial last chunk
    return sorted(sizes)


@pytest.mark.parametrize("mode", MODES)
def test_nd_elementwise_and_trans_data_rounds(mode):
    for n in _nd_sizes(mode):
        _check(_model("Relu", [[n]], [n]), mode)


def _per_channel(c: int, h: int, w: int):
    """x * per-channel constant: trans_data ND -> NC1HWC0, the NC1HWC0 elementwise kernel (SPMD
    over C1 planes, each plane in UB chunks), trans_data back."""
    from onnx import numpy_helper

    k = numpy_helper.from_array(np.linspace(-2, 2, c, dtype=np.float32).reshape(c, 1, 1), "k")
    return _model("Mul", [[1, c, h, w]], [1, c, h, w], inits=[k])


@pytest.mark.parametrize("mode", MODES)
def test_nc1hwc0_plane_rounds(mode):
    """C1 planes around one and two rounds of the SoC's cores, with and without padding channels."""
    for c1 in (CORES - 1, CORES, CORES + 1, 2 * CORES + 1):
        for c in (16 * c1, 16 * c1 - 5):
            _check(_per_channel(c, 3, 5), mode)


@pytest.mark.parametrize("mode", MODES)
def test_nc1hwc0_position_rounds(mode):
    """trans_data's position tiles and the elementwise kernel's plane chunks, around their UB
    chunk; two cores, so that a second round of position tiles needs only a few chunks."""
    cores = 2
    probe = _tilings(_per_channel(1, 512, 512), mode, cores)
    for name, t in probe.items():
        for hw in _around(cores, t["chunk"]) + _around(1, t["chunk"]) + [(cores + 1) * t["chunk"] + 7]:
            _check(_per_channel(1, 1, hw), mode, cores)


@pytest.mark.parametrize("mode", MODES)
def test_integer_kernel_rounds(mode):
    probe = _model("Add", [[1 << 22]] * 2, [1 << 22], TensorProto.INT32)
    c = _chunk(probe, mode, "add")
    for n in _around(CORES, c) + _around(2 * CORES, c) + [(CORES + 2) * c + c // 3]:
        _check(_model("Add", [[n]] * 2, [n], TensorProto.INT32), mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op,attrs", [("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
                                      ("AveragePool", {"kernel_shape": [2, 2], "strides": [2, 2]})])
def test_pool_plane_rounds(mode, op, attrs):
    for c1 in (CORES - 1, CORES, CORES + 1, 2 * CORES + 1):  # padding channels in the last C1 plane
        _check(_model(op, [[1, 16 * c1 - 3, 6, 6]], [1, 16 * c1 - 3, 3, 3], **attrs), mode)


@pytest.mark.parametrize("mode", MODES)
def test_softmax_row_rounds(mode):
    for rows in _around(CORES, 1) + _around(2 * CORES, 1) + [3 * CORES + 5]:
        _check(_model("Softmax", [[rows, 37]], [rows, 37], axis=-1), mode, scale=37)


@pytest.mark.parametrize("mode", MODES)
def test_reduction_row_and_column_chunks(mode):
    probe = _tilings(_model("ReduceSum", [[4096, 1 << 16]], [1, 1 << 16], opset=11, keepdims=1, axes=[0]), mode, CORES)
    t = next(v for k, v in probe.items() if k.startswith("reduce"))
    for k_, r_ in [(t["rows"] - 1, 40), (t["rows"], 40), (t["rows"] + 1, 40), (3, t["cols"] - 1),
                   (3, t["cols"]), (3, t["cols"] + 1), (2 * t["rows"] + 1, 2 * t["cols"] + 3)]:
        _check(_model("ReduceSum", [[k_, r_]], [1, r_], opset=11, keepdims=1, axes=[0]), mode)


@pytest.mark.parametrize("mode", MODES)
def test_data_movement_chunks(mode):
    """Concat, Transpose and Gather (single-core DMA kernels) with runs around their UB chunk."""
    from onnx import numpy_helper

    probe = {"concat": _model("Concat", [[2, 1 << 20], [2, 5]], [2, (1 << 20) + 5], axis=1),
             "transpose": _model("Transpose", [[2, 3, 1 << 20]], [3, 2, 1 << 20], perm=[1, 0, 2]),
             "gather": _model("Gather", [[2, 1 << 20]], [3, 1 << 20], inits=[numpy_helper.from_array(
                 np.array([1, 0, 1], np.int64), "i")], axis=0)}
    c = {k: _chunk(m, mode, k) for k, m in probe.items()}
    for n in _around(1, c["concat"]):
        _check(_model("Concat", [[2, n], [2, 5]], [2, n + 5], axis=1), mode)
    for n in _around(1, c["transpose"]):
        _check(_model("Transpose", [[2, 3, n]], [3, 2, n], perm=[1, 0, 2]), mode)
    for n in _around(1, c["gather"]):
        idx = numpy_helper.from_array(np.array([1, 0, 1], np.int64), "i")
        _check(_model("Gather", [[2, n]], [3, n], inits=[idx], axis=0), mode)
    # whole C0 blocks (block_concat): position tiles around a round of the cores
    c = _chunk(_model("Concat", [[1, 16, 1, 4096], [1, 5, 1, 4096]], [1, 21, 1, 4096], axis=1), mode, "concat",
               key="positions")
    for hw in _around(CORES, c) + _around(1, 16):
        _check(_model("Concat", [[1, 16, 1, hw], [1, 5, 1, hw]], [1, 21, 1, hw], axis=1), mode)
    # an input starting inside a C0 block: the channel gather (shuffle.py), tiles of positions
    p = _chunk(_model("Concat", [[1, 5, 1, 4096], [1, 16, 1, 4096]], [1, 21, 1, 4096], axis=1), mode, "concat",
               key="positions")
    for hw in _around(CORES, p) + _around(1, 16):
        _check(_model("Concat", [[1, 5, 1, hw], [1, 16, 1, hw]], [1, 21, 1, hw], axis=1), mode)


@pytest.mark.parametrize("mode", MODES)
def test_global_average_pool_plane_rounds(mode):
    """Groups of whole planes around one and two rounds of the cores (a partial last group), and
    planes split over the cores (fewer planes than cores: float32 partial sums, a second kernel)."""
    for c1 in (CORES - 1, CORES, CORES + 1, 2 * CORES + 1, 3 * CORES - 1):
        _check(_model("GlobalAveragePool", [[1, 16 * c1 - 3, 3, 5]], [1, 16 * c1 - 3, 1, 1]), mode, scale=4)
    for c1, hw in ((1, 256 * CORES), (3, 256 * CORES + 16), (CORES // 2 + 1, 2048), (2, 89 * 89)):
        _check(_model("GlobalAveragePool", [[1, 16 * c1, 1, hw]], [1, 16 * c1, 1, 1]), mode, scale=math.sqrt(hw))


@pytest.mark.parametrize("mode", MODES)
def test_softmax_long_row_rounds(mode):
    """Rows longer than one UB chunk (three chunked passes each) over more rows than cores."""
    c = _chunk(_model("Softmax", [[2, 1 << 20]], [2, 1 << 20], axis=-1), mode, "softmax")
    for cols in (c + 1, 2 * c + 5):
        _check(_model("Softmax", [[CORES + 1, cols]], [CORES + 1, cols], axis=-1), mode, scale=cols)
