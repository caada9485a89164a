# parse.py: read every executed run (runs/<job>/cap.log + generated config files) into settings; write agg_config.csv
import pickle, shlex, os, re, yaml, csv, collections, json, functools, subprocess
R='/work/.mirror/SemiAnalysisAI+InferenceX/repo'
P=pickle.load(open('plan_jobs.pkl','rb'))
def toks(line):
    try: return shlex.split(line)
    except Exception: return line.split()
def argdict(ts):
    d={}; i=0
    while i<len(ts):
        t=ts[i]
        if t.startswith('--'):
            if '=' in t: k,v=t[2:].split('=',1); d[k.replace('-','_')]=v
            elif i+1<len(ts) and not ts[i+1].startswith('--'): d[t[2:].replace('-','_')]=ts[i+1]; i+=1
            else: d[t[2:].replace('-','_')]=True
        i+=1
    return d
def flat(y,pre=''):
    out={}
    if isinstance(y,dict):
        for k,v in y.items(): out.update(flat(v,f'{pre}{k}.'))
    else: out[pre[:-1]]=y
    return out
@functools.lru_cache(None)
def parse_job(key):
    ws=f'runs/{key}'
    if not os.path.exists(f'{ws}/cap.log'): return dict(status='not run')
    L=[l.rstrip('\n') for l in open(f'{ws}/cap.log')]
    res=dict(status='ok',script=None,bench=None,server=None,engine=None,cfgfile=None,cfg=None,lines=L)
    for l in L:
        if l.startswith('IX'): continue
        ts=toks(l)
        if not ts: continue
        if ts[0] in ('srun','docker') and res['script'] is None:
            for t in ts:
                m=re.search(r'(benchmarks/\S+?\.sh)',t)
                if m and 'IMAGE' not in t: res['script']=m.group(1); break
        # benchmark client
        for j,t in enumerate(ts):
            if 'benchmark_serving.py' in t:
                if ' ' in t:   # inside a bash -lc string
                    ts2=toks(t); k=[i for i,x in enumerate(ts2) if x.endswith('benchmark_serving.py')][0]; res['bench']=argdict(ts2[k+1:])
                else: res['bench']=argdict(ts[j+1:])
                break
        # servers
        if 'trtllm-serve' in ts:
            k=ts.index('trtllm-serve'); res['engine']='trtllm'; res['server']=argdict(ts[k+1:]); res['server_line']=' '.join(ts[k:])
        elif ts[0]=='vllm' and len(ts)>1 and ts[1]=='serve':
            res['engine']='vllm'; res['server']=argdict(ts[2:]); res['server_line']=' '.join(ts)
        elif ts[0] in ('python3','python') and any(x in ('sglang.launch_server','sglang_router.launch_server') for x in ts):
            res['engine']='sglang'; res['server']=argdict(ts); res['server_line']=' '.join(ts)
        elif ts[0] in ('python3','python') and any('vllm.entrypoints' in x for x in ts):
            res['engine']='vllm'; res['server']=argdict(ts); res['server_line']=' '.join(ts)
    s=res['server'] or {}
    cf=s.get('extra_llm_api_options') or s.get('config')
    if isinstance(cf,str):
        p=cf if cf.startswith('/') else f'{ws}/{cf}'
        if os.path.exists(p):
            res['cfgfile']=cf; txt=open(p).read(); res['cfgtxt']=txt
            try: res['cfg']=flat(yaml.safe_load(txt) or {})
            except Exception as e: res['cfg']={'_yamlerror':str(e)}
        else: res['cfgfile']=cf+' (MISSING)'
    return res
def b(v):
    if v is None or v=='': return ''
    if isinstance(v,bool): return 'true' if v else 'false'
    return str(v)
def pick(d,*ks):
    for k in ks:
        if k in d: return d[k]
    return None
TRT=['max_num_tokens','max_batch_size','enable_attention_dp','batch_wait_timeout_iters','batch_wait_max_tokens_ratio','adp_enable_balance','adp_timeout_iters','adp_batching_wait_iters','enable_chunked_prefill','stream_interval','cuda_graph_max_batch_size','kv_free_mem_fraction']
SGL=['chunked_prefill_size','max_running_requests','max_prefill_tokens','cuda_graph_max_bs','enable_dp_attention','mem_fraction_static','stream_interval','schedule_policy','scheduler_recv_interval']
VLLM=['max_num_batched_tokens','max_num_seqs','enable_chunked_prefill','gpu_memory_utilization','async_scheduling','max_model_len']
def settings(res):
    """column -> (value, source key) for the engine of this run"""
    s=res['server'] or {}; c=res['cfg'] or {}; e=res['engine']; out={}
    def put(col,val,src):
        if val is not None: out[col]=(b(val),src)
    if e=='trtllm':
        for col,cli,ck in [('max_num_tokens',['max_num_tokens'],['max_num_tokens']),('max_batch_size',['max_batch_size'],['max_batch_size']),
                           ('enable_attention_dp',['enable_attention_dp'],['enable_attention_dp']),
                           ('batch_wait_timeout_iters',[],['batch_wait_timeout_iters']),('batch_wait_max_tokens_ratio',[],['batch_wait_max_tokens_ratio']),
                           ('adp_enable_balance',[],['attention_dp_config.enable_balance']),('adp_timeout_iters',[],['attention_dp_config.timeout_iters']),
                           ('adp_batching_wait_iters',[],['attention_dp_config.batching_wait_iters']),
                           ('enable_chunked_prefill',['enable_chunked_prefill'],['enable_chunked_prefill']),('stream_interval',['stream_interval'],['stream_interval']),
                           ('cuda_graph_max_batch_size',[],['cuda_graph_config.max_batch_size']),
                           ('kv_free_mem_fraction',['kv_cache_free_gpu_memory_fraction','free_gpu_memory_fraction'],['kv_cache_config.free_gpu_memory_fraction'])]:
            v=pick(c,*ck)
            if v is not None: put(col,v,'cfg:'+[k for k in ck if k in c][0]); continue
            v=pick(s,*cli)
            if v is not None: put(col,v,'cli:--'+[k for k in cli if k in s][0])
        # cuda_graph_batch_sizes list (older TRT configs) -> max of the list
        if 'cuda_graph_max_batch_size' not in out:
            for k in ('cuda_graph_batch_sizes','cuda_graph_config.batch_sizes'):
                if isinstance(c.get(k),list): put('cuda_graph_max_batch_size',max(c[k]),'cfg:'+k+' (max)')
    elif e=='sglang':
        for col in SGL:
            v=pick(s,col)
            if v is not None: put(col,v,'cli:--'+col.replace('_','-'))
        if 'disable_cuda_graph' in s and 'cuda_graph_max_bs' not in out: out['cuda_graph_max_bs']=('','cli:--disable-cuda-graph (no cuda graph)')
    elif e=='vllm':
        for col in VLLM:
            v=pick(s,col)
            if v is None and ('no_'+col) in s: v=False; src='cli:--no-'+col.replace('_','-')
            else: src='cli:--'+col.replace('_','-')
            if v is None:
                ck=[k for k in (col.replace('_','-'),col,'no-'+col.replace('_','-')) if k in c]
                if ck:
                    k=ck[0]; v=c[k]
                    if k.startswith('no-'): v=(not v) if isinstance(v,bool) else v
                    src='cfg:'+k
            if v is not None: put(col,v,src)
    return out
if __name__=='__main__':
    import sys
    for k in sys.argv[1:]:
        r=parse_job(k); print(json.dumps({x:r.get(x) for x in ('status','script','engine','bench','server','cfgfile','cfg')},indent=0,default=str)); print(settings(r))
