"""Measured validation: microbenchmarks (CUDA via PyTorch, CPU via numpy/BLAS), calibration of a
hardware spec for the machine, and the engine's prediction error on cases it was not calibrated on.

    results = run_suite(backend("cpu"), "quick")   # time every case (perfmodel.measure.suite)
    text, hw, eff = calibrate(results)             # the measured hardware YAML and its Hardware
    table = validate(results, hw)                  # predicted vs measured per validation case

Modules: cases (what each case computes and the engine ops that predict it), timing (warm-up,
repeats, median; injectable clock), llama (the decode step, backend-neutral), cpu and cuda (the
backends; cuda imports torch lazily), suite (sizes, running, files), calibrate, validate.
"""
from __future__ import annotations

from .calibrate import calibrate
from .suite import load, resolve as _resolve, run_suite, write
from .validate import as_json, by_family, validate


def validation(results, hardware=None, overhead: bool = True, passes: bool = True, kv: bool = True) -> dict:
    """Predicted vs measured for every validation case: columns case, family, predicted_s,
    measured_s, error (= predicted / measured - 1). overhead / passes / kv: use the spec's
    kernel_overhead / gemm_weight_passes and attention_kv_passes / attention_kv_passes."""
    data, hw = _resolve(results, hardware)
    return validate(data, hw, overhead, passes, kv)


def breakdown(results, case: str, hardware=None) -> dict:
    """Per op of one decode case: measured (the CPU's op profile) vs the engine's time."""
    from .validate import op_breakdown

    data, hw = _resolve(results, hardware)
    return op_breakdown(data, hw, case)


def backend(device: str = "auto"):
    """A backend for 'cpu', 'cuda' or 'auto' (CUDA when torch sees a GPU, else the CPU)."""
    from . import cuda

    if device == "auto":
        device = "cuda" if cuda.available()[0] else "cpu"
    if device == "cuda":
        return cuda.CUDABackend()
    if device == "cpu":
        from .cpu import CPUBackend

        return CPUBackend()
    raise ValueError(f"device must be cuda, cpu or auto, got {device!r}")


__all__ = ["as_json", "backend", "breakdown", "by_family", "calibrate", "load", "run_suite", "validate", "validation",
           "write"]
