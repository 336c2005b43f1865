"""The manifest a pinned digest names, fetched from the registry and checked: its sha256 must be the pin.

enroot checks each layer blob against the digest the manifest gives it, but it does not check the manifest
against the pin (enroot's src/docker.sh); this does.  The registry API is the OCI distribution spec's
(GET /v2/NAME/manifests/REFERENCE); a registry that asks for a token (WWW-Authenticate: Bearer) gets one for the
user of the reference, with the credentials enroot would send from its credentials file
(ENROOT_CONFIG_PATH/.credentials, netrc format; chosen and kept to their host as auth.py says).  No credential is
ever returned or recorded."""

from __future__ import annotations

import hashlib
import json
import platform
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainready.errors import ImageError
from trainready.image import auth
from trainready.image.enroot import Enroot
from trainready.image.ref import ImageRef

ACCEPT = ", ".join(("application/vnd.docker.distribution.manifest.v2+json", "application/vnd.oci.image.manifest.v1+json",
                    "application/vnd.docker.distribution.manifest.list.v2+json", "application/vnd.oci.image.index.v1+json"))
TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Manifest:
    digest: str
    """The pin: sha256 of the manifest (or index) it names."""
    platform_digest: str | None
    """Where the pin names an index: the digest of this architecture's manifest in it (also checked)."""
    config: str
    layers: tuple[str, ...]


def debarch() -> str:
    """This machine's architecture as image indexes name it (enroot's common::debarch)."""
    m = platform.machine()
    return {"x86_64": "amd64", "aarch64": "arm64", "ppc64le": "ppc64le"}.get(m, m)


def _token(e: Enroot, ref: ImageRef, challenge: str) -> str:
    """A bearer token from the realm the registry's WWW-Authenticate names."""
    params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
    realm = params.pop("realm", "")
    if not realm:
        raise ImageError(f"{ref.registry}: could not read the authentication realm from {challenge!r}")
    auth.check_scheme(realm, e.allow_http, f"{ref.registry}: token realm")
    req = urllib.request.Request(realm + "?" + urllib.parse.urlencode(params))
    creds = Path(e.config.get("ENROOT_CONFIG_PATH") or "~/.config/enroot").expanduser() / ".credentials"
    if (basic := auth.basic_for_realm(creds, ref.registry, ref.user, realm)) is not None:
        req.add_header("Authorization", basic)
    try:
        with auth.opener(e.allow_http).open(req, timeout=TIMEOUT_S) as r:
            doc = json.loads(r.read())
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise ImageError(f"{ref.registry}: token request to {realm} failed: {exc}") from None
    return "Bearer " + str(doc.get("token") or doc.get("access_token") or "")


def fetch(e: Enroot, ref: ImageRef, reference: str) -> bytes:
    """The manifest bytes as the registry serves them (the bytes its digest is the sha256 of)."""
    url = f"{'http' if e.allow_http else 'https'}://{ref.registry}/v2/{ref.image}/manifests/{reference}"
    header: str | None = None
    for _ in range(2):
        req = urllib.request.Request(url, headers={"Accept": ACCEPT, **({"Authorization": header} if header else {})})
        try:
            with auth.opener(e.allow_http).open(req, timeout=TIMEOUT_S) as r:
                return bytes(r.read())
        except urllib.error.HTTPError as exc:
            challenge = exc.headers.get("WWW-Authenticate", "")
            if exc.code == 401 and header is None and challenge.lower().startswith("bearer"):
                header = _token(e, ref, challenge)
                continue
            raise ImageError(f"{url}: {exc.code} {exc.reason}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise ImageError(f"{url}: {getattr(exc, 'reason', exc)}") from None
    raise ImageError(f"{url}: 401 Unauthorized (credentials for {ref.user or 'anonymous'} refused)")


def _checked(e: Enroot, ref: ImageRef, digest: str) -> dict[str, Any]:
    body = fetch(e, ref, digest)
    got = "sha256:" + hashlib.sha256(body).hexdigest()
    if got != digest:
        raise ImageError(f"{ref.registry}#{ref.image}: the registry's manifest for the pin {digest} has sha256 {got}: "
                         "not the pinned image; nothing imported")
    try:
        doc = json.loads(body)
    except ValueError:
        raise ImageError(f"{ref.registry}#{ref.image}@{digest}: the manifest is not JSON") from None
    return doc if isinstance(doc, dict) else {}


def verified(e: Enroot, ref: ImageRef) -> Manifest:
    """The pinned manifest, its sha256 checked against the pin (and, for an index, this architecture's manifest
    against the index's entry), with its config and layer digests."""
    assert ref.digest is not None
    doc = _checked(e, ref, ref.digest)
    plat = None
    if "manifests" in doc:  # an index / manifest list: enroot takes this architecture's entry
        arch = debarch()
        plat = next((m.get("digest") for m in doc["manifests"] if (m.get("platform") or {}).get("architecture") == arch),
                    None)
        if not plat:
            raise ImageError(f"{ref.uri(False)}: the index has no manifest for {arch}")
        doc = _checked(e, ref, plat)
    layers = tuple(str(x.get("digest")) for x in doc.get("layers") or [])
    return Manifest(ref.digest, plat, str((doc.get("config") or {}).get("digest")), layers)
