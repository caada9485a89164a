# checkruns.py: list runs whose capture is garbled or lacks the benchmark command without a known reason (to rerun)
import os
OK={'srun','docker','IXEXEC','IXRC','nvidia-smi','python3','hf','salloc','git','squeue','scancel','vllm','mpirun','pip','tail','sleep','unsquashfs','enroot','pip3','trtllm-serve','huggingface-cli','curl','python','IXWARN'}
bad=[]
for d in os.listdir('runs'):
    p=f'runs/{d}/cap.log'
    if not os.path.isfile(p): continue
    L=open(p).read().split('\n')
    garbled=any(l and l.split()[0] not in OK for l in L if l.strip()) or any(l.startswith(' ') for l in L)
    err=open(f'runs/{d}/stderr.log').read(); out=open(f'runs/{d}/stdout.log').read()
    nobench=not any('benchmark_serving' in l for l in L) and 'No such file' not in err and 'not set' not in out
    if garbled or nobench: bad.append(d)
print(len(bad)); open('rerun.txt','w').write('\n'.join(bad))
