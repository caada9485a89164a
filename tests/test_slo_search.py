"""The capacity search's own rules (serving/slo.py): how long a trace is, how many seeds a search takes, and the
bracket a rate search steps through. Formula tests of the constants docs/capacity.md states."""
import numpy as np
import pytest

from perfmodel import load_hardware, load_model
from perfmodel.errors import SpecError
from perfmodel.ops import Layout, Precision
from perfmodel.serving import fastsim, slo
from perfmodel.serving.slo import Workload


def _inst(slots=32, hw="l4", model="llama-3.2-1b"):
    """One replica of `model` on `hw` (tp 1), roofline: 16-token cost quantum, a 2,048-token budget, 16-token blocks."""
    hw = load_hardware(hw) if isinstance(hw, str) else hw
    return slo.Instance(load_model(model), hw, Precision(), Layout(1, 1, 1, 1), "roofline", None, 16, 2048, slots, 16)


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
    assert slo.trace_length(wl, {"batch": 5000, "rate": 2000.0}) == 50_000  # 60,000 capped
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

    inst = _inst()
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
    half = lambda t, d: slo._verdict(np.full(10, t), np.full(10, d), _wl(slo_ttft=0.5))  # noqa: E731
    assert half(2.0, 0.15)["fail"] == "ttft"  # 4x its 0.5 s SLO against 3x
    assert half(1.0, 0.15)["fail"] == "tpot"  # 2x against 3x
    assert v(0.5, np.nan)["ok"] and v(np.nan, 0.01)["ok"]  # a metric no request produced does not fail
    assert slo._verdict(np.full(10, 0.1), np.full(10, 0.01), wl, "tpot") == {
        "ok": False, "ttft": 0.1, "tpot": 0.01, "fail": "tpot", "exact": False}


def test_a_replica_s_ttft_is_first_token_minus_arrival_over_the_window_first_tokens_before_one_second_included():
    """simulate_rate over its window (every measured request run to its end): TTFT = first token - arrival; TPOT =
    (last - first token) / (output - 1) of the requests of two or more tokens; requests in the system by Little's
    law, the rate times the mean latency."""

    inst = _inst()
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

    l4 = load_hardware("l4")
    wl = _wl(requests=300, slo_ttft=0.05)
    run = lambda hw, rate: slo.simulate_rate(_inst(32, hw), wl, 300, rate, 0)  # noqa: E731
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
    assert hit and vhi is None and len(seen) == 1 + 5  # docs/capacity.md: it stops above bound x 5
    assert lo == pytest.approx(1.15 * 1.3 * 1.5 ** 3, rel=1e-12) and 5 < lo < 5.1
    lo, vlo, vhi, seen, hit = slo.bisect(ok_to(0.0), 1.0, 0.05, slo.FIRST_STEPS)
    assert lo is None and vlo is None and not hit and len(seen) == 1 + 10  # and reports none reached below bound / 38
    assert vhi["rate"] == pytest.approx(1 / (1.15 * 1.3 * 1.5 ** 8), rel=1e-12) and 38 < 1 / vhi["rate"] < 39
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

    l4 = load_hardware("l4")
    wl = Workload("uniform:32,128", "uniform:100,300", 1.0, 0.05, 99, 1, 0, None, 0.05)
    ctx = wl.mean_prompt + wl.mean_output / 2
    for hw, slots, binds in ((l4.replace(memory_capacity=2.53e9), 256, "memory"), (l4, 16, "slots"),
                             (l4, 256, "tpot")):
        inst = _inst(slots, hw)
        a = slo.analytic(inst, wl if binds != "tpot" else Workload("uniform:32,128", "uniform:100,300", 1.0, 0.012,
                                                                      99, 1, 0, None, 0.05))
        tpot = 0.05 if binds != "tpot" else 0.012
        b_mem = int(inst.sizes.capacity // (inst.sizes.per_token * ctx))  # no fixed state per request: per_seq = 0
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
    inst = _inst(256, hw)
    wl = Workload("uniform:32,128", "uniform:2000,3000", 1.0, 0.05, 99, 1, 0, None, 0.05)  # 1,330 tokens on average
    assert inst.sizes.capacity / inst.sizes.per_token < wl.mean_prompt + wl.mean_output / 2
    a = slo.analytic(inst, wl)
    assert a["b_mem"] == 1 and a["batch"] == 1


def test_without_a_slot_limit_the_analytic_batch_is_bounded_by_memory_and_tpot_alone():

    wl = Workload("uniform:32,128", "uniform:100,300", 1.0, 0.5, 99, 1, 0, None, 0.05)
    a = {s: slo.analytic(_inst(s), wl) for s in (None, 4096, 64)}
    assert a[None] == a[4096] and a[None]["batch"] > 64 == a[64]["batch"]


def test_a_ttft_failure_with_admission_stalled_for_memory_but_nothing_preempted_is_still_blamed_on_memory(monkeypatch):
    """Either sign of a full KV cache (requests waiting for blocks, or requests preempted) turns a TTFT failure into
    `memory`; a TPOT failure stays TPOT, and a TTFT failure with neither stays TTFT. The simulator's result is set by
    hand so that each sign comes alone."""
    inst = _inst()
    wl = _wl(requests=60, slo_ttft=0.05)
    arr, _, O = wl.trace(60, 10.0, 0)

    def fake(stalls, preempted, ttft, tpot):
        first = arr + ttft
        return lambda *a, **k: {"first": first, "last": first + tpot * np.maximum(O - 1, 0), "done": first + 1.0,
                                "memory_stalls": stalls, "preempted": preempted, "peak_running": 1, "steps": 1,
                                "generated": int(O.sum())}
    for stalls, pre, ttft, tpot, fail in ((3, 0, 1.0, 0.01, "memory"), (0, 2, 1.0, 0.01, "memory"),
                                          (0, 0, 1.0, 0.01, "ttft"), (3, 2, 0.01, 1.0, "tpot")):
        monkeypatch.setattr(fastsim, "run", fake(stalls, pre, ttft, tpot))
        v = slo.simulate_rate(inst, wl, 60, 10.0, 0)
        assert (v["ok"], v["fail"], v["memory_stalls"], v["preempted"]) == (False, fail, stalls, pre)


def test_the_analytic_batch_is_the_largest_whose_decode_step_meets_the_tpot_slo_found_by_bisection_exactly():
    """With 8 slots and the TPOT SLO set to the step time of batch k exactly, the bisection returns k, for every k in
    1 ... 8 (a step equal to the SLO meets it): the same answer as trying every batch. A SLO below batch 1's step
    gives no rate and batch 1; one equal to it gives batch 1."""
    inst = _inst(8)
    wl = lambda tpot: Workload("64", "64", 1.0, tpot, 99, 1, 0, None, 0.05)  # noqa: E731
    step = [inst.step(np.ones(b), np.full(b, 96)) for b in range(1, 9)]  # ctx = 64 + 64 / 2
    assert all(a < b for a, b in zip(step, step[1:]))  # each request more costs time
    for k in range(1, 9):
        a = slo.analytic(inst, wl(step[k - 1]))
        assert a["batch"] == k and a["rate"] is not None and a["tpot1"] == step[0]
        assert a["tpot1"] == inst.step([1], [96])
    assert slo.analytic(inst, wl(step[0] * 0.999)) == {"rate": None, "batch": 1, "tpot1": step[0]}


def test_the_analytic_bound_prices_a_prefill_chunk_of_at_least_two_tokens_and_a_context_of_at_least_one_and_a_half():
    """One-token prompts and outputs: the mean context is 1 + 1/2 = 1.5 tokens, so the KV memory holds
    capacity / 1.5 such requests; prefill is priced per token at a chunk of 2 (the analytic bound's floor), so the
    percentile prompt alone takes step(2 tokens) / 2."""
    inst = _inst(None)
    a = slo.analytic(inst, Workload("1", "1", 1.0, 0.5, 99, 1, 0, None, 0.05))
    assert a["b_mem"] == int(inst.sizes.capacity // (inst.sizes.per_token * 1.5))
    assert a["ttft_alone"] == inst.step([2], [2]) / 2 * 1
    a2 = slo.analytic(inst, Workload("2", "1", 1.0, 0.5, 99, 1, 0, None, 0.05))
    assert a2["ttft_alone"] == inst.step([2], [2]) / 2 * 2


def test_the_pareto_front_keeps_rows_no_other_beats_on_goodput_per_device_and_the_second_key():
    """Row 0 (1, 1) loses to row 1 (2, 1) on goodput alone, row 2 (2, 2) to row 1 on the second key alone; row 3
    (3, 5) is beaten by no row. Two equal rows are both kept. A row that is not `ok` is neither kept nor beats any.
    lower_second=False reverses the second key (more is better); the default is lower."""
    g, c = [1, 2, 2, 3], [1, 1, 2, 5]
    assert list(slo.pareto_flags(g, c, [True] * 4)) == [False, True, False, True]
    assert list(slo.pareto_flags(g, c, [True, False, True, True])) == [True, False, True, True]
    assert list(slo.pareto_flags([1, 1], [1, 1], [True, True])) == [True, True]
    assert list(slo.pareto_flags([1, 1], [1, 2], [True, True])) == [True, False]
    assert list(slo.pareto_flags([1, 1], [1, 2], [True, True], lower_second=False)) == [False, True]
    assert list(slo.pareto_flags([1, 2], [1, 2], [True, True], lower_second=False)) == [False, True]
    assert list(slo.pareto_flags([1, 2], [1, 2], [True, True])) == [True, True]


def test_a_model_with_no_per_token_cache_is_bounded_by_its_fixed_state_per_request_and_the_4096_request_cap():
    """llama-2-13b-linear keeps a fixed recurrent state per request (52.4 MB) and no per-token cache: the memory holds
    capacity // state requests (1,029 on an H100), whatever the context. With no state either, and with memory enough
    for more than 4,096 requests, the batch stops at 4,096 (the analytic bound's cap), or at the slots above it."""
    h100 = load_hardware("h100-sxm")
    wl = Workload("64", "64", 1.0, 10.0, 99, 1, 0, None, 0.05)
    lin = _inst(None, h100, "llama-2-13b-linear")
    assert lin.sizes.per_token == 0 and lin.sizes.per_seq > 0
    a = slo.analytic(lin, wl)
    assert a["b_mem"] == int(lin.sizes.capacity // lin.sizes.per_seq) == a["batch"] == 1029 and a["rate"] > 0
    big = h100.replace(memory_capacity=1e13)
    for slots, batch in ((None, 4096), (5000, 4096), (4095, 4095)):
        inst = _inst(slots, big)
        assert inst.sizes.capacity // (inst.sizes.per_token * 96) > 4096
        assert slo.analytic(inst, wl)["batch"] == batch


def test_the_default_work_bound_is_15_million_simulated_tokens_as_docs_capacity_md_states():
    from perfmodel.serving import capacity as cap
    cap._work(15_000_000, None)  # at the bound: runs
    with pytest.raises(SpecError, match="--max-tokens"):
        cap._work(15_000_001, None)
    cap._work(15_000_001, 15_000_001)


def test_the_first_seed_steps_from_the_analytic_bound_by_1_15_and_1_3_and_the_others_from_its_answer_by_2_tol():
    """seed_search: the first seed's bracket steps up from its start by 1.15x, then 1.3x, then 1.5x at a time; each
    other seed starts from the first seed's answer, a few tolerances from its own, so it steps by 1 + 2 tol three times
    before 1.5x."""
    ok_to = lambda limit: (lambda r: {"ok": r <= limit, "rate": r})  # noqa: E731
    wl = _wl()  # tolerance 0.05
    first = [v["rate"] for v in slo.seed_search(ok_to(100.0), 10.0, wl, True)["seen"][:4]]
    assert first == pytest.approx([10.0, 11.5, 14.95, 22.425], rel=1e-12)
    other = [v["rate"] for v in slo.seed_search(ok_to(100.0), 10.0, wl, False)["seen"][:5]]
    assert other == pytest.approx([10.0, 11.0, 12.1, 13.31, 19.965], rel=1e-12)


def test_a_request_that_holds_no_memory_leaves_the_analytic_batch_to_the_slots_and_the_4096_cap():
    """With nothing cached per token nor held per sequence (a cost model without a cache), memory does not bound the
    batch: 4,096 stands for it, and the slots or the TPOT SLO decide; memory in whole requests otherwise."""
    import dataclasses

    wl = Workload("uniform:32,128", "uniform:100,300", 1.0, 10.0, 99, 1, 0, None, 0.05)
    for slots in (None, 64):
        inst = _inst(slots)
        inst.sizes = dataclasses.replace(inst.sizes, per_token=0.0, per_seq=0.0)
        a = slo.analytic(inst, wl)
        assert a["b_mem"] == 4096 and a["batch"] <= (slots or 4096)
    inst = _inst(None)
    per = inst.sizes.per_token * (wl.mean_prompt + wl.mean_output / 2)
    inst.sizes = dataclasses.replace(inst.sizes, capacity=7.5 * per)  # seven and a half requests: seven
    assert slo.analytic(inst, wl)["b_mem"] == 7
