"""How long the serving simulator takes for 10,000 requests (a benchmark, not a test).

    python bench/bench_serving.py [--requests 10000] [--cost-quantum 16]

Each case is the story's traffic (prompts of 512 tokens, outputs lognormal with median 18 and cap
231, Llama 2 13B on one H100 SXM) scaled up, run once per policy. It prints the wall time, the
iterations simulated and how many distinct batch compositions engine.mixed_step had to evaluate
(the rest came from the step-cost cache).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from perfmodel.ops import Precision  # noqa: E402
from perfmodel.serving import StepCost, make_traffic, simulate  # noqa: E402
from perfmodel.specs import load_hardware, load_model  # noqa: E402

CASES = [  # (label, policy, slots, arrival rate, KV manager)
    ("static, 8 slots, all at t=0", "static", 8, None, "paged"),
    ("continuous, 8 slots, all at t=0", "continuous", 8, None, "paged"),
    ("continuous, 8 slots, Poisson 20/s", "continuous", 8, 20.0, "paged"),
    ("continuous, 64 slots, contiguous KV", "continuous", 64, None, "contiguous"),
    ("continuous, KV memory only (no slot limit)", "continuous", None, None, "paged"),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=10_000)
    ap.add_argument("--cost-quantum", type=int, default=16)
    a = ap.parse_args()
    model, hw, prec = load_model("llama-2-13b"), load_hardware("h100-sxm"), Precision()
    print(f"{a.requests} requests, llama-2-13b on h100-sxm, cost quantum {a.cost_quantum} tokens")
    print(f"{'case':44s} {'seconds':>8s} {'iterations':>10s} {'mixed_step':>10s} {'tokens/s':>9s}")
    total = 0.0
    for label, policy, slots, rate, kv in CASES:
        tr = make_traffic(a.requests, rate=rate)
        cost = StepCost(model, hw, prec, a.cost_quantum)  # a cold cache for every case
        t0 = time.perf_counter()
        s = simulate(model, hw, tr, policy, slots, kv, prec=prec, cost=cost).summary
        dt = time.perf_counter() - t0
        total += dt
        print(f"{label:44s} {dt:8.2f} {s['steps']:10d} {cost.calls:10d} {s['throughput_tok_s']:9.1f}")
    print(f"{'total':44s} {total:8.2f}")


if __name__ == "__main__":
    main()
