"""Image references as enroot and Pyxis spell them: `docker://[USER@][REGISTRY#]IMAGE[:TAG][@sha256:HEX]`, or the
same without `docker://` (Pyxis's `--container-image`).  enroot's docs ("enroot import"): with no `REGISTRY#`
the image is on Docker Hub (registry-1.docker.io, `library/` for a one-part name)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from trainready.errors import UsageError

HUB = "registry-1.docker.io"
_REF = re.compile(r"^(?:docker://)?(?:(?P<user>[^@#/:]+)@)?(?:(?P<registry>[^#/@]+)#)?(?P<image>[a-z0-9][a-z0-9._/-]*)"
                  r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?(?:@(?P<digest>sha256:[0-9a-f]{64}))?$")
_NO_USER = re.compile(_REF.pattern.replace(r"(?:(?P<user>[^@#/:]+)@)?", "(?P<user>)"))
PIN_HINT = "pin it as REGISTRY#IMAGE@sha256:DIGEST (e.g. `enroot digest docker://REGISTRY#IMAGE:TAG` prints it), or pass --resolve"


@dataclass(frozen=True)
class ImageRef:
    """One registry image; `digest` is the pin (None: a tag alone)."""

    given: str
    user: str | None
    registry: str
    image: str
    tag: str | None
    digest: str | None

    def uri(self, with_user: bool = True) -> str:
        """enroot's URI: docker://[USER@]REGISTRY#IMAGE[:TAG][@DIGEST] (a digest wins over a tag in enroot)."""
        user = f"{self.user}@" if self.user and with_user else ""
        tag = f":{self.tag}" if self.tag else ""
        pin = f"@{self.digest}" if self.digest else ""
        return f"docker://{user}{self.registry}#{self.image}{tag}{pin}"

    def pinned(self, digest: str) -> ImageRef:
        return replace(self, digest=digest)

    def file_stem(self) -> str:
        """A file name for the image: IMAGE with '/' as '+', then the digest's first 12 hex digits."""
        short = self.digest.split(":", 1)[1][:12] if self.digest else (self.tag or "latest")
        return f"{self.image.replace('/', '+')}+{short}"


def parse(text: str) -> ImageRef:
    """A registry reference, or one usage line saying what was expected.  `IMAGE@sha256:HEX` is an image and its
    digest, never a user `IMAGE` and an image `sha256` (enroot's src/docker.sh reads it so too)."""
    m = _REF.match(text.strip())
    if m and m["user"] and not m["digest"] and re.fullmatch(r"sha256:[0-9a-f]{64}", f"{m['image']}:{m['tag']}"):
        m = _NO_USER.match(text.strip())
    if not m or text.startswith(("/", "./", "../")):
        raise UsageError(f"image reference {text!r}: expected docker://[USER@][REGISTRY#]IMAGE[:TAG]@sha256:DIGEST "
                         "or REGISTRY#IMAGE@sha256:DIGEST")
    registry, image = m["registry"] or HUB, m["image"]
    if registry == HUB and "/" not in image:
        image = f"library/{image}"
    return ImageRef(text.strip(), m["user"] or None, registry, image, m["tag"], m["digest"])


def require_pin(ref: ImageRef) -> None:
    """A reference without a digest: one usage line saying how to pin it."""
    if ref.digest is None:
        raise UsageError(f"image reference {ref.given!r} names a tag, not a digest: {PIN_HINT}")
