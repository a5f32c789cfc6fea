"""Primitives shared by the simulated AI Core's units (:mod:`cann.sim.core`, :mod:`cann.sim.mte`,
:mod:`cann.sim.vector`): strided views of buffer bytes, the inf/NaN tests (whole arrays and per lane
of a lockstep run's leading core axis), the vconv rounding, and the handler fault."""

from __future__ import annotations

from functools import lru_cache

import ml_dtypes
import numpy as np

_F32 = np.dtype(np.float32)
_U8 = np.dtype(np.uint8)
_F16_TO_F32 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)
_PLAN_CACHE = 8192  # cached vector-instruction plans per mnemonic
_MAX_SLAB = 64 << 20  # bytes of the padded feature-map window one img2col may build (a simulator limit)
#: float dtype -> (unsigned view, exponent mask): a value is inf/NaN iff all its exponent bits are set
_EXP_BITS = {np.dtype(np.float16): (np.dtype(np.uint16), 0x7C00), np.dtype(ml_dtypes.bfloat16): (np.dtype(np.uint16), 0x7F80),
             _F32: (np.dtype(np.uint32), 0x7F800000)}
#: vector instructions that can overflow: turn finite operands into inf/NaN (a division by zero, log 0
#: or the root of a negative number is not an overflow)
_CAN_OVERFLOW = frozenset({"vadd", "vsub", "vmul", "vmla", "vdiv", "vadds", "vmuls", "vexp", "vrec"})
#: the divisor's operand index in a plan's views (dst, src0, src1, scalar)
_DIVISOR = {"vdiv": 2, "vrec": 1}


def nonfinite(a: np.ndarray) -> bool:
    """Whether float array ``a`` (any strides) holds an inf or NaN; False for other dtypes.
    Reads the exponent bits (several times faster than ``np.isfinite`` on float16)."""
    bits = _EXP_BITS.get(a.dtype)
    if bits is None or a.size == 0:
        return False
    u, mask = bits
    return int(np.bitwise_and(a.view(u), u.type(mask)).max()) == mask


def nonfinite_lanes(a: np.ndarray) -> np.ndarray:
    """Per index of ``a``'s leading (core) axis, whether that slice holds an inf or NaN (bool array;
    all False for non-float dtypes)."""
    n = a.shape[0]
    bits = _EXP_BITS.get(a.dtype)
    if bits is None or a.size == 0:
        return np.zeros(n, bool)
    u, mask = bits
    return np.bitwise_and(a.view(u), u.type(mask)).reshape(n, -1).max(axis=1) == mask


def _any_nonfinite(arrays, n: int) -> np.ndarray:
    """Per lane, whether any of ``arrays`` (each with the leading core axis) holds inf/NaN there."""
    out = np.zeros(n, bool)
    for x in arrays:
        out |= nonfinite_lanes(x)
    return out


_CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "gt": np.greater, "ge": np.greater_equal,
        "le": np.less_equal}


def _round(x: np.ndarray, mode: str) -> np.ndarray:
    """float64 ``x`` rounded to integral values by ``mode`` (:data:`cann.hw.isa.ROUND_MODES`)."""
    if mode == "rint":
        return np.rint(x)
    if mode == "round":  # ties away from zero (exact in float64 for float16 / float32 inputs)
        return np.copysign(np.floor(np.abs(x) + 0.5), x)
    return {"floor": np.floor, "ceil": np.ceil, "trunc": np.trunc}[mode](x)


def convert(s: np.ndarray, ddt: np.dtype, mode: str) -> np.ndarray:
    """vconv semantics: float -> int rounds by ``mode``, saturates and takes NaN to 0; float ->
    same float rounds to an integral value; int -> float and float narrowing round to nearest even;
    int64 -> int32 keeps the low 32 bits."""
    if s.dtype.kind == "f" and (ddt.kind in "iu" or ddt == s.dtype):
        x = _round(s.astype(np.float64), mode)
        if ddt.kind == "f":
            return x.astype(ddt)
        info = np.iinfo(ddt)
        x = np.where(np.isnan(x), 0.0, x)
        out = np.clip(x, info.min, info.max).astype(ddt)
        return np.where(x >= float(info.max), ddt.type(info.max), out)
    return s.astype(ddt)


class _Fault(Exception):
    """Raised by instruction handlers; :meth:`AICore.run` adds the location. ``lane``: the core of a
    lockstep group it happens in (None: all of them)."""

    def __init__(self, msg: str, lane: int | None = None):
        super().__init__(msg)
        self.lane = lane


def _view(buf: np.ndarray, offset: int, shape: tuple, strides: tuple, dt: np.dtype = _U8) -> np.ndarray:
    """A writable strided view of ``buf``'s bytes (bounds are checked by the caller; the stride of a
    dimension of size 1 is never used, so it is not passed on: it may be any field value)."""
    if 1 in shape:
        strides = tuple(0 if n == 1 else s for n, s in zip(shape, strides))
    return np.ndarray(shape, dt, buffer=buf, offset=offset, strides=strides)


@lru_cache(maxsize=4096)
def lane_grid(bases: tuple[int, ...]) -> tuple[int, int, int] | None:
    """``(q, s1, s2)`` when ``bases[j] == bases[0] + (j // q) * s1 + (j % q) * s2`` for every lane j
    (1 < q < n, q divides n: the lanes form a (n // q, q) grid, one strided view covers them), else
    None. For bases that are an arithmetic progression use a single stride instead."""
    n = len(bases)
    b0 = bases[0]
    for q in range(2, n):
        if n % q:
            continue
        s1, s2 = bases[q] - b0, bases[1] - b0
        if all(bases[j] == b0 + (j // q) * s1 + (j % q) * s2 for j in range(n)):
            return q, s1, s2
    return None
