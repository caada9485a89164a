"""What-if questions, each answered from the same op list: formats, KV-reduction comparisons,
speculative decoding, attention kernels, and the cost of generating without a KV cache.

All functions return dict-of-columns tables (SI units), like perfmodel.api.
"""
from __future__ import annotations

import numpy as np

from . import engine
from .api import _flat, _names, _positive, _prec, concat, specs
from .errors import SpecError
from .formats import get_format, is_weight_only, known_formats
from .ops import Precision, build_ops
from .specs import Model, load_hardware, load_model, model_from_dict
from .timemodel import impl_name

# ---------------------------------------------------------------- formats and quantized layers
_COMPONENT = (("norm", "norms"), ("embed", "embedding"), ("pos_embed", "embedding"), ("lm_head", "lm_head"), ("router", "router"),
              ("shared_expert", "shared experts"), ("expert", "experts"), ("mlp", "mlp"))


def _component(op_name: str) -> str:
    for prefix, comp in _COMPONENT:
        if op_name.startswith(prefix) or op_name.endswith(prefix):
            return comp
    return "attention"


def formats(row: int = 4096) -> dict:
    """Every storage format with its bits per weight (scales included) and the peak it computes at."""
    rows = {"format": [], "bits_per_weight": [], "bytes_per_weight": [], "compute_peak": [], "layout": []}
    for n in known_formats():
        f = get_format(n)
        bits = f.bits_per_element(row=row if f.group is None else None)
        for k, v in (("format", n), ("bits_per_weight", bits), ("bytes_per_weight", bits / 8),
                     ("compute_peak", f.peak), ("layout", f.note + (f" (per-row scale: row of {row})" if f.group is None else ""))):
            rows[k].append(v)
    return {k: np.asarray(v, dtype=object if k in ("format", "compute_peak", "layout") else float) for k, v in rows.items()}


def weights(model="llama-2-13b", weights_dtype="bf16", act_dtype="bf16", quantize_embeddings=False, sets=None) -> dict:
    """Which layers are stored in which format: params and bytes per component, from the op list."""
    prec = _prec(weights_dtype, None, act_dtype, quantize_embeddings)
    (m,), _ = specs(model, "h100-sxm", sets)
    acc: dict = {}
    for op in build_ops(m, 1.0, 1.0, 1.0, "decode", prec):
        if op.params:
            key = (_component(op.name), op.wfmt)
            p, b = acc.get(key, (0, 0.0))
            acc[key] = (p + op.params * op.count, b + float(op.w_stored) * op.count)
    rows = {"model": [], "component": [], "format": [], "params": [], "weight_bytes": [], "bits_per_weight": []}
    for (comp, fmt), (p, b) in acc.items():
        for k, v in (("model", m.name), ("component", comp), ("format", fmt), ("params", p), ("weight_bytes", b),
                     ("bits_per_weight", 8 * b / p)):
            rows[k].append(v)
    obj = ("model", "component", "format")
    return {k: np.asarray(v, dtype=object if k in obj else float) for k, v in rows.items()}


def quantization_note(prec: Precision) -> str:
    """One line saying which layers are quantized and at which rate the math runs."""
    wf, af, kf, hf = prec.formats()
    kept = "" if hf is wf else f"; embeddings, LM head, norms and biases kept in {hf.name}"
    math = (f"weight-only: dequantized on the fly, math at the {af.peak} rate" if is_weight_only(wf, af)
            else f"math at the {af.peak} tensor rate")
    return f"weights {wf.name} ({wf.bits_per_element(row=4096 if wf.group is None else None):.4g} bits) in attention and MLP" \
           f"{kept}; activations {af.name}; KV cache {kf.name}; {math}"


# ---------------------------------------------------------------- comparing KV-reduction variants
COMPARE_COLUMNS = ["model", "hardware", "batch", "context", "mode", "latency_s", "throughput_tok_s", "weight_bytes",
                   "kv_cache_bytes", "memory_bytes", "fits", "bound", "intensity", "kv_bytes_per_token",
                   "kv_bytes_per_seq", "max_batch", "kv_ratio", "latency_ratio", "throughput_ratio",
                   "max_batch_ratio"]


def compare(models, hardware="h100-sxm", batch=(1, 64, 256), context=(1024, 8192, 32768), mode="roofline",
            weights_dtype="bf16", kv_dtype=None, act_dtype="bf16", attention="fused", sets=None,
            quantize_embeddings=False, impl=None) -> dict:
    """Models side by side at each batch x context: KV per token and per sequence, memory, step
    latency, throughput, largest batch that fits, and ratios against the first model."""
    prec = _prec(weights_dtype, kv_dtype, act_dtype, quantize_embeddings)
    B, S = _positive(batch, "--batch"), _positive(context, "--context")
    from .api import check_mode

    impl = check_mode(mode, impl, sets=sets)
    ms, (hw,) = specs(models, hardware, sets)
    tables = []
    for m in ms:
        r = engine.evaluate(m, hw, B, S, "decode", mode, prec, attention, impl=impl)
        ps = engine.per_sequence(m, r["context"], prec)
        r["kv_bytes_per_seq"] = ps["kv_bytes_per_seq"]
        r["kv_bytes_per_token"] = ps["kv_bytes_per_seq"] / r["context"]
        r["max_batch"] = engine.max_batch(m, hw.memory_capacity, r["context"], prec)
        tables.append(r)
    first = tables[0]
    out = []
    for r in tables:
        r["kv_ratio"] = r["kv_bytes_per_seq"] / first["kv_bytes_per_seq"]
        r["latency_ratio"] = r["latency_s"] / first["latency_s"]
        r["throughput_ratio"] = r["throughput_tok_s"] / first["throughput_tok_s"]
        with np.errstate(divide="ignore", invalid="ignore"):
            r["max_batch_ratio"] = np.where(first["max_batch"] > 0, r["max_batch"] / np.maximum(first["max_batch"], 1), np.nan)
        cols = {k: r[k] for k in COMPARE_COLUMNS}
        if mode == "achievable":
            cols["impl"] = impl_name(impl)
        out.append(_flat(cols))
    return concat(out)


# ---------------------------------------------------------------- speculative decoding
def expected_tokens(alpha, gamma):
    """Tokens produced per verification round: (1 - alpha^(gamma+1)) / (1 - alpha); gamma+1 at alpha = 1
    (Leviathan et al. 2023, eq. 1)."""
    a, g = np.asarray(alpha, float), np.asarray(gamma, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        e = (1 - a ** (g + 1)) / (1 - a)
    return np.where(a >= 1, g + 1, e)


def speedup(alpha, gamma, draft_cost, verify_cost=1.0):
    """Expected tokens per round over the round's cost in target steps: gamma*c + verify (1 when
    verifying gamma+1 tokens costs one step, the BRIEF's formula)."""
    return expected_tokens(alpha, gamma) / (np.asarray(gamma, float) * np.asarray(draft_cost, float) + verify_cost)


def best_gamma(alpha, draft_cost, verify_cost=None, max_gamma=32):
    """The gamma in 1..max_gamma that maximises the speedup (verify_cost: array over gamma, or 1)."""
    g = np.arange(1, max_gamma + 1, dtype=float)
    a = np.asarray(alpha, float)[..., None]
    c = np.asarray(draft_cost, float)[..., None]
    v = 1.0 if verify_cost is None else verify_cost
    s = speedup(a, g, c, v)
    return g[np.argmax(s, axis=-1)], np.max(s, axis=-1)


def speculative(alpha=(0.6, 0.8, 0.9), gamma=(1, 2, 3, 4, 5, 8), draft_cost=0.05, draft=None, target=None,
                hardware="h100-sxm", batch=1, context=1024, weights_dtype="bf16", kv_dtype=None, act_dtype="bf16",
                sets=None, mode="roofline", impl=None) -> dict:
    """Speculative decoding over an alpha x gamma x draft-cost grid, or with costs from the engine.

    With draft and target models the step costs come from the op list in `mode` (roofline: the ideal
    bound; achievable: implementation profile `impl`), and the rows carry that mode.

    draft="mtp" drafts with the target's own multi-token-prediction layer (DeepSeek-V3/R1's MTP: one decoder
    layer of the target's shape, its 2D -> D eh_proj, the shared embedding and LM head; serving.speculative).

    With draft and target models, c = draft step / target step at (batch, context), and verifying
    gamma draft tokens is one target forward over gamma+1 tokens per sequence (T = gamma+1), whose
    cost relative to a plain step grows with batch as the matmuls turn compute-bound.
    """
    a = _unit_interval(alpha, "--alpha")
    g = _positive(gamma, "--gamma")
    cols: dict = {}
    if draft is not None or target is not None:
        if draft is None or target is None:
            raise SpecError("--draft/--target", None, "give both a draft and a target model")
        prec = _prec(weights_dtype, kv_dtype, act_dtype)
        B = float(_positive(batch, "--batch")[0])
        S = float(_positive(context, "--context")[0])
        mtp = isinstance(draft, str) and draft.strip().lower() == "mtp"
        if mtp:  # the target's own MTP layer drafts (DeepSeek's multi-token prediction)
            (t,), (hw,) = specs([target], hardware, sets)
        else:
            (d, t), (hw,) = specs([draft, target], hardware, sets)
        from .api import check_mode

        impl = check_mode(mode, impl, ("roofline", "achievable"), sets)
        tm = engine.time_model(mode, hw, impl)
        step = lambda m, T: engine.roofline(build_ops(m, B, T, S, "decode", prec), hw, prec, tm=tm)["time"]  # noqa: E731
        t1 = float(step(t, 1.0))
        if mtp:  # one pass of the MTP layer: its eh_proj and one decoder layer with the shared embedding and head
            from .serving.speculative import draft_ops

            c = np.asarray([float(engine.roofline(draft_ops(t, B, S, prec), hw, prec, tm=tm)["time"]) / t1])
            draft_name = "mtp"
        else:
            c = np.asarray([float(step(d, 1.0)) / t1])
            draft_name = d.name
        verify = np.asarray(step(t, g + 1.0), float) / t1  # gamma+1 tokens per sequence in one target pass
        A, G, C = np.meshgrid(a, g, c, indexing="ij")
        V = np.broadcast_to(verify[None, :, None], A.shape)
        cols.update(draft=draft_name, target=t.name, hardware=hw.key, batch=B, context=S, mode=mode, target_step_s=t1,
                    verify_cost=V)
        if mode == "achievable":
            cols["impl"] = impl_name(impl)
        gv = np.arange(1, 33, dtype=float)
        vfull = np.asarray(step(t, gv + 1.0), float) / t1
        bg, _ = best_gamma(A[:, :1, :], C[:, :1, :], vfull)  # (alpha, 1, c): best over gamma = 1..32
        cols.update(best_gamma=np.broadcast_to(bg, A.shape))
    else:
        c = _positive(draft_cost, "--draft-cost", integer=False)
        A, G, C = np.meshgrid(a, g, c, indexing="ij")
        V = 1.0
        bg, _ = best_gamma(A[:, 0, :], C[:, 0, :])
        cols.update(best_gamma=np.broadcast_to(bg[:, None, :], A.shape))
    sp = speedup(A, G, C, V)
    cols = {"alpha": A, "gamma": G, "draft_cost": C, "expected_tokens": expected_tokens(A, G), "speedup": sp,
            "slower": sp < 1, **cols}
    return _flat(cols)


def _unit_interval(values, name):
    a = np.atleast_1d(np.asarray(values, dtype=np.float64))
    if a.size == 0 or not np.all((a >= 0) & (a <= 1)):
        raise SpecError(name, None, f"acceptance rates must lie in [0, 1], got {values!r}")
    return a


# ---------------------------------------------------------------- attention kernels
# the ops of the attention kernel itself (not the pre-attention norm, nor the projections)
ATTENTION_KERNEL_OPS = ("attn_qk", "attn_softmax", "attn_av")


def attention_kernels(seq=(512, 2048, 8192, 32768, 131072), heads=32, head_dim=128, kv_heads=None, batch=1,
                      dtype="fp16", model=None, sets=None) -> dict:
    """One attention call (prefill over `seq` tokens) in a fused and an unfused kernel: score-matrix
    bytes, HBM traffic and peak memory of each, from the op list of a one-layer model."""
    S = _positive(seq, "--seq")
    B = float(_positive(batch, "--batch")[0])
    if model is not None:
        (m,), _ = specs(model, "h100-sxm", sets)
        N, K, H, L = m.N, m.K, m.H, m.L
    else:
        N = int(_positive(heads, "--heads")[0])
        H = int(_positive(head_dim, "--head-dim")[0])
        K = int(_positive(kv_heads, "--kv-heads")[0]) if kv_heads else N
        L = 1
    f = get_format(dtype)
    prec = Precision(weights=dtype, act=dtype)
    one = model_from_dict(dict(name="attention", source="one attention layer", vocab_size=1, d_model=N * H,
                               n_layers=1, n_heads=N, n_kv_heads=K, head_dim=H, d_ff=1, max_context=int(S.max()),
                               position="none"), "attention")
    out = {}
    for kernel in ("fused", "unfused"):
        ops = [o for o in build_ops(one, B, S, S, "prefill", prec, kernel) if o.name in ATTENTION_KERNEL_OPS]
        out[kernel] = (sum(o.bytes for o in ops), np.max([np.asarray(o.act_read + o.act_write + 0 * S) for o in ops], axis=0),
                       sum(o.flops for o in ops))
    score = S * S * f.bits / 8  # one head's S x S matrix
    return _flat({"seq": S, "heads": float(N), "kv_heads": float(K), "head_dim": float(H), "dtype": f.name,
                  "score_bytes_per_head": score, "score_bytes_per_layer": score * N * B,
                  "fused_hbm_bytes": out["fused"][0], "unfused_hbm_bytes": out["unfused"][0],
                  "traffic_ratio": out["unfused"][0] / out["fused"][0],
                  "fused_peak_bytes": out["fused"][1], "unfused_peak_bytes": out["unfused"][1],
                  "flops": out["fused"][2], "layers": float(L)})


# ---------------------------------------------------------------- generation with and without a cache
GENERATION_STEPS = 10**7  # steps summed by one generation-cost query


def generation_cost(model="llama-2-13b", tokens=(256, 1024, 4096), batch=1, weights_dtype="bf16", kv_dtype=None,
                    act_dtype="bf16", sets=None) -> dict:
    """MACs, bytes and memory to generate T tokens from a one-token prompt.

    Without a cache, step t re-runs the whole prefix: a prefill over t tokens (O(t^2) attention
    per step, O(T^3) in total). With a cache, step t is one decode step at context t (O(t) per step,
    O(T^2) in total). Sums run over an array axis of steps, chunked.
    """
    prec = _prec(weights_dtype, kv_dtype, act_dtype)
    Ts = _positive(tokens, "--tokens")
    B = float(_positive(batch, "--batch")[0])
    names = _names(model)
    if float(np.sum(Ts)) * len(names) > GENERATION_STEPS:  # refused before any work: ~2 s per 10^7 steps here
        raise SpecError("--tokens", None, f"{float(np.sum(Ts)) * len(names):,.0f} generation steps in all (every "
                        f"step of every T is summed), over the limit of {GENERATION_STEPS:,}; the costs grow as "
                        "T^2 (cached) and T^3 (uncached), so take a smaller T and scale")
    out = []
    for name in names:
        m = load_model(name, sets) if not isinstance(name, Model) else name
        rows = {k: [] for k in ("tokens", "macs_cached", "macs_uncached", "bytes_cached", "bytes_uncached",
                                "memory_cached", "memory_uncached", "attention_macs_cached", "attention_macs_uncached")}
        for T in Ts:
            acc = np.zeros(6)
            for t0 in range(1, int(T) + 1, 8192):
                t = np.arange(t0, min(int(T), t0 + 8191) + 1, dtype=float)
                for i, (phase, TT) in enumerate((("decode", 1.0), ("prefill", t))):
                    ops = build_ops(m, B, TT, t, phase, prec)
                    acc[i] += sum(float(np.sum(o.flops + 0 * t)) * o.count for o in ops) / 2
                    acc[2 + i] += sum(float(np.sum(o.bytes + 0 * t)) * o.count for o in ops)
                    acc[4 + i] += sum(float(np.sum(o.flops + 0 * t)) * o.count for o in ops if o.name in ("attn_qk", "attn_av")) / 2
            mem_c = engine.memory(build_ops(m, B, 1.0, T, "decode", prec), m, B, T, prec)["memory_bytes"]
            mu = engine.memory(build_ops(m, B, T, T, "prefill", prec), m, B, T, prec)
            for k, v in (("tokens", T), ("macs_cached", acc[0]), ("macs_uncached", acc[1]), ("bytes_cached", acc[2]),
                         ("bytes_uncached", acc[3]), ("memory_cached", float(mem_c)),
                         ("memory_uncached", float(mu["memory_bytes"] - mu["kv_cache_bytes"])),
                         ("attention_macs_cached", acc[4]), ("attention_macs_uncached", acc[5])):
                rows[k].append(v)
        t = {k: np.asarray(v, float) for k, v in rows.items()}
        t["macs_ratio"] = t["macs_uncached"] / t["macs_cached"]
        t["bytes_ratio"] = t["bytes_uncached"] / t["bytes_cached"]
        t["model"] = np.full(len(Ts), m.name, dtype=object)
        t["batch"] = np.full(len(Ts), B)
        out.append(t)
    return concat(out)


__all__ = ["formats", "weights", "compare", "speculative", "expected_tokens", "speedup", "best_gamma",
           "attention_kernels", "generation_cost", "quantization_note", "load_hardware"]
