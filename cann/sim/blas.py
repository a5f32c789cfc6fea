"""Run numpy's BLAS single-threaded while simulating.

The simulator's matmuls are small (one mmad tile, typically <= 256 x 256 x 256). OpenBLAS's thread
pool costs far more than it gains on them (measured: 64x288x64 fp32 takes 25 us on one thread,
50 us on two, and milliseconds when the machine is loaded), so :func:`single_threaded` pins the
BLAS bundled with numpy to one thread for the duration of a kernel and restores the old setting.
Best effort: when no OpenBLAS control symbol is found it does nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import os
from functools import cache

import numpy as np

_SET = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads", "openblas_set_num_threads64_",
        "openblas_set_num_threads")
_GET = ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads", "openblas_get_num_threads64_",
        "openblas_get_num_threads")


@cache
def _controls():
    root = os.path.dirname(np.__file__)
    cands = []
    for d in (root + ".libs", os.path.join(root, ".dylibs"), os.path.join(root, "..", "numpy.libs")):
        cands += glob.glob(os.path.join(d, "*openblas*"))
    try:  # already-loaded libraries (Linux)
        with open("/proc/self/maps") as f:
            cands += sorted({ln.split()[-1] for ln in f if "openblas" in ln and ln.rstrip().endswith((".so", ".so.0"))})
    except OSError:
        pass
    for path in cands:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for s, g in zip(_SET, _GET):
            if hasattr(lib, s) and hasattr(lib, g):
                fs, fg = getattr(lib, s), getattr(lib, g)
                fs.argtypes, fs.restype, fg.restype = [ctypes.c_int], None, ctypes.c_int
                return fs, fg
    return None


@contextlib.contextmanager
def single_threaded():
    """Pin numpy's OpenBLAS to one thread inside the ``with`` block."""
    c = _controls()
    if c is None:
        yield
        return
    fs, fg = c
    old = fg()
    if old == 1:
        yield
        return
    fs(1)
    try:
        yield
    finally:
        fs(old)
