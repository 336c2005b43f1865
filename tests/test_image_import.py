"""`trainready image import` on real parts: a local OCI registry (scripts/local-registry.sh: docker-registry on
127.0.0.1, images pushed with skopeo) and enroot built from ../shared/thirdparty, importing over plain HTTP."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import SRC, run_cli
from image_parts import Registry, enroot_env, registry_script, registry_session

pytestmark = pytest.mark.slow
PORT = 5613


@pytest.fixture(scope="module")
def registry():  # type: ignore[no-untyped-def]
    yield from registry_session(PORT, big_mib=96)


@pytest.fixture(scope="module")
def env(registry: Registry) -> dict[str, str]:
    return enroot_env()


def sha256(path: Path) -> str:
    return "sha256:" + subprocess.run(["sha256sum", str(path)], capture_output=True, text=True).stdout.split()[0]


def test_import_by_digest_writes_the_squashfs_and_its_record_and_is_reproducible(registry, env, tmp_path) -> None:
    ref = registry.pinned("small")
    (tmp_path / "a").mkdir()
    p = run_cli("image", "import", ref, "--out", str(tmp_path / "a"), env=env)
    assert p.returncode == 0, p.stderr
    sqsh = next((tmp_path / "a").glob("*.sqsh"))
    doc = json.loads(Path(f"{sqsh}.json").read_text())
    assert doc["schema"] == "trainready.image/1" and doc["digest"] == ref.split("@")[1] and doc["tag"] is None, doc
    assert doc["sha256"] == sha256(sqsh) and doc["size_bytes"] == sqsh.stat().st_size and doc["file"] == sqsh.name
    assert doc["enroot"]["version"] == "4.1.2" and doc["enroot"]["squash_options"] and len(doc["layers"]) == 1, doc
    assert doc["reference"] == f"docker://{ref}" and doc["import_s"] > 0, doc
    assert sorted(x.name for x in (tmp_path / "a").iterdir()) == [sqsh.name, f"{sqsh.name}.json"]
    again = run_cli("image", "import", ref, "--out", str(tmp_path / "b.sqsh"), env=env)  # SOURCE_DATE_EPOCH: same bytes
    assert again.returncode == 0 and sha256(tmp_path / "b.sqsh") == doc["sha256"], again.stderr
    same = run_cli("image", "import", ref, "--out", str(sqsh), env=env)
    assert same.returncode == 0 and "already there" in same.stdout, same


def test_a_tag_is_refused_then_resolved(registry, env, tmp_path) -> None:
    tagged = f"{registry.host}#trainready/small:v1"
    p = run_cli("image", "import", tagged, "--out", str(tmp_path), env=env)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "names a tag, not a digest" in p.stderr and "@sha256:" in p.stderr and "--resolve" in p.stderr, p.stderr
    assert not list(tmp_path.iterdir())
    r = run_cli("image", "import", tagged, "--resolve", "--out", str(tmp_path), env=env)
    assert r.returncode == 0, r.stderr
    doc = json.loads(next(tmp_path.glob("*.sqsh.json")).read_text())
    assert doc["tag"] == "v1" and doc["digest"] == registry.refs["small"].split("@")[1], doc


def test_a_digest_the_registry_does_not_hold_is_refused(registry, env, tmp_path) -> None:
    wrong = registry.pinned("small").split("@")[0] + "@" + registry.refs["other"].split("@")[1]
    p = run_cli("image", "import", wrong, "--out", str(tmp_path), env=env)
    assert p.returncode == 1 and "404" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not list(tmp_path.iterdir())


def test_a_manifest_that_does_not_hash_to_the_pin_is_refused_naming_both(registry, env, tmp_path) -> None:
    """The registry's stored manifest of `other` is changed (one byte more): enroot would import it; the pin
    check refuses it, naming the pin and the sha256 it got; nothing is written.  Put back afterwards."""
    digest = registry.refs["other"].split("@")[1]
    hexd = digest.split(":")[1]
    blob = registry.state / "data" / "docker" / "registry" / "v2" / "blobs" / "sha256" / hexd[:2] / hexd / "data"
    kept = blob.read_bytes()
    blob.write_bytes(kept + b" ")
    try:
        p = run_cli("image", "import", registry.pinned("other"), "--out", str(tmp_path), env=env)
    finally:
        blob.write_bytes(kept)
    got = "sha256:" + __import__("hashlib").sha256(kept + b" ").hexdigest()
    assert p.returncode == 1 and f"pin {digest} has sha256 {got}" in p.stderr, p.stderr
    assert not list(tmp_path.iterdir())


def test_a_registry_stopped_mid_import_leaves_no_file_and_says_why_in_enrootss_words(registry, env, tmp_path) -> None:
    """The registry is frozen at enroot's first request for the big image, then killed: enroot's own error line,
    exit 1, and neither a .sqsh, a part file nor a record in --out.  The registry is brought up again after."""
    log = registry.state / "registry.log"
    start = log.stat().st_size
    e = {**os.environ, **env, "PYTHONPATH": str(SRC)}
    proc = subprocess.Popen([sys.executable, "-m", "trainready", "image", "import", registry.pinned("big"), "--out",
                             str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with open(log, "rb") as fh:
                fh.seek(start)
                if b'"curl/' in fh.read() and b"trainready/big" in log.read_bytes()[start:]:
                    break
            time.sleep(0.01)
        os.kill(registry.pid(), signal.SIGSTOP)
        time.sleep(0.5)
        os.kill(registry.pid(), signal.SIGKILL)
        out, err = proc.communicate(timeout=120)
    finally:
        registry_script("up", registry.port)
    assert proc.returncode == 1 and "enroot import" in err and "failed" in err, err
    assert "curl" in err or "[ERROR]" in err, err
    assert not list(tmp_path.iterdir()), list(tmp_path.iterdir())


def test_a_full_destination_leaves_no_file(registry, env, tmp_path) -> None:
    """--out on a 16 MiB tmpfs, the 96 MiB image: mksquashfs's own words, exit 1, nothing left there."""
    d = tmp_path / "small-fs"
    d.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(d)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (not root)")
    try:
        p = run_cli("image", "import", registry.pinned("big"), "--out", str(d), env=env)
        left = list(d.iterdir())
    finally:
        subprocess.run(["umount", str(d)], capture_output=True)
    assert p.returncode == 1 and "enroot import" in p.stderr, p.stderr
    assert not left, left
