"""Which data a run used, for the record: absolute paths, bytes, token count, dtype, and a
digest of every file, so a colleague can tell whether their copy is the same data.

Digest of each file:
  * ``sha256`` of every byte, for files up to FULL_DIGEST_MAX (1 GiB: ~1-3 s to read);
  * above it ``sha256-sampled``: sha256 of the ASCII text ``"<size in bytes>;"`` followed by
    SAMPLES = 64 blocks of SAMPLE_BLOCK = 1 MiB read at offsets floor(k * (size - 1 MiB) / 63),
    k = 0..63 (first and last MiB included): 64 MiB read whatever the file size.  It tells
    apart files that differ in size or in any sampled block; it is not a full integrity check.
    To reproduce it::

        python3 -c "import hashlib,os,sys; p=sys.argv[1]; n=os.path.getsize(p); B=1<<20; f=open(p,'rb'); \\
          h=hashlib.sha256(f'{n};'.encode()); [h.update((f.seek((n-B)*k//63), f.read(B))[1]) for k in range(64)]; \\
          print(h.hexdigest())" FILE
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainready.data.megatron import sampled_offsets, sha256_files
from trainready.data.source import TokenSource

FULL_DIGEST_MAX = 1 << 30  # bytes; larger files get the sampled digest
SAMPLE_BLOCK = 1 << 20  # bytes per sampled block
SAMPLES = 64  # sampled blocks per file


@dataclass(frozen=True)
class FileDigest:
    path: str  # absolute
    bytes: int
    algorithm: str  # "sha256" | "sha256-sampled"
    digest: str  # hex

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "bytes": self.bytes, "algorithm": self.algorithm, "digest": self.digest}


@dataclass(frozen=True)
class DataIdentity:
    path: str  # absolute path of what was opened (a Megatron prefix, a .bin or .npy)
    format: str  # megatron | flat | npy
    dtype: str  # token dtype, e.g. uint16
    tokens: int  # tokens in the concatenated stream
    files: tuple[FileDigest, ...]

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "format": self.format, "dtype": self.dtype, "tokens": self.tokens,
                "files": [f.to_json() for f in self.files]}


def file_digest(path: Path, full_max: int = FULL_DIGEST_MAX) -> FileDigest:
    path = Path(path).resolve()
    size = path.stat().st_size
    if size <= full_max:
        return FileDigest(str(path), size, "sha256", sha256_files([path]))
    h = hashlib.sha256(f"{size};".encode())
    with open(path, "rb") as fh:
        for offset in sampled_offsets(size, SAMPLES, SAMPLE_BLOCK):
            fh.seek(offset)
            h.update(fh.read(SAMPLE_BLOCK))
    return FileDigest(str(path), size, "sha256-sampled", h.hexdigest())


def identify(source: TokenSource, full_max: int = FULL_DIGEST_MAX) -> DataIdentity:
    """The identity of an opened (validated) token source."""
    return DataIdentity(str(Path(source.path).resolve()), source.format, source.dtype.name, int(source.num_tokens),
                        tuple(file_digest(p, full_max) for p in source.files))
