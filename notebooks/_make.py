"""Writes the notebooks from their cell sources (outputs stripped). python notebooks/_make.py"""
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent


def write(name, cells):
    nb = {"cells": [], "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                                    "language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5}
    for i, (kind, src) in enumerate(cells):
        c = {"cell_type": kind, "id": f"cell-{i}", "metadata": {}, "source": src.strip("\n").splitlines(True)}
        if kind == "code":
            c.update(execution_count=None, outputs=[])
        nb["cells"].append(c)
    (HERE / name).write_text(json.dumps(nb, indent=1) + "\n")


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
import perfmodel as pm
from perfmodel import whatif

variants = ["llama-2-13b", "llama-2-13b-gqa8", "llama-2-13b-mla", "llama-2-13b-cla2",
            "llama-2-13b-swa", "llama-2-13b-hybrid", "llama-2-13b-linear"]
pm.kv(",".join(variants), context=[1024, 32768])
"""),
    ("markdown", """
## Side by side: latency, throughput and the largest batch that fits
Ratios are against the first model at the same batch and context.
"""),
    ("code", """
table = whatif.compare(variants, "h100-sxm", batch=[64], context=[8192])
import pandas as pd
df = pd.DataFrame(table)[["model", "kv_bytes_per_seq", "latency_s", "throughput_tok_s", "max_batch",
                          "kv_ratio", "latency_ratio", "max_batch_ratio"]]
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
pd.DataFrame(whatif.formats())
"""),
    ("code", """
pd.DataFrame(whatif.weights("llama-2-13b", "int4"))
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
from perfmodel import plots, whatif

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
pd.DataFrame(whatif.speculative(alpha=[0.5, 0.7, 0.9], gamma=[1, 2, 4, 8], draft_cost=0.1))
"""),
    ("code", """
rows = [pd.DataFrame(whatif.speculative(alpha=[0.8], gamma=[4], draft="llama-2-7b", target="llama-2-70b",
                                        batch=b)) for b in (1, 16, 64, 256)]
spec = pd.concat(rows)[["batch", "draft_cost", "verify_cost", "expected_tokens", "speedup", "slower"]]
spec
"""),
    ("code", """
assert spec.speedup.iloc[0] > 1 > spec.speedup.iloc[-1]
fig = plots.speculative(draft_cost=0.1)
"""),
]

MEASURE = [
    ("markdown", """
# Measured validation: the engine against a real machine

`perfmodel measure` times microbenchmarks on this machine (numpy/BLAS on a CPU, PyTorch on a GPU),
writes a calibrated hardware spec, and `perfmodel validate` predicts every case that calibration did
not use. This notebook reads the run saved in `docs/validation/cpu-quick` (2 cores of an AMD EPYC)
through the public API; docs/validation.md explains every number.
"""),
    ("code", """
from pathlib import Path
import pandas as pd
import perfmodel as pm
from perfmodel import measure, plots

RUN = Path("..") / "docs" / "validation" / "cpu-quick"   # the notebook runs from notebooks/
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
fig = plots.validation(RUN)  # predicted vs measured, log-log
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

if __name__ == "__main__":
    write("02-kv-variants-and-quantization.ipynb", KV)
    write("03-serving-and-speculative.ipynb", SERVE)
    write("04-measured-validation.ipynb", MEASURE)
    write("05-bounds-and-achievable.ipynb", ACHIEVABLE)
