"""Offline import of a Hugging Face `config.json` into a perfmodel model spec.

`config_to_spec(path)` reads a local config.json (the json module, no network, no code from the
file) and returns the mapping a models/*.yaml file would hold; `perfmodel.specs.load_model`
validates it like any YAML. Each supported family maps its own config keys to our fields:

- Llama, Mistral, Qwen2: num_key_value_heads, head_dim, intermediate_size, tie_word_embeddings,
  the bias keys, sliding_window (with Qwen2's use_sliding_window and max_window_layers);
- Mixtral, Qwen2-MoE: experts, top-k, the shared expert -> moe.*;
- DeepSeek-V2/V3: MLA ranks -> mla.*; routed and shared experts, first_k_dense_replace, and the
  noaux_tc router bias -> moe.*;
- GPT-2, GPT-NeoX: plain MLP, LayerNorm with bias, biases on every linear; learned positions (GPT-2);
- Gemma, Gemma-2: explicit head_dim, tied head; Gemma-2 alternates local and global layers ("LG").

What our schema cannot express is handled in one of two ways, never silently:
- a structural difference (an MoE layer every other layer, a shared expert whose width is not a
  multiple of the routed one, MLP biases without attention biases, ...) raises SpecError naming
  the key;
- a handful of parameters with no effect on FLOPs or bytes beyond a rounding (Gemma-2's two extra
  norms per layer, Qwen2-MoE's shared-expert gate) is left out, and the spec's `description` states
  exactly what and how many parameters (`param_gap` returns the number). DeepSeek-V3's
  multi-token-prediction module is left out too, as DeepSeek's own 671B count and plain decoding do.
"""
from __future__ import annotations

import json
import math
import reprlib
from pathlib import Path

import yaml

from .errors import SpecError
from .fields import _int  # the loader's integer rule: whole, >= 1, <= 2**53

# Fields a user writes by hand when a config cannot be imported (docs/specs.md lists them all).
BY_HAND = ("name, source, vocab_size, d_model, n_layers, n_heads, n_kv_heads, head_dim, d_ff, max_context "
           "(and mlp, norm, position, tied_embeddings, qkv_bias, linear_bias, sliding_window, layer_pattern, "
           "mla, moe where they apply; see docs/specs.md)")
_NOTHING = object()


class _Config:
    """Typed access to one config.json: every problem names the file and the config key."""

    def __init__(self, data: dict, path: str):
        self.d, self.path = data, path

    def has(self, key) -> bool:
        return self.d.get(key) is not None

    def missing(self, key, why) -> SpecError:
        return SpecError(self.path, key, f"missing from config.json (needed for {why}); add it to the file, "
                                         f"or write a model YAML by hand with {BY_HAND}")

    def int(self, key, why, default=_NOTHING, minimum=1):
        v = self.d.get(key)
        if v is None:
            if default is _NOTHING:
                raise self.missing(key, why)
            return default
        if isinstance(v, bool) or not isinstance(v, (int, float)):  # bounded message for a list or a mapping
            raise SpecError(self.path, key, f"must be an integer, got {_short(v)}")
        return _int(v, self.path, key, minimum)

    def bool(self, key, default: bool) -> bool:
        v = self.d.get(key)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise SpecError(self.path, key, f"must be true or false, got {_short(v)}")
        return v

    def str(self, key, default=None):
        v = self.d.get(key)
        if v is None:
            return default
        if not isinstance(v, str):
            raise SpecError(self.path, key, f"must be a string, got {_short(v)}")
        return v

    def int_list(self, key) -> list:
        v = self.d.get(key)
        if v is None:
            return []
        if not isinstance(v, list) or len(v) > 100_000:
            raise SpecError(self.path, key, f"must be a list of layer indices, got {_short(v)}")
        return [_int(x, self.path, key, 0) for x in v]

    def refuse(self, key, problem) -> SpecError:
        return SpecError(self.path, key, f"{problem}; perfmodel's model schema cannot express this, "
                                         f"so write a model YAML by hand with {BY_HAND}")


def _short(v, n: int = 60) -> str:
    """A bounded repr for messages (a config value can be a huge list)."""
    r = reprlib.Repr()
    r.maxlevel, r.maxlist, r.maxdict, r.maxstring, r.maxother = 2, 4, 4, n, n
    return r.repr(v)


# ---------------------------------------------------------------- reading
def read_config(path: str) -> dict:
    """The JSON object in `path`. Refuses NaN/Infinity literals, non-objects and absurd nesting."""
    from .yamlio import MAX_BYTES

    p = Path(path).expanduser()
    if not p.is_file():
        raise SpecError(path, None, "no such file")
    try:
        if p.stat().st_size > MAX_BYTES:
            raise SpecError(path, None, f"is {p.stat().st_size:,} bytes; a config.json may be at most {MAX_BYTES:,} bytes")
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError(path, None, f"cannot read file ({e.__class__.__name__})") from None

    def no_constant(name):
        raise ValueError(f"{name} is not a number JSON allows")

    try:
        data = json.loads(text, parse_constant=no_constant)
    except json.JSONDecodeError as e:
        raise SpecError(path, None, f"not valid JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    except ValueError as e:  # NaN / Infinity literals
        raise SpecError(path, None, f"not valid JSON: {e}") from None
    except RecursionError:
        raise SpecError(path, None, "not valid JSON: nested too deeply") from None
    if not isinstance(data, dict):
        raise SpecError(path, None, "expected a JSON object (a Hugging Face config.json)")
    return data


def _default_name(path: str) -> str:
    """models--org--Name/snapshots/<rev>/config.json -> Name; Name/config.json -> Name; x.json -> x."""
    p = Path(path).expanduser().resolve()
    if p.name != "config.json":
        return p.stem
    if p.parent.parent.name == "snapshots" and p.parent.parent.parent.name.startswith("models--"):
        return p.parent.parent.parent.name.split("--")[-1]
    return p.parent.name or p.stem


# ---------------------------------------------------------------- layer patterns
def _pattern(kinds: str) -> str:
    """The shortest string whose repetition, cut to len(kinds), is `kinds` ("LGLG..." -> "LG")."""
    n = len(kinds)
    for p in range(1, n + 1):
        if all(kinds[i] == kinds[i % p] for i in range(n)):
            return kinds[:p]
    return kinds


def _layer_types(c: _Config, L: int) -> str | None:
    """Newer configs list every layer: "full_attention" / "sliding_attention" (-> G / L)."""
    v = c.d.get("layer_types")
    if v is None:
        return None
    names = {"full_attention": "G", "sliding_attention": "L"}
    if not isinstance(v, list) or len(v) != L or not all(isinstance(t, str) for t in v):
        raise SpecError(c.path, "layer_types", f"must list one attention type per layer ({L}), got {_short(v)}")
    bad = sorted({t for t in v if t not in names})
    if bad:
        raise c.refuse("layer_types", f"layer type(s) {', '.join(map(repr, bad[:3]))} (perfmodel imports "
                                      "full_attention and sliding_attention)")
    return "".join(names[t] for t in v)


def _attention_window(c: _Config, fam: str, L: int) -> dict:
    """sliding_window + layer_pattern, per family (each family's modeling code, in words):
    Mistral/Mixtral: every layer uses the window when it is set; Qwen2: only with use_sliding_window,
    and then layers >= max_window_layers; Gemma-2: even layers (0, 2, ...) local, odd layers global.
    Llama and Gemma have no window (a sliding_window key there is ignored, as transformers does)."""
    kinds = _layer_types(c, L)
    if fam in ("llama", "gemma") and kinds is None:
        return {}
    W = c.int("sliding_window", "the local attention window", default=None)
    if fam in ("qwen2", "qwen2_moe") and not c.bool("use_sliding_window", False):
        W = None  # configs carry sliding_window 32768 with use_sliding_window false: inactive
    if W is None and fam == "gemma2":
        raise c.missing("sliding_window", "Gemma-2's local layers")
    if W is None:
        if kinds and "L" in kinds:
            raise c.missing("sliding_window", "the sliding_attention layers in layer_types")
        return {}
    if kinds is None:
        if fam in ("qwen2", "qwen2_moe"):
            first = c.int("max_window_layers", "Qwen2's windowed layers (use_sliding_window is true)", minimum=0)
            kinds = "G" * min(first, L) + "L" * max(L - first, 0)
        elif fam == "gemma2":
            kinds = "LG" * (L // 2) + "L" * (L % 2)
        else:
            kinds = "L" * L
    if "L" not in kinds:
        return {}
    return {"sliding_window": W, "layer_pattern": _pattern(kinds)}


# ---------------------------------------------------------------- families
def _dense_core(c: _Config, D_key="hidden_size", L_key="num_hidden_layers", N_key="num_attention_heads",
                gqa=True) -> dict:
    """d_model, n_layers, n_heads, n_kv_heads (gqa=False: multi-head, the key is not read), head_dim."""
    D = c.int(D_key, "d_model")
    L = c.int(L_key, "n_layers")
    N = c.int(N_key, "n_heads")
    spec = {"d_model": D, "n_layers": L, "n_heads": N,
            "n_kv_heads": c.int("num_key_value_heads", "n_kv_heads", default=N) if gqa else N}
    if N % spec["n_kv_heads"]:
        raise SpecError(c.path, "num_key_value_heads",
                        f"num_attention_heads ({N}) is not divisible by num_key_value_heads ({spec['n_kv_heads']})")
    H = c.int("head_dim", "head_dim", default=None)
    if H is None and D % N:
        raise c.missing("head_dim", f"head_dim: hidden_size ({D}) is not divisible by num_attention_heads ({N})")
    spec["head_dim"] = H or D // N
    return spec


def _llama_like(c: _Config, fam: str, notes: list) -> dict:
    """Llama, Mistral, Qwen2, Mixtral, Qwen2-MoE, Gemma, Gemma-2: gated MLP, RMSNorm, RoPE."""
    spec = _dense_core(c)
    L, D = spec["n_layers"], spec["d_model"]
    spec.update(vocab_size=c.int("vocab_size", "vocab_size"), d_ff=c.int("intermediate_size", "d_ff"),
                max_context=c.int("max_position_embeddings", "max_context"), mlp="gated", norm="rmsnorm",
                position="rope", tied_embeddings=c.bool("tie_word_embeddings", fam.startswith("gemma")))
    # Biases. Qwen2 always has q/k/v biases (no key); Llama's attention_bias covers q, k, v and o.
    attn_bias = fam in ("qwen2", "qwen2_moe") or c.bool("attention_bias", False)
    mlp_bias = c.bool("mlp_bias", False)
    if mlp_bias and not attn_bias:
        raise c.refuse("mlp_bias", "MLP biases without attention biases")
    if mlp_bias:
        spec["linear_bias"] = True
    elif attn_bias:
        spec["qkv_bias"] = True
        if fam not in ("qwen2", "qwen2_moe"):  # o_proj bias too: D per layer, not in our schema
            notes.append(("o_proj bias (attention_bias covers the output projection)", L * D))
    spec.update(_attention_window(c, fam, L))
    if fam == "gemma2":
        notes.append(("the post-attention and post-feedforward RMSNorm weights (Gemma-2 has four norms per "
                      "layer, the schema two)", 2 * L * D))
    if fam.startswith("gemma"):
        notes.append(("embedding scaled by sqrt(d_model): no parameters, a multiply per element", 0))
    if fam == "mixtral":
        spec["moe"] = {"n_experts": c.int("num_local_experts", "moe.n_experts"),
                       "n_active": c.int("num_experts_per_tok", "moe.n_active"),
                       "d_ff_expert": spec["d_ff"]}
    if fam == "qwen2_moe":
        spec["moe"] = _qwen2_moe(c, spec, notes)
    return spec


def _qwen2_moe(c: _Config, spec: dict, notes: list) -> dict:
    L, D = spec["n_layers"], spec["d_model"]
    Fe = c.int("moe_intermediate_size", "moe.d_ff_expert")
    moe = {"n_experts": c.int("num_experts", "moe.n_experts"), "n_active": c.int("num_experts_per_tok", "moe.n_active"),
           "d_ff_expert": Fe}
    if c.int("decoder_sparse_step", "the MoE layer spacing", default=1) != 1:
        raise c.refuse("decoder_sparse_step", "MoE layers spaced more than one apart")
    dense = c.int_list("mlp_only_layers")
    if dense != list(range(len(dense))):
        raise c.refuse("mlp_only_layers", "dense layers that are not the leading ones")
    moe["first_dense_layers"] = len(dense)
    Fs = c.int("shared_expert_intermediate_size", "the shared expert", default=0, minimum=0)
    if Fs:
        if Fs % Fe:
            raise c.refuse("shared_expert_intermediate_size",
                           f"a shared expert of width {Fs}, not a multiple of moe_intermediate_size ({Fe})")
        moe["n_shared"] = Fs // Fe  # one MLP of width n_shared * F_e: the same weights and FLOPs
        notes.append(("shared_expert_gate (a D x 1 sigmoid gate on the shared expert per MoE layer)",
                      (L - len(dense)) * D))
    return moe


def _deepseek(c: _Config, fam: str, notes: list) -> dict:
    spec = _dense_core(c)
    L = spec["n_layers"]
    spec.update(vocab_size=c.int("vocab_size", "vocab_size"), d_ff=c.int("intermediate_size", "d_ff"),
                max_context=c.int("max_position_embeddings", "max_context"), mlp="gated", norm="rmsnorm",
                position="rope", tied_embeddings=c.bool("tie_word_embeddings", False))
    if c.bool("attention_bias", False):
        raise c.refuse("attention_bias", "biases on DeepSeek's MLA projections")
    if c.has("kv_lora_rank"):  # MLA; q_lora_rank null = full-rank q projection
        spec["mla"] = {"kv_lora_rank": c.int("kv_lora_rank", "mla.kv_lora_rank"),
                       "rope_dim": c.int("qk_rope_head_dim", "mla.rope_dim"),
                       "nope_dim": c.int("qk_nope_head_dim", "mla.nope_dim"),
                       "v_head_dim": c.int("v_head_dim", "mla.v_head_dim"),
                       "q_lora_rank": c.int("q_lora_rank", "mla.q_lora_rank", default=None)}
        spec["head_dim"] = spec["mla"]["v_head_dim"]  # D/N is not a head size here (V3: 7168/128 = 56)
    if c.has("n_routed_experts"):
        if c.int("moe_layer_freq", "the MoE layer spacing", default=1) != 1:
            raise c.refuse("moe_layer_freq", "MoE layers spaced more than one apart")
        method = c.str("topk_method", "greedy")
        spec["moe"] = {"n_experts": c.int("n_routed_experts", "moe.n_experts"),
                       "n_active": c.int("num_experts_per_tok", "moe.n_active"),
                       "d_ff_expert": c.int("moe_intermediate_size", "moe.d_ff_expert"),
                       "n_shared": c.int("n_shared_experts", "moe.n_shared", default=0, minimum=0),
                       "first_dense_layers": c.int("first_k_dense_replace", "moe.first_dense_layers", default=0,
                                                   minimum=0),
                       "router_bias": method == "noaux_tc"}  # e_score_correction_bias, one per expert
    mtp = c.int("num_nextn_predict_layers", "the MTP module", default=0, minimum=0)
    if mtp:
        notes.append((f"the multi-token-prediction module (num_nextn_predict_layers {mtp}), which DeepSeek's "
                      "'main model' parameter count also leaves out", None))
    if L <= spec.get("moe", {}).get("first_dense_layers", 0):
        raise SpecError(c.path, "first_k_dense_replace", f"({spec['moe']['first_dense_layers']}) leaves no MoE layer "
                                                          f"of the {L}")
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
    "Qwen2MoeForCausalLM": ("qwen2_moe", _llama_like), "GemmaForCausalLM": ("gemma", _llama_like),
    "Gemma2ForCausalLM": ("gemma2", _llama_like), "DeepseekV2ForCausalLM": ("deepseek_v2", _deepseek),
    "DeepseekV3ForCausalLM": ("deepseek_v3", _deepseek), "GPT2LMHeadModel": ("gpt2", _gpt2),
    "GPTNeoXForCausalLM": ("gpt_neox", _gpt_neox),
}
_BY_TYPE = {fam: (fam, fn) for fam, fn in FAMILIES.values()}


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
               "head_dim", "d_ff", "mlp", "tied_embeddings", "qkv_bias", "linear_bias", "norm", "position",
               "max_context", "sliding_window", "layer_pattern", "mla", "moe")


def to_yaml(spec: dict) -> str:
    """The spec as a models/*.yaml text, fields in the catalog's order, nested mappings on one line."""
    keys = [k for k in FIELD_ORDER if k in spec] + [k for k in spec if k not in FIELD_ORDER]
    lines = ["# written by `perfmodel import-config`; it has no published_params: add the published count and its",
             "# source (published_params: {value: N, source: '...'}) to have the tests check the derived count."]
    for k in keys:
        v = spec[k]
        if isinstance(v, dict):  # mla: {...} and moe: {...} on one line, as in the catalog
            lines.append(f"{k}: " + yaml.safe_dump(v, default_flow_style=True, sort_keys=False, width=1e9).strip())
        else:
            lines.append(yaml.safe_dump({k: v}, allow_unicode=True, width=1e9).strip())
    return "\n".join(lines) + "\n"
