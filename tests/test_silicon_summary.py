"""The serving validation's summary, coverage and peer comparison (serving/silicon_report.py), on tables written
by hand: which points count, the boundaries of the +-25% share, the p90, the peer's usable points, the work bound."""
import math

import numpy as np
import pandas as pd
import pytest

from perfmodel.errors import SpecError
from perfmodel.serving import silicon_report as sr


def _points(errors_ttft, errors_tpot, models=None, status=None, reasons=None, assumed=None):
    n = len(errors_ttft)
    meas_t, meas_d = np.full(n, 100.0), np.full(n, 10.0)
    return pd.DataFrame({
        "id": [f"p{i}" for i in range(n)], "mode": ["roofline"] * n, "status": status or ["ok"] * n,
        "backend": ["vllm"] * n, "system": ["h200_sxm"] * n, "model_path": models or ["m"] * n,
        "serving_mode": ["agg"] * n, "band": ["5-32"] * n, "reason": reasons or [""] * n, "assumed": assumed or [""] * n,
        "measured_ttft_ms": meas_t, "measured_tpot_ms": meas_d,
        "predicted_ttft_ms": meas_t * (1 + np.array(errors_ttft)), "predicted_tpot_ms": meas_d * (1 + np.array(errors_tpot)),
        "ttft_error": errors_ttft, "tpot_error": errors_tpot})


def test_an_error_of_exactly_25_percent_is_within_25_percent_in_the_summary():
    s = sr.summarize(_points([0.25, -0.25, 0.26, 0.0], [0.0, 0.0, 0.0, -0.2501]))
    row = s[s["category"] == "overall"].iloc[0]
    assert row["ttft_within_25"] == 0.75 and row["tpot_within_25"] == 0.75


def test_a_category_s_groups_come_in_sorted_order():
    s = sr.summarize(_points([0.1, 0.2, 0.3], [0.1, 0.2, 0.3], models=["zeta", "alpha", "mid"]))
    assert list(s[s["category"] == "model"]["group"]) == ["alpha", "mid", "zeta"]


def test_coverage_counts_rows_predicted_in_every_mode_and_the_skipped_rows_reasons_with_byte_counts_folded():
    t = _points([0.1, 0.2, 0.3, 0.4], [0.1] * 4, status=["ok", "ok", "skipped", "skipped"],
                reasons=["", "", "weights 141.1e9 B per device", "weights 96 B per device"],
                assumed=["", "workers not given", "", ""])
    c = sr.coverage(t)
    assert c == {"rows": 4, "predicted": 2, "assumed": 1, "skipped": {"weights N B per device": 2}}


def test_the_work_bound_takes_a_whole_number_of_at_least_one_simulation_and_refuses_one_more():
    sr.check_points(1, 1, 1, "--max-points")
    sr.check_points(2, 3, 6, "--max-points")
    with pytest.raises(SpecError, match="2 points x 3 mode"):
        sr.check_points(2, 3, 5, "--max-points")
    for bad in (0, -1, True, 2.0, "5"):
        with pytest.raises(SpecError, match="--max-points: must be a whole number >= 1"):
            sr.check_points(1, 1, bad, "--max-points")


def test_the_peer_is_compared_on_the_points_it_predicted_with_positive_finite_times(tmp_path):
    """Five points; the peer predicted p0 and p1 (p1 2x too slow on TTFT), not p2 (NaN), p3 (a TPOT of 0) or p4 (a
    TTFT of -1): 2 points both predicted; its median |TTFT error| 0.5, p90 0.9; 1 of 2 within 25%."""
    t = _points([0.1, 0.25, 0.3, 0.4, 0.5], [0.0] * 5)
    peer = tmp_path / "peer.csv"
    pd.DataFrame({"id": [f"p{i}" for i in range(5)], "aic_ttft_ms": [100.0, 200.0, np.nan, 100.0, -1.0],
                  "aic_tpot_ms": [12.5, 10.0, 10.0, 0.0, 10.0]}).to_csv(peer, index=False)
    c = sr.compare(t, peer)
    row = c[c["category"] == "overall"].iloc[0]
    assert row["points"] == 2 and c.attrs["both"] == 2 and c.attrs["peer_rows"] == 5 and c.attrs["peer_predicted"] == 4
    assert row["aic_ttft_median_abs"] == 0.5 and row["aic_ttft_p90_abs"] == pytest.approx(0.9, rel=1e-12)
    assert row["aic_ttft_within_25"] == 0.5 and row["aic_tpot_within_25"] == 1.0  # a TPOT 25% slow is within
    assert row["roofline_ttft_median_abs"] == pytest.approx(0.175, rel=1e-12)
    assert row["roofline_ttft_within_25"] == 1.0  # 1.1 and 1.25 times the measured TTFT: both within
    assert math.isclose(row["roofline_ttft_p90_abs"], float(np.percentile([0.1, 0.25], 90)), rel_tol=1e-9)


def test_a_compared_category_s_groups_come_in_sorted_order(tmp_path):
    t = _points([0.1, 0.2], [0.0, 0.0], models=["zeta", "alpha"])
    peer = tmp_path / "peer.csv"
    pd.DataFrame({"id": ["p0", "p1"], "aic_ttft_ms": [100.0, 100.0], "aic_tpot_ms": [10.0, 10.0]}).to_csv(peer, index=False)
    assert list(sr.compare(t, peer).query("category == 'model'")["group"]) == ["alpha", "zeta"]


def test_a_saved_table_keeps_text_that_pandas_would_read_as_missing(tmp_path):
    t = _points([0.1, 0.2], [0.0, 0.0], reasons=["None", "NA"], status=["skipped", "skipped"])
    f = tmp_path / "pts.csv"
    t.to_csv(f, index=False)
    back = sr.load_points(f)
    assert list(back["reason"]) == ["None", "NA"]


def test_a_peer_time_of_zero_is_no_prediction_and_one_under_a_millisecond_is_one(tmp_path):
    t = _points([0.1] * 4, [0.0] * 4)
    peer = tmp_path / "peer.csv"
    pd.DataFrame({"id": ["p0", "p1", "p2", "p3"], "aic_ttft_ms": [0.5, 0.0, 100.0, 100.0],
                  "aic_tpot_ms": [10.0, 10.0, 0.5, 0.0]}).to_csv(peer, index=False)
    c = sr.compare(t, peer)
    assert c.attrs["both"] == 2 and c[c["category"] == "overall"].iloc[0]["points"] == 2
