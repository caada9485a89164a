"""Benchmark cases: what each one computes, the FLOPs and bytes it moves, and the engine ops that
predict it.

Two roles:
- calibration cases measure the machine's ceilings and never get predicted:
  `copy` (bytes read + written), `reduce` (read-only), `gemm` (large matmul per dtype),
  `dispatch` (one op of a tiny decode step: the fixed cost of running an op at all) and `skinny`
  (one X(M x D) . W(D x F) at a few rows, at a shape no validation case uses: the time a
  multi-row product spends per weight byte, in reads of it, the engine's `gemm_weight_passes`)
  and `kv` (decode attention at a head count, batch and context no validation case uses: the
  same for the K/V cache read by the per-head products, the engine's `attention_kv_passes`);
- validation cases are predicted by the engine from the calibrated spec: `sweep`
  (X(B x D) . W(D x F) as B grows), `attention` (decode attention over a (B, S, K, H) cache with
  GQA groups) and `decode` (a whole decode step of a Llama-shaped model).

A validation case's FLOPs and bytes are not counted here: they are the sums over the ops that
`perfmodel.ops.build_ops` lists for the same shapes (a one-matrix MLP for the sweep, the
attention ops of a model with N, K, H for attention, the model itself for a decode step), so
the measurement is compared with exactly what the engine counts. Attention is the unfused form
(scores written, softmaxed and re-read), because that is what a matmul-softmax-matmul in numpy or
eager PyTorch does.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..engine import memory, roofline
from ..ops import Op, Precision, build_ops
from ..specs import Hardware, Model, model_from_dict

CALIBRATION = ("copy", "reduce", "gemm", "dispatch", "skinny", "kv")
VALIDATION = ("sweep", "attention", "decode")
FAMILIES = CALIBRATION + VALIDATION

# bytes per element of the dtypes the harness times (fp64 is measured on CPUs, never predicted)
ITEMSIZE = {"fp64": 8, "fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
SOURCE = "perfmodel.measure: random weights, shapes from the measurement's results.json"


@dataclass
class Case:
    """One benchmark point. `params` are the sizes; `flops` and `bytes` what it computes and moves."""

    name: str
    family: str
    dtype: str
    params: dict = field(default_factory=dict)
    flops: float = 0.0
    bytes: float = 0.0

    @property
    def role(self) -> str:
        return "calibration" if self.family in CALIBRATION else "validation"

    def record(self) -> dict:
        return {"case": self.name, "family": self.family, "role": self.role, "dtype": self.dtype,
                "params": dict(self.params), "flops": float(self.flops), "bytes": float(self.bytes)}


def precision(dtype: str) -> Precision:
    """Weights, activations and KV cache all in the measured dtype (tf32 stores fp32)."""
    store = "fp32" if dtype == "tf32" else dtype
    return Precision(weights=store, act=store, kv=store)


def _totals(ops: list[Op]) -> tuple[float, float]:
    return (float(sum(o.flops * o.count for o in ops)), float(sum(o.bytes * o.count for o in ops)))


# ---------------------------------------------------------------- calibration cases
def copy_case(n: int, dtype: str) -> Case:
    """dst[:] = src over n elements: every byte is read once and written once."""
    return Case(f"copy/{dtype}/n={n}", "copy", dtype, {"n": n}, 0.0, 2.0 * n * ITEMSIZE[dtype])


def reduce_case(n: int, dtype: str) -> Case:
    """sum(src) over n elements: read once, n - 1 additions (counted as n)."""
    return Case(f"reduce/{dtype}/n={n}", "reduce", dtype, {"n": n}, float(n), 1.0 * n * ITEMSIZE[dtype])


def gemm_case(M: int, N: int, K: int, dtype: str) -> Case:
    """C(M x N) = A(M x K) . B(K x N): 2MNK FLOPs; A and B read once, C written once."""
    return Case(f"gemm/{dtype}/{M}x{N}x{K}", "gemm", dtype, {"M": M, "N": N, "K": K},
                2.0 * M * N * K, float(ITEMSIZE[dtype] * (M * K + K * N + M * N)))


# ---------------------------------------------------------------- models behind the validation cases
def llama_model(cfg: dict) -> Model:
    """The perfmodel spec of the Llama-shaped model a decode case runs (cfg: D, L, N, K, H, F, V)."""
    return model_from_dict({
        "name": cfg.get("name", f"llama-shaped-L{cfg['L']}-D{cfg['D']}"), "source": SOURCE,
        "vocab_size": cfg["V"], "d_model": cfg["D"], "n_layers": cfg["L"], "n_heads": cfg["N"],
        "n_kv_heads": cfg["K"], "head_dim": cfg["H"], "d_ff": cfg["F"], "max_context": cfg.get("max_context", 1 << 20),
        "mlp": "gated", "norm": "rmsnorm", "position": "rope", "tied_embeddings": False}, "perfmodel.measure")


def _matmul_model(D: int, F: int) -> Model:
    """A one-layer model whose plain MLP's up projection is X(B x D) . W(D x F)."""
    return model_from_dict({"name": f"matmul-{D}x{F}", "source": SOURCE, "vocab_size": 1, "d_model": D,
                            "n_layers": 1, "n_heads": 1, "head_dim": D, "d_ff": F, "max_context": 1,
                            "mlp": "plain"}, "perfmodel.measure")


def _attention_model(N: int, K: int, H: int, S: int) -> Model:
    return model_from_dict({"name": f"attention-N{N}-K{K}-H{H}", "source": SOURCE, "vocab_size": 1,
                            "d_model": N * H, "n_layers": 1, "n_heads": N, "n_kv_heads": K, "head_dim": H,
                            "d_ff": 1, "max_context": max(S, 1)}, "perfmodel.measure")


def case_ops(case: Case) -> tuple[list[Op], Precision]:
    """The engine ops that predict a validation or dispatch case, and the precision to time them at."""
    p, prec = case.params, precision(case.dtype)
    if case.family in ("sweep", "skinny"):  # the skinny case's M rows are the sweep's B
        ops = build_ops(_matmul_model(p["D"], p["F"]), p["B"] if "B" in p else p["M"], 1, 1, "decode", prec)
        return [o for o in ops if o.name == "mlp_up"], prec
    if case.family in ("attention", "kv"):
        ops = build_ops(_attention_model(p["N"], p["K"], p["H"], p["S"]), p["B"], 1, p["S"], "decode", prec,
                        attention="unfused")
        return [o for o in ops if o.name in ("attn_qk", "attn_softmax", "attn_av")], prec
    if case.family == "decode":
        return build_ops(llama_model(p["model"]), p["B"], 1, p["S"], "decode", prec, attention="unfused"), prec
    if case.family == "dispatch":  # one op (one layer's instance) of a tiny decode step
        ops = build_ops(llama_model(p["model"]), p["B"], 1, p["S"], "decode", prec, attention="unfused")
        op = next(o for o in ops if o.name == p["op_name"])  # the first layer's instance
        one = Op(op.name, op.group, 1, op.kind, op.flops, op.w_read, op.kv_read, op.act_read, op.act_write,
                 op.kv_write)
        return [one], prec
    raise ValueError(f"{case.family} cases are calibration measurements; the engine does not predict them")


def sweep_case(B: int, D: int, F: int, dtype: str) -> Case:
    c = Case(f"sweep/{dtype}/D={D},F={F}/B={B}", "sweep", dtype, {"B": B, "D": D, "F": F})
    c.flops, c.bytes = _totals(case_ops(c)[0])
    return c


def skinny_case(M: int, D: int, F: int, dtype: str) -> Case:
    """X(M x D) . W(D x F) with 1 < M rows: the calibration case of gemm_weight_passes (the same op as
    a sweep point, at a shape and row count the sweep does not use)."""
    c = Case(f"skinny/{dtype}/M={M},D={D},F={F}", "skinny", dtype, {"M": M, "D": D, "F": F})
    c.flops, c.bytes = _totals(case_ops(c)[0])
    return c


def attention_case(B: int, S: int, N: int, K: int, H: int, dtype: str) -> Case:
    c = Case(f"attention/{dtype}/N={N},K={K},H={H}/B={B},S={S}", "attention", dtype,
             {"B": B, "S": S, "N": N, "K": K, "H": H})
    c.flops, c.bytes = _totals(case_ops(c)[0])
    return c


def kv_case(B: int, S: int, N: int, K: int, H: int, dtype: str) -> Case:
    """Decode attention at a shape no validation case has: the calibration case of attention_kv_passes."""
    c = Case(f"kv/{dtype}/N={N},K={K},H={H}/B={B},S={S}", "kv", dtype, {"B": B, "S": S, "N": N, "K": K, "H": H})
    c.flops, c.bytes = _totals(case_ops(c)[0])
    return c


def decode_case(model: dict, B: int, S: int, dtype: str) -> Case:
    c = Case(f"decode/{dtype}/L={model['L']},D={model['D']}/B={B},S={S}", "decode", dtype,
             {"B": B, "S": S, "model": dict(model)})
    c.flops, c.bytes = _totals(case_ops(c)[0])
    return c


def dispatch_cases(model: dict, B: int, S: int, dtype: str) -> list[Case]:
    """One case per distinct op of a tiny model's decode step (the first layer's instance)."""
    ops = build_ops(llama_model(model), B, 1, S, "decode", precision(dtype), attention="unfused")
    out = []
    for name in dict.fromkeys(op.name for op in ops):  # distinct names, in order
        c = Case(f"dispatch/{dtype}/{name}", "dispatch", dtype, {"B": B, "S": S, "model": dict(model), "op_name": name})
        c.flops, c.bytes = _totals(case_ops(c)[0])
        out.append(c)
    return out


def footprint(case: Case) -> float:
    """Bytes a case holds in device memory: weights + KV cache + activations for a decode step; for the
    others their bytes moved, each buffer being read or written once (an upper bound for attention)."""
    if case.family == "decode":
        p = case.params
        return float(memory(case_ops(case)[0], llama_model(p["model"]), p["B"], p["S"], precision(case.dtype))["memory_bytes"])
    return float(case.bytes)


def resident(case: Case) -> float:
    """Bytes a validation case keeps allocated while the suite interleaves it with others: a decode
    step's KV cache and activations (its model's weights are shared by every step of that model and
    counted once, outside), for the others their bytes moved (an upper bound: rotation copies share a pool)."""
    if case.family == "decode":
        p = case.params
        m = memory(case_ops(case)[0], llama_model(p["model"]), p["B"], p["S"], precision(case.dtype))
        return float(m["kv_cache_bytes"] + m["activation_bytes"])
    return float(case.bytes)


def from_record(rec: dict) -> Case:
    """The Case of a results.json entry (params are what the engine needs to predict it)."""
    return Case(rec["case"], rec["family"], rec["dtype"], dict(rec["params"]), rec["flops"], rec["bytes"])


def predict(case: Case, hw: Hardware) -> float:
    """Engine time of a case on hw: the sum of its ops' roofline times (+ hw.kernel_overhead each)."""
    ops, prec = case_ops(case)
    return float(roofline(ops, hw, prec)["time"])
