"""Static (request-level) batching's timeline, to the row (serving/scheduler.py `_Sim.static`): one padded batch
at a time, a prefill of every row at the longest prompt, then decodes until the longest output; the cache is one
rectangle of rows x (longest prompt + the traffic's longest output). Each column of the timeline is written out by
hand for two small batches."""
import numpy as np
import pytest

from perfmodel.ops import Precision
from perfmodel.serving import StepCost, Traffic, simulate
from perfmodel.serving.kvmemory import kv_sizes
from perfmodel.specs import load_hardware, load_model

M, HW = load_model("llama-2-13b"), load_hardware("h100-sxm")
COST = StepCost(M, HW, Precision(), 1)  # quantum 1: exact step times
PT = kv_sizes(M, HW).per_token  # 819,200 B; no fixed state per sequence


def _run(prompts, outs, slots, arrivals=None, hw=HW):
    n = len(prompts)
    out = np.array([[o] for o in outs])
    tr = Traffic(np.zeros(n) if arrivals is None else np.array(arrivals, float), np.array(prompts), out,
                 int(out.max()), 0, [f"r{i}" for i in range(n)])
    return simulate(M, hw, tr, "static", slots, cost=COST)


def test_one_padded_batch_of_two_requests_to_the_last_column():
    """Prompts 10 and 20, outputs 3 and 5, at t = 0, 4 slots: one batch of 2 rows at the longest prompt (20): a
    prefill of 40 tokens, then 4 decodes at contexts 21 ... 24. Rows past their output make padding, not tokens:
    2, 2, 2, 1, 1 generated. Held: each row's prompt + the tokens it has made, 32, 34, 36, 37, 38 tokens; reserved:
    2 rows x (20 + 5) = 50 tokens all along."""
    r = _run([10, 20], [3, 5], 4)
    tl = r.timeline
    dt = [COST.same(20, 20, 2)] + [COST.same(1, 20 + j, 2) for j in range(1, 5)]
    assert list(tl["step"]) == [0, 1, 2, 3, 4]
    assert list(tl["kind"]) == ["prefill"] + ["decode"] * 4
    assert list(tl["duration_s"]) == pytest.approx(dt, rel=1e-12)
    assert list(tl["t_start_s"]) == pytest.approx(np.concatenate([[0.0], np.cumsum(dt)[:-1]]), rel=1e-12, abs=0)
    assert list(tl["rows"]) == [2] * 5 and list(tl["running"]) == [2] * 5 and list(tl["slots_used"]) == [2] * 5
    assert list(tl["decode_rows"]) == [0, 2, 2, 2, 2]
    assert list(tl["prefill_tokens"]) == [40, 0, 0, 0, 0]
    assert list(tl["generated"]) == [2, 2, 2, 1, 1]
    assert list(tl["kv_used_bytes"]) == pytest.approx([t * PT for t in (32, 34, 36, 37, 38)], rel=1e-12)
    assert list(tl["kv_reserved_bytes"]) == pytest.approx([50 * PT] * 5, rel=1e-12)
    assert list(tl["kv_internal_bytes"]) == pytest.approx([t * PT for t in (18, 16, 14, 13, 12)], rel=1e-12)
    for c in ("kv_future_bytes", "kv_external_bytes", "kv_saved_bytes", "preempted", "waiting"):
        assert list(tl[c]) == [0] * 5
    q = r.requests
    end = np.cumsum(dt)
    assert list(q["ttft_s"]) == pytest.approx([end[0]] * 2, rel=1e-12)  # both first tokens at the prefill's end
    # TPOT over the request's own tokens: request 0's last token at the end of decode 2, request 1's at decode 4
    assert list(q["tpot_s"]) == pytest.approx([(end[2] - end[0]) / 2, (end[4] - end[0]) / 4], rel=1e-12)
    assert r.summary["tokens"] == 8 and r.summary["steps"] == 5 and r.summary["peak_kv_reserved_bytes"] == 50 * PT
    assert list(q["latency_s"]) == pytest.approx([end[4]] * 2, rel=1e-12)  # both return when the batch ends


def test_a_request_that_finds_the_slots_full_waits_for_the_whole_batch_and_is_counted_waiting():
    """Three requests at t = 0 on 2 slots: the first batch's timeline says 1 waiting; the third starts when the
    batch ends, as a batch of its own (1 row, its own prompt)."""
    r = _run([10, 20, 30], [3, 5, 2], 2)
    tl = r.timeline
    assert list(tl["waiting"]) == [1] * 5 + [0] * 2
    assert list(tl["rows"]) == [2] * 5 + [1] * 2 and list(tl["prefill_tokens"]) == [40, 0, 0, 0, 0, 30, 0]
    first_end = tl["t_start_s"][4] + tl["duration_s"][4]
    assert tl["t_start_s"][5] == pytest.approx(first_end, rel=1e-12)
    assert r.requests["ttft_s"][2] == pytest.approx(first_end + COST.same(30, 30, 1), rel=1e-12)


def test_a_batch_takes_a_row_only_while_its_padded_rectangle_fits_the_memory():
    """Room for exactly 2 x (20 + 5) = 50 tokens: requests of prompts 10 and 20 (outputs 3 and 5) share one batch
    (the rectangle fills the room to the byte); with 49 tokens of room the second waits for the next batch."""
    w = kv_sizes(M, HW).weights
    both = _run([10, 20], [3, 5], 4, hw=HW.replace(memory_capacity=w + 50 * PT))
    assert list(both.timeline["rows"]) == [2] * 5
    apart = _run([20, 10], [5, 3], 4, hw=HW.replace(memory_capacity=w + 49 * PT))
    # each alone: 20 + 5 tokens reserved for 5 steps, then 10 + 5 (the traffic's longest output) for 3
    assert list(apart.timeline["rows"]) == [1] * 8
    assert list(apart.timeline["kv_reserved_bytes"]) == [25 * PT] * 5 + [15 * PT] * 3


def test_a_request_of_several_samples_ends_with_its_longest_sample_and_reports_each_batch_to_the_progress_bar():
    """One request of two samples (outputs 3 and 5) runs as two rows: its last token is the longest sample's, at the
    end of the 4th decode. Three such requests on 2 slots make three batches; the progress callback hears the
    requests done after each: 1, 2, 3."""
    out = np.array([[3, 5]] * 3)
    tr = Traffic(np.zeros(3), np.array([10, 10, 10]), out, 5, 0, ["a", "b", "c"])
    seen = []
    r = simulate(M, HW, tr, "static", 2, cost=COST, progress=seen.append)
    assert seen == [1, 2, 3]
    tl = r.timeline
    end = np.asarray(tl["t_start_s"][:5]) + np.asarray(tl["duration_s"][:5])
    assert r.requests["tpot_s"][0] == pytest.approx((end[4] - end[0]) / 4, rel=1e-12)
