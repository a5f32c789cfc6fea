"""``graph-recompose``: rebuild LayerNormalization and GELU from the elementwise pieces exporters
emit (ATC's ``LayerNormFusionPass`` / ``GeluFusionPass``).

Exporters spell these ops in many ways (ReduceMean/Sub/Pow/Sqrt/Div; Keras' mean/variance with
rsqrt and a folded bias; GELU as ``0.5 * x * (1 + erf(x / sqrt(2)))`` or with ``1 - erf(-x/√2)``),
so the match is semantic rather than syntactic: a candidate region (the ops reachable from one
tensor ``x`` whose other operands are constants) is evaluated in float64 on random inputs and
compared with the fused op; it is replaced only if they agree to 1e-6 relative error (the
exporters' constants are float32-rounded).

* GELU: an ``erf`` whose input is a scaled ``x``; the first op of the region equal to
  ``gelu(x)`` becomes ``graph.gelu``.
* LayerNorm: a ``reduce mean`` over trailing axes of ``x``; the last op of the region equal to
  ``normalize(x, eps) * gamma + beta`` (gamma, beta fitted per normalized position, eps one of the
  region's scalar constants) becomes ``graph.layer_norm`` with those constants.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.transforms.dead_code_elimination import dce

from cann.dialects import graph

_MAX_REGION = 24
_BINARY = {"graph.add": np.add, "graph.sub": np.subtract, "graph.mul": np.multiply, "graph.div": np.divide,
           "graph.max": np.maximum, "graph.min": np.minimum, "graph.pow": np.power}
_erf = np.vectorize(math.erf, otypes=[np.float64])
_UNARY = {"graph.neg": np.negative, "graph.sqrt": np.sqrt, "graph.reciprocal": np.reciprocal,
          "graph.exp": np.exp, "graph.log": np.log, "graph.tanh": np.tanh, "graph.abs": np.abs,
          "graph.erf": _erf, "graph.relu": lambda v: np.maximum(v, 0.0),
          "graph.sigmoid": lambda v: 1.0 / (1.0 + np.exp(-v))}


def _const(v: SSAValue) -> np.ndarray | None:
    if isinstance(v.owner, graph.ConstantOp):
        return np.asarray(graph.constant_value(v.owner), np.float64)
    return None


def _evaluable(op: Operation) -> bool:
    return op.name in _BINARY or op.name in _UNARY or (op.name == "graph.reduce" and op.kind.data in ("mean", "sum"))


def _region(x: SSAValue) -> list[Operation]:
    """Ops reachable from ``x`` whose other operands are constants or region values, in block order."""
    inside: set[SSAValue] = {x}
    ops: list[Operation] = []
    block = None
    frontier = [x]
    seen: set[int] = set()
    while frontier and len(ops) < _MAX_REGION:
        v = frontier.pop()
        for use in list(v.uses):
            op = use.operation
            if id(op) in seen or not _evaluable(op):
                continue
            if all(o in inside or _const(o) is not None for o in op.operands):
                seen.add(id(op))
                ops.append(op)
                inside.add(op.results[0])
                frontier.append(op.results[0])
                block = block or op.parent_block()
    if block is None:
        return []
    order = {id(o): i for i, o in enumerate(block.ops)}
    return sorted((o for o in ops if id(o) in order), key=lambda o: order[id(o)])


def _evaluate(region: list[Operation], x: SSAValue, sample: np.ndarray) -> dict[SSAValue, np.ndarray]:
    env: dict[SSAValue, np.ndarray] = {x: sample}

    def val(v):
        return env[v] if v in env else _const(v)

    with np.errstate(all="ignore"):
        for op in region:
            if op.name in _BINARY:
                env[op.results[0]] = _BINARY[op.name](val(op.operands[0]), val(op.operands[1]))
            elif op.name in _UNARY:
                env[op.results[0]] = _UNARY[op.name](val(op.operands[0]))
            else:
                f = np.mean if op.kind.data == "mean" else np.sum
                axes = tuple(a % sample.ndim for a in op.axes.get_values())
                env[op.results[0]] = f(val(op.x), axis=axes, keepdims=bool(op.keepdims.value.data))
    return env


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.all(np.isfinite(a))) and \
        float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300)) < 1e-6  # float32 constants


def _samples(x: SSAValue, n: int = 3) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    shape = tuple(x.type.get_shape())
    return [rng.standard_normal(shape) * rng.uniform(0.5, 3.0) + rng.uniform(-2, 2) for _ in range(n)]


def _replace(old: Operation, new_ops: list[Operation]) -> None:
    block = old.parent_block()
    for n in new_ops:
        block.insert_op_before(n, old)
    old.results[0].replace_all_uses_with(new_ops[-1].results[0])


def _gelu_roots(erf: Operation) -> list[SSAValue]:
    """Candidate ``x`` for an erf: the values up its chain of single-tensor ops, nearest first."""
    v = erf.operands[0]
    roots = [v]
    while isinstance(v.owner, Operation) and _evaluable(v.owner) and v.owner.name != "graph.reduce":
        dyn = [o for o in v.owner.operands if _const(o) is None]
        if len(dyn) != 1:
            break
        v = dyn[0]
        roots.append(v)
    return roots


def recompose_gelu(module: ModuleOp) -> int:
    count = 0
    for erf in [op for op in module.walk() if op.name == "graph.erf"]:
        if erf.parent_block() is None:
            continue
        for x in _gelu_roots(erf):
            if _match_gelu(erf, x):
                count += 1
                break
    return count


def _match_gelu(erf: Operation, x: SSAValue) -> bool:
    region = _region(x)
    if erf not in region:
        return False
    samples = _samples(x)
    envs = [_evaluate(region, x, s) for s in samples]
    want = [0.5 * s * (1.0 + _erf(s / math.sqrt(2.0))) for s in samples]
    for op in region[region.index(erf) + 1:]:
        r = op.results[0]
        if r.type == x.type and all(_close(e[r], w) for e, w in zip(envs, want)):
            g = graph.GeluOp(x, "none")
            g.location = op.location
            _replace(op, [g])
            return True
    return False


def recompose_layer_norm(module: ModuleOp) -> int:
    count = 0
    for red in [op for op in module.walk() if op.name == "graph.reduce" and op.kind.data == "mean"]:
        if red.parent_block() is None or not red.keepdims.value.data:
            continue
        x = red.x
        shape = tuple(x.type.get_shape())
        axes = sorted(a % len(shape) for a in red.axes.get_values())
        k = axes[0]
        if axes != list(range(k, len(shape))):
            continue
        region = _region(x)
        if red not in region:
            continue
        eps_candidates = sorted({float(c.reshape(-1)[0]) for op in region for o in op.operands
                                 if (c := _const(o)) is not None and c.size == 1 and 0 < float(c.reshape(-1)[0]) < 1e-2})
        if not eps_candidates:
            continue
        samples = _samples(x, 4)
        envs = [_evaluate(region, x, s) for s in samples]
        norm_shape = shape[k:]
        found = None
        for op in reversed(region[region.index(red) + 1:]):  # the largest matching op first
            r = op.results[0]
            if r.type != x.type:
                continue
            for eps in eps_candidates:
                ns = [(s - s.mean(axis=tuple(axes), keepdims=True)) /
                      np.sqrt(s.var(axis=tuple(axes), keepdims=True) + eps) for s in samples]
                # fit y = n * gamma + beta per normalized position over samples and outer positions
                n_ = np.stack([v.reshape(-1, math.prod(norm_shape)) for v in ns[:2]]).reshape(-1, math.prod(norm_shape))
                y_ = np.stack([e[r].reshape(-1, math.prod(norm_shape)) for e in envs[:2]]).reshape(-1, math.prod(norm_shape))
                nm, ym = n_.mean(0), y_.mean(0)
                var_n = ((n_ - nm) ** 2).sum(0)
                if np.any(var_n == 0):
                    continue
                gamma = ((n_ - nm) * (y_ - ym)).sum(0) / var_n
                beta = ym - gamma * nm
                gamma, beta = gamma.reshape(norm_shape), beta.reshape(norm_shape)
                if all(_close(e[r], v * gamma + beta) for e, v in zip(envs[2:], ns[2:])):
                    found = (op, eps, gamma, beta)
                    break
            if found:
                break
        if found is None:
            continue
        op, eps, gamma, beta = found
        elem = np.float32  # graph tensors are float32 until the precision mode applies
        gc = graph.make_constant(gamma.astype(elem), "layer_norm_gamma")
        bc = graph.make_constant(beta.astype(elem), "layer_norm_beta")
        ln = graph.LayerNormOp(x, gc.results[0], bc.results[0], k, eps)
        ln.location = op.location
        _replace(op, [gc, bc, ln])
        count += 1
    return count


@dataclass(frozen=True)
class GraphRecomposePass(ModulePass):
    """Recompose LayerNormalization and GELU (see the module docstring); options switch each."""

    name = "graph-recompose"
    layer_norm: bool = True
    gelu: bool = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        n = 0
        if self.layer_norm:
            n += recompose_layer_norm(op)
        if self.gelu:
            n += recompose_gelu(op)
        if n:
            dce(op)
