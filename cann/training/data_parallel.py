"""Data-parallel training on MPI (issue 16 item 3): one simulated device per rank, each on its shard
of the batch.

    mpiexec -n 4 cann-train model.onnx --data batches.npz --data-parallel

The shard's training program (:func:`cann.training.program.build` with ``ranks``) holds
``train.cross_rank_sum`` ops (:mod:`cann.training.collective`) where values are summed over ranks:
SyncBatchNorm's per-shard sums (forward) and their cotangents (backward), then every parameter's
gradient. :func:`split_program` cuts it there into pieces (stages) compiled separately; a value
crossing a cut is an output of one stage and an input of a later one (the host keeps it, as it
keeps the parameters between steps). :class:`DataParallelTrainer` runs the stages in turn and sums
each cut's values over ranks with non-blocking ``MPI.Iallreduce`` in fixed segments of at most
``segment_bytes``; the gradients are reduced together after the whole backward pass, then the last
stage applies the optimizer update, identically on every rank. With ``split_strategy``
(:mod:`cann.training.grad_split`: ``auto``, a baseline, or HCCL's ``idx:``/``size:`` forms) the
gradients are instead allreduced one ``Iallreduce`` per segment of the plan, in backward order; the
plan comes from the shard's step profile (:func:`cann.training.grad_profile.time_program`, one
timing-only simulated run at start-up) and :attr:`step_result` holds the step simulation of it. Every rank ends each step with the
same parameters, optimizer states and running statistics.

Time is simulated only: a step's cycles are its stages' simulated cycles plus, per segment, the
ring allreduce of the link model (:mod:`cann.hw.links`), ``2(p-1) alpha + 2(p-1)/p n beta`` on the
slowest link of the ring ``0, 1, ..., p-1``, converted at the core clock; no wall-clock figure.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, ModuleOp, StringAttr
from xdsl.ir import Block, Operation, Region, SSAValue

from cann.dialects import graph, main_function
from cann.errors import CannError
from cann.training.collective import CrossRankSumOp
from cann.training.program import Adam, Momentum, TrainingProgram, build
from cann.training.step_sim import CommModel

#: the fixed segmentation of the gradient allreduce (the adaptive split is issue 16 item 4)
SEGMENT_BYTES = 1 << 20


@dataclass
class Stage:
    """One piece of the split program: its module, input and output value names, and the cross-rank
    sums ``(operand name, result name)`` run after it."""

    module: ModuleOp | None
    inputs: list[str]
    outputs: list[str]
    sums: list[tuple[str, str]] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)  # each sum's kind: "stat" or "grad"


def _attrs(names: list[str]) -> ArrayAttr:
    return ArrayAttr([DictionaryAttr({"graph.name": StringAttr(n)}) for n in names])


def split_program(module: ModuleOp, recompute: Collection[str] = ()) -> tuple[list[Stage], dict[str, np.ndarray],
                                                                               list[str]]:
    """Cut ``module``'s ``@main`` at its ``train.cross_rank_sum`` ops (module docstring).

    Returns the stages, the host-side values of constants that cross a cut (a zero gradient), and
    the names of ``@main``'s results. Each op goes to the earliest stage its operands allow; a
    ``stat`` sum runs after the stage producing its operand, all ``grad`` sums after the last stage
    of the backward pass. Constants are copied into each stage using them.

    ``recompute``: input names (ZeRO-3's weights) whose derived values -- ops reading only them,
    constants and such values, e.g. a weight's transpose for the backward pass -- are placed in no
    stage but cloned into each stage using them, as constants are: no value computed from those
    inputs crosses a cut (a stage reads the inputs themselves).
    """
    fn = main_function(module, "<training program>")
    block = fn.body.block
    names: dict[SSAValue, str] = {a: d.data["graph.name"].data for a, d in zip(block.args, fn.arg_attrs.data)}
    derived: dict[SSAValue, Operation] = {}  # recomputed values -> their op
    pinned = {v for op in block.ops if isinstance(op, CrossRankSumOp) for v in op.operands} | \
        set(block.last_op.operands)  # (values a sum or the return reads stay in their stage)
    leaves = {a for a in block.args if names[a] in set(recompute)}
    level: dict[SSAValue, int] = {a: 0 for a in block.args}
    consts: dict[SSAValue, graph.ConstantOp] = {}
    staged: dict[int, list] = {}
    sums: dict[int, list[CrossRankSumOp]] = {}
    grad_level = None
    order: dict[SSAValue, tuple[int, int]] = {}
    ret = block.last_op
    for i, op in enumerate(block.ops):
        if op is ret:
            break
        if isinstance(op, graph.ConstantOp):
            consts[op.res] = op
            names[op.res] = f"c{i}"
            continue
        if leaves and op.operands and not isinstance(op, CrossRankSumOp) and \
                not any(r in pinned for r in op.results) and \
                all(v in consts or v in leaves or v in derived for v in op.operands):
            for j, r in enumerate(op.results):
                derived[r] = op
                names[r] = f"v{i}" if len(op.results) == 1 else f"v{i}_{j}"
            continue
        lv = max((level[v] for v in op.operands if v not in consts and v not in derived), default=0)
        if isinstance(op, CrossRankSumOp):
            if op.kind.data == "grad":
                if grad_level is None:
                    grad_level = max(staged, default=0)
                lv = grad_level
            sums.setdefault(lv, []).append(op)
            level[op.res] = lv + 1
            names[op.res] = f"s{i}"
            continue
        staged.setdefault(lv, []).append(op)
        for j, r in enumerate(op.results):
            level[r] = lv
            names[r] = f"v{i}" if len(op.results) == 1 else f"v{i}_{j}"
            order[r] = (i, j)
    used_later: dict[SSAValue, set[int]] = {}
    for lv, ops in staged.items():
        for op in ops:
            for v in op.operands:
                used_later.setdefault(v, set()).add(lv)
    crossing = {op.x for ops in sums.values() for op in ops} | set(ret.operands)
    host_consts = {names[v]: np.array(graph.constant_value(consts[v]), np.float32) for v in crossing if v in consts}
    stages = []
    for lv in range(max([*staged, *sums], default=0) + 1):
        ops = staged.get(lv, [])
        stage = Stage(None, [], [], [(names[s.x], names[s.res]) for s in sums.get(lv, [])],
                      [s.kind.data for s in sums.get(lv, [])])
        stages.append(stage)
        if not ops:
            continue
        ops = _with_recomputed(ops, derived)
        mine = {r for op in ops for r in op.results}
        ins = []
        for op in ops:
            for v in op.operands:
                if v not in mine and v not in consts and v not in ins:
                    ins.append(v)
        outs = [r for r in mine if r not in derived and (r in crossing or any(u != lv for u in used_later.get(r, ())))]
        outs.sort(key=order.__getitem__)
        new = Block(arg_types=[v.type for v in ins])
        vmap: dict[SSAValue, SSAValue] = dict(zip(ins, new.args))
        for op in ops:
            for v in op.operands:
                if v in consts and v not in vmap:
                    c = consts[v].clone()
                    new.add_op(c)
                    vmap[v] = c.res
            c = op.clone(value_mapper=vmap)
            new.add_op(c)
        new.add_op(func.ReturnOp(*[vmap[r] for r in outs]))
        sfn = func.FuncOp("main", func.FunctionType.from_lists([v.type for v in ins], [r.type for r in outs]),
                          Region(new))
        stage.inputs, stage.outputs = [names[v] for v in ins], [names[r] for r in outs]
        sfn.arg_attrs, sfn.res_attrs = _attrs(stage.inputs), _attrs(stage.outputs)
        stage.module = ModuleOp([sfn])
        for k, v in module.attributes.items():
            stage.module.attributes[k] = v
        stage.module.verify()
    results = [names[v] for v in ret.operands]
    return stages, host_consts, results


def _with_recomputed(ops: list[Operation], derived: dict[SSAValue, Operation]) -> list[Operation]:
    """``ops`` preceded by the recomputed ops they read (transitively), each once, in program order."""
    need: list[Operation] = []
    seen: set[int] = set()

    def visit(op):
        for v in op.operands:
            d = derived.get(v)
            if d is not None and id(d) not in seen:
                seen.add(id(d))
                visit(d)
                need.append(d)

    for op in ops:
        visit(op)
    return need + ops


def _onnx_proto(model):
    import onnx

    if isinstance(model, onnx.ModelProto):
        out = onnx.ModelProto()
        out.CopyFrom(model)
        return out
    return onnx.load(str(model))


class DataParallelTrainer:
    """A data-parallel training step on the ranks of ``comm`` (an mpi4py communicator; default
    ``MPI.COMM_WORLD``). ``step`` takes the **global** batch (the same on every rank) and trains on
    the rank's shard of it; parameters, states and running statistics as :class:`Trainer`'s (float32
    numpy arrays by initializer name, the same bits on every rank after each step).

    ``model``: an ONNX path or ``ModelProto`` whose inputs and output have a fixed leading batch
    dimension; ``segment_bytes``: the allreduce segment size (bytes); ``cluster``: the link model's
    cluster (``cann/hw/clusters``); ``gradients``: keep the last step's summed gradients in
    :attr:`gradients`; the other options as :class:`Trainer`'s (``compile_options`` to :func:`cann.compile`).
    After :meth:`step`, :attr:`cycles` holds its stages' simulated cycles, :attr:`comm_seconds` and
    :attr:`comm_bytes` its allreduces' link time and bytes, :meth:`step_cycles` their total, and
    :attr:`memory` the bytes of model states the rank held (``weights``, ``gradients``: the summed
    gradients, ``optimizer``: the states; the numpy arrays kept, as :class:`cann.training.zero.ShardedTrainer`'s).
    ``split_strategy`` (module docstring; ``link_model``: ``ring`` or ``hierarchical``,
    :class:`cann.training.step_sim.CommModel`): :attr:`segments` holds the plan (parameter names per
    segment, backward order) and :attr:`step_result` its simulated step (seconds).

    Raises:
        CannError: a batch whose leading axis does not divide by the number of ranks, or not fixed.
    """

    def __init__(self, model, *, loss: str = "softmax_cross_entropy", optimizer: Momentum | Adam | None = None,
                 comm=None, segment_bytes: int = SEGMENT_BYTES,
                 cluster: str | None = None, gradients: bool = False, split_strategy=None,
                 link_model: str = "ring", **compile_options):
        import cann
        from cann.compiler import import_model

        if comm is None:
            from mpi4py import MPI

            comm = MPI.COMM_WORLD
        self.comm, self.ranks, self.rank = comm, comm.Get_size(), comm.Get_rank()
        self.segment_bytes, self.cluster = segment_bytes, cluster
        self._comm_model = CommModel(self.ranks, link_model, cluster)  # the link time of each allreduce
        self.soc = compile_options.get("soc_version")
        if isinstance(model, ModuleOp):
            raise CannError("model", "data parallelism needs an ONNX model (its batch is re-shaped per shard)")
        proto = _onnx_proto(model)
        self.global_batch = {}
        for vi in proto.graph.input:
            dims = vi.type.tensor_type.shape.dim
            if vi.name in {i.name for i in proto.graph.initializer}:
                continue
            if not dims or not dims[0].dim_value:
                raise CannError(f"input '{vi.name}'", "needs a fixed batch (leading) dimension for data parallelism")
            n = dims[0].dim_value
            if n % self.ranks:
                raise CannError(f"input '{vi.name}'", f"batch {n} does not divide by {self.ranks} ranks")
            self.global_batch[vi.name] = n
        for vi in proto.graph.input:
            if vi.name in self.global_batch:
                vi.type.tensor_type.shape.dim[0].dim_value //= self.ranks
        for vi in proto.graph.output:  # batch-leading outputs (the target has their shape)
            dims = vi.type.tensor_type.shape.dim
            if dims and dims[0].dim_value:
                dims[0].dim_value //= self.ranks
        del proto.graph.value_info[:]
        module = import_model(proto)
        if self._with_update:
            optimizer = optimizer or Momentum()
        self.program: TrainingProgram = build(module, loss=loss, optimizer=optimizer,
                                              gradients=gradients, ranks=self.ranks)
        compile_options.setdefault("precision_mode", "must_keep_origin_dtype")
        self.segments: list[list[str]] | None = None
        self.step_result = None
        if split_strategy is not None:
            self._plan(proto, loss, split_strategy, link_model, compile_options)
        self.stages, self.host_consts, self.results = split_program(self.program.module, self._recomputed())
        self.models = [cann.compile(s.module, **compile_options) if s.module is not None else None
                       for s in self.stages]
        p = self.program
        self.params = {k: v.copy() for k, v in p.params.items()}
        self.states = {n: np.zeros_like(self.params[n.rsplit(".", 1)[0]]) for n in p.state_names()}
        self.buffers = {k: v.copy() for k, v in p.buffers.items()}
        self.updates = 0
        self.gradients: dict[str, np.ndarray] = {}
        self.cycles = self.comm_seconds = 0.0
        self.comm_bytes = 0
        self.memory: dict[str, int] = {}

    #: build the program with its optimizer update (a subclass running its own update sets False)
    _with_update = True

    def _recomputed(self) -> list[str]:
        """Inputs whose derived values each stage recomputes (:func:`split_program`'s ``recompute``)."""
        return []

    def _plan(self, proto, loss, strategy, link_model, compile_options) -> None:
        """The gradient segments of ``strategy`` for this shard's simulated step profile."""
        from cann.training import grad_split
        from cann.training.grad_profile import time_program, to_profile, update_seconds
        from cann.training.step_sim import simulate

        spec = grad_split.parse(strategy) if isinstance(strategy, str) else strategy
        comm = self._comm_model
        planned = None
        if self.rank == 0:  # (deterministic on every rank; rank 0 plans, the others receive its plan)
            timing = time_program(proto, loss=loss, params=list(self.program.params), **compile_options)
            count = sum(int(v.size) for v in self.program.params.values())
            profile = to_profile(timing, update_seconds(count, soc_version=self.soc))
            plan = grad_split.plan(spec, profile, comm)
            planned = (profile, simulate(profile, plan, comm), [[profile.names[i] for i in seg] for seg in plan])
        self.profile, self.step_result, self.segments = self.comm.bcast(planned, root=0)

    def _allreduce_segments(self, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Sum the gradients ``arrays`` (by parameter) over ranks, one Iallreduce per planned segment."""
        out: dict[str, np.ndarray] = {}
        reqs, bufs = [], []
        from mpi4py import MPI

        for seg in self.segments:
            flat = np.concatenate([arrays[n].astype(np.float32).reshape(-1) for n in seg])
            res = np.empty_like(flat)
            reqs.append(self.comm.Iallreduce([flat, MPI.FLOAT], [res, MPI.FLOAT], MPI.SUM))
            bufs.append((seg, flat, res))
            self.comm_bytes += flat.nbytes
            self.comm_seconds += self._comm_model.allreduce(flat.nbytes)
        MPI.Request.Waitall(reqs)
        for seg, _, res in bufs:
            lo = 0
            for n in seg:
                a = arrays[n]
                out[n] = res[lo:lo + a.size].reshape(a.shape)
                lo += a.size
        return out

    def _allreduce(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        """Sum ``arrays`` over ranks: one flat float32 buffer, Iallreduce per segment, then wait for all."""
        from mpi4py import MPI

        flat = np.concatenate([a.astype(np.float32).reshape(-1) for a in arrays])
        out = np.empty_like(flat)
        seg = max(1, self.segment_bytes // 4)
        reqs = []
        for lo in range(0, flat.size, seg):
            reqs.append(self.comm.Iallreduce([flat[lo:lo + seg], MPI.FLOAT], [out[lo:lo + seg], MPI.FLOAT], MPI.SUM))
            n = min(seg, flat.size - lo) * 4
            self.comm_bytes += n
            self.comm_seconds += self._comm_model.allreduce(n)
        MPI.Request.Waitall(reqs)
        parts, lo = [], 0
        for a in arrays:
            parts.append(out[lo:lo + a.size].reshape(a.shape))
            lo += a.size
        return parts

    def _shard(self, inputs: dict[str, np.ndarray], target: np.ndarray) -> dict[str, np.ndarray]:
        """The host constants plus this rank's slice of the global batch ``inputs`` and ``target``.

        Raises:
            CannError: a missing model input, or an input whose batch is not the program's.
        """
        p = self.program
        missing = [n for n in p.inputs if n not in inputs]
        if missing:
            raise CannError("inputs", f"no value for model input(s): {', '.join(missing)}")
        r, k = self.rank, self.ranks
        vals: dict[str, np.ndarray] = dict(self.host_consts)
        for n in p.inputs:
            a = np.asarray(inputs[n])
            if a.shape[0] != self.global_batch[n]:
                raise CannError(f"input '{n}'", f"batch {a.shape[0]}, the program's is {self.global_batch[n]}")
            m = a.shape[0] // k
            vals[n] = np.ascontiguousarray(a[r * m:(r + 1) * m])
        t = np.asarray(target, np.float32)
        m = t.shape[0] // k
        vals["target"] = np.ascontiguousarray(t[r * m:(r + 1) * m])
        return vals

    def step(self, inputs: dict[str, np.ndarray], target: np.ndarray) -> float:
        """One step on the global batch ``inputs``/``target``; returns the global loss before the update."""
        p = self.program
        vals = self._shard(inputs, target)
        vals.update(self.params)
        vals.update({n: np.full((1,), v, np.float32) for n, v in p.optimizer.scalars(self.updates).items()})
        vals.update(self.states)
        vals.update(self.buffers)
        self.cycles = self.comm_seconds = 0.0
        self.comm_bytes = 0
        for stage, model in zip(self.stages, self.models):
            if model is not None:
                out = model.run({n: vals[n] for n in stage.inputs})
                self.cycles += model.last_run.cycles
                vals.update(out)
            if stage.sums:
                sums = stage.sums
                grads = [i for i, k in enumerate(stage.kinds) if k == "grad"]
                if self.segments is not None and grads:
                    if len(grads) != len(p.params):  # (build makes one grad sum per parameter, in order)
                        raise CannError("split_program", f"{len(grads)} gradient sums for {len(p.params)} parameters")
                    by_param = dict(zip(p.params, (sums[i] for i in grads)))
                    summed = self._allreduce_segments({n: vals[a] for n, (a, _) in by_param.items()})
                    vals.update({res: summed[n] for n, (_, res) in by_param.items()})
                    sums = [s for i, s in enumerate(sums) if i not in set(grads)]
                if sums:
                    summed = self._allreduce([vals[a] for a, _ in sums])
                    vals.update({res: v for (_, res), v in zip(sums, summed)})
                if "grad" in stage.kinds:
                    self.memory = {"weights": sum(a.nbytes for a in self.params.values()),
                                   "gradients": sum(vals[res].nbytes for (_, res), kd in zip(stage.sums, stage.kinds)
                                                    if kd == "grad"),
                                   "optimizer": sum(a.nbytes for a in self.states.values())}
        out = dict(zip(self.results, (vals[n] for n in self.results)))
        named = dict(zip(p.outputs, (out[n] for n in self.results)))
        for d in (self.params, self.states, self.buffers):
            for n in d:
                d[n] = named[n]
        self.gradients = {n: named[n + ".grad"] for n in self.params if n + ".grad" in named}
        self.updates += 1
        from mpi4py import MPI

        loss = np.empty(1, np.float32)
        self.comm.Allreduce([named["loss"].reshape(-1).astype(np.float32), MPI.FLOAT], [loss, MPI.FLOAT], MPI.SUM)
        return float(loss[0])  # (reported, not part of the step's time)

    def step_cycles(self) -> float:
        """The last step's simulated time in core cycles: the stages' cycles plus the allreduces' link time."""
        from cann.hw.config import load_soc
        from cann.options import DEFAULT_SOC

        return self.cycles + self.comm_seconds * load_soc(self.soc or DEFAULT_SOC).clock_mhz * 1e6
