"""Run an offline model (:class:`cann.codegen.om.OfflineModel`) on the simulated AI Core.

:func:`run_model` allocates the global-memory arena, loads the weights, places the inputs, runs
every launch in order on one :class:`~cann.sim.core.AICore` and copies the outputs out.

Core state between launches: the on-chip buffers are *not* cleared between launches (kernels never
rely on leftover state; the compiler initialises everything it reads), but a fresh core is used for
every :func:`run_model` call, so a model's results never depend on an earlier run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cann.codegen.om import OfflineModel
from cann.errors import CannError, Diagnostic
from cann.hw import isa
from cann.hw.config import load_soc
from cann.sim.core import AICore, KernelStats


@dataclass
class RunStats:
    """Totals over all launches (serialized model) and the per-launch kernel stats."""

    cycles: int
    instructions: int
    kernels: list[KernelStats] = field(default_factory=list)


def _place_inputs(om: OfflineModel, inputs: dict[str, np.ndarray], gm: np.ndarray) -> None:
    declared = {t.name: t for t in om.inputs}
    unknown = [n for n in inputs if n not in declared]
    problems = []
    for n in unknown:
        problems.append((f"input '{n}'", f"unknown input (model inputs: {', '.join(declared) or 'none'})"))
    for t in om.inputs:
        if t.name not in inputs:
            problems.append((f"input '{t.name}'", f"missing input (expected shape {tuple(t.shape)} {t.dtype})"))
            continue
        a = np.asarray(inputs[t.name])
        want = np.dtype(t.dtype)
        if tuple(a.shape) != tuple(t.shape):
            problems.append((f"input '{t.name}'", f"shape mismatch: expected {tuple(t.shape)}, got {tuple(a.shape)}"))
            continue
        if a.dtype != want:
            if a.dtype == np.float64 and want.kind == "f":
                a = a.astype(want)
            else:
                problems.append((f"input '{t.name}'", f"dtype mismatch: expected {want}, got {a.dtype}"))
                continue
        raw = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
        gm[t.gm_offset:t.gm_offset + raw.size] = raw
    if problems:
        raise CannError.many([Diagnostic(loc, msg) for loc, msg in problems])


def run_model(om: OfflineModel, inputs: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], RunStats]:
    """Run ``om`` on ``inputs`` (name -> array); returns (outputs by name, stats).

    Inputs must match the declared shape and dtype exactly, except that float64 arrays are cast to
    the declared float dtype.

    Raises:
        CannError: bad inputs (naming each input, expected vs got), an undecodable kernel, a
            kernel with ``block_dim != 1`` (multi-core is a later model).
        SimError: an invalid instruction (bounds, alignment, fields), located at the instruction.
    """
    spec = load_soc(om.soc_version)
    gm = np.zeros(om.gm_size, np.uint8)
    if om.weights:
        w = np.frombuffer(om.weights, np.uint8)
        if om.weights_offset < 0 or om.weights_offset + w.size > gm.size:
            raise CannError("<model>", f"weights [{om.weights_offset}, +{w.size}) outside gm_size {om.gm_size}")
        gm[om.weights_offset:om.weights_offset + w.size] = w
    _place_inputs(om, inputs, gm)

    core = AICore(spec)
    decoded: dict[int, list[isa.Instr]] = {}
    stats = RunStats(0, 0, [])
    for li, la in enumerate(om.launches):
        if not 0 <= la.kernel < len(om.kernels):
            raise CannError(f"launch {li}", f"kernel index {la.kernel} outside [0, {len(om.kernels)})")
        k = om.kernels[la.kernel]
        if k.block_dim != 1:
            raise CannError(f"kernel '{k.name}'", f"block_dim {k.block_dim} is not supported by the simulator yet "
                                                  f"(only 1)")
        if len(la.args) != k.num_args:
            raise CannError(f"launch {li}", f"{len(la.args)} arguments for kernel '{k.name}' taking {k.num_args}")
        prog = decoded.get(la.kernel)
        if prog is None:
            try:
                prog = decoded[la.kernel] = isa.decode(k.code)
            except ValueError as e:
                raise CannError(f"kernel '{k.name}'", f"cannot decode: {e}") from None
        ks = core.run(prog, gm, tuple(la.args), k.name)
        stats.kernels.append(ks)
        stats.cycles += ks.cycles
        stats.instructions += ks.instructions

    outputs = {}
    for t in om.outputs:
        dt = np.dtype(t.dtype)
        n = int(np.prod(t.shape, dtype=np.int64))
        outputs[t.name] = gm[t.gm_offset:t.gm_offset + n * dt.itemsize].view(dt).reshape(t.shape).copy()
    return outputs, stats
