"""`trainready bundle`: the handoff bundle a colleague re-runs and judges the environment from."""

from __future__ import annotations

import typer


def bundle(
    out: str = typer.Argument(None, help="The bundle to write: a new directory, or OUT.tar.gz. With --verify: the bundle to check. With --rma: where (default RESULTS/rma/NODE)."),
    records: list[str] = typer.Argument(None, help="Records to include (--json of node, comm, resume, plan, env, cluster run, compare, selftest)."),
    add: list[str] = typer.Option(None, "--add", help="Add a file or folder: [ROLE=]PATH, ROLE one of lock, recipe, config, tokenizer, data, log, services, previous, notes (guessed from the name when left out)."),
    log: list[str] = typer.Option(None, "--log", help="Add a test or job log."),
    data: list[str] = typer.Option(None, "--data", help="Sample data to checksum (files or a folder; not copied). The resume records' token files are checksummed anyway."),
    checkpoint: list[str] = typer.Option(None, "--checkpoint", help="Checkpoint folder whose manifest.json files (every file's sha256) go into the bundle."),
    spec: str = typer.Option(None, "--spec", "-s", help="Also include this spec file (the records' own specs are always included)."),
    no_env: bool = typer.Option(False, "--no-env", help="Do not collect this machine's manifest (when no env record is given)."),
    verify_only: bool = typer.Option(False, "--verify", help="Re-check every checksum of the bundle OUT; name each changed, missing or extra file."),
    rma: str = typer.Option(None, "--rma", metavar="NODE", help="The RMA evidence of NODE from the records under --results (RESULTS/rma/NODE/); run on NODE itself (srun -w NODE) it adds the kernel log's XIDs, nvidia-bug-report.sh and dcgmi diag -r 3 where they exist."),
    results: str = typer.Option(None, "--results", "-r", help="With --rma: the --results of the fleet runs and sweeps."),
    bug_report_s: float = typer.Option(300.0, "--bug-report-timeout", help="With --rma on the node: seconds nvidia-bug-report.sh may take."),
    dcgm_s: float = typer.Option(1800.0, "--dcgm-timeout", help="With --rma on the node: seconds dcgmi diag -r 3 may take."),
) -> None:
    """Assemble a handoff bundle: the manifest, every record, the specs that judged them, the
    exact commands run, trainready's version, logs, sample-data and checkpoint-manifest checksums,
    and your files; a top-level INDEX.md and index.json list every item with its sha256 and what
    it is for, as the handoff records table.  Secrets stay redacted.  A planted (test) record is
    refused.  --verify: exit 0 intact, 1 changed/missing/extra files, 2 not a bundle.

    Examples:

    \b
      trainready bundle handoff.tar.gz node.json comm.json resume.json \\
        --add uv.lock --add Dockerfile
      trainready bundle handoff/ node.json --add config=train.yaml \\
        --add tokenizer=tok/ --log slurm-123.out
      trainready bundle --verify handoff.tar.gz
      trainready bundle --rma gpu017 --results /lustre/fleet   # docs/repair.md
    """
    from pathlib import Path

    from rich.console import Console

    from trainready.commands.common import invocation
    from trainready.errors import UsageError

    console = Console(stderr=True)
    if rma is not None or results is not None:
        raise typer.Exit(_rma(rma, results, out, records, (bug_report_s, dcgm_s), console))
    if out is None:
        raise UsageError("trainready bundle: give OUT (the bundle to write, or with --verify the one to check), "
                         "or --rma NODE --results RESULTS")
    if verify_only:
        raise typer.Exit(_verify(Path(out), records, console))
    from trainready.bundle.build import BundleOptions, build
    from trainready.bundle.layout import parse_add

    _check_paths((("--log", log), ("--data", data), ("--checkpoint", checkpoint)))
    opts = BundleOptions(
        out=Path(out.rstrip("/")).expanduser(), records=tuple(records or ()), adds=tuple(parse_add(a) for a in add or []),
        logs=tuple(Path(p) for p in log or []), data=tuple(Path(p) for p in data or []),
        checkpoints=tuple(Path(p) for p in checkpoint or []), spec=spec, collect_env=not no_env, argv=tuple(invocation()))
    with console.status("bundle") as status:
        doc = build(opts, progress=lambda m: status.update(m))
    console.print(f"bundle written to {opts.out}: {len(doc['items'])} files, {len(doc['referenced'])} referenced by "
                  f"checksum; see INDEX.md; check it with: trainready bundle --verify {opts.out}")


def _verify(path, extra_args, console) -> int:  # type: ignore[no-untyped-def]
    from trainready.bundle.verify import verify
    from trainready.errors import UsageError

    if extra_args:
        raise UsageError(f"--verify takes one bundle; also got {' '.join(extra_args)}")
    v = verify(path)
    for label, names in (("changed", v.changed), ("missing", v.missing), ("extra", v.extra)):
        for n in names:
            console.print(f"{label}: {n}", highlight=False)
    if v.ok:
        console.print(f"bundle {path}: intact ({v.checked} files, every sha256 matches)")
        return 0
    console.print(f"bundle {path}: NOT intact ({len(v.changed)} changed, {len(v.missing)} missing, "
                  f"{len(v.extra)} extra of {v.checked} listed)")
    return 1


def _check_paths(given) -> None:  # type: ignore[no-untyped-def]
    from pathlib import Path

    from trainready.errors import UsageError

    for flag, paths in given:
        for p in paths or []:
            if not Path(p).exists():
                raise UsageError(f"{flag} {p}: no such file or directory")


def _rma(node, results, out, extra, limits, console) -> int:  # type: ignore[no-untyped-def]
    from pathlib import Path

    from trainready.cluster.repair.rma import on_demand
    from trainready.cluster.tasks.layout import node_name
    from trainready.commands.common import invocation
    from trainready.errors import UsageError

    if not node or not results:
        raise UsageError("--rma NODE and --results RESULTS go together (the node's evidence from the records there)")
    if extra:
        raise UsageError(f"--rma takes no records; also got {' '.join(extra)}")
    if not Path(results).is_dir():
        raise UsageError(f"--results {results}: no such folder")
    here = node_name() == node
    done = on_demand(Path(results), node, Path(out) if out else None, invocation(), here, *limits)
    console.print(f"RMA evidence of {node} written to {done}" + ("" if here else f" from the records (this is not "
                  f"{node}: its kernel log and vendor tools are collected on it, see INDEX.md)") +
                  f"; check it with: trainready bundle --verify {done}")
    return 0


def register(app: typer.Typer) -> None:
    app.command("bundle")(bundle)
