"""The measurement suite: which cases at which sizes, how each is run and timed, and the files written.

Care taken in every case:
- interleaved rounds (`interleave`): each round takes one sample of every validation case and a
  share of every calibration case, in a shuffled order, so that the ceilings and the cases they
  predict are sampled over the same minutes (a shared machine's speed drifts from minute to minute);
- the bandwidth probes run back to back after the backend settles (BLAS threads idle, queue empty);
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
import gc
import json
import math
import os
import random
import time
import weakref
from pathlib import Path

import numpy as np

from . import cases as C
from .llama import DecodeStep, attention
from .timing import Sampler

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
        return {"bw_bytes": 4 * MiB, "pool_bytes": 2 * MiB, "gemm": {"*": [64]}, "repeats": 2, "bw_repeats": 3, "warmup": 1, "budget_bytes": 1 * MiB,
                "min_sample_s": 1e-4, "sweep": {"D": 64, "F": 96, "B": [1, 2, 4]}, "skinny": [(3, 48, 80), (2, 40, 96)], "kv": [(4, 2, 16, 3, 24)],
                "attention": {"N": 4, "K": 2, "H": 16, "B": [1, 2], "S": [8, 32]},
                "decode": {"model": {**TINY_MODEL, "L": 2}, "B": [1, 2], "S": [4, 16]},
                "dispatch": {"model": TINY_MODEL, "B": 1, "S": 8}}
    if preset not in ("quick", "full"):
        raise ValueError(f"preset must be quick, full or tiny, got {preset!r}")
    quick = preset == "quick"
    # skinny: (M, D, F), a few rows at widths no validation case has (the gemm_weight_passes is their
    # median); on the CPU their weights (75-100 MB fp32) rotate through the pool like the sweep's, on a
    # GPU they (268-302 MB bf16) are already several times the L2
    base = {"dispatch": {"model": TINY_MODEL, "B": 1, "S": 16}, "min_sample_s": 2e-3,
            "attention": {"N": 32, "K": 8, "H": 128},
            "skinny": [(8, 3072, 7168), (4, 2048, 12288), (16, 6144, 3072)] if device == "cpu"
            else [(8, 8192, 16384), (4, 6144, 24576), (16, 16384, 8192)],
            # kv: (N, K, H, B, S), decode attention at head counts, batches and contexts no validation
            # case has (G = N / K query rows per KV head: 4, 4, 8), the K and V caches 34-113 MB fp32 on
            # the CPU and 134-453 MB bf16 on a GPU
            "kv": [(16, 4, 128, 8, 3072), (24, 6, 128, 3, 6144), (32, 4, 128, 2, 4096)] if device == "cpu"
            else [(16, 4, 128, 64, 3072), (24, 6, 128, 24, 6144), (32, 4, 128, 16, 4096)]}
    if device == "cpu":
        return {**base, "bw_bytes": 512 * MiB, "gemm": {"fp32": [3072] if quick else [2048, 4096],
                                                        "fp64": [2048] if quick else [2048, 4096]},
                "repeats": 13 if quick else 15, "bw_repeats": 39 if quick else 45, "warmup": 1 if quick else 2,
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
        self.big = weakref.WeakValueDictionary()  # (operand position, shape, dtype) -> a live fresh copy

    def sets(self, shapes: list, dtype: str) -> list[list]:
        """As many copies of a set of operands (one array per shape) as fit in the pool, >= 1."""
        size = [math.prod(s) for s in shapes]
        item = C.ITEMSIZE[dtype]
        n = self.footprint // item
        if sum(size) > n // 2:  # too big to rotate here: one fresh copy, itself >= the cache footprint / 2
            return [[self._fresh(i, tuple(s), dtype) for i, s in enumerate(shapes)]]
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

    def _fresh(self, i: int, shape: tuple, dtype: str):
        """One random array per (position, shape, dtype) while a case holds it: the sweep's points share
        one W (interleaved with other cases between calls, it is read cold each time), and it is freed
        with the last case that uses it."""
        key = (i, shape, dtype)
        a = self.big.get(key)
        if a is None:
            a = self.xp.rand(shape, dtype)
            self.big[key] = a
        return a


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
    out += [C.skinny_case(M, D, F, act) for M, D, F in p["skinny"]]
    out += [C.kv_case(B, S, N, K, H, act) for N, K, H, B, S in p["kv"]]
    s = p["sweep"]
    out += [C.sweep_case(B, s["D"], s["F"], act) for B in s["B"]]
    a = p["attention"]
    out += [C.attention_case(B, S, a["N"], a["K"], a["H"], act) for B in a["B"] for S in a["S"]]
    dm = p["decode"]
    out += [C.decode_case(dm["model"], B, S, act) for B in dm["B"] for S in dm["S"]]
    return [c for c in out if not memory or C.footprint(c) <= memory / 2]


BANDWIDTH = ("reduce", "copy")  # the ceilings' probes: run back to back after the backend settles


class Runner:
    """Builds each case's callable on a backend (allocations outside the timed region) and its sampler."""

    def __init__(self, backend, p: dict, pool_bytes: int, clock=time.perf_counter):
        self.b, self.xp, self.p, self.clock = backend, backend.xp, p, clock
        self.pool = Pool(self.xp, pool_bytes)
        self._params: dict = {}  # decode weights, shared by every (B, S) of one model
        self.profiles: dict = {}  # decode case -> one {op name: seconds} per call, timed inside the call
        self._src = None  # ((n, dtype), array): the bandwidth probes' buffer

    def callable(self, c: C.Case):
        xp, q = self.xp, c.params
        if c.family == "copy":
            src = self._bw_src(q["n"], c.dtype)
            dst = xp.empty_like(src)
            return lambda i: xp.copy(dst, src)
        if c.family == "reduce":
            src = self._bw_src(q["n"], c.dtype)
            return lambda i: xp.reduce(src)
        if c.family == "gemm":
            sets = [xp.operands(a, b, c.dtype) for a, b in self.pool.sets([(q["M"], q["K"]), (q["K"], q["N"])], c.dtype)]
            return lambda i: xp.matmul(*sets[i % len(sets)], c.dtype)
        if c.family in ("sweep", "skinny"):
            rows = q["B"] if c.family == "sweep" else q["M"]
            sets = self.pool.sets([(rows, q["D"]), (q["D"], q["F"])], c.dtype)
            return lambda i: xp.matmul(*sets[i % len(sets)], c.dtype)
        if c.family in ("attention", "kv"):
            B, S, N, K, H = (q[k] for k in "BSNKH")
            sets = self.pool.sets([(B, N, H), (B, K, S, H), (B, K, S, H)], c.dtype)
            return lambda i: attention(xp, *sets[i % len(sets)])
        if c.family in ("decode", "dispatch"):
            key = json.dumps(q["model"], sort_keys=True)
            if key not in self._params:
                self._params = {}  # one model's weights alive at a time
            step = DecodeStep(xp, q["model"], q["B"], q["S"], c.dtype, self._params.get(key))
            self._params[key] = step.params
            if c.family == "dispatch":
                f = step.op(q["op_name"])
                return lambda i: f()
            if getattr(self.b, "synchronous", False):
                return self._profiled(c.name, step)
            return step
        raise ValueError(f"unknown case family {c.family!r}")

    def _bw_src(self, n: int, dtype: str):
        """The copy and the reduction read one shared random buffer (the copy writes a second)."""
        if self._src is None or self._src[0] != (n, dtype):
            self._src = ((n, dtype), self.xp.rand((n,), dtype))
        return self._src[1]

    def _profiled(self, name: str, step: DecodeStep):
        """The step, timing each of its ops as it runs (a synchronous backend returns when an op is
        done): the op profile comes from the very calls that are measured, not from other runs."""
        calls = self.profiles.setdefault(name, [])
        names, clock = [n for n, _ in step.ops], self.clock

        def run(i):
            acc = dict.fromkeys(names, 0.0)
            for n, f in step.ops:
                t0 = clock()
                f()
                acc[n] += clock() - t0
            calls.append(acc)
            return step.state["logits"]

        return run

    def repeats(self, c: C.Case) -> int:
        """Samples of a calibration case over the whole run (the bandwidth probes, the skinny and the kv
        cases are short and set the ceiling and the fitted terms alone, so they get more)."""
        return self.p["bw_repeats"] if c.family in BANDWIDTH + ("skinny", "kv") else self.p["repeats"]

    def sampler(self, c: C.Case) -> Sampler:
        min_s = self.p["min_sample_s"] if c.family == "dispatch" else 0.0
        return Sampler(self.callable(c), self.b.timer(), min_sample_s=min_s).warm(self.p["warmup"])

    def record(self, c: C.Case, s: Sampler) -> dict:
        t = s.timing()
        rec = {**c.record(), **t.record()}
        calls = self.profiles.pop(c.name, None)
        if calls:  # the timed calls are the last ones (inner = 1 for a decode step)
            timed = calls[-t.repeats * t.inner:]
            rec["op_profile_s"] = {n: float(np.median([a[n] for a in timed])) for n in timed[0]}
        rec["achieved_bytes_per_s"] = c.bytes / t.median if c.bytes else None
        rec["achieved_flops_per_s"] = c.flops / t.median if c.flops else None
        return rec


def groups(cases: list, budget: float) -> list[list]:
    """Validation cases in run order, cut into consecutive groups whose resident bytes fit `budget`
    (a case larger than the budget alone makes a group)."""
    out, cur, used = [], [], 0.0
    for c in cases:
        r = C.resident(c)
        if cur and used + r > budget:
            out.append(cur)
            cur, used = [], 0.0
        cur.append(c)
        used += r
    return out + ([cur] if cur else [])


def spread(n: int, rounds: int) -> list[int]:
    """n samples over `rounds` rounds as evenly as possible: round r takes floor((r+1)n/R) - floor(rn/R)."""
    return [(r + 1) * n // rounds - r * n // rounds for r in range(rounds)]


def interleave(cal: list, val: list, runner: Runner, backend, budget: float, seed: int = 0, progress=None,
               on_round=None) -> dict:
    """Time every case in rounds: each round takes one sample of every validation case of the current
    group and a share of every calibration case's samples, in a shuffled order (the bandwidth probes
    first, back to back, once the backend has settled). So the ceilings and the cases they predict
    are measured over the same minutes: a machine whose speed drifts (other tenants of a shared host)
    moves both alike instead of biasing whichever was timed in the slow minute. Calibration cases are
    built once; validation cases a group at a time, within `budget` bytes. Returns {case name: record}."""
    parts = groups(val, budget) or [[]]
    reps = runner.p["repeats"]
    R = reps * len(parts)
    live = {c.name: runner.sampler(c) for c in cal}
    share = {c.name: spread(runner.repeats(c), R) for c in cal}
    rng, recs, r = random.Random(seed), {}, 0
    t0 = time.perf_counter()

    def done(c, s):
        recs[c.name] = runner.record(c, s)
        if progress:
            progress(recs[c.name])

    for part in parts:
        for c in part:
            live[c.name] = runner.sampler(c)
        for _ in range(reps):
            todo = [c for c in cal if c.family not in BANDWIDTH for _ in range(share[c.name][r])] + list(part)
            rng.shuffle(todo)
            backend.settle()
            probes = [c for c in cal if c.family in BANDWIDTH]
            for k in range(max([share[c.name][r] for c in probes], default=0)):
                for c in probes:
                    if k < share[c.name][r]:
                        live[c.name].sample()
            for c in todo:
                live[c.name].sample()
            r += 1
            if on_round:
                on_round(r, R, time.perf_counter() - t0)
        for c in part:
            done(c, live.pop(c.name))
        gc.collect()  # a decode step's ops close over the step (a cycle): free the group's buffers now
    for c in cal:
        done(c, live.pop(c.name))
    return recs


def _load() -> list | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _steal() -> float | None:
    """Seconds of CPU time the hypervisor gave to other guests (all CPUs; /proc/stat), or None."""
    try:
        f = Path("/proc/stat").read_text().split("\n", 1)[0].split()
        return int(f[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def _psi() -> str | None:
    """Linux pressure stall information for the CPU: the share of time runnable tasks waited."""
    try:
        return Path("/proc/pressure/cpu").read_text().splitlines()[0]
    except (OSError, IndexError):
        return None


def run_suite(backend, preset: str = "quick", progress=None, on_round=None, seed: int = 0) -> dict:
    """Run every case of the preset on the backend, interleaved (see `interleave`); returns
    {"meta": ..., "cases": [...]} with the cases in plan order."""
    mem = backend.memory_bytes()
    p = plan(backend.name, preset, backend.cache_bytes(), mem)
    runner = Runner(backend, p, p["pool_bytes"])
    cases = build_cases(p, backend, mem)
    cal = [c for c in cases if c.role == "calibration"]
    val = [c for c in cases if c.role == "validation"]
    budget = p.get("budget_bytes") or (mem or 8192 * MiB) / 4
    n_groups = len(groups(val, budget) or [[]])
    load0, psi0, steal0, t0 = _load(), _psi(), _steal(), time.perf_counter()
    recs = interleave(cal, val, runner, backend, budget, seed, progress, on_round)
    wall, steal1 = time.perf_counter() - t0, _steal()
    meta = {"perfmodel_measure": 2, "preset": preset, "date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            **backend.info(), "act_dtype": backend.act_dtype, "repeats": p["repeats"], "warmup": p["warmup"],
            "schedule": {"interleaved": True, "rounds": p["repeats"] * n_groups, "groups": n_groups, "seed": seed,
                         "budget_bytes": budget, "wall_s": round(wall, 2)},
            "cache_bytes": backend.cache_bytes(), "rotation_pool_bytes": p["pool_bytes"],
            "bandwidth_buffer_bytes": p["bw_bytes"], "decode_model": p["decode"]["model"],
            "load_avg_start": load0, "load_avg_end": _load(), "cpu_pressure_start": psi0, "cpu_pressure_end": _psi(),
            "steal_share": (round((steal1 - steal0) / (wall * (os.cpu_count() or 1)), 4)
                            if steal0 is not None and steal1 is not None and wall > 0 else None)}
    return {"meta": meta, "cases": [recs[c.name] for c in cases]}


# ---------------------------------------------------------------- files
CSV_COLUMNS = ["case", "family", "role", "dtype", "sizes", "flops", "bytes", "median_s", "min_s", "max_s", "repeats",
               "warmup", "inner", "achieved_bytes_per_s", "achieved_flops_per_s", "load_before", "load_after", "cpu_util"]


def sizes_text(params: dict) -> str:
    """B=4 S=1024 ...; a decode case's model as L=2 D=4096 ..."""
    flat = {**{k: v for k, v in params.items() if k != "model"}, **params.get("model", {})}
    return " ".join(f"{k}={v}" for k, v in flat.items())


def write(results: dict, out: Path, extra: dict | None = None) -> dict[str, Path]:
    """results.json (everything, samples included), results.csv (one row per case) and any `extra`
    {file name: text} (the calibrated specs), changed together or not at all (perfmodel.fileio)."""
    import csv
    import io

    from ..errors import SpecError
    from ..fileio import atomic_group

    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SpecError("--out", None, f"cannot create the folder {out}: {e.strerror or e}") from None
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in results["cases"]:
        w.writerow({k: (sizes_text(r["params"]) if k == "sizes" else r.get(k)) for k in CSV_COLUMNS})
    texts = {"results.json": json.dumps(results, indent=1) + "\n", "results.csv": buf.getvalue(), **(extra or {})}
    with atomic_group({name: out / name for name in texts}, "--out") as tmps:
        for name, text in texts.items():
            tmps[name].write_text(text, encoding="utf-8")
    paths = {"json": out / "results.json", "csv": out / "results.csv"}
    paths.update({name: out / name for name in extra or {}})
    return paths


def load(path) -> dict:
    """A results.json, or a folder that holds one."""
    p = Path(path)
    if p.is_dir():
        p = p / "results.json"
    from ..errors import SpecError

    from ..fileio import read_capped

    if not p.exists():
        raise SpecError(str(path), None, "no such results file (give the folder `perfmodel measure --out` wrote, or its results.json)")
    text = read_capped(p, str(p), 64 * 2**20, "results.json (at most 64 MiB)")
    try:
        data = json.loads(text)
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


def resolve(results, hardware):
    """A results dict (or the folder / results.json it came from) and the spec to predict with
    (default: the measured.yaml beside the results)."""
    from ..errors import SpecError
    from ..specs import load_hardware

    data = results if isinstance(results, dict) else load(results)
    if hardware is None:
        if isinstance(results, dict):
            raise SpecError("hardware", None, "pass the spec to predict with (e.g. the measured.yaml)")
        p = Path(results)
        hardware = str((p if p.is_dir() else p.parent) / "measured.yaml")
    return data, load_hardware(hardware)
