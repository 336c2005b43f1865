"""`trainready image import/distribute`: the image every node runs, pinned, checksummed and copied before
`cluster run --container-image` (docs/image.md)."""

from __future__ import annotations

import sys

import typer

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


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="image", short_help="The container image before `cluster run`: import it pinned by digest "
                   "into one checksummed squashfs (enroot), distribute that file to every node (Slurm).")
