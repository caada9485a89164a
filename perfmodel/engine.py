"""Metrics derived from the op list: roofline time, memory, decode, prefill, request, capacity.

Every function takes batch sizes and context lengths as numpy arrays that broadcast; nothing
loops in Python per point. Results are dicts of columns (SI units): the CLI formats them and the
public API (perfmodel/__init__.py) wraps them in pandas DataFrames.
"""
from __future__ import annotations

import warnings

import numpy as np

from .errors import DataWarning, SpecError
from .ops import ATTENTION, COMM, Layout, Op, Precision, build_ops, build_step_ops
from .specs import Hardware, Model
from .timemodel import MODES, TimeModel, link_of, missing_data, time_model

def op_times(ops: list[Op], hw: Hardware, prec: Precision, layout: Layout | None = None, tm: TimeModel | None = None):
    """Per op (one instance): compute time, memory (or link) time, and its time on the device: the roofline's
    max(FLOPs/peak, bytes/bw), or the achievable time with a TimeModel of that mode."""
    return [x[:3] for x in (tm or TimeModel.roofline()).price(ops, hw, prec, layout)]


link_cost = link_of  # (bandwidth, one-hop latency, "link" or "network") of a layout's device group


class _Sum:
    """Adds arrays of different shapes cheaply: terms that vary along the same axes are summed first
    (small arrays), then the groups are added in a fixed order with one broadcast each.

    `keys` gives each term's group: which of B and S it varies with, found once by probing the
    op list's structure (see _op_keys). The summation order therefore does not depend on the sizes
    of the arrays, so a one-point evaluation and the same point inside a grid agree to the last bit.
    """

    def __init__(self, keys):
        self.keys, self.parts, self.i = keys, {}, 0

    def add(self, x):
        k = self.keys[self.i]
        self.i += 1
        self.parts[k] = self.parts[k] + x if k in self.parts else x

    def total(self):
        out = 0.0
        for k in sorted(self.parts):
            out = out + self.parts[k]
        return out


def _op_keys(ops: list[Op], probe: list[Op]) -> tuple:
    """For each op, the axes (of a 2x2 probe grid) along which its terms vary: (), (0,), (1,), (0, 1)."""
    keys = []
    for op in probe:
        axes = set()
        for f in ("flops", "w_read", "kv_read", "act_read", "act_write", "kv_write", "kv_stored"):
            v = getattr(op, f)
            sh = v.shape if isinstance(v, np.ndarray) else () if isinstance(v, (float, int)) else np.shape(v)
            axes.update(ax for ax, n in enumerate(sh[-2:]) if n > 1)  # mutation: equivalent - keys only group the sum (tests/test_laws_catalog.py)
        keys.append(tuple(sorted(axes)))
    if len(keys) != len(ops):
        raise RuntimeError("op list changed shape between probe and evaluation")
    return tuple(keys)  # mutation: equivalent - None groups every term in one sum, in list order


_PROBE_CACHE: dict = {}


def _keys_for(model, phase, prec, attention, causal_skip, ops, layout=None, stage=False):
    # which axes an op's terms vary along follows from the op list's structure (its ops, in order, and
    # which device groups split them), not from how many devices each group has: layouts of the same
    # structure share one probe (plan evaluates hundreds of layouts)
    lay = layout or Layout()
    base = (model, phase, (prec.weights, prec.act, prec.kv, prec.quantize_embeddings), attention, causal_skip, stage)
    fast = base + (lay, len(ops))  # this very layout seen before: no structure signature to build
    if fast in _PROBE_CACHE:
        return _PROBE_CACHE[fast]
    shape = (lay.tp > 1, model.K % lay.tp == 0, lay.ep > 1, lay.pp > 1, lay.m > 1,  # mutation: equivalent - keys only group the sum
             tuple((op.name, op.group, op.kind, op.link) for op in ops))
    ck = base + (shape,)
    if ck not in _PROBE_CACHE:
        B2, S2 = np.array([[1.0], [2.0]]), np.array([[64.0, 128.0]])  # mutation: equivalent - keys only group the sum
        probe = build_ops(model, B2, 1.0 if phase == "decode" else S2, S2, phase, prec, attention, causal_skip,  # mutation: equivalent - keys only group the sum
                          layout, stage)
        _PROBE_CACHE[ck] = _op_keys(ops, probe)
    _PROBE_CACHE[fast] = _PROBE_CACHE[ck]
    return _PROBE_CACHE[ck]


def roofline(ops: list[Op], hw: Hardware, prec: Precision, keys=None, layout: Layout | None = None,
             comm: bool = True, tm: TimeModel | None = None) -> dict:
    """Step time over the op list, with totals of FLOPs and bytes, the compute-bound share and the
    communication time (collectives are ops too). With the roofline's TimeModel (the default) the time
    is the sum of per-op roofline times; with the achievable one it is
    max(sum of device times, sum of host launch times) + the per-step overhead (timemodel.py)."""
    acc = Fold(keys or (0,) * len(ops))
    tm = tm or TimeModel.roofline()
    if tm.kernels_table is None:
        acc.add(ops, tm.price(ops, hw, prec, layout, comm))
        return acc.result()
    src: list = []
    priced = tm.price(ops, hw, prec, layout, comm, src)
    acc.add(ops, priced)
    out = acc.result()
    measured = 0.0
    for op, p, s in zip(ops, priced, src):  # the device time priced from measured kernel tables
        if s != "datasheet":
            measured = measured + p[2] * op.count
    out["measured_time"] = measured
    return out


class Fold:
    """The running sums of roofline() over an op list, op by op in list order. A prefix of an op list
    folded once can be copied and continued (serving.stepcost): the same additions in the same order,
    so the same bits as folding the whole list."""

    def __init__(self, keys):
        self.sums = tuple(_Sum(keys) for _ in range(5))  # time, flops, bytes, compute-bound time, comm time
        self.host = self.step = 0.0

    def copy(self) -> "Fold":
        new = Fold.__new__(Fold)
        new.sums = tuple(_Sum.__new__(_Sum) for _ in self.sums)
        for a, b in zip(new.sums, self.sums):
            a.keys, a.parts, a.i = b.keys, dict(b.parts), b.i
        new.host, new.step = self.host, self.step
        return new

    def add(self, ops, priced) -> None:
        """_Sum.add on each of the five sums per op, inlined (they share their keys): plan folds ~10^4 ops."""
        keys, i = self.sums[0].keys, self.sums[0].i
        pt, pf, pb, pc, pm = (s.parts for s in self.sums)
        host, step = self.host, self.step
        for op, (tc, tmem, t, b, t_cpu, t_step) in zip(ops, priced):
            k, c = keys[i], op.count
            i += 1
            for parts, x in ((pt, t * c), (pf, op.flops * c), (pb, b * c),
                             ((pc, (t if tc > tmem else 0.0) * c) if isinstance(t, float) and isinstance(tc, float)
                              and isinstance(tmem, float) else (pc, np.where(tc > tmem, t, 0.0) * c)),
                             (pm, (t if op.kind == COMM else 0.0 * t) * c)):
                parts[k] = parts[k] + x if k in parts else x
            host, step = host + t_cpu * c, step + t_step * c
        for s in self.sums:
            s.i = i
        self.host, self.step = host, step

    def result(self) -> dict:
        time, flops, nbytes, tcb, tcomm = self.sums
        host, step = self.host, self.step
        device = time.total()
        total = device if (np.all(host == 0.0) and np.all(step == 0.0)) else np.maximum(device, host) + step
        return {"time": total, "flops": flops.total(), "bytes": nbytes.total(), "device_time": device,
                "host_time": host, "step_overhead": step, "compute_bound_time": tcb.total(), "comm_time": tcomm.total()}


def memory(ops: list[Op], model: Model, B, S, prec: Precision, keys=None) -> dict:
    """Weights + KV cache of B sequences at context S + peak live activations of this step."""
    weights = sum(op.w_stored * op.count for op in ops)
    kv_seq = _Sum(keys or (0,) * len(ops))
    peak: dict = {}  # live activations: the residual stream plus the largest op's inputs and outputs
    for op in ops:
        kv_seq.add(op.kv_stored * op.count)
        a = op.act_read + op.act_write
        k = np.shape(a)
        peak[k] = np.maximum(peak[k], a) if k in peak else a
    act = 0.0
    for v in peak.values():
        act = np.maximum(act, v)
    act = act + ops[0].act_write  # the embedding output = residual stream (M x D)
    kv_seq = kv_seq.total() + 0 * np.asarray(S, float)
    kv = B * kv_seq
    return {"weight_bytes": weights, "kv_bytes_per_seq": kv_seq, "kv_cache_bytes": kv,
            "activation_bytes": act, "memory_bytes": weights + kv + act}


def _pick(v, i: int, ndim: int):
    """Term i of a result over a stacked batch axis; a term that does not vary with the batch has no such axis."""
    return v[i] if np.ndim(v) == ndim else v


def _grid(batch, context):
    """An open grid: B as a column, S as a row; results broadcast to len(B) x len(S)."""
    B = np.atleast_1d(np.asarray(batch, dtype=np.float64)).ravel()
    S = np.atleast_1d(np.asarray(context, dtype=np.float64)).ravel()
    return B[:, None], S[None, :]


def _run(model, hw, B, S, phase, prec, attention, causal_skip, layout, stage, comm=True, tm=None):
    T = 1.0 if phase == "decode" else S
    ops = build_ops(model, B, T, S, phase, prec, attention, causal_skip, layout, stage)
    keys = _keys_for(model, phase, prec, attention, causal_skip, ops, layout, stage)
    return ops, keys, roofline(ops, hw, prec, keys, layout, comm, tm)


def evaluate(model: Model, hw: Hardware, batch, context, phase: str = "decode", mode: str = "roofline",
             prec: Precision | None = None, attention: str = "fused", causal_skip: bool = True,
             grid: bool = True, layout: Layout | None = None, impl=None, tm: TimeModel | None = None) -> dict:
    """Latency, throughput, memory and fit for one phase over batch x context (or broadcast).

    mode: roofline (the ideal bound), achievable (what a good implementation reaches: the hardware's
    achievable terms and the implementation profile `impl`, default timemodel.DEFAULT_IMPL) or simple
    (the lecture's (weights + B * KV) / bandwidth). `tm` passes a ready TimeModel instead.

    batch is per model replica. With a layout (docs/parallelism.md), memory and fit are per device,
    latency is the time between a sequence's tokens (decode) or the prefill time, and throughput
    counts every replica. A pipeline of pp stages and m micro-batches of B/m sequences advances every
    sequence by one token per round of max(m * stage time, one micro-batch through all stages).
    """
    if mode not in MODES:
        from .errors import SpecError

        raise SpecError("--mode", None, f"must be one of {', '.join(MODES)}, got {mode!r}")
    tm = tm or time_model(mode, hw, impl)
    prec = prec or Precision()
    lay = layout or Layout()
    gaps = missing_data(hw, lay, mode)
    if gaps and mode != "simple":
        warnings.warn(f"{hw.key or hw.name} lacks {', '.join(gaps)}: the collectives of tp={lay.tp} pp={lay.pp} "
                      f"ep={lay.ep} cost bandwidth only there, an optimistic figure", DataWarning, stacklevel=2)
    B, S = _grid(batch, context) if grid else np.broadcast_arrays(np.asarray(batch, float), np.asarray(context, float))
    comm = mode != "simple"  # the lecture's model has no communication term
    if lay.pp > 1 and phase == "decode":
        mb = np.minimum(lay.m, B)  # at most one micro-batch per sequence
        # the whole pipeline at B and at one micro-batch B/mb, in one evaluation over a stacked batch axis
        # (elementwise the same arithmetic, so the same bits as two evaluations)
        Bs = np.stack(np.broadcast_arrays(B, B / mb))
        _, _, both = _run(model, hw, Bs, S, phase, prec, attention, causal_skip, lay, False, comm, tm)
        rf, full_m = ({k: _pick(v, i, Bs.ndim) for k, v in both.items()} for i in (0, 1))
    else:
        ops, keys, rf = _run(model, hw, B, S, phase, prec, attention, causal_skip, lay, False, comm, tm)
    comm_time = rf["comm_time"]
    if lay.pp > 1:  # memory on the largest stage with the whole batch resident (its op list; no time needed)
        ops = build_ops(model, B, 1.0 if phase == "decode" else S, S, phase, prec, attention, causal_skip, lay, True)
        keys = _keys_for(model, phase, prec, attention, causal_skip, ops, lay, True)  # mutation: equivalent - keys only group the sum
        if phase == "decode":
            _, _, st_m = _run(model, hw, B / mb, S, phase, prec, attention, causal_skip, lay, True, comm, tm)
            rf = dict(rf, time=np.maximum(mb * st_m["time"], full_m["time"]))
            comm_time = full_m["comm_time"]
    mem = memory(ops, model, np.ceil(B / lay.ep), S, prec, keys)  # whole sequences on the busiest device
    if mode == "simple":  # the lecture: a memory-bound step streams all weights and every sequence's KV
        # the stages stream in turn: pp x the largest stage's weights and KV (derivations "The roofline")
        streamed = (mem["weight_bytes"] + mem["kv_cache_bytes"]) / hw.memory_bandwidth * (lay.pp if lay.pp > 1 else 1)
        latency = streamed
        if phase == "prefill":
            latency = np.maximum(latency, rf["flops"] / hw.peak(prec.formats()[1].peak))
        bound = np.where(latency > streamed, "compute", "memory")  # (it compared with one stage: pp > 1 said compute)
    else:
        latency = rf["time"]
        bound = np.where(rf["compute_bound_time"] * 2 > latency, "compute", "memory")
    tokens = B * (1.0 if phase == "decode" else S) * lay.replicas
    shape = np.broadcast_shapes(np.shape(B), np.shape(S))
    full = lambda x: np.broadcast_to(x, shape) if shape else np.asarray(x)  # noqa: E731  (read-only views, no copies)
    return {"model": model.name, "hardware": hw.key or hw.name, "phase": phase, "batch": full(B), "context": full(S),
            "mode": mode, "latency_s": full(latency), "throughput_tok_s": full(tokens / latency),
            "weight_bytes": full(mem["weight_bytes"]), "kv_cache_bytes": full(mem["kv_cache_bytes"]),
            "activation_bytes": full(mem["activation_bytes"]), "memory_bytes": full(mem["memory_bytes"]),
            "fits": full(mem["memory_bytes"] <= hw.memory_capacity), "bound": full(bound),
            "intensity": full(rf["flops"] / rf["bytes"]), "flops": full(rf["flops"]), "bytes": full(rf["bytes"]),
            "comm_time_s": full(comm_time), "devices": lay.devices,
            "host_time_s": full(rf.get("host_time", 0.0)), "step_overhead_s": full(rf.get("step_overhead", 0.0)),
            "measured_share": full(rf.get("measured_time", 0.0) / rf["device_time"])}


def request(model: Model, hw: Hardware, batch, prompt, generate: int, mode: str = "roofline",
            prec: Precision | None = None, attention: str = "fused", chunk: int = 4096,
            layout: Layout | None = None, impl=None) -> dict:
    """A whole request: prefill P tokens, then G decode steps at contexts P, P+1, ..., P+G-1.

    The decode steps form an extra array axis (chunked to bound memory), not a Python loop per point.
    """
    prec = prec or Precision()
    tm = time_model(mode, hw, impl)
    pre = evaluate(model, hw, batch, prompt, "prefill", mode, prec, attention, layout=layout, tm=tm)
    B, P = pre["batch"], pre["context"]
    total = np.zeros_like(B)
    for g0 in range(0, int(generate), chunk):
        g = np.arange(g0, min(int(generate), g0 + chunk), dtype=np.float64)
        step = evaluate(model, hw, B[..., None], P[..., None] + g, "decode", mode, prec, attention, grid=False,
                        layout=layout, tm=tm)
        total = total + step["latency_s"].sum(axis=-1)
    end = evaluate(model, hw, B, P + max(int(generate) - 1, 0), "decode", mode, prec, attention, grid=False,
                   layout=layout, tm=tm)
    latency = pre["latency_s"] + total
    out = dict(end)
    out.update(phase="request", context=P, prompt=P, generate=float(generate), latency_s=latency,
               ttft_s=pre["latency_s"], decode_s=total,
               throughput_tok_s=B * generate * (layout or Layout()).replicas / latency,
               memory_bytes=np.maximum(end["memory_bytes"], pre["memory_bytes"]))
    out["fits"] = out["memory_bytes"] <= hw.memory_capacity
    out["bound"] = np.where(pre["latency_s"] > total, pre["bound"], end["bound"])
    out["intensity"] = (pre["flops"] + end["flops"] * generate) / (pre["bytes"] + end["bytes"] * generate)
    return out


def per_sequence(model: Model, context, prec: Precision | None = None, phase: str = "decode",
                 layout: Layout | None = None) -> dict:
    """Weights, and the per-sequence KV and activation bytes at each context (memory is linear in B),
    on one device of the layout (its largest pipeline stage; a device holds B/ep of the sequences)."""
    prec = prec or Precision()
    lay = layout or Layout()
    S = np.asarray(context, dtype=np.float64)
    ep = float(lay.ep)  # build with ep sequences so that one lands on this device
    ops = build_ops(model, ep, 1.0 if phase == "decode" else S, S, phase, prec, layout=lay, stage=True)
    mem = memory(ops, model, 1.0, S, prec)
    zero = memory(build_ops(model, ep, 1.0, 0.0 * S, "decode", prec, layout=lay, stage=True), model, 1.0, 0.0 * S, prec)
    return {"weight_bytes": mem["weight_bytes"], "kv_bytes_per_seq": mem["kv_bytes_per_seq"],
            "activation_bytes_per_seq": mem["activation_bytes"],
            "fixed_state_bytes_per_seq": zero["kv_bytes_per_seq"]}


def max_batch(model: Model, capacity: float, context, prec: Precision | None = None, overhead: float = 0.0,
              phase: str = "decode", layout: Layout | None = None):
    """Largest B (per replica) whose memory fits on every device of the layout: weights + overhead + the
    busiest device's ceil(B/ep) sequences of KV + the step's peak activations <= capacity (0 if none).

    The linear estimate floor(free / (KV + activations per sequence)) x ep is refined on the op list's own
    memory (as decode reports it) over the candidates around it, so that max_batch fits and max_batch + 1
    does not: with ep the busiest device's KV grows in steps of ep sequences while the activations of the
    routed tokens grow with every one."""
    lay = layout or Layout()
    prec = prec or Precision()
    S = np.asarray(context, dtype=np.float64).ravel()  # any shape of contexts, evaluated flat
    ps = per_sequence(model, S, prec, phase, lay)
    free = capacity - overhead - ps["weight_bytes"]
    est = np.maximum(np.floor(free / (ps["kv_bytes_per_seq"] + ps["activation_bytes_per_seq"])), 0.0) * lay.ep
    ep = lay.ep
    cand = np.maximum(est[None, :] + np.arange(-ep, 2 * ep + 1, dtype=np.float64)[:, None], 1.0)  # (candidates, S)
    T = 1.0 if phase == "decode" else S[None, :]
    ops = build_ops(model, cand, T, S[None, :], phase, prec, layout=lay, stage=True)
    keys = _keys_for(model, phase, prec, "fused", True, ops, lay, True)
    mem = memory(ops, model, np.ceil(cand / ep), S[None, :], prec, keys)["memory_bytes"] + 0 * cand
    fits = mem + overhead <= capacity
    out = np.max(np.where(fits, cand, 0.0), axis=0)  # memory grows with B: the largest candidate that fits
    return out.reshape(np.shape(context)) if np.ndim(context) else float(out[0])


def kv_growth_per_token(model: Model, prec: Precision | None = None, layout: Layout | None = None) -> float:
    """KV bytes one more token adds while the context is below every window: 2*K*H*L_kv*bytes
    (on the device that holds it, for a layout)."""
    ps = per_sequence(model, np.array([0.0, 1.0]), prec, layout=layout)
    return float(ps["kv_bytes_per_seq"][1] - ps["kv_bytes_per_seq"][0])


def _is_attention(op: Op) -> bool:
    """Ops that run per sequence over its own context (no weights): scores, softmax, weighted sum, state, and the
    DSA indexer's top-k over each query's logits (T_i x keys_i: summed per sequence, not n x mean T x mean S)."""
    return op.kind == ATTENTION or op.name in ("attn_softmax", "indexer_topk")


def _lpt(w, ep: int):
    """Greedy longest-first assignment of the loads w to ep groups, each to the least loaded (the lowest group among
    equals): (each one's group, the groups' loads)."""
    import heapq

    heap = [(0.0, k) for k in range(ep)]  # mutation: equivalent - equal start loads, only their order counts
    owner = np.empty(w.size, dtype=int)
    for i in np.argsort(-w, kind="stable").tolist():
        load, k = heap[0]
        owner[i] = k
        heapq.heapreplace(heap, (load + float(w[i]), k))
    loads = np.zeros(ep)
    for load, k in heap:
        loads[k] = load
    return owner, loads


def _busiest_group(T, S, ep: int) -> np.ndarray:
    """Sequences of the busiest of ep attention groups (each runs whole sequences of its own): greedy
    longest-first assignment of the sequences to the least-loaded group by tokens attended."""
    if ep <= 1 or T.size <= 1:  # mutation: equivalent - a shortcut: the loop below gives all to group 0, the argmax
        return np.ones(T.size, dtype=bool)
    owner, loads = _lpt(T * S, ep)
    return owner == int(np.argmax(loads))


def busiest_rank(T, S, ep: int):
    """(tokens, chunks) of the busiest of ep attention-DP ranks, which run whole sequences each (a prompt chunk
    is computed on its own sequence's rank): greedy longest-first assignment by new tokens (LPT over the prompt
    chunks; the unit rows of decoding sequences go one at a time to the least-loaded rank, a water-fill).
    tokens: that rank's new tokens, the rows of its ops with weights (a 7,373-token prompt beside 3 decodes on 4
    ranks is 7,373 rows there, not 7,376 / 4); None where build_ops' own ceil(n / ep) x T is exact (ep = 1 or
    every T equal). chunks: its prompt chunks' (T_i, S_i), whose cached context the ops with weights up-project
    (MLA's prefill up-projection; decode rows read the latent absorbed); None where every T is equal.
    Sources: SGLang DP attention dispatches whole requests to ranks (data_parallel_controller.py); TensorRT-LLM
    attention DP runs one executor per rank (silicon_plan.worker_budget's sources)."""
    T, S = (np.asarray(x, dtype=np.float64).ravel() for x in (T, S))
    if T.size == 0 or np.all(T == T[0]):
        return None, None
    big = np.flatnonzero(T != 1)
    if ep <= 1:
        return None, (T[big], S[big])
    owner, L = _lpt(T[big], ep)  # a few prompt chunks a step, longest first to the least-loaded rank
    u, Ls = float(np.count_nonzero(T == 1)), np.sort(L)
    h = 0.0  # the unit rows water-fill to the lowest level h with sum(h - L_k)^+ >= u
    for k in range(1, ep + 1):  # raise the k lowest ranks together until the next one or the rows run out
        if u > 0 and (Ls[k] if k < ep else np.inf) * k - Ls[:k].sum() >= u:  # mutation: equivalent - at equality k + 1 ranks give the same level
            h = np.ceil((u + Ls[:k].sum()) / k)
            break
    r = int(np.argmax(L))  # the busiest: the most prompt tokens (above h every rank was raised to h: the same one)
    mine = big[owner == r]
    return float(max(L[r], h)), (T[mine], S[mine])


def query_length(T) -> float:
    """The query length of one attention kernel over rows of T_i new tokens each: sum T_i^2 / sum T_i, the
    token-weighted mean (one row: its T; decode rows: 1). The measured kernel tables (perfmodel.kernels) are
    indexed by (batch, query length); a varlen batch of unequal chunks is priced at this length."""
    T = np.asarray(T, dtype=np.float64)
    return float(np.sum(T * T) / np.sum(T))


def mixed_step(model: Model, hw: Hardware, T_seq, S_seq, prec: Precision | None = None,
               attention: str = "fused", layout: Layout | None = None, mode: str = "roofline", impl=None,
               tm: TimeModel | None = None) -> dict:
    """One iteration of a continuous-batching server (Orca's selective batching).

    Sequence i brings T_seq[i] new tokens (1 when decoding, a prompt chunk when prefilling) and
    attends to S_seq[i] tokens of context. Ops with weights run once over all sum(T) tokens
    concatenated; attention runs per sequence at its own context, and one varlen kernel's FLOPs and
    bytes are the sums over sequences. Logits are computed for one row per sequence.
    """
    prec = prec or Precision()
    lay = layout or Layout()
    if lay.pp > 1:
        raise SpecError("--pp", None, "iteration-level scheduling is modelled for tp, ep and replicas, not pipelines")
    T = np.asarray(T_seq, dtype=np.float64).ravel()
    S = np.asarray(S_seq, dtype=np.float64).ravel()
    n, M = float(T.size), float(T.sum())
    phase = "decode" if np.all(T == 1) else "prefill"
    busy, chunks = busiest_rank(T, S, lay.ep)  # the busiest attention-DP rank's rows
    token_ops = [op for op in build_step_ops(model, n, M / n, float(S.mean()), phase, prec, attention, layout=lay,
                                             busiest=busy, chunks=chunks) if not _is_attention(op)]
    mine = _busiest_group(T, S, lay.ep)  # with ep > 1, the attention of the busiest device's sequences
    decode, chunk = (T == 1) & mine, (T != 1) & mine
    seq_ops = []
    for mask, ph in ((decode, "decode"), (chunk, "prefill")):
        if mask.any():
            for op in build_ops(model, 1.0, T[mask], S[mask], ph, prec, attention, layout=lay):
                if _is_attention(op):
                    if op.keys is not None:  # one kernel's key length: F / sum(f_i / k_i) keeps sum(f_i / e(k_i))
                        f_i, k_i = op.flops + 0 * T[mask], op.keys + 0 * T[mask]
                        op.keys = float(np.sum(f_i) / np.sum(f_i / k_i)) if np.sum(f_i) > 0 else float(np.max(k_i))
                    for f in ("flops", "kv_read", "act_read", "act_write", "kv_write"):
                        setattr(op, f, float(np.sum(getattr(op, f) + 0 * T[mask])))
                    op.w_read = float(np.max(op.w_read + 0 * T[mask]))  # weights (sink logits) read once per kernel
                    # query rows per streamed K/V head: T_i N/K is > 1 for every row of a mask or for none
                    # (T = 1 in decode, T > 1 in a chunk), so the packing term of the summed kernel is exact
                    op.rows = float(np.min(op.rows + 0 * T[mask]))
                    if op.attn is not None:  # the summed kernel's query length (measured tables price by it)
                        op.attn = op.attn[:3] + (query_length(T[mask]),)
                    seq_ops.append(op)
    rf = roofline(token_ops + seq_ops, hw, prec, layout=lay, tm=tm or time_model(mode, hw, impl))
    return {"latency_s": float(rf["time"]), "flops": float(rf["flops"]), "bytes": float(rf["bytes"]),
            "tokens": M, "sequences": n, "comm_time_s": float(rf["comm_time"])}
