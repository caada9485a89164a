"""limits_cfg.csv: engine limits of the silicon sample's 264 `_cfg<N>` disaggregated rows (db-dump InferenceX runs).

Unlike the 1,067 rows of disagg_limits.csv these rows record their workers and per-worker layout, so each is
matched directly to the search-space entries of InferenceX `.github/configs/nvidia-master.yaml` (every version in
the mirror, `git log --all`; extracted to /tmp/sub/ix/versions.json by /tmp/sub/ix/extract_all.py, a copy of
extract.py without the date window). An entry fits a row when all of these hold:
  - key `<prefix>-<precision>-<system>-<framework>[-...]`: model prefix (dsr1, kimik2.5), precision, system family
    (b200_sxm -> b200, ...), framework (trtllm -> dynamo-trt, sglang -> dynamo-sglang, vllm -> dynamo-vllm);
  - the key's image equals the row's image (the source string's last field; nvcr.io# spelled nvcr.io/);
  - isl/osl; the row's concurrency (id `_c<N>_`) in the entry's conc-list (else in the named recipe's
    benchmark.concurrencies, said in note);
  - prefill and decode num-worker; GPUs per worker (the sample's tp x attention_dp) equal to the entry's tp (for the
    GB200 SGLang entries whose tp is a `tp: 1` placeholder: PREFILL_NODES/DECODE_NODES x 4 / num-worker);
  - dp-attn equal to (the sample's attention_dp_size > 1); where no entry fits with it, dp-attn is not matched
    (the sample's attention-DP columns are unreliable, docs/validation/disagg-workers.md) and note says so.
The limits of each fitting entry are read as limits.py reads them (CONFIG_FILE recipe at NVIDIA/srt-slurm 5063eb43,
else the version(s) of the path in the mirror; PREFILL_MAX_BATCH_SIZE-style settings; otherwise not in the mirrors),
plus vLLM recipes (backend.vllm_config: max-num-seqs, max-num-batched-tokens, gpu-memory-utilization). A row is
filled only if every fitting entry gives the same six values; else `ambiguous: <n> candidates`.
No measured TTFT/TPOT/throughput column is read.

Run: .venv/bin/python bench/inferencex_workers/limits_cfg.py   (writes /tmp/sub/limits_cfg.csv)
"""
import collections
import csv
import json
import os
import re
import sys
from datetime import datetime, timedelta, timezone

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import limits as L  # noqa: E402  (reuse: show, git, node_get, node_path, num, ev, KEYS, ENV, COLS, VALS)

ROOT = L.ROOT
SAMPLE = os.path.join(ROOT, 'perfmodel/measure/data/aiconfigurator/silicon_sample.csv')
VERSIONS = '/tmp/sub/ix/versions.json'
OUT = '/tmp/sub/limits_cfg.csv'
KEYS = dict(L.KEYS)
KEYS['vllm'] = {'max_batch': [('max-num-seqs',), ('max_num_seqs',)],
                'max_tokens': [('max-num-batched-tokens',), ('max_num_batched_tokens',)],
                'mem_fraction': [('gpu-memory-utilization',), ('gpu_memory_utilization',)]}
SYS = {'b200_sxm': 'b200', 'b300_sxm': 'b300', 'gb200': 'gb200', 'gb300': 'gb300', 'h100_sxm': 'h100',
       'h200_sxm': 'h200'}
FW = {'trtllm': 'dynamo-trt', 'sglang': 'dynamo-sglang', 'vllm': 'dynamo-vllm'}
PREFIX = {'dsr1': 'dsr1', 'kimik2_5': 'kimik2.5'}
GPN = {'gb200': 4, 'gb300': 4}
# only the layout/identity columns are read from the sample (never TTFT/TPOT/throughput)
USE = ['id', 'silicon_data_source', 'backend', 'backend_version', 'system', 'precision', 'mode', 'isl', 'osl',
       'prefill_num_workers', 'prefill_tp_size', 'prefill_attention_dp_size', 'prefill_moe_ep_size',
       'decode_num_workers', 'decode_tp_size', 'decode_attention_dp_size', 'decode_moe_ep_size']


def recipe_limits(commit, path, repo=L.SRT):
    """limits.recipe_limits with vLLM added: (engine, {col: (value, line)}, concurrencies) or (None, reason, None)."""
    txt = L.show(repo, commit, path)
    if txt is None:
        return None, f'recipe {path} not found at {commit[:12]}', None
    root = yaml.compose(txt)
    _, backend = L.node_get(root, 'backend')
    engine = cfg = None
    for eng, sect in (('trtllm', 'trtllm_config'), ('sglang', 'sglang_config'), ('vllm', 'vllm_config')):
        _, cfg = L.node_get(backend, sect)
        if cfg is not None:
            engine = eng
            break
    if engine is None:
        return None, f'recipe {path}@{commit[:12]}: no trtllm_config/sglang_config/vllm_config', None
    out = {}
    for role in ('prefill', 'decode'):
        _, sec = L.node_get(cfg, role)
        for suffix, cands in KEYS[engine].items():
            for c in cands:
                v, line = L.node_path(sec, c)
                if v is not None:
                    out[f'{role}_{suffix}'] = (L.num(v), line)
                    break
    concs = set()
    try:
        y = yaml.safe_load(txt)
        c = (y.get('benchmark') or {}).get('concurrencies')
        if isinstance(c, str):
            concs = {int(t) for t in re.split(r'[x, ]+', c) if t.strip().isdigit()}
        elif isinstance(c, list):
            concs = {int(t) for t in c}
        elif isinstance(c, int):
            concs = {c}
    except Exception:
        pass
    return engine, out, concs


_vers = {}


def path_versions(path):
    """[(commit, date, engine, vals, concs)] of every mirror version that holds path (newest first)."""
    if path not in _vers:
        res = []
        for line in L.git(L.SRT, 'log', '--all', '--format=%H %cI', '--', path).split('\n'):
            if not line:
                continue
            h, d = line.split()
            e, v, c = recipe_limits(h, path)
            if e is not None:
                res.append((h, datetime.fromisoformat(d).astimezone(timezone.utc), e, v, c))
        _vers[path] = res
    return _vers[path]


def vkey(vals):
    return tuple((k, vals[k][0]) for k in L.VALS if k in vals)


_rec = {}


def config_file_limits(path, T, merge):
    """(engine, vals, src_commit, concs, note) for a CONFIG_FILE path, read as limits.py does."""
    k = (path, T.date())
    if k in _rec:
        return _rec[k]
    e, v, c = recipe_limits(merge, path)
    vs = path_versions(path)
    if e is not None:
        diff = [f'{h[:12]}: ' + ','.join(f'{x}={v2.get(x, ("",))[0]}' for x in L.VALS
                                          if v.get(x, ('',))[0] != v2.get(x, ('',))[0])
                for h, _, e2, v2, _ in vs if h != merge and vkey(v2) != vkey(v)]
        note = (f'CONFIG_FILE read at 5063eb43; all {len(vs)} versions of {path} in NVIDIA/srt-slurm agree'
                if not diff else f'CONFIG_FILE read at 5063eb43; of {len(vs)} versions of {path} these differ: '
                + ' | '.join(diff))
        res = (e, v, merge, c, note)
    elif not vs:
        res = (None, {}, None, set(), f'{path} not in NVIDIA/srt-slurm (any ref)')
    elif len({(x[2], vkey(x[3])) for x in vs}) == 1:
        h = vs[0]
        res = (h[2], h[3], h[0], h[4], f'{path} is not at 5063eb43; read at {h[0][:12]}, the newest of the '
               f'{len(vs)} versions in NVIDIA/srt-slurm that hold it, all of which give the same values')
    else:
        early = [x for x in vs if x[1] <= T + timedelta(days=1)]
        if early and len({(x[2], vkey(x[3])) for x in early}) == 1:
            h = early[0]
            res = (h[2], h[3], h[0], h[4], f'{path} is not at 5063eb43 and its {len(vs)} versions disagree; read '
                   f'at {h[0][:12]}, the newest version dated <= measured+1d, all {len(early)} of which agree')
        else:
            res = (None, {}, None, set(), f'{path} is not at 5063eb43 and its versions dated <= measured+1d '
                   f'({len(early)}) disagree or none exist: left empty')
    _rec[k] = res
    return res


def settings_list(side):
    out = []
    for s in (side or {}).get('additional-settings') or []:
        if isinstance(s, str) and '=' in s:
            a, b = s.split('=', 1)
            out.append((a.strip(), b.strip()))
    return out


IXREC = 'benchmarks/multi_node/srt-slurm-recipes/'
_ixrec = {}


def entry_limits(e, T, merge, commit=None):
    """(engine, vals{col: (value, line-or-None)}, src, concs, note, kind)."""
    rec = e['ss'].get('recipe') or (e['ss'].get('prefill') or {}).get('recipe') or \
        (e['ss'].get('decode') or {}).get('recipe')
    if rec:
        # newer layout: `recipe:` names a file under InferenceX benchmarks/multi_node/srt-slurm-recipes/ (resolved
        # by benchmark-multinode-tmpl.yml into CONFIG_FILE, runners/launch_gb200-nv.sh), read at the entry's commit;
        # where that commit has no such file, srt-slurm's recipes/<recipe> (as a CONFIG_FILE)
        path = IXREC + rec
        k = (commit, path)
        if k not in _ixrec:
            eng, vals, concs = recipe_limits(commit, path, L.IX)
            if eng is None:
                eng, vals, src, concs, note = config_file_limits('recipes/' + rec, T, merge)
                _ixrec[k] = (eng, vals, (src, 'recipes/' + rec) if src else None, concs,
                             f'recipe: {rec} (not in InferenceX@{commit[:12]}); ' + note, 'config_file')
            else:
                _ixrec[k] = (eng, vals, (commit, path), concs, 'search-space recipe: read from InferenceX '
                             f'{path} at the entry\'s commit', 'ixrecipe')
        return _ixrec[k]
    pre, dec = settings_list(e['ss'].get('prefill')), settings_list(e['ss'].get('decode'))
    cf = [b for a, b in pre + dec if a == 'CONFIG_FILE']
    envs = dict(pre + dec)
    if cf:
        eng, vals, src, concs, note = config_file_limits(cf[0], T, merge)
        return eng, vals, (src, cf[0]) if src else None, concs, note, 'config_file'
    if any(n in envs for n in L.ENV.values()):
        vals = {col: (L.num(envs[n]), None) for col, n in L.ENV.items() if n in envs}
        return ('trtllm', vals, None, set(), 'nvidia-master.yaml additional-settings, exported by '
                'benchmark-multinode-tmpl.yml and passed positionally by the benchmark script to Dynamo '
                'benchmark_disagg.slurm (not in the mirrors)', 'env')
    mode = ','.join(b for a, b in pre + dec if a == 'SCRIPT_MODE')
    eng = 'sglang' if 'sglang' in e['key'] else ''
    return (eng, {}, None, set(), 'not in the mirrors: the benchmark script runs Dynamo\'s submit_disagg.sh'
            + (f' (SCRIPT_MODE {mode})' if mode else '') + ', whose settings InferenceX does not hold', 'none')


_root = {}


def composed_entry(commit, key, isl, osl, idx):
    if commit not in _root:
        _root[commit] = yaml.compose(L.show(L.IX, commit, L.MASTER))
    root = _root[commit]
    _, ent = L.node_get(root, key)
    _, slcs = L.node_get(ent, 'seq-len-configs')
    for sl in slcs.value:
        if L.node_path(sl, ('isl',))[0] == str(isl) and L.node_path(sl, ('osl',))[0] == str(osl):
            _, ss = L.node_get(sl, 'search-space')
            return ss.value[idx]
    raise KeyError((commit, key, isl, osl, idx))


def settings_lines(ss):
    out = {}
    for role in ('prefill', 'decode'):
        for name, val, line in L.settings(ss, role):
            out.setdefault(name, (val, line))
    return out


def norm_img(i):
    return (i or '').replace('nvcr.io#', 'nvcr.io/').strip()


def main():
    V = json.load(open(VERSIONS))
    for v in V:
        v['t'] = datetime.fromisoformat(v['cdate']).astimezone(timezone.utc)
    merge = L.git(L.SRT, 'rev-parse', '5063eb43')
    rows = []
    with open(SAMPLE) as f:
        for r in csv.DictReader(f):
            if r['mode'] == 'disagg' and '_cfg' in r['id']:
                rows.append({k: r[k] for k in USE})
    # index entries by (prefix, precision, system, framework, isl, osl)
    idx = collections.defaultdict(list)
    for v in V:
        for e in v['entries']:
            m = re.match(r'^(.+?)-(fp4|fp8)-(b200|b300|gb200|gb300|h100|h200)-(dynamo-[a-z]+)', e['key'])
            if m:
                idx[(m.group(1), m.group(2), m.group(3), m.group(4), int(e['isl']), int(e['osl']))].append((v, e))
    out, diag = [], []
    for r in rows:
        res = dict.fromkeys(L.COLS, '')
        res['id'] = r['id']
        mid = re.match(r'^(.+?)_(b200|b300|gb200|gb300|h100|h200)_(trtllm|sglang|vllm)_(fp4|fp8)_disagg_(\d+)x(\d+)_c(\d+)_cfg(\d+)$', r['id'])
        prefix, _, be, prec, isl, osl, conc = mid.group(1), mid.group(2), mid.group(3), mid.group(4), \
            int(mid.group(5)), int(mid.group(6)), int(mid.group(7))
        sysn = SYS[r['system']]
        src = r['silicon_data_source'].split('; ')
        img = norm_img(src[-1])
        meas = [s for s in src if s.startswith('measured=')][0][9:]
        T = datetime.fromisoformat(meas.replace('Z', '+00:00'))
        f = lambda c: int(float(r[c]))  # noqa: E731
        pw, dw = f('prefill_num_workers'), f('decode_num_workers')
        pg = f('prefill_tp_size') * f('prefill_attention_dp_size')
        dg = f('decode_tp_size') * f('decode_attention_dp_size')
        pdp, ddp = f('prefill_attention_dp_size') > 1, f('decode_attention_dp_size') > 1
        strict, loose = [], []
        stage = collections.Counter()
        for v, e in idx.get((PREFIX[prefix], prec, sysn, FW[be], isl, osl), []):
            stage['key'] += 1
            if norm_img(e['image']) != img:
                continue
            stage['image'] += 1
            ss = e['ss']
            p, d = ss.get('prefill') or {}, ss.get('decode') or {}
            if (p.get('num-worker'), d.get('num-worker')) != (pw, dw):
                continue
            stage['workers'] += 1
            ept, edt = p.get('tp'), d.get('tp')
            ps, ds = dict(settings_list(p)), dict(settings_list(d))
            how = []
            if 'PREFILL_NODES' in ps and sysn in GPN and ept == 1 and edt == 1 and 'sglang' in e['key']:
                ept = int(ps['PREFILL_NODES']) * GPN[sysn] / pw
                edt = int(ds['DECODE_NODES']) * GPN[sysn] / dw if 'DECODE_NODES' in ds else edt
                how.append('GPUs/worker from PREFILL_NODES/DECODE_NODES (yaml tp:1 placeholder)')
            if (ept, edt) != (pg, dg):
                continue
            stage['gpus'] += 1
            cl = ss.get('conc-list') or ss.get('conc') or []
            cl = cl if isinstance(cl, list) else [cl]
            eng, vals, rsrc, concs, lnote, kind = entry_limits(e, T, merge, v['commit'])
            if conc in cl:
                how.append('conc in conc-list')
            elif concs and conc in concs:
                how.append(f'conc only in the recipe\'s benchmark.concurrencies (conc-list {cl})')
            else:
                continue
            stage['conc'] += 1
            cand = dict(v=v, e=e, eng=eng, vals=vals, rsrc=rsrc, lnote=lnote, kind=kind, how=how)
            if (bool(p.get('dp-attn')), bool(d.get('dp-attn'))) == (pdp, ddp):
                strict.append(cand)
            else:
                loose.append(cand)
        cands = strict or loose
        dpnote = 'prefix,precision,system,framework,image,isl/osl,concurrency,num-worker P/D,GPUs/worker P/D' + \
            (',dp-attn P/D' if strict else '')
        if not strict and loose:
            e0 = loose[0]['e']['ss']
            dpnote += (f'; dp-attn NOT matched: sample attention_dp>1 is {pdp}/{ddp}, entries say '
                       + '|'.join(sorted({f"{bool((c['e']['ss'].get('prefill') or {}).get('dp-attn'))}/"
                                          f"{bool((c['e']['ss'].get('decode') or {}).get('dp-attn'))}"
                                          for c in loose})))
        if not cands:
            why = ('no entry with this key/isl/osl' if not stage['key'] else 'no entry with this image'
                   if not stage['image'] else 'no entry with these num-worker' if not stage['workers'] else
                   'no entry with these GPUs/worker' if not stage['gpus'] else
                   'concurrency not in any fitting entry\'s conc-list or recipe')
            res['note'] = f'unmatched: {why}'
            out.append(res)
            diag.append((r, 'unmatched', None))
            continue
        # distinct entries (content) and distinct limits
        ents = {}
        for c in cands:
            ents.setdefault((c['e']['key'], c['e']['isl'], c['e']['osl'], json.dumps(c['e']['ss'], sort_keys=True)),
                            []).append(c)
        lim = collections.defaultdict(list)
        for k, cs in ents.items():
            lim[(cs[0]['eng'], vkey(cs[0]['vals']))].append(k)
        specs = sorted({str(c['e']['ss'].get('spec-decoding', 'none')) for c in cands})
        if len(lim) > 1:
            res['note'] = (f'ambiguous: {len(ents)} candidates ({len(lim)} different limit sets; spec-decoding '
                           f'{"|".join(specs)}); matched on {dpnote}')
            out.append(res)
            diag.append((r, 'ambiguous', specs))
            continue
        # cite the candidate whose commit is the newest at or before measured+36h, else the oldest
        def order(c):
            t = c['v']['t']
            return (0, -t.timestamp()) if t <= T + timedelta(hours=36) else (1, t.timestamp())
        c = min(cands, key=order)
        e, cm = c['e'], c['v']['commit']
        node = composed_entry(cm, e['key'], e['isl'], e['osl'], e['idx'])
        sl = settings_lines(node)
        evid = []
        if c['kind'] == 'ixrecipe':
            kn = L.node_get(node, 'recipe')[0] or L.node_get(L.node_get(node, 'prefill')[1], 'recipe')[0] or \
                L.node_get(L.node_get(node, 'decode')[1], 'recipe')[0]
            evid.append('recipe=' + L.ev('SemiAnalysisAI/InferenceX', cm, L.MASTER, kn.start_mark.line + 1))
        if c['kind'] == 'config_file' and 'CONFIG_FILE' in sl:
            evid.append('config_file=' + L.ev('SemiAnalysisAI/InferenceX', cm, L.MASTER, sl['CONFIG_FILE'][1]))
        res['engine'] = c['eng'] or ''
        for col in L.VALS:
            if col in c['vals']:
                res[col] = c['vals'][col][0]
                if c['kind'] == 'env':
                    evid.append(f'{col}=' + L.ev('SemiAnalysisAI/InferenceX', cm, L.MASTER, sl[L.ENV[col]][1]))
                else:
                    repo = 'SemiAnalysisAI/InferenceX' if c['kind'] == 'ixrecipe' else 'NVIDIA/srt-slurm'
                    evid.append(f'{col}=' + L.ev(repo, c['rsrc'][0], c['rsrc'][1], c['vals'][col][1]))
        res['evidence'] = '; '.join(evid)
        other = len(ents) - 1
        res['note'] = (f'SemiAnalysisAI/InferenceX@{cm[:12]}:nvidia-master.yaml [{e["key"]}] isl{e["isl"]}/osl{e["osl"]} '
                       f'search-space[{e["idx"]}] (spec-decoding {"|".join(specs)}; {other} other fitting entr'
                       f'{"y" if other == 1 else "ies"} with the same limits; {len(cands)} (commit, entry) pairs); '
                       f'matched on {dpnote}; {"; ".join(c["how"])}; {c["lnote"]}')
        out.append(res)
        diag.append((r, 'matched', specs))
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    tmp = OUT + '.tmp'
    with open(tmp, 'w', newline='') as fh:
        w = csv.DictWriter(fh, L.COLS, lineterminator='\n')
        w.writeheader()
        w.writerows(out)
    os.replace(tmp, OUT)
    # summary
    print('rows', len(out))
    st = collections.Counter()
    for (r, s, specs), o in zip(diag, out):
        fam = re.match(r'^(.+?_(?:b200|b300|gb200|gb300|h100|h200)_[a-z]+_fp\d)', r['id']).group(1)
        st[(fam, s)] += 1
    fams = sorted({k[0] for k in st})
    print('family matched ambiguous unmatched')
    for fam in fams:
        print(fam, st[(fam, 'matched')], st[(fam, 'ambiguous')], st[(fam, 'unmatched')])
    print(collections.Counter(s for _, s, _ in diag))
    print('ambiguous with mtp|none among candidates:',
          sum(1 for _, s, sp in diag if s == 'ambiguous' and sp and len(sp) > 1))
    print('matched rows whose candidates include both mtp and none:',
          sum(1 for _, s, sp in diag if s == 'matched' and sp and len(sp) > 1))
    for c in L.VALS:
        print(c, sum(1 for x in out if x[c]))
    print('decode_max_batch', sorted(collections.Counter(x['decode_max_batch'] for x in out).items(),
                                     key=lambda t: (t[0] == '', float(t[0] or 0))))


if __name__ == '__main__':
    sys.exit(main())
