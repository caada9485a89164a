"""The paths users call, timed side by side in one run (issue 14): single queries, spec loading, sweeps to a
DataFrame, CSV and Parquet (rate and peak memory), the serving simulator's scaling, plan, a cold plot, and
llm-analysis beside them.

    bash bench/run_bench.sh                          # makes bench/.venv-peers (llm-analysis), then bench_speed.py
    python bench/bench_paths.py --peer-python bench/.venv-peers/bin/python
    python bench/bench_paths.py --quick --no-peers   # a smoke run: smaller sizes

Every timing is wall time on this machine as it is (other processes included: the load average is recorded).
Whole commands run as subprocesses of the installed `perfmodel` (or `python -c`), so a number is what a user
waits for, imports and spec loading included; peak memory is the child's maximum resident set
(resource.getrusage(RUSAGE_CHILDREN), so each measured child runs from a fresh process). In-process numbers
(point queries) are medians of many calls after a warm-up. Results go to bench/results/paths-<date>-<time>.json;
docs/speed.md records a run. Targets are printed beside each number; this script never fails on a miss.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
PM = [PY, "-m", "perfmodel.cli"]

TARGETS = {"point_vs_llm_analysis": "faster than llm-analysis inference()", "decode_df_ms": 1.0,
           "df_rows_per_s": 3e6, "df_peak_gb": 2.0, "csv_rows_per_s": 1e6, "parquet_rows_per_s": 3e6,
           "stream_peak_mb": 400, "serve_ratio": 11.0, "serve_100k_64_s": 10.0, "plan_4096_s": 0.5,
           "plan_any_s": 1.0, "plot_cold_s": 0.6, "tests_s": 60.0}


def child(cmd: list[str], timeout: float = 900, cwd=None) -> dict:
    """Wall seconds and peak RSS (bytes) of one fresh child process; its output is kept for checks."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd or ROOT)
    dt = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()[-400:]}")
    # ru_maxrss of children is the max over all children so far: a child smaller than an earlier one reads as
    # the earlier one's. Measured children therefore run in increasing size order, or via rss_child().
    return {"s": dt, "peak_rss": max(r1, r0) * 1024, "stdout": p.stdout, "stderr": p.stderr}


def rss_child(cmd: list[str], timeout: float = 900) -> dict:
    """Like child(), but the peak RSS of exactly this child (GNU time's %M when present, else /proc polling)."""
    tb = "/usr/bin/time"
    if os.path.exists(tb):
        with tempfile.NamedTemporaryFile("r", suffix=".rss") as f:
            r = child([tb, "-f", "%M", "-o", f.name, *cmd], timeout)
            r["peak_rss"] = int(Path(f.name).read_text().split()[-1]) * 1024
            return r
    return child(cmd, timeout)


def median_call(fn, n: int, warmup: int = 20) -> float:
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def fs(s: float) -> str:
    return f"{s * 1e6:.1f} µs" if s < 1e-3 else f"{s * 1e3:.2f} ms" if s < 1 else f"{s:.2f} s"


def table(header, rows) -> str:
    w = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda r: "  ".join(str(x).ljust(k) for x, k in zip(r, w)).rstrip()  # noqa: E731
    return "\n".join([line(header), line(["-" * k for k in w])] + [line(r) for r in rows])


# ---------------------------------------------------------------- 1. single queries
def single_queries(quick: bool) -> dict:
    import perfmodel as pm
    from perfmodel import api

    n = 300 if quick else 2000
    pts = [(b, c) for b in range(1, 65) for c in range(512, 4096, 32)][:n]  # within max_context: no warnings
    it = iter(pts * 3)
    out = {
        "pm.point, new point each call": median_call(lambda: pm.point("llama-2-13b", "h100-sxm", *next(it)), n),
        "pm.point, same point": median_call(lambda: pm.point("llama-2-13b", "h100-sxm", 8, 1024), n),
        "pm.decode (DataFrame), one point": median_call(
            lambda: pm.decode("llama-2-13b", "h100-sxm", batch=8, context=1024), max(100, n // 5)),
        "api.decode (dict of arrays), one point": median_call(
            lambda: api.decode("llama-2-13b", "h100-sxm", batch=8, context=1024), n),
    }
    m, hw = pm.load_model("llama-2-13b"), pm.load_hardware("h100-sxm")
    W = pm.per_sequence(m, 1024.0)["weight_bytes"]
    kv = float(pm.per_sequence(m, 1024.0)["kv_bytes_per_seq"])
    bw = hw.memory_bandwidth

    def lecture(B=8):  # the lecture's (weights + B * KV) / bandwidth in plain Python: the floor of any tool
        return (float(W) + B * kv) / bw

    out["plain Python (weights + B*KV)/bandwidth"] = median_call(lecture, n)
    return out


def peers(peer_python: str | None, quick: bool) -> tuple[dict | None, str | None]:
    """llm-analysis's inference() for Llama 2 13B on an H100 at B = 8, S = 1024 (bench/peers.py)."""
    if not peer_python or not Path(peer_python).exists():
        return None, f"no peer Python ({peer_python}); bench/run_bench.sh makes bench/.venv-peers"
    import perfmodel as pm

    m = pm.load_model("llama-2-13b")
    dims = {k: getattr(m, k) for k in ("n_layers", "d_model", "n_heads", "n_kv_heads", "head_dim", "d_ff",
                                        "vocab_size", "max_context", "mlp", "tied_embeddings")}
    spec = {"configs": [{"model": "llama-2-13b", "dims": dims, "hardware": "h100-sxm", "batch": 8, "context": 1024}],
            "repeats": {"llm-analysis": 100 if quick else 500, "genz-llm": 1}, "warmup": {"llm-analysis": 20, "genz-llm": 0},
            "import_runs": 1}
    p = subprocess.run([peer_python, str(ROOT / "bench" / "peers.py")], input=json.dumps(spec), capture_output=True,
                       text=True, timeout=900, cwd=ROOT)
    if p.returncode != 0:
        return None, f"bench/peers.py exited {p.returncode}: {p.stderr.strip()[-300:]}"
    rep = json.loads(p.stdout)
    res = {f"{r['peer']} {r['variant']}": r.get("s_per_eval") for r in rep["results"] if "error" not in r}
    return {"results": res, "packages": rep.get("packages")}, None


# ---------------------------------------------------------------- 2. spec loading
LOAD = r"""
import os, time
t0 = time.perf_counter(); import perfmodel.specs as s; t1 = time.perf_counter()
m = s.load_model("llama-2-13b"); t2 = time.perf_counter()
for _ in range(1000): s.load_model("llama-2-13b")
t3 = time.perf_counter()
p = s.catalog_dir("models") / "llama-2-13b.yaml"; st = os.stat(p)
os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 1000))  # a changed file is parsed again
t4 = time.perf_counter(); s.load_model("llama-2-13b"); t5 = time.perf_counter()
os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
import yaml
print(t1 - t0, t2 - t1, (t3 - t2) / 1000, t5 - t4, int(hasattr(yaml, "CSafeLoader")))
"""


def spec_loading() -> dict:
    r = child([PY, "-c", LOAD])
    imp, first, warm, changed, c = (float(x) for x in r["stdout"].split())
    return {"import perfmodel.specs": imp, "first load_model (parse)": first, "warm load_model (cached)": warm,
            "load_model after the file changed": changed, "libyaml C loader": bool(c)}


# ---------------------------------------------------------------- 3. sweeps
def sweeps(quick: bool, full: bool, peer_row_s: float | None) -> dict:
    ctx = "128:1250000:128"  # 9,765 contexts x 1,024 batches = 9,999,360 rows
    rows = 9_999_360
    if quick:
        ctx, rows = "128:131072:128", 1_048_576
    out = {}
    with tempfile.TemporaryDirectory(prefix="perfmodel-bench-") as d:
        code = ("import time, warnings; warnings.simplefilter('ignore'); import perfmodel as pm; t=time.perf_counter(); "
                f"df = pm.sweep('llama-2-13b', 'h100-sxm', '1:1024:1', '{ctx}', max_rows=10**9); "
                "print(len(df), time.perf_counter() - t)")
        r = rss_child([PY, "-c", code])
        n, inner = r["stdout"].split()
        out["DataFrame"] = {"rows": int(n), "s": r["s"], "inner_s": float(inner), "rows_per_s": int(n) / r["s"],
                            "peak_rss": r["peak_rss"]}
        for ext in ("csv", "parquet"):
            f = os.path.join(d, f"s.{ext}")
            r = rss_child([*PM, "sweep", "--batch", "1:1024:1", "--context", ctx, "--max-rows", "1000000000", "-o", f,
                           "--no-progress"])
            out[f"sweep -o .{ext}"] = {"rows": rows, "s": r["s"], "rows_per_s": rows / r["s"],
                                       "peak_rss": r["peak_rss"], "bytes": os.path.getsize(f)}
            os.unlink(f)
        # streaming memory against the row count
        sizes = [("128:131072:128", 1_048_576), ("128:1250000:128", 9_999_360)]
        if full:
            sizes.append(("128:12500000:128", 99_999_744))
        mem = []
        for c, n in sizes:
            f = os.path.join(d, "m.csv")
            r = rss_child([*PM, "sweep", "--batch", "1:1024:1", "--context", c, "--max-rows", "1000000000", "-o", f,
                           "--no-progress"], timeout=1800)
            mem.append({"rows": n, "s": r["s"], "peak_rss": r["peak_rss"], "rows_per_s": n / r["s"]})
            os.unlink(f)
        out["CSV streaming memory"] = mem
    if peer_row_s:
        for k in ("DataFrame", "sweep -o .csv", "sweep -o .parquet"):
            out[k]["x_llm_analysis_per_row"] = peer_row_s * out[k]["rows_per_s"]
    return out


# ---------------------------------------------------------------- 4. serving simulator
SETTINGS = {"64 slots": ["--slots", "64"], "KV memory only": ["--slots", "none"],
            "64 slots, separate prefill": ["--slots", "64", "--prefill", "separate"],
            "64 slots, token budget 512": ["--slots", "64", "--token-budget", "512"],
            "64 slots, contiguous KV": ["--slots", "64", "--kv-manager", "contiguous"]}


def serving(quick: bool) -> dict:
    small, big = (2_000, 20_000) if quick else (10_000, 100_000)
    out = {}
    for name, extra in SETTINGS.items():
        t = {}
        for n in (small, big):
            r = child([*PM, "serve-sim", "--requests", str(n), "--policy", "continuous", "--max-tokens", "100000000",
                       "--format", "json", *extra])
            t[n] = r["s"]
        out[name] = {"small": small, "big": big, "small_s": t[small], "big_s": t[big], "ratio": t[big] / t[small]}
    r = child([*PM, "serve-sim", "--requests", str(big), "--slots", "64", "--max-tokens", "100000000", "--format", "json"])
    out["both policies, 64 slots"] = {"big": big, "big_s": r["s"]}
    return out


# ---------------------------------------------------------------- 5. plan, plot, tests
def plan_plot(quick: bool) -> dict:
    out = {}
    r = child([*PM, "plan", "-m", "deepseek-v3", "--gpus", "4096", "--format", "json"])
    out["plan -m deepseek-v3 --gpus 4096 (CLI)"] = r["s"]
    code = ("import time, perfmodel as pm; pm.plan('deepseek-v3', 'h100-sxm', 8); t = time.perf_counter(); "
            "pm.plan('deepseek-v3', 'h100-sxm', 4096); print(time.perf_counter() - t)")
    out["pm.plan('deepseek-v3', gpus=4096), warm"] = float(child([PY, "-c", code])["stdout"])
    for g in ("1000000000", "999999999989", "735134400"):
        out[f"plan --gpus {g} (CLI)"] = child([*PM, "plan", "--gpus", g, "--format", "json"])["s"]
    with tempfile.TemporaryDirectory(prefix="perfmodel-bench-") as d:
        ts = [child([*PM, "plot", "roofline", "-o", os.path.join(d, f"r{i}.png")])["s"] for i in range(3 if quick else 5)]
    out["plot roofline -o x.png (cold, median)"] = statistics.median(ts)
    ts = [child([*PM, "decode", "--batch", "1"])["s"] for i in range(5)]
    out["perfmodel decode (cold, median)"] = statistics.median(ts)
    return out


def test_suite() -> dict:
    r = child([PY, "-m", "pytest", "-n", "auto", "-q", "-p", "no:cacheprovider"], timeout=1800)  # the README command
    return {"s": r["s"], "summary": r["stdout"].strip().splitlines()[-1]}


# ---------------------------------------------------------------- report
def report(res: dict) -> None:
    """The tables of one run (a fresh one, or a saved JSON with --markdown)."""
    la = (res.get("peers") or {}).get("results", {})
    la_pub, la_lean = la.get("llm-analysis public"), la.get("llm-analysis lean")
    print("\n1. one point, warm, from catalog names (median of calls)")
    rows = [[k, fs(v)] + ([f"{la_pub / v:.2f}x"] if la_pub else []) for k, v in res["single"].items()]
    if la_pub:
        rows += [["llm-analysis inference() (public)", fs(la_pub), "1.00x"],
                 ["llm-analysis decode part only (lean)", fs(la_lean), f"{la_pub / la_lean:.2f}x"]]
    print(table(["call", "time", "llm-analysis inference() / this"][:3 if la_pub else 2], rows))
    if res.get("peers_why"):
        print(f"   peers not measured: {res['peers_why']}")
    print("\n2. spec loading (a fresh process)")
    print(table(["step", "time"], [[k, fs(v) if isinstance(v, float) else str(v)] for k, v in res["loading"].items()]))
    print("\n3. sweeps of Llama 2 13B on an H100 (batch 1..1024 x context 128:...:128), whole commands")
    rows = []
    for k in ("DataFrame", "sweep -o .csv", "sweep -o .parquet"):
        v = res["sweeps"][k]
        rows.append([k, f"{v['rows']:,}", f"{v['s']:.2f} s", f"{v['rows_per_s'] / 1e6:.2f} M/s",
                     f"{v['peak_rss'] / 1e6:.0f} MB", f"{v.get('x_llm_analysis_per_row', float('nan')):,.0f}"])
    print(table(["path", "rows", "time", "rows/s", "peak RSS", "x llm-analysis per row"], rows))
    print()
    print(table(["CSV streaming rows", "time", "rows/s", "peak RSS"],
                [[f"{m['rows']:,}", f"{m['s']:.2f} s", f"{m['rows_per_s'] / 1e6:.2f} M/s", f"{m['peak_rss'] / 1e6:.0f} MB"]
                 for m in res["sweeps"]["CSV streaming memory"]]))
    print("\n4. serve-sim (continuous batching, whole commands)")
    print(table(["setting", "requests", "time", "requests", "time", "ratio"],
                [[k, f"{v['small']:,}" if "small" in v else "", f"{v['small_s']:.2f} s" if "small_s" in v else "",
                  f"{v['big']:,}", f"{v['big_s']:.2f} s", f"{v['ratio']:.2f}x" if "ratio" in v else ""]
                 for k, v in res["serving"].items()]))
    print("\n5. plan, plot and a cold query (whole commands unless marked)")
    print(table(["path", "time"], [[k, fs(v)] for k, v in res["plan_plot"].items()]))
    if res.get("tests"):
        print(f"\n6. the test suite: {res['tests']['s']:.1f} s ({res['tests']['summary']})")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--peer-python", default=str(ROOT / "bench" / ".venv-peers" / "bin" / "python"))
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    ap.add_argument("--full", action="store_true", help="also stream 10^8 rows (about a minute)")
    ap.add_argument("--tests", action="store_true", help="also time the whole test suite")
    ap.add_argument("--out-dir", default=str(ROOT / "bench" / "results"))
    ap.add_argument("--markdown", metavar="RESULTS_JSON", help="print the tables of a saved run and exit")
    a = ap.parse_args(argv)
    if a.markdown:
        report(json.loads(Path(a.markdown).read_text()))
        return 0
    started = datetime.datetime.now()
    info = {"date": started.isoformat(timespec="seconds"), "python": platform.python_version(), "nproc": os.cpu_count(),
            "loadavg_at_start": os.getloadavg(), "platform": platform.platform(),
            "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                     cwd=ROOT).stdout.strip()}
    print(f"perfmodel user-path benchmark, {started:%Y-%m-%d %H:%M}; nproc {info['nproc']}; load average "
          f"{info['loadavg_at_start'][0]:.2f}; commit {info['commit']}", flush=True)
    res = {"machine": info, "targets": TARGETS}
    res["single"] = single_queries(a.quick)
    res["peers"], res["peers_why"] = (None, "--no-peers") if a.no_peers else peers(a.peer_python, a.quick)
    la_pub = (res["peers"] or {}).get("results", {}).get("llm-analysis public")
    res["loading"] = spec_loading()
    res["sweeps"] = sweeps(a.quick, a.full, la_pub)
    res["serving"] = serving(a.quick)
    res["plan_plot"] = plan_plot(a.quick)
    if a.tests:
        res["tests"] = test_suite()
    res["machine"]["loadavg_at_end"] = os.getloadavg()
    report(res)
    Path(a.out_dir).mkdir(parents=True, exist_ok=True)
    path = Path(a.out_dir) / f"paths-{started:%Y-%m-%d-%H%M%S}.json"
    path.write_text(json.dumps(res, indent=1, default=str) + "\n")
    print(f"\nwrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
