"""The README and docs show real output: every `$ perfmodel ...` example is re-run and compared."""
import json
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
