"""Host settings across the fleet: each node's settings (manifest/hostset.py, from its record's manifest) against
the reference node's, the spec's pins, and the known-bad values (hostsettings/rules.py).

- A key of `host.match` that differs from the reference rejects the node, named as versions' drift is:
  "host: net.core.rmem_max 4194304 (node1) ≠ 212992" (cause "host net.core.rmem_max").  Other keys that
  differ are warnings ("not judged").
- A pin a node misses rejects it (cause "host pin KEY"); a pin that every node with settings misses is the
  fleet's configuration, not a node's: one fleet-level failure (`cluster.host_pins`), no node rejected for it,
  so nothing is drained for it.
- A known-bad value rejects its node (or warns), with the rule's public source.
The reference is `--reference NODE`, else the fleet's most common value per key.  Pure: records in.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from trainready.hostsettings import pins as hostpins
from trainready.hostsettings.rules import known_bad
from trainready.manifest import drift
from trainready.manifest.hostset import values
from trainready.records import CheckResult, Level, Status

FLEET_PINS = "cluster.host_pins"  # the fleet-level result of pins every node misses


@dataclass(frozen=True)
class HostJudgement:
    """What the host settings say about each node and about the fleet."""

    reasons: Mapping[str, list[tuple[str, str]]] = field(default_factory=dict)  # node → [(cause, reason)]
    warnings: Mapping[str, list[str]] = field(default_factory=dict)  # node → shown, not judged
    results: tuple[CheckResult, ...] = ()  # cluster.host, and cluster.host_pins when a pin is missed fleet-wide


def node_settings(record: Mapping[str, Any] | None) -> dict[str, str]:
    """key → value as text from a node record's manifest ({} when it has none: an older record)."""
    manifest = (record or {}).get("manifest")
    return values(manifest.get("host_settings")) if isinstance(manifest, Mapping) else {}


def reference(have: Mapping[str, Mapping[str, str]], ref_node: str | None) -> tuple[str, dict[str, str]]:
    """(name, settings): the named node's, else the most common value of each key over the fleet."""
    if ref_node:
        return ref_node, dict(have.get(ref_node, {}))
    keys = sorted({k for s in have.values() for k in s})
    return "fleet majority", {k: Counter(s[k] for s in have.values() if k in s).most_common(1)[0][0] for k in keys}


def differences(ref: Mapping[str, str], mine: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(key, reference value, node value) for every key both have that differs, or that only one has."""
    return [(k, ref.get(k, ""), mine.get(k, "")) for k in sorted(set(ref) | set(mine)) if ref.get(k, "") != mine.get(k, "")]


def pin_misses(pins: Sequence[hostpins.Pin], settings: Mapping[str, str]) -> list[tuple[hostpins.Pin, str, str]]:
    """(pin, key, node value) for every covered key whose value misses its pin ('(none)' when not read)."""
    return [(p, k, settings.get(k, "(none)")) for p in pins for k in hostpins.applies(p, settings)
            if not p.holds(settings.get(k, "(none)"))]


def _miss_text(p: hostpins.Pin, key: str, value: str) -> str:
    return f"{key} {value} misses the pin {p.op} {p.value}" + (f" (host.pins.{p.key})" if p.key != key else "")


def judge(inputs: Sequence[Any], spec: hostpins.WithHost, ref_node: str | None) -> HostJudgement:
    """Per-node reasons and warnings, and the fleet's results, over the nodes (verdict.NodeInput) with records."""
    have = {ni.node: s for ni in inputs if ni.record is not None and (s := node_settings(ni.record))}
    if not have:
        return HostJudgement()
    ref_name, ref = reference(have, ref_node)
    pins = hostpins.pins(spec)
    misses = {node: pin_misses(pins, s) for node, s in have.items()}
    missed_by = Counter(p.describe() for m in misses.values() for p in {x[0] for x in m})
    everywhere = {d for d, n in missed_by.items() if n == len(have)}
    reasons: dict[str, list[tuple[str, str]]] = {}
    warnings: dict[str, list[str]] = {}
    for node, mine in have.items():
        out = reasons.setdefault(node, [])
        rows = differences(ref, mine) if ref and node != ref_name else []
        judged = [r for r in rows if hostpins.matches(r[0], spec.host.match)]
        if judged:
            out.append((f"host {judged[0][0]}", f"host: {drift.describe(judged, ref_name)}"))
        shown = [r for r in rows if not hostpins.matches(r[0], spec.host.match)]
        if shown:
            warnings.setdefault(node, []).append(f"host (not judged): {drift.describe(shown, ref_name)}")
        for p, key, value in misses[node]:
            if p.describe() not in everywhere:
                out.append((f"host pin {p.key}", f"host: {_miss_text(p, key, value)}"))
        for bad in known_bad(mine):
            if bad.fatal:
                out.append((f"host known-bad {bad.key}", f"host: {bad.text} ({bad.source})"))
            else:
                warnings.setdefault(node, []).append(f"host: {bad.text} ({bad.source})")
    return HostJudgement(reasons, warnings, _results(have, reasons, everywhere, ref_name))


def _results(have: Mapping[str, Any], reasons: Mapping[str, list[tuple[str, str]]], everywhere: set[str],
             ref_name: str) -> tuple[CheckResult, ...]:
    named = {n: r for n, r in reasons.items() if r}
    msg = "; ".join(f"{n}: {r[0][1]}" for n, r in list(named.items())[:6]) or \
        f"{len(have)} node(s) alike in the judged host settings (reference: {ref_name})"
    out = [CheckResult("cluster.host", "host settings alike on every node (sysctl, limits, /dev/shm, GPU modes, IB)",
                       Level.LIGHT, Status.FAIL if named else Status.PASS, msg,
                       "Set the named setting as on the reference (sysctl.d, limits.conf and slurmd's systemd unit, "
                       "nvidia-smi -pm/-e/-pl, the fabric) or drain the node." if named else "", (), 0.0)]
    if everywhere:
        out.append(CheckResult(
            FLEET_PINS, "spec pins of host settings", Level.LIGHT, Status.FAIL,
            f"every node ({len(have)}) misses {', '.join(sorted(everywhere))}: a fleet-wide cause (the fleet's "
            "configuration or the spec), so no node is rejected or drained for it",
            "Fix the setting on every node (configuration management), or correct the pin in the spec.", (), 0.0))
    return tuple(out)
