"""run_model on tiny hand-built offline models."""

from __future__ import annotations

import numpy as np
import pytest

from cann.codegen.om import IoTensor, Kernel, Launch, LaunchWork, OfflineModel, decode_om, encode_om
from cann.errors import CannError
from cann.hw import isa
from cann.sim.core import SimError
from cann.sim.executor import RunStats, run_model


def _double_model(block_dim: int = 1, weights: bytes = b"", code_extra=()) -> OfflineModel:
    n = 256  # float16 elements = 512 B = 2 repeats
    prog = [
        isa.make("copy_gm_to_ub", dst=0, src_arg=0, src=0, nburst=1, burst=2 * n),
        isa.make("pipe_barrier", pipe=isa.Pipe.ALL),
        isa.make("vmuls", dtype=0, dst=1024, src0=0, repeat=2, mask=128, dst_blk=1, src0_blk=1, dst_rep=8,
                 src0_rep=8, scalar=2.0),
        *code_extra,
        isa.make("pipe_barrier", pipe=isa.Pipe.ALL),
        isa.make("copy_ub_to_gm", dst_arg=1, dst=0, src=1024, nburst=1, burst=2 * n),
    ]
    return OfflineModel(
        soc_version="Ascend910", precision_mode="force_fp16",
        inputs=(IoTensor("x", (2, 128), "float16", 0),), outputs=(IoTensor("y", (2, 128), "float16", 512),),
        gm_size=4096, weights_offset=2048, weights=weights,
        kernels=(Kernel("double", block_dim, 2, isa.encode(prog)),),
        launches=(Launch(0, (0, 512)), Launch(0, (512, 1024))),
    )


def test_run_model_double_twice():
    om = decode_om(encode_om(_double_model()))
    x = np.random.default_rng(0).standard_normal((2, 128)).astype(np.float16)
    out, st = run_model(om, {"x": x})
    assert set(out) == {"y"} and out["y"].dtype == np.float16 and out["y"].shape == (2, 128)
    # second launch doubles y in place into [1024, 1536); the output y is the first launch's result
    np.testing.assert_array_equal(out["y"], x * np.float16(2))
    assert isinstance(st, RunStats) and len(st.kernels) == 2
    assert st.instructions == 10 and st.cycles == sum(k.cycles for k in st.kernels) > 0


@pytest.mark.parametrize("given", [np.float64, np.float32, np.int16, np.uint16, np.bool_])
def test_input_dtype_must_be_the_declared_one(given):
    # as onnxruntime: no silent cast (a float64 array used to be cast, a float32 one refused)
    x = np.ones((2, 128), given)
    with pytest.raises(CannError) as ei:
        run_model(_double_model(), {"x": x})
    assert ei.value.lines() == [f"error: input 'x': dtype mismatch: expected float16, got {np.dtype(given)}"]


@pytest.mark.parametrize("inputs,msg", [
    ({}, "input 'x': missing input"),
    ({"x": np.zeros((2, 128), np.float16), "z": np.zeros(1)}, "input 'z': unknown input"),
    ({"x": np.zeros((128, 2), np.float16)}, "expected (2, 128), got (128, 2)"),
    ({"x": np.zeros((2, 128), np.float32)}, "expected float16, got float32"),
    ({"x": np.zeros((2, 128), np.int64)}, "expected float16, got int64"),
])
def test_bad_inputs(inputs, msg):
    with pytest.raises(CannError) as ei:
        run_model(_double_model(), inputs)
    assert msg in str(ei.value)


def test_block_dim_runs_every_block():
    x = np.random.default_rng(0).standard_normal((2, 128)).astype(np.float16)
    out1, st1 = run_model(_double_model(), {"x": x})
    out4, st4 = run_model(_double_model(block_dim=4), {"x": x})
    np.testing.assert_array_equal(out1["y"], out4["y"])
    k1, k4 = st1.kernels[0], st4.kernels[0]
    assert len(k4.cores) == 4 and k4.instructions == 4 * k1.instructions and k4.block_dim == 4
    # 4 active cores x 64 B/cycle < gm_total: no GM sharing; 4x the GM traffic, but the 4 blocks
    # read the same 512 B: 3/4 of each read comes from the L2 (384 B at 128 B/cycle = 3 cycles, the
    # other 128 B from HBM at 64 B/cycle = 2) instead of 512 B from HBM (8 cycles)
    assert k1.gm_read_bytes == 512 and k1.l2_read_bytes == 0
    assert k4.gm_read_bytes == 4 * 512 and k4.l2_read_bytes == 4 * 384 and k4.hbm_read_bytes == 512
    assert k4.cycles == k1.cycles - 3


def test_block_dim_beyond_the_cores_runs_in_waves():
    x = np.zeros((2, 128), np.float16)
    _, st32 = run_model(_double_model(block_dim=32), {"x": x})
    _, st33 = run_model(_double_model(block_dim=33), {"x": x})
    k32, k33 = st32.kernels[0], st33.kernels[0]
    assert [len(w) for w in k33.waves] == [32, 1]
    assert k33.cycles == k32.cycles + st33.kernels[0].cores[32].cycles


def test_weights_loaded_and_sim_error_located():
    w = np.arange(16, dtype=np.float16).tobytes()
    extra = (isa.make("vadd", dtype=0, dst=0, src0=0, src1=UB_BAD, repeat=1, mask=128, dst_blk=1, src0_blk=1,
                      src1_blk=1),)
    with pytest.raises(SimError, match=r"double: instruction 3 `vadd"):
        run_model(_double_model(weights=w, code_extra=extra), {"x": np.zeros((2, 128), np.float16)})


UB_BAD = 1 << 20


def test_weights_visible_in_gm():
    # a kernel copying the weights to the output
    w = np.arange(256, dtype=np.float16)
    prog = [isa.make("copy_gm_to_ub", dst=0, src_arg=0, src=0, nburst=1, burst=512),
            isa.make("pipe_barrier", pipe=isa.Pipe.ALL),
            isa.make("copy_ub_to_gm", dst_arg=1, dst=0, src=0, nburst=1, burst=512)]
    om = OfflineModel("Ascend910", "force_fp16", (), (IoTensor("y", (256,), "float16", 0),), 4096, 2048,
                      w.tobytes(), (Kernel("k", 1, 2, isa.encode(prog)),), (Launch(0, (2048, 0)),))
    out, _ = run_model(om, {})
    np.testing.assert_array_equal(out["y"], w)


def test_spmd_block_offset_and_guard():
    # 3 cores double 3 rows of 128 fp16 each: core b moves both pointers by b rows; a guarded
    # section runs on core 2 only and scales its row by 3 more
    prog = [isa.make("block_offset", arg=0, stride=256), isa.make("block_offset", arg=1, stride=256),
            isa.make("copy_gm_to_ub", dst=0, src_arg=0, src=0, nburst=1, burst=256),
            isa.make("pipe_barrier", pipe=isa.Pipe.ALL),
            isa.make("vmuls", dtype=0, dst=0, src0=0, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1,
                     dst_rep=8, src0_rep=8, src1_rep=8, scalar=2.0),
            isa.make("block_if", lo=2, hi=3),
            isa.make("vmuls", dtype=0, dst=0, src0=0, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1,
                     dst_rep=8, src0_rep=8, src1_rep=8, scalar=3.0),
            isa.make("block_endif"),
            isa.make("pipe_barrier", pipe=isa.Pipe.ALL),
            isa.make("copy_ub_to_gm", dst_arg=1, dst=0, src=0, nburst=1, burst=256)]
    x = np.arange(3 * 128, dtype=np.float16).reshape(3, 128) / 64
    om = OfflineModel("Ascend910", "force_fp16", (IoTensor("x", (3, 128), "float16", 0),),
                      (IoTensor("y", (3, 128), "float16", 1024),), 2048, 2048, b"",
                      (Kernel("k", 3, 2, isa.encode(prog)),), (Launch(0, (0, 1024)),))
    out, stats = run_model(om, {"x": x})
    np.testing.assert_array_equal(out["y"], x * np.array([[2], [2], [6]], np.float16))
    assert stats.instructions == 2 * 7 + 10  # cores 0 and 1 skip the guarded section


def test_executed_macs_and_ideal_from_the_launch_work():
    # one 32x32x16 mmad per block (padding or not, the simulator counts m*k*n), 3 blocks
    prog = [isa.make("mmad", dtype=0, dst=0, a=0, b=0, m=32, k=32, n=16, init=1)]
    work = LaunchWork(model_macs=4096 * 32 * 5, cube_itemsize=2, compulsory_bytes=1200 * 3)
    om = OfflineModel("Ascend910", "force_fp16", (), (), 64, 0, b"", (Kernel("mm", 3, 0, isa.encode(prog)),),
                      (Launch(0, (), work), Launch(0, ())))
    _, st = run_model(decode_om(encode_om(om)), {})
    k, bare = st.kernels
    assert k.executed_macs == bare.executed_macs == 3 * 32 * 32 * 16 == st.executed_macs // 2
    assert k.work == work and k.model_macs == st.model_macs == 4096 * 32 * 5
    assert k.ideal_cycles == 5 == st.ideal_cycles and bare.ideal_cycles == 0 and bare.ideal_pct == 0
    assert k.ideal_pct == pytest.approx(100 * 5 / k.cycles)
    assert st.ideal_pct == pytest.approx(100 * 5 / (k.cycles + bare.cycles))
    assert k.profile()["model_macs"] == 4096 * 32 * 5 and k.profile()["compulsory_bytes"] == 3600


# -- float overflow detection (CANN's overflow check): inf/NaN from finite operands ---------------


def _square_relu_model():
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("Mul", ["x", "x"], ["y"], name="square"),
                           helper.make_node("Relu", ["y"], ["z"], name="relu")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16])],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 16])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def test_fp16_overflow_warns_naming_the_kernel_and_its_nodes():
    import warnings

    import cann

    x = np.full((2, 16), 300, np.float32)  # 300 * 300 = 90000 > 65504, the largest float16
    model = cann.compile(_square_relu_model(), precision_mode="force_fp16")
    with pytest.warns(cann.FloatOverflowWarning) as rec:
        out = model.run({"x": x})
    assert np.isinf(out["z"]).all()
    assert [str(w.message) for w in rec if issubclass(w.category, cann.CannWarning)] == [
        "kernel 'fused_eltwise_0' (model nodes square, relu): float overflow: launch 1 wrote inf/NaN computed from "
        "finite operands (first at instruction 2 `vmul`); precision_mode force_fp16 computes in float16 (largest finite value 65504): compile with --precision_mode allow_mix_precision (overflowing nodes kept in float32), --keep_dtype FILE (the nodes to keep; cann-compile --calibrate-keep-dtype FILE writes one) or --precision_mode must_keep_origin_dtype (all float32)"]
    assert model.last_run.overflow[0] == "kernel 'fused_eltwise_0' (model nodes square, relu)"
    # must not: values within float16's range, and the same input kept in float32
    with warnings.catch_warnings():
        warnings.simplefilter("error", cann.CannWarning)
        out = model.run({"x": np.full((2, 16), 200, np.float32)})
        np.testing.assert_array_equal(out["z"], np.full((2, 16), 40000, np.float32))
        assert model.last_run.overflow is None
        out = cann.compile(_square_relu_model(), precision_mode="must_keep_origin_dtype").run({"x": x})
        np.testing.assert_array_equal(out["z"], np.full((2, 16), 90000, np.float32))


def test_non_finite_inputs_are_not_an_overflow():
    import warnings

    import cann

    x = np.full((2, 16), np.inf, np.float32)
    model = cann.compile(_square_relu_model(), precision_mode="force_fp16")
    with warnings.catch_warnings():
        warnings.simplefilter("error", cann.CannWarning)
        out = model.run({"x": x})
    assert np.isinf(out["z"]).all() and model.last_run.overflow is None


@pytest.mark.parametrize("dst", [2048, 0])  # out of place; in place (dst = src0)
def test_overflow_found_at_the_instruction_in_place_or_not(dst):
    # x * 2 three times: 10000 -> 20000 -> 40000 -> 80000 (inf in float16) at the third vmuls (instruction 4)
    prog = [isa.make("copy_gm_to_ub", dst=0, src_arg=0, src=0, nburst=1, burst=512),
            isa.make("pipe_barrier", pipe=isa.Pipe.ALL)]
    prog += [isa.make("vmuls", dtype=0, dst=dst, src0=0 if i == 0 else dst, repeat=2, mask=128, dst_blk=1,
                      src0_blk=1, dst_rep=8, src0_rep=8, scalar=2.0) for i in range(3)]
    prog += [isa.make("pipe_barrier", pipe=isa.Pipe.ALL),
             isa.make("copy_ub_to_gm", dst_arg=1, dst=0, src=dst, nburst=1, burst=512)]
    om = OfflineModel("Ascend910", "must_keep_origin_dtype", (IoTensor("x", (2, 128), "float16", 0),),
                      (IoTensor("y", (2, 128), "float16", 512),), 4096, 2048, b"",
                      (Kernel("k", 1, 2, isa.encode(prog)),), (Launch(0, (0, 512)),))
    from cann.errors import FloatOverflowWarning

    with pytest.warns(FloatOverflowWarning) as rec:
        out, stats = run_model(om, {"x": np.full((2, 128), 10000, np.float16)})
    assert np.isinf(out["y"]).all()
    assert stats.overflow == ("kernel 'k'", "float overflow: launch 0 wrote inf/NaN computed from finite operands "
                                            "(first at instruction 4 `vmuls`)")
    assert len(rec) == 1


# -- bounded work: counted from the loop counts before anything is allocated or expanded ------------


def _loop_model(count: int, block_dim: int = 1) -> OfflineModel:
    prog = [isa.make("loop_begin", count=count), isa.make("pipe_barrier", pipe=isa.Pipe.ALL),
            isa.make("pipe_barrier", pipe=isa.Pipe.ALL), isa.make("loop_end")]
    return OfflineModel("Ascend910", "force_fp16", (), (), 4096, 0, b"",
                        (Kernel("spin", block_dim, 0, isa.encode(prog)),), (Launch(0, ()), Launch(0, ())))


@pytest.mark.parametrize("count, block_dim, total", [
    (2**40, 1, 2**41 + 2),           # a hardware loop of 2^40 iterations: refused, never expanded
    (2**20, 4, 4 * (2**21 + 2)),     # the budget counts every block
    (0, 65535, 65535 * 2),           # empty blocks: each costs one (its setup)
])
def test_work_over_the_budget_is_refused_before_running(count, block_dim, total, monkeypatch):
    import time

    monkeypatch.setattr(np, "zeros", lambda *a, **k: pytest.fail("allocated before the budget check"))
    t = time.perf_counter()
    with pytest.raises(CannError) as e:
        run_model(_loop_model(count, block_dim), {}, max_instructions=100_000)
    assert time.perf_counter() - t < 1.0
    assert e.value.lines() == [
        f"error: <model>: the launches up to launch 0 ('spin') execute {total} instructions in {block_dim} blocks, "
        f"over the simulator's budget of 100000 instructions + blocks (docs/om-format.md, \"Running\")"]


def test_budget_sums_launches_and_can_be_raised():
    # 2 launches x (1000 * 2 + 2) = 4004 instructions, in 2 blocks
    with pytest.raises(CannError, match="the launches up to launch 1 \\('spin'\\) execute 4004 instructions in 2 "
                                        "blocks, over the simulator's budget of 4005 "):
        run_model(_loop_model(1000), {}, max_instructions=4005)
    _, stats = run_model(_loop_model(1000), {}, max_instructions=4006)
    assert stats.instructions == 4004


def test_in_memory_model_is_validated_like_a_file():
    # a model built in memory (not read from a file) gets the reader's checks before it runs
    from dataclasses import replace

    bad = _loop_model(-1)
    with pytest.raises(CannError) as e:
        run_model(bad, {})
    assert e.value.lines() == ["error: kernel 'spin': instruction 0: loop_begin count -1 is negative"]
    with pytest.raises(CannError) as e:
        run_model(replace(bad, gm_size=10**12), {})
    assert e.value.lines() == ["error: <model>: inconsistent .om: gm_size 1000000000000 outside [0, 34359738368] "
                               "(the SoC's gm_bytes)"]


def test_arena_the_host_cannot_allocate_is_an_error(monkeypatch):
    def no_memory(shape, dtype=None):
        raise MemoryError

    monkeypatch.setattr(np, "zeros", no_memory)
    with pytest.raises(CannError) as e:
        run_model(_loop_model(1), {})
    assert e.value.lines() == ["error: <model>: cannot allocate the 4096-byte global-memory arena on this host"]


def _unary_model(op: str, shape, *inits):
    from onnx import TensorProto, helper, numpy_helper

    g = helper.make_graph([helper.make_node(op, ["x", *[i.name for i in inits]], ["y"], name="op")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def test_not_overflows_intermediate_inf_division_by_zero_padding():
    # must not warn: an inf that stays on chip (sigmoid's exp(20) > 65504 in float16, result 0); a
    # division by zero (x / 0 = inf, as onnxruntime); 0 / 0 in the padded channels of a per-channel
    # Div (24 channels stored as 32)
    import warnings

    from onnx import numpy_helper

    import cann

    rng = np.random.default_rng(3)
    d = numpy_helper.from_array(rng.uniform(1, 2, (1, 24, 1, 1)).astype(np.float32), "d")
    z = numpy_helper.from_array(np.array([1, 0, 2, 0], np.float32), "z")
    cases = [(_unary_model("Sigmoid", [2, 64]), np.full((2, 64), -20, np.float32), "force_fp16"),
             (_unary_model("Div", [4], z), np.array([1, 2, 3, -4], np.float32), "must_keep_origin_dtype"),
             (_unary_model("Div", [1, 24, 3, 3], d), rng.standard_normal((1, 24, 3, 3)).astype(np.float32),
              "force_fp16")]
    for model, x, pm in cases:
        compiled = cann.compile(model, precision_mode=pm)
        with warnings.catch_warnings():
            warnings.simplefilter("error", cann.CannWarning)
            y = compiled.run({"x": x})["y"]
        assert compiled.last_run.overflow is None
        import onnxruntime as ort

        ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        np.testing.assert_allclose(y, ref, rtol=2e-3, atol=1e-6)


@pytest.mark.parametrize("given", [np.zeros((2, 128), np.float16), [np.zeros((2, 128), np.float16)]])
def test_model_run_takes_a_dict_of_inputs(given):
    # a bare array (or a list, as the ONNX backend's rep.run takes) is a one-line error, not a TypeError
    from cann.runtime import Model

    with pytest.raises(CannError) as ei:
        Model(_double_model()).run(given)
    assert ei.value.lines() == [f"error: Model.run: inputs must be a dict of input name -> array (inputs: x), "
                                f"got {type(given).__name__}"]


def test_a_run_starts_from_zeroed_cores():
    # runs reuse their cores (executor._IDLE) but start from the state of new ones: a kernel copying out
    # UB bytes it never wrote gets zeros, also after a run that left data in the UB
    from cann.sim import executor

    executor._IDLE.clear()  # only this test's cores in the pool (earlier tests leave theirs)
    stale = OfflineModel(
        soc_version="Ascend910", precision_mode="force_fp16",
        inputs=(IoTensor("x", (2, 128), "float16", 0),), outputs=(IoTensor("y", (2, 128), "float16", 512),),
        gm_size=4096, weights_offset=2048, weights=b"", kernels=(Kernel("stale", 1, 2, isa.encode([
            isa.make("copy_ub_to_gm", dst_arg=1, dst=0, src=1024, nburst=1, burst=512)])),),
        launches=(Launch(0, (0, 512)),))
    x = np.ones((2, 128), np.float16)
    assert not run_model(stale, {"x": x})[0]["y"].any()
    np.testing.assert_array_equal(run_model(_double_model(), {"x": x})[0]["y"], x * 2)
    reused = next(iter(executor._IDLE.values()))
    assert reused.mem["ub"][0, 1024:1536].view(np.float16).tolist() == [4.0] * 256  # its second launch's
    assert not run_model(stale, {"x": x})[0]["y"].any()
    assert next(iter(executor._IDLE.values())) is reused
