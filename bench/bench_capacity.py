"""How long a capacity search takes (a benchmark, not a test).

    python bench/bench_capacity.py [--model llama-3.1-70b] [--hardware h100-sxm] [--disaggregate]

Cases: one layout (tp=8), every layout of 8 devices, and with --disaggregate every split of them into
prefill and decode pools; default workload and SLOs of `perfmodel capacity` (chat-like lengths, p99 TTFT
1 s and TPOT 50 ms, three seeds). It prints the wall time, the simulations run, the tokens they
generated and the simulated tokens per second; and, for comparison, one trace of the first case
through scheduler.simulate (the per-sequence Python simulator that fastsim replays).
"""
from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from perfmodel.serving import capacity as cap, fastsim  # noqa: E402

_run = fastsim.run
COUNT = {"sims": 0, "tokens": 0}


def _counted(*a, **kw):
    r = _run(*a, **kw)
    COUNT["sims"] += 1
    COUNT["tokens"] += r["generated"]
    return r


def case(label: str, **kw) -> tuple:
    COUNT.update(sims=0, tokens=0)
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table, _ = cap.capacity(max_tokens=10**12, **kw)
    dt = time.perf_counter() - t
    best = max((g for g in table["goodput_rps"] if g == g), default=float("nan"))
    print(f"{label:44s} {dt:8.2f} {COUNT['sims']:5d} {COUNT['tokens']:12,d} {COUNT['tokens'] / dt:12,.0f} "
          f"{best:9.4g}")
    return dt, table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llama-3.1-70b")
    ap.add_argument("--hardware", default="h100-sxm")
    ap.add_argument("--disaggregate", action="store_true")
    a = ap.parse_args()
    fastsim.run = _counted
    cap.fastsim.run = _counted
    print(f"{a.model} on {a.hardware}; default workload and SLOs of `perfmodel capacity`")
    print(f"{'case':44s} {'seconds':>8s} {'sims':>5s} {'tokens':>12s} {'tokens/s':>12s} {'best rps':>9s}")
    case("one layout (tp=8), 3 seeds", model=a.model, hardware=a.hardware, tp=8)
    case("every layout of 8 devices (--gpus 8)", model=a.model, hardware=a.hardware, gpus=8)
    if a.disaggregate:
        case("--gpus 8 --disaggregate", model=a.model, hardware=a.hardware, gpus=8, disaggregate=True)
    fastsim.run = _run
    # the same first trace through the per-sequence simulator, for scale
    from perfmodel.ops import Layout, Precision
    from perfmodel.serving import StepCost, make_traffic, simulate
    from perfmodel.specs import load_hardware, load_model

    m, hw = load_model(a.model), load_hardware(a.hardware)
    lay = Layout(8, 1, 1, 1)
    wl = cap.Workload(cap.DEFAULT_PROMPT, cap.DEFAULT_OUTPUT, "1s", "50ms", 99, 1, 0, None, 0.05)
    inst = cap.Instance(m, hw, Precision(), lay, "roofline", None, 16, cap.BUDGET, cap.SLOTS, 16)
    an = cap.analytic(inst, wl)
    n = cap.trace_length(wl, an)
    tr = make_traffic(n, an["rate"] / 1.15, None, cap.DEFAULT_PROMPT, cap.DEFAULT_OUTPUT, 1, 0, 0)
    for label, fn in (("scheduler.simulate", lambda: simulate(m, hw, tr, "continuous", cap.SLOTS, "paged", 16, True,
                                                                  "chunked", cap.BUDGET, layout=lay,
                                                                  cost=StepCost(m, hw, Precision(), 16, lay))),
                      ("fastsim.run (cold step cost)", lambda: fastsim.run(
                          tr.arrival, tr.prompt, tr.outputs[:, 0], inst.sizes,
                          fastsim.FastCost(StepCost(m, hw, Precision(), 16, lay), cap.BUDGET), cap.SLOTS, cap.BUDGET))):
        t = time.perf_counter()
        fn()
        print(f"one trace of {n} requests at {an['rate'] / 1.15:.3g}/s, {label:30s} {time.perf_counter() - t:6.2f} s")


if __name__ == "__main__":
    main()
