"""ONNX DFT and STFT as MatMuls on the cube with compile-time transform matrices.

Registered in the converter table of :mod:`cann.frontend.onnx_registry` when imported (the driver
:mod:`cann.frontend.onnx` imports it). A DFT along one axis of the real representation
(``[..., n, 1]`` real or ``[..., n, 2]`` complex) is a real-linear map, so it is one MatMul:
the signal axis and the re/im axis are moved last (Transpose), flattened to ``n*c`` columns and
multiplied by a constant ``[n*c, K*c_out]`` matrix built at compile time by applying numpy's
FFT (as the spec's reference does) to the unit vectors, which also folds ``dft_length``
(truncation / zero padding), ``onesided``, ``inverse`` (``1/L`` scaling) and the inverse
one-sided (irfft) form. STFT gathers the overlapping frames (one constant-index Gather, DMA)
and folds the window into the matrix. ``dft_length``, ``axis`` (opset 20), ``frame_step``,
``frame_length`` and ``window`` must be constants.
"""

from __future__ import annotations

import math

import numpy as np

from cann.dialects import graph as g
from cann.frontend.onnx_registry import (
    _bad_attr,
    _const,
    _const_input,
    _converter,
    _float_input,
    _out_type,
    _reshape,
    _transpose,
    _Unsupported,
)


def dft_matrix(n: int, c: int, length: int, inverse: bool, onesided: bool) -> tuple[np.ndarray, int, int]:
    """(M, K, c_out): the transform of a signal ``[n, c]`` (real representation) flattened
    row-major is ``x.reshape(n*c) @ M``, reshaped ``[K, c_out]``."""
    eye = np.eye(n * c).reshape(n * c, n, c)
    sig = eye[..., 0] + (1j * eye[..., 1] if c == 2 else 0)
    if not inverse:
        f = np.fft.fft(sig, n=length, axis=1)
        if onesided:
            f = f[:, : length // 2 + 1]
        out = np.stack([f.real, f.imag], -1)
    elif onesided:
        out = np.fft.irfft(sig, n=length, axis=1)[..., None]
    else:
        f = np.fft.ifft(sig, n=length, axis=1)
        out = np.stack([f.real, f.imag], -1)
    k, co = out.shape[1], out.shape[2]
    return out.reshape(n * c, k * co), k, co


@_converter("DFT")
def _dft(imp, node, name, a):
    x = _float_input(imp, node)
    s = g._shape(x)
    r = len(s)
    if r < 3 or s[-1] not in (1, 2) or 0 in s:
        raise _Unsupported(f"DFT input of shape {list(s)} (rank >= 3, last axis 1 or 2)")
    inverse, onesided = bool(int(a.get("inverse", 0))), bool(int(a.get("onesided", 0)))
    if imp.opset >= 20:
        ax = _const_input(imp, node, 2, "axis")
        axis = int(ax.reshape(-1)[0]) if ax is not None else -2
    else:
        axis = int(a.get("axis", 1))
    if not -r <= axis < r or axis % r == r - 1:
        raise _bad_attr(node, "axis", axis, f"out of range for rank {r} (the last axis holds re/im)")
    axis %= r
    n = s[axis]
    dl = _const_input(imp, node, 1, "dft_length")
    if dl is not None and dl.size:
        length = int(dl.reshape(-1)[0])
    else:
        length = 2 * (n - 1) if inverse and onesided else n
    if length < 1:
        raise _Unsupported(f"DFT with dft_length {length}")
    if onesided and not inverse and s[-1] == 2:
        raise _bad_attr(node, "onesided", 1, "a one-sided DFT needs a real input")
    m, k, co = dft_matrix(n, s[-1], length, inverse, onesided)
    perm = [d for d in range(r - 1) if d != axis] + [axis, r - 1]
    t = _transpose(imp, name, x, perm)
    lead = [s[d] for d in perm[:-2]]
    y = imp.emit(g.MatMulOp(_reshape(imp, name, t, [math.prod(lead), n * s[-1]]), _const(imp, name, m, x)),
                 name).results[0]
    y = _reshape(imp, name, y, lead + [k, co])
    y = _transpose(imp, name, y, [perm.index(d) for d in range(r)])
    want = list(_out_type(imp, node).get_shape())
    if list(g._shape(y)) != want:
        raise _Unsupported(f"DFT result shape {list(g._shape(y))} differs from shape inference {want}")
    return [y]


@_converter("STFT")
def _stft(imp, node, name, a):
    x = _float_input(imp, node)
    s = g._shape(x)
    if len(s) != 3 or s[-1] not in (1, 2):
        raise _Unsupported(f"STFT signal of shape {list(s)} ([batch, length, 1 or 2] expected)")
    b, length, c = s
    step = int(_const_input(imp, node, 1, "frame_step").reshape(-1)[0])
    win = _const_input(imp, node, 2, "window")
    fl = _const_input(imp, node, 3, "frame_length")
    if fl is not None and fl.size:
        flen = int(fl.reshape(-1)[0])
    elif win is not None:
        flen = win.size
    else:
        raise _Unsupported("STFT needs a window or a frame_length")
    if win is not None and win.size != flen:
        raise _Unsupported(f"STFT window of {win.size} values for frames of {flen}")
    onesided = bool(int(a.get("onesided", 1)))
    if onesided and c == 2:
        raise _bad_attr(node, "onesided", 1, "a one-sided STFT needs a real signal")
    if step < 1 or flen < 1 or flen > length:
        raise _Unsupported(f"STFT frame_step {step}, frame_length {flen} for a signal of {length}")
    frames = (length - flen) // step + 1
    m, k, co = dft_matrix(flen, c, flen, False, onesided)
    if win is not None:
        m = m * np.repeat(np.asarray(win, np.float64).reshape(-1), c).reshape(-1, 1)
    pos = (np.arange(frames).reshape(-1, 1) * step + np.arange(flen).reshape(1, -1)).reshape(-1)
    idx = imp.emit(g.make_constant(pos.astype(np.int64), name), name).results[0]
    fr = imp.emit(g.GatherOp(x, idx, 1), name).results[0]  # [b, frames*flen, c]
    y = imp.emit(g.MatMulOp(_reshape(imp, name, fr, [b * frames, flen * c]), _const(imp, name, m, x)),
                 name).results[0]
    y = _reshape(imp, name, y, [b, frames, k, co])
    want = list(_out_type(imp, node).get_shape())
    if list(g._shape(y)) != want:
        raise _Unsupported(f"STFT result shape {list(g._shape(y))} differs from shape inference {want}")
    return [y]
