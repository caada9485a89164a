"""Writes the notebooks from their cell sources (outputs stripped): python notebooks/_make.py

Every notebook uses the installed package only (no paths into the repository), so it runs in any
directory; tests/test_docs.py executes each on a real Jupyter kernel."""
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent


def render(cells) -> str:
    nb = {"cells": [], "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                                    "language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5}
    for i, (kind, src) in enumerate(cells):
        c = {"cell_type": kind, "id": f"cell-{i}", "metadata": {}, "source": src.strip("\n").splitlines(True)}
        if kind == "code":
            c.update(execution_count=None, outputs=[])
        nb["cells"].append(c)
    return json.dumps(nb, indent=1) + "\n"


def write(name, cells):
    (HERE / name).write_text(render(cells))


LECTURE = [
    ("markdown", """
# The inference lecture, with perfmodel

This notebook follows the CS336 inference lecture with the public API only: arithmetic intensity
and the roofline, the KV cache, the Llama 2 13B latency/throughput table and its tradeoff curve, the
memory that caps the batch, and what GQA and the other KV reductions buy. Every number below is
computed from the same op list the CLI uses; every time is the roofline's ideal bound unless a
cell asks for `mode="achievable"`.
"""),
    ("code", """
import numpy as np
import perfmodel as pm
from perfmodel import plots

llama = pm.load_model("llama-2-13b")
h100 = pm.load_hardware("h100-sxm")
print(f"params {pm.param_count(llama):,}  (published {llama.published_params:,})")
print(f"H100 ridge point: {h100.ridge('bf16'):.0f} FLOP/byte")
"""),
    ("markdown", """
## Arithmetic intensity per op

Decode matmuls have intensity about B; decode attention about S/(S+1) ≈ 1 whatever B is.
`pm.human` shows any result in human units (the DataFrame itself stays in SI units).
"""),
    ("code", """
table = pm.intensity(llama, h100, batch=64, context=1024)
pm.human(table[table.phase == "decode"][["op", "flops", "bytes", "intensity", "time_s", "bound"]])
"""),
    ("code", """
decode_ops = table[table.phase == "decode"].set_index("op")
assert abs(decode_ops.loc["mlp_up_gate", "intensity"] - 64) < 2
assert abs(decode_ops.loc["attn_qk", "intensity"] - 1024 / 1025) < 1e-3
"""),
    ("markdown", """
## The roofline

The lecture's picture: below the ridge an op is bound by memory bandwidth (the slope), above it by
the tensor peak (the flat roof). Decode matmuls climb the slope as the batch grows; decode attention
stays at intensity ≈ 1; prefill sits on the roof.
"""),
    ("code", """
fig = plots.roofline(llama, h100, batch=[1, 8, 64, 256], context=1024)
"""),
    ("markdown", """
## The KV cache

2 (K and V) · S · K · H · L · 2 bytes: 838,860,800 bytes per sequence at S = 1024.
"""),
    ("code", """
kv = pm.kv("llama-2-13b,llama-2-13b-gqa8,llama-2-13b-mla", context=[1024, 8192], batch=1)
kv
"""),
    ("code", """
assert kv.kv_cache_bytes.iloc[0] == 838_860_800
"""),
    ("markdown", """
## Latency and throughput against batch size

The lecture's simple memory-bound model and the full per-op roofline, side by side.
"""),
    ("code", """
batches = [1, 8, 32, 64, 128, 256]
simple = pm.decode(llama, h100, batch=batches, context=1024, mode="simple")
roof = pm.decode(llama, h100, batch=batches, context=1024)
pm.human(simple[["batch", "latency_s", "throughput_tok_s", "memory_bytes", "fits"]]
         .assign(roofline_latency_s=roof.latency_s))
"""),
    ("code", """
assert round(simple.latency_s[0], 5) == 0.00802 and not simple.fits.iloc[-1]
"""),
    ("markdown", """
The tradeoff as the lecture draws it: a bigger batch buys throughput at the cost of latency, with
diminishing returns; hollow points and dashed stretches do not fit in the 80 GB.
"""),
    ("code", """
fig = plots.latency_throughput(["llama-2-13b", "llama-2-13b-gqa8"], "h100-sxm", context=1024)
"""),
    ("markdown", """
## Memory caps the batch

Weights are fixed; the KV cache grows with B. Where the stack crosses the capacity is the largest
batch that fits: 64 at S = 1024.
"""),
    ("code", """
fig = plots.memory(llama, h100, batch=[1, 16, 32, 48, 64, 80, 96, 128], context=1024)
"""),
    ("markdown", """
## What GQA buys

Eight KV heads divide the cache by five: B = 256 now fits, and both latency and throughput improve.
"""),
    ("code", """
gqa = llama.replace(n_kv_heads=8)
pm.decode(gqa, h100, batch=batches, context=1024)[["batch", "latency_s", "throughput_tok_s", "memory_bytes", "fits"]]
"""),
    ("code", """
print("largest batch at S=1024:", int(pm.max_batch(llama, h100.memory_capacity, 1024.0)),
      "->", int(pm.max_batch(gqa, h100.memory_capacity, 1024.0)))
"""),
    ("markdown", """
The lecture's other ways to shrink the cache: MLA (a latent per token), CLA (layers share a cache),
local attention (a window), and a hybrid of windowed and full layers. Bars on a linear axis;
contexts beyond the models' 4,096 are shaded.
"""),
    ("code", """
fig = plots.kv(["llama-2-13b", "llama-2-13b-gqa8", "llama-2-13b-mla", "llama-2-13b-cla2", "llama-2-13b-swa",
                "llama-2-13b-hybrid"], context=[512, 1024, 2048, 4096, 8192, 16384])
"""),
    ("markdown", """
## Explore

The controls redraw the latency-throughput and memory figures and the per-op table (needs
`pip install 'perfmodel[notebooks]'`).
"""),
    ("code", """
ex = pm.explore("llama-2-13b", "h100-sxm", batch=64, context=1024)
ex
"""),
]

ACHIEVABLE = [
    ("markdown", """
# Bounds and achievable estimates

The default mode is the roofline: an ideal bound no real system beats. `mode="achievable"` prices
the same op list with measured kernel efficiencies and fixed costs (the hardware spec's
`achievable` block) and an implementation profile (`impl=`). Public API only.
"""),
    ("code", """
import numpy as np
import perfmodel as pm

both = [pm.decode("llama-3.1-8b", "h100-sxm", batch=[1, 64, 256], context=2048, mode=m)
        for m in ("roofline", "achievable")]
bound, est = both
est.assign(fraction_of_bound=bound.latency_s / est.latency_s)[["batch", "mode", "latency_s", "throughput_tok_s",
                                                             "impl", "fraction_of_bound"]]
"""),
    ("code", """
# the bound is a bound: the estimate is never faster, op by op or step by step
assert (est.latency_s >= bound.latency_s).all()
ops = pm.intensity("llama-3.1-8b", "h100-sxm", batch=64, context=2048, mode="achievable")
ops[ops.phase == "decode"][["op", "layers", "bytes", "time_s", "bound"]]
"""),
    ("markdown", """
## The implementation matters
The same model and GPU under a CUDA-graph serving engine and under PyTorch eager: a small model
launched kernel by kernel from Python is host-bound.
"""),
    ("code", """
small = [pm.decode("qwen2.5-0.5b", "h100-sxm", batch=1, context=512, mode="achievable", impl=i)
         for i in ("graphs", "eager")]
[float(s.latency_s.iloc[0]) for s in small]
"""),
    ("markdown", """
## Measured kernels and the engine's step loop
An engine profile (`vllm-0.24`, `sglang-0.5`, `trtllm-1.3`) prices each op from NVIDIA
AIConfigurator's kernel measurements for that engine where the GPU is measured (the `kernels` extra),
and adds the engine's per-step host time. `measured_share` is the share of device time the measured
tables priced; `priced_by` says which source priced each op.
"""),
    ("code", """
eng = pm.decode("qwen3-30b-a3b", "h100-sxm", batch=[1, 16, 128], context=2048, mode="achievable", impl="vllm-0.24")
eng[["batch", "latency_s", "throughput_tok_s", "measured_share"]]
"""),
    ("code", """
per_op = pm.intensity("qwen3-30b-a3b", "h100-sxm", batch=16, context=2048, mode="achievable", impl="vllm-0.24")
per_op[per_op.phase == "decode"][["op", "time_s", "priced_by"]]
"""),
    ("markdown", """
TensorRT-LLM runs the experts with the MoE backend its configuration names (`moe_config.backend`; AUTO by
default), and AIConfigurator timed each backend apart. DeepSeek-R1 fp8 on 8 B200s: AUTO runs the trtllm-gen
kernels, which were never timed for block-scaled fp8, so the datasheet prices the experts; DeepGEMM's measured
kernel (what attention-DP recipes name) is much slower at one sequence. InferenceX measured 7.29 ms a token on
such a worker (TRTLLM backend, one client).
"""),
    ("code", """
kw = dict(batch=[1, 64], context=8704, mode="achievable", weights_dtype="fp8-b128", act_dtype="fp8", kv_dtype="fp8",
          tp=8, impl="trtllm-1.3")
auto = pm.decode("deepseek-r1", "b200", **kw)
deep = pm.decode("deepseek-r1", "b200", sets={"impl.moe_backend": "DEEPGEMM"}, **kw)
assert (auto.latency_s < deep.latency_s).all() or (auto.measured_share == 0).all()  # without the extra: one model
auto.assign(deepgemm_latency_s=deep.latency_s)[["batch", "latency_s", "deepgemm_latency_s", "measured_share"]]
"""),
    ("markdown", """
Qwen3.5's Gated DeltaNet layers: the causal conv1d and the delta rule are priced from the engine's measured
kernels (the chunked kernel over a prompt, the recurrent one in decode), per sequences and tokens a sequence.
Over an 8,192-token prompt the chunked kernel takes far longer than the datasheet model would price it.
"""),
    ("code", """
gdn = pm.intensity("qwen3.5-397b-a17b", "b200", batch=1, context=8192, tp=4, weights_dtype="fp8-b128",
                   act_dtype="fp8", kv_dtype="fp8", mode="achievable", impl="sglang-0.5")
sheet = pm.intensity("qwen3.5-397b-a17b", "b200", batch=1, context=8192, tp=4, weights_dtype="fp8-b128",
                     act_dtype="fp8", kv_dtype="fp8", mode="achievable", impl="sglang-0.5",
                     sets={"impl.kernel_tables": "none"})
pick = lambda t: t[t.op.str.startswith(("gdn_conv", "gdn_core"))]  # noqa: E731
pick(gdn).assign(datasheet_s=pick(sheet).time_s.values)[["phase", "op", "time_s", "datasheet_s", "priced_by"]]
"""),
    ("markdown", """
TensorRT-LLM runs no step that holds a prompt in a CUDA graph, so its host launches every op (69 µs an op,
from a profiled gpt-oss-120b step on 2 B200s whose forward took about 30 ms of CPU time). A short prompt is
host-bound; a long one is not.
"""),
    ("code", """
kw = dict(context=[886, 8192], mode="achievable", weights_dtype="nvfp4", act_dtype="fp4", kv_dtype="fp8", tp=2,
          impl="trtllm-1.3")
eager = pm.prefill("gpt-oss-120b", "b200", **kw)
graph = pm.prefill("gpt-oss-120b", "b200", sets={"impl.prefill_launch": "0 s"}, **kw)
assert (eager.latency_s >= graph.latency_s).all()
eager.assign(kernels_only_s=graph.latency_s)[["context", "latency_s", "kernels_only_s", "measured_share"]]
"""),
    ("markdown", """
## The estimate on three GPUs
The same model's latency-throughput curve, estimated on each device (titles state the mode).
"""),
    ("code", """
from perfmodel import plots
fig = plots.latency_throughput("llama-3.1-8b", "h100-sxm,mi300x,a100-80gb-sxm", context=2048, mode="achievable")
"""),
    ("markdown", """
## Against published measurements
Every case pins its source; the roofline must hold in all of them.
"""),
    ("code", """
pub = pm.published_validation()
assert pub.bound_holds.all()
pub.groupby(pub.category.str.split(",").str[0]).agg(cases=("case", "size"),
                                                     median_abs_error=("error", lambda e: e.abs().median()),
                                                     median_fraction=("fraction", "median"))
"""),
    ("code", """
from perfmodel import plots
fig = plots.published(pub.to_dict("list"))
"""),
]

KV = [
    ("markdown", """
# KV-reduction variants and quantization

What GQA, MLA, CLA, sliding windows, linear attention and quantized formats buy for Llama 2 13B on
one H100 SXM, all from perfmodel's op list (public API only).
"""),
    ("code", """
import numpy as np
import pandas as pd
import perfmodel as pm

variants = ["llama-2-13b", "llama-2-13b-gqa8", "llama-2-13b-mla", "llama-2-13b-cla2",
            "llama-2-13b-swa", "llama-2-13b-hybrid", "llama-2-13b-linear"]
pm.kv(",".join(variants), context=[1024, 32768])
"""),
    ("markdown", """
## Side by side: latency, throughput and the largest batch that fits
Ratios are against the first model at the same batch and context.
"""),
    ("code", """
df = pm.compare(variants, "h100-sxm", batch=[64], context=[8192])[
    ["model", "kv_bytes_per_seq", "latency_s", "throughput_tok_s", "max_batch", "kv_ratio", "latency_ratio",
     "max_batch_ratio"]]
df
"""),
    ("code", """
# CLA halves the cache (more users fit) but every layer still reads the shared cache: no faster step
cla = df.set_index("model").loc["llama-2-13b-cla2"]
assert cla.kv_ratio == 0.5 and cla.max_batch_ratio >= 2 and cla.latency_ratio > 0.9
"""),
    ("markdown", """
## Quantization: formats, bytes and which layers
"""),
    ("code", """
pm.formats()
"""),
    ("code", """
pm.human(pm.weights("llama-2-13b", "int4"))
"""),
    ("code", """
rows = []
for w, a, kv in [("bf16", "bf16", "bf16"), ("int8", "bf16", "bf16"), ("int4", "bf16", "bf16"),
                 ("fp8", "fp8", "fp8"), ("nf4-dq", "bf16", "fp8")]:
    d = pm.decode("llama-2-13b-gqa8", "h100-sxm", batch=[1, 256], context=4096,
                  weights_dtype=w, act_dtype=a, kv_dtype=kv)
    d["formats"] = f"W {w} / A {a} / KV {kv}"
    rows.append(d)
q = pd.concat(rows)[["formats", "batch", "latency_s", "throughput_tok_s", "weight_bytes", "memory_bytes", "fits"]]
q
"""),
    ("code", """
b1 = q[q.batch == 1].set_index("formats").latency_s
assert b1["W int4 / A bf16 / KV bf16"] < b1["W int8 / A bf16 / KV bf16"] < b1["W bf16 / A bf16 / KV bf16"]
"""),
    ("markdown", """
## A checkpoint that keeps layers out of its format
NVIDIA's DeepSeek-R1-0528-NVFP4-v2 quantizes o_proj, the MLPs and the experts to NVFP4 and keeps q_a, q_b, kv_a
and kv_b in bf16: pin the tensor groups (`attention`, and `attention_out` for o_proj alone). With its bf16 MTP
layer (and that layer's own embedding and head) the checkpoint is 413,340,567,567 B on disk.
"""),
    ("code", """
v2 = {"weight_formats.attention": "bf16", "weight_formats.attention_out": "nvfp4"}
w = pm.weights("deepseek-r1", "nvfp4", act_dtype="fp4", sets=v2)
mtp_bf16 = (11_610_030_080 + 2 * 129_280 * 7168) * 2  # the MTP layer's parameters and its own embedding and head
assert abs((w.weight_bytes.sum() + mtp_bf16) / 413_340_567_567 - 1) < 5e-4
pm.human(w)
"""),
    ("code", """
from perfmodel import plots
fig = plots.kv(variants)  # a matplotlib Figure: restyle it here
"""),
]

SERVE = [
    ("markdown", """
# Serving and speculative what-ifs

Continuous against static batching on the same traffic, paged KV memory and prefix sharing, and
when a draft model pays off, with perfmodel's public API (every step cost comes from the roofline).
"""),
    ("code", """
import pandas as pd
import perfmodel as pm
from perfmodel import plots

runs = pm.serve_sim("llama-2-13b", "h100-sxm", policy="both", requests=64, slots=8,
                    output_len="lognormal:median=18,max=231", seed=0)
runs[["policy", "throughput_tok_s", "mean_latency_s", "p99_latency_s", "mean_ttft_s", "mean_tpot_s"]]
"""),
    ("code", """
s, c = runs.set_index("policy").loc["static"], runs.set_index("policy").loc["continuous"]
print(f"continuous: {c.throughput_tok_s / s.throughput_tok_s:.2f}x the throughput, "
      f"{s.mean_latency_s / c.mean_latency_s:.2f}x lower mean latency")
assert c.throughput_tok_s > s.throughput_tok_s and c.mean_latency_s < s.mean_latency_s
"""),
    ("code", """
fig = plots.serving("llama-2-13b", "h100-sxm", requests=64, slots=8, output_len="lognormal:median=18,max=231")
"""),
    ("markdown", """
## Paged KV memory and a shared system prompt
"""),
    ("code", """
pm.kv_memory("llama-2-13b", "l40s", requests=64, prompt_len=256, shared_prefix=1024)
"""),
    ("markdown", """
## Speculative decoding
The closed form over an alpha x gamma grid, then the same question with costs from the roofline:
a 7B draft for a 70B target is nearly free at batch 1 and a loss at batch 256.
"""),
    ("code", """
pm.speculative(alpha=[0.5, 0.7, 0.9], gamma=[1, 2, 4, 8], draft_cost=0.1)
"""),
    ("code", """
rows = [pm.speculative(alpha=[0.8], gamma=[4], draft="llama-2-7b", target="llama-2-70b", batch=b)
        for b in (1, 16, 64, 256)]
spec = pd.concat(rows)[["batch", "draft_cost", "verify_cost", "expected_tokens", "speedup", "slower"]]
spec
"""),
    ("code", """
assert spec.speedup.iloc[0] > 1 > spec.speedup.iloc[-1]
fig = plots.speculative(draft_cost=0.1)
"""),
    ("markdown", """
DeepSeek-V3/R1 draft with their own multi-token-prediction layer: `draft="mtp"` prices one decoder layer of
the target's shape with its projection and the shared LM head. Verifying several tokens of a MoE is not free
even at batch 1 (each token reaches other experts), which the roofline charges in `verify_cost`.
"""),
    ("code", """
mtp = pm.speculative(alpha=[0.92], gamma=[1, 2, 3], draft="mtp", target="deepseek-r1", hardware="b200",
                     weights_dtype="nvfp4", act_dtype="fp4", kv_dtype="fp8")
assert (mtp.draft == "mtp").all() and mtp.draft_cost.max() < 0.15 and (mtp.verify_cost > 1).all()
mtp[["gamma", "draft_cost", "verify_cost", "expected_tokens", "speedup"]]
"""),
    ("markdown", """
The same map with both costs from the engine, at batch 1 and at batch 64 (each device's own draft
cost; the break-even line moves up as verification turns compute-bound).
"""),
    ("code", """
fig = plots.speculative(draft="llama-2-7b", target="llama-2-70b", hardware="h100-sxm", batch=1)
fig = plots.speculative(draft="llama-2-7b", target="llama-2-70b", hardware="h100-sxm", batch=64)
"""),
    ("markdown", """
## A fixed concurrency, and measured serving runs
Benchmarks such as `vllm bench serve --max-concurrency` and AIPerf run N clients in a closed loop: each
sends its next request when its last returns. `concurrency=N` simulates that; Little's law (request rate
x mean E2E = requests in flight) holds in the output. Then the same question against measured runs:
AIConfigurator's silicon sample (vLLM 0.x on H200, Llama 3.1 8B FP8), predicted point by point.
"""),
    ("code", """
cl = pm.serve_sim("llama-3.1-8b", "h100-sxm", "continuous", slots=None, prompt_len=1024, output_len=256,
                  concurrency=32, token_budget=8192)
cl[["concurrency", "request_rate", "mean_latency_s", "mean_in_flight", "mean_ttft_s", "mean_tpot_s",
    "throughput_per_device", "tok_s_per_user"]]
"""),
    ("markdown", """
How prompts join the decodes' steps is the engine's: with an `impl` profile the simulator batches them as
that engine does by default (TensorRT-LLM whole prompts up to the token budget, SGLang prefill-only steps,
vLLM chunks); `prefill=` overrides it, and the `prefill` column says which rule ran.
"""),
    ("code", """
eng = pd.concat([pm.serve_sim("llama-3.1-8b", "h100-sxm", "continuous", slots=None, prompt_len="uniform:512,4096",
                              output_len=256, concurrency=32, token_budget=8192, mode="achievable", impl=i)
                 for i in ("trtllm-1.3", "sglang-0.5", "vllm-0.24")], ignore_index=True)
eng[["impl", "prefill", "mean_ttft_s", "p99_ttft_s", "mean_tpot_s", "throughput_per_device"]]
"""),
    ("code", """
assert abs(cl.request_rate[0] * cl.mean_latency_s[0] - cl.mean_in_flight[0]) < 1e-9 * cl.mean_in_flight[0]
v = pm.serving_validation(model=["llama-3.1-8b"], system=["h200_sxm"], backend=["vllm"], modes=("roofline",))
v[["isl", "osl", "concurrency", "layout", "measured_ttft_ms", "predicted_ttft_ms", "measured_tpot_ms",
   "predicted_tpot_ms"]].head()
"""),
    ("code", """
summary = pm.serving_validation_summary(v)
fig = plots.serving_validation(v)
summary[summary.category.isin(["overall", "concurrency"])]
"""),
    ("markdown", """
In a closed loop the roofline's TTFT is no bound: its faster server turns the clients over faster, sends more
prompts a second, and they queue. The bound holds the request rate at the one measured (Little's law: the
clients over a request's measured time) with only the clients that rate keeps in the system.
"""),
    ("code", """
assert (v.bound_ttft_ms <= v.predicted_ttft_ms * (1 + 1e-9)).all()
v[["concurrency", "measured_ttft_ms", "predicted_ttft_ms", "bound_ttft_ms", "measured_tpot_ms",
   "bound_tpot_ms"]].tail(3), summary.loc[summary.category == "overall", ["ttft_above", "bound_ttft_above"]]
"""),
    ("markdown", """
Disaggregated runs that do not record their workers take them from the InferenceX recipe they ran (the
`workers` column: recorded, recipe or assumed), with the speculative decoding the recipe used, which the
sample does not record; where the recipe names its MTP drafts (TensorRT-LLM's `..._mtp3.yaml`) the decode
workers run them (the `mtp` column of the plan). The summary keeps both apart.
"""),
    ("code", """
d = pm.serving_validation(model=["deepseek-r1"], system=["gb300"], backend=["sglang"], modes=("achievable",))
assert set(d.workers) == {"recipe"}
s = pm.serving_validation_summary(d)
d[["concurrency", "layout", "speculative", "measured_tpot_ms", "predicted_tpot_ms"]].head(), \
    s[s.category.isin(["deployment", "speculative"])]
"""),
    ("markdown", """
Each pool also runs the limits its configuration set (`disagg_limits.csv`: the recipe's `max_batch_size` and
`max_num_tokens` per attention-DP rank, SGLang's per worker, with the file and line each was read from). DeepSeek-R1 on H100 under
TensorRT-LLM ran 6 clients on 3 decode workers of `max_batch_size` 1: half the requests wait a whole request's
decode for a place, and TTFT is seconds, not milliseconds.
"""),
    ("code", """
import os
import tempfile

from perfmodel.serving import silicon

rows = silicon.load()
with tempfile.TemporaryDirectory() as tmp:  # the 6- and 9-client rows, as a sample of their own (each
    f = os.path.join(tmp, "h100_disagg.csv")  # simulated through both pools: seconds a row)
    rows[rows.id.str.startswith("dsr1_h100_trtllm_fp8_disagg_1024x1024")
         & rows.id.str.contains("_c6_|_c9_")].to_csv(f, index=False)
    h = pm.serving_validation(sample=f, modes=("achievable",))
h[["concurrency", "layout", "measured_ttft_ms", "predicted_ttft_ms", "measured_tpot_ms", "predicted_tpot_ms"]]
"""),
    ("markdown", """
The two pools share the N clients. Up to 128 clients the loop is simulated through both pools at once (each client
sends its next prompt when its last request is done, and prompts sent together queue together); above that, by the
pools' steady balance, where a pool's share of the clients is a real number. DeepSeek-R1 on H200 under TensorRT-LLM
ran 11 clients on one prefill worker and 9 decode workers of `max_batch_size` 1 (srt-slurm's
`c1_ctx1_gen9_tep8_batch1` recipe): about 0.14 client is in the prefill pool at any time (the pooled balance: 0.12),
so nearly two wait for a decode place, and TTFT is nearly two seconds (measured: 2,434 ms; the pooled balance gives
1,723 ms). The next cell compares the two.
"""),
    ("code", """
c11 = rows[rows.id == "2026_03_25_deepseek_r1_h200_sxm_trtllm_fp8_disagg_1024x1024_c11_tp8_0_ep8_0_399"]
p = silicon.plan(c11)[0]
out = silicon.Predictor("achievable")(p)
assert abs(out["prefill_clients"] + out["decode_clients"] - p["concurrency"]) < 1e-9  # every client counted
assert out["prefill_clients"] < 1 and out["ttft_s"] > 1.0
pooled = silicon.Predictor("achievable").disagg(p, "pooled")  # the steady balance, for comparison
assert out["ttft_s"] > pooled["ttft_s"]  # prompts sent together queue together
{k: (round(out[k], 3), round(pooled[k], 3)) for k in ("prefill_clients", "decode_clients", "ttft_s", "tpot_s",
                                                       "request_rate")}
"""),
    ("markdown", """
A launch script can overrule the name a run was filed under. gpt-oss-120b's H200 TensorRT-LLM script passes
`--ep_size=$TP`, so its run named tp4_ep1 held whole experts on each GPU, as the tp4_ep4 run did (they measured 4.98
and 4.94 ms TPOT at 4 clients); `agg_ep.csv` lists such runs with the script line. The KV-cache dtype a script or
recipe left at the engine's auto is read the same way (`agg_kv.csv`, `disagg_kv.csv`: bf16 for a checkpoint that
quantizes no cache).
"""),
    ("code", """
pair = rows[rows.id.isin(["2026_04_06_gpt_oss_120b_h200_sxm_trtllm_fp4_agg_1024x1024_c4_tp4_ep1_341",
                          "2026_04_06_gpt_oss_120b_h200_sxm_trtllm_fp4_agg_1024x1024_c4_tp4_ep4_987"])]
plans = silicon.plan(pair)
assert [p["layout"].experts for p in plans] == ["ep", "ep"] and {p["kv"] for p in plans} == {"bf16"}
with tempfile.TemporaryDirectory() as tmp:
    f = os.path.join(tmp, "pair.csv")
    pair.to_csv(f, index=False)
    g = pm.serving_validation(sample=f, modes=("achievable",))
g[["id", "layout", "precision", "measured_tpot_ms", "predicted_tpot_ms", "tpot_error"]]
"""),
    ("markdown", """
A script can also decide the layout and the limits itself. InferenceX's `dsr1_fp4_b200_trt_slurm.sh` turns attention DP
on above 32 clients at 8k/1k and sets `max_num_tokens` to CONC + ISL + 64 rounded up to 64, so that an unchunked 8k
prompt fits beside the decodes. The sample files that 128-client run as tp 8 without DP, and its docker twin, whose
script does not exist at that commit, once left the limits blank: the engine's 8,192 tokens starved the prompts
(34 s predicted TTFT against 2.7 s measured). `agg_config.csv` and `agg_ep.csv` (ep `dp`) now carry what the script
ran; the plan's `assumed` column says so.
"""),
    ("code", """
dp = rows[rows.id == "2026_04_06_deepseek_r1_b200_sxm_trtllm_fp4_agg_8192x1024_c128_tp8_ep1_74"]
p = silicon.plan(dp)[0]
assert (p["budget"], p["layout"].tp, p["layout"].ep) == ((128 + 8192 + 64 + 63) // 64 * 64, 1, 8)
out = silicon.Predictor("achievable")(p)
assert out["ttft_s"] < 2 * float(dp.silicon_ttft_ms.iloc[0]) / 1e3  # not the starved queue of the 8,192 default
{"assumed": p["assumed"], "ttft_s": round(out["ttft_s"], 3), "tpot_ms": round(1e3 * out["tpot_s"], 2),
 "measured_ttft_s": float(dp.silicon_ttft_ms.iloc[0]) / 1e3, "measured_tpot_ms": float(dp.silicon_tpot_ms.iloc[0])}
"""),
    ("markdown", """
A launch can also name the MoE kernel. InferenceX's gpt-oss H200 vLLM script exports `VLLM_MXFP4_USE_MARLIN=1`,
so vLLM runs the experts with Marlin, not its Hopper default (Triton). AIConfigurator timed Marlin only in its 0.24.0
tables, which the 0.19 profile borrows and says so. At an 8,192-token prompt Marlin takes about twice as long.
"""),
    ("code", """
one = rows[rows.id == "2026_03_25_gpt_oss_120b_h200_sxm_vllm_fp4_agg_8192x1024_c4_tp1_0_ep1_0_191"]
assert silicon.plan(one)[0]["decode_moe_backend"] == "MARLIN"
kw = dict(context=[1024, 8192], mode="achievable", weights_dtype="mxfp4", impl="vllm-0.19")
default = pm.prefill("gpt-oss-120b", "h200", **kw)
marlin = pm.prefill("gpt-oss-120b", "h200", sets={"impl.moe_backend": {
    "value": "MARLIN", "source": "InferenceX gptoss_fp4_h200.sh: export VLLM_MXFP4_USE_MARLIN=1"}}, **kw)
default.assign(marlin_s=marlin.latency_s)[["context", "latency_s", "marlin_s"]]
"""),
    ("markdown", """
vLLM 0.19's tables time gpt-oss's experts (vLLM's default kernel) at tp 1 and 2 only. At tp 4 and 8, each GPU's slice
is a shape the tables lack. It is priced by the fixed part and slope of the measured tp siblings, t = a + b x over their
ideal times x, not by carrying the nearest one's ratio over (docs/achievable.md, "MoE shapes the tables lack"). Held out
one at a time, the tables' own 21,422 MoE shapes are priced within 10.4% this way and 20.0% the old way
(`bench/moe_transfer.py`).
"""),
    ("code", """
import pandas as pd
kw2 = dict(context=1024, mode="achievable", weights_dtype="mxfp4", impl="vllm-0.19")
steps = pd.concat([pm.decode("gpt-oss-120b", "h200", batch=[1, 64], tp=tp, **kw2).assign(tp=tp) for tp in (1, 2, 4, 8)])
steps[["tp", "batch", "latency_s", "measured_share"]]
"""),
    ("markdown", """
On Blackwell the engines run gpt-oss's MXFP4 experts with MXFP8 activations (W4A8): TensorRT-LLM by default, vLLM
with `VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1`. With fp4 or fp8 activations the experts take that kernel's measured
table; vLLM's own tables lack it at gpt-oss's shape and take SGLang's timing of the same FlashInfer kernel
(docs/achievable.md, "MXFP4 experts with 8- or 4-bit activations"). With bf16 activations, the W4A16 kernel:
"""),
    ("code", """
kw3 = dict(context=1536, mode="achievable", weights_dtype="mxfp4", kv_dtype="fp8", impl="vllm-0.24")
w4 = pd.concat([pm.decode("gpt-oss-120b", "b200", batch=[4, 64], act_dtype=a, **kw3).assign(act=a) for a in ("fp4", "bf16")])
assert (w4[w4.act == "fp4"].latency_s.values < w4[w4.act == "bf16"].latency_s.values).all()  # W4A8 beats W4A16
w4[["act", "batch", "latency_s", "measured_share"]]
"""),
    ("markdown", """
Expert-parallel load balancing places copies of hot experts in extra slots (SGLang's `--ep-num-redundant-experts`,
TensorRT-LLM's `load_balancer num_slots`): `redundant_experts=R` prices (E + R) / ep experts a device, the same tokens
(docs/parallelism.md, "Redundant experts"). DeepSeek-R1's 256 experts do not split over SGLang's 48-rank decode
workers; with the recipes' 32 copies they do, 6 a GPU:
"""),
    ("code", """
kw4 = dict(batch=[64, 512], context=2048, weights_dtype="nvfp4", act_dtype="nvfp4", kv_dtype="fp8")
slots = pd.concat([pm.decode("deepseek-r1", "gb200", ep=ep, redundant_experts=r, **kw4).assign(ep=ep, R=r)
                   for ep, r in ((32, 0), (32, 32), (48, 32))])
per = slots.groupby(["ep", "R"]).weight_bytes.first()
assert per[(32, 32)] > per[(32, 0)] > per[(48, 32)]  # 9, 8 and 6 experts a GPU
slots[["ep", "R", "batch", "latency_s", "weight_bytes", "fits"]]
"""),
    ("markdown", """
Across nodes an expert all-to-all sends a token once to each remote node that holds one of its experts (DeepEP's
internode kernels), so the roofline counts those copies, (m - 1)(1 - C(E - E/m, k)/C(E, k)) a token, not k. Over two
HGX B200 nodes the achievable estimate stays above it:
"""),
    ("code", """
from perfmodel.timemodel import remote_nodes
two = pd.concat([pm.prefill("deepseek-r1", "b200", context=8192, ep=16, **m) for m in
                 (dict(mode="roofline"), dict(mode="achievable", impl="trtllm-1.3"))])
assert two.latency_s.iloc[1] >= two.latency_s.iloc[0]
round(remote_nodes(256, 8, 2), 4), two[["mode", "latency_s", "comm_time_s"]]
"""),
    ("markdown", """
A serving step under attention DP runs each sequence on one rank, so a prompt chunk is computed where its sequence
lives: the step's ops with weights take the busiest rank's tokens (`engine.busiest_rank`), not an even share. Kimi-K2.5
at tp4 x dp4 on B200, a 7,373-token prompt beside three decodes costs the prompt alone and a little more:
"""),
    ("code", """
from perfmodel import engine
from perfmodel.ops import Layout
kimi, b200, dp4 = pm.load_model("kimi-k2.5"), pm.load_hardware("b200"), Layout(tp=4, ep=4)
step = lambda T, S: engine.mixed_step(kimi, b200, T, S, layout=dp4, mode="achievable", impl="trtllm-1.3")["latency_s"]
alone, beside = step([7373], [7373]), step([7373, 1, 1, 1], [7373, 8000, 8000, 8000])
assert alone <= beside <= 1.01 * alone
engine.busiest_rank([7373, 1, 1, 1], [7373, 8000, 8000, 8000], 4)[0], round(alone, 3), round(beside, 3)
"""),
    ("markdown", """
## Capacity for a fleet, and what to launch
`pm.capacity` searches the largest request rate a layout serves within the SLOs; `pm.fleet` answers a file
of such questions (model, hardware, layout or GPU count, workload, SLOs) as one table, on this machine's
cores (`workers=`) or a Dask cluster (`cluster=`), the same table either way. `pm.launch_settings` turns
a search's chosen row into the engine's launch command (docs/launch.md maps each flag).
"""),
    ("code", """
import pathlib, tempfile
fleet_file = pathlib.Path(tempfile.mkdtemp()) / "fleet.csv"
fleet_file.write_text("name,model,hardware,tp,prompt_len,output_len,seeds,requests\\n"
                      "small-l4,llama-3.2-1b,l4,1,256,64,1,400\\n"
                      "small-h100,llama-3.2-1b,h100-sxm,1,256,64,1,400\\n")
fleet = pm.fleet(str(fleet_file), workers=2)
fleet[fleet.chosen][["name", "hardware", "tp", "goodput_rps", "ttft_s", "tpot_s", "binding"]]
"""),
    ("code", """
one = pm.capacity("llama-3.2-1b", "h100-sxm", tp=1, prompt_len=256, output_len=64, seeds=1, requests=400, workers=1)
assert one.goodput_rps[0] == fleet[fleet.name == "small-h100"].goodput_rps.iloc[0]  # the same search
pm.launch_settings(one, engine="sglang").command[0]
"""),
]

MEASURE = [
    ("markdown", """
# Measured validation: the engine against a real machine

`perfmodel measure` times microbenchmarks on this machine (numpy/BLAS on a CPU, PyTorch on a GPU),
writes a calibrated hardware spec, and `perfmodel validate` predicts every case that calibration did
not use. This notebook reads the run that ships inside the package, `pm.SAVED_RUN` (the files of
`docs/validation/cpu-quick`: 2 cores of an AMD EPYC), through the public API; docs/validation.md
explains every number.
"""),
    ("code", """
import pandas as pd
import perfmodel as pm
from perfmodel import measure, plots

RUN = pm.SAVED_RUN               # a folder inside the installed package: this runs in any directory
v = pm.validation(RUN)           # one row per validation case: predicted_s, measured_s, error
v
"""),
    ("code", """
p90 = lambda e: e.quantile(0.9)
summary = v.assign(abs_error=v.error.abs()).groupby("family", sort=False).abs_error.agg(["count", "median", p90])
summary
"""),
    ("code", """
# the issue's targets on this 2-core CPU: median |error| <= 10% on the roofline sweep and on whole decode steps
assert summary.loc["sweep", "median"] <= 0.10 and summary.loc["decode", "median"] <= 0.10
"""),
    ("markdown", """
## What the calibrated terms buy
Without `gemm_weight_passes` and `attention_kv_passes` (a BLAS packs the streamed operand of a
multi-row product before its kernel runs) every multi-row case comes out several times too fast.
"""),
    ("code", """
bare = pm.validation(RUN, passes=False)
pd.DataFrame({"with the terms": v.error.abs().groupby(v.family, sort=False).median(),
              "passes = 1": bare.error.abs().groupby(bare.family, sort=False).median()})
"""),
    ("markdown", """
## Where one decode step's time goes
The CPU backend times every op inside the measured steps; the engine's time per op beside it.
"""),
    ("code", """
ops = pd.DataFrame(measure.breakdown(RUN, "decode/fp32/L=2,D=4096/B=16,S=2048"))
ops
"""),
    ("markdown", """
## The measured spec works wherever a catalog name does
Here it predicts the timed model's decode step, exactly as `validate` compares it.
"""),
    ("code", """
pm.decode(str(RUN / "decode-model.yaml"), str(RUN / "measured.yaml"), batch=[1, 4, 16], context=512,
          weights_dtype="fp32", act_dtype="fp32", attention="unfused")[["batch", "latency_s", "throughput_tok_s", "bound"]]
"""),
    ("code", """
fig = plots.validation(RUN)  # predicted vs measured with the +-10% band, and the residuals
"""),
    ("markdown", """
## The harness itself, live, at toy sizes
The `tiny` preset runs the whole loop (interleaved rounds, calibration, validation) in about a second.
Its shapes sit in cache and its ops last microseconds, so its errors say nothing about the engine;
`perfmodel measure --quick` (about a minute) is the real run.
"""),
    ("code", """
from perfmodel.measure.calibrate import calibrate
from perfmodel.measure.validate import by_family, validate

res = measure.run_suite(measure.backend("cpu"), "tiny")
text, hw, _ = calibrate(res)
pd.DataFrame(by_family(validate(res, hw)))
"""),
]

BOOKS = {"01-lecture-walkthrough.ipynb": LECTURE, "02-kv-variants-and-quantization.ipynb": KV,
         "03-serving-and-speculative.ipynb": SERVE, "04-measured-validation.ipynb": MEASURE,
         "05-bounds-and-achievable.ipynb": ACHIEVABLE}

if __name__ == "__main__":
    import sys

    if "--check" in sys.argv:  # the stored notebooks are what this file writes
        stale = [n for n, cells in BOOKS.items() if (HERE / n).read_text() != render(cells)]
        if stale:
            sys.exit(f"stale notebooks (run python notebooks/_make.py): {', '.join(stale)}")
    else:
        for n, cells in BOOKS.items():
            write(n, cells)
