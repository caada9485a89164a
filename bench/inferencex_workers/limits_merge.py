"""The shipped perfmodel/measure/data/inferencex/disagg_limits.csv, from the outputs of the three scripts before it.

Run after extract_all.py, limits.py (first pass: each row's first configuration entry, /tmp/sub/limits_first.csv),
limits_cfg.py (the 264 `_cfg` rows, /tmp/sub/limits_cfg.csv) and limits_check.py (every candidate entry,
/tmp/sub/lc/limits_checked.csv and candidates.json):
  1. the 1,067 rows of disagg_workers.csv, as limits_check.py left them: the six values where every candidate
     entry sets the same ones, else none (`ambiguous: <n> candidates (...)`); its note, then the first pass's;
  2. an ambiguous row keeps, column by column, each value every candidate sets alike (the first pass's value and
     evidence, which are the first candidate's; the note says which columns);
  3. the 264 `_cfg` rows of limits_cfg.py, but for the rows whose entries run attention DP where the sample's row
     does not (`dp-attn NOT matched`): their limits are per rank of a layout the row is not predicted with, so
     they are emptied and the note says why;
  4. every row names its engine: the run's backend in the silicon sample (the plan refuses a row whose limits are
     under another engine's names).
No measured TTFT/TPOT/throughput column is read. Writes the shipped table atomically.

Run: .venv/bin/python bench/inferencex_workers/limits_merge.py [--check]   (--check: compare, write nothing)
"""
import csv
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DST = os.path.join(ROOT, 'perfmodel/measure/data/inferencex/disagg_limits.csv')
SAMPLE = os.path.join(ROOT, 'perfmodel/measure/data/aiconfigurator/silicon_sample.csv')
FIRST, CFG = '/tmp/sub/limits_first.csv', '/tmp/sub/limits_cfg.csv'
CHECKED, CANDS = '/tmp/sub/lc/limits_checked.csv', '/tmp/sub/lc/candidates.json'
V = ['prefill_max_batch', 'prefill_max_tokens', 'prefill_mem_fraction', 'decode_max_batch', 'decode_max_tokens',
     'decode_mem_fraction']


def read(path):
    with open(path, newline='', encoding='utf-8') as f:
        r = csv.DictReader(f)
        return r.fieldnames, list(r)


def merge():
    cols, checked = read(CHECKED)
    first = {r['id']: r for r in read(FIRST)[1]}
    cands = {d['id']: d['cands'] for d in json.load(open(CANDS))}
    backend = {r['id']: r['backend'] for r in read(SAMPLE)[1]}
    out = []
    for r in checked:  # 1 and 2
        o = first[r['id']]
        note = r['note'] if not o['note'] else f"{r['note']}; {o['note']}"
        if r['note'].startswith('ambiguous'):
            c = cands[r['id']]
            same = [j for j, v in enumerate(V) if len({x['lim'][j] for x in c}) == 1 and c[0]['lim'][j] != '']
            if same:
                assert all(o[V[j]] == c[0]['lim'][j] for j in same), r['id']
                ev = dict(e.split('=', 1) for e in o['evidence'].split('; ') if '=' in e)
                for j in same:
                    r[V[j]] = o[V[j]]
                r['evidence'] = '; '.join(f"{V[j]}={ev[V[j]]}" for j in same if V[j] in ev)
                note += f"; every candidate sets {', '.join(V[j] for j in same)} alike: kept"
        r['note'] = note
        out.append(r)
    for r in read(CFG)[1]:  # 3
        if 'dp-attn NOT matched' in r['note'] and any(r[v] for v in V):
            for k in V + ['evidence']:
                r[k] = ''
            r['note'] = ('not kept: the entries run attention DP where the row does not (limits per rank do not fit '
                         'its layout); ' + r['note'])
        out.append(r)
    for r in out:  # 4
        r['engine'] = r['engine'] or backend[r['id']]
    return cols, out


def main():
    cols, out = merge()
    if '--check' in sys.argv:
        ship = read(DST)[1]
        diff = [a['id'] for a, b in zip(out, ship) if a != b] + (['<row count>'] if len(out) != len(ship) else [])
        print(f'{len(out)} rows; differ from the shipped table: {len(diff)}', *diff[:5])
        sys.exit(1 if diff else 0)
    tmp = DST + '.tmp'
    with open(tmp, 'w', newline='', encoding='utf-8') as f:
        w = csv.DictWriter(f, cols, lineterminator='\n')
        w.writeheader()
        w.writerows(out)
    os.replace(tmp, DST)
    print(f'{len(out)} rows -> {DST}')


if __name__ == '__main__':
    main()
