"""`trainready spec`: write, show and validate node specs."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from trainready.commands.common import check_out_path
from trainready.errors import UsageError
from trainready.records import read_report
from trainready.util.atomic import atomic_write_text
from trainready.util.strict import dump_toml

spec_app = typer.Typer(
    help=(
        "Write, show and check node specs (what a node should be).\n\n"
        "Examples:\n\n\b\n"
        "  trainready spec show example:h200-8x > fleet.toml\n"
        "  trainready spec check fleet.toml\n"
        "  trainready spec init --measure -o fleet.toml"
    ),
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)

MEASURE_CHECKS = ("throughput", "comm")


@spec_app.command("init")
def init(
    out: Path = typer.Option(Path("node-spec.toml"), "--out", "-o", help="Where to write the spec."),
    from_report: Path = typer.Option(
        None, "--from-report", help="A `trainready node --json` record of this machine to take measured floors from."
    ),
    measure: bool = typer.Option(
        False, "--measure", help="Run the throughput and comm checks now and take floors from them."
    ),
    tolerance: float = typer.Option(
        0.8, "--tolerance", help="Floors are this fraction of the reference's worst figure (0.8: a node 20% below the reference fails)."
    ),
    name: str = typer.Option(None, "--name", help="Spec name (default: <hostname>-reference)."),
    image_digest: str = typer.Option(None, "--image-digest", help="Image digest this node runs (sha256:...)."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing file."),
) -> None:
    """Write a spec from THIS machine: the accepted reference server becomes the spec the fleet is held to.

    Examples:

    \b
      trainready node --json ref.json
      trainready spec init --from-report ref.json -o fleet.toml
      trainready spec init --measure -o fleet.toml
    """
    from trainready.probe.manifest import collect
    from trainready.spec.init import spec_from_machine

    if not 0 < tolerance <= 1:
        raise UsageError(f"--tolerance: expected 0 < x <= 1, got {tolerance}")
    check_out_path(str(out), "--out")
    if out.exists() and not force:
        raise UsageError(f"--out {out}: file exists (pass --force to overwrite)")
    report = None
    if from_report is not None:
        report = read_report(str(from_report), f"--from-report {from_report}",
                             "a `trainready node --json` record of the reference server")
    elif measure:
        report = _measure()
    manifest = collect(image_digest=image_digest)
    spec = spec_from_machine(manifest, report, tolerance, name)
    text = f"# Written by `trainready spec init`. Review before use.\n{dump_toml(spec)}"
    try:
        atomic_write_text(out, text)
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot write ({exc.strerror})") from None
    Console(stderr=True).print(f"spec written to {out}")


def _measure() -> dict:
    import tempfile

    from trainready.checks import REGISTRY, CheckContext, select
    from trainready.records import Level
    from trainready.runner import run_checks
    from trainready.spec import default_spec, load_spec

    names = [n for n in MEASURE_CHECKS if n in REGISTRY]
    from trainready.util.devices import cuda_count

    spec = load_spec("example:h200-8x")[0] if cuda_count() else default_spec()
    ctx = CheckContext(spec, Path(tempfile.mkdtemp(prefix="trainready-spec-")))
    return run_checks("node", select(names, None, Level.STANDARD), ctx).to_json()


@spec_app.command("show")
def show(spec: str = typer.Argument(None, help="Spec file or example:NAME (default: the CPU profile).")) -> None:
    """Print a spec, resolved with every default, as commented TOML.

    Keys left unset (not checked) are listed under a comment, not as empty lines.

    Examples:

    \b
      trainready spec show                       # the CPU profile
      trainready spec show example:b200-reference
      trainready spec show fleet.toml > resolved.toml
    """
    from trainready.spec import load_spec

    s, _ = load_spec(spec)
    typer.echo(dump_toml(s), nl=False)


@spec_app.command("check")
def check(spec: str = typer.Argument(..., help="Spec file to validate.")) -> None:
    """Validate a spec strictly: exit 0 if it loads, else one line naming the file and key, exit 2.

    Examples:

    \b
      trainready spec check fleet.toml
      trainready spec check example:h200-8x
    """
    from trainready.spec import load_spec

    s, src = load_spec(spec)
    typer.echo(f"{src}: ok ({s.name})")


def register(app: typer.Typer) -> None:
    app.add_typer(spec_app, name="spec")
