# execute.py: run every distinct (commit, launcher, env) of plan.pkl through runone.sh; collect captured commands + new files
import pickle, subprocess, hashlib, os, json, re, functools, sys
from concurrent.futures import ThreadPoolExecutor
R='/work/.mirror/SemiAnalysisAI+InferenceX/repo'
P=pickle.load(open('plan.pkl','rb'))
DRY=os.environ.get('DRY')=='1'
def g(*a): return subprocess.run(['git','-C',R]+list(a),capture_output=True,text=True)
@functools.lru_cache(None)
def tmpl_env_names(c):
    t=g('show',f'{c}:.github/workflows/benchmark-tmpl.yml').stdout
    return set(re.findall(r'^\s+([A-Z][A-Z0-9_]+):',t,re.M))
@functools.lru_cache(None)
def maxlen(c,isl,osl):
    # the workflow's max-model-len: generate_sweep_configs.py 'isl + osl + N' (200 until f34a83b25, 256 from 2026-04-20),
    # else the nightly full-sweep-<seq>-scheduler.yml literal (Nov-Dec 2025), else full-sweep-tmpl.yml (before 2025-11-03)
    t=g('show',f'{c}:utils/matrix_logic/generate_sweep_configs.py')
    m=set(re.findall(r'isl \+ osl \+ (\d+)',t.stdout)) if t.returncode==0 else set()
    if len(m)==1: n=int(m.pop()); return isl+osl+n,f'utils/matrix_logic/generate_sweep_configs.py (isl + osl + {n})'
    short={1024:'1k',8192:'8k'}
    f=f".github/workflows/full-sweep-{short[isl]}{short[osl]}-scheduler.yml"
    t=g('show',f'{c}:{f}')
    if t.returncode==0:
        v=set(int(z) for z in re.findall(r'max-model-len:\s*(\d+)',t.stdout))
        if len(v)==1: return v.pop(),f
    t=g('show',f'{c}:.github/workflows/full-sweep-tmpl.yml').stdout
    m=re.findall(r'isl: (\d+)\s+osl: (\d+)\s+max-model-len: (\d+)',t)
    v=set(int(z) for a,b,z in m if (int(a),int(b))==(isl,osl))
    if len(v)==1: return v.pop(),'.github/workflows/full-sweep-tmpl.yml'
    return isl+osl+200,'ASSUMED isl+osl+200'
@functools.lru_cache(None)
def tmpl_job(c,prefix,label,fw,prec):
    import yaml
    t=g('show',f'{c}:.github/workflows/{prefix}-tmpl.yml')
    if t.returncode: return None
    for j,v in yaml.safe_load(t.stdout).get('jobs',{}).items():
        w=v.get('with',{})
        if w.get('runner')==label and w.get('framework')==fw and w.get('precision')==prec: return w
@functools.lru_cache(None)
def master(c):
    import yaml
    t=g('show',f'{c}:.github/configs/nvidia-master.yaml')
    return yaml.safe_load(t.stdout) if t.returncode==0 else None
def short(n): return {1024:'1k',8192:'8k'}.get(n,str(n))
jobs={}
for p in P:
    r=p['r']; prefix,hw,fw,prec=p['g']; isl,osl=int(r['isl']),int(r['osl'])
    for run in p['runs']:
        if run['launcher'] is None: continue
        c=run['commit']; ml,mlsrc=maxlen(c,isl,osl)
        env=dict(MODEL=r['model_path'],MODEL_PREFIX=prefix,EXP_NAME=f"{prefix}_{short(isl)}{short(osl)}",ISL=isl,OSL=osl,MAX_MODEL_LEN=ml,
                 RANDOM_RANGE_RATIO='0.8',IMAGE=r['image'],FRAMEWORK=fw,PRECISION=prec,TP=run['tp'],EP_SIZE=run['ep'],
                 DP_ATTENTION='true' if run['dpa'] else 'false',CONC=p['conc'],SPEC_DECODING=run['spec'],DISAGG='false',RUN_EVAL='false')
        if run.get('key'):
            y=master(c)
            if y and run['key'] in y:
                if y[run['key']].get('precision')!=prec: env['PRECISION']=y[run['key']]['precision']; run['yaml_precision']=env['PRECISION']
                if y[run['key']].get('model')!=env['MODEL']: env['MODEL']=y[run['key']]['model']; run['yaml_model']=env['MODEL']
                if not env['IMAGE']: env['IMAGE']=y[run['key']].get('image'); run['yaml_image']=env['IMAGE']
        elif run['label']:
            y=master(c)
            if y:
                es=[v for k,v in y.items() if isinstance(v,dict) and not v.get('multinode') and not v.get('disagg') and v.get('model-prefix')==prefix
                    and v.get('runner')==run['label'] and v.get('framework')==fw and v.get('precision')==prec]
                ms=sorted(set(v.get('model') for v in es))
                if len(ms)>1:
                    im=[v for v in es if (v.get('image') or '').replace('#','/')==(r['image'] or '').replace('#','/')]
                    ms2=sorted(set(v.get('model') for v in im))
                    run['model_note']=f"entries of that group at {c[:9]} name models {ms}; "+(f"image match -> {ms2[0]}" if len(ms2)==1 else 'no unique image match, used first')
                    ms=ms2 if len(ms2)==1 else ms
                if ms: env['MODEL']=ms[0]; run['cfg_model']=ms[0]
                if not env['IMAGE'] and es: env['IMAGE']=es[0].get('image')
            else:
                w=tmpl_job(c,prefix,run['label'],fw,prec)
                if w:
                    env['MODEL']=w['model']; run['tmpl_model']=w['model']
                    if not env['IMAGE']: env['IMAGE']=w['image']
        names=tmpl_env_names(c)
        env={k:v for k,v in env.items() if k in names}
        env.update(RUNNER_NAME=f"{run['launcher']}_0",RUNNER_TYPE=run['label'],HF_TOKEN='hf_stub',
                   RESULT_FILENAME=f"res_{prefix}_{prec}_{fw}_tp{run['tp']}_conc{p['conc']}")
        env.setdefault('HF_HUB_CACHE','/mnt/hf_hub_cache/')
        key=hashlib.sha1(json.dumps([c,run['launcher'],sorted(env.items())],default=str).encode()).hexdigest()[:16]
        run['job']=key; run['maxlen_src']=mlsrc; run['env']=env
        jobs[key]=(c,run['launcher'],env)
pickle.dump(P,open('plan_jobs.pkl','wb'))
print('jobs',len(jobs),file=sys.stderr)
os.makedirs('runs',exist_ok=True)
if DRY: sys.exit(0)
def do(item):
    key,(c,l,env)=item
    ws=f'/tmp/ixdb/runs/{key}'
    if os.path.exists(ws+'/.after'): return
    ef=f'/tmp/ixdb/runs/{key}.env'
    with open(ef,'w') as f:
        for k,v in env.items(): f.write(f"{k}={subprocess.list2cmdline([str(v)]) if False else repr(str(v))}\n")
    subprocess.run(['bash','/tmp/ixdb/runone.sh',c,l,ws,ef])
# materialize trees first (serially) to avoid races
for c in sorted(set(v[0] for v in jobs.values())):
    T=f'/tmp/ixdb/trees/{c}x'
    if not os.path.isdir(T):
        os.makedirs(T)
        subprocess.run(f"git -C {R} archive {c} benchmarks runners | tar -x -C {T}",shell=True,check=True)
        subprocess.run(f"grep -rl /workspace {T} | xargs -r sed -i 's#/workspace#${{IXWS}}#g'",shell=True)
        with open(f'{T}/benchmarks/benchmark_lib.sh','a') as f:
            f.write('\nwait_for_server_ready() { :; }\nstart_gpu_monitor() { :; }\nstop_gpu_monitor() { :; }\nrun_eval() { :; }\nappend_lm_eval_summary() { :; }\n')
lim=int(sys.argv[1]) if len(sys.argv)>1 else None
PRI={'trt':0,'sglang':1,'vllm':2}
items=sorted(jobs.items(),key=lambda kv:(PRI[kv[1][2]['RESULT_FILENAME'].split('_')[-3]],kv[0]))[:lim]
for it in items: do(it)
print('done',file=sys.stderr)
