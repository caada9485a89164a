"""Capacity under latency SLOs: the goodput of a layout, the cheapest layout that meets it, and
disaggregated prefill/decode pools (docs/capacity.md derives and checks every choice made here).

Goodput of one (hardware, layout): the largest Poisson arrival rate at which the chosen percentile of
TTFT and the chosen percentile of TPOT both meet their SLOs in the serving simulator (continuous
batching, chunked prefill up to a token budget, paged KV, FIFO; fastsim.py runs it vectorized and
equals scheduler.simulate request for request).
- Criterion: over the requests of one trace after a warm-up sixth and before a cool-down sixth (the
  server fills up over about one request lifetime, and the last requests decode in a draining server),
  percentile(TTFT) <= slo_ttft and percentile(TPOT) <= slo_tpot (numpy's linear percentile, the
  simulator's). Under overload TTFT grows with the trace; over a fixed window of a fixed-length trace
  the criterion is a property of the rate, and the trace is long enough that a queue growing by 1-2%
  of the rate crosses a 1 s SLO within the window (docs/capacity.md).
- Trace length: ten times the requests an analytic bound expects in the system at saturation (Little's
  law: the decoding batch plus those waiting for a first token), at least 1,000, so the warm-up sixth
  lasts more than one request lifetime; `requests` overrides it, and a row whose measured requests in the system exceed 1.5x
  its warm-up says so (LoadWarning, and its note).
- Search: the rate starts at an analytic upper bound (decode at the largest batch that fits the KV
  memory, the slots and the TPOT SLO, plus each request's prefill at the budget's rate), steps down (or
  up) by 1.5x until the criterion flips, then bisects geometrically until hi / lo <= 1 + tolerance. Each
  seed's traffic is drawn by make_traffic at each rate (the same arrivals scaled, the same lengths), so
  the criterion is nearly monotone in the rate. A simulation stops as soon as its verdict is certain:
  when every measured request is done, or when enough measured requests already exceed an SLO (a
  waiting request's TTFT and a running one's TPOT only grow).
- Seeds: each seed's search is independent; goodput_rps is their median, goodput_lo/hi the min and
  max. At goodput_rps the median seed's simulation meets both SLOs and at the next rate it tried, at
  most (1 + tolerance) x higher, it does not.
- Replicas: R replicas behind a balancer that sends each request to a random replica each see Poisson
  traffic at rate / R (serve_runs' model), so one replica is searched and the goodput is R x its own.
- What binds: the SLO the first failing rate breaks (the larger ratio to its SLO when both do);
  "memory" when TTFT breaks while the KV cache stops admission or preempts (a bigger memory would
  raise the goodput); "none reached" when no rate down to 1/38 of the bound meets the SLOs (with the
  term and its value at the lowest rate tried), or when TPOT at batch 1 already exceeds its SLO;
  "does not fit" when the weights, or one request's cache, do not fit.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from ..errors import DataWarning, LoadWarning, SpecError
from ..ops import Layout
from . import fastsim
from .traffic import MAX_BLOCK, _whole
from .slo import (BUDGET, COLUMNS, DEFAULT_OUTPUT, DEFAULT_PROMPT, MAX_BUDGET, MAX_TOKENS, SLOTS, TOKENS_PER_S,  # noqa: F401 (re-exported)
                  TOKENS_PER_S_ROWWISE, WARM, cost_weight, Instance, Workload, _row, _verdict, analytic, combine, pareto_flags, search_seeds, seed_search,
                  simulate_rate, trace_length)


def prepare(model, hw, prec, lay: Layout, mode, impl, wl: Workload, knobs: dict, cache: dict):
    """Before any simulation: the row that says why a layout has no goodput (does not fit; an SLO broken at
    batch 1 or by the longest prompts alone), or (instance, analytic bounds, trace length)."""
    one = Layout(lay.tp, 1, lay.ep, 1)
    base = dict(seeds=len(wl.seeds))
    try:
        key = (repr(hw), one)  # the whole spec: variants of one catalog device (replace, --set) keep its key
        inst = cache.get(key)
        if inst is None:
            inst = cache[key] = Instance(model, hw, prec, one, mode, impl, knobs["quantum"], knobs["budget"],
                                         knobs["slots"], knobs["block"])
    except SpecError as e:
        from .. import engine

        try:
            w = float(engine.per_sequence(model, np.array([0.0]), prec, layout=one)["weight_bytes"])
            why = f"weights {w / 1e9:.4g} GB per device, memory {hw.memory_capacity / 1e9:.4g} GB"
        except SpecError:
            why = e.problem
        return _row(model, hw, mode, lay, lay.devices, binding="does not fit", note=why, search="none", **base)
    if not fastsim.fits_alone(inst.sizes, inst.block, wl.max_prompt, wl.max_output):
        return _row(model, hw, mode, lay, lay.devices, binding="does not fit", search="none", **base,
                    note=f"the longest request ({wl.max_prompt} + {wl.max_output} tokens) has a KV cache larger than "
                         f"the {inst.sizes.capacity:.4g} B left after the weights")
    a = analytic(inst, wl)
    if a["rate"] is None:
        return _row(model, hw, mode, lay, lay.devices, binding="none reached", binding_value_s=a["tpot1"],
                    search="analytic", tpot_s=a["tpot1"], **base,
                    note=f"TPOT at batch 1 already exceeds the SLO: one decode step takes {a['tpot1'] * 1e3:.3g} ms")
    if a["ttft_alone"] > wl.slo_ttft:
        return _row(model, hw, mode, lay, lay.devices, binding="none reached", binding_value_s=a["ttft_alone"],
                    search="analytic", ttft_s=a["ttft_alone"], **base,
                    note=f"TTFT of the p{wl.q:g} prompt alone already exceeds the SLO: its prefill takes "
                         f"{a['ttft_alone']:.3g} s")
    return inst, a, trace_length(wl, a)


def colocated(model, hw, prec, lay: Layout, mode, wl: Workload, price, prepared, keep: bool = False,
              runs: list | None = None) -> dict:
    """One (hardware, layout) row: its goodput search (prepare's instance, bounds and trace length), or the seeds'
    searches already run (`runs`, in seed order: _task)."""
    from ..api import economics

    inst, a, n = prepared
    R = lay.replicas
    base = dict(seeds=len(wl.seeds), requests=n * R)
    if runs is None:
        res = search_seeds(lambda r, s: simulate_rate(inst, wl, n, r, s), a["rate"], wl)
    else:
        res = combine(runs)
    if res["goodput"] is None:
        v = res["median"]["vhi"]
        term = v["fail"] or "ttft"
        val = v["tpot"] if term == "tpot" else v["ttft"]
        row = _row(model, hw, mode, lay, lay.devices, binding="none reached", binding_value_s=val, search="bisection",
                   ttft_s=v["ttft"], tpot_s=v["tpot"], **base,
                   note=f"no rate down to {v['rate'] * R:.3g}/s meets the SLOs: {term} is "
                        f"{val:.3g} s there (p{wl.q:g})")
    else:
        med = res["median"]
        g = res["goodput"] * R
        v, vh = med["vlo"], med["vhi"]
        out_tok = g * v["mean_output"]
        binding = "search bound" if vh is None else vh["fail"]
        bval = math.nan if vh is None else (vh["tpot"] if vh["fail"] == "tpot" else vh["ttft"])
        row = _row(model, hw, mode, lay, lay.devices, goodput_rps=g, goodput_lo_rps=res["lo"] * R,
                   goodput_hi_rps=res["hi"] * R, output_tok_s=out_tok, goodput_per_device=g / lay.devices,
                   binding=binding, binding_value_s=bval, ttft_s=v["ttft"], tpot_s=v["tpot"], search="bisection",
                   fail_rps=math.nan if vh is None else vh["rate"] * R, median_seed=med["seed"], hit_bound=res["hit"],
                   **base)
        if price is not None or hw.price_per_hour:
            row["cost_per_million_tokens"] = economics({"throughput_tok_s": out_tok}, hw, lay.devices,
                                                       price)["cost_per_million_tokens"]
        warm = int(n * WARM)
        if v.get("in_system", 0) > 1.5 * warm:
            row["note"] = (f"trace too short for steady state: {v['in_system']:.0f} requests in the system at the "
                           f"goodput, more than the {warm} of the warm-up (pass --requests {6 * int(v['in_system']) + 1} "
                           "or more)")
            warnings.warn(f"{row['hardware']} tp={lay.tp} ep={lay.ep} x{R}: {row['note']}", LoadWarning, stacklevel=2)
    if keep:
        row["_search"] = res
        row["_instance"] = inst
        row["_n"] = n
    return row


def closed(model, hw, prec, lay: Layout, mode, wl: Workload, price, prepared, conc: int) -> dict:
    """One (hardware, layout) row at a fixed concurrency: `conc` clients in a closed loop (conc / R per replica),
    each seed's lengths drawn from the workload; the first 2 N requests warm up, the last N keep every client
    busy while the measured ones finish. The row meets the SLOs when the median seed's percentile TTFT and
    TPOT do; goodput_rps is then the request rate served (Little's law: N / mean E2E), else NaN and the
    binding SLO."""
    from ..api import economics

    inst, a, _ = prepared
    R = lay.replicas
    c = conc // R
    n = max(wl.requests or 0, 10 * c, 200)
    n = max(n, 4 * c)
    w = slice(2 * c, n - c)
    runs = []
    for seed in wl.seeds:
        _, P, O = wl.trace(n, 1.0, seed)
        r = fastsim.run(np.zeros(n), P, O, inst.sizes, inst.cost, inst.slots, inst.budget, "chunked", inst.block,
                        concurrency=c, ahead=inst.ahead)
        sent, first, last, done = r["arrival"][w], r["first"][w], r["last"][w], r["done"][w]
        with np.errstate(invalid="ignore", divide="ignore"):
            tpot = np.where(O[w] > 1, (last - first) / (O[w] - 1), np.nan)
        v = _verdict(first - sent, tpot, wl)
        v.update(seed=seed, rate=c / float(np.mean(done - sent)), mean_output=float(O[w].mean()),
                 preempted=r["preempted"], memory_stalls=r["memory_stalls"])
        if v["fail"] == "ttft" and (r["memory_stalls"] or r["preempted"]):
            v["fail"] = "memory"
        runs.append(v)
    runs.sort(key=lambda v: (v["ttft"] / wl.slo_ttft, v["tpot"] / wl.slo_tpot))
    v = runs[(len(runs) - 1) // 2]  # the median seed
    base = dict(seeds=len(wl.seeds), requests=n * R, ttft_s=v["ttft"], tpot_s=v["tpot"], median_seed=v["seed"],
                search=f"closed loop, {conc} clients")
    if not v["ok"]:
        val = v["ttft"] if v["fail"] in ("ttft", "memory") else v["tpot"]
        return _row(model, hw, mode, lay, lay.devices, binding=v["fail"], binding_value_s=val, **base,
                    note=f"{conc} clients break the {v['fail'] if v['fail'] != 'memory' else 'ttft'} SLO: "
                         f"{val:.3g} s at p{wl.q:g}")
    g = v["rate"] * R
    out_tok = g * v["mean_output"]
    row = _row(model, hw, mode, lay, lay.devices, goodput_rps=g, goodput_lo_rps=min(x["rate"] for x in runs) * R,
               goodput_hi_rps=max(x["rate"] for x in runs) * R, output_tok_s=out_tok,
               goodput_per_device=g / lay.devices, binding="none", **base)
    if price is not None or hw.price_per_hour:
        row["cost_per_million_tokens"] = economics({"throughput_tok_s": out_tok}, hw, lay.devices,
                                                   price)["cost_per_million_tokens"]
    return row


# ---------------------------------------------------------------- tasks for workers (perfmodel.workers)
_INSTANCES: dict = {}  # a process's instances by (search token, hardware, tp, ep): built once per process


def _task(t: tuple):
    """One unit of a capacity search for workers.run: ("seed", key, build, wl, n, seed, start, first) searches one
    seed of one colocated layout; ("disagg", build) the pool splits of one device type. Instances come from the
    process's cache (filled before a fork; built where absent): fastsim's tables do not depend on what ran before."""
    if t[0] == "seed":
        _, key, build, wl, n, seed, start, first = t
        inst = _INSTANCES.get(key)
        if inst is None:
            m, hw, prec, lay, mode, impl, knobs = build
            inst = _INSTANCES[key] = Instance(m, hw, prec, lay, mode, impl, knobs["quantum"], knobs["budget"],
                                              knobs["slots"], knobs["block"])
        return {"seed": seed} | seed_search(lambda r: simulate_rate(inst, wl, n, r, seed), start, wl, first)
    from . import disagg

    m, hw, prec, devices, mode, impl, wl, knobs, pr, key = t[1]
    cache = _INSTANCES.setdefault(key, {})
    return disagg.rows(m, hw, prec, devices, mode, impl, wl, knobs, pr, cache, False)


def _price_for(price, hws: list) -> list:
    from ..api import prices_for

    return prices_for(price, hws)


def layouts_for(model, hw, gpus, tp, pp, ep, replicas) -> tuple[list, int]:
    """The layouts to search: every pp = 1 layout of `gpus` devices, or the one given. Returns
    (layouts, pipeline layouts left out)."""
    from ..api import layout as _layout
    from ..ops import check_layout
    from ..parallel import layouts

    if gpus is not None:
        n = _whole(gpus, "--gpus")
        if n > 4096:
            raise SpecError("--gpus", None, f"{n:,} is over the 4,096 devices a capacity search enumerates")
        lays = layouts(model, n)
        keep = [l for l in lays if l.pp == 1]
        if not keep:
            raise SpecError("--gpus", None, f"no layout of {n} devices without pipeline stages suits {model.name}")
        return keep, len(lays) - len(keep)
    lay = _layout(1 if tp is None else tp, pp, ep, replicas)
    if lay.pp > 1:
        raise SpecError("--pp", None, "the serving simulator models tp, ep and replicas, not pipeline stages")
    check_layout(model, lay)
    return [lay], 0


def _searched(m, prec, mode, impl, wl: Workload, knobs: dict, plan: list, todo: list, cache: dict, disaggregate: bool,
              workers, cluster, show) -> list:
    """The rows of `todo` (and the disaggregated splits), searched as tasks: first every layout's first seed and
    every device type's splits, then the other seeds of each layout from its first seed's answer. The same rows
    whatever runs the tasks (workers.run)."""
    import uuid

    from .. import workers as wk

    token = uuid.uuid4().hex
    _INSTANCES.clear()
    first, later = [], []
    for i, (hw, pr, lay, p) in enumerate(todo):
        if isinstance(p, tuple):
            one = Layout(lay.tp, 1, lay.ep, 1)
            key = (token, i)
            _INSTANCES[key] = p[0]  # this process's (and a forked worker's) copy
            build = (m, hw, prec, one, mode, impl, knobs)
            later.append((key, build, p[2], p[1]["rate"]))
            first.append(("seed", key, build, wl, p[2], wl.seeds[0], p[1]["rate"], True))
    if disaggregate:
        for j, (hw, pr, lays) in enumerate(plan):
            key = (token, "disagg", j)
            _INSTANCES[key] = cache  # the colocated instances, where this process runs it
            first.append(("disagg", (m, hw, prec, lays[0].devices, mode, impl, wl, knobs, pr, key)))
    try:
        out1 = wk.run(_task, first, workers, cluster, "capacity: layouts", show)
        runs = {t[1]: [r] for t, r in zip(first, out1) if t[0] == "seed"}
        rest = [("seed", key, build, wl, n, s, runs[key][0]["lo"], False) for key, build, n, _ in later
                for s in wl.seeds[1:] if runs[key][0]["lo"] is not None]
        for t, r in zip(rest, wk.run(_task, rest, workers, cluster, "capacity: other seeds", show)):
            runs[t[1]].append(r)
    finally:
        _INSTANCES.clear()
    rows = []
    for i, (hw, pr, lay, p) in enumerate(todo):
        rows.append(p if not isinstance(p, tuple) else
                    colocated(m, hw, prec, lay, mode, wl, pr, p, False, runs=runs[(token, i)]))
    if disaggregate:
        for t, r in zip(first, out1):
            if t[0] == "disagg":
                rows += r
    return rows


def search_tokens(wl: Workload, n_req: int) -> float:
    """Estimated generated tokens of one search: 4 simulations for the first seed and 3 for each other, each
    of n_req requests run to the end of its measured window (5/6 of the trace)."""
    return (4 + 3 * (len(wl.seeds) - 1)) * n_req * wl.mean_output * (1 - WARM)


def seconds(tokens: float) -> str:
    """The time a search of `tokens` simulated tokens takes on one core here (TOKENS_PER_S, measured), as text."""
    s = tokens / TOKENS_PER_S
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.0f} min"


def _work(est: float, max_tokens) -> None:
    """Refuse up front searches estimated to generate more than max_tokens tokens in all."""
    limit = _whole(MAX_TOKENS if max_tokens is None else max_tokens, "--max-tokens")
    if est > limit:
        raise SpecError("--max-tokens", None, f"the searches would simulate about {est:,.0f} generated tokens (token-"
                        f"equivalents: x{TOKENS_PER_S // TOKENS_PER_S_ROWWISE} where steps are priced row by row, as "
                        "with expert parallelism or MLA), about "
                        f"{seconds(est)} on one core here ({TOKENS_PER_S:,} a second measured; --workers N divides it "
                        f"by up to N), over the limit of {limit:,} ({seconds(limit)}): pass --max-tokens N, or "
                        "max_tokens=N, to go past it, or use fewer --seeds, --requests, layouts or hardware")


def capacity(model="llama-3.1-70b", hardware="h100-sxm", gpus=None, tp=None, pp=1, ep=1, replicas=1,
             prompt_len=DEFAULT_PROMPT, output_len=DEFAULT_OUTPUT, slo_ttft="1s", slo_tpot="50ms", percentile=99,
             mode="roofline", impl=None, disaggregate=False, price=None, slots=SLOTS, token_budget=BUDGET,
             requests=None, seeds=3, seed=0, tolerance=0.05, block_size=16, cost_quantum=16, weights_dtype="bf16",
             kv_dtype=None, act_dtype="bf16", sets=None, max_tokens=None, concurrency=None, workers=None,
             cluster=None, show=False) -> tuple[dict, dict]:
    """Goodput rows per (hardware, layout[, prefill/decode split]) and a summary; see the module docstring.
    concurrency=N: instead of searching the Poisson rate, each layout serves N clients in a closed loop (closed()).
    workers, cluster: who runs the searches (perfmodel.workers: None = this machine's cores); show: a progress bar
    on a terminal.

    Returns (table: dict of columns in COLUMNS, summary: dict)."""
    return run(model, hardware, gpus, tp, pp, ep, replicas, prompt_len, output_len, slo_ttft, slo_tpot, percentile,
               mode, impl, disaggregate, price, slots, token_budget, requests, seeds, seed, tolerance, block_size,
               cost_quantum, weights_dtype, kv_dtype, act_dtype, sets, max_tokens, concurrency=concurrency,
               workers=workers, cluster=cluster, show=show)


def run(model, hardware, gpus, tp, pp, ep, replicas, prompt_len, output_len, slo_ttft, slo_tpot, percentile, mode,
        impl, disaggregate, price, slots, token_budget, requests, seeds, seed, tolerance, block_size, cost_quantum,
        weights_dtype, kv_dtype, act_dtype, sets, max_tokens, keep=False, concurrency=None, workers=None, cluster=None,
        show=False, estimate_only=False) -> tuple[dict, dict]:
    """capacity(); keep=True also returns every row's search under summary["searches"] (for plots); estimate_only=True
    returns the generated tokens the searches are estimated to simulate (what --max-tokens bounds), simulating none."""
    from .. import api
    from .api import _slots
    from . import disagg

    from .. import workers as wk

    impl = api.check_mode(mode, impl, ("roofline", "achievable"), sets)
    prec = api._prec(weights_dtype, kv_dtype, act_dtype)
    wk.check(workers, cluster)
    wl = Workload(prompt_len, output_len, slo_ttft, slo_tpot, percentile, seeds, seed, requests, tolerance)
    knobs = {"slots": _slots(slots), "budget": None if token_budget is None or str(token_budget).lower() == "none"
             else _whole(token_budget, "--token-budget", 1, MAX_BUDGET), "block": _whole(block_size, "--block-size", 1, MAX_BLOCK),
             "quantum": _whole(cost_quantum, "--cost-quantum")}
    if gpus is not None and tp is not None:
        raise SpecError("--gpus", None, "give --gpus N (every layout) or --tp/--ep/--replicas (one), not both")
    conc = None if concurrency is None else _whole(concurrency, "--concurrency")
    if conc is not None and disaggregate:
        raise SpecError("--concurrency", None, "a closed loop is simulated for colocated layouts; drop --disaggregate "
                                               "(validate --serving simulates disaggregated pools at a concurrency)")
    ms, hws = api.specs(model, hardware, sets)
    if len(ms) != 1:
        raise SpecError("-m", None, f"capacity takes one model, got {len(ms)}")
    m = ms[0]
    prices = _price_for(price, hws)
    if wl.max_prompt + wl.max_output > m.max_context:
        raise SpecError("--prompt-len/--output-len", None, f"the longest request, {wl.max_prompt} + {wl.max_output} "
                                                           f"tokens, exceeds {m.name}'s max_context ({m.max_context})")
    plan = []
    skipped_pp = 0
    for hw, pr in zip(hws, prices):
        lays, sk = layouts_for(m, hw, gpus, tp, pp, ep, replicas)
        skipped_pp = max(skipped_pp, sk)
        plan.append((hw, pr, lays))
    rows, cache, searches, todo = [], {}, [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)  # said once, in the summary
        for hw, pr, lays in plan:
            for lay in lays:
                p = prepare(m, hw, prec, lay, mode, impl, wl, knobs, cache)
                todo.append((hw, pr, lay, p))
        if conc is not None:
            for hw, pr, lay, p in todo:
                if isinstance(p, tuple) and conc % lay.replicas:
                    raise SpecError("--concurrency", None, f"{conc} clients do not split evenly over {lay.replicas} "
                                                           "replicas")
            est = sum(len(wl.seeds) * max(wl.requests or 0, 10 * conc, 200) * wl.mean_output * cost_weight(p[0])
                      for _, _, _, p in todo if isinstance(p, tuple))
        else:
            est = sum(search_tokens(wl, p[2]) * cost_weight(p[0]) for _, _, _, p in todo if isinstance(p, tuple))
        if disaggregate:  # a decode-pool search per pool layout and up to disagg.VERIFY coupled ones, per device type
            biggest = max([p[2] for _, _, _, p in todo if isinstance(p, tuple)] or [wl.requests or 1000])
            weight = max([cost_weight(p[0]) for _, _, _, p in todo if isinstance(p, tuple)] or [1.0])
            est += len(plan) * (len({(l.tp, l.ep) for _, _, lays in plan for l in lays}) + disagg.VERIFY) * \
                search_tokens(wl, biggest) * weight
        if estimate_only:
            return est
        _work(est, max_tokens)
        if keep or conc is not None:  # plots keep each search's instance; closed loops are one run per seed
            bar = wk._Progress(len(todo) + (len(plan) if disaggregate else 0), "capacity: layouts", show)
            try:
                for hw, pr, lay, p in todo:
                    if not isinstance(p, tuple):
                        rows.append(p)
                    elif conc is not None:
                        rows.append(closed(m, hw, prec, lay, mode, wl, pr, p, conc))
                    else:
                        rows.append(colocated(m, hw, prec, lay, mode, wl, pr, p, keep))
                    bar.advance(0, None)
                if disaggregate:
                    for hw, pr, lays in plan:
                        rows += disagg.rows(m, hw, prec, lays[0].devices, mode, impl, wl, knobs, pr, cache, keep)
                        bar.advance(0, None)
            finally:
                bar.close()
        else:
            rows += _searched(m, prec, mode, impl, wl, knobs, plan, todo, cache, disaggregate, workers, cluster, show)
    for r in rows:
        if "_search" in r:
            searches.append({k: r.pop(k) for k in ("_search", "_instance", "_n")} | {"row": dict(r)})
    per_node = {hw.key or hw.name: hw.devices_per_node or 1 for hw in hws}
    for r in rows:  # a collective group (one replica's tp x ep, or one pool instance's) spans more than one node
        group = max(r["prefill_tp"], r["decode_tp"]) if r["serving"] == "disaggregated" else r["tp"] * r["ep"]
        r["crosses_nodes"] = bool(group > per_node[r["hardware"]]) if group == group else False
    t = {c: [r[c] for r in rows] for c in COLUMNS}
    has_price = any(np.isfinite(x) for x in t["cost_per_million_tokens"])
    ok = np.isfinite(np.asarray(t["goodput_rps"], float))
    second = t["cost_per_million_tokens"] if has_price else t["devices"]
    t["pareto"] = list(pareto_flags(t["goodput_per_device"], second, ok))
    table = {c: np.asarray(v, dtype=object if c in ("model", "hardware", "mode", "serving", "binding", "search", "note")
                           else (bool if c in ("pareto", "hit_bound", "crosses_nodes") else np.float64)) for c, v in t.items()}
    summary = {"model": m.name, "percentile": wl.q, "slo_ttft_s": wl.slo_ttft, "slo_tpot_s": wl.slo_tpot,
               "mode": mode, "impl": impl, "slots": knobs["slots"], "token_budget": knobs["budget"],
               "seeds": wl.seeds, "tolerance": wl.tol, "warm": WARM, "pipeline_layouts_left_out": skipped_pp,
               "pareto_on": "cost" if has_price else "devices", "mean_output_tokens": wl.mean_output,
               "prompt_len": wl.prompt_len, "output_len": wl.output_len, "concurrency": conc,
               "weights_dtype": prec.weights, "kv_dtype": prec.kv or prec.act, "sets": sets}
    summary.update(disagg.compare(table))
    if keep:
        summary["searches"] = searches
        summary["workload"] = wl
    return table, summary


CURVE = (0.3, 0.5, 0.7, 0.85, 1.0, 1.1, 1.25, 1.5)  # rates of a plotted curve, as fractions of the goodput


def curve(entry: dict, wl: Workload, factors=CURVE) -> dict:
    """Percentile TTFT and TPOT against the arrival rate for one searched row (run(keep=True)'s
    summary["searches"] entries), at the median seed, every measured request simulated to its end."""
    from . import disagg

    row, res = entry["row"], entry["_search"]
    g = res["goodput"]
    seed = res["median"]["seed"]
    base = g if g is not None else res["median"]["vhi"]["rate"] * (row["replicas"] if row["serving"] == "colocated"
                                                                     else 1)
    rates = np.asarray(factors, dtype=np.float64) * base
    ttft, tpot = [], []
    for r in rates:
        if row["serving"] == "colocated":
            v = simulate_rate(entry["_instance"], wl, entry["_n"], r / row["replicas"], seed, stop="window")
        else:
            pre, n_p, dec, n_d, tr = entry["_instance"]
            v = disagg.coupled_rate(pre, n_p, dec, n_d, tr, wl, entry["_n"], r, seed, full=True)
        ttft.append(v["ttft"])
        tpot.append(v["tpot"])
    return {"rate": rates, "ttft": np.asarray(ttft), "tpot": np.asarray(tpot), "goodput": g, "seed": seed}
