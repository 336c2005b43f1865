"""Credentials for a registry, chosen as enroot chooses them, and kept with the host they are for.

enroot (src/docker.sh `docker::_authenticate`, `docker::_parse_uri`) reads ENROOT_CONFIG_PATH/.credentials (netrc
format):

* the user: the reference's `USER@`, else the login of the first `machine REGISTRY login ...` line (REGISTRY
  without its port);
* credentials are used only when a `machine REGISTRY login USER` line exists; then curl(1) is handed the file
  (`--netrc-file`) for the token realm, and takes the entry of the realm's own host (its first `machine` line,
  else the `default` line): so the realm's host gets its own password, never the registry's.  Without such a
  line nothing is sent: a `default` line alone sends nothing to any registry;
* a password that starts with `$` names an environment variable (enroot's common::evalnetrc).

Every request goes through `opener`: over https only, unless ENROOT_ALLOW_HTTP is set (enroot's curl gets
`--proto =https`, which refuses an http redirect or realm too), and an Authorization header is dropped at a
redirect to another scheme, host or port (curl(1) sends credentials to the host it was given only, without
--location-trusted).
"""

from __future__ import annotations

import base64
import os
import re
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from trainready.errors import ImageError


@dataclass(frozen=True)
class Entry:
    machine: str | None  # None: the `default` entry
    login: str
    password: str


def _tokens(text: str) -> list[str]:
    """The file's words; a `macdef` line's rest and its body (to the next empty line) left out."""
    out: list[str] = []
    skip = False
    for line in text.splitlines():
        if skip:
            skip = bool(line.strip())
            continue
        words = line.split()
        if "macdef" in words:
            words, skip = words[: words.index("macdef")], True
        out += words
    return out


def entries(path: Path) -> list[Entry]:
    """The netrc entries in file order, or [] when the file cannot be read."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    out: list[Entry] = []
    cur: dict[str, str] | None = None
    toks = iter(_tokens(text))
    for tok in toks:
        if tok in ("machine", "default"):
            if cur is not None:
                out.append(Entry(cur.get("machine"), cur.get("login", ""), cur.get("password", "")))
            cur = {"machine": next(toks, "")} if tok == "machine" else {}
        elif tok in ("login", "password", "account") and cur is not None:
            cur[tok] = next(toks, "")
    if cur is not None:
        out.append(Entry(cur.get("machine"), cur.get("login", ""), cur.get("password", "")))
    return out


def _password(text: str) -> str:
    """'$NAME' or '${NAME}': that environment variable (enroot evaluates such a password); else as written."""
    m = re.fullmatch(r"\$(?:\{(\w+)\}|(\w+))", text)
    return os.environ.get(m.group(1) or m.group(2), "") if m else text


def basic_for_realm(creds: Path, registry: str, user: str | None, realm: str) -> str | None:
    """'Basic ...' for the token request to `realm`, as enroot + curl choose it; None: nothing is sent."""
    host = registry.rsplit(":", 1)[0]  # enroot's ${registry%:*}
    found = entries(creds)
    user = user or next((e.login for e in found if e.machine == host), None)
    if not user or not any(e.machine == host and e.login == user for e in found):
        return None
    realm_host = urllib.parse.urlsplit(realm).hostname or ""
    entry = next((e for e in found if e.machine == realm_host), None) or next(
        (e for e in found if e.machine is None), None)
    if entry is None:
        return None
    return "Basic " + base64.b64encode(f"{entry.login}:{_password(entry.password)}".encode()).decode()


def check_scheme(url: str, allow_http: bool, what: str) -> None:
    """https, or http where ENROOT_ALLOW_HTTP allows it; else one ImageError naming `what`."""
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    if scheme != "https" and not (allow_http and scheme == "http"):
        raise ImageError(f"{what} {url}: not https, and ENROOT_ALLOW_HTTP is not set in enroot's configuration: "
                         "refused (no request sent)")


class _Redirects(urllib.request.HTTPRedirectHandler):
    def __init__(self, allow_http: bool) -> None:
        self.allow_http = allow_http

    def redirect_request(self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str, headers: Any,
                         newurl: str) -> urllib.request.Request | None:
        check_scheme(newurl, self.allow_http, f"{req.full_url}: redirected to")
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is None:
            return None
        a, b = urllib.parse.urlsplit(req.full_url), urllib.parse.urlsplit(new.full_url)
        if (a.scheme, a.hostname, a.port) != (b.scheme, b.hostname, b.port):
            new.remove_header("Authorization")  # credentials stay with the host they were given for
        return new


def opener(allow_http: bool) -> urllib.request.OpenerDirector:
    return urllib.request.build_opener(_Redirects(allow_http))
