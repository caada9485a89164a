"""How `validate --serving` reads a measured row into a deployment (serving/silicon_plan.py): counts, clients, the
worker layout and where its experts sit, the workers of a disaggregated row, and what it says it assumed."""
import collections
import dataclasses
import math
from types import SimpleNamespace

import pytest

import perfmodel as pm
from perfmodel.errors import SpecError
from perfmodel.runconfig import Layout
from perfmodel.serving import silicon, silicon_plan as sp

DS, LLAMA = pm.load_model("deepseek-r1"), pm.load_model("llama-3.1-70b")  # 128 heads, 256 experts; 64 heads / 8 KV


@pytest.mark.parametrize("x, want", [(1, 1), (4.0, 4), ("8", 8), (0, None), (0.0, None), (-2, None), (2.5, None),
                                     (math.nan, None), ("", None), (None, None)])
def test_a_count_is_a_whole_number_of_at_least_one_or_none(x, want):
    assert sp._int(x) == want


def test_concurrency_falls_back_past_a_zero_and_counts_one_rank_or_worker_where_none_is_recorded():
    agg = {"mode": "agg", "batch_size": 64.0, "attention_dp_size": math.nan, "id": "m"}
    assert sp.concurrency({**agg, "silicon_data_source": "silicon_concurrency=0", "id": "x_c12_y"}) == 12
    assert sp.concurrency({**agg, "silicon_data_source": ""}) == 64  # no attention DP recorded: one rank
    assert sp.concurrency({**agg, "batch_size": math.nan}) is None
    dis = {"mode": "disagg", "silicon_data_source": "", "id": "", "decode_batch_size": 48.0, "decode_num_workers": 4.0}
    assert sp.concurrency({**dis, "decode_attention_dp_size": math.nan}) == 192
    assert sp.concurrency({**dis, "decode_attention_dp_size": 2.0}) == 384  # 48 a rank, 2 ranks, 4 workers
    assert sp.concurrency({**dis, "decode_attention_dp_size": 2.0, "decode_num_workers": math.nan}) is None
    assert sp.concurrency({**dis, "decode_attention_dp_size": 2.0, "decode_batch_size": math.nan}) is None


def test_a_worker_layout_needs_a_tp_that_splits_the_heads_and_an_attention_dp_that_splits_the_experts():
    assert sp._layout(DS, math.nan, 1) == (None, "no tp_size")
    assert sp._layout(DS, 8, math.nan) == (Layout(8, 1, 1, 1), "")  # no attention DP recorded: none
    assert sp._layout(LLAMA, 16, 1)[0] == Layout(16, 1, 1, 1)  # 8 KV heads, each on 2 of 16 devices
    assert sp._layout(LLAMA, 24, 1)[1] == "tp 24 does not divide 64 heads / 8 KV heads"
    odd = DS.replace(moe=dataclasses.replace(DS.moe, n_experts=255))
    assert sp._layout(odd, 8, 2)[1] == "255 experts do not split over 2 attention-DP groups"
    assert sp._layout(odd, 8, 1)[0] == Layout(8, 1, 1, 1)


@pytest.mark.parametrize("model, tp, dp, want", [
    (DS, 8, 1, "ep"), (DS, 2, 1, "ep"), (DS, 2, 2, "ep"),  # 256 experts over 8, 2 or 4 devices
    (DS, 1, 1, "tp"),  # one device: nothing to spread
    (LLAMA, 8, 1, "tp"),  # a dense model has no experts
    ("12 experts", 4, 2, "tp"),  # 12 experts over 8 devices do not split whole
    ("12 experts", 2, 2, "ep"),  # over 4 they do
])
def test_whole_experts_are_spread_over_the_worker_only_where_they_split_over_its_devices(model, tp, dp, want):
    if model == "12 experts":
        model = DS.replace(moe=dataclasses.replace(DS.moe, n_experts=12))
    lay, why = sp._layout(model, tp, dp, "ep")
    assert why == "" and lay.experts == want
    assert sp._layout(model, tp, dp, "tp")[0].experts == "tp"


@pytest.mark.parametrize("row, tp, dp, ran, want", [
    ({"id": "a_tp8_ep8_1"}, 8, 1, None, "ep"),  # the id's GPUs hold the experts, no attention DP: TEP
    ({"id": "a_tp2_ep2_1"}, 2, 1, None, "ep"),
    ({"id": "a_tp8_ep8_1"}, 8, 2, None, "tp"),  # attention DP: not TEP
    ({"id": "a_tp8_ep8_1"}, 1, 1, None, "tp"),  # one device a worker
    ({"id": "a_tp8_ep4_1"}, 8, 1, None, "tp"),  # experts over 4 of the 8
    ({"id": "a_tp4_ep8_1"}, 8, 1, None, "tp"),
    ({"id": "m", "moe_tp_size": 1.0, "moe_ep_size": 8.0}, 8, 1, None, "ep"),  # no layout in the id: the sample's split
    ({"id": "m", "moe_tp_size": 1.0, "moe_ep_size": 4.0}, 8, 1, None, "tp"),
    ({"id": "m", "moe_tp_size": 2.0, "moe_ep_size": 8.0}, 8, 1, None, "tp"),
    ({"id": "m"}, 8, 1, (8, 8, False), "ep"),  # the run's configuration entry: tp 8, ep 8, no dp-attn
    ({"id": "m"}, 8, 1, (8, 8, True), "tp"),
    ({"id": "m"}, 8, 1, (8, 4, False), "tp"),
    ({"id": "m"}, 8, 1, (4, 8, False), "tp"),
    ({"id": "m"}, 8, 1, (4, 4, False), "tp"),
    ({"id": "a_tp8_ep8_1"}, 8, 1, (8, 8, None), "ep"),  # an entry that does not say: the id
    ({"id": "m", "moe_tp_size": 2.0, "moe_ep_size": 4.0}, 8, 1, (8, 8, None), "tp"),  # ... or the sample's split
    ({"id": "a_tp1_ep1_1"}, 1, 1, None, "tp"),  # one device a worker, whatever the id says
    ({"id": "m", "moe_tp_size": 1.0, "moe_ep_size": 1.0}, 1, 1, None, "tp"),
])
def test_an_agg_worker_ran_tep_where_its_configuration_its_id_or_the_sample_says_the_experts_were_spread(
        monkeypatch, row, tp, dp, ran, want):
    monkeypatch.setattr(sp, "agg_topology", lambda: {"m": ran} if ran is not None else {})
    if ran is not None and row["id"] != "m":
        monkeypatch.setattr(sp, "agg_topology", lambda: {row["id"]: ran})
    assert sp.tep_experts(row, tp, dp) == want


@pytest.mark.parametrize("row, want", [
    ({"id": "m", "tp_size": math.nan, "attention_dp_size": 1.0}, (None, 1, "")),
    ({"id": "m", "tp_size": 16.0, "attention_dp_size": 1.0, "moe_tp_size": 4.0, "moe_ep_size": 4.0},
     (4, 1, "the sample's tp_size 16 is moe_tp x moe_ep (4 x 4): 4 GPUs")),
    ({"id": "m", "tp_size": 1.0, "attention_dp_size": 16.0, "moe_tp_size": 4.0, "moe_ep_size": 4.0},
     (1, 4, "the sample's attention_dp_size 16 is moe_tp x moe_ep (4 x 4): 4 GPUs")),
    ({"id": "m", "tp_size": 9.0, "attention_dp_size": 1.0, "moe_tp_size": 3.0, "moe_ep_size": 3.0}, (9, 1, "")),
    ({"id": "m", "tp_size": 2.0, "attention_dp_size": 8.0, "moe_tp_size": 4.0, "moe_ep_size": 4.0}, (2, 8, "")),
    ({"id": "a_tp8_ep2_1", "tp_size": 16.0, "attention_dp_size": 1.0},
     (8, 1, "the sample's tp_size 16 is tp x ep of the run its id names (tp8_ep2): 8 GPUs")),
    ({"id": "a_tp8_ep2_1", "tp_size": 1.0, "attention_dp_size": 16.0},
     (1, 8, "the sample's attention_dp_size 16 is tp x ep of the run its id names (tp8_ep2): 8 GPUs")),
    ({"id": "a_tp8_ep2_1", "tp_size": 2.0, "attention_dp_size": 8.0}, (2, 8, "")),  # both above one: as given
    ({"id": "m", "tp_size": 8.0, "attention_dp_size": 2.0, "moe_tp_size": 4.0, "moe_ep_size": 4.0}, (8, 2, "")),
    ({"id": "a_tp1_ep2_1", "tp_size": 1.0, "attention_dp_size": 2.0},
     (1, 1, "the sample's attention_dp_size 2 is tp x ep of the run its id names (tp1_ep2): 1 GPUs")),
])
def test_an_agg_row_whose_gpus_are_a_product_runs_on_the_gpus_its_id_or_expert_split_names(monkeypatch, row, want):
    monkeypatch.setattr(sp, "agg_topology", lambda: {})
    assert sp.agg_parallel(row) == want


@pytest.mark.parametrize("gib, want", [(141, 8192), (159.99, 8192), (160, 16384), (180, 16384)])
def test_sglang_s_default_chunk_doubles_from_160_gib_of_device_memory_and_the_others_stay_at_8192(gib, want):
    """SGLang's chunked_prefill_size is 8,192 below 160 GiB of GPU memory and 16,384 from there (server_args.py
    _handle_gpu_memory_settings, which compares MiB: 160 x 1024); vLLM's and TensorRT-LLM's defaults do not depend
    on it."""
    hw = SimpleNamespace(memory_capacity=gib * 2**30)
    assert sp.budget("sglang", hw) == want
    assert sp.budget("vllm", hw) == sp.budget("trtllm", hw) == 8192


@pytest.fixture(scope="module")
def sample():
    return silicon.load()


def _one(sample, rid):
    return sample[sample["id"] == rid]


def test_an_mtp_row_says_how_its_drafts_were_priced(sample):
    """DeepSeek-R1 (a published acceptance) runs its drafts at fixed lengths and says so; Qwen3.5 (none published)
    is priced one token a step and says why; neither says the other's note."""
    ds = silicon.plan(_one(sample, "2026_03_25_deepseek_r1_b200_sxm_sglang_fp8_agg_1024x8192_c256_tp8_0_ep1_0_251"))[0]
    qw = silicon.plan(_one(sample, "2026_03_25_qwen3_5_397b_b200_sxm_sglang_fp8_agg_8192x1024_c16_tp4_0_ep1_0_461"))[0]
    assert ds["speculative"] == qw["speculative"] == "mtp" and "spread" in ds and "spread" in qw
    assert "lengths fixed at ISL and OSL" in ds["assumed"] and "no published acceptance" not in ds["assumed"]
    assert "no published acceptance for qwen3.5-397b-a17b" in qw["assumed"] and "lengths fixed" not in qw["assumed"]


def _table(path, header: str, *rows: str):
    """A table of the data folder's kind, written as its header and rows."""
    path.write_text("\n".join((header, *rows)) + "\n")
    return path


def test_a_disagg_row_s_workers_come_from_the_row_then_its_recipe_then_one_each_and_it_says_which(sample):
    rec_id = "2026_03_25_deepseek_r1_gb200_trtllm_fp4_disagg_1024x8192_c2048_tp4_0_ep4_0_352"
    row = _one(sample, rec_id).copy()
    assert silicon.plan(row)[0]["workers"] == "recipe"
    for recorded in ("prefill_num_workers", "decode_num_workers"):  # one count recorded, the other not: the recipe's
        half = row.copy()
        half[recorded] = 2.0
        assert silicon.plan(half)[0]["workers"] == "recipe", recorded
    own = _one(sample, "kimik2_5_gb200_trtllm_fp4_disagg_1024x1024_c4_cfg759").copy()
    p = silicon.plan(own)[0]
    assert p["workers"] == "recorded" and (p["prefill_workers"], p["decode_workers"]) == (1, 4)
    own["decode_num_workers"] = math.nan  # no recipe for it: one decode worker assumed, and said
    p = silicon.plan(own)[0]
    assert p["workers"] == "assumed" and (p["prefill_workers"], p["decode_workers"]) == (1, 1)
    assert f"{sp.WORKERS_ASSUMED}: 1 prefill, 1 decode" in p["assumed"]
    bad = _one(sample, "kimik2_5_gb200_trtllm_fp4_disagg_1024x1024_c4_cfg759").copy()
    bad["decode_tp_size"] = 7.0
    assert silicon.plan(bad)[0]["reason"].startswith("decode: tp 7 does not divide")
    bad["prefill_tp_size"] = 7.0
    assert silicon.plan(bad)[0]["reason"].startswith("prefill: tp 7 does not divide")


def test_a_disagg_row_that_ran_a_configuration_takes_its_pools_limits_and_a_row_without_one_keeps_the_defaults(
        sample):
    """disagg_limits.csv: the srt-slurm recipe of this GB200 run (ctx1_gen1_dep32_batch64_eplb0_mtp0.yaml) sets
    max_batch_size 16 and max_num_tokens 16384 on its prefill worker, 64 and 256 on its decode worker (per
    attention-DP rank: 32 ranks hold 64 x 32 = 2,048 requests, the run's clients). A row that records its workers
    takes the limits of the entries it matches where they all agree (DeepSeek-R1 on H100: 3 decode workers of
    max_batch_size 1 for 6 clients); where they disagree it keeps the engine's defaults."""
    p = silicon.plan(_one(sample, "2026_03_25_deepseek_r1_gb200_trtllm_fp4_disagg_1024x8192_c2048_tp4_0_ep4_0_352"))[0]
    assert {k: p.get(k) for k in sp.LIMIT_KEYS} == {"prefill_max_batch": 16, "prefill_max_tokens": 16384,
                                                    "decode_max_batch": 64, "decode_max_tokens": 256}
    assert sp.worker_cap(p, p["decode_layout"], "decode") == 64 * 32 == p["concurrency"]
    assert sp.worker_budget(p, p["layout"], "prefill") == 16384 * 4  # 4 attention-DP ranks
    h100 = silicon.plan(_one(sample, "dsr1_h100_trtllm_fp8_disagg_1024x1024_c6_cfg494"))[0]
    assert h100["workers"] == "recorded" and h100["decode_workers"] == 3 and h100["concurrency"] == 6
    assert sp.worker_cap(h100, h100["decode_layout"], "decode") == 1  # tp 16, no attention DP: one a worker
    own = silicon.plan(_one(sample, "kimik2_5_gb200_trtllm_fp4_disagg_1024x1024_c192_cfg759"))[0]  # ambiguous
    assert not any(k in own for k in sp.LIMIT_KEYS) and sp.worker_cap(own, own["decode_layout"], "decode") is None


def test_every_row_of_the_shipped_limits_table_is_a_disaggregated_row_of_the_sample_and_names_its_engine(sample):
    """A limit is read under its engine's names: a row whose engine were not its run's backend would be dropped by
    the plan (silently keeping the defaults), so every row names the backend the sample records."""
    t = sp.disagg_limits()
    rows = sample.set_index("id")
    assert len(t) == 1331 + 46 and set(t) <= set(rows.index)  # + the GLM-5 and Kimi-K2.5 rows' next-day recipes
    assert all(rows.loc[i, "mode"] == "disagg" and eng == rows.loc[i, "backend"] for i, (eng, _) in t.items())
    assert sum(bool(lim) for _, lim in t.values()) == 996 + 169 + 46  # the rows with at least one limit


def test_a_plan_refuses_limits_read_under_another_engine_s_names(sample, monkeypatch):
    row = _one(sample, "dsr1_h100_trtllm_fp8_disagg_1024x1024_c6_cfg494")
    monkeypatch.setattr(sp, "disagg_limits", lambda path=None: {row["id"].iloc[0]: ("sglang", {"decode_max_batch": 4})})
    with pytest.raises(SpecError, match="sglang's limits for a trtllm run"):
        silicon.plan(row)


def test_a_limits_table_keeps_only_whole_positive_limits_and_names_its_engine(tmp_path):
    """An empty cell is the engine's default; SGLang's chunked-prefill-size -1 (chunking off) sets no budget."""
    f = _table(tmp_path / "limits.csv", "id,engine,prefill_max_batch,prefill_max_tokens,prefill_mem_fraction,"
               "decode_max_batch,decode_max_tokens,decode_mem_fraction,evidence,note",
               "a,trtllm,16,16384,0.6,64,256,0.7,x,", "b,sglang,,-1,,22,,0.75,x,")
    t = sp.disagg_limits(f)
    assert t["a"] == ("trtllm", {"prefill_max_batch": 16, "prefill_max_tokens": 16384, "decode_max_batch": 64,
                                 "decode_max_tokens": 256})
    assert t["b"] == ("sglang", {"decode_max_batch": 22})
    bad = tmp_path / "bad.csv"
    bad.write_text(f.read_text().replace("a,trtllm,", "a,,"))
    with pytest.raises(SpecError, match="row a: '' is not one of trtllm, vllm, sglang"):
        sp.disagg_limits(bad)  # a row without its engine's names is refused, not dropped unseen


def test_a_recipe_table_s_dp_attn_reads_true_false_or_unknown(tmp_path):
    f = _table(tmp_path / "workers.csv", "id,prefill_workers,decode_workers,prefill_gpus,prefill_dp_attn,decode_gpus,"
               "decode_dp_attn,speculative,note,source", "a,1,2,4,true,8,false,none,,x", "b,1,1,4,false,8,true,none,,x",
               "c,1,1,4,,8,,none,,x")
    t = sp.recipe_workers(f)
    assert [(t[k]["prefill_dp_attn"], t[k]["decode_dp_attn"]) for k in "abc"] == [(True, False), (False, True),
                                                                                  (None, None)]


def test_a_run_s_scripts_set_its_rounds_and_only_the_settings_they_give_completely():
    """num_prompts over the clients is the rounds measured (at least one); SGLang's receive interval counts from 2
    (1 is its default: every loop); TensorRT-LLM's batch waiting needs both its iterations and its token ratio."""
    cfg = {"script": "x"}
    assert sp.benchmark_settings({**cfg, "num_prompts": "3"}, "vllm", 8)[0]["profile"] == 1  # 3 of 8: one round
    assert sp.benchmark_settings({**cfg, "num_prompts": "8"}, "vllm", 8)[0]["profile"] == 1
    assert sp.benchmark_settings({**cfg, "num_prompts": "80"}, "vllm", 8)[0]["profile"] == 10
    assert sp.benchmark_settings({**cfg, "scheduler_recv_interval": "2"}, "sglang", 8)[0]["recv"] == 2
    assert "recv" not in sp.benchmark_settings({**cfg, "scheduler_recv_interval": "1"}, "sglang", 8)[0]
    assert "recv" not in sp.benchmark_settings({**cfg, "scheduler_recv_interval": "30"}, "vllm", 8)[0]
    wait = {"batch_wait_timeout_iters": "5", "batch_wait_max_tokens_ratio": "0.5"}
    assert sp.benchmark_settings({**cfg, **wait}, "trtllm", 8)[0]["batch_wait"] == (5, 0.5)
    for part in ({"batch_wait_max_tokens_ratio": "0.5"}, {"batch_wait_timeout_iters": "5"},
                 {"batch_wait_timeout_iters": "0", "batch_wait_max_tokens_ratio": "0.5"}):
        assert "batch_wait" not in sp.benchmark_settings({**cfg, **part}, "trtllm", 8)[0], part


def test_a_tensorrt_llm_run_is_priced_with_the_moe_backend_its_script_or_recipe_named(sample):
    """moe_backends.csv: InferenceX's dsr1_fp8_b200_trt.sh sets TRTLLM below 256 clients (DEEPGEMM above, for 1k/8k);
    the srt-slurm recipe of a disaggregated run names one per pool (DEEPGEMM prefill, TRTLLM decode here). A dense
    model's row names none; every name is one its engine takes (vLLM's only MARLIN)."""
    from perfmodel.moe_backends import MOE_BACKENDS

    table = sp.moe_backends()
    assert len(table) > 1000
    for rid, pair in table.items():
        engine = "vllm" if "_vllm_" in rid else "trtllm"
        assert all(b in MOE_BACKENDS[engine] or b == "" for b in pair), rid
    dis = silicon.plan(_one(sample, "2026_03_25_deepseek_r1_b200_sxm_trtllm_fp8_disagg_1024x1024_c4_tp8_0_ep8_0_387"))[0]
    assert (dis["prefill_moe_backend"], dis["decode_moe_backend"]) == ("DEEPGEMM", "TRTLLM")
    agg = silicon.plan(_one(sample, "2026_03_25_deepseek_r1_b200_sxm_trtllm_fp4_agg_8192x1024_c256_tp8_0_ep8_0_974"))[0]
    assert agg["decode_moe_backend"] == "CUTLASS"  # attention DP: dsr1_fp4_b200_trt_mtp.sh sets CUTLASS
    assert silicon._moe_label(dis) == "DEEPGEMM/TRTLLM" and silicon._moe_label(agg) == "CUTLASS"
    pr = silicon.Predictor("achievable")
    impl = pr.impl_for("trtllm", "DEEPGEMM")
    assert impl.moe_backend == "DEEPGEMM" and impl.key != pr.impl_for("trtllm").key == pr.impl_for("trtllm", "AUTO").key
    assert pr.impl_for("vllm", "TRTLLM").moe_backend == ""  # a name vLLM does not take is no backend for it
    # InferenceX's gpt-oss H200 vLLM script exports VLLM_MXFP4_USE_MARLIN=1: Marlin runs the MXFP4 experts
    rid = next(r for r in table if "_gpt_oss_120b_h200_sxm_vllm_" in r)
    assert table[rid] == ("MARLIN", "MARLIN")
    assert silicon.plan(_one(sample, rid))[0]["decode_moe_backend"] == "MARLIN"
    assert pr.impl_for("vllm", "MARLIN").moe_backend == "MARLIN" and pr.impl_for("sglang", "MARLIN").moe_backend == ""


def test_one_backend_for_both_pools_is_one_name_and_only_a_tensorrt_llm_moe_run_takes_one(sample, monkeypatch):
    one = {"decode_layout": Layout(8), "prefill_moe_backend": "TRTLLM", "decode_moe_backend": "TRTLLM"}
    assert silicon._moe_label(one) == "TRTLLM"
    assert silicon._moe_label({**one, "prefill_moe_backend": ""}) == "AUTO/TRTLLM"
    rid = "2026_03_25_minimax_m2_5_b300_sxm_vllm_fp8_agg_1024x1024_c16_tp4_0_ep1_0_1"
    row = _one(sample, rid)
    if row.empty:
        rid = sample[(sample["backend"] == "vllm") & (sample["mode"] == "agg")]["id"].iloc[0]
        row = _one(sample, rid)
    monkeypatch.setitem(sp._MOE_BACKENDS, sp.MOE_BACKENDS, {rid: ("TRTLLM", "TRTLLM")})
    assert "decode_moe_backend" not in silicon.plan(row)[0]  # a vLLM run: no TensorRT-LLM backend
    monkeypatch.setitem(sp._MOE_BACKENDS, sp.MOE_BACKENDS, {rid: ("TRTLLM", "MARLIN")})
    assert "decode_moe_backend" not in silicon.plan(row)[0]  # one name it does not take: the pair is not its


def test_an_engine_left_at_kv_cache_dtype_auto_keeps_an_unquantized_checkpoint_s_cache_in_the_model_dtype(sample):
    """agg_kv.csv: InferenceX's dsr1_fp8_h200.sh launches SGLang with no --kv-cache-dtype (auto: the model's data
    type), and DeepSeek-R1's config.json quantizes no KV cache, so its cache is bf16; dsr1_fp8_b200.sh sets
    fp8_e4m3, which stays. A checkpoint not known to leave its KV cache unquantized (NVIDIA's Kimi-K2.5 NVFP4) keeps
    the precision's fp8 cache whatever the script says."""
    auto = silicon.plan(_one(sample, "2026_03_25_deepseek_r1_h200_sxm_sglang_fp8_agg_1024x1024_c16_tp8_0_ep1_0_285"))[0]
    fp8 = silicon.plan(_one(sample, "2026_03_25_deepseek_r1_b200_sxm_sglang_fp8_agg_1024x1024_c128_tp8_0_ep1_0_300"))[0]
    kimi = silicon.plan(_one(sample, "2026_03_25_kimi_k2_5_b200_sxm_vllm_fp4_agg_1024x1024_c16_tp4_0_ep4_0_575"))[0]
    assert sp.agg_kv()[auto["id"]] == sp.agg_kv()[kimi["id"]] == "auto" and sp.agg_kv()[fp8["id"]] == "fp8_e4m3"
    assert (auto["weights"], auto["act"], auto["kv"]) == ("fp8-b128", "fp8", "bf16")
    assert (fp8["weights"], fp8["act"], fp8["kv"]) == ("fp8-b128", "fp8", "fp8")
    assert kimi["kv"] == "fp8"
    assert ("deepseek-ai/DeepSeek-R1", "fp8") in sp.KV_UNQUANTIZED and ("moonshotai/Kimi-K2.5", "fp4") not in \
        sp.KV_UNQUANTIZED


def test_sglang_resolves_auto_itself_for_a_deepseek_nsa_model_bf16_on_hopper_fp8_on_blackwell(sample):
    """GLM-5 (GlmMoeDsaForCausalLM, a DeepSeek-NSA model in SGLang since sgl-project/sglang#18521): SGLang's
    server_args turns auto into fp8_e4m3 on compute capability >= 10 and bfloat16 below, whatever the checkpoint.
    glm5_fp8_h200.sh and glm5_nvfp4_b200.sh both launch with none."""
    h200 = _one(sample, "2026_03_25_glm_5_h200_sxm_sglang_fp8_agg_1024x8192_c64_tp8_0_ep1_0_506")
    b200 = sample[(sample["model_path"] == "zhipuai/GLM-5") & (sample["system"] == "b200_sxm") &
                  (sample["backend"] == "sglang") & sample["id"].map(lambda i: sp.agg_kv().get(i) == "auto")]
    assert len(h200) == 1 and len(b200) and sp.agg_kv()[h200["id"].iloc[0]] == "auto"
    assert silicon.plan(h200)[0]["kv"] == "bf16" and {p["kv"] for p in silicon.plan(b200)} == {"fp8"}
    assert "zhipuai/GLM-5" in sp.NSA_MODELS and "b200_sxm" not in sp.SM90
    # the bf16 is SGLang's NSA rule, not the checkpoint's: GLM-5 is not among the unquantized-cache checkpoints,
    # or its Blackwell rows would be bf16 too
    assert ("zhipuai/GLM-5", "fp8") not in sp.KV_UNQUANTIZED


def test_a_tensorrt_llm_script_s_kv_cache_config_dtype_is_read_and_auto_keeps_gpt_oss_s_cache_in_bf16(sample):
    """agg_kv.csv: gptoss_fp4_h200_trt_slurm.sh writes `kv_cache_config: dtype: auto` into trtllm-serve's YAML
    (gpt-oss-120b's config.json quantizes no KV cache: bf16), gptoss_fp4_b200_trt.sh writes `dtype: fp8`."""
    auto = silicon.plan(_one(sample, "2026_03_25_gpt_oss_120b_h200_sxm_trtllm_fp4_agg_1024x8192_c8_tp8_0_ep8_0_1239"))[0]
    fp8 = silicon.plan(_one(sample, "2026_03_25_gpt_oss_120b_b200_sxm_trtllm_fp4_agg_1024x8192_c4_tp8_0_ep1_0_993"))[0]
    assert (sp.agg_kv()[auto["id"]], sp.agg_kv()[fp8["id"]]) == ("auto", "fp8")
    assert (auto["kv"], fp8["kv"]) == ("bf16", "fp8")


def test_a_script_that_launches_with_ep_size_tp_runs_tep_whatever_the_id_s_ep_says(sample):
    """agg_ep.csv: gptoss_fp4_h200_trt_slurm.sh@e06929c70 launches `trtllm-serve ... --ep_size=$TP`, so its run named
    tp4_ep1 held whole experts per GPU like the tp4_ep4 one (they measured 4.98 and 4.94 ms TPOT at 4 clients);
    gptoss_fp4_b200_trt.sh passes the configuration's EP_SIZE, and its tp4_ep1 run keeps the experts split."""
    h200 = "2026_04_06_gpt_oss_120b_h200_sxm_trtllm_fp4_agg_1024x1024_c4_tp4_ep1_341"
    b200 = "2026_04_06_gpt_oss_120b_b200_sxm_trtllm_fp4_agg_8192x1024_c4_tp4_ep1_139"
    assert "--ep_size=$TP" in sp.agg_ep()[h200] and b200 not in sp.agg_ep()
    assert silicon.plan(_one(sample, h200))[0]["layout"] == Layout(4, experts="ep")
    assert silicon.plan(_one(sample, b200))[0]["layout"] == Layout(4, experts="tp")
    # a row the table lists but that ran attention DP keeps DP's layout (the experts over every rank anyway)
    row = {"id": h200, "tp_size": 4, "attention_dp_size": 1}
    assert sp.tep_experts(row, 4, 1) == "ep" and sp.tep_experts(row, 4, 2) == "tp" and sp.tep_experts(row, 1, 1) == "tp"


def test_the_ep_table_names_only_runs_over_their_tp_gpus_and_anything_else_is_one_line(tmp_path):
    t, d = sp.agg_ep(), sp.agg_dp()
    assert len(t) == 203 and all("EP_SIZE" in v or "--ep_size=$TP" in v or "--enable-ep-moe" in v for v in t.values())
    assert len(d) == 20 and all(v.endswith("the script's DP_ATTENTION block: true") for v in d.values())
    assert not set(t) & set(d)
    bad = _table(tmp_path / "agg_ep.csv", "id,ep,evidence", "x1,8,somewhere")
    with pytest.raises(SpecError, match="row x1: '8' is not tp .* or dp"):
        sp.agg_ep(bad)
    with pytest.raises(SpecError, match="row x1: '8' is not tp"):
        sp.agg_dp(bad)
    two = _table(tmp_path / "two.csv", "id,ep,evidence", "x1,tp,a", "x2,dp,b")
    assert (sp.agg_ep(two), sp.agg_dp(two)) == ({"x1": "a"}, {"x2": "b"})


def test_a_script_that_turns_attention_dp_on_itself_runs_dp_whatever_the_sample_says(sample, monkeypatch):
    """dsr1_fp4_b200_trt_slurm.sh@e06929c70 decides DP_ATTENTION from ISL, OSL and CONC (at tp 8 and 8k/1k: on above
    32 clients) and writes `enable_attention_dp: $DP_ATTENTION` into the engine options; the sample keeps the
    configuration's attention_dp_size 1. The 128-client run ran attention DP over its 8 GPUs, the 32-client one
    did not (its block leaves EP_SIZE at 1 and the experts split). A row the table does not list keeps its
    layout."""
    dp = "2026_04_06_deepseek_r1_b200_sxm_trtllm_fp4_agg_8192x1024_c128_tp8_ep1_74"
    row = _one(sample, dp).iloc[0]
    assert int(row["attention_dp_size"]) == 1 and dp in sp.agg_dp()
    t, d, note = sp.agg_parallel(row)
    assert (t, d) == (1, 8) and "DP_ATTENTION block turned it on" in note
    p = silicon.plan(_one(sample, dp))[0]
    assert p["layout"] == Layout(1, ep=8) and "attention DP over its 8 GPUs" in p["assumed"]
    for rid in sp.agg_dp():  # each over the GPUs the sample gives it
        r = _one(sample, rid).iloc[0]
        assert sp.agg_parallel(r)[:2] == (1, int(r["tp_size"])) and int(r["tp_size"]) in (4, 8), rid
    # a listed row of one GPU has no DP to turn on, and says nothing; one of two GPUs runs DP over both
    one = {"id": "x1", "tp_size": 1.0, "attention_dp_size": 1.0, "moe_tp_size": 1.0, "moe_ep_size": 1.0}
    with monkeypatch.context() as mp:
        mp.setattr(sp, "agg_dp", lambda: {"x1": "e", "x2": "e"})
        assert sp.agg_parallel(one) == (1, 1, "")
        t, d, note = sp.agg_parallel({**one, "id": "x2", "tp_size": 2.0})
        assert (t, d) == (1, 2) and "over its 2 GPUs" in note
    other = "2026_04_06_deepseek_r1_b200_sxm_trtllm_fp4_agg_1024x8192_c32_tp8_ep1_884"
    assert other not in sp.agg_dp() and sp.agg_parallel(_one(sample, other).iloc[0])[:2] == (8, 1)


def test_a_disaggregated_recipe_that_sets_no_kv_cache_dtype_leaves_an_unquantized_checkpoint_s_cache_in_bf16(sample):
    """disagg_kv.csv: srt-slurm's recipes/h100/1k1k/mtp/h100-fp8-1p2d-max-tp-mtp.yaml sets no kv-cache-dtype for either
    SGLang worker (auto: DeepSeek-R1's bf16), while the B200 recipes set fp8_e4m3 for both; a row whose recipe is not
    in the mirrors (absent from the table) keeps the precision's cache."""
    rid = "2026_03_25_deepseek_r1_h100_sxm_sglang_fp8_disagg_1024x1024_c128_tp16_0_ep1_0_704"
    auto = silicon.plan(_one(sample, rid))[0]
    fp8 = silicon.plan(_one(sample, "2026_03_25_deepseek_r1_b200_sxm_sglang_fp8_disagg_8192x1024_c16_tp8_0_ep1_0_518"))[0]
    assert sp.disagg_kv()[auto["id"]] == ("auto", "auto", "recipe")
    assert sp.disagg_kv()[fp8["id"]] == ("fp8_e4m3", "fp8_e4m3", "recipe")
    assert "KV cache bf16" not in (auto["assumed"] or "")
    assert (auto["weights"], auto["act"], auto["kv"]) == ("fp8-b128", "fp8", "bf16")
    assert (fp8["weights"], fp8["act"], fp8["kv"]) == ("fp8-b128", "fp8", "fp8")
    unread = sample[(sample["mode"] == "disagg") & (sample["model_path"] == "deepseek-ai/DeepSeek-R1") &
                    (sample["precision"] == "fp8") & ~sample["id"].isin(list(sp.disagg_kv()))]
    assert len(unread) and silicon.plan(unread.iloc[[0]])[0]["kv"] == "fp8"
    # no recipe read on H200, where every SGLang recipe in srt-slurm leaves the cache at auto: bf16, and it says so
    h200 = silicon.plan(_one(sample, "2026_03_25_deepseek_r1_h200_sxm_sglang_fp8_disagg_8192x1024_c4_tp8_0_ep1_0_887"))[0]
    assert sp.disagg_kv()[h200["id"]][2] == "uniform" and h200["kv"] == "bf16" and "srt-slurm" in h200["assumed"]
    # one worker at auto and the other set is not the engine's default for the row: the precision's cache stays
    assert not sp.kv_auto({"mode": "disagg", "id": "x"}) and sp.kv_auto({"mode": "disagg", "id": rid})


def test_the_disagg_kv_table_has_both_workers_for_each_row_and_an_empty_one_is_one_line(tmp_path):
    t = sp.disagg_kv()
    assert len(t) == 1147 + 46 and set(t.values()) == {("auto", "auto", "recipe"), ("fp8", "fp8", "recipe"),
                                                  ("fp8_e4m3", "fp8_e4m3", "recipe"), ("auto", "auto", "uniform")}
    head = "id,engine,prefill_kv_dtype,decode_kv_dtype,read,evidence"
    with pytest.raises(SpecError, match="row x1: empty"):
        sp.disagg_kv(_table(tmp_path / "a.csv", head, "x1,sglang,auto,,recipe,somewhere"))
    with pytest.raises(SpecError, match="row x2: 'guess' is not recipe or uniform"):
        sp.disagg_kv(_table(tmp_path / "b.csv", head, "x2,sglang,auto,auto,guess,somewhere"))
    with pytest.raises(SpecError, match="row x3: '' is not recipe or uniform"):  # how it was read, not a dtype
        sp.disagg_kv(_table(tmp_path / "c.csv", head, "x3,sglang,auto,auto,,somewhere"))


def test_the_kv_table_has_a_value_for_each_row_it_lists_and_an_empty_one_is_one_line(tmp_path):
    t = sp.agg_kv()
    assert len(t) == 2104 and set(t.values()) == {"auto", "fp8", "fp8_e4m3"}
    bad = _table(tmp_path / "agg_kv.csv", "id,kv_cache_dtype,evidence", "x1,,somewhere")
    with pytest.raises(SpecError, match="row x1: empty"):
        sp.agg_kv(bad)


def test_the_disagg_settings_table_reads_each_recipe_s_benchmark_and_sglang_decode_interval(tmp_path):
    """Every recipe read ran sa-bench at its defaults (10 rounds of N prompts, lengths from 0.8 L); the SGLang ones
    that set --scheduler-recv-interval on their decode workers set 10 (the low-latency recipes), the others leave
    SGLang's 1, and a TensorRT-LLM row has none. A bad value is refused in one line."""
    t = sp.disagg_settings()
    assert len(t) == 1129 and {(v["benchmark"], v["profile"], v["spread"]) for v in t.values()} == {("sa-bench", 10, 0.8)}
    assert sorted(collections.Counter(v["recv"] for v in t.values()).items(), key=str) == [(1, 254), (10, 51),
                                                                                            (None, 824)]
    head = ("id,benchmark,rounds,spread,decode_recv_interval,prefill_moe_backend,decode_moe_backend,"
            "prefill_redundant_experts,decode_redundant_experts,evidence")
    with pytest.raises(SpecError, match="row x1: '0' is not a whole number >= 1"):
        sp.disagg_settings(_table(tmp_path / "a.csv", head, "x1,sa-bench,10,0.8,0,,,0,0,somewhere"))
    with pytest.raises(SpecError, match="row x2: 'ten' is not a whole number >= 1"):
        sp.disagg_settings(_table(tmp_path / "b.csv", head, "x2,sa-bench,ten,0.8,,,,0,0,somewhere"))
    with pytest.raises(SpecError, match="row x3: '1.5' is not a share in"):
        sp.disagg_settings(_table(tmp_path / "c.csv", head, "x3,sa-bench,10,1.5,,,,0,0,somewhere"))
    other = sp.disagg_settings(_table(tmp_path / "d.csv", head, "x4,aiperf,,,,,,,,somewhere"))
    assert other == {"x4": {"benchmark": "aiperf", "profile": None, "spread": None, "recv": None, "moe": None,
                            "redundant": (0, 0)}}
    with pytest.raises(SpecError, match="row x5: '0' is not a share in"):  # a range that starts at nothing
        sp.disagg_settings(_table(tmp_path / "e.csv", head, "x5,sa-bench,10,0,,,,0,0,somewhere"))
    whole = sp.disagg_settings(_table(tmp_path / "f.csv", head, "x6,sa-bench,10,1,2,,TRTLLM,0,32,somewhere"))
    assert whole == {"x6": {"benchmark": "sa-bench", "profile": 10, "spread": 1.0, "recv": 2, "moe": ("", "TRTLLM"),
                            "redundant": (0, 32)}}
    with pytest.raises(SpecError, match="decode_redundant_experts.*row x7: '-32' is not a whole number >= 0"):
        sp.disagg_settings(_table(tmp_path / "g.csv", head, "x7,sa-bench,10,0.8,,,,0,-32,somewhere"))
    old = head.replace(",prefill_redundant_experts,decode_redundant_experts", "")
    with pytest.raises(SpecError, match="prefill_redundant_experts.*row x8: no such column"):
        sp.disagg_settings(_table(tmp_path / "h.csv", old, "x8,sa-bench,10,0.8,,,,somewhere"))
    assert sorted(collections.Counter(v["redundant"] for v in t.values()).items()) == [
        ((0, 0), 1016), ((0, 32), 51), ((32, 32), 62)]  # SGLang's ep-num-redundant-experts, TensorRT-LLM's 288 slots


def test_a_disagg_row_without_a_moe_backends_entry_takes_the_one_its_recipe_names(sample, monkeypatch):
    """DeepSeek-R1 fp8 runs on H100 whose workers the sample records name no MoE backend in moe_backends.csv, but
    the recipe their limits were read from sets moe_config.backend WIDEEP for the prefill workers and CUTLASS for
    the decode ones: the plan passes those on. A row of moe_backends.csv keeps that table's (where both name one,
    the shipped tables agree: both read the same recipe)."""
    t = sp.disagg_settings()
    mine = [i for i, v in t.items() if v["moe"] == ("WIDEEP", "CUTLASS") and i not in sp.moe_backends()]
    assert mine
    p = silicon.plan(sample[sample["id"] == mine[0]])[0]
    assert (p["prefill_moe_backend"], p["decode_moe_backend"]) == ("WIDEEP", "CUTLASS")
    both = [i for i in sp.moe_backends() if i in t and t[i]["moe"]]
    assert both and all(sp.moe_backends()[i] == t[i]["moe"] for i in both)
    listed = both[0]
    monkeypatch.setattr(sp, "disagg_settings", lambda path=None: {listed: dict(t[listed], moe=("CUTLASS", "CUTLASS"))})
    q = silicon.plan(sample[sample["id"] == listed])[0]
    assert (q["prefill_moe_backend"], q["decode_moe_backend"]) == sp.moe_backends()[listed] != ("CUTLASS", "CUTLASS")


def test_an_sglang_disagg_row_carries_its_decode_recv_interval_and_only_above_one(sample):
    """The low-latency recipe gb300-fp4/8k1k/low_latency.yaml sets scheduler-recv-interval 10 on its decode workers:
    the plan passes it on; a row whose recipe leaves the default (1), and a TensorRT-LLM row, carry none."""
    t = sp.disagg_settings()
    ten = "2026_03_25_deepseek_r1_gb300_sglang_fp4_disagg_8192x1024_c4_tp4_0_ep1_0_776"
    one = next(i for i, v in t.items() if v["recv"] == 1)
    trt = "2026_03_25_deepseek_r1_h200_sxm_trtllm_fp8_disagg_1024x1024_c288_tp8_0_ep8_0_353"
    by = {p["id"]: p for p in silicon.plan(sample[sample["id"].isin([ten, one, trt])])}
    assert by[ten]["status"] == "ok" and by[ten]["decode_recv"] == 10
    assert by[one]["status"] == "ok" and "decode_recv" not in by[one]
    assert "decode_recv" not in by[trt]


def test_any_decode_recv_interval_above_one_is_passed_on(sample, monkeypatch):
    """Every interval above SGLang's default of 1 holds requests back, 2 as well as the recipes' 10."""
    ten = "2026_03_25_deepseek_r1_gb300_sglang_fp4_disagg_8192x1024_c4_tp4_0_ep1_0_776"
    t = dict(sp.disagg_settings())
    t[ten] = dict(t[ten], recv=2)
    monkeypatch.setattr(sp, "disagg_settings", lambda path=None: t)
    assert silicon.plan(sample[sample["id"] == ten])[0]["decode_recv"] == 2


def test_a_disagg_row_whose_recipe_sets_redundant_experts_is_planned_with_those_slots(sample):
    """SGLang's GB300 fp4 max-throughput recipe runs its decode workers DEP48 with ep-num-redundant-experts 32:
    DeepSeek-R1's 256 experts alone do not split over 48 ranks (the row was skipped), 288 slots do (6 a GPU); its
    prefill workers (TP4, no expert parallelism) hold none. A TensorRT-LLM eplb288 recipe's decode workers (DEP32,
    load_balancer num_slots 288) hold 32 too; a row whose recipe sets neither holds none."""
    sglang = "2026_03_25_deepseek_r1_gb300_sglang_fp4_disagg_1024x1024_c4096_tp4_0_ep4_0_769"
    trt = "2026_03_25_deepseek_r1_gb200_trtllm_fp4_disagg_1024x8192_c4096_tp4_0_ep4_0_371"
    plans = {p["id"]: p for p in silicon.plan(sample[sample["id"].isin([sglang, trt])])}
    p = plans[sglang]
    assert p["status"] == "ok" and p["decode_layout"] == Layout(1, 1, 48, 1, redundant_experts=32)
    assert p["layout"].redundant_experts == 0 and silicon._lay(p).endswith("1xtp1xdp48+r32")
    q = plans[trt]
    assert q["decode_layout"].ep == 32 and q["decode_layout"].redundant_experts == 32
    assert q["layout"].redundant_experts == 0
    m = pm.load_model("deepseek-r1")
    assert sp._layout(m, 1, 48)[1] == "256 experts do not split over 48 attention-DP groups"
    assert sp._layout(m, 1, 48, redundant=40)[1] == "256 experts + 40 redundant do not split over 48 attention-DP groups"
    assert sp._layout(m, 8, 1, redundant=32)[0].redundant_experts == 0  # tensor-parallel experts: no copies to place
    assert sp._layout(m, 1, 2, redundant=32)[0] == Layout(1, 1, 2, 1, redundant_experts=32)  # DEP2: 144 slots a GPU
    assert sp._layout(m, 8, 1, "ep", redundant=32)[0] == Layout(8, 1, 1, 1, experts="ep", redundant_experts=32)
    # copies that do not split over a TEP group's GPUs: its experts priced tensor-parallel, without copies (one
    # group) or with them (attention-DP groups, over which they do split)
    assert sp._layout(m, 8, 1, "ep", redundant=4)[0] == Layout(8, 1, 1, 1)
    assert sp._layout(m, 2, 32, "ep", redundant=32)[0] == Layout(2, 1, 32, 1, redundant_experts=32)
    assert sp._layout(m, 2, 2, "ep", redundant=2)[0] == Layout(2, 1, 2, 1, redundant_experts=2)  # 258 over 2, not 4
    assert sp._layout(pm.load_model("llama-3.1-8b"), 2, 1, "ep", redundant=32)[0] == Layout(2, 1, 1, 1)  # dense
    none = next(i for i, v in sp.disagg_settings().items() if v["redundant"] == (0, 0) and i in set(sample["id"]))
    r = silicon.plan(sample[sample["id"] == none])[0]
    assert r["status"] != "ok" or (r["layout"].redundant_experts, r["decode_layout"].redundant_experts) == (0, 0)
    # a row no recipe was read for (no disagg_settings entry) holds no copies: DEP decode workers still split 256
    unread = silicon.plan(_one(sample, "dsr1_h200_sglang_fp8_disagg_8192x1024_c64_cfg434"))[0]
    assert unread["status"] == "ok" and unread["decode_layout"].ep > 1 and unread["decode_layout"].redundant_experts == 0
    assert "dsr1_h200_sglang_fp8_disagg_8192x1024_c64_cfg434" not in sp.disagg_settings()
