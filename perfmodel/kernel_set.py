"""The measured kernel tables of one device and engine version (KernelSet: log r grids per kind, and the lookups
the achievable time model asks them), and the ideal (datasheet) time of a table row that r is relative to.
perfmodel/kernels.py reads the tables into it (docs/derivations.md, "Measured kernels")."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .interp import _interp

# AIConfigurator's MoE tables are measured over balanced routing and power-law token-to-expert counts;
# its models use power_law with alpha 1.01 (aiconfigurator_core/sdk/models/deepseek.py: _power_law_alpha = 1.01)
MOE_DISTRIBUTION = "power_law_1.01"
# the head dims AIConfigurator's Gated DeltaNet tables measure (gdn_perf head_k_dim, head_v_dim: Qwen3.5's 128)
GDN_HEAD_DIM = 128
# bytes per element of a table's dtype (the weights for GEMM and MoE, the cache for attention)
_BYTES = {"bfloat16": 2.0, "float16": 2.0, "fp8": 1.0, "fp8_block": 1.0, "int4_wo": 0.5, "w4a16_mxfp4": 0.53125,
          "w4a8_mxfp4_mxfp8": 0.53125, "nvfp4": 0.5625, "w4afp8": 0.5}
# which datasheet peak a table dtype computes at
_PEAK = {"bfloat16": "bf16", "float16": "fp16", "fp8": "fp8", "fp8_block": "fp8", "int4_wo": "bf16",
         "w4a16_mxfp4": "bf16", "w4a8_mxfp4_mxfp8": "fp8", "nvfp4": "fp4", "w4afp8": "fp8"}


def _interp_rows(grids: list, n: np.ndarray) -> np.ndarray:
    """_interp of several one-axis grids at the same points, as rows: grids on one token axis share one search (the
    tp siblings of a MoE shape are measured at the same token counts), the others are interpolated one by one."""
    ax = grids[0][0][0]
    if len(ax) < 2 or any(g[0][0] is not ax and not np.array_equal(g[0][0], ax) for g in grids):
        return np.stack([_interp(*g, [n]) + np.zeros(n.shape) for g in grids])
    la = np.log(ax)
    lx = np.clip(np.log(np.maximum(n, 1e-30)), la[0], la[-1])
    i = np.clip(np.searchsorted(la, lx, side="right") - 1, 0, len(ax) - 2)
    w = (lx - la[i]) / (la[i + 1] - la[i])
    V = np.stack([g[1] for g in grids])
    return (1.0 - w) * V[:, i] + w * V[:, i + 1]


@dataclass
class KernelSet:
    """The measured tables of one device (and engine version): log r grids per kind, built at load."""

    source: str  # e.g. "AIConfigurator 0.12.0 h100_sxm vllm 0.24.0" or a results.csv path
    gemm: dict = field(default_factory=dict)  # table dtype -> (axes [m, n, k], log r)
    gen_attn: dict = field(default_factory=dict)  # kv dtype -> {(Nq, Nkv, hd): (axes [B, L], log r)}
    ctx_attn: dict = field(default_factory=dict)  # kv dtype -> {(Nq, Nkv, hd): (axes [B, S], log r)}
    moe: dict = field(default_factory=dict)  # dtype -> {(h, I, topk, E, tp, ep): (axes [tokens], log r)}
    # the same per MoE backend the engine can be told to run (TensorRT-LLM's moe_config.backend: kernels.
    # trtllm_moe_backend): backend -> dtype -> {shape: grid}; `moe` holds the fastest kernel of any backend
    moe_by: dict = field(default_factory=dict)
    system: str = ""  # AIConfigurator's system folder ("b200_sxm"), "" for a `perfmodel measure` results.csv
    mla_gen: dict = field(default_factory=dict)  # kv dtype -> (axes [heads per device, B, keys], log r)
    mla_ctx: dict = field(default_factory=dict)  # kv dtype -> (axes [heads per device, B, tokens], log r)
    allreduce: dict = field(default_factory=dict)  # p -> (message bytes, seconds): the engine's all-reduce call
    alltoall: dict = field(default_factory=dict)  # (phase, hidden, topk, E, nodes) -> (tokens per rank, seconds)
    # TensorRT-LLM's NVLink all-to-all on a multi-node-NVLink rack (_load_nvlink_alltoall):
    # (phase, payload dtype, hidden, topk, E, ep) -> (tokens per rank, seconds)
    alltoall_ep: dict = field(default_factory=dict)
    # Gated DeltaNet kernels (causal conv1d, gated delta rule): (phase, part) -> {(k heads, v heads): (axes [B] in
    # generation, [B, tokens per sequence] in context, log seconds)}
    gdn: dict = field(default_factory=dict)
    versions: dict = field(default_factory=dict)  # kind -> the version directory read
    rejected: list = field(default_factory=list)  # tables read and not used as measured, and why (block_ratio)
    # the nearest measured shape per query (moe_ratio, alltoall_time): a scan of every key, ~9 ms a call on the
    # MoE tables, asked again for every step the serving simulator prices; the tables never change after load
    _near: dict = field(default_factory=dict, repr=False, compare=False)
    _fits: dict = field(default_factory=dict, repr=False, compare=False)  # moe_ratio's fit at whole token counts

    # -- lookups: r (>= 1 after the caller's max) or None where nothing covers the shape ---------------------
    def gemm_ratio(self, dtype: str, m, n, k):
        t = self.gemm.get(dtype)
        if t is None:
            return None
        return np.exp(_interp(t[0], t[1], [m, n, k]))

    def _nearest(self, table: dict, key: tuple):
        """The measured head shape nearest to `key` in log distance (same head dim), or None."""
        best, dist = None, math.inf
        for kk in table:
            if kk[2] != key[2]:
                continue
            d = abs(math.log(kk[0] / key[0])) + abs(math.log(kk[1] / key[1]))
            if d < dist:
                best, dist = kk, d
        return best

    def attn_ratio(self, phase: str, kv_dtype: str, heads: tuple, B, L):
        tables = (self.gen_attn if phase == "generation" else self.ctx_attn).get(kv_dtype)
        if not tables or min(heads) <= 0:
            return None
        key = self._nearest(tables, heads)
        if key is None:
            return None
        ax, v = tables[key]
        return np.exp(_interp(ax, v, [B, L]))

    def mla_ratio(self, phase: str, kv_dtype: str, heads, B, L):
        """r of DeepSeek-style MLA attention (the absorbed decode kernel over the 576-wide latent cache, or the
        prefill kernel over decompressed 192/128-wide heads) at heads per device, batch and length, or None."""
        t = (self.mla_gen if phase == "generation" else self.mla_ctx).get(kv_dtype)
        if t is None:
            return None
        return np.exp(_interp(t[0], t[1], [heads, B, L]))

    def moe_ratio(self, dtypes, shape: tuple, tokens, backends: dict | None = None, hw=None):
        """r of the fused MoE kernel at `shape` (D, d_ff, top-k, experts, tp, ep), interpolated over tokens, from the
        measured shape nearest in log distance over the tables of `dtypes` (a name or a list in order of preference:
        on equal distance the first wins); None without a table. The kernel is the engine's for that weight format,
        so the format whose measured shape is nearest is the one the model's checkpoint runs. `backends` (dtype ->
        backend name) reads only that backend's tables (moe_by): none of them measured, None.

        A shape measured exactly takes its own r. Any other, given `hw`, takes the affine law of the nearest shape's
        tp/ep siblings (the same D, d_ff, top-k, experts): t = a + b x over their ideal times x, fitted per token
        count by least squares in relative error, so r = a / x_q + b at the query's ideal x_q. The siblings are those
        along the axis the query moves on: the nearest's ep held (tp varies), else its tp held, else all (vLLM's
        tables time an ep split at the ep-1 kernel's time). A fused MoE step is several kernels (routing, alignment,
        two GEMMs, the activation), whose fixed cost does not shrink with the per-GPU slice as r's transfer assumed.
        Each of the 21,422 shapes of AIConfigurator's H100, H200, B200 and GB200 MoE tables, held out in turn and
        priced by the rest, is off by a median 10.4% this way (77% within 25%), 20.0% by the nearest's r (58%)
        (bench/moe_transfer.py). With fewer than two siblings, or a fit with a < 0 or b <= 0, the nearest's r."""
        h, inter, topk, E, tp, ep = shape
        memo, tabs, best, sibs = self._moe_near(dtypes, shape, backends)
        if best is None:
            return None
        dt, kk = best
        ax, v = tabs[dt][kk]
        r = np.exp(_interp(ax, v, [tokens]))
        if hw is None or len(sibs) < 2:
            return r
        n = np.asarray(tokens, float)
        if n.size > 64 and n.min() >= 0 and n.max() < 2 ** 20 and np.all(n == np.floor(n)):
            # a serving run's whole token counts: the fit at 0 .. 2^k - 1 once per shape and device, then looked up
            key = (memo, hw.memory_bandwidth, tuple(sorted(hw.peak_flops.items())), int(n.max()).bit_length())
            if key not in self._fits:
                if len(self._fits) > 64:
                    self._fits.clear()
                g = np.arange(2.0 ** key[-1])
                g[0] = 1.0  # 0 tokens: no ideal time to divide by, the nearest's r (as _affine says at x_q = 0)
                fit, ok = self._affine(hw, dt, kk, sibs, tabs[dt], shape, g)
                ok[0] = False
                self._fits[key] = fit, ok
            fit, ok = self._fits[key]
            i = n.astype(np.int64)
            return np.where(ok[i], fit[i], r)
        fit, ok = self._affine(hw, dt, kk, sibs, tabs[dt], shape, n)
        return np.where(ok, fit, r)

    def moe_dtype(self, dtypes, shape: tuple, backends: dict | None = None) -> str | None:
        """Which of `dtypes` the fused MoE kernel at `shape` is priced from (moe_ratio's nearest measured shape's
        table), None without a table: its r is relative to that table's ideal, at that dtype's peak (_PEAK)."""
        best = self._moe_near(dtypes, shape, backends)[2]
        return None if best is None else best[0]

    def _moe_near(self, dtypes, shape: tuple, backends: dict | None):
        """(memo key, tables by dtype, (dtype, nearest measured shape) or None, its siblings): moe_ratio's search."""
        h, inter, topk, E, tp, ep = shape
        dts = [dtypes] if isinstance(dtypes, str) else list(dtypes)
        tabs = {dt: (self.moe if backends is None else self.moe_by.get(backends.get(dt), {})).get(dt, {}) for dt in dts}
        memo = ("moe", tuple(dts), tuple(shape), None if backends is None else tuple(sorted(backends.items())))
        if memo in self._near:
            best, sibs = self._near[memo]
        else:
            best, dist = None, math.inf
            for dt in dts:
                for kk in tabs[dt]:
                    d = (abs(math.log(kk[0] / h)) + abs(math.log(kk[1] / inter)) + abs(math.log(kk[2] / topk))
                         + abs(math.log(kk[3] / E)) + 4 * abs(math.log(kk[4] / tp)) + 4 * abs(math.log(kk[5] / ep)))
                    if d < dist - 1e-12:
                        best, dist = (dt, kk), d
            sibs = []
            if best is not None and best[1] != tuple(shape):  # along the axis the query leaves the nearest by
                base = [kk for kk in tabs[best[0]] if kk[:4] == best[1][:4]]
                i = 5 if best[1][5] == ep else 4 if best[1][4] == tp else None  # the one held: ep, or tp
                sibs = [kk for kk in base if i is not None and kk[i] == best[1][i]]
                sibs = sibs if len(sibs) >= 2 else base
            self._near[memo] = best, sibs
        return memo, tabs, best, sibs

    @staticmethod
    def _affine(hw, dt: str, kk: tuple, sibs: list, tab: dict, shape: tuple, n: np.ndarray):
        """(a / x_q + b, where the fit holds) at token counts n: t = a + b x over the siblings (moe_ratio)."""
        col = (-1,) + (1,) * n.ndim
        tps, eps = (np.array([sk[i] for sk in sibs], float).reshape(col) for i in (4, 5))
        x = _ideal_moe(hw, dt, n, *kk[:4], tps, eps)  # the siblings' ideal seconds (they share D, d_ff, top-k, E)
        y = np.exp(_interp_rows([tab[sk] for sk in sibs], n)) * x  # and measured
        with np.errstate(divide="ignore", invalid="ignore"):  # 0 tokens: no time to fit; NaN fails `ok` below
            w = 1.0 / y ** 2  # least squares in relative error: the small slices weigh as much as the large
            xm, ym = (w * x).sum(0) / w.sum(0), (w * y).sum(0) / w.sum(0)
            vx = (w * (x - xm) ** 2).sum(0)
            b = (w * (x - xm) * (y - ym)).sum(0) / np.where(vx > 0, vx, 1.0)
            a = ym - b * xm
        xq = _ideal_moe(hw, dt, n, *shape)
        ok = (vx > 0) & (a >= 0) & (b > 0) & (xq > 0)
        return (np.maximum(a, 0) + b * xq) / np.where(xq > 0, xq, 1.0), ok

    def gdn_time(self, phase: str, part: str, heads: tuple, B, T):
        """Seconds of a Gated DeltaNet kernel (part "conv" or "core") for B sequences of T tokens each, at the
        measured head shape nearest to heads = (k heads, v heads, k dim, v dim) per device in log distance, scaled
        by the op's channels over the measured ones (the state, Hv dk dv, for the core; the conv's q, k, v
        channels, 2 Hk dk + Hv dv, for the conv); None where nothing of that phase is measured."""
        tabs = self.gdn.get((phase, part))
        if not tabs:
            return None
        hk, hv, dk, dv = heads
        best = min(tabs, key=lambda kk: abs(math.log(kk[0] / hk)) + abs(math.log(kk[1] / hv)))
        ax, v = tabs[best]
        t = np.exp(_interp(ax, v, [B] if phase == "generation" else [B, T]))
        d = GDN_HEAD_DIM
        scale = hv * dk * dv / (best[1] * d * d) if part == "core" else \
            (2 * hk * dk + hv * dv) / (2 * best[0] * d + best[1] * d)
        return t * scale

    def allreduce_time(self, p: int, nbytes):
        t = self.allreduce.get(int(p))
        if t is None:
            return None
        sizes, secs = t
        x = np.clip(np.asarray(nbytes, float), sizes[0], None)
        lt = np.interp(np.log(x), np.log(sizes), np.log(secs))
        # beyond the largest message the time grows with the bytes (bandwidth-bound)
        return np.exp(lt) * np.maximum(1.0, x / sizes[-1])

    def alltoall_time(self, phase: str, hidden: float, topk: float, E: float, nodes: int, tokens):
        """DeepEP dispatch or combine (the faster of its low-latency and high-throughput kernels, as engines pick
        per phase) at the measured shape nearest in log distance, interpolated over tokens per rank; None if
        nothing of that phase and node count is measured."""
        best, dist = None, math.inf
        for kk in self.alltoall:
            if kk[0] != phase or kk[4] != nodes:
                continue
            d = abs(math.log(kk[1] / hidden)) + abs(math.log(kk[2] / topk)) + abs(math.log(kk[3] / E))
            if d < dist:
                best, dist = kk, d
        if best is None:
            return None
        return _over_tokens(*self.alltoall[best], tokens)

    def alltoall_ep_time(self, phase: str, dtype: str, hidden: float, topk: float, E: float, ep: int, tokens):
        """TensorRT-LLM's NVLink dispatch or combine (_load_nvlink_alltoall) at the measured shape nearest in log
        distance (the EP size weighted 4x: it sets the peers a token goes to), interpolated over tokens per rank;
        None where nothing of that phase and payload format is measured."""
        memo = ("a2a_ep", phase, dtype, hidden, topk, E, ep)
        if memo in self._near:
            best = self._near[memo]
        else:
            best, dist = None, math.inf
            for kk in self.alltoall_ep:
                if kk[0] != phase or kk[1] != dtype:
                    continue
                d = (abs(math.log(kk[2] / hidden)) + abs(math.log(kk[3] / topk)) + abs(math.log(kk[4] / E))
                     + 4 * abs(math.log(kk[5] / ep)))
                if d < dist:
                    best, dist = kk, d
            self._near[memo] = best
        if best is None:
            return None
        return _over_tokens(*self.alltoall_ep[best], tokens)

    def kinds(self) -> list[str]:
        """The kinds of kernel measured, as 'kind version'."""
        out = []
        for k, v in (("gemm", "gemm"), ("gen_attn", "attention"), ("ctx_attn", "attention"), ("mla_gen", "mla"),
                     ("mla_ctx", "mla"), ("moe", "moe"), ("gdn", "gdn"),
                     ("allreduce", "allreduce"), ("alltoall", "alltoall"), ("alltoall_ep", "alltoall_ep")):
            if getattr(self, k):
                out.append(f"{k} {self.versions.get(v, '')}".strip())
            if k == "moe":  # the MoE formats whose shapes another engine's tables lent (kernels.FLASHINFER_W4A8)
                out += [f"moe {dt} ({self.versions['moe ' + dt]})" for dt in sorted(self.moe) if "moe " + dt in self.versions]
        return out


def _over_tokens(x, t, tokens):
    """A measured all-to-all time interpolated log-log over tokens per rank; beyond the largest batch it grows with
    the bytes (bandwidth-bound, linear)."""
    q = np.clip(np.asarray(tokens, float), x[0], None)
    return np.exp(np.interp(np.log(q), np.log(x), np.log(t))) * np.maximum(1.0, q / x[-1])


# ---------------------------------------------------------------- ideal (datasheet) times of table rows
def _ideal_gemm(hw, dtype, m, n, k):
    wb = _BYTES[dtype]
    ab = {"fp8": 1.0, "fp4": _BYTES["nvfp4"]}.get(_PEAK[dtype], 2.0)  # activations in the compute format
    flops = 2.0 * m * n * k
    byts = m * k * ab + k * n * wb + m * n * 2.0  # A, W read; C written in 16 bits
    return np.maximum(flops / hw.peak(_PEAK[dtype]), byts / hw.memory_bandwidth)


def _ideal_attn(hw, phase, kvb, B, L, Nq, Nkv, hd):
    if phase == "generation":  # one query per sequence over L keys
        flops = 4.0 * B * Nq * hd * L
        byts = B * L * 2.0 * Nkv * hd * kvb + B * 2.0 * Nq * hd * 2.0
    else:  # causal self-attention over L tokens
        flops = 4.0 * B * Nq * hd * L * (L + 1) / 2.0
        byts = B * L * (2.0 * Nkv * hd * kvb + 2.0 * Nq * hd * 2.0)
    return np.maximum(flops / hw.peak("bf16"), byts / hw.memory_bandwidth)


# DeepSeek-V3's MLA (config.json): kv_lora_rank 512 + qk_rope_head_dim 64 cached per token, qk_nope_head_dim 128,
# v_head_dim 128; the tables measure this shape (AIConfigurator collects MLA for DeepSeek-V3 only)
_MLA_LATENT, _MLA_QK, _MLA_V = 576, 192, 128


def _ideal_mla(hw, phase, kvb, heads, B, L):
    if phase == "generation":  # absorbed: QK over the 576-wide latent, AV over its 512-wide part
        flops = 2.0 * B * heads * L * (_MLA_LATENT + _MLA_LATENT - 64)
        byts = B * L * _MLA_LATENT * kvb
    else:  # prefill over decompressed heads, causal
        flops = 2.0 * B * heads * L * (L + 1) / 2.0 * (_MLA_QK + _MLA_V)
        byts = B * L * heads * (2 * _MLA_QK + 2 * _MLA_V) * 2.0
    return np.maximum(flops / hw.peak("bf16"), byts / hw.memory_bandwidth)


def _touched(E, k, tokens):
    """Expected experts reached by `tokens` tokens choosing k of E uniformly (ops._touched's law)."""
    return E * (1.0 - (1.0 - k / E) ** tokens)


def _ideal_moe(hw, dtype, tokens, h, inter, topk, E, tp, ep):
    I = inter / tp
    flops = 2.0 * tokens * topk * h * 3.0 * I / ep
    w = _touched(E, topk, tokens) / ep * 3.0 * h * I * _BYTES[dtype]
    act = tokens * topk / ep * (h * 2.0 + h * 2.0)
    return np.maximum(flops / hw.peak(_PEAK[dtype]), (w + act) / hw.memory_bandwidth)
