"""The measured-kernel pricing paths users call, at this tree: an achievable decode grid (array interpolation)
and a name-based pm.decode (a few points). Run it beside an older tree with PYTHONPATH=<tree> to compare
(docs/speed.md, "Serving simulation with measured kernels")."""
import time, sys, numpy as np
import perfmodel as pm
from perfmodel import engine
m, h = pm.load_model("llama-3.1-8b"), pm.load_hardware("h100-sxm")
B = np.arange(1, 1001, dtype=float)[:, None]; S = np.linspace(128, 32768, 1000)[None, :]
engine.evaluate(m, h, B[:8], S[:, :8], "decode", "achievable", impl="vllm-0.24")
best = min((lambda t0: (engine.evaluate(m, h, B, S, "decode", "achievable", impl="vllm-0.24"), time.perf_counter() - t0)[1])(time.perf_counter()) for _ in range(3))
t0 = time.perf_counter(); pm.decode("llama-3.1-8b", "h100-sxm", batch=[1, 8, 64], context=[1024], mode="achievable", impl="vllm-0.24"); one = time.perf_counter() - t0
best1 = min((lambda t0: (pm.decode("llama-3.1-8b", "h100-sxm", batch=[1, 8, 64], context=[1024], mode="achievable", impl="vllm-0.24"), time.perf_counter() - t0)[1])(time.perf_counter()) for _ in range(5))
print(f"{sys.argv[1]}: grid 1000x1000 {best:.3f} s; pm.decode 3 rows {best1*1e3:.1f} ms")
