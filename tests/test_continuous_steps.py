"""Continuous batching's iteration, to the row (serving/scheduler.py `_Sim.continuous`): which prompts a prefill-only
iteration takes under a token budget, and what a two-token prompt makes of the iteration."""
import numpy as np

from perfmodel.ops import Precision
from perfmodel.serving import StepCost, Traffic, simulate
from perfmodel.specs import load_hardware, load_model

M, HW = load_model("llama-2-13b"), load_hardware("h100-sxm")
COST = StepCost(M, HW, Precision(), 1)


def _tr(prompts, outs):
    """Requests at t = 0: prompts, and each one's sample output lengths."""
    out = np.array(outs)
    return Traffic(np.zeros(len(prompts)), np.array(prompts), out, int(out.max()), 0,
                   [f"r{i}" for i in range(len(prompts))])


def _run(prompts, outs, prefill, budget, slots=8):
    tr = _tr(prompts, [[o] for o in outs])
    return simulate(M, HW, tr, "continuous", slots, prefill=prefill, token_budget=budget, cost=COST)


def test_a_separate_prefill_takes_whole_prompts_in_order_while_the_budget_lasts_a_prompt_filling_it_exactly_included():
    """Budget 100, prompts 50, 50, 30 at t = 0: the first prefill takes 50 + 50 = 100 tokens (the second fills the
    budget exactly), the next the 30 while the two decode wait; decodes run only when no prompt is pending."""
    tl = _run([50, 50, 30], [3, 3, 3], "separate", 100).timeline
    assert list(tl["kind"][:2]) == ["prefill", "prefill"]
    assert list(tl["prefill_tokens"][:2]) == [100, 30] and list(tl["rows"][:2]) == [2, 1]
    assert list(tl["decode_rows"][:2]) == [0, 0] and tl["kind"][2] == "decode" and tl["rows"][2] == 3


def test_a_separate_prefill_of_a_prompt_bigger_than_the_budget_runs_it_whole_and_alone():
    tl = _run([150, 20], [2, 2], "separate", 100).timeline
    assert list(tl["prefill_tokens"][:2]) == [150, 20] and list(tl["rows"][:2]) == [1, 1]


def test_a_two_token_prompt_is_a_prefill_iteration_in_the_separate_policy_and_a_prefill_row_in_the_chunked_one():
    """A prompt with 2 tokens left is a prompt (more than the 1 token of a decode): `separate` gives it a prefill-only
    iteration; `chunked` a mixed-in chunk of 2 tokens, not a decode row."""
    sep = _run([2], [3], "separate", 100).timeline
    assert sep["kind"][0] == "prefill" and sep["prefill_tokens"][0] == 2 and sep["decode_rows"][0] == 0
    ch = _run([2], [3], "chunked", 100).timeline
    assert ch["kind"][0] == "mixed" and ch["prefill_tokens"][0] == 2 and ch["decode_rows"][0] == 0
    one = _run([1], [3], "chunked", 100).timeline  # a one-token prompt is a decode row from the start
    assert one["kind"][0] == "decode" and one["prefill_tokens"][0] == 0 and one["decode_rows"][0] == 1


def test_the_progress_callback_hears_the_requests_done_every_256_iterations():
    """fastsim's and the scheduler's contract: progress(requests done) at iterations 0, 256, 512, ... A lone request
    of 600 output tokens runs 600 iterations: three calls, none done yet at any of them; with 20 of them, each of
    30 tokens at t = 0 on 20 slots, 30 iterations: one call, at the first."""
    n = []
    tr = Traffic(np.zeros(1), np.array([8]), np.array([[600]]), 600, 0, ["r0"])
    r = simulate(M, HW, tr, "continuous", 8, cost=COST, progress=n.append)
    assert r.summary["steps"] == 600 and n == [0, 0, 0]
    n = []
    tr = Traffic(np.zeros(20), np.full(20, 8), np.full((20, 1), 30), 30, 0, [f"r{i}" for i in range(20)])
    assert simulate(M, HW, tr, "continuous", 20, cost=COST, progress=n.append).summary["steps"] == 30 and n == [0]


def test_a_shared_prefix_is_skipped_by_requests_admitted_once_its_last_token_is_computed_and_not_before():
    """A 64-token common prefix before 16 own tokens, chunks of 16 (budget 16): the first request computes the prefix
    in its first 4 iterations. A second request arriving during the 2nd iteration (admitted at its end, a quarter of
    the prefix computed) computes all 80 of its tokens (the last one as a one-token chunk, a decode row: 80 + 79
    prefill tokens in all); one arriving during the 4th, admitted the instant the prefix's last token is computed,
    only its own 16 (80 + 15)."""
    def run(t2):
        tr = Traffic(np.array([0.0, t2]), np.array([16, 16]), np.array([[2], [2]]), 2, 64, ["a", "b"])
        return simulate(M, HW, tr, "continuous", 8, token_budget=16, cost=COST).timeline

    alone = run(10.0)
    end = np.asarray(alone["t_start_s"]) + np.asarray(alone["duration_s"])
    assert list(alone["prefill_tokens"][:5]) == [16] * 5
    early, late = run((end[0] + end[1]) / 2), run((end[2] + end[3]) / 2)
    assert sum(early["prefill_tokens"]) == 159 and sum(late["prefill_tokens"]) == 95


def test_the_progress_callback_counts_the_requests_done_by_its_iteration():
    """Ten requests of 2 tokens finish in the first iterations, beside one of 600 tokens: at iterations 0, 256 and
    512 the callback hears 0, 10 and 10 requests done."""
    n = []
    out = np.array([[600]] + [[2]] * 10)
    tr = Traffic(np.zeros(11), np.full(11, 8), out, 600, 0, [f"r{i}" for i in range(11)])
    simulate(M, HW, tr, "continuous", 16, cost=COST, progress=n.append)
    assert n == [0, 10, 10]


def test_simulate_defaults_to_8_slots_and_a_16_token_cost_quantum_and_prices_the_precision_given():
    tr = _tr([100] * 10, [[37]] * 10)
    d = simulate(M, HW, tr)
    assert d.summary["slots"] == 8 and d.summary["peak_running"] == 8
    q16 = simulate(M, HW, tr, cost_quantum=16)
    assert list(d.timeline["duration_s"]) == list(q16.timeline["duration_s"])
    exact = simulate(M, HW, tr, cost_quantum=1)
    assert sum(exact.timeline["duration_s"]) < sum(d.timeline["duration_s"])  # rounded-up contexts cost more
    fp8 = simulate(M, HW, tr, prec=Precision(kv="fp8"))
    assert fp8.summary["peak_kv_reserved_bytes"] == d.summary["peak_kv_reserved_bytes"] / 2


def test_the_kv_manager_label_says_shared_only_for_a_paged_cache_that_shares():
    tr = _tr([100, 100], [[5], [5]])
    label = lambda **k: simulate(M, HW, tr, cost=COST, **k).summary["kv_manager"]  # noqa: E731
    assert label(kv_manager="paged") == "paged+shared" and label(kv_manager="paged", sharing=False) == "paged"
    assert label(kv_manager="contiguous") == "contiguous" == label(kv_manager="contiguous", sharing=False)


def test_a_warm_up_must_leave_a_request_to_measure():
    import pytest

    from perfmodel.errors import SpecError

    tr = _tr([100, 100], [[5], [5]])
    assert simulate(M, HW, tr, cost=COST, warmup=1).summary["warmup"] == 1
    with pytest.raises(SpecError, match="--warmup"):
        simulate(M, HW, tr, cost=COST, warmup=2)


def test_a_request_longer_than_max_context_is_refused_by_its_longest_sample_and_one_that_reaches_it_runs():
    """Llama-2-13B's max_context is 4,096: prompt 4,000 + 96 tokens runs; + 97 is refused, also when only one of
    two samples is that long."""
    import pytest

    from perfmodel.errors import SpecError

    assert simulate(M, HW, _tr([4000], [[96]]), cost=COST).summary["tokens"] == 96
    for outs in ([[97]], [[5, 97]]):
        with pytest.raises(SpecError, match="max_context"):
            simulate(M, HW, _tr([4000], outs), cost=COST)


def test_with_an_empty_queue_a_hole_as_big_as_the_smallest_region_any_request_needs_is_not_external_fragmentation():
    """Contiguous regions of prompt + the longest output (10): A 20 tokens, B 110, C 20, laid out in that order.
    A finishes first; while B and C run and nobody waits, A's 20-token hole still serves the smallest request of
    the traffic, so no memory is counted as external fragmentation."""
    tr = _tr([10, 100, 10], [[2], [10], [10]])
    tl = simulate(M, HW, tr, kv_manager="contiguous", cost=COST).timeline
    after = [i for i in range(len(tl["step"])) if tl["running"][i] == 2 and tl["waiting"][i] == 0]
    assert after and all(tl["kv_external_bytes"][i] == 0 for i in after)
