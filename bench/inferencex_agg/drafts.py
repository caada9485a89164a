# draft-token count of an InferenceX single-node MTP benchmark script at a commit
import subprocess, re, functools
R='/work/.mirror/SemiAnalysisAI+InferenceX/repo'
def g(*a): return subprocess.run(['git','-C',R]+list(a),capture_output=True,text=True).stdout
@functools.lru_cache(None)
def script_path(commit,prefix,precision,hw,framework,spec):
    base=f"{prefix}_{precision}_{hw}{'_trt' if framework=='trt' else ''}{'_mtp' if spec=='mtp' else ''}"
    files=g('ls-tree','-r','--name-only',commit,'benchmarks/').split('\n')
    c=[f for f in files if re.fullmatch(r'benchmarks/(single_node/)?'+re.escape(base)+r'(_slurm)?\.sh',f)]
    assert len(c)==1,(commit,base,c)
    return c[0]
@functools.lru_cache(None)
def drafts(commit,prefix,precision,hw,framework,spec,dpa):
    """returns (drafts, cite, setting)"""
    p=script_path(commit,prefix,precision,hw,framework,spec)
    L=g('show',f'{commit}:{p}').split('\n')
    if framework=='trt':
        # walk if/else blocks; record each MTP=N with the DP_ATTENTION condition stack
        stack=[]; assigns=[]
        for i,l in enumerate(L,1):
            s=l.strip()
            if s.startswith('#'): continue
            m=re.match(r'if \[\[ "\$DP_ATTENTION" == "true" \]\]; then',s)
            if m: stack.append(['dpa',True]); continue
            if re.match(r'if ',s): stack.append(['other',True]); continue
            if s.startswith('elif'): stack[-1]=['other',True]; continue
            if s=='else': stack[-1][1]=not stack[-1][1]; continue
            if s=='fi': stack.pop(); continue
            m=re.fullmatch(r'MTP=(\d+)',s)
            if m:
                assert all(k=='dpa' for k,_ in stack),(p,i,stack)
                assigns.append((i,int(m.group(1)),[v for k,v in stack]))
        # last assignment that applies to this dpa value wins (sequential execution)
        val=None; ln=None
        for i,n,conds in assigns:
            if all(c==dpa for c in conds): val,ln=n,i
        nl=[i for i,l in enumerate(L,1) if 'num_nextn_predict_layers: ${MTP}' in l]
        dl=[i for i,l in enumerate(L,1) if 'decoding_type: MTP' in l]
        assert val is not None and nl and dl
        return val, f"{p}@{commit[:9]}#L{ln} (MTP={val} for DP_ATTENTION={'true' if dpa else 'false'}; speculative_config decoding_type: MTP L{dl[0]}, num_nextn_predict_layers: ${{MTP}} L{nl[0]})", f'num_nextn_predict_layers={val}'
    else:
        v={}
        for i,l in enumerate(L,1):
            m=re.fullmatch(r'\s*(SPECULATIVE_NUM_STEPS|SPECULATIVE_DRAFT_TOKENS|SPECULATIVE_EAGLE_TOPK)=(\d+)\s*',l)
            if m: assert m.group(1) not in v,(p,m.group(1)); v[m.group(1)]=(i,int(m.group(2)))
        fl=[i for i,l in enumerate(L,1) if '--speculative-num-steps $SPECULATIVE_NUM_STEPS' in l]
        al=[l for l in L if '--speculative-algorithm' in l]
        assert len(v)==3 and fl and al
        st=v['SPECULATIVE_NUM_STEPS'][1]; nd=v['SPECULATIVE_DRAFT_TOKENS'][1]; tk=v['SPECULATIVE_EAGLE_TOPK'][1]
        assert tk==1 and nd==st+1
        alg=re.search(r'--speculative-algorithm (\S+)',al[0]).group(1)
        a=min(x[0] for x in v.values()); b=max(x[0] for x in v.values())
        return st, f"{p}@{commit[:9]}#L{a}-L{b} (SPECULATIVE_NUM_STEPS={st}, SPECULATIVE_DRAFT_TOKENS={nd}, SPECULATIVE_EAGLE_TOPK={tk}; flags L{fl[0]}, --speculative-algorithm {alg})", f'--speculative-algorithm {alg} --speculative-num-steps {st} --speculative-num-draft-tokens {nd} --speculative-eagle-topk {tk}'
if __name__=='__main__':
    for a in [('bf3456727','dsr1','fp8','h200','trt','mtp',False),('bf3456727','dsr1','fp8','h200','trt','mtp',True),('5d517074c','dsr1','fp8','b200','trt','mtp',True),('0aae52d4c','dsr1','fp4','b200','trt','mtp',False),('12ba0ae07','dsr1','fp8','b200','sglang','mtp',False),('35d4bb367','qwen3.5','fp8','b200','sglang','mtp',False)]:
        print(a, drafts(*a))
