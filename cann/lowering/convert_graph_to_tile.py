"""``convert-graph-to-tile``: graph-dialect model -> tile-dialect kernels and host program.

One kernel per graph op at this level (fusion is a later pass); each op's lowering lives in
``conv.py`` (Conv), ``gemm.py`` (Gemm), ``batch_matmul.py`` (MatMul of two tensors), ``vector.py``
(elementwise, BatchNormalization, pooling, Softmax, LRN) or ``data.py`` (format conversion, Concat,
Transpose, Reshape). Model inputs arrive in GM in their ONNX layout and dtype; model outputs leave in theirs (ND, float32): the conversions are
explicit ``trans_data`` kernels.
"""

from __future__ import annotations

import contextlib
import json
import math
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    DenseArrayBase,
    MemRefType,
    ModuleOp,
    i64,
    StringAttr,
    TensorType,
)
from xdsl.ir import Block, BlockArgument, Operation, Region, SSAValue
from xdsl.passes import ModulePass

from cann.codegen.om import FP16_PRECISION_MODES
from cann.codegen.om import PRECISION_MODES as OM_PRECISION_MODES
from cann.dialects import graph, main_function
from cann.dialects.tile import Space, SpaceAttr, ViewOp
from cann.errors import CannError, Diagnostic
from cann.hw.config import load_soc
from cann.lowering import cube, data, depthwise, gemm, grouped, vector
from cann.lowering import math as mathk
from cann.lowering.batch_matmul import batched_matmul
from cann.lowering.common import ND, DevTensor, Lowering, elem_type, loc_name, narrow, np_dtype
from cann.lowering.conv import conv2d
from cann.passes.keep_dtype import DEVICE_DTYPE, KEEP
from cann.tensor_trace import note

#: the device dtypes a keep-dtype boundary cast names
DEVICE_DTYPES = {"f32": np.dtype(np.float32), "f16": np.dtype(np.float16)}

#: device dtype of float tensors per precision mode (the modes of cann.codegen.om)
PRECISION_MODES = {m: np.float16 if m in FP16_PRECISION_MODES else np.float32 for m in OM_PRECISION_MODES}


def recorded_tiling(op: Operation) -> dict[str, int]:
    """The tiling a search pass recorded on graph op ``op`` (``tile.tiling``: field -> integer)."""
    attr = op.attributes.get("tile.tiling")
    return {k: v.value.data for k, v in attr.data.items()} if attr is not None else {}


def _ints(op: Operation, name: str) -> tuple[int, ...]:
    return tuple(op.properties[name].get_values())


def _int(op: Operation, name: str) -> int:
    return op.properties[name].value.data


def _float(op: Operation, name: str) -> float:
    return op.properties[name].value.data


def _shape(v: SSAValue) -> tuple[int, ...]:
    return tuple(v.type.get_shape())


class _Converter:
    def __init__(self, lw: Lowering, main_in: func.FuncOp):
        self.lw = lw
        self.values: dict[SSAValue, DevTensor] = {}
        self.consts: dict[SSAValue, np.ndarray] = {}
        self.main_in = main_in
        self._const_as: dict[tuple[SSAValue, str], DevTensor] = {}  # keep-dtype: constants per dtype

    def const(self, v: SSAValue | None) -> np.ndarray | None:
        if v is None:
            return None
        if v not in self.consts:
            where, needs = "", ()
            if isinstance(v.owner, Operation):
                where = loc_name(v.owner.location)
            elif isinstance(v, BlockArgument) and self.main_in.arg_attrs is not None:
                needs = (self.main_in.arg_attrs.data[v.index].data["graph.name"].data,)
                where = needs[0]
            raise CannError(diagnostics=[Diagnostic(where, "expected a constant operand (weights must be "
                                                           "initializers)", needs)])
        return self.consts[v]

    def tensor(self, v: SSAValue, loc) -> DevTensor:
        if v in self.values:
            return self.values[v]
        if v in self.consts:  # a constant used as a tensor operand
            arr = self.consts[v]
            if arr.dtype.kind not in "iu":  # integer constants are moved as they are (DMA only)
                arr = narrow(arr, self.lw.dtype)
            t = self.lw.constant(arr.reshape(-1), ND, arr.shape)
            self.values[v] = t
            return t
        raise CannError(loc_name(loc), "operand has no value")

    def lower_in(self, op: Operation, dtype: np.dtype) -> DevTensor | None:
        """Lower ``op`` with the device float dtype ``dtype`` (keep-dtype: a kept op computes in
        float32 amid float16 ones): its float operands computed in the other dtype are converted
        first (a ``vconv`` kernel; constants are narrowed again), for this op only."""
        lw, saved = self.lw, {}
        inner = {r for o in op.walk() for r in o.results}
        for v in dict.fromkeys(x for o in op.walk() for x in o.operands if x not in inner):
            t = self.values.get(v)
            if v in self.consts and (t is None or t.dtype != dtype) and self.consts[v].dtype.kind == "f":
                arr = narrow(self.consts[v], dtype)
                saved[v] = t
                self.values[v] = self._const_as.setdefault((v, dtype.name), lw.constant(arr.reshape(-1), ND, arr.shape))
            elif t is not None and t.dtype.kind == "f" and t.dtype != dtype and isinstance(v.owner, Operation):
                saved[v] = t
                self.values[v] = lw.as_format(t, t.fmt, dtype, op.location)
        old, lw.dtype = lw.dtype, dtype
        try:
            return self.lower(op)
        finally:
            lw.dtype = old
            for v, t in saved.items():
                if t is None:
                    del self.values[v]
                else:
                    self.values[v] = t

    def binary(self, op: Operation, kind: str) -> DevTensor:
        a, b = op.operands
        loc = op.location
        out_shape = _shape(op.results[0])
        ca, cb = self.consts.get(a), self.consts.get(b)
        if cb is None and ca is not None and kind in ("add", "mul"):
            a, b, ca, cb = b, a, cb, ca
        if cb is not None and ca is None:
            x = self.tensor(a, loc)
            if cb.size == 1:
                s = float(cb.reshape(-1)[0])
                if kind == "sub":
                    kind, s = "add", -s
                if kind == "div":
                    kind, s = "mul", 1.0 / s
                return vector.eltwise(self.lw, kind, loc, [x], [(kind + "s", "y", "x0", None, s)])
            if len(x.shape) == 4 and cb.size == x.shape[1] and _shape(a) == out_shape:
                vals = cb.reshape(-1).astype(np.float32)
                if kind == "sub":
                    kind, vals = "add", -vals
                if kind == "div":
                    kind, vals = "mul", 1.0 / vals
                return vector.eltwise(self.lw, kind, loc, [x], [(kind, "y", "x0", "c0")], [vals])
        xa, xb = self.tensor(a, loc), self.tensor(b, loc)
        if xa.shape != xb.shape:
            return mathk.binary(self.lw, kind, xa, xb, out_shape, loc)
        if xb.fmt != xa.fmt:
            xb = self.lw.as_format(xb, xa.fmt, None, loc)
        return vector.eltwise(self.lw, kind, loc, [xa, xb], [(kind, "y", "x0", "x1")])

    def lower(self, op: Operation, epilogue: cube.Epilogue | None = None) -> DevTensor | None:
        """The kernels of one graph op (``epilogue``: elementwise ops fused after a cube op).

        A tiling a knowledge base recorded (``tile.kb``) that the kernel refuses gives way to the
        default tiling when it came from the shipped file (``tile.kb_fallback``); from a user's file
        it is an error naming the file and the entry's signature (when the op lowers without it).
        """
        if "tile.kb" not in op.attributes:
            return self._lower(op, epilogue)
        residuals = list(epilogue.residuals) if epilogue is not None else None
        try:
            with self._transaction():
                return self._lower(op, epilogue)
        except CannError as e:
            if epilogue is not None:  # (the lowering converted them in place: undone)
                epilogue.residuals = residuals
            recorded = {k: op.attributes.pop(k) for k in ("tile.kb", "tile.tiling", "tile.kb_fallback")
                        if k in op.attributes}
            res = self._lower(op, epilogue)  # without the entry (an error of the op itself propagates)
            if "tile.kb_fallback" in recorded:
                return res
            op.attributes.update(recorded)  # (a fused group lowered op by op meets the entry again)
            source, tiling = recorded["tile.kb"].data, recorded_tiling(op)
            from cann.passes.tile_search_kb import OPS, signature

            why = e.diagnostics[0].message if e.diagnostics else str(e)
            raise CannError(source, f"{OPS[op.name]} entry '{signature(op)}': tiling {tiling} refused by "
                                    f"the kernel ({loc_name(op.location)}: {why})") from None

    @contextlib.contextmanager
    def _transaction(self):
        """A lowering undone when it raises: the kernels, host-program ops, conversions, kernel names
        and values it made are dropped (a retry makes them again under the same names)."""
        lw = self.lw
        kernels, names, converted, values = len(lw.kernels), dict(lw._names), dict(lw._converted), dict(self.values)
        last = lw.main.last_op
        try:
            yield
        except CannError:
            del lw.kernels[kernels:]
            lw._names, lw._converted, self.values = names, converted, values
            added = []
            o = last.next_op if last is not None else lw.main.first_op
            while o is not None:
                added.append(o)
                o = o.next_op
            for o in reversed(added):
                o.detach()
                o.erase()
            raise

    def _lower(self, op: Operation, epilogue: cube.Epilogue | None = None) -> DevTensor | None:
        lw, loc, name = self.lw, op.location, op.name
        out_shape = _shape(op.results[0]) if op.results else ()
        from cann.lowering import compare  # comparisons, bool logic, integer math, int/bool casts

        if compare.handles(op):
            return compare.lower(self, op)
        if name == "graph.fused":
            from cann.lowering.fused import lower_fused

            return lower_fused(self, op)
        if name == "graph.conv2d":
            if len(out_shape) != 4:
                raise CannError(loc_name(loc), "Conv: only 2-D convolutions are supported")
            w = self.const(op.w).astype(np.float32)
            if depthwise.is_depthwise(w.shape, _shape(op.x)[1], _int(op, "group")):
                y = depthwise.depthwise_conv2d(lw, self.tensor(op.x, loc), w, self.const(op.b), _ints(op, "strides"),
                                               _ints(op, "pads"), _ints(op, "dilations"), out_shape, loc,
                                               epilogue=epilogue, pins=recorded_tiling(op))
                if y is not None:
                    return y
            if 1 < _int(op, "group") < _shape(op.x)[1]:
                y = grouped.grouped_conv2d(lw, self.tensor(op.x, loc), w, self.const(op.b), _ints(op, "strides"),
                                           _ints(op, "pads"), _ints(op, "dilations"), _int(op, "group"), out_shape,
                                           loc, epilogue=epilogue, pins=recorded_tiling(op))
                if y is not None:
                    return y
            return conv2d(lw, self.tensor(op.x, loc), w, self.const(op.b), _ints(op, "strides"), _ints(op, "pads"),
                          _ints(op, "dilations"), _int(op, "group"), out_shape, loc, epilogue=epilogue,
                          pins=recorded_tiling(op))
        if name == "graph.conv_transpose":
            from cann.lowering.conv_transpose import conv_transpose

            return conv_transpose(lw, self.tensor(op.x, loc), self.const(op.w).astype(np.float32), self.const(op.b),
                                  _ints(op, "strides"), _ints(op, "pads"), _ints(op, "dilations"), _int(op, "group"),
                                  out_shape, loc, epilogue=epilogue)
        if name == "graph.resize":
            from cann.lowering.resize import resize

            return resize(lw, self.tensor(op.x, loc), op.mode.data, op.coordinate_transformation_mode.data,
                          op.nearest_mode.data, op.scale_values(), out_shape, loc)
        if name == "graph.gemm":
            if _int(op, "trans_a"):
                raise CannError(loc_name(loc), "Gemm: attribute transA=1 is not supported yet")
            b = self.const(op.b).astype(np.float32)
            b = (b.T if _int(op, "trans_b") else b) * _float(op, "alpha")
            c = self.const(op.c)
            bias = None
            if c is not None:
                if c.size not in (1, b.shape[1]):
                    raise CannError(loc_name(loc), f"Gemm: bias C of shape {list(c.shape)} is not supported yet")
                bias = np.broadcast_to(c.reshape(-1).astype(np.float32), (b.shape[1],)) * _float(op, "beta")
            return gemm.gemm(lw, self.tensor(op.a, loc), b, bias, loc, epilogue=epilogue, pins=recorded_tiling(op))
        if name == "graph.matmul":
            sa, sb = _shape(op.a), _shape(op.b)
            a2 = sa if len(sa) > 1 else (1,) + sa  # numpy.matmul: 1-D operands gain a dimension
            b2 = sb if len(sb) > 1 else sb + (1,)
            if op.b in self.consts and len(b2) == 2:  # [..., M, K] x constant [K, N]: one Gemm
                a = data.reshape(lw, self.tensor(op.a, loc), (int(np.prod(a2[:-1])), a2[-1]), loc)
                # B as stored: the weight layout narrows it to the device dtype through float32 itself
                y = gemm.gemm(lw, a, np.asarray(self.const(op.b)).reshape(b2), None, loc,
                              kernel_hint="matmul", epilogue=epilogue, pins=recorded_tiling(op))
                return data.reshape(lw, y, out_shape, loc) if y.shape != out_shape else y
            if epilogue is not None:
                raise CannError(loc_name(loc), "MatMul of two tensors takes no fused epilogue")
            a = data.reshape(lw, self.tensor(op.a, loc), a2, loc) if a2 != sa else self.tensor(op.a, loc)
            b = data.reshape(lw, self.tensor(op.b, loc), b2, loc) if b2 != sb else self.tensor(op.b, loc)
            full = tuple(np.broadcast_shapes(a2[:-2], b2[:-2])) + (a2[-2], b2[-1])
            y = batched_matmul(lw, a, b, full, loc)
            return data.reshape(lw, y, out_shape, loc) if full != out_shape else y
        if name == "graph.batch_norm":
            c = [self.const(v).astype(np.float32).reshape(-1) for v in (op.scale, op.bias, op.mean, op.var)]
            return vector.batch_norm(lw, self.tensor(op.x, loc), *c, _float(op, "epsilon"), loc)
        if name == "graph.relu":
            return vector.eltwise(lw, "relu", loc, [self.tensor(op.operands[0], loc)], [("relu", "y", "x0")])
        if name in ("graph.add", "graph.sub", "graph.mul", "graph.div"):
            return self.binary(op, name.split(".")[1])
        if name in ("graph.max_pool", "graph.avg_pool"):
            kind = "max" if name == "graph.max_pool" else "avg"
            cip = bool(_int(op, "count_include_pad")) if kind == "avg" else False
            return vector.pool(lw, self.tensor(op.x, loc), kind, _ints(op, "kernel_shape"), _ints(op, "strides"),
                               _ints(op, "pads"), _ints(op, "dilations"), cip, out_shape, loc)
        if name == "graph.global_avg_pool":
            return vector.global_avg_pool(lw, self.tensor(op.x, loc), loc)
        if name == "graph.softmax":
            if _int(op, "axis") != len(out_shape) - 1:  # another axis: reductions + broadcasting kernels
                return mathk.softmax(lw, self.tensor(op.operands[0], loc), _int(op, "axis"), loc)
            return vector.softmax(lw, self.tensor(op.operands[0], loc), _int(op, "axis"), loc)
        if name == "graph.lrn":
            return vector.lrn(lw, self.tensor(op.operands[0], loc), _int(op, "size"), _float(op, "alpha"),
                              _float(op, "beta"), _float(op, "bias"), loc)
        if name == "graph.concat":
            return data.concat(lw, [self.tensor(v, loc) for v in op.operands], _int(op, "axis"), out_shape, loc)
        if name == "graph.reshape":
            return data.reshape(lw, self.tensor(op.operands[0], loc), out_shape, loc)
        if name == "graph.transpose":
            return data.transpose(lw, self.tensor(op.operands[0], loc), _ints(op, "perm"), loc)
        if name == "graph.channel_shuffle":  # NC1HWC0 (shuffle.py); other ranks: ND reshape, transpose, reshape
            from cann.lowering.shuffle import channel_shuffle

            x, grp = self.tensor(op.x, loc), _int(op, "group")
            y = channel_shuffle(lw, x, grp, loc) if len(out_shape) == 4 else None
            if y is not None:
                return y
            n, c = out_shape[:2]
            split = data.reshape(lw, x, (n, grp, c // grp, *out_shape[2:]), loc)
            moved = data.transpose(lw, split, (0, 2, 1, *range(3, len(out_shape) + 1)), loc)
            return data.reshape(lw, moved, out_shape, loc)
        res = self.lower_math(op)
        if res is not None:
            return res
        raise CannError(loc_name(loc), f"no AI Core lowering for {name}")

    def scalar_or_tensor(self, v: SSAValue, loc):
        c = self.consts.get(v)
        if c is not None and c.size == 1:
            return float(np.asarray(c).reshape(-1)[0])
        return self.tensor(v, loc)

    def lower_math(self, op: Operation) -> DevTensor | None:
        """Elementwise math, reductions, Pad, Slice, LayerNorm, Cast (cann/lowering/math.py)."""
        lw, loc, name = self.lw, op.location, op.name
        kind = name.split(".", 1)[1]
        out_shape = _shape(op.results[0]) if op.results else ()
        if isinstance(op, graph._ElementwiseUnary):
            params = {k: _float(op, k) for k in getattr(op, "PARAMS", {})}
            if kind == "gelu":
                kind = "gelu_" + op.approximate.data
            return mathk.unary(lw, kind, self.tensor(op.operands[0], loc), params, loc)
        if kind in ("max", "min", "pow"):
            a, b = (self.scalar_or_tensor(v, loc) for v in op.operands)
            return mathk.binary(lw, kind, a, b, out_shape, loc)
        if kind == "reduce":
            if op.kind.data == "mean" and len(_shape(op.x)) == 4 and _ints(op, "axes") == (2, 3) and \
                    np_dtype(op.x.type.element_type).kind == "f":
                # ReduceMean over H and W (PyTorch dynamo's AdaptiveAvgPool2d(1)) is GlobalAveragePool:
                # the NC1HWC0 kernel, not a format conversion, a transpose and an ND reduction
                y = vector.global_avg_pool(lw, self.tensor(op.x, loc), loc)
                return y if _int(op, "keepdims") else lw.view(lw.as_format(y, ND, lw.dtype, loc), out_shape)
            return mathk.reduce(lw, self.tensor(op.x, loc), op.kind.data, _ints(op, "axes"), out_shape, loc)
        if kind == "pad":
            return mathk.pad(lw, self.tensor(op.x, loc), _ints(op, "pads"), op.mode.data, _float(op, "value"),
                             out_shape, loc)
        if kind == "slice":
            return mathk.slice_(lw, self.tensor(op.x, loc), _ints(op, "starts"), _ints(op, "ends"),
                                _ints(op, "steps"), out_shape, loc)
        if kind == "layer_norm":
            bias = self.tensor(op.bias, loc) if op.bias is not None else None
            return mathk.layer_norm(lw, self.tensor(op.x, loc), self.tensor(op.scale, loc), bias, _int(op, "axis"),
                                    _float(op, "epsilon"), loc)
        if kind == "expand":
            return mathk.broadcast_to(lw, mathk._nd(lw, self.tensor(op.x, loc), loc), out_shape, loc)
        if kind == "gather":  # cann/lowering/gather.py (constant or runtime indices)
            from cann.lowering.gather import lower_gather

            return lower_gather(self, op)
        if kind == "det":  # cann/lowering/det.py
            from cann.lowering.det import det

            return det(lw, self.tensor(op.x, loc), loc)
        if kind == "hardmax":  # cann/lowering/hardmax.py
            from cann.lowering.hardmax import hardmax

            return hardmax(lw, self.tensor(op.x, loc), _int(op, "axis"), loc)
        if kind == "where":  # cann/lowering/select.py (vsel)
            from cann.lowering.select import lower_where

            return lower_where(self, op)
        if kind == "cast" and DEVICE_DTYPE in op.attributes:  # a keep-dtype precision boundary
            t = self.tensor(op.x, loc)
            return lw.as_format(t, t.fmt, DEVICE_DTYPES[op.attributes[DEVICE_DTYPE].data], loc)
        if kind == "cast":
            # the device computes in the precision mode's dtype; a cast between float types changes
            # only the declared dtype, which the output conversion applies
            return self.tensor(op.x, loc)
        return None


def _exceeding_device_memory(main_in: func.FuncOp, soc, float_dtype: np.dtype) -> list[Diagnostic]:
    """One diagnostic per model input or op result whose tensor alone is larger than the SoC's
    device memory (``gm_bytes``), in its device dtype (floats in ``float_dtype``); results computed
    from such a tensor are its consequences, not reported again. No tiling can run such a model on
    one device, and lowering it would only take time."""
    def nbytes(v: SSAValue) -> int:
        if not isinstance(v.type, TensorType):
            return 0
        dt = np_dtype(v.type.element_type)
        return math.prod(v.type.get_shape()) * (float_dtype.itemsize if dt.kind == "f" else dt.itemsize)

    def message(v: SSAValue, what: str) -> str:
        shape = "x".join(map(str, v.type.get_shape()))
        return (f"{what} {shape} needs {nbytes(v)} bytes, more than the {soc.name} device memory "
                f"({soc.gm_bytes} bytes)")

    block, big, diags = main_in.body.block, set(), []
    names = main_in.arg_attrs.data if main_in.arg_attrs is not None else ()
    for arg in block.args:
        if nbytes(arg) > soc.gm_bytes:
            big.add(arg)
            name = names[arg.index].data["graph.name"].data if names else f"input {arg.index}"
            diags.append(Diagnostic(name, message(arg, "the model input")))
    for op in block.ops:
        if any(v in big for inner in op.walk() for v in inner.operands):
            big.update(op.results)
            continue
        for r in op.results:
            if nbytes(r) > soc.gm_bytes:
                big.update(op.results)
                diags.append(Diagnostic(loc_name(op.location), message(r, "the result")))
                break
    return diags


def convert_module(module: ModuleOp, soc_name: str, precision_mode: str,
                   tiling: dict[str, dict[str, int]] | None = None, aicore_num: int = 0, buffers: int = 1) -> None:
    """Rewrite ``module`` (graph dialect) in place into the tile-level module; ``buffers``: the copies of
    each refilled L0A / L0B / UB tile the tilings leave room for (:attr:`Lowering.buffers`, 1 to 3).

    Raises:
        CannError: an op or configuration the lowering does not support (naming the ONNX node).
    """
    if precision_mode not in PRECISION_MODES:
        raise CannError("--precision_mode", f"unknown precision mode '{precision_mode}' "
                                            f"(known: {', '.join(PRECISION_MODES)})")
    soc = load_soc(soc_name)
    lower_level = next((op.name for op in module.walk() if op.name.startswith(("tile.", "ascend."))), None)
    if lower_level is not None:
        raise CannError("convert-graph-to-tile", f"the input is not graph-level IR (it holds {lower_level}); "
                                                 "this pass lowers what the importer produces")
    main_in = main_function(module, "convert-graph-to-tile")
    block = Block()
    if aicore_num < 0 or aicore_num > soc.ai_core_count:
        raise CannError("--aicore_num", f"{aicore_num} cores requested; {soc.name} has {soc.ai_core_count}")
    if buffers not in (1, 2, 3):
        raise CannError("convert-graph-to-tile", f"buffers = {buffers}: 1, 2 or 3 copies of a tile")
    lw = Lowering(soc, np.dtype(PRECISION_MODES[precision_mode]), block, tiling or {},
                  cores=aicore_num or soc.ai_core_count, convert=data.trans_data, buffers=buffers)
    conv = _Converter(lw, main_in)
    in_block = main_in.body.block
    oversized = _exceeding_device_memory(main_in, soc, lw.dtype)
    if oversized:
        raise CannError.many(oversized)
    arg_types = []
    for arg in in_block.args:
        t = arg.type
        dt = np_dtype(t.element_type)
        mem = block.insert_arg(MemRefType(elem_type(dt), t.get_shape(), memory_space=SpaceAttr(Space.GM)),
                               len(block.args))
        arg_types.append(mem.type)
        conv.values[arg] = DevTensor(mem, tuple(t.get_shape()), ND, dt)
    base, f32 = lw.dtype, np.dtype(np.float32)
    mixed = any(KEEP in op.attributes for op in in_block.ops)  # keep-dtype: some ops stay float32
    outs: list[SSAValue] = []
    errors: list[Diagnostic] = []
    failed: set[SSAValue] = set()
    for op in in_block.ops:
        if isinstance(op, func.ReturnOp):
            if errors:
                break
            for v in op.operands:
                if v in conv.consts and v not in conv.values:  # a constant output keeps its own dtype
                    arr = conv.consts[v].astype(np_dtype(v.type.element_type))
                    conv.values[v] = lw.constant(arr.reshape(-1), ND, arr.shape)
                t = conv.tensor(v, op.location)
                final = lw.as_format(t, ND, np_dtype(v.type.element_type), op.location)
                shaped = MemRefType(elem_type(final.dtype), v.type.get_shape(), memory_space=SpaceAttr(Space.GM))
                view = ViewOp.create(operands=[final.mem], result_types=[shaped], properties={
                    "format": StringAttr(ND), "shape": DenseArrayBase.from_list(i64, list(v.type.get_shape()))})
                block.add_op(view)
                outs.append(view.res)
            continue
        if op.name == "graph.constant":
            conv.consts[op.results[0]] = np.asarray(graph.constant_value(op))
            continue
        # downstream of a reported problem (a graph.fused group reads its inputs inside its region)
        if any(v in failed for inner in op.walk() for v in inner.operands):
            failed.update(op.results)
            continue
        try:
            res = conv.lower_in(op, f32 if KEEP in op.attributes else base) if mixed else conv.lower(op)
        except CannError as e:
            errors.extend(e.diagnostics)
            failed.update(op.results)
            continue
        if res is not None:
            conv.values[op.results[0]] = res
    if errors:
        raise CannError.many(errors)
    block.add_op(func.ReturnOp(*outs))
    new_main = func.FuncOp("main", (arg_types, [v.type for v in outs]), Region(block),
                           arg_attrs=main_in.arg_attrs, res_attrs=main_in.res_attrs)
    for op in list(module.ops):
        module.body.block.detach_op(op)
    for k in lw.kernels:
        module.body.block.add_op(k)
    module.body.block.add_op(new_main)
    note("graph_buffers", dict(conv.values))  # (cann.accuracy: the GM buffer of each graph value)
    module.attributes["tile.soc"] = StringAttr(soc.name)
    module.attributes["tile.precision_mode"] = StringAttr(precision_mode)


@dataclass(frozen=True)
class ConvertGraphToTilePass(ModulePass):
    """Lower a graph-dialect model to tile-level kernels (one per op) and a host program.

    Options: ``soc`` (SoC description name), ``precision-mode`` (force_fp16, allow_fp32_to_fp16,
    must_keep_origin_dtype, force_fp32), ``tiling`` (JSON: kernel name -> {field: value}, pins a
    kernel's tiling, e.g. ``{"conv2d_0": {"m": 64}}``), ``aicore_num`` (cores a kernel may use;
    0: all of the SoC's, as ATC's ``--aicore_num``), ``buffers`` (1, 2 or 3: the copies of each
    refilled L0A / L0B / UB tile the tilings leave room for, so that ``tile-multi-buffer`` can
    multi-buffer them; -O1 plans 2).
    """

    name = "convert-graph-to-tile"
    soc: str = "Ascend910"
    precision_mode: str = "force_fp16"
    tiling: str = ""
    aicore_num: int = 0
    buffers: int = 1

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        try:
            pins = json.loads(self.tiling) if self.tiling else {}
        except json.JSONDecodeError as e:
            raise CannError("tiling", f"not valid JSON: {e}") from None
        convert_module(op, self.soc, self.precision_mode, pins, self.aicore_num, self.buffers)
