"""How well KernelSet.moe_ratio prices a fused MoE shape its tables lack, held out one at a time (docs/achievable.md,
"MoE shapes the tables lack"). A microbenchmark check only: every number here is AIConfigurator's own kernel timing.

For every device, engine and version AIConfigurator 0.12.0 ships MoE tables for (H100, H200, B200, GB200), each
measured (dtype, shape, tp, ep) is removed from the loaded KernelSet in turn and priced at its measured token counts
by the rest of the tables, two ways:
  ratio:  the nearest measured shape's r carried over (moe_ratio without hw: the rule before the affine law);
  affine: moe_ratio as the time model calls it (a + b x over the nearest shape's tp or ep siblings).
A shape whose base (D, d_ff, top-k, experts) has no other measured tp/ep sibling is priced from another base shape.
usage: python bench/moe_transfer.py [--out bench/results/moe-transfer-DATE.csv]"""
from __future__ import annotations

import argparse
import sys
import warnings

import numpy as np
import pandas as pd

import perfmodel as pm
from perfmodel import kernels
from perfmodel.interp import _interp
from perfmodel.kernel_set import KernelSet, _ideal_moe

SYSTEMS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200", "b200_sxm": "b200", "gb200": "gb200"}
TOKENS = (1, 4, 16, 64, 256, 1024, 4096)


def held_out(hw, ks) -> list[dict]:
    rows = []
    for dt, tab in ks.moe.items():
        for shape in list(tab):
            ax, v = tab[shape]
            n = np.array([t for t in TOKENS if t in set(ax[0])], float)
            if n.size == 0:
                continue
            meas = np.exp(_interp(ax, v, [n])) * _ideal_moe(hw, dt, n, *shape)
            del tab[shape]
            ks._near.clear()
            ks._fits.clear()
            x = _ideal_moe(hw, dt, n, *shape)
            r0, r1 = ks.moe_ratio([dt], shape, n), ks.moe_ratio([dt], shape, n, hw=hw)
            near = next(iter(ks._near.values()))[0]  # (dtype, the nearest measured shape)
            tab[shape] = (ax, v)
            if r0 is None:
                continue
            for i, t in enumerate(n):
                rows.append(dict(dtype=dt, shape=str(shape), tp=shape[4], ep=shape[5], tokens=int(t),
                                 same_base=near is not None and near[1][:4] == shape[:4],
                                 base_distance=np.nan if near is None else
                                 float(sum(abs(np.log(near[1][j] / shape[j])) for j in range(4))), measured_ms=meas[i] * 1e3,
                                 ratio=float(r0[i] * x[i] / meas[i] - 1), affine=float(r1[i] * x[i] / meas[i] - 1)))
    ks._near.clear()
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write the summary per system and engine here (CSV)")
    ap.add_argument("--points", help="write every held-out point here (CSV)")
    a = ap.parse_args(argv)
    from perfmodel.errors import SpecError
    from perfmodel.fileio import check_writable

    try:  # before the minute of work, not after it
        for opt, target in (("--out", a.out), ("--points", a.points)):
            if target:
                check_writable(target, opt)
    except SpecError as e:
        print(f"bench/moe_transfer.py: {e}", file=sys.stderr)
        return 2
    root = kernels.aic_dir()
    if root is None:
        print("bench/moe_transfer.py: the kernels extra is not installed (pip install perfmodel[kernels])",
              file=sys.stderr)
        return 2
    out = []
    for sysn, dev in SYSTEMS.items():
        hw = pm.load_hardware(dev)
        d = root / sysn / "moe"
        for eng in sorted(p.name for p in d.iterdir() if p.is_dir()) if d.exists() else []:
            for ver in sorted(p.name for p in (d / eng).iterdir() if (p / "moe_perf.parquet").exists()):
                ks = KernelSet(source=f"{sysn} {eng} {ver}", system=sysn)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    kernels._load_moe(ks, hw, pd.read_parquet(d / eng / ver / "moe_perf.parquet"), eng, sysn)
                for r in held_out(hw, ks):
                    out.append(dict(system=sysn, engine=eng, version=ver, **r))
    df = pd.DataFrame(out)
    if a.points:
        from perfmodel.fileio import write_text
        write_text(a.points, df.to_csv(index=False, float_format="%.5g"), "--points")
    print(f"{len(df):,} held-out (shape, token count) points from "
          f"{df.groupby(['system', 'engine', 'version', 'dtype', 'shape']).ngroups:,} measured shapes")

    def line(name, s):
        return dict(group=name, points=len(s), ratio_median_abs=s.ratio.abs().median(), ratio_bias=s.ratio.median(),
                    affine_median_abs=s.affine.abs().median(), affine_bias=s.affine.median(),
                    affine_within_25=(s.affine.abs() <= 0.25).mean(), ratio_within_25=(s.ratio.abs() <= 0.25).mean())

    summary = [line("all", df), line("nearest: a tp/ep sibling", df[df.same_base]),
               line("nearest: another base shape", df[~df.same_base])]
    far = pd.cut(df.base_distance, [-0.01, 0.0, 0.5, 1.0, 2.0, 99.0])
    summary += [line(f"base distance {c}", s) for c, s in df.groupby(far, observed=True)]
    summary += [line(f"tokens {t}", s) for t, s in df.groupby("tokens")]
    summary += [line(f"{e}", s) for e, s in df.groupby("engine")]
    summary += [line(f"{sy}", s) for sy, s in df.groupby("system")]
    sm = pd.DataFrame(summary)
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(sm.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if a.out:
        from perfmodel.fileio import write_text
        write_text(a.out, sm.to_csv(index=False, float_format="%.4f"), "--out")
    return 0


if __name__ == "__main__":
    sys.exit(main())
