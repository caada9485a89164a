"""Catalog terms taken from what devices report and from AIConfigurator's kernel measurements.

- Device memory is the total the device reports (nvidia-smi's MiB total, rocm-smi's bytes) or the vendor's GiB
  figure, not the datasheet's "GB" label read as 1e9 B.
- gemm_latency comes from AIConfigurator 0.12.0's GEMM tables (bench/derive_aic_params.py), which puts the B200
  ahead of the H200 at batch 1, as its bandwidth says it should be.
"""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

import perfmodel as pm

ROOT = Path(__file__).resolve().parents[1]
MiB = 2**20

# The total each device reports, in MiB, and where it was read (the YAML's source quotes the same line).
REPORTED_MIB = {
    "h200": (143771, "nvidia-smi, sgl-project/sglang#3196"),
    "b200": (183359, "nvidia-smi, NVIDIA/TensorRT-LLM#10278"),
    "b300": (275040, "nvidia-smi, AIConfigurator 0.12.0 b300_sxm.yaml"),
    "gb200": (189471, "nvidia-smi, AIConfigurator 0.12.0 gb200.yaml"),
    "gb300": (284208, "nvidia-smi, AIConfigurator 0.12.0 gb300.yaml"),
    "a100-40gb": (40960, "nvidia-smi, modal-labs/modal-client#2797"),
    "a100-80gb-sxm": (81920, "nvidia-smi, modal-labs/modal-client#2797"),
    "h100-nvl": (95830, "nvidia-smi, NVIDIA/gpu-admin-tools#4"),
    "l4": (23034, "nvidia-smi, modal-labs/modal-client#2797"),
    "l40s": (46068, "nvidia-smi, akash-network/provider-configs#99"),
    "t4": (15360, "nvidia-smi, modal-labs/modal-client#2797"),
    "rtx-4090": (24564, "nvidia-smi, vllm-project/vllm#7553"),
    "rtx-5090": (32607, "nvidia-smi, noonghunna/club-3090#617"),
    "mi300x": (196592, "rocm-smi 'VRAM Total Memory (B): 206141652992', ROCm/legacy-rocm-build#4750"),
    "tpu-v5p": (95 * 1024, "Google Cloud TPU v5p docs: 'HBM capacity per chip (GiB) 95'"),
}
REPORT_WORDS = ("nvidia-smi", "rocm-smi", "GiB figure")


@pytest.mark.parametrize("name", sorted(REPORTED_MIB))
def test_memory_is_the_total_the_device_reports(name):
    hw = pm.load_hardware(name)
    mib, where = REPORTED_MIB[name]
    assert hw.memory_capacity == mib * MiB, where


@pytest.mark.parametrize("name", pm.catalog_names("hardware"))
def test_a_device_reported_memory_is_not_a_datasheet_label(name):
    """The rule: HBM and GDDR come in power-of-two dies, so what a device reports (nvidia-smi's MiB total, less
    what ECC or the driver reserves) or a vendor's GiB figure is never a whole number of 1e9 B. A spec whose
    memory source cites such a figure must hold it, not a round decimal "GB" label read as 1e9 B."""
    hw = pm.load_hardware(name)
    src = hw.sources["memory_capacity"]
    if not src.startswith(("nvidia-smi", "rocm-smi", "the vendor's GiB figure")):
        pytest.skip(f"{name}: memory_capacity is a datasheet label ({src[:60]}...)")
    assert any(w in src for w in REPORT_WORDS)
    assert hw.memory_capacity % 1e9 != 0, f"{name}: {hw.memory_capacity:.0f} B is a round decimal label"
    assert hw.memory_capacity % MiB == 0, f"{name}: a reported total is a whole number of MiB"


def test_the_lecture_h100_keeps_its_80_GB():
    # the lecture example (BRIEF.md): Llama 2 13B on one H100 SXM, 80 GB; B = 256 does not fit
    hw = pm.load_hardware("h100-sxm")
    assert hw.memory_capacity == 80e9
    d = pm.decode("llama-2-13b", "h100-sxm", batch=256, context=1024, mode="simple")
    assert not bool(d.fits[0]) and float(d.memory_bytes[0]) > 80e9


@pytest.mark.parametrize("weights_dtype", ["bf16", "fp8"])
def test_b200_is_not_slower_than_h200_for_deepseek_r1_at_batch_1_tp8(weights_dtype):
    """Decode at batch 1 is bandwidth- and fixed-cost-bound: 7.7 TB/s against 4.8 TB/s, with per-GEMM fixed
    costs measured the same way on both (AIConfigurator 0.12.0), must not leave the B200 behind."""
    t = {hw: float(pm.decode("deepseek-r1", hw, batch=1, context=1024, tp=8, mode="achievable",
                             weights_dtype=weights_dtype).latency_s[0]) for hw in ("h200", "b200")}
    assert t["b200"] <= t["h200"], t


def test_borrowed_blackwell_terms_no_longer_carry_the_b200_gemm_latency():
    b200 = pm.load_hardware("b200").achievable
    for name in ("b300", "gb200", "gb300"):
        a = pm.load_hardware(name).achievable
        assert "AIConfigurator 0.12.0" in a.sources["gemm_latency"], name
        assert not a.sources["gemm_latency"].startswith("assumption"), name
    assert "AIConfigurator 0.12.0 systems/data/b200_sxm/gemm/vllm/0.24.0/gemm_perf.parquet" in b200.sources["gemm_latency"]


@pytest.mark.parametrize("name", pm.catalog_names("hardware"))
def test_every_efficiency_lies_in_0_1(name):
    a = pm.load_hardware(name).achievable
    if a is None:
        pytest.skip(f"{name} has no achievable block")
    for v in (a.hbm_efficiency, *a.gemm_efficiency.values(), *a.attention_compute.values(), a.attention_bandwidth):
        assert 0 < v <= 1
    assert a.gemm_latency >= 0


def _wheel() -> Path | None:
    cands = [os.environ.get("AIC_WHEEL", ""), "/tmp/aicw/aiconfigurator_core-0.12.0-cp311-abi3-manylinux_2_28_x86_64.whl",
             "/tmp/aicc"]
    return next((Path(c) for c in cands if c and Path(c).exists()), None)


def _script():
    spec = importlib.util.spec_from_file_location("derive_aic_params", ROOT / "bench" / "derive_aic_params.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_derivation_reproduces_the_b200_gemm_latency():
    pytest.importorskip("pyarrow", reason="reading AIConfigurator's parquet tables needs pyarrow")
    wheel = _wheel()
    if wheel is None:
        pytest.skip("AIConfigurator 0.12.0 data absent (set AIC_WHEEL to the aiconfigurator_core wheel)")
    mod = _script()
    data = mod.data_dir(wheel)
    if data is None:
        pytest.skip(f"no AIConfigurator systems/data under {wheel}")
    res = mod.derive(data)
    for name in ("b200", "h200", "b300", "gb200", "gb300", "a100-80gb-sxm", "l40s"):
        derived = res[name]["gemm_latency"]["gemm_latency_s"]
        assert derived == pytest.approx(pm.load_hardware(name).achievable.gemm_latency, abs=0.1e-6), name
    # the efficiencies taken from the same tables
    assert res["b200"]["gemm_efficiency"]["fp4"]["efficiency"] == pytest.approx(
        pm.load_hardware("b200").achievable.gemm_efficiency["fp4"], abs=5e-4)
    assert res["l40s"]["gemm_efficiency"]["bf16"]["efficiency"] == pytest.approx(
        pm.load_hardware("l40s").achievable.gemm_efficiency["bf16"], abs=5e-4)


def test_the_derivation_says_when_the_data_is_absent(tmp_path, capsys):
    assert _script().main([str(tmp_path / "nothing-here.whl")]) == 2
    assert "no AIConfigurator data" in capsys.readouterr().err
