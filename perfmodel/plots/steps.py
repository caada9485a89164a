"""Figures of one step on a device: the roofline with every op, latency against throughput, memory, KV cache
per variant, and speculative decoding."""
from __future__ import annotations

import itertools

import numpy as np

from .. import api, engine
from ..errors import SpecError
from ..ops import ATTENTION, COMM, MATMUL, Precision, build_ops
from ..specs import Hardware, load_hardware
from ..units import fmt_bytes
from .style import (
    Labeller,
    MAX_LINES,
    MAX_PANELS,
    Series,
    _formats,
    _grid_minor,
    _label_order,
    _linestyle,
    _names_list,
    _one,
    _panels,
    _plt,
    mode_line,
    readable_log,
    series,
)


_CATS = (("matmul", "weight matmuls (QKV, O, MLP, LM head)", "C0"),
         ("expert", "expert matmuls (MoE, routed)", "C2"),
         ("attention", "attention (QK^T, AV)", "C3"),
         ("vector", "elementwise (norms, RoPE, act, residual)", "0.45"))


def _category(op) -> str:
    if op.kind == MATMUL:
        return "expert" if op.name.startswith("expert") else "matmul"
    return "attention" if op.kind == ATTENTION else "vector"


def _roofline_points(s: Series, batches, context, prec, tm):
    """Per phase and op category, per batch: (intensity, FLOP/s reached); and the collectives' share."""
    hw, lay = s.hardware, s.layout
    out, comm_share = {}, {}
    for phase in ("decode", "prefill"):
        for B in batches:
            ops = build_ops(s.model, float(B), 1.0 if phase == "decode" else context, context, phase, prec, layout=lay)
            acc, total, comm = {}, 0.0, 0.0
            for op, (_, _, t) in zip(ops, engine.op_times(ops, hw, prec, layout=lay, tm=tm)):
                t = float(np.sum(t)) * op.count
                total += t
                if op.kind == COMM:
                    comm += t
                    continue
                f, b = float(op.flops) * op.count, float(op.bytes) * op.count
                if f <= 0 or b <= 0:
                    continue
                a = acc.setdefault(_category(op), [0.0, 0.0, 0.0])
                a[0], a[1], a[2] = a[0] + f, a[1] + b, a[2] + t
            for cat, (f, b, t) in acc.items():
                out.setdefault((phase, cat), []).append((float(B), f / b, f / t))
            comm_share[(phase, float(B))] = comm / total if total else 0.0
    return out, comm_share


def _roofs(hw: Hardware, prec: Precision, cats) -> list[tuple[float, str]]:
    """The peaks the plotted ops are priced at, one per distinct value: the tensor peak of the
    activation format (matmuls, attention) and the fp32 vector peak (elementwise ops)."""
    af = prec.formats()[1]
    tensor_key = af.peak
    attn_key = "fp8" if tensor_key == "fp4" and "fp8" in hw.peak_flops else tensor_key
    roofs = {}
    roofs.setdefault(hw.peak(tensor_key), f"{tensor_key} tensor peak")
    if "attention" in cats:
        roofs.setdefault(hw.peak(attn_key), f"{attn_key} tensor peak (attention)")
    if "vector" in cats:
        v = hw.peak_flops.get("fp32", hw.peak(tensor_key))
        roofs.setdefault(v, "fp32 vector peak (elementwise)")
    return sorted(roofs.items(), key=lambda kv: -kv[0])


def roofline(model="llama-2-13b", hardware="h100-sxm", batch=(1, 8, 64, 256), context=1024, weights_dtype="bf16",
             kv_dtype=None, act_dtype="bf16", sets=None, mode="roofline", impl=None, tp=1, pp=1, ep=1):
    """Every op of prefill and decode at its arithmetic intensity and the TFLOP/s it reaches, under
    the device's roofs: the HBM slope and one ceiling per peak the ops are priced at (the tensor peak
    of the activation format; the fp32 vector peak for elementwise ops), with the ridge marked.

    Mode roofline puts every op on a roof (the ideal bound); achievable places it below, at the
    estimate of a good implementation (`impl`). Ops are summed per category (weight matmuls, routed
    expert matmuls of MoE models, attention, elementwise), so several batch sizes form a trail.
    One panel per (model, hardware, layout); with a layout, one device's ops (collectives are
    link-bound and not on the roofline: their share of the step is noted).

    model, hardware: names, paths, specs or comma lists; batch: sequences per replica; context:
    tokens (one value); tp, pp, ep: ints or lists. Returns a matplotlib Figure."""
    plt = _plt()
    impl = api.check_mode(mode, impl, ("roofline", "achievable"), sets)
    prec = api._prec(weights_dtype, kv_dtype, act_dtype)
    batches = api._positive(batch, "--batch")
    S = _one(context, "--context", "roofline")
    ss, common = series(model, hardware, tp, pp, ep, sets, MAX_PANELS, "roofline")
    fig, axes, _ = _panels(plt, len(ss), 5.6, 4.4)
    colour_of = {c: col for c, _, col in _CATS}
    panels = []
    for s in ss:
        tm = engine.time_model(mode, s.hardware, impl)
        pts, comm = _roofline_points(s, batches, S, prec, tm)
        panels.append((s, pts, comm))
    xs = [p[1] for _, pts, _ in panels for tr in pts.values() for p in tr]
    ys = [p[2] / 1e12 for _, pts, _ in panels for tr in pts.values() for p in tr]
    top = max(max(s.hardware.peak_flops.values()) for s in ss) / 1e12
    xlo, xhi = 10.0 ** np.floor(np.log10(min(xs) / 3)), 10.0 ** np.ceil(np.log10(max(max(xs) * 3, 3e3)))
    ylo, yhi = 10.0 ** np.floor(np.log10(min(ys) / 4)), top * 3
    x = np.logspace(np.log10(xlo), np.log10(xhi), 400)
    cats_seen = set()
    for ax, (s, pts, comm) in zip(axes, panels):
        hw = s.hardware
        cats_seen |= {c for _, c in pts}
        roofs = _roofs(hw, prec, {c for _, c in pts})
        bw = hw.memory_bandwidth
        for i, (peak, name) in enumerate(roofs):
            ax.plot(x, np.minimum(peak, x * bw) / 1e12, "-" if i == 0 else ":", color="0.2" if i == 0 else "0.45",
                    lw=1.4 if i == 0 else 1.1, zorder=1)
            ax.annotate(f"{name} {peak / 1e12:.4g} TFLOP/s", (xhi, peak / 1e12), xytext=(-3, 9 if i == 0 else -3),
                        textcoords="offset points", ha="right", va="bottom" if i == 0 else "top", fontsize=7,
                        color="0.2" if i == 0 else "0.35")
        ridge = roofs[0][0] / bw
        ax.axvline(ridge, color="0.5", lw=0.8, ls="--", zorder=1)
        ax.annotate(f"ridge {ridge:.0f} FLOP/B", (ridge, ylo), xytext=(3, 3), textcoords="offset points", fontsize=7,
                    color="0.3")
        n = len(batches)
        for (phase, cat), trail in pts.items():
            colour = colour_of[cat]
            arr = np.array(trail)
            ax.plot(arr[:, 1], arr[:, 2] / 1e12, "-", color=colour, lw=0.7, alpha=0.5, zorder=2)
            for grp in _same_point(arr[:, 1], arr[:, 2]):  # one marker where batches land on one point
                j = grp[-1]
                size = 14 + 70 * j / max(n - 1, 1)  # smaller batches on top: no marker hides a smaller one
                ax.scatter([arr[j, 1]], [arr[j, 2] / 1e12], s=size, marker="o" if phase == "decode" else "s",
                           facecolors=colour if phase == "decode" else "white", edgecolors=colour, linewidths=1.2,
                           alpha=0.75 if phase == "decode" else 1.0, zorder=4 + (n - j) * 0.01)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(xlo, xhi)
        ax.set_ylim(ylo, yhi)
        ax.set_title(s.label or "", fontsize=9)
        if s.layout.devices > 1:
            share = comm.get(("decode", float(batches[-1])), 0.0)
            ax.text(0.02, 0.98, f"one device's ops; the collectives (link-bound, not drawn) take\n{100 * share:.0f}% "
                                f"of the decode step at B={batches[-1]:g}", transform=ax.transAxes, fontsize=7,
                    va="top", color="0.3")
    for ax in axes:
        ax.set_xlabel("arithmetic intensity (FLOP per byte of HBM traffic)")
        readable_log(ax.xaxis)
        readable_log(ax.yaxis)
        _grid_minor(ax)
    for ax in axes[:: (1 if len(axes) == 1 else 2 if len(axes) in (2, 4) else 3)]:
        ax.set_ylabel("TFLOP/s reached" + (" (on the roof: ideal)" if mode == "roofline" else " (achievable estimate)"))
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], ls="none", marker="o", color=col, label=name, ms=6) for c, name, col in _CATS
               if c in cats_seen]
    handles += [Line2D([], [], ls="none", marker="o", color="0.3", mfc="0.3", label="decode (filled circles)", ms=6),
                Line2D([], [], ls="none", marker="s", color="0.3", mfc="none", label="prefill (hollow squares)", ms=6),
                Line2D([], [], ls="none", marker="o", color="0.3", mfc="none", ms=3,
                       label="marker size grows with batch " + " -> ".join(f"{b:g}" for b in batches))]
    fig.suptitle(f"Roofline: {common}\n{_formats(prec)}, context {S:g}, batch {', '.join(f'{b:g}' for b in batches)}"
                 f"\n{mode_line(mode, impl)}")
    fig.legend(handles=handles, loc="lower center", ncol=3 if len(axes) > 1 else 2, frameon=False, fontsize=7.5,
               bbox_to_anchor=(0.5, 0.0))
    fig.tight_layout(rect=(0, 0.1 if len(axes) > 1 else 0.13, 1, 1))
    for ax, (s, pts, _) in zip(axes, panels):  # the slope's label along it; batch labels where they hit nothing
        bw = s.hardware.memory_bandwidth
        x0 = max(xlo * 2, ylo * 3e12 / bw)
        (px0, py0), (px1, py1) = ax.transData.transform([(x0, x0 * bw / 1e12), (x0 * 10, x0 * 10 * bw / 1e12)])
        ax.annotate(f"HBM {bw / 1e12:.3g} TB/s", (x0, x0 * bw / 1e12), xytext=(-2, 5), textcoords="offset points",
                    fontsize=7, color="0.3", rotation=np.degrees(np.arctan2(py1 - py0, px1 - px0)),
                    rotation_mode="anchor")
        lab = Labeller(ax)
        for trail in pts.values():
            arr = np.array(trail)
            lab.avoid_points(arr[:, 1], arr[:, 2] / 1e12, 6.5)
            lab.avoid_line(arr[:, 1], arr[:, 2] / 1e12)
        for t in ax.texts:
            lab.avoid_artist(t)
        order = ("matmul", "expert", "attention", "vector")
        for (phase, cat), trail in sorted(pts.items(), key=lambda kv: (kv[0][0] != "decode", order.index(kv[0][1]))):
            arr = np.array(trail)
            for grp in _same_point(arr[:, 1], arr[:, 2]):
                bs = arr[grp, 0]
                text = f"B={bs[0]:g}" if len(grp) == 1 else f"B={bs[0]:g}-{bs[-1]:g}"
                if phase == "prefill" and len(grp) == 1:
                    continue  # prefill trails: the marker sizes tell the batches apart
                lab.label(arr[grp[-1], 1], arr[grp[-1], 2] / 1e12, text, colour_of[cat])
    return fig


def _same_point(x, y, rel=0.04) -> list[list[int]]:
    """Runs of consecutive trail points within 4% of each other in x and y (one marker, one label)."""
    lx, ly = np.log(np.asarray(x, float)), np.log(np.asarray(y, float))
    groups = [[0]]
    for i in range(1, len(lx)):
        j = groups[-1][0]
        if abs(lx[i] - lx[j]) < rel and abs(ly[i] - ly[j]) < rel:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


# ---------------------------------------------------------------- latency against throughput
def latency_throughput(models=("llama-2-13b", "llama-2-13b-gqa8"), hardware="h100-sxm",
                       batch=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512), context=1024, weights_dtype="bf16",
                       kv_dtype=None, act_dtype="bf16", sets=None, mode="roofline", impl=None, tp=1, pp=1, ep=1):
    """Decode step latency against throughput across batch sizes (the lecture's tradeoff): one
    curve per (model, hardware, layout), each point labelled with its batch where the label fits.
    Points that do not fit in device memory are hollow and the stretch beyond the last that fits is
    dashed. Throughput counts every replica; latency is the time between a sequence's tokens.

    mode: roofline (the ideal bound), achievable (implementation profile `impl`) or simple.
    models, hardware: names or comma lists; batch: sequences per replica; context: tokens (one
    value); tp, pp, ep: ints or lists. Returns a matplotlib Figure."""
    plt = _plt()
    prec = api._prec(weights_dtype, kv_dtype, act_dtype)
    S = _one(context, "--context", "latency-throughput")
    api.check_mode(mode, impl, sets=sets)
    ss, common = series(models, hardware, tp, pp, ep, sets, MAX_LINES, "latency-throughput")
    fig, ax = plt.subplots(figsize=(8, 5.6))
    curves = []
    for i, s in enumerate(ss):
        t = api.decode(s.model, s.hardware, list(batch), S, mode=mode, weights_dtype=weights_dtype, kv_dtype=kv_dtype,
                       act_dtype=act_dtype, sets=sets, impl=impl, tp=s.layout.tp, pp=s.layout.pp, ep=s.layout.ep)
        thr, lat = t["throughput_tok_s"].astype(float), t["latency_s"].astype(float) * 1e3
        fits = t["fits"].astype(bool)
        c, mk = _linestyle(i)
        k = int(np.argmin(fits)) if (~fits).any() else len(fits)  # the first that does not fit
        label = s.label or common
        ax.plot(thr[:k], lat[:k], "-", color=c, lw=1.6, zorder=2, label=label)
        if k < len(fits):
            ax.plot(thr[max(k - 1, 0):], lat[max(k - 1, 0):], "--", color=c, lw=1.2, alpha=0.8, zorder=2,
                    label=None if k else label)
        ax.scatter(thr[fits], lat[fits], color=c, marker=mk, s=26, zorder=3)
        ax.scatter(thr[~fits], lat[~fits], facecolors="white", edgecolors=c, marker=mk, s=26, linewidths=1.2, zorder=3)
        curves.append((t["batch"].astype(float), thr, lat, c))
    allx = np.concatenate([c[1] for c in curves])
    ally = np.concatenate([c[2] for c in curves])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(allx.min() / 1.6, allx.max() * 1.6)
    ax.set_ylim(ally.min() / 1.25, ally.max() * 1.25)
    readable_log(ax.xaxis)
    readable_log(ax.yaxis)
    _grid_minor(ax)
    ax.set_xlabel("throughput (tokens/s" + (", all replicas)" if any(s.layout.devices > 1 for s in ss) else ")"))
    ax.set_ylabel("decode step latency (ms)")
    from matplotlib.lines import Line2D

    handles, labels = ax.get_legend_handles_labels()
    handles.append(Line2D([], [], ls="--", color="0.4", marker="o", mfc="white", ms=5))
    labels.append("hollow, dashed: does not fit in device memory")
    leg = ax.legend(handles, labels, loc="upper left", frameon=True, framealpha=0.9, edgecolor="none", fontsize=7.5)
    ax.set_title(f"Decode latency against throughput: {common}\n{_formats(prec)}, context {S:g}\n"
                 f"{mode_line(mode, impl)}")
    fig.tight_layout()
    lab = Labeller(ax)
    lab.avoid_artist(leg)
    for b, x, y, c in curves:
        lab.avoid_points(x, y, 4.5)
        lab.avoid_line(x, y)
    n = max(len(c[0]) for c in curves)
    for j in _label_order(n):
        for b, x, y, c in curves:
            if j < len(b):
                lab.label(x[j], y[j], f"B={b[j]:g}", c)
    return fig


# ---------------------------------------------------------------- memory
def _largest(fits_at, lo: int, hi: int) -> int:
    """The largest integer n in [lo, hi] with fits_at(n), for a monotone predicate (lo-1 if none)."""
    if not fits_at(lo):
        return lo - 1
    if fits_at(hi):
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits_at(mid) else (lo, mid)
    return lo


def memory(model="llama-2-13b", hardware="h100-sxm", batch=(1, 8, 16, 32, 64, 96, 128), context=1024, axis="batch",
           weights_dtype="bf16", kv_dtype=None, act_dtype="bf16", sets=None, tp=1, pp=1, ep=1):
    """Weights, KV cache and activations stacked against batch (or context, axis="context") on one
    device, with the device's capacity and the point where the stack crosses it: the largest batch
    (or context) that fits, the same test as the `fits` column of decode. One panel per (model,
    hardware, layout); a band too thin to see is named in a note instead of the legend.

    batch: sequences per replica; context: tokens; with axis="batch" one context, with
    axis="context" one batch. Returns a matplotlib Figure."""
    plt = _plt()
    if axis not in ("batch", "context"):
        raise SpecError("--axis", None, f"must be batch or context, got {axis!r}")
    prec = api._prec(weights_dtype, kv_dtype, act_dtype)
    if axis == "batch":
        x, fixed = api._positive(batch, "--batch"), _one(context, "--context", "memory (against batch)")
    else:
        x, fixed = api._positive(context, "--context"), _one(batch, "--batch", "memory (against context)")
    ss, common = series(model, hardware, tp, pp, ep, sets, MAX_PANELS, "memory")
    fig, axes, _ = _panels(plt, len(ss), 5.6, 4.0, sharey=False)
    colours = {"weights": "#4C72B0", "KV cache": "#DD8452", "activations": "#55A868"}
    what = "B" if axis == "batch" else "S"
    shown = set()
    for ax, s in zip(axes, ss):
        hw, lay, m = s.hardware, s.layout, s.model

        def at(xs):
            B, Sx = (xs, fixed) if axis == "batch" else (fixed, xs)
            r = engine.evaluate(m, hw, B, Sx, prec=prec, layout=lay, grid=False)
            return {k: np.asarray(r[k], float).ravel() for k in ("weight_bytes", "kv_cache_bytes", "activation_bytes",
                                                                 "memory_bytes")}

        r = at(x)
        cap = hw.memory_capacity
        bands = {"weights": r["weight_bytes"] / 1e9, "KV cache": r["kv_cache_bytes"] / 1e9,
                 "activations": r["activation_bytes"] / 1e9}
        total = r["memory_bytes"] / 1e9
        ytop = max(total.max(), cap / 1e9) * 1.3  # a strip above the data for the notes
        thin = {k: v for k, v in bands.items() if v.max() < 0.006 * ytop}
        shown |= {k for k in bands if k not in thin}
        ax.stackplot(x, *bands.values(), colors=list(colours.values()), alpha=0.85)
        ax.axhline(cap / 1e9, color="k", lw=1.3, ls="--")
        ax.annotate(f"capacity {cap / 1e9:g} GB", (x.max(), cap / 1e9), xytext=(-3, 3), textcoords="offset points",
                    ha="right", va="bottom", fontsize=7.5)
        # where the stack crosses the capacity: the largest whole batch (context) that fits
        fits = lambda n: bool(at(np.array([float(n)]))["memory_bytes"][0] <= cap)  # noqa: E731
        hi = int(max(x.max(), 1) * 64)
        n = _largest(fits, 1, hi)
        notes = []
        if n < 1:
            notes.append(f"nothing fits: even {what} = 1 exceeds the capacity")
        elif n >= hi:
            notes.append(f"fits beyond {what} = {hi:,}")
        elif x.min() <= n <= x.max():
            ax.vlines(n, 0, cap / 1e9, color="crimson", lw=1.3, zorder=3)
            ax.plot([n], [cap / 1e9], "o", color="crimson", ms=6, zorder=4)
            ax.annotate(f"{what} = {n:,}", (n, cap / 1e9), xytext=(-4, 4), textcoords="offset points", ha="right",
                        va="bottom", fontsize=8, color="crimson", fontweight="bold")
            notes.append(f"largest {what} that fits: {n:,}")
        else:
            notes.append(f"largest {what} that fits: {n:,} (outside the plotted {x.min():g}-{x.max():g})")
        notes += [f"{k} at most {fmt_bytes(v.max() * 1e9)}: too thin to see" for k, v in thin.items()]
        ax.text(0.015, 0.975, "\n".join(notes), transform=ax.transAxes, va="top", fontsize=7.5, color="0.15")
        ax.set_xlim(x.min(), x.max())
        ax.set_ylim(0, ytop)
        ax.set_xlabel("batch size B (sequences per replica)" if axis == "batch" else "context S (tokens)")
        ax.set_ylabel("memory per device (GB = 1e9 bytes)" if lay.devices > 1 else "memory (GB = 1e9 bytes)")
        ax.set_title(s.label or "", fontsize=9)
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [Patch(color=c, alpha=0.85, label=k) for k, c in colours.items() if k in shown]
    handles += [Line2D([], [], color="k", ls="--", lw=1.3, label="device capacity"),
                Line2D([], [], color="crimson", lw=1.3, marker="o", ms=5,
                       label=f"where the stack crosses the capacity: the largest {'batch' if axis == 'batch' else 'context'}"
                             " that fits")]
    sub = f"context {fixed:g}" if axis == "batch" else f"batch {fixed:g}"
    fig.suptitle(f"Memory against {axis}: {common}\n{_formats(prec)}, {sub}\n{mode_line('sizes')}")
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), frameon=False, fontsize=7.5)
    fig.tight_layout(rect=(0, 0.05 if len(axes) > 1 else 0.07, 1, 1))
    return fig


# ---------------------------------------------------------------- KV cache of attention variants
def kv(models=("llama-2-13b", "llama-2-13b-gqa8", "llama-2-13b-mla", "llama-2-13b-cla2", "llama-2-13b-swa",
               "llama-2-13b-hybrid", "llama-2-13b-linear"), context=(512, 1024, 2048, 4096, 8192, 16384, 32768, 65536),
       kv_dtype="bf16", sets=None, hardware=None, tp=1, pp=1, ep=1):
    """KV cache per sequence against context (log-log lines, one per (model, layout)) and the
    average KV bytes per token at the largest context (bars on a linear axis, values printed).
    Contexts beyond a model's max_context are shaded and noted (computed anyway); lines that
    coincide are drawn as a wide line under a narrow one and named in a note. hardware (optional,
    names or a comma list) draws each device's memory capacity for scale; with a layout, one
    device's share.

    context: tokens (a list); kv_dtype: the cache format. Returns a matplotlib Figure."""
    plt = _plt()
    prec = api._prec("bf16", kv_dtype, "bf16")
    S = np.unique(api._positive(context, "--context"))
    ss, common = series(models, None, tp, pp, ep, sets, MAX_LINES, "kv")
    hws = [] if hardware is None else [load_hardware(h, sets) for h in api._required(hardware, "--hardware")]
    seqs = [np.asarray(engine.per_sequence(s.model, S, prec, layout=s.layout)["kv_bytes_per_seq"], float) for s in ss]
    names = [s.label or s.model.name for s in ss]
    # lines that coincide over two or more contexts hide each other: a halo marks the one underneath
    same, halos = {}, []
    for i, j in itertools.combinations(range(len(ss)), 2):
        eq = np.isclose(seqs[i], seqs[j], rtol=0.01)
        runs = np.flatnonzero(eq[:-1] & eq[1:])
        if runs.size:
            k0, k1 = int(runs[0]), int(runs[-1]) + 1
            where = ("at every context" if eq.all() else f"up to S = {S[k1]:g}" if k0 == 0
                     else f"from S = {S[k0]:g}" if k1 == len(S) - 1 else f"for S = {S[k0]:g}-{S[k1]:g}")
            same.setdefault(where, []).extend([names[i], names[j]])
            halos.append((i, k0, k1))
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12.5, 5.4), gridspec_kw={"width_ratios": [1, 1.55]})
    styles = ("-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)), (0, (1, 2)))
    for i, k0, k1 in dict.fromkeys(halos):
        a2.plot(S[k0:k1 + 1], np.maximum(seqs[i][k0:k1 + 1], 1) / 1e9, "-", color=_linestyle(i)[0], lw=7, alpha=0.3,
                solid_capstyle="round", zorder=2)
    for i, (s, seq) in enumerate(zip(ss, seqs)):
        c, mk = _linestyle(i)
        a2.plot(S, np.maximum(seq, 1) / 1e9, ls=styles[i % len(styles)], marker=mk, ms=5.5 - 0.3 * (i % 4),
                mfc="white" if i % 2 else c, color=c, lw=1.5, label=names[i], zorder=3 + 0.01 * i)
    per_tok = [seq[-1] / S[-1] / 1e3 for seq in seqs]
    y = np.arange(len(names))[::-1]
    a1.barh(y, per_tok, color=[_linestyle(i)[0] for i in range(len(names))])
    a1.set_yticks(y, names, fontsize=8)
    a1.grid(axis="y", visible=False)
    for yi, v in zip(y, per_tok):
        a1.text(v, yi, f" {v:.4g}", va="center", fontsize=7.5)
    a1.set_xlim(0, max(max(per_tok) * 1.22, 1e-9))
    a1.set_xlabel(f"KV kB per token, averaged over S = {S[-1]:,.0f} tokens (linear axis)")
    a2.set_xscale("log")
    a2.set_yscale("log")
    pos = np.concatenate([q[q > 0] for q in seqs])
    lo = float(pos.min() if pos.size else 1e6) / 1e9
    hi = max(max(q.max() for q in seqs) / 1e9, max([h.memory_capacity / 1e9 for h in hws], default=0))
    a2.set_ylim(lo / 2, hi * 3)
    a2.set_xlim(S[0] / 1.3, S[-1] * 1.3)
    for h in hws:
        a2.axhline(h.memory_capacity / 1e9, color="0.3", lw=1, ls=(0, (6, 3)), zorder=1)
        a2.annotate(f"{h.name}: {h.memory_capacity / 1e9:g} GB", (S[-1] * 1.3, h.memory_capacity / 1e9), xytext=(-3, 3),
                    textcoords="offset points", ha="right", va="bottom", fontsize=7, color="0.3")
    notes = []
    limits = sorted({s.model.max_context for s in ss if s.model.max_context < S[-1]})
    for c in limits:
        who = sorted({s.model.name for s in ss if s.model.max_context == c})
        a2.axvline(c, color="0.45", lw=0.9, ls=":", zorder=1)
        a2.axvspan(c, S[-1] * 1.3, color="0.5", alpha=0.08, zorder=0, lw=0)
        a2.annotate(f"max_context {c:,}", (c, lo / 2), xytext=(3, 3), textcoords="offset points", fontsize=7,
                    color="0.3", rotation=90, va="bottom")
        every = "all " if len(who) == len({s.model.name for s in ss}) and len(who) > 1 else ""
        notes.append(f"shaded: contexts beyond the max_context {c:,} of {every}{_names_list(who, 4)}, computed anyway "
                     "(the model was not trained this long)")
    for where, who in same.items():
        notes.append(f"coincide {where}: {', '.join(dict.fromkeys(who))} (a pale halo marks the lines underneath)")
    a2.set_xlabel("context S (tokens)")
    a2.set_ylabel("KV cache per sequence (GB)" + (" per device" if any(s.layout.devices > 1 for s in ss) else ""))
    readable_log(a2.xaxis)
    readable_log(a2.yaxis)
    _grid_minor(a2)
    a2.legend(frameon=True, framealpha=0.9, edgecolor="none", loc="upper left", fontsize=7.5)
    fig.suptitle(f"KV cache per sequence and per token: {common}, {_formats(prec, kv_only=True)}\n{mode_line('sizes')}")
    if notes:
        fig.text(0.01, 0.005, "\n".join(notes), fontsize=7, color="0.25", va="bottom")
    fig.tight_layout(rect=(0, 0.025 * len(notes) + 0.01, 1, 1))
    return fig


# ---------------------------------------------------------------- speculative decoding
def _cbar_ticks(lo: float, hi: float) -> list[float]:
    below = [t for t in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9) if t >= lo]
    below = below[:: max(1, -(-len(below) // 4))]
    above = [t for t in (1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30) if t <= hi]
    above = above[:: max(1, -(-len(above) // 5))]
    return [round(lo, 2)] * (lo < 0.95 and (not below or below[0] - lo > 0.08)) + below + [1.0] + above


def speculative(alpha=None, gamma=None, draft_cost=0.1, draft=None, target=None, hardware="h100-sxm", batch=1,
                context=1024, weights_dtype="bf16", kv_dtype=None, act_dtype="bf16", sets=None, mode="roofline",
                impl=None):
    """Speedup of speculative decoding over acceptance rate alpha x draft length gamma, with the
    break-even contour (speedup 1) and, for each alpha where speculation wins, the best gamma.

    Closed form (the default): a draft step costs draft_cost target steps and verifying gamma
    tokens costs one step. With draft and target models, both costs come from the engine on each
    device of `hardware` (one panel each) at `batch` sequences and `context` tokens, in `mode`
    (roofline or achievable). Returns a matplotlib Figure."""
    from matplotlib.colors import TwoSlopeNorm
    from matplotlib.lines import Line2D

    from .. import whatif

    plt = _plt()
    a = np.linspace(0.0, 0.99, 100) if alpha is None else whatif._unit_interval(alpha, "--alpha")
    g = np.arange(1, 17, dtype=float) if gamma is None else api._positive(gamma, "--gamma")
    a, g = np.unique(a), np.unique(g)
    panels = []
    if draft is None and target is None:
        c = float(api._positive(draft_cost, "--draft-cost", integer=False)[0])
        A, G = np.meshgrid(a, g, indexing="ij")
        panels.append(("", whatif.speedup(A, G, c)))
        head = (f"Speculative decoding, closed form: a draft step costs c = {c:g} target steps, verifying costs one\n"
                "speedup counted in target steps: no time is modelled")
    else:
        if draft is None or target is None:
            raise SpecError("--model", None, "the speculative plot takes DRAFT,TARGET: two models")
        api.check_mode(mode, impl, ("roofline", "achievable"), sets)
        hws = api._required(hardware, "--hardware")
        B = _one(batch, "--batch", "speculative")
        S = _one(context, "--context", "speculative")
        if len(hws) > MAX_PANELS:
            raise SpecError("--hardware", None, f"the speculative plot draws at most {MAX_PANELS} devices")
        d_name = t_name = ""
        for h in hws:
            t = whatif.speculative(alpha=a, gamma=g, draft=draft, target=target, hardware=h, batch=B, context=S,
                                   weights_dtype=weights_dtype, kv_dtype=kv_dtype, act_dtype=act_dtype, sets=sets,
                                   mode=mode, impl=impl)
            sp = np.asarray(t["speedup"], float).reshape(len(a), len(g))
            hwname = load_hardware(h, sets).name
            c = float(np.asarray(t["draft_cost"], float)[0])
            panels.append((f"{hwname}\na draft step costs {c:.3g} target steps", sp))
            d_name, t_name = str(t["draft"][0]), str(t["target"][0])
        head = (f"Speculative decoding: draft {d_name} for target {t_name}, batch {B:g}, context {S:g}\n"
                f"{mode_line(mode, impl)}")
    lo = min(float(np.min(p[1])) for p in panels)
    hi = max(float(np.max(p[1])) for p in panels)
    norm = TwoSlopeNorm(vcenter=1.0, vmin=min(lo, 0.99), vmax=max(hi, 1.01))
    n = len(panels)
    fig, axes = plt.subplots(1, n, figsize=(7.6 if n == 1 else 5.4 * n, 5.4), squeeze=False, sharey=True,
                             layout="constrained")
    axes = list(axes.ravel())
    im = None
    for ax, (title, sp) in zip(axes, panels):
        G, A = np.meshgrid(g, a)
        im = ax.pcolormesh(g, a, sp, shading="nearest", cmap="RdBu", norm=norm)
        if sp.min() < 1 < sp.max():
            cs = ax.contour(G, A, sp, levels=[1.0], colors="k", linewidths=1.5)
            for t in ax.clabel(cs, fmt={1.0: "break-even"}, fontsize=8):
                t.set_bbox({"facecolor": "white", "alpha": 0.85, "edgecolor": "none", "pad": 1.0})
        best = np.argmax(sp, axis=1)
        wins = sp[np.arange(len(a)), best] > 1
        ax.plot(g[best][wins], a[wins], "o", ms=3.5, mfc="white", mec="k", mew=0.6, ls="none")
        ax.set_xlabel("draft tokens per round (gamma)")
        ax.set_title(title, fontsize=9)
        ax.grid(False)
        if len(g) <= 20:
            ax.set_xticks(g[:: max(1, len(g) // 8)])
    axes[0].set_ylabel("acceptance rate (alpha)")
    axes[-1].legend(handles=[Line2D([], [], ls="none", marker="o", ms=4, mfc="white", mec="k",
                                    label="best gamma for each alpha (where speculation wins)"),
                             Line2D([], [], color="k", lw=1.5, label="break-even: speedup 1")],
                    loc="lower right", frameon=True, framealpha=0.9, edgecolor="none", fontsize=7.5)
    cb = fig.colorbar(im, ax=axes, label="speedup over plain decoding (below 1: slower)", pad=0.02)
    cb.set_ticks(_cbar_ticks(norm.vmin, norm.vmax))
    cb.set_ticklabels([f"{t:g}" for t in _cbar_ticks(norm.vmin, norm.vmax)])
    fig.suptitle(head)
    return fig


