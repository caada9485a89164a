"""Does the fixed part a of a MoE kernel (t = a + b x over a shape's tp siblings, ep 1) carry to another shape better
scaled by top-k, hidden size, experts or their products? Each measured (shape, tp) of AIConfigurator's H100, H200,
B200 and GB200 MoE tables is priced from the nearest other shape's tp siblings (docs/validation.md, seventeenth run).
A kernel-table check only. usage: python bench/moe_fixed_part.py"""
import sys, glob, math, numpy as np, pandas as pd
import perfmodel as pm
from perfmodel.kernel_set import _ideal_moe, _BYTES, _PEAK, MOE_DISTRIBUTION
from perfmodel import kernels
D = str(kernels.aic_dir())
HWN = {"h100_sxm": "h100-sxm", "h200_sxm": "h200", "b200_sxm": "b200", "gb200": "gb200"}
rows = []
for sysn, hwn in HWN.items():
    hw = pm.load_hardware(hwn)
    for f in glob.glob(f"{D}/{sysn}/moe/*/*/moe_perf.parquet"):
        eng = f.split("/")[-3]
        df = pd.read_parquet(f); df = df[df["distribution"] == MOE_DISTRIBUTION]
        for dt, g in df.groupby("moe_dtype"):
            if dt not in _BYTES or _PEAK[dt] not in hw.peak_flops:
                continue
            fam = {}
            for (h, I, k, E, tp, ep), s in g.groupby(["hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size"]):
                fam.setdefault((h, I, k, E), {})[(tp, ep)] = s.groupby("num_tokens")["latency"].min() * 1e-3
            if len(fam) < 2:
                continue
            for base, sib in fam.items():
                others = [b for b in fam if b != base]
                for (tp, ep), s in sib.items():
                    if ep != 1: continue
                    ob = min(others, key=lambda b: sum(abs(math.log(b[i] / base[i])) for i in range(4)))
                    osib = {se: v for se, v in fam[ob].items() if se[1] == 1}
                    if len(osib) < 2: continue
                    for n in (1, 8, 64, 512):
                        if n not in s.index: continue
                        pts = [(float(_ideal_moe(hw, dt, n, *ob, *se)), v[n]) for se, v in osib.items() if n in v.index]
                        if len(pts) < 2: continue
                        x = np.array([p[0] for p in pts]); y = np.array([p[1] for p in pts]); w = 1/y**2
                        W = w.sum(); xm = (w*x).sum()/W; ym = (w*y).sum()/W; vx = (w*(x-xm)**2).sum()
                        b = (w*(x-xm)*(y-ym)).sum()/vx; a = ym - b*xm
                        if not (a >= 0 and b > 0): continue
                        iq = float(_ideal_moe(hw, dt, n, *base, tp, ep))
                        d = dict(eng=eng, dt=dt, n=n, tp=tp, dist=sum(abs(math.log(ob[i]/base[i])) for i in range(4)))
                        for name, sc in [("a", 1.0), ("a*k", base[2]/ob[2]), ("a*sqrt(k)", (base[2]/ob[2])**0.5),
                                         ("a*h", base[0]/ob[0]), ("a*E^.5", (base[3]/ob[3])**0.5),
                                         ("a*kI/tp", (base[2]*base[1])/(ob[2]*ob[1])), ("a*(k*h)^.5", (base[2]*base[0]/(ob[2]*ob[0]))**0.5)]:
                            d[name] = (a*sc + b*iq)/s[n] - 1
                        rows.append(d)
r = pd.DataFrame(rows)
cols = [c for c in r.columns if c.startswith("a")]
print(len(r))
for nm, s in [("all", r), ("dist>1", r[r.dist > 1]), ("dist>2", r[r.dist > 2]), ("k differs", r[r.dist>0])]:
    print(nm, len(s), "  ".join(f"{c} {s[c].abs().median():.3f}" for c in cols))
for e, s in r.groupby("dt"):
    print(e, len(s), "  ".join(f"{c} {s[c].abs().median():.3f}" for c in cols))
