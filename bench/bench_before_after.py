"""The paths users call, timed in two trees side by side in one run: this tree and a commit before a change.

    git worktree add /tmp/before <rev>
    python bench/bench_before_after.py /tmp/before [--runs 3]

Each command runs as a fresh `python -m perfmodel.cli` process with PYTHONPATH on one tree, the two trees
alternating run by run so that the machine's load falls on both alike. The best wall time of the runs is
printed per tree (a benchmark, not a test: nothing fails on a number).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = [
    ["decode", "-m", "llama-3.1-8b"],
    ["decode", "-m", "deepseek-v3", "-H", "h200", "--tp", "8", "--mode", "achievable", "--impl", "sglang-0.5"],
    ["prefill", "-m", "deepseek-v3", "-H", "h200", "--tp", "8", "--mode", "achievable", "--impl", "sglang-0.5"],
    ["sweep", "-m", "llama-3.1-8b,llama-3.1-70b", "-H", "h100-sxm,h200", "--batch", "1:4096:1", "--context",
     "128:131072:x2", "-o", "{tmp}/sweep.csv"],
    ["serve-sim", "--requests", "20000", "--slots", "64", "--policy", "continuous"],
    ["serve-sim", "-m", "llama-3.1-8b", "--concurrency", "32", "--policy", "continuous", "--prompt-len",
     "uniform:512,4096", "--output-len", "256", "--token-budget", "8192", "--mode", "achievable", "--impl",
     "trtllm-1.3"],
    # 12 disaggregated serving rows (DeepSeek-R1 on H200 under TensorRT-LLM: the recipes' prefill and decode pools),
    # written to {tmp} from the shipped sample by disagg_sample()
    ["validate", "--serving", "--sample", "{tmp}/disagg12.csv", "--mode", "achievable", "--jobs", "1", "-o",
     "{tmp}/disagg12-out.csv"],
]
DISAGG_IDS = "2026_03_25_deepseek_r1_h200_sxm_trtllm_fp8_disagg_1024x1024_c"


def disagg_sample(tmp: str) -> None:
    """The first 12 rows of the shipped silicon sample whose id starts with DISAGG_IDS, as a sample of their own."""
    import csv

    src = ROOT / "perfmodel" / "measure" / "data" / "aiconfigurator" / "silicon_sample.csv"
    with open(src, newline="", encoding="utf-8") as f:
        r = csv.DictReader(f)
        rows = [row for row in r if row["id"].startswith(DISAGG_IDS)][:12]
        fields = r.fieldnames
    with open(os.path.join(tmp, "disagg12.csv"), "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)


def one(tree: Path, cmd: list, tmp: str) -> float:
    env = dict(os.environ, PYTHONPATH=str(tree))
    args = [sys.executable, "-m", "perfmodel.cli"] + [a.format(tmp=tmp) for a in cmd]
    t = time.perf_counter()
    p = subprocess.run(args, env=env, cwd=tmp, capture_output=True, text=True)
    dt = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"{tree}: {' '.join(cmd)} failed: {p.stderr.strip().splitlines()[-1:]}")
    return dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("before", type=Path)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}")
    print("| command | before | after |\n|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        disagg_sample(tmp)
        for cmd in COMMANDS:
            t = {a.before: [], ROOT: []}
            for _ in range(a.runs):
                for tree in (a.before, ROOT):
                    t[tree].append(one(tree, cmd, tmp))
            print(f"| `perfmodel {' '.join(cmd).replace('{tmp}/', '')}` | {min(t[a.before]):.2f} s | "
                  f"{min(t[ROOT]):.2f} s |", flush=True)


if __name__ == "__main__":
    main()
