"""`validate --serving`'s per-point table says what the simulator computed, in the units and labels it names: times
in ms, the precision and the layout as a reader of the sample would write them, why a point was not predicted,
and a progress count that ends at the number of points."""
import math

import pandas as pd
import pytest

from perfmodel.errors import SpecError
from perfmodel.runconfig import Layout
from perfmodel.serving import silicon


@pytest.fixture(scope="module")
def two_agg():
    s = silicon.load()
    s = s[(s["mode"] == "agg") & (s["isl"] <= 2048) & (s["osl"] <= 256)]
    s = s[s["silicon_data_source"].str.extract(r"silicon_concurrency=(\d+)")[0].astype(float) <= 4]
    return s.head(2)


def test_the_table_gives_each_point_s_simulated_times_in_milliseconds_and_its_precision_as_planned(two_agg):
    plans = silicon.plan(two_agg)
    assert [p["status"] for p in plans] == ["ok", "ok"]
    seen = []
    t = silicon.predict(two_agg, ("roofline",), progress=lambda done, todo: seen.append((done, todo)))
    for p, (_, row) in zip(plans, t.iterrows()):
        out = silicon.Predictor("roofline")(p)
        assert row["predicted_ttft_ms"] == pytest.approx(out["ttft_s"] * 1000, rel=1e-12)
        assert row["predicted_tpot_ms"] == pytest.approx(out["tpot_s"] * 1000, rel=1e-12)
        assert row["precision"].startswith(f"{p['weights']}/{p['act']}/{p['kv']}")
        assert row["layout"] == silicon._lay(p) != ""
    assert seen[-1] == (2, 2) and [d for d, _ in seen] == sorted(d for d, _ in seen)  # counts up to every point


@pytest.mark.parametrize("p, want", [
    ({"layout": Layout(tp=4)}, "tp4"),
    ({"layout": Layout(tp=1, ep=8)}, "tp1xdp8"),  # attention data-parallel over 8 ranks
    ({"layout": Layout(tp=2, ep=2)}, "tp2xdp2"),
    ({"layout": Layout(tp=8, experts="ep")}, "tep8"),  # attention tensor-parallel, whole experts spread (TEP)
    ({"layout": Layout(tp=4), "decode_layout": Layout(tp=1, ep=8), "prefill_workers": 3, "decode_workers": 1},
     "3xtp4 + 1xtp1xdp8"),
    ({}, ""),  # a row that was not planned has no layout
])
def test_a_layout_is_written_as_its_parallelism_and_a_disaggregated_one_as_its_two_pools(p, want):
    assert silicon._lay(p) == want


@pytest.mark.parametrize("err, want", [
    (SpecError("silicon", None, "does not fit: one request's KV cache is more than the memory left"),
     "does not fit: one request's KV cache is more than the memory left"),
    (SpecError("h100-sxm", "memory_capacity", "the weights take 90 GB of 80"), "does not fit: the weights take 90 GB of 80"),
    (SpecError("model.yaml", "n_heads", "must be positive"), "model.yaml: n_heads: must be positive"),
    (SpecError("model.yaml", None, "unknown architecture"), "model.yaml: unknown architecture"),
])
def test_a_point_that_cannot_be_predicted_says_why_and_a_memory_shortfall_says_it_does_not_fit(monkeypatch, err, want):
    def fail(self, p):
        raise err

    monkeypatch.setattr(silicon, "_PREDICTORS", {})
    monkeypatch.setattr(silicon.Predictor, "__call__", fail)
    assert silicon._predict_batch("roofline", 2, [(7, {})]) == [(7, want)]


def test_each_further_mtp_draft_adds_fewer_tokens_a_step_than_the_one_before():
    """A step emits 1 + sum over i <= k of P(the first i drafts all accepted); each term is the one before times an
    acceptance probability <= 1, so tokens(k) - tokens(k - 1) never grows with k (tokens(0) = 1): 0.92, 0.66, 0.24."""
    t = [1.0] + [silicon.MTP_TOKENS[k] for k in (1, 2, 3)]
    gains = [b - a for a, b in zip(t, t[1:])]
    assert all(g > 0 for g in gains) and all(b <= a for a, b in zip(gains, gains[1:]))
    assert math.isclose(sum(gains), t[-1] - 1.0)

