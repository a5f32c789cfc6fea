"""Vector programs for the trigonometric and hyperbolic families, Mish, ThresholdedRelu and Shrink.

Each program is a straight-line list of :data:`cann.lowering.math.Step` tuples over the vector
unit's float instructions (``vadd vsub vmul vdiv vmax vmin vadds vmuls vmaxs vrelu vexp vln vrec
vsqrt vabs vmov``) plus ``vsel`` (``("sel", dst, cond, a, b)``: ``dst = cond != 0 ? a : b``),
written the way vector math libraries (Cephes' single-precision routines, which Ascend's TBE
operators follow) compute them: argument reduction, then short minimax polynomials evaluated
with ``vmuls``/``vadds``/``vmul`` (Horner), with the branches of the scalar code turned into
``vsel`` selections between both sides. The programs run in float32 (:data:`FP32_KINDS`: under
``force_fp16`` the kernel converts its fp16 chunks with ``vconv`` first and back at the end, as
TBE's high-precision mode casts fp16 inputs of transcendental operators to fp32).

Building blocks, all exact:

* ``round(v)``: ``(v + 1.5*2^23) - 1.5*2^23`` (the fp32 "magic number" rounding to nearest, for
  ``|v| < 2^22``); no float->int conversion is needed.
* ``step(d)`` = 1 if ``d > 0`` else 0: ``min(relu(d) * 2^100 * 2^49, 1)``. The smallest positive
  fp32 value is 2^-149 (a subnormal: the modeled vector unit keeps IEEE gradual underflow), so
  every positive ``d`` reaches 1 and 0 stays 0; ``+inf`` gives 1. ``sign(x)`` likewise clamps
  ``x * 2^149`` to [-1, 1]. ``d = x - c`` is positive exactly when ``x > c`` (IEEE subtraction of
  distinct values never rounds to 0 with gradual underflow), so ``step(x - c)`` is the comparison
  ``x > c``.

Programs (x the input, a = |x|; accuracy measured on the simulator, docs/supported-ops.md):

* sin / cos / tan: k = round(x * 2/pi); r = x - k*(pi/2) by Cody-Waite with four 8-bit pieces of
  pi/2 and a fifth fp32 piece, k split as kh + kl (kh a multiple of 2^12) so that every
  ``kh * piece`` and ``kl * piece`` is exact for ``|k| < 2^22``; within 3 ulp (tan 5) for
  ``|x| <= 1e6``; up to 6.6e6 the rounding of ``x * 2/pi`` leaves ``|r|`` past pi/4 and the error
  grows to ~1e-5 relative; beyond, the magic-number rounding fails and the result is meaningless
  (no Payne-Hanek reduction); s = sin(r), c = cos(r) by Cephes' sinf/cosf
  polynomials on ``|r| <= pi/4``; the quadrant q = k mod 4 (cos: k + 1) is computed in floats
  (``k - 4*round(k/4 - 3/8)``), its parity picks c or s with ``vsel`` and its high bit the sign;
  tan = s/c or -c/s by parity.
* atan: Cephes atanf: ``|x| > tan(3pi/8)``: pi/2 + atan(-1/|x|); ``|x| > tan(pi/8)``:
  pi/4 + atan((|x|-1)/(|x|+1)); else the polynomial on |x| directly; sign restored.
* asin / acos: Cephes asinf: ``|x| <= 1/2``: odd polynomial in x; else
  ``pi/2 - 2 asin(sqrt((1-|x|)/2))``; acos from the same pieces (``pi/2 - asin(x)`` near 0,
  ``2 asin(sqrt((1-x)/2))`` near 1 without cancellation, ``pi - ...`` near -1).
* sinh / cosh: ``h = exp(|x| - c1) * exp(c1 - ln 2)`` (= e^|x| / 2 without overflow up to the
  fp32 limit of the result; c1 = 0.693359375 so ``|x| - c1`` is exact); cosh = h + 1/(4h);
  sinh = h - 1/(4h) for ``|x| > 1`` and Cephes' sinhf polynomial below (no cancellation).
* tanh: Cephes tanhf: odd polynomial for ``|x| <= 0.625`` (relative precision for small |x|, which
  ``(1 - e^-2x) / (1 + e^-2x)`` loses), else ``1 - 2 / (e^2|x| + 1)`` (``e^2|x| = inf`` gives 1).
* asinh: odd polynomial (Cephes asinhf) for ``|x| < 1/2``; ``ln(a + sqrt(a^2 + 1))``; ``ln a + ln 2``
  for ``a > 4096`` (a^2 would overflow near 1.8e19).
* acosh: z = x - 1 (exact); Cephes acoshf's ``sqrt(z) * poly(z)`` for z < 1/2 (no cancellation
  near 1); ``ln(x + sqrt(z (x+1)))``; ``ln x + ln 2`` for ``x > 4096``; x < 1 gives NaN.
* atanh: Cephes atanhf: odd polynomial for ``|x| < 1/2``, else ``ln((1+a)/(1-a)) / 2``.
* mish: ``x tanh(softplus(x)) = x n / (n + 2)``, ``n = e^x (e^x + 2)`` with ``e^min(x, 20)``
  (tanh(softplus(20)) is 1 in fp32): no cancellation for small or negative x; below x = -80,
  ``(x e^(x+40)) e^-40`` (e^x itself would be an fp32 subnormal with few significant bits).
* thresholded_relu: ``step(x - alpha) ? x : 0``; shrink: ``x > lambd ? x - bias :
  (x < -lambd ? x + bias : 0)``.
"""

from __future__ import annotations

import math
from decimal import Decimal, getcontext
from fractions import Fraction

import numpy as np

Step = tuple

#: the kinds whose programs compute in float32 (fp16 chunks are converted with vconv around them)
FP32_KINDS = frozenset({"sin", "cos", "tan", "asin", "acos", "atan", "tanh", "sinh", "cosh", "asinh", "acosh", "atanh",
                        "mish", "thresholded_relu", "shrink"})

MAGIC = 1.5 * 2.0 ** 23  # fp32 round-to-nearest by addition (|v| < 2^22)
STEP_SCALE = (2.0 ** 100, 2.0 ** 49)  # 2^149: the smallest positive fp32 value times it is 1
LN2 = math.log(2.0)
C1 = 0.693359375  # Cephes' exact high part of ln 2
EXP_C1_LN2 = math.exp(C1 - LN2)  # e^(c1 - ln 2) ~= 1.000212


def _split(value: Fraction, bits: int, n: int) -> tuple[float, ...]:
    """``value`` as ``n`` pieces of ``bits`` significant bits each plus a final fp32 piece."""
    out, rem = [], value
    for _ in range(n):
        e = math.floor(math.log2(abs(rem)))
        q = Fraction(2) ** (e - bits + 1)
        p = round(rem / q) * q
        out.append(float(p))
        rem -= p
    out.append(float(np.float32(float(rem))))
    return tuple(out)


getcontext().prec = 60
_PI_2 = Fraction(Decimal("1.570796326794896619231321691639751442098584699687552910487472296"))
#: pi/2 for Cody-Waite: 8-bit pieces (fp32 has 24), so k * piece is exact for k of 16 bits
PIO2 = _split(_PI_2, 8, 4)
PIO2_F = float(np.float32(math.pi / 2))
PIO4_F = float(np.float32(math.pi / 4))
PI_F = float(np.float32(math.pi))

# Cephes single-precision coefficients (sinf.c, atanf.c, asinf.c, sinhf.c, asinhf.c, acoshf.c, atanhf.c)
SIN_C = (-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1)
COS_C = (2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2)
ATAN_C = (8.05374449538e-2, -1.38776856032e-1, 1.99777106478e-1, -3.33329491539e-1)
ASIN_C = (4.2163199048e-2, 2.4181311049e-2, 4.5470025998e-2, 7.4953002686e-2, 1.6666752422e-1)
SINH_C = (2.03721912945e-4, 8.33028376239e-3, 1.66667160211e-1)
ASINH_C = (2.0122003309e-2, -4.2699340972e-2, 7.4847586088e-2, -1.6666288134e-1)
ACOSH_C = (1.7596881071e-3, -7.5272886713e-3, 2.6454905019e-2, -1.1784741703e-1, 1.4142135263e0)
TANH_C = (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1, -3.33332819422e-1)
ATANH_C = (1.81740078349e-1, 8.24370301058e-2, 1.46691431730e-1, 1.99782164500e-1, 3.33337300303e-1)
TAN_3PI_8 = 2.414213562373095
TAN_PI_8 = 0.4142135623730950

#: vdup constants the programs use
CONSTS = {"c_one": 1.0, "c_zero": 0.0}


def poly(z: str, y: str, coeffs) -> list[Step]:
    """y = c0 z^(n-1) + ... + c_(n-1) by Horner's rule (z, y distinct)."""
    st: list[Step] = [("muls", y, z, None, coeffs[0])]
    for c in coeffs[1:]:
        st += [("adds", y, y, None, c), ("mul", y, y, z)]
    st.pop()  # the last coefficient is added, not multiplied
    return st


def round_steps(d: str, s: str) -> list[Step]:
    """d = round-to-nearest-even(s) for |s| < 2^22."""
    return [("adds", d, s, None, MAGIC), ("adds", d, d, None, -MAGIC)]


def step_steps(d: str, s: str) -> list[Step]:
    """d = 1 if s > 0 else 0 (exact; NaN stays NaN). d may be s."""
    return [("relu", d, s), ("muls", d, d, None, STEP_SCALE[0]), ("muls", d, d, None, STEP_SCALE[1]),
            ("min", d, d, "c_one")]


def sign_steps(d: str, s: str) -> list[Step]:
    """d = sign(s) in {-1, 0, 1} (exact). d may be s."""
    return [("muls", d, s, None, STEP_SCALE[0]), ("muls", d, d, None, STEP_SCALE[1]), ("maxs", d, d, None, -1.0),
            ("min", d, d, "c_one")]


def gt_steps(d: str, s: str, c: float) -> list[Step]:
    """d = 1 if s > c else 0."""
    return [("adds", d, s, None, -c)] + step_steps(d, d)


# ---------------------------------------------------------------------------------------------
# sin, cos, tan


def _reduce_pio2(x: str, k: str, r: str, t: str, kh: str, kl: str) -> list[Step]:
    """k = round(x * 2/pi), r = x - k pi/2 (Cody-Waite). k = kh + kl with kh a multiple of 2^12
    (at most 10 significant bits) and |kl| <= 2^11, so every ``kh * piece`` and ``kl * piece`` is
    exact in fp32 for |k| < 2^22."""
    st = [("muls", k, x, None, 2.0 / math.pi)] + round_steps(k, k)
    st += [("muls", kh, k, None, 2.0 ** -12)] + round_steps(kh, kh) + [("muls", kh, kh, None, 2.0 ** 12),
                                                                      ("sub", kl, k, kh)]
    st += [("mov", r, x)]
    for p in PIO2:
        st += [("muls", t, kh, None, -p), ("add", r, r, t), ("muls", t, kl, None, -p), ("add", r, r, t)]
    return st


def _sin_cos_poly(r: str, z: str, s: str, c: str, t: str) -> list[Step]:
    """s = sin(r), c = cos(r) for |r| <= pi/4 (Cephes sinf/cosf)."""
    st = [("mul", z, r, r)]
    st += poly(z, s, SIN_C) + [("mul", s, s, z), ("mul", s, s, r), ("add", s, s, r)]           # r + r z P(z)
    st += poly(z, c, COS_C) + [("mul", c, c, z), ("mul", c, c, z),                             # z^2 Q(z)
                               ("muls", t, z, None, -0.5), ("adds", t, t, None, 1.0), ("add", c, c, t)]
    return st


def _parity(d: str, k: str) -> list[Step]:
    """d = k mod 2 for integral k."""
    return [("muls", d, k, None, 0.5), ("adds", d, d, None, -0.25)] + round_steps(d, d) + [
        ("muls", d, d, None, -2.0), ("add", d, d, k)]


def sin_cos_program(kind: str) -> list[Step]:
    x, y = "x0", "y"
    k, r, t, z, s, c, o, q = "t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7"
    st = _reduce_pio2(x, k, r, t, o, q) + _sin_cos_poly(r, z, s, c, t)
    if kind == "tan":  # parity ? -c/s : s/c
        st += _parity(o, k)
        st += [("sel", t, o, c, s), ("sel", z, o, s, c), ("div", y, t, z),
               ("muls", o, o, None, -2.0), ("adds", o, o, None, 1.0), ("mul", y, y, o)]
        return st
    if kind == "cos":
        st.append(("adds", k, k, None, 1.0))
    # q = k mod 4; parity o picks cos(r), sign = 1 - q + o (q = 0, 1: +1; q = 2, 3: -1)
    st += _parity(o, k)
    st += [("muls", q, k, None, 0.25), ("adds", q, q, None, -0.375)] + round_steps(q, q) + [
        ("muls", q, q, None, -4.0), ("add", q, q, k),
        ("sub", q, o, q), ("adds", q, q, None, 1.0),
        ("sel", y, o, c, s), ("mul", y, y, q)]
    return st


# ---------------------------------------------------------------------------------------------
# inverse trigonometric


def atan_program() -> list[Step]:
    x, y = "x0", "y"
    a, hi, mid, xr, z, p, sg = "t0", "t1", "t2", "t3", "t4", "t5", "t6"
    st: list[Step] = [("abs", a, x)]
    st += gt_steps(hi, a, TAN_3PI_8) + gt_steps(mid, a, TAN_PI_8)
    # reduced argument: hi: -1/a; mid: (a - 1)/(a + 1); else a
    st += [("adds", xr, a, None, -1.0), ("adds", z, a, None, 1.0), ("div", xr, xr, z), ("sel", xr, mid, xr, a),
           ("rec", z, a), ("muls", z, z, None, -1.0), ("sel", xr, hi, z, xr)]
    st += [("mul", z, xr, xr)] + poly(z, p, ATAN_C) + [("mul", p, p, z), ("mul", p, p, xr), ("add", p, p, xr)]
    # + (hi + mid) * pi/4, sign restored
    st += [("add", hi, hi, mid), ("muls", hi, hi, None, math.pi / 4), ("add", p, p, hi)]
    st += sign_steps(sg, x) + [("mul", y, p, sg)]
    return st


def _asin_abs(x: str, a: str, big: str, z: str, xr: str, p: str) -> list[Step]:
    """p = asin(xr) where big = |x| > 1/2, xr = big ? sqrt((1 - |x|)/2) : |x| (Cephes asinf)."""
    st: list[Step] = [("abs", a, x)] + gt_steps(big, a, 0.5)
    st += [("muls", z, a, None, -0.5), ("adds", z, z, None, 0.5), ("sqrt", xr, z), ("sel", xr, big, xr, a),
           ("mul", z, xr, xr)]
    st += poly(z, p, ASIN_C) + [("mul", p, p, z), ("mul", p, p, xr), ("add", p, p, xr)]
    return st


def asin_program() -> list[Step]:
    x, y = "x0", "y"
    a, big, z, xr, p, sg = "t0", "t1", "t2", "t3", "t4", "t5"
    st = _asin_abs(x, a, big, z, xr, p)
    st += [("muls", z, p, None, -2.0), ("adds", z, z, None, math.pi / 2), ("sel", p, big, z, p)]
    st += sign_steps(sg, x) + [("mul", y, p, sg)]
    return st


def acos_program() -> list[Step]:
    x, y = "x0", "y"
    a, big, z, xr, p, sg = "t0", "t1", "t2", "t3", "t4", "t5"
    st = _asin_abs(x, a, big, z, xr, p) + sign_steps(sg, x)
    st += [("mul", p, p, sg),                                                          # sign * P
           ("muls", z, p, None, -1.0), ("adds", z, z, None, math.pi / 2),              # small: pi/2 - sP
           ("muls", a, sg, None, -math.pi / 2), ("adds", a, a, None, math.pi / 2),     # big: (1-sign) pi/2 + 2 sP
           ("muls", p, p, None, 2.0), ("add", a, a, p),
           ("sel", y, big, a, z)]
    return st


# ---------------------------------------------------------------------------------------------
# hyperbolic


def _half_exp(a: str, h: str) -> list[Step]:
    """h = e^a / 2 for a >= 0 without intermediate overflow."""
    return [("adds", h, a, None, -C1), ("exp", h, h), ("muls", h, h, None, EXP_C1_LN2)]


def sinh_program() -> list[Step]:
    x, y = "x0", "y"
    a, h, big, z, p, sg = "t0", "t1", "t2", "t3", "t4", "t5"
    st: list[Step] = [("abs", a, x)] + _half_exp(a, h)
    st += [("rec", z, h), ("muls", z, z, None, -0.25), ("add", h, h, z)]       # big: h - 1/(4h)
    st += gt_steps(big, a, 1.0)
    st += [("mul", z, a, a)] + poly(z, p, SINH_C) + [("mul", p, p, z), ("mul", p, p, a), ("add", p, p, a)]
    st += [("sel", p, big, h, p)] + sign_steps(sg, x) + [("mul", y, p, sg)]
    return st


def cosh_program() -> list[Step]:
    a, h, z = "t0", "t1", "t2"
    return [("abs", a, "x0")] + _half_exp(a, h) + [("rec", z, h), ("muls", z, z, None, 0.25), ("add", "y", h, z)]


def tanh_program() -> list[Step]:
    x, y = "x0", "y"
    a, z, p, m, big, sg = "t0", "t1", "t2", "t3", "t4", "t5"
    st: list[Step] = [("abs", a, x), ("mul", z, a, a)]
    st += poly(z, p, TANH_C) + [("mul", p, p, z), ("mul", p, p, a), ("add", p, p, a)]     # |x| <= 0.625
    st += [("muls", m, a, None, 2.0), ("exp", m, m), ("adds", m, m, None, 1.0), ("rec", m, m),  # 1 - 2/(e^2a + 1)
           ("muls", m, m, None, -2.0), ("adds", m, m, None, 1.0)]
    st += gt_steps(big, a, 0.625) + [("sel", p, big, m, p)]
    st += sign_steps(sg, x) + [("mul", y, p, sg)]
    return st


def asinh_program() -> list[Step]:
    x, y = "x0", "y"
    a, z, p, m, big, huge, sg = "t0", "t1", "t2", "t3", "t4", "t5", "t6"
    st: list[Step] = [("abs", a, x), ("mul", z, a, a)]
    st += poly(z, p, ASINH_C) + [("mul", p, p, z), ("mul", p, p, a), ("add", p, p, a)]     # small
    st += [("adds", m, z, None, 1.0), ("sqrt", m, m), ("add", m, m, a), ("ln", m, m)]      # ln(a + sqrt(a^2+1))
    st += [("ln", z, a), ("adds", z, z, None, LN2)]                                        # ln a + ln 2
    st += gt_steps(huge, a, 4096.0) + [("sel", m, huge, z, m)]
    st += gt_steps(big, a, 0.5) + [("sel", p, big, m, p)]
    st += sign_steps(sg, x) + [("mul", y, p, sg)]
    return st


def acosh_program() -> list[Step]:
    x, y = "x0", "y"
    z, p, m, big, huge, t = "t0", "t1", "t2", "t3", "t4", "t5"
    st: list[Step] = [("adds", z, x, None, -1.0)]
    st += poly(z, p, ACOSH_C) + [("sqrt", t, z), ("mul", p, p, t)]                         # z < 1/2
    st += [("adds", m, x, None, 1.0), ("mul", m, m, z), ("sqrt", m, m), ("add", m, m, x), ("ln", m, m)]
    st += [("ln", t, x), ("adds", t, t, None, LN2)]
    st += gt_steps(huge, x, 4096.0) + [("sel", m, huge, t, m)]
    st += gt_steps(big, z, 0.5) + [("sel", y, big, m, p)]
    return st


def atanh_program() -> list[Step]:
    x, y = "x0", "y"
    a, z, p, m, big, sg = "t0", "t1", "t2", "t3", "t4", "t5"
    st: list[Step] = [("abs", a, x), ("mul", z, a, a)]
    st += poly(z, p, ATANH_C) + [("mul", p, p, z), ("mul", p, p, a), ("add", p, p, a)]
    st += [("muls", m, a, None, -1.0), ("adds", m, m, None, 1.0), ("adds", z, a, None, 1.0), ("div", m, z, m),
           ("ln", m, m), ("muls", m, m, None, 0.5)]
    st += gt_steps(big, a, 0.5) + [("sel", p, big, m, p)]
    st += sign_steps(sg, x) + [("mul", y, p, sg)]
    return st


# ---------------------------------------------------------------------------------------------
# activations


def mish_program() -> list[Step]:
    u, n, w, lo = "t0", "t1", "t2", "t3"
    st: list[Step] = [("min", u, "x0", "c_mish"), ("exp", u, u),
                      ("adds", n, u, None, 2.0), ("mul", n, n, u),                   # n = e (e + 2)
                      ("adds", u, n, None, 2.0), ("div", n, n, u), ("mul", n, n, "x0")]
    # x < -80: e^x loses bits as an fp32 subnormal below -87; mish = x e^x (1 + O(e^x)) = (x e^(x+40)) e^-40
    st += [("adds", w, "x0", None, 40.0), ("exp", w, w), ("mul", w, w, "x0"), ("muls", w, w, None, math.exp(-40.0))]
    st += [("muls", lo, "x0", None, -1.0)] + gt_steps(lo, lo, 80.0) + [("sel", "y", lo, w, n)]
    return st


def thresholded_relu_program(alpha: float) -> list[Step]:
    return gt_steps("t0", "x0", alpha) + [("sel", "y", "t0", "x0", "c_zero")]


def shrink_program(bias: float, lambd: float) -> list[Step]:
    up, dn, v = "t0", "t1", "t2"
    st = gt_steps(up, "x0", lambd)
    st += [("muls", dn, "x0", None, -1.0)] + gt_steps(dn, dn, lambd)                   # -x > lambd
    st += [("adds", v, "x0", None, bias), ("sel", v, dn, v, "c_zero"),
           ("adds", "y", "x0", None, -bias), ("sel", "y", up, "y", v)]
    return st


_PROGRAMS = {
    "sin": lambda p: sin_cos_program("sin"), "cos": lambda p: sin_cos_program("cos"),
    "tan": lambda p: sin_cos_program("tan"), "atan": lambda p: atan_program(),
    "asin": lambda p: asin_program(), "acos": lambda p: acos_program(),
    "tanh": lambda p: tanh_program(), "sinh": lambda p: sinh_program(), "cosh": lambda p: cosh_program(),
    "asinh": lambda p: asinh_program(), "acosh": lambda p: acosh_program(), "atanh": lambda p: atanh_program(),
    "mish": lambda p: mish_program(),
    "thresholded_relu": lambda p: thresholded_relu_program(p["alpha"]),
    "shrink": lambda p: shrink_program(p["bias"], p["lambd"]),
}


def program(kind: str, params: dict[str, float]) -> tuple[list[Step], dict[str, float]]:
    """(steps over x0 -> y, vdup constants) of ``kind``; KeyError when it is not one of these."""
    steps = _PROGRAMS[kind](params)
    names = {v for s in steps for v in s[1:5] if isinstance(v, str)}
    consts = {c: v for c, v in {**CONSTS, "c_mish": 20.0}.items() if c in names}
    return steps, consts
