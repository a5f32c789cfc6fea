"""``train-step``: the training program of :func:`cann.training.program.build` as a module pass,
for ``cann-opt`` pipelines and lit tests::

    cann-opt model.mlir -p 'train-step{loss=mse optimizer=momentum alpha=0.5}'

Options: ``loss`` (``softmax_cross_entropy`` or ``mse``), ``optimizer`` (``none``: the program
outputs ``loss`` and the gradients; ``momentum``; ``adam``), ``alpha`` and ``beta`` (the ONNX
operators' coefficients; negative: their defaults, Momentum 0.9 / 1.0, Adam 0.9 / 0.999),
``gradients`` (with an optimizer, also output the gradients), ``ranks`` (> 0: the program of one
of ``ranks`` data-parallel shards, with ``train.cross_rank_sum`` ops; docs/training.md). The learning rate is not an
option: it is an input of the program (``lr``), as the step count makes it vary. The module's
``@main`` is replaced by the training step (docs/training.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from cann.errors import CannError
from cann.training.program import Adam, Momentum, build

OPTIMIZERS = ("none", "momentum", "adam")


@dataclass(frozen=True)
class TrainStepPass(ModulePass):
    """Replace ``@main`` by its training step (module docstring)."""

    name = "train-step"
    loss: str = "softmax_cross_entropy"
    optimizer: str = "none"
    alpha: float = -1.0
    beta: float = -1.0
    gradients: bool = False
    ranks: int = 0

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.optimizer not in OPTIMIZERS:
            raise CannError("train-step", f"unknown optimizer '{self.optimizer}' (known: {', '.join(OPTIMIZERS)})")
        coef = {k: v for k, v in (("alpha", self.alpha), ("beta", self.beta)) if v >= 0}
        opt = {"none": None, "momentum": Momentum, "adam": Adam}[self.optimizer]
        opt = opt(**coef) if opt is not None else None
        if self.ranks < 0:
            raise CannError("train-step", f"ranks must be >= 0, got {self.ranks}")
        program = build(op, loss=self.loss, optimizer=opt, gradients=self.gradients, ranks=self.ranks)
        block = op.body.block
        for old in list(block.ops):
            block.detach_op(old)
        for new in list(program.module.body.block.ops):
            new.detach()
            block.add_op(new)
