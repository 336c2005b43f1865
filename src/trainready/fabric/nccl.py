"""What NCCL will use, read from its environment as NCCL reads it (NCCL docs, "Environment Variables";
src/misc/utils.cc parseStringList / matchIfList).

NCCL_IB_HCA and NCCL_SOCKET_IFNAME are comma-separated lists: a leading `^` excludes what matches, a `=` (after
any `^`) asks for exact names, otherwise each entry is a prefix ("mlx5" matches mlx5_0 .. mlx5_17); an entry
may end in `:PORT` (mlx5_0:1), no port matching every port. Unset, NCCL takes every active RDMA port
(NCCL_IB_HCA) and every interface but lo and docker* (NCCL_SOCKET_IFNAME). NCCL_IB_DISABLE=1 or NCCL_NET=Socket
make NCCL leave RDMA for TCP sockets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping


@dataclass(frozen=True)
class Entry:
    """One entry of a NCCL name list."""

    prefix: str
    port: int | None  # None: any port


@dataclass(frozen=True)
class NameList:
    """A NCCL_IB_HCA / NCCL_SOCKET_IFNAME value as NCCL parses it."""

    text: str
    exclude: bool  # leading '^'
    exact: bool  # '=' (after any '^')
    entries: tuple[Entry, ...]

    def matches(self, name: str, port: int | None = None) -> bool:
        """Whether one entry names this device (and port): exact or by prefix, as NCCL's matchIf."""
        return any((name == e.prefix if self.exact else name.startswith(e.prefix))
                   and (e.port is None or port is None or e.port == port) for e in self.entries)

    def selects(self, name: str, port: int | None = None) -> bool:
        """Whether NCCL uses this device/port under the list: matched and included, or unmatched and excluded."""
        return self.matches(name, port) != self.exclude

    def unmatched(self, names: list[tuple[str, int | None]]) -> list[str]:
        """The entries that name no device of `names` (device, port), as written (mlx5_9, mlx5_0:2)."""
        out = []
        for e in self.entries:
            one = NameList(self.text, False, self.exact, (e,))
            if not any(one.matches(n, p) for n, p in names):
                out.append(e.prefix + (f":{e.port}" if e.port is not None else ""))
        return out


def parse(text: str) -> NameList:
    """NCCL's parse of a name list: `^` then `=` then entries NAME[:PORT] separated by commas. A port that is
    not a number is kept in the name (NCCL's atoi would read it as 0, matching no port: named as unmatched)."""
    body = text.strip()
    exclude = body.startswith("^")
    body = body[1:] if exclude else body
    exact = body.startswith("=")
    body = body[1:] if exact else body
    entries = []
    for raw in body.split(","):
        raw = raw.strip()
        if not raw:
            continue
        name, sep, port = raw.partition(":")
        entries.append(Entry(name, int(port)) if sep and port.isdigit() else Entry(raw if sep else name, None))
    return NameList(text, exclude, exact, tuple(entries))


@dataclass(frozen=True)
class NcclEnv:
    """The NCCL variables that decide its network, as set in this process's environment (None: unset)."""

    ib_hca: str | None
    socket_ifname: str | None
    ib_disable: str | None
    net: str | None

    @property
    def rdma_off(self) -> str | None:
        """Why NCCL will not use RDMA at all ('NCCL_IB_DISABLE=1', 'NCCL_NET=Socket'), None when it may."""
        if (self.ib_disable or "").strip() not in ("", "0"):
            return f"NCCL_IB_DISABLE={self.ib_disable}"
        if (self.net or "").strip().lower() == "socket":
            return f"NCCL_NET={self.net}"
        return None


def read_env(environ: Mapping[str, str]) -> NcclEnv:
    return NcclEnv(environ.get("NCCL_IB_HCA"), environ.get("NCCL_SOCKET_IFNAME"), environ.get("NCCL_IB_DISABLE"),
                   environ.get("NCCL_NET"))
