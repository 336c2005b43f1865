"""The image record in `cluster run --container-image`: every node's copy is held to the record's sha256 (not
only to the other nodes'), the fleet and node records carry the image's reference, digest and sha256, and a
registry reference for more than a few nodes is warned about (every node would pull it on its own)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, Sequence, TypeVar

from trainready.errors import UsageError
from trainready.image.record import for_file, record_path

class NodeRecord(Protocol):
    """What the check reads of a node's verdict input (cluster/verdict.NodeInput, a frozen dataclass): this module
    does not import the cluster package, which imports it."""

    node: str
    record: Mapping[str, Any] | None


N = TypeVar("N", bound=NodeRecord)
FEW_NODES = 4  # above this many nodes, a registry reference gets the warning


def record_facts(image: str | None, given: str | None) -> dict[str, Any] | None:
    """The facts of --image-record FILE, or of the record beside the image file where there is one; None for a
    file without a record, or a registry reference (then --image-record is a usage error)."""
    if not image:
        if given:
            raise UsageError("--image-record needs --container-image (the file the record describes)")
        return None
    if not image.startswith(("/", "./", "../")):
        if given:
            raise UsageError(f"--image-record {given}: --container-image {image} is a registry reference, not a file "
                             "(import it with `trainready image import`, distribute it, and give that file)")
        return None
    sqsh = Path(image)
    if not given and not record_path(sqsh).is_file():
        return None
    return for_file(sqsh, given).facts()


def warn_registry(image: str | None, nodes: int, say: Callable[[str], None]) -> None:
    if image and not image.startswith(("/", "./", "../")) and nodes > FEW_NODES:
        say(f"warning: --container-image {image} is a registry reference: Pyxis imports it on every node on its own "
            f"({nodes} pulls, no checksum); import it once with `trainready image import`, copy it with "
            "`trainready image distribute` and give the .sqsh (docs/image.md)")


def node_sha(ni: NodeRecord) -> str | None:
    cont = (ni.record or {}).get("container") or {}
    return cont.get("image_sha256") if isinstance(cont, Mapping) else None


def against_record(inputs: Sequence[N], facts: Mapping[str, Any] | None) -> list[N]:
    """A node whose copy's sha256 is not the record's is rejected ('image differs'), naming both sums."""
    if not facts:
        return list(inputs)
    out = []
    for ni in inputs:
        sha = node_sha(ni)
        if ni.record is not None and sha != facts["sha256"]:
            why = (f"image differs: {sha or '(no readable file)'} on this node vs {facts['sha256']} "
                   f"(record {facts['record']})")
            ni = dataclasses.replace(ni, record=None, no_result=why, cause="image differs")
        out.append(ni)
    return out
