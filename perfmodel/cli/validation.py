"""`perfmodel validate --serving`: measured serving runs (AIConfigurator's silicon sample) against the simulator.

    perfmodel validate --serving                                # every point, both modes; summary per category
    perfmodel validate --serving --model deepseek-r1 -o pts.csv --plot pts.png

The per-point table (-o) carries the measured and predicted TTFT and TPOT, so that anyone can recompute the
errors; docs/validation.md ("Serving") gives the method and today's numbers.
"""
from __future__ import annotations

import json
import sys
import time

from ..errors import SpecError
from .common import _out


def _names(text, opt: str) -> list | None:
    if text is None:
        return None
    items = [x.strip() for x in str(text).split(",")]
    if any(not x for x in items):
        raise SpecError(opt, None, f"an empty entry in {text!r}")
    return items


def _select(df, col: str, wanted: list | None, opt: str, mapping: dict | None = None):
    """Rows whose column (or its catalog name through mapping) is one of wanted; one line on a name no row has."""
    if wanted is None:
        return df
    keys = df[col].map(lambda v: mapping.get(v, v)) if mapping else df[col]
    known = set(keys.dropna().astype(str)) | set(df[col].dropna().astype(str))
    for w in wanted:
        if w not in known:
            raise SpecError(opt, None, f"no point has {w!r} (the sample has: {', '.join(sorted(set(keys.astype(str))))})")
    return df[keys.isin(wanted) | df[col].isin(wanted)]


from ..serving.silicon import MAX_POINTS  # noqa: E402  (the limit without --max-points)


def serving(sample=None, out=None, plot=None, mode="roofline,achievable", model=None, system=None, backend=None,
            rounds: int = 2, jobs=None, fmt: str = "table", summary_only: bool = False, points_file=None,
            compare=None, max_points=None, impl: str = "engine", cluster=None) -> None:
    from ..serving import silicon

    modes = _names(mode, "--mode")
    for m in modes:
        if m not in silicon.MODES:
            raise SpecError("--mode", None, f"must be roofline, achievable or both (comma list), got {m!r}")
    if not (isinstance(rounds, int) and 1 <= rounds <= 20):
        raise SpecError("--rounds", None, f"must be a whole number from 1 to 20, got {rounds!r}")
    from .. import workers as wk

    jobs, cluster = wk.check(jobs, cluster)
    from ..fileio import check_writable

    for opt, path in (("-o", out), ("--plot", plot)):
        if path is not None and str(path).strip() == "":
            raise SpecError(opt, None, "an empty path")
        if path is not None:
            check_writable(path, opt)  # before any simulation, not after it
    if points_file is not None:  # a saved table: summarize (and compare) without simulating
        points = silicon.load_points(points_file)
        points = points[points["mode"].isin(modes)]
        if points.empty:
            raise SpecError("--points", None, f"{points_file} has no rows of mode {', '.join(modes)}")
        return _report(points, out, plot, fmt, summary_only, compare)
    df = silicon.load(sample)
    df = _select(df, "model_path", _names(model, "--model"), "--model", silicon.MODELS)
    df = _select(df, "system", _names(system, "--system"), "--system", silicon.SYSTEMS)
    df = _select(df, "backend", _names(backend, "--backend"), "--backend")
    silicon.check_points(len(df), len(modes), MAX_POINTS if max_points is None else max_points, "--max-points")
    wk.probe(cluster)  # an unreachable scheduler is the one line, not a second line after the announcement
    t0 = time.perf_counter()
    tty = sys.stderr.isatty()  # progress and times for a person watching; none in a log or a captured run
    sys.stderr.write(f"perfmodel: predicting {len(df):,} measured serving points in {len(modes)} mode(s)"
                     f" ({', '.join(modes)}){'; progress below, Ctrl-C stops' if tty else ''}\n")
    last = [0.0]

    def progress(done: int, total: int) -> None:
        now = time.perf_counter()
        if tty and (now - last[0] >= 2.0 or done == total):
            last[0] = now
            sys.stderr.write(f"perfmodel: {done:,}/{total:,} points ({now - t0:.0f} s)\n")
            sys.stderr.flush()

    if impl != "engine":  # a bad profile is one line before any simulation
        from ..api import check_mode

        check_mode("achievable", impl)
    points = silicon.predict(df, tuple(modes), rounds, jobs, progress, impl, cluster)
    _report(points, out, plot, fmt, summary_only, compare)


def _report(points, out, plot, fmt, summary_only, compare) -> None:
    from ..fileio import write_text
    from ..report import render
    from ..serving import silicon

    summ = silicon.summarize(points)
    cov = silicon.coverage(points)
    if out is not None:
        write_text(out, points.to_csv(index=False, float_format="%.6g"), "-o")
        sys.stderr.write(f"wrote {out}\n")
    if plot is not None:
        from .. import plots

        sys.stderr.write(f"wrote {plots.save(plots.serving_validation(points), plot)}\n")
    if fmt == "json":
        _out(json.dumps({"coverage": cov, "summary": summ.to_dict("records")}, indent=1, default=float))
        return
    if fmt == "csv":
        _out(summ.to_csv(index=False, float_format="%.6g").rstrip("\n"))
        return
    pct = lambda v: "" if v != v else f"{100 * v:.0f}%"  # noqa: E731
    sgn = lambda v: "" if v != v else f"{100 * v:+.0f}%"  # noqa: E731
    shown = {"mode": list(summ["mode"]), "category": list(summ["category"]), "group": list(summ["group"]),
             "points": [int(x) for x in summ["points"]]}
    for k in ("ttft", "tpot"):
        K = k.upper()
        shown[f"{K} median |err|"] = [pct(x) for x in summ[f"{k}_median_abs"]]
        shown[f"{K} p90 |err|"] = [pct(x) for x in summ[f"{k}_p90_abs"]]
        shown[f"{K} bias"] = [sgn(x) for x in summ[f"{k}_bias"]]
        shown[f"{K} within 25%"] = [pct(x) for x in summ[f"{k}_within_25"]]
    if summary_only:
        keep = [i for i, c in enumerate(shown["category"]) if c in ("overall", "backend", "serving")]
        shown = {k: [v[i] for i in keep] for k, v in shown.items()}
    _out(render(shown, "table"))
    lines = [f"predicted {cov['predicted']:,} of {cov['rows']:,} points ({100 * cov['predicted'] / max(cov['rows'], 1):.1f}%);"
             f" {cov['assumed']:,} with an assumption (the `assumed` column)"]
    for why, n in sorted(cov["skipped"].items(), key=lambda x: -x[1]):
        lines.append(f"not predicted, {n:,}: {why}")
    lines.append("error = predicted / measured - 1 per point; bias = the median error (negative: predicted faster); "
                 "roofline prices each step at the ideal bound, achievable estimates a good implementation")
    roof = summ[(summ["mode"] == "roofline") & (summ["category"] == "overall")]
    if len(roof):  # the roofline as a bound (silicon_report.summarize's counts)
        b = roof.iloc[0]
        line = (f"the roofline's closed loop is slower than measured at {int(b['ttft_above']):,} TTFT and "
                f"{int(b['tpot_above']):,} TPOT of its {int(b['points']):,} points")
        if "bound_ttft_above" in roof.columns:
            line += (f"; at the measured request rate (the bound) at {int(b['bound_ttft_above']):,} TTFT and "
                     f"{int(b['bound_tpot_above']):,} TPOT")
        lines.append(line)
    _out("\n".join("# " + x for x in lines))
    if compare is not None:
        _out("")
        _compare(points, compare)


def _compare(points, path) -> None:
    from ..report import render
    from ..serving import silicon

    c = silicon.compare(points, path)
    pct = lambda v: "" if v != v else f"{100 * v:.0f}%"  # noqa: E731
    modes = [m for m in ("roofline", "achievable") if f"{m}_ttft_median_abs" in c.columns]
    shown = {"category": list(c["category"]), "group": list(c["group"]), "points": [int(x) for x in c["points"]]}
    for k in ("ttft", "tpot"):
        for who in ["aic"] + modes:
            label = "AIC" if who == "aic" else who
            shown[f"{k.upper()} {label}"] = [f"{pct(a)} / {pct(b)}" for a, b in zip(c[f"{who}_{k}_median_abs"],
                                                                                c[f"{who}_{k}_p90_abs"])]
    _out(render(shown, "table"))
    _out(f"# side by side on the {c.attrs['both']:,} points both predicted (the peer predicted "
         f"{c.attrs['peer_predicted']:,} of its {c.attrs['peer_rows']:,} rows): median / p90 |error| of each estimator")
