# every version of .github/configs/nvidia-master.yaml (2025-11-01..2026-04-20): its single-node (non-disagg) entries,
# with the line span of each search-space entry (for citations)
import os, subprocess, yaml, json, sys
UNTIL=os.environ.get('UNTIL','2026-04-21')  # dbdump/: UNTIL=2026-04-25
R='/work/.mirror/SemiAnalysisAI+InferenceX/repo'
P='.github/configs/nvidia-master.yaml'
def g(*a): return subprocess.run(['git','-C',R]+list(a),capture_output=True,text=True)
log=g('log','--format=%H %cI','--',P).stdout.split('\n')
out=[]
for l in log:
    if not l: continue
    h,cd=l.split()
    if cd<'2025-11-01' or cd>UNTIL: continue
    txt=g('show',f'{h}:{P}').stdout
    try: root=yaml.compose(txt); y=yaml.safe_load(txt)
    except Exception as e: print('yamlerr',h,e,file=sys.stderr); continue
    nodes={k.value:v for k,v in root.value}
    ents=[]
    for k,v in y.items():
        if not isinstance(v,dict) or v.get('disagg') or v.get('multinode'): continue
        kn={a.value:b for a,b in nodes[k].value}
        slnodes=kn['seq-len-configs'].value
        for sl,sln in zip(v.get('seq-len-configs',[]),slnodes):
            ssn=[b for a,b in sln.value if a.value=='search-space'][0].value
            for i,(ss,sn) in enumerate(zip(sl.get('search-space',[]),ssn)):
                if 'conc-list' in ss: concs=list(ss['conc-list'])
                else:
                    concs=[]; c=ss['conc-start']
                    while c<=ss['conc-end']:
                        concs.append(c)
                        if c==ss['conc-end']: break
                        c*=2
                        if c>ss['conc-end']: c=ss['conc-end']
                ents.append(dict(key=k,image=v.get('image'),model=v.get('model'),prefix=v.get('model-prefix'),runner=v.get('runner'),
                    precision=v.get('precision'),framework=v.get('framework'),isl=sl['isl'],osl=sl['osl'],idx=i,
                    tp=ss['tp'],ep=ss.get('ep',1),dpa=bool(ss.get('dp-attn',False)),spec=ss.get('spec-decoding','none'),concs=concs,
                    line=(sn.start_mark.line+1,sn.end_mark.line+1),keyline=nodes[k].start_mark.line))
    out.append(dict(commit=h,cdate=cd,entries=ents))
json.dump(out,open('versions_agg.json','w'))
print(len(out))
