"""Flat token files, nanoGPT style: one stream of token ids, no document boundaries.

* `.bin`: raw little-endian uint16 (nanoGPT's `prepare.py` writes `np.uint16`) or
  uint32 (vocabularies above 65 535).  The dtype comes from the caller, else from
  a sidecar `FILE.bin.json` holding `{"dtype": "uint32"}`, else uint16.
* `.npy`: a 1-D integer array in NumPy's `.npy` format, opened with
  `numpy.load(mmap_mode="r")` after the header and size have been checked.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from trainready.data.megatron import sample_hash, sha256_files
from trainready.errors import DataError

BIN_DTYPES = {"uint16": np.dtype("<u2"), "uint32": np.dtype("<u4")}
DEFAULT_BIN_DTYPE = "uint16"  # nanoGPT


def as_dtype(name: str, path: Path) -> np.dtype:
    """The caller's dtype name as a numpy dtype; a DataError naming `path` if it is not one."""
    try:
        return np.dtype(name)
    except TypeError:
        raise DataError(f"{path}: dtype: found '{name}', expected a numpy integer dtype name such as uint16") \
            from None


def sidecar_path(path: Path) -> Path:
    return Path(str(path) + ".json")


def _bin_dtype(path: Path, dtype: str | None) -> np.dtype:
    side = sidecar_path(path)
    side_dtype: str | None = None
    if side.is_file():
        try:
            obj = json.loads(side.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise DataError(f"{side}: not valid JSON ({e.msg if hasattr(e, 'msg') else e}); "
                            'expected {"dtype": "uint16"} or {"dtype": "uint32"}') from None
        if not isinstance(obj, dict) or not isinstance(obj.get("dtype"), str):
            raise DataError(f"{side}: key 'dtype': found {obj!r}, expected a string uint16 or uint32")
        side_dtype = obj["dtype"]
    if dtype is not None and side_dtype is not None and dtype != side_dtype:
        raise DataError(f"{side}: dtype: found {side_dtype}, expected {dtype} (given by the caller)")
    name = dtype or side_dtype or DEFAULT_BIN_DTYPE
    where = side if (dtype is None and side_dtype is not None) else path
    if name not in BIN_DTYPES:
        raise DataError(f"{where}: dtype: found {name}, expected one of {', '.join(BIN_DTYPES)}")
    return BIN_DTYPES[name]


class FlatTokens:
    """A flat token stream from a raw `.bin` or a `.npy` file (a TokenSource)."""

    def __init__(self, path: str | Path, dtype: str | None = None) -> None:
        p = Path(path)
        self.path = str(p)
        if not p.is_file():
            raise DataError(f"{p}: token file: found no such file, expected a .bin or .npy token file")
        self._files = [p]
        self.format = "npy" if p.suffix == ".npy" else "flat"
        if p.suffix == ".npy":
            self._arr = _open_npy(p)
            if dtype is not None and as_dtype(dtype, p) != self._arr.dtype:
                raise DataError(f"{p}: dtype: found {self._arr.dtype.name}, expected {dtype} (given by the caller)")
        else:
            dt = _bin_dtype(p, dtype)
            size = p.stat().st_size
            if size % dt.itemsize:
                raise DataError(f"{p}: size: found {size} bytes, expected a multiple of {dt.itemsize} "
                                f"({dt.name} tokens); truncated, or the wrong dtype")
            self._arr = np.memmap(p, dtype=dt, mode="r") if size else np.empty(0, dt)
            if sidecar_path(p).is_file():
                self._files.append(sidecar_path(p))
        self.dtype: np.dtype = self._arr.dtype
        self.num_tokens: int = int(self._arr.shape[0])
        self._sha: str | None = None

    def tokens(self, start: int, length: int) -> np.ndarray:
        if start < 0 or length < 0 or start + length > self.num_tokens:
            raise IndexError(f"{self.path}: tokens [{start}, {start + length}) outside [0, {self.num_tokens})")
        return np.array(self._arr[start:start + length], dtype=np.int64)

    @property
    def files(self) -> list[Path]:
        """The files the tokens come from (the .bin, then its dtype sidecar if any)."""
        return list(self._files)

    def fingerprint(self) -> str:
        """Fast identity (sizes + sampled blocks, see megatron.sample_hash); checksum() reads every byte."""
        return sample_hash(self._files)

    def checksum(self) -> str:
        if self._sha is None:
            self._sha = sha256_files(self._files)
        return self._sha


def _open_npy(p: Path) -> np.ndarray:
    fmt = np.lib.format
    size = p.stat().st_size
    with open(p, "rb") as fh:
        try:
            version = fmt.read_magic(fh)
            if version == (1, 0):
                shape, fortran, dt = fmt.read_array_header_1_0(fh)
            else:
                shape, fortran, dt = fmt.read_array_header_2_0(fh)
        except (ValueError, EOFError, SyntaxError) as e:
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise DataError(f"{p}: .npy header: found an unreadable header ({first}), expected NumPy .npy format") \
                from None
        data_off = fh.tell()
    if len(shape) != 1:
        raise DataError(f"{p}: array shape: found {shape}, expected a 1-D token array")
    if dt.kind not in "iu":
        raise DataError(f"{p}: dtype: found {dt.name}, expected an integer token dtype")
    need = data_off + int(shape[0]) * dt.itemsize
    if size < need:
        raise DataError(f"{p}: truncated .npy: found {size} bytes, expected {need} bytes ({shape[0]} x {dt.name})")
    if size > need:
        raise DataError(f"{p}: count mismatch: found {size} bytes, expected {need} bytes ({shape[0]} x {dt.name})")
    if shape[0] == 0:
        return np.empty(0, dt)
    return np.load(p, mmap_mode="r", allow_pickle=False)
