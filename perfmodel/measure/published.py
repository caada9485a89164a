"""Validation against published end-to-end measurements (perfmodel/measure/published.yaml).

Each case is a measurement someone published (a framework README, a vendor's performance page, a
paper), with its exact setup: model, device, layout, formats, batch, lengths and the framework. The
engine predicts the same metric twice from the same op list:

- mode roofline: the ideal bound. A measured throughput must not exceed it, a measured latency must
  not undercut it; `fraction` is how much of the bound the real system reached (measured / bound for
  throughputs, bound / measured for times: at most 1 when the bound holds).
- mode achievable: the estimate, with the implementation profile the case's framework maps to
  (`impl`); `error` = achievable / measured - 1.

No parameter is fitted to these figures: the achievable terms come from microbenchmark-level
sources (hardware/*.yaml, hardware/impl/*.yaml), and each case's `approximations` says what had to
be assumed to model it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import SpecError
from ..fields import _check_keys, _int, _need, _str

DEFAULT = Path(__file__).with_name("published.yaml")

# metric -> (higher is better, what it is)
METRICS = {
    "tokens_per_s_per_sequence": (True, "generated tokens / wall time of the request (prefill included), batch 1"),
    "decode_tokens_per_s": (True, "generated tokens / decode time (prefill excluded)"),
    "tpot_s": (False, "decode time / generated tokens"),
    "throughput_tokens_per_s": (True, "output tokens per second of the whole layout"),
    "throughput_per_gpu": (True, "output tokens per second per device"),
    "throughput_incl_input": (True, "(prompt + output) tokens per second of the whole batch"),
    "ttft_s": (False, "prefill time of the prompt"),
    "prefill_tokens_per_s": (True, "prompt tokens / prefill time"),
}
WORKLOADS = {"request": ("batch", "prompt", "generate"), "prefill": ("batch", "prompt"),
             "saturated": ("prompt", "generate")}
CASE_KEYS = {"id", "source", "quote", "model", "hardware", "framework", "category", "value", "approximations",
             "independent_of", "weights", "act", "kv", "layout", "impl", "workload", "metric", "sets",
             "quantize_embeddings"}


@dataclass(frozen=True)
class Case:
    id: str
    model: str
    hardware: str
    weights: str
    act: str
    kv: str
    impl: str
    workload: dict
    metric: str
    value: float
    category: tuple
    layout: dict = field(default_factory=dict)
    sets: dict = field(default_factory=dict)
    quantize_embeddings: bool = False
    framework: str = ""
    source: dict = field(default_factory=dict)
    approximations: str = ""


def load_cases(path=None) -> list[Case]:
    """The cases of a published-measurements file (default: the one shipped with perfmodel)."""
    from ..specs import safe_yaml

    p = Path(path) if path else DEFAULT
    shown = str(path) if path else "perfmodel/measure/published.yaml"
    from ..fileio import read_capped

    text = read_capped(p, shown, 16 * 2**20, "measurements YAML (at most 16 MiB)")
    try:
        data = safe_yaml(text)
    except Exception as e:  # noqa: BLE001  a YAML error: one line
        raise SpecError(shown, None, f"not valid YAML: {getattr(e, 'problem', e)}") from None
    if not isinstance(data, list) or not data:
        raise SpecError(shown, None, "expected a YAML list of cases")
    out, seen = [], set()
    for n, c in enumerate(data):
        where = f"{shown}: case {n + 1}"
        if not isinstance(c, dict):
            raise SpecError(where, None, "must be a mapping")
        _check_keys(c, CASE_KEYS, where)
        _need(c, ["id", "model", "hardware", "weights", "act", "impl", "workload", "metric", "value", "category"], where)
        cid = _str(c["id"], where, "id")
        where = f"{shown}: {cid}"
        if cid in seen:
            raise SpecError(where, "id", "appears twice")
        seen.add(cid)
        if c["metric"] not in METRICS:
            raise SpecError(where, "metric", f"must be one of {', '.join(METRICS)}; got {c['metric']!r}")
        w = c["workload"]
        if not isinstance(w, dict) or w.get("kind") not in WORKLOADS:
            raise SpecError(where, "workload", f"must be a mapping with kind one of {', '.join(WORKLOADS)}")
        _check_keys(w, {"kind", *WORKLOADS[w["kind"]]}, where, "workload.")
        _need(w, WORKLOADS[w["kind"]], where, "workload.")
        wl = {"kind": w["kind"], **{k: _int(w[k], where, f"workload.{k}") for k in WORKLOADS[w["kind"]]}}
        v = c["value"]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and v > 0):
            raise SpecError(where, "value", f"must be a positive number, got {v!r}")
        lay = c.get("layout") or {}
        if not isinstance(lay, dict):
            raise SpecError(where, "layout", "must be a mapping {tp, ep, pp}")
        _check_keys(lay, {"tp", "ep", "pp"}, where, "layout.")
        cats = c["category"]
        if not isinstance(cats, list) or not cats or not all(isinstance(x, str) for x in cats):
            raise SpecError(where, "category", "must be a list of tags")
        out.append(Case(cid, str(c["model"]), str(c["hardware"]), str(c["weights"]), str(c["act"]),
                        str(c.get("kv") or c["act"]), str(c["impl"]), wl, c["metric"], float(v), tuple(cats),
                        {k: _int(x, where, f"layout.{k}") for k, x in lay.items()}, dict(c.get("sets") or {}),
                        bool(c.get("quantize_embeddings", False)), str(c.get("framework") or ""),
                        dict(c.get("source") or {}), str(c.get("approximations") or "")))
    return out


def predict(case: Case, mode: str, tm_cache: dict | None = None) -> float:
    """The case's metric from the engine in one mode (roofline or achievable)."""
    from .. import engine
    from ..ops import Layout, Precision
    from ..specs import load_hardware, load_model

    m = load_model(case.model, case.sets)
    hw = load_hardware(case.hardware, case.sets)
    prec = Precision(case.weights, case.act, case.kv, case.quantize_embeddings)
    lay = Layout(case.layout.get("tp", 1), case.layout.get("pp", 1), case.layout.get("ep", 1))
    impl = case.impl if mode == "achievable" else None
    w = case.workload
    if w["kind"] == "prefill":
        r = engine.evaluate(m, hw, w["batch"], w["prompt"], "prefill", mode, prec, layout=lay, impl=impl)
        lat = float(r["latency_s"].ravel()[0])
        B, P = float(w["batch"]), float(w["prompt"])
        return {"ttft_s": lat, "prefill_tokens_per_s": B * P / lat}[case.metric]
    P, G = float(w["prompt"]), float(w["generate"])
    if w["kind"] == "saturated":  # as many sequences as the device memory holds at the final context
        B = float(engine.max_batch(m, hw.memory_capacity, P + G, prec, layout=lay))
        if B < 1:
            raise SpecError(case.id, "workload", f"{m.name} does not fit on {hw.key} with this layout")
    else:
        B = float(w["batch"])
    r = engine.request(m, hw, B, P, int(G), mode, prec, layout=lay, impl=impl)
    lat, dec = float(r["latency_s"].ravel()[0]), float(r["decode_s"].ravel()[0])
    return {"tokens_per_s_per_sequence": G / lat, "decode_tokens_per_s": G / dec, "tpot_s": dec / G,
            "throughput_tokens_per_s": B * G / lat, "throughput_per_gpu": B * G / lat / lay.devices,
            "throughput_incl_input": B * (P + G) / lat}[case.metric]


COLUMNS = ["case", "category", "model", "hardware", "layout", "weights", "impl", "metric", "measured", "bound",
           "achievable", "fraction", "error", "bound_holds"]


def published(path=None, categories=None) -> dict:
    """Per case: the measurement, the roofline bound, the achievable estimate, the fraction of the bound the
    measurement reached, the estimate's error, and whether the bound holds. A dict-of-columns table."""
    cases = load_cases(path)
    if categories:
        want = set(categories)
        cases = [c for c in cases if want & set(c.category)]
        if not cases:
            raise SpecError("--category", None, f"no case has category {', '.join(sorted(want))}")
    rows = {k: [] for k in COLUMNS}
    for c in cases:
        hi, _ = METRICS[c.metric]
        bound, ach = predict(c, "roofline"), predict(c, "achievable")
        frac = c.value / bound if hi else bound / c.value
        lay = "/".join(f"{k}{v}" for k, v in sorted(c.layout.items()) if v != 1) or "1"
        for k, v in (("case", c.id), ("category", ",".join(c.category)), ("model", c.model),
                     ("hardware", c.hardware), ("layout", lay), ("weights", c.weights), ("impl", c.impl),
                     ("metric", c.metric), ("measured", c.value), ("bound", bound), ("achievable", ach),
                     ("fraction", frac), ("error", ach / c.value - 1.0), ("bound_holds", frac <= 1.0 + 1e-9)):
            rows[k].append(v)
    obj = ("case", "category", "model", "hardware", "layout", "weights", "impl", "metric")
    return {k: np.asarray(v, dtype=object if k in obj else (bool if k == "bound_holds" else float))
            for k, v in rows.items()}


def summary(table: dict) -> dict:
    """Per category (a case counts in each of its categories) and over all: cases, median and p90 of
    |error|, the share within +-25%, the range of the fraction of the bound reached, and bound violations."""
    cats: dict = {}
    for i, cs in enumerate(table["category"]):
        for c in str(cs).split(","):
            cats.setdefault(c, []).append(i)
    cats["all"] = list(range(len(table["case"])))
    # predicted faster than measured: a throughput above the measured one, or a time below it
    hi = np.array([METRICS[m][0] for m in table["metric"]], bool)
    err = np.asarray(table["error"], float)
    fast = np.where(hi, err > 0, err < 0)
    rows = {k: [] for k in ("category", "cases", "median_abs_error", "p90_abs_error", "within_25pct", "faster_share",
                            "fraction_min", "fraction_median", "fraction_max", "bound_violations")}
    for c, idx in cats.items():
        e = np.abs(np.asarray(table["error"], float)[idx])
        f = np.asarray(table["fraction"], float)[idx]
        for k, v in (("category", c), ("cases", len(idx)), ("median_abs_error", float(np.median(e))),
                     ("p90_abs_error", float(np.percentile(e, 90))), ("within_25pct", float(np.mean(e <= 0.25))),
                     ("faster_share", float(np.mean(fast[idx]))),
                     ("fraction_min", float(f.min())), ("fraction_median", float(np.median(f))),
                     ("fraction_max", float(f.max())),
                     ("bound_violations", int(np.sum(~np.asarray(table["bound_holds"], bool)[idx])))):
            rows[k].append(v)
    return {k: np.asarray(v, dtype=object if k == "category" else float) for k, v in rows.items()}
