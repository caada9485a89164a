"""Shared styling and helpers of every figure: the figure factory (no pyplot state), saving without timestamps,
series naming, log axes, label placement, panels."""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from .. import api
from ..errors import SpecError
from ..ops import Layout, Precision, check_layout
from ..specs import Hardware, Model, load_hardware, load_model
from ..timemodel import impl_name

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
    from ..fileio import atomic_path

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
    parts += [f"+{lay.redundant_experts} redundant experts"] if lay.redundant_experts else []
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


def _linestyle(i: int):
    return f"C{i % 10}", ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h")[i % 10]
