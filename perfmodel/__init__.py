"""perfmodel: an analytical performance calculator for LLM inference.

    >>> import perfmodel as pm
    >>> df = pm.decode("llama-2-13b", "h100-sxm", batch=[1, 64], context=1024)
    >>> list(df.batch), df.latency_s.round(5).tolist()
    ([1, 64], [0.00793, 0.02402])

What the functions return:

- **One point, fast**: point returns a dict of Python numbers (about 0.2 ms; the same numbers as decode).
- **Queries** return a pandas DataFrame, one row per point, columns in SI units (seconds, bytes,
  tokens/s, FLOPs) and counts as integers: decode, prefill, request, intensity, kv, budget, show,
  list_specs, compare, formats, weights, speculative, plan, sweep, serve_sim, kv_memory, capacity,
  validation and published_validation. ``pm.human(df)`` (or ``df.pm.human()``) shows one in human units.
- **Specs**: load_model and load_hardware return Model and Hardware objects that code can edit
  (``.replace(n_kv_heads=8)``) and pass wherever a name goes; catalog_names lists the catalog.
- **The engine**: build_ops returns the op list; evaluate, per_sequence and max_batch work on numpy
  arrays and return dicts of arrays (or an array); ridge returns a float; parse_quantity a float.
- **Serving**: make_traffic returns a Traffic, simulate a SimResult and serve_runs a list of them.
- **Interactive**: explore() returns an ipywidgets explorer for Jupyter (``pip install perfmodel[notebooks]``).

Every time carries its ``mode``: roofline (the ideal bound, the default: datasheet peaks, no
overheads), achievable (``mode="achievable"``, an estimate of a good implementation, ``impl=`` an
implementation profile) or simple (the lecture's closed form). Specs are objects you can edit:

    >>> m = pm.load_model("llama-2-13b").replace(n_kv_heads=8)
    >>> bool(pm.decode(m, "h100-sxm", batch=256).fits[0])
    True
"""
from __future__ import annotations

import sys as _sys

if _sys.argv and _sys.argv[0].rsplit("/", 1)[-1] in ("perfmodel", "perfmodel.exe"):  # the console script, starting
    from .interrupts import install_early as _install_early

    _install_early()  # a Ctrl-C during the imports below is one line and exit 130 (perfmodel/interrupts.py)

__version__ = "0.1.0"

from . import frames as _frames  # noqa: E402  (after the early interrupt handler above)
from .frames import *  # noqa: E402,F401,F403  (the public API: perfmodel/frames.py)
from .frames import __all__  # noqa: E402,F401
