"""Findings named in one line: a record's message names the first few, its details hold them all."""

from __future__ import annotations

from typing import Sequence


def first_of(found: Sequence[str], most: int) -> str:
    """The first `most` of `found`, '; '-joined, then how many more there are: 'a; b (+3 more)'."""
    return "; ".join(found[:most]) + (f" (+{len(found) - most} more)" if len(found) > most else "")
