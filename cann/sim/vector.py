"""The vector unit of the simulated AI Core (:class:`cann.sim.core.AICore`): the repeat-model
elementwise, conversion, compare, select, reduction and broadcast instructions, each on every lane
of a lockstep run (operands are views with a leading core axis: :mod:`cann.sim.lanes`), with
overflow detection per lane. Semantics: :mod:`cann.hw.isa` and ``docs/core-model.md``."""

from __future__ import annotations

import numpy as np

from cann.hw import isa
from cann.sim.lanes import (_CAN_OVERFLOW, _CMP, _DIVISOR, _EXP_BITS, _F16_TO_F32, _F32, _PLAN_CACHE, _U8, _Fault,
                            _any_nonfinite, convert, nonfinite_lanes)

_F16 = np.dtype(np.float16)
_U16 = np.dtype(np.uint16)


def _f16_op(uf, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``uf(a, b)`` (np.add, np.subtract or np.multiply) of float16 arrays as numpy's own float16 loop
    computes it -- each element widened to float32, the float32 result rounded to float16 -- as a new
    float32 array holding the unrounded results (its caller rounds them, storing to float16); of two
    NaN operands numpy's add and mul keep the second, its subtract the first (as here: float32's
    keeps the first operand's). Every pair of float16 values gives numpy's bits (widening by table
    and one narrowing cast take about 3/4 of the time of numpy's element-at-a-time loop)."""
    x, y = np.take(_F16_TO_F32, a.view(_U16), mode="clip"), np.take(_F16_TO_F32, b.view(_U16), mode="clip")
    if uf is not np.subtract:
        x, y = y, x
    return uf(x, y, out=x) if x.shape == y.shape else uf(x, y)


class VectorUnit:
    """Mixin of :class:`cann.sim.core.AICore`: the vector instruction handlers (they use the core's
    checks, ``_v`` views and overflow watch)."""

    # -----------------------------------------------------------------------------------------
    # vector

    def _vec_check(self, code: int, repeat: int, mask: int, mnemonic: str | None = None) -> tuple[np.dtype, int, int]:
        dt = self._dtype(code)
        if mnemonic is not None and code not in isa.VEC_DTYPES.get(mnemonic, isa.FLOAT_CODES):
            ok = ", ".join(str(isa.DTYPES[c]) for c in sorted(isa.VEC_DTYPES.get(mnemonic, isa.FLOAT_CODES)))
            raise _Fault(f"{mnemonic} does not compute on {dt} (code {code}); it takes {ok}")
        if not 1 <= repeat <= self._max_repeat:
            raise _Fault(f"repeat {repeat} outside [1, {self._max_repeat}]")
        lanes = self._rep_bytes // dt.itemsize
        if not 1 <= mask <= lanes:
            raise _Fault(f"mask {mask} outside [1, {lanes}] for {dt}")
        return dt, lanes, self._blk_bytes // dt.itemsize

    def _operand(self, what: str, base: int, blk: int, rep: int, repeat: int, mask: int, e: int, isz: int) -> None:
        """Bounds/alignment of a repeat-model UB operand (``e`` lanes per block)."""
        if blk < 0 or rep < 0:
            raise _Fault(f"{what} strides must be >= 0 (blk {blk}, rep {rep})")
        bb = self._blk_bytes
        nfull, rem = divmod(mask, e)
        last = (repeat - 1) * rep * bb
        hi = last + (nfull - 1) * blk * bb + bb if nfull else 0
        if rem:
            hi = max(hi, last + nfull * blk * bb + rem * isz)
        self._onchip("ub", what, base, hi)

    def _pieces(self, ops, repeat: int, mask: int, lanes: int, e: int, dt: np.dtype) -> list[list[np.ndarray]]:
        """Views of the active lanes of each operand ``(base, blk, rep)``: one or two pieces of same-shape views."""
        ub, isz, bb = self._v, dt.itemsize, self._blk_bytes
        if all(blk == 1 for _, blk, _ in ops):
            if mask == lanes and all(rep == self._nblk for _, _, rep in ops):
                n = repeat * lanes
                return [[ub("ub", base, (n,), (isz,), dt) for base, _, _ in ops]]
            return [[ub("ub", base, (repeat, mask), (rep * bb, isz), dt) for base, _, rep in ops]]
        nfull, rem = divmod(mask, e)
        out = []
        if nfull:
            out.append([ub("ub", base, (repeat, nfull, e), (rep * bb, blk * bb, isz), dt) for base, blk, rep in ops])
        if rem:
            out.append([ub("ub", base + nfull * blk * bb, (repeat, rem), (rep * bb, isz), dt)
                        for base, blk, rep in ops])
        return out

    def _make_vector(self, m: str):
        f32 = _F32
        binary = {"vadd": np.add, "vsub": np.subtract, "vmul": np.multiply, "vmax": np.maximum, "vmin": np.minimum,
                  "vand": np.bitwise_and, "vor": np.bitwise_or, "vxor": np.bitwise_xor}
        scalar = {"vadds": np.add, "vmuls": np.multiply, "vmaxs": np.maximum, "vmins": np.minimum}
        unary = {"vabs": np.abs}
        unary32 = {"vexp": np.exp, "vln": np.log, "vsqrt": np.sqrt, "vrec": lambda x: np.divide(1.0, x, dtype=f32)}

        if m in binary or m in ("vdiv", "vmla"):
            nsrc = 2
            if m == "vmla":
                def op(d, s0, s1, sc):  # the product rounded to the dtype, then the sum (isa.py)
                    if d.dtype == _F16:
                        p = _f16_op(np.multiply, s0, s1).astype(_F16)  # the rounded product
                        np.copyto(d, _f16_op(np.add, d, p), casting="unsafe")
                    else:
                        np.add(d, np.multiply(s0, s1), out=d)
            elif m == "vdiv":
                def op(d, s0, s1, sc):
                    np.copyto(d, np.divide(s0, s1, dtype=f32), casting="unsafe")
            elif m in ("vadd", "vsub", "vmul"):
                uf = binary[m]

                def op(d, s0, s1, sc):
                    if d.dtype == _F16:
                        np.copyto(d, _f16_op(uf, s0, s1), casting="unsafe")
                    else:
                        uf(s0, s1, out=d)
            else:
                uf = binary[m]

                def op(d, s0, s1, sc):
                    uf(s0, s1, out=d)
        elif m in scalar:
            nsrc = 1
            uf = scalar[m]

            def op(d, s0, sc):
                uf(s0, sc, out=d)
        elif m == "vrelu":
            nsrc = 1

            def op(d, s0, sc):
                if d.dtype == _F16:  # np.maximum(s0, 0) on the bits (numpy's float16 loop is scalar)
                    u = s0.view(np.uint16)
                    # zeroed: 0x8001..0xFC00, the negative numbers down to -inf (-0 stays -0 and a NaN
                    # stays itself, as in numpy's maximum)
                    neg = np.subtract(u, np.uint16(0x8001)) <= np.uint16(0x7BFF)
                    np.copyto(d.view(np.uint16), np.where(neg, np.uint16(0), u))
                else:
                    np.maximum(s0, d.dtype.type(0), out=d)
        elif m == "vmov":
            nsrc = 1

            def op(d, s0, sc):
                np.copyto(d, s0)
        elif m in unary:
            nsrc = 1
            uf = unary[m]

            def op(d, s0, sc):
                uf(s0, out=d)
        elif m in unary32:
            nsrc = 1
            uf = unary32[m]

            def op(d, s0, sc):
                np.copyto(d, uf(s0.astype(f32)), casting="unsafe")
        elif m == "vdup":
            nsrc = 0

            def op(d, sc):
                d[...] = sc
        else:  # pragma: no cover - table and simulator out of sync
            raise NotImplementedError(m)

        watch_op = m in _CAN_OVERFLOW
        divisor = _DIVISOR.get(m)

        def run(v) -> None:
            # validated operand views per distinct field tuple, kept per lane set (AICore._caches): the
            # buffers are never reallocated, so a plan stays valid for the core's lifetime (tiled kernels
            # repeat the same UB instructions); with it, for overflow detection, whether its dtype is a
            # float and whether the destination overlaps a source
            plans = self._caches[m]
            hit = plans.get(v)
            if hit is not None:
                plan, is_float, alias = hit
                if watch_op and is_float and self._ovf_watch is not None:
                    return checked(plan, alias)
                for views in plan:
                    op(*views)
                return
            code, dst, s0, s1, repeat, mask, db, s0b, s1b, dr, s0r, s1r, sc = v
            dt, lanes, e = self._vec_check(code, repeat, mask, m)
            isz = dt.itemsize
            ops = [(dst, db, dr)]
            self._operand("dst", dst, db, dr, repeat, mask, e, isz)
            if nsrc >= 1:
                self._operand("src0", s0, s0b, s0r, repeat, mask, e, isz)
                ops.append((s0, s0b, s0r))
            if nsrc == 2:
                self._operand("src1", s1, s1b, s1r, repeat, mask, e, isz)
                ops.append((s1, s1b, s1r))
            scv = dt.type(sc)
            plan = [(*views, scv) for views in self._pieces(ops, repeat, mask, lanes, e, dt)]
            if len(plans) >= _PLAN_CACHE:
                plans.clear()
            # aliasing within one lane (every lane's operands sit at the same offsets)
            is_float, alias = dt in _EXP_BITS, any(np.may_share_memory(p[0][0], x[0]) for p in plan for x in p[1:-1])
            plans[v] = (plan, is_float, alias)
            if watch_op and is_float and self._ovf_watch is not None:
                return checked(plan, alias)
            for views in plan:
                op(*views)

        def checked(plan, alias: bool) -> None:
            # operands are checked after the op unless the destination overlaps them
            n = self._n
            srcs = [x for p in plan for x in p[1:-1]]
            if alias and len(plan) == 1:
                # in place: the result goes to a new array first, so the sources are still there to
                # check when it holds inf/NaN (rare) instead of checking them before every run
                d, *rest = plan[0]
                res = np.empty(d.shape, d.dtype)
                op(res, *rest)
                hit = nonfinite_lanes(res) & self._ovf_watch
                if hit.any() and np.isfinite(rest[-1]):
                    hit &= ~_any_nonfinite(srcs, n)
                else:
                    hit = None
                np.copyto(d, res)
                if hit is None:
                    return
            else:
                bad_in = _any_nonfinite(srcs, n) if alias else None
                for views in plan:
                    op(*views)
                hit = _any_nonfinite([p[0] for p in plan], n) & self._ovf_watch
                if not hit.any() or not all(np.isfinite(p[-1]) for p in plan):
                    return
                hit &= ~(bad_in if alias else _any_nonfinite(srcs, n))
            if divisor is not None:  # a quotient overflows where its divisor is not zero (x / 0 is a division by zero)
                quot = np.zeros(n, bool)
                for p in plan:
                    quot |= (~np.isfinite(p[0]) & (p[divisor] != 0)).reshape(n, -1).any(axis=1)
                hit &= quot
            self._hit(hit)

        return run

    def _vconv(self, v, sdt: np.dtype, ddt: np.dtype) -> None:
        code, dst, s0, s1, repeat, mask, db, s0b, s1b, dr, s0r, s1r, sc = v
        n = self._rep_bytes // max(sdt.itemsize, ddt.itemsize)  # elements per repeat (64)
        if not 1 <= repeat <= self._max_repeat:
            raise _Fault(f"repeat {repeat} outside [1, {self._max_repeat}]")
        if not 1 <= mask <= n:
            raise _Fault(f"mask {mask} outside [1, {n}]")
        self._nonneg(dst_rep=dr, src0_rep=s0r)
        bb = self._blk_bytes
        self._onchip("ub", "dst", dst, (repeat - 1) * dr * bb + mask * ddt.itemsize)
        self._onchip("ub", "src0", s0, (repeat - 1) * s0r * bb + mask * sdt.itemsize)
        s = self._v("ub", s0, (repeat, mask), (s0r * bb, sdt.itemsize), sdt)
        d = self._v("ub", dst, (repeat, mask), (dr * bb, ddt.itemsize), ddt)
        if ddt.itemsize < sdt.itemsize and self._ovf_watch is not None:
            bad = nonfinite_lanes(s)
            np.copyto(d, s, casting="unsafe")
            self._watch(d, bad=bad)
            return
        np.copyto(d, s, casting="unsafe")

    def _contiguous(self, what: str, base: int, rep: int, repeat: int, mask: int, dt: np.dtype) -> np.ndarray:
        """The (repeat, mask) lanes of a contiguous-lane operand (vcmpv, vconv), bounds checked."""
        self._nonneg(**{f"{what}_rep": rep})
        bb = self._blk_bytes
        self._onchip("ub", what, base, (repeat - 1) * rep * bb + mask * dt.itemsize)
        return self._v("ub", base, (repeat, mask), (rep * bb, dt.itemsize), dt)

    def _vcmpv(self, v) -> None:
        code, mode, dst, s0, s1, repeat, mask, dr, s0r, s1r = v
        dt, lanes, e = self._vec_check(code, repeat, mask, "vcmpv")
        fn = _CMP.get(isa.CMP_MODES.get(mode, ""))
        if fn is None:
            raise _Fault(f"invalid compare mode {mode} (valid: {', '.join(f'{k}={n}' for k, n in isa.CMP_MODES.items())})")
        a = self._contiguous("src0", s0, s0r, repeat, mask, dt)
        b = self._contiguous("src1", s1, s1r, repeat, mask, dt)
        d = self._contiguous("dst", dst, dr, repeat, mask, _U8)
        np.copyto(d, fn(a, b), casting="unsafe")

    def _vconv_round(self, v) -> None:
        sc, dc, rnd, dst, s0, repeat, mask, dr, s0r = v
        sdt, ddt = self._dtype(sc), self._dtype(dc)
        modes = isa.VCONV_PAIRS.get((sc, dc))
        if modes is None:
            raise _Fault(f"no vconv from {sdt} to {ddt} (pairs: " +
                         ", ".join(f"{isa.DTYPES[a]}->{isa.DTYPES[b]}" for a, b in isa.VCONV_PAIRS) + ")")
        if rnd not in modes:
            raise _Fault(f"vconv {sdt}->{ddt} takes round modes "
                         f"{', '.join(f'{k}={isa.ROUND_MODES[k]}' for k in sorted(modes))}, got {rnd}")
        n = self._rep_bytes // max(sdt.itemsize, ddt.itemsize)
        if not 1 <= repeat <= self._max_repeat:
            raise _Fault(f"repeat {repeat} outside [1, {self._max_repeat}]")
        if not 1 <= mask <= n:
            raise _Fault(f"mask {mask} outside [1, {n}]")
        s = self._contiguous("src0", s0, s0r, repeat, mask, sdt)
        d = self._contiguous("dst", dst, dr, repeat, mask, ddt)
        bad = nonfinite_lanes(s) if self._ovf_watch is not None and ddt in _EXP_BITS else None
        np.copyto(d, convert(s, ddt, isa.ROUND_MODES[rnd]), casting="unsafe")
        if ddt in _EXP_BITS:
            self._watch(d, bad=bad)

    def _reduce(self, v, is_max: bool) -> None:
        code, dst, s0, s1, repeat, mask, db, s0b, s1b, dr, s0r, s1r, sc = v
        dt, lanes, e = self._vec_check(code, repeat, mask, "vcmax" if is_max else "vcadd")
        isz = dt.itemsize
        self._operand("src0", s0, s0b, s0r, repeat, mask, e, isz)
        self._onchip("ub", "dst", dst, repeat * isz)
        acc = None
        n = self._n
        for (p,) in self._pieces([(s0, s0b, s0r)], repeat, mask, lanes, e, dt):
            p = p.reshape(n, repeat, -1)
            # a float sum per lane, exactly as on one core (numpy's summation order follows the layout)
            r = p.max(axis=2) if is_max else np.stack([p[j].sum(axis=1, dtype=_F32) for j in range(n)])
            acc = r if acc is None else (np.maximum(acc, r) if is_max else acc + r)
        d = self._v("ub", dst, (repeat,), (isz,), dt)
        np.copyto(d, acc, casting="unsafe")
        if not is_max:  # a float32 sum narrowed to float16 may overflow
            self._watch(d, acc)

    def _vbrcb(self, v) -> None:
        code, dst, s0, s1, repeat, mask, db, s0b, s1b, dr, s0r, s1r, sc = v
        dt = self._dtype(code)
        if not 1 <= repeat <= self._max_repeat:
            raise _Fault(f"repeat {repeat} outside [1, {self._max_repeat}]")
        isz, n = dt.itemsize, repeat * self._rep_bytes
        self._onchip("ub", "src0", s0, isz)
        self._onchip("ub", "dst", dst, n)
        self._v("ub", dst, (n // isz,), (isz,), dt)[...] = self._v("ub", s0, (), (), dt)[:, None]


    def _vtranspose(self, v) -> None:
        code, dst, src, repeat, dr, sr, drow, srow = v
        dt = self._dtype(code)
        if not 1 <= repeat <= self._max_repeat:
            raise _Fault(f"repeat {repeat} outside [1, {self._max_repeat}]")
        if min(dr, sr, drow, srow) < 0:
            raise _Fault(f"vtranspose strides must be >= 0 (dst_rep {dr}, src_rep {sr}, dst_row {drow}, src_row {srow})")
        isz, bb = dt.itemsize, self._blk_bytes
        row = 16 * isz
        drow, srow = drow * bb or row, srow * bb or row
        if drow < row or srow < row:
            raise _Fault(f"vtranspose row strides of {min(drow, srow)} B overlap {row}-byte rows")
        s_hi = (repeat - 1) * sr * bb + 15 * srow + row
        d_hi = (repeat - 1) * dr * bb + 15 * drow + row
        if src < dst + d_hi and dst < src + s_hi:
            raise _Fault(f"vtranspose: source [{src}, {src + s_hi}) overlaps destination [{dst}, {dst + d_hi})")
        self._onchip("ub", "src", src, s_hi)
        a = self._v("ub", src, (repeat, 16, 16), (sr * bb, srow, isz), dt).copy()
        self._onchip("ub", "dst", dst, d_hi)
        self._v("ub", dst, (repeat, 16, 16), (dr * bb, isz, drow), dt)[...] = a

    def _vsel(self, v) -> None:
        code, dst, cond, s0, s1, repeat, mask, db, cb, s0b, s1b, dr, cr, s0r, s1r = v
        dt, lanes, e = self._vec_check(code, repeat, mask, "vsel")
        isz = dt.itemsize
        ops = [(dst, db, dr), (cond, cb, cr), (s0, s0b, s0r), (s1, s1b, s1r)]
        for what, (base, blk, rep) in zip(("dst", "cond", "src0", "src1"), ops):
            self._operand(what, base, blk, rep, repeat, mask, e, isz)
        for d, c, a, b in self._pieces(ops, repeat, mask, lanes, e, dt):
            np.copyto(d, np.where(c != 0, a, b))
