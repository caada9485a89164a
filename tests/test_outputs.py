"""Output paths are safe (issue 26): an atomic write is for regular files. A device, FIFO or a link to one is
written in place and never replaced by a regular file; a link to a file keeps being a link, with its target
replaced whole; a full device is one line naming the option."""
import os
import stat
import threading

import pytest

from perfmodel.cli import main

SERVE = ["serve-sim", "--requests", "8", "--slots", "4", "--policy", "continuous"]


def _is_char_device(path) -> bool:
    return stat.S_ISCHR(os.stat(path).st_mode)


def test_writing_to_dev_null_keeps_it_a_device(capsys):
    assert main([*SERVE, "--timeline", "/dev/null"]) == 0
    assert _is_char_device("/dev/null")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
def test_a_full_device_is_one_line_naming_the_option(capsys):
    assert main([*SERVE, "--timeline", "/dev/full"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--timeline" in err[0] and "/dev/full" in err[0], err
    assert _is_char_device("/dev/full")


def test_a_fifo_receives_the_output_and_stays_a_fifo(tmp_path):
    fifo = tmp_path / "timeline.csv"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()))
    reader.start()
    assert main([*SERVE, "--timeline", str(fifo)]) == 0
    reader.join(timeout=30)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert got and got[0].count(b"\n") > 2  # the header and the iterations came through the FIFO


def test_a_link_to_a_file_stays_a_link_and_its_target_is_replaced_whole(tmp_path):
    target, link = tmp_path / "real.csv", tmp_path / "link.csv"
    target.write_text("old\n")
    link.symlink_to(target)
    assert main([*SERVE, "--timeline", str(link)]) == 0
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text().count("\n") > 2 and "old" not in target.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.csv", "real.csv"]  # no temporary file left


def test_a_link_to_a_device_writes_to_the_device(tmp_path):
    link = tmp_path / "out.csv"
    link.symlink_to("/dev/null")
    assert main([*SERVE, "--timeline", str(link)]) == 0
    assert link.is_symlink() and _is_char_device("/dev/null")


def test_a_dangling_link_creates_its_target_and_stays_a_link(tmp_path):
    target, link = tmp_path / "new.csv", tmp_path / "link.csv"
    link.symlink_to(target)
    assert main([*SERVE, "--timeline", str(link)]) == 0
    assert link.is_symlink() and target.is_file() and target.read_text().count("\n") > 2


# ---------------------------------------------------------------- inputs bounded before work starts (issue 26)
@pytest.mark.parametrize("argv,opt", [
    (["capacity", "-m", "llama-3.2-1b", "-H", "l4", "--tp", "1", "--token-budget", "1e9"], "--token-budget"),
    (["capacity", "-m", "llama-3.2-1b", "-H", "l4", "--tp", "1", "--seeds", "1e15"], "--seeds"),
    (["capacity", "-m", "llama-3.2-1b", "-H", "l4", "--tp", "1", "--replicas", "10" * 15], "--replicas"),
    (["decode", "--replicas", "9" * 30], "--replicas"),
    (["serve-sim", "--slots", "1", "--requests", "10000", "--output-len", "200"], "--slots"),
    (["validate", "/dev/zero"], "/dev/zero"),
    (["validate", "--published", "--cases", "/dev/zero"], "/dev/zero"),
    (["serve-sim", "--trace", "/dev/zero"], "/dev/zero"),
    (["kv-memory", "--trace", "/dev/zero"], "/dev/zero"),
])
def test_an_input_that_scales_the_work_is_refused_up_front_in_one_line(argv, opt, capsys):
    assert main(argv) == 2  # the refusals come before any simulation or read
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and opt in err[0], err


def test_a_trace_given_as_a_fifo_is_refused_instead_of_waiting_for_a_writer(tmp_path, capsys):
    fifo = tmp_path / "trace.csv"
    os.mkfifo(fifo)
    assert main(["serve-sim", "--trace", str(fifo)]) == 2
    assert "not a regular file" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["sweep", "--batch", "1:2000:1", "--context", "128:4096:x2"], ["list"],
                                  ["capacity", "-m", "llama-3.2-1b", "-H", "h100-sxm", "--tp", "1", "--prompt-len", "64",
                                   "--output-len", "16", "--requests", "300", "--seeds", "1", "--format", "csv", "--all"]])
def test_a_reader_that_closes_the_pipe_early_is_a_normal_end(argv):
    """`perfmodel ... | head -1`: exit 0 and nothing on stderr but the result's own warnings (it was exit 1, silently:
    click's EPIPE handler)."""
    import subprocess
    import sys

    p = subprocess.Popen([sys.executable, "-m", "perfmodel", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.readline()
    p.stdout.close()  # what `head -1` does after its line
    err = p.stderr.read()
    assert p.wait(timeout=120) == 0, err
    assert all(line.startswith(b"perfmodel: warning:") for line in err.splitlines()), err


def test_a_signal_after_an_output_is_written_says_that_it_was_written(tmp_path, monkeypatch, capsys):
    """Ctrl-C between writing --timeline and printing the table: the message names the file written whole (it said
    'output files were left as they were' while the new file was in place); before any write it says nothing was
    changed."""
    import signal

    from perfmodel.cli import main as climain, serving as cliserving

    mainmod = __import__("importlib").import_module("perfmodel.cli.main")

    def interrupt(text):
        raise mainmod.Interrupted(signal.SIGINT)

    monkeypatch.setattr(cliserving, "_out", interrupt)
    out = tmp_path / "timeline.csv"
    assert climain([*SERVE, "--timeline", str(out)]) == 130
    err = capsys.readouterr().err
    assert out.is_file() and str(out) in err and "written whole" in err, err
    monkeypatch.setattr(cliserving.serving, "serve_runs", lambda *a, **k: interrupt(""))
    assert climain([*SERVE, "--timeline", str(tmp_path / "other.csv")]) == 130
    err = capsys.readouterr().err
    assert "left as they were before this run" in err and not (tmp_path / "other.csv").exists(), err


def test_the_point_limit_holds_over_every_model_and_hardware_together_and_duplicates_count_once(capsys):
    import perfmodel as pm

    batch = list(range(1, 1001))  # 1,000 x 1,000 = the limit for one pair
    with pytest.raises(pm.SpecError, match="model-hardware pairs"):
        pm.decode("llama-3.2-1b,qwen3-0.6b", "l4", batch=batch, context=list(range(1, 1001)))
    assert main(["decode", "-m", ",".join(["llama-3.2-1b"] * 50), "-H", "l4,h100-sxm", "--batch", "1,2", "--format", "csv"]) == 0
    rows = capsys.readouterr().out.strip().splitlines()[1:]
    assert len(rows) == 2 * 2  # one model (named 50 times), two devices, two batches
    assert main(["decode", "-m", ",".join(["llama-3.2-1b"] * 3 + [f"m{i}" for i in range(1001)])]) == 2
    assert "at most 1,000" in capsys.readouterr().err
