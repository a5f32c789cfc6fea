"""Running training programs (:mod:`cann.training.program`) on the simulated AI Core.

    from cann.training import Adam, Trainer
    trainer = Trainer.from_model("gpt_block.onnx", optimizer=Adam(lr=2e-3))
    for step in range(20):
        loss = trainer.step({"input_ids": ids}, target)

The program is compiled once; each :meth:`Trainer.step` is one simulated run whose inputs are the
batch, the current parameters, the step's scalars and the optimizer states, and whose outputs
replace them (the host keeps them between runs).
"""

from __future__ import annotations

import numpy as np

from cann.errors import CannError
from cann.training.program import Adam, Momentum, TrainingProgram, build


class Trainer:
    """A compiled training step with its parameters and optimizer states (float32 numpy arrays)."""

    def __init__(self, program: TrainingProgram, **compile_options):
        import cann

        if program.optimizer is None:
            raise CannError("optimizer", "a Trainer needs a program built with an optimizer (Momentum or Adam)")
        compile_options.setdefault("precision_mode", "must_keep_origin_dtype")
        self.program = program
        self.model = cann.compile(program.module, **compile_options)
        self.params = {k: v.copy() for k, v in program.params.items()}
        self.states = {n: np.zeros_like(self.params[n.rsplit(".", 1)[0]]) for n in program.state_names()}
        self.buffers = {k: v.copy() for k, v in program.buffers.items()}  # BatchNorm running statistics
        self.updates = 0
        self.last_run = None
        self.gradients: dict[str, np.ndarray] = {}  # the last step's, by parameter (with gradients=True)

    @classmethod
    def from_model(cls, model, *, loss: str = "softmax_cross_entropy", optimizer: Momentum | Adam | None = None,
                   input_shape: dict | None = None, gradients: bool = False, **compile_options) -> Trainer:
        """Build (:func:`cann.training.program.build`) and compile the training step of ``model``
        (``gradients``: keep each step's gradients in :attr:`gradients`)."""
        return cls(build(model, loss=loss, optimizer=optimizer or Momentum(), input_shape=input_shape,
                         gradients=gradients), **compile_options)

    def step(self, inputs: dict[str, np.ndarray], target: np.ndarray) -> float:
        """One training step on a batch (``inputs`` by model input name; ``target`` of the model
        output's shape); returns the loss before the update.

        Raises:
            CannError: a missing model input, or inputs the compiled program refuses (shape, dtype).
        """
        missing = [n for n in self.program.inputs if n not in inputs]
        if missing:
            raise CannError("inputs", f"no value for model input(s): {', '.join(missing)}")
        feed = {n: inputs[n] for n in self.program.inputs}
        feed["target"] = np.asarray(target, np.float32)
        feed.update(self.params)
        feed.update({k: np.full((1,), v, np.float32) for k, v in self.program.optimizer.scalars(self.updates).items()})
        feed.update(self.states)
        feed.update(self.buffers)
        out = self.model.run(feed)
        self.last_run = self.model.last_run
        for k in self.params:
            self.params[k] = out[k]
        for k in self.states:
            self.states[k] = out[k]
        for k in self.buffers:
            self.buffers[k] = out[k]
        self.gradients = {k: out[k + ".grad"] for k in self.params if k + ".grad" in out}
        self.updates += 1
        return float(out["loss"].reshape(-1)[0])
