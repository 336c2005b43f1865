"""The start-up of `trainready node --health-check` without the CLI's own imports.

Slurm runs the HealthCheckProgram on every node at every interval, so its start-up is its cost: the full
command line (typer, rich, every command's module) takes ~1 s of CPU before a check starts.  `entry.py` hands
the plain forms here first (a top-level module: the `commands` package's own `__init__` imports typer):
`node --health-check` with only `--spec PATH`, `--health-state PATH` and `--json PATH`.  Anything
else (`--active`, `--plant`, `--help`, an unknown option) goes to the full CLI, which parses and refuses as
usual (one line, exit 2).
"""

from __future__ import annotations

import sys
from typing import Sequence

_VALUED = ("--spec", "-s", "--health-state", "--json")


def plain_args(argv: Sequence[str]) -> dict[str, str] | None:
    """The options of a plain `node --health-check` command line, or None (the full CLI parses it)."""
    if len(argv) < 2 or argv[0] != "node" or "--health-check" not in argv:
        return None
    out: dict[str, str] = {}
    rest = [a for a in argv[1:] if a != "--health-check"]
    while rest:
        head = rest.pop(0)
        name, eq, value = head.partition("=")
        if name not in _VALUED or (not eq and not rest):
            return None
        if not eq:
            value = rest.pop(0)
        if not value or value.startswith("-"):
            return None
        out["--spec" if name == "-s" else name] = value
    return out


def run(argv: Sequence[str]) -> int | None:
    """Run a plain passive health check: its exit code, or None when the full CLI must take the line."""
    args = plain_args(argv)
    if args is None:
        return None
    from trainready.cluster.health.passive import run_passive
    from trainready.errors import TrainreadyError

    def say(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    try:
        want, fabric = None, None
        if "--spec" in args:
            from trainready.spec import load_spec

            spec = load_spec(args["--spec"])[0]
            want, fabric = spec.gpu.count, spec.fabric
        return run_passive(want, args.get("--health-state"), {}, say, args.get("--json"), fabric)
    except TrainreadyError as exc:
        sys.stderr.write(f"trainready: error: {exc}\n")
        return exc.exit_code
