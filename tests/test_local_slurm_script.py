"""scripts/local-slurm.sh's options: a bad one is one line and exit 2 before anything is started or written;
`--cluster NAME` names a second cluster with its own config file, state and ports; `--plain` writes a partition
with no OverSubscribe, as a site's (no Slurm needed here)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from conftest import BASH, NO_INSTALL, SLURM_SCRIPT, local_slurm_script


def script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([BASH, str(SLURM_SCRIPT), *args], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", **NO_INSTALL})


@pytest.mark.parametrize("args, says", [
    (("up", "--cluster", "Scale"), "--cluster 'Scale': expected lowercase letters"),
    (("up", "--cluster", "node"), "--cluster 'node': expected lowercase letters (not 'node'"),
    (("up", "--cluster"), "--cluster: expected a name"),
    (("down", "--nodes", "4"), "down: --nodes N is an option of up"),
    (("status", "--bogus"), "status: unknown option '--bogus'"),
    (("up", "--nodes", "0"), "--nodes 0: expected 1..999"),
    (("up", "--nodes", "x", "--cluster", "scale"), "--nodes 'x': expected a whole number"),
    (("down", "--plain"), "down: --plain is an option of up"),
    (("status", "--cpus", "2"), "status: --cpus C is an option of up"),
    (("up", "--cpus", "0"), "--cpus '0': expected a whole number 1.."),
    (("up", "--cpus", "100000"), "--cpus 100000: expected 1.."),
    (("up", "--topology", "x"), "--topology 'x': expected K, a whole number of nodes per leaf switch"),
    (("down", "--topology", "2"), "down: --topology K is an option of up"),
    (("status", "--accounting"), "status: --accounting is an option of up"),
])
def test_a_bad_option_is_one_line_exit_2(args: tuple[str, ...], says: str) -> None:
    p = script(*args)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert p.stderr.strip().count("\n") == 0 and says in p.stderr, p.stderr


def test_a_named_cluster_has_its_own_config_ports_and_node_names() -> None:
    """The default cluster keeps its config, slurmctld port and node names; a named one gets its own, with
    ports outside the range where `cluster run` picks its rendezvous port (20000..29999, cluster/steps.py)."""
    text = SLURM_SCRIPT.read_text()
    p = subprocess.run([BASH, "-c", f'source <(sed -n "/^instance() {{/,/^}}/p" {SLURM_SCRIPT}); '
                        'for c in local scale; do instance $c; echo "$c $SLURM_CONF $CTLD_PORT $BASE $PREFIX $CTLD_PID"; done'],
                       capture_output=True, text=True, timeout=30)
    rows = dict((line.split()[0], line.split()[1:]) for line in p.stdout.splitlines())
    assert rows["local"] == ["/etc/slurm/slurm.conf", "16817", "17000", "node", "/var/run/slurmctld-trainready.pid"], p
    conf, ctld, base, prefix, pid = rows["scale"]
    assert (conf, prefix, pid) == ("/etc/slurm-scale/slurm.conf", "scale", "/var/run/slurmctld-trainready-scale.pid")
    assert 16818 <= int(ctld) <= 16823 and 10000 <= int(base) and int(base) + 999 < 20000
    assert "MASTER_PORT=str(random.randint(20000, 29999))" in (SLURM_SCRIPT.parents[1] / "src/trainready/cluster/steps.py").read_text()
    assert re.search(r"NodeName=\$PREFIX\[1-\$NODES\].*Port=\[\$\(\(BASE \+ 1\)\)-\$last\]", text)


def test_status_of_a_cluster_never_brought_up_says_so() -> None:
    p = script("status", "--cluster", "neverup")
    assert p.returncode == 1 and ("not configured by this script" in p.stdout or "not installed" in p.stdout), p
    assert not Path("/etc/slurm-neverup").exists()


def _conf(tmp: Path, *options: str) -> str:
    """The slurm.conf `up OPTIONS` writes, rendered into `tmp` (the script's own functions; nothing started)."""
    p = subprocess.run([BASH, "-c", f'source <(sed -n "/^instance() {{/,/^}}/p;/^write_conf() {{/,/^}}/p;'
                        f'/^write_topology() {{/,/^}}/p;/^up_only() {{/,/^}}/p;/^parse_opts() {{/,/^}}/p;/^NODES=/,/^HOST=/p" '
                        f'{SLURM_SCRIPT}); '
                        f'parse_opts up {" ".join(options)} && CONF_DIR={tmp} CONF={tmp}/slurm.conf && write_conf '
                        f'&& cat {tmp}/slurm.conf.tmp'],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_plain_writes_a_partition_as_a_site_does(tmp_path: Path) -> None:
    """Default: up to 4 jobs share a node (the suite's runs side by side); --plain: no OverSubscribe line, Slurm's
    default NO (slurm.conf(5)), and --cpus C CPUs per node."""
    own = _conf(tmp_path)
    assert re.search(r"^PartitionName=debug .* OverSubscribe=FORCE:4$", own, re.M) and " CPUs=2 " in own
    site = _conf(tmp_path, "--plain", "--cpus", "1")
    assert "OverSubscribe" not in site and re.search(r"^PartitionName=debug .*State=UP$", site, re.M)
    assert re.search(r"^NodeName=node\[1-3\] .* CPUs=1 ", site, re.M), site


def test_preempt_adds_a_low_and_a_high_tier_over_the_same_nodes(tmp_path: Path) -> None:
    """--preempt: Slurm's preemption by partition priority (slurm.conf(5) PreemptType, PreemptMode) before the
    nodes, a `sweep` partition at PriorityTier=1 and a `batch` one at 10 over the same nodes, none oversubscribed
    (a sweep's --exclusive task must hold its node for a batch job to preempt it)."""
    conf = _conf(tmp_path, "--preempt")
    lines = conf.splitlines()
    assert lines.index("PreemptType=preempt/partition_prio") < next(i for i, x in enumerate(lines)
                                                                     if x.startswith("NodeName="))
    assert "PreemptMode=CANCEL" in lines and "OverSubscribe" not in conf
    assert re.search(r"^PartitionName=sweep Nodes=node\[1-3\] .*PriorityTier=1 PreemptMode=CANCEL$", conf, re.M)
    assert re.search(r"^PartitionName=batch Nodes=node\[1-3\] .*PriorityTier=10$", conf, re.M)
    assert "Preempt" not in _conf(tmp_path)


def test_topology_writes_the_tree_plugin_and_leaf_switches(tmp_path: Path) -> None:
    """--topology K: slurm.conf(5) TopologyPlugin=topology/tree and a topology.conf(5) of leaf switches of K
    nodes (the last one shorter) under one spine; without it, neither."""
    assert "TopologyPlugin" not in _conf(tmp_path) and not (tmp_path / "topology.conf.tmp").exists()
    conf = _conf(tmp_path, "--nodes", "5", "--topology", "2")
    assert "TopologyPlugin=topology/tree" in conf.splitlines()
    tree = [x for x in (tmp_path / "topology.conf.tmp").read_text().splitlines() if not x.startswith("#")]
    assert tree == ["SwitchName=s1 Nodes=node[1-2]", "SwitchName=s2 Nodes=node[3-4]", "SwitchName=s3 Nodes=node[5-5]",
                    "SwitchName=top Switches=s[1-3]"]
    assert conf != _conf(tmp_path, "--nodes", "5", "--topology", "3")  # another tree reconfigures the cluster


def test_the_suites_named_clusters_do_not_share_ports() -> None:
    """The suite's named clusters run beside each other in one test run: each its own slurmctld and slurmd ports
    (every `CLUSTER = "NAME"` of a test module, and conftest's ALT)."""
    from conftest import ALT

    found = {m.group(1) for f in Path(__file__).parent.glob("test_*.py")
             for m in re.finditer(r'^CLUSTER = "([a-z]+)"', f.read_text(), re.M)}
    names = tuple(sorted(found | {ALT}))
    assert len(names) >= 4, names  # alt, scale, hostset, site at least
    p = subprocess.run([BASH, "-c", f'source <(sed -n "/^instance() {{/,/^}}/p" {SLURM_SCRIPT}); '
                        f'for c in {" ".join(names)}; do instance $c; echo "$CTLD_PORT $BASE"; done'],
                       capture_output=True, text=True, timeout=30)
    rows = p.stdout.split("\n")[:len(names)]
    assert len({r.split()[0] for r in rows}) == len({r.split()[1] for r in rows}) == len(names), rows


def test_up_refuses_a_port_another_program_holds_before_writing_anything() -> None:
    """A cluster whose slot another program (or another local cluster of a name in the same slot) holds is
    refused with the port and what to look at, exit 3, before its slurm.conf is written or a daemon starts:
    two slurmctld on one port would each answer the other's clients."""
    import socket

    conf = Path("/etc/slurm-big/slurm.conf")  # the benchmark's cluster: slurmd of big1 listens on 6001
    if conf.exists() or Path("/var/run/slurmd-big1.pid").exists():
        pytest.skip("the 'big' cluster is up here (benchmarks/cluster_scale.py)")
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", 6001))
        s.listen()
        p = local_slurm_script("up", "--cluster", "big", "--nodes", "2", timeout=60)
    if "missing" in p.stdout or "needs root" in p.stdout:
        pytest.skip(p.stdout.strip())
    assert p.returncode == 3, (p.returncode, p.stdout, p.stderr)
    assert "port 6001 (slurmd of big1) is in use by another program" in p.stdout, p.stdout
    assert not conf.exists()
