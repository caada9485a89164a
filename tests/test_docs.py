"""The README and docs show real output: every `$ perfmodel ...` example is re-run and compared."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_documented_example_shows_its_current_output():
    p = subprocess.run([sys.executable, str(ROOT / "docs" / "update_examples.py"), "--check"], capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stdout + p.stderr


def test_notebooks_run_top_to_bottom_with_the_public_api(monkeypatch):
    monkeypatch.chdir(ROOT / "notebooks")  # where Jupyter starts a notebook's kernel
    monkeypatch.setenv("MPLBACKEND", "Agg")
    books = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert len(books) >= 4
    before = sorted(p.name for p in (ROOT / "notebooks").iterdir())
    for nb in books:
        cells = json.loads(nb.read_text())["cells"]
        assert all(not c.get("outputs") for c in cells if c["cell_type"] == "code"), f"{nb.name}: strip outputs"
        ns: dict = {}
        for c in cells:
            if c["cell_type"] == "code":
                exec(compile("".join(c["source"]), f"{nb.name}", "exec"), ns)  # noqa: S102
    assert sorted(p.name for p in (ROOT / "notebooks").iterdir()) == before  # the notebooks write no files


def test_the_cli_reference_is_generated_from_the_app_and_current():
    p = subprocess.run([sys.executable, str(ROOT / "docs" / "gen_cli_reference.py"), "--check"], capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stdout + p.stderr
