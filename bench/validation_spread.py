"""Run-to-run spread of the measured validation: `perfmodel measure --quick` N times, each calibrated on
its own measurements, and the median / p90 of |error| per family for every run.

    python bench/validation_spread.py --runs 5 --out /tmp/spread [--device cpu]

Each run is saved in OUT/run-K/ (results, measured.yaml), so `perfmodel validate OUT/run-K` re-derives
its row. Prints a markdown table, one row per run, then the median over the runs.
"""
from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FAMILIES = ("sweep", "attention", "decode", "all")


def one(device: str, out: Path) -> dict:
    M = importlib.import_module("perfmodel.measure")
    from perfmodel.measure.calibrate import calibrate, model_yaml
    from perfmodel.measure.validate import by_family, validate

    res = M.run_suite(M.backend(device), "quick")
    paths = M.write(res, out)
    text, hw, _ = calibrate(res, paths["csv"].name)
    (out / "measured.yaml").write_text(text)
    (out / "decode-model.yaml").write_text(model_yaml(res))
    fam = by_family(validate(res, hw))
    row = {"bandwidth": f"{hw.memory_bandwidth / 1e9:.2f} GB/s", "fp32": f"{hw.peak('fp32') / 1e9:.0f} GFLOP/s",
           "passes": f"{hw.gemm_weight_passes or 1:.2f}", "kv passes": f"{hw.attention_kv_passes or 1:.2f}"}
    for f, med, p90 in zip(fam["family"], fam["median_abs_error"], fam["p90_abs_error"]):
        row[f] = (med, p90)
    row["steal"] = res["meta"].get("steal_share")
    row["wall_s"] = res["meta"]["schedule"]["wall_s"]
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", default="validation-spread")
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    rows = []
    for k in range(1, a.runs + 1):
        t0 = time.perf_counter()
        rows.append(one(a.device, Path(a.out) / f"run-{k}"))
        sys.stderr.write(f"run {k}/{a.runs}: {time.perf_counter() - t0:.0f} s\n")
    head = ["run", "bandwidth", "fp32", "passes", "kv passes", *FAMILIES, "steal", "wall"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    cell = lambda v: f"{v[0]:.1%} / {v[1]:.1%}"  # noqa: E731
    for k, r in enumerate(rows, 1):
        fams = [cell(r[f]) if f in r else "-" for f in FAMILIES]
        steal = f"{r['steal']:.1%}" if r["steal"] is not None else "-"
        print(f"| {k} | {r['bandwidth']} | {r['fp32']} | {r['passes']} | {r['kv passes']} | " + " | ".join(fams)
              + f" | {steal} | {r['wall_s']:.0f} s |")
    med = [cell(tuple(np.median([r[f][i] for r in rows]) for i in (0, 1))) for f in FAMILIES]
    print("| median of runs | | | | | " + " | ".join(med) + " | | |")


if __name__ == "__main__":
    main()
