"""The modeled AI Core instruction set: every instruction declared once.

Each :class:`InstrDef` gives the mnemonic, opcode, pipe and fields of one instruction. Encoding,
decoding, disassembly, the ``ascend`` dialect's op classes and the simulator all derive from
``INSTRUCTIONS``; nothing else lists instructions.

Encoding (little-endian): per instruction a ``u16`` opcode followed by its fields in declaration
order, each an ``i64`` (kind ``"i"``) or an IEEE ``f64`` (kind ``"f"``). A kernel's code is the
concatenation of its instructions.

Conventions shared by all instructions (see docs/core-model.md):

* On-chip addresses (``dst``, ``src``, ``a``, ``b``, ...) are byte offsets into the buffer the
  instruction names (L1, L0A, L0B, L0C or UB); global-memory operands are a kernel argument index
  (``*_arg``) plus a byte offset into that argument.
* DMA (MTE) copies move ``nburst`` bursts of ``burst`` bytes; burst ``i`` reads at
  ``src + i*src_stride`` and writes at ``dst + i*dst_stride`` (strides in bytes, start to start).
* Vector instructions follow the Ascend repeat model (ascend-core.md §1.2): ``repeat`` iterations of
  8 DataBlocks of 32 B; block ``b`` of iteration ``r`` of an operand is at
  ``base + (r*rep_stride + b*blk_stride) * 32`` bytes; ``mask`` is the number of active lanes
  (elements) per iteration, counted from lane 0.
* ``dtype`` codes (``DTYPES``): 0 = float16, 1 = float32, 2 = int32, 3 = int16, 4 = uint8 (the
  device's bool storage: one byte 0/1), 5 = int64, 6 = int8, 7 = uint16, 8 = uint32 (uint16 / uint32 only
  move, select and convert: zero-extended to int32 / int64 to be computed on). Which vector instruction computes on which dtype
  is :data:`VEC_DTYPES` (ascend-core.md §1.1: ``asc_add`` takes int16/half/int32/float; uint8 only
  moves, selects and converts). ASSUMPTION (docs/core-model.md): int64 add/sub/max/min/compare,
  moves and conversions run on the vector unit as pairs of int32 lanes, a repeat costing
  ``cycles_per_repeat_int64`` cycles (no public source lists int64 vector arithmetic; int64 multiply
  is not modeled). Cube and MTE format instructions (``mmad``, ``img2col``, ``nd2nz``) take the float
  codes only.
* ``vcmpv`` compares lane by lane (``CMP_MODES``) and writes one byte 0/1 per lane (the bool
  format); ``vconv`` converts between the dtype pairs of ``VCONV_PAIRS`` with a rounding mode
  (``ROUND_MODES``). Both address lanes contiguously: element ``e`` of repeat ``r`` of an operand is
  at ``base + r*rep*32 + e*itemsize``.
* Pipes use HIVM's numbering (ascend-core.md §4.1): S=0, V=1, M=2, MTE1=3, MTE2=4, MTE3=5, ALL=6.
* Scalar registers: the scalar unit has :data:`SCALAR_REGS` 64-bit integer registers ``r0..``, written
  by ``ld_idx`` (an index element loaded from UB) and read by ``copy_gm_to_ub_reg`` (a DMA whose GM
  address adds ``reg * reg_stride``): data-dependent addressing, the Ascend pattern for Gather
  (the scalar unit reads the indices and issues the copies).
* ``IDX_DTYPES``: element codes of ``ld_idx`` (0 = int32, 1 = int64); the scalar unit reads either
  width, so int64 indices need no conversion kernel.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from functools import cache, cached_property

import ml_dtypes
import numpy as np


class Pipe(enum.IntEnum):
    """Instruction pipes of one AI Core (HIVM ``PIPE_*`` numbering)."""

    S = 0
    V = 1
    M = 2
    MTE1 = 3
    MTE2 = 4
    MTE3 = 5
    ALL = 6


#: dtype code -> numpy dtype
DTYPES: dict[int, np.dtype] = {0: np.dtype(np.float16), 1: np.dtype(np.float32), 2: np.dtype(np.int32),
                               3: np.dtype(np.int16), 4: np.dtype(np.uint8), 5: np.dtype(np.int64),
                               6: np.dtype(np.int8), 7: np.dtype(np.uint16), 8: np.dtype(np.uint32),
                               9: np.dtype(ml_dtypes.bfloat16)}
DTYPE_CODES: dict[np.dtype, int] = {v: k for k, v in DTYPES.items()}
DTYPE_CODES[np.dtype(np.bool_)] = 4  # bool is stored as uint8 0/1
#: dtype codes the cube and the MTE format conversions take
FLOAT_CODES = frozenset({0, 1})
#: the 64-bit dtype whose vector repeats cost ``cycles_per_repeat_int64`` (ASSUMPTION, see above)
INT64_CODE = 5

#: ld_idx element codes -> numpy dtype (index tensors)
IDX_DTYPES: dict[int, np.dtype] = {0: np.dtype(np.int32), 1: np.dtype(np.int64)}
#: scalar registers of the scalar unit (``ld_idx`` / ``copy_gm_to_ub_reg``)
SCALAR_REGS = 32

#: load2d destination codes
L0A, L0B = 1, 2


@dataclass(frozen=True)
class Field:
    name: str
    kind: str = "i"  # "i": int64, "f": float64


@dataclass(frozen=True, eq=False)
class InstrDef:
    """One instruction: ``mnemonic`` (also the ascend op name), ``opcode``, ``pipe``, ``fields``.

    Each definition exists once (:data:`INSTRUCTIONS`), so it compares and hashes by identity: an
    :class:`Instr`'s hash (the simulator's caches) does not re-hash the definition's fields."""

    mnemonic: str
    opcode: int
    pipe: Pipe
    fields: tuple[Field, ...]
    doc: str
    group: str  # "dma", "load2d", "img2col", "mmad", "fixpipe", "vector", "reduce", "sync", "spmd", ...

    @cached_property
    def struct(self) -> struct.Struct:
        return struct.Struct("<H" + "".join("q" if f.kind == "i" else "d" for f in self.fields))

    @cached_property
    def field_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)


def _f(*names: str) -> tuple[Field, ...]:
    return tuple(Field(n[1:], "f") if n.startswith("~") else Field(n) for n in names)


_DMA_IN = _f("dst", "src_arg", "src", "nburst", "burst", "src_stride", "dst_stride")
_DMA_OUT = _f("dst_arg", "dst", "src", "nburst", "burst", "src_stride", "dst_stride")
_VEC = _f("dtype", "dst", "src0", "src1", "repeat", "mask", "dst_blk", "src0_blk", "src1_blk",
          "dst_rep", "src0_rep", "src1_rep", "~scalar")
_FLAG = _f("src_pipe", "dst_pipe", "event")

_VEC_BINARY = {
    "vadd": "dst = src0 + src1", "vsub": "dst = src0 - src1", "vmul": "dst = src0 * src1",
    "vdiv": "dst = src0 / src1", "vmax": "dst = max(src0, src1)", "vmin": "dst = min(src0, src1)",
}
_VEC_SCALAR = {"vadds": "dst = src0 + scalar", "vmuls": "dst = src0 * scalar", "vmaxs": "dst = max(src0, scalar)"}
_VEC_UNARY = {
    "vrelu": "dst = max(src0, 0)", "vexp": "dst = exp(src0)", "vln": "dst = ln(src0)",
    "vrec": "dst = 1 / src0", "vsqrt": "dst = sqrt(src0)", "vabs": "dst = |src0|", "vmov": "dst = src0",
}
#: unary vector ops whose cost is the transcendental rate
TRANSCENDENTAL = frozenset({"vexp", "vln", "vrec", "vsqrt", "vdiv"})
_VEC_BITWISE = {"vand": "dst = src0 & src1", "vor": "dst = src0 | src1", "vxor": "dst = src0 ^ src1"}

#: vcmpv ``mode`` codes (HIVM compare modes)
CMP_MODES: dict[int, str] = {0: "eq", 1: "ne", 2: "lt", 3: "gt", 4: "ge", 5: "le"}
CMP_CODES: dict[str, int] = {v: k for k, v in CMP_MODES.items()}
#: vconv ``round`` codes (HIVM vcast round modes): rint = to nearest, ties to even; round = to
#: nearest, ties away from zero; floor; ceil; trunc = toward zero
ROUND_MODES: dict[int, str] = {0: "rint", 1: "round", 2: "floor", 3: "ceil", 4: "trunc"}
ROUND_CODES: dict[str, int] = {v: k for k, v in ROUND_MODES.items()}

_F, _I16, _I32, _U8, _I64 = frozenset({0, 1}), 3, 2, 4, 5
_ALL = frozenset(DTYPES)
#: dtype codes each vector instruction computes on (others are a fault)
VEC_DTYPES: dict[str, frozenset[int]] = {
    **{m: _F | {_I32, _I16, _I64} for m in ("vadd", "vsub", "vmax", "vmin", "vcmpv")},
    **{m: _F | {_I32, _I16} for m in ("vmul", "vadds", "vmuls", "vmaxs", "vmins", "vabs", "vrelu")},
    **{m: _F for m in ("vdiv", "vexp", "vln", "vrec", "vsqrt", "vcmax", "vcadd", "vmla")},
    **{m: _ALL for m in ("vmov", "vdup", "vbrcb", "vsel")},
    **{m: frozenset({_I16}) for m in _VEC_BITWISE},
}
#: vconv (src code, dst code) -> the round modes it takes. Float -> int conversions saturate and
#: take NaN to 0; int -> float and float narrowing round to nearest even (rint) only; int -> narrower
#: int keeps the low bits (two's complement wrap), unsigned -> wider int zero-extends (ASSUMPTION:
#: modeled on the int64 <-> int32 pair; docs/core-model.md).
_RINT = frozenset({0})
_ROUNDS = frozenset(ROUND_MODES)
VCONV_PAIRS: dict[tuple[int, int], frozenset[int]] = {
    (1, 0): _RINT, (0, 1): _RINT,                 # float32 <-> float16
    (1, 1): _ROUNDS, (0, 0): _ROUNDS,             # to an integral value in the same float dtype
    (1, 2): _ROUNDS, (0, 2): _ROUNDS,             # float -> int32
    (2, 1): _RINT, (2, 0): _RINT,                 # int32 -> float
    (4, 0): _RINT, (0, 4): _ROUNDS,               # uint8 <-> float16
    (2, 5): _RINT, (5, 2): _RINT,                 # int32 <-> int64 (narrowing keeps the low 32 bits)
    (1, 5): _ROUNDS, (5, 1): _RINT,               # float32 <-> int64
    (6, 0): _RINT, (0, 6): _ROUNDS,               # int8 <-> float16
    (7, 2): _RINT, (8, 5): _RINT,                 # uint16 -> int32, uint32 -> int64 (zero-extend)
    (2, 4): _RINT, (2, 6): _RINT, (2, 7): _RINT,  # int32 -> uint8 / int8 / uint16 (keep the low bits)
    (5, 8): _RINT,                                # int64 -> uint32 (keep the low 32 bits)
    (3, 2): _RINT, (2, 3): _RINT,                 # int16 -> int32 (sign-extend), int32 -> int16 (low bits)
    (9, 1): _RINT, (1, 9): _RINT,                 # bfloat16 <-> float32 (HIVM vcast; bf16 is a storage
                                                  # dtype: vector math runs in float32, ascend-core.md)
}

_defs: list[tuple[str, Pipe, tuple[Field, ...], str, str]] = [
    ("copy_gm_to_l1", Pipe.MTE2, _DMA_IN, "dma", "GM -> L1 burst copy"),
    ("copy_gm_to_ub", Pipe.MTE2, _DMA_IN, "dma", "GM -> UB burst copy"),
    ("copy_gm_to_l1_nd2nz", Pipe.MTE2, _f("dtype", "dst", "src_arg", "src", "rows", "cols", "src_row_stride"), "nd2nz",
     "GM row-major rows x cols matrix (rows src_row_stride bytes apart) -> L1 in NZ [c1][rows16][c0], "
     "c0 = 32 B / element, rows padded to 16 and cols to c0 with zeros"),
    ("copy_ub_to_gm", Pipe.MTE3, _DMA_OUT, "dma", "UB -> GM burst copy"),
    ("load2d", Pipe.MTE1, _f("dst_space", "dst", "src", "repeat", "src_stride", "dst_stride"), "load2d",
     "L1 -> L0A (dst_space 1) or L0B (dst_space 2): repeat fractals of 512 B; fractal i read at src + "
     "i*src_stride, written at dst + i*dst_stride (bytes)"),
    ("img2col", Pipe.MTE1, _f("dtype", "dst", "src", "fm_c1", "fm_h", "fm_w", "pad_t", "pad_b", "pad_l", "pad_r",
                              "stride_h", "stride_w", "kernel_h", "kernel_w", "dil_h", "dil_w",
                              "m_start", "m_count", "k_start", "k_count", "fm_c1_stride"), "img2col",
     "load3d: L1 feature map [fm_c1][fm_h][fm_w][16] -> L0A Zz [m_count/16][k_count/k0][16][k0] for output "
     "positions m_start.. and K columns k_start.. (K index = ((c1*kernel_h + kh)*kernel_w + kw)*16 + c0); "
     "padding and positions past the output are zero; C1 block c of the map starts at src + c*fm_c1_stride "
     "(bytes, >= fm_h*fm_w*16*itemsize: packed when equal; 0: packed, as .om files before format version 6 "
     "read; ASSUMPTION: a model extension, docs/core-model.md)"),
    ("mmad", Pipe.M, _f("dtype", "dst", "a", "b", "m", "k", "n", "init"), "mmad",
     "L0C Nz [n/16][m][16] (fp32) (init ? = : +=) L0A Zz [m/16][k/k0][16][k0] x L0B Zn [k/k0][n/16][16][k0]"),
    ("copy_l0c_to_ub", Pipe.V, _f("dtype", "dst", "src", "n1", "m", "src_m"), "fixpipe",
     "L0C Nz fp32 [n1][src_m][16] rows 0..m -> UB [n1][m][16] converted to dtype (coupled core: vector pipe)"),
    *[(m, Pipe.V, _VEC, "vector", d) for m, d in {**_VEC_BINARY, **_VEC_SCALAR, **_VEC_UNARY}.items()],
    ("vdup", Pipe.V, _VEC, "vector", "dst = scalar"),
    ("vconv_f322f16", Pipe.V, _VEC, "vconv", "float32 -> float16, 64 elements per repeat; element e of repeat r "
     "at base + r*rep*32 + e*itemsize (blk strides unused)"),
    ("vconv_f162f32", Pipe.V, _VEC, "vconv", "float16 -> float32, same addressing as vconv_f322f16"),
    ("vcmax", Pipe.V, _VEC, "reduce", "dst element r = max over the active lanes of src0 repeat r"),
    ("vcadd", Pipe.V, _VEC, "reduce", "dst element r = sum over the active lanes of src0 repeat r"),
    ("vbrcb", Pipe.V, _VEC, "broadcast", "dst (repeat x 256 B, contiguous) = the element at src0"),
    ("set_flag", Pipe.S, _FLAG, "sync", "after all earlier work of src_pipe, set flag (src_pipe, dst_pipe, event)"),
    ("wait_flag", Pipe.S, _FLAG, "sync", "dst_pipe waits until flag (src_pipe, dst_pipe, event) is set, then clears it"),
    ("pipe_barrier", Pipe.S, _f("pipe"), "sync", "orders everything on pipe (ALL: every pipe) before what follows"),
    # SPMD control, resolved by the scalar unit of each core (DESIGN.md principle 5)
    ("block_offset", Pipe.S, _f("arg", "stride"), "spmd",
     "for the rest of the kernel, kernel argument arg's GM base is moved by block_idx * stride bytes"),
    ("block_if", Pipe.S, _f("lo", "hi"), "spmd",
     "the instructions up to the matching block_endif run only on cores with lo <= block_idx < hi"),
    ("block_endif", Pipe.S, (), "spmd", "ends the innermost block_if"),
    # data-dependent addressing (Gather with runtime indices); appended: opcodes above are unchanged
    ("ld_idx", Pipe.S, _f("reg", "dtype", "src", "bound"), "scalar",
     "scalar register reg = the index element at UB byte src (dtype: IDX_DTYPES, 0 = int32, 1 = int64); "
     "a negative value v becomes v + bound (ONNX Gather wrap); a value outside [0, bound) after the wrap "
     "is an error naming the index (never an out-of-tensor read)"),
    ("copy_gm_to_ub_reg", Pipe.MTE2, _f("dst", "src_arg", "src", "nburst", "burst", "src_stride", "dst_stride",
                                        "reg", "reg_stride"), "dma_reg",
     "GM -> UB burst copy as copy_gm_to_ub, from GM byte src + r[reg] * reg_stride (register-indexed source)"),
    ("vsel", Pipe.V, _f("dtype", "dst", "cond", "src0", "src1", "repeat", "mask", "dst_blk", "cond_blk",
                        "src0_blk", "src1_blk", "dst_rep", "cond_rep", "src0_rep", "src1_rep"), "select",
     "dst = cond != 0 ? src0 : src1, per lane; cond is a UB operand of dtype holding 0/1 (the device's "
     "boolean tensors, one byte 0/1, are converted to the data dtype by vconv first); repeat model as the vector group"),
    # hardware loops, run by the scalar unit: a kernel's code does not grow with its trip counts
    ("loop_begin", Pipe.S, _f("count"), "spmd",
     "the instructions up to the matching loop_end run count times"),
    ("loop_offset", Pipe.S, _f("arg", "stride"), "spmd",
     "in the enclosing loop, iteration i sees kernel argument arg's GM base moved by i * stride bytes"),
    ("loop_end", Pipe.S, (), "spmd", "ends the innermost loop_begin"),
    # integer and bool computation; appended: opcodes above are unchanged
    *[(m, Pipe.V, _VEC, "vector", d + " (bitwise, int16 lanes; bool bytes are processed two per lane)")
      for m, d in _VEC_BITWISE.items()],
    ("vcmpv", Pipe.V, _f("dtype", "mode", "dst", "src0", "src1", "repeat", "mask", "dst_rep", "src0_rep", "src1_rep"),
     "compare", "dst byte e of repeat r = (src0 <mode> src1) ? 1 : 0 for lane e (CMP_MODES: eq ne lt gt ge le; "
     "NaN compares false except ne); lanes = 256 B / itemsize of dtype, contiguous per repeat; dst lane e at "
     "dst + r*dst_rep*32 + e"),
    ("vconv", Pipe.V, _f("src_dtype", "dst_dtype", "round", "dst", "src0", "repeat", "mask", "dst_rep", "src0_rep"),
     "convert", "dst = convert(src0) from src_dtype to dst_dtype with rounding mode round (VCONV_PAIRS, "
     "ROUND_MODES); 256 B / max(itemsize) elements per repeat, contiguous; element e of repeat r at "
     "base + r*rep*32 + e*itemsize"),
    # buffer and event rotation in hardware loops (multi-buffering); appended: opcodes above are unchanged
    ("loop_rotate", Pipe.S, _f("space", "base", "size", "copies", "step"), "spmd",
     "in the enclosing loop, iteration i sees every on-chip address a of buffer space (SPACE_CODES) with "
     "base <= a < base + copies*size in copy (c + i*step) mod copies, c = (a - base) // size, at the same "
     "offset (a - base) % size within the copy: one body rotating through copies buffers"),
    ("loop_rotate_event", Pipe.S, _f("src_pipe", "dst_pipe", "base", "copies", "step"), "spmd",
     "in the enclosing loop, iteration i sees the event e of every set_flag / wait_flag src_pipe -> dst_pipe "
     "with base <= e < base + copies as base + (e - base + i*step) mod copies (the events of rotated buffers)"),
    ("block_offset_mod", Pipe.S, _f("arg", "stride", "modulo"), "spmd",
     "for the rest of the kernel, kernel argument arg's GM base is moved by (block_idx mod modulo) * stride "
     "bytes (a two-level split: cores b and b + modulo work on the same channel tile of different rows)"),
    # per-iteration steps of on-chip fields in hardware loops; appended: opcodes above are unchanged
    ("loop_step", Pipe.S, _f("field_no", "step"), "spmd",
     "in the enclosing loop, iteration i sees field number `field_no` (declaration order, from 0) of the next "
     "work instruction (the first one after it that is neither sync nor SPMD control, possibly inside a "
     "nested loop; it must not cross a block_if, block_endif or the loop's end) advanced by i*step; the "
     "field must be steppable (STEP_FIELDS: on-chip addresses, img2col m_start / k_start); an address is "
     "stepped after loop_rotate remapped it; several levels of nesting add their i*step"),
    # clamped steps: the tiles at a border (padding, a tail) in the same loop body; appended
    ("loop_clamp", Pipe.S, _f("field_no", "step", "offset", "lo", "hi", "up"), "spmd",
     "as loop_step, but iteration i of the loop `up` levels out from the innermost loop enclosing it (0: that "
     "loop) sees the field advanced by clamp(offset + i*step, lo, hi) = min(max(offset + i*step, lo), hi) "
     "(lo <= hi): a window that stops at a tensor's edge, a pad that only the first tile has, a last tile "
     "moved back to end at the edge, an instruction of a nested loop moving with an outer one; the field must "
     "be clampable (CLAMP_FIELDS: the steppable fields, GM offsets, DMA nburst / burst, img2col fm_h / fm_w / "
     "pad_t / pad_b / pad_l / pad_r / fm_c1_stride); its terms add to those of other loop_step / loop_clamp instructions on the same field"),
    # multiply-accumulate on the vector unit (depthwise convolution); appended: opcodes above are unchanged
    ("vmla", Pipe.V, _VEC, "vector", "dst = src0 * src1 + dst (CCE vmla; reads dst as well; float dtypes; "
     "ASSUMPTION: the product is rounded to the dtype before the sum, and a repeat costs what vmul's does)"),
    # small-channel first layers (NC1HWC0_C04 feature maps); appended: opcodes above are unchanged
    ("img2col_c04", Pipe.MTE1, _f("dtype", "dst", "src", "fm_c1", "fm_h", "fm_w", "pad_t", "pad_b", "pad_l", "pad_r",
                                  "stride_h", "stride_w", "kernel_h", "kernel_w", "dil_h", "dil_w",
                                  "m_start", "m_count", "k_start", "k_count", "fm_c1_stride"), "img2col",
     "load3d with channel size 4: L1 feature map [fm_c1][fm_h][fm_w][4] (NC1HWC0_C04) -> L0A Zz "
     "[m_count/16][k_count/k0][16][k0], K index = ((c1*kernel_h + kh)*kernel_w + kw)*4 + c0 (four taps of "
     "four channels per 16-column fractal), C1 block c at src + c*fm_c1_stride (>= fm_h*fm_w*4*itemsize, 0: packed); otherwise as img2col (ascend-core.md §2.3 NC1HWC0_C04 [OFF] "
     "ACLFORMAT; Ascend C LoadData3DParamsV2 channelSize 4; ASSUMPTION: the cost is img2col's, bytes written)"),
    # 16x16 lane transposes (layout changes in UB: channel shuffles, NCHW <-> NC1HWC0); appended
    ("vtranspose", Pipe.V, _f("dtype", "dst", "src", "repeat", "dst_rep", "src_rep", "dst_row", "src_row"),
     "transpose",
     "repeat 16x16 matrices of dtype elements: row i of matrix r (16 elements) is read at src + (r*src_rep + "
     "i*src_row)*32 and element j of it written at dst + (r*dst_rep + j*dst_row)*32 + i*itemsize, i.e. dst[j][i] "
     "= src[i][j] (strides in 32-byte blocks; a row stride of 0 means rows packed, 16*itemsize bytes apart); the "
     "source and destination bytes of one instruction must not overlap (CCE scatter_vnchwconv_b16: 16 source "
     "and 16 destination 32-byte row addresses, here equally spaced; HIVM hivm.hir.vtranspose. ASSUMPTION: any "
     "dtype, and a matrix costs one vector repeat per 256 B it holds: 2 for 16-bit, 4 for 32-bit elements)"),
    # minimum with a scalar (Clip's upper bound in one op); appended: opcodes above are unchanged
    ("vmins", Pipe.V, _VEC, "vector", "dst = min(src0, scalar) (CCE vmins, Ascend C Mins; scalar rounded to dtype)"),
    # atomic-add store: the exact reduction of partial sums that several cores write to the same GM bytes
    # (a K split across cores); appended
    ("copy_ub_to_gm_add", Pipe.MTE3, _DMA_OUT + _f("dtype"), "dma",
     "UB -> GM burst copy that adds to GM instead of overwriting: each dtype element of the destination "
     "becomes round(GM + UB), summed in float32 and rounded to dtype (nearest even); dtype float16 or "
     "float32; bursts hold whole elements. Blocks of a launch may add to the same GM bytes concurrently "
     "(the sum is their block-order sum); a plain write of bytes another block adds to is a race "
     "(ascend-core.md: HIVM store with optional atomic add on MTE3; Ascend C SetAtomicAdd before an MTE3 "
     "DataCopy. ASSUMPTION: float16 accumulation on the dav-c100 core, the cost of copy_ub_to_gm)"),
    # the other half of a two-level split; appended: opcodes above are unchanged
    ("block_offset_div", Pipe.S, _f("arg", "stride", "divisor"), "spmd",
     "for the rest of the kernel, kernel argument arg's GM base is moved by (block_idx div divisor) * stride "
     "bytes (with block_offset_mod of the same divisor: cores b and b + divisor work on the same column "
     "tile of different row tiles, so that every core runs one code; Ascend C GetBlockIdx() / n)"),
]

#: on-chip buffer codes of ``loop_rotate``'s ``space`` (the race checker's buffer indices, GM = 0)
SPACE_CODES: dict[str, int] = {"l1": 1, "l0a": 2, "l0b": 3, "l0c": 4, "ub": 5}
SPACE_NAMES: dict[int, str] = {v: k for k, v in SPACE_CODES.items()}
_UBF = SPACE_CODES["ub"]
#: mnemonic -> ((field, on-chip space code), ...): the fields holding on-chip byte addresses;
#: ``load2d``'s ``dst`` is in L0A or L0B by its ``dst_space`` (see :func:`address_fields`)
_ADDRESS_FIELDS: dict[str, tuple[tuple[str, int], ...]] = {
    "copy_gm_to_l1": (("dst", 1),), "copy_gm_to_ub": (("dst", _UBF),), "copy_gm_to_l1_nd2nz": (("dst", 1),),
    "copy_ub_to_gm": (("src", _UBF),), "copy_ub_to_gm_add": (("src", _UBF),), "load2d": (("src", 1), ("dst", 0)), "img2col": (("src", 1), ("dst", 2)),
    "img2col_c04": (("src", 1), ("dst", 2)),
    "mmad": (("dst", 4), ("a", 2), ("b", 3)), "copy_l0c_to_ub": (("src", 4), ("dst", _UBF)),
    "ld_idx": (("src", _UBF),), "copy_gm_to_ub_reg": (("dst", _UBF),),
    "vsel": (("dst", _UBF), ("cond", _UBF), ("src0", _UBF), ("src1", _UBF)),
    "vcmpv": (("dst", _UBF), ("src0", _UBF), ("src1", _UBF)), "vconv": (("dst", _UBF), ("src0", _UBF)),
    "vtranspose": (("dst", _UBF), ("src", _UBF)),
}

#: mnemonic -> its non-address fields a ``loop_step`` may advance (besides the on-chip addresses)
_EXTRA_STEP_FIELDS: dict[str, tuple[str, ...]] = {"img2col": ("m_start", "k_start"),
                                                   "img2col_c04": ("m_start", "k_start")}
#: instruction group -> its size / window fields a ``loop_clamp`` may also move
_EXTRA_CLAMP_FIELDS: dict[str, tuple[str, ...]] = {"dma": ("nburst", "burst", "src_stride", "dst_stride"),
                                                    "img2col": ("fm_h", "fm_w", "pad_t", "pad_b", "pad_l",
                                                                "pad_r", "fm_c1_stride")}

INSTRUCTIONS: tuple[InstrDef, ...] = tuple(
    InstrDef(m, i + 1, p, f, d, g) for i, (m, p, f, g, d) in enumerate(_defs)
)
BY_MNEMONIC: dict[str, InstrDef] = {d.mnemonic: d for d in INSTRUCTIONS}
BY_OPCODE: dict[int, InstrDef] = {d.opcode: d for d in INSTRUCTIONS}



@cache
def _address_fields(defn: InstrDef) -> tuple[tuple[int, int], ...]:
    named = _ADDRESS_FIELDS.get(defn.mnemonic)
    if named is None:  # the vector groups: dst, src0, src1 in UB
        named = (("dst", _UBF), ("src0", _UBF), ("src1", _UBF)) if defn.group in (
            "vector", "vconv", "reduce", "broadcast") else ()
    return tuple((defn.field_names.index(f), sp) for f, sp in named)


@cache
def step_fields(defn: InstrDef) -> frozenset[int]:
    """Indices of the fields of ``defn`` a ``loop_step`` may advance: its on-chip byte addresses and
    the position fields of :data:`_EXTRA_STEP_FIELDS` (img2col ``m_start`` / ``k_start``)."""
    names = defn.field_names
    return frozenset([i for i, _ in _address_fields(defn)]
                     + [names.index(f) for f in _EXTRA_STEP_FIELDS.get(defn.mnemonic, ())])


@cache
def clamp_fields(defn: InstrDef) -> frozenset[int]:
    """Indices of the fields of ``defn`` a ``loop_clamp`` may move: the :func:`step_fields`, the GM
    byte offsets (``src`` of a ``src_arg``, ``dst`` of a ``dst_arg``), and the fields of
    :data:`_EXTRA_CLAMP_FIELDS` (a DMA's ``nburst`` / ``burst``, img2col's window: ``fm_h`` /
    ``fm_w`` / ``pad_t`` / ``pad_b`` / ``pad_l`` / ``pad_r`` and its C1 pitch ``fm_c1_stride``)."""
    names = defn.field_names
    gm = [names.index(o) for a, o in (("src_arg", "src"), ("dst_arg", "dst")) if a in names and o in names]
    extra = [names.index(f) for f in _EXTRA_CLAMP_FIELDS.get(defn.group, ()) if f in names]
    return step_fields(defn) | frozenset(gm + extra)


def address_fields(ins: "Instr") -> tuple[tuple[int, int], ...]:
    """``((field index, space code), ...)``: the on-chip byte-address fields of ``ins`` and the buffer
    (:data:`SPACE_CODES`) each addresses; GM operands (``*_arg`` plus offset) are not listed."""
    fields = _address_fields(ins.defn)
    if ins.defn.mnemonic == "load2d":
        dst_space = SPACE_CODES["l0a"] if ins.values[0] == L0A else SPACE_CODES["l0b"]
        return tuple((i, dst_space if sp == 0 else sp) for i, sp in fields)
    return fields


@dataclass(frozen=True)
class Instr:
    """One decoded instruction: its definition and field values (in field order)."""

    defn: InstrDef
    values: tuple

    def __getattr__(self, name: str):
        try:
            return self.values[self.defn.field_names.index(name)]
        except ValueError:
            raise AttributeError(name) from None

    @property
    def mnemonic(self) -> str:
        return self.defn.mnemonic

    @property
    def pipe(self) -> Pipe:
        """The pipe that executes it; set_flag runs on src_pipe, wait_flag on dst_pipe."""
        if self.defn.mnemonic == "set_flag":
            return Pipe(self.values[0])
        if self.defn.mnemonic == "wait_flag":
            return Pipe(self.values[1])
        return self.defn.pipe

    def asm(self) -> str:
        """Disassembly text, e.g. ``mmad dtype=0, dst=0, a=0, b=0, m=16, k=16, n=16, init=1``."""
        parts = []
        for f, v in zip(self.defn.fields, self.values):
            parts.append(f"{f.name}={v!r}" if f.kind == "f" else f"{f.name}={v}")
        return f"{self.defn.mnemonic} " + ", ".join(parts)


def make(mnemonic: str, **fields) -> Instr:
    """Build an instruction by field name; omitted fields are 0.

    Raises:
        KeyError: unknown mnemonic or field.
    """
    d = BY_MNEMONIC[mnemonic]
    unknown = set(fields) - set(d.field_names)
    if unknown:
        raise KeyError(f"{mnemonic}: unknown fields {sorted(unknown)}")
    return Instr(d, tuple(float(fields.get(f.name, 0.0)) if f.kind == "f" else int(fields.get(f.name, 0))
                          for f in d.fields))


def encode(instrs) -> bytes:
    """Encode instructions to bytes (see the module docstring)."""
    out = bytearray()
    for ins in instrs:
        out += ins.defn.struct.pack(ins.defn.opcode, *ins.values)
    return bytes(out)


def decode(code: bytes) -> list[Instr]:
    """Decode a kernel's code.

    Raises:
        ValueError: an unknown opcode or a truncated instruction, naming the byte offset.
    """
    out: list[Instr] = []
    pos, n = 0, len(code)
    op_struct = struct.Struct("<H")
    while pos < n:
        if pos + 2 > n:
            raise ValueError(f"truncated instruction at byte {pos}")
        (opcode,) = op_struct.unpack_from(code, pos)
        d = BY_OPCODE.get(opcode)
        if d is None:
            raise ValueError(f"unknown opcode {opcode} at byte {pos}")
        if pos + d.struct.size > n:
            raise ValueError(f"truncated {d.mnemonic} at byte {pos}")
        out.append(Instr(d, d.struct.unpack_from(code, pos)[1:]))
        pos += d.struct.size
    return out
