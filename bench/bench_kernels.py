"""Measured kernel tables against the datasheet model, side by side on the paths users call (issue 23):

- one CLI decode query with the default profile (graphs) and with an engine profile (vllm-0.24), the
  engine's first run (building the tables from AIConfigurator's Parquet files) and a later one (from the
  disk cache);
- a 1,000 x 1,000 decode grid in the API, both profiles.

    python bench/bench_kernels.py          # prints a table; results in bench/results/kernels-<date>.json

Wall time on this machine as it is (the load average is recorded). Needs the kernels extra.
"""
from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cli(args: list[str], env: dict) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "perfmodel.cli", *args], check=True, capture_output=True, env=env)
    return time.perf_counter() - t


def main() -> None:
    sys.path.insert(0, str(ROOT))
    import numpy as np

    from perfmodel import engine, kernels
    from perfmodel.specs import load_hardware, load_model

    if kernels.aic_dir() is None:
        sys.exit("bench_kernels: the kernels extra is not installed (pip install \"perfmodel[kernels]\")")
    out: dict = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "load": os.getloadavg()}
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, PERFMODEL_CACHE=cache)
        q = ["decode", "--mode", "achievable"]
        out["cli_graphs_s"] = min(cli(q, env) for _ in range(3))
        out["cli_vllm_first_s"] = cli([*q, "--impl", "vllm-0.24"], env)
        out["cli_vllm_cached_s"] = min(cli([*q, "--impl", "vllm-0.24"], env) for _ in range(3))
    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    B, S = np.arange(1, 1001.0), np.linspace(128, 32768, 1000)
    for impl in ("graphs", "vllm-0.24"):
        engine.evaluate(m, hw, B[:2], S[:2], "decode", "achievable", impl=impl)  # warm: tables and probes
        best = min((lambda t0: (engine.evaluate(m, hw, B, S, "decode", "achievable", impl=impl),
                                time.perf_counter() - t0)[1])(time.perf_counter()) for _ in range(3))
        out[f"grid_1e6_{impl}_s"] = best
    for k, v in out.items():
        print(f"{k:24s} {v if isinstance(v, str) else (v if isinstance(v, tuple) else f'{v:.3f}')}")
    res = ROOT / "bench" / "results" / f"kernels-{datetime.date.today()}.json"
    res.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {res.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
