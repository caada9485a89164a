"""`validate --serving` runs each point as the benchmark that measured it ran: the rounds of requests it measured,
the random lengths it drew and the engine settings its launch script gave (batch waiting, attention-DP balancing,
the token budget and the cap on running requests)."""
import numpy as np
import pytest

from perfmodel.runconfig import Layout
from perfmodel.serving import fastsim, silicon, silicon_disagg, silicon_plan


@pytest.fixture(scope="module")
def agg_point():
    s = silicon.load()
    s = s[(s["mode"] == "agg") & (s["model_path"] == "Qwen/Qwen3-32B") & (s["isl"] <= 2048) & (s["osl"] <= 1024)]
    p = [q for q in silicon.plan(s.head(8)) if q["status"] == "ok"][0]
    return dict(p, isl=512, osl=32, concurrency=8)


def test_spread_lengths_cover_the_benchmark_s_range_evenly_in_a_fixed_order():
    """benchmark_serving.py draws a length from int(L x ratio) to L inclusive: 1024 x 0.8 -> 819 ... 1024, 206
    values; 412 lengths hold each of them twice, so their mean is the range's, 921.5. The order is the seed's."""
    x = silicon.spread_lengths(1024, 0.8, 412, 1)
    assert sorted(set(x)) == list(range(819, 1025)) and np.all(np.bincount(x)[819:] == 2)
    assert x.mean() == 921.5
    assert np.array_equal(x, silicon.spread_lengths(1024, 0.8, 412, 1))
    assert not np.array_equal(x, silicon.spread_lengths(1024, 0.8, 412, 2))
    assert silicon.spread_lengths(1000, 0.8, 5, 1).min() >= 800  # int(800.0), the benchmark's lower bound
    assert set(silicon.spread_lengths(64, 1.0, 7, 3)) == {64}


def test_a_range_ratio_of_one_is_the_fixed_length_benchmark(agg_point):
    p = agg_point
    pred = silicon.Predictor("roofline")
    inst = pred.instance(p, p["layout"], silicon.worker_budget(p, p["layout"]))
    fixed = pred.closed(inst, 8, 512, 32)
    one = pred.closed(inst, 8, 512, 32, spread=1.0)
    assert {k: one[k] for k in fixed} == pytest.approx(fixed, rel=1e-12)


def test_shorter_random_lengths_make_a_lone_client_s_requests_shorter(agg_point):
    """One client, lengths drawn from 0.5 L ... L: prompts of 256 ... 512 tokens prefill faster than 512 ones,
    and each request's TPOT is its own decode time over its own output - 1."""
    p = agg_point
    pred = silicon.Predictor("roofline")
    inst = pred.instance(p, p["layout"], silicon.worker_budget(p, p["layout"]))
    fixed = pred.closed(inst, 1, 512, 32)
    spread = pred.closed(inst, 1, 512, 32, spread=0.5)
    assert spread["ttft"] < fixed["ttft"]
    assert spread["tpot"] == pytest.approx(fixed["tpot"], rel=0.05)  # shorter contexts, about the same step


def test_the_benchmark_s_rounds_weigh_its_opening_burst(agg_point):
    """The phase's mean over R rounds of n requests is (head + (R - 3) n x steady + tail) / (R n) with two rounds
    of burst at its head: so 20 x mean(20 rounds) - 10 x mean(10 rounds) = 10 x the steady mean."""
    p = agg_point
    pred = silicon.Predictor("roofline")
    inst = pred.instance(p, p["layout"], silicon.worker_budget(p, p["layout"]))
    r20 = pred.closed(inst, 8, 512, 32)
    r10 = pred.closed(inst, 8, 512, 32, profile=10)
    for k in ("ttft", "tpot"):
        assert 20 * r20[f"{k}_profile"] - 10 * r10[f"{k}_profile"] == pytest.approx(10 * r20[k], rel=1e-9)


def _record_closed(monkeypatch) -> list:
    """Predictor.closed replaced by a recorder of its keyword arguments (the settings a point reaches the closed loop
    with), on a stand-in worker of an 8,192-token budget whose memory holds 64 requests."""
    seen = []

    class Inst:
        budget = 8192

    def closed(self, inst, n, isl, osl, **k):
        seen.append(k)
        return {"ttft_profile": 1.0, "tpot_profile": 1.0, "in_flight": n, "rate": 1.0, "preempted": 0}

    monkeypatch.setattr(silicon.Predictor, "closed", closed)
    monkeypatch.setattr(silicon.Predictor, "instance", lambda self, p, lay, budget, moe="": Inst())
    monkeypatch.setattr(silicon.Predictor, "no_evict", staticmethod(lambda inst, isl, osl, engine: 64))
    return seen


def test_a_point_s_batch_waiting_and_balancing_reach_the_simulation_as_its_engine_applies_them(agg_point,
                                                                                               monkeypatch):
    """TensorRT-LLM applies batch waiting without attention DP (its token threshold a share of max_num_tokens, the
    worker's budget) and attention-DP balancing with it (over its DP ranks); each is ignored in the other case. The
    rounds and the length range reach the closed loop as the point gives them."""
    seen = _record_closed(monkeypatch)
    p = dict(agg_point, engine="trtllm", batch_wait=(40, 0.8), adp_balance=(60, 0), profile=10, spread=0.8)
    silicon.Predictor("roofline")(p)
    assert (seen[-1]["wait"], seen[-1]["balance"]) == ((40, 0.8 * 8192), None)
    assert (seen[-1]["profile"], seen[-1]["spread"], seen[-1]["slots"]) == (10, 0.8, 64)
    silicon.Predictor("roofline")(dict(agg_point, engine="sglang", recv=30))
    assert seen[-1]["recv"] == 30 and seen[-1]["prefill"] == "separate"
    q = dict(p, layout=p["layout"].__class__(1, 1, 2, 1))  # attention DP over 2 ranks
    silicon.Predictor("roofline")(q)
    assert (seen[-1]["wait"], seen[-1]["balance"]) == (None, (2, 60, 0))
    silicon.Predictor("roofline")(dict(agg_point, max_batch=16))  # a cap below the memory's 64
    assert seen[-1]["slots"] == 16 and seen[-1]["profile"] == silicon.PROFILE_ROUNDS and seen[-1]["spread"] is None


def test_the_engine_s_cap_on_running_requests_is_per_attention_dp_rank_but_sglang_s_and_memory_caps_it_too(
        agg_point, monkeypatch):
    seen = _record_closed(monkeypatch)  # memory holds 64
    p = dict(agg_point, layout=Layout(tp=1, ep=4))
    for engine, max_batch, want in (("trtllm", 8, 32), ("vllm", 8, 32), ("sglang", 8, 8), ("trtllm", 100, 64)):
        silicon.Predictor("roofline")(dict(p, engine=engine, max_batch=max_batch))
        assert seen[-1]["slots"] == want, (engine, max_batch)


def test_benchmark_settings_read_each_engine_s_own_names_for_its_limits():
    """The scripts' values become the plan's keys: 10 N prompts -> 10 rounds, the range ratio, the engine's budget
    and cap by its own names, TensorRT-LLM's batch waiting and balancing (with its AttentionDpConfig defaults, 50
    and 10 iterations, where a script turns balancing on without them); other engines' names are not read."""
    bs = silicon_plan.benchmark_settings
    cfg = {"script": "s.sh@1", "num_prompts": "640", "random_range_ratio": "0.8", "max_num_tokens": "1152",
           "max_batch_size": "16", "batch_wait_timeout_iters": "40", "batch_wait_max_tokens_ratio": "0.8",
           "adp_enable_balance": "true", "max_num_seqs": "4", "chunked_prefill_size": "32768",
           "scheduler_recv_interval": "10"}
    out, why = bs(cfg, "trtllm", 64)
    assert why == "" and out == {"profile": 10, "spread": 0.8, "budget": 1152, "max_batch": 16,
                                 "batch_wait": (40, 0.8), "adp_balance": (50, 10)}
    assert bs(cfg, "vllm", 64)[0] == {"profile": 10, "spread": 0.8, "max_batch": 4}
    assert bs(cfg, "sglang", 32)[0] == {"profile": 20, "spread": 0.8, "budget": 32768, "recv": 10}
    assert "recv" not in bs(dict(cfg, scheduler_recv_interval="1"), "sglang", 32)[0]  # 1: no skipper
    assert bs(dict(cfg, random_range_ratio="1.0"), "vllm", 64)[0] == {"profile": 10, "max_batch": 4}


def test_a_run_without_a_script_or_without_its_prompt_count_keeps_aiperf_s_rounds_and_says_so():
    bs = silicon_plan.benchmark_settings
    assert bs(None, "vllm", 8) == ({}, "")  # not an InferenceX run: nothing to say
    out, why = bs({"commit_source": "in force at measured"}, "vllm", 8)
    assert out == {} and "no launch script" in why
    out, why = bs({"script": "s.sh@1", "max_num_seqs": "8", "random_range_ratio": "0.8"}, "vllm", 8)
    assert out == {"spread": 0.8, "max_batch": 8} and "depend on the runner" in why


def test_the_shipped_settings_plan_the_rows_that_ran_them(sample_plans):
    """From agg_config.csv: DeepSeek-R1 fp8 on B200 under TensorRT-LLM at 64 clients waited for batches (40
    iterations, 0.8 of 8192 tokens: dsr1_fp8_b200_trt.sh); its fp4 run with attention DP balanced its 8 ranks (60,
    0); 15 SGLang runs measured 50 N or 20 N prompts, and 15 more of the database dump (DeepSeek-R1 fp8 B200 on
    2025-11-18, runner b200-nvd); the B300 runs of 2026-04-03 had no single-node script."""
    by = sample_plans
    r = by["2026_03_25_deepseek_r1_b200_sxm_trtllm_fp8_agg_1024x1024_c64_tp8_0_ep1_0_1198"]
    assert (r["batch_wait"], r["budget"], r["profile"], r["spread"]) == ((40, 0.8), 8192, 10, 0.8)
    r = by["2026_03_25_deepseek_r1_b200_sxm_trtllm_fp4_agg_1024x1024_c64_tp8_0_ep8_0_976"]
    assert (r["adp_balance"], r["budget"], r["max_batch"]) == ((60, 0), 1152, 16)
    assert sorted(p["profile"] for p in by.values() if p.get("profile", 10) != 10) == [20] * 10 + [50] * 20
    # DeepSeek-R1 fp4 on B200 under SGLang: dsr1_fp4_b200.sh sets --scheduler-recv-interval 10 below 16 clients, 30
    # from 16 on; 284 rows of the InferenceX files, all SGLang on B200, and 234 of the database dump (B200 and B300)
    assert by["2026_03_25_deepseek_r1_b200_sxm_sglang_fp4_agg_1024x1024_c8_tp8_0_ep8_0_248"]["recv"] == 10
    assert by["2026_03_25_deepseek_r1_b200_sxm_sglang_fp4_agg_1024x1024_c64_tp8_0_ep8_0_271"]["recv"] == 30
    recv = [p for p in by.values() if "recv" in p]
    files = [p for p in recv if p["id"].startswith("2026_")]
    assert len(files) == 284 and {(p["engine"], p["hardware"]) for p in files} == {("sglang", "b200")}
    assert len(recv) == 518 and {(p["engine"], p["hardware"]) for p in recv} == {("sglang", "b200"), ("sglang", "b300")}
    assert {p["recv"] for p in recv} == {10, 30}
    # a database-dump row: InferenceX's max_num_tokens = (CONC + ISL + 64 + 63) // 64 * 64 (dsr1_fp4_b200_trt.sh at the
    # run's sweep commit), so an 8,192-token prompt fits beside the decodes (TensorRT-LLM's 8,192 default did not)
    assert by["dsr1_b200_trtllm_fp4_agg_8192x1024_c4_cfg91"]["budget"] == 8320
    b300 = [p for i, p in by.items() if i.startswith("2026_03_25_minimax_m2_5_b300")]
    assert b300 and all("no launch script" in p["assumed"] and "profile" not in p for p in b300)


def test_a_launcher_whose_benchmark_script_is_absent_did_not_run_the_measurement(sample_plans):
    """At e06929c70 runners/launch_b200-nvd.sh and launch_b200-tg.sh start the server container on
    benchmarks/dsr1_fp4_b200_trt_docker.sh, which does not exist there (only dsr1_fp4_b200_trt_slurm.sh does), and
    then run the client whatever happened to the server: their executed runs logged a client command and no server.
    Such a run measures nothing, so its "(unset)" settings do not count against the slurm script's
    (bench/inferencex_agg/config/absent_scripts.py). 57 rows. The slurm script sets max_num_tokens to
    (CONC + ISL + 64 + 63) // 64 * 64 (L110), so a whole prompt fits beside the decodes (TensorRT-LLM runs
    prompts unchunked); it was the engine's 8,192 before, which no 8,192-token prompt beside 128 decodes fits."""
    import csv

    with open(silicon_plan.AGG_CONFIG, newline="", encoding="utf-8") as f:
        cfg = {r["id"]: r for r in csv.DictReader(f)}
    fixed = {i: c for i, c in cfg.items() if "absent_scripts.py" in c["note"]}
    assert len(fixed) == 57 and all("|" not in c["script"] and "differs by runner" not in c["note"]
                                    for c in fixed.values())
    slurm = {i: c for i, c in cfg.items() if c.get("script") == "benchmarks/dsr1_fp4_b200_trt_slurm.sh@e06929c70"}
    assert len(slurm) == 39 and set(slurm) <= set(fixed)  # all of that script's rows had the absent twin
    for i, c in slurm.items():
        isl, conc = (int(x) for x in silicon_plan.re.search(r"_(\d+)x\d+_c(\d+)_", i).groups())
        assert int(c["max_num_tokens"]) == (conc + isl + 64 + 63) // 64 * 64, i
        assert sample_plans[i]["budget"] == int(c["max_num_tokens"]), i
    # the 128-client 8k/1k run: 8,384 tokens, attention DP (dp8) balanced 60 / 0 iterations
    p = sample_plans["2026_04_06_deepseek_r1_b200_sxm_trtllm_fp4_agg_8192x1024_c128_tp8_ep1_74"]
    assert (p["budget"], p["adp_balance"], p["layout"].ep) == (8384, (60, 0), 8)
    # gpt-oss on 8 B200s: gptoss_fp4_b200_trt_slurm.sh's max_num_tokens 20000 and max_batch_size 512
    p = sample_plans["2026_04_06_gpt_oss_120b_b200_sxm_trtllm_fp4_agg_8192x1024_c64_tp8_ep1_426"]
    assert (p["budget"], p["max_batch"]) == (20000, 512)
    # tp 8 at 1k/1k: the block sets EP_SIZE=$TP above 8 clients, so the experts sit whole on each GPU
    assert sample_plans["2026_04_06_deepseek_r1_b200_sxm_trtllm_fp4_agg_1024x1024_c16_tp8_ep1_98"]["layout"] == \
        Layout(8, experts="ep")


def test_a_tensorrt_llm_prompt_over_its_token_budget_is_chunked_because_unchunked_it_cannot_run(sample_plans):
    """TensorRT-LLM runs prompts unchunked by default and its frontend refuses one longer than max_num_tokens, so the
    three 15,000-token Qwen3-32B runs, measured at the default 8,192, chunked theirs; simulated unchunked, a prompt
    over the budget ran only on an idle engine and TTFT came out at 1,582 s against 0.75 s measured."""
    over = {i: p for i, p in sample_plans.items() if p.get("prefill") == "chunked"}
    assert len(over) == 3 and all(p["engine"] == "trtllm" and p["isl"] > p["budget"] for p in over.values())
    assert all("chunked prefill assumed" in p["assumed"] for p in over.values())
    assert not any(p.get("prefill") for p in sample_plans.values() if p.get("isl", 0) <= p.get("budget", 0))
    assert silicon_plan.oversize_prompt(15000, 8192).startswith("prompt 15000 tokens over TensorRT-LLM's")


@pytest.fixture(scope="module")
def sample_plans():
    s = silicon.load()
    return {p["id"]: p for p in silicon.plan(s[s["mode"] == "agg"])}


@pytest.fixture(scope="module")
def disagg_plans():
    s = silicon.load()
    return {p["id"]: p for p in silicon.plan(s[s["mode"] == "disagg"])}


def test_disagg_rows_that_ran_an_srt_slurm_recipe_are_planned_with_sa_bench_s_requests(disagg_plans):
    """sa-bench (srt-slurm's bench.sh) measured 10 N requests with lengths drawn from [0.8 L, L]: every row whose
    workers come from an srt-slurm recipe gets those, and so does every row whose recipe (read for its limits, the
    InferenceX copies of srt-slurm's recipes and the database dump's runs with recorded workers included) names
    sa-bench as its benchmark; a row launched otherwise (InferenceX's own Dynamo scripts) keeps the 20 fixed-length
    rounds; an MTP row keeps fixed lengths and says so."""
    rec, st = silicon.recipe_workers(), silicon_plan.disagg_settings()
    by_workers = {i for i in disagg_plans if i in rec and "NVIDIA/srt-slurm@" in rec[i]["source"]}
    by_recipe = {i for i in disagg_plans if i in st and st[i]["benchmark"] == "sa-bench"}
    sa = [p for i, p in disagg_plans.items() if i in by_workers | by_recipe]
    other = [p for i, p in disagg_plans.items() if i not in by_workers | by_recipe]
    assert len(by_workers) == 821 + 46 and len(by_recipe - by_workers) == 108 + 166  # copies, recorded workers
    assert all((p["profile"], p["spread"]) == (10, 0.8) for p in sa if p["status"] == "ok")
    assert not any("profile" in p or "spread" in p for p in other)
    mtp = [p for p in sa if p.get("speculative") == "mtp" and p["model"] in silicon.MTP_PRICED]
    assert mtp and all("speculative steps are simulated at one length" in p["assumed"] for p in mtp)


def test_a_disagg_point_draws_its_prompts_in_both_stages_and_its_outputs_only_in_the_decode_stage(monkeypatch):
    """The prefill stage's requests end at their one output token: its lengths are drawn from the prompt's range,
    its output stays 1; the decode stage and the opening burst draw as the benchmark did; an MTP point does not
    draw (speculative steps are simulated at one length)."""
    s = silicon.load()
    p = [q for q in silicon.plan(s[s["mode"] == "disagg"].head(40)) if q["status"] == "ok"][0]
    p = dict(p, isl=512, osl=16, concurrency=4, prefill_workers=1, decode_workers=1, profile=10, spread=0.8)
    calls, bursts = [], []
    orig_closed, orig_burst = silicon.Predictor.closed, silicon.Predictor.burst_mean

    def closed(self, inst, n, isl, osl, **k):
        calls.append((osl, k.get("spread"), k.get("profile")))
        return orig_closed(self, inst, n, isl, osl, **k)

    def burst(self, inst, n, isl, steady, **k):
        bursts.append(k)
        return orig_burst(self, inst, n, isl, steady, **k)

    monkeypatch.setattr(silicon.Predictor, "closed", closed)
    monkeypatch.setattr(silicon_disagg, "JOINT_CLIENTS", 0)  # the pooled loop (the joint one: below)
    monkeypatch.setattr(silicon.Predictor, "burst_mean", burst)
    pred = silicon.Predictor("roofline")
    r = pred(p)
    assert all(sp == 0.8 for _, sp, _ in calls)
    answer = {o for o, _, prof in calls if prof == 10}  # the answer's simulations run the benchmark's rounds
    assert answer == {1, 16} and calls[-1][0] == 16  # both stages, the decode stage last
    assert p["id"] == "kimik2_5_gb200_trtllm_fp4_disagg_1024x1024_c4_cfg759"
    assert bursts[-1] == {"profile": 10, "spread": 0.8, "slots": 16 * 4}  # max_batch_size 16 a rank, 4 ranks
    fixed = silicon.Predictor("roofline")(dict(p, spread=None, profile=silicon.PROFILE_ROUNDS))
    assert r["ttft_s"] < fixed["ttft_s"]  # prompts of 409-512 tokens, not 512


def test_an_mtp_disagg_point_keeps_fixed_lengths(disagg_plans, monkeypatch):
    """Speculative steps are simulated at one length: a DeepSeek-R1 MTP row of an srt-slurm recipe is planned with
    sa-bench's rounds and range but its stages run fixed lengths."""
    p = next(q for q in disagg_plans.values() if q.get("spread") and q.get("speculative") == "mtp"
             and silicon.Predictor.mtp_priced(q) and q["status"] == "ok")
    spreads = []
    orig = silicon.Predictor.closed

    def closed(self, inst, n, isl, osl, **k):
        spreads.append(k.get("spread"))
        return orig(self, inst, n, isl, osl, **k)

    monkeypatch.setattr(silicon.Predictor, "closed", closed)
    monkeypatch.setattr(silicon_disagg, "JOINT_CLIENTS", 0)  # the pooled loop (the joint one: below)
    silicon.Predictor("roofline")(dict(p, isl=256, osl=8, concurrency=2))
    assert spreads and set(spreads) == {None}


def test_rows_that_ran_tep_hold_whole_experts_in_their_tp_group(sample_plans, disagg_plans):
    """An agg run named ..._tp8_ep8_ without attention DP ran TEP (the experts expert-parallel over its 8 GPUs);
    tp8_ep1 ran them tensor-parallel, unless its script launched with the experts over all its tp GPUs whatever its
    ep (agg_ep.csv); with attention DP (DEP) the layout already spreads them. A disagg recipe's decode workers named
    gen<n>_tep<k> ran TEP, gen<n>_dep<k> attention DP."""
    tep = {i: p for i, p in sample_plans.items() if p["status"] == "ok" and p["layout"].experts == "ep"}
    assert tep and all(p["layout"].ep == 1 and p["layout"].tp > 1 for p in tep.values())
    named = [i for i in tep if silicon_plan.re.search(r"_tp(\d+)_ep\1_", i)]
    assert len(named) > 100
    for i, p in sample_plans.items():
        m = silicon_plan.re.search(r"_tp(\d+)_ep(\d+)_", i)
        if p["status"] == "ok" and m and m[1] != m[2]:
            assert p["layout"].experts == ("ep" if i in silicon_plan.agg_ep() else "tp"), i
    rec = silicon.recipe_workers()
    for i, p in disagg_plans.items():
        if p["status"] != "ok" or i not in rec:
            continue
        src = rec[i]["source"]
        assert (p["decode_layout"].experts == "ep") == bool(silicon_plan.re.search(r"_gen\d+_?tep\d+_", src)), i
        assert p["layout"].experts == "tp"
    assert silicon_plan.tep_decode("recipes/trtllm/gb300-fp4/1k1k/mtp/ctx1_gen4_tep8_batch8_eplb0_mtp3.yaml")
    assert not silicon_plan.tep_decode("recipes/trtllm/gb200-fp4/1k8k/stp/ctx1_gen1_dep32_batch64_eplb0_mtp0.yaml")
    # the Kimi-K2.5 and GLM-5 recipes write the pool and its layout together (ctx1dep4_gen5tep4_...)
    assert silicon_plan.tep_decode("recipes/kimi2.5/trtllm_dynamo/disagg/gb200Nvfp4/ISL8K_OSL1K/STP/"
                                   "ctx1dep4_gen5tep4_batch16_allconc_eplb0_mtp0.yaml")
    assert not silicon_plan.tep_decode("recipes/GLM5/disagg/trtllm_dynamo/gb200_nvfp4/ISL1K_OSL1K/STP/"
                                       "ctx1dep4_gen1dep32_batch32_eplb0_mtp0.yaml")


@pytest.mark.parametrize("row, tp, dp, want", [
    ({"id": "a_tp8_ep8_1"}, 8, 1, "ep"), ({"id": "a_tp8_ep1_1"}, 8, 1, "tp"), ({"id": "a_tp8_ep4_1"}, 8, 1, "tp"),
    ({"id": "a_tp8_ep8_1"}, 1, 8, "tp"),  # attention DP: the layout already spreads the experts
    ({"id": "x_cfg1", "moe_tp_size": 1, "moe_ep_size": 4}, 4, 1, "ep"),
    ({"id": "x_cfg1", "moe_tp_size": 2, "moe_ep_size": 2}, 4, 1, "tp"),  # a mixed split keeps tp
    ({"id": "x_cfg1", "moe_tp_size": 4, "moe_ep_size": 1}, 4, 1, "tp"), ({"id": "x_cfg1"}, 1, 1, "tp")])
def test_an_agg_row_ran_tep_when_its_name_or_its_moe_split_says_the_experts_spread_over_its_tp_group(row, tp, dp, want):
    assert silicon_plan.tep_experts(row, tp, dp) == want


def test_a_point_runs_under_its_engine_s_overlap_scheduler_in_the_achievable_mode_but_sglang_s_speculative_runs(
        agg_point, monkeypatch):
    """vLLM, SGLang and TensorRT-LLM form step k + 1 while step k runs (their profiles' overlap_schedule); SGLang
    turns that off for speculative decoding; the roofline bound has no engine, so no schedule is ahead."""
    seen = _record_closed(monkeypatch)
    for engine in ("vllm", "sglang", "trtllm"):
        silicon.Predictor("achievable")(dict(agg_point, engine=engine))
        assert seen[-1]["ahead"] is True, engine
        silicon.Predictor("roofline")(dict(agg_point, engine=engine))
        assert seen[-1]["ahead"] is False, engine
    silicon.Predictor("achievable")(dict(agg_point, engine="sglang", speculative="mtp", mtp=None))
    assert seen[-1]["ahead"] is False
    silicon.Predictor("achievable")(dict(agg_point, engine="vllm", speculative="mtp", mtp=None))
    assert seen[-1]["ahead"] is True
    silicon.Predictor("achievable", impl="graphs")(dict(agg_point, engine="vllm"))  # a profile without one
    assert seen[-1]["ahead"] is False


def test_an_impl_profile_s_overlap_schedule_is_true_or_false_and_a_bad_one_is_named():
    from perfmodel.efficiency import impl_from_dict
    from perfmodel.errors import SpecError

    base = dict(name="x", source="test", launch="0 s", layer_overhead="0 s", step_overhead="0 s",
                kernels={"value": {"attn_av": 0}, "source": "test"}, collectives=["ring"])
    assert impl_from_dict(dict(base, overlap_schedule=True), "x.yaml").overlap_schedule is True
    assert impl_from_dict(base, "x.yaml").overlap_schedule is False
    for bad in ("yes", 1, None):
        with pytest.raises(SpecError, match="overlap_schedule"):
            impl_from_dict(dict(base, overlap_schedule=bad), "x.yaml")


def test_a_disagg_decode_worker_that_takes_requests_every_k_loops_makes_them_wait_and_says_nothing_else(monkeypatch):
    """SGLang's --scheduler-recv-interval on a disaggregated decode worker: every simulation of that worker gets
    it (the split's and the answer's), none of the prefill worker's does; a busy decode worker then sees a request
    up to k - 1 of its iterations late, so TTFT is longer and the request rate no higher. (With sa-bench's drawn
    lengths: requests of one length finish together, and an emptied worker takes the next ones at once.)"""
    s = silicon.load()
    p = [q for q in silicon.plan(s[s["mode"] == "disagg"].head(40)) if q["status"] == "ok"][0]
    p = dict(p, isl=512, osl=64, concurrency=16, prefill_workers=1, decode_workers=1, spread=0.8, profile=10)
    calls = []
    orig = silicon.Predictor.closed

    def closed(self, inst, n, isl, osl, **k):
        calls.append((osl, k.get("recv")))
        return orig(self, inst, n, isl, osl, **k)

    monkeypatch.setattr(silicon.Predictor, "closed", closed)
    monkeypatch.setattr(silicon_disagg, "JOINT_CLIENTS", 0)  # the pooled loop (the joint one: below)
    base = silicon.Predictor("achievable")(p)
    calls.clear()
    held = silicon.Predictor("achievable")(dict(p, decode_recv=10))
    assert {r for o, r in calls if o > 1} == {10} and {r for o, r in calls if o == 1} == {None}
    assert held["ttft_s"] > base["ttft_s"] and held["request_rate"] <= base["request_rate"] * (1 + 1e-9)


def test_the_joint_disagg_loop_draws_prompts_in_both_pools_outputs_at_the_decode_worker_and_passes_its_settings(
        disagg_plans, monkeypatch):
    """The joint loop (up to JOINT_CLIENTS clients) runs sa-bench's drawn lengths as the pooled one does: every
    worker's prompts from [int(0.8 L), L], the decode workers' outputs drawn too, a prefill worker's one token
    each; SGLang's receive interval reaches the decode workers only; an MTP row's stages run fixed lengths."""
    s = silicon.load()
    p = [q for q in silicon.plan(s[s["mode"] == "disagg"].head(40)) if q["status"] == "ok"][0]
    p = dict(p, isl=512, osl=16, concurrency=4, prefill_workers=1, decode_workers=1, profile=10, spread=0.8,
             decode_recv=10)
    runs = []
    orig = fastsim.run

    def run(arrival, prompt, out, *a, prefilled=False, recv=None, **k):
        runs.append((prefilled, np.asarray(prompt).copy(), np.asarray(out).copy(), recv))
        return orig(arrival, prompt, out, *a, prefilled=prefilled, recv=recv, **k)

    monkeypatch.setattr(fastsim, "run", run)
    monkeypatch.setattr(silicon.Predictor, "closed", lambda *a, **k: pytest.fail("the joint loop runs no pool"))
    silicon.Predictor("achievable")(p)
    pre = [r for r in runs if not r[0]]
    dec = [r for r in runs if r[0]]
    assert pre and dec
    allp = np.concatenate([r[1] for r in runs])
    assert allp.min() >= int(0.8 * 512) and allp.max() <= 512 and allp.min() < allp.max()
    assert all(np.all(r[2] == 1) for r in pre) and all(r[3] is None for r in pre)
    outs = np.concatenate([r[2] for r in dec])
    assert outs.min() >= int(0.8 * 16) and outs.max() <= 16 and outs.min() < outs.max()
    assert {r[3] for r in dec} == {10}
    q = next(q for q in disagg_plans.values() if q.get("spread") and q.get("speculative") == "mtp"
             and silicon.Predictor.mtp_priced(q) and q["status"] == "ok")
    runs.clear()
    silicon.Predictor("roofline")(dict(q, isl=256, osl=8, concurrency=2))
    assert runs and all(np.all(r[1] == 256) for r in runs)  # speculative steps: one length
