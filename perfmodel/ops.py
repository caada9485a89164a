"""The op list: the single source of truth for FLOPs, bytes, parameters and KV-cache size.

`build_ops(model, B, T, S, phase, prec, attention)` lists every operator of one forward pass of a
transformer over B sequences, T new tokens each, attending to S tokens of context (the KV length,
new tokens included). prefill: T = S. decode: T = 1, S = tokens in the cache.

Every metric in perfmodel (prefill, decode, KV cache, memory, intensity tables, parameter count)
is a sum or max over this list; nothing else counts FLOPs or bytes.

Notation (BRIEF): B batch, S context, T new tokens, D d_model, F d_ff, N query heads,
K kv heads, H head dim, L layers, V vocab; M = B*T tokens in this forward.
Quantities are numpy arrays broadcast over B and S; `count` multiplies per-layer ops by layers.

What is counted (docs/derivations.md has the full derivation):
- matmul X(M x d_in) W(d_in x d_out): FLOPs 2*M*d_in*d_out; reads W once plus X; writes Y.
- attention, fused (FlashAttention): reads Q, K, V once, writes O; no score matrix reaches HBM.
  Causal: a fused kernel skips fully masked tiles, so it counts the T(T+1)/2 + T(S-T) causal
  (query, key) pairs; `causal_skip=False` counts the full T x S. Unfused kernels compute the full
  T x S score matrix and write, re-read (softmax), write and re-read it (AV).
- KV traffic: the new tokens' K, V are written once (by the QKV projection); each layer reads the
  cache it attends to once per step. Nothing is counted twice.
- MoE: only active experts do FLOPs; the weights read per step are those of the experts that at
  least one of the M tokens routes to, E*(1-(1-k/E)^M) in expectation under uniform routing.
- Embedding lookup reads only the M gathered rows; the LM head reads the whole V x D matrix.
  In prefill the LM head covers the last position of each sequence only (B rows).
- Softmax, norm and activation FLOPs are small counts (listed per op) at the vector (fp32) rate.
"""
from __future__ import annotations

import numpy as np

from .formats import Format, get_format
from .counting import _chunk_prefix, _layer_groups, _touched, causal_pairs, chunk_pairs, chunk_read_len, kv_read_len  # noqa: F401
from .runconfig import MAX_GPUS, Layout, Precision  # noqa: F401 (re-exported: perfmodel.ops.Layout, ...)
from .specs import Model

MATMUL, ATTENTION, VECTOR, COMM = "matmul", "attention", "vector", "comm"


class Op:
    """One operator of one layer (x count layers). Byte fields are HBM traffic per instance."""

    __slots__ = ("name", "group", "count", "kind", "flops", "w_read", "kv_read", "act_read", "act_write",
                 "kv_write", "params", "w_stored", "kv_stored", "wfmt", "comm_bytes", "comm_steps", "link", "rows",
                 "coll", "msg", "peers", "gemm", "keys", "attn", "moe", "gdn", "phase")

    def __init__(self, name, group, count, kind, flops=0.0, w_read=0.0, kv_read=0.0, act_read=0.0,
                 act_write=0.0, kv_write=0.0, params=0, w_stored=0.0, kv_stored=0.0, wfmt="", comm_bytes=0.0,
                 comm_steps=0, link="", coll="", msg=0.0, peers=1):
        self.name, self.group, self.count, self.kind = name, group, count, kind
        self.flops, self.w_read, self.kv_read = flops, w_read, kv_read
        self.act_read, self.act_write, self.kv_write = act_read, act_write, kv_write
        self.params, self.w_stored, self.kv_stored = params, w_stored, kv_stored  # kv_stored: per sequence
        self.wfmt = wfmt  # storage format of the weights this op owns ("" if none)
        # collectives (kind COMM): bytes each device sends, sequential steps (latency terms), and the
        # device group ("tp", "ep" or "pp") whose link carries them; no HBM traffic is counted
        self.comm_bytes, self.comm_steps, self.link = comm_bytes, comm_steps, link
        # the collective itself, for pricing by algorithm (perfmodel.timemodel): allreduce, allgather,
        # alltoall or send; the message each device contributes (bytes) and the devices in the group.
        # comm_bytes and comm_steps above are what a ring moves, the algorithm every library has
        self.coll, self.msg, self.peers = coll, msg, peers
        # a matmul's GEMM shape for tile and wave quantization: (rows over all instances, output
        # columns of one instance, instances that compute: 1, or the experts the tokens reach)
        self.gemm = None
        self.keys = None  # attention: keys each query row reads (its kernel's tiles along the key axis)
        # for measured kernel tables (perfmodel.kernels): attention (query heads, KV heads, head dim, query
        # tokens per sequence); experts (tokens routed by the replica, D, d_ff, top-k, experts, tp, ep)
        self.attn = None
        self.moe = None
        # a Gated DeltaNet kernel (measured tables): (part "conv" or "core", k heads, v heads per device, k and v
        # head dims, bytes of kv_read per sequence, bytes per token of act_read (conv) or act_write (core))
        self.gdn = None
        # rows of the product that share one streamed operand (the weights of a matmul; a KV head for
        # the queries of its group): > 1 lets a BLAS library pack that operand (engine: gemm_weight_passes)
        self.rows = 1.0
        self.phase = ""  # the step it belongs to (build_ops): "prefill" holds a prompt, "decode" does not

    @property
    def bytes_read(self):
        return self.w_read + self.kv_read + self.act_read

    @property
    def bytes_written(self):
        return self.act_write + self.kv_write

    @property
    def bytes(self):
        return self.bytes_read + self.bytes_written

    @property
    def intensity(self):
        return self.flops / self.bytes

    @property
    def label(self) -> str:
        return f"{self.name}[{self.group}]" if self.group else self.name

    def __repr__(self):
        return f"Op({self.label} x{self.count})"


class _Builder:
    def __init__(self, m: Model, B, T, S, phase, prec: Precision, attention: str, causal_skip: bool,
                 layout: Layout, share: float, busiest=None, chunks=None):
        lay = layout
        self.tp, self.ep, self.share = lay.tp, lay.ep, share
        # expert slots of a MoE layer: its E experts and the layout's R copies of busy ones (Layout.redundant_experts)
        self.experts, self.slots = lay.experts, (m.moe.n_experts + lay.redundant_experts if m.moe else 0)
        # per device: ceil(B/ep) whole sequences on the busiest one (expert groups run attention
        # data-parallel, each on sequences of its own), N/tp query heads, K/tp KV heads (replicated
        # when K < tp), d_ff/tp, vocab/tp; all tokens Mg of the replica route to the experts
        self.m, self.B, self.T, self.S, self.phase = m, np.ceil(B / lay.ep), T, S, phase
        self.M, self.Mg = (self.B * T if busiest is None else busiest), B * T  # busiest, chunks: engine.busiest_rank
        self.chunks = chunks
        self.N = m.N // lay.tp
        self.K = m.K // lay.tp if m.K >= lay.tp else 1
        self.wf, af, self.kf, self.hf = prec.formats()
        # gb: a GEMM's input activations, in the compute format (fp8 for W8A8); ab: every other activation
        # (the residual stream, norms, attention's Q and O, collectives), which stays 16-bit when the GEMMs
        # compute in 8 bits, as W8A8 serving stacks keep it (TensorRT-LLM, vLLM quantize inside the GEMM path)
        self.gb, self.ab = af.bits / 8, max(af.bits, 16) / 8
        self.kb, self.hb = self.kf.bits / 8, self.hf.bits / 8
        self.unfused = attention == "unfused"
        self.causal_skip = causal_skip
        self.ops: list[Op] = []

    def fmt(self, group: str) -> Format:
        """The stored format of a tensor group: the one the model spec pins (weight_formats), else the
        precision's weights format (attention, MLP, experts) or its 16-bit format (router, embeddings, head).
        The attention output projection (attention_out) takes the attention's pin unless it has its own: NVIDIA's
        DeepSeek-R1-0528-NVFP4-v2 keeps q_a, q_b, kv_a and kv_b in bf16 and quantizes only o_proj."""
        pinned = self.m.weight_format(group) or (self.m.weight_format("attention") if group == "attention_out"
                                                 else None)
        if pinned:
            return get_format(pinned)
        return self.hf if group in ("router", "embed", "lm_head") else self.wf

    def add(self, *a, **kw) -> Op:
        op = Op(*a, **kw)
        self.ops.append(op)
        return op

    # -- building blocks ---------------------------------------------------------------
    def allreduce(self, name, g, n, elems, nbytes=None):
        """Ring all-reduce of `elems` activations (of `nbytes` each; default the activation format's) over the tp
        group: each device sends 2(p-1)/p of the message in 2(p-1) steps."""
        p, a = self.tp, self.ab if nbytes is None else nbytes
        if p > 1:
            self.add(name, g, n, COMM, comm_bytes=2 * (p - 1) / p * elems * a, comm_steps=2 * (p - 1), link="tp",
                     coll="allreduce", msg=elems * a, peers=p)

    def matmul(self, name, g, n, rows, d_in, d_out, n_mats=1, bias=False, fmt: Format | None = None,
               touched=1.0, instances=1, kv_out=0):
        """rows x d_in times n_mats matrices (d_in x d_out) held by `instances` copies (experts),
        of which `touched` are read. kv_out: output columns that go to the KV cache."""
        fmt = fmt or self.wf
        w = n_mats * (fmt.matrix_bytes(d_in * d_out, row=d_in) + (d_out * self.hb if bias else 0))
        p = n_mats * (d_in * d_out + (d_out if bias else 0))
        out_cols = n_mats * d_out - kv_out
        op = self.add(name, g, n, MATMUL, flops=2.0 * rows * d_in * d_out * n_mats, w_read=w * touched,
                      act_read=rows * d_in * self.gb, act_write=rows * out_cols * self.ab,
                      kv_write=rows * kv_out * self.kb, params=p * instances, w_stored=w * instances,
                      wfmt=fmt.name)
        op.rows = rows / instances if instances > 1 else rows  # rows per expert (or per head) matrix
        op.gemm = (rows, n_mats * d_out, touched if instances > 1 else 1.0)
        return op

    def vector(self, name, g, n, elems, flops_per, reads=1, writes=1, params=0):
        """Elementwise op over `elems` activations: reads `reads` and writes `writes` tensors of that size."""
        return self.add(name, g, n, VECTOR, flops=flops_per * elems, act_read=reads * elems * self.ab,
                        act_write=writes * elems * self.ab, params=params, w_stored=params * self.hb,
                        w_read=params * self.hb, wfmt=self.hf.name if params else "")

    def norm(self, name, g, n, rows, width):
        ln = self.m.norm == "layernorm"  # LayerNorm: weight + bias, ~7 FLOP/elem; RMSNorm: weight, ~4
        return self.vector(name, g, n, rows * width, 7 if ln else 4, params=(2 if ln else 1) * width)

    # -- attention ---------------------------------------------------------------------
    def _pairs(self, W, C):
        """(query, key) pairs per sequence of this step: causal (window W) or chunked (C)."""
        skip = self.causal_skip and not self.unfused
        return (chunk_pairs(self.T, self.S, C, skip) if C else causal_pairs(self.T, self.S, W, skip))

    def _klen(self, W, C):
        """Keys per sequence this step reads: S, the window's last W+T-1, or the current chunks."""
        return chunk_read_len(self.T, self.S, C) if C else kv_read_len(self.T, self.S, W)

    def _ctx_rows(self, W, C):
        """Cached keys the ops with weights up-project: B x klen, or the sum over the busiest rank's prompt chunks."""
        if self.chunks is None:
            return self.B * self._klen(W, C)
        return float(np.sum(chunk_read_len(*self.chunks, C) if C else kv_read_len(*self.chunks, W)))

    def _kept(self, W, C):
        """Tokens a layer keeps in its cache at context S: all S, or at most W (window) or C (chunk): a
        chunked layer needs only its current chunk, but a cache holds C to let the chunk fill (HF's
        chunked cache keeps a window of attention_chunk_size; a reservation must hold the full chunk)."""
        lim = W if W is not None else C
        return self.S if lim is None else np.minimum(self.S, lim)

    def attention_core(self, g, n, W, Nq, dqk, dv, kv_bytes_k, kv_bytes_v, from_cache=True, group=1.0, C=None):
        """Scores and weighted sum for Nq heads of width dqk (scores) and dv (values).

        kv_bytes_k/v: bytes per key token per sequence of the K and V read (shared heads counted once).
        W: sliding window (L layers); C: attention chunk (C layers).
        """
        B, T = self.B, self.T
        pairs = self._pairs(W, C)
        klen = self._klen(W, C)
        k_read, v_read = B * klen * kv_bytes_k, B * klen * kv_bytes_v
        rd = {"kv_read": k_read} if from_cache else {"act_read": k_read}
        qk = self.add("attn_qk", g, n, ATTENTION, flops=2.0 * B * pairs * Nq * dqk, **rd)
        qk.act_read = qk.act_read + self.M * Nq * dqk * self.ab  # Q
        av = self.add("attn_av", g, n, ATTENTION, flops=2.0 * B * pairs * Nq * dv,
                      act_write=self.M * Nq * dv * self.ab, **({"kv_read": v_read} if from_cache else {"act_read": v_read}))
        qk.rows = av.rows = self.T * group  # query rows that share one streamed K/V head
        qk.keys = av.keys = klen
        if not self.m.mla:  # K/V heads of this device: bytes per key token / (head width x bytes per element)
            kvh = kv_bytes_k / (dqk * self.kb)
            qk.attn, av.attn = (Nq, kvh, dqk, self.T), (Nq, kvh, dv, self.T)
        else:  # MLA: 0 K/V heads marks the latent cache (perfmodel.kernels prices it from the MLA tables)
            qk.attn, av.attn = (Nq, 0, dqk, self.T), (Nq, 0, dv, self.T)
        if self.unfused:  # the score matrix B*N*T*S_read goes to HBM: written, softmaxed, re-read
            scores = B * Nq * T * klen
            qk.act_write = scores * self.ab
            sm = Op("attn_softmax", g, n, VECTOR, flops=5.0 * scores, act_read=scores * self.ab, act_write=scores * self.ab)
            self.ops.insert(len(self.ops) - 1, sm)  # between QK^T and AV
            av.act_read = av.act_read + scores * self.ab
        return qk, av

    def attention_block(self, g, n, kind, owner):
        m, M, ab = self.m, self.M, self.ab
        N, K, H, D = self.N, self.K, m.H, m.D
        W = m.sliding_window if kind == "L" else None
        C = m.attention_chunk if kind == "C" else None
        bias = m.qkv_bias or m.linear_bias
        fa = self.fmt("attention")
        if m.mla:
            return self.mla_block(g, n, W, C)
        if kind == "R" and m.gated_deltanet:
            return self.gdn_block(g, n)
        Kown = K if owner else 0
        rope = m.position == "rope" and kind not in m.nope_kinds
        if kind == "R":  # linear attention / SSM: K, V update a fixed state instead of a cache
            self.matmul("qkv_proj", g, n, M, D, (N + 2 * K) * H, bias=bias, fmt=fa)
            state = m.linear_state or K * H * H
            self.add("linear_attn", g, n, ATTENTION, flops=2.0 * M * state * (1 + N / K),
                     act_read=M * (N + 2 * K) * H * ab, act_write=M * N * H * ab,
                     kv_read=self.B * state * self.kb, kv_write=self.B * state * self.kb,
                     kv_stored=state * self.kb + 0 * self.S)
        else:
            # fused QKV projection; the K, V columns are written straight into the cache. With an output gate
            # (Qwen3.5) q_proj also emits the gate, N*H more columns: 2*M*D*N*H more FLOPs, D*N*H more weights
            gate = N * H if m.attn_output_gate else 0
            qkv = self.matmul("qkv_proj", g, n, M, D, (N + 2 * Kown) * H + gate, bias=bias, kv_out=2 * Kown * H, fmt=fa)
            if owner:  # 2 (K and V) * K heads * H * bytes per cached token, min(S, W or C) tokens kept
                qkv.kv_stored = 2 * K * H * self.kb * self._kept(W, C)
            if m.qk_norm == "rmsnorm":  # Qwen3, Gemma 3: RMSNorm over each head's H of q and k, one weight of H each
                self.vector("qk_norm", g, n, M * (N + Kown) * H, 4, params=H * (1 + (1 if owner else 0)))
            elif m.qk_norm == "rmsnorm_full":  # MiniMax-M2: one RMSNorm over all N*H of q, one over all K*H of k
                self.vector("qk_norm", g, n, M * (N + Kown) * H, 4, params=(N + Kown) * H)
                # the heads are split over tp, the norm is over all of them: each device's sums of squares of q and
                # k (2 fp32 a token) are all-reduced (vLLM MiniMaxText01RMSNormTP.forward_qk / minimax_qk_norm_fusion)
                self.allreduce("allreduce_qk_norm", g, n, M * 2, nbytes=4)
            elif m.qk_norm == "l2" and rope:  # Llama 4: weightless L2 norm of q and k, on its RoPE layers only
                self.vector("qk_norm", g, n, M * (N + Kown) * H, 3)
            if rope:  # rotate q and the new k (NoPE layers skip it)
                self.vector("rope", g, n, M * (N + Kown) * H, 3)
            qk, _ = self.attention_core(g, n, W, N, H, H, K * H * self.kb, K * H * self.kb, group=N / K, C=C)
            if m.attention_sinks:  # gpt-oss: one learned logit per head joins each softmax's denominator
                qk.params = N  # read by the attention kernel with Q; ~2 FLOP (exp, add) per query row and head
                qk.w_read = qk.w_stored = N * self.hb
                qk.wfmt = self.hf.name
                qk.flops = qk.flops + 2.0 * M * N
                # keys k -> k (F + c) / F (F: the products, c: the sinks' 2 M N): the tile rate's (k + h) / k then
                # falls on the products alone, (F + c)(k' + h) / k' = F (k + h) / k + c. c / F = T / (H pairs); a
                # decode row's k + 1/H. Summed over sequences (engine, fastcost), f / k' = F / k keeps it exact
                qk.keys = qk.keys * (1.0 + self.T / (H * np.maximum(self._pairs(W, C), 1.0)))
            if m.attn_output_gate:  # Qwen3.5: O * sigmoid(gate), ~5 FLOP per element (sigmoid 4, multiply 1)
                self.vector("attn_gate", g, n, M * N * H, 5, reads=2)
        self.matmul("o_proj", g, n, M, N * H, D, bias=m.linear_bias or m.o_bias, fmt=self.fmt("attention_out"))
        self.allreduce("allreduce_attn", g, n, M * D)

    def gdn_block(self, g, n):
        """A Gated DeltaNet layer (Qwen3-Next, Qwen3.5; transformers Qwen3_5MoeGatedDeltaNet): in_proj (q, k, v, the
        output gate z, and the per-head beta and decay inputs b, a), a causal depthwise conv1d of conv_kernel taps over
        q, k, v, the gated delta rule on a state of k_head_dim x v_head_dim per value head, a gated RMSNorm, out_proj.
        Heads split over tp. The state and the conv's last conv_kernel - 1 inputs are kept per sequence; neither grows
        with S."""
        m, M, B, ab, gd = self.m, self.M, self.B, self.ab, self.m.gated_deltanet
        Hk, Hv, dk, dv = gd.n_k_heads // self.tp, gd.n_v_heads // self.tp, gd.k_head_dim, gd.v_head_dim
        fa = self.fmt("attention")
        conv = 2 * Hk * dk + Hv * dv  # conv_dim: the q, k, v channels
        state = Hv * dk * dv  # recurrent state per sequence
        sb = get_format(gd.state_format).bits / 8 if gd.state_format else self.kb
        # in_proj_qkv (D x conv), in_proj_z (D x Hv*dv), in_proj_b and in_proj_a (D x Hv each), one fused GEMM
        self.matmul("gdn_in_proj", g, n, M, m.D, conv + Hv * dv + 2 * Hv, fmt=fa)
        w = gd.conv_kernel
        # depthwise conv1d, no bias: conv*w weights, 2*w FLOP per channel per token; it reads and rewrites the last
        # w - 1 inputs of each channel (the conv state, kept in the 16-bit activation format) once per step
        cv = self.add("gdn_conv", g, n, VECTOR, flops=2.0 * M * conv * w, w_read=conv * w * self.hb, params=conv * w,
                      w_stored=conv * w * self.hb, wfmt=self.hf.name, act_read=M * conv * ab, act_write=M * conv * ab,
                      kv_read=B * conv * (w - 1) * ab, kv_write=B * conv * (w - 1) * ab,
                      kv_stored=conv * (w - 1) * ab + 0 * self.S)
        cv.gdn = ("conv", Hk, Hv, dk, dv, conv * (w - 1) * ab, conv * ab)
        # gated delta rule per token and value head (transformers torch_recurrent_gated_delta_rule): decay the state
        # (1 FLOP per element), read it with k (2), rank-1 update with k and the delta (2), read it with q (2): 7 per
        # state element; plus the L2 norms of q and k (3 FLOP per element). A_log and dt_bias: Hv parameters each
        core = self.add("gdn_core", g, n, ATTENTION, flops=7.0 * M * state + 3.0 * M * 2 * Hk * dk,
                        act_read=M * (conv + 2 * Hv) * ab, act_write=M * Hv * dv * ab,
                        kv_read=B * state * sb, kv_write=B * state * sb, kv_stored=state * sb + 0 * self.S,
                        params=2 * Hv, w_read=2 * Hv * self.hb, w_stored=2 * Hv * self.hb, wfmt=self.hf.name)
        core.rows = self.T  # the tokens of one sequence share its state
        core.gdn = ("core", Hk, Hv, dk, dv, state * sb, Hv * dv * ab)
        # RMSNorm of each head's output (one weight of v_head_dim) times SiLU(z): 4 + 5 FLOP per element
        self.vector("gdn_norm_gate", g, n, M * Hv * dv, 9, reads=2, params=dv)
        self.matmul("o_proj", g, n, M, Hv * dv, m.D, fmt=self.fmt("attention_out"))
        self.allreduce("allreduce_attn", g, n, M * m.D)

    def mla_block(self, g, n, W, C=None):
        """DeepSeek MLA. Cache: latent r + RoPE key d_r per token. Decode uses the absorbed form
        (attention over the latent, W_UK folded into q, W_UV applied after); prefill materialises
        per-head K, V from the latent (the usual split in DeepSeek / vLLM kernels)."""
        m, M, a = self.m, self.M, self.m.mla
        fa = self.fmt("attention")
        # heads split over tp; the latent (and its cache) is per token, so every tp device keeps it
        N, D, r, dr, dn, dv = self.N, m.D, a.kv_lora_rank, a.rope_dim, a.nope_dim, a.v_head_dim
        if a.q_lora_rank:
            self.matmul("q_a_proj", g, n, M, D, a.q_lora_rank, fmt=fa)
            self.norm("q_a_norm", g, n, M, a.q_lora_rank)
            self.matmul("q_b_proj", g, n, M, a.q_lora_rank, N * (dn + dr), fmt=fa)
        else:
            self.matmul("q_proj", g, n, M, D, N * (dn + dr), fmt=fa)
        kva = self.matmul("kv_a_proj", g, n, M, D, r + dr, kv_out=r + dr, fmt=fa)
        kva.kv_stored = (r + dr) * self.kb * self._kept(W, C)
        self.norm("kv_a_norm", g, n, M, r)
        self.vector("rope", g, n, M * (N + 1) * dr, 3)
        Wa = W
        if m.dsa:  # DeepSeek Sparse Attention: the indexer picks topk keys per query; attention reads only those
            self.dsa_indexer(g, n, W, C)
            Wa = m.dsa.topk if W is None else min(W, m.dsa.topk)  # a query attends to min(p, topk) keys, as a window
        if self.phase == "decode":
            self.matmul("mla_q_absorb", g, n, M * N, dn, r, touched=N, instances=N, fmt=fa)  # q_nope . W_UK per head
            self.attention_core(g, n, Wa, N, r + dr, r, (r + dr) * self.kb, 0.0, group=N, C=C)  # latent read once
            self.matmul("mla_v_up", g, n, M * N, r, dv, touched=N, instances=N, fmt=fa)  # . W_UV per head
        else:
            up = self.matmul("mla_kv_up", g, n, self._ctx_rows(W, C), r, N * (dn + dv), fmt=fa)
            up.act_read = up.act_read + self._ctx_rows(W, C) * dr * self.ab  # shared rope key
            self.attention_core(g, n, Wa, N, dn + dr, dv, N * (dn + dr) * self.ab, N * dv * self.ab, from_cache=False,
                                C=C)
        self.matmul("o_proj", g, n, M, N * dv, D, bias=m.linear_bias or m.o_bias, fmt=self.fmt("attention_out"))
        self.allreduce("allreduce_attn", g, n, M * D)

    def dsa_indexer(self, g, n, W, C):
        """The lightning indexer of DeepSeek Sparse Attention (DeepSeek-V3.2; GLM-5, transformers GlmMoeDsaIndexer):
        wq_b (q latent -> nI heads of dI), wk (D -> one key of dI, cached per token), a LayerNorm of that key,
        weights_proj (D -> nI head weights); it scores every key it may see, relu(q.k) weighted and summed over its
        heads, and keeps the topk. Replicated on every tp device (vLLM's indexer projections are replicated)."""
        m, M, B, T, d = self.m, self.M, self.B, self.T, self.m.dsa
        nI, dI, dr = d.n_heads, d.head_dim, m.mla.rope_dim
        fa = self.fmt("attention")
        q_in = m.mla.q_lora_rank or m.D  # wq_b reads the normed q latent (or x without one)
        self.matmul("indexer_q", g, n, M, q_in, nI * dI, fmt=fa)
        ik = self.matmul("indexer_k", g, n, M, m.D, dI, kv_out=dI, fmt=fa)
        ik.kv_stored = dI * self.kb * self._kept(W, C)  # one indexer key per token, all S kept (any may be picked)
        self.add("indexer_k_norm", g, n, VECTOR, flops=7.0 * M * dI, act_read=M * dI * self.ab,
                 act_write=M * dI * self.ab, params=2 * dI, w_read=2 * dI * self.hb, w_stored=2 * dI * self.hb,
                 wfmt=self.hf.name)  # LayerNorm(dI) with weight and bias
        self.matmul("indexer_weights", g, n, M, m.D, nI, fmt=fa)
        self.vector("indexer_rope", g, n, M * (nI + 1) * dr, 3)  # RoPE on the rope part of its q heads and its key
        pairs, klen = self._pairs(W, C), self._klen(W, C)
        # scores: q.k per (query, key) pair and head (2*dI FLOP), relu, times the head weight and summed (3 FLOP);
        # the keys (dI each) read once; the logits (fp32, as DeepGEMM's fp8_mqa_logits writes them) go to HBM
        logits = B * T * klen * 4.0
        sc = self.add("indexer_score", g, n, ATTENTION, flops=B * pairs * nI * (2.0 * dI + 3.0),
                      kv_read=B * klen * dI * self.kb, act_read=M * nI * (dI + 1) * self.ab, act_write=logits)
        sc.rows, sc.keys = T * nI, klen
        # top-k selection over each query's logits: one compare per logit; writes topk int32 indices per query
        self.add("indexer_topk", g, n, VECTOR, flops=1.0 * B * T * klen, act_read=logits,
                 act_write=B * T * np.minimum(klen, d.topk) * 4.0)

    # -- MLP ---------------------------------------------------------------------------
    def mlp(self, g, n, F, prefix="mlp", E=1, touched=1.0, rows=None, bias=None, group="mlp"):
        """A dense MLP (E = 1) or E local experts, d_ff split over tp; rows: token-expert pairs.
        bias: biases on its matrices (default: the model's linear_bias); group: the tensor group whose
        stored format it takes (mlp, experts, shared_expert)."""
        m, D = self.m, self.m.D
        rows = self.M if rows is None else rows
        F = F / self.tp
        b = m.linear_bias if bias is None else bias
        f = self.fmt(group)
        if m.mlp == "gated":  # SwiGLU: up and gate (2 matrices), SiLU(gate)*up, down: 3 matrices
            self.matmul(f"{prefix}_up_gate", g, n, rows, D, F, n_mats=2, bias=b, touched=touched, instances=E, fmt=f)
            self.vector(f"{prefix}_act", g, n, rows * F, 5, reads=2)
        else:  # GELU MLP: 2 matrices
            self.matmul(f"{prefix}_up", g, n, rows, D, F, bias=b, touched=touched, instances=E, fmt=f)
            self.vector(f"{prefix}_act", g, n, rows * F, 8)
        down = self.matmul(f"{prefix}_down", g, n, rows, F, D, bias=b, touched=touched, instances=E, fmt=f)
        if group == "experts":  # the fused MoE kernel's shape (perfmodel.kernels prices both GEMMs by it)
            e = m.moe
            up = self.ops[-3]
            # a tp group that holds whole experts (TEP) runs the expert-parallel kernel over tp x ep devices
            mt, me = (1, self.tp * self.ep) if self.experts == "ep" else (self.tp, self.ep)
            up.moe = down.moe = (self.Mg, D, e.d_ff_expert, e.n_active, self.slots, mt, me)

    def moe(self, g, n):
        e, M, D, ep = self.m.moe, self.M, self.m.D, self.ep
        r = self.matmul("router", g, n, M, D, e.n_experts, fmt=self.fmt("router"))
        if e.router_bias:  # a bias per expert (DeepSeek-V3's e_score_correction_bias, gpt-oss's router bias)
            r.params += e.n_experts
            r.w_stored += e.n_experts * self.hb
            r.w_read += e.n_experts * self.hb
        msg = M * e.n_active * D * self.gb  # each of the M local tokens goes to k experts (in the GEMM format) ...
        if ep > 1:  # ... (ep-1)/ep of them on other devices
            a2a = self.add("alltoall_dispatch", g, n, COMM, comm_bytes=msg * (ep - 1) / ep, comm_steps=ep - 1,
                           link="ep", coll="alltoall", msg=msg, peers=ep)
            a2a.moe = (M, D, e.d_ff_expert, e.n_active, e.n_experts, self.tp, ep)  # M: this device's tokens
        msg = M * e.n_active * D * self.ab  # ... and come back 16-bit
        # E/ep experts here; all Mg tokens of the replica route uniformly, so Mg*k/ep token-expert pairs. A tp group
        # that holds whole experts (TEP) spreads them over tp x ep devices: E/(tp ep) experts of the full d_ff each,
        # Mg*k/(tp ep) pairs (the same FLOPs and weights as d_ff/tp slices of every expert, 1/tp of the activations).
        # R redundant slots (expert-parallel load balancing, DeepSeek's EPLB): S = E + R slots, S/ep per device; a
        # token's pair goes to one copy of its expert, so the pairs stay Mg*k/ep, spread as if over S experts
        g_e = ep * self.tp if self.experts == "ep" else ep
        S = self.slots
        self.mlp(g, n, e.d_ff_expert * (self.tp if self.experts == "ep" else 1), "expert", E=S / g_e,
                 rows=self.Mg * e.n_active / g_e, touched=_touched(S, e.n_active, self.Mg) / g_e,
                 bias=e.expert_bias or self.m.linear_bias, group="experts")
        if ep > 1:
            a2a = self.add("alltoall_combine", g, n, COMM, comm_bytes=msg * (ep - 1) / ep, comm_steps=ep - 1,
                           link="ep", coll="alltoall", msg=msg, peers=ep)
            a2a.moe = (M, D, e.d_ff_expert, e.n_active, e.n_experts, self.tp, ep)
        if e.n_shared:
            self.mlp(g, n, e.n_shared * e.d_ff_expert, "shared_expert", group="shared_expert")
            if e.shared_gate:  # Qwen2-MoE: sigmoid(x W_g) scales the shared expert's output, W_g a D x 1 matrix
                self.matmul("shared_expert_gate", g, n, M, D, 1, fmt=self.fmt("router"))

    # -- whole model -------------------------------------------------------------------
    def build(self) -> list[Op]:
        m, M, D, B = self.m, self.M, self.m.D, self.B
        V = m.V / self.tp  # vocab-parallel embedding and LM head
        fe = self.fmt("embed")
        emb = self.add("embed", "", 1, VECTOR, w_read=np.minimum(M, V) * D * fe.bits / 8,
                       act_write=M * D * self.ab, params=V * D, w_stored=fe.matrix_bytes(V * D, row=D), wfmt=fe.name)
        emb.flops = 0.0 * M
        self.allreduce("allreduce_embed", "", 1, M * D)
        if m.position == "learned":
            self.add("pos_embed", "", 1, VECTOR, flops=M * D, w_read=M * D * self.hb, act_read=M * D * self.ab,
                     act_write=M * D * self.ab, params=m.max_context * D, w_stored=m.max_context * D * self.hb,
                     wfmt=self.hf.name)
        post = m.norms_per_layer == 4  # Gemma 2/3: a norm after attention and after the MLP too
        for g, n, kind, is_moe, owner in layer_groups(m):
            n = n * self.share if self.share != 1 else n  # this pipeline stage's share of the layers
            self.norm("attn_norm", g, n, M, D)
            self.attention_block(g, n, kind, owner)
            if post:
                self.norm("post_attn_norm", g, n, M, D)
            self.vector("residual", g, n, M * D, 1, reads=2)
            self.norm("mlp_norm", g, n, M, D)
            self.moe(g, n) if is_moe else self.mlp(g, n, m.F)
            if self.tp > 1:
                self.allreduce("allreduce_mlp", g, n, M * D)
            if post:
                self.norm("post_mlp_norm", g, n, M, D)
            self.vector("residual", g, n, M * D, 1, reads=2)
        self.norm("final_norm", "", 1, M, D)
        rows = B if self.phase == "prefill" else M
        head = self.matmul("lm_head", "", 1, rows, D, V, fmt=fe if m.tied_embeddings else self.fmt("lm_head"))
        if m.tied_embeddings:  # same matrix as the embedding: read again, stored once
            head.params, head.w_stored = 0, 0.0
        if self.tp > 1:  # gather the vocab shards of the logits
            p = self.tp
            self.add("allgather_logits", "", 1, COMM, comm_bytes=(p - 1) / p * rows * m.V * self.ab,
                     comm_steps=p - 1, link="tp", coll="allgather", msg=rows * m.V * self.ab, peers=p)
        return self.ops


_GROUPS: dict = {}


def layer_groups(m: Model):
    """Layers grouped by (attention kind, MoE or dense MLP, owns its KV under CLA), in order.

    Returns [(label, count, kind, is_moe, kv_owner), ...], computed once per model (O(n_layers)).
    """
    if m not in _GROUPS:
        if len(_GROUPS) > 256:
            _GROUPS.clear()
        _GROUPS[m] = list(_layer_groups(m))
    return _GROUPS[m]


def build_ops(model: Model, B, T, S, phase: str, prec: Precision | None = None,
              attention: str = "fused", causal_skip: bool = True, layout: Layout | None = None,
              stage: bool = False) -> list[Op]:
    """The op list of one forward pass on one device. B, T, S broadcast (numpy arrays or scalars).

    With a layout, the ops are one device's share: heads, d_ff and vocab split over tp, experts over
    ep, and the collectives added as COMM ops. stage=True keeps only the largest pipeline stage's
    layers (ceil(L/pp) of L; embedding and LM head included), for per-device memory and stage time;
    stage=False keeps every layer once (the path of one token through all stages).
    """
    return build_step_ops(model, B, T, S, phase, prec, attention, causal_skip, layout, stage)


def build_step_ops(model: Model, B, T, S, phase: str, prec: Precision | None = None,
                   attention: str = "fused", causal_skip: bool = True, layout: Layout | None = None,
                   stage: bool = False, busiest=None, chunks=None) -> list[Op]:
    """build_ops for a step of unequal rows (engine.mixed_step): busiest, the busiest device's new tokens where
    not ceil(B/ep) x T; chunks, its prompt chunks' (T_i, S_i), whose context MLA's up-projection reads
    (engine.busiest_rank)."""
    from .errors import SpecError

    if phase not in ("prefill", "decode"):
        raise SpecError("--phase", None, f"must be prefill or decode, got {phase!r}")
    if attention not in ("fused", "unfused"):
        raise SpecError("--attention", None, f"must be fused or unfused, got {attention!r}")
    lay = layout or Layout()
    check_layout(model, lay)
    share = -(-model.n_layers // lay.pp) / model.n_layers if (stage and lay.pp > 1) else 1
    f = lambda x: np.asarray(x, dtype=np.float64)  # noqa: E731  float64: 405B x 1M context stays exact enough
    ops = _Builder(model, f(B), f(T), f(S), phase, prec or Precision(), attention, causal_skip, lay, share,
                   busiest, chunks).build()
    if lay.pp > 1:
        n = 1 if stage else lay.pp - 1  # activations handed to the next stage
        ab = max((prec or Precision()).formats()[1].bits, 16) / 8  # activations handed on stay 16-bit
        sent = np.ceil(f(B) / lay.ep) * f(T) * model.D * ab
        ops.append(Op("pp_send", "", n, COMM, comm_bytes=sent, comm_steps=1, link="pp", coll="send", msg=sent, peers=2))
    for op in ops:
        op.phase = phase
    return ops


def check_layout(m: Model, lay: Layout) -> None:
    """Raise ValueError naming what does not divide."""
    from .errors import SpecError

    for k in ("tp", "pp", "ep", "replicas"):
        v = getattr(lay, k)
        if not isinstance(v, int) or v < 1:
            raise SpecError(f"--{k}", None, f"must be a positive integer, got {v!r}")
    if m.N % lay.tp:
        raise SpecError("--tp", None, f"{m.name} has {m.N} query heads, not divisible by tp={lay.tp}")
    if m.K % lay.tp and lay.tp % m.K:
        raise SpecError("--tp", None, f"{m.name} has {m.K} KV heads: tp={lay.tp} must divide it or be a multiple")
    if lay.pp > m.n_layers:
        raise SpecError("--pp", None, f"{m.name} has only {m.n_layers} layers for pp={lay.pp}")
    if lay.ep > 1 and not m.moe:
        raise SpecError("--ep", None, f"{m.name} has no experts; expert parallelism needs a MoE model")
    gd = m.gated_deltanet
    if gd and (gd.n_k_heads % lay.tp or gd.n_v_heads % lay.tp):
        raise SpecError("--tp", None, f"{m.name}'s linear layers have {gd.n_k_heads} key and {gd.n_v_heads} value "
                                      f"heads, not divisible by tp={lay.tp}")
    R = lay.redundant_experts
    if R and not m.moe:
        raise SpecError("--redundant-experts", None, f"{m.name} has no experts to replicate")
    if R and lay.ep == 1 and lay.experts != "ep":
        raise SpecError("--redundant-experts", None, "needs expert parallelism (--ep > 1): with one expert group "
                                                     "every device already holds every expert")
    slots = (m.moe.n_experts + R) if m.moe else 0
    what = f"{m.moe.n_experts} experts" + (f" + {R} redundant" if R else "") if m.moe else ""
    if m.moe and slots % lay.ep:
        raise SpecError("--ep" if not R else "--ep/--redundant-experts", None,
                        f"{m.name} has {what}, not divisible by ep={lay.ep}")
    if lay.experts == "ep" and m.moe and slots % (lay.tp * lay.ep):
        raise SpecError("experts=", None, f"{m.name} has {what}, not divisible over "
                                          f"tp x ep = {lay.tp * lay.ep} devices")
    if lay.microbatches is not None and lay.microbatches < 1:
        raise SpecError("--microbatches", None, "must be at least 1")


def param_count(model: Model) -> int:
    """Parameters, summed over the op list (each op owns the weights it reads)."""
    return int(sum(op.params * op.count for op in build_ops(model, 1, 1, 1, "decode")))


def active_param_count(model: Model, input_embedding: bool = True) -> int:
    """Parameters one token uses, summed over the same op list: every op's parameters, the routed
    experts' times k/E (k of E experts per token), and, with input_embedding=False (DeepSeek's, Moonshot's
    and OpenAI's convention), without the input embedding table, of which a token reads one row (a tied
    table stays: the LM head reads all of it). A dense model's active count is its parameter count."""
    e = model.moe
    total = 0
    for op in build_ops(model, 1, 1, 1, "decode"):
        p = op.params * op.count
        if e and op.name.startswith("expert_"):  # routed experts: params = per-expert matrices x E (exact)
            p = p // e.n_experts * e.n_active
        if op.name == "embed" and not input_embedding and not model.tied_embeddings:
            p = 0
        total += p
    return int(total)
