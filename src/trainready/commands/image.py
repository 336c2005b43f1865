"""`trainready image import/distribute`: the image every node runs, pinned, checksummed and copied before
`cluster run --container-image` (docs/image.md)."""

from __future__ import annotations

import sys

import typer

from trainready.errors import UsageError

app = typer.Typer(
    help=(
        "The container image before `cluster run`: import a registry image pinned by digest into one squashfs "
        "with its record (enroot), then copy that one file to every node through Slurm (docs/image.md).\n\n"
        "Examples:\n\n\b\n"
        "  trainready image import 'nvcr.io#nvidia/pytorch@sha256:0123...' --out /lustre/images/\n"
        "  trainready image distribute /lustre/images/nvidia+pytorch+0123.sqsh -p gpu --dest /local/images\n"
        "  trainready cluster run -p gpu --container-image /local/images/nvidia+pytorch+0123.sqsh \\\n"
        "      --image-record /lustre/images/nvidia+pytorch+0123.sqsh.json"
    ),
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def say(line: str) -> None:
    sys.stderr.write(f"trainready image: {line}\n")


@app.command("import")
def import_cmd(
    reference: str = typer.Argument(..., metavar="REF", help="REGISTRY#IMAGE@sha256:DIGEST or docker://[USER@]REGISTRY#IMAGE@sha256:DIGEST."),
    out: str = typer.Option(None, "--out", "-o", help="Folder (the file is named from the image and its digest) or FILE.sqsh. Default: here."),
    resolve: bool = typer.Option(False, "--resolve", help="A tag is resolved to its digest first (enroot digest); both are recorded."),
    json_path: str = typer.Option(None, "--json", help="Also write the record to this path; '-' prints it to stdout."),
) -> None:
    """Import a registry image pinned by digest into one squashfs with `enroot import`, and record it beside.

    The registry's manifest must hash to the pin (enroot checks the layers, this checks the manifest);
    SOURCE_DATE_EPOCH is set (default 0) so the same image gives the same bytes.  Writes NAME.sqsh and
    NAME.sqsh.json (trainready.image/1: reference, digest, tag, sha256 and size, layers, enroot version and
    squash options, import time).  A failed or interrupted import leaves neither; an existing NAME.sqsh with
    another sha256 is never overwritten.  Exit 0 imported (or already there), 1 failed, 2 bad input.

    \b
      trainready image import 'docker://registry.example#team/train@sha256:0123...' --out /lustre/images
      trainready image import 'nvcr.io#nvidia/pytorch:25.01-py3' --resolve --out /lustre/images
    """
    from trainready.commands.common import write_json_doc
    from trainready.image.importer import import_image

    got = import_image(reference, out, resolve, say)
    d = got.doc
    verb = "imported" if got.fresh else "already there (same sha256)"
    typer.echo(f"{verb}: {got.sqsh}  {d['sha256']}  {d['size_bytes']} bytes  {d['import_s']:.1f} s")
    typer.echo(f"record: {got.record}  ({d['reference']})")
    if json_path:
        write_json_doc(d, json_path, None)


@app.command("distribute")
def distribute_cmd(
    sqsh: str = typer.Argument(..., metavar="FILE.sqsh", help="The squashfs `image import` wrote (its record beside it)."),
    dest: str = typer.Option(..., "--dest", help="Folder on each node's local storage (absolute); %n = the node's name."),
    nodes: int = typer.Option(None, "--nodes", "-N", help="The first N usable nodes of the partition (default: all)."),
    nodelist: str = typer.Option(None, "--nodelist", "-w", help="Slurm hostlist expression, e.g. gpu[001-640]."),
    partition: str = typer.Option(None, "--partition", "-p", help="Slurm partition."),
    via: str = typer.Option("copy", "--via", help="copy: each node reads the file from the shared file system; sbcast: sbcast(1) sends it down Slurm's tree."),
    image_record: str = typer.Option(None, "--image-record", help="The image record (default: FILE.sqsh.json beside the file)."),
    json_path: str = typer.Option(None, "--json", help="The distribution record (default: FILE.sqsh.distribution.json beside the file); '-' prints it."),
    lock_wait: int = typer.Option(3600, "--lock-wait", help="Seconds a node waits for another distribution of the same file to finish."),
) -> None:
    """Copy one imported squashfs to every node's local storage through Slurm, checked against its record.

    Each node writes a temporary name and renames it only after its own sha256 of the copy matches the
    record; a node that already holds that sha256 is skipped; a copy with another sha256 is replaced.  Per
    node: copied / already there / failed, with the copy's own words; a failed node is not ready, never
    drained.  A lock per node and file keeps two distributions of one file from clobbering each other; a
    rerun finishes an interrupted one.  Prints and records bytes, seconds and GB/s per node and overall.
    Exit 0 every node ready, 1 a node is not, 2 bad input.

    \b
      trainready image distribute /lustre/images/train+0123.sqsh -p gpu --dest /local/images
      trainready image distribute img.sqsh -w gpu[001-640] --dest /local/images --via sbcast
    """
    from pathlib import Path

    from trainready.cluster.options import FleetOptions
    from trainready.cluster.steps import select_nodes
    from trainready.commands.common import write_json_doc
    from trainready.distribute import nodes as dist
    from trainready.image.record import for_file

    src = Path(sqsh).expanduser().resolve()
    if not src.is_file():
        raise UsageError(f"{sqsh}: no such file (expected the .sqsh that `trainready image import` wrote)")
    dist.check_dest(dest, via)
    job = dist.Job(src, for_file(src, image_record), dest, via, partition, lock_wait)
    sel = select_nodes(FleetOptions(results=Path("."), nodelist=nodelist, count=nodes, partition=partition))
    out = dist.distribute(job, sel, say)
    doc = out.doc()
    for r in out.results:
        typer.echo(line(r.doc()))
    typer.echo(f"{len(doc['ready'])}/{len(out.results)} node(s) ready; {doc['bytes']} bytes in {doc['wall_s']:.1f} s"
               + (f" ({doc['gb_per_s']:.3f} GB/s overall)" if doc["gb_per_s"] else ""))
    write_json_doc(doc, json_path or f"{src}.distribution.json", None)
    if doc["not_ready"]:
        raise typer.Exit(1)


def line(r: dict) -> str:  # type: ignore[type-arg]
    """One node's line: 'node1: copied 4096 bytes in 0.1 s (0.04 GB/s)', 'node2: failed: <the copy's words>'."""
    if r["status"] == "copied":
        rate = f" ({r['gb_per_s']:.3f} GB/s)" if r["gb_per_s"] else ""
        extra = f"; {r['words']}" if r["words"] else ""
        return f"{r['node']}: copied {r['bytes']} bytes in {r['seconds']:.1f} s{rate}{extra}"
    if r["status"] == "already":
        return f"{r['node']}: already there (same sha256)"
    return f"{r['node']}: not ready: {r['words']}"


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="image", short_help="The container image before `cluster run`: import it pinned by digest "
                   "into one checksummed squashfs (enroot), distribute that file to every node (Slurm).")
