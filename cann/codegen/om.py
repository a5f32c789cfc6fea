"""The offline-model container (``.om``): a versioned, checksummed, little-endian binary format.

The layout is documented byte by byte in ``docs/om-format.md``. In short::

    header (64 bytes)  magic, version, flags, gm_size, weights_offset, 5 section entries
    strings            soc_version, precision_mode (each u32 length + UTF-8)
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
import os
import struct
from dataclasses import astuple, dataclass, replace
from pathlib import Path

import ml_dtypes  # noqa: F401  (registers numpy's 'bfloat16' dtype name)
import numpy as np

from cann.errors import CannError
from cann.fileio import atomic_write_bytes

MAGIC = b"CANNOM\0\0"
VERSION = 2
ALIGN = 64
HEADER = struct.Struct("<8sIIQQ")  # magic, version, section count, gm_size, weights_offset
SECTION = struct.Struct("<QQ")  # file offset, size
SECTION_NAMES = ("strings", "tensors", "weights", "kernels", "launches", "work")
HEADER_SIZE = HEADER.size + SECTION.size * len(SECTION_NAMES)
CHECKSUM_SIZE = 32


@dataclass(frozen=True)
class IoTensor:
    """A model input or output, as the user sees it."""

    name: str
    shape: tuple[int, ...]
    dtype: str  # numpy dtype name: "float32", "float16", "int64", ...
    gm_offset: int  # byte offset in the global-memory arena (ND, C order)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize


@dataclass(frozen=True)
class Kernel:
    name: str
    block_dim: int  # number of cores the kernel runs on (SPMD)
    num_args: int  # number of global-memory pointer arguments the code refers to
    code: bytes  # encoded instruction stream (see cann.hw.isa)


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


def encode_om(model: OfflineModel) -> bytes:
    """The bytes of ``model`` as an ``.om`` file (deterministic)."""
    validate(model, "<model>")
    tensors = _tensors(model.inputs) + _tensors(model.outputs)
    kernels = [struct.pack("<I", len(model.kernels))]
    for k in model.kernels:
        kernels += [_str(k.name), struct.pack("<IIQ", k.block_dim, k.num_args, len(k.code)), k.code]
    launches = [struct.pack("<I", len(model.launches))]
    for la in model.launches:
        launches += [struct.pack("<II", la.kernel, len(la.args)), struct.pack(f"<{len(la.args)}Q", *la.args)]
    work = [struct.pack("<I", len(model.launches))]
    work += [WORK.pack(*astuple(la.work)) for la in model.launches]
    bodies = [_str(model.soc_version) + _str(model.precision_mode), tensors, bytes(model.weights),
              b"".join(kernels), b"".join(launches), b"".join(work)]
    payload, table, pos = bytearray(), [], HEADER_SIZE
    for name, body in zip(SECTION_NAMES, bodies):
        if name == "weights":  # 64-byte aligned so a loader can map it directly
            pad = -pos % ALIGN
            payload += b"\0" * pad
            pos += pad
        table.append(SECTION.pack(pos, len(body)))
        payload += body
        pos += len(body)
    header = HEADER.pack(MAGIC, VERSION, len(SECTION_NAMES), model.gm_size, model.weights_offset)
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

    def str(self) -> str:
        try:
            return self.take(self.u32()).decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail("string is not UTF-8") from None

    def tensors(self) -> tuple[IoTensor, ...]:
        out = []
        for _ in range(self.u32()):
            name, dtype, rank = self.str(), self.str(), self.u32()
            shape = self.unpack(f"{rank}q")
            out.append(IoTensor(name, tuple(shape), dtype, self.unpack("Q")[0]))
        return tuple(out)

    def end(self) -> None:
        if self.pos != len(self.data):
            raise self.fail(f"{len(self.data) - self.pos} unexpected trailing bytes")


def decode_om(data: bytes, where: str = "<bytes>") -> OfflineModel:
    """Parse and validate the bytes of an ``.om`` file."""
    if len(data) < len(MAGIC) or data[: len(MAGIC)] != MAGIC:
        raise CannError(where, "not a cann offline model (bad magic)")
    if len(data) < HEADER.size:
        raise CannError(where, "corrupt .om: truncated header")
    _, version, nsec, gm_size, weights_offset = HEADER.unpack_from(data)
    if version != VERSION:
        raise CannError(where, f"unsupported .om format version {version} (this cann reads version {VERSION})")
    if len(data) < HEADER_SIZE + CHECKSUM_SIZE:
        raise CannError(where, "corrupt .om: truncated file")
    body, digest = data[:-CHECKSUM_SIZE], data[-CHECKSUM_SIZE:]
    if hashlib.sha256(body).digest() != digest:
        raise CannError(where, "corrupt .om: checksum mismatch (file truncated or modified)")
    if nsec != len(SECTION_NAMES):
        raise CannError(where, f"corrupt .om: expected {len(SECTION_NAMES)} sections, found {nsec}")
    sections = {}
    for i, name in enumerate(SECTION_NAMES):
        off, size = SECTION.unpack_from(data, HEADER.size + i * SECTION.size)
        if off < HEADER_SIZE or off + size > len(body):
            raise CannError(where, f"corrupt .om: {name} section outside the file")
        sections[name] = _Reader(body[off : off + size], where, name)
    r = sections["strings"]
    soc, precision = r.str(), r.str()
    r.end()
    r = sections["tensors"]
    inputs, outputs = r.tensors(), r.tensors()
    r.end()
    weights = sections["weights"].data
    r = sections["kernels"]
    kernels = []
    for _ in range(r.u32()):
        name = r.str()
        block_dim, num_args, size = r.unpack("IIQ")
        kernels.append(Kernel(name, block_dim, num_args, r.take(size)))
    r.end()
    r = sections["launches"]
    launches = []
    for _ in range(r.u32()):
        kernel, nargs = r.unpack("II")
        launches.append(Launch(kernel, tuple(r.unpack(f"{nargs}Q"))))
    r.end()
    r = sections["work"]
    if r.u32() != len(launches):
        raise r.fail(f"expected one record per launch ({len(launches)})")
    launches = [replace(la, work=LaunchWork(*r.unpack(WORK.format[1:]))) for la in launches]
    r.end()
    model = OfflineModel(soc, precision, inputs, outputs, gm_size, weights_offset, weights,
                         tuple(kernels), tuple(launches))
    validate(model, where)
    return model


def read_om(path: str | os.PathLike) -> OfflineModel:
    """Read an ``.om`` file; every problem is a :class:`CannError` located at ``path``."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise CannError(str(path), f"cannot read: {e.strerror or e}") from None
    return decode_om(data, str(path))


def validate(model: OfflineModel, where: str) -> None:
    """Check the tables agree with each other (raises CannError naming the first problem)."""

    def bad(msg: str) -> CannError:
        return CannError(where, f"inconsistent .om: {msg}")

    gm = model.gm_size
    if model.weights_offset + len(model.weights) > gm:
        raise bad(f"weights [{model.weights_offset}, +{len(model.weights)}) outside gm_size {gm}")
    for kind, ts in (("input", model.inputs), ("output", model.outputs)):
        for t in ts:
            try:
                ok = (np.dtype(t.dtype).kind in "biuf" or t.dtype == "bfloat16") and np.dtype(t.dtype).name == t.dtype
            except Exception:  # noqa: BLE001 - numpy parses dtype strings and may raise anything
                ok = False
            if not ok:
                raise bad(f"{kind} '{t.name}' has unknown dtype '{t.dtype}'")
            nbytes = t.nbytes
            if any(d < 0 for d in t.shape):
                raise bad(f"{kind} '{t.name}' has a negative dimension {t.shape}")
            if t.gm_offset + nbytes > gm:
                raise bad(f"{kind} '{t.name}' [{t.gm_offset}, +{nbytes}) outside gm_size {gm}")
    for i, la in enumerate(model.launches):
        if la.kernel >= len(model.kernels):
            raise bad(f"launch {i} names kernel {la.kernel}, but there are {len(model.kernels)} kernels")
        k = model.kernels[la.kernel]
        if len(la.args) != k.num_args:
            raise bad(f"launch {i} passes {len(la.args)} arguments to kernel '{k.name}' taking {k.num_args}")
        for a in la.args:
            if a >= gm:
                raise bad(f"launch {i} argument offset {a} outside gm_size {gm}")
    for k in model.kernels:
        if k.block_dim < 1:
            raise bad(f"kernel '{k.name}' has block_dim {k.block_dim}")
