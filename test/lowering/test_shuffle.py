"""Channel shuffle in NC1HWC0 (cann/lowering/shuffle.py, graph.channel_shuffle from the
graph-channel-shuffle pass): numerics against onnxruntime over group counts 2, 3, 4, 8, channel counts
not a multiple of 16, position counts not a multiple of 16, a batch of 2, both precision modes, race
checker on; the kernel moves whole bursts (no single-element DMA) and no ND transpose is left."""

import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from cann.hw import isa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from conftest import compile_checked  # noqa: E402

TOL = {"force_fp16": 1e-2, "must_keep_origin_dtype": 1e-5}


def shuffle_model(n, c, h, w, g, conv=True):
    """[n, c, h, w] -> (1x1 Conv c -> c) -> Reshape [n, g, c/g, h, w] -> Transpose -> Reshape [n, c, h, w]."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(np.array([n, g, c // g, h, w], np.int64), "s1"),
             numpy_helper.from_array(np.array([n, c, h, w], np.int64), "s2")]
    nodes = []
    src = "x"
    if conv:
        inits.append(numpy_helper.from_array((rng.standard_normal((c, c, 1, 1)) / np.sqrt(c)).astype(np.float32), "w"))
        nodes.append(helper.make_node("Conv", ["x", "w"], ["cv"]))
        src = "cv"
    nodes += [helper.make_node("Reshape", [src, "s1"], ["a"]),
              helper.make_node("Transpose", ["a"], ["b"], perm=[0, 2, 1, 3, 4]),
              helper.make_node("Reshape", ["b", "s2"], ["y"])]
    gr = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, c, h, w])],
                           [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, c, h, w])], inits)
    m = helper.make_model(gr, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


CASES = {
    "g2-c24-8x8": (1, 24, 8, 8, 2),
    "g3-c24-7x7-b2": (2, 24, 7, 7, 3),
    "g4-c136-28x28": (1, 136, 28, 28, 4),  # ShuffleNet's stage 2
    "g4-c68-14x14-b2": (2, 68, 14, 14, 4),  # 196 positions: a partial last group of 16
    "g8-c40-5x9": (1, 40, 5, 9, 8),
    "g8-c256-3x3": (1, 256, 3, 3, 8),  # whole C1 blocks, one partial group per core
    "g1-c20-4x4": (1, 20, 4, 4, 1),  # the identity
}


@pytest.mark.parametrize("precision_mode", TOL)
@pytest.mark.parametrize("case", CASES)
def test_channel_shuffle_matches_onnxruntime(case, precision_mode):
    compiled, tilings = compile_checked(shuffle_model(*CASES[case]), precision_mode, TOL[precision_mode])
    assert "channel_shuffle_0" in tilings, tilings
    assert not any(k.startswith("transpose") for k in tilings), tilings


@pytest.mark.parametrize("precision_mode", TOL)
def test_channel_shuffle_of_a_model_input(precision_mode):
    # the input arrives in ND: converted once, then shuffled in NC1HWC0
    compile_checked(shuffle_model(2, 48, 6, 6, 4, conv=False), precision_mode, TOL[precision_mode])


def test_channel_shuffle_moves_no_single_elements():
    import cann

    model = shuffle_model(1, 136, 28, 28, 4)
    compiled = cann.compile(model, precision_mode="force_fp16")
    kernels = {k.name: k for k in compiled.om.kernels}
    k = next(v for n, v in kernels.items() if n.startswith("channel_shuffle"))
    dma = [i for i in isa.decode(k.code) if i.defn.group == "dma"]
    assert dma and all(i.values[4] >= 32 * 16 for i in dma), [i.asm() for i in dma if i.values[4] < 512]
    assert any(i.defn.mnemonic == "vtranspose" for i in isa.decode(k.code))


def concat_model(n, cs, h, w):
    """Concat over channels of 1x1 Convs of one input [n, 8, h, w] (NC1HWC0 producers) with ``cs`` channels."""
    rng = np.random.default_rng(1)
    inits, nodes, outs = [], [], []
    for k, c in enumerate(cs):
        inits.append(numpy_helper.from_array((rng.standard_normal((c, 8, 1, 1)) / 3).astype(np.float32), f"w{k}"))
        nodes.append(helper.make_node("Conv", ["x", f"w{k}"], [f"c{k}"]))
        outs.append(f"c{k}")
    nodes.append(helper.make_node("Concat", outs, ["y"], axis=1))
    gr = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, 8, h, w])],
                           [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, sum(cs), h, w])], inits)
    m = helper.make_model(gr, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("precision_mode", TOL)
@pytest.mark.parametrize("cs,n,h,w", [((136, 136), 1, 14, 14),  # ShuffleNet's stage 3
                                      ((3, 20, 9), 2, 5, 7), ((16, 5, 32), 1, 6, 6)])
def test_unaligned_concat_matches_onnxruntime(cs, n, h, w, precision_mode):
    compiled, tilings = compile_checked(concat_model(n, cs, h, w), precision_mode, TOL[precision_mode])
    assert tilings["concat_0"].get("positions"), tilings["concat_0"]  # the channel gather, not element bursts


@pytest.mark.parametrize("precision_mode", TOL)
@pytest.mark.parametrize("cs,n,h,w", [((16, 32, 7), 1, 5, 5), ((112, 24), 2, 28, 28)])  # ShuffleNet's stage 2
def test_aligned_concat_is_dma_only_over_the_cores(cs, n, h, w, precision_mode):
    import cann

    model = concat_model(n, cs, h, w)
    compile_checked(model, precision_mode, TOL[precision_mode])
    compiled = cann.compile(model, precision_mode=precision_mode)
    k = next(k for k in compiled.om.kernels if k.name.startswith("concat"))
    code = isa.decode(k.code)
    assert not any(i.defn.group == "transpose" or i.defn.pipe == isa.Pipe.V for i in code)  # whole blocks
    assert all(i.values[4] >= 16 * 16 for i in code if i.defn.group == "dma")
    assert k.block_dim == (1 if h * w <= 64 else 13), k.block_dim  # 784 positions: 64 per core


def test_rank3_channel_shuffle_goes_through_nd():
    import onnx  # noqa: F401

    inits = [numpy_helper.from_array(np.array([2, 3, 4, 5], np.int64), "s1"),
             numpy_helper.from_array(np.array([2, 12, 5], np.int64), "s2")]
    nodes = [helper.make_node("Reshape", ["x", "s1"], ["a"]),
             helper.make_node("Transpose", ["a"], ["b"], perm=[0, 2, 1, 3]),
             helper.make_node("Reshape", ["b", "s2"], ["y"])]
    gr = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 12, 5])],
                           [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 12, 5])], inits)
    m = helper.make_model(gr, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    _, tilings = compile_checked(m, "must_keep_origin_dtype", 0.0)
    assert "transpose_0" in tilings and "channel_shuffle_0" not in tilings, tilings


def test_channel_concat_of_one_tensor_twice_matches():
    """Regression (ONNX node test test_tile): Tile's Concat of the same tensor at channel offsets
    inside a C0 block gave wrong values through the channel gather; it now takes the ND path."""
    import cann
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, (2, 3, 4, 5))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, (2, 9, 4, 5))
    m = helper.make_model(helper.make_graph([helper.make_node("Concat", ["x", "x", "x"], ["y"], axis=1)], "g", [x], [y]),
                          opset_imports=[helper.make_opsetid("", 13)])
    a = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)
    out = cann.compile(m, precision_mode="must_keep_origin_dtype").run({"x": a})["y"]
    np.testing.assert_array_equal(out, np.concatenate([a, a, a], axis=1))
