"""Elementwise math with multidirectional broadcasting, reductions, Pad, Slice, LayerNorm.

Building blocks (ND tensors; one kernel each):

* :func:`gather` — an affine DMA gather: output element ``i`` (row-major over ``out_shape``) reads
  source element ``offset + sum(i_d * strides[d])``. A stride of 0 replicates (broadcast), a
  positive stride other than the dense one selects (slice, transpose), a negative stride walks
  backwards (negative Slice steps: that axis is unrolled into one copy per element, since DMA
  strides are non-negative). The innermost two axes become one multi-burst copy
  (``nburst`` x ``burst``) into a 32-byte aligned UB slot; slots are flushed to GM with one
  strided UB -> GM copy.
* :func:`dense` — runs a straight-line vector program (``Step`` tuples) over same-shaped ND
  operands in UB-sized chunks; the unary math of :data:`UNARY` and the binary ops are such
  programs (sigmoid = 1/(1+exp(-x)), tanh from exp of a clamped argument, erf by
  Abramowitz-Stegun 7.1.26, ...).
* :func:`reduce` — moves the reduced axes outermost (a :func:`gather` transpose when needed),
  then combines rows: each chunk of rows is loaded with 32-byte aligned row pitch and halved by a
  tree of dense ``vadd``/``vmax``/``vmin``/``vmul`` over row blocks; chunks accumulate.

No instruction beyond the ISA's vector set is needed: ``min(x, c)`` is ``vmin`` against a
``vdup``-filled buffer.
"""

from __future__ import annotations

import contextlib
import itertools
import math

import numpy as np

from cann.dialects import tile
from cann.dialects.tile import Space
from cann.lowering.common import ND, DevTensor, Lowering, ub_chunk, unsupported

Step = tuple  # (op, dst, src0[, src1[, scalar]]); names: "x<i>" inputs, "t<i>" temporaries, "y" output

#: erf(x) ~ 1 - (a1 t + ... + a5 t^5) exp(-x^2), t = 1 / (1 + p x), x >= 0 (A&S 7.1.26, |err| <= 1.5e-7)
ERF_P = 0.3275911
ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def _dense_strides(shape) -> list[int]:
    st, acc = [], 1
    for d in reversed(shape):
        st.append(acc)
        acc *= d
    return st[::-1]


def _nd(lw: Lowering, t: DevTensor, loc) -> DevTensor:
    return lw.as_format(t, ND, lw.dtype, loc)


# ---------------------------------------------------------------------------------------------
# gather (broadcast, slice, transpose, reverse)


def gather(lw: Lowering, src: DevTensor, out_shape, strides, offset: int, loc, hint: str = "gather") -> DevTensor:
    """A new ND tensor of ``out_shape``: element i = src.flat[offset + i . strides] (see module doc).
    Integer and bool (ND) tensors are moved in their own dtype."""
    src = _nd(lw, src, loc) if src.dtype.kind == "f" else src
    out_shape = tuple(int(d) for d in out_shape)
    out = lw.gm_tensor(out_shape, ND, src.dtype)
    kb = lw.kernel(hint, loc)
    sa, da = kb.arg(src), kb.arg(out)
    _gather_into(lw, kb, sa, da, 0, out_shape, _dense_strides(out_shape), strides, offset,
                 _staging(lw, kb, dtype=src.dtype))
    lw.launch(kb)
    return out


def _collapse(shape, sstr, dstr):
    """Drop size-1 axes; merge neighbours that are contiguous in both source and destination."""
    dims = [(n, s, d) for n, s, d in zip(shape, sstr, dstr) if n != 1]
    out: list[list[int]] = []
    for n, s, d in dims:
        if out and out[-1][1] == s * n and out[-1][2] == d * n:
            out[-1] = [out[-1][0] * n, s, d]
        else:
            out.append([n, s, d])
    return out or [[1, 0, 0]]


def _staging(lw: Lowering, kb, share: int = 1, dtype=None):
    """A UB staging buffer for :func:`_gather_into` (``share``: fraction of UB it may take)."""
    dtype = np.dtype(lw.dtype if dtype is None else dtype)
    chunk = ub_chunk(lw, dtype.itemsize * share, 256)
    return kb.alloc(Space.UB, chunk, dtype), chunk


def _gather_into(lw, kb, sa, da, dst_base: int, shape, dst_strides, src_strides, src_base: int, staging) -> None:
    """Copy a strided source box into a strided GM destination box, staging through UB."""
    buf, chunk = staging
    if math.prod(shape) == 0:
        return
    dims = _collapse(shape, src_strides, dst_strides)
    # innermost run
    n, s, d = dims[-1]
    if s == 1 and d == 1:
        burst, inner = n, dims[:-1]
        if inner and inner[-1][1] >= 0 and inner[-1][2] >= burst:
            nb, ss, ds = inner[-1]
            inner = inner[:-1]
        else:
            nb, ss, ds = 1, burst, burst
    elif s >= 0 and d == 1:
        burst, nb, ss, ds, inner = 1, n, s, 1, dims[:-1]
    else:
        burst, nb, ss, ds, inner = 1, 1, 1, 1, dims
    # the outer axes become nested hardware loops (code of one group whatever the box's size)
    # when every stride moves forward and source and destination are different arguments
    loops = contextlib.ExitStack()
    if inner and burst <= chunk and sa is not da and all(x[1] >= 0 and x[2] >= 0 for x in inner):
        for cnt, sst, dst_ in inner:
            loops.enter_context(kb.loop(cnt, {sa: sst, da: dst_}))
        inner = []
    with loops:
        _gather_groups(kb, sa, da, buf, chunk, src_base, dst_base, inner, burst, nb, ss, ds)


def _gather_groups(kb, sa, da, buf, chunk, src_base, dst_base, inner, burst, nb, ss, ds) -> None:
    # a group = nb bursts; split when too large for UB
    groups: list[tuple[int, int, int, int]] = []  # (src_off, dst_off, nb, burst)
    for idx in itertools.product(*[range(x[0]) for x in inner]):
        so = src_base + sum(i * x[1] for i, x in zip(idx, inner))
        do = dst_base + sum(i * x[2] for i, x in zip(idx, inner))
        if burst > chunk:
            for b0 in range(0, burst, chunk):
                for j in range(nb):
                    groups.append((so + j * ss + b0, do + j * ds + b0, 1, min(chunk, burst - b0)))
            continue
        per = max(1, chunk // burst)
        for j0 in range(0, nb, per):
            groups.append((so + j0 * ss, do + j0 * ds, min(per, nb - j0), burst))
    for so, do, k, b in groups:
        if so < 0:
            raise ValueError("negative source offset")
        kb.copy(sa, buf, src_offset=so, nburst=k, burst=b, src_stride=ss, dst_stride=b)
        if ds == b or k == 1:
            kb.copy(buf, da, dst_offset=do, burst=k * b)
        else:
            kb.copy(buf, da, dst_offset=do, nburst=k, burst=b, src_stride=b, dst_stride=ds)


def broadcast_to(lw: Lowering, t: DevTensor, out_shape, loc) -> DevTensor:
    """``t`` (ND) broadcast to ``out_shape`` (numpy rules), materialized in GM."""
    if tuple(t.shape) == tuple(out_shape):
        return t
    r = len(out_shape)
    shp = (1,) * (r - len(t.shape)) + tuple(t.shape)
    st = _dense_strides(shp)
    strides = [0 if shp[i] == 1 and out_shape[i] != 1 else st[i] for i in range(r)]
    return gather(lw, t, out_shape, strides, 0, loc, "broadcast")


# ---------------------------------------------------------------------------------------------
# dense vector programs


def dense(lw: Lowering, hint: str, loc, inputs: list[DevTensor], steps: list[Step],
          out_shape=None, consts: dict[str, float] | None = None, compute_dtype=None) -> DevTensor:
    """Run ``steps`` over same-sized ND ``inputs`` chunk by chunk. ``consts``: name -> value of
    temporaries filled with ``vdup`` once (for ``vmin``/``vmax`` against a constant). A step
    ``("sel", dst, cond, a, b)`` is a ``vsel`` (``dst = cond != 0 ? a : b``). ``compute_dtype``
    (float32 under fp16 storage): the program runs on buffers of that dtype, each loaded chunk
    converted with ``vconv`` and the result converted back."""
    ins = [_nd(lw, t, loc) for t in inputs]
    shape = tuple(out_shape if out_shape is not None else ins[0].shape)
    size = math.prod(shape)
    if any(t.size != size for t in ins):
        raise unsupported(loc, f"elementwise operands of shapes {[list(t.shape) for t in ins]}")
    consts = dict(consts or {})
    names = {v for s in steps for v in s[1:5] if isinstance(v, str)}
    temps = sorted(n for n in names if n.startswith("t") and n not in consts)
    cdt = np.dtype(compute_dtype or lw.dtype)
    staged = cdt != lw.dtype  # storage-dtype staging buffers for the vconv in and out
    nbuf = len(ins) + len(temps) + len(consts) + 1
    isz = cdt.itemsize
    chunk = min(ub_chunk(lw, nbuf * isz + (len(ins) + 1) * lw.dtype.itemsize * staged + 1, 256),
                max(256, -(-size // 256) * 256))
    out = lw.gm_tensor(shape, ND)
    kb = lw.kernel(hint, loc)
    kb.tiling["chunk"] = chunk
    srcs = [kb.arg(t) for t in ins]
    dst = kb.arg(out)
    bufs = {f"x{i}": kb.alloc(Space.UB, chunk, cdt) for i in range(len(ins))}
    bufs["y"] = kb.alloc(Space.UB, chunk, cdt)
    for tn in temps:
        bufs[tn] = kb.alloc(Space.UB, chunk, cdt)
    io = {n: kb.alloc(Space.UB, chunk, lw.dtype) if staged else b for n, b in bufs.items() if n[0] in "xy"}
    for cn, cv in consts.items():
        bufs[cn] = kb.alloc(Space.UB, chunk, cdt)
        kb.vec("dup", bufs[cn], count=chunk, scalar=cv)
    for q0 in range(0, size, chunk):
        q = min(chunk, size - q0)
        for i, s in enumerate(srcs):
            kb.copy(s, io[f"x{i}"], src_offset=q0, burst=q)
            if staged:
                kb.vec("cast", bufs[f"x{i}"], io[f"x{i}"], count=q)
        for st in steps:
            op, d, s0 = st[0], st[1], st[2]
            if op == "sel":
                kb.emit(tile.SelectOp(bufs[d], bufs[s0], bufs[st[3]], bufs[st[4]], count=q))
                continue
            s1 = st[3] if len(st) > 3 else None
            scalar = st[4] if len(st) > 4 else 0.0
            kb.vec(op, bufs[d], bufs[s0] if s0 else None, bufs[s1] if s1 else None, count=q, scalar=scalar)
        if staged:
            kb.vec("cast", io["y"], bufs["y"], count=q)
        kb.copy(io["y"], dst, dst_offset=q0, burst=q)
    lw.launch(kb)
    return out


def _neg(d, s):
    return ("muls", d, s, None, -1.0)


def _min_const(d, s, cname):
    return ("min", d, s, cname)


def erf_steps(x: str, y: str, tmp: tuple[str, str, str], tiny: float) -> list[Step]:
    """y = erf(x) (A&S 7.1.26 on |x|, sign restored by x / max(|x|, tiny))."""
    a, t, e = tmp
    st: list[Step] = [
        ("abs", a, x),                       # a = |x|
        ("muls", t, a, None, ERF_P), ("adds", t, t, None, 1.0), ("rec", t, t),  # t = 1/(1+p|x|)
        ("mul", e, a, a), ("muls", e, e, None, -1.0), ("exp", e, e),            # e = exp(-x^2)
        ("muls", y, t, None, ERF_A[4]),
    ]
    for c in reversed(ERF_A[:4]):
        st += [("adds", y, y, None, c), ("mul", y, y, t)]                       # poly(t) * t
    st += [("mul", y, y, e), ("muls", y, y, None, -1.0), ("adds", y, y, None, 1.0),  # 1 - poly*e
           ("maxs", a, a, None, tiny), ("div", a, x, a), ("mul", y, y, a)]       # * sign(x)
    return st


def tanh_steps(x: str, y: str, t: str) -> list[Step]:
    """y = tanh(x) = (1 - e) / (1 + e), e = exp(-2 clamp(x, -10, 10)) (tanh(10) is 1 in fp32)."""
    return [("maxs", t, x, None, -10.0), ("min", t, t, "c_hi"), ("muls", t, t, None, -2.0), ("exp", t, t),
            ("muls", y, t, None, -1.0), ("adds", y, y, None, 1.0), ("adds", t, t, None, 1.0), ("div", y, y, t)]


def unary_program(kind: str, p: dict[str, float], tiny: float) -> tuple[list[Step], dict[str, float]]:
    """(steps over x0 -> y, vdup constants) of a unary op (graph op name without 'graph.')."""
    x = "x0"
    if kind == "relu":
        return [("relu", "y", x)], {}
    if kind in ("exp", "sqrt", "abs"):
        return [(kind, "y", x)], {}
    if kind == "log":
        return [("ln", "y", x)], {}
    if kind == "reciprocal":
        return [("rec", "y", x)], {}
    if kind == "neg":
        return [_neg("y", x)], {}
    if kind == "sigmoid":
        return [_neg("t0", x), ("exp", "t0", "t0"), ("adds", "t0", "t0", None, 1.0), ("rec", "y", "t0")], {}
    if kind == "erf":
        return erf_steps(x, "y", ("t0", "t1", "t2"), tiny), {}
    if kind == "softplus":  # max(x, 0) + ln(1 + exp(-|x|))
        return [("abs", "t0", x), _neg("t0", "t0"), ("exp", "t0", "t0"), ("adds", "t0", "t0", None, 1.0),
                ("ln", "t0", "t0"), ("relu", "y", x), ("add", "y", "y", "t0")], {}
    if kind in ("elu", "selu"):  # relu(x) + alpha * (exp(min(x, 0)) - 1)
        st = [_neg("t0", x), ("relu", "t0", "t0"), _neg("t0", "t0"), ("exp", "t0", "t0"),
              ("adds", "t0", "t0", None, -1.0), ("muls", "t0", "t0", None, p["alpha"]), ("relu", "y", x),
              ("add", "y", "y", "t0")]
        if kind == "selu":
            st.append(("muls", "y", "y", None, p["gamma"]))
        return st, {}
    if kind == "leaky_relu":  # relu(x) - alpha * relu(-x)
        return [_neg("t0", x), ("relu", "t0", "t0"), ("muls", "t0", "t0", None, -p["alpha"]), ("relu", "y", x),
                ("add", "y", "y", "t0")], {}
    if kind == "clip":
        lo, hi = p["min"], p["max"]
        st: list[Step] = [("mov", "y", x)]
        consts = {}
        if lo > -math.inf:
            st.append(("maxs", "y", "y", None, lo))
        if hi < math.inf:
            st.append(("min", "y", "y", "c_hi"))
            consts["c_hi"] = hi
        return st, consts
    if kind == "hard_sigmoid":
        return [("muls", "y", x, None, p["alpha"]), ("adds", "y", "y", None, p["beta"]), ("maxs", "y", "y", None, 0.0),
                ("min", "y", "y", "c_hi")], {"c_hi": 1.0}
    if kind == "gelu_none":  # 0.5 x (1 + erf(x / sqrt 2))
        return [("muls", "t3", x, None, 1.0 / math.sqrt(2.0))] + erf_steps("t3", "y", ("t0", "t1", "t2"), tiny) + [
            ("adds", "y", "y", None, 1.0), ("mul", "y", "y", x), ("muls", "y", "y", None, 0.5)], {}
    if kind == "gelu_tanh":  # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        return [("mul", "t1", x, x), ("mul", "t1", "t1", x), ("muls", "t1", "t1", None, 0.044715),
                ("add", "t1", "t1", x), ("muls", "t1", "t1", None, math.sqrt(2.0 / math.pi))] + \
            tanh_steps("t1", "y", "t0") + [("adds", "y", "y", None, 1.0), ("mul", "y", "y", x),
                                            ("muls", "y", "y", None, 0.5)], {"c_hi": 10.0}
    from cann.lowering import transcendental  # trig / hyperbolic family, Mish, ThresholdedRelu, Shrink

    return transcendental.program(kind, p)


def unary(lw: Lowering, kind: str, x: DevTensor, params: dict[str, float], loc) -> DevTensor:
    from cann.lowering.transcendental import FP32_KINDS

    tiny = 1e-30 if lw.dtype == np.float32 else 6.2e-5
    steps, consts = unary_program(kind, params, tiny)
    return dense(lw, kind, loc, [x], steps, consts=consts, compute_dtype=np.float32 if kind in FP32_KINDS else None)


#: binary graph ops -> vector op
BINARY = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "max": "max", "min": "min"}


def binary(lw: Lowering, kind: str, a: DevTensor | float, b: DevTensor | float, out_shape, loc) -> DevTensor:
    """a (kind) b with broadcasting; a scalar (float) operand becomes a scalar vector op."""
    if isinstance(b, float) or isinstance(a, float):
        return _binary_scalar(lw, kind, a, b, out_shape, loc)
    if kind == "pow":
        b = broadcast_to(lw, _nd(lw, b, loc), out_shape, loc)
        a = broadcast_to(lw, _nd(lw, a, loc), out_shape, loc)
        return dense(lw, "pow", loc, [a, b], [("ln", "t0", "x0"), ("mul", "t0", "t0", "x1"), ("exp", "y", "t0")])
    a = broadcast_to(lw, _nd(lw, a, loc), out_shape, loc)
    b = broadcast_to(lw, _nd(lw, b, loc), out_shape, loc)
    return dense(lw, kind, loc, [a, b], [(BINARY[kind], "y", "x0", "x1")])


def _binary_scalar(lw, kind, a, b, out_shape, loc) -> DevTensor:
    if isinstance(a, float) and isinstance(b, float):
        raise unsupported(loc, "binary op of two scalars")
    swapped = isinstance(a, float)
    x, c = (b, a) if swapped else (a, b)
    x = broadcast_to(lw, _nd(lw, x, loc), out_shape, loc)
    if kind in ("add", "mul"):
        return dense(lw, kind, loc, [x], [(kind + "s", "y", "x0", None, c)])
    if kind == "sub":
        if swapped:  # c - x
            return dense(lw, kind, loc, [x], [("muls", "y", "x0", None, -1.0), ("adds", "y", "y", None, c)])
        return dense(lw, kind, loc, [x], [("adds", "y", "x0", None, -c)])
    if kind == "div":
        if swapped:  # c / x
            return dense(lw, kind, loc, [x], [("rec", "y", "x0"), ("muls", "y", "y", None, c)])
        return dense(lw, kind, loc, [x], [("div", "y", "x0", "c0")], consts={"c0": c})
    if kind == "max":
        return dense(lw, kind, loc, [x], [("maxs", "y", "x0", None, c)])
    if kind == "min":
        return dense(lw, kind, loc, [x], [("min", "y", "x0", "c0")], consts={"c0": c})
    if kind == "pow":
        if swapped:  # c ** x = exp(x ln c)
            if c <= 0:
                raise unsupported(loc, f"Pow: base {c} <= 0 with a tensor exponent")
            return dense(lw, kind, loc, [x], [("muls", "y", "x0", None, math.log(c)), ("exp", "y", "y")])
        return _pow_const(lw, x, c, loc)
    raise unsupported(loc, f"no lowering for scalar {kind}")


def _pow_const(lw, x, c: float, loc) -> DevTensor:
    """x ** c for a constant exponent: multiplications for small integers (any sign of x), sqrt for
    0.5, else exp(c ln x) (x > 0)."""
    if c == 0.5:
        return dense(lw, "pow", loc, [x], [("sqrt", "y", "x0")])
    if c == int(c) and abs(c) <= 16:
        n = abs(int(c))
        if n == 0:
            return dense(lw, "pow", loc, [x], [("muls", "y", "x0", None, 0.0), ("adds", "y", "y", None, 1.0)])
        steps: list[Step] = [("mov", "t0", "x0")]
        have = False
        while n:  # square-and-multiply
            if n & 1:
                steps.append(("mul", "y", "y", "t0") if have else ("mov", "y", "t0"))
                have = True
            n >>= 1
            if n:
                steps.append(("mul", "t0", "t0", "t0"))
        if c < 0:
            steps.append(("rec", "y", "y"))
        return dense(lw, "pow", loc, [x], steps)
    return dense(lw, "pow", loc, [x], [("ln", "y", "x0"), ("muls", "y", "y", None, c), ("exp", "y", "y")])


# ---------------------------------------------------------------------------------------------
# reductions


def reduce(lw: Lowering, x: DevTensor, kind: str, axes, out_shape, loc) -> DevTensor:
    """graph.reduce over ``axes`` of an ND tensor; the result is ND of ``out_shape``."""
    x = _nd(lw, x, loc)
    shape = tuple(x.shape)
    r = len(shape)
    axes = sorted(set(axes))
    kept = [i for i in range(r) if i not in axes]
    k_ = math.prod(shape[i] for i in axes)
    r_ = math.prod(shape[i] for i in kept)
    if k_ == 0 or r_ == 0:
        raise unsupported(loc, "reduction of an empty tensor")
    perm = axes + kept
    if perm != list(range(r)) and any(shape[i] != 1 for i in kept if i < max(axes)):
        st = _dense_strides(shape)
        x = gather(lw, x, [shape[p] for p in perm], [st[p] for p in perm], 0, loc, "reduce_transpose")
    # now x is [K, R] row-major
    pre: list[Step] = []
    post: list[Step] = []
    comb = {"sum": "add", "mean": "add", "max": "max", "min": "min", "prod": "mul", "l1": "add", "l2": "add",
            "sum_square": "add", "log_sum": "add", "log_sum_exp": "add"}[kind]
    if kind == "l1":
        pre = [("abs", "x", "x")]
    elif kind in ("l2", "sum_square"):
        pre = [("mul", "x", "x", "x")]
    if kind == "mean":
        post = [("muls", "a", "a", None, 1.0 / k_)]
    elif kind == "l2":
        post = [("sqrt", "a", "a")]
    elif kind == "log_sum":
        post = [("ln", "a", "a")]
    if kind == "log_sum_exp":
        m = _reduce_rows(lw, x, k_, r_, "max", [], [], loc, "reduce_max")
        y = _reduce_rows(lw, x, k_, r_, "add", [("sub_row", "x", "x", "m"), ("exp", "x", "x")],
                         [("ln", "a", "a"), ("add", "a", "a", "m")], loc, "reduce_log_sum_exp", m)
    else:
        y = _reduce_rows(lw, x, k_, r_, comb, pre, post, loc, "reduce_" + kind)
    return lw.view(y, tuple(out_shape))


def _reduce_rows(lw: Lowering, x: DevTensor, k_: int, r_: int, comb: str, pre: list[Step], post: list[Step],
                 loc, hint: str, m: DevTensor | None = None) -> DevTensor:
    """Combine the K rows of an ND [K, R] tensor with ``comb``: returns ND [R].

    ``pre`` runs on each loaded block of rows (names: "x" the block), ``post`` on the accumulator
    ("a"); "sub_row" subtracts the [R] tensor ``m`` from every row."""
    isz = lw.dtype.itemsize
    per_blk = lw.soc.vector.block_bytes // isz
    usable = lw.usable("ub") // isz - 4 * 256
    # column chunk of R, then rows per block
    rc = min(-(-r_ // per_blk) * per_blk, max(per_blk, usable // 4 // per_blk * per_blk))
    rows = max(1, min(k_, (usable - 2 * rc) // rc))
    out = lw.gm_tensor((r_,), ND)
    kb = lw.kernel(hint, loc)
    kb.tiling.update(cols=rc, rows=rows)
    xa, ya = kb.arg(x), kb.arg(out)
    ma = kb.arg(m) if m is not None else None
    blk = kb.alloc(Space.UB, rows * rc, lw.dtype)
    acc = kb.alloc(Space.UB, rc, lw.dtype)
    mb = kb.alloc(Space.UB, rc, lw.dtype) if m is not None else None
    for c0 in range(0, r_, rc):
        c = min(rc, r_ - c0)
        if ma is not None:
            kb.copy(ma, mb, src_offset=c0, burst=c)
        for k0 in range(0, k_, rows):
            kr = min(rows, k_ - k0)
            kb.copy(xa, blk, src_offset=k0 * r_ + c0, nburst=kr, burst=c, src_stride=r_, dst_stride=rc)
            for st in pre:
                if st[0] == "sub_row":
                    for j in range(kr):
                        kb.vec("sub", blk, blk, mb, count=c, dst_offset=j * rc, src0_offset=j * rc)
                elif len(st) > 3 and st[3] == "x":
                    kb.vec(st[0], blk, blk, blk, count=(kr - 1) * rc + c)
                else:
                    kb.vec(st[0], blk, blk, count=(kr - 1) * rc + c)
            n = kr
            while n > 1:  # halving tree over row blocks
                h = n // 2
                kb.vec(comb, blk, blk, blk, count=(h - 1) * rc + c, src1_offset=(n - h) * rc)
                n -= h
            if k0 == 0:
                kb.vec("mov", acc, blk, count=c)
            else:
                kb.vec(comb, acc, acc, blk, count=c)
        for st in post:
            if len(st) > 3 and st[3] == "m":
                kb.vec(st[0], acc, acc, mb, count=c)
            else:
                kb.vec(st[0], acc, acc, count=c, scalar=st[4] if len(st) > 4 else 0.0)
        kb.copy(acc, ya, dst_offset=c0, burst=c)
    lw.launch(kb)
    return out


# ---------------------------------------------------------------------------------------------
# pad, slice


def slice_(lw: Lowering, x: DevTensor, starts, ends, steps, out_shape, loc) -> DevTensor:
    x = _nd(lw, x, loc)
    st = _dense_strides(x.shape)
    if math.prod(out_shape) == 0:
        raise unsupported(loc, "Slice with an empty result")
    offset = sum(s * d for s, d in zip(starts, st))
    return gather(lw, x, out_shape, [sp * d for sp, d in zip(steps, st)], offset, loc, "slice")


def pad(lw: Lowering, x: DevTensor, pads, mode: str, value: float, out_shape, loc) -> DevTensor:
    """Pad (constant / reflect / edge): the output is filled with ``vdup`` (constant mode), the
    interior copied with one gather, then each padded axis's borders are copied from the output
    itself, axis by axis (reflect: a reversed gather; edge: a stride-0 gather of the edge slice)."""
    x = _nd(lw, x, loc) if x.dtype.kind == "f" else x  # integer tensors are padded in their dtype
    shape = tuple(x.shape)
    r = len(shape)
    b, e = list(pads[:r]), list(pads[r:])
    if math.prod(out_shape) == 0:
        raise unsupported(loc, "Pad with an empty result")
    out = lw.gm_tensor(tuple(out_shape), ND, x.dtype)
    kb = lw.kernel("pad", loc)
    xa, ya = kb.arg(x), kb.arg(out)
    ost = _dense_strides(out_shape)
    xst = _dense_strides(shape)
    size = math.prod(out_shape)
    if mode == "constant" and (any(p > 0 for p in b) or any(p > 0 for p in e)):
        chunk = min(ub_chunk(lw, x.dtype.itemsize * 2), -(-size // 256) * 256)
        fill = kb.alloc(Space.UB, chunk, x.dtype)
        kb.vec("dup", fill, count=chunk, scalar=value)
        for q0 in range(0, size, chunk):
            kb.copy(fill, ya, dst_offset=q0, burst=min(chunk, size - q0))
    staging = _staging(lw, kb, 2, dtype=x.dtype)
    # interior: source box after cropping negative pads
    src0 = [max(0, -p) for p in b]
    dst0 = [max(0, p) for p in b]
    box = [shape[i] - src0[i] - max(0, -e[i]) for i in range(r)]
    _gather_into(lw, kb, xa, ya, sum(d * s for d, s in zip(dst0, ost)), box, ost, xst,
                 sum(d * s for d, s in zip(src0, xst)), staging)
    if mode != "constant":
        # axis by axis, fill borders from the output (already holding the interior of this axis)
        cur = list(box)  # extent along each axis that is filled so far
        lo = list(dst0)
        for ax in range(r):
            pb, pe = max(0, b[ax]), max(0, e[ax])
            if not pb and not pe:
                continue
            for side, cnt in (("b", pb), ("e", pe)):
                if not cnt:
                    continue
                sub = list(cur)
                sub[ax] = cnt
                dst_start = list(lo)
                dst_start[ax] = 0 if side == "b" else lo[ax] + cur[ax]
                src_start = list(lo)
                sst = list(ost)
                if mode == "edge":
                    src_start[ax] = lo[ax] if side == "b" else lo[ax] + cur[ax] - 1
                    sst[ax] = 0
                else:  # reflect: out[lo - 1 - j] = out[lo + 1 + j]; out[hi + j] = out[hi - 2 - j]
                    if side == "b":
                        src_start[ax] = lo[ax] + cnt
                        sst[ax] = -ost[ax]
                    else:
                        src_start[ax] = lo[ax] + cur[ax] - 2
                        sst[ax] = -ost[ax]
                _gather_into(lw, kb, ya, ya, sum(d * s for d, s in zip(dst_start, ost)), sub, ost, sst,
                             sum(d * s for d, s in zip(src_start, ost)), staging)
            lo[ax] = 0
            cur[ax] = out_shape[ax]
    lw.launch(kb)
    return out


# ---------------------------------------------------------------------------------------------
# layer normalization


def layer_norm(lw: Lowering, x: DevTensor, scale: DevTensor, bias: DevTensor | None, axis: int, eps: float,
               loc, want_stats: bool = False):
    """y = (x - mean) / sqrt(var + eps) * scale + bias over axes axis..; with ``want_stats`` also
    returns (mean, inv_std_dev) of keepdims shape."""
    x = _nd(lw, x, loc)
    shape = tuple(x.shape)
    r = len(shape)
    axes = list(range(axis, r))
    kshape = tuple(shape[:axis]) + (1,) * (r - axis)
    mean = reduce(lw, x, "mean", axes, kshape, loc)
    d = binary(lw, "sub", x, mean, shape, loc)
    var = reduce(lw, dense(lw, "square", loc, [d], [("mul", "y", "x0", "x0")]), "mean", axes, kshape, loc)
    inv = dense(lw, "inv_std", loc, [var], [("adds", "y", "x0", None, eps), ("sqrt", "y", "y"), ("rec", "y", "y")])
    y = binary(lw, "mul", d, inv, shape, loc)
    y = binary(lw, "mul", y, scale, shape, loc)
    if bias is not None:
        y = binary(lw, "add", y, bias, shape, loc)
    return (y, mean, inv) if want_stats else y


def softmax(lw: Lowering, x: DevTensor, axis: int, loc) -> DevTensor:
    """Softmax over any axis: max and sum reductions over it, broadcasting sub / exp / div kernels."""
    x = _nd(lw, x, loc)
    shape = tuple(x.shape)
    kshape = tuple(1 if i == axis else d for i, d in enumerate(shape))
    m = reduce(lw, x, "max", [axis], kshape, loc)
    e = dense(lw, "exp", loc, [binary(lw, "sub", x, m, shape, loc)], [("exp", "y", "x0")])
    s = reduce(lw, e, "sum", [axis], kshape, loc)
    return binary(lw, "div", e, s, shape, loc)
