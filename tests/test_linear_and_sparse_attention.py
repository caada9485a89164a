"""Each op of a Gated DeltaNet layer (Qwen3.5) and of DeepSeek Sparse Attention's indexer (GLM-5) is the formula of
docs/derivations.md ("Gated DeltaNet", "DeepSeek Sparse Attention"), field by field, written out here from the
model's config: parameters, FLOPs, HBM bytes and what a sequence keeps. The catalog laws only bound these."""
import numpy as np
import pytest

import perfmodel as pm
from perfmodel.catalog import apply_overrides, load_raw
from perfmodel.ops import Layout, build_ops
from perfmodel.specs import model_from_dict

B, T, S = 2, 3, 40  # a prefill chunk of 3 tokens on 37 cached ones, two sequences
M = B * T
A = KB = HB = 2  # bf16 activations, KV cache and 16-bit vectors (the default precision)


def f(x):
    return float(np.asarray(x))


def ops_by_name(m, B=B, T=T, S=S, phase="prefill", layout=None):
    out = {}
    for o in build_ops(m, B, T, S, phase, layout=layout):
        out.setdefault(o.name, o)  # the first layer group's
    return out


@pytest.fixture(scope="module")
def qwen35():
    return pm.load_model("qwen3.5-397b-a17b")


@pytest.mark.parametrize("tp", [1, 2])
def test_a_gated_deltanet_layer_is_its_in_proj_conv_delta_rule_and_gated_norm(qwen35, tp):
    gd, D = qwen35.gated_deltanet, qwen35.D
    hk, hv, dk, dv, w = gd.n_k_heads // tp, gd.n_v_heads // tp, gd.k_head_dim, gd.v_head_dim, gd.conv_kernel
    c, s, sb = 2 * hk * dk + hv * dv, hv * dk * dv, 4  # q, k, v channels; the state; fp32 state (mamba_ssm_dtype)
    ops = ops_by_name(qwen35, layout=Layout(tp=tp))
    inp, conv, core, norm = ops["gdn_in_proj"], ops["gdn_conv"], ops["gdn_core"], ops["gdn_norm_gate"]
    assert inp.params == D * (c + hv * dv + 2 * hv) and f(inp.flops) == 2 * M * D * (c + hv * dv + 2 * hv)
    assert conv.params == c * w and f(conv.flops) == 2 * M * c * w and f(conv.w_read) == f(conv.w_stored) == c * w * HB
    assert f(conv.act_read) == f(conv.act_write) == M * c * A
    assert f(conv.kv_read) == f(conv.kv_write) == B * c * (w - 1) * A  # the conv state, read and rewritten once
    assert f(conv.kv_stored) == c * (w - 1) * A  # per sequence, whatever S is
    assert core.params == 2 * hv and f(core.w_read) == f(core.w_stored) == 2 * hv * HB  # A_log, dt_bias
    assert f(core.flops) == 7 * M * s + 3 * M * 2 * hk * dk  # the delta rule, then the L2 norms of q and k
    assert f(core.act_read) == M * (c + 2 * hv) * A and f(core.act_write) == M * hv * dv * A
    assert f(core.kv_read) == f(core.kv_write) == B * s * sb and f(core.kv_stored) == s * sb
    assert f(core.rows) == T  # the tokens of one sequence share its state
    assert norm.params == dv and f(norm.flops) == 9 * M * hv * dv
    assert f(norm.act_read) == 2 * M * hv * dv * A and f(norm.act_write) == M * hv * dv * A  # the output and z in
    if tp > 1:  # out_proj's partial sums: one all-reduce of M x D per R layer
        ar = [op for op in build_ops(qwen35, B, T, S, "prefill", layout=Layout(tp=tp)) if op.name == "allreduce_attn"]
        assert ar and all(f(op.msg) == M * D * A for op in ar)
    o = [op for op in build_ops(qwen35, B, T, S, "prefill", layout=Layout(tp=tp)) if op.name == "o_proj"]
    assert any(p.params == hv * dv * D for p in o)  # the R layers' out_proj (the attention layers' is N H x D)


def test_a_gated_deltanet_state_does_not_grow_with_the_context(qwen35):
    short, long = ops_by_name(qwen35, S=40), ops_by_name(qwen35, S=4000)
    for name in ("gdn_conv", "gdn_core"):
        assert f(short[name].kv_stored) == f(long[name].kv_stored) > 0
        assert f(short[name].kv_read) == f(long[name].kv_read)


@pytest.fixture(scope="module")
def glm5():
    return pm.load_model("glm-5")


@pytest.mark.parametrize("phase,T,S", [("prefill", 3, 40), ("decode", 1, 40), ("decode", 1, 5000)])
def test_the_lightning_indexer_scores_every_visible_key_and_keeps_the_top_k(glm5, phase, T, S):
    d, D, mla = glm5.dsa, glm5.D, glm5.mla
    nI, dI, dr, k, rq = d.n_heads, d.head_dim, mla.rope_dim, d.topk, mla.q_lora_rank
    M = B * T
    P = sum(range(S - T + 1, S + 1))  # causal pairs: the i-th new token sees S - T + i keys
    ops = ops_by_name(glm5, T=T, S=S, phase=phase)
    q, kk, kn, wts, rope = (ops[x] for x in ("indexer_q", "indexer_k", "indexer_k_norm", "indexer_weights",
                                             "indexer_rope"))
    sc, top = ops["indexer_score"], ops["indexer_topk"]
    assert q.params == rq * nI * dI and f(q.flops) == 2 * M * rq * nI * dI
    assert kk.params == D * dI and f(kk.flops) == 2 * M * D * dI and f(kk.kv_stored) == dI * KB * S  # all S kept
    assert kn.params == 2 * dI and f(kn.flops) == 7 * M * dI and f(kn.act_read) == f(kn.act_write) == M * dI * A
    assert f(kn.w_read) == f(kn.w_stored) == 2 * dI * HB  # LayerNorm's weight and bias
    assert wts.params == D * nI and f(wts.flops) == 2 * M * D * nI
    assert f(rope.flops) == 3 * M * (nI + 1) * dr
    assert f(sc.flops) == B * P * nI * (2 * dI + 3)
    assert f(sc.kv_read) == B * S * dI * KB and f(sc.act_read) == M * nI * (dI + 1) * A
    assert f(sc.act_write) == B * T * S * 4  # fp32 logits
    assert f(sc.rows) == T * nI and f(sc.keys) == S
    assert f(top.flops) == B * T * S and f(top.act_read) == B * T * S * 4
    assert f(top.act_write) == B * T * min(S, k) * 4  # int32 indices


def test_sparse_attention_under_a_window_attends_the_smaller_of_the_window_and_top_k(glm5):
    """A DSA layer that also has a sliding window sees min(W, k) keys per query: with W < k the window bounds it,
    with W > k the indexer does."""
    raw, where = load_raw("glm-5", "models")
    keys = {}
    for W in (64, 100000):
        m = model_from_dict(apply_overrides(raw, {"sliding_window": W, "layer_pattern": "L"}, where), where)
        qk = [o for o in build_ops(m, 1, 1, 5000, "decode") if o.name == "attn_qk"][0]
        keys[W] = f(qk.keys)
    assert keys == {64: 64.0, 100000: float(glm5.dsa.topk)}


def test_an_mla_model_with_an_output_bias_counts_it_in_o_proj():
    raw, where = load_raw("deepseek-v2-lite", "models")
    plain = model_from_dict(raw, where)
    biased = model_from_dict(apply_overrides(raw, {"o_bias": True}, where), where)
    o = lambda m: [x for x in build_ops(m, 1, 1, 16, "decode") if x.name == "o_proj"][0]  # noqa: E731
    assert o(biased).params == o(plain).params + plain.D


def test_a_router_bias_adds_one_parameter_per_expert_stored_and_read_in_16_bits():
    """DeepSeek-V3's e_score_correction_bias (gpt-oss's router bias): E more parameters in the router, E x 2 bytes
    more stored and read per step."""
    raw, where = load_raw("deepseek-v3", "models")
    biased = model_from_dict(raw, where)
    plain = model_from_dict(apply_overrides(raw, {"moe.router_bias": False}, where), where)
    E = biased.moe.n_experts
    r = lambda m: [x for x in build_ops(m, 1, 1, 16, "decode") if x.name == "router"][0]  # noqa: E731
    rb, rp = r(biased), r(plain)
    assert rb.params == rp.params + E
    assert f(rb.w_stored) == f(rp.w_stored) + E * HB and f(rb.w_read) == f(rp.w_read) + E * HB


@pytest.mark.parametrize("ep", [2, 4, 8])
def test_each_expert_parallel_all_to_all_sends_the_other_devices_share_of_every_token_expert_pair(ep):
    """Dispatch and combine: each of the M tokens of a device goes to k experts, D values each; (ep - 1)/ep of
    those pairs live on other devices, in ep - 1 steps (derivations "Expert parallelism")."""
    m = pm.load_model("mixtral-8x7b")
    k, D = m.moe.n_active, m.D
    ops = build_ops(m, 8, 1, 64, "decode", layout=Layout(ep=ep))
    for name in ("alltoall_dispatch", "alltoall_combine"):
        a2a = next(o for o in ops if o.name == name)
        M = 8 / ep  # attention data-parallel over the ep groups: this device's share of the batch
        assert f(a2a.msg) == M * k * D * 2
        assert f(a2a.comm_bytes) == pytest.approx(M * k * D * 2 * (ep - 1) / ep, rel=1e-12)
        assert (a2a.comm_steps, a2a.peers, a2a.link) == (ep - 1, ep, "ep")


def test_qwen35s_attention_output_gate_reads_the_output_and_the_gate_and_writes_their_product(qwen35):
    N, H = qwen35.n_heads, qwen35.head_dim
    gate = ops_by_name(qwen35)["attn_gate"]
    assert f(gate.flops) == 5 * M * N * H and f(gate.act_read) == 2 * M * N * H * A and f(gate.act_write) == M * N * H * A
