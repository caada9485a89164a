"""Capacity under latency SLOs (issue 18): the vectorized simulator equals the serving simulator, the
goodput search's answer holds in the serving simulator and fails just above it, the laws (replicas,
looser SLOs, more devices), disaggregated pools with their KV transfer, and bad input."""
import inspect
import json
import math
import warnings

import numpy as np
import pytest

import perfmodel as pm
from perfmodel import load_hardware, load_model
from perfmodel.cli import main
from perfmodel.errors import DataWarning, SpecError
from perfmodel.ops import Layout, Precision
from perfmodel.serving import StepCost, capacity as cap, disagg, fastsim, kv_sizes, make_traffic, simulate

SMALL = dict(model="llama-3.2-1b", hardware="l4", tp=1, prompt_len="uniform:32,128",
             output_len="lognormal:median=16,max=64", slots=32, slo_ttft="0.25s", slo_tpot="50ms")


@pytest.fixture(scope="module")
def small():
    """One searched layout (kept for the checks below): three seeds of 1,200-request traces."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t, s = cap.run(SMALL["model"], SMALL["hardware"], None, 1, 1, 1, 1, SMALL["prompt_len"], SMALL["output_len"],
                       SMALL["slo_ttft"], SMALL["slo_tpot"], 99, "roofline", None, False, None, SMALL["slots"], 2048,
                       1200, 3, 0, 0.05, 16, 16, "bf16", None, "bf16", None, None, keep=True)
    return t, s


def _window_percentiles(req: dict, n: int, q=99.0):
    w = slice(int(n * cap.WARM), n - int(n * cap.WARM))
    ttft = req["first_token_s"][w] - req["arrival_s"][w]
    out = req["output_tokens"][w]
    tpot = ((req["last_token_s"][w] - req["first_token_s"][w]) / np.maximum(out - 1, 1))[out > 1]
    return float(np.percentile(ttft, q)), float(np.percentile(tpot, q))


def _serve(rate: float, n: int, seed: int):
    """The serving simulator itself (scheduler.simulate) on the search's traffic at `rate`."""
    m, hw = load_model(SMALL["model"]), load_hardware(SMALL["hardware"])
    tr = make_traffic(n, rate, None, SMALL["prompt_len"], SMALL["output_len"], 1, 0, seed)
    return simulate(m, hw, tr, "continuous", SMALL["slots"], "paged", 16, True, "chunked", 2048).requests


# ---------------------------------------------------------------- the vectorized simulator
@pytest.mark.parametrize("model,hw,slots,budget,prefill,P,O", [
    ("llama-2-13b", "l40s", None, 512, "chunked", "lognormal:median=600,max=2500", "lognormal:median=200,max=1500"),
    ("llama-2-13b", "l40s", None, 4096, "separate", "lognormal:median=600,max=2500", "lognormal:median=200,max=1500"),
    ("llama-3.1-8b", "h100-sxm", 16, None, "chunked", "uniform:16,900", "lognormal:median=40,max=400"),
])
def test_fastsim_gives_the_serving_simulators_times_request_for_request(model, hw, slots, budget, prefill, P, O):
    m, h = load_model(model), load_hardware(hw)
    cost = StepCost(m, h, Precision(), 16)
    tr = make_traffic(120, 30.0, None, P, O, 1, 0, 3)
    ref = simulate(m, h, tr, "continuous", slots, "paged", 16, True, prefill, budget, cost=cost).requests
    got = fastsim.run(tr.arrival, tr.prompt, tr.outputs[:, 0], kv_sizes(m, h), fastsim.ExactCost(cost), slots, budget,
                      prefill)
    for a, b in (("first_token_s", "first"), ("last_token_s", "last"), ("done_s", "done"), ("preemptions", "preemptions")):
        assert np.array_equal(ref[a], got[b]), a
    if model == "llama-2-13b":
        assert got["preempted"] > 0  # the case exercises preemption and recomputation


@pytest.mark.parametrize("model,hw,lay,mode", [
    ("llama-3.1-8b", "h100-sxm", Layout(), "roofline"),
    ("llama-3.1-8b", "h100-sxm", Layout(), "achievable"),
    ("llama-3.1-70b", "h200", Layout(4, 1, 1, 1), "roofline"),
    ("mistral-7b", "h100-sxm", Layout(), "roofline"),  # a sliding window: prefill rows take the exact per-row terms
    ("llama-2-13b-mla", "a100-80gb-sxm", Layout(), "roofline"),
])
def test_the_vectorized_step_cost_is_stepcost_to_1e9(model, hw, lay, mode):
    m, h = load_model(model), load_hardware(hw)
    ref = StepCost(m, h, Precision(), 16, lay, mode)
    fast = fastsim.FastCost(StepCost(m, h, Precision(), 16, lay, mode), 2048)
    rng = np.random.default_rng(5)
    for _ in range(25):
        nd = int(rng.integers(0, 60))
        npre = int(rng.integers(0, 3)) if nd else int(rng.integers(1, 3))
        T = np.concatenate([np.ones(nd, dtype=np.int64), rng.integers(2, 900, npre)])
        S = np.concatenate([rng.integers(1, 3000, nd), T[nd:] + rng.integers(0, 2000, npre)])
        a, b = ref(list(zip(T.tolist(), S.tolist()))), fast(T, S)
        assert b == pytest.approx(a, rel=1e-9), (T, S)


@pytest.mark.parametrize("model,hw,mode", [
    ("llama-2-13b", "a100-80gb-sxm", "roofline"),  # MHA
    ("llama-3.1-8b", "h100-sxm", "achievable"),  # GQA
    ("llama-2-13b-mla", "h100-sxm", "roofline"),  # MLA
    ("llama-2-13b-cla2", "h100-sxm", "achievable"),  # CLA
    ("llama-2-13b-swa", "h100-sxm", "roofline"),  # windows: not affine in the context, priced row by row
    ("llama-2-13b-hybrid", "h100-sxm", "roofline"),
    ("llama-2-13b-linear", "h100-sxm", "achievable"),
    ("qwen3-30b-a3b", "h200", "achievable"),  # MoE
    ("gpt-oss-20b", "h200", "roofline"),  # sinks and windows
])
def test_a_decode_only_step_priced_from_its_row_count_and_summed_contexts_is_stepcost_to_1e12(model, hw, mode):
    """Full attention's decode terms grow linearly with the rounded context, so a decode-only step's time depends on
    (rows, sum of rounded contexts) alone: FastCost.decode_only prices it from that pair (fastsim.py), which must equal
    the row-by-row op list up to float rounding, for every attention kind; where the terms are not linear (windows)
    it must fall back to the rows."""
    m, h = load_model(model), load_hardware(hw)
    ref = StepCost(m, h, Precision(), 16, Layout(), mode)
    fast = fastsim.FastCost(StepCost(m, h, Precision(), 16, Layout(), mode), 2048)
    rng = np.random.default_rng(11)
    for n in [1, 2, 7, 64, 255]:
        for _ in range(4):
            S = rng.integers(1, 20000, n)
            fast(np.ones(n, dtype=np.int64), S)  # builds the context table far enough
            a, b = ref([(1, int(s)) for s in S]), fast.decode_only(S)
            assert b == pytest.approx(a, rel=1e-12, abs=0), (n, S)
    assert (fast._affine is False) == (model in ("llama-2-13b-swa", "llama-2-13b-hybrid", "gpt-oss-20b"))


def test_stopping_early_never_changes_the_verdict(small):
    t, s = small
    e = s["searches"][0]
    inst, n, wl = e["_instance"], e["_n"], s["workload"]
    g = t["goodput_rps"][0]
    for rate in (0.7 * g, g, 1.5 * g, 3 * g):
        quick = cap.simulate_rate(inst, wl, n, rate, 0, stop=True)
        full = cap.simulate_rate(inst, wl, n, rate, 0, stop=False)
        assert quick["ok"] == full["ok"]
        if quick["exact"]:
            assert (quick["ttft"], quick["tpot"]) == (full["ttft"], full["tpot"])


# ---------------------------------------------------------------- the search, checked in the serving simulator
def test_at_the_goodput_the_serving_simulator_meets_the_slos_and_at_1_1x_it_does_not(small):
    t, s = small
    g, seed, n = t["goodput_rps"][0], int(t["median_seed"][0]), int(t["requests"][0])
    assert not t["hit_bound"][0] and t["binding"][0] in ("ttft", "tpot", "memory")
    assert g <= t["fail_rps"][0] <= 1.05 * g * (1 + 1e-12)
    ttft, tpot = _window_percentiles(_serve(g, n, seed), n)
    assert ttft <= 0.25 and tpot <= 0.05
    assert (ttft, tpot) == pytest.approx((t["ttft_s"][0], t["tpot_s"][0]), rel=1e-9)
    ttft, tpot = _window_percentiles(_serve(1.1 * g, n, seed), n)
    assert ttft > 0.25 or tpot > 0.05
    assert t["goodput_lo_rps"][0] <= g <= t["goodput_hi_rps"][0]


def test_r_replicas_with_poisson_traffic_split_among_them_serve_r_times_the_goodput(small):
    """Each replica of R gets a random share of one Poisson stream (Poisson at rate / R): pooled over the
    replicas, the SLOs hold at R x the lowest seed's goodput less the tolerance and fail at 1.1 x R x the
    highest's. Splitting round robin (smoother arrivals) is never worse."""
    t, s = small
    e = s["searches"][0]
    inst, n, wl = e["_instance"], e["_n"], s["workload"]
    R = 2

    def pooled(rate, split):
        arr, P, O = wl.trace(R * n, rate, 11)
        who = np.random.default_rng(4).integers(0, R, R * n) if split == "random" else np.arange(R * n) % R
        tt, td = [], []
        for k in range(R):
            i = np.flatnonzero(who == k)
            r = fastsim.run(arr[i] - arr[i][0], P[i], O[i], inst.sizes, inst.cost, inst.slots, inst.budget)
            w = wl.window(i.size)
            tt.append(r["first"][w] - (arr[i] - arr[i][0])[w])
            o = O[i][w]
            td.append(((r["last"][w] - r["first"][w]) / np.maximum(o - 1, 1))[o > 1])
        return float(np.percentile(np.concatenate(tt), 99)), float(np.percentile(np.concatenate(td), 99))

    for split in ("random", "round robin"):
        a, b = pooled(R * t["goodput_lo_rps"][0] / (1 + wl.tol), split)
        assert a <= wl.slo_ttft and b <= wl.slo_tpot, split
    a, b = pooled(1.1 * R * t["goodput_hi_rps"][0], "random")
    assert a > wl.slo_ttft or b > wl.slo_tpot
    two = pm.capacity(**{**SMALL, "replicas": 2}, seeds=1, requests=300)
    one = pm.capacity(**SMALL, seeds=1, requests=300)
    assert two.goodput_rps[0] == pytest.approx(2 * one.goodput_rps[0], rel=1e-12) and two.devices[0] == 2


def test_r_replicas_multiply_every_rate_and_leave_every_per_replica_figure_as_it_is():
    """R replicas of one searched layout: R times its goodput (and the band around it, the output tokens, the rate
    that fails, the requests simulated); the same goodput per device, cost per token, latencies and binding."""
    kw = dict(SMALL, seeds=1, requests=300, price=2.0)
    one, two = pm.capacity(**kw), pm.capacity(**{**kw, "replicas": 2})
    for c in ("goodput_rps", "goodput_lo_rps", "goodput_hi_rps", "output_tok_s", "fail_rps"):
        assert two[c][0] == pytest.approx(2 * one[c][0], rel=1e-12), c
    assert (two.requests[0], two.devices[0]) == (2 * one.requests[0], 2 * one.devices[0])
    for c in ("goodput_per_device", "cost_per_million_tokens", "binding_value_s", "ttft_s", "tpot_s"):
        assert two[c][0] == pytest.approx(one[c][0], rel=1e-12) and one[c][0] > 0, c
    assert two.binding[0] == one.binding[0] == "ttft"
    assert one.binding_value_s[0] > 0.25  # the TTFT that broke its SLO at the failing rate
    assert 1.0 <= one.output_tok_s[0] / one.goodput_rps[0] <= 64  # tokens a request: within the output lengths


def test_a_trace_shorter_than_the_queue_it_builds_is_said_and_the_advised_length_is_enough():
    """The warm-up (WARM of the trace) must outlast the queue at the goodput: with more requests in the system than
    1.5 x the warm-up the row says so, warns, and names a length; at that length it no longer does."""
    import re

    from perfmodel.errors import LoadWarning

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        short = pm.capacity(**SMALL, seeds=1, requests=120)
    note = short.note[0]
    m = re.match(r"trace too short for steady state: (\d+) requests in the system at the goodput, more than the "
                 r"(\d+) of the warm-up \(pass --requests (\d+) or more\)", note)
    assert m and int(m[2]) == int(120 * cap.WARM) and int(m[1]) > 1.5 * int(m[2]), note
    assert any(issubclass(x.category, LoadWarning) and "trace too short" in str(x.message) for x in w)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        enough = pm.capacity(**SMALL, seeds=1, requests=int(m[3]))
    assert enough.note[0] == "" and not [x for x in w if issubclass(x.category, LoadWarning)]


def test_the_rows_kept_for_plots_are_the_rows_the_task_path_gives(small):
    """capacity(keep=True) (plots) searches each layout in this process; capacity() hands the seeds out as tasks,
    the first seed first and the others from its answer: the same rows either way, three seeds included."""
    t, _ = small
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = pm.capacity(**SMALL, requests=1200, seeds=3, token_budget=2048)
    for col in ("goodput_rps", "goodput_lo_rps", "goodput_hi_rps", "ttft_s", "tpot_s", "fail_rps", "binding_value_s"):
        assert c[col][0] == pytest.approx(t[col][0], rel=1e-12), col
    assert c.binding[0] == t["binding"][0] and c.goodput_lo_rps[0] < c.goodput_hi_rps[0]


def test_without_a_layout_one_device_is_searched_and_gpus_n_searches_every_layout_without_pipeline_stages():
    kw = {k: v for k, v in SMALL.items() if k != "tp"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        one = pm.capacity(**kw, seeds=1, requests=300)
        four = pm.capacity(**kw, gpus=4, seeds=1, requests=300)
    assert (one.tp[0], one.devices[0]) == (1, 1) and one.attrs["summary"]["pipeline_layouts_left_out"] == 0
    from perfmodel.parallel import layouts

    lays = layouts(load_model(SMALL["model"]), 4)
    assert len(four) == sum(l.pp == 1 for l in lays) and set(four.devices) == {4}
    assert four.attrs["summary"]["pipeline_layouts_left_out"] == sum(l.pp > 1 for l in lays) > 0


def test_one_given_layout_disaggregated_splits_its_own_devices_into_the_pools():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = pm.capacity(**{**SMALL, "tp": 2}, disaggregate=True, seeds=1, requests=300)
    dis = c[c.serving == "disaggregated"]
    assert len(dis) == 1 and dis.devices.iloc[0] == 2 and (dis.prefill_tp.iloc[0], dis.decode_tp.iloc[0]) == (1, 1)


def test_a_capacity_search_enumerates_up_to_4096_devices_and_refuses_more_naming_gpus():
    with pytest.raises(SpecError) as e:
        pm.capacity("llama-3.2-1b", "l4", gpus=4097, seeds=1)
    assert "4,097 is over the 4,096 devices" in e.value.problem
    with pytest.raises(SpecError) as e:  # 4,096 is enumerated: L4 nodes need a network for tp 16 groups
        pm.capacity("llama-3.2-1b", "l4", gpus=4096, seeds=1)
    assert "over the 4,096" not in e.value.problem and "network_bandwidth" in str(e.value)


def test_a_looser_slo_never_lowers_the_goodput():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = [pm.capacity(**{**SMALL, "slo_ttft": a, "slo_tpot": b}, seeds=1, requests=300).goodput_rps[0]
             for a, b in (("0.25s", "20ms"), ("0.25s", "50ms"), ("400ms", "50ms"))]
    assert g[1] >= g[0] and g[2] >= g[1] and g[2] > g[0]


def test_more_devices_never_lower_the_best_goodput():
    kw = {k: v for k, v in SMALL.items() if k != "tp"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        best = [np.nanmax(pm.capacity(**kw, gpus=n, seeds=1, requests=300).goodput_rps) for n in (1, 2)]
    assert best[0] <= best[1]


# ---------------------------------------------------------------- no goodput: said, with what binds
def test_tpot_at_batch_one_beyond_the_slo_is_none_reached_naming_it():
    c = pm.capacity(**{**SMALL, "slo_tpot": "1ms"}, seeds=1)
    assert c.binding[0] == "none reached" and "TPOT at batch 1" in c.note[0] and c.binding_value_s[0] > 1e-3
    assert math.isnan(c.goodput_rps[0]) and not c.hit_bound[0]  # no search ran, so none hit the analytic bound


def test_a_model_that_does_not_fit_is_a_row_not_an_error():
    c = pm.capacity("llama-3.1-70b", "l4", tp=1, prompt_len=512, output_len=64, seeds=1)
    assert c.binding[0] == "does not fit" and c.note[0] == "weights 141.1 GB per device, memory 24.15 GB"  # 23034 MiB
    assert not c.hit_bound[0] and c.search[0] == "none"
    c = pm.capacity("llama-3.1-8b", "l4", tp=1, prompt_len="60000", output_len="10000", seeds=1)  # 9.2 GB of KV
    assert c.binding[0] == "does not fit" and "longest request" in c.note[0] and not c.hit_bound[0]


def test_a_ttft_slo_no_rate_meets_names_ttft_and_its_value():
    c = pm.capacity(**{**SMALL, "prompt_len": "uniform:900,1000", "slo_ttft": "12ms"}, seeds=1, requests=300)
    assert c.binding[0] == "none reached" and "TTFT" in c.note[0] and c.binding_value_s[0] > 0.012


# ---------------------------------------------------------------- disaggregated pools
def test_the_kv_transfer_is_a_send_op_on_the_link_it_crosses():
    m, hw = load_model("llama-3.1-70b"), load_hardware("h100-sxm")
    lay = Layout(4, 1, 1, 1)
    per_tok = 2 * 8 * 128 * 80 * 2 / 4  # K and V, 8 KV heads of 128, 80 layers, bf16, over tp = 4
    inside = disagg.Transfer(m, hw, Precision(), lay, lay, 8, "roofline", None)
    t = inside(np.array([1000.0, 4000.0]))
    assert inside.kind == "link"
    assert t == pytest.approx(hw.link_latency + np.array([1000, 4000]) * per_tok / hw.link_bandwidth, rel=1e-12)
    across = disagg.Transfer(m, hw, Precision(), lay, lay, 16, "roofline", None)
    assert across.kind == "network"
    assert across(np.array([1000.0])) == pytest.approx(hw.network_latency + 1000 * per_tok / hw.network_bandwidth)
    narrow = disagg.Transfer(m, hw, Precision(), Layout(2, 1, 1, 1), lay, 8, "roofline", None)
    assert narrow.per_tok == 2 * per_tok  # a tp=2 prefill device sends its half over its own link


def test_disaggregated_splits_are_searched_and_the_best_is_checked_coupled():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = pm.capacity(**{k: v for k, v in SMALL.items() if k != "tp"}, gpus=2, disaggregate=True, seeds=1,
                        requests=300)
    d = c[c.serving == "disaggregated"]
    assert len(d) == 1 and d.search.iloc[0] == "coupled"
    assert (d.prefill_instances + d.decode_instances).iloc[0] == 2 and d.devices.iloc[0] == 2
    assert d.kv_transfer_s.iloc[0] > 0 and np.isfinite(d.goodput_rps.iloc[0])
    assert any("disaggregated" in x for x in c.attrs["summary"]["disaggregation"])


# ---------------------------------------------------------------- CLI and API
def test_cli_json_carries_every_field_the_table_shows(capsys):
    args = ["capacity", "-m", "llama-3.2-1b", "-H", "l4", "--tp", "1", "--prompt-len", "uniform:32,128", "--output-len",
            "lognormal:median=16,max=64", "--slots", "32", "--slo-ttft", "250ms", "--seeds", "1", "--requests", "300",
            "--price", "0.8/h"]
    assert main(args) == 0
    table = capsys.readouterr().out
    assert "goodput/s" in table and "# goodput: the largest Poisson arrival rate" in table and "mode roofline" in table
    assert main(args + ["--format", "json"]) == 0
    rec = json.loads(capsys.readouterr().out)[0]
    for k in ("hardware", "serving", "layout", "devices", "goodput_rps", "goodput_lo_rps", "goodput_hi_rps",
              "output_tok_s", "goodput_per_device", "cost_per_million_tokens", "binding", "ttft_s", "tpot_s", "pareto",
              "note"):
        assert k in rec
    assert rec["cost_per_million_tokens"] == pytest.approx(0.8 / 3600 / rec["output_tok_s"] * 1e6)


@pytest.mark.parametrize("argv,opt", [
    (["--slo-ttft", "1x"], "--slo-ttft"), (["--slo-tpot", "fast"], "--slo-tpot"), (["--slo-tpot", "-5ms"], "--slo-tpot"),
    (["--slo-ttft", "0s"], "--slo-ttft"), (["--percentile", "0"], "--percentile"), (["--percentile", "101"], "--percentile"),
    (["--percentile", "p99"], "--percentile"), (["--seeds", "0"], "--seeds"), (["--tolerance", "2"], "--tolerance"),
    (["--gpus", "8", "--tp", "2"], "--gpus"), (["--pp", "2", "--tp", "8"], "--pp"), (["--tp", "3"], "--tp"),
    (["--price", "1/h,2/h"], "--price"), (["--requests", "5"], "--requests"), (["--max-tokens", "1000"], "--max-tokens"),
    (["--gpus", "0"], "--gpus"), (["--token-budget", "x"], "--token-budget"), (["--mode", "simple"], "--mode"),
    (["-m", "llama-2-13b"], "--prompt-len/--output-len"),
])
def test_bad_input_exits_2_with_one_line_naming_the_option(argv, opt, capsys):
    base = ["capacity"] + (["--tp", "8"] if "--gpus" not in argv and "--tp" not in argv else [])
    assert main(base + argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"perfmodel: error: {opt}") and "Traceback" not in err


def test_the_api_wrapper_takes_the_parameters_of_the_search():
    a, b = inspect.signature(pm.capacity).parameters, inspect.signature(cap.capacity).parameters
    assert list(a) == list(b) and [p.default for p in a.values()] == [p.default for p in b.values()]


@pytest.mark.parametrize("seeds", [1, 3])
def test_a_search_is_estimated_at_4_simulations_for_its_first_seed_and_3_for_each_other(seeds):
    """The work bound's estimate of one colocated search: the first seed's bracketing and bisection take about 4
    runs of the trace, each other seed, started from the first's answer, about 3; each run generates the outputs of
    its measured window (1 - WARM of the trace). The colocated searches of a capacity call add up."""
    from perfmodel.serving import fleet
    from perfmodel.serving import capacity as cap
    from perfmodel.serving.slo import Workload

    wl = Workload("uniform:32,128", "uniform:16,48", "1s", "50ms", 99, seeds, 0, None, 0.05)
    assert cap.search_tokens(wl, 600) == pytest.approx((4 + 3 * (seeds - 1)) * 600 * wl.mean_output * (1 - cap.WARM))
    kw = {"model": "llama-3.2-1b", "hardware": "l4,h100-sxm", "tp": 1, "prompt_len": "uniform:32,128",
          "output_len": "uniform:16,48", "seeds": seeds}
    one = cap.run(**fleet._kwargs({**kw, "hardware": "l4"}), workers=1, estimate_only=True)
    both = cap.run(**fleet._kwargs(kw), workers=1, estimate_only=True)
    assert one > 0 and both > one


def test_layouts_whose_steps_are_priced_row_by_row_count_five_token_equivalents_per_token(capsys):
    """Expert parallelism and MLA's prefill send FastCost's mixed steps through StepCost, about 5x slower a token
    (slo.TOKENS_PER_S_ROWWISE, measured): their estimate counts that, so a search that would run for a minute is
    refused up front by the default --max-tokens instead of being priced as a half-minute dense one."""
    from perfmodel.serving import fleet
    from perfmodel.serving import capacity as cap
    from perfmodel.serving.slo import TOKENS_PER_S, TOKENS_PER_S_ROWWISE, Instance, cost_weight

    prec = Precision()
    h = load_hardware("h100-sxm")
    dense = Instance(load_model("mixtral-8x7b"), h, prec, Layout(tp=2), "roofline", None, 16, 2048, 256, 16)
    ep = Instance(load_model("mixtral-8x7b"), h, prec, Layout(ep=2), "roofline", None, 16, 2048, 256, 16)
    mla = Instance(load_model("deepseek-v2-lite"), h, prec, Layout(), "roofline", None, 16, 2048, 256, 16)
    assert cost_weight(dense) == 1.0
    assert cost_weight(ep) == cost_weight(mla) == TOKENS_PER_S / TOKENS_PER_S_ROWWISE == 5.0

    def est(**o):
        return cap.run(**fleet._kwargs({"model": "mixtral-8x7b", "hardware": "h100-sxm", **o}), workers=1,
                       estimate_only=True)
    assert est(ep=2, tp=1) / est(tp=2) == pytest.approx(5.0, rel=0.01)  # the same trace lengths, 5x the time
    assert main(["capacity", "-m", "mixtral-8x7b", "-H", "h100-sxm", "--ep", "2", "--tp", "1"]) == 2
    err = capsys.readouterr().err
    assert "--max-tokens" in err and "x5 where steps are priced row by row" in err


def test_a_prefill_pool_s_ttft_is_first_token_plus_the_transfer_after_arrival_and_a_decode_pool_s_tpot_runs_from_landing():
    """prefill_rate's TTFT per request: its first token (the prefill pool's simulation) + its KV transfer - its
    arrival; decode_rate's TPOT: (last token - landing) / (output - 1), of the requests with two or more tokens."""
    from perfmodel.serving.slo import Instance, Workload, _pct

    m, hw = load_model("llama-3.2-1b"), load_hardware("l4")
    inst = Instance(m, hw, Precision(), Layout(1, 1, 1, 1), "roofline", None, 16, 2048, 64, 16)
    wl = Workload("uniform:20,60", "uniform:1,40", "5s", "1s", 90, 1, 0, 200, 0.05)
    n, rate = 200, 100.0  # a window that opens within the first second: first tokens before and after t = 1 s
    v = disagg.prefill_rate(inst, wl, n, rate, 0, lambda P: 1e-4 * np.asarray(P, dtype=float))
    arr, P, O = wl.trace(n, rate, 0)
    w = wl.window(n)
    first = disagg._prefill_run(inst, arr, P)["first"][w]
    assert first.min() < 1.0 < first.max()
    assert v["ttft"] == pytest.approx(_pct(first + 1e-4 * P[w] - arr[w], 90), rel=1e-12)
    d = disagg.decode_rate(inst, wl, n, rate, 0)
    keep = O > 1
    a2, P2, O2 = arr[keep], P[keep], O[keep]
    w2 = wl.window(a2.size)
    r = fastsim.run(a2, P2, O2, inst.sizes, inst.cost, inst.slots, inst.budget, "chunked", inst.block, prefilled=True)
    assert d["tpot"] == pytest.approx(_pct((r["last"][w2] - a2[w2]) / (O2[w2] - 1), 90), rel=1e-12)


def test_a_kv_transfer_carries_the_fixed_state_of_a_linear_attention_model_once_per_request():
    """Qwen3.5's Gated DeltaNet layers keep a state per sequence whatever its length: a prompt of 0 tokens still
    sends it, as the larger of the two pools' per-device shares (tp 2 holds twice tp 4's), over the link."""
    m, hw = load_model("qwen3.5-397b-a17b"), load_hardware("h100-sxm")
    p2, p4 = Layout(2, 1, 1, 1), Layout(4, 1, 1, 1)
    fixed = [float(pm.per_sequence(m, 0, layout=l)["fixed_state_bytes_per_seq"]) for l in (p2, p4)]
    assert fixed[0] == pytest.approx(2 * fixed[1]) and fixed[1] > 0
    t = disagg.Transfer(m, hw, Precision(), p4, p2, 8, "roofline", None)
    assert t.fixed == pytest.approx(fixed[0], rel=1e-12)
    assert t(np.array([0.0]))[0] == pytest.approx(hw.link_latency + fixed[0] / hw.link_bandwidth, rel=1e-12)


def test_a_disaggregated_pool_is_one_tensor_parallel_group_of_its_devices():
    """A pool of d devices is one instance of tp = d where the heads split d ways, else none (pipelines, expert
    groups and replicas are not pool layouts): Llama-3.1-8B's 32 heads and 8 KV heads split over 1, 2, 4 and 8."""
    m = load_model("llama-3.1-8b")
    assert [disagg._pool_layouts(m, d) for d in (1, 2, 3, 4, 6, 8)] == [
        [Layout(1, 1, 1, 1)], [Layout(2, 1, 1, 1)], [], [Layout(4, 1, 1, 1)], [], [Layout(8, 1, 1, 1)]]


def test_a_kv_transfer_crosses_the_network_exactly_when_the_pools_span_more_than_one_node():
    """On nodes of 2 devices, 2 devices send over the link and 4 over the network; a spec without devices_per_node
    has one device a node. A network without a latency is priced on bandwidth, with a warning, only across nodes."""
    m, base = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    lay = Layout(1, 1, 1, 1)
    per_tok = 2 * 8 * 128 * 32 * 2  # K and V, 8 KV heads of 128, 32 layers, bf16
    two = base.replace(devices_per_node=2)
    for devices, kind, bw, lat in ((2, "link", two.link_bandwidth, two.link_latency),
                                   (4, "network", two.network_bandwidth, two.network_latency)):
        t = disagg.Transfer(m, two, Precision(), lay, lay, devices, "roofline", None)
        assert t.kind == kind and t(np.array([1000.0]))[0] == pytest.approx(lat + 1000 * per_tok / bw, rel=1e-12)
    alone = disagg.Transfer(m, base.replace(devices_per_node=None), Precision(), lay, lay, 2, "roofline", None)
    assert alone.kind == "network"
    quiet = base.replace(network_latency=None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        disagg.Transfer(m, quiet, Precision(), lay, lay, 8, "roofline", None)  # inside a node: no warning
    with pytest.warns(DataWarning, match="lacks network_latency"):
        t = disagg.Transfer(m, quiet, Precision(), lay, lay, 16, "roofline", None)
    assert t(np.array([1000.0]))[0] == pytest.approx(1000 * per_tok / quiet.network_bandwidth, rel=1e-12)


def test_a_coupled_split_of_one_prefill_and_one_decode_instance_is_the_two_pools_in_series():
    """With one instance a pool, the coupled check's TTFT is prefill_rate's on the same trace (first token +
    transfer - arrival), its TPOT the decode instance fed at the landings, (last - landing) / (output - 1) for the
    requests of two or more tokens, and the link's busy share the transfers' time over the arrivals' span."""
    from perfmodel.serving.slo import Instance, Workload, _pct

    m, hw = load_model("llama-3.2-1b"), load_hardware("l4")
    inst = Instance(m, hw, Precision(), Layout(1, 1, 1, 1), "roofline", None, 16, 2048, 64, 16)
    wl = Workload("uniform:20,60", "uniform:1,40", "5s", "1s", 90, 1, 0, 200, 0.05)
    n, rate = 200, 100.0
    move = lambda P: 1e-3 + 1e-5 * np.asarray(P, dtype=float)  # noqa: E731
    c = disagg.coupled_rate(inst, 1, inst, 1, move, wl, n, rate, 0, full=True)
    assert c["ttft"] == pytest.approx(disagg.prefill_rate(inst, wl, n, rate, 0, move)["ttft"], rel=1e-12)
    arr, P, O = wl.trace(n, rate, 0)
    land = disagg._prefill_run(inst, arr, P)["first"] + move(P)
    mine = np.flatnonzero(O > 1)
    order = mine[np.argsort(land[mine], kind="stable")]
    a_d, P_d, O_d = land[order], P[order], O[order]
    r = fastsim.run(a_d, P_d, O_d, inst.sizes, inst.cost, inst.slots, inst.budget, "chunked", inst.block,
                    prefilled=True)
    wd = wl.window(order.size)
    assert c["tpot"] == pytest.approx(_pct((r["last"][wd] - a_d[wd]) / (O_d[wd] - 1), 90), rel=1e-12)
    assert c["link_busy"] == pytest.approx(np.sum(move(P)) / (arr[-1] - arr[0]), rel=1e-12)
    strict = disagg.coupled_rate(inst, 1, inst, 1, move, Workload("uniform:20,60", "uniform:1,40", "1us", "1s", 90,
                                                                  1, 0, 200, 0.05), n, rate, 0)
    assert not strict["ok"] and strict["fail"] == "ttft" and "link_busy" not in strict  # no decode run after a miss


def test_a_model_with_linear_attention_only_gets_a_goodput_not_an_error():
    """llama-2-13b-linear has no per-token KV cache (a fixed state per request): the search runs and meets a limit.
    Before, the analytic bound divided by a zero cache per token and the command said `cannot convert float NaN`."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the 300-request trace is short for steady state: said in the note
        c = pm.capacity("llama-2-13b-linear", "h100-sxm", tp=1, prompt_len="1000", output_len="200", seeds=1,
                        requests=300)
    assert c.goodput_rps[0] > 1 and c.binding[0] in ("ttft", "tpot", "memory")


def test_a_search_s_time_reads_in_seconds_below_two_minutes_and_in_minutes_from_there():
    """The work bound's message prices the estimate at TOKENS_PER_S simulated tokens a second on one core:
    119 s reads "119 s", 120 s reads "2 min", 121 s too."""
    from perfmodel.serving import capacity as cap

    r = cap.TOKENS_PER_S
    assert cap.seconds(60 * r) == "60 s" and cap.seconds(119 * r) == "119 s"
    assert cap.seconds(120 * r) == "2 min" and cap.seconds(121 * r) == "2 min" and cap.seconds(600 * r) == "10 min"


@pytest.mark.parametrize("budget, ok", [("none", True), ("None", True), (None, True), (1, True), (0, False)])
def test_the_token_budget_is_none_in_any_case_or_a_whole_number_of_at_least_one(budget, ok):
    """--token-budget none (as typed, any case) means no budget, as None does; 1 token is the smallest budget and
    0 is refused, naming the option."""
    from perfmodel.serving import fleet
    from perfmodel.serving import capacity as cap

    kw = fleet._kwargs({"model": "llama-3.2-1b", "hardware": "l4", "tp": 1, "prompt_len": "uniform:32,128",
                        "output_len": "uniform:16,48", "seeds": 1})
    kw["token_budget"] = budget  # as pm.capacity(token_budget=...) passes it, not normalized by a fleet file
    if ok:  # accepted: an estimate (a budget of 1 admits no prompt of these, so nothing is simulated: 0)
        assert cap.run(**kw, workers=1, estimate_only=True) >= 0
    else:
        with pytest.raises(SpecError, match="--token-budget"):
            cap.run(**kw, workers=1, estimate_only=True)


def _node_spec(tmp_path, per_node):
    p = tmp_path / f"h100-{per_node}.yaml"
    dpn = "null" if per_node is None else f'{{value: {per_node}, source: "test: devices a node"}}'
    p.write_text(f"base: h100-sxm\nname: H100, {per_node} a node\ndevices_per_node: {dpn}\n")
    return str(p)


def test_a_row_crosses_nodes_when_its_largest_collective_group_outgrows_a_node(tmp_path):
    """A colocated row's group is one replica's tp x ep; a disaggregated row's is its larger pool instance (prefill
    tp 2 with decode tp 1 on one-device nodes crosses); a spec without devices_per_node has one device a node."""
    from perfmodel.serving import fleet
    from perfmodel.serving import capacity as cap

    base = {"model": "llama-3.2-1b", "gpus": 4, "prompt_len": "uniform:32,128", "output_len": "uniform:16,48",
            "seeds": 1, "requests": 200}
    for per_node in (1, None):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t, _ = cap.run(**fleet._kwargs({**base, "hardware": _node_spec(tmp_path, per_node),
                                            "disaggregate": per_node == 1}), workers=1)
        for i, serving in enumerate(t["serving"]):
            group = (max(t["prefill_tp"][i], t["decode_tp"][i]) if serving == "disaggregated"
                     else t["tp"][i] * t["ep"][i])
            assert bool(t["crosses_nodes"][i]) == (group > 1), (per_node, serving, group)
        assert any(t["crosses_nodes"]) and not all(t["crosses_nodes"])
    dis = [i for i, s in enumerate(t["serving"]) if s == "disaggregated"]
    assert not dis  # the second spec ran colocated only
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t, _ = cap.run(**fleet._kwargs({**base, "hardware": _node_spec(tmp_path, 1), "disaggregate": True}), workers=1)
    mixed = [i for i, s in enumerate(t["serving"]) if s == "disaggregated" and t["prefill_tp"][i] != t["decode_tp"][i]]
    assert mixed and all(t["crosses_nodes"][i] for i in mixed)  # 2 and 1: the larger pool crosses


@pytest.mark.parametrize("requests, conc, n", [(None, 8, 200), (None, 50, 500), (1000, 8, 1000)])
@pytest.mark.parametrize("model, hardware, lay, weight", [("llama-3.2-1b", "l4", {"tp": 1}, 1.0),
                                                          ("mixtral-8x7b", "h100-sxm", {"tp": 1, "ep": 2}, 5.0)])
def test_a_closed_loop_is_estimated_at_its_seeds_runs_of_the_larger_of_the_requests_ten_n_and_200(
        requests, conc, n, model, hardware, lay, weight):
    """--concurrency N: each seed runs one closed loop of max(--requests, 10 N, 200) requests, each generating the
    mean output: the estimate is seeds x that x mean output, per layout, at the layout's cost weight (1 for a dense
    layout, 5 where steps are priced row by row: expert parallelism)."""
    from perfmodel.serving import fleet
    from perfmodel.serving import capacity as cap
    from perfmodel.serving.slo import Workload

    kw = fleet._kwargs({"model": model, "hardware": hardware, **lay, "prompt_len": "uniform:32,128",
                        "output_len": "uniform:16,48", "seeds": 2, "requests": requests, "concurrency": conc})
    wl = Workload("uniform:32,128", "uniform:16,48", "1s", "50ms", 99, 2, 0, requests, 0.05)
    assert cap.run(**kw, workers=1, estimate_only=True) == pytest.approx(2 * n * wl.mean_output * weight, rel=1e-12)


@pytest.mark.parametrize("block, ok", [(1, True), (0, False)])
def test_a_kv_block_is_at_least_one_token(block, ok):
    from perfmodel.serving import fleet
    from perfmodel.serving import capacity as cap

    kw = fleet._kwargs({"model": "llama-3.2-1b", "hardware": "l4", "tp": 1, "prompt_len": "uniform:32,128",
                        "output_len": "uniform:16,48", "seeds": 1})
    kw["block_size"] = block
    if ok:
        assert cap.run(**kw, workers=1, estimate_only=True) > 0
    else:
        with pytest.raises(SpecError, match="--block-size"):
            cap.run(**kw, workers=1, estimate_only=True)


def test_disaggregated_searches_are_estimated_per_device_type_per_pool_layout_plus_the_coupled_checks():
    """--disaggregate adds, per device type, one decode-pool search per distinct pool layout (tp, ep) and
    disagg.VERIFY coupled ones, each the size of the largest colocated search at the heaviest cost weight."""
    from perfmodel.serving import disagg, fleet
    from perfmodel.serving import capacity as cap
    from perfmodel.serving.slo import Workload, cost_weight

    base = {"model": "llama-3.2-1b", "gpus": 2, "prompt_len": "uniform:32,128", "output_len": "uniform:16,48",
            "seeds": 1}
    m = load_model("llama-3.2-1b")
    wl = Workload("uniform:32,128", "uniform:16,48", "1s", "50ms", 99, 1, 0, None, 0.05)
    knobs = {"slots": 256, "budget": 2048, "block": 16, "quantum": 16}
    for hws in (["l4"], ["l4", "h100-sxm"]):
        kw = fleet._kwargs({**base, "hardware": ",".join(hws)})
        col = cap.run(**kw, workers=1, estimate_only=True)
        dis = cap.run(**{**kw, "disaggregate": True}, workers=1, estimate_only=True)
        preps, lays_all = [], []
        for h in hws:
            hw = load_hardware(h)
            lays, _ = cap.layouts_for(m, hw, 2, None, 1, 1, 1)
            lays_all += lays
            preps += [cap.prepare(m, hw, Precision(), lay, "roofline", None, wl, knobs, {}) for lay in lays]
        preps = [p for p in preps if isinstance(p, tuple)]
        biggest = max(p[2] for p in preps)
        weight = max(cost_weight(p[0]) for p in preps)
        pools = len({(l.tp, l.ep) for l in lays_all})
        assert pools == 2 and len({p[2] for p in preps}) > 1  # tp 1 and tp 2; searches of different sizes
        want = len(hws) * (pools + disagg.VERIFY) * cap.search_tokens(wl, biggest) * weight
        assert dis - col == pytest.approx(want, rel=1e-12)
    # Mixtral on two H100s: tp 2 (weight 1) and ep 2 (weight 5, priced row by row): the heaviest weight counts
    m, hw = load_model("mixtral-8x7b"), load_hardware("h100-sxm")
    kw = fleet._kwargs({**base, "model": "mixtral-8x7b", "hardware": "h100-sxm"})
    lays, _ = cap.layouts_for(m, hw, 2, None, 1, 1, 1)
    preps = [p for p in (cap.prepare(m, hw, Precision(), lay, "roofline", None, wl, knobs, {}) for lay in lays)
             if isinstance(p, tuple)]
    assert sorted({cost_weight(p[0]) for p in preps}) == [1.0, 5.0]
    want = (len({(l.tp, l.ep) for l in lays}) + disagg.VERIFY) * cap.search_tokens(wl, max(p[2] for p in preps)) * 5.0
    dis = cap.run(**{**kw, "disaggregate": True}, workers=1, estimate_only=True)
    assert dis - cap.run(**kw, workers=1, estimate_only=True) == pytest.approx(want, rel=1e-12)
    # a model that fits no layout: no colocated search to size them by, so 1,000 requests (or --requests) at weight 1
    for req, n in ((None, 1000), (400, 400)):
        kw = fleet._kwargs({**base, "model": "llama-3.1-70b", "hardware": "l4", "gpus": 1, "requests": req})
        wl_r = Workload("uniform:32,128", "uniform:16,48", "1s", "50ms", 99, 1, 0, req, 0.05)
        assert cap.run(**kw, workers=1, estimate_only=True) == 0  # nothing colocated to simulate
        dis = cap.run(**{**kw, "disaggregate": True}, workers=1, estimate_only=True)
        assert dis == pytest.approx((1 + disagg.VERIFY) * cap.search_tokens(wl_r, n), rel=1e-12)


def test_the_longest_request_may_fill_the_model_s_context_but_not_exceed_it():
    """prompt + output = max_context (Llama 2 13B: 4,096) is simulated; one token more is refused, naming both
    options."""
    from perfmodel.serving import fleet
    from perfmodel.serving import capacity as cap

    def est(p, o):
        return cap.run(**fleet._kwargs({"model": "llama-2-13b", "hardware": "h100-sxm", "tp": 1, "prompt_len": p,
                                        "output_len": o, "seeds": 1}), workers=1, estimate_only=True)
    assert est("3000", "1096") > 0
    with pytest.raises(SpecError, match="--prompt-len/--output-len.*4096"):
        est("3000", "1097")
    with pytest.raises(SpecError, match="--prompt-len/--output-len"):
        est("uniform:100,3000", "uniform:10,1097")  # the longest of each: 3,000 + 1,097


def test_plots_keep_every_search_disaggregated_pools_included():
    """keep=True (the capacity plot's path) runs the searches in this process and returns each one's instance and
    trace with its row, the disaggregated pools' rows too."""
    from perfmodel.serving import fleet
    from perfmodel.serving import capacity as cap

    kw = fleet._kwargs({"model": "llama-3.2-1b", "hardware": "l4", "gpus": 2, "prompt_len": "uniform:32,128",
                        "output_len": "uniform:16,48", "seeds": 1, "requests": 200, "disaggregate": True})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t, s = cap.run(**kw, workers=1, keep=True)
    kinds = set(t["serving"])
    assert kinds == {"colocated", "disaggregated"}
    assert {x["row"]["serving"] for x in s["searches"]} == {"colocated", "disaggregated"}
    assert len(s["searches"]) == len(t["serving"])  # one kept search a row
    # one layout given (tp 1 x 2 replicas): its two devices split into the pools too
    kw = fleet._kwargs({"model": "llama-3.2-1b", "hardware": "l4", "tp": 1, "replicas": 2, "seeds": 1,
                        "prompt_len": "uniform:32,128", "output_len": "uniform:16,48", "requests": 200,
                        "disaggregate": True})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t, s = cap.run(**kw, workers=1, keep=True)
    assert list(t["serving"]) == ["colocated", "disaggregated"] and t["devices"][1] == 2


def test_a_disaggregated_row_that_does_not_fit_names_no_pools_and_crosses_no_node():
    """Llama 3.1 70B on two L4s: nothing fits, colocated or split; the disaggregated row has no pool sizes (NaN)
    and so no group to span nodes (crosses_nodes False, not a comparison with NaN)."""
    from perfmodel.serving import fleet
    from perfmodel.serving import capacity as cap

    kw = fleet._kwargs({"model": "llama-3.1-70b", "hardware": "l4", "gpus": 2, "prompt_len": "uniform:32,128",
                        "output_len": "uniform:16,48", "seeds": 1, "disaggregate": True})
    t, _ = cap.run(**kw, workers=1)
    dis = [i for i, s in enumerate(t["serving"]) if s == "disaggregated"]
    assert dis and all(t["binding"][i] == "does not fit" for i in dis)
    assert all(np.isnan(t["prefill_tp"][i]) and np.isnan(t["decode_tp"][i]) for i in dis)
    assert not any(bool(x) for x in t["crosses_nodes"])


def test_the_pareto_front_is_on_cost_when_any_row_has_a_price_and_the_summary_names_the_kv_format():
    """Llama 2 13B on two L4s at a price: tp 1 does not fit (no cost), tp 2 does: one priced row puts the front on
    cost. The summary's kv_dtype is the KV format given, else the activations' (a cache without its own format)."""
    from perfmodel.serving import fleet
    from perfmodel.serving import capacity as cap

    base = {"model": "llama-2-13b", "hardware": "l4", "gpus": 2, "prompt_len": "uniform:32,128",
            "output_len": "uniform:16,48", "seeds": 1, "requests": 200, "price": "0.8/h"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t, s = cap.run(**fleet._kwargs(base), workers=1)
    cost = np.asarray(t["cost_per_million_tokens"], float)
    assert np.isfinite(cost).any() and not np.isfinite(cost).all()
    assert s["pareto_on"] == "cost" and s["kv_dtype"] == "bf16"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, s = cap.run(**fleet._kwargs({**base, "kv_dtype": "fp8", "gpus": None, "tp": 2}), workers=1)
    assert s["kv_dtype"] == "fp8"


def test_a_plotted_goodput_curve_runs_from_below_to_above_the_goodput_at_increasing_positive_rates():
    """curve() samples the percentile TTFT and TPOT at CURVE x the goodput: positive fractions, increasing, 1.0 (the
    goodput itself) among them, some below and some above it."""
    from perfmodel.serving import capacity as cap

    from perfmodel.serving import fleet

    f = np.asarray(cap.CURVE)
    assert np.all(f > 0) and np.all(np.diff(f) > 0) and 1.0 in cap.CURVE and f[0] < 0.5 and f[-1] > 1.0
    kw = fleet._kwargs({"model": "llama-3.2-1b", "hardware": "l4", "tp": 1, "prompt_len": "uniform:32,128",
                        "output_len": "uniform:16,48", "seeds": 1, "requests": 200})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t, s = cap.run(**kw, workers=1, keep=True)
        c = cap.curve(s["searches"][0], s["workload"])
    assert c["goodput"] == pytest.approx(t["goodput_rps"][0], rel=1e-12)
    assert np.allclose(c["rate"], f * c["goodput"], rtol=1e-12)
    assert c["ttft"].shape == c["tpot"].shape == f.shape


def test_a_curve_without_a_goodput_centres_on_the_highest_rate_tried_and_a_disaggregated_one_runs_every_request():
    """Two replicas of Llama-3.2-1B on L4s with a p99 TTFT SLO just above the longest prompt's prefill: no rate meets
    it, so the curve spans CURVE x the highest rate tried (per replica, times the replicas), each replica simulated
    at its share of the rate. A disaggregated row's curve simulates every measured request to its end (full), so
    even past its goodput its TPOT is a number, the coupled simulation's at that rate."""
    from perfmodel.serving import capacity as cap, disagg, fleet
    from perfmodel.serving.capacity import simulate_rate

    base = {"model": "llama-3.2-1b", "hardware": "l4", "prompt_len": "uniform:32,4000",
            "output_len": "uniform:16,48", "seeds": 1, "requests": 200}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t, s = cap.run(**fleet._kwargs({**base, "tp": 1, "replicas": 2, "slo_ttft": "93ms"}), workers=1, keep=True)
        (e,) = s["searches"]
        assert e["_search"]["goodput"] is None and e["row"]["replicas"] == 2 and t["binding"][0] == "none reached"
        c = cap.curve(e, s["workload"])
        vhi = e["_search"]["median"]["vhi"]["rate"]
        assert c["goodput"] is None and np.allclose(c["rate"], np.asarray(cap.CURVE) * vhi * 2, rtol=1e-12)
        one = simulate_rate(e["_instance"], s["workload"], e["_n"], c["rate"][0] / 2, c["seed"], stop="window")
        assert c["ttft"][0] == one["ttft"] and c["tpot"][0] == one["tpot"]
        t, s = cap.run(**fleet._kwargs({**base, "gpus": 2, "disaggregate": True, "slo_ttft": "150ms"}), workers=1,
                       keep=True)
        (e,) = [x for x in s["searches"] if x["row"]["serving"] == "disaggregated"]
        c = cap.curve(e, s["workload"])
    assert np.allclose(c["rate"], np.asarray(cap.CURVE) * c["goodput"], rtol=1e-12)
    assert np.isfinite(c["ttft"]).all() and np.isfinite(c["tpot"]).all()
    pre, n_p, dec, n_d, tr = e["_instance"]
    last = disagg.coupled_rate(pre, n_p, dec, n_d, tr, s["workload"], e["_n"], c["rate"][-1], c["seed"], full=True)
    assert (c["ttft"][-1], c["tpot"][-1]) == (last["ttft"], last["tpot"])
