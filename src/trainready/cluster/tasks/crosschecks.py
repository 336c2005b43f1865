"""Verdicts of the cross-node checks, from every node's cross record (cross.py) on the submitting host.

Each check returns one fleet-level result (metrics + remedy) and per-node findings: a FAIL finding rejects
its node, a WARN one is reported.  Rules and their sources:
  clock    |offset| within fleet.clock_offset_max_s (1 s: the step threshold of chrony's usual `makestep 1 3`); FAIL only when even offset − rtt/2
           exceeds it, WARN when the round trip leaves it undecided or nothing could be measured;
           no time-sync daemon running (chronyd, ntpd, systemd-timesyncd, ptp4l, ...) is a WARN;
  storage  every node sees every other node's file under --results, on one filesystem (same st_dev); a pair is
           judged only when the peer's file was there for the node's whole wait (fleet.storage_wait_s);
  limits   ulimit -n >= fleet.nofile_min (65535: every rank holds sockets to its peers);
  hosts    the host name must not resolve to loopback (Debian's installer writes a 127.0.1.1 line): FAIL on a fleet of
           several hosts; on one host (the local test cluster) loopback is all there is, so WARN.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Mapping

from trainready.cluster.tasks.clock import direction
from trainready.records import CheckResult, Level, Metric, Status, Threshold
from trainready.spec.model import FleetSpec
from trainready.util.listing import first_of


@dataclass(frozen=True)
class Finding:
    node: str
    check: str
    status: Status  # FAIL: rejects the node; WARN: reported
    text: str


def _result(name: str, title: str, findings: list[Finding], ok: str, metrics: list[Metric], remedy: str) -> CheckResult:
    worst = Status.FAIL if any(f.status == Status.FAIL for f in findings) else \
        Status.WARN if findings else Status.PASS
    msg = first_of([f"{f.node}: {f.text}" for f in findings], 6)
    return CheckResult(name, title, Level.STANDARD, worst, msg or ok, remedy if findings else "", tuple(metrics), 0.0)


def clock(cross: Mapping[str, Mapping[str, Any]], spec: FleetSpec) -> tuple[CheckResult, list[Finding]]:
    limit = spec.clock_offset_max_s
    found: list[Finding] = []
    metrics: list[Metric] = []
    for node, doc in cross.items():
        c = doc.get("clock") or {}
        if "offset_s" not in c:
            found.append(Finding(node, "clock", Status.WARN, f"clock offset not measured: {c.get('error', 'no data')}"))
        else:
            off, rtt = float(c["offset_s"]), float(c["rtt_s"])
            thr = Threshold("<=", limit, "s", "spec fleet.clock_offset_max_s (1 s: chrony's usual makestep threshold)")
            metrics.append(Metric.of("clock_offset_abs", abs(off), "s", thr, node=node, rtt_s=f"{rtt:.6f}",
                                     direction=direction(off, 6)))
            if abs(off) - rtt / 2 > limit:
                found.append(Finding(node, "clock", Status.FAIL, f"clock {direction(off)} (± {rtt / 2:.3f} s; "
                                     f"limit {limit:g} s)"))
            elif abs(off) + rtt / 2 > limit:
                found.append(Finding(node, "clock", Status.WARN, f"clock {direction(off)} ± {rtt / 2:.3f} s: "
                                     f"the round trip leaves the {limit:g} s limit undecided"))
        daemons = c.get("daemons")
        if isinstance(daemons, list) and not daemons:
            found.append(Finding(node, "clock", Status.WARN, "no time-sync daemon running (chronyd, ntpd, "
                                 "systemd-timesyncd, ptp4l): the clock will drift"))
    worst = max(metrics, key=lambda m: m.value, default=None)
    largest = f"largest: {worst.label_dict['node']} {worst.label_dict['direction']}" if worst else "none measured"
    return _result("cluster.clock", "clock offset against the submitting host", found,
                   f"{len(metrics)} node(s) within {limit:g} s ({largest})", metrics,
                   "Run chronyd (or ntpd/ptp4l) on every node against the same servers; `chronyc tracking` shows "
                   "the offset."), found


def _judged(cross: Mapping[str, Mapping[str, Any]], node: str, peer: str) -> bool:
    """Was `peer`'s file there for the whole of `node`'s wait (its wait_s) before `node` stopped looking?  A node
    stops looking wait_s after the last new file; on a fleet whose tasks start over minutes (640 on one 2-core
    host: the step's tasks started over 458 s) a file written after that is late, not unseen.  The two times come
    from two clocks, which cluster.clock holds within 1 s.  Records without the times (older versions) judge
    every pair."""
    mine = cross.get(node, {}).get("storage") or {}
    written = (cross.get(peer, {}).get("storage") or {}).get("written_at")
    if mine.get("looked_until") is None:
        return True
    if written is None:  # the peer never wrote a file: its own missing record blames it, not the others
        return False
    return float(written) + float(mine.get("wait_s", 0.0)) <= float(mine["looked_until"])


def storage(cross: Mapping[str, Mapping[str, Any]]) -> tuple[CheckResult, list[Finding]]:
    found: list[Finding] = []
    devs = {n: d.get("storage", {}).get("st_dev") for n, d in cross.items()}
    common = Counter(v for v in devs.values() if v is not None).most_common(1)
    major = common[0][0] if common else None
    seen_of = {n: (d.get("storage") or {}).get("seen") or {} for n, d in cross.items()}
    for node, doc in cross.items():
        st = doc.get("storage") or {}
        if st.get("error"):
            found.append(Finding(node, "storage", Status.FAIL, st["error"]))
            continue
        # the peers this node judged (saw, or looked for long enough), and the nodes that judged it
        mine = [p for p, v in seen_of[node].items() if v is not None or _judged(cross, node, p)]
        missed = sorted(p for p in mine if seen_of[node][p] is None)
        watchers = [p for p in cross if p != node and node in seen_of[p]]
        looked = [p for p in watchers if seen_of[p][node] is not None or _judged(cross, p, node)]
        unseen_by = sorted(p for p in looked if seen_of[p][node] is None)
        late_for = len(watchers) - len(looked)
        parts = []
        if major is not None and st.get("st_dev") != major:
            parts.append(f"--results is another filesystem here (st_dev {st.get('st_dev')} vs {major} on most nodes)")
        # a missing file is blamed on the node that misses, or is missed by, more than half of the others that
        # looked for it long enough
        if missed and len(missed) * 2 > len(mine):
            parts.append(f"cannot see the files of {', '.join(missed)}")
        if unseen_by and len(unseen_by) * 2 > max(1, len(looked)):
            parts.append(f"its file is not seen by {', '.join(unseen_by)}")
        if parts:
            found.append(Finding(node, "storage", Status.FAIL, "; ".join(parts)))
        elif st.get("waiting"):
            found.append(Finding(node, "storage", Status.WARN, "not judged: the step ended while this node waited for "
                                 "the other nodes' files (its own was written)"))
        elif late_for:
            found.append(Finding(node, "storage", Status.WARN, f"not judged by {late_for} node(s): its file "
                                 f"appeared after they had stopped looking (fleet.storage_wait_s with no "
                                 f"new file); its task started late"))
    return _result("cluster.storage", "shared storage: every node sees every node's file", found,
                   f"{len(cross)} node(s) see one another's files on one filesystem", [],
                   "Mount the shared filesystem at the same path on every node (check `findmnt` for the "
                   "--results path) and that the mount is not stale; a WARN 'not judged' asks for a longer "
                   "fleet.storage_wait_s on a fleet whose step tasks start minutes apart."), found


def limits(cross: Mapping[str, Mapping[str, Any]], spec: FleetSpec) -> tuple[CheckResult, list[Finding]]:
    found: list[Finding] = []
    metrics: list[Metric] = []
    thr = Threshold(">=", spec.nofile_min, "files", "spec fleet.nofile_min (ulimit -n)")
    for node, doc in cross.items():
        soft = int((doc.get("limits") or {}).get("nofile_soft", 0))
        value = float("inf") if soft < 0 else float(soft)
        metrics.append(Metric.of("ulimit_nofile", value, "files", thr, node=node))
        if not thr.holds(value):
            found.append(Finding(node, "limits", Status.FAIL, f"ulimit -n {soft} < {spec.nofile_min}"))
    if spec.nofile_min == 0:  # every limit passes: the spec turned the check off, and the result says so
        lowest = min((m.value for m in metrics), default=float("nan"))
        return CheckResult("cluster.limits", "open-files limit of a job's task", Level.STANDARD, Status.SKIP,
                           f"not judged: spec fleet.nofile_min = 0 accepts any open-files limit (lowest ulimit -n "
                           f"{lowest:g} over {len(cross)} node(s))", "", tuple(metrics), 0.0), []
    return _result("cluster.limits", "open-files limit of a job's task", found,
                   f"ulimit -n >= {spec.nofile_min} on {len(cross)} node(s)", metrics,
                   "Raise nofile in /etc/security/limits.conf and slurmd's LimitNOFILE (systemd), or set "
                   "PropagateResourceLimitsExcept=NOFILE in slurm.conf."), found


def hosts(cross: Mapping[str, Mapping[str, Any]]) -> tuple[CheckResult, list[Finding]]:
    found: list[Finding] = []
    names = {(d.get("hosts") or {}).get("hostname") for d in cross.values()}
    multi = len(names - {None}) > 1
    for node, doc in cross.items():
        h = doc.get("hosts") or {}
        lines = h.get("etc_hosts_loopback_lines") or []
        loop = bool((h.get("resolves_to") or {}).get("loopback"))
        if not (lines or loop):
            continue
        what = f"/etc/hosts maps {h.get('hostname')} to loopback ({'; '.join(lines)})" if lines else \
            f"{h.get('hostname')} resolves to loopback {(h.get('resolves_to') or {}).get('addresses')}"
        if multi:
            found.append(Finding(node, "hosts", Status.FAIL, what + ": NCCL/gloo would listen on loopback"))
        else:
            found.append(Finding(node, "hosts", Status.WARN, what + " (every node is this one host, so harmless here)"))
    return _result("cluster.hosts", "host name does not resolve to loopback (127.0.1.1 trap)", found,
                   f"{len(cross)} node(s) resolve to a routable address", [],
                   "Delete the '127.0.1.1 <hostname>' line from /etc/hosts (Debian/Ubuntu installer default) or map "
                   "the name to the node's fabric IP."), found
