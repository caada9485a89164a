"""The serving validation's reports (perfmodel.serving.silicon predicts the points; this summarizes them): the
work bound, per-category error summaries, coverage, reading a written point table back, and the side-by-side
comparison with a peer's predictions. perfmodel.serving.silicon re-exports all of it."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pandas is imported where a frame is made (off the plain CLI path)
    import pandas as pd  # noqa: F401

from ..errors import SpecError

MAX_FILE_BYTES = 64 * 2**20  # a silicon-sample CSV larger than this is refused before it is read


CATEGORIES = (("overall", None), ("backend", "backend"), ("system", "system"), ("model", "model_path"),
              ("serving", "serving_mode"), ("deployment", "deployment"), ("speculative", "speculative_group"),
              ("concurrency", "band"))


WORKERS_ASSUMED = "workers not given"  # how `assumed` starts the note of a disagg row without worker counts (plan)


DEPLOYMENT = {"recorded": "disagg, workers recorded", "recipe": "disagg, workers from the recipe",
              "assumed": "disagg, workers assumed"}


def with_deployment(points) -> "pd.DataFrame":
    """The table with its "deployment" column: agg, or disagg with its worker counts as the row records them, as
    the benchmark's recipe set them (silicon_plan.recipe_workers), or assumed (one prefill and one decode worker,
    said in `assumed`); and its "speculative_group": the speculative decoding its recipe (disagg) or configuration
    (agg, agg_speculative.csv) ran, or "not recorded". A table
    written before the `workers` column tells recorded from assumed by `assumed`."""
    t = points.copy()
    if "workers" in t.columns:
        w = t["workers"].fillna("").astype(str).map(DEPLOYMENT).fillna("disagg, workers recorded")
    else:
        assumed = t["assumed"].fillna("").astype(str).str.contains(WORKERS_ASSUMED, regex=False)
        w = np.where(assumed, DEPLOYMENT["assumed"], DEPLOYMENT["recorded"])
    t["deployment"] = np.where(t["serving_mode"] == "agg", "agg", w)
    spec = t["speculative"].fillna("").astype(str) if "speculative" in t.columns else ""
    where = np.where(t["serving_mode"] == "agg", " (configuration)", " (recipe)")
    t["speculative_group"] = np.where(spec == "", "not recorded", spec + where)
    return t


MAX_POINTS = 200  # point x mode simulations one call runs unless told more (max_points): a minute or so


def check_points(points: int, modes: int, limit, opt: str) -> None:
    """Bounded work: more than `limit` simulations are refused before any runs."""
    if not (isinstance(limit, int) and not isinstance(limit, bool) and limit >= 1):
        raise SpecError(opt, None, f"must be a whole number >= 1, got {limit!r}")
    if points * modes > limit:
        raise SpecError(opt, None, f"{points:,} points x {modes} mode(s) = {points * modes:,} simulations, over the "
                                   f"limit of {limit:,} (about 0.1-3 s each on one core; the 3,619 agg rows took 73 min "
                                   "on 2 cores): narrow it by model/system/backend, or raise the limit to run them")


SUMMARY_COLUMNS = ("status", "mode", "serving_mode", "assumed", "ttft_error", "tpot_error")


def summarize(points) -> "pd.DataFrame":
    """Per mode and category: points predicted, median and p90 |error| and the signed bias (median error) of
    TTFT and TPOT, the share within +-25%, and how many measured times the prediction exceeds (ttft_above,
    tpot_above). Where the table has the roofline at the measured request rate (bound_ttft_ms, bound_tpot_ms;
    silicon_disagg.at_rate), its roofline rows also count the measured times that exceeds (bound_ttft_above,
    bound_tpot_above): only it is a bound, since a faster server in the same closed loop serves more requests a
    second, and they queue."""
    import pandas as pd

    missing = [c for c in SUMMARY_COLUMNS if c not in points.columns]
    if missing:
        raise SpecError("points", None, f"is not a serving_validation table: it lacks {', '.join(missing)}")
    rows = []
    ok = with_deployment(points[points["status"] == "ok"])
    for mode in points["mode"].unique():
        pm = ok[ok["mode"] == mode]
        for cat, col in CATEGORIES:
            groups = [("all", pm)] if col is None else list(pm.groupby(col, sort=True))
            for name, g in groups:
                r = {"mode": mode, "category": cat, "group": str(name), "points": len(g)}
                for k in ("ttft", "tpot"):
                    e = g[f"{k}_error"].to_numpy(dtype=float)
                    e = e[np.isfinite(e)]
                    a = np.abs(e)
                    r.update({f"{k}_median_abs": float(np.median(a)) if a.size else math.nan,
                              f"{k}_p90_abs": float(np.percentile(a, 90)) if a.size else math.nan,
                              f"{k}_bias": float(np.median(e)) if e.size else math.nan,
                              f"{k}_within_25": float(np.mean(a <= 0.25)) if a.size else math.nan,
                              f"{k}_above": int(np.sum(e > 0.0))})  # predicted above measured
                    if mode == "roofline" and {f"bound_{k}_ms", f"measured_{k}_ms"} <= set(g.columns):
                        r[f"bound_{k}_above"] = _above(g, "bound", k)
                rows.append(r)
    return pd.DataFrame(rows)


def _above(g, pre: str, k: str) -> int:
    """The points whose `pre` time (the bound) is above the measured one."""
    got, meas = g[f"{pre}_{k}_ms"].to_numpy(float), g[f"measured_{k}_ms"].to_numpy(float)
    return int(np.sum(np.isfinite(got) & np.isfinite(meas) & (got > meas)))


def coverage(points) -> dict:
    """Rows predicted in every mode, and the reasons of the others counted (a row's first reason, mode by mode)."""
    ok = points.groupby("id", sort=False)["status"].agg(lambda x: bool((x == "ok").all()))
    first = points.drop_duplicates("id")
    skipped = points[points["status"] != "ok"].drop_duplicates("id")
    reasons = skipped["reason"].str.replace(r"\d[\d.e+]* B\b", "N B", regex=True).value_counts()
    return {"rows": len(first), "predicted": int(ok.sum()),
            "assumed": int((first["assumed"] != "").sum()), "skipped": {str(k): int(v) for k, v in reasons.items()}}


def load_points(path):
    """A per-point table written by `validate --serving -o` (to summarize or compare without simulating)."""
    from ..fileio import read_csv_capped

    t = read_csv_capped(path, str(path), 8 * MAX_FILE_BYTES, "points table",
                        dtype={"id": str, "backend_version": str, "reason": str, "assumed": str, "workers": str,
                               "speculative": str, "moe_backend": str}, keep_default_na=False, na_values=[""])
    need = ("id", "mode", "status", "backend", "system", "model_path", "serving_mode", "band", "reason", "assumed",
            "measured_ttft_ms", "measured_tpot_ms", "predicted_ttft_ms", "predicted_tpot_ms", "ttft_error", "tpot_error")
    missing = [c for c in need if c not in t.columns]
    if missing:
        raise SpecError(str(path), missing[0], "missing column (write the table with `perfmodel validate --serving -o`)")
    for c in ("reason", "assumed", "band", "moe_backend"):
        t[c] = t[c].fillna("") if c in t else ""
    return t


def compare(points, peer_path) -> "pd.DataFrame":
    """perfmodel's errors beside a peer's on the points both predicted: the peer's per-point CSV has id,
    aic_ttft_ms and aic_tpot_ms (bench/aic_silicon.py writes AIConfigurator's). One row per category and group:
    points both predicted, and per estimator median |error|, p90 |error|, bias and the share within +-25%."""
    import pandas as pd

    from ..fileio import read_csv_capped

    peer = read_csv_capped(peer_path, str(peer_path), 8 * MAX_FILE_BYTES, "peer CSV", dtype={"id": str})
    for c in ("id", "aic_ttft_ms", "aic_tpot_ms"):
        if c not in peer.columns:
            raise SpecError(str(peer_path), c, "missing column (bench/aic_silicon.py writes id, aic_ttft_ms, aic_tpot_ms)")
    peer = peer[["id", "aic_ttft_ms", "aic_tpot_ms"]].drop_duplicates("id")
    ok = with_deployment(points[points["status"] == "ok"])
    est = {m: ok[ok["mode"] == m] for m in ok["mode"].unique()}
    rows = []
    base = next(iter(est.values())) if est else ok
    j = base.merge(peer, on="id", how="inner")
    j = j[np.isfinite(j["aic_ttft_ms"]) & np.isfinite(j["aic_tpot_ms"]) & (j["aic_ttft_ms"] > 0) & (j["aic_tpot_ms"] > 0)]
    both = set(j["id"])
    for cat, col in CATEGORIES:
        sub = j if col is None else j
        groups = [("all", sub)] if col is None else list(sub.groupby(col, sort=True))
        for name, g in groups:
            ids = set(g["id"])
            r = {"category": cat, "group": str(name), "points": len(ids)}
            for who, frame, pre in [("aic", g, "aic")] + [(m, e[e["id"].isin(ids)], "predicted") for m, e in est.items()]:
                for k in ("ttft", "tpot"):
                    e = (frame[f"{pre}_{k}_ms"].to_numpy(float) / frame[f"measured_{k}_ms"].to_numpy(float) - 1.0)
                    e = e[np.isfinite(e)]
                    a = np.abs(e)
                    r[f"{who}_{k}_median_abs"] = float(np.median(a)) if a.size else math.nan
                    r[f"{who}_{k}_p90_abs"] = float(np.percentile(a, 90)) if a.size else math.nan
                    r[f"{who}_{k}_bias"] = float(np.median(e)) if e.size else math.nan
                    r[f"{who}_{k}_within_25"] = float(np.mean(a <= 0.25)) if a.size else math.nan
            rows.append(r)
    out = pd.DataFrame(rows)
    out.attrs["peer_rows"] = int(len(peer))
    out.attrs["peer_predicted"] = int(np.sum(np.isfinite(peer["aic_ttft_ms"].to_numpy(float))))
    out.attrs["both"] = len(both)
    return out
