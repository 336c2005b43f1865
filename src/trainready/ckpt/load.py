"""Load a checkpoint only after proving it whole: `latest` → ``step-N/`` →
manifest → sha256 of every file (split across ranks) → DCP load → set_state_dict.
Anything missing, half-written or corrupted is a `CheckpointError` naming the file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

from trainready.ckpt import manifest
from trainready.ckpt.save import LATEST, gather_to_all
from trainready.errors import CheckpointError


def resolve_latest(root: Path) -> Path:
    """The directory `latest` names; never a ``*.tmp`` directory."""
    root = Path(root)
    pointer = root / LATEST
    if not pointer.is_file():
        raise CheckpointError(f"{root}: no '{LATEST}' pointer: no complete checkpoint was ever saved here")
    name = pointer.read_text().strip()
    if not name.startswith("step-") or name.endswith(".tmp") or "/" in name:
        raise CheckpointError(f"{pointer}: names '{name}', expected 'step-N'")
    target = root / name
    if not target.is_dir():
        raise CheckpointError(f"{pointer}: names '{name}', which does not exist")
    return target


def verify(directory: Path, rank: int = 0, world_size: int = 1) -> dict[str, Any]:
    """Every rank checks 1/world of the files; all ranks raise the same error on any problem."""
    try:
        man = manifest.read(directory)
        names = sorted(man["files"])
        problems = manifest.verify_files(directory, man, names[rank::world_size])
    except CheckpointError as exc:
        man, problems = {}, [str(exc)]
    every = [p for part in gather_to_all(problems) for p in part]
    if every:
        more = f" (+{len(every) - 1} more)" if len(every) > 1 else ""
        raise CheckpointError(f"checkpoint {directory.name} rejected: {every[0]}{more}")
    return man


def load_checkpoint(
    directory: Path,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    rank: int = 0,
    world_size: int = 1,
) -> dict[str, Any]:
    """Collective. Verifies, loads model + optimizer in place; returns this rank's train state."""
    man = verify(directory, rank, world_size)
    if man.get("world_size") != world_size:
        raise CheckpointError(
            f"{directory}: saved by {man.get('world_size')} ranks, loading with {world_size}: "
            "per-rank data positions cannot be mapped"
        )
    msd, osd = get_state_dict(model, optimizer)
    state = {"model": msd, "optim": osd}
    dcp.load(state, checkpoint_id=str(directory))
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
    path = directory / f"train-rank-{rank}.json"
    try:
        return json.loads(path.read_text())  # type: ignore[no-any-return]
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{path}: unreadable train state ({exc})") from None
