"""MatMul on the cube: N-D by a constant (one Gemm), two tensors with broadcast batch dimensions
(B transposed, each batch's B loaded to L0B in the Zn layout), 1-D operands; vs onnxruntime."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import cann
from cann import testing


def _model(sa, sb, const_b):
    rng = np.random.default_rng(0)
    inputs = [helper.make_tensor_value_info("a", TensorProto.FLOAT, list(sa))]
    inits = []
    if const_b:
        inits.append(numpy_helper.from_array(rng.standard_normal(sb).astype(np.float32), "b"))
    else:
        inputs.append(helper.make_tensor_value_info("b", TensorProto.FLOAT, list(sb)))
    out = np.matmul(np.zeros(sa), np.zeros(sb)).shape
    g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")], "g", inputs,
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(out))], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("sa,sb,const_b,cores", [
    ((1, 16, 64), (64, 64), True, 4),        # Keras Dense on a sequence
    ((4, 16, 16), (4, 16, 16), False, 4),    # attention scores: one batch per core
    ((2, 3, 20, 37), (2, 3, 37, 21), False, 6),
    ((2, 3, 20, 37), (37, 21), False, 6),    # B broadcast over the batch
    ((5, 70), (70,), False, 1),               # 1-D B
    ((200, 300), (1, 300, 140), False, 2),   # M and N over several tiles; one batch: N tiles over the cores
])
@pytest.mark.parametrize("precision_mode,tol", [("force_fp16", 1e-2), ("must_keep_origin_dtype", 1e-4)])
def test_matmul_matches_onnxruntime(sa, sb, const_b, cores, precision_mode, tol):
    m = _model(sa, sb, const_b)
    x = testing.random_inputs(m)
    ref = testing.run_onnxruntime(m, x)["y"]
    model = cann.compile(m, precision_mode=precision_mode)
    y = model.run(x)["y"]
    assert y.shape == ref.shape
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) <= tol
    assert max(k.block_dim for k in model.om.kernels if "matmul" in k.name) == cores
