# write agg_speculative.csv from match.pkl (+ drafts from the benchmark scripts)
import pickle, csv, json, collections, subprocess, functools
from datetime import datetime, timedelta, timezone
from drafts import drafts
from datetime import datetime as _d
def window(m):
    if m.endswith("T00:00:00.000Z") or len(m)==10:
        d=datetime.fromisoformat(m[:10]).replace(tzinfo=timezone.utc); return d-timedelta(hours=12), d+timedelta(hours=36), True
    T=datetime.fromisoformat(m.replace("Z","+00:00")); return T-timedelta(minutes=10), T, False
R='/work/.mirror/SemiAnalysisAI+InferenceX/repo'
out=pickle.load(open('match.pkl','rb'))
CL=json.load(open('changelog_agg.json'))
CLT=sorted([(datetime.fromisoformat(x['date']).astimezone(timezone.utc),h,x['keys']) for h,x in CL.items()])
P='.github/configs/nvidia-master.yaml'
@functools.lru_cache(None)
def first_mtp_script(base,allrefs):
    s=subprocess.run(['git','-C',R,'log','--all' if allrefs else 'HEAD','--diff-filter=A','--format=%cI %h','--',f'benchmarks/{base}_mtp.sh',f'benchmarks/single_node/{base}_mtp.sh',f'benchmarks/{base}_mtp_slurm.sh'],capture_output=True,text=True).stdout.split('\n')
    s=[l.split() for l in s if l]
    if not s: return None
    d,h=min(s); return datetime.fromisoformat(d).astimezone(timezone.utc),h
CELL=collections.Counter((x['r']['source_file'],x['r']['measured'],x['r']['image'],x['g'],x['r']['isl'],x['r']['osl'],x['tp'],x['ep'],x['dpa'],x['conc']) for x in out)
rows=[]; stat=collections.Counter()
for x in out:
    r=x['r']; prefix,hw,fw,prec=x['g']
    lo,hi,bare=window(r['measured'])
    hits=x['hits']; note=[]; ev=[]; dr=''
    if hits:
        spec='|'.join(sorted(set(h['spec'] for h in hits),key=lambda s:s!='mtp'))
        byk=collections.OrderedDict()
        for h in sorted(hits,key=lambda h:h['t']): byk.setdefault((h['key'],h['isl'],h['osl'],h['idx']),[]).append(h)
        dvals=set()
        for (k,isl,osl,idx),hs in byk.items():
            h=hs[0]; cs=sorted(set(z['commit'][:12] for z in hs))
            ev.append(f"InferenceX@{h['commit'][:12]}:{P} [{k}] isl{isl}/osl{osl} search-space[{idx}] L{h['line'][0]} (tp{h['tp']} ep{h['ep']} dp-attn={str(h['dpa']).lower()} conc {h['concs'][0]}..{h['concs'][-1]}, spec-decoding={h['spec']}, image {h['image']})"+(f" [same entry in versions {','.join(c[:9] for c in cs)}]" if len(cs)>1 else ''))
            if h['spec']=='mtp':
                # scripts as at the sweep-trigger commit(s) that listed this key, else the yaml version's commit
                trig=[hh for t,hh,kk in CLT if lo<=t<=hi and isinstance(kk,list) and k in kk]
                if not bare: trig=trig[-1:]
                sc=trig or [z['commit'] for z in hs]
                for c in sc:
                    n,cite,setting=drafts(c,prefix,prec,hw,fw,'mtp',h['dpa'])
                    dvals.add(n); ev.append(f"drafts: {cite}")
        if dvals:
            if len(dvals)==1: dr=str(dvals.pop())
            else: dr=''; note.append(f'DRAFTS_DIFFER {sorted(dvals)}')
        trig_all=[hh[:9] for t,hh,kk in CLT if lo<=t<=hi]
        if x['tkeys'] is not None: note.append(f"sweep commit(s) {','.join(trig_all)} in {'bare-date window D-12h..D+36h' if bare else 'the 10 min before measured'}; perf-changelog keys used as filter")
        else: note.append('no perf-changelog filter (no changelog entry in window)')
        if spec=='mtp|none':
            note.append('AMBIGUOUS: an MTP and a non-MTP entry both fit (same image, tp, ep, dp-attn, conc) and both keys were swept; drafts = the MTP alternative')
            n=CELL[(r['source_file'],r['measured'],r['image'],x['g'],r['isl'],r['osl'],x['tp'],x['ep'],x['dpa'],x['conc'])]
            if n==2 and not bare: note.append('PAIR: this source file holds 2 rows for this cell at this timestamp, so one of them is the MTP run and the other the non-MTP run; which is which is not in the config')
        status={'mtp':'mtp','none':'none','mtp|none':'ambiguous'}[spec]
    else:
        base=f"{prefix}_{prec}_{hw}{'_trt' if fw=='trt' else ''}"
        allrefs=r['wip']=='True'; fm=first_mtp_script(base,allrefs)
        if hw in ('gb200','gb300'):
            spec='unmatched'; status='unmatched'
            note.append('UNMATCHED: multinode gb200 run (Nov 2025, before any gb200 key in nvidia-master.yaml); launched by .github/workflows/gb200-tests.yml whose workflow_dispatch input "mtp" (Mtp On/Off @97f253b51) is not recorded')
        elif allrefs and first_mtp_script(base,True) is not None:
            fa=first_mtp_script(base,True)
            spec='unmatched'; status='unmatched'
            note.append(f"UNMATCHED: wip run from a non-main branch, no nvidia-master.yaml entry matched (stages {x['stage'] or 'none'}); no MTP script {base}_mtp*.sh on any mirrored ref by the measured time, but one appears later ({fa[1]} {fa[0]:%Y-%m-%d}) and merged PR branches may be missing from the mirror, so MTP is not ruled out")
        elif fm is None or fm[0]>hi:
            spec='none'; status='none_by_absence'
            note.append(f"NONE_BY_ABSENCE: no search-space entry matched ({x['stage'] or 'no nvidia-master.yaml version/changelog in window'}), but no MTP benchmark script {base}_mtp*.sh existed by the measured time on "+('any ref of the mirror (wip run)' if allrefs else 'main (HEAD ancestry; wip=False run)')+(f" (first: {fm[1]} {fm[0]:%Y-%m-%d})" if fm else " (never, to 2026-08)")+"; no single-node script had speculative flags before bf3456727 (2026-01-14)")
        else:
            spec='unmatched'; status='unmatched'
            note.append(f"UNMATCHED: no entry matched (stages {x['stage']}); an MTP script {base}_mtp existed on {'some ref' if allrefs else 'main'} since {fm[1]} {fm[0]:%Y-%m-%d}")
    if r['wip']=='True': note.append('wip=True (run from a non-main branch; main config used)')
    stat[(r['model'],r['system'],r['backend'],r['precision'],status)]+=1
    rows.append(dict(id=r['id'],speculative=spec,drafts=dr,evidence=' ; '.join(ev),note=' ; '.join(note),_status=status))
with open('agg_speculative.csv','w',newline='') as f:
    w=csv.DictWriter(f,fieldnames=['id','speculative','drafts','evidence','note']); w.writeheader()
    for r in rows: w.writerow({k:v for k,v in r.items() if not k.startswith('_')})
json.dump({'|'.join(k):v for k,v in sorted(stat.items())},open('counts.json','w'),indent=0)
for k,v in sorted(stat.items()): print(v,k)
print(collections.Counter(r['_status'] for r in rows))
print(collections.Counter((r['speculative'],r['drafts']) for r in rows))
