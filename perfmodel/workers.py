"""Independent tasks run in this process, on local worker processes or on a Dask cluster, with the same results.

A task is a picklable module-level function and its argument; the results come back in the tasks' order
whatever ran them, so a search split into tasks gives the same table serially (workers=1), with N local
processes (concurrent.futures, fork where the platform has it) and on a Dask distributed cluster
(`cluster="tcp://host:8786"`, or "local" for a LocalCluster on this machine; the optional extra
`perfmodel[cluster]`). The tasks' code must not depend on what ran before it in the same process
(fastsim's step-cost tables are built the same whatever their history, tests/test_workers.py checks it).

Progress: a rich progress bar on stderr (tasks done, elapsed, time left), only when stderr is a terminal
and the caller does not turn it off (JSON output, pipes and tests stay clean).
"""
from __future__ import annotations

import os
import sys
import time

from . import interrupts
from .errors import SpecError

_POLL = 0.25  # s: how often a wait on workers looks for a signal whose exception was lost (interrupts.note)


def cores() -> int:
    """Cores this process may run on (the scheduler's affinity where the platform tells it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def check(workers=None, cluster=None, opt: str = "--workers") -> tuple[int, str | None]:
    """(workers, cluster address): workers None -> the cores; a whole number >= 1, at most 1,024."""
    if workers is None:
        n = cores()
    else:
        try:
            n = int(str(workers).strip()) if not isinstance(workers, bool) else -1
        except ValueError:
            n = -1
        if not 1 <= n <= 1024:
            raise SpecError(opt, None, f"must be a whole number of worker processes from 1 to 1,024, got {workers!r}")
    if cluster is not None:
        cluster = str(cluster).strip()
        if not cluster:
            raise SpecError("--cluster", None, "give a Dask scheduler address (tcp://host:8786) or 'local'")
    return n, cluster


class _Progress:
    """A rich progress bar on stderr when it is a terminal and `show` allows; else nothing."""

    def __init__(self, total: int, label: str, show):
        self.bar, self.each = None, None
        if not show or not sys.stderr.isatty() or total < 2:
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
            TimeRemainingColumn

        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            TextColumn("left"), TimeRemainingColumn(), console=Console(stderr=True), transient=True)
        self.bar.start()
        self.task = self.bar.add_task(label or "tasks", total=total)

    def advance(self, i: int, result) -> None:
        if self.each is not None:
            self.each(i, result)
        if self.bar is not None:
            self.bar.advance(self.task)

    def set(self, done: int) -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=done)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


def run(fn, tasks: list, workers=None, cluster=None, label: str = "", show: bool = False, each=None) -> list:
    """[fn(t) for t in tasks], in order: serially when workers == 1 or there is one task, else on min(workers,
    tasks) local processes, or on the Dask cluster at `cluster`. An exception in a task is raised here.
    show: a progress bar on stderr, if it is a terminal; each(i, result): called here as task i finishes."""
    tasks = list(tasks)
    n, cluster = check(workers, cluster)
    bar = _Progress(len(tasks), label, show)
    bar.each = each
    t0 = time.perf_counter()
    try:
        if cluster is not None:
            return _dask(fn, tasks, n, cluster, bar)
        if n == 1 or len(tasks) <= 1:
            out = []
            for i, t in enumerate(tasks):
                out.append(fn(t))
                interrupts.raise_pending()
                bar.advance(i, out[-1])
            return out
        return _local(fn, tasks, min(n, len(tasks)), bar)
    finally:
        bar.close()
        run.last_seconds = time.perf_counter() - t0


run.last_seconds = 0.0


def _worker_signals() -> None:
    """A worker leaves Ctrl-C to the command (which stops it) and dies on SIGTERM: the command's own handlers,
    inherited through fork, would turn a signal into an exception and the worker would take the next task."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _stop(ex) -> None:
    """End a process pool now: terminate its workers, cancel what waits, and let its manager thread finish (at most
    5 s). Python 3.11's exit hook wakes every pool's manager thread through a pipe that thread closes as it ends,
    without a lock: after a Ctrl-C the two raced and printed an OSError traceback (EBADF) after the one-line
    message, about one run in three. A Ctrl-C can also land while the first submit() is starting that thread
    (inside Thread.start, waiting for it to run): then it is given 1 s to start before it is joined, and one that
    never started is not joined (join() would raise and print a traceback after the message). A Ctrl-C inside
    submit()'s `with self._shutdown_lock:` can leave that lock held (CPython bpo-29988), and shutdown() and the
    manager thread would then wait on it for ever: the lock is released when it cannot be taken in 1 s."""
    manager = getattr(ex, "_executor_manager_thread", None)
    for p in list((getattr(ex, "_processes", None) or {}).values()):
        p.terminate()
    lock = getattr(ex, "_shutdown_lock", None)
    if lock is not None:  # a Ctrl-C inside submit()'s `with self._shutdown_lock:` can leave it held (CPython
        # bpo-29988), and then shutdown() and the manager thread wait on it for ever: take it back
        if not lock.acquire(timeout=1.0):
            lock.release()
        else:
            lock.release()
    ex.shutdown(wait=False, cancel_futures=True)
    if manager is not None:
        started = getattr(manager, "_started", None)  # threading.Thread's own event: set once the thread runs
        if started is not None and not started.is_set():
            started.wait(timeout=1.0)
        if manager.ident is not None:
            manager.join(timeout=5)


def _local(fn, tasks: list, n: int, bar: _Progress) -> list:
    import concurrent.futures as cf
    import multiprocessing as mp

    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    ex = cf.ProcessPoolExecutor(max_workers=n, mp_context=ctx, initializer=_worker_signals)
    try:
        futs = [ex.submit(fn, t) for t in tasks]
        index = {f: i for i, f in enumerate(futs)}
        waiting = set(futs)
        while waiting:  # cf.wait in slices, not as_completed: a Ctrl-C whose exception was lost still ends it
            done, waiting = cf.wait(waiting, timeout=_POLL, return_when=cf.FIRST_COMPLETED)
            interrupts.raise_pending()
            for f in sorted(done, key=index.__getitem__):
                bar.advance(index[f], f.result())  # the first failure ends the run
        out = [f.result() for f in futs]
    except cf.process.BrokenProcessPool:  # a worker killed from outside (the kernel's out-of-memory killer, kill -9)
        _stop(ex)
        raise SpecError("--workers", None, f"a worker process ended abruptly ({sum(f.done() for f in futs)} of "
                                           f"{len(futs)} tasks had ended): killed from outside, most often by the "
                                           "system for want of memory; run fewer workers or less work") from None
    except BaseException:  # Ctrl-C or a failed task: nothing keeps running behind the message
        _stop(ex)
        raise
    ex.shutdown()
    return out


def _dask(fn, tasks: list, n: int, address: str, bar: _Progress) -> list:
    client, local = _client(address, n)  # first: one line when distributed is not installed
    from distributed import wait

    try:
        futs = client.map(fn, tasks, pure=False)
        index = {f.key: i for i, f in enumerate(futs)}
        waiting = list(futs)
        while waiting:  # in slices, as _local: a Ctrl-C whose exception was lost still ends it
            try:
                done, rest = wait(waiting, timeout=_POLL, return_when="FIRST_COMPLETED")
            except TimeoutError:
                done, rest = (), waiting
            interrupts.raise_pending()
            for f in sorted(done, key=lambda f: index[f.key]):
                bar.advance(index[f.key], f.result())  # the first failure ends the run
            waiting = list(rest)
        return client.gather(futs)
    finally:
        client.close()
        if local is not None:
            local.close()

def imap(fn, tasks, workers=None, cluster=None, window: int | None = None):
    """fn(t) for t in tasks, yielded in order as they finish, with at most `window` tasks in flight (default 2 x
    workers): for a stream of large results (a sweep's blocks) that must not all be held at once."""
    n, cluster = check(workers, cluster)
    tasks = iter(tasks)
    if cluster is None and n == 1:
        for t in tasks:
            yield fn(t)
        return
    window = max(1, window or 2 * n)
    from collections import deque

    pending: deque = deque()
    if cluster is not None:
        client, local = _client(cluster, n)
        submit = lambda t: client.submit(fn, t, pure=False)  # noqa: E731
        close = lambda: (client.close(), local.close() if local is not None else None)  # noqa: E731
    else:
        import concurrent.futures as cf
        import multiprocessing as mp

        ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
        ex = cf.ProcessPoolExecutor(max_workers=n, mp_context=ctx, initializer=_worker_signals)
        submit = lambda t: ex.submit(fn, t)  # noqa: E731

        def close():
            _stop(ex)
    def result(f):
        while True:  # in slices: a Ctrl-C whose exception was lost still ends it (interrupts.note)
            interrupts.raise_pending()
            try:
                return f.result(timeout=_POLL)
            except TimeoutError:
                pass

    try:
        for t in tasks:
            pending.append(submit(t))
            if len(pending) >= window:
                yield result(pending.popleft())
        while pending:
            yield result(pending.popleft())
    finally:
        for f in pending:
            f.cancel()
        close()


def probe(cluster: str | None) -> None:
    """Connect to a remote scheduler and close: one SpecError line, before a command announces its work, when it
    cannot be reached ('local' is started where it is used: starting it twice would cost seconds)."""
    if cluster is None or cluster == "local":
        return
    client, _ = _client(cluster, 1)
    client.close()


def _client(address: str, n: int):
    """(Client, LocalCluster or None) for a scheduler address or 'local'; one SpecError line when unreachable."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise SpecError("--cluster", None, "needs Dask distributed: pip install 'perfmodel[cluster]'") from None
    local = None
    try:
        if address == "local":
            local = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None)
            return Client(local), local
        return Client(address, timeout="10s"), None
    except Exception as e:  # noqa: BLE001 - any failure to connect (refused, timed out, a loop thread that did not
        # start in Dask's 10 s on a loaded machine: an AssertionError inside distributed) is this one line
        if local is not None:
            local.close()
        why = str(e) or type(e).__name__
        raise SpecError("--cluster", None, f"cannot reach a Dask scheduler at {address!r}: {why}") from None
