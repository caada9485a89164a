# counts per model x hardware x framework x precision for REPORT.md
import csv, collections
rows={r['id']:r for r in csv.DictReader(open('agg_rows.csv'))}
T=collections.defaultdict(collections.Counter)
for r in csv.DictReader(open('agg_speculative.csv')):
    a=rows[r['id']]; k=(a['model'],a['system'].replace('_sxm',''),a['backend'],a['precision'])
    s=r['speculative']
    if s=='none' and r['note'].startswith('NONE_BY_ABSENCE'): s='none*'
    T[k][s]+=1
    if r['drafts']: T[k][f"{'mtp' if s=='mtp' else 'amb'}:d{r['drafts']}"]+=1
print('| model hw fw prec | mtp | none | none* | ambiguous | unmatched | drafts |')
print('|---|---|---|---|---|---|---|')
tot=collections.Counter()
for k in sorted(T):
    c=T[k]; tot.update({x:c[x] for x in ['mtp','none','none*','mtp|none','unmatched']})
    d=', '.join(f"{x}={c[x]}" for x in sorted(c) if ':d' in x)
    print(f"| {' '.join(k)} | {c['mtp']} | {c['none']} | {c['none*']} | {c['mtp|none']} | {c['unmatched']} | {d} |")
print(f"| total | {tot['mtp']} | {tot['none']} | {tot['none*']} | {tot['mtp|none']} | {tot['unmatched']} | |")
