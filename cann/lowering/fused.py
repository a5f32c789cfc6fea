"""Lowering of ``graph.fused`` groups (UB fusion) to one kernel each.

The group's elementwise ops become a vector program (:data:`cann.lowering.vector.Step` list):
group-internal values live in UB buffers (written in place when nothing later in the group reads
them), scalar constants become scalar operands, per-channel constants become one-repeat tables,
and values from outside the group are read from GM once per tile. A ``cube_epilogue`` runs the
program on each output tile of the Conv/Gemm between L0C -> UB and the single write to GM; an
``elementwise`` group is one vector kernel. A group the kernels cannot express (e.g. a
per-channel constant on a 2-D tensor in an elementwise group) is lowered op by op instead, with
the same results.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import SSAValue

from cann.dialects import graph
from cann.dialects.graph_fused import FusedOp
from cann.errors import CannError
from cann.lowering import vector
from cann.lowering.common import DevTensor, loc_name
from cann.lowering.cube import Epilogue

_COMMUTATIVE = {"add", "mul", "max", "min"}


class _Program:
    def __init__(self, cv, ops, names: dict[SSAValue, str], input_prefix: str, out_name: str):
        self.cv, self.names = cv, names
        self.tiny = 1e-30 if cv.lw.dtype == np.float32 else 6.2e-5  # as cann.lowering.math.unary
        self.steps: list[tuple] = []
        self.tables: list[np.ndarray] = []
        self.inputs: list[DevTensor] = []
        self.prefix = input_prefix
        self._tmp = 0
        self.remaining: dict[SSAValue, int] = {}
        for op in ops:
            for v in op.operands:
                self.remaining[v] = self.remaining.get(v, 0) + 1
        for i, op in enumerate(ops):
            self._op(op, out_name if i == len(ops) - 1 else None)

    def operand(self, v: SSAValue):
        """A buffer name, or a float for a scalar constant."""
        if v in self.names:
            return self.names[v]
        c = self.cv.consts.get(v)
        if c is not None:
            c = np.asarray(c, np.float64)
            if c.size == 1:
                return float(c.reshape(-1)[0])
            self.tables.append(c.reshape(-1).astype(np.float32))
            return f"c{len(self.tables) - 1}"
        self.inputs.append(self.cv.tensor(v, v.owner.location if hasattr(v.owner, "location") else None))
        self.names[v] = f"{self.prefix}{len(self.inputs) - 1}"
        return self.names[v]

    def _dst(self, op, chain: SSAValue | None, out_name: str | None) -> str:
        if out_name is not None:
            return out_name
        if chain is not None and self.remaining.get(chain, 0) == 0 and self.names.get(chain, "")[:1] not in "rxc":
            return self.names[chain]  # nothing later reads it: overwrite in place
        self._tmp += 1
        return f"t{self._tmp}"

    def _op(self, op, out_name: str | None) -> None:
        for v in op.operands:
            self.remaining[v] -= 1
        internal = [v for v in op.operands if v in self.names and self.names[v][0] not in "rxc"]
        chain = internal[0] if internal else None
        emit = self.steps.append
        if isinstance(op, (graph.ReluOp, graph.SigmoidOp, graph.ClipOp)):
            x = self.operand(op.operands[0])
            d = self._dst(op, chain, out_name)
            if isinstance(op, graph.ReluOp):
                emit(("relu", d, x))
            elif isinstance(op, graph.ClipOp):  # max(x, lo), then min(., hi)
                lo, hi = op.min.value.data, op.max.value.data
                src = x
                if lo != float("-inf"):
                    emit(("maxs", d, src, None, lo))
                    src = d
                if hi != float("inf"):
                    emit(("mins", d, src, None, hi))
                    src = d
                if src != d:
                    emit(("mov", d, src))
            else:  # 1 / (1 + exp(-x))
                emit(("muls", d, x, None, -1.0))
                emit(("exp", d, d))
                emit(("adds", d, d, None, 1.0))
                emit(("rec", d, d))
        elif isinstance(op, graph.BatchNormOp):
            x = self.operand(op.x)
            gamma, beta, mean, var = (np.asarray(self.cv.consts[v], np.float64).reshape(-1)
                                      for v in (op.scale, op.bias, op.mean, op.var))
            s = gamma / np.sqrt(var + op.epsilon.value.data)
            self.tables += [s.astype(np.float32), (beta - mean * s).astype(np.float32)]
            d = self._dst(op, chain, out_name)
            emit(("mul", d, x, f"c{len(self.tables) - 2}"))
            emit(("add", d, d, f"c{len(self.tables) - 1}"))
        elif op.name != "graph.batch_norm" and len(op.operands) == 1:  # the vector programs of cann.lowering.math
            from cann.lowering.math import unary_program

            kind = op.name.split(".")[1]
            if kind == "gelu":
                kind = "gelu_" + op.approximate.data
            params = {k: op.param(k) for k in getattr(op, "PARAMS", {})}
            steps, consts = unary_program(kind, params, self.tiny)
            if consts:
                raise CannError("", f"{kind} needs constant buffers a fused kernel does not carry")
            x = self.operand(op.operands[0])
            d = self._dst(op, chain, out_name)
            # the programs read x after writing y: never in place (u*: scratch shared by the ops)
            y = d if d != x else "u4"
            rename = {"x0": x, "y": y, **{f"t{i}": f"u{i}" for i in range(4)}}
            for st in steps:
                emit(tuple(rename.get(v, v) if isinstance(v, str) else v for v in st))
            if y != d:
                emit(("mov", d, y))
        else:
            kind = op.name.split(".")[1]
            a, b = (self.operand(v) for v in op.operands)
            d = self._dst(op, chain, out_name)
            if isinstance(b, float) or isinstance(a, float):
                t, s = (a, b) if isinstance(b, float) else (b, a)
                if kind == "add":
                    emit(("adds", d, t, None, s))
                elif kind == "mul":
                    emit(("muls", d, t, None, s))
                elif kind == "sub":
                    emit(("adds", d, t, None, -s) if isinstance(b, float) else ("muls", d, t, None, -1.0))
                    if not isinstance(b, float):
                        emit(("adds", d, d, None, s))
                elif kind == "div" and isinstance(b, float):
                    emit(("muls", d, t, None, 1.0 / s))
                else:  # s / x
                    emit(("rec", d, t))
                    emit(("muls", d, d, None, s))
            elif a.startswith("c"):  # a table must be the second operand (read with repeat stride 0)
                if kind in _COMMUTATIVE:
                    emit((kind, d, b, a))
                elif kind == "sub":  # c - x
                    emit(("muls", d, b, None, -1.0))
                    emit(("add", d, d, a))
                else:  # c / x
                    emit(("rec", d, b))
                    emit(("mul", d, d, a))
            else:
                emit((kind, d, a, b))
        self.names[op.results[0]] = out_name or self.steps[-1][1]


def lower_fused(cv, op: FusedOp) -> DevTensor:
    """Lower one fused group (see the module docstring); ``cv`` is the graph->tile converter."""
    ops = op.ops
    lw = cv.lw
    nodes = [_node(o) for o in ops]
    try:
        with lw.attempt():
            res = _lower_group(cv, op, ops)
    except CannError:
        res = None
        for o in ops:  # not expressible as one kernel: the same ops, one kernel each
            res = cv.lower(o)
            cv.values[o.results[0]] = res
        return res
    k = lw.kernels[-1]
    from xdsl.dialects.builtin import ArrayAttr, StringAttr

    k.attributes["tile.fusion"] = StringAttr(op.kind.data)
    k.attributes["tile.fused_nodes"] = ArrayAttr([StringAttr(n) for n in nodes])
    return res


def _lower_group(cv, op: FusedOp, ops: list) -> DevTensor:
    """The fused group as one kernel (raises CannError when it is not expressible as one)."""
    lw = cv.lw
    if op.kind.data == "cube_epilogue":
        head = ops[0]
        prog = _Program(cv, ops[1:], {head.results[0]: "acc"}, "r", "acc")
        res = cv.lower(head, epilogue=Epilogue(prog.steps, prog.tables, prog.inputs))
    elif op.kind.data == "reduction":  # elementwise producers + Softmax: one row kernel
        prog = _Program(cv, ops[:-1], {}, "x", "y")
        if prog.tables:
            raise CannError("", "per-channel constants in a softmax prologue")
        res = vector.softmax(lw, prog.inputs[0], ops[-1].axis.value.data, op.location, prog.steps, prog.inputs)
    else:
        prog = _Program(cv, ops, {}, "x", "y")
        res = vector.eltwise(lw, "fused_eltwise", op.location, prog.inputs, prog.steps, prog.tables)
    return res


def _node(op) -> str:
    return loc_name(op.location) or op.name
