import pickle,csv,collections,json
rep=pickle.load(open('report3.pkl','rb'))
out=[]; epstats=collections.Counter(); dpstats=collections.Counter(); recconf=collections.Counter()
summary=collections.defaultdict(collections.Counter)
amb=[]
for x in rep:
    r=x['r']; grp=(r['model_path'].split('/')[1],r['system'],r['backend'],r['precision'])
    summary[grp][x['status']]+=1
    if x['status']=='ambig_par':
        x['ans']={'_': sum(x['ans'].values(),[])} if False else x['ans']
        keys=list(x['ans'].keys())
        merged=tuple(k0 if all(k[i]==k0 for k in keys) else None for i,k0 in enumerate(keys[0]))
        hs=sum(x['ans'].values(),[])
        x['ans']={merged:hs}; x['_parnote']='PER_WORKER_PARALLELISM_AMBIGUOUS: entries agree on worker counts but differ in tp/ep/dp-attn: '+'; '.join(str(k[2:]) for k in keys)+' (blank fields differ)'
    elif x['status']!='matched':
        if x['status'].startswith('ambig') or x['status']=='recipe_conflict':
            amb.append((r['id'],x['status'],sorted(set((a[0],a[1]) for a in x['ans']))))
        continue
    (a,hs),=x['ans'].items()
    pw,dw,pdp,ddp,ptp,pep,dtp,dep=a
    h0=hs[0]
    rpe=int(float(r['prefill_moe_ep_size'])); rde=int(float(r['decode_moe_ep_size']))
    notes=[x['_parnote']] if x.get('_parnote') else []
    if h0['how']=='totalgpu': notes.append(f"ROW_TP_IS_TOTAL_GPUS: row prefill/decode tp={r['prefill_tp_size']} equals total GPUs {pw}x{ptp:g}+{dw}x{dtp:g}; matched on total GPU count, not per-worker tp")
    if h0['placeholder']: notes.append("yaml tp/ep/dp-attn are placeholders (tp:1, ep:1; comment says hardcoded in launch script); per-worker GPU count derived from PREFILL_NODES/DECODE_NODES x4 GPUs/node / num-worker; ep left blank")
    if pep is not None and dep is not None and h0['how']=='tp':
        ok_p = rpe==pep; ok_d = rde==dep
        epstats[('prefill_ep_match' if ok_p else 'prefill_ep_differs')]+=1
        epstats[('decode_ep_match' if ok_d else ('decode_moe_ep==yaml_prefill_ep' if rde==pep else 'decode_ep_differs'))]+=1
        if not ok_p: notes.append(f"row prefill_moe_ep={rpe} != yaml prefill ep={pep}")
        if not ok_d: notes.append(f"row decode_moe_ep={rde} != yaml decode ep={dep}"+(" (row value equals yaml prefill ep)" if rde==pep else ""))
    if (pdp or ddp) and not x.get('_parnote'):
        dpstats['dp_attn_true_in_yaml_row_attention_dp_1']+=1
        notes.append(f"dp-attn in yaml: prefill={pdp} decode={ddp}; row attention_dp_size=1")
    specs=sorted(set(h['e']['spec'] for h in hs))
    notes.append('spec-decoding of matching entr(y/ies): '+'/'.join(specs))
    recs=[h for h in hs if h['rec']]
    if recs: notes.append('worker counts cross-checked against srt-slurm recipe resources'); recconf['recipe_checked']+=1
    else: recconf['yaml_only']+=1
    for h in hs:
        for n in h['notes']:
            if n not in notes and not n.startswith('per-worker'): notes.append(n)
    trig=[c[1][:9] for c in x['tcommits']]
    src=[]
    seen=set()
    for h in hs:
        s=f"SemiAnalysisAI/InferenceX@{h['v']['commit']}:.github/configs/nvidia-master.yaml [{h['e']['key']}] isl{h['e']['isl']}/osl{h['e']['osl']} search-space[{h['e']['idx']}] spec={h['e']['spec']}"
        if h['rec']: s+=f" + recipe NVIDIA/srt-slurm@{h['rec']['commit']}:{h['rec']['path']}"
        if s not in seen: seen.add(s); src.append(s)
    notes.append('sweep trigger commit(s) near measured time: '+(','.join(trig) if trig else 'none found'))
    f=lambda v: '' if v is None else (int(v) if isinstance(v,float) and v.is_integer() else v)
    out.append(dict(id=r['id'],prefill_workers=pw,decode_workers=dw,prefill_dp_attn=pdp,decode_dp_attn=ddp,prefill_tp=f(ptp),prefill_ep=f(pep),decode_tp=f(dtp),decode_ep=f(dep),source=' | '.join(src),match_note='; '.join(notes)))
with open('/tmp/rc/ix/workers.csv','w',newline='') as fh:
    w=csv.DictWriter(fh,fieldnames=list(out[0].keys())); w.writeheader(); w.writerows(out)
json.dump(dict(summary={' '.join(k):dict(v) for k,v in summary.items()},ep=dict(epstats),dp=dict(dpstats),rec=dict(recconf),amb=amb),open('stats.json','w'),indent=1)
print(len(out)); print(epstats); print(dpstats); print(recconf)
for k in sorted(summary): print(k,dict(summary[k]))
