"""Launch settings of a capacity row: the vLLM, SGLang or TensorRT-LLM arguments that serve it as searched.

docs/launch.md derives each mapping from the engine's own documentation or source and says what is not set.
Every flag below carries the place it was read (engine versions: vLLM 0.11 main, SGLang 0.5 main, TensorRT-LLM
1.x main). A row's layout maps as follows (perfmodel.ops.Layout: devices = tp x ep per replica):
- tp: tensor parallel inside each of the ep groups.
- ep > 1: ep device groups of tp each run attention data-parallel on their own sequences; experts are spread over
  the groups (E/ep each), each expert split tp ways; one all-to-all dispatch and combine per MoE layer.
- replicas: independent instances of the same command; disaggregated rows give a prefill and a decode pool.
- slots and token budget are per replica (one scheduler); memory_fraction is the share of each device's memory
  that weights + KV cache may take (perfmodel's own KV capacity assumes 1.0: serving/kvmemory.py kv_sizes).
"""
from __future__ import annotations

import json
import math
import re
import shlex

import numpy as np

from .errors import SpecError

ENGINES = ("vllm", "sglang", "trtllm")
_ALIAS = {"vllm": "vllm", "sglang": "sglang", "trtllm": "trtllm", "trt-llm": "trtllm", "tensorrt-llm": "trtllm",
          "tensorrt_llm": "trtllm", "tensorrtllm": "trtllm"}

# perfmodel KV format -> (vLLM --kv-cache-dtype, SGLang --kv-cache-dtype, TRT-LLM kv_cache_config.dtype); "auto" is
# the model's own dtype in all three. vLLM: vllm/config/cache.py CacheDType ("fp8 (=fp8_e4m3)"); SGLang:
# docs/advanced_features/server_arguments.md (auto, fp8_e5m2, fp8_e4m3, bf16); TRT-LLM: docs features/quantization
# "FP8 KV Cache": KvCacheConfig(dtype='fp8'), no E5M2 cache.
_KV = {"bf16": ("auto", "auto", "auto"), "fp16": ("auto", "auto", "auto"), "fp8": ("fp8", "fp8_e4m3", "fp8"),
       "fp8-e4m3": ("fp8", "fp8_e4m3", "fp8"), "fp8-e5m2": ("fp8_e5m2", "fp8_e5m2", None)}
_WIDE = ("bf16", "fp16", "fp32")  # weights the checkpoint already holds: no flag
_FP8 = ("fp8", "fp8-e4m3")  # online FP8: vLLM docs/features/quantization/fp8.md "Online Dynamic Quantization"
# (--quantization fp8); SGLang server_arguments.md "add --quantization fp8 on a fp16 checkpoint"


def engine_of(impl_engine: str | None) -> str:
    """'vllm 0.24.0' / 'sglang 0.5' / 'tensorrt-llm 1.3' / 'trtllm-1.3' -> 'vllm' | 'sglang' | 'trtllm'; None or ''
    -> 'vllm' (the engine whose defaults the capacity search's slots=256 and token budget 2048 follow)."""
    text = str(impl_engine or "").strip().lower()
    if not text:
        return "vllm"
    head = re.sub(r"[-_ ]?v?\d[\w.]*$", "", text.split()[0])
    if head not in _ALIAS:
        raise SpecError("--engine", None, f"unknown engine {impl_engine!r}: choose vllm, sglang or trtllm "
                                          "(tensorrt-llm)")
    return _ALIAS[head]


def model_id(model) -> str:
    """The Hugging Face repo of a catalog model ('meta-llama/Llama-3.1-70B' from its huggingface.co source URL, or
    from 'config.json of owner/name'); else its name."""
    src = str(getattr(model, "source", "") or "")
    m = re.search(r"huggingface\.co/([\w.-]+/[\w.-]+)", src) or re.match(r"config\.json of ([\w.-]+/[\w.-]+)", src)
    return m.group(1) if m else model.name


def _whole(v, opt: str, none_ok=False):
    if v is None and none_ok:
        return None
    try:  # numpy and pandas integers pass; bool, str, NaN and pd.NA do not
        ok = not isinstance(v, (bool, str)) and float(v) == int(v) >= 1
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok:
        raise SpecError(opt, None, f"must be a whole number >= 1, got {v!r}")
    return int(v)


def _frac(f: float) -> str:
    return f"{math.floor(float(f) * 1000) / 1000:g}"  # rounded down: never more memory than the row had


def _argv(args: dict) -> str:
    return "".join(f" {k}" if v is True else f" {k} {shlex.quote(str(v))}" for k, v in args.items())


def _yaml(d: dict, ind: str = "") -> str:
    out = []
    for k, v in d.items():
        if isinstance(v, dict):
            out.append(f"{ind}{k}:\n{_yaml(v, ind + '  ')}")
        else:
            out.append(f"{ind}{k}: {str(v).lower() if isinstance(v, bool) else v}")
    return "\n".join(out)


def _vllm(m, tp, ep, seqs, toks, kv, q, frac, role):
    a = {"--tensor-parallel-size": tp}  # vllm/engine/arg_utils.py (0.11): ParallelConfig group
    if ep > 1:  # attention DP ranks of tp GPUs; EP_SIZE = TP x DP (docs/serving/expert_parallel_deployment.md)
        a["--data-parallel-size"], a["--enable-expert-parallel"] = ep, True
    a["--max-num-seqs"] = -(-seqs // ep)  # "--max-num-seqs applies per DP rank" (data_parallel_deployment.md)
    if toks:  # SchedulerConfig group: the per-step token budget of chunked prefill (per DP rank, its own scheduler)
        a["--max-num-batched-tokens"], a["--enable-chunked-prefill"] = -(-toks // ep), True
    a["--kv-cache-dtype"] = kv  # CacheConfig.cache_dtype
    a["--gpu-memory-utilization"] = _frac(frac)  # CacheConfig: fraction of GPU memory for the model executor
    if q:
        a["--quantization"] = "fp8"
    if role:  # docs/features/nixl_connector_usage.md: kv_producer (prefiller) / kv_consumer (decoder)
        a["--kv-transfer-config"] = json.dumps({"kv_connector": "NixlConnector", "kv_role": f"kv_{role}"},
                                               separators=(",", ":"))
    return "vllm serve " + shlex.quote(m) + _argv(a), a, None


def _sglang(m, tp, ep, seqs, toks, kv, q, frac, role):
    a = {"--model-path": m, "--tp-size": tp * ep}  # docs/advanced_features/server_arguments.md (0.5)
    if ep > 1:  # attn_tp_size = tp_size / dp_size; experts TP(tp) x EP(ep) (tp_dp_dp_attention_explainer.md)
        a.update({"--dp-size": ep, "--enable-dp-attention": True, "--ep-size": ep})
    a["--max-running-requests"] = seqs  # global: divided by dp_size under DP attention (server_args.py)
    a["--chunked-prefill-size"] = toks or -1  # "-1 means disabling chunked prefill"; global, divided by dp_size too
    a["--kv-cache-dtype"] = kv
    a["--mem-fraction-static"] = _frac(frac)  # "memory used for static allocation (model weights and KV cache pool)"
    if q:
        a["--quantization"] = "fp8"
    if role:  # docs/advanced_features/pd_disaggregation.md (transfer backend left at its default, mooncake)
        a["--disaggregation-mode"] = "prefill" if role == "producer" else "decode"
    return "python -m sglang.launch_server" + _argv(a), a, None


def _trtllm(m, tp, ep, seqs, toks, kv, q, frac, role):
    adp = ep > 1 and tp == 1  # enable_attention_dp: attention DP over all tp_size ranks (features/parallel-strategy.md)
    per = ep if adp else 1  # max_batch_size / max_num_tokens read per attention-DP rank (not found in the docs)
    a = {"--tp_size": tp * ep}  # tensorrt_llm/commands/serve.py (1.x): --tensor_parallel_size/--tp_size
    if ep > 1:  # --moe_expert_parallel_size/--ep_size; moe_tp x moe_ep = tp_size, so moe_tp = tp
        a["--ep_size"] = ep
    a["--max_batch_size"] = -(-seqs // per)  # "Maximum number of requests that the engine can schedule"
    if toks:  # "Maximum number of batched input tokens"; chunking lets a longer prompt through (serve.py flag)
        a["--max_num_tokens"], a["--enable_chunked_prefill"] = -(-toks // per), True
    a["--kv_cache_free_gpu_memory_fraction"] = _frac(frac)  # "Free GPU memory fraction ... after ... weights"
    cfg = {"kv_cache_config": {"dtype": kv, "free_gpu_memory_fraction": float(_frac(frac))}}  # replaces the CLI's
    if adp:
        cfg["enable_attention_dp"] = True
    if role == "producer":  # examples/disaggregated/README.md: ctx servers run without the overlap scheduler
        cfg["disable_overlap_scheduler"] = True
    if role:
        cfg["cache_transceiver_config"] = {"backend": "DEFAULT"}  # same README: DEFAULT (NIXL), UCX or NIXL
    name = f"{'ctx' if role == 'producer' else 'gen' if role else 'extra'}-llm-api-config.yml"
    a["--extra_llm_api_options"] = name  # serve.py: a YAML that overwrites the trtllm-serve parameters
    return f"cat > {name} <<'EOF'\n{_yaml(cfg)}\nEOF\ntrtllm-serve " + shlex.quote(m) + _argv(a), a, cfg


def _router(engine, n_p, n_d) -> str:
    P, D = [f"prefill-{i}" for i in range(n_p)], [f"decode-{i}" for i in range(n_d)]
    if engine == "vllm":  # nixl_connector_usage.md: a proxy script in vLLM's repository (not in the wheel)
        return ("python tests/v1/kv_connector/nixl_integration/toy_proxy_server.py --port 8192 --prefiller-hosts "
                f"{' '.join(P)} --prefiller-ports {' '.join(['8000'] * n_p)} --decoder-hosts {' '.join(D)} "
                f"--decoder-ports {' '.join(['8000'] * n_d)}")
    if engine == "sglang":  # pd_disaggregation.md / router.md: one --prefill / --decode per instance
        return ("python -m sglang_router.launch_router --pd-disaggregation"
                + "".join(f" --prefill http://{h}:30000" for h in P) + "".join(f" --decode http://{h}:30000" for h in D)
                + " --host 0.0.0.0 --port 8000")
    up, ud = ("".join(f'\n    - "{h}:8000"' for h in hs) for hs in (P, D))  # examples/disaggregated/README.md
    text = (f"hostname: localhost\nport: 8000\nbackend: pytorch\ncontext_servers:\n  num_instances: {n_p}\n  urls:"
            f"{up}\ngeneration_servers:\n  num_instances: {n_d}\n  urls:{ud}")
    return f"cat > disagg_config.yaml <<'EOF'\n{text}\nEOF\ntrtllm-serve disaggregated -c disagg_config.yaml"


def settings(engine: str, *, model_id: str, serving: str, tp: int, ep: int, replicas: int, prefill_tp=None,
             prefill_instances=None, decode_tp=None, decode_instances=None, max_num_seqs: int,
             max_num_batched_tokens: int | None, kv_dtype: str, weights_dtype: str, memory_fraction: float,
             weights_fraction: float | dict | None = None) -> list[dict]:
    """One dict per pool: {"engine", "pool": "colocated"|"prefill"|"decode", "instances", "gpus_per_instance",
    "args": {flag: value} (ordered), "config": the TRT-LLM YAML or None, "command": a shell command line (one
    instance), "notes": [str], "router": the disaggregated front end or None}.
    weights_fraction: weights per device / device memory (one float, or {pool: float}); only TRT-LLM uses it (its
    fraction is of the memory left after the weights); without it memory_fraction passes unchanged, with a note."""
    eng = engine_of(engine)
    try:
        ok = not isinstance(memory_fraction, (bool, str)) and 0 < float(memory_fraction) <= 1
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise SpecError("--memory-fraction", None, f"must be a fraction in (0, 1], got {memory_fraction!r}")
    kv_key, w_key = str(kv_dtype or "bf16").strip().lower(), str(weights_dtype).strip().lower()
    kvs = _KV.get(kv_key)
    kv = kvs and kvs[ENGINES.index(eng)]
    if kv is None:
        ok = [k for k, v in _KV.items() if v[ENGINES.index(eng)]]
        raise SpecError("--kv-dtype", None, f"{eng} has no {kv_dtype!r} KV cache: choose {', '.join(ok)}")
    seqs = _whole(max_num_seqs, "--slots")
    toks = _whole(max_num_batched_tokens, "--token-budget", none_ok=True)
    if serving == "colocated":
        plan = [("colocated", _whole(replicas, "--replicas"), _whole(tp, "--tp"), _whole(ep, "--ep"), None)]
    elif serving == "disaggregated":
        plan = [("prefill", _whole(prefill_instances, "prefill_instances"), _whole(prefill_tp, "prefill_tp"), 1,
                 "producer"),
                ("decode", _whole(decode_instances, "decode_instances"), _whole(decode_tp, "decode_tp"), 1, "consumer")]
    else:
        raise SpecError("serving", None, f"must be colocated or disaggregated, got {serving!r}")
    frac, notes = float(memory_fraction), []
    if eng == "trtllm" and weights_fraction is None:
        notes.append("kv_cache_free_gpu_memory_fraction is of the memory free after the weights: the row's "
                     "fraction of all memory is passed unchanged (pass weights_fraction to convert it)")
    q = w_key in _FP8 and eng != "trtllm"
    if w_key in _FP8 and eng == "trtllm":
        notes.append("trtllm-serve quantizes nothing online: serve an FP8 checkpoint (e.g. NVIDIA ModelOpt's)")
    elif w_key not in _WIDE + _FP8:
        notes.append(f"serve a checkpoint already stored in {w_key} (no online flag is set)")
    if toks is None:
        notes.append("no token budget: the flag is left out and the engine's default applies (none is unlimited)"
                     if eng != "sglang" else "no token budget: chunked prefill is disabled (-1)")
    build = {"vllm": _vllm, "sglang": _sglang, "trtllm": _trtllm}[eng]
    router = _router(eng, plan[0][1], plan[1][1]) if serving == "disaggregated" else None
    pools = []
    for pool, n, ptp, pep, role in plan:
        w = weights_fraction.get(pool) if isinstance(weights_fraction, dict) else weights_fraction
        f = frac
        if eng == "trtllm" and w is not None:  # weights + KV = frac x memory -> KV / (memory - weights)
            if not 0 <= w < frac:
                raise SpecError("--memory-fraction", None, f"the {pool} weights ({w:.3g} of the memory) leave no KV "
                                                           f"cache within {frac:g}")
            f = (frac - w) / (1 - w)
        cmd, args, cfg = build(model_id, ptp, pep, seqs, toks, kv, q, f, role)
        extra = []
        if pep > 1 and ptp > 1 and eng == "vllm":
            extra.append("vLLM's expert parallelism holds whole experts over all tp x ep GPUs (the row splits each "
                         "expert tp ways inside its group): same bytes per GPU, other collectives")
        if pep > 1 and ptp == 1 and eng == "trtllm":
            extra.append("max_batch_size and max_num_tokens are the row's divided by ep: read as per attention-DP "
                         "rank (an assumption the TensorRT-LLM docs do not state)")
        if pep > 1 and ptp > 1 and eng == "trtllm":
            extra.append("TensorRT-LLM's attention DP spans all tp_size ranks, so attention runs TP over tp x ep here")
        pools.append({"engine": eng, "pool": pool, "instances": n, "gpus_per_instance": ptp * pep, "args": args,
                      "config": cfg, "command": cmd, "notes": notes + extra, "router": router})
    return pools


def format_settings(pools: list[dict]) -> str:
    """The pools for a terminal: a '# launch settings (engine): ...' header, each pool's command, its notes, and
    the router of a disaggregated row."""
    if not pools:
        return ""
    p0 = pools[0]
    head = "disaggregated" if p0["pool"] != "colocated" else \
        f"colocated, {p0['instances']} instance{'s' * (p0['instances'] != 1)} x {p0['gpus_per_instance']} GPUs"
    lines = [f"# launch settings ({p0['engine']}): {head}" + ("; hosts are placeholders" if p0.get("router") else "")]
    for p in pools:
        if p["pool"] != "colocated":
            lines.append(f"# {p['pool']} pool: {p['instances']} instance{'s' * (p['instances'] != 1)} x "
                         f"{p['gpus_per_instance']} GPUs")
        if p["instances"] > 1:
            lines.append(f"# run once per instance, each on its own {p['gpus_per_instance']} GPUs")
        lines.append(p["command"])
    lines += [f"# note: {n}" for n in dict.fromkeys(n for p in pools for n in p["notes"])]
    if p0.get("router"):
        lines += ["# router (the one endpoint clients call):", p0["router"]]
    return "\n".join(lines)


def chosen(t) -> int | None:
    """The capacity row to deploy: of the Pareto rows with a goodput, the lowest cost per million tokens when priced,
    else the most goodput per device (fewer devices on a tie); None when no row has a goodput."""
    import numpy as np

    g = np.asarray(t["goodput_per_device"], float)
    ok = np.flatnonzero(np.asarray(t["pareto"], bool) & np.isfinite(g))
    if not ok.size:
        return None
    cost = np.asarray(t["cost_per_million_tokens"], float)[ok]
    if np.isfinite(cost).any():
        return int(ok[np.nanargmin(cost)])
    dev = np.asarray(t["devices"], float)
    return int(sorted(ok, key=lambda i: (-g[i], dev[i]))[0])


def for_capacity(t, summary: dict, engine=None, memory_fraction=0.9, row: int | None = None):
    """(row, settings(...)) for a capacity table (dict of columns or DataFrame) and its summary: the chosen row (or
    `row`), for `engine` (default: the summary's impl profile's engine, else vLLM). None when no row has a goodput."""
    from . import api
    from .specs import load_impl

    n = len(list(t["hardware"]))
    if row is not None and (isinstance(row, bool) or not isinstance(row, (int, np.integer)) or not 0 <= row < n):
        raise SpecError("--row", None, f"must be a row number from 0 to {n - 1} of this capacity table, got {row!r}")
    i = chosen(t) if row is None else int(row)
    if i is None:
        return None
    try:
        frac = float(memory_fraction)
    except (TypeError, ValueError):
        raise SpecError("--memory-fraction", None, f"must be a fraction in (0, 1], got {memory_fraction!r}") from None
    impl, sets = summary.get("impl"), summary.get("sets")
    if engine is None and impl:
        engine = (impl if hasattr(impl, "engine") else load_impl(impl, sets)).engine or None
    col = lambda c: list(t[c])[i]  # noqa: E731
    num = lambda c: int(col(c)) if col(c) == col(c) else None  # noqa: E731
    m = api.specs(summary["model"], str(col("hardware")), sets)[0][0]
    dis = col("serving") == "disaggregated"
    pools = settings(engine, model_id=model_id(m), serving=str(col("serving")), tp=num("tp") or 1, ep=num("ep") or 1,
                     replicas=num("replicas") or 1, prefill_tp=num("prefill_tp") if dis else None,
                     prefill_instances=num("prefill_instances") if dis else None,
                     decode_tp=num("decode_tp") if dis else None,
                     decode_instances=num("decode_instances") if dis else None,
                     max_num_seqs=int(summary["slots"] or 1024), max_num_batched_tokens=summary["token_budget"],
                     kv_dtype=summary["kv_dtype"], weights_dtype=summary["weights_dtype"], memory_fraction=frac)
    return i, pools
