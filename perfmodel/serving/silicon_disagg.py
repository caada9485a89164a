"""The serving validation's disaggregated point (silicon.Predictor's disagg): W_p prefill workers and W_d decode
workers in one closed loop of N clients (perfmodel.serving.silicon's docstring gives the benchmark).

Each client's request passes through the prefill pool (its prompt, then the KV transfer) and then the decode pool.
Up to JOINT_CLIENTS clients the loop is simulated as it runs (Disaggregated.joint): every worker of both pools at
once, from the burst of N prompts, each client sending its next request when its last one is done, the two pools
coupled by fixed-point iteration on the send times. Prompts of one length sent together run together, finish
together and come back together: the clients can stay in step, and a prompt then queues behind the others on its
prefill worker, which no steady share of the clients has.

Above JOINT_CLIENTS (the joint loop costs 3-40x the pooled balance there: docs/validation.md, "Today's errors") the
loop is the pooled balance, its steady state by Little's law per pool. Both pools serve the same request rate X, and
the N clients are shared between them: N = N_p + N_d with X = x_p(N_p) = x_d(N_d). A pool's clients are a real
number: a prefill pool that outruns the decode pool holds fewer clients than it has workers (each worker is busy
part of the time), and the decode workers hold the rest, floor(u) or floor(u) + 1 of them a worker (Dynamo's router
sends a request to a worker with room). The search:
- split: the integer share c_p of clients a prefill worker holds where the pools' rates from step costs cross,
  corrected by what quick simulations served there (up to three tries);
- balance: from c_p, the real share u_p where the simulated pools' rates cross (bisection); a pool's worker with
  u clients on average is the simulations at the whole numbers around u mixed (Disaggregated.pool): below one
  client, the one client's loop for the share u of the time.
A pool of W_d decode workers with u_d = (N - W_p u_p) / W_d clients each then gives the wait for a place and
TPOT; the prefill pool's stage time (its burst first) and the transfer complete TTFT.
"""
from __future__ import annotations

import heapq
import math
from typing import TYPE_CHECKING

import numpy as np

from ..errors import SpecError
from . import fastsim
from .silicon_plan import PROFILE_ROUNDS, profile_mean, spread_lengths, worker_budget, worker_cap

if TYPE_CHECKING:
    from .slo import Instance

# a pool's worker with u clients on average is simulated at whole numbers of clients 1 apart up to GRID, then on a
# grid 2^k apart with at most GRID / 2 cells an octave (a client's share of the rate is then below 1/16 anyway)
GRID = 32
BALANCE_TOL = 1e-6  # the bisection's bracket, in clients a prefill worker (relative above one client)
# up to this many clients the loop is simulated jointly (Disaggregated.joint), above it by the pooled balance: the
# joint loop iterates the whole simulation 8-17 times; bench/disagg_joint.py (2 points a band, one core beside a test
# run) took 1-2 s a point up to 16 clients, 8-16 s at 17-128, 45-253 s above, where the pooled one took 0.1-23 s
JOINT_CLIENTS = 128
MAX_JOINT = 20  # iterations of the joint loop's fixed point a simulated round (8-17 seen for 5 rounds); not settled
# by then is an error (validate's --rounds is at most 20: 23 rounds, 460 iterations)


class Disaggregated:
    """silicon.Predictor's disaggregated point (mixed into it: uses its instance, closed, transfers, ahead,
    mtp_priced, speculative, no_evict)."""

    def stages(self, p: dict) -> dict:
        """The point's two stages as the disaggregated loop runs them: pre, dec (the prefill and decode workers'
        Instances; dec speculative where the recipe's drafts are priced), move (the transfer of one prompt's KV
        cache, s), osl (the decode iterations a request runs), tokens (the output tokens it streams), drafts, ahead,
        recv, slots (the requests a decode worker holds), pslots (the prompts a prefill iteration holds) and spread
        (the benchmark's length range, None where speculative steps run at one length)."""
        from .disagg import Transfer

        pre = self.instance(p, p["layout"], worker_budget(p, p["layout"], "prefill"), p.get("prefill_moe_backend", ""))
        dec = self.instance(p, p["decode_layout"], worker_budget(p, p["decode_layout"], "decode"),
                            p.get("decode_moe_backend", ""))
        Wp, Wd, isl, osl = p["prefill_workers"], p["decode_workers"], p["isl"], p["osl"]
        tkey = (pre.serial, dec.serial)
        tr = self.transfers.get(tkey)
        if tr is None:
            devices = pre.lay.devices * Wp + dec.lay.devices * Wd
            tr = self.transfers[tkey] = Transfer(pre.model, pre.hw, pre.prec, pre.lay, dec.lay, devices, self.mode,
                                                 self.impl_for(p.get("engine", ""), "", p.get("engine_version", "")))
        move = float(tr(np.array([isl]))[0])
        tokens = osl
        # a request's drafts count against the decode worker's max_num_tokens whether or not their speedup is priced
        drafts = int(p["mtp"]) if p.get("speculative") == "mtp" and p.get("mtp") else 0
        ahead = self.ahead(p)  # the decode worker's overlap scheduler (the prefill worker's: not simulated)
        # SGLang's decode worker takes a new request off its socket every `recv` loops (its recipe's
        # --scheduler-recv-interval; fastsim.run's recv). The wait comes before the prompt runs there (the prefill
        # worker starts a request once the decode worker has taken it and reserved its cache); simulated at the
        # decode worker, where the same wait adds to the request's time after the transfer instead
        recv = p.get("decode_recv")
        if self.mtp_priced(p):  # the decode worker runs the recipe's drafts
            dec = self.speculative(dec, int(p["mtp"]), isl, osl)
            osl = dec.cost.steps()
        slots = self.no_evict(dec, isl, tokens, p["engine"])  # the MTP module's memory included
        cap = worker_cap(p, p["decode_layout"], "decode", 1 + drafts)  # the configuration's limits (disagg_limits)
        slots = slots if cap is None else min(slots, cap)
        pslots = worker_cap(p, p["layout"], "prefill")  # prompts a prefill worker batches (its max_batch_size)
        return {"pre": pre, "dec": dec, "move": move, "osl": osl, "tokens": tokens, "drafts": drafts, "ahead": ahead,
                "recv": recv, "slots": slots, "pslots": pslots,
                # the benchmark's requests (sa-bench: 10 N measured, lengths drawn from [0.8 L, L]); speculative
                # steps are simulated at one length (agg's rule)
                "spread": None if osl != tokens else p.get("spread")}

    def disagg(self, p: dict, how: str | None = None) -> dict:
        """The point's TTFT, TPOT, request rate and clients in each pool (and the bound at the measured rate in the
        roofline mode): the joint loop up to JOINT_CLIENTS clients, the pooled balance above; `how` ("joint",
        "pooled") takes one whatever the clients (bench/disagg_joint.py compares them)."""
        if how not in (None, "joint", "pooled"):
            raise ValueError(f"how: 'joint' or 'pooled', not {how!r}")
        st = self.stages(p)
        pre, dec, move, osl, tokens, ahead, recv, slots, pslots = (
            st[k] for k in ("pre", "dec", "move", "osl", "tokens", "ahead", "recv", "slots", "pslots"))
        N, Wp, Wd, isl = p["concurrency"], p["prefill_workers"], p["decode_workers"], p["isl"]
        bench = dict(profile=p.get("profile", PROFILE_ROUNDS), spread=st["spread"])
        # a pool of workers, each with u clients on average (pool): its requests a second and its simulated means
        prefill = self.pool(lambda c: self.closed(pre, c, isl, 1, prefill="separate", slots=pslots, **bench),
                            lambda r, c: Wp * c / (r["stage"] + move))  # each client also waits the transfer
        decode = (self.pool(lambda c: self.closed(dec, c, isl, osl, prefilled=True, slots=slots, tokens=tokens,
                                                  ahead=ahead, recv=recv, **bench), lambda r, c: Wd * r["rate"])
                  if osl > 1 else None)

        def phase(steady):  # the prefill pool's mean over the benchmark's phase, and the transfer: the phase opens
            # with all N prompts sent at once to an empty server, every one of them in the prefill pool's first round
            # (N / W_p a worker), not the share the pools hold once the loop is steady
            return self.burst_mean(pre, -(-N // Wp), isl, steady, slots=pslots, **bench) + move

        if how == "joint" or (how is None and N <= JOINT_CLIENTS):
            j = self.joint(st, N, Wp, Wd, isl, bench["profile"])
            out = {"ttft_s": j["ttft_profile"], "tpot_s": j["tpot_profile"] if osl > 1 else math.nan,
                   "in_flight": math.nan, "request_rate": j["rate"], "preempted": j["preempted"], "transfer_s": move,
                   "prefill_clients": j["prefill_clients"], "decode_clients": N - j["prefill_clients"]}
        else:
            out = self.pooled(st, N, Wp, Wd, isl, bench, prefill, decode, phase)
        if self.mode == "roofline" and p.get("measured_rate"):  # also the bound at the measured request rate: each
            # pool holds the clients that serve it, the rest are between requests; where a pool cannot, the loop's
            x = p["measured_rate"]
            ttft, tpot = out["ttft_s"], out["tpot_s"]
            if decode is None:
                u = self.at_rate(prefill, N / Wp, x)
                if u is not None:
                    ttft = phase(prefill(u)[1]("stage"))
            else:
                v_p, v_d = self.at_rate(prefill, N / Wp, x), self.at_rate(decode, N / Wd, x)
                if v_p is not None and v_d is not None and Wp * v_p + Wd * v_d <= N:
                    f_d = decode(v_d)[1]
                    ttft, tpot = phase(prefill(v_p)[1]("stage")) + f_d("ttft_profile"), f_d("tpot_profile")
            out.update(self.lower(out, ttft, tpot))
        return out

    def pooled(self, st: dict, N: int, Wp: int, Wd: int, isl: int, bench: dict, prefill, decode, phase) -> dict:
        """The loop as two pools in a steady state (the module docstring): the split, then the balance."""
        pre, dec, move, osl, tokens, ahead, recv, slots, pslots = (
            st[k] for k in ("pre", "dec", "move", "osl", "tokens", "ahead", "recv", "slots", "pslots"))
        f_p = f_d = 1.0
        quick = dict(warmup=1, rounds=1, spread=st["spread"])  # the split's search: one warm-up and one
        # measured request per client
        for _ in range(3):  # the split from step costs, then corrected by what the simulations served there
            c_p = self.split(pre, dec, N, Wp, Wd, isl, osl, move, slots, f_p, f_d, pslots)
            c_d = max(1, round((N - c_p * Wp) / Wd))
            a = self.closed(pre, c_p, isl, 1, prefill="separate", slots=pslots, **quick)
            b = (self.closed(dec, c_d, isl, osl, prefilled=True, slots=slots, tokens=tokens, ahead=ahead, recv=recv,
                             **quick)
                 if osl > 1 else None)
            x_p, x_d = Wp * c_p / (a["stage"] + move), (Wd * b["rate"] if b else math.inf)
            if not math.isfinite(x_d) or abs(math.log(x_p / x_d)) <= 0.05:
                break
            est_p, est_d = self.rates(pre, dec, Wp, Wd, isl, osl, move, slots, c_p, c_d, pslots)
            f_p, f_d = x_p / est_p, x_d / est_d
        if decode is None:  # a one-token output: the prefill pool holds every client it can
            a = self.closed(pre, c_p, isl, 1, prefill="separate", slots=pslots, **bench)
            return {"ttft_s": phase(a["stage"]), "tpot_s": math.nan, "in_flight": math.nan,
                    "request_rate": Wp * a["rate"],
                    "preempted": 0, "transfer_s": move, "prefill_clients": c_p * Wp, "decode_clients": 0}
        # the answer: the configured warm-up and rounds, at the real share where the pools' rates cross
        u_p = self.balance(N, Wp, Wd, c_p, prefill, decode)
        x_p, f_p = prefill(u_p)
        x_d, f_d = decode((N - Wp * u_p) / Wd)
        return {"ttft_s": phase(f_p("stage")) + f_d("ttft_profile"), "tpot_s": f_d("tpot_profile"),
                "in_flight": math.nan, "request_rate": min(x_p, x_d), "preempted": round(f_d("preempted")),
                "transfer_s": move, "prefill_clients": Wp * u_p, "decode_clients": N - Wp * u_p}

    def joint(self, st: dict, N: int, Wp: int, Wd: int, isl: int, profile: int) -> dict:
        """The disaggregated closed loop simulated through both pools at once, from empty: N clients, each sending
        its next request the instant its last one is done (AIPerf, sa-bench: the (N + k)-th request is sent when the
        k-th finishes); a request runs on a prefill worker (fastsim "separate", whole prompts, at most pslots an
        iteration), its KV cache moves (move), and it decodes on a decode worker (fastsim prefilled, whose first
        iteration with it streams its first token). Each pool's router sends a request to the worker with the fewest
        of that pool's requests in flight when it arrives (Dynamo's router sends it to a worker with room), the
        lowest index on ties: round robin while they are even. As the agg loop (closed): `warmup` rounds from the
        burst of N prompts, `rounds` steady ones and a last one, the profile's mean from them (profile_mean).

        The pools are coupled by fixed-point iteration on the send times and the routes: each iteration simulates
        every worker on the previous iteration's sends and routes, and the next sends and routes follow from its
        finishes. The system is causal (a send, a route depends only on what finished before it), so an iteration
        is exact up to the first event the previous one got wrong, which comes later at every iteration; it stops
        when an iteration reproduces its input exactly (at most MAX_JOINT a round, else a RuntimeError)."""
        pre, dec, move, osl, tokens = st["pre"], st["dec"], st["move"], st["osl"], st["tokens"]
        spread, slots, pslots, recv, ahead = st["spread"], st["slots"], st["pslots"], st["recv"], st["ahead"]
        warmup, rounds = self.warmup, self.rounds
        key = ("joint", pre.serial, dec.serial, N, Wp, Wd, isl, osl, tokens, spread, slots, pslots, recv, ahead,
               move, warmup, rounds, profile)
        r = self.results.get(key)
        if r is not None:
            return r
        total = (warmup + rounds + 1) * N
        P = np.full(total, isl, dtype=np.int64) if spread is None else spread_lengths(isl, spread, total, 1)
        O = (np.full(total, osl, dtype=np.int64) if spread is None or osl <= 1
             else spread_lengths(osl, spread, total, 2))  # the streams of closed's agg loop (its seeds)
        if not bool(np.all(fastsim.fits_alone(pre.sizes, pre.block, P, np.ones(total, dtype=np.int64)))):
            raise SpecError("silicon", None, f"does not fit: one prompt's KV cache ({isl} tokens) is more than the "
                                             f"{pre.sizes.capacity:.4g} B a prefill worker has left")
        if not bool(np.all(fastsim.fits_alone(dec.sizes, dec.block, P, O))):
            raise SpecError("silicon", None, f"does not fit: one request's KV cache ({isl} + {osl} tokens) is more "
                                             f"than the {dec.sizes.capacity:.4g} B a decode worker has left")
        send = np.full(total, np.inf)
        send[:N] = 0.0  # the profiling phase opens on an empty server with N prompts sent at once
        done_p, done = np.full(total, np.inf), np.full(total, np.inf)
        ones = np.ones(total, dtype=np.int64)
        limit = MAX_JOINT * (warmup + rounds + 1)
        for it in range(limit):
            first, last = np.full(total, np.inf), np.full(total, np.inf)
            new_p, new_d, preempted = np.full(total, np.inf), np.full(total, np.inf), 0
            for idx in route(*_arrivals(send, done_p), Wp):  # the prefill workers (the last iteration's routes)
                s = fastsim.run(send[idx], P[idx], ones[idx], pre.sizes, pre.cost, pslots, pre.budget, "separate",
                                pre.block)
                new_p[idx] = s["done"]
            arr = new_p + move  # at the decode pool
            if osl <= 1:  # one output token, made by the prefill worker: no decode worker runs
                first, last, new_d = arr, arr, arr
            for idx in (route(*_arrivals(arr, done), Wd) if osl > 1 else ()):
                s = fastsim.run(arr[idx], P[idx], O[idx], dec.sizes, dec.cost, slots, dec.budget, "chunked",
                                dec.block, prefilled=True, recv=recv, ahead=ahead)
                first[idx], last[idx], new_d[idx] = s["first"], s["last"], s["done"]
                preempted += int(s["preempted"])
            nxt = send.copy()
            nxt[N:] = np.sort(new_d)[:total - N]  # the k-th finish sends request N + k
            if np.array_equal(nxt, send) and np.array_equal(new_p, done_p) and np.array_equal(new_d, done):
                break
            send, done_p, done = nxt, new_p, new_d
        else:
            raise RuntimeError(f"the disaggregated loop did not settle in {limit} iterations")
        gap = np.maximum(O - 1, 1) if spread is not None else max(tokens - 1, 1)
        tpot = np.where(O > 1, (last - first) / gap, np.nan)  # benchmark_serving.py: outputs > 1 token
        w = slice(warmup * N, (warmup + rounds) * N)
        stay = float(np.mean(done[w] - send[w]))  # a request's time in the loop; Little's law: N = X x stay
        rate = N / stay
        r = self.results[key] = {
            "ttft_profile": profile_mean(first - send, N, warmup, rounds, profile),
            "tpot_profile": profile_mean(tpot, N, warmup, rounds, profile), "rate": rate, "preempted": preempted,
            "prefill_clients": rate * float(np.mean(done_p[w] + move - send[w])), "iterations": it + 1}
        return r

    @staticmethod
    def pool(sim, rate):
        """A pool whose worker holds u clients on average (u real, > 0): u -> (the pool's requests a second, the
        mean of a simulated quantity over its requests). sim(c): one worker's closed loop of c clients; rate(r, c):
        the pool's rate from it. Below one client: the one client's loop the share u of the time (rate u x its
        rate, its times). Above: the workers hold the whole numbers lo or lo + h around u (h = 1 up to GRID, then
        2^k: grid), the shares mixed so that the mean clients is u; a quantity is weighted by each one's rate."""
        def at(u: float):
            if u <= 1.0:
                cells = [(1, u)]
            else:
                h = 1 if u < GRID else 2 ** int(math.log2(u * 2 / GRID))
                lo = int(u // h) * h
                w = (u - lo) / h
                cells = [(c, f) for c, f in ((lo, 1.0 - w), (lo + h, w)) if f > 0.0]
            runs = [(sim(c), c, f) for c, f in cells]
            xs = [f * rate(r, c) for r, c, f in runs]
            x = sum(xs)
            return x, lambda k: sum(xi * float(r[k]) for xi, (r, _, _) in zip(xs, runs)) / x
        return at

    @staticmethod
    def lower(out: dict, ttft: float, tpot: float) -> dict:
        """The bound's TTFT and TPOT: the lower of the roofline's loop at the measured rate (ttft, tpot) and its
        loop of all N clients (out's), each serving at least the measured rate. Fewer clients are not always
        faster: prompts of one length that arrive together run together, so a loop's TTFT need not grow with its
        clients, and an attention-DP step prices a lone prompt on one rank (docs/validation.md, "The bound at the
        measured rate"). NaN (no second token) where both are."""
        return {"bound_ttft_s": float(np.fmin(out["ttft_s"], ttft)),
                "bound_tpot_s": float(np.fmin(out["tpot_s"], tpot))}

    @staticmethod
    def at_rate(pool, top: float, x: float) -> float | None:
        """The real clients u in (0, top] a worker of `pool` (pool's) holds where the pool serves x requests a second
        (bisection: its rate grows with its clients), or None where even `top` clients serve no more than x.
        The bound at a measured rate: a closed loop whose server is faster than the measured one turns its clients
        over faster and so sends more requests a second, which queue (its TTFT is then no bound on the measured
        one); at the measured rate X, Little's law leaves only X x (its time a request) of the clients in the
        system, the others between requests (docs/validation.md, "The bound at the measured rate")."""
        if pool(top)[0] <= x:
            return None
        lo, hi = 0.0, top
        while hi - lo > BALANCE_TOL * hi:  # relative: the bound's clients may be a small share of one
            mid = 0.5 * (lo + hi)
            if pool(mid)[0] < x:
                lo = mid
            else:
                hi = mid
        return hi

    @staticmethod
    def balance(N: int, Wp: int, Wd: int, c0: int, prefill, decode) -> float:
        """The real share u_p of the N clients a prefill worker holds where the pools serve the same rate:
        prefill(u_p) = decode((N - W_p u_p) / W_d) (pool's rates; the prefill pool's grows with its share, the
        decode pool's falls). The bracket is found from the split's c0 in steps that double, then bisected."""
        top = N / Wp  # every client in the prefill pool: the decode pool serves nothing

        def gap(u):
            return prefill(u)[0] - decode((N - Wp * u) / Wd)[0]

        u = min(float(c0), top * (1.0 - BALANCE_TOL))
        lo, hi, k = (None, u, 1.0) if gap(u) > 0.0 else (u, None, 1.0)
        while lo is None or hi is None:  # gap(0) < 0 < gap(top): both ends hold a bracket
            v = max(0.0, u - k) if lo is None else min(top, u + k)
            if v <= 0.0:
                lo = 0.0
            elif v >= top:
                hi = top
            elif gap(v) > 0.0:
                hi = v
            else:
                lo = v
            k *= 2.0
        while hi - lo > BALANCE_TOL * max(1.0, hi):
            mid = 0.5 * (lo + hi)
            if gap(mid) > 0.0:
                hi = mid
            else:
                lo = mid
        return 0.5 * (lo + hi)

    def burst_mean(self, inst: Instance, n: int, isl: int, steady: float, profile: int = PROFILE_ROUNDS,
                   spread: float | None = None, slots: int | None = None) -> float:
        """A prefill worker's mean stage time over the benchmark's phase of `profile` rounds: the first round is the
        burst (n prompts at once on an empty worker, whole prompts in FIFO iterations, at most `slots` of them an
        iteration; spread: their lengths as closed's), the other rounds take the steady loop's mean `steady`."""
        key = ("burst", inst.serial, n, isl, spread, slots)
        b = self.results.get(key)
        if b is None:
            P = np.full(n, isl, dtype=np.int64) if spread is None else spread_lengths(isl, spread, n, 3)
            s = fastsim.run(np.zeros(n), P, np.ones(n, dtype=np.int64), inst.sizes, inst.cost, slots, inst.budget,
                            "separate", inst.block)
            b = self.results[key] = float(np.mean(s["done"]))  # sent at 0: each one's stage time
        return (b + (profile - 1) * steady) / profile

    @staticmethod
    def rates(pre: Instance, dec: Instance, Wp: int, Wd: int, isl: int, osl: int, move: float, slots, c_p, c_d,
              pslots=None):
        """The stages' request rates from their step costs (split's estimates) at c_p and c_d clients per worker;
        pslots: the prompts a prefill iteration holds at most (its max_batch_size), slots: the decode worker's."""
        per = max(1, min(int(pre.budget) // max(isl, 1), pslots or math.inf))
        cap = int(dec.sizes.capacity // (-(-(isl + osl) // dec.block) * dec.block * dec.sizes.per_token
                                         + dec.sizes.per_seq))
        cap = max(1, min(cap, slots) if slots else cap)
        k = min(c_p, per)
        tau = pre.step(np.full(k, isl), np.full(k, isl))
        xp = Wp * min(c_p / (c_p / k * tau + move), k / tau)
        if osl <= 1:
            return xp, math.inf
        r = min(c_d, cap)
        tau = dec.step(np.ones(r, dtype=np.int64), np.full(r, isl + osl // 2))
        return xp, Wd * r / ((osl - 1) * tau)

    @classmethod
    def split(cls, pre: Instance, dec: Instance, N: int, Wp: int, Wd: int, isl: int, osl: int, move: float, slots,
              f_p: float, f_d: float, pslots=None) -> int:
        """Clients per prefill worker where both stages serve the same request rate, from their step costs: a
        prefill worker with c clients runs iterations of k = min(c, budget // isl) whole prompts, serving
        k / tau_p(k) requests per second (each client also waits the transfer); a decode worker with c clients
        runs c rows (at most what its KV cache or scheduler holds) at the mean context isl + osl / 2, serving
        c / ((osl - 1) tau_d(c)). f_p and f_d scale the two estimates (simulated over estimated rate at the last
        split). The bisection is on step costs only; the stages are then simulated there."""
        def x_p(c):
            return f_p * cls.rates(pre, dec, Wp, Wd, isl, 1, move, slots, c, 1, pslots)[0]

        def x_d(c):
            return f_d * cls.rates(pre, dec, Wp, Wd, isl, osl, move, slots, 1, c)[1]

        lo, hi = 1, max(1, (N - Wd) // Wp)
        if x_p(hi) <= x_d(max(1, round((N - hi * Wp) / Wd))):
            return hi
        while hi - lo > 1:  # x_p grows with its clients, x_d falls as they leave the decode stage
            mid = (lo + hi) // 2
            if x_p(mid) < x_d(max(1, round((N - mid * Wp) / Wd))):
                lo = mid
            else:
                hi = mid
        return lo


def _arrivals(at: np.ndarray, ends: np.ndarray) -> tuple:
    """route's arguments for a pool: the requests that arrive (a finite time), in arrival order, and their times."""
    known = np.flatnonzero(np.isfinite(at))
    return known[np.argsort(at[known], kind="stable")], at, ends


def route(order: np.ndarray, at: np.ndarray, ends: np.ndarray, W: int) -> list:
    """A pool's router: the requests `order` (sorted by their arrivals `at`) shared among W workers, each to the
    worker with the fewest of the pool's requests in flight when it arrives (those sent there that finish, by
    `ends`, after it arrives; inf: not finished), the lowest index on ties. Returns each worker's requests, in
    arrival order."""
    if W == 1:
        return [order] if order.size else []
    heaps: list = [[] for _ in range(W)]
    out: list = [[] for _ in range(W)]
    for i in order.tolist():
        a = at[i]
        best, load = 0, math.inf
        for w in range(W):
            h = heaps[w]
            while h and h[0] <= a:
                heapq.heappop(h)
            if len(h) < load:
                best, load = w, len(h)
        heapq.heappush(heaps[best], ends[i])
        out[best].append(i)
    return [np.asarray(o, dtype=np.int64) for o in out if o]  # a worker sent nothing is not simulated
