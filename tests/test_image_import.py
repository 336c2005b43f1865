"""`trainready image import` on real parts: a local OCI registry (scripts/local-registry.sh: docker-registry on
127.0.0.1, images pushed with skopeo) and enroot built from ../shared/thirdparty, importing over plain HTTP."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
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


class Negotiating:
    """A registry front on 127.0.0.1 that answers each client by what it asks.  A request accepting both single
    manifests and indexes (trainready's) gets the genuine manifest from the registry behind it.  mode "index": one
    asking for lists/indexes only (enroot's first request, its src/docker.sh) gets an index whose amd64/arm64 entry
    is another image's manifest, whose manifest and blobs are then taken from its own repository.  mode "twice":
    one asking for single manifests only (enroot's second request) gets the pinned manifest with its layers listed
    twice (the same blobs: a cache of blobs alone cannot tell)."""

    def __init__(self, behind: int, pinned: str, other_repo: str, other_digest: str, mode: str = "index") -> None:
        import http.server
        import threading
        import urllib.request

        index = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [
            {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": other_digest, "size": 1,
             "platform": {"architecture": a, "os": "linux"}} for a in ("amd64", "arm64")]}).encode()
        self.indexes_served = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            timeout = 30

            def _answer(self, body: bool) -> None:
                accept = self.headers.get("Accept", "")
                if mode == "index" and self.path.endswith(f"/manifests/{pinned}") and body and \
                        "manifest.v2+json" not in accept and "image.manifest.v1+json" not in accept:
                    outer.indexes_served += 1
                    return self._send(200, {"Content-Type": "application/vnd.oci.image.index.v1+json"}, index, body)
                code, headers, data = self._behind(self.path, accept)
                if mode == "twice" and code == 200 and "/manifests/" in self.path and "index" not in accept:
                    doc = json.loads(data)
                    doc["layers"] = doc["layers"] * 2
                    outer.indexes_served += 1
                    data = json.dumps(doc).encode()
                if code == 404:
                    code, headers, data = self._behind(re.sub(r"^/v2/[^/]+/[^/]+/", f"/v2/{other_repo}/", self.path), accept)
                self._send(code, headers, data, body)

            def _behind(self, path: str, accept: str) -> tuple[int, dict[str, str], bytes]:
                req = urllib.request.Request(f"http://127.0.0.1:{behind}{path}", headers={"Accept": accept} if accept else {})
                try:
                    with urllib.request.urlopen(req, timeout=30) as r:
                        return r.status, {"Content-Type": r.headers.get("Content-Type", "")}, r.read()
                except urllib.error.HTTPError as exc:
                    return exc.code, {"Content-Type": "application/json"}, exc.read()

            def _send(self, code: int, headers: dict[str, str], data: bytes, body: bool) -> None:
                self.send_response(code)
                for k, v in {**headers, "Content-Length": str(len(data))}.items():
                    self.send_header(k, v)
                self.end_headers()
                if body:
                    self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 - the http.server API
                self._answer(True)

            def do_HEAD(self) -> None:  # noqa: N802
                self._answer(False)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.mark.parametrize("mode", ["index", "twice"])
def test_a_registry_that_negotiates_for_enroot_publishes_nothing_naming_both(registry, env, tmp_path, mode) -> None:
    """trainready's request gets image small's genuine manifest (the pin checks); enroot's own requests get an
    index pointing at image other, or small's manifest with its layers twice.  enroot would import that under
    small's pin: the manifest enroot parsed is held to the verified one, and nothing is published."""
    small, other = registry.refs["small"].split("@")[1], registry.refs["other"].split("@")[1]
    front = Negotiating(registry.port, small, "trainready/other", other, mode)
    try:
        p = run_cli("image", "import", f"127.0.0.1:{front.port}#trainready/small@{small}", "--out", str(tmp_path),
                    env=env)
    finally:
        front.close()
    assert front.indexes_served >= 1  # enroot was told another story than trainready
    assert p.returncode == 1 and "enroot fetched another manifest than the pin: sha256:" in p.stderr, p.stdout + p.stderr
    assert f"the verified manifest is {small}; nothing published" in p.stderr, p.stderr
    assert mode != "index" or f"enroot fetched another manifest than the pin: {other} from " in p.stderr, p.stderr
    assert not list(tmp_path.iterdir()), list(tmp_path.iterdir())
    ok = run_cli("image", "import", registry.pinned("small"), "--out", str(tmp_path), env=env)  # told one story: fine
    assert ok.returncode == 0 and len(list(tmp_path.glob("*.sqsh"))) == 1, ok.stderr
