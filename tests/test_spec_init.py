"""`spec init`: the reference machine's manifest + measured figures → a spec that loads back."""

from trainready.spec import load_spec
from trainready.spec.init import spec_from_machine
from trainready.util.strict import dump_toml

MANIFEST = {
    "collected_at": "2026-12-02T10:00:00+00:00",
    "host": {"hostname": "ref-node-001", "os": "Ubuntu 24.04.3 LTS", "os_version": "Ubuntu 24.04"},
    "gpu": {
        "nvml": {
            "driver_version": "580.159.04",
            "cuda_driver_version": "13.0",
            "gpus": [{"index": i, "name": "NVIDIA H200", "memory_total_mib": 143771} for i in range(8)],
        }
    },
    "software": {
        "torch": "2.11.0+cu130",
        "torch_cuda": "13.0",
        "nccl": "2.28.9",
        "cudnn": "91300",
        "python": "3.12.3",
        # manifest/software.py's KEY_PACKAGES as found: only the training packages become pins
        "packages": {"torch": "2.11.0+cu130", "numpy": "2.1.3", "megatron-core": "0.19.2",
                     "transformer-engine": "2.8.0+40c69e7"},
    },
    "container": {"image_digest": "sha256:" + "ab" * 32},
}


def _report(gemm, copy, busbw):
    metrics = [{"name": "gemm_bf16", "value": v, "labels": {"gpu": str(i)}} for i, v in enumerate(gemm)]
    metrics += [{"name": "hbm_copy", "value": v, "labels": {"gpu": str(i)}} for i, v in enumerate(copy)]
    # labels as comm/evaluate.judge_op writes them: a real 8-GPU sweep averaged over 128M..1G
    metrics += [{"name": "comm_busbw_avg", "value": v,
                 "labels": {"op": op, "backend": "nccl", "dtype": "float", "ranks": "8",
                            "from_bytes": str(1 << 27), "to_bytes": str(1 << 30)}} for op, v in busbw.items()]
    return {"schema": "trainready.report/1", "results": [{"name": "x", "metrics": metrics}]}


def test_spec_from_reference_machine(tmp_path):
    spec = spec_from_machine(MANIFEST, _report([780.0, 760.0], [4300.0, 4200.0], {"all_reduce": 360.0}), 0.8)
    assert (spec.gpu.count, spec.gpu.model, spec.gpu.driver_branch) == (8, "H200", "580")
    assert spec.gpu.memory_gib_min is not None and 138 < spec.gpu.memory_gib_min < 140.5
    assert (spec.software.torch, spec.software.cuda, spec.software.nccl, spec.software.python) == (
        "2.11.0",
        "13.0",
        "2.28.9",
        "3.12",
    )
    assert spec.software.image_digest == "sha256:" + "ab" * 32
    assert spec.software.os == "Ubuntu 24.04"  # NAME + VERSION_ID, not PRETTY_NAME's point release
    assert spec.software.packages == {"megatron-core": "0.19.2", "transformer-engine": "2.8.0"}
    # floors at tolerance x the WORST reference figure, not the best
    assert spec.compute.gemm_tflops_min == 608.0
    assert spec.compute.hbm_gbps_min == 3360.0
    assert spec.comm.expected_busbw_gbps == {"all_reduce@8": 360.0} and spec.comm.min_fraction == 0.8
    assert spec.comm.expected_sizes_bytes == (1 << 27, 1 << 30)  # where the reference averaged it
    p = tmp_path / "fleet.toml"
    p.write_text(dump_toml(spec))
    loaded, _ = load_spec(p)
    assert loaded == spec


def test_cpu_machine_without_figures_sets_no_floors():
    cpu = {"host": {"hostname": "vm"}, "gpu": {"nvml": {"gpus": [], "driver_version": "unavailable: no driver"}},
           "software": {"torch": "2.13.0+cpu", "torch_cuda": "unavailable: CPU build", "python": "3.11.7"}}
    spec = spec_from_machine(cpu)
    assert spec.gpu.count == 0 and spec.gpu.driver_branch is None and spec.software.cuda is None
    assert spec.compute.gemm_tflops_min is None and spec.comm.expected_busbw_gbps == {}
    assert spec.software.os == "" and spec.software.packages == {}  # an older manifest: nothing guessed


def test_spec_written_here_holds_this_machine_to_its_os_and_fails_another(tmp_path):
    import dataclasses

    from trainready.checks import CheckContext
    from trainready.checks.versions import VersionsCheck
    from trainready.manifest.build import collect

    spec = spec_from_machine(collect())  # this machine's real manifest, as `spec init` reads it
    assert spec.software.os  # os-release NAME + VERSION_ID
    other = dataclasses.replace(spec, software=dataclasses.replace(spec.software, os="Plan9 4"))
    r = VersionsCheck().execute(CheckContext(other, tmp_path))
    assert r.status.value == "fail" and r.message.startswith(f"spec software.os = 'Plan9 4' but this is {spec.software.os} ")
    r = VersionsCheck().execute(CheckContext(spec, tmp_path))
    assert r.status.value in ("pass", "warn"), r.message  # warn: a GPU driver on minor-version compatibility
    assert f"os {spec.software.os} (spec '{spec.software.os}')" in r.message


def test_cli_spec_init_refuses_overwrite_and_roundtrips(cli, tmp_path):
    out = tmp_path / "s.toml"
    r = cli("spec", "init", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert cli("spec", "check", str(out)).returncode == 0
    again = cli("spec", "init", "-o", str(out))
    assert again.returncode == 2 and "file exists" in again.stderr
    bad = tmp_path / "r.json"
    bad.write_text("{not json")
    r = cli("spec", "init", "-o", str(tmp_path / "t.toml"), "--from-report", str(bad))
    assert r.returncode == 2 and "not JSON" in r.stderr and "Traceback" not in r.stderr


def test_floors_from_metrics_the_throughput_check_really_writes():
    from trainready.checks.throughput import GpuFigures, judge
    from trainready.hardware import lookup
    from trainready.spec.model import ComputeSpec

    out = judge(
        [GpuFigures(0, "NVIDIA H200", 780.0, 4300.0), GpuFigures(1, "NVIDIA H200", 760.0, 4200.0)],
        lookup("NVIDIA H200"),
        ComputeSpec(),
    )
    report = {"results": [{"metrics": [m.to_json() for m in out.metrics]}]}
    spec = spec_from_machine(MANIFEST, report, 0.8)
    assert spec.compute.gemm_tflops_min == 608.0
    assert spec.compute.hbm_gbps_min == 3360.0
    # the new floors now fail a GPU 25% slower than the reference
    slow = judge([GpuFigures(0, "NVIDIA H200", 560.0, 4300.0)], lookup("NVIDIA H200"), spec.compute)
    assert slow.status.value == "fail"


def test_spec_written_from_a_prerelease_torch_passes_that_machine():
    from trainready.checks.versions import version_matches

    m = dict(MANIFEST, software={**MANIFEST["software"], "torch": "2.13.0a0+8145d630e8"})
    spec = spec_from_machine(m)
    assert spec.software.torch == "2.13.0a0"
    assert version_matches(spec.software.torch, "2.13.0a0+8145d630e8")
    assert not version_matches(spec.software.torch, "2.13.0+cu130")  # the release is another version


def test_tiny_figures_keep_significant_digits_and_failed_checks_give_no_floor():
    rep = _report([780.0], [4300.0], {"all_reduce": 0.00412})
    spec = spec_from_machine(MANIFEST, rep, 0.8)
    assert spec.comm.expected_busbw_gbps == {"all_reduce@8": 0.00412}
    rep["results"][0]["status"] = "fail"
    spec = spec_from_machine(MANIFEST, rep, 0.8)
    assert spec.compute.gemm_tflops_min is None and spec.comm.expected_busbw_gbps == {}
