"""perftest's ib_write_bw: its table parsed from its printed layout, and what cannot measure (no RDMA device,
perftest built without CUDA) told apart from a failed run, on outputs captured on this host (tests/data/perftest)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from trainready.comm import perftest as pt

DATA = Path(__file__).parent / "data" / "perftest"


def _read(name: str) -> str:
    return (DATA / name).read_text()


def test_the_ndr_table_row_is_read_in_gbits_past_the_warning_line():
    row = pt.parse_table(_read("write_bw_ndr_client.txt"))
    assert row is not None
    assert row.avg_gbps != 391.87  # the average, not the peak
    assert (row.size_b, row.iterations, row.peak_gbps, row.avg_gbps) == (65536, 5000, 391.87, 391.80)
    assert row.msg_rate_mpps == pytest.approx(row.avg_gbps * 1e9 / 8 / 65536 / 1e6, rel=1e-5)
    assert (row.device, row.link_type) == ("mlx5_3", "IB")


def test_a_half_rate_port_reads_as_such():
    o = pt.judge_output(_read("write_bw_hdr_client.txt"), "", 0)
    assert o.untested is None and o.error is None and o.result is not None
    assert o.result.avg_gbps == 195.95 and o.result.device == "mlx5_5"


def test_mib_tables_are_converted():
    text = _read("write_bw_ndr_client.txt").replace("[Gb/sec]", "[MiB/sec]").replace("391.80", "46704.00")
    row = pt.parse_table(text)
    assert row is not None and row.avg_gbps == pytest.approx(46704.00 / 119.2093, rel=1e-4)


def test_no_device_captured_is_not_tested_not_a_failure():
    o = pt.judge_output(_read("write_bw_no_device.stdout.txt"), _read("write_bw_no_device.stderr.txt"),
                        int(_read("write_bw_no_device.rc.txt")))
    assert o.result is None and o.error is None
    assert o.untested == "no RDMA device (ib_write_bw: Did not detect devices)"


def test_perftest_without_cuda_is_gpudirect_not_tested():
    o = pt.judge_output("", _read("write_bw_no_cuda.stderr.txt"), int(_read("write_bw_no_cuda.rc.txt")))
    assert o.result is None and o.untested is not None and "GPUDirect not tested" in o.untested
    assert "--use_cuda" not in _read("write_bw_help.txt")  # the captured help of this build offers no --use_cuda


def test_a_table_without_exit_0_or_no_table_is_a_failure_in_its_own_words():
    assert pt.judge_output(_read("write_bw_ndr_client.txt"), "", 0).error is None
    o = pt.judge_output(" Couldn't connect to 10.0.0.2:18516\n", " Unable to open file descriptor for socket connection\n", 1)
    assert o.result is None and o.untested is None
    assert o.error == "ib_write_bw exit 1: Unable to open file descriptor for socket connection"
    assert pt.judge_output("", " IB device mlx5_9 not found\n", 1).error == "ib_write_bw: IB device mlx5_9 not found"


def test_argv_server_and_client():
    assert pt.argv("mlx5_3", 1, 18518) == ["ib_write_bw", "-d", "mlx5_3", "-i", "1", "-p", "18518", "-s", "65536",
                                            "-n", "5000", "--report_gbits", "-F"]
    c = pt.argv("mlx5_3", 1, 18518, server="10.0.0.1", cuda=3)
    assert c[-2:] == ["--use_cuda=3", "10.0.0.1"]


@pytest.mark.skipif(shutil.which("ib_write_bw") is None, reason="perftest (ib_write_bw) not installed on this host")
def test_the_installed_perftest_on_a_host_without_rdma_is_not_tested():
    if Path("/sys/class/infiniband").is_dir() and any(Path("/sys/class/infiniband").iterdir()):
        pytest.skip("this host has RDMA devices")
    o = pt.run(pt.argv("mlx5_0", 1, pt.TCP_PORT), timeout_s=30)
    assert o.result is None and o.error is None and o.untested is not None and "no RDMA device" in o.untested
    assert pt.version() is not None


def test_a_missing_tool_is_not_tested():
    o = pt.run(pt.argv("mlx5_0", 1, pt.TCP_PORT, tool="/nonexistent/ib_write_bw"), timeout_s=5)
    assert o.untested == "/nonexistent/ib_write_bw not installed (perftest)" and o.result is None
