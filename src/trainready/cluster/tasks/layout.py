"""Where a fleet run keeps its files, and their schemas.  RUN is the run's own folder, RESULTS/runs/ID/
(history.py: every run and resume has one; RESULTS/fleet.json is the latest verdict with the earlier runs).

Every per-node file is named by the Slurm node name ($SLURMD_NODENAME), never the hostname: several
Slurm nodes may share a host (the local test cluster), and a node name is what `scontrol` acts on.

    RUN/nodes/NODE.json         node record (trainready.fleetnode/1): the node report + manifest
    RUN/cross/NODE.json         cross-node record of NODE (trainready.fleetcross/1)
    RUN/cross/storage/NODE      the shared-storage probe file NODE wrote
    RUN/cross/comm.json         the multi-node collective's report (rank 0)
    RUN/fleet.json              the run's fleet verdict (trainready.fleet/1)
    RUN/logs/                   Slurm's output of each task and of the cross-node step
    RUN/job/                    the batch script as submitted
    RESULTS/fleet.json          the latest verdict, with "run" and "history"
    RESULTS/drain-ledger.jsonl  who drained / resumed which node, when, why, with which record
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

NODE_SCHEMA = "trainready.fleetnode/1"
CROSS_SCHEMA = "trainready.fleetcross/1"
FLEET_SCHEMA = "trainready.fleet/1"
LEDGER = "drain-ledger.jsonl"


def node_name() -> str:
    """This task's Slurm node name ($SLURMD_NODENAME), else the short host name (outside Slurm)."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def node_record(results: Path, node: str) -> Path:
    return results / "nodes" / f"{node}.json"


def cross_record(results: Path, node: str) -> Path:
    return results / "cross" / f"{node}.json"


def storage_probe(results: Path, node: str) -> Path:
    return results / "cross" / "storage" / node


def read_json(path: Path, schema: str) -> tuple[dict[str, Any] | None, str]:
    """(document, '') or (None, why not): missing, unreadable, not JSON, or another schema.  A node wrote it: every
    string in it is cleaned here, once (util/nodetext.py), before the fleet's judge, Slurm or a report sees it."""
    from trainready.util.nodetext import clean_tree

    try:
        doc = clean_tree(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return None, f"no record at {path}"
    except OSError as exc:
        return None, f"{path}: unreadable ({exc.strerror})"
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, f"{path}: not JSON ({str(exc).splitlines()[0]})"
    if not isinstance(doc, dict) or doc.get("schema") != schema:
        got = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        return None, f"{path}: schema {got!r}, expected {schema!r}"
    return doc, ""
