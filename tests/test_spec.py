import pytest

from trainready.errors import ConfigError
from trainready.spec import load_spec
from trainready.spec.load import EXAMPLES


@pytest.mark.parametrize("name", EXAMPLES)
def test_examples_load(name):
    spec, src = load_spec(f"example:{name}")
    assert spec.name == name and src.endswith(f"{name}.toml")


def test_b200_reference_carries_seed_versions():
    spec, _ = load_spec("example:b200-reference")
    assert (spec.gpu.count, spec.gpu.model) == (8, "B200")
    assert spec.software.cuda == "13.3" and spec.software.nccl == "2.30.7" and spec.software.torch == "2.13.0a0"


@pytest.mark.parametrize(
    "body, key, words",
    [
        ("[gpu]\ncount = 'eight'\n", "gpu.count", "expected an integer, got string 'eight'"),
        ("[gpu]\ncuont = 8\n", "gpu.cuont", "unknown key"),
        ("bogus = 1\n", "bogus", "unknown key"),
        ("[comm]\nexpected_busbw_gbps = { all_reduce = 'fast' }\n", "comm.expected_busbw_gbps.all_reduce", "expected a number"),
        ("[resume]\ncheckpoint_step = 100\n", "resume.checkpoint_step", "0 < checkpoint_step < steps"),
        ("gpu = 3\n", "gpu", "expected a table"),
    ],
)
def test_bad_specs_name_file_and_key(tmp_path, body, key, words):
    p = tmp_path / "node.toml"
    p.write_text(body)
    with pytest.raises(ConfigError) as ei:
        load_spec(p)
    msg = str(ei.value)
    assert str(p) in msg and f"key '{key}'" in msg and words in msg
    assert "\n" not in msg


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(ConfigError, match="file not found"):
        load_spec(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[gpu\ncount = 1")
    with pytest.raises(ConfigError, match="malformed TOML"):
        load_spec(bad)


def test_cli_bad_spec_exits_2_with_one_line(cli, tmp_path):
    p = tmp_path / "node.toml"
    p.write_text("[gpu]\ncount = 'eight'\n")
    r = cli("node", "--spec", str(p), "--only", "allreduce")
    assert r.returncode == 2
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert lines == [f"trainready: error: {p}: key 'gpu.count': expected an integer, got string 'eight'"]
    assert "Traceback" not in r.stderr + r.stdout


def test_comm_backend_is_validated(tmp_path):
    p = tmp_path / "n.toml"
    p.write_text("[comm]\nbackend = 'mpi'\n")
    with pytest.raises(ConfigError, match="comm.backend.*expected one of auto, nccl, gloo"):
        load_spec(p)


def test_nccl_backend_without_gpus_is_a_usage_error():
    import dataclasses

    from trainready.devices.world import cuda_count, local_world
    from trainready.errors import UsageError
    from trainready.spec import default_spec

    spec = default_spec()
    assert local_world(dataclasses.replace(spec, comm=dataclasses.replace(spec.comm, backend="gloo"))) == (8, "gloo")
    if cuda_count() == 0:
        with pytest.raises(UsageError, match="no CUDA GPU"):
            local_world(dataclasses.replace(spec, comm=dataclasses.replace(spec.comm, backend="nccl")))


@pytest.mark.parametrize(
    "body, key",
    [
        ("[comm]\nexpected_busbw_gbps = { allreduce = 300.0 }\n", "comm.expected_busbw_gbps.allreduce"),
        ("[comm]\nexpected_busbw_gbps = { all_reduce@x = 300.0 }\n", None),  # not valid TOML key → malformed
        ("[comm]\nexpected_busbw_gbps = { 'all_reduce@0' = 300.0 }\n", "comm.expected_busbw_gbps.all_reduce@0"),
        ("[comm]\nexpected_busbw_gbps = { all_reduce = 0.0 }\n", "comm.expected_busbw_gbps.all_reduce"),
        ("[comm]\nworld_size = -3\n", "comm.world_size"),
        ("[comm]\ntimeout_s = -1\n", "comm.timeout_s"),
        ("[compute]\ngemm_min_fraction = -5\n", "compute.gemm_min_fraction"),
        ("[compute]\nspread_max = -1\n", "compute.spread_max"),
    ],
)
def test_values_that_cannot_be_meant_are_rejected(tmp_path, body, key):
    p = tmp_path / "n.toml"
    p.write_text(body)
    with pytest.raises(ConfigError) as ei:
        load_spec(p)
    if key:
        assert f"key '{key}'" in str(ei.value)


def test_op_at_ranks_expectation_key_is_accepted(tmp_path):
    p = tmp_path / "n.toml"
    p.write_text("[comm]\nexpected_busbw_gbps = { 'all_reduce@8' = 367.0, all_gather = 300.0 }\n")
    assert load_spec(p)[0].comm.expected_busbw_gbps == {"all_reduce@8": 367.0, "all_gather": 300.0}


def test_backend_and_world_size_flags_win_over_the_spec() -> None:
    import dataclasses

    from trainready.devices.world import cuda_count, local_world
    from trainready.errors import UsageError
    from trainready.spec import default_spec

    spec = default_spec()
    gloo4 = dataclasses.replace(spec, comm=dataclasses.replace(spec.comm, backend="gloo", world_size=4))
    assert local_world(gloo4) == (4, "gloo")  # the spec's size, for the spec's backend
    assert local_world(gloo4, "gloo", 3) == (3, "gloo")  # the flag wins
    from trainready.devices.world import gloo_rank_limit

    top = gloo_rank_limit()
    for bad in (0, top + 1):
        with pytest.raises(UsageError, match=f"--world-size {bad}: expected 1..{top} for gloo"):
            local_world(gloo4, "gloo", bad)
    assert local_world(gloo4, "gloo", top) == (top, "gloo")
    if cuda_count() == 0:
        assert local_world(spec) == (8, "gloo")  # auto on a machine without GPUs
        with pytest.raises(UsageError, match="^--backend nccl: no CUDA GPU"):
            local_world(gloo4, "nccl")


def test_b200_reference_pins_os_and_megatron_core():
    spec, _ = load_spec("example:b200-reference")
    assert spec.software.os == "Ubuntu 24.04"
    assert spec.software.packages == {"megatron-core": "0.19.2"}
    cpu, _ = load_spec(None)
    assert cpu.software.os == "" and cpu.software.packages == {}  # the CPU default stays unpinned


def test_package_pins_load_strictly_and_dump_back(tmp_path):
    from trainready.util.strict import dump_toml

    p = tmp_path / "s.toml"
    p.write_text("[software]\npackages = { megatron-core = 19 }\n")
    with pytest.raises(ConfigError, match=r"key 'software.packages.megatron-core': expected a string, got integer 19"):
        load_spec(p)
    p.write_text("[software]\npackages = 'megatron-core'\n")
    with pytest.raises(ConfigError, match=r"key 'software.packages': expected a table"):
        load_spec(p)
    p.write_text('[software]\nos = "Ubuntu 24.04"\npackages = { "megatron-core" = "0.19.2", "zope.interface" = "7.2" }\n')
    spec, _ = load_spec(p)
    assert spec.software.packages == {"megatron-core": "0.19.2", "zope.interface": "7.2"}
    out = tmp_path / "out.toml"
    out.write_text(dump_toml(spec))
    assert '"zope.interface" = "7.2"' in out.read_text()  # quoted: a bare dotted key would nest a table
    assert load_spec(out)[0] == spec


@pytest.mark.parametrize("body,key", [
    ('[software]\ntorch = ""\n', "software.torch"),
    ('[software]\nos = "  "\n', "software.os"),
    ('[software]\npackages = { "" = "1" }\n', "software.packages."),
    ('[software]\npackages = { "megatron-core" = " " }\n', "software.packages.megatron-core"),
])
def test_blank_software_pins_are_config_errors(tmp_path, body, key):
    p = tmp_path / "s.toml"
    p.write_text('[software]\nos = "Ubuntu 24.04"\npackages = { "megatron-core" = "0.19.2" }\n')
    assert load_spec(p)[0].software.os == "Ubuntu 24.04"  # the well-formed pins load
    p.write_text(body)
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_spec(p)
