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

if __name__ == "__main__":
    write("02-kv-variants-and-quantization.ipynb", KV)
