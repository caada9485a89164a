"""`validate --serving`: AIConfigurator's measured serving points, mapped to the catalog and predicted by
closed-loop simulations; the per-point table lets anyone recompute the errors."""
import csv
import hashlib
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import perfmodel as pm
from perfmodel.cli import main
from perfmodel.ops import Layout, Precision
from perfmodel.serving import fastsim, silicon, silicon_disagg, silicon_plan
from perfmodel.serving.speculative import module_memory


@pytest.fixture(scope="module")
def sample():
    return silicon.load()


def test_the_shipped_sample_is_the_pinned_file(sample):
    notice = (silicon.DATA / "NOTICE").read_text()
    digest = hashlib.sha256(silicon.SAMPLE.read_bytes()).hexdigest()
    assert digest in notice and "0b077da5e017cb8ceac1ad14e91eb6e26c40207a" in notice
    assert len(sample) == 5221 and sample["id"].is_unique
    assert "Apache License" in (silicon.DATA / "LICENSE").read_text()


def test_concurrency_is_read_from_the_source_then_the_id_then_batch_times_ranks():
    row = {"mode": "agg", "batch_size": 128.0, "attention_dp_size": 4.0}
    assert silicon.concurrency({**row, "silicon_data_source": "x; silicon_concurrency=512; y", "id": "a_c7_b"}) == 512
    assert silicon.concurrency({**row, "silicon_data_source": "x", "id": "m_agg_1024x1024_c96_cfg1"}) == 96
    assert silicon.concurrency({**row, "silicon_data_source": "x", "id": "m"}) == 512  # AIConfigurator: bs x dp
    dis = {"mode": "disagg", "silicon_data_source": "", "id": "", "decode_batch_size": 48.0,
           "decode_num_workers": 4.0, "decode_attention_dp_size": 1.0}
    assert silicon.concurrency(dis) == 192


def test_attention_data_parallel_maps_to_ep_groups_and_impossible_layouts_say_why():
    ds, llama = pm.load_model("deepseek-r1"), pm.load_model("llama-3.1-70b")
    assert silicon._layout(ds, 8, 8) == (Layout(8, 1, 8, 1), "")
    assert silicon._layout(ds, 4, 1) == (Layout(4, 1, 1, 1), "")
    assert silicon._layout(llama, 8, 2)[1] == "attention_dp 2 on a dense model"
    assert silicon._layout(ds, 72, 1)[1] == "tp 72 does not divide 128 heads / 128 KV heads"


def test_an_agg_row_whose_tp_is_the_run_s_tp_times_ep_runs_on_the_gpus_its_id_names():
    row = {"id": "2026_04_06_deepseek_r1_h200_sxm_trtllm_fp8_agg_8192x1024_c4_tp8_ep8_947"}
    assert silicon.agg_parallel({**row, "tp_size": 64.0, "attention_dp_size": 1.0})[:2] == (8, 1)
    fixed = silicon.agg_parallel({**row, "tp_size": 1.0, "attention_dp_size": 64.0})
    assert fixed[:2] == (1, 8) and "attention_dp_size 64" in fixed[2] and "tp8_ep8" in fixed[2]
    for tp, dp in ((8.0, 1.0), (1.0, 8.0), (8.0, 8.0), (32.0, 1.0)):  # the id's GPUs, or not the product: as given
        assert silicon.agg_parallel({**row, "tp_size": tp, "attention_dp_size": dp}) == (int(tp), int(dp), "")
    kimi = {"id": "m_agg_1024x1024_c4_tp4_ep4_1294", "tp_size": 4.0, "attention_dp_size": 4.0}
    assert silicon.agg_parallel(kimi) == (4, 4, "")  # both above 1: its twin records say the same
    assert silicon.agg_parallel({"id": "m_tp8_ep1_1", "tp_size": 8.0, "attention_dp_size": float("nan")}) == (8, 1, "")
    assert silicon.agg_parallel({"id": "minimaxm2_5_cfg733", "tp_size": 4.0, "attention_dp_size": 1.0}) == (4, 1, "")


def test_a_row_without_a_layout_in_its_id_whose_gpus_are_moe_tp_times_moe_ep_runs_on_k_gpus():
    # a dump row agg_topology does not hold (a sample of the user's own): the sample's columns decide
    row = {"id": "dsr1_h200_trtllm_fp8_agg_1024x1024_c4_cfg999999", "moe_tp_size": 8.0, "moe_ep_size": 8.0}
    tp, dp, why = silicon.agg_parallel({**row, "tp_size": 64.0, "attention_dp_size": 1.0})
    assert (tp, dp) == (8, 1) and "moe_tp x moe_ep (8 x 8)" in why
    assert silicon.agg_parallel({**row, "tp_size": 1.0, "attention_dp_size": 64.0})[:2] == (1, 8)
    assert silicon.agg_parallel({**row, "tp_size": 16.0, "attention_dp_size": 1.0, "moe_tp_size": 4.0,
                                 "moe_ep_size": 4.0})[:2] == (4, 1)
    for tp, dp, mt, me in ((4.0, 1.0, 2.0, 2.0),  # moe 2 x 2 on 4 GPUs: a layout the engines run
                           (8.0, 1.0, 1.0, 8.0), (8.0, 1.0, 8.0, 1.0), (64.0, 1.0, 8.0, 4.0), (16.0, 4.0, 8.0, 8.0)):
        r = {**row, "tp_size": tp, "attention_dp_size": dp, "moe_tp_size": mt, "moe_ep_size": me}
        assert silicon.agg_parallel(r) == (int(tp), int(dp), "")


def test_the_dump_rows_run_the_layout_their_configuration_entry_names_and_the_squared_rule_agrees(sample):
    """Every aggregated row of AIConfigurator's database dump has the tp, ep and dp-attn of the InferenceX entry
    that ran it (agg_topology.csv), but where the entry's script turned attention DP on itself (agg_dp: the entry
    says dp-attn false, the script's DP_ATTENTION block true), which runs DP over the entry's tp GPUs; the 123 rows
    whose sample columns show the squared signature (moe_tp = moe_ep = k, k^2 GPUs), decided by that rule alone,
    get the same k GPUs from it."""
    dump = sample[sample["silicon_data_source"].str.startswith("db-dump") & (sample["mode"] == "agg")]
    topo = silicon_plan.agg_topology()
    assert len(dump) == 618 and set(dump["id"]) <= set(topo)
    rows = dump.to_dict("records")
    ran = [silicon.agg_parallel(r)[:2] for r in rows]
    scripted = silicon_plan.agg_dp()
    for r, (tp, dp) in zip(rows, ran):
        t, _, dpa = topo[r["id"]]
        assert dpa is None or (tp, dp) == ((1, t) if dpa or r["id"] in scripted else (t, 1)), r["id"]
    assert sum(r["id"] in scripted for r in rows) == 9  # DeepSeek-R1 fp4 B200 (cfg82, cfg91) and fp8 H200 (cfg83)
    saved = dict(topo)
    try:
        topo.clear()  # the sample's own columns alone
        alone = [silicon.agg_parallel(r) for r in rows]
    finally:
        topo.update(saved)
    squared = [(a[:2], b) for a, b in zip(alone, ran) if "moe_tp x moe_ep" in a[2]]
    assert len(squared) == 123 and all(a == b for a, b in squared)


def test_the_dump_rows_with_the_squared_layout_measure_as_their_k_gpu_twins(sample):
    """The 14 H200 TensorRT-LLM DeepSeek-V3 rows of cfg181 (tp 64, moe 8 x 8) against the tp 8 rows of cfg83 at
    the same lengths and clients: within 2.5% in TPOT, as one 8-GPU layout measured twice (a 64-GPU run across
    8 nodes would not be)."""
    by = {p["id"]: p for p in silicon.plan(sample)}
    moved = sample[[("agg_topology.csv" in by[i]["assumed"]) for i in sample["id"]]]
    assert len(moved) == 190 and all(by[i]["status"] == "ok" for i in moved["id"])
    c181 = sample[sample["id"].str.startswith("dsr1_h200_trtllm_fp8_agg") & sample["id"].str.endswith("_cfg181")]
    c83 = sample[sample["id"].str.startswith("dsr1_h200_trtllm_fp8_agg") & sample["id"].str.endswith("_cfg83")]
    pairs = c181.merge(c83, on=["isl", "osl", "batch_size"], suffixes=("", "_8"))
    assert len(pairs) == 14 and set(pairs["tp_size"]) == {64.0} and set(pairs["tp_size_8"]) == {8.0}
    r = pairs["silicon_tpot_ms"] / pairs["silicon_tpot_ms_8"]
    assert r.between(0.97, 1.01).all()
    assert all(by[i]["layout"].tp == 8 and by[i]["layout"].ep == 1 for i in pairs["id"])


def test_the_shipped_sample_s_twin_measurements_agree_with_the_gpus_the_id_names(sample):
    """80 of the runs the 2026-04-06 file records with tp x ep as tp appear again in 2026-03-25.csv (the same TTFT
    to 0.01 ms), and there every twin gives the GPUs the id names."""
    by = {p["id"]: p for p in silicon.plan(sample)}
    fixed = sample[[("tp x ep" in by[i]["assumed"]) for i in sample["id"]]]
    assert len(fixed) == 194 and all(by[i]["status"] == "ok" for i in fixed["id"])
    src = sample["silicon_data_source"].str.extract(r"source_file=([^;]+)")[0]
    assert set(src[fixed.index]) == {"2026-04-06.csv"}
    other = sample[(src == "2026-03-25.csv") & (sample["mode"] == "agg")]
    twins = fixed.merge(other, on=["system", "model_path", "isl", "osl"], suffixes=("", "_twin"))
    twins = twins[(twins["silicon_ttft_ms"] - twins["silicon_ttft_ms_twin"]).abs() < 0.01]
    assert twins["id"].nunique() == 80
    for _, t in twins.iterrows():
        lay = by[t["id"]]["layout"]
        assert (lay.tp, lay.ep) == (int(t["tp_size_twin"]), int(t["attention_dp_size_twin"] or 1))


def test_at_least_90_percent_of_the_sample_is_planned(sample):
    plans = silicon.plan(sample)
    ok = [p for p in plans if p["status"] == "ok"]
    assert len(ok) / len(plans) >= 0.9
    assert all(p["reason"] for p in plans if p["status"] != "ok")  # every row left out says why
    by = {p["id"]: p for p in plans}
    dis = sample[(sample["mode"] == "disagg") & sample["decode_num_workers"].isna()
                 & ~sample["id"].isin(list(silicon.recipe_workers()))].iloc[0]  # no counts, and no recipe
    assert by[dis["id"]]["assumed"].startswith("workers not given: 1 prefill, 1 decode")
    nvfp4 = sample[sample["gemm_quant_mode"] == "nvfp4"].iloc[0]
    assert (by[nvfp4["id"]]["weights"], by[nvfp4["id"]]["act"], by[nvfp4["id"]]["kv"]) == ("nvfp4", "nvfp4", "fp8")


def test_each_engine_gets_its_default_token_budget():
    assert silicon.budget("vllm", pm.load_hardware("b200")) == 8192
    assert silicon.budget("sglang", pm.load_hardware("h200")) == 8192  # 141 GB: below SGLang's 160 GiB step
    assert silicon.budget("sglang", pm.load_hardware("b200")) == 16384
    assert silicon.budget("trtllm", pm.load_hardware("b200")) == 8192


@pytest.mark.parametrize("engine,per_rank", [("trtllm", True), ("vllm", True), ("sglang", False)])
def test_under_attention_dp_each_rank_schedules_its_own_budget_but_sglang_divides_one(engine, per_rank):
    """TensorRT-LLM and vLLM run one scheduler per attention-DP rank, each with the whole default: a worker of
    eight ranks runs 8 x 8192 tokens an iteration. SGLang divides its chunked_prefill_size among the ranks."""
    b200 = pm.load_hardware("b200")
    p = {"engine": engine, "budget": silicon.budget(engine, b200)}
    assert silicon.worker_budget(p, Layout(tp=8)) == p["budget"]
    assert silicon.worker_budget(p, Layout(tp=1, ep=8)) == (8 * p["budget"] if per_rank else p["budget"])
    assert silicon.worker_budget(p, Layout(tp=2, ep=4)) == (4 * p["budget"] if per_rank else p["budget"])


def _small(sample, mode, n):
    s = sample[(sample["mode"] == mode) & (sample["osl"] <= 1024) & (sample["isl"] <= 2048)]
    s = s[s["model_path"].isin(["meta-llama/Llama-3.1-70B", "Qwen/Qwen3-32B", "deepseek-ai/DeepSeek-R1"])]
    s = s[s["silicon_data_source"].str.extract(r"silicon_concurrency=(\d+)")[0].astype(float) <= 16]
    return s.head(n)


@pytest.fixture(scope="module")
def points(sample):
    df = pd.concat([_small(sample, "agg", 4), _small(sample, "disagg", 2)])
    return silicon.predict(df, ("roofline", "achievable"))


def test_the_per_point_table_lets_anyone_recompute_the_errors(points):
    ok = points[points["status"] == "ok"]
    assert len(ok) == len(points)
    for k in ("ttft", "tpot"):
        assert np.allclose(ok[f"{k}_error"], ok[f"predicted_{k}_ms"] / ok[f"measured_{k}_ms"] - 1, rtol=1e-12)


def test_an_agg_closed_loop_keeps_exactly_its_clients_in_flight(points):
    agg = points[points["serving_mode"] == "agg"]
    assert np.allclose(agg["in_flight"], agg["concurrency"], rtol=1e-9)


def test_the_achievable_estimate_is_never_faster_than_the_roofline_bound(points):
    r = points[points["mode"] == "roofline"].set_index("id")
    a = points[points["mode"] == "achievable"].set_index("id").loc[r.index]
    assert (a["predicted_tpot_ms"] >= r["predicted_tpot_ms"] * (1 - 1e-9)).all()
    assert (a["predicted_ttft_ms"] >= r["predicted_ttft_ms"] * (1 - 1e-9)).all()


def test_the_roofline_at_the_measured_rate_is_below_its_closed_loop_and_only_the_roofline_has_it(points):
    """Where the roofline's closed loop serves more requests a second than the measured run, the bound holds fewer
    clients in the system (Little's law at the measured rate), and its TTFT and TPOT come out below the loop's."""
    r = points[points["mode"] == "roofline"]
    assert np.isfinite(r[["bound_ttft_ms", "bound_tpot_ms"]].to_numpy()).all()
    assert points.loc[points["mode"] == "achievable", ["bound_ttft_ms", "bound_tpot_ms"]].isna().all().all()
    rate = [silicon.measured_rate(row, p) for (_, row), p in
            zip(r.rename(columns={"measured_ttft_ms": "silicon_ttft_ms", "measured_tpot_ms": "silicon_tpot_ms"})
                .iterrows(), [{"concurrency": n, "spread": None} for n in r["concurrency"]])]
    faster = r["request_rate"].to_numpy() > np.array(rate)
    assert faster.any()
    for k in ("ttft", "tpot"):  # fewer clients in the system: below the loop (the bound is never above it)
        assert (r[f"bound_{k}_ms"][faster] < r[f"predicted_{k}_ms"][faster] * (1 - 1e-3)).any()


def test_the_table_s_bound_is_the_predictor_s_at_the_rate_measured_in_milliseconds(points, sample):
    """predict() gives each roofline point its measured rate (Little's law on the row) and writes the predictor's
    bound in ms."""
    r = points[(points["mode"] == "roofline")]
    for kind in ("agg", "disagg"):
        got = r[r["serving_mode"] == kind].iloc[0]
        row = sample[sample["id"] == got["id"]]
        p = silicon.plan(row)[0]
        p["measured_rate"] = silicon.measured_rate(row.iloc[0], p)
        want = silicon.Predictor("roofline")(p)
        assert got["bound_ttft_ms"] == pytest.approx(want["bound_ttft_s"] * 1e3, rel=1e-9)
        assert got["bound_tpot_ms"] == pytest.approx(want["bound_tpot_s"] * 1e3, rel=1e-9)


def test_disaggregated_stages_share_the_clients(sample):
    """The prefill stage's and the decode stage's clients add up to the benchmark's concurrency, to the last client
    (the share is a real number: silicon_disagg.balance)."""
    df = _small(sample, "disagg", 1)
    p = silicon.plan(df)[0]
    out = silicon.Predictor("roofline")(p)
    N = p["concurrency"]
    assert out["prefill_clients"] + out["decode_clients"] == pytest.approx(N, rel=1e-12)
    assert out["ttft_s"] > out["transfer_s"] > 0


def test_the_per_point_table_says_how_a_disaggregated_row_shared_its_clients(points):
    """prefill_clients + decode_clients = the concurrency on a disaggregated row, in both modes; an agg row has no
    pools to share them (NaN)."""
    d = points[points["serving_mode"] == "disagg"]
    assert len(d) == 4 and np.allclose(d["prefill_clients"] + d["decode_clients"], d["concurrency"], rtol=1e-12)
    assert (d["prefill_clients"] > 0).all() and (d["decode_clients"] > 0).all()
    agg = points[points["serving_mode"] == "agg"]
    assert len(agg) and agg["prefill_clients"].isna().all() and agg["decode_clients"].isna().all()


def test_a_predictor_that_keeps_one_instance_answers_as_one_that_keeps_them_all(sample, monkeypatch):
    """The instances a worker keeps are bounded (MAX_INSTANCES; all of them kept ran a worker out of memory):
    a dropped instance is rebuilt, under a new name for the result memo, and gives the same answer."""
    df = pd.concat([_small(sample, "agg", 3), _small(sample, "disagg", 1)])
    plans = [p for p in silicon.plan(df) if p["status"] == "ok"]
    assert len({(p["model"], silicon._lay(p)) for p in plans}) > 1  # more than one instance is needed
    every = [silicon.Predictor("roofline")(p) for p in plans]
    monkeypatch.setattr(silicon, "MAX_INSTANCES", 1)
    pred = silicon.Predictor("roofline")
    one = [pred(p) for p in plans + plans]
    assert len(pred.insts) == 1 and one == every + every


def test_summary_statistics_are_the_medians_and_p90_of_the_errors():
    t = pd.DataFrame({"mode": ["roofline"] * 5, "status": ["ok"] * 4 + ["skipped"], "backend": ["vllm"] * 5,
                      "system": ["h200_sxm"] * 5, "model_path": ["m"] * 5, "serving_mode": ["agg"] * 5,
                      "band": ["5-32"] * 5, "ttft_error": [-0.5, -0.1, 0.2, 0.4, 9.0],
                      "tpot_error": [0.1, 0.1, 0.3, -0.3, np.nan], "assumed": [""] * 5})
    s = silicon.summarize(t)
    row = s[s["category"] == "overall"].iloc[0]
    assert row["points"] == 4
    assert math.isclose(row["ttft_median_abs"], 0.3) and math.isclose(row["ttft_bias"], 0.05)
    assert math.isclose(row["ttft_p90_abs"], float(np.percentile([0.5, 0.1, 0.2, 0.4], 90)))
    assert math.isclose(row["ttft_within_25"], 0.5) and math.isclose(row["tpot_within_25"], 0.5)  # |0.3| is out


def test_disaggregated_points_are_summarized_apart_by_whether_their_worker_counts_were_recorded():
    """A disagg row without worker counts is predicted with one prefill and one decode worker (an assumption,
    said in `assumed`): the summary keeps those apart from the rows whose deployment is recorded."""
    t = pd.DataFrame({"mode": ["roofline"] * 4, "status": ["ok"] * 4, "backend": ["trtllm"] * 4,
                      "system": ["gb200"] * 4, "model_path": ["m"] * 4, "band": ["5-32"] * 4,
                      "serving_mode": ["agg", "disagg", "disagg", "disagg"],
                      "assumed": ["", "", "workers not given: 1 prefill, 1 decode", "workers not given: 1 prefill, 1 decode"],
                      "ttft_error": [0.1, -0.2, 0.9, 0.7], "tpot_error": [0.0, 0.1, 2.0, 1.0]})
    s = silicon.summarize(t).set_index(["category", "group"])
    assert s.loc[("deployment", "agg"), "points"] == 1
    assert s.loc[("deployment", "disagg, workers recorded"), "tpot_median_abs"] == pytest.approx(0.1)
    assert s.loc[("deployment", "disagg, workers assumed"), "points"] == 2
    assert s.loc[("deployment", "disagg, workers assumed"), "tpot_median_abs"] == pytest.approx(1.5)
    assert s.loc[("serving", "disagg"), "points"] == 3
    assert s.loc[("speculative", "not recorded"), "points"] == 4  # a table without the recipe's columns


def test_a_table_with_the_workers_column_groups_the_recipe_rows_and_their_speculative_decoding_apart():
    """A disagg row's speculative decoding comes from its recipe, an agg row's from the configuration that ran it."""
    t = pd.DataFrame({"mode": ["roofline"] * 6, "status": ["ok"] * 6, "backend": ["trtllm"] * 6,
                      "system": ["gb200"] * 6, "model_path": ["m"] * 6, "band": ["5-32"] * 6,
                      "serving_mode": ["agg"] + ["disagg"] * 4 + ["agg"],
                      "assumed": [""] * 4 + ["workers not given: 1, 1", ""],
                      "workers": ["", "recorded", "recipe", "recipe", "assumed", ""],
                      "speculative": ["", "", "mtp", "none", "", "mtp"],
                      "ttft_error": [0.1, -0.2, 0.9, 0.7, 0.0, 0.3], "tpot_error": [0.0, 0.1, 2.0, 0.4, 3.0, -0.5]})
    s = silicon.summarize(t).set_index(["category", "group"])
    assert s.loc[("deployment", "disagg, workers from the recipe"), "points"] == 2
    assert s.loc[("deployment", "disagg, workers from the recipe"), "tpot_median_abs"] == pytest.approx(1.2)
    assert s.loc[("deployment", "disagg, workers recorded"), "points"] == 1
    assert s.loc[("deployment", "disagg, workers assumed"), "tpot_median_abs"] == pytest.approx(3.0)
    assert s.loc[("speculative", "mtp (recipe)"), "tpot_bias"] == pytest.approx(2.0)
    assert s.loc[("speculative", "none (recipe)"), "tpot_bias"] == pytest.approx(0.4)
    assert s.loc[("speculative", "not recorded"), "points"] == 3
    assert s.loc[("speculative", "mtp (configuration)"), "tpot_bias"] == pytest.approx(-0.5)


def test_the_recipe_table_names_only_disagg_rows_without_worker_counts_and_says_where_each_came_from(sample):
    rec = silicon.recipe_workers()
    rows = sample.set_index("id")
    assert len(rec) == 1067 + 46  # + the GLM-5 and Kimi-K2.5 rows matched to the next day's recipes
    for i, r in rec.items():
        row = rows.loc[i]
        assert row["mode"] == "disagg" and (math.isnan(row["prefill_num_workers"]) or
                                            math.isnan(row["decode_num_workers"])), i
        assert r["prefill_workers"] >= 1 and r["decode_workers"] >= 1
        assert r["speculative"] in ("mtp", "none", "mtp|none")
    src = pd.read_csv(silicon.RECIPES, dtype=str, keep_default_na=False)
    entry = src["source"].str.match(r"SemiAnalysisAI/InferenceX@[0-9a-f]{12}:nvidia-master\.yaml \[")
    nextday = src["note"] == RECIPE_NEXT_DAY_NOTE
    assert (entry | nextday).all() and int(nextday.sum()) == 46
    assert src.loc[nextday, "source"].str.contains(r" \+ recipe NVIDIA/srt-slurm@(?:ed40e8ec076e|10b37984905c):recipes/"
                                                   r"(?:kimi2\.5|GLM5)/", regex=True).all()


RECIPE_NEXT_DAY_NOTE = ("RECIPE_NEXT_DAY: no InferenceX entry was in force at the measured time (a wip run); matched to "
                        "the recipe set its author committed to NVIDIA/srt-slurm the next day")


def test_a_wip_kimi_run_takes_its_workers_limits_and_formats_from_the_recipe_committed_the_next_day(sample):
    """Kimi-K2.5 on GB200, 8k/1k, 105 clients (measured 2026-04-02, no configuration entry in force): the recipe
    ctx1dep4_gen5tep4_batch16_allconc (NVIDIA/srt-slurm ed40e8ec, 2026-04-03), whose concurrencies are 5, 15, 30,
    60 and 105: one prefill worker of 4 GPUs with attention DP, five decode workers of tensor-parallel 4 holding
    whole experts, decode max_batch_size 16 and max_num_tokens 16, an fp8 KV cache, the TRTLLM MoE backend."""
    i = "2026_03_25_kimi_k2_5_gb200_trtllm_fp4_disagg_8192x1024_c105_tp4_0_ep_165"
    p = silicon.plan(sample[sample["id"] == i])[0]
    assert (p["status"], p["workers"], p["speculative"]) == ("ok", "recipe", "none")
    assert (p["prefill_workers"], p["decode_workers"]) == (1, 5)
    assert p["layout"] == Layout(1, 1, 4) and p["decode_layout"] == Layout(4, 1, 1, experts="ep")
    assert (p["decode_max_batch"], p["decode_max_tokens"], p["prefill_max_batch"]) == (16, 16, 2)
    assert (p["kv"], p["prefill_moe_backend"], p["decode_moe_backend"]) == ("fp8", "TRTLLM", "TRTLLM")
    assert "workers not given" not in p["assumed"]
    # where an STP and an MTP recipe both list the concurrency with the same workers, the row is mtp|none
    j = "2026_03_25_kimi_k2_5_gb200_trtllm_fp4_disagg_8192x1024_c60_tp4_0_ep_164"
    q = silicon.plan(sample[sample["id"] == j])[0]
    assert (q["speculative"], q["prefill_workers"], q["decode_workers"]) == ("mtp|none", 1, 5)
    # the one whose STP and MTP recipes disagree (1 or 2 prefill workers) keeps the assumption
    k = "2026_03_25_kimi_k2_5_gb200_trtllm_fp4_disagg_1024x1024_c2253_tp32_0_ep_180"
    r = silicon.plan(sample[sample["id"] == k])[0]
    assert r["workers"] == "assumed" and "workers not given" in r["assumed"]


def test_a_disagg_row_without_worker_counts_takes_its_workers_and_layouts_from_its_recipe(sample, tmp_path):
    """InferenceX's recipe c32_ctx1_gen9_tep8 (h200, 1k/1k, 288 clients): one prefill worker of 8 GPUs with
    attention DP, nine decode workers of tensor-parallel 8 holding whole experts (tep8: the experts expert-parallel
    over the 8). A row not in the table keeps the assumption."""
    i = "2026_03_25_deepseek_r1_h200_sxm_trtllm_fp8_disagg_1024x1024_c288_tp8_0_ep8_0_353"
    p = silicon.plan(sample[sample["id"] == i])[0]
    assert (p["status"], p["workers"], p["speculative"]) == ("ok", "recipe", "none")
    assert (p["prefill_workers"], p["decode_workers"]) == (1, 9)
    assert p["layout"] == Layout(1, 1, 8) and p["decode_layout"] == Layout(8, 1, 1, experts="ep")
    assert p["assumed"] == ""
    empty = tmp_path / "none.csv"
    empty.write_text(silicon.RECIPES.read_text().splitlines()[0] + "\n")
    q = silicon.plan(sample[sample["id"] == i], recipes=empty)[0]
    assert (q["workers"], q["prefill_workers"], q["decode_workers"]) == ("assumed", 1, 1)
    assert q["layout"] == Layout(8, 1, 1) and "workers not given" in q["assumed"]
    rec = sample[sample["mode"] == "disagg"].dropna(subset=["prefill_num_workers", "decode_num_workers"]).head(3)
    assert {p["workers"] for p in silicon.plan(rec)} == {"recorded"}


@pytest.mark.parametrize("gpus, dp, want", [(8, True, (1, 8)), (8, False, (8, 1)), (8, None, (8, 2)),
                                            (None, True, (4, 2))])
def test_a_recipe_s_pool_is_attention_dp_over_its_gpus_or_tensor_parallel_and_falls_back_to_the_row(gpus, dp, want):
    rec = {"prefill_gpus": gpus, "prefill_dp_attn": dp}
    row = {"prefill_tp_size": 4, "prefill_attention_dp_size": 2}
    assert silicon._recipe_layout(rec, row, "prefill") == want


def test_validate_serving_from_the_cli_writes_the_table_and_the_plot(tmp_path, capsys):
    out, png = tmp_path / "pts.csv", tmp_path / "pts.png"
    assert main(["validate", "--serving", "-m", "llama-3.1-8b", "--system", "h200_sxm", "--backend", "vllm",
                 "--mode", "roofline", "--jobs", "1", "-o", str(out), "--plot", str(png)]) == 0
    text = capsys.readouterr().out
    assert "predicted 21 of 21 points (100.0%)" in text and "TTFT median |err|" in text
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 21 and {"measured_ttft_ms", "predicted_ttft_ms", "measured_tpot_ms",
                                "predicted_tpot_ms"} <= set(rows[0])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("argv, msg", [
    (["--serving", "--sample", "/nonexistent/x.csv"], "/nonexistent/x.csv: no such silicon sample"),
    (["--serving", "--sample", "/dev/zero"], "/dev/zero: it is not a regular file"),
    (["--serving", "--points", "/nonexistent/p.csv"], "/nonexistent/p.csv: no such points table"),
    (["--serving", "-m", "no-such-model"], "--model: no point has 'no-such-model'"),
    (["--serving", "-m", "llama-3.1-8b,,qwen3-32b"], "--model: an empty entry"),
    (["--serving", "--mode", "simple"], "--mode: must be roofline, achievable or both"),
    (["--serving", "--published"], "--serving: takes no results folder and not --published"),
    (["--serving", "--rounds", "0"], "--rounds: must be a whole number from 1 to 20"),
    (["-o", "x.csv"], "-o: goes with --serving"),
    (["--published", "--backend", "vllm"], "--backend: goes with --serving"),
])
def test_bad_serving_validation_input_gets_one_line_and_exit_2(capsys, argv, msg):
    assert main(["validate", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert msg in err and len(err.splitlines()) == 1


def test_a_sample_file_missing_a_column_or_with_a_bad_value_is_refused(tmp_path, capsys, sample):
    bad = tmp_path / "bad.csv"
    sample.drop(columns=["silicon_tpot_ms"]).head(3).to_csv(bad, index=False)
    assert main(["validate", "--serving", "--sample", str(bad)]) == 2
    assert "silicon_tpot_ms: missing column" in capsys.readouterr().err
    neg = sample.head(3).copy()
    neg.loc[neg.index[1], "osl"] = -5
    neg.to_csv(bad, index=False)
    assert main(["validate", "--serving", "--sample", str(bad)]) == 2
    assert "row 3, column osl: expected a whole number >= 1, got '-5'" in capsys.readouterr().err
    for c, v in (("isl", 0.5), ("osl", 128.5)):  # a token count is whole: 0.5 was read as a 0-token prompt
        frac = sample.head(3).copy()
        frac[c] = frac[c].astype(float)
        frac.loc[frac.index[2], c] = v
        frac.to_csv(bad, index=False)
        assert main(["validate", "--serving", "--sample", str(bad)]) == 2
        assert f"row 4, column {c}: expected a whole number >= 1, got '{v}'" in capsys.readouterr().err
    neg = sample.head(3).copy()
    neg.loc[neg.index[0], "silicon_ttft_ms"] = 0.0
    neg.to_csv(bad, index=False)
    assert main(["validate", "--serving", "--sample", str(bad)]) == 2
    assert "row 2, column silicon_ttft_ms: expected a positive number" in capsys.readouterr().err


def test_the_api_returns_the_points_and_their_summary():
    v = pm.serving_validation(model=["llama-3.1-8b"], system=["h200_sxm"], backend=["vllm"], modes=("roofline",))
    s = pm.serving_validation_summary(v)
    assert len(v) == 21 and s[s.category == "overall"].points.tolist() == [21]


def test_a_saved_table_is_summarized_and_compared_with_a_peer_without_simulating(tmp_path, capsys, points):
    saved, peer = tmp_path / "pts.csv", tmp_path / "peer.csv"
    points.to_csv(saved, index=False)
    ok = points[(points["mode"] == "roofline")]
    # a peer that is exactly right on the first point and 2x too slow on the others
    pd.DataFrame({"id": ok["id"], "aic_ttft_ms": [ok["measured_ttft_ms"].iloc[0]] + list(2 * ok["measured_ttft_ms"].iloc[1:]),
                  "aic_tpot_ms": ok["measured_tpot_ms"]}).to_csv(peer, index=False)
    c = silicon.compare(silicon.load_points(saved), peer)
    row = c[c["category"] == "overall"].iloc[0]
    assert row["points"] == len(ok) and c.attrs["both"] == len(ok)
    assert row["aic_tpot_median_abs"] == 0.0 and math.isclose(row["aic_ttft_median_abs"], 1.0)
    assert math.isclose(row["roofline_ttft_median_abs"], float(np.median(np.abs(ok["ttft_error"]))))
    assert main(["validate", "--serving", "--points", str(saved), "--compare", str(peer), "--summary"]) == 0
    out = capsys.readouterr().out
    assert "TTFT AIC" in out and f"on the {len(ok)} points both predicted" in out


def test_a_saved_table_or_peer_file_that_is_not_one_is_refused(tmp_path, capsys):
    bad = tmp_path / "x.csv"
    bad.write_text("id,foo\n1,2\n")
    assert main(["validate", "--serving", "--points", str(bad)]) == 2
    assert "x.csv: mode: missing column" in capsys.readouterr().err
    # a table with every column but one the summary reads: one line, not a KeyError
    t = pd.read_csv(Path(__file__).resolve().parent.parent / "docs" / "validation" / "serving" / "points.csv", nrows=10)
    for col in ("assumed", "reason"):
        t.drop(columns=[col]).to_csv(bad, index=False)
        assert main(["validate", "--serving", "--points", str(bad)]) == 2
        assert f"x.csv: {col}: missing column" in capsys.readouterr().err


def test_the_whole_sample_is_refused_up_front_without_max_points(capsys):
    assert main(["validate", "--serving"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--max-points: 5,221 points x 2 mode(s) = 10,442 simulations, over the limit of 200" in err
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize("opt", ["-o", "--plot"])
def test_an_output_into_a_missing_folder_is_refused_before_any_simulation(capsys, monkeypatch, tmp_path, opt):
    def boom(*a, **k):
        raise AssertionError("simulated before checking the output path")

    monkeypatch.setattr(silicon, "predict", boom)
    assert main(["validate", "--serving", "-m", "llama-3.1-8b", opt, str(tmp_path / "no" / "x.png")]) == 2
    assert f"{opt}: cannot write" in capsys.readouterr().err


def test_the_profiling_phase_mean_counts_its_burst_its_middle_rounds_and_its_last_round():
    """AIPerf measures 20 N requests that start on an empty server: the simulated loop's first warm-up x N
    requests stand for the phase's first rounds, its last N for the last round, and the measured window for
    the 20 - warm-up - 1 rounds between: (sum(head) + 17 N mean(window) + sum(tail)) / 20 N at warm-up 2."""
    n, w, r = 3, 2, 2
    head, mid, tail = [9.0] * (w * n), [1.0, 2.0, 3.0] * r, [4.0] * n
    x = np.array(head + mid + tail)
    assert silicon.profile_mean(x, n, w, r) == pytest.approx((9 * 6 + 17 * 3 * 2.0 + 4 * 3) / 60)
    assert silicon.profile_mean(np.full(x.size, 5.0), n, w, r) == pytest.approx(5.0)  # a steady loop: its value
    assert silicon.profile_mean(np.array(mid + tail), n, 0, r) == pytest.approx(2.0)  # no warm-up: the window
    assert silicon.profile_mean(x, n, w, r, profile=w + 1) == pytest.approx((9 * 6 + 4 * 3) / 9)  # no middle


def test_a_burst_of_prompts_on_an_empty_server_raises_the_mean_ttft_and_one_client_has_no_burst(sample):
    """N prompts sent at once queue behind each other's prefill: the profiling phase's mean TTFT is above the
    steady window's, by about the burst's share (1/20 of the requests); one client never queues."""
    p = [q for q in silicon.plan(_small(sample, "agg", 1)) if q["status"] == "ok"][0]
    pred = silicon.Predictor("roofline")
    inst = pred.instance(p, p["layout"], p["budget"])
    many = pred.closed(inst, 64, 2048, 64)
    assert many["ttft_profile"] > many["ttft"]
    one = pred.closed(inst, 1, 2048, 64)
    assert one["ttft_profile"] == pytest.approx(one["ttft"], rel=1e-6)
    assert one["tpot_profile"] == pytest.approx(one["tpot"], rel=1e-6)


def test_an_fp8_block_quant_mode_or_a_block_scaled_checkpoint_is_priced_as_fp8_b128_the_rest_as_per_tensor(sample):
    """AIConfigurator records a row's GEMM and MoE quant modes; fp8_block (block-scaled FP8) maps to fp8-b128, and so
    does fp8 of a checkpoint stored block-scaled (DeepSeek-R1/V3, Qwen3-235B-A22B-FP8, MiniMax-M2.5)."""
    row = {"model_path": "meta-llama/Llama-3.1-70B", "gemm_quant_mode": "fp8", "moe_quant_mode": "fp8"}
    assert silicon.weights_format(row, "fp8") == "fp8"
    assert silicon.weights_format(dict(row, moe_quant_mode="fp8_block"), "fp8") == "fp8-b128"
    assert silicon.weights_format(dict(row, gemm_quant_mode="fp8_block"), "fp8") == "fp8-b128"
    assert silicon.weights_format(dict(row, gemm_quant_mode="nvfp4", moe_quant_mode="fp8_block"), "nvfp4") == "nvfp4"
    for path in ("deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V3", "Qwen/Qwen3-235B-A22B-FP8",
                 "MiniMaxAI/MiniMax-M2.5"):
        assert silicon.weights_format(dict(row, model_path=path), "fp8") == "fp8-b128"
        assert silicon.weights_format(dict(row, model_path=path), "nvfp4") == "nvfp4"  # an NVFP4 run stays NVFP4
    by = {p["id"]: p for p in silicon.plan(sample) if p["status"] == "ok"}
    n = 0
    for _, r in sample.iterrows():
        if r["id"] in by and by[r["id"]]["weights"].startswith("fp8"):
            block = "fp8_block" in (r["gemm_quant_mode"], r["moe_quant_mode"]) or r["model_path"] in silicon.BLOCK_FP8
            assert by[r["id"]]["weights"] == ("fp8-b128" if block else "fp8"), r["id"]
            n += by[r["id"]]["weights"] == "fp8"
    assert n > 500  # the rest (Llama-3.1, Qwen3-32B; Qwen3.5 and GLM-5, whose checkpoint is not sourced) per-tensor


def test_a_decode_worker_s_wait_for_a_place_is_ttft_and_tpot_runs_from_the_first_token_it_streams(sample):
    """Dynamo streams every token of a disaggregated request from the decode worker: a prefilled request that
    waits there for a place (more clients than the worker holds) waits before its first token. So the decode
    stage's "ttft" is its arrival to the end of its first iteration there, and its TPOT, from that token to the
    last, is the running batch's step time whether or not requests wait."""
    p = [q for q in silicon.plan(_small(sample, "disagg", 1)) if q["status"] == "ok"][0]
    pred = silicon.Predictor("roofline")
    dec = pred.instance(p, p["decode_layout"], silicon.worker_budget(p, p["decode_layout"]))
    isl, osl = 1024, 64
    free = pred.closed(dec, 4, isl, osl, prefilled=True, slots=4)
    held = pred.closed(dec, 8, isl, osl, prefilled=True, slots=4)  # twice the clients the worker holds
    assert free["ttft"] == pytest.approx(dec.step(np.ones(4, dtype=np.int64), np.full(4, isl + 1)), rel=0.05)
    assert held["ttft"] > 10 * free["ttft"]  # half of them wait a whole request for a place
    assert held["tpot"] == pytest.approx(free["tpot"], rel=0.05)  # four rows run either way
    assert held["stage"] == pytest.approx(held["ttft"] + (osl - 1) * held["tpot"], rel=1e-6)


def test_a_disaggregated_phase_opens_with_all_n_prompts_on_the_prefill_pool(sample):
    """AIPerf sends all N prompts at once when its phase starts: the prefill pool's first round is N / W_p
    prompts a worker, whatever share of the clients the pools hold once steady. Its mean over the phase is
    (the burst's mean + 19 x the steady mean) / 20; one prompt is no burst."""
    p = [q for q in silicon.plan(_small(sample, "disagg", 1)) if q["status"] == "ok"][0]
    pred = silicon.Predictor("roofline")
    pre = pred.instance(p, p["layout"], silicon.worker_budget(p, p["layout"]))
    one = float(pre.step(np.array([2048]), np.array([2048])))
    assert pred.burst_mean(pre, 1, 2048, one) == pytest.approx(one, rel=1e-9)
    k = max(1, pre.budget // 2048)  # whole prompts an iteration
    n = 8 * k  # eight iterations' worth: the burst's mean is (1 + ... + 8) / 8 iterations of k prompts
    it = float(pre.step(np.full(k, 2048), np.full(k, 2048)))
    assert pred.burst_mean(pre, n, 2048, one, profile=1) == pytest.approx(4.5 * it, rel=1e-6)
    assert pred.burst_mean(pre, n, 2048, one) == pytest.approx((4.5 * it + 19 * one) / 20, rel=1e-6)


def test_sglang_runs_its_prompts_in_prefill_batches_of_their_own_and_the_others_mix_them_into_decodes(sample):
    """SGLang's default scheduler runs a waiting prefill batch before the decode batch and never mixes the two
    (enable_mixed_chunk off): the agg loop runs separate prefill iterations for SGLang, chunked ones (prompt
    tokens in the decode steps) for vLLM V1 and TensorRT-LLM."""
    assert silicon.PREFILL == {"sglang": "separate", "trtllm": "whole"}
    p = [q for q in silicon.plan(_small(sample, "agg", 1)) if q["status"] == "ok"][0]
    out = {}
    for engine in ("sglang", "vllm"):
        q = dict(p, engine=engine, concurrency=16)  # prompts arrive while others decode
        pred = silicon.Predictor("roofline")
        r = pred(q)
        inst = pred.instance(q, q["layout"], silicon.worker_budget(q, q["layout"]))
        slots = pred.no_evict(inst, q["isl"], q["osl"], engine)
        mine = pred.closed(inst, q["concurrency"], q["isl"], q["osl"], slots=slots,
                           prefill="separate" if engine == "sglang" else "chunked")
        assert r["ttft_s"] == mine["ttft_profile"] and r["tpot_s"] == mine["tpot_profile"]
        out[engine] = r
    assert out["sglang"] != out["vllm"]  # the two schedules differ on this point


def test_a_row_that_ran_a_requantized_checkpoint_prices_the_experts_in_the_row_s_format(sample):
    """Kimi-K2.5's catalog spec pins its routed experts to int4-g32 (moonshotai's INT4 checkpoint). Its nvfp4 rows
    ran an NVFP4 checkpoint: their experts are nvfp4 (a number class the pinned INT4 is not); its int4_wo rows keep
    the checkpoint's int4-g32, gpt-oss's fp4 rows its MXFP4 (of one class with nvfp4), and a model that pins
    nothing is left alone."""
    kimi, oss, r1 = (pm.load_model(n) for n in ("kimi-k2.5", "gpt-oss-120b", "deepseek-r1"))
    row = {"gemm_quant_mode": "nvfp4", "moe_quant_mode": "nvfp4"}
    assert silicon.experts_format(kimi, row) == "nvfp4"
    assert silicon.experts_format(kimi, dict(row, moe_quant_mode="fp8_block")) == "fp8-b128"
    assert silicon.experts_format(kimi, {"moe_quant_mode": "int4_wo"}) is None
    assert silicon.experts_format(kimi, {"moe_quant_mode": math.nan}) is None
    assert silicon.experts_format(oss, row) is None
    assert silicon.experts_format(r1, row) is None
    rows = sample[sample["model_path"] == "moonshotai/Kimi-K2.5"]
    by = {p["id"]: p for p in silicon.plan(rows) if p["status"] == "ok"}
    quant = dict(zip(rows["id"], rows["moe_quant_mode"]))
    pins = {i: dict(p.get("pins", ())) for i, p in by.items()}
    assert {pins[i].get("experts") for i in by if quant[i] == "nvfp4"} == {"nvfp4"}
    assert {pins[i].get("experts") for i in by if quant[i] == "int4_wo"} == {None}
    plans = list(by.values())
    # the instance builds its model with the row's experts
    p = next(p for p in plans if dict(p.get("pins", ())).get("experts") == "nvfp4" and p["engine"] == "vllm")
    inst = silicon.Predictor("roofline").instance(p, p["layout"], 8192)
    assert inst.model.weight_format("experts") == "nvfp4"


def test_an_nvfp4_row_keeps_out_of_nvfp4_the_layers_its_checkpoint_keeps_out(sample):
    """NVIDIA's NVFP4 checkpoints exclude layers from NVFP4 (silicon_plan.NVFP4_KEPT): DeepSeek-R1-0528-NVFP4-v2
    keeps q_a, q_b, kv_a and kv_b in bf16 and quantizes o_proj; Qwen3.5's keeps all attention and the shared
    experts bf16; Kimi-K2.5's quantizes the dense layer and shared experts that moonshotai's INT4 keeps bf16.
    Rows in other formats keep the catalog model's formats."""
    r1, kimi = pm.load_model("deepseek-r1"), pm.load_model("kimi-k2.5")
    fp4 = {"model_path": "deepseek-ai/DeepSeek-R1", "gemm_quant_mode": "nvfp4", "moe_quant_mode": "nvfp4"}
    assert silicon.checkpoint_pins(r1, fp4, "nvfp4") == (("attention", "bf16"), ("attention_out", "nvfp4"))
    assert silicon.checkpoint_pins(r1, dict(fp4, gemm_quant_mode="fp8_block"), "fp8_block") == ()
    k = dict(silicon.checkpoint_pins(kimi, dict(fp4, model_path="moonshotai/Kimi-K2.5"), "nvfp4"))
    assert k == {"attention": "bf16", "mlp": "nvfp4", "shared_expert": "nvfp4", "experts": "nvfp4"}
    rows = sample[(sample["model_path"] == "deepseek-ai/DeepSeek-R1") & (sample["gemm_quant_mode"] == "nvfp4")]
    p = next(p for p in silicon.plan(rows.head(20)) if p["status"] == "ok")
    inst = silicon.Predictor("roofline").instance(p, p["layout"], 8192)
    m = inst.model
    assert (m.weight_format("attention"), m.weight_format("attention_out")) == ("bf16", "nvfp4")
    from perfmodel.ops import build_ops

    fmts = {op.name: op.wfmt for op in build_ops(m, 1.0, 1.0, 128.0, "decode", inst.prec) if op.params}
    assert fmts["q_a_proj"] == fmts["q_b_proj"] == fmts["kv_a_proj"] == "bf16"
    assert fmts["o_proj"] == "nvfp4" and fmts["shared_expert_up_gate"] == "nvfp4"


def test_a_point_s_concurrency_band_has_every_client_count_in_exactly_one_band_from_one_client_up():
    """The summary's concurrency bands: 1-4, 5-32, 33-128, 129-512, >512, each edge in the band it names."""
    want = {1: "1-4", 4: "1-4", 5: "5-32", 32: "5-32", 33: "33-128", 128: "33-128", 129: "129-512", 512: "129-512",
            513: ">512", 10 ** 6: ">512"}
    assert {n: silicon._band(n) for n in want} == want
    assert silicon._band(0) == ""  # no clients: no band


def test_a_disaggregated_point_s_decode_worker_forms_its_batches_ahead_and_its_prefill_worker_does_not(sample,
                                                                                                    monkeypatch):
    """In the achievable mode the decode worker runs its engine's overlap scheduler (a prefilled request waits for
    the batch formed after it arrives); the prefill worker's is not simulated (TensorRT-LLM's context servers run
    with disable_overlap_scheduler: docs/launch.md). The roofline has no engine and forms no batch ahead."""
    p = [q for q in silicon.plan(_small(sample, "disagg", 1)) if q["status"] == "ok"][0]
    seen = []
    orig = fastsim.run

    def run(*a, prefilled=False, ahead=False, **k):  # every simulated worker, the joint loop's and the pools'
        seen.append((prefilled, ahead))
        return orig(*a, prefilled=prefilled, ahead=ahead, **k)

    monkeypatch.setattr(fastsim, "run", run)
    for mode, want in (("achievable", True), ("roofline", False)):
        seen.clear()
        silicon.Predictor(mode)(dict(p, isl=512, osl=16, concurrency=4))
        assert {a for pre, a in seen if pre} == {want} and {a for pre, a in seen if not pre} == {False}, mode


def test_a_disaggregated_point_of_one_output_token_has_no_decode_stage(sample, monkeypatch):
    """One output token comes with the prefill: the decode worker is not simulated (no TPOT: NaN), and the TTFT is
    the prefill pool's stage plus the KV transfer. With two, the decode worker runs and its first iteration is in
    the TTFT (Dynamo streams a request's tokens from the decode worker)."""
    p = [q for q in silicon.plan(_small(sample, "disagg", 1)) if q["status"] == "ok"][0]
    seen = []
    orig = fastsim.run

    def run(*a, prefilled=False, **k):  # every simulated worker, the joint loop's and the pools'
        seen.append(prefilled)
        return orig(*a, prefilled=prefilled, **k)

    monkeypatch.setattr(fastsim, "run", run)
    for N in (4, silicon_disagg.JOINT_CLIENTS + 1):  # the joint loop, and the pooled one above it
        pred = silicon.Predictor("roofline")
        seen.clear()
        r = pred(dict(p, isl=512, osl=1, concurrency=N, spread=None))
        assert math.isnan(r["tpot_s"]) and r["ttft_s"] > r["transfer_s"] > 0
        assert seen and not any(seen)  # prefill workers only
        seen.clear()
        two = pred(dict(p, isl=512, osl=2, concurrency=N, spread=None))  # two: the decode worker makes the second
        assert not math.isnan(two["tpot_s"]) and two["ttft_s"] > r["ttft_s"]  # both tokens in its first response
        assert any(seen)


def test_deepseek_r1_nvfp4_v2_s_pins_give_the_checkpoint_s_size_on_disk():
    """nvidia/DeepSeek-R1-0528-NVFP4-v2 is 413,340,567,567 B on disk (github.com/edwardsp/blobcache's benchmark
    results: `models/nvidia_DeepSeek-R1-0528-NVFP4-v2/ (350 files, 413,340,567,567 B)`). The op list's weights with
    its pins (q_a, q_b, kv_a, kv_b bf16; o_proj, MLPs and experts NVFP4 at 4.5 bits; embedding, router and head
    bf16), plus its MTP layer in bf16 with the module's own embedding and head copies, come within 0.05% (the rest
    is safetensors headers, per-tensor fp32 scales and the tokenizer); fp8 q/kv would be 1% short."""
    pins = dict(silicon.NVFP4_KEPT["deepseek-ai/DeepSeek-R1"])
    w = pm.weights("deepseek-r1", weights_dtype="nvfp4", act_dtype="fp4",
                   sets={f"weight_formats.{g}": f for g, f in pins.items()})
    m = pm.load_model("deepseek-r1")
    mtp = module_memory(m, Precision("bf16", "bf16", "bf16"))[0] + 2 * m.V * m.D * 2.0
    total = float(np.sum(w["weight_bytes"])) + mtp
    assert total == pytest.approx(413_340_567_567, rel=5e-4)
    q_kv = sum(p for c, f, p in zip(w["component"], w["format"], w["params"]) if c == "attention" and f == "bf16")
    assert q_kv == 61 * (7168 * 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 * 128 * 256)
    assert total - q_kv * 1.0 < 413_340_567_567 * 0.99  # stored in fp8 they would not make the size


def test_a_predicted_row_s_precision_names_the_checkpoint_s_pins(sample):
    """The `precision` column is weights/activations/KV, then the row's checkpoint pins: an nvfp4 DeepSeek-R1 row
    (DeepSeek-R1-0528-NVFP4-v2) reads "nvfp4/nvfp4/fp8 (attention bf16, attention_out nvfp4)", an fp8 one pins
    nothing; a row that was not planned has no precision."""
    rows = sample[(sample["model_path"] == "deepseek-ai/DeepSeek-R1") & (sample["mode"] == "agg")]
    fp4 = rows[rows["gemm_quant_mode"] == "nvfp4"].head(1)
    fp8 = rows[rows["gemm_quant_mode"] == "fp8"].head(1)  # a block-scaled checkpoint (BLOCK_FP8)
    bad = fp8.assign(id="no-such-model", model_path="nobody/none")
    t = silicon.predict(pd.concat([fp4, fp8, bad]), ("roofline",))
    got = dict(zip(t["id"], t["precision"]))
    assert got[fp4["id"].iloc[0]] == "nvfp4/nvfp4/fp8 (attention bf16, attention_out nvfp4)"
    assert got[fp8["id"].iloc[0]] == "fp8-b128/fp8/fp8"
    assert got["no-such-model"] == ""


def test_a_saved_table_keeps_its_words_as_written_and_reads_one_without_a_moe_backend_column(tmp_path, points):
    """A reason such as "N/A" is text, not a missing value; the moe_backend column (the TensorRT-LLM MoE backend a
    run named) reads back as written, and a table written before it existed reads with it blank."""
    t = points.copy()
    t["reason"], t["moe_backend"] = "N/A", "DEEPGEMM/TRTLLM"
    t.to_csv(tmp_path / "a.csv", index=False)
    back = silicon.load_points(tmp_path / "a.csv")
    assert (back["reason"] == "N/A").all() and (back["moe_backend"] == "DEEPGEMM/TRTLLM").all()
    t.drop(columns="moe_backend").to_csv(tmp_path / "old.csv", index=False)
    assert (silicon.load_points(tmp_path / "old.csv")["moe_backend"] == "").all()
