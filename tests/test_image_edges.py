"""The image code's edges without a registry: `IMAGE@sha256:HEX` read as enroot reads it, and a symbolic link at
NAME.sqsh (dangling or not) refused, never followed nor looped on."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from trainready.errors import ImageError
from trainready.image.importer import publish
from trainready.image.ref import parse

HEX = "ab" * 32


def test_image_at_digest_is_an_image_and_its_pin_never_a_user() -> None:
    for given in (f"ubuntu@sha256:{HEX}", f"docker://ubuntu@sha256:{HEX}"):
        ref = parse(given)
        assert (ref.user, ref.image, ref.tag, ref.digest) == (None, "library/ubuntu", None, f"sha256:{HEX}"), ref
    ref = parse(f"me@ubuntu@sha256:{HEX}")
    assert (ref.user, ref.image, ref.digest) == ("me", "library/ubuntu", f"sha256:{HEX}")
    assert parse("me@ubuntu:22.04").user == "me" and parse("me@ubuntu:22.04").tag == "22.04"


@pytest.mark.parametrize("target", ["missing.sqsh", "other.sqsh"])
def test_a_symbolic_link_at_the_squashfs_name_is_refused_never_followed(tmp_path: Path, target: str) -> None:
    (tmp_path / "other.sqsh").write_bytes(b"someone else's")
    part, dest = tmp_path / ".img.sqsh.part-1", tmp_path / "img.sqsh"
    part.write_bytes(b"the import")
    dest.symlink_to(tmp_path / target)
    doc = {"sha256": "sha256:" + "0" * 64, "reference": "docker://r#img@sha256:" + HEX}
    with pytest.raises(ImageError, match=rf"img.sqsh is a symbolic link \(to {tmp_path}/{target}\): not overwritten"):
        publish(part, dest, doc)  # a dangling link sent this into unbounded recursion
    assert os.readlink(dest) == str(tmp_path / target) and (tmp_path / "other.sqsh").read_bytes() == b"someone else's"
    assert not (tmp_path / "img.sqsh.json").exists()


def test_what_enroot_used_is_held_to_the_verified_manifest_naming_both() -> None:
    from trainready.image.importer import held_to, parsed_is_verified
    from trainready.image.registry import Manifest

    ref = parse(f"reg:5000#img@sha256:{HEX}")
    man = Manifest(f"sha256:{HEX}", None, "sha256:" + "c" * 64, ("sha256:" + "1" * 64,))
    held_to(man, {"sha256:" + "c" * 64, "sha256:" + "1" * 64}, ref)  # the same blobs: nothing said
    with pytest.raises(ImageError, match=r"names sha256:1{64}, enroot fetched sha256:2{64} instead; nothing published"):
        held_to(man, {"sha256:" + "c" * 64, "sha256:" + "2" * 64}, ref)
    parsed_is_verified(man, ("http://reg:5000/v2/img/manifests/x", f"sha256:{HEX}"), ref)
    with pytest.raises(ImageError, match=rf"another manifest than the pin: sha256:0{{64}} from http://r/m, where the "
                                         rf"verified manifest is sha256:{HEX}; nothing published"):
        parsed_is_verified(man, ("http://r/m", "sha256:" + "0" * 64), ref)
    with pytest.raises(ImageError, match="the manifest enroot fetched was not seen"):  # fails closed
        parsed_is_verified(man, None, ref)
