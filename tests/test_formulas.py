"""One test per formula of docs/derivations.md, each on its own: a tiny model small enough to count by
hand, the expected number worked out from the documented formula in the comment next to it (never copied
from a run). When a formula changes, the test named after it fails, not only the docs snapshot.

The toy model: V = 50, D = 16, L = 3, N = 4, K = 2, H = 4, F = 24, gated MLP, RMSNorm, RoPE, untied,
all in bf16 (a = k = w = 2 bytes). Decode runs at B = 2, S = 10 (T = 1, M = 2) unless a test says
otherwise. The checklist in docs/mutation.md maps every section of docs/derivations.md to its tests.
"""
import dataclasses

import numpy as np
import pytest

import perfmodel as pm
from perfmodel import engine
from perfmodel.efficiency import Dequant
from perfmodel.formats import get_format
from perfmodel.ops import ATTENTION, MATMUL, VECTOR, Op, Precision, build_ops, causal_pairs, kv_read_len, param_count
from perfmodel.specs import Hardware, model_from_dict
from perfmodel.timemodel import TimeModel

TOY = dict(name="toy", source="hand", vocab_size=50, d_model=16, n_layers=3, n_heads=4, n_kv_heads=2, head_dim=4,
           d_ff=24, max_context=4096)
toy = model_from_dict(TOY, "toy")
# a device with round numbers: 1 TB/s, 100 TFLOP/s bf16, 200 fp8, 10 fp32 (vector), 1 MB
HW = Hardware("toy device", 1e6, 1e12, {"bf16": 1e14, "fp8": 2e14, "fp32": 1e13})


def toy_model(**kw):
    return model_from_dict({**TOY, **kw}, "toy")


def ops_of(m=toy, B=2, T=1, S=10, phase="decode", **kw):
    return build_ops(m, B, T, S, phase, **kw)


def one(ops, name):
    """The op of that name (the first one: per-layer ops appear once per layer group)."""
    return next(o for o in ops if o.name == name)


def f(x):
    return float(np.asarray(x))


DEC = ops_of()  # decode, B = 2, S = 10, M = 2


# ---------------------------------------------------------------- The roofline
def test_an_ops_roofline_time_is_the_larger_of_flops_over_peak_and_bytes_over_bandwidth():
    """derivations "The roofline": t = max(FLOPs / peak, bytes / bandwidth)."""
    mem = Op("m", "", 1, MATMUL, flops=1e3, act_read=1e6)  # 1e3/1e14 = 1e-11 s vs 1e6/1e12 = 1e-6 s
    cmp = Op("c", "", 1, MATMUL, flops=1e9, act_read=1e3)  # 1e9/1e14 = 1e-5 s vs 1e3/1e12 = 1e-9 s
    (tc1, tm1, t1), (tc2, tm2, t2) = engine.op_times([mem, cmp], HW, Precision())
    assert (tc1, tm1, t1) == (pytest.approx(1e-11), pytest.approx(1e-6), pytest.approx(1e-6))
    assert (tc2, tm2, t2) == (pytest.approx(1e-5), pytest.approx(1e-9), pytest.approx(1e-5))


def test_a_step_is_the_sum_of_its_op_times_each_counted_once_per_layer():
    """derivations "The roofline": the step's time is the sum over ops (x layers)."""
    a = Op("a", "", 3, MATMUL, flops=1e9, act_read=1.0)  # 3 layers x 1e-5 s
    b = Op("b", "", 1, VECTOR, flops=1.0, act_read=2e6)  # once: 2e-6 s
    r = engine.roofline([a, b], HW, Precision())
    assert r["time"] == pytest.approx(3e-5 + 2e-6, rel=1e-12)
    assert r["flops"] == pytest.approx(3e9 + 1) and r["bytes"] == pytest.approx(3 + 2e6)
    assert r["compute_bound_time"] == pytest.approx(3e-5)  # only a is compute-bound


def test_intensity_is_flops_over_bytes_and_the_ridge_is_peak_over_bandwidth():
    """derivations "The roofline": intensity = FLOPs / bytes; ridge = peak / bandwidth (295 on an H100 SXM)."""
    op = Op("x", "", 1, MATMUL, flops=600.0, act_read=100.0, act_write=50.0)
    assert op.intensity == 4.0  # 600 / 150
    assert HW.ridge("bf16") == 100.0  # 1e14 / 1e12
    h100 = pm.load_hardware("h100-sxm")
    assert h100.ridge("bf16") == h100.peak_flops["bf16"] / h100.memory_bandwidth
    assert round(h100.ridge("bf16")) == 295  # ~989 TFLOP/s over 3.35 TB/s


def test_matmuls_use_the_tensor_peak_of_the_activation_format_and_vector_ops_the_fp32_rate():
    """derivations "The roofline": matmuls and attention at the activation format's tensor peak (fp8 with
    --act-dtype fp8, bf16 for weight-only quantization); norms, RoPE, activations at the fp32 vector rate."""
    mm = Op("mm", "", 1, MATMUL, flops=1e9)
    at = Op("at", "", 1, ATTENTION, flops=1e9)
    vec = Op("v", "", 1, VECTOR, flops=1e9)
    bf = engine.op_times([mm, at, vec], HW, Precision())
    assert [t[0] for t in bf] == [pytest.approx(1e-5), pytest.approx(1e-5), pytest.approx(1e-4)]  # 1e9/1e14, 1e9/1e13
    f8 = engine.op_times([mm, at, vec], HW, Precision("fp8", "fp8"))
    assert [t[0] for t in f8] == [pytest.approx(5e-6), pytest.approx(5e-6), pytest.approx(1e-4)]  # 1e9/2e14
    w4 = engine.op_times([mm], HW, Precision("int4", "bf16"))
    assert w4[0][0] == pytest.approx(1e-5)  # weight-only int4 keeps the bf16 rate


def test_a_step_is_compute_bound_when_its_compute_bound_ops_take_more_than_half_its_time():
    """derivations "The roofline": `compute`-bound when compute-bound ops account for more than half the time."""
    # the toy decode step, all memory-bound on HW; the same step on a device 1e9 times slower at math:
    # every op then compute-bound. A device whose peak puts the step exactly at half is not compute-bound.
    assert engine.evaluate(toy, HW, 2, 10)["bound"][0, 0] == "memory"
    slow = HW.replace(peak_flops={"bf16": 1e5, "fp8": 1e5, "fp32": 1e4})
    assert engine.evaluate(toy, slow, 2, 10)["bound"][0, 0] == "compute"
    # two ops of equal time, one compute-bound and one memory-bound: exactly half is not "more than half"
    ops = [Op("c", "", 1, MATMUL, flops=1e9), Op("m", "", 1, MATMUL, act_read=1e7)]  # 1e-5 s each
    r = engine.roofline(ops, HW, Precision())
    assert r["compute_bound_time"] * 2 == pytest.approx(r["time"])


def test_simple_mode_streams_all_weights_and_every_sequences_kv_once_per_step():
    """derivations "The roofline": simple step = (weight bytes + B * KV bytes per sequence) / bandwidth."""
    # toy parameters: per layer 16 (norm) + 16*32 (qkv) + 16*16 (o) + 16 (norm) + 2*16*24 + 24*16 = 1952;
    # x 3 layers = 5856, + embedding 800 + final norm 16 + LM head 800 = 7472 params = 14944 bytes.
    # KV per sequence at S = 10: 2 (K, V) * 2 heads * 4 * 2 bytes * 10 tokens * 3 layers = 960 bytes.
    r = engine.evaluate(toy, HW, 2, 10, mode="simple")
    assert r["weight_bytes"][0, 0] == 14944 and r["kv_cache_bytes"][0, 0] == 2 * 960
    assert r["latency_s"][0, 0] == pytest.approx((14944 + 2 * 960) / 1e12, rel=1e-12)
    assert r["bound"][0, 0] == "memory"


def test_simple_prefill_is_the_larger_of_its_bytes_and_its_flops_over_the_peak():
    """derivations "The roofline": for prefill, simple takes max(bytes / bandwidth, FLOPs / peak)."""
    # B = 2, S = 6: KV per sequence 2*2*4*2*6*3 = 576 bytes; bytes term (14944 + 2*576) / 1e12
    fast = engine.evaluate(toy, HW, 2, 6, "prefill", "simple")
    assert fast["latency_s"][0, 0] == pytest.approx((14944 + 2 * 576) / 1e12, rel=1e-12)
    slow = HW.replace(peak_flops={"bf16": 1e6, "fp32": 1e6})  # FLOPs / 1e6 dwarfs 16 ns of bytes
    r = engine.evaluate(toy, slow, 2, 6, "prefill", "simple")
    assert r["latency_s"][0, 0] == pytest.approx(r["flops"][0, 0] / 1e6, rel=1e-12)
    assert r["bound"][0, 0] == "compute"
    # the FLOPs run at the activations' peak, not the weights': fp8 weights with 16-bit math take the bf16 rate
    w8 = HW.replace(peak_flops={"bf16": 1e6, "fp8": 1e9, "fp32": 1e6})
    r8 = engine.evaluate(toy, w8, 2, 6, "prefill", "simple", prec=Precision("fp8", "bf16", "fp8"))  # nor the cache's
    assert r8["latency_s"][0, 0] == pytest.approx(r8["flops"][0, 0] / 1e6, rel=1e-12)


# ---------------------------------------------------------------- Ops of one layer (decode, M = 2)
def test_rmsnorm_costs_4_flop_per_element_and_reads_its_input_and_weight():
    """derivations "Ops of one layer": attn_norm / mlp_norm: 4*M*D FLOPs, reads M*D*a + D*w, writes M*D*a."""
    for name in ("attn_norm", "mlp_norm", "final_norm"):
        n = one(DEC, name)
        assert f(n.flops) == 4 * 2 * 16 == 128
        assert f(n.bytes_read) == 2 * 16 * 2 + 16 * 2 == 96
        assert f(n.bytes_written) == 2 * 16 * 2 == 64
        assert n.params == 16
    assert one(DEC, "attn_norm").count == 3 and one(DEC, "final_norm").count == 1


def test_layernorm_costs_7_flop_per_element_and_stores_a_weight_and_a_bias():
    """derivations "Ops of one layer" (GPT models): LayerNorm ~7 FLOP per element, weight + bias."""
    n = one(ops_of(toy_model(norm="layernorm")), "attn_norm")
    assert f(n.flops) == 7 * 2 * 16 and n.params == 2 * 16


def test_the_qkv_projection_writes_q_as_activations_and_the_new_k_v_straight_into_the_cache():
    """derivations "Ops of one layer": qkv_proj 2*M*D*(N+2K)*H FLOPs; reads M*D*a + D*(N+2K)*H*w;
    writes M*N*H*a (q) + M*2K*H*k (K, V into the cache)."""
    q = one(DEC, "qkv_proj")
    assert f(q.flops) == 2 * 2 * 16 * (4 + 4) * 4 == 2048
    assert f(q.act_read) == 2 * 16 * 2 == 64 and f(q.w_read) == 16 * 8 * 4 * 2 == 1024
    assert f(q.act_write) == 2 * 4 * 4 * 2 == 64  # q
    assert f(q.kv_write) == 2 * 2 * 2 * 4 * 2 == 64  # new K and V, once
    assert q.params == 16 * 32


def test_rope_rotates_q_and_k_at_3_flop_per_element():
    """derivations "Ops of one layer": rope 3*M*(N+K)*H FLOPs, reads and writes M*(N+K)*H*a."""
    r = one(DEC, "rope")
    assert f(r.flops) == 3 * 2 * (4 + 2) * 4 == 144
    assert f(r.bytes_read) == f(r.bytes_written) == 2 * 6 * 4 * 2 == 96


def test_decode_attention_scores_and_values_read_q_k_v_once_and_write_o():
    """derivations "Ops of one layer": attn_qk 2*B*P*N*H, reads Q M*N*H*a and K B*S_r*K*H*k; attn_av
    2*B*P*N*H, reads V, writes O M*N*H*a. Decode: P = S = 10, S_r = 10."""
    qk, av = one(DEC, "attn_qk"), one(DEC, "attn_av")
    assert f(qk.flops) == f(av.flops) == 2 * 2 * 10 * 4 * 4 == 640
    assert f(qk.act_read) == 2 * 4 * 4 * 2 == 64  # Q
    assert f(qk.kv_read) == f(av.kv_read) == 2 * 10 * 2 * 4 * 2 == 320  # K, then V: B*S*K*H*k each
    assert f(qk.bytes_written) == 0  # fused: no score matrix
    assert f(av.act_write) == 64 and f(av.act_read) == 0  # O


def test_the_output_projection_is_an_NH_by_D_matmul():
    """derivations "Ops of one layer": o_proj 2*M*N*H*D; reads M*N*H*a + N*H*D*w; writes M*D*a."""
    o = one(DEC, "o_proj")
    assert f(o.flops) == 2 * 2 * 16 * 16 == 1024
    assert f(o.bytes_read) == 2 * 16 * 2 + 16 * 16 * 2 == 576 and f(o.bytes_written) == 64


def test_each_residual_add_reads_two_tensors_and_writes_one_twice_per_layer():
    """derivations "Ops of one layer": residual (x2) M*D FLOPs, reads 2*M*D*a, writes M*D*a."""
    res = [o for o in DEC if o.name == "residual"]
    assert len(res) == 2 and all(o.count == 3 for o in res)
    for o in res:
        assert f(o.flops) == 32 and f(o.bytes_read) == 128 and f(o.bytes_written) == 64


def test_a_gated_mlp_has_up_and_gate_matrices_a_silu_product_and_a_down_matrix():
    """derivations "Ops of one layer": mlp_up_gate 2*M*D*2F, reads M*D*a + 2*D*F*w, writes 2*M*F*a;
    mlp_act 5*M*F, reads 2*M*F*a, writes M*F*a; mlp_down 2*M*F*D, reads M*F*a + F*D*w, writes M*D*a."""
    up, act, down = one(DEC, "mlp_up_gate"), one(DEC, "mlp_act"), one(DEC, "mlp_down")
    assert f(up.flops) == 2 * 2 * 16 * 48 == 3072
    assert f(up.bytes_read) == 64 + 2 * 16 * 24 * 2 == 1600 and f(up.bytes_written) == 2 * 2 * 24 * 2 == 192
    assert f(act.flops) == 5 * 2 * 24 == 240 and f(act.bytes_read) == 192 and f(act.bytes_written) == 96
    assert f(down.flops) == 2 * 2 * 24 * 16 == 1536
    assert f(down.bytes_read) == 96 + 24 * 16 * 2 == 864 and f(down.bytes_written) == 64


def test_a_plain_mlp_has_two_matrices_and_a_gelu_of_8_flop_per_element():
    """derivations "Ops of one layer": a plain (GPT) MLP is mlp_up (D x F), GELU (8 FLOP/elem), mlp_down."""
    ops = ops_of(toy_model(mlp="plain"))
    names = [o.name for o in ops if o.name.startswith("mlp_") and o.name != "mlp_norm"]
    assert names == ["mlp_up", "mlp_act", "mlp_down"]
    assert f(one(ops, "mlp_up").flops) == 2 * 2 * 16 * 24 and one(ops, "mlp_up").params == 16 * 24
    assert f(one(ops, "mlp_act").flops) == 8 * 2 * 24
    assert param_count(toy) - param_count(toy_model(mlp="plain")) == 3 * 16 * 24  # one D x F matrix per layer


def test_biases_add_their_vectors_to_the_weights():
    """derivations "Ops of one layer": qkv_bias adds (N+2K)*H per layer, linear_bias a vector per matrix."""
    assert param_count(toy_model(qkv_bias=True)) - param_count(toy) == 3 * 32
    # linear_bias: qkv (32) + o_proj (16) + up/gate (2*24) + down (16) = 112 per layer
    assert param_count(toy_model(linear_bias=True)) - param_count(toy) == 3 * 112
    q = one(ops_of(toy_model(qkv_bias=True)), "qkv_proj")
    assert f(q.w_read) == (16 * 32 + 32) * 2


def test_the_embedding_reads_only_the_gathered_rows_and_writes_the_residual_stream():
    """derivations "Ops of one layer": embed reads min(M, V) rows of D*w, writes M*D*a; stores V*D."""
    e = one(DEC, "embed")
    assert f(e.w_read) == 2 * 16 * 2 == 64 and f(e.act_write) == 64  # M = 2 rows
    assert e.params == 50 * 16 and f(e.w_stored) == 1600 and f(e.flops) == 0
    big = one(ops_of(B=2, T=40, S=40, phase="prefill"), "embed")  # M = 80 > V = 50: every row once
    assert f(big.w_read) == 50 * 16 * 2 and f(big.act_write) == 80 * 16 * 2


def test_the_lm_head_reads_the_whole_matrix_for_every_row_in_decode_and_the_last_row_in_prefill():
    """derivations "Ops of one layer": lm_head 2*R*D*V FLOPs, reads all D x V; R = M in decode, B in prefill."""
    d = one(DEC, "lm_head")
    assert f(d.flops) == 2 * 2 * 16 * 50 == 3200 and f(d.w_read) == 16 * 50 * 2 == 1600
    assert f(d.act_read) == 2 * 16 * 2 and f(d.act_write) == 2 * 50 * 2
    p = one(ops_of(B=2, T=6, S=6, phase="prefill"), "lm_head")  # M = 12 tokens, R = B = 2 rows
    assert f(p.flops) == 3200 and f(p.w_read) == 1600


def test_tied_embeddings_are_read_again_by_the_lm_head_but_stored_once():
    """derivations "Ops of one layer": with tied embeddings the LM head reads the embedding matrix, stores nothing."""
    tied = toy_model(tied_embeddings=True)
    h = one(ops_of(tied), "lm_head")
    assert h.params == 0 and f(h.w_stored) == 0 and f(h.w_read) == 1600
    assert param_count(toy) - param_count(tied) == 50 * 16


def test_w8a8_gemms_read_8_bit_inputs_while_the_residual_stream_stays_16_bit():
    """derivations "Symbols": g = a except 8-bit GEMMs (W8A8) read 8-bit inputs while a stays 16-bit."""
    ops = ops_of(prec=Precision("fp8", "fp8"))
    assert f(one(ops, "mlp_down").act_read) == 2 * 24 * 1  # M*F*g, g = 1 byte
    assert f(one(ops, "mlp_down").act_write) == 2 * 16 * 2  # M*D*a, a = 2 bytes
    assert f(one(ops, "residual").bytes) == f(one(DEC, "residual").bytes)


# ---------------------------------------------------------------- Attention
@pytest.mark.parametrize("T, S, W, pairs", [
    (1, 10, None, 10),  # decode: P = S
    (6, 6, None, 21),  # prefill: S(S+1)/2
    (3, 10, None, 27),  # a chunk: T(S-T) + T(T+1)/2 = 21 + 6
    (3, 10, 4, 12),  # queries at 8, 9, 10 see min(p, 4) = 4 keys each
    (6, 6, 4, 1 + 2 + 3 + 4 + 4 + 4),  # sum_{p=1}^{6} min(p, 4)
    (1, 3, 4, 3),  # a window wider than the context: S
])
def test_causal_pairs_are_the_sum_over_query_positions_of_min_p_W(T, S, W, pairs):
    """derivations "Attention": P = sum_{p=S-T+1}^{S} min(p, W) = T(S-T) + T(T+1)/2 without a window."""
    assert causal_pairs(T, S, W) == pairs


def test_without_causal_skipping_the_kernel_computes_the_full_T_by_S_read_rectangle():
    """derivations "Attention": causal_skip=False counts T x S_r pairs."""
    assert causal_pairs(6, 6, None, causal_skip=False) == 36
    assert causal_pairs(3, 10, 4, causal_skip=False) == 3 * 6  # S_r = min(10, 4 + 3 - 1)
    qk = one(ops_of(B=2, T=6, S=6, phase="prefill", causal_skip=False), "attn_qk")
    assert f(qk.flops) == 2 * 2 * 36 * 4 * 4


@pytest.mark.parametrize("T, S, W, keys", [(1, 10, None, 10), (1, 10, 4, 4), (1, 3, 4, 3), (3, 10, 4, 6),
                                           (6, 6, 4, 6), (3, 5, 4, 5)])
def test_a_local_layer_reads_the_last_W_plus_T_minus_1_keys(T, S, W, keys):
    """derivations "Attention": S_r = S, or min(S, W + T - 1) for a local layer."""
    assert kv_read_len(T, S, W) == keys


def test_a_sliding_window_layer_reads_W_keys_in_decode_and_W_plus_T_minus_1_for_a_chunk():
    """derivations "Attention": S_r = min(S, W + T - 1); K read is B * S_r * K * H * k."""
    swa = toy_model(sliding_window=4, layer_pattern="L")
    assert f(one(ops_of(swa), "attn_qk").kv_read) == 2 * 4 * 2 * 4 * 2  # decode at S = 10: 4 keys
    chunk = one(ops_of(swa, B=2, T=3, S=10, phase="prefill"), "attn_qk")
    assert f(chunk.kv_read) == 2 * 6 * 2 * 4 * 2  # min(10, 4 + 3 - 1) = 6 keys
    assert f(chunk.flops) == 2 * 2 * 12 * 4 * 4  # P = 12 (three queries, four keys each)


def test_decode_attention_intensity_is_N_over_K_times_S_over_S_plus_N_over_K():
    """derivations "Attention": 4BSNH FLOPs / (4BNH + 4BSKH) bytes = (N/K) S / (S + N/K), whatever B."""
    qk, av = one(DEC, "attn_qk"), one(DEC, "attn_av")
    i = (f(qk.flops) + f(av.flops)) / (f(qk.bytes) + f(av.bytes))
    assert i == pytest.approx(2 * 10 / (10 + 2), rel=1e-12)  # (1280) / (128 + 640) = 5/3


def test_prefill_attention_counts_half_the_lectures_4BSTD_plus_the_diagonal():
    """derivations "Attention": prefill P = S(S+1)/2, half the lecture's 4BSTD."""
    qk = one(ops_of(B=2, T=6, S=6, phase="prefill"), "attn_qk")
    assert f(qk.flops) == 2 * 2 * 21 * 4 * 4 == 1344
    assert f(qk.kv_read) == 2 * 6 * 2 * 4 * 2  # keys of the 6 tokens, read once


def test_an_unfused_kernel_writes_softmaxes_and_rereads_the_score_matrix():
    """derivations "Unfused kernel": B*N*T*S_r scores written by attn_qk, read and written by
    attn_softmax (5 FLOP per element), read by attn_av: 4*B*N*T*S_r*a more bytes."""
    fused = ops_of(B=2, T=6, S=6, phase="prefill")
    unf = ops_of(B=2, T=6, S=6, phase="prefill", attention="unfused")
    scores = 2 * 4 * 6 * 6  # B*N*T*S_r = 288 elements
    sm = one(unf, "attn_softmax")
    assert f(sm.flops) == 5 * scores and f(sm.bytes_read) == f(sm.bytes_written) == scores * 2
    names = ("attn_qk", "attn_softmax", "attn_av")
    extra = sum(f(o.bytes) for o in unf if o.name in names) - sum(f(o.bytes) for o in fused if o.name in names)
    assert extra == 4 * scores * 2
    assert f(one(unf, "attn_qk").flops) == 2 * 2 * 36 * 4 * 4  # the full rectangle is computed
    assert [o.name for o in unf if o.name.startswith("attn")] == ["attn_norm", "attn_qk", "attn_softmax", "attn_av"]


# ---------------------------------------------------------------- KV cache and memory
def test_the_kv_cache_per_sequence_is_2_K_H_k_per_token_per_layer():
    """derivations "KV cache and memory": KV per sequence = sum over layers of 2*K*H*k*min(S, W)."""
    assert f(engine.per_sequence(toy, 10.0)["kv_bytes_per_seq"]) == 2 * 2 * 4 * 2 * 10 * 3 == 960
    assert f(engine.per_sequence(toy, 10.0, Precision(kv="fp8"))["kv_bytes_per_seq"]) == 480  # k = 1
    assert engine.kv_growth_per_token(toy) == 96


def test_memory_is_weights_plus_B_kv_plus_the_residual_stream_and_the_largest_ops_activations():
    """derivations "KV cache and memory": memory = weights + B*KV + peak activations (M*D*a + the largest
    op's activation inputs and outputs)."""
    r = engine.evaluate(toy, HW, 2, 10)
    # largest op activations: mlp_act reads 2*M*F*a = 192 and writes M*F*a = 96 (288); residual M*D*a = 64
    assert r["activation_bytes"][0, 0] == 288 + 64
    assert r["memory_bytes"][0, 0] == 14944 + 2 * 960 + 352 == 17216


def test_fits_means_memory_within_the_datasheet_capacity_inclusive():
    """derivations "KV cache and memory": fits is memory <= capacity; not fitting is a result."""
    assert engine.evaluate(toy, HW.replace(memory_capacity=17216.0), 2, 10)["fits"][0, 0]
    assert not engine.evaluate(toy, HW.replace(memory_capacity=17215.0), 2, 10)["fits"][0, 0]


def test_gqa_and_mqa_store_2_K_H_k_per_token_per_layer():
    """derivations "KV cache and memory" table: MHA / GQA / MQA store 2*K*H*k per token per layer."""
    for K in (4, 2, 1):  # MHA, GQA, MQA
        assert engine.kv_growth_per_token(toy_model(n_kv_heads=K)) == 2 * K * 4 * 2 * 3


MLA = dict(kv_lora_rank=8, rope_dim=2, nope_dim=3, v_head_dim=5)
mla = toy_model(mla=MLA)


def test_mla_stores_the_latent_and_the_rope_key_per_token_per_layer():
    """derivations "KV cache and memory": MLA stores (r + d_r)*k per token per layer."""
    assert engine.kv_growth_per_token(mla) == (8 + 2) * 2 * 3
    assert f(engine.per_sequence(mla, 10.0)["kv_bytes_per_seq"]) == 10 * 2 * 10 * 3


def test_mla_decode_runs_absorbed_attention_over_the_latent():
    """derivations "MLA": mla_q_absorb 2*M*N*d_nope*r; scores 2*B*P*N*(r + d_r); values 2*B*P*N*r, the
    latent read once; mla_v_up 2*M*N*r*d_v."""
    ops = ops_of(mla)
    assert f(one(ops, "q_proj").flops) == 2 * 2 * 16 * 4 * (3 + 2)
    kva = one(ops, "kv_a_proj")
    assert f(kva.flops) == 2 * 2 * 16 * 10 and f(kva.kv_write) == 2 * 10 * 2  # M rows of r + d_r into the cache
    assert f(one(ops, "rope").flops) == 3 * 2 * (4 + 1) * 2  # N query heads and the one shared key, d_r wide
    assert f(one(ops, "mla_q_absorb").flops) == 2 * 2 * 4 * 3 * 8 == 384
    qk, av = one(ops, "attn_qk"), one(ops, "attn_av")
    assert f(qk.flops) == 2 * 2 * 10 * 4 * (8 + 2) == 1600
    assert f(av.flops) == 2 * 2 * 10 * 4 * 8 == 1280
    assert f(qk.kv_read) == 2 * 10 * 10 * 2 and f(av.kv_read) == 0  # B*S*(r + d_r)*k, once
    assert f(one(ops, "mla_v_up").flops) == 2 * 2 * 4 * 8 * 5 == 640
    assert f(one(ops, "o_proj").flops) == 2 * 2 * 4 * 5 * 16


def test_mla_prefill_materialises_per_head_k_v_and_owns_the_same_parameters():
    """derivations "MLA": prefill runs mla_kv_up and ordinary attention of width d_nope + d_r; both phases
    own the same parameters."""
    ops = ops_of(mla, B=2, T=6, S=6, phase="prefill")
    up = one(ops, "mla_kv_up")
    assert f(up.flops) == 2 * (2 * 6) * 8 * 4 * (3 + 5)  # B*S rows, r -> N*(d_nope + d_v)
    assert f(one(ops, "attn_qk").flops) == 2 * 2 * 21 * 4 * (3 + 2)
    assert f(one(ops, "attn_av").flops) == 2 * 2 * 21 * 4 * 5
    dec = ops_of(mla)
    assert sum(o.params * o.count for o in ops) == sum(o.params * o.count for o in dec)
    # the materialised K (d_nope + d_r wide) and V (d_v wide) of every head are activations, not cache reads
    qk, av = one(ops, "attn_qk"), one(ops, "attn_av")
    assert f(qk.kv_read) == f(av.kv_read) == 0
    assert f(qk.act_read) == 12 * 4 * 5 * 2 + 2 * 6 * 4 * (3 + 2) * 2  # Q: M*N*(d_nope+d_r)*a; K: B*S*N*(...)*a
    assert f(av.act_read) == 2 * 6 * 4 * 5 * 2  # V: B*S*N*d_v*a
    assert f(up.act_read) == 2 * 6 * 8 * 2 + 2 * 6 * 2 * 2  # the latent (r) and the shared RoPE key (d_r)


def test_cla_layers_that_share_kv_have_no_k_v_projections_store_nothing_and_still_read_the_cache():
    """derivations "CLA": 1 of every c layers owns a KV; the others read the shared cache."""
    cla = toy_model(n_layers=4, kv_share=2)
    assert engine.kv_growth_per_token(cla) == 2 * 2 * 4 * 2 * 2  # 2 of 4 layers
    ops = ops_of(cla)
    qkv = [o for o in ops if o.name == "qkv_proj"]
    assert sorted(o.params for o in qkv) == [16 * 4 * 4, 16 * 8 * 4]  # q only; q, k, v
    assert sum(f(o.kv_read) * o.count for o in ops if o.name == "attn_qk") == 4 * 2 * 10 * 2 * 4 * 2


def test_a_sliding_window_layer_keeps_at_most_W_tokens():
    """derivations "KV cache and memory": sliding window: 2*K*H*k, at most W tokens."""
    swa = toy_model(sliding_window=4, layer_pattern="L")
    assert f(engine.per_sequence(swa, 3.0)["kv_bytes_per_seq"]) == 32 * 3 * 3  # 32 B per token per layer
    assert f(engine.per_sequence(swa, 10.0)["kv_bytes_per_seq"]) == 32 * 4 * 3


def test_a_hybrid_keeps_the_full_context_in_global_layers_and_W_in_local_ones():
    """derivations "KV cache and memory": hybrid: full in G layers, W in L layers."""
    hyb = toy_model(n_layers=4, sliding_window=4, layer_pattern="LLLG")
    assert f(engine.per_sequence(hyb, 10.0)["kv_bytes_per_seq"]) == 3 * 32 * 4 + 1 * 32 * 10 == 704


def test_linear_attention_keeps_a_fixed_state_read_and_written_once_per_step():
    """derivations "Linear attention": a state of K*H*H elements per sequence, read and written once per
    step; update and read-out cost 2*M*state*(1 + N/K) FLOPs."""
    lin = toy_model(layer_pattern="R")
    la = one(ops_of(lin), "linear_attn")
    state = 2 * 4 * 4  # K*H*H = 32 elements
    assert f(la.flops) == 2 * 2 * state * (1 + 2) == 384
    assert f(la.kv_read) == f(la.kv_write) == 2 * state * 2  # B * state * k
    assert f(la.act_read) == 2 * (4 + 2 * 2) * 4 * 2 and f(la.act_write) == 2 * 4 * 4 * 2  # q, k, v in; out
    q = one(ops_of(lin), "qkv_proj")  # the same D x (N + 2K)H projection, but K, V feed the state, not a cache
    assert q.params == 16 * (4 + 2 * 2) * 4 and f(q.kv_write) == 0 and f(q.kv_stored) == 0
    assert f(q.act_write) == 2 * (4 + 2 * 2) * 4 * 2
    assert f(engine.per_sequence(lin, 10.0)["kv_bytes_per_seq"]) == f(engine.per_sequence(lin, 1e5)["kv_bytes_per_seq"]) \
        == state * 2 * 3
    assert f(one(ops_of(toy_model(layer_pattern="R", linear_state=100)), "linear_attn").kv_read) == 2 * 100 * 2


def test_learned_positions_add_a_table_of_max_context_rows_of_which_a_step_reads_M():
    """derivations "Ops of one layer" (GPT): pos_embed stores max_context x D, reads M rows, adds M*D."""
    pe = one(ops_of(toy_model(position="learned")), "pos_embed")
    assert pe.params == 4096 * 16 and f(pe.w_stored) == 4096 * 16 * 2
    assert f(pe.w_read) == 2 * 16 * 2 and f(pe.flops) == 2 * 16 and f(pe.act_read) == f(pe.act_write) == 64
    assert "rope" not in {o.name for o in ops_of(toy_model(position="learned"))}


def test_a_uniform_model_has_one_unlabelled_layer_group_and_a_hybrid_one_per_kind():
    """derivations "Ops of one layer": per-layer ops count L layers; layers of different kinds are grouped."""
    assert {o.group for o in DEC} == {""} and one(DEC, "attn_qk").label == "attn_qk"
    hyb = ops_of(toy_model(n_layers=4, sliding_window=4, layer_pattern="LLLG"))
    assert sorted({(o.group, o.count) for o in hyb if o.name == "attn_qk"}) == [("global x1", 1), ("local x3", 3)]


# ---------------------------------------------------------------- MoE
MOE = dict(n_experts=4, n_active=2, d_ff_expert=6, n_shared=1, first_dense_layers=1)
moe = toy_model(moe=MOE)


def test_the_router_is_a_D_by_E_matmul_plus_its_bias():
    """derivations "MoE": the router is a D x E matmul (plus E bias parameters where the model has them)."""
    r = one(ops_of(moe), "router")
    assert f(r.flops) == 2 * 2 * 16 * 4 and r.params == 16 * 4
    assert one(ops_of(toy_model(moe={**MOE, "router_bias": True})), "router").params == 16 * 4 + 4


def test_each_token_runs_k_of_E_experts_and_reads_the_experts_any_token_routes_to():
    """derivations "MoE": expert FLOPs 2*M*k*D*F_e per matrix; weights read E*(1 - (1 - k/E)^M) experts'
    worth; memory stores all E."""
    up, down = one(ops_of(moe), "expert_up_gate"), one(ops_of(moe), "expert_down")
    assert f(up.flops) == 2 * 2 * 2 * 16 * 6 * 2  # M*k token-expert rows, 2 matrices (up, gate)
    assert f(down.flops) == 2 * 2 * 2 * 6 * 16
    per_expert = 6 * 16 * 2  # one F_e x D matrix in bf16
    touched = 4 * (1 - (1 - 2 / 4) ** 2)  # M = 2 tokens reach 3 experts in expectation
    assert touched == 3
    assert f(down.w_read) == pytest.approx(touched * per_expert) and f(down.w_stored) == 4 * per_expert
    assert down.params == 4 * 6 * 16 and down.count == 2  # layers 1 and 2; layer 0 is dense
    one_tok = one(ops_of(moe, B=1), "expert_down")
    assert f(one_tok.w_read) == pytest.approx(2 * per_expert)  # k/E of the experts for one token


def test_shared_experts_run_for_every_token_and_the_first_layers_have_a_dense_mlp():
    """derivations "MoE": shared experts are a dense MLP of width n_shared*F_e; the first
    first_dense_layers layers have a dense MLP of width d_ff."""
    ops = ops_of(moe)
    sh = one(ops, "shared_expert_down")
    assert f(sh.flops) == 2 * 2 * 6 * 16 and sh.count == 2
    dense = one(ops, "mlp_down")
    assert dense.count == 1 and f(dense.flops) == 2 * 2 * 24 * 16


# ---------------------------------------------------------------- Formats
def test_int8_stores_one_fp16_scale_per_output_channel():
    """derivations "Formats": int8 has one fp16 scale per output channel."""
    d = one(ops_of(prec=Precision("int8")), "mlp_down")  # F x D = 24 x 16: 16 output channels
    assert f(d.w_stored) == 24 * 16 * 1 + 16 * 2


def test_int4_with_groups_of_G_costs_4_plus_16_over_G_bits_and_embeddings_stay_bf16():
    """derivations "Formats": int4-gG stores 4 + 16/G bits (4.125 at G = 128); below 16 bits the embeddings,
    LM head, norms and biases stay bf16 unless quantize_embeddings."""
    assert get_format("int4-g128").bits_per_element() == 4.125 and get_format("int4-g32").bits_per_element() == 4.5
    ops = ops_of(prec=Precision("int4-g32"))
    assert f(one(ops, "mlp_down").w_stored) == 24 * 16 * 4.5 / 8  # 384 weights at 4.5 bits
    assert f(one(ops, "embed").w_stored) == 50 * 16 * 2 and f(one(ops, "lm_head").w_stored) == 50 * 16 * 2
    assert f(one(ops, "attn_norm").w_stored) == 16 * 2
    q = ops_of(prec=Precision("int4-g32", quantize_embeddings=True))
    assert f(one(q, "embed").w_stored) == 50 * 16 * 4.5 / 8


def test_every_format_counts_its_scales_in_its_bits_per_weight():
    """derivations "Formats" (perfmodel/formats.py's sources): bits per stored weight, scales included."""
    bits = {"int4-g32-zp": 4 + 32 / 32, "int4-g64": 4 + 16 / 64, "int8-g32": 8 + 16 / 32, "mxfp4": 4 + 8 / 32,
            "nvfp4": 4 + 8 / 16, "mxfp6": 6 + 8 / 32, "nf4": 4 + 32 / 64, "nf4-dq": 4 + 8 / 64 + 32 / (64 * 256),
            "fp8": 8, "bf16": 16, "fp32": 32, "fp8-b128": 8 + 32 / (128 * 128)}
    for name, b in bits.items():
        assert get_format(name).bits_per_element() == pytest.approx(b, rel=1e-12), name
    assert get_format("int8").bits_per_element(row=16) == 8 + 16 / 16  # one 16-bit scale per row of 16
    # nvfp4 also stores one fp32 scale per tensor: 4 bytes per matrix on top of 4.5 bits per weight
    assert get_format("nvfp4").matrix_bytes(1024) == 1024 * 4.5 / 8 + 4
    assert get_format("mxfp4").matrix_bytes(1024) == 1024 * 4.25 / 8


@pytest.mark.parametrize("name", ["int4-g0", "int8-g0", "int4-g0-zp", "int3", "int4-gx"])
def test_a_format_is_refused_unless_it_is_a_known_layout_with_a_positive_group(name):
    """derivations "Formats": a group of G weights shares a scale, so G must be a positive whole number."""
    with pytest.raises(ValueError):
        get_format(name)


# ---------------------------------------------------------------- Pipelines in the simple mode
def test_simple_mode_on_a_pipeline_streams_each_stage_in_turn():
    """derivations "The roofline" (simple) with pp stages: a token passes the stages one after another, each
    streaming its own weights and KV: pp x (the largest stage's weights + B * its KV) / bandwidth."""
    # pp = 3 on the 3-layer toy: the largest stage holds one layer (1952 params), the embedding (800), the
    # final norm (16) and the LM head (800): 3568 params = 7136 bytes; KV of one layer at S = 10: 320 bytes
    r = engine.evaluate(toy, HW, 2, 10, mode="simple", layout=pm.Layout(pp=3))
    assert r["weight_bytes"][0, 0] == 7136 and r["kv_cache_bytes"][0, 0] == 2 * 320
    assert r["latency_s"][0, 0] == pytest.approx(3 * (7136 + 2 * 320) / 1e12, rel=1e-12)
    assert r["bound"][0, 0] == "memory"  # a decode step streams: memory-bound at any pp (it said compute at pp > 1)
    two = engine.evaluate(toy, HW, 2, 10, mode="simple", layout=pm.Layout(pp=2))
    assert two["latency_s"][0, 0] == pytest.approx(2 * (two["weight_bytes"][0, 0] + two["kv_cache_bytes"][0, 0]) / 1e12,
                                                   rel=1e-12)
    assert two["bound"][0, 0] == "memory"


# ---------------------------------------------------------------- Requests
def test_a_request_is_a_prefill_then_one_decode_step_per_generated_token():
    """derivations "Requests": prefill(P) + sum_{g=0}^{G-1} decode(S = P + g); throughput B*G / total;
    memory the larger of the prefill peak and the last decode step."""
    # simple mode on the toy: decode(S) = (14944 + 2 * 96 * S) / 1e12 and prefill(6) = (14944 + 2 * 576) / 1e12
    r = engine.request(toy, HW, 2, 6, 3, mode="simple")
    pre = (14944 + 2 * 576) / 1e12
    dec = sum((14944 + 2 * 96 * s) / 1e12 for s in (6, 7, 8))
    assert r["ttft_s"][0, 0] == pytest.approx(pre, rel=1e-12)
    assert r["latency_s"][0, 0] == pytest.approx(pre + dec, rel=1e-12)
    assert r["throughput_tok_s"][0, 0] == pytest.approx(2 * 3 / (pre + dec), rel=1e-12)
    last = engine.evaluate(toy, HW, 2, 8, mode="simple")["memory_bytes"][0, 0]  # the step at S = P + G - 1
    first = engine.evaluate(toy, HW, 2, 6, "prefill", mode="simple")["memory_bytes"][0, 0]
    assert r["memory_bytes"][0, 0] == max(first, last)


def test_a_long_generation_needs_the_memory_of_its_last_decode_step():
    """derivations "Requests": memory is the larger of the prefill peak and the last decode step, which holds
    the whole context P + G - 1: here 2 sequences of 1 + 39 tokens, 96 bytes of KV each per token."""
    r = engine.request(toy, HW, 2, 1, 40, mode="simple")
    assert r["memory_bytes"][0, 0] == 14944 + 2 * 96 * 40 + 352  # weights + KV + the decode activations
    assert r["kv_cache_bytes"][0, 0] == 2 * 96 * 40


# ---------------------------------------------------------------- Achievable time
def _achievable(**kw):
    base = dict(mode="achievable", hbm=0.5, gemm={"bf16": 0.8, "fp8": 0.8}, gemm_latency=2e-6,
                kernel_latency=1e-6, attn_compute={"bf16": 0.5}, attn_half_keys=100.0, attn_bandwidth=0.25,
                attn_latency=3e-6)
    return dataclasses.replace(TimeModel.roofline(), **{**base, **kw})


def test_an_achievable_matmul_divides_by_the_gemm_and_hbm_efficiencies_and_adds_the_gemm_latency():
    """derivations "Achievable time": matmul compute FLOPs / (P*e_gemm*e_shape*e_dq,c), memory
    bytes / (BW*e_hbm*e_dq,bw), fixed k*gemm_latency."""
    op = Op("mlp_down", "", 1, MATMUL, flops=1e9, act_read=1e6)
    ((tc, tm, t, b, host, step),) = _achievable().price([op], HW, Precision())
    assert tc == pytest.approx(1e9 / (1e14 * 0.8)) and tm == pytest.approx(1e6 / (1e12 * 0.5))
    assert t == pytest.approx(max(1.25e-5, 2e-6) + 2e-6) and b == 1e6
    # a weight-only int4 matmul also pays the dequantizing kernel's measured efficiencies
    q = Op("mlp_down", "", 1, MATMUL, flops=1e9, w_read=1e6, wfmt="int4-g128")
    ((tc, tm, *_),) = _achievable(dequant={"int4": Dequant(0.5, 0.25)}).price([q], HW, Precision("int4"))
    assert tc == pytest.approx(1e9 / (1e14 * 0.8 * 0.25)) and tm == pytest.approx(1e6 / (1e12 * 0.5 * 0.5))


def test_achievable_attention_loses_compute_rate_on_short_key_ranges():
    """derivations "Achievable time": attention compute FLOPs / (P*e_attn*S_k/(S_k + S_1/2)), memory
    bytes / (BW*e_attn,bw), fixed k*attention_latency."""
    op = Op("attn_qk", "", 1, ATTENTION, flops=1e9, kv_read=1e6)
    op.keys = 300.0  # 300 / (300 + 100) = 0.75 of the long-sequence rate
    ((tc, tm, t, *_),) = _achievable().price([op], HW, Precision())
    assert tc == pytest.approx(1e9 / (1e14 * 0.5 * 0.75)) and tm == pytest.approx(1e6 / (1e12 * 0.25))
    assert t == pytest.approx(max(tc, tm) + 3e-6)


def test_achievable_elementwise_ops_run_at_the_fp32_rate_and_pay_the_kernel_latency():
    """derivations "Achievable time": elementwise compute FLOPs / fp32 peak, memory bytes / (BW*e_hbm),
    fixed k*kernel_latency; an op fused into another's kernel (k = 0) pays no latency."""
    op = Op("mlp_act", "", 1, VECTOR, flops=1e6, act_read=1e6)
    ((tc, tm, t, *_),) = _achievable().price([op], HW, Precision())
    assert tc == pytest.approx(1e6 / 1e13) and tm == pytest.approx(1e6 / (1e12 * 0.5)) and t == pytest.approx(3e-6)
    ((*_, t0, _b, _h, _s),) = _achievable(kernels={"mlp_act": 0}).price([op], HW, Precision())
    assert t0 == pytest.approx(2e-6)


def test_an_achievable_step_is_the_slower_of_device_and_host_plus_the_step_overhead():
    """derivations "Achievable time": host time k*launch (+ a per-layer term); step = max(sum device,
    sum host) + step_overhead."""
    ops = [Op("embed", "", 1, VECTOR, act_read=1e6), Op("attn_norm", "", 4, VECTOR, act_read=1e6)]
    # device: 5 op instances x (1e6 / 5e11 + 1e-6) = 15e-6 s
    fast = engine.roofline(ops, HW, Precision(), tm=_achievable(launch=1e-6, step_overhead=7e-6))
    assert fast["device_time"] == pytest.approx(15e-6) and fast["host_time"] == pytest.approx(5e-6)
    assert fast["time"] == pytest.approx(15e-6 + 7e-6)
    # eager: 5 launches of 4e-6 s and 2e-6 s per layer on the host outrun the device
    slow = engine.roofline(ops, HW, Precision(), tm=_achievable(launch=4e-6, layer_overhead=2e-6, step_overhead=7e-6))
    assert slow["host_time"] == pytest.approx(5 * 4e-6 + 4 * 2e-6)
    assert slow["time"] == pytest.approx(28e-6 + 7e-6)


# ---------------------------------------------------------------- Collectives (docs/parallelism.md)
def _comm(ops):
    return {o.name: (o.count, o.coll, f(o.msg), o.peers, f(o.comm_bytes), o.comm_steps, o.link)
            for o in ops if o.kind == "comm"}


def test_tensor_parallelism_all_reduces_the_residual_stream_twice_per_layer_and_gathers_the_logits():
    """derivations "Collectives" / parallelism.md: under tp = p, an all-reduce of the M*D*a activations after
    the embedding and after attention and the MLP of every layer (a ring moves 2(p-1)/p of it in 2(p-1)
    steps), and an all-gather of the R*V*a logits ((p-1)/p in p-1 steps)."""
    c = _comm(ops_of(layout=pm.Layout(tp=2)))
    assert c["allreduce_embed"] == (1, "allreduce", 64, 2, 64, 2, "tp")  # M*D*a = 2*16*2 bytes
    assert c["allreduce_attn"] == (3, "allreduce", 64, 2, 64, 2, "tp")
    assert c["allreduce_mlp"] == (3, "allreduce", 64, 2, 64, 2, "tp")
    assert c["allgather_logits"] == (1, "allgather", 2 * 50 * 2, 2, 100, 1, "tp")  # R*V*a, decode R = M
    assert _comm(ops_of(mla, layout=pm.Layout(tp=2)))["allreduce_attn"] == (3, "allreduce", 64, 2, 64, 2, "tp")
    assert _comm(ops_of()) == {}


def test_expert_parallelism_dispatches_and_combines_k_copies_of_each_local_token():
    """parallelism.md: under ep, each MoE layer's M*k*D token-expert activations go out in the GEMM format
    (fp8 for W8A8) and come back 16-bit, (ep-1)/ep of them to other devices, in ep-1 steps; each device
    holds ceil(B/ep) whole sequences, so M = 1 here (B = 2, ep = 2)."""
    c = _comm(ops_of(moe, layout=pm.Layout(ep=2)))
    assert c["alltoall_dispatch"] == (2, "alltoall", 1 * 2 * 16 * 2, 2, 32, 1, "ep")
    assert c["alltoall_combine"] == (2, "alltoall", 1 * 2 * 16 * 2, 2, 32, 1, "ep")
    w8a8 = _comm(ops_of(moe, layout=pm.Layout(ep=2), prec=Precision("fp8", "fp8")))
    assert w8a8["alltoall_dispatch"][2] == 1 * 2 * 16 * 1 and w8a8["alltoall_combine"][2] == 1 * 2 * 16 * 2


def test_a_pipeline_hands_each_stages_activations_to_the_next():
    """parallelism.md: pp stages send the B*T*D*a activations on, pp - 1 times along a token's path, once
    from the largest stage."""
    path = _comm(ops_of(layout=pm.Layout(pp=3)))
    assert path["pp_send"] == (2, "send", 2 * 16 * 2, 2, 64, 1, "pp")
    stage = _comm(build_ops(toy, 2, 1, 10, "decode", layout=pm.Layout(pp=3), stage=True))
    assert stage["pp_send"][0] == 1
    fp32 = _comm(ops_of(layout=pm.Layout(pp=3), prec=Precision("fp32", "fp32", "bf16")))  # fp32 activations
    assert fp32["pp_send"][2] == 2 * 16 * 4
    # what is handed on is the activations' width (at least 16 bits), whatever the weights are stored in
    assert _comm(ops_of(layout=pm.Layout(pp=3), prec=Precision("bf16", "fp32", "bf16")))["pp_send"][2] == 2 * 16 * 4
    assert _comm(ops_of(layout=pm.Layout(pp=3), prec=Precision("fp32", "bf16", "bf16")))["pp_send"][2] == 2 * 16 * 2
    # two stages hand on once; one stage hands on nothing
    assert _comm(ops_of(layout=pm.Layout(pp=2)))["pp_send"] == (1, "send", 2 * 16 * 2, 2, 64, 1, "pp")
    assert "pp_send" not in _comm(ops_of(layout=pm.Layout(pp=1)))
    # fp8 activations are handed on in 16 bits; a prefill hands on all T tokens of each sequence
    assert _comm(ops_of(layout=pm.Layout(pp=3), prec=Precision("fp8", "fp8")))["pp_send"][2] == 2 * 16 * 2
    assert _comm(ops_of(T=5, S=5, phase="prefill", layout=pm.Layout(pp=3)))["pp_send"][2] == 2 * 5 * 16 * 2
    # under attention data parallelism a device holds ceil(B / ep) of the sequences: 3 over 2 groups -> 2
    assert _comm(ops_of(moe, B=3, layout=pm.Layout(pp=3, ep=2)))["pp_send"][2] == 2 * 16 * 2


# ---------------------------------------------------------------- Calibrated terms
def test_the_kernel_overhead_is_added_once_to_every_op_instance():
    """derivations "Calibrated and multi-device terms": kernel_overhead is added once to every op instance."""
    # toy decode: embed + 3 layers x 12 ops + final_norm + lm_head = 39 op instances
    assert sum(o.count for o in DEC) == 39
    t0 = engine.evaluate(toy, HW, 2, 10)["latency_s"][0, 0]
    t1 = engine.evaluate(toy, HW.replace(kernel_overhead=1e-6), 2, 10)["latency_s"][0, 0]
    assert t1 - t0 == pytest.approx(39e-6, rel=1e-9)


def test_gemm_weight_passes_add_their_extra_reads_of_the_weights_of_a_multi_row_product():
    """derivations "Calibrated terms": gemm_weight_passes adds (passes - 1) x the weight bytes / bandwidth
    after max(compute, memory), for products of more than one row."""
    packs = HW.replace(gemm_weight_passes=3.0)
    two = one(DEC, "mlp_down")  # rows = M = 2, 768 weight bytes
    (_, _, t_plain), = engine.op_times([two], HW, Precision())
    (_, _, t_pack), = engine.op_times([two], packs, Precision())
    assert t_pack - t_plain == pytest.approx(2 * 768 / 1e12, rel=1e-9)
    single = one(ops_of(B=1), "mlp_down")  # one row: nothing to pack
    assert engine.op_times([single], packs, Precision()) == engine.op_times([single], HW, Precision())


def test_attention_kv_passes_reread_the_cache_when_query_rows_share_a_kv_head():
    """derivations "Calibrated terms": attention_kv_passes adds (passes - 1) x the K/V read / bandwidth when
    T*N/K > 1; a spec without it pays gemm_weight_passes."""
    qk = one(DEC, "attn_qk")  # N/K = 2 query rows per KV head, 320 bytes of K
    (_, _, t0), = engine.op_times([qk], HW, Precision())
    (_, _, t1), = engine.op_times([qk], HW.replace(attention_kv_passes=2.0), Precision())
    (_, _, t2), = engine.op_times([qk], HW.replace(gemm_weight_passes=4.0), Precision())
    assert t1 - t0 == pytest.approx(320 / 1e12, rel=1e-9) and t2 - t0 == pytest.approx(3 * 320 / 1e12, rel=1e-9)
    mha = one(ops_of(toy_model(n_kv_heads=4)), "attn_qk")  # one query row per KV head in decode
    assert engine.op_times([mha], HW.replace(attention_kv_passes=2.0), Precision()) == \
        engine.op_times([mha], HW, Precision())


def test_a_cla_layer_that_reads_a_shared_kv_norms_only_its_queries():
    """derivations "CLA" with Qwen3's q/k RMSNorm: a layer owning its K, V has a q_norm and a k_norm (H weights
    each) over (N + K) heads; a layer reading the shared cache computes no k, so only q_norm, over N heads."""
    cla = toy_model(n_layers=4, kv_share=2, qk_norm="rmsnorm")
    norms = sorted((o.params, f(o.flops)) for o in ops_of(cla, B=1) if o.name == "qk_norm")
    N, K, H = cla.n_heads, cla.n_kv_heads, cla.head_dim
    assert norms == [(H, 4 * N * H), (2 * H, 4 * (N + K) * H)]


def test_the_query_rows_that_share_one_streamed_k_v_head():
    """What a kernel can reuse per K/V head read (Op.rows: packing and tiling): T x N/K query rows under GQA;
    MLA's decode, attending the latent cache once for all N heads, T x N; MLA's prefill, with K and V
    decompressed per head, T."""
    for T, phase in ((1, "decode"), (5, "prefill")):
        qk = one(ops_of(toy, B=2, T=T, S=10, phase=phase), "attn_qk")
        assert f(qk.rows) == T * toy.n_heads / toy.n_kv_heads
    mla = pm.load_model("deepseek-v2-lite")
    assert f(one(build_ops(mla, 2, 1, 64, "decode"), "attn_qk").rows) == 1 * mla.n_heads
    assert f(one(build_ops(mla, 2, 8, 64, "prefill"), "attn_av").rows) == 8
