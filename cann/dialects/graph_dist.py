"""``graph.halo_exchange``: the one communication op of a spatially partitioned graph (issue 15).

``%y = graph.halo_exchange %x {id = 0 : i64, grid = array<i64: R, C>, coords = array<i64: r, c>,
extent = array<i64: H, W>, need = array<i64: h0, h1, w0, w1>} : tensor<NxCxhxw> -> tensor<NxCxh'xw'>``

A tensor of global spatial extent ``H x W`` is split over an ``R x C`` device grid: the device at
``coords`` (row ``r``, column ``c``) holds rows ``split(H, R)[r]`` by columns ``split(W, C)[c]``
(:func:`cann.passes.spatial.halo.split`: the first ``H % R`` slices one row longer) -- that is ``%x``.
``%y`` is the block ``need`` (half-open global rows ``[h0, h1)`` by columns ``[w0, w1)``), assembled from
``%x`` and the neighbours' slices. Every device runs the same sequence of exchanges; ``id`` numbers them
(0, 1, ...) so that the k-th exchange of every rank is one collective. ``need`` may reach only into the
8 neighbouring slices (two non-blocking neighbour alltoallv on a Cartesian communicator: rows, then
columns with the received rows, which carries the corners).
"""

from __future__ import annotations

from xdsl.dialects.builtin import I64, DenseArrayBase, IntegerAttr, TensorType
from xdsl.ir import SSAValue
from xdsl.irdl import IRDLOperation, ParsePropInAttrDict, irdl_op_definition, operand_def, prop_def, result_def
from xdsl.utils.exceptions import VerifyException

from cann.dialects.graph_base import _check_len, _check_static, _check_same_elt, _shape, i64_array, i64_attr
from cann.passes.spatial.halo import split


@irdl_op_definition
class HaloExchangeOp(IRDLOperation):
    """See the module docstring."""

    name = "graph.halo_exchange"
    x = operand_def(TensorType)
    res = result_def(TensorType)
    id = prop_def(IntegerAttr[I64])
    grid = prop_def(DenseArrayBase[I64])
    coords = prop_def(DenseArrayBase[I64])
    extent = prop_def(DenseArrayBase[I64])
    need = prop_def(DenseArrayBase[I64])
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$x attr-dict `:` type($x) `->` type($res)"

    def __init__(self, x: SSAValue, *, id: int, grid, coords, extent, need):
        n, c = _shape(x)[:2]
        t = TensorType(x.type.get_element_type(), (n, c, need[1] - need[0], need[3] - need[2]))
        super().__init__(operands=[x], result_types=[t], properties={
            "id": i64_attr(id), "grid": i64_array(grid), "coords": i64_array(coords), "extent": i64_array(extent),
            "need": i64_array(need)})

    def own(self) -> tuple[int, int, int, int]:
        """This device's block ``(h0, h1, w0, w1)`` of the global tensor (what ``%x`` holds)."""
        (R, C), (r, c), (H, W) = (tuple(a.get_values()) for a in (self.grid, self.coords, self.extent))
        (h0, h1), (w0, w1) = split(H, R)[r], split(W, C)[c]
        return h0, h1, w0, w1

    def verify_(self) -> None:
        _check_static(self)
        _check_same_elt(self)
        R, C = _check_len(self, "grid", 2)
        r, c = _check_len(self, "coords", 2)
        H, W = _check_len(self, "extent", 2)
        h0, h1, w0, w1 = _check_len(self, "need", 4)
        if self.id.value.data < 0:
            raise VerifyException(f"'graph.halo_exchange' id {self.id.value.data}: at least 0")
        if R < 1 or C < 1 or not (0 <= r < R and 0 <= c < C):
            raise VerifyException(f"'graph.halo_exchange' coords ({r}, {c}) outside the {R}x{C} grid")
        if H < R or W < C:
            raise VerifyException(f"'graph.halo_exchange' extent {H}x{W} cannot be split over a {R}x{C} grid")
        if not (0 <= h0 < h1 <= H and 0 <= w0 < w1 <= W):
            raise VerifyException(f"'graph.halo_exchange' need rows [{h0}, {h1}) x columns [{w0}, {w1}) is empty "
                                  f"or outside the {H}x{W} extent")
        xs, ys = _shape(self.x), _shape(self.res)
        oh0, oh1, ow0, ow1 = self.own()
        if len(xs) != 4 or xs[2:] != (oh1 - oh0, ow1 - ow0):
            raise VerifyException(f"'graph.halo_exchange' operand must be NxCx{oh1 - oh0}x{ow1 - ow0} (the slice of "
                                  f"device ({r}, {c})), got {'x'.join(map(str, xs))}")
        if ys != (*xs[:2], h1 - h0, w1 - w0):
            raise VerifyException(f"'graph.halo_exchange' result must be {xs[0]}x{xs[1]}x{h1 - h0}x{w1 - w0} (the "
                                  f"need block), got {'x'.join(map(str, ys))}")
        rows, cols = split(H, R), split(W, C)
        lo_h, hi_h = rows[max(r - 1, 0)][0], rows[min(r + 1, R - 1)][1]
        lo_w, hi_w = cols[max(c - 1, 0)][0], cols[min(c + 1, C - 1)][1]
        if h0 < lo_h or h1 > hi_h or w0 < lo_w or w1 > hi_w:
            raise VerifyException(
                f"'graph.halo_exchange' need rows [{h0}, {h1}) x columns [{w0}, {w1}) reaches beyond the neighbouring "
                f"slices (rows [{lo_h}, {hi_h}) x columns [{lo_w}, {hi_w})): the halo is wider than a neighbour's "
                "slice; use a coarser grid or a smaller exchange depth")
