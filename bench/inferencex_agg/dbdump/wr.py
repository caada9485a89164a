# per workflow_run_id: the sweep commits (perf-changelog, in the bare-date window) that list the matched keys of all its rows
import pickle, json, collections
from datetime import datetime, timezone
out=pickle.load(open('match.pkl','rb'))
CL=json.load(open('changelog_agg.json'))
from match_db import window
W=collections.defaultdict(list)
for x in out: W[x['r']['workflow_run_id']].append(x)
res={}
for w,xs in sorted(W.items(),key=lambda kv:int(kv[0])):
    lo,hi,bare=window(xs[0]['r']['measured'])
    keys=[set(h['key'] for h in x['hits']) for x in xs]
    cs=[(h,v) for h,v in CL.items() if lo<=datetime.fromisoformat(v['date']).astimezone(timezone.utc)<=hi and isinstance(v['keys'],list)]
    allk=set().union(*keys)
    # a commit fits the run if every row has at least one of its keys listed
    fit=[(v['date'],h[:9],sorted(set(v['keys'])&allk)) for h,v in cs if all(k & set(v['keys']) for k in keys if k)]
    part=[(v['date'],h[:9],sorted(set(v['keys'])&allk)) for h,v in cs if set(v['keys'])&allk and (v['date'],h[:9],sorted(set(v['keys'])&allk)) not in fit]
    nocl=sum(x['nocl'] for x in xs)
    res[w]=dict(fit=fit,part=part)
    print(w,xs[0]['r']['measured'][:10],len(xs),'keys',sorted(allk),'nocl',nocl)
    for f in sorted(fit): print('   FIT',f)
    for f in sorted(part): print('   part',f)
json.dump(res,open('wr.json','w'))
