"""A discrete-event serving simulator on the engine's step cost: static vs continuous batching.

Requests arrive (all at t = 0, Poisson at a rate, or from a trace CSV) with prompt and output
lengths (fixed, uniform, lognormal with a median and a cap, or from the trace). A scheduler forms
each iteration's batch and the iteration takes the time the roofline engine gives for exactly that
batch: `engine.mixed_step(model, hw, T_seq, S_seq)`, where sequence i brings T_i new tokens and
attends to S_i tokens. Ops with weights run once over all tokens concatenated; attention runs per
sequence at its own context (Orca's selective batching). Nothing is a constant per step.

Policies (the same trace, the same slots):
- static (request-level, FasterTransformer / HF generate): when the server is idle it takes up to
  `slots` waiting sequences as one padded batch: one prefill iteration of every row at the longest
  prompt, then decode iterations of every row until the longest output is done (finished rows are
  padding that is still computed). Its requests return together when the batch ends (Orca §2.2:
  an early-finished request cannot return before its batch). The cache is one rectangle
  rows x (longest prompt + max_output), so the batch is sized so that it fits; the KV manager
  option does not apply (a padded batch tensor is not paged), and there are no preemptions.
- continuous (iteration-level, Orca): every iteration, finished sequences leave and waiting
  requests join in FIFO order while a slot is free and the KV manager (kvmemory.py) admits them.
  Prefill is either
  - chunked: prompt tokens ride in the same iteration as the decodes. With no token budget a whole
    prompt joins at once (Orca); with a budget, each iteration carries every decode plus prompt
    chunks up to the budget (Sarathi-Serve, vLLM chunked prefill). Decodes are never deferred.
  - separate: when a prompt is pending the iteration is prefill-only (whole prompts, FIFO, as many
    as the budget allows, at least one) and the decodes wait (vLLM without chunking, SGLang).
  - whole: every decode plus whole prompts, FIFO, up to the first that does not fit the budget left by
    the decodes; on an idle engine one prompt over the budget runs whole (TensorRT-LLM without chunked
    prefill, PyMicroBatchScheduler). Prompts are never split.
  ENGINE_PREFILL gives each engine's default.
  A paged cache allocates as tokens arrive; when a running request needs a block and none is free,
  the newest running request is preempted and recomputed later (vLLM's default): its cache is
  dropped, the tokens it generated stay generated, and on readmission it prefills prompt +
  generated tokens again (after a fork, each sample recomputes its own copy).

Samples: `samples = n` > 1 gives each request n samples of one prompt (output lengths drawn per
sample). Continuous batching prefills the prompt once and forks n sequences at its first token
(vLLM's sequence group); static batching runs n rows, each with the whole prompt (HF's
num_return_sequences). A group holds n slots from admission.

Times: TTFT = first token - arrival; end-to-end latency = return - arrival (for static batching the
batch's end); TPOT = (last token - first token) / (output - 1), over requests with output > 1 (for
samples, the longest). Throughput = generated tokens / (last return - first arrival).

Step-cost cache (so 10,000 requests take seconds): a batch composition is the multiset of
(T_i, S_i). Decode rows (T = 1) have their context rounded up to a multiple of `cost_quantum`
tokens (16 by default; 1 is exact), prefill rows are exact, and mixed_step is evaluated once per
distinct composition. So a decode row is charged at most quantum - 1 extra context tokens; the step
time is never below the exact one (for Llama 2 13B on an H100, 15 tokens of one row's context is
15 x 819,200 B / 3.35 TB/s = 3.7 us, against steps of 8 ms and more).
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from ..errors import SpecError
from ..ops import Precision
from ..specs import Hardware, Model
from .kvmemory import Contiguous, Group, KVSizes, Paged, kv_sizes
from .stepcost import StepCost
from .traffic import Traffic, _whole

POLICIES = ("static", "continuous")
PREFILL = ("chunked", "separate", "whole")
# how an engine batches prompts with decodes by default: SGLang runs prefill batches apart (enable_mixed_chunk off
# by default, server_args.py; its scheduler runs a waiting prefill batch before the decode batch,
# get_next_batch_to_run); vLLM V1 puts prompt chunks in the decode steps (chunked, the default here); TensorRT-LLM
# puts whole prompts in them, as many as fit the token budget in arrival order (enable_chunked_prefill defaults to
# False, llmapi/llm_args.py; PyMicroBatchScheduler without a chunk config breaks at the first that does not fit)
ENGINE_PREFILL = {"sglang": "separate", "trtllm": "whole"}


def engine_prefill(prefill, impl) -> str:
    """The prompt batching a run uses: `prefill` where given, else the implementation profile's engine's default
    (ENGINE_PREFILL; chunked for vLLM, a profile without an engine and the roofline)."""
    if prefill is not None:
        return prefill
    return ENGINE_PREFILL.get(getattr(impl, "engine", "") or "", "chunked")
MANAGERS = ("contiguous", "paged")


# ---------------------------------------------------------------- the simulator
@dataclass
class SimResult:
    """One policy's run: a summary row, one row per request and one per iteration (the timeline)."""

    summary: dict
    requests: dict
    timeline: dict


TIMELINE = ("step", "t_start_s", "duration_s", "kind", "rows", "decode_rows", "prefill_tokens", "generated",
            "running", "slots_used", "waiting", "kv_used_bytes", "kv_reserved_bytes", "kv_internal_bytes",
            "kv_future_bytes", "kv_external_bytes", "kv_saved_bytes", "preempted")


class _Sim:
    def __init__(self, tr: Traffic, sizes: KVSizes, cost: StepCost, slots, mem, concurrency=None):
        self.tr, self.sizes, self.cost, self.mem = tr, sizes, cost, mem
        # the send times: given (open loop), or, in a closed loop of N clients, the first N given and request
        # N + k sent the instant the k-th request returns (vLLM bench serve --max-concurrency, AIPerf --concurrency)
        self.arrival = np.array(tr.arrival, dtype=np.float64)
        self.issued = tr.n
        if concurrency is not None and concurrency < tr.n:
            self.issued = int(concurrency)
            self.arrival[self.issued:] = math.inf
        self.slots = math.inf if slots is None else slots
        prompts = tr.prompt + tr.shared_prefix
        self.groups = [Group(i, prompts[i], tr.outputs[i]) for i in range(tr.n)]
        self.log: list = []  # one tuple per iteration, in TIMELINE order
        self.t = float(tr.arrival[0]) if tr.n else 0.0
        self.generated = 0
        self.n_done, self.progress = 0, None  # progress(requests done): called now and then (a progress bar)

    def returned(self, t: float, k: int = 1) -> None:
        """k requests returned at t: in a closed loop their clients send their next requests now."""
        k = min(k, self.tr.n - self.issued)
        if k > 0:
            self.arrival[self.issued:self.issued + k] = t
            self.issued += k

    def record(self, dt, kind, rows, dec, pre_tok, gen, running, slots_used, waiting, kv, preempted):
        if self.progress is not None and not len(self.log) % 256:
            self.progress(self.n_done)
        self.log.append((len(self.log), self.t, dt, kind, rows, dec, pre_tok, gen, running, slots_used, waiting,
                         *kv, preempted))

    # -- static: one padded batch at a time ------------------------------------------
    def static(self, max_output: int) -> None:
        tr, sz, groups, arrival = self.tr, self.sizes, self.groups, self.arrival
        nxt, waiting = 0, deque()
        while nxt < tr.n or waiting:
            while nxt < tr.n and arrival[nxt] <= self.t:
                waiting.append(groups[nxt])
                nxt += 1
            if not waiting:
                self.t = float(arrival[nxt])
                continue
            batch, rows, pmax = [], 0, 0
            while waiting:  # up to `slots` rows whose padded rectangle fits; the first always fits (checked)
                g = waiting[0]
                r, p = rows + len(g.outs), max(pmax, g.prompt)
                L = min(sz.max_context, p + max_output)
                if batch and (r > self.slots or sz.bytes(r * L, r) > sz.capacity):
                    break
                batch.append(waiting.popleft())
                rows, pmax = r, p
            L = min(sz.max_context, pmax + max_output)
            reserved = sz.bytes(rows * L, rows)
            outs = np.concatenate([g.outs for g in batch])
            prompts = np.concatenate([[g.prompt] * len(g.outs) for g in batch])
            k = np.arange(int(outs.max()))  # k = 0: prefill of every row at the longest prompt; then decodes
            dt = np.array([self.cost.same(pmax, pmax, rows)] + [self.cost.same(1, pmax + j, rows) for j in range(1, k.size)])
            gen = np.sum(outs[None, :] > k[:, None], axis=1)  # rows past their output produce padding
            held = sz.bytes(np.sum(prompts[None, :] + np.minimum(k[:, None] + 1, outs[None, :]), axis=1), rows)
            start = self.t + np.concatenate([[0.0], np.cumsum(dt)[:-1]])
            end = start + dt
            n = k.size
            self.log.extend(zip(range(len(self.log), len(self.log) + n), start, dt,
                                ["prefill"] + ["decode"] * (n - 1), [rows] * n, [0] + [rows] * (n - 1),
                                [rows * pmax] + [0] * (n - 1), gen, [rows] * n, [rows] * n, [len(waiting)] * n,
                                held, [reserved] * n, reserved - held, [0.0] * n, [0.0] * n, [0.0] * n, [0] * n))
            self.generated += int(gen.sum())
            for g in batch:
                g.first, g.last = end[0], end[max(g.outs) - 1]
            self.t = float(end[-1])
            for g in batch:
                g.done = self.t
                g.completions += 1
            self.returned(self.t, len(batch))
            self.n_done += len(batch)
            if self.progress is not None:
                self.progress(self.n_done)

    # -- continuous: iteration-level scheduling ----------------------------------------
    def continuous(self, prefill: str, budget) -> None:
        tr, mem, groups, arrival = self.tr, self.mem, self.groups, self.arrival
        budget = math.inf if budget is None else budget
        nxt, waiting, running = 0, deque(), []
        used_slots = 0
        ahead = self.cost.ahead  # an overlap scheduler (fastsim.run's ahead)
        prev = None  # then: the start of the iteration before, while the engine is busy
        while True:
            seen = self.t if prev is None else prev  # the batch is formed as the iteration before it starts
            while nxt < tr.n and arrival[nxt] <= seen:
                waiting.append(groups[nxt])
                nxt += 1
            if not running and not waiting:
                if nxt >= tr.n:
                    break
                self.t = max(self.t, float(arrival[nxt]))  # an idle engine takes a request at once
                prev = None
                continue
            # room for every running group's held tokens, oldest first; a shortage preempts the newest
            preempted, i = 0, 0
            while True:
                i = mem.update_from(running, i)  # update() on each, oldest first, until one has no room
                if i >= len(running):
                    break
                v = running.pop()
                mem.release(v)
                v.reset()
                used_slots -= v.slots
                waiting.appendleft(v)  # victims leave newest first, so the queue stays in arrival order
                preempted += 1
            # admission: FIFO, while a slot is free and the KV manager has room
            while not preempted and waiting and used_slots + waiting[0].slots <= self.slots and mem.admit(waiting[0]):
                g = waiting.popleft()
                running.append(g)
                used_slots += g.slots
                if mem.sys_ready:  # prefix cache: the shared system prompt's blocks are already computed
                    for s in g.seqs:
                        s.ctx = max(s.ctx, mem.sys_tokens)
            # the iteration's batch
            seqs = [s for g in running for s in g.seqs]
            todo = [s.known - s.ctx for s in seqs]  # Seq.left, inlined: tokens before each one's next token
            if prefill == "separate" and any(x > 1 for x in todo):
                rows, left = [], budget
                for s, x in zip(seqs, todo):
                    if x <= 1:
                        continue
                    if rows and x > left:
                        break  # FIFO: whole prompts while the budget lasts, at least one
                    rows.append((s, x))
                    left -= x
                kind, dec, pre_tok = "prefill", 0, sum(c for _, c in rows)  # every row is a prompt (x > 1)
            else:
                rows = [(s, 1) for s, x in zip(seqs, todo) if x == 1]
                left, dec, pre_tok = budget - len(rows), len(rows), 0
                for s, x in zip(seqs, todo):
                    if x > 1 and left > 0:
                        if prefill == "whole":  # whole prompts, FIFO, until one does not fit
                            if x > left and (rows or pre_tok):
                                break
                            rows.append((s, x))  # on an idle engine a prompt over the budget runs whole
                            left -= x
                            pre_tok += x
                            continue
                        c = int(min(x, left))
                        rows.append((s, c))
                        left -= c
                        if c == 1:  # a one-token chunk counts as a decode row
                            dec += 1
                        else:
                            pre_tok += c
                kind = "decode" if dec == len(rows) else "mixed"
            dt = self.cost([(c, s.ctx + c) for s, c in rows])
            t_end = self.t + dt
            gen, finished = 0, []
            for s, c in rows:
                s.ctx += c
                if mem.sys_tokens and not mem.sys_ready and s.ctx >= mem.sys_tokens:
                    mem.sys_ready = True  # the shared prefix is computed: later requests skip it
                if s.ctx < s.known:
                    continue
                g = s.group  # the sequence produced a token
                if g.first < 0:
                    g.first = t_end
                g.last = t_end
                if s.out is None:  # a prompt's first token: fork into its samples
                    new = g.fork()
                    gen += len(new)
                    finished += [x for x in new if x.out == 1]
                else:
                    s.known += 1
                    s.gen += 1
                    gen += 1
                    if s.gen == s.out:
                        finished.append(s)
            for s in finished:
                g = s.group
                g.seqs.remove(s)
                used_slots -= 1
                mem.drop(g, s)  # its own memory goes back at once
                if not g.seqs:
                    mem.release(g)
                    running.remove(g)
                    g.done = t_end
                    self.n_done += 1
                    g.completions += 1
                    self.returned(t_end)
            self.record(dt, kind, len(rows), dec, pre_tok, gen,
                        sum(len(g.seqs) for g in running), used_slots, len(waiting),
                        mem.snapshot(waiting[0] if waiting else None), preempted)
            if ahead:
                prev = self.t
            self.t = t_end
            self.generated += gen

    def result(self, policy: str, label: dict, warmup: int = 0) -> SimResult:
        gs = self.groups
        return result(self.tr, self.arrival, np.array([g.first for g in gs]), np.array([g.last for g in gs]),
                      np.array([g.done for g in gs]), np.array([g.preemptions for g in gs]),
                      np.array([g.completions for g in gs]), self.log, self.generated, self.cost.mode, self.cost.calls,
                      self.sizes, policy, label, warmup)


def result(tr: Traffic, arrival, first, last, done, preemptions, completions, log_rows: list, generated: int, mode: str,
           calls: int, sizes: KVSizes, policy: str, label: dict, warmup: int = 0) -> SimResult:
    """The SimResult of a run: per-request times and the iteration log (TIMELINE tuples) summarized; shared by
    _Sim and fastsim.run's log (serve_runs' continuous runs)."""
    longest = tr.outputs.max(axis=1)
    lat, ttft = done - arrival, first - arrival
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(longest > 1, (last - first) / (longest - 1), np.nan)
    w = slice(warmup, None)  # the measured requests: all, or those after the warm-up
    span = float(done[w].max() - arrival[w].min())
    cols = list(zip(*log_rows)) if log_rows else [()] * len(TIMELINE)
    log = {k: np.asarray(v, dtype=object if k == "kind" else np.float64) for k, v in zip(TIMELINE, cols)}
    busy = np.sum(log["duration_s"])

    def tmean(col):  # time-weighted over the iterations (exact for a constant column)
        x = log[col]
        if busy <= 0:
            return 0.0
        return float(x.min() + np.sum((x - x.min()) * log["duration_s"]) / busy)

    def pct(x, q):
        x = x[np.isfinite(x)]
        return float(np.percentile(x, q)) if x.size else float("nan")

    tokens = generated if not warmup else int(tr.outputs[w].sum())
    s = {"policy": policy, "mode": mode, **label, "requests": tr.n, "sequences": int(tr.outputs.size),
         "tokens": tokens, "makespan_s": span, "throughput_tok_s": tokens / span if span > 0 else math.nan}
    if warmup:
        s["warmup"] = warmup
    s.update(little(arrival[w], done[w]))
    for name, x in (("latency", lat[w]), ("ttft", ttft[w]), ("tpot", tpot[w])):
        fin = x[np.isfinite(x)]
        s[f"mean_{name}_s"] = float(fin.mean()) if fin.size else float("nan")
        for q in (50, 90, 99):
            s[f"p{q}_{name}_s"] = pct(x, q)
    s.update(steps=len(log["step"]), preemptions=int(np.sum(preemptions)),
             mean_running=tmean("running"), peak_running=float(np.max(log["running"], initial=0)),
             kv_capacity_bytes=sizes.capacity,
             peak_kv_reserved_bytes=float(np.max(log["kv_reserved_bytes"], initial=0)),
             mean_kv_used_bytes=tmean("kv_used_bytes"), mean_kv_reserved_bytes=tmean("kv_reserved_bytes"),
             mean_kv_internal_bytes=tmean("kv_internal_bytes"), mean_kv_future_bytes=tmean("kv_future_bytes"),
             mean_kv_external_bytes=tmean("kv_external_bytes"), mean_kv_saved_bytes=tmean("kv_saved_bytes"),
             step_evaluations=calls)
    reqs = {"request": np.arange(tr.n), "arrival_s": arrival, "prompt_tokens": tr.prompt + tr.shared_prefix,
            "output_tokens": tr.outputs.sum(axis=1), "samples": np.full(tr.n, tr.outputs.shape[1]),
            "first_token_s": first, "last_token_s": last, "done_s": done, "ttft_s": ttft, "latency_s": lat,
            "tpot_s": tpot, "preemptions": np.asarray(preemptions),
            "completions": np.asarray(completions)}
    return SimResult(s, reqs, log)


def little(sent: np.ndarray, done: np.ndarray) -> dict:
    """Request rate X = n / (last return - first send) over the measured requests, and their mean number in
    flight over that window, sum(E2E) / window: Little's law L = X x mean E2E, an identity over a window that
    holds every measured request whole. In a closed loop of N clients L = N, less the ramp and drain at the
    window's ends (each at most the longest E2E: within 2 max(E2E) / window of N)."""
    span = float(done.max() - sent.min()) if sent.size else 0.0
    if not span > 0:
        return {"request_rate": math.nan, "mean_in_flight": math.nan}
    return {"request_rate": sent.size / span, "mean_in_flight": float(np.sum(done - sent)) / span}


def simulate(model: Model, hw: Hardware, traffic: Traffic, policy: str = "continuous", slots=8,
             kv_manager: str = "paged", block_size: int = 16, sharing: bool = True, prefill: str = "chunked",
             token_budget=None, prec: Precision | None = None, cost_quantum: int = 16,
             cost: StepCost | None = None, layout=None, concurrency=None, warmup: int = 0, progress=None) -> SimResult:
    """Run one policy over a traffic (make_traffic) on one model and device.

    concurrency=N: a closed loop of N clients, each sending its next request the instant its previous one
    returns (the traffic's first N arrival times are kept, the rest are the return times). warmup=W: the first
    W requests run but are left out of the summary (AIPerf's --warmup-request-count)."""
    prec = prec or Precision()
    for opt, v, ok in (("--policy", policy, POLICIES), ("--kv-manager", kv_manager, MANAGERS),
                       ("--prefill", prefill, PREFILL)):
        if v not in ok:
            raise SpecError(opt, None, f"must be one of {', '.join(ok)}, got {v!r}")
    slots = None if slots is None else _whole(slots, "--slots")
    budget = None if token_budget is None else _whole(token_budget, "--token-budget")
    sizes = kv_sizes(model, hw, prec, layout)
    cost = cost or StepCost(model, hw, prec, cost_quantum, layout)
    if kv_manager == "paged":
        mem = Paged(sizes, _whole(block_size, "--block-size"), sharing, traffic.shared_prefix)
    else:
        mem = Contiguous(sizes, traffic.max_output)
    conc = None if concurrency is None else _whole(concurrency, "--concurrency")
    warm = _whole(warmup, "--warmup", 0)
    if warm >= traffic.n:
        raise SpecError("--warmup", None, f"{warm} warm-up requests leave none of the {traffic.n} to measure")
    sim = _Sim(traffic, sizes, cost, slots, mem, conc)
    sim.progress = progress
    if kv_manager == "contiguous":
        mem.min_region = min(sizes.bytes(mem.region_tokens(g)) for g in sim.groups)
    unfit = _check(sim, traffic, model, policy, slots)
    label = (run_label("padded", "batch", None, conc, slots) if policy == "static" else
             run_label(kv_manager + ("+shared" if kv_manager == "paged" and sharing else ""), prefill, budget, conc,
                       slots))
    if unfit:
        return does_not_fit(traffic, cost.mode, sizes, policy, label, warm, unfit)
    if policy == "static":
        sim.static(traffic.max_output)
    else:
        sim.continuous(prefill, budget)
    return sim.result(policy, label, warm)


def _check(sim: _Sim, tr: Traffic, model: Model, policy: str, slots) -> str:
    """Every request must be able to run alone: within max_context and its samples within the slots (else bad input,
    SpecError), and its cache within the memory left after the weights (else the run does not fit: the reason, a
    result; "" when every request fits)."""
    sz = sim.sizes
    for g, where in zip(sim.groups, tr.where):
        longest = max(g.outs)
        if g.prompt + longest > sz.max_context:
            raise SpecError(where, None, f"prompt {g.prompt} + output {longest} tokens exceed {model.name}'s "
                                         f"max_context ({sz.max_context})")
        if slots is not None and len(g.outs) > slots:
            raise SpecError("--samples", None, f"{len(g.outs)} samples need {len(g.outs)} slots; --slots is {slots}")
        n = len(g.outs)
        alone = (sz.bytes(n * min(sz.max_context, g.prompt + tr.max_output), n) <= sz.capacity
                 if policy == "static" else sim.mem.fits_alone(g))
        if not alone:
            return unfit_reason(where, sz, model)
    return ""


def run_label(kv_manager: str, prefill: str, budget, conc, slots) -> dict:
    """A run's label columns: its KV manager, its prefill (with the token budget), the clients, the slots."""
    label = {"kv_manager": kv_manager, "prefill": prefill if budget is None else f"{prefill}/{budget}"}
    if conc is not None:
        label["concurrency"] = conc
    label["slots"] = math.inf if slots is None else slots
    return label


def unfit_reason(where: str, sizes: KVSizes, model: Model) -> str:
    """Why a run does not fit: the request whose cache alone exceeds the memory the weights leave."""
    return f"{where}: its KV cache does not fit in the {sizes.capacity:.4g} B left after {model.name}'s weights"


def does_not_fit(tr: Traffic, mode: str, sizes: KVSizes, policy: str, label: dict, warmup: int,
                 reason: str) -> SimResult:
    """"Does not fit" as a result, not an error: a request that cannot run even alone on the device leaves every
    time and rate of the run undefined (NaN, no request served, no iteration); the summary's does_not_fit says
    which request and why."""
    nan = np.full(tr.n, np.nan)
    none = np.zeros(tr.n, dtype=np.int64)
    r = result(tr, np.asarray(tr.arrival, dtype=np.float64), nan, nan, nan, none, none, [], 0, mode, 0, sizes, policy,
               label, warmup)
    r.summary.update(tokens=0, does_not_fit=reason)
    return r
