"""Correct agg_config.csv where a candidate launcher's benchmark script does not exist at the row's commit.

write_csv.py counted a launcher as a possible runner when its executed run logged a benchmark-client command. The
docker launchers (runners/launch_b200-nvd.sh, launch_b200-tg.sh at e06929c70) start the server container with the
script `benchmarks/<model>_<precision>_b200<_trt>_docker.sh` as its entrypoint and then run the client in a second
container whatever happened to the first. Where that script is absent at the commit (e.g.
benchmarks/dsr1_fp4_b200_trt_docker.sh@e06929c70: only dsr1_fp4_b200_trt_slurm.sh exists), the stand-in docker ran
nothing, no server command was logged, and the client's command still made the run count, with every engine
setting "(unset)". Such a run cannot have produced a measurement: the real server never starts. 57 rows had their
engine settings left blank ("differs by runner/commit") on account of it.

This reads each row's `note` (write_csv.py's "<column> differs by runner/commit: <value> on <launcher@commit,...>;
..."), drops the launcher@commit entries whose launcher runs an absent candidate script, and fills a column where
the launchers left agree. The launcher's script: the one of the row's candidate scripts (`script`, path@commit)
whose run kind the launcher's text names (`_docker.sh` or `_slurm.sh`). No measured latency is read.

    python bench/inferencex_agg/config/absent_scripts.py INFERENCEX_GIT_DIR perfmodel/measure/data/inferencex/agg_config.csv
"""
import csv
import functools
import io
import re
import subprocess
import sys

from perfmodel.fileio import write_text

DIFF = re.compile(r"^(\w+) differs by runner/commit(?:/spec)?: (.*)$")
ENTRY = re.compile(r"^(.*) on ([\w.\-@/,]+)$")
KINDS = ("_docker.sh", "_slurm.sh")


def main(mirror, path):
    @functools.lru_cache(None)
    def show(commit, p):
        r = subprocess.run(["git", "--git-dir", mirror, "show", f"{commit}:{p}"], capture_output=True, text=True)
        return r.stdout if r.returncode == 0 else None

    def absent_runner(launcher, commit, scripts):
        """The absent candidate script this launcher@commit runs, else None."""
        text = show(commit, f"runners/launch_{launcher}.sh")
        if text is None:
            return None
        kinds = [k for k in KINDS if k in text]
        if len(kinds) != 1:
            return None
        mine = [s for s in scripts if s.split("@")[0].endswith(kinds[0]) and s.split("@")[1].startswith(commit[:9])]
        if len(mine) != 1:
            return None
        p, c = mine[0].split("@")
        return mine[0] if show(c, p) is None else None

    with open(path, newline="", encoding="utf-8") as f:
        rd = csv.DictReader(f)
        head, rows = rd.fieldnames, list(rd)
    fixed = 0
    for r in rows:
        scripts = [s for s in r["script"].split("|") if s]
        gone = [s for s in scripts if show(s.split("@")[1], s.split("@")[0]) is None]
        if not gone or "differs by runner" not in r["note"]:
            continue
        notes, dropped, left = [], set(), []
        for part in r["note"].split(" ; "):
            m = DIFF.match(part)
            if not m:
                notes.append(part)
                continue
            col, vals = m.group(1), {}
            for e in m.group(2).split("; "):
                em = ENTRY.match(e.strip())
                if em is None:
                    raise SystemExit(f"{r['id']}: cannot read {e!r}")
                for who in em.group(2).split(","):
                    launcher, commit = who.split("/")[0].split("@")
                    if absent_runner(launcher, commit, scripts):
                        dropped.add(f"{launcher}@{commit}")
                        continue
                    vals.setdefault(em.group(1).strip(), []).append(who)
            if len(vals) == 1:
                v = next(iter(vals))
                if col in r:
                    r[col] = "" if v == "(unset)" else v
            else:
                left.append(part)
        if not dropped:
            continue
        fixed += 1
        r["script"] = "|".join(s for s in scripts if s not in gone)
        notes = left + notes
        notes.append(f"launcher(s) that could not run it: {','.join(sorted(dropped))} (benchmark script absent: "
                     f"{', '.join(gone)} does not exist at that commit; their runs logged only the client, "
                     f"absent_scripts.py)")
        r["note"] = " ; ".join(notes)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=head, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    write_text(path, buf.getvalue())  # atomic (perfmodel.fileio)
    print(f"{fixed} rows corrected", file=sys.stderr)


if __name__ == "__main__":
    main(*sys.argv[1:3])
