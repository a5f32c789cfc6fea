"""Atomic file output: write a temp file next to the target and rename it over the target, so a
failed compile or run never leaves a half-written file (DESIGN.md principle 7)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO

from cann.errors import CannError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike, mode: str = "w") -> Iterator[IO]:
    """Open a temp file next to ``path``; rename it over ``path`` only if the block succeeds.

    The file gets the permissions a plain ``open`` would give (0666 minus the umask).

    Raises:
        CannError: the directory is missing or not writable (naming ``path``).
    """
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise CannError(str(path), f"cannot write: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, mode) as f:
            yield f
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise CannError(str(path), f"cannot write: {e.strerror or e}") from None
        raise


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_output`)."""
    with atomic_output(path, "wb") as f:
        f.write(data)


def parse_protobuf(message, path: str | os.PathLike, what: str):
    """Read ``path`` and parse it into the protobuf ``message`` (returned).

    Raises:
        CannError: the file cannot be read (``cannot read model``) or does not parse (``not a/an
            <what>``), naming the path.
    """
    where = os.fspath(path)
    try:
        data = Path(where).read_bytes()
    except OSError as e:
        raise CannError(where, f"cannot read model: {e.strerror or e}") from None
    try:
        message.ParseFromString(data)
    except Exception as e:  # google.protobuf.message.DecodeError and friends
        raise CannError(where, f"not {what}: {e}") from None
    return message


def check_no_overwrite(outputs: Mapping[str, str | os.PathLike | None],
                       inputs: Iterable[tuple[str, str | os.PathLike | None]]) -> None:
    """Fail early when an output file of a command is one of its input files or another of its outputs
    (``cann-run m.om --output m.om`` would replace the model by its outputs).

    ``outputs`` / ``inputs``: what each file is (``--output``, ``the model``) and its path; ``None``, ``-``
    (stdout) and inputs that do not exist are skipped. Paths are compared after resolving symlinks.

    Raises:
        CannError: ``<output>: cannot write: it is the model (m.om), an input of this command; give
        another file`` or ``<output>: cannot write: it is also the --output file; give another file``.
    """
    seen = {os.path.realpath(p): f"{what} ({p}), an input of this command"
            for what, p in inputs if p and os.path.exists(p)}
    for what, p in outputs.items():
        if not p or str(p) == "-":
            continue
        key = os.path.realpath(p)
        if key in seen:
            raise CannError(str(p), f"cannot write: it is {seen[key]}; give another file")
        seen[key] = f"also the {what} file"
