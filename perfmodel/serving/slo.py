"""The workload, the SLO verdict and the rate search that capacity.py (colocated) and disagg.py (pools)
share: the inputs (SLOs, percentile, lengths), one instance of a layout, one replica simulated at a rate,
the seeded bisection over rates, the analytic bound it starts from, and the table row."""
from __future__ import annotations

import math

import numpy as np

from ..errors import SpecError
from ..ops import Layout
from ..units import parse_quantity
from . import fastsim
from .kvmemory import kv_sizes
from .stepcost import StepCost
from .traffic import MAX_BUDGET, _whole, make_traffic, parse_lengths  # noqa: F401 (MAX_BUDGET re-exported)

DEFAULT_PROMPT = "lognormal:median=1000,max=8000"  # chat-like (docs/capacity.md says why)
DEFAULT_OUTPUT = "lognormal:median=250,max=2000"
SLOTS = 256  # vLLM's max_num_seqs (the API server's default on GPUs below 70 GiB; 1024 above in v0.9+)
BUDGET = 2048  # vLLM's max_num_batched_tokens for chunked prefill (API server below 70 GiB; 8192 above)
WARM = 1 / 6  # the share of a trace's first requests left out of the percentiles (warm-up), and of its last
GROW = 1.5  # the bracket's step
FIRST_STEPS = [1.15, 1.3]  # its first steps from the analytic bound, which is usually within 30% of the answer
STEPS_DOWN = 10  # 1.15 x 1.3 x 1.5^8 = 38: below bound / 38 a rate that still fails is reported as none reached
STEPS_UP = 5  # 1.15 x 1.3 x 1.5^3 = 5: above bound x 5 the search stops (hit_bound)
MAX_SEEDS = 1000  # independent searches per layout: a median of more says nothing new (and --max-tokens refuses far fewer)
TRACE_LIFETIMES = 10
TRACE_MIN = 1000
MAX_TOKENS = 15_000_000  # generated tokens the searches may simulate (an up-front estimate): ~30 s on one core here
# simulated generated tokens a second on one core of this machine class (docs/capacity.md, 2026-12-02, `--workers 1`,
# process start included): 502,000 (70B, every layout of 8 GPUs: 21.2 M in 42.1 s) to 893,000 (8B, one GPU); the
# slower one prices the refusals' time estimates
TOKENS_PER_S = 500_000
# the same where FastCost prices the mixed steps row by row through StepCost (expert parallelism, MLA's prefill
# up-projection), capacity -H h100-sxm --workers 1, 2026-12-02 (bench: /tmp/est.py as docs/capacity.md shows):
# mixtral-8x7b ep=2 143,000; deepseek-v2-lite 147,000; qwen3-30b-a3b ep=2 142,000; deepseek-v2-lite ep=2 107,000.
# The slowest, rounded down, prices those layouts' estimates (each of their tokens counts 5 token-equivalents)
TOKENS_PER_S_ROWWISE = 100_000


def cost_weight(inst) -> float:
    """Token-equivalents per simulated token of an instance's searches: 1 where FastCost's vectorized path prices
    its steps, TOKENS_PER_S / TOKENS_PER_S_ROWWISE where its mixed steps are priced row by row."""
    return 1.0 if inst.cost.fast else TOKENS_PER_S / TOKENS_PER_S_ROWWISE


# ---------------------------------------------------------------- inputs
def parse_time(text, opt: str) -> float:
    """A positive time: '1s', '50ms', '250 us' or a number of seconds."""
    try:
        return parse_quantity(text, "s")
    except ValueError:
        raise SpecError(opt, None, f"expected a positive time such as 1s, 500ms or 0.05 (seconds), got {text!r}") from None


def parse_percentile(q) -> float:
    try:
        x = float(q)
    except (TypeError, ValueError):
        x = float("nan")
    if isinstance(q, bool) or not (math.isfinite(x) and 0 < x <= 100):
        raise SpecError("--percentile", None, f"must be a number in (0, 100], got {q!r}")
    return x


def _fraction(v, opt: str) -> float:
    try:
        x = float(v)
    except (TypeError, ValueError):
        x = float("nan")
    if isinstance(v, bool) or not (math.isfinite(x) and 0 < x < 1):
        raise SpecError(opt, None, f"must be a number in (0, 1), got {v!r}")
    return x


# ---------------------------------------------------------------- one instance of a layout
class Instance:
    """One replica of a layout on one device type: its KV memory, its step cost and its traffic."""

    def __init__(self, model, hw, prec, lay: Layout, mode, impl, quantum, budget, slots, block):
        self.model, self.hw, self.prec, self.lay = model, hw, prec, lay
        self.sizes = kv_sizes(model, hw, prec, lay)  # SpecError when the weights leave no memory
        self.cost = fastsim.FastCost(StepCost(model, hw, prec, quantum, lay, mode, impl), budget)
        self.budget, self.slots, self.block = budget, slots, block
        self.ahead = self.cost.base.ahead  # its engine forms step k + 1 while step k runs (fastsim.run's ahead)

    def step(self, T, S) -> float:
        return self.cost(np.asarray(T, dtype=np.int64), np.asarray(S, dtype=np.int64))


class Workload:
    """The traffic of a search: length distributions, SLOs, percentile, trace length and seeds."""

    def __init__(self, prompt_len, output_len, slo_ttft, slo_tpot, percentile, seeds, seed, requests, tolerance):
        self.prompt_len, self.output_len = str(prompt_len), str(output_len)
        self.P = parse_lengths(prompt_len, "--prompt-len")
        self.O = parse_lengths(output_len, "--output-len")
        self.slo_ttft = parse_time(slo_ttft, "--slo-ttft")
        self.slo_tpot = parse_time(slo_tpot, "--slo-tpot")
        self.q = parse_percentile(percentile)
        self.seeds = [int(seed) + i for i in range(_whole(seeds, "--seeds", 1, MAX_SEEDS))]
        self.requests = None if requests is None else _whole(requests, "--requests", 12)
        self.tol = _fraction(tolerance, "--tolerance")
        rng = np.random.default_rng(2024)  # the distributions' means and quantiles, for the bounds only
        p, o = self.P.draw(rng, 20000), self.O.draw(rng, 20000)
        self.mean_prompt, self.mean_output = float(p.mean()), float(o.mean())
        self.prompt_q = float(np.percentile(p, self.q))
        self.max_prompt, self.max_output = self.P.max, self.O.max

    def trace(self, n: int, rate: float, seed: int):
        tr = make_traffic(n, rate, None, self.prompt_len, self.output_len, 1, 0, seed)
        return tr.arrival, tr.prompt.astype(np.int64), tr.outputs[:, 0].astype(np.int64)

    def window(self, n: int) -> slice:
        w = int(n * WARM)
        return slice(w, n - w)

    def stop_rule(self, n: int) -> dict:
        return {"window": self.window(n), "ttft": self.slo_ttft, "tpot": self.slo_tpot, "q": self.q}


def _pct(x, q) -> float:
    x = x[np.isfinite(x)]
    return float(np.percentile(x, q)) if x.size else float("nan")


def _verdict(ttft, tpot, wl: Workload, stopped: str | None = None) -> dict:
    """Pass/fail of the measured requests' TTFT and TPOT (arrays over the window; nan: not produced)."""
    pt, pd = _pct(ttft, wl.q), _pct(tpot, wl.q)
    if stopped:  # certain failure found before the end: the values are lower bounds
        return {"ok": False, "ttft": pt, "tpot": pd, "fail": stopped, "exact": False}
    bad_t = not (pt <= wl.slo_ttft) if np.isfinite(pt) else False
    bad_d = not (pd <= wl.slo_tpot) if np.isfinite(pd) else False
    fail = None
    if bad_t or bad_d:
        fail = "ttft" if (bad_t and (not bad_d or pt / wl.slo_ttft >= pd / wl.slo_tpot)) else "tpot"
    return {"ok": not (bad_t or bad_d), "ttft": pt, "tpot": pd, "fail": fail, "exact": True}


# ---------------------------------------------------------------- colocated: one replica at a rate
def simulate_rate(inst: Instance, wl: Workload, n: int, rate: float, seed: int, stop=True) -> dict:
    """One replica's trace of n requests at `rate` per second through the simulator; the verdict.
    stop: True, end as soon as the verdict is certain; "window", when the measured requests are done
    (exact percentiles even when they fail); False, run every request to the end."""
    arr, P, O = wl.trace(n, rate, seed)
    rule = wl.stop_rule(n) if stop else None
    if stop == "window":  # run until the measured requests are done, whatever their latencies
        rule.update(ttft=math.inf, tpot=math.inf)
    r = fastsim.run(arr, P, O, inst.sizes, inst.cost, inst.slots, inst.budget, "chunked", inst.block, stop=rule,
                    ahead=inst.ahead)
    w = wl.window(n)
    ttft = r["first"][w] - arr[w]
    ttft = np.where(r["first"][w] >= 0, ttft, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where((O[w] > 1) & (r["done"][w] >= 0), (r["last"][w] - r["first"][w]) / (O[w] - 1), np.nan)
    v = _verdict(ttft, tpot, wl, r.get("stopped"))
    if v["fail"] == "ttft" and (r["memory_stalls"] or r["preempted"]):
        v["fail"] = "memory"
    lat = r["done"][w] - arr[w]
    fin = r["done"][w] >= 0
    # Little's law: requests in the system = rate x mean latency; the warm-up should hold about that many
    v["in_system"] = float(rate * lat[fin].mean()) if fin.any() else math.nan
    v.update(rate=rate, seed=seed, memory_stalls=r["memory_stalls"], preempted=r["preempted"],
             peak_running=r["peak_running"], steps=r["steps"], generated=r["generated"],
             mean_output=float(O.mean()))
    return v


# ---------------------------------------------------------------- the search
def bisect(evaluate, start: float, tol: float, factors=None):
    """Largest rate with evaluate(rate)["ok"], from `start`: a geometric bracket (step i by factors[i],
    default GROW; at most STEPS_DOWN steps down and STEPS_UP up), then geometric bisection to
    hi / lo <= 1 + tol. Returns (lo, lo's verdict, hi's verdict, every verdict, hit_bound); lo is None when
    no rate down to the last step passes (hi's verdict: the lowest rate tried)."""
    seen = []

    def ev(r):
        v = evaluate(r)
        seen.append(v)
        return v

    def steps(k):
        f = list(factors or [])
        return (f + [GROW] * k)[:max(k, len(f))]

    v = ev(start)
    lo = hi = None
    if v["ok"]:
        lo, vlo = start, v
        for g in steps(STEPS_UP):
            r = lo * g
            v = ev(r)
            if not v["ok"]:
                hi, vhi = r, v
                break
            lo, vlo = r, v
        else:
            return lo, vlo, None, seen, True
    else:
        hi, vhi = start, v
        for g in steps(STEPS_DOWN):
            r = hi / g
            v = ev(r)
            if v["ok"]:
                lo, vlo = r, v
                break
            hi, vhi = r, v
        else:
            return None, None, vhi, seen, False
    while hi / lo > 1 + tol:
        r = math.sqrt(lo * hi)
        v = ev(r)
        if v["ok"]:
            lo, vlo = r, v
        else:
            hi, vhi = r, v
    return lo, vlo, vhi, seen, False


def seed_search(evaluate, start: float, wl: Workload, first: bool) -> dict:
    """One seed's search (evaluate(rate) -> verdict): the first seed from the analytic start, the others from the
    first's answer with steps of 2 x tolerance at first."""
    lo, vlo, vhi, seen, hit = bisect(evaluate, start, wl.tol, FIRST_STEPS if first else [1 + 2 * wl.tol] * 3)
    return {"lo": lo, "vlo": vlo, "vhi": vhi, "seen": seen, "hit": hit}


def combine(runs: list) -> dict:
    """The seeds' searches (in seed order, cut after the first that found nothing): the median seed's answer with
    its verdicts, and the min and max."""
    cut = next((i for i, r in enumerate(runs) if r["lo"] is None), None)
    runs = runs if cut is None else runs[:cut + 1]  # nothing meets the SLOs for that seed: the next would search the same floor
    found = [r for r in runs if r["lo"] is not None]
    if not found:
        return {"goodput": None, "runs": runs, "median": runs[0]}
    found.sort(key=lambda r: r["lo"])
    med = found[(len(found) - 1) // 2]  # the lower median: a seed's own answer, not an average
    return {"goodput": med["lo"], "lo": found[0]["lo"], "hi": found[-1]["lo"], "runs": runs, "median": med,
            "hit": any(r["hit"] for r in found)}


def search_seeds(evaluate, start: float, wl: Workload) -> dict:
    """Every seed's search in turn (seed_search), combined."""
    runs = []
    for s in wl.seeds:
        first = not runs
        runs.append({"seed": s} | seed_search(lambda r, s=s: evaluate(r, s), start if first else runs[0]["lo"], wl, first))
        if runs[-1]["lo"] is None:
            break
    return combine(runs)


# ---------------------------------------------------------------- analytic bounds
def analytic(inst: Instance, wl: Workload) -> dict:
    """Upper bound on one replica's rate and the batch it implies (module docstring), from the step cost:
    decode at the largest batch the KV memory, the slots and the TPOT SLO allow, and each request's
    prefill at the token budget's per-token rate."""
    ctx = wl.mean_prompt + wl.mean_output / 2  # a running request's mean context
    per_req = inst.sizes.per_token * ctx + inst.sizes.per_seq  # a running request's cache and fixed state (kvmemory)
    b_mem = max(1, int(inst.sizes.capacity // per_req)) if per_req > 0 else 4096  # no cache nor state: the cap binds
    b_max = int(min(inst.slots or 4096, b_mem, 4096))
    c = int(round(ctx))
    one = inst.step([1], [c])
    if one > wl.slo_tpot:
        return {"rate": None, "batch": 1, "tpot1": one}
    lo, hi = 1, b_max  # largest batch whose decode step meets the TPOT SLO (steps grow with the batch)
    if inst.step(np.ones(hi), np.full(hi, c)) <= wl.slo_tpot:
        lo = hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if inst.step(np.ones(mid), np.full(mid, c)) <= wl.slo_tpot:
            lo = mid
        else:
            hi = mid
    B = lo
    t_dec = inst.step(np.ones(B), np.full(B, c))
    chunk = int(min(inst.budget or wl.mean_prompt, max(wl.mean_prompt, 2)))
    t_pre = inst.step([chunk], [chunk]) / chunk
    rate = 1.0 / (wl.mean_output * t_dec / B + wl.mean_prompt * t_pre)
    ttft_alone = t_pre * wl.prompt_q  # the percentile prompt alone, at the budget's per-token rate
    return {"rate": rate, "batch": B, "tpot1": one, "ttft_alone": ttft_alone, "b_mem": b_mem}


def trace_length(wl: Workload, a: dict) -> int:
    """TRACE_LIFETIMES times the requests in the system at saturation (Little's law: the decoding batch plus
    those waiting for their first token, about rate x TTFT SLO / 2), at least TRACE_MIN: the warm-up sixth
    then lasts more than one lifetime, and the window sees the congestion episodes that set a p99
    (docs/capacity.md measures how the goodput converges with the trace length)."""
    if wl.requests:
        return wl.requests
    L = a["batch"] + a["rate"] * wl.slo_ttft / 2
    return int(min(50_000, max(TRACE_MIN, math.ceil(TRACE_LIFETIMES * L))))  # --max-tokens bounds the work


# ---------------------------------------------------------------- table
COLUMNS = ["model", "hardware", "mode", "serving", "tp", "pp", "ep", "replicas", "devices", "prefill_tp",
           "prefill_instances", "decode_tp", "decode_instances", "goodput_rps", "goodput_lo_rps", "goodput_hi_rps",
           "output_tok_s", "goodput_per_device", "cost_per_million_tokens", "binding", "binding_value_s",
           "ttft_s", "tpot_s", "fail_rps", "median_seed", "search", "hit_bound", "requests", "seeds", "kv_transfer_s",
           "note", "crosses_nodes", "pareto"]


def _row(model, hw, mode, lay: Layout, devices: int, **kw) -> dict:
    r = {"model": model.name, "hardware": hw.key or hw.name, "mode": mode, "serving": "colocated",
         "tp": lay.tp, "pp": lay.pp, "ep": lay.ep, "replicas": lay.replicas, "devices": devices,
         "prefill_tp": math.nan, "prefill_instances": math.nan, "decode_tp": math.nan, "decode_instances": math.nan,
         "goodput_rps": math.nan, "goodput_lo_rps": math.nan, "goodput_hi_rps": math.nan, "output_tok_s": math.nan,
         "goodput_per_device": math.nan, "cost_per_million_tokens": math.nan, "binding": "", "binding_value_s": math.nan,
         "ttft_s": math.nan, "tpot_s": math.nan, "fail_rps": math.nan, "median_seed": math.nan, "search": "",
         "hit_bound": False, "requests": math.nan,
         "seeds": math.nan, "kv_transfer_s": math.nan, "note": "", "crosses_nodes": False, "pareto": False}
    r.update(kw)
    return r


def pareto_flags(per_device, second, ok, lower_second=True) -> np.ndarray:
    """Rows not dominated among `ok`: no other row has at least the goodput per device and at most (or,
    lower_second=False, at least) the second key, strictly better in one."""
    g = np.asarray(per_device, float)
    c = np.asarray(second, float) * (1 if lower_second else -1)
    out = np.zeros(g.size, dtype=bool)
    idx = np.flatnonzero(ok)
    for i in idx:
        better = (g[idx] >= g[i]) & (c[idx] <= c[i]) & ((g[idx] > g[i]) | (c[idx] < c[i]))
        out[i] = not better.any()
    return out
