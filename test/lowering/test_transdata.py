"""NCHW <-> NC1HWC0 conversions with whole-row bursts and 16x16 vector transposes
(cann/lowering/transdata.py): values through both conversions against onnxruntime over channel counts
not a multiple of 16, more channels than one UB tile holds (C1 chunks), position counts not a multiple
of 16, a batch of 2, both precision modes, race checker on; no conversion kernel moves single elements."""

import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

import cann
from cann.hw import isa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from conftest import compile_checked  # noqa: E402

TOL = {"force_fp16": 1e-3, "must_keep_origin_dtype": 0.0}


def pool_model(n, c, h, w):
    """[n, c, h, w] -> MaxPool 1x1 (an NC1HWC0 kernel: one conversion in, one out) -> y."""
    gr = helper.make_graph([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[1, 1])], "g",
                           [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, c, h, w])],
                           [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, c, h, w])])
    m = helper.make_model(gr, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


CASES = {
    "c3-224x224": (1, 3, 224, 224),  # a network input
    "c24-7x7-b2": (2, 24, 7, 7),
    "c16-5x5": (1, 16, 5, 5),
    "c40-33x17": (1, 40, 33, 17),  # positions not a multiple of 16 per core
    "c2048-9x9": (1, 2048, 9, 9),  # more rows than one UB tile: C1 chunks
}


@pytest.mark.parametrize("precision_mode", TOL)
@pytest.mark.parametrize("case", CASES)
def test_conversions_match_onnxruntime(case, precision_mode):
    compiled, tilings = compile_checked(pool_model(*CASES[case]), precision_mode, TOL[precision_mode])
    assert any("positions" in t for k, t in tilings.items() if k.startswith("trans_data")), tilings


def test_no_single_element_bursts():
    compiled = cann.compile(pool_model(1, 40, 33, 17), precision_mode="force_fp16")
    convs = [k for k in compiled.om.kernels if k.name.startswith("trans_data")]
    assert len(convs) == 2
    for k in convs:
        code = isa.decode(k.code)
        dma = [i for i in code if i.defn.group == "dma"]
        # the smallest burst is a row of one core's positions (>= 16 elements)
        assert all(i.values[4] >= 16 * 2 for i in dma), [i.asm() for i in dma]
        assert any(i.defn.mnemonic == "vtranspose" for i in code)
