"""Operand checks for ascend instructions, on raw field values (shared by the op verifiers).

``instr_error(defn, values)`` returns the first problem of one instruction as a message, or
``None``. It works on plain values so that the dialect verifiers, the decoder of an ``.om`` and the
simulator can all apply the same rules.

The limits (maximum vector repeat, event ids, lanes per repeat, cube fractal shape) are read from
the SoC descriptions in ``cann/hw/socs``; the dialect is SoC-independent, so each check uses the
loosest bound over all known SoCs. SoC-specific capacity checks (buffer sizes, alignment) belong
to the lowerings and the simulator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

from cann.hw import isa
from cann.hw.config import available_socs, load_soc


@dataclass(frozen=True)
class IsaLimits:
    max_repeat: int  # vector / load2d repeat upper bound
    event_ids: int  # flag events per pipe pair (event in 0..event_ids-1)
    repeat_bytes: int  # bytes per vector repeat (lanes = repeat_bytes / itemsize)
    m0: int  # cube fractal rows (m multiple of m0)
    n0: int  # cube fractal columns (n multiple of n0)
    k0: dict[int, int]  # dtype code -> fractal K0

    def lanes(self, dtype: int) -> int:
        return self.repeat_bytes // isa.DTYPES[dtype].itemsize


@cache
def limits() -> IsaLimits:
    socs = [load_soc(n) for n in available_socs()]
    return IsaLimits(
        max_repeat=max(s.vector.max_repeat for s in socs),
        event_ids=max(s.event_ids for s in socs),
        repeat_bytes=max(s.vector.repeat_bytes for s in socs),
        m0=math.gcd(*(s.cube.m0 for s in socs)),
        n0=math.gcd(*(s.cube.n0 for s in socs)),
        k0={code: math.gcd(*(s.cube.k0(dt.itemsize) for s in socs)) for code, dt in isa.DTYPES.items()},
    )


class _Bad(Exception):
    pass


def _in(v: dict, name: str, lo: int, hi: int | None = None) -> None:
    x = v[name]
    if x < lo or (hi is not None and x > hi):
        rng = f"in {lo}..{hi}" if hi is not None else (">= 0" if lo == 0 else f">= {lo}")
        raise _Bad(f"{name} must be {rng}, got {x}")


def _multiple(v: dict, name: str, q: int) -> None:
    if v[name] <= 0 or v[name] % q:
        raise _Bad(f"{name} must be a positive multiple of {q}, got {v[name]}")


def _dtype(v: dict) -> int:
    if v["dtype"] not in isa.DTYPES:
        raise _Bad(f"dtype must be one of {sorted(isa.DTYPES)} ({', '.join(str(d) for d in isa.DTYPES.values())}), "
                   f"got {v['dtype']}")
    return v["dtype"]


_ADDRESSES = {"dst", "src", "a", "b", "src0", "src1", "src_arg", "dst_arg", "cond"}


def _check_dma(v: dict) -> None:
    _in(v, "nburst", 1)
    _in(v, "burst", 1)
    _in(v, "src_stride", 0)
    _in(v, "dst_stride", 0)


def _check_nd2nz(v: dict) -> None:
    _fdtype(v)
    _in(v, "rows", 1)
    _in(v, "cols", 1)
    _in(v, "src_row_stride", 0)


def _check_load2d(v: dict) -> None:
    if v["dst_space"] not in (isa.L0A, isa.L0B):
        raise _Bad(f"dst_space must be {isa.L0A} (L0A) or {isa.L0B} (L0B), got {v['dst_space']}")
    _in(v, "repeat", 1, limits().max_repeat)
    _in(v, "src_stride", 0)
    _in(v, "dst_stride", 0)


def _check_img2col(v: dict, c0: int) -> None:
    """img2col / img2col_c04 fields; ``c0``: the map's channel size (16, or 4 for img2col_c04)."""
    lim = limits()
    dt = _fdtype(v)
    for n in ("fm_c1", "fm_h", "fm_w", "stride_h", "stride_w", "kernel_h", "kernel_w", "dil_h", "dil_w"):
        _in(v, n, 1)
    for n in ("pad_t", "pad_b", "pad_l", "pad_r", "m_start", "k_start"):
        _in(v, n, 0)
    # the C1 blocks of the map must not overlap: a pitch of at least one packed block (0: packed)
    if v["fm_c1_stride"]:
        _in(v, "fm_c1_stride", v["fm_h"] * v["fm_w"] * c0 * isa.DTYPES[dt].itemsize)
    _multiple(v, "m_count", lim.m0)
    _multiple(v, "k_count", lim.k0[dt])


def _check_mmad(v: dict) -> None:
    lim = limits()
    dt = _fdtype(v)
    _multiple(v, "m", lim.m0)
    _multiple(v, "k", lim.k0[dt])
    _multiple(v, "n", lim.n0)
    _in(v, "init", 0, 1)


def _check_fixpipe(v: dict) -> None:
    _fdtype(v)
    _in(v, "n1", 1)
    _in(v, "m", 1)
    if v["src_m"] < v["m"]:
        raise _Bad(f"src_m must be >= m ({v['m']}), got {v['src_m']}")


def _check_vector(v: dict, lanes: int) -> None:
    _dtype(v)
    _in(v, "repeat", 1, limits().max_repeat)
    _in(v, "mask", 1, lanes)
    for n in ("dst_blk", "src0_blk", "src1_blk", "dst_rep", "src0_rep", "src1_rep"):
        _in(v, n, 0)


def _check_reg(v: dict) -> None:
    _in(v, "reg", 0, isa.SCALAR_REGS - 1)


def _check_ld_idx(v: dict) -> None:
    _check_reg(v)
    if v["dtype"] not in isa.IDX_DTYPES:
        raise _Bad(f"dtype must be one of {sorted(isa.IDX_DTYPES)} "
                   f"({', '.join(str(d) for d in isa.IDX_DTYPES.values())}), got {v['dtype']}")
    _in(v, "bound", 1)


def _check_dma_reg(v: dict) -> None:
    _check_dma(v)
    _check_reg(v)
    _in(v, "reg_stride", 0)


def _vec_dtype(v: dict, mnemonic: str) -> int:
    code = _dtype(v)
    ok = isa.VEC_DTYPES.get(mnemonic, isa.FLOAT_CODES)
    if code not in ok:
        raise _Bad(f"{mnemonic} does not compute on {isa.DTYPES[code]} (dtype {code}); it takes "
                   f"{', '.join(f'{c}={isa.DTYPES[c]}' for c in sorted(ok))}")
    return code


def _check_compare(v: dict) -> None:
    _vec_dtype(v, "vcmpv")
    if v["mode"] not in isa.CMP_MODES:
        raise _Bad(f"mode must be one of {', '.join(f'{k}={n}' for k, n in isa.CMP_MODES.items())}, got {v['mode']}")
    _in(v, "repeat", 1, limits().max_repeat)
    _in(v, "mask", 1, limits().lanes(v["dtype"]))
    for n in ("dst_rep", "src0_rep", "src1_rep"):
        _in(v, n, 0)


def _check_convert(v: dict) -> None:
    for n in ("src_dtype", "dst_dtype"):
        if v[n] not in isa.DTYPES:
            raise _Bad(f"{n} must be one of {sorted(isa.DTYPES)}, got {v[n]}")
    modes = isa.VCONV_PAIRS.get((v["src_dtype"], v["dst_dtype"]))
    if modes is None:
        raise _Bad(f"no vconv from {isa.DTYPES[v['src_dtype']]} to {isa.DTYPES[v['dst_dtype']]}")
    if v["round"] not in modes:
        raise _Bad(f"round must be one of {sorted(modes)} for this pair, got {v['round']}")
    wide = max(isa.DTYPES[v["src_dtype"]].itemsize, isa.DTYPES[v["dst_dtype"]].itemsize)
    _in(v, "repeat", 1, limits().max_repeat)
    _in(v, "mask", 1, limits().repeat_bytes // wide)
    for n in ("dst_rep", "src0_rep"):
        _in(v, n, 0)


def _fdtype(v: dict) -> int:
    code = _dtype(v)
    if code not in isa.FLOAT_CODES:
        raise _Bad(f"dtype must be a float code ({sorted(isa.FLOAT_CODES)}) for the cube and format conversions, "
                   f"got {code}")
    return code


def _check_select(v: dict) -> None:
    _dtype(v)
    _in(v, "repeat", 1, limits().max_repeat)
    _in(v, "mask", 1, limits().lanes(v["dtype"]))
    for n in ("dst_blk", "cond_blk", "src0_blk", "src1_blk", "dst_rep", "cond_rep", "src0_rep", "src1_rep"):
        _in(v, n, 0)


def _check_flag(v: dict) -> None:
    for n in ("src_pipe", "dst_pipe"):
        if v[n] not in isa.Pipe.__members__.values() or v[n] == isa.Pipe.ALL:
            raise _Bad(f"{n} must be a single pipe (0..{int(isa.Pipe.ALL) - 1}), got {v[n]}")
    if v["src_pipe"] == v["dst_pipe"]:
        raise _Bad(f"src_pipe and dst_pipe must differ, both are {isa.Pipe(v['src_pipe']).name}")
    _in(v, "event", 0, limits().event_ids - 1)


def _check_barrier(v: dict) -> None:
    if v["pipe"] not in isa.Pipe.__members__.values():
        raise _Bad(f"pipe must be in 0..{int(isa.Pipe.ALL)}, got {v['pipe']}")
    if v["pipe"] == isa.Pipe.S:
        raise _Bad("pipe_barrier does not support pipe S (0): the scalar pipe is in order")


def _check_rotate(v: dict) -> None:
    if v["space"] not in isa.SPACE_NAMES:
        raise _Bad(f"space must be an on-chip buffer code {sorted(isa.SPACE_NAMES)} "
                   f"({', '.join(f'{c} = {n}' for c, n in sorted(isa.SPACE_NAMES.items()))}), got {v['space']}")
    _in(v, "base", 0)
    _in(v, "size", 1)
    _in(v, "copies", 1)
    _in(v, "step", 0)


def _check_rotate_event(v: dict) -> None:
    _check_flag({"src_pipe": v["src_pipe"], "dst_pipe": v["dst_pipe"], "event": 0})
    _in(v, "base", 0, limits().event_ids - 1)
    _in(v, "copies", 1, limits().event_ids - v["base"])
    _in(v, "step", 0)


def instr_error(defn: isa.InstrDef, values) -> str | None:
    """The first problem of instruction ``defn`` with field ``values`` (in field order), or None."""
    v = dict(zip(defn.field_names, values))
    try:
        for name in _ADDRESSES.intersection(v):
            _in(v, name, 0)
        g = defn.group
        if g == "dma":
            _check_dma(v)
            if "dtype" in v:  # copy_ub_to_gm_add: whole float elements
                isz = isa.DTYPES[_fdtype(v)].itemsize
                for f in ("burst", "src_stride", "dst_stride"):
                    if v[f] % isz:
                        raise _Bad(f"{f} = {v[f]} is not a whole number of {isa.DTYPES[v['dtype']]} elements")
        elif g == "nd2nz":
            _check_nd2nz(v)
        elif g == "load2d":
            _check_load2d(v)
        elif g == "img2col":
            _check_img2col(v, 4 if defn.mnemonic == "img2col_c04" else limits().n0)
        elif g == "mmad":
            _check_mmad(v)
        elif g == "fixpipe":
            _check_fixpipe(v)
        elif g in ("vector", "reduce", "broadcast"):
            _check_vector(v, limits().lanes(_vec_dtype(v, defn.mnemonic)))
        elif g == "compare":
            _check_compare(v)
        elif g == "convert":
            _check_convert(v)
        elif g == "vconv":
            # a conversion processes repeat_bytes / 4 elements per repeat, whatever dtype says
            _check_vector(v, limits().repeat_bytes // 4)
        elif g == "scalar":
            _check_ld_idx(v)
        elif g == "dma_reg":
            _check_dma_reg(v)
        elif g == "select":
            _check_select(v)
        elif g == "transpose":
            _dtype(v)
            _in(v, "repeat", 1, limits().max_repeat)
            for n in ("dst_rep", "src_rep", "dst_row", "src_row"):
                _in(v, n, 0)
        elif defn.mnemonic in ("set_flag", "wait_flag"):
            _check_flag(v)
        elif defn.mnemonic == "pipe_barrier":
            _check_barrier(v)
        elif g == "spmd":
            if defn.mnemonic == "block_offset":
                _in(v, "arg", 0)
            elif defn.mnemonic == "block_offset_mod":
                _in(v, "arg", 0)
                _in(v, "modulo", 1)
            elif defn.mnemonic == "block_offset_div":
                _in(v, "arg", 0)
                _in(v, "divisor", 1)
            elif defn.mnemonic == "block_if":
                _in(v, "lo", 0)
                _in(v, "hi", v["lo"])
            elif defn.mnemonic == "loop_begin":
                _in(v, "count", 0)
            elif defn.mnemonic == "loop_offset":
                _in(v, "arg", 0)
            elif defn.mnemonic == "loop_rotate":
                _check_rotate(v)
            elif defn.mnemonic == "loop_rotate_event":
                _check_rotate_event(v)
            elif defn.mnemonic in ("loop_step", "loop_clamp"):
                _in(v, "field_no", 0)  # which fields it may name: cann.hw.loops, on the kernel's code
                if defn.mnemonic == "loop_clamp":
                    _in(v, "hi", v["lo"])
        else:  # a new group in the table without checks here is a bug
            raise AssertionError(f"no operand checks for instruction group {g!r} ({defn.mnemonic})")
    except _Bad as e:
        return str(e)
    return None
