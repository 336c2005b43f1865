"""`trainready spec`: write, show and validate node specs."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console

from trainready.commands.common import check_out_path
from trainready.errors import UsageError
from trainready.manifest.container import DIGEST_ENV
from trainready.records import read_report
from trainready.util.atomic import atomic_write_text
from trainready.util.strict import dump_toml

if TYPE_CHECKING:
    from trainready.spec.init import Derived
    from trainready.spec.model import NodeSpec

spec_app = typer.Typer(
    help=(
        "Write, show and check node specs (what a node should be).\n\n"
        "Examples:\n\n\b\n"
        "  trainready spec show example:h200-8x > fleet.toml\n"
        "  trainready spec check fleet.toml\n"
        "  trainready spec init --measure --repeat 5 -o fleet.toml"
    ),
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)

MEASURE_CHECKS = ("throughput", "comm")


@spec_app.command("init")
def init(
    out: Path = typer.Option(Path("node-spec.toml"), "--out", "-o", help="Where to write the spec."),
    from_report: list[Path] = typer.Option(
        None, "--from-report", help="A `trainready node --json` record of this machine to take measured floors "
        "from; repeat it to give several runs (floors from their low figure and spread)."
    ),
    measure: bool = typer.Option(
        False, "--measure", help="Run the throughput and comm checks now, with no expectations, and take floors "
        "from them."
    ),
    repeat: int = typer.Option(
        5, "--repeat", help="With --measure: how many times to measure (floors need several runs to know the "
        "run-to-run spread; with 1 the spread is unknown, see --tolerance)."
    ),
    tolerance: float = typer.Option(
        0.8, "--tolerance", help="GEMM/HBM floors are this fraction of the reference's low figure (the 80% rule). "
        "busbw floors from several runs come from their spread; from one run, at most this and at least twice "
        "the backend's minimum margin (gloo busbw: 0.5; docs/comm.md)."
    ),
    name: str = typer.Option(None, "--name", help="Spec name (default: <hostname>-reference)."),
    image_digest: str = typer.Option(
        None, "--image-digest", help="Image digest this node runs (sha256:<64 hex>), when the runtime does not "
        f"expose it (`trainready env` says; or set {DIGEST_ENV})."
    ),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing file."),
) -> None:
    """Write a spec from THIS machine: the accepted reference server becomes the spec the fleet is held to.

    Floors come from the reference's low figure over several runs, with a margin from their spread;
    what could not be written is said on screen and in the TOML.

    Examples:

    \b
      trainready node --json ref.json
      trainready spec init --from-report ref.json --measure -o fleet.toml
      trainready spec init --from-report a.json --from-report b.json -o f.toml
    """
    from trainready.manifest.build import collect
    from trainready.spec.init import derive

    if not 0 < tolerance <= 1:
        raise UsageError(f"--tolerance: expected 0 < x <= 1, got {tolerance}")
    if not 1 <= repeat <= 100:
        raise UsageError(f"--repeat {repeat}: expected 1..100 runs")
    check_out_path(str(out), "--out")
    if out.exists() and not force:
        raise UsageError(f"--out {out}: file exists (pass --force to overwrite)")
    reports = [read_report(str(p), f"--from-report {p}", "a `trainready node --json` record of the reference server")
               for p in from_report or []]
    manifest = collect(image_digest=image_digest)
    console = Console(stderr=True)
    said: list[str] = []
    if measure:
        reports += _measure(repeat, console, said)
    derived = derive(manifest, reports, tolerance, name)
    _write(dataclasses.replace(derived, said=derived.said + tuple(said)), out, console)


def _write(derived: Derived, out: Path, console: Console) -> None:
    """Write the spec (atomically, its floors and notes as comments) and say every floor and note."""
    text = f"# Written by `trainready spec init`. Review before use.\n{derived.comment()}{dump_toml(derived.spec)}"
    try:
        atomic_write_text(out, text)
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot write ({exc.strerror})") from None
    for f in derived.floors:
        console.print(f"floor {f.describe()}", highlight=False, markup=False, soft_wrap=True)
    for line in derived.said:
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    for note in derived.notes:
        console.print(f"not written: {note}", style="yellow", highlight=False, markup=False, soft_wrap=True)
    console.print(f"spec written to {out}")


def _measure(repeat: int, console: Console, said: list[str]) -> list[dict]:
    """`repeat` usable runs of the throughput and comm checks under a spec with no expectations: they record,
    never judge (a GPU or rank count other than a shipped example's must not fail the measurement).  A run in
    which one of them failed or errored gives no floor (spec/figures.metrics): it is said in `said`, with the
    check's own words, and measured again in its place, `repeat` more runs at most.  A passing disturbance
    (a neighbour's burst of work, a sweep that missed its deadline) then costs one run; a fault of the
    reference fails every run, is said each time, and never becomes a floor."""
    import tempfile

    from trainready.checks import REGISTRY, CheckContext, select
    from trainready.records import Level
    from trainready.suite.runner import run_checks

    names = [n for n in MEASURE_CHECKS if n in REGISTRY]
    spec = measuring_spec()
    runs: list[dict] = []
    tries = 2 * repeat
    with tempfile.TemporaryDirectory(prefix="trainready-spec-") as tmp, console.status("measuring") as status:
        for i in range(tries):
            if len(runs) == repeat:
                break
            status.update(f"measuring {', '.join(names)}: run {i + 1} ({len(runs)} of {repeat} usable so far)")
            run = run_checks("node", select(names, None, Level.STANDARD), CheckContext(spec, Path(tmp))).to_json()
            broken = _broken(run)
            if not broken:
                runs.append(run)
                continue
            again = "measured again" if i + 1 < tries else "no run left to measure again"
            said.append(f"measurement run {i + 1}: {broken}; not a floor, {again}")
    if len(runs) < repeat:
        said.append(f"floors from {len(runs)} of the {repeat} run(s) asked for ({tries} measured; see above)")
    return runs


def _broken(run: dict) -> str:
    """The measured checks of `run` that failed or errored, with their messages ('' when none)."""
    bad = [r for r in run.get("results", []) if r.get("status") in ("fail", "error")]
    return "; ".join(f"{r.get('name')} {str(r.get('status')).upper()} ({' '.join(str(r.get('message')).split())[:240]})"
                     for r in bad)


def measuring_spec() -> "NodeSpec":
    """A spec that judges nothing the measurement records: this machine's GPU count, no busbw expectation,
    no peak fractions, no spread limit."""
    from trainready.spec.model import ComputeSpec, GpuSpec, NodeSpec
    from trainready.devices.world import cuda_count

    return NodeSpec(name="spec-init-measurement", gpu=GpuSpec(count=cuda_count()),
                    compute=ComputeSpec(gemm_min_fraction=None, hbm_min_fraction=None, spread_max=None),
                    comm=dataclasses.replace(NodeSpec().comm, expected_busbw_gbps={}))


@spec_app.command("show")
def show(spec: str = typer.Argument(None, help="Spec file, example:NAME, or auto (what `node` uses with no --spec: "
                                     "the GPUs NVML sees, else the CPU profile). Default: the CPU profile.")) -> None:
    """Print a spec, resolved with every default, as commented TOML.

    Keys left unset (not checked) are listed under a comment, not as empty lines.

    Examples:

    \b
      trainready spec show                       # the CPU profile
      trainready spec show auto                  # what node uses here, no --spec
      trainready spec show example:b200-reference
      trainready spec show fleet.toml > resolved.toml
    """
    from trainready.spec import load_spec

    s, source = load_spec(spec)
    if spec == "auto":
        typer.echo(f"# {source}")
    typer.echo(dump_toml(s), nl=False)


@spec_app.command("check")
def check(spec: str = typer.Argument(..., help="Spec file to validate.")) -> None:
    """Validate a spec strictly: exit 0 if it loads, else one line naming the file and key, exit 2.
    A valid setting that switches a judgement off (resume.rtol >= 1, fleet.nofile_min = 0, a compare metric
    set to "info") is listed under the ok line.

    Examples:

    \b
      trainready spec check fleet.toml
      trainready spec check example:h200-8x
    """
    from trainready.spec import load_spec

    from trainready.spec.disabled import disabled

    s, src = load_spec(spec)
    typer.echo(f"{src}: ok ({s.name})")
    for line in disabled(s):  # valid, but a judgement switched off: said, never silent
        typer.echo(f"  switches off: {line}")


def register(app: typer.Typer) -> None:
    app.add_typer(spec_app, name="spec")
