"""Every version of InferenceX's .github/configs/nvidia-master.yaml in the mirror (all refs, no date window: a copy of
extract.py's reading), parsed, to /tmp/sub/ix/versions.json, for limits_cfg.py and limits_check.py. Run first
(about 6 min); the mirror path is that of this machine."""
import subprocess, yaml, json, sys
R='/work/.mirror/SemiAnalysisAI+InferenceX/repo'
P='.github/configs/nvidia-master.yaml'
log=subprocess.run(['git','-C',R,'log','--all','--format=%H %cI','--',P],capture_output=True,text=True).stdout.split('\n')
out=[]; seen=set()
for l in log:
    if not l: continue
    h,cd=l.split()
    if h in seen: continue
    seen.add(h)
    txt=subprocess.run(['git','-C',R,'show',f'{h}:{P}'],capture_output=True,text=True).stdout
    try: y=yaml.load(txt,Loader=yaml.CSafeLoader)
    except Exception as e: print('yamlerr',h,e,file=sys.stderr); continue
    if not isinstance(y,dict): continue
    ents=[]
    for k,v in y.items():
        if not isinstance(v,dict) or not v.get('disagg'): continue
        for sl in v.get('seq-len-configs',[]) or []:
            for i,ss in enumerate(sl.get('search-space',[]) or []):
                ents.append(dict(key=k,image=v.get('image'),prefix=v.get('model-prefix'),runner=v.get('runner'),precision=v.get('precision'),framework=v.get('framework'),isl=sl['isl'],osl=sl['osl'],idx=i,ss=ss))
    out.append(dict(commit=h,cdate=cd,entries=ents))
json.dump(out,open('/tmp/sub/ix/versions.json','w'),default=str)
print(len(out))
