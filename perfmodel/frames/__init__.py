"""The public DataFrame layer: every query of the API as a pandas DataFrame (or a dict / object where said), with
integer counts and a human-units view. perfmodel/__init__.py re-exports all of it: `perfmodel.decode` is
`perfmodel.frames.decode`. One place to look for the API."""
from __future__ import annotations

from ..errors import ContextWarning, DataWarning, SpecError  # noqa: F401  (re-exported)
from ..ops import Layout, Op, Precision  # noqa: F401  (re-exported)
from ..specs import Hardware, Model  # noqa: F401  (re-exported)
from .base import (  # noqa: F401  (DataFrames, integer counts, the shared parameter texts)
    COUNT_COLUMNS,
    _ACCESSOR,
    _FMT,
    _HW,
    _IMPL,
    _LAYOUT,
    _MODE,
    _MODEL,
    _REDUNDANT,
    _SETS,
    _frame,
    _register_accessor,
    human,
)
from .queries import decode, point, prefill, request, intensity, kv, budget, show, list_specs, ridge, compare, formats, weights  # noqa: F401
from .runs import speculative, plan, sweep, serve_sim, kv_memory, capacity, fleet, launch_settings, validation, published_validation, serving_validation, serving_validation_summary  # noqa: F401
from .objects import load_model, load_hardware, catalog_names, config_to_spec, build_ops, param_count, evaluate, per_sequence, max_batch, parse_quantity, make_traffic, simulate, serve_runs, explore  # noqa: F401

_PARAMS = {"_MODEL": _MODEL, "_HW": _HW, "_MODE": _MODE, "_IMPL": _IMPL, "_FMT": _FMT, "_SETS": _SETS, "_LAYOUT": _LAYOUT,
           "_REDUNDANT": _REDUNDANT}
for _f in (point, decode, prefill, request, intensity, kv, budget, show, compare, weights, speculative, plan, sweep, serve_sim,
           kv_memory, capacity, load_model, load_hardware):
    if _f.__doc__:  # None under python -OO
        _f.__doc__ = _f.__doc__.format(**_PARAMS)  # the shared parameter descriptions, written once above
del _f


def _saved_run():
    from pathlib import Path

    return Path(__file__).resolve().parent.parent / "measure" / "data" / "cpu-quick"


SAVED_RUN = _saved_run()  # the measured CPU run of docs/validation/cpu-quick, shipped inside the package

__all__ = ["point", "decode", "prefill", "request", "intensity", "kv", "budget", "show", "list_specs", "ridge", "compare",
           "formats", "weights", "speculative", "plan", "sweep", "serve_sim", "kv_memory", "capacity", "fleet",
           "launch_settings", "validation", "published_validation", "serving_validation", "serving_validation_summary", "human", "explore", "load_model", "load_hardware", "catalog_names",
           "config_to_spec", "build_ops", "param_count", "evaluate", "per_sequence", "max_batch", "parse_quantity",
           "make_traffic", "simulate", "serve_runs", "Model", "Hardware", "Precision", "Layout", "Op", "SpecError",
           "ContextWarning", "DataWarning", "SAVED_RUN", "COUNT_COLUMNS"]


from .boundary import public as _public  # noqa: E402

for _name in __all__:  # every public function checks its arguments by name first (perfmodel/frames/boundary.py)
    _obj = globals()[_name]
    if callable(_obj) and not isinstance(_obj, type):
        globals()[_name] = _public(_obj)
del _name, _obj
