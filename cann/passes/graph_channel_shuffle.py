"""``graph-channel-shuffle``: recognize ShuffleNet's channel shuffle as one ``graph.channel_shuffle``.

ONNX has no channel-shuffle op; exporters write it as

    %a = graph.reshape %x : tensor<NxCx[S]> -> tensor<Nxgx(C/g)x[S]>
    %b = graph.transpose %a {perm = [0, 2, 1, 3, ...]} : ... -> tensor<Nx(C/g)xgx[S]>
    %y = graph.reshape %b : ... -> tensor<NxCx[S]>

(``[S]``: the same trailing axes, H and W in ShuffleNet). The pass replaces ``%y`` by
``graph.channel_shuffle %x {group = g}`` (:mod:`cann.dialects.graph_layout`), which lowers in the NC1HWC0
layout (:mod:`cann.lowering.shuffle`) instead of two format conversions and an ND transpose. The
reshape and transpose are erased when nothing else uses them. Anything else -- a transpose of other
axes, reshapes that split or merge other axes, a result shape other than ``x``'s -- is left alone.
The pass is idempotent.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern, op_type_rewrite_pattern

from cann.dialects import graph as g
from cann.dialects.graph_layout import ChannelShuffleOp


def shuffle_group(y: g.ReshapeOp) -> int | None:
    """The group count when ``y`` ends a Reshape-Transpose-Reshape channel shuffle, else None."""
    t = y.x.owner
    if not isinstance(t, g.TransposeOp):
        return None
    a = t.x.owner
    if not isinstance(a, g.ReshapeOp):
        return None
    xs, split, out = g._shape(a.x), g._shape(a.res), g._shape(y.res)
    if len(xs) < 2 or out != xs or len(split) != len(xs) + 1:
        return None
    n, c, rest = xs[0], xs[1], xs[2:]
    grp, per = split[1], split[2]
    if split[0] != n or split[3:] != rest or grp * per != c:
        return None
    if list(g._ints(t.perm)) != [0, 2, 1, *range(3, len(split))]:
        return None
    return grp


class ChannelShufflePattern(RewritePattern):
    """``reshape(transpose(reshape(x)))`` over the channel axis -> ``graph.channel_shuffle x``."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: g.ReshapeOp, rewriter: PatternRewriter) -> None:
        grp = shuffle_group(op)
        if grp is None:
            return
        t = op.x.owner
        a = t.x.owner
        new = ChannelShuffleOp(a.x, grp)
        if op.location is not None:
            new.location = op.location
        rewriter.replace(op, new)
        if not t.res.uses:
            rewriter.erase(t)
            if not a.res.uses:
                rewriter.erase(a)


@dataclass(frozen=True)
class GraphChannelShufflePass(ModulePass):
    """Replace Reshape-Transpose-Reshape channel shuffles by ``graph.channel_shuffle``."""

    name = "graph-channel-shuffle"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(ChannelShufflePattern(), apply_recursively=False).rewrite_module(op)
