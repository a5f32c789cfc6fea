"""Cycle cost of one instruction: every timing formula of the simulator, in one place.

Every number comes from the :class:`~cann.hw.config.SocSpec` (``[latency]``, ``[bandwidth]``,
``[cube]``, ``[vector]`` of the SoC's ``.toml``); nothing here is a hardware literal. Byte counts
divided by a bandwidth are rounded up to whole cycles. The formulas (see docs/core-model.md):

* DMA (``copy_gm_to_l1``, ``copy_gm_to_ub``, ``copy_ub_to_gm``, ``copy_ub_to_gm_add``: the atomic add
  costs its bytes written, the add is done at the memory side):
  ``mte_startup + ceil(nburst*burst / bw) + burst_overhead*(nburst - 1)`` with ``bw`` the path's
  bandwidth (``gm_to_l1``, ``gm_to_ub``, ``ub_to_gm``). With ``active_cores`` cores of a launch
  moving data, a GM path's bandwidth is ``min(bw, gm_total / active_cores)``:
  ``ceil(bytes / bw)`` becomes ``max(ceil(bytes / bw), ceil(bytes * active_cores / gm_total))``.
* L2 (:mod:`cann.sim.l2`): with an ``l2`` fraction ``f`` (units of 1/``l2.SCALE``) for the source
  argument of a GM read (``copy_gm_to_l1``, ``copy_gm_to_ub``, ``copy_gm_to_l1_nd2nz``),
  ``hit = bytes * f // SCALE`` of its bytes come from the L2 at ``l2.rate`` and the rest from HBM as
  above: the transfer term is ``hbm(bytes - hit) + ceil(hit / l2.rate)``. Writes always go to HBM.
* ``copy_gm_to_l1_nd2nz``: a DMA of ``rows`` bursts of ``cols*itemsize`` bytes on ``gm_to_l1``.
* ``load2d``: ``mte_startup + ceil(repeat*fractal_bytes / bw)``, ``bw`` = ``l1_to_l0a`` or ``l1_to_l0b``.
* ``img2col``: ``mte_startup + ceil(m_count*k_count*itemsize / l1_to_l0a)`` (bytes written).
* ``mmad``: ``cube_startup + ceil(m/m0)*ceil(k/k0)*ceil(n/n0)``, times ``fp32_rate_divisor`` for fp32.
* ``copy_l0c_to_ub``: ``vector_startup + ceil(n1*m*n0*4 / l0c_to_ub)`` (fp32 bytes read from L0C).
* vector, vconv, reduce, broadcast: ``vector_startup + repeat*cycles_per_repeat``
  (``cycles_per_repeat_transcendental`` for :data:`cann.hw.isa.TRANSCENDENTAL`;
  ``cycles_per_repeat_int64`` for a vector op on int64 lanes).
* ``vcmpv``: ``vector_startup + repeat*cycles_per_repeat`` (``cycles_per_repeat_int64`` on int64).
* ``vconv`` (rounding conversion): ``vector_startup + repeat*cycles_per_repeat`` (a repeat holds
  256 B / the wider element size elements).
* sync (``set_flag``, ``wait_flag``, ``pipe_barrier``) and SPMD control (``block_*``): ``latency.scalar``.
* ``ld_idx`` (a scalar load of one index element from UB): ``latency.scalar``.
* ``copy_gm_to_ub_reg``: the ``copy_gm_to_ub`` DMA formula (the register only moves the source address).
* ``vsel``: ``vector_startup + repeat*cycles_per_repeat`` (a plain vector op).
* ``vtranspose``: ``vector_startup + repeat*ceil(256*itemsize / repeat_bytes)*cycles_per_repeat`` (a
  16x16 matrix costs the repeats of its bytes; ASSUMPTION, cann/hw/isa.py).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Callable

from cann.hw import isa
from cann.hw.config import SocSpec
from cann.hw.footprint import L0C_ITEMSIZE
from cann.sim.l2 import SCALE as L2_SCALE, read_arg_field



def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _itemsize(code: int) -> int:
    dt = isa.DTYPES.get(code)
    return dt.itemsize if dt is not None else 2


class CostModel:
    """Per-instruction cycle costs for one SoC: ``cost(instr) -> int``.

    ``active_cores``: cores of the launch sharing ``gm_total``; ``l2``: per kernel argument, the
    share of its GM reads served by the L2, in units of 1 / :data:`cann.sim.l2.SCALE` (``()``:
    none; :func:`cann.sim.l2.launch_fractions`)."""

    def __init__(self, spec: SocSpec, active_cores: int = 1, l2: tuple[int, ...] = ()):
        self.spec = spec
        self.active_cores = active_cores = max(1, int(active_cores))
        self.l2 = l2 = tuple(l2) if any(l2) else ()
        l2_rate = spec.l2.rate
        lat, bw, cube, vec = spec.latency, spec.bandwidth, spec.cube, spec.vector
        dma_bw = {"copy_gm_to_l1": bw.gm_to_l1, "copy_gm_to_ub": bw.gm_to_ub, "copy_ub_to_gm": bw.ub_to_gm,
                  "copy_ub_to_gm_add": bw.ub_to_gm}
        gm_total = bw.gm_total
        shared = active_cores * max(bw.gm_to_l1, bw.gm_to_ub, bw.ub_to_gm) > gm_total

        def gm_cycles(nbytes: int, bwidth: int) -> int:
            c = _cdiv(nbytes, bwidth)
            return max(c, _cdiv(nbytes * active_cores, gm_total)) if shared else c

        def read_cycles(nbytes: int, bwidth: int, arg: int) -> int:
            f = l2[arg] if arg < len(l2) else 0
            if not f:
                return gm_cycles(nbytes, bwidth)
            hit = nbytes * f // L2_SCALE
            return gm_cycles(nbytes - hit, bwidth) + _cdiv(hit, l2_rate)

        def dma(bwidth: int, arg_field: int | None) -> Callable:
            if not l2 or arg_field is None:
                def f(v):  # fields: dst/dst_arg, src_arg/dst, src, nburst, burst, src_stride, dst_stride
                    nburst, burst = v[3], v[4]
                    return lat.mte_startup + gm_cycles(nburst * burst, bwidth) + lat.burst_overhead * max(nburst - 1, 0)
                return f

            def f_l2(v):
                nburst, burst = v[3], v[4]
                return lat.mte_startup + read_cycles(nburst * burst, bwidth, v[arg_field]) + \
                    lat.burst_overhead * max(nburst - 1, 0)
            return f_l2

        def nd2nz(v):  # dtype, dst, src_arg, src, rows, cols, src_row_stride
            rows, row_bytes = v[4], v[5] * _itemsize(v[0])
            return lat.mte_startup + read_cycles(rows * row_bytes, bw.gm_to_l1, v[2]) + \
                lat.burst_overhead * max(rows - 1, 0)

        def load2d(v):  # dst_space, dst, src, repeat, src_stride, dst_stride
            b = bw.l1_to_l0a if v[0] == isa.L0A else bw.l1_to_l0b
            return lat.mte_startup + _cdiv(v[3] * cube.fractal_bytes, b)

        def img2col(v):  # ..., m_count (18), k_count (20)
            return lat.mte_startup + _cdiv(v[17] * v[19] * _itemsize(v[0]), bw.l1_to_l0a)

        def mmad(v):  # dtype, dst, a, b, m, k, n, init
            isz = _itemsize(v[0])
            c = _cdiv(v[4], cube.m0) * _cdiv(v[5], cube.k0(isz)) * _cdiv(v[6], cube.n0)
            return lat.cube_startup + c * (cube.fp32_rate_divisor if isz == 4 else 1)

        def l0c_to_ub(v):  # dtype, dst, src, n1, m, src_m (the path is absent when l0c_to_ub = 0)
            return lat.vector_startup + _cdiv(v[3] * v[4] * cube.n0 * L0C_ITEMSIZE, max(bw.l0c_to_ub, 1))

        def vector(v):  # dtype is field 0, repeat field 4
            per = vec.cycles_per_repeat_int64 if v[0] == isa.INT64_CODE else vec.cycles_per_repeat
            return lat.vector_startup + v[4] * per

        def compare(v):  # vcmpv: dtype, mode, dst, src0, src1, repeat
            per = vec.cycles_per_repeat_int64 if v[0] == isa.INT64_CODE else vec.cycles_per_repeat
            return lat.vector_startup + v[5] * per

        def convert(v):  # vconv: src_dtype, dst_dtype, round, dst, src0, repeat
            return lat.vector_startup + v[5] * vec.cycles_per_repeat

        def vector_tr(v):
            return lat.vector_startup + v[4] * vec.cycles_per_repeat_transcendental

        def transpose(v):  # vtranspose: dtype, dst, src, repeat; a 16x16 matrix is 16*16*itemsize bytes
            return lat.vector_startup + v[3] * _cdiv(256 * _itemsize(v[0]), vec.repeat_bytes) * vec.cycles_per_repeat

        def sync(v):
            return lat.scalar

        def select(v):  # vsel: repeat is field 5 (after dtype, dst, cond, src0, src1)
            return lat.vector_startup + v[5] * vec.cycles_per_repeat

        by_group = {"nd2nz": nd2nz, "load2d": load2d, "img2col": img2col, "mmad": mmad,
                    "fixpipe": l0c_to_ub, "vector": vector, "vconv": vector, "reduce": vector,
                    "broadcast": vector, "sync": sync, "spmd": sync, "scalar": sync,
                    "dma_reg": dma(bw.gm_to_ub, None), "select": select,
                    "compare": compare, "convert": convert, "transpose": transpose}
        self._fn: dict[str, Callable] = {}
        for d in isa.INSTRUCTIONS:
            if d.group == "dma":
                self._fn[d.mnemonic] = dma(dma_bw[d.mnemonic], read_arg_field(d.mnemonic))
            elif d.mnemonic in isa.TRANSCENDENTAL:
                self._fn[d.mnemonic] = vector_tr
            else:
                self._fn[d.mnemonic] = by_group[d.group]

    def cost(self, ins: isa.Instr) -> int:
        """Cycles of ``ins`` on its pipe (fields assumed valid)."""
        return int(self._fn[ins.defn.mnemonic](ins.values))

    def fn(self, mnemonic: str) -> Callable:
        """The cost function of ``mnemonic`` taking the instruction's field values."""
        return self._fn[mnemonic]


@lru_cache(maxsize=256)
def cost_functions(spec: SocSpec, active_cores: int = 1, l2: tuple[int, ...] = ()) -> tuple[dict, dict]:
    """``(shared, full)``: the cost functions by mnemonic of SoC ``spec`` with the GM bandwidth shared
    among ``active_cores`` cores, and at the full per-core rate (the compiled bound's pipe terms),
    both with the L2 fractions ``l2`` (as :class:`CostModel`); cached, the dicts are shared (never
    modify them)."""
    full = CostModel(spec, 1, l2)._fn
    shared = full if active_cores == 1 else CostModel(spec, active_cores, l2)._fn
    return shared, full
