"""The measurement suite: which cases at which sizes, how each is run and timed, and the files written.

Care taken in every case:
- warm-up calls before timing, several repeats, the median reported (min, max and every sample kept);
- a synchronize (or CUDA events) around the timed region on a GPU;
- bandwidth buffers several times the last-level cache; operands that a case re-reads (the sweep's
  W, attention's KV cache) rotate through copies whose total is >= 2x the cache, so each call reads
  cold memory, as a step of a model too large for the cache does;
- random data, never zeros (no zero-skipping, no denormals);
- the 1-minute load average before and after and the process's CPU utilisation are recorded, so
  contention from other processes is visible in the results.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import os
import time
from pathlib import Path

import numpy as np

from . import cases as C
from .llama import DecodeStep, attention
from .timing import time_fn

MiB = 1 << 20
# A Llama-shaped model at real width (Llama 3 8B's D, N, K, H, F) with a 32000 vocabulary, fewer layers
LLAMA_WIDE = {"D": 4096, "N": 32, "K": 8, "H": 128, "F": 14336, "V": 32000}
TINY_MODEL = {"D": 64, "N": 4, "K": 2, "H": 16, "F": 128, "V": 256, "L": 1}


def pow2(lo: int, hi: int) -> list[int]:
    return [1 << i for i in range(int(math.log2(lo)), int(math.log2(hi)) + 1)]


def plan(device: str, preset: str, cache: int | None = None, memory: int | None = None) -> dict:
    """Sizes of every case for a device (cpu, cuda) and preset (quick, full, tiny: the tests' sizes).

    cache: last-level cache bytes (64 MiB if unknown); memory: device memory bytes (8 GiB if unknown).
    The bandwidth buffer is >= 4x the cache and the rotation pool 3x (both within an eighth of memory).
    """
    p = _sizes(device, preset)
    if preset != "tiny":
        cache, memory = cache or 64 * MiB, memory or 8192 * MiB
        p["bw_bytes"] = int(min(max(p["bw_bytes"], 4 * cache), memory // 8))
        p["pool_bytes"] = int(min(3 * cache, memory // 8))
    return p


def _sizes(device: str, preset: str) -> dict:
    if preset == "tiny":
        return {"bw_bytes": 4 * MiB, "pool_bytes": 2 * MiB, "gemm": {"*": [64]}, "repeats": 2, "bw_repeats": 3, "warmup": 1,
                "min_sample_s": 1e-4, "sweep": {"D": 64, "F": 96, "B": [1, 2, 4]}, "skinny": {"M": 3, "D": 48, "F": 80},
                "attention": {"N": 4, "K": 2, "H": 16, "B": [1, 2], "S": [8, 32]},
                "decode": {"model": {**TINY_MODEL, "L": 2}, "B": [1, 2], "S": [4, 16]},
                "dispatch": {"model": TINY_MODEL, "B": 1, "S": 8}}
    if preset not in ("quick", "full"):
        raise ValueError(f"preset must be quick, full or tiny, got {preset!r}")
    quick = preset == "quick"
    # skinny: a few rows at a width no validation case has; on the CPU its weights (88 MB fp32) rotate
    # through the pool like the sweep's, on a GPU they (268 MB bf16) are already several times the L2
    base = {"dispatch": {"model": TINY_MODEL, "B": 1, "S": 16}, "min_sample_s": 2e-3,
            "attention": {"N": 32, "K": 8, "H": 128},
            "skinny": {"M": 8, "D": 3072, "F": 7168} if device == "cpu" else {"M": 8, "D": 8192, "F": 16384}}
    if device == "cpu":
        return {**base, "bw_bytes": 512 * MiB, "gemm": {"fp32": [3072] if quick else [2048, 4096],
                                                        "fp64": [2048] if quick else [2048, 4096]},
                "repeats": 5 if quick else 9, "bw_repeats": 15 if quick else 25, "warmup": 1 if quick else 2,
                "sweep": {"D": 5120, "F": 13824, "B": pow2(1, 256 if quick else 1024)},
                "attention": {**base["attention"], "B": [1, 4, 16] if quick else pow2(1, 32),
                              "S": [1024, 4096] if quick else [512, 2048, 8192]},
                "decode": {"model": {**LLAMA_WIDE, "L": 2 if quick else 4}, "B": [1, 4, 16] if quick else pow2(1, 64),
                           "S": [512, 2048] if quick else [256, 1024, 4096]}}
    return {**base, "bw_bytes": 2048 * MiB, "gemm": {"*": [8192] if quick else [4096, 8192, 16384]},
            "repeats": 20 if quick else 50, "bw_repeats": 50 if quick else 100, "warmup": 5 if quick else 10,
            "sweep": {"D": 5120, "F": 13824, "B": pow2(1, 2048 if quick else 8192)},
            "attention": {**base["attention"], "B": [1, 16, 128] if quick else pow2(1, 256),
                          "S": [1024, 8192] if quick else [1024, 4096, 16384]},
            "decode": {"model": {**LLAMA_WIDE, "L": 8 if quick else 16}, "B": [1, 16, 128] if quick else pow2(1, 256),
                       "S": [1024, 4096] if quick else [512, 2048, 8192]}}


class Pool:
    """One random buffer per dtype, carved into operand copies so that calls can rotate through
    `footprint` bytes of cold memory without allocating (and randomising) them for every case."""

    def __init__(self, xp, footprint: int):
        self.xp, self.footprint, self.bufs = xp, int(footprint), {}

    def sets(self, shapes: list, dtype: str) -> list[list]:
        """As many copies of a set of operands (one array per shape) as fit in the pool, >= 1."""
        size = [math.prod(s) for s in shapes]
        item = C.ITEMSIZE[dtype]
        n = self.footprint // item
        if sum(size) > n // 2:  # too big to rotate here: one fresh copy, itself >= the cache footprint / 2
            return [[self.xp.rand(s, dtype) for s in shapes]]
        if dtype not in self.bufs:
            self.bufs[dtype] = self.xp.rand((n,), dtype)
        buf, out, off = self.bufs[dtype], [], 0
        while off + sum(size) <= n:
            one = []
            for s, k in zip(shapes, size):
                one.append(buf[off:off + k].reshape(s))
                off += k
            out.append(one)
        return out


def build_cases(p: dict, backend, memory: int | None = None) -> list[C.Case]:
    """Every case of a plan, calibration first, in run order; without those that would not fit in
    half the device memory (the rest holds the rotation pool and the other buffers)."""
    xp_dtypes = backend.gemm_dtypes()
    bw_dtype = "fp32"
    n_bw = int(p["bw_bytes"]) // C.ITEMSIZE[bw_dtype]
    out = [C.reduce_case(n_bw, bw_dtype), C.copy_case(n_bw, bw_dtype)]
    for dt in xp_dtypes:
        for n in p["gemm"].get(dt, p["gemm"].get("*", [])):
            out.append(C.gemm_case(n, n, n, dt))
    act = backend.act_dtype
    d = p["dispatch"]
    out += C.dispatch_cases(d["model"], d["B"], d["S"], act)
    k = p["skinny"]
    out.append(C.skinny_case(k["M"], k["D"], k["F"], act))
    s = p["sweep"]
    out += [C.sweep_case(B, s["D"], s["F"], act) for B in s["B"]]
    a = p["attention"]
    out += [C.attention_case(B, S, a["N"], a["K"], a["H"], act) for B in a["B"] for S in a["S"]]
    dm = p["decode"]
    out += [C.decode_case(dm["model"], B, S, act) for B in dm["B"] for S in dm["S"]]
    return [c for c in out if not memory or C.footprint(c) <= memory / 2]


class Runner:
    """Builds each case's callable on a backend (allocations outside the timed region) and times it."""

    def __init__(self, backend, p: dict, pool_bytes: int):
        self.b, self.xp, self.p = backend, backend.xp, p
        self.pool = Pool(self.xp, pool_bytes)
        self._params: dict = {}  # decode weights, shared by every (B, S) of one model

    def callable(self, c: C.Case):
        xp, q = self.xp, c.params
        if c.family == "copy":
            src = xp.rand((q["n"],), c.dtype)
            dst = xp.empty_like(src)
            return lambda i: xp.copy(dst, src)
        if c.family == "reduce":
            src = xp.rand((q["n"],), c.dtype)
            return lambda i: xp.reduce(src)
        if c.family == "gemm":
            sets = [xp.operands(a, b, c.dtype) for a, b in self.pool.sets([(q["M"], q["K"]), (q["K"], q["N"])], c.dtype)]
            return lambda i: xp.matmul(*sets[i % len(sets)], c.dtype)
        if c.family in ("sweep", "skinny"):
            rows = q["B"] if c.family == "sweep" else q["M"]
            sets = self.pool.sets([(rows, q["D"]), (q["D"], q["F"])], c.dtype)
            return lambda i: xp.matmul(*sets[i % len(sets)], c.dtype)
        if c.family == "attention":
            B, S, N, K, H = (q[k] for k in "BSNKH")
            sets = self.pool.sets([(B, N, H), (B, K, S, H), (B, K, S, H)], c.dtype)
            return lambda i: attention(xp, *sets[i % len(sets)])
        if c.family in ("decode", "dispatch"):
            key = json.dumps(q["model"], sort_keys=True)
            step = DecodeStep(xp, q["model"], q["B"], q["S"], c.dtype, self._params.get(key))
            self._params = {key: step.params}  # keep one model's weights alive at a time
            if c.family == "dispatch":
                f = step.op(q["op_name"])
                return lambda i: f()
            return step
        raise ValueError(f"unknown case family {c.family!r}")

    def run(self, c: C.Case, progress=None) -> dict:
        fn = self.callable(c)
        min_s = self.p["min_sample_s"] if c.family == "dispatch" else 0.0
        # the bandwidth cases are short and the ceiling; the skinny case calibrates a term alone
        n = self.p["bw_repeats"] if c.family in ("copy", "reduce", "skinny") else self.p["repeats"]
        t = time_fn(fn, n, self.p["warmup"], self.b.timer(), min_sample_s=min_s)
        rec = {**c.record(), **t.record()}
        if c.family == "decode" and getattr(self.b, "synchronous", False):
            rec["op_profile_s"] = profile(fn, self.p["repeats"])
        del fn
        rec["achieved_bytes_per_s"] = c.bytes / t.median if c.bytes else None
        rec["achieved_flops_per_s"] = c.flops / t.median if c.flops else None
        if progress:
            progress(rec)
        return rec


def profile(step: DecodeStep, repeats: int, clock=time.perf_counter) -> dict:
    """Seconds per step spent in each op name (all layers), the median over `repeats` steps, timed
    op by op after the step's own timing. Only for backends whose calls return when the work is
    done (a GPU would need a synchronize per op, which changes what is measured)."""
    per = {n: [] for n, _ in step.ops}
    for _ in range(repeats):
        acc = dict.fromkeys(per, 0.0)
        for n, f in step.ops:
            t0 = clock()
            f()
            acc[n] += clock() - t0
        for n, v in acc.items():
            per[n].append(v)
    return {n: float(np.median(v)) for n, v in per.items()}


def _load() -> list | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _psi() -> str | None:
    """Linux pressure stall information for the CPU: the share of time runnable tasks waited."""
    try:
        return Path("/proc/pressure/cpu").read_text().splitlines()[0]
    except (OSError, IndexError):
        return None


def run_suite(backend, preset: str = "quick", progress=None) -> dict:
    """Run every case of the preset on the backend; returns {"meta": ..., "cases": [...]}."""
    p = plan(backend.name, preset, backend.cache_bytes(), backend.memory_bytes())
    runner = Runner(backend, p, p["pool_bytes"])
    load0, psi0 = _load(), _psi()
    recs = [runner.run(c, progress) for c in build_cases(p, backend, backend.memory_bytes())]
    meta = {"perfmodel_measure": 1, "preset": preset, "date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            **backend.info(), "act_dtype": backend.act_dtype, "repeats": p["repeats"], "warmup": p["warmup"],
            "cache_bytes": backend.cache_bytes(), "rotation_pool_bytes": p["pool_bytes"],
            "bandwidth_buffer_bytes": p["bw_bytes"], "decode_model": p["decode"]["model"],
            "load_avg_start": load0, "load_avg_end": _load(), "cpu_pressure_start": psi0, "cpu_pressure_end": _psi()}
    return {"meta": meta, "cases": recs}


# ---------------------------------------------------------------- files
CSV_COLUMNS = ["case", "family", "role", "dtype", "sizes", "flops", "bytes", "median_s", "min_s", "max_s", "repeats",
               "warmup", "inner", "achieved_bytes_per_s", "achieved_flops_per_s", "load_before", "load_after", "cpu_util"]


def sizes_text(params: dict) -> str:
    """B=4 S=1024 ...; a decode case's model as L=2 D=4096 ..."""
    flat = {**{k: v for k, v in params.items() if k != "model"}, **params.get("model", {})}
    return " ".join(f"{k}={v}" for k, v in flat.items())


def write(results: dict, out: Path) -> dict[str, Path]:
    """results.json (everything, samples included) and results.csv (one row per case)."""
    import csv

    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "results.json", "csv": out / "results.csv"}
    paths["json"].write_text(json.dumps(results, indent=1) + "\n")
    with paths["csv"].open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_COLUMNS, lineterminator="\n")
        w.writeheader()
        for r in results["cases"]:
            w.writerow({k: (sizes_text(r["params"]) if k == "sizes" else r.get(k)) for k in CSV_COLUMNS})
    return paths


def load(path) -> dict:
    """A results.json, or a folder that holds one."""
    p = Path(path)
    if p.is_dir():
        p = p / "results.json"
    from ..errors import SpecError

    try:
        data = json.loads(p.read_text())
    except OSError:
        raise SpecError(str(path), None, "no such results file (give the folder `perfmodel measure --out` wrote, or its results.json)") from None
    except json.JSONDecodeError as e:
        raise SpecError(str(p), None, f"not valid JSON at line {e.lineno}") from None
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list) or "meta" not in data:
        raise SpecError(str(p), None, "not a perfmodel measure results file (expected meta and cases)")
    return data


def busy() -> str | None:
    """A warning when other processes already load the machine (load average above half its cores)."""
    load, cores = _load(), os.cpu_count() or 1
    if load and load[0] > 0.5 * cores:
        return f"load average {load[0]:.2f} on {cores} cores"
    return None
