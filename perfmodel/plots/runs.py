"""Figures of runs and checks: measured validation, the serving timeline, capacity under SLOs, published
measurements and measured serving points."""
from __future__ import annotations

import numpy as np

from .. import api
from ..errors import SpecError
from .style import (
    MAX_CAPACITY,
    MAX_SERVING,
    _grid_minor,
    _linestyle,
    _plt,
    _time_tick,
    _whole_list,
    mode_line,
    readable_log,
    save,
    series,
)


def _centered(values):
    from matplotlib.colors import TwoSlopeNorm

    lo, hi = float(np.min(values)), float(np.max(values))
    return TwoSlopeNorm(vcenter=1.0, vmin=min(lo, 0.99), vmax=max(hi, 1.01))


# ---------------------------------------------------------------- validation
def validation(results, hardware=None, title=None):
    """Predicted against measured time for every validation case of a measured run (a `perfmodel
    measure` folder, its results.json, or a table with columns family, predicted_s, measured_s and
    error), one colour per case family, with the y = x line and the +-10% band; below, the residual
    (predicted / measured - 1) per case against measured time. `perfmodel plot validation` and
    `perfmodel validate --plot` draw this same figure. hardware: the spec to predict with (default:
    the run's measured.yaml). Returns a matplotlib Figure."""
    plt = _plt()
    if isinstance(results, dict) and "predicted_s" in results:
        table, device = results, ""
    else:
        from ..measure.suite import resolve
        from ..measure.validate import validate

        data, hw = resolve(results, hardware)
        table, device = validate(data, hw), data["meta"].get("device", "")
    if not len(table["family"]):
        raise SpecError("--results", None, "no validation cases (sweep, attention, decode) in these results")
    title = title if title is not None else f"{device}: perfmodel vs measured"
    fam = np.asarray(table["family"], dtype=object)
    p, m = np.asarray(table["predicted_s"], float), np.asarray(table["measured_s"], float)
    err = 100 * np.asarray(table["error"], float)
    fig, (ax, ar) = plt.subplots(2, 1, figsize=(6.4, 7.4), sharex=True, gridspec_kw={"height_ratios": [3, 1.4]})
    lo, hi = min(p.min(), m.min()) / 1.6, max(p.max(), m.max()) * 1.6
    xs = np.array([lo, hi])
    ax.fill_between(xs, xs / 1.1, xs * 1.1, color="0.85", label="within ±10%", zorder=0)
    ax.plot(xs, xs, "k-", lw=0.8, label="predicted = measured", zorder=1)
    ar.axhspan(-10, 10, color="0.85", zorder=0)
    ar.axhline(0, color="k", lw=0.8)
    for i, f in enumerate(dict.fromkeys(fam)):
        k = fam == f
        c, mk = _linestyle(i)
        med = float(np.median(np.abs(err[k])))
        within = float(np.mean(np.abs(err[k]) <= 10))
        ax.scatter(m[k], p[k], s=24, color=c, marker=mk, alpha=0.85, zorder=3,
                   label=f"{f}: {k.sum()} cases, median |error| {med:.1f}%, {100 * within:.0f}% within 10%")
        ar.scatter(m[k], err[k], s=18, color=c, marker=mk, alpha=0.85, zorder=3)
    ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi), ylabel="predicted by perfmodel")
    ax.legend(loc="upper left", frameon=True, framealpha=0.9, edgecolor="none", fontsize=7.5)
    span = max(15.0, float(np.max(np.abs(err))) * 1.15)
    ar.set_ylim(-span, span)
    ar.set_ylabel("error (%)")
    ar.set_xlabel("measured time (median of the timed runs)")
    for a_ in (ax, ar):
        _grid_minor(a_)
    readable_log(ax.xaxis, _time_tick)
    readable_log(ax.yaxis, _time_tick)
    med, within = float(np.median(np.abs(err))), float(np.mean(np.abs(err) <= 10))
    ar.set_title(f"residuals: error = predicted / measured - 1 (all {len(err)} cases: median |error| {med:.1f}%, "
                 f"{100 * within:.0f}% within 10%)", fontsize=8)
    fig.suptitle(f"{title}\nmode roofline on the run's calibrated spec (measured ceilings and per-kernel overhead), "
                 "against the median measured time", fontsize=9.5)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- serving timeline
def serving(model="llama-2-13b", hardware="h100-sxm", requests=64, slots=8,
            output_len="lognormal:median=18,max=231", rate=None, seed=0, sets=None, mode="roofline", impl=None,
            tp=1, pp=1, ep=1, **kw):
    """Slot occupancy against time for static and continuous batching on the same traffic, with the
    KV cache in use below each (against the KV capacity): the idle slots of static batching are
    the white space under the slot limit. One pair of panels per (model, hardware, layout) and
    policy. mode: the step cost's, roofline (the ideal bound) or achievable (`impl`); other
    keywords go to perfmodel.serve_runs. Returns a matplotlib Figure."""
    from matplotlib.ticker import MaxNLocator

    from .. import serving as sv

    plt = _plt()
    api.check_mode(mode, impl, ("roofline", "achievable"), sets)
    ss, common = series(model, hardware, tp, pp, ep, sets, MAX_SERVING, "serving")
    runs = []
    for s in ss:
        rs = sv.serve_runs(s.model, s.hardware, "both", requests, slots, rate, output_len=output_len, seed=seed,
                           sets=sets, mode=mode, impl=impl, tp=s.layout.tp, pp=s.layout.pp, ep=s.layout.ep, **kw)
        runs.append((s, rs))
    cols = 1 if len(ss) == 1 else 2
    rows = len(ss) * 2 // cols
    fig, axes = plt.subplots(rows * 2, cols, figsize=(8.6 if cols == 1 else 13, 2.9 * rows + 1.3),
                             sharex="col" if cols > 1 else True, squeeze=False,
                             gridspec_kw={"height_ratios": [3, 1.15] * rows})
    tmax = max(float(r.timeline["t_start_s"][-1] + r.timeline["duration_s"][-1]) for _, rs in runs for r in rs)
    k = 0
    for s, rs in runs:
        for r in rs:
            row, col = (2 * k, 0) if cols == 1 else (2 * (k // 2), k % 2)
            ax, axk = axes[row, col], axes[row + 1, col]
            k += 1
            tl, summ = r.timeline, r.summary
            t = np.append(tl["t_start_s"], tl["t_start_s"][-1] + tl["duration_s"][-1])
            used = np.append(tl["slots_used"], tl["slots_used"][-1])
            gen = np.append(tl["generated"], tl["generated"][-1])
            kvu = np.append(tl["kv_used_bytes"], tl["kv_used_bytes"][-1]) / 1e9
            ax.axhline(slots, color="0.7", lw=4.5, alpha=0.6, zorder=1, label=f"slot limit ({slots})")
            ax.fill_between(t, gen, step="post", alpha=0.35, color="C0", lw=0, zorder=2,
                            label="sequences producing a token")
            ax.step(t, used, where="post", color="C1", lw=1.3, zorder=3, label="slots held")
            ax.set_ylim(0, slots * 1.45)
            ax.set_xlim(0, tmax * 1.01)
            ax.set_ylabel("sequences")
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
            cap = summ["kv_capacity_bytes"] / 1e9
            axk.step(t, kvu, where="post", color="C3", lw=1.1, label=f"KV cache in use (capacity {cap:.3g} GB)")
            axk.set_ylim(0, max(kvu.max() * 2.1, 1e-3))
            axk.yaxis.set_major_locator(MaxNLocator(3))
            axk.set_ylabel("KV (GB)")
            name = f"{s.label}: " if s.label else ""
            ax.set_title(f"{name}{summ['policy']}: {summ['throughput_tok_s']:.0f} tokens/s, mean latency "
                         f"{summ['mean_latency_s']:.3g} s, mean TTFT {summ['mean_ttft_s']:.3g} s", fontsize=9)
            ax.legend(loc="upper right", ncol=3, frameon=True, framealpha=0.9, edgecolor="none", fontsize=7)
            axk.legend(loc="upper right", frameon=True, framealpha=0.9, edgecolor="none", fontsize=7)
    for col in range(cols):
        axes[-1, col].set_xlabel("time (s)")
    fig.suptitle(f"Serving: {common}, {requests} requests on {slots} slots, outputs {output_len}\n"
                 f"step costs in {mode_line(mode, impl)}")
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- capacity under SLOs
def capacity(model="llama-3.1-70b", hardware="h100-sxm", gpus=None, tp=None, ep=1, replicas=1,
             prompt_len="lognormal:median=1000,max=8000", output_len="lognormal:median=250,max=2000",
             slo_ttft="1s", slo_tpot="50ms", percentile=99, mode="roofline", impl=None, disaggregate=False,
             slots=256, token_budget=2048, requests=None, seeds=3, seed=0, sets=None, max_tokens=None, show=False):
    """Percentile TTFT (left) and TPOT (right) against the Poisson arrival rate, with the SLO lines and each
    series' goodput marked: one series per (hardware, layout[, disaggregated split]) that
    perfmodel.serving.capacity searched (gpus: every layout of N devices; tp: one layout or a list).
    Each curve is the median seed's simulations at fractions of its goodput, every measured request run
    to its end (so a curve past the goodput shows how fast the queue grows). Returns a Figure."""
    from ..serving import capacity as cap

    plt = _plt()
    tps = [None] if tp is None else _whole_list(tp, "--tp")
    entries, summary = [], None
    for t in tps:
        _, summary = cap.run(model, hardware, gpus, t, 1, ep, replicas, prompt_len, output_len, slo_ttft, slo_tpot,
                             percentile, mode, impl, disaggregate, None, slots, token_budget, requests, seeds, seed,
                             0.05, 16, 16, "bf16", None, "bf16", sets, max_tokens, keep=True, show=show)
        entries += summary["searches"]
    if not entries:
        raise SpecError("-m/-H/--tp", None, "no layout of these fits and reaches a simulated search: nothing to draw "
                                            "(`perfmodel capacity` says why)")
    if len(entries) > MAX_CAPACITY:
        raise SpecError("--gpus/--tp/--hardware", None, f"{len(entries)} searched layouts; the capacity plot draws at "
                                                         f"most {MAX_CAPACITY} (give --tp, fewer devices or hardware)")
    wl = summary["workload"]
    vary_h = len({e["row"]["hardware"] for e in entries}) > 1
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.8))
    from ..workers import _Progress

    bar = _Progress(len(entries), "plot capacity: curves", show)
    for i, e in enumerate(entries):
        bar.advance(i, None)
        r = e["row"]
        c, mk = _linestyle(i)
        if r["serving"] == "colocated":
            lay = f"tp={int(r['tp'])}" + (f" ep={int(r['ep'])}" if r["ep"] > 1 else "") + \
                (f" x{int(r['replicas'])}" if r["replicas"] > 1 else "")
        else:
            lay = (f"prefill tp={int(r['prefill_tp'])} x{int(r['prefill_instances'])} + decode "
                   f"tp={int(r['decode_tp'])} x{int(r['decode_instances'])}")
        name = (f"{r['hardware']}, " if vary_h else "") + lay
        cv = cap.curve(e, wl)
        g = cv["goodput"]
        label = name + (f": goodput {g:.3g}/s" if g is not None else ": no rate meets the SLOs")
        for ax, y in ((a1, cv["ttft"]), (a2, cv["tpot"])):
            ok = np.isfinite(y)
            ax.plot(cv["rate"][ok], y[ok], "-", color=c, marker=mk, ms=4, lw=1.4, label=label)
            if g is not None:
                ax.axvline(g, color=c, ls=":", lw=1.1)
                at = int(np.argmin(np.abs(cv["rate"] - g)))
                if np.isfinite(y[at]):
                    ax.scatter([g], [y[at]], s=70, facecolors="none", edgecolors=c, linewidths=1.6, zorder=4)
    q = f"p{wl.q:g}"
    for ax, slo, what in ((a1, wl.slo_ttft, "TTFT"), (a2, wl.slo_tpot, "TPOT")):
        ax.axhline(slo, color="k", ls="--", lw=1.1, label=f"SLO {what} {slo * 1e3:g} ms" if slo < 1 else
                   f"SLO {what} {slo:g} s")
        ax.set_yscale("log")
        ax.set_xlabel("Poisson arrival rate (requests/s, all replicas)")
        ax.set_ylabel(f"{q} {what}")
        readable_log(ax.yaxis, _time_tick)
        _grid_minor(ax)
    a1.set_title(f"{q} time to first token")
    a2.set_title(f"{q} time per output token")
    handles, labels = a1.get_legend_handles_labels()
    h2, l2 = a2.get_legend_handles_labels()
    handles.append(h2[-1])
    labels.append(l2[-1])
    fig.legend(handles, labels, loc="lower center", ncol=min(3, len(labels)), frameon=False, fontsize=8,
               bbox_to_anchor=(0.5, -0.02))
    fig.suptitle(f"Goodput under SLOs: {summary['model']}, prompts {wl.prompt_len}, outputs {wl.output_len}; "
                 f"circles: the goodput (the median of {len(wl.seeds)} seed{'s' if len(wl.seeds) > 1 else ''}), "
                 "dotted lines at it\n"
                 f"continuous batching, {slots} slots, chunked prefill {token_budget} tokens/step; step costs in "
                 f"{mode_line(mode, impl)}", fontsize=9)
    bar.close()
    fig.tight_layout(rect=(0, 0.08 + 0.03 * ((len(labels) - 1) // 3), 1, 1))
    return fig


# ---------------------------------------------------------------- validation against published measurements
def published(table=None, path=None):
    """Published end-to-end measurements against the engine: the fraction of the roofline bound each
    measurement reached (left: at most 1 when the bound holds) and the achievable estimate's error
    (right, with the +-25% band), one row per case, grouped by category. Returns a Figure."""
    from ..measure.published import published as run

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
    a2.axvspan(-25, 25, color="0.9", label="±25%")
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
    fig.suptitle(f"{len(order)} published end-to-end measurements against perfmodel\nleft: mode roofline, the ideal "
                 f"bound (no measurement beats it: at most 1); right: mode achievable, an estimate (median |error| "
                 f"{100 * med:.0f}%, {100 * within:.0f}% within ±25%; beyond 300% drawn at 300%)")
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- validation against measured serving runs
BACKEND_COLOURS = {"vllm": "C0", "sglang": "C1", "trtllm": "C2"}


def serving_validation(points):
    """Measured serving runs against the simulator (perfmodel.serving.silicon.predict's table): predicted
    against measured TTFT and TPOT on log-log axes, one row of panels per mode, coloured by backend, with
    the +-25% band around the diagonal. Returns a Figure."""
    plt = _plt()
    ok = points[points["status"] == "ok"]
    modes = [m for m in ("roofline", "achievable") if m in set(ok["mode"])] or sorted(set(ok["mode"]))
    fig, axes = plt.subplots(len(modes), 2, figsize=(10, 4.6 * len(modes)), squeeze=False)
    for r, mode in enumerate(modes):
        pm = ok[ok["mode"] == mode]
        for c, k in enumerate(("ttft", "tpot")):
            ax = axes[r][c]
            meas = pm[f"measured_{k}_ms"].to_numpy(float)
            pred = pm[f"predicted_{k}_ms"].to_numpy(float)
            good = np.isfinite(meas) & np.isfinite(pred) & (meas > 0) & (pred > 0)
            if good.any():
                lo = float(min(meas[good].min(), pred[good].min())) / 1.5
                hi = float(max(meas[good].max(), pred[good].max())) * 1.5
            else:
                lo, hi = 1.0, 10.0
            x = np.geomspace(lo, hi, 50)
            ax.fill_between(x, 0.75 * x, 1.25 * x, color="0.85", label="±25%", zorder=1)
            ax.plot(x, x, color="k", lw=0.8, zorder=2)
            for b in sorted(set(pm["backend"])):
                sel = good & (pm["backend"].to_numpy() == b)
                ax.scatter(meas[sel], pred[sel], s=6, alpha=0.6, c=BACKEND_COLOURS.get(b, "C3"),
                           label=f"{b} ({int(sel.sum())})", zorder=3)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlim(lo, hi)
            ax.set_ylim(lo, hi)
            e = np.abs(pm[f"{k}_error"].to_numpy(float))
            e = e[np.isfinite(e)]
            med = f"median |error| {100 * np.median(e):.0f}%, {100 * np.mean(e <= 0.25):.0f}% within ±25%" if e.size else ""
            ax.set_title(f"{k.upper()}, mode {mode}: {med}")
            ax.set_xlabel(f"measured {k.upper()} (ms)")
            ax.set_ylabel(f"predicted {k.upper()} (ms)")
            ax.legend(frameon=False, loc="upper left")
    fig.suptitle(f"{len(ok) // max(len(modes), 1)} measured serving points (AIConfigurator silicon sample) against "
                 "perfmodel's serving simulator\nroofline: the ideal bound per step (a measurement should not beat it); "
                 "achievable: an estimate")
    fig.tight_layout()
    return fig


def save_validation(table: dict, path: str, title: str = "") -> None:
    """Write the predicted-vs-measured figure of a validation table to path (.png, .svg or .pdf): the figure of
    `perfmodel plot validation` (validation(): the +-10% band and a residual panel), for `validate --plot`."""
    if not str(path).lower().endswith((".png", ".svg", ".pdf")):
        raise SpecError("--plot", None, f"write .png, .svg or .pdf, got {str(path)!r}")
    save(validation(table, title=title), path)  # the figure is not pyplot's (plots._Figures): nothing to close
