"""Byte footprints of every instruction: which bytes of which buffer it reads and writes.

One table shared by the simulator's race checker (:mod:`cann.sim.timing`) and the compiler's
synchronization pass (:mod:`cann.passes.ascend_insert_sync`), so both see the same dependences.
:func:`footprints` maps a mnemonic to ``fn(values, args) -> (accesses, gm_read_bytes,
gm_write_bytes)`` where each access is ``(buffer, lo, hi, is_write)``: a bounding byte range
``[lo, hi)`` of one operand in buffer :data:`BUFS` ``[buffer]`` (GM by address: kernel argument
base ``args[arg]`` plus the offset; strided gaps included). ``copy_gm_to_ub_reg``'s function takes
the register value as a third argument.
"""

from __future__ import annotations

from cann.hw import isa
from cann.hw.config import SocSpec

#: L0C accumulator element size (fp32), a format fact of the modeled cube, not a hardware figure.
L0C_ITEMSIZE = 4

#: buffers of the race detector (GM addresses are arena byte addresses; "sreg": the scalar registers,
#: 8 bytes each, so an ld_idx (S) and the copy_gm_to_ub_reg (MTE2) reading its register are ordered)
BUFS = ("gm", "l1", "l0a", "l0b", "l0c", "ub", "sreg")
_GM, _L1, _L0A, _L0B, _L0C, _UB, _SREG = range(7)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _isz(code: int) -> int:
    dt = isa.DTYPES.get(code)
    return dt.itemsize if dt is not None else 2


def _footprints(spec: SocSpec):
    """mnemonic -> fn(values, args) -> tuple of (buffer, lo, hi, is_write), plus GM byte counts.

    Each operand's footprint is its bounding byte range (strided gaps included).
    """
    bb = spec.vector.block_bytes
    frac = spec.cube.fractal_bytes
    n0 = spec.cube.n0
    m0 = spec.cube.m0
    rep_bytes = spec.vector.repeat_bytes
    fns = {}

    def dma_in(buf):
        def f(v, args):
            dst, a, src, nb, b, ss, ds = v
            g = args[a] + src
            return ((_GM, g, g + (nb - 1) * ss + b, False), (buf, dst, dst + (nb - 1) * ds + b, True)), nb * b, 0
        return f

    def dma_out(v, args):
        a, dst, src, nb, b, ss, ds = v[:7]
        g = args[a] + dst
        return ((_UB, src, src + (nb - 1) * ss + b, False), (_GM, g, g + (nb - 1) * ds + b, True)), 0, nb * b

    def nd2nz(v, args):
        code, dst, a, src, rows, cols, stride = v
        isz = _isz(code)
        c0 = bb // isz
        g = args[a] + src
        n = _cdiv(cols, c0) * _cdiv(rows, m0) * m0 * c0 * isz
        return ((_GM, g, g + (rows - 1) * stride + cols * isz, False), (_L1, dst, dst + n, True)), rows * cols * isz, 0

    def load2d(v, args):
        space, dst, src, r, ss, ds = v
        buf = _L0A if space == isa.L0A else _L0B
        return ((_L1, src, src + (r - 1) * ss + frac, False), (buf, dst, dst + (r - 1) * ds + frac, True)), 0, 0

    def img2col(v, args, c0=n0):
        isz = _isz(v[0])
        dst, src, c1, fh, fw, pitch = v[1], v[2], v[3], v[4], v[5], v[20]  # C1 block c at src + c*pitch
        return ((_L1, src, src + (c1 - 1) * pitch + fh * fw * c0 * isz, False),
                (_L0A, dst, dst + v[17] * v[19] * isz, True)), 0, 0

    def img2col_c04(v, args):  # a [c1][h][w][4] map
        return img2col(v, args, 4)

    def mmad(v, args):
        code, dst, a, b, m, k, n, init = v
        isz = _isz(code)
        return ((_L0A, a, a + m * k * isz, False), (_L0B, b, b + k * n * isz, False),
                (_L0C, dst, dst + m * n * L0C_ITEMSIZE, True)), 0, 0

    def l0c_to_ub(v, args):
        code, dst, src, n1, m, src_m = v
        return ((_L0C, src, src + n1 * src_m * n0 * L0C_ITEMSIZE, False),
                (_UB, dst, dst + n1 * m * n0 * _isz(code), True)), 0, 0

    def operand_hi(blk, rep, repeat, mask, e, isz):
        nfull, rem = divmod(mask, e)
        last = (repeat - 1) * rep * bb
        hi = last + (nfull - 1) * blk * bb + bb if nfull else 0
        if rem:
            hi = max(hi, last + nfull * blk * bb + rem * isz)
        return hi

    def vector(nsrc, reads_dst=False):
        def f(v, args):
            code, dst, s0, s1, repeat, mask, db, s0b, s1b, dr, s0r, s1r, _ = v
            isz = _isz(code)
            e = bb // isz
            out = [(_UB, dst, dst + operand_hi(db, dr, repeat, mask, e, isz), True)]
            if reads_dst:  # vmla accumulates into dst
                out.append((_UB, dst, out[0][2], False))
            if nsrc >= 1:
                out.append((_UB, s0, s0 + operand_hi(s0b, s0r, repeat, mask, e, isz), False))
            if nsrc == 2:
                out.append((_UB, s1, s1 + operand_hi(s1b, s1r, repeat, mask, e, isz), False))
            return tuple(out), 0, 0
        return f

    def vconv(sisz, disz):
        def f(v, args):
            dst, s0, repeat, mask, dr, s0r = v[1], v[2], v[4], v[5], v[9], v[10]
            return ((_UB, s0, s0 + (repeat - 1) * s0r * bb + mask * sisz, False),
                    (_UB, dst, dst + (repeat - 1) * dr * bb + mask * disz, True)), 0, 0
        return f

    def reduce(v, args):
        code, dst, s0, _, repeat, mask, _, s0b, _, _, s0r, _, _ = v
        isz = _isz(code)
        return ((_UB, s0, s0 + operand_hi(s0b, s0r, repeat, mask, bb // isz, isz), False),
                (_UB, dst, dst + repeat * isz, True)), 0, 0

    def vbrcb(v, args):
        code, dst, s0, _, repeat = v[:5]
        return ((_UB, s0, s0 + _isz(code), False), (_UB, dst, dst + repeat * rep_bytes, True)), 0, 0

    def vtranspose(v, args):
        code, dst, src, repeat, dr, sr, drow, srow = v
        row = 16 * _isz(code)
        return ((_UB, src, src + (repeat - 1) * sr * bb + 15 * (srow * bb or row) + row, False),
                (_UB, dst, dst + (repeat - 1) * dr * bb + 15 * (drow * bb or row) + row, True)), 0, 0

    def none(v, args):
        return (), 0, 0

    def ld_idx(v, args):
        reg, code, src, bound = v
        isz = isa.IDX_DTYPES[code].itemsize if code in isa.IDX_DTYPES else 8
        return ((_UB, src, src + isz, False), (_SREG, reg * 8, reg * 8 + 8, True)), 0, 0

    def dma_reg(v, args, regval=0):
        dst, a, src, nb, b, ss, ds, reg, rs = v
        g = args[a] + src + regval * rs
        return ((_SREG, reg * 8, reg * 8 + 8, False), (_GM, g, g + (nb - 1) * ss + b, False),
                (_UB, dst, dst + (nb - 1) * ds + b, True)), nb * b, 0

    def vsel(v, args):
        code, dst, cond, s0, s1, repeat, mask, db, cb, s0b, s1b, dr, cr, s0r, s1r = v
        isz = _isz(code)
        e = bb // isz
        return tuple((_UB, base, base + operand_hi(blk, rep, repeat, mask, e, isz), w)
                     for base, blk, rep, w in ((dst, db, dr, True), (cond, cb, cr, False), (s0, s0b, s0r, False),
                                               (s1, s1b, s1r, False))), 0, 0

    def vcmpv(v, args):
        code, _, dst, s0, s1, repeat, mask, dr, s0r, s1r = v
        isz = _isz(code)
        return ((_UB, s0, s0 + (repeat - 1) * s0r * bb + mask * isz, False),
                (_UB, s1, s1 + (repeat - 1) * s1r * bb + mask * isz, False),
                (_UB, dst, dst + (repeat - 1) * dr * bb + mask, True)), 0, 0

    def vconv_round(v, args):
        sc, dc, _, dst, s0, repeat, mask, dr, s0r = v
        return ((_UB, s0, s0 + (repeat - 1) * s0r * bb + mask * _isz(sc), False),
                (_UB, dst, dst + (repeat - 1) * dr * bb + mask * _isz(dc), True)), 0, 0

    binary = {"vadd", "vsub", "vmul", "vdiv", "vmax", "vmin", "vand", "vor", "vxor"}
    for d in isa.INSTRUCTIONS:
        m, g = d.mnemonic, d.group
        if m in ("copy_gm_to_l1", "copy_gm_to_ub"):
            fns[m] = dma_in(_L1 if m == "copy_gm_to_l1" else _UB)
        elif m in ("copy_ub_to_gm", "copy_ub_to_gm_add"):  # the add reads GM at the memory side
            fns[m] = dma_out
        elif g == "vector":
            fns[m] = vector(2 if m in binary or m == "vmla" else 0 if m == "vdup" else 1, m == "vmla")
        elif g == "vconv":
            fns[m] = vconv(4, 2) if m == "vconv_f322f16" else vconv(2, 4)
        elif m == "img2col_c04":
            fns[m] = img2col_c04
        else:
            fns[m] = {"nd2nz": nd2nz, "load2d": load2d, "img2col": img2col, "mmad": mmad, "fixpipe": l0c_to_ub,
                      "reduce": reduce, "broadcast": vbrcb, "sync": none, "spmd": none, "scalar": ld_idx,
                      "dma_reg": dma_reg, "select": vsel, "compare": vcmpv,
                      "convert": vconv_round, "transpose": vtranspose}[g]
    return fns


_FOOTPRINTS: dict[str, dict] = {}


def footprints(spec: SocSpec) -> dict:
    fp = _FOOTPRINTS.get(spec.name)
    if fp is None:
        fp = _FOOTPRINTS[spec.name] = _footprints(spec)
    return fp
