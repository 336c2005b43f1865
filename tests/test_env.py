"""`trainready env`: probes, redaction, and the CLI's JSON and bad-input handling."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import HAS_GPU
from trainready.errors import UsageError
from trainready.manifest import code, container, envvars, host, ib

DATA = Path(__file__).parent / "data"
HF = "hf_abcdefghijklmnopqrstu"
GHP = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2"


def test_redaction_by_name_and_by_value():
    env = {
        "HF_TOKEN": HF, "NCCL_IB_HCA": "mlx5_0", "WANDB_API_KEY": "x", "SLURM_JOB_COMMENT": f"push with {GHP}",
        "TORCH_HOME": "https://alice:hunter2pass@mirror.example/torch", "CUDA_VISIBLE_DEVICES": "0,1",
        "NCCL_PASSWORD": "p", "HOME": "/root", "MASTER_ADDR": "10.0.0.1", "TRAINREADY_AUTH_HEADER": "Bearer x",
        "OMP_X": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTYifQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
        "PYTORCH_AWS": "AKIAIOSFODNN7EXAMPLE",
    }
    out = envvars.capture(env)
    assert out["NCCL_IB_HCA"] == "mlx5_0" and out["CUDA_VISIBLE_DEVICES"] == "0,1" and out["MASTER_ADDR"] == "10.0.0.1"
    assert out["HF_TOKEN"] == out["NCCL_PASSWORD"] == out["TRAINREADY_AUTH_HEADER"] == "<redacted>"
    assert out["SLURM_JOB_COMMENT"] == "push with <redacted>"
    assert out["TORCH_HOME"] == "https://alice:<redacted>@mirror.example/torch"
    assert out["OMP_X"] == out["PYTORCH_AWS"] == "<redacted>"
    assert "HOME" not in out and "WANDB_API_KEY" not in out  # not relevant: not captured at all
    assert not any(s in json.dumps(out) for s in (HF, GHP, "hunter2pass", "AKIAIOSFODNN7EXAMPLE"))


def test_scrub_reaches_every_string():
    assert envvars.scrub({"a": [f"x {HF}", {"b": "ok"}], "n": 3}) == {"a": ["x <redacted>", {"b": "ok"}], "n": 3}


def test_infiniband_ports_from_fake_sysfs(tmp_path):
    ports = ib.ports(DATA / "sysfs_ib")
    assert ports == [
        {"device": "mlx5_0", "port": "1", "state": "ACTIVE", "phys_state": "LinkUp", "rate": "400 Gb/sec (4X NDR)", "link_layer": "InfiniBand"},
        {"device": "mlx5_1", "port": "1", "state": "DOWN", "phys_state": "Disabled", "rate": "10 Gb/sec (4X SDR)", "link_layer": "Ethernet"},
    ]
    assert ib.rate_gbps(ports[0]["rate"]) == 400.0
    assert ib.ports(tmp_path / "none").startswith("unavailable: ")


def test_container_hints_and_digest(tmp_path):
    assert container.hints(tmp_path, {}) == []
    (tmp_path / ".dockerenv").touch()
    (tmp_path / "proc/1").mkdir(parents=True)
    (tmp_path / "proc/1/cgroup").write_text("0::/kubepods/burstable/pod1/abc\n")
    h = container.hints(tmp_path, {"ENROOT_ROOTFS": "/x"})
    assert h[0].startswith("/.dockerenv") and any("kubepods" in x for x in h) and any("enroot" in x for x in h)
    d = "sha256:" + "0f" * 32
    assert container.image_digest(None, {container.DIGEST_ENV: d}) == (d, container.DIGEST_ENV)
    assert container.image_digest(f"nvcr.io/nvidia/pytorch@{d}", {})[0] == f"nvcr.io/nvidia/pytorch@{d}"
    with pytest.raises(UsageError, match="TRAINREADY_IMAGE_DIGEST 'latest': expected an image digest"):
        container.image_digest(None, {container.DIGEST_ENV: "latest"})


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_code_commit_dirty_flag_and_lock_hash(tmp_path):
    repo = tmp_path / "train"
    repo.mkdir()
    git = lambda *a: subprocess.run(["git", "-C", str(repo), *a], check=True, capture_output=True, text=True)  # noqa: E731
    git("init", "-q")
    (repo / "train.py").write_text("print(1)\n")
    git("add", "train.py")
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "-m", "x")
    head = git("rev-parse", "HEAD").stdout.strip()
    assert code.git_state(repo) == {"path": str(repo.resolve()), "commit": head, "dirty": False}
    (repo / "train.py").write_text("print(2)\n")
    assert code.git_state(repo)["dirty"] is True
    assert code.git_state(tmp_path)["commit"].startswith("unavailable: ")  # a directory, not a git tree
    lock = repo / "uv.lock"
    lock.write_bytes(b"torch==2.13.0\n")
    assert code.file_sha256(lock)["sha256"] == hashlib.sha256(b"torch==2.13.0\n").hexdigest()
    with pytest.raises(UsageError, match="--code .*nope: no such file"):
        code.git_state(tmp_path / "nope")


def test_loopback_resolution_is_flagged():
    assert host.resolve("localhost")["loopback"] is True
    assert host.resolve("127.0.1.1") == {"addresses": ["127.0.1.1"], "loopback": True}  # Debian's /etc/hosts default


def test_env_json_is_valid_and_redacted(cli, tmp_path):
    r = cli("env", "--json", "-", "--lock", str(DATA / "facts_h200x8.json"),
            env={"HF_TOKEN": HF, "NCCL_IB_HCA": "mlx5_0", "SLURM_JOB_NAME": GHP})
    assert r.returncode == 0, r.stderr
    assert HF not in r.stdout and GHP not in r.stdout and HF not in r.stderr
    m = json.loads(r.stdout)
    assert m["schema"] == "trainready.env/1"
    assert m["env"]["HF_TOKEN"] == "<redacted>" and m["env"]["NCCL_IB_HCA"] == "mlx5_0"
    assert set(m) >= {"host", "gpu", "software", "container", "code", "infiniband", "env"}
    if HAS_GPU:
        assert m["gpu"]["nvml"]["error"] is None and m["gpu"]["nvml"]["count"] >= 1
    else:
        assert m["gpu"]["nvml"]["error"] == "unavailable: no NVIDIA driver (libnvidia-ml.so.1 not found)"
    assert len(m["code"]["lock"]["sha256"]) == 64 and m["code"]["code"].startswith("unavailable: ")
    assert "Host" in r.stderr  # the readable summary went to stderr


def test_env_writes_file_atomically(cli, tmp_path):
    missing = cli("env", "--json", str(tmp_path / "sub" / "env.json"), "-q")
    assert missing.returncode == 2 and "does not exist" in missing.stderr  # no folders made from a typo
    (tmp_path / "sub").mkdir()
    out = tmp_path / "sub" / "env.json"
    r = cli("env", "--json", str(out), "-q")
    assert r.returncode == 0 and r.stdout == "" and json.loads(out.read_text())["schema"] == "trainready.env/1"


@pytest.mark.parametrize(
    "args, expect",
    [
        (("--lock", "/nonexistent"), "--lock /nonexistent: no such file"),
        (("--code", "/nonexistent"), "--code /nonexistent: no such file or directory"),
        (("--image-digest", "latest"), "--image-digest 'latest': expected an image digest"),
    ],
)
def test_env_bad_input_is_one_line_exit_2(cli, args, expect):
    r = cli("env", *args)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and expect in lines[0] and "Traceback" not in r.stderr


def test_summary_renders_captured_gpus_and_flags_an_unhealthy_one():
    import io

    from rich.console import Console

    from trainready.manifest import facts as facts_mod
    from trainready.manifest.build import collect
    from trainready.manifest.render import print_summary

    f = json.loads((DATA / "facts_h200x8.json").read_text())
    f["nvml"]["gpus"][4]["remap_pending"] = True
    m = collect()
    m["gpu"] = {"nvml": f["nvml"], "torch": f["torch"]}
    m["infiniband"] = ib.ports(DATA / "sysfs_ib")
    buf = io.StringIO()
    print_summary(m, Console(file=buf, width=250, force_terminal=False))
    text = buf.getvalue()
    assert "580.159.04" in text and "the driver's ceiling" in text and text.count("NVIDIA H200") >= 8
    assert "18/18 up" in text and "yes/no" in text and "400 Gb/sec (4X NDR)" in text
    assert facts_mod.NodeFacts.from_json(f).nvml.gpus[4].remap_pending is True
