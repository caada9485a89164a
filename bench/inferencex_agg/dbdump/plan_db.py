# plan_db.py: for every db-dump agg row, the candidate (commit, commit_source, runner label, launcher, spec, tp/ep/dpa) runs to execute.
# Inputs: match.pkl (match_db.py), changelog_agg.json, versions_agg.json, wr.json (wr.py). No measured latency is read.
# Commit choice per workflow_run_id (the db-dump's run id: one GitHub workflow run = one commit):
#  * nightly full-sweep runs (before 2025-12-15 15:18Z, when 9c0fcc9af replaced the cron by changelog-triggered runs; the db splits
#    them by sequence length, one run per full-sweep-<seq>-scheduler.yml): the first-parent commit in force at the cron time of the
#    measured date (2025-11-02: cron '0 23 * * *' -> 23:00Z; 2025-11-10/18 and 2025-12-15: '0 0 * * *' -> 00:00Z);
#    the end-of-day and start-of-day commits are run as alternatives and any difference noted.
#  * changelog-triggered runs: the sweep commit in the bare-date window (D-12h..D+36h) whose new perf-changelog entries list the
#    matched keys of every row of the run and whose swept search space covers all of them (wr.py / cover.py); several -> all kept.
import pickle, json, subprocess, functools, re, collections, yaml
from datetime import datetime, timedelta, timezone
R='/work/.mirror/SemiAnalysisAI+InferenceX/repo'
def g(*a): return subprocess.run(['git','-C',R]+list(a),capture_output=True,text=True)
out=pickle.load(open('match.pkl','rb'))
CL=json.load(open('changelog_agg.json'))
WR=json.load(open('wr.json'))
V=json.load(open('versions_agg.json'))
for v in V: v['t']=datetime.fromisoformat(v['cdate']).astimezone(timezone.utc)
V.sort(key=lambda v:v['t'])
FP=[]
for l in g('log','--first-parent','--format=%H %cI','HEAD').stdout.split('\n'):
    if l: h,d=l.split(); FP.append((h,datetime.fromisoformat(d).astimezone(timezone.utc)))
CDATE={h:d for h,d in FP}
def inforce(T):
    for h,d in FP:   # newest first
        if d<=T: return h
def yver(c):
    best=None
    for v in V:
        if v['t']<=CDATE[c]: best=v
    return best
@functools.lru_cache(None)
def show(c,p):
    r=g('show',f'{c}:{p}'); return r.stdout if r.returncode==0 else None
@functools.lru_cache(None)
def ls(c,d):
    return [x for x in g('ls-tree','--name-only',f'{c}',d).stdout.split('\n') if x]
@functools.lru_cache(None)
def runners_yaml(c):
    t=show(c,'.github/configs/runners.yaml'); return yaml.safe_load(t) if t else None
@functools.lru_cache(None)
def master(c):
    t=show(c,'.github/configs/nvidia-master.yaml'); return yaml.safe_load(t) if t else None
def labels_for(c,prefix,hw,fw,prec):
    m=master(c)
    if m:
        labs=sorted(set(v['runner'] for k,v in m.items() if isinstance(v,dict) and not v.get('multinode') and not v.get('disagg')
                 and v.get('model-prefix')==prefix and str(v.get('runner','')).split('-')[0]==hw and v.get('framework')==fw and v.get('precision')==prec))
        return labs,'.github/configs/nvidia-master.yaml'
    t=show(c,f'.github/workflows/{prefix}-tmpl.yml')
    if not t: return [],None
    y=yaml.safe_load(t); labs=[]
    for j,v in y.get('jobs',{}).items():
        w=v.get('with',{})
        if str(w.get('runner','')).split('-')[0]==hw and w.get('framework')==fw and w.get('precision')==prec: labs.append(w['runner'])
    return sorted(set(labs)),f'.github/workflows/{prefix}-tmpl.yml'
def launchers_for(c,label,hw):
    ry=runners_yaml(c)
    files=[f for f in ls(c,'runners/') if f.startswith('runners/launch_')]
    if ry and label in ry:
        pre=sorted(set(str(n).split('_')[0] for n in ry[label]))
        return [(p,f'runners/launch_{p}.sh') for p in pre if f'runners/launch_{p}.sh' in files],'runners.yaml'
    pre=sorted(set(f[len('runners/launch_'):-3] for f in files if re.fullmatch(rf'runners/launch_{re.escape(hw)}-[^/]+\.sh',f)))
    return [(p,f'runners/launch_{p}.sh') for p in pre],'all launch_%s-*.sh (no runners.yaml label list)'%hw
def norm(i): return (i or '').replace('nvcr.io#','nvcr.io/')
def entries_at(c,x,keys=None):
    """search-space entries of the yaml in force at commit c matching row x (group, seq, image, topology candidates, conc)"""
    v=yver(c); r=x['r']; res=[]
    if v is None: return res,None
    for e in v['entries']:
        if (e['prefix'],e['runner'].split('-')[0],e['framework'],e['precision'])!=x['g']: continue
        if (e['isl'],e['osl'])!=(int(r['isl']),int(r['osl'])): continue
        if keys is not None and e['key'] not in keys: continue
        if r['image'] and norm(e['image'])!=norm(r['image']): continue
        tt=[t for t in x['topo_cands'] if (t[0],t[1],t[2])==(e['tp'],e['ep'],e['dpa'])]
        if not tt or x['conc'] not in e['concs']: continue
        res.append(dict(e,topo=tt[0]))
    return res,v['commit']
SCHED={'2025-11-02':'23:00:00','2025-11-10':'00:00:00','2025-11-18':'00:00:00','2025-12-15':'00:00:00'}
CHANGELOG_START=CDATE[[h for h,d in FP if h.startswith('9c0fcc9af')][0]]
# workflow runs: keep the fitting sweep commits whose swept entries cover every row of the run (cover.py)
W=collections.defaultdict(list)
for x in out: W[x['r']['workflow_run_id']].append(x)
FITS={}
for w,xs in W.items():
    fits=[(d,[h for h,_ in FP if h.startswith(h9)][0],keys) for d,h9,keys in WR[w]['fit']]
    full=[f for f in fits if all(entries_at(f[1],x,set(f[2]))[0] for x in xs)]
    FITS[w]=(full or fits, len(fits))
# config_id 87 (DeepSeek-R1 fp8 B200 SGLang tp8) was created before config 88, which run 122 (2025-11-10) used; the first MTP entry of that
# group is 2026-02-06 (e62c6acdf), so config 87 is a non-MTP config (the config identity includes the speculative method)
SPEC_BY_CONFIG={'87':('none','config_id 87 < 88 (used by run 122 of 2025-11-10) predates the first dsr1 fp8 B200 SGLang MTP entry (e62c6acdf, 2026-02-06): the db config is the non-MTP one')}
plan=[]
for x in out:
    r=x['r']; prefix,hw,fw,prec=x['g']; m=r['measured']; D=m[:10]
    t0=datetime.fromisoformat(D).replace(tzinfo=timezone.utc); t1=t0+timedelta(days=1)-timedelta(seconds=1)
    cands=[]   # dict(commit, src, label, spec, key, ycommit, tp, ep, dpa)
    def add(c,src,keys=None,hint=None):
        es,yc=entries_at(c,x,keys)
        if es:
            seen=set()
            for e in es:
                k=(e['key'],e['runner'],e['spec'],e['topo'][:3])
                if k in seen: continue
                seen.add(k)
                cands.append(dict(commit=c,src=src,label=e['runner'],spec=e['spec'],key=e['key'],ycommit=yc,tp=e['topo'][0],ep=e['topo'][1],dpa=e['topo'][2],yline=e['line']))
            return True
        # no matching entry at c (before nvidia-master.yaml): runner labels of the group at c; topology as decoded when unique
        tps=sorted(set(t[:3] for t in x['topo_cands']))
        if len(tps)!=1 and hint: tps=[hint]; src+=' [topology of the primary match]'
        if len(tps)!=1: return False
        labs,lsrc=labels_for(c,prefix,hw,fw,prec)
        for lab in labs or [None]:
            cands.append(dict(commit=c,src=src+' (no matching yaml entry at this commit: runner labels from '+str(lsrc)+')',label=lab,spec='none',key=None,ycommit=None,tp=tps[0][0],ep=tps[0][1],dpa=tps[0][2]))
        return True
    if t0<CHANGELOG_START and D in SCHED:
        tc=datetime.fromisoformat(D+'T'+SCHED[D]).replace(tzinfo=timezone.utc)
        c=inforce(tc); add(c,f'nightly full-sweep scheduler run: in force at the cron time {D}T{SCHED[D][:5]}Z')
        alts=[]
        for T,lab in ((t1,'end of the bare date'),(t0-timedelta(seconds=1),'start of the bare date')):
            ca=inforce(T)
            hint=sorted(set((cd['tp'],cd['ep'],cd['dpa']) for cd in cands))
            if ca!=c and ca not in alts: alts.append(ca); add(ca,f'in force at {lab} (alternative)',hint=hint[0] if len(hint)==1 else None)
    else:
        fits,nf=FITS[r['workflow_run_id']]
        assert fits, r['id']
        for d,c,keys in fits:
            src='matched (sweep commit listing the key in perf-changelog; the workflow run\'s only fitting sweep commit)' if len(fits)==1 else f'matched (one of {len(fits)} sweep commits listing the run\'s keys)'
            if nf>len(fits): src+=f' [{nf-len(fits)} other sweep commit(s) in the window list the key but their search space lacks some of the run\'s rows]'
            add(c,src,set(keys))
    sb=SPEC_BY_CONFIG.get(r['config_id'])
    if sb and len(set(cd['spec'] for cd in cands))>1:
        cands=[cd for cd in cands if cd['spec']==sb[0]]
        for cd in cands: cd['specnote']=sb[1]
    plan.append(dict(id=r['id'],r=r,g=x['g'],conc=x['conc'],bare=True,cands=cands,x={k:x[k] for k in ('specs','tps','topo_cands','nocl')}))
for p in plan:
    prefix,hw,fw,prec=p['g']; p['runs']=[]
    for cd in p['cands']:
        if cd['label'] is None: p['runs'].append(dict(cd,launcher=None,lsrc=None)); continue
        ls_,lsrc=launchers_for(cd['commit'],cd['label'],hw)
        for pre,f in ls_: p['runs'].append(dict(cd,launcher=pre,lsrc=lsrc))
pickle.dump(plan,open('plan.pkl','wb'))
C=collections.Counter(len(p['runs']) for p in plan); print('runs per row',sorted(C.items()))
print('rows without runs',sum(1 for p in plan if not p['runs'] or any(r['launcher'] is None for r in p['runs'])))
print('distinct commits',len(set(r['commit'] for p in plan for r in p['runs'])))
C=collections.Counter((p['r']['workflow_run_id'],'|'.join(sorted(set(f"{r['commit'][:9]}:{r['src'][:20]}:{r['label']}:{r['launcher']}:{r['spec']}" for r in p['runs'])))) for p in plan)
for k,v in sorted(C.items(),key=lambda kv:int(kv[0][0])): print(k,v)
