# match the silicon sample's db-dump agg rows to nvidia-master.yaml single-node search-space entries
# (match.py of /tmp/ixcfg adapted: model prefix from the id, topology decoded from the sample's columns, candidates checked against the yaml)
import json, csv, re, collections, pickle, os
from datetime import datetime, timedelta, timezone
V=json.load(open('versions_agg.json'))
for v in V: v['t']=datetime.fromisoformat(v['cdate']).astimezone(timezone.utc)
V.sort(key=lambda v:v['t'])
CL=json.load(open('changelog_agg.json'))
CLT=sorted([(datetime.fromisoformat(x['date']).astimezone(timezone.utc),h,x['keys']) for h,x in CL.items()])
PFX={'dsr1':'dsr1','kimik2_5':'kimik2.5','minimaxm2_5':'minimaxm2.5','qwen3_5':'qwen3.5','gptoss':'gptoss','glm5':'glm5'}
FW={'trtllm':'trt','sglang':'sglang','vllm':'vllm'}
def hw(s): return s.replace('_sxm','')
def norm(i): return (i or '').replace('nvcr.io#','nvcr.io/')
def window(m):
    if m.endswith('T00:00:00.000Z') or len(m)==10:
        d=datetime.fromisoformat(m[:10]).replace(tzinfo=timezone.utc)
        return d-timedelta(hours=12), d+timedelta(hours=36), True
    T=datetime.fromisoformat(m.replace('Z','+00:00'))
    return T-timedelta(minutes=10), T, False
def trigger(lo,hi,bare):
    cs=[(t,h,k) for t,h,k in CLT if lo<=t<=hi]
    if not cs or any(not isinstance(k,list) for t,h,k in cs): return None,cs
    return set(k for t,h,kk in cs for k in kk),cs
def versions(lo,hi,bare):
    res=[]; inforce=None
    for v in V:
        if v['t']<=(lo if bare else hi): inforce=v
    if inforce: res.append(inforce)
    if bare: res+=[v for v in V if lo<v['t']<=hi]
    return res
def isqrt(n):
    r=int(round(n**0.5)); return r if r*r==n else None
def topo(r):
    """candidate InferenceX (tp, ep, dp-attn) for the sample's tp_size/moe_tp_size/moe_ep_size/attention_dp_size.
    The db-dump conversion writes e.g. tp8 ep8 as tp_size 64 / moe_tp 8 / ep 8 and tp8 ep8 dp-attn as tp_size 1 / dp 64 / ep 8."""
    tp,mtp,ep,dp=(int(float(r[k])) for k in ('tp_size','moe_tp_size','moe_ep_size','attention_dp_size'))
    c=set()
    if dp==1:
        c.add((tp,ep,False,'tp_size/moe_ep_size as is'))
        if ep>1 and tp%ep==0: c.add((tp//ep,ep,False,'tp_size = tp*ep'))
    else:
        c.add((dp,ep,True,'attention_dp_size = tp'))
        if ep>1 and dp%ep==0: c.add((dp//ep,ep,True,'attention_dp_size = tp*ep'))
        if tp>1 and ep%tp==0: c.add((tp,ep//tp,True,'moe_ep_size = tp*ep'))
        if tp>1: c.add((tp,ep,True,'tp_size/moe_ep_size as is, dp-attn'))
        if tp>1 and dp==tp and ep%tp==0:   # vLLM expert parallel: dp = tp, moe_ep = tp*ep, moe_tp 1 (dp-attn not recorded)
            c.add((tp,ep//tp,False,'vLLM EP: attention_dp_size = tp, moe_ep_size = tp*ep')); c.add((tp,ep//tp,True,'vLLM EP: attention_dp_size = tp, moe_ep_size = tp*ep'))
    return c
FIRST_MTP={}
for v in V:
    for e in v['entries']:
        if e['spec']!='none':
            g=(e['prefix'],e['runner'].split('-')[0],e['framework'],e['precision'])
            FIRST_MTP.setdefault(g,v)
rows=list(csv.DictReader(open('db_rows.csv')))
out=[]
for r in rows:
    m=re.fullmatch(r'(.+?)_(b200|b300|h200|h100|gb200|gb300|mi\d+x?)_(trtllm|sglang|vllm)_(fp4|fp8|bf16)_agg_(\d+)x(\d+)_c(\d+)_cfg(\d+)',r['id']); assert m, r['id']
    p,h,fw,prec,isl,osl,conc,cfg=m.groups()
    assert (h,fw,prec)==(hw(r['system']),r['backend'],r['precision']) and int(conc)==int(r['concurrency']) and cfg==r['config_id'] and (isl,osl)==(r['isl'],r['osl']), r['id']
    conc=int(conc); isl,osl=int(isl),int(osl)
    g=(PFX[p],h,FW[fw],prec)
    lo,hi,bare=window(r['measured'])
    vs=versions(lo,hi,bare)
    tk,tc=trigger(lo,hi,bare)
    fm=FIRST_MTP.get(g)
    mtp_possible = fm is not None and fm['t']<=hi
    T=topo(r)
    def domatch(tk):
      hits=[]; stage=collections.Counter()
      for v in vs:
          for e in v['entries']:
              if (e['prefix'],e['runner'].split('-')[0],e['framework'],e['precision'])!=g: continue
              stage['group']+=1
              if (e['isl'],e['osl'])!=(isl,osl): continue
              stage['seq']+=1
              if tk is not None and e['key'] not in tk: continue
              stage['changelog']+=1
              if r['image'] and norm(e['image'])!=norm(r['image']): continue
              stage['image']+=1
              tt=[t for t in T if (t[0],t[1],t[2])==(e['tp'],e['ep'],e['dpa'])]
              if not tt: continue
              stage['topo']+=1
              if conc not in e['concs']: continue
              stage['conc']+=1
              hits.append(dict(commit=v['commit'],t=v['cdate'],topo=tt[0],**e))
      return hits,stage
    hits,stage=domatch(tk); nocl=False
    if not hits and tk is not None:
        hits,stage2=domatch(None); nocl=bool(hits)
        if nocl: stage=dict(stage,nochangelog=dict(stage2))
    specs=sorted(set(h['spec'] for h in hits))
    tps=sorted(set(h['topo'][:3] for h in hits))
    tp,ep,dpa=(tps[0] if len(tps)==1 else (None,None,None))
    out.append(dict(r=r,conc=conc,tp=tp,ep=ep,dpa=dpa,topo_cands=sorted(T),tps=tps,g=g,hits=hits,specs=specs,nocl=nocl,stage=dict(stage),tkeys=sorted(tk) if tk else tk,
        tcommits=[h[:9] for t,h,k in tc],vers=[v['commit'][:9] for v in vs],mtp_possible=mtp_possible,first_mtp=(fm['commit'][:9],fm['cdate']) if fm else None,bare=bare))
pickle.dump(out,open('match.pkl','wb'))
if __name__=='__main__':
    C=collections.Counter()
    for x in out:
        s='|'.join(x['specs']) if x['hits'] else 'UNMATCHED '+json.dumps(x['stage'])
        C[(x['r']['workflow_run_id'],x['r']['id'].split('_agg_')[0],s,len(x['tps']),'|'.join(x['tcommits']))]+=1
    for k,v in sorted(C.items(),key=lambda kv:int(kv[0][0])): print(k,v)
