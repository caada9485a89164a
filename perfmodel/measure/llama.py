"""A randomly initialised Llama-shaped decode step, written once against a small array API.

The backends (cpu.NumpyXP, cuda.TorchXP) supply the few primitives that differ between numpy and
torch (random init, permute, concatenate, RMSNorm, softmax, SiLU-gate, RoPE); matmuls are `@` on
both. The step performs, op for op and in the same order, what `build_ops(model, B, 1, S,
"decode", attention="unfused")` lists for the same spec (`cases.llama_model`), so a measured
step is compared with exactly the FLOPs and bytes the engine counts:

    embed, then per layer: attn_norm, qkv_proj (fused; the new V goes into the cache),
    rope (q and the new k, which goes into the cache), attn_qk, attn_softmax, attn_av, o_proj,
    residual, mlp_norm, mlp_up_gate (gate and up as one D x 2F matrix), mlp_act (SiLU(g) * u),
    mlp_down, residual; then final_norm, lm_head.

The KV cache of each layer is held head-major, (B, K, S, H): each (sequence, KV head) slice is
contiguous, which is what batched matmuls (and paged / flash kernels) want; it holds the same
B x S x K x H elements as a (B, S, K, H) cache. The decode step attends to S tokens: S - 1 past
ones (random) plus the new token, whose K and V it writes at position S - 1.
"""
from __future__ import annotations

import math

import numpy as np


def rope_tables(pos: int, H: int, base: float = 10000.0) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of position `pos` for a head of width H (Llama's rotate-half convention)."""
    inv = base ** (-np.arange(0, H, 2, dtype=np.float64) / H)
    ang = np.concatenate([pos * inv, pos * inv])
    return np.cos(ang), np.sin(ang)


def attention(xp, q, kc, vc):
    """Unfused GQA decode attention: q (B, N, H) against caches (B, K, S, H); returns (B, N*H).

    Query head n uses KV head n // G (G = N / K), as in Hugging Face's repeat_kv. q is expected
    already scaled by 1/sqrt(H).
    """
    B, N, H = q.shape
    K = kc.shape[1]
    s = q.reshape(B, K, N // K, H) @ xp.permute(kc, (0, 1, 3, 2))  # attn_qk: (B, K, G, S)
    s = xp.softmax(s)  # attn_softmax
    return (s @ vc).reshape(B, N * H)  # attn_av


class DecodeStep:
    """One decode step of a Llama-shaped model (cfg: D, L, N, K, H, F, V) over B sequences at context S.

    `ops` lists (name, callable) in execution order, one entry per op per layer; calling the step
    runs them all and returns the logits (B, V).
    """

    def __init__(self, xp, cfg: dict, B: int, S: int, dtype: str, params: dict | None = None):
        D, L, N, K, H, F, V = (cfg[k] for k in ("D", "L", "N", "K", "H", "F", "V"))
        if S < 1 or N % K:
            raise ValueError(f"need S >= 1 and K dividing N, got S={S}, N={N}, K={K}")
        self.xp, self.cfg, self.B, self.S, self.dtype = xp, dict(cfg), B, S, dtype
        self.params = params or self.init_params(xp, cfg, dtype)  # reuse: other (B, S) of the same model
        self.caches = [(xp.rand((B, K, S, H), dtype, 1.0), xp.rand((B, K, S, H), dtype, 1.0)) for _ in range(L)]
        self.tokens = xp.randint(V, B)
        cos, sin = rope_tables(S - 1, H)
        scale = 1.0 / math.sqrt(H)  # folded into q's rotation: no extra pass over q
        self.cos, self.sin = xp.asarray(cos, dtype), xp.asarray(sin, dtype)
        self.cos_q, self.sin_q = xp.asarray(cos * scale, dtype), xp.asarray(sin * scale, dtype)
        self.state: dict = {}
        self.ops = self._build()

    @staticmethod
    def init_params(xp, cfg: dict, dtype: str) -> dict:
        """Random weights scaled by 1/sqrt(fan-in); norm gains around 1."""
        D, L, N, K, H, F, V = (cfg[k] for k in ("D", "L", "N", "K", "H", "F", "V"))
        w = lambda shape, fan_in: xp.rand(shape, dtype, 1.0 / math.sqrt(fan_in))  # noqa: E731
        norm = lambda: xp.rand((D,), dtype, 0.1, 1.0)  # noqa: E731
        return {"embed": xp.rand((V, D), dtype, 1.0), "final_g": norm(), "lm_head": w((D, V), D),
                "layers": [{"g1": norm(), "wqkv": w((D, (N + 2 * K) * H), D), "wo": w((N * H, D), N * H),
                            "g2": norm(), "wug": w((D, 2 * F), D), "wd": w((F, D), F)} for _ in range(L)]}

    def weights(self) -> list:
        """Every parameter array (the count must equal perfmodel's param_count of the spec)."""
        p = self.params
        out = [p["embed"]]
        for ly in p["layers"]:
            out += [ly[k] for k in ("g1", "wqkv", "wo", "g2", "wug", "wd")]
        return out + [p["final_g"], p["lm_head"]]

    def _build(self) -> list:
        xp, st, B, S = self.xp, self.state, self.B, self.S
        N, K, H, F = (self.cfg[k] for k in ("N", "K", "H", "F"))
        p = self.params
        ops = [("embed", lambda: st.__setitem__("x", p["embed"][self.tokens]))]

        def layer(ly, kc, vc):
            def qkv_proj():
                qkv = st["h"] @ ly["wqkv"]
                st["q"], st["k"] = qkv[:, : N * H], qkv[:, N * H: (N + K) * H]
                vc[:, :, S - 1] = qkv[:, (N + K) * H:].reshape(B, K, H)  # the new V into the cache

            def rope():
                st["q"] = xp.rope(st["q"].reshape(B, N, H), self.cos_q, self.sin_q)
                kc[:, :, S - 1] = xp.rope(st["k"].reshape(B, K, H), self.cos, self.sin)  # the new K

            def attn_qk():
                st["s"] = st["q"].reshape(B, K, N // K, H) @ xp.permute(kc, (0, 1, 3, 2))

            def attn_av():
                st["o"] = (st["s"] @ vc).reshape(B, N * H)

            def residual():
                st["x"] = st["x"] + st["a"]

            return [("attn_norm", lambda: st.__setitem__("h", xp.rmsnorm(st["x"], ly["g1"]))),
                    ("qkv_proj", qkv_proj), ("rope", rope), ("attn_qk", attn_qk),
                    ("attn_softmax", lambda: st.__setitem__("s", xp.softmax(st["s"]))), ("attn_av", attn_av),
                    ("o_proj", lambda: st.__setitem__("a", st["o"] @ ly["wo"])), ("residual", residual),
                    ("mlp_norm", lambda: st.__setitem__("h", xp.rmsnorm(st["x"], ly["g2"]))),
                    ("mlp_up_gate", lambda: st.__setitem__("ug", st["h"] @ ly["wug"])),
                    ("mlp_act", lambda: st.__setitem__("m", xp.silu_mul(st["ug"][:, :F], st["ug"][:, F:]))),
                    ("mlp_down", lambda: st.__setitem__("a", st["m"] @ ly["wd"])), ("residual", residual)]

        for ly, (kc, vc) in zip(p["layers"], self.caches):
            ops += layer(ly, kc, vc)
        ops += [("final_norm", lambda: st.__setitem__("h", xp.rmsnorm(st["x"], p["final_g"]))),
                ("lm_head", lambda: st.__setitem__("logits", st["h"] @ p["lm_head"]))]
        return ops

    def op(self, name: str):
        """The first instance of an op (dispatch cases time one op alone on the step's state)."""
        self()  # fill the state every op reads
        return next(f for n, f in self.ops if n == name)

    def __call__(self, i: int = 0):
        for _, f in self.ops:
            f()
        return self.state["logits"]
