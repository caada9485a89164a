"""Speculative decoding (DeepSeek's MTP) on a serving worker: the iteration's op list, the tokens a step emits, the
decode cost it scales, and the serving validation's recipe rows that ran it."""
import math

import numpy as np
import pytest

from perfmodel import engine, kernels, load_hardware, load_model
from perfmodel.errors import SpecError
from perfmodel.ops import Layout, Precision, build_ops
from perfmodel.serving import silicon
from perfmodel.serving.silicon_plan import _drafts
from perfmodel.serving.slo import Instance
from perfmodel.serving.speculative import SpecCost, eh_proj, expected_tokens, iteration_ops, mtp_module

KINDS = ["llama-2-13b", "llama-3.1-8b", "deepseek-v3", "qwen3-30b-a3b", "gemma-3-27b", "gpt-oss-20b",
         "qwen3.5-397b-a17b", "mixtral-8x7b"]  # MHA, GQA, MLA + MoE, MoE, windows, sinks, linear hybrid, MoE
H200 = load_hardware("h200")
needs_aic = pytest.mark.skipif(kernels.aic_dir() is None, reason="the kernels extra (aiconfigurator-core) is not installed")


@pytest.mark.parametrize("accept, E", [((0.8,), 1.8), ((0.5, 0.5), 1.75), ((1.0, 1.0, 1.0), 4.0),
                                       ((0.0, 1.0, 1.0), 1.0), ((0.9, 0.5, 0.2), 1 + 0.9 + 0.45 + 0.09)])
def test_a_step_emits_one_token_plus_the_accepted_prefix_of_its_drafts(accept, E):
    """E = 1 + p1 + p1 p2 + p1 p2 p3: a draft counts only if every draft before it was accepted."""
    assert expected_tokens(accept) == pytest.approx(E, rel=1e-15)


@pytest.mark.parametrize("bad", [(), (1.2,), (-0.1, 0.5), (0.5, float("nan"))])
def test_acceptance_rates_outside_0_1_are_refused(bad):
    with pytest.raises(SpecError, match="acceptance"):
        expected_tokens(bad)


def test_the_mtp_module_is_one_moe_layer_of_the_main_model_s_shape_with_embedding_and_head():
    m = load_model("deepseek-r1")
    mod = mtp_module(m)
    assert mod.n_layers == 1 and mod.moe.first_dense_layers == 0 and mod.moe.n_experts == m.moe.n_experts
    names = {op.name for op in build_ops(mod, 4.0, 1.0, 1024.0, "decode", Precision())}
    assert {"lm_head", "expert_up_gate", "expert_down", "attn_qk"} <= names
    p = eh_proj(m, 4.0)
    assert p.flops == 2.0 * 4 * 2 * 7168 * 7168 and p.w_read == 2 * 7168 * 7168 * 2.0  # D x 2D, 16-bit


@pytest.mark.parametrize("k", [1, 2, 3])
def test_a_speculative_iteration_is_the_main_model_over_k_plus_1_tokens_and_k_module_passes(k):
    m, prec, lay = load_model("deepseek-r1"), Precision("fp8", "fp8", "fp8"), Layout(tp=8)
    ops = iteration_ops(m, 16, k, 2048.0, prec, lay)
    main = build_ops(m, 16.0, float(k + 1), 2048.0, "decode", prec, layout=lay)
    mod = build_ops(mtp_module(m), 16.0, 1.0, 2048.0, "decode", prec, layout=lay)
    total = lambda xs, f: sum(getattr(o, f) * o.count for o in xs)  # noqa: E731
    for f in ("flops", "w_read", "kv_read"):
        want = total(main, f) + k * (total(mod, f) + getattr(eh_proj(m, 16.0), f))
        assert total(ops, f) == pytest.approx(want, rel=1e-12), f


@pytest.mark.parametrize("name", KINDS)
@pytest.mark.parametrize("k", [1, 3])
def test_a_speculative_iteration_never_costs_less_than_the_plain_step_at_the_roofline(name, k):
    """Verifying k + 1 tokens reads the same weights and cache as one and computes more; the k module passes
    add to it. At the roofline bound, for every kind of model: plain <= speculative <= (k + 1) plain + k module."""
    m, prec, lay = load_model(name), Precision(), Layout(tp=8)
    for n in (1, 16, 256):
        plain = engine.roofline(build_ops(m, float(n), 1.0, 4096.0, "decode", prec, layout=lay), H200, prec,
                                layout=lay)["time"]
        spec = engine.roofline(iteration_ops(m, n, k, 4096.0, prec, lay), H200, prec, layout=lay)["time"]
        mod = engine.roofline(build_ops(mtp_module(m), float(n), 1.0, 4096.0, "decode", prec, layout=lay), H200,
                              prec, layout=lay)["time"]
        assert plain <= spec * (1 + 1e-12)
        assert spec <= (k + 1) * plain + k * (mod + 1e-3)


@pytest.fixture(scope="module")
def worker():
    m, hw = load_model("deepseek-r1"), H200
    return Instance(m, hw, Precision("fp8", "fp8", "fp8"), Layout(tp=8), "roofline", None, 16, 8192, None, 16)


def test_spec_cost_prices_a_row_at_its_true_context_times_the_iteration_ratio(worker):
    """A prefilled row at simulated context isl + j has emitted j E tokens: it is priced at isl + ceil(j E)."""
    E = expected_tokens((0.8, 0.6, 0.4))
    c = SpecCost(worker, 3, E, 1024, 1025)
    assert c.E == pytest.approx(1 + 0.8 + 0.48 + 0.192) and c.steps() == 1 + math.ceil(1024 / E)
    S = np.array([1024 + 10, 1024 + 100, 1024 + 1])
    want = worker.cost.decode_only(np.array([1024 + math.ceil(10 * E), 1024 + math.ceil(100 * E),
                                             1024 + math.ceil(E)])) * c.ratio(3)
    assert c.decode_only(S) == pytest.approx(want, rel=1e-12)
    assert c(np.ones(3, dtype=np.int64), S) == c.decode_only(S)
    assert c.ratio(3) > 1.0


@pytest.mark.parametrize("k, tokens", [(0, 1.0), (3, 0.9), (3, 4.5), (1, float("nan"))])
def test_spec_cost_refuses_no_drafts_or_tokens_a_step_outside_1_to_k_plus_1(worker, k, tokens):
    with pytest.raises(SpecError, match="draft|emits"):
        SpecCost(worker, k, tokens, 1024, 1024)


@pytest.mark.parametrize("src, want", [
    ("recipe NVIDIA/srt-slurm@75f6e32a3cfc:recipes/trtllm/gb200-fp4/1k8k/mtp/ctx1_gen1_dep32_batch64_eplb0_mtp3.yaml", 3),
    ("recipe NVIDIA/srt-slurm@75f6e32a3cfc:recipes/trtllm/b200-fp8/1k1k/mtp/ctx1_gen2_dep8_batch768_eplb0_mtp2_1600.yaml", 2),
    ("recipe NVIDIA/srt-slurm@616191ca7e64:recipes/h100/8k1k/mtp/h100-fp8-1p1d-max-tp-mtp.yaml", None),
    ("SemiAnalysisAI/InferenceX@ee032b37f060:nvidia-master.yaml [dsr1-fp8-b200-dynamo-sglang-mtp] spec=mtp", None)])
def test_the_drafts_of_an_mtp_recipe_are_read_from_its_name_or_left_unknown(src, want):
    assert _drafts({"speculative": "mtp", "source": src}) == want
    assert _drafts({"speculative": "none", "source": src}) is None


def test_every_row_that_ran_mtp_has_its_draft_count_from_the_name_or_the_configuration():
    """318 rows ran MTP: 254 recipes say it in their name, the other 64 (SGLang's, a GB300 recipe named ..._mtp.yaml,
    GB200 runs without a recipe) from the configuration read for them (mtp_drafts.csv)."""
    from perfmodel.serving.silicon_plan import mtp_drafts, recipe_workers

    mtp = [v["mtp"] for v in recipe_workers().values() if v["speculative"] == "mtp"]
    assert len(mtp) == 318 and set(mtp) == {1, 2, 3}
    sglang = "SemiAnalysisAI/InferenceX@ee032b37f060:nvidia-master.yaml [dsr1-fp8-b200-dynamo-sglang-mtp] isl1024/osl1024"
    assert {v for k, v in mtp_drafts().items() if k.startswith(sglang)} == {2}


def test_each_draft_count_of_the_table_is_the_number_its_setting_states_with_a_file_and_line():
    import csv
    import re

    from perfmodel.serving.silicon_plan import DRAFTS, RECIPES

    ran = {r["source"] for r in csv.DictReader(open(RECIPES, encoding="utf-8")) if r["speculative"] == "mtp"}
    rows = list(csv.DictReader(open(DRAFTS, encoding="utf-8")))
    assert len(rows) == 47 and {r["source"] for r in rows} <= ran
    for r in rows:
        said = re.findall(r"(?:--speculative-num-steps |num_nextn_predict_layers: |DECODE_MTP_SIZE=)(\d+)",
                          r["engine_setting"])
        assert said and {int(x) for x in said} == {int(r["drafts"])}, r
        assert re.fullmatch(r"[\w-]+/[\w-]+@[0-9a-f]{12}:[^#]+#L\d+(-L?\d+)?", r["evidence"]), r["evidence"]


@pytest.mark.parametrize("mode", ["roofline", pytest.param("achievable", marks=needs_aic)])
def test_an_mtp_recipe_row_s_tpot_is_the_plain_one_times_the_iteration_ratio_over_the_tokens_a_step(sample_mtp, mode):
    """The recipe ctx1_gen11_..._mtp3 (13 clients, 11 decode workers of one place each): with MTP the decode worker
    emits E = 2.82 tokens an iteration that costs ratio(1) plain steps, so TPOT is the plain one x ratio(1) / E
    (to the rounding of the iterations a request needs); the transfer does not change. At the
    roofline a 4-token verification of a MoE reads ~4x the experts of one token (ratio 2.5: MTP buys little); the
    measured kernels give ratio 1.3 (TPOT 14.4 ms to 6.6 ms; measured 5.5 ms)."""
    p = sample_mtp
    assert p["speculative"] == "mtp" and p["mtp"] == 3
    pr = silicon.Predictor(mode)
    with_mtp = pr(p)
    without = silicon.Predictor(mode)({**p, "speculative": "none", "mtp": None})
    spec = next(v for k, v in pr.insts.items() if k[0] == "mtp").cost
    assert spec.E == silicon.MTP_TOKENS[3] == 2.82
    for out in (with_mtp, without):  # all 13 clients in the loop, most of them in the decode pool
        assert out["prefill_clients"] + out["decode_clients"] == pytest.approx(13, rel=1e-12)
        assert 11 < out["decode_clients"] < 13
    assert with_mtp["tpot_s"] / without["tpot_s"] == pytest.approx(spec.ratio(1) / spec.E, rel=0.01)
    assert with_mtp["transfer_s"] == without["transfer_s"]


@pytest.fixture(scope="module")
def sample_mtp():
    s = silicon.load()
    i = "2026_03_25_deepseek_r1_h200_sxm_trtllm_fp8_disagg_1024x1024_c13_tp8_0_ep8_0_354"
    return silicon.plan(s[s["id"] == i])[0]


@needs_aic
@pytest.mark.parametrize("k, speedup", [(1, 1.78), (2, 2.25), (3, 2.28)])
def test_the_iteration_cost_gives_tensorrt_llm_s_published_mtp_speedup_at_batch_1(k, speedup):
    """TensorRT-LLM tech blog 1 (DeepSeek-R1-FP4, 8 B200, batch 1, ISL/OSL 1k/2k), "Autoregressive MTP Layers":
    MTP 1, 2, 3 emit 1.92, 2.58, 2.82 tokens a step and speed TPS/user up 1.78x, 2.25x, 2.28x, so an iteration
    costs E / speedup = 1.08, 1.15, 1.24 plain steps. The op list's iteration (the main model over k + 1 tokens and
    k passes of the MTP layer, TensorRT-LLM's measured kernels) gives E / ratio within 6% of the speedup (the blog
    ran its MTP layers in bf16 and the experts as TP4 x EP2; here both are the model's nvfp4 over tp 8)."""
    from perfmodel import api

    m, hw = load_model("deepseek-r1"), load_hardware("b200")
    prec, lay = api._prec("nvfp4", "fp8", "nvfp4"), Layout(tp=8)
    tm = engine.time_model("achievable", hw, api.check_mode("achievable", "trtllm-1.3", ("achievable",)))
    plain = engine.roofline(build_ops(m, 1.0, 1.0, 2048.0, "decode", prec, layout=lay), hw, prec, layout=lay, tm=tm)
    spec = engine.roofline(iteration_ops(m, 1, k, 2048.0, prec, lay), hw, prec, layout=lay, tm=tm)
    E = silicon.MTP_TOKENS[k]
    assert E / (float(spec["time"]) / float(plain["time"])) == pytest.approx(speedup, rel=0.06)


def test_a_mixed_step_adds_its_decode_rows_speculative_passes_to_the_plain_step(worker):
    """An aggregated worker mixes prompt chunks into decode steps: the decode rows still verify and draft, so the
    step is the plain one (the decode rows at their true contexts) plus their decode step x (ratio - 1)."""
    E = silicon.MTP_TOKENS[3]
    c = SpecCost(worker, 3, E, 1024, 1025)
    T, S = np.array([512, 1, 1]), np.array([512, 1024 + 10, 1024 + 40])
    true = np.array([512, 1024 + math.ceil(10 * E), 1024 + math.ceil(40 * E)])
    want = worker.cost(T, true) + worker.cost.decode_only(true[1:]) * (c.ratio(2) - 1.0)
    assert c(T, S) == pytest.approx(want, rel=1e-12) and c(T, S) > worker.cost(T, true)
    assert c(np.array([512, 300]), np.array([512, 300])) == worker.cost(np.array([512, 300]), np.array([512, 300]))


def test_the_agg_rows_speculative_decoding_comes_from_the_configuration_each_with_its_evidence():
    """2,040 aggregated InferenceX rows of the sample's files: 230 ran MTP (TensorRT-LLM 3 drafts, or 1 with attention
    DP; SGLang's DeepSeek-R1 2, its Qwen3.5 3), each with the configuration entry and the script line that say so.
    The 618 of AIConfigurator's database dump: none ran MTP by its entry, 58 Qwen3.5 B300 rows could be either (an
    MTP and a plain sweep of the same run), each citing the entry."""
    import csv
    import re

    from perfmodel.serving.silicon_plan import AGG_SPECULATIVE

    every = list(csv.DictReader(open(AGG_SPECULATIVE, encoding="utf-8")))
    assert len(every) == 2658 and len({r["id"] for r in every}) == 2658
    dump = [r for r in every if re.search(r"_cfg\d+$", r["id"])]
    rows = [r for r in every if not re.search(r"_cfg\d+$", r["id"])]
    assert len(dump) == 618 and len(rows) == 2040
    assert sorted({r["speculative"] for r in dump}) == ["mtp|none", "none"]
    both = [r for r in dump if r["speculative"] == "mtp|none"]
    assert len(both) == 58 and all(r["id"].startswith("qwen3_5_b300_") for r in both)
    assert all(r["drafts"] == "" and (".github/configs/nvidia-master.yaml@" in r["evidence"]
                                      or "benchmarks/" in r["evidence"]) for r in dump)
    kinds = {k: [r for r in rows if r["speculative"] == k] for k in ("mtp", "none", "mtp|none", "unmatched")}
    assert [len(v) for v in kinds.values()] == [230, 1688, 33, 89]
    for r in kinds["mtp"]:
        assert re.search(r"InferenceX@[0-9a-f]{9,12}:\.github/configs/nvidia-master\.yaml \[[\w.-]+-mtp\]", r["evidence"])
        said = re.findall(r"MTP=(\d)|SPECULATIVE_NUM_STEPS=(\d)", r["evidence"])
        assert said and {int(a or b) for a, b in said} == {int(r["drafts"])}, r["id"]
        if "trtllm" in r["id"]:  # MTP=3, or MTP=1 when the entry runs attention DP
            assert r["drafts"] == ("1" if "dp-attn=true" in r["evidence"] else "3"), r["id"]
        else:
            assert r["drafts"] == ("2" if "deepseek_r1" in r["id"] else "3"), r["id"]
    assert all(r["drafts"] == "" for r in kinds["none"] + kinds["unmatched"])
    assert {r["note"] for r in kinds["none"]} <= {"", "NONE_BY_ABSENCE"}


@pytest.mark.parametrize("mode", ["roofline", pytest.param("achievable", marks=needs_aic)])
def test_an_agg_row_that_ran_mtp_runs_its_drafts_and_one_of_another_model_says_it_is_priced_plain(mode):
    """DeepSeek-R1 on B200, TensorRT-LLM, 4 clients, MTP with 3 drafts (its configuration): TPOT falls by the tokens a
    step over the iteration's cost, TTFT stays within the few mixed steps' share. A Qwen3.5 row that ran MTP keeps
    one token a step (no published acceptance) and says so."""
    s = silicon.load()
    i = "2026_03_25_deepseek_r1_b200_sxm_trtllm_fp8_agg_1024x1024_c4_tp8_0_ep1_0_1021"
    p = silicon.plan(s[s["id"] == i])[0]
    assert (p["speculative"], p["mtp"], p["status"]) == ("mtp", 3, "ok")
    pr = silicon.Predictor(mode)
    with_mtp, without = pr(p), silicon.Predictor(mode)({**p, "speculative": "none", "mtp": None})
    spec = next(v for k, v in pr.insts.items() if k[0] == "mtp").cost
    assert with_mtp["tpot_s"] < without["tpot_s"]
    assert with_mtp["tpot_s"] / without["tpot_s"] == pytest.approx(spec.ratio(4) / spec.E, rel=0.15)
    qwen = [q for q in silicon.plan(s[s["model_path"] == "Qwen/Qwen3.5-397B-A17B"])
            if q["status"] == "ok" and q.get("speculative") == "mtp"]
    assert len(qwen) == 42 and all(q["mtp"] == 3 and "no published acceptance" in q["assumed"] for q in qwen)
    assert not silicon.Predictor.mtp_priced(qwen[0]) and silicon.Predictor.mtp_priced(p)


def test_the_module_s_input_projection_reads_2d_inputs_and_writes_d_outputs_in_16_bits():
    """eh_proj for n tokens: a D x 2D bf16 matrix (2 D^2 parameters, 2 bytes each, stored on every device that runs
    the module), reading n x 2D activations of 2 bytes and writing n x D, one GEMM of n rows and D outputs over one
    matrix."""
    m = load_model("deepseek-r1")
    D, n = 7168, 12
    p = eh_proj(m, float(n))
    assert p.act_read == n * 2 * D * 2 and p.act_write == n * D * 2
    assert p.params == 2 * D * D and p.w_stored == 2 * D * D * 2 and p.wfmt == "bf16"
    assert p.rows == n and p.gemm == (n, D, 1.0)


@pytest.mark.parametrize("k, tokens", [(1, 1.0), (1, 2.0), (1, 1.5), (2, 3.0), (3, 1.0)])
def test_spec_cost_takes_one_draft_and_tokens_a_step_from_one_to_k_plus_one_both_ends_included(worker, k, tokens):
    """One draft is a speculative step (MTP1); E = 1 (every draft rejected) and E = k + 1 (every one accepted) are
    the ends of what a step can emit, both possible."""
    c = SpecCost(worker, k, tokens, 1024, 1024)
    assert c.k == k and c.E == tokens


def test_the_iteration_ratio_is_priced_at_the_request_s_mean_context(worker):
    """isl 1,000 and osl 600: the mean context of a decode step is 1,000 + 300; the ratio is the speculative
    iteration's roofline time there over the plain one-token step's."""
    c = SpecCost(worker, 2, 2.5, 1000, 600)
    i, S = worker, 1300.0
    plain = engine.roofline(build_ops(i.model, 8.0, 1.0, S, "decode", i.prec, layout=i.lay), i.hw, i.prec,
                            layout=i.lay, tm=i.cost.base.tm)["time"]
    spec = engine.roofline(iteration_ops(i.model, 8, 2, S, i.prec, i.lay), i.hw, i.prec, layout=i.lay,
                           tm=i.cost.base.tm)["time"]
    assert c.ratio(8) == pytest.approx(float(spec) / float(plain), rel=1e-12)


def test_the_loaded_mtp_module_is_the_model_card_s_14b_less_its_copies_of_the_embedding_and_head():
    """DeepSeek-V3's model card: 685B on Hugging Face = 671B of the main model + 14B of the MTP module (both totals
    rounded to 1B, so 14B +- 1B). The 14B hold the module's own copies of the embedding and LM head (2 x V x D),
    which vLLM and TensorRT-LLM share with the main model instead; what the module adds is the rest: eh_proj and
    one MoE decoder layer. Its cache: one MLA layer more a token, the main model's 61 layers' bytes / 61."""
    from perfmodel import engine
    from perfmodel.serving.speculative import SHARED, draft_ops, module_memory

    m = load_model("deepseek-v3")
    V, D = 129280, 7168  # config.json: vocab_size, hidden_size
    added = sum(op.params * op.count for op in draft_ops(m, 1.0, 0.0, Precision()) if op.name not in SHARED)
    assert abs(added + 2 * V * D - 14e9) <= 1e9
    w, kv = module_memory(m, Precision())
    assert w == pytest.approx(2.0 * added, rel=1e-12)  # bf16 weights, 2 bytes each
    assert kv == pytest.approx(engine.kv_growth_per_token(m, Precision()) / 61, rel=1e-12)


@pytest.mark.parametrize("tp, ep", [(8, 1), (8, 8)])
def test_a_worker_running_mtp_has_less_kv_memory_by_the_module_s_weights_and_a_layer_more_a_token(tp, ep):
    """The speculative worker of the serving validation is the plain worker less what the loaded MTP module takes:
    capacity less its weights on each of the ep device groups, each token's cache a layer bigger, and so at most
    as many requests admitted without eviction (TensorRT-LLM's capacity scheduler) as the plain worker."""
    from perfmodel.ops import Layout
    from perfmodel.serving.speculative import module_memory

    pred = silicon.Predictor("achievable", 1)
    lay = Layout(tp=tp, ep=ep)
    p = {"model": "deepseek-r1", "hardware": "h200", "weights": "fp8", "act": "fp8", "kv": "fp8"}
    inst = pred.instance(p, lay, 8192)
    spec = pred.speculative(inst, 3, 1024, 1024)
    w, kv = module_memory(inst.model, inst.prec, lay)
    assert w > 0 and kv > 0
    assert spec.sizes.capacity == pytest.approx(inst.sizes.capacity - w * ep, rel=1e-12)
    assert spec.sizes.per_token == pytest.approx(inst.sizes.per_token + kv, rel=1e-12)
    assert spec.sizes.weights == pytest.approx(inst.sizes.weights + w, rel=1e-12)
    assert inst.sizes.per_token / kv == pytest.approx(61, rel=1e-9)  # one MLA layer of the main model's 61
    assert pred.no_evict(spec, 8000, 8000, "trtllm") < pred.no_evict(inst, 8000, 8000, "trtllm")


def test_a_worker_whose_mtp_module_leaves_no_memory_for_a_cache_does_not_fit(monkeypatch):
    """With the module's weights on each of the ep device groups taking all that the main weights leave, the
    speculative worker does not fit (a result, "does not fit: ..."); half a byte left over, it fits with that."""
    from perfmodel.ops import Layout

    pred = silicon.Predictor("roofline", 1)
    lay = Layout(tp=8, ep=8)
    p = {"model": "deepseek-r1", "hardware": "h200", "weights": "fp8", "act": "fp8", "kv": "fp8"}
    inst = pred.instance(p, lay, 8192)
    C = inst.sizes.capacity
    monkeypatch.setattr(silicon, "module_memory", lambda *a: (C / 8, 0.0))
    with pytest.raises(SpecError, match="does not fit: the weights and the MTP module"):
        pred.speculative(inst, 3, 1024, 1024)
    monkeypatch.setattr(silicon, "module_memory", lambda *a: ((C - 0.5) / 8, 0.0))
    assert pred.speculative(inst, 2, 1024, 1024).sizes.capacity == 0.5
