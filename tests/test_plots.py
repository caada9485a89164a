"""Plots: each kind builds from the API, labels its axes with units, and renders deterministically."""
import io

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

from perfmodel import plots  # noqa: E402
from perfmodel.cli import main  # noqa: E402

CASES = {
    "roofline": lambda: plots.roofline(batch=[1, 64], context=1024),
    "latency_throughput": lambda: plots.latency_throughput(batch=[1, 16, 256, 1024]),
    "memory": lambda: plots.memory(batch=[1, 32, 64, 128]),
    "kv": lambda: plots.kv(context=[1024, 8192, 65536]),
    "speculative": lambda: plots.speculative(draft_cost=0.2),
    "validation": lambda: plots.validation(__import__("pathlib").Path(__file__).resolve().parent.parent
                                           / "docs" / "validation" / "cpu-quick"),
    "serving": lambda: plots.serving(requests=16, slots=4, output_len="lognormal:median=8,max=64"),
}


def _svg(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    return buf.getvalue()


@pytest.mark.parametrize("name", CASES)
def test_each_plot_is_a_figure_with_labelled_axes_and_a_title(name):
    fig = CASES[name]()
    axes = [a for a in fig.axes if a.get_label() != "<colorbar>"]
    assert all(ax.get_xlabel() or ax.get_shared_x_axes().get_siblings(ax)[-1].get_xlabel()
               or any(o.get_xlabel() for o in ax.get_shared_x_axes().get_siblings(ax)) for ax in axes), name
    assert any(ax.get_ylabel() for ax in axes), name
    assert any(a.get_title() for a in fig.axes) or fig._suptitle is not None
    matplotlib.pyplot.close(fig)


@pytest.mark.parametrize("name", CASES)
def test_each_plot_renders_the_same_bytes_twice(name):
    a, b = _svg(CASES[name]()), _svg(CASES[name]())
    assert a == b
    matplotlib.pyplot.close("all")


def test_roofline_uses_log_axes_and_marks_the_ridge():
    fig = plots.roofline(batch=[1, 256])
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert any("ridge" in t.get_text() for t in ax.texts)
    assert "FLOP" in ax.get_xlabel() and "FLOP/s" in ax.get_ylabel()


def test_latency_throughput_marks_what_does_not_fit():
    fig = plots.latency_throughput(models="llama-2-13b", batch=[1, 64, 256])
    labels = [t.get_label() for t in fig.axes[0].collections]
    assert any("does not fit" in str(x) for x in labels)
    assert "ms" in fig.axes[0].get_ylabel() and "tokens/s" in fig.axes[0].get_xlabel()


def test_memory_plot_draws_the_device_capacity():
    fig = plots.memory(batch=[1, 64])
    assert any("capacity" in str(line.get_label()) for line in fig.axes[0].lines)


def test_speculative_heatmap_has_a_break_even_contour():
    fig = plots.speculative(draft_cost=0.3)
    assert any("break-even" in t.get_text() for t in fig.axes[0].texts)


@pytest.mark.parametrize("ext", ["png", "svg", "pdf"])
def test_cli_writes_the_file(tmp_path, ext, capsys):
    out = tmp_path / f"fig.{ext}"
    assert main(["plot", "latency-throughput", "-o", str(out), "--batch", "1,8"]) == 0
    assert out.stat().st_size > 1000


def test_cli_plot_bad_input(capsys):
    assert main(["plot", "pie", "-o", "x.png"]) == 2
    assert main(["plot", "memory", "-o", "x.png", "--axis", "time"]) == 2
    assert main(["plot", "validation", "-o", "x.png"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(e.startswith("perfmodel: error:") for e in err)
