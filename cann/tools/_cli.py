"""What the click-based command-line tools share: error reporting and atomic output files.

User mistakes (a :class:`~cann.errors.CannError` or a click usage error) print one line per
problem, ``error: <location>: <message>``, and exit with status 2, never a traceback. Anything
else is a bug: ``internal error: ...`` with the traceback, exit 1.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

import click

from cann.errors import CannError, Diagnostic


def _param_location(e: click.ClickException, prog: str) -> str:
    param = getattr(e, "param", None)
    if isinstance(param, click.Option) and param.opts:
        return max(param.opts, key=len)
    if isinstance(param, click.Argument):
        return param.human_readable_name
    if getattr(e, "param_hint", None):
        hint = e.param_hint
        return hint if isinstance(hint, str) else " / ".join(hint)
    if isinstance(e, click.NoSuchOption):
        return e.option_name
    return prog


#: click >= 8.2 raises it for a group called without a command (its message is the whole help)
_NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())


def run_command(cmd: click.Command, argv: Sequence[str] | None, prog: str) -> NoReturn:
    """Run a click command, mapping every outcome to an exit status (0 ok, 1 bug/failure, 2 user)."""
    try:
        rv = cmd.main(args=list(argv) if argv is not None else None, prog_name=prog, standalone_mode=False)
    except CannError as e:
        _print_lines(e.lines())
        _exit(2)
    except click.exceptions.Abort:
        _print_lines(["error: interrupted"])
        _exit(130)
    except click.MissingParameter as e:  # its message is empty: "error: MODEL.om: " said nothing
        kind = "argument" if isinstance(e.param, click.Argument) else "option" if e.param is not None else "parameter"
        what = f"missing {kind} ({prog} --help shows the usage)"
        _print_lines([str(Diagnostic(_param_location(e, prog), what))])
        _exit(2)
    except _NO_ARGS_IS_HELP as e:  # a group run bare: one line, not its whole help as an "error:"
        group = e.ctx.command if e.ctx is not None else None
        names = ", ".join(group.list_commands(e.ctx)) if isinstance(group, click.Group) else ""
        what = f"no command given (commands: {names}; {prog} --help)" if names else f"no arguments ({prog} --help)"
        _print_lines([str(Diagnostic(prog, what))])
        _exit(2)
    except click.BadParameter as e:
        _print_lines([str(Diagnostic(_param_location(e, prog), e.message))])
        _exit(2)
    except click.NoSuchOption as e:
        msg = f"no such option{'; did you mean ' + ' or '.join(e.possibilities) + '?' if e.possibilities else ''}"
        _print_lines([str(Diagnostic(e.option_name, msg))])
        _exit(2)
    except click.ClickException as e:
        _print_lines([str(Diagnostic(_param_location(e, prog), e.format_message()))])
        _exit(2)
    except KeyboardInterrupt:
        _print_lines(["error: interrupted"])
        _exit(130)
    except SystemExit:
        raise
    except BaseException as e:  # noqa: BLE001 - a bug, not a user mistake
        sys.stdout.flush()
        print(f"internal error: {type(e).__name__}: {e}", file=sys.stderr)
        traceback.print_exc()
        _exit(1)
    _exit(rv if isinstance(rv, int) else 0)


def _print_lines(lines: list[str]) -> None:
    sys.stdout.flush()
    # one write: ranks of an MPI run share stderr, and a line written in pieces interleaves with theirs
    sys.stderr.write("".join(line + "\n" for line in lines))


def _exit(code: int) -> NoReturn:
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(code)


