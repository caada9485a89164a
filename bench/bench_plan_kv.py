"""The fourteenth session's costs, timed beside the tree of c4c0f69 in one run (docs/speed.md): the kernel-table
build (now with the Gated DeltaNet tables) and the serving-validation plan (now reading agg_kv.csv and each row's
measured engine version).
usage: git show c4c0f69:perfmodel/kernels.py > perfmodel/_kernels_old.py; git show c4c0f69:perfmodel/kernel_set.py
> perfmodel/_kernel_set_old.py; sed -i 's/from .kernel_set import/from ._kernel_set_old import/'
perfmodel/_kernels_old.py; git show c4c0f69:perfmodel/serving/silicon_plan.py > perfmodel/serving/_plan_old.py;
python bench/bench_plan_kv.py; then remove the three copies."""
import time

import perfmodel as pm
from perfmodel import _kernels_old as old, kernels as new
from perfmodel.serving import _plan_old as pold, silicon_plan as pnew


def best(f, n=5):
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return min(ts)


for dev, eng, ver, sysn in (("b200", "sglang", "0.5.14", "b200_sxm"), ("h100-sxm", "vllm", "0.24.0", "h100_sxm")):
    hw = pm.load_hardware(dev)
    a = best(lambda: old._load_aic(hw, sysn, eng, ver), 3)
    b = best(lambda: new._load_aic(hw, sysn, eng, ver), 3)
    print(f"_load_aic {dev} {eng}: before {a*1e3:.0f} ms, now {b*1e3:.0f} ms")
df = pnew.load()
pnew.plan(df), pold.plan(df)  # every table read once
a, b = [], []
for _ in range(6):  # alternating, so that a slow stretch of the machine hits both
    a.append(best(lambda: pold.plan(df), 1))
    b.append(best(lambda: pnew.plan(df), 1))
print(f"silicon_plan.plan(5,221 rows): before min {min(a)*1e3:.0f} ms, now min {min(b)*1e3:.0f} ms")
pnew._AGG_KV.clear()
c = best(lambda: (pnew._AGG_KV.clear(), pnew.agg_kv()))
print(f"agg_kv() first read: {c*1e3:.1f} ms")
