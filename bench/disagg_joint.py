"""Experiment: the disaggregated closed loop simulated jointly, against the pooled balance the validation uses.

The validation prices a disaggregated point (perfmodel/serving/silicon_disagg.py) as two pools in a steady state
(Little's law per pool): below one client a prefill worker sees one prompt at a time. With prompts of one length and
a closed loop, the clients can instead stay in step (a batch of prompts prefilled together is decoded together,
finishes together, and sends its next prompts together). This script simulates the whole loop from empty for
AIPerf's 20 rounds: the prefill worker(s) (fastsim "separate", as the validation's prefill pool), the transfer, the
decode worker(s) (fastsim prefilled), and each client's next request when its last one is done. The two are
coupled by fixed-point iteration on the send times: iteration k fixes round k exactly (causality), so it stops
after at most rounds + 1 iterations. Workers take requests round robin in sending order.

    python bench/disagg_joint.py [--max-concurrency 16] [--per-backend 25] [--seed 1] [-o out.csv]

Takes the achievable disaggregated points of docs/validation/serving/points.csv with at most that many clients,
a sample of each backend, and prints the median |TTFT error| of the validation's prediction (the points.csv row)
and of the joint loop, per backend. About 8 s a point on one core. Results (docs/validation.md, "Today's
errors", twenty-fifth session): 56 points, 57.0% -> 47.9%; the rest of the gap is not synchronisation.
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


def joint(pr, p: dict, rounds: int) -> tuple[float, float, int]:
    """Mean TTFT and TPOT (s) over the `rounds` x N requests of the jointly simulated loop, and the iterations."""
    from perfmodel.serving import fastsim
    from perfmodel.serving.silicon_plan import spread_lengths

    s = pr.stages(p)
    pre, dec, move, N, Wp, Wd = s["pre"], s["dec"], s["move"], p["concurrency"], p["prefill_workers"], p["decode_workers"]
    isl, osl, tokens, spread = p["isl"], s["osl"], s["tokens"], s["spread"]
    total = rounds * N
    P = np.full(total, isl, dtype=np.int64) if spread is None else spread_lengths(isl, spread, total, 1)
    O = (np.full(total, osl, dtype=np.int64) if spread is None or osl <= 1
         else spread_lengths(osl, spread, total, 2))
    send = np.full(total, np.inf)
    send[:N] = 0.0  # the profiling phase opens on an empty server with N prompts sent at once
    for it in range(1, rounds + 2):
        known = np.flatnonzero(np.isfinite(send))
        order = known[np.argsort(send[known], kind="stable")]
        done_p = np.full(total, np.inf)
        for w in range(Wp):
            idx = order[w::Wp]
            r = fastsim.run(send[idx], P[idx], np.ones(idx.size, dtype=np.int64), pre.sizes, pre.cost, s["pslots"],
                            pre.budget, "separate", pre.block)
            done_p[idx] = r["done"]
        arr = done_p + move
        order = known[np.argsort(arr[known], kind="stable")]
        first, last, done = (np.full(total, np.inf) for _ in range(3))
        for w in range(Wd):
            idx = order[w::Wd]
            r = fastsim.run(arr[idx], P[idx], O[idx], dec.sizes, dec.cost, s["slots"], dec.budget, "chunked",
                            dec.block, prefilled=True, recv=s["recv"], ahead=s["ahead"])
            first[idx], last[idx], done[idx] = r["first"], r["last"], r["done"]
        new = send.copy()
        new[N:] = done[:-N]  # client j's next request is sent when its last one is done
        if np.array_equal(new, send):
            break
        send = new
    gap = np.maximum(O - 1, 1) if spread is not None else max(tokens - 1, 1)
    tpot = np.where(O > 1, (last - first) / gap, np.nan)
    return float(np.mean(first - send)), float(np.nanmean(tpot)), it


def main() -> int:
    import pandas as pd

    from perfmodel.errors import SpecError
    from perfmodel.fileio import atomic_path, check_writable
    from perfmodel.serving import silicon as S
    from perfmodel.serving.silicon_plan import PROFILE_ROUNDS, load

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-concurrency", type=int, default=16)
    ap.add_argument("--per-backend", type=int, default=25)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-o", "--out", default=None, help="CSV of the points (written atomically)")
    a = ap.parse_args()
    if a.max_concurrency < 1 or a.per_backend < 1:
        print("disagg_joint: --max-concurrency and --per-backend must be at least 1", file=sys.stderr)
        return 2
    try:
        if a.out:
            check_writable(a.out)  # up front, not after the simulations
    except SpecError as e:
        print(f"disagg_joint: {e}", file=sys.stderr)
        return 2
    pts = pd.read_csv(POINTS, keep_default_na=False, na_values=[""])
    pts = pts[(pts["mode"] == "achievable") & (pts["status"] == "ok") & (pts["serving_mode"] == "disagg")
              & (pts["concurrency"] <= a.max_concurrency)]
    pts = pd.concat([g.sample(min(len(g), a.per_backend), random_state=a.seed) for _, g in pts.groupby("backend")])
    sample = load()
    plans = {p["id"]: p for p in S.plan(sample[sample["id"].isin(set(pts["id"]))]) if p["status"] == "ok"}
    pr = S.Predictor("achievable")
    rows = []
    for _, row in pts.iterrows():
        p = plans.get(row["id"])
        if p is None:
            continue
        t0 = time.perf_counter()
        ttft, tpot, it = joint(pr, p, p.get("profile", PROFILE_ROUNDS))
        rows.append({"id": row["id"], "backend": row["backend"], "concurrency": row["concurrency"],
                     "measured_ttft_ms": row["measured_ttft_ms"], "predicted_ttft_ms": row["predicted_ttft_ms"],
                     "joint_ttft_ms": ttft * 1e3, "measured_tpot_ms": row["measured_tpot_ms"],
                     "predicted_tpot_ms": row["predicted_tpot_ms"], "joint_tpot_ms": tpot * 1e3, "iterations": it})
        print(f"{row['id']}: measured {row['measured_ttft_ms']:.0f} ms, pooled {row['predicted_ttft_ms']:.0f} ms, "
              f"joint {ttft * 1e3:.0f} ms ({it} iterations, {time.perf_counter() - t0:.1f} s)", flush=True)
    t = pd.DataFrame(rows)
    for k in ("predicted", "joint"):
        t[f"{k}_error"] = (t[f"{k}_ttft_ms"] - t["measured_ttft_ms"]) / t["measured_ttft_ms"]
    med = lambda x: float(np.median(np.abs(x)))  # noqa: E731
    by = t.groupby("backend").agg(n=("id", "size"), pooled=("predicted_error", med), joint=("joint_error", med))
    print(by.to_string(float_format=lambda v: f"{v:.3f}"))
    print(f"all {len(t)} points: median |TTFT error| pooled {med(t['predicted_error']):.3f}, "
          f"joint {med(t['joint_error']):.3f}")
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
