# write_csv_db.py: one row per db-dump agg row from the executed runs (parse.py of /tmp/ixrecv) ->
#   agg_config_dbdump_full.csv (all parsed columns, as /tmp/ixrecv/agg_config.csv) and
#   agg_config_dbdump.csv (exactly the columns of perfmodel/measure/data/inferencex/agg_config.csv)
import pickle, csv, collections, re, subprocess, functools, json
from parse import parse_job, settings, TRT, SGL, VLLM, b
R='/work/.mirror/SemiAnalysisAI+InferenceX/repo'
P=pickle.load(open('plan_jobs.pkl','rb'))
@functools.lru_cache(None)
def lines(c,p):
    r=subprocess.run(['git','-C',R,'show',f'{c}:{p}'],capture_output=True,text=True)
    return r.stdout.split('\n') if r.returncode==0 else []
def lno(c,p,pat,val=None):
    # first non-comment line matching pat; with val, prefer the first such line that also contains the value as a word
    if val not in (None,''):
        for i,l in enumerate(lines(c,p),1):
            if re.search(pat,l) and not l.strip().startswith('#') and re.search(r'(?<![\w.])'+re.escape(str(val))+r'(?![\w.])',l): return i
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
FINAL=list(csv.reader(open('/work/main/perfmodel/measure/data/inferencex/agg_config.csv')))[0]
assert all(c in HEAD for c in FINAL), FINAL
BADNP={}
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
def runtag(x,got_or_runs):
    t=f"{x['launcher']}@{x['commit'][:9]}"
    if len(set(y['spec'] for y in got_or_runs))>1: t+=f"/{x['spec']}"
    if len(set((y['tp'],y['ep'],y['dpa']) for y in got_or_runs))>1: t+=f"/tp{x['tp']}ep{x['ep']}{'dpa' if x['dpa'] else ''}"
    return t
rows=[]; stats=collections.Counter()
for p in P:
    r=p['r']; prefix,hw,fw,prec=p['g']; eng=FWE[fw]; conc=p['conc']
    out={k:'' for k in HEAD}; out['id']=p['id']; notes=[]; ev=[]
    prim=[x for x in p['runs'] if 'alternative' not in x['src']]
    alt=[x for x in p['runs'] if 'alternative' in x['src']]
    got=[]; missing=[]
    for x in prim:
        if x['launcher'] is None: missing.append((x,None)); continue
        v,res=runvals(x,eng)
        if v is None: missing.append((x,res)); continue
        got.append((x,v,res))
    if not got:
        notes.append('UNDECIDED: no launcher ran a benchmark script: '+'; '.join(f"{x['launcher']}@{x['commit'][:9]}: {why(x) if x['launcher'] else 'no runner label'}" for x,res in missing))
        out.update(commit='|'.join(sorted(set(x['commit'] for x in prim))),commit_source=prim[0]['src'] if prim else '')
        out['note']=' ; '.join(notes); rows.append(out); stats['norun_'+eng]+=1; continue
    gx=[x for x,v,res in got]
    commits=sorted(set(x['commit'] for x in gx)); out['commit']='|'.join(commits)
    out['commit_source']='|'.join(sorted(set(x['src'] for x in gx)))
    labs=collections.defaultdict(set)
    for x in gx: labs[x['label']].add(x['launcher'])
    out['runner']='; '.join(f"{l} [{','.join(sorted(s))}]" for l,s in sorted(labs.items()))
    out['script']='|'.join(sorted(set(f"{res['script']}@{x['commit'][:9]}" for x,v,res in got)))
    if missing:
        ms=collections.defaultdict(set)
        for x,res in missing: ms[why(x)].add(f"{x['launcher']}@{x['commit'][:9]}")
        notes.append('launcher(s) that could not run it: '+'; '.join(f"{','.join(sorted(v))} ({k})" for k,v in ms.items()))
    cols=['num_prompts','num_warmups','random_range_ratio']+ENGCOLS[eng]
    def colname(c):
        cc=[z for e,xx,z in ALLCOLS if e==eng and xx==c]; return cc[0] if cc else c
    for c in cols:
        vals=collections.defaultdict(set)
        for x,v,res in got: vals[v[c]].add(runtag(x,gx))
        if len(vals)==1: out[colname(c)]=next(iter(vals))
        else:
            out[colname(c)]=''
            notes.append(f"{c} differs by runner/commit/spec: "+'; '.join(f"{val or '(unset)'} on {','.join(sorted(w))}" for val,w in sorted(vals.items())))
    if out['num_prompts']: out['num_prompts_x_conc']=f"{int(out['num_prompts'])/conc:g}"
    for x in alt:
        v,res=runvals(x,eng) if x['launcher'] else (None,None)
        if v is None: continue
        d=[f"{c}={v[c] or '(unset)'}" for c in cols if out[colname(c)]!=v[c] and (out[colname(c)] or c in ENGCOLS[eng])]
        if d: notes.append(f"commit choice matters: {x['src'].replace(' (alternative)','')} ({x['commit'][:9]}, {x['launcher']}) gives {', '.join(d)}")
    specs=sorted(set(x['spec'] for x in gx))
    if len(specs)>1: notes.append('PAIR/ambiguous MTP vs non-MTP: the workflow run is one of the sweep commits listed in commit; the mtp and none scripts were both executed'+('' if any('differs' in n for n in notes) else ' and give the same value in every column'))
    for x in gx:
        if x.get('specnote'): notes.append(x['specnote']); break
    tps=sorted(set((x['tp'],x['ep'],x['dpa']) for x in gx))
    if len(tps)>1: notes.append('topology ambiguous from the sample columns: '+', '.join(f"tp{a} ep{b_} dp-attn {str(c_).lower()}" for a,b_,c_ in tps)+' (both entries list this concurrency)')
    notes.append(f"db-dump workflow_run_id {r['workflow_run_id']}, config_id {r['config_id']}; bare date {r['measured'][:10]}")
    if len(commits)>1: notes.append(f"{len(commits)} candidate commits")
    x,v,res=got[0]; c=x['commit']; sc=res['script']
    e1=[f"{sc}@{c[:9]}"]
    for k in ['num_prompts']+[cc for cc in ENGCOLS[eng] if v[cc]!='']:
        ln=lno(c,sc,PAT[k],v[k] if k in v else None); e1.append(f"{k}:L{ln}" if ln else f"{k}:?")
    ev.append(' '.join(e1))
    ln=lno(c,sc,PAT['num_warmups'])
    wl=f"{sc}#L{ln}" if ln else (f"benchmarks/benchmark_lib.sh@{c[:9]}#L{lno(c,'benchmarks/benchmark_lib.sh',PAT['num_warmups'])}" if lno(c,'benchmarks/benchmark_lib.sh',PAT['num_warmups']) else 'none in command')
    ev.append(f"num_warmups: {wl}")
    lf=f"runners/launch_{x['launcher']}.sh"
    np_=lno(c,lf,r'NUM_PROMPTS')
    if np_: ev.append(f"{lf}@{c[:9]}#L{np_} (NUM_PROMPTS)")
    ev.append(f"random_range_ratio 0.8: .github/workflows/benchmark-tmpl.yml@{c[:9]} env; max-model-len from {x.get('maxlen_src')}")
    if res.get('cfgfile'): ev.append(f"engine config file {res['cfgfile'].split('/')[-1]} generated by the script (captured)")
    ys=sorted(set(f".github/configs/nvidia-master.yaml@{y['ycommit'][:9]} [{y['key']}] L{y['yline'][0]}-{y['yline'][1]}" for y in gx if y.get('key')))
    if ys: ev.append('matched entry: '+' | '.join(ys))
    out['evidence']=' ; '.join(ev); out['note']=' ; '.join(dict.fromkeys(notes))
    rows.append(out); stats['ok_'+eng]+=1
with open('agg_config_dbdump_full.csv','w',newline='') as f:
    w=csv.DictWriter(f,fieldnames=HEAD); w.writeheader(); w.writerows(rows)
with open('agg_config_dbdump.csv','w',newline='') as f:
    w=csv.DictWriter(f,fieldnames=FINAL,extrasaction='ignore'); w.writeheader(); w.writerows(rows)
print(stats, len(rows))
