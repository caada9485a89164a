# dump the InferenceX agg rows of the silicon sample with the source string split
import sys; sys.path.insert(0,'/work/main')
from perfmodel.serving import silicon
d=silicon.load()
x=d[d.silicon_data_source.astype(str).str.contains('source_file=2026')]
a=x[x['mode']=='agg'].copy()
s=a.silicon_data_source.str.extract(r'source_file=([^;]+); model=([^;]+); silicon_concurrency=(\d+); measured=([^;]+); wip=([^;]+)(?:; image=(.*))?')
a[['source_file','model','concurrency','measured','wip','image']]=s.values
a['image']=a.image.fillna('')
cols=['id','source_file','model','concurrency','measured','wip','image','backend','backend_version','model_path','system','precision','isl','osl','batch_size','tp_size','pp_size','attention_dp_size','moe_tp_size','moe_ep_size']
a[cols].to_csv('agg_rows.csv',index=False)
print(len(a))
