"""Regenerate every figure of docs/gallery/ (the README shows some of them).

    python docs/gallery/make_gallery.py
"""
from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from perfmodel import plots  # noqa: E402

FIGURES = {
    "roofline.png": lambda: plots.roofline("llama-2-13b", "h100-sxm", batch=[1, 8, 64, 256], context=1024),
    "roofline-moe.png": lambda: plots.roofline("mixtral-8x7b,llama-3.1-8b", "h100-sxm", batch=[1, 8, 64, 256],
                                               context=1024),
    "roofline-tp.png": lambda: plots.roofline("llama-3.1-70b", "h100-sxm,mi300x", batch=[1, 8, 64, 256], context=1024,
                                              tp=8),
    "latency-throughput.png": lambda: plots.latency_throughput(
        ["llama-2-13b", "llama-2-13b-gqa8", "llama-2-13b-mla"], "h100-sxm", context=1024),
    "latency-throughput-devices.png": lambda: plots.latency_throughput("llama-3.1-8b", "h100-sxm,mi300x,rtx-4090",
                                                                       context=1024),
    "latency-throughput-tp.png": lambda: plots.latency_throughput("llama-3.1-70b", "h100-sxm", tp=[2, 4, 8],
                                                                  context=4096),
    "memory-batch.png": lambda: plots.memory("llama-2-13b", "h100-sxm", batch=[1, 8, 16, 32, 48, 64, 80, 96]),
    "memory-context.png": lambda: plots.memory("llama-3.1-8b", "rtx-4090", batch=[4], axis="context",
                                               context=[1024, 2048, 4096, 8192, 16384, 32768]),
    "memory-tp.png": lambda: plots.memory("llama-3.1-70b", "h100-sxm", batch=[1, 16, 64, 128, 256], tp=[1, 2, 4, 8]),
    "kv-variants.png": lambda: plots.kv(),
    "kv-devices.png": lambda: plots.kv("llama-3.1-8b,llama-3.1-70b,mixtral-8x7b", hardware="h100-sxm,rtx-4090",
                                       context=[1024, 8192, 32768, 131072, 262144]),
    "speculative.png": lambda: plots.speculative(draft_cost=0.1),
    "speculative-engine.png": lambda: plots.speculative(draft="llama-2-7b", target="llama-2-70b",
                                                        hardware="h100-sxm,rtx-4090", batch=16),
    "validation.png": lambda: plots.validation(HERE.parent / "validation" / "cpu-quick"),
    "roofline-achievable.png": lambda: plots.roofline("llama-2-13b", "h100-sxm", batch=[1, 8, 64, 256], context=1024,
                                                      mode="achievable"),
    "latency-throughput-achievable.png": lambda: plots.latency_throughput(
        ["llama-2-13b", "llama-2-13b-gqa8", "llama-2-13b-mla"], "h100-sxm", context=1024, mode="achievable"),
    "published.png": lambda: plots.published(),
    "serving.png": lambda: plots.serving("llama-2-13b", "h100-sxm", requests=64, slots=8,
                                         output_len="lognormal:median=18,max=231", seed=0),
}


def main(names=None) -> list[str]:
    out = []
    for name, make in FIGURES.items():
        if names and name not in names:
            continue
        fig = make()
        out.append(plots.save(fig, HERE / name))
        import matplotlib.pyplot as plt

        plt.close(fig)
    return out


if __name__ == "__main__":
    for p in main(sys.argv[1:]):
        print(p)
