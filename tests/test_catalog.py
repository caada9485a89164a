"""Every catalog file loads; every derived parameter count equals the published one."""
import re

import pytest
import yaml

import perfmodel as pm
from perfmodel.ops import param_count
from perfmodel.specs import catalog_dir, catalog_names

MODELS = catalog_names("models")
HARDWARE = catalog_names("hardware")

REQUIRED_MODELS = {"llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b",
                   "mistral-7b", "mixtral-8x7b", "qwen2.5-0.5b", "deepseek-v2-lite", "deepseek-v3", "gpt-3-175b",
                   "llama-2-13b-gqa8", "llama-2-13b-mqa", "llama-2-13b-mla", "llama-2-13b-cla2", "llama-2-13b-swa",
                   "llama-2-13b-hybrid"}
REQUIRED_HARDWARE = {"h100-sxm", "h100-pcie", "h200", "b200", "a100-80gb-sxm", "a100-40gb", "l40s", "rtx-4090",
                     "mi300x", "tpu-v5e"}


def test_catalog_has_the_required_entries():
    assert REQUIRED_MODELS <= set(MODELS)
    assert REQUIRED_HARDWARE <= set(HARDWARE)


@pytest.mark.parametrize("name", MODELS)
def test_model_loads_and_matches_its_published_parameter_count(name):
    m = pm.load_model(name)
    assert m.source
    if "base" in yaml.safe_load((catalog_dir("models") / f"{name}.yaml").read_text()):
        assert m.published_params is None  # hypothetical variants have no published count
        return
    assert m.published_params, f"{name} needs published_params"
    n = param_count(m)
    if m.moe is None and m.published_tolerance == 0:
        assert n == m.published_params  # exact for dense models
    else:
        assert abs(n / m.published_params - 1) <= m.published_tolerance


@pytest.mark.parametrize("name", HARDWARE)
def test_hardware_loads_and_every_number_has_a_source(name):
    hw = pm.load_hardware(name)
    raw = yaml.safe_load((catalog_dir("hardware") / f"{name}.yaml").read_text())
    fields = [k for k in ("memory_capacity", "memory_bandwidth", "interconnect_bandwidth", "l2_cache", "tdp") if k in raw]
    fields += [f"peak_flops.{k}" for k in raw["peak_flops"]]
    for f in fields:
        assert len(hw.sources[f]) > 20, f"{name}: {f} needs a datasheet source"
    assert "bf16" in hw.peak_flops or "fp16" in hw.peak_flops
    assert 1 < hw.ridge("bf16" if "bf16" in hw.peak_flops else "fp16") < 2000


@pytest.mark.parametrize("name", HARDWARE)
def test_peaks_are_dense_not_sparse(name):
    text = (catalog_dir("hardware") / f"{name}.yaml").read_text().lower()
    hw = pm.load_hardware(name)
    if "sparsity" in text and "bf16" in hw.peak_flops:
        # where a datasheet quotes sparse tensor rates, bf16 must be below the fp8 rate it pairs with
        assert hw.peak_flops["bf16"] <= hw.peak_flops.get("fp8", float("inf"))


def test_h100_matches_the_lecture_numbers():
    hw = pm.load_hardware("h100-sxm")
    assert hw.memory_capacity == 80e9 and hw.memory_bandwidth == 3.35e12
    assert hw.peak_flops["bf16"] == pytest.approx(989e12, rel=1e-3)


@pytest.mark.parametrize("name", MODELS)
def test_model_yaml_cites_a_config_or_paper(name):
    m = pm.load_model(name)
    assert re.search(r"huggingface|arxiv|github|hypothetical|paper|\.json", m.source, re.I), m.source
