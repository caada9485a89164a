"""The public DataFrame layer: every query of the API as a pandas DataFrame (or a dict / object where said), with
integer counts and a human-units view. perfmodel/__init__.py re-exports all of it: `perfmodel.decode` is
`perfmodel.frames.decode`. One place to look for the API."""
from __future__ import annotations

import sys as _sys

from . import api as _api
from . import engine as _engine
from . import ops as _ops
from . import specs as _specs
from . import units as _units
from .errors import ContextWarning, DataWarning, SpecError
from .ops import Layout, Op, Precision
from .specs import Hardware, Model

# ---------------------------------------------------------------- DataFrames, integer counts, human units
COUNT_COLUMNS = frozenset({
    "batch", "context", "prompt", "generate", "max_batch", "max_tokens", "min_devices", "layers", "params",
    "published_params", "requests", "sequences", "tokens", "slots", "gamma", "best_gamma", "tp", "pp", "ep",
    "replicas", "devices", "steps", "preemptions", "peak_running", "peak_sequences", "cases", "block_size",
    "samples", "seq", "heads", "kv_heads", "head_dim", "vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads",
    "d_ff", "max_context", "sliding_window", "kv_share", "step_evaluations", "bound_violations",
    "prefill_tp", "prefill_instances", "decode_tp", "decode_instances", "median_seed", "seeds"})


def _frame(table):
    """A dict-of-columns table as a DataFrame: counts as integers (nullable Int64 where a count is
    missing), the `pm` accessor registered. Columns are converted as numpy arrays and the frame is
    built once (assigning columns one by one cost most of a one-row query's time)."""
    import numpy as np
    import pandas as pd  # lazy: a CLI query never pays for pandas

    _register_accessor()
    if isinstance(table, pd.DataFrame):  # a sweep's frame: its columns (categorical text) are kept as they are
        return table
    cols = {}
    for k, v in table.items():
        a = v if isinstance(v, np.ndarray) else np.asarray(v)
        if a.dtype == object:
            if k in COUNT_COLUMNS:
                try:
                    a = pd.to_numeric(pd.Series(list(a))).to_numpy()
                except (TypeError, ValueError):
                    cols[k] = list(a)
                    continue
            else:
                cols[k] = list(a)
                continue
        if k in COUNT_COLUMNS and a.dtype.kind == "f":
            nan = np.isnan(a)
            with np.errstate(invalid="ignore"):  # inf (slots=None) is not whole
                whole = (nan | (np.mod(a, 1) == 0)).all()
            if whole:
                a = pd.array(a, dtype="Int64") if nan.any() else a.astype(np.int64)
        cols[k] = a
    return pd.DataFrame(cols)


def human(df, headers: bool = True):
    """A result shown in human units, as the CLI's tables show it: a DataFrame of strings.

    Parameters
    ----------
    df : DataFrame (or dict of columns)
        Any result of a perfmodel query, in SI units.
    headers : bool
        Rename the columns to the CLI's short headers (latency_s -> latency, throughput_tok_s ->
        tokens/s, ...); False keeps the SI column names.

    Returns
    -------
    DataFrame of str: times in s/ms/us, bytes in kB/MB/GB (1e3 steps), FLOPs with SI prefixes,
    fits as yes/NO. ``df.pm.human()`` is the same call.

    Example
    -------
    >>> pm.human(pm.decode(batch=[1, 64])).loc[1, ["latency", "KV cache"]].tolist()
    ['24.02 ms', '53.69 GB']
    """
    import pandas as pd

    from .report import _HEAD, _human

    _register_accessor()
    if not isinstance(df, pd.DataFrame):
        df = pd.DataFrame(df)
    out = pd.DataFrame({c: [_human(str(c), v.item() if hasattr(v, "item") else v) for v in df[c].tolist()]
                        for c in df.columns}, index=df.index)
    if headers:
        out.columns = [_HEAD.get(str(c), str(c)) for c in out.columns]
    return out


_ACCESSOR = False


def _register_accessor():
    """df.pm.human(): registered on the first DataFrame perfmodel builds (or at import when pandas is loaded)."""
    global _ACCESSOR
    if _ACCESSOR:
        return
    import pandas as pd

    @pd.api.extensions.register_dataframe_accessor("pm")
    class _PerfmodelAccessor:
        """perfmodel's helpers on any DataFrame: ``df.pm.human()``."""

        def __init__(self, df):
            self._df = df

        def human(self, headers: bool = True):
            """This DataFrame in human units (perfmodel.human)."""
            return human(self._df, headers)

    _ACCESSOR = True


if "pandas" in _sys.modules:  # a notebook that has pandas already: df.pm works from the start
    _register_accessor()

# ---------------------------------------------------------------- shared parameter descriptions
_MODEL = ("a catalog name (see catalog_names('models')), a YAML path, a Hugging Face config.json path, a Model "
          "object, or several of them as a comma string or a list (rows for each)")
_HW = ("a catalog name (see catalog_names('hardware')), a YAML path, a Hardware object, or several as a comma "
       "string or a list")
_MODE = ("'roofline' (the ideal bound: datasheet peaks, no overheads), 'achievable' (an estimate of a good "
         "implementation on that device) or 'simple' (the lecture's (weights + B x KV) / bandwidth)")
_IMPL = ("implementation profile for mode='achievable': 'graphs' (default), 'compiled', 'eager', 'eager-fused' or a "
         "YAML path (list_specs('impl'))")
_FMT = "storage format: fp32, bf16, fp16, fp8, int8, int4, int4-gN, nf4, ... (formats() lists every one)"
_SETS = "spec overrides, e.g. {'n_kv_heads': 8, 'memory_bandwidth': '4 TB/s'} (the CLI's --set key=value)"
_LAYOUT = ("tensor-parallel devices, pipeline stages and expert-parallel groups per replica, and replicas (data "
           "parallel); memory is then per device and throughput counts every replica")


# ---------------------------------------------------------------- queries
def decode(model="llama-2-13b", hardware="h100-sxm", batch=(1, 8, 64, 256), context=1024, mode="roofline",
           weights_dtype="bf16", kv_dtype=None, act_dtype="bf16", attention="fused", sets=None,
           quantize_embeddings=False, tp=1, pp=1, ep=1, replicas=1, microbatches=None, price=None, energy=False,
           impl=None):
    """One decode step (one new token per sequence) per model x hardware x batch x context.

    Parameters
    ----------
    model : {_MODEL}
    hardware : {_HW}
    batch : int or list of int -- concurrent sequences B per replica
    context : int or list of int -- tokens S already in each sequence's KV cache
    mode : {_MODE}
    weights_dtype, kv_dtype, act_dtype : str -- {_FMT}; kv_dtype None is the activation format
    attention : 'fused' (FlashAttention: no score matrix in HBM) or 'unfused'
    sets : dict -- {_SETS}
    quantize_embeddings : bool -- store the embedding and LM head in weights_dtype too (default: 16-bit)
    tp, pp, ep, replicas : int -- {_LAYOUT}
    microbatches : int -- in-flight pipeline micro-batches (default pp)
    price : float or str -- USD per device-hour ('2.49/h'): adds cost_per_million_tokens (USD)
    energy : bool -- adds energy_per_token_j (J; measured power, else TDP: an upper bound)
    impl : {_IMPL}

    Returns
    -------
    DataFrame: model, hardware, batch, context, mode, latency_s (s per step), throughput_tok_s
    (tokens/s, all replicas), weight_bytes, kv_cache_bytes, memory_bytes (bytes, per device), fits
    (bool), bound ('memory' or 'compute'), intensity (FLOP/byte); impl in the achievable mode; tp,
    pp, ep, replicas, devices and comm_time_s (s) with a layout. A context beyond the model's
    max_context computes and raises a ContextWarning at your line.

    Example
    -------
    >>> df = pm.decode("llama-2-13b", "h100-sxm", batch=[1, 256], context=1024)
    >>> df.fits.tolist(), int(df.batch[1])
    ([True, False], 256)
    """
    return _frame(_api.decode(model, hardware, batch, context, mode, weights_dtype, kv_dtype, act_dtype, attention,
                              sets, quantize_embeddings, tp, pp, ep, replicas, microbatches, price, energy, impl))


def point(model="llama-2-13b", hardware="h100-sxm", batch=1, context=1024, phase="decode", mode="roofline",
          weights_dtype="bf16", kv_dtype=None, act_dtype="bf16", impl=None):
    """One point, fast: a dict of Python numbers instead of a DataFrame (about 0.2 ms warm; docs/speed.md).

    The same op list and time model as decode() and prefill(), so the same numbers to the last bit; for many
    points, pass lists to decode() or use sweep(), which evaluate them as arrays.

    Parameters
    ----------
    model : {_MODEL}
    hardware : {_HW}
    batch : int -- concurrent sequences B
    context : int -- tokens S in each sequence's KV cache (decode) or prompt tokens (prefill)
    phase : 'decode' (one new token per sequence) or 'prefill' (the whole prompt)
    mode : {_MODE}
    weights_dtype, kv_dtype, act_dtype : str -- {_FMT}
    impl : {_IMPL}

    Returns
    -------
    dict: model, hardware, phase, mode, batch, context, latency_s (s), throughput_tok_s (tokens/s),
    weight_bytes, kv_cache_bytes, memory_bytes (bytes), intensity (FLOP/byte), fits (bool), bound.

    Example
    -------
    >>> p = pm.point("llama-2-13b", "h100-sxm", batch=1, context=1024)
    >>> round(p["latency_s"] * 1e3, 3), p["bound"]
    (7.928, 'memory')
    """
    return _api.point(model, hardware, batch, context, phase, mode, weights_dtype, kv_dtype, act_dtype, impl)


def prefill(model="llama-2-13b", hardware="h100-sxm", batch=1, context=(128, 512, 1024, 4096), mode="roofline",
            weights_dtype="bf16", kv_dtype=None, act_dtype="bf16", attention="fused", sets=None,
            quantize_embeddings=False, tp=1, pp=1, ep=1, replicas=1, microbatches=None, impl=None):
    """The prefill of `context` prompt tokens per sequence: the time to first token (TTFT).

    Parameters
    ----------
    model : {_MODEL}
    hardware : {_HW}
    batch : int or list of int -- prompts processed together (sequences per replica)
    context : int or list of int -- prompt tokens per sequence
    mode : {_MODE}
    weights_dtype, kv_dtype, act_dtype : str -- {_FMT}
    attention : 'fused' or 'unfused'
    sets : dict -- {_SETS}
    quantize_embeddings : bool -- store the embedding and LM head in weights_dtype too
    tp, pp, ep, replicas : int -- {_LAYOUT}
    microbatches : int -- in-flight pipeline micro-batches (default pp)
    impl : {_IMPL}

    Returns
    -------
    DataFrame with decode's columns; latency_s is the prefill time (s) and throughput_tok_s counts
    prompt tokens per second.

    Example
    -------
    >>> df = pm.prefill("llama-2-13b", "h100-sxm", context=[128, 4096])
    >>> df.bound.tolist()
    ['memory', 'compute']
    """
    return _frame(_api.prefill(model, hardware, batch, context, mode, weights_dtype, kv_dtype, act_dtype, attention,
                               sets, quantize_embeddings, tp, pp, ep, replicas, microbatches, impl))


def request(model="llama-2-13b", hardware="h100-sxm", batch=1, prompt=1024, generate=256, mode="roofline",
            weights_dtype="bf16", kv_dtype=None, act_dtype="bf16", attention="fused", sets=None,
            quantize_embeddings=False, tp=1, pp=1, ep=1, replicas=1, microbatches=None, price=None, energy=False,
            impl=None):
    """A whole request: prefill `prompt` tokens, then `generate` decode steps (the context grows).

    Parameters
    ----------
    model : {_MODEL}
    hardware : {_HW}
    batch : int or list of int -- sequences per replica
    prompt : int or list of int -- prompt tokens P
    generate : int -- generated tokens G (one value)
    mode : {_MODE}
    weights_dtype, kv_dtype, act_dtype : str -- {_FMT}
    attention : 'fused' or 'unfused'
    sets : dict -- {_SETS}
    quantize_embeddings : bool -- store the embedding and LM head in weights_dtype too
    tp, pp, ep, replicas : int -- {_LAYOUT}
    microbatches : int -- in-flight pipeline micro-batches (default pp)
    price : float or str -- USD per device-hour: adds cost_per_million_tokens (USD)
    energy : bool -- adds energy_per_token_j (J)
    impl : {_IMPL}

    Returns
    -------
    DataFrame: decode's columns plus prompt, generate, ttft_s (s), decode_s (s, all G steps);
    latency_s = ttft_s + decode_s and throughput_tok_s counts generated tokens.

    Example
    -------
    >>> r = pm.request(prompt=1024, generate=256, batch=1)
    >>> round(float(r.latency_s[0]), 2), int(r.generate[0])
    (2.07, 256)
    """
    return _frame(_api.request(model, hardware, batch, prompt, generate, mode, weights_dtype, kv_dtype, act_dtype,
                               attention, sets, quantize_embeddings, tp, pp, ep, replicas, microbatches, price,
                               energy, impl))


def intensity(model="llama-2-13b", hardware="h100-sxm", batch=1, context=1024, weights_dtype="bf16", kv_dtype=None,
              act_dtype="bf16", attention="fused", sets=None, phases=("prefill", "decode"), quantize_embeddings=False,
              tp=1, pp=1, ep=1, mode="roofline", impl=None):
    """The lecture's per-op table: every op of prefill and decode with its FLOPs, bytes,
    arithmetic intensity, time and bound (all layers counted).

    Parameters
    ----------
    model : {_MODEL} (one)
    hardware : {_HW} (one)
    batch : int -- sequences B
    context : int -- tokens S (the prompt length for prefill)
    weights_dtype, kv_dtype, act_dtype : str -- {_FMT}
    attention : 'fused' or 'unfused'
    sets : dict -- {_SETS}
    phases : tuple -- which of 'prefill' and 'decode'
    quantize_embeddings : bool -- store the embedding and LM head in weights_dtype too
    tp, pp, ep : int -- a layout: one device's ops plus the collectives as rows (bound 'link'/'network')
    mode : 'roofline' or 'achievable' (then 'host wait' and 'step overhead' rows make the times add up)
    impl : {_IMPL}

    Returns
    -------
    DataFrame: op, phase, layers (int), flops (FLOP), bytes (bytes), intensity (FLOP/byte),
    time_s (s), bound, mode.

    Example
    -------
    >>> t = pm.intensity(batch=64, context=1024)
    >>> d = t[t.phase == "decode"].set_index("op")
    >>> 60 < float(d.loc["mlp_up_gate", "intensity"]) < 64   # about B for a decode matmul
    True
    """
    return _frame(_api.intensity(model, hardware, batch, context, weights_dtype, kv_dtype, act_dtype, attention, sets,
                                 phases, quantize_embeddings, tp, pp, ep, mode, impl))


def kv(model="llama-2-13b", context=1024, batch=1, kv_dtype="bf16", sets=None):
    """KV-cache bytes per token (the average at that context) and for the whole batch.

    Parameters
    ----------
    model : {_MODEL}
    context : int or list of int -- tokens S per sequence
    batch : int or list of int -- sequences B
    kv_dtype : str -- the cache's {_FMT}
    sets : dict -- {_SETS}

    Returns
    -------
    DataFrame: model, context, batch, kv_bytes_per_token (bytes), kv_cache_bytes (bytes).

    Example
    -------
    >>> int(pm.kv("llama-2-13b", context=1024).kv_cache_bytes[0])
    838860800
    """
    return _frame(_api.kv(model, context, batch, kv_dtype, sets))


def budget(model="llama-2-13b", hardware=None, memory=None, overhead=0.0, weights_dtype="bf16", kv_dtype=None,
           act_dtype="bf16", context=1024, sets=None, quantize_embeddings=False, tp=1, pp=1, ep=1, replicas=1):
    """The inverse question: after the weights and an overhead, how many KV tokens fit, and how
    many users at each context.

    Parameters
    ----------
    model : {_MODEL}
    hardware : {_HW} (one; default h100-sxm), or None with `memory`
    memory : float or str -- a capacity instead of a device ('80 GB' or bytes)
    overhead : float or str -- bytes reserved for the runtime ('2 GB')
    weights_dtype, kv_dtype, act_dtype : str -- {_FMT}
    context : int or list of int -- tokens per user
    sets : dict -- {_SETS}
    quantize_embeddings : bool -- store the embedding and LM head in weights_dtype too
    tp, pp, ep, replicas : int -- {_LAYOUT}

    Returns
    -------
    DataFrame: model, hardware, memory_capacity, overhead_bytes, weight_bytes (bytes), context,
    kv_bytes_per_token (bytes), max_tokens, max_batch (int), fits (bool).

    Example
    -------
    >>> int(pm.budget("llama-2-13b", "h100-sxm", context=1024).max_batch[0])
    64
    """
    return _frame(_api.budget(model, hardware, memory, overhead, weights_dtype, kv_dtype, act_dtype, context, sets,
                              quantize_embeddings, tp, pp, ep, replicas))


def show(name, sets=None, weights_dtype="bf16", kv_dtype=None):
    """A spec with its derived numbers (one row): parameters, KV bytes per token and weight bytes
    for a model; bandwidth, peaks, ridge points and the achievable terms for hardware.

    Parameters
    ----------
    name : str, Model or Hardware -- a catalog name, a YAML path or a spec object
    sets : dict -- {_SETS}
    weights_dtype, kv_dtype : str -- formats the model's byte counts use ({_FMT})

    Returns
    -------
    DataFrame with one row; SI units (bytes, FLOP/s, bytes/s, s).

    Example
    -------
    >>> int(pm.show("llama-2-13b").params[0])
    13015864320
    """
    return _frame(_api.show(name, sets, weights_dtype, kv_dtype))


def list_specs(kind="all"):
    """The catalog: every hardware spec, model and implementation profile with its description.

    Parameters
    ----------
    kind : 'all', 'hardware', 'models' or 'impl'

    Returns
    -------
    DataFrame: kind, name, description.

    Example
    -------
    >>> "h100-sxm" in set(pm.list_specs("hardware").name)
    True
    """
    return _frame(_api.list_specs(kind))


def ridge(hardware="h100-sxm", dtype="bf16") -> float:
    """The device's ridge point: peak FLOP/s of a format over memory bandwidth (FLOP per byte).
    An op of lower arithmetic intensity is memory-bound on it.

    Parameters
    ----------
    hardware : a catalog name, a YAML path or a Hardware object (one)
    dtype : str -- the peak's format key ('bf16', 'fp8', 'fp32', ...)

    Returns
    -------
    float, FLOP/byte.

    Example
    -------
    >>> round(pm.ridge("h100-sxm", "bf16"))
    295
    """
    return float(_api.ridge(hardware, dtype))


def compare(models, hardware="h100-sxm", batch=(1, 64, 256), context=(1024, 8192, 32768), mode="roofline",
            weights_dtype="bf16", kv_dtype=None, act_dtype="bf16", attention="fused", sets=None,
            quantize_embeddings=False, impl=None):
    """Models side by side at each batch x context: KV per token and per sequence, memory, step
    latency, throughput, the largest batch that fits, and ratios against the first model.

    Parameters
    ----------
    models : {_MODEL} (two or more)
    hardware : {_HW} (one)
    batch : int or list of int -- sequences per replica
    context : int or list of int -- tokens per sequence
    mode : {_MODE}
    weights_dtype, kv_dtype, act_dtype : str -- {_FMT}
    attention : 'fused' or 'unfused'
    sets : dict -- {_SETS}
    quantize_embeddings : bool -- store the embedding and LM head in weights_dtype too
    impl : {_IMPL}

    Returns
    -------
    DataFrame: decode's columns plus kv_bytes_per_token, kv_bytes_per_seq (bytes), max_batch (int),
    kv_ratio, latency_ratio, throughput_ratio, max_batch_ratio (against the first model).

    Example
    -------
    >>> c = pm.compare(["llama-2-13b", "llama-2-13b-cla2"], batch=64, context=8192)
    >>> c.kv_ratio.tolist(), c.max_batch.tolist()
    ([1.0, 0.5], [8, 16])
    """
    from . import whatif

    return _frame(whatif.compare(models, hardware, batch, context, mode, weights_dtype, kv_dtype, act_dtype, attention,
                                 sets, quantize_embeddings, impl))


def formats(row=4096):
    """Every storage format with its bits per weight (scales included) and the tensor peak its
    math runs at.

    Parameters
    ----------
    row : int -- row length for per-row scales (formats with a group size ignore it)

    Returns
    -------
    DataFrame: format, bits_per_weight, bytes_per_weight, compute_peak, layout.

    Example
    -------
    >>> f = pm.formats().set_index("format")
    >>> float(f.loc["bf16", "bits_per_weight"]), float(f.loc["int4-g128", "bits_per_weight"])
    (16.0, 4.125)
    """
    from . import whatif

    return _frame(whatif.formats(row))


def weights(model="llama-2-13b", weights_dtype="bf16", act_dtype="bf16", quantize_embeddings=False, sets=None):
    """Which layers are stored in which format: parameters and bytes per component, from the op list.

    Parameters
    ----------
    model : {_MODEL} (one)
    weights_dtype, act_dtype : str -- {_FMT}
    quantize_embeddings : bool -- store the embedding and LM head in weights_dtype too
    sets : dict -- {_SETS}

    Returns
    -------
    DataFrame: model, component, format, params (int), weight_bytes (bytes), bits_per_weight.

    Example
    -------
    >>> w = pm.weights("llama-2-13b", "int4").set_index("component")
    >>> w.loc["embedding", "format"], w.loc["mlp", "format"]
    ('bf16', 'int4-g128')
    """
    from . import whatif

    return _frame(whatif.weights(model, weights_dtype, act_dtype, quantize_embeddings, sets))


def speculative(alpha=(0.6, 0.8, 0.9), gamma=(1, 2, 3, 4, 5, 8), draft_cost=0.05, draft=None, target=None,
                hardware="h100-sxm", batch=1, context=1024, weights_dtype="bf16", kv_dtype=None, act_dtype="bf16",
                sets=None, mode="roofline", impl=None):
    """Speculative decoding over acceptance rate alpha x draft length gamma: expected tokens per
    round and the speedup over plain decoding (Leviathan et al. 2023).

    Parameters
    ----------
    alpha : float or list -- acceptance rates in [0, 1]
    gamma : int or list of int -- draft tokens per round
    draft_cost : float or list -- closed form: a draft step in target steps (ignored with models)
    draft, target : model names or Model objects -- price both steps with the engine instead
    hardware : {_HW} (one)
    batch : int -- sequences (with models)
    context : int -- tokens (with models)
    weights_dtype, kv_dtype, act_dtype : str -- {_FMT}
    sets : dict -- {_SETS}
    mode : 'roofline' or 'achievable' (with models)
    impl : {_IMPL}

    Returns
    -------
    DataFrame: alpha, gamma (int), draft_cost, expected_tokens, speedup, slower (bool), best_gamma
    (int, the best of 1..32 for that alpha); with models also draft, target, hardware, batch,
    context, mode, target_step_s (s) and verify_cost (target steps).

    Example
    -------
    >>> s = pm.speculative(alpha=0.8, gamma=[1, 4], draft_cost=0.05)
    >>> s.gamma.tolist(), s.speedup.round(2).tolist(), int(s.best_gamma[0])
    ([1, 4], [1.71, 2.8], 8)
    """
    from . import whatif

    return _frame(whatif.speculative(alpha, gamma, draft_cost, draft, target, hardware, batch, context, weights_dtype,
                                     kv_dtype, act_dtype, sets, mode, impl))


def plan(model="llama-3.1-70b", hardware="h100-sxm", gpus=8, context=4096, batch=(1, 8, 32, 128), max_latency=None,
         weights_dtype="bf16", kv_dtype=None, act_dtype="bf16", sets=None, price=None, energy=False, mode="roofline",
         impl=None):
    """Every layout (tp x pp x ep x replicas) of `gpus` devices at each batch, with the Pareto front
    of latency against throughput per device.

    Parameters
    ----------
    model : {_MODEL} (one)
    hardware : {_HW} (one)
    gpus : int -- devices to spread over
    context : int -- tokens per sequence
    batch : int or list of int -- sequences per replica
    max_latency : float or str -- a step-latency limit ('50 ms' or seconds) for the Pareto front
    weights_dtype, kv_dtype, act_dtype : str -- {_FMT}
    sets : dict -- {_SETS}
    price : float or str -- USD per device-hour: adds cost_per_million_tokens
    energy : bool -- adds energy_per_token_j (J)
    mode : 'roofline' or 'achievable'
    impl : {_IMPL}

    Returns
    -------
    DataFrame: decode's columns, tp, pp, ep, replicas, devices (int), comm_time_s (s),
    throughput_per_device (tokens/s), crosses_nodes (bool), missing (data the spec lacks), pareto
    (bool). ``df.attrs["summary"]`` holds min_devices, min_layout, skipped and any warning.

    Example
    -------
    >>> p = pm.plan("llama-3.1-70b", "h100-sxm", gpus=8, batch=[8])
    >>> int(p[p.pareto].tp.max()), p.attrs["summary"]["min_devices"]
    (8, 2)
    """
    from .parallel import plan as _plan

    table, summary = _plan(model, hardware, gpus, context, batch, max_latency, weights_dtype, kv_dtype, act_dtype,
                           sets, price, energy, mode, impl)
    df = _frame(table)
    df.attrs["summary"] = summary
    return df


def sweep(models="llama-2-13b", hardware="h100-sxm", batch="1:512:x2", context="128:131072:x2",
          weights_dtype=("bf16",), kv_dtype=(None,), act_dtype="bf16", mode="roofline", sets=None, out=None,
          chunk_rows=1_000_000, progress=None, impl=None, max_rows=10_000_000):
    """Decode metrics over a whole grid: models x hardware x weight formats x KV formats x batch x context.

    Parameters
    ----------
    models : {_MODEL}
    hardware : {_HW}
    batch, context : str or list -- axes: 'START:STOP:xFACTOR' (geometric), 'START:STOP:+STEP' or a list
    weights_dtype, kv_dtype : tuple of str -- formats to sweep ({_FMT})
    act_dtype : str -- the activation format
    mode : {_MODE}
    sets : dict -- {_SETS}
    out : str -- stream to FILE.csv or FILE.parquet instead of returning the grid
    chunk_rows : int -- rows evaluated per block
    progress : bool -- a progress bar (default: on a terminal)
    impl : {_IMPL}
    max_rows : int -- refuse a bigger grid

    Returns
    -------
    DataFrame with decode's columns (batch and context as int), or with `out` a dict
    {{"path", "rows", "seconds"}}.

    Example
    -------
    >>> g = pm.sweep("llama-2-13b", "h100-sxm", batch="1:4:x2", context=[1024])
    >>> g.batch.tolist()
    [1, 2, 4]
    """
    from .grid import sweep as _sweep

    r = _sweep(models, hardware, batch, context, weights_dtype, kv_dtype, act_dtype, mode, sets, out, chunk_rows,
               progress, impl, max_rows)
    return r if out is not None else _frame(r)


def serve_sim(model="llama-2-13b", hardware="h100-sxm", policy="both", requests=None, slots=8, rate=None, trace=None,
              prompt_len="512", output_len="lognormal:median=18,max=231", kv_manager="paged", block_size=16,
              shared_prefix=0, samples=1, sharing=True, prefill="chunked", token_budget=None, seed=0,
              weights_dtype="bf16", kv_dtype=None, act_dtype="bf16", sets=None, cost_quantum=16, tp=1, pp=1, ep=1,
              replicas=1, price=None, energy=False, mode="roofline", impl=None, max_tokens=None, concurrency=None,
              warmup=None):
    """The serving simulator: static and/or continuous batching of a generated (or traced) traffic
    on one replica, each iteration priced by the engine. One summary row per policy.

    Parameters
    ----------
    model : {_MODEL} (one)
    hardware : {_HW} (one)
    policy : 'static', 'continuous' or 'both'
    requests : int -- requests to generate (default 256 when no trace)
    slots : int or None -- concurrent sequences (None: as many as memory allows)
    rate : float -- arrivals per second (Poisson); None: all at t = 0
    trace : str -- a CSV/JSONL trace of arrival_s, prompt_tokens, output_tokens instead
    prompt_len, output_len : str or int -- length distributions: '512', 'uniform:A:B', 'lognormal:median=M,max=X'
    kv_manager : 'paged' or 'contiguous'
    block_size : int -- tokens per KV block (paged)
    shared_prefix : int -- tokens of a system prompt every request shares
    samples : int -- parallel samples per request (share the prompt)
    sharing : bool -- share prefix blocks between sequences (paged)
    prefill : 'chunked' or 'whole'
    token_budget : int -- tokens per iteration (chunked prefill)
    seed : int -- the traffic's random seed
    weights_dtype, kv_dtype, act_dtype : str -- {_FMT}
    sets : dict -- {_SETS}
    cost_quantum : int -- token rounding of the step-cost cache
    tp, pp, ep, replicas : int -- {_LAYOUT} (pp is not simulated)
    price : float or str -- USD per device-hour: adds cost_per_million_tokens
    energy : bool -- adds energy_per_token_j (J)
    mode : 'roofline' or 'achievable' (the step cost's)
    impl : {_IMPL}
    max_tokens : int -- refuse to simulate more generated tokens than this over all runs (default 5,000,000)
    concurrency : int -- a closed loop of N clients (each sends its next request when its last returns;
        vLLM bench serve --max-concurrency, AIPerf --concurrency) instead of open-loop arrivals; requests
        then defaults to 10 N
    warmup : int -- closed loop: the first requests, run but not measured (default 2 N)

    Returns
    -------
    DataFrame: policy, mode, requests, sequences, tokens, steps (int), makespan_s (s),
    throughput_tok_s (tokens/s), mean/p50/p90/p99 latency_s, ttft_s and tpot_s (s), occupancy and KV
    memory columns (bytes); request_rate (1/s) and mean_in_flight (Little's law over the measured
    window); with concurrency also concurrency, warmup, throughput_per_device and tok_s_per_user.

    Example
    -------
    >>> r = pm.serve_sim(requests=32, slots=8, output_len="lognormal:median=18,max=231")
    >>> r.policy.tolist(), int(r.requests[0])
    (['static', 'continuous'], 32)
    """
    from . import serving

    return _frame(serving.serve_sim(model, hardware, policy, requests, slots, rate, trace, prompt_len, output_len,
                                    kv_manager, block_size, shared_prefix, samples, sharing, prefill, token_budget, seed,
                                    weights_dtype, kv_dtype, act_dtype, sets, cost_quantum, tp, pp, ep, replicas, price,
                                    energy, mode, impl, max_tokens, concurrency, warmup))


def kv_memory(model="llama-2-13b", hardware="h100-sxm", requests=None, slots=None, rate=None, trace=None,
              prompt_len="512", output_len="lognormal:median=18,max=231", block_size=16, shared_prefix=0, samples=1,
              prefill="chunked", token_budget=None, seed=0, weights_dtype="bf16", kv_dtype=None, act_dtype="bf16",
              sets=None, cost_quantum=16, mode="roofline", impl=None, max_tokens=None):
    """The same traffic under continuous batching with each KV manager: contiguous reservation,
    paged, and paged with prefix sharing (one row each per block size).

    Parameters
    ----------
    model : {_MODEL} (one)
    hardware : {_HW} (one)
    requests : int -- requests to generate (default 256)
    slots : int or None -- concurrent sequences (None: as many as memory allows)
    rate : float -- arrivals per second; None: all at t = 0
    trace : str -- a trace file instead of generated traffic
    prompt_len, output_len : str or int -- length distributions (see serve_sim)
    block_size : int or list of int -- tokens per KV block
    shared_prefix : int -- tokens of a shared system prompt
    samples : int -- parallel samples per request
    prefill : 'chunked' or 'whole'
    token_budget : int -- tokens per iteration
    seed : int -- the traffic's random seed
    weights_dtype, kv_dtype, act_dtype : str -- {_FMT}
    sets : dict -- {_SETS}
    cost_quantum : int -- token rounding of the step-cost cache
    mode : 'roofline' or 'achievable'
    impl : {_IMPL}
    max_tokens : int -- refuse to simulate more generated tokens than this over all runs (default 5,000,000)

    Returns
    -------
    DataFrame: manager, mode, block_size (int; missing for contiguous), requests, peak_sequences,
    preemptions (int), KV capacity and time-mean memory columns (bytes), utilization,
    throughput_tok_s (tokens/s), mean_latency_s (s).

    Example
    -------
    >>> k = pm.kv_memory("llama-2-13b", "l40s", requests=32, prompt_len=256, shared_prefix=1024)
    >>> k.manager.tolist()
    ['contiguous', 'paged', 'paged+shared']
    """
    from . import serving

    return _frame(serving.kv_memory(model, hardware, requests, slots, rate, trace, prompt_len, output_len, block_size,
                                    shared_prefix, samples, prefill, token_budget, seed, weights_dtype, kv_dtype,
                                    act_dtype, sets, cost_quantum, mode, impl, max_tokens))


def capacity(model="llama-3.1-70b", hardware="h100-sxm", gpus=None, tp=None, pp=1, ep=1, replicas=1,
             prompt_len="lognormal:median=1000,max=8000", output_len="lognormal:median=250,max=2000", slo_ttft="1s",
             slo_tpot="50ms", percentile=99, mode="roofline", impl=None, disaggregate=False, price=None, slots=256,
             token_budget=2048, requests=None, seeds=3, seed=0, tolerance=0.05, block_size=16, cost_quantum=16,
             weights_dtype="bf16", kv_dtype=None, act_dtype="bf16", sets=None, max_tokens=None, concurrency=None):
    """Goodput under latency SLOs: the largest Poisson request rate at which the percentile TTFT and TPOT
    of the serving simulator meet both SLOs, per (hardware, layout), and with disaggregate=True per split
    into prefill and decode pools (docs/capacity.md).

    Parameters
    ----------
    model : {_MODEL} (one)
    hardware : {_HW} (one search each)
    gpus : int -- search every layout of this many devices (pipeline layouts left out); or give tp
    tp, pp, ep, replicas : int -- one layout ({_LAYOUT}; pp must be 1: stages are not simulated)
    prompt_len, output_len : str or int -- length distributions: '512', 'uniform:A,B', 'lognormal:median=M,max=X'
    slo_ttft, slo_tpot : str or float -- the SLOs: '1s', '50ms' or seconds
    percentile : float -- both SLOs hold at this percentile, in (0, 100]
    mode : 'roofline' or 'achievable' (the step cost's)
    impl : {_IMPL}
    disaggregate : bool -- also every split of the devices into a prefill and a decode pool
    price : float or str -- USD per device-hour ('2.49/h'; a comma string, one per hardware): adds
        cost_per_million_tokens (USD per million output tokens at the goodput)
    slots : int or None -- concurrent sequences per replica (vLLM's max_num_seqs)
    token_budget : int or None -- tokens per step (chunked prefill; the prefill pool's batch); None: whole prompts
    requests : int -- requests per simulated trace (default: six times the batch an analytic bound expects)
    seeds : int -- independent searches (seed, seed + 1, ...); the median is reported
    seed : int -- the first seed
    tolerance : float -- bisection stops when hi / lo <= 1 + tolerance
    block_size : int -- tokens per paged KV block
    cost_quantum : int -- decode contexts rounded up to this many tokens in the step cost
    weights_dtype, kv_dtype, act_dtype : str -- {_FMT}
    sets : dict -- {_SETS}
    max_tokens : int -- refuse searches estimated to simulate more generated tokens (default 15,000,000)
    concurrency : int -- instead of searching the Poisson rate, serve N clients in a closed loop (each sends
        its next request when its last returns): goodput_rps is the request rate they get when the
        percentiles meet both SLOs, else missing with the binding SLO (colocated layouts only)

    Returns
    -------
    DataFrame, one row per (hardware, layout[, split]): serving ('colocated' or 'disaggregated'), tp, pp, ep,
    replicas, devices, prefill_tp, prefill_instances, decode_tp, decode_instances (int, missing where they do
    not apply), goodput_rps, goodput_lo_rps, goodput_hi_rps (requests/s: median, min and max over seeds),
    output_tok_s (tokens/s at the goodput), goodput_per_device, cost_per_million_tokens (USD), binding ('ttft',
    'tpot', 'memory', 'none reached', 'does not fit', 'search bound'), binding_value_s (s), ttft_s and tpot_s
    (s, at the goodput), fail_rps (the next rate tried, which fails), median_seed, search, hit_bound, requests,
    seeds, kv_transfer_s (s), note, pareto (bool). ``df.attrs["summary"]`` holds the criterion's settings and
    the disaggregation verdict.

    Example
    -------
    >>> c = pm.capacity("llama-3.1-8b", "h100-sxm", tp=1, prompt_len=512,
    ...                 output_len="lognormal:median=64,max=512", seeds=1)
    >>> c.binding[0], bool(c.ttft_s[0] <= 1.0 and c.tpot_s[0] <= 0.05), int(c.devices[0])
    ('ttft', True, 1)
    """
    from .serving.capacity import capacity as _capacity

    table, summary = _capacity(model, hardware, gpus, tp, pp, ep, replicas, prompt_len, output_len, slo_ttft, slo_tpot,
                               percentile, mode, impl, disaggregate, price, slots, token_budget, requests, seeds, seed,
                               tolerance, block_size, cost_quantum, weights_dtype, kv_dtype, act_dtype, sets,
                               max_tokens, concurrency)
    df = _frame(table)
    df.attrs["summary"] = summary
    return df


def validation(results, hardware=None, overhead=True, passes=True, kv=True):
    """Predicted against measured time for every validation case of a `perfmodel measure` run.

    Parameters
    ----------
    results : str or Path -- a results folder (or its results.json) written by `perfmodel measure`
    hardware : str -- the spec to predict with (default: the folder's measured.yaml)
    overhead : bool -- include the spec's kernel_overhead
    passes : bool -- include gemm_weight_passes and attention_kv_passes
    kv : bool -- include attention_kv_passes (else attention pays gemm_weight_passes)

    Returns
    -------
    DataFrame: case, family, predicted_s (s), measured_s (s, the median), error (predicted /
    measured - 1; negative: the engine is optimistic).

    Example
    -------
    >>> v = pm.validation(pm.SAVED_RUN)
    >>> sorted(set(v.family)), bool(v.error.abs().median() < 0.1)
    (['attention', 'decode', 'sweep'], True)
    """
    from . import measure

    return _frame(measure.validation(results, hardware, overhead, passes, kv))


def published_validation(cases=None, categories=None):
    """Published end-to-end measurements against the engine: per case the measurement, the
    roofline bound, the achievable estimate, the fraction of the bound reached and the estimate's
    error (perfmodel/measure/published.yaml, or a file of your own).

    Parameters
    ----------
    cases : str -- a measurements YAML (default: perfmodel's 117 cases)
    categories : list of str -- only cases with these categories

    Returns
    -------
    DataFrame: case, category, metric, measured, bound, achievable (the metric's unit), fraction,
    error, bound_holds (bool), and the case's model, hardware, formats, batch and context.

    Example
    -------
    >>> p = pm.published_validation(categories=["moe"])
    >>> bool(p.bound_holds.all())
    True
    """
    from .measure.published import published as _published

    return _frame(_published(cases, categories))


def serving_validation(sample=None, modes=("roofline", "achievable"), model=None, system=None, backend=None,
                       rounds=2, jobs=1, impl="engine"):
    """Measured serving runs against the serving simulator: every point of AIConfigurator's silicon sample
    (closed-loop concurrency benchmarks of vLLM, SGLang and TensorRT-LLM; perfmodel/measure/data/aiconfigurator)
    or of a CSV of the same columns, predicted with the workload as measured (docs/validation.md, "Serving").

    Parameters
    ----------
    sample : str -- a silicon-sample CSV (default: the shipped one, pinned in its NOTICE)
    modes : tuple of str -- 'roofline' and/or 'achievable'
    model, system, backend : list of str -- only these (catalog names or the sample's own)
    rounds : int -- measured requests per client after a warm-up of 2 per client (AIPerf measures 20)
    jobs : int or None -- processes to simulate in (None: one per core)
    impl : str -- the achievable mode's implementation profile: "engine" (each point's measured engine:
        vllm-0.24, sglang-0.5, trtllm-1.3) or a profile name or file

    Returns
    -------
    DataFrame, one row per sample row and mode: id, model_path, system, backend, serving_mode (agg or
    disagg), isl, osl, concurrency, band, mode, model, hardware, precision, layout, measured_ttft_ms,
    measured_tpot_ms, predicted_ttft_ms, predicted_tpot_ms (ms), request_rate (1/s), in_flight,
    status ('ok' or 'skipped'), reason, assumed, ttft_error and tpot_error (predicted / measured - 1).

    Example
    -------
    >>> v = pm.serving_validation(model=["llama-3.1-8b"], system=["h200_sxm"], backend=["vllm"], modes=("roofline",))
    >>> len(v), bool((v.status == "ok").all()), bool(((v.in_flight - v.concurrency).abs() < 1e-6 * v.concurrency).all())
    (21, True, True)
    """
    from .cli.validation import _select
    from .serving import silicon

    df = silicon.load(sample)
    for col, wanted, opt, mapping in (("model_path", model, "model", silicon.MODELS),
                                      ("system", system, "system", silicon.SYSTEMS), ("backend", backend, "backend", None)):
        df = _select(df, col, None if wanted is None else list(wanted), opt, mapping)
    return silicon.predict(df, tuple(modes), rounds, jobs, impl=impl)


def serving_validation_summary(points):
    """serving_validation's table summarized per mode and category (overall, backend, system, model, agg or
    disagg, concurrency band): points, median and p90 |error|, bias (the median signed error) and the share
    within +-25% of TTFT and TPOT.

    Parameters
    ----------
    points : DataFrame -- serving_validation's table (or one read back from `validate --serving -o`)

    Returns
    -------
    DataFrame: mode, category, group, points (int), ttft_median_abs, ttft_p90_abs, ttft_bias,
    ttft_within_25, and the same four for tpot (fractions: 0.25 is 25%).

    Example
    -------
    >>> v = pm.serving_validation(model=["llama-3.1-8b"], system=["h200_sxm"], backend=["vllm"], modes=("roofline",))
    >>> s = pm.serving_validation_summary(v)
    >>> s[s.category == "overall"].points.tolist()
    [21]
    """
    from .serving import silicon

    return silicon.summarize(points)


# ---------------------------------------------------------------- specs
def load_model(ref, sets=None) -> Model:
    """A model spec as an object (SI units) that code can edit with .replace(field=value).

    Parameters
    ----------
    ref : {_MODEL} (one)
    sets : dict -- {_SETS}

    Returns
    -------
    Model (validated: a bad field is a SpecError naming it).

    Example
    -------
    >>> m = pm.load_model("llama-2-13b")
    >>> m.n_layers, m.replace(n_kv_heads=8).n_kv_heads
    (40, 8)
    """
    return _specs.load_model(ref, sets)


def load_hardware(ref, sets=None) -> Hardware:
    """A hardware spec as an object in SI units (bytes, bytes/s, FLOP/s), editable with .replace().

    Parameters
    ----------
    ref : {_HW} (one)
    sets : dict -- {_SETS}

    Returns
    -------
    Hardware.

    Example
    -------
    >>> h = pm.load_hardware("h100-sxm")
    >>> h.memory_bandwidth, h.memory_capacity
    (3350000000000.0, 80000000000.0)
    """
    return _specs.load_hardware(ref, sets)


def catalog_names(kind) -> list:
    """The names in a catalog.

    Parameters
    ----------
    kind : 'hardware', 'models' or 'impl' (implementation profiles)

    Returns
    -------
    list of str, sorted.

    Example
    -------
    >>> "llama-3.1-8b" in pm.catalog_names("models")
    True
    """
    return _specs.catalog_names(kind)


def config_to_spec(path) -> dict:
    """A Hugging Face config.json (read offline) as a perfmodel model spec dict; load_model also
    takes the config.json path directly.

    Parameters
    ----------
    path : str -- the config.json

    Returns
    -------
    dict of spec fields (write it as YAML to keep it).

    Example
    -------
    >>> spec = pm.config_to_spec("tests/fixtures/hf/llama-2-7b.json")  # doctest: +SKIP
    """
    from .hf_import import config_to_spec as _convert

    return _convert(path)


# ---------------------------------------------------------------- the engine
def build_ops(model, B, T, S, phase, prec=None, attention="fused", causal_skip=True, layout=None, stage=False) -> list:
    """The op list of one forward pass on one device: every matmul, attention product, elementwise
    op and collective with its FLOPs and the bytes it reads and writes.

    Parameters
    ----------
    model : Model
    B : int or array -- sequences
    T : int or array -- new tokens per sequence (1 for decode; the prompt for prefill)
    S : int or array -- context tokens
    phase : 'prefill' or 'decode'
    prec : Precision -- formats (Precision(weights, act, kv)); default bf16
    attention : 'fused' or 'unfused'
    causal_skip : bool -- prefill skips the masked half of the score matrix
    layout : Layout -- Layout(tp, pp, ep, replicas): one device's share, collectives as ops
    stage : bool -- only the largest pipeline stage's layers

    Returns
    -------
    list of Op: name, count (layers), kind, flops (FLOP), bytes, bytes_read, bytes_written (bytes), intensity.

    Example
    -------
    >>> ops = pm.build_ops(pm.load_model("llama-2-13b"), B=64, T=1, S=1024, phase="decode")
    >>> len(ops) > 10, sorted({op.kind for op in ops})
    (True, ['attention', 'matmul', 'vector'])
    """
    return _ops.build_ops(model, B, T, S, phase, prec, attention, causal_skip, layout, stage)


def param_count(model) -> int:
    """Parameters of a model, counted from its op list (equal to the published count for dense models).

    Parameters
    ----------
    model : Model

    Returns
    -------
    int.

    Example
    -------
    >>> pm.param_count(pm.load_model("llama-2-13b"))
    13015864320
    """
    return int(_ops.param_count(model))


def evaluate(model, hw, batch, context, phase="decode", mode="roofline", prec=None, attention="fused",
             causal_skip=True, grid=True, layout=None, impl=None, tm=None) -> dict:
    """The engine on numpy arrays: latency, throughput, memory and fit for one phase over batch x
    context, without pandas (what every query is built on).

    Parameters
    ----------
    model : Model
    hw : Hardware
    batch, context : arrays -- sequences and tokens; a grid of both (grid=True) or broadcast together
    phase : 'decode' or 'prefill'
    mode : 'roofline', 'achievable' or 'simple'
    prec : Precision -- formats (default bf16)
    attention : 'fused' or 'unfused'
    causal_skip : bool -- prefill skips the masked half of the scores
    grid : bool -- batch as rows x context as columns
    layout : Layout -- per-device memory, all-replica throughput
    impl : implementation profile (mode achievable)
    tm : a ready TimeModel instead of mode/impl

    Returns
    -------
    dict of arrays in SI units: latency_s, throughput_tok_s, weight_bytes, kv_cache_bytes,
    activation_bytes, memory_bytes, fits, bound, intensity, flops, bytes, comm_time_s, ...

    Example
    -------
    >>> r = pm.evaluate(pm.load_model("llama-2-13b"), pm.load_hardware("h100-sxm"), [1, 64], [1024])
    >>> r["latency_s"].shape
    (2, 1)
    """
    return _engine.evaluate(model, hw, batch, context, phase, mode, prec, attention, causal_skip, grid, layout, impl,
                            tm)


def per_sequence(model, context, prec=None, phase="decode", layout=None) -> dict:
    """Weights, and the per-sequence KV and activation bytes at each context, on one device.

    Parameters
    ----------
    model : Model
    context : int or array -- tokens
    prec : Precision -- formats (default bf16)
    phase : 'decode' or 'prefill'
    layout : Layout -- one device's share

    Returns
    -------
    dict of arrays (bytes): weight_bytes, kv_bytes_per_seq, activation_bytes_per_seq, fixed_state_bytes_per_seq.

    Example
    -------
    >>> int(pm.per_sequence(pm.load_model("llama-2-13b"), 1024)["kv_bytes_per_seq"])
    838860800
    """
    return _engine.per_sequence(model, context, prec, phase, layout)


def max_batch(model, capacity, context, prec=None, overhead=0.0, phase="decode", layout=None):
    """The largest batch (per replica) whose weights, overhead and per-sequence KV and activations
    fit in `capacity` bytes on every device (0 if none).

    Parameters
    ----------
    model : Model or str -- a spec or a catalog name / YAML path / config.json
    capacity : float, str or Hardware -- bytes per device, a quantity ("80 GB"), or a device (its memory)
    context : int or array -- tokens per sequence
    prec : Precision or str -- formats (default bf16; a string is the weights' format, e.g. "fp8")
    overhead : float -- bytes reserved
    phase : 'decode' or 'prefill'
    layout : Layout

    Returns
    -------
    float array (whole numbers): sequences.

    Example
    -------
    >>> int(pm.max_batch(pm.load_model("llama-2-13b"), 80e9, 1024))
    64
    >>> int(pm.max_batch("llama-2-13b", "h100-sxm", 1024))
    64
    """
    from .ops import Precision as _Precision
    from .specs import Hardware as _Hardware, Model as _Model

    m = model if isinstance(model, _Model) else load_model(model)
    if isinstance(capacity, _Hardware):
        capacity = capacity.memory_capacity
    elif isinstance(capacity, str):
        text = capacity.strip()
        capacity = (parse_quantity(text, "bytes") if text[:1].isdigit() or text[:1] == "."
                    else load_hardware(text).memory_capacity)
    if isinstance(prec, str):
        prec = _Precision(prec)
    return _engine.max_batch(m, capacity, context, prec, overhead, phase, layout)


def parse_quantity(text, dimension, allow_zero=False) -> float:
    """A quantity as written on a datasheet, converted to SI.

    Parameters
    ----------
    text : str or number -- '80 GB', '3.35 TB/s', '989.5 TFLOP/s', '700 W', '50 ms', '24 GiB'
    dimension : 'bytes', 'bytes/s', 'flop/s', 'W', 's' or 'USD/h'
    allow_zero : bool -- accept 0

    Returns
    -------
    float in SI units (a ValueError names what is wrong).

    Example
    -------
    >>> pm.parse_quantity("3.35 TB/s", "bytes/s")
    3350000000000.0
    """
    return _units.parse_quantity(text, dimension, allow_zero)


# ---------------------------------------------------------------- serving
def make_traffic(requests=None, rate=None, trace=None, prompt_len="512", output_len="lognormal:median=18,max=231",
                 samples=1, shared_prefix=0, seed=0):
    """Arrivals and lengths for the serving simulator (each random quantity has its own seeded stream).

    Parameters
    ----------
    requests : int -- requests to generate
    rate : float -- arrivals per second (Poisson); None: all at t = 0
    trace : str -- a CSV/JSONL trace instead
    prompt_len, output_len : str or int -- '512', 'uniform:A:B' or 'lognormal:median=M,max=X' (tokens)
    samples : int -- parallel samples per request
    shared_prefix : int -- tokens of a shared system prompt
    seed : int

    Returns
    -------
    Traffic (arrival_s, prompt, outputs arrays).

    Example
    -------
    >>> pm.make_traffic(requests=4, output_len="16").n
    4
    """
    from .serving import make_traffic as _make

    return _make(requests, rate, trace, prompt_len, output_len, samples, shared_prefix, seed)


def simulate(model, hw, traffic, policy="continuous", slots=8, kv_manager="paged", block_size=16, sharing=True,
             prefill="chunked", token_budget=None, prec=None, cost_quantum=16, cost=None, layout=None, concurrency=None,
             warmup=0):
    """One policy on one traffic: the iteration-level scheduler on the engine's step cost.

    Parameters
    ----------
    model : Model
    hw : Hardware
    traffic : Traffic (make_traffic)
    policy : 'static' or 'continuous'
    slots : int or None -- concurrent sequences
    kv_manager : 'paged' or 'contiguous'
    block_size : int -- tokens per KV block
    sharing : bool -- share prefix blocks
    prefill : 'chunked' or 'whole'
    token_budget : int -- tokens per iteration
    prec : Precision -- formats
    cost_quantum : int -- token rounding of the step-cost cache
    cost : StepCost -- a ready step cost (its mode and layout)
    layout : Layout -- tp and ep of one replica
    concurrency : int -- a closed loop of N clients: the traffic's first N requests arrive at their times,
        request N + k the instant the k-th returns
    warmup : int -- requests run first and left out of the summary

    Returns
    -------
    SimResult with .summary (dict), .requests and .timeline (dicts of arrays, SI units).

    Example
    -------
    >>> t = pm.make_traffic(requests=8, output_len="16")
    >>> r = pm.simulate(pm.load_model("llama-2-13b"), pm.load_hardware("h100-sxm"), t, slots=4)
    >>> r.summary["requests"], r.summary["tokens"]
    (8, 128)
    """
    from .serving import simulate as _simulate

    return _simulate(model, hw, traffic, policy, slots, kv_manager, block_size, sharing, prefill, token_budget, prec,
                     cost_quantum, cost, layout, concurrency, warmup)


def serve_runs(model="llama-2-13b", hardware="h100-sxm", policy="both", requests=None, slots=8, rate=None, trace=None,
               prompt_len="512", output_len="lognormal:median=18,max=231", kv_manager="paged", block_size=16,
               shared_prefix=0, samples=1, sharing=True, prefill="chunked", token_budget=None, seed=0,
               weights_dtype="bf16", kv_dtype=None, act_dtype="bf16", sets=None, cost_quantum=16, tp=1, pp=1, ep=1,
               replicas=1, price=None, energy=False, mode="roofline", impl=None, max_tokens=None, concurrency=None,
               warmup=None) -> list:
    """serve_sim's runs themselves: a SimResult per policy, with the per-request rows and the
    per-iteration timeline (what plots.serving draws). Parameters as in serve_sim.

    Returns
    -------
    list of SimResult.

    Example
    -------
    >>> runs = pm.serve_runs(requests=8, slots=4, output_len="16")
    >>> [r.summary["policy"] for r in runs]
    ['static', 'continuous']
    """
    from . import serving

    return serving.serve_runs(model, hardware, policy, requests, slots, rate, trace, prompt_len, output_len,
                              kv_manager, block_size, shared_prefix, samples, sharing, prefill, token_budget, seed,
                              weights_dtype, kv_dtype, act_dtype, sets, cost_quantum, tp, pp, ep, replicas, price,
                              energy, mode, impl, max_tokens, concurrency, warmup)


# ---------------------------------------------------------------- notebooks
def explore(model="llama-2-13b", hardware="h100-sxm", batch=64, context=1024, weights_dtype="bf16", kv_dtype="bf16",
            mode="roofline", tp=1):
    """An interactive explorer for Jupyter: controls for model, hardware, batch, context, weight and
    KV formats, mode and tp that redraw the latency-throughput and memory figures and the per-op
    table as you move them. Needs ipywidgets (``pip install 'perfmodel[notebooks]'``).

    Parameters
    ----------
    model, hardware : str -- catalog names to start from
    batch : int -- sequences per replica (a power of two up to 1024)
    context : int -- tokens per sequence
    weights_dtype, kv_dtype : str -- formats to start from
    mode : 'roofline', 'achievable' or 'simple'
    tp : int -- tensor-parallel devices (1, 2, 4 or 8)

    Returns
    -------
    perfmodel.explorer.Explorer: display it (the last line of a cell); .controls holds the widgets,
    .decode and .ops the tables shown.

    Example
    -------
    >>> ex = pm.explore("llama-3.1-8b", "h100-sxm", batch=16)  # doctest: +SKIP
    >>> ex.controls["batch"].value = 64                        # doctest: +SKIP
    """
    from .explorer import Explorer

    return Explorer(model, hardware, batch, context, weights_dtype, kv_dtype, mode, tp)


_PARAMS = {"_MODEL": _MODEL, "_HW": _HW, "_MODE": _MODE, "_IMPL": _IMPL, "_FMT": _FMT, "_SETS": _SETS, "_LAYOUT": _LAYOUT}
for _f in (point, decode, prefill, request, intensity, kv, budget, show, compare, weights, speculative, plan, sweep, serve_sim,
           kv_memory, capacity, load_model, load_hardware):
    if _f.__doc__:  # None under python -OO
        _f.__doc__ = _f.__doc__.format(**_PARAMS)  # the shared parameter descriptions, written once above
del _f


def _saved_run():
    from pathlib import Path

    return Path(__file__).resolve().parent / "measure" / "data" / "cpu-quick"


SAVED_RUN = _saved_run()  # the measured CPU run of docs/validation/cpu-quick, shipped inside the package

__all__ = ["point", "decode", "prefill", "request", "intensity", "kv", "budget", "show", "list_specs", "ridge", "compare",
           "formats", "weights", "speculative", "plan", "sweep", "serve_sim", "kv_memory", "capacity", "validation",
           "published_validation", "serving_validation", "serving_validation_summary", "human", "explore", "load_model", "load_hardware", "catalog_names",
           "config_to_spec", "build_ops", "param_count", "evaluate", "per_sequence", "max_batch", "parse_quantity",
           "make_traffic", "simulate", "serve_runs", "Model", "Hardware", "Precision", "Layout", "Op", "SpecError",
           "ContextWarning", "DataWarning", "SAVED_RUN", "COUNT_COLUMNS"]


def _python_names(fn):
    """An error about an argument names the argument as the caller wrote it: `weights_dtype=`, not the CLI's
    `--weights-dtype` (the engine's checks are shared with the CLI, which names its flags)."""
    import functools
    import inspect

    params = set(inspect.signature(fn).parameters)
    alias = {"set": "sets", "impl": "impl"}

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except SpecError as e:
            where = str(e.where)
            if not where.startswith("-"):
                raise
            names = [alias.get(x, x) for x in (p.strip().lstrip("-").replace("-", "_") for p in where.split("/"))]
            if not names or not all(n in params for n in names):
                raise
            raise SpecError("/".join(f"{n}=" for n in names), e.field, e.problem) from None

    return wrapper


for _name in ("point", "decode", "prefill", "request", "intensity", "kv", "budget", "show", "compare", "weights",
              "speculative", "plan", "sweep", "serve_sim", "kv_memory", "capacity", "published_validation",
              "serving_validation"):
    globals()[_name] = _python_names(globals()[_name])
del _name
