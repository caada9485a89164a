# topology.py: db_topology.csv - the InferenceX (tp, ep, dp-attn, spec-decoding) each db-dump agg row ran, as matched (the sample's
# tp_size/attention_dp_size/moe_ep_size are products: see README)
import pickle, csv
P=pickle.load(open('plan_jobs.pkl','rb'))
out={x['r']['id']:x for x in pickle.load(open('match.pkl','rb'))}
with open('db_topology.csv','w',newline='') as f:
    w=csv.writer(f); w.writerow(['id','sample_tp_size','sample_moe_tp_size','sample_moe_ep_size','sample_attention_dp_size','tp','ep','dp_attn','spec_decoding','decode_rule'])
    for p in P:
        prim=[r for r in p['runs'] if 'alternative' not in r['src']]
        t=sorted(set((r['tp'],r['ep'],r['dpa']) for r in prim)); r=p['r']
        rules=sorted(set(c[3] for c in out[p['id']]['topo_cands'] if (c[0],c[1],c[2]) in t))
        J=lambda s:'|'.join(str(x).lower() for x in sorted(set(s)))
        w.writerow([p['id'],r['tp_size'],r['moe_tp_size'],r['moe_ep_size'],r['attention_dp_size'],J(a for a,b,c in t),J(b for a,b,c in t),J(c for a,b,c in t),J(x['spec'] for x in prim),' / '.join(rules)])
