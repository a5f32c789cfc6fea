"""Cube kernels: Conv (img2col + mmad) and Gemm/MatMul (nd2nz + load2d + mmad).

Weights are constants, stored in GM in the cube's layout at compile time: FRACTAL_Z
(``[K1][N1][16][k0]``, the Zn layout L0B takes) with ``K`` ordered ``(c1, kh, kw, c0)`` as img2col
produces it (ascend-core.md §2.3). Grouped convolutions are computed as one dense convolution with
a block-diagonal weight (exact; costs ``group`` times the MACs: a later issue maps depthwise
convolutions to the vector unit).

Tiling (recorded on each kernel as ``tile.tiling``, overridable per kernel): ``n`` output channels
and ``k`` reduction columns per L0B tile, ``m`` output positions per L0A tile, ``rows`` output rows
per L1 feature-map tile. Defaults fill L0A/L0B and keep the accumulator of a whole row tile in L0C.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from cann.dialects import tile
from cann.dialects.tile import Space
from cann.lowering.common import ND, NC1HWC0, DevTensor, KernelBuilder, Lowering, unsupported


def _ceil(a: int, b: int) -> int:
    return -(-a // b) * b


def fractal_z(bmat: np.ndarray, k0: int, dtype: np.dtype) -> np.ndarray:
    """A ``[K, N]`` matrix in the Zn layout ``[K/k0][N1][16][k0]`` (K padded to k0, N to 16)."""
    k, n = bmat.shape
    kp, np_ = _ceil(k, k0), _ceil(n, 16)
    padded = np.zeros((kp, np_), np.float32)
    padded[:k, :n] = bmat
    return np.ascontiguousarray(padded.reshape(kp // k0, k0, np_ // 16, 16).transpose(0, 2, 3, 1)).astype(dtype)


def bias_table(bias: np.ndarray | None, n: int, lanes: int, dtype: np.dtype) -> np.ndarray:
    """Per-C0-block rows of ``lanes`` elements: row j repeats bias[16j:16j+16] (one vector repeat)."""
    n1 = math.ceil(n / 16)
    b = np.zeros(n1 * 16, np.float32)
    if bias is not None:
        b[:n] = bias.reshape(-1)
    return np.ascontiguousarray(np.tile(b.reshape(n1, 1, 16), (1, lanes // 16, 1)).reshape(n1, lanes)).astype(dtype)


@dataclass
class Epilogue:
    """Elementwise ops fused after a cube op (UB fusion), applied to each output tile in UB.

    ``steps`` use the names ``acc`` (the output tile), ``r<i>`` (tiles of ``residuals[i]``, GM
    tensors of the output's shape, read at the output tile's position), ``c<i>`` (per-output-channel
    constants ``tables[i]``, shape [N]) and any other name for a UB temporary; see vector.Step.
    """

    steps: list = field(default_factory=list)
    tables: list[np.ndarray] = field(default_factory=list)
    residuals: list[DevTensor] = field(default_factory=list)

    @property
    def temps(self) -> list[str]:
        names = {v for s in self.steps for v in s[1:4] if isinstance(v, str)}
        return sorted(n for n in names if n != "acc" and n[0] not in "rc")


class _CubeTiles:
    """Buffers and epilogue shared by the conv and gemm kernels."""

    def __init__(self, lw: Lowering, kb: KernelBuilder, k_tile: int, n_tile: int, m_tile: int, l1_extra: int,
                 epi: Epilogue | None = None):
        dt = lw.dtype
        self.lw, self.kb, self.dt = lw, kb, dt
        self.k0 = lw.soc.cube.k0(dt.itemsize)
        self.l1_w = kb.alloc(Space.L1, k_tile * n_tile, dt)
        self.l0a = kb.alloc(Space.L0A, m_tile * k_tile, dt)
        self.l0b = kb.alloc(Space.L0B, k_tile * n_tile, dt)
        self.ub_bias = kb.alloc(Space.UB, (n_tile // 16) * lw.lanes, dt)
        self.ub_out = kb.alloc(Space.UB, n_tile * m_tile, dt)
        self.epi = epi or Epilogue()
        self.bufs = {"acc": self.ub_out}
        for i in range(len(self.epi.residuals)):
            self.bufs[f"r{i}"] = kb.alloc(Space.UB, n_tile * m_tile, dt)
        for i in range(len(self.epi.tables)):
            self.bufs[f"c{i}"] = kb.alloc(Space.UB, (n_tile // 16) * lw.lanes, dt)
        tiles = 1 + len(self.epi.residuals) + len(self.epi.temps)
        need = (tiles * n_tile * m_tile + (1 + len(self.epi.tables)) * (n_tile // 16) * lw.lanes) * dt.itemsize
        if need > lw.usable("ub"):  # raised during graph -> tile: a fused group falls back to one kernel per op
            raise unsupported(kb.loc, f"fused epilogue needs {need} bytes of UB ({tiles} output tiles), "
                                      f"{lw.usable('ub')} available")
        for t in self.epi.temps:
            self.bufs[t] = kb.alloc(Space.UB, n_tile * m_tile, dt)
        self.table_args = []
        self.residual_args = []

    def bind(self, n_t: int, out_stride: int, lanes: int) -> None:
        """Kernel arguments of the epilogue's GM operands, moved per core like the output."""
        kb, lw = self.kb, self.lw
        for v in self.epi.tables:
            a = kb.arg(lw.constant(bias_table(v, v.size, lanes, self.dt), "ND"))
            kb.block_offset(a, n_t // 16 * lanes)
            self.table_args.append(a)
        for r in self.epi.residuals:
            a = kb.arg(r, fresh=True)  # its own pointer: moved per core like the output
            kb.block_offset(a, out_stride)
            self.residual_args.append(a)

    def load_tables(self, nt0: int, nt: int) -> None:
        lanes = self.lw.lanes
        for i, a in enumerate(self.table_args):
            self.kb.copy(a, self.bufs[f"c{i}"], src_offset=(nt0 // 16) * lanes, burst=(nt // 16) * lanes)

    def apply_epilogue(self, n1t: int, valid: int) -> None:
        """The fused steps on ub_out ([n1t][valid][16]), one C0 block of channels at a time."""
        kb, lanes = self.kb, self.lw.lanes
        for j in range(n1t):
            for op, d, s0, *more in self.epi.steps:
                s1 = more[0] if more else None
                scalar = more[1] if len(more) > 1 else 0.0

                def at(name):
                    return j * lanes if name.startswith("c") else j * valid * 16

                kw = {}
                if s1 is not None:
                    kw = dict(src1_offset=at(s1), src1_stride=0 if s1.startswith("c") else None)
                kb.vec(op, self.bufs[d], self.bufs[s0], self.bufs[s1] if s1 else None, count=valid, unit=16,
                       dst_offset=at(d), src0_offset=at(s0), scalar=scalar, **kw)

    def load_weights(self, w, n1_total: int, kt0: int, kt: int, nt0: int, nt: int):
        k0, kb = self.k0, self.kb
        k1t, n1t = kt // k0, nt // 16
        kb.copy(w, self.l1_w, src_offset=((kt0 // k0) * n1_total + nt0 // 16) * 16 * k0, nburst=k1t,
                burst=n1t * 16 * k0, src_stride=n1_total * 16 * k0, dst_stride=n1t * 16 * k0)
        kb.emit(tile.Load2dOp(self.l1_w, self.l0b, count=k1t * n1t, src_stride=16 * k0, dst_stride=16 * k0))

    def load_bias(self, table, nt0: int, nt: int):
        lanes = self.lw.lanes
        self.kb.copy(table, self.ub_bias, src_offset=(nt0 // 16) * lanes, burst=(nt // 16) * lanes)

    def epilogue(self, l0c, c_offset: int, n1t: int, valid: int, src_m: int):
        """L0C -> UB, + bias; the caller writes ub_out ([n1t][valid][16]) to GM."""
        kb, lanes = self.kb, self.lw.lanes
        kb.emit(tile.CopyL0cToUbOp(l0c, self.ub_out, src_offset=c_offset, n1=n1t, m=valid, src_m=src_m))
        for j in range(n1t):
            kb.vec("add", self.ub_out, self.ub_out, self.ub_bias, count=valid, unit=16, dst_offset=j * valid * 16,
                   src0_offset=j * valid * 16, src1_offset=j * lanes, src1_stride=0)
        self.apply_epilogue(n1t, valid)


def _default_tiles(lw: Lowering, m_hint: int, n1: int, k_total: int, k0: int) -> tuple[int, int, int]:
    """(m, n, k): ``n`` (a divisor of the padded N, at most 128) small enough that the N tiles
    occupy every core, ``m`` up to 128, ``k`` filling L0A / L0B (ascend-core.md §2.1 via the SoC)."""
    isz = lw.dtype.itemsize
    target = max(1, min(8, n1 // min(lw.cores, n1)))
    n = 16 * max(d for d in range(1, target + 1) if n1 % d == 0)
    m = min(128, _ceil(m_hint, 16))
    k = min(lw.usable("l0a") // (m * isz), lw.usable("l0b") // (n * isz))
    k = max(k0, k // k0 * k0)
    return m, n, min(k, _ceil(k_total, k0))


def _n_tiles(np_: int, n_t: int, loc) -> int:
    if n_t % 16 or np_ % n_t:
        raise unsupported(loc, f"tiling: n = {n_t} must be a multiple of 16 dividing {np_}")
    return np_ // n_t


def conv2d(lw: Lowering, x: DevTensor, w: np.ndarray, b: np.ndarray | None, strides, pads, dilations, group: int,
           out_shape: tuple[int, ...], loc, kernel_hint: str = "conv2d", epilogue: Epilogue | None = None) -> DevTensor:
    """2-D convolution of an NC1HWC0 tensor by constant weights ``w`` [Cout, Cin/group, KH, KW],
    followed by the fused ``epilogue`` if any."""
    x = lw.as_format(x, NC1HWC0, lw.dtype, loc)
    if epilogue is not None:
        epilogue.residuals = [lw.as_format(r, NC1HWC0, lw.dtype, loc) for r in epilogue.residuals]
    n_, cin, h_, w_ = x.shape
    cout, cin_g, kh_, kw_ = w.shape
    if cin_g * group != cin or cout % group:
        raise unsupported(loc, f"Conv: weight shape {list(w.shape)} does not match {cin} input channels, group {group}")
    if group > 1:  # block-diagonal dense weight
        dense = np.zeros((cout, cin, kh_, kw_), np.float32)
        og = cout // group
        for g in range(group):
            dense[g * og:(g + 1) * og, g * cin_g:(g + 1) * cin_g] = w[g * og:(g + 1) * og]
        w = dense
    dt, isz = lw.dtype, lw.dtype.itemsize
    k0 = lw.soc.cube.k0(isz)
    c1in = x.c1
    kdim = c1in * kh_ * kw_ * 16
    n1 = math.ceil(cout / 16)
    np_ = n1 * 16
    wp = np.zeros((np_, c1in * 16, kh_, kw_), np.float32)
    wp[:cout, :cin] = w
    bmat = wp.reshape(np_, c1in, 16, kh_, kw_).transpose(1, 3, 4, 2, 0).reshape(kdim, np_)
    sh, sw = strides
    pt, pl, pb, pr = pads
    dh, dw = dilations
    _, _, ho_, wo_ = out_shape

    m_t, n_t, k_t = _default_tiles(lw, ho_ * wo_, n1, kdim, k0)
    kb = lw.kernel(kernel_hint, loc, {"m": m_t, "n": n_t, "k": k_t})
    m_t, n_t, k_t = kb.tiling["m"], kb.tiling["n"], kb.tiling["k"]
    n_tiles = _n_tiles(np_, n_t, loc)
    kb.partition(n_tiles)  # SPMD over output-channel tiles
    # output rows per L1 tile: the accumulators of a row tile stay in L0C
    m_cap = lw.usable("l0c") // (n_t * 4) // 16 * 16
    rows = kb.tiling.get("rows") or max(1, m_cap // wo_)
    l1_budget = lw.usable("l1") - k_t * n_t * isz
    while rows > 1 and c1in * ((rows - 1) * sh + dh * (kh_ - 1) + 1) * w_ * 16 * isz > l1_budget:
        rows -= 1
    rin_max = (rows - 1) * sh + dh * (kh_ - 1) + 1
    if c1in * rin_max * w_ * 16 * isz > l1_budget or _ceil(rows * wo_, 16) > m_cap:
        raise unsupported(loc, f"Conv: one output row ({c1in * 16} channels x {w_} wide) does not fit in L1/L0C")
    kb.tiling["rows"] = rows

    wz = lw.constant(fractal_z(bmat, k0, dt), "FRACTAL_Z", (kdim, np_))
    bt = lw.constant(bias_table(b, cout, lw.lanes, dt), "ND")
    y = lw.gm_tensor(out_shape, NC1HWC0)
    xa, wa, ba, ya = kb.arg(x), kb.arg(wz), kb.arg(bt), kb.arg(y)
    kb.block_offset(wa, n_t * k0)
    kb.block_offset(ba, n_t // 16 * lw.lanes)
    kb.block_offset(ya, n_t // 16 * ho_ * wo_ * 16)
    tiles = _CubeTiles(lw, kb, k_t, n_t, m_t, 0, epilogue)
    tiles.bind(n_t, n_t // 16 * ho_ * wo_ * 16, lw.lanes)
    l1_fm = kb.alloc(Space.L1, c1in * rin_max * w_ * 16, dt)
    l0c = kb.alloc(Space.L0C, _ceil(rows * wo_, 16) * n_t, np.dtype(np.float32))
    per_image = {xa: c1in * h_ * w_ * 16, ya: n1 * ho_ * wo_ * 16}
    per_image.update({ra: n1 * ho_ * wo_ * 16 for ra in tiles.residual_args})
    with kb.loop(n_, per_image):  # image 0's code; the loop moves to the next image
        n = 0
        for ho0 in range(0, ho_, rows):
            ho1 = min(ho_, ho0 + rows)
            m_valid = (ho1 - ho0) * wo_
            m_pad = _ceil(m_valid, 16)
            in_start = ho0 * sh - pt
            in_end = (ho1 - 1) * sh - pt + dh * (kh_ - 1) + 1
            r0, r1 = max(in_start, 0), min(in_end, h_)
            if r1 <= r0:
                raise unsupported(loc, "Conv: an output row reads only padding")
            nrows = r1 - r0
            kb.copy(xa, l1_fm, src_offset=(n * c1in * h_ + r0) * w_ * 16, nburst=c1in, burst=nrows * w_ * 16,
                    src_stride=h_ * w_ * 16, dst_stride=nrows * w_ * 16)
            def body(first: int, last: bool = False, n=n, ho0=ho0, m_valid=m_valid, m_pad=m_pad,
                     in_start=in_start, in_end=in_end, r0=r0, r1=r1, nrows=nrows) -> None:
                nt0, nt = first * n_t, n_t
                for kt0 in range(0, kdim, k_t):
                    kt = min(k_t, kdim - kt0)
                    tiles.load_weights(wa, n1, kt0, kt, nt0, nt)
                    for ms0 in range(0, m_pad, m_t):
                        ms = min(m_t, m_pad - ms0)
                        kb.emit(tile.Img2colOp(
                            l1_fm, tiles.l0a, fm_c1=c1in, fm_h=nrows, fm_w=w_, pad_t=r0 - in_start,
                            pad_b=in_end - r1, pad_l=pl, pad_r=pr, stride_h=sh, stride_w=sw, kernel_h=kh_,
                            kernel_w=kw_, dil_h=dh, dil_w=dw, m_start=ms0, m_count=ms, k_start=kt0, k_count=kt))
                        kb.emit(tile.MmadOp(tiles.l0a, tiles.l0b, l0c, c_offset=ms0 * nt, m=ms, k=kt, n=nt,
                                            init=int(kt0 == 0)))
                tiles.load_bias(ba, nt0, nt)
                tiles.load_tables(nt0, nt)
                n1t = nt // 16
                for ms0 in range(0, m_pad, m_t):
                    ms = min(m_t, m_pad - ms0)
                    valid = min(ms, m_valid - ms0)
                    if valid <= 0:
                        continue
                    out_off = ((n * n1 + nt0 // 16) * ho_ * wo_ + ho0 * wo_ + ms0) * 16
                    for i, ra in enumerate(tiles.residual_args):
                        kb.copy(ra, tiles.bufs[f"r{i}"], src_offset=out_off, nburst=n1t, burst=valid * 16,
                                src_stride=ho_ * wo_ * 16)
                    tiles.epilogue(l0c, ms0 * nt, n1t, valid, ms)
                    kb.copy(tiles.ub_out, ya, dst_offset=out_off, nburst=n1t, burst=valid * 16,
                            dst_stride=ho_ * wo_ * 16)

            kb.for_tiles(n_tiles, body)
    lw.launch(kb)
    return y


def gemm(lw: Lowering, a: DevTensor, bmat: np.ndarray, bias: np.ndarray | None, loc,
         kernel_hint: str = "gemm", epilogue: Epilogue | None = None) -> DevTensor:
    """``a`` [M, K] (ND) times constant ``bmat`` [K, N] plus optional ``bias`` [N]: ND [M, N],
    followed by the fused ``epilogue`` if any."""
    a = lw.as_format(a, ND, lw.dtype, loc)
    if epilogue is not None:
        epilogue.residuals = [lw.as_format(r, ND, lw.dtype, loc) for r in epilogue.residuals]
    if len(a.shape) != 2:
        raise unsupported(loc, f"Gemm: expected a 2-D input, got shape {list(a.shape)}")
    m_, k_ = a.shape
    kb_, n_ = bmat.shape
    if kb_ != k_:
        raise unsupported(loc, f"Gemm: inner dimensions differ ({k_} vs {kb_})")
    dt, isz = lw.dtype, lw.dtype.itemsize
    k0 = lw.soc.cube.k0(isz)
    kp = _ceil(k_, k0)
    n1 = math.ceil(n_ / 16)
    np_ = n1 * 16
    m_t, n_t, k_t = _default_tiles(lw, m_, n1, kp, k0)
    kb = lw.kernel(kernel_hint, loc, {"m": m_t, "n": n_t, "k": k_t})
    m_t, n_t, k_t = kb.tiling["m"], kb.tiling["n"], kb.tiling["k"]
    n_tiles = _n_tiles(np_, n_t, loc)
    kb.partition(n_tiles)  # SPMD over output-column tiles
    wz = lw.constant(fractal_z(bmat, k0, dt), "FRACTAL_Z", (kp, np_))
    bt = lw.constant(bias_table(bias, n_, lw.lanes, dt), "ND")
    y = lw.gm_tensor((m_, n_), ND)
    aa, wa, ba, ya = kb.arg(a), kb.arg(wz), kb.arg(bt), kb.arg(y)
    kb.block_offset(wa, n_t * k0)
    kb.block_offset(ba, n_t // 16 * lw.lanes)
    kb.block_offset(ya, n_t)
    tiles = _CubeTiles(lw, kb, k_t, n_t, m_t, 0, epilogue)
    tiles.bind(n_t, n_t, lw.lanes)
    l1_a = kb.alloc(Space.L1, k_t * m_t, dt)
    l0c = kb.alloc(Space.L0C, m_t * n_t, np.dtype(np.float32))
    for mt0 in range(0, m_, m_t):
        rows = min(m_t, m_ - mt0)
        m_pad = _ceil(rows, 16)

        def body(first: int, last: bool = False, mt0=mt0, rows=rows, m_pad=m_pad) -> None:
            nt0, nt = first * n_t, n_t
            for kt0 in range(0, kp, k_t):
                kt = min(k_t, kp - kt0)
                k1t = kt // k0
                kb.emit(tile.CopyNd2nzOp(aa, l1_a, src_offset=mt0 * k_ + kt0, rows=rows, cols=min(kt, k_ - kt0),
                                         src_row_stride=k_))
                for m1 in range(m_pad // 16):
                    kb.emit(tile.Load2dOp(l1_a, tiles.l0a, src_offset=m1 * 16 * k0, count=k1t,
                                          src_stride=m_pad * k0, dst_offset=m1 * k1t * 16 * k0, dst_stride=16 * k0))
                tiles.load_weights(wa, n1, kt0, kt, nt0, nt)
                kb.emit(tile.MmadOp(tiles.l0a, tiles.l0b, l0c, m=m_pad, k=kt, n=nt, init=int(kt0 == 0)))
            tiles.load_bias(ba, nt0, nt)
            tiles.load_tables(nt0, nt)
            n1t = nt // 16
            actual0 = (n_tiles - 1) * n_t if last else nt0  # the last tile's columns (its own core)
            for i, ra in enumerate(tiles.residual_args):
                for j in range(n1t):
                    cols = min(16, n_ - (actual0 + j * 16))
                    if cols > 0:
                        kb.copy(ra, tiles.bufs[f"r{i}"], src_offset=mt0 * n_ + nt0 + j * 16,
                                dst_offset=j * rows * 16, nburst=rows, burst=cols, src_stride=n_, dst_stride=16)
            tiles.epilogue(l0c, 0, n1t, rows, m_pad)
            for j in range(n1t):
                cols = min(16, n_ - (actual0 + j * 16))
                if cols > 0:
                    kb.copy(tiles.ub_out, ya, src_offset=j * rows * 16, dst_offset=mt0 * n_ + nt0 + j * 16,
                            nburst=rows, burst=cols, src_stride=16, dst_stride=n_)

        kb.for_tiles(n_tiles, body, partial_last=n_ % n_t != 0)
    lw.launch(kb)
    return y


def batched_matmul(lw: Lowering, a: DevTensor, b: DevTensor, out_shape: tuple[int, ...], loc) -> DevTensor:
    """MatMul of two GM tensors ``a`` [..., M, K] and ``b`` [..., K, N] (batch dimensions broadcast
    as numpy.matmul does): ND ``out_shape`` [..., M, N].

    ``b`` is first transposed to [..., N, K] (a data kernel) so that, loaded with nd2nz, each
    batch's B lands in L1 already in the Zn layout L0B takes. Batches are spread over the cores.
    """
    from cann.lowering.data import transpose

    a = lw.as_format(a, ND, lw.dtype, loc)
    b = lw.as_format(b, ND, lw.dtype, loc)
    *ab, m_, k_ = a.shape
    *bb, kb_, n_ = b.shape
    if kb_ != k_:
        raise unsupported(loc, f"MatMul: inner dimensions differ ({k_} vs {kb_})")
    batch = tuple(out_shape[:-2])
    nb = math.prod(batch)
    bt = transpose(lw, b, tuple(range(len(b.shape) - 2)) + (len(b.shape) - 1, len(b.shape) - 2), loc)
    idx = np.arange(nb).reshape(batch) if batch else np.zeros((), np.int64)
    a_idx = np.broadcast_to(np.arange(math.prod(ab)).reshape(tuple(ab)) if ab else 0, batch).reshape(-1)
    b_idx = np.broadcast_to(np.arange(math.prod(bb)).reshape(tuple(bb)) if bb else 0, batch).reshape(-1)
    del idx
    dt, isz = lw.dtype, lw.dtype.itemsize
    k0 = lw.soc.cube.k0(isz)
    kp = _ceil(k_, k0)
    n1 = math.ceil(n_ / 16)
    m_t = min(128, _ceil(m_, 16))
    n_t = min(128, n1 * 16)
    k_t = min(lw.usable("l0a") // (m_t * isz), lw.usable("l0b") // (n_t * isz)) // k0 * k0
    k_t = max(k0, min(k_t, kp))
    kb = lw.kernel("batch_matmul", loc, {"m": m_t, "n": n_t, "k": k_t})
    m_t, n_t, k_t = kb.tiling["m"], kb.tiling["n"], kb.tiling["k"]
    y = lw.gm_tensor(tuple(out_shape), ND)
    uniform = bool(np.all(np.diff(a_idx) == (a_idx[1] - a_idx[0] if nb > 1 else 0))) and \
        bool(np.all(np.diff(b_idx) == (b_idx[1] - b_idx[0] if nb > 1 else 0)))
    if uniform and nb > 1:  # SPMD over batches: every core moves its pointers by one batch
        kb.partition(nb)
    aa, ba, ya = kb.arg(a), kb.arg(bt), kb.arg(y)
    if kb.block_dim > 1:
        kb.block_offset(aa, int(a_idx[1] - a_idx[0]) * m_ * k_)
        kb.block_offset(ba, int(b_idx[1] - b_idx[0]) * n_ * k_)
        kb.block_offset(ya, m_ * n_)
    l1_a = kb.alloc(Space.L1, k_t * m_t, dt)
    l1_b = kb.alloc(Space.L1, k_t * n_t, dt)
    l0a = kb.alloc(Space.L0A, m_t * k_t, dt)
    l0b = kb.alloc(Space.L0B, k_t * n_t, dt)
    l0c = kb.alloc(Space.L0C, m_t * n_t, np.dtype(np.float32))
    ub = kb.alloc(Space.UB, m_t * n_t, dt)

    def one(first: int, last: bool = False) -> None:
        a_off, b_off, y_off = int(a_idx[first]) * m_ * k_, int(b_idx[first]) * n_ * k_, first * m_ * n_
        for mt0 in range(0, m_, m_t):
            rows = min(m_t, m_ - mt0)
            m_pad = _ceil(rows, 16)
            for nt0 in range(0, n1 * 16, n_t):
                ncols = min(n_t, n_ - nt0)
                n_pad = _ceil(ncols, 16)
                for kt0 in range(0, kp, k_t):
                    kt = min(k_t, kp - kt0)
                    k1t = kt // k0
                    kb.emit(tile.CopyNd2nzOp(aa, l1_a, src_offset=a_off + mt0 * k_ + kt0, rows=rows,
                                             cols=min(kt, k_ - kt0), src_row_stride=k_))
                    for m1 in range(m_pad // 16):
                        kb.emit(tile.Load2dOp(l1_a, l0a, src_offset=m1 * 16 * k0, count=k1t, src_stride=m_pad * k0,
                                              dst_offset=m1 * k1t * 16 * k0, dst_stride=16 * k0))
                    # B^T rows nt0.. in NZ = the Zn layout [k1][n1][16][k0]
                    kb.emit(tile.CopyNd2nzOp(ba, l1_b, src_offset=b_off + nt0 * k_ + kt0, rows=ncols,
                                             cols=min(kt, k_ - kt0), src_row_stride=k_))
                    kb.emit(tile.Load2dOp(l1_b, l0b, count=k1t * (n_pad // 16), src_stride=16 * k0,
                                          dst_stride=16 * k0))
                    kb.emit(tile.MmadOp(l0a, l0b, l0c, m=m_pad, k=kt, n=n_pad, init=int(kt0 == 0)))
                kb.emit(tile.CopyL0cToUbOp(l0c, ub, n1=n_pad // 16, m=rows, src_m=m_pad))
                for j in range(n_pad // 16):
                    cols = min(16, n_ - (nt0 + j * 16))
                    kb.copy(ub, ya, src_offset=j * rows * 16, dst_offset=y_off + mt0 * n_ + nt0 + j * 16,
                            nburst=rows, burst=cols, src_stride=16, dst_stride=n_)

    if kb.block_dim > 1:
        kb.for_tiles(nb, one)
    else:
        for i in range(nb):
            one(i)
    lw.launch(kb)
    return y
