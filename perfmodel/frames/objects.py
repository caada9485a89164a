"""Specs and the engine as objects and arrays: load_model, load_hardware, catalog_names, config_to_spec, build_ops,
param_count, evaluate, per_sequence, max_batch, parse_quantity, make_traffic, simulate, serve_runs, explore."""
from __future__ import annotations

from .. import engine as _engine
from .. import ops as _ops
from .. import specs as _specs
from .. import units as _units
from ..specs import Hardware, Model



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
    if kind not in ("hardware", "models", "impl"):
        raise _specs.SpecError("kind=", None, f"must be 'hardware', 'models' or 'impl', got {kind!r}")
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
    from ..hf_import import config_to_spec as _convert

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
    from ..ops import Precision as _Precision
    from ..specs import Hardware as _Hardware, Model as _Model

    m = model if isinstance(model, _Model) else load_model(model)
    if isinstance(capacity, _Hardware):
        capacity = capacity.memory_capacity
    elif isinstance(capacity, str):
        text = capacity.strip()
        capacity = (parse_quantity(text, "bytes") if text[:1].isdigit() or text[:1] == "."
                    else load_hardware(text).memory_capacity)
    if isinstance(prec, str):
        prec = _Precision(prec)
    if isinstance(overhead, str):
        overhead = parse_quantity(overhead, "bytes", allow_zero=True)
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
    from ..errors import SpecError

    if dimension not in _units._EXAMPLE:
        raise SpecError("dimension=", None, f"unknown dimension {dimension!r} (known: {', '.join(_units._EXAMPLE)})")
    try:
        return _units.parse_quantity(text, dimension, allow_zero)
    except ValueError as e:  # the units layer's reason, as the one perfmodel error (SpecError is a ValueError)
        raise SpecError("text=", None, str(e)) from None


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
    from ..serving import make_traffic as _make

    return _make(requests, rate, trace, prompt_len, output_len, samples, shared_prefix, seed)


def simulate(model, hw, traffic, policy="continuous", slots=8, kv_manager="paged", block_size=16, sharing=True,
             prefill="chunked", token_budget=None, prec=None, cost_quantum=16, cost=None, layout=None, concurrency=None,
             warmup=0, progress=None):
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
    progress : callable -- progress(requests done), called every 256 iterations (a progress bar's hook)

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
    from ..serving import simulate as _simulate

    return _simulate(model, hw, traffic, policy, slots, kv_manager, block_size, sharing, prefill, token_budget, prec,
                     cost_quantum, cost, layout, concurrency, warmup, progress)


def serve_runs(model="llama-2-13b", hardware="h100-sxm", policy="both", requests=None, slots=8, rate=None, trace=None,
               prompt_len="512", output_len="lognormal:median=18,max=231", kv_manager="paged", block_size=16,
               shared_prefix=0, samples=1, sharing=True, prefill=None, token_budget=None, seed=0,
               weights_dtype="bf16", kv_dtype=None, act_dtype="bf16", sets=None, cost_quantum=16, tp=1, pp=1, ep=1,
               replicas=1, price=None, energy=False, mode="roofline", impl=None, max_tokens=None, concurrency=None,
               warmup=None, show=False) -> list:
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
    from .. import serving

    return serving.serve_runs(model, hardware, policy, requests, slots, rate, trace, prompt_len, output_len,
                              kv_manager, block_size, shared_prefix, samples, sharing, prefill, token_budget, seed,
                              weights_dtype, kv_dtype, act_dtype, sets, cost_quantum, tp, pp, ep, replicas, price,
                              energy, mode, impl, max_tokens, concurrency, warmup, show)


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
    from ..explorer import Explorer

    return Explorer(model, hardware, batch, context, weights_dtype, kv_dtype, mode, tp)


