"""The `trainready` command line: each command parses → builds → runs → reports.

Exit codes: 0 every check passed (warnings allowed), 1 a check failed,
2 usage or config error (one line on stderr, never a traceback), 3 a run made
with --plant (planted faults / replayed facts: a test, not evidence; records.PLANTED_EXIT),
130 / 143 interrupted by SIGINT / SIGTERM (one line; every rank stopped; docs/lifecycle.md).
"""

from __future__ import annotations

import inspect
import os
import re
import sys

import typer

from trainready import __version__
from trainready.commands import register_all
from trainready.commands.common import set_invocation
from trainready.errors import Interrupted, TrainreadyError, UsageError, missing_dependency
from trainready.util.signals import exit_after_interrupt, handled, interrupts_raise, raise_pending

app = typer.Typer(
    name="trainready",
    help=(
        "Take an LLM-pretraining machine from 'software installed' to 'accepted for training', with evidence.\n\n"
        "Start with `trainready node` (the whole acceptance on this machine; on a machine without GPUs it runs "
        "on the CPU with 8 gloo ranks) and `trainready env` (the manifest a colleague needs to reproduce it).\n\n"
        "Exit codes: 0 passed (warnings allowed), 1 a check failed, 2 usage or config error, "
        "3 a run made with --plant (fault injection: a test, never evidence)."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain click help: paragraphs re-wrap to the terminal, \b blocks (examples) stay as written
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"trainready {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """trainready: acceptance tests for LLM-pretraining nodes and fleets."""


register_all(app)


def _short_helps(typer_app: typer.Typer) -> None:
    """Each command's line in a command list is its docstring's whole first paragraph on one line:
    click would cut it at ~45 characters ('start...'), typer's rich panel kept the source's line breaks."""
    for info in typer_app.registered_commands:
        doc = inspect.cleandoc(info.help or (info.callback.__doc__ if info.callback else "") or "")
        if info.short_help is None and doc:
            info.short_help = " ".join(doc.split("\n\n")[0].split())
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            _short_helps(group.typer_instance)


_short_helps(app)


def _click_exception_class() -> type[Exception]:
    """click's ClickException, whichever click typer uses (vendored in typer >= 0.24)."""
    for cls in typer.BadParameter.__mro__:
        if cls.__name__ == "ClickException":
            return cls
    return Exception  # pragma: no cover


# click's words for a value outside an option's choices (an Enum option such as --level); typer >= 0.2x routes
# the check through pydantic, which puts "Value error, " in front.
_NOT_ONE_OF = re.compile(r"Invalid value for '(?P<opt>[^']+)'(?: / '[^']+')*: (?:Value error, )?'(?P<val>[^']*)' "
                         r"is not one of (?P<choices>.+?)\.?$")


def _click_line(message: str) -> str:
    """click's message on one line; a value outside an option's choices as `--level slow: expected one of
    quick, standard` (the option as typed, the value, the valid ones), whichever click/typer wrote it."""
    msg = " ".join(message.split())
    m = _NOT_ONE_OF.fullmatch(msg)
    if m:
        return f"{m['opt']} {m['val']}: expected one of {m['choices'].replace(chr(39), '')}"
    return msg.replace("Value error, ", "")


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app, turn every error into one line + exit code."""
    with interrupts_raise():
        _run(argv)


def _run(argv: list[str] | None) -> None:
    click_exc = _click_exception_class()
    set_invocation(list(sys.argv[1:] if argv is None else argv))  # recorded in each record (context.argv)
    try:
        raise_pending()  # a signal while modules loaded, swallowed by an `except:` in a library
        rc = app(args=argv, prog_name="trainready", standalone_mode=False)
    except Interrupted as exc:  # SIGINT/SIGTERM: every rank stopped, one line, 130 / 143
        handled()
        from trainready.ranks import live

        live.stop()  # anything a command left running (normally nothing: the command stopped its ranks)
        notes = "".join(f"; {n}" for n in exc.notes)
        exit_after_interrupt(f"trainready: interrupted ({exc.signame}) during {exc.during or 'start-up'}{notes}",
                             exc.exit_code)
    except click_exc as exc:  # bad flags/values: one line, exit 2 (never click's framed box)
        if type(exc).__name__ == "NoArgsIsHelpError":
            typer.echo(exc.format_message())  # type: ignore[attr-defined]
            sys.exit(0)
        msg = _click_line(exc.format_message())  # type: ignore[attr-defined]
        ctx = getattr(exc, "ctx", None)
        where = f" (try '{ctx.command_path} --help')" if ctx is not None else ""
        sys.stderr.write(f"trainready: error: {msg}{where}\n")
        sys.exit(2)
    except TrainreadyError as exc:
        sys.stderr.write(f"trainready: error: {exc}\n")
        sys.exit(exc.exit_code)
    except (KeyboardInterrupt, EOFError) as exc:
        sys.stderr.write("trainready: interrupted\n")
        sys.exit(130 if isinstance(exc, KeyboardInterrupt) else 1)
    except Exception as exc:  # noqa: BLE001 - last resort: still one line
        if type(exc).__name__ == "Abort":
            sys.stderr.write("trainready: aborted\n")
            sys.exit(130)
        missing = missing_dependency(exc) if isinstance(exc, ModuleNotFoundError) else None
        if missing:  # e.g. torch absent on a host that runs a checkout with PYTHONPATH=src
            sys.stderr.write(missing + "\n")
            sys.exit(2)
        if os.environ.get("TRAINREADY_DEBUG"):
            raise
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        sys.stderr.write(f"trainready: internal error: {type(exc).__name__}: {first} (TRAINREADY_DEBUG=1 for a traceback)\n")
        sys.exit(1)
    sys.exit(rc if isinstance(rc, int) else 0)


__all__ = ["app", "main", "UsageError"]
