"""Hardware and model specs: strict YAML loading, `base:` inheritance, `--set` overrides.

Everything is converted to SI at load (bytes, bytes/s, FLOP/s, W). A catalog name
("h100-sxm") and a path to a user's file ("./my-gpu.yaml") work the same everywhere.
Every problem raises SpecError naming the file and the field.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from . import yamlio
from .efficiency import Impl, impl_from_dict
from .errors import SpecError
from .formats import get_format
from .yamlio import safe_yaml  # noqa: F401  (re-exported: the CLI reads --set values with it)
from .fields import PEAK_KEYS, _bool, _check_keys, _choice, _int, _need, _qty, _str  # noqa: F401 (PEAK_KEYS re-exported)

from .catalog import (  # noqa: F401,E402  (files, names, base: and --set: perfmodel/catalog.py; re-exported)
    PKG, _SUBDIR, _merge, _near, _parse, _read_yaml, _resolve, apply_overrides, catalog_dir, catalog_names, load_raw,
)


from .hardware_spec import _HW_QTY, Hardware, _keywords_only, _replace_hardware, hardware_from_dict  # noqa: E402,F401


# ---------------------------------------------------------------- model
_MLA_KEYS = {"kv_lora_rank", "rope_dim", "nope_dim", "v_head_dim", "q_lora_rank"}
_MOE_KEYS = {"n_experts", "n_active", "n_shared", "d_ff_expert", "first_dense_layers", "router_bias", "layer_pattern",
             "shared_gate", "expert_bias"}
_PUB_KEYS = {"value", "source", "tolerance", "excluded", "excluded_what"}
_ACTIVE_KEYS = {"value", "source", "tolerance", "input_embedding"}
# tensor groups whose stored format a model spec can pin (weight_formats: {experts: mxfp4}); the op list reads
# each matmul's format from its group (docs/specs.md, Model)
WEIGHT_GROUPS = ("attention", "attention_out", "mlp", "experts", "shared_expert", "router", "embed", "lm_head")
LAYER_KINDS = "GLRC"  # global, local (sliding window), linear attention / SSM, chunked local attention
QK_NORMS = ("rmsnorm", "l2", "rmsnorm_full")
_GDN_KEYS = {"n_k_heads", "n_v_heads", "k_head_dim", "v_head_dim", "conv_kernel", "state_format"}
_DSA_KEYS = {"n_heads", "head_dim", "topk"}


@dataclass(frozen=True)
class MLA:
    kv_lora_rank: int  # r: latent stored per token per layer
    rope_dim: int  # d_r: decoupled RoPE key stored per token per layer
    nope_dim: int  # per-head q/k dims without RoPE
    v_head_dim: int
    q_lora_rank: int | None = None  # None: q is a full-rank D x N(nope+rope) projection


@dataclass(frozen=True)
class GatedDeltaNet:
    """The linear-attention (R) layers of Qwen3-Next / Qwen3.5: a gated delta rule with a recurrent state of
    k_head_dim x v_head_dim per value head, a short causal depthwise convolution over q, k, v, and an output gate."""

    n_k_heads: int  # linear_num_key_heads: heads of q and k
    n_v_heads: int  # linear_num_value_heads: heads of v, of the state and of the output
    k_head_dim: int  # linear_key_head_dim
    v_head_dim: int  # linear_value_head_dim
    conv_kernel: int = 4  # linear_conv_kernel_dim: taps of the causal depthwise conv1d
    state_format: str | None = None  # storage format of the recurrent state (Qwen3.5: mamba_ssm_dtype float32); None: the KV format


@dataclass(frozen=True)
class DSA:
    """DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5): a lightning indexer of its own small heads scores every
    past key for each query, and the attention reads only the top-k of them."""

    n_heads: int  # index_n_heads
    head_dim: int  # index_head_dim: one indexer key of this size is cached per token per layer
    topk: int  # index_topk: keys each query attends to


@dataclass(frozen=True)
class MoE:
    n_experts: int  # E
    n_active: int  # k experts per token (routed)
    d_ff_expert: int  # F_e
    n_shared: int = 0  # always-active shared experts of width F_e
    first_dense_layers: int = 0  # leading layers with a dense MLP of width d_ff
    router_bias: bool = False  # a per-expert bias parameter in the router (DeepSeek-V3, gpt-oss)
    layer_pattern: str = "M"  # repeated over the layers after the leading dense ones: M MoE, D dense (Llama 4 Maverick: DM)
    shared_gate: bool = False  # a D x 1 sigmoid gate on the shared expert's output (Qwen2-MoE)
    expert_bias: bool = False  # biases on every expert matrix (gpt-oss)

    def is_moe(self, i: int) -> bool:
        """Layer i (0-based) has the MoE block: after the leading dense layers, where the pattern says M."""
        p = self.layer_pattern
        return i >= self.first_dense_layers and p[i % len(p)] == "M"


@dataclass(frozen=True)
class Model:
    """A transformer config in the lecture's notation (see the property docstrings)."""

    name: str
    vocab_size: int  # V
    d_model: int  # D
    n_layers: int  # L
    n_heads: int  # N
    n_kv_heads: int  # K
    head_dim: int  # H
    d_ff: int  # F
    max_context: int
    mlp: str = "gated"  # gated: 3 matrices (up, gate, down); plain: 2
    tied_embeddings: bool = False
    qkv_bias: bool = False
    linear_bias: bool = False
    o_bias: bool = False  # a bias on the attention output projection (attention_bias in Llama / gpt-oss configs)
    norm: str = "rmsnorm"
    norms_per_layer: int = 2  # 2: pre-attention and pre-MLP; 4: also after attention and after the MLP (Gemma 2/3)
    qk_norm: str | None = None  # per-head norm of q and k before RoPE: rmsnorm (weight of H each: Qwen3, Gemma 3), l2 (none: Llama 4),
    # rmsnorm_full (one RMSNorm over all N*H of q and all K*H of k, weights N*H + K*H: MiniMax-M2 qk_norm_type per_layer)
    attn_output_gate: bool = False  # q_proj also emits a gate of N*H; the attention output is multiplied by its sigmoid (Qwen3.5)
    position: str = "rope"
    nope_kinds: str = ""  # layer kinds that use no position encoding (Llama 4: G, its global layers are NoPE)
    sliding_window: int | None = None  # W for 'L' layers
    attention_chunk: int | None = None  # C for 'C' layers: a query sees the keys of its own chunk of C tokens (Llama 4)
    layer_pattern: str = "G"  # repeated over layers: G global, L local (window W), C chunked (C), R linear/SSM
    attention_sinks: bool = False  # one learned logit per head per layer joins each softmax (gpt-oss)
    kv_share: int = 1  # CLA: consecutive layers sharing one KV
    linear_state: int | None = None  # elements of fixed state per 'R' layer per sequence
    gated_deltanet: GatedDeltaNet | None = None  # what the 'R' layers are, when they are Gated DeltaNet (Qwen3.5)
    mla: MLA | None = None
    dsa: DSA | None = None  # DeepSeek Sparse Attention on the MLA layers (GLM-5)
    moe: MoE | None = None
    weight_formats: tuple = ()  # ((group, format), ...): stored formats pinned per tensor group (gpt-oss: experts mxfp4)
    published_params: int | None = None
    published_tolerance: float = 0.0
    published_source: str = ""
    published_excluded: int = 0  # parameters of the published total this spec does not model (a vision tower)
    published_excluded_what: str = ""
    published_active: int | None = None  # published active (per token) parameters of a MoE model
    published_active_tolerance: float = 0.0
    published_active_source: str = ""
    published_active_input_embedding: bool = True  # whether that figure counts the input embedding table
    source: str = ""
    description: str = ""
    key: str = ""

    # short notation aliases
    V = property(lambda s: s.vocab_size)
    D = property(lambda s: s.d_model)
    L = property(lambda s: s.n_layers)
    N = property(lambda s: s.n_heads)
    K = property(lambda s: s.n_kv_heads)
    H = property(lambda s: s.head_dim)
    F = property(lambda s: s.d_ff)

    def layer_kinds(self) -> str:
        """One character per layer: G, L, C or R."""
        p = self.layer_pattern
        return (p * (self.n_layers // len(p) + 1))[: self.n_layers]

    def weight_format(self, group: str) -> str | None:
        """The format pinned for a tensor group (WEIGHT_GROUPS), or None (the precision's weights format)."""
        return dict(self.weight_formats).get(group)

    def replace(self, *args, **kw) -> "Model":
        """A modified copy, validated like a file would be."""
        _keywords_only(self, args)
        where = f"<{self.name} modified>"
        _check_keys(kw, {f.name for f in dataclasses.fields(self)}, where)
        for fld in ("mla", "moe", "gated_deltanet", "dsa"):  # a part given as a mapping is read as a file's would be
            v = kw.get(fld)
            if isinstance(v, dict):
                kw[fld] = model_from_dict({**_model_to_dict(self), fld: v}, where).__getattribute__(fld)
            elif v is not None and not dataclasses.is_dataclass(v):
                raise SpecError(where, fld, f"must be a mapping of its fields (or None), got {type(v).__name__}")
        return model_from_dict(_model_to_dict(dataclasses.replace(self, **kw)), f"<{self.name} modified>")


def _model_to_dict(m: Model) -> dict:
    d = {f.name: getattr(m, f.name) for f in dataclasses.fields(m)}
    d["mla"] = dataclasses.asdict(m.mla) if m.mla else None
    d["moe"] = dataclasses.asdict(m.moe) if m.moe else None
    d["gated_deltanet"] = dataclasses.asdict(m.gated_deltanet) if m.gated_deltanet else None
    d["dsa"] = dataclasses.asdict(m.dsa) if m.dsa else None
    d["weight_formats"] = dict(m.weight_formats) or None
    pub = None
    if m.published_params:
        pub = {"value": m.published_params, "source": m.published_source, "tolerance": m.published_tolerance}
        if m.published_excluded:
            pub.update(excluded=m.published_excluded, excluded_what=m.published_excluded_what)
    active = ({"value": m.published_active, "source": m.published_active_source,
               "tolerance": m.published_active_tolerance, "input_embedding": m.published_active_input_embedding}
              if m.published_active else None)
    key = d.pop("key")
    d["source"] = d["source"] or "code"
    d = {k: v for k, v in d.items() if v is not None and not k.startswith("published_")}
    for k, v in (("published_params", pub), ("published_active_params", active)):
        if v is not None:
            d[k] = v
    d["_key"] = key
    return d


_MODEL_INT = ("vocab_size", "d_model", "n_layers", "n_heads", "d_ff", "max_context")
_MODEL_ALLOWED = {"name", "source", "description", *_MODEL_INT, "n_kv_heads", "head_dim", "mlp",
                  "tied_embeddings", "qkv_bias", "linear_bias", "o_bias", "norm", "norms_per_layer", "qk_norm",
                  "position", "nope_kinds", "sliding_window", "attention_chunk", "layer_pattern", "attention_sinks",
                  "kv_share", "linear_state", "mla", "moe", "weight_formats", "published_params", "attn_output_gate",
                  "gated_deltanet", "dsa",
                  "published_active_params"}


def _published(pub, where: str, fld: str, keys: set) -> dict:
    """{value, source, tolerance, ...} of a published count, checked."""
    if not isinstance(pub, dict):
        raise SpecError(where, fld, "must be {value: N, source: '...', tolerance: 0}")
    _check_keys(pub, keys, where, f"{fld}.")
    _need(pub, ["value", "source"], where, f"{fld}.")
    tol = pub.get("tolerance", 0)
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not (0 <= tol < 1):
        raise SpecError(where, f"{fld}.tolerance", f"must be a number in [0, 1), got {tol!r}")
    return {"value": _int(pub["value"], where, f"{fld}.value"), "source": _str(pub["source"], where, f"{fld}.source"),
            "tolerance": float(tol)}


def model_from_dict(data: dict, where: str, key: str = "") -> Model:
    data = dict(data)
    key = data.pop("_key", key)
    _check_keys(data, _MODEL_ALLOWED, where)
    _need(data, ["name", "source", *_MODEL_INT], where)
    kw = {f: _int(data[f], where, f) for f in _MODEL_INT}
    if kw["n_layers"] > 10_000:  # O(n_layers) Python objects per op list; DeepNet (arXiv:2203.00555), the deepest published, has 1,000
        raise SpecError(where, "n_layers", f"is implausibly large ({kw['n_layers']}; at most 10000)")
    N, D = kw["n_heads"], kw["d_model"]
    kw["n_kv_heads"] = _int(data.get("n_kv_heads", N), where, "n_kv_heads")
    if N % kw["n_kv_heads"]:
        raise SpecError(where, "n_kv_heads", f"n_heads ({N}) is not divisible by n_kv_heads ({kw['n_kv_heads']})")
    if "head_dim" in data:
        kw["head_dim"] = _int(data["head_dim"], where, "head_dim")
    elif D % N:
        raise SpecError(where, "head_dim", f"missing, and d_model ({D}) is not divisible by n_heads ({N})")
    else:
        kw["head_dim"] = D // N
    kw["mlp"] = _choice(data.get("mlp", "gated"), where, "mlp", ("gated", "plain"))
    kw["norm"] = _choice(data.get("norm", "rmsnorm"), where, "norm", ("rmsnorm", "layernorm"))
    kw["position"] = _choice(data.get("position", "rope"), where, "position", ("rope", "learned", "none"))
    for b in ("tied_embeddings", "qkv_bias", "linear_bias", "o_bias", "attention_sinks", "attn_output_gate"):
        kw[b] = _bool(data.get(b, False), where, b)
    kw["norms_per_layer"] = _int(data.get("norms_per_layer", 2), where, "norms_per_layer")
    if kw["norms_per_layer"] not in (2, 4):
        raise SpecError(where, "norms_per_layer", f"must be 2 (pre-norms) or 4 (pre- and post-norms), got "
                                                  f"{kw['norms_per_layer']}")
    if data.get("qk_norm") is not None:
        kw["qk_norm"] = _choice(data["qk_norm"], where, "qk_norm", QK_NORMS)
    for s in ("name", "source"):
        kw[s] = _str(data[s], where, s)
    kw["description"] = str(data.get("description") or "")
    for w in ("sliding_window", "attention_chunk"):
        if data.get(w) is not None:
            kw[w] = _int(data[w], where, w)
    pat = data.get("layer_pattern", "L" if kw.get("sliding_window") else "G")
    if not isinstance(pat, str) or not pat or set(pat) - set(LAYER_KINDS):
        raise SpecError(where, "layer_pattern", "must be a string of G (global), L (local, sliding window), "
                                                f"C (chunked local), R (linear); got {pat!r}")
    if "L" in pat and not kw.get("sliding_window"):
        raise SpecError(where, "sliding_window", "layer_pattern has local (L) layers but no sliding_window")
    if "C" in pat and not kw.get("attention_chunk"):
        raise SpecError(where, "attention_chunk", "layer_pattern has chunked (C) layers but no attention_chunk")
    kw["layer_pattern"] = pat
    nope = data.get("nope_kinds", "")
    if not isinstance(nope, str) or set(nope) - set(LAYER_KINDS):
        raise SpecError(where, "nope_kinds", f"must be a string of layer kinds (G, L, C, R) without RoPE; got {nope!r}")
    kw["nope_kinds"] = "".join(sorted(set(nope)))
    kw["kv_share"] = _int(data.get("kv_share", 1), where, "kv_share")
    if kw["kv_share"] > kw["n_layers"]:
        raise SpecError(where, "kv_share", f"cannot exceed n_layers ({kw['n_layers']})")
    if kw["kv_share"] > 1 and len(set(pat)) > 1:
        raise SpecError(where, "kv_share", "cross-layer KV sharing needs all layers of one kind")
    if data.get("linear_state") is not None:
        kw["linear_state"] = _int(data["linear_state"], where, "linear_state")
    if data.get("mla") is not None:
        m = data["mla"]
        if not isinstance(m, dict):
            raise SpecError(where, "mla", "must be a mapping")
        _check_keys(m, _MLA_KEYS, where, "mla.")
        _need(m, ["kv_lora_rank", "rope_dim", "nope_dim", "v_head_dim"], where, "mla.")
        kw["mla"] = MLA(**{k: _int(m[k], where, f"mla.{k}") for k in _MLA_KEYS - {"q_lora_rank"}},
                        q_lora_rank=None if m.get("q_lora_rank") is None else _int(m["q_lora_rank"], where, "mla.q_lora_rank"))
        if "R" in pat:
            raise SpecError(where, "mla", "MLA cannot be combined with linear (R) layers")
        for k in ("qk_norm", "attention_sinks", "attn_output_gate"):
            if kw.get(k):
                raise SpecError(where, k, "is not modelled for MLA attention")
    if data.get("gated_deltanet") is not None:
        kw["gated_deltanet"] = _gdn_from_dict(data["gated_deltanet"], where, kw)
    if data.get("dsa") is not None:
        kw["dsa"] = _dsa_from_dict(data["dsa"], where, kw)
    if data.get("moe") is not None:
        kw["moe"] = _moe_from_dict(data["moe"], where, kw)
    wf = data.get("weight_formats")
    if wf is not None:
        if not isinstance(wf, dict):
            raise SpecError(where, "weight_formats", f"must be a mapping of tensor group: format ({', '.join(WEIGHT_GROUPS)})")
        _check_keys(wf, WEIGHT_GROUPS, where, "weight_formats.")
        pinned = []
        for g in WEIGHT_GROUPS:
            if wf.get(g) is None:
                continue
            try:
                pinned.append((g, get_format(wf[g]).name))
            except ValueError as e:
                raise SpecError(where, f"weight_formats.{g}", str(e)) from None
        kw["weight_formats"] = tuple(pinned)
    pub = data.get("published_params")
    if pub is not None:
        p = _published(pub, where, "published_params", _PUB_KEYS)
        kw["published_params"], kw["published_source"], kw["published_tolerance"] = p["value"], p["source"], p["tolerance"]
        if pub.get("excluded") is not None:
            kw["published_excluded"] = _int(pub["excluded"], where, "published_params.excluded", 0)
            if kw["published_excluded"] >= p["value"]:
                raise SpecError(where, "published_params.excluded", "must be less than published_params.value")
            kw["published_excluded_what"] = _str(pub.get("excluded_what") or "", where, "published_params.excluded_what")
    act = data.get("published_active_params")
    if act is not None:
        p = _published(act, where, "published_active_params", _ACTIVE_KEYS)
        kw["published_active"], kw["published_active_source"] = p["value"], p["source"]
        kw["published_active_tolerance"] = p["tolerance"]
        kw["published_active_input_embedding"] = _bool(act.get("input_embedding", True), where,
                                                       "published_active_params.input_embedding")
    return Model(key=key or where, **kw)


def _gdn_from_dict(g, where: str, kw: dict) -> GatedDeltaNet:
    if not isinstance(g, dict):
        raise SpecError(where, "gated_deltanet", "must be a mapping {n_k_heads, n_v_heads, k_head_dim, v_head_dim, ...}")
    _check_keys(g, _GDN_KEYS, where, "gated_deltanet.")
    _need(g, ["n_k_heads", "n_v_heads", "k_head_dim", "v_head_dim"], where, "gated_deltanet.")
    vals = {k: _int(g[k], where, f"gated_deltanet.{k}") for k in ("n_k_heads", "n_v_heads", "k_head_dim", "v_head_dim")}
    vals["conv_kernel"] = _int(g.get("conv_kernel", 4), where, "gated_deltanet.conv_kernel")
    if vals["n_v_heads"] % vals["n_k_heads"]:
        raise SpecError(where, "gated_deltanet.n_v_heads", f"({vals['n_v_heads']}) is not a multiple of "
                                                           f"gated_deltanet.n_k_heads ({vals['n_k_heads']})")
    sf = g.get("state_format")
    if sf is not None:
        try:
            vals["state_format"] = get_format(sf).name
        except ValueError as e:
            raise SpecError(where, "gated_deltanet.state_format", str(e)) from None
    if "R" not in kw["layer_pattern"]:
        raise SpecError(where, "gated_deltanet", "describes the linear (R) layers, but layer_pattern has none")
    if kw.get("linear_state") is not None:
        raise SpecError(where, "linear_state", "cannot be combined with gated_deltanet (its state is "
                                               "n_v_heads x k_head_dim x v_head_dim)")
    return GatedDeltaNet(**vals)


def _dsa_from_dict(d, where: str, kw: dict) -> DSA:
    if not isinstance(d, dict):
        raise SpecError(where, "dsa", "must be a mapping {n_heads, head_dim, topk}")
    _check_keys(d, _DSA_KEYS, where, "dsa.")
    _need(d, ["n_heads", "head_dim", "topk"], where, "dsa.")
    if kw.get("mla") is None:
        raise SpecError(where, "dsa", "DeepSeek Sparse Attention is modelled on MLA layers: it needs mla")
    dsa = DSA(**{k: _int(d[k], where, f"dsa.{k}") for k in ("n_heads", "head_dim", "topk")})
    if dsa.head_dim < kw["mla"].rope_dim:
        raise SpecError(where, "dsa.head_dim", f"({dsa.head_dim}) is smaller than its RoPE part mla.rope_dim "
                                               f"({kw['mla'].rope_dim})")
    return dsa


def _moe_from_dict(m, where: str, kw: dict) -> MoE:
    if not isinstance(m, dict):
        raise SpecError(where, "moe", "must be a mapping")
    _check_keys(m, _MOE_KEYS, where, "moe.")
    _need(m, ["n_experts", "n_active"], where, "moe.")
    lp = m.get("layer_pattern", "M")
    if not isinstance(lp, str) or not lp or set(lp) - set("MD") or "M" not in lp:
        raise SpecError(where, "moe.layer_pattern", f"must be a string of M (MoE) and D (dense) with at least one M; "
                                                    f"got {lp!r}")
    moe = MoE(n_experts=_int(m["n_experts"], where, "moe.n_experts"),
              n_active=_int(m["n_active"], where, "moe.n_active"),
              d_ff_expert=_int(m.get("d_ff_expert", kw["d_ff"]), where, "moe.d_ff_expert"),
              n_shared=_int(m.get("n_shared", 0), where, "moe.n_shared", 0),
              first_dense_layers=_int(m.get("first_dense_layers", 0), where, "moe.first_dense_layers", 0),
              router_bias=_bool(m.get("router_bias", False), where, "moe.router_bias"), layer_pattern=lp,
              shared_gate=_bool(m.get("shared_gate", False), where, "moe.shared_gate"),
              expert_bias=_bool(m.get("expert_bias", False), where, "moe.expert_bias"))
    if moe.n_active > moe.n_experts:
        raise SpecError(where, "moe.n_active", f"({moe.n_active}) exceeds moe.n_experts ({moe.n_experts})")
    if moe.first_dense_layers >= kw["n_layers"] or not any(moe.is_moe(i) for i in range(kw["n_layers"])):
        raise SpecError(where, "moe.first_dense_layers", "leaves no MoE layer")
    if moe.shared_gate and not moe.n_shared:
        raise SpecError(where, "moe.shared_gate", "needs a shared expert (moe.n_shared >= 1)")
    return moe


# ---------------------------------------------------------------- public loaders
def _split_sets(sets: dict | None, kind_fields: set) -> dict:
    return {k: v for k, v in (sets or {}).items() if k.split(".")[0] in kind_fields}


HARDWARE_FIELDS = {"memory_capacity", "memory_bandwidth", "peak_flops", "interconnect_bandwidth", "l2_cache", "tdp",
                   "kernel_overhead", "link_bandwidth", "link_latency", "network_bandwidth", "network_latency",
                   "devices_per_node", "power", "price_per_hour", "gemm_weight_passes",
                   "attention_kv_passes", "link_algorithms", "achievable"}
MODEL_FIELDS = _MODEL_ALLOWED - {"name", "source", "description"}


def check_sets(sets: dict | None) -> None:
    for k in sets or {}:
        head = k.split(".")[0]
        if head not in HARDWARE_FIELDS and head not in MODEL_FIELDS and head != "impl":
            import difflib

            near = difflib.get_close_matches(head, sorted(HARDWARE_FIELDS | MODEL_FIELDS), n=1, cutoff=0.75)
            hint = f"did you mean {near[0]}{k[len(head):]}? " if near else ""  # the same typo hint as in a YAML file
            raise SpecError("--set", k, f"unknown field; {hint}model fields: " + ", ".join(sorted(MODEL_FIELDS))
                            + "; hardware fields: " + ", ".join(sorted(HARDWARE_FIELDS))
                            + "; implementation profile fields: impl.<field>")


_OBJECTS: dict = {}  # (kind, ref, sets) -> (the files read and their stamps, the spec object)


def _cached(kind: str, ref, sets, build):
    """A spec object built once per process for a name or path and its --set overrides, rebuilt when any
    file of its base chain changes (modification time or size)."""
    try:
        key = (kind, str(ref), repr(sorted((sets or {}).items())))
    except TypeError:
        return build()
    hit = _OBJECTS.get(key)
    if hit is not None and yamlio.unchanged(hit[0]):
        return hit[1]
    old, yamlio.TRACE = yamlio.TRACE, []
    try:
        obj = build()
        stamps = tuple(yamlio.TRACE)
    finally:
        yamlio.TRACE = old
    if stamps:
        if len(_OBJECTS) > 4096:
            _OBJECTS.clear()
        _OBJECTS[key] = (stamps, obj)
    return obj


def load_hardware(ref, sets: dict | None = None) -> Hardware:
    """A hardware spec by catalog name (`perfmodel list hardware`) or YAML path, in SI units.

    sets: overrides {"memory_bandwidth": "4 TB/s", "achievable.hbm_efficiency": 0.9, ...} (model and
    impl.* keys are ignored here). Raises SpecError naming the file and the field. Parsed once per
    process and cached until the file changes."""
    if isinstance(ref, Hardware):
        return ref
    mine = _split_sets(sets, HARDWARE_FIELDS)

    def build():
        data, path = load_raw(ref, "hardware")
        return hardware_from_dict(apply_overrides(data, mine, path), _with_sets(path, mine), key=str(ref))

    return _cached("hardware", ref, mine, build)


def load_model(ref, sets: dict | None = None) -> Model:
    """A model spec by catalog name (`perfmodel list models`), YAML path or Hugging Face config.json.

    sets: overrides {"n_kv_heads": 8, "moe.n_experts": 16, ...} (hardware keys are ignored here).
    Raises SpecError naming the file and the field. Cached like load_hardware."""
    if not isinstance(ref, Model):
        return _cached("models", ref, _split_sets(sets, MODEL_FIELDS), lambda: _load_model(ref, sets))
    return _load_model(ref, sets)


def _load_model(ref, sets: dict | None = None) -> Model:
    if isinstance(ref, Model):
        mine = _split_sets(sets, MODEL_FIELDS)
        if mine:
            d = apply_overrides(_model_to_dict(ref), mine, ref.key)
            return model_from_dict(d, _with_sets(ref.key, mine))
        return ref
    if str(ref).endswith(".json"):  # a Hugging Face config.json, converted offline
        from .hf_import import config_to_spec  # lazy: only this path needs it

        data, path = config_to_spec(str(ref)), str(ref)
    else:
        data, path = load_raw(ref, "models")
    mine = _split_sets(sets, MODEL_FIELDS)
    data = apply_overrides(data, mine, path)
    return model_from_dict(data, _with_sets(path, mine), key=str(ref))


def _with_sets(path: str, sets: dict) -> str:
    """Name the overrides in error messages: a bad value may come from --set, not the file."""
    return f"{path} (with --set {', '.join(f'{k}={v}' for k, v in sets.items())})" if sets else path


def load_impl(ref, sets: dict | None = None) -> Impl:
    """An implementation profile: a name from hardware/impl/ (`perfmodel list impl`) or a YAML path."""
    if isinstance(ref, Impl):
        return ref
    data, path = load_raw(ref, "impl")
    mine = {k[len("impl."):]: v for k, v in (sets or {}).items() if k.startswith("impl.")}
    data = apply_overrides(data, mine, path)
    return impl_from_dict(data, _with_sets(path, {f"impl.{k}": v for k, v in mine.items()}), key=str(ref))
