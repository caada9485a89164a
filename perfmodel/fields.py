"""Field validators shared by every spec loader (hardware, models, the achievable block, implementation
profiles): each raises SpecError naming the file and the field."""
from __future__ import annotations

import math
import unicodedata

from .errors import SpecError
from .units import parse_quantity


def _int(v, where, fld, minimum=1):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not v.is_integer()):
        raise SpecError(where, fld, f"must be an integer, got {v!r}")
    if not math.isfinite(v) or v < minimum:
        raise SpecError(where, fld, f"must be >= {minimum}, got {v!r}")
    if v > 2**53:
        raise SpecError(where, fld, f"is implausibly large ({v!r})")
    return int(v)


def _bool(v, where, fld):
    if not isinstance(v, bool):
        raise SpecError(where, fld, f"must be true or false, got {v!r}")
    return v


def _str(v, where, fld):
    if not isinstance(v, str) or not v.strip():
        raise SpecError(where, fld, f"must be a non-empty string, got {v!r}")
    bad = [c for c in v if unicodedata.category(c) in ("Cc", "Cf") and c not in "\t"]
    if bad:  # control characters and bidi/format controls (U+202E ...) would garble or disguise a name
        raise SpecError(where, fld, f"has a control or bidi character {ascii(bad[0])}; write plain text")
    return v


def _choice(v, where, fld, choices):
    if v not in choices:
        raise SpecError(where, fld, f"must be one of {', '.join(choices)}; got {v!r}")
    return v


def _check_keys(d: dict, allowed, where, prefix=""):
    for k in d:
        if k not in allowed:
            import difflib

            near = difflib.get_close_matches(str(k), sorted(allowed), n=1, cutoff=0.75)  # a typo: n_layrs
            hint = f"did you mean {near[0]}? " if near else ""
            raise SpecError(where, f"{prefix}{k}", f"unknown field ({hint}allowed: {', '.join(sorted(allowed))})")


def _need(d: dict, keys, where, prefix=""):
    for k in keys:
        if k not in d or d[k] is None:
            raise SpecError(where, f"{prefix}{k}", "missing required field")


def _qty(raw, where, fld, dim, default_source):
    if isinstance(raw, dict):
        _check_keys(raw, {"value", "source"}, where, f"{fld}.")
        _need(raw, ["value"], where, f"{fld}.")
        src = raw.get("source") or default_source
        raw = raw["value"]
    else:
        src = default_source
    if not src:
        raise SpecError(where, fld, "has no source: write {value: ..., source: \"datasheet ...\"}")
    try:
        return parse_quantity(raw, dim, allow_zero=fld in ("kernel_overhead", "link_latency", "network_latency")), str(src)
    except ValueError as e:
        raise SpecError(where, fld, str(e)) from None


def split_list(text, opt: str) -> list[str]:
    """A comma list as the CLI takes it: '1,8,64', 'h100-sxm,h200'. An empty entry ('1,,8', ',2/h', 'a,') is an
    error naming the option, never dropped: dropping one would shift the others onto the wrong item."""
    items = [x.strip() for x in str(text).split(",")]
    if any(not x for x in items):
        raise SpecError(opt, None, f"an empty entry in {str(text)!r} (a comma list has one value between commas)")
    return items


# the peak_flops keys of a hardware spec (and of achievable.gemm_efficiency / attention_compute). fp16_acc16: the
# FP16 tensor rate with FP16 accumulate, where a part runs it faster than with FP32 accumulate (GeForce: twice);
# `fp16` is always the FP32-accumulate rate (what PyTorch and cuBLAS use by default)
PEAK_KEYS = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4", "fp4", "fp16_acc16")
