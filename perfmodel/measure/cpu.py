"""The CPU backend: numpy arrays, BLAS matmuls, and what can be read about the machine.

numpy's elementwise loops are single-threaded while BLAS uses every core. So that the bandwidth
ceilings are the machine's and not one core's, the copy and the reduction split their buffer into
one contiguous chunk per core and run the chunks on a thread pool (numpy releases the GIL inside
both loops). Everything else is plain numpy, as a user's numpy model would run.
"""
from __future__ import annotations

import os
import platform
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from .timing import WallTimer

DTYPES = {"fp64": np.float64, "fp32": np.float32}  # numpy has BLAS for these two only
SETTLE_S = 0.15  # > OpenBLAS's spin-wait after a call (2^28 cycles: 0.1 s at 2.6 GHz)


def n_threads() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


class NumpyXP:
    """The array primitives perfmodel.measure.llama needs, in numpy."""

    name = "numpy"

    def __init__(self, seed: int = 0, threads: int | None = None):
        self.rng = np.random.default_rng(seed)
        self.threads = threads or n_threads()
        self._pool = ThreadPoolExecutor(self.threads) if self.threads > 1 else None

    # -- allocation ----------------------------------------------------------------------
    def rand(self, shape, dtype: str, scale: float = 1.0, center: float = 0.0):
        """Uniform in [center - scale, center + scale): random, never zeros, no denormals."""
        x = self.rng.random(shape, dtype=DTYPES[dtype])
        x *= 2 * scale
        x += center - scale
        return x

    def randint(self, high: int, n: int):
        return self.rng.integers(0, high, n)

    def asarray(self, a, dtype: str):
        return np.asarray(a, dtype=DTYPES[dtype])

    def empty_like(self, x):
        return np.empty_like(x)

    def nbytes(self, x) -> int:
        return x.nbytes

    # -- the ops of the step ---------------------------------------------------------------
    @staticmethod
    def operands(a, b, dtype: str):
        return a, b

    @staticmethod
    def matmul(a, b, dtype: str | None = None):
        return a @ b

    @staticmethod
    def permute(x, axes):
        return x.transpose(axes)

    @staticmethod
    def rmsnorm(x, w, eps: float = 1e-5):
        return x * (1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)) * w

    @staticmethod
    def softmax(s):
        s -= s.max(axis=-1, keepdims=True)
        np.exp(s, out=s)
        s /= s.sum(axis=-1, keepdims=True)
        return s

    @staticmethod
    def silu_mul(g, u):
        return g / (1.0 + np.exp(-g)) * u

    @staticmethod
    def rope(x, cos, sin):
        h = x.shape[-1] // 2
        return x * cos + np.concatenate([-x[..., h:], x[..., :h]], axis=-1) * sin

    # -- bandwidth kernels: one contiguous chunk per core ----------------------------------
    def _chunks(self, n: int) -> list[slice]:
        step = -(-n // self.threads)
        return [slice(i, min(n, i + step)) for i in range(0, n, step)]

    def copy(self, dst, src) -> None:
        if self._pool is None:
            np.copyto(dst, src)
        else:
            list(self._pool.map(lambda s: np.copyto(dst[s], src[s]), self._chunks(src.size)))

    def reduce(self, x) -> float:
        if self._pool is None:
            return float(np.add.reduce(x))
        return float(sum(self._pool.map(lambda s: np.add.reduce(x[s]), self._chunks(x.size))))



# ---------------------------------------------------------------- the machine
def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _size(text: str | None) -> int | None:
    """sysfs cache sizes: '491520K', '2048K', '32M'."""
    if not text:
        return None
    mult = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(text[-1].upper(), 1)
    try:
        return int(text.rstrip("KMGkmg")) * mult
    except ValueError:
        return None


def llc_bytes() -> int | None:
    """Size of the last-level cache (the highest cache index of cpu0), from sysfs."""
    best = None
    for d in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        if _read(str(d / "type")) in ("Unified", "Data"):
            lvl, size = _read(str(d / "level")), _size(_read(str(d / "size")))
            if lvl and size and (best is None or int(lvl) >= best[0]):
                best = (int(lvl), size)
    return best[1] if best else None


def memory_bytes() -> int | None:
    text = _read("/proc/meminfo") or ""
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return None


def _cpuinfo() -> dict:
    text = _read("/proc/cpuinfo") or ""
    model, mhz = None, []
    for line in text.splitlines():
        k, _, v = line.partition(":")
        k, v = k.strip(), v.strip()
        if k == "model name" and model is None:
            model = v
        elif k == "cpu MHz":
            mhz.append(float(v))
    return {"model": model or platform.processor() or platform.machine(), "mhz": mhz}


def _blas() -> dict:
    """BLAS name/version from numpy's build config, and the runtime pools if threadpoolctl is installed."""
    out: dict = {}
    try:
        cfg = np.show_config(mode="dicts")
        blas = cfg.get("Build Dependencies", {}).get("blas", {})
        out = {k: blas.get(k) for k in ("name", "version", "openblas configuration") if blas.get(k)}
    except Exception:  # older numpy: no mode="dicts"
        pass
    try:
        import threadpoolctl

        out["threadpools"] = [{k: p.get(k) for k in ("internal_api", "version", "num_threads", "architecture")}
                              for p in threadpoolctl.threadpool_info()]
    except ImportError:
        pass
    return out


ENV_KEYS = ("OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
            "NVPL_BLAS_DEBUG_CPU_TYPE", "MKL_DEBUG_CPU_TYPE", "GOTO_NUM_THREADS")


class CPUBackend:
    """numpy/BLAS on the host CPU."""

    name = "cpu"
    synchronous = True  # a numpy call returns when its work is done: ops can be timed one by one
    act_dtype = "fp32"  # numpy's BLAS has no 16-bit matmul: predictions use fp32 weights and activations

    def __init__(self, seed: int = 0):
        self.xp = NumpyXP(seed)

    def gemm_dtypes(self) -> list[str]:
        return list(DTYPES)

    def timer(self):
        return WallTimer()  # numpy calls return when the work is done: nothing to synchronize

    def settle(self) -> None:
        """Let BLAS's worker threads go idle before the bandwidth probes. OpenBLAS threads spin for
        about 2^28 cycles (OPENBLAS_THREAD_TIMEOUT's default; ~0.1 s) after a call, and numpy's loops
        of the copy and the reduction would share the cores with them: on the 2-core development
        machine a reduction right after a GEMV read 20 GB/s, and 31 GB/s alone."""
        time.sleep(SETTLE_S)

    def cache_bytes(self) -> int | None:
        return llc_bytes()

    def memory_bytes(self) -> int | None:
        return memory_bytes()

    def device_name(self) -> str:
        return f"{_cpuinfo()['model']} ({self.xp.threads} cores)"

    def info(self) -> dict:
        cpu = _cpuinfo()
        gov = _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
        fmax = _read("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
        return {"backend": "cpu (numpy/BLAS)", "device": self.device_name(), "cpu_model": cpu["model"],
                "threads": self.xp.threads, "cpu_mhz_now": cpu["mhz"],
                "cpu_max_mhz": int(fmax) / 1000 if fmax else None, "governor": gov,
                "llc_bytes": llc_bytes(), "memory_bytes": memory_bytes(),
                "numpy": np.__version__, "blas": _blas(), "python": sys.version.split()[0],
                "platform": platform.platform(), "nice": os.nice(0) if hasattr(os, "nice") else None,
                "autogroup": _read("/proc/self/autogroup"), "env": {k: os.environ.get(k) for k in ENV_KEYS if k in os.environ}}
