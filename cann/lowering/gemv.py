"""Small-M Gemm / MatMul by a constant on the vector unit (GEMV): only the real multiply-accumulates.

The cube multiplies 16-row fractals: a Gemm with ``M < 16`` rows (a batch-1 classifier, an LLM
decode step) pads M to 16 and executes ``16 / M`` times its MACs. Here ``A`` [M, K] (ND, in GM)
times a constant ``B`` [K, N] runs on the vector unit in the *dot* form:

* **B layout** (compile time): B^T cut into *N tiles* of ``nt`` output columns and *chunks* of one
  vector repeat (``lanes`` = 256 B of the dtype) of K, stored ``[T][C][nt][lanes]`` (K zero-padded
  to ``C * lanes``; the last tile holds only its real columns). Every load of a tile is one
  contiguous burst and every chunk's ``nt`` rows are consecutive repeats.
* **per chunk and row of A**: one ``vmla`` of ``nt`` repeats, ``acc[m][n][:] += B^T[n][chunk] *
  A[m][chunk]`` (A's chunk a broadcast operand: repeat stride 0); ``acc`` [M][nt][lanes] holds
  ``lanes`` partial sums per output.
* **per tile**: a ``vcadd`` per row of A sums each output's ``lanes`` partials (in float32, narrowed
  once), then bias, the fused epilogue (:class:`cann.lowering.cube.Epilogue`: ReLU, a residual Add,
  per-column tables, ...) and one store of M bursts.

A [M, K] stays in UB for the whole kernel (its K padding zeroed). The N tiles go round-robin over
the cores (``for_tiles``); each tile's K chunks are loaded ``kc`` at a time (``tile-multi-buffer``
double-buffers the loads, so the stream of B overlaps the ``vmla``). Executed MACs (``vmla`` lanes)
are ``M * nt * C * lanes`` per tile: the model's ``M*K*N`` times the K padding to a repeat and the
N padding of the full tiles (none on the last).

:func:`plan` chooses ``nt`` and ``kc`` by an estimate from ``cann/hw`` figures (GM bandwidth per
core and shared, MTE and vector startups, vector repeat rate, UB capacity);
:func:`cann.lowering.gemm.gemm` compares it with the cube's estimate and runs the cheaper (docs/kernels.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from cann.dialects.tile import Space
from cann.lowering.common import DevTensor, KernelBuilder, Lowering, narrow, narrow_f32, unsupported
from cann.lowering.cube import Epilogue

#: the tiling keys of a vector GEMV kernel (``vector`` = 1 pins this path, 0 the cube)
KEYS = ("vector", "nt", "kc", "block_dim")

#: vmla instructions per N tile up to which its K loads are unrolled rather than a hardware loop
#: (whose end is a barrier of every pipe: the next load would not start under the last vmlas)
UNROLL_VMLA = 256


@dataclass(frozen=True)
class GemvPlan:
    """A GEMV kernel's tiling: ``nt`` output columns per N tile (a multiple of 16), ``kc`` K chunks
    per load, ``tiles`` N tiles over ``block_dim`` cores; ``cycles``: the estimate it was chosen by."""

    nt: int
    kc: int
    tiles: int
    block_dim: int
    cycles: float

    def as_tiling(self) -> dict[str, int]:
        return {"vector": 1, "nt": self.nt, "kc": self.kc, "block_dim": self.block_dim}


def b_layout(bmat: np.ndarray, nt: int, lanes: int, dtype: np.dtype) -> np.ndarray:
    """``bmat`` [K, N] as ``[T][C][nt][lanes]`` (B^T in N tiles of ``nt`` columns, K chunks of
    ``lanes``; K zero-padded), flat, the last tile compact (``[C][N - (T-1)*nt][lanes]``)."""
    k_, n_ = bmat.shape
    c, t = math.ceil(k_ / lanes), math.ceil(n_ / nt)
    padded = np.zeros((c * lanes, t * nt), dtype)  # narrowed first (the same bytes, fewer moved)
    padded[:k_, :n_] = narrow_f32(bmat, dtype)
    tiles = padded.reshape(c, lanes, t, nt).transpose(2, 0, 3, 1)  # [T][C][nt][lanes], a view
    last = n_ - (t - 1) * nt
    full = (t - 1) * c * nt * lanes
    out = np.empty(full + c * last * lanes, dtype)  # written once, in place
    out[:full].reshape(t - 1, c, nt, lanes)[...] = tiles[:t - 1]
    out[full:].reshape(c, last, lanes)[...] = tiles[t - 1, :, :last]
    return out


def _ub_fixed(lw: Lowering, m_: int, k_: int, nt: int, epi: Epilogue) -> int:
    """UB bytes of the buffers besides the B tile: A, the partial sums, the output rows, residual
    and temporary rows, bias and table rows."""
    lanes, isz = lw.lanes, lw.dtype.itemsize
    kl = math.ceil(k_ / lanes) * lanes
    rows = 1 + len(epi.residuals) + len(epi.temps)
    return (m_ * kl + m_ * nt * lanes + rows * m_ * nt + (1 + len(epi.tables)) * nt) * isz


def _cost(lw: Lowering, m_: int, k_: int, n_: int, nt: int, kc: int, epi_ops: int) -> float:
    """Estimated cycles of the busiest core: A's load, then per round of N tiles (a hardware loop:
    rounds do not overlap) the tile's B stream and its vector work (vmlas, zeroing, row sums,
    epilogue) pipelined over its ``ceil(C / kc)`` loads, and the store."""
    soc, isz, lanes = lw.soc, lw.dtype.itemsize, lw.lanes
    lat, bw, cpr = soc.latency, soc.bandwidth, soc.vector.cycles_per_repeat
    c, t = math.ceil(k_ / lanes), math.ceil(n_ / nt)
    active = min(lw.cores, t)
    rounds = math.ceil(t / active)
    rate = min(bw.gm_to_ub, bw.gm_total / active)
    loads = math.ceil(c / kc)
    load = nt * c * lanes * isz / rate + loads * lat.mte_startup
    vec = m_ * (c + 2) * (lat.vector_startup + nt * cpr) + \
        m_ * epi_ops * (lat.vector_startup + math.ceil(nt / lanes) * cpr)
    store = lat.mte_startup + m_ * lat.burst_overhead + m_ * nt * isz / min(bw.ub_to_gm, bw.gm_total / active)
    a_load = lat.mte_startup + m_ * lat.burst_overhead + m_ * k_ * isz / rate
    # a pipeline of ``loads`` stages: the longer stream plus the other's first (load) or last (vector) stage
    return a_load + rounds * (max(load + vec / loads, vec + load / loads) + store)


def plan(lw: Lowering, m_: int, k_: int, n_: int, epi: Epilogue, pins: dict[str, int], loc) -> GemvPlan | None:
    """The cheapest GEMV tiling by :func:`_cost` over N tiles of ``ceil(N / (cores * r))`` columns
    (r = 1..8, rounded up to 16) and loads of 1, 2, 4, ... K chunks up to what fits UB; pinned
    ``nt`` / ``kc`` / ``block_dim`` fix their value. None when no tiling fits UB (A's rows and one
    tile's partial sums too large: the cube then runs it).

    Raises:
        CannError: a pinned value that is not positive, ``nt`` not a multiple of 16, or a pinned
            tiling that does not fit UB.
    """
    for key in ("nt", "kc", "block_dim"):
        if key in pins and pins[key] < 1:
            raise unsupported(loc, f"Gemm (vector): tiling {key} = {pins[key]} must be positive")
    if pins.get("nt", 16) % 16:
        raise unsupported(loc, f"Gemm (vector): tiling nt = {pins['nt']} must be a multiple of 16")
    isz, lanes = lw.dtype.itemsize, lw.lanes
    c = math.ceil(k_ / lanes)
    cores = min(lw.cores, pins.get("block_dim", lw.cores))
    n16 = math.ceil(n_ / 16)
    nts = [pins["nt"]] if "nt" in pins else sorted({math.ceil(n16 / (cores * r)) * 16 for r in range(1, 9)})
    epi_ops = len(epi.steps) + 1
    budget = lw.usable("ub")
    best, refused = None, ""
    for nt in nts:
        room = (budget - _ub_fixed(lw, m_, k_, nt, epi)) // (nt * lanes * isz)
        top = min(c, room)
        if "kc" in pins:
            if pins["kc"] > room:
                refused = (f"Gemm (vector): tiling kc = {pins['kc']} with nt = {nt} needs "
                           f"{_ub_fixed(lw, m_, k_, nt, epi) + pins['kc'] * nt * lanes * isz} bytes of UB, "
                           f"{budget} available")
                continue
            kcs = [pins["kc"]]
        else:
            kcs = sorted({min(top, 1 << i) for i in range(0, max(1, top).bit_length() + 1)} | {top})
        for kc in kcs:
            if kc < 1:
                continue
            t = math.ceil(n_ / nt)
            cost = _cost(lw, m_, k_, n_, nt, kc, epi_ops)
            if best is None or cost < best.cycles * 0.999:
                best = GemvPlan(nt, kc, t, min(cores, t), cost)
    if best is None and ("nt" in pins or "kc" in pins):
        raise unsupported(loc, refused or f"Gemm (vector): tiling nt = {pins.get('nt')} leaves no room for a "
                                          f"K chunk in UB ({budget} bytes)")
    return best


def gemv(lw: Lowering, kb: KernelBuilder, a: DevTensor, bmat: np.ndarray, bias: np.ndarray | None, loc,
         epilogue: Epilogue | None, p: GemvPlan) -> DevTensor:
    """``a`` [M, K] (ND, device dtype) times constant ``bmat`` [K, N] plus optional ``bias`` [N],
    then the fused ``epilogue`` (residuals already ND): ND [M, N] in the device dtype, by kernel
    ``kb`` with tiling ``p`` (see the module docstring)."""
    m_, k_ = a.shape
    n_ = bmat.shape[1]
    dt, lanes = lw.dtype, lw.lanes
    epi = epilogue or Epilogue()
    c = math.ceil(k_ / lanes)
    kl = c * lanes
    nt, kc, t_ = p.nt, p.kc, p.tiles
    last_cols = n_ - (t_ - 1) * nt
    kb.partition(t_)
    kb.tiling.update(p.as_tiling(), block_dim=kb.block_dim)
    tile_b = c * nt * lanes  # elements of B per full tile

    def padded(v: np.ndarray | None) -> np.ndarray:
        out = np.zeros(t_ * nt, np.float32)
        if v is not None:
            out[:n_] = np.broadcast_to(np.asarray(v, np.float32).reshape(-1), (n_,))
        return narrow(out, dt)

    wt = lw.constant(b_layout(bmat, nt, lanes, dt), "ND")
    y = lw.gm_tensor((m_, n_), "ND")
    aa, wa, ya = kb.arg(a), kb.arg(wt), kb.arg(y)
    kb.block_offset(wa, tile_b)
    kb.block_offset(ya, nt)
    ba = kb.arg(lw.constant(padded(bias), "ND")) if bias is not None else None
    if ba is not None:
        kb.block_offset(ba, nt)
    table_args = []
    for v in epi.tables:
        ta = kb.arg(lw.constant(padded(v), "ND"))
        kb.block_offset(ta, nt)
        table_args.append(ta)
    res_args = []
    for r in epi.residuals:
        ra = kb.arg(r, fresh=True)
        kb.block_offset(ra, nt)
        res_args.append(ra)

    a_ub = kb.alloc(Space.UB, m_ * kl, dt)
    b_ub = kb.alloc(Space.UB, kc * nt * lanes, dt)
    acc = kb.alloc(Space.UB, m_ * nt * lanes, dt)
    bufs = {"acc": kb.alloc(Space.UB, m_ * nt, dt)}
    for i in range(len(res_args)):
        bufs[f"r{i}"] = kb.alloc(Space.UB, m_ * nt, dt)
    for i in range(len(table_args)):
        bufs[f"c{i}"] = kb.alloc(Space.UB, nt, dt)
    for name in epi.temps:
        bufs[name] = kb.alloc(Space.UB, m_ * nt, dt)
    bias_ub = kb.alloc(Space.UB, nt, dt) if ba is not None else None
    out = bufs["acc"]

    # A once, its K padding zero (the padded chunk's lanes multiply zero weights)
    if kl > k_:
        kb.vec("dup", a_ub, count=m_ * kl, scalar=0.0)
    kb.copy(aa, a_ub, nburst=m_, burst=k_, src_stride=k_, dst_stride=kl)

    def tile_code(first: int, last: bool = False) -> None:
        rows = last_cols if last else nt
        wo, yo = first * tile_b, first * nt
        chunk = rows * lanes  # elements of one K chunk of this tile
        kb.vec("dup", acc, count=m_ * nt * lanes, scalar=0.0)

        def group(g: int) -> None:
            c0 = g * kc
            cn = min(kc, c - c0)
            kb.copy(wa, b_ub, src_offset=wo + c0 * chunk, burst=cn * chunk)
            for j in range(cn):
                for m in range(m_):
                    kb.vec("mla", acc, b_ub, a_ub, count=rows, unit=lanes, dst_offset=m * nt * lanes,
                           src0_offset=j * chunk, src1_offset=m * kl + (c0 + j) * lanes, src1_stride=0)

        groups = math.ceil(c / kc)
        if m_ * c <= UNROLL_VMLA:
            for g in range(groups):
                group(g)
        else:
            kb.roll(groups, group)
        for m in range(m_):  # each output's lanes partial sums (vcadd: a float32 sum)
            kb.vec("cadd", out, acc, count=rows, unit=lanes, dst_offset=m * nt, src0_offset=m * nt * lanes,
                   dst_stride=1, src0_stride=lanes)
        if bias_ub is not None:
            kb.copy(ba, bias_ub, src_offset=yo, burst=rows)
            for m in range(m_):
                kb.vec("add", out, out, bias_ub, count=rows, dst_offset=m * nt, src0_offset=m * nt)
        for i, ta in enumerate(table_args):
            kb.copy(ta, bufs[f"c{i}"], src_offset=yo, burst=rows)
        for i, ra in enumerate(res_args):
            kb.copy(ra, bufs[f"r{i}"], src_offset=yo, nburst=m_, burst=rows, src_stride=n_, dst_stride=nt)
        def off(name: str | None, m: int) -> int:  # a table row serves every row of A
            return 0 if name is None or name.startswith("c") else m * nt

        for op, d, s0, *more in epi.steps:
            s1 = more[0] if more else None
            scalar = more[1] if len(more) > 1 else 0.0
            for m in range(m_):
                kb.vec(op, bufs[d], bufs[s0], bufs[s1] if s1 else None, count=rows, dst_offset=off(d, m),
                       src0_offset=off(s0, m), src1_offset=off(s1, m), scalar=scalar)
        kb.copy(out, ya, dst_offset=yo, nburst=m_, burst=rows, src_stride=nt, dst_stride=n_)

    kb.for_tiles(t_, tile_code, partial_last=last_cols != nt)
    lw.launch(kb)
    return y
