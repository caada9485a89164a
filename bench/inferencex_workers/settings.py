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
  - TensorRT-LLM: backend.trtllm_config.{prefill,decode}.moe_config.backend, empty where the recipe sets none;
  - each pool's redundant expert slots (expert-parallel load balancing): SGLang's ep-num-redundant-experts (or
    ep_num_redundant_experts; 0 where the section sets none, server_args.py `ep_num_redundant_experts: int = 0`),
    TensorRT-LLM's moe_config.load_balancer.num_slots less the model's routed experts (the row's checkpoint's
    catalog model, perfmodel's moe.n_experts; 0 where the pool sets no load_balancer: one slot an expert).
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
        'prefill_redundant_experts', 'decode_redundant_experts', 'evidence']
REDUNDANT = (('ep-num-redundant-experts',), ('ep_num_redundant_experts',))
_EXPERTS = {}


def routed_experts(row_id):
    """The routed experts of the catalog model a sample row's checkpoint is (silicon_plan.MODELS), or None."""
    if not _EXPERTS:
        import csv

        from perfmodel import api
        from perfmodel.serving.silicon_plan import MODELS, SAMPLE
        with open(SAMPLE, newline='', encoding='utf-8') as f:
            for r in csv.DictReader(f):
                name = MODELS.get(r['model_path'])
                if name is not None:
                    (m,), _ = api.specs(name, 'h100-sxm')
                    _EXPERTS[r['id']] = m.moe.n_experts if m.moe else None
    return _EXPERTS.get(row_id)
RECV = (('scheduler-recv-interval',), ('scheduler_recv_interval',))
SA_DEFAULTS = {'rounds': ('num_prompts_mult', 10), 'spread': ('random_range_ratio', 0.8)}


def read(repo, commit, path, engine, row_id=None):
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
            _, lb = node_get(node_get(node_get(node_get(node_get(root, 'backend')[1], 'trtllm_config')[1], role)[1],
                                      'moe_config')[1], 'load_balancer')
            if lb is None:
                out[f'{role}_redundant_experts'] = (0, None)
                continue
            v, line = node_path(lb, ('num_slots',))
            E = routed_experts(row_id)
            if v is None or not re.fullmatch(r'[1-9]\d*', str(v).strip()) or E is None or int(v) < E:
                return None, f'{role} load_balancer num_slots {v!r} is not a whole number of slots >= the experts'
            out[f'{role}_redundant_experts'] = (int(v) - E, line)
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
        for role in ('prefill', 'decode'):
            _, sec = node_get(cfg, role)
            v, line = next(((v, line) for v, line in (node_path(sec, k) for k in REDUNDANT) if v is not None),
                           (None, None))
            if v is not None and not re.fullmatch(r'\d+', str(v).strip()):
                return None, f'{role} ep-num-redundant-experts {v!r} is not a whole number'
            out[f'{role}_redundant_experts'] = (int(v), line) if v is not None else (0, None)
    return out, None


def main():
    out, skipped, rows = [], collections.Counter(), 0
    for r, repo, commit, path in one_recipe_rows(skipped):
        rows += 1
        got, why = read(repo, commit, path, r['engine'], r['id'])
        if got is None:
            skipped[why.split(':')[-1].strip()] += 1
            continue
        row, ev = {'id': r['id']}, []
        for col in COLS[1:-1]:
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
    print('redundant experts (prefill, decode):', sorted(collections.Counter(
        (str(x['prefill_redundant_experts']), str(x['decode_redundant_experts'])) for x in out).items()))


if __name__ == '__main__':
    sys.exit(main())
