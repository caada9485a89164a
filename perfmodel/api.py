"""The query layer: every CLI command and every notebook call goes through these functions.

Each returns a Table: an ordered dict of equal-length columns (numpy arrays or lists) in SI units.
`perfmodel.decode(...)` etc. (see __init__.py) wrap the same tables in pandas DataFrames; the CLI
formats them without importing pandas, to keep a query's cold start short.
"""
from __future__ import annotations

import warnings

import numpy as np

from . import engine
from .errors import ContextWarning, SpecError
from .ops import Layout, Precision, build_ops, param_count
from .specs import (Hardware, Model, catalog_names, check_sets, hardware_from_dict, load_hardware, load_impl,
                    load_model, load_raw)
from .timemodel import DEFAULT_IMPL, impl_name
from .units import parse_quantity

Table = dict

DEFAULT_MODEL, DEFAULT_HARDWARE = "llama-2-13b", "h100-sxm"


def _names(x, opt: str = "a name list") -> list:
    if isinstance(x, (Model, Hardware)):
        return [x]
    if isinstance(x, str):
        from .fields import split_list

        return split_list(x, opt) if x.strip().strip(",") else []
    return list(x)


def _required(x, opt: str) -> list:
    """The names in a -m/-H value; an empty list ('' or ',') is an error, not an empty result."""
    names = _names(x, opt)
    if not names:
        raise SpecError(opt, None, f"needs at least one name, got {x!r}")
    if isinstance(x, str):  # a comma list as typed: a name given twice is queried once
        names = list(dict.fromkeys(names))
    if len(names) > MAX_NAMES:
        raise SpecError(opt, None, f"{len(names):,} entries; at most {MAX_NAMES:,} per query")
    return names


def _warn_context(m: Model, S, what: str = "--context") -> None:
    """A context beyond max_context still computes; say so once per model (ContextWarning).

    The warning points at the first caller outside the perfmodel package (a notebook cell, a
    script line), in Python words (`context=8192 is beyond max_context=4096`). Under the CLI the
    message keeps the option's words (`--context 8192 > 4096`), which `perfmodel` prints on its
    one `perfmodel: warning:` line."""
    import os
    import sys

    top = float(np.max(S))
    if top <= m.max_context:
        return
    pkg = os.path.dirname(os.path.abspath(__file__)) + os.sep
    cli = pkg + "cli" + os.sep
    frame, level, from_cli = sys._getframe(1), 2, False
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(pkg):
        from_cli = from_cli or os.path.abspath(frame.f_code.co_filename).startswith(cli)
        frame, level = frame.f_back, level + 1
    if from_cli:
        text = f"{m.name} {what} {top:.0f} > {m.max_context}"
    else:
        arg = what.replace("--", "").replace(" ", "")  # "context", "prompt+generate"
        text = (f"{m.name}: {arg}={top:.0f} is beyond max_context={m.max_context} (computed anyway; the model was not "
                "trained this long)")
    warnings.warn(text, ContextWarning, stacklevel=level)


MAX_POINTS, MAX_STEPS = 10**6, 10**7  # grid points per query (all models x hardware); grid points x decode steps per request
MAX_NAMES = 1000  # models or hardware in one -m or -H list (the catalogs hold about 40 each)


def _prec(weights_dtype="bf16", kv_dtype=None, act_dtype="bf16", quantize_embeddings=False) -> Precision:
    try:
        return Precision(weights_dtype, act_dtype, kv_dtype, quantize_embeddings)  # checks itself (ops.Precision)
    except SpecError as e:
        raise _as_flags(e, {"weights=": "--weights-dtype", "act=": "--act-dtype", "kv=": "--kv-dtype",
                            "quantize_embeddings=": "--quantize-embeddings"}) from None


def _positive(values, name, integer=True) -> np.ndarray:
    from .units import parse_count

    try:
        if isinstance(values, str):  # "1,8,64" or "4k,128Ki", as the CLI takes them
            from .fields import split_list

            values = [parse_count(x) for x in split_list(values, name)]
        elif isinstance(values, (list, tuple)) and any(isinstance(x, str) for x in values):
            values = [parse_count(x) for x in values]
        a = np.atleast_1d(np.asarray(values, dtype=np.float64))
    except (ValueError, TypeError):
        raise SpecError(name, None, f"expected numbers (4096, 128k = 128,000, 128Ki = 131,072), got {values!r}") from None
    if a.size == 0:
        raise SpecError(name, None, "needs at least one value")
    shown = ",".join(f"{x:g}" for x in a)
    if not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise SpecError(name, None, f"must be positive, got {shown}")
    if np.any(a > 2.0**53):  # beyond exact float64 integers, and products of such values overflow
        raise SpecError(name, None, f"must be at most 2**53 (9.007e15), got {shown}")
    if integer and np.any(a != np.floor(a)):
        raise SpecError(name, None, f"must be whole numbers, got {shown}")
    return a


def _flat(cols: dict) -> Table:
    """Broadcast every column to the grid's shape and flatten (scalars and strings repeat)."""
    shape = np.broadcast_shapes(*[np.shape(v) for v in cols.values() if isinstance(v, np.ndarray)])
    return {k: (np.broadcast_to(v, shape).ravel() if isinstance(v, np.ndarray)
                else np.full(int(np.prod(shape)), v, dtype=object)) for k, v in cols.items()}


def concat(tables: list[Table]) -> Table:
    if not tables:
        return {}
    return {k: np.concatenate([np.asarray(t[k]) for t in tables]) for k in tables[0]}


def specs(model=DEFAULT_MODEL, hardware=DEFAULT_HARDWARE, sets: dict | None = None):
    check_sets(sets)
    return ([load_model(m, sets) for m in _required(model, "--model")],
            [load_hardware(h, sets) for h in _required(hardware, "--hardware")])


PHASE_COLUMNS = ["model", "hardware", "batch", "context", "mode", "latency_s", "throughput_tok_s", "weight_bytes",
                 "kv_cache_bytes", "memory_bytes", "fits", "bound", "intensity"]
LAYOUT_COLUMNS = ["tp", "pp", "ep", "redundant_experts", "replicas", "devices", "comm_time_s"]  # redundant_experts: where > 0


def _as_flags(e: SpecError, flags: dict) -> SpecError:
    """A class's own message (`tp=: ...`, as Python callers name it) with the CLI's flag names (`--tp: ...`)."""
    where = "/".join(flags.get(w, w) for w in str(e.where).split("/"))
    return SpecError(where, e.field, e.problem)


def layout(tp=1, pp=1, ep=1, replicas=1, microbatches=None, redundant_experts=0) -> Layout:
    try:  # Layout checks itself (ops.Layout.__post_init__)
        return Layout(tp, pp, ep, replicas, microbatches, redundant_experts=redundant_experts)
    except SpecError as e:
        raise _as_flags(e, {f"{k}=": "--" + k.replace("_", "-") for k in
                            ("tp", "pp", "ep", "replicas", "microbatches", "redundant_experts")}) from None


def _layout_cols(r: dict, lay: Layout) -> dict:
    extra = {"redundant_experts": float(lay.redundant_experts)} if lay.redundant_experts else {}
    return {"tp": float(lay.tp), "pp": float(lay.pp), "ep": float(lay.ep), **extra, "replicas": float(lay.replicas),
            "devices": float(lay.devices), "comm_time_s": r["comm_time_s"]}


def _scalar(x):
    """A 0-d result as a Python float (a summary's field), an array as it is (a table's column)."""
    return float(x) if np.ndim(x) == 0 else x


def prices_for(price, hws: list) -> list:
    """--price as every command takes it: one value for every hardware, or one per hardware in -H order
    ('2.49/h,3.5/h'). An empty entry is an error, not dropped (',2/h' would price the second device as the
    first). Each is checked before any work."""
    if price is None:
        return [None] * len(hws)
    if isinstance(price, str):
        from .fields import split_list

        parts = split_list(price, "--price")
    else:
        parts = list(np.atleast_1d(price))
    if len(parts) == 1:
        parts = parts * len(hws)
    if len(parts) != len(hws):
        raise SpecError("--price", None, f"give one price, or one per hardware ({len(hws)}), got {len(parts)}")
    for p in parts:
        _quantity(p, "--price", "USD/h")  # a bad price is one line before any work
    return parts


def economics(cols: dict, hw: Hardware, devices: float, price=None, energy: bool = False) -> dict:
    """Cost per million generated tokens and energy per token at the computed throughput.

    price: USD per device-hour (a number or "2.49/h"), else the spec's price_per_hour. Energy uses a
    measured `power` when the spec has one, else TDP: an upper bound, since a device at full memory
    bandwidth rarely draws its whole TDP.
    """
    thr = cols["throughput_tok_s"]
    # a configuration that does not fit has no cost or energy: NaN (printed '-'), not the number of a run that
    # cannot happen
    fits = np.asarray(cols.get("fits", True), bool)
    if price is not None or hw.price_per_hour:
        rate = _quantity(price, "--price", "USD/h") if price is not None else hw.price_per_hour
        cols["cost_per_million_tokens"] = _scalar(np.where(fits, rate * devices / 3600.0 / thr * 1e6, np.nan))
    if energy:
        watts = hw.power or hw.tdp
        if not watts:
            raise SpecError(hw.key or hw.name, "tdp", "energy needs a tdp or a measured power in the hardware spec")
        cols["energy_per_token_j"] = _scalar(np.where(fits, watts * devices / thr, np.nan))
    return cols


def check_mode(mode, impl=None, modes=None, sets=None):
    """--mode is one of roofline, achievable, simple; --impl (an implementation profile) goes with achievable.
    Returns the implementation profile to price with (loaded, with any `--set impl.field=...`), or None."""
    modes = modes or engine.MODES
    if mode not in modes:
        raise SpecError("--mode", None, f"must be one of {', '.join(modes)}, got {mode!r}")
    if impl is not None and mode != "achievable":
        raise SpecError("--impl", None, f"an implementation profile prices the achievable mode; --mode is {mode}")
    if mode != "achievable":
        if any(str(k).startswith("impl.") for k in (sets or {})):
            raise SpecError("--set", "impl", "implementation-profile fields go with --mode achievable")
        return None
    return load_impl(impl or DEFAULT_IMPL, sets)  # a bad profile is one line before any work


def mode_cols(mode, impl=None) -> dict:
    """The columns that label every time: the mode, and in the achievable mode the implementation profile."""
    if mode != "achievable":
        return {}
    return {"impl": impl_name(impl)}


def _phase(phase, model, hardware, batch, context, mode, weights_dtype, kv_dtype, act_dtype, attention, sets,
           quantize_embeddings=False, extra=(), lay: Layout | None = None, price=None, energy=False,
           impl=None) -> Table:
    prec = _prec(weights_dtype, kv_dtype, act_dtype, quantize_embeddings)
    B, S = _positive(batch, "--batch"), _positive(context, "--context")
    impl = check_mode(mode, impl, sets=sets)
    if attention not in ("fused", "unfused"):
        raise SpecError("--attention", None, f"must be fused or unfused, got {attention!r}")
    pairs = len(_required(model, "--model")) * len(_required(hardware, "--hardware"))
    if B.size * S.size * pairs > MAX_POINTS:  # over every model and hardware together, before any spec is read
        raise SpecError("--batch/--context", None, f"{B.size:,} x {S.size:,} points x {pairs:,} model-hardware pairs; "
                                                    f"at most {MAX_POINTS:,} per query (perfmodel sweep -o FILE streams "
                                                    "bigger grids)")
    models, hws = specs(model, hardware, sets)
    prices = prices_for(price, hws)
    out = []
    for m in models:
        _warn_context(m, S)
        for hw, pr in zip(hws, prices):
            r = engine.evaluate(m, hw, B, S, phase, mode, prec, attention, layout=lay, impl=impl)
            cols = {k: r[k] for k in PHASE_COLUMNS + list(extra)}
            cols.update(mode_cols(mode, impl))
            if mode == "achievable":  # the share of device time priced from measured kernel tables
                cols["measured_share"] = r["measured_share"]
            if lay is not None and lay != Layout():
                cols.update(_layout_cols(r, lay))
            out.append(_flat(economics(cols, hw, (lay or Layout()).devices, pr, energy)))
    return concat(out)


_POINT: dict = {}  # (hardware, mode, impl) -> TimeModel; (formats) -> Precision: what a point query re-derives


def point(model=DEFAULT_MODEL, hardware=DEFAULT_HARDWARE, batch=1, context=1024, phase="decode", mode="roofline",
          weights_dtype="bf16", kv_dtype=None, act_dtype="bf16", impl=None) -> dict:
    """One (batch, context) point on one model and device, as a dict of Python numbers: the lean single-point
    query. The same op list and time model as decode()/prefill(), the same numbers to the last bit, without
    building a table: names resolve to cached spec objects, the precision and time model are reused."""
    m = model if isinstance(model, Model) else load_model(model)
    hw = hardware if isinstance(hardware, Hardware) else load_hardware(hardware)
    pk = (weights_dtype, kv_dtype, act_dtype)
    prec = _POINT.get(pk) or _POINT.setdefault(pk, _prec(weights_dtype, kv_dtype, act_dtype))
    if mode not in ("roofline", "achievable", "simple") or phase not in ("decode", "prefill"):
        check_mode(mode, impl)
        raise SpecError("--phase", None, f"must be decode or prefill, got {phase!r}")
    tk = (id(hw), mode, impl if isinstance(impl, (str, type(None))) else id(impl))  # spec objects are cached per file
    tm = _POINT.get(tk)
    if tm is None:
        tm = _POINT[tk] = engine.time_model(mode, hw, check_mode(mode, impl))
    B, S = float(batch), float(context)
    if not (B > 0 and S > 0) or B != int(B) or S != int(S):
        _positive(batch, "--batch"), _positive(context, "--context")
    if S > m.max_context:
        _warn_context(m, S)
    r = engine.evaluate(m, hw, B, S, phase, mode, prec, grid=False, tm=tm)
    out = {"model": m.name, "hardware": hw.key or hw.name, "phase": phase, "mode": mode, "batch": B, "context": S}
    for k in ("latency_s", "throughput_tok_s", "weight_bytes", "kv_cache_bytes", "memory_bytes", "intensity"):
        out[k] = float(r[k])
    out["fits"], out["bound"] = bool(r["fits"]), str(r["bound"])
    return out


def decode(model=DEFAULT_MODEL, hardware=DEFAULT_HARDWARE, batch=(1, 8, 64, 256), context=1024, mode="roofline",
           weights_dtype="bf16", kv_dtype=None, act_dtype="bf16", attention="fused", sets=None,
           quantize_embeddings=False, tp=1, pp=1, ep=1, replicas=1, microbatches=None, price=None,
           energy=False, impl=None, redundant_experts=0) -> Table:
    """One decode step (T = 1) per batch size x context: latency, throughput B/step, memory, fit.

    mode: roofline (the ideal bound: datasheet peaks, no overheads), achievable (what a good
    implementation reaches, from the hardware's achievable terms and the implementation profile
    `impl`, default "graphs"; see `perfmodel list impl`) or simple (the lecture's closed form).
    With tp/pp/ep/replicas: per-device memory, all-replica throughput, and comm_time_s; redundant_experts: R
    extra expert slots over the ep groups (expert-parallel load balancing: (E + R) / ep experts a device).
    With price (USD per device-hour) or energy=True: cost per million tokens, joules per token."""
    return _phase("decode", model, hardware, batch, context, mode, weights_dtype, kv_dtype, act_dtype, attention,
                  sets, quantize_embeddings, lay=layout(tp, pp, ep, replicas, microbatches, redundant_experts),
                  price=price,
                  energy=energy, impl=impl)


def prefill(model=DEFAULT_MODEL, hardware=DEFAULT_HARDWARE, batch=1, context=(128, 512, 1024, 4096),
            mode="roofline", weights_dtype="bf16", kv_dtype=None, act_dtype="bf16", attention="fused", sets=None,
            quantize_embeddings=False, tp=1, pp=1, ep=1, replicas=1, microbatches=None, impl=None,
            redundant_experts=0) -> Table:
    """Prefill of `context` prompt tokens per sequence (TTFT); throughput counts prompt tokens.
    mode, impl and redundant_experts as in decode."""
    return _phase("prefill", model, hardware, batch, context, mode, weights_dtype, kv_dtype, act_dtype, attention,
                  sets, quantize_embeddings, lay=layout(tp, pp, ep, replicas, microbatches, redundant_experts),
                  impl=impl)


def request(model=DEFAULT_MODEL, hardware=DEFAULT_HARDWARE, batch=1, prompt=1024, generate=256, mode="roofline",
            weights_dtype="bf16", kv_dtype=None, act_dtype="bf16", attention="fused", sets=None,
            quantize_embeddings=False, tp=1, pp=1, ep=1, replicas=1, microbatches=None, price=None,
            energy=False, impl=None, redundant_experts=0) -> Table:
    """A whole request: prefill P prompt tokens, then generate G tokens (context grows each step).
    mode, impl and redundant_experts as in decode."""
    impl = check_mode(mode, impl, sets=sets)
    prec = _prec(weights_dtype, kv_dtype, act_dtype, quantize_embeddings)
    B, P = _positive(batch, "--batch"), _positive(prompt, "--prompt")
    G = _positive(generate, "--generate")
    if G.size != 1:
        raise SpecError("--generate", None, "takes one value")
    if B.size * P.size * (G[0] + 2) > MAX_STEPS:
        raise SpecError("--generate", None, f"{B.size * P.size:,} points x {G[0]:g} steps is more than {MAX_STEPS:,} "
                                             "decode evaluations per request")
    lay = layout(tp, pp, ep, replicas, microbatches, redundant_experts)
    models, hws = specs(model, hardware, sets)
    prices = prices_for(price, hws)
    out = []
    for m in models:
        _warn_context(m, P + G[0], "--prompt + --generate")
        for hw, pr in zip(hws, prices):
            r = engine.request(m, hw, B, P, int(G[0]), mode, prec, attention, layout=lay, impl=impl)
            r["context"] = r["prompt"] + G[0]
            cols = {k: r[k] for k in PHASE_COLUMNS + ["prompt", "generate", "ttft_s", "decode_s"]}
            cols.update(mode_cols(mode, impl))
            if lay != Layout():
                cols.update(_layout_cols(r, lay))
            out.append(_flat(economics(cols, hw, lay.devices, pr, energy)))
    return concat(out)


def intensity(model=DEFAULT_MODEL, hardware=DEFAULT_HARDWARE, batch=1, context=1024, weights_dtype="bf16",
              kv_dtype=None, act_dtype="bf16", attention="fused", sets=None, phases=("prefill", "decode"),
              quantize_embeddings=False, tp=1, pp=1, ep=1, mode="roofline", impl=None, redundant_experts=0) -> Table:
    """Per-op FLOPs, bytes, intensity, time and bound, for prefill and decode (all layers).

    time_s is the op's roofline time (mode roofline) or its achievable time on the device (mode
    achievable, implementation profile `impl`); in the achievable mode two more rows per phase make
    the times add up to the step: `host wait` (the host launching kernels slower than the device
    runs them) and `step overhead` (scheduling and sampling). With a layout, one device's ops, and the
    collectives as rows whose bytes are those each device sends over the link (bound "link" or
    "network") with the algorithm the time model chose."""
    impl = check_mode(mode, impl, ("roofline", "achievable"), sets)
    prec = _prec(weights_dtype, kv_dtype, act_dtype, quantize_embeddings)
    B = float(_positive(batch, "--batch")[0])
    S = float(_positive(context, "--context")[0])
    (m,), (hw,) = specs(model, hardware, sets)
    _warn_context(m, S)
    lay = layout(tp, pp, ep, redundant_experts=redundant_experts)
    tmodel = engine.time_model(mode, hw, impl)
    rows = {k: [] for k in ("op", "phase", "layers", "flops", "bytes", "intensity", "time_s", "bound", "priced_by")}

    def row(*vals):
        for k, v in zip(rows, vals):
            rows[k].append(v)

    for phase in phases:
        ops = build_ops(m, B, 1.0 if phase == "decode" else S, S, phase, prec, attention, layout=lay)
        device = host = step = 0.0
        src: list = []
        for op, (tc, tmem, t, nb, t_cpu, t_step), by in zip(ops, tmodel.price(ops, hw, prec, lay, sources=src), src):
            comm = op.kind == "comm"
            f = float(op.flops) * op.count
            b = float(np.sum(nb)) * op.count
            bound = engine.link_cost(hw, lay, op.link)[2] if comm else ("compute" if tc > tmem else "memory")
            row(op.label, phase, op.count, f, b, f / b if b else float("inf"), float(t) * op.count, bound,
                by if mode == "achievable" else "roofline")
            device, host, step = device + float(t) * op.count, host + t_cpu * op.count, step + t_step * op.count
        if host > device:
            row("host wait", phase, 1, 0.0, 0.0, float("nan"), host - device, "host", "impl")
        if step:
            row("step overhead", phase, 1, 0.0, 0.0, float("nan"), step, "host", "impl")
    out = {k: np.asarray(v, dtype=object if k in ("op", "phase", "bound", "priced_by") else float)
           for k, v in rows.items()}
    n = len(rows["op"])
    out["mode"] = np.full(n, mode, dtype=object)
    for k, v in mode_cols(mode, impl).items():
        out[k] = np.full(n, v, dtype=object)
    return out


def kv(model=DEFAULT_MODEL, context=1024, batch=1, kv_dtype="bf16", sets=None) -> Table:
    """KV-cache bytes per token (average at that context) and for the whole batch."""
    prec = _prec("bf16", kv_dtype, "bf16")
    B, S = _positive(batch, "--batch"), _positive(context, "--context")
    check_sets(sets)
    out = []
    for name in _required(model, "--model"):
        m = load_model(name, sets)
        _warn_context(m, S)
        Bg, Sg = np.meshgrid(B, S, indexing="ij")
        ps = engine.per_sequence(m, Sg, prec)
        out.append(_flat({"model": m.name, "context": Sg, "batch": Bg, "kv_bytes_per_token": ps["kv_bytes_per_seq"] / Sg,
                          "kv_cache_bytes": Bg * ps["kv_bytes_per_seq"]}))
    return concat(out)


def budget(model=DEFAULT_MODEL, hardware=None, memory=None, overhead=0.0, weights_dtype="bf16", kv_dtype=None,
           act_dtype="bf16", context=1024, sets=None, quantize_embeddings=False, tp=1, pp=1, ep=1, replicas=1,
           redundant_experts=0) -> Table:
    """The inverse question: after weights and overhead, how many KV tokens fit, and how many users
    at each context (KV plus each sequence's decode activations). redundant_experts as in decode: the
    copies' weights take memory the KV cache would have had."""
    prec = _prec(weights_dtype, kv_dtype, act_dtype, quantize_embeddings)
    S = _positive(context, "--context")
    cap = _quantity(memory, "--memory", "bytes") if memory is not None else None
    over = _quantity(overhead, "--overhead", "bytes", allow_zero=True)
    if cap is None:
        (hw,) = specs(DEFAULT_MODEL, hardware or DEFAULT_HARDWARE, sets)[1]
        cap, device = hw.memory_capacity, hw.key or hw.name
    else:
        if hardware is not None:
            raise SpecError("--memory", None, "give either -H HARDWARE or --memory, not both")
        device = "custom"
    check_sets(sets)
    lay = layout(tp, pp, ep, replicas, redundant_experts=redundant_experts)
    out = []
    for name in _required(model, "--model"):
        m = load_model(name, sets)
        _warn_context(m, S)
        ps = engine.per_sequence(m, S, prec, layout=lay)  # per device
        free = cap - over - ps["weight_bytes"]
        # KV tokens one replica holds: each of its ep device groups holds its own sequences' KV
        max_tokens = np.maximum(np.floor(free / (ps["kv_bytes_per_seq"] / S)), 0) * lay.ep
        mb = engine.max_batch(m, cap, S, prec, over, layout=lay)
        cols = {"model": m.name, "hardware": device, "memory_capacity": cap + 0 * S, "overhead_bytes": over,
                "weight_bytes": ps["weight_bytes"] + 0 * S, "context": S, "kv_bytes_per_token": ps["kv_bytes_per_seq"] / S,
                "max_tokens": max_tokens, "max_batch": mb, "fits": free > 0}
        if lay != Layout():
            cols.update(tp=float(lay.tp), pp=float(lay.pp), ep=float(lay.ep), replicas=float(lay.replicas),
                        devices=float(lay.devices))
            if lay.redundant_experts:
                cols.update(redundant_experts=float(lay.redundant_experts))
        out.append(_flat(cols))
    return concat(out)


def _quantity(v, name, dim, allow_zero=False) -> float:
    if allow_zero and (v == 0 or v == "0"):
        return 0.0
    try:
        return parse_quantity(v, dim)
    except ValueError as e:
        raise SpecError(name, None, str(e)) from None


def show(name: str, sets=None, weights_dtype="bf16", kv_dtype=None) -> Table:
    """A spec with its derived numbers: params, KV bytes per token and weight bytes for a model;
    ridge points for a hardware spec."""
    check_sets(sets)
    kind = _kind_of(name)
    if kind == "models":
        m = load_model(name, sets)
        prec = _prec(weights_dtype, kv_dtype)
        ps = engine.per_sequence(m, np.array([float(m.max_context)]), prec)
        row = {"name": m.name, "params": param_count(m), "kv_bytes_per_token": engine.kv_growth_per_token(m, prec),
               "weight_bytes": float(ps["weight_bytes"]), "published_params": m.published_params or np.nan,
               "kv_bytes_at_max_context": float(ps["kv_bytes_per_seq"][0]),
               "fixed_state_bytes_per_seq": float(ps["fixed_state_bytes_per_seq"][0])}
        for f in ("vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads", "head_dim", "d_ff", "max_context",
                  "mlp", "tied_embeddings", "sliding_window", "layer_pattern", "kv_share", "source"):
            row[f] = getattr(m, f)
        defaults = {"norm": "rmsnorm", "norms_per_layer": 2, "qk_norm": None, "position": "rope", "nope_kinds": "",
                    "attention_chunk": None, "attention_sinks": False, "qkv_bias": False, "o_bias": False,
                    "linear_bias": False, "linear_state": None}
        for f, d in defaults.items():  # the schema's newer features, where a model uses them
            if getattr(m, f) != d:
                row[f] = getattr(m, f)
        if m.weight_formats:
            row["weight_formats"] = ",".join(f"{g}={f}" for g, f in m.weight_formats)
        if m.mla:
            row["mla"] = str(m.mla)
        if m.moe:
            from .ops import active_param_count

            row["moe"] = str(m.moe)
            row["active_params"] = active_param_count(m, m.published_active_input_embedding)
            row["published_active_params"] = m.published_active or np.nan
        if m.published_excluded:
            row["published_excluded"] = f"{m.published_excluded:,} ({m.published_excluded_what})"
    else:
        hw = load_hardware(name, sets)
        row = {"name": hw.name, "memory_capacity": hw.memory_capacity, "memory_bandwidth": hw.memory_bandwidth}
        for k, v in hw.peak_flops.items():
            row[f"peak_{k}_flops"] = v
            row[f"ridge_{k}"] = v / hw.memory_bandwidth
        for k in ("interconnect_bandwidth", "l2_cache", "tdp", "link_bandwidth", "link_latency", "devices_per_node",
                  "network_bandwidth", "network_latency"):
            if getattr(hw, k) is not None:
                row[k + ("_s" if k.endswith("latency") else "")] = getattr(hw, k)
        if hw.link_algorithms:
            row["link_algorithms"] = ",".join(hw.link_algorithms)
        a = hw.achievable
        if a is not None:  # the achievable mode's terms (docs/achievable.md)
            row.update({"hbm_efficiency": a.hbm_efficiency, "kernel_latency_s": a.kernel_latency,
                        "gemm_latency_s": a.gemm_latency, "attention_latency_s": a.attention_latency,
                        "attention_bandwidth": a.attention_bandwidth, "attention_half_keys": a.attention_half_keys})
            for k, v in a.gemm_efficiency.items():
                row[f"gemm_efficiency_{k}"] = v
            for k, v in a.attention_compute.items():
                row[f"attention_compute_{k}"] = v
            for k, d in a.dequant.items():
                row[f"dequant_{k}"] = f"bandwidth {d.bandwidth:g}, compute {d.compute:g}"
            for kind, table in (("link", a.link), ("network", a.network)):
                for name, alg in table.items():
                    lat = ", ".join(f"{pp}: {s * 1e6:.3g} us" if pp else f"{s * 1e6:.3g} us" for pp, s in alg.latency)
                    lim = f", up to {alg.max_bytes / 2**20:g} MiB" if np.isfinite(alg.max_bytes) else ""
                    row[f"{kind}_{name}"] = f"latency {lat}; efficiency {alg.efficiency:g}{lim}"
    return {k: np.asarray([v], dtype=object if isinstance(v, str) or v is None else None) for k, v in row.items()}


def _kind_of(name) -> str:
    if isinstance(name, Model):
        return "models"
    if isinstance(name, Hardware):
        return "hardware"
    if str(name) in catalog_names("models"):
        return "models"
    if str(name) in catalog_names("hardware"):
        return "hardware"
    if str(name).endswith(".json"):  # a Hugging Face config.json: specs.load_model converts it
        return "models"
    data, path = load_raw(name, "models")  # a user's file: hardware has memory_bandwidth, models d_model
    return "hardware" if "memory_bandwidth" in data else "models"


def summary(m: Model) -> str:
    """A model in one line, from its spec: parameters (active for MoE), layers, attention, context."""
    from .ops import active_param_count

    p = param_count(m)
    size = f"{p / 1e12:.3g}T" if p >= 1e12 else f"{p / 1e9:.3g}B" if p >= 1e9 else f"{p / 1e6:.3g}M"
    kinds = set(m.layer_kinds())
    if m.mla:
        att = f"MLA (latent {m.mla.kv_lora_rank})"
    elif m.K == m.N:
        att = f"MHA ({m.N} heads)"
    elif m.K == 1:
        att = f"MQA ({m.N} heads)"
    else:
        att = f"GQA ({m.N} heads, {m.K} KV)"
    if m.kv_share > 1:
        att += f", KV shared by {m.kv_share} layers"
    extra = [w for w, c in (("sliding window", "L"), ("chunked", "C"), ("linear", "R")) if c in kinds]
    if extra:
        att += " + " + ", ".join(extra) + f" layers ({m.layer_pattern})"
    kind = "dense"
    if m.moe:
        active = active_param_count(m, m.published_active_input_embedding)  # counted as its publisher counts it
        kind = f"MoE, {active / 1e9:.3g}B active ({m.moe.n_experts} experts, top-{m.moe.n_active})"
    return f"{size} {kind}; {m.n_layers} layers, {att}; {m.max_context:,}-token context"


def list_specs(kind: str = "all") -> Table:
    kinds = {"all": ("hardware", "models", "impl"), "hardware": ("hardware",), "models": ("models",), "impl": ("impl",)}
    if kind not in kinds:
        raise SpecError("list", None, f"choose hardware, models or impl (implementation profiles), got {kind!r}")
    rows = {"kind": [], "name": [], "description": []}
    for k in kinds[kind]:
        for n in catalog_names(k):
            data, _ = load_raw(n, k)
            rows["kind"].append(k)
            rows["name"].append(n)
            text = data.get("description") or (summary(load_model(n)) if k == "models" else data.get("name", ""))
            text = " ".join(str(text).split())
            rows["description"].append(text if len(text) <= 100 else text[:99] + "…")
    return {k: np.asarray(v, dtype=object) for k, v in rows.items()}


def ridge(hardware=DEFAULT_HARDWARE, dtype="bf16") -> float:
    return load_hardware(hardware).ridge(dtype)


__all__ = ["decode", "prefill", "request", "intensity", "kv", "budget", "show", "list_specs", "ridge",
           "hardware_from_dict"]
