"""Reading a Hugging Face config.json for perfmodel.hf_import: the strict key accessor (_Config), the file
reader, and the layer-pattern and attention-window rules the families share. Below hf_import; imports
nothing of it."""
from __future__ import annotations

import json
import reprlib
from pathlib import Path

from .errors import SpecError
from .fields import _int  # the loader's integer rule: whole, >= 1, <= 2**53

QWEN = ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe")  # families whose windows follow use_sliding_window

# Fields a user writes by hand when a config cannot be imported (docs/specs.md lists them all).
BY_HAND = ("name, source, vocab_size, d_model, n_layers, n_heads, n_kv_heads, head_dim, d_ff, max_context "
           "(and mlp, norm, norms_per_layer, qk_norm, position, nope_kinds, tied_embeddings, qkv_bias, o_bias, "
           "linear_bias, attention_sinks, sliding_window, attention_chunk, layer_pattern, mla, moe, weight_formats "
           "where they apply; see docs/specs.md)")
_NOTHING = object()


class _Config:
    """Typed access to one config.json (or its text_config): every problem names the file and the key."""

    def __init__(self, data: dict, path: str, prefix: str = "", defaults: dict | None = None):
        self.d, self.path, self.prefix = data, path, prefix
        self.defaults = defaults or {}  # the transformers config class's defaults for keys a config may omit

    def _get(self, key):
        v = self.d.get(key)
        return self.defaults.get(key) if v is None else v

    def k(self, key) -> str:
        return self.prefix + key

    def has(self, key) -> bool:
        return self._get(key) is not None

    def missing(self, key, why) -> SpecError:
        return SpecError(self.path, self.k(key), f"missing from config.json (needed for {why}); add it to the file, "
                                                 f"or write a model YAML by hand with {BY_HAND}")

    def int(self, key, why, default=_NOTHING, minimum=1):
        v = self._get(key)
        if v is None:
            if default is _NOTHING:
                raise self.missing(key, why)
            return default
        if isinstance(v, bool) or not isinstance(v, (int, float)):  # bounded message for a list or a mapping
            raise SpecError(self.path, self.k(key), f"must be an integer, got {_short(v)}")
        return _int(v, self.path, self.k(key), minimum)

    def bool(self, key, default: bool) -> bool:
        v = self._get(key)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise SpecError(self.path, self.k(key), f"must be true or false, got {_short(v)}")
        return v

    def str(self, key, default=None):
        v = self._get(key)
        if v is None:
            return default
        if not isinstance(v, str):
            raise SpecError(self.path, self.k(key), f"must be a string, got {_short(v)}")
        return v

    def int_list(self, key, minimum=0) -> list:
        v = self._get(key)
        if v is None:
            return []
        if not isinstance(v, list) or len(v) > 100_000:
            raise SpecError(self.path, self.k(key), f"must be a list of layer indices, got {_short(v)}")
        return [_int(x, self.path, self.k(key), minimum) for x in v]

    def sub(self, key, defaults: dict | None = None) -> "_Config":
        """A nested mapping (text_config, vision_config), read with its own key prefix."""
        v = self.d.get(key)
        if not isinstance(v, dict):
            raise SpecError(self.path, self.k(key), f"must be a mapping of the sub-model's config, got {_short(v)}")
        return _Config(v, self.path, f"{self.prefix}{key}.", defaults)

    def refuse(self, key, problem) -> SpecError:
        return SpecError(self.path, self.k(key), f"{problem}; perfmodel's model schema cannot express this, "
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

    from .fileio import user_path

    p = user_path(path, str(path)[:80])
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
    names = {"full_attention": "G", "sliding_attention": "L", "chunked_attention": "C"}
    if not isinstance(v, list) or len(v) != L or not all(isinstance(t, str) for t in v):
        raise SpecError(c.path, c.k("layer_types"), f"must list one attention type per layer ({L}), got {_short(v)}")
    bad = sorted({t for t in v if t not in names})
    if bad:
        raise c.refuse("layer_types", f"layer type(s) {', '.join(map(repr, bad[:3]))} (perfmodel imports "
                                      "full_attention, sliding_attention and chunked_attention)")
    return "".join(names[t] for t in v)


def _attention_window(c: _Config, fam: str, L: int) -> dict:
    """sliding_window + layer_pattern, per family (each family's modeling code, in words):
    Mistral/Mixtral/Phi-3: every layer uses the window when it is set; Qwen2/Qwen3: only with
    use_sliding_window, and then layers >= max_window_layers; Gemma-2: even layers (0, 2, ...) local,
    odd layers global; Gemma-3: 5 local per global (sliding_window_pattern 6, or layer_types); gpt-oss:
    layer_types. Llama and Gemma have no window (a sliding_window key there is ignored, as transformers does)."""
    kinds = _layer_types(c, L)
    if kinds and "C" in kinds:
        raise c.refuse("layer_types", "chunked_attention layers outside Llama 4")
    if fam in ("llama", "gemma") and kinds is None:
        return {}
    W = c.int("sliding_window", "the local attention window", default=None)
    if fam in QWEN and not c.bool("use_sliding_window", False):
        W = None  # configs carry sliding_window 32768 with use_sliding_window false: inactive
    if W is None and fam in ("gemma2", "gemma3"):
        raise c.missing("sliding_window", f"{fam}'s local layers")
    if W is None:
        if kinds and "L" in kinds:
            raise c.missing("sliding_window", "the sliding_attention layers in layer_types")
        return {}
    if kinds is None:
        if fam in QWEN:
            first = c.int("max_window_layers", "Qwen's windowed layers (use_sliding_window is true)", minimum=0)
            kinds = "G" * min(first, L) + "L" * max(L - first, 0)
        elif fam == "gemma2":
            kinds = "LG" * (L // 2) + "L" * (L % 2)
        elif fam == "gemma3":  # transformers 4.50's Gemma3: layer i is global when (i + 1) % sliding_window_pattern == 0
            every = c.int("sliding_window_pattern", "Gemma 3's local:global pattern", default=6)
            kinds = "".join("G" if (i + 1) % every == 0 else "L" for i in range(L))
        else:
            kinds = "L" * L
    if "L" not in kinds:
        return {}
    return {"sliding_window": W, "layer_pattern": _pattern(kinds)}
