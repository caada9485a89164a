"""The README and docs show real output: every `$ perfmodel ...` example is re-run and compared."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_every_documented_example_shows_its_current_output():
    p = subprocess.run([sys.executable, str(ROOT / "docs" / "update_examples.py"), "--check"], capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stdout + p.stderr


BOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    """A kernelspec for this interpreter (so a user's own `python3` kernel cannot stand in for it)."""
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    home = tmp_path_factory.mktemp("jupyter")
    spec = home / "kernels" / "perfmodel-test"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "perfmodel tests", "language": "python"}))
    mp = pytest.MonkeyPatch()
    mp.setenv("JUPYTER_PATH", str(home))
    mp.delenv("MPLBACKEND", raising=False)  # the kernel's inline backend, as in Jupyter
    yield "perfmodel-test"
    mp.undo()


def test_there_are_notebooks_and_they_are_stored_without_outputs():
    assert len(BOOKS) >= 5
    for nb in BOOKS:
        cells = json.loads(nb.read_text())["cells"]
        assert all(not c.get("outputs") and c.get("execution_count") is None for c in cells
                   if c["cell_type"] == "code"), f"{nb.name}: strip outputs (python notebooks/_make.py)"
    p = subprocess.run([sys.executable, str(ROOT / "notebooks" / "_make.py"), "--check"], capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.parametrize("book", BOOKS, ids=lambda p: p.name)
def test_each_notebook_runs_on_a_real_kernel_outside_the_repository(book, kernel, tmp_path):
    """Executed top to bottom by nbclient in an empty folder: only the installed package is used,
    every figure is displayed, and nothing is written."""
    import nbclient
    import nbformat

    nb = nbformat.read(book, as_version=4)
    nbclient.NotebookClient(nb, timeout=300, kernel_name=kernel, resources={"metadata": {"path": str(tmp_path)}},
                            allow_errors=False).execute()
    outs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outs if o.output_type == "error"]
    images = [o for o in outs if "image/png" in o.get("data", {})]
    want = sum("plots." in c.source and "fig =" in c.source for c in nb.cells if c.cell_type == "code")
    assert len(images) >= want, f"{book.name}: {len(images)} figures shown, {want} cells draw one"
    assert list(tmp_path.iterdir()) == []  # the notebooks write no files


def test_the_cli_reference_is_generated_from_the_app_and_current():
    p = subprocess.run([sys.executable, str(ROOT / "docs" / "gen_cli_reference.py"), "--check"], capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stdout + p.stderr


_WORDS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine"}


def test_the_docs_count_the_notebooks_there_are():
    n = len(list((ROOT / "notebooks").glob("*.ipynb")))
    text = " ".join(p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))])
    said = re.findall(r"\b(two|three|four|five|six|seven|eight|nine|\d+) notebooks\b", text)
    assert said, "the README says how many notebooks there are"
    assert all(w in (_WORDS.get(n), str(n)) for w in said), (said, n)


def test_every_measure_quick_time_in_the_docs_is_the_saved_runs():
    """Three docs gave three times for `measure --quick` (a minute, ~65 s, two minutes): each now quotes the saved
    run's own measuring time, read from its results.json."""
    import json

    wall = json.loads((ROOT / "perfmodel/measure/data/cpu-quick/results.json").read_text())["meta"]["schedule"]["wall_s"]
    lines = [ln for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "perfmodel/cli/measure.py"]
             for ln in p.read_text().splitlines() if "--quick" in ln and re.search(r"\d+\s*(s|min|minutes?)\b|minute", ln)]
    assert lines
    for ln in lines:
        times = re.findall(r"(\d+(?:\.\d+)?)\s*s of measuring", ln)
        assert times and all(round(float(t)) == round(wall) for t in times), ln


def test_the_readme_states_no_test_suite_duration():
    """'the tests take about 50 s' drifted from every run; durations live in bench/ and docs/speed.md."""
    text = (ROOT / "README.md").read_text()
    assert not re.search(r"suite is about \d+ s|tests take about \d+", text)


def test_the_readme_lists_every_family_import_config_reads_and_no_other():
    """The README's import list named 7 families while 22 architectures imported fine."""
    from perfmodel.hf_import import FAMILIES

    text = (ROOT / "README.md").read_text()
    para = text[text.index("Configs of these families are imported"):text.index("the tests check the imported")]
    named = set(re.findall(r"\b[A-Z][A-Za-z0-9]*(?:ForCausalLM|ForConditionalGeneration|LMHeadModel)\b", para))
    assert named == set(FAMILIES)


class _Passed(BaseException):
    """Raised in place of the simulations once a documented search has passed its up-front work limit."""


def _documented(prefixes: tuple) -> list:
    import shlex

    out = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for line in path.read_text().splitlines():
            cmd = line.strip().lstrip("$ ").strip()
            if cmd.startswith(prefixes) and "MODEL" not in cmd and "[" not in cmd:
                out.append((path.name, shlex.split(cmd.split("  (")[0].split(" # ")[0])))
    return out


@pytest.mark.parametrize("where,argv", _documented(("perfmodel capacity ", "perfmodel plot capacity ",
                                                     "perfmodel fleet ")),
                         ids=lambda x: " ".join(x) if isinstance(x, list) else x)
def test_every_documented_capacity_example_runs_under_its_limits(where, argv, monkeypatch, tmp_path, capsys):
    """Each `perfmodel capacity`, `plot capacity` and `fleet` command in README.md and docs/ passes the up-front work
    limit as written (issue 24: the documented plot example was refused by the default limit); the searches are
    stopped right after the check."""
    from perfmodel.cli import main
    from perfmodel.serving import capacity as cap

    check = cap._work

    def passed(est, max_tokens):
        check(est, max_tokens)
        raise _Passed()

    monkeypatch.setattr(cap, "_work", passed)
    monkeypatch.chdir(tmp_path)
    if argv[1] == "fleet":  # the documented fleet file (a path from the repository root), where the example reads it
        (tmp_path / argv[2]).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / argv[2]).write_text((ROOT / argv[2]).read_text())
    with pytest.raises(_Passed):
        rc = main(argv[1:])
        pytest.fail(f"{where}: {' '.join(argv)} exited {rc} before its searches: {capsys.readouterr().err.strip()}")
