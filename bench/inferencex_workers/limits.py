"""disagg_limits.csv: the engine limits each disaggregated run's configuration set for its prefill and decode workers.

For every row of perfmodel/measure/data/inferencex/disagg_workers.csv, read (never infer) from the configuration
the run used:
  - rows with `+ recipe NVIDIA/srt-slurm@<commit>:<path>`: that recipe at that commit
    (backend.trtllm_config.{prefill,decode} or backend.sglang_config.{prefill,decode});
  - rows without a recipe: InferenceX `.github/configs/nvidia-master.yaml` at the row's commit, entry [key],
    seq-len-config isl/osl, search-space[k] (0-based, as bench/inferencex_workers/extract.py numbers them):
      * `CONFIG_FILE=<path>` in additional-settings: the srt-slurm recipe at 5063eb43 (the merge of
        ishandhanani/srt-slurm sa-submission-q1-2026), every other version of the path compared;
      * `PREFILL_MAX_BATCH_SIZE=...` style settings: those values, with the nvidia-master.yaml line;
      * otherwise (GB200 SGLang SCRIPT_MODE runs): settings live in Dynamo's submit_disagg.sh, not in the mirrors.
Line numbers come from PyYAML's composed nodes (the line of the key). No measured TTFT/TPOT/throughput is read.

Run: .venv/bin/python bench/inferencex_workers/limits.py
"""
import csv
import collections
import os
import re
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, 'perfmodel/measure/data/inferencex')
FIRST = '/tmp/sub/limits_first.csv'  # each row's first configuration entry (limits_merge.py reads it)
SRT = '/work/.mirror/NVIDIA+srt-slurm/repo'
IX = '/work/.mirror/SemiAnalysisAI+InferenceX/repo'
MASTER = '.github/configs/nvidia-master.yaml'
COLS = ['id', 'engine', 'prefill_max_batch', 'prefill_max_tokens', 'prefill_mem_fraction',
        'decode_max_batch', 'decode_max_tokens', 'decode_mem_fraction', 'evidence', 'note']
VALS = COLS[2:8]

# per engine: column suffix -> candidate key paths inside the prefill/decode section
KEYS = {
    'trtllm': {'max_batch': [('max_batch_size',)], 'max_tokens': [('max_num_tokens',)],
               'mem_fraction': [('kv_cache_config', 'free_gpu_memory_fraction')]},
    'sglang': {'max_batch': [('max-running-requests',), ('max_running_requests',)],
               'max_tokens': [('chunked-prefill-size',), ('chunked_prefill_size',)],
               'mem_fraction': [('mem-fraction-static',), ('mem_fraction_static',)]},
}
ENV = {'prefill_max_batch': 'PREFILL_MAX_BATCH_SIZE', 'prefill_max_tokens': 'PREFILL_MAX_NUM_TOKENS',
       'prefill_mem_fraction': 'PREFILL_GPU_MEM_FRACTION', 'decode_max_batch': 'DECODE_MAX_BATCH_SIZE',
       'decode_max_tokens': 'DECODE_MAX_NUM_TOKENS', 'decode_mem_fraction': 'DECODE_GPU_MEM_FRACTION'}

_show = {}


# a recipe named in disagg_limits.csv's evidence (kv_dtype.py and settings.py read each row's one recipe again)
RECIPE_REPOS = {'NVIDIA/srt-slurm': SRT, 'SemiAnalysisAI/InferenceX': IX}
RECIPE_EVIDENCE = re.compile(r'=(NVIDIA/srt-slurm|SemiAnalysisAI/InferenceX)@(\w+):([^#;\s]+\.yaml)#L\d+')


def one_recipe_rows(skipped):
    """(row, repo, commit, path) for each row of disagg_limits.csv whose limits were read from one recipe other than
    nvidia-master.yaml; the others are counted in `skipped` (a Counter) as 'no recipe' or 'several recipes'."""
    with open(os.path.join(DATA, 'disagg_limits.csv'), newline='', encoding='utf-8') as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        srcs = {(a, b, c) for a, b, c in RECIPE_EVIDENCE.findall(r['evidence']) if not c.endswith('nvidia-master.yaml')}
        if len(srcs) != 1:
            skipped['no recipe' if not srcs else 'several recipes'] += 1
            continue
        yield (r, *srcs.pop())


def write_table(path, cols, rows, eol='\n'):
    """One CSV of the data folder, written atomically (perfmodel.fileio.write_text)."""
    import io

    from perfmodel.fileio import write_text
    buf = io.StringIO()
    w = csv.DictWriter(buf, cols, lineterminator=eol)
    w.writeheader()
    w.writerows(rows)
    write_text(path, buf.getvalue())


def show(repo, commit, path):
    k = (repo, commit, path)
    if k not in _show:
        p = subprocess.run(['git', '-C', repo, 'show', f'{commit}:{path}'], capture_output=True, text=True)
        _show[k] = p.stdout if p.returncode == 0 else None
    return _show[k]


def git(repo, *args):
    return subprocess.run(['git', '-C', repo, *args], capture_output=True, text=True, check=True).stdout.strip()


def node_get(node, key):
    if not isinstance(node, yaml.MappingNode):
        return None, None
    for k, v in node.value:
        if k.value == key:
            return k, v
    return None, None


def node_path(node, path):
    """(scalar text as written, 1-based line of the last key) or (None, None)."""
    kn = None
    for p in path:
        kn, node = node_get(node, p)
        if node is None:
            return None, None
    if not isinstance(node, yaml.ScalarNode) or node.tag.endswith(':null'):
        return None, None
    return node.value, kn.start_mark.line + 1


def num(text):
    """The value as written; integers normalised to int text."""
    if re.fullmatch(r'[+-]?\d+', text.strip()):
        return str(int(text))
    return text.strip()


def recipe_limits(commit, path):
    """Values of one srt-slurm recipe: (engine, {col: (value, line)}) or (None, reason)."""
    txt = show(SRT, commit, path)
    if txt is None:
        return None, f'recipe {path} not found at {commit[:12]}'
    root = yaml.compose(txt)
    _, backend = node_get(root, 'backend')
    engine = None
    for eng, sect in (('trtllm', 'trtllm_config'), ('sglang', 'sglang_config')):
        _, cfg = node_get(backend, sect)
        if cfg is not None:
            engine = eng
            break
    if engine is None:
        return None, f'recipe {path}@{commit[:12]}: no trtllm_config/sglang_config'
    out = {}
    for role in ('prefill', 'decode'):
        _, sec = node_get(cfg, role)
        for suffix, cands in KEYS[engine].items():
            for c in cands:
                v, line = node_path(sec, c)
                if v is not None:
                    out[f'{role}_{suffix}'] = (num(v), line)
                    break
    return engine, out


def master_entry(commit, key, isl, osl, idx):
    """The composed search-space node for [key] isl/osl search-space[idx] (0-based)."""
    txt = show(IX, commit, MASTER)
    root = yaml.compose(txt)
    _, ent = node_get(root, key)
    _, slcs = node_get(ent, 'seq-len-configs')
    for sl in slcs.value:
        if node_path(sl, ('isl',))[0] == str(isl) and node_path(sl, ('osl',))[0] == str(osl):
            _, ss = node_get(sl, 'search-space')
            return ss.value[idx]
    raise KeyError((commit, key, isl, osl, idx))


def settings(ss, role):
    """additional-settings of the role: list of (NAME, value, line)."""
    _, r = node_get(ss, role)
    _, a = node_get(r, 'additional-settings')
    out = []
    for n in (a.value if a is not None else []):
        name, _, val = n.value.partition('=')
        out.append((name, val, n.start_mark.line + 1))
    return out


def ev(repo, commit, path, line):
    return f'{repo}@{commit[:12]}:{path}#L{line}'


def main():
    rows = list(csv.DictReader(open(os.path.join(DATA, 'disagg_workers.csv'))))
    merge = git(SRT, 'rev-parse', '5063eb43')
    versions = {}
    out = []
    for r in rows:
        s = r['source']
        res = dict.fromkeys(COLS, '')
        res['id'] = r['id']
        evid, notes = [], []
        m = re.search(r'InferenceX@(\w+):nvidia-master\.yaml \[([^\]]+)\] isl(\d+)/osl(\d+) search-space\[(\d+)\]', s)
        mr = re.search(r'recipe NVIDIA/srt-slurm@(\w+):(\S+\.yaml)', s)
        ix_commit, key, isl, osl, idx = m.group(1), m.group(2), int(m.group(3)), int(m.group(4)), int(m.group(5))
        if mr:
            commit, path = git(SRT, 'rev-parse', mr.group(1)), mr.group(2)
            engine, vals = recipe_limits(commit, path)
            src = (commit, path)
        else:
            ss = master_entry(ix_commit, key, isl, osl, idx)
            # verify the 0-based index: num-worker must match the row's workers
            for role, col in (('prefill', 'prefill_workers'), ('decode', 'decode_workers')):
                _, rn = node_get(ss, role)
                nw = node_path(rn, ('num-worker',))[0]
                if nw != r[col]:
                    notes.append(f'INDEX_CHECK_FAILED {role} num-worker {nw} != {r[col]}')
            pre, dec = settings(ss, 'prefill'), settings(ss, 'decode')
            cfgf = [x for x in pre + dec if x[0] == 'CONFIG_FILE']
            envs = {x[0]: x for x in pre + dec}
            if cfgf:
                path = cfgf[0][1]
                evid.append('config_file=' + ev('SemiAnalysisAI/InferenceX', ix_commit, MASTER, cfgf[0][2]))
                engine, vals = recipe_limits(merge, path)
                src = (merge, path)
                if engine is None:
                    # an older layout of the branch, deleted before the merge: use the newest version that has
                    # the file only if every version agrees on these values
                    found = []
                    for v in git(SRT, 'log', '--all', '--format=%H', '--', path).split():
                        e2, v2 = recipe_limits(v, path)
                        if e2 is not None:
                            found.append((v, e2, v2))
                    same = {(e2, tuple(sorted((k, x[0]) for k, x in v2.items()))) for _, e2, v2 in found}
                    if found and len(same) == 1:
                        src, engine, vals = (found[0][0], path), found[0][1], found[0][2]
                        notes.append(f'{path} is not at 5063eb43 (removed before the merge); read at '
                                     f'{found[0][0][:12]}, the newest of the {len(found)} versions in '
                                     f'NVIDIA/srt-slurm that hold it, all of which give the same values')
                    else:
                        notes.append(f'{path} is not at 5063eb43 and its {len(found)} versions disagree: left empty')
                        engine, vals = ('sglang' if 'sglang' in key else 'trtllm'), {}
                elif path not in versions:
                    vs = git(SRT, 'log', '--all', '--format=%H', '--', path).split()
                    diff = []
                    for v in vs:
                        if v == merge:
                            continue
                        e2, v2 = recipe_limits(v, path)
                        if e2 is None:
                            continue  # deleted in that commit
                        a = {k: x[0] for k, x in (vals or {}).items()}
                        b = {k: x[0] for k, x in v2.items()}
                        if a != b:
                            d = ','.join(f'{k}={b.get(k, "")}' for k in VALS if a.get(k) != b.get(k))
                            diff.append(f'{v[:12]}: {d}')
                    versions[path] = (len(vs), diff)
                if path not in versions:
                    pass
                elif versions[path][1]:
                    nv, diff = versions[path]
                    notes.append(f'CONFIG_FILE read at 5063eb43 (the branch merge); of {nv} versions of {path} in '
                                 f'NVIDIA/srt-slurm these differ: ' + ' | '.join(diff))
                else:
                    nv = versions[path][0]
                    notes.append(f'CONFIG_FILE read at 5063eb43; all {nv} versions of {path} in NVIDIA/srt-slurm agree')
            elif any(k in envs for k in ENV.values()):
                engine = 'trtllm'
                vals = {col: (num(envs[name][1]), envs[name][2]) for col, name in ENV.items() if name in envs}
                src = None
                notes.append('nvidia-master.yaml additional-settings, exported by benchmark-multinode-tmpl.yml and '
                             'passed positionally by the benchmark script to Dynamo benchmark_disagg.slurm '
                             '(not in the mirrors)')
            else:
                engine = 'sglang' if 'sglang' in key else ''
                vals = {}
                mode = ','.join(x[1] for x in pre + dec if x[0] == 'SCRIPT_MODE')
                notes.append('not in the mirrors: the benchmark script runs Dynamo\'s submit_disagg.sh'
                             + (f' (SCRIPT_MODE {mode})' if mode else '') + ', whose settings InferenceX does not hold')
        res['engine'] = engine or ''
        for col in VALS:
            if col in vals:
                v, line = vals[col]
                res[col] = v
                if src is None:
                    evid.append(f'{col}=' + ev('SemiAnalysisAI/InferenceX', ix_commit, MASTER, line))
                else:
                    evid.append(f'{col}=' + ev('NVIDIA/srt-slurm', src[0], src[1], line))
        res['evidence'] = '; '.join(evid)
        res['note'] = '; '.join(notes)
        out.append(res)
    dst = FIRST  # the first pass; limits_merge.py makes the shipped table
    tmp = dst + '.tmp'
    with open(tmp, 'w', newline='') as f:
        w = csv.DictWriter(f, COLS, lineterminator='\n')
        w.writeheader()
        w.writerows(out)
    os.replace(tmp, dst)
    # summary
    print('rows', len(out))
    for c in ['engine'] + VALS:
        print(c, sum(1 for x in out if x[c]))
    for c in ('prefill_max_batch', 'decode_max_batch'):
        print(c, sorted(collections.Counter(x[c] for x in out).items(), key=lambda t: (t[0] == '', int(t[0] or 0))))


if __name__ == '__main__':
    sys.exit(main())
