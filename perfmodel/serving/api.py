"""The serving simulator's query layer: dict-of-columns tables for the CLI and the public API."""
from __future__ import annotations

import functools
import math

import numpy as np

from ..errors import SpecError
from .kvmemory import kv_sizes
from .scheduler import POLICIES, StepCost, engine_prefill, simulate
from ..timemodel import impl_name
from .traffic import DEFAULT_OUTPUT, DEFAULT_PROMPT, MAX_BLOCK, MAX_BUDGET, _whole, make_traffic, parse_rate


def _setup(model, hardware, weights_dtype, kv_dtype, act_dtype, sets):
    from .. import api

    prec = api._prec(weights_dtype, kv_dtype, act_dtype)
    models, hws = api.specs(model, hardware, sets)
    if len(models) != 1 or len(hws) != 1:
        raise SpecError("-m/-H", None, "the simulator takes one model and one hardware")
    return models[0], hws[0], prec


def _budget(token_budget):
    """--token-budget: None (whole prompts) or tokens per step, at most MAX_BUDGET (checked before any work)."""
    if token_budget is None or str(token_budget).strip().lower() == "none":
        return None
    return _whole(token_budget, "--token-budget", 1, MAX_BUDGET)


def _slots(slots):
    if slots is None or str(slots).strip().lower() in ("none", "inf"):
        return None
    return _whole(slots, "--slots")


MAX_TOKENS = 5_000_000  # generated tokens simulated by one command, over all its runs: about 13 s here
# simulated generated tokens a second, one core: serve-sim --policy continuous --requests 100000 --slots 64, 2026-12-02:
# 2,908,913 tokens in 14.8 s (fastsim with its log; the per-sequence simulator's static runs are faster)
TOKENS_PER_S = 390_000


# an iteration's own cost in generated tokens at TOKENS_PER_S: about 49 us at one sequence (serve-sim --slots 1
# --requests 1500 --output-len 200 --policy continuous: 300,000 iterations, 14.7 s of CPU, 2026-12-02); a run of few
# slots is bounded by its iterations, not its tokens
TOKENS_PER_STEP = 20


def _bound(runs: int, max_tokens, requests=None, samples=1, tr=None, slots=None) -> None:
    """Refuse up front a simulation of more than max_tokens generated tokens in all: first from the request
    count alone (each sequence generates at least one token), then from the drawn or traced lengths."""
    limit = _whole(MAX_TOKENS if max_tokens is None else max_tokens, "--max-tokens")
    how = (f"over the limit of {limit:,}, about {limit / TOKENS_PER_S:.0f} s here at {TOKENS_PER_S:,} tokens a "
           "second (pass --max-tokens N, or max_tokens=N, to go past it)")
    if tr is None:
        n = runs * _whole(64 if requests is None else requests, "--requests") * _whole(samples, "--samples")
        if n > limit:
            raise SpecError("--requests", None, f"{n:,} sequences x runs generate at least {n:,} tokens, {how}")
        return
    total = runs * int(tr.outputs.sum())
    if total > limit:
        raise SpecError("--requests", None, f"{tr.n:,} requests generate {total:,} tokens over {runs} run(s), {how}")
    if slots is not None:  # each iteration produces at most `slots` tokens: few slots mean many iterations
        steps = runs * int(tr.outputs.sum()) / max(1, int(slots))
        if steps * TOKENS_PER_STEP > limit:
            raise SpecError("--slots", None, f"{tr.n:,} requests through {slots} slot(s) take at least {steps:,.0f} "
                                             f"iterations over {runs} run(s), each about the time of {TOKENS_PER_STEP} "
                                             f"generated tokens: {steps * TOKENS_PER_STEP:,.0f} token-equivalents, {how}")


def _whole_fits(prefill: str, budget, tr) -> None:
    """Whole prompts need the token budget: TensorRT-LLM without chunked prefill rejects a prompt longer than
    max_num_tokens at submission (llmapi/llm.py _check_arguments: "The sum of prompt length (9351.0), query length
    (0) should not exceed max_num_tokens (8192)", NVIDIA/TensorRT-LLM#9277)."""
    if prefill == "whole" and budget is not None and tr.n and int(tr.prompt.max()) > budget:
        i = int(np.argmax(tr.prompt))
        raise SpecError("--token-budget", None, f"{budget} tokens is less than the {int(tr.prompt[i])}-token prompt of "
                                                f"{tr.where[i]}: whole-prompt batching (TensorRT-LLM without chunked "
                                                "prefill) rejects it; raise the budget or pass --prefill chunked")


OVERLOAD = 1.5  # queue length, second half of the arrivals over the first: above it (and 2 more), the queue grows


def _overload(runs, model: str, device: str) -> None:
    """Warn when requests arrive faster than a run serves them. Then the queue grows with the trace: its
    length over the second half of the arrival window is well above its length over the first half (a
    stable server's queue fluctuates around one level; an overloaded one's grows about linearly, 3x from
    the first half's mean to the second's)."""
    import warnings

    from ..errors import LoadWarning

    for r in runs:
        s, req, log = r.summary, r.requests, r.timeline
        t0, t1 = float(np.min(req["arrival_s"])), float(np.max(req["arrival_s"]))
        if s["requests"] < 8 or t1 <= t0 or not len(log["t_start_s"]):
            continue
        t, dt, w = log["t_start_s"], log["duration_s"], log["waiting"]
        mid = (t0 + t1) / 2
        halves = [(t >= t0) & (t < mid), (t >= mid) & (t <= t1)]
        q1, q2 = (float(np.sum(w[h] * dt[h]) / np.sum(dt[h])) if np.sum(dt[h]) > 0 else 0.0 for h in halves)
        if q2 > OVERLOAD * q1 + 2 and q2 >= 4:
            served = s["requests"] / s["makespan_s"]
            offered = (s["requests"] - 1) / (t1 - t0)
            warnings.warn(f"{s['policy']} batching of {model} on {device}: requests arrive at {offered:.3g}/s per "
                          f"replica and the queue grows (mean {q1:.3g} waiting over the first half of the arrivals, "
                          f"{q2:.3g} over the second; {served:.3g} requests/s served), so latency and TTFT "
                          "percentiles grow with --requests: lower --rate, or add slots, memory or replicas",
                          LoadWarning, stacklevel=3)


def _fast(m, hw, tr, slots, block_size, sharing, prefill, token_budget, prec, cost, lay, conc, warm, progress=None):
    """scheduler.simulate(policy="continuous", kv_manager="paged") for one sample per request and no shared prefix,
    through fastsim.run with its iteration log: the same requests, iterations and summary (tests/test_serving.py
    holds them to scheduler.simulate's), at a fraction of the time on long traces."""
    from . import fastsim
    from .scheduler import PREFILL, does_not_fit, result, run_label, unfit_reason

    if prefill not in PREFILL:
        raise SpecError("--prefill", None, f"must be one of {', '.join(PREFILL)}, got {prefill!r}")
    slots = None if slots is None else _whole(slots, "--slots")
    budget = _budget(token_budget)
    block = _whole(block_size, "--block-size")
    conc = None if conc is None else _whole(conc, "--concurrency")
    warm = _whole(warm, "--warmup", 0)
    if warm >= tr.n:
        raise SpecError("--warmup", None, f"{warm} warm-up requests leave none of the {tr.n} to measure")
    sizes = kv_sizes(m, hw, prec, lay)
    P, O = tr.prompt.astype(np.int64), tr.outputs[:, 0].astype(np.int64)
    if P.size and (P + O).max() > sizes.max_context:
        i = int(np.argmax(P + O > sizes.max_context))
        raise SpecError(tr.where[i], None, f"prompt {P[i]} + output {O[i]} tokens exceed {m.name}'s max_context "
                                           f"({sizes.max_context})")
    label = run_label("paged" + ("+shared" if sharing else ""), prefill, budget, conc, slots)
    ok = fastsim.fits_alone(sizes, block, P, O)
    if not ok.all():  # does not fit: a result (scheduler.does_not_fit), as simulate gives it
        i = int(np.argmin(ok))
        return does_not_fit(tr, cost.mode, sizes, "continuous", label, warm, unfit_reason(tr.where[i], sizes, m))
    fc = fastsim.FastCost(cost, budget)
    log: list = []
    r = fastsim.run(tr.arrival, P, O, sizes, fc, slots, budget, prefill, block, concurrency=conc, log=log,
                    progress=progress, ahead=cost.ahead)
    done = r["done"]
    return result(tr, r["arrival"], r["first"], r["last"], done, r["preemptions"], (done >= 0).astype(np.int64), log,
                  r["generated"], cost.mode, fc.calls, sizes, "continuous", label, warm)


def serve_runs(model="llama-2-13b", hardware="h100-sxm", policy="both", requests=None, slots=8, rate=None,
               trace=None, prompt_len=DEFAULT_PROMPT, output_len=DEFAULT_OUTPUT, kv_manager="paged",
               block_size=16, shared_prefix=0, samples=1, sharing=True, prefill=None, token_budget=None,
               seed=0, weights_dtype="bf16", kv_dtype=None, act_dtype="bf16", sets=None,
               cost_quantum=16, tp=1, pp=1, ep=1, replicas=1, price=None, energy=False, mode="roofline",
               impl=None, max_tokens=None, concurrency=None, warmup=None, show=False) -> list:
    """The SimResults of `policy` (static, continuous or both) on one generated or traced traffic.

    concurrency=N: a closed loop of N clients instead of open-loop arrivals (vLLM `bench serve
    --max-concurrency`, AIPerf `--concurrency`): each client sends its next request the instant its previous
    one returns. Then `requests` defaults to 10 N and `warmup` (requests run but not measured, AIPerf's
    --warmup-request-count) to 2 N, the warm-up of AIConfigurator's benchmark template; with replicas, each
    serves N / R clients.

    mode: the step cost's mode, roofline (the ideal bound) or achievable (implementation profile `impl`).
    prefill: chunked, separate or whole (scheduler.py); None: the profile's engine's own (scheduler.ENGINE_PREFILL:
    whole prompts for TensorRT-LLM, prefill-only steps for SGLang, chunked for vLLM and the roofline).
    tp and ep spread one replica over devices (engine.mixed_step costs the collectives; memory is
    per device). With R replicas behind a round-robin balancer each serves every R-th request: one
    replica is simulated on its share (requests/R, rate/R) and the summary's throughput counts all R.
    """
    from ..api import check_mode, layout as _layout

    impl = check_mode(mode, impl, ("roofline", "achievable"), sets)
    prefill = engine_prefill(prefill, impl)
    token_budget = _budget(token_budget)
    block_size = _whole(block_size, "--block-size", 1, MAX_BLOCK)
    pols = POLICIES if policy == "both" else (policy,)
    if policy != "both" and policy not in POLICIES:
        raise SpecError("--policy", None, f"must be static, continuous or both, got {policy!r}")
    lay = _layout(tp, pp, ep, replicas)
    if lay.pp > 1:
        raise SpecError("--pp", None, "the serving simulator models tp, ep and replicas, not pipeline stages")
    m, hw, prec = _setup(model, hardware, weights_dtype, kv_dtype, act_dtype, sets)
    R = lay.replicas
    if R > 1 and trace is not None:
        raise SpecError("--replicas", None, "with a trace, simulate one replica's share of it (no splitting of traces)")
    conc, warm = closed_loop(concurrency, warmup, rate, trace, R)
    if conc is not None and requests is None:
        requests = 10 * conc * R
    share = None if requests is None else max(1, -(-_whole(requests, "--requests") // R))  # 0 is refused
    if conc is not None and share <= warm:
        raise SpecError("--requests", None, f"{share} requests per replica leave none to measure after the "
                                            f"{warm} of the warm-up (--warmup)")
    if trace is None:
        _bound(len(pols), max_tokens, share, samples)
    tr = make_traffic(share, None if rate is None else parse_rate(rate) / R, trace, prompt_len, output_len, samples,
                      shared_prefix, seed)
    _bound(len(pols), max_tokens, tr=tr, slots=_slots(slots))
    _whole_fits(prefill, token_budget, tr)
    one = lay.__class__(lay.tp, 1, lay.ep, 1)
    cost = StepCost(m, hw, prec, cost_quantum, one, mode, impl)
    from ..workers import _Progress

    bar = _Progress(tr.n * len(pols), "serve-sim: requests", show)
    runs = []
    try:
        for i, p in enumerate(pols):
            tick = (lambda k, i=i: bar.set(i * tr.n + k)) if bar.bar is not None else None
            if p == "continuous" and kv_manager == "paged" and tr.outputs.shape[1] == 1 and not tr.shared_prefix:
                runs.append(_fast(m, hw, tr, _slots(slots), block_size, sharing, prefill, token_budget, prec, cost, one,
                                  conc, warm, tick))
            else:
                runs.append(simulate(m, hw, tr, p, _slots(slots), kv_manager, block_size, sharing, prefill,
                                     token_budget, prec, cost=cost, layout=one, concurrency=conc, warmup=warm,
                                     progress=tick))
    finally:
        bar.close()
    from ..api import economics

    if rate is not None or trace is not None:
        _overload([r for r in runs if "does_not_fit" not in r.summary], m.name, hw.key or hw.name)
    if any("does_not_fit" in r.summary for r in runs):  # one column for every row of the table
        for r in runs:
            r.summary.setdefault("does_not_fit", "")
    for r in runs:
        r.summary["throughput_tok_s"] *= R
        r.summary.update(tp=lay.tp, ep=lay.ep, replicas=R, devices=lay.devices, mode=mode)
        if conc is not None:  # the closed loop's own figures: all clients, per device and per user
            s = r.summary
            s.update(concurrency=conc * R, request_rate=s["request_rate"] * R, mean_in_flight=s["mean_in_flight"] * R,
                     throughput_per_device=s["throughput_tok_s"] / lay.devices,
                     tok_s_per_user=1.0 / s["mean_tpot_s"] if s["mean_tpot_s"] > 0 else math.nan)
        if mode == "achievable":
            r.summary["impl"] = impl_name(impl)
        if price is not None or energy or hw.price_per_hour:  # at the simulated throughput, all devices
            r.summary.update(economics({"throughput_tok_s": r.summary["throughput_tok_s"]}, hw, lay.devices, price,
                                       energy))
    return runs


SUMMARY = ["policy", "mode", "kv_manager", "prefill", "slots", "tp", "ep", "replicas", "devices", "requests", "sequences", "tokens", "makespan_s",
           "throughput_tok_s", "mean_latency_s", "p50_latency_s", "p90_latency_s", "p99_latency_s", "mean_ttft_s",
           "p50_ttft_s", "p90_ttft_s", "p99_ttft_s", "mean_tpot_s", "p50_tpot_s", "p90_tpot_s", "p99_tpot_s",
           "steps", "preemptions", "mean_running", "peak_running", "kv_capacity_bytes", "peak_kv_reserved_bytes",
           "mean_kv_used_bytes", "mean_kv_reserved_bytes", "mean_kv_internal_bytes", "mean_kv_external_bytes",
           "mean_kv_saved_bytes"]


CLOSED = ["concurrency", "warmup", "request_rate", "mean_in_flight", "throughput_per_device", "tok_s_per_user"]


def closed_loop(concurrency, warmup, rate, trace, replicas: int = 1) -> tuple:
    """(clients per replica, warm-up requests per replica) of a closed loop, or (None, 0) for open-loop traffic."""
    if concurrency is None:
        if warmup is not None:
            raise SpecError("--warmup", None, "is for a closed loop: pass --concurrency N too")
        return None, 0
    n = _whole(concurrency, "--concurrency")
    if rate is not None:
        raise SpecError("--concurrency", None, "N clients send as fast as their requests return: drop --rate or --concurrency")
    if trace is not None:
        raise SpecError("--concurrency", None, "a trace gives the arrival times: drop --trace or --concurrency")
    if n % replicas:
        raise SpecError("--concurrency", None, f"{n} clients do not split evenly over {replicas} replicas")
    n //= replicas
    warm = 2 * n if warmup is None else _whole(warmup, "--warmup", 0) // replicas
    return n, warm


def _table(rows: list, cols: list) -> dict:
    return {c: np.asarray([r[c] for r in rows], dtype=object if isinstance(rows[0][c], str) else np.float64)
            for c in cols}


@functools.wraps(serve_runs)
def serve_sim(*args, **kw) -> dict:
    runs = serve_runs(*args, **kw)
    return _table([r.summary for r in runs], SUMMARY + [c for c in ["impl"] + CLOSED + ECONOMICS + ["does_not_fit"]
                                                        if c in runs[0].summary])


ECONOMICS = ["cost_per_million_tokens", "energy_per_token_j"]


serve_sim.__doc__ = """One summary row per policy (serve_runs' arguments): throughput, latency, TTFT and TPOT
percentiles, occupancy and KV use."""


def timeline(results: list) -> dict:
    """The iterations of several runs as one table with policy and mode columns (for plots and CSV)."""
    parts = [{"policy": np.full(len(r.timeline["step"]), r.summary["policy"], dtype=object),
              "mode": np.full(len(r.timeline["step"]), r.summary.get("mode", "roofline"), dtype=object), **r.timeline}
             for r in results]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


KV_REPORT = ["manager", "mode", "block_size", "requests", "peak_sequences", "mean_sequences", "kv_capacity_bytes",
             "peak_reserved_bytes", "mean_used_bytes", "mean_reserved_bytes", "utilization", "mean_internal_bytes",
             "mean_future_bytes", "mean_external_bytes", "mean_saved_bytes", "preemptions", "throughput_tok_s",
             "mean_latency_s"]


def kv_memory(model="llama-2-13b", hardware="h100-sxm", requests=None, slots=None, rate=None, trace=None,
              prompt_len=DEFAULT_PROMPT, output_len=DEFAULT_OUTPUT, block_size=16, shared_prefix=0, samples=1,
              prefill=None, token_budget=None, seed=0, weights_dtype="bf16", kv_dtype=None, act_dtype="bf16",
              sets=None, cost_quantum=16, mode="roofline", impl=None, max_tokens=None) -> dict:
    """The same traffic under continuous batching with each KV manager: contiguous reservation,
    paged, paged with prefix sharing (one row each per block size). Memory columns are means over
    time (weighted by iteration), so they describe the run, not one instant."""
    m, hw, prec = _setup(model, hardware, weights_dtype, kv_dtype, act_dtype, sets)
    blocks = block_size if isinstance(block_size, (list, tuple)) else [block_size]
    blocks = [_whole(b, "--block-size", 1, MAX_BLOCK) for b in blocks]
    token_budget = _budget(token_budget)
    n = 256 if requests is None and trace is None else requests
    if trace is None:
        _bound(1 + 2 * len(blocks), max_tokens, n, samples)
    tr = make_traffic(n, rate, trace, prompt_len, output_len, samples, shared_prefix, seed)
    _bound(1 + 2 * len(blocks), max_tokens, tr=tr, slots=_slots(slots))
    from ..api import check_mode

    impl = check_mode(mode, impl, ("roofline", "achievable"), sets)
    prefill = engine_prefill(prefill, impl)
    _whole_fits(prefill, token_budget, tr)
    cost = StepCost(m, hw, prec, cost_quantum, mode=mode, impl=impl)
    runs = [("contiguous", 0, "contiguous", True)]
    for b in blocks:
        runs += [("paged", b, "paged", False), ("paged+shared", b, "paged", True)]
    rows = []
    for name, b, mgr, share in runs:
        s = simulate(m, hw, tr, "continuous", _slots(slots), mgr, b or 16, share, prefill, token_budget, prec,
                     cost=cost).summary
        rows.append({"manager": name, "mode": mode, **({"impl": impl_name(impl)} if mode == "achievable" else {}), "block_size": b if b else math.nan, "requests": s["requests"],
                     "peak_sequences": s["peak_running"], "mean_sequences": s["mean_running"],
                     "kv_capacity_bytes": s["kv_capacity_bytes"], "peak_reserved_bytes": s["peak_kv_reserved_bytes"],
                     "mean_used_bytes": s["mean_kv_used_bytes"], "mean_reserved_bytes": s["mean_kv_reserved_bytes"],
                     # nothing held between iterations (every request done at its prefill, --output-len 1): undefined
                     "utilization": (s["mean_kv_used_bytes"] / s["mean_kv_reserved_bytes"]
                                     if s["mean_kv_reserved_bytes"] > 0 else math.nan),
                     "mean_internal_bytes": s["mean_kv_internal_bytes"], "mean_future_bytes": s["mean_kv_future_bytes"],
                     "mean_external_bytes": s["mean_kv_external_bytes"], "mean_saved_bytes": s["mean_kv_saved_bytes"],
                     "preemptions": s["preemptions"], "throughput_tok_s": s["throughput_tok_s"],
                     "mean_latency_s": s["mean_latency_s"], "does_not_fit": s.get("does_not_fit", "")})
        if rows[-1]["does_not_fit"]:  # no run: what it held is undefined, not 0
            rows[-1].update({k: math.nan for k in KV_REPORT[4:] if k not in ("kv_capacity_bytes", "requests")})
    unfit = ["does_not_fit"] if any(r["does_not_fit"] for r in rows) else []
    return _table(rows, KV_REPORT + (["impl"] if mode == "achievable" else []) + unfit)
