"""The disaggregated planner (serving/disagg.rows): which splits of N devices it lists, where each pool's rate search
starts, how a split's estimate is the slower pool's, and the rows it refuses with a reason.

The searches are watched, not re-run: search_seeds, prefill_rate and decode_rate are wrapped so that each search's
start, its evaluations and its answer are recorded; the laws are then checked on what the planner itself built."""
import itertools
import math
import warnings

import numpy as np
import pytest

from perfmodel import load_hardware, load_model
from perfmodel.errors import SpecError
from perfmodel.ops import Layout, Precision
from perfmodel.serving import disagg
from perfmodel.serving.slo import TRACE_MIN, Workload, analytic

KNOBS = {"slots": 32, "budget": 2048, "block": 16, "quantum": 16}


def _wl(slo_ttft=0.25, slo_tpot=0.05, requests=300):
    return Workload("uniform:32,128", "lognormal:median=16,max=64", slo_ttft, slo_tpot, 99, 1, 0, requests, 0.05)


def _watched(monkeypatch):
    """Wrap the planner's searches: a list of {kind, start, result, calls} per search_seeds call, in order."""
    log, calls = [], []
    real_search, real_pre, real_dec = disagg.search_seeds, disagg.prefill_rate, disagg.decode_rate

    def pre(inst, wl, n, rate, seed, transfer):
        calls.append(("prefill", inst, wl, n, transfer))
        return real_pre(inst, wl, n, rate, seed, transfer)

    def dec(inst, wl, n, rate, seed):
        calls.append(("decode", inst, wl, n, None))
        return real_dec(inst, wl, n, rate, seed)

    def search(evaluate, start, wl):
        calls.clear()
        res = real_search(evaluate, start, wl)
        kinds = {c[0] for c in calls}
        log.append({"kind": kinds.pop() if len(kinds) == 1 else "coupled", "start": start, "result": res,
                    "calls": list(calls)})
        return res

    monkeypatch.setattr(disagg, "search_seeds", search)
    monkeypatch.setattr(disagg, "prefill_rate", pre)
    monkeypatch.setattr(disagg, "decode_rate", dec)
    return log


def _rows(N, wl=None, hw=None, model="llama-3.2-1b", price=None):
    m, hw = load_model(model), hw or load_hardware("l4")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return disagg.rows(m, hw, Precision(), N, "roofline", None, wl or _wl(), KNOBS, price, {}, False)


def _split(r):
    return r["prefill_tp"], r["prefill_instances"], r["decode_tp"], r["decode_instances"]


@pytest.mark.parametrize("N", [4, 5])
def test_every_split_of_n_devices_into_two_pools_of_whole_tp_groups_is_one_row(N):
    """Llama-3.2-1B (32 heads, 8 KV heads) on N L4s: pools of tp 1, 2 or 4 (3 does not split the heads); every
    n_p x tp_p + n_d x tp_d = N with both pools non-empty is a row, and no other (on 5: 2 x tp 2 + 1 x tp 1 too)."""
    m = load_model("llama-3.2-1b")
    tps = [d for d in range(1, N + 1) if disagg._pool_layouts(m, d)]
    assert tps == [1, 2, 4]
    want = {(tp_p, n_p, tp_d, n_d) for tp_p, tp_d in itertools.product(tps, tps) for n_p in range(1, N + 1)
            for n_d in range(1, N + 1) if n_p * tp_p + n_d * tp_d == N}
    if N == 4:
        assert want == {(1, 1, 1, 3), (1, 2, 1, 2), (1, 3, 1, 1), (1, 2, 2, 1), (2, 1, 1, 2), (2, 1, 2, 1)}
    else:
        assert (2, 2, 1, 1) in want and (4, 1, 1, 1) in want and len(want) == 10
    rows = _rows(N)
    assert {_split(r) for r in rows} == want and len(rows) == len(want)
    assert all(r["devices"] == N and r["serving"] == "disaggregated" for r in rows)


def test_a_prefill_pool_holds_the_longest_prompt_and_a_decode_pool_the_longest_prompt_plus_output():
    """Llama-3.1-8B on L4s (24 GB, 16 GB of weights): one device holds a 32k-token prompt's cache (4.2 GB) but not
    72k tokens' (9.4 GB); two devices hold either. On 3 devices the only split is 1 prefill device and a tp-2
    decode instance (SLOs no rate meets: nothing is simulated)."""
    wl = Workload("uniform:30000,32000", "uniform:30000,40000", 1e-6, 1e-6, 99, 1, 0, 12, 0.05)
    rows = _rows(3, wl, model="llama-3.1-8b")
    assert [_split(r) for r in rows] == [(1, 1, 2, 1)]
    assert rows[0]["binding"] == "none reached"


@pytest.mark.parametrize("budget, prompt, output, chunk", [(64, "uniform:32,128", "uniform:200,400", 64),
                                                            (64, "uniform:1,2", "uniform:2,20", 2),
                                                            (None, "uniform:32,128", "uniform:2,20", 80)])
def test_a_pool_s_search_starts_from_the_chunk_and_the_context_of_its_workload(monkeypatch, budget, prompt, output,
                                                                               chunk):
    """The prefill chunk is the token budget when the mean prompt is longer (64 < 80), else the mean prompt but at
    least 2 tokens under a budget (prompts of 1-2 tokens); without a budget, the mean prompt (80). The decode start's step is priced at the
    mean context, mean prompt + half the mean output (80 + 150 here, not 80 + 100)."""
    log = _watched(monkeypatch)
    wl = Workload(prompt, output, 0.25, 0.05, 99, 1, 0, 60, 0.05)
    m, hw = load_model("llama-3.2-1b"), load_hardware("l4")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        disagg.rows(m, hw, Precision(), 2, "roofline", None, wl, KNOBS | {"budget": budget}, None, {}, False)
    (p,), (d,) = [s for s in log if s["kind"] == "prefill"], [s for s in log if s["kind"] == "decode"]
    inst = p["calls"][0][1]
    assert int(min(inst.budget or wl.mean_prompt, max(wl.mean_prompt, 2))) == chunk
    assert p["start"] == pytest.approx(1.0 / (wl.mean_prompt * inst.step([chunk], [chunk]) / chunk), rel=1e-12)
    inst = d["calls"][0][1]
    a = analytic(inst, wl)
    c = int(round(wl.mean_prompt + wl.mean_output / 2))
    t_dec = inst.step(np.ones(a["batch"]), np.full(a["batch"], c))
    assert d["start"] == pytest.approx(a["batch"] / (wl.mean_output * t_dec), rel=1e-12)
    if output == "uniform:200,400":  # a context a third of the output in prices another step
        other = inst.step(np.ones(a["batch"]), np.full(a["batch"], int(round(wl.mean_prompt + wl.mean_output / 3))))
        assert other != t_dec


def test_a_pool_s_search_starts_at_its_instance_s_busy_rate_and_a_split_s_estimate_is_its_slower_pool(monkeypatch):
    """Prefill: the rate at which one instance prefills all the time, 1 / (mean prompt x per-token prefill time at the
    token budget's chunk), on a trace of --requests requests, with the transfer to the decode layout of least tp
    (the largest KV share a device, the slowest transfer). Decode: the analytic batch over the time its requests
    take, batch / (mean output x the batch's decode step at mean context prompt + output / 2). A split's estimate is
    min(n_p x prefill goodput, n_d x decode goodput), its bounds likewise, its binding the pool that sets it."""
    log = _watched(monkeypatch)
    wl = _wl()
    rows = _rows(4, wl)
    pre = [s for s in log if s["kind"] == "prefill"]
    dec = [s for s in log if s["kind"] == "decode"]
    assert len(pre) == 2 and len(dec) == 2  # one search per layout (tp 1 and 2), not per split
    m, hw = load_model("llama-3.2-1b"), load_hardware("l4")
    gp, gd = {}, {}
    for s in pre:
        _, inst, swl, n, transfer = s["calls"][0]
        assert swl is wl and n == 300  # --requests sets the trace length
        chunk = int(min(inst.budget, wl.mean_prompt))
        assert s["start"] == pytest.approx(1.0 / (wl.mean_prompt * inst.step([chunk], [chunk]) / chunk), rel=1e-12)
        worst = disagg.Transfer(m, hw, Precision(), inst.lay, Layout(1, 1, 1, 1), 4, "roofline", None)
        assert transfer.per_tok == worst.per_tok and transfer.fixed == worst.fixed
        gp[inst.lay.tp] = s["result"]
    for s in dec:
        _, inst, swl, n, _ = s["calls"][0]
        a = analytic(inst, wl)
        c = int(round(wl.mean_prompt + wl.mean_output / 2))
        t_dec = inst.step(np.ones(a["batch"]), np.full(a["batch"], c))
        assert s["start"] == pytest.approx(a["batch"] / (wl.mean_output * t_dec), rel=1e-12)
        gd[inst.lay.tp] = s["result"]
    per_pool = [r for r in rows if r["search"] == "per pool"]
    assert per_pool
    for r in per_pool:
        tp_p, n_p, tp_d, n_d = _split(r)
        p, d = gp[tp_p], gd[tp_d]
        assert r["goodput_rps"] == min(n_p * p["goodput"], n_d * d["goodput"])
        assert r["goodput_lo_rps"] == min(n_p * p["lo"], n_d * d["lo"])
        assert r["goodput_hi_rps"] == min(n_p * p["hi"], n_d * d["hi"])
        assert r["binding"] == ("ttft" if n_p * p["goodput"] <= n_d * d["goodput"] else "tpot")
        assert r["goodput_lo_rps"] <= r["goodput_rps"] <= r["goodput_hi_rps"]


def test_without_requests_a_prefill_pool_s_trace_is_trace_min_long(monkeypatch):
    log = _watched(monkeypatch)
    _rows(2, _wl(requests=None))
    assert [s["calls"][0][3] for s in log if s["kind"] == "prefill"] == [TRACE_MIN]


def test_a_prefill_layout_whose_percentile_prompt_alone_plus_its_transfer_misses_ttft_is_not_searched(monkeypatch):
    """Between the percentile prompt's prefill alone and that plus its KV transfer: the transfer counts in TTFT, so no
    prefill rate can meet the SLO; the split says so and no prefill search runs."""
    log = _watched(monkeypatch)
    wl = _wl()
    _rows(2, wl)
    _, inst, _, _, transfer = next(s for s in log if s["kind"] == "prefill")["calls"][0]
    chunk = int(min(inst.budget, wl.mean_prompt))
    alone = inst.step([chunk], [chunk]) / chunk * wl.prompt_q
    move = float(transfer(wl.prompt_q))
    assert 0 < move < alone
    log.clear()
    rows = _rows(2, _wl(slo_ttft=alone + move / 2))
    assert not [s for s in log if s["kind"] == "prefill"]
    assert [(r["binding"], r["note"]) for r in rows] == [
        ("none reached", "the prefill pool (TTFT) meets its SLO at no rate")]
    assert math.isnan(rows[0]["goodput_rps"])
    searched = _rows(2, _wl(slo_ttft=alone + 2 * move))  # with room for the transfer the pool is searched
    assert np.isfinite(searched[0]["goodput_rps"])


def test_a_decode_pool_no_batch_of_which_meets_tpot_names_the_decode_pool():
    rows = _rows(2, _wl(slo_tpot=1e-6))
    assert [(r["binding"], r["note"]) for r in rows] == [
        ("none reached", "the decode pool (TPOT) meets its SLO at no rate")]


def test_the_planner_refuses_one_device_a_model_no_pool_holds_and_a_link_it_cannot_price_each_with_its_reason():
    one = _rows(1)
    assert [(r["binding"], r["note"], r["devices"]) for r in one] == [
        ("does not fit", "disaggregation needs at least 2 devices", 1)]
    assert {_split(r) for r in _rows(2)} == {(1, 1, 1, 1)}  # two devices are enough
    big = _rows(2, model="llama-3.1-70b")  # 141 GB of bf16 weights: no pool of one 24 GB L4 holds them
    assert [(r["binding"], r["note"]) for r in big] == [
        ("does not fit", "no split of 2 devices gives both pools a layout that holds the model")]
    no_link = load_hardware("l4").replace(link_bandwidth=None)
    with pytest.raises(SpecError):  # what the planner catches
        disagg.Transfer(load_model("llama-3.2-1b"), no_link, Precision(), Layout(1, 1, 1, 1), Layout(1, 1, 1, 1), 2,
                        "roofline", None)(np.array([100.0]))
    cut = _rows(2, hw=no_link)
    assert len(cut) == 1 and cut[0]["binding"] == "does not fit"
    assert cut[0]["note"].startswith("the KV cache cannot move between pools: ")


def test_a_coupled_check_that_meets_ttft_goes_on_to_the_decode_pool_and_stops_there_on_tpot():
    """full=False (the search's check): once TTFT passes, the decode instance is simulated, with its TPOT stop rule;
    the verdict is then the whole one (TTFT, TPOT, the link's busy share), as the full run's when TPOT passes."""
    from perfmodel.serving.slo import Instance

    m, hw = load_model("llama-3.2-1b"), load_hardware("l4")
    inst = Instance(m, hw, Precision(), Layout(1, 1, 1, 1), "roofline", None, 16, 2048, 64, 16)
    wl = Workload("uniform:20,60", "uniform:1,40", "5s", "1s", 90, 1, 0, 200, 0.05)
    move = lambda P: 1e-3 + 1e-5 * np.asarray(P, dtype=float)  # noqa: E731
    quick = disagg.coupled_rate(inst, 1, inst, 1, move, wl, 200, 100.0, 0)
    full = disagg.coupled_rate(inst, 1, inst, 1, move, wl, 200, 100.0, 0, full=True)
    assert quick["ok"] and "link_busy" in quick and np.isfinite(quick["tpot"])
    assert quick["tpot"] == pytest.approx(full["tpot"], rel=1e-12) and quick["ttft"] == full["ttft"]
    fast = disagg.coupled_rate(inst, 1, inst, 1, move, wl, 200, 1000.0, 0, full=True)  # arrivals over ~0.2 s
    arr, P, _ = wl.trace(200, 1000.0, 0)
    assert arr[-1] - arr[0] < 0.5
    assert fast["link_busy"] == pytest.approx(np.sum(move(P)) / (arr[-1] - arr[0]), rel=1e-12)


def test_two_variants_of_one_catalog_device_in_one_run_are_each_priced_on_its_own_spec():
    """`replace` keeps the catalog key ("l4"): instances are cached on the whole spec, so an L4 at half the memory
    bandwidth serves fewer requests a second, colocated and disaggregated, than the L4 beside it in the same run."""
    import perfmodel as pm

    l4 = load_hardware("l4")
    a, b = l4.replace(name="L4 a"), l4.replace(name="L4 b", memory_bandwidth=l4.memory_bandwidth / 2)
    assert a.key == b.key == "l4"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = pm.capacity(model="llama-3.2-1b", hardware=[a, b], prompt_len="uniform:32,128",
                        output_len="lognormal:median=16,max=64", slots=32, slo_ttft="0.25s", slo_tpot="50ms", gpus=2,
                        disaggregate=True, seeds=1, requests=100, workers=1)
    for kind in ("colocated", "disaggregated"):
        g = c[c.serving == kind].goodput_rps.to_numpy()
        half = len(g) // 2
        assert len(g) == 2 * half and half >= 1
        assert (g[half:] < 0.8 * g[:half]).all()  # the same layouts, in the same order, per device


def test_the_summary_compares_the_best_coupled_split_with_the_best_colocated_layout_per_hardware():
    """Per hardware, in order: the best goodput per device of the coupled disaggregated rows against the best of the
    colocated rows; per-pool estimates, other hardware and rows that meet no SLO do not count; a hardware with no
    disaggregated row says nothing, one where a side has no finite row says which."""
    nan = math.nan
    rows = [  # hardware, serving, search, goodput per device
        ("a", "colocated", "none", 2.0), ("a", "colocated", "none", 3.0), ("a", "colocated", "none", nan),
        ("a", "disaggregated", "coupled", 4.5), ("a", "disaggregated", "per pool", 99.0),
        ("a", "disaggregated", "coupled", nan), ("a", "disaggregated", "coupled", 3.5),
        ("b", "colocated", "none", 5.0), ("b", "disaggregated", "coupled", 4.0), ("b", "disaggregated", "per pool", 9.0),
        ("c", "colocated", "none", 1.0),
        ("d", "colocated", "none", nan), ("d", "disaggregated", "coupled", 2.0),
        ("e", "colocated", "none", 7.0), ("e", "disaggregated", "per pool", 8.0),
        ("f", "disaggregated", "coupled", 2.0), ("f", "colocated", "none", 2.0),  # a tie does not beat
    ]
    table = {"hardware": [r[0] for r in rows], "serving": [r[1] for r in rows], "search": [r[2] for r in rows],
             "goodput_per_device": [r[3] for r in rows]}
    assert disagg.compare(table)["disaggregation"] == [
        "a: disaggregated beats colocated on goodput per device: 4.5 vs 3 requests/s per device (1.50x)",
        "b: disaggregated does not beat colocated on goodput per device: 4 vs 5 requests/s per device (0.80x)",
        "d: no colocated layout meets the SLOs",
        "e: no disaggregated split meets the SLOs",
        "f: disaggregated does not beat colocated on goodput per device: 2 vs 2 requests/s per device (1.00x)",
    ]


def test_coupled_checks_take_the_best_estimate_first_and_stop_once_no_estimate_can_beat_their_answer():
    """On 4 L4s the best per-pool estimate is checked coupled first; its coupled answer beats every other estimate, so
    it is the only coupled row. A coupled row's trace is its decode instance's (--requests) times the decode
    instances, its binding value the failing verdict's own metric beyond its SLO; every row's goodput per device is
    its goodput over the 4 devices, its output rate the goodput times the decode trace's mean output, and its cost
    (at a price given per device-hour: the L4 spec has none) the price of 4 devices over an hour's tokens."""
    wl = _wl()
    rows = _rows(4, wl, price=0.8)
    est = lambda r: min(float(x) for x in r["note"].split(",")[0][len("pools "):].replace("/s", "").split(" | "))  # noqa: E731
    coupled = [r for r in rows if r["search"] == "coupled"]
    assert len(coupled) == 1
    (c,) = coupled
    others = [r for r in rows if r is not c]
    assert all(est(c) >= r["goodput_rps"] * (1 - 5e-3) for r in others)  # the best estimate (notes print 3 digits)
    assert all(r["goodput_rps"] <= c["goodput_rps"] for r in others)  # none left that could beat the coupled answer
    assert c["requests"] == 300 * c["decode_instances"]
    slo = {"ttft": wl.slo_ttft, "tpot": wl.slo_tpot}
    assert c["binding"] in slo and c["binding_value_s"] > slo[c["binding"]]
    for r in rows:
        assert r["goodput_per_device"] == r["goodput_rps"] / 4
        assert 0.8 * wl.mean_output < r["output_tok_s"] / r["goodput_rps"] < 1.25 * wl.mean_output
        assert r["cost_per_million_tokens"] == pytest.approx(0.8 * 4 / 3600 / r["output_tok_s"] * 1e6, rel=1e-12)
    assert all(math.isnan(r["cost_per_million_tokens"]) for r in _rows(2))  # no price: no cost


@pytest.mark.parametrize("limit", [100.0, None])
def test_the_coupled_checks_stop_at_verify_and_a_check_that_meets_no_rate_gives_the_failing_metric(monkeypatch, limit):
    """With a coupled verdict that passes up to 100 requests/s only (the estimates are 190-558), no coupled answer beats the next estimate: the
    VERIFY best estimates are checked, and no more. With one that passes at no rate, the checked splits say so,
    with the value of the metric that failed (TPOT here)."""
    def verdict(pre, n_p, dec, n_d, tr, wl, n_dec, rate, seed, full=False):
        ok = limit is not None and rate <= limit
        return {"ok": ok, "ttft": 0.1, "tpot": 0.01 if ok else 0.2, "fail": None if ok else "tpot", "exact": True,
                "rate": rate, "seed": seed, "mean_output": 16.0, "link_busy": 0.0}

    monkeypatch.setattr(disagg, "coupled_rate", verdict)
    rows = _rows(4)
    coupled = [r for r in rows if r["search"] == "coupled"]
    assert len(coupled) == 3 and len(rows) == 6  # VERIFY = 3 of the 6 splits
    if limit is not None:
        assert all(r["goodput_rps"] == pytest.approx(100.0, rel=0.06) for r in coupled)
    else:
        assert all(r["binding"] == "none reached" and r["binding_value_s"] == 0.2 and
                   r["note"] == "the coupled simulation meets the SLOs at no rate tried" for r in coupled)
