"""Small-M Gemm / MatMul on the vector unit (cann/lowering/gemv.py) against onnxruntime: M = 1, 2,
7, 15 with K and N not multiples of 16, bias, fused epilogues, transA / transB / alpha / beta,
batch MatMul; the MACs it executes (the vmla lanes: no M padding); the cost choice against the
cube; pinned tilings and their errors."""

import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import cann
from cann import testing

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_gemm_tiling import TOL, compile_pinned, gemm_model  # noqa: E402

LANES = {"force_fp16": 128, "must_keep_origin_dtype": 64}  # elements of one 256 B vector repeat


def run(model, precision_mode, pins=None, out="y"):
    """Compiles ``model`` with ``pins``, runs it against onnxruntime; returns (tilings, last_run)."""
    compiled, tilings = compile_pinned(model, precision_mode, pins)
    x = testing.random_inputs(model)
    ref = testing.run_onnxruntime(model, x)[out]
    y = compiled.run(x)[out]
    assert y.shape == ref.shape
    err = np.linalg.norm(y.astype(np.float64) - ref) / np.linalg.norm(ref)
    assert err <= TOL[precision_mode], err
    return tilings, compiled.last_run


@pytest.mark.parametrize("precision_mode", TOL)
@pytest.mark.parametrize("m,k,n,bias,relu", [
    (1, 300, 1000, True, False),   # a classifier head
    (2, 100, 37, False, True),     # one K chunk (padded), N < 16 x cores, fused Relu
    (7, 500, 90, True, True),
    (15, 77, 50, True, False),
])
def test_small_m_matches_onnxruntime_and_executes_no_m_padding(m, k, n, bias, relu, precision_mode):
    tilings, stats = run(gemm_model(m, k, n, bias, relu), precision_mode, {"gemm_0": {"vector": 1}})
    t = tilings["gemm_0"]
    assert t["vector"] == 1 and t["nt"] % 16 == 0 and t["block_dim"] == min(32, -(-n // t["nt"])), t
    (launch,) = [kk for kk in stats.kernels if kk.name == "gemm_0"]
    lanes = LANES[precision_mode]
    # every vmla lane: M rows x N columns (the last tile compact) x K padded to whole repeats
    assert launch.executed_macs == m * n * -(-k // lanes) * lanes


@pytest.mark.parametrize("precision_mode,k", [("force_fp16", 17000), ("must_keep_origin_dtype", 9000)])
def test_long_k_rolled_and_pinned_tiles(precision_mode, k):
    """133 (fp16) or 141 (fp32) K chunks for 2 rows of A: more vmlas than are unrolled, the loads
    are a hardware loop; pinned 16-column tiles, 3 chunks per load (the last load shorter)."""
    pins = {"nt": 16, "kc": 3}
    tilings, _ = run(gemm_model(2, k, 40, bias=True), precision_mode, {"gemm_0": pins})
    assert {key: tilings["gemm_0"][key] for key in pins} == pins


def gemm_attrs_model(m, k, n, trans_a, trans_b, alpha, beta):
    rng = np.random.default_rng(1)
    b = (rng.standard_normal((n, k) if trans_b else (k, n)) / np.sqrt(k)).astype(np.float32)
    c = rng.standard_normal(n).astype(np.float32)
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=trans_a, transB=trans_b, alpha=alpha, beta=beta,
                            name="gemm")
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT,
                                                                      [k, m] if trans_a else [m, k])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])],
                          [numpy_helper.from_array(b, "b"), numpy_helper.from_array(c, "c")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("precision_mode", TOL)
@pytest.mark.parametrize("trans_a,trans_b,alpha,beta", [(0, 1, 1.0, 1.0), (1, 0, 0.5, 2.0), (1, 1, -1.5, 0.25)])
def test_trans_alpha_beta(trans_a, trans_b, alpha, beta, precision_mode):
    tilings, _ = run(gemm_attrs_model(3, 70, 45, trans_a, trans_b, alpha, beta), precision_mode,
                     {"gemm_0": {"vector": 1}})
    assert tilings["gemm_0"]["vector"] == 1


def residual_model(m, k, n):
    """Relu(Gemm(a, B, C) + r): the Add of a graph input fused as a residual epilogue."""
    rng = np.random.default_rng(2)
    inits = [numpy_helper.from_array((rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32), "b"),
             numpy_helper.from_array(rng.standard_normal(n).astype(np.float32), "c")]
    nodes = [helper.make_node("Gemm", ["a", "b", "c"], ["g"], name="gemm"),
             helper.make_node("Add", ["g", "r"], ["s"], name="add"),
             helper.make_node("Relu", ["s"], ["y"], name="relu")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [m, k]),
                                       helper.make_tensor_value_info("r", TensorProto.FLOAT, [m, n])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("precision_mode", TOL)
def test_fused_residual_add_and_relu(precision_mode):
    tilings, stats = run(residual_model(5, 200, 70), precision_mode, {"gemm_0": {"vector": 1}})
    assert tilings["gemm_0"]["vector"] == 1
    assert [kk.name for kk in stats.kernels if not kk.name.startswith("trans_data")] == ["gemm_0"]


def matmul_model(sa, k, n):
    rng = np.random.default_rng(3)
    g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")], "g",
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT, [*sa, k])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [*sa, n])],
                          [numpy_helper.from_array(rng.standard_normal((k, n)).astype(np.float32), "b")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("precision_mode", TOL)
def test_batch_matmul_with_small_m(precision_mode):
    """[2, 1, 1000] x constant [1000, 300]: one Gemm of M = 2 rows, by the cost rule on the vector unit."""
    tilings, stats = run(matmul_model((2, 1), 1000, 300), precision_mode)
    assert tilings["matmul_0"].get("vector") == 1, tilings["matmul_0"]
    (launch,) = [kk for kk in stats.kernels if kk.name == "matmul_0"]
    lanes = LANES[precision_mode]
    assert launch.executed_macs == 2 * 300 * -(-1000 // lanes) * lanes


@pytest.mark.parametrize("m,k,n,vector", [
    (1, 2048, 1000, True),    # ResNet-50's classifier: streaming B, the vector unit keeps up
    (1, 4096, 4096, True),    # an LLM decode step
    (8, 2048, 1000, False),   # 8 vmlas per B element: vector-bound (simulated 5,561 cycles, the cube 4,563)
    (6, 250, 300, False),     # small: the cube (simulated 387 cycles, the vector unit 586)
    (15, 4096, 4096, False),  # A's 15 rows and the partial sums do not fit UB beside a B tile
    (16, 300, 90, False),     # M = 16: always the cube
])
def test_cost_choice(m, k, n, vector):
    from xdsl.dialects import func

    from cann.compiler import import_model, make_context
    from cann.lowering.convert_graph_to_tile import ConvertGraphToTilePass
    module = import_model(gemm_model(m, k, n))
    ConvertGraphToTilePass(precision_mode="force_fp16", buffers=2).apply(make_context(), module)
    (fn,) = [op for op in module.walk() if isinstance(op, func.FuncOp) and op.sym_name.data == "gemm_0"]
    assert ("vector" in fn.attributes["tile.tiling"].data) == vector


@pytest.mark.parametrize("pins,message", [
    ({"vector": 1}, r"Gemm: tiling vector = 1 needs M < 16 \(M = 16\): the cube runs it$"),
    ({"vector": 3}, r"Gemm: tiling vector = 3 must be 0 or 1$"),
])
def test_vector_pin_errors_on_m16(pins, message):
    with pytest.raises(cann.CannError, match=r"^error: gemm: " + message):
        compile_pinned(gemm_model(16, 300, 90), "force_fp16", {"gemm_0": pins})


@pytest.mark.parametrize("pins,message", [
    ({"nt": 40}, r"Gemm \(vector\): tiling nt = 40 must be a multiple of 16$"),
    ({"kc": 0}, r"Gemm \(vector\): tiling kc = 0 must be positive$"),
    ({"nt": 512, "kc": 8}, r"Gemm \(vector\): tiling kc = 8 with nt = 512 needs \d+ bytes of UB, \d+ available$"),
])
def test_gemv_pin_errors(pins, message):
    with pytest.raises(cann.CannError, match=r"^error: gemm: " + message):
        compile_pinned(gemm_model(1, 300, 1000), "force_fp16", {"gemm_0": pins})


@pytest.mark.parametrize("precision_mode", TOL)
def test_one_chunk_first_load_is_not_segmented_through_the_row_sums(precision_mode):
    """K = 100 (one chunk), 128-column tiles, one round: the kernel's first load group of 32 KiB (B,
    then the vmla and the cadd) is one tile-multi-buffer would segment if its vector ops were all
    elementwise; a cadd (row sums) is not, and the group stays whole."""
    tilings, _ = run(gemm_model(1, 100, 4096, bias=True), precision_mode, {"gemm_0": {"nt": 128, "kc": 1}})
    assert tilings["gemm_0"]["block_dim"] == 32
