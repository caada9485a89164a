"""Every catalog file loads; every derived parameter count equals the published one."""
import re
from pathlib import Path

import pytest
import yaml

import perfmodel as pm
from perfmodel.ops import active_param_count, param_count
from perfmodel.specs import catalog_dir, catalog_names

ROOT = Path(__file__).resolve().parent.parent

MODELS = catalog_names("models")
HARDWARE = catalog_names("hardware")

REQUIRED_MODELS = {"llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b",
                   "mistral-7b", "mixtral-8x7b", "qwen2.5-0.5b", "deepseek-v2-lite", "deepseek-v3", "gpt-3-175b",
                   "llama-2-13b-gqa8", "llama-2-13b-mqa", "llama-2-13b-mla", "llama-2-13b-cla2", "llama-2-13b-swa",
                   "llama-2-13b-hybrid",
                   # issue 17: this year's models
                   "llama-3.2-1b", "llama-3.2-3b", "llama-3.3-70b", "llama-4-scout", "llama-4-maverick", "qwen2.5-7b",
                   "qwen2.5-72b", "qwen3-0.6b", "qwen3-8b", "qwen3-32b", "qwen3-30b-a3b", "qwen3-235b-a22b", "gemma-3-4b",
                   "gemma-3-27b", "gpt-oss-20b", "gpt-oss-120b", "phi-4", "deepseek-r1", "kimi-k2"}
REQUIRED_HARDWARE = {"h100-sxm", "h100-pcie", "h200", "b200", "a100-80gb-sxm", "a100-40gb", "l40s", "rtx-4090",
                     "mi300x", "tpu-v5e",
                     # issue 17: the accelerators people can buy or rent now (A10G, H20, RTX PRO 6000 Blackwell and
                     # Apple's M4 Max / M3 Ultra are left out: no vendor-published 16-bit peak was found, see
                     # docs/catalog-sources.md)
                     "l4", "t4", "h100-nvl", "gh200", "gb200", "b300", "rtx-5090", "mi325x", "mi355x", "tpu-v5p",
                     "tpu-v6e", "gaudi3"}


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
    # a published total may include parts the spec does not model (a vision tower): the spec says how many
    n = param_count(m) + m.published_excluded
    if m.published_tolerance == 0:
        assert n == m.published_params  # exact where the publisher gives an exact total (safetensors)
    else:
        assert abs(n / m.published_params - 1) <= m.published_tolerance
    if m.published_excluded:
        assert len(m.published_excluded_what) > 20, f"{name}: say what published_params.excluded is"


@pytest.mark.parametrize("name", [n for n in MODELS if pm.load_model(n).moe is not None
                                  and pm.load_model(n).published_params is not None])
def test_moe_models_match_their_published_active_parameter_count(name):
    m = pm.load_model(name)
    if m.published_active is None:
        # DeepSeek-V2-Lite: "2.4B activated" vs 2.45B without the input embedding, 2.66B with it (catalog-sources.md)
        assert name == "deepseek-v2-lite", f"{name} needs published_active_params"
        return
    a = active_param_count(m, input_embedding=m.published_active_input_embedding)
    assert abs(a / m.published_active - 1) <= m.published_active_tolerance, (a, m.published_active)
    assert a < param_count(m)


def test_every_catalog_entry_is_listed_with_its_source_in_the_docs():
    text = (ROOT / "docs" / "catalog-sources.md").read_text()
    for name in MODELS + HARDWARE:
        assert f"| {name} |" in text, f"docs/catalog-sources.md has no row for {name}"


def test_the_readme_hardware_list_is_the_catalog():
    """The README's `perfmodel list hardware` block is regenerated from the catalog (docs/update_examples.py,
    checked by test_docs); here: it names every catalog device."""
    text = (ROOT / "README.md").read_text()
    block = text[text.index("$ perfmodel list hardware"):]
    block = block[: block.index("```")]
    assert {line.split()[1] for line in block.splitlines()[3:] if line.strip()} == set(HARDWARE)


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
