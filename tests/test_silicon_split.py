"""How `validate --serving` splits a disaggregated benchmark's clients between its prefill and decode pools, and
the closed loop each pool runs, checked on stand-in workers whose step costs are written out by hand.

A stand-in worker's iteration costs a + b x (tokens it runs) + c x (context tokens it reads) seconds, so every
rate below is a number anyone can recompute on paper (silicon.Predictor.rates' docstring gives the rules)."""
import itertools
import math

import numpy as np
import pytest

from perfmodel.runconfig import Layout
from perfmodel.errors import SpecError
from perfmodel.serving import disagg, fastsim, silicon, silicon_disagg
from perfmodel.serving.kvmemory import KVSizes

_SERIAL = itertools.count(10_000)


class ToyCost:
    ahead = False

    def __init__(self, a, b, c):
        self.a, self.b, self.c = a, b, c

    def __call__(self, T, S) -> float:
        return self.a + self.b * float(np.sum(T)) + self.c * float(np.sum(S))

    def decode_steps(self, S0, k):  # no closed form: fastsim prices each iteration
        return None


class Toy:
    """A worker of `budget` tokens an iteration and `capacity` bytes of KV cache, `per_token` bytes a cached token
    (in blocks of `block`) and `per_seq` a sequence."""

    def __init__(self, a=1e-3, b=1e-6, c=1e-8, budget=4096, block=16, per_token=1000.0, per_seq=0.0,
                 capacity=1e12, tp=1):
        self.sizes = KVSizes(per_token, per_seq, 0.0, capacity, 1 << 20)
        self.block, self.budget = block, budget
        self.cost = ToyCost(a, b, c)
        self.serial = next(_SERIAL)
        self.lay = Layout(tp=tp)
        self.model = self.hw = self.prec = None

    def step(self, T, S) -> float:
        return self.cost(np.asarray(T), np.asarray(S))


@pytest.fixture(autouse=True)
def _pooled(monkeypatch):
    """The points in this file up to the joint loop's section run the pooled balance (Disaggregated.pooled), which
    prices a loop above JOINT_CLIENTS clients: every point takes it here. The joint loop's tests set it back."""
    monkeypatch.setattr(silicon_disagg, "JOINT_CLIENTS", 0)


# ---------------------------------------------------------------- the step-cost estimates of the split
@pytest.mark.parametrize("isl, c_p, move, k", [
    (1000, 10, 0.01, 4),  # 4,096-token budget: 4 whole prompts an iteration, 10 clients wait 2.5 iterations + move
    (1000, 2, 0.01, 2),  # fewer clients than fit: an iteration of 2 prompts
    (5000, 3, 0.0, 1),  # a prompt above the budget still runs, alone
    (1, 3000, 0.002, 3000),  # one-token prompts: 4,096 fit an iteration, so all 3,000 clients' prompts run together
])
def test_a_prefill_worker_serves_its_clients_prompts_k_at_a_time_and_each_client_also_waits_the_transfer(
        isl, c_p, move, k):
    """k = min(c, budget // isl) whole prompts an iteration of tau = a + b k isl + c k isl seconds: a client's
    request takes c / k iterations plus the transfer, and the worker serves at most k / tau requests a second."""
    pre = Toy(a=1e-3, b=1e-6, c=1e-8)
    tau = 1e-3 + 1e-6 * k * isl + 1e-8 * k * isl
    want = 2 * min(c_p / (c_p / k * tau + move), k / tau)
    got, dec_rate = silicon.Predictor.rates(pre, Toy(), 2, 3, isl, 1, move, None, c_p, 1)
    assert got == pytest.approx(want, rel=1e-12)
    assert dec_rate == math.inf  # a one-token output has no decode stage


@pytest.mark.parametrize("isl, osl, capacity, per_seq, slots, c_d, rows", [
    # 1,101 tokens in 69 blocks of 16: 1,104 x 1,000 + 5,000 B = 1,109,000 B a request, 9 of them in 11 MB
    (1000, 101, 11_000_000, 5000.0, None, 50, 9),
    (1000, 101, 11_000_000, 5000.0, 6, 50, 6),  # the scheduler's cap below the memory's
    (1000, 101, 11_000_000, 5000.0, None, 3, 3),  # fewer clients than fit
    (1000, 101, 1_109_000, 5000.0, None, 5, 1),  # exactly one fits
    (1000, 101, 1_000_000, 5000.0, None, 5, 1),  # none fits whole: still one row (the simulation refuses it)
    (20, 5, 100_000, 0.0, None, 10, 3),  # 25 tokens take 2 blocks, 32,000 B: 3 in 100 kB (4 if counted by token)
    (20, 2, 100_000, 0.0, None, 10, 3),  # a two-token output: one decode step after its first token
])
def test_a_decode_worker_runs_as_many_rows_as_its_clients_its_memory_and_its_scheduler_allow(
        isl, osl, capacity, per_seq, slots, c_d, rows):
    """r = min(c, whole ISL + OSL caches in memory, slots) rows at the mean context isl + osl // 2, each emitting
    osl - 1 tokens after its first: the worker serves r / ((osl - 1) tau_d(r)) requests a second."""
    dec = Toy(a=2e-3, b=1e-5, c=1e-8, capacity=capacity, per_seq=per_seq)
    tau = 2e-3 + 1e-5 * rows + 1e-8 * rows * (isl + osl // 2)
    _, got = silicon.Predictor.rates(Toy(), dec, 2, 3, isl, osl, 0.01, slots, 1, c_d)
    assert got == pytest.approx(3 * rows / ((osl - 1) * tau), rel=1e-12)


def _exhaustive(pre, dec, N, Wp, Wd, isl, osl, move, slots, f_p, f_d):
    """The split by trying every prefill share: the most clients a prefill worker can hold while its pool still
    serves less than the decode pool does with the rest; all of them if the prefill pool is the slower even then."""
    def gap(c):
        c_d = max(1, round((N - c * Wp) / Wd))
        return (f_p * silicon.Predictor.rates(pre, dec, Wp, Wd, isl, 1, move, slots, c, 1)[0]
                - f_d * silicon.Predictor.rates(pre, dec, Wp, Wd, isl, osl, move, slots, 1, c_d)[1])

    hi = max(1, (N - Wd) // Wp)
    if gap(hi) <= 0:
        return hi
    slower = [c for c in range(1, hi) if gap(c) < 0]
    return max(slower) if slower else 1


@pytest.mark.parametrize("N, Wp, Wd, isl, osl, move, f_p, f_d", [
    (200, 2, 3, 8000, 20, 0.002, 1.0, 1.0),
    (200, 2, 3, 8000, 20, 0.002, 0.6, 1.0),  # a slower prefill than estimated takes more clients
    (200, 2, 3, 8000, 20, 0.002, 1.0, 0.6),  # a slower decode, fewer
    (200, 2, 3, 16000, 50, 0.002, 1.0, 1.0),
    (200, 2, 3, 4000, 10, 0.0, 1.0, 1.0),
    (200, 2, 3, 2000, 200, 0.002, 1.0, 1.0),  # the decode pool is the slower at every share
    (64, 1, 1, 32000, 2, 0.0, 1.0, 1.0),  # long prompts, two-token outputs: the prefill pool is the slower at every share
])
def test_the_split_is_where_the_pools_rates_cross_as_an_exhaustive_search_finds_it(N, Wp, Wd, isl, osl, move, f_p,
                                                                                     f_d):
    pre, dec = Toy(a=1e-3, b=2e-7, c=1e-9, budget=8192), Toy(a=5e-3, b=1e-5, c=2e-9, capacity=2e9)
    got = silicon.Predictor.split(pre, dec, N, Wp, Wd, isl, osl, move, None, f_p, f_d)
    assert got == _exhaustive(pre, dec, N, Wp, Wd, isl, osl, move, None, f_p, f_d)


def test_the_split_s_answers_cover_both_ends_and_the_middle():
    """The cases above reach both ends of the search and a crossing inside it (else they would not test it)."""
    pre, dec = Toy(a=1e-3, b=2e-7, c=1e-9, budget=8192), Toy(a=5e-3, b=1e-5, c=2e-9, capacity=2e9)
    ends = {(64, 32000, 2): "hi", (200, 2000, 200): "lo", (200, 8000, 20): "mid", (200, 16000, 50): "mid"}
    for (N, isl, osl), where in ends.items():
        Wp, Wd = (2, 3) if N == 200 else (1, 1)
        c = silicon.Predictor.split(pre, dec, N, Wp, Wd, isl, osl, 0.0 if N == 64 else 0.002, None, 1.0, 1.0)
        hi = max(1, (N - Wd) // Wp)
        assert {"hi": c == hi, "lo": c == 1, "mid": 1 < c < hi}[where], (N, c, hi)


_PRE, _DEC = Toy(a=1e-3, b=2e-7, c=1e-9, budget=8192), Toy(a=5e-3, b=1e-5, c=2e-9, capacity=2e9)


def _rate_p(c, Wp, isl=8000, move=0.002):  # the prefill pool's estimate at c clients a worker
    return silicon.Predictor.rates(_PRE, _DEC, Wp, 1, isl, 1, move, None, c, 1)[0]


def _rate_d(c, Wd, isl=8000, osl=20):  # the decode pool's
    return silicon.Predictor.rates(_PRE, _DEC, 1, Wd, isl, osl, 0.0, None, 1, c)[1]


@pytest.mark.parametrize("Wp, Wd, isl, osl", [(2, 3, 8000, 20), (1, 4, 16000, 50), (3, 1, 4000, 10),
                                              (1, 2, 32000, 2)])
def test_the_split_matches_the_exhaustive_search_at_every_concurrency(Wp, Wd, isl, osl):
    for N in range(Wp + Wd, 400, 3):
        got = silicon.Predictor.split(_PRE, _DEC, N, Wp, Wd, isl, osl, 0.002, None, 1.0, 1.0)
        assert got == _exhaustive(_PRE, _DEC, N, Wp, Wd, isl, osl, 0.002, None, 1.0, 1.0), N
        assert got * Wp <= max(Wp, N - Wd)  # every decode worker keeps a client


def _tie(a, b):
    """f with f x b == a to the last bit (None if no double gives it)."""
    f = a / b
    for _ in range(64):
        p = f * b
        if p == a:
            return f
        f = math.nextafter(f, math.inf if p < a else 0.0)
    return None


def test_at_an_exact_tie_at_the_top_the_prefill_pool_takes_every_client_it_can():
    """The rule at the top of the range is x_p <= x_d (a tie takes the most clients); inside it, x_p < x_d (a tie is
    the decode pool's): rates tuned to tie to the last bit, at the top and at the search's first midpoint."""
    N, Wp, Wd = 200, 2, 3
    hi = (N - Wd) // Wp
    f_d = _tie(_rate_p(hi, Wp), _rate_d(max(1, round((N - hi * Wp) / Wd)), Wd))
    assert f_d is not None
    assert silicon.Predictor.split(_PRE, _DEC, N, Wp, Wd, 8000, 20, 0.002, None, 1.0, f_d) == hi
    mid = (1 + hi) // 2
    f_d = _tie(_rate_p(mid, Wp), _rate_d(max(1, round((N - mid * Wp) / Wd)), Wd))
    assert f_d is not None
    got = silicon.Predictor.split(_PRE, _DEC, N, Wp, Wd, 8000, 20, 0.002, None, 1.0, f_d)
    assert got == mid - 1 == _exhaustive(_PRE, _DEC, N, Wp, Wd, 8000, 20, 0.002, None, 1.0, f_d)


def test_near_the_top_the_decode_clients_are_the_rest_over_the_decode_workers_rounded_and_at_least_one():
    """At the top (c_p = (N - W_d) // W_p) the decode workers share N - c_p W_p clients: 65 - 63 = 2 over 2 workers
    is one each, not 2 or 4; one below the top with 4 decode workers, 68 - 63 = 5 over 4 is one each (1.25),
    not 2. With the decode estimate scaled between the rates at 1 and 2 clients, only the right count gives
    the exhaustive answer."""
    for N, Wp, Wd, at in ((65, 1, 2, 63), (68, 1, 4, 63)):
        f_d = _rate_p(at, Wp) / math.sqrt(_rate_d(1, Wd) * _rate_d(2, Wd))
        got = silicon.Predictor.split(_PRE, _DEC, N, Wp, Wd, 8000, 20, 0.002, None, 1.0, f_d)
        assert got == _exhaustive(_PRE, _DEC, N, Wp, Wd, 8000, 20, 0.002, None, 1.0, f_d)
        assert got < at  # the prefill pool at `at` clients already outruns one decode client a worker


# ---------------------------------------------------------------- the disaggregated point, step by step
class _Script:
    """Stand-ins for the simulations of one disaggregated point, recording what it asks them."""

    def __init__(self, monkeypatch, splits, stage, pre_rate, dec_rate, est, move=0.004, burst=0.5):
        self.splits, self.stage, self.pre_rate, self.dec_rate, self.est = list(splits), stage, pre_rate, dec_rate, est
        self.split_args, self.closed_calls, self.burst_n, self.devices = [], [], [], []
        self.split_slots, self.burst_slots = [], []
        self.move, self.burst = move, burst
        pre, dec = Toy(tp=2), Toy(tp=4)
        script = self

        def instance(pred, p, lay, budget, moe=""):
            return pre if lay is p["layout"] else dec

        def split(cls, pre, dec, N, Wp, Wd, isl, osl, move, slots, f_p=1.0, f_d=1.0, pslots=None):
            script.split_args.append((f_p, f_d))
            script.split_slots.append((slots, pslots))
            return script.splits[min(len(script.split_args), len(script.splits)) - 1]

        def closed(pred, inst, n, isl, osl, prefilled=False, **k):
            script.closed_calls.append(dict(k, n=n, osl=osl, prefilled=prefilled))
            if not prefilled:
                return {"stage": script.stage, "rate": script.pre_rate, "ttft_profile": 0.0, "tpot_profile": 0.0}
            return {"rate": script.dec_rate, "ttft_profile": 0.03, "tpot_profile": 0.02, "preempted": 7}

        def burst_mean(pred, inst, n, isl, steady, **k):
            script.burst_n.append(n)
            script.burst_slots.append(k.get("slots"))
            return script.burst

        class Transfer:
            def __init__(self, model, hw, prec, lay_p, lay_d, devices, mode, impl):
                script.devices.append(devices)

            def __call__(self, prompt):
                return np.full(len(prompt), script.move)

        monkeypatch.setattr(silicon.Predictor, "instance", instance)
        monkeypatch.setattr(silicon.Predictor, "split", classmethod(split))
        monkeypatch.setattr(silicon.Predictor, "closed", closed)
        monkeypatch.setattr(silicon.Predictor, "burst_mean", burst_mean)
        monkeypatch.setattr(silicon.Predictor, "rates", staticmethod(lambda *a: script.est))
        monkeypatch.setattr(silicon.Predictor, "no_evict", staticmethod(lambda inst, isl, osl, engine: 64))
        monkeypatch.setattr(disagg, "Transfer", Transfer)


def _point(N=20, Wp=2, Wd=3, isl=1000, osl=100):
    return {"model": "m", "hardware": "h", "weights": "bf16", "act": "bf16", "kv": "bf16", "engine": "vllm",
            "budget": 8192, "layout": Layout(tp=2), "decode_layout": Layout(tp=4), "prefill_workers": Wp,
            "decode_workers": Wd, "concurrency": N, "isl": isl, "osl": osl}


def test_a_disaggregated_point_adds_the_burst_the_transfer_and_the_decode_worker_s_first_token(monkeypatch):
    """TTFT = the prefill pool's mean over the phase (its burst of N / W_p prompts a worker first) + the transfer
    + the decode worker's wait and first iteration; the pair serves the rate where both pools' rates meet; the KV
    transfer is priced on the deployment's W_p x 2 + W_d x 4 devices; the N clients split between the pools."""
    s = _Script(monkeypatch, [4], stage=0.2, pre_rate=9.0, dec_rate=5.0, est=(1.0, 1.0))
    s.dec_rate = 2 * 4 / (0.2 + s.move) / 3  # the decode pool serves what the prefill pool does at 4 a worker
    out = silicon.Predictor("roofline")(_point(N=20, Wp=2, Wd=3))
    assert out["ttft_s"] == pytest.approx(0.5 + 0.004 + 0.03, rel=1e-12)
    assert out["tpot_s"] == pytest.approx(0.02, rel=1e-12) and out["preempted"] == 7 and out["transfer_s"] == 0.004
    assert out["request_rate"] == pytest.approx(3 * s.dec_rate, rel=1e-6)  # not the prefill loop's own 2 x 9
    assert out["prefill_clients"] == pytest.approx(8, rel=1e-6)  # 4 a prefill worker
    assert out["decode_clients"] == pytest.approx(12, rel=1e-6)  # (20 - 8) / 3 = 4 a decode worker
    assert s.devices == [2 * 2 + 3 * 4]
    assert s.burst_n == [10]  # all 20 prompts at once: 10 a prefill worker
    assert s.split_args == [(1.0, 1.0)]
    assert all(c["osl"] == 1 for c in s.closed_calls if not c["prefilled"])  # a prefill request ends at its token


@pytest.mark.parametrize("engine, limits, want_dec, want_pre", [
    # TensorRT-LLM: max_batch_size per attention-DP rank (the decode pool's 4 ranks, the prefill pool's 2); a decode
    # worker's max_num_tokens also bounds its requests (tokens a request computes a step: 1 without drafts)
    ("trtllm", {"decode_max_batch": 8, "prefill_max_batch": 3}, 32, 6),
    ("trtllm", {"decode_max_batch": 100, "decode_max_tokens": 20}, 64, None),  # 20 x 4 = 80 > the 64 the KV holds
    ("trtllm", {"decode_max_batch": 100, "decode_max_tokens": 10}, 40, None),
    ("trtllm", {"prefill_max_tokens": 10}, 64, None),  # a prefill pool's max_num_tokens is its budget, no cap
    ("sglang", {"decode_max_batch": 8, "prefill_max_batch": 3}, 8, 3),  # max-running-requests: per worker
    ("trtllm", {}, 64, None),  # nothing set: the KV cache's bound, and no cap on a prefill iteration's prompts
    ("sglang", {"decode_max_tokens": 10}, 64, None),  # SGLang's chunked-prefill-size does not bound decode rows
])
def test_a_disaggregated_pool_runs_at_most_the_requests_its_configuration_allows(monkeypatch, engine, limits,
                                                                                 want_dec, want_pre):
    """The decode worker runs min(what its KV cache holds, max_batch_size x attention-DP ranks, max_num_tokens /
    tokens a request computes x ranks) requests; a prefill worker's iteration holds at most its max_batch_size x
    ranks prompts; every simulation of the point (the split, both closed loops, the burst) uses them."""
    s = _Script(monkeypatch, [4], stage=0.2, pre_rate=1.0, dec_rate=1.0, est=(1.0, 1.0))
    s.dec_rate = 2 * 4 / (0.2 + s.move) / 3
    p = dict(_point(N=20, Wp=2, Wd=3), engine=engine, layout=Layout(ep=2), decode_layout=Layout(ep=4), **limits)
    silicon.Predictor("roofline")(p)
    assert s.split_slots == [(want_dec, want_pre)]
    assert {c["slots"] for c in s.closed_calls if c["prefilled"]} == {want_dec}
    assert {c.get("slots") for c in s.closed_calls if not c["prefilled"]} == {want_pre}
    assert s.burst_slots == [want_pre]


@pytest.mark.parametrize("limits, row_tokens, want", [
    ({"decode_max_batch": 100, "decode_max_tokens": 10}, None, 10),  # one token a request: max_num_tokens requests
    ({"decode_max_batch": 100, "decode_max_tokens": 10}, 4, 2),  # 3 drafts: 4 tokens a request, 10 // 4 whole ones
    ({"decode_max_batch": 8, "decode_max_tokens": 2}, 4, 1),  # fewer tokens than one request computes: still one
    ({"decode_max_batch": 8, "decode_max_tokens": 64}, 4, 8),  # max_batch_size binds
    ({"decode_max_tokens": 64}, 4, 16),
])
def test_a_decode_worker_s_places_are_its_max_batch_size_or_its_max_num_tokens_over_a_request_s_tokens(
        limits, row_tokens, want):
    """Per attention-DP rank: min(max_batch_size, max(1, max_num_tokens // (1 + drafts))), in whole requests."""
    p = dict(_point(), engine="trtllm", **limits)
    got = (silicon.worker_cap(p, Layout(), "decode") if row_tokens is None
           else silicon.worker_cap(p, Layout(), "decode", row_tokens))
    assert got == want and isinstance(got, int)
    assert silicon.worker_cap(p, Layout(ep=4), "decode", row_tokens or 1) == 4 * want


def test_an_mtp_decode_worker_counts_each_request_s_drafts_against_its_max_num_tokens(monkeypatch):
    """A recipe that ran MTP with 3 drafts: a decode request computes 4 tokens a step, so max_num_tokens 40 per
    rank holds 10 requests (4 ranks: 40), below max_batch_size 100."""
    s = _Script(monkeypatch, [4], stage=0.2, pre_rate=1.0, dec_rate=1.0, est=(1.0, 1.0))
    s.dec_rate = 2 * 4 / (0.2 + s.move) / 3

    def speculative(pred, inst, k, isl, osl):
        inst.cost.steps = lambda: osl  # the stand-in's steps: one a token
        return inst

    monkeypatch.setattr(silicon.Predictor, "speculative", speculative)
    p = dict(_point(N=20, Wp=2, Wd=3), engine="trtllm", layout=Layout(ep=2), decode_layout=Layout(ep=4),
             model="deepseek-r1", speculative="mtp", mtp=3, decode_max_batch=100, decode_max_tokens=40)
    assert silicon.Predictor.mtp_priced(p)
    silicon.Predictor("roofline")(p)
    assert s.split_slots == [(40, None)]
    # a run that may not have drafted (its MTP and non-MTP entries both fit) counts one token a request
    silicon.Predictor("roofline")(dict(p, speculative="mtp|none", decode_max_tokens=8))
    assert s.split_slots[-1] == (32, None)


def test_a_disaggregated_pool_s_budget_is_its_configuration_s_max_num_tokens_per_rank():
    p = dict(_point(), engine="trtllm", prefill_max_tokens=16384, decode_max_tokens=256)
    assert silicon.worker_budget(p, Layout(ep=4), "prefill") == 4 * 16384
    assert silicon.worker_budget(p, Layout(ep=4), "decode") == 4 * 256
    assert silicon.worker_budget(p, Layout(ep=4)) == 4 * 8192  # an aggregated worker: the engine's default
    assert silicon.worker_budget(dict(p, engine="sglang"), Layout(ep=4), "prefill") == 16384  # the worker's
    assert silicon.worker_budget(_point(), Layout(tp=8), "prefill") == 8192  # not set: the engine's default


def test_a_prefill_worker_s_max_batch_size_bounds_the_prompts_an_iteration_holds():
    """With max_batch_size x ranks = 2 below the budget's 4 whole prompts, the split's estimate runs k = 2 a step,
    and the opening burst of 8 prompts runs 4 iterations of 2 (mean (1 + 2 + 3 + 4) / 4 of them) in place of 2
    of 4 (mean 1.5)."""
    pre = Toy(a=1e-3, b=1e-6, c=1e-8)  # 4,096 tokens an iteration: 4 whole 1,000-token prompts
    tau = {k: 1e-3 + 1e-6 * k * 1000 + 1e-8 * k * 1000 for k in (2, 4)}
    got = silicon.Predictor.rates(pre, Toy(), 1, 1, 1000, 1, 0.0, None, 10, 1, 2)[0]
    assert got == pytest.approx(min(10 / (10 / 2 * tau[2]), 2 / tau[2]), rel=1e-12)
    assert silicon.Predictor.rates(pre, Toy(), 1, 1, 1000, 1, 0.0, None, 10, 1)[0] == pytest.approx(4 / tau[4])
    pred = silicon.Predictor("roofline")
    assert pred.burst_mean(pre, 8, 1000, 0.0, profile=1) == pytest.approx(1.5 * tau[4], rel=1e-9)
    assert pred.burst_mean(pre, 8, 1000, 0.0, profile=1, slots=2) == pytest.approx(2.5 * tau[2], rel=1e-9)


class _Pools(_Script):
    """Stand-in pools that fill up: a prefill worker runs `k_p` prompts at once in `stage` seconds (more wait
    their turn: c clients take stage x max(1, c / k_p)); a decode worker has `k_d` places, each request holds one
    for `first` + `T` seconds (a first iteration, then the decode; a client beyond the places waits, on average,
    (c - k_d) / k_d x (first + T)). Rates are the closed loops' (Little's law: clients over time in the pool)."""

    def __init__(self, monkeypatch, k_p, stage, k_d, T, first=0.01, move=0.004):
        super().__init__(monkeypatch, [1], stage=stage, pre_rate=0.0, dec_rate=0.0, est=(1.0, 1.0), move=move)
        self.k_p, self.k_d, self.T, self.first = k_p, k_d, T, first
        self.burst = stage  # the burst's mean is the steady stage: TTFT below is the steady loop's
        script = self

        def closed(pred, inst, n, isl, osl, prefilled=False, **k):
            script.closed_calls.append(dict(k, n=n, osl=osl, prefilled=prefilled))
            if not prefilled:
                t = script.stage * max(1.0, n / script.k_p)
                return {"stage": t, "rate": n / t, "ttft_profile": t, "tpot_profile": 0.0}
            hold = script.first + script.T  # a place is held from the first iteration to the last token
            wait = max(0.0, n - script.k_d) / script.k_d * hold
            return {"rate": n / (wait + hold), "ttft_profile": wait + script.first,
                    "tpot_profile": script.T / 99, "preempted": 0}

        monkeypatch.setattr(silicon.Predictor, "closed", closed)


@pytest.mark.parametrize("N, Wp, Wd", [(11, 1, 9), (8, 2, 3), (5, 1, 4), (200, 2, 3), (1000, 3, 2), (40, 4, 1)])
def test_the_clients_are_shared_between_the_pools_and_every_one_is_counted(monkeypatch, N, Wp, Wd):
    """A closed loop of N clients holds N requests: prefill_clients + decode_clients = N (no client made up by
    rounding, none lost), and at the answer both pools serve the same rate (the share where their rates cross)."""
    s = _Pools(monkeypatch, k_p=2, stage=0.1, k_d=1, T=10.0)
    out = silicon.Predictor("roofline")(_point(N=N, Wp=Wp, Wd=Wd))
    assert out["prefill_clients"] + out["decode_clients"] == pytest.approx(N, rel=1e-12)
    u_p, u_d = out["prefill_clients"] / Wp, out["decode_clients"] / Wd
    x_p = Wp * u_p / (0.1 * max(1.0, u_p / 2) + s.move) if u_p <= 1 or float(u_p).is_integer() else None
    if x_p is not None:  # at a whole share the rate is the stand-in's own
        assert out["request_rate"] == pytest.approx(x_p, rel=1e-4)
    assert out["request_rate"] <= Wd * 1 / (0.01 + 10.0) * (1 + 1e-9)  # never above the decode places' rate
    assert 0 < u_p and 0 < u_d


def test_a_full_decode_pool_makes_every_client_beyond_its_places_wait_in_ttft(monkeypatch):
    """11 clients, one prefill worker (0.1 s a prompt, 4 ms transfer), 9 decode workers with one place each, 10 s of
    decoding a request after a 10 ms first iteration (srt-slurm's c1_ctx1_gen9_tep8_batch1 recipe, H200 DeepSeek-R1
    at concurrency 11, has this shape: measured TTFT 2.43 s). The pool serves X = 9 / 10.01 s; the prefill worker
    holds X x 0.104 = 0.094 clients on average and the decode workers the other 10.906: 1.906 clients beyond their
    9 places, who wait for one. In all TTFT = N / X - T: Little's law over the loop (every client's cycle is
    N / X, of which T is the decode after the first token)."""
    _Pools(monkeypatch, k_p=1, stage=0.1, k_d=1, T=10.0)
    out = silicon.Predictor("roofline")(_point(N=11, Wp=1, Wd=9, osl=100))
    X = 9 / 10.01
    assert out["request_rate"] == pytest.approx(X, rel=1e-5)  # the bisection's bracket: 1e-6 clients
    assert out["prefill_clients"] == pytest.approx(X * 0.104, rel=1e-4)
    assert out["ttft_s"] == pytest.approx(11 / X - 10.0, rel=1e-5)
    # the integer split alone (one client a prefill worker, round(10 / 9) = 1 a decode worker) counted 10 clients
    # and no wait: 0.114 s


def test_a_pool_s_worker_between_whole_clients_mixes_the_loops_around_it():
    """u <= 1: the one-client loop the share u of the time (rate u x its rate, its quantities); 1 < u < GRID: the
    loops at floor(u) and floor(u) + 1, shares 1 - w and w (w = u - floor(u)), quantities weighted by each one's
    rate; at GRID and above, a grid 2^k apart (u = 41: the loops at 40 and 42, half each)."""
    seen = []

    def sim(c):
        seen.append(c)
        return {"t": float(c), "rate": 1.0 + c}

    at = silicon.Predictor.pool(sim, lambda r, c: 2.0 * r["rate"])
    x, f = at(0.25)
    assert (x, f("t"), seen) == (0.25 * 2 * 2.0, 1.0, [1])
    seen.clear()
    x, f = at(2.25)
    assert seen == [2, 3] and x == pytest.approx(0.75 * 6 + 0.25 * 8, rel=1e-12)
    assert f("t") == pytest.approx((0.75 * 6 * 2 + 0.25 * 8 * 3) / x, rel=1e-12)
    seen.clear()
    at(3.0)
    assert seen == [3]  # a whole share: one loop
    seen.clear()
    at(41.0)
    assert seen == [40, 42] and silicon_disagg.GRID == 32
    seen.clear()
    at(204.0)
    assert seen == [200, 208]  # in [128, 256) the grid is 2^3 apart: 16 cells an octave


def _linear_pools(N, Wp, Wd, root, scale):
    """Pools whose rates cross at u_p = root: the prefill pool serves scale x W_p u (it grows with its share), the
    decode pool scale x W_d u_d x c (c so that they meet at root), and neither is ever asked about a negative share
    (a pool cannot hold fewer than no clients)."""
    c = Wp * root / (Wd * (N - Wp * root) / Wd)

    def pre(u):
        assert 0.0 <= u <= N / Wp, u
        return scale * Wp * u, None

    def dec(u_d):
        assert 0.0 <= u_d <= N / Wd, u_d
        return scale * Wd * u_d * c, None
    return pre, dec


@pytest.mark.parametrize("c0", [1, 3, 7, 19])
@pytest.mark.parametrize("root", [0.3, 2.5, 2.8, 9.75, 19.9])
@pytest.mark.parametrize("scale", [1.0, 1e-3])
def test_the_balance_finds_where_the_pools_rates_cross_from_either_side(c0, root, scale):
    """Prefill rate 2 u (it grows with its share), decode rate 2 root + (20 - u) - (20 - root) falls as the
    prefill pool takes clients: they cross at u = root, whether the split's c0 is above or below it, and whatever
    the rates' unit (scale: requests a millisecond, where every gap is below 1)."""
    N, Wp, Wd = 20, 1, 1
    pre = lambda u: (scale * 2.0 * u, None)  # noqa: E731
    dec = lambda u_d: (scale * (2.0 * root + u_d - (N - root)), None)  # noqa: E731
    got = silicon.Predictor.balance(N, Wp, Wd, c0, pre, dec)
    assert got == pytest.approx(root, rel=1e-5)


@pytest.mark.parametrize("N, Wp, Wd, root, c0", [(20, 2, 4, 3.0, 1), (20, 2, 4, 9.5, 9), (30, 3, 2, 0.4, 9),
                                                  (12, 1, 5, 11.9, 11), (10, 1, 1, 4.0, 50),
                                                  (20, 2, 4, 9.8, 7)])  # steps of 1, 2, 4 from 7 pass N / W_p = 10
@pytest.mark.parametrize("scale", [1.0, 1e-3])
def test_the_balance_shares_the_clients_over_both_pools_workers_and_never_asks_for_a_negative_share(
        N, Wp, Wd, root, c0, scale):
    """With W_p prefill and W_d decode workers the decode workers hold (N - W_p u_p) / W_d clients each; the search
    stays inside 0 <= u_p <= N / W_p even from a c0 above it (a split never gives one, the search is safe anyway)."""
    pre, dec = _linear_pools(N, Wp, Wd, root, scale)
    got = silicon.Predictor.balance(N, Wp, Wd, c0, pre, dec)
    assert got == pytest.approx(root, rel=1e-5)
    assert pre(got)[0] == pytest.approx(dec((N - Wp * got) / Wd)[0], rel=1e-4)


def test_a_one_token_disaggregated_point_is_its_prefill_pool_alone(monkeypatch):
    """Output 1: no decode pool. TTFT is the prefill pool's phase mean (the burst of ceil(N / W_p) prompts a worker
    first) plus the transfer; the rate is the prefill pool's, W_p x its loop's; its clients are the split's c_p W_p
    and the decode pool holds none."""
    s = _Script(monkeypatch, [4], stage=0.2, pre_rate=9.0, dec_rate=5.0, est=(1.0, 1.0), burst=0.5)
    out = silicon.Predictor("roofline")(_point(N=21, Wp=2, Wd=3, osl=1))
    assert out["ttft_s"] == pytest.approx(0.5 + 0.004, rel=1e-12)
    assert out["request_rate"] == pytest.approx(2 * 9.0, rel=1e-12)
    assert out["prefill_clients"] == 4 * 2 and out["decode_clients"] == 0
    assert s.burst_n == [11]  # 21 prompts over 2 workers: 11 on the first
    assert math.isnan(out["tpot_s"]) and not any(c["prefilled"] for c in s.closed_calls)
    assert {c["osl"] for c in s.closed_calls} == {1}  # each prefill request ends at its first token


def test_the_split_is_corrected_by_what_the_simulations_served_until_the_pools_agree_within_5_percent(monkeypatch):
    """The first split is from step costs alone (f = 1); each correction scales an estimate by the simulated over
    the estimated rate at the last split (f_p = x_p / est_p, f_d = x_d / est_d), with x_p = W_p c_p / (stage time +
    transfer) and x_d = W_d x the decode loop's rate; at most three splits are tried."""
    s = _Script(monkeypatch, [4, 5, 6], stage=0.2, pre_rate=1.0, dec_rate=20.0, est=(16.0, 50.0))
    silicon.Predictor("roofline")(_point(N=40, Wp=2, Wd=3))
    x_d = 3 * 20.0
    want = [(1.0, 1.0), (2 * 4 / 0.204 / 16.0, x_d / 50.0), (2 * 5 / 0.204 / 16.0, x_d / 50.0)]
    assert len(s.split_args) == 3
    assert np.allclose(np.array(s.split_args), np.array(want), rtol=1e-12, atol=0)
    quick, answer = s.closed_calls[:6], s.closed_calls[6:]
    assert all(c["warmup"] == 1 and c["rounds"] == 1 for c in quick)
    assert answer and all("warmup" not in c for c in answer)  # the answer's simulations run the benchmark's rounds


@pytest.mark.parametrize("ratio, splits", [(1.0, 1), (1.049, 1), (0.953, 1), (1.052, 3), (0.95, 3), (3.0, 3)])
def test_the_search_stops_once_the_simulated_rates_are_within_5_percent(monkeypatch, ratio, splits):
    s = _Script(monkeypatch, [4], stage=0.2, pre_rate=1.0, dec_rate=1.0, est=(1.0, 1.0))
    x_p = 2 * 4 / (0.2 + s.move)
    s.dec_rate = x_p / ratio / 3
    silicon.Predictor("roofline")(_point(N=40, Wp=2, Wd=3))
    assert len(s.split_args) == splits


def test_a_one_token_disaggregated_point_reports_no_preemptions(monkeypatch):
    _Script(monkeypatch, [4], stage=0.2, pre_rate=1.0, dec_rate=1.0, est=(1.0, 1.0))
    out = silicon.Predictor("roofline")(_point(N=20, osl=1))
    assert out["preempted"] == 0 and math.isnan(out["tpot_s"])


# ---------------------------------------------------------------- one worker's closed loop
def test_a_closed_loop_keeps_its_clients_in_flight_and_serves_them_at_the_rate_little_s_law_gives():
    """In the measured window every client always has a request in the system: in flight = n, and the request
    rate is in flight over the mean time in the system (Little's law)."""
    pred = silicon.Predictor("roofline")
    for n, isl, osl in ((1, 300, 20), (6, 300, 20), (16, 2000, 5)):
        r = pred.closed(Toy(), n, isl, osl)
        assert r["in_flight"] == pytest.approx(n, rel=1e-9)
        assert r["rate"] == pytest.approx(n / r["stage"], rel=1e-9)


def test_a_one_token_output_has_no_time_between_tokens():
    """TPOT of a one-token output is 0 (benchmark_serving.py: TPOT only over outputs of more than one token, and
    the mean of none is taken as 0), with fixed or drawn lengths."""
    pred = silicon.Predictor("roofline")
    assert pred.closed(Toy(), 2, 100, 1)["tpot"] == 0.0
    assert pred.closed(Toy(), 2, 100, 1, spread=0.5)["tpot"] == 0.0


def test_tpot_is_the_time_between_tokens_also_for_a_two_token_output():
    """With steps that do not grow with context (c = 0), one decode row costs a + b each iteration, and that is
    the TPOT of a lone client whatever its output length, two tokens (one gap) included; and over drawn lengths."""
    pred = silicon.Predictor("roofline")
    toy = Toy(a=1e-3, b=1e-6, c=0.0)
    for osl in (2, 3, 9):
        assert pred.closed(toy, 1, 100, osl)["tpot"] == pytest.approx(1e-3 + 1e-6, rel=1e-9)
    assert pred.closed(toy, 1, 100, 4, spread=0.5)["tpot"] == pytest.approx(1e-3 + 1e-6, rel=1e-9)


@pytest.mark.parametrize("profile", [1, silicon.PROFILE_ROUNDS])
def test_drawn_one_token_outputs_are_left_out_of_tpot_as_the_benchmark_leaves_them_out(profile):
    """benchmark_serving.py takes TPOT only over outputs of more than one token. Drawn from 1 ... 2 tokens (ratio
    0.5), half the requests have one: the mean is the two-token requests' a + b, not half of it (each one-token
    request counted as 0), over the steady window and over the whole profiling phase alike."""
    pred = silicon.Predictor("roofline")
    r = pred.closed(Toy(a=1e-3, b=1e-6, c=0.0), 1, 100, 2, spread=0.5, profile=profile)
    assert r["tpot"] == pytest.approx(1e-3 + 1e-6, rel=1e-9)
    assert r["tpot_profile"] == pytest.approx(1e-3 + 1e-6, rel=1e-9)


def test_the_profile_mean_weighs_each_round_as_before_with_the_left_out_requests_dropped():
    """profile_mean over n = 2 clients, one warm-up round, one measured round, a drain round, a phase of 5: head and
    tail count once each, the measured round for the 3 middle rounds. A NaN request drops out with its weight."""
    x = np.array([1.0, 3.0, 10.0, 20.0, 100.0, 300.0])
    assert silicon.profile_mean(x, 2, 1, 1, 5) == pytest.approx((1 + 3 + 3 * (10 + 20) + 100 + 300) / 10)
    x[3] = np.nan
    assert silicon.profile_mean(x, 2, 1, 1, 5) == pytest.approx((1 + 3 + 3 * 10 + 100 + 300) / 7)
    assert silicon.profile_mean(np.full(6, np.nan), 2, 1, 1, 5) == 0.0
    # a phase of one round has no burst or drain to count: the measured round alone, its NaN left out, and 0 when
    # every request of that round is left out (however many of the others are not)
    assert silicon.profile_mean(x, 2, 1, 1, 1) == pytest.approx(10.0)
    x[2] = np.nan
    assert silicon.profile_mean(x, 2, 1, 1, 1) == 0.0
    assert silicon._mean(np.array([np.nan, np.nan])) == 0.0 and silicon._mean(np.array([np.nan, 4.0])) == 4.0


def test_drawn_prompt_and_output_lengths_are_drawn_apart_and_a_two_token_output_is_drawn_too(monkeypatch):
    """With a range ratio, prompts and outputs are each drawn from their ranges in orders of their own (a long
    prompt is not always paired with a long output); an output of 2 tokens at ratio 0.5 is drawn from 1 ... 2."""
    seen = []
    orig = fastsim.run

    def run(arrival, P, O, *a, **k):
        seen.append((np.array(P), np.array(O)))
        return orig(arrival, P, O, *a, **k)

    monkeypatch.setattr(fastsim, "run", run)
    pred = silicon.Predictor("roofline")
    pred.closed(Toy(), 4, 64, 64, spread=0.5)
    P, O = seen[-1]
    assert sorted(P) == sorted(O) and not np.array_equal(P, O)
    pred.closed(Toy(), 4, 64, 2, spread=0.5)
    assert set(seen[-1][1]) == {1, 2}


# ---------------------------------------------------------------- memory and the engine's cap
@pytest.mark.parametrize("isl, osl, per_seq, capacity, want", [
    (20, 5, 500.0, 102_000, 3),  # 2 blocks of 16: 32 x 1,000 + 500 = 32,500 B a request (25,500 if by token: 4)
    (20, 5, 10_000.0, 84_000, 2),  # 42,000 B a request (22,000 without the sequence's state: 3)
    (20, 5, 0.0, 10_000, 1),  # none whole: one is still admitted (the simulation refuses what does not fit alone)
])
def test_no_evict_admits_as_many_requests_as_have_their_whole_isl_plus_osl_cache_in_memory(isl, osl, per_seq,
                                                                                         capacity, want):
    toy = Toy(per_seq=per_seq, capacity=capacity)
    assert silicon.Predictor.no_evict(toy, isl, osl, "trtllm") == want


# ---------------------------------------------------------------- the benchmark's bookkeeping
def test_with_one_warm_up_round_the_phase_mean_still_counts_the_burst():
    n, r = 2, 2
    head, mid, tail = [9.0] * n, [1.0, 3.0] * r, [4.0] * n
    x = np.array(head + mid + tail)
    assert silicon.profile_mean(x, n, 1, r) == pytest.approx((9 * 2 + 18 * 2 * 2.0 + 4 * 2) / 40)


def test_drawn_lengths_are_the_midpoints_of_equal_slices_of_the_range_both_ends_included():
    """5 lengths over 5 ... 10 (6 values): the midpoints of 5 equal slices, 0.6, 1.8, 3.0, 4.2, 5.4 values in,
    are 5, 6, 8, 9 and 10."""
    assert sorted(silicon.spread_lengths(10, 0.5, 5, 0)) == [5, 6, 8, 9, 10]


def test_validation_prices_steps_and_pages_the_cache_as_the_serving_commands_do_by_default():
    """What is validated is what `perfmodel serve` and `perfmodel capacity` run: the same step-cost quantum (contexts
    rounded to 16 tokens in the step memo) and the same 16-token KV blocks, unless told otherwise."""
    import inspect

    from perfmodel.serving import api, capacity

    pred = silicon.Predictor("roofline")
    for f in (api.simulate, capacity.capacity):
        ps = inspect.signature(f).parameters
        assert (pred.quantum, pred.block) == (ps["cost_quantum"].default, ps["block_size"].default), f.__name__


def test_each_mtp_draft_count_emits_more_than_one_token_a_step_and_at_most_its_drafts_plus_one():
    """The published tokens a step (TensorRT-LLM tech blog 1) for the 1 ... 3 drafts the recipes run: each above one
    (a step emits its own token at least), at most k + 1, and more drafts emit more."""
    assert sorted(silicon.MTP_TOKENS) == [1, 2, 3]
    for k, t in silicon.MTP_TOKENS.items():
        assert 1 < t <= k + 1
    assert silicon.MTP_TOKENS[1] < silicon.MTP_TOKENS[2] < silicon.MTP_TOKENS[3]


def test_a_loop_whose_longest_drawn_request_does_not_fit_alone_does_not_fit_whatever_the_first_draw():
    """Lengths drawn from 32 ... 64 tokens (prompt and output): the longest, 64 + 64 - 1 = 127 tokens, needs 8 blocks
    of 16; a cache of 7 blocks (112 tokens) holds the first drawn request but not every one: "does not fit", a result,
    not a crash in the simulation."""
    P, O = silicon.spread_lengths(64, 0.5, 20, 1), silicon.spread_lengths(64, 0.5, 20, 2)
    assert P[0] + O[0] - 1 <= 112  # the first draw alone would fit
    toy = Toy(capacity=7 * 16 * 1000.0)
    with pytest.raises(SpecError, match="does not fit"):
        silicon.Predictor("roofline").closed(toy, 4, 64, 64, spread=0.5)


# ---------------------------------------------------------------- the joint loop (up to JOINT_CLIENTS clients)
def _stages(pre, dec, osl=5, move=0.004, pslots=None, slots=None):
    return {"pre": pre, "dec": dec, "move": move, "osl": osl, "tokens": osl, "drafts": 0, "ahead": False,
            "recv": None, "slots": slots, "pslots": pslots, "spread": None}


@pytest.mark.parametrize("N, Wp", [(1, 1), (4, 1), (6, 2), (16, 4)])
def test_clients_sent_together_stay_in_step_through_both_pools(N, Wp):
    """Prompts of one length sent together run together: N / W_p a prefill worker in one iteration (the budget holds
    them), the transfer, one decode worker's iterations over all N; all N finish together and send again together,
    so every round is the first one. TTFT = tau_p(N / W_p prompts) + move + the decode worker's first iteration
    (Dynamo streams the first token from it); a cycle adds the other osl - 2 iterations, each a context longer, and
    Little's law gives the rate (N / cycle) and the clients in the prefill pool (rate x (tau_p + move))."""
    isl, osl, move = 1000, 5, 0.004
    pre, dec = Toy(a=2e-3, b=1e-6, c=1e-8, budget=64_000), Toy(a=1e-3, b=1e-5, c=1e-8)
    pred = silicon.Predictor("roofline")
    j = pred.joint(_stages(pre, dec, osl, move), N, Wp, 1, isl, silicon.PROFILE_ROUNDS)
    k = N // Wp
    tau_p = 2e-3 + 1e-6 * k * isl + 1e-8 * k * isl  # ToyCost: a + b sum(T) + c sum(S), S = the prompt's context
    tau_d = [1e-3 + 1e-5 * N + 1e-8 * N * (isl + i) for i in range(1, osl)]  # osl - 1 iterations, from isl + 1
    assert j["ttft_profile"] == pytest.approx(tau_p + move + tau_d[0], rel=1e-12)
    cycle = tau_p + move + sum(tau_d)
    assert j["rate"] == pytest.approx(N / cycle, rel=1e-12)
    assert j["prefill_clients"] == pytest.approx(N * (tau_p + move) / cycle, rel=1e-12)
    assert j["tpot_profile"] == pytest.approx(sum(tau_d[1:]) / (osl - 1), rel=1e-12)
    assert j["iterations"] <= pred.warmup + pred.rounds + 2  # one more round exact an iteration, then a check


def test_a_prompt_sent_alone_queues_behind_the_ones_sent_with_it_which_a_steady_share_does_not_see():
    """Four clients in step on one prefill worker that runs one prompt an iteration (pslots 1): the k-th prompt of a
    round waits for the k - 1 before it, so the mean prefill stage is 2.5 prompt times. The pooled balance puts
    under one client on the worker at a time (it serves its share far faster than the decode pool), so it waits
    for no one: the joint loop's TTFT is above it."""
    isl, osl, move = 1000, 5, 0.004
    pre, dec = Toy(a=2e-3, b=1e-6, c=1e-8), Toy(a=1e-2, b=1e-5, c=1e-8)
    pred = silicon.Predictor("roofline")
    j = pred.joint(_stages(pre, dec, osl, move, pslots=1), 4, 1, 1, isl, silicon.PROFILE_ROUNDS)
    tau_p = 2e-3 + 1e-6 * isl + 1e-8 * isl
    # the k-th prompt is done at k tau_p; the decode worker takes each as it comes, so the first tokens come apart:
    # the ttft is at least the mean prefill stage, 2.5 tau_p, plus the transfer
    assert j["ttft_profile"] > 2.5 * tau_p + move
    st = _stages(pre, dec, osl, move, pslots=1)
    bench = dict(profile=silicon.PROFILE_ROUNDS, spread=None)
    prefill = pred.pool(lambda c: pred.closed(pre, c, isl, 1, prefill="separate", slots=1, **bench),
                        lambda r, c: c / (r["stage"] + move))
    decode = pred.pool(lambda c: pred.closed(dec, c, isl, osl, prefilled=True, **bench), lambda r, c: r["rate"])
    pooled = pred.pooled(st, 4, 1, 1, isl, bench, prefill, decode, lambda steady: steady + move)
    assert pooled["prefill_clients"] < 1 and pooled["ttft_s"] < j["ttft_profile"]


def test_a_router_sends_each_request_to_the_worker_with_the_fewest_in_flight_the_lowest_on_ties():
    order = np.arange(6)
    at = np.array([0.0, 0.0, 0.0, 1.0, 2.0, 2.5])
    never = np.full(6, np.inf)  # nothing finishes: round robin
    assert [w.tolist() for w in silicon_disagg.route(order, at, never, 3)] == [[0, 3], [1, 4], [2, 5]]
    # request 0 is done at 0.5: request 3 (at 1.0) finds worker 0 empty; request 4 (at 2.0) finds one on each and
    # takes the lowest, 0; request 5 (at 2.5) finds two there and one on 1 and 2: worker 1
    ends = np.array([0.5, 9.0, 9.0, 9.0, 9.0, 9.0])
    assert [w.tolist() for w in silicon_disagg.route(order, at, ends, 3)] == [[0, 3, 4], [1, 5], [2]]
    assert [w.tolist() for w in silicon_disagg.route(order, at, never, 1)] == [order.tolist()]


def test_up_to_joint_clients_the_loop_is_simulated_jointly_and_above_it_pooled(monkeypatch):
    seen = []
    monkeypatch.setattr(silicon_disagg, "JOINT_CLIENTS", 128)
    monkeypatch.setattr(silicon.Predictor, "joint", lambda self, st, N, *a: seen.append(("joint", N)) or
                        {"ttft_profile": 1.0, "tpot_profile": 0.1, "rate": 2.0, "preempted": 0,
                         "prefill_clients": 0.5})
    monkeypatch.setattr(silicon.Predictor, "pooled", lambda self, st, N, *a: seen.append(("pooled", N)) or
                        {"ttft_s": 3.0, "tpot_s": 0.3})
    pre, dec = Toy(tp=2), Toy(tp=4)
    monkeypatch.setattr(silicon.Predictor, "stages", lambda self, p: _stages(pre, dec))
    out = [silicon.Predictor("achievable")(_point(N=N)) for N in (128, 129)]
    assert seen == [("joint", 128), ("pooled", 129)]
    assert out[0]["ttft_s"] == 1.0 and out[0]["decode_clients"] == 127.5 and out[1]["ttft_s"] == 3.0
    seen.clear()  # bench/disagg_joint.py asks for one or the other whatever the clients
    silicon.Predictor("achievable").disagg(_point(N=4), "pooled")
    silicon.Predictor("achievable").disagg(_point(N=500), "joint")
    assert seen == [("pooled", 4), ("joint", 500)]
    with pytest.raises(ValueError, match="how"):
        silicon.Predictor("achievable").disagg(_point(N=4), "both")


def test_a_joint_loop_that_does_not_settle_in_its_iterations_is_an_error_not_an_answer(monkeypatch):
    monkeypatch.setattr(silicon_disagg, "MAX_JOINT", 1)  # 5 iterations for 5 rounds; in step they need 6: a round
    with pytest.raises(RuntimeError, match="did not settle in 5 iterations"):  # more each, then a check
        silicon.Predictor("roofline").joint(_stages(Toy(), Toy()), 2, 1, 1, 1000, silicon.PROFILE_ROUNDS)


@pytest.mark.parametrize("pre_cap, dec_cap, what", [(5e5, 1e12, "prefill"), (1e12, 5e5, "decode")])
def test_a_prompt_a_worker_cannot_hold_does_not_fit_the_joint_loop(pre_cap, dec_cap, what):
    with pytest.raises(SpecError, match=f"does not fit.*a {what} worker has left"):
        silicon.Predictor("roofline").joint(_stages(Toy(capacity=pre_cap), Toy(capacity=dec_cap)), 2, 1, 1, 1000,
                                            silicon.PROFILE_ROUNDS)
