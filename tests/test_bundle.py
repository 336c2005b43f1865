"""`trainready bundle`: every record, the spec, the commands, checksums, an index laid out as the handoff
records table; `--verify` names each changed, missing or extra file (exit 1); planted records are
refused (exit 2) except self-test records; secrets stay redacted."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from evidence_records import run_main as run_cli
from test_evidence_outputs import planted_failing_record

from trainready.bundle.build import BundleOptions, build
from trainready.bundle.layout import SECTIONS, parse_add
from trainready.bundle.verify import verify
from trainready.errors import UsageError
from trainready.records import CheckResult, Level, Report, Status

TOKEN = "hf_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4"  # token-shaped (Hugging Face prefix), not a real one


def clean_record(tmp: Path, name: str = "node") -> Path:
    rep = Report(name, "node1", "2026-01-01T00:00:00+00:00", 1.0, "0.1.0", {"name": "cpu-default"},
                 (CheckResult("matmul", "matmul", Level.QUICK, Status.PASS, "exact", "", (), 0.1),),
                 {"argv": ["trainready", name, "--json", f"{name}.json"], "spec_source": "/nonexistent.toml"})
    p = tmp / f"{name}.json"
    p.write_text(json.dumps(rep.to_json()))
    return p


@pytest.fixture
def bundle_dir(tmp_path: Path) -> Path:
    rec = clean_record(tmp_path)
    cfg = tmp_path / "train.yaml"
    cfg.write_text(f"lr: 3e-4\nwandb_key: {TOKEN}\n")
    lock = tmp_path / "uv.lock"
    lock.write_text("torch==2.13.0\n")
    out = tmp_path / "handoff"
    build(BundleOptions(out, (str(rec),), (parse_add(str(cfg)), parse_add(str(lock))), collect_env=False,
                        argv=("trainready", "bundle", str(out))))
    return out


def test_bundle_holds_records_spec_commands_and_an_index(bundle_dir: Path) -> None:
    index = json.loads((bundle_dir / "index.json").read_text())
    paths = {i["path"]: i for i in index["items"]}
    assert {"records/01-node-node.json", "spec/judged-1-cpu-default.json", "commands.txt", "trainready.json",
            "INDEX.md", "files/config/train.yaml", "files/lock/uv.lock"} <= set(paths)
    assert paths["files/lock/uv.lock"]["section"] == "code" and paths["files/config/train.yaml"]["section"] == "training"
    assert [s["title"] for s in index["sections"]] == [t for _, t in SECTIONS]
    assert "trainready node --json node.json" in (bundle_dir / "commands.txt").read_text()
    md = (bundle_dir / "INDEX.md").read_text()
    for _, title in SECTIONS:
        assert f"**{title}**" in md
    assert paths["commands.txt"]["sha256"][:16] in md
    assert "`trainready compare --json` record" in md  # an empty section says what would fill it


def test_secrets_stay_redacted(bundle_dir: Path) -> None:
    text = (bundle_dir / "files/config/train.yaml").read_text()
    assert TOKEN not in text and "<redacted>" in text and "lr: 3e-4" in text
    item = next(i for i in json.loads((bundle_dir / "index.json").read_text())["items"] if i["path"].endswith("train.yaml"))
    assert item["note"].startswith("secrets redacted")
    assert not any(TOKEN in p.read_text(errors="replace") for p in bundle_dir.rglob("*") if p.is_file())


def test_verify_names_each_changed_missing_and_extra_file(bundle_dir: Path) -> None:
    assert verify(bundle_dir).ok
    rec = bundle_dir / "records/01-node-node.json"
    data = bytearray(rec.read_bytes())
    data[10] ^= 1
    rec.write_bytes(bytes(data))
    (bundle_dir / "commands.txt").unlink()
    (bundle_dir / "logs").mkdir()
    (bundle_dir / "logs/smuggled.log").write_text("x")
    v = verify(bundle_dir)
    assert (v.changed, v.missing, v.extra) == (("records/01-node-node.json",), ("commands.txt",), ("logs/smuggled.log",))
    p = run_cli("bundle", "--verify", str(bundle_dir))
    assert p.returncode == 1
    for line in ("changed: records/01-node-node.json", "missing: commands.txt", "extra: logs/smuggled.log"):
        assert line in p.stderr


def test_tar_gz_round_trip_and_a_changed_member(tmp_path: Path) -> None:
    rec = clean_record(tmp_path)
    out = tmp_path / "handoff.tar.gz"
    p = run_cli("bundle", str(out), str(rec), "--no-env")
    assert p.returncode == 0, p.stderr
    ok = run_cli("bundle", "--verify", str(out))
    assert ok.returncode == 0 and "intact" in ok.stderr
    with tarfile.open(out) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}
    members["handoff/trainready.json"] = members["handoff/trainready.json"].replace(b"0.1.0", b"9.9.9")
    bad = tmp_path / "bad.tar.gz"
    with tarfile.open(bad, "w:gz") as tar:
        for name, data in members.items():
            src = tmp_path / "m"
            src.write_bytes(data)
            tar.add(src, arcname=name)
    v = verify(bad)
    assert v.changed == ("trainready.json",) and not v.missing and not v.extra


def test_planted_record_is_refused_and_a_selftest_record_is_accepted(tmp_path: Path) -> None:
    planted = tmp_path / "planted.json"
    planted.write_text(json.dumps(planted_failing_record()))
    p = run_cli("bundle", str(tmp_path / "b"), str(planted), "--no-env")
    assert p.returncode == 2 and "made with --plant matmul.corrupt" in p.stderr and not (tmp_path / "b").exists()
    st = tmp_path / "selftest.json"
    st.write_text(json.dumps({"schema": "trainready.selftest/1", "host": "h", "status": "pass", "cases": []}))
    out = tmp_path / "b2"
    build(BundleOptions(out, (str(st),), collect_env=False))
    assert verify(out).ok and any(p.name.startswith("01-selftest") for p in (out / "records").iterdir())


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    rec = clean_record(tmp_path)
    (tmp_path / "exists").mkdir()
    for args, want in ((("bundle", str(tmp_path / "exists"), str(rec)), "already exists"),
                       (("bundle", str(tmp_path / "x"), str(tmp_path / "nope.json")), "no such file"),
                       (("bundle", str(tmp_path / "x"), "--add", "tokenzer=/etc/hostname"), "unknown role"),
                       (("bundle", "--verify", str(tmp_path / "exists")), "no index.json")):
        p = run_cli(*args, "--no-env") if "--verify" not in args else run_cli(*args)
        assert p.returncode == 2 and want in p.stderr and len(p.stderr.strip().splitlines()) == 1, (args, p.stderr)
    with pytest.raises(UsageError):
        parse_add(str(tmp_path / "missing.lock"))


@pytest.mark.parametrize("args", (["report", "--help"], ["bundle", "--help"], ["selftest", "--help"]), ids=" ".join)
def test_evidence_commands_help_fits_80_columns(args, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from test_startup_help import test_help_fits_80_columns_without_cutting_words as check_help

    check_help(args, capsys, monkeypatch)


def test_checkpoint_manifests_and_data_checksums(tmp_path: Path) -> None:
    import hashlib

    run = tmp_path / "resume-1"
    (run / "ckpt" / "step-5").mkdir(parents=True)
    (run / "ckpt" / "step-5" / "manifest.json").write_text('{"files": {"__0_0.distcp": {"sha256": ["ab"]}}}')
    (run / "ckpt" / "latest").write_text("step-5")
    (run / "evidence").mkdir()
    (run / "evidence" / "declared.json").write_text('{"tolerance": {"atol": 0}}')
    data = tmp_path / "tok.bin"
    data.write_bytes(b"\x01\x02" * 1000)
    out = tmp_path / "b"
    build(BundleOptions(out, (str(clean_record(tmp_path)),), checkpoints=(run / "ckpt",), data=(data,),
                        collect_env=False))
    index = json.loads((out / "index.json").read_text())
    paths = {i["path"]: i["section"] for i in index["items"]}
    assert paths["checkpoints/01-step-5/manifest.json"] == "previous" and "checkpoints/latest-01" in paths
    assert paths["checkpoints/declared-01.json"] == "launch" and paths["checksums/data.json"] == "training"
    ref = index["referenced"][0]
    assert ref["path"] == str(data.resolve()) and ref["sha256"] == hashlib.sha256(data.read_bytes()).hexdigest()
    assert not (out / "tok.bin").exists() and verify(out).ok  # referenced by checksum, not copied
