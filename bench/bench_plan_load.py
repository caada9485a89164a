"""Kernel-table build and serving-validation plan, timed beside an earlier tree in one run (docs/speed.md).
usage: git show BASE:perfmodel/kernels.py > perfmodel/_kernels_old.py; git show BASE:perfmodel/serving/silicon_plan.py
> perfmodel/serving/_plan_old.py; python bench/bench_plan_load.py; then remove the two copies (BASE: d906309 in the
ninth session, b4c06a4 in the sixteenth)."""
import time, importlib
import perfmodel as pm
from perfmodel import kernels as new, _kernels_old as old
from perfmodel.serving import silicon_plan as pnew, _plan_old as pold
def best(f, n=5):
    ts = []
    for _ in range(n):
        t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
    return min(ts)
for dev, eng, ver, sysn in (("h100-sxm", "vllm", "0.24.0", "h100_sxm"), ("b200", "trtllm", "1.3.0rc20", "b200_sxm"),
                            ("h200", "vllm", "0.19.0", "h200_sxm")):
    hw = pm.load_hardware(dev)
    a = best(lambda: old._load_aic(hw, sysn, eng, ver), 3); b = best(lambda: new._load_aic(hw, sysn, eng, ver), 3)
    print(f"_load_aic {dev} {eng}: before {a*1e3:.0f} ms, now {b*1e3:.0f} ms")
df = pnew.load()
pnew.agg_speculative(); pnew.recipe_workers(); pold.recipe_workers()
a = best(lambda: pold.plan(df)); b = best(lambda: pnew.plan(df))
print(f"silicon_plan.plan(5,221 rows): before {a*1e3:.0f} ms, now {b*1e3:.0f} ms")
pnew._AGG_SPECULATIVE.clear()
c = best(lambda: (pnew._AGG_SPECULATIVE.clear(), pnew.agg_speculative()))
print(f"agg_speculative() first read: {c*1e3:.1f} ms")
