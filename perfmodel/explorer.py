"""perfmodel.explore(): an ipywidgets explorer for Jupyter.

Controls for model, hardware, batch, context, weight and KV formats, mode and tp redraw the
latency-throughput figure (the current batch ringed), the memory figure (the current batch marked)
and the per-op table of one decode step. Figures are rendered to PNG bytes in Image widgets, so the
explorer works headless too (its state is in .decode, .ops, .error and the widgets' values) and
nothing piles up in a notebook's figure list. Needs ipywidgets: pip install 'perfmodel[notebooks]'.
"""
from __future__ import annotations

import io
import warnings
from contextlib import contextmanager

BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
CONTEXTS = (128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)
TPS = (1, 2, 4, 8)
MODES = ("roofline", "achievable", "simple")
OP_COLUMNS = ["op", "layers", "flops", "bytes", "intensity", "time_s", "bound"]


def _widgets():
    try:
        import ipywidgets
    except ImportError:
        from .errors import SpecError

        raise SpecError("explore", None, "needs ipywidgets: pip install 'perfmodel[notebooks]'") from None
    return ipywidgets


def _options(base, value):
    return tuple(sorted(set(base) | {int(value)}))


class Explorer:
    """The explorer's widgets and the results they show. Display it in a notebook cell; move the
    controls, or set several at once with .set(batch=64, tp=2) (one redraw)."""

    def __init__(self, model="llama-2-13b", hardware="h100-sxm", batch=64, context=1024, weights_dtype="bf16",
                 kv_dtype="bf16", mode="roofline", tp=1):
        W = _widgets()
        from . import specs, whatif

        fmts = list(whatif.formats()["format"])
        _check(model, hardware, batch, context, weights_dtype, kv_dtype, mode, tp, fmts)
        self.controls = {
            "model": W.Dropdown(options=_names(specs.catalog_names("models"), model), value=model, description="model"),
            "hardware": W.Dropdown(options=_names(specs.catalog_names("hardware"), hardware), value=hardware,
                                   description="hardware"),
            "batch": W.SelectionSlider(options=_options(BATCHES, batch), value=int(batch), description="batch"),
            "context": W.SelectionSlider(options=_options(CONTEXTS, context), value=int(context),
                                         description="context"),
            "weights_dtype": W.Dropdown(options=fmts, value=weights_dtype, description="weights"),
            "kv_dtype": W.Dropdown(options=fmts, value=kv_dtype, description="KV cache"),
            "mode": W.ToggleButtons(options=MODES, value=mode, description="mode"),
            "tp": W.Dropdown(options=_options(TPS, tp), value=int(tp), description="tp"),
        }
        self.status = W.HTML()
        self.latency_image = W.Image(format="png")
        self.memory_image = W.Image(format="png")
        self.table = W.HTML()
        self.decode = self.ops = None  # DataFrames: the decode step at the current settings, its per-op table
        self.error = None  # the one-line reason when the current settings cannot be computed
        self.updates = 0
        self._held = False
        for w in self.controls.values():
            w.observe(self._changed, names="value")
        c = self.controls
        self.widget = W.VBox([
            W.HBox([W.VBox([c["model"], c["hardware"], c["tp"]]), W.VBox([c["batch"], c["context"]]),
                    W.VBox([c["weights_dtype"], c["kv_dtype"]])]),
            c["mode"], self.status, W.HBox([self.latency_image, self.memory_image]), self.table])
        self.update()

    # -- notebook display
    def _repr_mimebundle_(self, **kw):
        return self.widget._repr_mimebundle_(**kw)

    def _ipython_display_(self):
        from IPython.display import display

        display(self.widget)

    # -- state
    @property
    def settings(self) -> dict:
        return {k: w.value for k, w in self.controls.items()}

    @contextmanager
    def hold(self):
        """Change several controls with one redraw at the end."""
        self._held = True
        try:
            yield self
        finally:
            self._held = False
            self.update()

    def set(self, **values) -> "Explorer":
        """Set controls by name (model, hardware, batch, context, weights_dtype, kv_dtype, mode, tp)."""
        unknown = set(values) - set(self.controls)
        if unknown:
            raise TypeError(f"no control {', '.join(sorted(unknown))}; the controls are {', '.join(self.controls)}")
        with self.hold():
            for k, v in values.items():
                self.controls[k].value = v
        return self

    def _changed(self, _change):
        if not self._held:
            self.update()

    # -- the work
    def update(self):
        """Recompute the decode step, the figures and the per-op table for the current settings."""
        import perfmodel as pm

        from . import plots
        from .errors import ContextWarning, DataWarning, SpecError

        s = self.settings
        common = dict(weights_dtype=s["weights_dtype"], kv_dtype=s["kv_dtype"], act_dtype="bf16", tp=s["tp"])
        self.updates += 1
        notes = []
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ContextWarning)
                warnings.simplefilter("always", DataWarning)
                self.decode = pm.decode(s["model"], s["hardware"], batch=[s["batch"]], context=s["context"],
                                        mode=s["mode"], **common)
                ops_mode = "roofline" if s["mode"] == "simple" else s["mode"]
                ops = pm.intensity(s["model"], s["hardware"], batch=s["batch"], context=s["context"],
                                   phases=("decode",), mode=ops_mode, **common)
                self.ops = ops[OP_COLUMNS].reset_index(drop=True)
                lt = plots.latency_throughput(s["model"], s["hardware"], batch=list(BATCHES), context=s["context"],
                                              mode=s["mode"], **common)
                mem = plots.memory(s["model"], s["hardware"], batch=list(BATCHES), context=s["context"], **common)
            notes += list(dict.fromkeys(str(w.message) for w in caught
                                        if issubclass(w.category, (ContextWarning, DataWarning))))
            if s["mode"] == "simple":
                notes.append("the per-op table prices ops in mode roofline (simple has no per-op times)")
        except SpecError as e:
            self.error = str(e)
            self.status.value = f"<span style='color:#b00'>cannot compute these settings: {_esc(self.error)}</span>"
            return self
        self.error = None
        row = self.decode.iloc[0]
        ax = lt.axes[0]
        ax.scatter([row.throughput_tok_s], [row.latency_s * 1e3], s=260, facecolors="none", edgecolors="k",
                   linewidths=2, zorder=6)
        ax.annotate(f"now: B={int(row.batch)}", (row.throughput_tok_s, row.latency_s * 1e3), xytext=(0, -16),
                    textcoords="offset points", ha="center", va="top", fontsize=8, fontweight="bold")
        for a in mem.axes:
            if a.get_visible():
                a.axvline(s["batch"], color="k", lw=1.2, ls=":", zorder=5)
                a.annotate(f"now: B={s['batch']}", (s["batch"], 0), xytext=(3, 4), textcoords="offset points",
                           fontsize=8, fontweight="bold", color="white")
        self.latency_image.value = _png(lt)
        self.memory_image.value = _png(mem)
        figs = plots._plt()  # pyplot's figures in a kernel: closed, so that the explorer shows only its images
        figs.close(lt)
        figs.close(mem)
        human = pm.human(self.decode[["latency_s", "throughput_tok_s", "weight_bytes", "kv_cache_bytes",
                                      "memory_bytes", "fits", "bound"]])
        summary = ", ".join(f"{k} {v}" for k, v in human.iloc[0].items())
        self.status.value = (f"<b>{_esc(s['model'])} on {_esc(s['hardware'])}, B={s['batch']}, S={s['context']}"
                             f"</b>: {_esc(summary)} ({_esc(plots.mode_line(s['mode']))})"
                             + "".join(f"<br><span style='color:#a60'>{_esc(n)}</span>" for n in notes))
        self.table.value = pm.human(self.ops).to_html(index=False, border=0)
        return self


def _check(model, hardware, batch, context, weights_dtype, kv_dtype, mode, tp, fmts) -> None:
    """The starting settings, checked before any widget is made: one line naming the argument (a widget would
    raise its own TraitError on a value outside its options)."""
    from . import specs
    from .errors import SpecError

    for name, v, top in (("batch", batch, 10**6), ("context", context, 10**8), ("tp", tp, 1024)):
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= top:
            raise SpecError(f"{name}=", None, f"must be a whole number from 1 to {top:,}, got {v!r}")
    for name, v in (("weights_dtype", weights_dtype), ("kv_dtype", kv_dtype)):
        if v not in fmts:
            raise SpecError(f"{name}=", None, f"must be one of the formats the explorer offers ({', '.join(fmts)}), "
                                              f"got {v!r}")
    if mode not in MODES:
        raise SpecError("mode=", None, f"must be one of {', '.join(MODES)}, got {mode!r}")
    for name, v, load in (("model", model, specs.load_model), ("hardware", hardware, specs.load_hardware)):
        if not isinstance(v, str):
            raise SpecError(f"{name}=", None, f"must be a catalog name or a file path (text), got {type(v).__name__}")
        load(v)  # a bad name or file is its one line now, not a widget's error later


def _names(catalog, value):
    return list(catalog) if value in catalog else [value, *catalog]


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=72, metadata={"Software": None}, bbox_inches="tight")
    return buf.getvalue()


def _esc(text) -> str:
    import html

    return html.escape(str(text))
