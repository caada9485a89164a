"""The fast simulator's shortcuts keep to the exact walk at the byte, and its counters count what they say.

fastsim takes two shortcuts over kvmemory.Paged's request-by-request walk: when every running request's new blocks
fit the free memory at once (with a margin of 1 B and 1e-9 of the blocks, far above float rounding below a
petabyte), they are given in one sum; and a run of decode-only iterations is priced in one call when the blocks it
adds fit the same way. Neither may change an answer: a device a fraction of a byte short of what the requests need
preempts exactly where the paged manager preempts. Cache sizes of 1 B a token (a margin of about 1 B) and of 1e8 B a
token (blocks of 1.6 GB, where the 1e-9 part of the margin is several bytes) test both parts of the margin."""
import numpy as np
import pytest

from perfmodel import load_hardware, load_model
from perfmodel.ops import Precision
from perfmodel.serving import StepCost, fastsim
from perfmodel.serving.kvmemory import KVSizes, Paged
from perfmodel.serving.scheduler import _Sim
from perfmodel.serving.traffic import Traffic

COST = StepCost(load_model("llama-2-13b"), load_hardware("h100-sxm"), Precision(), 1)


def _reference(arrival, prompt, out, sizes, slots=8, budget=512, prefill="chunked"):
    """scheduler._Sim with the paged manager: request by request, no shortcut."""
    tr = Traffic(np.asarray(arrival, float), np.asarray(prompt), np.asarray(out).reshape(-1, 1), int(max(out)))
    sim = _Sim(tr, sizes, COST, slots, Paged(sizes, 16, True, 0))
    sim.continuous(prefill, budget)
    return sim, sim.result("continuous", {}).requests


@pytest.mark.parametrize("per_token", [1.0, 1e8])
@pytest.mark.parametrize("short", [0.5, 0.0])
def test_two_requests_whose_next_blocks_miss_the_device_by_half_a_byte_preempt_the_newest_as_the_paged_manager_does(
        per_token, short):
    """Two requests of 31 prompt tokens hold 32 tokens (2 blocks each) after their prefill and need a third block each
    at their 33rd. A device of 6 blocks gives both; one half a byte smaller gives the older one its block and preempts
    the newer, in the same iteration as kvmemory.Paged's walk does. The all-at-once shortcut must not give both."""
    bb = 16 * per_token
    sizes = KVSizes(per_token, 0.0, 0.0, 6 * bb - short, 10**6)
    arr, P, O = [0.0, 0.0], [31, 31], [10, 10]
    _, ref = _reference(arr, P, O, sizes)
    got = fastsim.run(np.array(arr), np.array(P), np.array(O), sizes, fastsim.ExactCost(COST), 8, 512)
    pairs = (("first_token_s", "first"), ("last_token_s", "last"), ("done_s", "done"), ("preemptions", "preemptions"))
    for a, b in pairs:
        assert np.array_equal(ref[a], got[b]), a
    assert got["preempted"] == (1 if short else 0)


@pytest.mark.parametrize("per_token", [1.0, 1e8])
def test_a_decode_run_whose_blocks_miss_the_device_by_half_a_byte_is_not_leapt_over(per_token):
    """Two prefilled requests (prompt 100, output 50) hold 7 blocks each when their decodes start and 10 each at
    their last token: 20 blocks. On a device of 20 blocks less half a byte the newer is preempted at its 145th token
    (the older takes the last whole block). A leap over the 47 decode iterations would skip that preemption, so it
    must not be taken: the times and preemptions are those of the run priced one iteration at a time."""
    bb = 16 * per_token
    sizes = KVSizes(per_token, 0.0, 0.0, 20 * bb - 0.5, 10**6)
    arr, P, O = np.array([0.0, 0.0]), np.array([100, 100]), np.array([50, 50])
    a = fastsim.run(arr, P, O, sizes, fastsim.FastCost(COST, 512), None, 512, prefilled=True)
    b = fastsim.run(arr, P, O, sizes, fastsim.FastCost(COST, 512), None, 512, prefilled=True, leap=False)
    assert a["preempted"] == b["preempted"] == 1
    for k in ("first", "last", "done"):
        assert a[k] == pytest.approx(b[k], rel=1e-12)


class _Leaps:
    """A FastCost that records the leaps fastsim.run takes (their lengths)."""

    def __init__(self):
        self.base, self.leaps = fastsim.FastCost(COST, 512), []

    def __call__(self, T, S):
        return self.base(T, S)

    def decode_only(self, S):
        return self.base.decode_only(S)

    def decode_steps(self, S0, k):
        self.leaps.append(k)
        return self.base.decode_steps(S0, k)


@pytest.mark.parametrize("per_token, short, taken", [
    (1e8, 0.5, False),  # 0.5 B less than 3 blocks + 1e-9 of them (4.8 B) + 1 B: no leap to the last token
    (1.0, 0.5, False),  # the same with 1 B a token, where the margin is about 1 B
    (1.0, 0.0, False),  # exactly the margin free: the check is strict
    (1.0, -0.5, True),  # half a byte more than the margin: one leap of 47 iterations
    (1e8, -0.5, True),
])
def test_a_leap_keeps_one_byte_and_a_billionth_of_its_new_blocks_free(per_token, short, taken):
    """One prefilled request (prompt 100, output 50) holds 7 blocks when its decodes start; a leap over all 47 of
    them reaches 149 tokens, 10 blocks: 3 new. That leap is taken only when the free memory exceeds those 3 blocks
    by their billionth and 1 B (a margin no float rounding of the free memory crosses below a petabyte), so that a
    leap is never taken that the exact walk might refuse; otherwise the iterations are priced one at a time (until
    a shorter leap, whose margin is smaller, fits), with the same times."""
    bb = 16 * per_token
    margin = 3 * bb * (1 + 1e-9) + 1.0
    cap = 7 * bb + margin - short
    if short == 0.0:
        assert cap - 7 * bb == margin  # the free memory is the margin to the last bit
    s = KVSizes(per_token, 0.0, 0.0, cap, 10**6)
    c = _Leaps()
    r = fastsim.run(np.array([0.0]), np.array([100]), np.array([50]), s, c, None, 512, prefilled=True)
    assert (c.leaps[:1] == [47]) is taken and (taken or 47 not in c.leaps)
    one_by_one = fastsim.run(np.array([0.0]), np.array([100]), np.array([50]), s, fastsim.FastCost(COST, 512), None,
                             512, prefilled=True, leap=False)
    assert r["done"] == pytest.approx(one_by_one["done"], rel=1e-12)


def test_a_leap_asks_for_the_whole_blocks_of_each_request_not_their_sum_in_fractions():
    """Two prefilled requests (prompt 95, output 50) end at 144 tokens, 9 blocks each: the leap adds 2 x (9 - 7) = 4
    blocks. On a device with those 18 blocks and the leap's margin (and half a byte) free, the leap is taken. Blocks
    counted as (tokens + 15) / 16 in fractions (9.94 each, 19.9 together, 5 new) would ask for a block more."""
    bb = 16 * 1.0
    s = KVSizes(1.0, 0.0, 0.0, 18 * bb + 4 * bb * 1e-9 + 1.0 + 0.5, 10**6)
    c = _Leaps()
    arr, P, O = np.array([0.0, 0.0]), np.array([95, 95]), np.array([50, 50])
    r = fastsim.run(arr, P, O, s, c, None, 512, prefilled=True)
    assert c.leaps == [47] and r["preempted"] == 0


@pytest.mark.parametrize("out, calls", [(255, 0), (256, 1), (510, 1), (511, 1), (512, 2)])
def test_progress_is_called_at_iteration_256_and_each_multiple_of_it(out, calls):
    """One request of `out` output tokens runs `out` iterations (its prompt, then out - 1 decodes): progress hears
    one call at each multiple of 256, so 255 iterations give none and 510 one."""
    seen = []
    r = fastsim.run(np.array([0.0]), np.array([8]), np.array([out]), KVSizes(1.0, 0.0, 0.0, 1e6, 10**6),
                    fastsim.ExactCost(COST), progress=seen.append)
    assert r["steps"] == out and len(seen) == calls


def test_the_stop_rule_counts_window_requests_that_arrived_during_the_iteration_before_they_are_taken():
    """Five requests at t = 0 and a window of five more arriving 1 us later, during the first iteration (a prefill of
    5 x 100 tokens): at its end they have all waited longer than a 0.1 us TTFT SLO, though none is queued yet, so the
    median's verdict is certain after one iteration. The window's requests arriving after it ends are not counted."""
    P, O = np.full(10, 100), np.full(10, 5)
    stop = {"window": slice(5, 10), "ttft": 1e-7, "tpot": np.inf, "q": 50}
    sizes = KVSizes(1.0, 0.0, 0.0, 1e6, 10**6)
    r = fastsim.run(np.array([0.0] * 5 + [1e-6] * 5), P, O, sizes, fastsim.ExactCost(COST), stop=stop, every=1)
    assert (r["steps"], r["stopped"]) == (1, "ttft")
    later = fastsim.run(np.array([0.0] * 5 + [1.0] * 5), P, O, sizes, fastsim.ExactCost(COST), stop=stop, every=1)
    assert later["steps"] > 1 and later["stopped"] == "ttft"


def test_a_memory_stall_is_an_iteration_whose_queue_head_does_not_fit_not_one_that_preempted():
    """With slots to spare, an iteration counts a memory stall when requests still wait after admission because the
    head's blocks do not fit. An iteration that preempted admits nothing (vLLM schedules no waiting request in a
    step that preempted), so it is not a stall: the count is the paged manager's iterations with a queue and no
    preemption. 40 requests on a device of 600 B (1 B a token, 7 B of state a sequence)."""
    from perfmodel.serving import make_traffic

    sizes = KVSizes(1.0, 7.0, 0.0, 600.0, 10**6)
    tr = make_traffic(40, 200.0, None, "uniform:20,200", "uniform:1,60", 1, 0, 5)
    sim = _Sim(tr, sizes, COST, None, Paged(sizes, 16, True, 0))
    sim.continuous("chunked", 64)
    got = fastsim.run(tr.arrival, tr.prompt, tr.outputs[:, 0], sizes, fastsim.ExactCost(COST), None, 64)
    waiting, preempted = np.array([row[10] for row in sim.log]), np.array([row[-1] for row in sim.log])
    assert got["preempted"] == preempted.sum() > 0
    assert got["memory_stalls"] == int(np.count_nonzero((waiting > 0) & (preempted == 0))) > 0
