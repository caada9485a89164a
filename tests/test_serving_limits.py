"""The serving simulator's guards: a simulation too large is refused before any work (serving.api._bound), and a
run whose queue grows with the trace says so (serving.api._overload)."""
import warnings
from types import SimpleNamespace

import numpy as np
import pytest

from perfmodel.errors import LoadWarning, SpecError
from perfmodel.serving import api


# ---------------------------------------------------------------- the work bound
def test_the_default_bound_is_five_million_generated_tokens_about_13_s_here():
    api._bound(1, None, requests=5_000_000)  # every sequence generates at least one token: exactly at the limit
    with pytest.raises(SpecError, match=r"5,000,001 sequences x runs generate at least 5,000,001 tokens, over the "
                                        r"limit of 5,000,000, about 13 s here at 390,000 tokens a second"):
        api._bound(1, None, requests=5_000_001)


@pytest.mark.parametrize("runs, requests, samples, ok", [(2, 50, 1, True), (2, 51, 1, False), (1, None, 1, False),
                                                         (1, 10, 10, True), (1, 10, 11, False), (3, 11, 3, True)])
def test_before_any_trace_the_bound_counts_runs_times_requests_times_samples(runs, requests, samples, ok):
    """runs x requests x samples sequences, each at least one token, against the limit (100 here; no --requests
    means 64 a run)."""
    limit = 100 if requests is not None else 63
    if ok:
        api._bound(runs, limit, requests=requests, samples=samples)
    else:
        n = runs * (64 if requests is None else requests) * samples
        with pytest.raises(SpecError, match=f"{n:,} sequences x runs"):
            api._bound(runs, limit, requests=requests, samples=samples)


def _trace(outputs):
    return SimpleNamespace(outputs=np.asarray(outputs, dtype=np.int64)[:, None], n=len(outputs))


def test_with_a_trace_the_bound_counts_its_generated_tokens_over_every_run():
    tr = _trace([3, 4])
    api._bound(2, 14, tr=tr)
    with pytest.raises(SpecError, match=r"2 requests generate 14 tokens over 2 run\(s\)"):
        api._bound(2, 13, tr=tr)


@pytest.mark.parametrize("slots, limit, ok", [(1, 2000, True), (1, 1999, False), (2, 1000, True), (2, 999, False),
                                              (0, 2000, True), (0, 1999, False), (None, 100, True)])
def test_few_slots_are_bounded_by_their_iterations_each_the_cost_of_20_tokens(slots, limit, ok):
    """100 tokens through 1 slot take 100 iterations: 2,000 token-equivalents (0 slots count as 1)."""
    tr = _trace([60, 40])
    if ok:
        api._bound(1, limit, tr=tr, slots=slots)
    else:
        steps = 100 // max(1, slots)
        with pytest.raises(SpecError, match=f"take at least {steps:,} iterations over 1 run\\(s\\), each about the "
                                            f"time of 20 generated tokens: {20 * steps:,} token-equivalents"):
            api._bound(1, limit, tr=tr, slots=slots)


# ---------------------------------------------------------------- the overload warning
def _run(arrival, t, dt, waiting, requests=None, makespan=20.0):
    arrival = np.asarray(arrival, float)
    return SimpleNamespace(summary={"requests": len(arrival) if requests is None else requests, "makespan_s": makespan,
                                    "policy": "continuous"},
                           requests={"arrival_s": arrival},
                           timeline={"t_start_s": np.asarray(t, float), "duration_s": np.asarray(dt, float),
                                     "waiting": np.asarray(waiting, float)})


def _heard(run):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        api._overload([run], "m", "d")
    msgs = [str(x.message) for x in w if issubclass(x.category, LoadWarning)]
    assert len(msgs) <= 1
    return msgs[0] if msgs else None


ARR = np.linspace(0.0, 10.0, 11)  # 11 arrivals over 10 s: mid 5 s


def test_a_queue_that_grows_from_the_first_half_of_the_arrivals_to_the_second_is_an_overload():
    """Steps every second from 0 to 10 s, waiting = t: the first half [0, 5) holds 0..4 (mean 2), the second
    [5, 10] 5..10 (mean 7.5): 7.5 > 1.5 x 2 + 2. The message says both means, the offered and the served rates."""
    t = np.arange(0.0, 11.0)
    msg = _heard(_run(ARR, t, np.ones(11), t))
    assert msg is not None
    assert "mean 2 waiting over the first half of the arrivals, 7.5 over the second" in msg
    assert "requests arrive at 1/s per replica" in msg and "0.55 requests/s served" in msg  # 10 / 10 s; 11 / 20 s
    assert msg.startswith("continuous batching of m on d")


def test_the_means_are_weighted_by_each_step_s_duration():
    """First half: 1 waiting for 3 s and 4 waiting for 1 s: mean 1.75 (not 2.5); second half: 9 for 1 s."""
    msg = _heard(_run(ARR, [0.0, 3.0, 5.0], [3.0, 1.0, 1.0], [1.0, 4.0, 9.0]))
    assert "mean 1.75 waiting over the first half of the arrivals, 9 over the second" in msg


@pytest.mark.parametrize("q1, q2, warned", [(2.0, 5.0, False), (2.0, 5.5, True), (0.0, 3.0, False),
                                            (0.0, 4.0, True), (4.0, 8.0, False), (4.0, 8.5, True)])
def test_the_second_half_must_exceed_1_5x_the_first_plus_2_and_hold_4_waiting(q1, q2, warned):
    msg = _heard(_run(ARR, [1.0, 7.0], [1.0, 1.0], [q1, q2]))
    assert (msg is not None) == warned


def test_steps_at_the_first_arrival_and_at_the_midpoint_and_the_last_arrival_fall_in_their_half():
    """[t0, mid) and [mid, t1]: a step at exactly 5 s is in the second half, one at 10 s too, one at 0 s in the
    first; one after the last arrival in neither."""
    msg = _heard(_run(ARR, [0.0, 5.0, 10.0, 10.5], [1.0, 1.0, 1.0, 1.0], [1.0, 6.0, 10.0, 100.0]))
    assert "mean 1 waiting over the first half of the arrivals, 8 over the second" in msg


def test_a_half_without_steps_or_with_steps_of_no_duration_has_no_queue():
    """No step in [0, 5): the first half's mean is 0; steps of 0.1 s are long enough to count."""
    msg = _heard(_run(ARR, [6.0, 7.0], [0.1, 0.1], [4.5, 4.5]))
    assert "mean 0 waiting over the first half of the arrivals, 4.5 over the second" in msg
    assert _heard(_run(ARR, [1.0, 6.0, 7.0], [0.0, 0.1, 0.1], [50.0, 4.5, 4.5])) == msg


@pytest.mark.parametrize("n, warned", [(7, False), (8, True)])
def test_fewer_than_8_requests_say_nothing(n, warned):
    t = np.arange(0.0, 11.0)
    assert (_heard(_run(ARR, t, np.ones(11), t, requests=n)) is not None) == warned


def test_requests_that_all_arrive_at_once_or_a_run_without_steps_say_nothing():
    assert _heard(_run(np.zeros(11), [0.0, 1.0], [1.0, 1.0], [100.0, 100.0])) is None
    assert _heard(_run(ARR, [], [], [])) is None


# ---------------------------------------------------------------- the options' parsers
@pytest.mark.parametrize("v", [None, "none", " None ", "NONE"])
def test_no_token_budget_means_whole_prompts(v):
    assert api._budget(v) is None


@pytest.mark.parametrize("v, want", [(1, 1), ("512", 512), ("8k", 8000), (1 << 20, 1 << 20)])
def test_a_token_budget_is_a_whole_number_of_tokens_from_1_to_2_to_the_20(v, want):
    assert api._budget(v) == want


@pytest.mark.parametrize("v, msg", [(0, r"--token-budget.*whole number >= 1"), ("-5", "whole number >= 1"),
                                    ((1 << 20) + 1, "over the largest value this option takes, 1,048,576"),
                                    ("lots", "whole number")])
def test_a_bad_token_budget_names_the_option(v, msg):
    with pytest.raises(SpecError, match=msg):
        api._budget(v)


@pytest.mark.parametrize("v", [None, "none", "inf", " INF "])
def test_no_slot_limit_is_none_or_inf(v):
    assert api._slots(v) is None


def test_slots_are_a_whole_number_from_1():
    assert api._slots("64") == 64
    with pytest.raises(SpecError, match="--slots.*whole number >= 1"):
        api._slots(0)
