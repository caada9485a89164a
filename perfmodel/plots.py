"""Figures for reports. Every plot is built from the same queries the CLI and the notebooks use and
returns a matplotlib Figure that a notebook can restyle. matplotlib is imported here only.

Every kind that draws a model on a device takes comma lists (or Python lists) of models and
hardware and the layout arguments tp, pp and ep (each an int or a list); it draws one series per
(model, hardware, layout), named in a legend or a panel title by what varies, with what is common
in the figure title. A combination that cannot be drawn (a tp that does not divide the heads, more
panels than a figure holds) is one SpecError naming the option.

Every figure states what its times are: mode roofline (the ideal bound), achievable (an estimate
of a good implementation, `impl=` a profile) or simple; figures without modelled times say so.

Deterministic: fixed styles, label placement computed from the geometry, and no timestamps in saved
files (see save()): the same input gives the same bytes.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from . import api, engine
from .errors import SpecError
from .ops import ATTENTION, COMM, MATMUL, Layout, Precision, build_ops, check_layout
from .specs import Hardware, Model, load_hardware, load_model
from .timemodel import impl_name
from .units import fmt_bytes

KINDS = ("roofline", "latency-throughput", "memory", "kv", "speculative", "serving", "validation", "published",
         "capacity")
MAX_PANELS = 6    # small multiples per figure (roofline, memory)
MAX_LINES = 10    # series on one set of axes (latency-throughput, kv)
MAX_SERVING = 4   # series of the serving timeline (two policies each)
MAX_CAPACITY = 6  # series of the capacity figure (each a goodput search and a rate sweep)


class _Figures:
    """The two pyplot calls the plots make (subplots, close), on matplotlib's object API with the Agg canvas:
    no pyplot, so no GUI backend and no figure manager are imported (a cold `perfmodel plot` is ~0.2 s
    faster); figures are freed when unreferenced, so close() has nothing to do."""

    _SUB = ("sharex", "sharey", "squeeze", "width_ratios", "height_ratios", "subplot_kw", "gridspec_kw")

    def __init__(self, matplotlib):
        self.rcParams = matplotlib.rcParams

    def subplots(self, nrows=1, ncols=1, **kw):
        import sys

        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        if "ipykernel" in sys.modules or "matplotlib.pyplot" in sys.modules:
            # in Jupyter (or where the user drives pyplot) a figure belongs to pyplot, which shows it
            import matplotlib.pyplot as plt

            return plt.subplots(nrows, ncols, **kw)
        sub = {k: kw.pop(k) for k in self._SUB if k in kw}
        fig = Figure(**kw)
        FigureCanvasAgg(fig)
        return fig, fig.subplots(nrows, ncols, **sub)

    def close(self, fig=None) -> None:
        import sys

        if "matplotlib.pyplot" in sys.modules and fig is not None:
            sys.modules["matplotlib.pyplot"].close(fig)


def _plt():
    import matplotlib

    matplotlib.rcParams.update({"font.size": 10, "axes.titlesize": 10, "axes.labelsize": 10, "legend.fontsize": 8,
                                "figure.dpi": 100, "savefig.dpi": 150, "svg.hashsalt": "perfmodel",
                                "axes.grid": True, "grid.alpha": 0.3, "figure.titlesize": 11})
    return _Figures(matplotlib)


def save(fig, path) -> str:
    """Save with no creation dates, so the same input gives the same bytes (.png, .svg or .pdf)."""
    path = str(path)
    ext = path.rsplit(".", 1)[-1].lower()
    meta = {"png": {"Software": None}, "svg": {"Date": None}, "pdf": {"CreationDate": None, "ModDate": None}}
    if ext not in meta:
        raise SpecError("-o", None, f"write .png, .svg or .pdf, got {path!r}")
    from .fileio import atomic_path

    with atomic_path(path, "-o") as tmp:  # the figure appears whole or not at all
        fig.savefig(tmp, format=ext, metadata=meta[ext], bbox_inches="tight")
    return path


# ---------------------------------------------------------------- what every figure says
MODE_LINES = {
    "roofline": "mode roofline: the ideal bound (datasheet peaks, no overheads; no real system is faster)",
    "simple": "mode simple: the lecture's memory-bound closed form, an ideal bound",
    "sizes": "sizes only: no time is modelled",
}


def mode_line(mode, impl=None) -> str:
    """The line every figure carries about its times."""
    if mode == "achievable":
        return f"mode achievable: an estimate of a good implementation (impl {impl_name(impl)}), not a bound"
    return MODE_LINES[mode]


def _formats(prec: Precision, kv_only=False) -> str:
    wf, af, kf, _ = prec.formats()
    if kv_only:
        return f"KV {kf.name}"
    return f"weights {wf.name}, activations {af.name}, KV {kf.name}"


# ---------------------------------------------------------------- series: (model, hardware, layout)
@dataclass(frozen=True)
class Series:
    model: Model
    hardware: Hardware | None
    layout: Layout
    label: str  # what distinguishes it from the other series of the figure ("" when it is alone)


def _whole_list(v, opt) -> list[int]:
    """tp / pp / ep: an int, a list of ints or a comma string, each a positive whole number."""
    if v is None:
        return [1]
    parts = [p.strip() for p in v.split(",") if p.strip()] if isinstance(v, str) else list(np.atleast_1d(v))
    out = []
    for p in parts:
        try:
            x = float(p)
        except (TypeError, ValueError):
            x = float("nan")
        if isinstance(p, bool) or not np.isfinite(x) or x < 1 or x != int(x):
            raise SpecError(opt, None, f"must be positive whole numbers, got {v!r}")
        out.append(int(x))
    if not out:
        raise SpecError(opt, None, f"needs at least one value, got {v!r}")
    return list(dict.fromkeys(out))


def layout_label(lay: Layout) -> str:
    if lay.devices == 1:
        return "1 device"
    parts = [f"{k}={getattr(lay, k)}" for k in ("tp", "pp", "ep") if getattr(lay, k) > 1]
    return " ".join(parts) + f" ({lay.devices} devices)"


def _names_list(items, limit=3, what="models") -> str:
    items = list(dict.fromkeys(items))
    if len(items) <= limit and sum(len(i) + 2 for i in items) <= 75:
        return ", ".join(items)
    return f"{len(items)} {what}"


def series(models, hardware=None, tp=1, pp=1, ep=1, sets=None, limit=None, kind="plot") -> tuple[list, str]:
    """One Series per (model, hardware, layout), and the title part they share.

    hardware=None: series without a device (the kv plot). A layout a model cannot take is one
    SpecError that names the option and the series; more series than `limit` another."""
    ms = [load_model(m, sets) for m in api._required(models, "--model")]
    hws = [None] if hardware is None else [load_hardware(h, sets) for h in api._required(hardware, "--hardware")]
    lays = [api.layout(t, p, e) for t, p, e in itertools.product(_whole_list(tp, "--tp"), _whole_list(pp, "--pp"),
                                                                 _whole_list(ep, "--ep"))]
    combos = list(itertools.product(ms, hws, lays))
    if limit is not None and len(combos) > limit:
        raise SpecError("--model/--hardware/--tp", None,
                        f"{len(ms)} models x {len(hws)} devices x {len(lays)} layouts is {len(combos)} series; the "
                        f"{kind} plot draws at most {limit}")
    for m, _, lay in combos:
        try:
            check_layout(m, lay)
        except SpecError as e:
            raise SpecError(e.where, e.field, f"{e.problem}, so the series {m.name}, {layout_label(lay)} cannot "
                                              "be drawn") from None
    vary_m = len({m.name for m in ms}) > 1
    vary_h = len({h.name for h in hws if h is not None}) > 1
    vary_l = len(lays) > 1
    out = []
    for m, h, lay in combos:
        parts = ([m.name] if vary_m else []) + ([h.name] if vary_h else []) + ([layout_label(lay)] if vary_l else [])
        out.append(Series(m, h, lay, ", ".join(parts)))
    common = []
    common.append(_names_list([m.name for m in ms]) if vary_m else ms[0].name)
    if hws[0] is not None:
        common.append("on " + (_names_list([h.name for h in hws], 3, "hardware specs") if vary_h else hws[0].name))
    if not vary_l and lays[0].devices > 1:
        common.append(layout_label(lays[0]))
    return out, " ".join(common[:2]) + (", " + common[2] if len(common) > 2 else "")


def _one(values, opt, kind) -> float:
    a = api._positive(values, opt)
    if a.size != 1:
        raise SpecError(opt, None, f"the {kind} plot takes one value, got {len(a)}")
    return float(a[0])


# ---------------------------------------------------------------- axes helpers
def _num(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1e6:
        return f"{v / 1e6:g}M"
    if abs(v) >= 1e4:
        return f"{v / 1e3:g}k"
    return f"{v:.6g}"


def readable_log(axis, fmt=_num) -> None:
    """Log ticks a reader can read values off: labels at 1, 2, 5 (every digit on a short axis) of
    each decade, plain numbers (no 4.2x10^1), and a gridline at every digit."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    lo, hi = sorted(axis.get_view_interval())
    lo = max(lo, 1e-300)
    decades = np.log10(hi / lo)
    subs = ((1, 2, 3, 4, 5, 6, 7, 8, 9) if decades <= 1.2 else (1, 2, 3, 5) if decades <= 2.5
            else (1, 2, 5) if decades <= 4 else (1,))
    d0, d1 = int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi)))
    major = [s * 10.0 ** d for d in range(d0, d1 + 1) for s in subs]
    minor = [s * 10.0 ** d for d in range(d0, d1 + 1) for s in range(1, 10) if s not in subs]
    major = [x for x in major if lo * 0.999 <= x <= hi * 1.001]
    minor = [x for x in minor if lo <= x <= hi]
    if minor and major and decades <= 3.5:  # an end of the axis with no label gets the digit nearest the end
        below = [x for x in minor if x < min(major) / 1.4]
        above = [x for x in minor if x > max(major) * 1.4]
        if below and min(major) / lo > 1.25:
            major.append(min(below))
        if above and hi / max(major) > 1.25:
            major.append(max(above))
        major = sorted(set(major))
        minor = [x for x in minor if x not in major]
    axis.set_major_locator(FixedLocator(major))
    axis.set_minor_locator(FixedLocator(minor))
    axis.set_major_formatter(FuncFormatter(lambda v, _: fmt(v)))
    axis.set_minor_formatter(NullFormatter())


def _time_tick(v: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if v >= scale * 0.999:
            return f"{v / scale:.6g} {unit}"
    return f"{v:.3g} s"


def _grid_minor(ax):
    ax.grid(True, which="major", alpha=0.35)
    ax.grid(True, which="minor", alpha=0.12)


_OFFSETS = ((5, 4, "left", "bottom"), (5, -4, "left", "top"), (-5, 4, "right", "bottom"), (-5, -4, "right", "top"),
            (0, 7, "center", "bottom"), (0, -7, "center", "top"), (9, 0, "left", "center"), (-9, 0, "right", "center"))


class Labeller:
    """Places point labels where they hit no other label, marker, line or legend (first free
    offset of eight around the point; a label with no free place is left out). Call after the
    layout and the axis limits are final."""

    def __init__(self, ax):
        self.ax, self.fig = ax, ax.figure
        self.r = self.fig.canvas.get_renderer()
        self.box = ax.get_window_extent(self.r)
        self.placed = []
        self.pts = np.zeros((0, 3))  # display x, y, radius

    def avoid_points(self, x, y, radius_pt=4.0):
        xy = self.ax.transData.transform(np.column_stack([np.asarray(x, float), np.asarray(y, float)]))
        r = np.full((len(xy), 1), radius_pt * self.fig.dpi / 72)
        self.pts = np.vstack([self.pts, np.hstack([xy, r])])

    def avoid_line(self, x, y, width_pt=1.5):
        xy = self.ax.transData.transform(np.column_stack([np.asarray(x, float), np.asarray(y, float)]))
        samples = [xy[:1]]
        for a, b in zip(xy[:-1], xy[1:]):
            n = max(2, int(np.hypot(*(b - a)) / 2.0))
            samples.append(a + (b - a) * np.linspace(0, 1, n)[:, None])
        s = np.vstack(samples)
        self.pts = np.vstack([self.pts, np.hstack([s, np.full((len(s), 1), width_pt * self.fig.dpi / 72)])])

    def avoid_artist(self, artist):
        self.placed.append(artist.get_window_extent(self.r))

    def _free(self, bb) -> bool:
        if bb.x0 < self.box.x0 or bb.x1 > self.box.x1 or bb.y0 < self.box.y0 or bb.y1 > self.box.y1:
            return False
        if any(bb.overlaps(p) for p in self.placed):
            return False
        if len(self.pts):
            dx = np.maximum.reduce([bb.x0 - self.pts[:, 0], np.zeros(len(self.pts)), self.pts[:, 0] - bb.x1])
            dy = np.maximum.reduce([bb.y0 - self.pts[:, 1], np.zeros(len(self.pts)), self.pts[:, 1] - bb.y1])
            if np.any(np.hypot(dx, dy) < self.pts[:, 2]):
                return False
        return True

    def label(self, x, y, text, color="k", fontsize=7, offsets=_OFFSETS) -> bool:
        for dx, dy, ha, va in offsets:
            t = self.ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va,
                                 fontsize=fontsize, color=color)
            bb = t.get_window_extent(self.r)
            if self._free(bb):
                self.placed.append(bb)
                return True
            t.remove()
        return False


def _label_order(n: int) -> list[int]:
    """Ends first, then the middle, then the rest: the labels most worth keeping are placed first."""
    if n <= 2:
        return list(range(n))
    order, seen = [0, n - 1], {0, n - 1}
    step = n
    while len(order) < n:
        step = max(1, step // 2)
        for i in range(0, n, step):
            if i not in seen:
                order.append(i)
                seen.add(i)
    return order


def _panels(plt, n, width=5.6, height=4.2, sharex=True, sharey=True):
    cols = 1 if n == 1 else 2 if n in (2, 4) else 3
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols if n > 1 else width * 1.35, height * rows + 0.9),
                             sharex=sharex, sharey=sharey, squeeze=False)
    flat = list(axes.ravel())
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n], axes


# ---------------------------------------------------------------- roofline
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
def _linestyle(i: int):
    return f"C{i % 10}", ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h")[i % 10]


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

    from . import whatif

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
        from .measure.suite import resolve
        from .measure.validate import validate

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

    from . import serving as sv

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
             slots=256, token_budget=2048, requests=None, seeds=3, seed=0, sets=None, max_tokens=None):
    """Percentile TTFT (left) and TPOT (right) against the Poisson arrival rate, with the SLO lines and each
    series' goodput marked: one series per (hardware, layout[, disaggregated split]) that
    perfmodel.serving.capacity searched (gpus: every layout of N devices; tp: one layout or a list).
    Each curve is the median seed's simulations at fractions of its goodput, every measured request run
    to its end (so a curve past the goodput shows how fast the queue grows). Returns a Figure."""
    from .serving import capacity as cap

    plt = _plt()
    tps = [None] if tp is None else _whole_list(tp, "--tp")
    entries, summary = [], None
    for t in tps:
        _, summary = cap.run(model, hardware, gpus, t, 1, ep, replicas, prompt_len, output_len, slo_ttft, slo_tpot,
                             percentile, mode, impl, disaggregate, None, slots, token_budget, requests, seeds, seed,
                             0.05, 16, 16, "bf16", None, "bf16", sets, max_tokens, keep=True)
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
    for i, e in enumerate(entries):
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
    fig.tight_layout(rect=(0, 0.08 + 0.03 * ((len(labels) - 1) // 3), 1, 1))
    return fig


# ---------------------------------------------------------------- validation against published measurements
def published(table=None, path=None):
    """Published end-to-end measurements against the engine: the fraction of the roofline bound each
    measurement reached (left: at most 1 when the bound holds) and the achievable estimate's error
    (right, with the +-25% band), one row per case, grouped by category. Returns a Figure."""
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
