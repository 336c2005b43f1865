"""The fabric cases' files: a healthy HGX B200 server as `env --capture-fabric` writes it (8 x NDR 400 compute
NICs all Active, 18 NVLink 5 links per GPU to NVSwitches, Fabric Manager and the NVLink Subnet Manager running),
and the spec `spec init` writes from it, to which the planted faults are held."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from trainready.spec.fabric import FabricSpec


@dataclass(frozen=True)
class _Section:
    fabric: FabricSpec  # dump_toml writes it as the [fabric] table


def fabric_node(root: Path, hdr: bool = False) -> str:
    """The healthy server; with `hdr`, its NIC mlx5_4 at HDR 200 in the captured files."""
    from trainready.fabric.sample import HDR, hgx_replay

    out = root / ("fabric-node-hdr" if hdr else "fabric-node")
    if not (out / "node.json").exists():
        hgx_replay(out, nics={4: {"rate": HDR}} if hdr else None)
    return str(out)


def spec_fabric(root: Path, base: str) -> str:
    """`base` (the self-test's spec for this machine) with the [fabric] `spec init` writes from fabric_node."""
    from trainready.fabric.facts import read_facts
    from trainready.spec.init_fabric import fabric_spec
    from trainready.util.strict import dump_toml

    from trainready.fabric.services import PROCESSES

    facts = read_facts(replay=Path(fabric_node(root)), environ={}, units=tuple(PROCESSES))
    spec = fabric_spec({"fabric": facts.to_json()}, [])
    path = root / "spec_fabric.toml"
    path.write_text(base + "\n" + dump_toml(_Section(spec), with_docs=False))
    return str(path)
