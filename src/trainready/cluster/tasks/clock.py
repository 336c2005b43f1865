"""Clock offset of a node against the submitting host, measured NTP-style over one TCP connection.

RFC 5905 §8 on-wire arithmetic: the node sends t1 (its clock), the host stamps t2 on receipt and t3 on
reply, the node stamps t4 on arrival:  offset θ = ((t2 − t1) + (t3 − t4)) / 2,  round trip
δ = (t4 − t1) − (t3 − t2).  The true offset lies within θ ± δ/2; the sample with the smallest δ is kept
(the NTP clock filter's choice).  θ > 0: the host is ahead of the node.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from dataclasses import dataclass
from typing import Callable

SAMPLES = 8  # exchanges per node; the smallest round trip wins
CONNECT_TIMEOUT_S = 10.0
_REQ = struct.Struct("!d")
_REP = struct.Struct("!ddd")


@dataclass(frozen=True)
class ClockSample:
    offset_s: float  # θ: host clock − node clock
    rtt_s: float  # δ

    @property
    def bound_s(self) -> float:
        """|θ| + δ/2: the largest offset consistent with the measurement."""
        return abs(self.offset_s) + self.rtt_s / 2


def direction(offset_s: float, digits: int = 3) -> str:
    """θ (host − node) as people read it: '2.000 s ahead of the submitting host' (θ < 0: the node's clock reads
    later than the host's), '0.250 s behind the submitting host', or 'in step with the submitting host'."""
    if round(offset_s, digits) == 0:
        return "in step with the submitting host"
    return f"{abs(offset_s):.{digits}f} s {'ahead of' if offset_s < 0 else 'behind'} the submitting host"


def ntp(t1: float, t2: float, t3: float, t4: float) -> ClockSample:
    return ClockSample(((t2 - t1) + (t3 - t4)) / 2, (t4 - t1) - (t3 - t2))


class ClockServer:
    """The submitting host's side: answers each 8-byte request with (t1, t2, t3) until stopped."""

    def __init__(self, host: str = "0.0.0.0") -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.sock.listen(256)
        self.sock.settimeout(0.5)
        self.port = self.sock.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="clock-server", daemon=True)

    def __enter__(self) -> "ClockServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(2.0)
        self.sock.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    @staticmethod
    def _answer(conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.settimeout(30.0)
        with conn:
            try:
                while True:
                    data = _recv(conn, _REQ.size)
                    t2 = time.time()
                    if data is None:
                        return
                    (t1,) = _REQ.unpack(data)
                    conn.sendall(_REP.pack(t1, t2, time.time()))
            except OSError:
                return


def _recv(conn: socket.socket, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def measure(addr: str, samples: int = SAMPLES, clock: Callable[[], float] = time.time) -> ClockSample:
    """The node's side: `samples` exchanges with the server at 'host:port'; the one with the smallest δ.
    `clock` is the node's clock (a planted `cluster.clock` shifts it). OSError when the host is unreachable."""
    host, _, port = addr.rpartition(":")
    best: ClockSample | None = None
    with socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S) as conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(samples):
            t1 = clock()
            conn.sendall(_REQ.pack(t1))
            data = _recv(conn, _REP.size)
            t4 = clock()
            if data is None:
                raise OSError("clock server closed the connection")
            _, t2, t3 = _REP.unpack(data)
            s = ntp(t1, t2, t3, t4)
            if best is None or s.rtt_s < best.rtt_s:
                best = s
    assert best is not None
    return best
