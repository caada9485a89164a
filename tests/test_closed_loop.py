"""Closed-loop concurrency: N clients, each sending its next request the instant its last one returns.

Little's law holds in the output, the loop keeps exactly N requests in the server, the vectorized twin runs
the same loop request for request, and runs of decode-only iterations priced at once equal the loop."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import perfmodel as pm
from perfmodel import load_hardware, load_model
from perfmodel.cli import main
from perfmodel.ops import Layout, Precision
from perfmodel.serving import StepCost, fastsim, kv_sizes, make_traffic, simulate
from perfmodel.serving.slo import Instance

MODEL_KINDS = ["llama-3.1-8b", "llama-2-13b-mla", "llama-2-13b-swa", "llama-2-13b-cla2", "llama-2-13b-linear",
               "llama-2-13b-hybrid", "qwen3-30b-a3b", "gpt-oss-20b"]  # MHA/GQA, MLA, windows, CLA, linear, MoE


def _run(model="llama-3.1-8b", hw="h100-sxm", n=40, conc=8, prompt="512", out="64", **kw):
    m, h = pm.load_model(model), pm.load_hardware(hw)
    tr = make_traffic(n, None, None, prompt, out, 1, 0, 1)
    return simulate(m, h, tr, "continuous", None, "paged", 16, True, "chunked", kw.pop("budget", 2048),
                    concurrency=conc, **kw)


def test_request_n_plus_k_is_sent_when_the_kth_returns():
    r = _run(n=40, conc=8, out="uniform:8,96")
    sent, done = r.requests["arrival_s"], r.requests["done_s"]
    assert np.all(sent[:8] == 0.0)
    assert np.array_equal(sent[8:], np.sort(done)[:32])  # the k-th return sends request 8 + k


def test_the_server_never_holds_more_requests_than_clients():
    r = _run(n=60, conc=12, out="lognormal:median=40,max=200")
    t = r.timeline
    assert np.max(t["running"] + t["waiting"]) <= 12
    assert np.max(t["running"] + t["waiting"]) == 12  # and the loop keeps them all busy


@pytest.mark.parametrize("conc", [1, 4, 16])
def test_littles_law_throughput_times_mean_e2e_is_the_concurrency(conc):
    """Over the measured window X x mean(E2E) is the mean number in flight (an identity), which is the
    concurrency less the ramp and drain at the window's ends, each at most the longest E2E."""
    s = pm.serve_sim("llama-3.1-8b", "h100-sxm", "continuous", requests=30 * conc, slots=None, prompt_len="256",
                     output_len="uniform:16,128", concurrency=conc).iloc[0]
    x, e2e = s.request_rate, s.mean_latency_s
    assert math.isclose(x * e2e, s.mean_in_flight, rel_tol=1e-9)
    window = (30 * conc - s.warmup) / x
    bound = 2 * s.p99_latency_s * 1.5 / window  # 2 max(E2E) / window, with the longest E2E under 1.5 x p99
    assert abs(x * e2e - conc) / conc <= bound
    assert s.mean_in_flight <= conc + 1e-9


def test_warmup_requests_are_left_out_of_the_statistics():
    r = _run(n=30, conc=6, warmup=12)
    assert r.summary["warmup"] == 12
    lat = r.requests["latency_s"][12:]
    assert math.isclose(r.summary["mean_latency_s"], float(lat.mean()), rel_tol=1e-12)
    assert r.summary["tokens"] == int(r.requests["output_tokens"][12:].sum())


def test_per_device_and_per_user_throughput():
    s = pm.serve_sim("llama-3.1-70b", "h100-sxm", "continuous", slots=None, prompt_len="512", output_len="64",
                     concurrency=16, tp=2, replicas=2).iloc[0]
    assert s.concurrency == 16 and s.devices == 4
    assert math.isclose(s.throughput_per_device, s.throughput_tok_s / 4)
    assert math.isclose(s.tok_s_per_user, 1 / s.mean_tpot_s)


def test_the_static_policy_also_runs_a_closed_loop():
    m, h = pm.load_model("llama-3.1-8b"), pm.load_hardware("h100-sxm")
    tr = make_traffic(24, None, None, "256", "32", 1, 0, 0)
    r = simulate(m, h, tr, "static", 8, concurrency=8)
    sent, done = r.requests["arrival_s"], r.requests["done_s"]
    assert np.array_equal(sent[8:16], done[:8]) and np.array_equal(sent[16:], done[8:16])  # batch after batch


@pytest.mark.parametrize("prefill,budget", [("chunked", 512), ("separate", 4096), ("chunked", None)])
def test_fastsim_runs_the_same_closed_loop_request_for_request(prefill, budget):
    m, h = pm.load_model("llama-2-13b"), pm.load_hardware("l40s")
    cost = StepCost(m, h, Precision(), 16)
    tr = make_traffic(90, None, None, "lognormal:median=600,max=2500", "lognormal:median=200,max=1500", 1, 0, 3)
    ref = simulate(m, h, tr, "continuous", None, "paged", 16, True, prefill, budget, cost=cost, concurrency=24).requests
    got = fastsim.run(tr.arrival, tr.prompt, tr.outputs[:, 0], kv_sizes(m, h), fastsim.ExactCost(cost), None, budget,
                      prefill, concurrency=24)
    assert np.array_equal(ref["arrival_s"], got["arrival"])
    for a, b in (("first_token_s", "first"), ("last_token_s", "last"), ("done_s", "done")):
        assert np.array_equal(ref[a], got[b]), a


@pytest.mark.parametrize("model", MODEL_KINDS)
def test_decode_runs_priced_at_once_equal_the_iterations_one_by_one(model):
    """FastCost.decode_steps(S0, k)[j] is the time of the decode iteration whose rows are at S0 + j."""
    m, h = pm.load_model(model), pm.load_hardware("h100-sxm")
    lay = Layout()
    fast = fastsim.FastCost(StepCost(m, h, Precision(), 16, lay), 2048)
    rng = np.random.default_rng(7)
    S0 = rng.integers(1, 3000, size=37)
    got = fast.decode_steps(S0, 70)
    if not fast.fast_decode:
        assert got is None
        return
    one = np.ones(S0.size, dtype=np.int64)
    ref = np.array([fast(one, S0 + j) for j in range(70)])
    assert np.allclose(got, ref, rtol=1e-9, atol=0)


@settings(derandomize=True, max_examples=15, deadline=None)
@given(st.integers(1, 24), st.integers(2, 300), st.integers(16, 1500), st.sampled_from(MODEL_KINDS[:4]))
def test_leaping_over_decode_runs_changes_no_request_time(conc, out, prompt, model):
    m, h = pm.load_model(model), pm.load_hardware("h100-sxm")
    inst = Instance(m, h, Precision(), Layout(), "roofline", None, 16, 2048, None, 16)
    n = 4 * conc
    args = (np.zeros(n), np.full(n, prompt), np.full(n, out), inst.sizes, inst.cost, None, 2048, "chunked", 16)
    a = fastsim.run(*args, concurrency=conc, leap=False)
    b = fastsim.run(*args, concurrency=conc, leap=True)
    assert a["steps"] == b["steps"] and a["generated"] == b["generated"]
    for k in ("arrival", "first", "last", "done"):
        assert np.allclose(a[k], b[k], rtol=1e-9, atol=1e-12), k


def test_evicting_every_priced_block_at_once_changes_no_request_time(monkeypatch):
    # FastCost keeps blocks of priced steps (least recently used dropped past MAX_*_BLOCKS) only to save work: with
    # no block kept at all the closed loop's every time is the same (the bounds are marked equivalent for mutation)
    m, h = pm.load_model("llama-3.1-8b"), pm.load_hardware("h100-sxm")

    def loop():
        inst = Instance(m, h, Precision(), Layout(), "roofline", None, 16, 2048, None, 16)
        args = (np.zeros(48), np.full(48, 700), np.full(48, 90), inst.sizes, inst.cost, None, 2048, "chunked", 16)
        return fastsim.run(*args, concurrency=12)

    want = loop()
    monkeypatch.setattr(fastsim.FastCost, "MAX_DECODE_BLOCKS", 0)
    monkeypatch.setattr(fastsim.FastCost, "MAX_PREFILL_BLOCKS", 0)
    got = loop()
    assert got["steps"] == want["steps"]
    for k in ("first", "last", "done"):
        assert np.array_equal(got[k], want[k]), k


@pytest.mark.parametrize("argv, msg", [
    (["--concurrency", "0"], "--concurrency: must be a whole number >= 1"),
    (["--concurrency", "4", "--rate", "2"], "--concurrency: N clients send as fast as their requests return"),
    (["--warmup", "3"], "--warmup: is for a closed loop"),
    (["--concurrency", "4", "--requests", "8"], "--requests: 8 requests per replica leave none to measure"),
    (["--concurrency", "5", "--replicas", "2"], "--concurrency: 5 clients do not split evenly over 2 replicas"),
    (["--concurrency", "x"], "--concurrency: must be a whole number"),
])
def test_bad_closed_loop_input_gets_one_line_and_exit_2(capsys, argv, msg):
    assert main(["serve-sim", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert msg in err and len(err.splitlines()) == 1


def test_serve_sim_cli_reports_the_closed_loop(capsys):
    assert main(["serve-sim", "-m", "llama-3.1-8b", "--concurrency", "8", "--policy", "continuous", "--slots", "none",
                 "--prompt-len", "256", "--output-len", "32"]) == 0
    out = capsys.readouterr().out
    assert "clients" in out and "tokens/s/user" in out and "Little's law" in out


def _lpt_reference(T, S, ep):
    """The busiest group by greedy longest-first assignment, written plainly (np.argmin over the loads)."""
    load, owner = np.zeros(ep), np.empty(T.size, dtype=int)
    for i in np.argsort(-(T * S), kind="stable"):
        k = int(np.argmin(load))
        owner[i], load[k] = k, load[k] + T[i] * S[i]
    return owner == int(np.argmax(load))


@settings(derandomize=True, max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 64), st.integers(1, 5000)), min_size=1, max_size=80), st.integers(1, 9))
def test_the_busiest_attention_group_is_greedy_longest_first(rows, ep):
    from perfmodel import engine

    T, S = (np.array(x, dtype=np.float64) for x in zip(*rows))
    assert np.array_equal(engine._busiest_group(T, S, ep), _lpt_reference(T, S, ep) if ep > 1 else np.ones(T.size, bool))


@settings(derandomize=True, max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=70), st.integers(1, 9), st.integers(1, 30),
       st.sampled_from([1, 16, 64]))
def test_a_run_of_decode_steps_finds_each_iteration_s_busiest_group_as_one_step_does(S0, ep, k, q):
    """The busiest attention group of k decode iterations at rounded contexts ceil((S0 + j) / q) q, found for all k
    at once (fastcost._busiest_groups), is engine's greedy one of each iteration to the row: small contexts and
    quanta make ties, which the lower row and the lower group win in both."""
    from perfmodel import engine
    from perfmodel.serving.fastcost import _busiest_groups

    Ss = np.sort(np.array(S0, dtype=np.int64))
    kj = -(-(Ss[None, :] + np.arange(k)[:, None]) // q)
    got = _busiest_groups(kj * float(q), ep)
    for j in range(k):
        assert np.array_equal(got[j], engine._busiest_group(np.ones(Ss.size), kj[j] * float(q), ep)), j


@pytest.mark.parametrize("model,lay", [("qwen3-30b-a3b", Layout(1, 1, 4, 1)), ("deepseek-v2-lite", Layout(2, 1, 2, 1))])
def test_decode_steps_with_attention_data_parallel_are_stepcost_to_1e9(model, lay):
    """With ep attention groups a decode step prices the busiest group's rows, as MixedStep does."""
    m, h = pm.load_model(model), pm.load_hardware("h100-sxm")
    ref = StepCost(m, h, Precision(), 16, lay)
    fast = fastsim.FastCost(StepCost(m, h, Precision(), 16, lay), 2048)
    assert fast.fast_decode and not fast.fast
    rng = np.random.default_rng(3)
    for _ in range(20):
        n = int(rng.integers(1, 70))
        S = rng.integers(1, 4000, size=n)
        got = fast(np.ones(n, dtype=np.int64), S)
        assert math.isclose(got, ref([(1, int(s)) for s in S]), rel_tol=1e-9)


def test_capacity_at_a_concurrency_says_whether_each_layout_meets_the_slos():
    kw = dict(prompt_len=512, output_len=128, seeds=1, concurrency=32)
    ok = pm.capacity("llama-3.1-8b", "h100-sxm", tp=1, slo_ttft="5s", slo_tpot="200ms", **kw)
    assert ok.binding[0] == "none" and ok.ttft_s[0] <= 5 and ok.tpot_s[0] <= 0.2
    assert ok.goodput_rps[0] > 0 and math.isclose(ok.goodput_per_device[0], ok.goodput_rps[0])
    assert ok.attrs["summary"]["concurrency"] == 32
    # a prompt alone prefills within 10 ms (8.2 TFLOP at 989 TFLOP/s), 32 clients' prompts queue behind each other
    tight = pm.capacity("llama-3.1-8b", "h100-sxm", tp=1, slo_ttft="10ms", slo_tpot="200ms", **kw)
    assert tight.binding[0] == "ttft" and math.isnan(tight.goodput_rps[0]) and tight.ttft_s[0] > 0.01


def test_capacity_at_a_concurrency_serves_what_littles_law_allows():
    """The request rate N clients get is N / mean E2E: at most N / (mean TTFT + (OSL - 1) x mean TPOT)."""
    c = pm.capacity("llama-3.1-8b", "h100-sxm", tp=1, prompt_len=512, output_len=64, seeds=1, concurrency=16,
                    slo_ttft="10s", slo_tpot="1s")
    s = pm.serve_sim("llama-3.1-8b", "h100-sxm", "continuous", requests=400, slots=256, prompt_len=512,
                     output_len=64, concurrency=16, token_budget=2048).iloc[0]
    assert math.isclose(c.goodput_rps[0], s.request_rate, rel_tol=0.05)


@pytest.mark.parametrize("n,ep", [(300, 8), (1000, 4), (4096, 16)])
def test_above_256_rows_the_busiest_group_by_rank_is_within_one_row_of_greedy(n, ep):
    """Both assignments leave the busiest group between total / ep and total / ep + one row of attention."""
    m, h = pm.load_model("deepseek-v2-lite"), pm.load_hardware("h100-sxm")
    lay = Layout(1, 1, ep, 1)
    ref = StepCost(m, h, Precision(), 16, lay)
    fast = fastsim.FastCost(StepCost(m, h, Precision(), 16, lay), 2048)
    S = np.random.default_rng(n).integers(1, 6000, size=n)
    got, want = fast(np.ones(n, dtype=np.int64), S), ref([(1, int(s)) for s in S])
    one = ref([(1, int(S.max()))]) - ref([(1, 1)])  # more than one row's attention at the longest context
    assert abs(got - want) <= one


def test_a_decode_run_with_attention_data_parallel_is_priced_at_once_by_rank():
    m, h = pm.load_model("deepseek-v2-lite"), pm.load_hardware("h100-sxm")
    fast = fastsim.FastCost(StepCost(m, h, Precision(), 16, Layout(1, 1, 4, 1)), 2048)
    S0 = np.random.default_rng(1).integers(1, 3000, size=400)
    got = fast.decode_steps(S0, 40)
    ref = np.array([fast(np.ones(400, dtype=np.int64), S0 + j) for j in range(40)])
    assert np.allclose(got, ref, rtol=1e-9, atol=0)
    # up to 256 rows MixedStep's greedy groups, found again per iteration whenever a rounded context steps up:
    # still what the iterations one at a time give (before, such runs went one call per iteration)
    few = S0[:100]
    got = fast.decode_steps(few, 40)
    ref = np.array([fast(np.ones(100, dtype=np.int64), few + j) for j in range(40)])
    assert got is not None and np.allclose(got, ref, rtol=1e-9, atol=0)


@pytest.mark.parametrize("conc, requests, n_seeds", [(8, None, 3), (8, 450, 2), (50, None, 3)])
def test_capacity_at_a_concurrency_is_each_seed_s_closed_loop_over_its_measured_window(conc, requests, n_seeds):
    """Per replica c = N / R clients, n = max(requests, 10 c, 200) requests a seed, the first 2 c left out as the
    warm-up and the last c as the drain; a seed's rate is c / mean E2E over the window, its TTFT and TPOT the
    window's percentiles (TPOT over the requests of two tokens or more). The row is the median seed's (by TTFT then
    TPOT over their SLOs; of two, the first), R times its rate, the band the seeds' slowest and fastest; the requests
    simulated n R. When an SLO breaks, the row names it and its value."""
    from perfmodel.serving import capacity as cap
    from perfmodel.serving.slo import Workload, _pct

    R, kw = 2, dict(prompt_len="uniform:32,256", output_len="uniform:1,64", slo_ttft="2s", slo_tpot="100ms")
    row = pm.capacity("llama-3.2-1b", "l4", tp=1, replicas=R, seeds=n_seeds, concurrency=conc, requests=requests,
                      slots=32, token_budget=2048, price=1.5, **kw).iloc[0]
    wl = Workload(kw["prompt_len"], kw["output_len"], kw["slo_ttft"], kw["slo_tpot"], 99, n_seeds, 0, requests, 0.05)
    knobs = {"slots": 32, "budget": 2048, "block": 16, "quantum": 16}
    inst = cap.prepare(load_model("llama-3.2-1b"), load_hardware("l4"), Precision("bf16", "bf16", "bf16"),
                       Layout(tp=1, replicas=R), "roofline", None, wl, knobs, {})[0]
    c = conc // R
    n = max(requests or 0, 10 * c, 200)
    w = slice(2 * c, n - c)
    seeds, broken = [], 0
    for seed in range(n_seeds):
        _, P, O = wl.trace(n, 1.0, seed)
        r = fastsim.run(np.zeros(n), P, O, inst.sizes, inst.cost, inst.slots, inst.budget, "chunked", inst.block,
                        concurrency=c)
        o = O[w]
        tpot = ((r["last"][w] - r["first"][w]) / np.maximum(o - 1, 1))[o > 1]
        seeds.append((_pct(r["first"][w] - r["arrival"][w], 99), _pct(tpot, 99),
                      c / float(np.mean(r["done"][w] - r["arrival"][w])), float(o.mean())))
    mid = sorted(seeds, key=lambda s: (s[0] / 2.0, s[1] / 0.1))[(n_seeds - 1) // 2]
    assert row.binding == "none" and row.requests == n * R and row.devices == R
    assert (row.ttft_s, row.tpot_s) == pytest.approx(mid[:2], rel=1e-9)
    assert row.goodput_rps == pytest.approx(R * mid[2], rel=1e-9)
    assert row.goodput_per_device == pytest.approx(mid[2], rel=1e-9)
    assert row.output_tok_s == pytest.approx(R * mid[2] * mid[3], rel=1e-9)
    assert (row.goodput_lo_rps, row.goodput_hi_rps) == pytest.approx((R * min(s[2] for s in seeds),
                                                                      R * max(s[2] for s in seeds)), rel=1e-9)
    assert row.goodput_lo_rps < row.goodput_hi_rps
    assert row.cost_per_million_tokens == pytest.approx(R * 1.5 / 3600 / (row.output_tok_s / 1e6), rel=1e-9)
    for slo in ("slo_ttft", "slo_tpot"):  # 0.9 x the median seed's: that SLO breaks, and the row says by how much
        tight = pm.capacity("llama-3.2-1b", "l4", tp=1, replicas=R, seeds=n_seeds, concurrency=conc,
                            requests=requests, slots=32, token_budget=2048,
                            **{**kw, slo: f"{0.9 * mid[0 if slo == 'slo_ttft' else 1]}s"}).iloc[0]
        if tight.binding == "none reached":  # the p99 prompt alone, or one decode step, already breaks it
            continue
        term = slo[4:]
        assert tight.binding == term and tight.binding_value_s == pytest.approx(tight[f"{term}_s"], rel=1e-12)
        assert math.isnan(tight.goodput_rps) and f"{conc} clients break the {term} SLO" in tight.note
        broken += 1
    assert broken == (1 if conc == 50 else 0)  # at 4 clients a replica 0.9 x either is below the analytic bound
