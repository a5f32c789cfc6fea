"""The model work of each kernel launch: what the profile's *ideal* bound divides by the SoC's rates.

Two steps, both deterministic:

* :func:`annotate_work` (run by the compile driver on the graph-stage module, after fusion) records
  the module attribute ``graph.work``: per model node (by its name) and per fused group the work of
  the node itself, independent of how it is compiled --

  - ``macs``: the real multiply-accumulates. Conv: N·Cout·Hout·Wout·(Cin/group)·kh·kw (grouped and
    depthwise convolutions count their real MACs, not the densified ones); ConvTranspose:
    N·Cin·Hin·Win·(Cout/group)·kh·kw; Gemm: M·N·K; MatMul: (broadcast batch)·M·N·K. Biases are
    not counted (the cube can start its accumulator from them).
  - vector element operations, per cost class (``simple``, ``transcendental``, ``int64`` lanes),
    counted in bytes (operations × the storage element size, so that one vector repeat of
    ``repeat_bytes`` is the unit whatever the dtype). One operation per output element for an
    elementwise function of its class (the transcendental class: exp, log, sqrt, reciprocal,
    div, pow, sigmoid, tanh, erf, softplus, elu, selu, gelu, mish, the trigonometric and
    hyperbolic functions); BatchNormalization 2 per element; MaxPool kh·kw − 1 and AvgPool kh·kw
    per output; GlobalAveragePool, ReduceXxx, ArgMax/ArgMin one per input element; Softmax 4 simple
    + 1 transcendental per element; Hardmax 2 per element; LRN size + 3 simple + 1 transcendental
    per element; LayerNormalization 6 per element (7 with a bias); Resize (not nearest) one per
    output element per resized axis; Det 2n³/3 per matrix; data movement (Reshape, Transpose,
    Concat, Slice, Pad, Gather, Expand, float Cast) none. These are lower bounds of what any
    kernel computing the node must do.
  - ``io_bytes`` (compulsory GM bytes): each distinct input, weight and output tensor of the node
    (or of the group: the values it reads from outside and its result) once, in the storage dtype
    (float tensors in the precision mode's device dtype, others in their own); of the data a
    Slice or a Gather reads, only the elements it selects.

* :func:`kernel_work` (run by :func:`cann.codegen.offline.build_offline_model`) gives each kernel of
  the ascend-level module its :class:`~cann.codegen.om.LaunchWork`: a kernel computes the nodes
  named by its ``tile.fused_nodes`` or its location. Kernels sharing a node form one unit whose
  work is the group's record when its nodes are exactly a fused group, else the sum over its
  nodes. Format conversions (``trans_data_*`` kernels) are compiler overhead and get no work unless
  the unit has nothing else; when a unit has several computing kernels (e.g. LRN's three), each
  work term is split in proportion to the kernels' static busy cycles on the resource doing it
  (M pipe for MACs, V pipe for vector operations, MTE2 + MTE3 for bytes).

The ideal cycles themselves are computed from this work and the SoC description at run time
(:func:`cann.sim.executor.ideal_cycles`).
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, DictionaryAttr, ModuleOp, NameLoc, StringAttr, i64
from xdsl.ir import Operation, SSAValue

from cann.codegen.om import LaunchWork
from cann.dialects import graph
from cann.dialects.tile import fused_nodes

#: the module attribute holding the work table
ATTR = "graph.work"
#: precision modes whose device float dtype is float16 (the others keep float32)
FP16_MODES = ("force_fp16", "allow_fp32_to_fp16", "allow_mix_precision")
#: kernel name prefix of format conversions (compiler overhead, no model work)
CONVERSION_PREFIX = "trans_data_"

#: element-wise functions costing a transcendental vector operation
TRANSCENDENTAL = frozenset({
    "exp", "log", "sqrt", "reciprocal", "div", "pow", "sigmoid", "tanh", "erf", "softplus", "elu", "selu",
    "gelu", "mish", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh"})
#: element-wise functions costing one simple vector operation per output element
SIMPLE = frozenset({
    "relu", "abs", "neg", "leaky_relu", "clip", "hard_sigmoid", "thresholded_relu", "shrink", "add", "sub",
    "mul", "max", "min", "where", "compare", "logical", "not", "round", "sign", "is_nan", "is_inf", "mod"})
#: pure data movement: no vector operations
MOVEMENT = frozenset({"reshape", "transpose", "concat", "slice", "pad", "gather", "expand", "constant",
                      "channel_shuffle"})

#: field order of a work record (= cann.codegen.om.LaunchWork)
FIELDS = ("model_macs", "cube_itemsize", "vector_bytes", "vector_bytes_transcendental", "vector_bytes_int64",
          "compulsory_bytes")
_CLASS_FIELD = {"simple": 2, "transcendental": 3, "int64": 4}


def _shape(v: SSAValue) -> tuple[int, ...]:
    return tuple(v.type.get_shape())


def _n(v: SSAValue) -> int:
    return math.prod(_shape(v))


def _dtype(v: SSAValue) -> np.dtype:
    return graph.numpy_dtype(v.type.get_element_type())


def _float(dt: np.dtype) -> bool:
    return dt.kind == "f" or dt.name == "bfloat16"


def macs(op: Operation) -> int:
    """Real multiply-accumulates of one graph op (0 for a non-cube op)."""
    name = op.name
    if name == "graph.conv2d":  # w: [Cout, Cin/group, kh, kw]
        return _n(op.results[0]) * math.prod(_shape(op.w)[1:])
    if name == "graph.conv_transpose":  # w: [Cin, Cout/group, kh, kw]
        return _n(op.x) * math.prod(_shape(op.w)[1:])
    if name == "graph.gemm":
        sa = _shape(op.a)
        k = sa[0] if op.trans_a.value.data else sa[1]
        return _n(op.results[0]) * k
    if name == "graph.matmul":
        return _n(op.results[0]) * _shape(op.a)[-1]
    return 0


def vector_ops(op: Operation) -> list[tuple[str, int]]:
    """``(class, element operations)`` of one graph op; class ``simple`` or ``transcendental``
    (the module docstring lists the rules)."""
    kind = op.name.split(".", 1)[1]
    out = _n(op.results[0]) if op.results else 0
    if kind in MOVEMENT or macs(op):
        return []
    if kind == "cast":
        src, dst = _dtype(op.operands[0]), _dtype(op.results[0])
        return [] if _float(src) and _float(dst) else [("simple", out)]
    if kind in TRANSCENDENTAL:
        return [("transcendental", out)]
    if kind in SIMPLE:
        return [("simple", out)]
    if kind == "batch_norm":
        return [("simple", 2 * out)]
    if kind in ("max_pool", "avg_pool"):
        window = math.prod(op.kernel_shape.get_values())
        return [("simple", out * (window - 1 if kind == "max_pool" else window))]
    if kind in ("global_avg_pool", "reduce", "arg_reduce"):
        return [("simple", _n(op.operands[0]))]
    if kind == "softmax":
        return [("simple", 4 * out), ("transcendental", out)]
    if kind == "hardmax":
        return [("simple", 2 * out)]
    if kind == "lrn":
        return [("simple", (op.size.value.data + 3) * out), ("transcendental", out)]
    if kind == "layer_norm":
        return [("simple", (7 if op.bias is not None else 6) * out)]
    if kind == "resize":
        if op.mode.data == "nearest":
            return []
        resized = sum(1 for a, b in zip(_shape(op.x), _shape(op.results[0])) if a != b)
        return [("simple", resized * out)]
    if kind == "det":
        s = _shape(op.x)
        return [("simple", math.prod(s[:-2]) * 2 * s[-1] ** 3 // 3)]
    return []


class _Work:
    """Work record being summed: a list in :data:`FIELDS` order."""

    def __init__(self, values=None):
        self.v = list(values) if values is not None else [0] * len(FIELDS)

    def add(self, other: "_Work", with_io: bool = True) -> None:
        for i in range(len(FIELDS)):
            if i == 1:
                self.v[1] = max(self.v[1], other.v[1])
            elif i != 5 or with_io:
                self.v[i] += other.v[i]


class _Analysis:
    def __init__(self, precision_mode: str):
        self.fitem = 2 if precision_mode in FP16_MODES else 4

    def storage_itemsize(self, v: SSAValue) -> int:
        dt = _dtype(v)
        if dt.kind == "f":
            return self.fitem
        return dt.itemsize

    def io_bytes(self, reads: list[SSAValue], writes: list[SSAValue], used: dict[SSAValue, int] | None = None) -> int:
        """Bytes of each distinct value once; ``used[v]``: the elements of ``v`` actually needed
        (a Slice or Gather reads only what it selects) instead of all of them."""
        seen: list[SSAValue] = []
        for v in reads + writes:
            if v not in seen:
                seen.append(v)
        used = used or {}
        return sum(min(_n(v), used.get(v, _n(v))) * self.storage_itemsize(v) for v in seen)

    def used(self, op: Operation) -> dict[SSAValue, int]:
        """The operands of ``op`` it reads only in part: elements needed (= its result's)."""
        if op.name == "graph.slice":
            return {op.x: _n(op.results[0])}
        if op.name == "graph.gather":
            return {op.data: _n(op.results[0])}
        return {}

    def node(self, op: Operation) -> _Work:
        w = _Work()
        m = macs(op)
        if m:
            w.v[0], w.v[1] = m, self.fitem
        # the lanes: the widest operand in its storage dtype (a compare computes on its inputs,
        # Where on its values, not on the bool condition)
        dts = [_dtype(v) for v in (op.operands or op.results)]
        if dts:
            isz = max(self.fitem if _float(dt) else dt.itemsize for dt in dts)
            int64 = np.dtype(np.int64) in dts
            for cls, n in vector_ops(op):
                if int64 and cls == "simple":
                    cls = "int64"
                w.v[_CLASS_FIELD[cls]] += n * isz
        w.v[5] = self.io_bytes(list(op.operands), list(op.results), self.used(op))
        return w


def _node_name(op: Operation) -> str:
    return op.location.desc.data if isinstance(op.location, NameLoc) else ""


def _array(values) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, [int(x) for x in values])


def graph_work(module: ModuleOp, precision_mode: str) -> tuple[dict[str, list[int]], list[tuple[list[str], list[int]]]]:
    """``(nodes, groups)`` of a graph-level module: work per node name (ops sharing a name are
    summed; ops without a name are left out) and, per ``graph.fused`` group, its named members and
    its own work (the members' MACs and vector operations; ``io_bytes`` of the group: what it reads
    from outside and its result). Work records are lists in :data:`FIELDS` order."""
    an = _Analysis(precision_mode)
    nodes: dict[str, _Work] = {}
    node_ops: dict[str, list[Operation]] = {}
    groups: list[tuple[list[str], list[int]]] = []
    mains = [op for op in module.ops if isinstance(op, func.FuncOp) and op.sym_name.data == "main"]
    for op in (mains[0].body.block.ops if mains else ()):
        if op.name in ("graph.constant", "func.return"):
            continue
        members = op.ops if op.name == "graph.fused" else [op]
        total = _Work()
        for m in members:
            w = an.node(m)
            if _node_name(m):  # ops the compiler made carry no node name: no kernel names them
                nodes.setdefault(_node_name(m), _Work()).add(w)
                node_ops.setdefault(_node_name(m), []).append(m)
            total.add(w, with_io=False)
        if op.name == "graph.fused":
            inside = {r for m in members for r in m.results}
            reads = [v for m in members for v in m.operands if v not in inside]
            used = {v: n for m in members for v, n in an.used(m).items()}
            total.v[5] = an.io_bytes(reads, list(op.results), used)
            groups.append(([_node_name(m) for m in members if _node_name(m)], total.v))
    for name, ops in node_ops.items():
        if len(ops) > 1:  # one model node imported as several ops (e.g. Softmax of opset < 13: reshape,
            # softmax, reshape): its values passed between them are not compulsory, as in a group
            mine = set(ops)
            inside = {r for o in ops for r in o.results}
            reads = [v for o in ops for v in o.operands if v not in inside]
            writes = [r for o in ops for r in o.results
                      if not r.uses or any(u.operation not in mine for u in r.uses)]
            used = {v: n for o in ops for v, n in an.used(o).items()}
            nodes[name].v[5] = an.io_bytes(reads, writes, used)
    return {k: w.v for k, w in nodes.items()}, groups


def annotate_work(module: ModuleOp, precision_mode: str) -> None:
    """Record :func:`graph_work` as the module attribute ``graph.work`` (``{nodes = {name =
    array<i64: ...>}, groups = [[[names], array<i64: ...>]]}``, fields in :data:`FIELDS` order)."""
    nodes, groups = graph_work(module, precision_mode)
    module.attributes[ATTR] = DictionaryAttr({
        "nodes": DictionaryAttr({k: _array(v) for k, v in nodes.items()}),
        "groups": ArrayAttr([ArrayAttr([ArrayAttr([StringAttr(n) for n in names]), _array(v)])
                             for names, v in groups]),
    })


def _read_table(module: ModuleOp):
    attr = module.attributes.get(ATTR)
    if not isinstance(attr, DictionaryAttr):
        return None
    nodes = {k: list(v.get_values()) for k, v in attr.data["nodes"].data.items()}
    groups = {frozenset(s.data for s in g.data[0].data): list(g.data[1].get_values())
              for g in attr.data["groups"].data}
    return nodes, groups


def split(total: int, weights: list[int]) -> list[int]:
    """``total`` split into integers proportional to ``weights`` (largest remainder, ties to the
    first; equal shares when every weight is 0); the parts sum to ``total``."""
    if not weights:
        return []
    if sum(weights) <= 0:
        weights = [1] * len(weights)
    s = sum(weights)
    parts = [total * w // s for w in weights]
    rest = sorted(range(len(weights)), key=lambda i: (-(total * weights[i] % s), i))
    for i in rest[: total - sum(parts)]:
        parts[i] += 1
    return parts


def _static_busy(kernels_, soc: str) -> list[dict[str, int]]:
    """Per kernel: the static (loops not expanded) busy cycles of the M, V and MTE2+MTE3 pipes."""
    from cann.dialects.ascend import op_to_instr
    from cann.hw import isa
    from cann.hw.config import load_soc
    from cann.sim.cost import CostModel

    cm = CostModel(load_soc(soc))
    out = []
    for k in kernels_:
        busy = {"M": 0, "V": 0, "MTE": 0}
        for op in (k.body.block.ops if k.body.blocks else ()):
            try:
                ins = op_to_instr(op)
            except TypeError:
                continue
            if ins.defn.group in ("sync", "spmd"):
                continue
            p = ins.defn.pipe
            key = {isa.Pipe.M: "M", isa.Pipe.V: "V", isa.Pipe.MTE2: "MTE", isa.Pipe.MTE3: "MTE"}.get(p)
            if key is not None:
                busy[key] += cm.cost(ins)
        out.append(busy)
    return out


def kernel_work(module: ModuleOp) -> dict[str, LaunchWork]:
    """:class:`LaunchWork` by kernel name for an ascend-level module carrying ``graph.work``
    (empty without it: a module that did not come through the compile driver)."""
    from cann.dialects.ascend import kernels

    table = _read_table(module)
    if table is None:
        return {}
    nodes, groups = table
    ks = kernels(module)
    names = [[n for n in fused_nodes(k) if n in nodes] for k in ks]
    # units: kernels connected by shared nodes (union-find over kernel indices)
    parent = list(range(len(ks)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[str, int] = {}
    for i, ns in enumerate(names):
        for n in ns:
            if n in first:
                parent[find(i)] = find(first[n])
            else:
                first[n] = i
    units: dict[int, list[int]] = {}
    for i, ns in enumerate(names):
        if ns:
            units.setdefault(find(i), []).append(i)
    soc = module.attributes.get("tile.soc")
    result: dict[str, LaunchWork] = {}
    for members in units.values():
        node_set = sorted({n for i in members for n in names[i]})
        g = groups.get(frozenset(node_set))
        total = _Work(g)  # exactly a fused group: its own record (intermediates are not compulsory)
        if g is None:
            total = _Work()
            for n in node_set:
                total.add(_Work(nodes[n]))
        compute = [i for i in members if not ks[i].kernel_name.startswith(CONVERSION_PREFIX)] or members
        if len(compute) == 1:
            parts = [total.v]
        else:
            busy = _static_busy([ks[i] for i in compute], soc.data if isinstance(soc, StringAttr) else "Ascend910")
            cols = {0: "M", 2: "V", 3: "V", 4: "V", 5: "MTE"}
            parts = [[0] * len(FIELDS) for _ in compute]
            for f, pipe in cols.items():
                for j, x in enumerate(split(total.v[f], [b[pipe] for b in busy])):
                    parts[j][f] = x
            for p in parts:
                p[1] = total.v[1] if p[0] else 0
        for i, p in zip(compute, parts):
            result[ks[i].kernel_name] = LaunchWork(*p)
    return result
