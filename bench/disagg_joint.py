"""Benchmark: the disaggregated loop simulated jointly (Disaggregated.joint) against the pooled balance
(Disaggregated.pooled), error and cost side by side, per band of clients: the evidence for JOINT_CLIENTS.

    python bench/disagg_joint.py [--per-band 6] [--seed 1] [--mode achievable] [-o out.csv]

Takes a sample of the predicted disaggregated points of docs/validation/serving/points.csv in each band of
concurrency (1-4, 5-16, 17-64, 65-128, 129-512, 513-1024, >1024), prices each point both ways on one core (fresh
caches), and prints per band the median |TTFT error| and |TPOT error| of each against the measured run and the mean
seconds a point. The run recorded in docs/validation.md ("Today's errors", twenty-sixth session) is its output.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

POINTS = ROOT / "docs" / "validation" / "serving" / "points.csv"
BANDS = ((1, 4), (5, 16), (17, 64), (65, 128), (129, 512), (513, 1024), (1025, 1 << 30))


def both(mode: str, p: dict) -> dict:
    """One point priced by the joint loop and by the pooled balance, each on a fresh Predictor (no shared cache)."""
    from perfmodel.serving import silicon as S

    out = {}
    for how in ("joint", "pooled"):
        t0 = time.perf_counter()
        o = S.Predictor(mode).disagg(p, how)
        out[how] = (o["ttft_s"] * 1e3, o["tpot_s"] * 1e3, time.perf_counter() - t0)
    return out


def main() -> int:
    import pandas as pd

    from perfmodel.errors import SpecError
    from perfmodel.fileio import atomic_path, check_writable
    from perfmodel.serving import silicon as S
    from perfmodel.serving.silicon_plan import load

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-band", type=int, default=6)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--mode", choices=("achievable", "roofline"), default="achievable")
    ap.add_argument("-o", "--out", default=None, help="CSV of the points (written atomically)")
    a = ap.parse_args()
    if a.per_band < 1:
        print("disagg_joint: --per-band must be at least 1", file=sys.stderr)
        return 2
    try:
        if a.out:
            check_writable(a.out)  # up front, not after the simulations
    except SpecError as e:
        print(f"disagg_joint: {e}", file=sys.stderr)
        return 2
    pts = pd.read_csv(POINTS, keep_default_na=False, na_values=[""], low_memory=False)
    pts = pts[(pts["mode"] == a.mode) & (pts["status"] == "ok") & (pts["serving_mode"] == "disagg")]
    pick = []
    for lo, hi in BANDS:
        g = pts[(pts["concurrency"] >= lo) & (pts["concurrency"] <= hi)]
        pick.append(g.sample(min(len(g), a.per_band), random_state=a.seed).assign(band=f"{lo}-{hi}"))
    pts = pd.concat(pick)
    sample = load()
    plans = {p["id"]: p for p in S.plan(sample[sample["id"].isin(set(pts["id"]))]) if p["status"] == "ok"}
    rows = []
    for _, row in pts.iterrows():
        p = plans.get(row["id"])
        if p is None:
            continue
        r = both(a.mode, p)
        rows.append({"id": row["id"], "band": row["band"], "concurrency": row["concurrency"],
                     "measured_ttft_ms": row["measured_ttft_ms"], "measured_tpot_ms": row["measured_tpot_ms"],
                     **{f"{k}_{q}": v for k, t in r.items() for q, v in zip(("ttft_ms", "tpot_ms", "s"), t)}})
        print(f"{row['id']}: measured {row['measured_ttft_ms']:.0f} ms, joint {r['joint'][0]:.0f} ms "
              f"({r['joint'][2]:.1f} s), pooled {r['pooled'][0]:.0f} ms ({r['pooled'][2]:.1f} s)", flush=True)
    t = pd.DataFrame(rows)
    med = lambda x: float(np.median(np.abs(x)))  # noqa: E731
    for k in ("joint", "pooled"):
        for q in ("ttft", "tpot"):
            t[f"{k}_{q}_error"] = (t[f"{k}_{q}_ms"] - t[f"measured_{q}_ms"]) / t[f"measured_{q}_ms"]
    by = t.groupby("band", sort=False).agg(
        n=("id", "size"), ttft_joint=("joint_ttft_error", med), ttft_pooled=("pooled_ttft_error", med),
        tpot_joint=("joint_tpot_error", med), tpot_pooled=("pooled_tpot_error", med),
        s_joint=("joint_s", "mean"), s_pooled=("pooled_s", "mean"),
        joint_over_pooled=("joint_ttft_ms", "sum"))
    by["joint_over_pooled"] = (t.groupby("band", sort=False)
                               .apply(lambda g: float(np.median(g["joint_ttft_ms"] / g["pooled_ttft_ms"]))))
    print(by.to_string(float_format=lambda v: f"{v:.3f}"))
    if a.out:
        try:
            with atomic_path(a.out) as tmp:
                t.to_csv(tmp, index=False, float_format="%.6g")
        except SpecError as e:
            print(f"disagg_joint: {e}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("disagg_joint: interrupted, nothing written", file=sys.stderr)
        sys.exit(130)
