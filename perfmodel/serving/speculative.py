"""Speculative decoding on a serving worker: DeepSeek's multi-token prediction (MTP) with k draft tokens.

Every decode iteration of a sequence (TensorRT-LLM's "MTP Eagle", the default for DeepSeek-V3/R1: its tech blog
"DeepSeek R1 MTP Implementation and Optimization") runs
- the main model over k + 1 tokens (the token of the last step and k drafts) at the sequence's context: the
  verification, the op list's decode step at T = k + 1 (absorbed MLA, k + 1 queries over the cache), and
- the MTP module k times, one token each: one decoder layer (a MoE layer of the main model's shape) with the
  shared embedding and LM head ("reuses the same MTP module and repeats multiple times"),
both in one CUDA graph, so the engine's per-step host cost is paid once. A step emits E tokens per sequence on
average: the accepted prefix of the drafts plus the main model's own token,

  E = 1 + p_1 + p_1 p_2 + ... + p_1 ... p_k      (p_i: draft i accepted given drafts 1 .. i - 1 were)

(Leviathan et al. 2023, eq. 1, with a rate per position). The iteration's op list is the verification's plus k
copies of the module's; its time over the plain decode step's at the same rows and mean context scales the
worker's decode cost (SpecCost), and a request needs ceil((OSL - 1) / E) decode iterations after its first token.
The module's eh_proj (the 2D -> D projection of the embedding and the main model's hidden state, kept in 16 bits)
is one more GEMM a pass. Loaded, the module takes memory from the KV cache: its weights (eh_proj and the decoder
layer; the embedding and head are shared) and its layer's KV cache, one layer more a token (module_memory).
Left out: the module's two extra norms, the KV cache rewind of rejected drafts, and a varying E per request."""
from __future__ import annotations

import copy
import dataclasses
import math

import numpy as np

from .. import engine
from ..errors import SpecError
from ..ops import MATMUL, Op, build_ops


def expected_tokens(accept) -> float:
    """Tokens emitted per verification step with per-position acceptance rates p_1 .. p_k (each given the drafts
    before it accepted): 1 + p_1 + p_1 p_2 + ... (Leviathan et al. 2023, eq. 1, per position)."""
    p = [float(x) for x in accept]
    if not p or any(not (0.0 <= x <= 1.0) for x in p):
        raise SpecError("speculative", "accept", f"acceptance rates must lie in [0, 1], one per draft, got {accept!r}")
    return 1.0 + float(np.sum(np.cumprod(p)))


def mtp_module(model):
    """The MTP module as the op list sees it: one decoder layer of the main model's MoE shape, with the embedding
    and LM head (shared with the main model: read again, not stored again)."""
    moe = model.moe
    if moe is not None:
        moe = dataclasses.replace(moe, first_dense_layers=0)
    return model.replace(n_layers=1, moe=moe)


def eh_proj(model, n) -> Op:
    """The module's input projection: [norm(embedding); norm(hidden)] (2D) -> D for n tokens, 16-bit weights
    (DeepSeek-V3 config: the MTP layer's eh_proj, D x 2D), read whole on every device."""
    D, hb = float(model.d_model), 2.0
    op = Op("mtp_eh_proj", "mtp", 1, MATMUL, flops=2.0 * n * 2.0 * D * D, w_read=2.0 * D * D * hb,
            act_read=n * 2.0 * D * hb, act_write=n * D * hb, params=int(2 * D * D), w_stored=2.0 * D * D * hb,
            wfmt="bf16")
    op.rows, op.gemm = float(n), (float(n), D, 1.0)
    return op


SHARED = ("embed", "pos_embed", "lm_head")  # the module's embedding and LM head are the main model's (stored once)


def module_memory(model, prec, lay=None) -> tuple[float, float]:
    """What loading the MTP module adds on one device of the layout: its weight bytes (eh_proj and its decoder
    layer, split as the main model's layers are; the embedding and LM head are the main model's: vLLM's and
    TensorRT-LLM's MTP share them) and its KV bytes a token (its decoder layer's attention caches every token too:
    one layer more than the main model's). DeepSeek-V3 model card: 685B on Hugging Face = 671B main model + 14B MTP
    module, whose 14B hold the module's own copies of the embedding and head (2 x 129,280 x 7,168 = 1.85B)."""
    w = sum(float(op.w_stored) * op.count for op in draft_ops(model, 1.0, 0.0, prec, lay) if op.name not in SHARED)
    return float(w), engine.kv_growth_per_token(mtp_module(model), prec, lay)


def draft_ops(model, n, S, prec, lay=None, attention="fused") -> list:
    """One pass of the MTP module over one token of n sequences at context S: its eh_proj, its decoder layer, the
    shared embedding and LM head."""
    return [eh_proj(model, float(n))] + list(build_ops(mtp_module(model), float(n), 1.0, float(S), "decode", prec,
                                                       attention, layout=lay))


def iteration_ops(model, n, k: int, S, prec, lay, attention="fused") -> list:
    """The op list of one speculative decode iteration of n sequences at context S: the main model over k + 1
    tokens a sequence, then k passes of the MTP module over one (draft_ops)."""
    ops = list(build_ops(model, float(n), float(k + 1), float(S), "decode", prec, attention, layout=lay))
    for op in draft_ops(model, n, S, prec, lay, attention):
        op = copy.copy(op)
        op.count = op.count * k
        ops.append(op)
    return ops


class SpecCost:
    """A decode worker's step cost with MTP: the plain worker's cost (FastCost) at each row's true context, times
    the speculative iteration's time over the plain decode step's at those rows and the mean context
    (iteration_ops, priced by the worker's own TimeModel). The simulator runs ceil((OSL - 1) / E) + 1 output
    tokens a request; a row at simulated context isl + j is at isl + j E tokens (prefilled rows of one ISL)."""

    def __init__(self, inst, k: int, tokens: float, isl: int, osl: int):
        """k drafts a step, `tokens` (E) emitted a step on average (expected_tokens, or a measured mean)."""
        if int(k) < 1:
            raise SpecError("speculative", "k", f"needs at least one draft token, got {k!r}")
        E = float(tokens)
        if not 1.0 <= E <= k + 1:  # NaN fails too
            raise SpecError("speculative", "tokens", f"a step emits between 1 and k + 1 = {k + 1} tokens, got {tokens!r}")
        self.inst, self.base, self.k, self.E = inst, inst.cost, int(k), E
        self.isl, self.osl = int(isl), int(osl)
        self.S_mean = self.isl + self.osl / 2.0
        self._ratio: dict = {}
        self.calls = 0

    def steps(self) -> int:
        """Output tokens a simulated request carries: its first token and one per speculative iteration."""
        return 1 + math.ceil(max(self.osl - 1, 0) / self.E)

    def ratio(self, n: int) -> float:
        r = self._ratio.get(n)
        if r is None:
            i = self.inst
            tm, S = self.base.tm, self.S_mean
            plain = engine.roofline(build_ops(i.model, float(n), 1.0, S, "decode", i.prec, layout=i.lay),
                                    i.hw, i.prec, layout=i.lay, tm=tm)["time"]
            spec = engine.roofline(iteration_ops(i.model, n, self.k, S, i.prec, i.lay), i.hw, i.prec, layout=i.lay,
                                   tm=tm)["time"]
            r = self._ratio[n] = float(spec) / float(plain)
        return r

    def _true(self, S: np.ndarray) -> np.ndarray:
        S = np.asarray(S, dtype=np.int64)
        return np.where(S > self.isl, self.isl + np.ceil((S - self.isl) * self.E).astype(np.int64), S)

    def decode_only(self, S: np.ndarray) -> float:
        self.calls += 1
        return self.base.decode_only(self._true(S)) * self.ratio(int(np.size(S)))

    def __call__(self, T: np.ndarray, S: np.ndarray) -> float:
        """A step of rows of T tokens at contexts S. Decode rows alone: the speculative iteration. With prompt
        chunks (an aggregated worker mixes them in): the plain step, plus the decode rows' verification and draft
        passes, priced as those rows' decode step times its speculative ratio less one."""
        T = np.asarray(T, dtype=np.int64)
        dec = T == 1
        if np.all(dec):
            return self.decode_only(S)
        self.calls += 1
        S = self._true(S)
        t = self.base(T, S)
        if np.any(dec):
            t += self.base.decode_only(S[dec]) * (self.ratio(int(np.count_nonzero(dec))) - 1.0)
        return t
