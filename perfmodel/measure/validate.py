"""Validation: the engine predicts every measured case that calibration did not use.

error = predicted / measured - 1 (signed: negative means the engine is too optimistic). Per case
family and over all cases: the median and the 90th percentile of |error| (numpy's default linear
interpolation between order statistics).
"""
from __future__ import annotations

import numpy as np

from ..engine import op_times
from ..specs import Hardware
from . import cases as C


def validate(results: dict, hw: Hardware, overhead: bool = True, passes: bool = True, kv: bool = True) -> dict:
    """Columns case, family, predicted_s, measured_s, error over the validation cases, in run order.

    overhead=False predicts without the spec's kernel_overhead, passes=False without its
    gemm_weight_passes and attention_kv_passes, kv=False without its attention_kv_passes alone (attention
    then pays gemm_weight_passes): to show what each calibrated term buys.
    """
    hw = without(hw, overhead, passes, kv)
    rows = [r for r in results["cases"] if r["family"] in C.VALIDATION]
    pred = np.array([C.predict(C.from_record(r), hw) for r in rows], dtype=float)
    meas = np.array([r["median_s"] for r in rows], dtype=float)
    return {"case": [r["case"] for r in rows], "family": [r["family"] for r in rows],
            "predicted_s": pred, "measured_s": meas, "error": pred / meas - 1.0}


def without(hw: Hardware, overhead: bool = True, passes: bool = True, kv: bool = True) -> Hardware:
    """hw less the calibrated terms switched off."""
    if not kv:
        hw = hw.replace(attention_kv_passes=None)
    if not overhead:
        hw = hw.replace(kernel_overhead=None)
    if not passes:
        hw = hw.replace(gemm_weight_passes=None, attention_kv_passes=None)
    return hw


def stats(errors) -> tuple[float, float]:
    """(median, p90) of |error|; NaN for no cases."""
    a = np.abs(np.asarray(errors, dtype=float))
    if a.size == 0:
        return float("nan"), float("nan")
    return float(np.median(a)), float(np.percentile(a, 90))


def by_family(table: dict) -> dict:
    """Columns family, cases, median_abs_error, p90_abs_error: one row per family, then 'all'."""
    fam = np.asarray(table["family"], dtype=object)
    err = np.asarray(table["error"], dtype=float)
    names = [f for f in C.VALIDATION if np.any(fam == f)] + ["all"]
    out = {"family": names, "cases": [], "median_abs_error": [], "p90_abs_error": []}
    for f in names:
        e = err if f == "all" else err[fam == f]
        med, p90 = stats(e)
        out["cases"].append(int(e.size))
        out["median_abs_error"].append(med)
        out["p90_abs_error"].append(p90)
    return {k: np.asarray(v, dtype=object if k == "family" else float) for k, v in out.items()}


def as_json(table: dict) -> dict:
    """{"cases": [{case, family, predicted_s, measured_s, error}, ...], "median_abs_error", "p90_abs_error"}."""
    med, p90 = stats(table["error"])
    cases = [{"case": c, "family": f, "predicted_s": float(p), "measured_s": float(m), "error": float(e)}
             for c, f, p, m, e in zip(table["case"], table["family"], table["predicted_s"], table["measured_s"],
                                      table["error"])]
    return {"cases": cases, "median_abs_error": med, "p90_abs_error": p90}


def op_breakdown(results: dict, hw: Hardware, case: str) -> dict:
    """Where a decode case's time goes: per op name (all layers), measured (the op-by-op profile the
    CPU backend records) against the engine's roofline time. Columns op, measured_s, predicted_s, ratio."""
    rec = next((r for r in results["cases"] if r["case"] == case), None)
    if rec is None or "op_profile_s" not in rec:
        have = [r["case"] for r in results["cases"] if "op_profile_s" in r]
        raise ValueError(f"no op profile for {case!r}; cases with one: {', '.join(have) or 'none'}")
    ops, prec = C.case_ops(C.from_record(rec))
    pred: dict = {}
    for op, (_, _, t) in zip(ops, op_times(ops, hw, prec)):
        pred[op.name] = pred.get(op.name, 0.0) + float(t) * op.count
    names = list(rec["op_profile_s"])
    meas = np.array([rec["op_profile_s"][n] for n in names])
    p = np.array([pred[n] for n in names])
    return {"op": names, "measured_s": meas, "predicted_s": p, "ratio": meas / p}


def load_report(results, hardware=None, overhead: bool = True, passes: bool = True) -> dict:
    """`as_json` of a results folder (or results.json) predicted on its measured.yaml (or `hardware`),
    plus the measured device's name: what `perfmodel plot validation --results` draws."""
    from .suite import resolve

    data, hw = resolve(results, hardware)
    return {**as_json(validate(data, hw, overhead, passes)), "device": data["meta"].get("device", "")}
