"""Calibration for mixed precision: which ONNX nodes float16 cannot hold.

:func:`calibrate_keep_dtype` runs the float32 model on onnxruntime (the reference) with the user's
inputs, or seeded random ones, and lists the nodes one of whose float inputs or outputs has a
magnitude above ``margin`` x 65504 (float16's largest finite value): those overflow, or come close
enough that the next operation would. The list is what ``--precision_mode allow_mix_precision``
keeps in float32 (with the rule-chosen op kinds, :data:`cann.passes.keep_dtype.RULE_OPS`) and what
``cann-compile --calibrate-keep-dtype OUT`` writes as an ATC ``--keep_dtype`` file.
"""

from __future__ import annotations

import os

import numpy as np

from cann.errors import CannError

FP16_MAX = 65504.0
#: a value is too close to float16's range above this fraction of it (2^-4: one Conv or MatMul of
#: modest fan-in, or a squaring, multiplies magnitudes by far more)
DEFAULT_MARGIN = 1.0 / 16


def node_name(node, index: int) -> str:
    """An ONNX node's name as the importer names it (``<op_type>_<index>`` when unnamed)."""
    return node.name or f"{node.op_type}_{index}"


def op_names(module) -> set[str]:
    """The ONNX node names the ops of a graph-dialect module carry (their locations)."""
    descs = (getattr(op.location, "desc", None) for op in module.walk())
    return {d.data for d in descs if d is not None}


def calibration_inputs(model, seed: int = 0, shapes: dict[str, tuple[int, ...]] | None = None) -> dict[str, np.ndarray]:
    """Seeded uniform [0, 1) values for the float inputs of ``model`` (a ``ModelProto``); integer
    inputs are zeros. ``shapes`` (``--input_shape``) overrides the model's; dynamic dimensions are 1."""
    from onnx import helper

    rng = np.random.default_rng(seed)
    inits = {i.name for i in model.graph.initializer}
    feeds = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 1 for d in tt.shape.dim]
        shape = list((shapes or {}).get(vi.name, shape))
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type))
        feeds[vi.name] = rng.random(shape, dtype=np.float32).astype(dtype) if dtype.kind == "f" else np.zeros(shape, dtype)
    return feeds


def calibrate_keep_dtype(model: str | os.PathLike, inputs: dict[str, np.ndarray] | None = None, *,
                         margin: float = DEFAULT_MARGIN, out: str | os.PathLike | None = None,
                         seed: int = 0, graph_names: set[str] | None = None) -> list[str]:
    """ONNX nodes of ``model`` (a path or ``ModelProto``) whose float tensors leave float16's range.

    ``inputs``: input name -> array (default :func:`calibration_inputs` with ``seed``); ``margin``:
    the fraction of 65504 above which a magnitude counts (default 1/16). Only nodes that compute at
    run time are listed (the importer's constant folds are not; ``graph_names``: the names of those
    nodes, default: import the model to find them). ``out``: also write the list as an
    ATC keep_dtype file (one node name per line) for ``--keep_dtype``.

    Returns:
        The node names in graph order.

    Raises:
        CannError: the model cannot be loaded or run by onnxruntime, ``margin`` not in (0, 1].
    """
    import onnx

    from cann.frontend.onnx import import_onnx

    if not 0 < margin <= 1:
        raise CannError("--calibrate-keep-dtype", f"margin {margin} must be in (0, 1]")
    where = os.fspath(model) if isinstance(model, (str, os.PathLike)) else "<model>"
    proto = onnx.load(os.fspath(model)) if isinstance(model, (str, os.PathLike)) else model
    if inputs is None:
        inputs = calibration_inputs(proto, seed)
    if graph_names is None:
        graph_names = op_names(import_onnx(proto))
    work = onnx.ModelProto()
    work.CopyFrom(proto)
    have = {o.name for o in work.graph.output}
    tensors = [t for n in work.graph.node for t in n.output if t and t not in have]
    work.graph.output.extend(onnx.ValueInfoProto(name=t) for t in tensors)
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    try:
        sess = ort.InferenceSession(work.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        names = [o.name for o in sess.get_outputs()]
        feed = {i.name: inputs[i.name] for i in sess.get_inputs() if i.name in inputs}
        values = dict(zip(names, sess.run(names, feed)))
    except Exception as e:  # noqa: BLE001 - onnxruntime raises its own exception types
        raise CannError(where, f"onnxruntime cannot run the model for calibration: {str(e).splitlines()[0]}") from None
    values.update({k: np.asarray(v) for k, v in inputs.items()})
    limit = margin * FP16_MAX

    def big(t: str) -> bool:
        v = values.get(t)
        return v is not None and v.dtype.kind == "f" and v.size > 0 and float(np.nanmax(np.abs(v))) > limit

    kept = []
    for i, node in enumerate(proto.graph.node):
        name = node_name(node, i)
        if name in graph_names and any(big(t) for t in list(node.input) + list(node.output) if t):
            kept.append(name)
    if out is not None:
        from cann.fileio import atomic_write_bytes

        atomic_write_bytes(out, "".join(n + "\n" for n in kept).encode())
    return kept
