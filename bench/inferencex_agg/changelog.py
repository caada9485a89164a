# which config-keys each first-parent InferenceX commit's sweep ran (new perf-changelog.yaml entries)
import os,subprocess,yaml,json
UNTIL=os.environ.get('UNTIL','2026-04-21')  # dbdump/: UNTIL=2026-04-25
R='/work/.mirror/SemiAnalysisAI+InferenceX/repo'
def g(*a): return subprocess.run(['git','-C',R]+list(a),capture_output=True,text=True)
log=g('log','--first-parent','--format=%H %cI %s','--since=2025-10-25','--until='+UNTIL,'HEAD').stdout.split('\n')
out={}
for l in log:
    if not l: continue
    h,d,subj=l.split(' ',2)
    a=g('show',f'{h}:perf-changelog.yaml'); b=g('show',f'{h}^:perf-changelog.yaml')
    if a.returncode: out[h]=dict(date=d,subj=subj,keys=None); continue
    try:
        ya=yaml.safe_load(a.stdout) or []; yb=(yaml.safe_load(b.stdout) or []) if b.returncode==0 else []
    except Exception as e:
        out[h]=dict(date=d,subj=subj,keys='ERR '+str(e)); continue
    sb=[json.dumps(x,sort_keys=True,default=str) for x in yb]
    new=[x for x in ya if json.dumps(x,sort_keys=True,default=str) not in sb]
    keys=sorted(set(k for x in new for k in (x.get('config-keys') or [])))
    out[h]=dict(date=d,subj=subj,keys=keys)
json.dump(out,open('changelog_agg.json','w'))
print(len(out))
