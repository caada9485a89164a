"""Time one decode evaluation through the peer calculators llm-analysis and genz-llm.

This script runs INSIDE the benchmark's own virtualenv (bench/.venv-peers, made by
bench/run_bench.sh from bench/requirements.txt); perfmodel is not importable there and is not
needed. bench/bench_speed.py writes a JSON spec to our stdin and reads a JSON report from our
stdout:

    spec   = {"configs": [{"model": "llama-2-13b", "dims": {...perfmodel catalog fields...},
                           "hardware": "a100-80gb-sxm", "batch": 8, "context": 1024}, ...],
              "repeats": {"llm-analysis": 200, "genz-llm": 7},
              "warmup": {"llm-analysis": 20, "genz-llm": 2}, "import_runs": 5}
    report = {"python": ..., "packages": {...}, "import": {...}, "results": [...], "errors": {...}}

For each config and each peer it times two calls, "public" and "lean" (see VARIANTS), each the
median wall time of `repeats` calls after `warmup` untimed calls, and records what the call
returned (decode latency, throughput, weight and KV bytes, fit) so the driver can show that the
three tools compute the same kind of thing. A peer that refuses a config (both refuse batches whose
KV cache does not fit in device memory) gets an "error" for it, and the run goes on.

    bench/.venv-peers/bin/python bench/peers.py < spec.json > report.json
"""
from __future__ import annotations

import contextlib
import json
import logging
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

# What each timed call is. The "public" call is the entry point a user of the peer calls; the
# "lean" call does only the decode part of it through the same package's own methods (fewer
# things computed, so it is faster: ratios against it are the conservative ones).
VARIANTS = {
    "llm-analysis": {
        "public": "LLMAnalysis.inference(batch_size_per_gpu=B, seq_len=S-1, num_tokens_to_generate=1): "
                  "prefill of S-1 tokens, then one decode step with a KV cache of S tokens, memory, max batch, "
                  "summary dict",
        "lean": "the decode half of LLMAnalysis.inference() through its own methods: get_latency_fwd(B, 1) + "
                "2*KV/bandwidth, weight memory, KV memory at S, decode activation memory",
    },
    "genz-llm": {
        "public": "GenZ.decode_moddeling(model, batch_size=B, input_tokens=S, output_tokens=0, Bb=1, bits='bf16'): "
                  "a memory-check pass and a latency pass (each writes and reads the op list as CSV), "
                  "then the runtime breakdown",
        "lean": "one latency pass: create_full_decode_model + get_model_df + get_summary_table "
                "(latency, weights, KV cache)",
    },
}

# perfmodel hardware catalog name -> the peer's own device entry (its numbers, not ours).
LLM_ANALYSIS_GPU = {"a100-80gb-sxm": "a100-sxm-80gb", "h100-sxm": "h100-sxm-80gb"}
GENZ_SYSTEM = {"a100-80gb-sxm": "A100_80GB_GPU", "h100-sxm": "H100_GPU"}
# perfmodel model catalog name -> genz-llm's built-in model (same Llama-2 dimensions).
GENZ_MODEL = {"llama-2-7b": "llama2_7b", "llama-2-13b": "llama2_13b"}

# Each timed call's own output goes to stderr, never into the JSON on stdout.
_REAL_STDOUT = sys.stdout


def _median_time(fn, repeats: int, warmup: int) -> dict:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return {"s_per_eval": statistics.median(times), "min_s": min(times), "max_s": max(times), "repeats": repeats,
            "warmup": warmup}


def _import_time(module: str, runs: int) -> dict:
    """Whole-process wall time of `python -c 'import X'` in a fresh interpreter (median of runs),
    and the same minus an empty interpreter (`python -c pass`)."""

    def wall(code: str) -> float:
        ts = []
        for i in range(runs + 1):  # the first run warms the OS file cache and is not counted
            t0 = time.perf_counter()
            p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
            dt = time.perf_counter() - t0
            if p.returncode != 0:
                raise RuntimeError(f"`python -c {code!r}` failed: {p.stderr.strip().splitlines()[-1:]}")
            if i:
                ts.append(dt)
        return statistics.median(ts)

    base = wall("pass")
    full = wall(f"import {module}")
    return {"module": module, "process_wall_s": full, "empty_interpreter_s": base, "import_s": full - base,
            "runs": runs}


# ---------------------------------------------------------------- llm-analysis
def _llm_analysis_model(name: str, dims: dict):
    """llm-analysis's ModelConfig with perfmodel's catalog dimensions.

    llm-analysis models a two-matrix MLP (2*D*ffn weights). A gated (SwiGLU) MLP has 3*D*F, so
    ffn_embed_dim = 3F/2 gives the same weight bytes; expansion_ratio is passed so that its
    "ffn divisible by hidden" check does not reject 3F/2. (Its MLP FLOPs are 16*B*T*D^2 whatever
    ffn is.) Head dim is D/N in llm-analysis, which is 128 for Llama-2.
    """
    from llm_analysis.config import ModelConfig

    D, F = int(dims["d_model"]), int(dims["d_ff"])
    ffn = F * 3 // 2 if dims.get("mlp") == "gated" else F
    return ModelConfig(name=f"{name} (perfmodel catalog dimensions)", num_layers=int(dims["n_layers"]),
                       n_head=int(dims["n_heads"]), hidden_dim=D, vocab_size=int(dims["vocab_size"]),
                       max_seq_len=int(dims["max_context"]), num_key_value_heads=int(dims["n_kv_heads"]),
                       ffn_embed_dim=ffn, expansion_ratio=ffn / D, model_type="llama")


def run_llm_analysis(configs, repeats, warmup, import_runs):
    out = {"import": _import_time("llm_analysis.analysis", import_runs), "results": []}
    from llm_analysis.analysis import DSZeRO, LLMAnalysis
    from llm_analysis.config import get_dtype_config_by_name, get_gpu_config_by_name
    from llm_analysis.logger import logger

    logger.setLevel(logging.ERROR)  # silence its per-call INFO/WARNING lines (a sweep would too)
    bf16 = 2  # bytes for KV cache and layernorm activations

    for c in configs:
        B, S = int(c["batch"]), int(c["context"])
        base = {"peer": "llm-analysis", "model": c["model"], "hardware": c["hardware"], "batch": B, "context": S}
        gpu_name = LLM_ANALYSIS_GPU.get(c["hardware"])
        if gpu_name is None:
            for v in ("public", "lean"):
                out["results"].append({**base, "variant": v, "error": f"no llm-analysis GPU for {c['hardware']}"})
            continue
        gpu = get_gpu_config_by_name(gpu_name)
        an = LLMAnalysis(_llm_analysis_model(c["model"], c["dims"]), gpu, get_dtype_config_by_name("w16a16e16"))
        capacity = gpu.mem_per_GPU_in_GB * 1024**3  # llm-analysis's own reading of "80 GB"
        base["peer_device"], base["peer_model"] = gpu_name, an.model_config.name

        def public():
            r = an.inference(batch_size_per_gpu=B, seq_len=S - 1, num_tokens_to_generate=1,
                             kv_cache_dtype_bytes=bf16, layernorm_dtype_bytes=bf16)
            mem = r["weight_memory_per_gpu"] + r["kv_cache_memory_per_gpu"] + r["decode_activation_memory_per_gpu"]
            return {"latency_s": r["decode_latency"], "throughput_tok_s": r["decode_tokens_per_sec"],
                    "weight_bytes": r["weight_memory_per_gpu"], "kv_cache_bytes": r["kv_cache_memory_per_gpu"],
                    "memory_bytes": mem, "fits": True}  # inference() asserts when it does not fit

        def lean():
            L = an.model_config.num_layers
            weights = (an.get_memory_embedding(DSZeRO.NONE) + an.get_weight_memory_per_layer(DSZeRO.NONE) * L
                       + an.get_weight_memory_last_layernorm(DSZeRO.NONE))
            kv = an.get_memory_kv_cache_per_layer(B, S, kv_cache_dtype_bytes=bf16) * L
            act = max(an.get_activation_memory_per_layer(B, 1, is_inference=True, layernorm_dtype_bytes=bf16),
                      an.get_activation_memory_output_embedding(B, 1))
            lat = (an.get_latency_fwd(B, 1, is_inference=True, layernorm_dtype_bytes=bf16)[0]
                   + 2 * kv / (an.get_gpu_hbm_bandwidth() * 10**9))
            mem = weights + kv + act
            return {"latency_s": lat, "throughput_tok_s": B / lat, "weight_bytes": weights, "kv_cache_bytes": kv,
                    "memory_bytes": mem, "fits": bool(mem <= capacity)}

        for variant, fn in (("public", public), ("lean", lean)):
            row = {**base, "variant": variant, "what": VARIANTS["llm-analysis"][variant]}
            try:
                row["outputs"] = fn()
                row.update(_median_time(fn, repeats, warmup))
            except (AssertionError, ValueError, ZeroDivisionError) as e:
                row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
            out["results"].append(row)
    return out


# ---------------------------------------------------------------- genz-llm
def run_genz(configs, repeats, warmup, import_runs):
    out = {"import": _import_time("GenZ", import_runs), "results": []}
    from GenZ import create_full_decode_model, decode_moddeling, get_model_df, get_summary_table
    from GenZ.LLM_inference.utils import get_inference_system
    from GenZ.unit import Unit

    warnings.simplefilter("ignore")
    unit = Unit()
    mb = 2**20  # genz reports memory in MB = MiB (Unit.binary_dicts)
    default_dir = Path("/tmp/genz/data/model")  # where decode_moddeling writes its op lists
    before = set(default_dir.glob("*.csv")) if default_dir.is_dir() else set()
    lean_dir = tempfile.mkdtemp(prefix="genz-bench-")

    def summary(st, B):
        lat = float(st[f"Latency ({unit.unit_time})"].values[0]) / 1e3
        w = float(st[f"Total Weights ({unit.unit_mem})"].values[0]) * mb
        kv = float(st[f"KV Cache ({unit.unit_mem})"].values[0]) * mb
        return {"latency_s": lat, "throughput_tok_s": B / lat, "weight_bytes": w, "kv_cache_bytes": kv,
                "memory_bytes": w + kv}

    try:
        for c in configs:
            B, S = int(c["batch"]), int(c["context"])
            base = {"peer": "genz-llm", "model": c["model"], "hardware": c["hardware"], "batch": B, "context": S}
            system_name, model_name = GENZ_SYSTEM.get(c["hardware"]), GENZ_MODEL.get(c["model"])
            if system_name is None or model_name is None:
                for v in ("public", "lean"):
                    out["results"].append({**base, "variant": v,
                                           "error": f"no genz-llm system/model for {c['hardware']}/{c['model']}"})
                continue
            base["peer_device"], base["peer_model"] = system_name, model_name
            system = get_inference_system(system_name=system_name, bits="bf16", ceff=1, meff=1)
            capacity_mb = system.get_off_chip_mem_size()

            def public():
                r = decode_moddeling(model=model_name, batch_size=B, input_tokens=S, output_tokens=0, Bb=1,
                                     system_name=system_name, bits="bf16")
                res = summary(r["summary_table"], B)  # ModdelingOutput is a dict: keys, not attributes
                res["latency_s"], res["throughput_tok_s"] = r["Latency"] / 1e3, r["Throughput"]
                res["fits"] = True  # decode_moddeling raises ValueError when weights + KV do not fit
                return res

            def lean():
                f = create_full_decode_model(name=model_name, input_sequence_length=S, output_gen_tokens=0,
                                             data_path=lean_dir)
                df = get_model_df(f, system, unit, B, data_path=lean_dir, intermediate_on_chip=True,
                                  beam_merge=False, beam_size=1)
                res = summary(get_summary_table(df, unit), B)
                res["fits"] = bool(res["memory_bytes"] / mb <= capacity_mb)
                return res

            for variant, fn in (("public", public), ("lean", lean)):
                row = {**base, "variant": variant, "what": VARIANTS["genz-llm"][variant]}
                try:
                    row["outputs"] = fn()
                    row.update(_median_time(fn, repeats, warmup))
                except (AssertionError, ValueError, ZeroDivisionError) as e:
                    row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
                out["results"].append(row)
    finally:  # remove only the op-list files this run made
        for p in Path(lean_dir).glob("**/*.csv"):
            p.unlink()
        for d in sorted(Path(lean_dir).glob("**/"), reverse=True):
            with contextlib.suppress(OSError):
                d.rmdir()
        if default_dir.is_dir():
            made = [p for p in default_dir.glob("*_decode_*.csv") if p not in before]
            for p in made:
                with contextlib.suppress(OSError):
                    p.unlink()
            out["op_list_files_written_and_removed"] = len(made)
    return out


def _packages() -> dict:
    from importlib import metadata

    pkgs = {}
    for d in metadata.distributions():
        pkgs[d.metadata["Name"]] = d.version
    return dict(sorted(pkgs.items(), key=lambda kv: kv[0].lower()))


def main() -> int:
    spec = json.load(sys.stdin)
    configs = spec["configs"]
    repeats, warmup = spec.get("repeats", {}), spec.get("warmup", {})
    import_runs = int(spec.get("import_runs", 5))
    report = {"python": sys.version.split()[0], "executable": sys.executable, "packages": _packages(),
              "variants": VARIANTS, "import": {}, "results": [], "errors": {}}
    runners = {"llm-analysis": run_llm_analysis, "genz-llm": run_genz}
    for peer in spec.get("peers", list(runners)):
        t0 = time.perf_counter()
        try:
            with contextlib.redirect_stdout(sys.stderr):  # peers print; our stdout carries only JSON
                r = runners[peer](configs, int(repeats.get(peer, 5)), int(warmup.get(peer, 1)), import_runs)
        except Exception as e:  # noqa: BLE001  (report any peer failure and go on with the other one)
            report["errors"][peer] = f"{type(e).__name__}: {e}"[:500]
            continue
        report["import"][peer] = r.pop("import")
        report["results"].extend(r.pop("results"))
        report.setdefault("extra", {})[peer] = {**r, "peer_seconds": time.perf_counter() - t0}
    json.dump(report, _REAL_STDOUT, indent=1, default=float)
    _REAL_STDOUT.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
