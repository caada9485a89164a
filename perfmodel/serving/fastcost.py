"""The vectorized step cost of fastsim.run (issue 18). FastCost prices an iteration from the same op list as
engine.mixed_step, with the same decode-context rounding as StepCost (a decode row's context rounded up to a multiple of the cost quantum):
- the ops with weights depend on (rows n, tokens M, phase): they are built and priced for a whole vector
  of n (decode) or of M for one n (prefill) in one vectorized build_ops call and kept;
- a decode row's attention terms depend on its rounded context only: one table row per context, built
  vectorized, gathered and summed per iteration;
- a prompt chunk's attention terms (T new tokens at context S) are polynomials in T and S of degree two
  for full attention (causal pairs T(2S - T + 1)/2, keys S, activations T); their coefficients are read
  from the op list at probe points and checked at others, and a model whose terms are not (sliding
  windows, chunked attention) keeps MixedStep's exact per-row terms.
The attention terms are summed over the rows as mixed_step sums them (FLOPs and bytes added, weights
read once, one kernel's key length F / sum(f_i / k_i)) and priced by the same TimeModel. The result
equals StepCost's up to the order of floating-point additions (a test bounds the difference at 1e-9
relative over random compositions of every kind). Where an exact replay is not guaranteed (MixedStep's
`exact` cases: calibrated BLAS passes, pipelines), with expert parallelism (the busiest group's rows)
or when the ops with weights depend on the context (MLA's prefill up-projection), FastCost calls
StepCost itself: slower, never different.
"""
from __future__ import annotations

import copy
from collections import OrderedDict

import numpy as np

from .. import engine
from ..ops import build_ops
from .stepcost import FIELDS, StepCost, _Zeros

_KEYS = len(FIELDS)  # column of the key length within one op's block of columns


class FastCost:
    """Iteration time for rows (T_i, S_i) as numpy arrays; the same op list and pricing as StepCost."""

    def __init__(self, cost: StepCost, budget=None):
        self.base = cost
        self.q = cost.q
        st = cost.step
        self.model, self.hw, self.prec, self.lay, self.tm = st.model, st.hw, st.prec, st.lay, st.tm
        self.attention = st.attention
        self.mode = cost.mode
        self.calls = 0
        # decode-only iterations are priced here unless their ops with weights vary with the context; mixed ones
        # also need the prefill ops not to (MLA's prefill up-projection does: those go to StepCost)
        self.fast_decode = not (st.exact or st._depends("decode"))
        self.fast = self.fast_decode and self.lay.ep == 1 and not st._depends("prefill")
        self.mcap = int(budget) if budget else 4096  # prefill steps carry at most the budget (whole prompts: grown)
        self._dec_prefix = None  # (device, host, step) arrays over n = 0 .. len - 1
        self._pre_prefix: OrderedDict = OrderedDict()  # n // NBLOCK -> (device, host, step) over (n in it, M); LRU
        self._dec = None  # decode attention: (templates, table rows over the rounded context / q)
        self._affine = None  # decode table columns as c0 + c1 k (so a step's sums are n c0 + c1 sum k), or False
        self._dec_time: OrderedDict = OrderedDict()  # (n, sum k // BLOCK) -> (device, host, step) arrays; LRU
        self._poly = None  # prefill attention: (templates, coefficients) or False (exact rows)

    # -- the ops with weights, priced for a vector of sizes ------------------------------------
    def _prefix(self, n, M, phase):
        n = np.asarray(n, dtype=np.float64)
        M = np.asarray(M, dtype=np.float64)
        ops = [op for op in build_ops(self.model, n, M / n, 1.0, phase, self.prec, self.attention, layout=self.lay)
               if not engine._is_attention(op)]
        fold = engine.Fold(_Zeros())
        fold.add(ops, self.tm.price(ops, self.hw, self.prec, self.lay))
        shape = np.broadcast(n, M).shape
        dev = np.zeros(shape) + fold.sums[0].total()
        return dev, np.zeros(shape) + fold.host, np.zeros(shape) + fold.step

    def _decode_prefix(self, n: int):
        if self._dec_prefix is None or n >= len(self._dec_prefix[0]):
            size = max(2 * n, 512)
            k = np.arange(size, dtype=np.float64)
            k[0] = 1.0  # n = 0 never occurs
            self._dec_prefix = self._prefix(k, k, "decode")
        d, h, s = self._dec_prefix
        return d[n], h[n], s[n]

    NBLOCK = 32  # prefill steps' row counts priced at once, each over every token count up to the budget

    def _prefill_prefix(self, n: int, M: int):
        """(device, host, step) of the ops with weights of a prefill step of n rows and M tokens, from a table over
        a block of NBLOCK row counts x the token counts 0 .. max(budget, M) priced in one vectorized call; each
        entry is computed elementwise, so the table does not depend on which block or size asked first."""
        key = n // self.NBLOCK
        v = self._pre_prefix.get(key)
        if v is not None:
            self._pre_prefix.move_to_end(key)
        if v is None or M >= v[0].shape[1]:
            size = max(self.mcap + 1, 2 * M if v is not None else M + 1)
            ns = np.arange(key * self.NBLOCK, (key + 1) * self.NBLOCK, dtype=np.float64)[:, None]
            Ms = np.arange(size, dtype=np.float64)[None, :]
            Ms = np.maximum(Ms, ns + 1.0)  # M > n in a prefill step (placeholders below it)
            ns = np.maximum(ns, 1.0) + 0.0 * Ms  # n = 0 never occurs
            v = self._pre_prefix[key] = self._prefix(ns, Ms, "prefill")
            if len(self._pre_prefix) > self.MAX_PREFILL_BLOCKS:  # memory bounded on long runs; a block comes back
                self._pre_prefix.popitem(last=False)  # the same (element by element), so eviction changes nothing
        d, h, s = v
        r = n % self.NBLOCK
        return d[r, M], h[r, M], s[r, M]

    # -- attention terms ------------------------------------------------------------------------
    def _attn_ops(self, T, S, phase):
        return [op for op in build_ops(self.model, 1.0, T, S, phase, self.prec, self.attention, layout=self.lay)
                if engine._is_attention(op)]

    @staticmethod
    def _columns(ops, zero):
        cols = []
        for op in ops:
            cols += [getattr(op, f) + zero for f in FIELDS]
            cols.append(zero + np.nan if op.keys is None else op.keys + zero)
        return np.stack(cols, axis=1)

    def _decode_table(self, kmax: int):
        """Decode rows' attention terms by rounded context / q: per op FIELDS, key length and f / k (so that
        one reduction gives every sum), and whether each op's weights column is one constant."""
        if self._dec is None or kmax >= len(self._dec[1]):
            size = max(2 * kmax, 1024)
            S = np.arange(size, dtype=np.float64) * self.q
            S[0] = float(self.q)  # context 0 never occurs for a decode row
            ops = self._attn_ops(np.ones(size), S, "decode")
            V = self._columns(ops, 0 * S)
            w = _KEYS + 1
            with np.errstate(invalid="ignore", divide="ignore"):
                fk = V[:, 0::w] / V[:, _KEYS::w]
            table = np.concatenate([V, fk], axis=1)
            wcol = V[:, 1::w]
            const = [bool(np.all(wcol[:, i] == wcol[0, i])) for i in range(len(ops))]
            self._dec = ([copy.copy(op) for op in ops], table, const, [float(x) for x in wcol[0]])
            self._affine, self._dec_time = None, OrderedDict()  # checked again over the longer table
        return self._dec

    # -- decode-only steps as a function of (rows, sum of rounded contexts) -------------------------
    BLOCK = 2048  # sums of k priced at once per row count: one vectorized pricing serves many steps
    MAX_DECODE_BLOCKS = 1024  # at most 48 MB of decode blocks (least recently used dropped)  # mutation: equivalent - a memory bound, a dropped block comes back the same
    MAX_PREFILL_BLOCKS = 8  # prefill prefix tables of 32 row counts x the budget's token counts  # mutation: equivalent - a memory bound, a dropped block comes back the same

    def _affine_cols(self):
        """Per column of the decode table (every op's FIELDS, key length and f / k): (c0, c1) with column = c0 +
        c1 k exactly at every row (full attention: FLOPs and cache bytes grow with the context, the rest is fixed),
        or False (windows, linear state, sink weights that vary, f / k not constant). Then a decode step's sums are
        n c0 + c1 sum(k) and its time depends on (n, sum k) alone."""
        if self._affine is None:
            ops, table, const, _ = self._dec
            k = np.arange(table.shape[0], dtype=np.float64)
            c0, c1 = table[1], table[2] - table[1]
            pred = (c0 - c1) + c1[None, :] * k[:, None]  # row 1 is k = 1 (row 0 is a placeholder for k = 1 too)
            nan = np.isnan(table[1:])
            with np.errstate(invalid="ignore"):
                close = np.abs(pred[1:] - table[1:]) <= 1e-12 * np.maximum(np.abs(table[1:]), 1e-300)
            # a column of NaN is the key length of an op without one (never read)
            good = all(const) and bool(np.all(np.where(nan.all(axis=0)[None, :], nan, close)))
            self._affine = (c0 - c1, c1) if good else False
        return self._affine

    def _decode_attn(self, n: int, ks: int) -> tuple:
        """(device, host, step) time of the decode attention ops of n decode rows whose rounded contexts sum to ks,
        from a per-n block of ks priced in one vectorized call (the same ops and TimeModel as _fill_decode's; the
        sums are formed as n c0 + c1 ks instead of row by row, which moves the result by float rounding only)."""
        key = (n, ks // self.BLOCK)
        v = self._dec_time.get(key)
        if v is not None:
            self._dec_time.move_to_end(key)
        else:
            lo = key[1] * self.BLOCK
            K = np.maximum(np.arange(lo, lo + self.BLOCK, dtype=np.float64), 1.0)  # sum k >= n >= 1 (0: unused)
            c0, c1 = self._affine
            sums = n * c0[None, :] + K[:, None] * c1[None, :]
            ops, _, _, w0 = self._dec
            w = _KEYS + 1
            nops = len(ops)
            filled = [copy.copy(op) for op in ops]
            for i, op in enumerate(filled):
                b = i * w
                if op.keys is not None:
                    op.keys = sums[:, b] / sums[:, nops * w + i]
                op.flops, op.kv_read, op.act_read, op.act_write, op.kv_write = (
                    sums[:, b], sums[:, b + 2], sums[:, b + 3], sums[:, b + 4], sums[:, b + 5])
                op.w_read = w0[i]
            dev, host, stp = np.zeros(K.size), np.zeros(K.size), np.zeros(K.size)
            for op, (tc, tmem, t, b, t_cpu, t_step) in zip(filled, self.tm.price(filled, self.hw, self.prec, self.lay)):
                c = op.count
                dev = dev + np.asarray(t, dtype=np.float64) * c
                host = host + np.asarray(t_cpu, dtype=np.float64) * c
                stp = stp + np.asarray(t_step, dtype=np.float64) * c
            v = self._dec_time[key] = (dev, host, stp)
            if len(self._dec_time) > self.MAX_DECODE_BLOCKS:  # 48 kB a block: a long closed loop visits thousands
                self._dec_time.popitem(last=False)
        i = ks % self.BLOCK
        return float(v[0][i]), float(v[1][i]), float(v[2][i])

    def _decode_time(self, n: int, ks: int) -> float:
        """A decode-only step of n rows whose rounded contexts sum to ks: the ops with weights plus _decode_attn."""
        d0, h0, s0 = self._decode_prefix(n)
        d, h, st = self._decode_attn(n, ks)
        dev, host, step = float(d0) + d, float(h0) + h, float(s0) + st
        return dev if (host == 0.0 and step == 0.0) else max(dev, host) + step

    def decode_only(self, S: np.ndarray) -> float:
        """__call__(ones, S) for a decode-only step (every row brings one token), by the (n, sum k) table where
        it applies."""
        if self.fast_decode and self.lay.ep == 1:
            k = -(-S // self.q)
            kmax = int(k.max())
            if self._dec is not None and kmax < len(self._dec[1]) and self._affine_cols() is not False:
                self.calls += 1
                return self._decode_time(int(S.size), int(k.sum()))
        return self(np.ones(S.size, dtype=np.int64), S)

    def _fill_decode(self, k) -> list:
        ops, table, const, w0 = self._dec
        V = table[k]
        sums = np.add.reduce(V, axis=0).tolist()
        w = _KEYS + 1
        nops = len(ops)
        for i in range(nops):
            op, b = ops[i], i * w
            sf = sums[b]
            if op.keys is not None:
                op.keys = sf / sums[nops * w + i] if sf > 0 else float(np.maximum.reduce(V[:, b + _KEYS]))
            op.flops, op.kv_read, op.act_read, op.act_write, op.kv_write = (
                sf, sums[b + 2], sums[b + 3], sums[b + 4], sums[b + 5])
            op.w_read = w0[i] if const[i] else float(np.maximum.reduce(V[:, b + 1]))
        return ops

    def _prefill_poly(self, smax: float):
        """Coefficients of every prefill attention term on (1, T, S, TS, T^2), checked at other points; False
        when the terms are not such polynomials up to smax (windows, chunks): then exact rows are used."""
        if self._poly is not None and (self._poly is False or smax <= self._poly[2]):
            return self._poly
        # probe points fixed by the model and the budget, not by the contexts met so far: the coefficients are the
        # same whatever ran before (a search split over processes gives the serial answer bit for bit)
        top = max(float(self.model.max_context), 16384.0, float(self.mcap))
        while top < smax:
            top *= 2.0
        rng = np.random.default_rng(12345)
        S = np.concatenate([[2.0, 3.0, 7.0, 64.0, 1000.0, top], np.round(rng.uniform(2.0, top, 26))])
        T = np.concatenate([[2.0, 3.0, 2.0, 64.0, 999.0, 2.0],
                            np.round(2.0 + rng.uniform(0.0, 1.0, 26) * (np.minimum(S[6:], top) - 2.0))])
        ops = self._attn_ops(T, S, "prefill")
        V = self._columns(ops, 0 * S)
        X = np.stack([np.ones_like(T), T, S, T * S, T * T], axis=1)
        fit, check = slice(0, 16), slice(16, None)
        ok = np.all(np.isfinite(V) | np.isnan(V))
        coef = np.zeros((X.shape[1], V.shape[1]))
        for j in range(V.shape[1]):
            v = V[:, j]
            if np.all(np.isnan(v)):
                coef[:, j] = np.nan
                continue
            c, *_ = np.linalg.lstsq(X[fit], v[fit], rcond=None)
            pred = X[check] @ c
            scale = max(float(np.max(np.abs(v))), 1e-300)
            if not np.all(np.abs(pred - v[check]) <= 1e-9 * scale):
                ok = False
                break
            coef[:, j] = c
        self._poly = ([copy.copy(op) for op in ops], coef, top) if ok else False
        return self._poly

    @staticmethod
    def _fill(ops, V, T=None) -> None:
        """Refill template ops with the rows' terms summed as mixed_step sums them (V: rows x columns, one
        block of FIELDS + key length per op): FLOPs and bytes added, weights (sink logits) read once per
        kernel, the kernel's key length F / sum(f_i / k_i) (which keeps sum(f_i / e(k_i)))."""
        w = _KEYS + 1
        m = len(ops)
        sums = np.add.reduce(V, axis=0).tolist()
        wmax = np.maximum.reduce(V[:, 1::w], axis=0).tolist()
        kcol = V[:, _KEYS::w]
        fk = np.add.reduce(V[:, 0::w] / kcol, axis=0).tolist()
        kmax = np.maximum.reduce(kcol, axis=0).tolist()
        for i in range(m):
            op, b = ops[i], i * w
            if op.keys is not None:
                sf = sums[b]
                op.keys = sf / fk[i] if sf > 0 else kmax[i]
            op.flops, op.kv_read, op.act_read, op.act_write, op.kv_write = (
                sums[b], sums[b + 2], sums[b + 3], sums[b + 4], sums[b + 5])
            op.w_read = wmax[i]
            if T is not None and op.attn is not None:  # the kernel's query length (the templates' are probes')
                op.attn = op.attn[:3] + (engine.query_length(T),)

    @staticmethod
    def _fill_one(ops, row: list, T: float) -> None:
        """_fill for one row's terms (a list): the same values, without the reductions over rows."""
        w = _KEYS + 1
        for i in range(len(ops)):
            op, b = ops[i], i * w
            sf, k = row[b], row[b + _KEYS]
            if op.keys is not None:
                op.keys = sf / (sf / k) if sf > 0 else k
            op.flops, op.kv_read, op.act_read, op.act_write, op.kv_write = (
                sf, row[b + 2], row[b + 3], row[b + 4], row[b + 5])
            op.w_read = row[b + 1]
            if op.attn is not None:
                op.attn = op.attn[:3] + (T,)

    # -- attention data parallel: the busiest of ep groups --------------------------------------------
    GREEDY_ROWS = 256  # up to this many decode rows, MixedStep's greedy longest-first assignment itself

    def _busiest(self, k: np.ndarray) -> np.ndarray:
        """Rows of the busiest attention group for decode rows at rounded contexts k (ascending): engine's greedy
        longest-first assignment up to GREEDY_ROWS rows (equal to MixedStep's); above, the rows at ranks 0, ep,
        2 ep, ... of the descending order, the group that deals the largest row of every round of ep. Both
        groups hold between total / ep and total / ep + one row of attention work (greedy: the classic
        longest-processing-time bound; by rank: each round gives group 0 at most one row more than any other),
        so the two differ by at most one row's attention among the n / ep of the group, and by rank the rows
        stay the same while every context grows by one (decode_steps prices such runs at once). Python's greedy
        loop over thousands of rows a step is what this avoids (tests/test_closed_loop.py bounds the gap)."""
        if k.size <= self.GREEDY_ROWS:
            return engine._busiest_group(np.ones(k.size), k * float(self.q), self.lay.ep)
        mask = np.zeros(k.size, dtype=bool)
        mask[k.size - 1::-self.lay.ep] = True  # k ascending: the largest is last
        return mask

    # -- a run of decode-only iterations ------------------------------------------------------------
    def decode_steps(self, S0: np.ndarray, k: int):
        """The times of k decode-only iterations of the same rows, row i at context S0_i + j in iteration j
        (what k calls self(ones, S0 + j) return, each row's terms summed in another order), or None where
        that is not exact: ops with weights that vary by row, or an iteration with no attention FLOPs.
        Row i's table index ceil((S0_i + j) / q) steps up every q iterations, so iteration j's sums are
        counts of rows per index times the table: one matrix product and one vectorized pricing for all k. With
        attention data parallel over at most GREEDY_ROWS rows, each iteration's busiest group is MixedStep's greedy
        one of that iteration's rounded contexts (found again only when they change)."""
        if not self.fast_decode or k < 1:
            return None
        m = int(S0.size)
        dev0, host0, step0 = (float(x) for x in self._decode_prefix(m))
        greedy = self.lay.ep > 1 and m <= self.GREEDY_ROWS
        if self.lay.ep > 1 and not greedy:  # the busiest group by rank (below): the same rows while contexts grow
            S0 = np.sort(S0)[self._busiest(np.sort(-(-S0 // self.q)))]
        lo = int(-(-int(S0.min()) // self.q))
        hi = int(-(-(int(S0.max()) + k - 1) // self.q))
        if self._dec is None or hi >= len(self._dec[1]):
            self._decode_table(hi)
        ops, table, const, w0 = self._dec
        if not all(const):
            return None
        K = hi - lo + 1
        sums = np.empty((k, table.shape[1]))
        if greedy:  # MixedStep's greedy groups may change when a row's rounded context steps up: per iteration
            # the busiest group of its rounded contexts (as __call__ takes it), all k iterations' at once
            kj = -(-(np.sort(S0)[None, :] + np.arange(k)[:, None]) // self.q)
            C = np.bincount((np.arange(k)[:, None] * K + kj - lo)[_busiest_groups(kj * float(self.q), self.lay.ep)],
                            minlength=k * K).reshape(k, K).astype(np.float64)
            sums[:] = C @ table[lo:hi + 1]
        step = max(1, 4_000_000 // max(m, K))  # iterations per block: a few MB of counts at most
        j0 = k if greedy else 0
        while j0 < k:
            j = np.arange(j0, min(k, j0 + step), dtype=np.int64)
            idx = -(-(S0[None, :] + j[:, None]) // self.q) - lo
            flat = (np.arange(j.size, dtype=np.int64)[:, None] * K + idx).ravel()
            C = np.bincount(flat, minlength=j.size * K).reshape(j.size, K).astype(np.float64)
            sums[j0:j0 + j.size] = C @ table[lo:hi + 1]
            j0 += j.size
        w = _KEYS + 1
        nops = len(ops)
        filled = [copy.copy(op) for op in ops]
        for i, op in enumerate(filled):
            b = i * w
            sf = sums[:, b]
            if op.keys is not None:
                if not np.all(sf > 0):
                    return None
                op.keys = sf / sums[:, nops * w + i]
            op.flops, op.kv_read, op.act_read, op.act_write, op.kv_write = (
                sf, sums[:, b + 2], sums[:, b + 3], sums[:, b + 4], sums[:, b + 5])
            op.w_read = w0[i]
        dev, host, stp = np.full(k, dev0), np.full(k, host0), np.full(k, step0)
        for op, (tc, tmem, t, b, t_cpu, t_step) in zip(filled, self.tm.price(filled, self.hw, self.prec, self.lay)):
            c = op.count
            dev = dev + np.asarray(t, dtype=np.float64) * c
            host = host + np.asarray(t_cpu, dtype=np.float64) * c
            stp = stp + np.asarray(t_step, dtype=np.float64) * c
        self.calls += k
        return np.where((host == 0.0) & (stp == 0.0), dev, np.maximum(dev, host) + stp)

    # -- one iteration ------------------------------------------------------------------------------
    def __call__(self, T: np.ndarray, S: np.ndarray) -> float:
        self.calls += 1
        n = int(T.size)
        dec = T == 1
        nd = int(np.count_nonzero(dec))
        if not (self.fast or (self.fast_decode and nd == n)):
            return self.base(list(zip(T.tolist(), S.tolist())))
        if nd == n:
            dev, host, step = self._decode_prefix(n)
        else:
            dev, host, step = self._prefill_prefix(n, int(T.sum()))
        ops = []
        if nd and self.lay.ep > 1:  # attention runs on the busiest of ep groups (MixedStep: its rounded contexts)
            k = np.sort(-(-S // self.q))
            k = k[self._busiest(k)]
            kmax = int(k.max())
            if self._dec is None or kmax >= len(self._dec[1]):
                self._decode_table(kmax)
            ops = self._fill_decode(k)
        elif nd:
            k = -(-(S[dec] if nd < n else S) // self.q)
            kmax = int(k.max())
            if self._dec is None or kmax >= len(self._dec[1]):
                self._decode_table(kmax)
            if self._affine_cols() is not False:  # (rows, sum k) say the decode attention's time
                if nd == n:
                    return self._decode_time(n, int(k.sum()))
                d, h, st = self._decode_attn(nd, int(k.sum()))
                dev, host, step = dev + d, host + h, step + st
            else:
                ops = self._fill_decode(k)
        if nd < n:
            Tp, Sp = T[~dec].astype(np.float64), S[~dec].astype(np.float64)
            poly = self._prefill_poly(float(Sp.max()))
            if poly is False:
                pre = self.base.step._attention("prefill", Tp, Sp)
                if pre is None:  # the op list's structure changed with the sizes: the exact step
                    return self.base(list(zip(T.tolist(), S.tolist())))
            elif Tp.size == 1:  # one prompt chunk (the usual mixed step): its terms are one row of the polynomial
                pre, coef = poly[0], poly[1]
                t1, s1 = float(Tp[0]), float(Sp[0])
                self._fill_one(pre, (np.array([1.0, t1, s1, t1 * s1, t1 * t1]) @ coef).tolist(), t1)
            else:
                pre, coef = poly[0], poly[1]
                self._fill(pre, np.stack([np.ones_like(Tp), Tp, Sp, Tp * Sp, Tp * Tp], axis=1) @ coef, Tp)
            ops = ops + pre
        dev, host, step = float(dev), float(host), float(step)
        for op, (tc, tmem, t, b, t_cpu, t_step) in zip(ops, self.tm.price(ops, self.hw, self.prec, self.lay)):
            c = op.count
            dev += float(t) * c
            host += float(t_cpu) * c
            step += float(t_step) * c
        return dev if (host == 0.0 and step == 0.0) else max(dev, host) + step


class ExactCost:
    """StepCost behind FastSim's array interface: the step times of scheduler.simulate, bit for bit."""

    def __init__(self, cost: StepCost):
        self.base, self.mode = cost, cost.mode
        self.calls = 0

    def __call__(self, T, S) -> float:
        self.calls += 1
        return self.base(list(zip(T.tolist(), S.tolist())))


def _busiest_groups(W: np.ndarray, ep: int) -> np.ndarray:
    """engine._busiest_group for many iterations at once: W (k, m), iteration j's rows' attention loads (T = 1 each);
    the mask (k, m) of each iteration's busiest group. Greedy longest-first, as engine._lpt: the rows in
    descending load (stable: the lower row first among equals), each to the least-loaded group (the lowest among
    equals), the busiest the first of the largest loads; each group's load is summed in the same order, so the
    groups are engine's to the bit. One pass over the m rows, vectorized over the k iterations."""
    k, m = W.shape
    if ep <= 1 or m <= 1:
        return np.ones((k, m), dtype=bool)
    order = np.argsort(-W, axis=1, kind="stable")
    w = np.take_along_axis(W, order, axis=1)
    loads = np.zeros((k, ep))
    owner = np.empty((k, m), dtype=np.int64)
    j = np.arange(k)
    for i in range(m):
        g = np.argmin(loads, axis=1)  # the first of the least loaded: the heap's (load, group) order
        owner[j, order[:, i]] = g
        loads[j, g] += w[:, i]
    return owner == np.argmax(loads, axis=1)[:, None]
