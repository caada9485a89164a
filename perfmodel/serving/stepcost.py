"""The simulator's step cost: engine.mixed_step's answer for a batch composition, computed incrementally.

engine.mixed_step builds one iteration's op list from scratch: the ops with weights over all M tokens
of the n sequences, then each sequence's attention ops at its own (T_i, S_i), summed into one varlen
kernel, and prices it (engine.roofline). In a serving run almost every iteration's composition is new
(contexts grow by one token a step), but its parts are not:
- the ops with weights depend on (n, M, phase) only (and on the busiest attention-DP rank's rows, and for
  MLA's prefill up-projection on its prompt chunks' contexts), so that prefix of the op list is built, priced and
  folded once per key;
- a sequence's attention terms depend on its own (phase, T_i, S_i) only, so they are built once per row,
  in one vectorized build_ops call for all rows not seen yet, and kept as a row of numbers.
Each iteration then gathers its rows, sums each field with the same numpy reduction over the same row
order as mixed_step, prices the few attention ops and continues the folded prefix (engine.Fold). The
result is mixed_step's bit for bit (tests/test_serving.py checks it over every model kind), at a
fraction of the cost: the op list is still the one source of truth, priced op by op.

Where an exact replay is not guaranteed (calibrated hardware whose BLAS packs operands: the pricing
then reads a per-row `rows` field; pipelines), the exact engine.mixed_step is called instead.
"""
from __future__ import annotations

import copy

import numpy as np

from .. import engine
from ..ops import Layout, Precision, build_step_ops
from ..specs import Hardware, Model, load_impl
from ..timemodel import DEFAULT_IMPL
from .traffic import _whole

FIELDS = ("flops", "w_read", "kv_read", "act_read", "act_write", "kv_write")  # summed over the sequences (w_read: max)


MAX_HELD_ROWS = 2_000_000  # (T, S) rows the step memo's keys may hold, about 150 MB; then it starts again  # mutation: equivalent - a memory bound, an emptied memo prices the same


class StepCost:
    """Iteration time from engine.mixed_step, cached on the (quantized) batch composition."""

    def __init__(self, model: Model, hw: Hardware, prec: Precision, quantum: int = 16, layout=None,
                 mode: str = "roofline", impl=None):
        self.model, self.hw, self.prec, self.q = model, hw, prec, _whole(quantum, "--cost-quantum")
        self.layout, self.mode = layout, mode
        self.tm = engine.time_model(mode, hw, impl)  # the roofline's ideal bound or the achievable estimate
        # the engine forms step k + 1 while step k runs (its profile's overlap_schedule; fastsim.run's ahead)
        self.ahead = mode == "achievable" and load_impl(impl or DEFAULT_IMPL).overlap_schedule
        self.cache: dict = {}
        self.held = 0  # rows held by the memo's keys
        self.calls = 0
        self.step = MixedStep(model, hw, prec, layout, self.tm)

    def _keep(self, key, t: float) -> float:
        """Memoize one composition; the memo is emptied when its keys hold more than MAX_HELD_ROWS rows (a long
        run of many compositions grew it to gigabytes: the serving validation's workers reached 7-8 GB)."""
        self.held += len(key)
        if self.held > MAX_HELD_ROWS:  # mutation: equivalent - a memory bound: an emptied memo prices the same
            self.cache.clear()
            self.held = len(key)
        self.cache[key] = t
        self.calls += 1
        return t

    def __call__(self, rows) -> float:
        """rows: (T_i, S_i) of every sequence in the iteration."""
        q = self.q
        key = tuple(sorted((T, -(-S // q) * q if T == 1 else S) for T, S in rows))
        t = self.cache.get(key)
        if t is None:
            t = self._keep(key, self.step(key))
        return t

    def same(self, T: int, S: int, n: int) -> float:
        """self([(T, S)] * n) without sorting n equal rows (a static batch's steps)."""
        q = self.q
        key = ((T, -(-S // q) * q if T == 1 else S),) * n
        t = self.cache.get(key)
        if t is None:
            t = self._keep(key, self.step(key))
        return t


class MixedStep:
    """engine.mixed_step(...)["latency_s"] for a sorted composition ((T_i, S_i), ...), incrementally."""

    def __init__(self, model: Model, hw: Hardware, prec: Precision, layout=None, tm=None, attention: str = "fused"):
        self.model, self.hw, self.prec, self.attention = model, hw, prec, attention
        self.lay = layout or Layout()
        self.tm = tm
        # a BLAS that packs operands prices ops by their per-row `rows`: replay exactly via mixed_step there
        self.exact = bool((hw.gemm_weight_passes or 1.0) != 1.0 or (hw.attention_kv_passes or 1.0) != 1.0
                          or self.lay.pp > 1)
        self.prefix: dict = {}  # (n, M, phase[, contexts], busiest tokens) -> folded ops with weights
        self.rows: dict = {"decode": {}, "prefill": {}}  # (T, S) -> attention terms of one sequence
        self.templates: dict = {}  # phase -> (its attention ops, their names): refilled for every step
        self.tables: dict = {}  # phase -> rows x (ops x (FIELDS + keys)): one sequence's terms a row
        self.s_dependent: dict = {}  # phase -> do the ops with weights depend on the context?

    def _ops(self, B, T, S, phase, busiest=None, chunks=None):
        return build_step_ops(self.model, B, T, S, phase, self.prec, self.attention, layout=self.lay, busiest=busiest,
                              chunks=chunks)

    def _depends(self, phase: str) -> bool:
        """Whether the ops with weights change with the context (MLA's prefill up-projection does)."""
        if phase not in self.s_dependent:
            a, b = ([op for op in self._ops(2.0, 3.0, s, phase) if not engine._is_attention(op)] for s in (64.0, 4096.0))
            same = len(a) == len(b) and all(
                x.name == y.name and all(np.array_equal(getattr(x, f), getattr(y, f)) for f in FIELDS + ("keys", "rows"))
                and x.gemm == y.gemm for x, y in zip(a, b))
            self.s_dependent[phase] = not same
        return self.s_dependent[phase]

    def __call__(self, key) -> float:
        a = np.array(key, dtype=np.float64)
        T, S = a[:, 0], a[:, 1]
        if self.exact:
            return engine.mixed_step(self.model, self.hw, T, S, self.prec, self.attention, self.lay,
                                     tm=self.tm)["latency_s"]
        n, M = float(T.size), float(T.sum())
        phase = "decode" if np.all(T == 1) else "prefill"
        busy, chunks = engine.busiest_rank(T, S, self.lay.ep)  # the busiest attention-DP rank's rows
        ctx = (float(S.mean()), None if chunks is None else (chunks[0].tobytes(), chunks[1].tobytes()))
        pk = (n, M, phase, ctx if self._depends(phase) else None, busy)
        fold = self.prefix.get(pk)
        if fold is None:
            token_ops = [op for op in self._ops(n, M / n, float(S.mean()), phase, busy, chunks)
                         if not engine._is_attention(op)]
            fold = self.prefix[pk] = engine.Fold(_Zeros())
            fold.add(token_ops, self.tm.price(token_ops, self.hw, self.prec, self.lay))
        mine = engine._busiest_group(T, S, self.lay.ep)
        seq_ops = []
        for mask, ph in (((T == 1) & mine, "decode"), ((T != 1) & mine, "prefill")):
            if mask.any():
                ops = self._attention(ph, T[mask], S[mask])
                if ops is None:  # the op list's structure changed with the sizes: no replay
                    return engine.mixed_step(self.model, self.hw, T, S, self.prec, self.attention, self.lay,
                                             tm=self.tm)["latency_s"]
                seq_ops += ops
        fold = fold.copy()
        fold.add(seq_ops, self.tm.price(seq_ops, self.hw, self.prec, self.lay))
        return float(fold.result()["time"])

    def _attention(self, ph: str, T, S):
        """This phase's attention ops over the rows (T_i, S_i), their fields summed as mixed_step sums them."""
        index = self.rows[ph]
        keys = list(zip(T.tolist(), S.tolist()))
        missing = [k for k in dict.fromkeys(keys) if k not in index]
        if missing and not self._build(ph, missing):
            return None
        ops, width = self.templates[ph][0], len(FIELDS) + 1
        table = self.tables[ph]
        V = np.ascontiguousarray(table[[index[k] for k in keys]].T)  # (ops x fields, rows): each row contiguous
        sums = np.add.reduce(V, axis=-1)  # np.sum's reduction, without its dispatch
        for i, op in enumerate(ops):  # the phase's own op objects, refilled (price reads them at once)
            base = i * width
            if op.keys is not None:  # one kernel's key length: F / sum(f_i / k_i) keeps sum(f_i / e(k_i))
                f_i, k_i = V[base], V[base + len(FIELDS)]
                sf = np.add.reduce(f_i)
                op.keys = float(sf / np.add.reduce(f_i / k_i)) if sf > 0 else float(np.maximum.reduce(k_i))
            op.flops, op.w_read, op.kv_read, op.act_read, op.act_write, op.kv_write = (
                float(x) for x in sums[base:base + len(FIELDS)])
            op.w_read = float(np.maximum.reduce(V[base + 1]))  # weights (sink logits) are read once per kernel
            if op.attn is not None:  # the template's query length is its first build's: this step's instead
                op.attn = op.attn[:3] + (engine.query_length(T),)
        return ops

    def _build(self, ph: str, missing: list) -> bool:
        """One vectorized build_ops over the rows not seen yet; their terms become rows of the phase's table."""
        mt, ms = (np.array(x, dtype=np.float64) for x in zip(*missing))
        built = [op for op in self._ops(1.0, mt, ms, ph) if engine._is_attention(op)]
        names = [op.name for op in built]
        if ph not in self.templates:
            self.templates[ph] = ([copy.copy(op) for op in built], names)
            self.tables[ph] = np.empty((0, len(built) * (len(FIELDS) + 1)))
        elif names != self.templates[ph][1]:
            return False
        zero = 0 * mt
        cols = []
        for op in built:
            cols += [getattr(op, f) + zero for f in FIELDS]
            cols.append(zero + np.nan if op.keys is None else op.keys + zero)
        index, start = self.rows[ph], len(self.rows[ph])
        table = self.tables[ph]
        if start + len(missing) > len(table):  # room doubles: appending stays linear in the rows
            grown = np.empty((max(2 * len(table), start + len(missing), 64), table.shape[1]))
            grown[:start] = table[:start]
            self.tables[ph] = table = grown
        table[start:start + len(missing)] = np.stack(cols, axis=1)
        for j, k in enumerate(missing):
            index[k] = start + j
        return True


class _Zeros:
    """The keys of a fold with one group: every term adds to group 0, in list order (as mixed_step's)."""

    def __getitem__(self, i) -> int:
        return 0
