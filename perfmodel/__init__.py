"""perfmodel: an analytical roofline calculator for LLM inference.

    >>> import perfmodel as pm
    >>> pm.decode("llama-2-13b", "h100-sxm", batch=[1, 64], context=1024)   # a pandas DataFrame

The query functions return pandas DataFrames (one row per point, SI columns) built from the
same query functions the CLI uses (perfmodel.api). Every time carries its `mode`: roofline (the
ideal bound, the default), achievable (`mode="achievable"`, an estimate of a good implementation,
`impl=` an implementation profile) or simple. Specs are objects you can edit in code:

    >>> m = pm.load_model("llama-2-13b").replace(n_kv_heads=8)
    >>> pm.decode(m, "h100-sxm", batch=256)
"""
from __future__ import annotations

import functools

from . import api as _api
from . import serving as _serving
from .engine import evaluate, max_batch, per_sequence
from .errors import SpecError
from .ops import Op, Precision, build_ops, param_count
from .specs import Hardware, Model, catalog_names, load_hardware, load_model
from .units import parse_quantity


def config_to_spec(path: str) -> dict:
    """A Hugging Face config.json (read offline) as a perfmodel model spec dict."""
    from .hf_import import config_to_spec as _convert

    return _convert(path)

__version__ = "0.1.0"


def _frame(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        import pandas as pd  # lazy: the CLI never pays for pandas

        table = fn(*args, **kwargs)
        df = pd.DataFrame({k: list(v) if getattr(v, "dtype", None) == object else v for k, v in table.items()})
        for col in ("batch", "context", "prompt", "generate", "max_batch", "max_tokens", "layers", "params"):
            if col in df and df[col].dtype.kind == "f" and (df[col] % 1 == 0).all():
                df[col] = df[col].astype("int64")
        return df

    return wrapper


decode = _frame(_api.decode)
prefill = _frame(_api.prefill)
request = _frame(_api.request)
intensity = _frame(_api.intensity)
kv = _frame(_api.kv)
budget = _frame(_api.budget)
show = _frame(_api.show)
list_specs = _frame(_api.list_specs)
ridge = _api.ridge
serve_sim = _frame(_serving.serve_sim)
kv_memory = _frame(_serving.kv_memory)
from .serving import make_traffic, serve_runs, simulate  # noqa: E402


def validation(*args, **kwargs):
    """Predicted against measured time per case of a `perfmodel measure` results folder (a DataFrame)."""
    from . import measure as _measure

    return _frame(_measure.validation)(*args, **kwargs)


def published_validation(cases=None, categories=None):
    """Published end-to-end measurements against the engine (a DataFrame): per case the measurement,
    the roofline bound, the achievable estimate, the fraction of the bound reached and the estimate's
    error (perfmodel/measure/published.yaml, or a file of your own)."""
    from .measure.published import published as _published

    return _frame(_published)(cases, categories)


def plan(*args, **kwargs):
    """Every layout of N devices (perfmodel.parallel.plan's arguments) as a DataFrame, one row per layout
    and batch, with the Pareto flag and the `missing` column."""
    from .parallel import plan as _plan

    table, _ = _plan(*args, **kwargs)
    return _frame(lambda: table)()


def sweep(*args, **kwargs):
    """Decode metrics over a grid; a DataFrame, or {"path", "rows", "seconds"} when `out=` streams to a file."""
    from .grid import sweep as _sweep

    return _sweep(*args, **kwargs)

__all__ = ["config_to_spec", "validation", "published_validation", "plan", "serve_sim", "kv_memory", "make_traffic", "serve_runs", "simulate", "sweep", "decode", "prefill", "request", "intensity", "kv", "budget", "show", "list_specs", "ridge",
           "load_model", "load_hardware", "Model", "Hardware", "Precision", "Op", "build_ops", "param_count",
           "evaluate", "max_batch", "per_sequence", "catalog_names", "parse_quantity", "SpecError"]
