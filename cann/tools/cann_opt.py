"""``cann-opt``: xDSL's ``xdsl-opt`` driver with every cann dialect and pass registered.

Additions to xDSL's flags:

* ``--print-ir-after-all``: print the IR after every pass (including the last) to stderr, each
  dump headed by ``// -----// IR Dump After <pass> //----- //``;
* ``--time-passes``: per-pass wall time to **stderr**, one line ``pass <name>: <seconds> s``
  (xDSL prints it to stdout, mixed with the IR);
* user mistakes (unreadable input, parse error, failed verification, unknown pass or pass option,
  a bad flag) print one line ``error: <file or pass>: <message>`` and exit with status 2, except
  under ``--verify-diagnostics``, which keeps xDSL's print-and-exit-0 behaviour;
* an unexpected exception is a bug: ``internal error: ...`` with the traceback, exit 1;
* only what applies to cann's IR is offered: the ``mlir`` target and frontend (``-f mlir`` parses
  a file of any suffix), cann's passes (``--help`` lists them with their options) and xDSL's
  generic ``canonicalize``, ``cse`` and ``dce``;
* a reader that goes away (``cann-opt ... | head``) ends the run quietly with status 1.
"""

from __future__ import annotations

import argparse
import os
from io import StringIO
import io
import re
import sys
import time
import traceback
from collections.abc import Sequence
from typing import IO, NoReturn

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline
from xdsl.printer import Printer
from xdsl.utils.arg_spec import parse_pipeline, parse_spec
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException, ParseError
from xdsl.xdsl_opt_main import xDSLOptMain

from cann.errors import CannError, Diagnostic
from cann.options import check_pass_options

#: xDSL's passes that apply to any IR; xDSL's others rewrite xDSL's own dialects
GENERIC_XDSL_PASSES = ("canonicalize", "cse", "dce")
TARGETS = ("mlir",)
FRONTENDS = ("mlir",)


def pass_signature(name: str, cls: type[ModulePass]) -> str:
    """``graph-fuse-ub{cube_epilogue=true elementwise=true ...}``: a pass with its options and defaults
    (an option without a default, or whose default None means "taken from the IR", by its name only:
    ``convert-tile-to-ascend{soc}``)."""
    import dataclasses

    def show(v) -> str:
        return str(v).lower() if isinstance(v, bool) else (repr(v) if v == "" else str(v))

    opts = [f"{f.name}={show(f.default)}" if f.default not in (dataclasses.MISSING, None) else f.name
            for f in dataclasses.fields(cls) if f.init and not f.name.startswith("_")]
    return f"{name}{{{' '.join(opts)}}}" if opts else name


class _Buffer(io.StringIO):
    """An output buffer xDSL's driver may close without losing the text."""

    def close(self) -> None:
        pass


class _UserError(Exception):
    """A user mistake found by the driver itself (location, message)."""

    def __init__(self, location: str, message: str):
        super().__init__(message)
        self.diagnostic = Diagnostic(location, message)


def pass_summary(cls: type[ModulePass]) -> str:
    """The first sentence of a pass's docstring, on one line, without reST's double backquotes
    (``--help``'s line under the pass's signature)."""
    doc = (cls.__doc__ or "").strip()
    para = " ".join(ln.strip() for ln in doc.split("\n\n")[0].splitlines()).replace("``", "`")
    m = re.match(r"(.+?\.)(\s|$)", para)
    return m.group(1) if m else para


_KIND = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


def check_option_kinds(cls: type[ModulePass], spec) -> None:
    """Raise ``_UserError(pass, "bad pass option NAME=VALUE: expected ...")`` for a ``-p`` option the
    pass does not have or whose value is not of its type (before xDSL's ``from_spec``, whose own
    messages name Python classes)."""
    import dataclasses
    import typing

    from xdsl.utils import arg_spec

    fields = {f.name: f for f in dataclasses.fields(cls) if f.init and f.name != "name" and not f.name.startswith("_")}
    hints = typing.get_type_hints(cls)
    for key, values in spec.normalize_parameter_names().parameters.items():
        shown = ",".join(str(v).lower() if isinstance(v, bool) else str(v) for v in values)
        if key not in fields:
            known = f"options: {', '.join(fields)}" if fields else "it takes no options"
            raise _UserError(spec.name, f"bad pass option {key}: no such option ({known})")
        try:
            arg_spec._convert_arg_to_type(values, hints[key])
        except (ValueError, TypeError):
            kinds = [_KIND[t] for t in (typing.get_args(hints[key]) or (hints[key],)) if t in _KIND]
            expected = " or ".join(kinds) if kinds else str(hints[key])
            raise _UserError(spec.name, f"bad pass option {key}={shown}: expected {expected}") from None


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    return lines[0] if lines else "unknown error"


def _diagnostic_message(e: BaseException) -> str:
    """One line from a verifier/pass diagnostic: its message, prefixed by the failing op's name."""
    message = " ".join(ln.strip() for ln in str(e).splitlines() if ln.strip()) or type(e).__name__
    for note in getattr(e, "__notes__", ()):
        lines = note.splitlines()
        for i, ln in enumerate(lines[1:], 1):
            if re.fullmatch(r"\s*\^+-*\s*", ln) and (m := re.search(r'"([\w.$-]+)"\(', lines[i - 1])):
                return f"'{m.group(1)}' op {message}"
    return message


class CannOptMain(xDSLOptMain):
    version_format = "cann-opt (xdsl {xdsl_version})"

    def __init__(self, description: str = "cann modular optimizer driver", args: Sequence[str] | None = None):
        self._current_pass: ModulePass | None = None
        super().__init__(description, args)

    # -- registration -------------------------------------------------------------------------

    def register_all_dialects(self):
        super().register_all_dialects()
        from cann.dialects import ALL_DIALECTS

        for name, factory in ALL_DIALECTS.items():
            if name not in self.ctx.registered_dialect_names:
                self.ctx.register_dialect(name, factory)

    def register_all_passes(self):
        """cann's passes, and the few xDSL passes that apply to any IR (:data:`GENERIC_XDSL_PASSES`)."""
        super().register_all_passes()
        self.available_passes = {name: f for name, f in self.available_passes.items() if name in GENERIC_XDSL_PASSES}
        from cann.passes import ALL_PASSES

        for name, factory in ALL_PASSES.items():
            self.register_pass(name, factory)

    def register_all_targets(self):
        """Only the ``mlir`` target: xDSL's others (llvm, riscv-asm, wgsl, ...) print xDSL's own
        dialects and crash on cann's IR."""
        super().register_all_targets()
        self.available_targets = {name: f for name, f in self.available_targets.items() if name in TARGETS}

    def register_all_frontends(self):
        super().register_all_frontends()
        self.available_frontends = {name: f for name, f in self.available_frontends.items() if name in FRONTENDS}

    def get_input_stream(self):
        """As xDSL's, but ``-f FRONTEND`` chooses the parser whatever the file's suffix is."""
        f, extension = super().get_input_stream()
        if self.args.frontend:
            extension = parse_spec(self.args.frontend).name
        return f, extension

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser):
        super().register_all_arguments(arg_parser)
        arg_parser.prog = "cann-opt"
        arg_parser.add_argument(
            "--print-ir-after-all",
            default=False,
            action="store_true",
            help="Print the IR after every pass, including the last one, to stderr",
        )

        def error(message: str) -> NoReturn:  # argparse's usage+message -> our one-line form
            print(f"error: cann-opt: {message}", file=sys.stderr)
            sys.exit(2)

        arg_parser.error = error  # type: ignore[method-assign]
        for action in arg_parser._actions:
            if action.dest == "passes":
                action.help = "Comma-separated pass pipeline, e.g. 'graph-fuse-ub{elementwise=false},cse' (passes below)"
            elif action.dest == "target":
                action.help = f"Output format (default mlir; available: {', '.join(TARGETS)})"
            elif action.dest == "frontend":
                action.help = ("Parser of the input whatever its file suffix (available: "
                               f"{', '.join(FRONTENDS)}; default: from the suffix, mlir for stdin)")
        arg_parser.formatter_class = argparse.RawDescriptionHelpFormatter
        format_help = arg_parser.format_help

        def help_with_passes() -> str:  # built when asked for: it imports every pass module
            arg_parser.epilog = self.pass_help()
            return format_help()

        arg_parser.format_help = help_with_passes  # type: ignore[method-assign]

    def pass_help(self) -> str:
        """The ``--help`` list of passes: cann's with their options (``name=default``), then xDSL's."""
        from cann.passes import ALL_PASSES

        lines = ["cann passes (options in braces, shown with their defaults):"]
        for name, factory in ALL_PASSES.items():
            lines.append(f"  {pass_signature(name, factory())}")
            if summary := pass_summary(factory()):
                lines.append(f"      {summary}")
        generic = [n for n in self.available_passes if n not in ALL_PASSES]
        lines.append(f"xDSL passes that apply to any IR: {', '.join(generic)}")
        lines.append("The compiler's stage pipelines (cann.compiler.stage_pipelines) can be pasted into -p.")
        return "\n".join(lines)

    # -- pipeline -----------------------------------------------------------------------------

    def setup_pipeline(self):
        spec = self.args.passes
        try:
            specs = list(parse_pipeline(spec))
        except ArgSpecParseError as e:
            lines = [ln.strip() for ln in str(e).splitlines()]
            column = lines[1].rsplit(":", 1)[-1] if len(lines) > 1 else "?"
            raise _UserError(f"-p '{spec}'", f"column {column}: {lines[-1] if lines else e}") from None
        for s in specs:
            if s.name not in self.available_passes:
                raise _UserError(s.name, "unknown pass (cann-opt --help lists the available passes)")
        for s in specs:
            cls = self.available_passes[s.name]()
            check_option_kinds(cls, s)
            try:
                p = cls.from_pass_spec(s)
            except (ValueError, TypeError) as e:  # a pass's own check of a value: "NAME=VALUE: ..."
                message = _first_line(str(e))
                sep = " " if re.match(r"\w+=", message) else ": "
                raise _UserError(s.name, f"bad pass option{sep}{message}") from None
            check_pass_options(s.name, p)  # the compile options' own checks (cann.options)
        self.pipeline = PassPipeline.parse_spec(self.available_passes, spec, self._callback)
        self._timer = time.perf_counter()

    def _callback(self, previous: ModulePass | None, module: ModuleOp, next_: ModulePass | None) -> None:
        now = time.perf_counter()
        if self.args.time_passes and previous is not None:
            print(f"pass {previous.name}: {now - self._timer:.6f} s", file=sys.stderr)
        if not self.args.disable_verify:
            self._current_pass = previous
            module.verify()
        if previous is not None and self.args.print_ir_after_all:
            print(f"// -----// IR Dump After {previous.name} //----- //", file=sys.stderr)
            Printer(stream=sys.stderr, print_generic_format=self.args.print_op_generic).print_op(module)
            print("\n", file=sys.stderr)
        if previous is not None and next_ is not None and self.args.print_between_passes:
            print(f"IR after {previous.name}:")
            Printer(stream=sys.stdout).print_op(module)
            print("\n\n\n")
        self._current_pass = next_
        self._timer = time.perf_counter()

    def _weights_dir(self) -> str:
        f = self.args.input_file
        return os.path.dirname(os.path.abspath(f)) if f else os.getcwd()

    def parse_chunk(self, chunk, file_extension: str, start_offset: int = 0):
        from cann.dialects.weights import clear_embedded_blobs, install_resource_key_fix

        install_resource_key_fix()
        clear_embedded_blobs()  # a chunk's dialect_resources are its own
        text = chunk.read()
        if not text.strip():  # xDSL: "Could not parse entire input!" at 1:1 of an empty file
            raise _UserError(self.get_input_name(), "empty input: no module to read")
        return super().parse_chunk(io.BytesIO(text) if isinstance(text, bytes) else StringIO(text), file_extension,
                                   start_offset)

    def apply_passes(self, prog: ModuleOp):
        from xdsl.dialects.builtin import DenseResourceAttr

        from cann.dialects.weights import clear_embedded_blobs, resolve_weights

        self._sidecar = None
        if any(isinstance(getattr(op, "value", None), DenseResourceAttr) for op in prog.walk()):
            # passes need the values (docs/ir-text.md), and so does a new sidecar (-o); with
            # neither, handles into the input's sidecar print back unchanged
            needed = bool(self.pipeline.passes) or self.args.output_file is not None
            try:
                self._sidecar = resolve_weights(prog, self._weights_dir(), embedded_only=not needed)
            finally:
                clear_embedded_blobs()
        self._timer = time.perf_counter()
        self._current_pass = None
        self.pipeline.apply(self.ctx, prog)

    def output_resulting_program(self, prog: ModuleOp) -> str:
        """The default target prints large constants as ``dense_resource`` handles: with ``-o FILE``
        their blobs go to ``FILE.npz``, on stdout into the text's ``dialect_resources`` section
        (docs/ir-text.md)."""
        from cann.dialects.weights import print_module

        if self.args.target != "mlir" or self.args.print_op_generic or self.args.print_no_properties:
            return super().output_resulting_program(prog)
        out = StringIO()
        weights = f"{self.args.output_file}.npz" if self.args.output_file else None
        print_module(prog, out, weights, sidecar=getattr(self, "_sidecar", None))
        return out.getvalue()

    # -- running ------------------------------------------------------------------------------

    def prepare_output(self) -> IO[str]:
        """With ``-o``, buffer the output and write it atomically once everything succeeded."""
        if self.args.output_file is None:
            return sys.stdout
        from cann.compiler import check_writable

        check_writable(self.args.output_file)  # before the passes, naming the file asked for (not its .npz)
        self._buffer = _Buffer()
        return self._buffer

    def run(self):
        self._buffer = None
        try:
            super().run()
            if self._buffer is not None:
                from cann.fileio import atomic_output

                with atomic_output(self.args.output_file, "w") as f:
                    f.write(self._buffer.getvalue())
        except BrokenPipeError:
            raise
        except OSError as e:
            where = e.filename or self.args.input_file or "cann-opt"
            raise _UserError(str(where), f"cannot open: {e.strerror or e}") from None
        except ParseError as e:
            raise _UserError(str(e.span.get_location()), _first_line(e.msg)) from None
        except DiagnosticException as e:
            where = self._current_pass.name if self._current_pass is not None else self.get_input_name()
            raise _UserError(where, _diagnostic_message(e)) from None
        except ValueError as e:
            if str(e).startswith("Unrecognized file extension"):
                raise _UserError(self.get_input_name(), f"{_first_line(str(e))} (give -f mlir to parse it as MLIR text)") from None
            raise


def main(argv: Sequence[str] | None = None) -> NoReturn:
    code = 0
    try:
        CannOptMain(args=argv).run()
    except _UserError as e:
        print(str(e.diagnostic), file=sys.stderr)
        code = 2
    except CannError as e:
        print("\n".join(e.lines()), file=sys.stderr)
        code = 2
    except SystemExit:
        raise
    except BrokenPipeError:  # the reader went away (`cann-opt ... | head`): quietly, as click's tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(1)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        code = 130
    except BaseException as e:  # noqa: BLE001 - a bug: say so and show where
        print(f"internal error: {type(e).__name__}: {e}", file=sys.stderr)
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.exit(code)


if __name__ == "__main__":
    main()
