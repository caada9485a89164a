"""What makes the full mutation run practical (issue 25): run each mutant against the tests that execute its
line, in a process that has already imported everything but perfmodel.

1. A coverage map, built once per run on the unmutated copy: the whole suite under coverage.py with one
   context per test (this file is also the pytest plugin, `-p mutate_select`, that names the contexts), the
   subprocesses the tests start included (coverage's `patch = subprocess`; each child takes its test's name
   from the environment: a sitecustomize on the run's path switches every new or forked Python process to
   it, since coverage hands a new process the context read when the map started, not the test's). For every
   line of the scope: the node ids of the tests that ran it, and each test's time.
2. A fork server per job (`python bench/mutate_select.py --serve`): it imports numpy, pandas, pytest,
   hypothesis and the rest once, then forks one child per mutant. The child imports perfmodel from the
   copy (where the mutant was written), runs `pytest.main` on the selected node ids and exits; nothing of
   perfmodel ever lives in the server, so every child sees the mutant. About 3 s of start-up saved a mutant.

Which tests a mutant gets (`select`): the tests that ran any line of its span, fastest first. A line that ran
while a test file was collected (a parametrize list, a table a test module builds) adds every test of that file.
A line that ran at import (the map imports the scope before collecting; module-level code, tables built at
import) may change what every test sees: if its covering tests pass, it also gets the old two stages (the FAST
files, then the rest of the suite). A line that never ran, in any process, is `uncovered`: a survivor no test can kill.
"""
from __future__ import annotations

import ast
import json
import os
import re
import select as _select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

# ---------------------------------------------------------------- the pytest plugin (-p mutate_select)
_DURATIONS: dict = {}
_FIXTURES: dict = {}  # "baseid::name" of a module- or session-wide fixture -> the node ids of the tests that use it
_MEMOS: dict = {}  # (module, name) -> (the dict, a copy of it as first seen): perfmodel's module-level dicts
KEEP = {("perfmodel.kernels", "_CACHE"), ("perfmodel.kernels", "_LOG_AXES")}  # measured tables as read: data, no scope


def snapshot_memos(prefix: str = "perfmodel") -> None:
    """Note every module-level dict named _X of the loaded `prefix` modules, as it is now (after import)."""
    for name, mod in list(sys.modules.items()):
        if mod is None or not (name == prefix or name.startswith(prefix + ".")):
            continue
        for attr, v in list(vars(mod).items()):
            if attr.startswith("_") and type(v) is dict and (name, attr) not in _MEMOS and (name, attr) not in KEEP:
                _MEMOS[(name, attr)] = (v, dict(v))


def reset_memos(prefix: str = "perfmodel") -> int:
    """Put every noted dict back as it was first seen, so that a memo filled by an earlier test is filled again by
    this one and its lines are this test's too (ops._GROUPS: the group labels' lines ran once per worker, under
    whichever test came first, and the label test was never selected for their mutants). Returns how many moved."""
    snapshot_memos(prefix)  # modules first imported by the last test
    moved = 0
    for d, first in _MEMOS.values():
        if len(d) != len(first) or d.keys() != first.keys():
            d.clear()
            d.update(first)
            moved += 1
    return moved


def _fixture_key(fixturedef) -> str:
    return f"{fixturedef.baseid}::{fixturedef.argname}"


def _cov():
    try:
        import coverage
    except ImportError:
        return None
    return coverage.Coverage.current()


try:
    import pytest as _pytest

    @_pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        cov = _cov()
        if cov is not None:
            reset_memos()
        info = getattr(item, "_fixtureinfo", None)  # the module- and session-wide fixtures the test uses
        for name in getattr(item, "fixturenames", ()):
            defs = info.name2fixturedefs.get(name) if info is not None else None
            if defs and defs[-1].scope != "function":
                _FIXTURES.setdefault(_fixture_key(defs[-1]), []).append(item.nodeid)
        os.environ["MUTCOV_CONTEXT"] = item.nodeid  # a subprocess started by the test takes it as its context
        if cov is not None:
            cov.switch_context(item.nodeid)
        t0 = time.monotonic()
        yield
        _DURATIONS[item.nodeid] = time.monotonic() - t0
        if cov is not None:
            cov.switch_context("")
        os.environ["MUTCOV_CONTEXT"] = ""

    @_pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(fixturedef, request):
        # a module- or session-wide fixture runs once, under whichever test needs it first; its lines get a context
        # of their own, which select() gives to every test that uses the fixture (the tests after the first read
        # what it computed: tests/test_serving_validation.py's `points`, whose lines reached 1 of its 4 readers)
        cov = _cov() if fixturedef.scope != "function" else None
        if cov is None:
            yield
            return
        before = os.environ.get("MUTCOV_CONTEXT", "")
        ctx = f"fixture:{_fixture_key(fixturedef)}"
        os.environ["MUTCOV_CONTEXT"] = ctx
        cov.switch_context(ctx)
        try:
            yield
        finally:
            os.environ["MUTCOV_CONTEXT"] = before
            cov.switch_context(before)

    def _after_fork():
        # a forked child (a process pool's worker) starts coverage afresh with the static context it was started
        # with, "": without this, what a test ran in its pool was recorded outside every test (found when 3,221
        # of the physics mutants sat on such lines); the test's name is in the environment the child inherited
        cov = _cov()
        if cov is not None:
            cov.switch_context(os.environ.get("MUTCOV_CONTEXT", ""))

    def pytest_configure(config):
        # import the code under test before any test file: what runs at import then has the context "" (it may
        # reach every test), and what a test file computes while it is collected has that file's context
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_after_fork)
        for name in filter(None, os.environ.get("MUTCOV_IMPORT", "").split(",")):
            __import__(name)
        snapshot_memos()

    @_pytest.hookimpl(hookwrapper=True)
    def pytest_make_collect_report(collector):
        cov = _cov() if isinstance(collector, _pytest.Module) else None
        if cov is not None:
            cov.switch_context(f"collect:{collector.nodeid}")
        yield
        if cov is not None:
            cov.switch_context("")

    def pytest_unconfigure(config):
        out = os.environ.get("MUTCOV_DURATIONS")
        if out and _DURATIONS:
            Path(out).mkdir(parents=True, exist_ok=True)
            (Path(out) / f"durations-{os.getpid()}.json").write_text(json.dumps(_DURATIONS))
            (Path(out) / f"fixtures-{os.getpid()}.json").write_text(json.dumps(_FIXTURES))
except ImportError:  # the server and the map builder import this file without pytest's hooks mattering
    pass


# ---------------------------------------------------------------- the map
RC = """[run]
source = {work}/perfmodel
context = ${{MUTCOV_CONTEXT-}}
patch = subprocess
parallel = true
data_file = {data}/.coverage
"""


SITE = """import os


def _after_fork():  # a forked or new process starts coverage with no test context: give it the test's
    try:
        import coverage
    except ImportError:
        return
    cov = coverage.Coverage.current()
    if cov is not None:
        cov.switch_context(os.environ.get("MUTCOV_CONTEXT", ""))


os.register_at_fork(after_in_child=_after_fork)
_after_fork()  # a new process: coverage (patch = subprocess) hands it its parent's config, the context read when the
# map started (""), not the test's; its environment has the test's name
"""


def build_map(work: Path, tests: list[str], jobs: int, deselect: list[str], log=print, imports=()) -> dict:
    """{'lines': {file: {line: [node ids]}}, 'durations': {node id: s}, 'seconds': build time} for `work`."""
    data = work / ".mutcov"
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir()
    rc = data / "rc"
    rc.write_text(RC.format(work=work, data=data))
    site = data / "site"  # every Python process of the run imports it: its forked children keep their test's name
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITE)
    # an empty kernel-table cache of its own (perfmodel.kernels._disk): a table built once and kept on disk is not
    # rebuilt, so its loader's lines would run in no test of the map
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(work), str(Path(__file__).parent)]), MPLBACKEND="Agg",
               MUTCOV_DURATIONS=str(data), MUTCOV_CONTEXT="", MUTCOV_IMPORT=",".join(imports),
               PERFMODEL_CACHE=str(data / "kernel-cache"))
    env.pop("HYPOTHESIS_PROFILE", None)
    cmd = [sys.executable, "-m", "coverage", "run", f"--rcfile={rc}", "-m", "pytest", "-q", "-p", "no:cacheprovider",
           "-p", "mutate_select", "--hypothesis-seed=0", "-o", "addopts=-rfE", "-n", str(max(1, jobs))]
    cmd += [a for d in deselect for a in ("--deselect", d)] + tests
    t0 = time.monotonic()
    r = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
    if r.returncode not in (0, 1):
        raise SystemExit(f"the coverage map's run failed (pytest exit {r.returncode}): {r.stdout[-2000:]}")
    subprocess.run([sys.executable, "-m", "coverage", "combine", f"--rcfile={rc}", "-q"], cwd=work, env=env,
                   check=True, capture_output=True)
    import coverage

    cd = coverage.CoverageData(basename=str(data / ".coverage"))
    cd.read()
    lines: dict = {}
    root = str(work) + os.sep
    for f in cd.measured_files():
        if not f.startswith(root):
            continue
        rel = f[len(root):]
        per = {}
        for ln, ctxs in (cd.contexts_by_lineno(f) or {}).items():
            per[int(ln)] = sorted({c.split("|")[-1] for c in ctxs})  # "" = outside every test: import, collection
        lines[rel] = per
    durations: dict = {}
    for p in data.glob("durations-*.json"):
        durations.update(json.loads(p.read_text()))
    fixtures: dict = {}
    for p in data.glob("fixtures-*.json"):
        for k, v in json.loads(p.read_text()).items():
            fixtures.setdefault(k, set()).update(v)
    secs = time.monotonic() - t0
    log(f"coverage map: {len(durations)} tests, {sum(len(v) for v in lines.values())} lines, {secs:.0f} s")
    failed = sorted({m.group(2) for ln in r.stdout.splitlines() if (m := _FAILED.match(ln))})
    return {"lines": lines, "durations": durations, "seconds": round(secs, 1), "failed": failed,
            "fixtures": {k: sorted(v) for k, v in fixtures.items()}}


def module_level_lines(src: bytes) -> set:
    """Lines of statements outside every function body (run at import, before any test has a context)."""
    tree = ast.parse(src)
    inside: set = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            body = n.body if isinstance(n.body, list) else [n.body]
            for b in body:
                inside.update(range(b.lineno, (b.end_lineno or b.lineno) + 1))
    total = src.count(b"\n") + 1
    return set(range(1, total + 1)) - inside


def select(cmap: dict, file: str, first: int, last: int, deselect: set) -> tuple[list[str], bool, bool]:
    """(node ids of the tests that ran any line first..last of `file`, fastest first; whether any of those lines
    ran outside every test, at import or collection, where what it computes may reach every test; whether any
    ran at all)."""
    per = cmap["lines"].get(file, {})
    got: set = set()
    ran = False
    for ln in range(first, last + 1):
        c = per.get(ln, per.get(str(ln)))
        if c is not None:
            ran = True
            got.update(c)
    outside = "" in got
    dur = cmap["durations"]
    for c in [c for c in got if c.startswith("collect:")]:  # computed while a test file was collected: its tests
        got.discard(c)
        f = c[len("collect:"):] + "::"
        got.update(t for t in dur if t.startswith(f))
    for c in [c for c in got if c.startswith("fixture:")]:  # computed by a shared fixture: every test that uses it
        got.discard(c)
        got.update(cmap.get("fixtures", {}).get(c[len("fixture:"):], ()))
    got -= deselect | {""}
    return sorted(got, key=lambda t: (dur.get(t, 1e9), t)), outside, ran


def killers_first(chosen: list[str], killers: dict, file: str, first: int, last: int, near: int = 5,
                  cap: int = 5) -> list[str]:
    """`chosen` with the tests that already killed a mutant of file's lines first-near .. last+near moved to the
    front (same line first, then the nearest; at most `cap`). Mutants of one line mostly die by one test, and
    the fastest-first order may reach it only after minutes (ops.py: 30 of 728 kills took 4,238 s). Only the
    order changes: a survivor still runs every covering test. killers: (file, line) -> killer node ids."""
    inside, got = set(chosen), []
    for d in sorted(range(-near, last - first + near + 1), key=lambda k: (k < 0 or k > last - first, abs(k))):
        for t in killers.get((file, first + d), ()):
            if t in inside and t not in got:
                got.append(t)
    got = got[:cap]
    return got + [t for t in chosen if t not in got]


def bound_names(src: bytes, first: int, last: int) -> set:
    """Names a module-level statement spanning lines first..last binds: assignment targets, a def's or a
    class's name (a class body's line binds the class). Empty for lines inside a function body."""
    names: set = set()
    lines = set(range(first, last + 1)) & module_level_lines(src)
    for st in ast.parse(src).body:
        if not lines & set(range(st.lineno, st.end_lineno + 1)):
            continue
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(st.name)
        for t in (st.targets if isinstance(st, ast.Assign) else [getattr(st, "target", None)]):
            for n in ast.walk(t) if t is not None else ():
                if isinstance(n, ast.Name):
                    names.add(n.id)
    return names


_TREES: dict = {}  # (file, hash of its text) -> its AST's nodes


def use_lines(sources: dict, names: set) -> dict:
    """{file: lines} where any of `names` is read, as a bare name or an attribute (`units.GiB`, `self.peak`),
    over `sources` ({file: bytes})."""
    out: dict = {}
    for f, src in sources.items():
        got = set()
        key = (f, hash(src))
        if key not in _TREES:
            _TREES[key] = list(ast.walk(ast.parse(src)))
        for n in _TREES[key]:
            if (isinstance(n, ast.Name) and n.id in names and isinstance(n.ctx, ast.Load)) or \
                    (isinstance(n, ast.Attribute) and n.attr in names):
                got.add(n.lineno)
        if got:
            out[f] = got
    return out


def header_body(src: bytes, first: int, last: int) -> int | None:
    """The first body line of the function whose header (decorators, defaults, annotations) holds lines
    first..last, or None: every test that called the function ran that line."""
    best = None
    for n in ast.walk(ast.parse(src)):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            top = min([n.lineno] + [d.lineno for d in n.decorator_list])
            if top <= first and last < n.body[0].lineno and (best is None or top >= best[0]):
                best = (top, n.body[0].lineno)
    return best[1] if best else None


def enclosing_function(src: bytes, line: int) -> str | None:
    """The name of the innermost function whose body holds the line, or None at module level."""
    best = None
    for n in ast.walk(ast.parse(src)):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.body[0].lineno <= line <= n.end_lineno:
            if best is None or n.lineno >= best.lineno:
                best = n
    return best.name if best else None


def readers(sources: dict, file: str, first: int, last: int) -> list[tuple[str, int]]:
    """(file, line) of every line that reads what the module-level statement at first..last binds, and, since
    a module-level statement that reads it binds something computed from it (a table of constants), what
    that one binds, and so on; a function that reads it passes it on to whoever calls the function, a
    statement that builds a table at import (`UNITS = _table()`) included: the only places its value reaches,
    save by name lookup at run time (getattr, dataclasses.fields)."""
    names = bound_names(sources[file], first, last)
    seen_names: set = set()
    found: set = set()
    while names - seen_names:
        new = names - seen_names
        seen_names |= new
        for f, lines in use_lines(sources, new).items():
            top = module_level_lines(sources[f])
            for ln in lines:
                if f == file and first <= ln <= last:  # the statement itself
                    continue
                found.add((f, ln))
                if ln in top:
                    names |= bound_names(sources[f], ln, ln)
                else:
                    fn = enclosing_function(sources[f], ln)
                    if fn is not None:
                        names.add(fn)  # its callers read it too
    return sorted(found)


def naming_tests(tests_src: dict, names: set, ids) -> list[str]:
    """The node ids among `ids` of the test functions whose body names one of `names` (a Name, or an attribute
    such as silicon.MTP_TOKENS): a test that checks a module's constant by reading it runs no line of the module,
    so neither the coverage map nor `readers` finds it. tests_src: test file -> its source."""
    by_file: dict = {}
    for t in ids:
        by_file.setdefault(t.split("::")[0], []).append(t)
    got = []
    for f, ts in sorted(by_file.items()):
        src = tests_src.get(f)
        if src is None:
            continue
        hit = set()
        for n in ast.walk(ast.parse(src)):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("test"):
                if any(isinstance(x, ast.Name) and x.id in names or isinstance(x, ast.Attribute) and x.attr in names
                       for x in ast.walk(n)):
                    hit.add(n.name)
        got += [t for t in ts if t.split("::")[-1].split("[")[0] in hit]
    return got


def select_uses(cmap: dict, sources: dict, file: str, first: int, last: int, deselect: set,
                max_files: int = 4, max_tests: int = 40, tests_src: dict | None = None) -> tuple[list[str], list[str]]:
    """For a mutant of a module-level statement, which no test runs by name: (first, rest). In a function's
    header (a default, a decorator): the tests that called the function, i.e. ran its first body line.
    Otherwise (a constant, a table, a class body): the tests that ran a line of `readers`. `first` takes
    the fastest test of each such line in turn, then the next fastest..., from at most `max_files` test
    files (each file a child collects costs its import) and `max_tests` tests: it kills most mutants in
    seconds; `rest` is every other such test, fastest first. With tests_src (test file -> source), the tests that
    name what the statement binds come first (naming_tests)."""
    dur = cmap["durations"]
    body = header_body(sources[file], first, last)
    if body is not None:
        per_line = [select(cmap, file, body, body, deselect)[0]]
    else:
        per_line = [select(cmap, f, ln, ln, deselect)[0] for f, ln in readers(sources, file, first, last)]
    if tests_src and body is None:
        named = naming_tests(tests_src, bound_names(sources[file], first, last), sorted(set(dur) - deselect))
        if named:
            per_line.insert(0, sorted(named, key=lambda t: (dur.get(t, 1e9), t)))
    keep, files, seen = [], set(), set()
    for k in range(max((len(p) for p in per_line), default=0)):
        for p in per_line:
            if k >= len(p) or p[k] in seen or len(keep) >= max_tests:
                continue
            tf = p[k].split("::")[0]
            if tf in files or len(files) < max_files:
                files.add(tf)
                keep.append(p[k])
                seen.add(p[k])
    rest = sorted({t for p in per_line for t in p} - seen, key=lambda t: (dur.get(t, 1e9), t))
    return keep, rest


# ---------------------------------------------------------------- the fork server
PRELOAD = ["numpy", "pandas", "yaml", "typer", "click", "rich", "matplotlib", "matplotlib.pyplot", "scipy",
           "hypothesis", "hypothesis.extra.numpy", "pytest", "xdist", "concurrent.futures", "multiprocessing",
           "asyncio", "json", "csv", "sqlite3", "pyarrow", "pyarrow.parquet", "distributed"]
_FAILED = re.compile(r"^(FAILED|ERROR) (\S+)")


def serve() -> int:
    """Read one JSON request a line on stdin ({"args": [...], "timeout": s, "out": path}), answer one line on
    stdout ({"rc": int or "timeout", "seconds": s, "failed": [...]}), forking a child per request."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    for name in PRELOAD:
        try:
            __import__(name)
        except Exception:  # noqa: BLE001 - an optional library missing is not the server's business
            pass
    assert not any(m == "perfmodel" or m.startswith("perfmodel.") for m in sys.modules), "perfmodel preloaded"
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        out = Path(req["out"])
        t0 = time.monotonic()
        pid = os.fork()
        if pid == 0:  # the child: its own process group, so a timeout ends whatever it started
            try:
                os.setpgid(0, 0)
                # the mutant's own empty kernel-table cache: tables its code builds are neither read from a
                # cache built by the unmutated code nor left where another run (or the user's) would read them
                cache = out.with_name(out.name + ".kernel-cache")
                shutil.rmtree(cache, ignore_errors=True)
                os.environ["PERFMODEL_CACHE"] = str(cache)
                fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
                import pytest

                rc = pytest.main(req["args"])
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(int(rc))
            except BaseException:  # noqa: BLE001 - the child must never return into the server's loop
                os._exit(99)
        deadline = t0 + float(req["timeout"])
        rc = None
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                rc = os.waitstatus_to_exitcode(status)
                break
            if time.monotonic() > deadline:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                os.waitpid(pid, 0)
                rc = "timeout"
                break
            time.sleep(0.02)
        text = out.read_text(errors="replace") if out.exists() else ""
        failed = [m.group(2) for ln in text.splitlines() if (m := _FAILED.match(ln))]
        print(json.dumps({"rc": rc, "seconds": time.monotonic() - t0, "failed": failed, "tail": text[-400:]}),
              flush=True)
    return 0


class Server:
    """One fork server in a copy `work`: run(args, timeout) -> (rc or 'timeout', seconds, first failing, all)."""

    def __init__(self, work: Path):
        self.work = work
        env = dict(os.environ, PYTHONPATH=str(work), MPLBACKEND="Agg", OPENBLAS_NUM_THREADS="1",
                   OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        env.pop("HYPOTHESIS_PROFILE", None)
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--serve"], cwd=work, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        ready = self.proc.stdout.readline()
        if not ready or not json.loads(ready).get("ready"):
            raise SystemExit(f"the fork server in {work} did not start")

    def run(self, args: list[str], timeout: float):
        shutil.rmtree(self.work / ".hypothesis", ignore_errors=True)  # no replay of an earlier mutant's failures
        req = {"args": args, "timeout": timeout, "out": str(self.work / ".mutant-out.txt")}
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        while True:  # the server answers after its own deadline; this only guards against a dead server
            r, _, _ = _select.select([self.proc.stdout], [], [], timeout + 120)
            if r:
                break
            raise SystemExit(f"the fork server in {self.work} stopped answering")
        ans = json.loads(self.proc.stdout.readline())
        f = ans["failed"]
        return ans["rc"], ans["seconds"], (f[0] if f else ""), f

    def close(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except Exception:  # noqa: BLE001
            self.proc.kill()


if __name__ == "__main__" and sys.argv[1:] == ["--serve"]:
    sys.exit(serve())
