"""A spatially partitioned model: one program per device, cut at its halo exchanges (issue 15).

Representation (why): the devices' blocks differ in shape (uneven splits, image borders), so each device
needs its own code; and a halo exchange is communication between kernels, which the single-device
``.om`` (kernels and launches over one GM arena) has no record for. So each device's function of
``graph-spatial-partition`` is cut at its ``graph.halo_exchange`` ops into *segments*, each an ordinary
``.om`` compiled by the usual pipeline, and the bundle lists per device the steps ``run segment`` /
``exchange`` over numbered tensors. One file holds everything (every rank reads the same file):

    magic "CANNSPAT" | u32 version | u64 manifest bytes | manifest (JSON, UTF-8) | segment .om blobs

The manifest: ``grid`` [R, C], ``depth``, ``soc_version``, ``precision_mode``, the model's ``inputs`` and
``outputs`` ({name, shape, dtype}, global shapes), ``exchanges`` (per id: the tensor's global ``extent``,
``channels``/``batch``, every rank's ``need`` block [h0, h1, w0, w1]) and ``ranks`` (per rank: ``steps``,
``inputs`` name -> tensor, ``outputs`` name -> tensor, ``peak_bytes``), ``blobs`` [offset, size] after the
manifest. A step is ``{"run": blob, "in": [tensor...], "out": [tensor...]}`` (in the segment's input and
output order) or ``{"exchange": id, "src": tensor, "dst": tensor}``.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, ModuleOp, StringAttr
from xdsl.ir import Block, Region, SSAValue

from cann.codegen.om import OfflineModel, decode_om, encode_om
from cann.dialects import graph
from cann.dialects.graph_base import _shape, numpy_dtype
from cann.dialects.graph_dist import HaloExchangeOp
from cann.errors import CannError
from cann.fileio import atomic_write_bytes

MAGIC = b"CANNSPAT"
VERSION = 1
_HEAD = struct.Struct("<8sIQ")


@dataclass
class SpatialBundle:
    """See the module docstring; ``models[i]`` is blob ``i`` decoded."""

    manifest: dict
    models: list[OfflineModel] = field(default_factory=list)

    @property
    def grid(self) -> tuple[int, int]:
        R, C = self.manifest["grid"]
        return R, C

    @property
    def ranks(self) -> int:
        return self.grid[0] * self.grid[1]

    def to_bytes(self) -> bytes:
        blobs = [encode_om(m) for m in self.models]
        offs, pos = [], 0
        for b in blobs:
            offs.append([pos, len(b)])
            pos += len(b)
        man = dict(self.manifest, blobs=offs)
        text = json.dumps(man, sort_keys=True, separators=(",", ":")).encode()
        return _HEAD.pack(MAGIC, VERSION, len(text)) + text + b"".join(blobs)

    def save(self, path: str | os.PathLike) -> None:
        atomic_write_bytes(path, self.to_bytes())


def is_bundle(path: str | os.PathLike) -> bool:
    """Whether the file starts with the spatial bundle's magic (False for an ordinary ``.om``)."""
    try:
        with open(path, "rb") as f:
            return f.read(8) == MAGIC
    except OSError:
        return False


def load_bundle(path: str | os.PathLike, *, blobs: set[int] | None = None) -> SpatialBundle:
    """Read a bundle; ``blobs``: decode only these segments (a rank needs only its own; others are None).

    Raises:
        CannError: not a bundle, an unsupported version, a truncated file or manifest.
    """
    where = os.fspath(path)
    try:
        data = open(where, "rb").read()
    except OSError as e:
        raise CannError(where, f"cannot read: {e.strerror or e}") from None
    if len(data) < _HEAD.size or data[:8] != MAGIC:
        raise CannError(where, "not a spatially partitioned model (no CANNSPAT header)")
    _, version, n = _HEAD.unpack_from(data)
    if version != VERSION:
        raise CannError(where, f"spatial bundle version {version}, this cann reads {VERSION}")
    try:
        man = json.loads(data[_HEAD.size:_HEAD.size + n])
    except ValueError as e:
        raise CannError(where, f"corrupt manifest: {e}") from None
    base = _HEAD.size + n
    models = []
    for i, (off, size) in enumerate(man["blobs"]):
        if base + off + size > len(data):
            raise CannError(where, f"segment {i} is truncated")
        models.append(decode_om(data[base + off:base + off + size], f"{where}[segment {i}]")
                      if blobs is None or i in blobs else None)
    return SpatialBundle(man, models)


# -- building ------------------------------------------------------------------------------------------------


def _named(n: int, prefix: str) -> ArrayAttr:
    return ArrayAttr([DictionaryAttr({"graph.name": StringAttr(f"{prefix}{i}")}) for i in range(n)])


def _segment_module(ops, live_in: list[SSAValue], live_out: list[SSAValue], attrs) -> ModuleOp:
    """A module ``@main(live_in...) -> live_out...`` holding clones of ``ops`` (constants defined elsewhere
    are cloned in before their first use)."""
    block = Block(arg_types=[v.type for v in live_in])
    vmap: dict[SSAValue, SSAValue] = dict(zip(live_in, block.args))
    for op in ops:
        for o in op.operands:
            if o not in vmap and isinstance(o.owner, graph.ConstantOp):
                block.add_op(o.owner.clone(vmap))
        block.add_op(op.clone(vmap))
    block.add_op(func.ReturnOp(*[vmap[v] for v in live_out]))
    f = func.FuncOp("main", ([v.type for v in live_in], [v.type for v in live_out]), Region(block),
                    arg_attrs=_named(len(live_in), "in"), res_attrs=_named(len(live_out), "out"))
    m = ModuleOp([f])
    for k, v in attrs.items():
        if k != "graph.work":
            m.attributes[k] = v
    return m


def _nbytes(v: SSAValue) -> int:
    return int(np.prod(_shape(v))) * numpy_dtype(v.type.get_element_type()).itemsize


def rank_segments(f: func.FuncOp, attrs) -> tuple[list, list[ModuleOp], dict, dict, int]:
    """Cut one device's function at its exchanges: (steps, segment modules, input name -> tensor, output
    name -> tensor, peak live bytes between segments). Tensors are numbered in definition order."""
    tid: dict[SSAValue, int] = {}

    def t(v: SSAValue) -> int:
        if v not in tid:
            tid[v] = len(tid)
        return tid[v]

    def names(attrs_list, n):
        out = []
        for i in range(n):
            d = attrs_list.data[i] if attrs_list is not None and i < len(attrs_list.data) else None
            nm = d.data.get("graph.name") if isinstance(d, DictionaryAttr) else None
            out.append(nm.data if isinstance(nm, StringAttr) else f"output{i}")
        return out

    block = f.body.block
    ins = {n: t(a) for n, a in zip(names(f.arg_attrs, len(block.args)), block.args)}
    ops = list(block.ops)
    ret = ops[-1]
    groups: list[list] = [[]]
    cuts: list[HaloExchangeOp] = []
    for op in ops[:-1]:
        if isinstance(op, HaloExchangeOp):
            cuts.append(op)
            groups.append([])
        else:
            groups[-1].append(op)
    # uses of each value by group index (the exchange after group i counts as a use in group i; the return as
    # a use after the last group)
    last = len(groups)
    users: dict[SSAValue, set[int]] = {}
    for gi, g in enumerate(groups):
        for op in g:
            for o in op.operands:
                users.setdefault(o, set()).add(gi)
    for gi, ex in enumerate(cuts):
        users.setdefault(ex.x, set()).add(gi + 0.5)
    for o in ret.operands:
        users.setdefault(o, set()).add(last)
    steps, modules = [], []
    live_bytes: dict[SSAValue, int] = {a: _nbytes(a) for a in block.args}
    peak = sum(live_bytes.values())
    for gi, g in enumerate(groups):
        defined = {r for op in g for r in op.results}
        compute = [op for op in g if not isinstance(op, graph.ConstantOp)]
        if compute:
            live_in, seen = [], set()
            for op in g:
                for o in op.operands:
                    if o not in defined and not isinstance(o.owner, graph.ConstantOp) and o not in seen:
                        seen.add(o)
                        live_in.append(o)
            live_out = [r for op in compute for r in op.results if any(u > gi for u in users.get(r, ()))]
            m = _segment_module(compute, live_in, live_out, attrs)
            steps.append({"run": len(modules), "in": [t(v) for v in live_in], "out": [t(v) for v in live_out]})
            modules.append(m)
            for v in live_out:
                live_bytes[v] = _nbytes(v)
        if gi < len(cuts):
            ex = cuts[gi]
            steps.append({"exchange": ex.id.value.data, "src": t(ex.x), "dst": t(ex.res)})
            live_bytes[ex.res] = _nbytes(ex.res)
        # free what no later step uses (the bytes a device holds between segments)
        peak = max(peak, sum(live_bytes.values()))
        for v in list(live_bytes):
            if not any(u > gi + 0.5 for u in users.get(v, ())):
                del live_bytes[v]
    outs = {n: t(v) for n, v in zip(names(f.res_attrs, len(ret.operands)), ret.operands)}
    return steps, modules, ins, outs, peak


def exchange_table(funcs: list[func.FuncOp]) -> list[dict]:
    """Per exchange id: extent, batch, channels, element dtype and every rank's need block."""
    table: dict[int, dict] = {}
    for rank, f in enumerate(funcs):
        for op in f.body.block.ops:
            if isinstance(op, HaloExchangeOp):
                e = table.setdefault(op.id.value.data, {
                    "id": op.id.value.data, "extent": list(op.extent.get_values()),
                    "batch": _shape(op.x)[0], "channels": _shape(op.x)[1],
                    "dtype": str(numpy_dtype(op.x.type.get_element_type())), "need": [None] * len(funcs)})
                e["need"][rank] = list(op.need.get_values())
    out = [table[k] for k in sorted(table)]
    for e in out:
        if None in e["need"]:
            raise CannError(f"halo exchange {e['id']}", "not every device takes part (a partitioning bug)")
    return out
