"""Writes docs/cli.md from the typer app itself, so the reference cannot drift from the code.

    python docs/gen_cli_reference.py          # rewrite docs/cli.md
    python docs/gen_cli_reference.py --check  # exit 1 when docs/cli.md is stale (a test runs this)
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def reference() -> str:
    import typer.main

    from perfmodel.cli import app

    group = typer.main.get_command(app)
    lines = ["# CLI reference", "", "Generated from the typer app by `python docs/gen_cli_reference.py`; a test fails",
             "when it is stale. Every command also takes `--help`.", ""]
    for name in sorted(group.commands):
        cmd = group.commands[name]
        lines += [f"## `perfmodel {name}`", "", (cmd.help or "").strip().split("\n")[0], ""]
        rows = []
        for p in cmd.params:
            if p.name == "help":
                continue
            if getattr(p, "param_type_name", "") == "argument":
                rows.append((f"`{p.name.upper()}` (argument)", "", (getattr(p, "help", "") or "")))
                continue
            opts = ", ".join(f"`{o}`" for o in (*p.opts, *p.secondary_opts))
            default = p.default if p.default not in (None, (), []) else ""
            if isinstance(default, bool):
                default = "on" if default else "off"
            rows.append((opts, f"`{default}`" if default != "" else "", (p.help or "").replace("|", "/")))
        if rows:
            lines += ["| option | default | meaning |", "|---|---|---|"]
            lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    target = ROOT / "docs" / "cli.md"
    text = reference()
    if "--check" in sys.argv:
        if not target.exists() or target.read_text() != text:
            print("docs/cli.md is stale: run python docs/gen_cli_reference.py")
            sys.exit(1)
        print("docs/cli.md is current")
    else:
        target.write_text(text)
        print(f"wrote {target}")
