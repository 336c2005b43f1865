"""Credentials stay with their registry, against local servers (127.0.0.1 only, each request bounded): a
registry that redirects the manifest to another host, a token realm offered over plain http, an https registry
that redirects to http, and enroot's credentials file read as enroot and curl read it (the realm host's own
entry; a `default` line alone sends nothing)."""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import shutil
import ssl
import subprocess
import threading
from pathlib import Path
from typing import Any, Iterator

import pytest

from trainready.errors import ImageError
from trainready.image import registry
from trainready.image.enroot import Enroot
from trainready.image.ref import parse

MANIFEST = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                       "config": {"digest": "sha256:" + "c" * 64}, "layers": [{"digest": "sha256:" + "1" * 64}]}).encode()
DIGEST = "sha256:" + hashlib.sha256(MANIFEST).hexdigest()


class Server:
    """One HTTP(S) server on 127.0.0.1 whose answers a test sets (`routes`: path → callable(handler) → (code,
    headers, body)); every request's path and Authorization header kept in `seen`."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.seen: list[tuple[str, str | None]] = []
        self.routes: dict[str, Any] = {}
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            timeout = 10

            def do_GET(self) -> None:  # noqa: N802 - the http.server API
                path = self.path.split("?")[0]
                outer.seen.append((path, self.headers.get("Authorization")))
                code, headers, body = outer.routes.get(path, lambda h: (404, {}, b""))(self)
                self.send_response(code)
                for k, v in {**headers, "Content-Length": str(len(body))}.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    made: list[Server] = []
    yield made
    for s in made:
        s.close()


def _enroot(tmp: Path, allow_http: bool, creds: str = "") -> Enroot:
    (tmp / ".credentials").write_text(creds)
    return Enroot("/nonexistent/enroot", "4.1.2", {"ENROOT_CONFIG_PATH": str(tmp), "ENROOT_ALLOW_HTTP":
                                                   "yes" if allow_http else ""})


def _token_registry(reg: Server, realm: str, then: Any) -> None:
    """401 + Bearer challenge without a token; with 'Bearer T': `then`."""
    def manifest(h: Any) -> tuple[int, dict[str, str], bytes]:
        if h.headers.get("Authorization") != "Bearer T":
            return 401, {"WWW-Authenticate": f'Bearer realm="{realm}",service="reg",scope="repository:x:pull"'}, b""
        return then(h)
    reg.routes[f"/v2/trainready/x/manifests/{DIGEST}"] = manifest


def _basic(login: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{login}:{password}".encode()).decode()


TOKEN = (200, {"Content-Type": "application/json"}, b'{"token": "T"}')


def test_a_manifest_redirected_to_another_host_gets_no_authorization(servers: list[Server], tmp_path: Path) -> None:
    reg, other = Server(), Server()
    servers += [reg, other]
    other.routes[f"/m/{DIGEST}"] = lambda h: (200, {}, MANIFEST)
    reg.routes["/token"] = lambda h: TOKEN
    _token_registry(reg, f"http://127.0.0.1:{reg.port}/token",
                    lambda h: (307, {"Location": f"http://localhost:{other.port}/m/{DIGEST}"}, b""))
    e = _enroot(tmp_path, True, "machine 127.0.0.1 login u password pw\n")
    ref = parse(f"u@127.0.0.1:{reg.port}#trainready/x@{DIGEST}")
    assert registry.fetch(e, ref, DIGEST) == MANIFEST
    assert ("/token", _basic("u", "pw")) in reg.seen and (f"/v2/trainready/x/manifests/{DIGEST}", "Bearer T") in reg.seen
    assert other.seen == [(f"/m/{DIGEST}", None)]  # the token stayed with 127.0.0.1:PORT


def test_an_http_realm_is_refused_without_allow_http_and_hears_nothing(servers: list[Server], tmp_path: Path) -> None:
    realm = Server()
    servers.append(realm)
    realm.routes["/token"] = lambda h: TOKEN
    e = _enroot(tmp_path, False, "machine 127.0.0.1 login u password secret\n")
    ref = parse(f"u@127.0.0.1:5000#trainready/x@{DIGEST}")
    with pytest.raises(ImageError, match="token realm http://127.0.0.1:.*not https, and ENROOT_ALLOW_HTTP is not set"):
        registry._token(e, ref, f'Bearer realm="http://127.0.0.1:{realm.port}/token",service="reg"')
    assert realm.seen == []  # the password was never sent in clear text


def test_credentials_are_chosen_as_enroot_and_curl_choose_them(servers: list[Server], tmp_path: Path) -> None:
    """The realm on another host (localhost) gets its own entry; a `default` line alone sends nothing; no user and
    no machine line for the registry: anonymous."""
    reg = Server()
    servers.append(reg)
    reg.routes["/token"] = lambda h: TOKEN
    _token_registry(reg, f"http://localhost:{reg.port}/token", lambda h: (200, {}, MANIFEST))
    cases = (("machine 127.0.0.1 login u password regpw\nmachine localhost login u password realmpw\n", "u",
              _basic("u", "realmpw")),
             ("machine 127.0.0.1 login u password regpw\n", "", None),
             ("default login u password everywhere\n", "u", None),
             ("machine 127.0.0.1\n  login u\n  password regpw\ndefault login d password dpw\n", "", _basic("d", "dpw")))
    for k, (creds, user, want) in enumerate(cases):
        reg.seen.clear()
        e = _enroot(tmp_path, True, creds)
        ref = parse(f"{user + '@' if user else ''}127.0.0.1:{reg.port}#trainready/x@{DIGEST}")
        assert registry.fetch(e, ref, DIGEST) == MANIFEST
        assert [a for p, a in reg.seen if p == "/token"] == [want], (k, reg.seen)


def _tls(tmp: Path) -> tuple[ssl.SSLContext, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed: no certificate for the https registry")
    key, cert = tmp / "key.pem", tmp / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    return ctx, cert


def test_an_https_registry_redirecting_to_http_is_refused(servers: list[Server], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    ctx, cert = _tls(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # OpenSSL's default verify paths: this test's own CA
    reg, plain = Server(ctx), Server()
    servers += [reg, plain]
    plain.routes[f"/m/{DIGEST}"] = lambda h: (200, {}, MANIFEST)
    reg.routes[f"/v2/trainready/x/manifests/{DIGEST}"] = lambda h: (
        302, {"Location": f"http://127.0.0.1:{plain.port}/m/{DIGEST}"}, b"")
    e = _enroot(tmp_path, False)
    ref = parse(f"127.0.0.1:{reg.port}#trainready/x@{DIGEST}")
    with pytest.raises(ImageError, match="redirected to http://127.0.0.1:.*not https"):
        registry.fetch(e, ref, DIGEST)
    assert reg.seen and plain.seen == []
