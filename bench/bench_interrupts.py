"""Signals at random moments of a real `perfmodel` command's life, counted by outcome (issue 26).

    python bench/bench_interrupts.py --trials 300 --max-delay 0.6 --out bench/results/interrupts.json

Each trial starts the console script (`perfmodel decode -m llama-2-7b --format csv`) and sends SIGINT or SIGTERM
after a delay drawn uniformly from [0, --max-delay] seconds (seeded). A trial is right when it either finished
normally (exit 0, the CSV on stdout, nothing on stderr) or ended with 128 + the signal and exactly one
`perfmodel: interrupted by ...` line on stderr. Wrong: a traceback, any other stderr, a "nothing was written"
message followed by a normal exit, or another exit code. A signal that lands before Python has started
ends the process by the signal itself (exit -2/-15, nothing printed): counted apart, as "before Python".
A signal in CPython's own start-up (interpreter init, site, the console script's first imports, up to
perfmodel/__init__.py's guard) gets CPython's KeyboardInterrupt traceback or "Fatal Python error": counted apart
too, since no package code runs there; every traceback is classified by its last frame.
Timing depends on the machine and its load, so this is a benchmark, not a test; tests/test_interrupts.py
holds the deterministic checks of each handler.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter


def _guard_line() -> int:
    """The line of perfmodel/__init__.py that installs the start-up guard."""
    import perfmodel

    text = open(perfmodel.__file__).read().splitlines()
    return next(i for i, ln in enumerate(text, 1) if ln.strip().startswith("_install_early()"))


GUARD = _guard_line()


def _before_guard(frame: str) -> bool:
    m = re.search(r'File "([^"]+)", line (\d+)', frame)
    if not m:
        return False
    path, line = m.group(1), int(m.group(2))
    return path.endswith("perfmodel/interrupts.py") or (path.endswith("perfmodel/__init__.py") and line <= GUARD)


def trial(exe: str, delay: float, sig: int) -> str:
    p = subprocess.Popen([exe, "decode", "-m", "llama-2-7b", "--format", "csv"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    time.sleep(delay)
    try:
        p.send_signal(sig)
    except ProcessLookupError:
        pass
    out, err = p.communicate(timeout=60)
    err = err.decode("utf-8", "replace")
    lines = err.splitlines()
    if "Traceback" in err or "Fatal Python error" in err:
        frames = [ln for ln in lines if ln.strip().startswith("File ")]
        ours = [f for f in frames if "/perfmodel/" in f and "/bin/perfmodel" not in f]
        if ours and not _before_guard(ours[-1]):
            return "traceback in perfmodel"
        return "traceback in Python's start-up (before perfmodel's guard)"
    if p.returncode == 0:
        return "finished" if not lines and out.startswith(b"model,") else "exit 0 with stderr"
    if p.returncode < 0:
        return "before Python" if not err else "killed with stderr"
    if p.returncode == 128 + sig and len(lines) == 1 and lines[0].startswith("perfmodel: interrupted by"):
        return "one line, " + ("while starting" if "while starting" in lines[0] else
                               "after the work" if "after its work" in lines[0] else "during the work")
    return f"wrong: rc {p.returncode}, {len(lines)} stderr lines"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=300)
    ap.add_argument("--max-delay", type=float, default=0.6)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out")
    a = ap.parse_args()
    exe = shutil.which("perfmodel") or os.path.join(os.path.dirname(sys.executable), "perfmodel")
    rng = random.Random(a.seed)
    counts: Counter = Counter()
    t0 = time.time()
    for _ in range(a.trials):
        counts[trial(exe, rng.uniform(0, a.max_delay), rng.choice([signal.SIGINT, signal.SIGTERM]))] += 1
    res = {"trials": a.trials, "max_delay_s": a.max_delay, "seed": a.seed, "seconds": round(time.time() - t0, 1),
           "outcomes": dict(counts.most_common())}
    print(json.dumps(res, indent=2))
    if a.out:
        tmp = a.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(res, f, indent=2)
        os.replace(tmp, a.out)
    bad = sum(v for k, v in counts.items() if k.startswith(("traceback in perfmodel", "wrong", "exit 0 with",
                                                            "killed with")))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
