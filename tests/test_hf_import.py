"""Hugging Face config.json import: published parameter counts, agreement with the catalog, clear refusals.

The fixtures in tests/fixtures/hf/ are the real models' config.json files (tests/fixtures/hf/README.md
says where each was read). A count that our schema cannot reproduce exactly is not hidden in a
tolerance: the importer states the parameters it leaves out, and the tests check that number.
"""
import dataclasses
import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given, strategies as st


from perfmodel import hf_import
from perfmodel.cli import main
from perfmodel.engine import kv_growth_per_token
from perfmodel.ops import param_count
from perfmodel.specs import load_model

HF = Path(__file__).resolve().parent / "fixtures" / "hf"


def fx(name: str) -> str:
    return str(HF / f"{name}.json")


# fixture -> (published total, where it is published). Exact integers unless noted.
PUBLISHED = {
    "llama-3.1-8b": (8_030_261_248, "HF safetensors total of meta-llama/Llama-3.1-8B (BF16 index total_size "
                                    "16,060,522,496 B / 2); keras-hub llama3_presets.py llama3_8b_en"),
    "mistral-7b-v0.1": (7_241_732_096, "keras-hub mistral_presets.py mistral_7b_en \"params\""),
    "qwen2.5-0.5b": (494_032_768, "keras-hub qwen_presets.py qwen2.5_0.5b_en \"params\"; Nikolic et al. 2025 "
                                  "(arXiv:2502.00706) Table 4, Qwen/Qwen2-0.5B (same shapes)"),
    "mixtral-8x7b-v0.1": (46_702_792_704, "keras-hub mixtral_presets.py mixtral_8_7b_en \"params\""),
    "qwen1.5-moe-a2.7b-chat": (14_315_784_192, "keras-hub qwen_moe_presets.py qwen1.5_moe_2.7b_en \"params\"; "
                                               "HF safetensors total of Qwen/Qwen1.5-MoE-A2.7B(-Chat)"),
    "deepseek-v2-lite": (15_706_484_224, "HF safetensors total of deepseek-ai/DeepSeek-V2-Lite(-Chat) (31.41 GB "
                                         "BF16; the model card rounds it to 15.7B)"),
    "gpt2": (124_439_808, "keras-hub gpt2_presets.py gpt2_base_en \"params\"; Nikolic et al. 2025 Table 4, "
                          "openai-community/gpt2"),
    "pythia-160m": (162_322_944, "EleutherAI/pythia-160m checkpoint total; the model card's 'Non-Embedding "
                                 "Params 85,056,000' plus embed_in and embed_out, 2 x 50304 x 768"),
    "gemma-2b": (2_506_172_416, "keras-hub gemma_presets.py gemma_2b_en \"params\"; Nikolic et al. 2025 Table 4"),
    "gemma-2-2b": (2_614_341_888, "keras-hub gemma_presets.py gemma2_2b_en \"params\"; Nikolic et al. 2025 "
                                  "Table 4"),
    # issue 17 (sources in docs/catalog-sources.md and the catalog YAMLs)
    "llama-3.2-1b": (1_235_814_400, "HF safetensors total of meta-llama/Llama-3.2-1B-Instruct"),
    "qwen3-0.6b": (596_049_920, "keras-hub qwen3_presets.py qwen3_0.6b_en \"params\""),
    "qwen3-8b": (8_190_735_360, "keras-hub qwen3_presets.py qwen3_8b_en; HF safetensors total of Qwen/Qwen3-8B"),
    "qwen3-30b-a3b": (30_532_122_624, "keras-hub qwen3_moe_presets.py qwen3_moe_30b_a3b_en \"params\""),
    "qwen3-235b-a22b": (235_093_634_560, "keras-hub qwen3_moe_presets.py qwen3_moe_235b_a22b_en; HF safetensors total"),
    "gemma-3-4b-it": (4_300_079_472, "HF safetensors total of google/gemma-3-4b-it (text + vision); keras-hub "
                                     "gemma3_presets.py medgemma_4b"),
    "gemma-3-27b-it": (27_432_406_640, "HF total of google/gemma-3-27b-it (text + vision); keras-hub medgemma_instruct_27b"),
    "gpt-oss-20b": (20_914_757_184, "HF safetensors total of openai/gpt-oss-20b"),
    "gpt-oss-120b": (116_829_156_672, "HF safetensors total of openai/gpt-oss-120b"),
    "phi-4": (14_659_507_200, "HF safetensors total of microsoft/phi-4"),
    "llama-4-scout-17b-16e-instruct": (108_641_793_536, "HF safetensors total of meta-llama/Llama-4-Scout-17B-16E-Instruct "
                                                        "(text + vision)"),
    "llama-4-maverick-17b-128e-instruct": (401_583_781_376, "total of meta-llama/Llama-4-Maverick-17B-128E-Instruct "
                                                            "(text + vision; Fireworks AI billing docs)"),
}
# within a stated difference: the FP8 checkpoint's HF total has 3,416 elements more than its tensors' shapes give
NEAR = {"kimi-k2-instruct": (1_026_408_235_864, 3_416, "HF safetensors total of moonshotai/Kimi-K2-Instruct")}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_imported_count_plus_the_stated_gap_equals_the_published_count(name):
    """Exact for every fixture: the op list's parameters plus what the importer says it left out."""
    published, _source = PUBLISHED[name]
    assert param_count(load_model(fx(name))) + hf_import.param_gap(fx(name)) == published


def test_kimi_k2_is_within_the_stated_few_elements_of_its_fp8_checkpoint_total():
    published, residue, _source = NEAR["kimi-k2-instruct"]
    assert published - param_count(load_model(fx("kimi-k2-instruct"))) == residue


def test_only_multimodal_checkpoints_leave_parameters_out_and_say_exactly_how_many():
    gaps = {n: hf_import.param_gap(fx(n)) for n in PUBLISHED}
    # Gemma 3: the SigLIP tower (27 x 15,239,504 + 4096 x 1152 positions + patch conv + norm) and the projector
    assert gaps.pop("gemma-3-4b-it") == 678_528 + 4_718_592 + 27 * 15_239_504 + 2_304 + 1152 * 2560 + 1152
    assert gaps.pop("gemma-3-27b-it") == 678_528 + 4_718_592 + 27 * 15_239_504 + 2_304 + 1152 * 5376 + 1152
    # Llama 4: the same vision encoder for Scout and Maverick, 871,932,416
    assert gaps.pop("llama-4-scout-17b-16e-instruct") == gaps.pop("llama-4-maverick-17b-128e-instruct") == 871_932_416
    assert set(gaps.values()) == {0}  # every text-only import is exact: Gemma-2's four norms and Qwen2-MoE's gate too
    assert "419,816,304 parameters" in load_model(fx("gemma-3-4b-it")).description


def test_the_old_gaps_are_closed_by_the_schema():
    g2, qmoe = load_model(fx("gemma-2-2b")), load_model(fx("qwen1.5-moe-a2.7b-chat"))
    # Gemma-2: post_attention_layernorm and post_feedforward_layernorm, D weights each, in all 26 layers
    assert param_count(g2) - param_count(g2.replace(norms_per_layer=2)) == 2 * 26 * 2304 == 119_808
    # Qwen2-MoE: shared_expert_gate, a Linear(D, 1) without bias, in all 24 (MoE) layers
    assert qmoe.moe.shared_gate
    assert param_count(qmoe) - param_count(qmoe.replace(moe=dataclasses.replace(qmoe.moe, shared_gate=False))) == 24 * 2048


def test_gpt2_counts_its_position_table_and_its_tied_head_once():
    m = load_model(fx("gpt2"))
    assert (m.position, m.max_context, m.tied_embeddings, m.d_ff) == ("learned", 1024, True, 4 * 768)  # n_inner null
    # the published 124,439,808 includes the 1024 x 768 position table ...
    assert param_count(m) - param_count(m.replace(position="rope")) == 1024 * 768
    # ... and the LM head shares the token embedding: an untied head would add V x D
    assert param_count(m.replace(tied_embeddings=False)) - param_count(m) == 50257 * 768


def test_pythia_non_embedding_count_matches_the_model_card():
    m = load_model(fx("pythia-160m"))
    assert (m.mlp, m.norm, m.linear_bias, m.position, m.tied_embeddings) == ("plain", "layernorm", True, "rope", False)
    assert param_count(m) - 2 * 50304 * 768 == 85_056_000  # untied embed_in + embed_out


def test_deepseek_v3_main_model_matches_the_rounded_671b():
    # README_WEIGHTS.md of deepseek-ai/DeepSeek-V3: "Total parameters: 671B" for the main model (MTP excluded)
    n = param_count(load_model(fx("deepseek-v3")))
    assert abs(n - 671e9) <= 0.5e9
    assert "multi-token-prediction" in load_model(fx("deepseek-v3")).description


# fixture -> the catalog entry written by hand from the same config.json
SAME_AS_CATALOG = [("llama-3.1-8b", "llama-3.1-8b"), ("mistral-7b-v0.1", "mistral-7b"), ("qwen2.5-0.5b", "qwen2.5-0.5b"),
                   ("mixtral-8x7b-v0.1", "mixtral-8x7b"), ("deepseek-v2-lite", "deepseek-v2-lite"),
                   ("deepseek-v3", "deepseek-v3"), ("deepseek-v3", "deepseek-r1"),  # R1's config.json is V3's architecture
                   ("llama-3.2-1b", "llama-3.2-1b"), ("qwen3-0.6b", "qwen3-0.6b"), ("qwen3-8b", "qwen3-8b"),
                   ("qwen3-30b-a3b", "qwen3-30b-a3b"), ("qwen3-235b-a22b", "qwen3-235b-a22b"),
                   ("gemma-3-4b-it", "gemma-3-4b"), ("gemma-3-27b-it", "gemma-3-27b"), ("gpt-oss-20b", "gpt-oss-20b"),
                   ("gpt-oss-120b", "gpt-oss-120b"), ("phi-4", "phi-4"), ("llama-4-scout-17b-16e-instruct", "llama-4-scout"),
                   ("llama-4-maverick-17b-128e-instruct", "llama-4-maverick"), ("kimi-k2-instruct", "kimi-k2")]
SHAPE = ("vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads", "head_dim", "d_ff", "max_context", "mlp",
         "tied_embeddings", "qkv_bias", "o_bias", "linear_bias", "norm", "norms_per_layer", "qk_norm", "position",
         "nope_kinds", "sliding_window", "attention_chunk", "layer_pattern", "attention_sinks", "kv_share", "mla", "moe",
         "weight_formats")


@pytest.mark.parametrize("fixture, catalog", SAME_AS_CATALOG)
def test_import_agrees_with_the_hand_written_catalog_entry(fixture, catalog):
    imported, written = load_model(fx(fixture)), load_model(catalog)
    assert {f: getattr(imported, f) for f in SHAPE} == {f: getattr(written, f) for f in SHAPE}
    assert param_count(imported) == param_count(written)
    assert kv_growth_per_token(imported) == kv_growth_per_token(written)


def test_each_style_maps_to_the_schema():
    mistral, qwen = load_model(fx("mistral-7b-v0.1")), load_model(fx("qwen2.5-0.5b"))
    mixtral = load_model(fx("mixtral-8x7b-v0.1"))
    assert (mistral.sliding_window, mistral.layer_kinds()) == (4096, "L" * 32)  # every layer windowed
    assert (qwen.sliding_window, qwen.qkv_bias, qwen.tied_embeddings) == (None, True, True)  # use_sliding_window false
    assert (mixtral.sliding_window, mixtral.moe.n_experts, mixtral.moe.n_active) == (None, 8, 2)
    qmoe = load_model(fx("qwen1.5-moe-a2.7b-chat"))
    assert (qmoe.moe.n_experts, qmoe.moe.n_active, qmoe.moe.d_ff_expert, qmoe.moe.n_shared) == (60, 4, 1408, 4)
    v2, v3 = load_model(fx("deepseek-v2-lite")), load_model(fx("deepseek-v3"))
    assert (v2.mla.q_lora_rank, v2.moe.first_dense_layers, v2.moe.router_bias) == (None, 1, False)  # topk greedy
    assert (v3.mla.q_lora_rank, v3.moe.first_dense_layers, v3.moe.router_bias) == (1536, 3, True)  # noaux_tc
    g1, g2 = load_model(fx("gemma-2b")), load_model(fx("gemma-2-2b"))
    assert (g1.n_kv_heads, g1.head_dim, g1.tied_embeddings, g1.layer_pattern) == (1, 256, True, "G")
    assert (g2.sliding_window, g2.layer_pattern, g2.layer_kinds()[:4]) == (4096, "LG", "LGLG")  # layer 0 local
    assert g2.n_heads * g2.head_dim != g2.d_model  # 8 x 256 = 2048 != 2304: head_dim taken from the config


def _write(tmp_path, name, data) -> str:
    p = tmp_path / name
    p.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return str(p)


def _edit(name, **changes) -> dict:
    d = json.loads(Path(fx(name)).read_text())
    for k, v in changes.items():
        if v is ...:
            d.pop(k, None)
        else:
            d[k] = v
    return d


def test_newer_configs_listing_layer_types_give_the_same_pattern(tmp_path):
    kinds = ["sliding_attention", "full_attention"] * 13
    p = _write(tmp_path, "g2.json", _edit("gemma-2-2b", layer_types=kinds))
    assert load_model(p).layer_pattern == "LG"


def test_qwen2_windows_only_the_layers_from_max_window_layers_on(tmp_path):
    p = _write(tmp_path, "q.json", _edit("qwen2.5-0.5b", use_sliding_window=True, max_window_layers=21,
                                         sliding_window=4096))
    assert load_model(p).layer_kinds() == "G" * 21 + "L" * 3


def one_error_line(capsys, *argv) -> str:
    code = main(list(argv))
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("perfmodel: error:"), (code, out, err)
    return lines[0]


@pytest.mark.parametrize("base, changes, key, words", [
    ("llama-3.1-8b", {"architectures": ["MambaForCausalLM"], "model_type": "mamba"}, "architectures",
     "not an architecture perfmodel imports"),
    ("llama-3.1-8b", {"hidden_size": ...}, "hidden_size", "missing from config.json"),
    ("gpt2", {"n_embd": "wide"}, "n_embd", "integer"),
    ("llama-3.1-8b", {"tie_word_embeddings": "no"}, "tie_word_embeddings", "true or false"),
    ("llama-3.1-8b", {"num_key_value_heads": 5}, "num_key_value_heads", "not divisible"),
    ("qwen1.5-moe-a2.7b-chat", {"shared_expert_intermediate_size": 5000}, "shared_expert_intermediate_size",
     "not a multiple"),
    ("deepseek-v2-lite", {"first_k_dense_replace": 27}, "first_k_dense_replace", "no MoE layer"),
    ("gemma-3-4b-it", {"text_config": {"hidden_size": 2560}}, "text_config.num_hidden_layers", "missing"),
    ("gemma-3-4b-it", {"vision_config": {"hidden_size": 1152}}, "vision_config.intermediate_size", "missing"),
    ("llama-4-scout-17b-16e-instruct", {"text_config": "x"}, "text_config", "mapping"),
    ("gpt-oss-20b", {"layer_types": ["sliding_attention"] * 24, "sliding_window": ...}, "sliding_window", "missing"),
    ("qwen3-8b", {"layer_types": ["chunked_attention"] * 36}, "layer_types", "cannot express"),
    ("qwen2.5-0.5b", {"use_sliding_window": True, "max_window_layers": ...}, "max_window_layers", "missing"),
    ("gemma-2-2b", {"layer_types": ["linear_attention"] * 26}, "layer_types", "cannot express"),
    ("gemma-2-2b", {"sliding_window": ...}, "sliding_window", "missing"),
    ("llama-3.1-8b", {"mlp_bias": True}, "mlp_bias", "cannot express"),
    ("gpt2", {"architectures": "GPT2LMHeadModel"}, "architectures", "list"),
])
def test_bad_or_unsupported_configs_get_one_line_naming_the_key(capsys, tmp_path, base, changes, key, words):
    p = _write(tmp_path, "config.json", _edit(base, **changes))
    for argv in (["decode", "-m", p], ["import-config", p]):
        line = one_error_line(capsys, *argv)
        assert p in line and key in line and words in line, line


def test_unknown_architecture_message_lists_what_to_add_by_hand(capsys, tmp_path):
    p = _write(tmp_path, "config.json", {"architectures": ["RwkvForCausalLM"], "hidden_size": 2048})
    line = one_error_line(capsys, "import-config", p)
    assert "LlamaForCausalLM" in line and "write a model YAML by hand" in line and "n_kv_heads" in line
    for arch in ("Llama4ForCausalLM", "Llama4ForConditionalGeneration", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM",
                 "Gemma3ForCausalLM", "Gemma3ForConditionalGeneration", "GptOssForCausalLM", "Phi3ForCausalLM",
                 "DeepseekV3ForCausalLM"):
        assert arch in line, arch


def test_moe_layer_spacing_imports_as_a_pattern_of_moe_and_dense_layers(tmp_path):
    q = load_model(_write(tmp_path, "a.json", _edit("qwen1.5-moe-a2.7b-chat", decoder_sparse_step=2)))
    assert [q.moe.is_moe(i) for i in range(4)] == [False, True, False, True]  # (i + 1) % 2 == 0
    q = load_model(_write(tmp_path, "b.json", _edit("qwen1.5-moe-a2.7b-chat", mlp_only_layers=[3, 7])))
    assert [i for i in range(24) if not q.moe.is_moe(i)] == [3, 7]
    q = load_model(_write(tmp_path, "c.json", _edit("qwen1.5-moe-a2.7b-chat", mlp_only_layers=[0, 1])))
    assert (q.moe.first_dense_layers, q.moe.layer_pattern) == (2, "M")
    d = load_model(_write(tmp_path, "d.json", _edit("deepseek-v2-lite", moe_layer_freq=2)))
    assert [d.moe.is_moe(i) for i in range(5)] == [False, False, True, False, True]  # i >= 1 and i % 2 == 0


def test_each_new_architecture_maps_to_the_schema():
    q3 = load_model(fx("qwen3-8b"))
    assert (q3.qk_norm, q3.qkv_bias, q3.o_bias, q3.sliding_window) == ("rmsnorm", False, False, None)
    g3 = load_model(fx("gemma-3-4b-it"))  # the sparse text_config takes Gemma3TextConfig's defaults
    assert (g3.vocab_size, g3.n_heads, g3.n_kv_heads, g3.head_dim, g3.tied_embeddings) == (262208, 8, 4, 256, True)
    assert (g3.norms_per_layer, g3.qk_norm, g3.sliding_window, g3.layer_pattern) == (4, "rmsnorm", 1024, "LLLLLG")
    oss = load_model(fx("gpt-oss-120b"))
    assert (oss.attention_sinks, oss.qkv_bias, oss.o_bias, oss.sliding_window, oss.layer_pattern) == (True, True, True,
                                                                                                       128, "LG")
    assert (oss.moe.router_bias, oss.moe.expert_bias, oss.weight_format("experts")) == (True, True, "mxfp4")
    sc, mv = load_model(fx("llama-4-scout-17b-16e-instruct")), load_model(fx("llama-4-maverick-17b-128e-instruct"))
    assert (sc.layer_pattern, sc.nope_kinds, sc.attention_chunk, sc.qk_norm) == ("CCCG", "G", 8192, "l2")
    assert (sc.moe.layer_pattern, sc.moe.n_shared, sc.moe.d_ff_expert, sc.d_ff) == ("M", 1, 8192, 16384)
    assert (mv.moe.layer_pattern, mv.qk_norm, mv.max_context) == ("DM", None, 1048576)
    phi = load_model(fx("phi-4"))
    assert (phi.sliding_window, phi.n_kv_heads, phi.tied_embeddings) == (None, 10, False)
    k2 = load_model(fx("kimi-k2-instruct"))
    assert (k2.n_heads, k2.moe.n_experts, k2.moe.first_dense_layers, k2.moe.router_bias) == (64, 384, 1, True)


def test_a_phi3_sliding_window_applies_to_every_layer(tmp_path):
    m = load_model(_write(tmp_path, "p.json", _edit("phi-4", sliding_window=2047)))
    assert (m.sliding_window, m.layer_kinds()) == (2047, "L" * 40)


def test_gemma3_older_configs_with_sliding_window_pattern_and_newer_ones_with_layer_types_agree(tmp_path):
    d = _edit("gemma-3-27b-it")
    d["text_config"]["layer_types"] = ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(62)]
    assert load_model(_write(tmp_path, "g.json", d)).layer_pattern == load_model(fx("gemma-3-27b-it")).layer_pattern


def test_a_dense_llama4_text_config_imports_without_experts(tmp_path):
    d = _edit("llama-4-scout-17b-16e-instruct")
    d["text_config"].update(moe_layers=[], interleave_moe_layer_step=0)
    m = load_model(_write(tmp_path, "l.json", d))
    assert m.moe is None and m.d_ff == 16384


@pytest.mark.parametrize("text, words", [
    ("{\"hidden_size\": 4096,", "not valid JSON"),
    ("{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": NaN}", "not valid JSON"),
    ("[1, 2, 3]", "expected a JSON object"),
    ("[" * 100_000, "not valid JSON"),
])
def test_files_that_are_not_a_config_object_are_refused(capsys, tmp_path, text, words):
    assert words in one_error_line(capsys, "import-config", _write(tmp_path, "config.json", text))


def test_a_missing_file_is_named(capsys, tmp_path):
    assert "no such file" in one_error_line(capsys, "decode", "-m", str(tmp_path / "nope" / "config.json"))


def test_import_config_prints_yaml_that_loads_back_to_the_same_model(capsys, tmp_path):
    assert main(["import-config", fx("deepseek-v3"), "--name", "dsv3"]) == 0
    text = capsys.readouterr().out
    p = tmp_path / "dsv3.yaml"
    p.write_text(text)
    back, direct = load_model(str(p)), load_model(fx("deepseek-v3"))
    assert back.name == "dsv3" and yaml.safe_load(text)["moe"]["router_bias"] is True
    assert {f: getattr(back, f) for f in SHAPE} == {f: getattr(direct, f) for f in SHAPE}
    assert back.published_params is None and "imported from" in back.source


def test_import_config_writes_a_file_and_does_not_overwrite_it_silently(capsys, tmp_path):
    out = str(tmp_path / "g.yaml")
    assert main(["import-config", fx("gemma-2b"), "-o", out]) == 0
    assert "2,506,172,416 parameters" in capsys.readouterr().out
    assert load_model(out).name == "gemma-2b"
    assert "--force" in one_error_line(capsys, "import-config", fx("gpt2"), "-o", out)
    assert main(["import-config", fx("gpt2"), "-o", out, "--force"]) == 0 and load_model(out).name == "gpt2"
    assert ".yaml" in one_error_line(capsys, "import-config", fx("gpt2"), "-o", str(tmp_path / "g.txt"))


def test_any_command_takes_a_config_json_where_it_takes_a_model_name(capsys):
    assert main(["decode", "-m", f"{fx('gpt2')},llama-2-7b", "--batch", "1", "--format", "json"]) == 0
    assert [r["model"] for r in json.loads(capsys.readouterr().out)] == ["gpt2", "llama-2-7b"]
    assert main(["show", fx("pythia-160m"), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["params"] == 162_322_944
    assert main(["kv", "-m", fx("gemma-2-2b"), "--context", "8192", "--format", "json"]) == 0
    (r,) = json.loads(capsys.readouterr().out)
    # 13 global layers keep 8192 tokens, 13 local layers 4096: 2 (K,V) x 4 heads x 256 x 2 bytes per token-layer
    assert r["kv_cache_bytes"] == 2 * 4 * 256 * 2 * (13 * 8192 + 13 * 4096)


def test_show_takes_a_bare_config_json_in_the_current_folder(capsys, tmp_path, monkeypatch):
    (tmp_path / "config.json").write_text(Path(fx("gpt2")).read_text())
    monkeypatch.chdir(tmp_path)
    assert main(["decode", "-m", "config.json", "--batch", "1", "--format", "json"]) == 0  # works already
    capsys.readouterr()
    assert main(["show", "config.json", "--format", "json"]) == 0


# ---------------------------------------------------------------- laws over generated Llama-style configs
@st.composite
def llama_configs(draw):
    K = draw(st.sampled_from([1, 2, 4, 8]))
    N = K * draw(st.integers(1, 8))
    H = draw(st.sampled_from([32, 64, 128]))
    cfg = {"architectures": [draw(st.sampled_from(["LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM"]))],
           "hidden_size": N * H, "num_attention_heads": N, "num_key_value_heads": K,
           "num_hidden_layers": draw(st.integers(1, 8)), "intermediate_size": draw(st.integers(1, 4096)),
           "vocab_size": draw(st.integers(1, 50000)), "max_position_embeddings": draw(st.integers(1, 1 << 17)),
           "tie_word_embeddings": draw(st.booleans())}
    if draw(st.booleans()):
        cfg["sliding_window"] = draw(st.integers(1, 8192))
    return cfg


IRRELEVANT = {"torch_dtype": "bfloat16", "rope_theta": 1e6, "rms_norm_eps": 1e-5, "transformers_version": "4.44.0",
              "rope_scaling": {"rope_type": "llama3", "factor": 8.0}, "bos_token_id": 1, "use_cache": True}


@given(cfg=llama_configs(), extra=st.dictionaries(st.sampled_from(sorted(IRRELEVANT)), st.just(0)))
def test_keys_that_do_not_shape_the_model_do_not_change_the_import(tmp_path_factory, cfg, extra):
    d = tmp_path_factory.mktemp("cfg")
    plain = _write(d, "a.json", cfg)
    noisy = _write(d, "b.json", {**cfg, **{k: IRRELEVANT[k] for k in extra}})
    a, b = hf_import.config_to_spec(plain), hf_import.config_to_spec(noisy)
    a.update(name="b", source=b["source"])  # the file name and path differ, nothing else
    assert a == b


@given(cfg=llama_configs())
def test_the_written_yaml_is_the_same_model_as_the_config(tmp_path_factory, cfg):
    d = tmp_path_factory.mktemp("cfg")
    src = _write(d, "config.json", cfg)
    (d / "m.yaml").write_text(hf_import.to_yaml(hf_import.config_to_spec(src)))
    a, b = load_model(src), load_model(str(d / "m.yaml"))
    assert {f: getattr(a, f) for f in SHAPE} == {f: getattr(b, f) for f in SHAPE}
    assert param_count(a) == param_count(b)



def _edited(tmp_path, fixture: str, edit) -> str:
    cfg = json.loads((HF / fixture).read_text())
    edit(cfg.get("text_config", cfg) if fixture.startswith("llama-4") or fixture.startswith("gemma-3") else cfg)
    p = tmp_path / fixture
    p.write_text(json.dumps(cfg))
    return str(p)


@pytest.mark.parametrize("fixture,edit,field", [
    ("deepseek-v3.json", lambda c: c.pop("n_routed_experts"), "n_routed_experts"),
    ("deepseek-v3.json", lambda c: c.pop("kv_lora_rank"), "kv_lora_rank"),
    ("deepseek-v2-lite.json", lambda c: c.pop("kv_lora_rank"), "kv_lora_rank"),
    ("llama-4-scout-17b-16e-instruct.json", lambda c: c.update(num_experts_per_tok=0), "num_experts_per_tok"),
])
def test_a_config_that_names_an_architecture_must_carry_its_defining_fields(fixture, edit, field, tmp_path, capsys):
    """A DeepSeek-V3 without routed experts would import as a dense model, one without kv_lora_rank as MHA, and a
    Llama 4 routing to 0 experts as a dense 17 B model: each is refused in one line naming the field (issue 26)."""
    assert main(["import-config", _edited(tmp_path, fixture, edit)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and field in err[0], err


@pytest.mark.parametrize("fixture", ["qwen3-30b-a3b.json", "gemma-3-4b-it.json", "deepseek-v3.json", "qwen3-8b.json",
                                     "llama-4-scout-17b-16e-instruct.json", "gpt-oss-20b.json"])
def test_a_billion_layers_are_refused_before_any_per_layer_list_is_built(fixture, tmp_path, capsys):
    assert main(["import-config", _edited(tmp_path, fixture, lambda c: c.update(num_hidden_layers=10**9))]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "num_hidden_layers" in err[0] and "1,000,000,000 layers" in err[0], err


def test_an_mxfp4_checkpoint_pins_its_attention_to_bf16_only_where_it_leaves_self_attn_unconverted(tmp_path):
    """gpt-oss's quantization_config: quant_method mxfp4, modules_to_not_convert self_attn (and the router,
    embeddings, head, 16-bit anyway): the import pins experts mxfp4 and attention bf16. A checkpoint that converts
    its attention too (no self_attn in the list) pins the experts alone."""
    cfg = json.loads(Path(fx("gpt-oss-20b")).read_text())
    spec, _ = hf_import.convert(fx("gpt-oss-20b"))
    assert spec["weight_formats"] == {"experts": "mxfp4", "attention": "bf16"}
    q = cfg["quantization_config"]
    q["modules_to_not_convert"] = [x for x in q["modules_to_not_convert"] if "self_attn" not in x]
    assert q["modules_to_not_convert"] and len(q["modules_to_not_convert"]) == 3
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    spec, _ = hf_import.convert(str(tmp_path / "config.json"))
    assert spec["weight_formats"] == {"experts": "mxfp4"}


@pytest.mark.parametrize("bad", [3, "model.layers.0.self_attn", {"self_attn": True}])
def test_an_mxfp4_config_whose_unconverted_modules_are_not_a_list_is_one_error_line(tmp_path, capsys, bad):
    """Found by the fuzz test under load seed 20: a number in modules_to_not_convert was iterated (a traceback)."""
    cfg = json.loads(Path(fx("gpt-oss-20b")).read_text())
    cfg["quantization_config"]["modules_to_not_convert"] = bad
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert main(["decode", "-m", str(tmp_path / "config.json"), "--batch", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "quantization_config.modules_to_not_convert" in err[0] and "list of module names" in err[0]
