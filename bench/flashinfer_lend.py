"""May vLLM's tables borrow SGLang's timing of FlashInfer's MXFP4 x MXFP8 MoE kernel (kernels.FLASHINFER_W4A8)?
Both engines call FlashInfer's trtllm-gen kernel; AIConfigurator timed its MXFP4 x BF16 form at gpt-oss's shape in
both. This compares those two timings point by point (same shape, tp, ep, token count; the fastest kernel per point;
power-law routing, kernel_set.MOE_DISTRIBUTION). A kernel-table check only. usage: python bench/flashinfer_lend.py"""
import sys
from pathlib import Path

import pandas as pd

from perfmodel import kernels
from perfmodel.kernel_set import MOE_DISTRIBUTION

KEYS = ["hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size", "num_tokens"]


def fastest(path: Path) -> pd.Series:
    df = pd.read_parquet(path)
    df = df[(df["moe_dtype"] == "w4a16_mxfp4") & (df["distribution"] == MOE_DISTRIBUTION)]
    df = df[df["kernel_source"].str.contains("flashinfer_trtllm")]  # FlashInfer's kernel, not Marlin's or Triton's
    return df.groupby(KEYS)["latency"].min()


def main() -> int:
    root = kernels.aic_dir()
    if root is None:
        print("flashinfer_lend: needs the kernels extra (pip install \"perfmodel[kernels]\")", file=sys.stderr)
        return 2
    print(f"{'system':<10} {'vllm':>7} {'sglang':>7} {'points':>6} {'median':>7} {'p10':>6} {'p90':>6} {'median |r-1|':>12}")
    for system in sorted(p.name for p in root.iterdir() if p.is_dir()):
        v = sorted((root / system / "moe" / "vllm").glob("*/moe_perf.parquet"), key=lambda p: kernels._vkey(p.parent.name))
        s = sorted((root / system / "moe" / "sglang").glob("*/moe_perf.parquet"), key=lambda p: kernels._vkey(p.parent.name))
        if not v or not s:
            continue
        r = (fastest(v[-1]) / fastest(s[-1])).dropna()
        if r.empty:
            continue
        q = r.quantile([0.1, 0.9])
        print(f"{system:<10} {v[-1].parent.name:>7} {s[-1].parent.name:>7} {len(r):>6} {r.median():>7.3f} {q[0.1]:>6.3f} "
              f"{q[0.9]:>6.3f} {(r - 1).abs().median():>12.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
