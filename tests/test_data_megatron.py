"""Megatron indexed dataset: an independent struct-based writer/parser (built only
from the layout in the issue) cross-checks trainready's reader and writer, and
every malformed file gives one DataError line naming the file, found vs expected."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from trainready.data import IndexedDataset, open_tokens, write_indexed_dataset, write_sample_corpus
from trainready.errors import DataError

MAGIC = b"MMIDIDX\x00\x00"
# code -> (struct format char, itemsize), from the issue text
CODES = {1: ("B", 1), 2: ("b", 1), 3: ("h", 2), 4: ("i", 4), 5: ("q", 8), 6: ("d", 8), 7: ("f", 4), 8: ("H", 2)}


def ind_write(prefix: Path, docs: list[list[int]], code: int = 8, *, magic: bytes = MAGIC, version: int = 1,
              pointers: list[int] | None = None, doc_idx: list[int] | None = None) -> Path:
    """Independent writer: plain struct.pack, no numpy, no trainready code."""
    fmt, size = CODES[code]
    lengths = [len(d) for d in docs]
    if pointers is None:
        pointers, acc = [], 0
        for n in lengths:
            pointers.append(acc)
            acc += n * size
    if doc_idx is None:
        doc_idx = list(range(len(docs) + 1))
    with open(str(prefix) + ".bin", "wb") as fh:
        for d in docs:
            fh.write(struct.pack(f"<{len(d)}{fmt}", *d))
    with open(str(prefix) + ".idx", "wb") as fh:
        fh.write(magic)
        fh.write(struct.pack("<Q", version))
        fh.write(struct.pack("<B", code))
        fh.write(struct.pack("<Q", len(docs)))
        fh.write(struct.pack("<Q", len(doc_idx)))
        fh.write(struct.pack(f"<{len(lengths)}i", *lengths))
        fh.write(struct.pack(f"<{len(pointers)}q", *pointers))
        fh.write(struct.pack(f"<{len(doc_idx)}q", *doc_idx))
    return prefix


def ind_parse(prefix: Path) -> tuple[int, list[int], list[int], list[int], bytes]:
    """Independent parser of the .idx: returns code, lengths, pointers, document indices, raw .bin."""
    raw = Path(str(prefix) + ".idx").read_bytes()
    assert raw[:9] == MAGIC
    version, code, n, d = struct.unpack_from("<QBQQ", raw, 9)
    assert version == 1
    off = 9 + 8 + 1 + 8 + 8
    lengths = list(struct.unpack_from(f"<{n}i", raw, off))
    pointers = list(struct.unpack_from(f"<{n}q", raw, off + 4 * n))
    doc_idx = list(struct.unpack_from(f"<{d}q", raw, off + 12 * n))
    assert len(raw) == off + 12 * n + 8 * d
    return code, lengths, pointers, doc_idx, Path(str(prefix) + ".bin").read_bytes()


DOCS = [[5, 6, 7], [1], [9, 8, 7, 6, 5], [], [300, 2]]


@pytest.mark.parametrize("code,dtype", [(8, np.uint16), (4, np.int32), (1, np.uint8), (5, np.int64), (3, np.int16)])
def test_reader_reads_independent_writer(tmp_path: Path, code: int, dtype: type) -> None:
    docs = [[t % 200 for t in d] for d in DOCS] if code == 1 else DOCS
    prefix = ind_write(tmp_path / "ind", docs, code)
    ds = IndexedDataset(prefix)
    assert ds.dtype == np.dtype(dtype) and len(ds) == len(docs) and ds.num_documents == len(docs)
    for i, d in enumerate(docs):
        assert ds[i].tolist() == d and ds.document(i).tolist() == d
    src = open_tokens(str(prefix) + ".idx")
    flat = [t for d in docs for t in d]
    assert src.num_tokens == len(flat)
    got = src.tokens(1, 6)
    assert got.dtype == np.int64 and got.tolist() == flat[1:7]


def test_multi_sequence_documents(tmp_path: Path) -> None:
    # Megatron allows several sequences per document: documents = [seq0, seq1], [seq2], [seq3, seq4]
    prefix = ind_write(tmp_path / "multi", DOCS, doc_idx=[0, 2, 3, 5])
    ds = IndexedDataset(prefix)
    assert ds.num_documents == 3 and len(ds) == 5
    assert ds.document(0).tolist() == [5, 6, 7, 1]
    assert ds.document(2).tolist() == [300, 2]


def test_writer_matches_independent_parser(tmp_path: Path) -> None:
    docs = [np.array(d, dtype=np.int64) for d in DOCS]
    prefix = write_indexed_dataset(tmp_path / "mine", docs, np.uint16)
    code, lengths, pointers, doc_idx, raw = ind_parse(prefix)
    assert code == 8
    assert lengths == [3, 1, 5, 0, 2]
    assert pointers == [0, 6, 8, 18, 18]  # byte offsets, 2 bytes per uint16 token
    assert doc_idx == [0, 1, 2, 3, 4, 5]
    assert list(struct.unpack(f"<{len(raw) // 2}H", raw)) == [t for d in DOCS for t in d]
    # and the same bytes as the independent writer
    ind = ind_write(tmp_path / "ind", DOCS, 8)
    assert Path(str(prefix) + ".idx").read_bytes() == Path(str(ind) + ".idx").read_bytes()
    assert Path(str(prefix) + ".bin").read_bytes() == Path(str(ind) + ".bin").read_bytes()
    assert not list(tmp_path.glob(".*.tmp"))  # no temp files left behind


def test_writer_refuses_values_that_do_not_fit(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="do not fit uint16"):
        write_indexed_dataset(tmp_path / "x", [np.array([70000])], np.uint16)


def test_sample_corpus_is_deterministic_and_valid(tmp_path: Path) -> None:
    a = write_sample_corpus(tmp_path / "a", vocab_size=512, num_docs=50, seed=7)
    b = write_sample_corpus(tmp_path / "b", vocab_size=512, num_docs=50, seed=7)
    c = write_sample_corpus(tmp_path / "c", vocab_size=512, num_docs=50, seed=8)
    sa, sb, sc = open_tokens(a), open_tokens(b), open_tokens(c)
    assert sa.checksum() != sc.checksum()  # the seed matters...
    assert sa.checksum() == sb.checksum()  # ...and fixes the bytes
    code, lengths, _, doc_idx, raw = ind_parse(a)
    assert code == 8 and len(lengths) == 50 and doc_idx[-1] == 50
    toks = np.frombuffer(raw, "<u2")
    assert int(toks.max()) < 512
    # structure: the bigram distribution is far from uniform (the chain follows 4 successors 95% of the time)
    pairs = toks[:-1].astype(np.int64) * 512 + toks[1:]
    assert np.unique(pairs).size < 0.2 * pairs.size


# -- malformed files -------------------------------------------------------------------------------

def _err(prefix: Path) -> str:
    with pytest.raises(DataError) as ei:
        open_tokens(prefix)
    msg = str(ei.value)
    assert "\n" not in msg and "found" in msg and "expected" in msg
    return msg


def test_good_file_opens_before_corruption(tmp_path: Path) -> None:
    # The base case of every corruption test below opens cleanly (so those failures are caused by the damage).
    assert open_tokens(ind_write(tmp_path / "d", DOCS)).num_tokens == 11


def test_wrong_magic(tmp_path: Path) -> None:
    msg = _err(ind_write(tmp_path / "d", DOCS, magic=b"MMIDIDX\x00\x01"))
    assert "d.idx" in msg and "wrong magic" in msg and "MMIDIDX" in msg


def test_wrong_version(tmp_path: Path) -> None:
    msg = _err(ind_write(tmp_path / "d", DOCS, version=2))
    assert "d.idx" in msg and "version: found 2, expected 1" in msg


def test_unknown_dtype_code(tmp_path: Path) -> None:
    prefix = ind_write(tmp_path / "d", DOCS)
    idx = Path(str(prefix) + ".idx")
    raw = bytearray(idx.read_bytes())
    raw[17] = 9
    idx.write_bytes(bytes(raw))
    msg = _err(prefix)
    assert "d.idx" in msg and "dtype code: found 9" in msg


def test_float_dtype_refused_as_tokens(tmp_path: Path) -> None:
    msg = _err(ind_write(tmp_path / "d", DOCS, code=7))
    assert "float32" in msg and "integer token dtype" in msg


def test_truncated_bin(tmp_path: Path) -> None:
    prefix = ind_write(tmp_path / "d", DOCS)
    b = Path(str(prefix) + ".bin")
    b.write_bytes(b.read_bytes()[:-3])
    msg = _err(prefix)
    assert "d.bin" in msg and "truncated .bin: found 19 bytes, expected 22 bytes" in msg


def test_bin_longer_than_index(tmp_path: Path) -> None:
    prefix = ind_write(tmp_path / "d", DOCS)
    with open(str(prefix) + ".bin", "ab") as fh:
        fh.write(b"\x00\x00")
    assert "count mismatch" in _err(prefix)


@pytest.mark.parametrize("cut", [10, 40, 1])
def test_truncated_idx(tmp_path: Path, cut: int) -> None:
    prefix = ind_write(tmp_path / "d", DOCS)
    idx = Path(str(prefix) + ".idx")
    raw = idx.read_bytes()
    idx.write_bytes(raw[:cut] if cut < 34 else raw[:-cut])
    msg = _err(prefix)
    assert "d.idx" in msg and "truncated .idx" in msg


def test_pointer_past_end(tmp_path: Path) -> None:
    msg = _err(ind_write(tmp_path / "d", DOCS, pointers=[0, 6, 8, 18, 4000]))
    assert "d.idx" in msg and "sequence 4 pointer past the end of d.bin" in msg


def test_pointer_inconsistent(tmp_path: Path) -> None:
    msg = _err(ind_write(tmp_path / "d", DOCS, pointers=[0, 4, 8, 18, 18]))
    assert "sequence 1 pointer: found 4, expected 6" in msg


@pytest.mark.parametrize("doc_idx,what", [([1, 2, 5], "first document index: found 1, expected 0"),
                                          ([0, 2, 4], "last document index: found 4"),
                                          ([0, 3, 2, 5], "document index 2: found 2")])
def test_bad_document_index(tmp_path: Path, doc_idx: list[int], what: str) -> None:
    assert what in _err(ind_write(tmp_path / "d", DOCS, doc_idx=doc_idx))


def test_count_mismatch_extra_idx_bytes(tmp_path: Path) -> None:
    prefix = ind_write(tmp_path / "d", DOCS)
    with open(str(prefix) + ".idx", "ab") as fh:
        fh.write(b"\x00" * 8)
    msg = _err(prefix)
    assert "count mismatch" in msg and "found 150 bytes, expected 142 bytes" in msg


@pytest.mark.parametrize("missing", [".bin", ".idx"])
def test_missing_companion(tmp_path: Path, missing: str) -> None:
    prefix = ind_write(tmp_path / "d", DOCS)
    Path(str(prefix) + missing).unlink()
    msg = _err(prefix)
    assert f"d{missing}" in msg and "missing companion file" in msg


def test_missing_path(tmp_path: Path) -> None:
    msg = _err(tmp_path / "nothing")
    assert "nothing" in msg and "no such file" in msg


def test_empty_dataset_reads_but_sampler_refuses(tmp_path: Path) -> None:
    from trainready.data import SequenceSampler

    src = open_tokens(write_indexed_dataset(tmp_path / "e", [], np.uint16))
    assert src.num_tokens == 0
    with pytest.raises(DataError, match="found 0 tokens"):
        SequenceSampler(src, 8, 2, seed=0)
