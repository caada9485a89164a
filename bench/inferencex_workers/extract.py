import subprocess, yaml, json, sys
R='/work/.mirror/SemiAnalysisAI+InferenceX/repo'
P='.github/configs/nvidia-master.yaml'
log=subprocess.run(['git','-C',R,'log','--format=%H %cI %aI','--',P],capture_output=True,text=True).stdout.split('\n')
out=[]
for l in log:
    if not l: continue
    h,cd,ad=l.split()
    if cd<'2025-11-01' or cd>'2026-04-20': continue
    txt=subprocess.run(['git','-C',R,'show',f'{h}:{P}'],capture_output=True,text=True).stdout
    try: y=yaml.safe_load(txt)
    except Exception as e: print('yamlerr',h,e,file=sys.stderr); continue
    ents=[]
    for k,v in y.items():
        if not isinstance(v,dict) or not v.get('disagg'): continue
        for sl in v.get('seq-len-configs',[]):
            for i,ss in enumerate(sl.get('search-space',[])):
                ents.append(dict(key=k,image=v.get('image'),model=v.get('model'),prefix=v.get('model-prefix'),runner=v.get('runner'),precision=v.get('precision'),framework=v.get('framework'),isl=sl['isl'],osl=sl['osl'],idx=i,spec=ss.get('spec-decoding','none'),conc=ss.get('conc-list') or ss.get('conc'),ss=ss))
    out.append(dict(commit=h,cdate=cd,adate=ad,entries=ents))
json.dump(out,open('versions.json','w'),default=str)
print(len(out))
