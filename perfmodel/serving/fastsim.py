"""A vectorized twin of the continuous-batching simulator, for searches that run it many times (capacity).

scheduler._Sim walks every running sequence in Python at every iteration (admission, KV updates, the
batch, the tokens produced), and StepCost keys its cache on the whole batch composition, which is new at
almost every iteration of a large batch: a 256-sequence iteration costs about 0.6 ms of Python. A
goodput search simulates a few dozen traces of thousands of requests, so this module keeps the same
scheduler in numpy arrays (one row per request) and prices the iteration without a per-composition cache.

What it simulates is exactly scheduler._Sim.continuous for one sample per request, no shared system
prompt and the paged KV manager (kvmemory.Paged), with either prefill mode:
- the same iteration-level decisions, in the same order: arrivals join a FIFO queue; every running
  request gets the block its next token needs, oldest first, and a shortage preempts the newest (its
  cache dropped, recomputed on readmission); waiting requests join while a slot is free and the blocks
  of their held tokens fit; the batch is every decode plus prompt chunks up to the token budget
  (chunked), every decode plus the whole prompts that fit the budget, first come first served up to the first
  that does not (whole: TensorRT-LLM without chunked prefill, PyMicroBatchScheduler), or prefill-only iterations
  of whole prompts up to the budget (separate);
- optionally, requests that arrive with their prompt's KV cache already computed and their first token
  produced elsewhere (`prefilled=True`): the decode pool of a disaggregated server.
With `exact_cost` (StepCost itself) it gives the per-request times of scheduler.simulate bit for bit
(tests/test_capacity.py checks it on traces with preemptions, both prefill modes and token budgets).

The step cost (FastCost, ExactCost) lives in fastcost.py and is re-exported here.
"""
from __future__ import annotations

import math
from collections import deque

import numpy as np

from .fastcost import ExactCost, FastCost  # noqa: F401  (re-exported: fastsim.FastCost is the documented name)
from .kvmemory import KVSizes


def fits_alone(sizes: KVSizes, block: int, prompt, out) -> np.ndarray:
    """kvmemory.Paged.fits_alone for one-sample requests: the blocks of prompt + output - 1 held tokens."""
    need = -(-(np.asarray(prompt) + np.asarray(out) - 1) // block)
    bb = sizes.per_token * block
    return need * bb + sizes.per_seq <= sizes.capacity


def run(arrival, prompt, out, sizes: KVSizes, cost, slots=None, budget=None, prefill: str = "chunked",
        block: int = 16, prefilled: bool = False, stop: dict | None = None, every: int = 16,
        concurrency: int | None = None, leap: bool = True, log: list | None = None, progress=None,
        wait: tuple | None = None, balance: tuple | None = None, recv: int | None = None,
        ahead: bool = False) -> dict:
    """Continuous batching with the paged KV manager over requests sorted by arrival (see the module docstring).

    prefilled=True: each request arrives with its prompt's cache computed and its first token produced
    (a disaggregated decode pool): it holds prompt + 1 tokens and decodes out - 1 more (one with out = 1 is done on
    arrival and never holds the cache; in a closed loop its client sends the next request then, or when the last
    request was sent if that is later, so that the sends stay in order: under `ahead` up to an iteration late).
    stop: {"window": slice, "ttft": s, "tpot": s, "q": percentile} ends the run as soon as the verdict on the
    window's requests is certain (checked every `every` iterations): when all of them are done (the result
    "stopped" None), or when so many already exceed an SLO that the q-th percentile must ("stopped" "ttft"
    or "tpot"): a request still waiting has a TTFT of at least now - arrival, one still decoding a TPOT of
    at least (now - first) / (out - 1), and percentile q of n values is at least the floor((n-1)q/100)-th
    smallest. Returns per-request first/last/done times (s), preemptions, and run statistics.

    The running requests live in arrays of their own, in admission order (the scheduler's `running`):
    rid (request), rK (tokens held: prompt + generated, kvmemory's `known`), rC (tokens whose K, V are
    computed: `ctx`), rG (generated), rO (to generate), rH (blocks recorded), rF (first token out).

    concurrency=N: a closed loop of N clients (vLLM `bench serve --max-concurrency`, AIPerf `--concurrency`):
    the first N requests arrive at their given times, and request N + k is sent the instant the k-th
    request finishes (no think time). The returned "arrival" holds the times the requests were sent.

    log: a list that receives scheduler.TIMELINE's tuple for every iteration, as scheduler._Sim records it (its
    KV columns: Paged.snapshot without a shared prefix); decode runs are then simulated one iteration at a time.
    progress(requests done): called every 256 iterations (a progress bar).

    wait=(iters, tokens): TensorRT-LLM's batch waiting (batch_wait_timeout_iters, batch_wait_max_tokens_ratio x
    max_num_tokens), chunked prefill only: in an iteration that would run both decodes and prompt chunks, the prompts
    are held back (a decode-only iteration) while fewer than `iters` iterations have held them since they last ran
    and their whole prompts' tokens plus the decodes' are below `tokens` (RequestScheduler._apply_batch_waiting,
    tensorrt_llm/_torch/pyexecutor/scheduler; not under attention DP, which balances its ranks instead). The
    scheduler._Sim twin has no such option.
    balance=(ranks, iters[, batching]): TensorRT-LLM's attention-DP balancing (attention_dp_config enable_balance,
    timeout_iters, batching_wait_iters), chunked prefill only: prompts are held back while fewer prompts than `ranks`
    are ready (one on every rank, the router spreading them evenly), every rank has a decode (at least `ranks` of
    them) and fewer than `iters` iterations have held them; once every rank has one, they wait `batching` more
    iterations while every rank decodes (RequestScheduler._balance_adp_context_requests).
    recv=k: SGLang's --scheduler-recv-interval k (SchedulerRecvSkipper, managers/scheduler_recv_skipper.py): the
    scheduler takes new requests off its socket only when a counter reaches k; each loop adds the weight of the
    batch it last ran, 1 for a decode batch and 1000 for any other (_WEIGHT_OF_FORWARD_MODE, _DEFAULT_WEIGHT), and
    the counter restarts at 0 when it takes them. So during decoding a request waits up to k - 1 iterations to be
    seen; after a prefill iteration, or on an idle engine (whose loop spins), it is seen at once.
    ahead=True: an overlap ("async") scheduler, which forms iteration i + 1's batch while iteration i runs (SGLang's
    event_loop_overlap, vLLM's AsyncScheduler, TensorRT-LLM's overlap scheduler: "introduces one extra decoding
    step"): iteration i's batch takes the requests that arrived before iteration i - 1 started, so a request
    arriving during iteration i - 1 first runs in iteration i + 1; on an idle engine it is taken at once."""
    arrival = np.array(arrival, dtype=np.float64)  # a copy: a closed loop writes the send times into it
    n = arrival.size
    issued = n
    if concurrency is not None and concurrency < n:
        issued = int(concurrency)
        arrival[issued:] = math.inf  # sent when an earlier request finishes
    P = np.asarray(prompt, dtype=np.int64)
    O = np.asarray(out, dtype=np.int64)
    known = P + (1 if prefilled else 0)  # for waiting requests (a preempted one keeps what it generated)
    gen = np.full(n, 1 if prefilled else 0, dtype=np.int64)
    ctx0 = P.copy() if prefilled else np.zeros(n, dtype=np.int64)  # computed tokens on (re)admission
    first = np.full(n, -1.0)
    last = np.full(n, -1.0)
    done = np.full(n, -1.0)
    preempt = np.zeros(n, dtype=np.int64)
    slots = math.inf if slots is None else slots
    budget_f = math.inf if budget is None else budget
    b = int(block)
    bm1 = b - 1
    bb = sizes.per_token * b
    ps, cap = sizes.per_seq, sizes.capacity
    blocks = 0  # blocks held in all (Paged.blocks)
    nseq = 0
    e = np.zeros(0, dtype=np.int64)
    rid, rK, rC, rG, rO, rH = e, e, e, e, e, e
    rF = np.zeros(0, dtype=bool)
    waiting: deque = deque()
    nxt = 0
    t = float(arrival[0]) if n else 0.0
    steps = generated = 0
    peak_running = peak_blocks = 0
    mem_stalls = slot_stalls = preemptions = 0
    busy = 0.0
    ones: dict = {}
    held_iters = 0  # TensorRT-LLM's _batch_wait_iters_count (_adp_ctx_waiting_iters_count under balance)
    w_iters, w_tokens = (0, 0.0) if wait is None else (int(wait[0]), float(wait[1]))
    b_ranks, b_iters, b_batch = (0, 0, 0) if balance is None else (int(balance[0]), int(balance[1]),
                                                                   int(balance[2]) if len(balance) > 2 else 0)
    batch_iters = 0  # TensorRT-LLM's _adp_ctx_batching_wait_iters_count
    recv = int(recv) if recv and recv > 1 else 0  # SGLang: <= 1 is no skipper (SchedulerRecvSkipper.maybe_create)
    r_count, r_weight, seen = 0, recv, t  # its counter, the weight the next loop adds, arrivals taken up to `seen`
    prev = None  # ahead: the start of the iteration before, while the engine is busy (None: idle)
    at_once = prefilled and bool((O <= 1).any())

    def free():
        return cap - blocks * bb - nseq * ps

    def send(at):
        """Closed loop: the clients of requests that finished at times `at` send their next ones then, or when the
        last request was sent if that is later (the arrivals stay in order for searchsorted)."""
        nonlocal issued
        k = min(int(at.size), n - issued)
        if k > 0:
            arrival[issued:issued + k] = np.maximum(at[:k], arrival[issued - 1] if issued else -math.inf)
            issued += k

    leap = stop is None and log is None and leap and getattr(cost, "decode_steps", None) is not None
    pt = sizes.per_token
    dec_only = getattr(cost, "decode_only", None)

    stopped = None
    n_done = 0  # requests finished, for progress(n_done)
    if stop is not None:
        w = stop["window"]
        lo, hi = w.start, w.stop
        q = stop["q"]
        nw = hi - lo
        need_t = nw - math.floor((nw - 1) * q / 100) if nw else math.inf
        multi = O[lo:hi] > 1
        nd = int(multi.sum())
        need_d = nd - math.floor((nd - 1) * q / 100) if nd else math.inf
        a_w, o_w = arrival[lo:hi], np.maximum(O[lo:hi] - 1, 1)

    while True:
        now = t if prev is None else prev  # ahead: this batch was formed as the iteration before it started
        if recv:
            r_count += r_weight
            if r_count >= recv:
                r_count, seen = 0, now
        else:
            seen = now
        if nxt < n and arrival[nxt] <= seen:
            j = int(np.searchsorted(arrival, seen, side="right"))
            if at_once:  # prefilled with one output token: it came done (its only token made by the prefill pool)
                idx = np.arange(nxt, j)
                z = idx[O[idx] <= 1]
                first[z] = last[z] = done[z] = arrival[z]
                n_done += int(z.size)
                send(arrival[z])  # closed loop: their clients send their next requests now
                waiting.extend(idx[O[idx] > 1].tolist())
            else:
                waiting.extend(range(nxt, j))
            nxt = j
        m = rid.size
        if not m and not waiting:
            if nxt >= n:
                break
            if not math.isfinite(arrival[nxt]):  # closed loop with nothing in flight: cannot happen
                raise RuntimeError("closed loop: no request in flight and none sent")
            t = max(t, float(arrival[nxt]))
            r_weight = recv  # an idle loop spins: the request is taken at once
            prev = None
            continue
        # every running request gets the blocks of its held tokens, oldest first; a shortage preempts the newest
        preempted = 0
        if m:
            need = (rK + bm1) // b
            tot = int(need.sum()) - int(rH.sum())
            f0 = free()
            if (tot == 0 and not 0.0 > f0) or (tot > 0 and tot * bb * (1 + 1e-9) + 1.0 < f0):
                rH = need
                blocks += tot
            else:  # the exact sequential walk of Paged.update_from, with preemptions
                i = 0
                K_l, H_l = rK.tolist(), rH.tolist()
                while True:
                    fr = None
                    while i < m:
                        nb = -(-K_l[i] // b)
                        ob = H_l[i]
                        if nb == ob:
                            if fr is None:
                                fr = free()
                            if 0.0 > fr:
                                break
                        else:
                            if (nb * bb + ps) - (ob * bb + ps) > free():
                                break
                            blocks += nb - ob
                            H_l[i] = nb
                            fr = None
                        i += 1
                    if i >= m:
                        break
                    m -= 1  # the newest leaves: its cache is dropped, what it generated stays generated
                    v = int(rid[m])
                    blocks -= H_l.pop()
                    K_l.pop()
                    nseq -= 1
                    known[v], gen[v], ctx0[v] = rK[m], rG[m], 0
                    preempt[v] += 1
                    waiting.appendleft(v)
                    preempted += 1
                rH = np.asarray(H_l, dtype=np.int64)
                rid, rK, rC, rG, rO, rF = rid[:m], rK[:m], rC[:m], rG[:m], rO[:m], rF[:m]
                preemptions += preempted
        # admission: FIFO while a slot is free and the blocks of the head's held tokens fit
        if not preempted and waiting:
            new = []
            while waiting and m + 1 <= slots:
                h = waiting[0]
                nb = -(-int(known[h]) // b)
                if nb * bb + ps + 0.0 > free():
                    mem_stalls += 1
                    break
                waiting.popleft()
                new.append((h, nb))
                blocks += nb
                nseq += 1
                m += 1
            else:
                if waiting:
                    slot_stalls += 1
            if new:
                ids = np.fromiter((x for x, _ in new), dtype=np.int64, count=len(new))
                rid = np.concatenate([rid, ids])
                rK = np.concatenate([rK, known[ids]])
                rC = np.concatenate([rC, ctx0[ids]])
                rG = np.concatenate([rG, gen[ids]])
                rO = np.concatenate([rO, O[ids]])
                rH = np.concatenate([rH, np.fromiter((y for _, y in new), dtype=np.int64, count=len(new))])
                rF = np.concatenate([rF, first[ids] >= 0])
        # the iteration's batch
        if log is not None:
            K0, held0 = rK.copy(), int(rK.sum())
        todo = rK - rC
        top = int(todo.max())
        if top == 1 and leap and not preempted and rF.all():
            # decodes only, every row past its first token: the iterations before the next finish are the same
            # rows a context longer each; they are priced at once while no arrival, block or finish intervenes
            k = int((rO - rG).min()) - 1
            if k >= 2 and (nxt >= n or arrival[nxt] > t):
                grow = int(((rK + k + bm1) // b).sum()) - int(rH.sum())
                dts = cost.decode_steps(rC + 1, k) if grow * bb * (1 + 1e-9) + 1.0 < free() else None
                if dts is not None:
                    if nxt < n:  # an arrival joins before the first iteration that starts at or after it (ahead:
                        # the one after that; `prev` stays as it was, before the arrival, so the loop runs that one)
                        starts = t + np.concatenate([[0.0], np.cumsum(dts)[:-1]])
                        k = max(1, int(np.searchsorted(starts[1:], arrival[nxt], side="left")) + 1)
                        dts = dts[:k]
                    for dt in dts.tolist():  # the clock advances as the per-iteration loop advances it
                        t += dt
                    busy += float(np.sum(dts))
                    rC, rK, rG = rC + k, rK + k, rG + k
                    if recv:  # the k - 1 loops after this one each added 1 (no request arrived meanwhile)
                        r_count, r_weight = (r_count + k - 1) % recv, 1
                    last[rid] = t
                    generated += m * k
                    steps += k
                    if progress is not None:  # the calls the loop would make at the iterations 256 j it leapt over
                        for _ in range(steps // 256 - (steps - k) // 256):
                            progress(n_done)
                    peak_running = max(peak_running, m)
                    continue
        if top == 1:  # decodes only: every running request brings one token
            S = rC + 1
            if dec_only is not None:
                dt = dec_only(S)
            else:
                T = ones.get(m)
                if T is None:
                    T = ones[m] = np.ones(m, dtype=np.int64)
                dt = cost(T, S)
            t_end = t + dt
            rC = S
            madepos = None
            r_weight = 1  # a decode batch
        else:
            many = todo > 1
            if prefill == "separate":
                pi = np.flatnonzero(many)
                cs = np.cumsum(todo[pi])
                k = max(int(np.searchsorted(cs, budget_f, side="right")), 1)
                pos, T = pi[:k], todo[pi[:k]]
            else:
                dpos = np.flatnonzero(~many)
                left = budget_f - dpos.size
                if left > 0:
                    pi = np.flatnonzero(many)
                    x = todo[pi]
                    if prefill == "whole":  # no chunking: whole prompts, FIFO, until one does not fit
                        keep = np.logical_and.accumulate(np.cumsum(x) <= left)
                        if not keep.any() and not dpos.size:
                            keep[0] = True  # one prompt over the budget on an idle engine runs whole
                        c = np.where(keep, x, 0)
                    else:
                        c = np.clip(left - (np.cumsum(x) - x), 0, x).astype(np.int64)
                        keep = c > 0
                    if wait is not None and dpos.size and keep.any():  # ctx and gen requests both scheduled
                        if held_iters < w_iters and int(rK[pi[keep]].sum()) + dpos.size < w_tokens:
                            held_iters += 1
                            keep[:] = False  # the prompts wait: a decode-only iteration
                        else:
                            held_iters = 0
                    elif balance is not None and keep.any():
                        if int(np.count_nonzero(keep)) >= b_ranks:  # a prompt on every rank: they run, or batch
                            held_iters = 0
                            if dpos.size >= b_ranks:  # every rank decodes too: wait up to b_batch iterations
                                if batch_iters < b_batch:
                                    batch_iters += 1
                                    keep[:] = False
                                else:
                                    batch_iters = 0
                        else:
                            held_iters += 1
                            if held_iters >= b_iters or dpos.size < b_ranks:  # the timeout, or a rank idle
                                held_iters = 0
                            else:
                                keep[:] = False
                    pos = np.concatenate([dpos, pi[keep]])
                    T = np.concatenate([np.ones(dpos.size, dtype=np.int64), c[keep]])
                else:
                    pos, T = dpos, np.ones(dpos.size, dtype=np.int64)
            if not pos.size:
                raise RuntimeError("an iteration with no rows: a request that cannot run alone was admitted")
            S = rC[pos] + T
            dt = cost(T, S)
            t_end = t + dt
            rC[pos] = S
            madepos = pos[S >= rK[pos]]
            r_weight = 1 if int(T.max()) == 1 else 1000  # a decode batch, or one with a prompt
        peak_running = max(peak_running, m)
        # the tokens produced
        if madepos is None:
            made = rid
            if not rF.all():
                fresh = ~rF
                first[rid[fresh]] = t_end
                rF = np.ones(m, dtype=bool)
            last[rid] = t_end
            rK = rK + 1
            rG = rG + 1
            fin = np.flatnonzero(rG == rO)
            generated += m
        elif madepos.size:
            made = rid[madepos]
            fr_ = madepos[~rF[madepos]]
            if fr_.size:
                first[rid[fr_]] = t_end
                rF[fr_] = True
            last[made] = t_end
            rK[madepos] += 1
            rG[madepos] += 1
            fin = madepos[rG[madepos] == rO[madepos]]
            generated += madepos.size
        else:
            fin = e
        if fin.size:
            blocks -= int(rH[fin].sum())
            nseq -= fin.size
            done[rid[fin]] = t_end
            n_done += int(fin.size)
            if issued < n:  # closed loop: each finished request's client sends its next one now
                send(np.full(fin.size, t_end))
            keep = np.ones(m, dtype=bool)
            keep[fin] = False
            rid, rK, rC, rG, rO, rH, rF = rid[keep], rK[keep], rC[keep], rG[keep], rO[keep], rH[keep], rF[keep]
        if log is not None:  # scheduler._Sim.record's tuple: held tokens as the blocks were last updated
            if madepos is None:
                rows_n, dec_n, pre_tok, gen_n = m, m, 0, m
            else:
                rows_n, dec_n = int(pos.size), int(np.count_nonzero(T == 1))
                pre_tok, gen_n = int(T[T > 1].sum()), int(madepos.size)
            held = held0 - (int(K0[fin].sum()) if fin.size else 0)
            used, reserved = held * pt + nseq * ps, blocks * bb + nseq * ps
            log.append((steps, t, dt, "decode" if dec_n == rows_n else ("prefill" if prefill == "separate" else
                                                                        "mixed"), rows_n, dec_n, pre_tok, gen_n,
                        int(rid.size), int(rid.size), len(waiting), used, reserved, reserved - used, 0.0, 0.0, 0.0,
                        preempted))
        steps += 1
        if progress is not None and not steps % 256:
            progress(n_done)
        busy += dt
        if blocks > peak_blocks:
            peak_blocks = blocks
        if ahead:
            prev = t
        t = t_end
        if stop is not None and steps % every == 0 and nxt >= lo:
            f, d = first[lo:hi], done[lo:hi]
            if nxt >= hi and bool((d >= 0).all()):
                break
            late = np.where(f >= 0, f - a_w, np.where(a_w <= t, t - a_w, -1.0))
            if int(np.count_nonzero(late > stop["ttft"])) >= need_t:
                stopped = "ttft"
                break
            slow = multi & (f >= 0) & ((np.where(d >= 0, last[lo:hi], t) - f) / o_w > stop["tpot"])  # as slo's TPOT
            if int(np.count_nonzero(slow)) >= need_d:
                stopped = "tpot"
                break
    return {"arrival": arrival, "first": first, "last": last, "done": done, "preemptions": preempt, "steps": steps,
            "generated": generated, "peak_running": peak_running, "peak_kv_bytes": peak_blocks * bb,
            "kv_capacity_bytes": cap, "memory_stalls": mem_stalls, "slot_stalls": slot_stalls,
            "preempted": preemptions, "busy_s": busy, "stopped": stopped}
