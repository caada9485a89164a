"""Run NVIDIA AIConfigurator's own estimator on the points of its silicon sample.

AIConfigurator (github.com/ai-dynamo/aiconfigurator, Apache-2.0) ships
`aiconfigurator_core/systems/silicon_sample.csv`: measured serving points (TTFT and TPOT of a model on a
system with a backend, aggregated or disaggregated). This script asks AIConfigurator's estimator
(`aiconfigurator.cli.api.cli_estimate`) for every row, so that perfmodel's serving validation can be set
beside AIConfigurator's own error on the same points. It is a benchmark, not a test: nothing under tests/
needs aiconfigurator.

AIConfigurator runs in its own virtualenv, bench/.venv-peers (ignored by git; the one bench/run_bench.sh
uses for the other peer calculators), never in the project's. If that virtualenv is missing, this script
makes it with exactly:

    python3 -m venv bench/.venv-peers
    bench/.venv-peers/bin/python -m pip install aiconfigurator==0.12.0

(which also installs aiconfigurator-core==0.12.0, the package that holds the estimator's database and the
silicon sample). The driver below needs only the standard library and may run under any Python 3.9+; it
starts `bench/.venv-peers/bin/python bench/aic_silicon.py --worker` subprocesses and talks JSON lines to them.

The argument mapping is that of AIConfigurator's tools/accuracy_regression_testing/predict_silicon_sample.py
(ai-dynamo/aiconfigurator, mirrored commit 095f58a5): model_path, system, mode, backend, backend_version,
isl, osl, gemm_quant_mode and moe_quant_mode, then batch_size and the parallel sizes for agg rows or the
prefill_/decode_ sizes, batch sizes and worker counts for disagg rows (empty cells left out); a disagg row
without prefill/decode batch sizes and worker counts fails as it does there. As there, a row whose
backend_version has no database is retried once with AIConfigurator's default version (backend_version=None),
and that (system, backend, version) is remembered so later rows go straight to the default; aiconfigurator
0.12.0 reports such a version as 'looks like an old-style raw version query' (the mirrored script's
'Failed to load perf database' is caught too). Results are cached on the argument tuple, so duplicate rows
are estimated once (aic_cached=1 on the others, seconds 0).

    python bench/aic_silicon.py                      # every row of the wheel's silicon_sample.csv
    python bench/aic_silicon.py --limit 50           # the first 50 rows (to measure the rate)
    python bench/aic_silicon.py --stratify-every 4   # every 4th row of each model x system x backend x mode group
    python bench/aic_silicon.py --resume             # skip ids already in the output (or its .partial file)
    # offline, a bundled config for a model AIConfigurator would download (changes the mapping; marked per row):
    python bench/aic_silicon.py --resume --rerun-errors HuggingFaceDownloadError --model-alias A=B
    python bench/aic_silicon.py --summary bench/results/aic-silicon-2026-12-02.csv

Output: bench/results/aic-silicon-<YYYY-MM-DD>.csv with columns id, aic_ttft_ms, aic_tpot_ms, aic_error (the
exception text, empty when predicted), seconds (wall time of the estimate), aic_cached, aic_backend_version
('row' when the row's backend_version was used, 'default' after the retry), aic_model_path (the bundled
model config asked for instead of the row's, with --model-alias; empty otherwise), written atomically (temp file +
os.replace) only when the run finishes; while it runs, progress is checkpointed the same way to
<output>.partial.csv, which --resume reads. Ctrl-C stops the run with exit status 130 and leaves the output
as it was. A JSON sidecar <output>.json records the aiconfigurator version, the silicon_sample.csv path and
sha256, the selection and the wall time. --summary writes <output stem>-summary.md: median and p90 |error| of
TTFT and TPOT, the median signed error (pred - meas) / meas, and coverage (rows predicted / rows attempted),
overall and by backend, system and mode, from the output joined with the silicon sample on id.
"""
from __future__ import annotations

import argparse
import csv
import datetime as _dt
import hashlib
import io
import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, OrderedDict, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / "bench" / ".venv-peers"
RESULTS = ROOT / "bench" / "results"
AIC_VERSION = "0.12.0"
INSTALL = [f"aiconfigurator=={AIC_VERSION}"]

# The mapping of predict_silicon_sample.py.
PARALLEL_FIELDS = ("tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")
AGG_FIELDS = ("batch_size", *PARALLEL_FIELDS)
DISAGG_FIELDS = tuple(
    f"{stage}_{field}" for stage in ("prefill", "decode") for field in (*PARALLEL_FIELDS, "batch_size", "num_workers")
)
REQUIRED_DISAGG_FIELDS = ("prefill_batch_size", "prefill_num_workers", "decode_batch_size", "decode_num_workers")
# What aiconfigurator says when a row's backend_version has no database of its own.
MISSING_VERSION_MESSAGES = ("Failed to load perf database", "looks like an old-style raw version query")
COLUMNS = ["id", "aic_ttft_ms", "aic_tpot_ms", "aic_error", "seconds", "aic_cached", "aic_backend_version",
           "aic_model_path"]
GROUP = ("model_path", "system", "backend", "mode")


def estimate_args(row: dict) -> dict:
    fields = AGG_FIELDS if row["mode"] == "agg" else DISAGG_FIELDS
    return dict(
        model_path=row["model_path"],
        system_name=row["system"],
        mode=row["mode"],
        backend_name=row["backend"],
        backend_version=row["backend_version"] or None,
        isl=int(row["isl"]),
        osl=int(row["osl"]),
        gemm_quant_mode=row["gemm_quant_mode"] or None,
        moe_quant_mode=row["moe_quant_mode"] or None,
        **{field: int(row[field]) for field in fields if row.get(field)},
    )


def args_key(args: dict) -> str:
    return json.dumps(sorted(args.items()))


# ------------------------------------------------------------------------------------------------ worker
def _worker() -> int:
    """Inside bench/.venv-peers: read {"key", "args"} lines on stdin, write one result line per request."""
    out = sys.stdout
    sys.stdout = sys.stderr  # whatever aiconfigurator prints goes to stderr, never into the protocol
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver decides; it closes our stdin or kills us
    import aiconfigurator_core
    from aiconfigurator.cli.api import cli_estimate

    core_dir = os.path.dirname(aiconfigurator_core.__file__)
    missing: set[tuple[str, str, str]] = set()
    used = ["row"]

    def run(args: dict) -> tuple[float, float]:
        if args["mode"] == "disagg":
            for field in REQUIRED_DISAGG_FIELDS:
                if args.get(field) is None:
                    raise ValueError(f"{field} is required for disagg mode.")
        version = args["backend_version"]
        used[0] = "row" if version is not None else "default"
        if version is not None and (args["system_name"], args["backend_name"], version) in missing:
            args["backend_version"], used[0] = None, "default"
        try:
            r = cli_estimate(**args)
        except ValueError as e:
            if args["backend_version"] is None or not any(m in str(e) for m in MISSING_VERSION_MESSAGES):
                raise
            missing.add((args["system_name"], args["backend_name"], version))
            print(f"missing database version {args['backend_name']} {version} on {args['system_name']}; "
                  "retrying with AIC default database version", file=sys.stderr)
            args["backend_version"], used[0] = None, "default"
            r = cli_estimate(**args)
        return float(r.ttft), float(r.tpot)

    for line in sys.stdin:
        req = json.loads(line)
        t0 = time.perf_counter()
        res = {"key": req["key"], "ttft": None, "tpot": None, "error": "", "used": ""}
        try:
            res["ttft"], res["tpot"] = run(dict(req["args"]))
        except Exception as e:  # noqa: BLE001 - every failure is a result
            text = " ".join(f"{type(e).__name__}: {e}".split()).replace(core_dir, "aiconfigurator_core")
            res["error"] = text[:2000]
        res["used"] = used[0]
        res["seconds"] = time.perf_counter() - t0
        out.write(json.dumps(res) + "\n")
        out.flush()
    return 0


def _worker_info() -> int:
    import importlib.metadata as md
    import importlib.resources as ir

    info = {"aiconfigurator": md.version("aiconfigurator"), "aiconfigurator-core": md.version("aiconfigurator-core"),
            "python": sys.version.split()[0],
            "silicon_sample": str(ir.files("aiconfigurator_core") / "systems" / "silicon_sample.csv")}
    print(json.dumps(info))
    return 0


# ------------------------------------------------------------------------------------------------ driver
def ensure_venv(venv: Path) -> Path:
    py = venv / "bin" / "python"
    if py.exists():
        ok = subprocess.run([str(py), "-c", "import aiconfigurator.cli.api"], capture_output=True).returncode == 0
        if ok:
            return py
    else:
        print(f"making {venv}: {sys.executable} -m venv {venv}", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    print(f"installing into {venv}: {py} -m pip install {' '.join(INSTALL)}", file=sys.stderr)
    subprocess.run([str(py), "-m", "pip", "install", "--disable-pip-version-check", *INSTALL], check=True)
    return py


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def stratified(rows: list[dict], every: int) -> list[dict]:
    """Every `every`-th row of each model x system x backend x mode group, starting with the group's first row,
    so every group is represented; the sample's order is kept."""
    seen: Counter = Counter()
    keep = []
    for r in rows:
        g = tuple(r[k] for k in GROUP)
        if seen[g] % every == 0:
            keep.append(r)
        seen[g] += 1
    return keep


def read_results(path: Path) -> "OrderedDict[str, dict]":
    out: OrderedDict = OrderedDict()
    if path.exists():
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                out[r["id"]] = r
    return out


def _umask_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask  # mkstemp makes 0600 files; give the output the usual mode


def write_csv_atomic(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, fieldnames=COLUMNS, extrasaction="ignore")
    w.writeheader()
    for r in rows:
        w.writerow(r)
    write_text_atomic(path, buf.getvalue())


def write_text_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", newline="") as f:  # the text's own line endings (csv writes \r\n)
            f.write(text)
        os.chmod(tmp, _umask_mode())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def partial_path(out: Path) -> Path:
    return out.with_name(out.stem + ".partial.csv")


class Worker:
    def __init__(self, py: Path, log):
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.p = subprocess.Popen([str(py), str(Path(__file__).resolve()), "--worker"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=log, text=True, bufsize=1, env=env,
                                  start_new_session=True)  # Ctrl-C reaches the driver only
        self.busy = None

    def send(self, key: str, args: dict) -> None:
        self.busy = key
        self.p.stdin.write(json.dumps({"key": key, "args": args}) + "\n")
        self.p.stdin.flush()

    def stop(self) -> None:
        try:
            self.p.stdin.close()
        except Exception:  # noqa: BLE001
            pass
        try:
            self.p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


def fmt(x) -> str:
    return "" if x is None else f"{x:.6f}"


def run(a) -> int:
    py = ensure_venv(Path(a.venv))
    info = json.loads(subprocess.run([str(py), str(Path(__file__).resolve()), "--worker-info"], check=True,
                                     capture_output=True, text=True).stdout)
    sample = Path(a.csv) if a.csv else Path(info["silicon_sample"])
    out = Path(a.out) if a.out else RESULTS / f"aic-silicon-{_dt.date.today().isoformat()}.csv"
    part = partial_path(out)
    all_rows = read_rows(sample)
    rows = stratified(all_rows, a.stratify_every) if a.stratify_every > 1 else list(all_rows)
    if a.limit is not None:
        rows = rows[: a.limit]
    done: OrderedDict = OrderedDict()
    if a.resume:
        done.update(read_results(out))
        done.update(read_results(part))
    if a.rerun_errors:
        again = re.compile(a.rerun_errors)
        for rid in [rid for rid, r in done.items() if r.get("aic_error") and again.search(r["aic_error"])]:
            del done[rid]
    aliases = dict(x.split("=", 1) for x in a.model_alias)
    todo = [r for r in rows if r["id"] not in done]
    print(f"aiconfigurator {info['aiconfigurator']} (core {info['aiconfigurator-core']}), sample {sample} "
          f"({len(all_rows)} rows); selected {len(rows)}, already done {len(rows) - len(todo)}, to run {len(todo)}; "
          f"output {out}", file=sys.stderr)

    # one estimate per distinct argument tuple
    keys: "OrderedDict[str, dict]" = OrderedDict()
    row_key = {}
    for r in todo:
        args = estimate_args(r)
        if args["model_path"] in aliases:
            args["model_path"] = aliases[args["model_path"]]
        k = args_key(args)
        keys.setdefault(k, args)
        row_key[r["id"]] = k
    model_of = {r["id"]: r["model_path"] for r in todo}
    rows_of: dict[str, list[str]] = defaultdict(list)
    for rid, k in row_key.items():
        rows_of[k].append(rid)

    log_path = Path(a.aic_log) if a.aic_log else Path(tempfile.gettempdir()) / (out.stem + ".aic.log")
    log = open(log_path, "a")
    print(f"aiconfigurator's own messages: {log_path}", file=sys.stderr)
    started = _dt.datetime.now(_dt.timezone.utc)
    t_start = time.perf_counter()
    workers = [Worker(py, log) for _ in range(max(1, a.jobs))]
    pending = list(keys.items())
    pending.reverse()  # pop() from the end keeps the sample's order
    n_done_rows = 0
    n_est = 0
    est_seconds = 0.0
    last_ckpt = time.monotonic()
    results = done  # id -> result row

    def checkpoint() -> None:
        write_csv_atomic(part, results.values())

    import selectors
    sel = selectors.DefaultSelector()
    interrupted = False
    try:
        for w in workers:
            sel.register(w.p.stdout, selectors.EVENT_READ, w)
            if pending:
                w.send(*pending.pop())
        active = sum(1 for w in workers if w.busy)
        while active:
            for skey, _ in sel.select(timeout=1.0):
                w = skey.data
                line = w.p.stdout.readline()
                if not line:
                    raise RuntimeError(f"an aiconfigurator worker exited (status {w.p.poll()}); see {log_path}")
                res = json.loads(line)
                w.busy = None
                n_est += 1
                est_seconds += res["seconds"]
                for j, rid in enumerate(rows_of[res["key"]]):
                    results[rid] = {"id": rid, "aic_ttft_ms": fmt(res["ttft"]), "aic_tpot_ms": fmt(res["tpot"]),
                                    "aic_error": res["error"], "seconds": f"{res['seconds'] if j == 0 else 0.0:.3f}",
                                    "aic_cached": "0" if j == 0 else "1", "aic_backend_version": res["used"],
                                    "aic_model_path": aliases.get(model_of[rid], "")}
                    n_done_rows += 1
                if pending:
                    w.send(*pending.pop())
                else:
                    active -= 1
                wall = time.perf_counter() - t_start
                rate = wall / n_done_rows
                eta = rate * (len(todo) - n_done_rows)
                rid = rows_of[res["key"]][0]
                status = "ok" if not res["error"] else "failed: " + res["error"][:90]
                print(f"[{n_done_rows}/{len(todo)}] {rid}: {status} ({res['seconds']:.1f} s; "
                      f"{rate:.2f} s/row, ETA {eta / 60:.0f} min)", file=sys.stderr, flush=True)
                if time.monotonic() - last_ckpt > a.checkpoint_s:
                    checkpoint()
                    last_ckpt = time.monotonic()
    except KeyboardInterrupt:
        interrupted = True
    finally:
        for w in workers:
            if interrupted:
                w.p.kill()
            w.stop()
        log.close()
    wall = time.perf_counter() - t_start
    if interrupted:
        checkpoint()
        print(f"\ninterrupted after {n_done_rows} of {len(todo)} rows: {out} left as it was; the rows done so far are "
              f"in {part} (rerun with --resume to go on)", file=sys.stderr)
        return 130

    # the output: rows in the sample's order (old rows of a --resume first kept where they were)
    order = {r["id"]: i for i, r in enumerate(all_rows)}
    final = sorted(results.values(), key=lambda r: order.get(r["id"], math.inf))
    write_csv_atomic(out, final)
    attempted = len(final)
    predicted = sum(1 for r in final if not r["aic_error"])
    meta = {
        "aiconfigurator": info["aiconfigurator"], "aiconfigurator-core": info["aiconfigurator-core"],
        "python": info["python"], "install": f"{py} -m pip install {' '.join(INSTALL)}",
        "silicon_sample": str(sample), "silicon_sample_sha256": sha256(sample), "silicon_sample_rows": len(all_rows),
        "selection": {"stratify_every": a.stratify_every, "limit": a.limit, "resume": a.resume,
                      "rerun_errors": a.rerun_errors, "model_alias": aliases,
                      "strata": "model_path x system x backend x mode"},
        "rows_in_output": attempted, "rows_predicted": predicted,
        "this_run": {"started_utc": started.isoformat(timespec="seconds"), "wall_s": round(wall, 1),
                     "rows": n_done_rows, "estimates": n_est, "estimate_s": round(est_seconds, 1), "jobs": a.jobs,
                     "s_per_row": round(wall / n_done_rows, 3) if n_done_rows else None},
        "mapping": "predict_silicon_sample.py (ai-dynamo/aiconfigurator tools/accuracy_regression_testing, "
                   "commit 095f58a5): retry once with the default database version when a row's version has none",
        "machine": {"cpus": os.cpu_count()},
    }
    if a.resume and out.with_suffix(".json").exists():
        try:
            old = json.loads(out.with_suffix(".json").read_text())
            meta["earlier_runs"] = old.get("earlier_runs", []) + [old.get("this_run")]
        except (ValueError, OSError):
            pass
    write_text_atomic(out.with_suffix(".json"), json.dumps(meta, indent=2) + "\n")
    if part.exists():
        part.unlink()
    print(f"wrote {out} ({attempted} rows, {predicted} predicted) and {out.with_suffix('.json')} in {wall:.0f} s "
          f"({wall / max(n_done_rows, 1):.2f} s/row over {n_done_rows} rows, {n_est} estimates)", file=sys.stderr)
    return 0


# ------------------------------------------------------------------------------------------------ summary
def quantile(xs: list[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default)."""
    s = sorted(xs)
    if not s:
        return math.nan
    pos = (len(s) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def _stats(items: list[dict]) -> dict:
    att = len(items)
    ok = [r for r in items if not r["aic_error"]]
    d = {"attempted": att, "predicted": len(ok), "coverage": len(ok) / att if att else math.nan}
    for m in ("ttft", "tpot"):
        errs = []
        for r in ok:
            meas = float(r[f"silicon_{m}_ms"] or "nan")
            pred = float(r[f"aic_{m}_ms"] or "nan")
            if meas > 0 and math.isfinite(pred):
                errs.append((pred - meas) / meas)
        d[f"{m}_n"] = len(errs)
        d[f"{m}_med_abs"] = quantile([abs(e) for e in errs], 0.5)
        d[f"{m}_p90_abs"] = quantile([abs(e) for e in errs], 0.9)
        d[f"{m}_bias"] = quantile(errs, 0.5)
    return d


def summarize(results_csv: Path, sample_csv: Path | None = None) -> str:
    """The markdown summary of AIConfigurator's own error on the rows of `results_csv`."""
    side = results_csv.with_suffix(".json")
    meta = json.loads(side.read_text()) if side.exists() else {}
    if sample_csv is None:
        sample_csv = Path(meta["silicon_sample"])
    sample = {r["id"]: r for r in read_rows(sample_csv)}
    res = list(read_results(results_csv).values())
    missing = [r["id"] for r in res if r["id"] not in sample]
    joined = [{**sample[r["id"]], **r} for r in res if r["id"] in sample]

    pct = lambda x: "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x * 100:.1f}%"  # noqa: E731
    spct = lambda x: "-" if isinstance(x, float) and math.isnan(x) else f"{x * 100:+.1f}%"  # noqa: E731

    def table(title: str, by: str | None) -> list[str]:
        groups: dict = defaultdict(list)
        for r in joined:
            groups["all" if by is None else r[by]].append(r)
        lines = [f"### {title}", "",
                 "| " + (by or "rows") + " | attempted | predicted | coverage | TTFT median abs | TTFT p90 abs | "
                 "TTFT bias | TPOT median abs | TPOT p90 abs | TPOT bias |",
                 "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for g in sorted(groups, key=lambda g: (-len(groups[g]), g)):
            s = _stats(groups[g])
            lines.append(f"| {g} | {s['attempted']} | {s['predicted']} | {pct(s['coverage'])} | "
                         f"{pct(s['ttft_med_abs'])} | {pct(s['ttft_p90_abs'])} | {spct(s['ttft_bias'])} | "
                         f"{pct(s['tpot_med_abs'])} | {pct(s['tpot_p90_abs'])} | {spct(s['tpot_bias'])} |")
        return lines + [""]

    def reason(err: str) -> str:
        e = re.sub(r"(?<![\w.-])/\S+", "<path>", err)
        if "is required for disagg mode" in e:
            return "disagg row without prefill/decode batch size and worker count (" + e.split(":", 1)[1].strip() + ")"
        if "HuggingFaceDownloadError" in e:
            return "model config not bundled, HuggingFace unreachable here (HuggingFaceDownloadError)"
        m = re.search(r"perf database error: (.+?) data missing(?: for quant '([^']+)')?", e)
        if m:
            return f"perf database: {m.group(1)} data missing" + (f" (quant {m.group(2)})" if m.group(2) else "")
        if "Cross-node EP requires DeepEP A2A data" in e:
            return "perf database: cross-node EP without DeepEP all-to-all data"
        if "does not fit in GPU memory" in e:
            return "AIConfigurator's memory check: the model does not fit at this parallelism (RuntimeError: OOM)"
        if re.search(r"num_heads \d+ should be divisible by tp_size", e):
            return "attention heads not divisible by tp_size (AssertionError: num_heads N should be divisible by tp_size)"
        if "Parallelism width mismatch" in e:
            return "tp x attention_dp != moe_tp x moe_ep (ValueError: Parallelism width mismatch)"
        return e[:160]

    reasons = Counter(reason(r["aic_error"]) for r in joined if r["aic_error"])
    s = _stats(joined)
    sel = meta.get("selection", {})
    run = meta.get("this_run", {})
    lines = [
        f"# AIConfigurator's own error on its silicon sample ({results_csv.name})", "",
        f"AIConfigurator {meta.get('aiconfigurator', '?')} (`aiconfigurator.cli.api.cli_estimate`, argument mapping "
        f"of its tools/accuracy_regression_testing/predict_silicon_sample.py) on {len(joined)} rows of "
        f"`silicon_sample.csv` ({meta.get('silicon_sample_rows', len(sample))} rows, sha256 "
        f"`{meta.get('silicon_sample_sha256', sha256(sample_csv))[:16]}...`)"
        + (f", every {sel['stratify_every']}th row of each model x system x backend x mode group"
           if sel.get("stratify_every", 1) > 1 else "")
        + (f", first {sel['limit']} rows" if sel.get("limit") else "") + ".",
        "",
        "Error is (predicted - measured) / measured per row; 'median abs' and 'p90 abs' are of |error|, 'bias' is "
        "the median signed error; coverage = rows predicted / rows attempted; rows AIConfigurator could not predict "
        "count against coverage only. Written by `python bench/aic_silicon.py --summary` from the results CSV joined "
        "with silicon_sample.csv on id.",
        "",
        f"Overall: {s['predicted']} of {s['attempted']} rows predicted ({pct(s['coverage'])}); TTFT |error| median "
        f"{pct(s['ttft_med_abs'])}, p90 {pct(s['ttft_p90_abs'])}, bias {spct(s['ttft_bias'])}; TPOT |error| median "
        f"{pct(s['tpot_med_abs'])}, p90 {pct(s['tpot_p90_abs'])}, bias {spct(s['tpot_bias'])}."
        + (f" Run: {run.get('wall_s')} s wall for {run.get('rows')} rows ({run.get('s_per_row')} s/row, "
           f"{run.get('estimates')} distinct estimates, {run.get('jobs')} worker(s))." if run else ""),
        "",
    ]
    lines += table("Overall", None)
    lines += table("By backend", "backend")
    lines += table("By system", "system")
    lines += table("By mode", "mode")
    lines += table("By model", "model_path")
    aliased = [r for r in joined if r.get("aic_model_path")]
    if aliased:
        by = Counter((r["model_path"], r["aic_model_path"]) for r in aliased)
        lines += ["Rows estimated under a bundled alias of their model (`--model-alias`; AIConfigurator would "
                  "otherwise download the row's config from HuggingFace, unreachable where this ran): "
                  + "; ".join(f"{m} -> {al}: {n} rows" for (m, al), n in sorted(by.items())) + ".", ""]
    used = Counter(r.get("aic_backend_version", "") for r in joined if not r["aic_error"])
    said = {"row": "with the row's own backend_version",
            "default": "with AIConfigurator's default database version (the row's is not one of its queryable versions)"}
    if used:
        lines += ["Predicted rows: " + "; ".join(f"{n} {said.get(v, v or '?')}" for v, n in used.most_common()) + ".", ""]
    lines += ["### Rows not predicted, by reason", "", "| reason | rows |", "|---|---:|"]
    lines += [f"| {k} | {v} |" for k, v in reasons.most_common()] + [""]
    if missing:
        lines += [f"{len(missing)} result ids are not in the sample (left out): {', '.join(missing[:5])}", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", nargs="?", help="silicon_sample.csv (default: the aiconfigurator-core wheel's copy)")
    ap.add_argument("--out", help="results CSV (default bench/results/aic-silicon-<today>.csv)")
    ap.add_argument("--limit", type=int, help="only the first N selected rows")
    ap.add_argument("--stratify-every", type=int, default=1, metavar="K",
                    help="every K-th row of each model x system x backend x mode group (default 1: all rows)")
    ap.add_argument("--resume", action="store_true", help="skip ids already in the output or its .partial.csv")
    ap.add_argument("--rerun-errors", metavar="REGEX",
                    help="with --resume: run again the rows whose aic_error matches REGEX")
    ap.add_argument("--model-alias", metavar="HF_ID=BUNDLED_ID", action="append", default=[],
                    help="ask for BUNDLED_ID where a row names HF_ID (a config AIConfigurator would download from "
                         "HuggingFace); the row's aic_model_path says so. Off by default: it changes the mapping")
    ap.add_argument("--jobs", type=int, default=1, help="aiconfigurator worker processes (default 1)")
    ap.add_argument("--venv", default=str(VENV), help="the aiconfigurator virtualenv (default bench/.venv-peers)")
    ap.add_argument("--aic-log", help="file for aiconfigurator's own messages (default in the temp directory)")
    ap.add_argument("--checkpoint-s", type=float, default=60.0, help="seconds between .partial.csv checkpoints")
    ap.add_argument("--summary", metavar="RESULTS_CSV", nargs="?", const="",
                    help="write <results stem>-summary.md for RESULTS_CSV (default: today's output) and exit")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--worker-info", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        return _worker()
    if a.worker_info:
        return _worker_info()
    if a.summary is not None:
        res = Path(a.summary or a.out or RESULTS / f"aic-silicon-{_dt.date.today().isoformat()}.csv")
        md = summarize(res, Path(a.csv) if a.csv else None)
        dest = res.with_name(res.stem + "-summary.md")
        write_text_atomic(dest, md)
        print(md)
        print(f"wrote {dest}", file=sys.stderr)
        return 0
    try:
        return run(a)
    except KeyboardInterrupt:
        print("\ninterrupted before the run started; nothing written", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
