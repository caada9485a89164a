"""The CUDA backend: PyTorch tensors on the GPU, timed with CUDA events.

Importable without torch or a GPU: torch is imported inside functions only. `available()` says
whether this machine can run it and, if not, why.

- Timing: an event recorded before and after the timed calls on the current stream, then
  `synchronize()` on the second and `elapsed_time` (ms). Warm-up calls run first (cuBLAS picks
  its algorithms, the caching allocator fills).
- Matmul dtypes: bf16, fp16, fp32 (TF32 off: true fp32), tf32 (TF32 on), and fp8 (e4m3 through
  torch._scaled_mm) on devices of compute capability >= 8.9.
- The decode step and attention are perfmodel.measure.llama written with torch ops (eager,
  unfused attention), the same code the numpy backend runs.
"""
from __future__ import annotations

import subprocess

from .timing import WallTimer

DTYPES = ("bf16", "fp16", "fp32", "tf32", "fp8")


def available() -> tuple[bool, str]:
    """(True, device name) or (False, the reason)."""
    try:
        import torch
    except ImportError:
        return False, "PyTorch is not installed"
    if not torch.cuda.is_available():
        return False, f"torch {torch.__version__} sees no CUDA device"
    return True, torch.cuda.get_device_name(0)


class EventTimer:
    """CUDA events around the timed region (the host clock would time the launches, not the kernels).

    `event` makes an event (torch.cuda.Event(enable_timing=True) on a GPU; a fake one in tests).
    """

    def __init__(self, event):
        self.event = event
        self._start = self._end = None

    def start(self) -> None:
        self._start, self._end = self.event(), self.event()
        self._start.record()

    def stop(self) -> float:
        self._end.record()
        self._end.synchronize()
        return self._start.elapsed_time(self._end) / 1e3  # ms -> s


class TorchXP:
    """The array primitives perfmodel.measure.llama needs, in torch on one CUDA device."""

    name = "torch"

    def __init__(self, seed: int = 0, device: str = "cuda"):
        import torch

        self.torch, self.device = torch, device
        self.gen = torch.Generator(device=device).manual_seed(seed)
        self._dt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "tf32": torch.float32,
                    "fp8": torch.bfloat16}  # fp8 operands are made from bf16 ones (see matmul)

    def rand(self, shape, dtype: str, scale: float = 1.0, center: float = 0.0):
        """Uniform in [center - scale, center + scale): random, never zeros."""
        x = self.torch.rand(shape, generator=self.gen, device=self.device, dtype=self._dt[dtype])
        return x.mul_(2 * scale).add_(center - scale)

    def randint(self, high: int, n: int):
        return self.torch.randint(0, high, (n,), generator=self.gen, device=self.device)

    def asarray(self, a, dtype: str):
        return self.torch.as_tensor(a, device=self.device, dtype=self._dt[dtype])

    def empty_like(self, x):
        return self.torch.empty_like(x)

    def operands(self, a, b, dtype: str):
        """Matmul operands in the form `matmul` takes, converted outside the timed region:
        fp8 gets e4m3 copies with B column-major (what torch._scaled_mm needs)."""
        if dtype != "fp8":
            return a, b
        f8 = self.torch.float8_e4m3fn
        return a.to(f8), b.t().contiguous().to(f8).t()

    def matmul(self, a, b, dtype: str | None = None):
        torch = self.torch
        if dtype == "fp8":
            one = torch.ones((), device=self.device, dtype=torch.float32)
            return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
        return a @ b

    @staticmethod
    def permute(x, axes):
        return x.permute(*axes)

    def rmsnorm(self, x, w, eps: float = 1e-5):
        return x * self.torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w

    def softmax(self, s):
        return self.torch.softmax(s, dim=-1)

    def silu_mul(self, g, u):
        return self.torch.nn.functional.silu(g) * u

    def rope(self, x, cos, sin):
        h = x.shape[-1] // 2
        return x * cos + self.torch.cat([-x[..., h:], x[..., :h]], dim=-1) * sin

    def copy(self, dst, src) -> None:
        dst.copy_(src)

    def reduce(self, x):
        return x.sum()  # stays on the device: no host sync inside the timed loop

    def sync(self) -> None:
        self.torch.cuda.synchronize()


def _smi() -> dict:
    """Clocks and driver from nvidia-smi, where it is installed (nothing otherwise)."""
    q = "name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,power.limit,temperature.gpu"
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader,nounits", "-i", "0"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if out.returncode != 0:
        return {}
    vals = [v.strip() for v in out.stdout.strip().split(",")]
    return dict(zip(q.split(","), vals)) if len(vals) == len(q.split(",")) else {}


class CUDABackend:
    """PyTorch on CUDA device 0."""

    name = "cuda"
    act_dtype = "bf16"

    def __init__(self, seed: int = 0):
        ok, why = available()
        if not ok:
            raise RuntimeError(why)
        import torch

        self.torch = torch
        self.xp = TorchXP(seed)
        self.props = torch.cuda.get_device_properties(0)

    def gemm_dtypes(self) -> list[str]:
        cc = self.torch.cuda.get_device_capability(0)
        fp8 = cc >= (8, 9) and hasattr(self.torch, "_scaled_mm") and hasattr(self.torch, "float8_e4m3fn")
        return [d for d in DTYPES if d != "fp8" or fp8]

    def cache_bytes(self) -> int | None:
        return getattr(self.props, "L2_cache_size", None) or None

    def memory_bytes(self) -> int | None:
        return int(self.props.total_memory)

    def device_name(self) -> str:
        return self.props.name

    def timer(self):
        torch = self.torch
        return EventTimer(lambda: torch.cuda.Event(enable_timing=True))

    def settle(self) -> None:
        """Nothing queued before the bandwidth probes."""
        self.xp.sync()

    def host_timer(self):
        """A host clock around a device synchronize (an alternative to events)."""
        return WallTimer(sync=self.xp.sync)

    def info(self) -> dict:
        torch, p = self.torch, self.props
        return {"backend": "cuda (torch)", "device": p.name, "compute_capability": f"{p.major}.{p.minor}",
                "sm_count": p.multi_processor_count, "memory_bytes": int(p.total_memory),
                "memory_source": f"torch.cuda.get_device_properties(0).total_memory ({p.name})",
                "l2_bytes": self.cache_bytes(), "l2_source": f"torch.cuda.get_device_properties(0).L2_cache_size ({p.name})",
                "torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
                "nvidia_smi": _smi()}
