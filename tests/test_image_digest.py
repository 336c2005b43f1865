"""The image digest: `node --image-digest`, the env var, what the runtime exposes (Podman), else honestly unknown;
the versions check names where the digest it judged came from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainready.manifest import container

D = "sha256:" + "ab" * 32
OTHER = "sha256:" + "cd" * 32


def test_runtime_digest_only_where_the_runtime_exposes_one(tmp_path: Path) -> None:
    # Docker: /.dockerenv is empty and the hostname is the container ID: not a digest -> unknown
    (tmp_path / ".dockerenv").touch()
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/hostname").write_text("4f1c2b3a9d8e\n")
    assert container.image_digest(None, {}, tmp_path) == (None, container.UNKNOWN_DIGEST)
    assert container.UNKNOWN_DIGEST.startswith("unknown") and "--image-digest" in container.UNKNOWN_DIGEST
    # Podman (privileged): image= run by digest wins; else imageid=, said to be the local image ID
    (tmp_path / "run").mkdir()
    env = tmp_path / "run/.containerenv"
    env.write_text(f'engine="podman-4.9.3"\nname="t"\nimage="docker.io/library/ubuntu:24.04"\nimageid="{"cd" * 32}"\n')
    digest, source = container.image_digest(None, {}, tmp_path)
    assert digest == OTHER and "local image ID" in source and "not the registry's manifest digest" in source
    env.write_text(f'image="nvcr.io/nvidia/pytorch@{D}"\nimageid="{"cd" * 32}"\n')
    assert container.image_digest(None, {}, tmp_path)[0] == D
    env.write_text("")  # a rootless, unprivileged container: the file exists, empty
    assert container.image_digest(None, {}, tmp_path)[0] is None
    # the flag wins over the env var, which wins over the runtime
    assert container.image_digest(D, {container.DIGEST_ENV: OTHER}, tmp_path) == (D, "--image-digest")


@pytest.mark.slow
def test_node_takes_image_digest_and_versions_judges_it(cli, tmp_path: Path) -> None:
    spec = tmp_path / "pin.toml"
    spec.write_text(f'name = "pin"\n[software]\nimage_digest = "{D}"\n')
    wrong = cli("node", "--only", "versions", "--spec", str(spec), "--image-digest", OTHER, "--json", "-",
                env={container.DIGEST_ENV: ""})
    assert wrong.returncode == 1, wrong.stderr  # the mismatch first
    msg = json.loads(wrong.stdout)["results"][0]["message"]
    assert f"image digest {OTHER} (from --image-digest) is not the spec's {D}" in msg
    ok = cli("node", "--only", "versions", "--spec", str(spec), "--image-digest", D, "--json", "-",
             env={container.DIGEST_ENV: ""})
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert f"image {D}" in json.loads(ok.stdout)["results"][0]["message"]
    bad = cli("node", "--image-digest", "sha256:...")
    assert bad.returncode == 2 and "--image-digest 'sha256:...': expected an image digest" in bad.stderr
    assert "Traceback" not in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
