"""The KV-cache dtype each aggregated InferenceX vLLM, SGLang and TensorRT-LLM row of the silicon sample launched its
engine with,
read from the row's benchmark script (agg_config.csv `script`, one path@commit; rows whose candidate scripts are
several are left out). No measured latency is read.

    python bench/inferencex_agg/kv_dtype.py INFERENCEX_MIRROR OUT.csv

INFERENCEX_MIRROR is a bare git mirror of SemiAnalysisAI/InferenceX. Writes id, kv_cache_dtype, evidence:
- the value of the script's --kv-cache-dtype (or a config line `kv-cache-dtype: ...`) where it sets one value, with
  its line; for TensorRT-LLM, the `dtype:` under the `kv_cache_config:` of the extra-options YAML the script writes
  (a heredoc) for trtllm-serve;
- "auto" where the script launches the engine itself (`vllm serve`, `sglang.launch_server`) and sets none: the
  engine's default, which vLLM (CacheConfig.cache_dtype) and SGLang (server_args --kv-cache-dtype) document as
  "auto", the model's data type (TensorRT-LLM's KvCacheConfig.dtype default is "auto" as well: the checkpoint's KV
  quantization, else the model's data type);
- nothing (the row is left out) where the value is a shell variable, differs between branches, or the script does
  not launch the engine itself."""
import csv
import os
import re
import subprocess
import sys

import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "perfmodel", "measure", "data")
FLAG = re.compile(r"kv[-_]cache[-_]dtype[\s=:\"']+([^\s\"'\\]+)")
LAUNCH = re.compile(r"vllm serve|vllm\.entrypoints|sglang\.launch_server|trtllm-serve")
TRT = re.compile(r"^(\s*)kv_cache_config:\s*$")  # TensorRT-LLM's YAML: the dtype is a key of this block


def read(mirror, spec):
    path, commit = spec.split("@")
    r = subprocess.run(["git", "--git-dir", mirror, "show", f"{commit}:{path}"], capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else None


def kv_of(mirror, spec):
    txt = read(mirror, spec)
    if txt is None:
        return None
    lines = txt.splitlines()
    hits = [(i + 1, m.group(1)) for i, line in enumerate(lines) for m in FLAG.finditer(line)
            if not line.lstrip().startswith("#")]
    for i, line in enumerate(lines):  # kv_cache_config:\n    dtype: X (keys indented deeper than the block's)
        b = TRT.match(line)
        for j in range(i + 1, len(lines)) if b else ():
            inner = re.match(r"^(\s*)([\w-]+):\s*(\S*)", lines[j])
            if inner is None or len(inner.group(1)) <= len(b.group(1)):
                break
            if inner.group(2) == "dtype":
                hits.append((j + 1, inner.group(3)))
    values = {v for _, v in hits}
    if len(values) == 1 and not next(iter(values)).startswith("$"):
        v = values.pop()
        return v, f"{spec}:" + ",".join(f"L{i}" for i, _ in hits)
    if not hits and LAUNCH.search(txt):
        return "auto", f"{spec}: launches the engine with no --kv-cache-dtype (the default, auto)"
    return None


def main(mirror, out):
    cfg = pd.read_csv(os.path.join(DATA, "inferencex", "agg_config.csv"), dtype=str)
    sample = pd.read_csv(os.path.join(DATA, "aiconfigurator", "silicon_sample.csv"), dtype={"id": str})
    rows = cfg.merge(sample[["id", "backend"]], on="id")
    rows = rows[rows.backend.isin(["vllm", "sglang", "trtllm"]) & rows.script.notna() & ~rows.script.fillna("").str.contains("|",
                                                                                                                 regex=False)]
    seen, found = {}, []
    for rid, spec in zip(rows.id, rows.script):
        if spec not in seen:
            seen[spec] = kv_of(mirror, spec)
        if seen[spec] is not None:
            found.append((rid, *seen[spec]))
    tmp = out + ".tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["id", "kv_cache_dtype", "evidence"])
        w.writerows(sorted(found))
    os.replace(tmp, out)
    print(f"{len(found)} of {len(rows)} rows", file=sys.stderr)


if __name__ == "__main__":
    main(*sys.argv[1:3])
