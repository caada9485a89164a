"""Calibration: a hardware YAML for the measured machine, every number citing the measurement it came from.

- memory_bandwidth: the read-only reduction (bytes read / median time). Inference traffic is
  almost all reads (weights, KV cache), so the read stream is the ceiling that matters; the copy
  (read + write) is reported beside it in the source string.
- peak_flops.<dtype>: the best large-GEMM rate measured in that dtype.
- kernel_overhead: the fixed cost of running one op at all. Each `dispatch` case times one op of a
  tiny decode step (every op of the step, once); the overhead is the mean over them of
  (measured - roofline time on the calibrated ceilings).
- gemm_weight_passes: how many times' worth of the weights' read time a matmul with more than one
  row takes (a BLAS that packs the weight panel before its kernel). Each `skinny` case times one
  X(M x D) . W(D x F) at a few rows, memory-bound, at a shape no validation case uses; inverting
  the engine's time for it, max(FLOPs / peak, bytes / bandwidth) + (passes - 1) * weight bytes /
  bandwidth + kernel_overhead, gives one estimate; the value is their median, floored at 1 (a
  library that streams the weights once, as cuBLAS does).
- attention_kv_passes: the same for the K/V cache that decode attention's per-head products read
  (each KV head serves N/K query rows, so BLAS packs its K and V slices). Each `kv` case times
  decode attention at a shape no validation case uses; the value is the median of the inversions.
No validation case takes part.
- `like`: efficiency factors, measured / datasheet, against a catalog spec (e.g. h100-sxm).

The file loads like any catalog spec (`-H measured.yaml` in every command).
"""
from __future__ import annotations

import numpy as np
import yaml

from ..ops import ATTENTION
from ..specs import Hardware, hardware_from_dict
from . import cases as C


def _best(results: dict, family: str, rate: str, dtype: str | None = None) -> dict | None:
    rows = [r for r in results["cases"] if r["family"] == family and r.get(rate) and (dtype is None or r["dtype"] == dtype)]
    return max(rows, key=lambda r: r[rate]) if rows else None


def _ms(s: float) -> str:
    return f"{s * 1e3:.4g} ms" if s >= 1e-3 else f"{s * 1e6:.4g} us"


def _where(r: dict, raw: str) -> str:
    return f"{raw} case '{r['case']}': median {_ms(r['median_s'])} of {r['repeats']} runs"


def ceilings(results: dict, raw: str = "results.csv") -> dict:
    """The calibrated spec as a YAML mapping (without kernel_overhead), values with units."""
    meta = results["meta"]
    red, cp = _best(results, "reduce", "achieved_bytes_per_s"), _best(results, "copy", "achieved_bytes_per_s")
    if red is None:
        raise ValueError("the results have no reduce case: cannot calibrate the bandwidth")
    when = f"perfmodel measure ({meta.get('preset')}, {meta.get('date_utc')})"
    src = (f"{when}: read-only reduction of {red['bytes'] / 1e9:.4g} GB {red['dtype']}, {_where(red, raw)}"
           + (f"; the copy reached {cp['achieved_bytes_per_s'] / 1e9:.4g} GB/s counting bytes read + written "
              f"({cp['case']})" if cp else ""))
    spec = {"name": f"{meta.get('device', 'this machine')}, measured",
            "description": f"Measured by perfmodel measure on {meta.get('date_utc')} ({meta.get('backend')})",
            "source": f"{when}; raw measurements in {raw} and results.json beside this file",
            "memory_bandwidth": {"value": f"{red['achieved_bytes_per_s'] / 1e9:.6g} GB/s", "source": src}}
    if meta.get("memory_bytes"):
        spec["memory_capacity"] = {"value": f"{meta['memory_bytes'] / 1e9:.6g} GB", "source": meta.get(
            "memory_source", "/proc/meminfo MemTotal")}
    peaks = {}
    for dt in C.ITEMSIZE:
        g = _best(results, "gemm", "achieved_flops_per_s", dt)
        if g:
            peaks[dt] = {"value": f"{g['achieved_flops_per_s'] / 1e9:.6g} GFLOP/s",
                         "source": f"{when}: best large GEMM in {dt}, {_where(g, raw)}"}
    if not peaks:
        raise ValueError("the results have no gemm case: cannot calibrate peak FLOP/s")
    spec["peak_flops"] = peaks
    if meta.get("l2_bytes"):
        spec["l2_cache"] = {"value": f"{meta['l2_bytes']} B", "source": meta.get("l2_source", "device properties")}
    return spec


def kernel_overhead(results: dict, hw: Hardware) -> tuple[float, int]:
    """Mean over dispatch cases of measured - roofline time on hw without its overhead (>= 0 each),
    and how many cases."""
    hw0 = hw.replace(kernel_overhead=None)
    rows = [r for r in results["cases"] if r["family"] == "dispatch"]
    excess = [max(0.0, r["median_s"] - C.predict(C.from_record(r), hw0)) for r in rows]
    return (float(np.mean(excess)) if excess else 0.0), len(rows)


def _passes_of(rec: dict, hw: Hardware) -> dict:
    """One skinny case inverted: the engine's time for it is max(t_compute, bytes / bw) + (passes - 1)
    x weight bytes / bw + kernel_overhead, so passes = 1 + (median - kernel_overhead - roofline time)
    x bw / weight bytes."""
    (op,), _ = C.case_ops(C.from_record(rec))
    ko = hw.kernel_overhead or 0.0
    t = rec["median_s"] - ko
    t_compute = float(op.flops / hw.peak(rec["dtype"]))
    roof = max(t_compute, float(op.bytes) / hw.memory_bandwidth)
    raw = 1.0 + (t - roof) * hw.memory_bandwidth / float(op.w_read)
    return {"raw": raw, "case": rec, "ko": ko, "roof": roof, "w_bytes": float(op.w_read)}


def weight_passes(results: dict, hw: Hardware) -> dict | None:
    """gemm_weight_passes from the skinny cases: each inverted on hw (its bandwidth, peak and
    kernel_overhead; its own gemm_weight_passes is ignored), then the median over them, floored at 1.
    None without a skinny case. Returns the value, the median before the floor and each case's numbers
    (for the YAML's source)."""
    return _median([_passes_of(r, hw) for r in results["cases"] if r["family"] == "skinny"])


def _median(each: list) -> dict | None:
    """The median of the per-case estimates, floored at 1 (None for no cases), with the estimates."""
    if not each:
        return None
    raw = float(np.median([e["raw"] for e in each]))
    return {"value": max(1.0, raw), "raw": raw, "each": each}


def _median_source(w: dict, cases: str, formula: str, line, applies: str) -> str:
    """A fitted term's source string: the formula, the median, and each case's numbers (`line(e)`)."""
    head = f"the median over the {cases} of passes = {formula}, {w['raw']:.3f}" + ("; floored at 1" if w["raw"] < 1 else "")
    return head + ": " + "; ".join(line(e) for e in w["each"]) + f". Applied to {applies}"


def _passes_source(w: dict, hw: Hardware, raw: str) -> str:
    def line(e):
        r, p = e["case"], e["case"]["params"]
        return (f"{p['M']} rows x W({p['D']} x {p['F']}) {r['dtype']} ({_where(r, raw)}): 1 + ({_ms(r['median_s'])} - "
                f"{_ms(e['ko'])} - {_ms(e['roof'])}) x {hw.memory_bandwidth / 1e9:.4g} GB/s / {e['w_bytes'] / 1e6:.4g} MB"
                f" = {e['raw']:.3f}")

    return _median_source(w, "skinny calibration cases", "1 + (median - kernel_overhead - roofline time) x bandwidth / "
                          "weight bytes", line, "every matmul with more than one row (and to attention's K/V read where "
                          "a spec has no attention_kv_passes)")


def kv_passes(results: dict, hw: Hardware) -> dict | None:
    """attention_kv_passes from the kv cases: the engine's time for a kv case is its time with the K/V
    read once plus (passes - 1) x the K/V bytes of its multi-row products / bw, so passes = 1 +
    (median - time with one read) x bw / those bytes, per case; the value is their median, floored at
    1. None without a kv case."""
    once = hw.replace(attention_kv_passes=1.0)
    each = []
    for r in (r for r in results["cases"] if r["family"] == "kv"):
        case = C.from_record(r)
        ops, _ = C.case_ops(case)
        streamed = float(sum(o.kv_read * o.count for o in ops if o.kind == ATTENTION and np.all(np.asarray(o.rows) > 1)))
        t1 = C.predict(case, once)
        raw = 1.0 + (r["median_s"] - t1) * hw.memory_bandwidth / streamed if streamed else 1.0
        each.append({"raw": raw, "case": r, "t1": t1, "kv_bytes": streamed})
    return _median(each)


def _kv_source(w: dict, hw: Hardware, raw: str) -> str:
    def line(e):
        r, p = e["case"], e["case"]["params"]
        return (f"N={p['N']}, K={p['K']}, H={p['H']}, B={p['B']}, S={p['S']} {r['dtype']} ({_where(r, raw)}): 1 + "
                f"({_ms(r['median_s'])} - {_ms(e['t1'])}) x {hw.memory_bandwidth / 1e9:.4g} GB/s / "
                f"{e['kv_bytes'] / 1e6:.4g} MB = {e['raw']:.3f}")

    return _median_source(w, "kv calibration cases (decode attention, unfused)", "1 + (median - the engine's time with "
                          "the K/V read once) x bandwidth / K/V bytes", line,
                          "the K/V read of attention whose query rows share a KV head")


def calibrate(results: dict, raw: str = "results.csv", like: Hardware | None = None) -> tuple[str, Hardware, dict]:
    """The YAML text, the Hardware it loads as, and the efficiency factors against `like` ({} without).

    kernel_overhead, gemm_weight_passes and attention_kv_passes depend on each other a little (a
    dispatch case's matmul and attention ops pay the passes; the skinny and kv cases pay the overhead
    per op): each is re-estimated with the others' latest values, a few times, which converges
    because the coupling is weak.
    """
    spec = ceilings(results, raw)
    hw = hardware_from_dict(spec, "measured.yaml")
    ko, n, w, a = 0.0, 0, None, None
    for _ in range(4):
        w = weight_passes(results, hw.replace(kernel_overhead=ko or None))
        passes = w["value"] if w else None
        a = kv_passes(results, hw.replace(kernel_overhead=ko or None, gemm_weight_passes=passes))
        ko, n = kernel_overhead(results, hw.replace(gemm_weight_passes=passes, attention_kv_passes=a["value"] if a else None))
    if ko > 0:
        spec["kernel_overhead"] = {
            "value": f"{ko * 1e6:.4g} us",
            "source": f"mean over the {n} dispatch cases in {raw} (each one op of a tiny decode step) of measured "
                      "time minus the op's roofline time on the bandwidth and peaks above"}
    if w is not None:
        spec["gemm_weight_passes"] = {"value": round(w["value"], 4), "source": _passes_source(
            w, hardware_from_dict(spec, "measured.yaml"), raw)}
    if a is not None:
        spec["attention_kv_passes"] = {"value": round(a["value"], 4), "source": _kv_source(
            a, hardware_from_dict(spec, "measured.yaml"), raw)}
    hw = hardware_from_dict(spec, "measured.yaml")
    eff = efficiency(hw, like) if like is not None else {}
    head = [f"# {spec['name']}", f"# {spec['description']}",
            "# Every value cites the measurement it came from; load it with -H <this file>."]
    if eff:
        head.append(f"# Efficiency vs {like.name} (measured / datasheet): "
                    + ", ".join(f"{k} {v:.3f}" for k, v in eff.items()))
    text = "\n".join(head) + "\n" + yaml.safe_dump(spec, sort_keys=False, allow_unicode=True, width=100)
    return text, hw, eff


def efficiency(hw: Hardware, like: Hardware) -> dict:
    """measured / datasheet for the bandwidth and each dtype both specs have."""
    out = {"memory_bandwidth": hw.memory_bandwidth / like.memory_bandwidth}
    for dt, v in hw.peak_flops.items():
        if dt in like.peak_flops:
            out[f"peak_flops.{dt}"] = v / like.peak_flops[dt]
    return out


def model_yaml(results: dict) -> str:
    """The perfmodel model spec of the decode-step model that was run (for -m)."""
    m = C.llama_model(results["meta"]["decode_model"])
    d = {"name": m.name, "source": C.SOURCE, "vocab_size": m.V, "d_model": m.D, "n_layers": m.L, "n_heads": m.N,
         "n_kv_heads": m.K, "head_dim": m.H, "d_ff": m.F, "max_context": m.max_context, "mlp": m.mlp,
         "norm": m.norm, "position": m.position, "tied_embeddings": m.tied_embeddings}
    return ("# The randomly initialised Llama-shaped model that `perfmodel measure` times a decode step of.\n"
            + yaml.safe_dump(d, sort_keys=False))
