"""The InferenceX configuration tables that `validate --serving` reads beside the silicon sample
(perfmodel/measure/data/inferencex/README.md says how each was made and from what): the disaggregated rows' workers
(disagg_workers.csv) and engine limits (disagg_limits.csv), the runs' MoE backends, the aggregated rows' speculative
decoding, topology and benchmark settings, and the MTP drafts. Each loads once per path; a bad row is one line."""
from __future__ import annotations

import math
import re
from pathlib import Path

from ..errors import SpecError

DATA = Path(__file__).resolve().parent.parent / "measure" / "data" / "inferencex"


def _num(x) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return math.nan
    return v


def _int(x) -> int | None:
    v = _num(x)
    return int(v) if math.isfinite(v) and v >= 1 and v == int(v) else None


MOE_BACKENDS = DATA / "moe_backends.csv"
_MOE_BACKENDS: dict = {}


def moe_backends(path=None) -> dict:
    """id -> (prefill, decode) MoE backend of an InferenceX row (TensorRT-LLM's moe_config.backend, vLLM's MARLIN), as
    its benchmark script (aggregated rows: the same backend twice) or srt-slurm recipe set it (perfmodel/measure/data/inferencex/
    README.md; bench/inferencex_agg/moe_backend.py); "" for a pool whose recipe names none (the engine's AUTO)."""
    import csv

    p = MOE_BACKENDS if path is None else Path(path)
    if p not in _MOE_BACKENDS:
        with open(p, newline="", encoding="utf-8") as f:
            _MOE_BACKENDS[p] = {r["id"]: (r["prefill_moe_backend"], r["decode_moe_backend"]) for r in csv.DictReader(f)}
    return _MOE_BACKENDS[p]


RECIPES = DATA / "disagg_workers.csv"
_RECIPES: dict = {}
# the benchmark of the disagg rows that ran an srt-slurm recipe: sa-bench (src/srtctl/benchmarks/scripts/sa-bench/
# bench.sh, the same at every recipe commit the rows name, 75f6e32a3cfc to 5063eb432640): after 2 N warm-up prompts,
# num_prompts=$((concurrency * 10)) measured, each length drawn by benchmark_serving.py with --random-range-ratio 0.8
SA_BENCH = {"profile": 10, "spread": 0.8}


def recipe_workers(path=None) -> dict:
    """id -> the workers of a disaggregated row that does not record them, from the InferenceX configuration and
    srt-slurm recipe it ran (perfmodel/measure/data/inferencex/README.md; the matching:
    docs/validation/disagg-workers.md): prefill_workers, decode_workers, per pool its GPUs per worker and
    attention DP (True, False or None where the recipes disagree), speculative ("mtp", "none", "mtp|none")."""
    import csv

    p = RECIPES if path is None else Path(path)
    if p not in _RECIPES:
        with open(p, newline="", encoding="utf-8") as f:
            _RECIPES[p] = {r["id"]: {
                "prefill_workers": int(r["prefill_workers"]), "decode_workers": int(r["decode_workers"]),
                "prefill_gpus": _int(r["prefill_gpus"]), "decode_gpus": _int(r["decode_gpus"]),
                "prefill_dp_attn": {"true": True, "false": False}.get(r["prefill_dp_attn"]),
                "decode_dp_attn": {"true": True, "false": False}.get(r["decode_dp_attn"]),
                "speculative": r["speculative"], "mtp": _drafts(r), "source": r["source"]} for r in csv.DictReader(f)}
    return _RECIPES[p]


LIMITS = DATA / "disagg_limits.csv"
_LIMITS: dict = {}
LIMIT_KEYS = ("prefill_max_batch", "prefill_max_tokens", "decode_max_batch", "decode_max_tokens")


def disagg_limits(path=None) -> dict:
    """id -> (engine, {limit: value}) of a disaggregated InferenceX row: the max_batch_size and max_num_tokens
    (SGLang: max-running-requests, chunked-prefill-size) its configuration set for the prefill and the decode
    workers (perfmodel/measure/data/inferencex/README.md, bench/inferencex_workers/limits.py); a limit the
    configuration left at the engine's default is absent."""
    import csv

    p = LIMITS if path is None else Path(path)
    if p not in _LIMITS:
        with open(p, newline="", encoding="utf-8") as f:
            t = {r["id"]: (r["engine"], {k: _int(r[k]) for k in LIMIT_KEYS if _int(r[k])}) for r in csv.DictReader(f)}
        bad = next((i for i, (e, _) in t.items() if e not in ENGINE_LIMITS), None)
        if bad is not None:  # a limit is read under its engine's names: an unnamed one would be dropped unseen
            raise SpecError(str(p), "engine", f"row {bad}: {t[bad][0]!r} is not one of {', '.join(ENGINE_LIMITS)}")
        _LIMITS[p] = t
    return _LIMITS[p]


AGG_SPECULATIVE = DATA / "agg_speculative.csv"
_AGG_SPECULATIVE: dict = {}
# the models whose MTP tokens a step are published (silicon.MTP_TOKENS: TensorRT-LLM's DeepSeek-R1 blog; V3 has
# the same MTP module); another model's MTP runs are priced one token a step and say so in `assumed`
MTP_PRICED = frozenset({"deepseek-r1", "deepseek-v3"})


def agg_speculative(path=None) -> dict:
    """id -> (speculative, drafts or None) of the aggregated InferenceX rows, from the configuration entry that ran
    each (perfmodel/measure/data/inferencex/README.md): "mtp", "none", "mtp|none" (both kinds of entry fit) or
    "unmatched"."""
    import csv

    p = AGG_SPECULATIVE if path is None else Path(path)
    if p not in _AGG_SPECULATIVE:
        with open(p, newline="", encoding="utf-8") as f:
            _AGG_SPECULATIVE[p] = {r["id"]: (r["speculative"], _int(r["drafts"])) for r in csv.DictReader(f)}
    return _AGG_SPECULATIVE[p]


AGG_TOPOLOGY = DATA / "agg_topology.csv"
_AGG_TOPOLOGY: dict = {}


def agg_topology(path=None) -> dict:
    """id -> (tp, ep, dp-attn) of the aggregated rows of AIConfigurator's database dump (ids ..._cfg<n>), as the
    InferenceX configuration entry that ran each sets them (perfmodel/measure/data/inferencex/README.md): the
    sample's own columns for these rows hold products (tp_size = tp x ep without attention DP, attention_dp_size =
    tp x ep with it, vLLM's attention_dp_size = tp under expert parallelism). dp-attn None where two entries that
    fit disagree."""
    import csv

    p = AGG_TOPOLOGY if path is None else Path(path)
    if p not in _AGG_TOPOLOGY:
        with open(p, newline="", encoding="utf-8") as f:
            _AGG_TOPOLOGY[p] = {r["id"]: (int(r["tp"]), int(r["ep"]), {"true": True, "false": False}.get(r["dp_attn"]))
                                for r in csv.DictReader(f)}
    return _AGG_TOPOLOGY[p]


def _id_table(path, default, cache: dict, row, checks=(), keep=None) -> dict:
    """A table of the data folder keyed by `id`, read once a process: `row` turns each CSV row into its value; each
    check (field, is_bad, why) names the first bad row in one SpecError line; `keep` (if given) is what of a checked
    value the table holds."""
    import csv

    p = default if path is None else Path(path)
    if p not in cache:
        with open(p, newline="", encoding="utf-8") as f:
            t = {r["id"]: row(r) for r in csv.DictReader(f)}
        for field, is_bad, why in checks:
            bad = next((i for i, v in t.items() if is_bad(v)), None)
            if bad is not None:
                raise SpecError(str(p), field, f"row {bad}: {why(t[bad])}")
        cache[p] = t if keep is None else {i: keep(v) for i, v in t.items()}
    return cache[p]


AGG_EP = DATA / "agg_ep.csv"
_AGG_EP: dict = {}


def _agg_ep_table(path=None) -> dict:
    return _id_table(path, AGG_EP, _AGG_EP, lambda r: (r["ep"], r["evidence"]),
                     [("ep", lambda v: v[0] not in ("tp", "dp"),
                       lambda v: f"{v[0]!r} is not tp (the experts over the run's tp GPUs) or dp (attention DP over "
                                 f"them)")])


_AGG_EP_KIND: dict = {}


def _agg_ep_kind(path, kind: str) -> dict:
    t = _agg_ep_table(path)
    key = (AGG_EP if path is None else Path(path), kind)
    if key not in _AGG_EP_KIND:
        _AGG_EP_KIND[key] = {i: e for i, (k, e) in t.items() if k == kind}
    return _AGG_EP_KIND[key]


def agg_ep(path=None) -> dict:
    """id -> evidence, for the aggregated InferenceX rows whose benchmark script ran the experts expert-parallel over
    all of the run's tensor-parallel GPUs whatever the configuration's ep (the id's _ep1) said: TensorRT-LLM's
    `--ep_size=$TP`, or EP_SIZE="$TP" from the script's own decision block, vLLM's `--enable-expert-parallel` under
    `[ "$EP_SIZE" -ge 1 ]`, SGLang's `--enable-ep-moe` (perfmodel/measure/data/inferencex/README.md,
    bench/inferencex_agg/expert_parallel.py); agg_ep.csv rows of ep `tp`."""
    return _agg_ep_kind(path, "tp")


def agg_dp(path=None) -> dict:
    """id -> evidence, for the aggregated TensorRT-LLM rows whose benchmark script turned attention DP on over the
    run's tp GPUs (its DP_ATTENTION decision block from ISL, OSL and the clients: `enable_attention_dp: true` in the
    engine options it wrote) where the sample's attention_dp_size, the configuration's dp-attn, says 1; agg_ep.csv
    rows of ep `dp` (bench/inferencex_agg/expert_parallel.py)."""
    return _agg_ep_kind(path, "dp")


AGG_CONFIG = DATA / "agg_config.csv"
_AGG_CONFIG: dict = {}
# each engine's names for its token budget and its cap on running requests (per attention-DP rank in TensorRT-LLM
# and vLLM, per worker in SGLang: worker_budget)
ENGINE_LIMITS = {"trtllm": ("max_num_tokens", "max_batch_size"), "vllm": ("max_num_batched_tokens", "max_num_seqs"),
                 "sglang": ("chunked_prefill_size", "max_running_requests")}
# TensorRT-LLM's AttentionDpConfig defaults where a script turns balancing on without them (llmapi/llm_args.py)
ADP_TIMEOUT_ITERS, ADP_BATCHING_WAIT_ITERS = 50, 10


def agg_config(path=None) -> dict:
    """id -> the benchmark's and the engine's settings of the aggregated InferenceX rows, from the launch and benchmark
    scripts each row's run executed (perfmodel/measure/data/inferencex/README.md): the requests measured
    (num_prompts) and their length range, the engine's token budget, its cap on running requests, and TensorRT-LLM's
    batch waiting and attention-DP balancing. A value the scripts did not set is absent (the engine's default)."""
    import csv

    p = AGG_CONFIG if path is None else Path(path)
    if p not in _AGG_CONFIG:
        with open(p, newline="", encoding="utf-8") as f:
            _AGG_CONFIG[p] = {r["id"]: {k: v for k, v in r.items() if v != "" and k not in ("id", "evidence", "note")}
                              for r in csv.DictReader(f)}
    return _AGG_CONFIG[p]


def benchmark_settings(cfg: dict | None, engine: str, n: int) -> tuple[dict, str]:
    """The plan's keys from a row's agg_config entry (silicon.Predictor.agg reads them): profile (rounds of n
    requests measured), spread (the length range's lower ratio), budget and max_batch (the engine's limits),
    batch_wait (iterations, token ratio) and adp_balance (timeout, batching iterations), recv (SGLang's
    --scheduler-recv-interval); and a note where the scripts did not say how many requests were measured."""
    if cfg is None:
        return {}, ""
    if "script" not in cfg:
        return {}, ("no launch script found for this run (agg_config.csv): 20 rounds of fixed-length requests and "
                    "the engine's defaults")
    out, why = {}, ""
    if _int(cfg.get("num_prompts")):
        out["profile"] = max(1, round(_int(cfg["num_prompts"]) / n))
    else:
        why = "the requests it measured depend on the runner, not recorded (agg_config.csv): 20 rounds"
    ratio = _num(cfg.get("random_range_ratio"))
    if math.isfinite(ratio) and ratio < 1:
        out["spread"] = ratio
    tokens, seqs = ENGINE_LIMITS.get(engine, (None, None))
    if _int(cfg.get(tokens)):
        out["budget"] = _int(cfg[tokens])
    if _int(cfg.get(seqs)):
        out["max_batch"] = _int(cfg[seqs])
    if engine == "sglang" and (_int(cfg.get("scheduler_recv_interval")) or 0) > 1:
        out["recv"] = _int(cfg["scheduler_recv_interval"])  # --scheduler-recv-interval (fastsim.run's recv)
    if engine == "trtllm":
        w = (_int(cfg.get("batch_wait_timeout_iters")) or 0, _num(cfg.get("batch_wait_max_tokens_ratio")))
        if w[0] and math.isfinite(w[1]):
            out["batch_wait"] = w
        if cfg.get("adp_enable_balance", "").lower() == "true":
            t, b = _num(cfg.get("adp_timeout_iters")), _num(cfg.get("adp_batching_wait_iters"))
            out["adp_balance"] = (int(t) if math.isfinite(t) else ADP_TIMEOUT_ITERS,
                                  int(b) if math.isfinite(b) else ADP_BATCHING_WAIT_ITERS)
    return out, why


AGG_KV = DATA / "agg_kv.csv"
_AGG_KV: dict = {}
# checkpoints whose config.json quantizes no KV cache (quantization_config without a KV-cache scheme; AIConfigurator
# 0.12.0's model_configs): deepseek-ai/DeepSeek-R1 and -V3 and MiniMaxAI/MiniMax-M2.5 (quant_method fp8, 128 x 128
# weight blocks, dynamic activations), openai/gpt-oss-120b (quant_method mxfp4); by the sample's model_path and the
# precision that is that checkpoint. An engine left at --kv-cache-dtype auto keeps their cache in the model's dtype.
KV_UNQUANTIZED = frozenset({("deepseek-ai/DeepSeek-R1", "fp8"), ("deepseek-ai/DeepSeek-V3", "fp8"),
                            ("MiniMaxAI/MiniMax-M2.5", "fp8"), ("openai/gpt-oss-120b", "fp4")})

# SGLang resolves auto itself for DeepSeek-NSA models (server_args.py, is_deepseek_nsa: DeepseekV32ForCausalLM, and
# GlmMoeDsaForCausalLM since sgl-project/sglang#18521, 2026-02-10, the GLM-5 support every GLM-5 run needs): "if
# self.kv_cache_dtype == "auto": self.kv_cache_dtype = "fp8_e4m3" if major >= 10 else "bfloat16"" ("For Hopper, we
# support both bf16 and fp8 kv cache; for Blackwell, we support fp8 only currently"); by the sample's model_path
NSA_MODELS = frozenset({"zhipuai/GLM-5"})
SM90 = frozenset({"h100_sxm", "h200_sxm"})  # the sample's Hopper systems (compute capability 9.0); the rest are 10.x


def agg_kv(path=None) -> dict:
    """id -> the KV-cache dtype an aggregated InferenceX vLLM, SGLang or TensorRT-LLM row's benchmark script launched
    its engine with (perfmodel/measure/data/inferencex/README.md, bench/inferencex_agg/kv_dtype.py): the value it sets
    (--kv-cache-dtype, or TensorRT-LLM's kv_cache_config dtype), or "auto" where it sets none (vLLM's
    CacheConfig.cache_dtype and SGLang's --kv-cache-dtype default: the model's data type)."""
    return _id_table(path, AGG_KV, _AGG_KV, lambda r: r["kv_cache_dtype"],
                     [("kv_cache_dtype", lambda v: not v, lambda v: "empty (a value the script set, or auto)")])


DISAGG_KV = DATA / "disagg_kv.csv"
_DISAGG_KV: dict = {}


def disagg_kv(path=None) -> dict:
    """id -> (prefill, decode, read): the KV-cache dtype a disaggregated InferenceX row's recipe set for its workers
    (perfmodel/measure/data/inferencex/README.md, bench/inferencex_workers/kv_dtype.py): the value written, or "auto"
    where the worker's section sets none (the engine's default: the model's data type or its checkpoint's KV
    quantization); read "recipe", or "uniform" for an SGLang DeepSeek-R1 row on H100/H200 with no recipe read, whose
    device's SGLang recipes all set none. Other rows whose recipe is not in the mirrors are absent."""
    return _id_table(path, DISAGG_KV, _DISAGG_KV,
                     lambda r: (r["prefill_kv_dtype"], r["decode_kv_dtype"], r["read"]),
                     [("prefill_kv_dtype/decode_kv_dtype", lambda v: not all(v[:2]),
                       lambda v: "empty (a value the recipe set, or auto)"),
                      ("read", lambda v: v[2] not in ("recipe", "uniform"),
                       lambda v: f"{v[2]!r} is not recipe or uniform")])


DISAGG_SETTINGS = DATA / "disagg_settings.csv"
_DISAGG_SETTINGS: dict = {}


def disagg_settings(path=None) -> dict:
    """id -> {"benchmark", "profile", "spread", "recv"} of a disaggregated InferenceX row, from the one recipe it ran
    (bench/inferencex_workers/settings.py): the recipe's benchmark type; for sa-bench its measured rounds of N
    prompts (num_prompts_mult, 10 by default) and the share of each length its draws start from
    (random_range_ratio, 0.8 by default), else None; for SGLang its decode workers' --scheduler-recv-interval (1
    where the recipe sets none), else None; for TensorRT-LLM the (prefill, decode) moe_config.backend it names
    (moe_backends' form, "" for a pool it leaves at AUTO), else None; "redundant": each pool's redundant expert
    slots (SGLang's ep-num-redundant-experts, TensorRT-LLM's load_balancer num_slots less the routed experts; 0
    where the recipe sets none; (0, 0) for an engine whose recipes were not read for it). Rows without one recipe
    are absent."""
    def whole(x: str) -> bool:
        return x.isdigit() and int(x) >= 1

    def slots(x: str) -> bool:
        return x == "" or x.isdigit()

    def share(x: str) -> bool:
        return 0.0 < _num(x) <= 1.0

    sa = lambda v: v["benchmark"] == "sa-bench"  # noqa: E731
    return _id_table(path, DISAGG_SETTINGS, _DISAGG_SETTINGS, dict,
                     [("rounds", lambda v: sa(v) and not whole(v["rounds"]),
                       lambda v: f"{v['rounds']!r} is not a whole number >= 1"),
                      ("spread", lambda v: sa(v) and not share(v["spread"]),
                       lambda v: f"{v['spread']!r} is not a share in (0, 1]"),
                      ("decode_recv_interval", lambda v: v["decode_recv_interval"] != "" and
                       not whole(v["decode_recv_interval"]),
                       lambda v: f"{v['decode_recv_interval']!r} is not a whole number >= 1"),
                      *((c, lambda v, c=c: v.get(c) is None or not slots(v[c]),
                         lambda v, c=c: "no such column" if v.get(c) is None else f"{v[c]!r} is not a whole number >= 0")
                        for c in ("prefill_redundant_experts", "decode_redundant_experts"))],
                     keep=lambda v: {"benchmark": v["benchmark"],
                                     "profile": int(v["rounds"]) if sa(v) else None,
                                     "spread": float(v["spread"]) if sa(v) else None,
                                     "recv": int(v["decode_recv_interval"]) if v["decode_recv_interval"] else None,
                                     "moe": ((v["prefill_moe_backend"], v["decode_moe_backend"])
                                             if v["prefill_moe_backend"] or v["decode_moe_backend"] else None),
                                     "redundant": tuple(int(v[f"{r}_redundant_experts"] or 0)
                                                        for r in ("prefill", "decode"))})


DRAFTS = DATA / "mtp_drafts.csv"
_DRAFTS: dict = {}


def mtp_drafts(path=None) -> dict:
    """source -> draft tokens, for the MTP runs whose recipe name does not say: read from the configuration itself
    (InferenceX's DECODE_MTP_SIZE, a recipe's num_nextn_predict_layers, SGLang's --speculative-num-steps), each
    with its file and line (perfmodel/measure/data/inferencex/README.md)."""
    import csv

    p = DRAFTS if path is None else Path(path)
    if p not in _DRAFTS:
        with open(p, newline="", encoding="utf-8") as f:
            _DRAFTS[p] = {r["source"]: int(r["drafts"]) for r in csv.DictReader(f)}
    return _DRAFTS[p]


def _drafts(r: dict):
    """The MTP draft tokens of a recipe that ran MTP: srt-slurm names its TensorRT-LLM recipes ..._mtp<k>.yaml or
    ..._mtp<k>_<n>.yaml (num_nextn_predict_layers k; mtp0 is no speculation); where the name does not say (SGLang's,
    and the runs without a recipe file), the configuration read for it (mtp_drafts); None where neither does."""
    if r["speculative"] != "mtp":
        return None
    ks = set(re.findall(r"_mtp(\d+)[_.][^/]*yaml", r["source"]))
    k = int(ks.pop()) if len(ks) == 1 else 0
    return k or mtp_drafts().get(r["source"])
