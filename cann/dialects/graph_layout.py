"""Graph ops of layout changes that ONNX spells as several ops (``graph`` dialect; registered in
:mod:`cann.dialects.graph`).

``graph.channel_shuffle`` is ShuffleNet's channel shuffle, exported as
``Reshape([N, g, C/g, *S]) -> Transpose(perm [0, 2, 1, 3, ...]) -> Reshape([N, C, *S])``; the
``graph-channel-shuffle`` pass (:mod:`cann.passes.graph_channel_shuffle`) recognizes it. As one op it
lowers in the device's NC1HWC0 layout (:mod:`cann.lowering.shuffle`) instead of two format conversions,
an ND transpose and a view.
"""

from __future__ import annotations

from xdsl.dialects.builtin import I64, IntegerAttr, TensorType
from xdsl.ir import SSAValue
from xdsl.irdl import IRDLOperation, ParsePropInAttrDict, irdl_op_definition, operand_def, prop_def, result_def, traits_def
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from cann.dialects.graph_base import _check_same_elt, _check_static, _elt, _expect_shape, _shape, i64_attr


def shuffle_source(c: int, group: int, j: int) -> int:
    """The input channel that output channel ``j`` of a channel shuffle of ``c`` channels in ``group``
    groups reads: the input seen as ``[group][c/group]``, transposed to ``[c/group][group]``."""
    per = c // group
    return (j % group) * per + j // group


@irdl_op_definition
class ChannelShuffleOp(IRDLOperation):
    """``graph.channel_shuffle %x {group = 4 : i64} : tensor<1x136x28x28xf16> -> tensor<1x136x28x28xf16>``

    Output channel ``j`` (axis 1) is input channel ``(j % group) * (C / group) + j // group``
    (:func:`shuffle_source`); every other axis is unchanged. ``x``: rank >= 2, ``C`` a multiple of
    ``group`` >= 1; the result has the type of ``x``."""

    name = "graph.channel_shuffle"
    x = operand_def(TensorType)
    res = result_def(TensorType)
    group = prop_def(IntegerAttr[I64])
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$x attr-dict `:` type($x) `->` type($res)"

    def __init__(self, x: SSAValue, group: int):
        super().__init__(operands=[x], result_types=[TensorType(_elt(x), list(_shape(x)))],
                         properties={"group": i64_attr(group)})

    def verify_(self) -> None:
        _check_static(self)
        _check_same_elt(self)
        s = _shape(self.x)
        g = self.group.value.data
        if len(s) < 2:
            raise VerifyException(f"'graph.channel_shuffle' needs a tensor of rank >= 2, got rank {len(s)}")
        if g < 1 or s[1] % g:
            raise VerifyException(f"'graph.channel_shuffle' group {g} does not divide the {s[1]} channels")
        _expect_shape(self, s)


GRAPH_LAYOUT_OPS = (ChannelShuffleOp,)
