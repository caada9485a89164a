"""Figures for reports: every plot is built from the same API the CLI and notebooks use, and
returns a matplotlib Figure that a notebook can restyle. matplotlib is imported here only.

Deterministic: fixed styles, no timestamps in saved files (see save()).
"""
from __future__ import annotations

import os

import numpy as np

from . import api, engine
from .ops import Precision, build_ops
from .specs import load_model
from .timemodel import impl_name

KINDS = ("roofline", "latency-throughput", "memory", "kv", "speculative", "serving", "validation", "published")


def _plt():
    import matplotlib

    if not os.environ.get("DISPLAY") and not os.environ.get("MPLBACKEND"):
        matplotlib.use("Agg")  # headless: never try to open a window
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10, "legend.fontsize": 8,
                         "figure.dpi": 100, "savefig.dpi": 150, "svg.hashsalt": "perfmodel",
                         "axes.grid": True, "grid.alpha": 0.3})
    return plt


def save(fig, path) -> str:
    """Save with no creation dates, so the same input gives the same bytes."""
    path = str(path)
    ext = path.rsplit(".", 1)[-1].lower()
    meta = {"png": {"Software": None}, "svg": {"Date": None}, "pdf": {"CreationDate": None, "ModDate": None}}
    if ext not in meta:
        from .errors import SpecError

        raise SpecError("-o", None, f"write .png, .svg or .pdf, got {path!r}")
    fig.savefig(path, metadata=meta[ext], bbox_inches="tight")
    return path


def _title(model, hw, prec: Precision, extra="", mode=None, impl=None):
    wf, af, kf, _ = prec.formats()
    label = {"roofline": "\nmode roofline: the ideal bound (no real system is faster)",
             "simple": "\nmode simple: the lecture's memory-bound bound",
             "achievable": f"\nmode achievable: an estimate of a good implementation ({impl_name(impl)})"}.get(mode, "")
    return f"{model} on {hw}: weights {wf.name}, KV {kf.name}" + (f", {extra}" if extra else "") + label


# ---------------------------------------------------------------- roofline
def roofline(model="llama-2-13b", hardware="h100-sxm", batch=(1, 8, 64, 256), context=1024, weights_dtype="bf16",
             kv_dtype=None, act_dtype="bf16", sets=None, mode="roofline", impl=None):
    """The device's roofs (bandwidth slope, a ceiling per dtype, ridge marked) with every op of
    prefill and decode at its intensity and the FLOP/s it reaches: on the roofs (mode roofline, the
    ideal bound) or below them (mode achievable, the estimate of a good implementation);
    several batch sizes form a trail."""
    plt = _plt()
    impl = api.check_mode(mode, impl, ("roofline", "achievable"), sets)
    prec = api._prec(weights_dtype, kv_dtype, act_dtype)
    (m,), (hw,) = api.specs(model, hardware, sets)
    tm = engine.time_model(mode, hw, impl)
    fig, ax = plt.subplots(figsize=(8, 5.5))
    x = np.logspace(-2, 5, 200)
    styles = ("-", "--", "-.", ":")
    for i, (dt, peak) in enumerate(sorted(hw.peak_flops.items(), key=lambda kv: -kv[1])[:4]):
        ax.plot(x, np.minimum(peak, x * hw.memory_bandwidth), styles[i], color="0.25", lw=1.2,
                label=f"{dt} roof: {peak / 1e12:.4g} TFLOP/s, ridge {peak / hw.memory_bandwidth:.0f} FLOP/B")
    ridge = hw.ridge(prec.formats()[1].peak)
    ax.axvline(ridge, color="0.5", lw=0.8, ls=":")
    ax.annotate(f"ridge {ridge:.0f} FLOP/B", (ridge, 1e10), textcoords="offset points", xytext=(4, 4), fontsize=8)
    batches = np.atleast_1d(batch)
    from .ops import ATTENTION, MATMUL

    cats = {MATMUL: ("weight matmuls (QKV, O, MLP, LM head)", "C0"), ATTENTION: ("attention (QK^T, AV)", "C3")}
    other = ("elementwise (norms, RoPE, act, residual)", "0.55")
    for phase, marker in (("decode", "o"), ("prefill", "s")):
        trail = {}
        for B in batches:
            ops = build_ops(m, float(B), 1.0 if phase == "decode" else float(context), float(context), phase, prec)
            for op, (_, _, t) in zip(ops, engine.op_times(ops, hw, prec, tm=tm)):
                f, b = float(op.flops) * op.count, float(op.bytes) * op.count
                if f <= 0 or b <= 0:
                    continue
                key = cats.get(op.kind, other)
                acc = trail.setdefault(key, {}).setdefault(float(B), [0.0, 0.0, 0.0])
                acc[0] += f
                acc[1] += b
                acc[2] += float(t) * op.count
        for (key, c), per_b in trail.items():
            pts = np.array([(f / b, f / t) for f, b, t in per_b.values()])
            ax.plot(pts[:, 0], pts[:, 1], "-", color=c, lw=0.8, alpha=0.6)
            ax.scatter(pts[:, 0], pts[:, 1], marker=marker, s=14 + 16 * np.arange(len(pts)), zorder=3,
                       facecolors=c if phase == "decode" else "none", edgecolors=c, label=f"{key}, {phase}")
            if phase == "decode" and key == cats[MATMUL][0]:
                for (x, y), b in zip(pts, per_b):
                    ax.annotate(f"B={b:g}", (x, y), textcoords="offset points", xytext=(6, -10), fontsize=7, color=c)
    ax.text(0.02, 0.97, "filled circles: decode; hollow squares: prefill;\nmarkers grow with batch "
            + " -> ".join(f"{b:g}" for b in batches), transform=ax.transAxes, va="top", fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per byte of HBM traffic)")
    ax.set_ylabel("FLOP/s reached" + (" (ideal: on the roof)" if mode == "roofline" else " (achievable estimate)"))
    ax.set_xlim(0.05, 3e4)
    ax.set_ylim(1e10, max(hw.peak_flops.values()) * 3)
    ax.set_title(_title(m.name, hw.name, prec, f"context {context:g}, batch {', '.join(f'{b:g}' for b in batches)}",
                        mode, impl))
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), ncol=1, frameon=False, fontsize=7)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- latency against throughput
def latency_throughput(models=("llama-2-13b", "llama-2-13b-gqa8"), hardware="h100-sxm",
                       batch=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512), context=1024, weights_dtype="bf16",
                       kv_dtype=None, act_dtype="bf16", sets=None, mode="roofline", impl=None):
    """Step latency against throughput across batch sizes, a curve per model; points that do not
    fit in memory are hollow and the out-of-memory stretch is dashed (the lecture's tradeoff).
    mode: roofline (the ideal bound), achievable (implementation profile `impl`) or simple."""
    plt = _plt()
    prec = api._prec(weights_dtype, kv_dtype, act_dtype)
    fig, ax = plt.subplots(figsize=(7, 5))
    hwname = ""
    for i, name in enumerate(api._names(models)):
        t = api.decode(name, hardware, list(batch), context, mode=mode, weights_dtype=weights_dtype, kv_dtype=kv_dtype,
                       act_dtype=act_dtype, sets=sets, impl=impl)
        thr, lat, fits = t["throughput_tok_s"].astype(float), t["latency_s"].astype(float) * 1e3, t["fits"].astype(bool)
        c = f"C{i}"
        ax.plot(thr[fits], lat[fits], "-", color=c, label=str(t["model"][0]))
        if (~fits).any():
            k = np.argmax(~fits)
            ax.plot(thr[max(k - 1, 0):], lat[max(k - 1, 0):], "--", color=c, alpha=0.6)
        ax.scatter(thr[fits], lat[fits], color=c, zorder=3)
        ax.scatter(thr[~fits], lat[~fits], facecolors="none", edgecolors=c, zorder=3,
                   label=f"{t['model'][0]}: does not fit" if (~fits).any() else None)
        for b, x, y in zip(t["batch"], thr, lat):
            ax.annotate(f"B={b:g}", (x, y), textcoords="offset points", xytext=(4, 3), fontsize=7, color=c)
        hwname = t["hardware"][0]
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("throughput (tokens/s)")
    ax.set_ylabel("decode step latency (ms)")
    ax.set_title(_title(", ".join(api._names(models)), hwname, prec, f"context {context:g}", mode, impl))
    ax.legend(loc="upper left", frameon=False)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- memory
def memory(model="llama-2-13b", hardware="h100-sxm", batch=(1, 8, 16, 32, 64, 96, 128), context=1024, axis="batch",
           weights_dtype="bf16", kv_dtype=None, act_dtype="bf16", sets=None):
    """Weights, KV cache and activations stacked against batch (or context), with the capacity line."""
    plt = _plt()
    prec = api._prec(weights_dtype, kv_dtype, act_dtype)
    (m,), (hw,) = api.specs(model, hardware, sets)
    if axis == "batch":
        x = np.atleast_1d(np.asarray(batch, float))
        r = engine.evaluate(m, hw, x, float(np.atleast_1d(context)[0]), prec=prec)
        sel = lambda k: np.asarray(r[k]).ravel()  # noqa: E731
        xlabel, sub = "batch size B (sequences)", f"context {float(np.atleast_1d(context)[0]):g}"
    else:
        x = np.atleast_1d(np.asarray(context, float))
        r = engine.evaluate(m, hw, float(np.atleast_1d(batch)[0]), x, prec=prec)
        sel = lambda k: np.asarray(r[k]).ravel()  # noqa: E731
        xlabel, sub = "context S (tokens)", f"batch {float(np.atleast_1d(batch)[0]):g}"
    w, kv, act = sel("weight_bytes") / 1e9, sel("kv_cache_bytes") / 1e9, sel("activation_bytes") / 1e9
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.stackplot(x, w, kv, act, labels=["weights", "KV cache", "activations"], alpha=0.85,
                 colors=["#4C72B0", "#DD8452", "#55A868"])
    ax.axhline(hw.memory_capacity / 1e9, color="k", lw=1.2, ls="--", label=f"capacity {hw.memory_capacity / 1e9:g} GB")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("memory (GB = 1e9 bytes)")
    ax.set_title(_title(m.name, hw.name, prec, sub))
    ax.legend(loc="upper left", frameon=False)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- KV cache of attention variants
def kv(models=("llama-2-13b", "llama-2-13b-gqa8", "llama-2-13b-mla", "llama-2-13b-cla2", "llama-2-13b-swa",
               "llama-2-13b-hybrid", "llama-2-13b-linear"), context=(512, 1024, 2048, 4096, 8192, 16384, 32768, 65536),
       kv_dtype="bf16", sets=None):
    """KV bytes per token (bars, at the largest context) and per sequence against context (lines)."""
    plt = _plt()
    prec = api._prec("bf16", kv_dtype, "bf16")
    S = np.atleast_1d(np.asarray(context, float))
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.5), gridspec_kw={"width_ratios": [1, 1.4]})
    names, per_tok = [], []
    for i, name in enumerate(api._names(models)):
        m = load_model(name, sets)
        seq = engine.per_sequence(m, S, prec)["kv_bytes_per_seq"]
        names.append(m.name)
        per_tok.append(seq[-1] / S[-1] / 1e3)
        a2.plot(S, seq / 1e9, "o-", ms=3, label=m.name, color=f"C{i}")
    a1.barh(names[::-1], per_tok[::-1], color=[f"C{i}" for i in range(len(names))][::-1])
    a1.set_xscale("log")
    a1.set_xlabel(f"KV bytes per token (kB) at S = {S[-1]:g}")
    a2.set_xscale("log")
    a2.set_yscale("log")
    a2.set_xlabel("context S (tokens)")
    a2.set_ylabel("KV cache per sequence (GB)")
    a2.legend(frameon=False, loc="upper left")
    fig.suptitle(f"KV cache of attention variants ({prec.formats()[2].name})")
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- speculative decoding
def speculative(alpha=None, gamma=None, draft_cost=0.1):
    """Speedup over alpha x gamma for one draft cost, with the break-even (speedup = 1) contour."""
    from . import whatif

    plt = _plt()
    a = np.linspace(0.0, 0.99, 100) if alpha is None else np.asarray(alpha, float)
    g = np.arange(1, 17) if gamma is None else np.asarray(gamma, float)
    A, G = np.meshgrid(a, g, indexing="ij")
    sp = whatif.speedup(A, G, float(np.atleast_1d(draft_cost)[0]))
    fig, ax = plt.subplots(figsize=(7, 4.8))
    im = ax.pcolormesh(g, a, sp, shading="nearest", cmap="RdBu", norm=_centered(sp))
    fig.colorbar(im, ax=ax, label="speedup over plain decoding")
    cs = ax.contour(G, A, sp, levels=[1.0], colors="k", linewidths=1.5)
    ax.clabel(cs, fmt={1.0: "break-even"}, fontsize=8)
    best = np.asarray(g)[np.argmax(sp, axis=1)]
    ax.plot(best, a, "w.", ms=3, label="best gamma")
    ax.set_xlabel("draft tokens per round (gamma)")
    ax.set_ylabel("acceptance rate (alpha)")
    ax.set_title(f"Speculative decoding, draft cost c = {float(np.atleast_1d(draft_cost)[0]):g} target steps")
    ax.legend(loc="lower right", frameon=False)
    fig.tight_layout()
    return fig


def _centered(values):
    from matplotlib.colors import TwoSlopeNorm

    lo, hi = float(np.min(values)), float(np.max(values))
    return TwoSlopeNorm(vcenter=1.0, vmin=min(lo, 0.99), vmax=max(hi, 1.01))


# ---------------------------------------------------------------- validation
def validation(results):
    """Predicted against measured time, one marker per case family, with the y = x line."""
    plt = _plt()
    from .measure.validate import load_report  # noqa: F401  (imported lazily: measurement backends)

    rep = load_report(results)
    fig, ax = plt.subplots(figsize=(6, 5.5))
    fams = sorted({c["family"] for c in rep["cases"]})
    lo, hi = np.inf, 0.0
    for i, fam in enumerate(fams):
        cs = [c for c in rep["cases"] if c["family"] == fam]
        p = np.array([c["predicted_s"] for c in cs])
        q = np.array([c["measured_s"] for c in cs])
        lo, hi = min(lo, p.min(), q.min()), max(hi, p.max(), q.max())
        med = np.median(np.abs([c["error"] for c in cs]))
        ax.scatter(q, p, s=18, color=f"C{i}", label=f"{fam} (median |error| {100 * med:.1f}%)")
    ax.plot([lo / 2, hi * 2], [lo / 2, hi * 2], "k-", lw=0.8, label="predicted = measured")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured time (s)")
    ax.set_ylabel("predicted time (s)")
    ax.set_title(f"Prediction against measurement: {rep.get('device', '')}")
    ax.legend(frameon=False, loc="upper left")
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- serving timeline
def serving(model="llama-2-13b", hardware="h100-sxm", requests=64, slots=8,
            output_len="lognormal:median=18,max=231", rate=None, seed=0, sets=None, mode="roofline", impl=None, **kw):
    """Slot occupancy (and KV memory in use) against time for static and continuous batching on the
    same traffic: the idle slots of static batching are the white space under the slot limit."""
    from . import serving as sv

    plt = _plt()
    runs = sv.serve_runs(model, hardware, "both", requests, slots, rate, output_len=output_len, seed=seed, sets=sets,
                         mode=mode, impl=impl, **kw)
    fig, axes = plt.subplots(len(runs), 1, figsize=(8, 2.6 * len(runs)), sharex=True)
    axes = np.atleast_1d(axes)
    for ax, r in zip(axes, runs):
        tl, s = r.timeline, r.summary
        t = np.append(tl["t_start_s"], tl["t_start_s"][-1] + tl["duration_s"][-1])
        used = np.append(tl["slots_used"], tl["slots_used"][-1])
        run = np.append(tl["generated"], tl["generated"][-1])  # tokens produced this iteration
        ax.fill_between(t, run, step="post", alpha=0.35, color="C0", label="sequences producing a token")
        ax.step(t, used, where="post", color="C0", lw=1.0, label="slots held")
        ax.axhline(slots, color="k", ls="--", lw=1, label=f"{slots} slots")
        ax2 = ax.twinx()
        ax2.step(t, np.append(tl["kv_used_bytes"], tl["kv_used_bytes"][-1]) / 1e9, where="post", color="C3", lw=0.8,
                 label="KV cache in use")
        ax2.set_ylabel("KV in use (GB)", color="C3")
        ax2.set_ylim(0, None)
        ax2.grid(False)
        ax.set_ylabel("sequences")
        ax.set_ylim(0, slots * 1.25)
        ax.set_title(f"{s['policy']}: {s['throughput_tok_s']:.0f} tokens/s, mean latency {s['mean_latency_s']:.3g} s, "
                     f"mean TTFT {s['mean_ttft_s']:.3g} s")
        ax.legend(loc="upper right", frameon=False, fontsize=7)
    axes[-1].set_xlabel("time (s)")
    what = ("step cost: roofline, the ideal bound" if mode == "roofline"
            else f"step cost: achievable estimate ({impl_name(impl)})")
    fig.suptitle(f"{model} on {hardware}: {requests} requests, outputs {output_len}; {what}")
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- validation against published measurements
def published(table=None, path=None):
    """Published end-to-end measurements against the engine: the fraction of the roofline bound each
    measurement reached (left: at most 1 when the bound holds) and the achievable estimate's error
    (right, with the +-25% band), one row per case, grouped by category."""
    from .measure.published import published as run

    plt = _plt()
    t = table if table is not None else run(path)
    first = np.array([str(c).split(",")[0] for c in t["category"]], dtype=object)
    order = np.lexsort((np.asarray(t["fraction"], float), first))
    cats = list(dict.fromkeys(first[order]))
    colour = {c: f"C{i}" for i, c in enumerate(cats)}
    y = np.arange(len(order))
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, max(4.0, 0.06 * len(order) + 1.5)), sharey=True)
    cols = [colour[first[i]] for i in order]
    a1.scatter(np.asarray(t["fraction"], float)[order], y, s=12, c=cols, zorder=3)
    a1.axvline(1.0, color="k", lw=1, label="the roofline bound")
    a1.set_xlabel("measured / roofline bound (throughput; inverse for times)")
    a1.set_xlim(0, 1.1)
    err = 100 * np.asarray(t["error"], float)[order]
    a2.axvspan(-25, 25, color="0.9", label="+-25%")
    a2.axvline(0, color="k", lw=0.8)
    a2.scatter(np.clip(err, -100, 300), y, s=12, c=cols, zorder=3)
    a2.set_xlabel("achievable estimate / measured - 1 (%)")
    a2.set_xlim(-100, 300)
    a1.set_yticks([])
    for c in cats:
        a1.scatter([], [], c=colour[c], s=12, label=c)
    a1.legend(frameon=False, fontsize=7, loc="lower left")
    a2.legend(frameon=False, fontsize=7, loc="lower right")
    med = float(np.median(np.abs(np.asarray(t["error"], float))))
    within = float(np.mean(np.abs(np.asarray(t["error"], float)) <= 0.25))
    fig.suptitle(f"{len(order)} published measurements: the roofline is the ideal bound (left); the achievable "
                 f"estimate's median |error| {100 * med:.0f}%, {100 * within:.0f}% within +-25% (right)")
    fig.tight_layout()
    return fig
