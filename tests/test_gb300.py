"""hardware/gb300.yaml: the GB300 (Blackwell Ultra GPU of a GB300 NVL72) is read as its sources say."""
import pytest

import perfmodel as pm


@pytest.fixture(scope="module")
def gb300():
    return pm.load_hardware("gb300")


def test_dense_peaks_are_the_datasheet_halves(gb300):
    # Blackwell Ultra datasheet, GB300 column: sparse tensor figures (FP4 'sparse | dense' = 20 | 15)
    assert gb300.peak_flops["bf16"] == pytest.approx(5e15 / 2)
    assert gb300.peak_flops["fp16"] == gb300.peak_flops["bf16"]
    assert gb300.peak_flops["fp8"] == pytest.approx(10e15 / 2)
    assert gb300.peak_flops["fp4"] == pytest.approx(15e15)
    assert gb300.peak_flops["int8"] == pytest.approx(330e12 / 2)  # Blackwell Ultra cuts INT8
    assert gb300.peak_flops["tf32"] == pytest.approx(1.25e15)
    assert gb300.peak_flops["fp32"] == pytest.approx(80e12)


def test_memory_is_what_the_device_reports_not_the_decimal_label(gb300):
    assert gb300.memory_capacity == 284208 * 2**20  # nvidia-smi total, MiB (AIConfigurator gb300.yaml)
    assert gb300.memory_capacity > 279e9  # the datasheet's '279 GB' label is below it
    assert gb300.memory_bandwidth == 8e12


def test_the_rack_is_one_nvlink5_domain_like_gb200(gb300):
    gb200 = pm.load_hardware("gb200")
    assert gb300.devices_per_node == 72 == gb200.devices_per_node
    assert gb300.link_bandwidth == 900e9 == gb200.link_bandwidth
    assert gb300.interconnect_bandwidth == 1.8e12
    assert gb300.memory_capacity > 1.4 * gb200.memory_capacity
    assert gb300.peak_flops["fp4"] == pytest.approx(1.5 * gb200.peak_flops["fp4"])


def test_every_achievable_term_is_measured_on_gb300_or_says_it_is_borrowed(gb300):
    srcs = gb300.achievable.sources
    assert srcs, "gb300 has an achievable block"
    for key, text in srcs.items():
        # the GEMM terms come from AIConfigurator's GB300 kernel tables; every other term is borrowed and says so
        measured = "AIConfigurator" in text and "gb300" in text and "assumption" not in text.split("AIConfigurator")[0]
        assert measured or "assumption" in text, f"{key}: neither measured on a GB300 nor marked borrowed: {text}"
