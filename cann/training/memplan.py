"""Per-device memory of data-parallel training with ZeRO-like sharding (issue 16 item 5).

Model states follow ZeRO's byte model (Rajbhandari et al., SC'20, section 3.1): with Adam in mixed
precision every parameter costs 2 bytes of fp16 weights, 2 of fp16 gradients and K = 12 of
optimizer states (fp32 master weights, momentum, variance): 16 bytes. Over ``Nd`` data-parallel
ranks, stage 1 shards the optimizer states, stage 2 also the gradients, stage 3 also the weights::

    stage 0: (2 + 2 + K) P          stage 2: 2 P + (2 + K) P / Nd
    stage 1: (2 + 2) P + K P / Nd   stage 3: (2 + 2 + K) P / Nd

Activations are not sharded: each rank keeps those of its own micro-batch for the backward pass,
measured on a model file by the GM planner (:func:`activation_bytes`), optionally with activation
recomputation (square-root checkpointing, Chen et al. 2016). Sizes are reported in decimal GB
(1e9 bytes) to one decimal, as ZeRO's tables.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from cann.errors import CannError

#: bytes per parameter of (weights, gradients, optimizer states) by precision and optimizer
BYTES_PER_PARAM: dict[tuple[str, str], tuple[int, int, int]] = {
    ("mixed", "adam"): (2, 2, 12),      # fp16 w, fp16 g; fp32 master w, m, v
    ("mixed", "momentum"): (2, 2, 8),   # fp32 master w, velocity
    ("mixed", "sgd"): (2, 2, 4),        # fp32 master w
    ("fp32", "adam"): (4, 4, 8),        # m, v
    ("fp32", "momentum"): (4, 4, 4),    # velocity
    ("fp32", "sgd"): (4, 4, 0),
}
STAGES = (0, 1, 2, 3)
GB = 1e9


@dataclass(frozen=True)
class MemoryPlan:
    """Per-device bytes of one configuration (floats: sharded states need not divide evenly)."""

    stage: int
    weights: float
    gradients: float
    optimizer: float
    activations: float | None = None

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer + (self.activations or 0.0)


def plan(params: float, ranks: int, stage: int, *, optimizer: str = "adam", precision: str = "mixed",
         activations: float | None = None) -> MemoryPlan:
    """Per-device memory of ``params`` parameters trained on ``ranks`` data-parallel devices at ZeRO
    ``stage`` (0 none, 1 optimizer states, 2 + gradients, 3 + weights), in bytes.

    ``optimizer``: ``adam``, ``momentum`` or ``sgd``; ``precision``: ``mixed`` (fp16 weights and
    gradients, fp32 master copy) or ``fp32``. ``activations``: bytes per device (not sharded).

    Raises:
        CannError: params <= 0, ranks < 1, an unknown stage, optimizer or precision.
    """
    if not (isinstance(params, (int, float)) and math.isfinite(params) and params > 0):
        raise CannError("--params", f"must be a positive number of parameters, got {params!r}")
    if not isinstance(ranks, int) or ranks < 1:
        raise CannError("--ranks", f"must be an integer >= 1, got {ranks!r}")
    if stage not in STAGES:
        raise CannError("--zero", f"must be one of 0, 1, 2, 3, got {stage!r}")
    if (precision, optimizer) not in BYTES_PER_PARAM:
        what = "--optimizer" if optimizer not in {o for _, o in BYTES_PER_PARAM} else "--precision"
        raise CannError(what, f"unknown {what[2:]} {optimizer if what == '--optimizer' else precision!r}")
    w, g, k = BYTES_PER_PARAM[(precision, optimizer)]
    shard = lambda b, s: b * params / ranks if stage >= s else b * params  # noqa: E731
    return MemoryPlan(stage, shard(w, 3), shard(g, 2), shard(k, 1), activations)


def gb(nbytes: float) -> str:
    """``nbytes`` in decimal GB to one decimal: ``"31.4 GB"``."""
    return f"{nbytes / GB:.1f} GB"


def mb(nbytes: float) -> str:
    """``nbytes`` in decimal MB (1e6 bytes) to one decimal: ``"10.5 MB"``."""
    return f"{nbytes / 1e6:.1f} MB"


def format_table(params: float, ranks: int, stages=STAGES, **kw) -> list[str]:
    """The report: a header line and one row per stage (weights, gradients, optimizer states,
    activations when given, total per device), in decimal GB; in decimal MB when every total is below
    0.1 GB (a small model, which GB would show as rows of 0.0)."""
    optimizer, precision = kw.get("optimizer", "adam"), kw.get("precision", "mixed")
    plans = [plan(params, ranks, s, **kw) for s in stages]
    w, g, k = BYTES_PER_PARAM[(precision, optimizer)]
    unit, fmt = ("MB", mb) if max(p.total for p in plans) < 0.1 * GB else ("GB", gb)
    lines = [f"{params:,.0f} parameters on {ranks} data-parallel device{'s' if ranks != 1 else ''}, {optimizer} "
             f"in {precision} precision ({w} + {g} + {k} bytes per parameter); per device, decimal {unit}:"]
    cols = ["stage", "weights", "gradients", "optimizer", *(["activations"] if kw.get("activations") is not None else []),
            "total"]
    rows = []
    for p in plans:
        row = [f"ZeRO-{p.stage}" if p.stage else "none", fmt(p.weights), fmt(p.gradients), fmt(p.optimizer)]
        if p.activations is not None:
            row.append(fmt(p.activations))
        rows.append(row + [fmt(p.total)])
    widths = [max(len(r[i]) for r in [cols, *rows]) for i in range(len(cols))]
    for r in [cols, *rows]:
        lines.append("  ".join(c.rjust(wd) if i else c.ljust(wd) for i, (c, wd) in enumerate(zip(r, widths))).rstrip())
    return lines


def model_parameters(model: str | os.PathLike) -> int:
    """The number of trainable parameters of an ONNX model: the elements of its floating-point
    initializers (BatchNormalization's running mean and variance excluded: statistics, not trained).

    Raises:
        CannError: the file cannot be read as ONNX.
    """
    import numpy as np
    import onnx

    if not os.path.isfile(model):  # not onnx's "[Errno 2] No such file or directory: '<the path again>'"
        raise CannError(os.fspath(model), "no such file" if not os.path.exists(model) else "is not a file")
    try:
        m = onnx.load(os.fspath(model))
    except (OSError, Exception) as e:  # noqa: BLE001 - onnx raises protobuf's DecodeError and others
        raise CannError(os.fspath(model), f"cannot read as ONNX: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
    stats = {n.input[i] for n in m.graph.node if n.op_type == "BatchNormalization" for i in (3, 4) if len(n.input) > i}
    floats = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16, onnx.TensorProto.DOUBLE)
    return int(sum(int(np.prod(t.dims)) for t in m.graph.initializer if t.data_type in floats and t.name not in stats))


def activation_bytes(model: str | os.PathLike, batch: int, *, recompute: bool = False,
                     precision_mode: str = "force_fp16") -> int:
    """Bytes of activations one device keeps for the backward pass of ``model`` at ``batch``: the GM
    tensors the cann GM planner allocates for the forward pass (every ``tile.gm_alloc`` of the
    tile-level program, 64-byte aligned; the forward pass with its fusion, so a fused kernel's
    intermediates take no GM; a model whose inputs fix the batch to ``b0`` is compiled as it is and
    its tensors scaled by ``batch / b0``). With ``recompute``: square-root checkpointing over those tensors in
    program order (segments of ceil(sqrt(n)) tensors: the segment boundaries stay, one segment at a
    time is recomputed), i.e. the boundaries' bytes plus the largest segment's.

    Raises:
        CannError: batch < 1, a model that does not compile (as :func:`cann.compiler.lower`).
    """
    from cann.codegen.gm_plan import align, nbytes
    from cann.compiler import lower
    from cann.dialects import main_function, tile

    if not isinstance(batch, int) or batch < 1:
        raise CannError("--batch", f"must be an integer >= 1, got {batch!r}")
    import onnx

    try:
        m = onnx.load(os.fspath(model), load_external_data=False)
    except Exception as e:  # noqa: BLE001 - protobuf's DecodeError and others
        raise CannError(os.fspath(model), f"cannot read as ONNX: {type(e).__name__}") from None
    inits = {t.name for t in m.graph.initializer}
    shapes, fixed = {}, set()
    for i in m.graph.input:
        if i.name in inits:
            continue
        dims = list(i.type.tensor_type.shape.dim)
        if dims and dims[0].HasField("dim_value"):
            fixed.add(dims[0].dim_value)
        else:
            shapes[i.name] = (batch, *[d.dim_value if d.HasField("dim_value") else 1 for d in dims[1:]])
    if len(fixed) > 1:
        raise CannError(os.fspath(model), f"inputs fix different batch sizes {sorted(fixed)}")
    module = lower(os.fspath(model), until="tile", input_shape=shapes or None, precision_mode=precision_mode)
    main = main_function(module, os.fspath(model))
    sizes = [align(nbytes(op.res)) for op in main.body.block.ops if isinstance(op, tile.GmAllocOp)]
    if fixed:  # a model compiled for a fixed batch b0: activations scale with the batch
        b0 = fixed.pop()
        sizes = [s * batch // b0 for s in sizes]
    if not recompute or len(sizes) < 2:
        return sum(sizes)
    k = math.isqrt(len(sizes) - 1) + 1  # ceil(sqrt(n))
    segments = [sizes[i:i + k] for i in range(0, len(sizes), k)]
    return sum(s[-1] for s in segments) + max(sum(s[:-1]) for s in segments)

