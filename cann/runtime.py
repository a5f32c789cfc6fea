"""A compiled model: run it on the simulated AI Core, save it as ``.om``, load it back."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

import numpy as np

from cann.codegen.om import IoTensor, OfflineModel, read_om, write_om
from cann.errors import CannError


class Model:
    """An offline model bound to the simulator.

    ``inputs`` / ``outputs`` describe the model's tensors (name, shape, dtype); after ``run``,
    ``last_run`` holds the simulation statistics (``cycles``, ``instructions``, per kernel).
    """

    def __init__(self, om: OfflineModel):
        self.om = om
        self.last_run = None
        self.fusion_report: dict | None = None  # set by cann.compile (not stored in the .om)
        #: (graph ops kept in float32, graph ops) under --keep_dtype / allow_mix_precision (set by cann.compile)
        self.kept_fp32: tuple[int, int] | None = None

    @property
    def inputs(self) -> tuple[IoTensor, ...]:
        return self.om.inputs

    @property
    def outputs(self) -> tuple[IoTensor, ...]:
        return self.om.outputs

    @property
    def precision_mode(self) -> str:
        return self.om.precision_mode

    @property
    def soc_version(self) -> str:
        return self.om.soc_version

    def run(self, inputs: dict[str, np.ndarray], *, sim_checks: str = "error",
            max_instructions: int | None = None,
            on_launch: Callable[[int, np.ndarray], None] | None = None) -> dict[str, np.ndarray]:
        """Simulate one inference: ``inputs`` by name -> outputs by name.

        Each input must have exactly the declared shape and dtype (``inputs`` / ``IoTensor``), as
        onnxruntime requires: nothing is cast. ``sim_checks="warn"`` downgrades the simulator's
        race/deadlock/double-set errors to warnings ("off" skips the race detector);
        ``max_instructions`` raises the simulator's work budget (default
        :data:`cann.sim.executor.MAX_DYNAMIC_INSTRUCTIONS`); ``on_launch(index, gm)`` is called after
        each launch with the GM arena (the per-layer dumps of :mod:`cann.accuracy`); see
        :func:`cann.sim.executor.run_model`.
        ``last_run`` then holds a :class:`cann.sim.executor.RunStats` (per-launch records with
        cycles, pipe ratios, GM bytes, the compiled bound, model and executed MACs, ideal cycles
        and ``ideal_pct``, and their model totals; see docs/core-model.md, "Profile").

        Warns:
            cann.FloatOverflowWarning: a kernel produced inf/NaN from finite operands (float16
                overflow under force_fp16), naming the kernel and its model nodes.

        Raises:
            CannError: ``inputs`` not a mapping; a missing or unknown input, or a shape/dtype mismatch (naming the input, the
                expected and the given); an invalid model; more work than the budget; a simulator fault.
        """
        from cann.sim.executor import MAX_DYNAMIC_INSTRUCTIONS, run_model

        if not isinstance(inputs, Mapping):
            names = ", ".join(t.name for t in self.om.inputs) or "none"
            raise CannError("Model.run", f"inputs must be a dict of input name -> array (inputs: {names}), "
                                         f"got {type(inputs).__name__}")
        outputs, stats = run_model(self.om, inputs, sim_checks=sim_checks,
                                   max_instructions=max_instructions or MAX_DYNAMIC_INSTRUCTIONS,
                                   on_launch=on_launch)
        self.last_run = stats
        return outputs

    def time(self, *, sim_checks: str = "error", max_instructions: int | None = None):
        """Simulate the timing of one inference without computing values (a timing-only run,
        :mod:`cann.sim.timing_only`): returns the :class:`cann.sim.executor.RunStats` that
        ``run`` leaves in ``last_run`` -- the same cycles, pipe busy cycles, bytes and profile, for
        any inputs -- and sets ``last_run`` to it; no inputs are taken and no outputs produced.
        ``sim_checks`` and ``max_instructions`` as in :meth:`run` (the race detector still runs:
        operand footprints need no values; "off" skips it, faster). Unlike :meth:`run`, the
        operands' bounds, alignment and field values and Gather's index range are not checked, and
        no float overflow is detected (docs/core-model.md, "Timing-only runs").

        Raises:
            CannError: an invalid model; more work than the budget; a malformed block control.
            SimError: with ``sim_checks="error"``, a race, deadlock or flag set twice.
        """
        from cann.sim.executor import MAX_DYNAMIC_INSTRUCTIONS
        from cann.sim.timing_only import time_model

        self.last_run = time_model(self.om, sim_checks=sim_checks,
                                   max_instructions=max_instructions or MAX_DYNAMIC_INSTRUCTIONS)
        return self.last_run

    def save(self, path: str | os.PathLike) -> None:
        """Write the ``.om`` file atomically (nothing is left behind on failure)."""
        write_om(self.om, path)


def load(path: str | os.PathLike) -> Model:
    """Read an ``.om`` file.

    Raises:
        CannError: not an offline model, a truncated or corrupted file, an unsupported version.
    """
    return Model(read_om(path))
