"""Large constants in text IR: ``dense_resource`` handles with blobs in a sidecar ``.npz``.

Convention (see ``docs/ir-text.md``):

* In memory, every ``graph.constant`` holds a ``DenseIntOrFPElementsAttr`` (raw bytes).
* :func:`print_module` prints a non-splat constant with more than :data:`INLINE_LIMIT` elements as
  ``graph.constant dense_resource<KEY> : tensor<...>``. Keys derive from the op's ``NameLoc`` (the
  ONNX tensor name), sanitized to ``[A-Za-z0-9_.]`` and made unique with ``_1``, ``_2``, ... in
  walk order; a constant still holding the value read from a sidecar keeps that key. Ops print
  their ``NameLoc`` (``loc("conv1")``), so names survive the text.
* To a file: the blobs go to a ``.npz`` and the module gets ``graph.weights = "<npz file name>"``
  (relative to the text file's directory).
* To a stream (stdout): the blobs are written into the text itself, in MLIR's
  ``{-# dialect_resources: {builtin: {KEY: "0x..."}} #-}`` section, so the text parses back
  wherever it is saved; unresolved handles print unchanged (with their ``graph.weights``).
* :func:`parse_module` parses such text and resolves every ``dense_resource`` from that section or
  the ``.npz``. Text with unresolved handles still parses and prints.
"""

from __future__ import annotations

import io
import math
import os
import re
import zipfile
from pathlib import Path
from typing import IO

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    DenseResourceAttr,
    ModuleOp,
    NameLoc,
    StringAttr,
    TensorType,
)
from xdsl.parser import Parser
from xdsl.printer import Printer

from cann.errors import CannError

INLINE_LIMIT = 16
"""Constants with more elements than this are printed as ``dense_resource`` handles."""

WEIGHTS_ATTR = "graph.weights"

_fix_installed = False


def install_resource_key_fix() -> None:
    """Make ``dense_resource<KEY>`` parse as exactly ``KEY`` every time.

    xDSL 0.75 keeps one process-global resource table in the builtin dialect and renames a key
    it has seen before (``w`` becomes ``w_0``, ``w_1``, ...), so the second parse of the same text
    in one process would lose the link to its blobs. Our handles always name external blobs, so
    equal keys mean the same blob.
    """
    global _fix_installed
    if _fix_installed:
        return
    from xdsl.dialect_interfaces.op_asm import OpAsmDialectInterface
    from xdsl.dialects.builtin import Builtin

    iface = Builtin.get_interface(OpAsmDialectInterface)
    if iface is not None:

        def declare_resource(key: str) -> str:
            iface._blob_storage.setdefault(key, "")
            return key

        iface.declare_resource = declare_resource  # type: ignore[method-assign]
    _fix_installed = True


def _key_base(op) -> str:
    loc = op.location
    name = loc.desc.data if isinstance(loc, NameLoc) else "cst"
    key = re.sub(r"[^A-Za-z0-9_.]", "_", name) or "cst"
    if not (key[0].isalpha() or key[0] == "_"):
        key = "_" + key
    return key


def write_npz(path: str | os.PathLike, arrays: dict[str, np.ndarray]) -> None:
    """Write ``arrays`` as an uncompressed ``.npz`` with fixed timestamps (byte-deterministic), atomically."""
    from cann.fileio import atomic_output

    with atomic_output(path, "wb") as out, \
            zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        for key, arr in arrays.items():
            info = zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            with zf.open(info, "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.asarray(arr, order="C"), allow_pickle=False)


def _is_splat(attr: DenseIntOrFPElementsAttr) -> bool:
    """A splat (one stored element, or all elements equal) prints short (``dense<0.02>``): it stays inline."""
    from cann.dialects.graph import numpy_dtype

    t = attr.type
    dt = numpy_dtype(t.get_element_type())
    if math.prod(t.get_shape()) <= 1:
        return False
    if len(attr.data.data) == dt.itemsize:
        return True
    a = np.frombuffer(attr.data.data, dt)
    return bool((a.view(np.uint8).reshape(a.size, -1) == a.view(np.uint8)[: dt.itemsize]).all())


def _has_non_finite(attr: DenseIntOrFPElementsAttr) -> bool:
    """A float constant holding an infinity or a NaN: xDSL prints those as hex bit patterns
    (``dense<0xff800000>``, MLIR's form) that its parser reads back as the integer 4286578688.0,
    so they go to a blob however small they are."""
    from cann.dialects.graph import numpy_dtype

    dt = numpy_dtype(attr.type.get_element_type())
    if dt.kind != "f":
        return False
    return not bool(np.isfinite(np.frombuffer(attr.data.data, dt).astype(np.float32)).all())


def externalize(module: ModuleOp, weights_name: str | None, limit: int = INLINE_LIMIT,
                sidecar: dict[str, DenseIntOrFPElementsAttr] | None = None
                ) -> tuple[ModuleOp, dict[str, np.ndarray]]:
    """A copy of ``module`` whose large constants are ``dense_resource`` handles, and the blobs
    that need writing.

    ``weights_name``: the ``graph.weights`` of the copy (``None``: the blobs go into the text;
    the module's ``graph.weights`` stays only if unresolved handles still use it). ``sidecar``
    maps the keys of the module's own sidecar to the values read from it: a constant still
    holding one of those values keeps its key.
    """
    from cann.dialects.graph import ConstantOp, constant_value, numpy_dtype
    from cann.dialects.tile import ConstantOp as TileConstantOp

    def value_of(op) -> np.ndarray:
        if isinstance(op, ConstantOp):
            return constant_value(op)
        t = op.value.type
        return np.frombuffer(op.value.data.data, numpy_dtype(t.get_element_type())).reshape(t.get_shape())

    known = {id(attr): key for key, attr in (sidecar or {}).items()}
    clone = module.clone()
    blobs: dict[str, np.ndarray] = {}
    used: set[str] = set()
    refers_to_sidecar = False
    pending = []
    for old, new in zip(module.walk(), clone.walk()):
        if isinstance(new, (ConstantOp, TileConstantOp)):
            if isinstance(new.value, DenseResourceAttr):
                used.add(new.value.resource_handle.data)
                refers_to_sidecar = True  # unresolved: still a handle into the module's sidecar
            elif (math.prod(new.value.type.get_shape()) > limit and not _is_splat(new.value)) \
                    or _has_non_finite(new.value):
                pending.append((old, new))
    reused = [(o, n) for o, n in pending if id(o.value) in known and known[id(o.value)] not in used]
    for old, new in reused:  # values read from the sidecar keep their keys
        key = known[id(old.value)]
        used.add(key)
        blobs[key] = np.array(value_of(new), order="C")  # (ascontiguousarray makes 0-d 1-d)
        new.properties["value"] = DenseResourceAttr.from_params(key, new.value.type)
    reused_ids = {id(n) for _, n in reused}
    for old, new in pending:
        if id(new) in reused_ids:
            continue
        base = key = _key_base(old)
        i = 0
        while key in used or key in known.values():
            i += 1
            key = f"{base}_{i}"
        used.add(key)
        blobs[key] = np.array(value_of(new), order="C")  # (ascontiguousarray makes 0-d 1-d)
        new.properties["value"] = DenseResourceAttr.from_params(key, new.value.type)
    if weights_name is not None:
        if blobs:
            clone.attributes[WEIGHTS_ATTR] = StringAttr(weights_name)
        else:
            clone.attributes.pop(WEIGHTS_ATTR, None)
    elif not refers_to_sidecar:
        clone.attributes.pop(WEIGHTS_ATTR, None)
    return clone, blobs


def _resource_section(blobs: dict[str, np.ndarray]) -> str:
    """MLIR's file-metadata section holding ``blobs`` (hex: a 4-byte little-endian alignment, then the bytes)."""
    lines = ["{-#", "  dialect_resources: {", "    builtin: {"]
    items = list(blobs.items())
    for i, (key, arr) in enumerate(items):
        align = max(arr.dtype.itemsize, 1).to_bytes(4, "little").hex()
        sep = "," if i < len(items) - 1 else ""
        lines.append(f'      {key}: "0x{align}{arr.tobytes().hex()}"{sep}')
    lines += ["    }", "  }", "#-}"]
    return "\n".join(lines) + "\n"


def print_module(
    module: ModuleOp,
    stream: IO[str],
    weights_path: str | os.PathLike | None = None,
    *,
    print_generic_format: bool = False,
    limit: int = INLINE_LIMIT,
    sidecar: dict[str, DenseIntOrFPElementsAttr] | None = None,
) -> None:
    """Print ``module`` to ``stream``; constants above ``limit`` elements go to ``weights_path`` (.npz),
    or, without one, into the text's ``dialect_resources`` section. A constant still holding a
    value of ``sidecar`` (the module's own ``graph.weights`` file, as :func:`resolve_weights`
    returned it) keeps its key.

    The printed module carries ``graph.weights = "<basename of weights_path>"``; write the text
    file into the same directory as the ``.npz``. ``module`` itself is not modified.
    """
    name = os.path.basename(os.fspath(weights_path)) if weights_path is not None else None
    clone, blobs = externalize(module, name, limit, sidecar)
    if blobs and weights_path is not None:
        write_npz(weights_path, blobs)
    text = io.StringIO()
    # with debug info, ops print their NameLoc (the model's names); unknown locations are dropped
    Printer(stream=text, print_generic_format=print_generic_format, print_debuginfo=True).print_op(clone)
    stream.write(text.getvalue().replace(" loc(unknown)", ""))
    stream.write("\n")
    if blobs and weights_path is None:
        stream.write("\n" + _resource_section(blobs))


def module_to_text(module: ModuleOp, weights_path: str | os.PathLike | None = None, **kw) -> str:
    buf = io.StringIO()
    print_module(module, buf, weights_path, **kw)
    return buf.getvalue()


def _blob_storage() -> dict[str, str]:
    from xdsl.dialect_interfaces.op_asm import OpAsmDialectInterface
    from xdsl.dialects.builtin import Builtin

    return Builtin.get_interface(OpAsmDialectInterface)._blob_storage


def clear_embedded_blobs() -> None:
    """Forget the ``dialect_resources`` blobs of earlier parses (xDSL keeps them process-wide)."""
    _blob_storage().clear()


def resolve_weights(module: ModuleOp, weights_dir: str | os.PathLike | None, *,
                    embedded_only: bool = False) -> dict[str, DenseIntOrFPElementsAttr]:
    """Replace every ``dense_resource`` constant by its value: from the text's ``dialect_resources``
    section if it has the key, else (unless ``embedded_only``) from the module's ``graph.weights``
    file. An op without a ``NameLoc`` gets ``loc("KEY")``, so the key survives the next print.

    Returns:
        The values read from the ``graph.weights`` file, by key (``print_module``'s ``sidecar``).

    Raises:
        CannError: no ``graph.weights`` attribute, an unreadable file, a missing key, a blob whose
            shape or dtype differs from the handle's type.
    """
    from cann.dialects.graph import ConstantOp, dense_attr, name_loc, numpy_dtype
    from cann.dialects.tile import ConstantOp as TileConstantOp

    ops = [op for op in module.walk()
           if isinstance(op, (ConstantOp, TileConstantOp)) and isinstance(op.value, DenseResourceAttr)]
    loaded: dict[str, DenseIntOrFPElementsAttr] = {}
    if not ops:
        return loaded
    embedded = _blob_storage()
    rest = []
    for op in ops:
        key = op.value.resource_handle.data
        t = op.value.type
        hexblob = embedded.get(key)
        if not hexblob:
            rest.append(op)
            continue
        dt = numpy_dtype(t.get_element_type())
        try:
            raw = bytes.fromhex(hexblob[2:])[4:]  # after "0x": a 4-byte alignment, then the data
        except ValueError:
            raise CannError(key, "the dialect_resources blob is not hex") from None
        if len(raw) != dt.itemsize * math.prod(t.get_shape()):
            raise CannError(key, f"the dialect_resources blob has {len(raw)} bytes; {t} needs "
                                 f"{dt.itemsize * math.prod(t.get_shape())}")
        op.properties["value"] = dense_attr(np.frombuffer(raw, dt).reshape(t.get_shape()))
        if not isinstance(op.location, NameLoc):
            op.location = name_loc(key)
    if not rest or embedded_only:
        return loaded
    attr = module.attributes.get(WEIGHTS_ATTR)
    if not isinstance(attr, StringAttr):
        raise CannError(rest[0].value.resource_handle.data, f"dense_resource constant but the module has no {WEIGHTS_ATTR} attribute")
    path = Path(weights_dir or ".") / attr.data
    try:
        npz = np.load(path, allow_pickle=False)
    except OSError as e:  # e.strerror: not Python's "[Errno 2] ...: 'path'" repeating the location
        raise CannError(str(path), f"cannot read the weights file of the text's {WEIGHTS_ATTR} attribute: "
                                   f"{e.strerror or e}") from None
    except ValueError as e:
        raise CannError(str(path), f"cannot read weights file: {e}") from None
    with npz:
        for op in rest:
            key = op.value.resource_handle.data
            t = op.value.type
            assert isinstance(t, TensorType)
            if key not in npz.files:
                raise CannError(key, f"no blob named {key} in {path}")
            if key not in loaded:
                arr = npz[key]
                if tuple(arr.shape) != tuple(t.get_shape()) or arr.dtype != numpy_dtype(t.get_element_type()):
                    raise CannError(key, f"blob {arr.dtype}{list(arr.shape)} in {path} does not match {t}")
                loaded[key] = dense_attr(arr)
            op.properties["value"] = loaded[key]
            if not isinstance(op.location, NameLoc):
                op.location = name_loc(key)
    return loaded


def parse_module(text: str, ctx: Context, weights_dir: str | os.PathLike | None = None, *, name: str = "<text>") -> ModuleOp:
    """Parse ``text`` (printed by :func:`print_module`) and resolve its ``dense_resource`` blobs.

    ``weights_dir`` is the directory of the text file; ``graph.weights`` is relative to it. The
    result is not verified (call ``module.verify()``).
    """
    install_resource_key_fix()
    clear_embedded_blobs()
    module = Parser(ctx, text, name).parse_module()
    try:
        resolve_weights(module, weights_dir)
    finally:
        clear_embedded_blobs()
    return module


def graph_context() -> Context:
    """A context with builtin, func and graph loaded (for tests and tools)."""
    from xdsl.dialects.builtin import Builtin
    from xdsl.dialects.func import Func

    from cann.dialects.graph import Graph

    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(Func)
    ctx.load_dialect(Graph)
    return ctx
