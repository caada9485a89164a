"""Plots: each kind builds from the API, draws one series per (model, hardware, layout), labels its
axes with units, states its mode, reads well (the findings of issue 16) and renders deterministically."""
import gc
import io
import itertools
from pathlib import Path

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

import perfmodel as pm  # noqa: E402
from perfmodel import plots  # noqa: E402
from perfmodel.cli import main  # noqa: E402

RUN = Path(__file__).resolve().parent.parent / "docs" / "validation" / "cpu-quick"

CASES = {
    "roofline": lambda: plots.roofline(batch=[1, 64], context=1024),
    "roofline_achievable": lambda: plots.roofline(batch=[1, 64], mode="achievable"),
    "roofline_panels": lambda: plots.roofline("llama-2-13b,mixtral-8x7b", "h100-sxm", batch=[1, 64]),
    "latency_throughput": lambda: plots.latency_throughput(batch=[1, 16, 256, 1024]),
    "latency_throughput_devices": lambda: plots.latency_throughput("llama-3.1-8b", "h100-sxm,mi300x,rtx-4090",
                                                                   batch=[1, 8, 64, 512]),
    "memory": lambda: plots.memory(batch=[1, 32, 64, 128]),
    "memory_context": lambda: plots.memory("llama-3.1-8b", "rtx-4090", batch=4, axis="context",
                                           context=[1024, 8192, 32768]),
    "kv": lambda: plots.kv(context=[1024, 8192, 65536]),
    "speculative": lambda: plots.speculative(draft_cost=0.2),
    "speculative_models": lambda: plots.speculative(draft="llama-2-7b", target="llama-2-70b", batch=16),
    "validation": lambda: plots.validation(RUN),
    "serving": lambda: plots.serving(requests=16, slots=4, output_len="lognormal:median=8,max=64"),
}


def _svg(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    return buf.getvalue()


def _texts(fig) -> str:
    parts = [fig._suptitle.get_text() if fig._suptitle else ""] + [t.get_text() for t in fig.texts]
    for ax in fig.axes:
        parts += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()] + [t.get_text() for t in ax.texts]
        if ax.get_legend():
            parts += [t.get_text() for t in ax.get_legend().get_texts()]
    for leg in fig.legends:
        parts += [t.get_text() for t in leg.get_texts()]
    return "\n".join(parts)


def _legend(ax_or_fig) -> list[str]:
    legs = ax_or_fig.legends if hasattr(ax_or_fig, "legends") else [ax_or_fig.get_legend()]
    return [t.get_text() for leg in legs if leg for t in leg.get_texts()]


def test_drawing_a_figure_never_imports_pyplot(tmp_path):
    """pyplot (a GUI backend, a figure manager) is a fifth of a cold `perfmodel plot`; the plots never need it."""
    import subprocess
    import sys

    code = ("import sys; from perfmodel.cli import main; "
            f"main(['plot', 'roofline', '-o', {str(tmp_path / 'r.png')!r}]); print('matplotlib.pyplot' in sys.modules)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.strip().splitlines()[-1] == "False", p.stderr


@pytest.mark.parametrize("name", CASES)
def test_each_plot_is_a_figure_with_labelled_axes_a_title_and_its_mode(name):
    fig = CASES[name]()
    axes = [a for a in fig.axes if a.get_label() != "<colorbar>" and a.get_visible()]
    assert all(ax.get_xlabel() or any(o.get_xlabel() for o in ax.get_shared_x_axes().get_siblings(ax))
               for ax in axes), name
    assert any(ax.get_ylabel() for ax in axes), name
    assert any(a.get_title() for a in fig.axes) or fig._suptitle is not None
    text = _texts(fig)
    # every figure says what its times are: the ideal bound, an estimate, or no time at all
    assert ("mode roofline" in text or "mode achievable: an estimate" in text or "no time is modelled" in text), name
    if "roofline" in name or "latency" in name:
        assert "mode roofline: the ideal bound" in text or "mode achievable: an estimate" in text


def test_the_published_figure_states_both_modes():
    text = _texts(plots.published())
    assert "mode roofline, the ideal bound" in text and "mode achievable, an estimate" in text


@pytest.mark.parametrize("name", CASES)
def test_each_plot_renders_the_same_bytes_twice(name):
    assert _svg(CASES[name]()) == _svg(CASES[name]())


def test_png_files_are_byte_identical_across_saves(tmp_path):
    a, b = tmp_path / "a.png", tmp_path / "b.png"
    plots.save(plots.latency_throughput(batch=[1, 64]), a)
    plots.save(plots.latency_throughput(batch=[1, 64]), b)
    assert a.read_bytes() == b.read_bytes()


# ---------------------------------------------------------------- comma lists and layouts
def test_series_are_one_per_model_hardware_and_layout_named_by_what_varies():
    ss, common = plots.series("llama-3.1-8b", "h100-sxm,mi300x", tp=[1, 2])
    assert [s.label for s in ss] == ["NVIDIA H100 SXM5 80GB, 1 device", "NVIDIA H100 SXM5 80GB, tp=2 (2 devices)",
                                     "AMD Instinct MI300X, 1 device", "AMD Instinct MI300X, tp=2 (2 devices)"]
    assert common.startswith("llama-3.1-8b on NVIDIA H100 SXM5 80GB, AMD Instinct MI300X")


def test_latency_throughput_draws_one_coloured_curve_per_device_with_full_names():
    fig = plots.latency_throughput("llama-3.1-8b", "h100-sxm,mi300x,rtx-4090", batch=[1, 8, 64, 512])
    ax = fig.axes[0]
    solid = [ln for ln in ax.lines if ln.get_linestyle() == "-" and not ln.get_label().startswith("_")]
    assert [ln.get_label() for ln in solid] == ["NVIDIA H100 SXM5 80GB", "AMD Instinct MI300X",
                                                "NVIDIA GeForce RTX 4090"]
    assert len({ln.get_color() for ln in solid}) == 3
    for ln, hw in zip(solid, ("h100-sxm", "mi300x", "rtx-4090")):  # no zig-zag: each line is one device's points
        d = pm.decode("llama-3.1-8b", hw, batch=[1, 8, 64, 512])
        x = ln.get_xdata()
        assert np.allclose(x, d.throughput_tok_s[: len(x)])
    assert "NVIDIA H100 SXM5 80GB, AMD Instinct MI300X, NVIDIA GeForce RTX 4090" in ax.get_title()


def test_a_layout_list_draws_70b_on_eight_gpus():
    fig = plots.latency_throughput("llama-3.1-70b", "h100-sxm", tp=[2, 4, 8], batch=[1, 16, 64])
    labels = _legend(fig.axes[0])
    assert labels[:3] == ["tp=2 (2 devices)", "tp=4 (4 devices)", "tp=8 (8 devices)"]
    d = pm.decode("llama-3.1-70b", "h100-sxm", batch=[1, 16, 64], tp=8)
    line = next(ln for ln in fig.axes[0].lines if ln.get_label() == "tp=8 (8 devices)")
    assert np.allclose(line.get_ydata(), d.latency_s[: len(line.get_ydata())] * 1e3)


@pytest.mark.parametrize("kind,kw", [
    ("roofline", {}), ("memory", {}), ("kv", {}),
    ("serving", {"requests": 8, "slots": 2, "output_len": "lognormal:median=4,max=16"}),
])
def test_every_model_kind_takes_comma_lists(kind, kw):
    fn = {"roofline": plots.roofline, "memory": plots.memory, "kv": plots.kv, "serving": plots.serving}[kind]
    fig = fn("llama-2-13b,llama-3.1-8b", **kw)
    text = _texts(fig)
    assert "llama-2-13b" in text and "llama-3.1-8b" in text


def test_a_combination_that_cannot_be_drawn_is_one_error_naming_the_option():
    with pytest.raises(pm.SpecError, match=r"--tp: llama-2-13b has 40 query heads, not divisible by tp=3.*cannot be drawn"):
        plots.latency_throughput("llama-2-13b", tp=3)
    with pytest.raises(pm.SpecError, match="at most 6"):
        plots.roofline("llama-2-13b,llama-2-7b,llama-3.1-8b,mistral-7b", "h100-sxm,mi300x")
    with pytest.raises(pm.SpecError, match="--ep: llama-2-13b has no experts"):
        plots.memory("llama-2-13b", ep=2)
    with pytest.raises(pm.SpecError, match="--tp: must be positive whole numbers"):
        plots.roofline(tp="2,x")


# ---------------------------------------------------------------- roofline
def test_roofline_draws_one_roof_per_distinct_relevant_peak_in_tflops():
    fig = plots.roofline(batch=[1, 256])
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert "TFLOP/s" in ax.get_ylabel() and "FLOP" in ax.get_xlabel()
    roofs = sorted({round(float(ln.get_ydata().max()), 3) for ln in ax.lines if len(ln.get_xdata()) == 400})
    hw = pm.load_hardware("h100-sxm")  # bf16 matmuls at the bf16 peak; elementwise at the fp32 vector peak
    assert roofs == sorted({round(hw.peak_flops["bf16"] / 1e12, 3), round(hw.peak_flops["fp32"] / 1e12, 3)})
    assert any("ridge 295" in t.get_text() for t in ax.texts)
    assert max(ax.get_ylim()) < 1e4  # TFLOP/s, not FLOP/s
    assert all("x10" not in t.get_text() and "^" not in t.get_text() for t in ax.get_yticklabels())


def test_roofline_tells_moe_expert_matmuls_apart_and_keeps_a_compact_legend():
    fig = plots.roofline("mixtral-8x7b", batch=[1, 64])
    labels = _legend(fig)
    assert any(lab.startswith("expert matmuls") for lab in labels)
    assert any(lab.startswith("weight matmuls") for lab in labels)
    assert len(labels) <= 8
    leg = fig.legends[0].get_window_extent(fig.canvas.get_renderer())
    ax = fig.axes[0].get_window_extent(fig.canvas.get_renderer())
    assert leg.y1 <= ax.y0  # below the axes, not beside them
    assert "expert matmuls" not in "".join(_legend(plots.roofline("llama-2-13b", batch=[1])))


def test_roofline_markers_where_batches_coincide_are_drawn_once_and_labelled_with_the_range():
    fig = plots.roofline(batch=[1, 8, 64, 256])
    ax = fig.axes[0]
    assert any(t.get_text() == "B=1-256" for t in ax.texts)  # decode attention sits at one point for every B
    offsets = [tuple(np.round(np.log10(c.get_offsets()[0]), 2)) for c in ax.collections if len(c.get_offsets())]
    sizes = [(o, tuple(c.get_facecolor().ravel().round(2))) for o, c in
             zip(offsets, [c for c in ax.collections if len(c.get_offsets())])]
    assert len(sizes) == len(set(sizes))  # no two markers of one trail on the same spot


def test_roofline_with_a_layout_notes_the_collectives():
    fig = plots.roofline("llama-3.1-70b", "h100-sxm", tp=8, batch=[1, 64])
    assert "collectives (link-bound, not drawn)" in _texts(fig)


# ---------------------------------------------------------------- latency-throughput
def _overlaps(boxes):
    return [(a, b) for a, b in itertools.combinations(boxes, 2) if a.overlaps(b)]


def test_latency_throughput_ticks_are_plain_and_dense_enough_to_read_8_ms():
    fig = plots.latency_throughput(["llama-2-13b", "llama-2-13b-gqa8", "llama-2-13b-mla"])
    ax = fig.axes[0]
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert all(("×" not in t and "^" not in t and "e" not in t) for t in labels + [
        t.get_text() for t in ax.get_xticklabels()]), labels
    ticks = [float(t) for t in labels]
    assert {10.0, 20.0, 30.0, 50.0} <= set(ticks)
    minor = ax.yaxis.get_minorticklocs()
    assert any(abs(m - 8) < 1e-9 for m in minor)  # a gridline at 8 ms
    assert "NVIDIA H100 SXM5 80GB" in ax.get_title()


def test_latency_throughput_batch_labels_collide_with_nothing():
    fig = plots.latency_throughput(["llama-2-13b", "llama-2-13b-gqa8", "llama-2-13b-mla"])
    ax = fig.axes[0]
    r = fig.canvas.get_renderer()
    labels = [t for t in ax.texts if t.get_text().startswith("B=")]
    assert len(labels) >= 12
    boxes = [t.get_window_extent(r) for t in labels] + [ax.get_legend().get_window_extent(r)]
    assert not _overlaps(boxes)
    for line in ax.lines:  # no label sits on a curve
        xy = ax.transData.transform(np.column_stack([line.get_xdata(), line.get_ydata()]))
        for a, b in zip(xy[:-1], xy[1:]):
            pts = a + (b - a) * np.linspace(0, 1, 50)[:, None]
            for bb in boxes[:-1]:
                assert not np.any((pts[:, 0] > bb.x0) & (pts[:, 0] < bb.x1) & (pts[:, 1] > bb.y0) & (pts[:, 1] < bb.y1))


def test_latency_throughput_marks_what_does_not_fit():
    fig = plots.latency_throughput(models="llama-2-13b", batch=[1, 64, 256])
    assert any("does not fit" in lab for lab in _legend(fig.axes[0]))
    assert "ms" in fig.axes[0].get_ylabel() and "tokens/s" in fig.axes[0].get_xlabel()
    hollow = [c for c in fig.axes[0].collections if len(c.get_offsets()) and
              np.allclose(c.get_facecolor()[0][:3], 1.0)]
    assert len(hollow[0].get_offsets()) == 1  # B = 256 does not fit on one H100


# ---------------------------------------------------------------- memory
def test_memory_marks_the_largest_batch_that_fits_where_the_stack_crosses_capacity():
    fig = plots.memory(batch=[1, 32, 64, 128])
    ax = fig.axes[0]
    (n,) = [int(t.get_text().split("= ")[1].replace(",", "")) for t in ax.texts if t.get_text().startswith("B = ")]
    d = pm.decode(batch=[n, n + 1])
    assert list(d.fits) == [True, False]
    assert any("capacity 80 GB" in t.get_text() for t in ax.texts)
    # the activations band is too thin to see: no legend entry, a note instead
    assert "activations" not in _legend(fig)
    assert any("activations at most" in t.get_text() for t in ax.texts)


def test_memory_against_context_finds_the_largest_context():
    fig = plots.memory("llama-3.1-8b", "rtx-4090", batch=4, axis="context", context=[1024, 8192, 32768])
    (n,) = [int(t.get_text().split("= ")[1].replace(",", "")) for t in fig.axes[0].texts
            if t.get_text().startswith("S = ")]
    d = pm.decode("llama-3.1-8b", "rtx-4090", batch=4, context=[n, n + 1])
    assert list(d.fits) == [True, False]


def test_memory_with_a_layout_is_per_device():
    fig = plots.memory("llama-3.1-70b", "h100-sxm", tp=[1, 8], batch=[1, 64])
    assert len([a for a in fig.axes if a.get_visible()]) == 2
    assert "per device" in fig.axes[1].get_ylabel()
    assert "nothing fits" in _texts(fig)  # 70B in bf16 on one 80 GB device


# ---------------------------------------------------------------- kv
def test_kv_bars_are_linear_and_contexts_beyond_max_context_are_noted():
    fig = plots.kv(context=[1024, 2048, 4096, 65536])
    bars, lines = fig.axes[0], fig.axes[1]
    assert bars.get_xscale() == "linear"
    assert lines.get_xscale() == "log" and lines.get_yscale() == "log"
    text = _texts(fig)
    assert "beyond the max_context 4,096" in text
    assert "coincide" in text and "llama-2-13b-swa" in text  # the base and the window agree up to the window


def test_kv_lines_that_coincide_get_a_halo():
    fig = plots.kv("llama-3.1-8b,mixtral-8x7b", context=[1024, 8192])
    halos = [ln for ln in fig.axes[1].lines if ln.get_linewidth() > 5]
    assert len(halos) == 1


def test_kv_within_max_context_has_no_note():
    fig = plots.kv("llama-3.1-8b", context=[1024, 8192])
    assert "max_context" not in _texts(fig)


# ---------------------------------------------------------------- speculative
def test_speculative_colourbar_has_ticks_below_one_and_dots_only_where_speculation_wins():
    fig = plots.speculative(draft_cost=0.3)
    ax, cbar = fig.axes[0], fig.axes[-1]
    ticks = [float(t.get_text()) for t in cbar.get_yticklabels() if t.get_text()]
    assert any(t < 1 for t in ticks) and any(t > 1 for t in ticks) and 1.0 in ticks
    assert any("break-even" in t.get_text() for t in ax.texts)
    label = next(t for t in ax.texts if "break-even" in t.get_text())
    assert label.get_bbox_patch() is not None  # readable on dark colours
    from perfmodel import whatif

    dots = next(ln for ln in ax.lines if ln.get_marker() == "o")
    for g, a in zip(dots.get_xdata(), dots.get_ydata()):
        assert whatif.speedup(a, g, 0.3) > 1


def test_speculative_with_models_takes_hardware_lists_and_states_the_mode():
    fig = plots.speculative(draft="llama-2-7b", target="llama-2-70b", hardware="h100-sxm,rtx-4090", batch=16,
                            mode="achievable")
    text = _texts(fig)
    assert "NVIDIA H100 SXM5 80GB" in text and "NVIDIA GeForce RTX 4090" in text and "mode achievable" in text


# ---------------------------------------------------------------- serving
def test_serving_puts_the_kv_line_in_a_legend_and_hides_no_line_under_the_slot_limit():
    fig = plots.serving(requests=16, slots=4, output_len="lognormal:median=8,max=64")
    labels = [lab for ax in fig.axes for lab in _legend(ax)]
    assert any(lab.startswith("KV cache in use") for lab in labels)
    occ = fig.axes[0]
    held = next(ln for ln in occ.lines if ln.get_label() == "slots held")
    limit = next(ln for ln in occ.lines if ln.get_label().startswith("slot limit"))
    assert held.get_zorder() > limit.get_zorder() and held.get_color() != limit.get_color()
    assert limit.get_linewidth() > 2 * held.get_linewidth()  # the limit shows around the held line


# ---------------------------------------------------------------- validation
def test_validation_has_the_band_and_a_residual_panel():
    fig = plots.validation(RUN)
    top, res = fig.axes[:2]
    assert "within ±10%" in _legend(top)
    assert "error (%)" in res.get_ylabel()
    assert res.get_ylim()[0] < -10 and res.get_ylim()[1] > 10


def test_plot_validation_and_validate_plot_draw_the_same_figure(tmp_path, capsys):
    a, b = tmp_path / "a.svg", tmp_path / "b.svg"
    assert main(["plot", "validation", "--results", str(RUN), "-o", str(a)]) == 0
    assert main(["validate", str(RUN), "--plot", str(b)]) == 0
    assert a.read_bytes() == b.read_bytes()
    capsys.readouterr()
    assert main(["validate", str(RUN), "--plot", str(tmp_path / "c.txt")]) == 2
    assert capsys.readouterr().err == f"perfmodel: error: --plot: write .png, .svg or .pdf, got '{tmp_path / 'c.txt'}'\n"


# ---------------------------------------------------------------- CLI
@pytest.mark.parametrize("ext", ["png", "svg", "pdf"])
def test_cli_writes_the_file(tmp_path, ext, capsys):
    out = tmp_path / f"fig.{ext}"
    assert main(["plot", "latency-throughput", "-o", str(out), "--batch", "1,8"]) == 0
    assert out.stat().st_size > 1000


@pytest.mark.parametrize("argv", [
    ["roofline", "-m", "llama-2-13b,llama-3.1-8b"],
    ["memory", "-m", "llama-2-13b,llama-3.1-8b", "-H", "h100-sxm,mi300x"],
    ["latency-throughput", "-m", "llama-3.1-8b", "-H", "h100-sxm,mi300x,rtx-4090"],
    ["latency-throughput", "-m", "llama-3.1-70b", "--tp", "2,4,8", "--batch", "1,16"],
    ["kv", "-m", "llama-3.1-8b,llama-3.1-70b", "-H", "h100-sxm", "--tp", "1,2", "--context", "1024,8192"],
    ["speculative", "-m", "llama-2-7b,llama-2-70b", "-H", "h100-sxm,h200", "--batch", "8"],
    ["roofline", "--mode", "achievable", "--tp", "2", "-m", "llama-3.1-8b"],
])
def test_cli_comma_lists_and_layouts_draw(tmp_path, argv, capsys):
    out = tmp_path / "f.png"
    assert main(["plot", *argv, "-o", str(out)]) == 0, capsys.readouterr().err
    assert out.stat().st_size > 1000


def test_cli_plot_bad_input(capsys):
    bad = [["pie"], ["memory", "--axis", "time"], ["validation"], ["roofline", "-m", "llama-2-13b", "--tp", "3"],
           ["kv", "--batch", "4"], ["memory", "--mode", "achievable"], ["speculative", "-m", "llama-2-7b"],
           ["roofline", "--context", "1,2"], ["serving", "--pp", "2"], ["published", "-H", "h100-sxm"],
           ["speculative", "-H", "h100-sxm"]]
    for argv in bad:
        assert main(["plot", *argv, "-o", "x.png"]) == 2, argv
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == len(bad) and all(e.startswith("perfmodel: error:") for e in err), err
    assert "cannot be drawn" in err[3] and "--batch: does not go with `plot kv`" in err[4]


# ---------------------------------------------------------------- capacity (issue 18)
CAPACITY = ["-m", "llama-3.2-1b", "-H", "l4", "--tp", "1", "--prompt-len", "uniform:32,128", "--output-len",
            "lognormal:median=16,max=64", "--slo-ttft", "250ms", "--seeds", "1", "--requests", "300"]


def test_capacity_draws_both_percentiles_against_the_rate_with_the_slos_and_the_goodput(tmp_path, capsys):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fig = plots.capacity("llama-3.2-1b", "l4", tp=1, prompt_len="uniform:32,128",
                             output_len="lognormal:median=16,max=64", slo_ttft="250ms", seeds=1, requests=300)
        a, b = tmp_path / "a.svg", tmp_path / "b.svg"
        assert main(["plot", "capacity", *CAPACITY, "-o", str(a)]) == 0
        assert main(["plot", "capacity", *CAPACITY, "-o", str(b)]) == 0
    text = _texts(fig)
    assert "mode roofline: the ideal bound" in text and "SLO TTFT 250 ms" in text and "SLO TPOT 50 ms" in text
    assert "goodput" in text and all(ax.get_xlabel().startswith("Poisson arrival rate") for ax in fig.axes)
    assert [ax.get_ylabel() for ax in fig.axes] == ["p99 TTFT", "p99 TPOT"]
    assert a.read_bytes() == b.read_bytes() and a.stat().st_size > 1000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.svg", "b.svg"]  # written atomically: no partial file
    capsys.readouterr()
    assert main(["plot", "capacity", "--batch", "4", "-o", "x.png"]) == 2
    assert "--batch: does not go with `plot capacity`" in capsys.readouterr().err
    assert main(["plot", "roofline", "--slo-ttft", "1s", "-o", "x.png"]) == 2
