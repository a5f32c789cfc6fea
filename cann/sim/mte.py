"""The memory-transfer engines and the cube of the simulated AI Core (:class:`cann.sim.core.AICore`):
GM <-> buffer DMA, ``nd2nz``, ``load2d``, ``img2col``, ``mmad`` and the L0C -> UB copy, each on every
lane of a lockstep run (operands are views with a leading core axis: :mod:`cann.sim.lanes`).
Semantics: :mod:`cann.hw.isa` and ``docs/core-model.md``."""

from __future__ import annotations

import numpy as np

from cann.hw import isa
from cann.sim.cost import L0C_ITEMSIZE
from cann.sim.lanes import _F16_TO_F32, _F32, _MAX_SLAB, _Fault
from cann.sim.memo import Verified
from cann.sim.uniform import classes, layout

_U64 = np.dtype(np.uint64)
_GEOMETRY_CACHE = 8192  # checked img2col field tuples kept with their geometry
_F32_CACHE = 64  # float32 mmad operands kept by address between two writes of their bytes (entries)
_F32_CACHE_BYTES = 128 << 20  # the bytes of those and of the ones kept by content token, at most


def _lanes(lay) -> slice | list:
    """The first lane of each class of :class:`cann.sim.uniform.Layout` ``lay`` (an index)."""
    return list(lay.distinct) if lay.step is None else slice(0, (len(lay.distinct) - 1) * lay.step + 1, lay.step)


class TransferUnit:
    """Mixin of :class:`cann.sim.core.AICore`: the MTE and cube instruction handlers (they use the
    core's checks, ``_v`` / ``_gm`` views and overflow watch)."""

    # -----------------------------------------------------------------------------------------
    # MTE: DMA, nd2nz, load2d, img2col

    def _bursts(self, nburst: int, burst: int, src_stride: int, dst_stride: int) -> None:
        self._positive(nburst=nburst, burst=burst)
        self._nonneg(src_stride=src_stride, dst_stride=dst_stride)
        if nburst > 1 and dst_stride < burst:
            raise _Fault(f"dst_stride {dst_stride} < burst {burst}: destination bursts overlap")

    @staticmethod
    def _shape(nburst: int, burst: int, ss: int, ds: int) -> tuple[tuple, tuple, tuple]:
        """(shape, source strides, destination strides) of a burst copy (one run when contiguous)."""
        if nburst == 1 or (ss == burst and ds == burst):
            return (nburst * burst,), (1,), (1,)
        return (nburst, burst), (ss, 1), (ds, 1)

    def _dma_in(self, buf: str, v) -> None:
        dst, src_arg, src, nburst, burst, ss, ds = v
        self._bursts(nburst, burst, ss, ds)
        self._gm_addr("src", src_arg, src, (nburst - 1) * ss + burst)
        self._onchip(buf, "dst", dst, (nburst - 1) * ds + burst, nburst == 1 or ds == burst)
        shape, sst, dst_st = self._shape(nburst, burst, ss, ds)
        rep = sel = None
        if self._n > 1 and (nburst == 1 or ds == burst) and buf != "ub":
            rep = classes(self._bases[src_arg])  # lanes reading the same GM address get the same bytes
            lay = layout(rep) if rep is not None else None
            if lay is not None and lay.step is not None:  # copy to the first lane of each class only
                sel = slice(0, (len(lay.distinct) - 1) * lay.step + 1, lay.step)
        d, g = self._v(buf, dst, shape, dst_st), self._gm(src_arg, src, shape, sst, lanes=sel)
        if sel is not None:
            d = d[sel]
        if type(g) is list:
            for j, x in enumerate(g):
                d[j] = x
        else:
            (d.reshape(g.shape) if g.ndim > d.ndim else d)[...] = g  # a lane grid: split the lane axis
        if rep is not None:
            self._uni.mark(buf, dst, dst + nburst * burst, rep)
            if sel is not None:  # the other lanes' copies are owed
                self._uni.owe(buf, dst, dst + nburst * burst, rep)

    def _reg(self, reg: int) -> None:
        if not 0 <= reg < len(self.regs):
            raise _Fault(f"reg {reg} outside [0, {len(self.regs)})")

    def _one_lane(self, m: str) -> None:
        if self._n != 1:
            raise _Fault(f"{m}: data-dependent addressing runs on one core at a time (simulator contract, "
                         f"cann.sim.lockstep)")

    def _ld_idx(self, v) -> None:
        self._one_lane("ld_idx")
        reg, code, src, bound = v
        self._reg(reg)
        dt = isa.IDX_DTYPES.get(code)
        if dt is None:
            raise _Fault(f"invalid index dtype code {code} (valid: "
                         f"{', '.join(f'{k}={d}' for k, d in isa.IDX_DTYPES.items())})")
        self._positive(bound=bound)
        if src % dt.itemsize:
            raise _Fault(f"src: UB address {src} is not aligned to the {dt} element size {dt.itemsize}")
        if src < 0 or src + dt.itemsize > self.limit["ub"]:
            raise _Fault(f"src: UB bytes [{src}, {src + dt.itemsize}) outside the buffer (capacity {self.limit['ub']} bytes)")
        x = int(self._v("ub", src, (), (), dt)[0])
        idx = x + bound if x < 0 else x
        if not 0 <= idx < bound:
            raise _Fault(f"index {x} out of range [{-bound}, {bound - 1}] (bound {bound}): a Gather index outside "
                         f"the data tensor")
        self.regs[reg] = idx

    def _dma_reg(self, v) -> None:
        self._one_lane("copy_gm_to_ub_reg")
        dst, src_arg, src, nburst, burst, ss, ds, reg, rs = v
        self._reg(reg)
        self._nonneg(reg_stride=rs)
        self._dma_in("ub", (dst, src_arg, src + self.regs[reg] * rs, nburst, burst, ss, ds))
        self.reg_trace.append(self.regs[reg])

    def _dma_out(self, v) -> None:
        dst_arg, dst, src, nburst, burst, ss, ds = v
        self._bursts(nburst, burst, ss, ds)
        self._onchip("ub", "src", src, (nburst - 1) * ss + burst)
        self._gm_addr("dst", dst_arg, dst, (nburst - 1) * ds + burst)
        shape, sst, dst_st = self._shape(nburst, burst, ss, ds)
        self._put(self._gm(dst_arg, dst, shape, dst_st, write=True), self._v("ub", src, shape, sst))

    def _dma_add(self, v) -> None:
        """``copy_ub_to_gm_add``: GM elements += UB elements (float32 sum rounded to the dtype)."""
        dst_arg, dst, src, nburst, burst, ss, ds, code = v
        dt = self._fdtype(code)
        isz = dt.itemsize
        self._bursts(nburst, burst, ss, ds)
        if burst % isz or (nburst > 1 and (ss % isz or ds % isz)):
            raise _Fault(f"copy_ub_to_gm_add: burst {burst} / strides {ss}, {ds} are not whole {dt} elements")
        self._onchip("ub", "src", src, (nburst - 1) * ss + burst)
        self._gm_addr("dst", dst_arg, dst, (nburst - 1) * ds + burst)
        shape = (nburst, burst // isz)
        g = self._gm(dst_arg, dst, shape, (ds, isz), dt, write=True)
        u = self._v("ub", src, shape, (ss, isz), dt)
        if type(g) is list:
            for j, x in enumerate(g):
                x[...] = (x.astype(_F32) + u[j].astype(_F32)).astype(dt)
        else:
            g[...] = (g.astype(_F32) + u.reshape(g.shape).astype(_F32)).astype(dt)

    def _nd2nz(self, v) -> None:
        code, dst, src_arg, src, rows, cols, stride = v
        dt = self._fdtype(code)
        self._positive(rows=rows, cols=cols)
        self._nonneg(src_row_stride=stride)
        isz = dt.itemsize
        c0 = self._blk_bytes // isz
        c1, r16 = -(-cols // c0), -(-rows // self._m0) * self._m0
        row_bytes = cols * isz
        self._gm_addr("src", src_arg, src, (rows - 1) * stride + row_bytes)
        self._onchip("l1", "dst", dst, c1 * r16 * c0 * isz, True)
        g = self._gm(src_arg, src, (rows, row_bytes), (stride, 1))
        n = self._n
        mat = (np.stack(g) if type(g) is list else np.ascontiguousarray(g)).view(dt).reshape(n, rows, cols)
        out = self._v("l1", dst, (c1, r16, c0), (r16 * c0 * isz, c0 * isz, isz), dt)
        if rows == r16 and cols == c1 * c0:
            out[...] = mat.reshape(n, rows, c1, c0).transpose(0, 2, 1, 3)
        else:
            pad = np.zeros((n, r16, c1 * c0), dt)
            pad[:, :rows, :cols] = mat
            out[...] = pad.reshape(n, r16, c1, c0).transpose(0, 2, 1, 3)
        if n > 1:  # lanes reading the same GM address got the same bytes
            self._uni.mark("l1", dst, dst + c1 * r16 * c0 * isz, classes(self._bases[src_arg]))

    def _load2d(self, v) -> None:
        space, dst, src, repeat, ss, ds = v
        if space not in (isa.L0A, isa.L0B):
            raise _Fault(f"invalid dst_space {space} (valid: {isa.L0A} = L0A, {isa.L0B} = L0B)")
        f = self._frac
        self._positive(repeat=repeat)
        self._nonneg(src_stride=ss, dst_stride=ds)
        if repeat > 1 and ds < f:
            raise _Fault(f"dst_stride {ds} < {f}: destination fractals overlap")
        buf = "l0a" if space == isa.L0A else "l0b"
        self._onchip("l1", "src", src, (repeat - 1) * ss + f)
        self._onchip(buf, "dst", dst, (repeat - 1) * ds + f, repeat == 1 or ds == f)
        shape, sst, dst_st = self._shape(repeat, f, ss, ds)
        hi = src + (repeat - 1) * ss + f
        rep = self._uni.classes("l1", src, hi) if self._n > 1 else None
        lay = layout(rep) if rep is not None and (repeat == 1 or ds == f) else None
        if lay is not None and lay.step is not None:  # the first lane of each class only (copies owed)
            sel = slice(0, (len(lay.distinct) - 1) * lay.step + 1, lay.step)
            self._v(buf, dst, shape, dst_st)[sel] = self._v("l1", src, shape, sst)[sel]
            self._uni.mark(buf, dst, dst + repeat * f, rep)
            self._uni.owe(buf, dst, dst + repeat * f, rep)
            return
        if self._n > 1:
            self._flush("l1", src, hi)
        self._v(buf, dst, shape, dst_st)[...] = self._v("l1", src, shape, sst)
        if lay is not None:
            self._uni.mark(buf, dst, dst + repeat * f, rep)

    def _img2col_geometry(self, v, c0: int | None = None) -> tuple:
        """Checks img2col fields ``v`` (faults as the handler's) and returns what every run of them
        uses: ``(dt, src, src_hi, dst, nbytes, dst5 shape, dst5 strides, window)``; ``window`` is
        None when no wanted row and column is inside the output, else the slab and gather geometry.
        ``c0``: the map's channel size (None: NC1HWC0's 16; 4: ``img2col_c04``'s NC1HWC0_C04)."""
        (code, dst, src, c1, fh, fw, pt, pb, pl, pr, sh, sw, kh, kw, dh, dw, m_start, m_count, k_start, k_count,
         pitch) = v
        dt = self._fdtype(code)
        isz = dt.itemsize
        c0 = c0 or self._n0  # NC1HWC0 with C0 = 16 for both dtypes
        k0 = self.spec.cube.k0(isz)
        self._positive(fm_c1=c1, fm_h=fh, fm_w=fw, stride_h=sh, stride_w=sw, kernel_h=kh, kernel_w=kw,
                       dil_h=dh, dil_w=dw, m_count=m_count, k_count=k_count)
        self._nonneg(pad_t=pt, pad_b=pb, pad_l=pl, pad_r=pr, m_start=m_start, k_start=k_start)
        if m_count % self._m0:
            raise _Fault(f"m_count {m_count} is not a multiple of {self._m0}")
        if k_start % k0 or k_count % k0:
            raise _Fault(f"k_start {k_start} and k_count {k_count} must be multiples of k0 = {k0}")
        ho = (fh + pt + pb - dh * (kh - 1) - 1) // sh + 1
        wo = (fw + pl + pr - dw * (kw - 1) - 1) // sw + 1
        if ho < 1 or wo < 1:
            raise _Fault(f"empty output: {ho}x{wo} positions for a {fh}x{fw} map, kernel {kh}x{kw}, "
                         f"dilation {dh}x{dw}, pads t{pt} b{pb} l{pl} r{pr}")
        block = fh * fw * c0 * isz  # bytes of one packed C1 block
        pitch = pitch or block  # 0: packed (kernels of .om format versions before 6)
        if pitch < block:
            raise _Fault(f"fm_c1_stride {pitch} is less than a {fh}x{fw}x{c0} C1 block ({block} bytes): the "
                         f"blocks overlap")
        span = (c1 - 1) * pitch + block  # C1 block c at src + c*pitch
        self._onchip("l1", "src", src, span)
        self._onchip("l0a", "dst", dst, m_count * k_count * isz, True)
        m0 = self._m0
        # the destination as the (n, m_count, k_count) matrix split into fractals: (n, m1, m0, k1, k0)
        head = (dt, src, src + span, dst, m_count * k_count * isz,
                (m_count // m0, m0, k_count // k0, k0), (k_count * m0 * isz, k0 * isz, m0 * k0 * isz, isz))
        m_hi = min(m_start + m_count, ho * wo)
        k_per_c1 = kh * kw * c0
        k_hi = min(k_start + k_count, c1 * k_per_c1)
        if m_hi <= m_start or k_hi <= k_start:
            return head + (None,)
        # the slab of the padded map the wanted rows (output rows oh0..oh1) and columns (c1 ca..cb) read
        oh0, oh1 = m_start // wo, (m_hi - 1) // wo
        ca, cb = k_start // k_per_c1, (k_hi - 1) // k_per_c1 + 1
        p0, p1 = oh0 * sh, oh1 * sh + dh * (kh - 1) + 1  # padded rows [p0, p1)
        wp = fw + pl + pr
        slab_bytes = (cb - ca) * (p1 - p0) * wp * c0 * isz
        if slab_bytes > _MAX_SLAB:
            raise _Fault(f"the padded window this img2col reads ({cb - ca} x {p1 - p0} x {wp} x {c0} elements) "
                         f"exceeds the simulator's {_MAX_SLAB}-byte limit (pads, strides or dilation too large)")
        r0, r1 = max(p0, pt), min(p1, pt + fh)  # padded rows holding real data
        return head + ((
            (c1, fh, fw, c0), (pitch, fw * c0 * isz, c0 * isz, isz),  # the map
            (slice(ca, cb), slice(r0 - pt, r1 - pt)),  # its part in the slab
            r0 == p0 and r1 == p1 and wp == fw,  # no padding in the window: read the map in place
            (cb - ca, p1 - p0, wp, c0), (slice(None), slice(r0 - p0, r1 - p0), slice(pl, pl + fw)),
            (cb - ca, oh1 - oh0 + 1, wo, kh, kw, c0), (sh, sw, dh, dw), (oh1 - oh0 + 1) * wo,
            slice(m_start - oh0 * wo, m_hi - oh0 * wo), slice(k_start - ca * k_per_c1, k_hi - ca * k_per_c1),
            m_hi - m_start == m_count and k_hi - k_start == k_count, (m_count, k_count),
            (m_hi - m_start, k_hi - k_start), max(1, _MAX_SLAB // slab_bytes), r1 > r0),)

    def _geometry_of(self, v, build) -> tuple[tuple, bool]:
        """``(build(v), cached)``: an instruction's checked fields and geometry, built (with its
        checks) once per field tuple."""
        g = self._geometry.get(v)
        if g is not None:
            return g, True
        if len(self._geometry) >= _GEOMETRY_CACHE:
            self._geometry.clear()
        g = self._geometry[v] = build(v)
        return g, False

    def _img2col_c04(self, v) -> None:
        """``img2col_c04``: img2col over a [c1][h][w][4] map (its geometry cached apart from img2col's)."""
        self._img2col(v, 4)

    def _img2col(self, v, c0: int | None = None) -> None:
        if c0 is None:
            g, cached = self._geometry_of(v, self._img2col_geometry)
        else:
            v = (c0,) + v  # also the memo key below: a C04 matrix is not the img2col of the same fields
            g, cached = self._geometry_of(v, lambda kv: self._img2col_geometry(kv[1:], kv[0]))
        if cached:  # (built: the destination check did this)
            self._stale("l0a", g[3], g[3] + g[4])
            self._memo.written("l0a", g[3], g[3] + g[4])
            if self._n > 1:
                self._written("l0a", g[3], g[4], True)
        dt, src, src_hi, dst, nbytes, d_shape, d_strides, win = g
        # lanes whose maps are known equal (cann.sim.uniform): build the matrix on the first lane of
        # each class only (the other lanes' copies are owed)
        rep = self._uni.classes("l1", src, src_hi) if self._n > 1 else None
        lay = layout(rep) if rep is not None else None
        sel = slice(None) if lay is None or lay.step is None else \
            slice(0, (len(lay.distinct) - 1) * lay.step + 1, lay.step)
        # the same fields on the same (unwritten) map built these bytes before: copy them (cann.sim.memo)
        where, key = ("l1", src, src_hi), (v, rep)
        kept = self._memo.get(where, key)
        if kept is not None:
            token, raw = kept
            self._v("l0a", dst, (nbytes,), (1,))[sel] = raw
            n = raw.shape[0]
        else:
            n = self._img2col_build(g, lay, sel)
            token = self._memo.put(where, key, self._v("l0a", dst, (nbytes,), (1,))[sel].copy())
        self._memo.tag("l0a", dst, dst + nbytes, token)
        if lay is not None:
            self._uni.mark("l0a", dst, dst + nbytes, rep)
            if n < self._n:  # built on the first lane of each class only
                self._uni.owe("l0a", dst, dst + nbytes, rep)

    def _img2col_build(self, g: tuple, lay, sel: slice) -> int:
        """Builds the img2col matrix of geometry ``g`` (:meth:`_img2col_geometry`) on lanes ``sel``
        (the first of each class of ``lay``, or all); returns how many lanes that is."""
        dt, src, src_hi, dst, nbytes, d_shape, d_strides, win = g
        if self._n > 1 and (lay is None or lay.step is None):  # reads every lane's map
            self._flush("l1", src, src_hi)
        dst5 = self._v("l0a", dst, d_shape, d_strides, dt)[sel]
        n = dst5.shape[0]
        if win is None:
            dst5[...] = 0
        else:
            (fm_shape, fm_strides, part, inplace, slab_shape, inner, shape, (sh, sw, dh, dw), rows_all, msl, ksl,
             full, mk, got, chunk, any_rows) = win
            fm = self._v("l1", src, fm_shape, fm_strides, dt)[sel]
            out = None if full else np.zeros((n,) + mk, dt)
            for j0 in range(0, n, chunk):
                nj = min(chunk, n - j0)
                if inplace:
                    slab = fm[(slice(j0, j0 + nj),) + part]
                else:
                    slab = np.zeros((nj,) + slab_shape, dt)
                    if any_rows:
                        slab[(slice(None),) + inner] = fm[(slice(j0, j0 + nj),) + part]
                s = slab.strides
                sz = (nj,) + shape
                strides = (s[0], s[1], s[2] * sh, s[3] * sw, s[2] * dh, s[3] * dw, s[4])  # unused (maybe huge) at size 1
                strides = tuple(0 if k == 1 else st for k, st in zip(sz, strides))
                # (a new slab is a whole array: its windows are a plain ndarray on it, cheaper than as_strided)
                w7 = np.lib.stride_tricks.as_strided(slab, sz, strides, writeable=False) if inplace else \
                    np.ndarray(sz, dt, buffer=slab, strides=strides)
                # every position of output rows oh0..oh1 (one copy), then the wanted rows and columns
                rows = w7.transpose(0, 2, 3, 1, 4, 5, 6).reshape(nj, rows_all, -1)[:, msl, ksl]
                if full:
                    dst5[j0:j0 + nj] = rows.reshape((nj,) + d_shape)
                else:
                    out[j0:j0 + nj, :got[0], :got[1]] = rows
            if not full:
                dst5[...] = out.reshape(dst5.shape)
        return n

    # -----------------------------------------------------------------------------------------
    # cube

    def _mmad_geometry(self, v) -> tuple:
        """Checks mmad fields ``v`` (faults as the handler's) and returns what every run of them uses."""
        code, dst, a, b, m, k, n, init = v
        dt = self._fdtype(code)
        isz = dt.itemsize
        k0, m0, n0 = self.spec.cube.k0(isz), self._m0, self._n0
        self._positive(m=m, k=k, n=n)
        if m % m0 or n % n0 or k % k0:
            raise _Fault(f"m={m}, n={n} must be multiples of {m0}/{n0} and k={k} a multiple of k0 = {k0}")
        if init not in (0, 1):
            raise _Fault(f"init must be 0 or 1, got {init}")
        self._onchip("l0a", "a", a, m * k * isz)
        self._onchip("l0b", "b", b, k * n * isz)
        self._onchip("l0c", "dst", dst, m * n * L0C_ITEMSIZE)
        # A: (m1, k1, m0, k0) fractals read as the (m, k) matrix; B: (k1, n1, n0, k0) as (k, n)
        return (dt, a + m * k * isz, b + k * n * isz, (m // m0, m0, k // k0, k0), (k * m0 * isz, k0 * isz, m0 * k0 * isz, isz),
                (k // k0, k0, n // n0, n0), (n * k0 * isz, isz, n0 * k0 * isz, k0 * isz), n0)

    def _mmad(self, v) -> None:
        g, _ = self._geometry_of(v, self._mmad_geometry)
        _, dst, a, b, m, k, n, init = v
        dt, a_hi, b_hi, a_shape, a_strides, b_shape, b_strides, n0 = g
        nl = self._n
        # an operand holding the same bytes on a class of lanes (cann.sim.uniform) is converted once per class
        ra = self._uni.classes("l0a", a, a_hi) if nl > 1 else None
        rb = self._uni.classes("l0b", b, b_hi) if nl > 1 else None
        la, lb = (layout(ra) if ra else None), (layout(rb) if rb else None)
        # an operand is often multiplied by several others between two writes of its bytes (A by the N
        # tiles of one img2col matrix, B -- the weights -- by the M tiles): its float32 values are
        # kept until then (_f32_operand)
        A = self._f32_operand("l0a", a, a_hi, m * k, a_shape, a_strides, dt, la).reshape(-1, m, k)
        B = self._f32_operand("l0b", b, b_hi, 0, b_shape, b_strides, dt, lb).reshape(-1, k, n)
        # one BLAS gemm per lane, each as the single-core product: np.matmul loops over the (p, q) lane
        # grid, an operand shared by a class of lanes broadcast to each of their gemms (_grid)
        q = next((x for lay in (la, lb) if lay is not None and len(lay.distinct) > 1
                  for x in (lay.block, lay.inter) if x > 1), nl)
        Ag, Bg = self._grid(A, la, nl, q), self._grid(B, lb, nl, q)
        if init and n == n0 and (max(Ag.shape[0], Bg.shape[0]), max(Ag.shape[1], Bg.shape[1])) == (nl // q, q):
            # one fractal column: each lane's (m, n) product is its L0C bytes, so the gemms write there
            # (the same BLAS call per lane, into a blasable view instead of a new array)
            out = self._v("l0c", dst, (m, n0), (n0 * 4, 4), _F32)
            np.matmul(Ag, Bg, out=out.reshape(nl // q, q, m, n0))
            return
        C = np.matmul(Ag, Bg)
        if C.shape[0] * C.shape[1] not in (1, nl):
            C = np.broadcast_to(C, (nl // q, q) + C.shape[2:])
        C = C.reshape(-1, m, n // n0, n0).transpose(0, 2, 1, 3)
        out = self._v("l0c", dst, (n // n0, m, n0), (m * n0 * 4, n0 * 4, 4), _F32)
        if init:
            out[...] = C
        else:
            out += C

    def _f32_operand(self, buf: str, lo: int, hi: int, count: int, shape: tuple, strides: tuple, dt: np.dtype,
                     lay) -> np.ndarray:
        """mmad operand ``[lo, hi)`` of ``buf`` as float32 (:meth:`_as_f32`: ``(lanes,) + shape``, or
        ``(classes,) + shape`` with a :class:`cann.sim.uniform.Layout` ``lay``; ``count`` > 0: its
        elements are contiguous, lanes holding the previous lane's bytes are converted once,
        :meth:`_as_f32_lanes`), from the cache ``_f32`` when no instruction wrote those bytes since it
        was converted (:meth:`_stale`), or -- bytes holding a :mod:`cann.sim.memo` token -- from
        ``_f32_tok`` by token (never stale); both are emptied at every run. The array is shared: never
        mutate it."""
        at = self._memo.token_at(buf, lo, hi)  # named content: the key outlives writes (cann.sim.memo)
        cache = self._f32 if at is None else self._f32_tok
        key = (buf, lo, shape, strides, dt, lay) if at is None else (at[0], lo - at[1], shape, strides, dt, lay)
        hit = cache.get(key)
        if hit is not None:
            return hit[3]
        if lay is None and self._n > 1:
            self._flush(buf, lo, hi)
        words = vkey = x = None
        if buf == "l0b" and (lo | hi) % 8 == 0:  # weights: kept across runs, verified by their bytes
            words = self._v(buf, lo, ((hi - lo) // 8,), (8,), _U64)
            words = words[_lanes(lay)] if lay is not None else words
            vkey = Verified.key((buf, lo, shape, strides, dt, lay, self._lane0, self._n, self._lane_step), words)
            x = self._verified.get(vkey, words)
        if x is None:
            x = self._as_f32_lanes(buf, lo, count, shape, strides, dt) if count and lay is None else \
                self._as_f32(buf, lo, shape, strides, dt, lay)
            if vkey is not None:
                self._verified.put(vkey, words, x)
        if len(self._f32) >= _F32_CACHE or self._f32_bytes + x.nbytes > _F32_CACHE_BYTES:
            self._f32.clear()
            self._f32_tok.clear()
            self._f32_bytes = 0
        cache[key] = (buf, lo, hi, x)
        self._f32_bytes += x.nbytes
        return x

    def _stale(self, buf: str, lo: int, hi: int) -> None:
        """Bytes ``[lo, hi)`` of ``buf`` are about to be written: drop the float32 operands converted
        from them (:meth:`_f32_operand`)."""
        c = self._f32
        if c:
            for key in [key for key, (b, a, z, _) in c.items() if b == buf and a < hi and lo < z]:
                self._f32_bytes -= c.pop(key)[3].nbytes

    def _as_f32_lanes(self, buf: str, off: int, count: int, shape: tuple, strides: tuple, dt: np.dtype) -> np.ndarray:
        """:meth:`_as_f32` of an operand whose ``count`` elements are contiguous at ``off``, converting
        each distinct lane once: lanes holding the same bytes as the lane before them (the cores of a
        channel-split convolution share their img2col matrix) take a copy of its values."""
        n = self._n
        if n == 1 or dt.itemsize != 2:
            return self._as_f32(buf, off, shape, strides, dt)
        raw = self._v(buf, off, (count,), (2,), np.dtype(np.uint16))  # (n, count)
        same = (raw[1:] == raw[:-1]).all(axis=1)  # lane j holds lane j-1's bytes
        if not same.any():
            return self._as_f32(buf, off, shape, strides, dt)
        first = np.flatnonzero(np.concatenate(([True], ~same)))  # the lanes that start a run
        inv = np.cumsum(np.concatenate(([1], ~same))) - 1  # lane -> its run
        u = self._v(buf, off, shape, strides, np.dtype(np.uint16))[first]
        return np.take(_F16_TO_F32, u, mode="clip")[inv]

    @staticmethod
    def _grid(x: np.ndarray, lay, nl: int, q: int) -> np.ndarray:
        """Operand ``x`` (one matrix per lane, or per class of ``lay``: ``(c, r, s)``) as a
        ``(p, q, r, s)`` array broadcastable to the lanes' ``(nl // q, q)`` grid (lane j at
        ``(j // q, j % q)``): a shared matrix is not copied when its classes follow the grid."""
        r, s = x.shape[1:]
        if lay is None:
            return x.reshape(nl // q, q, r, s)
        c = len(lay.distinct)
        if c == 1:
            return x.reshape(1, 1, r, s)
        if lay.block == q:
            return x.reshape(c, 1, r, s)
        if lay.inter == q:
            return x.reshape(1, c, r, s)
        return x[list(lay.inv)].reshape(nl // q, q, r, s)

    def _as_f32(self, buf: str, off: int, shape: tuple, strides: tuple, dt: np.dtype, lay=None) -> np.ndarray:
        """The elements of ``dt`` at byte ``off`` of ``buf`` (``shape``, byte ``strides``) on every lane
        (with a :class:`cann.sim.uniform.Layout` ``lay``: on the first lane of each class only) as a new
        C-ordered ``(n,) + shape`` (``(classes,) + shape``) float32 array (float16 through a 64
        Ki-entry table: exact, and faster than numpy's float16 cast)."""
        sel = slice(None) if lay is None else _lanes(lay)
        if dt.itemsize == 2:
            # every uint16 is a valid index: "clip" skips numpy's bounds check (about twice as fast)
            return np.take(_F16_TO_F32, self._v(buf, off, shape, strides, np.dtype(np.uint16))[sel], mode="clip")
        return np.ascontiguousarray(self._v(buf, off, shape, strides, _F32)[sel])

    def _l0c_to_ub(self, v) -> None:
        code, dst, src, n1, m, src_m = v
        dt = self._fdtype(code)
        self._positive(n1=n1, m=m)
        if src_m < m:
            raise _Fault(f"src_m {src_m} < m {m}")
        n0, isz = self._n0, dt.itemsize
        self._onchip("l0c", "src", src, n1 * src_m * n0 * L0C_ITEMSIZE)
        self._onchip("ub", "dst", dst, n1 * m * n0 * isz)
        s = self._v("l0c", src, (n1, m, n0), (src_m * n0 * 4, n0 * 4, 4), _F32)
        d = self._v("ub", dst, (n1, m, n0), (m * n0 * isz, n0 * isz, isz), dt)
        np.copyto(d, s, casting="unsafe")
        self._watch(d, s)
