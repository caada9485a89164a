#!/usr/bin/env python3
"""The whole test suite, run again and again under load: the flaky-test hunt of docs/import-and-hardening.md.

Each run is the README's test command on 2 xdist workers (`python -m pytest -n 2`) beside `--hogs` processes that
spin a core each, so the tests meet a machine busier than its cores. The first run uses the CI profile (hypothesis
derandomized); the others the dev profile (200 examples) with a printed seed each, so a failure can be rerun
with the same draws (`HYPOTHESIS_PROFILE=dev python -m pytest --hypothesis-seed=SEED TEST`).

The suite runs on a copy of HEAD's tracked files (git archive, imported through PYTHONPATH, console-script
subprocesses included), so editing the working tree meanwhile does not change what runs.

    python bench/load_suite.py --runs 5 --out bench/results/load-runs-DATE.json

One JSON file, written once at the end (atomically): per run its seed, exit code, wall seconds, pytest's last line
and the tests that failed. Exit 0 when every run passed, 1 when one failed, 130 on Ctrl-C (the hogs and the
suite are stopped)."""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _hog() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)


def _one(tree: Path, seed, workers: int, hogs: int, log: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree))
    cmd = [sys.executable, "-m", "pytest", "-n", str(workers), "-q", "-p", "no:cacheprovider"]
    if seed == "ci":
        env["HYPOTHESIS_PROFILE"] = "ci"
    else:
        env["HYPOTHESIS_PROFILE"] = "dev"
        cmd.append(f"--hypothesis-seed={seed}")
    spin = [_hog() for _ in range(hogs)]
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, cwd=tree, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
                         start_new_session=True)
    try:
        rc = p.wait()
    finally:
        for h in spin:
            os.killpg(h.pid, signal.SIGKILL)
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    wall = time.monotonic() - t0
    lines = log.read_text(errors="replace").splitlines()
    failed = [ln for ln in lines if ln.startswith(("FAILED ", "ERROR "))]
    # a failure keeps pytest's report of it (the log is a temporary file): the first 150 lines from FAILURES/ERRORS
    start = next((i for i, ln in enumerate(lines) if ln.startswith("=") and (" FAILURES " in ln or " ERRORS " in ln)),
                 None)
    return {"seed": seed, "rc": rc, "wall_s": round(wall, 1), "last_line": lines[-1] if lines else "",
            "failed": failed, **({"report": lines[start:start + 150]} if failed and start is not None else {})}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seeds", default="", help="comma list (ci = the CI profile); default ci, then 1, 2, ...")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--hogs", type=int, default=2, help="processes spinning a core each beside the suite")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    if not a.out.parent.is_dir():
        print(f"load_suite: error: --out: folder {a.out.parent} does not exist", file=sys.stderr)
        return 2
    seeds = [s.strip() for s in a.seeds.split(",") if s.strip()] or ["ci", *range(1, a.runs)]
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()
    runs = []
    try:
        with tempfile.TemporaryDirectory(prefix="perfmodel-load-") as tmp:
            tree = Path(tmp) / "tree"
            tree.mkdir()
            arc = subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, capture_output=True, check=True).stdout
            subprocess.run(["tar", "-x", "-C", str(tree)], input=arc, check=True)
            for i, seed in enumerate(seeds[:a.runs]):
                r = _one(tree, seed, a.workers, a.hogs, Path(tmp) / f"run-{i}.log")
                runs.append(r)
                print(f"run {i + 1}: seed {seed}: rc {r['rc']}, {r['wall_s']:.0f} s: {r['last_line']}", flush=True)
                for f in r["failed"]:
                    print(f"  {f}", flush=True)
    except KeyboardInterrupt:
        print("load_suite: interrupted; nothing written", file=sys.stderr)
        return 130
    doc = {"commit": head, "date": time.strftime("%Y-%m-%d"), "cores": len(os.sched_getaffinity(0)),
           "workers": a.workers, "hogs": a.hogs, "python": sys.version.split()[0], "runs": runs,
           "passed_in_a_row": next((i for i, r in enumerate(runs) if r["rc"] != 0), len(runs))}
    tmp_out = a.out.with_name(f".{a.out.name}.tmp")
    tmp_out.write_text(json.dumps(doc, indent=1) + "\n")
    os.replace(tmp_out, a.out)
    return 0 if all(r["rc"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
