"""`cluster pairs --fabric` on the nodes: which NICs a node can test (the probe), and one pair's rails measured
with perftest's ib_write_bw (the pair's step, one task per node).

The probe (`trainready cluster rail-probe`, one task per node) writes RESULTS/pairs/fabric/probe/NODE.json
(trainready.railprobe/1): the RDMA ports sysfs shows (fabric/sysfs.py, at TRAINREADY_SYSFS_ROOT or /sys), whether
perftest is installed and built with CUDA, and for each port whether ib_write_bw can open it (its server started
for PROBE_S: one that is still listening can; "Did not detect devices" cannot).  A node with no perftest, no RDMA
port, or none ib_write_bw can open is "not tested (why)": never paired, never a pass, never a culprit.

A pair's step (`cluster pair-task --fabric`): task 0 (the first node, srun's block distribution) serves rail by
rail, task 1 connects and measures (perftest: the client measures), rail i on TCP port 18515 + i; the client writes
RESULTS/pairs/round-R/A__B.json (trainready.railpair/1): per rail the two NICs, ib_write_bw's BW average, the rate
it is held to (the slower port's sysfs rate), or why no figure, with the server's own words where it failed.
Planted (`cluster.rails=GBPS`): ib_write_bw is not run and every rail measures 0.98 x GBPS (a healthy NDR
ib_write_bw: ~392 of 400 Gb/s), x FACTOR on `cluster.nic_slow=NODE:RAIL[:FACTOR]`, on every rail of
`cluster.slow=NODE[:FACTOR]` (a slow node) and x 0.5 on `cluster.slow_link` nodes (a leaf switch).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from trainready.comm import perftest as pt
from trainready.util.listing import natural

PROBE_SCHEMA = "trainready.railprobe/1"
PAIR_SCHEMA = "trainready.railpair/1"
PROBE_S = 2.0  # an ib_write_bw server still up after this long has opened its device and listens
RAIL_S = 60.0  # one rail's run: 5000 x 64 KiB takes well under 1 s at 400 Gb/s; the rest is connection set-up
CONNECT_TRIES = 20  # the client's attempts while the server is not yet listening, CONNECT_WAIT_S apart
CONNECT_WAIT_S = 0.5
HEALTHY_SHARE = 0.98  # planted healthy figure, x the rate: ib_write_bw on NDR 400 prints ~392 Gb/s
SERVER_WAIT_S = 10.0  # the client waits this long for the server's record of a rail that failed


def probe_path(results: Path, node: str) -> Path:
    return results / "pairs" / "fabric" / "probe" / f"{node}.json"


def _nics(want: Mapping[str, float], root: Path | None = None) -> list[dict[str, Any]]:
    """The rails' NICs in order: the spec's compute NICs as it lists them, held to its rates (one it names that
    sysfs lacks is kept, `missing`: its rail has no figure); without them every RDMA port, names sorted naturally."""
    from trainready.fabric.sysfs import read_ports

    ports = [p for p in read_ports(root) if p.link_layer in ("InfiniBand", "Ethernet")]

    def key(p: Any) -> list[Any]:
        return [*natural(p.device), p.port]

    def row(p: Any, rate: float | None) -> dict[str, Any]:
        return {"nic": p.name, "device": p.device, "port": p.port, "rate_gbps": rate, "state": p.state,
                "link_layer": p.link_layer}

    if not want:
        return [row(p, p.rate_gbps) for p in sorted(ports, key=key)]
    out = []
    for dev, rate in want.items():
        mine = sorted((p for p in ports if p.device == dev), key=key)
        out += [row(p, rate) for p in mine] or [{"nic": f"{dev}:1", "device": dev, "port": 1, "rate_gbps": rate,
                                                "missing": "not in sysfs (class/infiniband)"}]
    return out


def _opens(nics: list[dict[str, Any]]) -> dict[str, str]:
    """NIC -> why ib_write_bw cannot open it ('' where its server listened PROBE_S)."""
    procs = {n["nic"]: subprocess.Popen(pt.argv(n["device"], n["port"], pt.TCP_PORT + i), stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True) for i, n in enumerate(nics)}
    deadline = time.monotonic() + PROBE_S
    while time.monotonic() < deadline and any(p.poll() is None for p in procs.values()):
        time.sleep(0.1)
    out = {}
    for nic, p in procs.items():
        if p.poll() is None:
            p.kill()
            p.communicate()
            out[nic] = ""
            continue
        so, se = p.communicate()
        o = pt.judge_output(so, se, p.returncode)
        out[nic] = o.untested or o.error or f"{pt.TOOL} exited {p.returncode} at once"
    return out


def probe(planted: bool, want: Mapping[str, float] | None = None, gpudirect: bool = False,
          root: Path | None = None) -> dict[str, Any]:
    """This node's probe record (without its name): what it can test, or why not.  `want`: the spec's compute
    NICs and rates (fabric.nics); `gpudirect`: the spec's fabric.gpudirect (ib_write_bw --use_cuda); `root`: the
    sysfs tree read (default: sysfs_root(); planted: cluster.sysfs)."""
    from trainready.fabric.root import sysfs_root

    root = sysfs_root() if root is None else root
    nics = _nics(want or {}, root)
    tool = pt.installed()
    doc: dict[str, Any] = {"schema": PROBE_SCHEMA, "perftest": tool, "nics": nics, "planted": planted,
                           "gpudirect": gpudirect}
    present = [n for n in nics if not n.get("missing")]
    if not present:
        return {**doc, "untested": f"no RDMA device ({root / 'class/infiniband'}: no port)"}
    if planted:
        return {**doc, "untested": None}
    if tool is None:
        return {**doc, "untested": f"perftest not installed (no {pt.TOOL} on PATH)"}
    doc.update(perftest_version=pt.version(), cuda=pt.has_cuda())
    if gpudirect and not doc["cuda"]:
        return {**doc, "untested": f"{pt.TOOL} was built without CUDA (its --help offers no --use_cuda): the spec "
                                   "asks for GPUDirect (fabric.gpudirect), not tested"}
    why = _opens(present)
    for n in present:
        n["opens"] = why[n["nic"]] or "yes"
    if all(why.values()):
        return {**doc, "untested": f"{pt.TOOL} opens none of {len(present)} RDMA port(s): {next(iter(why.values()))}"}
    return {**doc, "untested": None}


def run_probe_task(results: Path, plants: Mapping[str, str], spec_path: str | None) -> int:
    from trainready.cluster.tasks.layout import node_name
    from trainready.spec import load_spec
    from trainready.util.atomic import atomic_write_json

    fab = load_spec(spec_path)[0].fabric
    node = node_name()
    doc = probe("cluster.rails" in plants, fab.nics, fab.gpudirect, planted_root(plants))
    atomic_write_json(probe_path(results, node), {**doc, "node": node})
    return 0


def planted_root(plants: Mapping[str, str]) -> Path | None:
    """The sysfs tree `cluster.sysfs=PATH` names (a captured node's `sys/`, or the folder holding it), else None."""
    path = plants.get("cluster.sysfs")
    if not path:
        return None
    return Path(path) / "sys" if (Path(path) / "sys" / "class").is_dir() else Path(path)


def read_probe(results: Path, node: str) -> tuple[dict[str, Any] | None, str]:
    from trainready.cluster.tasks.layout import read_json

    return read_json(probe_path(results, node), PROBE_SCHEMA)


def rail_pairs(pa: Mapping[str, Any], pb: Mapping[str, Any]) -> list[tuple[int, Mapping[str, Any], Mapping[str, Any]]]:
    """(rail, A's NIC, B's NIC) for every index both nodes have."""
    return [(i, x, y) for i, (x, y) in enumerate(zip(pa.get("nics") or [], pb.get("nics") or []))]


def rate_of(x: Mapping[str, Any], y: Mapping[str, Any]) -> float | None:
    rates = [r for r in (x.get("rate_gbps"), y.get("rate_gbps")) if isinstance(r, (int, float)) and r > 0]
    return float(min(rates)) if rates else None


def planted_gbps(plants: Mapping[str, str], a: str, b: str, rail: int, rate: float | None) -> float:
    from trainready.cluster.plants import faults as fl

    base = float(plants["cluster.rails"]) if rate is None else rate
    f = HEALTHY_SHARE
    for node in (a, b):
        nf = fl.for_node(plants, node)
        f *= min(fl.nic_factor(plants, node, rail), nf.slow_factor or 1.0, 0.5 if nf.slow_link else 1.0)
    return base * f


def serve(pairs: Sequence[tuple[int, Mapping[str, Any], Mapping[str, Any]]], out: Path, gpudirect: bool) -> None:
    """Task 0: one ib_write_bw server per rail in turn; each rail's outcome kept in `out` as it ends."""
    got: dict[str, Any] = {}
    for i, x, y in pairs:
        if _gone(x, y):
            got[str(i)] = f"not run: {_gone(x, y)}"
            continue
        o = pt.run(pt.argv(x["device"], x["port"], pt.TCP_PORT + i, cuda=i if gpudirect else None), RAIL_S)
        got[str(i)] = o.untested or o.error or ""
        _write(out, {"schema": PAIR_SCHEMA + "+server", "rails": got})


def measure(pairs: Sequence[tuple[int, Mapping[str, Any], Mapping[str, Any]]], server: str,
            gpudirect: bool) -> list[pt.Outcome]:
    """Task 1: each rail's client, tried again while the server is not yet listening; with GPUDirect rail i's
    buffer is in GPU i's memory (--use_cuda=i: a rail-aligned server's GPU i sits under NIC i's PCIe switch)."""
    outs = []
    for i, x, y in pairs:
        if _gone(x, y):
            outs.append(pt.Outcome(error=_gone(x, y)))
            continue
        for _ in range(CONNECT_TRIES):
            o = pt.run(pt.argv(y["device"], y["port"], pt.TCP_PORT + i, server=server, cuda=i if gpudirect else None), RAIL_S)
            if o.error is None or "connect" not in o.error.lower() and "socket" not in o.error.lower():
                break
            time.sleep(CONNECT_WAIT_S)
        outs.append(o)
    return outs


def _gone(x: Mapping[str, Any], y: Mapping[str, Any]) -> str:
    """Why a rail cannot run: a NIC of it the spec names and sysfs lacks ('' when both are there)."""
    return "; ".join(f"{n['nic']} {n['missing']}" for n in (x, y) if n.get("missing"))


def _write(path: Path, doc: Mapping[str, Any]) -> None:
    from trainready.util.atomic import atomic_write_json

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, dict(doc))


def _server_words(path: Path, rail: int) -> str:
    deadline = time.monotonic() + SERVER_WAIT_S
    while time.monotonic() < deadline:
        try:
            words = json.loads(path.read_text()).get("rails", {})
        except (OSError, ValueError):
            words = {}
        if str(rail) in words:
            return str(words[str(rail)])
        time.sleep(0.5)
    return "the server side wrote nothing"


def figures(pairs: Sequence[tuple[int, Mapping[str, Any], Mapping[str, Any]]], outs: Sequence[pt.Outcome],
            server_file: Path) -> list[dict[str, Any]]:
    """The record's rails: figure (Gb/s) or why none, with the server's words where the client got no figure."""
    rows = []
    for (i, x, y), o in zip(pairs, outs):
        why = o.untested or o.error or ""
        if _gone(x, y):
            o, why = pt.Outcome(error=_gone(x, y)), _gone(x, y)
        if o.result is None:
            sw = _server_words(server_file, i)
            why = f"{why}; server: {sw}" if sw else why
        rows.append({"rail": i, "nic_a": x["nic"], "nic_b": y["nic"], "rate_gbps": rate_of(x, y),
                     "gbps": o.result.avg_gbps if o.result else None, "why": why,
                     **({"untested": o.untested} if o.untested else {})})
    return rows


def run_rail_pair(results: Path, record: Path, rnd: int, a: str, b: str, plants: Mapping[str, str]) -> int:
    """This task's side of the pair (a, b): SLURM_PROCID 0 serves, 1 measures and writes `record`."""
    from trainready.errors import UsageError

    rank = int(os.environ.get("SLURM_PROCID", "-1"))
    pa, why_a = read_probe(results, a)
    pb, why_b = read_probe(results, b)
    if rank not in (0, 1):
        raise UsageError("cluster pair-task --fabric: run by `trainready cluster pairs --fabric` as one srun step, "
                         "one task on each of two nodes")
    doc: dict[str, Any] = {"schema": PAIR_SCHEMA, "pair": [a, b], "round": rnd, "tool": pt.TOOL,
                           **({"planted": dict(plants)} if plants else {})}
    if pa is None or pb is None:
        if rank == 1:
            _write(record, {**doc, "rails": [], "why": why_a or why_b})
        return 0
    pairs = rail_pairs(pa, pb)
    gpudirect = bool(pa.get("gpudirect"))  # the spec's fabric.gpudirect, as the probe read it
    server_file = record.with_name(record.stem + ".server.json")
    if "cluster.rails" in plants:
        if rank == 1:
            rows = [{"rail": i, "nic_a": x["nic"], "nic_b": y["nic"], "rate_gbps": rate_of(x, y),
                     "gbps": None if _gone(x, y) else planted_gbps(plants, a, b, i, rate_of(x, y)), "why": _gone(x, y)}
                    for i, x, y in pairs]
            _write(record, {**doc, "rails": rows})
        return 0
    if rank == 0:
        serve(pairs, server_file, gpudirect)
        return 0
    server = os.environ.get("MASTER_ADDR") or a
    _write(record, {**doc, "rails": figures(pairs, measure(pairs, server, gpudirect), server_file)})
    return 0
