"""Sharded data-parallel training on MPI (issue 16 item 5): ZeRO stages 1-3 (Rajbhandari et al. 2020).

    mpiexec -n 4 cann-train model.onnx --data batches.npz --data-parallel --zero 2 --report-memory

The shard's program is :class:`~cann.training.data_parallel.DataParallelTrainer`'s without the
optimizer (``build(..., optimizer=None, ranks=P)``): its stages end with the local gradients, whose
cross-rank sums this runner does itself; the optimizer update is a separate compiled program over
one rank's **shard vector**.

**Partition** (per parameter, flat, padded): parameter ``i`` of ``n_i`` elements is flattened (C
order) and padded with zeros to ``P c_i`` elements, ``c_i = ceil(n_i / P)``; rank ``r`` owns elements
``[r c_i, (r+1) c_i)``. A rank's shard vector is the concatenation of its slices of every parameter
in program order (``C = sum c_i`` float32 elements, offsets ``o_i``); the padding is zeros and stays
zero under Momentum and Adam (zero gradient, zero states). The collectives see the ``(P, C)`` matrix
whose row ``r`` is rank ``r``'s shard vector.

* stage 1: the gradients are summed with the segmented allreduce (as stage 0), each rank updates its
  shard (optimizer states: ``C`` elements per state), then an all-gather rebuilds the full weights;
* stage 2: the local gradients are **reduce-scattered** (``MPI.Ireduce_scatter_block`` per segment of
  the ``(P, L)`` matrix's columns) as soon as a stage of the backward pass has completed them (and
  no later stage reads them), then dropped: each rank keeps only its ``C`` summed elements; update;
  all-gather;
* stage 3: each rank stores only its weight shard; before each stage of the split program (one per
  SyncBatchNorm cut: the forward and the backward pass of a layer run in different stages) the full
  weights that stage reads are all-gathered, and freed after it.

Segments: a collective over a ``(P, L)`` matrix runs one non-blocking call per column range of at
most ``segment_bytes`` of the whole matrix (as the allreduce's segments of the gradient vector),
then waits for all. Simulated time per segment of ``n`` bytes (the whole matrix's): ring
reduce-scatter and ring all-gather ``(p-1) alpha + (p-1)/p n beta`` each (:func:`ring_seconds`).

**Memory** (:attr:`ShardedTrainer.memory`): bytes of the numpy arrays the runner holds per rank,
ZeRO's *model states* -- weights (full arrays, or the shard vector), gradients (the summed gradients
from the reduce to the update: full, or the shard vector) and optimizer states (the shard vectors)
-- and, apart, the largest *temporary* bytes at once (local gradients before the reduce, collective
buffers, a stage's gathered weights, the update's outputs), ZeRO's residual buffers.
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType, f32
from xdsl.ir import Block, Region

from cann.errors import CannError
from cann.training.builder import GraphBuilder
from cann.training.data_parallel import SEGMENT_BYTES, DataParallelTrainer, _attrs
from cann.training.program import Adam, Momentum, _update
from cann.training.step_sim import CommModel


def ring_seconds(kind: str, nbytes: int, ranks: int, cluster: str | None = None) -> float:
    """A ring collective over ``ranks`` devices ``0..ranks-1`` of ``cluster`` moving an ``nbytes``
    message (the whole vector: reduce-scatter's input, all-gather's output), in seconds:
    ``allreduce`` ``2(p-1) alpha + 2(p-1)/p n beta``; ``reduce_scatter`` and ``allgather``
    ``(p-1) alpha + (p-1)/p n beta``; on the ring's slowest link (every step waits for it).

    Raises:
        CannError: an unknown kind.
    """
    if kind not in ("allreduce", "reduce_scatter", "allgather"):
        raise CannError("collective", f"unknown kind '{kind}' (known: allreduce, reduce_scatter, allgather)")
    allreduce = CommModel(ranks, "ring", cluster).allreduce(nbytes)
    return allreduce if kind == "allreduce" else allreduce / 2


def update_program(optimizer: Momentum | Adam, size: int, attributes=None) -> ModuleOp:
    """The optimizer update over one shard vector of ``size`` float32 elements: inputs ``x``, ``g``,
    the step's scalars (``[1]``), the states; outputs ``x`` and the states (the same formulas as the
    unsharded program's :func:`cann.training.program._update`, element by element)."""
    t = TensorType(f32, [size])
    scalars = ["lr", "grad_coef"] if isinstance(optimizer, Momentum) else ["lr"]
    names = ["x", "g", *scalars, *optimizer.states]
    types = [t, t, *[TensorType(f32, [1])] * len(scalars), *[t] * len(optimizer.states)]
    block = Block(arg_types=types)
    x, g = block.args[:2]
    sargs = dict(zip(scalars, block.args[2:2 + len(scalars)]))
    states = list(block.args[2 + len(scalars):])
    new_p, new_s = _update(GraphBuilder(block, None, "update"), optimizer, [x], [g], sargs, states)
    block.add_op(func.ReturnOp(*new_p, *new_s))
    fn = func.FuncOp("main", func.FunctionType.from_lists(types, [t] * (1 + len(states))), Region(block))
    fn.arg_attrs, fn.res_attrs = _attrs(names), _attrs(["x", *optimizer.states])
    module = ModuleOp([fn])
    for k, v in (attributes or {}).items():
        module.attributes[k] = v
    module.verify()
    return module


def _bytes(*arrays) -> int:
    return sum(a.nbytes for a in arrays)


class ShardedTrainer(DataParallelTrainer):
    """Data-parallel training with ZeRO ``zero`` = 1, 2 or 3 sharding (module docstring) on the ranks
    of ``comm``; the same interface as :class:`DataParallelTrainer` (``step`` takes the global batch,
    :attr:`params` and :attr:`buffers` hold the full weights and running statistics by name after
    each step on every rank -- for stage 3 gathered on request: :attr:`params` is a property).

    :attr:`shard` holds the rank's weight shard vector, :attr:`states` its optimizer-state shard
    vectors by state name (``velocity``; ``momentum1``, ``momentum2``); :attr:`memory` the last
    step's per-rank bytes (``weights``, ``gradients``, ``optimizer``: model states; ``temporary``:
    the peak of the rest); :attr:`comm_bytes` / :attr:`comm_seconds` all collectives' bytes and link time.

    Raises:
        CannError: ``zero`` not 1, 2 or 3; ``gradients=True`` (the summed gradients are sharded);
            the errors of :class:`DataParallelTrainer`.
    """

    def __init__(self, model, *, zero: int, loss: str = "softmax_cross_entropy",
                 optimizer: Momentum | Adam | None = None, comm=None, segment_bytes: int = SEGMENT_BYTES,
                 cluster: str | None = None, gradients: bool = False, **compile_options):
        import cann

        if zero not in (1, 2, 3):
            raise CannError("--zero", f"sharding stage must be 1, 2 or 3 (0: DataParallelTrainer), got {zero!r}")
        if gradients:
            raise CannError("gradients", "sharded training keeps only each rank's slice of the summed gradients")
        self.zero = zero  # (before DataParallelTrainer.__init__: its split asks _recomputed)
        self.optimizer = optimizer or Momentum()
        # the program without the update: its results are the loss, the summed gradients, the running stats
        super().__init__(model, loss=loss, optimizer=None, comm=comm, segment_bytes=segment_bytes,
                         cluster=cluster, **compile_options)
        p = self.program
        p.optimizer = self.optimizer  # (the step's scalars; the graph has no update)
        index = dict(zip(p.outputs, self.results))
        sums = {res: x for s in self.stages for x, res in s.sums}
        self.grad_local = {n: sums.get(index[n + ".grad"], index[n + ".grad"]) for n in p.params}
        self.grad_sums = {index[n + ".grad"] for n in p.params}
        self.buffer_names = {n: index[n] for n in p.buffers}
        # the last stage reading each local gradient (-1: none; a stage's own outputs it does not read)
        self._last_read = {n: max([i for i, st in enumerate(self.stages) if self.grad_local[n] in st.inputs],
                                  default=-1) for n in p.params}
        self.loss_name = index["loss"]
        k = self.ranks
        self.names = list(p.params)
        self.shapes = {n: v.shape for n, v in p.params.items()}
        self.cols = {n: -(-v.size // k) for n, v in p.params.items()}
        self.offsets, off = {}, 0
        for n in self.names:
            self.offsets[n] = off
            off += self.cols[n]
        self.size = off
        compile_options.setdefault("precision_mode", "must_keep_origin_dtype")
        self.update_model = cann.compile(update_program(self.optimizer, self.size, p.module.attributes),
                                         **compile_options)
        self._full = {n: v.copy() for n, v in p.params.items()} if zero < 3 else None
        self.shard = self._row(p.params) if zero == 3 else None
        self.states = {s: np.zeros(self.size, np.float32) for s in self.optimizer.states}
        self.memory: dict[str, int] = {}

    # -- layout ------------------------------------------------------------------------------
    def _matrix(self, arrays: dict[str, np.ndarray], names=None) -> np.ndarray:
        """The ``(P, L)`` matrix of ``arrays`` (row r: every array's slice r, padded)."""
        names = self.names if names is None else names
        out = np.zeros((self.ranks, sum(self.cols[n] for n in names)), np.float32)
        lo = 0
        for n in names:
            c = self.cols[n]
            flat = np.zeros(self.ranks * c, np.float32)
            flat[:arrays[n].size] = np.asarray(arrays[n], np.float32).reshape(-1)
            out[:, lo:lo + c] = flat.reshape(self.ranks, c)
            lo += c
        return out

    def _row(self, arrays: dict[str, np.ndarray]) -> np.ndarray:
        """This rank's row of :meth:`_matrix` (its shard vector) without building the others."""
        out = np.zeros(self.size, np.float32)
        for n in self.names:
            flat = np.asarray(arrays[n], np.float32).reshape(-1)
            c, o = self.cols[n], self.offsets[n]
            piece = flat[self.rank * c:(self.rank + 1) * c]
            out[o:o + piece.size] = piece
        return out

    def _unpack(self, matrix: np.ndarray, names) -> dict[str, np.ndarray]:
        out, lo = {}, 0
        for n in names:
            c = self.cols[n]
            size = math.prod(self.shapes[n])
            flat = np.ascontiguousarray(matrix[:, lo:lo + c]).reshape(-1)
            out[n] = (flat[:size].copy() if flat.size > size else flat).reshape(self.shapes[n])  # (no padding kept)
            lo += c
        return out

    def _segments(self, width: int):
        step = max(1, self.segment_bytes // (4 * self.ranks))
        return [(lo, min(width, lo + step)) for lo in range(0, width, step)]

    def _charge(self, kind: str, nbytes: int) -> None:
        self.comm_bytes += nbytes
        self.comm_seconds += ring_seconds(kind, nbytes, self.ranks, self.cluster)

    # -- collectives --------------------------------------------------------------------------
    def _reduce_scatter(self, matrix: np.ndarray) -> np.ndarray:
        """Row ``rank`` of the sum over ranks of ``matrix`` (P, L): Ireduce_scatter_block per segment."""
        from mpi4py import MPI

        out = np.empty(matrix.shape[1], np.float32)
        reqs, sends = [], []
        for lo, hi in self._segments(matrix.shape[1]):
            send = np.ascontiguousarray(matrix[:, lo:hi])
            sends.append(send)
            reqs.append(self.comm.Ireduce_scatter_block([send, MPI.FLOAT], [out[lo:hi], MPI.FLOAT], MPI.SUM))
            self._charge("reduce_scatter", send.nbytes)
        self._temp(matrix, out, *sends)
        MPI.Request.Waitall(reqs)
        return out

    def _allgather(self, vector: np.ndarray) -> np.ndarray:
        """The ``(P, L)`` matrix whose row r is rank r's ``vector``: Iallgather per segment."""
        from mpi4py import MPI

        parts, reqs = [], []
        for lo, hi in self._segments(vector.size):
            recv = np.empty((self.ranks, hi - lo), np.float32)
            parts.append(recv)
            reqs.append(self.comm.Iallgather([np.ascontiguousarray(vector[lo:hi]), MPI.FLOAT], [recv, MPI.FLOAT]))
            self._charge("allgather", recv.nbytes)
        MPI.Request.Waitall(reqs)
        out = np.concatenate(parts, axis=1) if parts else np.empty((self.ranks, 0), np.float32)
        self._temp(vector, out, *parts)
        return out

    def _reduce_into(self, grad: np.ndarray, names: list[str], vals: dict[str, np.ndarray]) -> None:
        """Reduce-scatter the local gradients of ``names`` into their places of the shard vector
        ``grad``; their local arrays leave ``vals``."""
        local = {n: vals.pop(self.grad_local[n]) for n in names}
        row = self._reduce_scatter(self._matrix(local, names))
        self._live_temp -= _bytes(*local.values())
        lo = 0
        for n in names:
            c, o = self.cols[n], self.offsets[n]
            grad[o:o + c] = row[lo:lo + c]
            lo += c

    def _gather(self, names: list[str]) -> dict[str, np.ndarray]:
        """Stage 3: the full weights ``names`` from every rank's shard."""
        pieces = [self.shard[self.offsets[n]:self.offsets[n] + self.cols[n]] for n in names]
        return self._unpack(self._allgather(np.concatenate(pieces)), names) if names else {}

    # -- memory -------------------------------------------------------------------------------
    def _temp(self, *arrays) -> None:
        self._peak_temp = max(self._peak_temp, self._live_temp + _bytes(*arrays))

    def _model_states(self, grads: int) -> None:
        """Note the model states held now (``grads``: bytes of summed gradients held)."""
        weights = _bytes(*self._full.values()) if self.zero < 3 else self.shard.nbytes
        cur = {"weights": weights, "gradients": grads, "optimizer": _bytes(*self.states.values())}
        for k, v in cur.items():
            self.memory[k] = max(self.memory.get(k, 0), v)

    # -- the step -----------------------------------------------------------------------------
    _with_update = False

    def _recomputed(self) -> list[str]:
        # stage 3: a stage reads the gathered weights themselves, never a value derived from them in
        # an earlier stage (a forward stage's transposed weight would be a full copy kept until backward)
        return list(self.program.params) if self.zero == 3 else []

    @property
    def params(self) -> dict[str, np.ndarray]:
        """The full weights by name; stage 3 all-gathers them (a collective: call it on every rank)."""
        if self.zero < 3:
            return self._full
        return self._gather(self.names)

    @params.setter
    def params(self, value) -> None:
        if hasattr(self, "shapes"):  # (DataParallelTrainer.__init__ assigns the initial weights: taken from them)
            raise CannError("params", "a ShardedTrainer's weights are its shards; they are not assigned")

    def step(self, inputs: dict[str, np.ndarray], target: np.ndarray) -> float:
        """One step on the global batch ``inputs``/``target`` (as :meth:`DataParallelTrainer.step`);
        returns the global loss before the update."""
        from mpi4py import MPI

        p = self.program
        vals = self._shard(inputs, target)
        vals.update(self.buffers)
        if self._full is not None:
            vals.update(self._full)
        self.cycles = self.comm_seconds = 0.0
        self.comm_bytes = 0
        self.memory, self._peak_temp, self._live_temp = {}, 0, 0
        self._model_states(0)
        grad = np.zeros(self.size, np.float32) if self.zero >= 2 else None
        pending = list(self.names)
        for i, (stage, model) in enumerate(zip(self.stages, self.models)):
            if model is not None:
                feed = {n: vals[n] for n in stage.inputs if n in vals}
                if self.zero == 3:
                    gathered = self._gather([n for n in self.names if n in stage.inputs])
                    feed.update(gathered)
                    self._temp(*gathered.values())
                out = model.run(feed)
                self.cycles += model.last_run.cycles
                vals.update(out)
                self._live_temp = _bytes(*[vals[g] for g in self.grad_local.values() if g in vals])
                self._temp()
            if self.zero >= 2:  # reduce-scatter the gradients this stage completed, then drop them
                ready = [n for n in pending if self.grad_local[n] in vals and self._last_read[n] <= i]
                if ready:
                    self._reduce_into(grad, ready, vals)
                    pending = [n for n in pending if n not in ready]
                    self._model_states(grad.nbytes)
            stats = [(a, res) for a, res in stage.sums if res not in self.grad_sums]
            if stats:
                vals.update({res: v for (_, res), v in zip(stats, self._allreduce([vals[a] for a, _ in stats]))})
        if self.zero == 1:
            summed = dict(zip(self.names, self._allreduce([vals[self.grad_local[n]] for n in self.names])))
            for n in self.names:
                vals.pop(self.grad_local[n], None)
            self._temp(*summed.values())
            self._model_states(_bytes(*summed.values()))
            grad = self._row(summed)
            del summed
        elif pending:
            self._reduce_into(grad, pending, vals)
            self._model_states(grad.nbytes)
        self._live_temp = 0
        x = self.shard if self.zero == 3 else self._row(self._full)
        feed = {"x": x, "g": grad}
        feed.update({n: np.full((1,), v, np.float32) for n, v in self.optimizer.scalars(self.updates).items()})
        feed.update(self.states)
        out = self.update_model.run(feed)
        self.cycles += self.update_model.last_run.cycles
        self._temp(x, grad, *out.values())
        self.states = {s: out[s] for s in self.optimizer.states}
        if self.zero == 3:
            self.shard = out["x"]
        else:
            self._full = None  # the old full weights are dead: the all-gather rebuilds them
            self._full = self._unpack(self._allgather(out["x"]), self.names)
        self._model_states(0)
        self.memory["temporary"] = self._peak_temp
        for n, res in self.buffer_names.items():
            self.buffers[n] = vals[res]
        self.updates += 1
        loss = np.empty(1, np.float32)
        self.comm.Allreduce([vals[self.loss_name].reshape(-1).astype(np.float32), MPI.FLOAT], [loss, MPI.FLOAT],
                            MPI.SUM)
        return float(loss[0])

    def expected_memory(self, optimizer: str) -> dict[str, int]:
        """The model-state bytes ZeRO's byte model predicts for this model, rank count and stage in
        fp32 (:func:`cann.training.memplan.plan` with ``precision="fp32"``), with this runner's
        padding: a sharded state holds ``C`` elements per rank (``C P`` >= the parameters)."""
        from cann.training.memplan import BYTES_PER_PARAM

        w, g, k = BYTES_PER_PARAM[("fp32", optimizer)]
        full = sum(math.prod(s) for s in self.shapes.values())
        pick = lambda b, s: b * self.size if self.zero >= s else b * full  # noqa: E731
        return {"weights": pick(w, 3), "gradients": pick(g, 2), "optimizer": pick(k, 1)}
