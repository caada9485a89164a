"""agg_ep.csv: the aggregated InferenceX rows whose benchmark script ran the experts expert-parallel over all of the
run's tensor-parallel GPUs whatever the configuration's `ep` (and so the id's `_ep<k>`) said.

Read from the row's script (agg_config.csv `script`, one path@commit; rows with several candidate scripts are left
out), never inferred; no measured latency is read. A row is listed where the launch line's expert parallelism is
the tensor-parallel size by the script's own text:
- TensorRT-LLM: `trtllm-serve ... --ep_size=$TP` (or `--ep_size $TP`), or `--ep_size=$EP_SIZE` where the script's
  only assignment of EP_SIZE is `EP_SIZE="$TP"` at the top level (e.g. benchmarks/dsr1_fp8_h200_trt_slurm.sh
  @e06929c70 L24 and L83);
- SGLang: `--enable-ep-moe` on the launch line (the ep size is the tp size; SGLang's deprecated-arguments table:
  "`--enable-ep-moe` | `--ep-size <N>` (set to same value as `--tp-size`)"; InferenceX perf-changelog, PR
  InferenceMAX#204: "Replace --enable-ep-moe with --ep-size $EP_SIZE"), e.g. benchmarks/dsr1_fp4_b200_docker.sh
  @e06929c70 L24;
- vLLM: `--enable-expert-parallel` (experts over tp x dp ranks, vLLM's expert-parallel deployment docs) passed
  without a condition, or under `if [ "$EP_SIZE" -ge 1 ]`, which every EP_SIZE the workflow passes (>= 1)
  satisfies (benchmarks/single_node/minimaxm2.5_fp8_h200.sh@1d5cae141 L25-26).
- TensorRT-LLM: `--ep_size=$EP_SIZE` where the script decides EP_SIZE itself from ISL, OSL and CONC in its
  "Determine DP_ATTENTION, EP_SIZE and MOE_BACKEND" block (benchmarks/dsr1_fp4_b200_trt_slurm.sh@e06929c70 L23-77:
  EP_SIZE="$TP" above 8 clients at tp 8 and 1k/1k, ...): the block is run in bash with the row's values and the row
  is listed where it sets EP_SIZE to TP.
Other scripts pass the configuration's EP_SIZE through (SGLang `--ep-size $EP_SIZE`, vLLM `-gt 1`), and their rows
are not listed. A TensorRT-LLM script that decides DP_ATTENTION itself from ISL, OSL and CONC (dsr1_fp8_h200_trt_slurm
.sh: true above 64 clients at 1k/1k and 1k/8k, above 32 at 8k/1k) has that block run in bash with the row's values;
a row where it turns attention DP on, which the sample's attention_dp_size of 1 does not say (the sample records the
configuration's dp-attn, which the script overrides), is listed with ep `dp`: the server ran attention DP over the
run's tp GPUs (`enable_attention_dp: $DP_ATTENTION` in the engine options the script writes), the experts over its
ranks. Until 2026-12-07 such rows were left out.

    python bench/inferencex_agg/expert_parallel.py INFERENCEX_MIRROR OUT.csv
"""
import csv
import io
import os
import re
import subprocess
import sys

import pandas as pd

from perfmodel.fileio import write_text

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "perfmodel", "measure", "data")
TRT_TP = re.compile(r"--ep_size[= ]\"?\$\{?TP\}?\b")
TRT_VAR = re.compile(r"--ep_size[= ]\"?\$\{?EP_SIZE\}?\b")
EP_ASSIGN = re.compile(r"^(\s*)(?:export\s+)?EP_SIZE=(.*)$")
VLLM_EP = re.compile(r"--enable-expert-parallel")
GE1 = re.compile(r"if \[\[? \"?\$\{?EP_SIZE\}?\"? -ge 1 \]\]?")


def read(mirror, spec):
    path, commit = spec.split("@")
    r = subprocess.run(["git", "--git-dir", mirror, "show", f"{commit}:{path}"], capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else None


def live(lines):
    return [(i + 1, ln) for i, ln in enumerate(lines) if ln.strip() and not ln.lstrip().startswith("#")]


def forced_ep(mirror, spec):
    """(evidence) where the script's launch runs the experts expert-parallel over all its tp GPUs, else None."""
    txt = read(mirror, spec)
    if txt is None:
        return None
    lines = live(txt.splitlines())
    if "trtllm-serve" in txt:
        tp = [i for i, ln in lines if TRT_TP.search(ln)]
        if tp:
            return f"{spec}:L{tp[0]} --ep_size=$TP"
        var = [i for i, ln in lines if TRT_VAR.search(ln)]
        sets = [(i, m.group(1), m.group(2).strip()) for i, ln in lines for m in [EP_ASSIGN.match(ln)] if m]
        if var and len(sets) == 1 and sets[0][1] == "" and sets[0][2] in ('"$TP"', "$TP", '"${TP}"', "${TP}"):
            return f"{spec}:L{sets[0][0]} EP_SIZE={sets[0][2]}, L{var[0]} --ep_size=$EP_SIZE"
        return None
    if "sglang.launch_server" in txt:
        ep = [i for i, ln in lines if "--enable-ep-moe" in ln]
        sized = [i for i, ln in lines if re.search(r"--ep-size|--expert-parallel-size|--ep\b", ln)]
        return f"{spec}:L{ep[0]} --enable-ep-moe" if ep and not sized else None
    if "vllm serve" in txt or "vllm.entrypoints" in txt:
        ep = [i for i, ln in lines if VLLM_EP.search(ln)]
        if not ep:
            return None
        conds = [(i, ln) for i, ln in lines if re.match(r"\s*(if|elif)\b", ln) and "EP" in ln]
        if not conds:  # the flag on the serve command itself, no EP condition anywhere in the script
            on_cmd = [i for i, ln in lines
                      if VLLM_EP.search(ln) and (ln.lstrip().startswith("--") or "vllm serve" in ln)]
            return f"{spec}:L{on_cmd[0]} --enable-expert-parallel (no condition)" if on_cmd else None
        if len(conds) == 1 and GE1.search(conds[0][1]):
            return (f"{spec}:L{conds[0][0]} {conds[0][1].strip()} (every EP_SIZE >= 1), "
                    f"L{ep[0]} --enable-expert-parallel")
        return None
    return None


def script_var(mirror, spec, var, isl, osl, conc, tp):
    """`var` (DP_ATTENTION, EP_SIZE) as the script's own decision block sets it for the row (bash, only its
    assignments and tests), a string, or None where the script has no such block."""
    lines = (read(mirror, spec) or "").splitlines()
    a = next((i for i, ln in enumerate(lines) if ln.startswith("# ========= Determine DP_ATTENTION")), None)
    b = next((i for i, ln in enumerate(lines)
              if a is not None and i > a and ln.startswith('echo "Final configuration')), None)
    if a is None or b is None:
        return None
    block = "\n".join(lines[a + 1:b])
    if re.search(r"\$\(|`|\beval\b|>|\bsource\b|\.\s", block):  # only assignments and tests are run
        return None
    r = subprocess.run(["bash", "-c", block + f'\necho "${{{var}}}"'], capture_output=True, text=True,
                       env={"ISL": str(isl), "OSL": str(osl), "CONC": str(conc), "TP": str(tp),
                            "PATH": "/usr/bin:/bin"})
    return r.stdout.strip() if r.returncode == 0 else None


def script_dp(mirror, spec, isl, osl, conc, tp):
    """DP_ATTENTION as the script's own decision block sets it for the row, or None where it has no such block."""
    v = script_var(mirror, spec, "DP_ATTENTION", isl, osl, conc, tp)
    return None if v is None else v == "true"


def block_ep(mirror, spec):
    """(evidence) where a TensorRT-LLM script launches with `--ep_size=$EP_SIZE` and sets EP_SIZE only inside its
    decision block (script_dp's), which decides it per row; else None."""
    txt = read(mirror, spec)
    if txt is None or "trtllm-serve" not in txt:
        return None
    lines = live(txt.splitlines())
    var = [i for i, ln in lines if TRT_VAR.search(ln)]
    a = next((i + 1 for i, ln in enumerate(txt.splitlines()) if ln.startswith("# ========= Determine DP_ATTENTION")),
             None)
    if not var or a is None:
        return None
    return f"{spec}:L{a} decision block, L{var[0]} --ep_size=$EP_SIZE"


def main(mirror, out):
    cfg = pd.read_csv(os.path.join(DATA, "inferencex", "agg_config.csv"), dtype=str)
    sample = pd.read_csv(os.path.join(DATA, "aiconfigurator", "silicon_sample.csv"), dtype={"id": str})
    rows = cfg.merge(sample[["id", "backend", "isl", "osl", "batch_size", "tp_size", "attention_dp_size"]], on="id")
    rows = rows[rows.script.notna() & ~rows.script.fillna("").str.contains("|", regex=False)]
    seen, found, dp_on = {}, [], 0
    for r in rows.itertuples():
        if r.script not in seen:
            seen[r.script] = forced_ep(mirror, r.script) or block_ep(mirror, r.script)
        if seen[r.script] is None:
            continue
        shape = (int(r.isl), int(r.osl), int(r.batch_size), int(r.tp_size))
        dp = script_dp(mirror, r.script, *shape)
        if (r.attention_dp_size or 1) > 1:
            continue
        if dp:
            dp_on += 1
            found.append((r.id, "dp", seen[r.script] + "; the script's DP_ATTENTION block: true"))
            continue
        if "decision block" in seen[r.script]:
            ep = script_var(mirror, r.script, "EP_SIZE", *shape)
            if ep != str(int(r.tp_size)) or int(r.tp_size) < 2:
                continue
            found.append((r.id, "tp", seen[r.script] + f"; the block: EP_SIZE={ep}, DP_ATTENTION false"))
            continue
        found.append((r.id, "tp", seen[r.script] + ("; the script's DP_ATTENTION block: false" if dp is False else "")))
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["id", "ep", "evidence"])
    w.writerows(sorted(found))
    write_text(out, buf.getvalue())  # atomic (perfmodel.fileio)
    scripts = sorted({e.split(":")[0] for _, _, e in found})
    print(f"{len(found)} of {len(rows)} rows ({dp_on} of them attention DP by the script); scripts: {scripts}",
          file=sys.stderr)


if __name__ == "__main__":
    main(*sys.argv[1:3])
