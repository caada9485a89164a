"""disagg_settings.csv: the benchmark each disaggregated run's recipe ran, and its SGLang decode receive interval.

For every row of perfmodel/measure/data/inferencex/disagg_limits.csv whose limits were read from one recipe (its
`evidence` names one `NVIDIA/srt-slurm@<commit>:<path>.yaml` or `SemiAnalysisAI/InferenceX@<commit>:<path>.yaml`
other than nvidia-master.yaml), read that recipe at that commit (never infer):
  - benchmark.type, and where it is sa-bench, benchmark.num_prompts_mult and benchmark.random_range_ratio, or
    srt-slurm's defaults where the recipe sets none (src/srtctl/benchmarks/sa_bench.py: `b.num_prompts_mult ...
    else "10"`, `b.random_range_ratio ... else "0.8"`; sa-bench/bench.sh `NUM_PROMPTS_MULT=${13:-10}`,
    `RANDOM_RANGE_RATIO=${12:-0.8}`): concurrency x 10 measured prompts, each length drawn from [0.8 L, L];
  - SGLang: backend.sglang_config.decode.scheduler-recv-interval (or scheduler_recv_interval), or 1 where the decode
    section sets none (SGLang's default, server_args.py `scheduler_recv_interval: int = 1`);
  - TensorRT-LLM: backend.trtllm_config.{prefill,decode}.moe_config.backend, empty where the recipe sets none.
Each value with its line, or where the recipe sets none. Rows without exactly one recipe are left out. No measured
TTFT, TPOT or throughput is read.

Run: .venv/bin/python bench/inferencex_workers/settings.py
"""
import collections
import os
import re
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from limits import (DATA, RECIPE_REPOS as REPOS, node_get, node_path, one_recipe_rows, show,  # noqa: E402
                    write_table)

OUT = os.path.join(DATA, 'disagg_settings.csv')
COLS = ['id', 'benchmark', 'rounds', 'spread', 'decode_recv_interval', 'prefill_moe_backend', 'decode_moe_backend',
        'evidence']
RECV = (('scheduler-recv-interval',), ('scheduler_recv_interval',))
SA_DEFAULTS = {'rounds': ('num_prompts_mult', 10), 'spread': ('random_range_ratio', 0.8)}


def read(repo, commit, path, engine):
    """({column: (value, line or None)}, None) of one recipe, or (None, reason)."""
    txt = show(REPOS[repo], commit, path)
    if txt is None:
        return None, f'{path} not found at {commit[:12]}'
    root = yaml.compose(txt)
    out = {'benchmark': node_path(root, ('benchmark', 'type'))}
    if out['benchmark'][0] == 'sa-bench':
        for col, (key, default) in SA_DEFAULTS.items():
            v, line = node_path(root, ('benchmark', key))
            out[col] = (v, line) if v is not None else (default, None)
    if engine == 'trtllm':  # TensorRT-LLM's moe_config.backend per pool (its default AUTO where it sets none)
        for role in ('prefill', 'decode'):
            out[f'{role}_moe_backend'] = node_path(root, ('backend', 'trtllm_config', role, 'moe_config', 'backend'))
    if engine == 'sglang':
        _, backend = node_get(root, 'backend')
        _, cfg = node_get(backend, 'sglang_config')
        _, sec = node_get(cfg, 'decode')
        if sec is None:
            return None, 'no sglang_config.decode'
        v, line = next(((v, line) for v, line in (node_path(sec, k) for k in RECV) if v is not None), (None, None))
        if v is not None and not re.fullmatch(r'[1-9]\d*', str(v).strip()):
            return None, f'scheduler-recv-interval {v!r} is not a whole number'
        out['decode_recv_interval'] = (int(v), line) if v is not None else (1, None)
    return out, None


def main():
    out, skipped, rows = [], collections.Counter(), 0
    for r, repo, commit, path in one_recipe_rows(skipped):
        rows += 1
        got, why = read(repo, commit, path, r['engine'])
        if got is None:
            skipped[why.split(':')[-1].strip()] += 1
            continue
        row, ev = {'id': r['id']}, []
        for col in COLS[1:7]:
            v, line = got.get(col, (None, None))
            row[col] = '' if v is None else v
            if v is not None:
                where = f'#L{line}' if line else ' sets none (the default)'
                ev.append(f'{col}: {repo}@{commit[:12]}:{path}{where}')
        out.append({**row, 'evidence': '; '.join(ev)})
    write_table(OUT, COLS, out)  # atomic
    print('rows', rows + sum(skipped.values()), 'written', len(out), 'left out', dict(skipped))
    print(sorted(collections.Counter((x['benchmark'], str(x['rounds']), str(x['spread']), str(x['decode_recv_interval']))
                                     for x in out).items()))


if __name__ == '__main__':
    sys.exit(main())
