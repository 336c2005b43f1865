"""The resume model's vocabulary comes from the data, and the record names the
data exactly: absolute paths, bytes, tokens, dtype, digests."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from trainready.data.corpus import write_sample_corpus
from trainready.data.source import open_tokens
from trainready.errors import DataError
from trainready.spec.model import ResumeSpec

SHORT = dataclasses.replace(ResumeSpec(), steps=4, checkpoint_step=2)


@pytest.fixture(scope="module")
def gpt2_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Megatron corpus with GPT-2's vocabulary: ids up to 50,256."""
    return write_sample_corpus(tmp_path_factory.mktemp("gpt2"), vocab_size=50257, name="gpt2")


def test_vocab_is_sized_from_the_ids_the_run_reads(gpt2_corpus: Path) -> None:
    from trainready.resume.sizing import choose_model
    from trainready.workload.model import GPT

    src = open_tokens(gpt2_corpus)
    choice = choose_model(src, "tiny", 0, batch=8, seed=1234, world=1, steps=100)
    assert choice.vocab_from == "data" and choice.config.vocab_size % 64 == 0
    assert choice.largest_id < choice.config.vocab_size <= choice.largest_id + 64
    assert choice.config.vocab_size == 50304  # GPT-2's 50,257 ids padded as nanoGPT pads them
    # the largest id really is the largest one in the windows read (seq_len + 1 tokens each, every step)
    from trainready.data.sampler import SequenceSampler

    s = SequenceSampler(src, choice.config.seq_len, 8, 1234, 0, 1)
    top = max(int(s.next_batch()[0].max()) for _ in range(100))
    assert top <= choice.largest_id
    # a large vocabulary on the CPU preset: tied embedding/head and a small rest, counted exactly
    assert choice.config.tie_embeddings and choice.config.d_model < 64
    assert choice.params == GPT(choice.config).num_params()
    assert {"params", "vocab_size", "layers", "hidden", "tied_embeddings"} <= set(choice.to_json())


def test_sample_corpus_keeps_the_preset_shape(tmp_path: Path) -> None:
    from trainready.resume.options import ResumeOptions
    from trainready.resume.setup import prepare

    pc = prepare(SHORT, ResumeOptions(cpu=True), {}, tmp_path)
    assert pc.model is not None and pc.model.vocab_from == "data"
    assert pc.model.config.vocab_size <= 512 and not pc.model.config.tie_embeddings
    assert pc.train.vocab_size == pc.model.config.vocab_size  # what the ranks build


def test_an_id_above_an_explicit_vocab_size_is_one_line(gpt2_corpus: Path, tmp_path: Path) -> None:
    from trainready.resume.options import ResumeOptions
    from trainready.resume.setup import prepare

    with pytest.raises(DataError) as info:
        prepare(SHORT, ResumeOptions(cpu=True, data=str(gpt2_corpus), vocab_size=1000), {}, tmp_path)
    msg = str(info.value)
    assert "\n" not in msg and str(gpt2_corpus) in msg and "expected 0 <= id < --vocab-size 1000" in msg
    pc = prepare(SHORT, ResumeOptions(cpu=True, data=str(gpt2_corpus), vocab_size=65536), {}, tmp_path)
    assert pc.model is not None and pc.model.vocab_from == "--vocab-size" and pc.train.vocab_size == 65536


def test_negative_ids_are_refused(tmp_path: Path) -> None:
    from trainready.resume.sizing import largest_id

    p = tmp_path / "neg.npy"
    arr = np.arange(4000, dtype=np.int32) % 100
    arr[:] = -3
    np.save(p, arr)
    with pytest.raises(DataError, match="found id -3, expected 0 <= id"):
        largest_id(open_tokens(p), 64, 8, 1234, 1, 4)


def test_record_names_the_data_exactly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A relative --data path is recorded absolute, with bytes, tokens, dtype and each file's sha256."""
    from trainready.resume.options import ResumeOptions
    from trainready.resume.setup import prepare

    prefix = write_sample_corpus(tmp_path / "data", name="tokens")
    monkeypatch.chdir(tmp_path / "data")
    pc = prepare(SHORT, ResumeOptions(cpu=True, data="tokens"), {}, tmp_path / "run")
    assert pc.identity is not None
    ident = pc.identity.to_json()
    assert ident["path"] == str(prefix.resolve()) and Path(pc.data).is_absolute()
    assert ident["format"] == "megatron" and ident["dtype"] == "uint16"
    assert ident["tokens"] == open_tokens(prefix).num_tokens > 0
    for f, suffix in zip(ident["files"], (".idx", ".bin")):
        p = Path(f"{prefix}{suffix}").resolve()
        assert f["path"] == str(p) and f["bytes"] == p.stat().st_size
        assert f["algorithm"] == "sha256" and f["digest"] == hashlib.sha256(p.read_bytes()).hexdigest()


def test_large_files_get_a_sampled_digest_named_as_such(tmp_path: Path) -> None:
    """Above the threshold: 'sha256-sampled', reproducible from the documented recipe, and a change
    in a sampled block changes it (a change between blocks would not: it is named sampled for that)."""
    from trainready.data.identity import file_digest

    p = tmp_path / "big.bin"
    p.write_bytes(np.random.default_rng(0).integers(0, 255, 3 << 20, dtype=np.uint8).tobytes())
    d = file_digest(p, full_max=1 << 20)
    assert d.algorithm == "sha256-sampled" and d.bytes == 3 << 20
    n, block = p.stat().st_size, 1 << 20
    h = hashlib.sha256(f"{n};".encode())
    with open(p, "rb") as fh:
        for k in range(64):
            fh.seek((n - block) * k // 63)
            h.update(fh.read(block))
    assert d.digest == h.hexdigest()
    assert file_digest(p).algorithm == "sha256"  # below the default 1 GiB threshold: every byte
    with open(p, "r+b") as fh:  # the last MiB is always sampled
        fh.seek(n - 10)
        fh.write(b"x")
    assert file_digest(p, full_max=1 << 20).digest != d.digest


@pytest.mark.slow
def test_gpt2_sized_corpus_runs_with_the_documented_command(cli, gpt2_corpus: Path, tmp_path: Path) -> None:
    """`trainready resume --data PREFIX` on a 50k-vocabulary corpus: exit 0 (was: exit 2,
    'expected 0 <= id < vocab_size 512'), the model size and the data identity in the record."""
    out = tmp_path / "r.json"
    res = cli("resume", "--cpu", "--data", str(gpt2_corpus), "--steps", "6", "--checkpoint-step", "3",
              "--dir", str(tmp_path / "ck"), "--json", str(out))
    assert res.returncode == 0, res.stdout + res.stderr
    r = json.loads(out.read_text())["results"][0]
    model, data = r["details"]["model"], r["details"]["declared"]["data"]
    assert model["vocab_size"] == (model["largest_id_read"] // 64 + 1) * 64 > 50000 and model["tied_embeddings"]
    assert model["vocab_from"] == "data"
    assert model["params"] > 0 and model["layers"] >= 1 and model["hidden"] >= 1
    assert f"vocab {model['vocab_size']} (from the data)" in r["message"]
    assert data["path"] == str(gpt2_corpus) and data["tokens"] > 0 and data["dtype"] == "uint16"
    assert [f["algorithm"] for f in data["files"]] == ["sha256", "sha256"]


@pytest.mark.slow
def test_node_check_path_sizes_the_vocab_the_same_way(gpt2_corpus: Path, tmp_path: Path) -> None:
    from trainready.suite.base import CheckContext
    from trainready.suite.options import CheckOptions
    from trainready.resume.options import ResumeOptions
    from trainready.checks.resume import ResumeCheck
    from trainready.records import Status
    from trainready.spec import load_spec

    spec, _ = load_spec(None)
    spec = dataclasses.replace(spec, resume=dataclasses.replace(spec.resume, steps=6, checkpoint_step=3))
    ctx = CheckContext(spec, tmp_path, {}, CheckOptions(resume=ResumeOptions(cpu=True, data=str(gpt2_corpus))))
    res = ResumeCheck().execute(ctx)
    assert res.status == Status.PASS, res.message
    assert res.details["model"]["vocab_size"] > 50000 and res.details["model"]["vocab_from"] == "data"
