"""Atomic file output: write a temp file next to the target and rename it over the target, so a
failed compile or run never leaves a half-written file (DESIGN.md principle 7)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
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
