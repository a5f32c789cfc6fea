"""Shared machinery of the graph -> tile lowering: device tensors, the lowering context and the
kernel builder.

Device tensors live in global memory (GM) in one of two formats:

* ``ND``: the logical shape in C order (NCHW for 4-D tensors);
* ``NC1HWC0``: 4-D activations as ``[N][C1][H][W][C0]`` with ``C0 = cube.n0`` (16) and
  ``C1 = ceil(C / C0)``; padding channels hold zeros. This is the layout the cube's img2col reads
  (ascend-core.md §2.3);
* ``NC1HWC0_C04``: ``[N][C1][H][W][4]`` with ``C1 = ceil(C / 4)`` (ascend-core.md §2.3, aclFormat 12):
  the input of a convolution with few channels (:mod:`cann.lowering.small_cin`), read by ``img2col_c04``.

Consumers ask for the format they need with :meth:`Lowering.as_format`; the conversion kernel
(``trans_data``) is made once per value.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    BFloat16Type,
    BytesAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    DictionaryAttr,
    IntegerAttr,
    NameLoc,
    StringAttr,
    TensorType,
    UnitAttr,
    IntegerType,
    Signedness,
    f16,
    f32,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Region, SSAValue
from xdsl.utils.exceptions import DiagnosticException

from cann.dialects import tile
from cann.dialects.graph_base import numpy_dtype
from cann.lowering import rolling
from cann.dialects.tile import Space
from cann.errors import CannError
from cann.hw.config import SocSpec

ND = "ND"
NC1HWC0 = "NC1HWC0"
NC1HWC0_C04 = "NC1HWC0_C04"
_C0 = {NC1HWC0: 16, NC1HWC0_C04: 4}  # the 5-D formats' C0

_ELEM = {np.dtype(np.float16): f16, np.dtype(np.float32): f32, np.dtype(np.int32): i32, np.dtype(np.int64): i64,
         np.dtype(ml_dtypes.bfloat16): BFloat16Type(),
         np.dtype(np.bool_): IntegerType(1), np.dtype(np.int16): IntegerType(16), np.dtype(np.int8): IntegerType(8),
         np.dtype(np.uint8): IntegerType(8, Signedness.UNSIGNED),
         np.dtype(np.uint16): IntegerType(16, Signedness.UNSIGNED), np.dtype(np.uint32): IntegerType(32, Signedness.UNSIGNED)}


def elem_type(dtype: np.dtype) -> Attribute:
    """The xDSL element type of a numpy dtype: float16 or float32, int64 / int32 / int16 / int8,
    uint8 / uint16 / uint32, bool (``i1``: one byte 0/1 on the device). Which vector instructions
    compute on which of them: ``cann.hw.isa.VEC_DTYPES`` and docs/core-model.md.

    Raises:
        CannError: another dtype (not supported on the AI Core in this version).
    """
    try:
        return _ELEM[np.dtype(dtype)]
    except KeyError:
        raise CannError("", f"dtype {np.dtype(dtype).name} is not supported on the AI Core") from None


def np_dtype(t: Attribute) -> np.dtype:
    """The numpy dtype of an xDSL element type (:func:`cann.dialects.graph_base.numpy_dtype`).

    Raises:
        CannError: an element type with no numpy dtype.
    """
    try:
        return numpy_dtype(t)
    except ValueError:
        raise CannError("", f"dtype {t} is not supported on the AI Core") from None


def narrow(array: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``array`` in the device dtype ``dtype``. Floats narrowed to a smaller float type saturate:
    finite values beyond its range become its largest finite value of the same sign (float32's
    -3.4e38 attention-mask constant is -65504 in float16, not -inf, so ``0 * mask`` stays 0), as
    fp16 model converters do (onnxconverter-common's ``convert_float_to_float16`` clips to +-65504);
    inf and NaN stay. Other dtypes are cast as they are."""
    dtype = np.dtype(dtype)
    array = np.asarray(array)
    if array.dtype.kind == "f" and dtype.kind == "f" and dtype.itemsize < array.dtype.itemsize:
        big = float(np.finfo(dtype).max)
        if array.size and -big <= array.min() and array.max() <= big:  # in range (NaN fails): nothing to clip
            return array.astype(dtype)
        finite = np.isfinite(array)
        if finite.any() and np.abs(array[finite]).max() > big:
            array = np.where(finite, np.clip(array, -big, big), array)
    return array.astype(dtype)


def narrow_f32(array: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``array`` cast to float32 and then narrowed to ``dtype`` (:func:`narrow`): the values a float32
    copy of it holds after narrowing. Narrowing is elementwise, so a layout (padding with zeros,
    reordering) built on this result has the bytes of the same layout built in float32 and narrowed
    last, with fewer bytes moved. Already in ``dtype``: returned as it is (the float32 round trip
    of a ``dtype`` no wider than float32 is exact)."""
    array, dtype = np.asarray(array), np.dtype(dtype)
    if array.dtype == dtype and dtype.itemsize <= 4:
        return array
    with np.errstate(over="ignore"):  # float64 beyond float32's range: inf, as any float32 copy casts it
        return narrow(array.astype(np.float32, copy=False), dtype)


def narrow_scalar(value: float, dtype: np.dtype) -> float:
    """A scalar operand of a vector instruction on ``dtype`` lanes, saturated as :func:`narrow`."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f" and math.isfinite(value):
        big = float(np.finfo(dtype).max)
        return max(-big, min(big, value))
    return value


@dataclass(frozen=True)
class DevTensor:
    """A tensor in GM: ``mem`` (a flat memref value of @main), logical ``shape``, ``fmt``, ``dtype``."""

    mem: SSAValue
    shape: tuple[int, ...]
    fmt: str
    dtype: np.dtype

    @property
    def c1(self) -> int:
        return math.ceil(self.shape[1] / _C0.get(self.fmt, 16))

    @property
    def storage_shape(self) -> tuple[int, ...]:
        if self.fmt in _C0:
            n, c, h, w = self.shape
            c0 = _C0[self.fmt]
            return (n, math.ceil(c / c0), h, w, c0)
        return self.shape

    @property
    def size(self) -> int:
        """Elements in storage (including NC1HWC0 padding channels)."""
        return math.prod(self.storage_shape)


def storage_size(shape: tuple[int, ...], fmt: str) -> int:
    if fmt in _C0:
        n, c, h, w = shape
        c0 = _C0[fmt]
        return n * math.ceil(c / c0) * h * w * c0
    return math.prod(shape)


def _int_vec_ok(op: str, buf: SSAValue) -> bool:
    """Whether tile vector op ``op`` computes on integer / bool buffer ``buf`` (``isa.VEC_DTYPES``;
    casts and comparisons are checked by the tile -> ascend lowering against ``isa.VCONV_PAIRS``)."""
    from cann.hw import isa

    if op.startswith(("cast", "cmp_")):
        return True
    dt = np_dtype(buf.type.element_type)
    code = isa.DTYPE_CODES.get(dt)
    if op in ("and", "or", "xor") and dt.itemsize in (1, 2):
        code = isa.DTYPE_CODES[np.dtype(np.int16)]
    return code is not None and code in isa.VEC_DTYPES.get("v" + op, isa.FLOAT_CODES)


#: the buffers whose budget :meth:`Lowering.usable` divides by the planned buffer count
_SPLIT_BUFFERS = frozenset({"l0a", "l0b", "ub"})


class KernelBuilder:
    """Builds one kernel: a ``func.func`` marked ``tile.kernel`` over flat GM buffer arguments."""

    def __init__(self, lowering: "Lowering", name: str, loc: Attribute | None, tiling: dict[str, int]):
        self.lowering = lowering
        self.name = name
        self.loc = loc
        self.tiling = dict(tiling)
        self.block = Block()
        self.gm_args: list[DevTensor] = []
        self._arg_of: dict[int, SSAValue] = {}
        self.block_dim = 1
        #: cores form groups of this many (0: one group): block offsets move by ``block_idx % block_modulo``
        self.block_modulo = 0
        self._tile_strides: dict[SSAValue, int] = {}  # GM elements one for_tiles item moves each argument
        self._sink: list | None = None  # ops emitted while capturing an iteration (see roll)
        self._group: tuple[int, int] | None = None  # (first block, cores) of the group being emitted

    @property
    def soc(self) -> SocSpec:
        return self.lowering.soc

    def arg(self, t: DevTensor, fresh: bool = False) -> SSAValue:
        """The kernel argument bound to device tensor ``t`` (added on first use; with ``fresh``, a
        new argument even if ``t`` is bound already, e.g. to address it with another block offset)."""
        key = id(t.mem)
        if fresh:
            key = (key, len(self.gm_args))
        if key not in self._arg_of:
            ty = tile.buffer_type(Space.GM, elem_type(t.dtype), t.size)
            self._arg_of[key] = self.block.insert_arg(ty, len(self.block.args))
            self.gm_args.append(t)
        return self._arg_of[key]

    def alloc(self, space: Space, count: int, dtype: np.dtype) -> SSAValue:
        """An on-chip buffer of ``count`` elements (rounded up to 256 B)."""
        itemsize = np.dtype(dtype).itemsize
        count = max(1, math.ceil(count * itemsize / 256) * 256 // itemsize)
        op = tile.AllocOp(space, elem_type(dtype), count)
        self.block.add_op(op)
        return op.res

    def emit(self, op):
        if self._sink is not None:
            self._sink.append(op)
        else:
            self.block.add_op(op)
        return op

    def roll(self, count: int, body: Callable[[int], None], clamp: bool = False) -> None:
        """Emit ``body(i)`` for ``i`` in ``range(count)``, the runs of iterations that are one code moved
        through GM, their on-chip offsets stepping linearly, as hardware loops
        (:mod:`cann.lowering.rolling`): the kernel's code grows with its
        tiling, not with its tensors. Buffers must be allocated before (``alloc`` is not captured).
        ``clamp``: the first and last iterations join the loop when they differ only in fields a
        clamped step can give them (:func:`cann.lowering.rolling.clamped_runs`)."""
        iterations = []
        outer = self._sink
        try:
            for i in range(count):
                self._sink = []
                body(i)
                iterations.append(self._sink)
        finally:
            self._sink = outer
        found = rolling.clamped_runs(iterations) if clamp else [(*r, {}) for r in rolling.runs(iterations)]
        for first, n, step, chip, clamps in found:
            ops = iterations[first]
            up = rolling.depths(ops)  # an op in a nested loop steps with this loop, `up` levels out
            with self.loop(n, step) if n > 1 else contextlib.nullcontext():
                for k, op in enumerate(ops):
                    if n > 1:
                        for (j, prop), st in chip.items():
                            if j == k:
                                self.emit(tile.LoopStepOp(prop, st, up=up[k]))
                        for (j, prop), cl in clamps.items():
                            if j == k:
                                for st, off, lo, hi in cl:
                                    self.emit(tile.LoopStepOp(prop, st, (off, lo, hi), up=up[k]))
                    self.emit(op)
            for k in range(first + 1, first + n):
                rolling.discard(iterations[k])

    def tile_loops(self, counts: tuple[int, ...], body: Callable[[tuple, tuple, tuple], None]) -> None:
        """Emit a grid of tiles (``counts`` per dimension, outermost first) as nested hardware loops
        whose instructions do not depend on the counts (a count of 1 is a loop too): ``body(idx,
        lo, hi)`` emits tile ``idx``'s code, clipped at the low / high edge of the dimensions where
        ``lo`` / ``hi`` are true (:func:`cann.lowering.rolling.border_plan`); the border tiles'
        deviations become clamped steps. Buffers must be allocated before.

        Raises:
            ValueError: the tiles are not one body (see :func:`~cann.lowering.rolling.border_plan`);
                nothing is emitted then.
        """
        outer = self._sink
        made: list[list] = []

        def capture(idx, lo, hi):
            self._sink = []
            made.append(self._sink)
            try:
                body(idx, lo, hi)
                return self._sink
            finally:
                self._sink = outer

        try:
            ops, chip, gm_steps, clamps = rolling.border_plan(tuple(counts), capture)
        except ValueError:  # the built ops go (their operand uses with them): the caller emits another form
            for o in made:
                rolling.discard(o)
            raise
        dims = len(counts)
        depth = rolling.depths(ops)  # an op in a loop of the tile's own code steps from further in
        for d, n in enumerate(counts):
            self.emit(tile.LoopBeginOp(n))
            for buf, steps in gm_steps.items():
                if steps[d]:
                    self.emit(tile.LoopOffsetOp(buf, stride=steps[d]))
        for k, op in enumerate(ops):
            for d in range(dims):
                up = dims - 1 - d + depth[k]
                for (j, prop), st in chip[d].items():
                    if j == k:
                        self.emit(tile.LoopStepOp(prop, st, up=up))
            for (j, prop), cl in clamps.items():
                if j == k:
                    for d, st, off, lo, hi in cl:
                        self.emit(tile.LoopStepOp(prop, st, (off, lo, hi), up=dims - 1 - d + depth[k]))
            self.emit(op)
        for _ in counts:
            self.emit(tile.LoopEndOp())

    # -- shorthand for the common tile ops ------------------------------------------------------
    def copy(self, src: SSAValue, dst: SSAValue, *, src_offset: int = 0, dst_offset: int = 0, nburst: int = 1,
             burst: int, src_stride: int | None = None, dst_stride: int | None = None) -> None:
        """Burst copy (elements). Strides default to ``burst`` (contiguous)."""
        if nburst <= 0 or burst <= 0:
            return
        self.emit(tile.CopyOp(src, dst, src_offset=src_offset, dst_offset=dst_offset, nburst=nburst, burst=burst,
                              src_stride=burst if src_stride is None else src_stride,
                              dst_stride=burst if dst_stride is None else dst_stride))

    def vec(self, op: str, dst: SSAValue, src0: SSAValue | None = None, src1: SSAValue | None = None, *,
            count: int, unit: int = 1, dst_offset: int = 0, src0_offset: int = 0, src1_offset: int = 0,
            dst_stride: int | None = None, src0_stride: int | None = None, src1_stride: int | None = None,
            scalar: float = 0.0) -> None:
        """A vector op (see ``tile.vec``); strides default to ``unit`` (dense)."""
        if count <= 0:
            return
        for b in (dst, src0, src1):
            if b is not None and isinstance(b.type.element_type, IntegerType) and not _int_vec_ok(op, b):
                raise unsupported(self.loc, f"{np_dtype(b.type.element_type).name} tensors are not supported by this "
                                            f"operator on the AI Core (no '{op}' vector instruction for the dtype)")
        s0 = dst if src0 is None else src0
        s1 = s0 if src1 is None else src1
        if scalar and not isinstance(dst.type.element_type, IntegerType):
            scalar = narrow_scalar(scalar, np_dtype(dst.type.element_type))
        self.emit(tile.VecOp(dst, s0, s1, op=op, count=count, unit=unit, dst_offset=dst_offset,
                             src0_offset=src0_offset, src1_offset=src1_offset,
                             dst_stride=unit if dst_stride is None else dst_stride,
                             src0_stride=unit if src0_stride is None else src0_stride,
                             src1_stride=unit if src1_stride is None else src1_stride, scalar=scalar))

    # -- SPMD ------------------------------------------------------------------------------------
    def partition(self, tiles: int) -> tuple[int, int]:
        """Spread ``tiles`` uniform work items round-robin over the SoC's cores (at most the pinned
        ``block_dim``): returns ``(block_dim, rounds)``; core ``b`` does items ``r*block_dim + b``."""
        cap = self.tiling.get("block_dim", self.lowering.cores)
        self.block_dim = max(1, min(cap, self.lowering.cores, tiles))
        self.tiling["block_dim"] = self.block_dim
        return self.block_dim, math.ceil(tiles / self.block_dim)

    def block_offset(self, buf: SSAValue, stride: int) -> None:
        """Core ``b`` sees GM argument ``buf`` ``b * stride`` elements further on (emit at kernel start).

        ``stride`` is also how far one work item of :meth:`for_tiles` moves ``buf``: the rounds of
        ``for_tiles`` become a hardware loop moving it by ``block_dim * stride`` per iteration."""
        self._tile_strides[buf] = stride
        if self.block_dim > 1 and stride:
            if self.block_modulo:
                self.emit(tile.BlockOffsetModOp(buf, stride=stride, modulo=self.block_modulo))
            else:
                self.emit(tile.BlockOffsetOp(buf, stride=stride))

    def block_row_offset(self, buf: SSAValue, stride: int) -> None:
        """Core ``b`` sees GM argument ``buf`` ``(b // block_modulo) * stride`` elements further on
        (``b * stride`` without a :attr:`block_modulo`): the row tile of a two-level split whose
        column tile :meth:`block_offset` moves, so that every core runs one code (emit at kernel start)."""
        if self.block_dim > 1 and stride:
            if self.block_modulo:
                self.emit(tile.BlockOffsetDivOp(buf, stride=stride, divisor=self.block_modulo))
            else:
                self.emit(tile.BlockOffsetOp(buf, stride=stride))

    @contextlib.contextmanager
    def loop(self, count: int, offsets: dict[SSAValue, int]):
        """A hardware loop: what is emitted inside (iteration 0's code) runs ``count`` times, GM
        argument ``buf`` moving ``offsets[buf]`` elements per iteration."""
        if count == 1:
            yield
            return
        self.emit(tile.LoopBeginOp(count))
        for buf, stride in offsets.items():
            if stride:
                self.emit(tile.LoopOffsetOp(buf, stride=stride))
        yield
        self.emit(tile.LoopEndOp())

    def for_tiles(self, tiles: int, body, partial_last: bool = False, cores: int | None = None) -> None:
        """Emit ``body(first)`` once per round (``first``: the round's first item, core 0's); the
        last round is guarded to the cores that have an item. With ``partial_last`` the very last
        item gets its own section, ``body(first, last=True)``, run only by its core. ``cores``: the
        items spread over that many cores (``block_idx % cores``, see :attr:`block_modulo`) instead of
        the group's; its rounds must then be whole.

        Raises:
            ValueError: ``cores`` with a ragged or partial last round (a lowering bug).
        """
        group = self._group[1] if self._group else self.block_dim
        b_dim = cores or group
        if b_dim < group and (tiles % b_dim or partial_last):
            raise ValueError(f"for_tiles: {tiles} items over {b_dim} of {group} cores: the last round is not whole")
        rounds = math.ceil(tiles / b_dim)
        last_hi = tiles - (rounds - 1) * b_dim
        # every round but a ragged or partial last one is the same code moved by b_dim items
        full = rounds if last_hi == b_dim and not partial_last else rounds - 1
        if full:
            with self.loop(full, {buf: b_dim * s for buf, s in self._tile_strides.items()}):
                body(0)
        if full < rounds:
            r = rounds - 1
            if partial_last:
                if last_hi > 1:
                    with self.guard(0, last_hi - 1):
                        body(r * b_dim)
                with self.guard(last_hi - 1, last_hi):
                    body(r * b_dim, last=True)
            else:
                with self.guard(0, last_hi):
                    body(r * b_dim)

    @contextlib.contextmanager
    def guard(self, lo: int, hi: int):
        """Instructions emitted inside run only on cores ``lo <= block_idx < hi`` (inside
        :meth:`core_group`, counted from the group's first core)."""
        base, size = self._group or (0, self.block_dim)
        if lo == 0 and hi >= size:
            yield
            return
        self.emit(tile.BlockIfOp(base + lo, base + min(hi, size)))
        yield
        self.emit(tile.BlockEndifOp())

    @contextlib.contextmanager
    def core_group(self, first: int, size: int):
        """Code emitted inside runs on blocks ``first .. first + size - 1`` only: one group of a
        two-level split (:attr:`block_modulo`), in which :meth:`for_tiles` and :meth:`guard` count
        the group's ``size`` cores."""
        with self.guard(first, first + size):
            outer, self._group = self._group, (first, size)
            try:
                yield
            finally:
                self._group = outer

    def finish(self) -> func.FuncOp:
        self.block.add_op(func.ReturnOp())
        fn = func.FuncOp(self.name, ([a.type for a in self.block.args], []), Region(self.block))
        fn.attributes["tile.kernel"] = UnitAttr()
        fn.attributes["tile.block_dim"] = IntegerAttr(self.block_dim, i64)
        fn.attributes["tile.tiling"] = DictionaryAttr({k: IntegerAttr(v, i64) for k, v in sorted(self.tiling.items())})
        if self.loc is not None:
            fn.location = self.loc
        return fn


@dataclass
class Lowering:
    """State of one graph -> tile conversion: the SoC, the device dtype, the new @main's block,
    the kernels made so far and the format conversions already made."""

    soc: SocSpec
    dtype: np.dtype
    main: Block
    tiling_overrides: dict[str, dict[str, int]] = field(default_factory=dict)
    cores: int = 1  # AI cores a kernel may be spread over (SPMD block_dim at most this)
    #: the format / dtype conversion kernel builder (``cann.lowering.data.trans_data``, given by the
    #: driver: this toolkit imports none of the kernels built on it)
    convert: Callable[..., DevTensor] | None = None
    #: copies of each refilled L0A / L0B / UB tile the tiling leaves room for (``tile-multi-buffer``
    #: then multi-buffers them): the budgets of :meth:`usable` are divided by it
    buffers: int = 1
    kernels: list[func.FuncOp] = field(default_factory=list)
    _names: dict[str, int] = field(default_factory=dict)
    _converted: dict[tuple[int, str, str], DevTensor] = field(default_factory=dict)

    # -- budgets (bytes) ------------------------------------------------------------------------
    def usable(self, buf: str) -> int:
        """Bytes of on-chip buffer ``buf`` (l1, l0a, l0b, l0c, ub) one copy of a kernel's tiles may use:
        the SoC's usable capacity, divided by :attr:`buffers` for L0A, L0B and UB (whose tiles are
        refilled every step and double-buffered cheaply; L1 and L0C keep their whole capacity, since
        halving them would re-read weights or feature maps: ``tile-multi-buffer`` doubles their
        buffers only where they still fit)."""
        cap = self.soc.buffer(buf).usable
        return cap // self.buffers // 32 * 32 if buf in _SPLIT_BUFFERS else cap

    @property
    def lanes(self) -> int:
        """Elements of the device dtype per vector repeat."""
        return self.soc.vector.repeat_bytes // self.dtype.itemsize

    def lanes_of(self, dtype: np.dtype) -> int:
        return self.soc.vector.repeat_bytes // np.dtype(dtype).itemsize

    # -- host program ---------------------------------------------------------------------------
    def gm_tensor(self, shape: tuple[int, ...], fmt: str, dtype: np.dtype | None = None) -> DevTensor:
        dtype = np.dtype(self.dtype if dtype is None else dtype)
        size = storage_size(tuple(shape), fmt)
        op = tile.GmAllocOp.create(
            properties={"format": StringAttr(fmt), "shape": DenseArrayBase.from_list(i64, list(shape))},
            result_types=[tile.buffer_type(Space.GM, elem_type(dtype), size)],
        )
        self.main.add_op(op)
        return DevTensor(op.res, tuple(shape), fmt, dtype)

    def constant(self, array: np.ndarray, fmt: str, logical_shape: tuple[int, ...] | None = None) -> DevTensor:
        """A device-format constant (``array`` already in its storage layout and dtype)."""
        array = np.ascontiguousarray(array)
        flat_t = TensorType(elem_type(array.dtype), [array.size])
        value = DenseIntOrFPElementsAttr(flat_t, BytesAttr(array.tobytes()))
        op = tile.ConstantOp.create(
            properties={"format": StringAttr(fmt), "value": value},
            result_types=[tile.buffer_type(Space.GM, elem_type(array.dtype), array.size)],
        )
        self.main.add_op(op)
        shape = tuple(logical_shape) if logical_shape is not None else tuple(array.shape)
        return DevTensor(op.res, shape, fmt, array.dtype)

    def view(self, t: DevTensor, shape: tuple[int, ...]) -> DevTensor:
        """The same ND bytes with another shape (Reshape/Flatten)."""
        assert t.fmt == ND
        op = tile.ViewOp.create(
            operands=[t.mem],
            properties={"format": StringAttr(ND), "shape": DenseArrayBase.from_list(i64, list(shape))},
            result_types=[t.mem.type],
        )
        self.main.add_op(op)
        return DevTensor(op.res, tuple(shape), ND, t.dtype)

    @contextlib.contextmanager
    def attempt(self):
        """A lowering that may be abandoned: when it raises, the kernel names it took are handed out
        again (a fused group falling back to one kernel per op names its kernels, and applies their
        tiling pins, as a lowering without fusion would)."""
        names = dict(self._names)
        try:
            yield
        except CannError:
            self._names = names
            raise

    def next_name(self, hint: str) -> str:
        """The name :meth:`kernel` will give the next kernel of ``hint`` (``<hint>_<i>``)."""
        return f"{hint}_{self._names.get(hint, 0)}"

    def kernel(self, hint: str, loc: Attribute | None, tiling: dict[str, int] | None = None,
               pins: dict[str, int] | None = None) -> KernelBuilder:
        """A new kernel named ``<hint>_<i>`` whose tiling starts from the lowering's ``tiling`` defaults,
        then the graph op's recorded ``pins`` (``tile.tiling`` on the op, e.g. from a knowledge
        base), then the pins given by kernel name (:attr:`tiling_overrides`)."""
        n = self._names.get(hint, 0)
        self._names[hint] = n + 1
        name = f"{hint}_{n}"
        merged = dict(tiling or {})
        merged.update(pins or {})
        merged.update(self.tiling_overrides.get(name, {}))
        return KernelBuilder(self, name, loc, merged)

    def launch(self, kb: KernelBuilder) -> None:
        self.kernels.append(kb.finish())
        self.main.add_op(tile.LaunchOp(kb.name, [t.mem for t in kb.gm_args]))

    # -- formats --------------------------------------------------------------------------------
    def as_format(self, t: DevTensor, fmt: str, dtype: np.dtype | None = None, loc: Attribute | None = None) -> DevTensor:
        """``t`` in format ``fmt`` and ``dtype`` (default: unchanged), converting once if needed."""
        dtype = np.dtype(t.dtype if dtype is None else dtype)
        if t.fmt == fmt and t.dtype == dtype:
            return t
        bf16 = np.dtype(ml_dtypes.bfloat16)  # a storage dtype: vconv to and from float32 only
        if bf16 in (t.dtype, dtype) and np.dtype(np.float16) in (t.dtype, dtype):
            raise unsupported(loc, "bfloat16 tensors need a float32 precision mode (must_keep_origin_dtype or force_fp32): float16 cannot hold their range")
        if t.dtype.kind not in "fV" or dtype.kind not in "fV":
            raise unsupported(loc, f"a {t.dtype.name} tensor where this operator needs {dtype.name} "
                                   f"({fmt}): integer tensors are stored and moved, not computed on (no conversion kernel)")
        key = (id(t.mem), fmt, dtype.name)
        if key not in self._converted:
            self._converted[key] = self.convert(self, t, fmt, dtype, loc)
        return self._converted[key]


def ub_chunk(lowering: Lowering, bytes_per_elem: int, align_elems: int = 256) -> int:
    """Elements per UB chunk when each element needs ``bytes_per_elem`` bytes of UB in total."""
    n = lowering.usable("ub") // max(1, bytes_per_elem)
    return max(align_elems, n // align_elems * align_elems)


def loc_name(loc: Attribute | None) -> str:
    """The ONNX node name carried by an op's location ('' if none)."""
    if isinstance(loc, NameLoc):
        return loc.desc.data
    return ""


def unsupported(loc: Attribute | None, what: str) -> CannError:
    return CannError(loc_name(loc), what)


__all__ = ["ND", "NC1HWC0", "NC1HWC0_C04", "DevTensor", "KernelBuilder", "Lowering", "elem_type", "np_dtype", "ub_chunk",
           "unsupported", "loc_name", "narrow", "narrow_scalar", "DiagnosticException"]


def plane_row_split(loc: Attribute | None, what: str, pins: dict[str, int], planes: int,
                    cores: int) -> tuple[int, int]:
    """``(n_blocks, m_blocks cap)`` of a kernel whose ``planes`` (C1 planes, or super-group planes)
    go over ``n_blocks`` cores and whose output rows over up to ``m_blocks`` groups of them: the
    pinned values, else all planes (at most the cores) and the cores left per plane.

    Raises:
        CannError: a pin outside 1..min(planes, cores), or n_blocks x m_blocks over ``cores``.
    """
    n_blocks = pins.get("n_blocks", min(planes, cores))
    if not 1 <= n_blocks <= min(planes, cores):
        raise unsupported(loc, f"{what}: tiling n_blocks = {n_blocks}: 1 to {min(planes, cores)} "
                               f"(the planes, at most the cores)")
    m_cap = pins.get("m_blocks", max(1, cores // n_blocks))
    if n_blocks * m_cap > cores:
        raise unsupported(loc, f"{what}: tiling m_blocks = {m_cap} needs {n_blocks} x {m_cap} cores, "
                               f"{cores} available")
    return n_blocks, m_cap
