"""Large constants in text IR: ``dense_resource`` handles with blobs in a sidecar ``.npz``.

Convention (see ``docs/ir-text.md``):

* In memory, every ``graph.constant`` holds a ``DenseIntOrFPElementsAttr`` (raw bytes).
* :func:`print_module` prints a non-splat constant with more than :data:`INLINE_LIMIT` elements as
  ``graph.constant dense_resource<KEY> : tensor<...>`` and stores its value under ``KEY`` in the
  ``.npz`` file; the module gets the attribute ``graph.weights = "<npz file name>"`` (relative to
  the text file's directory). Keys derive from the op's ``NameLoc`` (the ONNX tensor name),
  sanitized to ``[A-Za-z0-9_.]`` and made unique with ``_1``, ``_2``, ... in walk order.
* :func:`parse_module` parses such text and resolves every ``dense_resource`` from the ``.npz``.
  Text with unresolved handles still parses and prints (``cann-opt`` round-trips it unchanged).
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
                np.lib.format.write_array(f, np.ascontiguousarray(arr), allow_pickle=False)


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


def externalize(module: ModuleOp, weights_name: str | None, limit: int = INLINE_LIMIT) -> tuple[ModuleOp, dict[str, np.ndarray]]:
    """A copy of ``module`` whose large constants are ``dense_resource`` handles, and their blobs."""
    from cann.dialects.graph import ConstantOp, constant_value, numpy_dtype
    from cann.dialects.tile import ConstantOp as TileConstantOp

    def value_of(op) -> np.ndarray:
        if isinstance(op, ConstantOp):
            return constant_value(op)
        t = op.value.type
        return np.frombuffer(op.value.data.data, numpy_dtype(t.get_element_type())).reshape(t.get_shape())

    clone = module.clone()
    blobs: dict[str, np.ndarray] = {}
    used: set[str] = set()
    pending = []
    for old, new in zip(module.walk(), clone.walk()):
        if isinstance(new, (ConstantOp, TileConstantOp)):
            if isinstance(new.value, DenseResourceAttr):
                used.add(new.value.resource_handle.data)
            elif math.prod(new.value.type.get_shape()) > limit and not _is_splat(new.value):
                pending.append((old, new))
    for old, new in pending:
        base = key = _key_base(old)
        i = 0
        while key in used:
            i += 1
            key = f"{base}_{i}"
        used.add(key)
        blobs[key] = np.ascontiguousarray(value_of(new))
        new.properties["value"] = DenseResourceAttr.from_params(key, new.value.type)
    if blobs and weights_name is not None:
        clone.attributes[WEIGHTS_ATTR] = StringAttr(weights_name)
    return clone, blobs


def print_module(
    module: ModuleOp,
    stream: IO[str],
    weights_path: str | os.PathLike | None = None,
    *,
    print_generic_format: bool = False,
    limit: int = INLINE_LIMIT,
) -> None:
    """Print ``module`` to ``stream``; constants above ``limit`` elements go to ``weights_path`` (.npz).

    The printed module carries ``graph.weights = "<basename of weights_path>"``; write the text
    file into the same directory as the ``.npz``. ``module`` itself is not modified.
    """
    name = os.path.basename(os.fspath(weights_path)) if weights_path is not None else None
    clone, blobs = externalize(module, name, limit)
    if blobs and weights_path is not None:
        write_npz(weights_path, blobs)
    Printer(stream=stream, print_generic_format=print_generic_format).print_op(clone)
    stream.write("\n")


def module_to_text(module: ModuleOp, weights_path: str | os.PathLike | None = None, **kw) -> str:
    buf = io.StringIO()
    print_module(module, buf, weights_path, **kw)
    return buf.getvalue()


def resolve_weights(module: ModuleOp, weights_dir: str | os.PathLike | None) -> None:
    """Replace every ``dense_resource`` constant by its value from the module's ``graph.weights`` file."""
    from cann.dialects.graph import ConstantOp, dense_attr, numpy_dtype
    from cann.dialects.tile import ConstantOp as TileConstantOp

    ops = [op for op in module.walk()
           if isinstance(op, (ConstantOp, TileConstantOp)) and isinstance(op.value, DenseResourceAttr)]
    if not ops:
        return
    attr = module.attributes.get(WEIGHTS_ATTR)
    if not isinstance(attr, StringAttr):
        raise CannError(ops[0].value.resource_handle.data, f"dense_resource constant but the module has no {WEIGHTS_ATTR} attribute")
    path = Path(weights_dir or ".") / attr.data
    try:
        npz = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise CannError(str(path), f"cannot read weights file: {e}") from None
    with npz:
        for op in ops:
            key = op.value.resource_handle.data
            t = op.value.type
            assert isinstance(t, TensorType)
            if key not in npz.files:
                raise CannError(key, f"no blob named {key} in {path}")
            arr = npz[key]
            if tuple(arr.shape) != tuple(t.get_shape()) or arr.dtype != numpy_dtype(t.get_element_type()):
                raise CannError(key, f"blob {arr.dtype}{list(arr.shape)} in {path} does not match {t}")
            op.properties["value"] = dense_attr(arr)


def parse_module(text: str, ctx: Context, weights_dir: str | os.PathLike | None = None, *, name: str = "<text>") -> ModuleOp:
    """Parse ``text`` (printed by :func:`print_module`) and resolve its ``dense_resource`` blobs.

    ``weights_dir`` is the directory of the text file; ``graph.weights`` is relative to it. The
    result is not verified (call ``module.verify()``).
    """
    install_resource_key_fix()
    module = Parser(ctx, text, name).parse_module()
    resolve_weights(module, weights_dir)
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
