"""Multi-device serving plans: every valid (tp, pp, ep, replicas) layout for N devices, with
per-token latency, throughput per device, memory per device, fit and the Pareto front.

Communication is part of the op list (COMM ops: all-reduces, all-to-alls, pipeline sends), so the
per-op tables show it too; docs/parallelism.md derives each cost.
"""
from __future__ import annotations

import warnings

import numpy as np

from . import engine
from .api import LAYOUT_COLUMNS, PHASE_COLUMNS, _flat, _positive, _prec, check_mode, concat, economics, mode_cols, specs
from .errors import DataWarning, SpecError
from .ops import MAX_GPUS, Layout
from .timemodel import crosses_nodes, missing_data
from .units import parse_quantity




def _factors(n: int) -> dict:
    """Prime factorisation by trial division (2, then odd numbers), stopping at sqrt of what is left."""
    out, d = {}, 2
    while d * d <= n:
        while n % d == 0:
            out[d] = out.get(d, 0) + 1
            n //= d
        d += 1 if d == 2 else 2
    if n > 1:
        out[n] = out.get(n, 0) + 1
    return out


def _divisors(n: int) -> list[int]:
    """Divisors of n in increasing order, built from its prime factorisation."""
    divs = [1]
    for p, e in _factors(n).items():
        divs = [d * p**k for d in divs for k in range(e + 1)]
    return sorted(divs)


def layouts(model, devices: int) -> list[Layout]:
    """All layouts of exactly `devices` devices that the model's heads, layers and experts allow."""
    out = []
    for tp in _divisors(devices):
        if model.N % tp or (model.K % tp and tp % model.K):
            continue
        for ep in _divisors(devices // tp):
            if ep > 1 and (not model.moe or model.moe.n_experts % ep):
                continue
            for pp in _divisors(devices // (tp * ep)):
                if pp <= model.n_layers:
                    out.append(Layout(tp, pp, ep, devices // (tp * ep * pp)))
    return out


def min_devices(model, hw, context, prec, limit: int = 4096) -> tuple[int, Layout] | tuple[None, None]:
    """The fewest devices any layout (one replica) needs to hold the weights and one sequence's KV."""
    total = engine.per_sequence(model, context, prec)["weight_bytes"]
    start = max(1, int(np.floor(float(total) / hw.memory_capacity)))  # n devices hold at most n x capacity
    for n in range(start, limit + 1):
        for lay in layouts(model, n):
            if lay.replicas == 1 and engine.max_batch(model, hw.memory_capacity, context, prec, layout=lay) >= 1:
                return n, lay
    return None, None


def pareto(latency: np.ndarray, per_device: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """Rows not dominated: no other admissible row is at least as fast and at least as efficient,
    and strictly better in one."""
    front = np.zeros(latency.size, dtype=bool)
    idx = np.flatnonzero(ok)
    for i in idx:
        better = (latency[idx] <= latency[i]) & (per_device[idx] >= per_device[i]) & \
                 ((latency[idx] < latency[i]) | (per_device[idx] > per_device[i]))
        front[i] = not better.any()
    return front


def plan(model="llama-3.1-70b", hardware="h100-sxm", gpus=8, context=4096, batch=(1, 8, 32, 128),
         max_latency=None, weights_dtype="bf16", kv_dtype=None, act_dtype="bf16", sets=None, price=None,
         energy=False, mode="roofline", impl=None) -> tuple[dict, dict]:
    """Every layout of `gpus` devices x each batch; returns (rows, summary).

    mode: roofline (ideal bound) or achievable (implementation profile `impl`). A layout whose
    collectives cross nodes on a spec that lacks the data to price them (network_latency; in the
    achievable mode the measured network collectives) is flagged in `missing` and never on the Pareto
    front; layouts that need a network the spec does not have at all are left out (summary["skipped"])."""
    impl = check_mode(mode, impl, ("roofline", "achievable"), sets)
    prec = _prec(weights_dtype, kv_dtype, act_dtype)
    n = int(_positive(gpus, "--gpus")[0])
    if n > MAX_GPUS:
        raise SpecError("--gpus", None, f"{n:,} is over the limit of {MAX_GPUS:,} devices this planner factors")
    B = _positive(batch, "--batch")
    S = float(_positive(context, "--context")[0])
    limit = None
    if max_latency is not None:
        try:
            limit = parse_quantity(max_latency, "s")
        except ValueError as e:
            raise SpecError("--max-latency", None, str(e)) from None
    ms, hws = specs(model, hardware, sets)
    if len(ms) != 1 or len(hws) != 1:
        raise SpecError("-m/-H", None, f"plan takes one model and one hardware (got {len(ms)} and {len(hws)}); run it "
                                       "once per pair, or compare layouts across devices with `perfmodel plot`")
    (m,), (hw,) = ms, hws
    lays = layouts(m, n)
    if not lays:
        raise SpecError("--gpus", None, f"no layout of {n} devices suits {m.name} ({m.N} heads, {m.K} KV heads)")
    tmodel = engine.time_model(mode, hw, impl)
    rows, skipped = [], 0
    for lay in lays:
        if crosses_nodes(hw, lay) and not hw.network_bandwidth:
            skipped += 1
            continue
        gaps = missing_data(hw, lay, mode)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DataWarning)  # said once, in the summary and the `missing` column
            r = engine.evaluate(m, hw, B, S, "decode", mode, prec, layout=lay, tm=tmodel)
        cols = {k: r[k] for k in PHASE_COLUMNS}
        cols.update(mode_cols(mode, impl))
        cols.update(tp=float(lay.tp), pp=float(lay.pp), ep=float(lay.ep), replicas=float(lay.replicas),
                    devices=float(lay.devices), comm_time_s=r["comm_time_s"],
                    throughput_per_device=r["throughput_tok_s"] / lay.devices,
                    crosses_nodes=crosses_nodes(hw, lay), missing=",".join(gaps))
        rows.append(_flat(economics(cols, hw, lay.devices, price, energy)))
    if not rows:
        raise SpecError("--gpus", None, f"every layout of {n} devices crosses nodes, and {hw.key} has no "
                                        "network_bandwidth to join them")
    t = concat(rows)
    ok = t["fits"].astype(bool) & (t["missing"] == "")
    if limit is not None:
        ok &= t["latency_s"] <= limit
    t["pareto"] = pareto(t["latency_s"].astype(float), t["throughput_per_device"].astype(float), ok)
    need, lay = min_devices(m, hw, S, prec)
    flagged = sorted({g for x in t["missing"] for g in str(x).split(",") if g})
    summary = {"model": m.name, "hardware": hw.key, "context": S, "min_devices": need, "mode": mode,
               "min_layout": None if lay is None else f"tp={lay.tp} pp={lay.pp} ep={lay.ep}", "skipped": skipped,
               "warning": (f"{hw.key} lacks {', '.join(flagged)}: layouts whose collectives cross a node of "
                           f"{hw.devices_per_node or 1} are priced on bandwidth only, flagged in `missing` and never "
                           "ranked on the Pareto front") if flagged else None}
    return t, summary


PLAN_COLUMNS = PHASE_COLUMNS + LAYOUT_COLUMNS + ["throughput_per_device", "crosses_nodes", "missing", "pareto"]
