"""msopst's pass rule for one output (re-implemented from Ascend/msopgen
``tools/msopst/st/interface/compare_data.py``, ``CompareData._get_compare_result`` /
``_get_error_percent`` / ``_cal_relative_diff_np``).

With ``error_threshold = [diff_thd, pct_thd]`` (default ``[0.01, 0.05]``), both arrays flattened and
taken as float32:

* ``diff = |real - expect|``; an element with ``diff < diff_thd`` is within threshold (its
  "relative" error is the absolute one); otherwise its relative error is
  ``diff / (max(|real|, |expect|, 2**-14 / diff_thd) + 1e-9)``;
* an element is an *error* when that relative error exceeds ``diff_thd``;
* **pass iff** the share of non-error elements is ``>= 1 - pct_thd`` **and** every error is
  ``< 0.1`` (msopst's hard-coded ``max_diff_thd``);
* different sizes fail; two empty arrays pass.

One deliberate difference: msopst's filter ``diff > 0`` is false for NaN, so an output element
that is NaN (or inf against inf of the other sign) never counts as an error there; here such a
mismatch is an error with relative error inf (so the case fails).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: msopst's hard-coded bound on the largest relative error (``max_diff_hd``)
MAX_DIFF_THD = 0.1


@dataclass(frozen=True)
class Verdict:
    """One output's comparison: ``result`` "Pass"/"Failed", ``pass_percent`` (share of elements
    within threshold, in %), ``max_error`` (largest relative error of an error element, 0 if
    none), ``error_count``, ``error_index`` (flat indices of the error elements, ascending)."""

    result: str
    pass_percent: float
    max_error: float
    error_count: int
    error_index: tuple[int, ...] = ()
    message: str = ""

    @property
    def passed(self) -> bool:
        return self.result == "Pass"


def relative_error(real: np.ndarray, expect: np.ndarray, diff_thd: float) -> np.ndarray:
    """Per-element relative error of msopst (float32 in, float32 out, flat)."""
    real = np.asarray(real, np.float32).ravel()
    expect = np.asarray(expect, np.float32).ravel()
    diff = np.abs(real - expect)
    floor = np.float32((1.0 / (1 << 14)) / diff_thd)
    denom = np.maximum(np.maximum(np.abs(real), np.abs(expect)), floor) + np.float32(10e-10)
    return np.where(diff < diff_thd, diff, diff / denom)


def compare(real, expect, error_threshold=(0.01, 0.05)) -> Verdict:
    """msopst's verdict on ``real`` (device) against ``expect`` (reference); see the module doc."""
    diff_thd, pct_thd = float(error_threshold[0]), float(error_threshold[1])
    real = np.asarray(real).ravel()
    expect = np.asarray(expect).ravel()
    if real.size == 0 and expect.size == 0:
        return Verdict("Pass", 100.0, 0.0, 0)
    if real.size != expect.size:
        return Verdict("Failed", 0.0, 0.0, 0, (), f"size of the output {real.size} != expected {expect.size}")
    if real.dtype == np.bool_ or expect.dtype == np.bool_:
        real, expect = real.astype(np.float32), expect.astype(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        rel = relative_error(real, expect, diff_thd)
    # msopst drops NaN differences (its ``diff > 0`` filter is false for them), so a NaN or inf
    # output would pass; here a non-finite mismatch is an error of relative size inf
    same = (real == expect) | (np.isnan(real.astype(np.float32)) & np.isnan(expect.astype(np.float32)))
    rel = np.where(np.isnan(rel) & ~same, np.float32(np.inf), rel)
    err = np.nonzero(rel > diff_thd)[0]
    ok_share = (real.size - err.size) / real.size
    result = "Pass" if ok_share >= 1 - pct_thd else "Failed"
    max_err = float(rel[err].max()) if err.size else 0.0
    if err.size and max_err >= MAX_DIFF_THD:
        result = "Failed"
    msg = (f"{err.size} of {real.size} elements over relative error {diff_thd:g}"
           f" (pass needs >= {100 * (1 - pct_thd):.2f}% within, and every error < {MAX_DIFF_THD:g});"
           f" largest {max_err:.4g}")
    return Verdict(result, 100.0 * ok_share, max_err, int(err.size), tuple(int(i) for i in err), msg)
