import json,subprocess,collections,yaml
V=json.load(open('versions.json'))
cf=set()
for v in V:
  if v['cdate']>'2026-04-20': continue
  for e in v['entries']:
    for s in ('prefill','decode'):
      for a in e['ss'][s].get('additional-settings') or []:
        if a.startswith('CONFIG_FILE='): cf.add(a[12:])
R='/work/.mirror/NVIDIA+srt-slurm/repo'
def g(*a): return subprocess.run(['git','-C',R]+list(a),capture_output=True,text=True)
out={}
for f in sorted(cf):
    alts={f, f.replace('recipies/','recipes/',1), f.replace('recipes/','recipies/',1)}
    vers=[]
    for p in alts:
        r=g('log','--all','--format=%H %cI','--',p)
        if r.returncode: print('ERR',p,r.stderr[:200])
        for l in r.stdout.split('\n'):
            if not l: continue
            h,d=l.split()
            b=g('show',f'{h}:{p}')
            if b.returncode: continue
            try: y=yaml.safe_load(b.stdout)
            except Exception as ex: y={'_err':str(ex)}
            vers.append(dict(commit=h,date=d,path=p,y=y))
    out[f]=vers
json.dump(out,open('recipes.json','w'),default=str)
print(len(out), sum(1 for f in out if not out[f]))
