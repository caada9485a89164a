"""How a model is run, apart from the model itself: the storage formats (Precision) and how one replica is
spread over devices (Layout). Both check themselves when made, naming their own fields (`tp=`, `weights=`);
the CLI renames those to its flags (api.layout, api._prec). perfmodel.ops re-exports both."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import checked_init
from .formats import Format, get_format

MAX_GPUS = 10**12  # devices a layout may have: a prime near this still factors in ~0.2 s (parallel.py)


@checked_init
@dataclass(frozen=True)
class Layout:
    """How one model replica is spread over devices (docs/parallelism.md).

    tp: tensor parallel (heads, d_ff and vocab split; two all-reduces of the activations per layer).
    pp: pipeline stages (layers split; activations sent between stages).
    ep: expert parallel for MoE: experts spread over ep device groups that run attention data-parallel
        on B/ep of the batch, with an all-to-all dispatch and combine per MoE layer.
    replicas: independent copies (data parallel): latency unchanged, throughput x replicas.
    microbatches: in-flight micro-batches of a pipeline (default pp, which keeps it full).
    experts: how a tp group holds the experts of a MoE layer: "tp" (each expert's d_ff split over the group) or "ep"
        (whole experts spread over the group, TensorRT-LLM's and SGLang's "TEP": attention tensor-parallel, experts
        expert-parallel). The same weights, FLOPs and bytes per device and the same all-reduce; the measured MoE
        kernel that prices them is the expert-parallel one (perfmodel.kernels).
    redundant_experts: R extra expert slots over the expert-parallel devices, each a copy of a heavily used expert
        (expert-parallel load balancing: SGLang's --ep-num-redundant-experts, TensorRT-LLM's load_balancer
        num_slots = E + R). Each device then holds (E + R) / ep experts instead of E / ep: more weight memory, the
        same tokens (docs/parallelism.md, "Redundant experts").
    """

    tp: int = 1
    pp: int = 1
    ep: int = 1
    replicas: int = 1
    microbatches: int | None = None
    experts: str = "tp"
    redundant_experts: int = 0

    def __post_init__(self):  # checked when made, so no code path meets a bad layout (the CLI's messages)
        from .errors import SpecError

        for k in ("tp", "pp", "ep", "replicas", "microbatches"):
            v = getattr(self, k)
            if v is None and k == "microbatches":
                continue
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise SpecError(f"{k}=", None, f"must be a positive integer, got {v!r}")
            object.__setattr__(self, k, int(v))
        r = self.redundant_experts
        if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or r < 0:
            raise SpecError("redundant_experts=", None, f"must be a whole number >= 0, got {r!r}")
        object.__setattr__(self, "redundant_experts", int(r))
        if self.experts not in ("tp", "ep"):
            raise SpecError("experts=", None, f"must be tp or ep (how a tp group holds the experts), got {self.experts!r}")
        if self.devices > MAX_GPUS:
            raise SpecError("tp=/pp=/ep=/replicas=", None, f"{self.devices:,} devices (tp x pp x ep x replicas), "
                                                               f"over the {MAX_GPUS:,} this calculator takes")

    @property
    def devices(self) -> int:
        return self.tp * self.pp * self.ep * self.replicas

    @property
    def m(self) -> int:
        return self.microbatches or self.pp


@checked_init
@dataclass
class Precision:
    """Storage formats of weights, activations and KV cache (names from perfmodel.formats)."""

    weights: str = "bf16"
    act: str = "bf16"
    kv: str | None = None  # None: same as act
    quantize_embeddings: bool = False  # by default embeddings / LM head stay 16-bit when weights are quantized

    def __post_init__(self):  # an unknown format is one line when the Precision is made (the CLI's messages)
        from .errors import SpecError

        for fld, v in (("weights=", self.weights), ("act=", self.act), ("kv=", self.kv)):
            if v is None and fld == "kv=":
                continue
            if not isinstance(v, str):
                raise SpecError(fld, None, f"must be a format name such as 'bf16', got {type(v).__name__} {v!r}")
            try:
                get_format(v)
            except ValueError as e:
                raise SpecError(fld, None, str(e)) from None
        if not isinstance(self.quantize_embeddings, (bool, np.bool_)):
            raise SpecError("quantize_embeddings=", None, f"must be True or False, got {self.quantize_embeddings!r}")

    def formats(self) -> tuple[Format, Format, Format, Format]:
        wf, af = get_format(self.weights), get_format(self.act)
        kf = get_format(self.kv) if self.kv else af
        hf = wf if (wf.bits >= 16 or self.quantize_embeddings) else get_format("bf16")
        return wf, af, kf, hf  # hf: embeddings, LM head, norms, biases
