"""The serving validation's plan: AIConfigurator's silicon sample read and checked, each row mapped to a catalog
model, device, precision, layout(s), workers, concurrency and the engine's token budget and prefill batching
(perfmodel.serving.silicon predicts the planned points; its docstring gives the method). perfmodel.serving.silicon
re-exports all of it."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ..errors import SpecError
from ..formats import get_format
from ..kernels import aic_dir, measured_version
from ..moe_backends import MOE_BACKENDS as MOE_BACKENDS_OF
from ..ops import Layout
from .scheduler import ENGINE_PREFILL
from .inferencex import (  # noqa: F401 (re-exported: the tables the plan reads)
    _num, _int, MOE_BACKENDS, _MOE_BACKENDS, moe_backends, RECIPES, _RECIPES, SA_BENCH, recipe_workers, LIMITS,
    _LIMITS, LIMIT_KEYS, disagg_limits, AGG_SPECULATIVE, _AGG_SPECULATIVE, MTP_PRICED, agg_speculative,
    AGG_TOPOLOGY, _AGG_TOPOLOGY, agg_topology, AGG_CONFIG, _AGG_CONFIG, ENGINE_LIMITS, ADP_TIMEOUT_ITERS,
    ADP_BATCHING_WAIT_ITERS, agg_config, benchmark_settings, DRAFTS, _DRAFTS, mtp_drafts, _drafts, AGG_KV, _AGG_KV,
    KV_UNQUANTIZED, agg_kv, disagg_kv, AGG_EP, _AGG_EP, agg_ep, agg_dp, NSA_MODELS, SM90, disagg_settings,
)
from .silicon_report import MAX_FILE_BYTES, WORKERS_ASSUMED

DATA = Path(__file__).resolve().parent.parent / "measure" / "data" / "aiconfigurator"
SAMPLE = DATA / "silicon_sample.csv"
COLUMNS = ("id", "backend", "backend_version", "model_path", "system", "precision", "mode", "isl", "osl",
           "gemm_quant_mode", "moe_quant_mode", "batch_size", "tp_size", "attention_dp_size", "moe_tp_size",
           "moe_ep_size", "prefill_num_workers", "prefill_tp_size", "prefill_attention_dp_size",
           "decode_batch_size", "decode_num_workers", "decode_tp_size", "decode_attention_dp_size",
           "silicon_ttft_ms", "silicon_tpot_ms")

# The sample's checkpoints -> catalog models (the same architecture; the quantized checkpoints' formats come
# from the row's quant modes)
MODELS = {
    "deepseek-ai/DeepSeek-R1": "deepseek-r1", "nvidia/DeepSeek-R1-NVFP4": "deepseek-r1",
    "deepseek-ai/DeepSeek-V3": "deepseek-v3",
    "nvidia/DeepSeek-V3.1-NVFP4": "deepseek-v3",  # V3.1 keeps V3's architecture (config.json: DeepseekV3ForCausalLM)
    "openai/gpt-oss-120b": "gpt-oss-120b",
    "meta-llama/Llama-3.1-70B": "llama-3.1-70b",
    "meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b", "nvidia/Llama-3.1-8B-Instruct-FP8": "llama-3.1-8b",
    "Qwen/Qwen3-32B": "qwen3-32b", "nvidia/Qwen3-32B-NVFP4": "qwen3-32b",
    "Qwen/Qwen3-235B-A22B-FP8": "qwen3-235b-a22b",
    "MiniMaxAI/MiniMax-M2.5": "minimax-m2.5",
    "moonshotai/Kimi-K2.5": "kimi-k2.5",
    "Qwen/Qwen3.5-397B-A17B": "qwen3.5-397b-a17b",
    "zhipuai/GLM-5": "glm-5",
}
SYSTEMS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200", "b200_sxm": "b200", "b300_sxm": "b300", "gb200": "gb200",
           "gb300": "gb300"}
# quant mode (or the row's precision when no quant mode is given) -> (weights, activations, KV cache)
# AIConfigurator sdk/task_v1_compat.py _PROFILE_TO_QUANT: fp8 -> kvcache fp8; nvfp4 -> kvcache fp8;
# bfloat16 -> kvcache bfloat16
PRECISION = {"fp8": ("fp8", "fp8", "fp8"), "fp8_block": ("fp8-b128", "fp8", "fp8"), "nvfp4": ("nvfp4", "nvfp4", "fp8"),
             "fp4": ("nvfp4", "nvfp4", "fp8"), "int4_wo": ("int4", "bf16", "bf16"), "int4": ("int4", "bf16", "bf16"),
             "bf16": ("bf16", "bf16", "bf16")}



# the sample's checkpoints stored as block-scaled FP8 (config.json quantization_config: quant_method fp8,
# weight_block_size [128, 128]): DeepSeek-V3 technical report (arXiv:2412.19437, 3.3.2) and the DeepSeek-V3/R1
# config.json; Qwen3-235B-A22B-FP8's model card ("fine-grained fp8 quantization with block size of 128");
# MiniMax-M2.5's FP8 release (models/minimax-m2.5.yaml counts its weight_scale_inv blocks)
BLOCK_FP8 = frozenset({"deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V3", "Qwen/Qwen3-235B-A22B-FP8",
                       "MiniMaxAI/MiniMax-M2.5"})


# The layers NVIDIA's NVFP4 checkpoints keep out of NVFP4 (their hf_quant_config.json exclude_modules; stored bf16),
# for the checkpoints the sample's nvfp4 rows ran. Verbatim copies of the configs are vendored in
# ai-dynamo/aiconfigurator @095f58a (aic-core/src/aiconfigurator_core/model_configs/nvidia--<name>_*.json).
# - DeepSeek-R1: InferenceX's fp4 runs name nvidia/DeepSeek-R1-0528-FP4-V2 (= -NVFP4-v2) from November 2025 on (the
#   DeepSeek-V3 rows are the same dsr1 runs). Its model card: "Compared to nvidia/DeepSeek-R1-0528-FP4, this
#   checkpoint additionally quantizes the wo module in attention layers"; the first checkpoint excludes every
#   model.layers.N.self_attn*. So q_a, q_b, kv_a and kv_b stay bf16 and o_proj is NVFP4, as in
#   nvidia/DeepSeek-V3.1-NVFP4's exclude_modules (q_a_proj, q_b_proj, kv_a_proj_with_mqa, kv_b_proj per layer).
#   bf16, not fp8: NVIDIA's export (Model-Optimizer examples/deepseek/quantize_to_nvfp4.py) dequantizes the FP8
#   checkpoint to bf16 and writes the excluded weights so; the v2 folder is 413,340,567,567 B, which bf16 q/kv
#   and a bf16 MTP layer give to 0.01% (fp8 q/kv: 409.05 GB). Its MTP layer (model.layers.61*) is bf16 too.
# - nvidia/DeepSeek-R1-NVFP4 (ModelOpt 0.23): the attention projections are bf16 (NVIDIA/Model-Optimizer#150).
# - nvidia/GLM-5-NVFP4: q_a, q_b, kv_a, kv_b, the indexer and o_proj of every layer excluded.
# - nvidia/MiniMax-M2.5-NVFP4: model.layers.N.self_attn* and the router gates excluded.
# - nvidia/Qwen3.5-397B-A17B-NVFP4: only the routed experts are NVFP4 (its 184 exclusions: every linear- and
#   full-attention layer, the shared experts and their gates, the MTP layer, lm_head).
# - nvidia/Kimi-K2.5-NVFP4 (config.json ignore): language_model.model.layers.N.self_attn* and lm_head; its dense
#   layer 0 and shared experts are NVFP4 (where moonshotai's INT4 checkpoint, the catalog's, keeps them bf16).
_V2 = (("attention", "bf16"), ("attention_out", "nvfp4"))
NVFP4_KEPT = {"deepseek-ai/DeepSeek-R1": _V2, "deepseek-ai/DeepSeek-V3": _V2, "nvidia/DeepSeek-V3.1-NVFP4": _V2,
              "nvidia/DeepSeek-R1-NVFP4": (("attention", "bf16"),),
              "zhipuai/GLM-5": (("attention", "bf16"),),
              "MiniMaxAI/MiniMax-M2.5": (("attention", "bf16"),),
              "Qwen/Qwen3.5-397B-A17B": (("attention", "bf16"), ("shared_expert", "bf16")),
              "moonshotai/Kimi-K2.5": (("attention", "bf16"), ("mlp", "nvfp4"), ("shared_expert", "nvfp4"))}


def checkpoint_pins(model, row, q: str) -> tuple:
    """The (tensor group, format) pins of the checkpoint a row ran where it differs from the catalog model's: the
    layers an NVFP4 checkpoint keeps out of NVFP4 (NVFP4_KEPT), and the routed experts of a re-quantized one
    (experts_format). Empty: the model's formats as they are."""
    pins = dict(NVFP4_KEPT.get(row.get("model_path"), ())) if PRECISION[q][0] == "nvfp4" else {}
    ex = experts_format(model, row)
    if ex:
        pins["experts"] = ex
    return tuple(sorted(pins.items()))


def weights_format(row, wts: str) -> str:
    """A fp8 row's weight format: fp8-b128 (block-scaled, formats.py) where the row's GEMM or MoE quant mode is
    fp8_block, as AIConfigurator records it, or where the row says fp8 of a checkpoint that is stored block-scaled
    (BLOCK_FP8): the engines load its 128 x 128 scales and run block-scaled FP8 GEMMs (DeepGEMM, or their own
    block kernels), not per-tensor ones. Per-tensor fp8 otherwise."""
    if wts == "fp8" and ("fp8_block" in (row.get("gemm_quant_mode"), row.get("moe_quant_mode"))
                         or row.get("model_path") in BLOCK_FP8):
        return "fp8-b128"
    return wts


def experts_format(model, row) -> str | None:
    """The routed experts' format where the row's checkpoint is not the catalog model's: a model that pins its
    experts (weight_formats) to the checkpoint's own format, measured with a MoE quant mode of another number
    class, ran a re-quantized checkpoint, whose experts are in the row's format. Kimi-K2.5 pins int4-g32
    (moonshotai's compressed-tensors INT4); its nvfp4 rows ran an NVFP4 checkpoint, whose routed experts are NVFP4
    (NVIDIA's ModelOpt split, as huggingface.co/decart-ai/Kimi-K2.7-Code-NVFP4 describes nvidia/Kimi-K2.6-NVFP4's:
    "routed-expert linear layers are quantized to NVFP4"). Of one class (gpt-oss's MXFP4 experts in a row that says
    nvfp4, Kimi's INT4 in an int4_wo row) the checkpoint's own format stays. None: the model's formats as they are."""
    pinned, q = model.weight_format("experts"), row.get("moe_quant_mode")
    if not pinned or not isinstance(q, str) or q not in PRECISION:
        return None
    fmt = weights_format(row, PRECISION[q][0])
    return fmt if get_format(fmt).peak != get_format(pinned).peak else None


def budget(engine: str, hw) -> int:
    """The engine's default tokens per iteration (docs/validation.md, "Serving", quotes each source): vLLM
    `vllm serve` max_num_batched_tokens 8192 on GPUs of >= 70 GiB (engine/arg_utils.py); SGLang
    chunked_prefill_size 8192 below 160 GiB (H100, H200) and 16384 above (B200, B300, GB200, GB300)
    (server_args.py _handle_gpu_memory_settings); TensorRT-LLM max_num_tokens 8192 (BuildConfig). Under attention
    DP it is one rank's in vLLM and TensorRT-LLM, the worker's in SGLang (worker_budget)."""
    if engine == "sglang" and hw.memory_capacity >= 160 * 2**30:
        return 16384
    return 8192




def load(path=None):
    """The silicon sample as a DataFrame (the shipped copy, or a CSV of the same columns). One line on a bad file."""
    import pandas as pd

    from ..fileio import read_csv_capped

    name = str(path) if path is not None else "silicon_sample.csv"
    df = read_csv_capped(SAMPLE if path is None else path, name, MAX_FILE_BYTES, "silicon sample",
                         dtype={"id": str, "backend_version": str}, keep_default_na=True)
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise SpecError(name, missing[0], f"missing column (the silicon sample's columns: {', '.join(COLUMNS[:6])}, ...)")
    for c in ("isl", "osl", "silicon_ttft_ms", "silicon_tpot_ms"):
        v = pd.to_numeric(df[c], errors="coerce")
        bad = ~(np.isfinite(v) & (v > 0) & ((v == np.floor(v)) if c in ("isl", "osl") else True))  # whole tokens
        if bad.any():
            i, what = int(np.flatnonzero(bad.to_numpy())[0]), "whole number >= 1" if c in ("isl", "osl") else "positive number"
            raise SpecError(name, f"row {i + 2}, column {c}", f"expected a {what}, got {str(df[c].iloc[i])!r}")
    if df["id"].duplicated().any():
        raise SpecError(name, "id", f"duplicate id {df['id'][df['id'].duplicated()].iloc[0]!r}")
    return df


def concurrency(row) -> int | None:
    """The clients of the benchmark: silicon_concurrency in silicon_data_source (AIPerf's --concurrency), else
    from the id (_c<N>_), else batch size x attention-DP ranks (agg) or x decode workers (disagg)."""
    for text, pat in ((row.get("silicon_data_source"), r"silicon_concurrency=(\d+)"), (row.get("id"), r"_c(\d+)_")):
        m = re.search(pat, str(text)) if isinstance(text, str) else None
        if m and int(m.group(1)) >= 1:
            return int(m.group(1))
    if row["mode"] == "agg":
        b, d = _int(row["batch_size"]), _int(row["attention_dp_size"]) or 1
        return None if b is None else b * d
    b, w, d = _int(row["decode_batch_size"]), _int(row["decode_num_workers"]), _int(row["decode_attention_dp_size"]) or 1
    return None if b is None or w is None else b * w * d


_ID_TP_EP = re.compile(r"_tp(\d+)_ep(\d+)_")  # InferenceX's run name: its GPUs and the expert parallelism in them


def _layout(model, tp, adp, experts: str = "tp", redundant: int = 0) -> tuple[Layout | None, str]:
    """AIConfigurator's worker layout (tp, attention_dp) as perfmodel's, or None and why not; experts "ep": the tp
    group holds whole experts (TEP, tep_experts); redundant: the worker's redundant expert slots (its recipe's
    expert-parallel load balancing, disagg_settings), kept where its experts are spread over its GPUs."""
    t, d = _int(tp), _int(adp) or 1
    if t is None:
        return None, "no tp_size"
    if d > 1 and not model.moe:
        return None, f"attention_dp {d} on a dense model"
    if model.N % t or (model.K % t and t % model.K):
        return None, f"tp {t} does not divide {model.N} heads / {model.K} KV heads"
    if not model.moe:
        return Layout(t, 1, d, 1), ""
    R = redundant if d > 1 or experts == "ep" else 0  # copies need the experts spread over the GPUs
    slots = model.moe.n_experts + R
    if slots % d:
        return None, f"{model.moe.n_experts} experts" + (f" + {R} redundant" if R else "") + \
            f" do not split over {d} attention-DP groups"
    if experts == "ep" and (t * d < 2 or slots % (t * d)):
        experts, R = "tp", (R if d > 1 else 0)  # nothing to spread, or whole experts do not split: tensor-parallel
    return Layout(t, 1, d, 1, experts=experts, redundant_experts=R), ""


def tep_experts(row, tp: int | None, dp: int) -> str:
    """"ep" where an agg row's tp group held whole experts (attention tensor-parallel, experts expert-parallel: TEP),
    else "tp". InferenceX names a run by its GPUs and the expert parallelism within them (..._tp8_ep8_...), and runs
    attention DP where the sample's attention_dp_size says so: an id whose ep is its tp, without attention DP, ran
    TEP. Without such an id, the sample's own split says it: moe_tp 1 and moe_ep the worker's tp. A script that runs
    the experts over all its tp GPUs whatever the configuration's ep (inferencex.agg_ep) says "ep" before all."""
    if not tp or tp < 2 or dp > 1:
        return "tp"
    if row["id"] in agg_ep():  # the script's launch ran the experts over all tp GPUs whatever its ep said
        return "ep"
    ran = agg_topology().get(row["id"])
    if ran is not None and ran[2] is not None:
        return "ep" if ran[0] == ran[1] == tp and not ran[2] else "tp"
    m = _ID_TP_EP.search(str(row["id"]))
    if m is not None:
        return "ep" if int(m[1]) == int(m[2]) == tp else "tp"
    return "ep" if _int(row.get("moe_tp_size")) == 1 and _int(row.get("moe_ep_size")) == tp else "tp"


def tep_decode(source: str) -> bool:
    """Whether a disagg row's recipe ran its decode workers TEP: srt-slurm's TensorRT-LLM recipes name the decode
    workers gen<n>_tep<k> (attention tensor-parallel over k GPUs, the experts expert-parallel over them; the
    InferenceX yaml's decode entry: tp k, ep k, dp-attn false) or gen<n>_dep<k> (attention DP)."""
    return re.search(r"_gen\d+_?tep\d+_", str(source)) is not None


def agg_parallel(row) -> tuple:
    """(tp, attention DP, note) of an aggregated row. InferenceX names a run by its GPUs and the expert parallelism
    within them (..._tp8_ep8_...: 8 GPUs, the experts over all 8), and so does the id the sample keeps. 194 rows of
    the sample's file 2026-04-06.csv give the product of the two as the run's tp_size (or attention_dp_size): tp 64
    with moe_tp 8 x moe_ep 8 for a run named tp8_ep8, priced before as 64 GPUs. 89 of those measurements are in the
    sample again (the same TTFT to 0.01 ms): all 80 twins in 2026-03-25.csv and all 31 in
    qwen3.5-397b-gap-analysis.csv give the id's GPUs; 12 Qwen3.5 rows without a source file give the product, and
    one row of 2026-04-06.csv gives tp 1 for a run named tp2_ep2.
    Where tp_size x attention_dp_size is the id's tp x ep (ep > 1) and not both are above 1, the row ran on the
    id's tp GPUs: tensor parallel over them, or attention DP where the sample says DP. Rows with both above 1
    (Kimi-K2.5 on B200, tp 4 x DP 4 for tp4_ep4; its twins say the same) are kept as they are.

    123 rows of AIConfigurator's database dump (ids ..._cfg<n>, no tp in the id) carry the same signature: moe_tp
    = moe_ep = k and k^2 GPUs (tp 64, moe 8 x 8; tp 16, moe 4 x 4). Where the sample holds them again they are k
    GPUs: the 12 Qwen3.5 rows on B200 are the same measurements (to 0.01 ms) as tp 4 rows of 2026-03-25.csv and
    qwen3.5-397b-gap-analysis.csv; the 14 TensorRT-LLM DeepSeek-V3 rows on H200 (cfg181, tp 64) measure within
    2.5% of the tp 8 rows of cfg83 at the same lengths and clients (TPOT 0.975-1.005x). A row whose moe_tp and
    moe_ep are one k >= 4 with tp x DP = k^2 runs on k GPUs. k = 2 (4 GPUs as moe 2 x 2) is a layout the engines
    run and is kept.

    The sample's attention_dp_size is the configuration's dp-attn. A TensorRT-LLM script that decides DP_ATTENTION
    itself from ISL, OSL and the clients (benchmarks/dsr1_fp4_b200_trt_slurm.sh@e06929c70: on above 32 clients at
    8k/1k, from 256 at 1k/1k) overrides it; such rows (inferencex.agg_dp) run attention DP over their GPUs."""
    tp, dp, note = _agg_gpus(row)
    if dp == 1 and tp and tp > 1 and row["id"] in agg_dp():  # the script turned attention DP on over its tp GPUs
        why = (f"attention DP over its {tp} GPUs: the benchmark script's DP_ATTENTION block turned it on where the "
               f"sample's attention_dp_size is 1 (agg_ep.csv ep dp)")
        return 1, tp, f"{note}; {why}" if note else why
    return tp, dp, note


def _agg_gpus(row) -> tuple:
    """agg_parallel's (tp, attention DP, note) before a script's own attention-DP decision (agg_dp)."""
    tp, dp = _int(row["tp_size"]), _int(row["attention_dp_size"]) or 1
    ran = agg_topology().get(row["id"])
    if ran is not None and ran[2] is not None:  # the run InferenceX's own configuration names (agg_topology)
        t, e, dpa = ran
        fixed = (1, t) if dpa else (t, 1)
        if (tp, dp) == fixed:
            return tp, dp, ""
        return (*fixed, f"the sample gives tp_size {tp}, attention_dp_size {dp}; the run's configuration entry: "
                        f"tp {t}, ep {e}, dp-attn {str(dpa).lower()} (agg_topology.csv): {t} GPUs")
    m = _ID_TP_EP.search(str(row["id"]))
    if tp is None:
        return tp, dp, ""
    if m is None:
        k, e = _int(row.get("moe_tp_size")), _int(row.get("moe_ep_size"))
        if k is None or k != e or k < 4 or tp * dp != k * k or (tp > 1 and dp > 1):
            return tp, dp, ""
        what = f"attention_dp_size {dp}" if dp > 1 else f"tp_size {tp}"
        return (*((1, k) if dp > 1 else (k, 1)), f"the sample's {what} is moe_tp x moe_ep ({k} x {k}): {k} GPUs")
    t, e = int(m[1]), int(m[2])
    if e == 1 or tp * dp != t * e or (tp > 1 and dp > 1):
        return tp, dp, ""
    fixed = (1, t) if dp > 1 else (t, 1)
    what = f"attention_dp_size {dp}" if dp > 1 else f"tp_size {tp}"
    return (*fixed, f"the sample's {what} is tp x ep of the run its id names (tp{t}_ep{e}): {t} GPUs")


def kv_auto(row) -> bool:
    """Whether the row's engine ran its KV cache at its default, auto: an aggregated row whose script set no
    --kv-cache-dtype (inferencex.agg_kv), or a disaggregated one whose recipe set none for either worker
    (inferencex.disagg_kv). Rows not in those tables keep the precision's cache."""
    if row["mode"] == "agg":
        return agg_kv().get(row["id"]) == "auto"
    return disagg_kv().get(row["id"], ())[:2] == ("auto", "auto")


def plan(df, recipes=None) -> list[dict]:
    """Per row: the catalog model and device, precision, layouts, concurrency and workers, or the reason the row
    cannot be predicted ("status": "ok" or "skipped", "reason"). A disagg row without worker counts takes them from
    its recipe where recipe_workers (`recipes`: that table's path, default the shipped one) has it."""
    from .. import api

    out, specs, aic = [], {}, aic_dir()
    for row in df.to_dict("records"):
        r = {"id": row["id"], "status": "skipped", "reason": "", "assumed": ""}
        out.append(r)
        name, dev = MODELS.get(row["model_path"]), SYSTEMS.get(row["system"])
        if name is None:
            r["reason"] = f"model {row['model_path']} not in the catalog"
            continue
        if dev is None:
            r["reason"] = f"system {row['system']} not in the catalog"
            continue
        try:
            if (name, dev) not in specs:
                (m,), (hw,) = api.specs(name, dev, None)
                specs[(name, dev)] = (m, hw)
        except SpecError as e:
            r["reason"] = f"{name} or {dev} not in the catalog ({e.problem})"
            continue
        m, hw = specs[(name, dev)]
        q = row["gemm_quant_mode"] if isinstance(row["gemm_quant_mode"], str) else row["precision"]
        if not isinstance(q, str):
            q = "bf16"
            r["assumed"] = "precision not given: bf16 (the checkpoint's own)"
        if q not in PRECISION:
            r["reason"] = f"quant mode {q} not mapped"
            continue
        n = concurrency(row)
        if n is None:
            r["reason"] = "no concurrency"
            continue
        wts, act, kv = PRECISION[q]
        if kv_auto(row) and row["backend"] == "sglang" and row["model_path"] in NSA_MODELS:
            kv = "bf16" if row["system"] in SM90 else "fp8"  # SGLang's own auto for DeepSeek-NSA (inferencex)
        elif kv_auto(row) and (row["model_path"], row["precision"]) in KV_UNQUANTIZED:
            kv = "bf16"  # its script or recipe left the engine's KV cache at auto: the model's dtype
            if disagg_kv().get(row["id"], ("", "", ""))[2] == "uniform":
                r["assumed"] = "; ".join(x for x in (r["assumed"], "KV cache bf16: no recipe read, and every SGLang "
                                                     "recipe for this device in srt-slurm leaves it at auto") if x)
        wts = weights_format(row, wts)
        if act == "nvfp4" and "fp4" not in hw.peak_flops:  # no fp4 tensor cores (Hopper): fp4 weights, 16-bit math
            act = "bf16"
            r["assumed"] = "; ".join(x for x in (r["assumed"], f"{dev} has no fp4 tensor cores: fp4 weights with bf16 "
                                                 "activations (W4A16, as the engines run them there)") if x)
        pins = checkpoint_pins(m, row, q)
        if pins:
            r["pins"] = pins
        moe = moe_backends().get(row["id"]) if m.moe else None
        if m.moe and moe is None and row["mode"] == "disagg":  # the recipe its limits were read from (settings.py)
            moe = (disagg_settings().get(row["id"]) or {}).get("moe")
        if moe and all(b in MOE_BACKENDS_OF.get(row["backend"], ()) or not b for b in moe):
            # the MoE backend its script or recipe named (TensorRT-LLM's moe_config.backend, vLLM's Marlin): its
            # kernels' tables price the experts
            r["prefill_moe_backend"], r["decode_moe_backend"] = moe
        r.update(model=name, hardware=dev, weights=wts, act=act, kv=kv,
                 concurrency=n, isl=int(row["isl"]), osl=int(row["osl"]), engine=row["backend"],
                 engine_version=measured_version(row["system"], row["backend"], row["backend_version"], aic),
                 budget=budget(row["backend"], hw))
        if row["mode"] == "agg":
            tp, dp, fixed = agg_parallel(row)
            if fixed:
                r["assumed"] = "; ".join(x for x in (r["assumed"], fixed) if x)
            bench, why = benchmark_settings(agg_config().get(row["id"]), row["backend"], n)
            r.update(bench)
            if why:
                r["assumed"] = "; ".join(x for x in (r["assumed"], why) if x)
            if PREFILL.get(row["backend"]) == "whole" and r["isl"] > r["budget"]:
                r["prefill"] = "chunked"  # an unchunked prompt over the budget cannot have run (oversize_prompt)
                r["assumed"] = "; ".join(x for x in (r["assumed"], oversize_prompt(r["isl"], r["budget"])) if x)
            spec = agg_speculative().get(row["id"])
            if spec is not None:  # from the configuration that ran it (agg_speculative.csv)
                r.update(speculative=spec[0], mtp=spec[1])
                if spec[0] == "mtp" and name in MTP_PRICED and "spread" in r:
                    r["assumed"] = "; ".join(x for x in (r["assumed"], f"lengths fixed at ISL and OSL (the benchmark drew "
                                                         f"them from {r['spread']:g} x each): speculative steps are "
                                                         "simulated at one length") if x)
                if spec[0] == "mtp" and name not in MTP_PRICED:
                    r["assumed"] = "; ".join(x for x in (r["assumed"], f"ran MTP with {spec[1]} drafts, priced one "
                                                         f"token a step: no published acceptance for {name}") if x)
            lay, why = _layout(m, tp, dp, tep_experts(row, tp, dp))
            if lay is None:
                r["reason"] = why
                continue
            r.update(layout=lay, status="ok")
        else:
            wp, wd = _int(row["prefill_num_workers"]), _int(row["decode_num_workers"])
            rec = recipe_workers(recipes).get(row["id"]) if wp is None or wd is None else None
            if rec is not None:  # the benchmark's recipe: its workers, GPUs per worker and attention DP
                wp, wd = rec["prefill_workers"], rec["decode_workers"]
                (tp_p, dp_p), (tp_d, dp_d) = (_recipe_layout(rec, row, s) for s in ("prefill", "decode"))
                r.update(workers="recipe", speculative=rec["speculative"], mtp=rec["mtp"])
            else:
                tp_p, dp_p = row["prefill_tp_size"], row["prefill_attention_dp_size"]
                tp_d, dp_d = row["decode_tp_size"], row["decode_attention_dp_size"]
                r["workers"] = "recorded" if wp is not None and wd is not None else "assumed"
            st = disagg_settings().get(row["id"])  # the recipe it ran, whoever recorded its workers
            red = st["redundant"] if st is not None else (0, 0)
            lp, why_p = _layout(m, tp_p, dp_p, redundant=red[0])
            ld, why_d = _layout(m, tp_d, dp_d, "ep" if rec is not None and tep_decode(rec["source"]) else "tp", red[1])
            if lp is None or ld is None:
                r["reason"] = f"prefill: {why_p}" if lp is None else f"decode: {why_d}"
                continue
            if wp is None or wd is None:
                wp, wd = wp or 1, wd or 1
                r["assumed"] = "; ".join(x for x in (r["assumed"], f"{WORKERS_ASSUMED}: {wp} prefill, {wd} decode") if x)
            lim = disagg_limits().get(row["id"])
            if lim is not None:  # the limits its configuration set (disagg_limits), under its engine's names
                if lim[0] != row["backend"]:
                    raise SpecError(str(LIMITS), "engine", f"row {row['id']}: {lim[0]}'s limits for a "
                                                           f"{row['backend']} run")
                r.update(lim[1])
            if (st is not None and st["benchmark"] == "sa-bench") or (rec is not None and
                                                                        "NVIDIA/srt-slurm@" in rec["source"]):
                bench = SA_BENCH if st is None else {"profile": st["profile"], "spread": st["spread"]}
                r.update(bench)  # sa-bench's requests: 10 N measured, lengths drawn from [0.8 L, L]
                if r.get("speculative") == "mtp" and name in MTP_PRICED:
                    r["assumed"] = "; ".join(x for x in (r["assumed"], "lengths fixed at ISL and OSL (the benchmark "
                                                         f"drew them from {bench['spread']:g} x each): speculative "
                                                         "steps are simulated at one length") if x)
            if st is not None and st["recv"] is not None and st["recv"] > 1:  # SGLang's decode workers: every k loops
                r["decode_recv"] = st["recv"]
            r.update(layout=lp, decode_layout=ld, prefill_workers=wp, decode_workers=wd, status="ok")
    return out


def _recipe_layout(rec: dict, row, stage: str) -> tuple:
    """(tp, attention DP) of one pool's worker from its recipe: attention DP over all its GPUs where dp-attn is on
    (TensorRT-LLM's and SGLang's DEP: attention tp 1 per rank, the experts over every GPU), tensor parallel over
    them where it is off; where the recipe gives no GPU count or no dp-attn, the row's own."""
    gpus, dp = rec[f"{stage}_gpus"], rec[f"{stage}_dp_attn"]
    if gpus is None:
        return row[f"{stage}_tp_size"], row[f"{stage}_attention_dp_size"]
    if dp is None:
        return gpus, row[f"{stage}_attention_dp_size"]
    return (1, gpus) if dp else (gpus, 1)


PREFILL = ENGINE_PREFILL  # each engine's default prompt batching; the sources are in scheduler.py


def oversize_prompt(isl: int, budget: int) -> str:
    """What an agg TensorRT-LLM row assumes when its prompt is longer than its token budget: the engine runs prompts
    unchunked by default (enable_chunked_prefill False) and its frontend refuses one over max_num_tokens
    (tensorrt_llm LLM._check_arguments raises RequestError; NVIDIA/TensorRT-LLM
    tests/unittest/llmapi test_check_arguments_rejects_oversize_without_block_reuse: "With block reuse disabled and
    chunked prefill off, an oversized request must be rejected up front"), so a run that measured such prompts
    chunked them, or set a larger budget that the sample does not record: chunked prompts at the budget."""
    return (f"prompt {isl} tokens over TensorRT-LLM's max_num_tokens {budget}, which an unchunked prompt cannot run: "
            f"chunked prefill assumed")


def worker_budget(p: dict, lay: Layout, pool: str = "") -> int:
    """The tokens per iteration of one worker of this layout, from the engine's default p["budget"] (budget), or a
    disaggregated pool's ("prefill", "decode") max_num_tokens / chunked-prefill-size where its configuration set it
    (disagg_limits).
    Under attention DP (lay.ep ranks) TensorRT-LLM and vLLM run one scheduler per rank, each with the whole
    default, so the worker runs lay.ep times it. TensorRT-LLM: each rank runs its own executor and scheduler and
    nothing divides the limits by the DP size (ai-dynamo/dynamo#11982; the per-rank max_num_tokens assert:
    NVIDIA/TensorRT-LLM#14481). vLLM: "each DP rank is deployed as a separate 'core engine' process" (docs,
    serving/data_parallel_deployment.md). SGLang divides chunked_prefill_size among the ranks (server_args.py
    _handle_data_parallelism: chunked_prefill_size // dp_size), so its worker runs the default."""
    b = (p.get(f"{pool}_max_tokens") if pool else None) or p["budget"]
    return b * _ranks(p, lay)


def _ranks(p: dict, lay: Layout) -> int:
    """How many times a worker runs its configured limits: once a rank under attention DP in TensorRT-LLM and vLLM
    (lay.ep ranks, each its own scheduler), once a worker in SGLang (worker_budget's sources)."""
    return 1 if p.get("engine") == "sglang" else lay.ep


def worker_cap(p: dict, lay: Layout, pool: str, row_tokens: int = 1) -> int | None:
    """The requests one worker of a disaggregated pool runs at once, from its configuration (disagg_limits): the
    max_batch_size of each attention-DP rank (TensorRT-LLM: "Maximum number of requests that the engine can
    schedule", per rank as worker_budget's limits) or SGLang's max-running-requests of the worker, and on a
    TensorRT-LLM or vLLM decode worker also max_num_tokens over the tokens each running request computes a step
    (row_tokens: 1 + its drafts; TensorRT-LLM's scheduler counts a generation request's draft tokens against
    max_num_tokens). SGLang's chunked-prefill-size bounds prompt chunks, not running requests. None where the
    configuration set neither (the engine's default, which the KV cache bounds first)."""
    n = p.get(f"{pool}_max_batch")
    t = p.get(f"{pool}_max_tokens") if pool == "decode" and p.get("engine") != "sglang" else None
    caps = [c for c in (n, t and max(1, t // row_tokens)) if c]
    if not caps:
        return None
    return min(caps) * _ranks(p, lay)


# AIPerf measures 20 N requests (AIConfigurator's bench_run.sh.j2: --num-requests 20 N) and starts them only once
# every warm-up response is back ("By default, AIPerf waits indefinitely for all warmup responses before starting
# profiling": AIPerf docs, tutorials/warmup.md): the profiling phase opens on an empty server with N prompts
# sent at once, and its last requests run while the clients stop sending
PROFILE_ROUNDS = 20


def profile_mean(x, n: int, warmup: int, rounds: int, profile: int = PROFILE_ROUNDS) -> float:
    """The mean of x over AIPerf's profiling phase of `profile` x n requests, from one simulated closed loop of n
    clients that starts empty: its first `warmup` x n requests are the phase's first rounds (the burst of n
    prompts and the round it staggers), its last n the phase's last round (sent while no request follows), and
    the `rounds` x n between them stand for every round in the middle.
    NaN marks a request the benchmark leaves out (a one-token output's TPOT): the mean is over the others, each
    weighted as above, and 0 when there are none (benchmark_serving.py's mean of no TPOT)."""
    x = np.asarray(x, dtype=np.float64)
    head, mid, tail = x[:warmup * n], x[warmup * n:(warmup + rounds) * n], x[(warmup + rounds) * n:]
    middle = profile - warmup - 1
    whole = warmup >= 1 and tail.size == n and middle >= 0  # else no burst to count or no drain: the steady window
    if np.isnan(x).any():
        w = np.ones_like(x)
        w[warmup * n:(warmup + rounds) * n] = middle * n / mid.size if whole else 1.0
        if not whole:
            w[:warmup * n], w[(warmup + rounds) * n:] = 0.0, 0.0
        ok = ~np.isnan(x) & (w > 0)
        return float(np.sum(w[ok] * x[ok]) / np.sum(w[ok])) if ok.any() else 0.0
    if not whole:
        return float(np.mean(mid))
    return float((np.sum(head) + middle * n * np.mean(mid) + np.sum(tail)) / (profile * n))


def spread_lengths(L: int, ratio: float, n: int, seed: int) -> np.ndarray:
    """n lengths evenly spaced over the integers int(L x ratio) ... L (the range benchmark_serving.py draws each
    random request's length from, uniformly), in an order shuffled with `seed`: their mean is the range's."""
    lo = int(L * ratio)
    x = lo + np.floor((L - lo + 1) * (np.arange(n) + 0.5) / n).astype(np.int64)
    return np.random.default_rng(seed).permutation(x)
