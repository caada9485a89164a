"""The entry point: runs the app, turning every bad-input path into one line and exit code 2."""
from __future__ import annotations

import importlib
import sys
import warnings
from typing import Optional

import numpy as np

from ..errors import ContextWarning, DataWarning, SpecError
from .common import app


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
        code = _main(argv)
    mine = [w for w in caught if issubclass(w.category, ContextWarning)]
    data = [w for w in caught if issubclass(w.category, DataWarning)]
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


def _main(argv: Optional[list] = None) -> int:
    no_args, usage, abort, exit_ = _click_errors()
    try:
        with np.errstate(over="raise", invalid="raise", divide="raise"):  # a non-finite result is an error
            app(args=argv, prog_name="perfmodel", standalone_mode=False)
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
    except abort:
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
    except BrokenPipeError:
        return 0
    return 0


def run() -> None:
    sys.exit(main())

