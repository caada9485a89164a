"""`perfmodel measure` and `perfmodel validate`: microbenchmarks, calibration, prediction error.

    perfmodel measure --device cpu --quick --out meas/     # time the cases, write meas/measured.yaml
    perfmodel validate meas/                               # predict the cases calibration did not use
    perfmodel decode -H meas/measured.yaml ...             # any command takes the calibrated spec

Registered on perfmodel.cli.app on import; numpy, torch and matplotlib load inside the commands.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from .common import Fmt, _fmt, _out, app
from ..errors import SpecError


def _progress(total: int):
    count = [0]

    def show(rec: dict) -> None:
        count[0] += 1
        rate = (f"{rec['achieved_bytes_per_s'] / 1e9:8.2f} GB/s" if rec.get("achieved_bytes_per_s") else "")
        if rec.get("achieved_flops_per_s") and rec["family"] in ("gemm", "sweep", "decode"):
            rate += f" {rec['achieved_flops_per_s'] / 1e9:9.1f} GFLOP/s"
        sys.stderr.write(f"[{count[0]:3d}/{total}] {rec['case']:<48} {rec['median_s'] * 1e3:10.4f} ms {rate}\n")
        sys.stderr.flush()

    return show


def _round(r: int, total: int, seconds: float) -> None:
    sys.stderr.write(f"perfmodel: round {r}/{total} done ({seconds:.0f} s)\n")
    sys.stderr.flush()


def _check_out(out: str) -> None:
    """--out before minutes of measuring: a path that can name a folder, not a file, whose nearest existing
    ancestor is a folder this user may write in (write() creates the rest)."""
    import os

    from ..fileio import user_path

    folder = user_path(out, "--out")
    if folder.exists() and not folder.is_dir():
        raise SpecError("--out", None, f"{out} is a file; give a folder")
    up = folder if folder.exists() else next((p for p in folder.parents if p.exists()), Path("."))
    if not up.is_dir() or not os.access(up, os.W_OK | os.X_OK):
        raise SpecError("--out", None, f"cannot write in {up}: permission denied")


@app.command()
def measure(device: str = typer.Option("auto", "--device", metavar="<cuda|cpu|auto>", help="cuda, cpu, or auto (CUDA when present)."),
            quick: bool = typer.Option(False, "--quick", help="Fewer, smaller cases (68 s of measuring on an idle 2-core machine, the saved run; longer under load)."),
            out: str = typer.Option("perfmodel-measurements", "--out", metavar="<folder>", help="Folder for results and measured.yaml."),
            like: Optional[str] = typer.Option(None, "--like", metavar="<name>", help="Datasheet spec to report efficiency factors against, e.g. h100-sxm.")):
    """Time microbenchmarks, write the results and a calibrated hardware YAML for this machine."""
    from .. import measure as M
    from ..measure import cuda, suite
    from ..measure.calibrate import calibrate, model_yaml
    from ..specs import load_hardware

    if device not in ("auto", "cuda", "cpu"):
        raise SpecError("--device", None, f"must be cuda, cpu or auto, got {device!r}")
    ref = load_hardware(like) if like else None  # a bad name fails before minutes of measuring
    _check_out(out)  # and so does a folder the results could not be written to
    ok, why = cuda.available()
    if device == "cuda" and not ok:
        raise SpecError("--device cuda", None, f"{why}; use --device cpu to measure the CPU")
    if device == "auto":
        device = "cuda" if ok else "cpu"
        sys.stderr.write(f"perfmodel: measuring {'the GPU, ' + why if ok else 'the CPU (' + why + ')'}\n")
    b = M.backend(device)
    preset = "quick" if quick else "full"
    n = len(suite.build_cases(suite.plan(device, preset, b.cache_bytes(), b.memory_bytes()), b, b.memory_bytes()))
    busy = suite.busy()
    if busy:
        sys.stderr.write(f"perfmodel: warning: {busy}; other processes will distort the measurements\n")
    sys.stderr.write(f"perfmodel: {n} cases, timed in interleaved rounds (each round samples every case)\n")
    results = M.run_suite(b, preset, _progress(n), _round)
    folder = Path(out)
    text, hw, eff = calibrate(results, "results.csv", ref)
    if eff:
        results["meta"]["efficiency_vs"] = {"spec": like, **eff}
    # the results and the specs calibrated from them change together or not at all
    paths = M.write(results, folder, {"measured.yaml": text, "decode-model.yaml": model_yaml(results)})
    rows = {"quantity": ["memory_bandwidth"] + [f"peak_flops.{k}" for k in hw.peak_flops]
            + ["kernel_overhead", "gemm_weight_passes", "attention_kv_passes"],
            "measured": [f"{hw.memory_bandwidth / 1e9:.4g} GB/s"] + [f"{v / 1e9:.4g} GFLOP/s" for v in hw.peak_flops.values()]
            + [f"{(hw.kernel_overhead or 0) * 1e6:.3g} us", f"{hw.gemm_weight_passes or 1:.3g}",
               f"{hw.attention_kv_passes or 1:.3g}"]}
    if eff:
        rows[f"vs {like}"] = [f"{eff[q]:.3f}" if q in eff else "-" for q in rows["quantity"]]
    from ..report import render

    _out(render(rows, "table"))
    _out(f"# wrote {paths['json']}, {paths['csv']}, {folder / 'measured.yaml'}, {folder / 'decode-model.yaml'}")
    _out(f"# next: perfmodel validate {folder}")


@app.command()
def validate(results: Optional[str] = typer.Argument(None, help="A folder written by `perfmodel measure`, or its results.json."),
             published: bool = typer.Option(False, "--published", help="Validate against published end-to-end measurements instead: per case the roofline bound, the achievable estimate and the measurement."),
             cases: Optional[str] = typer.Option(None, "--cases", metavar="<file>", help="With --published: a measurements YAML of your own (default: perfmodel's)."),
             category: Optional[str] = typer.Option(None, "--category", metavar="<name list>", help="With --published: only cases with these categories (comma list)."),
             summary_only: bool = typer.Option(False, "--summary", help="With --published: the summary per category only."),
             hardware: Optional[str] = typer.Option(None, "-H", "--hardware", metavar="<name list>", help="Spec to predict with (default: the folder's measured.yaml)."),
             overhead: bool = typer.Option(True, "--overhead/--no-overhead", help="Include the spec's kernel_overhead."),
             passes: bool = typer.Option(True, "--weight-passes/--no-weight-passes", help="Include the spec's gemm_weight_passes and attention_kv_passes (multi-row matmuls move their weights, and attention its K/V cache, that many times)."),
             kv: bool = typer.Option(True, "--kv-passes/--no-kv-passes", help="Include the spec's attention_kv_passes (without it attention's K/V read pays gemm_weight_passes)."),
             plot: Optional[str] = typer.Option(None, "--plot", metavar="<file>", help="Write a predicted-vs-measured plot (PNG/SVG/PDF)."),
             ops: Optional[str] = typer.Option(None, "--ops", metavar="<case>", help="A decode case: measured vs predicted time per op."),
             serving: bool = typer.Option(False, "--serving", help="Validate against measured serving runs instead: AIConfigurator's silicon sample (5,221 closed-loop benchmarks of vLLM, SGLang and TensorRT-LLM), TTFT and TPOT predicted by the serving simulator."),
             sample: Optional[str] = typer.Option(None, "--sample", metavar="<file>", help="With --serving: a silicon-sample CSV of your own (default: the shipped one)."),
             out: Optional[str] = typer.Option(None, "-o", "--out", metavar="<file>", help="With --serving: write the per-point table (measured and predicted TTFT/TPOT) as CSV."),
             mode: str = typer.Option("roofline,achievable", "--mode", metavar="<mode list>", help="With --serving: roofline, achievable or both."),
             model: Optional[str] = typer.Option(None, "-m", "--model", metavar="<name list>", help="With --serving: only these models (catalog names or the sample's model paths)."),
             system: Optional[str] = typer.Option(None, "--system", metavar="<name list>", help="With --serving: only these systems (catalog or sample names)."),
             backend: Optional[str] = typer.Option(None, "--backend", metavar="<name list>", help="With --serving: only these backends (vllm, sglang, trtllm)."),
             rounds: int = typer.Option(2, "--rounds", metavar="<int>", help="With --serving: measured requests per client after the warm-up of 2 per client (AIPerf measures 20)."),
             jobs: Optional[int] = typer.Option(None, "--jobs", metavar="<int>", help="With --serving: the same as --workers (kept for scripts)."),
             workers: Optional[str] = typer.Option(None, "--workers", metavar="<int>", help="With --serving: local worker processes (default: this machine's cores)."),
             cluster: Optional[str] = typer.Option(None, "--cluster", metavar="<address>", help="With --serving: run the simulations on a Dask scheduler (tcp://host:8786 or 'local'); pip install 'perfmodel[cluster]'."),
             points: Optional[str] = typer.Option(None, "--points", metavar="<file>", help="With --serving: summarize a per-point table written by -o instead of simulating."),
             compare: Optional[str] = typer.Option(None, "--compare", metavar="<file>", help="With --serving: a peer's predictions of the same points (id, aic_ttft_ms, aic_tpot_ms: bench/aic_silicon.py's CSV), side by side."),
             max_points: Optional[int] = typer.Option(None, "--max-points", metavar="<int>", help="With --serving: refuse more point x mode simulations than this (default 200; the whole sample is 10,442)."),
             impl: Optional[str] = typer.Option(None, "--impl", metavar="<name|file|engine>", help="With --serving: the implementation profile of the achievable mode (default engine: each point's measured engine, vllm-0.24, sglang-0.5 or trtllm-1.3)."),
             fmt: str = Fmt):
    """Predict every measured case that calibration did not use; per-case error, median and p90 of |error|.
    With --published: the published end-to-end measurements, bound and estimate side by side.
    With --serving: measured serving runs (closed-loop concurrency benchmarks) against the serving simulator."""
    serving_opts = {"--sample": sample, "-o": out, "-m": model, "--system": system, "--backend": backend,
                    "--jobs": jobs, "--workers": workers, "--cluster": cluster, "--points": points, "--compare": compare, "--max-points": max_points, "--impl": impl}
    if serving:
        if results is not None or published:
            raise SpecError("--serving", None, "takes no results folder and not --published")
        from .validation import serving as run_serving

        if jobs is not None and workers is not None:
            raise SpecError("--jobs", None, "give --workers (or its old name --jobs), not both")
        return run_serving(sample, out, plot, mode, model, system, backend, rounds, workers if jobs is None else jobs,
                           _fmt(fmt), summary_only, points, compare, max_points, impl or "engine", cluster)
    given = [k for k, v in serving_opts.items() if v is not None] + (["--mode"] if mode != "roofline,achievable" else []) \
        + (["--rounds"] if rounds != 2 else [])
    if given:
        raise SpecError(given[0], None, "goes with --serving")
    if published:
        if results is not None:
            raise SpecError("--published", None, "takes no results folder (it validates against published measurements)")
        return _published(cases, category, plot, _fmt(fmt), summary_only)
    if cases is not None or category is not None or summary_only:
        raise SpecError("--cases/--category/--summary", None, "go with --published")
    if results is None:
        raise SpecError("validate", None, "needs a results folder from `perfmodel measure`, or --published")
    from ..measure import suite
    from ..measure.validate import as_json, by_family, op_breakdown, validate as run, without
    from ..report import render
    from ..specs import load_hardware

    fmt = _fmt(fmt)
    data = suite.load(results)
    if hardware is None:
        spec = (Path(results) if Path(results).is_dir() else Path(results).parent) / "measured.yaml"
        if not spec.is_file():
            raise SpecError(results, None, "no measured.yaml beside the results: pass --hardware FILE")
        hardware = str(spec)
    hw = without(load_hardware(hardware), overhead, passes, kv)
    if ops:
        try:
            t = op_breakdown(data, hw, ops)
        except ValueError as e:
            raise SpecError("--ops", None, str(e)) from None
        _out(render(t, fmt) if fmt != "table" else render(dict(t, ratio=[f"{r:.2f}" for r in t["ratio"]]), "table"))
        return
    table = run(data, hw)
    if not table["case"]:
        raise SpecError(results, None, "no validation cases (sweep, attention, decode) in these results")
    if plot:
        from ..plots import save_validation

        save_validation(table, plot, f"{data['meta'].get('device', '')}: perfmodel vs measured")
    if fmt == "json":
        _out(json.dumps(as_json(table), indent=1))
        return
    if fmt == "csv":
        _out(render(table, "csv"))
        return
    shown = dict(table, error=[f"{e:+.1%}" for e in table["error"]])
    _out(render(shown, "table", human_columns=["case", "predicted_s", "measured_s", "error"]))
    _out("")
    fams = by_family(table)
    summary = {"family": fams["family"], "cases": fams["cases"],
               "median |error|": [f"{x:.1%}" for x in fams["median_abs_error"]],
               "p90 |error|": [f"{x:.1%}" for x in fams["p90_abs_error"]]}
    has_ko = bool(hw.kernel_overhead)
    has_wp = hw.gemm_weight_passes not in (None, 1.0) or hw.attention_kv_passes not in (None, 1.0)
    has_kv = hw.attention_kv_passes is not None
    off = ([("no overhead", False, True, True)] if has_ko else []) \
        + ([("kv = weight passes", True, True, False)] if has_kv else []) \
        + ([("passes = 1", True, False, True)] if has_wp else []) \
        + ([("neither", False, False, True)] if has_ko and has_wp else [])
    for label, o, p, k in off:  # what each calibrated term buys: the medians without it
        summary[f"median, {label}"] = [f"{x:.1%}" for x in by_family(run(data, hw, o, p, k))["median_abs_error"]]
    _out(render(summary, "table"))
    ko = f", kernel_overhead {hw.kernel_overhead * 1e6:.3g} us" if hw.kernel_overhead else ""
    wp = (f", gemm_weight_passes {hw.gemm_weight_passes or 1:.4g}, attention_kv_passes {hw.attention_kv_passes or hw.gemm_weight_passes or 1:.4g}"
          if has_wp else "")
    _out(f"# predicted with {hw.key}: {hw.memory_bandwidth / 1e9:.4g} GB/s, "
         + ", ".join(f"{k} {v / 1e9:.4g} GFLOP/s" for k, v in hw.peak_flops.items()) + ko + wp)
    _out("# error = predicted / measured - 1 (negative: the engine is optimistic)")


def _published(cases, category, plot, fmt, summary_only=False) -> None:
    """`perfmodel validate --published`: one row per published measurement, then the summary per category."""
    from ..measure.published import METRICS, published, summary
    from ..report import render
    from ..units import fmt_time

    cats = [c.strip() for c in category.split(",") if c.strip()] if category else None
    table = published(cases, cats)
    if plot:
        from .. import plots

        sys.stderr.write(f"wrote {plots.save(plots.published(table), plot)}\n")
    summ = summary(table)
    if fmt == "json":
        _out(json.dumps({"summary": render_rows(summ)} if summary_only else
                        {"cases": render_rows(table), "summary": render_rows(summ)}, indent=1))
        return
    if fmt == "csv":
        _out(render(summ if summary_only else table, "csv"))
        return

    def value(metric, v):  # a time (ttft_s, tpot_s) or a rate (tokens_per_s...: tokens per second)
        return f"{v:.4g} tok/s" if METRICS[metric][0] else fmt_time(v)

    shown = {"case": table["case"], "impl": table["impl"], "metric": table["metric"],
             "measured": [value(m, v) for m, v in zip(table["metric"], table["measured"])],
             "bound": [value(m, v) for m, v in zip(table["metric"], table["bound"])],
             "achievable": [value(m, v) for m, v in zip(table["metric"], table["achievable"])],
             "of bound": [f"{f:.2f}" for f in table["fraction"]], "error": [f"{e:+.0%}" for e in table["error"]]}
    if not summary_only:
        _out(render(shown, "table"))
        _out("")
    _out(render({"category": summ["category"], "cases": summ["cases"],
                 "median |error|": [f"{x:.1%}" for x in summ["median_abs_error"]],
                 "p90 |error|": [f"{x:.1%}" for x in summ["p90_abs_error"]],
                 "within 25%": [f"{x:.0%}" for x in summ["within_25pct"]],
                 "faster": [f"{x:.0%}" for x in summ["faster_share"]],
                 "of bound": [f"{a:.2f}-{b:.2f}" for a, b in zip(summ["fraction_min"], summ["fraction_max"])],
                 "bound violated": summ["bound_violations"]}, "table"))
    higher = ", ".join(k for k, (hi, _) in METRICS.items() if hi)
    _out("# bound: mode roofline, the ideal bound (a measurement never beats it); achievable: mode achievable with the "
         "case's implementation profile (impl: the engine's own for TensorRT-LLM and vLLM cases); error = achievable / "
         "measured - 1; faster: the share predicted faster than measured")
    _out(f"# of bound = measured / bound for throughputs ({higher}), bound / measured for times; at most 1 when the "
         "bound holds")


def render_rows(table: dict) -> list:
    from ..report import rows

    return rows(table)
