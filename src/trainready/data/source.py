"""One interface over every token-file format: `open_tokens(path) -> TokenSource`.

A TokenSource is the concatenated token stream of a file (Megatron: all
sequences in `.bin` order; flat: the whole file), sliced by token offset.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from trainready.data.flat import FlatTokens, as_dtype
from trainready.data.megatron import IndexedDataset, bin_path, idx_path, sample_hash, sha256_files
from trainready.errors import DataError


@runtime_checkable
class TokenSource(Protocol):
    path: str  # what was opened
    format: str  # "megatron", "flat" (raw .bin) or "npy"
    dtype: np.dtype
    num_tokens: int  # total tokens over all documents, concatenated in order

    @property
    def files(self) -> list[Path]:
        """Every file the tokens are read from (Megatron: .idx then .bin)."""
        ...

    def tokens(self, start: int, length: int) -> np.ndarray:
        """Tokens [start, start+length) of the concatenated stream: a copy, int64, shape [length]."""
        ...

    def fingerprint(self) -> str:
        """Fast identity (sizes + sampled blocks, see megatron.sample_hash); checksum() reads every byte."""
        ...

    def checksum(self) -> str:
        """sha256 hex of the underlying file bytes (.idx then .bin for Megatron)."""
        ...


class MegatronTokens:
    """TokenSource over a Megatron indexed dataset (validated by IndexedDataset)."""

    def __init__(self, prefix: str | Path) -> None:
        self.dataset = IndexedDataset(prefix)
        self.path = str(prefix)
        self.format = "megatron"
        self.dtype: np.dtype = self.dataset.dtype
        if self.dtype.kind not in "iu":
            raise DataError(f"{self.dataset.idx_path}: dtype code {self.dataset.dtype_code}: found "
                            f"{self.dtype.name}, expected an integer token dtype (codes 1-5 or 8)")
        self.num_tokens: int = self.dataset.num_tokens
        self._stream = self.dataset.tokens_view
        self._sha: str | None = None

    def tokens(self, start: int, length: int) -> np.ndarray:
        if start < 0 or length < 0 or start + length > self.num_tokens:
            raise IndexError(f"{self.path}: tokens [{start}, {start + length}) outside [0, {self.num_tokens})")
        return np.array(self._stream[start:start + length], dtype=np.int64)

    @property
    def files(self) -> list[Path]:
        return [self.dataset.idx_path, self.dataset.bin_path]

    def fingerprint(self) -> str:
        """Fast identity (sizes + sampled blocks, see megatron.sample_hash); checksum() reads every byte."""
        return sample_hash(self.files)

    def checksum(self) -> str:
        if self._sha is None:
            self._sha = sha256_files([self.dataset.idx_path, self.dataset.bin_path])
        return self._sha


EXPECTED = "a Megatron prefix (PREFIX.idx + PREFIX.bin), a .idx/.bin file of such a pair, a flat .bin or a .npy file"


def open_tokens(path: str | Path, dtype: str | None = None) -> TokenSource:
    """Open token data, deciding the format from the path.

    * `X.npy` → flat NumPy array.
    * `X.idx`, or `X.bin` with `X.idx` beside it, or a prefix `X` with `X.idx`/`X.bin` → Megatron.
    * `X.bin` without `X.idx` → flat raw tokens of `dtype` (else sidecar, else uint16).
    Every problem raises DataError naming the file, what was found and what was expected.
    """
    p = Path(path)
    if p.is_dir():
        raise DataError(f"{p}: found a directory, expected {EXPECTED}")
    if p.suffix == ".npy":
        return FlatTokens(p, dtype)
    if p.suffix in (".idx", ".bin"):
        prefix = p.with_suffix("")
        if p.suffix == ".idx" or idx_path(prefix).is_file():
            return _megatron(prefix, dtype)
        return FlatTokens(p, dtype)
    if idx_path(p).is_file() or bin_path(p).is_file():
        return _megatron(p, dtype)
    if p.is_file():
        raise DataError(f"{p}: found a file with suffix '{p.suffix}', expected {EXPECTED}")
    raise DataError(f"{p}: found no such file (nor {p.name}.idx/.bin), expected {EXPECTED}")


def _megatron(prefix: Path, dtype: str | None) -> MegatronTokens:
    src = MegatronTokens(prefix)
    if dtype is not None and as_dtype(dtype, src.dataset.idx_path) != src.dtype:
        raise DataError(f"{src.dataset.idx_path}: dtype: found {src.dtype.name}, expected {dtype} (given by the caller)")
    return src


def check_vocab(source: TokenSource, vocab_size: int, chunk: int = 1 << 22) -> int:
    """Scan the stream (4 Mi tokens at a time); raise DataError at the first id outside [0, vocab_size).

    Returns the largest token id seen.  A model's embedding would otherwise fail with an index error mid-run.
    """
    top = -1
    for start in range(0, source.num_tokens, chunk):
        block = source.tokens(start, min(chunk, source.num_tokens - start))
        bad = np.nonzero((block < 0) | (block >= vocab_size))[0]
        if bad.size:
            i = int(bad[0])
            raise DataError(f"{source.path}: token {start + i}: found id {int(block[i])}, "
                            f"expected 0 <= id < vocab_size {vocab_size}")
        top = max(top, int(block.max()))
    return top
