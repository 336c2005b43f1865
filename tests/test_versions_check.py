"""The `versions` check: the driver → CUDA → torch → NCCL/cuDNN chain and spec pins."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import platform
from pathlib import Path

import pytest
import torch

from conftest import cpu_machine_only
from trainready.checks import CheckContext
from trainready.checks.versions import TRAP, VersionsCheck, judge_versions, os_matches, version_matches
from trainready.manifest import facts as facts_mod
from trainready.manifest.facts import NodeFacts
from trainready.records import Status
from trainready.spec import load_spec
from trainready.spec.model import NodeSpec

H200 = Path(__file__).parent / "data" / "facts_h200x8.json"


@pytest.fixture
def h200() -> NodeFacts:
    return facts_mod.load(H200)


@pytest.fixture
def spec8() -> NodeSpec:
    return load_spec("example:h200-8x")[0]


def pinned(spec: NodeSpec, **software: object) -> NodeSpec:
    return dataclasses.replace(spec, software=dataclasses.replace(spec.software, **software))


def with_versions(f: NodeFacts, **changes: str) -> NodeFacts:
    return dataclasses.replace(f, versions=dataclasses.replace(f.versions, **changes))


@pytest.mark.parametrize(
    "expected, actual, ok",
    [
        ("2.13", "2.13.0+cpu", True), ("2.1", "2.13.0", False), ("13.", "13.0", True), ("13.", "12.8", False),
        ("2.13.0a0", "2.13.0a0+8145d630e8", True), ("2.13.0", "2.13.0a0+8145d630e8", False),
        ("2.11.0+cu130", "2.11.0+cu130", True), ("2.11.0+cu130", "2.11.0+cu128", False), ("9.9", "2.13.0", False),
    ],
)
def test_version_matches_component_wise(expected, actual, ok):
    assert version_matches(expected, actual) is ok


def test_captured_h200_chain_passes_and_explains_the_trap(h200, spec8):
    out = judge_versions(spec8, h200)
    assert out.status == Status.PASS, out.message
    assert "driver 580.159.04" in out.message and "CUDA ≤ 13.0, torch built for CUDA 13.0" in out.message
    assert TRAP in out.message


def test_driver_cuda_older_major_than_torch_fails(h200, spec8):
    old = dataclasses.replace(h200, nvml=dataclasses.replace(h200.nvml, cuda_driver_version="12.4"))
    out = judge_versions(spec8, old)
    assert out.status == Status.FAIL
    assert "driver supports CUDA ≤ 12.4, torch built for CUDA 13.0" in out.message and TRAP in out.message
    assert "Upgrade the driver" in out.remedy


def test_driver_older_minor_warns_minor_version_compatibility(h200, spec8):
    out = judge_versions(spec8, with_versions(h200, torch_cuda="13.3"))
    assert out.status == Status.WARN and "minor-version compatibility" in out.message


def test_spec_demanding_torch_9_9_fails_here(tmp_path):
    spec = pinned(load_spec(None)[0], torch="9.9")
    r = VersionsCheck().execute(CheckContext(spec, tmp_path))
    assert r.status == Status.FAIL
    assert r.message == f"spec software.torch = '9.9' but found {torch.__version__}" and "Install torch 9.9" in r.remedy
    right = pinned(load_spec(None)[0], torch=torch.__version__.split("+")[0], python=platform.python_version())
    assert VersionsCheck().execute(CheckContext(right, tmp_path)).status == Status.PASS


@cpu_machine_only
def test_cpu_node_passes_and_says_what_it_did_not_judge(tmp_path):
    r = VersionsCheck().execute(CheckContext(load_spec(None)[0], tmp_path))
    assert r.status == Status.PASS, r.message
    assert f"torch {torch.__version__}" in r.message and "no GPU expected" in r.message


@cpu_machine_only
def test_gpu_spec_on_this_cpu_machine_fails(tmp_path, spec8):
    r = VersionsCheck().execute(CheckContext(spec8, tmp_path))
    assert r.status == Status.FAIL and "driver not readable: no NVIDIA driver" in r.message


def test_driver_branch_mismatch_fails(h200, spec8):
    assert judge_versions(spec8, h200).status == Status.PASS
    spec = dataclasses.replace(spec8, gpu=dataclasses.replace(spec8.gpu, driver_branch="570"))
    out = judge_versions(spec, h200)
    assert out.status == Status.FAIL and "driver_branch = '570' but driver is 580.159.04" in out.message


def test_nccl_pin_and_missing_nccl(h200, spec8):
    assert judge_versions(pinned(spec8, nccl="2.28"), h200).status == Status.PASS
    out = judge_versions(pinned(spec8, nccl="2.30.7"), h200)
    assert out.status == Status.FAIL and "spec software.nccl = '2.30.7' but found 2.28.9" in out.message
    out = judge_versions(spec8, with_versions(h200, nccl="unavailable: torch was built without NCCL"))
    assert out.status == Status.FAIL and "nccl missing: torch was built without NCCL" in out.message


def test_image_digest_pin(h200, spec8):
    d = "sha256:" + "ab" * 32
    spec = pinned(spec8, image_digest=d)
    out = judge_versions(spec, h200, None)
    assert out.status == Status.FAIL and "no digest given" in out.message
    assert judge_versions(spec, h200, "sha256:" + "cd" * 32).status == Status.FAIL
    assert judge_versions(spec, h200, d).status == Status.PASS


def test_cli_versions_pin_fails_with_one_clear_message(cli, tmp_path):
    spec = tmp_path / "pin.toml"
    spec.write_text('name = "pin"\n[software]\ntorch = "9.9"\n')
    r = cli("node", "--only", "versions", "--spec", str(spec), "--json", "-")
    assert r.returncode == 1, r.stderr
    res = json.loads(r.stdout)["results"][0]
    assert res["status"] == "fail" and res["message"].startswith("spec software.torch = '9.9' but found ")


def test_image_digest_is_matched_exactly_not_as_substring(h200, spec8):
    full = "sha256:" + "ab" * 32
    pinned = dataclasses.replace(spec8, software=dataclasses.replace(spec8.software, image_digest=full))
    assert judge_versions(pinned, h200, image_digest="nvcr.io/x/y@" + full).status == Status.PASS
    other = "sha256:" + "ab" * 31 + "cd"
    assert judge_versions(pinned, h200, image_digest=other).status == Status.FAIL
    short = dataclasses.replace(spec8, software=dataclasses.replace(spec8.software, image_digest="sha256:"))
    assert judge_versions(short, h200, image_digest=full).status == Status.FAIL  # a fragment matches nothing


def test_spec_with_a_digest_fragment_is_rejected(tmp_path):
    from trainready.errors import ConfigError

    p = tmp_path / "s.toml"
    p.write_text("[software]\nimage_digest = 'sha256:'\n")
    with pytest.raises(ConfigError, match="software.image_digest"):
        load_spec(p)


def _here_os() -> tuple[str, str]:
    """This machine's os-release NAME and VERSION_ID, read directly (not through trainready)."""
    fields = dict(
        (k, v.strip().strip('"')) for k, v in
        (line.split("=", 1) for line in Path("/etc/os-release").read_text().splitlines() if "=" in line)
    )
    return fields.get("NAME", "Linux"), fields.get("VERSION_ID", "")


@pytest.mark.parametrize(
    "expected, name, version_id, ok",
    [
        ("Ubuntu 24.04", "Ubuntu", "24.04", True), ("ubuntu 24.04", "Ubuntu", "24.04", True),
        ("Ubuntu 24", "Ubuntu", "24.04", True), ("Ubuntu 24.04", "Ubuntu", "24.10", False),
        ("Ubuntu 22.04", "Ubuntu", "22.04.5", True), ("Ubuntu 24.04", "Debian GNU/Linux", "12", False),
        ("Debian GNU/Linux 12", "Debian GNU/Linux", "12", True), ("Ubuntu 2", "Ubuntu", "24.04", False),
        ("Arch Linux", "Arch Linux", "", True), ("Ubuntu", "Ubuntu", "24.04", True),
    ],
)
def test_os_matches_name_and_version_id(expected, name, version_id, ok):
    assert os_matches(expected, name, version_id) is ok


def test_os_pin_fails_for_another_os_and_passes_for_this_one(tmp_path):
    name, vid = _here_os()
    other = pinned(load_spec(None)[0], os="Ubuntu 0.04" if name != "Ubuntu" else "Debian GNU/Linux 0")
    r = VersionsCheck().execute(CheckContext(other, tmp_path))
    assert r.status == Status.FAIL
    now = f"{name} {vid}".strip()
    assert r.message == f"spec software.os = '{other.software.os}' but this is {now} (os-release NAME + VERSION_ID)"
    assert "Run the image the spec names" in r.remedy and "\n" not in r.message
    here = pinned(load_spec(None)[0], os=f"{name} {vid}".strip())
    r = VersionsCheck().execute(CheckContext(here, tmp_path))
    assert r.status == Status.PASS, r.message
    assert f"os {here.software.os} (spec '{here.software.os}')" in r.message


def test_unreadable_os_release_fails_a_pin_and_is_not_judged_without_one(h200, spec8):
    out = judge_versions(pinned(spec8, os="Ubuntu 24.04"), h200, os_release=None)
    assert out.status == Status.FAIL and "but this is /etc/os-release not readable" in out.message
    out = judge_versions(spec8, h200, os_release=None)
    assert out.status == Status.PASS and "os not judged (/etc/os-release not readable)" in out.message
    ubuntu = {"NAME": "Ubuntu", "VERSION_ID": "24.04", "PRETTY_NAME": "Ubuntu 24.04.3 LTS"}
    assert judge_versions(pinned(spec8, os="Ubuntu 24.04"), h200, os_release=ubuntu).status == Status.PASS


def test_package_pins_missing_and_wrong_version_fail_installed_passes(tmp_path):
    import numpy

    base = load_spec(None)[0]
    missing = pinned(base, packages={"trainready-no-such-dist": "0.19.2"})
    r = VersionsCheck().execute(CheckContext(missing, tmp_path))
    assert r.status == Status.FAIL
    assert r.message == "spec software.packages.trainready-no-such-dist = '0.19.2' but trainready-no-such-dist is not installed"
    assert r.remedy.startswith("Install trainready-no-such-dist 0.19.2 in the image")
    wrong = pinned(base, packages={"numpy": "0.0.1"})
    r = VersionsCheck().execute(CheckContext(wrong, tmp_path))
    assert r.status == Status.FAIL and r.message == f"spec software.packages.numpy = '0.0.1' but found {numpy.__version__}"
    major_minor = ".".join(numpy.__version__.split(".")[:2])
    for pin in (numpy.__version__, major_minor):
        r = VersionsCheck().execute(CheckContext(pinned(base, packages={"NumPy": pin}), tmp_path))
        assert r.status == Status.PASS, r.message
        assert f"NumPy {numpy.__version__} (spec '{pin}')" in r.message
        assert r.details["packages"] == {"NumPy": numpy.__version__}


def test_several_failures_keep_one_line_each_and_one_remedy(h200, spec8):
    spec = pinned(spec8, os="Ubuntu 24.04", packages={"megatron-core": "0.19.2", "numpy": "2.1"})
    found = {"megatron-core": "unavailable: megatron-core is not installed", "numpy": "2.4.6"}
    out = judge_versions(spec, h200, os_release={"NAME": "Ubuntu", "VERSION_ID": "22.04"}, packages=found)
    assert out.status == Status.FAIL and "\n" not in out.message
    assert out.message.split("; ") == [
        "spec software.os = 'Ubuntu 24.04' but this is Ubuntu 22.04 (os-release NAME + VERSION_ID)",
        "spec software.packages.megatron-core = '0.19.2' but megatron-core is not installed",
        "spec software.packages.numpy = '2.1' but found 2.4.6",
    ]
    assert "Install megatron-core 0.19.2, numpy 2.1 in the image" in out.remedy
    assert out.details["os"] == "Ubuntu 22.04"


def test_cli_b200_reference_names_its_os_and_megatron_pins_on_this_machine(cli, tmp_path):
    r = cli("node", "--only", "versions", "--spec", "example:b200-reference", "--json", "-")
    assert r.returncode == 1, r.stderr
    msg = json.loads(r.stdout)["results"][0]["message"]
    if _here_os() != ("Ubuntu", "24.04"):
        assert "spec software.os = 'Ubuntu 24.04' but this is" in msg
    try:
        mcore = importlib.metadata.version("megatron-core")
    except importlib.metadata.PackageNotFoundError:
        assert "spec software.packages.megatron-core = '0.19.2' but megatron-core is not installed" in msg
    else:
        assert ("megatron-core = '0.19.2' but found" in msg) != version_matches("0.19.2", mcore)


def test_replayed_facts_do_not_judge_this_machines_os_or_packages(h200, spec8):
    pinned = dataclasses.replace(spec8, software=dataclasses.replace(
        spec8.software, os="Plan9 4", packages={"surely-not-installed-pkg": "1.0"}))
    # Mismatch first: judged as this machine, both pins fail.
    live = judge_versions(pinned, h200, None, {"NAME": "Debian GNU/Linux", "VERSION_ID": "12"},
                          {"surely-not-installed-pkg": "unavailable: not installed"})
    assert live.status == Status.FAIL and "software.os" in live.message
    # A replay carries no OS or packages: not judged, said so, never this host's figures.
    rep = judge_versions(pinned, h200, None, None, None, replayed=True)
    assert rep.status == Status.WARN and "not judged: the replayed facts file" in rep.message
    assert "Debian" not in rep.message and rep.details["packages"] == {}
    assert "without --plant versions.facts" in rep.remedy
