"""Signals while the `perfmodel` command starts and after it has finished: one line, exit 128 + the signal,
whatever code the signal lands in.

Each case puts the signal at one exact place, so the checks do not depend on timing: the start-up handler
(perfmodel/interrupts.py) is installed as the console script installs it, then the process signals itself
from inside a library import or inside a block that swallows every exception. bench/bench_interrupts.py
sends signals at random moments of real commands and counts the outcomes (docs/import-and-hardening.md).
"""
from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest

START = """
import os, signal, sys
sys.argv[0] = "perfmodel"  # as the console script starts: perfmodel/__init__.py installs the start-up guard
"""


def run_py(body: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", START + textwrap.dedent(body)], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_inside_a_library_import_is_one_line_not_the_librarys_traceback(sig):
    """A signal raised as an exception surfaced inside numpy's import, which reported a "bad install"
    ImportError traceback; the start-up handler ends the process instead."""
    r = run_py(f"""
        import importlib.abc
        class Hook(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path, target=None):
                if name == "numpy.core.multiarray" or name == "numpy._core.multiarray":
                    os.kill(os.getpid(), {int(sig)})
                return None
        sys.meta_path.insert(0, Hook())
        import perfmodel  # imports numpy (through its public API) after installing the guard
        print("imported")
    """)
    assert r.returncode == 128 + sig, (r.returncode, r.stderr)
    assert r.stderr == f"perfmodel: interrupted by {signal.Signals(sig).name} while starting; nothing was written\n"
    assert "imported" not in r.stdout


def test_a_signal_that_lands_in_code_swallowing_every_exception_still_ends_the_start():
    """The start-up handler used to raise SystemExit, which a `try/except BaseException` in an imported library
    swallowed: the command printed "nothing was written" and then ran on to exit 0."""
    r = run_py("""
        import perfmodel, time
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
        except BaseException:
            pass
        print("ran on")
    """)
    assert r.returncode == 130 and "ran on" not in r.stdout
    assert r.stderr.count("\n") == 1 and "while starting" in r.stderr


def test_a_signal_after_the_work_says_the_outputs_are_in_place():
    """After the command returned, the start-up message ("nothing was written") would be false."""
    r = run_py("""
        import perfmodel
        from perfmodel.interrupts import install_late
        install_late()
        os.kill(os.getpid(), signal.SIGTERM)
        import time; time.sleep(5)
    """)
    assert r.returncode == 143
    assert r.stderr == "perfmodel: interrupted by SIGTERM after its work was done; its output files are in place\n"


def test_the_start_up_guard_is_the_first_thing_perfmodel_loads():
    """Nothing but the guard (and the C signal module) is imported between perfmodel's first line and the guard
    being in place: importing `signal` (enum, re) first would widen the unguarded start."""
    r = run_py("""
        import importlib.abc
        order = []
        class Hook(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path, target=None):
                order.append(name)
                return None
        sys.meta_path.insert(0, Hook())
        import perfmodel
        print(order[:order.index("perfmodel.interrupts") + 1])
        print("numpy" in order)
    """)
    first, numpy_loaded = r.stdout.splitlines()
    before_guard = eval(first)  # noqa: S307 - our own printed list of module names
    assert before_guard[0] == "perfmodel" and set(before_guard[1:-1]) <= {"__future__", "_signal"}, before_guard
    assert numpy_loaded == "True"  # the guard came before the heavy imports, which did run


def test_a_signal_whose_exception_python_could_only_ignore_is_still_one_line():
    """The handler can run inside code whose exceptions Python reports as 'Exception ignored in ...' and drops: an
    at-fork hook (a load run caught logging's _releaseLock as a worker forked), a finalizer, a weakref callback.
    The signal is noted before it is raised, so the run still ends with exit 130 and one line, and the dropped
    exception prints no traceback. A finalizer stands in for the hook, in a process of its own (pytest replaces
    the unraisable hook in its own); the command puts the process's hook back when it ends."""
    r = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import signal, sys
        from perfmodel import api, interrupts
        from perfmodel.cli import main

        class Holder:
            def __del__(self):  # where the handler happened to run: its exception cannot propagate
                interrupts.note(signal.SIGINT)
                raise interrupts.Interrupted(signal.SIGINT)

        real = api.decode

        def decode(*a, **k):
            h = Holder()
            del h
            return real(*a, **k)

        api.decode = decode
        before = sys.unraisablehook
        code = main(["decode", "--batch", "1"])
        assert sys.unraisablehook is before
        sys.exit(code)
        """)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 130, r.stderr
    assert r.stderr.strip().splitlines() == ["perfmodel: interrupted by SIGINT; output files were left as they were "
                                             "before this run"], r.stderr


def test_the_command_s_unraisable_hook_drops_only_interrupts():
    from types import SimpleNamespace

    from perfmodel import interrupts

    seen = []
    hook = interrupts.quiet_unraisable(lambda u: seen.append(u.exc_type))
    hook(SimpleNamespace(exc_type=interrupts.Interrupted, exc_value=None, exc_traceback=None, err_msg=None,
                         object=None))
    hook(SimpleNamespace(exc_type=ValueError, exc_value=None, exc_traceback=None, err_msg=None, object=None))
    hook(SimpleNamespace(exc_type=None, exc_value=None, exc_traceback=None, err_msg=None, object=None))
    assert seen == [ValueError, None]
