"""What-if optimizations (quantization, KV variants, speculative decoding, attention kernels,
generation without a cache), all derived from the op list."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import perfmodel as pm
from perfmodel import engine, load_hardware, load_model, whatif
from perfmodel.cli import main
from perfmodel.formats import get_format
from perfmodel.ops import Precision

alphas = st.floats(0, 1)
gammas = st.integers(1, 32)
costs = st.floats(0, 2)


# ---- speculative decoding (Leviathan et al. 2023; BRIEF "Speculative decoding")
@given(alphas, gammas)
def test_expected_tokens_lie_between_1_and_gamma_plus_1(a, g):
    e = float(whatif.expected_tokens(a, g))
    assert 1 - 1e-12 <= e <= g + 1 + 1e-12


@given(gammas, costs)
def test_at_alpha_1_the_speedup_is_gamma_plus_1_over_gamma_c_plus_1(g, c):
    assert float(whatif.speedup(1.0, g, c)) == pytest.approx((g + 1) / (g * c + 1))


@given(gammas, costs)
def test_at_alpha_0_the_speedup_is_1_over_gamma_c_plus_1(g, c):
    assert float(whatif.speedup(0.0, g, c)) == pytest.approx(1 / (g * c + 1))


def test_expected_tokens_match_the_closed_form_sum():
    # E = sum_{i=0}^{gamma} alpha^i: 1 + 0.8 + 0.64 + 0.512 = 2.952 for alpha 0.8, gamma 3
    assert float(whatif.expected_tokens(0.8, 3)) == pytest.approx(2.952)


def test_speculation_can_be_slower_than_plain_decoding():
    t = whatif.speculative(alpha=[0.3], gamma=[1, 4, 8], draft_cost=[0.5])
    assert t["slower"].all()
    t = whatif.speculative(alpha=[0.9], gamma=[1, 4, 8], draft_cost=[0.02])
    assert not t["slower"].any()


def test_best_gamma_is_3_or_4_for_moderate_acceptance_and_a_draft_a_tenth_the_cost():
    g, s = whatif.best_gamma(0.7, 0.1)
    assert g in (3, 4) and s > 1


def test_at_large_batch_verification_is_no_longer_free_and_the_roofline_says_so():
    small = whatif.speculative(alpha=[0.8], gamma=[4], draft="llama-2-7b", target="llama-2-70b", batch=1)
    big = whatif.speculative(alpha=[0.8], gamma=[4], draft="llama-2-7b", target="llama-2-70b", batch=256)
    assert small["verify_cost"][0] == pytest.approx(1, abs=0.01)  # 5 tokens cost one memory-bound step
    assert big["verify_cost"][0] > 2  # the matmuls are compute-bound: 5 tokens cost several steps
    assert big["speedup"][0] < small["speedup"][0]
    assert 0 < small["draft_cost"][0] < 0.2  # 7B vs 70B


def test_the_target_s_own_mtp_layer_drafts_at_the_cost_of_one_layer_its_projection_and_the_head():
    """draft="mtp": c = (eh_proj + one decoder layer of the target's shape + embedding and LM head) / the target's
    step. For DeepSeek-R1 (61 layers) at batch 1 that is a few percent of a step; MoE verification at T = 4 reads
    up to 4x the experts of one token, which the roofline charges (verify_cost > 1), unlike a dense target."""
    from perfmodel import engine
    from perfmodel.ops import Precision, build_ops
    from perfmodel.serving.speculative import eh_proj, mtp_module

    t = whatif.speculative(alpha=[0.92], gamma=[1, 3], draft="mtp", target="deepseek-r1", hardware="h200", batch=1)
    m, hw, prec = load_model("deepseek-r1"), load_hardware("h200"), Precision()
    plain = engine.roofline(build_ops(m, 1.0, 1.0, 1024.0, "decode", prec), hw, prec)["time"]
    draft = engine.roofline([eh_proj(m, 1.0)] + build_ops(mtp_module(m), 1.0, 1.0, 1024.0, "decode", prec),
                            hw, prec)["time"]
    assert list(t["draft"]) == ["mtp", "mtp"] and t["draft_cost"][0] == pytest.approx(draft / plain, rel=1e-12)
    assert 0.01 < t["draft_cost"][0] < 0.1
    assert t["verify_cost"][1] > 1.5 and t["expected_tokens"][0] == pytest.approx(1.92)
    with pytest.raises(pm.SpecError, match="both"):
        whatif.speculative(draft="mtp")


# ---- formats
@pytest.mark.parametrize("name, bits", [("int4-g128", 4.125), ("int4-g32", 4.5), ("mxfp4", 4.25), ("fp4", 4.5),
                                        ("nf4", 4.5), ("fp8", 8), ("bf16", 16), ("fp32", 32)])
def test_bits_per_weight_include_the_scales(name, bits):
    assert get_format(name).bits_per_element() == bits


def test_int4_g128_is_4_125_over_8_bytes_per_weight():
    assert get_format("int4").nbytes(128 * 1000) / (128 * 1000) == 4.125 / 8


def test_nf4_double_quantization_costs_0_127_bits_of_constants_as_qlora_reports():
    # QLoRA (arXiv:2305.14314) section 3: 8/64 + 32/(64*256) = 0.127 bits per parameter
    assert get_format("nf4-dq").bits_per_element() - 4 == pytest.approx(0.127, abs=5e-4)
    assert get_format("nf4").bits_per_element() - 4 == 32 / 64


def test_int8_per_channel_scales_cost_16_bits_per_row():
    assert get_format("int8").nbytes(5120 * 13824, row=5120) == 5120 * 13824 + 13824 * 2


def test_weight_only_quantization_keeps_the_bf16_rate_and_w8a8_uses_the_8_bit_rate():
    m, hw = pm.load_model("llama-2-13b-gqa8"), pm.load_hardware("h100-sxm")
    big = 4096
    w4 = engine.evaluate(m, hw, big, 1024, prec=Precision(weights="int4"))
    bf = engine.evaluate(m, hw, big, 1024)
    f8 = engine.evaluate(m, hw, big, 1024, prec=Precision(weights="fp8", act="fp8", kv="bf16"))
    assert w4["flops"][0, 0] == bf["flops"][0, 0]
    # compute-bound: dequantizing adds no FLOP-rate gain; memory-bound (B = 1): fewer bytes, faster
    assert w4["latency_s"][0, 0] == pytest.approx(bf["latency_s"][0, 0])
    assert engine.evaluate(m, hw, 1, 1024, prec=Precision(weights="int4"))["latency_s"] < \
        engine.evaluate(m, hw, 1, 1024)["latency_s"]
    assert f8["latency_s"][0, 0] < w4["latency_s"][0, 0]  # compute-bound matmuls run at the 2x fp8 rate


def test_embeddings_stay_bf16_unless_asked():
    m = pm.load_model("llama-2-13b")
    t = whatif.weights(m, "int4")
    fm = dict(zip(t["component"], t["format"]))
    assert fm["embedding"] == "bf16" and fm["lm_head"] == "bf16" and fm["mlp"] == "int4-g128"
    t = whatif.weights(m, "int4", quantize_embeddings=True)
    assert dict(zip(t["component"], t["format"]))["embedding"] == "int4-g128"


def test_weight_breakdown_adds_up_to_the_parameter_count_and_weight_bytes():
    m = pm.load_model("deepseek-v2-lite")
    t = whatif.weights(m, "int4")
    assert t["params"].sum() == pm.param_count(m)
    assert t["weight_bytes"].sum() == pytest.approx(engine.per_sequence(m, 1.0, Precision(weights="int4"))["weight_bytes"])


def test_a_format_the_device_lacks_is_refused_clearly(capsys):
    assert main(["decode", "--act-dtype", "fp4", "--weights-dtype", "fp4"]) == 2
    assert "fp4" in capsys.readouterr().err
    assert main(["decode", "-H", "b200", "--act-dtype", "fp4", "--weights-dtype", "fp4", "--batch", "1"]) == 0


# ---- comparison of KV-reduction variants
def test_compare_reports_ratios_against_the_first_model():
    t = whatif.compare("llama-2-13b,llama-2-13b-gqa8,llama-2-13b-linear", batch=[1], context=[1024, 32768])
    assert list(t["kv_ratio"][:2]) == [1, 1]
    assert t["kv_ratio"][2] == pytest.approx(0.2)
    lin = t["model"] == "llama-2-13b-linear"
    assert t["kv_bytes_per_seq"][lin][0] == t["kv_bytes_per_seq"][lin][1]  # state independent of S
    assert np.all(t["max_batch"][2:4] > t["max_batch"][:2])


def test_pruning_is_a_config_with_fewer_layers_and_compare_shows_the_saving():
    pruned = pm.load_model("llama-2-13b").replace(name="llama-2-13b-32l", n_layers=32)
    t = whatif.compare(["llama-2-13b", pruned], batch=[1], context=[1024])
    assert t["kv_ratio"][1] == pytest.approx(32 / 40) and t["latency_ratio"][1] < 0.85


# ---- attention kernels and generation without a cache
@given(st.integers(16, 65536), st.sampled_from([1, 8, 32]))
def test_fused_attention_traffic_never_exceeds_unfused(S, N):
    t = whatif.attention_kernels([S], heads=N)
    assert t["fused_hbm_bytes"][0] <= t["unfused_hbm_bytes"][0]
    assert t["fused_peak_bytes"][0] <= t["unfused_peak_bytes"][0]


def test_score_matrix_of_8192_tokens_in_fp16_is_134217728_bytes_per_head():
    assert whatif.attention_kernels([8192])["score_bytes_per_head"][0] == 134_217_728


def test_cached_generation_costs_less_and_the_ratio_grows_with_T():
    t = whatif.generation_cost("qwen2.5-0.5b", [16, 128, 1024])
    assert np.all(t["macs_cached"] <= t["macs_uncached"])
    assert np.all(np.diff(t["macs_ratio"]) > 0)
    # attention: O(T^2) with a cache, O(T^3) without
    a_c, a_u = t["attention_macs_cached"], t["attention_macs_uncached"]
    assert a_c[2] / a_c[1] == pytest.approx(64, rel=0.02)
    assert a_u[2] / a_u[1] == pytest.approx(512, rel=0.05)


@pytest.mark.parametrize("argv", [["formats"], ["weights", "--weights-dtype", "nf4"], ["compare", "--batch", "1"],
                                  ["speculative"], ["speculative", "--draft", "llama-2-7b", "--target", "llama-2-13b"],
                                  ["attention", "--seq", "1024"], ["generation-cost", "--tokens", "64"]])
def test_what_if_commands_run_and_emit_json(capsys, argv):
    import json
    assert main(argv + ["--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("argv, words", [(["speculative", "--alpha", "1.5"], "--alpha"),
                                         (["speculative", "--draft", "llama-2-7b"], "--draft"),
                                         (["weights", "--weights-dtype", "int3"], "int3"),
                                         (["attention", "--seq", "0"], "--seq"),
                                         (["generation-cost", "--tokens", "-1"], "--tokens")])
def test_what_if_bad_input(capsys, argv, words):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1
