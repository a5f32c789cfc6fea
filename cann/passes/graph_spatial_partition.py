"""``graph-spatial-partition{grid=RxC depth=D}``: split the H and W axes of a convolutional network over an
R x C device grid, with explicit halo exchanges (issue 15).

``@main`` is replaced by one function per device, ``@main_r<r>_c<c>`` (row-major, rank ``r*C + c``), of the
same signature shape but with every image-shaped tensor cut to that device's block: the device at ``(r, c)``
owns rows ``split(H, R)[r]`` and columns ``split(W, C)[c]`` of every tensor (uneven splits: the first
``H % R`` slices one row longer, :func:`cann.passes.spatial.halo.split`). Inputs arrive and outputs leave as
owned blocks. Before a layer whose window reads beyond the block (a Conv, pooling, ConvTranspose, a crop,
a nearest-neighbour upsampling), a ``graph.halo_exchange`` (:mod:`cann.dialects.graph_dist`) assembles the
block the layer reads from the neighbours' slices; the layer then runs on it with its pads rewritten to
local ones (interior borders get none, image borders keep the model's), so each device computes exactly
its block of the unpartitioned result. Layers whose reads stay inside the block (1x1 convolutions, pooling
windows aligned with the split, elementwise ops, BatchNorm, channel Concat, skip-connection Adds) get no
exchange.

``depth``: window layers per exchange. With ``depth=D`` only the inputs of every D-th window layer (in
program order) are exchanged; the layers in between compute a wider block (the deeper halo of the fused
chain, :func:`cann.passes.spatial.halo.chain_read_ranges`) redundantly, trading compute for fewer messages
(MPI4DL's halo-D2). ``depth=1`` exchanges before every window layer that needs it.

Ops that need the whole image (GlobalAveragePool, Reshape/Flatten, Gemm/MatMul, reductions or Softmax
over H or W, Transpose, non-constant or reflect padding, linear Resize) are errors naming the node. A
halo wider than a neighbour's slice is an error (the exchange reaches only the 8 neighbours).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import VerifyException

from cann.dialects import graph, graph_int, main_function
from cann.dialects.graph_base import _ints, _shape, i64_array
from cann.dialects.graph_dist import HaloExchangeOp
from cann.errors import CannError, Diagnostic
from cann.passes.spatial.halo import EMPTY, AxisOp, split

Block2 = tuple[tuple[int, int], tuple[int, int]]  # ((h0, h1), (w0, w1))

_POINTWISE = (graph._ElementwiseUnary, graph._Binary, graph.BatchNormOp, graph.CastOp, graph.WhereOp,
              graph.LRNOp, graph_int._BoolBinary, graph_int.NotOp, graph_int.RoundOp, graph_int.SignOp,
              graph_int.IsNaNOp, graph_int.IsInfOp, graph_int.ModOp)


def parse_grid(text: str) -> tuple[int, int]:
    """``"RxC"`` -> ``(R, C)``; ValueError naming the text otherwise."""
    m = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*", text)
    if not m or int(m[1]) < 1 or int(m[2]) < 1:
        raise ValueError(f"'{text}': the device grid is ROWSxCOLUMNS with both at least 1, e.g. 2x2")
    return int(m[1]), int(m[2])


def _where(op: Operation) -> str:
    desc = getattr(op.location, "desc", None)  # loc("node name") from the importer
    return getattr(desc, "data", None) or op.name


def _hull(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    if a == EMPTY:
        return b
    if b == EMPTY:
        return a
    return min(a[0], b[0]), max(a[1], b[1])


def _inside(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return b[0] <= a[0] and a[1] <= b[1]


def axis_ops(op: Operation) -> tuple[AxisOp, AxisOp] | None:
    """The per-axis (H, W) index maps of a window-like op (None for a pointwise op); CannError for an op that
    needs the whole image."""
    where = _where(op)
    if isinstance(op, (graph.Conv2DOp, graph.MaxPoolOp, graph.AvgPoolOp)):
        k = _shape(op.w)[2:] if isinstance(op, graph.Conv2DOp) else _ints(op.kernel_shape)
        s, p, d = _ints(op.strides), _ints(op.pads), _ints(op.dilations)
        ceil = bool(getattr(op, "ceil_mode", None) and op.ceil_mode.value.data)
        if isinstance(op, graph.AvgPoolOp) and ceil and op.count_include_pad.value.data:
            raise CannError(where, "AveragePool with ceil_mode and count_include_pad cannot be split spatially")
        return tuple(AxisOp("window", kernel=k[i], stride=s[i], dilation=d[i], pad_begin=p[i], pad_end=p[i + 2],
                            ceil_mode=ceil) for i in range(2))
    if isinstance(op, graph.ConvTransposeOp):
        k, s, p, d = _shape(op.w)[2:], _ints(op.strides), _ints(op.pads), _ints(op.dilations)
        if min(p) < 0:
            raise CannError(where, "a ConvTranspose with a negative end pad cannot be split spatially")
        return tuple(AxisOp("transpose", kernel=k[i], stride=s[i], dilation=d[i], pad_begin=p[i], pad_end=p[i + 2],
                            output_padding=_ints(op.output_padding)[i]) for i in range(2))
    if isinstance(op, graph.PadOp):
        p, r = _ints(op.pads), len(_shape(op.x))
        if not (p[2] or p[3] or p[2 + r] or p[3 + r]):
            return None
        if op.mode.data != "constant" or min(p[2], p[3], p[2 + r], p[3 + r]) < 0:
            raise CannError(where, f"Pad of H or W in mode '{op.mode.data}' (or cropping) needs the whole image")
        return (AxisOp("window", pad_begin=p[2], pad_end=p[2 + r]), AxisOp("window", pad_begin=p[3], pad_end=p[3 + r]))
    if isinstance(op, graph.SliceOp):
        st, en, sp = _ints(op.starts), _ints(op.ends), _ints(op.steps)
        if sp[2] != 1 or sp[3] != 1:
            raise CannError(where, "a Slice of H or W with a step other than 1 cannot be split spatially")
        return tuple(AxisOp("crop", offset=st[i], size=en[i] - st[i]) for i in (2, 3))
    if isinstance(op, graph.ResizeOp):
        sc = op.scale_values()
        if (op.mode.data != "nearest" or op.coordinate_transformation_mode.data != "asymmetric"
                or op.nearest_mode.data != "floor" or any(s != int(s) or s < 1 for s in sc)):
            raise CannError(where, "only nearest-neighbour Resize by whole scales (asymmetric, floor) can be split "
                                   "spatially")
        return tuple(AxisOp("upsample", scale=int(s)) for s in sc)
    if isinstance(op, _POINTWISE):
        return None
    if isinstance(op, graph.ConcatOp) and op.axis.value.data not in (2, 3):
        return None
    if isinstance(op, (graph.SoftmaxOp, graph.HardmaxOp)) and op.axis.value.data in (1,):
        return None
    raise CannError(where, f"'{op.name}' needs the whole image: it cannot follow a spatially split tensor "
                           "(spatial partitioning covers convolutions, pooling, ConvTranspose, crops, nearest "
                           "upsampling, BatchNorm, elementwise ops and channel Concat)")


@dataclass
class _Plan:
    """The per-rank regions of one function: ``comp[v]`` the block rank computes of value ``v``,
    ``avail[v]`` the block it holds after ``v``'s exchange (== comp when none)."""

    comp: dict[SSAValue, Block2]
    avail: dict[SSAValue, Block2]


class _Partitioner:
    def __init__(self, main: func.FuncOp, R: int, C: int, depth: int):
        self.main, self.R, self.C, self.depth = main, R, C, depth
        self.ops = list(main.body.block.ops)
        self.ret = self.ops[-1]
        self.spatial: set[SSAValue] = set()
        self.maps: dict[Operation, tuple[AxisOp, AxisOp] | None] = {}
        self.exchange_points: set[SSAValue] = set()
        self._classify()

    def where(self, v: SSAValue) -> str:
        """The node that defines ``v``, or ``input 'NAME'`` for a model input."""
        if isinstance(v.owner, Operation):
            return _where(v.owner)
        attrs = self.main.arg_attrs
        i = v.index
        d = attrs.data[i] if attrs is not None and i < len(attrs.data) else None
        name = d.data.get("graph.name") if d is not None else None
        return f"input '{name.data}'" if name is not None else f"input {i}"

    def _extent(self, v: SSAValue) -> tuple[int, int]:
        s = _shape(v)
        return s[2], s[3]

    def _classify(self) -> None:
        problems = []
        for a in self.main.body.block.args:
            s = _shape(a)
            if len(s) != 4:
                raise CannError("graph-spatial-partition", f"input of shape {'x'.join(map(str, s))}: spatial "
                                                           "partitioning needs 4-D NCHW inputs")
            self.spatial.add(a)
        window_count = 0
        for op in self.ops[:-1]:
            if not any(o in self.spatial for o in op.operands):
                continue
            try:
                m = axis_ops(op)
            except CannError as e:
                problems.extend(e.diagnostics)
                continue
            x = op.operands[0]
            if m is not None and x not in self.spatial:
                problems.append(Diagnostic(_where(op), "the windowed operand is not the split image"))
                continue
            for o in op.operands if m is None else ():  # a window op's other operands are weights
                if o not in self.spatial and len(_shape(o)) == 4 and _shape(o)[2:] != (1, 1):
                    problems.append(Diagnostic(_where(op), f"operand of shape {'x'.join(map(str, _shape(o)))} "
                                               "has image extent but is not split (a constant image?)"))
            if len(op.results) != 1 or len(_shape(op.results[0])) != 4:
                problems.append(Diagnostic(_where(op), f"'{op.name}' does not give one 4-D image"))
                continue
            self.maps[op] = m
            self.spatial.add(op.results[0])
            if m is not None:
                if window_count % self.depth == 0:
                    self.exchange_points.add(x)
                window_count += 1
        if problems:
            raise CannError.many(problems)
        for v in self.spatial:
            H, W = self._extent(v)
            if H < self.R or W < self.C:
                raise CannError(self.where(v), f"image {H}x{W} cannot be split over a {self.R}x{self.C} grid")

    def own(self, v: SSAValue, r: int, c: int) -> Block2:
        H, W = self._extent(v)
        return split(H, self.R)[r], split(W, self.C)[c]

    def reads(self, op: Operation, out: Block2) -> Block2:
        m = self.maps[op]
        if m is None:
            return out
        x = op.operands[0]
        H, W = self._extent(x)
        return m[0].read_range(H, out[0]), m[1].read_range(W, out[1])

    def plan(self, r: int, c: int) -> _Plan:
        demand: dict[SSAValue, Block2] = {}

        def add(v, blk):
            old = demand.get(v, (EMPTY, EMPTY))
            demand[v] = (_hull(old[0], blk[0]), _hull(old[1], blk[1]))

        for v in self.ret.operands:
            if v in self.spatial:
                add(v, self.own(v, r, c))
        comp, avail = {}, {}
        for op in reversed(self.ops[:-1]):
            if op not in self.maps:
                continue
            v = op.results[0]
            if v in self.exchange_points or v not in demand:
                comp[v] = self.own(v, r, c)
            else:
                comp[v] = demand[v]
            if EMPTY in comp[v]:
                raise CannError(_where(op), f"device ({r}, {c}) would compute an empty block")
            rd = self.reads(op, comp[v])
            if EMPTY in rd:
                raise CannError(_where(op), f"device ({r}, {c}) reads nothing of its input (a crop outside its "
                                            "slice); use a coarser grid")
            for o in op.operands:
                if o in self.spatial:
                    add(o, rd)
        for a in self.main.body.block.args:
            comp[a] = self.own(a, r, c)
        for v, blk in comp.items():
            d = demand.get(v)
            if d is None or (_inside(d[0], blk[0]) and _inside(d[1], blk[1])):
                avail[v] = blk
            elif v in self.exchange_points or v in self.main.body.block.args:
                avail[v] = d
            else:
                raise AssertionError("a computed block misses its demand")  # comp = demand for the others
        return _Plan(comp, avail)

    def build(self, r: int, c: int, exchange_ids: dict[SSAValue, int]) -> func.FuncOp:
        plan = self.plan(r, c)
        args = self.main.body.block.args
        block = Block(arg_types=[self._type(a, plan.comp[a]) for a in args])
        vmap: dict[SSAValue, SSAValue] = {}
        held: dict[SSAValue, Block2] = {}

        def define(v: SSAValue, new: SSAValue):
            vmap[v], held[v] = new, plan.comp[v]
            if v in exchange_ids:  # every device takes part (it may only send: need == its own block)
                (h0, h1), (w0, w1) = plan.avail[v]
                ex = HaloExchangeOp(new, id=exchange_ids[v], grid=(self.R, self.C), coords=(r, c),
                                    extent=self._extent(v), need=(h0, h1, w0, w1))
                try:
                    ex.verify()
                except VerifyException as e:
                    raise CannError(self.where(v), f"device ({r}, {c}): {str(e).splitlines()[0]}") from None
                block.add_op(ex)
                vmap[v], held[v] = ex.res, plan.avail[v]

        def operand(v: SSAValue, want: Block2) -> SSAValue:
            if v not in self.spatial:
                return vmap.get(v, v)
            have = held[v]
            if have == want:
                return vmap[v]
            assert _inside(want[0], have[0]) and _inside(want[1], have[1])
            s = _shape(v)
            starts = (0, 0, want[0][0] - have[0][0], want[1][0] - have[1][0])
            ends = (s[0], s[1], starts[2] + want[0][1] - want[0][0], starts[3] + want[1][1] - want[1][0])
            sl = graph.SliceOp(vmap[v], starts, ends, (1, 1, 1, 1))
            block.add_op(sl)
            return sl.res

        for a, new in zip(args, block.args):
            define(a, new)
        for op in self.ops[:-1]:
            if op not in self.maps:
                new = op.clone(vmap)
                block.add_op(new)
                continue
            out = plan.comp[op.results[0]]
            rd = self.reads(op, out)
            operands = [operand(o, rd) for o in op.operands]
            new = self._local_op(op, operands, rd, out)
            if isinstance(new, tuple):
                for extra in new[:-1]:
                    block.add_op(extra)
                new = new[-1]
            block.add_op(new)
            define(op.results[0], new.results[0])
        results = [operand(v, self.own(v, r, c)) for v in self.ret.operands]
        block.add_op(func.ReturnOp(*results))
        f = func.FuncOp(f"main_r{r}_c{c}", ([a.type for a in block.args], [v.type for v in results]),
                        Region(block), arg_attrs=self.main.arg_attrs, res_attrs=self.main.res_attrs)
        return f

    @staticmethod
    def _type(v: SSAValue, blk: Block2) -> TensorType:
        s = _shape(v)
        return TensorType(v.type.get_element_type(), (s[0], s[1], blk[0][1] - blk[0][0], blk[1][1] - blk[1][0]))

    def _local_op(self, op: Operation, operands, rd: Block2, out: Block2):
        t = self._type(op.results[0], out)
        props = dict(op.properties)
        m = self.maps[op]
        where = _where(op)
        if m is not None:
            n_out = [out[i][1] - out[i][0] for i in range(2)]
            n_in = [rd[i][1] - rd[i][0] for i in range(2)]
            kind = m[0].kind
            if kind == "window":
                pb = [rd[i][0] + m[i].pad_begin - out[i][0] * m[i].stride for i in range(2)]
                pe = [(n_out[i] - 1) * m[i].stride + m[i].extent - n_in[i] - pb[i] for i in range(2)]
                if min(pb + pe) < 0:
                    raise CannError(where, f"local pads {pb + pe} negative: this split is not supported")
                if isinstance(op, graph.PadOp):
                    p = list(_ints(op.pads))
                    p[2], p[3], p[6], p[7] = pb[0], pb[1], pe[0], pe[1]
                    props["pads"] = i64_array(p)
                else:
                    props["pads"] = i64_array((pb[0], pb[1], pe[0], pe[1]))
                    if "ceil_mode" in props:
                        props["ceil_mode"] = graph.i64_attr(0)
            elif kind == "transpose":
                pb = [out[i][0] + m[i].pad_begin - rd[i][0] * m[i].stride for i in range(2)]
                pe = [(n_in[i] - 1) * m[i].stride + m[i].extent - pb[i] - n_out[i] for i in range(2)]
                if min(pb) < 0:
                    raise CannError(where, f"local begin pads {pb} negative: this split is not supported")
                props["pads"] = i64_array((pb[0], pb[1], pe[0], pe[1]))
                props["output_padding"] = i64_array((0, 0))
            elif kind == "crop":
                s = _shape(operands[0])
                starts = (*_ints(op.starts)[:2], out[0][0] + m[0].offset - rd[0][0], out[1][0] + m[1].offset - rd[1][0])
                ends = (*_ints(op.ends)[:2], starts[2] + n_out[0], starts[3] + n_out[1])
                assert ends[2] <= s[2] and ends[3] <= s[3]
                props["starts"], props["ends"] = i64_array(starts), i64_array(ends)
            elif kind == "upsample":
                full = [n_in[i] * m[i].scale for i in range(2)]
                s = _shape(op.results[0])
                up = op.create(operands=operands, result_types=[TensorType(t.get_element_type(), (*s[:2], *full))],
                               properties=props, attributes=dict(op.attributes), location=op.location)
                lo = [out[i][0] - rd[i][0] * m[i].scale for i in range(2)]
                if lo == [0, 0] and full == n_out:
                    return up
                sl = graph.SliceOp(up.res, (0, 0, lo[0], lo[1]), (s[0], s[1], lo[0] + n_out[0], lo[1] + n_out[1]),
                                   (1, 1, 1, 1))
                return up, sl
        return op.create(operands=operands, result_types=[t], properties=props, attributes=dict(op.attributes),
                         location=op.location)


@dataclass(frozen=True)
class GraphSpatialPartitionPass(ModulePass):
    """Split the model's image over a ``grid`` of ``RxC`` devices (rows split H, columns split W): one
    function per device with ``graph.halo_exchange`` ops every ``depth`` window layers (at least 1).

    See the module docstring."""

    name = "graph-spatial-partition"

    grid: str = "1x1"
    depth: int = 1

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        try:
            R, C = parse_grid(self.grid)
        except ValueError as e:
            raise CannError(f"{self.name}{{grid}}", str(e)) from None
        if self.depth < 1:
            raise CannError(f"{self.name}{{depth}}", f"{self.depth}: window layers per exchange, at least 1")
        main = main_function(op, self.name)
        part = _Partitioner(main, R, C, self.depth)
        # exchange ids: the program order of the values exchanged (the same on every device)
        ids: dict[SSAValue, int] = {}
        order = list(main.body.block.args) + [o.results[0] for o in part.ops[:-1] if o in part.maps]
        needed = set()
        for r in range(R):
            for c in range(C):
                plan = part.plan(r, c)
                needed |= {v for v in plan.avail if plan.avail[v] != plan.comp[v]}
        for v in order:
            if v in needed:
                ids[v] = len(ids)
        funcs = [part.build(r, c, ids) for r in range(R) for c in range(C)]
        for f in funcs:
            op.body.block.insert_op_before(f, main)
        main.detach()
        main.erase()
