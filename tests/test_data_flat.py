"""Flat token files (nanoGPT style): raw .bin (uint16 default, uint32 via the caller
or a sidecar) and .npy; bad files give one DataError line with found vs expected."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from trainready.data import check_vocab, open_tokens
from trainready.data.flat import FlatTokens
from trainready.errors import DataError

TOKENS = [0, 1, 65535, 7, 42, 300, 9]


def test_bin_uint16_default(tmp_path: Path) -> None:
    p = tmp_path / "train.bin"
    p.write_bytes(struct.pack(f"<{len(TOKENS)}H", *TOKENS))  # what nanoGPT's prepare.py writes
    src = open_tokens(p)
    assert isinstance(src, FlatTokens)
    assert src.dtype == np.dtype("<u2") and src.num_tokens == 7
    got = src.tokens(1, 4)
    assert got.dtype == np.int64 and got.tolist() == [1, 65535, 7, 42]


def test_bin_uint32_by_caller_and_by_sidecar(tmp_path: Path) -> None:
    big = [0, 100_000, 5, 70_000]
    p = tmp_path / "big.bin"
    p.write_bytes(struct.pack("<4I", *big))
    # read as the uint16 default, the values are wrong: the dtype really matters
    assert open_tokens(p).tokens(0, 4).tolist() != big
    assert open_tokens(p, dtype="uint32").tokens(0, 4).tolist() == big
    (tmp_path / "big.bin.json").write_text(json.dumps({"dtype": "uint32"}))
    assert open_tokens(p).tokens(0, 4).tolist() == big
    with pytest.raises(DataError, match="big.bin.json: dtype: found uint32, expected uint16"):
        open_tokens(p, dtype="uint16")


def test_npy(tmp_path: Path) -> None:
    p = tmp_path / "t.npy"
    np.save(p, np.array(TOKENS, dtype=np.uint32))
    src = open_tokens(p)
    assert src.num_tokens == 7 and src.dtype == np.uint32
    assert src.tokens(0, 7).tolist() == TOKENS


def test_checksum_is_sha256_of_bytes(tmp_path: Path) -> None:
    import hashlib

    p = tmp_path / "train.bin"
    data = struct.pack(f"<{len(TOKENS)}H", *TOKENS)
    p.write_bytes(data)
    assert open_tokens(p).checksum() == hashlib.sha256(data).hexdigest()
    p.write_bytes(data[:-2] + b"\x01\x00")
    assert open_tokens(p).checksum() != hashlib.sha256(data).hexdigest()


def test_tokens_out_of_range_is_an_index_error(tmp_path: Path) -> None:
    p = tmp_path / "train.bin"
    p.write_bytes(struct.pack("<3H", 1, 2, 3))
    with pytest.raises(IndexError, match=r"\[2, 4\) outside \[0, 3\)"):
        open_tokens(p).tokens(2, 2)


def test_check_vocab(tmp_path: Path) -> None:
    p = tmp_path / "train.bin"
    p.write_bytes(struct.pack(f"<{len(TOKENS)}H", *TOKENS))
    with pytest.raises(DataError, match="token 2: found id 65535, expected 0 <= id < vocab_size 1000"):
        check_vocab(open_tokens(p), 1000)
    assert check_vocab(open_tokens(p), 65536) == 65535


# -- malformed -------------------------------------------------------------------------------------

def _err(path: Path, dtype: str | None = None) -> str:
    with pytest.raises(DataError) as ei:
        open_tokens(path, dtype)
    msg = str(ei.value)
    assert "\n" not in msg and str(path.name) in msg and "found" in msg and "expected" in msg
    return msg


def test_odd_sized_bin(tmp_path: Path) -> None:
    p = tmp_path / "train.bin"
    p.write_bytes(b"\x01\x00\x02")
    assert "found 3 bytes, expected a multiple of 2" in _err(p)
    p.write_bytes(b"\x01\x00\x02\x00\x03\x00")  # 6 bytes: fine as uint16, not as uint32
    assert open_tokens(p).num_tokens == 3
    assert "found 6 bytes, expected a multiple of 4" in _err(p, "uint32")


def test_unsupported_bin_dtype(tmp_path: Path) -> None:
    p = tmp_path / "train.bin"
    p.write_bytes(b"\x00" * 8)
    assert "dtype: found float32, expected one of uint16, uint32" in _err(p, "float32")


def test_bad_sidecar(tmp_path: Path) -> None:
    p = tmp_path / "train.bin"
    p.write_bytes(b"\x00" * 8)
    (tmp_path / "train.bin.json").write_text("{not json")
    with pytest.raises(DataError, match="train.bin.json: not valid JSON"):
        open_tokens(p)
    (tmp_path / "train.bin.json").write_text('{"dtype": "int8"}')
    with pytest.raises(DataError, match="train.bin.json: dtype: found int8, expected one of uint16, uint32"):
        open_tokens(p)


def test_truncated_npy(tmp_path: Path) -> None:
    p = tmp_path / "t.npy"
    np.save(p, np.arange(100, dtype=np.uint16))
    assert open_tokens(p).num_tokens == 100
    p.write_bytes(p.read_bytes()[:-10])
    assert "truncated .npy: found 318 bytes, expected 328 bytes" in _err(p)


def test_npy_wrong_shape_and_dtype(tmp_path: Path) -> None:
    p = tmp_path / "t.npy"
    np.save(p, np.zeros((4, 4), dtype=np.uint16))
    assert "shape: found (4, 4), expected a 1-D token array" in _err(p)
    np.save(p, np.zeros(4, dtype=np.float32))
    assert "dtype: found float32, expected an integer token dtype" in _err(p)


def test_not_an_npy(tmp_path: Path) -> None:
    p = tmp_path / "t.npy"
    p.write_bytes(b"hello world, not numpy")
    assert ".npy header" in _err(p)


def test_bad_dtype_name(tmp_path: Path) -> None:
    p = tmp_path / "t.npy"
    np.save(p, np.arange(4, dtype=np.uint16))
    assert "found 'tokens16'" in _err(p, "tokens16")
    assert "found uint16, expected uint32" in _err(p, "uint32")


def test_directory_is_refused(tmp_path: Path) -> None:
    assert "found a directory" in _err(tmp_path)


def test_unknown_suffix_file(tmp_path: Path) -> None:
    p = tmp_path / "train.tokens"
    p.write_bytes(b"\x00" * 8)
    assert "found a file with suffix '.tokens'" in _err(p)


def test_fingerprint_sees_a_changed_large_file(tmp_path: Path) -> None:
    from trainready.data.megatron import sample_hash

    p = tmp_path / "big.bin"
    data = bytearray(np.arange(1 << 20, dtype="<u2").tobytes())  # 2 MiB
    p.write_bytes(bytes(data))
    small_limit = 1 << 20  # force the sampled path (file > 1 MiB)
    before = sample_hash([p], whole_below=small_limit)
    assert before == sample_hash([p], whole_below=small_limit)
    data[-1] ^= 0xFF  # last byte lies in the last sampled block
    p.write_bytes(bytes(data))
    assert sample_hash([p], whole_below=small_limit) != before
    assert open_tokens(p).fingerprint() == sample_hash([p])
