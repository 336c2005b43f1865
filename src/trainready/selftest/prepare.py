"""Files and values the self-test cases' placeholders stand for (selftest/cases.py).

Everything is made fresh in the self-test's own scratch directory: a short spec for this machine,
replayed-facts files of an 8x H200 node with one fault each, a version-drift spec, and a sample
token corpus truncated two ways.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any, Callable

from trainready.selftest import fleetspec

PEERS = 3  # devices a fingerprint case compares: the fewest whose strict majority names one (fingerprint/judge.py)
CPU_RANKS = 4  # gloo ranks on a machine without GPUs: enough to name a rank, quick on 2 cores
H200_MIB = 143771  # NVML memory.total of an H200 141 GB (tests/data/facts_h200x8.json)


def gpu_count() -> int:
    from trainready.devices.world import cuda_count

    return int(cuda_count())


def world(gpus: int) -> int:
    return gpus if gpus else CPU_RANKS


def spec_text(gpus: int, extra: str = "", comm: str = "") -> str:
    # Collective deadline: 20 s on gloo (4 ranks on a loaded 2-core machine took > 10 s to start), 30 s with
    # NCCL (start-up and the first communicator have their own allowance in ranks.launch; a hang plant waits
    # this out).  Resume: the tiny model on GPUs too (the faults are in what is restored, not in the model's
    # size), so the full-disk case's 16 MiB tmpfs holds its checkpoint on either.
    timeout = 30.0 if gpus else 20.0
    return (f'name = "selftest"\ndescription = "trainready selftest: short runs on this machine"\n'
            f"[gpu]\ncount = {gpus}\n[comm]\nworld_size = {0 if gpus else CPU_RANKS}\ntimeout_s = {timeout}\n{comm}"
            f'[resume]\nsteps = 10\ncheckpoint_step = 5\nranks = 1\npreset = "tiny"\n{extra}')


def synth_facts(n: int = 8) -> dict[str, Any]:
    """NodeFacts JSON (trainready.facts/1) of a healthy 8x H200 node: driver 580, CUDA 13.0, torch 2.11."""
    gpus, devs = [], []
    for i in range(n):
        uuid = f"00000000-0000-4000-8000-{i:012d}"
        gpus.append({"index": i, "name": "NVIDIA H200", "uuid": f"GPU-{uuid}", "pci_bus_id": f"00000000:{0x18 + i:02X}:00.0",
                     "memory_total_mib": H200_MIB, "ecc_mode": "enabled", "ecc_uncorrected_volatile": 0,
                     "ecc_uncorrected_aggregate": 0, "remapped_rows_uncorrectable": 0, "remap_pending": False,
                     "remap_failed": False, "persistence_mode": "enabled", "pcie_gen_current": 5, "pcie_gen_max": 5,
                     "pcie_width_current": 16, "pcie_width_max": 16, "nvlink_links": ["active"] * 18,
                     "throttle_reasons": ["gpu_idle"]})
        devs.append({"index": i, "name": "NVIDIA H200", "uuid": uuid, "memory_total_mib": 143156})
    return {"schema": "trainready.facts/1",
            "nvml": {"error": None, "driver_version": "580.159.04", "cuda_driver_version": "13.0", "count": n, "gpus": gpus},
            "torch": {"available": True, "reason": "", "cuda_visible_devices": None, "count": n, "devices": devs},
            "versions": {"python": "3.12.3", "torch": "2.11.0+cu130", "torch_cuda": "13.0", "cudnn": "9.15.1",
                         "nccl": "2.28.9"}}


def _truncated_corpus(root: Path, which: str) -> Path:
    from trainready.data.corpus import write_sample_corpus

    prefix = write_sample_corpus(root / f"truncated-{which}", num_docs=50)
    f = Path(f"{prefix}.{which}")
    data = f.read_bytes()
    f.write_bytes(data[: len(data) - 64])  # cut the last 64 bytes
    return prefix


def _slurm_up() -> str:
    """'' when a Slurm cluster answers here, else why not."""
    if shutil.which("sinfo") is None:
        return "no Slurm here (sinfo not found; scripts/local-slurm.sh up starts a local cluster)"
    try:
        p = subprocess.run(["sinfo", "-h", "-o", "%D"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"Slurm not answering ({exc})"
    return "" if p.returncode == 0 and p.stdout.strip() else "no Slurm cluster up (sinfo shows no nodes)"


def unmet(needs: str, gpus: int) -> str:
    """Why a case does not apply here ('' when it does)."""
    if needs == "gpu" and not gpus:
        return "not applicable: needs a GPU (none visible here)"
    if needs == "multirank" and world(gpus) < 2:
        return f"not applicable: needs at least 2 ranks, this machine has {gpus} GPU (one rank per GPU)"
    if needs == "peers" and world(gpus) < PEERS:
        return (f"not applicable: needs at least {PEERS} devices of one kind (a strict majority names the odd one), "
                f"this machine has {gpus} GPU(s)")
    if needs == "slurm":
        why = _slurm_up()
        return f"not applicable: {why}" if why else ""
    return ""


def child_env(tmp: Path) -> dict[str, str]:
    """Environment of a case's `python -m trainready`: this trainready whatever the cwd, scratch under `tmp`."""
    import os

    import trainready

    src = str(Path(trainready.__file__).resolve().parents[1])
    return {**os.environ, "TMPDIR": str(tmp),
            "PYTHONPATH": os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH", "")) if p)}


def _own_busbw(root: Path, argv: list[str]) -> float:
    """This machine's own all_reduce busbw, GB/s: one clean run of the case's own command (`argv`, the plant
    left out), made once per self-test (kept in busbw-calibration.json)."""
    import sys

    cal = root / "busbw-calibration.json"
    if not cal.is_file():
        plain = [a for i, a in enumerate(argv) if a != "--plant" and (i == 0 or argv[i - 1] != "--plant")]
        plain = [str(root / "spec.toml") if a.startswith("{spec_busbw") else a for a in plain]
        subprocess.run([sys.executable, "-m", "trainready", *plain, "--json", str(cal)], capture_output=True,
                       text=True, timeout=300, cwd=root, env=child_env(root))
    doc = json.loads(cal.read_text())
    return float(next(m["value"] for r in doc["results"] for m in r["metrics"]
                      if m["name"] == "comm_busbw_avg" and m["labels"].get("op") == "all_reduce"))


def _busbw_spec(root: Path, gpus: int, argv: list[str], name: str, comm: str = "") -> str:
    """A spec holding this machine's own all_reduce busbw as the expectation (plus `comm` lines), as NAME."""
    path = root / name
    path.write_text(spec_text(gpus, comm=f"expected_busbw_gbps = {{ all_reduce = {_own_busbw(root, argv)!r} }}\n{comm}"))
    return str(path)


def spec_busbw(root: Path, gpus: int, argv: list[str]) -> str:
    """This machine's own busbw as the expectation, so a uniformly slower fabric is judged like for like.  Made
    only when a case asks for it (one more comm run)."""
    return _busbw_spec(root, gpus, argv, "spec_busbw.toml")


# The loose bound of a planted transient's case: a healthy measurement of the self-test's short sweep ranged
# 0.69-1.0x its calibration run on a loaded 2-core VM, a 10x slower one 0.1x; 0.3 leaves 2-3x either side.
LOOSE_FRACTION = 0.3


def spec_busbw_loose(root: Path, gpus: int, argv: list[str]) -> str:
    """spec_busbw with comm.min_fraction LOOSE_FRACTION: the bound a healthy measurement clears on a loaded host."""
    return _busbw_spec(root, gpus, argv, "spec_busbw_loose.toml", f"min_fraction = {LOOSE_FRACTION}\n")


class Unmet(Exception):
    """A lazily made placeholder that cannot be made here: the case is skipped with this reason."""


MOUNTS: list[Path] = []  # tmpfs mounts made by this self-test, unmounted at its end (unmount_all)
TMPFS_SIZE = "16m"  # passes resume's free-space pre-check for the 10-step tiny model; the plant then fills it


def small_disk(root: Path, gpus: int, argv: list[str]) -> str:
    """A 16 MiB tmpfs of the self-test's own for the full-disk plant: it fills the --dir filesystem, which
    must never be a real disk.  Needs root (mount); otherwise the case is skipped."""
    import os

    if os.geteuid() != 0:
        raise Unmet("needs a small filesystem of its own: root, to mount a tmpfs (the plant fills --dir's filesystem)")
    where = root / "small-disk"
    where.mkdir(parents=True, exist_ok=True)
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", str(where)],
                         capture_output=True, text=True)
    if res.returncode:
        raise Unmet(f"cannot mount a tmpfs here ({res.stderr.strip() or res.returncode})")
    MOUNTS.append(where)
    return str(where / "ckpt")


def unmount_all() -> None:
    while MOUNTS:
        subprocess.run(["umount", "-l", str(MOUNTS.pop())], capture_output=True, check=False)


FLEET = 3  # nodes of the cluster cases' runs: the reference, a planted node, and a third (the slow rule names no
# node among fewer than 3 figures: cluster/judge/verdict.py)
_FLEETS: dict[str, tuple[str, ...]] = {}  # self-test scratch root -> its nodes: asked once per self-test
_FLEET_LOCK = threading.Lock()


def fleet_nodes(root: Path) -> tuple[str, ...]:
    """The first FLEET usable nodes of the default partition, in Slurm's order (node1..node3 on the local
    cluster): the cluster cases name them, never a fixed name, so they run on a cluster they did not configure."""
    from trainready.cluster.control import avail, slurm
    from trainready.errors import SlurmError

    with _FLEET_LOCK:
        if str(root) not in _FLEETS:
            try:
                name = avail.partition().get("PartitionName")
                info = slurm.nodes(partition=name)
            except SlurmError as exc:
                raise Unmet(f"Slurm does not say which nodes it has ({exc})") from None
            usable = avail.select(list(info), info, None).nodes
            if len(usable) < FLEET:
                raise Unmet(f"needs {FLEET} usable nodes in the default partition{' ' + name if name else ''}, "
                            f"Slurm has {len(usable)} ({', '.join(usable) or 'none'})")
            _FLEETS[str(root)] = usable[:FLEET]
        return _FLEETS[str(root)]


def _fleet_node(k: int) -> Callable[[Path, int, list[str]], str]:
    return lambda root, gpus, argv: fleet_nodes(root)[k]


def _fabric(name: str) -> Callable[[Path, int, list[str]], str]:
    def make(root: Path, gpus: int, argv: list[str]) -> str:
        from trainready.selftest import fabricfiles

        if name.startswith("fabric_node"):
            return fabricfiles.fabric_node(root, hdr=name == "fabric_node_hdr")
        return fabricfiles.spec_fabric(root, spec_text(gpus))
    return make


# Placeholders made only when a case that runs needs them: name -> maker(root, gpus, the case's argv).
LAZY = {"spec_busbw": spec_busbw, "spec_busbw_loose": spec_busbw_loose, "small_disk": small_disk, "spec_fleet": fleetspec.spec_fleet,
        "spec_trend": fleetspec.spec_trend, "fabric_node": _fabric("fabric_node"),
        "fabric_node_hdr": _fabric("fabric_node_hdr"), "spec_fabric": _fabric("spec_fabric"),
        **{f"node{k + 1}": _fleet_node(k) for k in range(FLEET)}}


def health_readings(root: Path) -> dict[str, str]:
    """Passive readings of an 8x H100 node (`--plant health.reading`): healthy, and GPU 3 fallen off the bus
    (Xid 79 logged) with its PCIe link trained down to x8."""
    from trainready.manifest.gpuhealth import HealthReading, spare
    from trainready.manifest.kmsg import Xid

    gpus = [spare(index=i, uuid=f"GPU-{i}", serial=f"16500000000{i:02d}", pci_bus_id=f"00000000:{0x18 + i:02x}:00.0")
            for i in range(8)]
    ok = HealthReading(None, tuple(gpus), kmsg_seq=100, boot_id="selftest")
    bad_gpus = list(gpus)
    bad_gpus[3] = spare(**{**gpus[3].__dict__, "pcie_width_current": 8})
    bad = HealthReading(None, tuple(bad_gpus), (Xid(99, "0000:1b:00", 79, "pid=1, GPU has fallen off the bus."),),
                        kmsg_seq=100, boot_id="selftest")
    out = {}
    for name, reading in (("health_ok", ok), ("health_bad", bad)):
        (root / f"{name}.json").write_text(json.dumps(reading.to_json()))
        out[name] = str(root / f"{name}.json")
    return out


def placeholders(root: Path, gpus: int) -> dict[str, str]:
    """{name: value} for every placeholder of the cases, its files written under `root`."""
    root.mkdir(parents=True, exist_ok=True)
    for sub in ("cluster", "scratch"):  # each case's own --results / --save-only folder is made inside these
        (root / sub).mkdir(exist_ok=True)
    values = {"rank": str(world(gpus) - 1), "root": str(root), "cluster_results": str(root / "cluster"),
              "scratch": str(root / "scratch")}
    for name, text in (("spec", spec_text(gpus)),
                       ("spec_drift", spec_text(gpus, '[software]\npackages = { numpy = "0.0.1" }\n'))):
        (root / f"{name}.toml").write_text(text)
        values[name] = str(root / f"{name}.toml")
    facts = synth_facts()
    (root / "control-dir").mkdir(exist_ok=True)  # the full-disk case's control writes its checkpoint on a real disk
    values["control_dir"] = str(root / "control-dir" / "ckpt")
    remap = json.loads(json.dumps(facts))
    remap["nvml"]["gpus"][2]["remap_pending"] = True
    old = json.loads(json.dumps(facts))
    old["nvml"]["cuda_driver_version"] = "12.4"
    for name, doc in (("facts_ok", facts), ("facts_remap", remap), ("facts_old_driver", old)):
        (root / f"{name}.json").write_text(json.dumps(doc))
        values[name] = str(root / f"{name}.json")
    values.update(health_readings(root))
    from trainready.data.corpus import write_sample_corpus

    values["data_ok"] = str(write_sample_corpus(root / "intact", num_docs=50))  # the truncated cases' control
    values["data_truncated_bin"] = str(_truncated_corpus(root, "bin"))
    values["data_truncated_idx"] = str(_truncated_corpus(root, "idx"))
    return values
