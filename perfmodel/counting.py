"""How many (query, key) pairs and keys an attention call touches, how many experts a batch reaches, and which
layers share a kind: the counting laws the op list (perfmodel.ops) prices, over numpy arrays of T (new tokens)
and S (context).
perfmodel.ops re-exports them."""
from __future__ import annotations

import numpy as np


def causal_pairs(T, S, W=None, causal_skip=True):
    """(query, key) pairs per sequence: T queries at positions S-T+1..S, each seeing min(p, W) keys.

    causal_skip=False: the T x S_read rectangle a kernel computes when it does not skip masked tiles.
    """
    if not causal_skip:
        return T * kv_read_len(T, S, W)
    a, b = S - T + 1, S  # first and last query position (1-based)
    if W is None:
        return (a + b) * T / 2  # sum_{p=a}^{b} p = T(S-T) + T(T+1)/2
    c = np.clip(W, a - 1, b)  # last position whose query still sees all its past
    return (c * (c + 1) - (a - 1) * a) / 2 + (b - c) * W


def kv_read_len(T, S, W=None):
    """Keys a chunk of T queries needs: S, or the last T+W-1 under a sliding window W."""
    return S if W is None else np.minimum(S, W + T - 1)


def _chunk_prefix(n, C):
    """sum_{p=1}^{n} (((p-1) mod C) + 1): the (query, key) pairs of the first n positions under chunked
    attention, n = qC + r: q full chunks of C(C+1)/2 pairs and a partial one of r(r+1)/2."""
    n = np.maximum(n, 0)
    q = np.floor(n / C)
    r = n - q * C
    return q * C * (C + 1) / 2 + r * (r + 1) / 2


def chunk_pairs(T, S, C, causal_skip=True):
    """(query, key) pairs per sequence under chunked local attention (Llama 4): the query at position p
    (1-based) sees the keys of its own chunk, floor((p-1)/C)*C + 1 .. p. Queries S-T+1..S:
    F(S) - F(S-T) with F = _chunk_prefix. causal_skip=False: the T x keys-read rectangle."""
    if not causal_skip:
        return T * chunk_read_len(T, S, C)
    return _chunk_prefix(S, C) - _chunk_prefix(S - T, C)


def chunk_read_len(T, S, C):
    """Keys T queries at positions S-T+1..S read under chunks of C: from the first query's chunk start
    to S, i.e. S - floor((S-T)/C)*C; one query (decode) reads ((S-1) mod C) + 1."""
    return np.maximum(S - np.floor(np.maximum(S - T, 0) / C) * C, 0)


def _touched(E, k, M):
    """Expected distinct experts hit by M tokens routing to k of E each, uniformly."""
    if E == k:
        return float(E) + 0 * M
    return E * (1.0 - (1.0 - k / E) ** M)


def _layer_groups(m):
    """Layers grouped by (attention kind, MoE or dense MLP, owns its KV under CLA), labelled (ops.layer_groups)."""
    kinds = m.layer_kinds()
    sig = [(kinds[i], bool(m.moe and m.moe.is_moe(i)), i % m.kv_share == 0) for i in range(m.n_layers)]
    counts: dict = {}
    for s in sig:
        counts[s] = counts.get(s, 0) + 1
    several = len(counts) > 1
    names = {"G": "global", "L": "local", "R": "linear", "C": "chunked"}
    for (kind, is_moe, owner), n in counts.items():
        parts = []
        if len({s[0] for s in sig}) > 1:
            parts.append(names[kind])
        if m.moe and len({s[1] for s in sig}) > 1:
            parts.append("moe" if is_moe else "dense")
        if m.kv_share > 1:
            parts.append("kv" if owner else "kv-shared")
        yield (f"{'/'.join(parts)} x{n}" if several else ""), n, kind, is_moe, owner
