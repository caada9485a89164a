"""The capacity search's own rules (serving/slo.py): how long a trace is, how many seeds a search takes, and the
bracket a rate search steps through. Formula tests of the constants docs/capacity.md states."""
import numpy as np
import pytest

from perfmodel import load_hardware, load_model
from perfmodel.errors import SpecError
from perfmodel.ops import Layout, Precision
from perfmodel.serving import fastsim, slo
from perfmodel.serving.slo import Workload


def _wl(requests=None, seeds=1, slo_ttft=1.0):
    return Workload("uniform:32,128", "uniform:1,40", slo_ttft, 0.05, 99, seeds, 0, requests, 0.05)


def test_a_trace_is_ten_lifetimes_of_the_requests_in_the_system_between_1000_and_50000():
    """Little's law at saturation: the decoding batch plus those waiting, about rate x TTFT SLO / 2, times
    TRACE_LIFETIMES = 10; at least TRACE_MIN = 1000 requests and at most 50,000. --requests overrides it."""
    wl = _wl()
    assert slo.trace_length(wl, {"batch": 100, "rate": 50.0}) == 10 * (100 + 50.0 * 1.0 / 2) == 1250
    assert slo.trace_length(wl, {"batch": 90, "rate": 20.0}) == 1000  # 10 x 100 = 1000: the floor exactly
    assert slo.trace_length(wl, {"batch": 10, "rate": 1.0}) == 1000  # 105 < 1000
    assert slo.trace_length(_wl(slo_ttft=2.0), {"batch": 100, "rate": 50.0}) == 1500
    assert slo.trace_length(wl, {"batch": 100.01, "rate": 0.0}) == 1001  # rounded up
    assert slo.trace_length(wl, {"batch": 4000, "rate": 2000.0}) == 50_000
    assert slo.trace_length(_wl(requests=300), {"batch": 100, "rate": 50.0}) == 300


def test_a_search_takes_up_to_1000_seeds_and_refuses_one_more():
    assert len(_wl(seeds=1000).seeds) == 1000 and _wl(seeds=3).seeds == [0, 1, 2]
    with pytest.raises(SpecError, match="--seeds"):
        _wl(seeds=1001)


def test_a_percentile_is_in_0_to_100_a_tolerance_in_0_to_1_and_a_trace_has_at_least_12_requests():
    for q in (0.5, 99.9, 100):
        assert Workload("uniform:32,128", "uniform:1,40", 1, 0.05, q, 1, 0, None, 0.05).q == q
    for q in (0, -1, 100.5, "x", True):
        with pytest.raises(SpecError, match="--percentile"):
            Workload("uniform:32,128", "uniform:1,40", 1, 0.05, q, 1, 0, None, 0.05)
    for tol in (1e-6, 0.5, 0.999):
        assert Workload("uniform:32,128", "uniform:1,40", 1, 0.05, 99, 1, 0, None, tol).tol == tol
    for tol in (0, 1, 1.5, -0.1):
        with pytest.raises(SpecError, match="--tolerance"):
            Workload("uniform:32,128", "uniform:1,40", 1, 0.05, 99, 1, 0, None, tol)
    assert _wl(requests=12).requests == 12
    with pytest.raises(SpecError, match="--requests"):
        _wl(requests=11)


def test_a_failing_run_stops_as_soon_as_its_verdict_is_certain_and_says_its_values_are_lower_bounds():
    """simulate_rate's default stop rule (the measured window, the SLOs, the percentile) ends a run that has already
    failed: fewer steps than the whole run, the same failing verdict, `exact` False."""

    inst = slo.Instance(load_model("llama-3.2-1b"), load_hardware("l4"), Precision(), Layout(1, 1, 1, 1), "roofline",
                        None, 16, 2048, 32, 16)
    wl = _wl(requests=300, slo_ttft=0.03)
    quick, whole = slo.simulate_rate(inst, wl, 300, 400.0, 0), slo.simulate_rate(inst, wl, 300, 400.0, 0, stop=False)
    assert not quick["ok"] and not whole["ok"] and quick["fail"] == whole["fail"] == "ttft"
    assert quick["exact"] is False and whole["exact"] is True and quick["steps"] < whole["steps"]
    assert quick["in_system"] > 0  # Little's law over the measured requests that finished before the stop
    assert wl.stop_rule(300) == {"window": slice(50, 250), "ttft": 0.03, "tpot": 0.05, "q": 99}


def test_a_verdict_passes_at_the_slo_itself_and_blames_the_metric_furthest_beyond_its_slo():
    """_verdict over the window's TTFT and TPOT arrays (slo_ttft 1 s, slo_tpot 50 ms, p99): a percentile equal to its
    SLO passes; with one failing, that one; with both, the larger ratio of percentile to SLO, TTFT on a tie."""
    wl = _wl()
    v = lambda t, d: slo._verdict(np.full(10, t), np.full(10, d), wl)  # noqa: E731
    assert v(1.0, 0.05) == {"ok": True, "ttft": 1.0, "tpot": 0.05, "fail": None, "exact": True}
    assert v(2.0, 0.01)["fail"] == "ttft" and v(0.5, 0.06)["fail"] == "tpot"
    assert v(2.0, 0.15)["fail"] == "tpot"  # 2x against 3x
    assert v(3.0, 0.10)["fail"] == "ttft"  # 3x against 2x
    assert v(2.0, 0.10)["fail"] == "ttft"  # a tie
    assert v(0.5, np.nan)["ok"] and v(np.nan, 0.01)["ok"]  # a metric no request produced does not fail
    assert slo._verdict(np.full(10, 0.1), np.full(10, 0.01), wl, "tpot") == {
        "ok": False, "ttft": 0.1, "tpot": 0.01, "fail": "tpot", "exact": False}


def test_a_replica_s_ttft_is_first_token_minus_arrival_over_the_window_first_tokens_before_one_second_included():
    """simulate_rate over its window (every measured request run to its end): TTFT = first token - arrival; TPOT =
    (last - first token) / (output - 1) of the requests of two or more tokens; requests in the system by Little's
    law, the rate times the mean latency."""

    inst = slo.Instance(load_model("llama-3.2-1b"), load_hardware("l4"), Precision(), Layout(1, 1, 1, 1), "roofline",
                        None, 16, 2048, 32, 16)
    wl = _wl(requests=200)
    v = slo.simulate_rate(inst, wl, 200, 100.0, 0, stop="window")
    arr, P, O = wl.trace(200, 100.0, 0)
    r = fastsim.run(arr, P, O, inst.sizes, inst.cost, inst.slots, inst.budget, "chunked", inst.block)
    w = wl.window(200)
    assert r["first"][w].min() < 1.0 < r["first"][w].max()
    assert v["ttft"] == pytest.approx(np.percentile(r["first"][w] - arr[w], 99), rel=1e-12)
    assert r["done"][w].min() < 1.0 and (O[w] == 1).any()  # requests done before t = 1 s; one-token outputs: no TPOT
    two = O[w] > 1
    tpot = (r["last"][w][two] - r["first"][w][two]) / (O[w][two] - 1)
    assert v["tpot"] == pytest.approx(np.percentile(tpot, 99), rel=1e-12)
    assert v["in_system"] == pytest.approx(100.0 * np.mean(r["done"][w] - arr[w]), rel=1e-12)  # Little's law


def test_a_ttft_failure_while_the_kv_cache_stalls_admission_is_blamed_on_memory():
    """An L4 cut to 2.53 GB holds Llama-3.2-1B's weights and the cache of 1,780 tokens (32 requests of up to 168):
    at 200 requests/s admission waits for memory and TTFT fails: `memory`. With its whole 24 GB the same load fails TTFT with no stall."""

    m, l4 = load_model("llama-3.2-1b"), load_hardware("l4")
    wl = _wl(requests=300, slo_ttft=0.05)
    run = lambda hw, rate: slo.simulate_rate(slo.Instance(m, hw, Precision(), Layout(1, 1, 1, 1), "roofline",  # noqa: E731
                                                          None, 16, 2048, 32, 16), wl, 300, rate, 0)
    small = run(l4.replace(memory_capacity=2.53e9), 200.0)
    assert small["memory_stalls"] + small["preempted"] > 0 and small["fail"] == "memory"
    big = run(l4, 2000.0)
    assert big["memory_stalls"] == big["preempted"] == 0 and big["fail"] == "ttft"


def test_a_rate_search_brackets_the_largest_passing_rate_to_the_tolerance_from_above_or_below():
    """bisect with a verdict that passes up to 10/s: from 3/s (stepping up) or 100/s (down) it returns a passing lo
    and a failing hi with hi / lo <= 1 + tol; a search whose every rate passes stops after STEPS_UP steps and says
    it hit the bound; one whose every rate fails returns no lo and does not say so."""
    ok_to = lambda limit: (lambda r: {"ok": r <= limit, "rate": r})  # noqa: E731
    for start in (3.0, 100.0):
        lo, vlo, vhi, seen, hit = slo.bisect(ok_to(10.0), start, 0.05, slo.FIRST_STEPS)
        assert lo <= 10.0 < vhi["rate"] <= lo * 1.05 and vlo["rate"] == lo and not hit
        assert all(v["ok"] == (v["rate"] <= 10.0) for v in seen)
    lo, vlo, vhi, seen, hit = slo.bisect(ok_to(1e9), 1.0, 0.05, slo.FIRST_STEPS)
    assert hit and vhi is None and len(seen) == 1 + slo.STEPS_UP
    assert lo == pytest.approx(1.15 * 1.3 * 1.5 ** (slo.STEPS_UP - 2), rel=1e-12)
    lo, vlo, vhi, seen, hit = slo.bisect(ok_to(0.0), 1.0, 0.05, slo.FIRST_STEPS)
    assert lo is None and vlo is None and not hit and len(seen) == 1 + slo.STEPS_DOWN
    assert vhi["rate"] == pytest.approx(1 / (1.15 * 1.3 * 1.5 ** (slo.STEPS_DOWN - 2)), rel=1e-12)
    lo, _, vhi, seen, _ = slo.bisect(ok_to(10.0), 3.0, 0.05)  # no first steps: 1.5 at a time
    assert seen[1]["rate"] == 4.5 and lo <= 10.0 < vhi["rate"] <= lo * 1.05


def test_seeds_combine_to_the_lower_median_cut_after_the_first_seed_that_found_nothing():
    runs = lambda *los: [{"seed": i, "lo": lo, "hit": i == 0} for i, lo in enumerate(los)]  # noqa: E731
    c = slo.combine(runs(3.0, 1.0, 2.0))
    assert (c["goodput"], c["lo"], c["hi"], c["median"]["seed"], c["hit"]) == (2.0, 1.0, 3.0, 2, True)
    assert slo.combine(runs(4.0, 1.0, 3.0, 2.0))["goodput"] == 2.0  # the lower of the two middle ones
    c = slo.combine(runs(2.0, None, 5.0))  # a seed that found nothing: the rest say nothing more
    assert (c["goodput"], c["hi"], len(c["runs"])) == (2.0, 2.0, 2)
    assert slo.combine(runs(None, 5.0)) == {"goodput": None, "runs": runs(None), "median": runs(None)[0]}
    assert slo.combine([{"seed": 0, "lo": 1.0, "hit": False}, {"seed": 1, "lo": 2.0, "hit": True}])["hit"]


def test_the_analytic_bound_is_the_largest_batch_within_memory_slots_and_tpot_and_its_rate():
    """analytic(): requests at the mean context (prompt + half the output) that the KV memory holds, at most the slots;
    the largest batch whose decode step meets the TPOT SLO; the rate 1 / (output x step / B + prompt x prefill
    time per token at the chunk). On an L4 cut to 2.53 GB (1,780 tokens of cache) memory binds."""

    m, l4 = load_model("llama-3.2-1b"), load_hardware("l4")
    wl = Workload("uniform:32,128", "uniform:100,300", 1.0, 0.05, 99, 1, 0, None, 0.05)
    ctx = wl.mean_prompt + wl.mean_output / 2
    for hw, slots, binds in ((l4.replace(memory_capacity=2.53e9), 256, "memory"), (l4, 16, "slots"),
                             (l4, 256, "tpot")):
        inst = slo.Instance(m, hw, Precision(), Layout(1, 1, 1, 1), "roofline", None, 16, 2048, slots, 16)
        a = slo.analytic(inst, wl if binds != "tpot" else Workload("uniform:32,128", "uniform:100,300", 1.0, 0.012,
                                                                      99, 1, 0, None, 0.05))
        tpot = 0.05 if binds != "tpot" else 0.012
        b_mem = int(inst.sizes.capacity / inst.sizes.per_token // ctx)
        assert a["b_mem"] == b_mem
        step = lambda b: inst.step(np.ones(b), np.full(b, int(round(ctx))))  # noqa: E731
        B = a["batch"]
        assert step(B) <= tpot
        if binds == "tpot":
            assert step(B + 1) > tpot and B < min(b_mem, slots)
        else:
            assert B == {"memory": b_mem, "slots": slots}[binds]
        chunk = int(min(2048, wl.mean_prompt))
        t_pre = inst.step([chunk], [chunk]) / chunk
        assert a["rate"] == pytest.approx(1 / (wl.mean_output * step(B) / B + wl.mean_prompt * t_pre), rel=1e-12)
        assert a["ttft_alone"] == pytest.approx(t_pre * wl.prompt_q, rel=1e-12)


def test_the_analytic_batch_is_at_least_one_request_when_the_memory_holds_less_than_one_at_mean_context():

    hw = load_hardware("l4").replace(memory_capacity=2.5e9)  # 866 tokens of cache
    inst = slo.Instance(load_model("llama-3.2-1b"), hw, Precision(), Layout(1, 1, 1, 1), "roofline", None, 16, 2048,
                        256, 16)
    wl = Workload("uniform:32,128", "uniform:2000,3000", 1.0, 0.05, 99, 1, 0, None, 0.05)  # 1,330 tokens on average
    assert inst.sizes.capacity / inst.sizes.per_token < wl.mean_prompt + wl.mean_output / 2
    a = slo.analytic(inst, wl)
    assert a["b_mem"] == 1 and a["batch"] == 1


def test_without_a_slot_limit_the_analytic_batch_is_bounded_by_memory_and_tpot_alone():

    m, hw = load_model("llama-3.2-1b"), load_hardware("l4")
    wl = Workload("uniform:32,128", "uniform:100,300", 1.0, 0.5, 99, 1, 0, None, 0.05)
    a = {s: slo.analytic(slo.Instance(m, hw, Precision(), Layout(1, 1, 1, 1), "roofline", None, 16, 2048, s, 16), wl)
         for s in (None, 4096, 64)}
    assert a[None] == a[4096] and a[None]["batch"] > 64 == a[64]["batch"]
