"""`trainready image distribute` on a local Slurm cluster of its own (`scripts/local-slurm.sh up --cluster img`,
nodes img1..img3, all on this host): each slurmd gets its own node-local folder (--dest DIR/%n), an image
imported from the local registry with enroot (tests/image_parts.py) is copied by real srun tasks (and sbcast)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

import pytest

from conftest import cluster_session, run_cli, undrain
from image_parts import enroot_env, registry_up

pytestmark = pytest.mark.slow
CLUSTER = "img"
CONF = f"/etc/slurm-{CLUSTER}/slurm.conf"
NODES = [f"{CLUSTER}{k}" for k in (1, 2, 3)]
PORT = 5614


@pytest.fixture(scope="module")
def cluster():  # type: ignore[no-untyped-def]
    with pytest.MonkeyPatch.context() as mp:
        gen = cluster_session("--cluster", CLUSTER)
        nodes = next(gen)
        mp.setenv("SLURM_CONF", CONF)
        yield nodes
        next(gen, None)


@pytest.fixture(scope="module")
def image(cluster, tmp_path_factory) -> Path:  # type: ignore[no-untyped-def]
    """The registry's 96 MiB image, imported once for the module."""
    with registry_up(PORT, big_mib=96) as reg:  # down after the import, also when enroot_env() skips
        d = tmp_path_factory.mktemp("image")
        p = run_cli("image", "import", reg.pinned("big"), "--out", str(d), env=enroot_env())
    assert p.returncode == 0, p.stderr
    return next(d.glob("*.sqsh"))


def distribute(image: Path, dest: str, *extra: str, out: Path | None = None) -> tuple[subprocess.CompletedProcess, dict]:
    out = out or Path(dest.split("%n")[0]) / "distribution.json"
    p = run_cli("image", "distribute", str(image), "--nodelist", f"{CLUSTER}[1-3]", "--dest", dest, "--json", str(out),
                *extra, timeout=600)
    assert p.returncode in (0, 1), p.stderr
    return p, json.loads(out.read_text())


def by_node(doc: dict) -> dict[str, dict]:
    return {n["node"]: n for n in doc["nodes"]}


def sha(path: Path) -> str:
    return "sha256:" + subprocess.run(["sha256sum", str(path)], capture_output=True, text=True).stdout.split()[0]


def test_a_full_node_is_not_ready_then_a_rerun_finishes_the_work(cluster, image, tmp_path) -> None:
    """img3's folder is a 16 MiB tmpfs: cp's own 'No space left on device', not ready, no part file left; img1 and
    img2 copied.  With room again, the rerun skips img1 and img2 and copies img3."""
    full = tmp_path / "img3"
    full.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(full)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (not root)")
    try:
        p, doc = distribute(image, f"{tmp_path}/%n")
        left = sorted(x.name for x in full.iterdir())
    finally:
        subprocess.run(["umount", str(full)], capture_output=True)
    n = by_node(doc)
    assert p.returncode == 1 and n["img1"]["status"] == n["img2"]["status"] == "copied", doc
    assert n["img3"]["status"] == "failed" and "No space left on device" in n["img3"]["words"], n["img3"]
    assert "img3: not ready: " in p.stdout and "No space left on device" in p.stdout, p.stdout
    assert left == [f".{image.name}.lock"], left
    assert doc["not_ready"] == {"img3": n["img3"]["words"]} and doc["bytes"] == 2 * image.stat().st_size, doc
    assert n["img1"]["gb_per_s"] > 0 and doc["gb_per_s"] > 0 and doc["wall_s"] > 0, doc
    for node in ("img1", "img2"):
        assert sha(tmp_path / node / image.name) == doc["sha256"]
    p2, doc2 = distribute(image, f"{tmp_path}/%n")
    n2 = by_node(doc2)
    assert p2.returncode == 0 and [n2[x]["status"] for x in NODES] == ["already", "already", "copied"], doc2
    assert sha(tmp_path / "img3" / image.name) == doc2["sha256"]


def test_a_corrupted_copy_is_found_and_copied_again_and_a_half_written_one_is_never_used(cluster, image, tmp_path):
    """img2 holds a copy with one byte changed and img3 a half-written part file of an interrupted run: img2's copy
    is replaced (naming the sum it had), img3's part file removed and a whole copy written."""
    for node in NODES:
        (tmp_path / node).mkdir()
    bad = bytearray(image.read_bytes())
    bad[len(bad) // 2] ^= 0xFF
    (tmp_path / "img2" / image.name).write_bytes(bytes(bad))
    (tmp_path / "img3" / f".{image.name}.part.12345").write_bytes(image.read_bytes()[:1000])
    p, doc = distribute(image, f"{tmp_path}/%n")
    n = by_node(doc)
    assert p.returncode == 0 and all(n[x]["status"] == "copied" for x in NODES), doc
    assert n["img2"]["words"].startswith("replaced a copy with sha256:"), n["img2"]
    for node in NODES:
        assert sha(tmp_path / node / image.name) == doc["sha256"]
        assert sorted(x.name for x in (tmp_path / node).iterdir()) == [f".{image.name}.lock", image.name]


def test_two_distributions_at_once_take_turns_per_node(cluster, image, tmp_path) -> None:
    """Two runs of the same file at once: each node copies once (the other run finds it there), none fails."""
    docs: list[dict] = []

    def one() -> None:
        docs.append(distribute(image, f"{tmp_path}/%n", out=tmp_path / f"d{threading.get_ident()}.json")[1])

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for node in NODES:
        got = sorted(by_node(d)[node]["status"] for d in docs)
        assert got in (["already", "copied"], ["copied", "copied"]), (node, got)
        assert sha(tmp_path / node / image.name) == docs[0]["sha256"]
        assert not list((tmp_path / node).glob(".*.part.*"))


def test_sbcast_to_one_node_and_an_unavailable_node_is_not_ready(cluster, image, tmp_path) -> None:
    """sbcast(1) into a temporary name, checked and renamed on the node; a drained node is not ready with
    Slurm's state, nothing sent to it (the cluster's nodes share this host: sbcast to one node at a time)."""
    subprocess.run(["scontrol", "update", "nodename=img2", "state=drain", "reason=image-test"], check=True)
    try:
        p = run_cli("image", "distribute", str(image), "--nodelist", "img[1-2]", "--dest", str(tmp_path / "sb"),
                    "--via", "sbcast", "--json", str(tmp_path / "d.json"))
    finally:
        undrain("img2")
    doc = json.loads((tmp_path / "d.json").read_text())
    n = by_node(doc)
    assert p.returncode == 1 and n["img1"]["status"] == "copied" and doc["via"] == "sbcast", (p.stderr, doc)
    assert n["img2"]["status"] == "failed" and n["img2"]["words"].startswith("node unavailable: "), n["img2"]
    assert sha(tmp_path / "sb" / image.name) == doc["sha256"]
    assert sorted(x.name for x in (tmp_path / "sb").iterdir()) == [f".{image.name}.lock", image.name]


def _fake_image(folder: Path, name: str) -> Path:
    """A small file and its `trainready.image/1` record: distribution moves and checks bytes, whatever they are."""
    import hashlib

    folder.mkdir(parents=True, exist_ok=True)
    data = b"squashfs stand-in " * 4096
    sqsh = folder / name
    sqsh.write_bytes(data)
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    (folder / f"{name}.json").write_text(json.dumps({"schema": "trainready.image/1", "reference": "r@" + digest,
                                                     "digest": digest, "sha256": digest, "size_bytes": len(data),
                                                     "file": name}))
    return sqsh


@pytest.mark.parametrize("via", ["sbcast", "copy"])
def test_names_holding_shell_syntax_are_data_never_run(cluster, tmp_path, via) -> None:
    """A file name and --dest holding $(), backticks, quotes, spaces and a line feed: copied byte for byte, nothing
    in them run (the sbcast path built a `bash -c` string with them inside double quotes: `touch` ran)."""
    name = "x$(touch PWNED)`touch PWNED2`'\" \nb.sqsh"
    sqsh = _fake_image(tmp_path / "src $(x)", name)
    dest = f"{tmp_path}/d $(touch {tmp_path}/P1) `touch {tmp_path}/P2` 'q\" \nx" + ("/%n" if via == "copy" else "")
    here = [Path.cwd() / "PWNED", Path.cwd() / "PWNED2"]
    try:
        p = run_cli("image", "distribute", str(sqsh), "--nodelist", "img1", "--dest", dest, "--via", via,
                    "--json", str(tmp_path / "d.json"), timeout=300)
        planted = [x for x in (*here, tmp_path / "P1", tmp_path / "P2") if x.exists()]
    finally:
        for x in here:
            x.unlink(missing_ok=True)
    assert planted == [], planted
    doc = json.loads((tmp_path / "d.json").read_text())
    assert p.returncode == 0 and by_node(doc)["img1"]["status"] == "copied", (p.stdout, p.stderr, doc)
    got = Path(dest.replace("%n", "img1")) / name
    assert got.read_bytes() == sqsh.read_bytes() and doc["sha256"] == "sha256:" + __import__("hashlib").sha256(
        got.read_bytes()).hexdigest()
    assert sorted(x.name for x in got.parent.iterdir()) == [f".{name}.lock", name]


def test_a_part_file_is_never_written_through_a_planted_link_nor_the_lock(cluster, tmp_path) -> None:
    """A shared DEST where someone planted symbolic links at the part names a job id would give, and at the lock:
    the lock link is refused, and with it gone the copy goes to a name of its own, the link's target untouched."""
    sqsh = _fake_image(tmp_path / "src", "img.sqsh")
    dest = tmp_path / "shared"
    dest.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("keep")
    for k in range(1, 64):
        (dest / f".img.sqsh.part.{k}").symlink_to(victim)
    (dest / ".img.sqsh.lock").symlink_to(victim)
    p = run_cli("image", "distribute", str(sqsh), "--nodelist", "img1", "--dest", str(dest), "--json",
                str(tmp_path / "d.json"), timeout=300)
    n = by_node(json.loads((tmp_path / "d.json").read_text()))["img1"]
    assert p.returncode == 1 and n["status"] == "failed" and "is a symbolic link: refused" in n["words"], n
    (dest / ".img.sqsh.lock").unlink()
    p = run_cli("image", "distribute", str(sqsh), "--nodelist", "img1", "--dest", str(dest), "--json",
                str(tmp_path / "d.json"), timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert victim.read_text() == "keep" and (dest / "img.sqsh").read_bytes() == sqsh.read_bytes()
    assert oct((dest / "img.sqsh").stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    old = os.umask(0)
    os.umask(old)
    return old
