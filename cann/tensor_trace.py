"""Compile-time records of which values and device buffers hold which model tensors.

:mod:`cann.accuracy` (``cann-run --all-layers``) compiles a model inside :func:`capture`; the
ONNX importer and ``convert-graph-to-tile`` then :func:`note` their maps (ONNX tensor name ->
graph value, graph value -> GM buffer). Outside :func:`capture` :func:`note` does nothing: a
normal compile records nothing and its output is unchanged. A leaf module (no ``cann`` imports),
so that the frontend and the lowering can call it without an import cycle.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_ACTIVE: ContextVar[dict | None] = ContextVar("cann_tensor_trace", default=None)


@contextmanager
def capture() -> Iterator[dict]:
    """Record the notes of the compiles run inside the ``with`` block into the yielded dict
    (key -> the last value noted under it)."""
    records: dict = {}
    token = _ACTIVE.set(records)
    try:
        yield records
    finally:
        _ACTIVE.reset(token)


def tracing() -> bool:
    """Whether a :func:`capture` is active (a caller skips building what it would note otherwise)."""
    return _ACTIVE.get() is not None


def note(key: str, value) -> None:
    """Record ``value`` under ``key`` when a :func:`capture` is active (else nothing)."""
    records = _ACTIVE.get()
    if records is not None:
        records[key] = value
