"""Numeric formats: bytes per stored element, scale bookkeeping included, and which peak they use.

A format stores `bits` per element plus one `scale_bits` scale per `group` elements
(group=None: one scale per matrix row, i.e. per output channel), plus optionally a second-level
scale per `group2` first-level scales (double quantization). Sources of each layout:

- int4-gG: one 16-bit scale per G weights (GPTQ/AWQ layout): 4 + 16/G bits, 4.125 at G = 128;
  int4-g32 is llama.cpp's Q4_0 (blocks of 32 with an fp16 scale: 4.5 bits, ggml-common.h block_q4_0).
- int4-gG-zp: a 16-bit scale and a 16-bit zero point per G weights (gpt-fast's int4 groupsize G,
  quantize.py pack_scales_and_zeros): 4 + 32/G bits, 5.0 at G = 32.
- int8-gG: int8 with one 16-bit scale per G weights: 8 + 16/G bits; int8-g32 is llama.cpp's Q8_0
  (8.5 bits, ggml-common.h block_q8_0).
- nf4: QLoRA (Dettmers et al. 2023, arXiv:2305.14314, section 3): blocks of 64 with a 32-bit
  absmax constant, "32/64 = 0.5 bits per parameter", so 4.5 bits; nf4-dq double-quantizes the
  constants to 8 bits with a 32-bit constant per 256 of them: "8/64 + 32/(64*256) = 0.127 bits",
  so 4.127 bits.
- mxfp4: OCP Microscaling Formats (MX) v1.0 spec: blocks of 32 FP4 (E2M1) elements sharing one
  8-bit E8M0 scale: 4 + 8/32 = 4.25 bits.
- nvfp4: blocks of 16 FP4 (E2M1) elements with one FP8 (E4M3) scale, 4 + 8/16 = 4.5 bits, plus one
  FP32 scale per tensor (NVIDIA, 'Introducing NVFP4 for Efficient and Accurate Low-Precision
  Inference': 'a two-level scaling strategy ... a fine-grained E4M3 scaling factor ... applied to each
  16-value micro-block ... a second-level FP32 scalar applied per tensor'). The per-tensor scale is
  counted once per stored matrix (`matrix_bytes`), not in the bits per element. `fp4` is the same
  layout under its older name (kept so existing specs and implementation profiles read the same).
- fp8-b128: E4M3 weights with one FP32 scale per 128 x 128 block (DeepSeek-V3 technical report,
  arXiv:2412.19437, section 3.3.2: "for weights, we group and scale elements on a 128x128 block basis";
  the checkpoints' config.json quantization_config "weight_block_size": [128, 128], as in DeepSeek-V3/R1,
  Qwen3 FP8 and MiniMax-M2): 8 + 32/16384 bits. Engines run it with block-scaled FP8 GEMMs (DeepGEMM and
  the like), whose measured tables (AIConfigurator's fp8_block) differ from per-tensor fp8's.
- mxfp6 (= fp6): OCP MX v1.0: blocks of 32 FP6 (E2M3 or E3M2) elements sharing one E8M0 scale:
  6 + 8/32 = 6.25 bits. Blackwell datasheets list FP6 at the FP8 tensor rate ('FP8/FP6 Tensor Core'),
  so it computes at the fp8 peak.
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
    scale2_bits: int = 0  # double quantization: one second-level scale ...
    group2: int = 0  # ... per group2 first-level scales
    note: str = ""
    tensor_scale_bits: int = 0  # one more scale per stored matrix (NVFP4's per-tensor FP32 scale)

    def nbytes(self, n_elements, row: int | None = None):
        """Bytes to store n_elements laid out in rows of length `row` (needed for per-row scales)."""
        data = n_elements * self.bits / 8
        if self.group == 0:
            return data
        if self.group is None:  # per-channel: one scale per row of `row` elements
            if not row:
                raise ValueError(f"{self.name}: per-row scales need the row length")
            return data + (n_elements / row) * self.scale_bits / 8
        scales = n_elements / self.group
        extra = (scales / self.group2) * self.scale2_bits / 8 if self.group2 else 0.0
        return data + scales * self.scale_bits / 8 + extra

    def matrix_bytes(self, n_elements, row: int | None = None):
        """Bytes of one stored matrix of n_elements: nbytes plus its per-tensor scale, if the format has one."""
        return self.nbytes(n_elements, row) + self.tensor_scale_bits / 8

    def bits_per_element(self, row: int | None = None) -> float:
        return 8 * self.nbytes(1.0 * (row or self.group or 1), row) / (row or self.group or 1)


_FIXED = {
    "fp32": Format("fp32", 32, peak="fp32", note="IEEE single"),
    "bf16": Format("bf16", 16, peak="bf16", note="bfloat16"),
    "fp16": Format("fp16", 16, peak="fp16", note="IEEE half"),
    "fp8": Format("fp8", 8, peak="fp8", note="= fp8-e4m3; per-tensor scale (negligible)"),
    "fp8-e4m3": Format("fp8-e4m3", 8, peak="fp8", note="OCP FP8 E4M3"),
    "fp8-e5m2": Format("fp8-e5m2", 8, peak="fp8", note="OCP FP8 E5M2"),
    "fp8-b128": Format("fp8-b128", 8, scale_bits=32, group=128 * 128, peak="fp8",
                       note="E4M3 + one FP32 scale per 128x128 block (DeepSeek-V3 block-scaled FP8)"),
    "int8": Format("int8", 8, scale_bits=16, group=None, peak="int8", note="one fp16 scale per output channel"),
    "nf4": Format("nf4", 4, scale_bits=32, group=64, peak="bf16",
                  note="QLoRA NormalFloat4, block 64, fp32 absmax (weight-only)"),
    "nf4-dq": Format("nf4-dq", 4, scale_bits=8, group=64, scale2_bits=32, group2=256, peak="bf16",
                     note="nf4 with double quantization of the absmax constants"),
    "mxfp4": Format("mxfp4", 4, scale_bits=8, group=32, peak="fp4", note="OCP MX: E2M1 x32 + E8M0 scale"),
    "nvfp4": Format("nvfp4", 4, scale_bits=8, group=16, peak="fp4", tensor_scale_bits=32,
                    note="NVFP4: E2M1 x16 + E4M3 scale, + one FP32 scale per tensor"),
    "fp4": Format("fp4", 4, scale_bits=8, group=16, peak="fp4", tensor_scale_bits=32,
                  note="= nvfp4: E2M1 x16 + E4M3 scale, + one FP32 scale per tensor"),
    "mxfp6": Format("mxfp6", 6, scale_bits=8, group=32, peak="fp8",
                    note="OCP MX: E2M3/E3M2 x32 + E8M0 scale; the FP6 tensor rate is the FP8 one"),
    "fp6": Format("fp6", 6, scale_bits=8, group=32, peak="fp8",
                  note="= mxfp6: E2M3/E3M2 x32 + E8M0 scale; the FP6 tensor rate is the FP8 one"),
}
_GROUPED = re.compile(r"^(int4|int8)-g(\d+)(-zp)?$|^(int4)(-zp)?$")


def get_format(name: str) -> Format:
    """'bf16', 'fp8', 'int8', 'int4' (= int4-g128), 'int4-g64', ... Raises ValueError."""
    key = str(name).strip().lower()
    if key in _FIXED:
        return _FIXED[key]
    m = _GROUPED.match(key)
    if m:
        kind = m.group(1) or m.group(4)
        g = int(m.group(2) or 128)
        zp = bool(m.group(3) or m.group(5))
        if g <= 0:
            raise ValueError(f"{kind} group size must be positive, got {g}")
        bits = int(kind[3:])
        what = f"one fp16 scale{' and one fp16 zero point' if zp else ''} per {g} weights"
        return Format(f"{kind}-g{g}{'-zp' if zp else ''}", bits, scale_bits=32 if zp else 16, group=g, peak=kind,
                      note=what)
    raise ValueError(f"unknown format {name!r} (known: {', '.join(list(_FIXED) + ['int4-gN', 'int8-gN', 'int4-gN-zp'])})")


def known_formats() -> list[str]:
    return list(_FIXED) + ["int4-g128", "int4-g64", "int4-g32", "int4-g32-zp", "int8-g32"]


def is_weight_only(weights: Format, act: Format) -> bool:
    """Weights stored narrower than the activations: dequantized on the fly, math at the act rate."""
    return weights.bits < act.bits
