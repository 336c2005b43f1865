"""Text a node wrote, made safe to pass on: control characters and invalid code points replaced, length bounded.

A node's record, progress and cross-node files are read by the host that judges the fleet, and their strings go
on to Slurm (a drain reason is an argv element: execve(2) refuses a NUL byte), to the Prometheus textfile (UTF-8:
a lone surrogate cannot be encoded), to HTML, JSON and the operator's terminal (ESC starts an ANSI escape
sequence, BEL rings).  So every string read from a node's file is cleaned once, where it is read
(cluster/tasks/layout.py `read_json`), before anything acts on it:

* C0 controls (U+0000-U+001F) but TAB and LF, DEL (U+007F), C1 controls (U+0080-U+009F), lone surrogates
  (U+D800-U+DFFF, which JSON's `\\ud800` escape can carry) and the non-characters U+FFFE/U+FFFF become U+FFFD,
  the Unicode replacement character;
* a string longer than TEXT_MAX characters is cut there, saying how much was cut.

Mapping keys are cleaned like values.  Numbers, booleans and None pass as they are.
"""

from __future__ import annotations

import re
from typing import Any

TEXT_MAX = 8192  # characters per string; the longest in a captured 1x H200 manifest: 2,165 (NVIDIA_REQUIRE_CUDA)
REPLACEMENT = "\ufffd"
_BAD = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def clean(text: str, limit: int = TEXT_MAX) -> str:
    """`text` with every control character and invalid code point replaced, at most `limit` characters (+ a
    note of what was cut)."""
    out = _BAD.sub(REPLACEMENT, text)
    if len(out) > limit:
        out = f"{out[:limit]}... ({len(out) - limit} more characters)"
    return out


def clean_line(text: str, limit: int = TEXT_MAX) -> str:
    """As `clean`, on one line: TAB and LF become spaces too (a drain reason, a terminal line, a label)."""
    return clean(text.replace("\n", " ").replace("\t", " "), limit)


def clean_tree(doc: Any) -> Any:
    """A JSON document with every string in it (keys too) cleaned; other values unchanged."""
    if isinstance(doc, str):
        return clean(doc)
    if isinstance(doc, dict):
        return {clean(str(k)): clean_tree(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [clean_tree(v) for v in doc]
    return doc
