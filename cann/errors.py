"""The project's error type for user mistakes.

Every user-facing problem (a malformed model, an unsupported operator, a bad flag, a corrupt
``.om``, a wrong input shape) is raised as :class:`CannError`. The command-line tools print each
problem as ``error: <location>: <message>`` and exit with status 2, never with a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Diagnostic:
    """One problem: where (an ONNX node name, a file, a flag) and what.

    ``needs_constant`` names the model tensors whose values, were they known at compile time,
    would remove the problem (a Reshape ``shape``, reduction ``axes``, Resize ``scales`` or a
    Conv weight fed as a graph input). :mod:`cann.backend` uses it to specialize a model on the
    values of such inputs; it is not printed.
    """

    location: str
    message: str
    needs_constant: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"error: {self.location}: {self.message}" if self.location else f"error: {self.message}"


class CannError(Exception):
    """A user mistake, carrying one or more diagnostics (one line each when printed).

    ``CannError(location, message)`` raises one problem; ``CannError.many(diags)`` raises several
    at once (e.g. every unsupported node of a model).
    """

    def __init__(self, location: str = "", message: str = "", *, diagnostics: list[Diagnostic] | None = None):
        self.diagnostics = list(diagnostics) if diagnostics else [Diagnostic(location, message)]
        super().__init__("\n".join(str(d) for d in self.diagnostics))

    @classmethod
    def many(cls, diagnostics: list[Diagnostic]) -> "CannError":
        return cls(diagnostics=diagnostics)

    def lines(self) -> list[str]:
        return [str(d) for d in self.diagnostics]


def constants_needed(e: CannError, inputs: list[str], have: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The model inputs to compile in as constants so that every problem of ``e`` goes away (their
    ``needs_constant`` names, among ``inputs`` and not in ``have``); () when some problem is of
    another kind or asks for a tensor that is not one of ``inputs``."""
    names: list[str] = []
    for d in e.diagnostics:
        if not d.needs_constant or any(n not in inputs or n in have for n in d.needs_constant):
            return ()
        names.extend(n for n in d.needs_constant if n not in names)
    return tuple(names)


class CannWarning(UserWarning):
    """A problem worth knowing that does not stop the run (``warnings`` category of the project)."""


class FloatOverflowWarning(CannWarning):
    """A kernel produced inf/NaN from finite inputs (float overflow; CANN's overflow detection)."""
