"""run_model on tiny hand-built offline models."""

from __future__ import annotations

import numpy as np
import pytest

from cann.codegen.om import IoTensor, Kernel, Launch, OfflineModel, decode_om, encode_om
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
    # 4 active cores x 64 B/cycle < gm_total: no sharing, same time; 4x the GM traffic
    assert k4.cycles == k1.cycles and k4.gm_read_bytes == 4 * k1.gm_read_bytes


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
