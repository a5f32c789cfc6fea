"""Lockstep execution of a launch's blocks (cann/sim/lockstep.py, AICore.run_lanes) gives exactly what
running the blocks one after another gives: outputs bit for bit, every block's stats; a fault names
its block; blocks writing the same GM bytes keep the sequential (last block wins) result."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import cann
from cann.codegen.om import IoTensor, Kernel, Launch, OfflineModel
from cann.hw import isa
from cann.hw.config import load_soc
from cann.sim import lockstep
from cann.sim.core import AICore, SimError
from cann.sim.executor import run_model

SPEC = load_soc("Ascend910")


@pytest.fixture
def lanes_used(monkeypatch):
    """The lane counts of every AICore.run_lanes call."""
    seen: list[int] = []
    orig = AICore.run_lanes

    def spy(self, instrs, gm, args, names, **kw):
        seen.append(len(args))
        return orig(self, instrs, gm, args, names, **kw)

    monkeypatch.setattr(AICore, "run_lanes", spy)
    return seen


def _stats(run):
    return [[(c.cycles, c.instructions, c.busy_by_pipe, c.busy_full_by_pipe, c.gm_read_bytes, c.gm_write_bytes,
              c.l2_read_bytes, c.serial_cycles, c.executed_macs, c.overflow, c.overflow_op, len(c.program), list(c.program),
              c.timing.start.tolist(), c.timing.end.tolist(), c.timing.pipe.tolist()) for c in k.cores]
            for k in run.kernels]


def _both(model, inputs, monkeypatch):
    """(outputs, stats) with lockstep, then block by block."""
    out = []
    for on in (True, False):
        monkeypatch.setattr(lockstep, "ENABLED", on)
        y = model.run(inputs)
        out.append(({k: v.tobytes() for k, v in y.items()}, _stats(model.last_run), model.last_run.cycles))
    return out


def _conv(cin=16, cout=32, h=28, w=28):
    rng = np.random.default_rng(0)
    wt = (rng.standard_normal((cout, cin, 3, 3)) / 12).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1])
    relu = helper.make_node("Relu", ["c"], ["y"])
    g = helper.make_graph([node, relu], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, cin, h, w])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, cout, h, w])],
                          [numpy_helper.from_array(wt, "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def _add(shape=(64, 4096)):
    g = helper.make_graph([helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Mul", ["s", "a"], ["y"])],
                          "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(shape)) for n in "ab"],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("precision_mode", ["force_fp16", "must_keep_origin_dtype"])
def test_conv_lockstep_equals_block_by_block(precision_mode, monkeypatch, lanes_used):
    model = cann.compile(_conv(), precision_mode=precision_mode)
    x = np.random.default_rng(1).standard_normal((1, 16, 28, 28)).astype(np.float32)
    (y1, s1, c1), (y2, s2, c2) = _both(model, {"x": x}, monkeypatch)
    assert max(k.block_dim for k in model.om.kernels) > 1
    assert max(lanes_used) > 1  # blocks really ran together
    assert y1 == y2 and s1 == s2 and c1 == c2


def test_a_conv_with_stepped_loops_runs_in_lockstep(monkeypatch, lanes_used):
    # its M subtiles are loops with loop_step (on-chip fields only): the GM extents stay static, so
    # every launch runs in lockstep (a loop_step once sent ResNet-50's big convs block by block)
    # a pinned tiling with M-subtile loops (7-row tiles of 392 positions; neither the default rule
    # nor the shipped knowledge base picks one with M-subtile loops for this ResNet-50 shape)
    model = cann.compile(_conv(cin=64, cout=64, h=56, w=56), kb="none",
                         tiling={"conv2d_0": {"n_blocks": 4, "rows": 7, "m_blocks": 8}})
    code = [i for k in model.om.kernels for i in isa.decode(k.code)]
    assert any(i.mnemonic == "loop_step" for i in code)
    plans = []
    orig = lockstep.plan
    monkeypatch.setattr(lockstep, "plan", lambda *a: plans.append(orig(*a)) or plans[-1])
    x = np.random.default_rng(3).standard_normal((1, 64, 56, 56)).astype(np.float32)
    (y1, s1, c1), (y2, s2, c2) = _both(model, {"x": x}, monkeypatch)
    assert plans and all(p is not None for p in plans)
    assert y1 == y2 and s1 == s2 and c1 == c2


def test_elementwise_lockstep_equals_block_by_block(monkeypatch, lanes_used):
    model = cann.compile(_add())
    rng = np.random.default_rng(2)
    inputs = {n: rng.standard_normal((64, 4096)).astype(np.float32) for n in "ab"}
    (y1, s1, c1), (y2, s2, c2) = _both(model, inputs, monkeypatch)
    assert max(lanes_used) > 1
    assert y1 == y2 and s1 == s2 and c1 == c2
    np.testing.assert_allclose(np.frombuffer(y1["y"], np.float32).reshape(64, 4096),
                               (inputs["a"] + inputs["b"]) * inputs["a"], rtol=1e-2, atol=1e-2)


def _rows_model(prog, block_dim, x_rows, y_rows, gm_size=1 << 16):
    return OfflineModel("Ascend910", "force_fp16", (IoTensor("x", (x_rows, 128), "float16", 0),),
                        (IoTensor("y", (y_rows, 128), "float16", 32768),), gm_size, gm_size - 256, b"",
                        (Kernel("k", block_dim, 2, isa.encode(prog)),), (Launch(0, (0, 32768)),))


def _double_rows(in_stride, out_stride):
    """Block b reads row b of x (``in_stride`` bytes per block), doubles it, writes it at
    ``b * out_stride`` of y."""
    return [isa.make("block_offset", arg=0, stride=in_stride), isa.make("block_offset", arg=1, stride=out_stride),
            isa.make("copy_gm_to_ub", dst=0, src_arg=0, src=0, nburst=1, burst=256),
            isa.make("pipe_barrier", pipe=isa.Pipe.ALL),
            isa.make("vmuls", dtype=0, dst=0, src0=0, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1,
                     dst_rep=8, src0_rep=8, src1_rep=8, scalar=2.0),
            isa.make("pipe_barrier", pipe=isa.Pipe.ALL),
            isa.make("copy_ub_to_gm", dst_arg=1, dst=0, src=0, nburst=1, burst=256)]


def test_disjoint_rows_run_in_lockstep(lanes_used):
    x = np.arange(8 * 128, dtype=np.float16).reshape(8, 128) / 64
    out, stats = run_model(_rows_model(_double_rows(256, 256), 8, 8, 8), {"x": x})
    np.testing.assert_array_equal(out["y"], x * np.float16(2))
    assert lanes_used == [8] and len(stats.kernels[0].cores) == 8


def test_overlapping_gm_writes_keep_the_sequential_result(lanes_used):
    # every block writes the same 256 bytes of y: block by block, the last block's row wins
    x = np.arange(8 * 128, dtype=np.float16).reshape(8, 128) / 64
    out, stats = run_model(_rows_model(_double_rows(256, 0), 8, 8, 1), {"x": x})
    np.testing.assert_array_equal(out["y"][0], x[7] * np.float16(2))
    assert lanes_used == [8, 1, 1, 1, 1, 1, 1, 1, 1]  # the guard saw the clash: rerun block by block


def test_reading_another_blocks_output_keeps_the_sequential_result(lanes_used):
    # block b writes y row b and reads y row b - 1 (written by block b - 1 before it, sequentially)
    prog = [isa.make("block_offset", arg=1, stride=256),
            isa.make("copy_gm_to_ub", dst=0, src_arg=1, src=-256, nburst=1, burst=256),
            isa.make("pipe_barrier", pipe=isa.Pipe.ALL),
            isa.make("vadds", dtype=0, dst=0, src0=0, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1,
                     dst_rep=8, src0_rep=8, src1_rep=8, scalar=1.0),
            isa.make("pipe_barrier", pipe=isa.Pipe.ALL),
            isa.make("copy_ub_to_gm", dst_arg=1, dst=0, src=0, nburst=1, burst=256)]
    om = _rows_model(prog, 4, 1, 5)
    om = OfflineModel(om.soc_version, om.precision_mode, om.inputs, om.outputs, om.gm_size, om.weights_offset,
                      om.weights, om.kernels, (Launch(0, (0, 32768 + 256)),))
    out, _ = run_model(om, {"x": np.zeros((1, 128), np.float16)})
    np.testing.assert_array_equal(out["y"][1:, 0], np.float16([1, 2, 3, 4]))  # a running count, as in order
    assert lanes_used[0] == 4 and lanes_used[1:] == [1, 1, 1, 1]


@pytest.mark.parametrize("bad", [3, 5])
def test_gm_fault_names_its_block(bad, lanes_used):
    # 8 blocks read row b of a map of ``bad`` rows: block ``bad`` is the first outside the arena
    x_rows = bad
    gm_size = 32768 + 8 * 256
    prog = _double_rows(256, 256)
    om = _rows_model(prog, 8, x_rows, 8, gm_size)
    om = OfflineModel(om.soc_version, om.precision_mode, om.inputs, om.outputs, gm_size, gm_size - 256, b"",
                      om.kernels, (Launch(0, (gm_size - bad * 256, 32768)),))
    with pytest.raises(SimError) as ei:
        run_model(om, {"x": np.zeros((x_rows, 128), np.float16)})
    assert str(ei.value).startswith(f"error: k[block {bad}]: instruction 2 `copy_gm_to_ub")
    assert "outside the global-memory arena" in str(ei.value)


def test_field_fault_names_the_first_block(lanes_used):
    prog = _double_rows(256, 256)
    prog[4] = isa.make("vmuls", dtype=0, dst=0, src0=0, src1=0, repeat=0, mask=128, dst_blk=1, src0_blk=1,
                       src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=2.0)
    with pytest.raises(SimError) as ei:
        run_model(_rows_model(prog, 8, 8, 8), {"x": np.zeros((8, 128), np.float16)})
    assert str(ei.value).startswith("error: k[block 0]: instruction 4 `vmuls") and "repeat 0 outside" in str(ei.value)


def test_run_lanes_equals_run_per_lane():
    # the same stream on 3 lanes with different GM bases (not evenly spaced) = 3 one-lane runs
    prog = _double_rows(0, 0)[2:]
    gm = np.zeros(8192, np.uint8)
    gm[:4096] = np.random.default_rng(0).integers(0, 255, 4096, dtype=np.uint8) & 0x3F
    bases = [(0, 4096), (1024, 4608), (256, 6144)]
    core = AICore(SPEC, lanes=5)
    got = core.run_lanes(prog, gm, bases, ["a", "b", "c"], lane0=1)
    want = gm.copy()
    for j, args in enumerate(bases):
        AICore(SPEC).run(prog, want, args, "k")
    assert np.array_equal(gm, want)
    assert all(g.instructions == 5 and g.cycles == got[0].cycles for g in got)
    # lanes 1..3 ran (each holds its block's row), lanes 0 and 4 did not
    assert not core.mem["ub"][0].any() and not core.mem["ub"][4].any() and all(core.mem["ub"][j].any() for j in (1, 2, 3))


def test_overflow_found_per_block(monkeypatch, lanes_used):
    # only block 5's row overflows float16 when doubled: its stats (and only its) name instruction 4
    x = np.ones((8, 128), np.float16)
    x[5, 7] = 60000
    res = []
    for on in (True, False):
        monkeypatch.setattr(lockstep, "ENABLED", on)
        with pytest.warns(cann.errors.FloatOverflowWarning, match=r"first at instruction 4 `vmuls`"):
            out, stats = run_model(_rows_model(_double_rows(256, 256), 8, 8, 8), {"x": x})
        res.append((out["y"].tobytes(), [(c.overflow, c.overflow_op) for c in stats.kernels[0].cores], stats.overflow))
    assert lanes_used[0] == 8
    assert res[0] == res[1]
    assert res[0][1] == [(None, None)] * 5 + [(4, "vmuls")] + [(None, None)] * 2


@pytest.mark.parametrize("blocks,dt", [(3, np.uint8), (300, np.uint16)])  # marks: one byte when they fit
def test_guard_marks_bytes_per_block_and_restores(blocks, dt):
    gm = np.arange(1024, dtype=np.uint32).astype(np.uint8)
    before = gm.copy()
    g = lockstep.Guard(gm, [(0, 256), (512, 768)], True, blocks)
    assert g.dt == dt and g.writer[0].dtype == dt
    g.ids = np.array([0, 1], g.dt)
    g.access((0, 512), 512, 0, (64,), (1,), 1, True)  # blocks 0 and 1 write in different regions
    g.access((0, 512), 512, 32, (32,), (1,), 1, False)  # each reads back its own bytes
    g.access((300, 800), 500, 0, (8,), (1,), 1, False)  # outside the regions: not watched
    gm[:256] = gm[512:768] = 7  # the launch writes inside its regions
    g.ids = np.array([2], g.dt)
    g.access((64,), 0, 0, (16,), (1,), 1, True)  # untouched bytes
    for addr, write in ((48, False), (520, True), (56, True)):  # block 0's, block 1's, block 0's and 2's bytes
        with pytest.raises(lockstep.Conflict):
            g.access((addr,), 0, 0, (16,), (1,), 1, write)
    with pytest.raises(lockstep.Conflict):
        g.access((250,), 0, 0, (16,), (1,), 1, False)  # straddles a region's edge
    g.restore()
    assert np.array_equal(gm, before)


def test_mmad_of_lanes_sharing_their_l0a_matrix_equals_each_lane_alone(monkeypatch):
    # lanes 0-1 and 2-3 hold the same L0A bytes (a channel-split conv's cores share their img2col
    # matrix): each run of equal lanes is converted once, and every lane's product is its own
    from cann.sim import mte

    m, k, n = 32, 32, 16
    rng = np.random.default_rng(4)
    a = [rng.standard_normal(m * k).astype(np.float16) for _ in range(2)]
    lanes_a = [a[0], a[0], a[1], a[1]]
    lanes_b = [rng.standard_normal(k * n).astype(np.float16) for _ in range(4)]
    prog = [isa.make("mmad", dtype=0, dst=0, a=0, b=0, m=m, k=k, n=n, init=1)]
    core = AICore(SPEC, lanes=4)
    for j in range(4):
        core.mem["l0a"][j, :m * k * 2] = lanes_a[j].view(np.uint8)
        core.mem["l0b"][j, :k * n * 2] = lanes_b[j].view(np.uint8)
    converted = []
    orig = np.take
    monkeypatch.setattr(mte.np, "take", lambda t, u, **kw: converted.append(u.shape[0]) or orig(t, u, **kw))
    core.run_lanes(prog, np.zeros(64, np.uint8), [(0,)] * 4, list("abcd"), checks="off")
    assert converted[0] == 2  # A: two distinct lanes converted; B: all four
    for j in range(4):
        one = AICore(SPEC)
        one.bufs["l0a"][:m * k * 2] = lanes_a[j].view(np.uint8)
        one.bufs["l0b"][:k * n * 2] = lanes_b[j].view(np.uint8)
        one.run(prog, np.zeros(64, np.uint8), (0,), "k", checks="off")
        assert np.array_equal(core.mem["l0c"][j, :m * n * 4], one.bufs["l0c"][:m * n * 4])


def test_guard_finds_lanes_writing_the_same_untouched_bytes():
    # one lockstep write whose lanes' footprints meet (8 apart, 16 bytes each): a conflict even on
    # bytes nobody touched before; footprints exactly apart (16) mark each lane's bytes as its own
    gm = np.zeros(256, np.uint8)
    g = lockstep.Guard(gm, [(0, 256)])
    g.ids = np.array([0, 1], np.uint16)
    with pytest.raises(lockstep.Conflict):
        g.access((0, 8), 8, 0, (16,), (1,), 1, True)
    g = lockstep.Guard(gm, [(0, 256)])
    g.ids = np.array([0, 1], np.uint16)
    g.access((64, 80), 16, 0, (16,), (1,), 1, True)
    assert (g.writer[0][64:80] == 0).all() and (g.writer[0][80:96] == 1).all()
    g.ids = np.array([1], np.uint16)
    with pytest.raises(lockstep.Conflict):  # block 1 writing block 0's bytes
        g.access((70,), 0, 0, (4,), (1,), 1, True)
