"""The compiled-model cache of mixed programming (:func:`cann.op`, :func:`cann.jit`).

A model is found by its *signature*: the ONNX model built for the call (operator, attributes,
input shapes and dtypes, opset; for ``@cann.jit`` the traced graph with its constants), the
compile options (SoC, precision mode, optimization level), the versions of cann and of the
``.om`` format, and the values of the inputs the compiler needs as constants (a Conv weight, a
Reshape shape: :attr:`cann.errors.Diagnostic.needs_constant`), which are compiled in.

Two levels: an LRU in memory (:data:`MEMORY_ENTRIES` models) and ``.om`` files on disk, under
:func:`cache_dir` (``$CANN_CACHE_DIR``; empty: no disk cache; unset: ``$XDG_CACHE_HOME/cann`` or
``~/.cache/cann``), in its ``mixed/`` folder. Files are written atomically; an entry that does not
read back (truncated, corrupted, another format version) is compiled again and rewritten, never
an error. Which inputs a signature needs as constants is learned by the first compile (the
compiler's diagnostics say) and kept beside the models (``<hash>.consts.json``).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from cann.errors import CannError, CannWarning, constants_needed
from cann.fileio import atomic_write_bytes
from cann.options import CompileOptions

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep
#: compiled models kept in memory (least recently used dropped first)
MEMORY_ENTRIES = 64
#: bump when the meaning of a cache file changes
CACHE_FORMAT = 1


def cache_dir() -> Path | None:
    """The disk cache folder: ``$CANN_CACHE_DIR`` when set (empty: disk cache off), else
    ``$XDG_CACHE_HOME/cann``, else ``~/.cache/cann``; models go in its ``mixed/`` subfolder."""
    env = os.environ.get("CANN_CACHE_DIR")
    if env is not None:
        return Path(env).expanduser() if env.strip() else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "cann"


@dataclass
class CacheInfo:
    """Counters of the cache (since the process started or :func:`clear`).

    ``compiles``: calls of :func:`cann.compile` (a signature whose constant inputs are not known
    yet may take two: the first one finds them); ``memory_hits`` / ``disk_hits``: models found
    without compiling; ``entries``: models held in memory.
    """

    compiles: int = 0
    memory_hits: int = 0
    disk_hits: int = 0
    entries: int = 0


class ModelCache:
    """Signature -> compiled :class:`cann.runtime.Model`, in memory and on disk (thread-safe)."""

    def __init__(self, entries: int = MEMORY_ENTRIES):
        self.entries = entries
        self._models: OrderedDict[str, object] = OrderedDict()
        self._consts: dict[str, tuple[str, ...]] = {}
        self._lock = threading.RLock()
        self.info = CacheInfo()
        self._warned = False

    def clear(self, disk: bool = False) -> None:
        """Forget the models held in memory and reset the counters; ``disk``: also delete the
        cache's files (the ``mixed/`` folder of :func:`cache_dir`)."""
        with self._lock:
            self._models.clear()
            self._consts.clear()
            self.info = CacheInfo()
            folder = _folder()
            if disk and folder is not None and folder.is_dir():
                for p in folder.iterdir():
                    if p.suffix in (".om", ".json"):
                        p.unlink(missing_ok=True)

    def get(self, model: onnx.ModelProto, feeds: dict[str, np.ndarray], opts: CompileOptions):
        """The compiled model for ``model`` (all of whose graph inputs are in ``feeds``) and the names
        of the graph inputs compiled in as constants (not to be fed to ``run``).

        Raises:
            CannError: the model does not compile (as :func:`cann.compile`).
        """
        from cann.compiler import compile

        base = _digest(_options_text(opts).encode(), model.SerializeToString(deterministic=True))
        with self._lock:
            consts = self._consts.get(base)
            if consts is None:
                consts = self._read_consts(base)
            if consts is not None:
                key = _key(base, consts, feeds)
                found = self._lookup(key, model, consts)
                if found is not None:
                    self._consts[base] = consts
                    return found, consts
            else:
                consts = ()
            while True:
                self.info.compiles += 1
                try:
                    compiled = compile(_with_constants(model, feeds, consts), soc_version=opts.soc_version,
                                            precision_mode=opts.precision_mode, opt_level=opts.opt_level)
                    break
                except CannError as e:
                    more = constants_needed(e, [i.name for i in model.graph.input], consts)
                    if not more:
                        raise
                    consts = consts + more
            key = _key(base, consts, feeds)
            self._consts[base] = consts
            self._remember(key, compiled)
            self._write(base, key, consts, compiled)
            return compiled, consts

    # -- memory -------------------------------------------------------------------------------

    def _remember(self, key: str, compiled) -> None:
        self._models[key] = compiled
        self._models.move_to_end(key)
        while len(self._models) > self.entries:
            self._models.popitem(last=False)
        self.info.entries = len(self._models)

    def _lookup(self, key: str, model: onnx.ModelProto, consts: tuple[str, ...]):
        if key in self._models:
            self._models.move_to_end(key)
            self.info.memory_hits += 1
            return self._models[key]
        folder = _folder()
        if folder is None or not (folder / f"{key}.om").is_file():
            return None
        from cann.runtime import load

        try:
            compiled = load(folder / f"{key}.om")
        except CannError:
            return None  # corrupt or of another format version: compiled again and rewritten
        runtime_inputs = [i.name for i in model.graph.input if i.name not in consts]
        if [t.name for t in compiled.inputs] != runtime_inputs:
            return None
        self.info.disk_hits += 1
        self._remember(key, compiled)
        return compiled

    # -- disk ---------------------------------------------------------------------------------

    def _read_consts(self, base: str) -> tuple[str, ...] | None:
        folder = _folder()
        if folder is None:
            return None
        try:
            names = json.loads((folder / f"{base}.consts.json").read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            return None
        return tuple(names)

    def _write(self, base: str, key: str, consts: tuple[str, ...], compiled) -> None:
        folder = _folder()
        if folder is None:
            return
        try:
            folder.mkdir(parents=True, exist_ok=True)
            compiled.save(folder / f"{key}.om")
            atomic_write_bytes(folder / f"{base}.consts.json", json.dumps(list(consts)).encode())
        except (CannError, OSError) as e:
            if not self._warned:  # a cache that cannot be written costs time, not correctness
                self._warned = True
                _warn_user(f"cann: cannot write the compile cache in {folder}: {e}; set CANN_CACHE_DIR "
                           "to a writable folder (or to '' to turn the disk cache off)")


def user_frame():
    """The innermost calling frame outside the ``cann`` package (None if there is none)."""
    f = sys._getframe(1)
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(_PACKAGE):
        f = f.f_back
    return f


def _warn_user(message: str) -> None:
    """A :class:`CannWarning` attributed to the user's line (:func:`user_frame`)."""
    f = user_frame()
    if f is None:
        warnings.warn(message, CannWarning)
    else:
        warnings.warn_explicit(message, CannWarning, f.f_code.co_filename, f.f_lineno, module=f.f_globals.get("__name__"),
                               registry=f.f_globals.setdefault("__warningregistry__", {}))


def _folder() -> Path | None:
    d = cache_dir()
    return None if d is None else d / "mixed"


def _options_text(opts: CompileOptions) -> str:
    return (f"compiler {compiler_fingerprint()} cache {CACHE_FORMAT} onnx {onnx.__version__} "
            f"soc {opts.soc_version} precision {opts.precision_mode} O{opts.opt_level}")


_FINGERPRINT: list[str] = []


def compiler_fingerprint() -> str:
    """A digest of the compiler's own files (every ``.py`` and ``.toml`` of the ``cann`` package),
    so that a changed compiler (a new release, a local edit) never reuses a model compiled by
    another; computed once per process."""
    if not _FINGERPRINT:
        root = Path(__file__).resolve().parent
        files = sorted(p for p in root.rglob("*") if p.suffix in (".py", ".toml") and p.is_file())
        _FINGERPRINT.append(_digest(*(part for p in files
                                      for part in (p.relative_to(root).as_posix().encode(), p.read_bytes()))))
    return _FINGERPRINT[0]


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(len(p).to_bytes(8, "little"))
        h.update(p)
    return h.hexdigest()[:40]


def _key(base: str, consts: tuple[str, ...], feeds: dict[str, np.ndarray]) -> str:
    parts = [base.encode()]
    for n in consts:
        a = np.ascontiguousarray(feeds[n])
        parts += [n.encode(), a.dtype.str.encode(), repr(a.shape).encode(), a.tobytes()]
    return _digest(*parts)


def _with_constants(model: onnx.ModelProto, feeds: dict[str, np.ndarray], consts: tuple[str, ...]) -> onnx.ModelProto:
    """A copy of ``model`` whose graph inputs ``consts`` are initializers holding their values."""
    if not consts:
        return model
    m = onnx.ModelProto()
    m.CopyFrom(model)
    keep = [vi for vi in m.graph.input if vi.name not in consts]
    del m.graph.input[:]
    m.graph.input.extend(keep)
    for n in consts:
        # np.array, not np.ascontiguousarray: the latter makes a 0-d array 1-d
        m.graph.initializer.append(numpy_helper.from_array(np.array(feeds[n], order="C"), n))
    return m


#: the cache :func:`cann.op` and :func:`cann.jit` share
CACHE = ModelCache()
