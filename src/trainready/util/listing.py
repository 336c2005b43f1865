"""Names listed: findings in one line (a record's message names the first few, its details hold them all), and
names in natural order (node2 before node10, mlx5_2 before mlx5_10, as Slurm's hostlists and `ibstat` order them)."""

from __future__ import annotations

import re
from typing import Sequence


def first_of(found: Sequence[str], most: int) -> str:
    """The first `most` of `found`, '; '-joined, then how many more there are: 'a; b (+3 more)'."""
    return "; ".join(found[:most]) + (f" (+{len(found) - most} more)" if len(found) > most else "")


def natural(name: str) -> list[int | str]:
    """Sort key: `name` split into its digit runs (as integers) and the text between: node2 < node10."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]
