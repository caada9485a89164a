"""The mutation tool (bench/mutate.py, bench/mutate_select.py) says true things: which mutants exist, which tests
can kill each, and that a mutant written into the copy is the code its tests run."""
from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, mod)
    spec.loader.exec_module(mod)
    return mod


mutate = _load("mutate")
ms = _load("mutate_select")

SRC = textwrap.dedent('''\
    LIMIT = 4096  # mutation: equivalent - a memory bound: results never depend on it

    def area(a, b):
        block = 1_000  # mutation: equivalent - loop block size; the blocks are summed
        return a * b + block * 0

    TABLE = {"x": area(2, 3)}
    ''').encode()


def test_a_line_marked_equivalent_gives_mutants_that_are_recorded_with_their_reason_and_never_run():
    marked = mutate.equivalent_lines(SRC)
    assert marked == {1: "a memory bound: results never depend on it", 4: "loop block size; the blocks are summed"}
    muts = mutate.mutants_of("m.py", SRC)
    on_marked = [m for m in muts if m.line in marked]
    others = [m for m in muts if m.line not in marked]
    assert on_marked and all(m.outcome == "equivalent" and m.killer == marked[m.line] for m in on_marked)
    assert others and all(m.outcome == "" for m in others)  # the product on line 5 is still mutated
    assert any(m.line == 5 and m.kind.startswith("binop *") for m in others)


def test_module_level_lines_are_those_outside_every_function_body():
    lines = ms.module_level_lines(SRC)
    assert {1, 3, 7} <= lines  # a constant, a def line (its defaults run at import), a table built at import
    assert not {4, 5} & lines  # the function body runs only when called


def test_a_mutant_gets_the_tests_that_ran_its_lines_fastest_first_and_is_told_when_a_line_ran_outside_tests():
    cmap = {"lines": {"m.py": {"5": ["t::slow", "t::fast", "t::broken"], "7": ["", "t::table"]}},
            "durations": {"t::slow": 3.0, "t::fast": 0.1, "t::broken": 0.2, "t::table": 1.0}}
    assert ms.select(cmap, "m.py", 5, 5, {"t::broken"}) == (["t::fast", "t::slow"], False, True)
    assert ms.select(cmap, "m.py", 7, 7, set()) == (["t::table"], True, True)  # also ran at import
    assert ms.select(cmap, "m.py", 4, 5, set())[0] == ["t::fast", "t::broken", "t::slow"]  # the span's union
    assert ms.select(cmap, "m.py", 6, 6, set()) == ([], False, False)  # never ran: no test can kill it
    assert ms.select(cmap, "other.py", 1, 1, set()) == ([], False, False)


def test_a_module_level_mutant_first_gets_the_tests_that_read_what_its_statement_binds():
    # a constant no test runs by name is read inside functions, here and in other modules
    units = b"GiB = 2**30\n\n\nclass Spec:\n    peak: float = 1.0\n\n\ndef gib(x):\n    return x / GiB\n"
    user = b"from units import GiB\nimport units\n\n\ndef cap(m):\n    return m * units.GiB + GiB\n"
    other = b"def f(spec):\n    return spec.peak\n"
    assert ms.bound_names(units, 1, 1) == {"GiB"}
    assert ms.bound_names(units, 5, 5) == {"Spec"}  # a class body's line binds the class
    assert ms.bound_names(units, 9, 9) == set()  # a function body binds nothing at import
    srcs = {"units.py": units, "user.py": user, "other.py": other}
    assert ms.use_lines(srcs, {"GiB"}) == {"units.py": {9}, "user.py": {6}}  # the import line only stores it
    assert ms.use_lines(srcs, {"peak"}) == {"other.py": {2}}  # read as an attribute
    cmap = {"lines": {"units.py": {"9": ["ta::gib"]}, "user.py": {"6": ["tb::cap", "tc::slow"]},
                      "other.py": {"2": ["tc::peak"]}},
            "durations": {"ta::gib": 0.5, "tb::cap": 0.1, "tc::slow": 9.0, "tc::peak": 0.2}}
    # the fastest test of each reading line in turn (units.py:9, then user.py:6), then the next of each
    assert ms.select_uses(cmap, srcs, "units.py", 1, 1, set()) == (["ta::gib", "tb::cap", "tc::slow"], [])
    assert ms.select_uses(cmap, srcs, "units.py", 1, 1, set(), max_files=1) == (["ta::gib"], ["tb::cap", "tc::slow"])
    assert ms.select_uses(cmap, srcs, "units.py", 1, 1, set(), max_tests=2) == (["ta::gib", "tb::cap"], ["tc::slow"])
    assert ms.select_uses(cmap, srcs, "units.py", 9, 9, set()) == ([], [])
    # a table built at import from the constant carries it on: whoever reads the table reads it too
    srcs["table.py"] = b"from units import GiB\nSIZES = {'h100': 80 * GiB}\n\n\ndef size(n):\n    return SIZES[n]\n"
    assert ("table.py", 2) in ms.readers(srcs, "units.py", 1, 1) and ("table.py", 6) in ms.readers(srcs, "units.py", 1, 1)
    # a table built at import by a function that reads the constant: whoever reads the table reads it too (units.py's
    # prefixes -> _table() -> UNITS -> parse_quantity; before, nothing past the function's body was selected)
    built = b"K = 1e3\n\n\ndef _table():\n    return {'kB': K}\n\n\nUNITS = _table()\n\n\ndef parse(u):\n    return UNITS[u]\n"
    assert ms.enclosing_function(built, 5) == "_table" and ms.enclosing_function(built, 8) is None
    assert ms.readers({"u.py": built}, "u.py", 1, 1) == [("u.py", 5), ("u.py", 8), ("u.py", 12)]
    # a default in a function's header: the tests that called the function, i.e. ran its first body line
    hdr = b"@cache\ndef area(a,\n         b=2.0):\n    return a * b\n"
    assert ms.header_body(hdr, 3, 3) == 4 and ms.header_body(hdr, 1, 1) == 4 and ms.header_body(hdr, 4, 4) is None
    cmap2 = {"lines": {"h.py": {"4": ["t::slow", "t::fast"]}}, "durations": {"t::slow": 2.0, "t::fast": 0.1}}
    assert ms.select_uses(cmap2, {"h.py": hdr}, "h.py", 3, 3, set()) == (["t::fast", "t::slow"], [])


def test_a_test_that_reads_a_module_s_constant_itself_is_selected_for_its_mutants_first():
    """silicon.MTP_TOKENS' mutants were run only against the tests that ran a line reading it, never the test that
    checks the published tokens a step by reading the table: that test names it, and now comes first."""
    units = b"GiB = 2**30\n\n\ndef gib(x):\n    return x / GiB\n"
    tests = {"tests/test_u.py": b"import units\n\n\ndef test_gib_is_two_to_the_30():\n    assert units.GiB == 1 << 30\n"
                                b"\n\ndef test_other():\n    assert True\n\n\ndef helper():\n    return units.GiB\n",
             "tests/test_v.py": b"from units import GiB\n\n\ndef test_param(x=GiB):\n    assert x\n"}
    ids = ["tests/test_u.py::test_gib_is_two_to_the_30", "tests/test_u.py::test_other", "tests/test_v.py::test_param[1]",
           "tests/test_w.py::test_gone"]
    assert ms.naming_tests(tests, {"GiB"}, ids) == ["tests/test_u.py::test_gib_is_two_to_the_30",
                                                   "tests/test_v.py::test_param[1]"]
    cmap = {"lines": {"units.py": {"5": ["ta::gib"]}}, "durations": {"ta::gib": 0.5, **{t: 9.0 for t in ids}}}
    first, rest = ms.select_uses(cmap, {"units.py": units}, "units.py", 1, 1, set(), tests_src=tests)
    assert first[:2] == ["tests/test_u.py::test_gib_is_two_to_the_30", "ta::gib"]
    assert set(first + rest) == {"ta::gib", "tests/test_u.py::test_gib_is_two_to_the_30", "tests/test_v.py::test_param[1]"}


def test_the_report_counts_equivalents_by_construction_apart_and_out_of_the_score():
    data = {"mutants": [
        {"id": "a", "file": "m.py", "line": 1, "outcome": "killed", "original": "1", "mutated": "2", "stage": "covering"},
        {"id": "b", "file": "m.py", "line": 2, "outcome": "survived", "original": "<", "mutated": "<=",
         "stage": "uncovered"},
        {"id": "c", "file": "m.py", "line": 3, "outcome": "equivalent", "original": "9", "mutated": "10",
         "stage": "by construction"}]}
    text = mutate.report(data, None)
    assert "+ 1 equivalent by construction, not run" in text and "1 on lines no test runs" in text
    assert "score: (killed + timeout) / (run - equivalent) = 0.5000" in text
    assert "| m.py | 2 | 1 | 1 |" in text


def test_survivors_killed_since_or_gone_are_reported_apart_from_the_recorded_score(tmp_path):
    """A survivor that a test written after the run kills, or whose code was removed, is classified so in
    docs/mutation.md's tables: the recorded score stays as run, and a second line gives the score with them."""
    data = {"mutants": [{"id": k, "file": "m.py", "line": i, "outcome": o, "original": "1", "mutated": "2",
                         "stage": "covering"} for i, (k, o) in enumerate([("a", "killed"), ("b", "survived"),
                                                                           ("c", "survived"), ("d", "survived"),
                                                                           ("e", "survived")])]}
    doc = tmp_path / "mutation.md"
    doc.write_text("| `b` | 1 | x | killed since | test_b |\n| `c` | 2 | x | went away | removed |\n"
                   "| `d` | 3 | x | equivalent | why |\n")
    text = mutate.report(data, doc)
    assert "1 equivalent, 0 accepted, 1 killed since, 1 went away, 1 unexplained" in text
    assert "(run - equivalent) = 0.2500" in text  # 1 killed of 5 run, 1 equivalent
    assert "(run - equivalent - went away) = 0.6667" in text  # (1 + 1) / (5 - 1 - 1)


def test_the_fork_server_runs_each_request_on_the_code_as_it_is_on_disk_then(tmp_path):
    # nothing of the code under test lives in the server: a mutant written between two requests is what runs
    (tmp_path / "calc.py").write_text("def area(a, b):\n    return a * b\n")
    (tmp_path / "test_calc.py").write_text("from calc import area\n\ndef test_area():\n    assert area(2, 3) == 6\n")
    server = ms.Server(tmp_path)
    try:
        args = ["-q", "-p", "no:cacheprovider", "-o", "addopts=-rfE", "test_calc.py"]
        rc, _, first, _ = server.run(args, 60)
        assert rc == 0 and first == ""
        (tmp_path / "calc.py").write_text("def area(a, b):\n    return a + b\n")
        mutate._pyc_purge(tmp_path, "calc.py")
        rc, _, first, failed = server.run(args, 60)
        assert rc == 1 and first == "test_calc.py::test_area" and failed == [first]
        (tmp_path / "calc.py").write_text("def area(a, b):\n    while True:\n        pass\n")
        mutate._pyc_purge(tmp_path, "calc.py")
        rc, _, _, _ = server.run(args, 3)
        assert rc == "timeout"  # a hang is ended at its limit, not waited for
    finally:
        server.close()


def _project(root, calc: str, tests: dict) -> dict:
    """A project of one module, perfmodel/calc.py, and the given test files under tests/: its coverage map over
    those files, in their order."""
    pytest.importorskip("coverage", minversion="7.10")
    (root / "perfmodel").mkdir()
    (root / "perfmodel" / "__init__.py").write_text("")
    (root / "perfmodel" / "calc.py").write_text(calc)
    (root / "tests").mkdir()
    for name, text in tests.items():
        (root / "tests" / name).write_text(text)
    return ms.build_map(root, [f"tests/{n}" for n in tests], 1, [], log=lambda _: None, imports=["perfmodel.calc"])


def test_the_coverage_map_names_each_line_by_the_tests_that_ran_it(tmp_path):
    cmap = _project(tmp_path, "SCALE = 2\n\ndef area(a, b):\n    return a * b\n\ndef unused():\n    return 0\n\n"
                              "def scaled(x):\n    return SCALE * x\n",
                    {"test_calc.py": "from perfmodel.calc import area\n\ndef test_area():\n    assert area(2, 3) == 6\n\n"
                                     "def test_broken():\n    assert area(1, 1) == 2\n",
                     "test_table.py": "from perfmodel.calc import scaled\n\nROWS = scaled(3)\n\ndef test_rows():\n"
                                      "    assert ROWS == 6\n"})
    per = cmap["lines"]["perfmodel/calc.py"]
    assert per[4] == ["tests/test_calc.py::test_area", "tests/test_calc.py::test_broken"]
    assert per[1] == [""]  # run at import only
    assert 7 not in per  # never run
    assert per[10] == ["collect:tests/test_table.py"]  # run while that file was collected
    assert ms.select(cmap, "perfmodel/calc.py", 10, 10, set()) == (["tests/test_table.py::test_rows"], False, True)
    assert cmap["failed"] == ["tests/test_calc.py::test_broken"]
    assert set(cmap["durations"]) == {"tests/test_calc.py::test_area", "tests/test_calc.py::test_broken",
                                      "tests/test_table.py::test_rows"}


def test_what_a_test_runs_in_a_subprocess_is_named_by_that_test(tmp_path):
    """Coverage hands a new process its parent's config (the context read when the map started, "") rather than
    the test's: the CLI runs and Dask workers the tests start were recorded outside every test, which sent 3,221
    physics mutants to the whole suite. The map's sitecustomize names a new process by the test in its
    environment (and a forked child too: its coverage restarts without a context)."""
    cmap = _project(tmp_path, "def in_child(x):\n    return x + 1\n",
                    {"test_procs.py": "import subprocess, sys\n\n"
                                      "def test_subprocess():\n"
                                      "    r = subprocess.run([sys.executable, '-c', 'from perfmodel.calc import in_child; "
                                      "print(in_child(1))'],\n"
                                      "                       capture_output=True, text=True)\n"
                               "    assert r.stdout.strip() == '2', r.stderr\n"})
    assert cmap["lines"]["perfmodel/calc.py"][2] == ["tests/test_procs.py::test_subprocess"]
    assert cmap["failed"] == []


def test_what_a_module_wide_fixture_computes_reaches_every_test_that_uses_it(tmp_path):
    """A module-scoped fixture runs once, during the setup of the first test that asks for it: its lines were
    named by that test alone, so a mutant there never met the fixture's other readers (silicon.py: the serving
    table's `points`, 1 of 4 readers selected, and a clip of every request's time to 1 s survived). The fixture's
    lines now have their own context, which every test using the fixture gets."""
    cmap = _project(tmp_path, "def table():\n    return [1, 2]\n\ndef one():\n    return 1\n",
                    {"test_wide.py": "import pytest\nfrom perfmodel.calc import table, one\n\n"
                                     "@pytest.fixture(scope='module')\ndef rows():\n    return table()\n\n"
                                     "def test_first(rows):\n    assert rows\n\n"
                                     "def test_second(rows):\n    assert rows == [1, 2]\n\n"
                                     "def test_alone():\n    assert one() == 1\n"})
    assert cmap["lines"]["perfmodel/calc.py"][2] == ["fixture:tests/test_wide.py::rows"]
    assert cmap["lines"]["perfmodel/calc.py"][5] == ["tests/test_wide.py::test_alone"]  # a test's own lines stay its
    got, outside, ran = ms.select(cmap, "perfmodel/calc.py", 2, 2, set())
    assert sorted(got) == ["tests/test_wide.py::test_first", "tests/test_wide.py::test_second"] and ran
    assert not outside


def test_a_test_that_killed_a_mutant_of_a_line_is_tried_first_for_the_next_mutants_there_and_only_the_order_moves():
    chosen = ["t.py::fast", "t.py::mid", "t.py::slow", "t.py::slowest"]
    killers = {("m.py", 10): ["t.py::slowest"], ("m.py", 12): ["t.py::slow"], ("m.py", 30): ["t.py::mid"],
               ("m.py", 11): ["u.py::not_covering"]}
    # the same line's killer first, then the nearest line's; a test that does not cover the line is never added;
    # a killer 20 lines away is not a neighbour
    assert ms.killers_first(chosen, killers, "m.py", 10, 10) == ["t.py::slowest", "t.py::slow", "t.py::fast",
                                                                 "t.py::mid"]
    assert ms.killers_first(chosen, killers, "m.py", 12, 12)[:2] == ["t.py::slow", "t.py::slowest"]
    assert ms.killers_first(chosen, killers, "other.py", 10, 10) == chosen
    for first in range(0, 40):  # whatever is known, a survivor still runs every covering test, once each
        got = ms.killers_first(chosen, killers, "m.py", first, first + 1)
        assert sorted(got) == sorted(chosen)


def test_a_runner_learns_each_kill_and_a_resumed_run_learns_the_recorded_ones(tmp_path):
    r = mutate.Runner.__new__(mutate.Runner)
    r.lock, r.killers = __import__("threading").Lock(), {}
    r.learn({"file": "m.py", "line": 3, "outcome": "killed", "killer": "t.py::a"})
    r.learn({"file": "m.py", "line": 3, "outcome": "killed", "killer": "t.py::b"})
    r.learn({"file": "m.py", "line": 3, "outcome": "survived", "killer": ""})
    r.learn({"file": "m.py", "line": 4, "outcome": "killed", "killer": "pytest exit 2"})  # no test to name
    assert r.killers == {("m.py", 3): ["t.py::b", "t.py::a"]}


def test_the_map_puts_each_module_level_memo_back_as_imported_before_every_test_so_its_lines_are_each_tests():
    import types

    mod = types.ModuleType("memofake.ops")
    mod._GROUPS, mod._NAMES, mod.PUBLIC = {}, {"G": "global"}, {}
    sys.modules["memofake"], sys.modules["memofake.ops"] = types.ModuleType("memofake"), mod
    try:
        ms.snapshot_memos("memofake")
        mod._GROUPS["deepseek-v3"] = ["dense x3", "moe x58"]  # an earlier test filled the memo
        mod.PUBLIC["x"] = 1  # not an _X name: not a memo of the code's, left alone
        assert ms.reset_memos("memofake") == 1
        assert mod._GROUPS == {} and mod._NAMES == {"G": "global"} and mod.PUBLIC == {"x": 1}
        assert ms.reset_memos("memofake") == 0  # nothing moved since
    finally:
        for k in ("memofake", "memofake.ops"):
            sys.modules.pop(k)
        for k in [k for k in ms._MEMOS if k[0].startswith("memofake")]:
            ms._MEMOS.pop(k)


def test_mutants_named_in_a_file_are_run_whatever_their_ids_hold(tmp_path):
    """Ids hold spaces and ' -' ("binop -->+:0"), which a shell or argparse splits: --only-file reads them one a
    line."""
    ms_ = mutate.mutants_of("m.py", b"def f(a, b):\n    return a - b if a > 1 else b\n")
    ids = [m.id for m in ms_]
    assert any(" -" in i for i in ids)
    f = tmp_path / "ids.txt"
    f.write_text(ids[0] + "\n\n" + ids[-1] + "\n")
    assert [m.id for m in mutate.only_these(ms_, [], f)] == [ids[0], ids[-1]]
    assert [m.id for m in mutate.only_these(ms_, [ids[1]], f)] == [ids[0], ids[1], ids[-1]]
    assert mutate.only_these(ms_, [], None) == ms_
    with pytest.raises(SystemExit, match="--only-file"):
        mutate.only_these(ms_, [], tmp_path / "missing.txt")


def test_the_scoreboard_counts_each_module_once_from_the_record_it_is_named_with(tmp_path):
    """bench/mutation_scoreboard.py: one row per source file, its survivors classified by the document's tables,
    the score as run over the non-equivalent mutants and with the killed since (less the code gone); a total row;
    a file taken from two records, or from one that holds none of it, is refused, not counted twice."""
    import json

    board = _load("mutation_scoreboard")
    outcomes = [("a1", "a.py", "killed"), ("a2", "a.py", "timeout"), ("a3", "a.py", "survived"),
                ("a4", "a.py", "survived"), ("a5", "a.py", "survived"), ("a6", "a.py", "error"),
                ("a7", "a.py", "equivalent"), ("b1", "b.py", "killed"), ("b2", "b.py", "survived"),
                ("b3", "b.py", "survived")]
    rec = tmp_path / "rec.json"
    rec.write_text(json.dumps({"mutants": [{"id": i, "file": f, "outcome": o} for i, f, o in outcomes]}))
    doc = tmp_path / "mutation.md"
    doc.write_text("| `a3` | 1 | x | equivalent | why |\n| `a4` | 2 | x | killed since | test_a4 |\n"
                   "| `b2` | 3 | x | went away | removed |\n| `b3` | 4 | x | accepted | a default |\n")
    rows = board.scoreboard([board.parse_entry(f"{rec}:a.py"), board.parse_entry(f"{rec}:b.py")], doc)
    a, b, total = rows
    assert (a["run"], a["killed"], a["equivalent"], a["killed since"], a["unexplained"]) == (5, 2, 1, 1, 1)
    assert a["as run"] == pytest.approx(2 / 4) and a["with the killed since"] == pytest.approx(3 / 4)
    assert (b["run"], b["killed"], b["went away"], b["accepted"]) == (3, 1, 1, 1)
    assert b["as run"] == pytest.approx(1 / 3) and b["with the killed since"] == pytest.approx(1 / 2)
    assert (total["run"], total["killed"]) == (8, 3) and total["with the killed since"] == pytest.approx(4 / 6)
    assert "| **all** |  | 8 | 3 | 1 | 1 | 1 | 1 | 1 | 42.9% | 66.7% |" in board.markdown(rows)
    with pytest.raises(SystemExit, match="a.py: named by two records"):
        board.scoreboard([board.parse_entry(str(rec)), board.parse_entry(f"{rec}:a.py")], doc)
    with pytest.raises(SystemExit, match="holds no mutant of c.py"):
        board.scoreboard([board.parse_entry(f"{rec}:c.py")], doc)
