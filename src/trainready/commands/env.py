"""`trainready env`: the manifest a colleague needs to reproduce this machine."""

from __future__ import annotations


import typer
from rich.console import Console

from trainready.commands.common import check_out_path, write_json_doc


def env(
    json_path: str = typer.Option(None, "--json", help="Write the manifest as JSON to this path (atomically); '-' prints it to stdout and the summary to stderr."),
    code: str = typer.Option(None, "--code", help="Training-code checkout: record its git commit and whether the tree is dirty."),
    lock: str = typer.Option(None, "--lock", help="Lock file (uv.lock, requirements.txt, ...): record its sha256."),
    image_digest: str = typer.Option(None, "--image-digest", help="Container image digest (sha256:...); default: env TRAINREADY_IMAGE_DIGEST."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No readable summary (with --json)."),
    capture_fabric: str = typer.Option(None, "--capture-fabric", help="Also copy the sysfs files the fabric check "
                                       "reads into DIR/sys and NVML's, systemd's and /proc's answers into "
                                       "DIR/node.json: replay with TRAINREADY_SYSFS_ROOT=DIR/sys or "
                                       "`node --plant fabric.replay=DIR` (docs/fabric.md)."),
) -> None:
    """Record this machine: host, GPUs (NVML), software chain, container, code, InfiniBand, env vars.

    Every field that cannot be read says why ("unavailable: no NVIDIA driver"); env
    vars that look secret (TOKEN, SECRET, KEY, PASSWORD, ..., or token-shaped values)
    are redacted.  Exit 0 once recorded; 2 on bad input.  Judging is `trainready node`'s job.

    Examples:

    \b
      trainready env                             # readable summary
      trainready env --json env.json             # summary + manifest file
      trainready env --json - -q | jq .gpu.nvml  # JSON only, to stdout
      trainready env --code ~/Megatron-LM --lock uv.lock \\
          --image-digest sha256:0123...
      trainready env -q --capture-fabric node07-fabric  # to send
    """
    from trainready.manifest.build import collect
    from trainready.manifest.render import print_summary

    check_out_path(json_path)
    manifest = collect(code_path=code, lock_file=lock, image_digest=image_digest)
    console = Console(stderr=json_path == "-")
    if not quiet:
        print_summary(manifest, console)
    if json_path:
        write_json_doc(manifest, json_path, None if quiet else console, "manifest")
    if capture_fabric:
        from pathlib import Path

        from trainready.fabric.capture import capture
        from trainready.fabric.root import sysfs_root

        Console(stderr=True).print(f"fabric captured: {capture(Path(capture_fabric), sysfs_root())}")


def register(app: typer.Typer) -> None:
    app.command("env")(env)
