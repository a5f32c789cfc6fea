"""The offline-model container (``.om``): a versioned, checksummed, little-endian binary format.

The layout is documented byte by byte in ``docs/om-format.md``. In short::

    header (48 bytes)  magic, version, section count, gm_size, weights_offset, flags, gm_size_no_reuse
    section table      6 entries (file offset, size)
    strings            soc_version, precision_mode (each u32 length + UTF-8), the knowledge bases' digests
    tensors            inputs then outputs
    weights            raw bytes, the section starts at a 64-byte aligned file offset
    kernels            name, block_dim, num_args, code
    launches           kernel index, argument offsets
    work               per launch: the model work it computes (the profile's ideal bound)
    trailer (32 bytes) SHA-256 of every byte before it

:func:`write_om` is atomic and deterministic; :func:`read_om` verifies the checksum before it
parses anything and rejects every malformed file with a :class:`~cann.errors.CannError`.
"""

from __future__ import annotations

import hashlib
import math
import os
import struct
from collections.abc import Callable
from dataclasses import astuple, dataclass, replace
from pathlib import Path

import ml_dtypes  # noqa: F401  (registers numpy's 'bfloat16' dtype name)
import numpy as np

from cann.errors import CannError
from cann.fileio import atomic_write_bytes
from cann.hw import isa
from cann.hw.config import SocSpec

MAGIC = b"CANNOM\0\0"
VERSION = 6
#: the versions this reader accepts (version 3: no knowledge-base digests in the strings section;
#: versions 3 and 4: a 32-byte header without flags and gm_size_no_reuse, read as no GM reuse;
#: versions 3 to 5: kernels whose img2col / img2col_c04 end before ``fm_c1_stride``, read as packed)
READABLE_VERSIONS = (3, 4, 5, 6)
#: the first version whose img2col / img2col_c04 carry ``fm_c1_stride`` (the C1 blocks' L1 pitch)
C1_PITCH_VERSION = 6
#: the instructions that gained ``fm_c1_stride`` (their last field, 8 bytes) in version 6
_C1_PITCH_OPCODES = frozenset(isa.BY_MNEMONIC[m].opcode for m in ("img2col", "img2col_c04"))
ALIGN = 64
#: magic, version, section count, gm_size, weights_offset, flags, reserved (0), gm_size_no_reuse
HEADER = struct.Struct("<8sIIQQIIQ")
HEADER_V4 = struct.Struct("<8sIIQQ")  # versions 3 and 4: magic, version, section count, gm_size, weights_offset
SECTION = struct.Struct("<QQ")  # file offset, size
SECTION_NAMES = ("strings", "tensors", "weights", "kernels", "launches", "work")
HEADER_SIZE = HEADER.size + SECTION.size * len(SECTION_NAMES)  # header and section table (versions 5 and 6)
#: the header's flags: bit 0, activations and workspaces share GM (``cann-compile --gm-reuse``)
FLAG_GM_REUSE = 1
FLAGS = FLAG_GM_REUSE  # every defined bit


def header_size(version: int) -> int:
    """Bytes of the fixed header of format ``version`` (the section table follows it)."""
    return (HEADER if version >= 5 else HEADER_V4).size
CHECKSUM_SIZE = 32
#: the values of the strings section's precision_mode
PRECISION_MODES = ("force_fp16", "allow_fp32_to_fp16", "must_keep_origin_dtype", "force_fp32", "allow_mix_precision")
#: the precision modes storing float tensors in float16 on the device
FP16_PRECISION_MODES = ("force_fp16", "allow_fp32_to_fp16", "allow_mix_precision")
#: the highest rank of an input or output tensor (numpy's limit on array dimensions)
MAX_RANK = 32


@dataclass(frozen=True)
class IoTensor:
    """A model input or output, as the user sees it."""

    name: str
    shape: tuple[int, ...]
    dtype: str  # numpy dtype name: "float32", "float16", "int64", ...
    gm_offset: int  # byte offset in the global-memory arena (ND, C order)

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * np.dtype(self.dtype).itemsize  # Python ints: no overflow


@dataclass(frozen=True)
class Kernel:
    name: str
    block_dim: int  # number of cores the kernel runs on (SPMD)
    num_args: int  # number of global-memory pointer arguments the code refers to
    code: bytes  # encoded instruction stream (see cann.hw.isa)
    nodes: tuple[str, ...] = ()  # the model nodes the kernel computes (the fusion report's; for messages)


@dataclass(frozen=True)
class LaunchWork:
    """The model work a launch computes, recorded at compile time (``cann.passes.analysis.ideal``)
    for the profile's ideal bound (docs/core-model.md, "Ideal bound"); all zero when unknown.

    ``model_macs``: multiply-accumulates of the model nodes the launch computes (no padding, grouped
    convolutions counted per group); ``cube_itemsize``: bytes of a cube input element (2: fp16,
    4: fp32; 0 without MACs); ``vector_bytes`` / ``vector_bytes_transcendental`` /
    ``vector_bytes_int64``: the nodes' vector element operations times the storage element size in
    bytes, per cost class (simple, transcendental, int64 lanes); ``compulsory_bytes``: each model
    input, weight and output of the launch moved once, in the storage dtype.
    """

    model_macs: int = 0
    cube_itemsize: int = 0
    vector_bytes: int = 0
    vector_bytes_transcendental: int = 0
    vector_bytes_int64: int = 0
    compulsory_bytes: int = 0


WORK = struct.Struct("<QIQQQQ")  # LaunchWork's fields in order


@dataclass(frozen=True)
class Launch:
    kernel: int  # index into OfflineModel.kernels
    args: tuple[int, ...]  # absolute GM byte offset bound to each kernel argument
    work: LaunchWork = LaunchWork()  # the model work it computes (the profile's ideal bound)


@dataclass(frozen=True)
class OfflineModel:
    soc_version: str
    precision_mode: str
    inputs: tuple[IoTensor, ...]
    outputs: tuple[IoTensor, ...]
    gm_size: int  # bytes of the global-memory arena
    weights_offset: int  # where `weights` is loaded in the arena
    weights: bytes
    kernels: tuple[Kernel, ...]
    launches: tuple[Launch, ...]
    #: the knowledge bases the compile read (``"shipped:<sha256 hex>"``, ``"user:<sha256 hex>"``)
    knowledge_bases: tuple[str, ...] = ()
    #: activations and workspaces whose lifetimes do not intersect share GM (cann.codegen.gm_plan)
    gm_reuse: bool = False
    #: the gm_size the same program needs without reuse (0: not recorded, i.e. gm_size)
    gm_size_no_reuse: int = 0

    @property
    def weight_bytes(self) -> int:
        """Bytes of the arena holding the weights (the weights section)."""
        return len(self.weights)

    @property
    def activation_bytes(self) -> int:
        """Bytes of the arena that are not weights: model inputs, activations, workspaces."""
        return self.gm_size - len(self.weights)

    @property
    def activation_bytes_no_reuse(self) -> int:
        """:attr:`activation_bytes` without reuse."""
        return (self.gm_size_no_reuse or self.gm_size) - len(self.weights)


def memory_line(model: OfflineModel) -> str:
    """The device memory of ``model``, one line (``cann-compile``'s summary, ``cann-run --info`` and
    ``--profile``): the arena, its weights, the rest (inputs, activations, workspaces), and with
    GM reuse the rest without it."""
    line = f"device memory {model.gm_size} bytes: weights {model.weight_bytes}, activations {model.activation_bytes}"
    if model.gm_reuse:
        return line + f" (reuse on; {model.activation_bytes_no_reuse} without)"
    return line + " (reuse off)"


# ---------------------------------------------------------------------------------------------
# writing


def _str(s: str) -> bytes:
    b = s.encode("utf-8")
    return struct.pack("<I", len(b)) + b


def _tensors(ts: tuple[IoTensor, ...]) -> bytes:
    out = [struct.pack("<I", len(ts))]
    for t in ts:
        out += [_str(t.name), _str(t.dtype), struct.pack("<I", len(t.shape))]
        out += [struct.pack(f"<{len(t.shape)}q", *t.shape), struct.pack("<Q", t.gm_offset)]
    return b"".join(out)


def _c1_pitch_code(code: bytes, old: bool, where: str, kernel: str) -> bytes:
    """A kernel's code between format versions 6 and older: ``old`` False reads older code (every
    img2col / img2col_c04 gains ``fm_c1_stride`` = 0, packed); True writes older code (the field
    dropped, which only a packed 0 allows).

    Raises:
        CannError: at ``where``: an img2col with a C1 pitch (``old``), or a corrupt stream.
    """
    out, pos, tail = bytearray(), 0, struct.Struct("<q")
    while pos < len(code):
        if pos + 2 > len(code):
            raise CannError(where, f"corrupt .om: kernel {kernel}: truncated instruction at byte {pos}")
        (opcode,) = struct.unpack_from("<H", code, pos)
        d = isa.BY_OPCODE.get(opcode)
        if d is None:
            raise CannError(where, f"corrupt .om: kernel {kernel}: unknown opcode {opcode} at byte {pos}")
        size = d.struct.size - (tail.size if opcode in _C1_PITCH_OPCODES and not old else 0)
        if pos + size > len(code):
            raise CannError(where, f"corrupt .om: kernel {kernel}: truncated {d.mnemonic} at byte {pos}")
        body = code[pos:pos + size]
        if opcode in _C1_PITCH_OPCODES:
            if not old:
                body += tail.pack(0)
            elif tail.unpack_from(body, size - tail.size)[0]:
                raise CannError(where, f".om format version {C1_PITCH_VERSION - 1} cannot record kernel "
                                       f"{kernel}'s img2col C1 pitch (fm_c1_stride) at byte {pos}")
            else:
                body = body[:-tail.size]
        out += body
        pos += size
    return bytes(out)


def encode_om(model: OfflineModel, *, version: int = VERSION) -> bytes:
    """The bytes of ``model`` as an ``.om`` file (deterministic). ``version``: an older format
    (:data:`READABLE_VERSIONS`) for a reader that only knows it, when the model has nothing that
    format cannot hold.

    Raises:
        CannError: an inconsistent model (:func:`validate`); an unknown ``version``, or fields it
            cannot hold (knowledge bases before 4, GM reuse before 5, an img2col C1 pitch before 6).
    """
    validate(model, "<model>")
    if version not in READABLE_VERSIONS:
        raise CannError("<model>", f"cannot write .om format version {version} (known: "
                                   f"{', '.join(map(str, READABLE_VERSIONS))})")
    if version < 4 and model.knowledge_bases or version < 5 and (model.gm_reuse or model.gm_size_no_reuse):
        raise CannError("<model>", f".om format version {version} cannot record "
                                   f"{'knowledge bases' if version < 4 and model.knowledge_bases else 'GM reuse'}")
    tensors = _tensors(model.inputs) + _tensors(model.outputs)
    kernels = [struct.pack("<I", len(model.kernels))]
    for k in model.kernels:
        code = k.code if version >= C1_PITCH_VERSION else _c1_pitch_code(k.code, True, "<model>", k.name)
        kernels += [_str(k.name), struct.pack("<IIQ", k.block_dim, k.num_args, len(code)), code,
                    struct.pack("<I", len(k.nodes)), *(_str(n) for n in k.nodes)]
    launches = [struct.pack("<I", len(model.launches))]
    for la in model.launches:
        launches += [struct.pack("<II", la.kernel, len(la.args)), struct.pack(f"<{len(la.args)}Q", *la.args)]
    work = [struct.pack("<I", len(model.launches))]
    work += [WORK.pack(*astuple(la.work)) for la in model.launches]
    strings = _str(model.soc_version) + _str(model.precision_mode)
    if version >= 4:
        strings += struct.pack("<I", len(model.knowledge_bases)) + b"".join(_str(d) for d in model.knowledge_bases)
    bodies = [strings, tensors, bytes(model.weights),
              b"".join(kernels), b"".join(launches), b"".join(work)]
    payload, table, pos = bytearray(), [], header_size(version) + SECTION.size * len(SECTION_NAMES)
    for name, body in zip(SECTION_NAMES, bodies):
        if name == "weights":  # 64-byte aligned so a loader can map it directly
            pad = -pos % ALIGN
            payload += b"\0" * pad
            pos += pad
        table.append(SECTION.pack(pos, len(body)))
        payload += body
        pos += len(body)
    if version >= 5:
        header = HEADER.pack(MAGIC, version, len(SECTION_NAMES), model.gm_size, model.weights_offset,
                             FLAG_GM_REUSE if model.gm_reuse else 0, 0, model.gm_size_no_reuse or model.gm_size)
    else:
        header = HEADER_V4.pack(MAGIC, version, len(SECTION_NAMES), model.gm_size, model.weights_offset)
    data = header + b"".join(table) + bytes(payload)
    return data + hashlib.sha256(data).digest()


def write_om(model: OfflineModel, path: str | os.PathLike) -> None:
    """Write ``model`` to ``path`` atomically: on any failure no file (and no temp file) is left."""
    data = encode_om(model)
    atomic_write_bytes(path, data)


# ---------------------------------------------------------------------------------------------
# reading


class _Reader:
    def __init__(self, data: bytes, where: str, section: str):
        self.data, self.pos, self.where, self.section = data, 0, where, section

    def fail(self, msg: str) -> CannError:
        return CannError(self.where, f"corrupt .om: {self.section} section: {msg}")

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise self.fail("truncated")
        b = self.data[self.pos : self.pos + n]
        self.pos += n
        return b

    def unpack(self, fmt: str) -> tuple:
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt)))

    def u32(self) -> int:
        return self.unpack("I")[0]

    def count(self, what: str, min_size: int) -> int:
        """A u32 record count, checked against the bytes left (each record >= ``min_size`` bytes)
        before anything loops over it."""
        n = self.u32()
        if n * min_size > len(self.data) - self.pos:
            raise self.fail(f"{n} {what} cannot fit in the {len(self.data) - self.pos} bytes left (truncated)")
        return n

    def str(self) -> str:
        try:
            return self.take(self.u32()).decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail("string is not UTF-8") from None

    def tensors(self, kind: str) -> tuple[IoTensor, ...]:
        out = []
        for _ in range(self.count(f"{kind}s", 4 + 4 + 4 + 8)):
            name, dtype, rank = self.str(), self.str(), self.u32()
            shape = self.unpack(f"{rank}q")
            out.append(IoTensor(name, tuple(shape), dtype, self.unpack("Q")[0]))
        return tuple(out)

    def end(self) -> None:
        if self.pos != len(self.data):
            raise self.fail(f"{len(self.data) - self.pos} unexpected trailing bytes")


def _section_table(data: bytes, where: str, table: int) -> dict[str, tuple[int, int]]:
    """The section table (at file offset ``table``), each section exactly where docs/om-format.md
    puts it: the first right after the table, each next one right after the previous (the weights
    at the next multiple of 64, zero padding before them), the last ending at the trailer."""
    end_of_sections = len(data) - CHECKSUM_SIZE
    first = table + SECTION.size * len(SECTION_NAMES)
    sections, pos = {}, first
    for i, name in enumerate(SECTION_NAMES):
        off, size = SECTION.unpack_from(data, table + i * SECTION.size)
        want = pos + (-pos % ALIGN if name == "weights" else 0)
        if off != want or off + size > end_of_sections:
            raise CannError(where, f"corrupt .om: {name} section at file offset {off} (+{size} bytes), expected "
                                   f"at {want} inside [{first}, {end_of_sections}) (docs/om-format.md)")
        if any(data[pos:off]):
            raise CannError(where, f"corrupt .om: padding before the {name} section is not zero")
        sections[name] = (off, size)
        pos = off + size
    if pos != end_of_sections:
        raise CannError(where, f"corrupt .om: {end_of_sections - pos} bytes between the last section and the trailer")
    return sections


def decode_om(data: bytes, where: str = "<bytes>") -> OfflineModel:
    """Parse and validate the bytes of an ``.om`` file (docs/om-format.md, "Reading and validation").

    Raises:
        CannError: located at ``where``, the first problem in the documented order.
    """
    if len(data) < len(MAGIC) or data[: len(MAGIC)] != MAGIC:
        stem, dot, suffix = where.rpartition(".")
        hint = (f": a model to compile first (cann-compile {where} -o {stem}.om)"
                if dot and suffix.lower() in ("onnx", "pb", "mlir") else "")
        raise CannError(where, f"not a cann offline model (bad magic){hint}")
    if len(data) < HEADER_V4.size:
        raise CannError(where, "corrupt .om: truncated header")
    _, version, nsec, gm_size, weights_offset = HEADER_V4.unpack_from(data)
    hsize = header_size(version)
    total = hsize + SECTION.size * len(SECTION_NAMES)
    intact = len(data) >= total + CHECKSUM_SIZE and \
        hashlib.sha256(data[:-CHECKSUM_SIZE]).digest() == data[-CHECKSUM_SIZE:]
    if version not in READABLE_VERSIONS:
        if intact:  # a well-formed file of another version
            raise CannError(where, f"unsupported .om format version {version} (this cann reads versions "
                                   f"{', '.join(map(str, READABLE_VERSIONS))})")
        raise CannError(where, f"corrupt .om: checksum mismatch (file truncated or modified; its header claims "
                               f"format version {version})")
    if len(data) < total + CHECKSUM_SIZE:
        raise CannError(where, "corrupt .om: truncated file")
    if not intact:
        raise CannError(where, "corrupt .om: checksum mismatch (file truncated or modified)")
    if nsec != len(SECTION_NAMES):
        raise CannError(where, f"corrupt .om: expected {len(SECTION_NAMES)} sections, found {nsec}")
    flags, no_reuse = 0, 0
    if version >= 5:
        *_, flags, reserved, no_reuse = HEADER.unpack_from(data)
        if flags & ~FLAGS:
            raise CannError(where, f"corrupt .om: unknown header flags {flags:#x} (known: {FLAGS:#x})")
        if reserved:
            raise CannError(where, "corrupt .om: the header's reserved field is not zero")
    sections = {name: _Reader(data[off : off + size], where, name)
                for name, (off, size) in _section_table(data, where, hsize).items()}
    r = sections["strings"]
    soc, precision = r.str(), r.str()
    digests = tuple(r.str() for _ in range(r.count("knowledge-base digests", 4))) if version >= 4 else ()
    r.end()
    r = sections["tensors"]
    inputs, outputs = r.tensors("input"), r.tensors("output")
    r.end()
    weights = sections["weights"].data
    r = sections["kernels"]
    kernels = []
    for _ in range(r.count("kernels", 4 + 16 + 4)):
        name = r.str()
        block_dim, num_args, size = r.unpack("IIQ")
        code = r.take(size)
        if version < C1_PITCH_VERSION:
            code = _c1_pitch_code(code, False, where, name)
        nodes = tuple(r.str() for _ in range(r.count("node names", 4)))
        kernels.append(Kernel(name, block_dim, num_args, code, nodes))
    r.end()
    r = sections["launches"]
    launches = []
    for _ in range(r.count("launches", 8)):
        kernel, nargs = r.unpack("II")
        if nargs * 8 > len(r.data) - r.pos:
            raise r.fail(f"launch {len(launches)} has {nargs} arguments: truncated")
        launches.append(Launch(kernel, tuple(r.unpack(f"{nargs}Q"))))
    r.end()
    r = sections["work"]
    if r.u32() != len(launches):
        raise r.fail(f"expected one record per launch ({len(launches)})")
    launches = [replace(la, work=LaunchWork(*r.unpack(WORK.format[1:]))) for la in launches]
    r.end()
    model = OfflineModel(soc, precision, inputs, outputs, gm_size, weights_offset, weights,
                         tuple(kernels), tuple(launches), digests, bool(flags & FLAG_GM_REUSE),
                         no_reuse if no_reuse != gm_size else 0)
    validate(model, where)
    return model


def read_om(path: str | os.PathLike) -> OfflineModel:
    """Read an ``.om`` file; every problem is a :class:`CannError` located at ``path``."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise CannError(str(path), f"cannot read: {e.strerror or e}") from None
    return decode_om(data, str(path))


# ---------------------------------------------------------------------------------------------
# validation


@dataclass(frozen=True)
class _Context:
    """What the bounds of a model's fields depend on: the model and its SoC."""

    model: OfflineModel
    soc: SocSpec


#: The bounded integer fields of each record, one row per field: (record, field, lowest, highest,
#: what the highest is). ``lowest`` / ``highest`` take (context, record) and are inclusive.
#: Records: "model" (the header), "tensor" (an input or output), "kernel", "launch". A new field of
#: a record gets a row here and is checked by the writer and the reader alike.
BOUNDS: tuple[tuple[str, str, Callable, Callable, str], ...] = (
    ("model", "gm_size", lambda c, r: 0, lambda c, r: c.soc.gm_bytes, "the SoC's gm_bytes"),
    ("model", "gm_size_no_reuse", lambda c, r: 0, lambda c, r: c.soc.gm_bytes, "the SoC's gm_bytes"),
    ("model", "weights_offset", lambda c, r: 0, lambda c, r: r.gm_size - len(r.weights),
     "gm_size minus the weights' size"),
    ("tensor", "gm_offset", lambda c, r: 0, lambda c, r: c.model.gm_size - r.nbytes, "gm_size minus its size"),
    ("kernel", "block_dim", lambda c, r: 1, lambda c, r: c.soc.max_block_dim, "the SoC's max_block_dim"),
    ("launch", "kernel", lambda c, r: 0, lambda c, r: len(c.model.kernels) - 1, "the last kernel index"),
)


def _check_bounds(ctx: _Context, record: str, rec, label: str, bad) -> None:
    for kind, f, lo, hi, why in BOUNDS:
        if kind != record:
            continue
        v, a, b = getattr(rec, f), lo(ctx, rec), hi(ctx, rec)
        if a > b:
            raise bad(f"{label}{f} {v}: no value is valid ({why} is {b})")
        if not a <= v <= b:
            raise bad(f"{label}{f} {v} outside [{a}, {b}] ({why})")


def validate(model: OfflineModel, where: str, *, code: bool = True) -> None:
    """Check every field against the format and the SoC, and the tables against each other.

    Checks (docs/om-format.md, "Reading and validation"): a known SoC and precision mode; the
    :data:`BOUNDS` rows; known dtypes, non-negative dimensions, unique input and output names;
    launch argument counts and offsets; every kernel's code decodable with well-formed SPMD control
    (:func:`cann.sim.spmd.check_control`; skipped with ``code=False``, for a caller that decodes
    the code itself). Nothing is allocated and no loop of the code is expanded.

    Raises:
        CannError: located at ``where``, naming the first problem.
    """
    from cann.hw import isa
    from cann.hw.config import available_socs, load_soc
    from cann.sim.spmd import check_control

    def bad(msg: str) -> CannError:
        return CannError(where, f"inconsistent .om: {msg}")

    if model.soc_version not in available_socs():
        raise bad(f"unknown soc_version '{model.soc_version}' (known: {', '.join(available_socs())})")
    ctx = _Context(model, load_soc(model.soc_version))
    if model.precision_mode not in PRECISION_MODES:
        raise bad(f"unknown precision_mode '{model.precision_mode}' (known: {', '.join(PRECISION_MODES)})")
    for d in model.knowledge_bases:
        role, _, hexd = d.partition(":")
        if role not in ("shipped", "user") or len(hexd) != 64 or any(c not in "0123456789abcdef" for c in hexd):
            raise bad(f"knowledge-base digest '{d}' is not 'shipped:<sha256 hex>' or 'user:<sha256 hex>'")
    if len(model.weights) > model.gm_size:
        raise bad(f"the weights need {len(model.weights)} bytes, more than gm_size {model.gm_size}")
    _check_bounds(ctx, "model", model, "", bad)
    if not model.gm_reuse and model.gm_size_no_reuse not in (0, model.gm_size):
        raise bad(f"gm_size_no_reuse {model.gm_size_no_reuse} differs from gm_size {model.gm_size} without GM reuse")
    for kind, ts in (("input", model.inputs), ("output", model.outputs)):
        seen = set()
        for t in ts:
            if t.name in seen:
                raise bad(f"{kind} name '{t.name}' appears twice")
            seen.add(t.name)
            try:
                ok = (np.dtype(t.dtype).kind in "biuf" or t.dtype == "bfloat16") and np.dtype(t.dtype).name == t.dtype
            except Exception:  # noqa: BLE001 - numpy parses dtype strings and may raise anything
                ok = False
            if not ok:
                raise bad(f"{kind} '{t.name}' has unknown dtype '{t.dtype}'")
            if len(t.shape) > MAX_RANK:
                raise bad(f"{kind} '{t.name}' has rank {len(t.shape)}, more than {MAX_RANK}")
            if any(d < 0 for d in t.shape):
                raise bad(f"{kind} '{t.name}' has a negative dimension {t.shape}")
            if t.nbytes > model.gm_size:
                raise bad(f"{kind} '{t.name}' {t.shape} {t.dtype} needs {t.nbytes} bytes, more than gm_size "
                          f"{model.gm_size}")
            if math.prod(max(d, 1) for d in t.shape) * np.dtype(t.dtype).itemsize > ctx.soc.gm_bytes:  # size 0
                raise bad(f"{kind} '{t.name}' {t.shape}: its dimensions (zeros counted as 1) span more than the "
                          f"SoC's gm_bytes {ctx.soc.gm_bytes}")
            _check_bounds(ctx, "tensor", t, f"{kind} '{t.name}' ({t.nbytes} bytes) ", bad)
    for i, k in enumerate(model.kernels):
        _check_bounds(ctx, "kernel", k, f"kernel {i} '{k.name}' ", bad)
    for i, la in enumerate(model.launches):
        _check_bounds(ctx, "launch", la, f"launch {i} ", bad)
        k = model.kernels[la.kernel]
        if len(la.args) != k.num_args:
            raise bad(f"launch {i} passes {len(la.args)} arguments to kernel '{k.name}' taking {k.num_args}")
        for j, a in enumerate(la.args):
            if not 0 <= a < model.gm_size:
                raise bad(f"launch {i} argument {j} offset {a} outside gm_size {model.gm_size}")
    for i, k in enumerate(model.kernels if code else ()):
        try:
            check_control(isa.decode(k.code), k.num_args)
        except ValueError as e:
            raise bad(f"kernel {i} '{k.name}': {e}") from None
