import json, csv, collections, re, sys, pickle
from datetime import datetime, timedelta, timezone
sys.path.insert(0,'.')
from rsum import summ
V=json.load(open('versions.json'))
for v in V: v['t']=datetime.fromisoformat(v['cdate']).astimezone(timezone.utc)
V.sort(key=lambda v:v['t'])
REC=json.load(open('recipes.json'))
CL=json.load(open('changelog.json'))
CLT=[(datetime.fromisoformat(x['date']).astimezone(timezone.utc),h,x['keys']) for h,x in CL.items()]
def trigger_keys(r):
    m=r['measured']
    if m.endswith('T00:00:00.000Z'):
        d=datetime.fromisoformat(m[:10]).replace(tzinfo=timezone.utc)
        lo=d-timedelta(hours=12); hi=d+timedelta(hours=36)
    else:
        T=datetime.fromisoformat(m.replace('Z','+00:00')); lo=T-timedelta(minutes=10); hi=T
    cs=[(t,h,k) for t,h,k in CLT if lo<=t<=hi]
    if not cs or any(k is None for t,h,k in cs): return None,cs
    ks=set(k for t,h,kk in cs for k in kk)
    return ks,cs
import fnmatch
def kin(k,ks): return any(fnmatch.fnmatch(k,p) for p in ks)
for f,vs in REC.items():
    for x in vs: x['t']=datetime.fromisoformat(x['date']).astimezone(timezone.utc); x['s']=summ(x['y'])
rows=list(csv.DictReader(open('/tmp/rc/assumed_rows.csv')))
MODEL={'deepseek-ai/DeepSeek-R1':'dsr1','openai/gpt-oss-120b':'gptoss','moonshotai/Kimi-K2.5':'kimik2.5','zhipuai/GLM-5':'glm5'}
SYS={'b200_sxm':'b200','b300_sxm':'b300','gb200':'gb200','gb300':'gb300','h200_sxm':'h200','h100_sxm':'h100'}
FW={'trtllm':'dynamo-trt','sglang':'dynamo-sglang'}
GPN={'gb200':4,'gb300':4}
def keyok(r,k):
    m=re.match(r'^(.+)-(fp4|fp8)-(b200|b300|gb200|gb300|h100|h200)-(dynamo-trt|dynamo-sglang)(-mtp)?$',k)
    return bool(m) and m.group(1)==MODEL[r['model_path']] and m.group(2)==r['precision'] and m.group(3)==SYS[r['system']] and m.group(4)==FW[r['backend']]
def settings(side):
    d={}
    for s in side.get('additional-settings') or []:
        if '=' in s: a,b=s.split('=',1); d[a.strip()]=b.strip()
    return d
def recipe_for(cf,T):
    vs=[x for x in REC.get(cf,[]) if x['s'] and x['t']<=T+timedelta(days=1)]
    if not vs: return None
    return max(vs,key=lambda x:x['t'])
def cand_versions(r):
    m=r['measured']
    if m.endswith('T00:00:00.000Z'):
        d=datetime.fromisoformat(m[:10]).replace(tzinfo=timezone.utc)
        lo=d-timedelta(hours=12); hi=d+timedelta(hours=36); T=hi
    else:
        T=datetime.fromisoformat(m.replace('Z','+00:00')); lo=hi=T
    res=[]; inforce=None
    for v in V:
        if v['t']<=lo: inforce=v
    if inforce: res.append(inforce)
    res+= [v for v in V if lo<v['t']<=hi]
    return res,T
def norm(i): return (i or '').replace('nvcr.io#','nvcr.io/')
report=[]
for r in rows:
    vs,T=cand_versions(r)
    isl,osl,conc=int(r['isl']),int(r['osl']),int(r['concurrency'])
    rptp=int(float(r['prefill_tp_size'])); rdtp=int(float(r['decode_tp_size']))
    rpep=int(float(r['prefill_moe_ep_size'])); rdep=int(float(r['decode_moe_ep_size']))
    sysn=SYS[r['system']]
    hits=[]; keyseen=False; imgmis=set(); concseen=[]
    tkeys,tcommits=trigger_keys(r)
    for v in vs:
        for e in v['entries']:
            if not keyok(r,e['key']) or e['isl']!=isl or e['osl']!=osl: continue
            keyseen=True
            if tkeys is not None and not kin(e['key'],tkeys): continue
            if r['image'] and norm(e['image'])!=norm(r['image']): imgmis.add(e['image']); continue
            p=e['ss']['prefill']; d=e['ss']['decode']; ps=settings(p); ds=settings(d)
            cf=ps.get('CONFIG_FILE') or ds.get('CONFIG_FILE')
            rec=recipe_for(cf,T) if cf else None
            cl=e['conc'] if isinstance(e['conc'],list) else [e['conc']]
            rc=list(rec['s']['concs']) if rec else []
            inlist = conc in cl; inrec = conc in rc
            if (rc and not inrec) or (not rc and not inlist): continue
            concseen.append((e,v))
            # effective per-worker GPU counts
            notes=[]
            pg,dg=p['tp'],d['tp']; pw,dw=p['num-worker'],d['num-worker']
            if 'PREFILL_NODES' in ps and sysn in GPN and p['tp']==1 and d['tp']==1 and e['framework']=='dynamo-sglang':
                pg=int(ps['PREFILL_NODES'])*GPN[sysn]/pw; dg=int(ds['DECODE_NODES'])*GPN[sysn]/dw if 'DECODE_NODES' in ds else dg
                notes.append('per-worker GPUs from PREFILL_NODES/DECODE_NODES (config tp:1 placeholder)')
            if rec:
                s=rec['s']
                if (s['pw'],s['dw'])!=(pw,dw): notes.append(f"RECIPE_WORKERS_DIFFER recipe {s['pw']}P/{s['dw']}D")
                if s['pg'] and s['dg'] and (s['pg'],s['dg'])!=(pg,dg) and not notes[:1]==['per-worker GPUs from PREFILL_NODES/DECODE_NODES (config tp:1 placeholder)']:
                    notes.append(f"recipe GPUs/worker {s['pg']:g}/{s['dg']:g} vs yaml tp {pg}/{dg}")
                if not inlist: notes.append(f'conc only in recipe concurrencies {rc} (yaml conc-list {cl})')
                elif not inrec: notes.append(f'conc in yaml conc-list but not in recipe concurrencies {rc}')
            total=pw*pg+dw*dg
            if p['tp']==rptp and d['tp']==rdtp: how='tp'
            elif rptp==rdtp and total==rptp and not r['image']: how='totalgpu'
            else: continue
            hits.append(dict(how=how,e=e,v=v,rec=rec,cf=cf,pw=pw,dw=dw,pdp=p.get('dp-attn'),ddp=d.get('dp-attn'),ptp=pg,pep=p['ep'],dtp=dg,dep=d['ep'],notes=notes,placeholder=('PREFILL_NODES' in ps and p['tp']==1 and d['tp']==1 and e['framework']=='dynamo-sglang')))
    ans=collections.defaultdict(list)
    for h in hits:
        a=(h['pw'],h['dw'],h['pdp'],h['ddp'],h['ptp'],None if h['placeholder'] else h['pep'],h['dtp'],None if h['placeholder'] else h['dep'])
        ans[a].append(h)
    report.append(dict(tkeys=tkeys,tcommits=tcommits,r=r,vs=vs,T=T,hits=hits,ans=ans,keyseen=keyseen,imgmis=imgmis,concseen=concseen))

C=collections.Counter()
def status(x):
    ans=x['ans']; wk=set((a[0],a[1]) for a in ans)
    if any('RECIPE_WORKERS_DIFFER' in n for hs in ans.values() for h in hs for n in h['notes']): return 'recipe_conflict'
    if len(ans)==1: return 'matched'
    if len(wk)>1: return 'ambig_workers'
    if len(ans)>1: return 'ambig_par'
    if not x['keyseen']: return 'no_config'
    if x['imgmis'] and not x['concseen']: return 'img_mismatch'
    if not x['concseen']: return 'conc_not_listed'
    return 'tp_mismatch'
for x in report: x['status']=status(x)
for x in report: C[(x['r']['model_path'].split('/')[1],x['r']['system'],x['r']['backend'],x['status'])]+=1
for k,v in sorted(C.items()): print(k,v)
print(collections.Counter(x['status'] for x in report))
pickle.dump(report,open('report3.pkl','wb'))
