"""Per-layer accuracy comparison: msaccucmp's (and onnx-mlir's ``--verify-all-ops``) job for ``.om`` files.

``cann-run OUT.om --compare MODEL.onnx --all-layers [--csv PATH]`` runs ``OUT.om`` once, keeping
each GM tensor at the launch boundary where it was last written, converts it back to the ONNX
layout (NC1HWC0 -> NCHW, the storage dtype -> float64) and compares it with the same tensor of
onnxruntime on the same inputs (intermediate tensors are added to a copy of the model's graph
outputs). Rows come in the ONNX graph's node order (topological), one per node output, with the
columns :data:`COLUMNS`; the first row whose ``rel_l2_err`` exceeds the tolerance (or is not
finite) names the first diverging node (docs/accuracy.md).

Which buffer holds which ONNX tensor: the ``.om`` keeps only each kernel's model nodes, so
:func:`plan_layers` compiles ``MODEL.onnx`` again for the ``.om``'s SoC and precision mode (at
-O1, then -O0) while :mod:`cann.tensor_trace` records the importer's tensor -> value map and
``convert-graph-to-tile``'s value -> GM buffer map, and requires the result to launch the same
kernels on the same GM offsets as ``OUT.om`` (weights may differ: comparing an ``.om`` with an
edited copy of its model is how a wrong weight is found). Tensors without their own buffer are
listed with a status instead of errors: ``fused`` (computed inside a fused kernel whose last
tensor is the only one written to GM), ``rewritten`` (replaced by a graph pass, e.g. a
BatchNormalization folded into the Conv before it), ``constant`` (folded at compile time),
``pruned`` (not needed for the ``.om``'s outputs), ``unmapped`` (no buffer found).
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from cann.errors import CannError

#: the CSV columns (docs/accuracy.md); the three errors are empty for a row that is not compared
COLUMNS = ("node", "op", "tensor", "status", "kernel", "launch", "shape", "max_abs_err", "rel_l2_err",
           "cosine_similarity")
#: the activation formats a dump is converted from (cann.lowering.common's ND and NC1HWC0)
FORMATS = ("ND", "NC1HWC0")
C0 = 16  # NC1HWC0's channel block (cann.lowering.common.DevTensor.storage_shape)


def default_tolerance(precision_mode: str) -> float:
    """The largest rel_l2_err accepted by default: 1e-2 when float tensors are stored in float16
    (force_fp16, allow_fp32_to_fp16: fp16's 11-bit significand, errors growing over the layers),
    else 1e-4."""
    from cann.codegen.om import FP16_PRECISION_MODES

    return 1e-2 if precision_mode in FP16_PRECISION_MODES else 1e-4


def errors(y: np.ndarray, r: np.ndarray) -> tuple[float, float]:
    """(max |y - r|, ||y - r||_2 / max(||r||_2, 1e-30)) over the flattened tensors, in float64."""
    yf, rf = y.astype(np.float64).ravel(), r.astype(np.float64).ravel()
    with np.errstate(all="ignore"):  # inf - inf (an fp16 overflow against inf) is nan: reported as such
        d = yf - rf
        max_abs = float(np.max(np.abs(d))) if d.size else 0.0
        return max_abs, float(np.linalg.norm(d) / max(float(np.linalg.norm(rf)), 1e-30))


def cosine_similarity(y: np.ndarray, r: np.ndarray) -> float:
    """<y, r> / (||y|| ||r||) in float64: 1 when both are zero, 0 when one is, nan with inf/NaN."""
    yf, rf = y.astype(np.float64).ravel(), r.astype(np.float64).ravel()
    with np.errstate(all="ignore"):
        ny, nr = float(np.linalg.norm(yf)), float(np.linalg.norm(rf))
        if not (math.isfinite(ny) and math.isfinite(nr)):
            return math.nan
        if ny == 0 or nr == 0:
            return 1.0 if ny == nr else 0.0
        return float(np.dot(yf, rf) / (ny * nr))


def to_onnx_layout(raw: np.ndarray, fmt: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A dumped GM tensor (``raw``: its bytes, uint8) in ONNX's layout: ``shape`` in ``dtype``
    (the storage dtype). ``fmt``: "ND" (C order) or "NC1HWC0" (``[N][C1][H][W][C0]``, C0 = 16, the
    padding channels dropped)."""
    a = raw.view(dtype)
    if fmt == "NC1HWC0":
        n, c, h, w = shape
        c1 = -(-c // C0)
        return a.reshape(n, c1, h, w, C0).transpose(0, 1, 4, 2, 3).reshape(n, c1 * C0, h, w)[:, :c]
    return a.reshape(shape)


@dataclass
class Region:
    """A GM tensor of the run: byte ``offset`` and ``nbytes`` in the arena, its ``fmt``, logical
    ``shape`` and storage ``dtype``; ``launches``: the launches with an argument overlapping it.
    After the run: ``data`` (its bytes after the last launch that changed them) and ``producer``
    (that launch; None when no launch changed them: the bytes at the end of the run)."""

    offset: int
    nbytes: int
    fmt: str
    shape: tuple[int, ...]
    dtype: np.dtype
    launches: tuple[int, ...] = ()
    data: np.ndarray | None = None
    producer: int | None = None


@dataclass
class Layer:
    """One row: an output ``tensor`` of ONNX ``node`` (``op`` its type); ``status`` (module doc;
    a compared row is ``ok`` or ``diverged``); ``region``: the GM tensor it is compared from, or
    for a ``fused`` row the fused kernel's output (which names the kernel)."""

    node: str
    op: str
    tensor: str
    status: str
    region: Region | None = None
    kernel: str = ""
    launch: int | None = None
    shape: tuple[int, ...] = ()
    max_abs_err: float | None = None
    rel_l2_err: float | None = None
    cosine_similarity: float | None = None

    def row(self) -> dict[str, object]:
        """The CSV row (:data:`COLUMNS`); errors as Python's shortest round-trip float text."""
        def num(v):
            return "" if v is None else repr(v)
        return {"node": self.node, "op": self.op, "tensor": self.tensor, "status": self.status,
                "kernel": self.kernel, "launch": "" if self.launch is None else self.launch,
                "shape": "x".join(map(str, self.shape)), "max_abs_err": num(self.max_abs_err),
                "rel_l2_err": num(self.rel_l2_err), "cosine_similarity": num(self.cosine_similarity)}


@dataclass
class LayerPlan:
    """The layers of an ``.om`` mapped to ``MODEL.onnx``'s tensors (:func:`plan_layers`)."""

    layers: list[Layer]
    kernel_names: list[str]  # per launch
    kernel_nodes: list[tuple[str, ...]]  # per launch: the model nodes its kernel computes
    regions: list[Region] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # e.g. that the .om's weights differ from the model's

    def tensors(self) -> list[str]:
        """The ONNX tensors compared (their reference values are needed), in row order."""
        return list(dict.fromkeys(la.tensor for la in self.layers if la.status == "compare"))

    def run(self, model, inputs: dict[str, np.ndarray], **kw) -> dict[str, np.ndarray]:
        """``model.run(inputs, **kw)`` keeping each region's bytes at its last changing launch."""
        by_launch: dict[int, list[Region]] = {}
        for r in self.regions:
            r.data, r.producer = np.zeros(r.nbytes, np.uint8), None  # the arena starts zeroed
            for li in r.launches:
                by_launch.setdefault(li, []).append(r)
        arena: list[np.ndarray] = []

        def dump(li: int, gm: np.ndarray) -> None:
            if not arena:
                arena.append(gm)
            for r in by_launch.get(li, ()):
                cur = gm[r.offset:r.offset + r.nbytes]
                if not np.array_equal(cur, r.data):
                    r.data, r.producer = cur.copy(), li

        outputs = model.run(inputs, on_launch=dump, **kw)
        for r in self.regions:
            if r.producer is None and arena:  # never written by a launch: its bytes at the end
                r.data = arena[0][r.offset:r.offset + r.nbytes].copy()
        for la in self.layers:  # the kernel: the last one changing the bytes, else one computing the node
            if la.region is not None:
                li = la.region.producer
                if li is None:
                    li = next((i for i in la.region.launches if la.node in self.kernel_nodes[i]), None)
                la.launch, la.kernel = li, (self.kernel_names[li] if li is not None else "")
        return outputs

    def compare(self, refs: dict[str, np.ndarray], tolerance: float) -> list[Layer]:
        """Fill the errors of the compared rows against ``refs`` (tensor name -> onnxruntime's
        value); a row is ``diverged`` when ``rel_l2_err`` is above ``tolerance`` or not finite.
        Returns the rows."""
        for la in self.layers:
            if la.status != "compare":
                continue
            r = la.region
            y = to_onnx_layout(r.data, r.fmt, r.shape, r.dtype)
            ref = np.asarray(refs[la.tensor])
            la.shape = tuple(ref.shape)
            if y.shape != ref.shape:
                la.status = "shape_mismatch"
                continue
            la.max_abs_err, la.rel_l2_err = errors(y, ref)
            la.cosine_similarity = cosine_similarity(y, ref)
            la.status = "ok" if la.rel_l2_err <= tolerance else "diverged"  # (nan is diverged)
        return self.layers

    def fused_with(self, layer: Layer) -> tuple[str, ...]:
        """The other model nodes of the kernel that computed ``layer``."""
        if layer.launch is None:
            return ()
        return tuple(n for n in self.kernel_nodes[layer.launch] if n != layer.node)


def first_divergence(layers: Sequence[Layer]) -> Layer | None:
    """The first ``diverged`` row (rows are in topological order), or None."""
    return next((la for la in layers if la.status == "diverged"), None)


def divergence_message(plan: LayerPlan, layer: Layer | None, tolerance: float) -> str:
    """The one-line verdict: the first diverging node, or that every compared tensor is within tolerance."""
    compared = sum(la.rel_l2_err is not None for la in plan.layers)
    if layer is None:
        return f"all {compared} compared tensors within rel_l2_err {tolerance:g} of onnxruntime"
    msg = (f"first diverging node: '{layer.node}' ({layer.op}), tensor '{layer.tensor}', kernel '{layer.kernel}' "
           f"(launch {layer.launch}): rel_l2_err {layer.rel_l2_err:.3e} > {tolerance:g}, max_abs_err "
           f"{layer.max_abs_err:.3e}, cosine_similarity {layer.cosine_similarity:.6f}")
    others = plan.fused_with(layer)
    if others:
        msg += f"; the kernel also computes {', '.join(others)} (fused: only its last tensor is in GM)"
    return msg


def summary(layers: Sequence[Layer]) -> str:
    """``layers: N compared (D diverged), F fused, ...``: the count of each status."""
    counts: dict[str, int] = {}
    for la in layers:
        counts[la.status] = counts.get(la.status, 0) + 1
    compared = counts.get("ok", 0) + counts.get("diverged", 0)
    rest = [f"{n} {s}" for s, n in sorted(counts.items()) if s not in ("ok", "diverged")]
    return f"layers: {compared} compared ({counts.get('diverged', 0)} diverged)" + "".join(f", {r}" for r in rest)


def write_csv(layers: Sequence[Layer], path: str | os.PathLike) -> None:
    """Write the rows as CSV (header :data:`COLUMNS`) atomically."""
    from cann.fileio import atomic_output

    with atomic_output(path, "w") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        for la in layers:
            w.writerow(la.row())


def format_rows(layers: Sequence[Layer]) -> list[str]:
    """One text line per compared row (stdout without ``--csv``)."""
    return [f"{la.node} ({la.op}) {la.tensor} [{la.kernel}]: max_abs_err={la.max_abs_err:.3e} "
            f"rel_l2_err={la.rel_l2_err:.3e} cosine={la.cosine_similarity:.6f}"
            + ("  DIVERGED" if la.status == "diverged" else "") for la in layers if la.rel_l2_err is not None]


def reference_session(onnx_path: str, outputs: Sequence[str] = ()):
    """An onnxruntime CPU session on ``onnx_path`` (opened before simulating, to fail early) that
    exposes ``outputs``: a tensor that is not a graph output of the model (an intermediate one,
    kept with ``--out_nodes``) is added to the graph outputs first."""
    if not os.path.isfile(onnx_path):
        raise CannError(onnx_path, "no such file")
    import onnxruntime as ort

    def session(model):
        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        try:
            return ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
        except Exception as e:  # noqa: BLE001 - onnxruntime raises its own exception types
            raise CannError(onnx_path, f"onnxruntime cannot load the model: {str(e).splitlines()[0]}") from None

    sess = session(onnx_path)
    missing = [n for n in outputs if n not in {o.name for o in sess.get_outputs()}]
    if not missing:
        return sess
    import onnx

    model = onnx.load(onnx_path)
    tensors = {o for n in model.graph.node for o in n.output} | {i.name for i in model.graph.input}
    unknown = [n for n in missing if n not in tensors]
    if unknown:
        raise CannError(onnx_path, f"has no tensor '{unknown[0]}' (outputs: {', '.join(o.name for o in sess.get_outputs())})")
    model.graph.output.extend(onnx.ValueInfoProto(name=n) for n in missing)
    return session(model.SerializeToString())


def reference_outputs(sess, onnx_path: str, inputs: dict[str, np.ndarray], names: list[str]) -> dict[str, np.ndarray]:
    """onnxruntime's values of ``names`` (outputs of ``sess``) on ``inputs``.

    Raises:
        CannError: a name ``sess`` does not output; onnxruntime fails.
    """
    available = {o.name for o in sess.get_outputs()}
    for n in names:
        if n not in available:
            raise CannError(onnx_path, f"has no output '{n}' (outputs: {', '.join(sorted(available))})")
    feed_names = {i.name for i in sess.get_inputs()}
    feed = {k: v for k, v in inputs.items() if k in feed_names}
    try:
        return dict(zip(names, sess.run(names, feed)))
    except Exception as e:  # noqa: BLE001
        raise CannError(onnx_path, f"onnxruntime failed: {str(e).splitlines()[0]}") from None


# ---------------------------------------------------------------------------------------------
# mapping the .om's GM tensors to ONNX tensors


def _load_onnx(path: str):
    import onnx

    if not os.path.isfile(path):
        raise CannError(path, "no such file")
    try:
        return onnx.load(path)
    except Exception as e:  # noqa: BLE001 - protobuf raises its own types
        raise CannError(path, f"cannot read as an ONNX model: {(str(e).splitlines() or [''])[0]}") from None


def _check_inputs(model, om, onnx_path: str, om_path: str) -> None:
    """MODEL.onnx's graph inputs must be the ``.om``'s: same names, dtypes and (fixed) dimensions."""
    from onnx import helper

    inits = {i.name for i in model.graph.initializer}
    ins = {i.name: i for i in model.graph.input if i.name not in inits}
    if set(ins) != {t.name for t in om.inputs}:
        raise CannError(onnx_path, f"its inputs ({', '.join(ins) or 'none'}) are not those of {om_path} ("
                                   f"{', '.join(t.name for t in om.inputs)}): compare with the model it was compiled from")
    for t in om.inputs:
        tt = ins[t.name].type.tensor_type
        try:
            dt = np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type)).name
        except (KeyError, TypeError, ValueError):
            dt = "?"
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        fits = len(dims) == len(t.shape) and all(d is None or d == s for d, s in zip(dims, t.shape))
        if dt != t.dtype or not fits:
            shown = "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"
            raise CannError(onnx_path, f"input '{t.name}' is {dt} {shown}, {om_path} takes {t.dtype} {list(t.shape)}")


def _layout(om) -> tuple:
    """What a tensor map depends on: the I/O tensors, the GM plan and every launch's kernel and arguments."""
    return (om.inputs, om.outputs, om.gm_size, om.weights_offset, len(om.weights),
            tuple((om.kernels[la.kernel].name, la.args) for la in om.launches))


def _compile_traced(onnx_path: str, om, om_path: str):
    """Compile ``onnx_path`` as ``om`` was compiled (-O1, else -O0) recording the tensor maps;
    returns (records, ascend module, its offline model)."""
    from cann.codegen.offline import build_offline_model
    from cann.compiler import lower
    from cann.tensor_trace import capture

    outs = [t.name for t in om.outputs]
    for level in (1, 0):
        with capture() as rec:
            module = lower(onnx_path, soc_version=om.soc_version, precision_mode=om.precision_mode,
                           input_shape={t.name: t.shape for t in om.inputs}, out_nodes=outs, opt_level=level)
        built = build_offline_model(module, om.gm_reuse)
        if _layout(built) == _layout(om):
            return rec, module, built
    raise CannError(om_path, f"its launches are not those {onnx_path} compiles to ({om.soc_version}, "
                             f"{om.precision_mode}, -O1 or -O0): compare with the model it was compiled from, "
                             f"compiled without --fusion_switch_file or --keep_dtype")


def plan_layers(onnx_path: str, om, om_path: str) -> LayerPlan:
    """Map the GM tensors of offline model ``om`` (read from ``om_path``) to the tensors of
    ``onnx_path``: one :class:`Layer` per output of each ONNX node, in node order.

    Raises:
        CannError: ``onnx_path`` missing or unreadable; its inputs differ from the ``.om``'s
            (names, dtypes, fixed dimensions); it does not compile to the ``.om``'s launches.
    """
    from xdsl.ir import Operation

    from cann.codegen.gm_plan import plan_memory
    from cann.dialects import main_function, tile
    from cann.dialects.graph_base import numpy_dtype
    from cann.dialects.graph_fused import FusedOp

    model = _load_onnx(onnx_path)
    _check_inputs(model, om, onnx_path, om_path)
    rec, module, built = _compile_traced(onnx_path, om, om_path)
    values, consts, buffers = rec["onnx_values"], rec["onnx_constants"], rec["graph_buffers"]
    uses = rec["onnx_uses"]
    main = main_function(module, om_path)
    gm = plan_memory(main, om.gm_reuse)
    offset = gm.offset
    spans = [[(offset[a], offset[a] + math.prod(a.type.get_shape()) * numpy_dtype(a.type.element_type).itemsize)
              for a in op.args] for op in main.body.block.ops if isinstance(op, tile.LaunchOp)]
    regions: dict[tuple[int, str, tuple, tuple[int, int]], Region] = {}

    def region(v) -> Region | None:
        d = buffers.get(v)
        if d is None or d.fmt not in FORMATS or d.mem not in offset:
            return None
        # with GM reuse the bytes hold other tensors outside the buffer's lifetime: only its launches count
        life = gm.lifetime(d.mem) or (0, len(spans))
        key = (offset[d.mem], d.fmt, tuple(d.shape), life)
        if key not in regions:
            start, nbytes = offset[d.mem], d.size * np.dtype(d.dtype).itemsize
            touch = tuple(i for i, s in enumerate(spans) if life[0] <= i <= life[1]
                          and any(a < start + nbytes and start < b for a, b in s))
            regions[key] = Region(start, nbytes, d.fmt, tuple(d.shape), np.dtype(d.dtype), touch)
        return regions[key]

    def locate(v) -> tuple[str, Region | None]:
        """(status, region) of graph value ``v``."""
        owner = v.owner if isinstance(v.owner, Operation) else None
        parent = owner.parent_op() if owner is not None else None
        if isinstance(parent, FusedOp):
            yielded = list(parent.body.block.last_op.operands)
            if v not in yielded:
                return "fused", region(parent.results[0])
            v = parent.results[yielded.index(v)]
        r = region(v)
        if r is not None:
            return "compare", r
        return ("rewritten" if owner is not None and owner.parent is None else "unmapped"), None

    layers = []
    for index, node in enumerate(model.graph.node):
        name = node.name or f"{node.op_type}_{index}"  # (the importer's name: cann.frontend.onnx._node_name)
        for o in (o for o in node.output if o):
            la = Layer(name, node.op_type, o, "unmapped")
            layers.append(la)
            v = values.get(o)
            if v is None:
                la.status = "constant" if o in consts else "pruned"
                continue
            la.status, la.region = locate(v)
            if la.status == "rewritten":  # a graph pass replaced it (a BatchNormalization folded into its
                # Conv): its replacement is what a consumer that is still there now reads in its place
                now = {u.operands[i] for u, i in uses.get(o, ()) if u.parent is not None and i < len(u.operands)}
                if len(now) == 1:
                    la.status, la.region = locate(now.pop())
    per_launch = [om.kernels[la.kernel] for la in om.launches]
    plan = LayerPlan(layers, [k.name for k in per_launch], [k.nodes for k in per_launch], list(regions.values()))
    if built.weights != om.weights:
        plan.notes.append(_weights_note(main, offset, spans, om, built, onnx_path, om_path))
    return plan


def _weights_note(main, offset, spans, om, built, onnx_path: str, om_path: str) -> str:
    """Where the weights of ``om`` first differ from those ``onnx_path`` compiles to (``built``'s)."""
    from cann.dialects import tile

    w = om.weights_offset
    for op in main.body.block.ops:
        if isinstance(op, tile.ConstantOp):
            a = offset[op.res] - w
            b = a + len(op.value.data.data)
            if om.weights[a:b] != built.weights[a:b]:
                user = next((i for i, s in enumerate(spans) if any(lo <= offset[op.res] < hi for lo, hi in s)), None)
                where = "" if user is None else (f": first in a constant of launch {user} (kernel "
                                                 f"'{om.kernels[om.launches[user].kernel].name}')")
                return f"{om_path}: its weights differ from those of {onnx_path}{where}"
    return f"{om_path}: its weights differ from those of {onnx_path}"


def compare_layers(om_path: str | os.PathLike, onnx_path: str | os.PathLike, inputs: dict[str, np.ndarray],
                   tolerance: float | None = None) -> tuple[LayerPlan, list[Layer], Layer | None, float]:
    """Python form of ``cann-run OM --compare ONNX --all-layers`` (inputs by name, of the declared
    shapes and dtypes): returns (plan, rows, the first diverging row or None, the tolerance used).
    ``tolerance`` defaults to :func:`default_tolerance`.

    Raises:
        CannError: as :func:`plan_layers`, ``Model.run`` and :func:`reference_outputs`.
    """
    import cann

    om_path, onnx_path = os.fspath(om_path), os.fspath(onnx_path)
    model = cann.load(om_path)
    plan = plan_layers(onnx_path, model.om, om_path)
    tol = tolerance if tolerance is not None else default_tolerance(model.precision_mode)
    sess = reference_session(onnx_path, plan.tensors())
    plan.run(model, inputs)
    rows = plan.compare(reference_outputs(sess, onnx_path, inputs, plan.tensors()), tol)
    return plan, rows, first_divergence(rows), tol
