"""The 47 disaggregated TensorRT-LLM rows on GB200 that ran Kimi-K2.5 and GLM-5 on 2026-04-02, from their recipes.

The silicon sample's file 2026-03-25.csv holds 25 Kimi-K2.5 and 22 GLM-5 rows (NVFP4, Dynamo with TensorRT-LLM,
GB200), measured 2026-04-02T05:29-05:43Z, `wip=True`, without worker counts. No InferenceX configuration entry was
in force then (docs/validation/disagg-workers.md, "Unmatched"). NVIDIA/srt-slurm holds the recipes these runs
became, committed the next day by their author with every concurrency of the rows:
  - ed40e8ec (2026-04-03T08:13Z) "Add Kimi K2.5 disagg STP and MTP recipes for GB200 NVfp4 (ISL8K_OSL1K and
    ISL1K_OSL1K)", recipes/kimi2.5/trtllm_dynamo/disagg/gb200Nvfp4/, "covering concurrency points from 5 to 2253"
    (the squash-merge message of #24, 94903bdb);
  - 10b37984 (2026-04-03T08:13Z) "Add GLM5 disagg STP recipes for GB200 NVfp4 (ISL8K_OSL1K and ISL1K_OSL1K)",
    recipes/GLM5/disagg/trtllm_dynamo/gb200_nvfp4/.
Each recipe at that commit is read (never inferred): resources.{prefill,decode}_workers and gpus_per_{prefill,
decode}; backend.trtllm_config.{prefill,decode}: enable_attention_dp, max_batch_size, max_num_tokens,
kv_cache_config.dtype and free_gpu_memory_fraction, moe_config.backend; benchmark: isl, osl, concurrencies, type.
A row matches a recipe where its ISL and OSL are the recipe's, its concurrency is in the recipe's list, and its
prefill_tp_size and decode_tp_size are the recipe's GPUs per prefill and per decode worker (the sample's tp of each
pool). Where several recipes match (an STP and an MTP one at one concurrency), they must give the same workers,
GPUs and attention DP, or the row is left out; `speculative` is then `mtp|none`, and a limit, KV dtype or MoE
backend is written only where they all agree. No measured TTFT, TPOT or throughput is read.

Writes (atomically, replacing earlier rows of these ids; other rows untouched, order kept):
  disagg_workers.csv, disagg_limits.csv, moe_backends.csv (perfmodel/measure/data/inferencex/). Their KV-cache
  dtype and benchmark follow from the limits' evidence: run kv_dtype.py and settings.py after it.

Run: .venv/bin/python bench/inferencex_workers/april_recipes.py
"""
import collections
import csv
import io
import os
import re
import subprocess
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from limits import DATA, SRT, node_path, show, write_table  # noqa: E402

SAMPLE = os.path.join(DATA, '..', 'aiconfigurator', 'silicon_sample.csv')
SETS = {'moonshotai/Kimi-K2.5': ('ed40e8ec', 'recipes/kimi2.5/trtllm_dynamo/disagg/gb200Nvfp4/'),
        'zhipuai/GLM-5': ('10b37984', 'recipes/GLM5/disagg/trtllm_dynamo/gb200_nvfp4/')}
NOTE = ('RECIPE_NEXT_DAY: no InferenceX entry was in force at the measured time (a wip run); matched to the recipe '
        'set its author committed to NVIDIA/srt-slurm the next day')


def recipe(commit, path):
    """The facts of one recipe: {field: (value as written, line)}, its engine sections' values, or None."""
    txt = show(SRT, commit, path)
    root = yaml.compose(txt)
    f = {}
    for key, p in (('prefill_workers', ('resources', 'prefill_workers')),
                   ('decode_workers', ('resources', 'decode_workers')),
                   ('prefill_gpus', ('resources', 'gpus_per_prefill')),
                   ('decode_gpus', ('resources', 'gpus_per_decode')),
                   ('isl', ('benchmark', 'isl')), ('osl', ('benchmark', 'osl')), ('bench', ('benchmark', 'type')),
                   ('concurrencies', ('benchmark', 'concurrencies'))):
        f[key] = node_path(root, p)
    for role in ('prefill', 'decode'):
        base = ('backend', 'trtllm_config', role)
        for key, p in (('dp_attn', ('enable_attention_dp',)), ('max_batch', ('max_batch_size',)),
                       ('max_tokens', ('max_num_tokens',)),
                       ('mem_fraction', ('kv_cache_config', 'free_gpu_memory_fraction')),
                       ('moe', ('moe_config', 'backend')),
                       ('mtp', ('speculative_config', 'decoding_type'))):
            f[f'{role}_{key}'] = node_path(root, base + p)
    return f


def main():
    import pandas as pd
    s = pd.read_csv(SAMPLE, dtype=str, keep_default_na=False)
    rows = s[(s['mode'] == 'disagg') & (s['backend'] == 'trtllm') & (s['system'] == 'gb200')
             & s['model_path'].isin(list(SETS)) & (s['prefill_num_workers'] == '') & (s['decode_num_workers'] == '')
             & s['silicon_data_source'].str.contains('source_file=2026-03-25.csv', regex=False)
             & s['silicon_data_source'].str.contains('measured=2026-04-02T', regex=False)]
    recipes = {}
    for model, (commit, d) in SETS.items():
        full = subprocess.run(['git', '-C', SRT, 'rev-parse', commit], capture_output=True, text=True,
                              check=True).stdout.strip()
        files = subprocess.run(['git', '-C', SRT, 'show', '--name-only', '--format=', commit], capture_output=True,
                               text=True, check=True).stdout.split()
        recipes[model] = [(full, p, recipe(full, p)) for p in files if p.startswith(d) and p.endswith('.yaml')]
    workers, limits, moes, skipped = [], [], [], collections.Counter()
    for r in rows.to_dict('records'):
        conc = re.search(r'silicon_concurrency=(\d+)', r['silicon_data_source']).group(1)
        cands = [(c, p, f) for c, p, f in recipes[r['model_path']]
                 if f['isl'][0] == r['isl'] and f['osl'][0] == r['osl'] and conc in str(f['concurrencies'][0]).split()
                 and f['prefill_gpus'][0] == r['prefill_tp_size'] and f['decode_gpus'][0] == r['decode_tp_size']]
        if not cands:
            skipped['no recipe'] += 1
            continue
        shape = {tuple(f[k][0] for k in ('prefill_workers', 'decode_workers', 'prefill_gpus', 'prefill_dp_attn',
                                         'decode_gpus', 'decode_dp_attn')) for _, _, f in cands}
        if len(shape) != 1:
            skipped['recipes disagree on workers'] += 1
            continue
        if {f['bench'][0] for _, _, f in cands} != {'sa-bench'}:
            skipped['not sa-bench'] += 1
            continue
        (c0, p0, f0), n = cands[0], len(cands)
        spec = sorted({'mtp' if f['decode_mtp'][0] else 'none' for _, _, f in cands})
        src = (f'no InferenceX entry (wip run); recipe set NVIDIA/srt-slurm@{c0[:12]} (committed 2026-04-03)'
               + (f' (+{n - 1} agreeing)' if n > 1 else '') + f' + recipe NVIDIA/srt-slurm@{c0[:12]}:{p0}')
        workers.append({'id': r['id'], 'prefill_workers': f0['prefill_workers'][0],
                        'decode_workers': f0['decode_workers'][0], 'prefill_gpus': f0['prefill_gpus'][0],
                        'prefill_dp_attn': f0['prefill_dp_attn'][0], 'decode_gpus': f0['decode_gpus'][0],
                        'decode_dp_attn': f0['decode_dp_attn'][0],
                        'speculative': 'mtp|none' if len(spec) > 1 else spec[0],
                        'note': NOTE, 'source': src})

        def agreed(key):
            vals = {f[key][0] for _, _, f in cands}
            return (f0[key][0], f0[key][1]) if len(vals) == 1 and f0[key][0] is not None else (None, None)

        lim, ev = {'id': r['id'], 'engine': 'trtllm'}, []
        for col, key in (('prefill_max_batch', 'prefill_max_batch'), ('prefill_max_tokens', 'prefill_max_tokens'),
                         ('prefill_mem_fraction', 'prefill_mem_fraction'), ('decode_max_batch', 'decode_max_batch'),
                         ('decode_max_tokens', 'decode_max_tokens'), ('decode_mem_fraction', 'decode_mem_fraction')):
            v, line = agreed(key)
            lim[col] = v or ''
            if v is not None:
                ev.append(f'{col}=NVIDIA/srt-slurm@{c0[:12]}:{p0}#L{line}')
        limits.append({**lim, 'evidence': '; '.join(ev), 'note': f'{n} candidates agree'})
        (pm, _), (dm, _) = agreed('prefill_moe'), agreed('decode_moe')
        if pm or dm:
            moes.append({'id': r['id'], 'prefill_moe_backend': pm or '', 'decode_moe_backend': dm or '',
                         'evidence': f'NVIDIA/srt-slurm@{c0[:12]}:{p0} backend.trtllm_config.{{prefill,decode}}'
                                     '.moe_config.backend'})
    for name, new in (('disagg_workers.csv', workers), ('disagg_limits.csv', limits), ('moe_backends.csv', moes)):
        path = os.path.join(DATA, name)
        with open(path, newline='', encoding='utf-8') as f:
            text = f.read()
        old = list(csv.DictReader(io.StringIO(text, newline='')))
        cols = list(old[0].keys())
        eol = '\r\n' if '\r\n' in text[:4096] else '\n'  # each table keeps its own line ends
        ids = {x['id'] for x in new}
        out = [x for x in old if x['id'] not in ids] + sorted(new, key=lambda x: x['id'])
        write_table(path, cols, out, eol)  # atomic
        print(name, 'rows', len(out), 'of them new or replaced', len(new))
    print('sample rows', len(rows), 'matched', len(workers), 'left out', dict(skipped))
    print(collections.Counter((w['speculative'], w['prefill_workers'], w['decode_workers'], w['decode_gpus'],
                               w['decode_dp_attn']) for w in workers))


if __name__ == '__main__':
    sys.exit(main())
