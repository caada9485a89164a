"""The roofline as a bound on a measured closed loop (silicon_disagg.at_rate, silicon.measured_rate, the agg and
disagg points' bound, silicon_report.bounds): a server faster than the measured one, in the same closed loop of N
clients, serves more requests a second and they queue, so its TTFT bounds nothing; at the measured request rate
it holds only the clients Little's law leaves in the system, and its times there are the bound."""
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

from perfmodel.cli import main
from perfmodel.ops import Layout
from perfmodel.serving import disagg, silicon, silicon_disagg, silicon_report


def _loop(c):  # a worker's closed loop of c clients: each iteration 0.2 s + 0.05 s a request, TTFT grows with c
    t = 0.2 + 0.05 * c
    return {"rate": c / t, "stage": t, "ttft_profile": 0.01 * c, "tpot_profile": 0.001 + 0.0002 * c,
            "ttft": 0.01 * c, "tpot": 0.001 + 0.0002 * c, "preempted": 0, "in_flight": float(c)}


def _pool():
    return silicon.Predictor.pool(_loop, lambda r, c: r["rate"])


@settings(derandomize=True, max_examples=60, deadline=None)
@given(top=st.integers(1, 300), share=st.floats(0.001, 0.999))
def test_the_clients_at_a_rate_serve_that_rate_and_fewer_clients_serve_less(top, share):
    pool = _pool()
    x = share * pool(float(top))[0]
    u = silicon.Predictor.at_rate(pool, float(top), x)
    assert 0.0 < u <= top
    assert pool(u)[0] == pytest.approx(x, rel=1e-5)
    assert pool(u * (1 - 1e-3))[0] < x  # the least such u: the rate grows with the clients


def test_a_rate_the_whole_loop_does_not_exceed_has_no_clients_for_it():
    pool = _pool()
    top = pool(40.0)[0]
    assert silicon.Predictor.at_rate(pool, 40.0, top) is None
    assert silicon.Predictor.at_rate(pool, 40.0, 2 * top) is None
    assert silicon.Predictor.at_rate(pool, 40.0, 0.999 * top) is not None


@pytest.mark.parametrize("ttft, tpot, osl, spread, n, want", [
    (100.0, 10.0, 101, None, 8, 8 / (0.1 + 100 * 0.01)),  # Little: N / (TTFT + (OSL - 1) TPOT)
    (100.0, 10.0, 100, 0.8, 8, 8 / (0.1 + 89 * 0.01)),  # lengths drawn from 80 to 100: 90 on average
    (250.0, 0.0, 1, None, 4, 4 / 0.25),  # a one-token output: its TTFT is the whole request
    (250.0, float("nan"), 1, None, 4, 4 / 0.25),  # the benchmark's TPOT of no second token
])
def test_the_measured_rate_is_little_s_law_on_the_measured_closed_loop(ttft, tpot, osl, spread, n, want):
    row = {"osl": str(osl), "silicon_ttft_ms": str(ttft), "silicon_tpot_ms": str(tpot)}
    assert silicon.measured_rate(row, {"concurrency": n, "spread": spread}) == pytest.approx(want, rel=1e-12)
    assert silicon.measured_rate(dict(row, silicon_ttft_ms="nan"), {"concurrency": n}) is None


# ---------------------------------------------------------------- one point, its simulations stood in for
class _Inst:
    def __init__(self, tp):
        self.lay = Layout(tp=tp)
        self.model = self.hw = self.prec = None
        self.serial = tp
        self.block = 16


@pytest.fixture
def stand_ins(monkeypatch):
    """Closed loops of c clients from _loop (a prefill pool's stage, a decode pool's rate and times), a fixed
    transfer and burst."""
    def instance(pred, p, lay, budget, moe=""):
        return _Inst(lay.tp)

    def closed(pred, inst, n, isl, osl, prefilled=False, **k):
        r = _loop(n)
        return dict(r, stage=0.1 + 0.02 * n) if osl == 1 else r

    class Transfer:
        def __init__(self, *a):
            pass

        def __call__(self, prompt):
            return np.full(len(prompt), 0.004)

    monkeypatch.setattr(silicon.Predictor, "instance", instance)
    monkeypatch.setattr(silicon.Predictor, "closed", closed)
    monkeypatch.setattr(silicon.Predictor, "split", classmethod(lambda cls, *a, **k: 5))  # a start for balance
    monkeypatch.setattr(silicon.Predictor, "rates", staticmethod(lambda *a: (1.0, 1.0)))
    monkeypatch.setattr(silicon.Predictor, "burst_mean", lambda pred, inst, n, isl, steady, **k: steady)
    monkeypatch.setattr(silicon.Predictor, "no_evict", staticmethod(lambda inst, isl, osl, engine: 64))
    monkeypatch.setattr(disagg, "Transfer", Transfer)
    monkeypatch.setattr(silicon_disagg, "JOINT_CLIENTS", 0)  # the pooled loop (the joint one: its own test below)


def _agg(N=64, rate=None):
    return {"model": "m", "hardware": "h", "weights": "bf16", "act": "bf16", "kv": "bf16", "engine": "vllm",
            "budget": 8192, "layout": Layout(tp=2), "concurrency": N, "isl": 1000, "osl": 100, "measured_rate": rate}


def _disagg(N=60, Wp=2, Wd=3, rate=None):
    return dict(_agg(N, rate), decode_layout=Layout(tp=4), prefill_workers=Wp, decode_workers=Wd)


def test_an_agg_point_s_bound_holds_the_clients_that_serve_the_measured_rate(stand_ins):
    plain = silicon.Predictor("roofline")(_agg(64))
    x = plain["request_rate"] / 3  # the measured run served a third of what the roofline's closed loop does
    out = silicon.Predictor("roofline")(_agg(64, x))
    assert out["ttft_s"] == plain["ttft_s"] and out["tpot_s"] == plain["tpot_s"]  # the closed loop is unchanged
    pool = _pool()
    u = silicon.Predictor.at_rate(pool, 64.0, x)
    assert out["bound_ttft_s"] == pytest.approx(pool(u)[1]("ttft_profile"), rel=1e-12)
    assert out["bound_tpot_s"] == pytest.approx(pool(u)[1]("tpot_profile"), rel=1e-12)
    assert out["bound_ttft_s"] < plain["ttft_s"] and out["bound_tpot_s"] < plain["tpot_s"]
    # measured faster than the roofline's loop serves: the loop's own times; the achievable mode has no bound
    fast = silicon.Predictor("roofline")(_agg(64, 2 * plain["request_rate"]))
    assert (fast["bound_ttft_s"], fast["bound_tpot_s"]) == (_loop(64)["ttft"], _loop(64)["tpot"])
    assert "bound_ttft_s" not in silicon.Predictor("achievable")(_agg(64, x))
    assert "bound_ttft_s" not in silicon.Predictor("roofline")(_agg(64))


def test_where_fewer_clients_would_be_slower_the_bound_is_the_loop_s_own_time(stand_ins, monkeypatch):
    """Prompts of one length sent together run together: a loop's TTFT need not grow with its clients. The bound
    is the lower of the loop at the measured rate and the loop of all N, metric by metric."""
    def closed(pred, inst, n, isl, osl, prefilled=False, **k):  # TTFT falls with the clients, TPOT grows
        return dict(_loop(n), ttft_profile=1.0 / n, ttft=1.0 / n)

    monkeypatch.setattr(silicon.Predictor, "closed", closed)
    plain = silicon.Predictor("roofline")(_agg(64))
    out = silicon.Predictor("roofline")(_agg(64, plain["request_rate"] / 3))
    assert out["bound_ttft_s"] == plain["ttft_s"] == 1.0 / 64  # the rate's fewer clients would wait longer
    pool = silicon.Predictor.pool(lambda c: closed(None, None, c, 0, 0), lambda r, c: r["rate"])
    u = silicon.Predictor.at_rate(pool, 64.0, plain["request_rate"] / 3)
    assert out["bound_tpot_s"] == pytest.approx(pool(u)[1]("tpot_profile"), rel=1e-12)
    assert out["bound_tpot_s"] < plain["tpot_s"]
    one = silicon.Predictor.lower({"ttft_s": 2.0, "tpot_s": math.nan}, 1.0, math.nan)  # a one-token output
    assert one["bound_ttft_s"] == 1.0 and math.isnan(one["bound_tpot_s"])
    assert silicon.Predictor.lower({"ttft_s": 2.0, "tpot_s": 0.5}, 3.0, 0.25) == {"bound_ttft_s": 2.0,
                                                                                   "bound_tpot_s": 0.25}


def test_a_disagg_point_s_bound_has_each_pool_serve_the_measured_rate_with_the_others_between_requests(stand_ins):
    N, Wp, Wd = 60, 2, 3
    plain = silicon.Predictor("roofline")(_disagg(N, Wp, Wd))
    x = plain["request_rate"] / 4
    out = silicon.Predictor("roofline")(_disagg(N, Wp, Wd, x))
    assert out["ttft_s"] == plain["ttft_s"] and out["tpot_s"] == plain["tpot_s"]
    pre = silicon.Predictor.pool(lambda c: dict(_loop(c), stage=0.1 + 0.02 * c), lambda r, c: Wp * c / (r["stage"] + 0.004))
    dec = silicon.Predictor.pool(_loop, lambda r, c: Wd * r["rate"])
    v_p, v_d = silicon.Predictor.at_rate(pre, N / Wp, x), silicon.Predictor.at_rate(dec, N / Wd, x)
    assert pre(v_p)[0] == pytest.approx(x, rel=1e-5) and dec(v_d)[0] == pytest.approx(x, rel=1e-5)
    assert Wp * v_p + Wd * v_d < N  # the rest of the clients are between requests
    want = pre(v_p)[1]("stage") + 0.004 + dec(v_d)[1]("ttft_profile")  # the prefill stage, transfer, decode wait
    assert out["bound_ttft_s"] == pytest.approx(want, rel=1e-12)
    assert out["bound_tpot_s"] == pytest.approx(dec(v_d)[1]("tpot_profile"), rel=1e-12)
    assert out["bound_ttft_s"] < plain["ttft_s"] and out["bound_tpot_s"] < plain["tpot_s"]
    fast = silicon.Predictor("roofline")(_disagg(N, Wp, Wd, 2 * plain["request_rate"]))
    assert (fast["bound_ttft_s"], fast["bound_tpot_s"]) == (plain["ttft_s"], plain["tpot_s"])


def test_a_one_token_disagg_point_s_bound_is_its_prefill_pool_at_the_measured_rate(stand_ins, monkeypatch):
    """Each prefill worker holds the clients that serve the measured rate (each also waits the transfer), up to
    its N / W_p; a rate even N / W_p clients cannot serve leaves the loop's own TTFT."""
    monkeypatch.setattr(silicon.Predictor, "split", classmethod(lambda cls, *a, **k: 20))  # all 40 clients
    p = dict(_disagg(40, 2, 3), osl=1)
    plain = silicon.Predictor("roofline")(p)
    pre = silicon.Predictor.pool(lambda c: dict(_loop(c), stage=0.1 + 0.02 * c), lambda r, c: 2 * c / (r["stage"] + 0.004))
    x = 0.6 * pre(20.0)[0]  # several clients a worker
    v = silicon.Predictor.at_rate(pre, 20.0, x)
    assert 2.0 < v < 20.0
    out = silicon.Predictor("roofline")(dict(p, measured_rate=x))
    assert out["bound_ttft_s"] == pytest.approx(pre(v)[1]("stage") + 0.004, rel=1e-12)
    assert out["bound_ttft_s"] < plain["ttft_s"]
    assert math.isnan(out["bound_tpot_s"])
    # a stage that shortens with more clients: only N / W_p of them may be in a prefill worker, so a rate they
    # cannot serve leaves the loop's own TTFT, however fast more clients would be
    monkeypatch.setattr(silicon.Predictor, "closed",
                        lambda pred, inst, n, isl, osl, prefilled=False, **k: dict(_loop(n), stage=1.0 / (1.0 + n)))
    fast = silicon.Predictor("roofline")(p)
    top = 2 * 20 / (1.0 / 21 + 0.004)  # the pool's rate at 20 clients a worker
    over = silicon.Predictor("roofline")(dict(p, measured_rate=1.01 * top))
    assert over["bound_ttft_s"] == fast["ttft_s"]


# ---------------------------------------------------------------- the report
def _table(pred_ttft, bound_ttft, pred_tpot, bound_tpot, mode="roofline"):
    n = len(pred_ttft)
    return pd.DataFrame({"id": [f"p{i}" for i in range(n)], "mode": [mode] * n, "status": ["ok"] * (n - 1) + ["skipped"],
                         "serving_mode": ["agg", "agg", "disagg", "agg"][:n], "backend": ["vllm"] * n,
                         "system": ["h200_sxm"] * n, "model_path": ["m"] * n, "band": ["5-32"] * n,
                         "assumed": [""] * n, "ttft_error": np.array(pred_ttft) / 100.0 - 1,
                         "tpot_error": np.array(pred_tpot) / 10.0 - 1,
                         "measured_ttft_ms": [100.0] * n, "measured_tpot_ms": [10.0] * n,
                         "predicted_ttft_ms": pred_ttft, "predicted_tpot_ms": pred_tpot,
                         "bound_ttft_ms": bound_ttft, "bound_tpot_ms": bound_tpot})


def _counts(t, cols):
    s = silicon_report.summarize(t).set_index(["mode", "category", "group"])
    return {k: s.loc[k, cols].tolist() for k in s.index if k[1] in ("overall", "serving")}


def test_the_summary_counts_measured_times_each_estimate_exceeds_on_its_predicted_points():
    t = _table([150.0, 100.0, 90.0, 500.0], [90.0, 100.0, 101.0, 500.0], [11.0, 9.0, 12.0, 50.0],
               [9.0, 9.0, 10.5, 50.0])
    cols = ["points", "ttft_above", "tpot_above", "bound_ttft_above", "bound_tpot_above"]
    # the last row was not predicted; a tie is no excess
    assert _counts(t, cols) == {("roofline", "overall", "all"): [3, 1, 2, 1, 1],
                                ("roofline", "serving", "agg"): [2, 1, 1, 0, 0],
                                ("roofline", "serving", "disagg"): [1, 0, 1, 1, 1]}
    old = t.drop(columns=["bound_ttft_ms", "bound_tpot_ms"])  # a table written before the bound
    assert "bound_ttft_above" not in silicon_report.summarize(old).columns
    ach = silicon_report.summarize(_table([150.0, 1.0], [1.0, 1.0], [1.0, 1.0], [1.0, 1.0], "achievable"))
    assert ach["ttft_above"].tolist()[0] == 1 and "bound_ttft_above" not in ach.columns  # a bound is roofline's


def test_the_cli_says_how_often_each_roofline_exceeds_the_measured_time(tmp_path, capsys):
    src = pd.read_csv(silicon.DATA.parent.parent.parent.parent / "docs" / "validation" / "serving" / "points.csv",
                      nrows=6, keep_default_na=False, na_values=[""])
    t = src.assign(mode="roofline", status="ok", predicted_ttft_ms=2 * src["measured_ttft_ms"],
                   bound_ttft_ms=0.5 * src["measured_ttft_ms"], predicted_tpot_ms=0.5 * src["measured_tpot_ms"],
                   bound_tpot_ms=[2.0 * src["measured_tpot_ms"].iloc[0]] + list(0.5 * src["measured_tpot_ms"].iloc[1:]),
                   ttft_error=1.0, tpot_error=-0.5)  # predicted 2x and 0.5x the measured times
    f = tmp_path / "pts.csv"
    t.to_csv(f, index=False)
    assert main(["validate", "--serving", "--points", str(f)]) == 0
    out = capsys.readouterr().out
    assert ("the roofline's closed loop is slower than measured at 6 TTFT and 0 TPOT of its 6 points; at the measured "
            "request rate (the bound) at 0 TTFT and 1 TPOT\n") in out
    t.drop(columns=["bound_ttft_ms", "bound_tpot_ms"]).to_csv(f, index=False)
    assert main(["validate", "--serving", "--points", str(f)]) == 0
    out = capsys.readouterr().out
    assert "slower than measured at 6 TTFT and 0 TPOT of its 6 points\n" in out and "measured request rate" not in out


def test_a_table_without_times_or_bounds_is_summarized_from_its_errors():
    """Above the measured time is a positive error; a table without the bound (or its measured times) has no
    bound counts."""
    t = _table([150.0, 100.0, 90.0, 1.0], [90.0, 100.0, 101.0, 1.0], [11.0, 9.0, 12.0, 1.0], [9.0, 9.0, 10.5, 1.0])
    bare = t.drop(columns=["measured_ttft_ms", "measured_tpot_ms", "predicted_ttft_ms", "predicted_tpot_ms"])
    s = silicon_report.summarize(bare)
    row = s[s["category"] == "overall"].iloc[0]
    assert (row["ttft_above"], row["tpot_above"]) == (1, 2) and "bound_ttft_above" not in s.columns


def test_a_jointly_simulated_disagg_point_s_bound_is_the_same_pools_at_the_measured_rate(stand_ins, monkeypatch):
    """Up to JOINT_CLIENTS the loop itself is the joint simulation, and the bound at the measured rate is still each
    pool holding the clients that serve it (the lower of the two); a rate the pools cannot serve leaves the loop's."""
    N, Wp, Wd = 60, 2, 3
    monkeypatch.setattr(silicon_disagg, "JOINT_CLIENTS", 128)
    monkeypatch.setattr(silicon.Predictor, "joint", lambda self, *a: {
        "ttft_profile": 50.0, "tpot_profile": 9.0, "rate": 0.2, "preempted": 0, "prefill_clients": 1.0})
    plain = silicon.Predictor("roofline")(_disagg(N, Wp, Wd))
    assert (plain["ttft_s"], plain["tpot_s"], plain["decode_clients"]) == (50.0, 9.0, 59.0)
    pre = silicon.Predictor.pool(lambda c: dict(_loop(c), stage=0.1 + 0.02 * c), lambda r, c: Wp * c / (r["stage"] + 0.004))
    dec = silicon.Predictor.pool(_loop, lambda r, c: Wd * r["rate"])
    x = dec(N / Wd)[0] / 4
    v_p, v_d = silicon.Predictor.at_rate(pre, N / Wp, x), silicon.Predictor.at_rate(dec, N / Wd, x)
    out = silicon.Predictor("roofline")(_disagg(N, Wp, Wd, x))
    want = pre(v_p)[1]("stage") + 0.004 + dec(v_d)[1]("ttft_profile")
    assert out["bound_ttft_s"] == pytest.approx(want, rel=1e-12) and want < 50.0
    assert out["bound_tpot_s"] == pytest.approx(dec(v_d)[1]("tpot_profile"), rel=1e-12)
    fast = silicon.Predictor("roofline")(_disagg(N, Wp, Wd, 1e6))  # no pool serves a million a second
    assert (fast["bound_ttft_s"], fast["bound_tpot_s"]) == (50.0, 9.0)
