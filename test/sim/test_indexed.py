"""The data-dependent addressing and select instructions (ld_idx, copy_gm_to_ub_reg, vsel):
semantics, costs, race footprints, operand checks and error cases."""

from __future__ import annotations

import numpy as np
import pytest

from cann.dialects.ascend import make_op
from cann.dialects.ascend.checks import instr_error
from cann.hw import isa
from cann.hw.config import load_soc
from cann.passes.ascend_insert_sync import insert_barriers
from cann.sim.core import AICore, SimError
from cann.sim.cost import CostModel

SPEC = load_soc("Ascend910")
L, B = SPEC.latency, SPEC.bandwidth
GM = 1 << 16


def run(prog, gm=None, args=(0, 4096), checks="error"):
    core = AICore(SPEC)
    gm = np.zeros(GM, np.uint8) if gm is None else gm
    return core, core.run(prog, gm, args, "k", checks=checks)


def put(core, off, arr):
    b = np.frombuffer(np.ascontiguousarray(arr).tobytes(), np.uint8)
    core.bufs["ub"][off:off + b.size] = b


def barrier():
    return isa.make("pipe_barrier", pipe=int(isa.Pipe.ALL))


@pytest.mark.parametrize("dt,code", [(np.int32, 0), (np.int64, 1)])
def test_gather_rows_by_register(dt, code):
    table = np.arange(10 * 16, dtype=np.float32).reshape(10, 16)
    gm = np.zeros(GM, np.uint8)
    gm[4096:4096 + table.nbytes] = table.view(np.uint8).reshape(-1)
    idx = np.array([3, -1, 0], dt)  # -1 wraps to 9
    gm[:idx.nbytes] = idx.view(np.uint8)
    prog = [isa.make("copy_gm_to_ub", dst=0, src_arg=0, src=0, nburst=1, burst=idx.nbytes), barrier()]
    for j in range(3):
        prog += [isa.make("ld_idx", reg=j, dtype=code, src=j * idx.itemsize, bound=10), barrier(),
                 isa.make("copy_gm_to_ub_reg", dst=1024 + j * 64, src_arg=1, src=0, nburst=1, burst=64,
                          reg=j, reg_stride=64), barrier()]
    core, st = run(prog, gm)
    got = core.bufs["ub"][1024:1024 + 3 * 64].view(np.float32).reshape(3, 16)
    np.testing.assert_array_equal(got, table[[3, 9, 0]])
    assert core.regs[:3] == [3, 9, 0]
    assert st.gm_read_bytes == idx.nbytes + 3 * 64


def test_out_of_range_index_is_an_error_naming_it():
    core = AICore(SPEC)
    put(core, 0, np.array([7], np.int64))
    with pytest.raises(SimError, match=r"instruction 0 `ld_idx reg=0, dtype=1, src=0, bound=5`.*index 7 out of range"):
        core.run([isa.make("ld_idx", reg=0, dtype=1, src=0, bound=5)], np.zeros(GM, np.uint8), (0,), "k")
    put(core, 0, np.array([-6], np.int32))
    with pytest.raises(SimError, match=r"index -6 out of range \[-5, 4\]"):
        core.run([isa.make("ld_idx", reg=0, dtype=0, src=0, bound=5)], np.zeros(GM, np.uint8), (0,), "k")


@pytest.mark.parametrize("fields,msg", [
    (dict(reg=32, dtype=0, src=0, bound=5), "reg"),
    (dict(reg=0, dtype=2, src=0, bound=5), "dtype"),
    (dict(reg=0, dtype=1, src=4, bound=5), "aligned"),
    (dict(reg=0, dtype=0, src=0, bound=0), "bound"),
])
def test_ld_idx_field_errors(fields, msg):
    core = AICore(SPEC)
    with pytest.raises(SimError, match=msg):
        core.run([isa.make("ld_idx", **fields)], np.zeros(GM, np.uint8), (0,), "k")


def test_register_copy_never_reads_outside_gm():
    core = AICore(SPEC)
    core.regs[0] = 10**6
    with pytest.raises(SimError, match="outside the global-memory arena"):
        core.run([isa.make("copy_gm_to_ub_reg", dst=0, src_arg=0, src=0, nburst=1, burst=32, reg=0,
                           reg_stride=64)], np.zeros(GM, np.uint8), (0,), "k")


def test_operand_checks():
    assert instr_error(isa.BY_MNEMONIC["ld_idx"], (40, 0, 0, 5)).startswith("reg must be in 0..31")
    assert "dtype" in instr_error(isa.BY_MNEMONIC["ld_idx"], (0, 3, 0, 5))
    assert "bound" in instr_error(isa.BY_MNEMONIC["ld_idx"], (0, 0, 0, 0))
    d = isa.BY_MNEMONIC["copy_gm_to_ub_reg"]
    assert "reg_stride" in instr_error(d, (0, 0, 0, 1, 32, 0, 0, 0, -1))
    assert "burst" in instr_error(d, (0, 0, 0, 1, 0, 0, 0, 0, 1))
    v = isa.BY_MNEMONIC["vsel"]
    assert "mask" in instr_error(v, (0, 0, 0, 0, 0, 1, 129, 1, 1, 1, 1, 8, 8, 8, 8))
    assert instr_error(v, (0, 0, 0, 0, 0, 1, 128, 1, 1, 1, 1, 8, 8, 8, 8)) is None
    with pytest.raises(Exception, match="reg"):
        make_op("ld_idx", reg=99, dtype=0, src=0, bound=1).verify()


def test_costs():
    cm = CostModel(SPEC)
    assert cm.cost(isa.make("ld_idx", reg=0, dtype=1, src=0, bound=5)) == L.scalar
    c = isa.make("copy_gm_to_ub_reg", dst=0, src_arg=0, src=0, nburst=2, burst=128, src_stride=128,
                 dst_stride=128, reg=0, reg_stride=64)
    plain = isa.make("copy_gm_to_ub", dst=0, src_arg=0, src=0, nburst=2, burst=128, src_stride=128, dst_stride=128)
    assert cm.cost(c) == cm.cost(plain) == L.mte_startup + -(-256 // B.gm_to_ub) + L.burst_overhead
    s = isa.make("vsel", dtype=0, repeat=3, mask=128, dst_rep=8, cond_rep=8, src0_rep=8, src1_rep=8, dst_blk=1,
                 cond_blk=1, src0_blk=1, src1_blk=1)
    assert cm.cost(s) == L.vector_startup + 3 * SPEC.vector.cycles_per_repeat


@pytest.mark.parametrize("dt,code", [(np.float16, 0), (np.float32, 1)])
def test_vsel(dt, code):
    n = 300
    rng = np.random.default_rng(0)
    cond = (rng.random(n) < 0.5).astype(dt)
    a = rng.standard_normal(n).astype(dt)
    b = np.full(n, -np.inf, dt)
    core = AICore(SPEC)
    isz = np.dtype(dt).itemsize
    put(core, 0, cond), put(core, 4096, a), put(core, 8192, b)
    lanes = 256 // isz
    prog, pos = [], 0
    while pos < n:
        m = min(lanes, n - pos)
        prog.append(isa.make("vsel", dtype=code, dst=12288 + pos * isz, cond=pos * isz, src0=4096 + pos * isz,
                             src1=8192 + pos * isz, repeat=1, mask=m, dst_blk=1, cond_blk=1, src0_blk=1, src1_blk=1,
                             dst_rep=8, cond_rep=8, src0_rep=8, src1_rep=8))
        pos += m
    core.run(prog, np.zeros(GM, np.uint8), (0,), "k")
    got = core.bufs["ub"][12288:12288 + n * isz].view(dt)
    np.testing.assert_array_equal(got, np.where(cond != 0, a, b))


def test_race_checker_sees_index_read_and_register():
    # MTE2 writes the index buffer, S reads it without a barrier: a race on UB
    prog = [isa.make("copy_gm_to_ub", dst=0, src_arg=0, src=0, nburst=1, burst=32),
            isa.make("ld_idx", reg=0, dtype=1, src=0, bound=5)]
    with pytest.raises(SimError, match=r"data race .* UB \[0, 8\)"):
        run(prog)
    # S writes the register, MTE2 reads it without a barrier: a race on the scalar register
    prog = [isa.make("ld_idx", reg=2, dtype=1, src=0, bound=5),
            isa.make("copy_gm_to_ub_reg", dst=256, src_arg=1, src=0, nburst=1, burst=32, reg=2, reg_stride=32)]
    with pytest.raises(SimError, match=r"data race .* SREG \[16, 24\)"):
        run(prog)
    # the footprint of the indexed copy is the GM bytes it really read (register 3 * 32)
    core = AICore(SPEC)
    put(core, 0, np.array([3], np.int64))
    prog = [isa.make("ld_idx", reg=0, dtype=1, src=0, bound=5), barrier(),
            isa.make("copy_gm_to_ub_reg", dst=256, src_arg=1, src=0, nburst=1, burst=32, reg=0, reg_stride=32),
            isa.make("copy_ub_to_gm", dst_arg=1, dst=0, src=512, nburst=1, burst=32)]  # GM [4096, 4128): no overlap
    core.run(prog, np.zeros(GM, np.uint8), (0, 4096), "k")
    prog[-1] = isa.make("copy_ub_to_gm", dst_arg=1, dst=96, src=512, nburst=1, burst=32)  # the bytes read
    with pytest.raises(SimError, match=r"data race .* GM \[4192, 4224\)"):
        core.run(prog, np.zeros(GM, np.uint8), (0, 4096), "k")


def test_insert_sync_orders_the_scalar_pipe():
    from cann.dialects.ascend import KernelOp, instr_to_op

    prog = [isa.make("copy_gm_to_ub", dst=0, src_arg=0, src=0, nburst=1, burst=32),
            isa.make("ld_idx", reg=0, dtype=1, src=0, bound=5),
            isa.make("copy_gm_to_ub_reg", dst=256, src_arg=1, src=0, nburst=1, burst=32, reg=0, reg_stride=32),
            isa.make("copy_ub_to_gm", dst_arg=1, dst=512, src=256, nburst=1, burst=32)]
    k = KernelOp("k", 1, 2, [instr_to_op(i) for i in prog])
    assert insert_barriers(k) == 4  # MTE2 -> S -> MTE2 -> MTE3, and the final barrier
    from cann.dialects.ascend import op_to_instr

    synced = [op_to_instr(o) for o in k.instructions]
    core = AICore(SPEC)
    gm = np.zeros(GM, np.uint8)
    gm[:8] = np.array([4], np.int64).view(np.uint8)
    core.run(synced, gm, (0, 4096), "k")  # race-free
