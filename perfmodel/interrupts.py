"""SIGINT and SIGTERM in the `perfmodel` command: exit 128 + the signal's number with one line on stderr.

The command installs these before its heavy imports (perfmodel/__init__.py, when the program is the
`perfmodel` console script), so a Ctrl-C while it starts is one line and exit 130 too, never a traceback;
cli/main.py then replaces them with handlers that unwind (temporary files are removed on the way out).
Nothing here runs for `import perfmodel` in a notebook or a script."""
from __future__ import annotations

import signal
import sys


def _early(signum, frame):
    sys.stderr.write(f"perfmodel: interrupted by {signal.Signals(signum).name} while starting; nothing was written\n")
    raise SystemExit(128 + signum)


def install_early() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            signal.signal(sig, _early)
        except (ValueError, OSError):  # not the main thread
            pass
