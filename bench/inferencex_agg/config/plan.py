# plan.py: for every agg row, the candidate (commit, commit_source, runner label, launcher, spec) runs to execute.
# Inputs: match.pkl (from match.py, the reproduced matching of bench/inferencex_agg), changelog_agg.json.
# No measured latency is read.
import pickle, json, subprocess, functools, re, collections, yaml
from datetime import datetime, timedelta, timezone
R='/work/.mirror/SemiAnalysisAI+InferenceX/repo'
def g(*a): return subprocess.run(['git','-C',R]+list(a),capture_output=True,text=True)
out=pickle.load(open('match.pkl','rb'))
CL=json.load(open('changelog_agg.json'))
CLT=sorted([(datetime.fromisoformat(x['date']).astimezone(timezone.utc),h,x['keys']) for h,x in CL.items()])
FP=[]
for l in g('log','--first-parent','--format=%H %cI','HEAD').stdout.split('\n'):
    if l: h,d=l.split(); FP.append((h,datetime.fromisoformat(d).astimezone(timezone.utc)))
def inforce(T):
    for h,d in FP:   # newest first
        if d<=T: return h
def isbare(m): return m.endswith('T00:00:00.000Z') or len(m)==10
def tmeasured(m):
    if isbare(m):
        d=datetime.fromisoformat(m[:10]).replace(tzinfo=timezone.utc); return d, d+timedelta(days=1)-timedelta(seconds=1)
    T=datetime.fromisoformat(m.replace('Z','+00:00')); return T,T
def window(m):
    if isbare(m):
        d=datetime.fromisoformat(m[:10]).replace(tzinfo=timezone.utc); return d-timedelta(hours=12), d+timedelta(hours=36), True
    T=datetime.fromisoformat(m.replace('Z','+00:00')); return T-timedelta(minutes=10), T, False
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
FWT={'trt':'trt','vllm':'vllm','sglang':'sglang'}
def labels_for(c,prefix,hw,fw,prec):
    """runner labels the config of commit c assigns to prefix/hw/fw/prec; and where from"""
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
    # no runners.yaml: every launcher of that hardware (GitHub runner labels are not in the repo)
    pre=sorted(set(f[len('runners/launch_'):-3] for f in files if re.fullmatch(rf'runners/launch_{re.escape(hw)}-[^/]+\.sh',f)))
    return [(p,f'runners/launch_{p}.sh') for p in pre],'all launch_%s-*.sh (no runners.yaml label list)'%hw
@functools.lru_cache(None)
def wipcommit(prefix,hw,fw,prec,t1):
    base=f"{prefix}_{prec}_{hw}{'_trt' if fw=='trt' else ''}"
    l=g('log','--all','--format=%H %cI','--until='+t1.isoformat(),'--',f'benchmarks/single_node/{base}.sh',f'benchmarks/{base}.sh').stdout.split('\n')
    l=[x.split() for x in l if x]
    l=[(datetime.fromisoformat(d).astimezone(timezone.utc),h) for h,d in l]
    l=[x for x in l if x[0]<=t1]
    return max(l)[1] if l else None
plan=[]
for x in out:
    r=x['r']; prefix,hw,fw,prec=x['g']; m=r['measured']
    lo,hi,bare=window(m); t0,t1=tmeasured(m)
    cands=[]  # (commit, source, label, spec, key)
    if x['hits']:
        byk=collections.OrderedDict()
        for h in x['hits']: byk.setdefault(h['key'],h)
        for k,h in byk.items():
            trig=[hh for t,hh,kk in CLT if lo<=t<=hi and isinstance(kk,list) and k in kk]
            if trig and not bare: trig=trig[-1:]
            if trig:
                for c in trig: cands.append((c,'matched (sweep commit listing the key in perf-changelog)'+(' ; bare date' if bare else ''),h['runner'],h['spec'],k,h['commit']))
            else:
                c=inforce(t1); cands.append((c,'matched yaml entry, no sweep commit in window: in force at measured'+(' (bare date, end of day)' if bare else ''),h['runner'],h['spec'],k,h['commit']))
    elif r['wip']=='True' and wipcommit(prefix,hw,fw,prec,t1):
        c=wipcommit(prefix,hw,fw,prec,t1)
        src='wip: latest commit on any mirrored ref touching the benchmark script by measured'+(' (bare date, end of day)' if bare else '')
        labs,lsrc=labels_for(c,prefix,hw,fw,prec)
        for lab in labs or [None]: cands.append((c,src,lab,'none',None,None))
    else:
        cs=[(inforce(t1),'in force at measured'+(' (bare date, end of day)' if bare else ''))]
        if bare:
            c0=inforce(t0-timedelta(seconds=1))
            if c0!=cs[0][0]: cs.append((c0,'in force at start of bare date (alternative)'))
        spec='none'  # unmatched rows: no MTP entry matched; scripts without _mtp
        for c,src in cs:
            labs,lsrc=labels_for(c,prefix,hw,fw,prec)
            if not labs: cands.append((c,src,None,spec,None,None))
            for lab in labs: cands.append((c,src,lab,spec,None,None))
    plan.append(dict(id=r['id'],r=r,g=x['g'],tp=x['tp'],ep=x['ep'],dpa=x['dpa'],conc=x['conc'],bare=bare,cands=cands))
# expand launchers
runs={}
for p in plan:
    prefix,hw,fw,prec=p['g']; p['runs']=[]
    for c,src,lab,spec,key,ycommit in p['cands']:
        if lab is None: p['runs'].append(dict(commit=c,src=src,label=None,launcher=None,spec=spec,key=key,lsrc=None)); continue
        ls_,lsrc=launchers_for(c,lab,hw)
        for pre,f in ls_:
            p['runs'].append(dict(commit=c,src=src,label=lab,launcher=pre,spec=spec,key=key,lsrc=lsrc,ycommit=ycommit))
pickle.dump(plan,open('plan.pkl','wb'))
C=collections.Counter(len(p['runs']) for p in plan); print('runs per row',sorted(C.items()))
print('rows without runs',sum(1 for p in plan if not p['runs'] or any(r['launcher'] is None for r in p['runs'])))
print('distinct commits',len(set(r['commit'] for p in plan for r in p['runs'])))
