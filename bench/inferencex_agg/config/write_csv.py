# write_csv.py: one row per sample row from the executed runs (parse.py) -> agg_config.csv
import pickle, csv, collections, re, subprocess, functools, json
from parse import parse_job, settings, TRT, SGL, VLLM, b
R='/work/.mirror/SemiAnalysisAI+InferenceX/repo'
P=pickle.load(open('plan_jobs.pkl','rb'))
spec={r['id']:r for r in csv.DictReader(open('agg_speculative.csv'))}
@functools.lru_cache(None)
def lines(c,p):
    r=subprocess.run(['git','-C',R,'show',f'{c}:{p}'],capture_output=True,text=True)
    return r.stdout.split('\n') if r.returncode==0 else []
def lno(c,p,pat):
    for i,l in enumerate(lines(c,p),1):
        if re.search(pat,l) and not l.strip().startswith('#'): return i
PAT={'num_prompts':r'num.prompts','num_warmups':r'num.warmups','random_range_ratio':r'random.range.ratio',
     'max_num_tokens':r'max_num_tokens|MAX_NUM_TOKENS=','max_batch_size':r'max_batch_size','enable_attention_dp':r'enable_attention_dp',
     'batch_wait_timeout_iters':r'batch_wait_timeout_iters','batch_wait_max_tokens_ratio':r'batch_wait_max_tokens_ratio',
     'adp_enable_balance':r'enable_balance','adp_timeout_iters':r'timeout_iters:','adp_batching_wait_iters':r'batching_wait_iters',
     'enable_chunked_prefill':r'enable.chunked.prefill','stream_interval':r'stream.interval','cuda_graph_max_batch_size':r'cuda_graph_config|cuda_graph_batch_sizes',
     'kv_free_mem_fraction':r'free_gpu_memory_fraction','chunked_prefill_size':r'chunked-prefill-size','max_running_requests':r'max-running-requests',
     'max_prefill_tokens':r'max-prefill-tokens','cuda_graph_max_bs':r'cuda-graph-max-bs','enable_dp_attention':r'enable-dp-attention',
     'mem_fraction_static':r'mem-fraction-static','scheduler_recv_interval':r'scheduler.recv.interval|SCHEDULER_RECV_INTERVAL','schedule_policy':r'schedule-policy','max_num_batched_tokens':r'max.num.batched.tokens',
     'max_num_seqs':r'max.num.seqs','gpu_memory_utilization':r'gpu.memory.utilization','async_scheduling':r'async.scheduling','max_model_len':r'max.model.len'}
ENGCOLS={'trtllm':TRT,'sglang':SGL,'vllm':VLLM}
FWE={'trt':'trtllm','sglang':'sglang','vllm':'vllm'}
ALLCOLS=[]
for e in ('trtllm','sglang','vllm'):
    for c in ENGCOLS[e]:
        col=f'{e}_{c}' if c in ('stream_interval','enable_chunked_prefill') else c
        ALLCOLS.append((e,c,col))
HEAD=['id','commit','commit_source','runner','script','num_prompts','num_prompts_x_conc','num_warmups','random_range_ratio']+[c for e,x,c in ALLCOLS]+['evidence','note']
def why(x):
    d='runs/'+x['job']
    if x['job'] in BADNP: return 'its benchmark command has --num-prompts with no value: NUM_PROMPTS not set for this launcher, the client would fail'
    try: e=open(d+'/stderr.log').read(); o=open(d+'/stdout.log').read()
    except Exception: return 'not run'
    if 'No such file' in e: return 'benchmark script absent'
    m=re.findall(r'^  - (\w+)',o,re.M)
    if 'not set' in o: return 'required env not passed to the container: '+','.join(m)
    return 'no benchmark command captured'
def runvals(run,eng):
    res=parse_job(run['job'])
    if res.get('status')!='ok' or not res.get('bench'): return None,res
    bch=res['bench']; v={}
    v['num_prompts']=b(bch.get('num_prompts')); v['num_warmups']=b(bch.get('num_warmups','0')); v['random_range_ratio']=b(bch.get('random_range_ratio'))
    st=settings(res)
    for c in ENGCOLS[eng]: v[c]=st.get(c,('',None))[0]
    v['_src']={c:st[c][1] for c in st}
    if not re.fullmatch(r'\d+',v['num_prompts']):
        BADNP[run['job']]=True; return None,res
    return v,res
BADNP={}
rows=[]; stats=collections.Counter()
for p in P:
    r=p['r']; prefix,hw,fw,prec=p['g']; eng=FWE[fw]; conc=p['conc']
    out={k:'' for k in HEAD}; out['id']=p['id']; notes=[]; ev=[]
    sp=spec[p['id']]
    if hw in ('gb200',):
        c=p['runs'][0]['commit'] if p['runs'] else ''
        out.update(commit=c,commit_source=p['runs'][0]['src'] if p['runs'] else '',runner='gb200-nv (runners/launch_gb200-nv.sh)')
        notes.append('UNDECIDED: multinode GB200 Dynamo run (Nov 2025, .github/workflows/gb200-tests.yml -> runners/launch_gb200-nv.sh); the benchmark and engine settings come from the external ai-dynamo/dynamo performance_sweeps scripts / cluster config files, not from InferenceX; not a single-node script')
        out['note']=' ; '.join(notes); rows.append(out); stats['gb200']+=1; continue
    prim=[x for x in p['runs'] if 'alternative' not in x['src']]
    alt=[x for x in p['runs'] if 'alternative' in x['src']]
    if not prim or all(x['launcher'] is None for x in prim):
        c=prim[0]['commit'] if prim else ''
        out.update(commit=c,commit_source=prim[0]['src'] if prim else '')
        notes.append(f"UNDECIDED: wip run from a non-main branch; no {prefix}_{prec}_{hw} single-node benchmark script or yaml entry exists on any mirrored ref by the measured time (the {hw} scripts appear only on 2026-04-17 branches), and at {c[:9]} runners/launch_{hw}-nv.sh is the multinode srt-slurm launcher: settings unknown")
        out['note']=' ; '.join(notes); rows.append(out); stats['nobranch']+=1; continue
    got=[]; missing=[]
    for x in prim:
        v,res=runvals(x,eng)
        if v is None:
            missing.append((x,res)); continue
        got.append((x,v,res))
    if not got:
        notes.append('UNDECIDED: no launcher ran a benchmark script: '+'; '.join(f"{x['launcher']}@{x['commit'][:9]}: {why(x)}" for x,res in missing))
        out.update(commit='|'.join(sorted(set(x['commit'] for x in prim))),commit_source=prim[0]['src'])
        out['note']=' ; '.join(notes); rows.append(out); stats['norun']+=1; continue
    commits=sorted(set(x['commit'] for x,v,res in got)); out['commit']='|'.join(commits)
    out['commit_source']='|'.join(sorted(set(x['src'] for x,v,res in got)))
    labs=collections.defaultdict(set)
    for x,v,res in got: labs[x['label']].add(x['launcher'])
    out['runner']='; '.join(f"{l} [{','.join(sorted(s))}]" for l,s in sorted(labs.items()))
    scripts=sorted(set(f"{res['script']}@{x['commit'][:9]}" for x,v,res in got)); out['script']='|'.join(scripts)
    if missing:
        ms=collections.defaultdict(set)
        for x,res in missing: ms[why(x)].add(f"{x['launcher']}@{x['commit'][:9]}")
        notes.append('launcher(s) that could not run it: '+'; '.join(f"{','.join(sorted(v))} ({k})" for k,v in ms.items()))
    # per column: agree across launchers/commits?
    cols=['num_prompts','num_warmups','random_range_ratio']+ENGCOLS[eng]
    for c in cols:
        vals=collections.defaultdict(set)
        for x,v,res in got: vals[v[c]].add(f"{x['launcher']}@{x['commit'][:9]}"+(f"/{x['spec']}" if len(set(y['spec'] for y,_,_ in got))>1 else ''))
        col=[cc for e,xx,cc in ALLCOLS if e==eng and xx==c]
        col=col[0] if col else c
        if len(vals)==1: out[col]=next(iter(vals))
        else:
            out[col]=''
            notes.append(f"{c} differs by runner/commit: "+'; '.join(f"{val or '(unset)'} on {','.join(sorted(w))}" for val,w in sorted(vals.items())))
    if out['num_prompts']:
        n=int(out['num_prompts']); out['num_prompts_x_conc']=f"{n/conc:g}"
    # alternatives (start of a bare date)
    for x in alt:
        v,res=runvals(x,eng)
        if v is None: continue
        d=[f"{c}={v[c] or '(unset)'}" for c in cols if (out[[cc for e,xx,cc in ALLCOLS if e==eng and xx==c][0]] if c in ENGCOLS[eng] else out[c])!=v[c] and (out.get(c) or c in ENGCOLS[eng])]
        if d: notes.append(f"bare date spanning a change: at {x['commit'][:9]} (in force at the start of {r['measured'][:10]}) {', '.join(d)}")
    if r['wip']=='True': notes.append('wip=True run (non-main branch)')
    if 'bare date' in out['commit_source'] or r['measured'].endswith('T00:00:00.000Z') or len(r['measured'])==10: notes.append(f"bare date {r['measured'][:10]}")
    if sp['speculative'] in ('mtp|none',): notes.append('PAIR/ambiguous MTP vs non-MTP entry (agg_speculative.csv); both scripts executed')
    if len(commits)>1: notes.append(f"{len(commits)} candidate commits (several sweep commits in the bare-date window listed the key)")
    # evidence
    x,v,res=got[0]; c=x['commit']; sc=res['script']
    e1=[f"{sc}@{c[:9]}"]
    for k in ['num_prompts']+[cc for cc in ENGCOLS[eng] if v[cc]!='']:
        ln=lno(c,sc,PAT[k])
        src=v['_src'].get(k,'')
        e1.append(f"{k}:L{ln}" if ln else f"{k}:?")
    ln=lno(c,sc,PAT['num_warmups'])
    wl=f"{sc}#L{ln}" if ln else (f"benchmarks/benchmark_lib.sh@{c[:9]}#L{lno(c,'benchmarks/benchmark_lib.sh',PAT['num_warmups'])}" if lno(c,'benchmarks/benchmark_lib.sh',PAT['num_warmups']) else 'none in command')
    ev.append(' '.join(e1)); ev.append(f"num_warmups: {wl}")
    lf=f"runners/launch_{x['launcher']}.sh"
    np_=lno(c,lf,r'NUM_PROMPTS')
    if np_: ev.append(f"{lf}@{c[:9]}#L{np_} (NUM_PROMPTS)")
    ev.append(f"random_range_ratio 0.8: .github/workflows/benchmark-tmpl.yml@{c[:9]} env; max-model-len from {x.get('maxlen_src')}")
    if res.get('cfgfile'): ev.append(f"engine config file {res['cfgfile']} generated by the script (captured)")
    out['evidence']=' ; '.join(ev); out['note']=' ; '.join(dict.fromkeys(notes))
    rows.append(out); stats['ok']+=1
with open('agg_config.csv','w',newline='') as f:
    w=csv.DictWriter(f,fieldnames=HEAD); w.writeheader(); w.writerows(rows)
print(stats, len(rows))
