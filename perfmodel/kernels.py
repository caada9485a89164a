"""Measured kernel tables: per-op times of the achievable mode from kernel measurements.

A kernel table holds measured times of one kind of kernel over a grid of shapes, on one device, for one
engine and version. Two sources are read through this one interface:

- NVIDIA AIConfigurator's measurements (the `aiconfigurator-core` wheel, Apache-2.0; install with
  `pip install "perfmodel[kernels]"`): GEMM, context and generation attention, fused MoE and custom
  all-reduce, per device (h100_sxm, h200_sxm, b200_sxm, ...) and engine version (vLLM, SGLang, TensorRT-LLM);
- `perfmodel measure`'s results.csv (its `gemm` rows, sizes `M=.. N=.. K=..`) from the user's own device.

How a table prices an op (docs/derivations.md, "Measured kernels"). For a measured shape x the ratio

    r(x) = t_measured(x) / t_ideal(x),   t_ideal = max(FLOPs / P, bytes / BW)       (the op's roofline time)

is >= 1 and varies slowly with the shape, so log r is interpolated multilinearly in log(shape) between the
measured points (held at the edge value outside them) and the op is priced

    t_op = max(r(x_op), 1) * t_ideal(op)

with P and BW the hardware spec's datasheet peak and bandwidth. r carries everything the kernel does
that the datasheet does not: tile and wave quantization, split-K, launch latency, a grouped GEMM's
tokens per expert, routing imbalance. max(r, 1) keeps the roofline a bound. An op no table covers
(a dtype, a device or an attention kind not measured) keeps the datasheet model: `source` says which.
"""
from __future__ import annotations

import csv
import dataclasses
import math
import os
from pathlib import Path

import numpy as np

from .errors import SpecError
from .interp import _grid, _interp
from .kernel_set import (  # noqa: F401 (re-exported: the tables' kinds, their ideal times)
    GDN_HEAD_DIM, MOE_DISTRIBUTION, _BYTES, _PEAK, KernelSet, _over_tokens, _ideal_gemm, _ideal_attn, _ideal_mla,
    _touched, _ideal_moe,
)
from .moe_backends import (  # noqa: F401 (re-exported: the backend names, kept where callers found them)
    HOPPER, SM100F, TRT_MOE_BACKENDS, _MXFP4, moe_backend_note, trtllm_auto_moe, trtllm_moe_backend, vllm_moe_backend,
)

# perfmodel hardware name -> AIConfigurator system directory (aiconfigurator_core/systems/data/<dir>)
SYSTEMS = {"h100-sxm": "h100_sxm", "h200": "h200_sxm", "b200": "b200_sxm", "b300": "b300_sxm", "gb200": "gb200",
           "gb300": "gb300", "a100-80gb-sxm": "a100_sxm", "l40s": "l40s", "h100-pcie": "h100_pcie", "l4": "l4"}
ENGINES = ("vllm", "sglang", "trtllm")


def aic_dir() -> Path | None:
    """The folder of AIConfigurator's measurements (PERFMODEL_AIC_DATA, else the installed aiconfigurator_core
    wheel's systems/data), or None without the extra. Finding it imports nothing."""
    env = os.environ.get("PERFMODEL_AIC_DATA")
    if env:
        return Path(env) if Path(env).is_dir() else None
    import importlib.util

    spec = importlib.util.find_spec("aiconfigurator_core")
    if spec is None or not spec.submodule_search_locations:
        return None
    d = Path(list(spec.submodule_search_locations)[0]) / "systems" / "data"
    return d if d.is_dir() else None


def _vkey(v: str) -> tuple:
    out = []
    for part in v.replace("rc", ".").replace("post", ".").replace("dev", ".").split("."):
        out.append(int(part) if part.isdigit() else -1)
    return tuple(out)


def measured_version(system: str, engine: str, version, root: Path | None = None) -> str:
    """`version` where AIConfigurator measured some kind of kernel of `engine` at exactly that version on `system` (an
    AIConfigurator system folder), else "" (without the extra too). `root`: aic_dir(), found once by a caller that
    asks for many rows (finding it is an import-system search, ~0.15 ms)."""
    root = aic_dir() if root is None else root
    if root is None or not isinstance(version, str) or not version:
        return ""
    key = (root, system, engine, version)
    if key not in _MEASURED:
        _MEASURED[key] = version if any(p.is_dir() for p in (root / system).glob(f"*/{engine}/{version}")) else ""
    return _MEASURED[key]


_MEASURED: dict = {}  # (data folder, system, engine, version) -> measured_version's answer


def pick_version(have: list[str], want: str) -> str | None:
    """The measured version for an engine at version `want`: the same, else the newest not newer, else the oldest."""
    if not have:
        return None
    if want in have:
        return want
    older = [v for v in have if _vkey(v) <= _vkey(want)]
    return max(older, key=_vkey) if older else min(have, key=_vkey)


# ---------------------------------------------------------------- loading
def _parquet(path: Path):
    try:
        import pandas as pd

        return pd.read_parquet(path)
    except ImportError as e:  # pyarrow comes with the extra
        raise SpecError("--kernels", None, f"reading {path.name} needs pyarrow: pip install \"perfmodel[kernels]\" "
                                           f"({e})") from None


def _table_dir(root: Path, kind: str, engine: str, version: str, need: str | None = None,
               exact: str = "") -> tuple[Path, str] | None:
    """The version folder of a kind of table for an engine: `exact` where that version was measured (the version a
    run used), else pick_version's for `version` (the profile's), among the folders that hold `need`."""
    d = root / kind / engine
    if not d.is_dir():
        return None
    have = [p.name for p in d.iterdir() if p.is_dir() and (need is None or (p / need).exists())]
    v = exact if exact and exact in have else pick_version(have, version)
    return (d / v, v) if v else None


# A block-scaled fp8 GEMM moves the bytes and does the FLOPs of a per-tensor one (plus one scale per 128 x 128
# block, 1/16384 more): at the memory-bound shapes (m <= 64 rows, n and k >= 1024) it cannot take several times
# the per-tensor kernel's time on the same device and engine. Over AIConfigurator 0.12.0's tables the median ratio
# is 0.62 to 1.02 for TensorRT-LLM and SGLang, and 3.5 (H100) to 29 (GB300) for vLLM 0.24's fp8_block tables
# (DeepGemm/CutlassFp8BlockScaledMMKernel, flat at 84-361 us whatever n from 2,048 to 16,384 at m = 64, k = 4,096):
# those time something else than the kernel, so they price nothing (KernelSet.rejected says so).
MAX_BLOCK_RATIO = 2.0
# An NVFP4 GEMM reads 9/32 of a bf16 GEMM's weight bytes: at the memory-bound shapes it is faster than the bf16
# kernel of the same device and engine (AIConfigurator 0.12.0: median 0.56x to 0.89x for vLLM and SGLang on B200,
# B300, GB200, GB300 and RTX PRO 6000). TensorRT-LLM 1.3.0rc20's nvfp4 tables take 1.23x to 1.31x its bf16 ones on
# the four Blackwell datacenter GPUs, flat at 20.6-23.5 us for m = 1-128 and n = 128-12,288 at k = 8,192: its
# collector (collector/trtllm/collect_gemm.py) never enters TensorRT-LLM's autotune(), so nvfp4_gemm runs its
# untuned fallback tactic (one 128 x 256 CUTLASS tile per CTA, no split-K), not the tactic a served model tunes.
# Such a table is capped, shape by shape, at the same engine's measured bf16 GEMM (an autotuned NVFP4 kernel reading
# 9/32 of the bytes is not slower than it: the other engines' are 0.56x to 0.89x); where it is faster (the
# compute-bound shapes, whose 128 x 256 tile is the tuned one's) it stands. KernelSet.rejected says so.
MAX_FP4_RATIO = 1.0


def block_ratio(block, tensor) -> float:
    """The median time ratio of one GEMM table to another (a block-scaled fp8 one to the per-tensor fp8 one, an
    nvfp4 one to the bf16 one; both grouped by (m, n, k), the fastest kernel per shape) over their common
    memory-bound shapes; nan where they share none."""
    idx = block.index.intersection(tensor.index)
    m, n, k = (idx.get_level_values(c) for c in ("m", "n", "k"))
    idx = idx[(m <= 64) & (n >= 1024) & (k >= 1024)]
    return float((block.loc[idx] / tensor.loc[idx]).median()) if len(idx) else math.nan


def _static_fp8(ks: KernelSet, root: Path, engine: str, version: str, g, m, k, ideal, exact: str = "") -> None:
    """The per-tensor fp8 GEMM of a checkpoint with static activation scales, as AIConfigurator derives it.

    AIConfigurator's fp8 GEMM rows time Linear.forward on a bf16 input whose fp8 weights carry no input scale, so
    the engine quantizes the input dynamically inside the timed call (collector/trtllm/collect_gemm.py: "the
    collected fp8 GEMM includes the compute-scale overhead. AIC derives fp8_static at query time by subtracting
    that overhead", PR ai-dynamo/aiconfigurator#1220). Its quantize tables time that overhead per (m, k):
    compute_scale = dynamic minus static quantization, scale_matrix = the static quantize kernel alone
    (collector/trtllm/collect_computescale.py). A static checkpoint (ModelOpt's per-tensor FP8, the kind AIC infers
    for a per-tensor checkpoint not marked dynamic: sdk/models/helpers.py) runs

        t_static(m, n, k) = t_fp8(m, n, k) - compute_scale(m, k)               (fp8_static)
        t_static_lp(m, n, k) = t_static(m, n, k) - scale_matrix(m, k)          (input already fp8: o_proj, down_proj)

    each floored at the ideal time, as AIC's GEMM operator does (aiconfigurator-core operators/gemm.rs; the
    low-precision inputs are sdk/models/llama.py's proj_gemm and ffn2_gemm). In TensorRT-LLM's served Llama the
    attention output reaches o_proj in fp8 with an fp8 KV cache, and GatedMLP fuses SwiGLU with the fp8 quantize
    (tensorrt_llm/_torch/models/modeling_llama.py, modules/gated_mlp.py). Only TensorRT-LLM's tables are derived
    so: vLLM's collector builds its fp8 layer with Fp8Config(activation_scheme="static")
    (collector/vllm/collect_gemm.py), so its table already times the static path, and SGLang's compute_scale
    table is 0. No table, nothing derived."""
    got = _table_dir(root, "quantize", engine, version, "computescale_perf.parquet", exact=exact)
    if not got or not (got[0] / "scale_matrix_perf.parquet").exists():
        return
    cut = 0.0
    for name, fname in (("fp8_static", "computescale_perf.parquet"), ("fp8_static_lp", "scale_matrix_perf.parquet")):
        q = _parquet(got[0] / fname)
        q = q[q["quant_dtype"] == "fp8"]  # _grid takes a cell's median
        if q.empty:
            return
        ax, v = _grid(q, ["m", "k"], np.maximum(q["latency"].to_numpy(float), 0.0) * 1e-3)
        cut = cut + _interp(ax, v, [m, k])  # linear in the time, in log(m) and log(k); held at the grid's edge
        t = np.maximum(g["latency"].to_numpy(float) * 1e-3 - cut, ideal)
        ks.gemm[name] = _grid(g, ["m", "n", "k"], np.log(t / ideal))


def _load_aic(hw, system: str, engine: str, version: str, exact: str = "") -> KernelSet:
    root = aic_dir() / system
    ks = KernelSet(source=f"AIConfigurator {_aic_version()} {system} {engine} {version}"
                          + (f" ({exact} where measured)" if exact else ""), system=system)
    got = _table_dir(root, "gemm", engine, version, exact=exact)
    if got:
        df = _parquet(got[0] / "gemm_perf.parquet")
        ks.versions["gemm"] = got[1]
        # the fastest kernel the engine ships for each shape (vLLM picks per shape among its kernels)
        fastest = {dt: g.groupby(["m", "n", "k"])["latency"].min() for dt, g in df.groupby("gemm_dtype")}
        for dt, lat in fastest.items():
            if dt not in _BYTES or _PEAK[dt] not in hw.peak_flops:
                continue
            if dt == "fp8_block" and "fp8" in fastest:
                r = block_ratio(lat, fastest["fp8"])
                if r > MAX_BLOCK_RATIO:
                    ks.rejected.append(f"gemm fp8_block ({r:.3g}x the per-tensor fp8 kernels' time at the same shapes)")
                    continue
            if dt == "nvfp4" and "bfloat16" in fastest:
                r = block_ratio(lat, fastest["bfloat16"])
                if r > MAX_FP4_RATIO:  # an untuned table: each shape at most the same engine's bf16 kernel's time
                    bf = fastest["bfloat16"].reindex(lat.index)
                    lat = lat.where(~(bf < lat), bf)
                    ks.rejected.append(f"gemm nvfp4 above the bf16 kernels' time ({r:.3g}x at the memory-bound "
                                       "shapes): capped at it")
            g = lat.reset_index()
            m, n, k = (g[c].to_numpy(float) for c in "mnk")
            ideal = _ideal_gemm(hw, dt, m, n, k)
            r = g["latency"].to_numpy(float) * 1e-3 / ideal
            ks.gemm[dt] = _grid(g, ["m", "n", "k"], np.log(r))
            if dt == "fp8" and engine == "trtllm":
                _static_fp8(ks, root, engine, version, g, m, k, ideal, exact)
    got = _table_dir(root, "attention", engine, version, exact=exact)
    if got:
        ks.versions["attention"] = got[1]
        for phase, fname, tgt in (("generation", "generation_attention_perf.parquet", ks.gen_attn),
                                  ("context", "context_attention_perf.parquet", ks.ctx_attn)):
            if not (got[0] / fname).exists():
                continue
            df = _parquet(got[0] / fname)
            df = df[(df["window_size"] == 0) & (df["attn_dtype"].isin(["bfloat16", "float16"]))]
            for (kvd, nq, nkv, hd), g in df.groupby(["kv_cache_dtype", "num_heads", "num_key_value_heads", "head_dim"]):
                if kvd not in _BYTES:
                    continue
                L = (g["isl"] + g["step"]).to_numpy(float) if phase == "generation" else g["isl"].to_numpy(float)
                g = g.assign(L=L)
                B = g["batch_size"].to_numpy(float)
                r = g["latency"].to_numpy(float) * 1e-3 / _ideal_attn(hw, phase, _BYTES[kvd], B, L, nq, nkv, hd)
                tgt.setdefault(kvd, {})[(int(nq), int(nkv), int(hd))] = _grid(g, ["batch_size", "L"], np.log(r))
    for phase, fname, tgt in (("generation", "generation_mla_perf.parquet", ks.mla_gen),
                              ("context", "context_mla_perf.parquet", ks.mla_ctx)):
        got = _table_dir(root, "mla", engine, version, fname, exact=exact)
        if not got:
            continue
        ks.versions["mla"] = got[1]
        df = _parquet(got[0] / fname)
        df = df[df["mla_dtype"].isin(["bfloat16", "float16"])]
        for kvd, g in df.groupby("kv_cache_dtype"):
            if kvd not in _BYTES:
                continue
            L = (g["isl"] + g["step"]).to_numpy(float) if phase == "generation" else g["isl"].to_numpy(float)
            g = g.assign(L=L)
            h, B = g["num_heads"].to_numpy(float), g["batch_size"].to_numpy(float)
            r = g["latency"].to_numpy(float) * 1e-3 / _ideal_mla(hw, phase, _BYTES[kvd], h, B, L)
            tgt[kvd] = _grid(g, ["num_heads", "batch_size", "L"], np.log(r))
    got = _table_dir(root, "moe", engine, version, "moe_perf.parquet", exact=exact)
    if got:
        ks.versions["moe"] = got[1]
        _load_moe(ks, hw, _parquet(got[0] / "moe_perf.parquet"), engine, system)
        if engine == "vllm":
            _borrow_vllm_marlin(ks, hw, root, got[1], system)
            _borrow_flashinfer_w4a8(ks, hw, root, system)
    got = _table_dir(root, "linear_attention", engine, version, "gdn_perf.parquet", exact=exact)
    if got:  # Gated DeltaNet: the conv (causal_conv1d_fn / _update) and the delta rule (chunked / recurrent)
        ks.versions["gdn"] = got[1]
        df = _parquet(got[0] / "gdn_perf.parquet")
        df = df[(df["head_k_dim"] == GDN_HEAD_DIM) & (df["head_v_dim"] == GDN_HEAD_DIM)]
        part = np.where(df["kernel_source"].str.startswith("causal_conv1d"), "conv", "core")
        for (phase, pt, hk, hv), g in df.assign(part=part).groupby(["phase", "part", "num_k_heads", "num_v_heads"]):
            axes = ["batch_size"] if phase == "generation" else ["batch_size", "seq_len"]
            g = g.groupby(axes, as_index=False)["latency"].min()  # the fastest kernel the engine ships per shape
            ks.gdn.setdefault((phase, pt), {})[(int(hk), int(hv))] = _grid(g, axes, np.log(g["latency"] * 1e-3))
    got = _table_dir(root, "comm", engine, version, "custom_allreduce_perf.parquet", exact=exact)
    if got:
        ks.versions["allreduce"] = got[1]
        df = _parquet(got[0] / "custom_allreduce_perf.parquet")
        if "backend" in df:  # SGLang measures eager and CUDA-graph launches: serving replays graphs
            graph = df["backend"].astype(str).str.contains("graph")
            df = df[graph] if graph.any() else df
        df = df[df["allreduce_dtype"].isin(["bfloat16", "float16"])]
        for p, g in df.groupby("num_gpus"):  # message_size counts 16-bit elements (the collector's input is a
            # [size / 4096, 4096] tensor: collector/network/collect_all_reduce.py, get_input_shape_and_comm_size)
            g = g.groupby("message_size", as_index=False)["latency"].min().sort_values("message_size")
            ks.allreduce[int(p)] = (2.0 * g["message_size"].to_numpy(float), g["latency"].to_numpy(float) * 1e-3)
    _load_alltoall(ks, root, engine, version, exact)
    if engine == "trtllm":
        _load_nvlink_alltoall(ks, root, version, exact)
        if not ks.alltoall_ep and system in NVLINK_A2A_BORROWED:  # the same NVLink fabric, measured on its sibling
            _load_nvlink_alltoall(ks, root.parent / NVLINK_A2A_BORROWED[system], version, exact)
            if ks.alltoall_ep:
                ks.versions["alltoall_ep"] += f" (borrowed from {NVLINK_A2A_BORROWED[system]})"
    return ks


# An NVFP4 MoE kernel reads 9/32 of a bf16 one's expert weights: at the memory-bound token counts (<= 64 tokens)
# every tuned one AIConfigurator 0.12.0 timed takes 0.38x to 0.65x its engine's bf16 MoE kernel on B200, B300, GB200,
# GB300 and RTX PRO 6000 (vLLM's FlashInfer CUTLASS and trtllm-gen kernels, SGLang's, TensorRT-LLM's trtllm-gen
# min-latency kernels 0.43x), the median over the shapes both measured. TensorRT-LLM 1.3.0rc20's CUTLASS nvfp4 MoE
# tables take 0.89x to 1.00x: its collector never enters autotune(), and CutlassFusedMoE runs its MoE runner's
# untuned default tactic (the same defect as its nvfp4 GEMM tables, MAX_FP4_RATIO). A source whose nvfp4 MoE rows
# take more than MAX_FP4_MOE_RATIO of its engine's bf16 MoE rows prices nothing: the datasheet model prices what it
# would have (the footer says "not used as measured").
MAX_FP4_MOE_RATIO = 0.8
FP4_MOE_TOKENS = 64


def _untuned_fp4_moe(df, keys: list) -> dict:
    """kernel_source -> its nvfp4 MoE rows' median time ratio to the same table's bf16 MoE rows (the fastest bf16
    kernel per shape and token count) at <= FP4_MOE_TOKENS tokens, for the sources above MAX_FP4_MOE_RATIO."""
    shape = keys[1:] + ["num_tokens"]
    small = df[df["num_tokens"] <= FP4_MOE_TOKENS]
    bf = small[small["moe_dtype"] == "bfloat16"].groupby(shape)["latency"].min()
    out = {}
    for src, g in small[small["moe_dtype"] == "nvfp4"].groupby("kernel_source"):
        r = (g.groupby(shape)["latency"].min() / bf).dropna()
        if len(r) and float(r.median()) > MAX_FP4_MOE_RATIO:
            out[src] = float(r.median())
    return out


_MOE_KEYS = ["moe_dtype", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size"]


def _load_moe(ks: KernelSet, hw, df, engine: str, system: str, only: str | None = None) -> None:
    """The fused MoE tables of one moe_perf.parquet: `moe` the fastest kernel per shape and token count, `moe_by`
    each named backend's own (moe_backends: TensorRT-LLM's by every label, vLLM's Marlin). `only`: read that named
    backend's rows and nothing else (a table lent by another version, _borrow_vllm_marlin)."""
    df = df[df["distribution"] == MOE_DISTRIBUTION]
    named = engine in ("trtllm", "vllm") and "kernel_source" in df
    if named and engine == "trtllm":  # relu2 experts (no gate, "moe_torch_flow_nongated"): no model of the catalog
        df = df[df["kernel_source"] != "moe_torch_flow_nongated"]  # runs that kernel; an untuned fp4 one prices nothing
        for src, ratio in _untuned_fp4_moe(df, _MOE_KEYS).items():
            df = df[~((df["kernel_source"] == src) & (df["moe_dtype"] == "nvfp4"))]
            ks.rejected.append(f"moe nvfp4 {trtllm_moe_backend(src, 'nvfp4', system)} ({ratio:.2f}x the bf16 MoE "
                               f"kernels' time at <= {FP4_MOE_TOKENS} tokens)")
    for (dt, h, inter, topk, E, tp, ep), g in df.groupby(_MOE_KEYS):
        if dt not in _BYTES or _PEAK[dt] not in hw.peak_flops:
            continue
        shape = (int(h), int(inter), int(topk), int(E), int(tp), int(ep))
        label = (lambda src: trtllm_moe_backend(src, dt, system)) if engine == "trtllm" else vllm_moe_backend
        by = g["kernel_source"].map(label) if named else None
        own = named and by.notna().any()  # a backend's own rows here (vLLM's are Marlin's or none)
        parts = ([] if only else [(None, g)]) + (list(g.groupby(by)) if own else [])  # None labels: no group
        for be, s in parts:  # the fastest kernel per token count (None), and each backend's own (its labels')
            if only and be != only:
                continue
            s = s.groupby("num_tokens", as_index=False)["latency"].min()
            n = s["num_tokens"].to_numpy(float)
            r = s["latency"].to_numpy(float) * 1e-3 / _ideal_moe(hw, dt, n, h, inter, topk, E, tp, ep)
            (ks.moe if be is None else ks.moe_by.setdefault(be, {})).setdefault(dt, {})[shape] = \
                _grid(s, ["num_tokens"], np.log(r))


def _borrow_vllm_marlin(ks: KernelSet, hw, root: Path, version: str, system: str) -> None:
    """vLLM's Marlin MoE kernels where the version read timed none on this device: from the nearest version that did
    (AIConfigurator 0.12.0 timed MarlinExperts only in its 0.24.0 tables; its 0.19.0 "vllm_marlin_int4_moe" rows ran
    the Triton path, moe_backends), marked in `versions` as lent. The Marlin MoE kernel is the one the run names
    (VLLM_MXFP4_USE_MARLIN=1); that it did not change between those versions is assumed, and the footer says whose
    tables priced it."""
    if "MARLIN" in ks.moe_by:
        return
    d = root / "moe" / "vllm"
    have = sorted((p.name for p in d.iterdir() if p.is_dir() and p.name != version and (p / "moe_perf.parquet").exists()),
                  key=lambda v: ([abs(a - b) for a, b in zip(_vkey(v), _vkey(version))], v))  # nearest, by part
    for v in have:
        df = _parquet(d / v / "moe_perf.parquet")
        if "kernel_source" in df:  # only the Marlin rows: a table's other shapes are not read again
            df = df[df["kernel_source"].map(vllm_moe_backend) == "MARLIN"]
        _load_moe(ks, hw, df, "vllm", system, only="MARLIN")
        if "MARLIN" in ks.moe_by:
            ks.versions["moe MARLIN"] = f"{v}, lent: {version} timed no Marlin MoE kernel"
            return


# vLLM and SGLang run MXFP4 x MXFP8 experts through the same FlashInfer trtllm-gen kernel (trtllm_fp4_block_scale_moe;
# vLLM with VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1). AIConfigurator timed it at gpt-oss's shape in SGLang's tables
# only; vLLM's time the kernel's MXFP4 x BF16 sibling there, within a median 1.6% of SGLang's timing of that sibling
# (648 points per system on B200, B300, GB200 and GB300, p10-p90 0.96x-1.07x: bench/flashinfer_lend.py). So a vLLM
# table takes the SGLang shapes it lacks of that kernel, its own shapes kept, and the footer says whose they are.
FLASHINFER_W4A8 = ("w4a8_mxfp4_mxfp8", "sglang_flashinfer_trtllm_moe")


def _borrow_flashinfer_w4a8(ks: KernelSet, hw, root: Path, system: str) -> None:
    dt, src = FLASHINFER_W4A8
    d = root / "moe" / "sglang"
    if not d.is_dir():
        return
    for v in sorted((p.name for p in d.iterdir() if (p / "moe_perf.parquet").exists()), key=_vkey, reverse=True):
        df = _parquet(d / v / "moe_perf.parquet")
        if "kernel_source" not in df:
            continue
        df = df[(df["kernel_source"] == src) & (df["moe_dtype"] == dt)]
        if df.empty:  # the newest SGLang table that timed this kernel lends
            continue
        own = dict(ks.moe.get(dt, {}))
        _load_moe(ks, hw, df, "sglang", system)
        lent = len(ks.moe.get(dt, {})) - len(own)
        ks.moe.get(dt, {}).update(own)
        if lent > 0:
            ks.versions[f"moe {dt}"] = f"{lent} shapes lent by sglang {v}: the same FlashInfer kernel"
        return


# Where AIConfigurator has no NVLink all-to-all table, the same fifth-generation NVLink switch fabric (900 GB/s a
# direction per GPU: hardware/gb200.yaml, gb300.yaml, b200.yaml, b300.yaml link_bandwidth) lends GB200's: the kernel is
# the same. TensorRT-LLM tech blog 18 (NVIDIA/TensorRT-LLM PR #12195, 2026-03-13): NVLinkOneSided is "designed for
# NVLink-connected systems (DGX B200, GB200 NVL72, etc.)" and "the default communication strategy within a single
# NVLink domain" (8 GPUs on a DGX B200, 72 on an NVL72 rack). Hopper (NVLink 4, half the bandwidth, no measurement of
# the kernel) keeps DeepEP's (docs/achievable.md). Borrowed, and marked so.
NVLINK_A2A_BORROWED = {"gb300": "gb200", "b200_sxm": "gb200", "b300_sxm": "gb200"}


_NVLINK_A2A = ("NVLinkOneSided", "NVLinkTwoSided")  # in order of preference: the factory's default first


def _load_nvlink_alltoall(ks: KernelSet, root: Path, version: str, exact: str = "") -> None:
    """TensorRT-LLM's NVLink dispatch and combine per payload format and EP size: the one-sided kernel where it is
    measured for that format, else the two-sided one (its dispatch with the prepare step it runs first). Its factory
    (tensorrt_llm/_torch/modules/fused_moe/communication/communication_factory.py, create_strategy) runs, under
    attention DP without MoE TP, NVLinkOneSided within one NVLink domain (an HGX B200's 8 GPUs or a GB200/GB300
    NVL72 rack: NVLINK_A2A_BORROWED), DeepEP only where it is not available; AIConfigurator measured the NVLink
    kernels (latency in ms) on GB200 only."""
    got = _table_dir(root, "comm", "trtllm", version, "trtllm_alltoall_perf.parquet", exact=exact)
    if not got:
        return
    df = _parquet(got[0] / "trtllm_alltoall_perf.parquet")
    cols = ["moe_dtype", "hidden_size", "topk", "num_experts", "moe_ep_size", "num_tokens"]
    for dt in sorted(df["moe_dtype"].unique()):
        for src in _NVLINK_A2A:
            g = df[(df["kernel_source"] == src) & (df["moe_dtype"] == dt)]
            if g.empty:
                continue
            lat = g.groupby(["op_name"] + cols)["latency"].min()  # ms
            parts = {"dispatch": ["alltoall_dispatch"] + (["alltoall_prepare"] if src == "NVLinkTwoSided" else []),
                     "combine": ["alltoall_combine"]}
            for phase, ops in parts.items():
                if not all(o in lat.index.get_level_values(0) for o in ops):
                    continue
                tot = sum(lat.loc[o] for o in ops).dropna()  # the shapes every part measured
                for (d, h, k, E, ep), s in tot.groupby(level=[0, 1, 2, 3, 4]):
                    key = (phase, str(d), int(h), int(k), int(E), int(ep))
                    s = s[s > 0]
                    if key not in ks.alltoall_ep and len(s):
                        x = s.index.get_level_values("num_tokens").to_numpy(float)
                        ks.alltoall_ep[key] = (np.sort(x), s.to_numpy(float)[np.argsort(x)] * 1e-3)
            break
    if ks.alltoall_ep:
        ks.versions["alltoall_ep"] = got[1]


def _load_alltoall(ks: KernelSet, root: Path, engine: str, version: str, exact: str = "") -> None:
    """DeepEP's dispatch and combine as the engine runs them: vLLM and TensorRT-LLM tables (moe_a2a_perf: latency
    in us per phase and backend), SGLang's (wideep_deepep_ll_perf / _normal_perf: us per phase)."""
    rows = []  # (phase, hidden, topk, E, nodes, tokens, seconds)
    got = _table_dir(root, "comm", engine, version, "moe_a2a_perf.parquet", exact=exact)
    if got:
        df = _parquet(got[0] / "moe_a2a_perf.parquet")
        if "comm_dtype" in df:  # the 16-bit payload (fp8/nvfp4 dispatch are options, not defaults)
            df = df[df["comm_dtype"].isin(["default", "bfloat16"])]
        for r in df.itertuples():
            rows.append((r.phase, r.hidden_size, r.topk, r.num_experts, r.node_num, r.num_tokens, r.latency * 1e-6))
        ks.versions["alltoall"] = got[1]
    else:
        for need, cols in (("wideep_deepep_ll_perf.parquet", ("dispatch_avg_t_us", "combine_avg_t_us")),
                           ("wideep_deepep_normal_perf.parquet", ("dispatch_transmit_us", "combine_transmit_us"))):
            got = _table_dir(root, "comm", engine, version, need, exact=exact)
            if not got:
                continue
            ks.versions["alltoall"] = got[1]
            df = _parquet(got[0] / need)
            for r in df.itertuples():
                for phase, col in zip(("dispatch", "combine"), cols):
                    rows.append((phase, r.hidden_size, r.num_topk, r.num_experts, r.node_num, r.num_token,
                                 getattr(r, col) * 1e-6))
    by: dict = {}
    for ph, h, k, E, nodes, tok, sec in rows:
        if sec > 0:
            by.setdefault((ph, int(h), int(k), int(E), int(nodes)), {}).setdefault(float(tok), []).append(sec)
    for key, pts in by.items():  # the faster kernel (LL or HT) at each batch, as an engine picks per phase
        x = np.array(sorted(pts))
        ks.alltoall[key] = (x, np.array([min(pts[v]) for v in x]))


def _aic_version() -> str:
    try:
        from importlib.metadata import version

        return version("aiconfigurator-core")
    except Exception:  # noqa: BLE001  (a data folder given by PERFMODEL_AIC_DATA has no package metadata)
        return "(data folder)"


def _load_measure(hw, path: Path) -> KernelSet:
    """`perfmodel measure`'s results.csv: its gemm rows (sizes 'M=.. N=.. K=..', dtype bf16/fp16/fp8)."""
    ks = KernelSet(source=str(path))
    rows = {}
    with open(path, newline="") as f:
        for rec in csv.DictReader(f):
            if rec.get("family") not in ("gemm", "sweep", "skinny") or not rec.get("median_s"):
                continue
            sizes = dict(kv.split("=") for kv in rec.get("sizes", "").split() if "=" in kv)
            if not {"M", "N", "K"} <= sizes.keys():
                continue
            dt = {"bf16": "bfloat16", "fp16": "float16", "fp8": "fp8"}.get(rec.get("dtype", ""))
            if dt is None or _PEAK[dt] not in hw.peak_flops:
                continue
            rows.setdefault(dt, []).append((float(sizes["M"]), float(sizes["N"]), float(sizes["K"]),
                                            float(rec["median_s"])))
    import pandas as pd

    for dt, rs in rows.items():
        g = pd.DataFrame(rs, columns=["m", "n", "k", "t"])
        r = g["t"].to_numpy() / _ideal_gemm(hw, dt, g["m"].to_numpy(), g["n"].to_numpy(), g["k"].to_numpy())
        ks.gemm[dt] = _grid(g, ["m", "n", "k"], np.log(r))
    if not ks.gemm:
        raise SpecError(str(path), "gemm", "has no GEMM rows (family gemm, sizes M=.. N=.. K=..) for this device's dtypes")
    return ks


_CACHE: dict = {}
FORMAT = 22  # of the disk cache's entries: bump when KernelSet or the grids change


def cache_dir() -> Path:
    """Where built tables are kept between runs: PERFMODEL_CACHE, else $XDG_CACHE_HOME/perfmodel, else ~/.cache."""
    env = os.environ.get("PERFMODEL_CACHE")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "perfmodel"


def _disk(key: tuple, build):
    """A KernelSet built once per key and kept on disk (a pickle this module wrote, replaced atomically): reading
    AIConfigurator's Parquet files and building the grids takes ~2 s, a cached set ~0.1 s. The key holds
    everything the set depends on (the data files' sizes and times, the spec's peaks and bandwidth)."""
    import hashlib
    import pickle

    name = hashlib.sha256(repr((FORMAT, key)).encode()).hexdigest()[:24]
    f = cache_dir() / f"kernels-{name}.pkl"
    try:
        with open(f, "rb") as fh:
            ks = pickle.load(fh)
        if isinstance(ks, KernelSet) and all(hasattr(ks, f.name) for f in dataclasses.fields(KernelSet)):
            return ks  # (an entry pickled before a field was added lacks it: rebuilt, whatever FORMAT says)
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, IndexError, TypeError):
        pass  # absent, unreadable or from another version: rebuild it
    ks = build()
    try:
        f.parent.mkdir(parents=True, exist_ok=True)
        tmp = f.with_name(f"{f.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as fh:
            pickle.dump(ks, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, f)
    except OSError:  # a read-only home: work without the cache
        pass
    return ks


def _stamp(root: Path) -> tuple:
    """(name, size, mtime) of every table file under a system's folder: a changed wheel changes the key."""
    return tuple(sorted((str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns)
                        for p in root.rglob("*.parquet")))


def _cached(hw_key, hw, engine, version, path, exact: str = ""):
    """One load per (device terms, engine, version, file): the ratios depend on the spec's peaks and bandwidth."""
    terms = (hw.memory_bandwidth, tuple(sorted(hw.peak_flops.items())))
    if path:
        st = Path(path).stat()
        key = ("measure", str(Path(path).resolve()), st.st_size, st.st_mtime_ns, terms)
        build = lambda: _load_measure(hw, Path(path))  # noqa: E731
    else:
        root = aic_dir() / SYSTEMS[hw_key]
        key = ("aic", _aic_version(), SYSTEMS[hw_key], engine, version, exact, _stamp(root), terms)
        build = lambda: _load_aic(hw, SYSTEMS[hw_key], engine, version, exact)  # noqa: E731
    if key not in _CACHE:
        if len(_CACHE) > 32:
            _CACHE.clear()
        _CACHE[key] = _disk(key, build)
    return _CACHE[key]


def load(hw, engine: str | None, version: str | None, path: str | None = None, exact: str = "") -> KernelSet | None:
    """The measured tables for a device: from `path` (a results.csv of `perfmodel measure`), else from
    AIConfigurator's collection for (engine, version). None where nothing is measured for this device,
    or the extra is not installed."""
    if path:
        from .fileio import user_path

        p = user_path(path, "impl.kernel_tables")
        if p.is_dir():
            p = p / "results.csv"
        if not p.is_file():
            raise SpecError("--kernels", None, f"{path}: no such results.csv (a `perfmodel measure` output folder or "
                                               "its results.csv)")
        return _cached(None, hw, None, None, str(p))
    key = (hw.key or "").removesuffix(".yaml")
    if engine not in ENGINES or key not in SYSTEMS or aic_dir() is None:
        return None
    if not (aic_dir() / SYSTEMS[key]).is_dir():
        return None
    return _cached(key, hw, engine, version, None, exact)
