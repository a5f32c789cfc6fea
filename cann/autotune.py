"""Operator tuning (AOE's ``job_type 2``): measured tilings for the convolutions a knowledge base misses.

For every distinct convolution of a model (its :func:`~cann.passes.tile_search_kb.signature`) that
the knowledge base has no entry for, :func:`tune_conv`

1. enumerates the legal tilings of the kernel (:func:`candidates`: channel groups ``n_blocks`` x
   output rows per tile ``rows`` x row groups ``m_blocks``, every value the SoC's buffers and cores
   allow; the L0 tile, input-channel chunks and column chunks follow from them by the lowering's rule);
2. ranks them by the cost model the lowering minimizes (``cann.lowering.conv_plan.conv_plan``, the
   busiest core's estimated cycles, a few microseconds a candidate);
3. measures the default tiling and the ``trials - 1`` best-ranked others on a single-Conv model
   with the timing-only simulator (:class:`Bench`, ``Model.time``), and keeps the fastest measured.

Because the default is among the measured, a tuned kernel is never slower than the untuned one
(alone on the chip; in a model the same kernel may carry a fused epilogue). The budget is a number
of measured candidates per kernel, not wall time, so the same model and options give the same
knowledge base, byte for byte. :func:`tune` does this for a whole model and writes (atomically,
merging with the entries already there) the user knowledge base that ``cann.compile(kb=...)`` and
``cann-compile --kb`` apply.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import PassPipeline

from cann.errors import CannError
from cann.fileio import atomic_write_bytes
from cann.hw.config import SocSpec, load_soc
from cann.lowering.convert_graph_to_tile import PRECISION_MODES
from cann.lowering.conv_plan import ConvGeom, conv_plan, used_taps
from cann.options import validate_options
from cann.passes.tile_search_kb import OPS, KnowledgeBase, compiler_version, dump, knowledge_bases, load, signature

#: measured candidates per kernel by default (the default tiling and the cost model's next best)
DEFAULT_TRIALS = 3
#: the tiling fields a knowledge-base entry pins (the others follow from them by the lowering's rule)
PINNED = ("n_blocks", "m_blocks", "rows", "cols", "i_blocks")


@dataclass(frozen=True)
class ConvShape:
    """One convolution: input ``x`` [N, C, H, W] and weight ``w`` [Cout, C/group, KH, KW] shapes,
    ``strides`` / ``dilations`` (H, W), ``pads`` (top, left, bottom, right), ``group``, and the input's
    element type (``float32`` or ``float16``)."""

    x: tuple[int, ...]
    w: tuple[int, ...]
    strides: tuple[int, ...]
    pads: tuple[int, ...]
    dilations: tuple[int, ...]
    group: int = 1
    dtype: str = "float32"

    @property
    def out_hw(self) -> tuple[int, int]:
        (h, w), (kh, kw) = self.x[2:], self.w[2:]
        (sh, sw), (pt, pl, pb, pr), (dh, dw) = self.strides, self.pads, self.dilations
        return (h + pt + pb - dh * (kh - 1) - 1) // sh + 1, (w + pl + pr - dw * (kw - 1) - 1) // sw + 1

    @classmethod
    def of(cls, op) -> ConvShape:
        """The shape of a ``graph.conv2d`` op."""
        def ints(name):
            return tuple(int(v) for v in op.properties[name].get_values())

        el = op.x.type.element_type
        return cls(tuple(op.x.type.get_shape()), tuple(op.w.type.get_shape()), ints("strides"), ints("pads"),
                   ints("dilations"), op.properties["group"].value.data,
                   "float16" if getattr(el, "width", 32) == 16 else "float32")

    def model(self) -> onnx.ModelProto:
        """A single-Conv ONNX model of this shape (seeded weights: the same bytes every time)."""
        n, c, h, w = self.x
        ho, wo = self.out_hw
        dt = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16}[self.dtype]
        wt = np.random.default_rng(0).standard_normal(self.w).astype(np.float32) / math.sqrt(math.prod(self.w[1:]))
        g = helper.make_graph(
            [helper.make_node("Conv", ["x", "w"], ["y"], strides=list(self.strides), pads=list(self.pads),
                              dilations=list(self.dilations), group=self.group)], "conv",
            [helper.make_tensor_value_info("x", dt, [n, c, h, w])],
            [helper.make_tensor_value_info("y", dt, [n, self.w[0], ho, wo])],
            [numpy_helper.from_array(wt.astype(self.dtype), "w")])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        m.ir_version = 8
        return m


def conv_ops(module: ModuleOp) -> list:
    """The dense (``group`` 1) ``graph.conv2d`` ops of a graph-stage module (also inside fused
    groups), in order: the kernels the tuner measures (depthwise and grouped convolutions have kernels
    of their own; Gemm and MatMul entries come from ``benchmarks/kb_gemm.py``)."""
    return [o for o in module.walk() if o.name == "graph.conv2d" and o.properties["group"].value.data == 1]


@dataclass(frozen=True)
class Candidate:
    """A tiling to measure: the ``pins`` to give ``conv2d_0`` and the cost model's cycles for it."""

    pins: dict[str, int]
    estimate: float
    key: tuple[int, ...]  # (n_blocks, rows, cols, c1, m_blocks): the kernel it gives


def _geometry(s: ConvShape) -> ConvGeom:
    """The lowering's geometry of ``s`` (taps that only read padding cropped, as ``conv.conv2d`` does)."""
    _, c, h, w = s.x
    kh, kw = s.w[2:]
    (sh, sw), (pt, pl, _, _), (dh, dw) = s.strides, s.pads, s.dilations
    ho, wo = s.out_hw
    ia, ib = used_taps(kh, dh, sh, pt, h, ho)
    ja, jb = used_taps(kw, dw, sw, pl, w, wo)
    return ConvGeom(math.ceil(c / 16), h, w, ib - ia, jb - ja, sh, sw, dh, dw, pt - ia * dh, pl - ja * dw, ho, wo)


def _key(t: dict[str, int], cores: int, n_tiles: int, wo: int, c1in: int) -> tuple[int, ...]:
    return (t.get("n_blocks", min(cores, n_tiles)), t["rows"], t.get("cols", wo), t.get("c1", c1in),
            t.get("m_blocks", 1))


def candidates(s: ConvShape, default: dict[str, int], soc: SocSpec, precision_mode: str,
               cores: int | None = None) -> list[Candidate]:
    """The legal tilings of convolution ``s``, cheapest estimate first (ties: the order enumerated).

    ``default``: the tiling the kernel records without pins (its L0 tile ``m``/``n``/``k`` and
    ``i_blocks`` are kept); ``cores``: the cores a kernel may use (default: the SoC's). Each
    candidate is a distinct kernel (duplicates that the lowering would build alike are dropped).
    """
    cores = cores or soc.ai_core_count
    isz = np.dtype(PRECISION_MODES[precision_mode]).itemsize  # the lowering's device dtype
    geo = _geometry(s)
    m_t, n_t, k_t = default["m"], default["n"], default["k"]
    n_tiles = math.ceil(s.w[0] / 16) * 16 // n_t
    m_cap = soc.buffer("l0c").usable // (n_t * 4) // 16 * 16
    l1_budget = soc.buffer("l1").usable - k_t * n_t * isz
    i_blocks = default.get("i_blocks", 1)
    budget = cores // i_blocks
    n_opts = sorted({math.ceil(n_tiles / r) for r in range(1, 17)} & set(range(1, min(budget, n_tiles) + 1)))
    rows_max = max(1, min(geo.ho, m_cap // geo.wo)) if geo.wo <= m_cap else 1
    out, seen = [], set()
    for nb in n_opts:
        rounds = math.ceil(n_tiles / nb)
        for rows in range(1, rows_max + 1):
            row_tiles = math.ceil(geo.ho / rows) * (1 if rows > 1 else math.ceil(geo.wo / min(geo.wo, m_cap)))
            mb_opts = sorted({1} | {math.ceil(row_tiles / j) for j in range(1, row_tiles + 1)} & set(range(1, budget // nb + 1)))
            for mb in mb_opts:
                pins = {"n_blocks": nb, "rows": rows, "m_blocks": mb}
                try:
                    _, rows_, cols, c1, blocks, cost = conv_plan(geo, pins, soc, m_cap, l1_budget, isz, m_t, n_t, k_t,
                                                                  rounds, None, mb, nb * i_blocks, nb)
                except CannError:
                    continue
                key = (nb, rows_, cols, c1, blocks)
                if key in seen:
                    continue
                seen.add(key)
                pins = {"n_blocks": nb, "rows": rows_, "m_blocks": blocks}
                if cols < geo.wo:
                    pins["cols"] = cols
                if i_blocks > 1:
                    pins["i_blocks"] = i_blocks
                out.append(Candidate(pins, cost * (s.x[0] // i_blocks), key))
    out.sort(key=lambda c: c.estimate)  # stable: ties keep the enumeration order
    return out


@dataclass
class Bench:
    """Measures tilings of one convolution on a single-Conv model with the timing-only simulator.

    The model is imported once; each measurement lowers it with the tiling pinned on ``conv2d_0``
    (``convert-graph-to-tile`` and the later stages of :func:`cann.compiler.stage_pipelines`) and
    runs :meth:`cann.runtime.Model.time`. The other kernels (the layout conversions around the
    convolution, the same for every candidate: the pins name ``conv2d_0`` only) are lowered to
    ascend instructions once and lent to each measurement.
    """

    shape: ConvShape
    soc_version: str = "Ascend910"
    precision_mode: str = "force_fp16"
    opt_level: int = 1
    aicore_num: int = 0
    cache: dict[str, object] = field(default_factory=dict)  # kernel name -> its ascend kernel (not conv2d_0)

    def __post_init__(self) -> None:
        from cann.compiler import lower

        self.graph = lower(self.shape.model(), soc_version=self.soc_version, precision_mode=self.precision_mode,
                           opt_level=self.opt_level, kb="none", until="graph")  # the default: the rule's

    def tile(self, pins: dict[str, int] | None) -> ModuleOp:
        """The tile-stage module with ``pins`` on ``conv2d_0``.

        Raises:
            CannError: pins the lowering refuses.
        """
        from cann.compiler import make_context, stage_pipelines
        from cann.passes import ALL_PASSES

        module = self.graph.clone()
        stages = dict(stage_pipelines(self.soc_version, self.precision_mode, self.opt_level, self.aicore_num,
                                      tiling={"conv2d_0": pins} if pins else None))
        PassPipeline.parse_spec(ALL_PASSES, stages["tile"]).apply(make_context(), module)
        return module

    @staticmethod
    def tiling(module: ModuleOp) -> dict[str, int]:
        """The tiling ``conv2d_0`` recorded (tile or ascend stage)."""
        for op in module.body.block.ops:
            if getattr(op, "sym_name", None) is not None and op.sym_name.data == "conv2d_0":
                return {f: v.value.data for f, v in op.attributes["tile.tiling"].data.items()}
        raise CannError("conv2d_0", "no such kernel in the single-Conv model")

    def measure(self, module: ModuleOp) -> int:
        """Simulated cycles of ``conv2d_0`` in a tile-stage module (consumed: lowered in place)."""
        from cann.codegen.offline import build_offline_model
        from cann.compiler import make_context, stage_pipelines
        from cann.passes import ALL_PASSES
        from cann.runtime import Model

        ascend = dict(stage_pipelines(self.soc_version, self.precision_mode, self.opt_level, self.aicore_num))["ascend"]
        ctx = make_context()
        block = module.body.block
        borrowed = []  # cached ascend kernels lent to this module (moved back out after the run)
        ops = list(block.ops)
        nxt = dict(zip(ops, ops[1:]))
        for op in ops:
            if not (isinstance(op, func.FuncOp) and "tile.kernel" in op.attributes):
                continue
            text = op.sym_name.data if op.sym_name.data != "conv2d_0" else None  # the candidate itself: always lowered
            kernel = self.cache.get(text)
            if kernel is None:
                one = ModuleOp([])
                one.attributes.update(module.attributes)
                op.detach()
                one.body.block.add_op(op)
                PassPipeline.parse_spec(ALL_PASSES, ascend).apply(ctx, one)
                (kernel,) = list(one.body.block.ops)
                kernel.detach()
                if text is not None:
                    self.cache[text] = kernel
            if text is not None:
                borrowed.append(kernel)
            if op.parent is not None:
                block.insert_op_before(kernel, op)
                block.erase_op(op)
            else:
                block.insert_op_before(kernel, anchor) if (anchor := nxt.get(op)) is not None else block.add_op(kernel)
        try:
            stats = Model(build_offline_model(module)).time()
        finally:
            for kernel in borrowed:
                kernel.detach()
        return next(k.cycles for k in stats.kernels if k.name == "conv2d_0")


@dataclass(frozen=True)
class Tuned:
    """The outcome of tuning one convolution: its knowledge-base ``entry`` and the measured cycles
    of the default tiling and of the best (``measured``: candidate pins -> cycles, in order)."""

    entry: dict
    default_cycles: int
    best_cycles: int
    measured: tuple[tuple[dict[str, int], int], ...]


def tune_conv(shape: ConvShape, sig: str, *, soc_version: str = "Ascend910", precision_mode: str = "force_fp16",
              opt_level: int = 1, aicore_num: int = 0, trials: int = DEFAULT_TRIALS,
              step: Callable[[], None] | None = None) -> Tuned:
    """Tune one convolution of signature ``sig``: measure its default tiling and the cost model's
    ``trials - 1`` best others; the fastest measured (the earliest of equals, the default first) wins.

    ``step``: called after each
    measurement (a progress bar's update).

    Raises:
        CannError: ``trials`` below 1.
    """
    if trials < 1:
        raise CannError("--tune-trials", f"{trials}: at least 1 (the default tiling is always measured)")
    soc = load_soc(soc_version)
    bench = Bench(shape, soc_version, precision_mode, opt_level, aicore_num)
    module = bench.tile(None)
    default = bench.tiling(module)
    wo, c1in = shape.out_hw[1], math.ceil(shape.x[1] / 16)
    n_tiles = math.ceil(shape.w[0] / 16) * 16 // default["n"]
    cores = aicore_num or soc.ai_core_count
    dkey = _key(default, cores, n_tiles, wo, c1in)
    runs = [({k: default[k] for k in PINNED if k in default} | {"n_blocks": dkey[0], "m_blocks": dkey[4]},
             bench.measure(module), default)]
    if step:
        step()
    for cand in [c for c in candidates(shape, default, soc, precision_mode, cores) if c.key != dkey][:trials - 1]:
        try:
            module = bench.tile(cand.pins)
        except CannError:  # the estimate's plan and the lowering disagree: not a candidate
            continue
        t = bench.tiling(module)
        runs.append((cand.pins, bench.measure(module), t))
        if step:
            step()
    pins, cycles, t = min(runs, key=lambda r: r[1])
    entry = {"op": "Conv", "signature": sig, "soc": soc_version, "precision_mode": precision_mode,
             "compiler": compiler_version(), "cycles": cycles, "tiling": {k: t.get(k, pins[k]) for k in PINNED if k in pins}}
    if aicore_num:  # a tiling for fewer cores than the SoC's applies to that core count only
        entry["aicore_num"] = aicore_num
    return Tuned(entry, runs[0][1], cycles, tuple((p, c) for p, c, _ in runs))


@dataclass(frozen=True)
class TuneReport:
    """What :func:`tune` did: the knowledge base ``kb`` (written, or left as it was when nothing was
    tuned and it existed), the signatures it already had (``hits``) and the kernels tuned."""

    kb: str
    hits: int
    tuned: tuple[Tuned, ...]
    written: bool


def check_kb_path(path: str | os.PathLike) -> KnowledgeBase | None:
    """The knowledge base at ``path`` if it exists (None if not), after checking it can be written.

    Raises:
        CannError: ``<path>: ...``: a directory, a missing or read-only directory, a malformed file.
    """
    p = Path(path)
    if p.is_dir():
        raise CannError(str(p), "cannot write the knowledge base: is a directory")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise CannError(str(p), "cannot write the knowledge base: No such file or directory")
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise CannError(str(p), "cannot write the knowledge base: Permission denied")
    return load(p) if p.exists() else None


def _cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _tune_one(work) -> Tuned:
    shape, sig, kw = work
    return tune_conv(shape, sig, **kw)


def _in_model(model, kb: str | None, options: dict) -> list[tuple[int, dict[str, int]]]:
    """(simulated cycles, recorded tiling) of each conv kernel of ``model`` compiled with ``kb``, in
    the order of the graph's convolutions (kernel ``conv2d_<i>`` is the i-th)."""
    from cann.codegen.offline import build_offline_model
    from cann.compiler import lower
    from cann.dialects.ascend import kernels
    from cann.runtime import Model

    module = lower(model, kb=kb, **options)
    tilings = {k.sym_name.data: {f: v.value.data for f, v in k.attributes["tile.tiling"].data.items()}
               for k in kernels(module) if k.sym_name.data.startswith("conv2d_")}
    cycles = {k.name: k.cycles for k in Model(build_offline_model(module)).time().kernels}
    return [(cycles[f"conv2d_{i}"], tilings[f"conv2d_{i}"]) for i in range(len(tilings))]


def _in_model_task(args) -> list[tuple[int, dict[str, int]]]:
    return _in_model(*args)


def _check_in_model(model, tuned: list[Tuned], sigs: list[str], base: KnowledgeBase | None,
                    options: dict, jobs: int = 1, shipped: bool = True) -> list[Tuned]:
    """``tuned`` with the default tiling of the model (its pinned fields) in place of each tuned
    tiling that makes the model's kernels of its signature slower in all (a kernel tuned alone
    may carry a fused epilogue in the model)."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        old, new = os.path.join(d, "old.kb.json"), os.path.join(d, "new.kb.json")
        Path(old).write_text(dump(list(base.entries if base else ())))
        Path(new).write_text(dump([*(base.entries if base else ()), *(t.entry for t in tuned)]))
        work = [(model, old if base else (None if shipped else "none"), options), (model, new, options)]
        if jobs > 1:
            import multiprocessing

            with multiprocessing.get_context("fork").Pool(2) as pool:
                before, after = pool.map(_in_model_task, work)
        else:
            before, after = map(_in_model_task, work)
    if len(before) != len(sigs) or len(after) != len(sigs):
        return tuned  # kernels and convolutions do not pair up (not expected): keep the measurements
    out = []
    for t in tuned:
        idx = [i for i, s in enumerate(sigs) if s == t.entry["signature"]]
        if sum(after[i][0] for i in idx) > sum(before[i][0] for i in idx):
            d = before[idx[0]][1]
            pins = {k: d[k] for k in PINNED if k in d}
            pins["m_blocks"] = d.get("m_blocks", 1)
            pins["n_blocks"] = d.get("n_blocks", d["block_dim"] // (pins["m_blocks"] * d.get("i_blocks", 1)))
            t = Tuned(t.entry | {"tiling": dict(sorted(pins.items())), "cycles": t.default_cycles},
                      t.default_cycles, t.default_cycles, t.measured)
        out.append(t)
    return out


def tune(model, kb: str | os.PathLike, *, trials: int = DEFAULT_TRIALS, jobs: int | None = None,
         check: bool = True, progress: bool | None = False,
         soc_version: str | None = None, precision_mode: str | None = None, input_shape=None, out_nodes=None,
         opt_level: int | None = None, fusion_switch_file: str | None = None, aicore_num=None, framework=None,
         first_load_segment=None, keep_dtype=None, calibration_inputs=None, shipped: bool = True) -> TuneReport:
    """Tune the convolutions of ``model`` that the knowledge base ``kb`` misses and add them to it.

    ``kb``: the user knowledge base (created if missing; its entries are kept, the new ones
    appended, and the file replaced atomically). ``trials``: measured candidates per distinct
    convolution (the default tiling included; 1 records the default). ``jobs``: processes measuring
    convolutions in parallel (default: the CPUs this process may use; the result does not depend on
    it). ``check``: compile the model with and without the tuned entries and, for each signature
    whose kernels the tuned tiling makes slower in the model (a fused epilogue the single-Conv
    measurement lacks), record the model's default tiling instead (two more compiles). ``progress``: a tqdm bar on
    stderr (None: only on a terminal). The other options are :func:`cann.compile`'s: the tuning
    is for that SoC, precision mode, level and core count. ``shipped``: a convolution the package's
    knowledge base covers is not tuned (False: tune it too, a cold tune) (a convolution ``keep_dtype`` keeps in
    float32 is measured in the precision mode's dtype all the same). Apply the result with
    ``cann.compile(model, kb=kb, ...)``.

    Raises:
        CannError: as :func:`cann.compile`; ``kb`` not writable or malformed (nothing is written).
    """
    from cann.compiler import lower

    if trials < 1:
        raise CannError("--tune-trials", f"{trials}: at least 1 (the default tiling is always measured)")
    opts = validate_options(soc_version=soc_version, precision_mode=precision_mode, opt_level=opt_level,
                            aicore_num=aicore_num)
    base = check_kb_path(kb)
    module = lower(model, soc_version=soc_version, precision_mode=precision_mode, input_shape=input_shape,
                   out_nodes=out_nodes, opt_level=opt_level, fusion_switch_file=fusion_switch_file,
                   aicore_num=aicore_num, framework=framework, first_load_segment=first_load_segment,
                   keep_dtype=keep_dtype, calibration_inputs=calibration_inputs, kb="none", until="graph")
    known = [b for _, _, b in knowledge_bases("", shipped, opts.soc_version)] + ([base] if base is not None else [])
    cores = opts.aicore_num or 0
    misses, hits = {}, set()
    for op in conv_ops(module):
        sig = signature(op)
        if any(b.lookup(OPS[op.name], sig, opts.soc_version, opts.precision_mode, cores) is not None for b in known):
            hits.add(sig)
        elif sig not in misses:
            misses[sig] = ConvShape.of(op)
    jobs_given, jobs = jobs, max(1, min(jobs or _cpus(), len(misses)))
    bar = None
    if misses and progress is not False:
        from tqdm import tqdm

        bar = tqdm(total=len(misses) * trials, desc="tuning", unit="trial", disable=None if progress is None else False,
                   leave=False)
    kw = dict(soc_version=opts.soc_version, precision_mode=opts.precision_mode, opt_level=opts.opt_level,
              aicore_num=opts.aicore_num or 0, trials=trials)
    work = [(shape, sig, kw) for sig, shape in misses.items()]
    tuned = []
    try:
        if jobs == 1:
            for shape, sig, _ in work:
                if bar is not None:
                    bar.set_postfix_str(f"x={'x'.join(map(str, shape.x))} w={'x'.join(map(str, shape.w))}", refresh=False)
                before = bar.n if bar is not None else 0
                tuned.append(tune_conv(shape, sig, step=bar.update if bar is not None else None, **kw))
                if bar is not None:
                    bar.update(before + trials - bar.n)  # candidates the space did not have
        else:  # one convolution per task; the results in the model's order whatever finishes first
            import multiprocessing

            with multiprocessing.get_context("fork").Pool(jobs) as pool:
                for t in pool.imap(_tune_one, work):
                    tuned.append(t)
                    if bar is not None:
                        bar.update(trials)
    finally:
        if bar is not None:
            bar.close()
    if check and tuned:
        options = dict(soc_version=soc_version, precision_mode=precision_mode, input_shape=input_shape,
                       out_nodes=out_nodes, opt_level=opt_level, fusion_switch_file=fusion_switch_file,
                       aicore_num=aicore_num, framework=framework, first_load_segment=first_load_segment,
                       keep_dtype=keep_dtype, calibration_inputs=calibration_inputs)
        tuned = _check_in_model(model, tuned, [signature(op) for op in conv_ops(module)], base, options,
                                min(2, jobs_given or _cpus()), shipped)
    written = bool(tuned) or base is None
    if written:
        atomic_write_bytes(kb, dump([*(base.entries if base else ()), *(t.entry for t in tuned)]).encode())
    return TuneReport(os.fspath(kb), len(hits), tuple(tuned), written)
