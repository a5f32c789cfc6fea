"""AI Core simulator: every instruction group against independent (loop-based) numpy references,
the cost formulas, and every error check."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cann.hw import isa
from cann.hw.config import load_soc
from cann.sim.core import AICore, KernelStats, SimError
from cann.sim.vector import _f16_op

SPEC = load_soc("Ascend910")
F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
CODE = {F16: 0, F32: 1}
GM_SIZE = 1 << 20


def run(prog, core=None, gm=None, args=(0,), checks="off"):
    """Functional tests run unsynchronized multi-pipe programs: no race detector (test_timing.py has it)."""
    core = core or AICore(SPEC)
    gm = np.zeros(GM_SIZE, np.uint8) if gm is None else gm
    stats = core.run(prog, gm, args, "k", checks=checks)
    return core, gm, stats


def put(core, buf, off, arr):
    b = np.frombuffer(np.ascontiguousarray(arr).tobytes(), np.uint8)
    core.bufs[buf][off:off + b.size] = b


def get(core, buf, off, dt, n):
    dt = np.dtype(dt)
    return core.bufs[buf][off:off + n * dt.itemsize].view(dt).copy()


def rnd(shape, dt, seed=0, lo=-4, hi=4):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(dt)


# ---------------------------------------------------------------------------------------------
# DMA


@pytest.mark.parametrize("nburst,burst,ss,ds", [(1, 256, 0, 0), (4, 64, 64, 64), (5, 64, 100, 96), (3, 32, 0, 32)])
def test_copy_gm_to_ub_and_l1(nburst, burst, ss, ds):
    gm = np.random.default_rng(1).integers(0, 256, GM_SIZE, dtype=np.uint8)
    base, off = 1000, 8
    for mn, buf in (("copy_gm_to_ub", "ub"), ("copy_gm_to_l1", "l1")):
        core, _, _ = run([isa.make(mn, dst=64, src_arg=1, src=off, nburst=nburst, burst=burst,
                                   src_stride=ss, dst_stride=ds)], gm=gm.copy(), args=(0, base))
        exp = np.zeros(SPEC.buffer(buf).size, np.uint8)
        for i in range(nburst):
            exp[64 + i * ds:64 + i * ds + burst] = gm[base + off + i * ss:base + off + i * ss + burst]
        np.testing.assert_array_equal(core.bufs[buf], exp)


def test_copy_ub_to_gm_strided():
    core = AICore(SPEC)
    data = np.random.default_rng(2).integers(0, 256, 4096, dtype=np.uint8)
    core.bufs["ub"][:4096] = data
    _, gm, _ = run([isa.make("copy_ub_to_gm", dst_arg=0, dst=16, src=32, nburst=3, burst=40, src_stride=96,
                             dst_stride=50)], core=core, args=(500,))
    exp = np.zeros(GM_SIZE, np.uint8)
    for i in range(3):
        exp[516 + i * 50:516 + i * 50 + 40] = data[32 + i * 96:32 + i * 96 + 40]
    np.testing.assert_array_equal(gm, exp)


@pytest.mark.parametrize("dt,rows,cols", [(F16, 20, 37), (F16, 16, 32), (F32, 5, 9), (F32, 33, 8)])
def test_nd2nz(dt, rows, cols):
    isz = dt.itemsize
    stride = cols * isz + 6
    mat = rnd((rows, cols), dt)
    gm = np.zeros(GM_SIZE, np.uint8)
    for r in range(rows):
        gm[128 + r * stride:128 + r * stride + cols * isz] = np.frombuffer(mat[r].tobytes(), np.uint8)
    core, _, _ = run([isa.make("copy_gm_to_l1_nd2nz", dtype=CODE[dt], dst=256, src_arg=0, src=28, rows=rows,
                               cols=cols, src_row_stride=stride)], gm=gm, args=(100,))
    c0 = 32 // isz
    c1, r16 = math.ceil(cols / c0), math.ceil(rows / 16) * 16
    exp = np.zeros((c1, r16, c0), dt)
    for r in range(rows):
        for c in range(cols):
            exp[c // c0, r, c % c0] = mat[r, c]
    np.testing.assert_array_equal(get(core, "l1", 256, dt, exp.size).reshape(exp.shape), exp)


@pytest.mark.parametrize("space,buf", [(isa.L0A, "l0a"), (isa.L0B, "l0b")])
def test_load2d(space, buf):
    core = AICore(SPEC)
    data = np.random.default_rng(3).integers(0, 256, 8192, dtype=np.uint8)
    core.bufs["l1"][:8192] = data
    run([isa.make("load2d", dst_space=space, dst=1024, src=32, repeat=4, src_stride=1024, dst_stride=1536)], core=core)
    exp = np.zeros(SPEC.buffer(buf).size, np.uint8)
    for i in range(4):
        exp[1024 + i * 1536:1024 + i * 1536 + 512] = data[32 + i * 1024:32 + i * 1024 + 512]
    np.testing.assert_array_equal(core.bufs[buf], exp)


# ---------------------------------------------------------------------------------------------
# img2col


def ref_im2col(fm, pads, strides, ksize, dil):
    """fm [c1][h][w][16] -> (Ho*Wo, c1*kh*kw*16), by explicit loops."""
    c1, h, w, c0 = fm.shape
    pt, pb, pl, pr = pads
    (sh, sw), (kh, kw), (dh, dw) = strides, ksize, dil
    ho = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    wo = (w + pl + pr - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((ho * wo, c1 * kh * kw * c0), fm.dtype)
    for oh in range(ho):
        for ow in range(wo):
            for c in range(c1):
                for i in range(kh):
                    for j in range(kw):
                        y, x = oh * sh - pt + i * dh, ow * sw - pl + j * dw
                        if 0 <= y < h and 0 <= x < w:
                            col = ((c * kh + i) * kw + j) * c0
                            out[oh * wo + ow, col:col + c0] = fm[c, y, x]
    return out


IMG2COL_CASES = [
    # dt, (c1, h, w), pads, strides, kernel, dil, m_start, m_count, k_start, k_count
    (F16, (2, 7, 7), (1, 1, 1, 1), (1, 1), (3, 3), (1, 1), 0, 64, 0, 288),      # Ho*Wo = 49
    (F16, (1, 9, 11), (0, 2, 1, 0), (2, 3), (3, 2), (1, 2), 16, 32, 32, 64),     # partial rows and columns
    (F16, (3, 8, 8), (0, 0, 0, 0), (1, 1), (1, 1), (1, 1), 0, 64, 16, 32),      # 1x1
    (F16, (1, 10, 10), (3, 3, 3, 3), (2, 2), (7, 7), (1, 1), 0, 32, 0, 784),    # 7x7 s2 p3, Ho*Wo=25
    (F32, (2, 6, 5), (1, 0, 2, 1), (1, 2), (2, 3), (2, 1), 0, 48, 8, 136),      # fp32 k0 = 8, cols past K
    (F16, (2, 5, 5), (1, 1, 1, 1), (1, 1), (3, 3), (1, 1), 16, 16, 272, 32),    # cols past K are zero
]


@pytest.mark.parametrize("case", IMG2COL_CASES)
def test_img2col(case):
    dt, (c1, h, w), pads, strides, ks, dil, m_start, m_count, k_start, k_count = case
    fm = rnd((c1, h, w, 16), dt, seed=4)
    core = AICore(SPEC)
    put(core, "l1", 96, fm)
    core.bufs["l0a"][:] = 0xFF  # rows/cols past the output must be written as zeros
    run([isa.make("img2col", dtype=CODE[dt], dst=512, src=96, fm_c1=c1, fm_h=h, fm_w=w,
                  pad_t=pads[0], pad_b=pads[1], pad_l=pads[2], pad_r=pads[3], stride_h=strides[0],
                  stride_w=strides[1], kernel_h=ks[0], kernel_w=ks[1], dil_h=dil[0], dil_w=dil[1],
                  m_start=m_start, m_count=m_count, k_start=k_start, k_count=k_count,
                  fm_c1_stride=h * w * 16 * np.dtype(dt).itemsize)], core=core)
    full = ref_im2col(fm, pads, strides, ks, dil)
    big = np.zeros((m_start + m_count, k_start + k_count), dt)
    rr, cc = min(full.shape[0], big.shape[0]), min(full.shape[1], big.shape[1])
    big[:rr, :cc] = full[:rr, :cc]
    want = big[m_start:, k_start:]
    k0 = 16 if dt == F16 else 8
    got = get(core, "l0a", 512, dt, m_count * k_count).reshape(m_count // 16, k_count // k0, 16, k0)
    got = got.transpose(0, 2, 1, 3).reshape(m_count, k_count)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dt,gap", [(F16, 32), (F16, 5 * 7 * 16 * 2), (F32, 64), (F16, None)])
def test_img2col_reads_c1_blocks_at_fm_c1_stride(dt, gap):
    """C1 block c of the map at src + c*fm_c1_stride: a pitch of a packed block plus ``gap`` bytes
    (whose bytes hold NaN: none may be read) gives the img2col of the packed map; ``gap`` None:
    ``fm_c1_stride`` 0, packed blocks (how kernels of .om versions before 6 are read)."""
    c1, h, w, isz = 3, 5, 7, np.dtype(dt).itemsize
    fm = rnd((c1, h, w, 16), dt, seed=6)
    pitch = h * w * 16 * isz + (gap or 0)
    core = AICore(SPEC)
    put(core, "l1", 64, np.full(c1 * pitch // isz, np.nan, dt))
    for c in range(c1):
        put(core, "l1", 64 + c * pitch, fm[c])
    k_count = c1 * 9 * 16
    run([isa.make("img2col", dtype=CODE[dt], dst=0, src=64, fm_c1=c1, fm_h=h, fm_w=w, pad_t=1, pad_b=1, pad_l=1,
                  pad_r=0, stride_h=1, stride_w=2, kernel_h=3, kernel_w=3, dil_h=1, dil_w=1, m_start=0,
                  m_count=32, k_start=0, k_count=k_count, fm_c1_stride=0 if gap is None else pitch)], core=core)
    want = np.zeros((32, k_count), dt)
    full = ref_im2col(fm, (1, 1, 1, 0), (1, 2), (3, 3), (1, 1))  # 5 x 3 = 15 positions
    want[:full.shape[0]] = full
    k0 = 16 if dt == F16 else 8
    got = get(core, "l0a", 0, dt, 32 * k_count).reshape(2, k_count // k0, 16, k0).transpose(0, 2, 1, 3)
    np.testing.assert_array_equal(got.reshape(32, k_count), want)


def test_img2col_fm_c1_stride_below_a_block_is_an_error():
    ins = isa.make("img2col", dtype=0, dst=0, src=0, fm_c1=2, fm_h=4, fm_w=4, stride_h=1, stride_w=1, kernel_h=1,
                   kernel_w=1, dil_h=1, dil_w=1, m_count=16, k_count=32, fm_c1_stride=4 * 4 * 16 * 2 - 32)
    with pytest.raises(SimError) as e:
        run([ins])
    assert e.value.lines() == [
        f"error: k: instruction 0 `{ins.asm()}`: fm_c1_stride 480 is less than a 4x4x16 C1 block (512 bytes): "
        "the blocks overlap"]


# ---------------------------------------------------------------------------------------------
# cube


def to_zz(a, k0):  # (m, k) -> Zz [m/16][k/k0][16][k0], by loops
    m, k = a.shape
    z = np.zeros((m // 16, k // k0, 16, k0), a.dtype)
    for i in range(m):
        for j in range(k):
            z[i // 16, j // k0, i % 16, j % k0] = a[i, j]
    return z


def to_zn(b, k0):  # (k, n) -> Zn [k/k0][n/16][16][k0]
    k, n = b.shape
    z = np.zeros((k // k0, n // 16, 16, k0), b.dtype)
    for i in range(k):
        for j in range(n):
            z[i // k0, j // 16, j % 16, i % k0] = b[i, j]
    return z


def from_nz(c, m, n):  # L0C Nz [n/16][m][16] -> (m, n)
    out = np.zeros((m, n), c.dtype)
    for i in range(m):
        for j in range(n):
            out[i, j] = c[j // 16, i, j % 16]
    return out


@pytest.mark.parametrize("dt,m,k,n", [(F16, 32, 48, 16), (F16, 16, 16, 64), (F32, 32, 24, 32)])
def test_mmad_init_and_accumulate(dt, m, k, n):
    k0 = 16 if dt == F16 else 8
    a1, b1 = rnd((m, k), dt, 5, -1, 1), rnd((k, n), dt, 6, -1, 1)
    a2, b2 = rnd((m, k), dt, 7, -1, 1), rnd((k, n), dt, 8, -1, 1)
    core = AICore(SPEC)
    put(core, "l0a", 0, to_zz(a1, k0))
    put(core, "l0b", 0, to_zn(b1, k0))
    put(core, "l0a", 8192, to_zz(a2, k0))
    put(core, "l0b", 8192, to_zn(b2, k0))
    core.bufs["l0c"][:] = 0x7F  # init=1 must overwrite
    run([isa.make("mmad", dtype=CODE[dt], dst=128, a=0, b=0, m=m, k=k, n=n, init=1),
         isa.make("mmad", dtype=CODE[dt], dst=128, a=8192, b=8192, m=m, k=k, n=n, init=0)], core=core)
    want = a1.astype(np.float64) @ b1.astype(np.float64) + a2.astype(np.float64) @ b2.astype(np.float64)
    got = from_nz(get(core, "l0c", 128, F32, m * n).reshape(n // 16, m, 16), m, n)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_mmad_float32_b_is_reread_after_every_l0b_write():
    """mmad keeps B's float32 values until the next L0B write (load2d) or run: a cached B must give
    exactly the products of a fresh core, and a new B (loaded, or written between runs) must be used."""
    m, k, n = 32, 32, 16
    a = rnd((m, k), F16, 11, -1, 1)
    bs = [rnd((k, n), F16, seed, -1, 1) for seed in (12, 13, 14)]

    def mmad(dst):
        return isa.make("mmad", dtype=0, dst=dst, a=0, b=0, m=m, k=k, n=n, init=1)

    def fresh(b):  # the product on a new core (nothing cached)
        core = AICore(SPEC)
        put(core, "l0a", 0, to_zz(a, 16))
        put(core, "l0b", 0, to_zn(b, 16))
        run([mmad(0)], core=core)
        return get(core, "l0c", 0, F32, m * n)

    core = AICore(SPEC)
    put(core, "l0a", 0, to_zz(a, 16))
    put(core, "l1", 0, to_zn(bs[0], 16))
    put(core, "l1", 4096, to_zn(bs[1], 16))
    load = [isa.make("load2d", dst_space=isa.L0B, dst=0, src=src, repeat=2, src_stride=512, dst_stride=512)
            for src in (0, 4096)]
    run([load[0], mmad(0), mmad(2048), load[1], mmad(4096)], core=core)
    want0, want1 = fresh(bs[0]), fresh(bs[1])
    assert not np.array_equal(want0, want1)
    np.testing.assert_array_equal(get(core, "l0c", 0, F32, m * n), want0)
    np.testing.assert_array_equal(get(core, "l0c", 2048, F32, m * n), want0)  # B's float32 values reused
    np.testing.assert_array_equal(get(core, "l0c", 4096, F32, m * n), want1)  # the load replaced them
    put(core, "l0b", 0, to_zn(bs[2], 16))  # written from outside between runs
    run([mmad(0)], core=core)
    np.testing.assert_array_equal(get(core, "l0c", 0, F32, m * n), fresh(bs[2]))


def test_copy_l0c_to_ub():
    n1, src_m, m = 3, 48, 20
    c = rnd((n1, src_m, 16), F32, 9)
    for dt in (F16, F32):
        core = AICore(SPEC)
        put(core, "l0c", 64, c)
        run([isa.make("copy_l0c_to_ub", dtype=CODE[dt], dst=32, src=64, n1=n1, m=m, src_m=src_m)], core=core)
        want = np.zeros((n1, m, 16), dt)
        for i in range(n1):
            for r in range(m):
                want[i, r] = c[i, r].astype(dt)
        np.testing.assert_array_equal(get(core, "ub", 32, dt, want.size).reshape(want.shape), want)


# ---------------------------------------------------------------------------------------------
# vector


def lane_addr(base, blk, rep, r, j, isz):
    e = 32 // isz
    return base + (r * rep + (j // e) * blk) * 32 + (j % e) * isz


def read_lane(mem, addr, dt):
    return mem[addr:addr + dt.itemsize].view(dt)[0]


REF = {
    "vadd": lambda a, b, s: a + b, "vsub": lambda a, b, s: a - b, "vmul": lambda a, b, s: a * b,
    "vdiv": lambda a, b, s: a / b, "vmax": lambda a, b, s: max(a, b), "vmin": lambda a, b, s: min(a, b),
    "vadds": lambda a, b, s: a + s, "vmuls": lambda a, b, s: a * s, "vmaxs": lambda a, b, s: max(a, s),
    "vmins": lambda a, b, s: min(a, s),
    "vrelu": lambda a, b, s: max(a, 0.0), "vexp": lambda a, b, s: math.exp(a), "vln": lambda a, b, s: math.log(a),
    "vrec": lambda a, b, s: 1.0 / a, "vsqrt": lambda a, b, s: math.sqrt(a), "vabs": lambda a, b, s: abs(a),
    "vmov": lambda a, b, s: a, "vdup": lambda a, b, s: s,
}
POSITIVE = {"vln", "vsqrt", "vrec", "vdiv"}
VEC_LAYOUTS = {
    # name: repeat, mask(None=full), dst (base, blk, rep), src0, src1
    "contiguous": (4, None, (0, 1, 8), (8192, 1, 8), (16384, 1, 8)),
    "strided": (3, None, (0, 2, 16), (8192, 1, 9), (16384, 3, 24)),
    "broadcast": (5, None, (0, 1, 8), (8192, 1, 8), (16384, 0, 0)),   # src1: one block, rep stride 0
    "rep0_256B": (3, None, (0, 1, 8), (8192, 1, 8), (16384, 1, 0)),  # src1 re-reads the same 256 B
    "partial_mask": (3, 37, (0, 1, 8), (8192, 1, 8), (16384, 1, 8)),
    "partial_mask_strided": (2, 21, (0, 2, 17), (8192, 1, 8), (16384, 0, 1)),
}


@pytest.mark.parametrize("layout", sorted(VEC_LAYOUTS))
@pytest.mark.parametrize("dt", [F16, F32])
@pytest.mark.parametrize("mn", sorted(REF))
def test_vector(mn, dt, layout):
    repeat, mask, dst, s0, s1 = VEC_LAYOUTS[layout]
    isz = dt.itemsize
    lanes = 256 // isz
    mask = mask or lanes
    core = AICore(SPEC)
    rng = np.random.default_rng(10)
    lo = 0.25 if mn in POSITIVE else -4
    ub = core.bufs["ub"]
    ub[:32768] = rng.uniform(lo, 4, 32768 // isz).astype(dt).view(np.uint8)
    before = ub.copy()
    scalar = 1.5
    run([isa.make(mn, dtype=CODE[dt], dst=dst[0], src0=s0[0], src1=s1[0], repeat=repeat, mask=mask,
                  dst_blk=dst[1], src0_blk=s0[1], src1_blk=s1[1], dst_rep=dst[2], src0_rep=s0[2], src1_rep=s1[2],
                  scalar=scalar)], core=core)
    want = before.copy()
    for r in range(repeat):
        for j in range(mask):
            a = float(read_lane(before, lane_addr(*s0, r, j, isz), dt))
            b = float(read_lane(before, lane_addr(*s1, r, j, isz), dt))
            # binary fp16 ops compute exactly in float64 then round once, like numpy's float16 loops
            v = np.array(REF[mn](dt.type(a), dt.type(b), dt.type(scalar)) if mn in ("vmax", "vmin", "vmaxs", "vmins")
                         else REF[mn](a, b, float(dt.type(scalar))), dt)
            ad = lane_addr(*dst, r, j, isz)
            want[ad:ad + isz] = np.frombuffer(v.tobytes(), np.uint8)
    if mn in ("vexp", "vln"):  # float32 libm vs float64 math: within an ulp or so of the dtype
        np.testing.assert_allclose(ub.view(dt), want.view(dt), rtol=1e-3 if dt == F16 else 1e-6)
    else:  # +, -, *, /, sqrt through float32 round exactly like one rounding from float64
        np.testing.assert_array_equal(ub.view(dt), want.view(dt))


#: float16 partners of every float16 value: zeros, infinities, quiet and signalling NaNs of both signs
#: (payloads), subnormals, the largest finite values, values near the rounding edges
F16_PARTNERS = np.array([0x0000, 0x8000, 0x7C00, 0xFC00, 0x7C01, 0x7D00, 0x7E00, 0x7F00, 0xFC01, 0xFE01, 0x0001,
                         0x8001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x3C00, 0xBC00, 0x3C01, 0x1400, 0x5BFF, 0x7800,
                         0x0200, 0x3555, 0xC8D1, 0x2E66], np.uint16)


@pytest.mark.parametrize("uf", [np.add, np.subtract, np.multiply])
def test_float16_ops_through_float32_are_numpys_bits(uf):
    """vadd / vsub / vmul / vmla compute float16 through float32 (widened by table, one rounding):
    the bits of numpy's own float16 loop for every float16 value against each partner, both orders,
    NaN payloads included (which of two NaNs numpy keeps)."""
    allv = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    a = np.repeat(allv, len(F16_PARTNERS)).view(np.float16)
    b = np.tile(F16_PARTNERS, 1 << 16).view(np.float16)
    with np.errstate(all="ignore"):
        for x, y in ((a, b), (b, a)):
            want = uf(x, y)
            got = _f16_op(uf, x, y).astype(np.float16)
            np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
        if uf is np.multiply:  # vmla: the product rounded to float16, then the sum
            d = a[::-1].copy()
            want = d.copy()
            np.add(want, np.multiply(a, b), out=want)
            got = _f16_op(np.add, d, _f16_op(np.multiply, a, b).astype(np.float16)).astype(np.float16)
            np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize("layout", sorted(VEC_LAYOUTS))
@pytest.mark.parametrize("dt", [F16, F32])
def test_vmla_accumulates_into_dst(dt, layout):
    """vmla: dst = src0 * src1 + dst per lane, the product rounded to the dtype, then the sum (isa.py);
    lanes outside the mask keep their value."""
    repeat, mask, dst, s0, s1 = VEC_LAYOUTS[layout]
    isz = dt.itemsize
    mask = mask or 256 // isz
    core = AICore(SPEC)
    ub = core.bufs["ub"]
    ub[:32768] = np.random.default_rng(11).uniform(-4, 4, 32768 // isz).astype(dt).view(np.uint8)
    before = ub.copy()
    run([isa.make("vmla", dtype=CODE[dt], dst=dst[0], src0=s0[0], src1=s1[0], repeat=repeat, mask=mask,
                  dst_blk=dst[1], src0_blk=s0[1], src1_blk=s1[1], dst_rep=dst[2], src0_rep=s0[2], src1_rep=s1[2],
                  scalar=0.0)], core=core)
    want = before.copy()
    for r in range(repeat):
        for j in range(mask):
            a, b = (read_lane(before, lane_addr(*o, r, j, isz), dt) for o in (s0, s1))
            ad = lane_addr(*dst, r, j, isz)
            v = np.array(dt.type(a * b) + read_lane(want, ad, dt), dt)  # dst read before this lane's write
            want[ad:ad + isz] = np.frombuffer(v.tobytes(), np.uint8)
    np.testing.assert_array_equal(ub.view(dt), want.view(dt))


def test_vmla_footprint_reads_its_destination():
    from cann.hw.footprint import footprints

    ins = isa.make("vmla", dtype=0, dst=512, src0=0, src1=256, repeat=1, mask=128, dst_blk=1, src0_blk=1,
                   src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=0.0)
    accs = footprints(SPEC)["vmla"](ins.values, [0])[0]
    assert (5, 512, 768, True) in accs and (5, 512, 768, False) in accs, accs


@pytest.mark.parametrize("mn,sdt,ddt", [("vconv_f322f16", F32, F16), ("vconv_f162f32", F16, F32)])
def test_vconv(mn, sdt, ddt):
    core = AICore(SPEC)
    src = rnd(4096, sdt, 11)
    put(core, "ub", 8192, src)
    repeat, mask, srep, drep = 3, 50, 9, 5
    run([isa.make(mn, dtype=0, dst=0, src0=8192, repeat=repeat, mask=mask, dst_rep=drep, src0_rep=srep)], core=core)
    want = np.zeros(8192, np.uint8)
    for r in range(repeat):
        for e in range(mask):
            v = src[(r * srep * 32) // sdt.itemsize + e].astype(ddt)
            a = r * drep * 32 + e * ddt.itemsize
            want[a:a + ddt.itemsize] = np.frombuffer(v.tobytes(), np.uint8)
    np.testing.assert_array_equal(core.bufs["ub"][:8192], want)


@pytest.mark.parametrize("mn", ["vcmax", "vcadd"])
@pytest.mark.parametrize("dt", [F16, F32])
@pytest.mark.parametrize("blk,rep,mask", [(1, 8, None), (1, 8, 45), (2, 16, None), (1, 0, 30), (3, 20, 19)])
def test_reduce(mn, dt, blk, rep, mask):
    isz = dt.itemsize
    mask = mask or 256 // isz
    core = AICore(SPEC)
    src = rnd(32768 // isz, dt, 12)
    put(core, "ub", 0, src)
    repeat = 4
    run([isa.make(mn, dtype=CODE[dt], dst=65536, src0=0, repeat=repeat, mask=mask, src0_blk=blk, src0_rep=rep)],
        core=core)
    mem = core.bufs["ub"]
    want = []
    for r in range(repeat):
        vals = [float(read_lane(mem, lane_addr(0, blk, rep, r, j, isz), dt)) for j in range(mask)]
        want.append(max(vals) if mn == "vcmax" else sum(vals))
    got = get(core, "ub", 65536, dt, repeat).astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=2e-3 if dt == F16 else 1e-6, atol=0.05 if dt == F16 else 1e-5)
    if mn == "vcmax":
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dt", [F16, F32])
def test_vbrcb(dt):
    core = AICore(SPEC)
    put(core, "ub", 64, np.array([3.25, 7.0], dt))
    run([isa.make("vbrcb", dtype=CODE[dt], dst=1024, src0=64, repeat=3, mask=1)], core=core)
    np.testing.assert_array_equal(get(core, "ub", 1024, dt, 3 * 256 // dt.itemsize), np.full(768 // dt.itemsize, 3.25, dt))
    assert not core.bufs["ub"][1024 + 768:].any()


def test_sync_no_effect_and_counts():
    core, gm, st = run([isa.make("set_flag", src_pipe=isa.Pipe.MTE2, dst_pipe=isa.Pipe.V, event=3),
                        isa.make("wait_flag", src_pipe=isa.Pipe.MTE2, dst_pipe=isa.Pipe.V, event=3),
                        isa.make("pipe_barrier", pipe=isa.Pipe.ALL)])
    assert st.instructions == 3
    assert st.cycles == 3 * SPEC.latency.scalar
    assert st.busy_by_pipe["MTE2"] == SPEC.latency.scalar and st.busy_by_pipe["V"] == SPEC.latency.scalar
    assert not any(b.any() for b in core.bufs.values())


# ---------------------------------------------------------------------------------------------
# cost formulas: a lone instruction costs exactly its formula

L, B, C, V = SPEC.latency, SPEC.bandwidth, SPEC.cube, SPEC.vector
cdiv = lambda a, b: -(-a // b)  # noqa: E731

COST_CASES = [
    (isa.make("copy_gm_to_ub", nburst=3, burst=100, src_stride=100, dst_stride=128),
     L.mte_startup + cdiv(300, B.gm_to_ub) + 2 * L.burst_overhead, "MTE2"),
    (isa.make("copy_gm_to_l1", nburst=1, burst=4096), L.mte_startup + cdiv(4096, B.gm_to_l1), "MTE2"),
    (isa.make("copy_ub_to_gm", nburst=4, burst=64, src_stride=64, dst_stride=64),
     L.mte_startup + cdiv(256, B.ub_to_gm) + 3 * L.burst_overhead, "MTE3"),
    (isa.make("copy_gm_to_l1_nd2nz", dtype=0, rows=20, cols=37, src_row_stride=74),
     L.mte_startup + cdiv(20 * 74, B.gm_to_l1) + 19 * L.burst_overhead, "MTE2"),
    (isa.make("load2d", dst_space=1, repeat=8, src_stride=512, dst_stride=512),
     L.mte_startup + cdiv(8 * C.fractal_bytes, B.l1_to_l0a), "MTE1"),
    (isa.make("load2d", dst_space=2, repeat=8, src_stride=512, dst_stride=512),
     L.mte_startup + cdiv(8 * C.fractal_bytes, B.l1_to_l0b), "MTE1"),
    (isa.make("img2col", dtype=0, fm_c1=1, fm_h=4, fm_w=4, stride_h=1, stride_w=1, kernel_h=1, kernel_w=1, dil_h=1,
              dil_w=1, m_count=16, k_count=16, fm_c1_stride=512), L.mte_startup + cdiv(16 * 16 * 2, B.l1_to_l0a), "MTE1"),
    (isa.make("mmad", dtype=0, m=32, k=48, n=64, init=1), L.cube_startup + 2 * 3 * 4, "M"),
    (isa.make("mmad", dtype=1, m=32, k=48, n=64, init=1), L.cube_startup + 2 * 6 * 4 * C.fp32_rate_divisor, "M"),
    (isa.make("copy_l0c_to_ub", dtype=0, n1=2, m=32, src_m=32), L.vector_startup + cdiv(2 * 32 * 16 * 4, B.l0c_to_ub),
     "V"),
    (isa.make("vadd", dtype=0, repeat=7, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8,
              src1_rep=8), L.vector_startup + 7 * V.cycles_per_repeat, "V"),
    (isa.make("vexp", dtype=1, repeat=5, mask=64, dst_blk=1, src0_blk=1, dst_rep=8, src0_rep=8),
     L.vector_startup + 5 * V.cycles_per_repeat_transcendental, "V"),
    (isa.make("vconv_f322f16", repeat=2, mask=64, dst_rep=4, src0_rep=8), L.vector_startup + 2 * V.cycles_per_repeat,
     "V"),
    (isa.make("vcadd", dtype=0, dst=1024, repeat=2, mask=128, src0_blk=1, src0_rep=8),
     L.vector_startup + 2 * V.cycles_per_repeat, "V"),
    (isa.make("vbrcb", dtype=0, dst=1024, repeat=2, mask=128), L.vector_startup + 2 * V.cycles_per_repeat, "V"),
    (isa.make("pipe_barrier", pipe=isa.Pipe.V), L.scalar, "V"),
    (isa.make("pipe_barrier", pipe=isa.Pipe.ALL), L.scalar, "S"),
]


@pytest.mark.parametrize("ins,cycles,pipe", COST_CASES, ids=[c[0].mnemonic for c in COST_CASES])
def test_cost(ins, cycles, pipe):
    _, _, st = run([ins], args=(0,))
    assert isinstance(st, KernelStats)
    assert st.cycles == cycles
    assert st.busy_by_pipe[pipe] == cycles
    assert sum(st.busy_by_pipe.values()) == cycles and st.instructions == 1


def test_serial_cycles_are_sum_and_pipes_overlap():
    prog = [c[0] for c in COST_CASES]
    _, _, st = run(prog)
    assert st.serial_cycles == sum(c[1] for c in COST_CASES) == sum(st.busy_by_pipe.values())
    # no flags: each pipe runs its queue, the barrier (last) waits for the longest one
    per_pipe = {}
    for _, cyc, pipe in COST_CASES[:-1]:
        per_pipe[pipe] = per_pipe.get(pipe, 0) + cyc
    assert st.cycles == max(per_pipe.values()) + L.scalar < st.serial_cycles


# ---------------------------------------------------------------------------------------------
# errors

UB_USABLE = SPEC.buffer("ub").usable
ERRORS = [
    (isa.make("copy_gm_to_ub", dst=0, src_arg=0, src=GM_SIZE - 32, nburst=1, burst=64), "GM bytes"),
    (isa.make("copy_gm_to_ub", dst=0, src_arg=2, src=0, nburst=1, burst=64), "kernel argument 2"),
    (isa.make("copy_gm_to_ub", dst=UB_USABLE - 32, src_arg=0, nburst=1, burst=64), f"UB bytes [{UB_USABLE - 32}"),
    (isa.make("copy_gm_to_ub", dst=16, src_arg=0, nburst=1, burst=64), "not aligned to 32"),
    (isa.make("copy_gm_to_ub", dst=0, src_arg=0, nburst=0, burst=64), "nburst must be >= 1"),
    (isa.make("copy_gm_to_ub", dst=0, src_arg=0, nburst=2, burst=64, src_stride=64, dst_stride=32), "overlap"),
    (isa.make("copy_gm_to_l1", dst=SPEC.buffer("l1").size - 32, src_arg=0, nburst=2, burst=32, src_stride=32,
              dst_stride=32), "L1 bytes"),
    (isa.make("copy_ub_to_gm", dst_arg=0, dst=GM_SIZE, src=0, nburst=1, burst=2), "GM bytes"),
    (isa.make("copy_gm_to_l1_nd2nz", dtype=42, rows=1, cols=1), "invalid dtype code 42"),
    (isa.make("load2d", dst_space=3, repeat=1), "invalid dst_space 3"),
    (isa.make("load2d", dst_space=1, dst=256, repeat=1), "L0A address 256 is not aligned to 512"),
    (isa.make("load2d", dst_space=2, dst=65536 - 512, repeat=2, src_stride=512, dst_stride=512), "L0B bytes"),
    (isa.make("img2col", dtype=0, fm_c1=1, fm_h=4, fm_w=4, stride_h=1, stride_w=1, kernel_h=1, kernel_w=1, dil_h=1,
              dil_w=1, m_count=24, k_count=16), "m_count 24"),
    (isa.make("img2col", dtype=0, fm_c1=1, fm_h=4, fm_w=4, stride_h=0, stride_w=1, kernel_h=1, kernel_w=1, dil_h=1,
              dil_w=1, m_count=16, k_count=16), "stride_h must be >= 1"),
    (isa.make("img2col", dtype=0, fm_c1=1, fm_h=2, fm_w=2, stride_h=1, stride_w=1, kernel_h=3, kernel_w=3, dil_h=1,
              dil_w=1, m_count=16, k_count=16), "empty output"),
    (isa.make("img2col", dtype=0, fm_c1=1, fm_h=4, fm_w=4, stride_h=1, stride_w=1, kernel_h=1, kernel_w=1, dil_h=1,
              dil_w=1, m_count=16, k_count=8), "multiples of k0"),
    (isa.make("mmad", dtype=0, m=24, k=16, n=16, init=1), "multiples of 16"),
    (isa.make("mmad", dtype=1, m=16, k=12, n=16, init=1), "k0 = 8"),
    (isa.make("mmad", dtype=0, m=16, k=16, n=16, init=2), "init must be 0 or 1"),
    (isa.make("mmad", dtype=0, dst=32, m=16, k=16, n=16, init=1), "L0C address 32 is not aligned to 64"),
    (isa.make("mmad", dtype=0, m=256, k=256, n=16, init=1), "L0A bytes [0, 131072)"),
    (isa.make("copy_l0c_to_ub", dtype=0, n1=1, m=32, src_m=16), "src_m 16 < m 32"),
    (isa.make("vadd", dtype=0, repeat=0, mask=128), "repeat 0"),
    (isa.make("vadd", dtype=0, repeat=256, mask=128), "repeat 256"),
    (isa.make("vadd", dtype=1, repeat=1, mask=65), "mask 65"),
    (isa.make("vadd", dtype=0, repeat=1, mask=0), "mask 0"),
    (isa.make("vadd", dtype=17, repeat=1, mask=1), "invalid dtype code 17"),
    (isa.make("vadd", dtype=0, dst=0, src0=0, src1=UB_USABLE - 128, repeat=1, mask=128, dst_blk=1, src0_blk=1,
              src1_blk=1), f"src1: UB bytes [{UB_USABLE - 128}, {UB_USABLE + 128})"),
    (isa.make("vmuls", dtype=0, dst=UB_USABLE - 256, src0=0, repeat=2, mask=128, dst_blk=1, src0_blk=1, dst_rep=8,
              src0_rep=8), "dst: UB bytes"),
    (isa.make("vexp", dtype=0, dst=0, src0=34, repeat=1, mask=128, dst_blk=1, src0_blk=1), "src0: UB address 34"),
    (isa.make("vadd", dtype=0, repeat=1, mask=128, dst_blk=-1), "strides must be >= 0"),
    (isa.make("vconv_f322f16", repeat=1, mask=65), "mask 65"),
    (isa.make("vcadd", dtype=0, dst=UB_USABLE, repeat=1, mask=128, src0_blk=1), "dst: UB bytes"),
    (isa.make("vbrcb", dtype=0, dst=UB_USABLE - 256, src0=0, repeat=2, mask=1), "dst: UB bytes"),
    (isa.make("set_flag", src_pipe=isa.Pipe.MTE2, dst_pipe=isa.Pipe.V, event=SPEC.event_ids), "event id 8"),
    (isa.make("wait_flag", src_pipe=isa.Pipe.ALL, dst_pipe=isa.Pipe.V, event=0), "invalid src_pipe 6"),
    (isa.make("pipe_barrier", pipe=9), "invalid pipe 9"),
]


@pytest.mark.parametrize("ins,msg", ERRORS, ids=[f"{i}-{e[0].mnemonic}" for i, e in enumerate(ERRORS)])
def test_errors(ins, msg):
    prog = [isa.make("pipe_barrier", pipe=0), ins]
    with pytest.raises(SimError) as ei:
        run(prog, args=(0,))
    text = str(ei.value)
    assert f"k: instruction 1 `{ins.asm()}`" in text
    assert msg in text, text
    assert ei.value.diagnostics[0].location == f"k: instruction 1 `{ins.asm()}`"


def test_reserved_ub_tail_is_off_limits():
    spec_ub = SPEC.buffer("ub")
    assert spec_ub.reserved > 0
    core = AICore(SPEC)
    assert core.bufs["ub"].size == spec_ub.size
    with pytest.raises(SimError, match="reserved"):
        run([isa.make("vdup", dtype=0, dst=spec_ub.usable, repeat=1, mask=128, dst_blk=1)], core=core)


def test_buffers_sized_from_spec():
    core = AICore(SPEC)
    for name, b in SPEC.buffers:
        assert core.bufs[name].dtype == np.uint8 and core.bufs[name].size == b.size
        assert not core.bufs[name].any()


def test_repeated_instruction_rereads_memory():
    """Vector plans are cached per field tuple; the data must still be read on every execution."""
    core = AICore(SPEC)
    ins = isa.make("vmuls", dtype=1, dst=1024, src0=0, repeat=1, mask=64, dst_blk=1, src0_blk=1, dst_rep=8,
                   src0_rep=8, scalar=3.0)
    for seed in (1, 2):
        x = rnd(64, F32, seed)
        put(core, "ub", 0, x)
        run([ins, ins], core=core)
        np.testing.assert_array_equal(get(core, "ub", 1024, F32, 64), x * np.float32(3))


@pytest.mark.parametrize("a,origin", [(60000.0, 0), (np.inf, None)])
def test_in_place_overflow_needs_finite_sources(a, origin):
    """An in-place vadd (dst = src0) is an overflow origin only when its sources were finite before
    it overwrote them: 60000 + 60000 is one, inf + 60000 is not."""
    core = AICore(SPEC)
    put(core, "ub", 0, np.full(128, a, F16))
    put(core, "ub", 512, np.full(128, 60000, F16))
    vadd = isa.make("vadd", dtype=0, dst=0, src0=0, src1=512, repeat=1, mask=128, dst_blk=1, src0_blk=1,
                    src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8)
    out = isa.make("copy_ub_to_gm", dst_arg=0, dst=0, src=0, nburst=1, burst=256)
    _, gm, stats = run([vadd, out], core=core)
    assert np.isinf(gm[:256].view(F16)).all()
    assert stats.overflow == origin


# ---------------------------------------------------------------------------------------------
# field values found by fuzzing (test/test_fuzz.py): a clean SimError or the right result


def test_img2col_huge_stride_with_one_output_row_is_exact():
    # stride 2^62 with a single output row and column: the stride is never used (it used to overflow numpy)
    fm = rnd((1, 3, 3, 16), F16, seed=5)
    core = AICore(SPEC)
    put(core, "l1", 0, fm)
    run([isa.make("img2col", dtype=0, dst=0, src=0, fm_c1=1, fm_h=3, fm_w=3, stride_h=2**62, stride_w=2**62,
                  kernel_h=3, kernel_w=3, dil_h=1, dil_w=1, m_start=0, m_count=16, k_start=0, k_count=144,
                  fm_c1_stride=3 * 3 * 16 * 2)],
        core=core)
    got = get(core, "l0a", 0, F16, 16 * 144).reshape(1, 9, 16, 16).transpose(0, 2, 1, 3).reshape(16, 144)
    want = np.zeros((16, 144), F16)
    want[0] = ref_im2col(fm, (0, 0, 0, 0), (1, 1), (3, 3), (1, 1))[0]
    np.testing.assert_array_equal(got, want)


def test_img2col_absurd_padding_is_an_error_not_an_allocation():
    ins = isa.make("img2col", dtype=0, dst=0, src=0, fm_c1=1, fm_h=3, fm_w=3, pad_t=2**40, pad_b=2**40,
                   pad_l=2**40, pad_r=2**40, stride_h=1, stride_w=1, kernel_h=3, kernel_w=3, dil_h=1, dil_w=1,
                   m_start=2**40 * (2**41 + 1), m_count=16, k_start=0, k_count=144,
                   fm_c1_stride=3 * 3 * 16 * 2)
    with pytest.raises(SimError) as e:
        run([ins])
    assert e.value.lines() == [
        f"error: k: instruction 0 `{ins.asm()}`: the padded window this img2col reads (1 x 3 x {2**41 + 3} x 16 "
        f"elements) exceeds the simulator's 67108864-byte limit (pads, strides or dilation too large)"]


def test_vector_unused_strides_may_be_anything():
    # repeat 1: the repeat strides are never used (an int64-overflowing value used to crash numpy)
    x = rnd(128, F16, seed=6)
    core = AICore(SPEC)
    put(core, "ub", 0, x)
    run([isa.make("vadds", dtype=0, dst=1024, src0=0, repeat=1, mask=128, dst_blk=1, src0_blk=1,
                  dst_rep=2**62, src0_rep=2**63 - 1, scalar=1.0)], core=core)
    np.testing.assert_array_equal(get(core, "ub", 1024, F16, 128), x + F16.type(1))


def test_reset_zeroes_the_lanes_a_run_used_and_leaves_unused_lanes_untouched():
    # a pooled 32-lane core is reset between runs, zeroing only the lanes runs used (so a one-block
    # run keeps one lane's pages mapped: test_streaming's memory bound): those must read zero again
    core = AICore(SPEC, lanes=4)
    gm = np.zeros(GM_SIZE, np.uint8)
    gm[:32] = np.arange(1, 33, dtype=np.uint8)
    prog = [isa.make("copy_gm_to_ub", dst=64, src_arg=0, src=0, nburst=1, burst=32)]
    core.run(prog, gm, (0,), "k", checks="off", lane=2)
    assert core.mem["ub"][2, 64:96].tolist() == list(range(1, 33)) and not core.mem["ub"][[0, 1, 3]].any()
    core.reset()
    assert not core.mem["ub"].any()
    core.run(prog, gm, (0,), "k", checks="off", lane=0)
    core.reset()
    assert not core.mem["ub"][:3].any()


def test_vector_plans_and_views_are_kept_per_lane_set():
    # a model's launches alternate between lane sets (28 blocks, then 32, ...): each set keeps its own
    # operand views and vector plans, so going back to a set rebuilds none, and each computes on its lanes
    core = AICore(SPEC, lanes=4)
    gm = np.zeros(GM_SIZE, np.uint8)
    x = rnd(128, F16, seed=3)
    gm[:256] = x.view(np.uint8)
    prog = [isa.make("copy_gm_to_ub", dst=0, src_arg=0, src=0, nburst=1, burst=256),
            isa.make("vadd", dtype=0, dst=256, src0=0, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1,
                     src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=0.0)]
    want = (x + x).view(np.uint8)
    built = {}
    for lanes in [(0, 2, 1), (0, 4, 1), (1, 1, 1), (0, 2, 1)]:
        lane0, n, step = lanes
        core.run_lanes(prog, gm, [(0,)] * n, ["k"] * n, lane0=lane0, lane_step=step, checks="off")
        for j in range(lane0, lane0 + n * step, step):
            assert core.mem["ub"][j, 256:512].tobytes() == want.tobytes()
        plans = core._caches["vadd"]
        assert len(plans) == 1 and core._caches is core._lane_caches[lanes]
        plan = next(iter(plans.values()))
        assert built.setdefault(lanes, plan) is plan  # back to a lane set: the plan built then
    # the set of a new core's lanes (0, 1, 1) and the three run
    assert sorted(core._lane_caches) == [(0, 1, 1), (0, 2, 1), (0, 4, 1), (1, 1, 1)]
