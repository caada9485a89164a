"""Which MoE kernel an engine runs, and which of AIConfigurator's measured MoE tables timed it.

An engine can be told which backend runs a model's experts (TensorRT-LLM's `moe_config.backend`, vLLM's
`VLLM_MXFP4_USE_MARLIN`), and the backends' kernels differ by up to 2x at the same shape. perfmodel.kernels keeps
each named backend's tables apart (KernelSet.moe_by) by the `kernel_source` label AIConfigurator wrote; an
implementation profile's `moe_backend` picks which of them price the experts."""
from __future__ import annotations

# TensorRT-LLM's MoE backends (moe_config.backend) and the kernels AIConfigurator 0.12.0 timed for each: its
# collector (collector/trtllm/collect_moe.py @095f58a, and collector/kernel_source_backends.yaml, which names the
# backend of every label) runs the CUTLASS backend ("moe_torch_flow_cutlass"; "moe_torch_flow_nongated" for
# relu2 experts, not read; "moe_torch_flow_triton_fp8_block", the Triton kernel CutlassFusedMoE dispatches
# fp8_block to on SM120), the TRTLLM backend's trtllm-gen kernels in min-latency mode ("moe_torch_flow_min_latency", nvfp4 on
# SM100 only), DeepGEMM for fp8_block on SM100/SM103 ("deepgemm"), and for MXFP4 experts "moe_torch_flow" with
# model_config.moe_backend "trtllm" on datacenter Blackwell and "triton" on Hopper (SM 90-99); TensorRT-LLM 1.0's
# tables ("moe_torch_flow", A100 and L40S) ran its default backend, CUTLASS.
_TRT_MOE_SOURCE = {"moe_torch_flow_cutlass": "CUTLASS", "moe_torch_flow_triton_fp8_block": "CUTLASS",
                   "moe_torch_flow_min_latency": "TRTLLM", "deepgemm": "DEEPGEMM"}
_MXFP4 = ("w4a16_mxfp4", "w4a8_mxfp4_mxfp8")
# AIConfigurator systems whose GPUs are SM 10.x (TensorRT-LLM's is_sm_100f): B200 and GB200 are compute capability
# 10.0, B300 and GB300 10.3 (NVIDIA, "CUDA GPU Compute Capability", developer.nvidia.com/cuda-gpus)
SM100F = frozenset({"b200_sxm", "b300_sxm", "gb200", "gb300"})
HOPPER = frozenset({"h100_sxm", "h200_sxm"})  # compute capability 9.0 (same source)
# the values TensorRT-LLM 1.3's MoeConfig.backend takes (tensorrt_llm/llmapi/llm_args.py), AUTO its default
TRT_MOE_BACKENDS = ("AUTO", "CUTLASS", "TRTLLM", "DEEPGEMM", "CUTEDSL", "WIDEEP", "TRITON", "VANILLA")

# vLLM runs MXFP4 experts with the first backend of its priority list that supports the configuration (on Hopper,
# OpenAI's Triton matmul_ogs kernels where triton_kernels is installed), unless VLLM_MXFP4_USE_MARLIN=1
# selects Marlin (vllm/model_executor/layers/fused_moe/oracle/mxfp4.py, select_gpt_oss_mxfp4_moe_backend: "Handle
# explicit Marlin MXFP4 configuration"). AIConfigurator 0.12.0's vLLM collector builds each case through FusedMoE
# and lets that selection run (collector/vllm/collect_moe.py: "so vLLM owns ... backend selection exactly as it does
# for model execution"); its 0.24.0 labels name the kernel class, "..._marlin_marlinexperts" for Marlin (its
# "_situ_as_silu" rows run a SiLU epilogue, "<~3% of the op"). The 0.19.0 label "vllm_marlin_int4_moe" is not
# Marlin: that collector (@e015c0ed6, lines 20 and 650-690) called fused_experts with int4_w4a16_moe_quant_config,
# vLLM's Triton fused-MoE path.
VLLM_MOE_BACKENDS = ("MARLIN",)
MOE_BACKENDS = {"trtllm": TRT_MOE_BACKENDS, "vllm": VLLM_MOE_BACKENDS}  # engine -> the names its profile can take


def trtllm_moe_backend(source: str, dtype: str, system: str) -> str:
    """The TensorRT-LLM MoE backend an AIConfigurator kernel_source label timed (_TRT_MOE_SOURCE)."""
    if source == "moe_torch_flow":  # the backend the collector let TensorRT-LLM choose: AUTO's for MXFP4, else 1.0's
        return trtllm_auto_moe(dtype, system) if dtype in _MXFP4 else "CUTLASS"
    return _TRT_MOE_SOURCE.get(source, source)


def vllm_moe_backend(source: str) -> str | None:
    """The named vLLM MoE backend an AIConfigurator kernel_source label timed, None for the default selection's."""
    return "MARLIN" if "marlinexperts" in source else None


def trtllm_auto_moe(dtype: str, system: str) -> str:
    """What TensorRT-LLM 1.3 runs for moe_config.backend AUTO (ModelConfig.resolve_moe_backend, model_config.py
    @1.3.0rc20 as AIConfigurator's collector quotes it: "serving AUTO resolves fp8_block to TRTLLM only when
    is_sm_100f ... everything else lands on CUTLASS"; GptOssForCausalLM, the MXFP4 checkpoints, TRTLLM on
    Blackwell and TRITON on Hopper)."""
    if dtype in _MXFP4:
        return "TRTLLM" if system in SM100F else ("TRITON" if system in HOPPER else "CUTLASS")
    if dtype == "fp8_block" and system in SM100F:
        return "TRTLLM"
    return "CUTLASS"


def moe_backend_note(ks, backend: str) -> str:
    """The footer's words on a named MoE backend: per expert format measured on this device, the backend that runs it
    and whether AIConfigurator timed that backend (else the datasheet model prices the experts), and from which
    version where the tables were borrowed."""
    if not backend or not ks.moe:
        return ""
    parts = []
    for dt in sorted(ks.moe):
        be = trtllm_auto_moe(dt, ks.system) if backend == "AUTO" else backend
        done = dt in ks.moe_by.get(be, {})
        parts.append(f"{dt} {be}" + ("" if done else " (not measured: datasheet)"))
    lent = ks.versions.get(f"moe {backend}")
    return f"; MoE backend {backend}: " + ", ".join(parts) + (f" (tables of {lent})" if lent else "")
