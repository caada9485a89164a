"""Searches, sweeps, serving and checks: speculative, plan, sweep, serve_sim, kv_memory, capacity, validation,
published_validation, serving_validation(_summary)."""
from __future__ import annotations

from .base import _frame


def speculative(alpha=(0.6, 0.8, 0.9), gamma=(1, 2, 3, 4, 5, 8), draft_cost=0.05, draft=None, target=None,
                hardware="h100-sxm", batch=1, context=1024, weights_dtype="bf16", kv_dtype=None, act_dtype="bf16",
                sets=None, mode="roofline", impl=None):
    """Speculative decoding over acceptance rate alpha x draft length gamma: expected tokens per
    round and the speedup over plain decoding (Leviathan et al. 2023).

    Parameters
    ----------
    alpha : float or list -- acceptance rates in [0, 1]
    gamma : int or list of int -- draft tokens per round
    draft_cost : float or list -- closed form: a draft step in target steps (ignored with models)
    draft, target : model names or Model objects -- price both steps with the engine instead
    hardware : {_HW} (one)
    batch : int -- sequences (with models)
    context : int -- tokens (with models)
    weights_dtype, kv_dtype, act_dtype : str -- {_FMT}
    sets : dict -- {_SETS}
    mode : 'roofline' or 'achievable' (with models)
    impl : {_IMPL}

    Returns
    -------
    DataFrame: alpha, gamma (int), draft_cost, expected_tokens, speedup, slower (bool), best_gamma
    (int, the best of 1..32 for that alpha); with models also draft, target, hardware, batch,
    context, mode, target_step_s (s) and verify_cost (target steps).

    Example
    -------
    >>> s = pm.speculative(alpha=0.8, gamma=[1, 4], draft_cost=0.05)
    >>> s.gamma.tolist(), s.speedup.round(2).tolist(), int(s.best_gamma[0])
    ([1, 4], [1.71, 2.8], 8)
    """
    from .. import whatif

    return _frame(whatif.speculative(alpha, gamma, draft_cost, draft, target, hardware, batch, context, weights_dtype,
                                     kv_dtype, act_dtype, sets, mode, impl))


def plan(model="llama-3.1-70b", hardware="h100-sxm", gpus=8, context=4096, batch=(1, 8, 32, 128), max_latency=None,
         weights_dtype="bf16", kv_dtype=None, act_dtype="bf16", sets=None, price=None, energy=False, mode="roofline",
         impl=None):
    """Every layout (tp x pp x ep x replicas) of `gpus` devices at each batch, with the Pareto front
    of latency against throughput per device.

    Parameters
    ----------
    model : {_MODEL} (one)
    hardware : {_HW} (one)
    gpus : int -- devices to spread over
    context : int -- tokens per sequence
    batch : int or list of int -- sequences per replica
    max_latency : float or str -- a step-latency limit ('50 ms' or seconds) for the Pareto front
    weights_dtype, kv_dtype, act_dtype : str -- {_FMT}
    sets : dict -- {_SETS}
    price : float or str -- USD per device-hour: adds cost_per_million_tokens
    energy : bool -- adds energy_per_token_j (J)
    mode : 'roofline' or 'achievable'
    impl : {_IMPL}

    Returns
    -------
    DataFrame: decode's columns, tp, pp, ep, replicas, devices (int), comm_time_s (s),
    throughput_per_device (tokens/s), crosses_nodes (bool), missing (data the spec lacks), pareto
    (bool). ``df.attrs["summary"]`` holds min_devices, min_layout, skipped and any warning.

    Example
    -------
    >>> p = pm.plan("llama-3.1-70b", "h100-sxm", gpus=8, batch=[8])
    >>> int(p[p.pareto].tp.max()), p.attrs["summary"]["min_devices"]
    (8, 2)
    """
    from ..parallel import plan as _plan

    table, summary = _plan(model, hardware, gpus, context, batch, max_latency, weights_dtype, kv_dtype, act_dtype,
                           sets, price, energy, mode, impl)
    df = _frame(table)
    df.attrs["summary"] = summary
    return df


def sweep(models="llama-2-13b", hardware="h100-sxm", batch="1:512:x2", context="128:131072:x2",
          weights_dtype=("bf16",), kv_dtype=(None,), act_dtype="bf16", mode="roofline", sets=None, out=None,
          chunk_rows=1_000_000, progress=None, impl=None, max_rows=10_000_000, workers=1, cluster=None):
    """Decode metrics over a whole grid: models x hardware x weight formats x KV formats x batch x context.

    Parameters
    ----------
    models : {_MODEL}
    hardware : {_HW}
    batch, context : str or list -- axes: 'START:STOP:xFACTOR' (geometric), 'START:STOP:+STEP' or a list
    weights_dtype, kv_dtype : tuple of str -- formats to sweep ({_FMT})
    act_dtype : str -- the activation format
    mode : {_MODE}
    sets : dict -- {_SETS}
    out : str -- stream to FILE.csv or FILE.parquet instead of returning the grid
    chunk_rows : int -- rows evaluated per block
    progress : bool -- a progress bar (default: on a terminal)
    impl : {_IMPL}
    max_rows : int -- refuse a bigger grid
    workers : int -- local worker processes evaluating the blocks (default 1: this process; None: the cores)
    cluster : str -- a Dask scheduler address or 'local' (perfmodel[cluster]); the same rows in the same order

    Returns
    -------
    DataFrame with decode's columns (batch and context as int), or with `out` a dict
    {{"path", "rows", "seconds"}}.

    Example
    -------
    >>> g = pm.sweep("llama-2-13b", "h100-sxm", batch="1:4:x2", context=[1024])
    >>> g.batch.tolist()
    [1, 2, 4]
    """
    from ..grid import sweep as _sweep

    r = _sweep(models, hardware, batch, context, weights_dtype, kv_dtype, act_dtype, mode, sets, out, chunk_rows,
               progress, impl, max_rows, workers, cluster)
    return r if out is not None else _frame(r)


def serve_sim(model="llama-2-13b", hardware="h100-sxm", policy="both", requests=None, slots=8, rate=None, trace=None,
              prompt_len="512", output_len="lognormal:median=18,max=231", kv_manager="paged", block_size=16,
              shared_prefix=0, samples=1, sharing=True, prefill=None, token_budget=None, seed=0,
              weights_dtype="bf16", kv_dtype=None, act_dtype="bf16", sets=None, cost_quantum=16, tp=1, pp=1, ep=1,
              replicas=1, price=None, energy=False, mode="roofline", impl=None, max_tokens=None, concurrency=None,
              warmup=None, show=False):
    """The serving simulator: static and/or continuous batching of a generated (or traced) traffic
    on one replica, each iteration priced by the engine. One summary row per policy.

    Parameters
    ----------
    model : {_MODEL} (one)
    hardware : {_HW} (one)
    policy : 'static', 'continuous' or 'both'
    requests : int -- requests to generate (default 256 when no trace)
    slots : int or None -- concurrent sequences (None: as many as memory allows)
    rate : float -- arrivals per second (Poisson); None: all at t = 0
    trace : str -- a CSV/JSONL trace of arrival_s, prompt_tokens, output_tokens instead
    prompt_len, output_len : str or int -- length distributions: '512', 'uniform:A:B', 'lognormal:median=M,max=X'
    kv_manager : 'paged' or 'contiguous'
    block_size : int -- tokens per KV block (paged)
    shared_prefix : int -- tokens of a system prompt every request shares
    samples : int -- parallel samples per request (share the prompt)
    sharing : bool -- share prefix blocks between sequences (paged)
    prefill : 'chunked', 'separate', 'whole' or None -- how prompts join the steps (docs/serving.md); None: the impl
        profile's engine's own (TensorRT-LLM whole, SGLang separate, else chunked)
    token_budget : int -- tokens per iteration (chunked prefill)
    seed : int -- the traffic's random seed
    weights_dtype, kv_dtype, act_dtype : str -- {_FMT}
    sets : dict -- {_SETS}
    cost_quantum : int -- token rounding of the step-cost cache
    tp, pp, ep, replicas : int -- {_LAYOUT} (pp is not simulated)
    price : float or str -- USD per device-hour: adds cost_per_million_tokens
    energy : bool -- adds energy_per_token_j (J)
    mode : 'roofline' or 'achievable' (the step cost's)
    impl : {_IMPL}
    max_tokens : int -- refuse to simulate more generated tokens than this over all runs (default 5,000,000)
    concurrency : int -- a closed loop of N clients (each sends its next request when its last returns;
        vLLM bench serve --max-concurrency, AIPerf --concurrency) instead of open-loop arrivals; requests
        then defaults to 10 N
    warmup : int -- closed loop: the first requests, run but not measured (default 2 N)
    show : bool -- a progress bar on stderr (requests done) while it simulates, when stderr is a terminal

    Returns
    -------
    DataFrame: policy, mode, requests, sequences, tokens, steps (int), makespan_s (s),
    throughput_tok_s (tokens/s), mean/p50/p90/p99 latency_s, ttft_s and tpot_s (s), occupancy and KV
    memory columns (bytes); request_rate (1/s) and mean_in_flight (Little's law over the measured
    window); with concurrency also concurrency, warmup, throughput_per_device and tok_s_per_user.

    Example
    -------
    >>> r = pm.serve_sim(requests=32, slots=8, output_len="lognormal:median=18,max=231")
    >>> r.policy.tolist(), int(r.requests[0])
    (['static', 'continuous'], 32)
    """
    from .. import serving

    return _frame(serving.serve_sim(model, hardware, policy, requests, slots, rate, trace, prompt_len, output_len,
                                    kv_manager, block_size, shared_prefix, samples, sharing, prefill, token_budget, seed,
                                    weights_dtype, kv_dtype, act_dtype, sets, cost_quantum, tp, pp, ep, replicas, price,
                                    energy, mode, impl, max_tokens, concurrency, warmup, show))


def kv_memory(model="llama-2-13b", hardware="h100-sxm", requests=None, slots=None, rate=None, trace=None,
              prompt_len="512", output_len="lognormal:median=18,max=231", block_size=16, shared_prefix=0, samples=1,
              prefill=None, token_budget=None, seed=0, weights_dtype="bf16", kv_dtype=None, act_dtype="bf16",
              sets=None, cost_quantum=16, mode="roofline", impl=None, max_tokens=None):
    """The same traffic under continuous batching with each KV manager: contiguous reservation,
    paged, and paged with prefix sharing (one row each per block size).

    Parameters
    ----------
    model : {_MODEL} (one)
    hardware : {_HW} (one)
    requests : int -- requests to generate (default 256)
    slots : int or None -- concurrent sequences (None: as many as memory allows)
    rate : float -- arrivals per second; None: all at t = 0
    trace : str -- a trace file instead of generated traffic
    prompt_len, output_len : str or int -- length distributions (see serve_sim)
    block_size : int or list of int -- tokens per KV block
    shared_prefix : int -- tokens of a shared system prompt
    samples : int -- parallel samples per request
    prefill : 'chunked', 'separate', 'whole' or None -- how prompts join the steps (docs/serving.md); None: the impl
        profile's engine's own (TensorRT-LLM whole, SGLang separate, else chunked)
    token_budget : int -- tokens per iteration
    seed : int -- the traffic's random seed
    weights_dtype, kv_dtype, act_dtype : str -- {_FMT}
    sets : dict -- {_SETS}
    cost_quantum : int -- token rounding of the step-cost cache
    mode : 'roofline' or 'achievable'
    impl : {_IMPL}
    max_tokens : int -- refuse to simulate more generated tokens than this over all runs (default 5,000,000)

    Returns
    -------
    DataFrame: manager, mode, block_size (int; missing for contiguous), requests, peak_sequences,
    preemptions (int), KV capacity and time-mean memory columns (bytes), utilization,
    throughput_tok_s (tokens/s), mean_latency_s (s).

    Example
    -------
    >>> k = pm.kv_memory("llama-2-13b", "l40s", requests=32, prompt_len=256, shared_prefix=1024)
    >>> k.manager.tolist()
    ['contiguous', 'paged', 'paged+shared']
    """
    from .. import serving

    return _frame(serving.kv_memory(model, hardware, requests, slots, rate, trace, prompt_len, output_len, block_size,
                                    shared_prefix, samples, prefill, token_budget, seed, weights_dtype, kv_dtype,
                                    act_dtype, sets, cost_quantum, mode, impl, max_tokens))


def capacity(model="llama-3.1-70b", hardware="h100-sxm", gpus=None, tp=None, pp=1, ep=1, replicas=1,
             prompt_len="lognormal:median=1000,max=8000", output_len="lognormal:median=250,max=2000", slo_ttft="1s",
             slo_tpot="50ms", percentile=99, mode="roofline", impl=None, disaggregate=False, price=None, slots=256,
             token_budget=2048, requests=None, seeds=3, seed=0, tolerance=0.05, block_size=16, cost_quantum=16,
             weights_dtype="bf16", kv_dtype=None, act_dtype="bf16", sets=None, max_tokens=None, concurrency=None,
             workers=None, cluster=None, show=False):
    """Goodput under latency SLOs: the largest Poisson request rate at which the percentile TTFT and TPOT
    of the serving simulator meet both SLOs, per (hardware, layout), and with disaggregate=True per split
    into prefill and decode pools (docs/capacity.md).

    Parameters
    ----------
    model : {_MODEL} (one)
    hardware : {_HW} (one search each)
    gpus : int -- search every layout of this many devices (pipeline layouts left out); or give tp
    tp, pp, ep, replicas : int -- one layout ({_LAYOUT}; pp must be 1: stages are not simulated)
    prompt_len, output_len : str or int -- length distributions: '512', 'uniform:A,B', 'lognormal:median=M,max=X'
    slo_ttft, slo_tpot : str or float -- the SLOs: '1s', '50ms' or seconds
    percentile : float -- both SLOs hold at this percentile, in (0, 100]
    mode : 'roofline' or 'achievable' (the step cost's)
    impl : {_IMPL}
    disaggregate : bool -- also every split of the devices into a prefill and a decode pool
    price : float or str -- USD per device-hour ('2.49/h'; a comma string, one per hardware): adds
        cost_per_million_tokens (USD per million output tokens at the goodput)
    slots : int or None -- concurrent sequences per replica (vLLM's max_num_seqs)
    token_budget : int or None -- tokens per step (chunked prefill; the prefill pool's batch); None: whole prompts
    requests : int -- requests per simulated trace (default: six times the batch an analytic bound expects)
    seeds : int -- independent searches (seed, seed + 1, ...); the median is reported
    seed : int -- the first seed
    tolerance : float -- bisection stops when hi / lo <= 1 + tolerance
    block_size : int -- tokens per paged KV block
    cost_quantum : int -- decode contexts rounded up to this many tokens in the step cost
    weights_dtype, kv_dtype, act_dtype : str -- {_FMT}
    sets : dict -- {_SETS}
    max_tokens : int -- refuse searches estimated to simulate more generated tokens (default 15,000,000)
    concurrency : int -- instead of searching the Poisson rate, serve N clients in a closed loop (each sends
        its next request when its last returns): goodput_rps is the request rate they get when the
        percentiles meet both SLOs, else missing with the binding SLO (colocated layouts only)
    workers : int -- local worker processes for the searches (default: this machine's cores; 1: this process)
    cluster : str -- a Dask scheduler address ('tcp://host:8786') or 'local' (a LocalCluster of `workers`
        processes): the searches run there (perfmodel[cluster]); the same table whoever runs them
    show : bool -- a progress bar on stderr while the searches run, when stderr is a terminal

    Returns
    -------
    DataFrame, one row per (hardware, layout[, split]): serving ('colocated' or 'disaggregated'), tp, pp, ep,
    replicas, devices, prefill_tp, prefill_instances, decode_tp, decode_instances (int, missing where they do
    not apply), goodput_rps, goodput_lo_rps, goodput_hi_rps (requests/s: median, min and max over seeds),
    output_tok_s (tokens/s at the goodput), goodput_per_device, cost_per_million_tokens (USD), binding ('ttft',
    'tpot', 'memory', 'none reached', 'does not fit', 'search bound'), binding_value_s (s), ttft_s and tpot_s
    (s, at the goodput), fail_rps (the next rate tried, which fails), median_seed, search, hit_bound, requests,
    seeds, kv_transfer_s (s), note, pareto (bool). ``df.attrs["summary"]`` holds the criterion's settings and
    the disaggregation verdict.

    Example
    -------
    >>> c = pm.capacity("llama-3.1-8b", "h100-sxm", tp=1, prompt_len=512,
    ...                 output_len="lognormal:median=64,max=512", seeds=1)
    >>> c.binding[0], bool(c.ttft_s[0] <= 1.0 and c.tpot_s[0] <= 0.05), int(c.devices[0])
    ('ttft', True, 1)
    """
    from ..serving.capacity import capacity as _capacity

    table, summary = _capacity(model, hardware, gpus, tp, pp, ep, replicas, prompt_len, output_len, slo_ttft, slo_tpot,
                               percentile, mode, impl, disaggregate, price, slots, token_budget, requests, seeds, seed,
                               tolerance, block_size, cost_quantum, weights_dtype, kv_dtype, act_dtype, sets,
                               max_tokens, concurrency, workers, cluster, show)
    df = _frame(table)
    df.attrs["summary"] = summary
    return df


def validation(results, hardware=None, overhead=True, passes=True, kv=True):
    """Predicted against measured time for every validation case of a `perfmodel measure` run.

    Parameters
    ----------
    results : str or Path -- a results folder (or its results.json) written by `perfmodel measure`
    hardware : str -- the spec to predict with (default: the folder's measured.yaml)
    overhead : bool -- include the spec's kernel_overhead
    passes : bool -- include gemm_weight_passes and attention_kv_passes
    kv : bool -- include attention_kv_passes (else attention pays gemm_weight_passes)

    Returns
    -------
    DataFrame: case, family, predicted_s (s), measured_s (s, the median), error (predicted /
    measured - 1; negative: the engine is optimistic).

    Example
    -------
    >>> v = pm.validation(pm.SAVED_RUN)
    >>> sorted(set(v.family)), bool(v.error.abs().median() < 0.1)
    (['attention', 'decode', 'sweep'], True)
    """
    from .. import measure

    return _frame(measure.validation(results, hardware, overhead, passes, kv))


def published_validation(cases=None, categories=None):
    """Published end-to-end measurements against the engine: per case the measurement, the
    roofline bound, the achievable estimate, the fraction of the bound reached and the estimate's
    error (perfmodel/measure/published.yaml, or a file of your own).

    Parameters
    ----------
    cases : str -- a measurements YAML (default: perfmodel's 117 cases)
    categories : list of str -- only cases with these categories

    Returns
    -------
    DataFrame: case, category, metric, measured, bound, achievable (the metric's unit), fraction,
    error, bound_holds (bool), and the case's model, hardware, formats, batch and context.

    Example
    -------
    >>> p = pm.published_validation(categories=["moe"])
    >>> bool(p.bound_holds.all())
    True
    """
    from ..measure.published import published as _published

    return _frame(_published(cases, categories))


def fleet(path, workers=None, cluster=None, max_tokens=None):
    """A fleet plan: one capacity search per row of a YAML or CSV file (model, hardware, gpus or tp/ep/replicas,
    and optionally the workload, SLOs, mode, impl, price, disaggregate, seeds, dtypes: perfmodel/fleet.py),
    answered as one DataFrame.

    Parameters
    ----------
    path : str -- the fleet file (.csv with a header, else YAML: a list of rows or {{rows: [...]}})
    workers : int -- local worker processes, one fleet row each (default: this machine's cores; 1: this process)
    cluster : str -- a Dask scheduler address or 'local' (perfmodel[cluster]); the same table whoever runs it
    max_tokens : int -- refuse a fleet whose searches are estimated to simulate more generated tokens in all
        (default 15,000,000)

    Returns
    -------
    DataFrame: fleet_row (the file's row, from 0), name, prompt_len, output_len, slo_ttft_s, slo_tpot_s, chosen
    (the row perfmodel would deploy for that fleet row: pm.launch_settings' choice), then every column of
    pm.capacity. ``df.attrs["summaries"]`` holds each fleet row's capacity summary.

    Example
    -------
    >>> import pathlib, tempfile
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "fleet.csv"
    >>> _ = f.write_text("name,model,hardware,tp,prompt_len,output_len,seeds,requests\\n"
    ...                  "small,llama-3.2-1b,l4,1,256,64,1,400\\n")
    >>> df = pm.fleet(str(f), workers=1)
    >>> df.name[0], bool(df.chosen[0]), int(df.tp[0])
    ('small', True, 1)
    """
    from ..serving import fleet as fl

    table, summaries = fl.plan(path, workers, cluster, max_tokens)
    df = _frame(table)
    df.attrs["summaries"] = summaries
    return df


def launch_settings(capacity_frame, engine=None, memory_fraction=0.9, row=None):
    """The engine launch settings of a capacity search's chosen row: of its Pareto rows with a goodput, the lowest cost
    per million tokens when priced, else the most goodput per device (or the row `row`), for vLLM, SGLang or
    TensorRT-LLM (docs/launch.md maps each setting from the engine's own documentation).

    Parameters
    ----------
    capacity_frame : DataFrame -- what pm.capacity returned (its attrs["summary"] included)
    engine : 'vllm', 'sglang' or 'trtllm' (default: the engine of the search's impl profile, else vllm)
    memory_fraction : float -- the share of device memory the engine may give weights + KV, in (0, 1]
    row : int -- the row to deploy instead of the chosen one

    Returns
    -------
    DataFrame, one row per pool (colocated, or prefill and decode): row (the capacity row), engine, pool,
    instances, gpus_per_instance, command (one instance's shell command), config (TensorRT-LLM's YAML or None),
    router (the disaggregated front end or None), notes. Empty when no row has a goodput.

    Example
    -------
    >>> c = pm.capacity("llama-3.1-8b", "h100-sxm", tp=1, prompt_len=512, output_len="lognormal:median=64,max=512",
    ...                 seeds=1, workers=1)
    >>> pm.launch_settings(c).command[0].split()[:5]
    ['vllm', 'serve', 'meta-llama/Llama-3.1-8B', '--tensor-parallel-size', '1']
    """
    import pandas as pd

    from .. import launch
    from ..errors import SpecError

    summary = getattr(capacity_frame, "attrs", {}).get("summary")
    if summary is None or "pareto" not in capacity_frame:
        raise SpecError("capacity_frame", None, "must be the DataFrame pm.capacity returned (with its attrs['summary'])")
    got = launch.for_capacity(capacity_frame, summary, engine, memory_fraction, row)
    cols = ["row", "engine", "pool", "instances", "gpus_per_instance", "command", "config", "router", "notes"]
    if got is None:
        return pd.DataFrame(columns=cols)
    i, pools = got
    return pd.DataFrame([{"row": i} | {c: p.get(c) for c in cols[1:]} for p in pools], columns=cols)


def serving_validation(sample=None, modes=("roofline", "achievable"), model=None, system=None, backend=None,
                       rounds=2, jobs=1, impl="engine", cluster=None, max_points=200):
    """Measured serving runs against the serving simulator: every point of AIConfigurator's silicon sample
    (closed-loop concurrency benchmarks of vLLM, SGLang and TensorRT-LLM; perfmodel/measure/data/aiconfigurator)
    or of a CSV of the same columns, predicted with the workload as measured (docs/validation.md, "Serving").

    Parameters
    ----------
    sample : str -- a silicon-sample CSV (default: the shipped one, pinned in its NOTICE)
    modes : tuple of str -- 'roofline' and/or 'achievable'
    model, system, backend : list of str -- only these (catalog names or the sample's own)
    rounds : int -- measured requests per client after a warm-up of 2 per client (AIPerf measures 20)
    jobs : int or None -- local worker processes to simulate in (None: one per core)
    cluster : str -- a Dask scheduler address or 'local': the simulations run there (perfmodel[cluster])
    max_points : int -- the most point x mode simulations to run (default 200, about a minute); more is refused
        before any work, as `validate --serving --max-points` does
    impl : str -- the achievable mode's implementation profile: "engine" (each point's measured engine:
        vllm-0.24, sglang-0.5, trtllm-1.3) or a profile name or file

    Returns
    -------
    DataFrame, one row per sample row and mode: id, model_path, system, backend, serving_mode (agg or
    disagg), isl, osl, concurrency, band, mode, model, hardware, precision, layout, measured_ttft_ms,
    measured_tpot_ms, predicted_ttft_ms, predicted_tpot_ms (ms), request_rate (1/s), in_flight,
    prefill_clients and decode_clients (a disaggregated row's split of its concurrency, real numbers adding up to
    it; NaN on an agg row), bound_ttft_ms and bound_tpot_ms (roofline rows: the roofline at the measured request
    rate, the bound; docs/validation.md), status ('ok' or 'skipped'), reason, assumed, ttft_error and tpot_error
    (predicted / measured - 1).

    Example
    -------
    >>> v = pm.serving_validation(model=["llama-3.1-8b"], system=["h200_sxm"], backend=["vllm"], modes=("roofline",))
    >>> len(v), bool((v.status == "ok").all()), bool(((v.in_flight - v.concurrency).abs() < 1e-6 * v.concurrency).all())
    (21, True, True)
    """
    from ..cli.validation import _select
    from ..serving import silicon

    df = silicon.load(sample)
    for col, wanted, opt, mapping in (("model_path", model, "model", silicon.MODELS),
                                      ("system", system, "system", silicon.SYSTEMS), ("backend", backend, "backend", None)):
        df = _select(df, col, None if wanted is None else list(wanted), opt, mapping)
    from .. import workers as _wk
    from ..errors import SpecError

    silicon.check_points(len(df), len(tuple(modes)), max_points, "max_points=")
    jobs, cluster = _wk.check(jobs, cluster, "--jobs")
    if isinstance(rounds, bool) or not isinstance(rounds, int) or not 1 <= rounds <= 100:
        raise SpecError("rounds=", None, f"must be a whole number of requests per client from 1 to 100, got {rounds!r}")
    return silicon.predict(df, tuple(modes), rounds, jobs, impl=impl, cluster=cluster)


def serving_validation_summary(points):
    """serving_validation's table summarized per mode and category (overall, backend, system, model, agg or
    disagg, concurrency band): points, median and p90 |error|, bias (the median signed error) and the share
    within +-25% of TTFT and TPOT.

    Parameters
    ----------
    points : DataFrame -- serving_validation's table (or one read back from `validate --serving -o`)

    Returns
    -------
    DataFrame: mode, category, group, points (int), ttft_median_abs, ttft_p90_abs, ttft_bias,
    ttft_within_25, ttft_above (points predicted slower than measured), the same five for tpot (fractions: 0.25
    is 25%), and on roofline rows bound_ttft_above and bound_tpot_above (the bound above the measured time).

    Example
    -------
    >>> v = pm.serving_validation(model=["llama-3.1-8b"], system=["h200_sxm"], backend=["vllm"], modes=("roofline",))
    >>> s = pm.serving_validation_summary(v)
    >>> s[s.category == "overall"].points.tolist()
    [21]
    """
    from ..serving import silicon

    return silicon.summarize(points)


# ---------------------------------------------------------------- specs
