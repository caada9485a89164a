"""A simulated run's summary, from its per-request times and its iteration log (serving/scheduler.py `result` and
`little`), computed by hand for three requests and two iterations: each field is one formula."""
import math

import numpy as np
import pytest

from perfmodel.serving import Traffic
from perfmodel.serving.kvmemory import KVSizes
from perfmodel.serving.scheduler import TIMELINE, little, result

TR = Traffic(np.array([0.0, 1.0, 2.0]), np.array([10, 10, 10]), np.array([[3, 2], [1, 1], [5, 4]]), 5, 4,
             ["a", "b", "c"])
FIRST, LAST, DONE = np.array([0.5, 1.5, 2.5]), np.array([1.0, 1.5, 4.5]), np.array([1.0, 1.5, 4.5])
# two iterations of 1 s and 3 s: running 2 then 4; KV used 10 then 30 B, reserved 50, internal 40 then 20, future 0,
# external 0 then 8, saved 4 then 0
LOG = [(0, 0.0, 1.0, "prefill", 2, 0, 20, 2, 2, 2, 1, 10.0, 50.0, 40.0, 0.0, 0.0, 4.0, 0),
       (1, 1.0, 3.0, "decode", 4, 4, 0, 4, 4, 4, 0, 30.0, 50.0, 20.0, 0.0, 8.0, 0.0, 1)]
SIZES = KVSizes(1.0, 0.0, 0.0, 1000.0, 10**6)


def _run(warmup=0, log=LOG):
    return result(TR, TR.arrival, FIRST, LAST, DONE, np.array([0, 1, 0]), np.array([1, 1, 1]), log, 13, "roofline",
                  7, SIZES, "continuous", {"slots": 8}, warmup)


def test_latency_ttft_and_tpot_per_request_tpot_over_the_longest_sample_and_none_for_one_token():
    q = _run().requests
    assert list(q["latency_s"]) == [1.0, 0.5, 2.5] and list(q["ttft_s"]) == [0.5, 0.5, 0.5]
    assert q["tpot_s"][0] == (1.0 - 0.5) / (3 - 1) and math.isnan(q["tpot_s"][1]) and q["tpot_s"][2] == 2.0 / 4
    assert list(q["prompt_tokens"]) == [14, 14, 14]  # the shared prefix's 4 tokens included
    assert list(q["output_tokens"]) == [5, 2, 9] and list(q["samples"]) == [2, 2, 2]
    assert list(q["preemptions"]) == [0, 1, 0] and list(q["completions"]) == [1, 1, 1]


def test_the_summary_s_times_are_means_and_linear_percentiles_of_the_finite_values():
    s = _run().summary
    assert s["mean_latency_s"] == pytest.approx(4.0 / 3, rel=1e-12)
    assert s["p50_latency_s"] == 1.0 and s["p90_latency_s"] == pytest.approx(2.2, rel=1e-12)
    assert s["p99_latency_s"] == pytest.approx(1.0 + 0.98 * 1.5, rel=1e-12)
    assert s["mean_tpot_s"] == 0.375 and s["p50_tpot_s"] == 0.375  # the one-token request has none
    assert s["mean_ttft_s"] == 0.5 == s["p99_ttft_s"]


def test_throughput_is_tokens_over_the_span_from_the_first_send_to_the_last_return_and_little_s_law_holds():
    s = _run().summary
    assert s["makespan_s"] == 4.5 and s["tokens"] == 13 and s["throughput_tok_s"] == 13 / 4.5
    assert s["request_rate"] == 3 / 4.5 and s["mean_in_flight"] == pytest.approx(4.0 / 4.5, rel=1e-12)
    assert s["requests"] == 3 and s["sequences"] == 6 and s["steps"] == 2 and s["preemptions"] == 1
    assert s["step_evaluations"] == 7 and s["kv_capacity_bytes"] == 1000.0 and "warmup" not in s


def test_log_columns_are_averaged_over_time_and_peaked_over_iterations():
    """Time-weighted over iterations of 1 s and 3 s: running (2, 4) -> 3.5; KV used (10, 30) -> 25, internal
    (40, 20) -> 25, external (0, 8) -> 6, saved (4, 0) -> 1, reserved 50 throughout."""
    s = _run().summary
    assert s["mean_running"] == 3.5 and s["peak_running"] == 4.0
    assert (s["mean_kv_used_bytes"], s["mean_kv_reserved_bytes"], s["mean_kv_internal_bytes"]) == (25.0, 50.0, 25.0)
    assert (s["mean_kv_future_bytes"], s["mean_kv_external_bytes"], s["mean_kv_saved_bytes"]) == (0.0, 6.0, 1.0)
    assert s["peak_kv_reserved_bytes"] == 50.0
    tl = _run().timeline
    assert list(tl) == list(TIMELINE) and list(tl["kind"]) == ["prefill", "decode"]


def test_a_run_with_no_iterations_has_zero_means_and_peaks():
    s = _run(log=[]).summary
    assert s["steps"] == 0 and s["mean_running"] == 0.0 and s["peak_running"] == 0.0
    assert s["peak_kv_reserved_bytes"] == 0.0 and s["mean_kv_used_bytes"] == 0.0


def test_a_warm_up_leaves_its_requests_out_of_the_times_tokens_and_rate():
    """warmup=1: the measured requests are the 2nd and 3rd: sent from 1 s, returned by 4.5 s; their 2 + 9 tokens (not
    the 13 generated in all)."""
    s = _run(warmup=1).summary
    assert s["warmup"] == 1 and s["makespan_s"] == 3.5 and s["tokens"] == 11 and s["throughput_tok_s"] == 11 / 3.5
    assert s["mean_latency_s"] == 1.5 and s["request_rate"] == 2 / 3.5
    assert s["requests"] == 3  # the whole trace ran


def test_little_s_law_needs_a_positive_window():
    assert all(math.isnan(v) for v in little(np.array([1.0]), np.array([1.0])).values())
    assert all(math.isnan(v) for v in little(np.array([]), np.array([])).values())
    assert little(np.array([0.0, 1.0]), np.array([2.0, 3.0])) == {"request_rate": 2 / 3, "mean_in_flight": 4 / 3}


def test_tpot_counts_every_request_of_two_tokens_or_more_and_the_means_do_not_depend_on_the_time_unit():
    """A request of 2 tokens has a TPOT (last - first) / 1. The time-weighted means are the same when every
    iteration is ten times shorter (iterations of 0.1 s and 0.3 s)."""
    tr = Traffic(np.array([0.0]), np.array([10]), np.array([[2]]), 2, 0, ["a"])
    short = [row[:2] + (row[2] / 10,) + row[3:] for row in LOG]
    r = result(tr, tr.arrival, np.array([0.5]), np.array([0.75]), np.array([0.75]), np.array([0]), np.array([1]),
               short, 2, "roofline", 2, SIZES, "continuous", {})  # no warm-up given: none
    assert r.requests["tpot_s"][0] == 0.25 and "warmup" not in r.summary and r.summary["tokens"] == 2
    assert r.summary["mean_running"] == pytest.approx(3.5, rel=1e-12)
    assert r.summary["mean_kv_saved_bytes"] == pytest.approx(1.0, rel=1e-12)


def test_a_run_whose_requests_all_return_the_instant_they_are_sent_has_no_rate():
    tr = Traffic(np.array([0.0]), np.array([10]), np.array([[1]]), 1, 0, ["a"])
    z = np.array([0.0])
    s = result(tr, z, z, z, z, np.array([0]), np.array([1]), LOG, 1, "roofline", 1, SIZES, "continuous", {}).summary
    assert s["makespan_s"] == 0.0 and math.isnan(s["throughput_tok_s"]) and math.isnan(s["request_rate"])


def test_little_s_law_over_a_window_shorter_than_a_second():
    assert little(np.array([0.0, 0.25]), np.array([0.5, 0.5])) == {"request_rate": 4.0, "mean_in_flight": 1.5}
