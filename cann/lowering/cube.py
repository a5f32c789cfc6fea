"""What the cube kernels share: the constant operands' layouts, the fused epilogue and the tile buffers.

Weights are constants, stored in GM in the cube's layout at compile time: FRACTAL_Z
(``[K1][N1][16][k0]``, the Zn layout L0B takes, :func:`fractal_z`); biases and per-channel
constants as rows of one vector repeat per C0 block (:func:`bias_table`). :class:`Epilogue` is the
elementwise tail the fusion pass attaches to a cube op (UB fusion) and :class:`CubeTiles` the
L1 / L0A / L0B / UB buffers and the epilogue's code of one kernel. The kernels: convolution
(:mod:`cann.lowering.conv`, planned by :mod:`cann.lowering.conv_plan`), grouped convolution
(:mod:`cann.lowering.grouped`, :mod:`cann.lowering.grouped_runs`), Gemm / MatMul by a constant
(:mod:`cann.lowering.gemm`) and MatMul of two tensors (:mod:`cann.lowering.batch_matmul`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from cann.dialects import tile
from cann.dialects.tile import Space
from cann.lowering.common import DevTensor, KernelBuilder, Lowering, narrow, narrow_f32, unsupported


def round_up(a: int, b: int) -> int:
    """``a`` rounded up to a multiple of ``b`` (both positive)."""
    return -(-a // b) * b


def fractal_z(bmat: np.ndarray, k0: int, dtype: np.dtype) -> np.ndarray:
    """A ``[K, N]`` matrix in the Zn layout ``[K/k0][N1][16][k0]`` (K padded to k0, N to 16)."""
    k, n = bmat.shape
    kp, np_ = round_up(k, k0), round_up(n, 16)
    padded = np.zeros((kp, np_), dtype)  # narrowed first (the same bytes, fewer moved)
    padded[:k, :n] = narrow_f32(bmat, dtype)
    return np.ascontiguousarray(padded.reshape(kp // k0, k0, np_ // 16, 16).transpose(0, 2, 3, 1))


def bias_table(bias: np.ndarray | None, n: int, lanes: int, dtype: np.dtype) -> np.ndarray:
    """Per-C0-block rows of ``lanes`` elements: row j repeats bias[16j:16j+16] (one vector repeat)."""
    n1 = math.ceil(n / 16)
    b = np.zeros(n1 * 16, np.float32)
    if bias is not None:
        b[:n] = bias.reshape(-1)
    return narrow(np.ascontiguousarray(np.tile(b.reshape(n1, 1, 16), (1, lanes // 16, 1)).reshape(n1, lanes)), dtype)


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


class CubeTiles:
    """Buffers and epilogue shared by the conv and gemm kernels."""

    def __init__(self, lw: Lowering, kb: KernelBuilder, k_tile: int, n_tile: int, m_tile: int, l1_extra: int,
                 epi: Epilogue | None = None, l1_k: int | None = None, ub_n: int | None = None,
                 l0b_k: int | None = None):
        """``l1_k``: K rows of the L1 weight tile (default ``k_tile``); ``ub_n``: columns of the UB
        output tiles (default ``n_tile``: the epilogue of a wider tile runs in column chunks);
        ``l0b_k``: K rows of the L0B tile (default ``k_tile``; more: every K tile resident)."""
        dt = lw.dtype
        self.lw, self.kb, self.dt = lw, kb, dt
        self.k0 = lw.soc.cube.k0(dt.itemsize)
        self.l1_w = kb.alloc(Space.L1, (l1_k or k_tile) * n_tile, dt)
        self.l0a = kb.alloc(Space.L0A, m_tile * k_tile, dt)
        self.l0b = kb.alloc(Space.L0B, (l0b_k or k_tile) * n_tile, dt)
        self.ub_bias = kb.alloc(Space.UB, (n_tile // 16) * lw.lanes, dt)
        ub_n = ub_n or n_tile
        self.ub_out = kb.alloc(Space.UB, ub_n * m_tile, dt)
        self.epi = epi or Epilogue()
        self.bufs = {"acc": self.ub_out}
        for i in range(len(self.epi.residuals)):
            self.bufs[f"r{i}"] = kb.alloc(Space.UB, ub_n * m_tile, dt)
        for i in range(len(self.epi.tables)):
            self.bufs[f"c{i}"] = kb.alloc(Space.UB, (n_tile // 16) * lw.lanes, dt)
        tiles = 1 + len(self.epi.residuals) + len(self.epi.temps)
        need = (tiles * ub_n * m_tile + (1 + len(self.epi.tables)) * (n_tile // 16) * lw.lanes) * dt.itemsize
        if need > lw.usable("ub"):  # raised during graph -> tile: a fused group falls back to one kernel per op
            raise unsupported(kb.loc, f"fused epilogue needs {need} bytes of UB ({tiles} output tiles), "
                                      f"{lw.usable('ub')} available")
        for t in self.epi.temps:
            self.bufs[t] = kb.alloc(Space.UB, ub_n * m_tile, dt)
        self.table_args = []
        self.residual_args = []
        self.has_bias = True  # False: no bias (load_bias and the epilogue's adds are skipped)

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
        if not self.has_bias:
            return
        lanes = self.lw.lanes
        self.kb.copy(table, self.ub_bias, src_offset=(nt0 // 16) * lanes, burst=(nt // 16) * lanes)

    def epilogue(self, l0c, c_offset: int, n1t: int, valid: int, src_m: int):
        """L0C -> UB (zeros when ``l0c`` is None: the tile read only padding), + bias; the caller
        writes ub_out ([n1t][valid][16]) to GM."""
        kb, lanes = self.kb, self.lw.lanes
        if l0c is None:
            kb.vec("dup", self.ub_out, count=n1t * valid * 16, scalar=0.0)
        else:
            kb.emit(tile.CopyL0cToUbOp(l0c, self.ub_out, src_offset=c_offset, n1=n1t, m=valid, src_m=src_m))
        for j in range(n1t if self.has_bias else 0):
            kb.vec("add", self.ub_out, self.ub_out, self.ub_bias, count=valid, unit=16, dst_offset=j * valid * 16,
                   src0_offset=j * valid * 16, src1_offset=j * lanes, src1_stride=0)
        self.apply_epilogue(n1t, valid)

