"""The MoE backend each InferenceX TensorRT-LLM and vLLM row of the silicon sample ran: TensorRT-LLM's
moe_config.backend, vLLM's Marlin where the script selects it. No measured latency is read.
- aggregated rows: by executing the row's benchmark script (agg_config.csv `script`: path@commit, several joined by
  |) with the row's environment and every external command stubbed, up to the server's launch, then reading the
  moe_config the script wrote (else its MOE_BACKEND);
- disaggregated rows: the prefill and decode sections' moe_config.backend of the srt-slurm recipe the row ran
  (disagg_workers.csv `source`: NVIDIA/srt-slurm@<commit>:<path>);
- aggregated vLLM rows: MARLIN where every candidate script exports VLLM_MXFP4_USE_MARLIN=1 at its top level (not
  inside a branch, not commented) before it launches `vllm serve`: vLLM then runs MXFP4 experts with Marlin instead
  of its default selection (perfmodel/moe_backends.py). Rows whose scripts set nothing are left out.

    python bench/inferencex_agg/moe_backend.py INFERENCEX_MIRROR SRT_SLURM_MIRROR OUT.csv
The mirrors are bare git mirrors of SemiAnalysisAI/InferenceX and NVIDIA/srt-slurm. Writes id, prefill_moe_backend,
decode_moe_backend (one value twice for an aggregated row), evidence; blank where the candidate scripts disagree or
none sets it (the engine's default applies)."""
import csv
import os
import re
import subprocess
import sys
import tempfile

import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "perfmodel", "measure", "data")
LAUNCH = re.compile(r"trtllm-serve|mpirun|srun|python3? -m|wait_for_server_ready|run_benchmark_serving|curl |while |until ")
PRE = "source(){ :; }; check_env_vars(){ :; }; hf(){ :; }; huggingface-cli(){ :; }; sleep(){ :; }; nvidia-smi(){ :; }\n"


def run(mirror, spec, env):
    path, commit = spec.split("@")
    txt = subprocess.run(["git", "--git-dir", mirror, "show", f"{commit}:{path}"], capture_output=True, text=True).stdout
    if not txt:
        return None, f"{spec}: absent"
    with tempfile.TemporaryDirectory() as d:
        lines = txt.splitlines()
        stop = next((i for i, l in enumerate(lines) if LAUNCH.search(l)), len(lines))  # up to the server's launch
        with open(os.path.join(d, "s.sh"), "w") as f:
            f.write("\n".join(lines[:stop]) + "\n")
        cmd = PRE + "trap 'echo IXMOE=${MOE_BACKEND-}' EXIT\ncd " + d + "\n. ./s.sh\n"
        e = {"PATH": "/usr/bin:/bin", "HOME": d, **{k: str(v) for k, v in env.items()}}
        out = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env=e, timeout=20, cwd=d).stdout
        var = re.findall(r"^IXMOE=(.*)$", out, re.M)
        written = ""
        for name in os.listdir(d):  # the engine options the script wrote: moe_config:\n    backend: X
            if name.endswith((".yml", ".yaml")):
                m = re.search(r"moe_config:\s*\n\s+backend:\s*(\S+)", open(os.path.join(d, name)).read())
                written = m.group(1) if m else written
    be = written or (var[-1] if var else "")
    line = next((i + 1 for i, l in enumerate(txt.splitlines()) if "backend:" in l and "moe" in txt), None)
    return be.strip("'\"") or None, f"{spec} moe_config.backend" + (f" (L{line})" if line else "")


def disagg(srt):
    """The prefill and decode workers' moe_config.backend in the srt-slurm recipe each disaggregated row ran."""
    import yaml

    w = pd.read_csv(os.path.join(DATA, "inferencex", "disagg_workers.csv"))
    rows, seen = [], {}
    for r in w.itertuples():
        m = re.search(r"recipe NVIDIA/srt-slurm@([0-9a-f]+):(\S+)", str(r.source))
        if not m:
            continue
        key = m.groups()
        if key not in seen:
            txt = subprocess.run(["git", "--git-dir", srt, "show", f"{key[0]}:{key[1]}"], capture_output=True,
                                 text=True).stdout
            y = yaml.safe_load(txt) if txt else None
            t = ((y or {}).get("backend") or {}).get("trtllm_config") or {}
            seen[key] = tuple(((t.get(s) or {}).get("moe_config") or {}).get("backend") or "" for s in ("prefill", "decode"))
        p, d = seen[key]
        if p or d:
            rows.append({"id": r.id, "prefill_moe_backend": p, "decode_moe_backend": d,
                         "evidence": f"NVIDIA/srt-slurm@{key[0]}:{key[1]} backend.trtllm_config.{{prefill,decode}}"
                                     ".moe_config.backend"})
    return rows


MARLIN = re.compile(r"^export VLLM_MXFP4_USE_MARLIN=[\"']?(1|true|True)[\"']?\s*$")


def vllm_marlin(mirror, spec):
    """(True, evidence) where the script exports VLLM_MXFP4_USE_MARLIN=1 at its top level before `vllm serve`."""
    path, commit = spec.split("@")
    txt = subprocess.run(["git", "--git-dir", mirror, "show", f"{commit}:{path}"], capture_output=True, text=True).stdout
    lines = txt.splitlines()
    serve = next((i for i, line in enumerate(lines) if "vllm serve" in line and not line.lstrip().startswith("#")), None)
    hit = next((i for i, line in enumerate(lines[:serve]) if MARLIN.match(line)), None) if serve is not None else None
    return hit is not None, f"{spec}:L{hit + 1} VLLM_MXFP4_USE_MARLIN=1" if hit is not None else ""


def vllm(mirror):
    cfg = pd.read_csv(os.path.join(DATA, "inferencex", "agg_config.csv"))
    cfg = cfg[cfg["id"].str.contains("_vllm_") & cfg["script"].notna()]
    rows, seen = [], {}
    for r in cfg.itertuples():
        got = [seen.setdefault(s, vllm_marlin(mirror, s)) for s in str(r.script).split("|")]
        if got and all(ok for ok, _ in got):
            rows.append({"id": r.id, "prefill_moe_backend": "MARLIN", "decode_moe_backend": "MARLIN",
                         "evidence": "; ".join(ev for _, ev in got)})
    return rows


def main(mirror, srt, out):
    cfg = pd.read_csv(os.path.join(DATA, "inferencex", "agg_config.csv"))
    cfg = cfg[cfg["id"].str.contains("_trtllm_") & cfg["script"].notna()]
    top = pd.read_csv(os.path.join(DATA, "inferencex", "agg_topology.csv")).set_index("id")
    rows = []
    for r in cfg.itertuples():
        m = re.search(r"_(\d+)x(\d+)_c(\d+)_tp(\d+)(?:_0)?_ep(\d+)", r.id)
        if m:
            isl, osl, conc, tp, ep = m.groups()
        else:  # the database dump's ids (..._cfg<n>): tp and ep from the configuration entry (agg_topology.csv)
            m = re.search(r"_(\d+)x(\d+)_c(\d+)_cfg", r.id)
            if not m or r.id not in top.index:
                continue
            (isl, osl, conc), (tp, ep) = m.groups(), (int(top.at[r.id, "tp"]), int(top.at[r.id, "ep"]))
        dpa = "true" if str(r.enable_attention_dp) == "True" else "false"
        env = dict(ISL=isl, OSL=osl, CONC=conc, TP=tp, EP_SIZE=ep, DP_ATTENTION=dpa, MAX_MODEL_LEN=int(isl) + int(osl) + 200,
                   RANDOM_RANGE_RATIO=0.8, RESULT_FILENAME="r", MODEL="m", PORT=8888, PORT_OFFSET=0)
        got = [run(mirror, s, env) for s in str(r.script).split("|")]
        vals = sorted({b for b, _ in got if b})
        be = vals[0] if len(vals) == 1 else ""
        if not be:
            continue
        rows.append({"id": r.id, "prefill_moe_backend": be, "decode_moe_backend": be,
                     "evidence": "; ".join(ev for _, ev in got) + (" (scripts disagree)" if len(vals) > 1 else "")})
    rows += disagg(srt)
    rows += vllm(mirror)
    tmp = out + ".tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, ["id", "prefill_moe_backend", "decode_moe_backend", "evidence"])
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, out)


if __name__ == "__main__":
    main(*sys.argv[1:4])
