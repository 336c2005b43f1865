"""The cross-node step, on each node: one `srun` task per GPU (one per node on CPU); the node's first task
measures the clock against the submitting host, probes the shared storage, the open-files limit and the
/etc/hosts trap, then every task joins the multi-node collective through the comm module (env rendezvous).

Facts only: the verdicts are crosschecks.py's, on the submitting host, from every node's record.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from trainready.cluster.plants import faults as fl
from trainready.cluster.tasks.layout import CROSS_SCHEMA, cross_record, node_name, storage_probe
from trainready.util.atomic import atomic_write_json, atomic_write_text

CLOCK_ENV = "TRAINREADY_CLOCK_SERVER"  # host:port of the submitting host's clock server
POLL_S = 0.2
# cluster.switch_down: an interface name no host has (Linux names are at most 15 bytes), so gloo's device creation
# fails ("Unable to find address for: ...", gloo/transport/tcp/device.cc) as on a node whose switch is down
DOWN_IFNAME = "trdown-planted"


@dataclass(frozen=True)
class CrossOptions:
    results: Path
    spec: str | None
    plants: Mapping[str, str]
    collective: bool = True


def clock_facts(nf: fl.NodeFaults) -> dict[str, Any]:
    from trainready.cluster.tasks.clock import measure
    from trainready.manifest.host import time_sync

    daemons = time_sync().get("daemons")
    addr = os.environ.get(CLOCK_ENV)
    if not addr:
        return {"error": f"{CLOCK_ENV} not set (no clock server on the submitting host)", "daemons": daemons}
    try:
        s = measure(addr, clock=lambda: time.time() + nf.clock_ahead_s)
    except (OSError, ValueError) as exc:
        return {"error": f"cannot reach the submitting host's clock server {addr}: {exc}", "daemons": daemons}
    return {"offset_s": s.offset_s, "rtt_s": s.rtt_s, "server": addr, "daemons": daemons}


def limit_facts(nf: fl.NodeFaults) -> dict[str, Any]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if nf.nofile is not None:  # planted: really lower this task's limit, then read it back
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(nf.nofile, soft), hard))
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    inf = resource.RLIM_INFINITY
    return {"nofile_soft": -1 if soft == inf else soft, "nofile_hard": -1 if hard == inf else hard}


def hosts_facts(etc_hosts: str = "/etc/hosts") -> dict[str, Any]:
    """What this host's name resolves to, and whether /etc/hosts maps it to 127.0.1.1 (Debian's installer
    default, which makes NCCL/gloo bind to loopback)."""
    from trainready.manifest.host import resolve

    name = socket.gethostname()
    short = name.split(".")[0]
    trap: list[str] = []
    try:
        for line in Path(etc_hosts).read_text(encoding="utf-8", errors="replace").splitlines():
            fields = line.split("#", 1)[0].split()
            if len(fields) >= 2 and fields[0].startswith("127.") and fields[0] != "127.0.0.1" and \
                    ({name, short} & set(fields[1:])):
                trap.append(" ".join(fields))
    except OSError:
        pass
    return {"hostname": name, "resolves_to": resolve(name), "etc_hosts_loopback_lines": trap}


Written = Callable[[dict[str, Any]], None]


def storage_facts(results: Path, node: str, peers: list[str], wait_s: float, nf: fl.NodeFaults,
                  written: Written | None = None) -> dict[str, Any]:
    """Write RESULTS/cross/storage/NODE (node, st_dev, time), then read every peer's, waiting until wait_s
    passes with no new one.  `written` is told the facts so far ("waiting": true) once the file is written: the
    wait can last minutes, and a step that ends during it must not lose what this node found."""
    if not nf.storage:
        return _storage_facts(results, node, peers, wait_s, written)
    # planted: a private directory on another filesystem (/dev/shm is tmpfs) stands in for --results; removed after
    base = Path(tempfile.mkdtemp(prefix="trainready-private-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    try:
        return _storage_facts(base, node, peers, wait_s, written)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _storage_facts(base: Path, node: str, peers: list[str], wait_s: float, written: Written | None) -> dict[str, Any]:
    mine = storage_probe(base, node)
    try:
        mine.parent.mkdir(parents=True, exist_ok=True)
        dev = os.stat(base).st_dev
        at = time.time()  # s since the epoch, this node's clock (cluster.clock holds it within 1 s)
        atomic_write_text(mine, json.dumps({"node": node, "st_dev": dev, "written_at": at}))
    except OSError as exc:
        return {"error": f"cannot write {mine}: {exc.strerror}", "seen": {}, "st_dev": None}
    facts = {"path": str(mine), "st_dev": dev, "written_at": at, "wait_s": wait_s}
    if written is not None:
        written({**facts, "waiting": True})
    seen = _peers_seen(mine.parent, peers, wait_s)
    # written_at / looked_until let the judge excuse a peer whose file appeared only after this node stopped looking
    return {**facts, "seen": seen, "looked_until": time.time()}


def _peers_seen(folder: Path, peers: list[str], wait_s: float) -> dict[str, Any]:
    """Each peer's st_dev from its probe file in `folder` (None: never seen).  The wait ends wait_s after the
    last new file appeared, not wait_s after this task began: the step's tasks start over minutes when a
    fleet's worth of them share a host (640 on 2 cores: ~300 s), and a peer not started yet is not a storage
    fault.  One listing of the folder per poll, each new file read once: no stat per peer per poll on the
    shared filesystem's metadata server."""
    names = {storage_probe(Path(), peer).name: peer for peer in peers}  # the file is named after its node
    seen: dict[str, Any] = {}
    deadline = time.monotonic() + wait_s
    while len(seen) < len(peers):
        before = len(seen)
        try:
            present = [n for n in os.listdir(folder) if n in names and names[n] not in seen]
        except OSError:
            present = []
        for name in present:
            try:
                seen[names[name]] = json.loads((folder / name).read_text(encoding="utf-8")).get("st_dev")
            except (OSError, ValueError):
                continue  # listed before its rename completed here: read at the next poll
        if len(seen) > before:
            deadline = time.monotonic() + wait_s
        elif time.monotonic() > deadline:
            break
        if len(seen) < len(peers):
            time.sleep(POLL_S)
    return {peer: seen.get(peer) for peer in peers}


def step_nodes() -> list[str]:
    from trainready.ranks.env import expand_hostlist

    text = os.environ.get("SLURM_STEP_NODELIST") or os.environ.get("SLURM_JOB_NODELIST") or node_name()
    return expand_hostlist(text)


def run(opts: CrossOptions) -> int:
    """This task's part of the cross-node step; 0 unless the collective failed on this rank."""
    from trainready.spec import load_spec

    spec, source = load_spec(opts.spec)
    node = node_name()
    nf = fl.for_node(opts.plants, node)
    if nf.vanish:  # planted: this node's task ends at once, with no cross record and no rank in the collective
        return 1
    first_on_node = os.environ.get("SLURM_LOCALID", os.environ.get("LOCAL_RANK", "0")) == "0"  # srun, or torchrun
    rank = int(os.environ.get("SLURM_PROCID", os.environ.get("RANK", "0")))
    doc: dict[str, Any] = {"schema": CROSS_SCHEMA, "node": node, "rank": rank}
    if first_on_node:
        peers = [p for p in step_nodes() if p != node]
        doc.update(clock=clock_facts(nf), limits=limit_facts(nf), hosts=hosts_facts())
        if opts.plants:
            doc["planted"] = dict(opts.plants)

        def keep(storage: dict[str, Any]) -> None:  # the record so far, before the storage wait's minutes
            atomic_write_json(cross_record(opts.results, node), {**doc, "storage": storage})
        doc["storage"] = storage_facts(opts.results, node, peers, spec.fleet.storage_wait_s, nf, keep)
        atomic_write_json(cross_record(opts.results, node), doc)  # before the collective: a hang must not lose it
    if not opts.collective:
        return 0
    from trainready.cluster.tasks.collective import run_collective

    def on_fail(fail: Any) -> None:
        """This rank's blame record (blame.py), and its node's cross record says so too."""
        from trainready.cluster.tasks import blame

        det = dict(fail.details)
        rec = {"schema": blame.RANK_SCHEMA, "node": node, "rank": rank, "status": fail.status.value,
               "stage": det.get("stage"), "error": det.get("error"), **blame.from_details(det)}
        atomic_write_json(blame.rank_file(opts.results, rank), rec)
        if first_on_node:
            atomic_write_json(cross_record(opts.results, node), {**doc, "collective": rec})

    if nf.switch_down:  # planted: no interface reaches a peer, so gloo's (NCCL's) set-up fails for real
        os.environ["GLOO_SOCKET_IFNAME"] = os.environ["NCCL_SOCKET_IFNAME"] = DOWN_IFNAME
    rc, summary = run_collective(spec, source, opts.results, silent=nf.silent, on_fail=on_fail)
    if first_on_node:
        doc["collective"] = summary
        atomic_write_json(cross_record(opts.results, node), doc)
    return rc
