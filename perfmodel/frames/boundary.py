"""The public boundary: every public function's arguments are checked by name before any work.

A wrong type (a dict where a batch goes, None where a format goes, an unknown keyword) is one SpecError naming
the argument as the caller wrote it (`batch=: ...`), with did-you-mean for a misspelt keyword. The values
themselves are then checked by the same code the CLI uses, whose messages name CLI flags (`--weights-dtype`):
those are renamed to the caller's argument (`weights_dtype=`) on the way out. So the API is as strict as the CLI,
and says it the same way. tests/test_api_fuzz.py fuzzes every public function through this layer.
"""
from __future__ import annotations

import functools
import inspect
import math
import numbers
import os
from collections.abc import Mapping

import numpy as np

from ..errors import SpecError
from ..specs import Hardware, Model

MAX_LIST = 10**6  # the most values one list argument may hold (the CLI's point limit keeps grids far below)


def did_you_mean(word: str, names) -> str:
    import difflib

    near = difflib.get_close_matches(str(word), sorted(names), n=1, cutoff=0.75)
    return f" (did you mean {near[0]!r}?)" if near else ""


class _Bad(Exception):
    """A checker's complaint; the wrapper turns it into SpecError(f"{name}=", None, problem)."""


def _what(v) -> str:
    return f"{type(v).__name__} {v!r}"[:80]


def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_num(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _scalar_number(v, text_ok: bool = True):
    """A number (finite), or a text the CLI's parser reads ('64', '2.49/h', '50ms')."""
    if isinstance(v, str) and text_ok:
        return v
    if _is_num(v):
        if not math.isfinite(float(v)):
            raise _Bad(f"must be finite, got {v!r}")
        return v
    raise _Bad(f"must be a number{' or a text such as the CLI takes' if text_ok else ''}, got {_what(v)}")


def _list(v, each, kind: str):
    """One value or a list/tuple/array of them (never empty, nested or unbounded)."""
    if isinstance(v, np.ndarray):
        if v.ndim > 1:
            raise _Bad(f"must be one value or a flat list of {kind}, got a {v.ndim}-d array")
        v = v.tolist()
    if isinstance(v, (list, tuple, range)):
        if len(v) == 0:
            raise _Bad(f"is empty: give at least one {kind}")
        if len(v) > MAX_LIST:
            raise _Bad(f"has {len(v):,} values, above the limit of {MAX_LIST:,}")
        for x in v:
            if isinstance(x, (list, tuple, dict, set, np.ndarray)):
                raise _Bad(f"must be a flat list of {kind}, got a nested {type(x).__name__}")
            each(x)
        return v
    if isinstance(v, (dict, set, frozenset, bytes, bytearray)) or not (isinstance(v, str) or _is_num(v)
                                                                          or v is None or _is_obj(v)):
        raise _Bad(f"must be one {kind} or a list of them, got {_what(v)}")
    each(v)
    return v


def _is_obj(v) -> bool:
    return isinstance(v, (Model, Hardware))


# ---------------------------------------------------------------- the checkers, one per kind of argument
def boolean(v):
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    raise _Bad(f"must be True or False, got {_what(v)}")


def counts(v):
    """Whole numbers: one, a list of numbers, or the CLI's text ('1,8,64', '1:512:x2')."""
    return v if isinstance(v, str) else number_list(v)


def one_number(v):
    if isinstance(v, (list, tuple)):
        raise _Bad(f"must be one number, got a {type(v).__name__}")
    return _scalar_number(v, text_ok=False)


def count(v):
    """One number (the functions check it is whole and in range, with the CLI's messages)."""
    if isinstance(v, (list, tuple)):
        raise _Bad(f"must be one whole number, got a {type(v).__name__}")
    return _scalar_number(v, text_ok=False)


def quantity(v):
    """A number in SI units or a text with its unit ('80 GB', '50ms', '2.49/h')."""
    if isinstance(v, (list, tuple)):
        raise _Bad(f"must be one number or quantity text, got a {type(v).__name__}")
    return _scalar_number(v)


def quantities(v):
    return _list(v, _scalar_number, "number")


def text(v):
    if isinstance(v, str):
        return v
    raise _Bad(f"must be a text, got {_what(v)}")


def text_list(v):
    """One text or several: always a list (a lone 'llama' is one name, not five letters)."""
    texts(v)
    return [v] if isinstance(v, str) else list(v)


def number_list(v):
    """The engine functions' arrays: numbers only (the CLI's texts are read by the queries, not here)."""
    def each(x):
        _scalar_number(x, text_ok=False)
    return _list(v, each, "number")


def positive_count(v):
    if not _is_int(v) or v < 1:
        raise _Bad(f"must be a whole number >= 1, got {_what(v)}")
    return v


def texts(v):
    def each(x):
        if not isinstance(x, str):
            raise _Bad(f"must be a text or a list of texts, got {_what(x)} in it")
    return _list(v, each, "text")


def formats(v):
    """A storage format name, or (sweep) a list of them; None where the default is None (the act format)."""
    def each(x):
        if x is not None and not isinstance(x, str):
            raise _Bad(f"must be a format name such as 'bf16' or 'fp8', got {_what(x)}")
    return _list(v, each, "format name")


def one_format(v):
    if v is None or isinstance(v, str):
        return v
    raise _Bad(f"must be a format name such as 'bf16' or 'fp8', got {_what(v)}")


def path(v):
    if isinstance(v, (str, os.PathLike)):
        return v
    raise _Bad(f"must be a file path (str or pathlib.Path), got {_what(v)}")


def spec_ref(kind: str):
    """A catalog name, a file path or a spec object; several in a list (or a comma text) where rows repeat."""
    cls = Model if kind == "model" else Hardware

    def each(x):
        if isinstance(x, (str, os.PathLike, cls)):
            return
        raise _Bad(f"must be a {kind} name, a file path or a {cls.__name__}, got {_what(x)}")

    def check(v):
        return _list(v, each, f"{kind} name or {kind.capitalize() if kind == 'model' else 'Hardware'}")
    return check


def one_spec(kind: str):
    """Exactly one model (or hardware): loaded here, so the engine functions take names or objects alike."""
    def check(v):
        from ..specs import Hardware, Model, load_hardware, load_model

        cls, load = (Model, load_model) if kind == "model" else (Hardware, load_hardware)
        if isinstance(v, cls):
            return v
        if isinstance(v, (str, os.PathLike)):
            return load(v)
        raise _Bad(f"must be one {kind} name, file path or {cls.__name__} object, got {_what(v)}")
    return check


def sets(v):
    if not isinstance(v, Mapping):
        raise _Bad(f"must be a dict of field: value, e.g. {{'n_kv_heads': 8}}, got {_what(v)}")
    for k, x in v.items():
        if not isinstance(k, str) or not k:
            raise _Bad(f"keys must be field names (text), got {k!r}")
        if not (x is None or isinstance(x, (str, bool, numbers.Real, list, tuple, dict))):
            raise _Bad(f"{k}: must be a number, text, list or mapping, got {_what(x)}")
    return v


def instance(*types: str):
    """An object of one of the named perfmodel classes (Precision, Layout, Traffic, ...)."""
    def check(v):
        import importlib

        classes = []
        for t in types:
            mod, _, cls = t.rpartition(".")
            classes.append(getattr(importlib.import_module(mod, __package__), cls))
        if isinstance(v, tuple(classes)):
            return v
        raise _Bad(f"must be a {' or '.join(t.rpartition('.')[2] for t in types)}, got {_what(v)}")
    return check


def precision(v):
    from ..ops import Precision

    if isinstance(v, Precision):
        return v
    if isinstance(v, str):
        return Precision(v)
    raise _Bad(f"must be a Precision (or a weights format name), got {_what(v)}")


def frame(v):
    import pandas as pd

    if isinstance(v, pd.DataFrame):
        return v
    if isinstance(v, Mapping):
        return pd.DataFrame(v) if all(isinstance(x, (list, tuple)) for x in v.values()) else _fail_frame(v)
    raise _Bad(f"must be a DataFrame (a perfmodel result) or a dict of columns, got {_what(v)}")


def _fail_frame(v):
    raise _Bad("must be a DataFrame or a dict of equal-length column lists")


def frame_or_path(v):
    import pandas as pd

    if isinstance(v, (pd.DataFrame, str, os.PathLike)):
        return v
    raise _Bad(f"must be a DataFrame or a CSV path, got {_what(v)}")


def workers(v):
    if v == "auto" or _is_int(v):
        return v
    raise _Bad(f"must be a whole number of processes or 'auto', got {_what(v)}")


def progress(v):
    if isinstance(v, bool) or callable(v):
        return v
    raise _Bad(f"must be True, False or a callable, got {_what(v)}")


def capacity_arg(v):
    """max_batch's memory: bytes (a number or '80 GB'), a hardware name, or a Hardware."""
    from ..specs import Hardware

    if isinstance(v, (Hardware, str)):
        return v
    return one_number(v)


def impl_arg(v):
    from ..efficiency import Impl

    return v if isinstance(v, Impl) else path(v)


def callback(v):
    if callable(v):
        return v
    raise _Bad(f"must be a callable, got {_what(v)}")


def anything(v):
    return v


# ---------------------------------------------------------------- which checker each argument name gets
KINDS = {
    **dict.fromkeys(["quantize_embeddings", "energy", "causal_skip", "grid", "stage", "sharing", "show",
                     "disaggregate", "headers", "passes", "allow_zero"], boolean),
    **dict.fromkeys(["batch", "context", "prompt", "B", "S", "T"], counts), "gamma": number_list,
    **dict.fromkeys(["generate", "tp", "pp", "ep", "replicas", "microbatches", "slots", "block_size", "cost_quantum",
                     "samples", "seed", "seeds", "shared_prefix", "requests", "token_budget", "chunk_rows", "max_rows",
                     "max_tokens", "rounds", "row", "sample", "max_points", "concurrency", "warmup", "gpus", "percentile"], count),
    **dict.fromkeys(["memory", "overhead", "max_latency", "slo_ttft", "slo_tpot", "rate", "prompt_len", "output_len"],
                    quantity),
    "price": quantities, "alpha": number_list,
    **dict.fromkeys(["draft_cost", "tolerance", "memory_fraction"], one_number),
    **dict.fromkeys(["mode", "attention", "phase", "policy", "kv_manager", "prefill", "kind", "dtype", "engine",
                     "cluster", "dimension"], text),
    **dict.fromkeys(["modes", "phases", "categories"], text_list),
    **dict.fromkeys(["weights_dtype", "kv_dtype", "act_dtype"], one_format),
    **dict.fromkeys(["path", "trace", "out", "cases", "results"], path),
    "impl": path, "points": frame_or_path, "df": frame, "capacity_frame": frame,
    **dict.fromkeys(["model", "models", "draft", "target"], spec_ref("model")),
    **dict.fromkeys(["hardware", "hw"], spec_ref("hardware")),
    "sets": sets, "workers": workers, "jobs": count, "progress": progress,
    "prec": precision, "layout": instance("..ops.Layout"), "traffic": instance("..serving.traffic.Traffic"),
}
NONE_OK = {"kv_dtype", "warmup", "impl", "sets", "price", "trace", "requests", "rate", "slots", "token_budget",
           "max_tokens", "concurrency", "progress", "layout", "prec", "cost", "tm", "cluster", "workers", "gpus",
           "tp", "microbatches", "engine", "cases", "categories"}
# per function: the engine functions take exactly one spec (loaded here, names or objects alike), and a few
# names mean something else in one function
SPECIAL = {
    **{(f, "model"): one_spec("model") for f in ("build_ops", "param_count", "evaluate", "per_sequence", "max_batch",
                                                   "simulate")},
    **{(f, "hw"): one_spec("hardware") for f in ("evaluate", "simulate")},
    ("load_model", "ref"): anything, ("load_hardware", "ref"): anything,  # their own messages (specs.load_*)
    ("validation", "overhead"): boolean, ("validation", "kv"): boolean,
    ("max_batch", "capacity"): capacity_arg, ("evaluate", "impl"): impl_arg,
    ("evaluate", "tm"): instance("..timemodel.TimeModel"), ("max_batch", "overhead"): quantity,
    ("show", "name"): anything, ("parse_quantity", "text"): anything, ("human", "df"): frame,
    ("sweep", "weights_dtype"): formats, ("sweep", "kv_dtype"): formats,
    ("simulate", "progress"): callback, ("simulate", "cost"): instance("..serving.stepcost.StepCost", "..serving.fastcost.FastCost",
                                   "..serving.fastcost.ExactCost"),
    ("launch_settings", "row"): count, ("point", "batch"): one_number, ("point", "context"): one_number, ("formats", "row"): positive_count,
    **{("serving_validation", a): text_list for a in ("model", "system", "backend")},
    ("serving_validation", "sample"): path, ("serving_validation_summary", "points"): frame,
    **{(f, a): number_list for f in ("build_ops", "evaluate", "per_sequence", "max_batch") for a in ("batch", "context",
                                                                                                 "B", "S", "T")},
}
for _f in ("config_to_spec", "fleet"):
    SPECIAL[(_f, "path")] = path


def checker(fn_name: str, arg: str):
    return SPECIAL.get((fn_name, arg), KINDS.get(arg, anything))


def _cli_names(e: SpecError, params) -> SpecError | None:
    """A message from the CLI's shared checks names a flag (`--weights-dtype`); rename it to the argument."""
    where = str(e.where)
    if not where.startswith("-"):
        return None
    alias = {"set": "sets"}
    names = [alias.get(x, x) for x in (p.strip().lstrip("-").replace("-", "_") for p in where.split("/"))]
    if not names or not all(n in params for n in names):
        return None
    return SpecError("/".join(f"{n}=" for n in names), e.field, e.problem)


def public(fn, name: str | None = None):
    """fn, with its arguments checked by name (KINDS/SPECIAL) before any work and CLI flag names in its errors
    renamed to the caller's arguments. The binding is done here (inspect's bind cost 20 us a call; this, 2 us)."""
    name = name or fn.__name__
    params = inspect.signature(fn).parameters
    if any(p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in params.values()):
        raise TypeError(f"{name}: public functions take named parameters only")
    names = list(params)
    positional = [n for n in names if params[n].kind == params[n].POSITIONAL_OR_KEYWORD]
    defaults = {n: p.default for n, p in params.items()}
    required = [n for n in names if defaults[n] is inspect.Parameter.empty]
    checks = {n: checker(name, n) for n in names}

    def fail(problem: str):
        raise SpecError(f"{name}()", None, problem)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if len(args) > len(positional):
            fail(f"takes at most {len(positional)} positional arguments, got {len(args)}")
        values = dict(zip(positional, args))
        for k, v in kwargs.items():
            if k not in defaults:
                fail(f"unknown argument {k!r}{did_you_mean(k, names)} (it takes {', '.join(names)})")
            if k in values:
                fail(f"got two values for {k!r} (one by position, one by name)")
            values[k] = v
        for k in required:
            if k not in values:
                fail(f"missing the argument {k!r}")
        for arg, v in values.items():
            default = defaults[arg]
            if v is default or (v is None and (default is None or arg in NONE_OK)):
                continue
            if v is None:
                raise SpecError(f"{arg}=", None, f"must be given (None is not a value here; default {default!r})")
            try:
                values[arg] = checks[arg](v)
            except _Bad as e:
                raise SpecError(f"{arg}=", None, str(e)) from None
        try:
            return fn(**values)
        except SpecError as e:
            renamed = _cli_names(e, params)
            if renamed is None:
                raise
            raise renamed from None

    return wrapper
