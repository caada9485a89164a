"""Numeric formats: bytes per stored element, scale bookkeeping included, and which peak they use.

A format stores `bits` per element plus one `scale_bits` scale per `group` elements
(group=None: one scale per matrix row, i.e. per output channel). So int4 with a 16-bit scale per
group of g weights costs 4 + 16/g bits per weight: 4.125 at g = 128 (BRIEF, "Quantization").
"""
from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Format:
    name: str
    bits: int
    scale_bits: int = 0
    group: int | None = 0  # 0: no scales; None: one scale per row; g: one scale per g elements
    peak: str = "bf16"  # peak_flops key used when activations are in this format (tensor-core rate)

    def nbytes(self, n_elements, row: int | None = None):
        """Bytes to store n_elements laid out in rows of length `row` (needed for per-row scales)."""
        data = n_elements * self.bits / 8
        if self.group == 0:
            return data
        if self.group is None:  # per-channel: one scale per row of `row` elements
            if not row:
                raise ValueError(f"{self.name}: per-row scales need the row length")
            return data + (n_elements / row) * self.scale_bits / 8
        return data + (n_elements / self.group) * self.scale_bits / 8

    def bits_per_element(self, row: int | None = None) -> float:
        return 8 * self.nbytes(1.0 * (row or self.group or 1), row) / (row or self.group or 1)


_FIXED = {
    "fp32": Format("fp32", 32, peak="fp32"),
    "bf16": Format("bf16", 16, peak="bf16"),
    "fp16": Format("fp16", 16, peak="fp16"),
    "fp8": Format("fp8", 8, peak="fp8"),  # e4m3, per-tensor scale (negligible)
    "fp8-e4m3": Format("fp8-e4m3", 8, peak="fp8"),
    "fp8-e5m2": Format("fp8-e5m2", 8, peak="fp8"),
    "int8": Format("int8", 8, scale_bits=16, group=None, peak="int8"),  # per-output-channel fp16 scale
}
_INT4 = re.compile(r"^int4(?:-g(\d+))?$")


def get_format(name: str) -> Format:
    """'bf16', 'fp8', 'int8', 'int4' (= int4-g128), 'int4-g64', ... Raises ValueError."""
    key = str(name).strip().lower()
    if key in _FIXED:
        return _FIXED[key]
    m = _INT4.match(key)
    if m:
        g = int(m.group(1) or 128)
        if g <= 0:
            raise ValueError(f"int4 group size must be positive, got {g}")
        return Format(f"int4-g{g}", 4, scale_bits=16, group=g, peak="int4")
    raise ValueError(f"unknown format {name!r} (known: {', '.join(list(_FIXED) + ['int4-gN'])})")


def known_formats() -> list[str]:
    return list(_FIXED) + ["int4-g128", "int4-g64", "int4-g32"]
