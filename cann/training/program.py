"""Training programs (issue 16 item 1): a model plus a loss plus an optimizer -> one graph-dialect
function computing the forward pass, the backward pass (:mod:`cann.training.autodiff`) and the
optimizer update, in the spirit of onnxruntime-training's ``generate_artifacts``.

The parameters are the model's floating-point initializers of more than one element (ONNX
initializers imported as ``graph.constant``; BatchNormalization's running statistics and scalar
constants excluded). They, and the optimizer states, are **passed in and out explicitly**: the
program's inputs are the model's inputs, ``target``, the parameters (by initializer name), the
step's scalars, the states and BatchNorm's running statistics (by initializer name); its outputs
are ``loss``, then the updated parameters and states (or, without an optimizer, the gradients
``<param>.grad``), then the updated running statistics. A simulated run keeps no memory
between runs, so this keeps each step a pure function (deterministic, checkable step by step, and
the place where a data-parallel allreduce or a sharded optimizer will cut the program next).

Optimizers follow ONNX ``ai.onnx.preview.training`` Momentum and Adam (onnx/defs/training); the
scalars that depend on the update count T are computed on the host (:class:`Trainer`) and fed as
one-element inputs: Momentum's ``lr`` and ``grad_coef`` (beta, or 1 at T = 0, T the updates
done), Adam's ``lr`` (R * sqrt(1 - beta^T) / (1 - alpha^T), T the updates done + 1 as PyTorch counts).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, ModuleOp, StringAttr, TensorType, f32
from xdsl.ir import Block, Region, SSAValue

from cann.dialects import graph, main_function
from cann.errors import CannError
from cann.training.autodiff import differentiate
from cann.training.builder import GraphBuilder, shape
from cann.training.primitives import rewrite_for_training

LOSSES = ("softmax_cross_entropy", "mse")


@dataclass(frozen=True)
class Momentum:
    """ONNX Momentum: ``V = alpha V + beta' (G + norm_coefficient X)``, ``X -= lr V`` (standard) or
    ``X -= lr (G_reg + alpha V)`` (nesterov); ``beta' = beta`` for T > 0, 1 at T = 0. PyTorch's
    ``SGD(momentum=alpha, dampening=1-beta)``."""

    lr: float = 0.01
    alpha: float = 0.9
    beta: float = 1.0
    norm_coefficient: float = 0.0
    mode: str = "standard"
    states: tuple[str, ...] = field(default=("velocity",), init=False)

    def scalars(self, step: int) -> dict[str, float]:
        """The step's inputs after ``step`` updates (ONNX's T = ``step``: the first velocity is the gradient)."""
        return {"lr": self.lr, "grad_coef": self.beta if step > 0 else 1.0}


@dataclass(frozen=True)
class Adam:
    """ONNX Adam: ``V = alpha V + (1-alpha) G_reg``, ``H = beta H + (1-beta) G_reg^2``,
    ``X = (1 - norm_coefficient_post) (X - lr_T V / (sqrt(H) + epsilon))`` with the bias-corrected
    ``lr_T = lr sqrt(1 - beta^T) / (1 - alpha^T)`` for T > 0."""

    lr: float = 0.001
    alpha: float = 0.9
    beta: float = 0.999
    epsilon: float = 1e-6
    norm_coefficient: float = 0.0
    norm_coefficient_post: float = 0.0
    states: tuple[str, ...] = field(default=("momentum1", "momentum2"), init=False)

    def scalars(self, step: int) -> dict[str, float]:
        """The step's inputs after ``step`` updates (ONNX's T = ``step + 1``, PyTorch's step count:
        the first update is bias-corrected)."""
        t = step + 1
        return {"lr": self.lr * math.sqrt(1 - self.beta ** t) / (1 - self.alpha ** t)}


def _name(op) -> str | None:
    loc = op.location
    return loc.desc.data if isinstance(loc, graph.NameLoc) else None


def find_parameters(block: Block) -> list[graph.ConstantOp]:
    """The trainable constants of an imported model (module docstring), in program order."""
    stats = {op.mean for op in block.ops if isinstance(op, graph.BatchNormOp)} | \
            {op.var for op in block.ops if isinstance(op, graph.BatchNormOp)}
    out = []
    for op in block.ops:
        if not isinstance(op, graph.ConstantOp) or op.res in stats or _name(op) is None:
            continue
        t = op.res.type
        if graph.numpy_dtype(t.element_type).kind == "f" and math.prod(t.get_shape()) > 1 and op.res.uses:
            out.append(op)
    return out


@dataclass
class TrainingProgram:
    """A training step's graph module and how to call it (names of its inputs and outputs)."""

    module: ModuleOp
    inputs: list[str]            # the model's own inputs
    params: dict[str, np.ndarray]  # initial values, by name (program order)
    optimizer: Momentum | Adam | None
    loss: str
    outputs: list[str] = field(default_factory=list)
    buffers: dict[str, np.ndarray] = field(default_factory=dict)  # BatchNorm running statistics (in and out)

    def state_names(self) -> list[str]:
        if self.optimizer is None:
            return []
        return [f"{p}.{s}" for s in self.optimizer.states for p in self.params]


def build(model, *, loss: str = "softmax_cross_entropy", optimizer: Momentum | Adam | None = None,
          input_shape: dict | None = None, params: list[str] | None = None,
          gradients: bool = False, ranks: int = 0) -> TrainingProgram:
    """The training program of ``model`` (an ONNX path or ``ModelProto``, or a graph-dialect module)
    whose first output is trained against ``target`` by ``loss``:

    * ``softmax_cross_entropy``: ``target`` holds probabilities (one-hot labels) of the output's
      shape; softmax over the last axis; the mean over all other positions (PyTorch's
      ``cross_entropy`` with ``reduction="mean"`` on the flattened positions).
    * ``mse``: ``mean((output - target)^2)``.

    ``params``: the parameter names to train (default :func:`find_parameters`). ``gradients``: with
    an optimizer, also output the gradients ``<param>.grad`` (after the states). The module is
    verified and at graph level (compile it with :func:`cann.compile`).

    ``ranks`` > 0: the program of one of ``ranks`` data-parallel shards (the model's batch is the
    shard's): the loss is the shard's share of the global mean (divided by ``ranks``), BatchNorm
    is SyncBatchNorm and the gradients are summed over ranks, through ``train.cross_rank_sum`` ops
    (:mod:`cann.training.collective`) that :mod:`cann.training.data_parallel` cuts the program at.

    Raises:
        CannError: an unknown loss or parameter name, an op without a gradient rule (naming the node).
    """
    from cann.compiler import import_model

    if loss not in LOSSES:
        raise CannError("loss", f"unknown loss '{loss}' (known: {', '.join(LOSSES)})")
    module = model if isinstance(model, ModuleOp) else import_model(model, input_shape=input_shape)
    fn = main_function(module, "<model>")
    old = fn.body.block
    names = [d.data["graph.name"].data for d in fn.arg_attrs.data] if fn.arg_attrs else \
        [f"input{i}" for i in range(len(old.args))]
    consts = find_parameters(old)
    if params is not None:
        known = {_name(c): c for c in old.ops if isinstance(c, graph.ConstantOp)}
        missing = [p for p in params if p not in known]
        if missing:
            raise CannError("params", f"not initializers of the model: {', '.join(missing)}")
        consts = [known[p] for p in params]
    ret = old.last_op
    assert isinstance(ret, func.ReturnOp)
    out_type = ret.operands[0].type
    scalars = (["lr", "grad_coef"] if isinstance(optimizer, Momentum) else ["lr"]) if optimizer else []
    pnames = [_name(c) for c in consts]
    snames = [f"{p}.{s}" for s in (optimizer.states if optimizer else ()) for p in pnames]
    types = [a.type for a in old.args] + [out_type] + [c.res.type for c in consts] + \
            [TensorType(f32, [1])] * len(scalars) + [consts[i % len(consts)].res.type for i in range(len(snames))]
    block = Block(arg_types=types)
    for a, n in zip(old.args, block.args):
        a.replace_all_uses_with(n)
    k = len(old.args)
    target = block.args[k]
    pargs = list(block.args[k + 1:k + 1 + len(consts)])
    sargs = dict(zip(scalars, block.args[k + 1 + len(consts):k + 1 + len(consts) + len(scalars)]))
    states = list(block.args[k + 1 + len(consts) + len(scalars):])
    values = {n: np.array(graph.constant_value(c), np.float32) for n, c in zip(pnames, consts)}
    for c, a in zip(consts, pargs):
        c.res.replace_all_uses_with(a)
        old.erase_op(c)
    for op in list(old.ops):
        op.detach()
        block.add_op(op)
    running: list = []
    rewrite_for_training(block, running, ranks)
    out = ret.operands[0]  # (after the rewrites, which may replace the output's op)
    block.erase_op(ret)
    b = GraphBuilder(block, None, "train")
    loss_v = _loss(b, out, target, loss)
    if ranks:
        loss_v = b.scale(loss_v, 1.0 / ranks)
    grads = differentiate(block, loss_v, pargs, GraphBuilder(block, None, "grad"))
    if ranks:
        from cann.training.collective import cross_rank_sum

        s = GraphBuilder(block, None, "allreduce")
        grads = [cross_rank_sum(s, g, "grad") for g in grads]
    results, rnames = [loss_v], ["loss"]
    if optimizer is None:
        results += grads
        rnames += [f"{p}.grad" for p in pnames]
    else:
        u = GraphBuilder(block, None, "update")
        new_p, new_s = _update(u, optimizer, pargs, grads, sargs, states)
        results += new_p + new_s
        rnames += pnames + snames
        if gradients:
            results += grads
            rnames += [f"{p}.grad" for p in pnames]
    # BatchNorm's running statistics: constants promoted to inputs, their updates to outputs
    stats, snames_bn = [], []
    for mean_v, var_v, new_mean, new_var in running:
        for v, new in ((mean_v, new_mean), (var_v, new_var)):
            owner = v.owner
            if isinstance(owner, graph.ConstantOp) and _name(owner) and _name(owner) not in snames_bn:
                stats.append((owner, new))
                snames_bn.append(_name(owner))
    stat_args = []
    for owner, new in stats:
        arg = block.insert_arg(owner.res.type, len(block.args))
        owner.res.replace_all_uses_with(arg)
        block.erase_op(owner)
        stat_args.append(arg)
        results.append(new)
    rnames += snames_bn
    types += [a.type for a in stat_args]
    buffers = {n: np.array(graph.constant_value(o), np.float32) for (o, _), n in zip(stats, snames_bn)}
    block.add_op(func.ReturnOp(*results))
    _erase_dead(block)
    new_fn = func.FuncOp("main", func.FunctionType.from_lists(types, [r.type for r in results]), Region(block))
    new_fn.arg_attrs = _attrs(names + ["target"] + pnames + scalars + snames + snames_bn)
    new_fn.res_attrs = _attrs(rnames)
    new_module = ModuleOp([new_fn])
    for k_, v in module.attributes.items():
        new_module.attributes[k_] = v
    new_module.verify()
    return TrainingProgram(new_module, names, values, optimizer, loss, rnames, buffers)


def _erase_dead(block: Block) -> None:
    """Erase the ops whose results nothing uses (the rules build both operands' gradients; the
    ones no parameter needs, e.g. the input image's, and the unused running statistics go)."""
    for op in reversed(list(block.ops)):
        if op.results and not any(r.uses for r in op.results):
            block.erase_op(op)


def _attrs(names: list[str]) -> ArrayAttr:
    return ArrayAttr([DictionaryAttr({"graph.name": StringAttr(n)}) for n in names])


def _loss(b: GraphBuilder, y: SSAValue, t: SSAValue, kind: str) -> SSAValue:
    ys = shape(y)
    all_axes = list(range(len(ys)))
    if kind == "mse":
        d = b.sub(y, t)
        per = b.mul(d, d)
    else:
        last = len(ys) - 1
        lse = b.reduce(y, "log_sum_exp", [last], True)
        picked = b.reduce(b.mul(t, y), "sum", [last], True)
        per = b.sub(lse, picked)
    return b.reshape(b.reduce(per, "mean", all_axes, True), (1,))


def _update(b: GraphBuilder, opt, params, grads, scalars, states):
    n = len(params)
    new_p, new_s = [], []
    if isinstance(opt, Momentum):
        for x, g, v in zip(params, grads, states[:n]):
            greg = b.add(g, b.scale(x, opt.norm_coefficient)) if opt.norm_coefficient else g
            v_new = b.add(b.scale(v, opt.alpha), b.mul(scalars["grad_coef"], greg))
            step = v_new if opt.mode == "standard" else b.add(greg, b.scale(v_new, opt.alpha))
            new_p.append(b.sub(x, b.mul(scalars["lr"], step)))
            new_s.append(v_new)
        return new_p, new_s
    vs, hs = states[:n], states[n:]
    new_v, new_h = [], []
    for x, g, v, h in zip(params, grads, vs, hs):
        greg = b.add(g, b.scale(x, opt.norm_coefficient)) if opt.norm_coefficient else g
        v_new = b.add(b.scale(v, opt.alpha), b.scale(greg, 1 - opt.alpha))
        h_new = b.add(b.scale(h, opt.beta), b.scale(b.mul(greg, greg), 1 - opt.beta))
        den = b.add(b.sqrt(h_new), b.scalar_like(x, opt.epsilon))
        x_new = b.sub(x, b.mul(scalars["lr"], b.div(v_new, den)))
        new_p.append(b.scale(x_new, 1 - opt.norm_coefficient_post))
        new_v.append(v_new)
        new_h.append(h_new)
    return new_p, new_v + new_h
