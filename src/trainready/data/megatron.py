"""Megatron-LM indexed dataset (`.bin` + `.idx`), version 1: reader and writer.

Layout of `PREFIX.idx` (little-endian; source: Megatron-LM
`megatron/core/datasets/indexed_dataset.py`, `_IndexWriter`/`_IndexReader`):

    offset  size        field
    0       9           magic  b"MMIDIDX\\x00\\x00"
    9       8  <Q       version (1)
    17      1  <B       dtype code (see DTYPE_CODES)
    18      8  <Q       sequence count S
    26      8  <Q       document-index count D (= documents + 1)
    34      4*S <i4     sequence lengths (tokens)
    ..      8*S <i8     sequence pointers (byte offsets into .bin)
    ..      8*D <i8     document indices (sequence index where each document starts; first 0, last S)

`PREFIX.bin` is the raw tokens of all sequences back to back.  Both files are
memory-mapped read-only; nothing is loaded until sliced.
"""

from __future__ import annotations

import hashlib
import os
import struct
from pathlib import Path
from typing import BinaryIO, Sequence

import numpy as np

from trainready.errors import DataError
from trainready.util.atomic import atomic_write_stream

MAGIC = b"MMIDIDX\x00\x00"
VERSION = 1
HEADER = struct.Struct("<9sQBQQ")  # magic, version, dtype code, sequence count, document-index count
HEADER_SIZE = HEADER.size  # 34 bytes

# Megatron-Core DType enum (indexed_dataset.py).
DTYPE_CODES: dict[int, np.dtype] = {
    1: np.dtype(np.uint8),
    2: np.dtype(np.int8),
    3: np.dtype("<i2"),
    4: np.dtype("<i4"),
    5: np.dtype("<i8"),
    6: np.dtype("<f8"),
    7: np.dtype("<f4"),
    8: np.dtype("<u2"),
}
CODE_OF: dict[str, int] = {dt.newbyteorder("<").str: code for code, dt in DTYPE_CODES.items()}


def dtype_code(dtype: np.dtype | str | type) -> int:
    dt = np.dtype(dtype).newbyteorder("<")
    if dt.itemsize == 1:
        dt = np.dtype(dt.name)  # '|u1' has no byte order
    code = CODE_OF.get(dt.str)
    if code is None:
        names = ", ".join(d.name for d in DTYPE_CODES.values())
        raise ValueError(f"dtype {np.dtype(dtype).name} has no Megatron code; expected one of {names}")
    return code


def idx_path(prefix: str | os.PathLike[str]) -> Path:
    return Path(str(prefix) + ".idx")


def bin_path(prefix: str | os.PathLike[str]) -> Path:
    return Path(str(prefix) + ".bin")


def _fail(path: Path, what: str, found: object, expected: object) -> DataError:
    return DataError(f"{path}: {what}: found {found}, expected {expected}")


class IndexedDataset:
    """Read-only view of a Megatron indexed dataset, fully validated on open.

    `len(ds)` is the sequence count and `ds[i]` sequence i (Megatron semantics);
    files written by `write_indexed_dataset` hold one sequence per document, so
    there `ds[i]` is document i.  `ds.document(j)` concatenates document j's sequences.
    """

    def __init__(self, prefix: str | os.PathLike[str]) -> None:
        self.prefix = Path(prefix)
        self.idx_path = idx_path(prefix)
        self.bin_path = bin_path(prefix)
        for p, other in ((self.idx_path, self.bin_path), (self.bin_path, self.idx_path)):
            if not p.is_file():
                raise _fail(p, "missing companion file of " + other.name, "no such file", "the .bin and .idx pair")
        self._read_index()
        self._read_bin()

    # -- index ---------------------------------------------------------------------------------
    def _read_index(self) -> None:
        path = self.idx_path
        size = path.stat().st_size
        if size < HEADER_SIZE:
            raise _fail(path, "truncated .idx header", f"{size} bytes", f"at least {HEADER_SIZE} bytes")
        with open(path, "rb") as fh:
            magic, version, code, n_seq, n_doc = HEADER.unpack(fh.read(HEADER_SIZE))
        if magic != MAGIC:
            raise _fail(path, "wrong magic", repr(magic), repr(MAGIC) + " (Megatron indexed dataset)")
        if version != VERSION:
            raise _fail(path, "unsupported version", version, VERSION)
        if code not in DTYPE_CODES:
            raise _fail(path, "unknown dtype code", code, "one of " + ", ".join(map(str, sorted(DTYPE_CODES))))
        self.dtype: np.dtype = DTYPE_CODES[code]
        self.dtype_code = code
        expected = HEADER_SIZE + 4 * n_seq + 8 * n_seq + 8 * n_doc
        if size < expected:
            raise _fail(path, f"truncated .idx ({n_seq} sequences, {n_doc} document indices)",
                        f"{size} bytes", f"{expected} bytes")
        if size > expected:
            raise _fail(path, f"count mismatch ({n_seq} sequences, {n_doc} document indices)",
                        f"{size} bytes", f"{expected} bytes")
        if n_doc < 1:
            raise _fail(path, "document-index count", n_doc, "at least 1 (documents + 1)")
        self._idx_mm = np.memmap(path, dtype=np.uint8, mode="r")
        off = HEADER_SIZE
        self.sequence_lengths: np.ndarray = np.frombuffer(self._idx_mm, "<i4", n_seq, off)
        off += 4 * n_seq
        self.sequence_pointers: np.ndarray = np.frombuffer(self._idx_mm, "<i8", n_seq, off)
        off += 8 * n_seq
        self.document_indices: np.ndarray = np.frombuffer(self._idx_mm, "<i8", n_doc, off)
        self._validate_index(n_seq)

    def _validate_index(self, n_seq: int) -> None:
        path, lengths, doc = self.idx_path, self.sequence_lengths, self.document_indices
        if n_seq and int(lengths.min()) < 0:
            i = int(np.argmin(lengths))
            raise _fail(path, f"sequence {i} length", int(lengths[i]), ">= 0")
        if int(doc[0]) != 0:
            raise _fail(path, "first document index", int(doc[0]), 0)
        if int(doc[-1]) != n_seq:
            raise _fail(path, "last document index", int(doc[-1]), f"the sequence count {n_seq}")
        steps = np.diff(doc)
        if steps.size and int(steps.min()) < 0:
            j = int(np.argmin(steps)) + 1
            raise _fail(path, f"document index {j}", int(doc[j]), f"non-decreasing (>= {int(doc[j - 1])})")

    # -- data ----------------------------------------------------------------------------------
    def _read_bin(self) -> None:
        item = self.dtype.itemsize
        size = self.bin_path.stat().st_size
        lengths = self.sequence_lengths.astype(np.int64)
        total = int(lengths.sum())
        ends = self.sequence_pointers + lengths * item
        expected_ptr = np.concatenate(([0], np.cumsum(lengths)[:-1])) * item if lengths.size else lengths
        bad = np.nonzero(self.sequence_pointers != expected_ptr)[0]
        if bad.size:  # an inconsistent pointer: say "past the end" when it is, else what it should be
            i = int(bad[0])
            if int(ends[i]) > size or int(self.sequence_pointers[i]) < 0:
                raise _fail(self.idx_path, f"sequence {i} pointer past the end of {self.bin_path.name}",
                            f"bytes {int(self.sequence_pointers[i])}..{int(ends[i])}", f"within 0..{size}")
            raise _fail(self.idx_path, f"sequence {i} pointer", int(self.sequence_pointers[i]),
                        f"{int(expected_ptr[i])} (sum of earlier lengths x {item} bytes)")
        if size != total * item:
            what = "truncated .bin" if size < total * item else "count mismatch: .bin larger than the index says"
            raise _fail(self.bin_path, what, f"{size} bytes",
                        f"{total * item} bytes ({total} tokens x {item} bytes, from {self.idx_path.name})")
        self.num_tokens = total
        # np.memmap cannot map an empty file.
        self._bin: np.ndarray = (np.memmap(self.bin_path, dtype=self.dtype, mode="r") if total
                                 else np.empty(0, self.dtype))

    def __len__(self) -> int:
        return int(self.sequence_lengths.size)

    def __getitem__(self, i: int) -> np.ndarray:
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"sequence {i} out of range for {n} sequences in {self.prefix}")
        i %= n
        start = int(self.sequence_pointers[i]) // self.dtype.itemsize
        return self._bin[start:start + int(self.sequence_lengths[i])]

    @property
    def num_documents(self) -> int:
        return int(self.document_indices.size) - 1

    def document(self, j: int) -> np.ndarray:
        lo, hi = int(self.document_indices[j]), int(self.document_indices[j + 1])
        if lo == hi:
            return np.empty(0, self.dtype)
        start = int(self.sequence_pointers[lo]) // self.dtype.itemsize
        end = start + int(self.sequence_lengths[lo:hi].astype(np.int64).sum())
        return self._bin[start:end]

    @property
    def tokens_view(self) -> np.ndarray:
        """All tokens concatenated (read-only memmap; valid because pointers are checked contiguous)."""
        return self._bin


def write_indexed_dataset(prefix: str | os.PathLike[str], documents: Sequence[np.ndarray],
                          dtype: np.dtype | str | type) -> Path:
    """Write one sequence per document; `.bin` then `.idx`, each via temp file + fsync + rename.

    Values must fit `dtype` exactly (checked; no silent wrap-around).  Returns the prefix.
    """
    dt = DTYPE_CODES[dtype_code(dtype)]
    prefix = Path(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    lengths = np.array([len(d) for d in documents], dtype=np.int64)
    if lengths.size and int(lengths.max()) > np.iinfo(np.int32).max:
        raise ValueError("a document longer than 2**31-1 tokens does not fit the int32 length field")
    item = dt.itemsize

    def write_bin(fh: BinaryIO) -> None:
        for k, doc in enumerate(documents):
            arr = np.asarray(doc)
            conv = arr.astype(dt)
            if arr.size and not np.array_equal(conv, arr):
                raise ValueError(f"document {k} has values that do not fit {dt.name}")
            fh.write(conv.tobytes())

    atomic_write_stream(bin_path(prefix), write_bin)
    pointers = (np.concatenate(([0], np.cumsum(lengths)[:-1])) * item) if lengths.size else lengths
    header = HEADER.pack(MAGIC, VERSION, dtype_code(dt), len(lengths), len(lengths) + 1)
    body = (lengths.astype("<i4").tobytes() + pointers.astype("<i8").tobytes()
            + np.arange(len(lengths) + 1, dtype="<i8").tobytes())
    atomic_write_stream(idx_path(prefix), lambda fh: fh.write(header + body))
    return prefix


def sha256_files(paths: Sequence[Path], chunk: int = 1 << 22) -> str:
    """sha256 of the files' bytes in order (4 MiB reads)."""
    h = hashlib.sha256()
    for p in paths:
        with open(p, "rb") as fh:
            while block := fh.read(chunk):
                h.update(block)
    return h.hexdigest()


def sample_hash(paths: Sequence[Path], whole_below: int = 1 << 26, samples: int = 64, block: int = 1 << 16) -> str:
    """Cheap identity of large files: sha256 of each file's size plus its whole bytes when under
    64 MiB, else 64 evenly spaced 64 KiB blocks (first and last included).  Catches a different or
    truncated file in milliseconds; it is not a full integrity check (use sha256_files for that)."""
    h = hashlib.sha256()
    for p in paths:
        size = p.stat().st_size
        h.update(f"{p.name}:{size};".encode())
        with open(p, "rb") as fh:
            if size <= whole_below:
                h.update(fh.read())
                continue
            for offset in sampled_offsets(size, samples, block):
                fh.seek(offset)
                h.update(fh.read(block))
    return h.hexdigest()


def sampled_offsets(size: int, samples: int, block: int) -> list[int]:
    """Offsets of `samples` evenly spaced blocks of `block` bytes in a file of `size` bytes:
    floor(k * (size - block) / (samples - 1)), k = 0..samples-1 (the first and last block included)."""
    return [(size - block) * k // (samples - 1) for k in range(samples)]
