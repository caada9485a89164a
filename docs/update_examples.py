"""Re-run every `$ perfmodel ...` example in README.md and docs/*.md and paste its real output.

    python docs/update_examples.py          # rewrite the files in place
    python docs/update_examples.py --check  # exit 1 if any example's output is stale (used by the tests)

An example is a fenced block whose first line is `$ perfmodel ARGS`; the rest of the block is the output.
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


def update(path: Path) -> tuple[str, str]:
    old = path.read_text()
    new = BLOCK.sub(lambda m: f"```text\n$ perfmodel {m.group(1)}\n{run(m.group(1))}```", old)
    return old, new


def files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


if __name__ == "__main__":
    stale = []
    for p in files():
        old, new = update(p)
        if old != new:
            stale.append(p.name)
            if "--check" not in sys.argv:
                p.write_text(new)
    if stale and "--check" in sys.argv:
        print("stale examples in:", ", ".join(stale))
        sys.exit(1)
    print("updated:" if stale else "up to date", ", ".join(stale))
