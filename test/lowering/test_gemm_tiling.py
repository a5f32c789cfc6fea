"""The GEMM kernel's 2-D split (cann/lowering/gemm.py): numerics against onnxruntime for ragged
shapes (M, K, N not multiples of 16, M = 1, N narrower than 16 x cores) in both precision modes,
with a bias and a fused epilogue; the core grid chosen for a few shapes; pinned tilings; pins
beyond the cores or buffers are one-line errors naming the kernel."""

import json

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from xdsl.dialects import func
from xdsl.passes import PassPipeline

import cann
from cann import testing
from cann.codegen.offline import build_offline_model
from cann.compiler import import_model, make_context, stage_pipelines
from cann.hw import isa
from cann.lowering.convert_graph_to_tile import ConvertGraphToTilePass
from cann.passes import ALL_PASSES
from cann.runtime import Model

TOL = {"force_fp16": 1e-2, "must_keep_origin_dtype": 1e-4}


def compile_pinned(model, precision_mode, pins=None):
    """Compile like ``cann.compile`` (-O1) with kernel tilings pinned; returns (Model, {kernel: tiling})."""
    module = import_model(model)
    ctx = make_context()
    (_, graph), (_, tile_stage), (_, ascend) = stage_pipelines("Ascend910", precision_mode, 1, kb="none")  # the default rule, not the shipped knowledge base
    PassPipeline.parse_spec(ALL_PASSES, graph).apply(ctx, module)
    ConvertGraphToTilePass(precision_mode=precision_mode, tiling=json.dumps(pins or {}), buffers=2).apply(ctx, module)
    tilings = {op.sym_name.data: {k: v.value.data for k, v in op.attributes["tile.tiling"].data.items()}
               for op in module.walk() if isinstance(op, func.FuncOp) and "tile.tiling" in op.attributes}
    PassPipeline.parse_spec(ALL_PASSES, tile_stage.split(",", 1)[1]).apply(ctx, module)
    PassPipeline.parse_spec(ALL_PASSES, ascend).apply(ctx, module)
    return Model(build_offline_model(module)), tilings


def gemm_model(m, k, n, bias=False, relu=False, seed=0):
    """Gemm(A [m, k], constant B [k, n] (+ constant C [n])), optionally followed by a Relu."""
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array((rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32), "b")]
    ins = ["a", "b"]
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(n).astype(np.float32), "c"))
        ins.append("c")
    nodes = [helper.make_node("Gemm", ins, ["g" if relu else "y"], name="gemm")]
    if relu:
        nodes.append(helper.make_node("Relu", ["g"], ["y"], name="relu"))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [m, k])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def check(model, precision_mode, pins=None):
    """Runs ``model`` compiled with ``pins`` against onnxruntime; returns the gemm kernel's tiling."""
    compiled, tilings = compile_pinned(model, precision_mode, pins)
    x = testing.random_inputs(model)
    ref = testing.run_onnxruntime(model, x)["y"]
    y = compiled.run(x)["y"]
    assert y.shape == ref.shape
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) <= TOL[precision_mode]
    return next(t for name, t in tilings.items() if name.startswith("gemm"))


@pytest.mark.parametrize("precision_mode", TOL)
@pytest.mark.parametrize("m,k,n,bias,relu", [
    (1, 300, 1000, True, False),     # M = 1 (a classifier head)
    (37, 50, 21, True, True),        # everything ragged, N < 16 x cores, fused relu
    (130, 200, 70, False, False),    # M just over 128
    (300, 1000, 260, True, False),   # several L0C tiles and K chunks per core
    (17, 4100, 33, False, True),     # long K: chunked in L1
])
def test_gemm_matches_onnxruntime(m, k, n, bias, relu, precision_mode):
    # M < 16 is pinned to the cube (the vector GEMV, cann/lowering/gemv.py, has test_gemv.py)
    t = check(gemm_model(m, k, n, bias, relu), precision_mode, {"gemm_0": {"vector": 0}} if m < 16 else None)
    assert t["block_dim"] == t["m_blocks"] * t["n_blocks"] <= 32
    assert t["sm"] * t["m_blocks"] >= m and t["sn"] * t["n_blocks"] >= n


@pytest.mark.parametrize("m,k,n,grid", [
    (512, 768, 768, (8, 4)),      # BERT-base: blocks of 64 x 192 in 64-wide N tiles reading A once (a_panel)
    (2048, 2048, 2048, (4, 8)),   # 512 x 256 blocks in two 256 x 256 accumulators (the whole L0C)
    (1, 1024, 1000, (1, 32)),     # one row: 63 column blocks of 16 in pairs over 32 cores (2,243 simulated
                                  # cycles; 3 each over 21 cores, the earlier model's pick: 2,278)
])
def test_grid_of_the_suite(m, k, n, grid):
    _, tilings = compile_pinned(gemm_model(m, k, n), "force_fp16", {"gemm_0": {"vector": 0}} if m < 16 else None)
    t = tilings["gemm_0"]
    assert (t["m_blocks"], t["n_blocks"]) == grid, t
    assert t["block_dim"] == grid[0] * grid[1]
    assert t["sm"] == 16 * -(-(-(-m // 16)) // grid[0])


@pytest.mark.parametrize("pins", [
    {"m_blocks": 2, "n_blocks": 3},
    {"m_blocks": 1, "n_blocks": 1, "m": 32, "n": 48, "k": 32, "step_k": 2},
    {"block_dim": 4},
    {"n": 16, "m": 128},               # the old N-only split's tile shape
    {"sm": 48, "sn": 48},              # block sizes pin the block counts giving them (3 x 2)
    # the A panel: 3 tile rows (the panel refilled per row) x 3 N tiles reading it, 3 ragged K chunks
    {"m_blocks": 1, "n_blocks": 1, "m": 48, "n": 32, "k": 64, "step_k": 2, "a_panel": 1},
    {"m_blocks": 2, "n_blocks": 1, "n": 16, "a_panel": 1},
])
def test_pinned_tilings(pins):
    t = check(gemm_model(100, 300, 90, bias=True), "force_fp16", {"gemm_0": pins})
    assert {k: t[k] for k in pins if k != "block_dim"} == {k: v for k, v in pins.items() if k != "block_dim"}
    assert t["block_dim"] <= pins.get("block_dim", 32)


@pytest.mark.parametrize("pins,message", [
    ({"m_blocks": 8, "n_blocks": 8}, r"Gemm: tiling m_blocks = 8 x n_blocks = 8 needs 64 cores, 32 available"),
    ({"m": 256, "n": 512}, r"Gemm: tiling m = 256, n = 512 needs 524288 bytes of L0C \(fp32 accumulators\), "
                           r"262144 available"),
    ({"n": 24}, r"Gemm: tiling n = 24 must be a multiple of 16"),
    ({"mm": 2}, r"Gemm: unknown tiling key 'mm'"),
    ({"a_panel": 2}, r"Gemm: tiling a_panel = 2 must be 0 or 1"),
    ({"a_panel": 0, "skew": 1}, r"Gemm: tiling skew = 1 needs the A panel \(a_panel = 1\)"),
    ({"skew": -1}, r"Gemm: tiling skew = -1 must be 0 or more"),
])
def test_pin_errors(pins, message):
    with pytest.raises(cann.CannError, match=r"^error: gemm: " + message):
        compile_pinned(gemm_model(100, 300, 90), "force_fp16", {"gemm_0": pins})


@pytest.mark.parametrize("pins,message", [
    ({"k": 4096, "m": 16, "n": 32}, r"Gemm: tiling k = 4096 with m = 16, n = 32 needs 131072 bytes of L0A and 262144 "
                                    r"of L0B, 65536 / 65536 available$"),
    ({"m": 256, "n": 256, "step_k": 20}, r"Gemm: tiling step_k = 20 with m = 256, n = 256, k = 64 needs 1310720 "
                                         r"bytes of L1, 1048576 available$"),
    ({"sm": 40}, r"Gemm: tiling sm = 40 must be a multiple of 16$"),
    ({"m_blocks": 1, "n_blocks": 1, "m": 112, "n": 96, "k": 64, "step_k": 20, "a_panel": 1},
     r"Gemm: tiling a_panel = 1 with m = 112, n = 96, K = 4000 needs 1141760 bytes of L1, 1048576 available$"),
])
def test_pins_beyond_l0_and_l1_are_errors(pins, message):
    with pytest.raises(cann.CannError, match=r"^error: gemm: " + message):
        compile_pinned(gemm_model(100, 4000, 90), "force_fp16", {"gemm_0": pins})


@pytest.mark.parametrize("precision_mode", TOL)
def test_a_panel_with_bias_and_relu_matches_onnxruntime(precision_mode):
    """A rows kept in L1 across the N tiles of a row (``a_panel``) on a ragged shape with several
    tile rows per core, K chunks and a fused relu: values against onnxruntime."""
    t = check(gemm_model(300, 1000, 260, bias=True, relu=True), precision_mode,
              {"gemm_0": {"m_blocks": 2, "n_blocks": 2, "m": 64, "n": 48, "a_panel": 1}})
    assert t["a_panel"] == 1 and (t["m"], t["n"]) == (64, 48)


@pytest.mark.parametrize("precision_mode", TOL)
@pytest.mark.parametrize("pins", [
    # 2 tile rows x 3 N tiles (the last ragged), 4 K chunks (the last ragged): tiles 1 chunk apart
    {"m_blocks": 2, "n_blocks": 2, "m": 80, "n": 48, "k": 128, "step_k": 2, "a_panel": 1, "skew": 1},
    # 2 chunks apart, a ragged second tile row and third N tile
    {"m_blocks": 2, "n_blocks": 2, "m": 112, "n": 64, "k": 128, "step_k": 2, "a_panel": 1, "skew": 2},
])
def test_skewed_a_panel_matches_onnxruntime(pins, precision_mode):
    """The N tiles of an A panel sharing the K chunks (``skew``: tile j runs chunk c in round c + j *
    skew, in its own accumulator) on a ragged shape with a bias and a fused relu: values against
    onnxruntime, the race checker on."""
    t = check(gemm_model(300, 1000, 260, bias=True, relu=True), precision_mode, {"gemm_0": pins})
    assert {k: t[k] for k in pins} == pins


def test_skew_keeps_mte2_and_the_cube_busy_on_1024_cubed():
    """1024^3 on 32 cores (8 x 4 blocks of 128 x 256, two 128 x 128 tiles reading one A panel): the
    first tile loads A and B, the second B only, so with the tiles one after another MTE2 binds the
    first tile and idles in the second (13,590 cycles, 1.41x core 0's MTE2 busy time of 9,649).
    Interleaved (skew 1, the default pick now) MTE2 runs without a gap until its last load: 12,950
    cycles, 1.34x. The bound: MTE2's stream, then the cube's last two chunks (the cube trails MTE2 by
    one round: 2 x 2 of the core's 16 mmads), then one tile's epilogue (L0C -> UB 260 cycles, ND moves
    160, its 32 KiB to GM 1,033), plus 50 for the pipes' hand-offs: 13,216 here; the tiles one after
    another need more than that."""
    model = gemm_model(1024, 1024, 1024)
    compiled, tilings = compile_pinned(model, "force_fp16")
    t = tilings["gemm_0"]
    assert t["a_panel"] == 1 and t["skew"] == 1, t
    run = compiled.time()
    k = next(k for k in run.kernels if k.name == "gemm_0")
    mte2 = k.cores[0].busy_by_pipe["MTE2"]
    cube = k.cores[0].busy_by_pipe["M"]
    assert k.cycles <= mte2 + 2 * 2 * cube / 16 + (260 + 160 + 1033) + 50, (k.cycles, mte2, cube)
    assert k.cycles < 13_000
    sequential = compile_pinned(model, "force_fp16", {"gemm_0": {**t, "skew": 0}})[0].time()
    assert next(k.cycles for k in sequential.kernels if k.name == "gemm_0") > k.cycles + 500


def test_a_panel_chosen_where_the_epilogue_would_not_overlap():
    """256^3 on 32 cores: one 32 x 64 block per core; the plan cuts it into N tiles reading A
    once (the later tiles' loads overlap the earlier epilogues)."""
    _, tilings = compile_pinned(gemm_model(256, 256, 256), "force_fp16")
    t = tilings["gemm_0"]
    assert t["a_panel"] == 1 and t["n"] < t["sn"], t


def test_recorded_tiling_pinned_back_gives_itself():
    _, tilings = compile_pinned(gemm_model(300, 1000, 260), "force_fp16")
    _, again = compile_pinned(gemm_model(300, 1000, 260), "force_fp16", {"gemm_0": tilings["gemm_0"]})
    assert again["gemm_0"] == tilings["gemm_0"]


def residual_model(m=600, k=200, n=150):
    """Gemm [m, k] x [k, n] + bias, + a residual input r, Relu (fused into one kernel)."""
    rng = np.random.default_rng(3)
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


def test_fused_residual_epilogue_matches_onnxruntime():
    """Gemm + Add of a residual tensor + Relu (one fused kernel: residual tiles read per L0C tile
    column block) on a shape with several L0C tiles and a ragged N."""
    model = residual_model()
    x = testing.random_inputs(model)
    ref = testing.run_onnxruntime(model, x)["y"]
    compiled = cann.compile(model, precision_mode="force_fp16")
    y = compiled.run(x)["y"]
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) <= TOL["force_fp16"]
    assert [k.name for k in compiled.om.kernels if not k.name.startswith("trans_data")] == ["gemm_0"]


@pytest.mark.parametrize("precision_mode", TOL)
@pytest.mark.parametrize("m,k,n,pins", [
    (100, 300, 90, {"k_blocks": 2}),                                  # K 304 in two parts of 160 / 144
    (100, 300, 90, {"k_blocks": 3, "m_blocks": 2, "n_blocks": 3}),    # ragged last part (80, 76 real columns)
    (37, 1000, 21, {"k_blocks": 8, "m_blocks": 1, "n_blocks": 2}),    # ragged M and N blocks, 8 parts
    (64, 640, 96, {"k_blocks": 2, "m_blocks": 1, "n_blocks": 1, "m": 64, "n": 32, "k": 64, "step_k": 2,
                   "a_panel": 1}),                                    # the A panel of a part, 3 N tiles
    (48, 4100, 40, {"k_blocks": 2, "k": 32, "step_k": 1}),           # each part's K chunks a hardware loop
])
def test_k_split_matches_onnxruntime(m, k, n, pins, precision_mode):
    # the K parts add their partial sums into a zeroed output (memset launch, copy_ub_to_gm_add):
    # float32 partial sums rounded to the output dtype once per part
    compiled, tilings = compile_pinned(gemm_model(m, k, n), precision_mode, {"gemm_0": pins})
    t = tilings["gemm_0"]
    assert {key: t[key] for key in pins} == pins
    assert t["block_dim"] == t["m_blocks"] * t["n_blocks"] * t["k_blocks"] <= 32
    assert "memset_0" in tilings
    check(gemm_model(m, k, n), precision_mode, {"gemm_0": pins})
    asm = [ins.defn.mnemonic for kern in compiled.om.kernels if kern.name == "gemm_0" for ins in isa.decode(kern.code)]
    assert "copy_ub_to_gm_add" in asm and "copy_ub_to_gm" not in asm


def test_no_k_split_unless_pinned():
    # the default plan keeps one K range per core: the output is stored, not added, and no memset runs
    compiled, tilings = compile_pinned(gemm_model(128, 3072, 768), "force_fp16")
    assert "k_blocks" not in tilings["gemm_0"] and not any(k.startswith("memset") for k in tilings)


_NEEDS_PLAIN = (r"Gemm: tiling k_blocks > 1 \(a K split summed by atomic adds\) needs a MatMul without bias or "
               r"fused epilogue$")


def test_k_split_needs_a_plain_matmul():
    with pytest.raises(cann.CannError, match=r"^error: gemm: " + _NEEDS_PLAIN):
        compile_pinned(gemm_model(100, 300, 90, bias=True), "force_fp16", {"gemm_0": {"k_blocks": 2}})
    # a fused residual add + relu: refused too (the epilogue is not linear in the partial sums)
    with pytest.raises(cann.CannError, match=_NEEDS_PLAIN):
        cann.compile(residual_model(), precision_mode="force_fp16", kb="none", tiling={"gemm_0": {"k_blocks": 2}})


@pytest.mark.parametrize("pins,message", [
    ({"k_blocks": 20}, r"Gemm: tiling k_blocks = 20 exceeds the 19 K fractals of K = 300$"),
    ({"k_blocks": 4, "m_blocks": 3, "n_blocks": 3}, r"Gemm: tiling m_blocks = 3 x n_blocks = 3 x k_blocks = 4 needs "
                                                    r"36 cores, 32 available$"),
    ({"k_blocks": 0}, r"Gemm: tiling k_blocks = 0 must be positive$"),
])
def test_k_split_pin_errors(pins, message):
    with pytest.raises(cann.CannError, match=r"^error: gemm: " + message):
        compile_pinned(gemm_model(100, 300, 90), "force_fp16", {"gemm_0": pins})


def test_cost_ranks_two_tilings_as_the_simulator_does():
    """256^3: a 4 x 8 grid of 64 x 32 tiles runs 1,187 simulated cycles, a 16 x 2 grid of 16 x 128
    tiles 1,388. The old estimate (streams as a 4-norm plus the first load and the last epilogue added
    whole) put them 1,673 against 1,622, the wrong way: the first load is part of the binding MTE2
    stream, not added to it. gemm._cost as plan() weighs them now orders them as simulated."""
    from cann.lowering import gemm

    fast = {"m_blocks": 4, "n_blocks": 8, "m": 64, "n": 32, "k": 256, "step_k": 1, "a_panel": 0}
    slow = {"m_blocks": 16, "n_blocks": 2, "m": 16, "n": 128, "k": 128, "step_k": 1, "a_panel": 0}
    with gemm.considered() as seen:
        compile_pinned(gemm_model(256, 256, 256), "force_fp16")
    est = {}
    for p in seen:
        for name, pins in (("fast", fast), ("slow", slow)):
            if all(getattr(p, f) == v for f, v in pins.items()):
                est.setdefault(name, p.cycles)
    assert est["fast"] < est["slow"], est
    cycles = {}
    for name, pins in (("fast", fast), ("slow", slow)):
        kernels = compile_pinned(gemm_model(256, 256, 256), "force_fp16", {"gemm_0": pins})[0].time().kernels
        cycles[name] = next(k.cycles for k in kernels if k.name == "gemm_0")
    assert cycles["fast"] < cycles["slow"], cycles


def _mnemonics(compiled, name="gemm_0"):
    return [ins.defn.mnemonic for kern in compiled.om.kernels if kern.name == name for ins in isa.decode(kern.code)]


@pytest.mark.parametrize("precision_mode", TOL)
@pytest.mark.parametrize("m,k,n,pins,one", [
    (64, 300, 96, {"m_blocks": 2, "n_blocks": 3}, True),    # whole 32 x 32 blocks: rows by b // 3, columns by b % 3
    (96, 300, 64, {"m_blocks": 3, "n_blocks": 1}, True),    # one block column: rows by b
    (100, 300, 90, {"m_blocks": 2, "n_blocks": 3}, False),  # ragged last block row and column: a code per row
])
def test_whole_block_rows_run_one_code(m, k, n, pins, one, precision_mode):
    """A grid of whole blocks runs one code on every core (block_offset_div moves the A rows and the
    output by the block row b // n_blocks; block_offset_mod the B columns by b % n_blocks), so the
    L2 model sees a block column's cores read B together; a ragged grid keeps a code per block row.
    Values against onnxruntime either way."""
    check(gemm_model(m, k, n), precision_mode, {"gemm_0": pins})
    asm = _mnemonics(compile_pinned(gemm_model(m, k, n), precision_mode, {"gemm_0": pins})[0])
    assert ("block_if" not in asm) == one
    assert ("block_offset_div" in asm) == (one and pins["n_blocks"] > 1)


def test_one_code_moves_bias_and_residual_with_the_block():
    """Gemm + bias + a residual Add + Relu (fused) on a 2 x 3 grid of whole 64 x 32 blocks: the bias
    moves with the block column, the residual operand with the block row and column (as the output)."""
    model = residual_model(128, 200, 96)
    x = testing.random_inputs(model)
    ref = testing.run_onnxruntime(model, x)["y"]
    compiled, tilings = compile_pinned(model, "force_fp16", {"gemm_0": {"m_blocks": 2, "n_blocks": 3}})
    assert "block_if" not in _mnemonics(compiled) and "block_offset_div" in _mnemonics(compiled)
    y = compiled.run(x)["y"]
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) <= TOL["force_fp16"]


def test_one_code_reads_b_from_hbm_once():
    """Ascend310 (2 cores, an 8 MiB L2): 64 x 2048 x 2048 in float16 reads 8.5 MiB, more than the L2
    holds. Its two block rows each read all of B; running one code they read it together, so each
    byte of A and B comes from HBM once (docs/core-model.md "L2"): with a code per block row the L2
    model would serve the second row's B reads only for the share of the launch's bytes the L2 holds."""
    m, k, n = 64, 2048, 2048
    compiled = cann.compile(gemm_model(m, k, n), soc_version="Ascend310", precision_mode="force_fp16",
                            tiling={"gemm_0": {"m_blocks": 2, "n_blocks": 1}}, kb=False)
    assert "block_if" not in _mnemonics(compiled)
    run = compiled.time()
    launch = next(ls for ls in run.launches if ls.name == "gemm_0")
    # each block reads all of B (one of its 2 reads served by the L2: 8 MiB) and its own A rows
    assert launch.l2_read_bytes == k * n * 2, launch.l2_read_bytes
