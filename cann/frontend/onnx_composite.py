"""ONNX importers that decompose composite operators into existing ``graph`` ops.

Registered in the converter table of :mod:`cann.frontend.onnx_registry` when imported (the driver
:mod:`cann.frontend.onnx` imports it); every op below is computed on the AI Core by the lowerings
of the ops it decomposes to:

* **RMSNormalization** (23): ``x / sqrt(mean(x^2) + eps) * scale`` over axes ``axis..rank-1``;
* **GroupNormalization** (18, 21): x viewed as ``[N, G, C/G, S]``, mean and variance over the
  last two axes; ``scale`` / ``bias`` are per group (``[G]``) in opset 18 and per channel
  (``[C]``) from opset 21;
* **InstanceNormalization** (all): mean and variance over the spatial axes, per-channel scale/bias;
* **LpNormalization** (all; p = 1, 2): ``x / max(||x||_p, 2^-24)`` (a zero norm gives 0, as the
  spec's reference: ``0 / tiny = 0``; 2^-24 is the smallest fp16 subnormal, so it holds in fp16);
* **MeanVarianceNormalization** (all): ``(x - mean) / (sqrt(var) + 1e-9)`` over ``axes``;
* **Attention** (23, 24, 25): see :func:`_attention`.

``stash_type`` (RMS / Group normalization) and ``softmax_precision`` (Attention) are ignored: the
device computes in the precision mode's dtype (fp32 under ``must_keep_origin_dtype``).
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.ir import SSAValue

from cann.dialects import graph as g
from cann.frontend.onnx_registry import (
    _add,
    _bad_attr,
    _const,
    _const_input,
    _converter,
    _emit_unary,
    _float_input,
    _mul,
    _out_type,
    _reduce,
    _reshape,
    _scalar_const,
    _sub,
    _transpose,
    _Unsupported,
)

# Masked attention scores are clamped to -_BIG (not -inf) before the softmax: exp(-_BIG - max) is
# exactly 0 in fp32 and fp16, and a fully masked row stays finite (it is then zeroed by the row
# guard) where -inf - (-inf) would be NaN. 30000 fits fp16 with room for the scores added to it.
_BIG = 30000.0


def _check_eltype(imp, node, v, x, what):
    if g._elt(v) != g._elt(x):
        raise _Unsupported(f"{node.op_type} {what} of another dtype than the input")


def _mean_var(imp, name, x, axes):
    """(x - mean, variance) over ``axes`` (keepdims)."""
    mean = _reduce(imp, name, x, "mean", axes)
    d = _sub(imp, name, x, mean)
    var = _reduce(imp, name, _mul(imp, name, d, d), "mean", axes)
    return d, var


def _inv_std(imp, name, var, eps):
    v = _add(imp, name, var, _scalar_const(imp, name, eps, var))
    return _emit_unary(imp, name, g.ReciprocalOp, _emit_unary(imp, name, g.SqrtOp, v))


# ---------------------------------------------------------------------------------------------
# normalizations


@_converter("RMSNormalization")
def _rms_norm(imp, node, name, a):
    x = _float_input(imp, node)
    s = g._shape(x)
    r = len(s)
    axis = int(a.get("axis", -1))
    if not -r <= axis < r:
        raise _bad_attr(node, "axis", axis, f"out of range for rank {r}")
    axis %= r
    scale = imp.value(node.input[1])
    _check_eltype(imp, node, scale, x, "scale")
    if g.broadcast_shapes(g._shape(scale), s[axis:]) != tuple(s[axis:]):
        raise _Unsupported(f"RMSNormalization scale of shape {list(g._shape(scale))} does not broadcast to "
                           f"the normalized shape {list(s[axis:])}")
    if 0 in s:
        raise _Unsupported("RMSNormalization of an empty tensor")
    ms = _reduce(imp, name, _mul(imp, name, x, x), "mean", range(axis, r))
    y = _mul(imp, name, x, _inv_std(imp, name, ms, float(a.get("epsilon", 1e-5))))
    return [imp.emit(g.MulOp(y, scale, x.type), name).results[0]]


@_converter("InstanceNormalization")
def _instance_norm(imp, node, name, a):
    x = _float_input(imp, node)
    s = g._shape(x)
    r = len(s)
    if r < 3:
        raise _Unsupported(f"InstanceNormalization of a rank-{r} tensor (rank >= 3 expected)")
    if 0 in s:
        raise _Unsupported("InstanceNormalization of an empty tensor")
    scale, bias = imp.value(node.input[1]), imp.value(node.input[2])
    for v, what in ((scale, "scale"), (bias, "bias")):
        _check_eltype(imp, node, v, x, what)
        if g._shape(v) != (s[1],):
            raise _Unsupported(f"InstanceNormalization {what} of shape {list(g._shape(v))} (expected [{s[1]}])")
    d, var = _mean_var(imp, name, x, range(2, r))
    y = _mul(imp, name, d, _inv_std(imp, name, var, float(a.get("epsilon", 1e-5))))
    ones = [1] * (r - 2)
    y = _mul(imp, name, y, _reshape(imp, name, scale, [s[1], *ones]))
    return [imp.emit(g.AddOp(y, _reshape(imp, name, bias, [s[1], *ones]), x.type), name).results[0]]


@_converter("GroupNormalization")
def _group_norm(imp, node, name, a):
    x = _float_input(imp, node)
    s = g._shape(x)
    r = len(s)
    if r < 2:
        raise _Unsupported(f"GroupNormalization of a rank-{r} tensor (rank >= 2 expected)")
    if "num_groups" not in a:
        raise _Unsupported("GroupNormalization without num_groups")
    ng = int(a["num_groups"])
    n, c = s[0], s[1]
    if ng <= 0 or c % ng:
        raise _bad_attr(node, "num_groups", ng, f"must divide the {c} channels")
    if 0 in s:
        raise _Unsupported("GroupNormalization of an empty tensor")
    cg, sp = c // ng, math.prod(s[2:])
    scale, bias = imp.value(node.input[1]), imp.value(node.input[2])
    # opset 18: scale / bias per group [G]; opset 21: per channel [C]
    per = [ng] if imp.opset < 21 else [c]
    pshape = [ng, 1, 1] if imp.opset < 21 else [ng, cg, 1]
    for v, what in ((scale, "scale"), (bias, "bias")):
        _check_eltype(imp, node, v, x, what)
        if list(g._shape(v)) != per:
            raise _Unsupported(f"GroupNormalization-{imp.opset} {what} of shape {list(g._shape(v))} (expected {per})")
    xg = _reshape(imp, name, x, [n, ng, cg, sp])
    d, var = _mean_var(imp, name, xg, [2, 3])
    y = _mul(imp, name, d, _inv_std(imp, name, var, float(a.get("epsilon", 1e-5))))
    y = _mul(imp, name, y, _reshape(imp, name, scale, pshape))
    y = _add(imp, name, y, _reshape(imp, name, bias, pshape))
    return [_reshape(imp, name, y, s)]


@_converter("LpNormalization")
def _lp_norm(imp, node, name, a):
    x = _float_input(imp, node)
    s = g._shape(x)
    r = len(s)
    axis = int(a.get("axis", -1))
    p = int(a.get("p", 2))
    if p not in (1, 2):
        raise _bad_attr(node, "p", p, "only 1 and 2 are defined")
    if not -r <= axis < r:
        raise _bad_attr(node, "axis", axis, f"out of range for rank {r}")
    if 0 in s:
        raise _Unsupported("LpNormalization of an empty tensor")
    norm = _reduce(imp, name, x, "l1" if p == 1 else "l2", [axis % r])
    # a zero norm means a zero slice: x / tiny = 0, the spec's 0/0 -> 0 rule. tiny = 2^-24, the
    # smallest fp16 subnormal, so that it survives force_fp16 (norms below it are taken as 2^-24)
    norm = imp.emit(g.MaxOp(norm, _scalar_const(imp, name, 2.0 ** -24, norm)), name).results[0]
    return [imp.emit(g.DivOp(x, norm, x.type), name).results[0]]


@_converter("MeanVarianceNormalization")
def _mvn(imp, node, name, a):
    x = _float_input(imp, node)
    s = g._shape(x)
    r = len(s)
    axes = [int(v) for v in a.get("axes", [0, 2, 3])]
    if any(not -r <= ax < r for ax in axes) or not axes:
        raise _bad_attr(node, "axes", axes, f"out of range for rank {r}")
    axes = sorted({ax % r for ax in axes})
    if 0 in s:
        raise _Unsupported("MeanVarianceNormalization of an empty tensor")
    # the function body: (X - E[X]) / (sqrt(E[X^2] - E[X]^2) + 1e-9); the variance is computed
    # as E[(X - E[X])^2], the same value without the cancellation
    d, var = _mean_var(imp, name, x, axes)
    std = _add(imp, name, _emit_unary(imp, name, g.SqrtOp, var), _scalar_const(imp, name, 1e-9, var))
    return [imp.emit(g.DivOp(d, std, x.type), name).results[0]]


# ---------------------------------------------------------------------------------------------
# Attention


def _structural_bias(sq: int, total: int, batch: int, is_causal: bool, lw: int, rw: int, past: int,
                     nonpad: np.ndarray | None) -> np.ndarray | None:
    """The compile-time part of the additive bias (0 / -inf), as the spec's reference builds it:
    causal (bottom-right aligned by the cache offset), sliding window, padding of the external
    cache; None when there is none. Shape (sq, total) or, per batch, (batch, 1, sq, total)."""
    if not is_causal and lw < 0 and rw < 0 and nonpad is None:
        return None
    i = np.arange(sq).reshape(sq, 1)
    j = np.arange(total).reshape(1, total)
    if nonpad is not None:
        off = (nonpad.reshape(-1).astype(np.int64) - sq).reshape(-1, 1, 1, 1)
        i = i.reshape(1, 1, sq, 1)
        j = j.reshape(1, 1, 1, total)
    else:
        off = past
    bias = np.zeros((sq, total) if nonpad is None else (batch, 1, sq, total), np.float64)
    if is_causal:
        bias = bias + np.where(j <= i + off, 0.0, -np.inf)
    if lw >= 0 or rw >= 0:
        diff = (i + off) - j
        ok = np.ones(np.broadcast_shapes(np.shape(diff), bias.shape), np.bool_)
        if lw >= 0:
            ok &= diff <= lw
        if rw >= 0:
            ok &= -diff <= rw
        bias = bias + np.where(ok, 0.0, -np.inf)
    if nonpad is not None:
        pad = np.arange(total).reshape(1, total) < nonpad.reshape(-1, 1)
        bias = bias + np.where(pad, 0.0, -np.inf).reshape(batch, 1, 1, total)
    return bias


def _to_heads(imp, name, x, heads: int):
    """[b, s, heads * d] -> [b, heads, s, d]."""
    b, s, hid = g._shape(x)
    return _transpose(imp, name, _reshape(imp, name, x, [b, s, heads, hid // heads]), [0, 2, 1, 3])


@_converter("Attention")
def _attention(imp, node, name, a):
    """Attention-23/24/25 written with graph ops::

        S = matmul(Q * scale, K^T)            (GQA: Q viewed as [b, kv_heads, rep*q_seq, d], no K/V copies)
        S = softcap * tanh(S / softcap)       (softcap > 0)
        P = softmax(S + max(bias, -30000))    (bias: attn_mask (+ causal / window / padding))
        P = P * alive                         (rows whose bias is all -inf: 0, as the reference)
        Y = matmul(P, V)

    The masked scores are clamped to -30000 instead of -inf, so exp gives exact zeros and a fully
    masked row stays finite until the row guard zeroes it. The bias is a compile-time constant
    unless ``attn_mask`` is a runtime float tensor; then the guard is computed on the device as
    ``clip((max(bias) + 30000) * 1e4, 0, 1)``, which also zeroes rows whose mask is everywhere
    <= -30000 (the spec zeroes only all -inf rows). A runtime boolean mask and a runtime
    ``nonpad_kv_seqlen`` are not supported; ``softmax_precision`` is ignored (the softmax runs in
    the precision mode's dtype).
    """
    q = _float_input(imp, node, 0)
    k = _float_input(imp, node, 1)
    v = _float_input(imp, node, 2)
    dt = g.numpy_dtype(g._elt(q))
    for x, what in ((k, "K"), (v, "V")):
        _check_eltype(imp, node, x, q, what)

    def opt(i):
        return node.input[i] if len(node.input) > i and node.input[i] else None

    mask_n, pk_n, pv_n = opt(3), opt(4), opt(5)
    rank = len(g._shape(q))
    if not rank == len(g._shape(k)) == len(g._shape(v)):
        raise _Unsupported("Attention Q, K and V must have the same rank")
    if rank == 3:
        if "q_num_heads" not in a or "kv_num_heads" not in a:
            raise _Unsupported("Attention with 3-D inputs needs q_num_heads and kv_num_heads")
        qh, kvh = int(a["q_num_heads"]), int(a["kv_num_heads"])
        for x, h, what in ((q, qh, "q_num_heads"), (k, kvh, "kv_num_heads"), (v, kvh, "kv_num_heads")):
            if h <= 0 or g._shape(x)[2] % h:
                raise _bad_attr(node, what, h, f"does not divide the hidden size {g._shape(x)[2]}")
        q4, k4, v4 = _to_heads(imp, name, q, qh), _to_heads(imp, name, k, kvh), _to_heads(imp, name, v, kvh)
    elif rank == 4:
        if imp.opset >= 25 and ("q_num_heads" in a or "kv_num_heads" in a):
            raise _bad_attr(node, "q_num_heads", a.get("q_num_heads"), "must not be given for 4-D inputs")
        q4, k4, v4 = q, k, v
    else:
        raise _Unsupported(f"Attention with rank-{rank} inputs (3-D or 4-D expected)")
    b, qh, sq, d = g._shape(q4)
    _, kvh, skv, dk = g._shape(k4)
    dv = g._shape(v4)[3]
    if dk != d or g._shape(v4)[:3] != (b, kvh, skv) or g._shape(k4)[0] != b:
        raise _Unsupported(f"Attention Q / K / V shapes {list(g._shape(q4))}, {list(g._shape(k4))}, "
                           f"{list(g._shape(v4))} do not agree")
    if qh % kvh:
        raise _Unsupported(f"Attention with {qh} query heads and {kvh} key/value heads (not a multiple)")
    if 0 in (b, qh, sq, d, skv, dv):
        raise _Unsupported("Attention with an empty tensor")

    # KV cache
    if (pk_n is None) != (pv_n is None):
        raise _Unsupported("Attention needs both past_key and past_value, or neither")
    past = 0
    if pk_n is not None:
        pk, pv = imp.value(pk_n), imp.value(pv_n)
        _check_eltype(imp, node, pk, q, "past_key")
        _check_eltype(imp, node, pv, q, "past_value")
        ps = g._shape(pk)
        if len(ps) != 4 or ps[:2] != (b, kvh) or ps[3] != d or g._shape(pv)[:3] != ps[:3] or g._shape(pv)[3] != dv:
            raise _Unsupported(f"Attention past_key / past_value shapes {list(ps)}, {list(g._shape(pv))} do not "
                               "match K / V")
        past = ps[2]
        if past:
            k4 = imp.emit(g.ConcatOp([pk, k4], 2), name).results[0]
            v4 = imp.emit(g.ConcatOp([pv, v4], 2), name).results[0]
    total = g._shape(k4)[2]

    # attributes
    scale = float(a["scale"]) if "scale" in a else 1.0 / math.sqrt(d)
    softcap = float(a.get("softcap", 0.0))
    mode = int(a.get("qk_matmul_output_mode", 0))
    if mode not in (0, 1, 2, 3):
        raise _bad_attr(node, "qk_matmul_output_mode", mode)
    is_causal = bool(int(a.get("is_causal", 0)))
    lw, rw = int(a.get("left_window_size", -1)), int(a.get("right_window_size", -1))
    if lw < -1 or rw < -1:
        raise _bad_attr(node, "left_window_size" if lw < -1 else "right_window_size", min(lw, rw))
    nonpad = _const_input(imp, node, 6, "nonpad_kv_seqlen")
    if nonpad is not None:
        if pk_n is not None:
            raise _Unsupported("Attention nonpad_kv_seqlen cannot be combined with past_key / past_value")
        if nonpad.size != b:
            raise _Unsupported(f"Attention nonpad_kv_seqlen of {nonpad.size} values for batch {b}")

    # S = (Q * scale) K^T, in the grouped view [b, kvh, rep*sq, .]
    rep = qh // kvh
    qs = imp.emit(g.MulOp(q4, _scalar_const(imp, name, scale, q4)), name).results[0]
    kt = _transpose(imp, name, k4, [0, 1, 3, 2])
    s = imp.emit(g.MatMulOp(_reshape(imp, name, qs, [b, kvh, rep * sq, d]), kt), name).results[0]
    s = _reshape(imp, name, s, [b, qh, sq, total])
    if softcap > 0:
        s = _mul(imp, name, s, _scalar_const(imp, name, 1.0 / softcap, s))
        s = _mul(imp, name, _emit_unary(imp, name, g.TanhOp, s), _scalar_const(imp, name, softcap, s))
    qk_out = s

    # the additive bias
    struct = _structural_bias(sq, total, b, is_causal, lw, rw, past, nonpad)
    mask_arr = None
    mask_val = None
    if mask_n is not None:
        if imp.is_const(mask_n):
            mask_arr = np.asarray(imp.consts[mask_n])
        else:
            mask_val = imp.value(mask_n)
        mdt = mask_arr.dtype if mask_arr is not None else g.numpy_dtype(g._elt(mask_val))
        mshape = mask_arr.shape if mask_arr is not None else g._shape(mask_val)
        if mdt != np.bool_ and mdt != dt:
            raise _Unsupported(f"Attention attn_mask of dtype {mdt.name} (bool or the dtype of Q expected)")
        if not mshape or mshape[-1] > total or g.broadcast_shapes(mshape[:-1] + (total,), (b, qh, sq, total)) \
                != (b, qh, sq, total):
            raise _Unsupported(f"Attention attn_mask of shape {list(mshape)} does not broadcast to "
                               f"{[b, qh, sq, total]}")
        if mask_val is not None and mdt == np.bool_:  # the float mask it stands for: 0 / -inf
            mask_val = imp.emit(g.WhereOp(mask_val, _scalar_const(imp, name, 0.0, s),
                                          _scalar_const(imp, name, -np.inf, s)), name).results[0]
    guard = None  # 0/1 per row (runtime value) or None
    if mask_val is None:
        bias = np.zeros((sq, total), np.float64)
        if mask_arr is not None:
            m = mask_arr
            if m.shape[-1] < total:  # pad the key axis: False / -inf
                pw = [(0, 0)] * (m.ndim - 1) + [(0, total - m.shape[-1])]
                m = np.pad(m, pw, constant_values=False if m.dtype == np.bool_ else -np.inf)
            m = np.where(m, 0.0, -np.inf) if m.dtype == np.bool_ else m.astype(np.float64)
            bias = bias + m
        if struct is not None:
            bias = bias + struct
        with np.errstate(invalid="ignore"):
            alive = ~np.isneginf(np.max(bias, axis=-1, keepdims=True))
        clamped = np.maximum(bias, -_BIG)
        bias_c = _const(imp, name, clamped, s) if np.any(clamped) else None
        bias_raw = _const(imp, name, bias, s) if mode == 2 and np.any(bias) else None
        if not alive.all():
            guard = _const(imp, name, alive.astype(np.float64), s)
    else:
        m = mask_val
        ms = g._shape(m)
        if ms[-1] < total:
            fill = _const(imp, name, np.full(ms[:-1] + (total - ms[-1],), -np.inf), s)
            m = imp.emit(g.ConcatOp([m, fill], len(ms) - 1), name).results[0]
        bias_raw = m
        if struct is not None:
            bias_raw = _add(imp, name, bias_raw, _const(imp, name, struct, s))
        bias_c = imp.emit(g.MaxOp(bias_raw, _scalar_const(imp, name, -_BIG, s)), name).results[0]
        r = len(g._shape(bias_c))
        rmax = _reduce(imp, name, bias_c, "max", [r - 1])
        t = _add(imp, name, rmax, _scalar_const(imp, name, _BIG, rmax))
        t = _mul(imp, name, t, _scalar_const(imp, name, 1e4, t))
        guard = imp.emit(g.ClipOp(t, min=0.0, max=1.0), name).results[0]
    if mode == 2:
        qk_out = _add(imp, name, s, bias_raw) if bias_raw is not None else s
    if bias_c is not None:
        s = imp.emit(g.AddOp(s, bias_c, s.type), name).results[0]
    p = imp.emit(g.SoftmaxOp(s, 3), name).results[0]
    if guard is not None:
        p = imp.emit(g.MulOp(p, guard, p.type), name).results[0]
    if mode == 3:
        qk_out = p

    # Y = P V
    y = imp.emit(g.MatMulOp(_reshape(imp, name, p, [b, kvh, rep * sq, total]), v4), name).results[0]
    y = _reshape(imp, name, y, [b, qh, sq, dv])
    if rank == 3:
        y = _reshape(imp, name, _transpose(imp, name, y, [0, 2, 1, 3]), [b, sq, qh * dv])
    outs: list[SSAValue | None] = [y, k4, v4, qk_out]
    for i, val in enumerate(outs[: len(node.output)]):
        if node.output[i] and tuple(_out_type(imp, node, i).get_shape()) != g._shape(val):
            raise _Unsupported(f"Attention output {i} shape {list(g._shape(val))} differs from shape inference "
                               f"{list(_out_type(imp, node, i).get_shape())}")
    return outs[: len(node.output)]
