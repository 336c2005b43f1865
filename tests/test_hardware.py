import pytest

from trainready.devices.parallel import on_each_device
from trainready.hardware import GPUS, lookup, memory_gib_per_gpu

# Product names as NVML / torch.cuda.get_device_name report them -> expected table key.
NAMES = {
    "NVIDIA H100 80GB HBM3": "H100",
    "NVIDIA H100 PCIe": "H100 PCIe",
    "NVIDIA H100 NVL": "H100 NVL",
    "NVIDIA H200": "H200",
    "NVIDIA H200 NVL": "H200 NVL",
    "NVIDIA H20": "H20",
    "NVIDIA H800": "H800",
    "NVIDIA GH200 480GB": "GH200",
    "NVIDIA GH200 144G HBM3e": "GH200 144G",
    "NVIDIA B200": "B200",
    "NVIDIA GB200": "GB200",
    "NVIDIA GB300": "GB300",
    "NVIDIA B300 SXM6 AC": "B300",
    "NVIDIA A100-SXM4-80GB": "A100-SXM4-80GB",
    "NVIDIA A100-SXM4-40GB": "A100-SXM4-40GB",
    "NVIDIA A100-PCIE-40GB": "A100 PCIe 40GB",
    "NVIDIA A100 80GB PCIe": "A100 80GB PCIe",
    "NVIDIA A10": "A10",
    "NVIDIA L40S": "L40S",
    "NVIDIA L40": "L40",
    "NVIDIA L4": "L4",
}


@pytest.mark.parametrize("name,key", sorted(NAMES.items()))
def test_most_specific_row_wins(name, key):
    row = lookup(name)
    assert row is not None, name
    assert row.key == key


@pytest.mark.parametrize("name", ["NVIDIA A10G", "Tesla V100-SXM2-32GB", "AMD Instinct MI300X", "", "   ", "cpu"])
def test_unknown_gpu_is_none(name):
    assert lookup(name) is None


def test_prefix_traps_are_not_matched():
    # A bare substring search would get these wrong: A10 in A100, H20 in H200, B200 in GB200, L4 in L40S.
    assert lookup("NVIDIA A100-SXM4-80GB").key != "A10"
    assert lookup("NVIDIA H200").key != "H20"
    assert lookup("NVIDIA GB200").key != "B200"
    assert lookup("NVIDIA L40S").key != "L4"


def test_every_row_is_reachable_and_sourced():
    reached = {lookup(n).key for n in NAMES}
    assert reached == {r.key for r in GPUS}
    for r in GPUS:
        assert "datasheet" in r.source or "brief" in r.source, r.key
        assert 50 < r.bf16_tflops < 5000 and 200 <= r.hbm_gbps <= 10000 and 16 <= r.memory_gb <= 300


def test_known_dense_peaks():
    # Dense = half the datasheet's sparse figure (H100/H200 SXM: 1,979 sparse; B200: 4.5 PF sparse per GPU).
    assert lookup("NVIDIA H200").bf16_tflops == pytest.approx(1979 / 2, rel=1e-3)
    assert lookup("NVIDIA H200").hbm_gbps == 4800
    assert lookup("NVIDIA B200").bf16_tflops == 2250
    assert lookup("NVIDIA A100-SXM4-80GB").bf16_tflops == 312


def test_memory_helper():
    assert memory_gib_per_gpu("NVIDIA H200") == pytest.approx(143771 / 1024)
    assert memory_gib_per_gpu("NVIDIA L40S") == pytest.approx(48e9 / 2**30)  # datasheet GB -> GiB, conservative
    assert memory_gib_per_gpu("NVIDIA H100 NVL") < 94  # never above the datasheet figure read as GiB
    assert memory_gib_per_gpu("Mystery GPU 9000") is None


def test_on_each_device_keeps_order_and_isolates_errors():
    def fn(dev: str) -> str:
        if dev == "bad":
            raise RuntimeError("device fell off the bus\nsecond line")
        return dev.upper()

    runs = on_each_device(fn, ["cpu", "bad", "cpu"])
    assert [r.value for r in runs] == ["CPU", None, "CPU"]
    assert runs[1].error == "RuntimeError: device fell off the bus"
    assert runs[0].label == {"device": "cpu"} and runs[0].where == "cpu"
