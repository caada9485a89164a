# counts.py: the README's counts from agg_config_dbdump(_full).csv
import pandas as pd, csv, collections
F=pd.read_csv('agg_config_dbdump.csv',dtype=str,keep_default_na=False)
W=pd.read_csv('agg_config_dbdump_full.csv',dtype=str,keep_default_na=False)
R=pd.read_csv('db_rows.csv',dtype=str,keep_default_na=False)
main=list(csv.reader(open('/work/main/perfmodel/measure/data/inferencex/agg_config.csv')))[0]
assert list(F.columns)==main, 'columns'
assert F.id.is_unique and set(F.id)==set(R.id) and len(F)==618
a=W.merge(R[['id','backend','concurrency','workflow_run_id','system','precision']],on='id')
print('rows',len(a)); print(a.backend.value_counts().to_dict())
dec=a[a.script!='']
print('decided (valid run)',dec.backend.value_counts().to_dict())
full=a[(a.script!='')&(~a.note.str.contains('differs'))]
print('no column left blank for disagreement',full.backend.value_counts().to_dict())
amb=a[a.note.str.contains('differs')]
print('rows with some column blank (candidates disagree)',amb.backend.value_counts().to_dict())
print('num_prompts_x_conc',a.groupby('backend').num_prompts_x_conc.value_counts().to_dict())
a['wx']=[('0' if w=='0' else (f"{int(w)/int(c):g}xCONC" if w else 'blank')) for w,c in zip(a.num_warmups,a.concurrency)]
print('num_warmups',a.groupby('backend').wx.value_counts().to_dict())
print('random_range_ratio',a.random_range_ratio.value_counts().to_dict())
t=a[a.backend=='trtllm']
for c in ['max_num_tokens','max_batch_size','enable_attention_dp','batch_wait_timeout_iters','batch_wait_max_tokens_ratio','adp_enable_balance','adp_timeout_iters','adp_batching_wait_iters']:
    print('trt',c,t[c].value_counts().to_dict())
s=a[a.backend=='sglang']
for c in ['chunked_prefill_size','max_running_requests','max_prefill_tokens','scheduler_recv_interval']:
    print('sglang',c,s[c].value_counts().to_dict())
v=a[a.backend=='vllm']
for c in ['max_num_batched_tokens','max_num_seqs']:
    print('vllm',c,v[c].value_counts().to_dict())
print('vllm max_num_seqs set by prefix',v[v.max_num_seqs!=''].id.str.split('_agg').str[0].value_counts().to_dict())
print('vllm mnbt by prefix',v.groupby(v.id.str.split('_agg').str[0]).max_num_batched_tokens.value_counts().to_dict())
print('sglang sri by prefix',s.groupby(s.id.str.split('_agg').str[0]).scheduler_recv_interval.value_counts().to_dict())
print('commit_source',a.commit_source.str.replace(r'\[.*\]','',regex=True).str.replace(r'one of \d+','one of N',regex=True).value_counts().to_dict())
print('PAIR',a.note.str.contains('PAIR').sum(),'topology ambiguous',a.note.str.contains('topology ambiguous').sum(),'config 87',a.note.str.contains('config_id 87').sum(),'commit choice matters',a.note.str.contains('commit choice matters').sum())
