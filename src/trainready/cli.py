"""The `trainready` command line: each command parses → builds → runs → reports.

Exit codes: 0 every check passed (warnings allowed), 1 a check failed,
2 usage or config error (one line on stderr, never a traceback).
"""

from __future__ import annotations

import os
import sys

import typer

from trainready import __version__
from trainready.commands import register_all
from trainready.errors import TrainreadyError, UsageError

app = typer.Typer(
    name="trainready",
    help=(
        "Take an LLM-pretraining machine from 'software installed' to 'accepted for training', with evidence.\n\n"
        "Start with `trainready node` (the whole acceptance on this machine; on a machine without GPUs it runs "
        "on the CPU with 8 gloo ranks) and `trainready env` (the manifest a colleague needs to reproduce it)."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
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


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app, turn our errors into one line + exit code."""
    try:
        # Standalone mode: typer/click print usage errors and exit 2 themselves.
        app(args=argv)
    except TrainreadyError as exc:
        sys.stderr.write(f"trainready: error: {exc}\n")
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.stderr.write("trainready: interrupted\n")
        sys.exit(130)
    except Exception as exc:  # noqa: BLE001 - last resort: still one line
        if os.environ.get("TRAINREADY_DEBUG"):
            raise
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        sys.stderr.write(f"trainready: internal error: {type(exc).__name__}: {first} (TRAINREADY_DEBUG=1 for a traceback)\n")
        sys.exit(1)


__all__ = ["app", "main", "UsageError"]
