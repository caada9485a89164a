"""The entry point: runs the app, turning every bad-input path into one line and exit code 2."""
from __future__ import annotations

import importlib
import signal
import sys
import warnings
from typing import Optional

import numpy as np

from .. import interrupts
from ..errors import ContextWarning, DataWarning, LoadWarning, SpecError
from ..interrupts import Interrupted
from .common import PipeClosed, app


def _click_errors():
    """Typer >= 0.26 vendors click as typer._click; older typer uses click itself. Catch both."""
    mods = []
    for name in ("typer._click.exceptions", "click.exceptions"):
        try:
            mods.append(importlib.import_module(name))
        except ImportError:
            pass
    get = lambda attr: tuple(getattr(m, attr) for m in mods if hasattr(m, attr))  # noqa: E731
    return get("NoArgsIsHelpError"), get("UsageError"), get("Abort"), get("Exit")


def main(argv: Optional[list] = None) -> int:
    """Entry point: runs the app, turning every bad-input path into one line and exit code 2.
    A context beyond a model's max_context adds one `perfmodel: warning:` line to a result."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ContextWarning)
        warnings.simplefilter("always", DataWarning)
        warnings.simplefilter("always", LoadWarning)
        code = _main(argv)
    mine = [w for w in caught if issubclass(w.category, ContextWarning)]
    data = [w for w in caught if issubclass(w.category, (DataWarning, LoadWarning))]
    for w in caught:
        if w not in mine and w not in data:  # other warnings pass through unchanged
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if code == 0 and mine:
        sys.stderr.write("perfmodel: warning: beyond max_context (computed anyway; the model was not trained this "
                         f"long): {'; '.join(dict.fromkeys(str(w.message) for w in mine))}\n")
    if code == 0:
        for text in dict.fromkeys(str(w.message) for w in data):
            sys.stderr.write(f"perfmodel: warning: {text}\n")
    return code


def _raise(signum, frame):
    interrupts.note(signum)  # kept where workers' waits look, should this exception be lost (perfmodel/interrupts.py)
    raise Interrupted(signum)


def _handlers() -> dict:
    """SIGINT and SIGTERM raise Interrupted, even where the parent started us with them ignored (a
    background job of a non-interactive shell has SIGINT ignored). Off the main thread: none."""
    old = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            old[sig] = signal.signal(sig, _raise)
        except (ValueError, OSError):  # not the main thread, or no such signal here
            pass
    return old


def _interrupted(signum: int) -> int:
    name = signal.Signals(signum).name
    fileio = sys.modules.get("perfmodel.fileio")
    done = list(dict.fromkeys(fileio.WRITTEN)) if fileio is not None else []
    if done:  # the signal came after some outputs were in place: say which, and that nothing else changed
        sys.stderr.write(f"perfmodel: interrupted by {name}; {', '.join(done)} had been written whole before it; "
                         "other output files were left as they were\n")
    else:
        sys.stderr.write(f"perfmodel: interrupted by {name}; output files were left as they were before this run\n")
    return 128 + signum  # the shell's convention: 130 for SIGINT, 143 for SIGTERM


def _main(argv: Optional[list] = None) -> int:
    fileio = sys.modules.get("perfmodel.fileio")
    if fileio is not None:
        fileio.WRITTEN.clear()  # this run's outputs only
    interrupts.clear()
    old = _handlers()
    hook = sys.unraisablehook
    sys.unraisablehook = interrupts.quiet_unraisable(hook)  # a lost Interrupted is not a traceback
    try:
        return _run(argv)
    except Interrupted as e:  # arrived outside the app (while printing, or unwinding)
        return _interrupted(e.signum)
    finally:
        interrupts.clear()
        sys.unraisablehook = hook
        for sig, h in old.items():
            signal.signal(sig, h)


_COMMAND: list = []


def _command():
    """The click command typer builds from the app, built once per process: typer rebuilds it on every
    app() call, which was most of an in-process call's time (tests call main() thousands of times)."""
    if not _COMMAND:
        import typer.main

        _COMMAND.append(typer.main.get_command(app))
    return _COMMAND[0]


def _run(argv: Optional[list] = None) -> int:
    no_args, usage, abort, exit_ = _click_errors()
    try:
        with np.errstate(over="raise", invalid="raise", divide="raise"):  # a non-finite result is an error
            rv = _command().main(args=argv, prog_name="perfmodel", standalone_mode=False)
        interrupts.raise_pending()  # a signal whose exception was lost on the way still ends the run as one
        if rv == 130:  # typer's answer to a KeyboardInterrupt it caught itself
            return _interrupted(signal.SIGINT)
        if isinstance(rv, int) and not isinstance(rv, bool) and rv:  # a command's ctx.exit(n)
            return rv
    except SpecError as e:
        sys.stderr.write(f"perfmodel: error: {e}\n")
        return 2
    except no_args as e:  # bare `perfmodel`: the help text
        sys.stdout.write(e.ctx.get_help() + "\n")
        return 0
    except usage as e:
        msg = " ".join(e.format_message().split())  # one line
        sys.stderr.write(f"perfmodel: error: {msg}\n")
        return 2
    except Interrupted as e:
        return _interrupted(e.signum)
    except KeyboardInterrupt:
        return _interrupted(signal.SIGINT)
    except abort as e:  # click turns a KeyboardInterrupt (and EOF at a prompt) into Abort
        if isinstance(e.__context__, KeyboardInterrupt) or isinstance(e.__cause__, KeyboardInterrupt):
            return _interrupted(signal.SIGINT)
        sys.stderr.write("perfmodel: aborted\n")
        return 1
    except exit_ as e:
        return e.exit_code
    except FloatingPointError as e:
        sys.stderr.write(f"perfmodel: error: a result is not finite in float64 ({e}); an input is out of range\n")
        return 2
    except (ValueError, OverflowError, ZeroDivisionError) as e:  # a value the engine rejects
        from ..errors import _one_line

        sys.stderr.write(f"perfmodel: error: {_one_line(e)}\n")
        return 2
    except (BrokenPipeError, PipeClosed):
        _quiet_stdout()
        return 0
    return 0


def _quiet_stdout() -> None:
    """The reader of our stdout went away (`| head`): a normal end. What is still buffered goes nowhere, so
    that the flush at exit neither fails nor prints 'Exception ignored'."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor (a captured stdout): nothing to silence
        pass


def run() -> None:
    rc = main()
    interrupts.install_late()  # not the start-up handlers main() restored: the work is done by now
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # the last buffered output met a closed pipe: still a normal end
        _quiet_stdout()
    if rc in (128 + signal.SIGINT, 128 + signal.SIGTERM):
        _end_now(rc)
    sys.exit(rc)


def _end_now(rc: int) -> None:
    """The end of an interrupted run, past the interpreter's exit hooks. Those join every process pool's manager
    thread with no timeout (concurrent.futures' _python_exit), and one that a terminated worker left waiting never
    returns: a clean-clone CI run printed the one line and then hung until killed 60 s later. What the run owns was
    stopped while it unwound (workers._stop, the Dask client's finally, atomic_path's finally), so it ends now."""
    import os

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more to say anyway
            pass
    os._exit(rc)

