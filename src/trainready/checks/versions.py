"""Question 1, second half: is the version chain consistent?

driver → the CUDA version it supports (NVML's "CUDA driver version", which is
what `nvidia-smi` prints as "CUDA Version": the driver's ceiling, NOT the
installed toolkit, a common misreading) ≥ the CUDA toolkit torch was built for
(torch.version.cuda); NCCL and cuDNN present in torch and matching the spec;
torch/Python/image digest as the spec pins them; the image's OS (os-release
NAME + VERSION_ID) and Python distributions (importlib.metadata) likewise.

CUDA compatibility (NVIDIA "CUDA Compatibility" guide): a driver of an older
major version cannot run a newer-major toolkit → fail; a driver of the same
major but an older minor runs it through minor-version compatibility, without
PTX JIT for newer features → warn.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata as md
import os
import re
from dataclasses import dataclass, field
from typing import Mapping

from trainready.checks.gpus import node_facts
from trainready.manifest import guarded, is_unavailable, unavailable, why
from trainready.manifest.container import DIGEST_ENV, image_digest
from trainready.manifest.facts import NodeFacts
from trainready.manifest.host import name_version, os_release_fields
from trainready.manifest.libraries import disagreements
from trainready.manifest.software import Versions, package_set
from trainready.records import Level, Outcome, Status
from trainready.spec.model import NodeSpec
from trainready.suite.base import Check, CheckContext, register

TRAP = "nvidia-smi's 'CUDA Version' is the driver's ceiling, not the installed toolkit"


def version_matches(expected: str, actual: str) -> bool:
    """Component-wise prefix: '2.13' matches '2.13.0+cpu' but not '2.130'; '13.' matches '13.0'.

    An expectation with a local part ('+cu130') is compared as a plain string prefix.
    """
    if "+" in expected:
        return actual.startswith(expected)
    exp = [p for p in expected.strip().rstrip(".").split(".") if p]
    act = actual.split("+", 1)[0].split(".")
    return bool(exp) and len(exp) <= len(act) and all(e == a for e, a in zip(exp, act))


def _major_minor(v: str) -> tuple[int, int] | None:
    m = re.match(r"^(\d+)\.(\d+)", v.strip())
    return (int(m.group(1)), int(m.group(2))) if m else None


def _digest(ref: str) -> str | None:
    """The 'sha256:<64 hex>' part of a digest or 'repo@sha256:…' reference; exact, never a substring."""
    m = re.search(r"sha256:[0-9a-f]{64}", ref)
    return m.group(0) if m else None


def installed_version(name: str) -> str:
    """The installed distribution's version (importlib.metadata normalises 'Megatron_Core' → 'megatron-core')."""
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return unavailable(f"{name} is not installed")


def os_matches(expected: str, name: str, version_id: str) -> bool:
    """'Ubuntu 24.04' vs os-release NAME='Ubuntu', VERSION_ID='24.04': the name equal (any case), the
    version component-wise as `version_matches` ('Ubuntu 24' matches 24.04). A last word that does not
    start with a digit is part of the name ('Arch Linux' pins the name only)."""
    exp_name, _, exp_ver = expected.strip().rpartition(" ")
    if not exp_ver[:1].isdigit():
        exp_name, exp_ver = expected.strip(), ""
    same = " ".join(exp_name.split()).casefold() == " ".join(name.split()).casefold()
    return bool(exp_name) and same and (not exp_ver or version_matches(exp_ver, version_id))


@dataclass
class Findings:
    """What the check found so far, in order: facts said, failures (message, remedy), warnings and their
    remedies (one per kind of warning)."""

    said: list[str] = field(default_factory=list)
    fails: list[tuple[str, str]] = field(default_factory=list)
    warns: list[str] = field(default_factory=list)
    remedies: list[str] = field(default_factory=list)

    def pin(self, key: str, expected: str | None, actual: str, remedy: str) -> None:
        """software.KEY against what was found: said when not pinned or matching, else a failure."""
        if expected is None:
            self.said.append(f"{key} {actual}" if not is_unavailable(actual) else f"{key} not judged ({why(actual)})")
        elif is_unavailable(actual) or not version_matches(expected, actual):
            self.fails.append((f"spec software.{key} = '{expected}' but found {why(actual)}", remedy))
        else:
            self.said.append(f"{key} {actual} (spec '{expected}')")

    def outcome(self, details: dict[str, object]) -> Outcome:
        if self.fails:
            remedy = " ".join(dict.fromkeys(r for _, r in self.fails if r))
            return Outcome(Status.FAIL, "; ".join(m for m, _ in self.fails if m), remedy=remedy, details=details)
        if self.warns:
            return Outcome(Status.WARN, "; ".join(self.warns + self.said), remedy=" ".join(self.remedies),
                           details=details)
        return Outcome(Status.PASS, "; ".join(self.said), details=details)


def judge_versions(
    spec: NodeSpec,
    f: NodeFacts,
    image_digest: str | None = None,
    os_release: Mapping[str, str] | None = None,
    packages: Mapping[str, str] | None = None,
    replayed: bool = False,
    digest_source: str = "",
) -> Outcome:
    """`os_release`: os-release(5) fields (None = not read); `packages`: installed version (or
    "unavailable: ...") of each distribution the spec pins (None = not looked up).  `replayed`:
    `f` is a captured facts file, which carries no OS or package versions: their pins are not
    judged (a warning), rather than judged against this machine."""
    sw, v, found = spec.software, f.versions, Findings()
    image = "Use the image the spec names (or fix the spec after deliberate change)."
    found.pin("python", sw.python, v.python, image)
    found.pin("torch", sw.torch, v.torch,
              f"Install torch {sw.torch} (the image's torch; never upgrade it in place). " + image)
    found.pin("cuda", sw.cuda, v.torch_cuda,
              "torch.version.cuda is the toolkit torch was built for: use a torch build for that CUDA. " + image)
    _judge_driver(spec, f, found)
    if spec.gpu.count > 0 or sw.nccl or sw.cudnn:
        _judge_libraries(spec, v, found)
    if sw.image_digest:
        _judge_digest(sw.image_digest, image_digest, digest_source, found)
    if replayed:
        os_now, pkgs = unavailable("replayed facts carry no OS"), {}
        if sw.os or sw.packages:
            found.warns.append("software.os/packages not judged: the replayed facts file carries no OS or package "
                               "versions")
            found.remedies.append("Judge the OS and packages on the machine itself (without --plant versions.facts).")
    else:
        os_now = _judge_os(sw.os, os_release, found.said, found.fails)
        pkgs = {n: (packages or {}).get(n, unavailable("it was not looked up")) for n in sw.packages}
        _judge_packages(sw.packages, pkgs, found.said, found.fails)
    return found.outcome({"versions": v.to_json(), "driver": f.nvml.driver_version,
                          "cuda_driver_version": f.nvml.cuda_driver_version, "os": os_now, "packages": pkgs,
                          "image_digest": image_digest})


def _judge_driver(spec: NodeSpec, f: NodeFacts, found: Findings) -> None:
    """The driver's branch (spec gpu.driver_branch) and its CUDA ceiling against torch's CUDA."""
    nv, v, gpu_expected = f.nvml, f.versions, spec.gpu.count > 0
    if not nv.ok:
        if gpu_expected:
            found.fails.append((f"driver not readable: {why(str(nv.error))}",
                                "Install/load the NVIDIA driver (nvidia-smi must work)."))
        else:
            found.said.append("driver/CUDA/NCCL/cuDNN not judged: no GPU expected (spec gpu.count = 0)")
        return
    drv, ceiling = nv.driver_version, nv.cuda_driver_version
    found.said.append(f"driver {drv}")
    if spec.gpu.driver_branch and not str(drv).startswith(spec.gpu.driver_branch.rstrip(".") + "."):
        found.fails.append((f"spec gpu.driver_branch = '{spec.gpu.driver_branch}' but driver is {drv}",
                            "Install the driver branch the spec names (vendor support matrix)."))
    d, t = _major_minor(str(ceiling)), _major_minor(v.torch_cuda) if not is_unavailable(v.torch_cuda) else None
    if not (d and t):
        if gpu_expected:
            found.fails.append((f"cannot compare driver CUDA ({ceiling}) with torch's CUDA ({v.torch_cuda}) ({TRAP})",
                                "Install a CUDA build of torch."))
        return
    rel = f"driver supports CUDA ≤ {ceiling}, torch built for CUDA {v.torch_cuda} ({TRAP})"
    if d[0] < t[0]:
        found.fails.append((rel, f"Upgrade the driver to one supporting CUDA {v.torch_cuda}, or use a torch/image "
                            f"built for CUDA ≤ {ceiling}. Do not read nvidia-smi's 'CUDA Version' as the toolkit."))
    elif d < t:
        found.warns.append(rel + ": runs via minor-version compatibility (no PTX JIT for newer code)")
        found.remedies.append("Prefer a driver whose CUDA version ≥ torch's.")
    else:
        found.said.append(rel)


def _judge_libraries(spec: NodeSpec, v: Versions, found: Findings) -> None:
    """NCCL and cuDNN: the spec's pins, present where GPUs are expected, the loaded file against the image's
    declaration."""
    sw = spec.software
    found.pin("nccl", sw.nccl, v.nccl,
              "NCCL must be NVIDIA's build matching the CUDA major: use the image's torch/NCCL.")
    found.pin("cudnn", sw.cudnn, v.cudnn, "Use the image's torch/cuDNN pairing.")
    for key, val in (("nccl", v.nccl), ("cudnn", v.cudnn)):
        pinned_failed = any(m.startswith(f"spec software.{key}") for m, _ in found.fails)
        if spec.gpu.count > 0 and is_unavailable(val) and not pinned_failed:
            found.fails.append((f"{key} missing: {why(val)}",
                                "Install a CUDA build of torch (it ships NCCL and cuDNN)."))
    lib_warns = loaded_vs_declared(v, found.said)
    found.warns += lib_warns
    found.remedies += [DECLARED_REMEDY] if lib_warns else []


def _judge_digest(expected: str, image_digest: str | None, digest_source: str, found: Findings) -> None:
    """software.image_digest against the digest given (exact sha256, never a substring)."""
    if image_digest is None:
        found.fails.append((f"spec software.image_digest = {expected} but no digest given "
                            f"({digest_source or 'this image digest is unknown'})",
                            f"Pass `trainready node --image-digest sha256:...` or set {DIGEST_ENV} in the job to the "
                            "image's digest (on the host: docker inspect --format '{{index .RepoDigests 0}}' IMAGE)."))
    elif _digest(expected) != _digest(image_digest):
        src = f" (from {digest_source})" if digest_source else ""
        found.fails.append((f"image digest {image_digest}{src} is not the spec's {expected}",
                            "Run the image the spec names."))
    else:
        found.said.append(f"image {image_digest}")


DECLARED_REMEDY = ("The image declares one library and torch runs another (its wheel's copy): judge and pin the "
                   "version torch loads (the path shown); fix or drop the image's stale declaration so tools that "
                   "read it (and people) are not misled.")


def loaded_vs_declared(v: Versions, said: list[str]) -> list[str]:
    """Appends where each loaded NCCL/cuDNN file is to `said`; returns a warning for each library whose
    loaded version differs from a version the image declares (probe.libraries)."""
    warns = []
    for key, version, path, decl in (("nccl", v.nccl, v.nccl_path, v.nccl_declared),
                                     ("cudnn", v.cudnn, v.cudnn_path, v.cudnn_declared)):
        if is_unavailable(version):
            continue
        where = "(loaded file not recorded)" if not path else f"({why(path)})" if is_unavailable(path) else f"from {path}"
        said.append(f"{key} {version} {where}")
        off = disagreements(version, decl)
        if off:
            warns.append(f"{key}: torch loads {version} {where}, but {', '.join(off)}")
    return warns


def _judge_os(expected: str, fields: Mapping[str, str] | None, said: list[str], fails: list[tuple[str, str]]) -> str:
    """Appends the OS line or failure; returns 'NAME VERSION_ID' (or "unavailable: ...")."""
    if fields is None:
        now = unavailable("/etc/os-release not readable")
    else:
        now = name_version(fields)
    if not expected:
        said.append(f"os {now}" if not is_unavailable(now) else f"os not judged ({why(now)})")
    elif fields is None or not os_matches(expected, fields.get("NAME") or "Linux", fields.get("VERSION_ID", "")):
        fails.append((f"spec software.os = '{expected}' but this is {why(now)} (os-release NAME + VERSION_ID)",
                      "Run the image the spec names (its userspace OS), or fix the spec after a deliberate change."))
    else:
        said.append(f"os {now} (spec '{expected}')")
    return now


def _judge_packages(pins: Mapping[str, str], found: Mapping[str, str], said: list[str], fails: list[tuple[str, str]]) -> None:
    bad = []
    for name, expected in pins.items():
        actual = found[name]
        if is_unavailable(actual):
            fails.append((f"spec software.packages.{name} = '{expected}' but {why(actual)}", ""))
        elif not version_matches(expected, actual):
            fails.append((f"spec software.packages.{name} = '{expected}' but found {actual}", ""))
        else:
            said.append(f"{name} {actual} (spec '{expected}')")
            continue
        bad.append(f"{name} {expected}")
    if bad:
        fails.append(("", f"Install {', '.join(bad)} in the image (the spec's versions), or run the image the spec names."))


@register
class VersionsCheck(Check):
    name = "versions"
    title = "Version chain: driver ≥ torch's CUDA, NCCL/cuDNN, pins"
    level = Level.LIGHT
    order = 15
    timeout_s = 120.0

    def run(self, ctx: CheckContext) -> Outcome:
        digest, digest_source = image_digest(ctx.options.image_digest, os.environ)
        pins = ctx.spec.software.packages
        replayed = ctx.fault("versions.facts") is not None
        out = judge_versions(ctx.spec, node_facts(ctx, "versions.facts"), digest, None if replayed else os_release_fields(),
                             None if replayed else {n: installed_version(n) for n in pins}, replayed,
                             digest_source)
        if replayed:
            return out
        # The image's key packages and the hash of its whole package set, for `trainready compare`.
        pk = guarded(package_set)
        extra = {"key_packages": pk[0], "package_set_sha256": pk[1]} if not isinstance(pk, str) else {"package_set_sha256": pk}
        return dataclasses.replace(out, details={**out.details, **extra})
