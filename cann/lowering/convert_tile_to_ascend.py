"""``convert-tile-to-ascend``: tile-level kernels -> ``ascend.kernel`` instruction streams.

Per kernel: on-chip buffers get addresses (bump allocation per buffer, aligned as the SoC
description demands, checked against capacity; a ``tile.alloc`` with ``buffers = n`` gets ``n``
copies, its generations renamed into them and hardware loops rotating them with ``loop_rotate``,
:mod:`cann.lowering.generations`); each tile op becomes instructions: DMA paths are
chosen by the buffers' spaces, vector ops are encoded into repeats of 256 B with masks and
block/repeat strides (at most ``max_repeat`` repeats per instruction), reductions become trees
of ``vcmax``/``vcadd``. The host program (``func.func @main``) is kept as it is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, StringAttr, i64
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass

from cann.dialects import tile
from cann.dialects.ascend import KernelOp, instr_to_op
from cann.dialects.tile import Space, loop_form, space_of
from cann.errors import CannError
from cann.hw import isa
from cann.hw.config import SocSpec, load_soc
from cann.lowering.common import np_dtype
from cann.lowering.generations import rename

_BINARY = {"add": "vadd", "sub": "vsub", "mul": "vmul", "div": "vdiv", "max": "vmax", "min": "vmin",
           "and": "vand", "or": "vor", "xor": "vxor", "mla": "vmla"}
_BITWISE = {"and", "or", "xor"}
_SCALAR = {"adds": "vadds", "muls": "vmuls", "maxs": "vmaxs", "mins": "vmins", "dup": "vdup"}
_UNARY = {"relu": "vrelu", "exp": "vexp", "ln": "vln", "rec": "vrec", "sqrt": "vsqrt", "abs": "vabs", "mov": "vmov"}
_DMA = {(Space.GM, Space.L1): "copy_gm_to_l1", (Space.GM, Space.UB): "copy_gm_to_ub",
        (Space.UB, Space.GM): "copy_ub_to_gm"}


#: the bounds of a ``loop_clamp`` that never binds (a linear step of an outer loop)
_NO_BOUND = 1 << 62


@dataclass(frozen=True)
class Layout:
    """On-chip addresses of a kernel's buffers: per ``tile.alloc`` (in order) its ``base`` byte
    address and the ``pitch`` between its copies (its byte size rounded up to the space's alignment),
    and the bytes ``used`` per space."""

    base: tuple[int, ...]
    pitch: tuple[int, ...]
    used: dict[Space, int]


def layout(allocs: list[tile.AllocOp], soc: SocSpec, copies: list[int] | None = None) -> Layout:
    """Bump allocation of ``allocs`` per space, each aligned to ``max(space align, vector block)``
    and taking ``copies[k]`` (default: its ``buffers``) copies of its size, copy pitch aligned too.
    The one allocation rule: ``convert-tile-to-ascend`` places buffers with it and
    ``tile-multi-buffer`` checks capacities with it."""
    top = {s: 0 for s in Space if s != Space.GM}
    base, pitch = [], []
    for k, op in enumerate(allocs):
        space = space_of(op.res)
        align = max(soc.buffer(space.value).align, soc.vector.block_bytes)
        b = -(-top[space] // align) * align
        size = op.res.type.get_shape()[0] * np_dtype(op.res.type.element_type).itemsize
        n = op.copies if copies is None else copies[k]
        p = -(-size // align) * align if n > 1 else size
        top[space] = b + (n - 1) * p + size
        base.append(b)
        pitch.append(p)
    return Layout(tuple(base), tuple(pitch), top)


class _Kernel:
    """One kernel's lowering; ``single``: every buffer with one copy, whatever its ``buffers`` (the
    code ``tile-multi-buffer`` analyses)."""

    def __init__(self, fn: func.FuncOp, soc: SocSpec, single: bool = False):
        self.fn, self.soc, self.single = fn, soc, single
        self.name = fn.sym_name.data
        self.args = {a: i for i, a in enumerate(fn.body.block.args)}
        self.addr: dict[SSAValue, int] = {}
        self.out: list[isa.Instr] = []
        self.vec = soc.vector
        self.regions: list[tuple[int, int, int, int, str]] = []  # multi-buffered: (space, base, pitch, copies, name)

    def error(self, msg: str) -> CannError:
        return CannError(f"@{self.name}", msg)

    def allocate(self) -> None:
        allocs = [op for op in self.fn.body.block.ops if isinstance(op, tile.AllocOp)]
        lay = layout(allocs, self.soc, [1] * len(allocs) if self.single else None)
        for space, used in lay.used.items():
            cap = self.soc.buffer(space.value).usable
            if used > cap:
                raise self.error(f"buffers in {space.value.upper()} need {used} bytes, capacity is {cap}")
        for k, op in enumerate(allocs):
            self.addr[op.res] = lay.base[k]
            if op.copies > 1 and not self.single:
                self.regions.append((isa.SPACE_CODES[space_of(op.res).value], lay.base[k], lay.pitch[k], op.copies,
                                     f"tile.alloc #{k} ({space_of(op.res).value.upper()}, {lay.pitch[k]} bytes)"))

    # -- helpers ----------------------------------------------------------------------------
    def isz(self, v: SSAValue) -> int:
        return np_dtype(v.type.element_type).itemsize

    def code(self, v: SSAValue) -> int:
        return isa.DTYPE_CODES[np_dtype(v.type.element_type)]

    def byte(self, v: SSAValue, elems: int) -> int:
        return self.addr[v] + elems * self.isz(v)

    def emit(self, mnemonic: str, **f) -> None:
        self.out.append(isa.make(mnemonic, **f))

    # -- ops --------------------------------------------------------------------------------
    def lower(self) -> list[isa.Instr]:
        self.allocate()
        steps: list[tile.LoopStepOp] = []  # tile.loop_step ops waiting for the op they apply to
        for op in self.fn.body.block.ops:
            if isinstance(op, (tile.AllocOp, func.ReturnOp)):
                continue
            if isinstance(op, tile.LoopStepOp):
                steps.append(op)
                continue
            handler = getattr(self, "_" + op.name.split(".", 1)[1], None)
            if handler is None:
                raise self.error(f"cannot lower {op.name}")
            if steps:
                self._stepped(op, handler, steps)
                steps = []
            else:
                handler(op)
        if steps:
            raise self.error("tile.loop_step at the end of the kernel (it applies to the next tile instruction)")
        if self.regions:
            try:
                self.out = rename(self.out, self.soc, self.regions, f"@{self.name}", every_loop=loop_form(self.fn))
            except ValueError as e:
                raise CannError(f"@{self.name}", str(e).split(": ", 1)[1]) from None
        return self.out

    def _lowered(self, op, handler, steps: list, times: int, by: int | None = None) -> list[isa.Instr]:
        """The instructions of ``op`` with every stepped property advanced ``times`` steps (``by``:
        advanced by that many units instead)."""
        if times or by:
            op = op.clone()
            for st in steps:
                f = st.field.data
                d = times * st.step.value.data if by is None else by
                op.properties[f] = IntegerAttr(op.properties[f].value.data + d, i64)
        out, self.out = self.out, []
        try:
            handler(op)
            return self.out
        finally:
            self.out = out
            if times or by:
                op.drop_all_references()

    def _clamps(self, op, handler, steps: list, base: list[isa.Instr], where: str) -> list[list[isa.Instr]]:
        """Per instruction of ``base`` (``op`` lowered), the ISA ``loop_clamp`` s of the clamped
        ``tile.loop_step`` s and of the steps of an outer loop (``up``; linear ones as a clamp that
        never binds): each moves every field that its property moves, scaled (a property in
        elements, a field in bytes) from the op lowered at the values the step takes."""
        out: list[list[isa.Instr]] = [[] for _ in base]
        for st in steps:
            s = st.step.value.data
            linear = st.clamp is None  # a linear step of an outer loop: a clamp that never binds
            off, lo, hi = (0, -_NO_BOUND, _NO_BOUND) if linear else st.clamp
            vals = sorted({min(max(off + i * s, lo), hi) for i in (0, 1, 2)} | (set() if linear else {lo, hi}))
            if len(vals) < 2:
                raise self.error(f"{where}: the clamp of '{st.field.data}' never moves it (lo = hi = {lo})")
            lows = [self._lowered(op, handler, [st], 0, by=v) for v in vals]
            for lw_ in lows:
                if [i.defn for i in lw_] != [i.defn for i in base]:
                    raise self.error(f"{where}: its instructions change with the clamped '{st.field.data}'")
            for n, a in enumerate(base):
                allowed = isa.clamp_fields(a.defn)
                for k in range(len(a.values)):
                    ys = [lw_[n].values[k] for lw_ in lows]
                    if all(y == ys[0] for y in ys):
                        continue
                    coef, rem = divmod(ys[1] - ys[0], vals[1] - vals[0])
                    if k not in allowed or rem or any(y != ys[0] + coef * (v - vals[0]) for y, v in zip(ys, vals)):
                        raise self.error(f"{where}: field {a.defn.field_names[k]} of {a.mnemonic} does not move "
                                         f"linearly with the clamped '{st.field.data}' or cannot be clamped")
                    b = ys[0] - coef * vals[0]  # the field at the static property value
                    if b != a.values[k]:
                        raise self.error(f"{where}: field {a.defn.field_names[k]} of {a.mnemonic} is not linear "
                                         f"in '{st.field.data}'")
                    c_lo, c_hi = (-_NO_BOUND, _NO_BOUND) if linear else sorted((coef * lo, coef * hi))
                    out[n].append(isa.make("loop_clamp", field_no=k, step=coef * s, offset=coef * off,
                                           lo=c_lo, hi=c_hi, up=st.levels_up))
        return out

    def _stepped(self, op, handler, steps: list) -> None:
        """``op`` preceded by ``tile.loop_step`` s: its instructions, each preceded by one ISA
        ``loop_step`` per field that moves; the op must lower to the same instructions at steps 0,
        1 and 2, differing only in steppable fields (:func:`cann.hw.isa.step_fields`), linearly."""
        where = f"tile.loop_step of {op.name}"
        if not isinstance(op, tile._TileInstr):
            raise self.error(f"{where}: it applies to tile instructions only")
        for st in steps:
            f = st.field.data
            if f not in op.INTS:
                raise self.error(f"{where}: no integer property '{f}' (it has {', '.join(op.INTS)})")
        clamped = [st for st in steps if st.clamp is not None or st.levels_up]
        steps = [st for st in steps if st.clamp is None and not st.levels_up]
        base, one, two = (self._lowered(op, handler, steps, t) for t in (0, 1, 2))
        clamps = self._clamps(op, handler, clamped, base, where) if clamped else [[] for _ in base]
        if [i.defn for i in base] != [i.defn for i in one] or [i.defn for i in base] != [i.defn for i in two]:
            raise self.error(f"{where}: its instructions change with the step (not a linear step)")
        for a, b, c in zip(base, one, two):
            steppable = isa.step_fields(a.defn)
            for k, (x, y, z) in enumerate(zip(a.values, b.values, c.values)):
                if y == x and z == x:
                    continue
                if k not in steppable or z - y != y - x:
                    raise self.error(f"{where}: field {a.defn.field_names[k]} of {a.mnemonic} does not step "
                                     f"linearly on chip ({x}, {y}, {z} at steps 0, 1, 2)")
                self.emit("loop_step", field_no=k, step=y - x)
            self.out.extend(clamps.pop(0))
            self.out.append(a)

    def _block_offset(self, op) -> None:
        buf = op.operand("buf")
        self.emit("block_offset", arg=self.args[buf], stride=op.field("stride") * self.isz(buf))

    def _block_offset_mod(self, op) -> None:
        buf = op.operand("buf")
        self.emit("block_offset_mod", arg=self.args[buf], stride=op.field("stride") * self.isz(buf),
                  modulo=op.field("modulo"))

    def _block_offset_div(self, op) -> None:
        buf = op.operand("buf")
        self.emit("block_offset_div", arg=self.args[buf], stride=op.field("stride") * self.isz(buf),
                  divisor=op.field("divisor"))

    def _block_if(self, op) -> None:
        self.emit("block_if", lo=op.lo.value.data, hi=op.hi.value.data)

    def _block_endif(self, op) -> None:
        self.emit("block_endif")

    def _loop_begin(self, op) -> None:
        self.emit("loop_begin", count=op.count.value.data)

    def _loop_offset(self, op) -> None:
        buf = op.operand("buf")
        self.emit("loop_offset", arg=self.args[buf], stride=op.field("stride") * self.isz(buf))

    def _loop_end(self, op) -> None:
        self.emit("loop_end")

    def _copy(self, op) -> None:
        src, dst = op.operand("src"), op.operand("dst")
        key = (space_of(src), space_of(dst))
        if key not in _DMA:
            raise self.error(f"no DMA path from {key[0].value} to {key[1].value}")
        e = self.isz(src)
        f = {k: op.field(k) * e for k in ("burst", "src_stride", "dst_stride")}
        f["nburst"] = op.field("nburst")
        if key[0] == Space.GM:
            f.update(src_arg=self.args[src], src=op.field("src_offset") * e, dst=self.byte(dst, op.field("dst_offset")))
        else:
            f.update(dst_arg=self.args[dst], dst=op.field("dst_offset") * e, src=self.byte(src, op.field("src_offset")))
        self.emit(_DMA[key], **f)

    def _copy_add(self, op) -> None:
        src, dst = op.operand("src"), op.operand("dst")
        if (space_of(src), space_of(dst)) != (Space.UB, Space.GM):
            raise self.error("tile.copy_add adds UB to GM only")
        dt = np_dtype(dst.type.element_type)
        if dt.kind != "f" or dt.itemsize not in (2, 4):
            raise self.error(f"tile.copy_add adds float16 / float32 only, got {dt}")
        e = dt.itemsize
        self.emit("copy_ub_to_gm_add", dst_arg=self.args[dst], dst=op.field("dst_offset") * e,
                  src=self.byte(src, op.field("src_offset")), nburst=op.field("nburst"),
                  burst=op.field("burst") * e, src_stride=op.field("src_stride") * e,
                  dst_stride=op.field("dst_stride") * e, dtype=0 if e == 2 else 1)

    def _load_index(self, op) -> None:
        src = op.operand("src")
        dt = np_dtype(src.type.element_type)
        codes = {d: c for c, d in isa.IDX_DTYPES.items()}
        if dt not in codes:
            raise self.error(f"index buffer of dtype {dt} (int32 or int64 expected)")
        self.emit("ld_idx", reg=op.field("reg"), dtype=codes[dt], src=self.byte(src, op.field("src_offset")),
                  bound=op.field("bound"))

    def _copy_indexed(self, op) -> None:
        src, dst = op.operand("src"), op.operand("dst")
        if (space_of(src), space_of(dst)) != (Space.GM, Space.UB):
            raise self.error("tile.copy_indexed copies GM -> UB only")
        e = self.isz(src)
        self.emit("copy_gm_to_ub_reg", dst=self.byte(dst, op.field("dst_offset")), src_arg=self.args[src],
                  src=op.field("src_offset") * e, nburst=op.field("nburst"), burst=op.field("burst") * e,
                  src_stride=op.field("src_stride") * e, dst_stride=op.field("dst_stride") * e,
                  reg=op.field("reg"), reg_stride=op.field("reg_stride") * e)

    def _transpose_blocks(self, op) -> None:
        dst, src = op.operand("dst"), op.operand("src")
        isz, bb, maxr = self.isz(dst), self.vec.block_bytes, self.vec.max_repeat
        ds, ss = op.field("dst_stride") * isz, op.field("src_stride") * isz
        drow, srow = op.field("dst_row") * isz, op.field("src_row") * isz
        if any(x % bb for x in (ds, ss, drow, srow)):
            raise self.error(f"tile.transpose_blocks needs 32-byte strides (matrices {ds} / {ss} B, rows "
                             f"{drow} / {srow} B)")
        total, i = op.field("count"), 0
        while i < total:
            rep = min(maxr, total - i)
            self.emit("vtranspose", dtype=self.code(dst), dst=self.byte(dst, op.field("dst_offset")) + i * ds,
                      src=self.byte(src, op.field("src_offset")) + i * ss, repeat=rep, dst_rep=ds // bb,
                      src_rep=ss // bb, dst_row=drow // bb, src_row=srow // bb)
            i += rep

    def _select(self, op) -> None:
        dst, cond, s0, s1 = (op.operand(n) for n in ("dst", "cond", "src0", "src1"))
        isz = self.isz(dst)
        lanes = self.vec.repeat_bytes // isz
        bpr, maxr = self.vec.blocks_per_repeat, self.vec.max_repeat
        offs = [op.field(n + "_offset") for n in ("dst", "cond", "src0", "src1")]
        total, pos = op.field("count"), 0
        while pos < total:
            left = total - pos
            rep = min(maxr, left // lanes) if left >= lanes else 1
            mask = lanes if left >= lanes else left
            f = dict(dtype=self.code(dst), repeat=rep, mask=mask)
            for nm, buf, off in zip(("dst", "cond", "src0", "src1"), (dst, cond, s0, s1), offs):
                f[nm] = self.byte(buf, off + pos)
                f[f"{nm}_blk"] = 1
                f[f"{nm}_rep"] = bpr
            self.emit("vsel", **f)
            pos += rep * lanes if left >= lanes else left

    def _copy_nd2nz(self, op) -> None:
        src, dst = op.operand("src"), op.operand("dst")
        e = self.isz(src)
        self.emit("copy_gm_to_l1_nd2nz", dtype=self.code(src), dst=self.byte(dst, op.field("dst_offset")),
                  src_arg=self.args[src], src=op.field("src_offset") * e, rows=op.field("rows"),
                  cols=op.field("cols"), src_row_stride=op.field("src_row_stride") * e)

    def _load2d(self, op) -> None:
        src, dst = op.operand("src"), op.operand("dst")
        e = self.isz(src)
        self.emit("load2d", dst_space=isa.L0A if space_of(dst) == Space.L0A else isa.L0B,
                  dst=self.byte(dst, op.field("dst_offset")), src=self.byte(src, op.field("src_offset")),
                  repeat=op.field("count"), src_stride=op.field("src_stride") * e,
                  dst_stride=op.field("dst_stride") * e)

    def _img2col(self, op, mnemonic: str = "img2col") -> None:
        src, dst = op.operand("src"), op.operand("dst")
        f = {k: op.field(k) for k in op.INTS if k not in ("src_offset", "dst_offset", "fm_c1_stride")}
        self.emit(mnemonic, dtype=self.code(src), dst=self.byte(dst, op.field("dst_offset")),
                  src=self.byte(src, op.field("src_offset")), fm_c1_stride=op.field("fm_c1_stride") * self.isz(src),
                  **f)

    def _img2col_c04(self, op) -> None:
        self._img2col(op, "img2col_c04")

    def _mmad(self, op) -> None:
        a, b, c = op.operand("a"), op.operand("b"), op.operand("c")
        self.emit("mmad", dtype=self.code(a), dst=self.byte(c, op.field("c_offset")),
                  a=self.byte(a, op.field("a_offset")), b=self.byte(b, op.field("b_offset")),
                  m=op.field("m"), k=op.field("k"), n=op.field("n"), init=op.field("init"))

    def _copy_l0c_to_ub(self, op) -> None:
        src, dst = op.operand("src"), op.operand("dst")
        self.emit("copy_l0c_to_ub", dtype=self.code(dst), dst=self.byte(dst, op.field("dst_offset")),
                  src=self.byte(src, op.field("src_offset")), n1=op.field("n1"), m=op.field("m"),
                  src_m=op.field("src_m"))

    def _vec(self, op) -> None:
        kind = op.field("op")
        dst, s0, s1 = op.operand("dst"), op.operand("src0"), op.operand("src1")
        count, unit = op.field("count"), op.field("unit")
        offs = [op.field("dst_offset"), op.field("src0_offset"), op.field("src1_offset")]
        strides = [op.field("dst_stride"), op.field("src0_stride"), op.field("src1_stride")]
        bufs = [dst, s0, s1]
        if kind.startswith("cast"):  # cast or cast_<round mode>
            return self._cast(dst, s0, offs[0], offs[1], count * unit, kind[5:] or None)
        if kind.startswith("cmp_"):
            return self._compare(kind[4:], dst, s0, s1, offs, strides, count * unit)
        if kind == "cadd":
            return self._row_sums(dst, s0, offs, strides, count, unit)
        if kind in _BITWISE and self.isz(dst) == 1:
            return self._bitwise_bytes(_BINARY[kind], bufs, offs, strides, count * unit)
        if kind in _BINARY:
            mn, used = _BINARY[kind], 3
        elif kind in _SCALAR:
            mn, used = _SCALAR[kind], 1 if kind == "dup" else 2
        elif kind in _UNARY:
            mn, used = _UNARY[kind], 2
        else:
            raise self.error(f"unknown vector op '{kind}'")
        isz = self.isz(dst)
        lanes = self.vec.repeat_bytes // isz
        bb, bpr, maxr = self.vec.block_bytes, self.vec.blocks_per_repeat, self.vec.max_repeat
        base = {"dtype": self.code(dst), "scalar": op.field("scalar")}
        names = ("dst", "src0", "src1")
        dense = all(strides[i] in (unit, 0) for i in range(used)) and strides[0] == unit
        if dense:
            total = count * unit
            bcast = [strides[i] == 0 for i in range(3)]
            for i in range(used):
                if bcast[i] and lanes % unit:
                    raise self.error("a broadcast operand needs a unit dividing one repeat")
            pos = 0
            while pos < total:
                left = total - pos
                rep = min(maxr, left // lanes) if left >= lanes else 1
                mask = lanes if left >= lanes else left
                f = dict(base, repeat=rep, mask=mask)
                for i, nm in enumerate(names):
                    if i >= used:
                        f[nm] = f["dst"]
                        continue
                    adv = 0 if bcast[i] else pos
                    f[nm] = self.byte(bufs[i], offs[i] + adv)
                    # a broadcast unit of one 32 B block: every block reads it (block stride 0)
                    f[f"{nm}_blk"] = 0 if bcast[i] and unit * isz == bb else 1
                    f[f"{nm}_rep"] = 0 if bcast[i] else bpr
                self.emit(mn, **f)
                pos += rep * lanes if left >= lanes else left
            return
        # strided: units of whole 32 B blocks, 8 units per repeat, one instruction per block column
        if (unit * isz) % bb or any((strides[i] * isz) % bb for i in range(used)):
            raise self.error(f"strided vector op needs 32-byte units and strides (unit {unit}, strides {strides})")
        per_block = bb // isz
        for col in range(unit * isz // bb):
            u = 0
            while u < count:
                left = count - u
                rep = min(maxr, left // bpr) if left >= bpr else 1
                n_units = rep * bpr if left >= bpr else left
                f = dict(base, repeat=rep, mask=lanes if left >= bpr else left * per_block)
                for i, nm in enumerate(names):
                    if i >= used:
                        f[nm] = f["dst"]
                        continue
                    f[nm] = self.byte(bufs[i], offs[i] + u * strides[i] + col * per_block)
                    f[f"{nm}_blk"] = strides[i] * isz // bb
                    f[f"{nm}_rep"] = bpr * strides[i] * isz // bb
                self.emit(mn, **f)
                u += n_units

    def _row_sums(self, dst, src, offs, strides, count: int, unit: int) -> None:
        """``cadd``: dst element u (contiguous) = the sum of the ``unit`` elements of src's unit u
        (``unit`` at most one repeat, units ``strides[1]`` elements apart, a multiple of 32 B): one
        ``vcadd`` repeat per unit, in chunks that keep every output chunk 32 B aligned."""
        isz = self.isz(src)
        lanes = self.vec.repeat_bytes // isz
        bb, maxr = self.vec.block_bytes, self.vec.max_repeat
        if unit > lanes or (strides[1] * isz) % bb or strides[0] != 1:
            raise self.error(f"cadd needs units of at most {lanes} elements, 32-byte source strides and a "
                             f"contiguous destination (unit {unit}, strides {strides})")
        per_block = bb // isz
        chunk = maxr // per_block * per_block
        rep_s = strides[1] * isz // bb
        for u0 in range(0, count, chunk):
            rep = min(chunk, count - u0)
            s = self.byte(src, offs[1] + u0 * strides[1])
            self.emit("vcadd", dtype=self.code(src), dst=self.byte(dst, offs[0] + u0), src0=s, src1=s, repeat=rep,
                      mask=unit, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=rep_s, src1_rep=rep_s)

    def _dense_only(self, what: str, strides) -> None:
        if any(s != 1 for s in strides):
            raise self.error(f"{what} takes dense operands (strides {list(strides)})")

    def _compare(self, mode: str, dst, s0, s1, offs, strides, total: int) -> None:
        """vcmpv: one 0/1 byte per lane of the (equal-dtype) sources."""
        self._dense_only("a comparison", strides)
        if mode not in isa.CMP_CODES:
            raise self.error(f"unknown comparison '{mode}'")
        isz = self.isz(s0)
        lanes = self.vec.repeat_bytes // isz
        bb, maxr = self.vec.block_bytes, self.vec.max_repeat
        pos = 0
        while pos < total:
            left = total - pos
            rep = min(maxr, left // lanes) if left >= lanes else 1
            mask = lanes if left >= lanes else left
            self.emit("vcmpv", dtype=self.code(s0), mode=isa.CMP_CODES[mode], dst=self.byte(dst, offs[0] + pos),
                      src0=self.byte(s0, offs[1] + pos), src1=self.byte(s1, offs[2] + pos), repeat=rep, mask=mask,
                      dst_rep=max(1, lanes // bb), src0_rep=lanes * isz // bb, src1_rep=lanes * isz // bb)
            pos += rep * lanes if left >= lanes else left

    def _bitwise_bytes(self, mn: str, bufs, offs, strides, total: int) -> None:
        """A bitwise op on bool (byte) buffers: two bytes per int16 lane."""
        self._dense_only("a bitwise op", strides)
        lanes = self.vec.repeat_bytes // 2
        bpr, maxr = self.vec.blocks_per_repeat, self.vec.max_repeat
        n16, pos = -(-total // 2), 0
        while pos < n16:
            left = n16 - pos
            rep = min(maxr, left // lanes) if left >= lanes else 1
            mask = lanes if left >= lanes else left
            f = dict(dtype=isa.DTYPE_CODES[np.dtype(np.int16)], repeat=rep, mask=mask)
            for i, nm in enumerate(("dst", "src0", "src1")):
                f[nm] = self.byte(bufs[i], offs[i]) + 2 * pos  # pos counts int16 lanes (2 bytes)
                f[f"{nm}_blk"], f[f"{nm}_rep"] = 1, bpr
            self.emit(mn, **f)
            pos += rep * lanes if left >= lanes else left

    def _cast(self, dst, src, doff: int, soff: int, total: int, mode: str | None = None) -> None:
        """A dtype conversion (``mode`` None: the pair's default rounding, rint)."""
        sd, dd = np_dtype(src.type.element_type), np_dtype(dst.type.element_type)
        if sd == dd and mode is None:
            raise self.error("cast between equal dtypes")
        if mode is not None or {sd, dd} != {np.dtype(np.float16), np.dtype(np.float32)}:
            return self._vconv(dst, src, doff, soff, total, mode or "rint")
        mn = "vconv_f322f16" if sd == np.float32 else "vconv_f162f32"
        per = self.vec.repeat_bytes // 4
        bb = self.vec.block_bytes
        pos = 0
        while pos < total:
            left = total - pos
            rep = min(self.vec.max_repeat, left // per) if left >= per else 1
            mask = per if left >= per else left
            self.emit(mn, dtype=isa.DTYPE_CODES[sd], dst=self.byte(dst, doff + pos), src0=self.byte(src, soff + pos),
                      src1=self.byte(src, soff + pos), repeat=rep, mask=mask, dst_rep=per * dd.itemsize // bb,
                      src0_rep=per * sd.itemsize // bb, src1_rep=per * sd.itemsize // bb)
            pos += rep * per if left >= per else left

    def _vconv(self, dst, src, doff: int, soff: int, total: int, mode: str) -> None:
        """The rounding ``vconv`` between any pair of ``isa.VCONV_PAIRS``."""
        sd, dd = np_dtype(src.type.element_type), np_dtype(dst.type.element_type)
        sc, dc = isa.DTYPE_CODES[sd], isa.DTYPE_CODES[dd]
        if mode not in isa.ROUND_CODES or isa.ROUND_CODES[mode] not in isa.VCONV_PAIRS.get((sc, dc), ()):
            raise self.error(f"no vconv from {sd} to {dd} with rounding '{mode}'")
        per = self.vec.repeat_bytes // max(sd.itemsize, dd.itemsize)
        bb, pos = self.vec.block_bytes, 0
        while pos < total:
            left = total - pos
            rep = min(self.vec.max_repeat, left // per) if left >= per else 1
            mask = per if left >= per else left
            self.emit("vconv", src_dtype=sc, dst_dtype=dc, round=isa.ROUND_CODES[mode],
                      dst=self.byte(dst, doff + pos), src0=self.byte(src, soff + pos), repeat=rep, mask=mask,
                      dst_rep=per * dd.itemsize // bb, src0_rep=per * sd.itemsize // bb)
            pos += rep * per if left >= per else left

    def _reduce(self, op) -> None:
        dst, src, scratch = op.operand("dst"), op.operand("src"), op.operand("scratch")
        kind = op.field("op")
        mn, comb = ("vcmax", "vmax") if kind == "max" else ("vcadd", "vadd")
        isz = self.isz(src)
        lanes = self.vec.repeat_bytes // isz
        per_block = self.vec.block_bytes // isz
        chunk = self.vec.max_repeat // per_block * per_block  # keeps every output chunk 32 B aligned
        code = self.code(src)
        scr = self.byte(scratch, op.field("scratch_offset"))
        levels = 2 * math.ceil(op.field("count") / lanes)
        region = [scr, scr + -(-levels // 2 * isz // 32) * 32 + 32]
        slot = region[1] + -(-levels // 2 * isz // 32) * 32 + 32

        def vc(d: int, s: int, rep: int, mask: int) -> None:
            self.emit(mn, dtype=code, dst=d, src0=s, src1=s, repeat=rep, mask=mask, dst_blk=1, src0_blk=1,
                      src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8)

        def reduce(s: int, n: int, d: int, level: int) -> None:
            full, tail = divmod(n, lanes)
            if full == 0:
                vc(d, s, 1, tail)
                return
            if full == 1:
                vc(d, s, 1, lanes)
            else:
                tmp = region[level % 2]
                for r0 in range(0, full, chunk):
                    vc(tmp + r0 * isz, s + r0 * lanes * isz, min(chunk, full - r0), lanes)
                reduce(tmp, full, d, level + 1)
            if tail:
                vc(slot, s + full * lanes * isz, 1, tail)
                self.emit(comb, dtype=code, dst=d, src0=d, src1=slot, repeat=1, mask=1, dst_blk=1, src0_blk=1,
                          src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8)

        reduce(self.byte(src, op.field("src_offset")), op.field("count"), self.byte(dst, op.field("dst_offset")), 0)

    def _broadcast(self, op) -> None:
        dst, src = op.operand("dst"), op.operand("src")
        self.emit("vbrcb", dtype=self.code(dst), dst=self.byte(dst, op.field("dst_offset")),
                  src0=self.byte(src, op.field("src_offset")), src1=self.byte(src, op.field("src_offset")),
                  repeat=op.field("count"), mask=self.vec.repeat_bytes // self.isz(dst), dst_blk=1, src0_blk=1,
                  src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8)


def single_buffered_code(fn: func.FuncOp, soc: SocSpec) -> tuple[list[isa.Instr], Layout]:
    """The instructions of tile kernel ``fn`` with one copy of every buffer, and their layout.

    Raises:
        CannError: as :func:`convert_module`.
    """
    k = _Kernel(fn, soc, single=True)
    code = k.lower()
    allocs = [op for op in fn.body.block.ops if isinstance(op, tile.AllocOp)]
    return code, layout(allocs, soc, [1] * len(allocs))


def convert_module(module: ModuleOp, soc_name: str | None = None) -> None:
    """Replace every ``tile.kernel`` function of ``module`` by an ``ascend.kernel`` in place.

    Raises:
        CannError: a kernel whose buffers exceed the SoC's capacities, an unsupported tile op, or a
            multi-buffered ``tile.alloc`` whose generations cannot be renamed (naming the kernel,
            the buffer and the first offending instruction).
    """
    soc_attr = module.attributes.get("tile.soc")
    soc = load_soc(soc_name or (soc_attr.data if isinstance(soc_attr, StringAttr) else "Ascend910"))
    for op in list(module.body.block.ops):
        if isinstance(op, func.FuncOp) and "tile.kernel" in op.attributes:
            instrs = _Kernel(op, soc).lower()
            block_dim = op.attributes["tile.block_dim"].value.data
            k = KernelOp(op.sym_name.data, block_dim, len(op.body.block.args), [instr_to_op(i) for i in instrs])
            for key, value in op.attributes.items():  # tiling, fusion record: kept for reports
                if key not in ("tile.kernel", "tile.block_dim"):
                    k.attributes[key] = value
            k.location = op.location
            module.body.block.insert_op_before(k, op)
            module.body.block.erase_op(op)


@dataclass(frozen=True)
class ConvertTileToAscendPass(ModulePass):
    """Lower tile-level kernels to ascend instructions (addresses, repeats, masks, strides).

    Option ``soc``: SoC description (default: the module's ``tile.soc`` attribute)."""

    name = "convert-tile-to-ascend"
    soc: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        convert_module(op, self.soc)
