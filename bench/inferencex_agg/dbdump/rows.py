# dump the db-dump agg rows of the silicon sample with the source string split (no latency columns loaded)
import pandas as pd
d=pd.read_csv('/work/main/perfmodel/measure/data/aiconfigurator/silicon_sample.csv',dtype=str)
d=d.drop(columns=[c for c in d.columns if c in ('silicon_ttft_ms','silicon_tpot_ms') or 'ttft' in c or 'tpot' in c or 'throughput' in c.lower()])
a=d[d.silicon_data_source.str.startswith('db-dump/')&(d['mode']=='agg')].copy()
s=a.silicon_data_source.str.extract(r'^db-dump/([^;]+); config_id=(\d+); silicon_concurrency=(\d+); measured=([^;]+); workflow_run_id=(\d+)(?:; (.*))?$')
assert s.notna()[[0,1,2,3,4]].all().all()
a[['dump','config_id','concurrency','measured','workflow_run_id','image']]=s.values
a['image']=a.image.fillna('')
a['wip']='False'
cols=['id','dump','config_id','concurrency','measured','workflow_run_id','wip','image','backend','backend_version','model_path','system','precision','isl','osl','batch_size','tp_size','pp_size','attention_dp_size','moe_tp_size','moe_ep_size']
a[cols].to_csv('db_rows.csv',index=False)
print(len(a))
