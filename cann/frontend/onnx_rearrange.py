"""ONNX importers for operators that are rearrangements or compositions of existing ``graph`` ops.

Registered in the converter table of :mod:`cann.frontend.onnx_registry` when imported (the driver
:mod:`cann.frontend.onnx` imports it); every op below runs on the AI Core through the kernels of
the ops it decomposes to:

* **Gemm** with ``transA=1``: a Transpose (DMA) of A, then the Gemm kernel;
* **DepthToSpace** (DCR and CRD) / **SpaceToDepth**: a 6-D Reshape + Transpose + Reshape;
* **Tile** (``repeats`` constant): one Concat of ``r`` copies per repeated axis (DMA bursts);
* **CenterCropPad** (``shape`` constant): a Slice (crop, centred, the extra element at the end)
  then a constant-0 Pad (centred, the extra element at the end);
* **Trilu** (``k`` constant): ``Where(mask, x, 0)`` with the compile-time triangular mask;
* **CumSum** (``axis`` constant; ``exclusive``, ``reverse``): the axis moved last and a MatMul on
  the cube with a constant triangular 0/1 ``[L, L]`` matrix (fp32 accumulation in L0C);
* **Einsum**: per operand, repeated letters become diagonals (Reshape + a strided Slice) and
  letters used nowhere else are summed (ReduceSum); operands are then contracted pairwise as
  batched MatMuls (``[batch, free_a, k] x [batch, k, free_b]``) after Transposes, and the result
  is transposed to the output's order;
* **GatherElements**: constant indices become one Gather of the flattened data at the
  compile-time flat positions; runtime indices (the axis moved last, rows ``[R, n]``): each row
  stored twice (``[R, 2n]``, a Concat), the flat positions ``r*2n + n + i`` computed by an
  integer Add with a constant, then one runtime Gather (the scalar unit range-checks the flat
  position against the whole tensor only: an index outside ``[-n, n)`` reads another row);
* **GatherND, ReverseSequence, Compress** (indices / lengths / condition constant): one Gather of
  the flattened data at compile-time positions;
* **ScatterElements, Scatter, ScatterND, TensorScatter** (indices constant): ``none`` is a
  Gather of ``concat(data, updates)`` reading each position's last update; a reduction gathers
  ``[positions, 1 + most updates of a position]`` and reduces the last axis (see :func:`_scatter`).
"""

from __future__ import annotations

import math
import string

import numpy as np

from cann.dialects import graph as g
from cann.frontend import onnx_core  # noqa: F401  (registered first: the Gemm here replaces the core one)
from cann.frontend.onnx_registry import (
    _bad_attr,
    _const,
    _const_input,
    _converter,
    _float_input,
    _out_type,
    _reduce,
    _reshape,
    _str_attr,
    _transpose,
    _Unsupported,
)


def _check_out(imp, node, val):
    want = list(_out_type(imp, node).get_shape())
    if list(g._shape(val)) != want:
        raise _Unsupported(f"{node.op_type} result shape {list(g._shape(val))} differs from shape inference {want}")
    return val


def _axis(node, a, key, r, default):
    ax = int(a.get(key, default))
    if not -r <= ax < r:
        raise _bad_attr(node, key, ax, f"out of range for rank {r}")
    return ax % r


# ---------------------------------------------------------------------------------------------
# Gemm with transA


@_converter("Gemm")
def _gemm(imp, node, name, a):
    if imp.opset < 7 and a.get("broadcast", 1) == 0:
        raise _bad_attr(node, "broadcast", 0)
    av, bv = imp.value(node.input[0]), imp.value(node.input[1])
    cv = imp.value(node.input[2]) if len(node.input) > 2 and node.input[2] else None
    if int(a.get("transA", 0)):
        if len(g._shape(av)) != 2:
            raise _Unsupported(f"Gemm of a rank-{len(g._shape(av))} A")
        av = _transpose(imp, name, av, [1, 0])
    op = g.GemmOp(av, bv, cv, _out_type(imp, node), alpha=a.get("alpha", 1.0), beta=a.get("beta", 1.0),
                  trans_a=0, trans_b=a.get("transB", 0))
    return [imp.emit(op, name).results[0]]


# ---------------------------------------------------------------------------------------------
# DepthToSpace, SpaceToDepth, Tile, CenterCropPad


def _blocksize(node, a, x):
    if "blocksize" not in a:
        raise _Unsupported(f"{node.op_type} without blocksize")
    b = int(a["blocksize"])
    if b < 1:
        raise _bad_attr(node, "blocksize", b)
    if len(g._shape(x)) != 4:
        raise _Unsupported(f"{node.op_type} of a rank-{len(g._shape(x))} tensor (4-D expected)")
    return b


@_converter("DepthToSpace")
def _depth_to_space(imp, node, name, a):
    x = imp.value(node.input[0])
    b = _blocksize(node, a, x)
    n, c, h, w = g._shape(x)
    if c % (b * b):
        raise _bad_attr(node, "blocksize", b, f"{b}*{b} does not divide the {c} channels")
    mode = _str_attr(a, "mode", "DCR")
    if mode == "DCR":
        t = _reshape(imp, name, x, [n, b, b, c // (b * b), h, w])
        t = _transpose(imp, name, t, [0, 3, 4, 1, 5, 2])
    elif mode == "CRD":
        t = _reshape(imp, name, x, [n, c // (b * b), b, b, h, w])
        t = _transpose(imp, name, t, [0, 1, 4, 2, 5, 3])
    else:
        raise _bad_attr(node, "mode", mode)
    return [_check_out(imp, node, _reshape(imp, name, t, [n, c // (b * b), h * b, w * b]))]


@_converter("SpaceToDepth")
def _space_to_depth(imp, node, name, a):
    x = imp.value(node.input[0])
    b = _blocksize(node, a, x)
    n, c, h, w = g._shape(x)
    if h % b or w % b:
        raise _bad_attr(node, "blocksize", b, f"does not divide the spatial size {h}x{w}")
    mode = _str_attr(a, "mode", "DCR")
    t = _reshape(imp, name, x, [n, c, h // b, b, w // b, b])
    if mode == "DCR":
        t = _transpose(imp, name, t, [0, 3, 5, 1, 2, 4])
    elif mode == "CRD":
        t = _transpose(imp, name, t, [0, 1, 3, 5, 2, 4])
    else:
        raise _bad_attr(node, "mode", mode)
    return [_check_out(imp, node, _reshape(imp, name, t, [n, c * b * b, h // b, w // b]))]


@_converter("Tile")
def _tile(imp, node, name, a):
    x = imp.value(node.input[0])
    s = g._shape(x)
    reps = [int(v) for v in _const_input(imp, node, 1, "repeats").reshape(-1)]
    if len(reps) != len(s):
        raise _Unsupported(f"Tile with {len(reps)} repeats for a rank-{len(s)} input")
    if min(reps, default=1) < 1 or 0 in s:
        raise _Unsupported("Tile with an empty result")
    y = x
    for ax, rep in enumerate(reps):
        if rep > 1:
            y = imp.emit(g.ConcatOp([y] * rep, ax), name).results[0]
    return [_check_out(imp, node, y)]


@_converter("CenterCropPad")
def _center_crop_pad(imp, node, name, a):
    x = _float_input(imp, node)
    s = g._shape(x)
    r = len(s)
    shape = [int(v) for v in _const_input(imp, node, 1, "shape").reshape(-1)]
    axes = [int(v) for v in a.get("axes", range(r))]
    if any(not -r <= v < r for v in axes) or len({v % r for v in axes}) != len(axes):
        raise _bad_attr(node, "axes", axes)
    axes = [v % r for v in axes]
    if len(shape) != len(axes):
        raise _Unsupported(f"CenterCropPad shape has {len(shape)} values for {len(axes)} axes")
    st, en, pads = [0] * r, list(s), [0] * (2 * r)
    for ax, want in zip(axes, shape):
        if want < 1:
            raise _Unsupported("CenterCropPad to an empty tensor")
        if want < s[ax]:
            st[ax] = (s[ax] - want) // 2
            en[ax] = st[ax] + want
        elif want > s[ax]:
            pads[ax] = (want - s[ax]) // 2
            pads[ax + r] = want - s[ax] - pads[ax]
    y = x
    if st != [0] * r or en != list(s):
        y = imp.emit(g.SliceOp(y, st, en, [1] * r), name).results[0]
    if any(pads):
        y = imp.emit(g.PadOp(y, pads, "constant", 0.0), name).results[0]
    return [_check_out(imp, node, y)]


# ---------------------------------------------------------------------------------------------
# Trilu, CumSum


@_converter("Trilu")
def _trilu(imp, node, name, a):
    x = imp.value(node.input[0])
    s = g._shape(x)
    if len(s) < 2:
        raise _Unsupported(f"Trilu of a rank-{len(s)} tensor (rank >= 2 expected)")
    if 0 in s:
        raise _Unsupported("Trilu of an empty tensor")
    karr = _const_input(imp, node, 1, "k")
    k = int(karr.reshape(-1)[0]) if karr is not None else 0
    upper = int(a.get("upper", 1))
    n, m = s[-2:]
    d = np.arange(m).reshape(1, m) - np.arange(n).reshape(n, 1)
    mask = d >= k if upper else d <= k
    if mask.all():
        return [x]
    if g.numpy_dtype(g._elt(x)).kind != "f":
        # integer data is moved, not computed on: a Gather (DMA) of the flattened input followed by
        # one zero, the masked positions reading the zero
        total = math.prod(s)
        full = np.broadcast_to(mask, s).reshape(-1)
        idx = np.where(full, np.arange(total), total).astype(np.int64)
        flat = _reshape(imp, name, x, [total])
        zero = imp.emit(g.make_constant(np.zeros(1, g.numpy_dtype(g._elt(x))), name), name).results[0]
        src = imp.emit(g.ConcatOp([flat, zero], 0), name).results[0]
        fi = imp.emit(g.make_constant(idx, name), name).results[0]
        y = imp.emit(g.GatherOp(src, fi, 0), name).results[0]
        return [_reshape(imp, name, y, s)]
    cond = imp.emit(g.make_constant(mask, name), name).results[0]
    zero = _const(imp, name, np.zeros(()), x)
    return [imp.emit(g.WhereOp(cond, x, zero), name).results[0]]


@_converter("CumSum")
def _cumsum(imp, node, name, a):
    x = _float_input(imp, node)
    s = g._shape(x)
    r = len(s)
    if r == 0 or 0 in s:
        raise _Unsupported("CumSum of a scalar or an empty tensor")
    axis = int(_const_input(imp, node, 1, "axis").reshape(-1)[0])
    if not -r <= axis < r:
        raise _Unsupported(f"CumSum axis {axis} out of range for rank {r}")
    axis %= r
    exclusive, reverse = int(a.get("exclusive", 0)), int(a.get("reverse", 0))
    length = s[axis]
    i = np.arange(length).reshape(-1, 1)
    j = np.arange(length).reshape(1, -1)
    # y[.., j] = sum_i x[.., i] * t[i, j]
    if reverse:
        t = (i > j) if exclusive else (i >= j)
    else:
        t = (i < j) if exclusive else (i <= j)
    perm = [d for d in range(r) if d != axis] + [axis]
    xt = _transpose(imp, name, x, perm)
    ts = list(g._shape(xt))
    m = _reshape(imp, name, xt, [math.prod(ts[:-1]), length])
    y = imp.emit(g.MatMulOp(m, _const(imp, name, t.astype(np.float64), x)), name).results[0]
    y = _reshape(imp, name, y, ts)
    return [_transpose(imp, name, y, [perm.index(d) for d in range(r)])]


# ---------------------------------------------------------------------------------------------
# Einsum


def _einsum_terms(node, eq: str, ranks: list[int]) -> tuple[list[str], str]:
    eq = eq.replace(" ", "")
    if "->" in eq:
        lhs, rhs = eq.split("->")
        implicit = False
    else:
        lhs, rhs, implicit = eq, "", True
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise _bad_attr(node, "equation", eq, f"{len(terms)} terms for {len(ranks)} inputs")
    used = set(c for c in eq if c.isalpha())
    spare = [c for c in string.ascii_letters if c not in used]
    ell = None  # letters standing for the ellipsis dims
    out = []
    for t, rk in zip(terms, ranks):
        if "..." in t:
            ne = rk - len(t.replace("...", ""))
            if ne < 0:
                raise _bad_attr(node, "equation", eq, "more letters than dims")
            if ell is None:
                ell = "".join(spare[:ne])
            elif len(ell) != ne:
                raise _bad_attr(node, "equation", eq, "ellipses of different ranks are not supported")
            t = t.replace("...", ell)
        if len(t) != rk or not all(c.isalpha() for c in t):
            raise _bad_attr(node, "equation", eq, f"term '{t}' does not match a rank-{rk} input")
        out.append(t)
    if implicit:
        counts = {}
        for t in out:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        rhs = (ell or "") + "".join(sorted(c for c, n in counts.items() if n == 1 and (ell is None or c not in ell)))
    else:
        rhs = rhs.replace("...", ell or "")
    if not all(c.isalpha() for c in rhs) or len(set(rhs)) != len(rhs):
        raise _bad_attr(node, "equation", eq, "bad output term")
    return out, rhs


def _diagonal(imp, name, x, term: str) -> tuple:
    """Take diagonals until every letter of ``term`` occurs once."""
    while len(set(term)) != len(term):
        c = next(ch for ch in term if term.count(ch) > 1)
        p = term.index(c)
        q = term.index(c, p + 1)
        s = g._shape(x)
        if s[p] != s[q]:
            raise _Unsupported(f"Einsum diagonal over axes of sizes {s[p]} and {s[q]}")
        n = s[p]
        rest = [i for i in range(len(term)) if i not in (p, q)]
        x = _transpose(imp, name, x, rest + [p, q])
        lead = [s[i] for i in rest]
        x = _reshape(imp, name, x, lead + [n * n])
        if n > 1:
            r = len(lead) + 1
            x = imp.emit(g.SliceOp(x, [0] * r, lead + [n * n], [1] * (r - 1) + [n + 1]), name).results[0]
        term = "".join(term[i] for i in rest) + c
    return x, term


def _sum_out(imp, name, x, term: str, keep: set[str]) -> tuple:
    axes = [i for i, c in enumerate(term) if c not in keep]
    if not axes:
        return x, term
    y = _reduce(imp, name, x, "sum", axes, keepdims=False)
    return y, "".join(c for c in term if c in keep)


def _contract(imp, name, x, tx: str, y, ty: str, keep: set[str]) -> tuple:
    sx, sy = dict(zip(tx, g._shape(x))), dict(zip(ty, g._shape(y)))
    batch = [c for c in tx if c in ty and c in keep]
    con = [c for c in tx if c in ty and c not in keep]
    fx = [c for c in tx if c not in ty]
    fy = [c for c in ty if c not in tx]
    for c in batch + con:
        if sx[c] != sy[c]:
            raise _Unsupported(f"Einsum letter '{c}' of sizes {sx[c]} and {sy[c]} (broadcasting is not supported)")
    b, k = math.prod(sx[c] for c in batch), math.prod(sx[c] for c in con)
    lx, ly = math.prod(sx[c] for c in fx), math.prod(sy[c] for c in fy)
    xa = _transpose(imp, name, x, [tx.index(c) for c in batch + fx + con])
    ya = _transpose(imp, name, y, [ty.index(c) for c in batch + con + fy])
    xa = _reshape(imp, name, xa, [b, lx, k])
    ya = _reshape(imp, name, ya, [b, k, ly])
    z = imp.emit(g.MatMulOp(xa, ya), name).results[0]
    z = _reshape(imp, name, z, [sx[c] for c in batch + fx] + [sy[c] for c in fy])
    return z, "".join(batch + fx + fy)


@_converter("Einsum")
def _einsum(imp, node, name, a):
    vals = [_float_input(imp, node, i) for i in range(len(node.input))]
    for v in vals[1:]:
        if g._elt(v) != g._elt(vals[0]):
            raise _Unsupported("Einsum inputs of different dtypes")
    if "equation" not in a:
        raise _Unsupported("Einsum without an equation")
    eq = a["equation"].decode() if isinstance(a["equation"], bytes) else a["equation"]
    terms, rhs = _einsum_terms(node, eq, [len(g._shape(v)) for v in vals])
    for v in vals:
        if 0 in g._shape(v):
            raise _Unsupported("Einsum of an empty tensor")
    ops = []
    for i, (v, t) in enumerate(zip(vals, terms)):
        v, t = _diagonal(imp, name, v, t)
        others = set(rhs).union(*(set(u) for j, u in enumerate(terms) if j != i))
        v, t = _sum_out(imp, name, v, t, others)
        ops.append((v, t))
    x, tx = ops[0]
    for i in range(1, len(ops)):
        y, ty = ops[i]
        keep = set(rhs).union(*(set(u) for _, u in ops[i + 1:]))
        x, tx = _contract(imp, name, x, tx, y, ty, keep)
    x, tx = _sum_out(imp, name, x, tx, set(rhs))
    if set(tx) != set(rhs):
        raise _bad_attr(node, "equation", eq, "output letters missing from the inputs")
    x = _transpose(imp, name, x, [tx.index(c) for c in rhs])
    return [_check_out(imp, node, x)]


# ---------------------------------------------------------------------------------------------
# GatherElements

@_converter("GatherElements")
def _gather_elements(imp, node, name, a):
    data = imp.value(node.input[0])
    ds = g._shape(data)
    r = len(ds)
    if r == 0:
        raise _Unsupported("GatherElements of a scalar")
    axis = _axis(node, a, "axis", r, 0)
    idx_name = node.input[1]
    if imp.is_const(idx_name):
        idx = np.asarray(imp.consts[idx_name]).astype(np.int64)
        if idx.ndim != r or any(i > d for j, (i, d) in enumerate(zip(idx.shape, ds)) if j != axis):
            raise _Unsupported(f"GatherElements indices of shape {list(idx.shape)} for data {list(ds)}")
        if idx.size == 0:
            raise _Unsupported("GatherElements with an empty result")
        n = ds[axis]
        bad = idx[(idx < -n) | (idx >= n)]
        if bad.size:
            raise _Unsupported(f"GatherElements index {int(bad[0])} out of range [{-n}, {n - 1}]")
        idx = np.where(idx < 0, idx + n, idx)
        coords = list(np.indices(idx.shape))
        coords[axis] = idx
        flat = np.ravel_multi_index(tuple(coords), ds)
        fd = _reshape(imp, name, data, [math.prod(ds)])
        fi = imp.emit(g.make_constant(flat.astype(np.int64), name), name).results[0]
        return [_check_out(imp, node, imp.emit(g.GatherOp(fd, fi, 0), name).results[0])]
    # runtime indices: flat positions computed on the device (an integer Add), one runtime Gather
    iv = imp.value(idx_name)
    idt = g.numpy_dtype(g._elt(iv))
    if idt not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise _Unsupported("GatherElements indices must be int32 or int64")
    isz = g._shape(iv)
    if len(isz) != r or any(i > d for j, (i, d) in enumerate(zip(isz, ds)) if j != axis) or 0 in isz:
        raise _Unsupported(f"GatherElements indices of shape {list(isz)} for data {list(ds)}")
    perm = [d for d in range(r) if d != axis] + [axis]
    inv = [perm.index(d) for d in range(r)]
    dt = _transpose(imp, name, data, perm)
    it = _transpose(imp, name, iv, perm)
    its = [isz[d] for d in perm]
    rows, m, n = math.prod(its[:-1]), its[-1], ds[axis]
    if rows * 2 * n >= 2 ** 31 and idt == np.dtype(np.int32):
        raise _Unsupported("GatherElements with int32 indices into more than 2^31 positions")
    dts = list(g._shape(dt))
    if dts[:-1] != its[:-1]:  # the rows of data the indices cover
        dt = imp.emit(g.SliceOp(dt, [0] * r, its[:-1] + [n], [1] * r), name).results[0]
    d2 = _reshape(imp, name, dt, [rows, n])
    # each row twice, [R, 2n]: row r's index i (in [-n, n)) is flat position r*2n + n + i
    dd = imp.emit(g.ConcatOp([d2, d2], 1), name).results[0]
    offs = (np.arange(rows).reshape(rows, 1) * 2 * n + n) * np.ones((1, m), np.int64)
    i2 = _reshape(imp, name, it, [rows, m])
    flat = imp.emit(g.AddOp(i2, imp.emit(g.make_constant(offs.astype(idt), name), name).results[0]),
                    name).results[0]
    y = imp.emit(g.GatherOp(_reshape(imp, name, dd, [rows * 2 * n]), flat, 0), name).results[0]
    y = _reshape(imp, name, y, its)
    return [_check_out(imp, node, _transpose(imp, name, y, inv))]


# ---------------------------------------------------------------------------------------------
# constant-index data movement: GatherND, ReverseSequence, Compress, Scatter*


def _const_gather(imp, name, sources, idx: np.ndarray):
    """Elements of the flattened, concatenated ``sources`` at the compile-time positions ``idx``
    (any shape): one Concat and one Gather (DMA bursts), shaped as ``idx``."""
    flats = [_reshape(imp, name, v, [math.prod(g._shape(v))]) for v in sources]
    src = flats[0] if len(flats) == 1 else imp.emit(g.ConcatOp(flats, 0), name).results[0]
    fi = imp.emit(g.make_constant(idx.astype(np.int64), name), name).results[0]
    y = imp.emit(g.GatherOp(src, fi, 0), name).results[0]
    return y


def _wrap(node, idx, n, what="index"):
    bad = idx[(idx < -n) | (idx >= n)]
    if bad.size:
        raise _Unsupported(f"{node.op_type} {what} {int(bad.reshape(-1)[0])} out of range [{-n}, {n - 1}]")
    return np.where(idx < 0, idx + n, idx)


@_converter("GatherND")
def _gather_nd(imp, node, name, a):
    data = imp.value(node.input[0])
    ds = g._shape(data)
    idx = _const_input(imp, node, 1, "indices").astype(np.int64)
    b = int(a.get("batch_dims", 0))
    k = idx.shape[-1] if idx.ndim else 0
    if idx.ndim < 1 or b < 0 or b >= min(idx.ndim, len(ds) + 1) or b + k > len(ds) or idx.shape[:b] != ds[:b]:
        raise _bad_attr(node, "batch_dims", b, f"is inconsistent with data {list(ds)} and indices {list(idx.shape)}")
    pos = np.arange(math.prod(ds)).reshape(ds)
    out = np.empty(idx.shape[:-1] + tuple(ds[b + k:]), np.int64)
    for bi in np.ndindex(*ds[:b]):
        sub, ix = pos[bi], idx[bi]
        for j in range(k):
            ix[..., j] = _wrap(node, ix[..., j], ds[b + j])
        out[bi] = sub[tuple(np.moveaxis(ix, -1, 0))]
    if out.size == 0:
        raise _Unsupported("GatherND with an empty result")
    return [_check_out(imp, node, _const_gather(imp, name, [data], out))]


@_converter("ReverseSequence")
def _reverse_sequence(imp, node, name, a):
    x = imp.value(node.input[0])
    s = g._shape(x)
    lens = _const_input(imp, node, 1, "sequence_lens").astype(np.int64).reshape(-1)
    ba, ta = int(a.get("batch_axis", 1)), int(a.get("time_axis", 0))
    if len(s) < 2 or {ba, ta} != {0, 1}:
        raise _bad_attr(node, "batch_axis", ba, "batch_axis and time_axis must be 0 and 1")
    if lens.size != s[ba] or (lens < 0).any() or (lens > s[ta]).any():
        raise _Unsupported(f"ReverseSequence sequence_lens {lens.tolist()} exceed the shape {list(s)}")
    coords = list(np.indices(s))
    t, bidx = coords[ta], coords[ba]
    ln = lens[bidx]
    coords[ta] = np.where(t < ln, ln - 1 - t, t)
    return [_check_out(imp, node, _const_gather(imp, name, [x], np.ravel_multi_index(tuple(coords), s)))]


@_converter("Compress")
def _compress(imp, node, name, a):
    x = imp.value(node.input[0])
    s = g._shape(x)
    cond = _const_input(imp, node, 1, "condition").astype(np.bool_).reshape(-1)
    if "axis" in a:
        axis = _axis(node, a, "axis", len(s), 0)
        n = s[axis]
    else:
        axis, n = None, math.prod(s)
    sel = np.nonzero(cond[:n])[0]
    if sel.size == 0:
        raise _Unsupported("Compress with an empty result")
    if axis is None:
        return [_const_gather(imp, name, [x], sel)]
    idx = imp.emit(g.make_constant(sel.astype(np.int64), name), name).results[0]
    return [imp.emit(g.GatherOp(x, idx, axis), name).results[0]]


_SCATTER_REDUCE = {"add": "sum", "mul": "prod", "max": "max", "min": "min"}


def _scatter(imp, node, name, data, updates, targets: np.ndarray, reduction: str):
    """``data`` with ``updates`` (flat order) written / combined at the flat positions ``targets``:
    ``none``: a Gather of concat(data, updates) reading the last update of each position; a
    reduction: a Gather into ``[positions, 1 + most updates of one position]`` (padded with the
    position's own data element for max / min, with a 0 / 1 constant for add / mul) and a
    reduction over the last axis."""
    ds = g._shape(data)
    nd, nu = math.prod(ds), targets.size
    if g._elt(updates) != g._elt(data):
        raise _Unsupported(f"{node.op_type} updates of another dtype than the data")
    if reduction == "none":
        idx = np.arange(nd)
        idx[targets] = nd + np.arange(nu)  # numpy keeps the last of duplicate writes
        return _reshape(imp, name, _const_gather(imp, name, [data, updates], idx), ds)
    if reduction not in _SCATTER_REDUCE:
        raise _bad_attr(node, "reduction", reduction)
    if g.numpy_dtype(g._elt(data)).kind != "f":
        raise _Unsupported(f"{node.op_type} reduction '{reduction}' on {g.numpy_dtype(g._elt(data)).name} tensors")
    lists = [[p] for p in range(nd)]
    for u, p in enumerate(targets.tolist()):
        lists[p].append(nd + u)
    k = max(len(v) for v in lists)
    if k == 1:
        return data
    pad_const = reduction in ("add", "mul")
    fill = nd + nu  # the neutral constant, after data and updates
    table = np.array([v + ([fill] if pad_const else [v[0]]) * (k - len(v)) for v in lists], np.int64)
    srcs = [data, updates]
    if pad_const:
        srcs.append(_const(imp, name, np.array([0.0 if reduction == "add" else 1.0]), data))
    y = _const_gather(imp, name, srcs, table)
    y = _reduce(imp, name, y, _SCATTER_REDUCE[reduction], [1], keepdims=False)
    return _reshape(imp, name, y, ds)


@_converter("ScatterElements", "Scatter")
def _scatter_elements(imp, node, name, a):
    data, updates = imp.value(node.input[0]), imp.value(node.input[2])
    ds = g._shape(data)
    r = len(ds)
    axis = _axis(node, a, "axis", r, 0)
    idx = _const_input(imp, node, 1, "indices").astype(np.int64)
    if idx.shape != g._shape(updates) or idx.ndim != r:
        raise _Unsupported(f"{node.op_type} indices {list(idx.shape)} and updates {list(g._shape(updates))} differ")
    coords = list(np.indices(idx.shape))
    coords[axis] = _wrap(node, idx, ds[axis])
    targets = np.ravel_multi_index(tuple(coords), ds).reshape(-1)
    red = _str_attr(a, "reduction", "none")
    return [_check_out(imp, node, _scatter(imp, node, name, data, updates, targets, red))]


@_converter("ScatterND")
def _scatter_nd(imp, node, name, a):
    data, updates = imp.value(node.input[0]), imp.value(node.input[2])
    ds = g._shape(data)
    idx = _const_input(imp, node, 1, "indices").astype(np.int64)
    k = idx.shape[-1] if idx.ndim else 0
    if idx.ndim < 1 or k > len(ds) or tuple(g._shape(updates)) != idx.shape[:-1] + tuple(ds[k:]):
        raise _Unsupported(f"ScatterND indices {list(idx.shape)} and updates {list(g._shape(updates))} are inconsistent with "
                           f"data {list(ds)}")
    ix = idx.reshape(-1, k).copy()
    for j in range(k):
        ix[:, j] = _wrap(node, ix[:, j], ds[j])
    inner = math.prod(ds[k:])
    base = np.ravel_multi_index(tuple(ix.T), ds[:k]) if k else np.zeros(len(ix), np.int64)
    targets = (base.reshape(-1, 1) * inner + np.arange(inner).reshape(1, -1)).reshape(-1)
    red = _str_attr(a, "reduction", "none")
    return [_check_out(imp, node, _scatter(imp, node, name, data, updates, targets, red))]


@_converter("TensorScatter")
def _tensor_scatter(imp, node, name, a):
    """KV-cache update: ``update`` written into ``past_cache`` along ``axis`` from ``write_indices[b]``
    (linear, or modulo the cache length: circular); a constant-index scatter (Gather of both)."""
    cache, upd = imp.value(node.input[0]), imp.value(node.input[1])
    cs, us = g._shape(cache), g._shape(upd)
    r = len(cs)
    axis = _axis(node, a, "axis", r, -2)
    if axis == 0 or len(us) != r or any(cs[i] != us[i] for i in range(r) if i != axis) or us[axis] > cs[axis]:
        raise _Unsupported(f"TensorScatter update {list(us)} exceeds the cache {list(cs)} on axis {axis}")
    wi = _const_input(imp, node, 2, "write_indices")
    wi = np.zeros(cs[0], np.int64) if wi is None else wi.astype(np.int64).reshape(-1)
    mode = _str_attr(a, "mode", "linear")
    if mode not in ("linear", "circular"):
        raise _bad_attr(node, "mode", mode)
    coords = list(np.indices(us))
    seq = wi[coords[0]] + coords[axis]
    if mode == "circular":
        seq = seq % cs[axis]
    elif (seq >= cs[axis]).any() or (seq < 0).any():
        raise _Unsupported("TensorScatter write_indices + update length exceed the cache (linear mode)")
    coords[axis] = seq
    targets = np.ravel_multi_index(tuple(coords), cs).reshape(-1)
    return [_check_out(imp, node, _scatter(imp, node, name, cache, upd, targets, "none"))]
