"""The 2026 models (MiniMax-M2.5, Kimi K2.5, Qwen3.5-397B-A17B, GLM-5) and the op-list features they brought:
Gated DeltaNet linear layers, DeepSeek Sparse Attention, the attention output gate and the full-width q/k RMSNorm.
Each formula is checked against its derivation (docs/derivations.md, 'Architecture features (2026 models)')."""
import numpy as np
import pytest

import perfmodel as pm
from perfmodel import engine
from perfmodel.errors import SpecError
from perfmodel.ops import Layout, active_param_count, build_ops, causal_pairs, param_count

BF16 = 2


def ops_of(m, B=1, S=1024, phase="decode", layout=None):
    return build_ops(m, B, 1 if phase == "decode" else S, S, phase, layout=layout)


def total(ops, field, name=None):
    return sum(float(np.sum(getattr(o, field))) * o.count for o in ops if name is None or o.name == name)


def kv_bytes(m, S):
    return float(engine.per_sequence(m, np.array([float(S)]))["kv_bytes_per_seq"][0])


QWEN = pm.load_model("qwen3.5-397b-a17b")
GLM = pm.load_model("glm-5")


# ---------------------------------------------------------------- Gated DeltaNet (Qwen3.5)
def test_gated_deltanet_layer_parameters_are_the_transformers_module_shapes():
    g, D = QWEN.gated_deltanet, QWEN.D
    kd, vd = g.n_k_heads * g.k_head_dim, g.n_v_heads * g.v_head_dim
    conv = 2 * kd + vd
    # in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, conv1d (no bias), dt_bias, A_log, norm (v_head_dim), out_proj
    layer = D * conv + D * vd + 2 * D * g.n_v_heads + conv * g.conv_kernel + 2 * g.n_v_heads + g.v_head_dim + vd * D
    assert layer == 118_014_208
    ops = ops_of(QWEN)
    lin = sum(o.params * o.count for o in ops if o.group.startswith("linear") and o.name.startswith(("gdn", "o_proj")))
    assert lin == 45 * layer


def test_a_gated_deltanet_layer_keeps_a_state_that_does_not_grow_with_context():
    g = QWEN.gated_deltanet
    state = 45 * (g.n_v_heads * g.k_head_dim * g.v_head_dim * 4  # fp32 recurrent state (mamba_ssm_dtype)
                  + (2 * g.n_k_heads * g.k_head_dim + g.n_v_heads * g.v_head_dim) * (g.conv_kernel - 1) * BF16)
    fixed = float(engine.per_sequence(QWEN, np.array([1.0]))["fixed_state_bytes_per_seq"][0])
    assert fixed == state
    # only the 15 full-attention layers' K, V grow with the context
    assert engine.kv_growth_per_token(QWEN) == 15 * 2 * QWEN.K * QWEN.H * BF16
    linear_only = QWEN.replace(layer_pattern="R")
    assert kv_bytes(linear_only, 1024) == kv_bytes(linear_only, 65536) == state * 60 / 45
    # over two pipeline stages a device keeps its stage's share of it: the largest stage's ceil(60 / 2) / 60 of the
    # layers (ops.build_ops' share), as for the weights
    staged = float(engine.per_sequence(QWEN, np.array([1.0]), layout=Layout(pp=2))["fixed_state_bytes_per_seq"][0])
    assert staged == pytest.approx(state * 30 / 60, rel=1e-12)


def test_gated_delta_rule_costs_seven_flop_per_state_element_per_token_whatever_the_context():
    g, B = QWEN.gated_deltanet, 3
    state = g.n_v_heads * g.k_head_dim * g.v_head_dim
    for S in (128, 100_000):
        ops = ops_of(QWEN, B, S)
        assert total(ops, "flops", "gdn_core") == 45 * (7 * B * state + 3 * B * 2 * g.n_k_heads * g.k_head_dim)
        assert total(ops, "kv_read", "gdn_core") == total(ops, "kv_write", "gdn_core") == 45 * B * state * 4
    T = 512  # prefill: the same per token
    ops = ops_of(QWEN, 1, T, "prefill")
    assert total(ops, "flops", "gdn_core") == 45 * (7 * T * state + 3 * T * 2 * g.n_k_heads * g.k_head_dim)


def test_the_state_format_follows_the_kv_format_when_none_is_pinned():
    g = QWEN.gated_deltanet
    m = pm.load_model("qwen3.5-397b-a17b", {"gated_deltanet.state_format": None})
    assert m.gated_deltanet.state_format is None
    fp32 = float(engine.per_sequence(QWEN, np.array([1.0]))["fixed_state_bytes_per_seq"][0])
    bf16 = float(engine.per_sequence(m, np.array([1.0]))["fixed_state_bytes_per_seq"][0])
    assert fp32 - bf16 == 45 * g.n_v_heads * g.k_head_dim * g.v_head_dim * (4 - 2)


def test_gated_deltanet_heads_split_over_tp():
    one, two = ops_of(QWEN), ops_of(QWEN, layout=Layout(tp=2))
    assert total(two, "flops", "gdn_core") == total(one, "flops", "gdn_core") / 2
    with pytest.raises(SpecError):
        ops_of(QWEN, layout=Layout(tp=32))  # 16 key heads


# ---------------------------------------------------------------- attention output gate (Qwen3.5)
def test_the_attention_output_gate_adds_a_gate_projection_of_n_heads_x_head_dim():
    off = QWEN.replace(attn_output_gate=False)
    D, N, H = QWEN.D, QWEN.N, QWEN.H
    assert param_count(QWEN) - param_count(off) == 15 * D * N * H
    B = 4
    a, b = ops_of(QWEN, B), ops_of(off, B)
    assert total(a, "flops", "qkv_proj") - total(b, "flops", "qkv_proj") == 15 * 2 * B * D * N * H
    assert total(a, "flops", "attn_gate") == 15 * 5 * B * N * H
    assert kv_bytes(QWEN, 4096) == kv_bytes(off, 4096)


# ---------------------------------------------------------------- full-width q/k RMSNorm (MiniMax-M2.5)
def test_minimax_qk_norm_has_one_weight_per_q_and_k_channel():
    m = pm.load_model("minimax-m2.5")
    per_head = m.replace(qk_norm="rmsnorm")
    assert param_count(m) - param_count(m.replace(qk_norm=None)) == m.L * (m.N + m.K) * m.H
    assert param_count(m) - param_count(per_head) == m.L * ((m.N + m.K) * m.H - 2 * m.H)
    assert total(ops_of(m, 2), "flops", "qk_norm") == total(ops_of(per_head, 2), "flops", "qk_norm")


def test_a_full_width_qk_norm_under_tensor_parallelism_all_reduces_two_fp32_sums_a_token_per_layer():
    """derivations "Full-width q/k RMSNorm": tp splits the heads, the norm spans all of them, so each device's sums
    of squares of q and of k (2 fp32 a token, M tokens) are all-reduced once per layer; a ring moves 2(p-1)/p of
    that message in 2(p-1) steps. At tp = 1, and for a per-head norm (each head whole on one device), none."""
    m = pm.load_model("minimax-m2.5")
    for B, p in ((3, 2), (8, 4)):
        ar = [o for o in ops_of(m, B, layout=Layout(tp=p)) if o.name == "allreduce_qk_norm"]
        assert len(ar) == 1 and ar[0].count == m.L and ar[0].coll == "allreduce" and ar[0].peers == p
        assert ar[0].msg == B * 2 * 4 and ar[0].comm_bytes == pytest.approx(2 * (p - 1) / p * B * 2 * 4)
        assert ar[0].comm_steps == 2 * (p - 1) and ar[0].link == "tp"
    prompt = [o for o in ops_of(m, 2, S=100, phase="prefill", layout=Layout(tp=2)) if o.name == "allreduce_qk_norm"]
    assert prompt[0].msg == 2 * 100 * 2 * 4  # M = B x T tokens
    assert not [o for o in ops_of(m, 3) if o.name == "allreduce_qk_norm"]
    assert not [o for o in ops_of(m.replace(qk_norm="rmsnorm"), 3, layout=Layout(tp=2)) if o.name == "allreduce_qk_norm"]


# ---------------------------------------------------------------- DeepSeek Sparse Attention (GLM-5)
def test_dsa_indexer_parameters_are_the_transformers_module_shapes():
    d, a, D = GLM.dsa, GLM.mla, GLM.D
    layer = a.q_lora_rank * d.n_heads * d.head_dim + D * d.head_dim + 2 * d.head_dim + D * d.n_heads
    assert layer == 9_371_904
    assert param_count(GLM) - param_count(GLM.replace(dsa=None)) == GLM.L * layer


def test_dsa_attention_reads_min_s_topk_keys_per_query_in_decode():
    k, B = GLM.dsa.topk, 2
    r, dr = GLM.mla.kv_lora_rank, GLM.mla.rope_dim
    for S in (1000, 2048, 50_000, 200_000):
        ops = ops_of(GLM, B, S)
        assert total(ops, "kv_read", "attn_qk") == GLM.L * B * min(S, k) * (r + dr) * BF16
        assert total(ops, "flops", "attn_qk") == GLM.L * 2 * B * min(S, k) * GLM.N * (r + dr)
    dense = GLM.replace(dsa=None)
    assert total(ops_of(GLM, 1, 1500), "flops", "attn_qk") == total(ops_of(dense, 1, 1500), "flops", "attn_qk")


def test_dsa_prefill_attends_to_sum_of_min_position_topk_pairs():
    S, k = 6000, GLM.dsa.topk
    ops = ops_of(GLM, 1, S, "prefill")
    pairs = sum(min(p, k) for p in range(1, S + 1))
    assert causal_pairs(S, S, k) == pairs
    a = GLM.mla
    assert total(ops, "flops", "attn_qk") == GLM.L * 2 * pairs * GLM.N * (a.nope_dim + a.rope_dim)


def test_the_dsa_indexer_scores_every_key_cheaply():
    d, B = GLM.dsa, 3
    for S in (1000, 100_000):
        ops = ops_of(GLM, B, S)
        assert total(ops, "flops", "indexer_score") == GLM.L * B * S * d.n_heads * (2 * d.head_dim + 3)
        assert total(ops, "kv_read", "indexer_score") == GLM.L * B * S * d.head_dim * BF16
    # at long context the indexer reads fewer bytes than attending to every latent would
    S = 100_000
    a = GLM.mla
    assert d.head_dim < a.kv_lora_rank + a.rope_dim


def test_dsa_caches_the_indexer_key_with_the_latent_for_every_token():
    a, d = GLM.mla, GLM.dsa
    assert engine.kv_growth_per_token(GLM) == GLM.L * (a.kv_lora_rank + a.rope_dim + d.head_dim) * BF16
    assert kv_bytes(GLM, 100_000) == 100_000 * engine.kv_growth_per_token(GLM)  # nothing is evicted


# ---------------------------------------------------------------- the catalog entries
def test_kimi_k25_language_model_is_kimi_k2s():
    k2, k25 = pm.load_model("kimi-k2"), pm.load_model("kimi-k2.5")
    assert param_count(k25) == param_count(k2) == 1_026_408_232_448
    assert k25.weight_format("experts") == "int4-g32"
    assert active_param_count(k25, True) == 32_861_500_928  # NVIDIA's '32.86B active'


@pytest.mark.parametrize("name,text,excluded,published", [
    ("minimax-m2.5", 228_689_764_864, 13_880_064, 228_703_644_928),
    ("qwen3.5-397b-a17b", 396_346_350_336, 456_010_480 + 6_595_568_128, 403_397_928_944),
    ("glm-5", 743_911_218_432, 9_952_920_576, 753_864_139_008),
])
def test_exact_parameter_counts_against_the_checkpoint_totals(name, text, excluded, published):
    m = pm.load_model(name)
    assert param_count(m) == text
    assert m.published_excluded == excluded and text + excluded == published == m.published_params


# ---------------------------------------------------------------- bad input: one line, SpecError
@pytest.mark.parametrize("change,field", [
    ({"layer_pattern": "G"}, "gated_deltanet"),
    ({"gated_deltanet.n_v_heads": 24}, "gated_deltanet.n_v_heads"),
    ({"gated_deltanet.state_format": "fp7"}, "gated_deltanet.state_format"),
    ({"linear_state": 10}, "linear_state"),
])
def test_bad_gated_deltanet_specs_are_refused(change, field):
    with pytest.raises(SpecError) as e:
        pm.load_model("qwen3.5-397b-a17b", change)
    assert e.value.field == field


@pytest.mark.parametrize("change,field", [
    ({"mla": None}, "dsa"),
    ({"dsa.topk": 0}, "dsa.topk"),
    ({"dsa.head_dim": 32}, "dsa.head_dim"),
])
def test_bad_dsa_specs_are_refused(change, field):
    with pytest.raises(SpecError) as e:
        pm.load_model("glm-5", change)
    assert e.value.field == field


# ---------------------------------------------------------------- import-config of the shipped config.json files
_GLM5 = {"architectures": ["GlmMoeDsaForCausalLM"], "model_type": "glm_moe_dsa", "attention_bias": False,
         "first_k_dense_replace": 3, "hidden_size": 6144, "index_head_dim": 128, "index_n_heads": 32, "index_topk": 2048,
         "intermediate_size": 12288, "kv_lora_rank": 512, "max_position_embeddings": 202752,
         "moe_intermediate_size": 2048, "moe_layer_freq": 1, "n_routed_experts": 256, "n_shared_experts": 1,
         "num_attention_heads": 64, "num_experts_per_tok": 8, "num_hidden_layers": 78, "num_key_value_heads": 64,
         "num_nextn_predict_layers": 1, "q_lora_rank": 2048, "qk_nope_head_dim": 192, "qk_rope_head_dim": 64,
         "tie_word_embeddings": False, "topk_method": "noaux_tc", "v_head_dim": 256, "vocab_size": 154880}
_MINIMAX = {"architectures": ["MiniMaxM2ForCausalLM"], "model_type": "minimax_m2", "attn_type_list": [1] * 62,
            "head_dim": 128, "hidden_size": 3072, "intermediate_size": 1536, "max_position_embeddings": 196608,
            "num_attention_heads": 48, "num_experts_per_tok": 8, "num_hidden_layers": 62, "num_key_value_heads": 8,
            "num_local_experts": 256, "qk_norm_type": "per_layer", "rotary_dim": 64, "shared_intermediate_size": 0,
            "tie_word_embeddings": False, "use_mtp": True, "use_qk_norm": True, "use_routing_bias": True,
            "vocab_size": 200064}
_KIMI_TEXT = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "kimi_k2", "attention_bias": False,
              "first_k_dense_replace": 1, "hidden_size": 7168, "intermediate_size": 18432, "kv_lora_rank": 512,
              "max_position_embeddings": 262144, "moe_intermediate_size": 2048, "moe_layer_freq": 1,
              "n_routed_experts": 384, "n_shared_experts": 1, "num_attention_heads": 64, "num_experts_per_tok": 8,
              "num_hidden_layers": 61, "num_key_value_heads": 64, "num_nextn_predict_layers": 0, "q_lora_rank": 1536,
              "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "tie_word_embeddings": False, "topk_method": "noaux_tc",
              "v_head_dim": 128, "vocab_size": 163840}
_KIMI = {"architectures": ["KimiK25ForConditionalGeneration"], "model_type": "kimi_k25", "text_config": _KIMI_TEXT,
         "vision_config": {"vt_hidden_size": 1152, "vt_num_hidden_layers": 27}}


@pytest.mark.parametrize("config,name", [(_GLM5, "glm-5"), (_MINIMAX, "minimax-m2.5"), (_KIMI, "kimi-k2.5")])
def test_import_config_gives_the_catalog_model(tmp_path, config, name):
    import json

    p = tmp_path / "config.json"
    p.write_text(json.dumps(config))
    got, want = pm.load_model(str(p)), pm.load_model(name)
    assert param_count(got) == param_count(want)
    assert engine.kv_growth_per_token(got) == engine.kv_growth_per_token(want)
    for f in ("mla", "dsa", "qk_norm", "max_context", "moe"):
        assert getattr(got, f) == getattr(want, f), f
    assert "Not modelled" in got.description  # the vision tower, the MTP module or the partial rotary is named


def test_import_refuses_a_minimax_layer_that_is_not_full_attention(tmp_path):
    import json

    p = tmp_path / "config.json"
    p.write_text(json.dumps({**_MINIMAX, "attn_type_list": [0] + [1] * 61}))
    with pytest.raises(SpecError) as e:
        pm.load_model(str(p))
    assert e.value.field == "attn_type_list"
