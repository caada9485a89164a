# sanity.py ID...: print the captured server + benchmark command lines and generated config for each run of a row, next to its CSV values
import pickle, csv, sys
from parse import parse_job
P={p['id']:p for p in pickle.load(open('plan_jobs.pkl','rb'))}
C={r['id']:r for r in csv.DictReader(open('agg_config_dbdump_full.csv'))}
for i in sys.argv[1:]:
    p=P[i]; print('#'*100); print(i, p['r']['measured'], 'workflow_run', p['r']['workflow_run_id'], 'image', p['r']['image'])
    print('CSV:',{k:v for k,v in C[i].items() if v and k not in ('id',)})
    for run in p['runs'][:2]:
        if not run.get('job'): continue
        r=parse_job(run['job'])
        print(f"--- run {run['launcher']}@{run['commit'][:9]} spec={run['spec']} tp{run['tp']} ep{run['ep']} dpa={run['dpa']} script={r.get('script')} ({run['src']})")
        for l in r['lines']:
            if any(x in l for x in ('trtllm-serve','vllm serve','sglang.launch_server','benchmark_serving')): print('   ',l[:900])
        if r.get('cfgtxt'): print('    config',r['cfgfile'].split('/')[-1],':\n      '+r['cfgtxt'].replace('\n','\n      '))
