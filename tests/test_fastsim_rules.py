"""The fast simulator's own rules (serving/fastsim.py): a request fits alone when the blocks of its last token and
its state fit an empty device, exactly as the paged manager says; a prefilled request (a disaggregated decode pool)
holds prompt + 1 tokens and decodes output - 1 more; the block size defaults to 16 tokens."""
import numpy as np
import pytest

from perfmodel import load_hardware, load_model
from perfmodel.ops import Precision
from perfmodel.serving import StepCost, fastsim
from perfmodel.serving.kvmemory import Group, KVSizes, Paged, kv_sizes

M, HW = load_model("llama-2-13b"), load_hardware("h100-sxm")
COST = StepCost(M, HW, Precision(), 1)
SIZES = kv_sizes(M, HW)


def test_fits_alone_is_the_paged_managers_answer_for_one_sample_requests_to_the_byte():
    """Prompt 100 + output 13 - 1 = 112 tokens = 7 blocks of 16 (1 B a token) + 5 B of state = 117 B: fits in 117,
    not in 116; vectorized over requests, and the same as Paged.fits_alone with or without sharing."""
    prompts, outs = np.array([100, 100, 1, 16, 17]), np.array([13, 14, 1, 1, 1])
    for cap in (116.0, 117.0, 133.0):
        s = KVSizes(1.0, 5.0, 0.0, cap, 10**6)
        got = fastsim.fits_alone(s, 16, prompts, outs)
        for share in (True, False):
            want = [Paged(s, 16, share).fits_alone(Group(0, int(p), [int(o)])) for p, o in zip(prompts, outs)]
            assert list(got) == want
    s = KVSizes(1.0, 5.0, 0.0, 117.0, 10**6)
    assert list(fastsim.fits_alone(s, 16, prompts, outs)) == [True, False, True, True, True]
    assert list(fastsim.fits_alone(KVSizes(1.0, 5.0, 0.0, 116.0, 10**6), 16, prompts, outs))[:2] == [False, False]


def test_a_prefilled_request_decodes_output_minus_one_tokens_from_prompt_plus_one():
    """Prompt 100, output 5, prefilled: 4 decode steps at contexts 101 ... 104 (its first token came with it), the
    first of them ending at the decode step time of context 101."""
    r = fastsim.run([0.0], [100], [5], SIZES, fastsim.ExactCost(COST), prefilled=True)
    assert r["steps"] == 4 and r["generated"] == 4
    assert r["first"][0] == pytest.approx(COST.same(1, 101, 1), rel=1e-12)
    assert r["done"][0] == pytest.approx(sum(COST.same(1, 100 + k, 1) for k in range(1, 5)), rel=1e-12)
    whole = fastsim.run([0.0], [100], [5], SIZES, fastsim.ExactCost(COST))
    assert whole["steps"] == 5 and whole["generated"] == 5  # a prefill, then 4 decodes


def test_the_fast_simulator_s_blocks_are_16_tokens_unless_told():
    """Prompt 100 + output 5: 104 tokens held at the end, 7 blocks of 16 tokens (of 15, 7 blocks of 105 tokens)."""
    r = fastsim.run([0.0], [100], [5], SIZES, fastsim.ExactCost(COST))
    assert r["peak_kv_bytes"] == 7 * 16 * SIZES.per_token
    assert fastsim.run([0.0], [100], [5], SIZES, fastsim.ExactCost(COST), block=8)["peak_kv_bytes"] == 13 * 8 * SIZES.per_token


def test_prefilled_requests_hold_their_prompt_plus_the_first_token_from_admission():
    """Two prefilled 96-token prompts (outputs 5 and 3) hold 97 tokens each on admission, 7 blocks of 16 each,
    and grow within them: 14 blocks at the peak."""
    r = fastsim.run([0.0, 0.0], [96, 96], [5, 3], SIZES, fastsim.ExactCost(COST), prefilled=True)
    assert r["generated"] == 4 + 2 and r["peak_kv_bytes"] == 14 * 16 * SIZES.per_token


def test_fits_alone_counts_a_partly_filled_last_block_whole():
    """Prompt 100 + output 14 - 1 = 113 tokens: 8 blocks (128 B) + 5 B of state: not in 120 B, though 113 + 5 would."""
    s = KVSizes(1.0, 5.0, 0.0, 120.0, 10**6)
    assert not fastsim.fits_alone(s, 16, np.array([100]), np.array([14]))[0]
    assert fastsim.fits_alone(KVSizes(1.0, 5.0, 0.0, 133.0, 10**6), 16, np.array([100]), np.array([14]))[0]


def test_two_requests_whose_blocks_and_states_fill_the_device_to_the_byte_run_together():
    """Prompt 100, output 5: 104 tokens at the end, 7 blocks of 16 (1 B a token) + 5 B of state = 117 B each:
    234 B run both at once, 233 B one after the other."""
    for cap, peak in ((234.0, 2), (233.0, 1)):
        r = fastsim.run([0.0, 0.0], [100, 100], [5, 5], KVSizes(1.0, 5.0, 0.0, cap, 10**6), fastsim.ExactCost(COST))
        assert r["peak_running"] == peak and r["generated"] == 10


@pytest.mark.parametrize("q", [50, 90, 99])
def test_a_run_whose_percentile_equals_its_slo_is_never_stopped_as_failing(q):
    """The stop rule ends a run early only when the window's q-th percentile must exceed an SLO. With the SLO set to
    the full run's own percentile exactly (TTFT, then TPOT), the run passes, so it must never be stopped; with the
    SLO a little below, a run that stops says the metric that failed. 40 requests of a Poisson trace on one H100 at
    a rate that queues them, window 5-35."""
    from perfmodel.serving import make_traffic

    tr = make_traffic(40, 60.0, None, "uniform:200,2000", "uniform:1,60", 1, 0, 3)
    arr, P, O = tr.arrival, tr.prompt, tr.outputs[:, 0]
    cost = fastsim.ExactCost(COST)
    full = fastsim.run(arr, P, O, SIZES, cost, 8, 512)
    w = slice(5, 35)
    ttft = full["first"][w] - arr[w]
    multi = O[w] > 1
    tpot = (full["last"][w][multi] - full["first"][w][multi]) / (O[w][multi] - 1)
    pt, pd_ = float(np.percentile(ttft, q)), float(np.percentile(tpot, q))
    assert ttft.max() > 2 * ttft.min() and (~multi).any()  # queueing, and one-token requests in the window
    for slo_t, slo_d in ((pt, np.inf), (np.inf, pd_)):
        r = fastsim.run(arr, P, O, SIZES, cost, 8, 512, stop={"window": w, "ttft": slo_t, "tpot": slo_d, "q": q},
                        every=1)
        assert r["stopped"] is None
    for slo_t, slo_d, metric in ((pt * 0.999, np.inf, "ttft"), (np.inf, pd_ * 0.999, "tpot")):
        r = fastsim.run(arr, P, O, SIZES, cost, 8, 512, stop={"window": w, "ttft": slo_t, "tpot": slo_d, "q": q},
                        every=1)
        assert r["stopped"] in (None, metric)


@pytest.mark.parametrize("ahead", [False, True])
@pytest.mark.parametrize("prefill", ["chunked", "whole", "separate"])
@pytest.mark.parametrize("cap,budget", [(600.0, 64), (800.0, None), (1000.0, 128), (1500.0, 64)])
def test_with_a_fixed_state_per_sequence_fastsim_is_the_scheduler_request_for_request_preemptions_included(cap, budget,
                                                                                                          prefill, ahead):
    """1 B a token and 7 B of fixed state per sequence (a linear-attention layer's state, say) on a device of a few
    hundred bytes: admission, block growth and preemption count the state exactly as kvmemory.Paged does, so the
    two simulators give the same times and preemptions, request for request, under each prompt-batching rule
    (whole: prompts of 20-200 tokens over a 64- or 128-token budget run only on an idle engine, in both), with an
    overlap scheduler too (a step cost whose `ahead` is set: an achievable cost of an engine profile)."""
    import copy

    from perfmodel.serving import make_traffic
    from perfmodel.serving.scheduler import _Sim

    cost = copy.copy(COST)
    cost.ahead = ahead
    sizes = KVSizes(1.0, 7.0, 0.0, cap, 10**6)
    tr = make_traffic(40, 200.0, None, "uniform:20,200", "uniform:1,60", 1, 0, 5)
    sim = _Sim(tr, sizes, cost, 8, Paged(sizes, 16, True, 0))
    sim.continuous(prefill, budget)
    ref = sim.result("continuous", {}).requests
    got = fastsim.run(tr.arrival, tr.prompt, tr.outputs[:, 0], sizes, fastsim.ExactCost(cost), 8, budget, prefill,
                      ahead=ahead)
    for a, b in (("first_token_s", "first"), ("last_token_s", "last"), ("done_s", "done"), ("preemptions", "preemptions")):
        assert np.array_equal(ref[a], got[b]), a
    log = []
    fastsim.run(tr.arrival, tr.prompt, tr.outputs[:, 0], sizes, fastsim.ExactCost(cost), 8, budget, prefill, log=log,
                ahead=ahead)
    assert [row[11:13] for row in log] == [row[11:13] for row in sim.log]  # KV used and reserved, state included
    if cap < 1200:
        assert got["preempted"] > 0 and got["memory_stalls"] > 0


def test_a_request_whose_blocks_and_state_are_one_byte_more_than_the_free_memory_waits():
    """157 B, 1 B a token, 7 B of state: A (prompt 100, output 10) takes 7 blocks + 7 = 119 B, leaving 38; B (prompt
    20) needs 2 blocks + 7 = 39 B and waits until A is done. With 158 B it runs beside A."""
    for cap, waits in ((157.0, True), (158.0, False)):
        r = fastsim.run([0.0, 0.0], [100, 20], [10, 2], KVSizes(1.0, 7.0, 0.0, cap, 10**6), fastsim.ExactCost(COST))
        assert bool(r["first"][1] > r["done"][0]) is waits and r["memory_stalls"] == (10 if waits else 0)  # A's steps
        assert r["preempted"] == 0  # B is never admitted into memory it does not have


def test_a_request_kept_out_by_the_slots_counts_one_slot_stall_a_step_and_the_device_is_busy_every_step():
    """One slot, two requests at t = 0: B waits through A's 3 steps (a prefill and 2 decodes), a slot stall each;
    the device is busy from the first step to the last, so busy_s is B's return time."""
    r = fastsim.run([0.0, 0.0], [100, 100], [3, 2], SIZES, fastsim.ExactCost(COST), slots=1)
    assert r["slot_stalls"] == 3 and r["memory_stalls"] == 0 and r["steps"] == 5
    assert r["busy_s"] == pytest.approx(r["done"][1], rel=1e-12)


def test_fastsim_s_progress_hears_the_requests_done_every_256_iterations():
    """Ten 2-token requests beside one of 600 (priced one iteration at a time): at iterations 256 and 512, 10 done."""
    seen = []
    fastsim.run([0.0] * 11, [8] * 11, [600] + [2] * 10, SIZES, fastsim.ExactCost(COST), slots=16, progress=seen.append)
    assert seen == [10, 10]


def test_progress_hears_the_same_calls_when_runs_of_decodes_are_leapt_over():
    """FastCost prices a run of decode-only iterations at once; the progress callback still hears one call per 256
    iterations, with the requests done then, as the iteration-by-iteration loop gives it (it heard none inside a
    leap, so a progress bar stalled through long decodes)."""
    cost = fastsim.FastCost(StepCost(load_model("llama-3.1-8b"), HW, Precision(), 16), 2048)
    sizes = kv_sizes(load_model("llama-3.1-8b"), HW)
    args = ([0.0] * 6, [64] * 6, [2000, 1500, 900, 700, 300, 40], sizes, cost, 16, 2048, "chunked", 16)
    a, b = [], []
    ra = fastsim.run(*args, leap=False, progress=a.append)
    rb = fastsim.run(*args, leap=True, progress=b.append)
    assert ra["steps"] == rb["steps"] and len(a) == ra["steps"] // 256 == 7
    # one prefill iteration, then request i ends at iteration O_i: 40, 300, 700, 900, 1500, 2000
    assert a == b == [1, 2, 3, 4, 4, 5, 5]


@pytest.mark.parametrize("rate,seed", [(5.0, 0), (20.0, 1), (60.0, 2)])
def test_leaping_over_decode_runs_between_poisson_arrivals_changes_no_request_time_nor_the_busy_time(rate, seed):
    """FastCost prices a run of decode-only iterations at once and stops the run at the first iteration that starts
    at or after the next arrival: with open-loop arrivals every request time, the steps, the tokens and the busy time
    are those of the iteration-by-iteration loop."""
    from perfmodel.serving import make_traffic

    cost = fastsim.FastCost(StepCost(load_model("llama-3.1-8b"), HW, Precision(), 16), 2048)
    sizes = kv_sizes(load_model("llama-3.1-8b"), HW)
    tr = make_traffic(60, rate, None, "uniform:50,800", "uniform:20,300", 1, 0, seed)
    args = (tr.arrival, tr.prompt, tr.outputs[:, 0], sizes, cost, 16, 2048, "chunked", 16)
    a, b = fastsim.run(*args, leap=False), fastsim.run(*args, leap=True)
    assert a["steps"] == b["steps"] and a["generated"] == b["generated"] and a["peak_running"] == b["peak_running"]
    for k in ("first", "last", "done"):
        assert np.allclose(a[k], b[k], rtol=1e-9, atol=1e-12), k
    assert b["busy_s"] == pytest.approx(a["busy_s"], rel=1e-9)


def test_fastsim_s_prefill_policies_under_a_budget():
    """`separate`, budget 100: a 150-token prompt runs alone, whole, and the 20-token one after it. `chunked`, budget
    2, one request decoding: the 50-token prompt beside it gets the 1 token left each iteration and has its first
    token long before the decoding one is done. Budget 16: a 16-token prompt gets 15, then its last token in a
    decode-only iteration, which records its first token."""
    r = fastsim.run([0.0, 0.0], [150, 20], [2, 2], SIZES, fastsim.ExactCost(COST), None, 100, "separate")
    assert r["first"][1] > r["first"][0] > 0
    r = fastsim.run([0.0, 0.001], [8, 50], [200, 2], SIZES, fastsim.ExactCost(COST), None, 2)
    assert 0 < r["first"][1] < r["done"][0] / 2
    r = fastsim.run([0.0, 0.001], [8, 16], [50, 5], SIZES, fastsim.ExactCost(COST), None, 16)
    assert 0 < r["first"][1] < r["done"][1] < r["done"][0]


def _second(T, S):
    """One second an iteration, whatever it runs (no decode_steps: every iteration is simulated on its own)."""
    return 1.0


def test_batch_waiting_holds_a_prompt_for_the_timeout_while_decodes_run_then_runs_it():
    """TensorRT-LLM's batch waiting (batch_wait_timeout_iters 5, no token threshold): B arrives at t = 1 while A
    decodes, waits the 5 iterations t = 1 ... 5 (A's decodes alone) and is prefilled in the 6th: its first token at
    t = 7, not 2. A third request at t = 10 waits 5 iterations again (the count starts over once prompts ran)."""
    args = ([0.0, 1.0, 10.0], [100, 100, 100], [20, 2, 2], SIZES, _second, None, 2048, "chunked", 16)
    plain = fastsim.run(*args)
    held = fastsim.run(*args, wait=(5, float("inf")))
    assert list(plain["first"]) == [1.0, 2.0, 11.0]
    assert list(held["first"]) == [1.0, 7.0, 16.0]
    # A decodes through t = 20 either way: the prompts only move to later iterations of A's, each 5 later
    assert held["steps"] == plain["steps"] == 20 and list(held["done"] - plain["done"]) == [0.0, 5.0, 5.0]


def test_batch_waiting_stops_at_the_token_threshold_prompts_whole_plus_one_per_decode():
    """B's 100 prompt tokens + A's 1 decode token = 101: a threshold of 101 is reached (B runs at once), one of 102
    is not (B waits the 5 iterations)."""
    args = ([0.0, 1.0], [100, 100], [20, 2], SIZES, _second, None, 2048, "chunked", 16)
    assert fastsim.run(*args, wait=(5, 101.0))["first"][1] == 2.0
    assert fastsim.run(*args, wait=(5, 102.0))["first"][1] == 7.0


def test_batch_waiting_never_holds_prompts_when_no_request_decodes():
    """Two prompts on an idle engine run at once (TensorRT-LLM waits only when generation requests are scheduled)."""
    r = fastsim.run([0.0, 0.0], [100, 100], [5, 5], SIZES, _second, None, 2048, "chunked", 16,
                    wait=(5, float("inf")))
    assert list(r["first"]) == [1.0, 1.0]


def test_attention_dp_balancing_holds_a_prompt_until_every_rank_has_one_or_the_timeout():
    """Two ranks, timeout 4: A and B (long outputs) decode on both ranks from t = 1. C alone arrives at t = 2 and
    waits for a prompt for the other rank: none comes, so it runs at the 4th iteration that held it (t = 5 ... 6).
    D and E arriving together at t = 8 fill both ranks and run at once."""
    args = ([0.0, 0.0, 2.0, 8.0, 8.0], [100] * 5, [30, 30, 2, 2, 2], SIZES, _second, None, 4096, "chunked", 16)
    plain = fastsim.run(*args)
    r = fastsim.run(*args, balance=(2, 4))
    assert list(plain["first"]) == [1.0, 1.0, 3.0, 9.0, 9.0]
    assert list(r["first"]) == [1.0, 1.0, 6.0, 9.0, 9.0]


def test_attention_dp_balancing_never_holds_prompts_while_a_rank_has_nothing_to_decode():
    """Two ranks but one decoding request: C arriving at t = 2 runs at once (TensorRT-LLM stops waiting when not
    every rank has a generation request)."""
    r = fastsim.run([0.0, 2.0], [100, 100], [30, 2], SIZES, _second, None, 4096, "chunked", 16, balance=(2, 4))
    assert r["first"][1] == 3.0


def test_attention_dp_balancing_batches_prompts_that_fill_every_rank_for_its_batching_iterations():
    """Two ranks, batching_wait_iters 3: D and E arriving together at t = 8 fill both ranks while A and B decode on
    both; they still wait 3 iterations to batch more (t = 8, 9, 10) and run at t = 11 ... 12."""
    args = ([0.0, 0.0, 8.0, 8.0], [100] * 4, [30, 30, 2, 2], SIZES, _second, None, 4096, "chunked", 16)
    assert list(fastsim.run(*args, balance=(2, 50, 3))["first"]) == [1.0, 1.0, 12.0, 12.0]
    assert list(fastsim.run(*args, balance=(2, 50))["first"]) == [1.0, 1.0, 9.0, 9.0]


def test_without_chunked_prefill_a_prompt_runs_whole_when_it_fits_and_the_ones_behind_it_wait():
    """TensorRT-LLM without chunked prefill (its default): a budget of 300 tokens, A decoding. B's 500-token prompt
    never fits beside A's decode, so it waits until A is done (t = 10) and then runs whole, alone; C's 10 tokens
    queue behind B (first come, first served: the batch stops at the first prompt that does not fit). Chunked,
    B runs in chunks of 299 and 201 beside A and C fits the second iteration."""
    args = ([0.0, 1.0, 1.0], [50, 500, 10], [10, 2, 2], SIZES, _second, None, 300)
    assert list(fastsim.run(*args, "whole", 16)["first"]) == [1.0, 11.0, 12.0]
    assert list(fastsim.run(*args, "chunked", 16)["first"]) == [1.0, 3.0, 3.0]


def test_sglang_takes_new_requests_every_recv_interval_decode_iterations_and_at_once_after_a_prefill():
    """--scheduler-recv-interval 4, one second an iteration, SGLang's separate prefill: the counter restarts after A's
    prefill (weight 1000) at t = 1 and reaches 4 after four decode iterations, at t = 5. B, arriving at t = 2.5, is
    taken then (first token at 6, not 4); C at 6.5 waits for t = 10 (after B's prefill the count restarts at t = 6);
    D arrives at an idle engine (t = 100) and is taken at once. Without the interval each is taken at the next
    iteration."""
    args = ([0.0, 2.5, 6.5, 100.0], [100, 100, 100, 100], [30, 2, 2, 2], SIZES, _second, None, 2048, "separate", 16)
    assert list(fastsim.run(*args)["first"]) == [1.0, 4.0, 8.0, 101.0]
    r = fastsim.run(*args, recv=4)
    assert list(r["first"]) == [1.0, 6.0, 11.0, 101.0]
    assert list(fastsim.run(*args, recv=1)["first"]) == [1.0, 4.0, 8.0, 101.0]  # 1: no skipper (maybe_create)
    # 2, the smallest skipper: the count reaches 2 at t = 3 (B, there since 2.5, is taken) and at t = 6 after B's
    # prefill, before C arrives; C waits for t = 8
    assert list(fastsim.run(*args, recv=2)["first"]) == [1.0, 4.0, 9.0, 101.0]


def test_the_recv_interval_s_decode_leap_counts_the_iterations_it_leaps_over():
    """The closed loop's decode leap (FastCost.decode_steps) prices many decode iterations at once: it must leave the
    skipper's counter where stepping one iteration at a time leaves it, so every request time is the same either way,
    in closed and open loops."""
    from perfmodel.serving import make_traffic

    m = load_model("llama-3.1-8b")
    cost = fastsim.FastCost(StepCost(m, HW, Precision(), 16), 4096)
    sizes = kv_sizes(m, HW)
    for k in (3, 10, 30):
        for rate, conc in ((None, 6), (20.0, None)):
            tr = make_traffic(60, rate, None, "uniform:50,400", "uniform:20,120", 1, 0, k)
            args = (tr.arrival, tr.prompt, tr.outputs[:, 0], sizes, cost, None, 4096, "separate", 16)
            a = fastsim.run(*args, concurrency=conc, recv=k, leap=False)
            b = fastsim.run(*args, concurrency=conc, recv=k, leap=True)
            assert a["steps"] == b["steps"] and a["generated"] == b["generated"], (k, rate)
            for key in ("first", "last", "done", "arrival"):
                assert np.allclose(a[key], b[key], rtol=1e-9, atol=1e-12), (k, rate, key)
            plain = fastsim.run(*args, concurrency=conc)
            assert np.mean(b["first"] - b["arrival"]) > np.mean(plain["first"] - plain["arrival"])  # it waits


def test_an_overlap_scheduler_runs_a_request_one_iteration_later_than_the_one_after_its_arrival():
    """The overlap ("async") scheduler forms iteration i + 1's batch as iteration i starts (ahead=True), one second
    an iteration, SGLang's separate prefill: B, arriving at t = 2.5 during the iteration [2, 3), misses the batch of
    [3, 4) (formed at t = 2) and is prefilled in [4, 5): first token at 5, not 4; C at 6.5 likewise at 9, not 8; D
    arrives at an idle engine (t = 100), whose loop spins, and is taken at once."""
    args = ([0.0, 2.5, 6.5, 100.0], [100, 100, 100, 100], [30, 2, 2, 2], SIZES, _second, None, 2048, "separate", 16)
    assert list(fastsim.run(*args)["first"]) == [1.0, 4.0, 8.0, 101.0]
    assert list(fastsim.run(*args, ahead=True)["first"]) == [1.0, 5.0, 9.0, 101.0]
    # an arrival exactly as an iteration starts is in the batch formed then (the one after that iteration)
    assert list(fastsim.run([0.0, 3.0], [100, 100], [30, 2], SIZES, _second, None, 2048, "separate", 16,
                            ahead=True)["first"]) == [1.0, 5.0]
    # B arrives during A's last iteration [29, 30): the batch formed at 29 misses it, and the engine, idle at 30,
    # takes it then (not at its arrival time: the clock does not go back)
    for ahead in (False, True):
        r = fastsim.run([0.0, 29.5], [100, 100], [30, 2], SIZES, _second, None, 2048, "separate", 16, ahead=ahead)
        assert list(r["first"]) == [1.0, 31.0] and r["done"][0] == 30.0


def test_a_closed_loop_client_s_next_request_waits_one_iteration_more_under_an_overlap_scheduler():
    """Two clients, A with a long output: B's 2-token request finishes at the end of an iteration, its client sends
    the next at once, and that one is first taken by the batch formed as the iteration after next starts."""
    args = ([0.0, 0.0, 0.0], [100, 100, 100], [20, 2, 2], SIZES, _second, None, 2048, "separate", 16)
    plain = fastsim.run(*args, concurrency=2)
    ahead = fastsim.run(*args, concurrency=2, ahead=True)
    assert plain["arrival"][2] == ahead["arrival"][2]  # sent as B finished: the same instant either way
    assert ahead["first"][2] - ahead["arrival"][2] == plain["first"][2] - plain["arrival"][2] + 1.0


@pytest.mark.parametrize("k", [None, 3])
def test_the_decode_leap_under_an_overlap_scheduler_changes_no_request_time(k):
    """The decode leap prices runs of decode iterations at once: with ahead=True (and with SGLang's receive interval
    as well) every request time is the one stepping one iteration at a time gives, in closed and open loops, and
    the scheduler that forms its batches ahead never gives a shorter mean TTFT."""
    from perfmodel.serving import make_traffic

    m = load_model("llama-3.1-8b")
    cost = fastsim.FastCost(StepCost(m, HW, Precision(), 16), 4096)
    sizes = kv_sizes(m, HW)
    for rate, conc in ((None, 6), (20.0, None), (3.0, None)):
        for prefill in ("chunked", "separate"):
            tr = make_traffic(60, rate, None, "uniform:50,400", "uniform:20,120", 1, 0, 7)
            args = (tr.arrival, tr.prompt, tr.outputs[:, 0], sizes, cost, None, 4096, prefill, 16)
            a = fastsim.run(*args, concurrency=conc, recv=k, ahead=True, leap=False)
            b = fastsim.run(*args, concurrency=conc, recv=k, ahead=True, leap=True)
            assert a["steps"] == b["steps"] and a["generated"] == b["generated"], (rate, prefill)
            for key in ("first", "last", "done", "arrival"):
                assert np.allclose(a[key], b[key], rtol=1e-9, atol=1e-12), (rate, prefill, key)
            plain = fastsim.run(*args, concurrency=conc, recv=k)
            assert np.mean(b["first"] - b["arrival"]) > np.mean(plain["first"] - plain["arrival"])


def test_serve_sim_under_an_engine_profile_forms_its_batches_ahead_and_its_ttft_grows_by_about_a_decode_step():
    """The achievable step cost of an engine whose profile says overlap_schedule runs its batches ahead; the roofline
    and a profile without it do not. In a closed loop of 4 clients on llama-3.1-8b, the mean TTFT grows by less
    than two decode steps (the arrival waits for the rest of one iteration and one more) and TPOT barely moves. (Clients
    in lockstep find the engine idle: it takes their requests at once either way.)"""
    import perfmodel as pm

    m = load_model("llama-3.1-8b")
    assert StepCost(m, HW, Precision(), 16, None, "achievable", "vllm-0.24").ahead is True
    assert StepCost(m, HW, Precision(), 16, None, "achievable", "graphs").ahead is False
    assert StepCost(m, HW, Precision(), 16, None, "roofline", "vllm-0.24").ahead is False
    kw = dict(model="llama-3.1-8b", hardware="h100-sxm", policy="continuous", concurrency=4, prompt_len=1024,
              output_len="uniform:32,96", mode="achievable", impl="vllm-0.24")  # clients out of lockstep
    on = pm.serve_runs(**kw)[0].summary
    off = pm.serve_runs(**kw, sets={"impl.overlap_schedule": False})[0].summary
    step = on["mean_tpot_s"]
    assert off["mean_ttft_s"] < on["mean_ttft_s"] < off["mean_ttft_s"] + 2 * step
    assert on["mean_tpot_s"] == pytest.approx(off["mean_tpot_s"], rel=0.05)


def test_the_capacity_searches_run_an_engine_profile_s_replica_with_its_batches_formed_ahead(monkeypatch):
    """A replica in the capacity and SLO searches is priced and scheduled as serve-sim schedules it: under an engine
    profile with overlap_schedule its batches are formed one iteration ahead, in the open-loop rate search, the
    closed loop and a disaggregated decode pool; under the roofline they are not."""
    from perfmodel.ops import Layout
    from perfmodel.serving import capacity, disagg, slo

    m = load_model("llama-3.1-8b")
    seen = []
    orig = fastsim.run

    def run(*a, **k):
        seen.append(k.get("ahead", False))
        return orig(*a, **k)

    monkeypatch.setattr(fastsim, "run", run)
    wl = slo.Workload(512, 64, 1.0, 0.1, 90, 1, 0, 60, 0.1)
    for mode, impl, want in (("achievable", "vllm-0.24", True), ("roofline", None, False),
                             ("achievable", "graphs", False)):
        inst = slo.Instance(m, HW, Precision(), Layout(), mode, impl, 16, 4096, None, 16)
        assert inst.ahead is want
        seen.clear()
        slo.simulate_rate(inst, wl, 60, 2.0, 0)
        capacity.closed(m, HW, Precision(), Layout(), mode, wl, None, (inst, None, None), 4)
        disagg.decode_rate(inst, wl, 60, 2.0, 0)  # a disaggregated decode pool
        assert seen == [want, want, want], (mode, impl)


@pytest.mark.parametrize("leap", [True, False], ids=["leaping", "step by step"])
def test_a_prefilled_request_of_one_output_token_is_done_on_arrival_and_holds_no_cache(leap):
    """Its only token came from the prefill pool: first = last = done = its arrival, and the other request decodes
    as if alone (it crashed on a zero-size max, reachable from a disaggregated closed loop with osl = 2 spread)."""
    r = fastsim.run([0.0, 0.5], [96, 96], [3, 1], SIZES, fastsim.ExactCost(COST), prefilled=True, leap=leap)
    alone = fastsim.run([0.0], [96], [3], SIZES, fastsim.ExactCost(COST), prefilled=True, leap=leap)
    assert r["first"][1] == r["last"][1] == r["done"][1] == 0.5
    assert r["done"][0] == alone["done"][0] and r["generated"] == alone["generated"] == 2
    assert r["peak_kv_bytes"] == alone["peak_kv_bytes"]


def test_in_a_closed_loop_a_one_token_prefilled_request_frees_its_client_at_once():
    """One client, three requests: the second (one output token) is done when it arrives, and the third is sent
    then, so it starts where the first ended."""
    r = fastsim.run([0.0, 0.0, 0.0], [96, 96, 96], [3, 1, 3], SIZES, fastsim.ExactCost(COST), prefilled=True,
                    concurrency=1)
    assert r["arrival"][1] == r["done"][0] == r["done"][1] == r["arrival"][2]
    assert r["done"][2] - r["arrival"][2] == pytest.approx(r["done"][0], rel=1e-12)


def test_a_one_token_request_that_is_not_prefilled_still_runs_its_prompt():
    """Only a prefilled request arrives with its token: otherwise a one-token output is one prefill step, done when
    that step ends, and it holds its prompt's blocks meanwhile."""
    r = fastsim.run([0.0, 0.5], [96, 96], [3, 1], SIZES, fastsim.ExactCost(COST))
    assert r["first"][1] == r["done"][1] > 0.5 and r["generated"] == 4
    assert r["peak_kv_bytes"] >= 7 * 16 * SIZES.per_token


def test_only_one_token_prefilled_requests_are_done_on_arrival_a_two_token_one_decodes_its_second():
    """Prefilled outputs 2, 1, 3 arriving together: the 2-token request decodes one token and the 3-token one two;
    only the 1-token request is done at its arrival."""
    r = fastsim.run([0.0, 0.0, 0.0], [96, 96, 96], [2, 1, 3], SIZES, fastsim.ExactCost(COST), prefilled=True)
    assert r["done"][1] == r["first"][1] == 0.0
    assert r["first"][0] == r["done"][0] == r["first"][2] > 0.0 and r["done"][2] > r["done"][0]
    assert r["generated"] == 1 + 2


def test_the_progress_count_includes_the_requests_done_on_arrival():
    """Five one-token prefilled requests and one of 600 tokens: each progress call (every 256 iterations) counts
    the five as done."""
    seen = []
    fastsim.run(np.zeros(6), np.full(6, 96), [600, 1, 1, 1, 1, 1], SIZES, fastsim.ExactCost(COST), prefilled=True,
                progress=seen.append)
    assert seen == [5, 5]


@pytest.mark.parametrize("ahead", [False, True], ids=["in step", "formed ahead"])
def test_a_closed_loop_sends_one_request_for_each_done_and_its_send_times_never_go_back(ahead):
    """Clients send their next request only when one finishes (one-token prefilled requests finish on arrival), so
    at most `concurrency` are ever out, and the send times are in order (the arrivals the loop searches)."""
    for O, c in (([2, 1, 1, 1, 1, 3], 2), ([1, 1, 3], 2), ([3, 1, 3, 3], 1), ([2, 3, 1, 5, 1, 2], 2)):
        n = len(O)
        r = fastsim.run(np.zeros(n), np.full(n, 96), O, SIZES, fastsim.ExactCost(COST), prefilled=True,
                        concurrency=c, ahead=ahead)
        a, d = r["arrival"], r["done"]
        assert np.all(np.diff(a) >= 0) and np.all(d >= a)
        for i in range(c, n):  # request i is sent when the (i - c + 1)-th request to finish has finished
            assert a[i] >= np.sort(d)[i - c]


@pytest.mark.parametrize("every", [1, 4, None])  # None: the default, every 16 iterations
@pytest.mark.parametrize("q", [50, 90, 99])
@pytest.mark.parametrize("rate", [60.0, 4.0, 0.5])  # queueing, a light load, and one whose window is done before the next request comes
@pytest.mark.parametrize("scale_t, scale_d", [(0.5, np.inf), (0.9, np.inf), (np.inf, 0.6), (np.inf, 0.95),
                                              (0.8, 0.8), (np.inf, np.inf), ("kth", np.inf), (np.inf, "kth"),
                                              (0.01, np.inf)])
def test_the_stop_rule_ends_a_run_at_the_first_check_at_which_its_verdict_is_certain(every, q, rate, scale_t, scale_d):
    _stop_where_the_replay_says(every, q, rate, scale_t, scale_d, "uniform:1,60")


@pytest.mark.parametrize("rate", [60.0, 4.0])
@pytest.mark.parametrize("scale_d", [0.6, 0.95])
def test_the_tpot_stop_needs_floor_n_minus_1_q_over_100_slow_requests_not_one_more(rate, scale_d):
    """With 30 multi-token requests in the window and q = 90, the percentile is the floor(29 x 0.9) = 26th smallest,
    so the run stops when 30 - 26 = 4 requests are certainly slow. Counting with any other divisor than 100 (29 x 90 /
    101 = 25.8) needs a fifth and stops later. With 28 (outputs of 1-60 tokens, above) 27 x 0.9 = 24.3 and
    27 x 90 / 101 = 24.06 floor alike, which is why outputs of 100-400 tokens are used here."""
    _stop_where_the_replay_says(1, 90, rate, np.inf, scale_d, "uniform:100,400", multi_requests=30)


def _stop_where_the_replay_says(every, q, rate, scale_t, scale_d, outputs, multi_requests=None):
    """Not only never too early (above): never later than it must. At every `every`-th iteration, once the window's
    first request has arrived, the rule looks at what is known then (a request waiting since its arrival has a TTFT
    of at least now - arrival; one decoding, a TPOT of at least (now - first) / (output - 1)) and stops as soon as the
    q-th percentile of those lower bounds, the floor((n - 1) q / 100)-th smallest of n, exceeds an SLO, or the window
    is done. Replayed here from the full run's own times and iteration ends (the two runs take the same iterations
    up to the stop: neither leaps), the first such check is where the stopped run stopped, with its verdict. An SLO
    equal to that order statistic of the full run ("kth") passes: a bound must exceed it, not reach it."""
    from perfmodel.serving import make_traffic

    tr = make_traffic(40, rate, None, "uniform:200,2000", outputs, 1, 0, 3)
    arr, P, O = tr.arrival, tr.prompt, tr.outputs[:, 0]
    cost = fastsim.ExactCost(COST)
    log: list = []
    full = fastsim.run(arr, P, O, SIZES, cost, 8, 512, log=log)
    lo, hi = 5, 35
    a, o = arr[lo:hi], O[lo:hi]
    multi = o > 1
    assert multi_requests is None or int(multi.sum()) == multi_requests
    ttft = full["first"][lo:hi] - a
    tpot = (full["last"][lo:hi] - full["first"][lo:hi])[multi] / (o[multi] - 1)
    def kth(x):
        return np.sort(x)[int(np.floor((x.size - 1) * q / 100))]

    slo_t = float(kth(ttft)) if scale_t == "kth" else float(np.percentile(ttft, q)) * scale_t
    slo_d = float(kth(tpot)) if scale_d == "kth" else float(np.percentile(tpot, q)) * scale_d

    want = (len(log), None)
    for i, row in enumerate(log, start=1):
        start, t = row[1], row[1] + row[2]
        if i % (every or 16) or arr[lo - 1] > start:
            continue
        f = np.where(full["first"][lo:hi] <= t, full["first"][lo:hi], -1.0)
        d = np.where(full["done"][lo:hi] <= t, full["done"][lo:hi], -1.0)
        if arr[hi - 1] <= start and (d >= 0).all():
            want = (i, None)
            break
        if kth(np.where(f >= 0, f - a, np.where(a <= t, t - a, -1.0))) > slo_t:
            want = (i, "ttft")
            break
        ran = np.where(d >= 0, full["last"][lo:hi], t) - f
        if kth(np.where(f >= 0, ran / np.maximum(o - 1, 1), 0.0)[multi]) > slo_d:
            want = (i, "tpot")
            break
    stop = {"window": slice(lo, hi), "ttft": slo_t, "tpot": slo_d, "q": q}
    r = fastsim.run(arr, P, O, SIZES, cost, 8, 512, stop=stop, **({} if every is None else {"every": every}))
    assert (r["steps"], r["stopped"]) == want
    if "kth" in (scale_t, scale_d):
        assert want[1] is None


class _Counting:
    """A FastCost that records how fastsim.run asks for prices: "step" for one iteration, k for a leap of k."""

    def __init__(self):
        self.base, self.events = fastsim.FastCost(COST, 512), []

    def __call__(self, T, S):
        self.events.append("step")
        return self.base(T, S)

    def decode_only(self, S):
        self.events.append("step")
        return self.base.decode_only(S)

    def decode_steps(self, S0, k):
        self.events.append(k)
        return self.base.decode_steps(S0, k)


@pytest.mark.parametrize("prompt, out, prefilled, events", [
    (100, 50, False, ["step", 48, "step"]),  # its prompt, 48 decode iterations in one leap, the last one
    (100, 50, True, ["step", 47, "step"]),  # a prefilled request's first iteration brings its first token
    (100, 5, True, ["step", 2, "step"]),  # the shortest leap is two iterations
    (100, 4, True, ["step", "step", "step"]),  # one iteration between two events is just an iteration
])
def test_a_lone_request_s_decode_iterations_between_two_events_are_priced_in_one_leap(prompt, out, prefilled, events):
    """What makes a sweep fast: a run of decode-only iterations with no arrival, block or finish between them costs
    one call (decode_steps), not one a token; the iteration that finishes is priced on its own."""
    c = _Counting()
    r = fastsim.run([0.0], [prompt], [out], SIZES, c, None, 512, prefilled=prefilled)
    assert c.events == events and r["steps"] == out - (1 if prefilled else 0)


def test_a_leap_stops_at_each_finish_and_before_an_arrival():
    """Two requests of 10 and 30 tokens: a leap to the first's last iteration, that iteration, a leap to the
    second's. A request arriving mid-run joins at the first iteration that starts at or after its arrival (as the
    iteration-by-iteration run has it), and each stretch between two events is still one call."""
    c = _Counting()
    fastsim.run([0.0, 0.0], [100, 100], [10, 30], SIZES, c, None, 512, prefilled=True)
    assert c.events == ["step", 7, "step", 19, "step"]
    log: list = []
    fastsim.run([0.0], [100], [50], SIZES, fastsim.FastCost(COST, 512), None, 512, log=log)
    starts = np.array([row[1] for row in log])
    at = 0.5 * (starts[12] + starts[13])  # between the 13th and 14th iterations' starts
    c = _Counting()
    r = fastsim.run([0.0, at], [100, 100], [50, 5], SIZES, c, None, 512)
    # its prompt; a leap priced to the first's end but cut where the second arrives; the iteration that takes the
    # second's prompt; a leap to the second's last iteration; that one; a leap to the first's last; that one
    assert c.events == ["step", 48, "step", 3, "step", 31, "step"] and r["steps"] == 50
    one_by_one = fastsim.run([0.0, at], [100, 100], [50, 5], SIZES, fastsim.FastCost(COST, 512), None, 512, leap=False)
    for k in ("first", "done"):
        assert r[k] == pytest.approx(one_by_one[k], rel=1e-12)
    assert starts[12] < at < r["first"][1]  # it joined at the first iteration that starts after it arrived


def test_a_request_arriving_during_a_leap_s_last_iteration_joins_the_next_and_the_leap_is_whole():
    log: list = []
    fastsim.run([0.0], [100], [50], SIZES, fastsim.FastCost(COST, 512), None, 512, log=log)
    starts = np.array([row[1] for row in log])
    at = 0.5 * (starts[48] + starts[49])  # during the last of the 48 leapt iterations
    c = _Counting()
    r = fastsim.run([0.0, at], [100, 100], [50, 5], SIZES, c, None, 512)
    # the whole leap of 48; the first's last iteration, which takes the second's prompt; a leap; the second's last
    assert c.events == ["step", 48, "step", 3, "step"]
    one_by_one = fastsim.run([0.0, at], [100, 100], [50, 5], SIZES, fastsim.FastCost(COST, 512), None, 512, leap=False)
    assert r["first"] == pytest.approx(one_by_one["first"], rel=1e-12)


@pytest.mark.parametrize("tokens", [260, 300, 340, 420])
def test_leaps_under_memory_pressure_give_the_iteration_by_iteration_run_preemptions_included(tokens):
    """Three requests of 100 + 150 tokens on a device whose cache holds `tokens` tokens: their decodes outgrow it
    and the newest is preempted. A leap is taken only while its new blocks fit, so the times and preemptions are
    those of the run that prices every iteration alone."""
    s = KVSizes(SIZES.per_token, 0.0, 0.0, tokens * SIZES.per_token * (1 + 1e-12), 10**6)
    arr, P, O = [0.0, 0.0, 0.01], [100, 100, 100], [150, 150, 150]
    a = fastsim.run(arr, P, O, s, fastsim.FastCost(COST, 512), None, 512)
    b = fastsim.run(arr, P, O, s, fastsim.FastCost(COST, 512), None, 512, leap=False)
    assert a["preempted"] == b["preempted"] and (tokens > 400 or a["preempted"] > 0)
    for k in ("first", "done"):
        assert a[k] == pytest.approx(b[k], rel=1e-12)


@pytest.mark.parametrize("slack", [0.5, 1.5])
def test_a_leap_is_taken_whenever_its_new_blocks_fit_the_free_memory_with_its_one_byte_margin(slack):
    """One prefilled request, prompt 100, output 50: after its first iteration it holds 102 tokens (7 blocks of 16)
    and its leap of 47 iterations reaches 149 (10 blocks). On a cache of exactly 10 blocks plus the margin the check
    keeps (1e-9 of the 3 new blocks and 1 B) and `slack` more bytes, the leap fits and is taken in one call: a check
    that asks for more room than its new blocks and that margin prices the 47 iterations one by one instead."""
    bb = 16 * SIZES.per_token
    cap = 10 * bb + 3 * bb * 1e-9 + 1.0 + slack
    s = KVSizes(SIZES.per_token, 0.0, 0.0, cap, 10**6)
    c = _Counting()
    r = fastsim.run([0.0], [100], [50], s, c, None, 512, prefilled=True)
    assert c.events == ["step", 47, "step"]
    alone = fastsim.run([0.0], [100], [50], SIZES, fastsim.FastCost(COST, 512), None, 512, prefilled=True)
    assert r["done"] == pytest.approx(alone["done"], rel=1e-12)
