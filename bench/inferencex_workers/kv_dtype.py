"""disagg_kv.csv: the KV-cache dtype each disaggregated run's recipe set for its prefill and decode workers.

For every row of perfmodel/measure/data/inferencex/disagg_limits.csv whose limits were read from one recipe (its
`evidence` names one `NVIDIA/srt-slurm@<commit>:<path>.yaml` or `SemiAnalysisAI/InferenceX@<commit>:<path>.yaml`
other than nvidia-master.yaml), read that recipe at that commit (never infer):
  - TensorRT-LLM: backend.trtllm_config.{prefill,decode}.kv_cache_config.dtype;
  - SGLang: backend.sglang_config.{prefill,decode}.kv-cache-dtype (or kv_cache_dtype);
  - vLLM: backend.vllm_config.{prefill,decode}.kv-cache-dtype (or kv_cache_dtype);
the value as written with its line, or `auto` where the worker's section sets none (each engine's default:
TensorRT-LLM KvCacheConfig.dtype "auto", SGLang --kv-cache-dtype "auto", vLLM CacheConfig.cache_dtype "auto": the
model's data type or its checkpoint's KV quantization). Rows whose limits came from nvidia-master.yaml settings or
from no file in the mirrors are left out. No measured TTFT, TPOT or throughput is read.

Run: .venv/bin/python bench/inferencex_workers/kv_dtype.py
"""
import csv
import collections
import os
import re
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from limits import DATA, IX, SRT, node_get, node_path, show  # noqa: E402

OUT = os.path.join(DATA, 'disagg_kv.csv')
COLS = ['id', 'engine', 'prefill_kv_dtype', 'decode_kv_dtype', 'evidence']
SECTIONS = {'trtllm_config': ('trtllm', [('kv_cache_config', 'dtype')]),
            'sglang_config': ('sglang', [('kv-cache-dtype',), ('kv_cache_dtype',)]),
            'vllm_config': ('vllm', [('kv-cache-dtype',), ('kv_cache_dtype',)])}
REPOS = {'NVIDIA/srt-slurm': SRT, 'SemiAnalysisAI/InferenceX': IX}
RECIPE = re.compile(r'=(NVIDIA/srt-slurm|SemiAnalysisAI/InferenceX)@(\w+):([^#;\s]+\.yaml)#L\d+')


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


def main():
    rows = list(csv.DictReader(open(os.path.join(DATA, 'disagg_limits.csv'), newline='', encoding='utf-8')))
    out, skipped = [], collections.Counter()
    for r in rows:
        srcs = {(a, b, c) for a, b, c in RECIPE.findall(r['evidence']) if not c.endswith('nvidia-master.yaml')}
        if len(srcs) != 1:
            skipped['no recipe' if not srcs else 'several recipes'] += 1
            continue
        repo, commit, path = srcs.pop()
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
            ev.append(f'{role}: {repo}@{commit[:12]}:{path}' + (f'#L{line}' if line else ' sets none (the default, auto)'))
        out.append({'id': r['id'], 'engine': engine, 'prefill_kv_dtype': kv['prefill'][0],
                    'decode_kv_dtype': kv['decode'][0], 'evidence': '; '.join(ev)})
    tmp = OUT + '.tmp'
    with open(tmp, 'w', newline='', encoding='utf-8') as f:
        w = csv.DictWriter(f, COLS, lineterminator='\n')
        w.writeheader()
        w.writerows(out)
    os.replace(tmp, OUT)
    print('rows', len(rows), 'written', len(out), 'left out', dict(skipped))
    print(sorted(collections.Counter((x['engine'], x['prefill_kv_dtype'], x['decode_kv_dtype']) for x in out).items()))


if __name__ == '__main__':
    sys.exit(main())
