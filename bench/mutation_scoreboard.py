"""The physics scope's mutation score, one row per module, from the records of its whole runs.

    python bench/mutation_scoreboard.py --equivalent docs/mutation.md RECORD[:FILE,FILE...] ...

Each argument names a record of bench/mutate.py (a results JSON) and, after a colon, the source files to take from
it (default: every file it holds). A file may come from one argument only, so that no mutant is counted twice.
Survivors are classified by the tables of --equivalent, as `mutate.py --report` classifies them. Per file: mutants
run, killed (timeouts included), and the survivors' classes; the score as run over the non-equivalent mutants,
(killed) / (run - equivalent), and with the survivors killed by tests written since and without the code that went
away, (killed + killed since) / (run - equivalent - went away). Accepted and unexplained survivors count against
both."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutate import classified  # noqa: E402

CLASSES = ("equivalent", "accepted", "killed since", "went away")


def parse_entry(arg: str) -> tuple[Path, list[str] | None]:
    """RECORD or RECORD:FILE,FILE -> (record path, files or None for all)."""
    path, _, files = arg.partition(":")
    return Path(path), ([f for f in files.split(",") if f] or None) if files else None


def scoreboard(entries: list[tuple[Path, list[str] | None]], doc: Path | None) -> list[dict]:
    """One row per source file (in the order the entries give them), and a last row "all" summing them."""
    cls = classified(doc)
    rows: dict = {}
    for path, files in entries:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise SystemExit(f"{path}: cannot be read as a mutation record ({e})")
        ms = data.get("mutants") if isinstance(data, dict) else None
        if not isinstance(ms, list):
            raise SystemExit(f"{path}: no 'mutants' list (not a bench/mutate.py record)")
        have = {m["file"] for m in ms}
        for f in files or sorted(have):
            if f not in have:
                raise SystemExit(f"{path}: holds no mutant of {f}")
            if f in rows:
                raise SystemExit(f"{f}: named by two records ({rows[f]['record']} and {path.name}); take it from one")
            r = rows[f] = {"file": f, "record": path.name, "run": 0, "killed": 0, **{c: 0 for c in CLASSES},
                           "unexplained": 0}
            for m in ms:
                if m["file"] != f or m["outcome"] in ("error", "equivalent"):
                    continue  # not compiled, or equivalent by construction: never run
                r["run"] += 1
                if m["outcome"] in ("killed", "timeout"):
                    r["killed"] += 1
                elif m["outcome"] == "survived":
                    c = cls.get(m["id"])
                    r[c if c in CLASSES else "unexplained"] += 1
    out = list(rows.values())
    total = {"file": "all", "record": "", **{k: sum(r[k] for r in out) for k in
                                              ("run", "killed", *CLASSES, "unexplained")}}
    for r in out + [total]:
        r["as run"] = r["killed"] / (r["run"] - r["equivalent"]) if r["run"] > r["equivalent"] else float("nan")
        left = r["run"] - r["equivalent"] - r["went away"]
        r["with the killed since"] = (r["killed"] + r["killed since"]) / left if left > 0 else float("nan")
    return out + [total]


def markdown(rows: list[dict]) -> str:
    head = ["file", "record", "run", "killed", *CLASSES, "unexplained", "as run", "with the killed since"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [f"`{r['file']}`" if r["record"] else "**all**", r["record"]]
        cells += [str(r[k]) for k in ("run", "killed", *CLASSES, "unexplained")]
        cells += [f"{100 * r['as run']:.1f}%", f"{100 * r['with the killed since']:.1f}%"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("records", nargs="+", help="RECORD[:FILE,FILE...]")
    ap.add_argument("--equivalent", type=Path, help="the document whose survivors tables classify survivors")
    a = ap.parse_args(argv)
    print(markdown(scoreboard([parse_entry(x) for x in a.records], a.equivalent)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
