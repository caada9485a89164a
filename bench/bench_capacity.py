"""How long a capacity search takes, as a user runs it (a benchmark, not a test): issue 24's table.

    python bench/bench_capacity.py [--workers 1,2] [--quick] [--json bench/results/capacity-DATE.json]

Each case is the CLI command a user types, run in a fresh process (process start included), once per
--workers value; the simulated tokens per second come from the same searches run in this process with a
counter on fastsim.run (one worker). Cases (issue 24's targets):

| case | target |
|---|---|
| `capacity -m llama-3.1-8b -H h100-sxm` (default workload) | <= 3 s |
| `capacity -m llama-3.1-70b -H h100-sxm --gpus 8` (every layout) | <= 15 s |
| the same with `--disaggregate` | <= 30 s |
| `serve-sim` 100k requests, 64 slots (continuous batching) | <= 10 s |
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CASES = [
    ("8B, 1 H100, default workload", ["capacity", "-m", "llama-3.1-8b", "-H", "h100-sxm"], 3.0,
     dict(model="llama-3.1-8b", hardware="h100-sxm")),
    ("70B, 8 GPUs, all layouts", ["capacity", "-m", "llama-3.1-70b", "-H", "h100-sxm", "--gpus", "8"], 15.0,
     dict(model="llama-3.1-70b", hardware="h100-sxm", gpus=8)),
    ("70B, 8 GPUs, all layouts, --disaggregate",
     ["capacity", "-m", "llama-3.1-70b", "-H", "h100-sxm", "--gpus", "8", "--disaggregate"], 30.0,
     dict(model="llama-3.1-70b", hardware="h100-sxm", gpus=8, disaggregate=True)),
    ("serve-sim 100k requests, 64 slots",
     ["serve-sim", "--policy", "continuous", "--requests", "100000", "--slots", "64"], 10.0, None),
]


def cli(argv: list, workers: str) -> tuple[float, int, str]:
    extra = ["--workers", workers] if argv[0] == "capacity" else []
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "perfmodel", *argv, *extra, "--max-tokens", "10000000000"],
                       capture_output=True, text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    return time.perf_counter() - t, p.returncode, (p.stderr.strip().splitlines() or [""])[-1]


def simulated(kw: dict) -> tuple[int, int]:
    """(simulations, generated tokens) of the search, counted in this process."""
    from perfmodel.serving import capacity as cap, fastsim

    run, count = fastsim.run, {"sims": 0, "tokens": 0}

    def counted(*a, **k):
        r = run(*a, **k)
        count["sims"] += 1
        count["tokens"] += r["generated"]
        return r

    fastsim.run = cap.fastsim.run = counted
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cap.capacity(max_tokens=10**13, workers=1, **kw)
    finally:
        fastsim.run = cap.fastsim.run = run
    return count["sims"], count["tokens"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", default="1,2", help="comma list of --workers values to time")
    ap.add_argument("--quick", action="store_true", help="only the first case")
    ap.add_argument("--json", default=None, help="also write the results here")
    a = ap.parse_args()
    out = []
    print(f"{'case':44s} {'target':>7s} " + " ".join(f"{'w=' + w:>9s}" for w in a.workers.split(","))
          + f" {'sims':>5s} {'tokens':>12s} {'tok/s (w=1)':>12s}")
    for label, argv, target, kw in CASES[:1] if a.quick else CASES:
        times = {}
        for w in a.workers.split(","):
            dt, rc, last = cli(argv, w)
            times[w] = dt if rc == 0 else f"exit {rc}: {last}"
        sims = toks = 0
        if kw is not None:
            sims, toks = simulated(kw)
        w1 = times.get("1")
        rate = toks / w1 if isinstance(w1, float) and toks else float("nan")
        print(f"{label:44s} {target:6.0f}s " + " ".join(f"{v:8.2f}s" if isinstance(v, float) else f"{v[:9]:>9s}"
                                                       for v in times.values())
              + f" {sims:5d} {toks:12,d} {rate:12,.0f}")
        out.append({"case": label, "argv": argv, "target_s": target, "seconds": times, "sims": sims,
                    "tokens": toks, "tokens_per_s_one_worker": rate})
    if a.json:
        Path(a.json).write_text(json.dumps({"date": time.strftime("%Y-%m-%d %H:%M"), "cores": os.cpu_count(),
                                            "results": out}, indent=1))


if __name__ == "__main__":
    main()
