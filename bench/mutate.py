#!/usr/bin/env python3
"""Mutation testing of perfmodel's formulas: does the test suite notice when a formula changes?

An AST mutator of our own (stdlib ast + subprocess, no dependency). Each mutant changes one thing in one
source file: an arithmetic operator (+ - * / // % ** & |), a comparison (< <= > >= == != in is), a number
(c -> c+1, c -> 0, c -> c-1 for whole c >= 2), a boolean constant, min <-> max (and np.minimum <->
np.maximum, floor <-> ceil, any <-> all, argmin <-> argmax), and <-> or, a unary minus or `not` removed, or
a returned value replaced by None. Docstrings, strings, f-strings, type annotations, decorators,
`raise ...(message)` statements, `warnings.warn(...)` calls and `assert` messages are never mutated.

The repository is copied (the tracked files of the working tree, or `git archive REV` with --rev, plus
any --overlay files) into a temporary directory, /tmp/mut-XXXX; mutants are written only there. Each
mutant runs the test suite without tests/test_docs.py as

    python -m pytest -x -q -p no:cacheprovider --hypothesis-seed=0 ...

in two stages: first a fast subset of test files chosen for the mutated file (FAST below), then, if
that passes, the rest of the suite. A mutant is `killed` when a stage fails, `timeout` when a stage runs
past its limit (a factor of the unmutated stage's time: a hang counts as killed), `survived` when the
whole suite passes, `error` when the mutant does not compile (never counted). Tests that fail on the
unmutated copy are found first and deselected, so they neither kill nor protect anything.

    python bench/mutate.py --list                       # how many mutants, per file
    python bench/mutate.py --rev HEAD --out bench/results/mutation.json
    python bench/mutate.py --sample 300 --seed 1 --jobs 2 --out /tmp/m.json
    python bench/mutate.py --out bench/results/mutation.json --resume        # continue an interrupted run
    python bench/mutate.py --out bench/results/mutation.json --rerun survived # after adding tests
    python bench/mutate.py --report bench/results/mutation.json --equivalent docs/mutation.md
    python bench/mutate.py --planted --overlay tests/test_laws.py --out /tmp/planted.json  # the planted bugs

docs/mutation.md has the run, the score and the survivors.
"""
from __future__ import annotations

import argparse
import ast
import concurrent.futures as cf
import datetime
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the physics modules (issue 25): the op list, its pricing and the serving simulator
SCOPE = ["perfmodel/ops.py", "perfmodel/counting.py", "perfmodel/engine.py", "perfmodel/timemodel.py",
         "perfmodel/efficiency.py", "perfmodel/formats.py", "perfmodel/units.py"] + \
        [f"perfmodel/serving/{f}.py" for f in ("api", "capacity", "disagg", "fastcost", "fastsim", "fleet", "kvmemory",
                                               "scheduler", "silicon", "silicon_plan", "silicon_report", "slo",
                                               "speculative", "stepcost", "traffic")]
SAMPLE_SCOPE = ["perfmodel/ops.py", "perfmodel/counting.py", "perfmodel/engine.py", "perfmodel/formats.py",
                "perfmodel/units.py", "perfmodel/parallel.py", "perfmodel/serving/kvmemory.py",
                "perfmodel/serving/scheduler.py", "perfmodel/serving/traffic.py", "perfmodel/serving/stepcost.py",
                "perfmodel/whatif.py"]  # the scope of the 600-mutant sample of 2026-12-01 (docs/mutation.md)
EXCLUDE_TESTS = ["tests/test_docs.py"]  # the docs snapshot: the point is that something else fails

_ENGINE = ["tests/test_formulas.py", "tests/test_laws.py", "tests/test_variants.py", "tests/test_lecture.py",
           "tests/test_laws_catalog.py", "tests/test_parallel.py", "tests/test_architectures.py"]
_SERVING = ["tests/test_formulas.py", "tests/test_laws.py", "tests/test_serving.py"]
FAST = {  # the first stage for each file: the tests most likely to kill its mutants, cheapest first
    "perfmodel/ops.py": _ENGINE,
    "perfmodel/counting.py": _ENGINE,
    "perfmodel/engine.py": _ENGINE + ["tests/test_serving.py"],
    "perfmodel/formats.py": ["tests/test_formulas.py", "tests/test_laws_catalog.py", "tests/test_whatif.py",
                             "tests/test_variants.py", "tests/test_architectures.py"],
    "perfmodel/units.py": ["tests/test_formulas.py", "tests/test_laws.py", "tests/test_bad_input.py",
                           "tests/test_catalog.py"],
    "perfmodel/parallel.py": ["tests/test_parallel.py", "tests/test_laws_catalog.py", "tests/test_achievable.py"],
    "perfmodel/whatif.py": ["tests/test_formulas.py", "tests/test_whatif.py", "tests/test_laws_catalog.py"],
}
for _f in SCOPE:
    if _f.startswith("perfmodel/serving/"):
        FAST[_f] = _SERVING
_PRICING = ["tests/test_formulas.py", "tests/test_achievable.py", "tests/test_kernels.py", "tests/test_laws.py"]
FAST.update({"perfmodel/timemodel.py": _PRICING, "perfmodel/efficiency.py": _PRICING,
             "perfmodel/serving/fastcost.py": _SERVING + ["tests/test_closed_loop.py"],
             "perfmodel/serving/fastsim.py": _SERVING + ["tests/test_closed_loop.py"],
             "perfmodel/serving/capacity.py": _SERVING + ["tests/test_capacity.py"],
             "perfmodel/serving/slo.py": _SERVING + ["tests/test_capacity.py"],
             "perfmodel/serving/fleet.py": ["tests/test_fleet.py", "tests/test_capacity.py"],
             "perfmodel/serving/silicon.py": ["tests/test_serving_validation.py"],
             "perfmodel/serving/silicon_report.py": ["tests/test_serving_validation.py"]})

# bugs planted one at a time by --planted (issue 15): each must fail some test other than tests/test_docs.py
PLANTED = [
    ("max_batch ignores ep", "perfmodel/engine.py",
     "return np.maximum(b, 0.0) * lay.ep", "return np.maximum(b, 0.0)"),
    ("paged admission holds prompt + output tokens", "perfmodel/serving/kvmemory.py",
     "full = [g.prompt + o - 1 for o in g.outs]", "full = [g.prompt + o for o in g.outs]"),
    ("embedding reads the whole table", "perfmodel/ops.py",
     "w_read=np.minimum(M, V) * D * fe.bits / 8", "w_read=V * D * fe.bits / 8"),
    ("RMSNorm FLOPs per element 5 instead of 4", "perfmodel/ops.py",
     "7 if ln else 4, params", "7 if ln else 5, params"),
    ("RoPE rotates q only", "perfmodel/ops.py",
     'self.vector("rope", g, n, M * (N + Kown) * H, 3)', 'self.vector("rope", g, n, M * N * H, 3)'),
    ("sliding-window read length off by one", "perfmodel/ops.py",
     "np.minimum(S, W + T - 1)", "np.minimum(S, W + T)"),
    ("TPOT divided by output", "perfmodel/serving/scheduler.py",
     "(last - first) / (longest - 1)", "(last - first) / longest"),
    ("max_batch ignores the overhead", "perfmodel/engine.py",
     'free = capacity - overhead - ps["weight_bytes"]', 'free = capacity - ps["weight_bytes"]'),
]


def planted_mutants(sources: dict) -> list:
    out = []
    for name, f, old, new in PLANTED:
        src = sources[f]
        a = src.find(old.encode())
        if a < 0 or src.count(old.encode()) != 1:
            raise SystemExit(f"planted bug {name!r}: {old!r} is not exactly once in {f}")
        line = src[:a].count(b"\n") + 1
        out.append(Mutant(f"planted: {name}", f, line, 0, "planted", old, new, a, a + len(old)))
    return out


# ---------------------------------------------------------------- generating mutants
BINOPS = {ast.Add: [ast.Sub], ast.Sub: [ast.Add], ast.Mult: [ast.Div], ast.Div: [ast.Mult],
          ast.FloorDiv: [ast.Div], ast.Mod: [ast.FloorDiv], ast.Pow: [ast.Mult], ast.BitAnd: [ast.BitOr],
          ast.BitOr: [ast.BitAnd]}
CMPOPS = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq,
          ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}
SWAPS = {"min": "max", "max": "min", "minimum": "maximum", "maximum": "minimum", "floor": "ceil", "ceil": "floor",
         "any": "all", "all": "any", "argmin": "argmax", "argmax": "argmin", "amin": "amax", "amax": "amin"}
SYMBOL = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**",
          ast.BitAnd: "&", ast.BitOr: "|", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==",
          ast.NotEq: "!=", ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not"}


@dataclass
class Mutant:
    id: str
    file: str
    line: int
    col: int
    kind: str
    original: str  # the source segment replaced
    mutated: str  # what replaces it
    start: int  # byte offsets of the segment in the file
    end: int
    outcome: str = ""
    stage: str = ""
    seconds: float = 0.0
    killer: str = ""


def _is_str(node) -> bool:
    return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)))


def _skipped_nodes(tree: ast.AST) -> set:
    """ids of nodes never mutated: annotations, decorators, raise statements, warnings.warn(...), assert
    messages, f-strings, __all__ / __slots__."""
    skip: set = set()

    def take(n):
        if n is not None:
            skip.update(id(x) for x in ast.walk(n))

    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            take(n.returns)
            for d in n.decorator_list:
                take(d)
            a = n.args
            for arg in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]:
                if arg is not None:
                    take(arg.annotation)
        elif isinstance(n, ast.ClassDef):
            for d in n.decorator_list:
                take(d)
        elif isinstance(n, ast.AnnAssign):
            take(n.annotation)
        elif isinstance(n, ast.Raise):
            take(n)
        elif isinstance(n, ast.Assert):
            take(n.msg)
        elif isinstance(n, ast.JoinedStr):
            take(n)
        elif isinstance(n, ast.Call):
            fn = n.func
            if isinstance(fn, ast.Attribute) and fn.attr == "warn" and isinstance(fn.value, ast.Name) and \
                    fn.value.id == "warnings":
                take(n)
        elif isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id in ("__all__", "__slots__")
                                               for t in n.targets):
            take(n)
    return skip


def _offsets(src: bytes) -> list[int]:
    """Byte offset of the start of each line (1-based lines: offsets[line - 1])."""
    out, pos = [0], 0
    for line in src.splitlines(keepends=True):
        pos += len(line)
        out.append(pos)
    return out


def _number_variants(v):
    out = []
    if isinstance(v, bool):
        return [not v]
    if isinstance(v, int):
        out = [v + 1] + ([0] if v != 0 else []) + ([v - 1] if v >= 2 else [])
    elif isinstance(v, float):
        out = [v + 1.0] + ([0.0] if v != 0 else [])
    return [x for i, x in enumerate(out) if x != v and x not in out[:i]]


_PRAGMA = re.compile(rb"#\s*mutation:\s*equivalent\b[\s:,-]*(.*)$")


def equivalent_lines(src: bytes) -> dict:
    """Line -> reason, for lines marked `# mutation: equivalent - <reason>`: a value that by construction cannot
    change a result (a memory bound, a block size of a loop whose blocks are summed), so its mutants are not run
    and are counted as equivalent, with the reason, in the report."""
    out = {}
    for i, line in enumerate(src.splitlines(), start=1):
        m = _PRAGMA.search(line)
        if m:
            out[i] = m.group(1).decode(errors="replace").strip() or "marked equivalent"
    return out


def mutants_of(path: str, src: bytes) -> list[Mutant]:
    """Every mutant of one file, in source order. Mutants of a line marked equivalent (equivalent_lines) come with
    their outcome already set: `equivalent`, the reason in `killer`."""
    tree = ast.parse(src)
    skip = _skipped_nodes(tree)
    offs = _offsets(src)
    marked = equivalent_lines(src)
    out: list[Mutant] = []

    def span(n):
        return offs[n.lineno - 1] + n.col_offset, offs[n.end_lineno - 1] + n.end_col_offset

    def add(n, kind, new_text, k, paren=True):
        a, b = span(n)
        original = src[a:b].decode()
        text = f"({new_text})" if paren else new_text
        mid = f"{path}:{n.lineno}:{n.col_offset}+{b - a}:{kind}:{k}"  # + length: nested nodes share a start
        out.append(Mutant(mid, path, n.lineno, n.col_offset, kind, original, text, a, b))

    def swapped(n, **fields):
        new = type(n)(**{f: getattr(n, f) for f in n._fields})
        for k, v in fields.items():
            setattr(new, k, v)
        return ast.unparse(new)

    for n in ast.walk(tree):
        if id(n) in skip or not hasattr(n, "lineno"):
            continue
        if isinstance(n, ast.BinOp) and type(n.op) in BINOPS:
            if _is_str(n.left) or _is_str(n.right):
                continue  # building a message
            for k, op in enumerate(BINOPS[type(n.op)]):
                add(n, f"binop {SYMBOL[type(n.op)]}->{SYMBOL[op]}", swapped(n, op=op()), k)
        elif isinstance(n, ast.AugAssign) and type(n.op) in BINOPS:
            for k, op in enumerate(BINOPS[type(n.op)]):
                add(n, f"augassign {SYMBOL[type(n.op)]}=->{SYMBOL[op]}=", swapped(n, op=op()), k, paren=False)
        elif isinstance(n, ast.Compare):
            for i, op in enumerate(n.ops):
                if type(op) in CMPOPS:
                    new = CMPOPS[type(op)]
                    ops = list(n.ops)
                    ops[i] = new()
                    add(n, f"compare {SYMBOL[type(op)]}->{SYMBOL[new]}", swapped(n, ops=ops), i)
        elif isinstance(n, ast.Constant) and isinstance(n.value, (bool, int, float)) and not isinstance(n.value, complex):
            for k, v in enumerate(_number_variants(n.value)):
                add(n, f"constant {n.value!r}->{v!r}", repr(v), k, paren=False)
        elif isinstance(n, ast.Call):
            fn = n.func
            name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else None
            if name in SWAPS and (isinstance(fn, ast.Name) or isinstance(fn.value, ast.Name)):
                new_fn = ast.Name(SWAPS[name]) if isinstance(fn, ast.Name) else ast.Attribute(fn.value, SWAPS[name])
                add(fn, f"call {name}->{SWAPS[name]}", ast.unparse(new_fn), 0, paren=False)
        elif isinstance(n, ast.BoolOp):
            new = ast.Or() if isinstance(n.op, ast.And) else ast.And()
            kind = "boolop and->or" if isinstance(n.op, ast.And) else "boolop or->and"
            add(n, kind, swapped(n, op=new), 0)
        elif isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.USub, ast.Not)):
            if isinstance(n.op, ast.USub) and isinstance(n.operand, ast.Constant):
                pass  # -1 -> 1 is the constant's own neighbourhood; still worth one mutant
            add(n, "unary -x->x" if isinstance(n.op, ast.USub) else "unary not x->x", ast.unparse(n.operand), 0)
        elif isinstance(n, ast.Return) and n.value is not None and not (
                isinstance(n.value, ast.Constant) and n.value.value is None):
            add(n, "return x->None", "return None", 0, paren=False)
    for m in out:
        if m.line in marked:
            m.outcome, m.stage, m.killer = "equivalent", "by construction", marked[m.line]
    out.sort(key=lambda m: (m.start, m.id))
    return out


def apply(src: bytes, m: Mutant) -> bytes:
    return src[:m.start] + m.mutated.encode() + src[m.end:]


# ---------------------------------------------------------------- running the suite
def copy_tree(dest: Path, rev: str | None, overlay: list[str]) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    if rev:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    else:
        files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], check=True,
                               capture_output=True).stdout.decode().split("\0")
        for f in filter(None, files):
            src = ROOT / f
            if src.is_file():
                (dest / f).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest / f)
    for f in overlay:
        (dest / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, dest / f)


def _pyc_purge(work: Path, rel: str) -> None:
    p = work / rel
    for pyc in (p.parent / "__pycache__").glob(p.stem + ".*.pyc"):
        pyc.unlink(missing_ok=True)


_FAILED = re.compile(r"^(FAILED|ERROR) (\S+)")


def pytest(work: Path, files: list[str], deselect: list[str], timeout: float, stop_first: bool = True):
    """(rc or 'timeout', seconds, first failing node id, failing node ids) of one pytest run in `work`."""
    shutil.rmtree(work / ".hypothesis", ignore_errors=True)  # no replay of an earlier mutant's failures
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--hypothesis-seed=0", "-o",
           "addopts=-rfE"] + (["-x"] if stop_first else []) + [a for d in deselect for a in ("--deselect", d)] + files
    # an empty kernel-table cache per run: a mutant of a table loader must build its tables (and must not leave
    # them where the unmutated code, or the user's runs, would read them: the cache key holds no source)
    shutil.rmtree(work / ".kernel-cache", ignore_errors=True)
    env = dict(os.environ, PYTHONPATH=str(work), MPLBACKEND="Agg", PERFMODEL_CACHE=str(work / ".kernel-cache"))
    env.pop("HYPOTHESIS_PROFILE", None)
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)  # the whole group: pytest and anything it started
        proc.communicate()
        return "timeout", time.monotonic() - t0, "", []
    text = out.decode(errors="replace")
    failed = [m.group(2) for line in text.splitlines() if (m := _FAILED.match(line))]
    return proc.returncode, time.monotonic() - t0, (failed[0] if failed else ""), failed


def _stages(m: Mutant, plan: list, run) -> bool:
    """Run the stages (name, tests, limit) in order until one fails: m becomes killed or timeout there (True);
    False when every stage passed. run(tests, limit) -> (rc or 'timeout', seconds, first failing, all)."""
    for name, tests, limit in plan:
        if not tests:
            continue
        rc, _, first, _ = run(tests, limit)
        if rc == "timeout":
            m.outcome, m.stage = "timeout", name
            return True
        if rc != 0:
            m.outcome, m.stage, m.killer = "killed", name, first or f"pytest exit {rc}"
            return True
    return False


def all_tests(work: Path) -> list[str]:
    return sorted(str(p.relative_to(work)) for p in (work / "tests").glob("test_*.py")
                  if str(p.relative_to(work)) not in EXCLUDE_TESTS)


class Runner:
    def __init__(self, base: Path, jobs: int, rev, overlay, timeout_factor: float, fast: str,
                 select: str = "stages"):
        self.base, self.rev, self.overlay, self.factor = base, rev, overlay, timeout_factor
        self.select, self.jobs = select, jobs
        self.cmap: dict | None = None  # select == "coverage": mutate_select.build_map's answer
        self.servers: dict = {}  # work copy -> mutate_select.Server
        self.sources: dict = {}  # file -> module-level lines, for the coverage selection
        self.all_sources: dict = {}  # every perfmodel file, unmutated: where a module-level name is read
        self.test_sources: dict = {}  # every test file: the tests that name a module-level name
        self.map_path: Path | None = None  # --map: where the coverage map is kept between runs
        self.fast_only = False  # --fast-only: a mutant that passes the first stage is left survived
        self.works = [base / f"w{j}" for j in range(jobs)]
        for w in self.works:
            copy_tree(w, rev, overlay)
        self.free = list(self.works)
        self.lock = threading.Lock()
        self.tests = all_tests(self.works[0])
        self.fast_mode = fast
        self.deselect: list[str] = []
        self.base_time: dict = {}
        self.killers: dict = {}  # (file, line) -> tests that killed a mutant there, latest first: tried first

    def learn(self, rec: dict) -> None:
        """Remember a killed mutant's killer for its neighbours (mutate_select.killers_first)."""
        if rec.get("outcome") == "killed" and "::" in rec.get("killer", ""):
            with self.lock:
                ts = self.killers.setdefault((rec["file"], rec["line"]), [])
                if rec["killer"] not in ts:
                    ts.insert(0, rec["killer"])

    def stages(self, file: str) -> tuple[list[str], list[str]]:
        if self.fast_mode == "none":
            return [], self.tests
        fast = FAST.get(file, []) if self.fast_mode == "auto" else self.fast_mode.split(",")
        fast = [t for t in fast if t in self.tests]
        return fast, ([] if self.fast_only else [t for t in self.tests if t not in fast])

    def baseline(self, files: list[str]) -> dict:
        """Run the suite unmutated: tests that fail here are deselected; stage times set the timeouts. With
        select == "coverage" that run is the coverage map's (one run gives both), and the fork servers start."""
        w = self.works[0]
        if self.select == "coverage":
            import mutate_select as ms

            if self.map_path and self.map_path.exists():  # built earlier for this tree (--map)
                self.cmap = json.loads(self.map_path.read_text())
            else:
                mods = [f[:-3].replace("/", ".") for f in sorted(set(SCOPE) | set(files))]
                self.cmap = ms.build_map(w, self.tests, self.jobs, [], log=lambda x: print(x, flush=True),
                                         imports=mods)
                if self.map_path:
                    save(self.map_path, self.cmap)
            self.deselect = sorted(self.cmap["failed"])
            dur = self.cmap["durations"]
            self.base_time["full"] = sum(dur.values())
            for f in files:
                fast, _ = self.stages(f)
                key = ",".join(fast)
                if fast and key not in self.base_time:
                    self.base_time[key] = sum(v for t, v in dur.items() if t.split("::")[0] in fast)
            for wk in self.works:
                self.servers[wk] = ms.Server(wk)
            covered = sum(1 for per in self.cmap["lines"].values() for v in per.values() if v)
            return {"select": "coverage", "map_s": self.cmap["seconds"], "tests": len(dur),
                    "test_s": round(sum(dur.values()), 1), "covered_lines": covered, "deselected": self.deselect,
                    "stage_s": {k: round(v, 1) for k, v in self.base_time.items()}}
        rc, secs, _, failed = pytest(w, self.tests, [], 3600, stop_first=False)
        if rc not in (0, 1):
            raise SystemExit(f"the unmutated suite does not run (pytest exit {rc}) in {w}")
        self.deselect = failed
        self.base_time["full"] = secs
        for f in files:
            fast, _ = self.stages(f)
            key = ",".join(fast)
            if fast and key not in self.base_time:
                rc, s, _, bad = pytest(w, fast, self.deselect, 3600)
                if rc != 0:
                    raise SystemExit(f"the fast stage {fast} fails unmutated: {bad}")
                self.base_time[key] = s
        return {"full_suite_s": round(secs, 1), "deselected": failed,
                "stage_s": {k: round(v, 1) for k, v in self.base_time.items()}}

    def limit(self, key: str) -> float:
        return self.factor * self.base_time.get(key, self.base_time["full"]) + 30.0

    def run(self, m: Mutant, src: bytes, every: bool = False) -> Mutant:
        """Run one mutant (every=True: the whole suite, recording every failing test in `killer`)."""
        new = apply(src, m)
        try:
            compile(new, m.file, "exec")
        except SyntaxError as e:
            m.outcome, m.killer = "error", f"SyntaxError: {e}"
            return m
        with self.lock:
            w = self.free.pop()
        try:
            target = w / m.file
            target.write_bytes(new)
            _pyc_purge(w, m.file)
            t0 = time.monotonic()
            fast, rest = self.stages(m.file)
            m.outcome = "survived"
            if self.cmap is not None and not every:
                return self._run_selected(m, w, src, t0, fast, rest)
            if every:  # each test file on its own, stopping at its first failure: which files catch it
                caught = []
                for t in self.tests:
                    rc, _, first, _ = pytest(w, [t], self.deselect, self.limit("full"))
                    if rc == "timeout":
                        caught.append(f"{t} (timeout)")
                    elif rc != 0:
                        caught.append(first or f"{t} (pytest exit {rc})")
                m.outcome, m.stage, m.killer, fast, rest = ("killed" if caught else "survived"), "every file", \
                    " ".join(caught), [], []
            _stages(m, [("fast", fast, self.limit(",".join(fast))), ("full", rest, self.limit("full"))],
                    lambda files, limit: pytest(w, files, self.deselect, limit))
            m.seconds = round(time.monotonic() - t0, 2)
        finally:
            target.write_bytes(src)
            _pyc_purge(w, m.file)
            with self.lock:
                self.free.append(w)
        return m

    def _run_selected(self, m: Mutant, w: Path, src: bytes, t0: float, fast: list, rest: list) -> Mutant:
        """A mutant against the tests that ran its lines (mutate_select), in the fork server of `w`."""
        import mutate_select as ms

        if m.file not in self.sources:
            self.sources[m.file] = ms.module_level_lines(src)
        first, last = m.line, m.line + src[m.start:m.end].count(b"\n")
        server = self.servers[w]
        common = ["-q", "-x", "-p", "no:cacheprovider", "--hypothesis-seed=0", "-o", "addopts=-rfE"]
        common += [a for d in self.deselect for a in ("--deselect", d)]
        chosen, outside, ran = ms.select(self.cmap, m.file, first, last, set(self.deselect))
        module_level = any(ln in self.sources[m.file] for ln in range(first, last + 1))
        if not ran and not module_level:
            m.outcome, m.stage, m.killer = "survived", "uncovered", "no test runs this line"
            m.seconds = round(time.monotonic() - t0, 2)
            return m
        dur = self.cmap["durations"]
        # a module-level line's covering tests are those that imported the module, mostly in a fresh process
        # (test_layers imports each module alone: 77 s for a default of Op.__init__); any of them fails only
        # if the import does, and so would the first file of the FAST stage: they are left out
        chosen = ms.killers_first(chosen, self.killers, m.file, first, last)
        plan = [("covering", chosen, self.factor * sum(dur.get(t, 1.0) for t in chosen) + 30.0)] \
            if chosen and not module_level else []
        if module_level:  # a constant or a table: first the tests that ran a line reading what it binds
            if not self.all_sources:  # read in this job's copy, where only m.file differs (passed unmutated)
                got = {str(p.relative_to(w)): p.read_bytes() for p in sorted((w / "perfmodel").rglob("*.py"))}
                self.all_sources = {**got, m.file: src}
            if not self.test_sources:  # the test files, where a test may read the constant itself
                self.test_sources = {str(p.relative_to(w)): p.read_bytes() for p in sorted((w / "tests").rglob("*.py"))}
            uses, rest_uses = ms.select_uses(self.cmap, {**self.all_sources, m.file: src}, m.file, first, last,
                                             set(self.deselect), tests_src=self.test_sources)
            for name, ts in (("uses", uses), ("all uses", rest_uses)):
                if ts:
                    plan.append((name, ts, self.factor * sum(dur.get(t, 1.0) for t in ts) + 30.0))
            if uses:  # every test that ran a line its value reaches has run: as far as a test can see, done
                outside = False
                chosen = chosen or uses
        if outside or not chosen:  # what it computes at import may reach any test, and no line reads it: the suite
            plan += [("fast", fast, self.limit(",".join(fast))), ("full", rest, self.limit("full"))]
        try:
            if not _stages(m, plan, lambda tests, limit: server.run(common + tests, limit)):
                m.stage = plan[0][0] if plan else ""
        finally:
            m.seconds = round(time.monotonic() - t0, 2)
        self.learn(asdict(m))
        return m

    def close(self):
        for sv in self.servers.values():
            sv.close()


# ---------------------------------------------------------------- reporting
def load(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {"meta": {}, "mutants": []}


def save(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)


_EQUIV = re.compile(r"^\|\s*`([^`]+)`\s*\|.*\|\s*(equivalent|accepted|killed since|went away)\s*\|", re.IGNORECASE)


def classified(doc: Path | None) -> dict:
    """Mutant id -> 'equivalent', 'accepted', 'killed since' (by a test written after the run, checked by hand or
    by a re-run) or 'went away' (its code removed or rewritten), from the survivors tables of docs/mutation.md."""
    out: dict = {}
    if doc and doc.exists():
        for line in doc.read_text().splitlines():
            m = _EQUIV.match(line)
            if m:
                out[m.group(1)] = m.group(2).lower()
    return out


def report(data: dict, doc: Path | None) -> str:
    ms = data["mutants"]
    cls = classified(doc)
    count = lambda o: sum(1 for m in ms if m["outcome"] == o)  # noqa: E731
    killed, timeout, survived, error = count("killed"), count("timeout"), count("survived"), count("error")
    built = count("equivalent")  # equivalent by construction (marked lines): never run
    surv = [m for m in ms if m["outcome"] == "survived"]
    equiv = sum(1 for m in surv if cls.get(m["id"]) == "equivalent")
    accepted = sum(1 for m in surv if cls.get(m["id"]) == "accepted")
    since = sum(1 for m in surv if cls.get(m["id"]) == "killed since")
    gone = sum(1 for m in surv if cls.get(m["id"]) == "went away")
    uncovered = sum(1 for m in surv if m.get("stage") == "uncovered")
    run = killed + timeout + survived
    score = (killed + timeout) / (run - equiv) if run > equiv else float("nan")
    lines = [f"mutants run: {run} (+ {error} that do not compile, + {built} equivalent by construction, not run), "
             f"killed {killed}, timeout {timeout}, survived {survived} ({uncovered} on lines no test runs; "
             f"{equiv} equivalent, {accepted} accepted, {since} killed since, {gone} went away, "
             f"{survived - equiv - accepted - since - gone} unexplained)",
             f"score: (killed + timeout) / (run - equivalent) = {score:.4f}"]
    if since or gone:  # the same, with the tests written for the survivors and without the code that is gone
        now = (killed + timeout + since) / (run - equiv - gone) if run > equiv + gone else float("nan")
        lines.append(f"with the survivors killed since and without the code gone: (killed + timeout + killed since) / "
                     f"(run - equivalent - went away) = {now:.4f}")
    lines.append("")
    per: dict = {}
    for m in ms:
        d = per.setdefault(m["file"], [0, 0, 0])
        if m["outcome"] in ("killed", "timeout"):
            d[0] += 1
        elif m["outcome"] == "survived":
            d[1] += 1
        d[2] += m["outcome"] not in ("error", "equivalent")
    lines += ["| file | run | killed | survived |", "|---|---|---|---|"]
    lines += [f"| {f} | {d[2]} | {d[0]} | {d[1]} |" for f, d in sorted(per.items())]
    lines += ["", "| mutant | line | original -> mutated | class |", "|---|---|---|---|"]
    for m in surv:
        o, n = m["original"].replace("|", "\\|"), m["mutated"].replace("|", "\\|")
        o, n = (o if len(o) < 70 else o[:67] + "..."), (n if len(n) < 70 else n[:67] + "...")
        lines.append(f"| `{m['id']}` | {m['line']} | `{o}` -> `{n}` | {cls.get(m['id'], '?')} |")
    return "\n".join(lines)


def only_these(todo: list, ids: list, path: Path | None) -> list:
    """The mutants of `todo` named by --only (ids) and --only-file (one id a line), in todo's order; all of them
    when neither is given."""
    if not ids and path is None:
        return todo
    want = set(ids)
    if path is not None:
        try:
            want |= {x.strip() for x in path.read_text().splitlines() if x.strip()}
        except OSError as e:
            raise SystemExit(f"--only-file: {path}: cannot be read ({e.strerror or e})")
    return [m for m in todo if m.id in want]


# ---------------------------------------------------------------- main
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", nargs="+", default=SCOPE, help="source files to mutate (default: the scope)")
    ap.add_argument("--list", action="store_true", help="count the mutants per file and exit")
    ap.add_argument("--max-mutants", type=int, help="run at most this many (after --sample)")
    ap.add_argument("--sample", type=int, help="a random subset of this many mutants (see --seed)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=1, help="parallel workers, each with its own copy (default 1)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "mutation.json")
    ap.add_argument("--rev", help="mutate the tree of this commit (git archive) instead of the working tree")
    ap.add_argument("--overlay", nargs="*", default=[], help="working-tree files copied over the tree")
    ap.add_argument("--fast", default="auto", help="first-stage test files: auto (per file), none, or a,b,c")
    ap.add_argument("--fast-only", action="store_true", help="run the first stage only (with --rerun survived "
                                                             "--overlay NEW_TESTS: which survivors the new tests kill)")
    ap.add_argument("--tests", nargs="*", default=[], help="only these test files (default: the whole suite "
                                                            "but tests/test_docs.py)")
    ap.add_argument("--map", type=Path, help="with --select coverage: keep the coverage map in this file and "
                                             "reuse it (it must be of the same tree and tests)")
    ap.add_argument("--select", choices=["coverage", "stages"], default="coverage",
                    help="coverage (default): each mutant against the tests that ran its lines, in a fork server "
                         "(bench/mutate_select.py; needs coverage.py: pip install 'perfmodel[mutation]'); stages: "
                         "the FAST files, then the whole suite, a fresh pytest each")
    ap.add_argument("--timeout-factor", type=float, default=3.0, help="stage limit: factor x unmutated time + 30 s")
    ap.add_argument("--resume", action="store_true", help="skip mutants already recorded in --out")
    ap.add_argument("--rerun", choices=["survived", "timeout", "error"], help="rerun the mutants of --out "
                                                                               "with this outcome")
    ap.add_argument("--only", nargs="*", default=[], help="run only these mutant ids")
    ap.add_argument("--only-file", type=Path, help="run only the mutant ids listed in this file, one a line (an id "
                                                   "holds spaces and may hold ' -', which a shell or argparse splits)")
    ap.add_argument("--report", type=Path, help="summarise a results file and exit")
    ap.add_argument("--equivalent", type=Path, default=ROOT / "docs" / "mutation.md",
                    help="document whose survivors table classifies survivors (equivalent / accepted)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary copies")
    ap.add_argument("--planted", action="store_true", help="run the planted bugs (PLANTED) instead, each over "
                                                             "the whole suite, listing every test that fails")
    a = ap.parse_args(argv)

    if a.report:
        print(report(load(a.report), a.equivalent))
        return 0

    sources = {}
    for f in a.files:
        if a.rev:
            sources[f] = subprocess.run(["git", "-C", str(ROOT), "show", f"{a.rev}:{f}"], check=True,
                                        capture_output=True).stdout
        else:
            sources[f] = (ROOT / f).read_bytes()
    if a.planted:
        for f in {p[1] for p in PLANTED} - set(sources):
            sources[f] = (subprocess.run(["git", "-C", str(ROOT), "show", f"{a.rev}:{f}"], check=True,
                                         capture_output=True).stdout if a.rev else (ROOT / f).read_bytes())
    muts = planted_mutants(sources) if a.planted else [m for f in a.files for m in mutants_of(f, sources[f])]
    if a.list:
        per: dict = {}
        for m in muts:
            per[m.file] = per.get(m.file, 0) + 1
        for f, n in per.items():
            print(f"{n:6d}  {f}")
        print(f"{len(muts):6d}  mutants in all")
        kinds: dict = {}
        for m in muts:
            k = m.kind.split()[0]
            kinds[k] = kinds.get(k, 0) + 1
        print("by kind:", ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
        return 0

    data = load(a.out) if (a.resume or a.rerun) else {"meta": {}, "mutants": []}
    done = {m["id"]: m for m in data["mutants"]}
    if a.rerun:
        want = {i for i, m in done.items() if m["outcome"] == a.rerun}
        todo = [m for m in muts if m.id in want]
    else:
        todo = list(muts)
        if a.sample:  # the same sample with or without --resume: drawn from the whole scope, then filtered
            rng = random.Random(a.seed)
            todo = sorted(rng.sample(todo, min(a.sample, len(todo))), key=lambda m: (m.file, m.start))
        if a.resume:
            todo = [m for m in todo if m.id not in done]
    todo = only_these(todo, a.only, a.only_file)
    for m in todo:  # equivalent by construction: recorded, never run
        if m.outcome == "equivalent" and not a.planted:
            done[m.id] = {k: v for k, v in asdict(m).items() if k not in ("start", "end")}
    todo = [m for m in todo if m.outcome != "equivalent" or a.planted]
    data["mutants"] = sorted(done.values(), key=lambda x: (x["file"], x["line"], x["col"], x["id"]))
    if a.max_mutants is not None:
        todo = todo[:a.max_mutants]
    base = Path(tempfile.mkdtemp(prefix="mut-", dir="/tmp"))
    print(f"{len(muts)} mutants in scope, {len(todo)} to run, copies in {base}", flush=True)
    runner = None
    try:
        runner = Runner(base, max(1, a.jobs), a.rev, a.overlay, a.timeout_factor, a.fast,
                        "stages" if a.planted else a.select)
        runner.fast_only = a.fast_only
        if a.tests:
            runner.tests = [t for t in runner.tests if t in a.tests]
        runner.map_path = a.map
        for rec in data["mutants"]:  # a resumed run starts knowing which tests killed what
            runner.learn(rec)
        t0 = time.monotonic()
        meta = runner.baseline(sorted({m.file for m in todo}) if not a.planted else [])
        print(f"baseline: {meta}", flush=True)
        data["meta"] = {**data.get("meta", {}), "command": " ".join([sys.executable, *sys.argv]),
                        "rev": a.rev or "working tree", "started": datetime.datetime.now().isoformat(timespec="seconds"),
                        "scope": a.files, "mutants_in_scope": len(muts), "sample": a.sample, "seed": a.seed,
                        "baseline": meta}
        lock = threading.Lock()
        n_done = 0

        def record(m: Mutant):
            nonlocal n_done
            with lock:
                done[m.id] = {k: v for k, v in asdict(m).items() if k not in ("start", "end")}
                data["mutants"] = sorted(done.values(), key=lambda x: (x["file"], x["line"], x["col"], x["id"]))
                n_done += 1
                save(a.out, data)
                el = time.monotonic() - t0
                print(f"[{n_done}/{len(todo)} {el / 60:.1f} min] {m.outcome:8s} {m.id}  {m.original[:40]!r} -> "
                      f"{m.mutated[:40]!r}  {m.killer[:60]}", flush=True)

        with cf.ThreadPoolExecutor(max(1, a.jobs)) as pool:
            futs = [pool.submit(runner.run, m, sources[m.file], a.planted) for m in todo]
            for fut in cf.as_completed(futs):
                record(fut.result())
        data["meta"]["finished"] = datetime.datetime.now().isoformat(timespec="seconds")
        data["meta"]["wall_s"] = round(time.monotonic() - t0, 1)
        save(a.out, data)
        print(report(data, a.equivalent))
    finally:
        if runner is not None:
            runner.close()
        if not a.keep:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
