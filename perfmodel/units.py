"""Quantities as people write them ("80 GB", "3.35 TB/s", "989 TFLOP/s") -> SI floats, and back.

Parsed once at load; the engine only ever sees bytes, seconds, FLOP, FLOP/s, bytes/s and watts.
GB is 1e9 bytes and GiB is 2**30 bytes: they are different units here, never aliases.

Why not pint: it has no FLOP unit, it would accept "GB" and "GiB" the same way only if configured,
and its import alone costs ~0.3 s, more than half of the CLI's cold-start budget. The units a
hardware datasheet uses are a closed, small set, so an explicit table is both stricter and faster.
"""
from __future__ import annotations

import math
import re

_DEC = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_BIN = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}


def _table() -> dict[str, tuple[str, float]]:
    t: dict[str, tuple[str, float]] = {}
    for p, f in _DEC.items():
        t[f"{p}B"] = ("bytes", f)
        t[f"{p}B/s"] = ("bytes/s", f)
        t[f"{p}b/s"] = ("bytes/s", f / 8)  # bits per second (network links: "400 Gb/s")
        t[f"{p}bps"] = ("bytes/s", f / 8)
        t[f"{p}FLOP/s"] = ("flop/s", f)
        t[f"{p}FLOPS"] = ("flop/s", f)
        t[f"{p}OP/s"] = ("flop/s", f)  # integer tensor ops (int8 TOPS): one op counted like one FLOP
        t[f"{p}OPS"] = ("flop/s", f)
        t[f"{p}W"] = ("W", f)
    for p, f in _BIN.items():
        t[f"{p}B"] = ("bytes", f)
        t[f"{p}B/s"] = ("bytes/s", f)
    t.update({"s": ("s", 1.0), "ms": ("s", 1e-3), "us": ("s", 1e-6), "µs": ("s", 1e-6), "ns": ("s", 1e-9)})
    t["bytes"] = ("bytes", 1.0)
    t.update({"/h": ("USD/h", 1.0), "USD/h": ("USD/h", 1.0), "/hr": ("USD/h", 1.0), "USD/hr": ("USD/h", 1.0)})
    t.pop("kW", None)
    t["kW"] = ("W", 1e3)
    return t


UNITS = _table()
# ASCII digits only: "８０ GB" (full-width digits) is refused, not read as 80 GB
_RX = re.compile(r"^\s*\$?\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-zµ/]*)\s*$", re.ASCII)


def parse_quantity(text, dimension: str, allow_zero: bool = False) -> float:
    """Parse "3.35 TB/s" for dimension "bytes/s" -> 3.35e12. Raises ValueError with the reason.

    A bare number is taken as already in SI units of that dimension.
    """
    if isinstance(text, bool):
        raise ValueError(f"expected a {dimension} quantity, got a boolean")
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        if not isinstance(text, str):
            raise ValueError(f"expected a {dimension} quantity such as '80 GB', got {type(text).__name__}")
        m = _RX.match(text)
        if not m:
            raise ValueError(f"cannot read {text!r} as a {dimension} quantity (write e.g. {_EXAMPLE[dimension]!r})")
        num, unit = m.groups()
        value = float(num)
        if unit:
            if unit not in UNITS:
                raise ValueError(f"unknown unit {unit!r} in {text!r}")
            dim, factor = UNITS[unit]
            if dim != dimension:
                raise ValueError(f"{text!r} is a {dim} quantity, expected {dimension}")
            value *= factor
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{text!r} must be a positive, finite {dimension} quantity")
    return value


_EXAMPLE = {"bytes": "80 GB", "bytes/s": "3.35 TB/s", "flop/s": "989 TFLOP/s", "W": "700 W", "s": "50 ms",
            "USD/h": "2.49/h", "ratio": "3"}


_COUNT = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(k|K|M|G|Ki|Mi|Gi)?\s*$", re.ASCII)
_COUNT_SCALE = {None: 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30}


def parse_count(text) -> float:
    """A count of tokens, sequences or devices: 4096, 1e6, 128k (128,000), 1M (10^6), or binary 128Ki
    (131,072) and 1Mi (1,048,576). SI and binary prefixes stay apart, as GB and GiB do. Numbers pass through."""
    if not isinstance(text, str):
        return float(text)
    m = _COUNT.match(text)
    if not m:
        raise ValueError(f"cannot read {text!r} as a count: write 4096, 1e6, 128k (= 128,000) or 128Ki (= 131,072)")
    return float(m.group(1)) * _COUNT_SCALE[m.group(2)]


def _fmt(x: float, unit: str, prefixes=("", "k", "M", "G", "T", "P", "E"), base=1000.0, digits=4) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    if x == 0:
        return f"0 {unit}"
    i = 0
    while abs(x) >= base and i < len(prefixes) - 1:
        x /= base
        i += 1
    return f"{x:.{digits}g} {prefixes[i]}{unit}"


def fmt_bytes(x: float) -> str:
    """Decimal (GB = 1e9): matches datasheets. Use fmt_bytes_bin for GiB."""
    return _fmt(x, "B")


def fmt_bytes_bin(x: float) -> str:
    return _fmt(x, "B", ("", "Ki", "Mi", "Gi", "Ti", "Pi"), 1024.0)


def fmt_rate(x: float) -> str:
    return _fmt(x, "B/s")


def fmt_flops(x: float) -> str:
    return _fmt(x, "FLOP/s")


def fmt_count(x: float) -> str:
    return _fmt(x, "", digits=4).strip()


def fmt_time(x: float) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    for unit, f in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(x) >= f:
            return f"{x / f:.4g} {unit}"
    return f"{x / 1e-9:.4g} ns"
