"""The production path: `cluster run --container-image` through real Slurm + Pyxis + enroot, on a local cluster of
its own (`scripts/local-slurm.sh up --cluster pyxis --pyxis`: enroot and pyxis built from the upstream sources
in ../shared/thirdparty/, registered in that cluster's plugstack.conf) and a test image without trainready
(scripts/test-image.sh: Debian 12 minbase, python3, torch CPU, numpy; cached by its recipe's sha256).

Skipped with the script's own one-line reason where either cannot be had (not root, the build deps or
debootstrap not installed: the tests install nothing, .ci/run does)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import BASH, REPO, local_slurm_script, own_cluster, run_cli

pytestmark = pytest.mark.slow

CLUSTER = "pyxis"  # its own slurmctld and ports beside the suite's other clusters (tests/test_local_slurm_script.py)
CONF = f"/etc/slurm-{CLUSTER}/slurm.conf"
NODES = [f"{CLUSTER}{k}" for k in (1, 2, 3)]
SPEC = "example:local-slurm"
CHECKS = "gpus,versions,matmul,allreduce,resume"  # GPUs (a CPU spec: skip), compute, communication, resume


def test_a_pyxis_that_cannot_be_built_is_one_cannot_start_line(tmp_path: Path) -> None:
    """No sources where --pyxis points: the one line the fixtures skip with (exit 3); no cluster needed."""
    p = subprocess.run([BASH, str(REPO / "scripts" / "local-pyxis.sh"), "build", str(tmp_path), str(tmp_path / "p")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 3 and p.stdout.startswith("local-slurm: cannot start: "), p
    assert str(tmp_path) in p.stdout and not (tmp_path / "p").exists(), p
    q = local_slurm_script("status", "--pyxis", timeout=30)
    assert q.returncode == 2 and "--pyxis is an option of up" in q.stderr, q


@pytest.fixture(scope="module")
def image() -> Path:
    """The test image (built once per recipe, then taken from its cache)."""
    p = subprocess.run([BASH, str(REPO / "scripts" / "test-image.sh")], capture_output=True, text=True, timeout=1500)
    if p.returncode == 3:  # "test-image: cannot build: <why>"
        pytest.skip(p.stdout.strip().splitlines()[-1])
    assert p.returncode == 0, p.stderr[-2000:]
    return Path(p.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def pyxis(image: Path) -> list[str]:  # type: ignore[misc]
    """The Pyxis cluster, up for this module; every Slurm command here reaches it through SLURM_CONF."""
    yield from own_cluster(CLUSTER, "--pyxis", nodes=NODES)


def cluster_run(results: Path, image: str, *extra: str, checks: str = CHECKS) -> tuple[subprocess.CompletedProcess, dict]:
    p = run_cli("cluster", "run", "--nodelist", f"{CLUSTER}[1-3]", "--results", str(results), "--spec", SPEC,
                "--only", checks, "--time", "8:00", "--container-image", image, "--json", f"{results}.json", *extra,
                timeout=900)
    assert p.returncode in (0, 1, 3), (p.stdout + p.stderr)[-3000:]
    return p, json.loads(Path(f"{results}.json").read_text())


def by_node(doc: dict) -> dict[str, dict]:
    return {n["node"]: n for n in doc["nodes"]}


@pytest.fixture(scope="module")
def healthy(pyxis, image, tmp_path_factory):  # type: ignore[no-untyped-def]
    res = tmp_path_factory.mktemp("pyxis-healthy") / "r"
    return res, *cluster_run(res, str(image))


def test_three_nodes_accepted_inside_the_image(healthy, image: Path) -> None:
    """Every node's acceptance (compute, communication, resume's fresh process C) and the cross-node step ran in
    the image on its own python and torch; trainready came from the results path, the image unchanged."""
    res, p, doc = healthy
    assert all(n["accepted"] for n in doc["nodes"]), (p.stdout + p.stderr)[-3000:]
    sha = "sha256:" + subprocess.run(["sha256sum", str(image)], capture_output=True, text=True).stdout.split()[0]
    run = Path(by_node(doc)[NODES[0]]["record"]).parents[1]  # RESULTS/runs/ID
    for node in NODES:
        rec = json.loads(Path(by_node(doc)[node]["record"]).read_text())
        c = rec["container"]
        assert c["image"] == str(image) and c["image_sha256"] == sha and c["file"] == str(image), c
        assert c["python"] == "/usr/bin/python3" and c["torch_path"] == "/usr/local/lib/python3.11/dist-packages/torch", c
        assert rec["manifest"]["launcher"]["pyxis"] == "0.24.0" and rec["manifest"]["launcher"]["enroot"] == "4.1.2"
        assert rec["manifest"]["launcher"]["slurmd"].startswith("22.05"), rec["manifest"]["launcher"]
        status = {r["name"]: r["status"] for r in rec["report"]["results"]}
        assert status["resume"] == "pass" and status["allreduce"] == "pass", status
    assert "error" not in (run / "logs" / "cross.out").read_text()
    coll = next(c for c in doc["cross"] if c["name"] == "cluster.collective")
    assert coll["status"] in ("pass", "warn") and coll["details"], coll  # warn: figures only, on shared cores
    script = (run / "job" / "accept.sbatch").read_text()
    assert f"python3 {run}/.trainready/boot.py cluster node-task" in script and str(REPO) not in script, script
    chain = doc["context"]["launcher"]
    assert chain["slurmctld"].startswith("22.05") and chain["pyxis_built_for"] == chain["slurmctld"], chain
    assert chain["pyxis_mismatch"] is None, chain


def test_a_node_given_another_squashfs_is_rejected_and_a_missing_image_is_not_tested(pyxis, image, tmp_path):
    """pyxis2 runs a changed copy of the image (one file more): 'image differs'; pyxis3's image file is not
    there: not tested, in Pyxis's and enroot's words, never a hardware fault."""
    other = tmp_path / "other.sqsh"
    shutil.copyfile(image, other)
    (tmp_path / "extra").mkdir()
    (tmp_path / "extra" / "note").write_text("one file more\n")
    subprocess.run(["mksquashfs", str(tmp_path / "extra"), str(other), "-quiet"], check=True, capture_output=True)
    missing = tmp_path / "nowhere" / "image.sqsh"
    res = tmp_path / "r"
    p, doc = cluster_run(res, str(image), "--plant", f"cluster.image={CLUSTER}2:{other},{CLUSTER}3:{missing}",
                         "--reference", f"{CLUSTER}1", checks="versions,matmul")
    n = by_node(doc)
    assert n[f"{CLUSTER}1"]["accepted"], n
    assert not n[f"{CLUSTER}2"]["accepted"] and n[f"{CLUSTER}2"]["causes"] == ["image differs"], n[f"{CLUSTER}2"]
    assert n[f"{CLUSTER}2"]["reasons"][0].startswith("image differs: sha256:"), n[f"{CLUSTER}2"]
    n3 = n[f"{CLUSTER}3"]
    assert n3["not_tested"] and "No such file or directory" in n3["not_tested"] and str(missing) in n3["not_tested"], n3


def image_with_record(image: Path, folder: Path) -> tuple[Path, str]:
    """The test image as `image import` leaves it: NAME.sqsh and beside it its trainready.image/1 record (the
    reference pinned by a digest; importing through a registry is tests/test_image_import.py's)."""
    folder.mkdir(parents=True)
    sqsh = folder / "test-image.sqsh"
    os.link(image, sqsh) if os.stat(image).st_dev == os.stat(folder).st_dev else shutil.copyfile(image, sqsh)
    sha = "sha256:" + subprocess.run(["sha256sum", str(sqsh)], capture_output=True, text=True).stdout.split()[0]
    digest = "sha256:" + "d" * 64
    doc = {"schema": "trainready.image/1", "file": sqsh.name, "reference": f"docker://127.0.0.1:5000#trainready/test@{digest}",
           "digest": digest, "sha256": sha, "size_bytes": sqsh.stat().st_size}
    Path(f"{sqsh}.json").write_text(json.dumps(doc))
    return sqsh, sha


def test_the_distributed_copies_are_held_to_the_image_record(pyxis, image, tmp_path) -> None:
    """The operator's flow: `image distribute` puts the imported file on the nodes' storage, then `cluster run
    --container-image` on that copy with its record accepts every node, each node record carrying the image's
    reference, digest and sha256; a node given another file is rejected naming its sum and the record's."""
    sqsh, sha = image_with_record(image, tmp_path / "lustre")
    dest = tmp_path / "local"  # one folder: the local cluster's nodes are one host
    d = run_cli("image", "distribute", str(sqsh), "--nodelist", f"{CLUSTER}[1-3]", "--dest", str(dest), timeout=600)
    assert d.returncode == 0, (d.stdout + d.stderr)[-3000:]
    assert "3/3 node(s) ready" in d.stdout and "copied" in d.stdout, d.stdout
    copy, record = str(dest / sqsh.name), f"{sqsh}.json"
    p, doc = cluster_run(tmp_path / "r", copy, "--image-record", record, checks="versions")
    assert all(n["accepted"] for n in doc["nodes"]), (p.stdout + p.stderr)[-3000:]
    assert doc["context"]["image_record"]["sha256"] == sha, doc["context"]
    for node in NODES:
        c = json.loads(Path(by_node(doc)[node]["record"]).read_text())["container"]
        assert c["image_sha256"] == sha and c["image_record"]["sha256"] == sha, c
        assert c["image_record"]["digest"] == "sha256:" + "d" * 64 and c["image_record"]["reference"].startswith("docker://")
    other = tmp_path / "other.sqsh"
    shutil.copyfile(sqsh, other)
    (tmp_path / "extra").mkdir()
    (tmp_path / "extra" / "note").write_text("one file more\n")
    subprocess.run(["mksquashfs", str(tmp_path / "extra"), str(other), "-quiet"], check=True, capture_output=True)
    p, doc = cluster_run(tmp_path / "r2", copy, "--image-record", record, "--plant", f"cluster.image={CLUSTER}2:{other}",
                         checks="versions")
    n = by_node(doc)
    assert n[f"{CLUSTER}1"]["accepted"] and n[f"{CLUSTER}3"]["accepted"], n
    bad = n[f"{CLUSTER}2"]
    assert not bad["accepted"] and bad["causes"] == ["image differs"], bad
    theirs = "sha256:" + subprocess.run(["sha256sum", str(other)], capture_output=True, text=True).stdout.split()[0]
    assert f"{theirs} on this node vs {sha} (record {record})" in bad["reasons"][0], bad["reasons"]


def test_an_image_broken_for_every_node_is_a_fleet_wide_cause_and_drains_nothing(pyxis, tmp_path) -> None:
    """Every node is given a file that is no squashfs: enroot's 'Invalid image format' on each, one cause, and
    --drain drains none of them (the guard: a cause this wide is the run's, not the nodes')."""
    broken = tmp_path / "broken.sqsh"
    broken.write_bytes(b"not a squashfs\n" * 64)
    p, doc = cluster_run(tmp_path / "r", str(broken), "--drain", checks="versions")
    for n in doc["nodes"]:
        assert not n["accepted"] and n["causes"] == ["container did not start"], n
        assert "Invalid image format" in n["reasons"][0] and "its container did not start: " in n["reasons"][0], n
    assert doc["guard"]["fleet_wide"]["cause"] == "container did not start" and not doc["guard"]["drain"], doc["guard"]
    states = subprocess.run(["sinfo", "-h", "-N", "-n", ",".join(NODES), "-o", "%N %T"], capture_output=True,
                            text=True).stdout
    assert "drain" not in states, states


def test_a_container_that_cannot_start_names_the_node_in_pyxiss_words(pyxis, image, tmp_path) -> None:
    """A mount whose source is not there: Pyxis's own line on each node, the node named, rejected."""
    p, doc = cluster_run(tmp_path / "r", str(image), "--container-mounts", f"{tmp_path}/absent:/mnt",
                         checks="versions")
    for n in doc["nodes"]:
        assert n["causes"] == ["container did not start"], n
        assert f"--container-mounts: source path does not exist: {tmp_path}/absent" in n["reasons"][0], n
    assert all(f"{n}:" in p.stdout or n in p.stdout for n in NODES), p.stdout[-2000:]


def test_a_spec_pins_the_image_checksum_and_the_launchers_versions() -> None:
    """software.image_sha256 / slurm / pyxis / enroot: a node that differs is rejected, naming the pin; the image
    first, as its own cause ('image differs'), the launcher as drift."""
    import dataclasses

    from trainready.manifest.drift import versions
    from trainready.cluster.judge.verdict import NodeInput, decide
    from trainready.spec import load_spec

    spec, _ = load_spec(SPEC)
    pinned = dataclasses.replace(spec, software=dataclasses.replace(
        spec.software, image_sha256="sha256:" + "a" * 64, slurm="22.05", pyxis="0.24", enroot="4.1"))

    def node(name: str, sha: str, slurmd: str) -> NodeInput:
        manifest = {"container": {"image_sha256": sha},
                    "launcher": {"slurmctld": "22.05.8", "slurmd": slurmd, "pyxis": "0.24.0", "enroot": "4.1.2"}}
        rec = {"node": name, "report": {"results": []}, "manifest": manifest, "versions": versions(manifest)}
        return NodeInput(name, rec)

    v = {n.node: n for n in decide([node("a", "sha256:" + "a" * 64, "22.05.8"), node("b", "sha256:" + "b" * 64,
                                    "22.05.8"), node("c", "sha256:" + "a" * 64, "23.02.1")], pinned, [], []).nodes}
    assert v["a"].accepted, v["a"]
    assert v["b"].causes == ("image differs",) and v["b"].reasons[0] == (
        f"image differs: sha256:{'b' * 64} vs sha256:{'a' * 64} (spec)"), v["b"]
    assert v["c"].causes == ("drift slurmd",) and "slurmd 22.05 (spec) ≠ 23.02.1" in v["c"].reasons[0], v["c"]


def test_a_pyxis_built_for_another_slurm_is_named_with_pyxiss_rule(pyxis, image, tmp_path) -> None:
    """pyxis compiled against another release's slurm_version.h (23.02.1) in this cluster's plugstack.conf: Slurm's
    sbatch refuses it ('Incompatible plugin version'); `cluster run` says so first, in one line naming the plugin's
    Slurm, the running one and Pyxis's rule (exit 2), and submits nothing.  plugstack.conf is put back afterwards."""
    src = sorted((REPO.parent / "shared" / "thirdparty").glob("pyxis-*-src.tar.gz"))
    if not src:
        pytest.skip("no pyxis-*-src.tar.gz in ../shared/thirdparty to build the mismatched plugin from")
    hdr = tmp_path / "inc" / "slurm"
    hdr.mkdir(parents=True)
    text = Path("/usr/include/slurm/slurm_version.h").read_text()
    (hdr / "slurm_version.h").write_text(re.sub(r"(#define SLURM_VERSION_NUMBER) 0x\w+", r"\1 0x170201", text))
    build = tmp_path / "pyxis"
    build.mkdir()
    subprocess.run(["tar", "xzf", str(src[-1]), "-C", str(build), "--strip-components=1"], check=True)
    subprocess.run(["make", "-s"], cwd=build, env={**os.environ, "CPPFLAGS": f"-I{tmp_path / 'inc'}"}, check=True,
                   capture_output=True, timeout=300)
    plugstack = Path(CONF).with_name("plugstack.conf")
    kept = plugstack.read_text()
    plugstack.write_text(re.sub(r"\S*spank_pyxis\.so", str(build / "spank_pyxis.so"), kept))
    try:
        p = run_cli("cluster", "run", "--nodelist", f"{CLUSTER}[1-3]", "--results", str(tmp_path / "r"), "--spec",
                    SPEC, "--only", "versions", "--time", "3:00", "--container-image", str(image), timeout=300)
        sb = subprocess.run(["sbatch", "--parsable", "--wrap", "true", "-o", "/dev/null"], capture_output=True,
                            text=True, timeout=60)
    finally:
        plugstack.write_text(kept)
    last = p.stderr.strip().splitlines()[-1]  # the progress lines before it, then the one error line
    assert p.returncode == 2 and f"{build / 'spank_pyxis.so'} was built for Slurm 23.02.1 while Slurm 22.05.8 runs" \
        in last and "must be compiled against the Slurm release deployed" in last, p.stderr
    assert not list((tmp_path / "r").glob("runs/*/job/accept.sbatch")), "nothing is submitted"
    assert sb.returncode != 0 and "Incompatible plugin version" in sb.stderr, sb  # Slurm's own refusal


@pytest.mark.parametrize("ref", ["nvcr.io#nvidia/pytorch:25.01-py3", "docker://ubuntu:24.04",
                                 "nvcr.io#nvidia/pytorch@sha256:" + "c" * 64])
def test_registry_references_pass_to_pyxis_unchanged(ref: str, tmp_path: Path) -> None:
    """The batch script hands Pyxis the reference as given (no file to checksum: none is read), runs the staged
    trainready on the image's python3, and a pinned digest is recorded as the image's digest."""
    import shlex

    from trainready.cluster.control import image
    from trainready.cluster import steps as run
    from trainready.cluster.options import Container, FleetOptions

    opts = FleetOptions(results=tmp_path, container=Container(ref))
    script = run.batch_script(opts)
    assert f"IMAGE={shlex.quote(ref)}\n" in script and '--container-image="$IMAGE"' in script, script
    assert f"python3 {tmp_path}/.trainready/boot.py cluster node-task" in script, script
    assert f"--image {shlex.quote(ref)}" in script, script
    facts = image.node_facts(ref, env={})
    assert facts["image"] == ref and facts["image_sha256"] is None
    assert facts["digest"] == ("sha256:" + "c" * 64 if "@sha256:" in ref else None), facts
