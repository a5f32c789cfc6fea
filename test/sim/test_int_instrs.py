"""Integer and bool instructions of the simulator: vcmpv, the rounding vconv, bitwise ops and the
integer dtypes of the vector group, against loop-based references; their costs and faults."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cann.dialects.ascend.checks import instr_error
from cann.hw import isa
from cann.hw.config import load_soc
from cann.sim.core import AICore, SimError
from cann.sim.cost import CostModel

SPEC = load_soc("Ascend910")
CODE = {np.dtype(d): c for c, d in isa.DTYPES.items()}


def run(prog):
    core = AICore(SPEC)
    gm = np.zeros(1 << 16, np.uint8)
    core.run(prog, gm, (0,), "k", checks="off")
    return core


def put(core, off, arr):
    b = np.frombuffer(np.ascontiguousarray(arr).tobytes(), np.uint8)
    core.bufs["ub"][off:off + b.size] = b


def get(core, off, dt, n):
    dt = np.dtype(dt)
    return core.bufs["ub"][off:off + n * dt.itemsize].view(dt).copy()


def _run_with(inputs, prog):
    core = AICore(SPEC)
    for off, arr in inputs:
        put(core, off, arr)
    core.run(prog, np.zeros(1 << 16, np.uint8), (0,), "k", checks="off")
    return core


@pytest.mark.parametrize("dt", [np.float16, np.float32, np.int32, np.int16, np.int64])
@pytest.mark.parametrize("mode", list(isa.CMP_MODES.values()))
def test_vcmpv(dt, mode):
    dt = np.dtype(dt)
    lanes = SPEC.vector.repeat_bytes // dt.itemsize
    rng = np.random.default_rng(3)
    n, mask = 3, lanes - 3
    a = rng.integers(-3, 4, n * lanes).astype(dt)
    b = rng.integers(-3, 4, n * lanes).astype(dt)
    if dt.kind == "f":
        a[5] = np.nan
    core = _run_with([(0, a), (8192, b)],
                     [isa.make("vcmpv", dtype=CODE[dt], mode=isa.CMP_CODES[mode], dst=16384, src0=0, src1=8192,
                               repeat=n, mask=mask, dst_rep=lanes // 32 or 1, src0_rep=8, src1_rep=8)])
    drep = (lanes // 32 or 1) * 32
    got = np.frombuffer(core.bufs["ub"][16384:16384 + n * drep].tobytes(), np.uint8).reshape(n, drep)
    ops = {"eq": lambda x, y: x == y, "ne": lambda x, y: x != y, "lt": lambda x, y: x < y,
           "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y, "le": lambda x, y: x <= y}
    for r in range(n):
        for e in range(drep):
            if e < mask:
                i = r * lanes + e
                assert got[r, e] == int(bool(ops[mode](a[i], b[i]))), (r, e)
            else:
                assert got[r, e] == 0  # inactive lanes untouched


def _ref_convert(x, ddt, mode):
    if np.dtype(x.dtype).kind == "f" and (ddt.kind in "iu" or ddt == x.dtype):
        out = []
        for v in x.astype(np.float64):
            if math.isnan(v):
                r = 0.0 if ddt.kind != "f" else v
            elif mode == "rint":
                r = float(round(v))  # Python rounds half to even
            elif mode == "round":
                r = math.copysign(math.floor(abs(v) + 0.5), v)
            else:
                r = {"floor": math.floor, "ceil": math.ceil, "trunc": math.trunc}[mode](v) if math.isfinite(v) else v
            if ddt.kind != "f":
                info = np.iinfo(ddt)
                r = min(max(r, info.min), info.max)
                out.append(int(r))
            else:
                out.append(r)
        return np.array(out).astype(ddt)
    return x.astype(ddt)


@pytest.mark.parametrize("pair", sorted(isa.VCONV_PAIRS))
def test_vconv_pairs(pair):
    sc, dc = pair
    sdt, ddt = isa.DTYPES[sc], isa.DTYPES[dc]
    per = SPEC.vector.repeat_bytes // max(sdt.itemsize, ddt.itemsize)
    rng = np.random.default_rng(sc * 7 + dc)
    if sdt.kind == "f":
        x = np.concatenate([rng.uniform(-300, 300, 2 * per - 8), [2.5, -2.5, 0.5, -0.5, 1.5, -0.49999997, 3.7, -3.7]])
        if ddt == np.uint8:
            x = np.abs(x) % 256
    elif sdt == np.uint8:
        x = rng.integers(0, 256, 2 * per)
    elif sdt == np.int64 and ddt == np.int32:
        x = np.concatenate([rng.integers(-2**40, 2**40, 2 * per - 2), [2**31, -2**31 - 1]])
    else:
        x = rng.integers(-2**20, 2**20, 2 * per)
    x = x.astype(sdt)
    for mode in sorted(isa.VCONV_PAIRS[pair]):
        core = _run_with([(0, x)], [isa.make("vconv", src_dtype=sc, dst_dtype=dc, round=mode, dst=8192, src0=0,
                                             repeat=2, mask=per, dst_rep=per * ddt.itemsize // 32,
                                             src0_rep=per * sdt.itemsize // 32)])
        got = get(core, 8192, ddt, 2 * per)
        exp = _ref_convert(x, ddt, isa.ROUND_MODES[mode])
        if sdt == np.int64 and ddt == np.int32:
            exp = (x.astype(np.int64) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
        np.testing.assert_array_equal(got, exp, err_msg=f"{sdt}->{ddt} {isa.ROUND_MODES[mode]}")


def test_vconv_saturates_and_nan():
    x = np.array([1e10, -1e10, np.nan, np.inf, -np.inf, 2.9, -2.9, 0.0], np.float32)
    core = _run_with([(0, x)], [isa.make("vconv", src_dtype=1, dst_dtype=2, round=isa.ROUND_CODES["trunc"],
                                         dst=4096, src0=0, repeat=1, mask=8, dst_rep=8, src0_rep=8)])
    info = np.iinfo(np.int32)
    np.testing.assert_array_equal(get(core, 4096, np.int32, 8),
                                  [info.max, info.min, 0, info.max, info.min, 2, -2, 0])


@pytest.mark.parametrize("mn,fn", [("vand", np.bitwise_and), ("vor", np.bitwise_or), ("vxor", np.bitwise_xor)])
def test_bitwise_int16(mn, fn):
    rng = np.random.default_rng(1)
    a = rng.integers(-2**15, 2**15, 256).astype(np.int16)
    b = rng.integers(-2**15, 2**15, 256).astype(np.int16)
    core = _run_with([(0, a), (1024, b)], [isa.make(mn, dtype=3, dst=2048, src0=0, src1=1024, repeat=2, mask=128,
                                                    dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8,
                                                    src1_rep=8)])
    np.testing.assert_array_equal(get(core, 2048, np.int16, 256), fn(a, b))


@pytest.mark.parametrize("dt,mn", [(dt, mn) for dt in (np.int32, np.int16, np.int64)
                                   for mn in ("vadd", "vsub", "vmax", "vmin", "vmul")
                                   if not (dt is np.int64 and mn == "vmul")])  # no int64 vmul
def test_integer_vector_ops(dt, mn):
    dt = np.dtype(dt)
    lanes = SPEC.vector.repeat_bytes // dt.itemsize
    info = np.iinfo(dt)
    rng = np.random.default_rng(2)
    a = rng.integers(info.min // 2, info.max // 2, lanes, dtype=dt)
    b = rng.integers(info.min // 2, info.max // 2, lanes, dtype=dt)
    core = _run_with([(0, a), (1024, b)], [isa.make(mn, dtype=CODE[dt], dst=2048, src0=0, src1=1024, repeat=1,
                                                    mask=lanes, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8,
                                                    src0_rep=8, src1_rep=8)])
    ref = {"vadd": np.add, "vsub": np.subtract, "vmax": np.maximum, "vmin": np.minimum, "vmul": np.multiply}[mn]
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(get(core, 2048, dt, lanes), ref(a, b))  # two's complement wrap


def test_vsel_and_vdup_on_uint8_and_int32():
    cond = np.array([1, 0] * 32, np.int32)
    a = np.arange(64, dtype=np.int32)
    core = _run_with([(0, cond), (256, a)], [
        isa.make("vdup", dtype=2, dst=512, repeat=1, mask=64, dst_blk=1, dst_rep=8, scalar=-7.0),
        isa.make("vsel", dtype=2, dst=768, cond=0, src0=256, src1=512, repeat=1, mask=64, dst_blk=1, cond_blk=1,
                 src0_blk=1, src1_blk=1, dst_rep=8, cond_rep=8, src0_rep=8, src1_rep=8)])
    np.testing.assert_array_equal(get(core, 768, np.int32, 64), np.where(cond != 0, a, -7))


@pytest.mark.parametrize("ins,msg", [
    (isa.make("vexp", dtype=2, repeat=1, mask=8), "vexp does not compute on int32"),
    (isa.make("vmul", dtype=5, repeat=1, mask=8), "vmul does not compute on int64"),
    (isa.make("vand", dtype=0, repeat=1, mask=8), "vand does not compute on float16"),
    (isa.make("vcmpv", dtype=4, repeat=1, mask=8), "vcmpv does not compute on uint8"),
    (isa.make("vcmpv", dtype=0, mode=9, repeat=1, mask=8), "invalid compare mode 9"),
    (isa.make("vconv", src_dtype=4, dst_dtype=1, repeat=1, mask=8), "no vconv from uint8 to float32"),
    (isa.make("vconv", src_dtype=2, dst_dtype=1, round=2, repeat=1, mask=8), "takes round modes 0=rint, got 2"),
    (isa.make("vconv", src_dtype=1, dst_dtype=2, repeat=1, mask=65), "mask 65 outside [1, 64]"),
    (isa.make("mmad", dtype=2, m=16, k=16, n=16), "the cube and format conversions take float16 / float32 only"),
])
def test_faults(ins, msg):
    with pytest.raises(SimError) as ei:
        run([ins])
    assert msg in str(ei.value)
    assert instr_error(ins.defn, ins.values) is not None  # the dialect verifier rejects it too


def test_costs():
    cm = CostModel(SPEC)
    lat, vec = SPEC.latency, SPEC.vector
    assert cm.cost(isa.make("vadd", dtype=5, repeat=10, mask=32)) == lat.vector_startup + 10 * vec.cycles_per_repeat_int64
    assert cm.cost(isa.make("vadd", dtype=2, repeat=10, mask=64)) == lat.vector_startup + 10 * vec.cycles_per_repeat
    assert cm.cost(isa.make("vcmpv", dtype=5, repeat=3, mask=32)) == lat.vector_startup + 3 * vec.cycles_per_repeat_int64
    assert cm.cost(isa.make("vcmpv", dtype=1, repeat=3, mask=64)) == lat.vector_startup + 3 * vec.cycles_per_repeat
    assert cm.cost(isa.make("vconv", src_dtype=1, dst_dtype=2, repeat=4, mask=64)) == \
        lat.vector_startup + 4 * vec.cycles_per_repeat


def test_encode_decode_roundtrip():
    prog = [isa.make("vcmpv", dtype=1, mode=3, dst=256, src0=0, src1=512, repeat=2, mask=64, dst_rep=2, src0_rep=8,
                     src1_rep=8),
            isa.make("vconv", src_dtype=1, dst_dtype=2, round=4, dst=0, src0=256, repeat=1, mask=64, dst_rep=8,
                     src0_rep=8)]
    assert isa.decode(isa.encode(prog)) == prog
