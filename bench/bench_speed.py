"""perfmodel's speed, beside the peer calculators llm-analysis and genz-llm, in one run (issue 8).

    bash bench/run_bench.sh                                   # makes bench/.venv-peers, then runs this
    python bench/bench_speed.py --peer-python bench/.venv-peers/bin/python
    python bench/bench_speed.py --quick --no-peers            # a smoke run: small grids, no peers

It runs with the project's Python on ONE core (this process pins itself to CPU 0 and sets the
BLAS/OpenMP thread counts to 1 before numpy is imported; the subprocesses it starts, the peer
calculators included, inherit the pin) and measures:

1. perfmodel decode evaluations per second: `perfmodel.engine.evaluate(model, hw, batch, context)`
   over open grids of 10^3 ... 10^7 points (len(batch) x len(context)), best of a few repeats. One
   call returns, for every point, the step latency, throughput, weight + KV + activation memory and
   the fit flag (full len(batch) x len(context) arrays; weight bytes, a constant, is broadcast).
2. For each config (model x hardware x batch x context): the per-point time of perfmodel in a
   10^6-point grid of that model and hardware, one scalar evaluate() call (median), and one decode
   evaluation through each peer (bench/peers.py, run by the peer virtualenv's Python): the ratios.
3. Cold start: whole-process wall time of `perfmodel decode` and `perfmodel kv -m llama-2-13b`
   (median of 5 after one untimed run), and the `python -X importtime` top entries.

It prints the tables and the goal checks and writes everything as JSON to
bench/results/speed-<date>-<time>.json. docs/speed.md records a run. If the peer virtualenv is
missing or a peer fails, it says why and goes on with perfmodel's numbers.
"""
from __future__ import annotations

import os
import sys

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS",
           "VECLIB_MAXIMUM_THREADS"):
    os.environ[_v] = "1"  # before numpy is imported (here and in every subprocess)
CPUS_AVAILABLE = sorted(os.sched_getaffinity(0))
CORE = 0 if 0 in CPUS_AVAILABLE else CPUS_AVAILABLE[0]
os.sched_setaffinity(0, {CORE})

import argparse  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from perfmodel import engine  # noqa: E402
from perfmodel.specs import load_hardware, load_model  # noqa: E402

GOAL_EVALS_PER_S = 1_000_000
GOAL_RATIO = {"llm-analysis": 100, "genz-llm": 10_000}
GOAL_COLD_START_S = 0.5
PEERS = ("llm-analysis", "genz-llm")


# ---------------------------------------------------------------- machine
def machine() -> dict:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = int(line.split()[1]) * 1024
    except OSError:
        pass

    def git(*args):
        try:
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    return {"nproc": os.cpu_count(), "cpus_available": len(CPUS_AVAILABLE), "pinned_to_cpu": CORE, "cpu_model": cpu,
            "memory_bytes": mem, "python": platform.python_version(), "python_executable": sys.executable,
            "numpy": np.__version__, "platform": platform.platform(), "loadavg_at_start": os.getloadavg(),
            "perfmodel_commit": git("rev-parse", "--short", "HEAD"),
            "perfmodel_tree_dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}


# ---------------------------------------------------------------- perfmodel
def grid_axes(points: int):
    """An open grid of `points` = len(batch) x len(context): batch 1, 2, ..., context 128 ... 131072."""
    k = int(round(np.log10(points)))
    nb = 10 ** (k // 2)
    ns = points // nb
    return np.arange(1.0, nb + 1.0), np.linspace(128.0, 131072.0, ns).round()


def time_grid(model, hw, points: int, repeats: int) -> dict:
    B, S = grid_axes(points)
    engine.evaluate(model, hw, B[:2], S[:2])  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        r = engine.evaluate(model, hw, B, S)
        times.append(time.perf_counter() - t0)
        for col in ("latency_s", "throughput_tok_s", "memory_bytes", "fits"):
            assert r[col].shape == (B.size, S.size), (col, r[col].shape)
        del r
    best = min(times)
    return {"points": B.size * S.size, "batch_len": int(B.size), "context_len": int(S.size), "repeats": repeats,
            "best_s": best, "median_s": statistics.median(times), "evals_per_s": B.size * S.size / best,
            "s_per_point": best / (B.size * S.size)}


def time_scalar(model, hw, B: float, S: float, repeats: int, warmup: int) -> dict:
    for _ in range(warmup):
        engine.evaluate(model, hw, [B], [S])
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        engine.evaluate(model, hw, [B], [S])
        times.append(time.perf_counter() - t0)
    r = engine.evaluate(model, hw, [B], [S])
    out = {k: float(r[k][0, 0]) for k in ("latency_s", "throughput_tok_s", "weight_bytes", "kv_cache_bytes",
                                          "memory_bytes")}
    out["fits"] = bool(r["fits"][0, 0])
    return {"s_per_eval": statistics.median(times), "min_s": min(times), "repeats": repeats, "outputs": out}


def dims(model) -> dict:
    return {k: getattr(model, k) for k in ("n_layers", "d_model", "n_heads", "n_kv_heads", "head_dim", "d_ff",
                                           "vocab_size", "max_context", "mlp", "tied_embeddings")}


# ---------------------------------------------------------------- cold start
def _wall(cmd: list[str], runs: int, env: dict) -> dict:
    times, last = [], None
    for i in range(runs + 1):  # the first run warms the OS file cache (and writes bytecode); not counted
        t0 = time.perf_counter()
        last = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
        dt = time.perf_counter() - t0
        if i:
            times.append(dt)
    ok = last.returncode == 0 and bool(last.stdout.strip())
    return {"command": " ".join(cmd), "median_s": statistics.median(times), "min_s": min(times), "max_s": max(times),
            "runs": runs, "ok": ok, "stderr_tail": "" if ok else last.stderr[-500:]}


def importtime(cmd: list[str], env: dict, top: int = 12) -> dict:
    p = subprocess.run([cmd[0], "-X", "importtime", *cmd[1:]], cwd=ROOT, capture_output=True, text=True, env=env)
    rows = []
    for line in p.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cum_us, name = line.split(":", 1)[1].split("|")
        name = name[1:]  # one space after the bar, then two spaces per nesting level
        rows.append({"module": name.strip(), "level": (len(name) - len(name.lstrip())) // 2,
                     "self_us": int(self_us), "cumulative_us": int(cum_us)})
    first = [r for r in rows if r["level"] == 0]
    return {"command": " ".join(cmd), "total_import_us": sum(r["cumulative_us"] for r in first),
            "top_cumulative": sorted(first, key=lambda r: -r["cumulative_us"])[:top],
            "top_self": sorted(rows, key=lambda r: -r["self_us"])[:top]}


def cold_start(runs: int, cache_dir: str) -> dict:
    """Whole-process wall times. "cached": bytecode is cached as for any installed package (written
    to a private PYTHONPYCACHEPREFIX by the untimed first run, so nothing is written in the tree);
    "as inherited": this process's environment unchanged (where PYTHONDONTWRITEBYTECODE is set and
    the tree has no __pycache__, perfmodel's source is compiled on every start)."""
    py = sys.executable
    cached = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    cached["PYTHONPYCACHEPREFIX"] = cache_dir
    inherited = dict(os.environ)
    cmds = {"python -c pass": [py, "-c", "pass"],
            "python -c 'import numpy'": [py, "-c", "import numpy"],
            "perfmodel decode": [py, "-m", "perfmodel.cli", "decode"],
            "perfmodel kv -m llama-2-13b": [py, "-m", "perfmodel.cli", "kv", "-m", "llama-2-13b"]}
    script = Path(py).parent / "perfmodel"  # the installed console script, where this Python has one
    if script.exists():
        cmds["perfmodel decode (console script)"] = [str(script), "decode"]
        cmds["perfmodel kv -m llama-2-13b (console script)"] = [str(script), "kv", "-m", "llama-2-13b"]
    wall = {k: _wall(c, runs, cached) for k, c in cmds.items()}
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        for k in ("perfmodel decode", "perfmodel kv -m llama-2-13b"):
            wall[f"{k} [as inherited: PYTHONDONTWRITEBYTECODE=1]"] = _wall(cmds[k], runs, inherited)
    return {"wall": wall, "env": {"PYTHONDONTWRITEBYTECODE (inherited)": os.environ.get("PYTHONDONTWRITEBYTECODE"),
                                  "perfmodel __pycache__ in tree": (ROOT / "perfmodel" / "__pycache__").is_dir()},
            "importtime": {k: importtime(cmds[k], cached) for k in ("perfmodel decode", "perfmodel kv -m llama-2-13b")}}


# ---------------------------------------------------------------- peers
def run_peers(peer_python: str | None, configs: list[dict], repeats: dict, warmup: dict, import_runs: int,
              timeout: float) -> tuple[dict | None, str | None]:
    """The peers' report (bench/peers.py in the peer venv), or None and why not."""
    if not peer_python:
        return None, "no --peer-python given (bench/run_bench.sh makes bench/.venv-peers and passes it)"
    if not Path(peer_python).exists():
        return None, f"peer Python {peer_python} does not exist (run bench/run_bench.sh to make bench/.venv-peers)"
    spec = {"configs": configs, "repeats": repeats, "warmup": warmup, "import_runs": import_runs}
    try:
        p = subprocess.run([peer_python, str(ROOT / "bench" / "peers.py")], input=json.dumps(spec), cwd=ROOT,
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"bench/peers.py took longer than {timeout:.0f} s"
    except OSError as e:
        return None, f"could not start {peer_python}: {e}"
    if p.returncode != 0:
        return None, f"bench/peers.py exited {p.returncode}: {p.stderr.strip()[-800:]}"
    try:
        return json.loads(p.stdout), None
    except json.JSONDecodeError as e:
        return None, f"bench/peers.py printed no JSON ({e}); stderr: {p.stderr.strip()[-500:]}"


# ---------------------------------------------------------------- formatting
def fs(s) -> str:
    """Seconds, human: ns / us / ms / s."""
    if s is None:
        return "n/a"
    for unit, f in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= f:
            return f"{s / f:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def fx(r) -> str:
    if r is None:
        return "n/a"
    return f"{r:,.0f}x" if r >= 10 else f"{r:.2g}x"


def table(header: list[str], rows: list[list[str]]) -> str:
    w = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda r: "  ".join(str(x).rjust(n) if i else str(x).ljust(n) for i, (x, n) in enumerate(zip(r, w)))  # noqa: E731
    return "\n".join([line(header), line(["-" * n for n in w]), *map(line, rows)])


def ints(text: str) -> list[int]:
    return [int(float(x)) for x in text.split(",") if x.strip()]


# ---------------------------------------------------------------- markdown (docs/speed.md)
def markdown(res: dict) -> str:
    """The docs tables, from a results file: `python bench/bench_speed.py --markdown bench/results/X.json`."""
    def mt(header, rows):
        return "\n".join(["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|",
                          *("| " + " | ".join(map(str, r)) + " |" for r in rows)])

    m, out = res["machine"], []
    out.append(f"Run {res['started']} on {m['cpu_model']}, nproc {m['nproc']}, pinned to CPU {m['pinned_to_cpu']}; "
               f"Python {m['python']}, numpy {m['numpy']}; load average {m['loadavg_at_start'][0]:.2f} at the start, "
               f"{res['loadavg_at_end'][0]:.2f} at the end; perfmodel {m['perfmodel_commit']}"
               f"{' + uncommitted changes' if m['perfmodel_tree_dirty'] else ''}.")
    out.append("")
    out.append(mt(["points", "grid (batch x context)", "best time", "evals/s", "per point", ">= 1,000,000/s"],
                  [[f"{g['points']:,}", f"{g['batch_len']:,} x {g['context_len']:,}", fs(g["best_s"]),
                    f"{g['evals_per_s']:,.0f}", fs(g["s_per_point"]), "yes" if g["evals_per_s"] >= GOAL_EVALS_PER_S
                    else "**no**"] for g in res["grids"]]))
    out.append("")
    rows = []
    for c in res["per_config"]:
        ps, ra = c.get("peers_s", {}), c.get("ratios", {})
        rows.append([f"{c['model']} {c['hardware']} B={c['batch']} S={c['context']}", fs(c["grid_s_per_point"]),
                     fs(c["scalar_s"]), *(fs(ps.get(f"{peer} {v}")) for peer in PEERS for v in ("public", "lean")),
                     *(fx(ra.get(f"{peer} {v} / perfmodel grid_s_per_point")) for peer in PEERS
                       for v in ("public", "lean"))])
    out.append(mt(["config", "perfmodel grid, per point", "perfmodel scalar call", "llm-a inference()",
                   "llm-a decode-only", "genz decode_moddeling()", "genz one pass", "llm-a inference() / grid",
                   "llm-a decode-only / grid", "genz decode_moddeling() / grid", "genz one pass / grid"], rows))
    out.append("")
    rows = []
    for c in res["per_config"]:
        ra = c.get("ratios", {})
        rows.append([f"{c['model']} {c['hardware']} B={c['batch']} S={c['context']}",
                     *(fx(ra.get(f"{peer} {v} / perfmodel scalar_s")) for peer in PEERS for v in ("public", "lean"))])
    out.append(mt(["config", "llm-a inference() / scalar", "llm-a decode-only / scalar",
                   "genz decode_moddeling() / scalar", "genz one pass / scalar"], rows))
    out.append("")
    peers = res.get("peers") or {}
    pr = {(r["peer"], r["variant"], r["model"], r["hardware"], r["batch"], r["context"]): r
          for r in peers.get("results", [])}
    rows = []
    for c in res["per_config"]:
        o = c["outputs"]
        cells = [f"{c['model']} {c['hardware']} B={c['batch']} S={c['context']}", fs(o["latency_s"]),
                 f"{o['weight_bytes'] / 1e9:.1f} + {o['kv_cache_bytes'] / 1e9:.1f}", "yes" if o["fits"] else "no"]
        for peer in PEERS:
            r = pr.get((peer, "lean", c["model"], c["hardware"], c["batch"], c["context"]))
            q = None if r is None or "error" in r else r["outputs"]
            cells += ["n/a"] * 3 if q is None else [fs(q["latency_s"]),
                                                    f"{q['weight_bytes'] / 1e9:.1f} + {q['kv_cache_bytes'] / 1e9:.1f}",
                                                    "yes" if q["fits"] else "no"]
        rows.append(cells)
    out.append(mt(["config", "perfmodel step", "perfmodel weights + KV (GB)", "fits", "llm-a step",
                   "llm-a weights + KV (GB)", "fits", "genz step", "genz weights + KV (GB)", "fits"], rows))
    out.append("")
    rows = [[f"`{k}`", fs(v["median_s"]), fs(v["min_s"]), fs(v["max_s"]),
             ("yes" if v["median_s"] <= GOAL_COLD_START_S else "**no**") if k.startswith("perfmodel") else ""]
            for k, v in res["cold_start"]["wall"].items()]
    for peer, it in peers.get("import", {}).items():
        rows.append([f"`python -c 'import {it['module']}'` ({peer}, peer venv)", fs(it["process_wall_s"]), "", "",
                     ""])
    out.append(mt(["command (whole process)", "median", "min", "max", "<= 0.5 s"], rows))
    out.append("")
    for k, it in res["cold_start"]["importtime"].items():
        out.append(f"`python -X importtime`, `{k}`: {it['total_import_us'] / 1e3:.0f} ms of imports; largest "
                   "top-level imports (cumulative): "
                   + ", ".join(f"{r['module']} {r['cumulative_us'] / 1e3:.0f} ms" for r in it["top_cumulative"][:8])
                   + ".")
        out.append("")
    return "\n".join(out)


# ---------------------------------------------------------------- main
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--peer-python", help="Python of the peer virtualenv (bench/.venv-peers/bin/python)")
    ap.add_argument("--no-peers", action="store_true", help="perfmodel's numbers only")
    ap.add_argument("--models", default="llama-2-13b,llama-2-7b")
    ap.add_argument("--hardware", default="a100-80gb-sxm,h100-sxm")
    ap.add_argument("--batch", default="1,8,64")
    ap.add_argument("--context", default="1024,4096")
    ap.add_argument("--max-points", type=float, default=1e7, help="largest grid (10^3 ... this)")
    ap.add_argument("--quick", action="store_true", help="grids up to 10^5, few repeats (a smoke run)")
    ap.add_argument("--out-dir", default=str(ROOT / "bench" / "results"))
    ap.add_argument("--peer-timeout", type=float, default=1800)
    ap.add_argument("--markdown", metavar="RESULTS_JSON", help="print the docs tables of a results file and exit")
    a = ap.parse_args(argv)
    if a.markdown:
        print(markdown(json.loads(Path(a.markdown).read_text())))
        return 0

    started = datetime.datetime.now()
    quick = a.quick
    max_points = min(a.max_points, 1e5) if quick else a.max_points
    sizes = [10**k for k in range(3, 8) if 10**k <= max_points]
    per_config_points = min(10**6, sizes[-1])
    models = [load_model(m) for m in a.models.split(",")]
    hws = [load_hardware(h) for h in a.hardware.split(",")]
    batches, contexts = ints(a.batch), ints(a.context)
    info = machine()
    print(f"perfmodel speed benchmark, {started:%Y-%m-%d %H:%M}; {info['cpu_model']}; nproc {info['nproc']}, "
          f"pinned to CPU {CORE}; Python {info['python']}, numpy {info['numpy']}; load average "
          f"{info['loadavg_at_start'][0]:.2f}", flush=True)

    # 1. grids
    m0, h0 = models[0], hws[0]
    grids = []
    for n in sizes:
        reps = 2 if quick else max(3, min(30, int(3e6 / n)))
        grids.append(time_grid(m0, h0, n, reps))
        g = grids[-1]
        print(f"  grid {g['points']:>10,} points ({g['batch_len']} x {g['context_len']}): best {fs(g['best_s'])}, "
              f"{g['evals_per_s']:,.0f} evals/s", flush=True)

    # 2. per config: perfmodel
    per_point = {}
    for m in models:
        for h in hws:
            per_point[(m.key or m.name, h.key or h.name)] = time_grid(m, h, per_config_points, 2 if quick else 3)
    configs, pm = [], {}
    for m in models:
        for h in hws:
            for B in batches:
                for S in contexts:
                    key = (m.key or m.name, h.key or h.name, B, S)
                    configs.append({"model": key[0], "dims": dims(m), "hardware": key[1], "batch": B, "context": S})
                    sc = time_scalar(m, h, B, S, 50 if quick else 200, 5 if quick else 20)
                    pm[key] = {"grid_s_per_point": per_point[key[:2]]["s_per_point"],
                               "grid_points": per_point[key[:2]]["points"], "scalar_s": sc["s_per_eval"],
                               "outputs": sc["outputs"]}

    # 3. peers
    peers, why = (None, "--no-peers") if a.no_peers else run_peers(
        a.peer_python, configs, {"llm-analysis": 30 if quick else 200, "genz-llm": 3 if quick else 7},
        {"llm-analysis": 5 if quick else 20, "genz-llm": 1 if quick else 2}, 2 if quick else 5, a.peer_timeout)
    if peers is None:
        print(f"\npeers not measured: {why}", flush=True)
    else:
        for peer, err in peers.get("errors", {}).items():
            print(f"\n{peer} failed: {err}", flush=True)
    pr = {}  # (peer, variant, model, hw, B, S) -> row
    for r in (peers or {}).get("results", []):
        pr[(r["peer"], r["variant"], r["model"], r["hardware"], r["batch"], r["context"])] = r

    agree = {}  # does each peer's decode-only call return what its public call returns?
    for peer in PEERS:
        pairs = [(pr.get((peer, "public", *k[2:])), r) for k, r in pr.items() if k[0] == peer and k[1] == "lean"]
        pairs = [(a, b) for a, b in pairs if a is not None and "error" not in a and "error" not in b]
        if pairs:
            agree[peer] = all(abs(a["outputs"][f] - b["outputs"][f]) <= 1e-9 * abs(a["outputs"][f])
                              for a, b in pairs for f in ("latency_s", "weight_bytes", "kv_cache_bytes"))
            if not agree[peer]:
                print(f"\nwarning: {peer}'s decode-only call does not reproduce its public call's numbers", flush=True)

    def peer_s(peer, variant, key):
        r = pr.get((peer, variant, *key))
        return None if r is None or "error" in r else r["s_per_eval"]

    # 4. cold start
    with tempfile.TemporaryDirectory(prefix="perfmodel-bench-pycache-") as cache_dir:
        cold = cold_start(3 if quick else 5, cache_dir)

    # ---------------------------------------------------------- report
    print("\nperfmodel decode evaluations per second, one core "
          f"({m0.key or m0.name} on {h0.key or h0.name}; engine.evaluate over an open batch x context grid, best of "
          "repeats)")
    print(table(["points", "grid", "best", "evals/s", "s/point", f">= {GOAL_EVALS_PER_S:,}/s"],
                [[f"{g['points']:,}", f"{g['batch_len']} x {g['context_len']}", fs(g["best_s"]),
                  f"{g['evals_per_s']:,.0f}", fs(g["s_per_point"]), "yes" if g["evals_per_s"] >= GOAL_EVALS_PER_S
                  else "NO"] for g in grids]))

    rows, ratio_rows = [], []
    for c in configs:
        key = (c["model"], c["hardware"], c["batch"], c["context"])
        p = pm[key]
        t = {(peer, v): peer_s(peer, v, key) for peer in PEERS for v in ("public", "lean")}
        rows.append([f"{key[0]} {key[1]} B={key[2]} S={key[3]}", fs(p["grid_s_per_point"]), fs(p["scalar_s"]),
                     *(fs(t[(peer, v)]) for peer in PEERS for v in ("public", "lean"))])
        rat = {(peer, v, base): (None if t[(peer, v)] is None else t[(peer, v)] / p[base])
               for peer in PEERS for v in ("public", "lean") for base in ("grid_s_per_point", "scalar_s")}
        p["peers_s"] = {f"{peer} {v}": t[(peer, v)] for peer in PEERS for v in ("public", "lean")}
        p["ratios"] = {f"{peer} {v} / perfmodel {base}": r for (peer, v, base), r in rat.items()}
        ratio_rows.append([rows[-1][0], *(fx(rat[(peer, v, "grid_s_per_point")]) for peer in PEERS
                                         for v in ("public", "lean")),
                           *(fx(rat[(peer, v, "scalar_s")]) for peer in PEERS for v in ("public", "lean"))])

    print(f"\nseconds per decode evaluation (perfmodel grid = per-point time in a {per_config_points:,}-point grid of "
          "that model and hardware; scalar = one evaluate() call; peers: median of repeats after warm-up)")
    print(table(["config", "perfmodel grid", "perfmodel scalar", "llm-a inference()", "llm-a decode-only",
                 "genz decode_moddeling", "genz 1 pass"], rows))
    print("\nratio = peer seconds / perfmodel seconds")
    print(table(["config", "llm-a pub / grid", "llm-a lean / grid", "genz pub / grid", "genz lean / grid",
                 "llm-a pub / scalar", "llm-a lean / scalar", "genz pub / scalar", "genz lean / scalar"],
                ratio_rows))
    if peers is not None:
        refused: dict = {}  # (peer, variant, exception type) -> configs, one message
        for r in peers["results"]:
            if "error" in r:
                k = (r["peer"], r["variant"], r["error"].split(":")[0])
                refused.setdefault(k, [[], r["error"]])[0].append(f"{r['model']} {r['hardware']} B={r['batch']} "
                                                                  f"S={r['context']}")
        if refused:
            print("\nn/a = the peer refused the config:")
            for (peer, variant, _), (cfgs, msg) in refused.items():
                print(f"  {peer} {variant} call, {len(cfgs)} configs ({'; '.join(cfgs)}), e.g. {msg[:200]}")
        print("\nwhat each call returned (decode step latency; weights + KV cache in GB; fits)")
        out_rows = []
        for c in configs:
            key = (c["model"], c["hardware"], c["batch"], c["context"])
            o = pm[key]["outputs"]
            cells = [f"{key[0]} {key[1]} B={key[2]} S={key[3]}", fs(o["latency_s"]),
                     f"{o['weight_bytes'] / 1e9:.1f}+{o['kv_cache_bytes'] / 1e9:.1f} {'fits' if o['fits'] else 'NO'}"]
            for peer in PEERS:
                r = pr.get((peer, "lean", *key))
                if r is None or "error" in r:
                    cells += ["n/a", "n/a"]
                else:
                    q = r["outputs"]
                    cells += [fs(q["latency_s"]), f"{q['weight_bytes'] / 1e9:.1f}+{q['kv_cache_bytes'] / 1e9:.1f} "
                                                  f"{'fits' if q['fits'] else 'NO'}"]
            out_rows.append(cells)
        print(table(["config", "perfmodel latency", "perfmodel mem", "llm-a latency", "llm-a mem", "genz latency",
                     "genz mem"], out_rows))
        print("\nimport time (fresh `python -c 'import X'`, median, minus an empty interpreter):")
        for peer, it in peers.get("import", {}).items():
            print(f"  {peer:13s} import {it['module']}: {fs(it['import_s'])} (whole process {fs(it['process_wall_s'])})")

    print("\ncold start (whole-process wall time, median of runs after one untimed run; bytecode cached unless "
          "marked)")
    print(table(["command", "median", "min", "max", f"<= {GOAL_COLD_START_S} s"],
                [[k, fs(v["median_s"]), fs(v["min_s"]), fs(v["max_s"]),
                  ("yes" if v["median_s"] <= GOAL_COLD_START_S else "NO") if k.startswith("perfmodel") else ""]
                 for k, v in cold["wall"].items()]))
    for k, it in cold["importtime"].items():
        print(f"\npython -X importtime, {k}: {it['total_import_us'] / 1e3:.0f} ms of imports; top cumulative:")
        print("  " + ", ".join(f"{r['module']} {r['cumulative_us'] / 1e3:.0f} ms" for r in it["top_cumulative"][:8]))

    # goals
    goals = {"evals_per_s": {str(g["points"]): g["evals_per_s"] >= GOAL_EVALS_PER_S for g in grids}}
    for peer in PEERS:
        med, fast, lean = [], [], []  # ratios to perfmodel's grid per-point time
        for c in configs:
            key = (c["model"], c["hardware"], c["batch"], c["context"])
            grid_s = pm[key]["grid_s_per_point"]
            r = pr.get((peer, "public", *key))
            if r is not None and "error" not in r:
                med.append(r["s_per_eval"] / grid_s)
                fast.append(r["min_s"] / grid_s)  # the peer's fastest call instead of its median
            r = pr.get((peer, "lean", *key))
            if r is not None and "error" not in r:
                lean.append(r["s_per_eval"] / grid_s)
        goals[f"{peer} ratio >= {GOAL_RATIO[peer]:,} (public call / perfmodel grid per point)"] = (
            None if not med else {"configs_measured": len(med), "configs_met": sum(x >= GOAL_RATIO[peer] for x in med),
                                  "min_ratio": min(med), "min_ratio_with_peer_fastest_call": min(fast)})
        goals[f"{peer} lean call / perfmodel grid per point (stricter, not the goal)"] = (
            None if not lean else {"min": min(lean), "max": max(lean)})
    goals["cold start"] = {k: v["median_s"] <= GOAL_COLD_START_S for k, v in cold["wall"].items()
                           if k.startswith("perfmodel") and "inherited" not in k}
    print("\ngoals")
    met = goals["evals_per_s"]
    print(f"  >= {GOAL_EVALS_PER_S:,} decode evals/s on one core: "
          + ", ".join(f"{int(k):,} points {'yes' if v else 'NO'}" for k, v in met.items()))
    for peer in PEERS:
        g = goals[f"{peer} ratio >= {GOAL_RATIO[peer]:,} (public call / perfmodel grid per point)"]
        s = "not measured" if g is None else (f"{g['configs_met']} of {g['configs_measured']} measured configs, "
                                             f"lowest {fx(g['min_ratio'])} (with the peer's fastest call instead of "
                                             f"its median: {fx(g['min_ratio_with_peer_fastest_call'])})")
        lean = goals[f"{peer} lean call / perfmodel grid per point (stricter, not the goal)"]
        extra = "" if lean is None else f" (against its decode-only subset: {fx(lean['min'])} to {fx(lean['max'])})"
        print(f"  >= {GOAL_RATIO[peer]:,}x {peer} per configuration: {s}{extra}")
    print("  cold start <= 0.5 s: " + ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in goals["cold start"].items()))

    result = {"date": f"{started:%Y-%m-%d}", "started": started.isoformat(timespec="seconds"),
              "seconds": (datetime.datetime.now() - started).total_seconds(), "machine": info,
              "settings": {"models": a.models, "hardware": a.hardware, "batch": batches, "context": contexts,
                           "grid_sizes": sizes, "per_config_grid_points": per_config_points, "quick": quick,
                           "threads_env": {k: os.environ[k] for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                                                       "MKL_NUM_THREADS")}},
              "grids": grids,
              "per_config": [{"model": k[0], "hardware": k[1], "batch": k[2], "context": k[3], **v}
                             for k, v in pm.items()],
              "peers": peers, "peers_not_measured": why, "peer_lean_call_reproduces_public_call": agree, "cold_start": cold, "goals": goals,
              "loadavg_at_end": os.getloadavg(), "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
    out = Path(a.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"speed-{started:%Y-%m-%d-%H%M%S}.json"
    path.write_text(json.dumps(result, indent=1, default=str) + "\n")
    print(f"\nwrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
