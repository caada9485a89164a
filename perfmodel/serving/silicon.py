"""Serving validation: predict measured serving runs (closed-loop concurrency benchmarks) and report the error.

The measured points are NVIDIA AIConfigurator's silicon sample (perfmodel/measure/data/aiconfigurator: 5,221
runs of vLLM, SGLang and TensorRT-LLM on H100, H200, B200, B300, GB200 and GB300, Apache-2.0, pinned in NOTICE).
Each row is one benchmark: N clients in a closed loop (AIPerf --concurrency N, --num-requests 20 N,
--warmup-request-count 2 N, fixed ISL/OSL with ignore_eos: AIConfigurator's benchmark template
bench_run.sh.j2), one layout of one worker (agg) or a prefill pool and a decode pool (disagg), and the measured
TTFT and TPOT in ms. docs/validation.md ("Serving") gives the method and today's errors.

A point is predicted by the serving simulator on the op list's step cost, with the workload as measured:
- agg: one worker, closed loop of N clients (fastsim.run(concurrency=N)), chunked prefill in vLLM, whole prompts
  in the decode steps in TensorRT-LLM, prefill batches of their own in SGLang (PREFILL), with the engine's default
  token budget (worker_budget), the KV cache as large as memory allows. An InferenceX row runs as its launch and
  benchmark scripts ran it (silicon_plan.agg_config): the rounds it measured (10 N, not AIPerf's 20 N), lengths
  drawn from 0.8 L to L (spread_lengths), the scripts' token budget and cap on running requests, TensorRT-LLM's
  batch waiting and attention-DP balancing where they turned them on, and SGLang's --scheduler-recv-interval
  (a request waits up to that many decode iterations to be taken; fastsim.run's recv). AIPerf's profiling phase (20 N
  requests) starts on an empty server once every warm-up response is back: the loop is simulated from empty,
  its first 2 N requests stand for the phase's first two rounds (the burst of N prompts sent at once), the
  `rounds` x N after them for its middle rounds, and the last N for its last round (profile_mean). TTFT =
  first token - send (queueing included, as AIPerf measures it), TPOT = (last - first token) / (OSL - 1);
  both means over the phase so weighted.
- disagg: W_p prefill workers and W_d decode workers. The N clients split between the two stages; each
  stage is a closed loop of its share (a prefill worker's requests end at their first token, plus the KV
  transfer; a decode worker's arrive prefilled), and the split is where both stages serve the same request
  rate (Little's law per stage: N_p = X T_p, N_d = X T_d), found by bisection on the prefill stage's clients,
  a real number: every client is counted, and a prefill pool that outruns the decode pool holds less than one
  client a worker while the rest wait for a decode place (perfmodel.serving.silicon_disagg).
  TTFT = the prefill stage (queueing, prefill) + the transfer + the decode worker's wait for a place and its
  first iteration with the request (Dynamo streams every token from the decode worker: its design doc
  docs/design_docs/disagg_serving.md, "Router Orchestration"); TPOT = (last - first token) / (OSL - 1). The
  prefill stage's mean is over AIPerf's phase: its first round is the burst of all N prompts (N / W_p a worker,
  Predictor.burst_mean), its other rounds the steady loop's. A worker's token budget is the engine's default,
  per attention-DP rank in TensorRT-LLM and vLLM (worker_budget). A recipe that ran MTP with k drafts (its name
  says mtp<k>) has its decode workers run speculative iterations (perfmodel.serving.speculative): the main
  model over k + 1 tokens and k passes of the MTP layer, emitting MTP_TOKENS[k] tokens a step. A row that ran an
  srt-slurm recipe was measured by its sa-bench (silicon_plan.SA_BENCH): 10 N requests, lengths drawn from 0.8 L
  to L, both stages and the burst so drawn (an MTP row keeps fixed lengths, as in agg).

Layouts map as AIConfigurator's: a worker has tp x attention_dp devices; perfmodel's Layout(tp, ep=attention_dp)
runs attention data-parallel over attention_dp groups of tp devices with the experts spread over all of them
(ops.Layout). Rows whose attention is tensor-parallel and experts expert-parallel (attention_dp 1, moe_ep > 1)
are priced with the experts tensor-parallel: the same weights, FLOPs and bytes per device, all-reduces where the
engine runs all-to-alls. Precision maps as AIConfigurator's profiles (sdk/task_v1_compat.py _PROFILE_TO_QUANT):
fp8 -> fp8 weights, activations and KV cache (fp8-b128 weights, block-scaled, where the GEMM or MoE quant
mode is fp8_block); nvfp4 -> NVFP4 weights and activations, fp8 KV; int4_wo -> int4
weights, bf16 activations; bf16 -> bf16; but an InferenceX run whose script (aggregated) or recipe (disaggregated,
both workers) left the KV cache at the engine's auto keeps an unquantized checkpoint's cache in bf16
(silicon_plan.kv_auto, inferencex.agg_kv and disagg_kv), and SGLang's auto for a DeepSeek-NSA model (GLM-5) is
bf16 on Hopper, fp8 on Blackwell, as its server_args resolves it (inferencex.NSA_MODELS). In the
achievable mode a row is priced by the kernel tables of exactly the engine version it ran where AIConfigurator
measured that version (Predictor.impl_for). Never is a parameter fitted to these points.
"""
from __future__ import annotations

import copy
import itertools
import math
from collections import OrderedDict
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pandas is imported where a frame is made (off the plain CLI path)
    import pandas as pd  # noqa: F401

from ..errors import SpecError
from ..moe_backends import MOE_BACKENDS as MOE_BACKENDS_OF
from ..ops import Layout
from . import fastsim
from .slo import Instance
from .kvmemory import KVSizes
from .speculative import SpecCost, module_memory
from .silicon_report import (  # noqa: F401 (re-exported)
    MAX_FILE_BYTES, CATEGORIES, MAX_POINTS, check_points, SUMMARY_COLUMNS, summarize, coverage, load_points, compare,
)

from .silicon_plan import (  # noqa: F401 (re-exported)
    DATA, SAMPLE, COLUMNS, MODELS, SYSTEMS, PRECISION, PREFILL, RECIPES, BLOCK_FP8, weights_format, experts_format,
    checkpoint_pins, NVFP4_KEPT,
    budget, worker_budget, worker_cap, _ranks, load, concurrency, plan, recipe_workers, _recipe_layout, _layout, _int,
    _num, agg_parallel, agg_speculative, MTP_PRICED, PROFILE_ROUNDS, profile_mean, spread_lengths,
)
from .silicon_disagg import Disaggregated

MODES = ("roofline", "achievable")
BANDS = ((1, 4, "1-4"), (5, 32, "5-32"), (33, 128, "33-128"), (129, 512, "129-512"), (513, math.inf, ">512"))


# ---------------------------------------------------------------- one point (PROFILE_ROUNDS: silicon_plan)
def _mean(v: np.ndarray) -> float:
    """The mean of the values that are not NaN (requests the benchmark leaves out), 0 when none is left."""
    ok = ~np.isnan(v)
    return float(np.mean(v)) if ok.all() else (float(np.mean(v[ok])) if ok.any() else 0.0)


# instances a Predictor keeps (the points are batched by model, device, precision and layout, so a group's
# instances are reused together; all of them kept grew a validation worker by ~0.4 GB a minute, to the OOM killer)
MAX_INSTANCES = 8  # mutation: equivalent - a memory bound, a dropped instance is rebuilt the same


class Predictor(Disaggregated):
    """Predicts planned points, caching instances (per model, device, precision, layout, mode) and results (per
    workload), so that rows differing only in backend version or measured values are simulated once."""

    def __init__(self, mode: str, rounds: int = 2, warmup: int = 2, quantum: int = 16, block: int = 16,
                 impl: str = "engine"):
        from .. import api

        self.mode, self.rounds, self.warmup, self.quantum, self.block = mode, rounds, warmup, quantum, block
        self.impl_arg = impl
        self.impl = api.check_mode(mode, None, MODES)
        self.impls: dict = {}
        self.insts: OrderedDict = OrderedDict()  # the MAX_INSTANCES used last
        self._serial = itertools.count()  # names an instance for the memos below (an id() is reused once freed)
        self.results: dict = {}
        self.transfers: dict = {}

    def impl_for(self, engine: str, moe: str = "", version: str = ""):
        """The implementation profile a point is priced with in the achievable mode: with impl "engine" (the
        default) the profile of the engine that was measured (ENGINE_PROFILES), its kernel tables of the version
        that ran (`version`, the row's backend_version) where AIConfigurator measured exactly that version, else
        the profile's; else the profile named. `moe`, the MoE backend the run's configuration named
        (silicon_plan.moe_backends) where the engine takes that name (moe_backends.MOE_BACKENDS), replaces the
        profile's."""
        from dataclasses import replace

        from .. import api

        if self.mode != "achievable":
            return None
        name = ENGINE_PROFILES.get(engine, "graphs") if self.impl_arg == "engine" else self.impl_arg
        if name not in self.impls:
            self.impls[name] = api.check_mode(self.mode, name, MODES)
        impl = self.impls[name]
        if version and self.impl_arg == "engine" and getattr(impl, "engine", "") == engine:
            if (name, version) not in self.impls:
                self.impls[(name, version)] = replace(impl, exact_version=version, key=f"{impl.key}|exact={version}")
            impl = self.impls[(name, version)]
        if moe and moe in MOE_BACKENDS_OF.get(getattr(impl, "engine", ""), ()) and moe != impl.moe_backend:
            if (impl.key, moe) not in self.impls:
                self.impls[(impl.key, moe)] = replace(impl, moe_backend=moe, key=f"{impl.key}|moe_backend={moe}")
            impl = self.impls[(impl.key, moe)]
        return impl

    def instance(self, p: dict, lay: Layout, budget: int, moe: str = "") -> Instance:
        from .. import api

        impl = self.impl_for(p.get("engine", ""), moe, p.get("engine_version", ""))
        pins = tuple(p.get("pins", ()))  # the row's checkpoint pins tensor groups (silicon_plan.checkpoint_pins)
        key = (p["model"], p["hardware"], p["weights"], p["act"], p["kv"], pins, lay, budget, getattr(impl, "key", None))
        inst = self.insts.get(key)
        if inst is None:
            (m,), (hw,) = api.specs(p["model"], p["hardware"], {f"weight_formats.{g}": f for g, f in pins} or None)
            prec = api._prec(p["weights"], p["kv"], p["act"])
            inst = self.insts[key] = Instance(m, hw, prec, lay, self.mode, impl, self.quantum, budget, None,
                                              self.block)
            inst.serial = next(self._serial)
            self._evict()
            if len(self.transfers) > 4 * MAX_INSTANCES:  # mutation: equivalent - a memory bound, rebuilt the same
                self.transfers.clear()
        else:
            self.insts.move_to_end(key)
        return inst

    @staticmethod
    def no_evict(inst: Instance, isl: int, osl: int, engine: str):
        """At most as many requests run as have their whole ISL + OSL cache in memory: TensorRT-LLM's default
        capacity scheduler (GUARANTEED_NO_EVICT) admits so; SGLang admits on an estimate of the tokens still to
        come, so that it seldom retracts; vLLM admits on the cache in use and preempts when it runs out, which
        this validation does not simulate (docs/validation.md, "Serving": a fixed-length benchmark that
        overfills vLLM's cache is predicted with waiting requests instead of recomputed ones)."""
        per = -(-(isl + osl) // inst.block) * inst.sizes.per_token * inst.block + inst.sizes.per_seq
        return max(1, int(inst.sizes.capacity // per))

    def closed(self, inst: Instance, n: int, isl: int, osl: int, prefilled=False, prefill="chunked", slots=None,
               warmup=None, rounds=None, tokens=None, wait=None, balance=None, profile: int = PROFILE_ROUNDS,
               spread: float | None = None, recv: int | None = None, ahead: bool = False) -> dict:
        """One worker's closed loop of n clients: mean TTFT, mean stage time and TPOT, request rate, in flight.
        tokens: the output tokens a request streams where the simulation runs fewer iterations (osl) than that
        (speculative decoding emits several a step); TPOT is over tokens - 1. wait, balance, recv: the engine's batch
        waiting, attention-DP balancing and SGLang's receive interval (fastsim.run's); ahead: its overlap scheduler
        (fastsim.run's). profile: the rounds of n requests the benchmark measures
        (profile_mean). spread: the benchmark draws each prompt and output length uniformly from int(L x spread) to
        L (benchmark_serving.py sample_random_requests, --random-range-ratio): they are those lengths, evenly spaced
        over the range and shuffled with a fixed seed, so that a prediction has the range's mean and spread without
        the noise of one draw; TPOT is each request's over its own output, averaged."""
        warmup = self.warmup if warmup is None else warmup
        rounds = self.rounds if rounds is None else rounds
        tokens = osl if tokens is None else tokens
        if spread is not None and tokens != osl:
            raise ValueError("spread lengths with speculative steps are not simulated")
        key = (inst.serial, n, isl, osl, prefilled, prefill, slots, warmup, rounds, tokens, wait, balance, profile,
               spread, recv, ahead)
        r = self.results.get(key)
        if r is not None:
            return r
        # from empty: `warmup` rounds (the burst), `rounds` steady ones (the window: rate, in flight), one last
        # round that keeps every client busy while the window's requests finish and then drains (profile_mean)
        warm, total = warmup * n, (warmup + rounds + 1) * n
        P, O = np.full(total, isl, dtype=np.int64), np.full(total, osl, dtype=np.int64)
        if spread is not None:  # a prefill stage's one output token (osl 1) is not drawn
            P = spread_lengths(isl, spread, total, 1)
            O = spread_lengths(osl, spread, total, 2) if osl > 1 else O
        if not bool(np.all(fastsim.fits_alone(inst.sizes, inst.block, P, O))):  # every drawn length, not the first
            raise SpecError("silicon", None, f"does not fit: one request's KV cache ({isl} + {osl} tokens) is more "
                                             f"than the {inst.sizes.capacity:.4g} B left after the weights")
        s = fastsim.run(np.zeros(total), P, O, inst.sizes, inst.cost, slots, inst.budget, prefill, inst.block,
                        prefilled=prefilled, concurrency=n, wait=wait, balance=balance, recv=recv, ahead=ahead)
        w = slice(warm, warm + rounds * n)
        sent, first, last, done = s["arrival"][w], s["first"][w], s["last"][w], s["done"][w]
        t_a, t_b = float(sent.min()), float(done.max())
        span = t_b - t_a
        # requests in flight over the window, all of them counted (Little's law: = n, the clients, in a closed loop)
        held = np.clip(np.minimum(s["done"], t_b) - np.maximum(s["arrival"], t_a), 0.0, None)
        # a prefilled request's first token reaches the client from the decode worker's first iteration with it
        # (Dynamo streams every token from the decode worker), so its wait for a place there is TTFT's ("ttft":
        # arrival at the decode worker to that iteration's end), and TPOT runs from that token to the last
        gap = np.maximum(O - 1, 1) if spread is not None else max(tokens - 1, 1)
        tpot = np.where(O > 1, (s["last"] - s["first"]) / gap, np.nan)  # benchmark_serving.py: outputs > 1 token
        x = {"ttft": s["first"] - s["arrival"], "stage": s["done"] - s["arrival"], "tpot": tpot}
        r = self.results[key] = {
            **{k: _mean(v[w]) for k, v in x.items()},  # the steady window
            **{f"{k}_profile": profile_mean(v, n, warmup, rounds, profile) for k, v in x.items()},  # AIPerf's 20 N
            "rate": float(np.sum(held)) / span / float(np.mean(done - sent)),  # Little: L / mean time in the system
            "in_flight": float(np.sum(held)) / span,
            "preempted": int(s["preempted"]), "peak_running": int(s["peak_running"])}
        return r

    def agg(self, p: dict) -> dict:
        inst = self.instance(p, p["layout"], worker_budget(p, p["layout"]), p.get("decode_moe_backend", ""))
        isl, osl = p["isl"], p["osl"]
        tokens = None
        ahead = self.ahead(p)
        if self.mtp_priced(p):  # the configuration that ran it drafted k tokens a step
            inst = self.speculative(inst, int(p["mtp"]), isl, osl)
            osl, tokens = inst.cost.steps(), osl
        slots = self.no_evict(inst, isl, p["osl"], p["engine"])  # the MTP module's memory included
        if p.get("max_batch"):  # the configuration's cap on running requests (per attention-DP rank but SGLang's)
            cap = p["max_batch"] * _ranks(p, p["layout"])
            slots = cap if slots is None else min(slots, cap)
        # TensorRT-LLM's batch waiting (iterations, token ratio of max_num_tokens) without attention DP, its
        # attention-DP balancing (timeout and batching iterations) with it (fastsim.run's wait and balance)
        wait, dp = p.get("batch_wait"), p["layout"].ep
        wait = None if not wait or dp > 1 else (wait[0], wait[1] * inst.budget)
        balance = (dp, *p["adp_balance"]) if p.get("adp_balance") and dp > 1 else None
        def sim(n):
            return self.closed(inst, n, isl, osl, prefill=p.get("prefill") or PREFILL.get(p.get("engine"), "chunked"),
                               slots=slots, tokens=tokens, wait=wait, balance=balance,
                               profile=p.get("profile", PROFILE_ROUNDS), spread=None if tokens else p.get("spread"),
                               recv=p.get("recv"), ahead=ahead)
        r = sim(p["concurrency"])
        out = {"ttft_s": r["ttft_profile"], "tpot_s": r["tpot_profile"], "in_flight": r["in_flight"],
               "request_rate": r["rate"], "preempted": r["preempted"]}
        if self.mode == "roofline" and p.get("measured_rate"):  # the bound at the measured request rate
            pool = self.pool(sim, lambda x, c: x["rate"])
            u = self.at_rate(pool, float(p["concurrency"]), p["measured_rate"])
            f = pool(u)[1] if u is not None else (lambda k: r[k])  # None: no faster than measured, the loop's
            out.update(self.lower(out, f("ttft_profile"), f("tpot_profile")))
        return out

    def ahead(self, p: dict) -> bool:
        """Whether the point's engine forms step k + 1 while step k runs (its profile's overlap_schedule, fastsim.run's
        ahead): not SGLang with speculative decoding, which turns it off without spec v2 (sglang-0.5.yaml)."""
        impl = self.impl_for(p.get("engine", ""), "", p.get("engine_version", ""))
        return bool(getattr(impl, "overlap_schedule", False)) and not (p.get("engine") == "sglang" and
                                                                       p.get("speculative") == "mtp")

    @staticmethod
    def mtp_priced(p: dict) -> bool:
        """Whether a point ran MTP with a draft count whose tokens a step are published, on a model they hold for."""
        return p.get("speculative") == "mtp" and p.get("mtp") in MTP_TOKENS and p.get("model") in MTP_PRICED

    def speculative(self, inst: Instance, k: int, isl: int, osl: int):
        """The decode worker `inst` running MTP with k drafts (speculative.SpecCost, MTP_TOKENS emitted a step):
        the same budget, its decode steps priced as speculative iterations, and the KV memory less what the loaded
        MTP module takes (its weights, and its layer's cache a token: speculative.module_memory)."""
        key = ("mtp", inst.serial, k, isl, osl)
        s = self.insts.get(key)
        if s is None:
            s = copy.copy(inst)
            w, kv = module_memory(inst.model, inst.prec, inst.lay)
            z = inst.sizes
            if z.capacity - w * inst.lay.ep <= 0:
                raise SpecError("silicon", None, f"does not fit: the weights and the MTP module ({z.weights + w:.4g} B "
                                                 f"a device) leave no memory for a KV cache")
            s.sizes = KVSizes(z.per_token + kv, z.per_seq, z.weights + w, z.capacity - w * inst.lay.ep, z.max_context)
            s.cost = SpecCost(inst, k, MTP_TOKENS[k], isl, osl)
            s.serial = next(self._serial)
            self.insts[key] = s
            self._evict()
        return s

    def _evict(self) -> None:
        while len(self.insts) > MAX_INSTANCES:  # each holds a step memo of up to ~150 MB: keep the recent ones
            self.insts.popitem(last=False)  # mutation: equivalent - which instance goes only decides what is rebuilt

    def __call__(self, p: dict) -> dict:
        return self.agg(p) if "decode_layout" not in p else self.disagg(p)


# ---------------------------------------------------------------- the whole sample
# the implementation profile of each measured engine (hardware/impl/): its kernels and its step loop
# tokens a TensorRT-LLM MTP step emits with k drafts (strict acceptance, its default; no srt-slurm recipe turns on the
# relaxed one): TensorRT-LLM tech blog 1 (docs/source/blogs/tech_blog/blog1_Pushing_Latency_Boundaries_Optimizing_
# DeepSeek-R1_Performance_on_NVIDIA_B200_GPUs.md), DeepSeek-R1-FP4 on 8 B200, batch 1, ISL/OSL 1k/2k, a real
# dataset: "MTP 1 | 1.92", "MTP 2 | 2.58", "MTP 3 | 2.82" (the column says acceptance rate; its values are tokens
# per step). The measured runs used random prompts in the chat template (InferenceX: "Raw random tokens tank
# spec-decode acceptance"), whose acceptance nobody published
MTP_TOKENS = {1: 1.92, 2: 2.58, 3: 2.82}
ENGINE_PROFILES = {"vllm": "vllm-0.24", "sglang": "sglang-0.5", "trtllm": "trtllm-1.3"}


def _moe_label(p: dict) -> str:
    """The TensorRT-LLM MoE backend the run's configuration named: one name, or prefill/decode where they differ."""
    a, b = p.get("prefill_moe_backend", ""), p.get("decode_moe_backend", "")
    if p.get("decode_layout") is None or a == b:  # an aggregated row's one backend (both columns the same)
        return b
    return f"{a or 'AUTO'}/{b or 'AUTO'}"


def _band(n) -> str:
    for lo, hi, name in BANDS:
        if lo <= n <= hi:
            return name
    return ""


_PREDICTORS: dict = {}  # per process: mode -> Predictor (its caches outlive one batch of points)


def _predict_batch(mode: str, rounds: int, batch: list, impl: str = "engine") -> list:
    """Predict (index, plan) pairs in this process: (index, outputs or the reason it does not fit)."""
    pred = _PREDICTORS.get((mode, rounds, impl))
    if pred is None:
        pred = _PREDICTORS[(mode, rounds, impl)] = Predictor(mode, rounds, impl=impl)
    out = []
    for i, p in batch:
        try:
            out.append((i, pred(p)))
        except SpecError as e:
            fit = e.problem.startswith("does not fit") or e.field == "memory_capacity"
            out.append((i, ("" if e.problem.startswith("does not fit") else "does not fit: ") + e.problem if fit
                        else f"{e.where}: {e.field + ': ' if e.field else ''}{e.problem}"))
    return out


def _batches(plans: list, size: int = 8) -> list:
    """Planned points grouped by what their simulations share (model, device, precision, layouts), in batches."""
    ok = [(i, p) for i, p in enumerate(plans) if p["status"] == "ok"]
    ok.sort(key=lambda x: (x[1]["model"], x[1]["hardware"], x[1]["weights"], _lay(x[1]), x[1]["isl"], x[1]["osl"]))
    return [ok[k:k + size] for k in range(0, len(ok), size)]


def _batch_task(t: tuple) -> list:
    return _predict_batch(*t)


def predict(df, modes=MODES, rounds: int = 2, jobs: int | None = 1, progress=None, impl: str = "engine",
            cluster: str | None = None) -> "pd.DataFrame":
    """One row per sample row and mode: measured and predicted TTFT and TPOT (ms), their relative errors
    (predicted - measured) / measured, and what was assumed or why a row was not predicted; a disaggregated row also
    says how its N clients were shared (prefill_clients + decode_clients = N, each a real number: silicon_disagg). jobs > 1 spreads
    the simulations over that many processes (None: one per core), cluster over a Dask cluster (perfmodel.workers):
    the same table whoever runs them."""
    import pandas as pd

    plans = plan(df)
    base = df.reset_index(drop=True)
    for i, p in enumerate(plans):
        if p["status"] == "ok":
            p["measured_rate"] = measured_rate(base.iloc[i], p)
    batches = _batches(plans)
    work = [(mode, b) for mode in modes for b in batches]
    todo, done = sum(len(b) for _, b in work), 0
    results: dict = {}
    from .. import workers as wk

    def each(k, outs):
        nonlocal done
        for i, out in outs:
            results[(work[k][0], i)] = out
        done += len(work[k][1])
        if progress is not None:
            progress(done, todo)

    wk.run(_batch_task, [(mode, rounds, b, impl) for mode, b in work], jobs, cluster, each=each)
    rows = []
    for mode in modes:
        for i, p in enumerate(plans):
            src = base.iloc[i]
            r = {"id": p["id"], "model_path": src["model_path"], "system": src["system"], "backend": src["backend"],
                 "backend_version": src["backend_version"], "serving_mode": src["mode"], "isl": int(src["isl"]),
                 "osl": int(src["osl"]), "concurrency": p.get("concurrency", math.nan),
                 "band": _band(p["concurrency"]) if p.get("concurrency") else "", "mode": mode,
                 "model": p.get("model", ""), "hardware": p.get("hardware", ""),
                 "precision": ("/".join(p[k] for k in ("weights", "act", "kv"))
                               + (" (" + ", ".join(f"{g} {f}" for g, f in p["pins"]) + ")" if p.get("pins") else ""))
                              if "weights" in p else "",
                 "layout": _lay(p), "measured_ttft_ms": float(src["silicon_ttft_ms"]),
                 "measured_tpot_ms": float(src["silicon_tpot_ms"]), "predicted_ttft_ms": math.nan,
                 "predicted_tpot_ms": math.nan, "bound_ttft_ms": math.nan, "bound_tpot_ms": math.nan,
                 "request_rate": math.nan, "in_flight": math.nan,
                 "prefill_clients": math.nan, "decode_clients": math.nan,
                 "status": p["status"], "reason": p["reason"], "assumed": p["assumed"],
                 "workers": p.get("workers", ""), "speculative": p.get("speculative", ""),
                 "moe_backend": _moe_label(p)}
            out = results.get((mode, i))
            if isinstance(out, str):
                r.update(status="skipped", reason=out)
            elif out is not None:
                r.update(predicted_ttft_ms=out["ttft_s"] * 1e3, predicted_tpot_ms=out["tpot_s"] * 1e3,
                         in_flight=out["in_flight"], request_rate=out["request_rate"],
                         prefill_clients=out.get("prefill_clients", math.nan),  # a disagg point's split of the N
                         decode_clients=out.get("decode_clients", math.nan),  # clients (silicon_disagg.balance)
                         bound_ttft_ms=out.get("bound_ttft_s", math.nan) * 1e3,  # roofline: at the measured rate
                         bound_tpot_ms=out.get("bound_tpot_s", math.nan) * 1e3)
            rows.append(r)
    t = pd.DataFrame(rows)
    for k in ("ttft", "tpot"):
        t[f"{k}_error"] = (t[f"predicted_{k}_ms"] - t[f"measured_{k}_ms"]) / t[f"measured_{k}_ms"]
    return t


def measured_rate(row, p: dict) -> float | None:
    """The requests a second the measured run served (Little's law on its closed loop of N clients, each always
    waiting on a request: X = N / the mean time a request), a request's time being TTFT + (its output - 1) x TPOT
    (TPOT = (last - first token) / (output - 1)), with the mean output the benchmark drew (spread: the range's)."""
    osl = int(row["osl"])
    out = (int(osl * p["spread"]) + osl) / 2 if p.get("spread") is not None else osl
    t = float(row["silicon_ttft_ms"]) + ((out - 1.0) * float(row["silicon_tpot_ms"]) if out > 1 else 0.0)
    return p["concurrency"] / (t * 1e-3) if math.isfinite(t) and t > 0.0 else None


def _lay(p: dict) -> str:
    if "layout" not in p:
        return ""
    f = lambda l: (("tep" if l.experts == "ep" else "tp") + f"{l.tp}" + (f"xdp{l.ep}" if l.ep > 1 else "")  # noqa: E731
                   + (f"+r{l.redundant_experts}" if l.redundant_experts else ""))  # redundant expert slots
    if "decode_layout" in p:
        return f"{p['prefill_workers']}x{f(p['layout'])} + {p['decode_workers']}x{f(p['decode_layout'])}"
    return f(p["layout"])
