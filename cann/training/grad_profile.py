"""Step profiles from the simulator (issue 16 item 4): when each gradient of a training step is
produced, for the gradient-splitting planner and the step simulation (:mod:`cann.training.step_sim`).

:func:`profile_program` compiles the training program of a model without an optimizer (its
outputs are the loss and every parameter's gradient: nothing fuses the gradients with an update)
and runs it once on the simulator in timing-only mode (``Model.time``: the cycles of a full run,
no values). Launches run one after another; the **backward pass** starts at the first launch that
computes a ``grad/`` op (:func:`cann.training.autodiff.differentiate` names them so) and a gradient is
produced when the last launch computing its defining op ends (the kernels' node lists name the
graph ops they compute; a value no launch computes, e.g. a free reshape, takes its operands' time).
The launches after the last gradient (the outputs' layout conversions) count as backward compute.

:func:`update_seconds` simulates the optimizer update (ONNX Momentum: two multiply-adds per
element, fp32 velocity and parameter) of a given number of parameters the same way.
Seconds = cycles / the SoC's clock.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.ir import SSAValue

from cann.dialects import graph, main_function
from cann.training.step_sim import StepProfile

#: the simulator's instruction budget for a profiling run (timing-only: large steps are allowed)
PROFILE_MAX_INSTRUCTIONS = 10**9


@dataclass(frozen=True)
class LayerTiming:
    """A simulated training program: ``forward`` seconds, then the backward ``kernels`` in order,
    each ``(seconds, names of the gradients it produces)``; ``nbytes`` of each gradient (fp32)."""

    forward: float
    kernels: tuple[tuple[float, tuple[str, ...]], ...]
    nbytes: dict[str, int]

    def order(self) -> list[str]:
        """The gradients in production (backward) order."""
        return [n for _, names in self.kernels for n in names]


def _loc(op) -> str | None:
    loc = op.location
    return loc.desc.data if isinstance(loc, graph.NameLoc) else None


def time_program(model, *, loss: str = "softmax_cross_entropy", params: list[str] | None = None,
                 input_shape: dict | None = None, **compile_options) -> LayerTiming:
    """Simulate the training step of ``model`` (ONNX path or ``ModelProto``) in timing-only mode and
    attribute its launches to the forward pass, the backward pass and the gradients (module
    docstring). ``params``: the parameters (default :func:`cann.training.program.find_parameters`);
    an initializer standing for an input makes the step compute that input's gradient too, as a
    layer inside a network does. ``compile_options`` go to :func:`cann.compile` (default
    ``precision_mode="force_fp16"``).
    """
    import cann
    from cann.hw.config import load_soc
    from cann.options import DEFAULT_SOC
    from cann.training.program import build

    program = build(model, loss=loss, optimizer=None, params=params, input_shape=input_shape)
    fn = main_function(program.module, "<training program>")
    names = [d.data["graph.name"].data for d in fn.res_attrs.data]
    ret = fn.body.block.last_op
    grads = {n[:-5]: v for n, v in zip(names, ret.operands) if n.endswith(".grad")}
    nbytes = {p: int(np.prod(program.params[p].shape)) * 4 for p in grads}

    # each gradient's candidate producers: the nearest ops above it (through ops no launch computes)
    def ancestors(v: SSAValue, limit: int = 64) -> list[list[str]]:
        levels, frontier, seen = [], [v], set()
        while frontier and len(levels) < limit:
            names_, nxt = [], []
            for x in frontier:
                op = x.owner
                if not hasattr(op, "results") or id(op) in seen or isinstance(op, graph.ConstantOp):
                    continue
                seen.add(id(op))
                names_.append(_loc(op))
                nxt.extend(op.operands)
            levels.append(names_)
            frontier = nxt
        return levels

    chains = {p: ancestors(v) for p, v in grads.items()}
    compile_options.setdefault("precision_mode", "force_fp16")
    compiled = cann.compile(program.module, **compile_options)
    stats = compiled.time(sim_checks="off", max_instructions=PROFILE_MAX_INSTRUCTIONS)
    om = compiled.om
    clock = load_soc(compile_options.get("soc_version") or DEFAULT_SOC).clock_mhz * 1e6
    last: dict[str, int] = {}
    start = None
    for k in stats.kernels:
        nodes = om.kernels[om.launches[k.index].kernel].nodes
        for n in nodes:
            last[n] = k.index
        if start is None and any(n.startswith("grad/") for n in nodes):
            start = k.index
    start = len(stats.kernels) if start is None else start
    ready: dict[str, int] = {}
    for p, levels in chains.items():
        found = -1
        for names_ in levels:  # the first level naming an op some launch computes
            hits = [last[n] for n in names_ if n in last]
            if hits:
                found = max(hits)
                break
        ready[p] = max(found, start)
    cycles = [k.cycles for k in stats.kernels]
    kernels = []
    for i in range(start, len(cycles)):
        made = tuple(p for p in grads if ready[p] == i)  # program (parameter) order within a launch
        kernels.append((cycles[i] / clock, made))
    return LayerTiming(sum(cycles[:start]) / clock, tuple(kernels), nbytes)


def profile_program(model, **options) -> StepProfile:
    """The :class:`StepProfile` of ``model``'s training step from one simulated run
    (:func:`time_program`'s options), gradients in backward order, without an update time."""
    t = time_program(model, **options)
    return to_profile(t)


def to_profile(t: LayerTiming, update: float = 0.0, drop: tuple[str, ...] = ()) -> StepProfile:
    """``t`` as a :class:`StepProfile` (gradients in ``drop`` are computed but not allreduced)."""
    order = [n for n in t.order() if n not in drop]
    index = {n: i for i, n in enumerate(order)}
    kernels = tuple((s, tuple(index[n] for n in names if n in index)) for s, names in t.kernels)
    return StepProfile(tuple(order), tuple(t.nbytes[n] for n in order), kernels, t.forward, update).check()


def update_seconds(count: int, *, soc_version: str | None = None,
                   precision_mode: str = "must_keep_origin_dtype") -> float:
    """Simulated seconds of an ONNX Momentum update of ``count`` fp32 parameters
    (``v = alpha v + g; x = x - lr v``: one program over a flat vector, timing-only)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    import cann
    from cann.hw.config import load_soc
    from cann.options import DEFAULT_SOC

    if count <= 0:
        return 0.0
    vec = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [count]) for n in ("x", "g", "v")]
    consts = [numpy_helper.from_array(np.array(a, np.float32), n) for n, a in (("alpha", 0.9), ("lr", 0.01))]
    nodes = [helper.make_node("Mul", ["v", "alpha"], ["av"]), helper.make_node("Add", ["av", "g"], ["v2"]),
             helper.make_node("Mul", ["v2", "lr"], ["step"]), helper.make_node("Sub", ["x", "step"], ["x2"])]
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [count]) for n in ("x2", "v2")]
    model = helper.make_model(helper.make_graph(nodes, "momentum", vec, outs, consts),
                              opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    compiled = cann.compile(model, precision_mode=precision_mode, soc_version=soc_version)
    stats = compiled.time(sim_checks="off", max_instructions=PROFILE_MAX_INSTRUCTIONS)
    return stats.cycles / (load_soc(soc_version or DEFAULT_SOC).clock_mhz * 1e6)
