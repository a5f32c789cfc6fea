"""Small-channel convolutions (a network's first layer): the input in NC1HWC0_C04, K packed by 4.

A convolution whose input has few channels (RGB images: 3) wastes the cube in NC1HWC0: C0 = 16
lanes hold 3 real channels, so img2col builds ``kh*kw*16`` K columns per output position (784 for
ResNet-50's 7x7 ``conv2d_0``, 147 of them real) and the cube multiplies 5.3x the real MACs; MTE1,
which writes every column to L0A, bounds the kernel. CANN's first-layer format is NC1HWC0_C04
(ascend-core.md §2.3, aclFormat 12): ``[N][C1][H][W][4]``, C1 = ceil(C / 4). ``img2col_c04``
(cann/hw/isa.py: load3d with channel size 4) packs four taps of four channels into each 16-column
fractal, so K is ``ceil(C1*kh*kw*4 / k0) * k0`` (208 for the 7x7: 1.41x the real MACs instead
of 5.3x; MTE1 writes 3.8x fewer bytes) and the input moved from GM is 4x smaller.

The convolution kernel is :func:`cann.lowering.conv.conv2d`'s (output tiles over every core,
fused epilogue, multi-buffering); this module decides when the path applies
(:func:`use_c04`), converts the input (:func:`trans_data_c04`, the ``trans_data`` kernel for
ND -> NC1HWC0_C04, a transpose on the cube where it can) and lays the weight out with K ordered ``(c1, kh, kw, c4)``
(:func:`c04_weight_matrix`). docs/core-model.md ("Small-channel convolutions") documents the layout.
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.ir import Attribute

from cann.dialects import tile
from cann.dialects.tile import Space
from cann.lowering.common import ND, NC1HWC0_C04, DevTensor, Lowering, ub_chunk, unsupported

#: C0 of NC1HWC0_C04 (the channel size of ``img2col_c04``)
C04 = 4


def use_c04(x: DevTensor, kh: int, kw: int, k0: int, pins: dict[str, int]) -> bool:
    """Whether a convolution of ``x`` by a ``kh`` x ``kw`` kernel (cube fractal ``k0``) runs on the
    NC1HWC0_C04 path: ``x`` is not already in NC1HWC0 (its producer wrote it in ND: a graph input),
    its channels pack into fewer K columns (:func:`c04_k`) than NC1HWC0's ``kh*kw*16`` per C1 block
    (C <= 12 and a kernel larger than 1x1 in fp16; C <= 4 suffices for a 1x1 in fp32), and the
    tiling neither pins ``c04 = 0`` nor runs kernel taps one at a time (``taps = 1``)."""
    if len(x.shape) != 4 or x.fmt != ND or not pins.get("c04", 1) or pins.get("taps", 0):
        return False
    cin = x.shape[1]
    return 0 < cin and c04_k(math.ceil(cin / C04), kh, kw, k0) < kh * kw * 16 * math.ceil(cin / 16)


def c04_k(c1: int, kh: int, kw: int, k0: int) -> int:
    """K columns of the img2col_c04 matrix of ``c1`` C04 blocks and a ``kh`` x ``kw`` kernel,
    padded to the fractal's ``k0``."""
    return -(-c1 * kh * kw * C04 // k0) * k0


def c04_tiles(lw: Lowering, n1: int, kdim: int, m_t: int, k0: int) -> tuple[int, int]:
    """Default ``(n, k)`` tiles of a C04 convolution: ``n`` the largest multiple of 16 dividing the
    padded N up to 128 (each position's img2col row is built once, not once per channel tile: the
    output positions, not the channels, spread over the cores), ``k`` filling L0A / L0B."""
    isz = lw.dtype.itemsize
    n_t = 16 * max(d for d in range(1, 9) if n1 % d == 0)
    k_t = min(lw.usable("l0a") // (m_t * isz), lw.usable("l0b") // (n_t * isz)) // k0 * k0
    return n_t, max(k0, min(k_t, kdim))


def c04_weight_matrix(w: np.ndarray, n_pad: int) -> np.ndarray:
    """The ``[C1*kh*kw*4, n_pad]`` matrix of weights ``w`` [Cout, Cin, kh, kw] with K ordered
    ``(c1, kh, kw, c4)`` as ``img2col_c04`` builds its columns (padding channels and output
    channels zero); :func:`cann.lowering.cube.fractal_z` pads K to k0."""
    cout, cin, kh, kw = w.shape
    c1 = math.ceil(cin / C04)
    wp = np.zeros((n_pad, c1 * C04, kh, kw), np.float32)
    wp[:cout, :cin] = w
    return np.ascontiguousarray(wp.reshape(n_pad, c1, C04, kh, kw).transpose(1, 3, 4, 2, 0)
                                .reshape(c1 * kh * kw * C04, n_pad))


#: positions of one cube-transpose step (L0C [q][16] fp32, L0B [q][16] in the input dtype)
_CUBE_STEP = 256


def trans_data_c04(lw: Lowering, t: DevTensor, dtype: np.dtype, loc: Attribute | None) -> DevTensor:
    """``t`` (ND, NCHW) as NC1HWC0_C04 in ``dtype``: a ``trans_data`` kernel, SPMD over position
    chunks. With at most 4 channels, float16 / float32 data and whole fractals of positions per
    core, the cube transposes (:func:`_c04_by_cube`); otherwise, per image and core, each C1
    block's padding lanes are zeroed by one burst, then each real channel read contiguously (cast
    in UB if the dtype changes) and scattered into its lane (element bursts).

    Raises:
        CannError: ``t`` not 4-D or not ND.
    """
    if len(t.shape) != 4 or t.fmt != ND:
        raise unsupported(loc, f"NC1HWC0_C04 needs a 4-D ND tensor, got {t.fmt} shape {list(t.shape)}")
    out = lw.gm_tensor(t.shape, NC1HWC0_C04, dtype)
    floats = (np.dtype(np.float16), np.dtype(np.float32))
    # the cube transpose only where one core has both units (a separated SoC's AIV cores have no cube)
    if t.shape[1] <= C04 and t.dtype in floats and out.dtype in floats and (t.shape[2] * t.shape[3]) % 16 == 0 \
            and lw.soc.core_type == "coupled":
        return _c04_by_cube(lw, t, out, loc)
    cast = t.dtype != out.dtype
    n_, c_, h_, w_ = t.shape
    hw, c1 = h_ * w_, out.c1
    kb = lw.kernel("trans_data", loc)
    src, dst = kb.arg(t), kb.arg(out)
    per_elem = t.dtype.itemsize + (out.dtype.itemsize * 2 if cast else 0) + out.dtype.itemsize
    chunk = ub_chunk(lw, per_elem)
    kb.tiling["chunk"] = chunk
    a = kb.alloc(Space.UB, chunk, t.dtype)
    b = kb.alloc(Space.UB, chunk, out.dtype) if cast else a
    per_core = max(math.ceil(hw / lw.cores), 256)  # >= 256 positions per burst train
    cap = chunk // C04 if c_ % C04 else chunk
    pos = math.ceil(per_core / math.ceil(per_core / cap))  # even rounds of at most cap positions
    zero = None
    if c_ % C04:  # the zero tile of one round's padding lanes
        zero = kb.alloc(Space.UB, pos * C04, out.dtype)
        kb.vec("dup", zero, count=pos * C04, scalar=0.0)
    tiles = math.ceil(hw / pos)
    kb.partition(tiles)
    kb.block_offset(src, pos)
    kb.block_offset(dst, pos * C04)

    def body(first: int, last: bool = False) -> None:
        p0 = first * pos
        p = hw - (tiles - 1) * pos if last else pos
        with kb.loop(n_, {src: c_ * hw, dst: c1 * hw * C04}):  # one image's code, looped
            for j in range(c1):
                lanes = min(C04, c_ - C04 * j)
                if lanes < C04:
                    kb.copy(zero, dst, dst_offset=(j * hw + p0) * C04, burst=p * C04)
                for c in range(C04 * j, C04 * j + lanes):
                    kb.copy(src, a, src_offset=c * hw + p0, burst=p)
                    if cast:
                        kb.vec("cast", b, a, count=p)
                    kb.copy(b, dst, dst_offset=(j * hw + p0) * C04 + c % C04, nburst=p, burst=1, src_stride=1,
                            dst_stride=C04)

    kb.for_tiles(tiles, body, partial_last=hw % pos != 0)
    lw.launch(kb)
    return out


def _c04_by_cube(lw: Lowering, t: DevTensor, out: DevTensor, loc: Attribute | None) -> DevTensor:
    """NCHW (C <= 4) -> NC1HWC0_C04 through the cube: a chunk of ``q`` positions of the C channel
    planes is loaded by ``nd2nz`` (rows = channels, zero padded to 16) into L1, which is the Zn
    layout of ``B = X^T`` ([K = positions][N = channels]); each 16-position block is multiplied by a
    16x16 identity in L0A (``mmad`` in the input dtype, exact), giving L0C ``[q][16]`` (position,
    channel); ``copy_l0c_to_ub`` converts it to the output dtype and one DMA of ``q`` bursts of 4
    elements writes the C04 rows (lanes C..3 are the zero rows of B). Per core a third of the
    element bursts of the scatter path and no zero burst."""
    n_, c_, h_, w_ = t.shape
    hw = h_ * w_
    kb = lw.kernel("trans_data", loc)
    src, dst = kb.arg(t), kb.arg(out)
    k0 = lw.soc.cube.k0(t.dtype.itemsize)
    eye = np.ascontiguousarray(np.eye(16, dtype=np.float32).reshape(16, 16 // k0, k0).transpose(1, 0, 2))
    ident = kb.arg(lw.constant(eye.astype(t.dtype), "ND"))  # Zz [1][16/k0][16][k0]
    pos = -(-max(-(-hw // lw.cores), 256) // 16) * 16  # positions per core: whole fractals, >= 256
    q_max = min(_CUBE_STEP, pos)
    kb.tiling["chunk"] = q_max
    l1_id = kb.alloc(Space.L1, 256, t.dtype)
    l0a = kb.alloc(Space.L0A, 256, t.dtype)
    l1_b = kb.alloc(Space.L1, q_max * 16, t.dtype)
    l0b = kb.alloc(Space.L0B, q_max * 16, t.dtype)
    l0c = kb.alloc(Space.L0C, q_max * 16, np.dtype(np.float32))
    ub = kb.alloc(Space.UB, q_max * 16, out.dtype)
    tiles = -(-hw // pos)
    kb.partition(tiles)
    kb.block_offset(src, pos)
    kb.block_offset(dst, pos * C04)
    kb.copy(ident, l1_id, burst=256)
    kb.emit(tile.Load2dOp(l1_id, l0a, count=16 // k0, src_stride=16 * k0, dst_stride=16 * k0))

    def chunk(p0: int, s0: int, q: int) -> None:
        kb.emit(tile.CopyNd2nzOp(src, l1_b, src_offset=p0 + s0, rows=c_, cols=q, src_row_stride=hw))
        kb.emit(tile.Load2dOp(l1_b, l0b, count=q * 16 // (16 * k0), src_stride=16 * k0, dst_stride=16 * k0))
        for b in range(q // 16):  # unrolled: a hardware loop here costs a barrier around it
            kb.emit(tile.MmadOp(l0a, l0b, l0c, b_offset=b * 256, c_offset=b * 256, m=16, k=16, n=16, init=1))
        kb.emit(tile.CopyL0cToUbOp(l0c, ub, n1=1, m=q, src_m=q))
        kb.copy(ub, dst, dst_offset=(p0 + s0) * C04, nburst=q, burst=C04, src_stride=16, dst_stride=C04)

    def body(first: int, last: bool = False) -> None:
        p0 = first * pos
        p = hw - (tiles - 1) * pos if last else pos
        with kb.loop(n_, {src: c_ * hw, dst: hw * C04}):  # one image's code, looped
            for s0 in range(0, p, q_max):
                chunk(p0, s0, min(q_max, p - s0))

    if not (kb.tiling.get("loops") and _c04_loops(kb, hw, pos, tiles, q_max, chunk, n_,
                                                  {src: c_ * hw, dst: hw * C04})):
        kb.for_tiles(tiles, body, partial_last=hw % pos != 0)
    lw.launch(kb)
    return out


def _c04_loops(kb, hw: int, pos: int, tiles: int, q_max: int, chunk, n_: int, image: dict) -> bool:
    """The loop form (tiling ``loops`` = 1) of :func:`_c04_by_cube`'s tiles: rounds of whole tiles
    of ``pos`` positions (the last round moved back to end at the map's edge, one partial round run
    as two on half the cores) x chunks of ``q_max`` positions (the last moved back inside its tile),
    one loop nest whose code does not depend on the map; False (nothing emitted) when the map is
    shorter than a tile or the tiles are not one body."""
    b_dim = kb.block_dim
    rounds = math.ceil(tiles / b_dim)
    if rounds == 1 and tiles * pos > hw and tiles > 1:
        b_dim = kb.block_dim = kb.tiling["block_dim"] = math.ceil(tiles / 2)
        rounds = 2
    back = rounds * b_dim * pos - hw  # positions the last round runs past the map
    if hw < pos or back > (rounds - 1) * b_dim * pos:
        return False
    chunks = math.ceil(pos / q_max)

    def tile_(idx, lo, hi):
        r, c = idx
        p0 = r * b_dim * pos - (back if hi[0] and r == rounds - 1 else 0)
        s0 = min(c * q_max, pos - q_max) if hi[1] and c == chunks - 1 else c * q_max
        with kb.loop(n_, image):  # one image's code, looped
            chunk(p0, s0, q_max)

    try:
        kb.tile_loops((rounds, chunks), tile_)
    except ValueError:
        return False
    return True
