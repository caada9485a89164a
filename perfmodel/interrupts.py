"""SIGINT and SIGTERM in the `perfmodel` command: exit 128 + the signal's number with one line on stderr.

The command installs these before its heavy imports (perfmodel/__init__.py, when the program is the
`perfmodel` console script), so a Ctrl-C while it starts is one line and exit 130 too, never a traceback;
cli/main.py then replaces them with handlers that unwind (temporary files are removed on the way out), and
the console script puts the late ones in place once the work is done. Nothing here runs for
`import perfmodel` in a notebook or a script.

The early and late handlers end the process at once (os._exit) instead of raising: an exception raised in a
signal handler surfaces inside whatever code was running, and during start-up that is some library's import
(numpy turned it into a "bad install" ImportError traceback) or a `try/except BaseException` that swallowed
it and ran on to exit 0. Nothing is open for writing at either time, so nothing is lost by not unwinding."""
from __future__ import annotations

import os

import _signal  # the C module: `signal` would import enum and re first, widening the unguarded start

_NAMES = {_signal.SIGINT: "SIGINT", _signal.SIGTERM: "SIGTERM"}


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived while the command worked (cli/main.py's handlers raise it). A BaseException
    that is not KeyboardInterrupt, so that click passes it through unchanged (it turns KeyboardInterrupt into
    Abort) and no `except Exception` swallows it."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


pending = 0  # the signal that was raised as Interrupted and has not ended the command yet (0: none)


def note(signum: int) -> None:
    """Remember a signal before raising it: a handler's exception can be lost where the handler happened to
    run (inside a finalizer or a weakref callback, whose exceptions Python prints as 'ignored' and drops; one
    run under load kept computing after its Ctrl-C), and long waits look here (raise_pending) as well."""
    global pending
    pending = signum


def clear() -> None:
    global pending
    pending = 0


def quiet_unraisable(hook):
    """sys.unraisablehook for the command's run: an Interrupted that Python could only report as 'Exception
    ignored in ...' (the handler ran inside an at-fork hook, a finalizer or a weakref callback; a load run caught
    logging's _releaseLock after a worker's fork) is dropped without a traceback, since `pending` still ends the
    run as one line; anything else goes to `hook`."""
    def _hook(u):
        if u.exc_type is not None and issubclass(u.exc_type, Interrupted):
            return
        hook(u)
    return _hook


def raise_pending() -> None:
    """Raise Interrupted again if a signal arrived and its exception was lost on the way (see note)."""
    if pending:
        raise Interrupted(pending)


def _say_and_exit(signum: int, when: str) -> None:
    try:
        os.write(2, f"perfmodel: interrupted by {_NAMES.get(signum, signum)} {when}\n".encode())
    finally:
        os._exit(128 + signum)


def _early(signum, frame):
    _say_and_exit(signum, "while starting; nothing was written")


def _late(signum, frame):
    _say_and_exit(signum, "after its work was done; its output files are in place")


def install_late() -> None:
    """After the command returned: a signal while stdout is flushed ends it at once, saying the files stand."""
    for sig in _NAMES:
        try:
            _signal.signal(sig, _late)
        except (ValueError, OSError):
            pass


def install_early() -> None:
    for sig in _NAMES:
        try:
            _signal.signal(sig, _early)
        except (ValueError, OSError):  # not the main thread
            pass
