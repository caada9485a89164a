"""disagg_kv.csv: the KV-cache dtype each disaggregated run's recipe set for its prefill and decode workers.

For every row of perfmodel/measure/data/inferencex/disagg_limits.csv whose limits were read from one recipe (its
`evidence` names one `NVIDIA/srt-slurm@<commit>:<path>.yaml` or `SemiAnalysisAI/InferenceX@<commit>:<path>.yaml`
other than nvidia-master.yaml), read that recipe at that commit (never infer):
  - TensorRT-LLM: backend.trtllm_config.{prefill,decode}.kv_cache_config.dtype;
  - SGLang: backend.sglang_config.{prefill,decode}.kv-cache-dtype (or kv_cache_dtype);
  - vLLM: backend.vllm_config.{prefill,decode}.kv-cache-dtype (or kv_cache_dtype);
the value as written with its line, or `auto` where the worker's section sets none (each engine's default:
TensorRT-LLM KvCacheConfig.dtype "auto", SGLang --kv-cache-dtype "auto", vLLM CacheConfig.cache_dtype "auto": the
model's data type or its checkpoint's KV quantization); `read` is `recipe`.

Then the silicon sample's disaggregated InferenceX SGLang DeepSeek-R1 rows on H100 and H200 that no recipe was read
for (the model those recipes serve, `path: "dsr1"`): every version of
every SGLang recipe for those devices in NVIDIA/srt-slurm (recipes/h100/, recipes/h200/, all commits) sets no KV
dtype, so they are listed `auto` with `read` `uniform` and the count of file versions as evidence (the plan says so
in `assumed`). Other rows (limits from nvidia-master.yaml settings or from no file in the mirrors) are left out.
No measured TTFT, TPOT or throughput is read.

Run: .venv/bin/python bench/inferencex_workers/kv_dtype.py
"""
import collections
import os
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from limits import (DATA, RECIPE_REPOS as REPOS, SRT, node_get, node_path, one_recipe_rows, show,  # noqa: E402
                    write_table)

OUT = os.path.join(DATA, 'disagg_kv.csv')
COLS = ['id', 'engine', 'prefill_kv_dtype', 'decode_kv_dtype', 'read', 'evidence']
UNIFORM = {'h100_sxm': 'recipes/h100', 'h200_sxm': 'recipes/h200'}  # SGLang recipes of these devices: all set none
SECTIONS = {'trtllm_config': ('trtllm', [('kv_cache_config', 'dtype')]),
            'sglang_config': ('sglang', [('kv-cache-dtype',), ('kv_cache_dtype',)]),
            'vllm_config': ('vllm', [('kv-cache-dtype',), ('kv_cache_dtype',)])}


def recipe_kv(repo, commit, path):
    """(engine, {role: (value, line or None)}) of one recipe, or (None, reason)."""
    txt = show(REPOS[repo], commit, path)
    if txt is None:
        return None, f'{path} not found at {commit[:12]}'
    _, backend = node_get(yaml.compose(txt), 'backend')
    for sect, (engine, cands) in SECTIONS.items():
        _, cfg = node_get(backend, sect)
        if cfg is None:
            continue
        out = {}
        for role in ('prefill', 'decode'):
            _, sec = node_get(cfg, role)
            if sec is None:
                return None, f'{path}@{commit[:12]}: no {sect}.{role}'
            found = next(((v, line) for v, line in (node_path(sec, c) for c in cands) if v is not None), None)
            out[role] = found or ('auto', None)
        return engine, out
    return None, f'{path}@{commit[:12]}: no trtllm_config/sglang_config/vllm_config'


def uniform(done):
    """The sample's disagg SGLang rows on UNIFORM's devices without a read recipe, where every version of every
    SGLang recipe for the device in srt-slurm sets no KV dtype (else none)."""
    import pandas as pd
    import subprocess
    sample = pd.read_csv(os.path.join(DATA, '..', 'aiconfigurator', 'silicon_sample.csv'), dtype={'id': str})
    rows = sample[(sample['mode'] == 'disagg') & (sample['backend'] == 'sglang') & sample['system'].isin(list(UNIFORM))
                  & (sample['model_path'] == 'deepseek-ai/DeepSeek-R1')  # the model those recipes serve ("dsr1")
                  & sample['silicon_data_source'].str.contains('source_file=2026-', regex=False)  # InferenceX runs
                  & ~sample['id'].isin(done)]
    out = []
    for system, d in UNIFORM.items():
        versions, values = 0, collections.Counter()
        for c in subprocess.run(['git', '-C', SRT, 'log', '--all', '--format=%H', '--', d], capture_output=True,
                                text=True, check=True).stdout.split():
            files = subprocess.run(['git', '-C', SRT, 'ls-tree', '-r', '--name-only', c, '--', d], capture_output=True,
                                   text=True).stdout.split()
            for f in (f for f in files if f.endswith('.yaml')):
                engine, kv = recipe_kv('NVIDIA/srt-slurm', c, f)
                if engine == 'sglang':
                    versions += 1
                    values.update({kv['prefill'][0], kv['decode'][0]})
        if set(values) != {'auto'}:
            continue
        for rid in rows[rows['system'] == system]['id']:
            out.append({'id': rid, 'engine': 'sglang', 'prefill_kv_dtype': 'auto', 'decode_kv_dtype': 'auto',
                        'read': 'uniform', 'evidence': f'no recipe read; all {versions} versions of the SGLang '
                        f'recipes under NVIDIA/srt-slurm {d}/ (every commit) set no kv-cache-dtype'})
    return out


def main():
    out, skipped, rows = [], collections.Counter(), 0
    for r, repo, commit, path in one_recipe_rows(skipped):
        rows += 1
        engine, kv = recipe_kv(repo, commit, path)
        if engine is None:
            skipped[kv.split(':')[-1].strip()] += 1
            continue
        if engine != r['engine']:
            skipped[f'recipe engine {engine} != {r["engine"]}'] += 1
            continue
        ev = []
        for role in ('prefill', 'decode'):
            v, line = kv[role]
            where = f'#L{line}' if line else ' sets none (the default, auto)'
            ev.append(f'{role}: {repo}@{commit[:12]}:{path}{where}')
        out.append({'id': r['id'], 'engine': engine, 'prefill_kv_dtype': kv['prefill'][0],
                    'decode_kv_dtype': kv['decode'][0], 'read': 'recipe', 'evidence': '; '.join(ev)})
    out += uniform({x['id'] for x in out})
    write_table(OUT, COLS, out)  # atomic
    print('rows', rows + sum(skipped.values()), 'written', len(out), 'left out', dict(skipped))
    print(sorted(collections.Counter((x['engine'], x['prefill_kv_dtype'], x['decode_kv_dtype'], x['read'])
                                     for x in out).items()))


if __name__ == '__main__':
    sys.exit(main())
