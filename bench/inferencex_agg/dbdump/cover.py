# for workflow runs with several candidate sweep commits: which commit's swept entries cover the run's rows (and how many swept points the sample lacks)
import pickle, json, collections
from datetime import datetime, timezone
out=pickle.load(open('match.pkl','rb'))
V={v['commit'][:9]:v for v in json.load(open('versions_agg.json'))}
import subprocess
R='/work/.mirror/SemiAnalysisAI+InferenceX/repo'
res=json.load(open('wr.json'))
W=collections.defaultdict(list)
for x in out: W[x['r']['workflow_run_id']].append(x)
def inforce_version(h):
    # newest yaml version at or before commit h (by first-parent date)
    d=datetime.fromisoformat(subprocess.run(['git','-C',R,'show','-s','--format=%cI',h],capture_output=True,text=True).stdout.strip())
    best=None
    for v in V.values():
        t=datetime.fromisoformat(v['cdate'])
        if t<=d and (best is None or t>datetime.fromisoformat(best['cdate'])): best=v
    return best
for w,r in res.items():
    if len(r['fit'])<2: continue
    xs=W[w]
    rows=set((int(x['r']['isl']),int(x['r']['osl']),x['conc'],x['r']['config_id']) for x in xs)
    print('RUN',w,len(xs),'rows')
    for d,h,keys in r['fit']:
        v=inforce_version(h)
        pts=set(); 
        for e in v['entries']:
            if e['key'] in keys:
                for c in e['concs']: pts.add((e['isl'],e['osl'],c,e['tp'],e['ep'],e['dpa'],e['spec']))
        cov=0
        for x in xs:
            ok=any((p[0],p[1],p[2])==(int(x['r']['isl']),int(x['r']['osl']),x['conc']) and any((p[3],p[4],p[5])==t[:3] for t in x['topo_cands']) for p in pts)
            cov+=ok
        print('   ',d,h,keys,'yaml',v['commit'][:9],'swept points',len(pts),'rows covered',cov,'/',len(xs))
