"""The rails in `cluster run`'s cross-node step: each node paired once with its neighbour (nodes in Slurm's order,
1+2, 3+4, ...), NIC i to NIC i with perftest's ib_write_bw (rails.py's probe, server and client), each rail held
to the spec's `fabric.rail_fraction` (0.8: the documents' 80%) x its rate.

One pairing cannot tell which of two nodes is slow, so a rail below the floor is a WARN on both nodes of the pair
naming the rail, the NICs and the figure, never a rejection: `cluster pairs --fabric` re-pairs and names the node
and NIC.  A node that cannot test (no perftest, no RDMA port, its partner could not, an odd node out) is "not
tested (why)": a WARN where the spec names compute NICs (`[fabric] nics`), said in the fleet row otherwise (a CPU
fleet has none to test).  The node's part goes into its cross record (`rails`); the judgment here is pure.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from trainready.cluster.tasks import rails as rl
from trainready.cluster.tasks.crosschecks import Finding
from trainready.records import CheckResult, Level, Status
from trainready.util.listing import natural

POLL_S = 1.0


def probe_file(results: Path, node: str) -> Path:
    return results / "cross" / "rails" / f"{node}.probe.json"


def partner(nodes: Sequence[str], node: str) -> tuple[str | None, int]:
    """(its partner, 0 serve / 1 measure) in the matching 1+2, 3+4, ... over the nodes in natural order."""
    order = sorted(set(nodes), key=natural)
    i = order.index(node)
    j = i + 1 if i % 2 == 0 else i - 1
    return (order[j], i % 2) if j < len(order) else (None, 0)


def _wait_probe(results: Path, mate: str, wait_s: float) -> dict[str, Any] | None:
    from trainready.cluster.tasks.layout import read_json

    deadline = time.monotonic() + wait_s
    while True:
        doc, _ = read_json(probe_file(results, mate), rl.PROBE_SCHEMA)
        if doc is not None or time.monotonic() >= deadline:
            return doc
        time.sleep(POLL_S)


def node_part(results: Path, node: str, nodes: Sequence[str], spec: Any, plants: Mapping[str, str],
              wait_s: float) -> dict[str, Any]:
    """This node's part: its probe, then (with its partner) the rails served or measured; the `rails` entry of
    its cross record."""
    from trainready.util.atomic import atomic_write_json

    fab = spec.fabric
    planted = "cluster.rails" in plants
    mine = {**rl.probe(planted, fab.nics, fab.gpudirect, rl.planted_root(plants)), "node": node, "host": socket.gethostname()}
    atomic_write_json(probe_file(results, node), mine)
    mate, role = partner(nodes, node)
    if mate is None:
        return {"untested": f"no partner (the odd node out of {len(set(nodes))})"}
    out: dict[str, Any] = {"partner": mate, "role": "measures" if role else "serves"}
    if mine["untested"]:
        return {**out, "untested": mine["untested"]}
    theirs = _wait_probe(results, mate, wait_s)
    if theirs is None or theirs.get("untested"):
        return {**out, "untested": f"partner {mate}: " + (theirs or {}).get("untested", "wrote no probe")}
    a, b = (node, mate) if role == 0 else (mate, node)
    pa, pb = (mine, theirs) if role == 0 else (theirs, mine)
    pairs = rl.rail_pairs(pa, pb)
    server_file = results / "cross" / "rails" / f"{a}__{b}.server.json"
    if planted:
        return {**out, "figures": [{"rail": i, "nic_a": x["nic"], "nic_b": y["nic"], "rate_gbps": rl.rate_of(x, y),
                                    "gbps": rl.planted_gbps(plants, a, b, i, rl.rate_of(x, y))} for i, x, y in pairs]
                if role else []}
    if role == 0:
        rl.serve(pairs, server_file, fab.gpudirect)
        return out
    return {**out, "figures": rl.figures(pairs, rl.measure(pairs, str(theirs.get("host") or a), fab.gpudirect),
                                         server_file)}


def judge(cross: Mapping[str, Mapping[str, Any]], spec: Any) -> tuple[CheckResult, list[Finding]]:
    """The fleet row `cluster.rails` and the WARNs on both nodes of each pair with a rail below the floor (and on
    nodes not tested, where the spec names compute NICs)."""
    found: list[Finding] = []
    slow, measured, untested = 0, 0, {}
    floor = spec.fabric.rail_fraction
    for node, doc in sorted(cross.items()):
        part = doc.get("rails")
        if not isinstance(part, Mapping):
            continue
        if part.get("untested"):
            untested[node] = str(part["untested"])
            continue
        for f in part.get("figures") or []:
            measured += 1
            rate, got = f.get("rate_gbps"), f.get("gbps")
            if isinstance(got, (int, float)) and rate and got >= floor * rate:
                continue
            slow += 1
            what = (f"{got:.0f} Gb/s, {got / rate:.0%} of {rate:g}" if isinstance(got, (int, float)) and rate
                    else f"no figure: {f.get('why') or 'no rate'}")
            text = (f"rail {f.get('rail')} {part['partner']}:{f.get('nic_a')} -> {node}:{f.get('nic_b')}: {what}, below "
                    f"{floor:.0%} of the rate: one of the two; `cluster pairs --fabric` names which")
            found += [Finding(node, "rails", Status.WARN, text), Finding(str(part["partner"]), "rails", Status.WARN, text)]
    if spec.fabric.nics:
        found += [Finding(n, "rails", Status.WARN, f"not tested ({why})") for n, why in untested.items()]
    ok = (f"{measured} rail(s) measured between node pairs, each >= {floor:.0%} of its rate" if measured else
          f"not tested on {len(untested)} node(s): {next(iter(untested.values()), 'no rails record')}")
    res = CheckResult("cluster.rails", "NIC to NIC, rail by rail (ib_write_bw)", Level.STANDARD,
                      Status.WARN if found else (Status.PASS if measured else Status.SKIP),
                      "; ".join(f"{f.node}: {f.text}" for f in found[:6]) or ok,
                      "run `trainready cluster pairs --fabric` to name the slow NIC and node" if found else "", (), 0.0)
    return res, found
