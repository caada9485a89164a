"""limits_check.csv: disagg_limits.csv re-derived from ALL configuration entries the original matching accepted.

limits.py reads only the first entry/recipe of each disagg_workers.csv row's `source`. This script re-runs the
matching of match3.py (docs/validation/disagg-workers.md) for each of the 1,067 rows and keeps every accepted
(commit, entry) hit:
  - versions of .github/configs/nvidia-master.yaml on InferenceX HEAD's history, committed 2025-11-01..2026-04-20
    (as extract.py; taken from /tmp/sub/ix/versions.json restricted to `git rev-list HEAD -- <master>`);
  - version in force at the measured time (exact time: the version at T, and only the keys of the perf-changelog
    entries committed in [T-10min, T]; bare date D: the version in force at D-12h plus those committed in
    (D-12h, D+36h], keys of the changelog entries in that window) -- changelog.py logic, first-parent HEAD;
  - key (model prefix, precision, system, framework[-mtp]), isl/osl, image (if the row has one);
  - concurrency in the recipe's benchmark.concurrencies when a recipe version (newest dated <= T+1d, recipes/ or
    recipies/ spelling) lists them, else in the yaml conc-list;
  - yaml tp == row tp (or the ROW_TP_IS_TOTAL_GPUS rule for image-less rows).
Each hit must give disagg_workers.csv's worker pair (checked). Limits of a hit: its matched recipe version (as
limits.py does for rows with `+ recipe`), else limits_cfg.entry_limits (CONFIG_FILE at 5063eb43, env settings, ...).
A row is filled only if every hit gives the same six values. No measured TTFT/TPOT/throughput column is read.

Run: .venv/bin/python bench/inferencex_workers/limits_check.py   (writes /tmp/sub/lc/limits_checked.csv)
"""
import collections
import csv
import fnmatch
import json
import os
import re
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import limits as L  # noqa: E402
import limits_cfg as LC  # noqa: E402

ROOT = L.ROOT
SAMPLE = os.path.join(ROOT, 'perfmodel/measure/data/aiconfigurator/silicon_sample.csv')
WORKERS = os.path.join(L.DATA, 'disagg_workers.csv')
LIMITS = L.FIRST  # limits.py's first pass, which this checks
OUT = '/tmp/sub/lc/limits_checked.csv'
DIAG = '/tmp/sub/lc/candidates.json'
USE = ['id', 'silicon_data_source', 'backend', 'model_path', 'system', 'precision', 'mode', 'isl', 'osl',
       'prefill_tp_size', 'decode_tp_size', 'prefill_moe_ep_size', 'decode_moe_ep_size']
MODEL = {'deepseek-ai/DeepSeek-R1': 'dsr1', 'openai/gpt-oss-120b': 'gptoss', 'moonshotai/Kimi-K2.5': 'kimik2.5',
         'zhipuai/GLM-5': 'glm5'}
SYS = {'b200_sxm': 'b200', 'b300_sxm': 'b300', 'gb200': 'gb200', 'gb300': 'gb300', 'h200_sxm': 'h200',
       'h100_sxm': 'h100'}
FW = {'trtllm': 'dynamo-trt', 'sglang': 'dynamo-sglang'}
GPN = {'gb200': 4, 'gb300': 4}


def utc(s):
    return datetime.fromisoformat(s.replace('Z', '+00:00')).astimezone(timezone.utc)


def git(repo, *a):
    return subprocess.run(['git', '-C', repo, *a], capture_output=True, text=True)


def norm(i):
    return (i or '').replace('nvcr.io#', 'nvcr.io/').strip()


def keyok(r, k):
    m = re.match(r'^(.+)-(fp4|fp8)-(b200|b300|gb200|gb300|h100|h200)-(dynamo-trt|dynamo-sglang)(-mtp)?$', k)
    return bool(m) and m.group(1) == MODEL[r['model_path']] and m.group(2) == r['precision'] and \
        m.group(3) == SYS[r['system']] and m.group(4) == FW[r['backend']]


def settings(side):
    d = {}
    for s in (side or {}).get('additional-settings') or []:
        if isinstance(s, str) and '=' in s:
            a, b = s.split('=', 1)
            d[a.strip()] = b.strip()
    return d


# ---- changelog (changelog.py logic), computed lazily per first-parent commit
_clog = {}


def changelog_keys(h):
    if h not in _clog:
        a = git(L.IX, 'show', f'{h}:perf-changelog.yaml')
        b = git(L.IX, 'show', f'{h}^:perf-changelog.yaml')
        if a.returncode:
            _clog[h] = None
        else:
            ya = yaml.load(a.stdout, Loader=yaml.CSafeLoader) or []
            yb = (yaml.load(b.stdout, Loader=yaml.CSafeLoader) or []) if b.returncode == 0 else []
            sb = {json.dumps(x, sort_keys=True, default=str) for x in yb}
            new = [x for x in ya if json.dumps(x, sort_keys=True, default=str) not in sb]
            _clog[h] = sorted({k for x in new for k in (x.get('config-keys') or [])})
    return _clog[h]


# ---- recipes (recipes.py logic): every version of the CONFIG_FILE path and its recipes/recipies twin
_recv = {}


def summ(y):
    if not isinstance(y, dict) or not isinstance(y.get('resources'), dict):
        return None
    res = y['resources']
    c = (y.get('benchmark') or {}).get('concurrencies') if isinstance(y.get('benchmark'), dict) else None
    concs = []
    if isinstance(c, str):
        concs = [int(t) for t in re.split(r'[x, ]+', c) if t.strip().isdigit()]
    elif isinstance(c, list):
        concs = [int(t) for t in c if str(t).strip().isdigit()]
    elif isinstance(c, int):
        concs = [c]
    return dict(pw=res.get('prefill_workers'), dw=res.get('decode_workers'), concs=concs)


def recipe_versions(f):
    if f not in _recv:
        vers = []
        for p in {f, f.replace('recipies/', 'recipes/', 1), f.replace('recipes/', 'recipies/', 1)}:
            for line in git(L.SRT, 'log', '--all', '--format=%H %cI', '--', p).stdout.split('\n'):
                if not line:
                    continue
                h, d = line.split()
                txt = L.show(L.SRT, h, p)
                if txt is None:
                    continue
                try:
                    y = yaml.load(txt, Loader=yaml.CSafeLoader)
                except Exception:
                    y = None
                vers.append(dict(commit=h, t=utc(d), path=p, s=summ(y)))
        _recv[f] = vers
    return _recv[f]


def recipe_for(cf, T):
    vs = [x for x in recipe_versions(cf) if x['s'] and x['t'] <= T + timedelta(days=1)]
    return max(vs, key=lambda x: x['t']) if vs else None


def main():
    wrows = list(csv.DictReader(open(WORKERS)))
    ids = {r['id'] for r in wrows}
    samp = {}
    with open(SAMPLE) as f:
        for r in csv.DictReader(f):
            if r['id'] in ids:
                samp[r['id']] = {k: r[k] for k in USE}
    cur = {r['id']: r for r in csv.DictReader(open(LIMITS))}
    # versions as extract.py saw them
    head = set(git(L.IX, 'rev-list', 'HEAD', '--', L.MASTER).stdout.split())
    V = [v for v in json.load(open(LC.VERSIONS))
         if v['commit'] in head and '2025-11-01' <= v['cdate'] <= '2026-04-20']
    for v in V:
        v['t'] = utc(v['cdate'])
    V.sort(key=lambda v: v['t'])
    fp = [(utc(d), h) for h, d in (ln.split() for ln in git(L.IX, 'log', '--first-parent', '--format=%H %cI',
                                                                '--since=2025-11-20', '--until=2026-04-20',
                                                                'HEAD').stdout.split('\n') if ln)]
    merge = L.git(L.SRT, 'rev-parse', '5063eb43')
    out, diag = [], []
    for w in wrows:
        r = samp[w['id']]
        src = dict(x.split('=', 1) for x in r['silicon_data_source'].split('; ') if '=' in x)
        m, img, conc = src['measured'], src.get('image', ''), int(src['silicon_concurrency'])
        # cand_versions / trigger_keys of match3
        if m.endswith('T00:00:00.000Z'):
            d = datetime.fromisoformat(m[:10]).replace(tzinfo=timezone.utc)
            lo, hi = d - timedelta(hours=12), d + timedelta(hours=36)
            T, tlo, thi = hi, lo, hi
        else:
            T = utc(m)
            lo = hi = T
            tlo, thi = T - timedelta(minutes=10), T
        vs, inforce = [], None
        for v in V:
            if v['t'] <= lo:
                inforce = v
        if inforce:
            vs.append(inforce)
        vs += [v for v in V if lo < v['t'] <= hi]
        cs = [(t, h, changelog_keys(h)) for t, h in fp if tlo <= t <= thi]
        tkeys = None if (not cs or any(k is None for _, _, k in cs)) else {k for _, _, kk in cs for k in kk}
        isl, osl = int(r['isl']), int(r['osl'])
        rptp, rdtp = int(float(r['prefill_tp_size'])), int(float(r['decode_tp_size']))
        sysn = SYS[r['system']]
        hits = []
        for v in vs:
            for e in v['entries']:
                if not keyok(r, e['key']) or int(e['isl']) != isl or int(e['osl']) != osl:
                    continue
                if tkeys is not None and not any(fnmatch.fnmatch(e['key'], p) for p in tkeys):
                    continue
                if img and norm(e['image']) != norm(img):
                    continue
                p, dd = e['ss']['prefill'], e['ss']['decode']
                ps, ds = settings(p), settings(dd)
                cf = ps.get('CONFIG_FILE') or ds.get('CONFIG_FILE')
                rec = recipe_for(cf, T) if cf else None
                cl = e['ss'].get('conc-list') or e['ss'].get('conc') or []
                cl = cl if isinstance(cl, list) else [cl]
                rc = list(rec['s']['concs']) if rec else []
                if (rc and conc not in rc) or (not rc and conc not in cl):
                    continue
                pg, dg, pw, dw = p['tp'], dd['tp'], p['num-worker'], dd['num-worker']
                if 'PREFILL_NODES' in ps and sysn in GPN and p['tp'] == 1 and dd['tp'] == 1 and \
                        e['framework'] == 'dynamo-sglang':
                    pg = int(ps['PREFILL_NODES']) * GPN[sysn] / pw
                    dg = int(ds['DECODE_NODES']) * GPN[sysn] / dw if 'DECODE_NODES' in ds else dg
                if not ((p['tp'] == rptp and dd['tp'] == rdtp) or
                        (rptp == rdtp and pw * pg + dw * dg == rptp and not img)):
                    continue
                hits.append(dict(v=v, e=e, rec=rec, cf=cf, pw=pw, dw=dw))
        res = dict.fromkeys(L.COLS, '')
        res['id'] = w['id']
        # limits of each hit
        cands = []
        for h in hits:
            v, e = h['v'], h['e']
            if h['rec']:
                eng, vals, _ = LC.recipe_limits(h['rec']['commit'], h['rec']['path'])
                if eng is None:
                    eng, vals = '', {}
                kind, rsrc = 'recipe', (h['rec']['commit'], h['rec']['path'])
            else:
                eng, vals, rsrc, _, _, kind = LC.entry_limits(e, T, merge, v['commit'])
            cands.append(dict(h=h, eng=eng or '', vals=vals, kind=kind, rsrc=rsrc,
                              lim=tuple(vals[k][0] if k in vals else '' for k in L.VALS)))
        wk_ok = all((str(c['h']['pw']), str(c['h']['dw'])) == (w['prefill_workers'], w['decode_workers'])
                    for c in cands)
        first_src = re.search(r'InferenceX@(\w+):\S+ \[([^\]]+)\] isl(\d+)/osl(\d+) search-space\[(\d+)\]',
                              w['source'])
        first_ok = bool(cands) and cands[0]['h']['v']['commit'].startswith(first_src.group(1)) and \
            cands[0]['h']['e']['key'] == first_src.group(2) and str(cands[0]['h']['e']['idx']) == first_src.group(5)
        n = len(cands)
        lims = collections.OrderedDict()
        for c in cands:
            lims.setdefault(c['lim'], []).append(c)
        specs = sorted({str(c['h']['e']['ss'].get('spec-decoding', 'none')) for c in cands})
        if not cands:
            res['note'] = 'no candidates'
            status = 'none'
        elif len(lims) > 1:
            dmb = sorted({c['lim'][3] for c in cands}, key=lambda x: (x == '', float(x) if x else 0))
            res['note'] = f'ambiguous: {n} candidates ({"|".join(x or "empty" for x in dmb)})'
            status = 'ambiguous'
        else:
            c = cands[0]
            h, cm = c['h'], c['h']['v']['commit']
            res['engine'] = c['eng']
            evid = []
            if c['kind'] == 'env' or c['kind'] == 'config_file':
                node = LC.composed_entry(cm, h['e']['key'], h['e']['isl'], h['e']['osl'], h['e']['idx'])
                sl = LC.settings_lines(node)
                if c['kind'] == 'config_file' and 'CONFIG_FILE' in sl:
                    evid.append('config_file=' + L.ev('SemiAnalysisAI/InferenceX', cm, L.MASTER, sl['CONFIG_FILE'][1]))
            for col in L.VALS:
                if col in c['vals']:
                    res[col] = c['vals'][col][0]
                    if c['kind'] == 'env':
                        evid.append(f'{col}=' + L.ev('SemiAnalysisAI/InferenceX', cm, L.MASTER, sl[L.ENV[col]][1]))
                    elif c['rsrc']:
                        repo = 'SemiAnalysisAI/InferenceX' if c['kind'] == 'ixrecipe' else 'NVIDIA/srt-slurm'
                        evid.append(f'{col}=' + L.ev(repo, c['rsrc'][0], c['rsrc'][1], c['vals'][col][1]))
            res['evidence'] = '; '.join(evid)
            res['note'] = f'{n} candidates agree'
            status = 'agree'
        if cands and not wk_ok:
            res['note'] += '; WORKERS_DIFFER from disagg_workers.csv'
        out.append(res)
        cl_ = cur.get(w['id'], {})
        differs = status == 'agree' and any(str(res[k]) != cl_.get(k, '') for k in L.VALS)
        diag.append(dict(id=w['id'], spec=w['speculative'], status=status, n=n, wk_ok=wk_ok, first_ok=first_ok,
                         differs=differs, specs=specs, tkeys=sorted(tkeys) if tkeys is not None else None,
                         cur=[cl_.get(k, '') for k in L.VALS],
                         cands=[dict(commit=c['h']['v']['commit'][:12], key=c['h']['e']['key'],
                                     idx=c['h']['e']['idx'], spec=str(c['h']['e']['ss'].get('spec-decoding', 'none')),
                                     rec=(c['h']['rec']['commit'][:12] + ':' + c['h']['rec']['path']) if c['h']['rec'] else None,
                                     cf=c['h']['cf'], kind=c['kind'], eng=c['eng'], lim=list(c['lim'])) for c in cands]))
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    for path, writer in ((OUT, 'csv'), (DIAG, 'json')):
        tmp = path + '.tmp'
        with open(tmp, 'w', newline='') as fh:
            if writer == 'csv':
                wr = csv.DictWriter(fh, L.COLS, lineterminator='\n')
                wr.writeheader()
                wr.writerows(out)
            else:
                json.dump(diag, fh, indent=0)
        os.replace(tmp, path)
    print('rows', len(out))
    C = collections.Counter((d['spec'], d['status']) for d in diag)
    for sp in sorted({d['spec'] for d in diag}):
        print(sp, {s: C[(sp, s)] for s in ('agree', 'ambiguous', 'none')})
    print('total', collections.Counter(d['status'] for d in diag))
    print('workers differ from csv:', sum(1 for d in diag if d['cands'] and not d['wk_ok']))
    print('first candidate != source first entry:', sum(1 for d in diag if not d['first_ok']))
    print('agreeing rows whose values differ from disagg_limits.csv:', sum(1 for d in diag if d['differs']))


if __name__ == '__main__':
    sys.exit(main())
