# match the silicon sample's InferenceX agg rows to nvidia-master.yaml single-node search-space entries
import json, csv, re, collections, pickle, fnmatch, os
NOCL=os.environ.get('NOCL')=='1'; NOIMG=os.environ.get('NOIMG')=='1'; OUT=os.environ.get('OUT','match.pkl')
from datetime import datetime, timedelta, timezone
V=json.load(open('versions_agg.json'))
for v in V: v['t']=datetime.fromisoformat(v['cdate']).astimezone(timezone.utc)
V.sort(key=lambda v:v['t'])
CL=json.load(open('changelog_agg.json'))
CLT=sorted([(datetime.fromisoformat(x['date']).astimezone(timezone.utc),h,x['keys']) for h,x in CL.items()])
MODEL={'DeepSeek-R1':'dsr1','GPT-OSS-120B':'gptoss','Qwen3.5-397B':'qwen3.5','GLM-5':'glm5','Kimi-K2.5':'kimik2.5','MiniMax-M2.5':'minimaxm2.5','Llama-3.1-70B':'70b'}
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
# first time an mtp entry exists for a (prefix,hw,fw,precision) group
FIRST_MTP={}
for v in V:
    for e in v['entries']:
        if e['spec']!='none':
            g=(e['prefix'],e['runner'].split('-')[0],e['framework'],e['precision'])
            FIRST_MTP.setdefault(g,v)
rows=list(csv.DictReader(open('agg_rows.csv')))
out=[]
for r in rows:
    m=re.search(r'_c(\d+)_tp(\d+)(?:_0)?_ep(\d+)(?:_0)?_\d+$',r['id']); assert m, r['id']
    conc,tp,ep=map(int,m.groups()); assert conc==int(r['concurrency'])
    dpa=float(r['attention_dp_size'])>1
    isl,osl=int(r['isl']),int(r['osl'])
    g=(MODEL[r['model']],hw(r['system']),FW[r['backend']],r['precision'])
    lo,hi,bare=window(r['measured'])
    vs=versions(lo,hi,bare)
    tk,tc=trigger(lo,hi,bare)
    fm=FIRST_MTP.get(g)
    mtp_possible = fm is not None and fm['t']<=hi
    hits=[]; stage=collections.Counter()
    for v in vs:
        for e in v['entries']:
            if (e['prefix'],e['runner'].split('-')[0],e['framework'],e['precision'])!=g: continue
            stage['group']+=1
            if (e['isl'],e['osl'])!=(isl,osl): continue
            stage['seq']+=1
            if not NOCL and tk is not None and e['key'] not in tk: continue
            stage['changelog']+=1
            if not NOIMG and r['image'] and norm(e['image'])!=norm(r['image']): continue
            stage['image']+=1
            if e['tp']!=tp or e['ep']!=ep: continue
            stage['tp_ep']+=1
            if e['dpa']!=dpa: continue
            stage['dpa']+=1
            if conc not in e['concs']: continue
            stage['conc']+=1
            hits.append(dict(commit=v['commit'],t=v['cdate'],**e))
    specs=sorted(set(h['spec'] for h in hits))
    out.append(dict(r=r,conc=conc,tp=tp,ep=ep,dpa=dpa,g=g,hits=hits,specs=specs,stage=dict(stage),tkeys=sorted(tk) if tk else tk,
        tcommits=[h[:9] for t,h,k in tc],vers=[v['commit'][:9] for v in vs],mtp_possible=mtp_possible,first_mtp=(fm['commit'][:9],fm['cdate']) if fm else None,bare=bare))
pickle.dump(out,open(OUT,'wb'))
C=collections.Counter()
for x in out:
    s='|'.join(x['specs']) if x['hits'] else ('unmatched(no mtp possible)' if not x['mtp_possible'] else 'unmatched')
    C[(x['r']['model'],x['r']['system'],x['r']['backend'],x['r']['precision'],s)]+=1
if __name__=='__main__':
    for k,v in sorted(C.items()): print(k,v)
