"""The house has no circles: no two modules of perfmodel import each other, directly or around a loop, and
every module imports alone (issue 25). Imports inside functions count: a lazy import is still a dependency.
The package's __init__ re-exports the public API and is left out (submodules import `from . import x`)."""
import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "perfmodel"


def _modules() -> dict:
    mods = {}
    for p in ROOT.rglob("*.py"):
        parts = p.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        mods[name] = p
    return mods


MODS = _modules()


def _targets(cur: str, node) -> list:
    is_pkg = MODS[cur].name == "__init__.py"
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name in MODS]
    pkg = cur.split(".") if is_pkg else cur.split(".")[:-1]
    base = ".".join((pkg[:len(pkg) - node.level + 1] if node.level else []) + ([node.module] if node.module else []))
    out = []
    for a in node.names:
        full = f"{base}.{a.name}"
        out.append(full if full in MODS else base)
    return [t for t in out if t in MODS]


def graph() -> dict:
    g = {m: set() for m in MODS}
    for m, p in MODS.items():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                g[m].update(t for t in _targets(m, node) if t not in (m, "perfmodel"))
    return g


def _cycles(g: dict) -> list:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in g[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def test_the_graph_sees_real_imports():
    g = graph()
    assert "perfmodel.specs" in g["perfmodel.engine"] and "perfmodel.fields" in g["perfmodel.specs"]
    assert "perfmodel.kernels" in g["perfmodel.timemodel"]  # a lazy import inside a function counts


def test_no_module_imports_another_that_imports_it_back():
    assert _cycles(graph()) == []


def test_a_cycle_would_be_found():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(g) == [["a", "b", "c"]]


@pytest.mark.parametrize("name", sorted(m for m in MODS if not m.endswith("__main__")))
def test_every_module_imports_alone(name):
    code = f"import importlib; importlib.import_module({name!r})"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]


def test_no_module_passes_600_lines():
    """A module past ~600 lines is split by what it holds (issue 25): ops.py gave counting.py and runconfig.py,
    specs.py gave hardware_spec.py, hf_import.py gave hf_config.py, serving/silicon.py gave silicon_report.py,
    kernels.py gave interp.py."""
    long = {str(p.relative_to(ROOT.parent)): n for p in MODS.values()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 600}
    assert not long, long
