"""The single-device and layout queries: decode, point, prefill, request, intensity, kv, budget, show, list_specs,
ridge, compare, formats, weights."""
from __future__ import annotations

from .. import api as _api
from .base import _frame


def decode(model="llama-2-13b", hardware="h100-sxm", batch=(1, 8, 64, 256), context=1024, mode="roofline",
           weights_dtype="bf16", kv_dtype=None, act_dtype="bf16", attention="fused", sets=None,
           quantize_embeddings=False, tp=1, pp=1, ep=1, replicas=1, microbatches=None, price=None, energy=False,
           impl=None, redundant_experts=0):
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
    redundant_experts : int -- {_REDUNDANT}

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
                              sets, quantize_embeddings, tp, pp, ep, replicas, microbatches, price, energy, impl,
                              redundant_experts))


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
            quantize_embeddings=False, tp=1, pp=1, ep=1, replicas=1, microbatches=None, impl=None, redundant_experts=0):
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
    redundant_experts : int -- {_REDUNDANT}

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
                               sets, quantize_embeddings, tp, pp, ep, replicas, microbatches, impl,
                               redundant_experts))


def request(model="llama-2-13b", hardware="h100-sxm", batch=1, prompt=1024, generate=256, mode="roofline",
            weights_dtype="bf16", kv_dtype=None, act_dtype="bf16", attention="fused", sets=None,
            quantize_embeddings=False, tp=1, pp=1, ep=1, replicas=1, microbatches=None, price=None, energy=False,
            impl=None, redundant_experts=0):
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
    redundant_experts : int -- {_REDUNDANT}

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
                               energy, impl, redundant_experts))


def intensity(model="llama-2-13b", hardware="h100-sxm", batch=1, context=1024, weights_dtype="bf16", kv_dtype=None,
              act_dtype="bf16", attention="fused", sets=None, phases=("prefill", "decode"), quantize_embeddings=False,
              tp=1, pp=1, ep=1, mode="roofline", impl=None, redundant_experts=0):
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
    redundant_experts : int -- {_REDUNDANT}

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
                                 phases, quantize_embeddings, tp, pp, ep, mode, impl, redundant_experts))


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
           act_dtype="bf16", context=1024, sets=None, quantize_embeddings=False, tp=1, pp=1, ep=1, replicas=1,
           redundant_experts=0):
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
    redundant_experts : int -- {_REDUNDANT}

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
                              quantize_embeddings, tp, pp, ep, replicas, redundant_experts))


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
    from .. import whatif

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
    from .. import whatif

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
    from .. import whatif

    return _frame(whatif.weights(model, weights_dtype, act_dtype, quantize_embeddings, sets))


