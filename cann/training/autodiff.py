"""Reverse-mode differentiation in the ``graph`` dialect (issue 16 item 1).

:func:`differentiate` appends to a function the ops computing the gradient of a scalar loss with
respect to chosen values (the parameters), walking the ops on a path from those values to the
loss in reverse program order. Each op kind has one gradient rule, registered with
:func:`gradient_rule` (as the ONNX importer registers converters); a rule receives a
:class:`~cann.training.builder.GraphBuilder`, the op and the gradient of its result, and returns
one gradient (or None: not differentiable, e.g. integer indices) per operand, each of the
operand's shape. Rules use only graph ops that lower (matmul, elementwise, reductions, layout), so
backward kernels go through the same fusion and lowering as forward ones. Gradients reaching one
value from several uses are summed with ``graph.add``.

Ops that need runtime weights the cube lowering cannot take yet (``graph.conv2d``, ``graph.gemm``)
or training-mode semantics (``graph.batch_norm``) are rewritten into these primitives first
(:mod:`cann.training.primitives`); an op on the path without a rule is a ``CannError`` naming it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from xdsl.ir import Block, Operation, SSAValue

from cann.dialects import graph
from cann.dialects.graph_base import _ints
from cann.errors import CannError
from cann.training.builder import GraphBuilder, numel, shape

Rule = Callable[[GraphBuilder, Operation, SSAValue], Sequence[SSAValue | None]]
RULES: dict[str, Rule] = {}


def gradient_rule(*names: str) -> Callable[[Rule], Rule]:
    """Register ``fn`` as the gradient rule of the graph ops ``names`` (e.g. ``"graph.relu"``)."""
    def register(fn: Rule) -> Rule:
        for n in names:
            RULES[n] = fn
        return fn
    return register


def _where(op: Operation) -> str:
    loc = op.location
    return loc.desc.data if isinstance(loc, graph.NameLoc) else op.name


def differentiate(block: Block, loss: SSAValue, wrt: Sequence[SSAValue], b: GraphBuilder) -> list[SSAValue]:
    """The gradients of the scalar ``loss`` (a one-element tensor) with respect to ``wrt`` (values of
    ``block``), built with ``b`` (whose insertion point must follow every op ``loss`` depends on).
    A value ``loss`` does not depend on gets a zero gradient.

    Raises:
        CannError: ``<node>: no gradient rule for graph.X`` for an op on a path from ``wrt`` to ``loss``.
    """
    if numel(shape(loss)) != 1:
        raise CannError("loss", f"must be a one-element tensor, got shape {list(shape(loss))}")
    ops = [op for op in block.ops if b.before is None or op is not b.before]
    ops = ops[:ops.index(b.before)] if b.before in ops else ops
    # values depending on wrt (forward), then ops the loss depends on through those (backward)
    live: set[SSAValue] = set(wrt)
    for op in ops:
        if any(v in live for v in op.operands):
            live.update(op.results)
    grads: dict[SSAValue, SSAValue] = {loss: b.const(np.ones(shape(loss), np.float32), name="seed")}
    for op in reversed(ops):
        if not op.results or op.results[0] not in grads or not any(v in live for v in op.operands):
            continue
        rule = RULES.get(op.name)
        if rule is None:
            raise CannError(_where(op), f"no gradient rule for {op.name}")
        g = grads[op.results[0]]
        for v, dv in zip(op.operands, rule(b, op, g)):
            if dv is None or v not in live:
                continue
            if shape(dv) != shape(v):
                raise CannError(_where(op), f"gradient rule of {op.name} gave shape {list(shape(dv))} for an "
                                            f"operand of shape {list(shape(v))}")
            grads[v] = b.add(grads[v], dv) if v in grads else dv
    return [grads[w] if w in grads else b.const(np.zeros(shape(w), np.float32), name="zero_grad") for w in wrt]


# ---------------------------------------------------------------------------------------------
# elementwise


@gradient_rule("graph.add")
def _add(b, op, g):
    return b.unbroadcast(g, shape(op.lhs)), b.unbroadcast(g, shape(op.rhs))


@gradient_rule("graph.sub")
def _sub(b, op, g):
    return b.unbroadcast(g, shape(op.lhs)), b.unbroadcast(b.neg(g), shape(op.rhs))


@gradient_rule("graph.mul")
def _mul(b, op, g):
    return b.unbroadcast(b.mul(g, op.rhs), shape(op.lhs)), b.unbroadcast(b.mul(g, op.lhs), shape(op.rhs))


@gradient_rule("graph.div")
def _div(b, op, g):
    ga = b.div(g, op.rhs)
    return b.unbroadcast(ga, shape(op.lhs)), b.unbroadcast(b.neg(b.mul(ga, op.res)), shape(op.rhs))


@gradient_rule("graph.neg")
def _neg(b, op, g):
    return (b.neg(g),)


@gradient_rule("graph.relu")
def _relu(b, op, g):
    zero = b.scalar_like(op.x, 0.0)
    return (b.where(b.compare(op.x, zero, "gt"), g, zero),)


@gradient_rule("graph.clip")
def _clip(b, op, g):
    # PyTorch's hardtanh / ReLU6: the gradient passes strictly inside the bounds
    x, lo, hi = op.x, op.param("min"), op.param("max")
    zero = b.scalar_like(x, 0.0)
    if lo != -math.inf:
        g = b.where(b.compare(x, b.scalar_like(x, lo), "gt"), g, zero)
    if hi != math.inf:
        g = b.where(b.compare(x, b.scalar_like(x, hi), "lt"), g, zero)
    return (g,)


@gradient_rule("graph.leaky_relu")
def _leaky_relu(b, op, g):
    x = op.x
    return (b.where(b.compare(x, b.scalar_like(x, 0.0), "gt"), g, b.scale(g, op.param("alpha"))),)


@gradient_rule("graph.abs")
def _abs(b, op, g):
    x, zero = op.x, b.scalar_like(op.x, 0.0)
    return (b.where(b.compare(x, zero, "gt"), g, b.where(b.compare(x, zero, "lt"), b.neg(g), zero)),)


@gradient_rule("graph.max", "graph.min")
def _max_min(b, op, g):
    # PyTorch's maximum / minimum: the chosen operand gets the gradient, ties split it in halves
    a, c = op.lhs, op.rhs
    kind = "gt" if op.name == "graph.max" else "lt"
    zero = b.scalar_like(a, 0.0)
    half = b.scale(g, 0.5)
    eq = b.compare(a, c, "eq")
    ga = b.where(b.compare(a, c, kind), g, b.where(eq, half, zero))
    gc = b.where(b.compare(c, a, kind), g, b.where(eq, half, zero))
    return b.unbroadcast(ga, shape(a)), b.unbroadcast(gc, shape(c))


@gradient_rule("graph.sigmoid")
def _sigmoid(b, op, g):
    y = op.res
    return (b.mul(g, b.mul(y, b.sub(b.scalar_like(y, 1.0), y))),)


@gradient_rule("graph.tanh")
def _tanh(b, op, g):
    y = op.res
    return (b.mul(g, b.sub(b.scalar_like(y, 1.0), b.mul(y, y))),)


@gradient_rule("graph.exp")
def _exp(b, op, g):
    return (b.mul(g, op.res),)


@gradient_rule("graph.log")
def _log(b, op, g):
    return (b.div(g, op.x),)


@gradient_rule("graph.sqrt")
def _sqrt(b, op, g):
    return (b.div(b.scale(g, 0.5), op.res),)


@gradient_rule("graph.reciprocal")
def _reciprocal(b, op, g):
    return (b.neg(b.mul(g, b.mul(op.res, op.res))),)


def _normal_pdf_term(b: GraphBuilder, x: SSAValue) -> SSAValue:
    """exp(-x^2 / 2)."""
    return b.exp(b.scale(b.mul(x, x), -0.5))


@gradient_rule("graph.erf")
def _erf(b, op, g):
    # d erf(x) = 2/sqrt(pi) exp(-x^2)
    return (b.mul(g, b.scale(b.exp(b.neg(b.mul(op.x, op.x))), 2.0 / math.sqrt(math.pi))),)


@gradient_rule("graph.gelu")
def _gelu(b, op, g):
    x = op.x
    if op.approximate.data == "tanh":
        # y = x/2 (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3)
        c = math.sqrt(2.0 / math.pi)
        x2 = b.mul(x, x)
        u = b.scale(b.add(x, b.scale(b.mul(x2, x), 0.044715)), c)
        t = b.op(graph.TanhOp(u))
        du = b.scale(b.add(b.scale(x2, 3 * 0.044715), b.scalar_like(x, 1.0)), c)
        dy = b.add(b.scale(b.add(t, b.scalar_like(x, 1.0)), 0.5),
                   b.mul(b.scale(x, 0.5), b.mul(b.sub(b.scalar_like(x, 1.0), b.mul(t, t)), du)))
        return (b.mul(g, dy),)
    cdf = b.scale(b.add(b.erf(b.scale(x, 1.0 / math.sqrt(2.0))), b.scalar_like(x, 1.0)), 0.5)
    pdf = b.scale(_normal_pdf_term(b, x), 1.0 / math.sqrt(2.0 * math.pi))
    return (b.mul(g, b.add(cdf, b.mul(x, pdf))),)


@gradient_rule("graph.where")
def _where_rule(b, op, g):
    zero = b.scalar_like(op.x, 0.0)
    return (None, b.unbroadcast(b.where(op.cond, g, zero), shape(op.x)),
            b.unbroadcast(b.where(op.cond, zero, g), shape(op.y)))


@gradient_rule("graph.cast")
def _cast(b, op, g):
    return (None,)


# ---------------------------------------------------------------------------------------------
# softmax, reductions, pooling


@gradient_rule("graph.softmax")
def _softmax(b, op, g):
    y, ax = op.res, op.axis.value.data
    return (b.mul(y, b.sub(g, b.reduce(b.mul(g, y), "sum", [ax], True))),)


@gradient_rule("graph.reduce")
def _reduce(b, op, g):
    xs, axes, kind = shape(op.x), list(_ints(op.axes)), op.kind.data
    keep = tuple(1 if i in axes else d for i, d in enumerate(xs))
    gx = b.expand(b.reshape(g, keep), xs)
    if kind == "sum":
        return (gx,)
    if kind == "mean":
        return (b.scale(gx, 1.0 / numel([xs[a] for a in axes])),)
    if kind == "sum_square":
        return (b.mul(gx, b.scale(op.x, 2.0)),)
    if kind == "log_sum_exp":
        return (b.mul(gx, b.exp(b.sub(op.x, b.reshape(op.res, keep)))),)
    raise CannError(_where(op), f"no gradient rule for graph.reduce of kind '{kind}'")


@gradient_rule("graph.global_avg_pool")
def _global_avg_pool(b, op, g):
    xs = shape(op.x)
    return (b.scale(b.expand(g, xs), 1.0 / numel(xs[2:])),)


def _upsample(b: GraphBuilder, t: SSAValue, k: tuple[int, int]) -> SSAValue:
    """Each element of ``t`` [N, C, Ho, Wo] repeated into a k0 x k1 block: [N, C, Ho*k0, Wo*k1]."""
    n, c, ho, wo = shape(t)
    r = b.expand(b.reshape(t, (n * c * ho, 1, wo, 1)), (n * c * ho, k[0], wo, k[1]))
    return b.reshape(r, (n, c, ho * k[0], wo * k[1]))


def _tiling_pool(op) -> tuple[int, int]:
    k, s, p, d = (tuple(_ints(getattr(op, a))) for a in ("kernel_shape", "strides", "pads", "dilations"))
    xs, ys = shape(op.x), shape(op.res)
    if k != s or any(p) or d != (1, 1) or xs[2] != ys[2] * k[0] or xs[3] != ys[3] * k[1]:
        raise CannError(_where(op), f"no gradient rule for {op.name} with kernel {list(k)}, strides {list(s)}, "
                                    f"pads {list(p)} on {xs[2]}x{xs[3]}: only windows tiling the input "
                                    "(kernel = strides, no pads, dividing the input)")
    return k


@gradient_rule("graph.max_pool")
def _max_pool(b, op, g):
    # the gradient goes to the positions equal to their window's maximum (every tied position)
    k = _tiling_pool(op)
    mask = b.compare(op.x, _upsample(b, op.res, k), "eq")
    return (b.where(mask, _upsample(b, g, k), b.scalar_like(op.x, 0.0)),)


@gradient_rule("graph.avg_pool")
def _avg_pool(b, op, g):
    k = _tiling_pool(op)
    return (b.scale(_upsample(b, g, k), 1.0 / (k[0] * k[1])),)


# ---------------------------------------------------------------------------------------------
# matmul, layer norm, gather


def _swap_last(b: GraphBuilder, v: SSAValue) -> SSAValue:
    r = len(shape(v))
    if isinstance(v.owner, graph.ConstantOp):  # a constant operand: transpose the data, not at run time
        arr = np.asarray(graph.constant_value(v.owner))
        return b.const(np.ascontiguousarray(np.swapaxes(arr, -1, -2)), arr.dtype, "const_t")
    return b.transpose(v, [*range(r - 2), r - 1, r - 2])


@gradient_rule("graph.matmul")
def _matmul(b, op, g):
    a, w = op.a, op.b
    sa, sw = shape(a), shape(w)
    if len(sa) < 2 or len(sw) < 2:
        raise CannError(_where(op), "no gradient rule for graph.matmul of a 1-D operand")
    if len(sw) == 2 and len(sa) > 2:  # [..., M, K] x [K, N]: flatten the batch into M
        m = numel(sa[:-1])
        a2, g2 = b.reshape(a, (m, sa[-1])), b.reshape(g, (m, sw[-1]))
        da = b.reshape(b.matmul(g2, _swap_last(b, w)), sa)
        dw = b.matmul(_swap_last(b, a2), g2)
        return da, dw
    da = b.unbroadcast(b.matmul(g, _swap_last(b, w)), sa)
    dw = b.unbroadcast(b.matmul(_swap_last(b, a), g), sw)
    return da, dw


@gradient_rule("graph.layer_norm")
def _layer_norm(b, op, g):
    x, xs = op.x, shape(op.x)
    axes = list(range(op.axis.value.data, len(xs)))
    eps = float(op.epsilon.value.data)
    mean = b.reduce(x, "mean", axes, True)
    xc = b.sub(x, mean)
    var = b.reduce(b.mul(xc, xc), "mean", axes, True)
    inv = b.div(b.scalar_like(x, 1.0), b.sqrt(b.add(var, b.scalar_like(x, eps))))
    xhat = b.mul(xc, inv)
    dxhat = b.mul(g, op.scale)
    m1 = b.reduce(dxhat, "mean", axes, True)
    m2 = b.reduce(b.mul(dxhat, xhat), "mean", axes, True)
    dx = b.mul(inv, b.sub(b.sub(dxhat, m1), b.mul(xhat, m2)))
    dscale = b.unbroadcast(b.mul(g, xhat), shape(op.scale))
    dbias = b.unbroadcast(g, shape(op.bias)) if op.bias is not None else None
    return dx, dscale, dbias


@gradient_rule("graph.gather")
def _gather(b, op, g):
    """The table's gradient of an embedding lookup (axis 0): one-hot(indices)^T @ dY (rows of repeated
    indices accumulate)."""
    if op.axis.value.data != 0:
        raise CannError(_where(op), "no gradient rule for graph.gather on an axis other than 0")
    ds, ixs = shape(op.data), shape(op.indices)
    t, v, d = numel(ixs), ds[0], numel(ds[1:])
    ids = b.reshape(op.indices, (t, 1))
    rows = b.const(np.arange(v).reshape(1, v), graph.numpy_dtype(op.indices.type.element_type), "rows")
    onehot = b.where(b.compare(ids, rows, "eq"), b.const(np.float32(1.0)), b.const(np.float32(0.0)))  # [t, v]
    dt = b.matmul(_swap_last(b, onehot), b.reshape(g, (t, d)))
    return b.reshape(dt, ds), None


# ---------------------------------------------------------------------------------------------
# layout


@gradient_rule("graph.reshape")
def _reshape(b, op, g):
    return (b.reshape(g, shape(op.x)),)


@gradient_rule("graph.transpose")
def _transpose(b, op, g):
    perm = list(_ints(op.perm))
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return (b.transpose(g, inv),)


@gradient_rule("graph.expand")
def _expand(b, op, g):
    return (b.unbroadcast(g, shape(op.x)),)


@gradient_rule("graph.concat")
def _concat(b, op, g):
    ax, start, out = op.axis.value.data, 0, []
    for v in op.inputs:
        n = shape(v)[ax]
        out.append(b.slice(g, ax, start, start + n))
        start += n
    return out


@gradient_rule("graph.slice")
def _slice(b, op, g):
    xs = shape(op.x)
    st, en, sp = (list(_ints(getattr(op, a))) for a in ("starts", "ends", "steps"))
    if any(s != 1 for s in sp):
        raise CannError(_where(op), "no gradient rule for graph.slice with steps other than 1")
    pads = st + [xs[i] - en[i] for i in range(len(xs))]
    return (b.op(graph.PadOp(g, pads)),)


@gradient_rule("graph.pad")
def _pad(b, op, g):
    if op.mode.data != "constant":
        raise CannError(_where(op), f"no gradient rule for graph.pad of mode '{op.mode.data}'")
    xs, p = shape(op.x), list(_ints(op.pads))
    r = len(xs)
    starts = [p[i] for i in range(r)]
    if min(p) < 0:
        raise CannError(_where(op), "no gradient rule for graph.pad with negative pads")
    return (b.op(graph.SliceOp(g, starts, [starts[i] + xs[i] for i in range(r)], [1] * r)),)

