"""Nothing is lost and nothing hangs: interrupts end with 130/143 and one line, outputs appear whole or not at
all, unwritable targets and oversized work are refused up front in one line."""
import errno
import json
import os
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from perfmodel.cli import main
from perfmodel.errors import SpecError

PM = [sys.executable, "-m", "perfmodel.cli"]
BIG_SWEEP = ["sweep", "--batch", "1:1024:1", "--context", "128:1250000:128", "--no-progress"]  # 10^7 rows, ~5 s


def one_line(capsys, argv, code=2):
    assert main(argv) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("perfmodel: error:") and "Traceback" not in err[0], err
    return err[0]


def _interrupt(argv, sig, tmp_path, wait_for=None, wait_text=None):
    """Start perfmodel; once `wait_for` (a glob in tmp_path) exists or its stderr shows `wait_text`, send `sig`."""
    log = tmp_path / "stderr.txt"
    with open(log, "w") as errf:
        p = subprocess.Popen(PM + argv, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=errf, text=True,
                             start_new_session=True)
        t0 = time.time()
        while time.time() - t0 < 60:
            if (wait_for and list(tmp_path.glob(wait_for))) or (wait_text and wait_text in log.read_text()):
                break
            if p.poll() is not None:
                pytest.fail(f"finished before the signal: {log.read_text()}")
            time.sleep(0.02)
        time.sleep(0.1)
        p.send_signal(sig)
        p.wait(timeout=60)
    err = log.read_text()
    log.unlink()
    return p.returncode, err


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_sweep_exits_128_plus_the_signal_and_leaves_the_old_file_whole(tmp_path, sig, code):
    (tmp_path / "big.csv").write_text("the previous good file\n")
    rc, err = _interrupt(BIG_SWEEP + ["-o", "big.csv"], sig, tmp_path, wait_for=".big.csv.*.part")
    assert rc == code
    lines = err.strip().splitlines()
    assert len(lines) == 1 and signal.Signals(sig).name in lines[0], err
    assert (tmp_path / "big.csv").read_text() == "the previous good file\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.csv"]  # no partial file left behind


def test_an_interrupted_measure_run_changes_none_of_its_files(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "results.json").write_text("{}\n")
    (out / "measured.yaml").write_text("old: true\n")
    rc, err = _interrupt(["measure", "--device", "cpu", "--quick", "--out", "run"], signal.SIGINT, tmp_path,
                         wait_text="timed in interleaved rounds")
    assert rc == 130 and "interrupted by SIGINT" in err.strip().splitlines()[-1], err
    assert (out / "results.json").read_text() == "{}\n" and (out / "measured.yaml").read_text() == "old: true\n"
    assert sorted(p.name for p in out.iterdir()) == ["measured.yaml", "results.json"]


def test_a_measure_run_writes_its_files_together_or_not_at_all(tmp_path, monkeypatch):
    """If one file of the group cannot be written, none of the others replaces its old version."""
    from pathlib import Path as P

    from perfmodel.measure import suite

    (tmp_path / "results.csv").write_text("old csv\n")
    real = P.write_text

    def failing(self, text, *a, **k):
        if ".decode-model.yaml." in self.name:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, text, *a, **k)

    monkeypatch.setattr(P, "write_text", failing)
    results = {"meta": {}, "cases": []}
    with pytest.raises(SpecError, match="No space left"):
        suite.write(results, tmp_path, {"measured.yaml": "x: 1\n", "decode-model.yaml": "y: 2\n"})
    assert (tmp_path / "results.csv").read_text() == "old csv\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.csv"]


@pytest.mark.parametrize("target, words", [("nodir/x.csv", "does not exist"), (".", "is a folder")])
def test_an_unwritable_sweep_target_is_one_line(capsys, tmp_path, monkeypatch, target, words):
    monkeypatch.chdir(tmp_path)
    if target == ".":
        (tmp_path / "d.csv").mkdir()
        target = "d.csv"
    assert words in one_line(capsys, ["sweep", "--batch", "1,2", "--context", "128", "-o", target])


def test_a_full_disk_during_a_sweep_is_one_line_and_keeps_the_old_file(capsys, tmp_path, monkeypatch):
    from perfmodel import grid

    f = tmp_path / "s.csv"
    f.write_text("old\n")

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(grid, "_csv_bytes", full)
    assert "No space left on device" in one_line(capsys, ["sweep", "--batch", "1,2", "--context", "128", "-o", str(f)])
    assert f.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == ["s.csv"]


@pytest.mark.parametrize("argv", [["plot", "roofline", "-o", "nodir/x.png"],
                                  ["serve-sim", "--requests", "4", "--timeline", "nodir/t.csv"],
                                  ["import-config", "tests/fixtures/hf/llama-2-13b.json", "-o", "nodir/m.yaml"]])
def test_every_file_output_refuses_a_missing_folder_in_one_line(capsys, argv):
    if argv[0] == "import-config" and not Path(argv[1]).exists():
        argv[1] = str(next(Path("tests/fixtures/hf").glob("*.json")))
    assert "nodir" in one_line(capsys, argv)


def test_a_written_file_has_the_permissions_of_the_one_it_replaces(tmp_path):
    f = tmp_path / "s.csv"
    f.write_text("old\n")
    os.chmod(f, 0o640)
    assert main(["sweep", "--batch", "1,2", "--context", "128", "-o", str(f)]) == 0
    assert f.stat().st_mode & 0o777 == 0o640 and f.read_text().startswith("model,hardware")


@pytest.mark.parametrize("argv, words", [
    (["sweep", "--batch", "1:1e12:1", "-o", "x.csv"], "--max-rows"),
    (["sweep", "--batch", "1:1e300:x1.0000001", "-o", "x.csv"], "--max-rows"),
    (["sweep", "--batch", "1:400000000:1", "-o", "x.csv"], "--max-rows"),
    (["sweep", "--batch", "1:1024:1", "--context", "128:1280000:64", "-o", "x.csv"], "--max-rows"),
    (["sweep", "--max-rows", "0"], "--max-rows"),
    (["plan", "--gpus", "1000000000001"], "--gpus"),
    (["generation-cost", "--tokens", "1e12"], "--tokens"),
    (["serve-sim", "--requests", "10000000"], "--max-tokens"),
    (["kv-memory", "--requests", "1000000"], "--max-tokens"),
    (["serve-sim", "--requests", "0"], "--requests"),
    (["kv-memory", "--requests", "0"], "--requests"),
    (["serve-sim", "--max-tokens", "0"], "--max-tokens"),
])
def test_oversized_work_is_refused_up_front_in_one_line_naming_the_limit(capsys, tmp_path, monkeypatch, argv, words):
    monkeypatch.chdir(tmp_path)
    tracemalloc.start()  # refused before the work: a bounded peak (no wall-time assertion: CI machines are loaded)
    line = one_line(capsys, argv)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert words in line and peak < 300e6, (line, peak)
    assert not (tmp_path / "x.csv").exists()


def test_a_model_with_implausibly_many_layers_is_refused(capsys, tmp_path):
    f = tmp_path / "deep.yaml"
    f.write_text("base: llama-2-13b\nname: deep\nn_layers: 100000\n")
    assert "n_layers" in one_line(capsys, ["plan", "-m", str(f)])


def test_the_limits_can_be_raised_and_the_refused_work_then_runs(capsys, tmp_path):
    assert main(["sweep", "--batch", "1:100:1", "--context", "128", "--max-rows", "50", "-o", str(tmp_path / "a.csv")]) == 2
    assert main(["sweep", "--batch", "1:100:1", "--context", "128", "--max-rows", "100", "-o", str(tmp_path / "a.csv")]) == 0
    assert main(["serve-sim", "--requests", "50", "--output-len", "20", "--max-tokens", "99", "--format", "json"]) == 2
    # 2,000 tokens over two runs, and 250 iterations of 8 slots at 20 token-equivalents each: 5,000
    assert main(["serve-sim", "--requests", "50", "--output-len", "20", "--max-tokens", "4999", "--format", "json"]) == 2
    assert main(["serve-sim", "--requests", "50", "--output-len", "20", "--max-tokens", "5000", "--format", "json"]) == 0
    capsys.readouterr()


def test_plan_on_a_billion_devices_answers(capsys):
    assert main(["plan", "--gpus", "1000000000", "--format", "json", "--all"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["tp"] * r["pp"] * r["ep"] * r["replicas"] for r in rows} == {1_000_000_000}


def test_a_sweep_beyond_max_context_warns_as_decode_does(capsys):
    assert main(["sweep", "--batch", "1", "--context", "8192", "--format", "json"]) == 0
    err = capsys.readouterr().err
    assert "warning: beyond max_context" in err and "llama-2-13b --context 8192 > 4096" in err


def test_the_python_sweep_warns_at_the_callers_line():
    import warnings

    import perfmodel as pm
    from perfmodel.errors import ContextWarning

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        pm.sweep("llama-2-13b", "h100-sxm", [1], [8192])
    mine = [x for x in w if issubclass(x.category, ContextWarning)]
    assert mine and mine[0].filename == __file__ and "context=8192 is beyond max_context=4096" in str(mine[0].message)
