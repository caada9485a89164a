"""Re-run every `$ perfmodel ...` example in README.md and docs/*.md and paste its real output.

    python docs/update_examples.py          # rewrite the files in place
    python docs/update_examples.py --check  # exit 1 if any example's output is stale (used by the tests)

An example is a fenced block whose first line is `$ perfmodel ARGS`; the rest of the block is the output.
The docs show the output of an install with the `kernels` extra (AIConfigurator's measured kernels); without
it, --check leaves the examples that depend on them (engine profiles, validate --published / --serving) as
they are, so that the tests of a plain install pass, and a rewrite refuses.
"""
from __future__ import annotations

import contextlib
import io
import re
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BLOCK = re.compile(r"```text\n\$ perfmodel ([^\n]*)\n(.*?)```", re.S)


def run(args: str) -> str:
    from perfmodel.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(shlex.split(args))
    text = out.getvalue() + err.getvalue()
    return text if code == 0 else text + f"(exit code {code})\n"


# examples whose output depends on the measured kernel tables (the `kernels` extra): the docs show them with it
KERNELS = re.compile(r"--impl (vllm|sglang|trtllm)-|validate --published|validate --serving")


def needs_kernels(args: str) -> bool:
    return bool(KERNELS.search(args))


def update(path: Path, skip=lambda args: False) -> tuple[str, str]:
    old = path.read_text()
    new = BLOCK.sub(lambda m: m.group(0) if skip(m.group(1)) else
                    f"```text\n$ perfmodel {m.group(1)}\n{run(m.group(1))}```", old)
    return old, new


def files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


if __name__ == "__main__":
    from perfmodel.kernels import aic_dir

    # without the extra, --check leaves the examples that need it as they are (the tests of a plain install)
    skip = needs_kernels if ("--check" in sys.argv and aic_dir() is None) else (lambda args: False)
    if aic_dir() is None and "--check" not in sys.argv:
        sys.exit("update_examples: install the kernels extra first (pip install \".[kernels]\"): the docs show the "
                 "engine profiles' output with AIConfigurator's measured kernels")
    stale = []
    for p in files():
        old, new = update(p, skip)
        if old != new:
            stale.append(p.name)
            if "--check" not in sys.argv:
                p.write_text(new)
    if stale and "--check" in sys.argv:
        print("stale examples in:", ", ".join(stale))
        sys.exit(1)
    print("updated:" if stale else "up to date", ", ".join(stale))
