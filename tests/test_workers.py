"""Who runs a search does not change its answer (issue 24): capacity's searches split into tasks give the same
DataFrame serially, on local worker processes and on a Dask cluster (a LocalCluster here: the path of
`--cluster ADDRESS`); progress shows on a terminal and nowhere else; bad worker settings are one line."""
import os
import pty
import select
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

import perfmodel as pm
from perfmodel import workers
from perfmodel.cli import main
from perfmodel.errors import SpecError

SMALL = dict(model="llama-3.2-1b", hardware="l4", gpus=2, prompt_len="uniform:32,128",
             output_len="lognormal:median=16,max=64", slots=32, slo_ttft="0.25s", slo_tpot="50ms", requests=600)


def _capacity(**kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pm.capacity(**(SMALL | kw))


@pytest.fixture(scope="module")
def serial():
    return _capacity(workers=1, disaggregate=True)


def _same(a, b):
    assert list(a.columns) == list(b.columns)
    for c in a.columns:
        x, y = a[c].to_numpy(), b[c].to_numpy()
        if x.dtype.kind == "f":
            assert np.array_equal(x, y, equal_nan=True), c  # bit for bit: the same simulations, not similar ones
        else:
            assert list(x) == list(y), c


def test_two_worker_processes_give_the_serial_table_bit_for_bit(serial):
    assert (serial.serving == "disaggregated").any() and (serial.serving == "colocated").sum() == 2
    assert serial.goodput_rps.notna().any()
    _same(serial, _capacity(workers=2, disaggregate=True))


def test_a_dask_cluster_gives_the_serial_table_bit_for_bit(serial):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as lc:
        _same(serial, _capacity(cluster=lc.scheduler_address, disaggregate=True))


def test_the_seeds_after_the_first_search_from_its_answer_whoever_runs_them():
    """The second phase's tasks start at the first seed's answer, as the serial search does: one seed of three gives
    the row's goodput_lo..hi around the median, the same with 1 and 2 workers."""
    a = _capacity(workers=1, gpus=None, tp=1, seeds=3)
    b = _capacity(workers=2, gpus=None, tp=1, seeds=3)
    _same(a, b)
    assert a.goodput_lo_rps[0] <= a.goodput_rps[0] <= a.goodput_hi_rps[0]


def _square(x):
    return x * x


def _fail(x):
    if x == 3:
        raise SpecError("--thing", None, "three is refused")
    return x


def test_results_come_back_in_the_tasks_order_and_a_failing_task_raises_its_error():
    assert workers.run(_square, range(7), workers=2) == [x * x for x in range(7)]
    assert workers.run(_square, range(7), workers=1) == [x * x for x in range(7)]
    with pytest.raises(SpecError, match="three is refused"):
        workers.run(_fail, range(6), workers=2)


@pytest.mark.parametrize("value", ["0", "-2", "x", "1.5", "5000"])
def test_a_bad_worker_count_is_one_line_naming_workers(value, capsys):
    argv = ["capacity", "-m", "llama-3.2-1b", "-H", "l4", "--tp", "1", "--workers", value]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--workers" in err[0], err


@pytest.mark.parametrize("argv", [
    ["capacity", "-m", "llama-3.2-1b", "-H", "l4", "--tp", "1", "--seeds", "1", "--requests", "300"],
    # validate announced its points first, then the error: two lines (a dev-profile fuzz draw found it)
    ["validate", "--serving", "--model", "llama-3.1-8b", "--system", "h200_sxm", "--backend", "vllm", "--mode",
     "roofline"],
    # a sweep of one block runs in this process; it ran there without a word when the scheduler was unreachable
    ["sweep", "-m", "llama-3.2-1b", "-H", "l4", "--batch", "1,2", "--context", "128"]],
    ids=["capacity", "validate", "sweep-of-one-block"])
def test_an_unreachable_cluster_is_one_line_naming_cluster(argv, capsys):
    pytest.importorskip("distributed")
    assert main(argv + ["--cluster", "tcp://127.0.0.1:9"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--cluster" in err[0] and "127.0.0.1:9" in err[0], err


def _pty_run(argv: list, limit: float = 120.0) -> tuple[int, str]:
    """Run the CLI with stdout and stderr on a pseudo-terminal; returns (exit code, everything it drew)."""
    master, slave = pty.openpty()
    env = dict(os.environ, COLUMNS="120", TERM="xterm")
    p = subprocess.Popen([sys.executable, "-m", "perfmodel", *argv], stdin=subprocess.DEVNULL, stdout=slave,
                         stderr=slave, env=env, close_fds=True)
    os.close(slave)
    out, t0 = b"", time.monotonic()
    while time.monotonic() - t0 < limit:
        r, _, _ = select.select([master], [], [], 0.2)
        if r:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        elif p.poll() is not None:
            break
    p.wait(timeout=10)
    os.close(master)
    return p.returncode, out.decode(errors="replace")


def test_a_search_shows_a_progress_bar_on_a_terminal_and_not_in_a_pipe():
    argv = ["capacity", "-m", "llama-3.2-1b", "-H", "l4", "--gpus", "2", "--prompt-len", "uniform:32,128",
            "--output-len", "lognormal:median=16,max=64", "--slots", "32", "--slo-ttft", "0.25s", "--requests", "600",
            "--workers", "1"]
    rc, drawn = _pty_run(argv)
    assert rc == 0, drawn
    assert "capacity: layouts" in drawn and "goodput" in drawn
    piped = subprocess.run([sys.executable, "-m", "perfmodel", *argv], capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0 and piped.stderr == "" and "capacity: layouts" not in piped.stdout


def test_a_sweep_gives_the_same_rows_in_the_same_order_whoever_evaluates_its_blocks(tmp_path):
    kw = dict(models="llama-3.2-1b,qwen3-0.6b", hardware="l4,h100-sxm", batch="1:64:x2", context="128:8192:x2",
              chunk_rows=7)
    a = pm.sweep(**kw, workers=1)
    b = pm.sweep(**kw, workers=2)
    assert len(a) == 2 * 2 * 7 * 7 and a.equals(b)
    outs = []
    for w in (1, 2):
        p = tmp_path / f"s{w}.csv"
        pm.sweep(**kw, workers=w, out=str(p))
        outs.append(p.read_bytes())
    assert outs[0] == outs[1]
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as lc:
        assert a.equals(pm.sweep(**kw, cluster=lc.scheduler_address))


def test_without_the_cluster_extra_cluster_is_one_line_saying_what_to_install(monkeypatch, capsys):
    import sys

    monkeypatch.setitem(sys.modules, "distributed", None)  # what an install without perfmodel[cluster] has
    for argv in (["capacity", "-m", "llama-3.2-1b", "-H", "l4", "--tp", "1", "--seeds", "1", "--requests", "300",
                  "--cluster", "local"],
                 ["sweep", "--batch", "1:8:x2", "--context", "128,256", "--chunk-rows", "2", "--cluster", "local"]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--cluster" in err[0] and "perfmodel[cluster]" in err[0], err


def _die(x):
    import os
    import signal

    if x == 2:
        os.kill(os.getpid(), signal.SIGKILL)  # as the out-of-memory killer ends a process
    return x


def test_a_worker_killed_from_outside_is_one_line_not_a_broken_pool_traceback():
    """The full validate --serving run lost a worker to the out-of-memory killer and printed concurrent.futures'
    BrokenProcessPool traceback."""
    from perfmodel import workers
    from perfmodel.errors import SpecError

    with pytest.raises(SpecError, match="a worker process ended abruptly"):
        workers.run(_die, [0, 1, 2, 3], 2, None, "test", False)


def _sleep(t):
    time.sleep(t)
    return t


def test_a_stopped_pool_s_manager_thread_has_ended_before_the_command_exits():
    """After a Ctrl-C the command stops its pool (workers._stop) and returns: Python 3.11's exit hook then wakes the
    pool's manager thread through a pipe that thread closes as it ends, unlocked, and the race printed an EBADF
    traceback after the one-line message about one run in three. _stop lets that thread end first."""
    import concurrent.futures as cf
    import multiprocessing as mp

    ex = cf.ProcessPoolExecutor(max_workers=2, mp_context=mp.get_context("fork"), initializer=workers._worker_signals)
    futs = [ex.submit(_sleep, 30) for _ in range(4)]
    while not any(f.running() for f in futs):
        time.sleep(0.01)
    manager, procs = ex._executor_manager_thread, list(ex._processes.values())
    workers._stop(ex)
    assert not manager.is_alive()
    for p in procs:
        p.join(5)
        assert not p.is_alive() and p.exitcode is not None and p.exitcode < 0  # terminated, not finished
    assert all(f.done() for f in futs)
    assert not any(not f.cancelled() and f.exception() is None for f in futs)  # no 30 s task ran to its end


def test_stopping_a_pool_whose_manager_thread_was_never_started_is_quiet():
    """A Ctrl-C inside the first submit(), while Python starts the pool's manager thread, left _stop joining a thread
    that had not started: RuntimeError and a traceback after the one-line message (a loaded machine, 1 run in 5).
    Stopping such a pool now returns without error."""
    import concurrent.futures as cf
    import threading

    ex = cf.ProcessPoolExecutor(max_workers=1)
    ex._executor_manager_thread = threading.Thread(target=lambda: None)  # as submit() leaves it when interrupted
    workers._stop(ex)
    assert ex._executor_manager_thread is None or not ex._executor_manager_thread.is_alive()


def test_stopping_a_pool_whose_shutdown_lock_an_interrupted_submit_left_held_ends_it():
    """A Ctrl-C inside submit()'s `with self._shutdown_lock:` can leave the lock held (CPython bpo-29988); then
    shutdown() and the pool's manager thread would wait on it for ever. _stop takes the lock back and ends the
    pool: its workers terminated, its manager thread ended, every task done."""
    import concurrent.futures as cf
    import multiprocessing as mp

    ex = cf.ProcessPoolExecutor(max_workers=2, mp_context=mp.get_context("fork"), initializer=workers._worker_signals)
    futs = [ex.submit(_sleep, 30) for _ in range(4)]
    while not any(f.running() for f in futs):
        time.sleep(0.01)
    manager = ex._executor_manager_thread
    ex._shutdown_lock.acquire()  # as the interrupted submit() leaves it
    workers._stop(ex)
    assert not manager.is_alive() and all(f.done() for f in futs)
    assert ex._shutdown_lock.acquire(timeout=1)  # free again
    ex._shutdown_lock.release()


def test_ctrl_c_during_a_parallel_run_is_one_line_and_exit_130_every_time(tmp_path):
    """The command's side: five two-worker runs, each interrupted a second after its pool started working: the
    announcement, then one line on stderr, exit 130, no output file."""
    import signal
    from pathlib import Path

    exe = Path(sys.executable).with_name("perfmodel")  # the console script, as a user runs it
    for _ in range(5):
        p = subprocess.Popen([str(exe), "validate", "--serving", "--max-points", "20000", "--workers", "2", "-o",
                              str(tmp_path / "p.csv")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)  # its own group: a run that ignores the signal is killed whole
        first = p.stderr.readline()  # "perfmodel: predicting N measured serving points ...": the pool is next
        time.sleep(1.0)
        p.send_signal(signal.SIGINT)
        try:
            out, err = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)  # the command and its workers, not left computing behind the suite
            out, err = p.communicate()
            pytest.fail(f"no exit 60 s after SIGINT: {err}")
        assert first.startswith("perfmodel: predicting") and p.returncode == 130, first + err
        assert err.strip().splitlines() == ["perfmodel: interrupted by SIGINT; output files were left as they were "
                                            "before this run"], err
        assert not (tmp_path / "p.csv").exists()


@pytest.mark.parametrize("rc, hard", [(130, True), (143, True), (0, False), (2, False)])
def test_an_interrupted_run_ends_past_the_exit_hooks_that_could_wait_on_a_pool_for_ever(monkeypatch, rc, hard):
    """concurrent.futures' exit hook joins every pool's manager thread with no timeout: after a Ctrl-C (130) or a
    SIGTERM (143) the console script ends with os._exit, its output flushed; any other end goes through sys.exit."""
    import importlib

    cli_main = importlib.import_module("perfmodel.cli.main")  # the module (perfmodel.cli.main is also its function)
    ended = []
    monkeypatch.setattr(cli_main, "main", lambda: rc)
    monkeypatch.setattr(cli_main.interrupts, "install_late", lambda: None)
    monkeypatch.setattr(os, "_exit", lambda code: (ended.append(("os._exit", code)), sys.exit(code))[1])
    with pytest.raises(SystemExit) as e:
        cli_main.run()
    assert e.value.code == rc and (ended == [("os._exit", rc)]) == hard and (ended == []) != hard


def _swallowing_handler():
    """cli/main.py's SIGINT handler run where Python drops its exception (a finalizer, a weakref callback): what
    happened to one Ctrl-C under load, whose run kept computing (gdb: main thread in as_completed)."""
    from perfmodel.cli.main import _raise

    def handler(signum, frame):
        try:
            _raise(signum, frame)
        except BaseException:  # noqa: BLE001 - dropped, as Python drops an exception raised inside __del__
            pass

    return handler


@pytest.mark.parametrize("n", [1, 2], ids=["serially", "on two workers"])
def test_a_ctrl_c_whose_exception_was_lost_still_ends_the_run_at_the_next_task_or_wait(n):
    """The handler notes the signal before raising it; the task loop and the waits on workers look at the note, so
    the run ends with Interrupted after the task that saw the signal instead of computing the other 19."""
    import signal

    from perfmodel import interrupts

    done = []

    def each(i, r):
        done.append(i)
        if len(done) == 1:
            os.kill(os.getpid(), signal.SIGINT)  # the handler runs here, in the main thread, and its error is lost

    old = signal.signal(signal.SIGINT, _swallowing_handler())
    try:
        with pytest.raises(interrupts.Interrupted) as e:
            workers.run(_sleep, [0.05] * 20, n, None, "test", False, each=each)
    finally:
        signal.signal(signal.SIGINT, old)
        interrupts.clear()
    assert e.value.signum == signal.SIGINT and len(done) < 20, done


def test_a_ctrl_c_whose_exception_was_lost_ends_a_streamed_run_too():
    """workers.imap (a sweep's blocks) waits on each result in slices and looks at the note between them."""
    import signal

    from perfmodel import interrupts

    old = signal.signal(signal.SIGINT, _swallowing_handler())
    got = []
    try:
        with pytest.raises(interrupts.Interrupted):
            for r in workers.imap(_sleep, [0.05] * 40, 2):
                got.append(r)
                if len(got) == 1:
                    os.kill(os.getpid(), signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, old)
        interrupts.clear()
    assert len(got) < 40


def test_a_command_whose_ctrl_c_was_lost_still_exits_130_not_0(monkeypatch, capsys):
    """Even where nothing waited on workers, a noted signal ends the command as interrupted (exit 130 and the one
    line), not as a success whose output the user stopped."""
    import importlib

    from perfmodel import interrupts

    climain = importlib.import_module("perfmodel.cli.main")  # the module, not the function perfmodel.cli exports
    argv = ["decode", "-m", "llama-3.1-8b", "-H", "h100-sxm", "--batch", "1"]
    assert main(argv) == 0
    capsys.readouterr()
    command = climain._command()
    orig = command.main

    def lost(*a, **k):
        interrupts.note(2)  # SIGINT's handler ran during the command and its exception was dropped
        return orig(*a, **k)

    monkeypatch.setattr(command, "main", lost)
    assert main(argv) == 130
    assert "interrupted by SIGINT" in capsys.readouterr().err
    assert interrupts.pending == 0  # cleared for the next in-process call


def test_a_ctrl_c_whose_exception_was_lost_ends_a_run_on_a_dask_cluster_too():
    """--cluster: the wait on the cluster's futures is in slices as well, and looks at the note between them."""
    pytest.importorskip("distributed")
    import signal

    from perfmodel import interrupts

    done = []

    def each(i, r):
        done.append(i)
        if len(done) == 1:
            os.kill(os.getpid(), signal.SIGINT)

    old = signal.signal(signal.SIGINT, _swallowing_handler())
    try:
        with pytest.raises(interrupts.Interrupted):
            workers.run(_sleep, [0.05] * 40, 2, "local", "test", False, each=each)
    finally:
        signal.signal(signal.SIGINT, old)
        interrupts.clear()
    assert len(done) < 40, done
