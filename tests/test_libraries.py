"""Loaded NCCL/cuDNN files vs the versions the image declares.

The lent H200 image declares NCCL_VERSION=2.28.3-1 (captured in tests/data/env_h200x1_captured.json)
while torch loads NCCL 2.28.9 from its wheel (same capture): the manifest and the `versions` check must
show the loaded file and warn with both values."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
import torch  # noqa: F401  (maps libtorch_cpu.so into this process for the /proc/self/maps test)

from trainready.checks.versions import judge_versions
from trainready.manifest import facts as facts_mod
from trainready.manifest import libraries
from trainready.manifest.software import Versions, collect_versions
from trainready.records import Status
from trainready.spec import load_spec

DATA = Path(__file__).parent / "data"
CAPTURED = json.loads((DATA / "env_h200x1_captured.json").read_text())
SITE = "/opt/torch/.venv/lib/python3.12/site-packages"  # the captured manifest's python_executable's venv
WHEEL_NCCL = f"{SITE}/nvidia/nccl/lib/libnccl.so.2"
WHEEL_CUDNN = f"{SITE}/nvidia/cudnn/lib/libcudnn.so.9"
MAPS = f"""\
7f0000000000-7f0000100000 r-xp 00000000 00:2a 101 {SITE}/torch/lib/libtorch_cuda.so
7f0000200000-7f0000300000 r-xp 00000000 00:2a 102 {SITE}/nvidia/cudnn/lib/libcudnn_ops.so.9
7f0000400000-7f0000500000 r-xp 00000000 00:2a 103 {WHEEL_CUDNN}
7f0000600000-7f0000700000 r-xp 00000000 00:2a 104 {WHEEL_NCCL}
7f0000700000-7f0000701000 rw-p 00100000 00:2a 104 {WHEEL_NCCL}
7f0000800000-7f0000900000 rw-p 00000000 00:00 0 [heap]
7f0000a00000-7f0000b00000 rw-p 00000000 00:00 0
"""


def test_maps_parser_on_this_process():
    paths = libraries.self_maps()
    torch_lib = next(p for p in paths if os.path.basename(p).startswith("libtorch_cpu"))
    assert os.path.exists(torch_lib) and len(paths) == len(set(paths))
    assert libraries.loaded_file("nccl", paths) is None  # the CPU wheel has no NCCL


def test_main_library_file_is_picked_from_maps():
    paths = libraries.mapped_paths(MAPS)
    assert libraries.loaded_file("nccl", paths) == WHEEL_NCCL
    assert libraries.loaded_file("cudnn", paths) == WHEEL_CUDNN  # not libcudnn_ops.so.9
    assert "[heap]" not in paths and paths.count(WHEEL_NCCL) == 1


def test_captured_image_declares_another_nccl_than_torch_loads():
    env, sw = CAPTURED["env"], CAPTURED["software"]
    decl = libraries.declared("nccl", env, None, dirs=[])
    assert decl == (("NCCL_VERSION env", "2.28.3"),) and sw["nccl"] == "2.28.9"
    assert libraries.disagreements(sw["nccl"], decl) == ["NCCL_VERSION env says 2.28.3"]
    assert libraries.disagreements("2.28.3", decl) == []


def test_system_copy_is_declared_unless_it_is_the_loaded_file(tmp_path):
    real = tmp_path / "libcudnn.so.9.14.0"
    real.write_bytes(b"\x7fELF")
    (tmp_path / "libcudnn.so.9").symlink_to(real.name)
    env = {"CUDNN_VERSION": "9.14.0.64"}
    decl = libraries.declared("cudnn", env, WHEEL_CUDNN, dirs=[str(tmp_path)])
    assert decl == (("CUDNN_VERSION env", "9.14.0"), (f"system {real}", "9.14.0"))
    assert libraries.disagreements("9.19.0", decl) == ["CUDNN_VERSION env says 9.14.0", f"system {real} says 9.14.0"]
    assert libraries.declared("cudnn", {}, str(tmp_path / "libcudnn.so.9"), dirs=[str(tmp_path)]) == ()


@pytest.fixture
def h200():
    return facts_mod.load(DATA / "facts_h200x1_captured.json")


def _with(f, **changes):
    return dataclasses.replace(f, versions=dataclasses.replace(f.versions, **changes))


def test_versions_check_warns_with_both_values_then_passes_when_they_agree(h200):
    spec = load_spec("example:h200-8x")[0]
    spec = dataclasses.replace(spec, gpu=dataclasses.replace(spec.gpu, count=1))
    planted = _with(h200, nccl_path=WHEEL_NCCL, nccl_declared=(("NCCL_VERSION env", "2.28.3"),),
                    cudnn_path=WHEEL_CUDNN, cudnn_declared=(("system /usr/lib/x86_64-linux-gnu/libcudnn.so.9.14.0", "9.14.0"),))
    bad = judge_versions(spec, planted)
    assert bad.status == Status.WARN, bad.message
    assert f"nccl: torch loads 2.28.9 from {WHEEL_NCCL}, but NCCL_VERSION env says 2.28.3" in bad.message
    assert "cudnn: torch loads 9.19.0 from" in bad.message and "libcudnn.so.9.14.0 says 9.14.0" in bad.message
    assert "declares one library and torch runs another" in bad.remedy
    good = judge_versions(spec, _with(h200, nccl_path=WHEEL_NCCL, nccl_declared=(("NCCL_VERSION env", "2.28.9"),)))
    assert good.status == Status.PASS, good.message
    assert f"nccl 2.28.9 from {WHEEL_NCCL}" in good.message and "cudnn 9.19.0 (loaded file not recorded)" in good.message


def test_versions_json_round_trip_and_old_records():
    v = Versions("3.12", "2.11", "13.0", "9.19.0", "2.28.9", WHEEL_CUDNN, WHEEL_NCCL, (), (("NCCL_VERSION env", "2.28.3"),))
    d = v.to_json()
    assert d["nccl_declared"] == {"NCCL_VERSION env": "2.28.3"} and Versions.from_json(d) == v
    old = {k: d[k] for k in ("python", "torch", "torch_cuda", "cudnn", "nccl")}
    assert Versions.from_json(old).nccl_path == "" and Versions.from_json(old).nccl_declared == ()


def test_cpu_torch_says_no_library_rather_than_guessing():
    v = collect_versions()
    if torch.version.cuda is not None:
        pytest.skip("CUDA build of torch: covered by the GPU command in docs/env.md")
    assert v.nccl_path.startswith("unavailable: ") and v.cudnn_path.startswith("unavailable: ")
    assert v.nccl_declared == () and v.cudnn_declared == ()


def test_manifest_fields_warn_with_both_values():
    from trainready.manifest.software import _library_fields

    decl = (("NCCL_VERSION env", "2.28.3"),)
    f = _library_fields("nccl", "2.28.9", WHEEL_NCCL, decl)
    assert f["nccl_warning"] == "NCCL_VERSION env says 2.28.3, torch loads 2.28.9"
    assert f["nccl_path"] == WHEEL_NCCL and f["nccl_declared"] == {"NCCL_VERSION env": "2.28.3"}
    assert "nccl_warning" not in _library_fields("nccl", "2.28.3", WHEEL_NCCL, decl)
