"""Offline import of a Hugging Face `config.json` into a perfmodel model spec.

`config_to_spec(path)` reads a local config.json (the json module, no network, no code from the
file) and returns the mapping a models/*.yaml file would hold; `perfmodel.specs.load_model`
validates it like any YAML. Each supported family maps its own config keys to our fields:

- Llama (2, 3.x), Mistral, Qwen2, Qwen3, Phi-3/Phi-4: num_key_value_heads, head_dim, intermediate_size,
  tie_word_embeddings, the bias keys (Llama's and Qwen3's attention_bias covers q, k, v and o),
  sliding_window (with Qwen's use_sliding_window and max_window_layers); Qwen3's per-head q/k RMSNorm;
- Mixtral, Qwen2-MoE, Qwen3-MoE: experts, top-k, the shared expert and its gate, decoder_sparse_step and
  mlp_only_layers (as a pattern of MoE and dense layers) -> moe.*;
- DeepSeek-V2/V3 (and Kimi K2, which uses DeepseekV3ForCausalLM): MLA ranks -> mla.*; routed and shared
  experts, first_k_dense_replace, moe_layer_freq and the noaux_tc router bias -> moe.*;
- Gemma, Gemma-2, Gemma-3 (Gemma3ForCausalLM, and the text_config of Gemma3ForConditionalGeneration):
  explicit head_dim, tied head, four norms per layer (Gemma 2/3), q/k norms and 5 local : 1 global layers
  (Gemma 3); Gemma-2 alternates local and global layers ("LG");
- gpt-oss: alternating 128-token windows, attention sinks, biases on attention, router and experts, and
  the experts' MXFP4 storage (quantization_config) -> weight_formats;
- Llama 4 (Llama4ForCausalLM, and the text_config of Llama4ForConditionalGeneration): chunked local
  attention on RoPE layers, NoPE global layers, the L2 q/k norm, a shared expert, MoE layers every
  interleave_moe_layer_step;
- GPT-2, GPT-NeoX: plain MLP, LayerNorm with bias, biases on every linear; learned positions (GPT-2);
- Kimi K2.5 (its text_config, DeepSeek-V3's), GLM-5 (MLA, MoE and DeepSeek Sparse Attention -> dsa.*), MiniMax-M2 /
  M2.5 (GQA, full-width q/k RMSNorm, MoE with a routing bias).

What our schema cannot express is handled in one of two ways, never silently:
- a structural difference (a shared expert whose width is not a multiple of the routed one, MLP biases
  without attention biases, ...) raises SpecError naming the key;
- parts that have no place in a text model's op list (the vision tower of a multimodal checkpoint) are
  left out, and the spec's `description` states exactly what and how many parameters (`param_gap` returns
  the number, counted from vision_config). DeepSeek-V3's multi-token-prediction module is left out too, as
  DeepSeek's own 671B count and plain decoding do.
"""
from __future__ import annotations

import math

import yaml

from .errors import SpecError

from .hf_config import (  # noqa: F401 (read_config, BY_HAND re-exported)
    QWEN, BY_HAND, _NOTHING, _Config, _short, read_config, _default_name, _pattern, _layer_types, _attention_window,
)


# ---------------------------------------------------------------- families
MAX_LAYERS = 10_000  # specs.py's limit, checked here before per-layer lists exist


def _dense_core(c: _Config, D_key="hidden_size", L_key="num_hidden_layers", N_key="num_attention_heads",
                gqa=True) -> dict:
    """d_model, n_layers, n_heads, n_kv_heads (gqa=False: multi-head, the key is not read), head_dim."""
    D = c.int(D_key, "d_model")
    L = c.int(L_key, "n_layers")
    if L > MAX_LAYERS:  # before any per-layer pattern is built (MoE, window and MTP layouts are per layer)
        raise SpecError(c.path, c.k(L_key), f"{L:,} layers, over the {MAX_LAYERS:,} a model may have here (the deepest "
                                            "published, DeepNet, has 1,000)")
    N = c.int(N_key, "n_heads")
    spec = {"d_model": D, "n_layers": L, "n_heads": N,
            "n_kv_heads": c.int("num_key_value_heads", "n_kv_heads", default=N) if gqa else N}
    if N % spec["n_kv_heads"]:
        raise SpecError(c.path, c.k("num_key_value_heads"),
                        f"num_attention_heads ({N}) is not divisible by num_key_value_heads ({spec['n_kv_heads']})")
    H = c.int("head_dim", "head_dim", default=None)
    if H is None and D % N:
        raise c.missing("head_dim", f"head_dim: hidden_size ({D}) is not divisible by num_attention_heads ({N})")
    spec["head_dim"] = H or D // N
    return spec




def _llama_like(c: _Config, fam: str, notes: list) -> dict:
    """Llama, Mistral, Qwen2/3, Mixtral, Qwen2/3-MoE, Gemma 1-3, Phi-3: gated MLP, RMSNorm, RoPE."""
    spec = _dense_core(c)
    L = spec["n_layers"]
    spec.update(vocab_size=c.int("vocab_size", "vocab_size"), d_ff=c.int("intermediate_size", "d_ff"),
                max_context=c.int("max_position_embeddings", "max_context"), mlp="gated", norm="rmsnorm",
                position="rope", tied_embeddings=c.bool("tie_word_embeddings", fam.startswith("gemma")))
    # Biases. Qwen2 always has q/k/v biases (no key) and none on o_proj; Llama's and Qwen3's attention_bias
    # covers q, k, v and o (LlamaAttention, Qwen3Attention: o_proj = Linear(..., bias=config.attention_bias)).
    qwen2 = fam in ("qwen2", "qwen2_moe")
    attn_bias = qwen2 or c.bool("attention_bias", False)
    mlp_bias = c.bool("mlp_bias", False)
    if mlp_bias and not attn_bias:
        raise c.refuse("mlp_bias", "MLP biases without attention biases")
    if mlp_bias:
        spec["linear_bias"] = True
    elif attn_bias:
        spec["qkv_bias"] = True
        spec["o_bias"] = not qwen2
    if fam in ("qwen3", "qwen3_moe", "gemma3"):  # q_norm, k_norm: RMSNorm(head_dim) on every head of q and k
        spec["qk_norm"] = "rmsnorm"
    if fam in ("gemma2", "gemma3"):  # post_attention_layernorm and post_feedforward_layernorm as well
        spec["norms_per_layer"] = 4
    spec.update(_attention_window(c, fam, L))
    if fam.startswith("gemma"):
        notes.append(("embedding scaled by sqrt(d_model): no parameters, a multiply per element", 0))
    if fam == "mixtral":
        spec["moe"] = {"n_experts": c.int("num_local_experts", "moe.n_experts"),
                       "n_active": c.int("num_experts_per_tok", "moe.n_active"),
                       "d_ff_expert": spec["d_ff"]}
    if fam in ("qwen2_moe", "qwen3_moe"):
        spec["moe"] = _qwen_moe(c, spec, fam)
    if fam == "phi3":
        pct = c.d.get("partial_rotary_factor", 1.0)
        if isinstance(pct, (int, float)) and not isinstance(pct, bool) and math.isfinite(pct) and 0 < pct < 1:
            notes.append((f"partial_rotary_factor {pct:g}: RoPE rotates that fraction of each head; the op list "
                          "rotates all of it (a vector op, no parameters)", 0))
    return spec


def _moe_layers(kinds: str) -> dict:
    """moe.first_dense_layers and moe.layer_pattern for a per-layer string of M (MoE) and D (dense)."""
    if "M" not in kinds:
        return {"first_dense_layers": len(kinds)}  # refused by the loader: leaves no MoE layer
    lead = len(kinds) - len(kinds.lstrip("D"))
    rest = kinds[lead:]
    if set(rest) == {"M"}:
        return {"first_dense_layers": lead}
    return {"first_dense_layers": 0, "layer_pattern": _pattern(kinds)}


def _qwen_moe(c: _Config, spec: dict, fam: str) -> dict:
    """Qwen2-MoE / Qwen3-MoE (modeling_qwen2_moe, modeling_qwen3_moe): layer i has the sparse block when
    i is not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0; Qwen2-MoE adds a shared expert
    with a sigmoid gate Linear(D, 1)."""
    L = spec["n_layers"]
    Fe = c.int("moe_intermediate_size", "moe.d_ff_expert")
    moe = {"n_experts": c.int("num_experts", "moe.n_experts"), "n_active": c.int("num_experts_per_tok", "moe.n_active"),
           "d_ff_expert": Fe}
    step = c.int("decoder_sparse_step", "the MoE layer spacing", default=1)
    dense = set(c.int_list("mlp_only_layers"))
    kinds = "".join("M" if (i not in dense and (i + 1) % step == 0) else "D" for i in range(L))
    moe.update(_moe_layers(kinds))
    Fs = c.int("shared_expert_intermediate_size", "the shared expert", default=0, minimum=0)
    if Fs:
        if Fs % Fe:
            raise c.refuse("shared_expert_intermediate_size",
                           f"a shared expert of width {Fs}, not a multiple of moe_intermediate_size ({Fe})")
        moe["n_shared"] = Fs // Fe  # one MLP of width n_shared * F_e: the same weights and FLOPs
        moe["shared_gate"] = fam == "qwen2_moe"  # Qwen2MoeSparseMoeBlock.shared_expert_gate
    return moe


# transformers' Gemma3TextConfig defaults: the text_config of a Gemma3ForConditionalGeneration checkpoint omits
# the keys that equal them (google/gemma-3-4b-it lists no vocab_size, heads or head_dim)
GEMMA3_TEXT_DEFAULTS = {"vocab_size": 262_208, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
                        "max_position_embeddings": 131_072, "sliding_window": 4096, "tie_word_embeddings": True}


def _gemma3(c: _Config, fam: str, notes: list) -> dict:
    """Gemma 3: Gemma3ForCausalLM (the text config at the top) or Gemma3ForConditionalGeneration (text_config;
    the SigLIP vision tower and the projector are stated as left out, counted from vision_config)."""
    mm = c.has("text_config")
    t = c.sub("text_config", GEMMA3_TEXT_DEFAULTS) if mm else _Config(c.d, c.path, defaults=GEMMA3_TEXT_DEFAULTS)
    spec = _llama_like(t, "gemma3", notes)
    if mm:
        notes.append(("the vision tower and the multimodal projector (counted from vision_config)",
                      vision_params(c, spec["d_model"])))
    return spec


def _gpt_oss(c: _Config, fam: str, notes: list) -> dict:
    """gpt-oss (modeling_gpt_oss): alternating sliding/full layers, attention sinks, biases on q, k, v, o,
    the router and every expert; experts stored in MXFP4 when quantization_config says so."""
    spec = _dense_core(c)
    L = spec["n_layers"]
    F = c.int("intermediate_size", "d_ff")
    spec.update(vocab_size=c.int("vocab_size", "vocab_size"), d_ff=F,
                max_context=c.int("max_position_embeddings", "max_context"), mlp="gated", norm="rmsnorm",
                position="rope", tied_embeddings=c.bool("tie_word_embeddings", False), attention_sinks=True)
    if c.bool("attention_bias", True):
        spec.update(qkv_bias=True, o_bias=True)
    spec.update(_attention_window(c, fam, L))
    E = c.int("num_local_experts", "moe.n_experts")
    k = c.int("num_experts_per_tok", "moe.n_active", default=None) or c.int("experts_per_token", "moe.n_active")
    spec["moe"] = {"n_experts": E, "n_active": k, "d_ff_expert": F, "router_bias": True, "expert_bias": True}
    q = c.d.get("quantization_config")
    if isinstance(q, dict) and q.get("quant_method") == "mxfp4":  # modules_to_not_convert: attention, router, embeddings, head
        spec["weight_formats"] = {"experts": "mxfp4"}
        keep = q.get("modules_to_not_convert") or []
        if not isinstance(keep, list):  # a bounded one-line message for a number, a string or a mapping
            raise SpecError(c.path, "quantization_config.modules_to_not_convert",
                            f"must be a list of module names, got {_short(keep)}")
        if any("self_attn" in str(x) for x in keep):
            spec["weight_formats"]["attention"] = "bf16"  # the router, embeddings and head are 16-bit anyway
    notes.append(("clamped SwiGLU (swiglu_limit): the op list counts SiLU(gate) * up", 0))
    return spec


def _llama4(c: _Config, fam: str, notes: list) -> dict:
    """Llama 4 (modeling_llama4): RoPE layers attend within chunks of attention_chunk_size, every
    no_rope_layer_interval-th layer is a global NoPE layer (no_rope_layers: 1 = RoPE); MoE layers are
    moe_layers (default every interleave_moe_layer_step-th, from step - 1) with one shared expert of
    intermediate_size and no gate; dense layers have intermediate_size_mlp; use_qk_norm: a weightless L2
    norm of q and k on the RoPE layers."""
    mm = c.has("text_config")
    t = c.sub("text_config") if mm else c
    spec = _dense_core(t)
    L, D = spec["n_layers"], spec["d_model"]
    Fe = t.int("intermediate_size", "moe.d_ff_expert")
    spec.update(vocab_size=t.int("vocab_size", "vocab_size"), d_ff=t.int("intermediate_size_mlp", "d_ff"),
                max_context=t.int("max_position_embeddings", "max_context"), mlp="gated", norm="rmsnorm",
                position="rope", tied_embeddings=t.bool("tie_word_embeddings", False))
    if t.bool("attention_bias", False):
        spec.update(qkv_bias=True, o_bias=True)
    rope = t.int_list("no_rope_layers")
    if not rope:
        every = t.int("no_rope_layer_interval", "the NoPE layers", default=4)
        rope = [int((i + 1) % every != 0) for i in range(L)]
    if len(rope) < L or set(rope) - {0, 1}:
        raise SpecError(t.path, t.k("no_rope_layers"), f"must hold a 0 or 1 for each of the {L} layers, got {_short(rope)}")
    C = t.int("attention_chunk_size", "the chunked layers", default=None)
    kinds = _layer_types(t, L) or "".join(("C" if C else "G") if rope[i] else "G" for i in range(L))
    if "C" in kinds and not C:
        raise t.missing("attention_chunk_size", "the chunked_attention layers")
    if any(rope[i] and kinds[i] != "C" for i in range(L)) and C:
        raise t.refuse("layer_types", "RoPE layers that are not chunked")
    spec["layer_pattern"] = _pattern(kinds)
    if "C" in kinds:
        spec["attention_chunk"] = C
    if not all(rope[:L]):
        nope = {kinds[i] for i in range(L) if not rope[i]}
        if any(rope[i] for i in range(L) if kinds[i] in nope):
            raise t.refuse("no_rope_layers", "NoPE and RoPE layers of the same attention kind")
        spec["nope_kinds"] = "".join(sorted(nope))
    if t.bool("use_qk_norm", False):
        spec["qk_norm"] = "l2"
    step = t.int("interleave_moe_layer_step", "the MoE layers", default=1, minimum=0)
    if t.d.get("moe_layers") is not None:  # an explicit list, possibly empty (a dense Llama 4)
        moe_layers = set(t.int_list("moe_layers"))
    else:
        moe_layers = set(range(step - 1, L, step)) if step else set()
    if moe_layers:  # MoE layers route each token to num_experts_per_tok >= 1 experts: 0 is not a dense model
        t.int("num_experts_per_tok", "moe.n_active (Llama 4's MoE layers route each token to at least one expert; a "
                                     "dense Llama 4 says moe_layers: [])")
        kinds = "".join("M" if i in moe_layers else "D" for i in range(L))
        spec["moe"] = {"n_experts": t.int("num_local_experts", "moe.n_experts"),
                       "n_active": t.int("num_experts_per_tok", "moe.n_active"), "d_ff_expert": Fe, "n_shared": 1,
                       **_moe_layers(kinds)}
    if mm:
        notes.append(("the vision encoder, its adapter and the multimodal projector (counted from vision_config)",
                      vision_params(c, D)))
    if t.bool("attn_temperature_tuning", False):
        notes.append(("attention temperature tuning on the NoPE layers: a scale per query, no parameters", 0))
    return spec


def vision_params(c: _Config, d_text: int) -> int:
    """Parameters of a multimodal checkpoint's vision side, from its vision_config (for `param_gap`):

    - Gemma 3 (SiglipVisionModel + Gemma3MultiModalProjector): patch conv C*P*P*h + h, positions
      (image/P)^2 * h, per layer q, k, v, o (h*h + h each), fc1 h*i + i, fc2 i*h + h, two LayerNorms 4h;
      post_layernorm 2h; projector h*d_text and its RMSNorm h.
    - Llama 4 (Llama4VisionModel + Llama4MultiModalProjector): patch unfold C*P*P*h (no bias), class
      embedding h, positions ((image/P)^2 + 1)*h, layernorm_pre and _post 4h, layers as SigLIP's, the
      pixel-shuffle adapter i*p_in + p_out*p_out, projector vision_output_dim * d_text.
    """
    v = c.sub("vision_config")
    h, i = v.int("hidden_size", "the vision tower"), v.int("intermediate_size", "the vision tower")
    layers, P = v.int("num_hidden_layers", "the vision tower"), v.int("patch_size", "the vision tower")
    img, ch = v.int("image_size", "the vision tower"), v.int("num_channels", "the vision tower", default=3)
    patches = (img // P) ** 2
    layer = 4 * (h * h + h) + (h * i + i) + (i * h + h) + 4 * h
    if c.str("model_type") == "llama4" or "Llama4ForConditionalGeneration" in (c.d.get("architectures") or []):
        p_in, p_out = v.int("projector_input_dim", "the vision adapter"), v.int("projector_output_dim", "the vision adapter")
        out = v.int("vision_output_dim", "the projector")
        return ch * P * P * h + h + (patches + 1) * h + 4 * h + layers * layer + i * p_in + p_out * p_out + out * d_text
    return ch * P * P * h + h + patches * h + layers * layer + 2 * h + h * d_text + h


def _deepseek(c: _Config, fam: str, notes: list) -> dict:
    spec = _dense_core(c)
    L = spec["n_layers"]
    spec.update(vocab_size=c.int("vocab_size", "vocab_size"), d_ff=c.int("intermediate_size", "d_ff"),
                max_context=c.int("max_position_embeddings", "max_context"), mlp="gated", norm="rmsnorm",
                position="rope", tied_embeddings=c.bool("tie_word_embeddings", False))
    if c.bool("attention_bias", False):
        raise c.refuse("attention_bias", "biases on DeepSeek's MLA projections")
    for key, what in (("kv_lora_rank", "MLA attention"), ("n_routed_experts", "routed experts")):
        if not c.has(key):  # every DeepSeek-V2/V3 checkpoint has both: without one it would import as another model
            raise c.missing(key, f"{fam}'s {what}: every DeepSeek-V2/V3 checkpoint has it, and without it the import "
                                 "would be a different architecture")
    if c.has("kv_lora_rank"):  # MLA; q_lora_rank null = full-rank q projection
        spec["mla"] = {"kv_lora_rank": c.int("kv_lora_rank", "mla.kv_lora_rank"),
                       "rope_dim": c.int("qk_rope_head_dim", "mla.rope_dim"),
                       "nope_dim": c.int("qk_nope_head_dim", "mla.nope_dim"),
                       "v_head_dim": c.int("v_head_dim", "mla.v_head_dim"),
                       "q_lora_rank": c.int("q_lora_rank", "mla.q_lora_rank", default=None)}
        spec["head_dim"] = spec["mla"]["v_head_dim"]  # D/N is not a head size here (V3: 7168/128 = 56)
    if c.has("n_routed_experts"):
        # modeling_deepseek: layer i is MoE when i >= first_k_dense_replace and i % moe_layer_freq == 0
        freq = c.int("moe_layer_freq", "the MoE layer spacing", default=1)
        first = c.int("first_k_dense_replace", "moe.first_dense_layers", default=0, minimum=0)
        if first >= L:
            raise SpecError(c.path, c.k("first_k_dense_replace"), f"({first}) leaves no MoE layer of the {L}")
        method = c.str("topk_method", "greedy")
        spec["moe"] = {"n_experts": c.int("n_routed_experts", "moe.n_experts"),
                       "n_active": c.int("num_experts_per_tok", "moe.n_active"),
                       "d_ff_expert": c.int("moe_intermediate_size", "moe.d_ff_expert"),
                       "n_shared": c.int("n_shared_experts", "moe.n_shared", default=0, minimum=0),
                       "first_dense_layers": first,
                       "router_bias": method == "noaux_tc"}  # e_score_correction_bias, one per expert
        if freq > 1:
            spec["moe"]["layer_pattern"] = "M" + "D" * (freq - 1)  # indexed from layer 0: i % freq == 0 is MoE
    mtp = c.int("num_nextn_predict_layers", "the MTP module", default=0, minimum=0)
    if mtp:
        notes.append((f"the multi-token-prediction module (num_nextn_predict_layers {mtp}), which DeepSeek's "
                      "'main model' parameter count also leaves out", None))
    return spec


def _kimi_k25(c: _Config, fam: str, notes: list) -> dict:
    """Kimi K2.5 (KimiK25ForConditionalGeneration): its text_config is DeepSeek-V3's (model_type kimi_k2); the
    MoonViT-3D vision tower and its projector are left out (not counted here: their code is not in transformers)."""
    spec = _deepseek(c.sub("text_config"), "deepseek_v3", notes)
    notes.append(("the MoonViT-3D vision tower and its patch-merger projector (vision_config)", None))
    return spec


def _glm_dsa(c: _Config, fam: str, notes: list) -> dict:
    """GLM-5 (GlmMoeDsaForCausalLM): DeepSeek-V3's MLA and MoE plus DeepSeek Sparse Attention, whose lightning
    indexer has index_n_heads heads of index_head_dim and keeps index_topk keys per query."""
    spec = _deepseek(c, fam, notes)
    if "mla" not in spec:
        raise c.missing("kv_lora_rank", "GLM-5's MLA attention")
    spec["dsa"] = {"n_heads": c.int("index_n_heads", "dsa.n_heads"), "head_dim": c.int("index_head_dim", "dsa.head_dim"),
                   "topk": c.int("index_topk", "dsa.topk")}
    return spec


def _minimax_m2(c: _Config, fam: str, notes: list) -> dict:
    """MiniMax-M2 / M2.5 (MiniMaxM2ForCausalLM): GQA on every layer (attn_type_list all 1), q/k RMSNorm over the
    flattened projections when qk_norm_type is per_layer (over each head otherwise), every layer a MoE of
    num_local_experts experts of intermediate_size with a sigmoid router and, with use_routing_bias, a bias per expert."""
    spec = _dense_core(c)
    L = spec["n_layers"]
    spec.update(vocab_size=c.int("vocab_size", "vocab_size"), d_ff=c.int("intermediate_size", "d_ff"),
                max_context=c.int("max_position_embeddings", "max_context"), mlp="gated", norm="rmsnorm",
                position="rope", tied_embeddings=c.bool("tie_word_embeddings", False))
    types = c.d.get("attn_type_list")
    if types is not None and (not isinstance(types, list) or len(types) != L or set(types) != {1}):
        raise c.refuse("attn_type_list", "layers that are not full attention (1)")
    if c.bool("use_qk_norm", False):
        spec["qk_norm"] = "rmsnorm_full" if c.str("qk_norm_type", "per_layer") == "per_layer" else "rmsnorm"
    if c.int("shared_intermediate_size", "a shared expert", default=0, minimum=0):
        raise c.refuse("shared_intermediate_size", "a shared expert in MiniMax-M2")
    spec["moe"] = {"n_experts": c.int("num_local_experts", "moe.n_experts"),
                   "n_active": c.int("num_experts_per_tok", "moe.n_active"), "d_ff_expert": spec["d_ff"],
                   "router_bias": c.bool("use_routing_bias", False)}
    rd = c.int("rotary_dim", "the rotary width", default=None)
    if rd and rd < spec["head_dim"]:
        notes.append((f"rotary_dim {rd} of head_dim {spec['head_dim']}: the op list rotates all of it "
                      "(a vector op, no parameters)", 0))
    if c.bool("use_mtp", False):
        notes.append(("the multi-token-prediction modules (use_mtp; the released checkpoints hold no MTP weights)", None))
    return spec


def _gpt2(c: _Config, fam: str, notes: list) -> dict:
    """GPT-2: learned positions, LayerNorm, biases everywhere, 2-matrix GELU MLP, tied LM head."""
    spec = _dense_core(c, "n_embd", "n_layer", "n_head", gqa=False)
    ctx = c.int("n_positions", "max_context", default=None) or c.int("n_ctx", "max_context")
    spec.update(vocab_size=c.int("vocab_size", "vocab_size"),
                d_ff=c.int("n_inner", "d_ff", default=4 * spec["d_model"]),  # GPT2Config: n_inner None = 4 * n_embd
                max_context=ctx, mlp="plain", norm="layernorm", position="learned", linear_bias=True,
                tied_embeddings=c.bool("tie_word_embeddings", True))
    return spec


def _gpt_neox(c: _Config, fam: str, notes: list) -> dict:
    """GPT-NeoX / Pythia: rotary (partial), LayerNorm with bias, biases on every linear, untied embed_out."""
    spec = _dense_core(c, gqa=False)
    spec.update(vocab_size=c.int("vocab_size", "vocab_size"), d_ff=c.int("intermediate_size", "d_ff"),
                max_context=c.int("max_position_embeddings", "max_context"), mlp="plain", norm="layernorm",
                position="rope", tied_embeddings=c.bool("tie_word_embeddings", False))
    if not c.bool("attention_bias", True):  # the MLP linears always carry biases
        raise c.refuse("attention_bias", "MLP biases without attention biases")
    spec["linear_bias"] = True
    pct = c.d.get("rotary_pct", 1.0)
    if isinstance(pct, (int, float)) and not isinstance(pct, bool) and math.isfinite(pct) and 0 < pct < 1:
        notes.append((f"rotary_pct {pct:g}: RoPE rotates that fraction of each head; the op list rotates all of it "
                      "(a vector op, no parameters)", 0))
    return spec


# architectures[0] or model_type -> (family, builder)
FAMILIES = {
    "LlamaForCausalLM": ("llama", _llama_like), "MistralForCausalLM": ("mistral", _llama_like),
    "Qwen2ForCausalLM": ("qwen2", _llama_like), "MixtralForCausalLM": ("mixtral", _llama_like),
    "Qwen2MoeForCausalLM": ("qwen2_moe", _llama_like), "Qwen3ForCausalLM": ("qwen3", _llama_like),
    "Qwen3MoeForCausalLM": ("qwen3_moe", _llama_like), "GemmaForCausalLM": ("gemma", _llama_like),
    "Gemma2ForCausalLM": ("gemma2", _llama_like), "Gemma3ForCausalLM": ("gemma3", _gemma3),
    "Gemma3ForConditionalGeneration": ("gemma3", _gemma3), "Phi3ForCausalLM": ("phi3", _llama_like),
    "GptOssForCausalLM": ("gpt_oss", _gpt_oss), "Llama4ForCausalLM": ("llama4", _llama4),
    "Llama4ForConditionalGeneration": ("llama4", _llama4),
    "DeepseekV2ForCausalLM": ("deepseek_v2", _deepseek), "DeepseekV3ForCausalLM": ("deepseek_v3", _deepseek),
    "GPT2LMHeadModel": ("gpt2", _gpt2), "GPTNeoXForCausalLM": ("gpt_neox", _gpt_neox),
    "KimiK25ForConditionalGeneration": ("kimi_k25", _kimi_k25), "GlmMoeDsaForCausalLM": ("glm_moe_dsa", _glm_dsa),
    "MiniMaxM2ForCausalLM": ("minimax_m2", _minimax_m2),
}
_BY_TYPE = {fam: (fam, fn) for fam, fn in FAMILIES.values()}
_BY_TYPE.update({"gemma3_text": ("gemma3", _gemma3), "llama4_text": ("llama4", _llama4), "kimi_k2": ("deepseek_v3", _deepseek)})


def _family(c: _Config):
    archs = c.d.get("architectures")
    if archs is not None and (not isinstance(archs, list) or not all(isinstance(a, str) for a in archs)):
        raise SpecError(c.path, "architectures", f"must be a list of class names, got {_short(archs)}")
    archs = archs or []
    mtype = c.str("model_type")
    for a in archs:
        if a in FAMILIES:
            return archs, FAMILIES[a]
    if not archs and mtype in _BY_TYPE:
        return [mtype], _BY_TYPE[mtype]
    got = ", ".join(archs) or (f"model_type {mtype!r}" if mtype else "no architectures or model_type key")
    raise SpecError(c.path, "architectures",
                    f"{_short(got, 80)} is not an architecture perfmodel imports (it imports "
                    f"{', '.join(sorted(FAMILIES))}); write a model YAML by hand with {BY_HAND}")


# ---------------------------------------------------------------- public
def convert(path: str) -> tuple[dict, list]:
    """(spec, notes): the model-YAML mapping and what it leaves out, as (what, parameters or None)."""
    c = _Config(read_config(path), str(path))
    archs, (fam, build) = _family(c)
    notes: list = []
    spec = build(c, fam, notes)
    out = {"name": _default_name(path), "source": f"imported from {path} (architectures: {', '.join(archs)})"}
    text = f"Imported from a Hugging Face config.json ({fam} family)."
    if notes:
        text += " Not modelled: " + "; ".join(w + (f": {n:,} parameters" if n else "") for w, n in notes) + "."
    out["description"] = text
    out.update(spec)
    return out, notes


def config_to_spec(path: str) -> dict:
    """The model-YAML mapping for a Hugging Face config.json (validated by specs.model_from_dict).

    Raises SpecError naming the file and the key for an unknown architecture, a missing or bad key,
    or a feature the schema cannot express.
    """
    return convert(path)[0]


def param_gap(path: str) -> int:
    """Parameters of the real model that the imported spec leaves out (stated in its description)."""
    return sum(n for _, n in convert(path)[1] if n)


FIELD_ORDER = ("name", "source", "description", "vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads",
               "head_dim", "d_ff", "mlp", "tied_embeddings", "qkv_bias", "o_bias", "linear_bias", "attention_sinks",
               "norm", "norms_per_layer", "qk_norm", "position", "nope_kinds", "max_context", "sliding_window",
               "attention_chunk", "layer_pattern", "mla", "dsa", "moe", "weight_formats")


def to_yaml(spec: dict) -> str:
    """The spec as a models/*.yaml text, fields in the catalog's order, nested mappings on one line."""
    keys = [k for k in FIELD_ORDER if k in spec] + [k for k in spec if k not in FIELD_ORDER]
    lines = ["# written by `perfmodel import-config`; it has no published_params: add the published count and its",
             "# source (published_params: {value: N, source: '...'}) to have the tests check the derived count."]
    for k in keys:
        v = spec[k]
        if isinstance(v, dict):  # mla: {...}, moe: {...} and weight_formats: {...} on one line, as in the catalog
            lines.append(f"{k}: " + yaml.safe_dump(v, default_flow_style=True, sort_keys=False, width=1e9).strip())
        else:
            lines.append(yaml.safe_dump({k: v}, allow_unicode=True, width=1e9).strip())
    return "\n".join(lines) + "\n"
