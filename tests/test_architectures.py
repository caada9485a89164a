"""This year's architecture features (issue 17), each checked in the op list: parameters, FLOPs, bytes and KV.

Every feature is compared with the model without it (`Model.replace`), so each test states exactly what the
feature adds; the formulas are derived in docs/derivations.md ('Architecture features')."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import perfmodel as pm
from perfmodel import engine
from perfmodel.cli import main
from perfmodel.formats import get_format
from perfmodel.ops import Precision, active_param_count, build_ops, chunk_pairs, chunk_read_len, param_count

BF16 = 2


def ops_of(m, B=1, S=1024, phase="decode", prec=None):
    return build_ops(m, B, 1 if phase == "decode" else S, S, phase, prec)


def total(ops, field, name=None):
    return sum(float(np.sum(getattr(o, field))) * o.count for o in ops if name is None or o.name == name)


def kv_bytes(m, S, prec=None):
    return float(engine.per_sequence(m, np.array([float(S)]), prec)["kv_bytes_per_seq"][0])


# ---------------------------------------------------------------- per-head q/k norm (Qwen3, Gemma 3; Llama 4's L2)
def test_qk_rmsnorm_adds_one_weight_of_head_dim_for_q_and_for_k_per_layer_and_4_flop_per_element():
    m = pm.load_model("qwen3-8b")
    plain = m.replace(qk_norm=None)
    L, N, K, H = m.L, m.N, m.K, m.H
    assert param_count(m) - param_count(plain) == L * 2 * H  # q_norm.weight, k_norm.weight: H each
    B, S = 4, 2048
    ops = ops_of(m, B, S)
    M = B  # decode
    assert total(ops, "flops", "qk_norm") == L * 4 * M * (N + K) * H
    assert total(ops, "act_read", "qk_norm") == total(ops, "act_write", "qk_norm") == L * M * (N + K) * H * BF16
    assert kv_bytes(m, S) == kv_bytes(plain, S)  # the cache holds normed keys: the same size


def test_llama4_l2_qk_norm_has_no_weights_and_runs_on_the_rope_layers_only():
    m = pm.load_model("llama-4-scout")
    assert param_count(m) == param_count(m.replace(qk_norm=None))
    ops = ops_of(m)
    qk = [o for o in ops if o.name == "qk_norm"]
    assert sum(o.count for o in qk) == 36 and {o.group.split()[0] for o in qk} == {"chunked"}  # 36 RoPE layers of 48
    assert total(ops, "flops", "qk_norm") == 36 * 3 * 1 * (m.N + m.K) * m.H


# ---------------------------------------------------------------- four norms per layer (Gemma 2/3)
def test_four_norms_per_layer_add_two_norms_of_d_model_per_layer():
    m = pm.load_model("gemma-3-27b")
    two = m.replace(norms_per_layer=2)
    assert param_count(m) - param_count(two) == 2 * m.L * m.D
    ops, M = ops_of(m, 8), 8
    for name in ("post_attn_norm", "post_mlp_norm"):
        assert sum(o.count for o in ops if o.name == name) == m.L
        assert total(ops, "flops", name) == m.L * 4 * M * m.D
        assert total(ops, "w_read", name) == m.L * m.D * BF16


# ---------------------------------------------------------------- attention sinks (gpt-oss)
def test_attention_sinks_add_one_logit_per_head_per_layer_read_by_the_attention_kernel():
    m = pm.load_model("gpt-oss-20b")
    off = m.replace(attention_sinks=False)
    assert param_count(m) - param_count(off) == m.L * m.N
    B, S = 3, 4096
    a, b = ops_of(m, B, S), ops_of(off, B, S)
    assert total(a, "flops", "attn_qk") - total(b, "flops", "attn_qk") == m.L * 2 * B * m.N  # exp + add per row, head
    assert total(a, "w_read", "attn_qk") == m.L * m.N * BF16
    assert kv_bytes(m, S) == kv_bytes(off, S)


# ---------------------------------------------------------------- windows per layer kind, by pattern
def test_gpt_oss_keeps_128_tokens_in_every_other_layer():
    m = pm.load_model("gpt-oss-120b")
    assert m.layer_kinds()[:4] == "LGLG"
    per_tok_layer = 2 * m.K * m.H * BF16
    for S in (64, 128, 129, 100_000):
        assert kv_bytes(m, S) == per_tok_layer * (18 * S + 18 * min(S, 128))


def test_gemma3_keeps_1024_tokens_in_five_of_every_six_layers():
    m = pm.load_model("gemma-3-27b")
    kinds = m.layer_kinds()
    assert kinds.count("G") == 10 and kinds.count("L") == 52 and kinds[5] == "G" and kinds[:5] == "LLLLL"
    S = 32768
    assert kv_bytes(m, S) == 2 * m.K * m.H * BF16 * (10 * S + 52 * 1024)
    # decode attention of a local layer reads 1024 keys, a global one S
    ops = ops_of(m, 1, S)
    reads = {o.group.split()[0]: float(o.kv_read) for o in ops if o.name == "attn_qk"}
    assert reads == {"local": 1024 * m.K * m.H * BF16, "global": S * m.K * m.H * BF16}


# ---------------------------------------------------------------- chunked local attention + NoPE (Llama 4)
def brute_pairs(T, S, C):
    return sum(p - ((p - 1) // C) * C for p in range(S - T + 1, S + 1))


@given(st.integers(1, 300), st.integers(0, 700), st.integers(1, 64))
def test_chunked_pairs_and_keys_read_equal_a_brute_force_count(T, extra, C):
    S = T + extra
    assert chunk_pairs(T, S, C) == brute_pairs(T, S, C)
    first = S - T + 1
    assert chunk_read_len(T, S, C) == S - ((first - 1) // C) * C  # from the first query's chunk start to S
    assert chunk_pairs(T, S, C, causal_skip=False) == T * chunk_read_len(T, S, C)


def test_chunked_formulas_are_vectorised_over_batch_and_context():
    m = pm.load_model("llama-4-scout")
    B, S = np.array([[1.0], [4.0]]), np.array([[100.0, 8192.0, 8193.0, 50_000.0]])
    ops = build_ops(m, B, 1.0, S, "decode")
    qk = next(o for o in ops if o.name == "attn_qk" and o.group.startswith("chunked"))
    keys = np.array([100.0, 8192.0, 1.0, 50_000.0 - 6 * 8192])  # ((S-1) mod C) + 1
    np.testing.assert_array_equal(np.broadcast_to(qk.keys, (2, 4))[0], keys)
    assert np.shape(qk.flops) == (2, 4)


def test_llama4_chunked_layers_cache_at_most_a_chunk_and_the_nope_layers_everything():
    m = pm.load_model("llama-4-scout")
    assert m.layer_kinds()[:4] == "CCCG" and m.nope_kinds == "G"
    per = 2 * m.K * m.H * BF16
    for S in (1000, 8192, 100_000):
        assert kv_bytes(m, S) == per * (36 * min(S, 8192) + 12 * S)
    ops = ops_of(m)
    rope = [o for o in ops if o.name == "rope"]
    assert sum(o.count for o in rope) == 36 and all(o.group.startswith("chunked") for o in rope)


def test_chunked_prefill_attention_flops_are_a_chunk_triangle_per_chunk():
    m = pm.load_model("llama-4-scout")
    S = 3 * 8192
    ops = ops_of(m, 1, S, "prefill")
    qk = next(o for o in ops if o.name == "attn_qk" and o.group.startswith("chunked"))
    g = next(o for o in ops if o.name == "attn_qk" and o.group.startswith("global"))
    assert float(qk.flops) == 2 * 3 * (8192 * 8193 / 2) * m.N * m.H
    assert float(g.flops) == 2 * (S * (S + 1) / 2) * m.N * m.H


# ---------------------------------------------------------------- MoE interleaved with dense layers (Maverick)
def test_maverick_alternates_dense_and_moe_layers_from_layer_1():
    m = pm.load_model("llama-4-maverick")
    assert [m.moe.is_moe(i) for i in range(4)] == [False, True, False, True]
    ops = ops_of(m)
    dense = [o for o in ops if o.name == "mlp_up_gate"]
    experts = [o for o in ops if o.name == "expert_up_gate"]
    assert sum(o.count for o in dense) == 24 and sum(o.count for o in experts) == 24
    D, F, Fe, E = m.D, m.F, m.moe.d_ff_expert, m.moe.n_experts
    all_moe = m.replace(moe=m.moe.__class__(**{**m.moe.__dict__, "layer_pattern": "M"}))
    per_dense, per_moe = 3 * D * F, E * 3 * D * Fe + 3 * D * Fe + D * E  # experts + shared expert + router
    assert param_count(all_moe) - param_count(m) == 24 * (per_moe - per_dense)


# ---------------------------------------------------------------- shared expert with its own gate (Qwen-MoE)
def test_the_qwen2_moe_shared_expert_gate_is_a_d_by_1_matmul_per_moe_layer():
    from pathlib import Path
    m = pm.load_model(str(Path(__file__).parent / "fixtures" / "hf" / "qwen1.5-moe-a2.7b-chat.json"))
    assert m.moe.shared_gate
    ops = ops_of(m, 16)
    g = [o for o in ops if o.name == "shared_expert_gate"]
    assert sum(o.count for o in g) == 24
    assert total(ops, "flops", "shared_expert_gate") == 24 * 2 * 16 * m.D
    assert total(ops, "params", "shared_expert_gate") == 24 * m.D


# ---------------------------------------------------------------- biases on experts and the router (gpt-oss)
def test_gpt_oss_expert_and_router_biases_and_attention_biases():
    m = pm.load_model("gpt-oss-120b")
    E, D, F, L, N, K, H = m.moe.n_experts, m.D, m.moe.d_ff_expert, m.L, m.N, m.K, m.H
    no_exp = m.replace(moe=m.moe.__class__(**{**m.moe.__dict__, "expert_bias": False}))
    assert param_count(m) - param_count(no_exp) == L * E * (2 * F + D)  # gate_up_proj_bias [E, 2F], down_proj_bias [E, D]
    no_router = m.replace(moe=m.moe.__class__(**{**m.moe.__dict__, "router_bias": False}))
    assert param_count(m) - param_count(no_router) == L * E
    assert param_count(m) - param_count(m.replace(o_bias=False)) == L * D
    assert param_count(m) - param_count(m.replace(qkv_bias=False)) == L * (N + 2 * K) * H


# ---------------------------------------------------------------- per-tensor weight formats (gpt-oss: MXFP4 experts)
def test_gpt_oss_stores_its_experts_in_mxfp4_and_everything_else_in_bf16():
    m = pm.load_model("gpt-oss-120b")
    ops = ops_of(m)
    fmts = {o.name: o.wfmt for o in ops if o.params}
    assert fmts["expert_up_gate"] == fmts["expert_down"] == "mxfp4"
    assert fmts["qkv_proj"] == fmts["o_proj"] == fmts["router"] == fmts["embed"] == fmts["lm_head"] == "bf16"
    up = next(o for o in ops if o.name == "expert_up_gate")
    D, F, E = m.D, m.moe.d_ff_expert, m.moe.n_experts
    # 4.25 bits per weight (32 E2M1 values share one E8M0 scale), the biases in bf16
    assert float(up.w_stored) == E * 2 * (D * F * 4.25 / 8 + F * BF16)
    # the whole checkpoint: 65.25 GB; the HF repo's original/ folder (the same MXFP4 + bf16 tensors) lists 65.2 GB
    w = float(engine.per_sequence(m, np.array([1.0]))["weight_bytes"])
    assert abs(w / 65.2e9 - 1) < 0.005


def test_a_pinned_format_wins_over_the_precision_and_can_be_unset_from_the_command_line(capsys):
    m = pm.load_model("gpt-oss-20b")
    ops = ops_of(m, prec=Precision(weights="fp8"))
    fmts = {o.name: o.wfmt for o in ops if o.params}
    assert fmts["expert_up_gate"] == "mxfp4" and fmts["qkv_proj"] == fmts["o_proj"] == "bf16"
    unpinned = pm.load_model("gpt-oss-20b", {"weight_formats": None})
    assert unpinned.weight_formats == () and param_count(unpinned) == param_count(m)
    fmts = {o.name: o.wfmt for o in ops_of(unpinned, prec=Precision(weights="fp8")) if o.params}
    assert fmts["expert_up_gate"] == fmts["qkv_proj"] == "fp8"
    assert main(["show", "gpt-oss-20b", "--set", "weight_formats.experts=int4", "--format", "json"]) == 0
    capsys.readouterr()


@pytest.mark.parametrize("name", ["llama-3.1-8b", "deepseek-r1", "qwen3.5-397b-a17b", "gpt-oss-120b", "glm-5"])
def test_the_output_projection_follows_the_attention_pin_unless_it_has_its_own(name):
    """attention_out (o_proj) takes the attention's pinned format, and a pin of its own moves o_proj alone:
    DeepSeek-R1-0528-NVFP4-v2 stores q_a, q_b, kv_a, kv_b in bf16 and o_proj in NVFP4 (GQA, MLA, linear attention
    and DSA models alike)."""
    prec = Precision(weights="nvfp4", act="fp4")
    base = {o.name: o.wfmt for o in ops_of(pm.load_model(name, {"weight_formats": None}), prec=prec) if o.params}
    att = {o.name: o.wfmt for o in ops_of(pm.load_model(name, {"weight_formats": {"attention": "bf16"}}), prec=prec)
           if o.params}
    out = {o.name: o.wfmt for o in ops_of(pm.load_model(name, {"weight_formats": {"attention_out": "fp8"}}), prec=prec)
           if o.params}
    assert base["o_proj"] == "nvfp4" and att["o_proj"] == "bf16" and out["o_proj"] == "fp8"
    assert {k: v for k, v in out.items() if k != "o_proj"} == {k: v for k, v in base.items() if k != "o_proj"}
    moved = {k for k in base if att[k] != base[k]}
    assert "o_proj" in moved and all(att[k] == "bf16" for k in moved)
    assert not moved & {"expert_up_gate", "expert_down", "mlp_up_gate", "mlp_down", "shared_expert_up_gate"}


# ---------------------------------------------------------------- formats: nvfp4 and fp6 bookkeeping
def test_nvfp4_counts_one_fp8_scale_per_16_values_and_one_fp32_scale_per_tensor():
    f = get_format("nvfp4")
    assert f.bits_per_element() == 4.5 and f.peak == "fp4"
    assert f.matrix_bytes(4096 * 4096, row=4096) == 4096 * 4096 * 4.5 / 8 + 4
    assert get_format("fp4").matrix_bytes(1024) == f.matrix_bytes(1024)  # fp4 is nvfp4's layout
    m = pm.load_model("llama-3.1-8b")
    ops = ops_of(m, prec=Precision(weights="nvfp4", act="fp4"))
    q = next(o for o in ops if o.name == "qkv_proj")
    assert float(q.w_stored) == m.D * (m.N + 2 * m.K) * m.H * 4.5 / 8 + 4


def test_fp6_is_the_mx_fp6_layout_at_the_fp8_tensor_rate():
    f = get_format("fp6")
    assert f.bits_per_element() == 6.25 and f.peak == "fp8" and get_format("mxfp6").bits_per_element() == 6.25


# ---------------------------------------------------------------- active parameters
def test_active_parameters_count_k_of_e_experts_and_optionally_the_input_embedding():
    m = pm.load_model("qwen3-30b-a3b")
    e = m.moe
    experts = sum(o.params * o.count for o in ops_of(m) if o.name.startswith("expert_"))
    assert active_param_count(m) == param_count(m) - experts * (e.n_experts - e.n_active) // e.n_experts
    assert active_param_count(m) - active_param_count(m, input_embedding=False) == m.V * m.D
    dense = pm.load_model("llama-3.1-8b")
    assert active_param_count(dense) == param_count(dense)
    tied = pm.load_model("qwen3-0.6b")  # a tied table is read by the LM head: it stays
    assert active_param_count(tied, input_embedding=False) == param_count(tied)


# ---------------------------------------------------------------- the new models run through every path
@pytest.mark.parametrize("name", ["gpt-oss-120b", "llama-4-maverick", "gemma-3-27b", "qwen3-235b-a22b", "kimi-k2"])
def test_new_models_decode_and_prefill_with_finite_positive_times(name, capsys):
    assert main(["decode", "-m", name, "-H", "b200", "--batch", "1,64", "--context", "1024,32768", "--format",
                 "json"]) == 0
    assert main(["prefill", "-m", name, "-H", "b200", "--context", "8192", "--format", "json"]) == 0
    assert main(["intensity", "-m", name, "--batch", "8", "--context", "4096", "--format", "csv"]) == 0
    capsys.readouterr()


def test_every_layer_group_is_labelled_by_its_kind():
    labels = {o.group for o in ops_of(pm.load_model("llama-4-maverick")) if o.group}
    # NoPE layers 3, 7, 11, ... are odd, so all MoE; of the chunked layers, 1, 5, 9, ... are MoE
    assert labels == {"chunked/dense x24", "chunked/moe x12", "global/moe x12"}


# ---------------------------------------------------------------- bad input: one line, exit 2, naming the field
@pytest.mark.parametrize("sets, field", [
    ({"layer_pattern": "CG"}, "attention_chunk"),
    ({"qk_norm": "layernorm"}, "qk_norm"),
    ({"norms_per_layer": 3}, "norms_per_layer"),
    ({"nope_kinds": "X"}, "nope_kinds"),
    ({"weight_formats.experts": "fp5"}, "weight_formats.experts"),
    ({"weight_formats.mlp_head": "bf16"}, "weight_formats.mlp_head"),
    ({"moe.layer_pattern": "DD"}, "moe.layer_pattern"),
    ({"moe.layer_pattern": "MX"}, "moe.layer_pattern"),
    ({"moe.shared_gate": True}, "moe.shared_gate"),
    ({"attention_sinks": 3}, "attention_sinks"),
])
def test_bad_new_fields_give_one_line_and_exit_2(capsys, sets, field):
    argv = ["decode", "-m", "gpt-oss-20b", "--batch", "1"]
    for k, v in sets.items():
        argv += ["--set", f"{k}={v}"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and field in err[0] and "gpt-oss-20b" in err[0], err


def test_the_new_fields_round_trip_through_replace():
    for name in ("gpt-oss-120b", "llama-4-maverick", "gemma-3-4b", "qwen3-30b-a3b"):
        m = pm.load_model(name)
        again = m.replace()
        assert again.__dict__ | {"key": m.key} == m.__dict__ and param_count(again) == param_count(m)
