# how the outcome depends on the changelog and image rules (rows with an MTP variant)
import pickle, collections
base=pickle.load(open('match.pkl','rb'))
for f in ['m_nocl.pkl','m_noimg.pkl','m_none.pkl']:
    o=pickle.load(open(f,'rb')); C=collections.Counter()
    for a,b in zip(base,o):
        r=a['r']
        if r['model'] not in ('DeepSeek-R1','Qwen3.5-397B'): continue
        sa='|'.join(a['specs']) or '-'; sb='|'.join(b['specs']) or '-'
        if sa!=sb: C[(r['system'],r['backend'],r['precision'],r['measured'][:19],sa,'->',sb)]+=1
    print('==',f)
    for k,v in sorted(C.items()): print(v,k)
