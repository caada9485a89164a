"""Derive achievable-mode GEMM terms from NVIDIA AIConfigurator's kernel measurements (Apache-2.0).

    python bench/derive_aic_params.py /path/to/aiconfigurator_core-0.12.0-...whl
    python bench/derive_aic_params.py /path/to/unpacked/dir      # a folder holding aiconfigurator_core/systems/data

For every AIConfigurator system that maps to a catalog device it prints, with the rows used:

- gemm_latency: the bf16 torch.nn.functional.linear latency at m=1, n=k=4096 (a weight-streaming GEMV) less the
  time to stream its n*k*2 bytes at hbm_efficiency x memory_bandwidth (both read from hardware/<device>.yaml);
  n=k=8192 is printed as a cross-check.
- gemm_efficiency.{bf16,fp8,fp4}: the best large GEMM in the table (max over rows with m, n, k >= 4096 of
  2mnk / latency) divided by the dense peak of that format in hardware/<device>.yaml.

The latency column of gemm_perf.parquet is in milliseconds. Nothing here writes a YAML file: the values are
copied into hardware/*.yaml by hand with a source that cites this script. Exit 2 (one line) when the data is absent.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
AIC_VERSION = "0.12.0"
# AIConfigurator system -> catalog device (hardware/<name>.yaml), and the engine/version whose GEMM table is read
SYSTEMS = {
    "h100_sxm": ("h100-sxm", "vllm/0.24.0"),
    "h200_sxm": ("h200", "vllm/0.24.0"),
    "b200_sxm": ("b200", "vllm/0.24.0"),
    "b300_sxm": ("b300", "vllm/0.24.0"),
    "gb200": ("gb200", "vllm/0.24.0"),
    "gb300": ("gb300", "vllm/0.24.0"),
    "a100_sxm": ("a100-80gb-sxm", "vllm/0.14.0"),
    "l40s": ("l40s", "vllm/0.24.0"),
    "h100_pcie": ("h100-pcie", None),  # AIConfigurator 0.12.0 ships no GEMM table for these two
    "l4": ("l4", None),
}
DTYPES = {"bfloat16": "bf16", "fp8": "fp8", "nvfp4": "fp4"}  # AIC gemm_dtype -> our peak_flops / gemm_efficiency key
BF16_KERNEL = "torch.nn.functional.linear"
SKINNY_NK = 4096
CHECK_NK = 8192
LARGE = 4096


def data_dir(path: Path) -> Path | None:
    """The systems/data folder: inside an unpacked tree, or extracted (once, to a temp folder) from the wheel."""
    rel = Path("aiconfigurator_core/systems/data")
    if path.is_dir():
        for cand in (path / rel, path / "systems/data", path):
            if (cand / "b200_sxm").is_dir():
                return cand
        return None
    if path.is_file() and zipfile.is_zipfile(path):
        out = Path(tempfile.gettempdir()) / f"aic-{path.stem}"
        if not (out / rel / "b200_sxm").is_dir():
            with zipfile.ZipFile(path) as z:
                members = [n for n in z.namelist() if n.startswith(str(rel)) and "/gemm/" in n]
                z.extractall(out, members)
        return out / rel if (out / rel / "b200_sxm").is_dir() else None
    return None


def load_hw(name: str):
    sys.path.insert(0, str(ROOT))
    import perfmodel as pm

    return pm.load_hardware(name)


def gemm_table(data: Path, system: str, engine: str):
    import pandas as pd

    p = data / system / "gemm" / engine / "gemm_perf.parquet"
    return (pd.read_parquet(p), p.relative_to(data.parent.parent)) if p.is_file() else (None, p)


def derive_gemm_latency(df, hw, nk: int = SKINNY_NK) -> dict:
    """gemm_latency from the bf16 m=1 n=k row: measured - n*k*2 / (hbm_efficiency x memory_bandwidth), in seconds."""
    rows = df[(df.gemm_dtype == "bfloat16") & (df.kernel_source.isin([BF16_KERNEL, "vllm_default"]))
              & (df.m == 1) & (df.n == nk) & (df.k == nk)]
    if rows.empty:
        return {}
    lat_ms = float(rows.latency.min())
    eff = getattr(hw.achievable, "hbm_efficiency", 1.0) if hw.achievable else 1.0
    bw = hw.memory_bandwidth
    nbytes = nk * nk * 2
    stream = nbytes / (eff * bw)
    return {"nk": nk, "latency_ms": lat_ms, "bytes": nbytes, "hbm_efficiency": eff, "bandwidth": bw,
            "stream_s": stream, "gemm_latency_s": lat_ms * 1e-3 - stream, "rows": rows}


def derive_gemm_efficiency(df, hw) -> dict:
    out = {}
    for aic, ours in DTYPES.items():
        rows = df[(df.gemm_dtype == aic) & (df.m >= LARGE) & (df.n >= LARGE) & (df.k >= LARGE)]
        if rows.empty or ours not in hw.peak_flops:
            continue
        rate = 2.0 * rows.m * rows.n * rows.k / (rows.latency * 1e-3)
        best = rows.loc[rate.idxmax()]
        r = float(rate.max())
        out[ours] = {"row": best, "rate": r, "peak": hw.peak_flops[ours], "efficiency": r / hw.peak_flops[ours]}
    return out


def derive(data: Path) -> dict:
    """{device: {"table": path, "gemm_latency": {...}, "check": {...}, "gemm_efficiency": {...}}} for every system with data."""
    res = {}
    for system, (device, engine) in SYSTEMS.items():
        if engine is None:
            res[device] = {"system": system, "absent": f"AIConfigurator {AIC_VERSION} has no GEMM table for {system}"}
            continue
        df, path = gemm_table(data, system, engine)
        if df is None:
            res[device] = {"system": system, "absent": f"no {path}"}
            continue
        hw = load_hw(device)
        res[device] = {"system": system, "table": str(path), "device_name": str(df.device.iloc[0]),
                       "gemm_latency": derive_gemm_latency(df, hw), "check": derive_gemm_latency(df, hw, CHECK_NK),
                       "gemm_efficiency": derive_gemm_efficiency(df, hw)}
    return res


def report(res: dict) -> None:
    for device, r in res.items():
        print(f"== {device} (AIConfigurator system {r['system']})")
        if "absent" in r:
            print(f"   absent: {r['absent']}; nothing derived")
            continue
        print(f"   table: {r['table']} ({r['device_name']})")
        for key in ("gemm_latency", "check"):
            g = r[key]
            if not g:
                print(f"   {key}: no bf16 m=1 row")
                continue
            row = g["rows"].iloc[0]
            print(f"   {'gemm_latency' if key == 'gemm_latency' else 'cross-check '}: bf16 m=1 n=k={g['nk']} "
                  f"({row.kernel_source}): {g['latency_ms']:.6f} ms; less {g['bytes'] / 1e6:.1f} MB / "
                  f"({g['hbm_efficiency']} x {g['bandwidth'] / 1e12:g} TB/s) = {g['stream_s'] * 1e6:.2f} us "
                  f"-> {g['gemm_latency_s'] * 1e6:.2f} us")
        for dt, e in r["gemm_efficiency"].items():
            row = e["row"]
            print(f"   gemm_efficiency.{dt}: {row.gemm_dtype} {row.kernel_source} m={row.m} n={row.n} k={row.k}: "
                  f"{row.latency:.6f} ms -> {e['rate'] / 1e12:.1f} TFLOP/s / {e['peak'] / 1e12:g} = {e['efficiency']:.3f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("wheel", help="aiconfigurator_core wheel (.whl) or a folder holding aiconfigurator_core/systems/data")
    a = ap.parse_args(argv)
    p = Path(a.wheel)
    data = data_dir(p) if p.exists() else None
    if data is None:
        print(f"derive_aic_params: no AIConfigurator data at {p} (want the aiconfigurator_core {AIC_VERSION} wheel or "
              f"a folder holding aiconfigurator_core/systems/data/<system>/gemm/...); nothing derived", file=sys.stderr)
        return 2
    report(derive(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
