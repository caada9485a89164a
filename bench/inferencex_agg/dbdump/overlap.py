# overlap.py: db-dump rows that describe the same cell (model/hw/engine/precision/ISL/OSL/conc/tp/ep/dp-attn) on the same date as a
# 2026-03-25/04-06 CSV row already in agg_config.csv; compares commit and settings (no latency read)
import pickle, csv, re, collections
MODEL={'DeepSeek-R1':'dsr1','GPT-OSS-120B':'gptoss','Qwen3.5-397B':'qwen3.5','GLM-5':'glm5','Kimi-K2.5':'kimik2.5','MiniMax-M2.5':'minimaxm2.5','Llama-3.1-70B':'70b'}
FW={'trtllm':'trt','sglang':'sglang','vllm':'vllm'}
old={r['id']:r for r in csv.DictReader(open('/tmp/ixcfg/agg_rows.csv'))}
oc={r['id']:r for r in csv.DictReader(open('/tmp/ixrecv/agg_config.csv'))}
new={r['id']:r for r in csv.DictReader(open('agg_config_dbdump_full.csv'))}
P=pickle.load(open('plan_jobs.pkl','rb'))
K=collections.defaultdict(list)
for i,r in old.items():
    m=re.search(r'_c(\d+)_tp(\d+)(?:_0)?_ep(\d+)(?:_0)?_\d+$',i)
    conc,tp,ep=map(int,m.groups()); dpa=float(r['attention_dp_size'])>1
    K[(MODEL[r['model']],r['system'].replace('_sxm',''),FW[r['backend']],r['precision'],int(r['isl']),int(r['osl']),conc,tp,ep,dpa,r['measured'][:10])].append(i)
cols=['num_prompts','num_warmups','random_range_ratio','max_num_tokens','max_batch_size','enable_attention_dp','batch_wait_timeout_iters','batch_wait_max_tokens_ratio','adp_enable_balance','adp_timeout_iters','adp_batching_wait_iters','chunked_prefill_size','max_running_requests','max_prefill_tokens','scheduler_recv_interval','max_num_batched_tokens','max_num_seqs']
C=collections.Counter(); ex=[]
for p in P:
    prim=[x for x in p['runs'] if 'alternative' not in x['src']]
    t=sorted(set((x['tp'],x['ep'],x['dpa']) for x in prim))
    if len(t)!=1: continue
    r=p['r']; k=p['g']+(int(r['isl']),int(r['osl']),p['conc'])+t[0]+(r['measured'][:10],)
    if k not in K: C['no same-date cell in the CSV rows']+=1; continue
    n=new[p['id']]
    for oid in K[k]:
        o=oc[oid]
        d=[c for c in cols if o[c]!=n[c]]
        sc=set(o['commit'].split('|'))&set(n['commit'].split('|'))
        C[('same cell', 'commit shared' if sc else 'commit differs', 'settings equal' if not d else 'settings differ')]+=1
        if d or not sc: ex.append((p['id'],oid,n['commit'][:9],o['commit'][:40],[(c,n[c],o[c]) for c in d]))
for k,v in C.items(): print(v,k)
CC=collections.Counter((e[0].split("_agg")[0],e[2][:9],e[3][:9]) for e in ex if e[2][:9] not in e[3])
for k,v in CC.items(): print(v,k)
