"""What each attention variant does to the KV cache (BRIEF, "KV cache")."""
import numpy as np
import pytest

import perfmodel as pm
from perfmodel import engine
from perfmodel.ops import Precision, param_count

from helpers import phase_ops, total

base = pm.load_model("llama-2-13b")
per_seq = lambda m, S: np.asarray(engine.per_sequence(m, np.asarray(S, float))["kv_bytes_per_seq"])  # noqa: E731


def test_gqa_and_mqa_divide_the_cache_by_N_over_K():
    assert per_seq(pm.load_model("llama-2-13b-gqa8"), 1024) * 5 == per_seq(base, 1024)
    assert per_seq(pm.load_model("llama-2-13b-mqa"), 1024) * 40 == per_seq(base, 1024)


def test_mla_stores_a_latent_of_rank_512_plus_a_64_dim_rope_key_per_layer():
    m = pm.load_model("llama-2-13b-mla")
    assert engine.kv_growth_per_token(m) == (512 + 64) * 40 * 2  # (r + d_r) * L * bytes


def test_deepseek_v3_kv_is_70272_bytes_per_token_in_bf16():
    # (512 + 64) * 61 layers * 2 bytes: the DeepSeek-V3 figure that MLA is known for
    assert engine.kv_growth_per_token(pm.load_model("deepseek-v3")) == 576 * 61 * 2


def test_cla2_halves_the_cache_and_drops_half_the_kv_projections():
    m = pm.load_model("llama-2-13b-cla2")
    assert per_seq(m, 1024) * 2 == per_seq(base, 1024)
    assert param_count(base) - param_count(m) == 20 * 2 * 5120 * 5120  # 20 layers without W_K, W_V


def test_sliding_window_caps_the_cache_at_the_window():
    m = pm.load_model("llama-2-13b-swa")
    W = m.sliding_window
    assert per_seq(m, W) == per_seq(base, W)
    assert per_seq(m, 8 * W) == per_seq(base, W)


def test_hybrid_keeps_full_cache_only_in_its_global_layers():
    m = pm.load_model("llama-2-13b-hybrid")
    S, W, L = 32768, m.sliding_window, m.L
    per_layer_token = 2 * m.K * m.H * 2
    assert per_seq(m, S) == per_layer_token * (L // 4 * S + (L - L // 4) * W)


def test_linear_attention_state_does_not_grow_with_context():
    m = pm.load_model("llama-2-13b-linear")
    assert per_seq(m, 128) == per_seq(m, 131072) > 0
    assert engine.kv_growth_per_token(m) == 0


def test_decode_attention_reads_only_the_window_under_swa():
    m = pm.load_model("llama-2-13b-swa")
    near = total(phase_ops(m, 1, 8192), {"attn_qk"}, "kv_read")
    far = total(phase_ops(m, 1, 65536), {"attn_qk"}, "kv_read")
    assert near == far


def test_moe_reads_only_the_experts_tokens_route_to():
    m = pm.load_model("mixtral-8x7b")
    one = total(phase_ops(m, 1, 1024), {"expert_up_gate", "expert_down"}, "w_read")
    many = total(phase_ops(m, 4096, 1024), {"expert_up_gate", "expert_down"}, "w_read")
    stored = total(phase_ops(m, 1, 1024), {"expert_up_gate", "expert_down"}, "w_stored")
    assert one == pytest.approx(stored * 2 / 8)  # top-2 of 8 experts for a single token
    assert many == pytest.approx(stored, rel=1e-9)  # a big batch touches them all


def test_moe_flops_count_active_experts_only():
    m = pm.load_model("mixtral-8x7b")
    f = total(phase_ops(m, 1, 1024), {"expert_up_gate", "expert_down"})
    assert f == 2 * 3 * m.D * m.moe.d_ff_expert * m.moe.n_active * m.L


def test_gated_mlp_has_three_matrices_and_plain_two():
    assert param_count(base) - param_count(base.replace(d_ff=0 + base.F + 1)) == -3 * base.D * base.L
    plain = base.replace(mlp="plain")
    assert param_count(plain) - param_count(plain.replace(d_ff=base.F + 1)) == -2 * base.D * base.L


def test_separate_input_and_output_embeddings_are_both_counted():
    assert param_count(base) - param_count(base.replace(tied_embeddings=True)) == base.V * base.D


def test_kv_dtype_fp8_halves_the_cache():
    bf = engine.per_sequence(base, 1024.0)["kv_bytes_per_seq"]
    f8 = engine.per_sequence(base, 1024.0, Precision(kv="fp8"))["kv_bytes_per_seq"]
    assert f8 * 2 == bf


def test_int4_weights_cost_4_125_bits_with_16_bit_scales_per_128():
    from perfmodel.formats import get_format
    assert get_format("int4").bits_per_element() == 4.125
    w16 = engine.per_sequence(base, 1.0)["weight_bytes"]
    w4 = engine.per_sequence(base, 1.0, Precision(weights="int4"))["weight_bytes"]
    emb = 2 * base.V * base.D * 2  # embeddings and LM head stay bf16
    assert w4 == pytest.approx(emb + (w16 - emb) * 4.125 / 16, rel=1e-4)
