"""fastsim's FastCost only chooses how to price an iteration; it never changes the price. Each of its entry points (a
mixed step, a decode-only step, a run of decode steps) is the op list priced row by row (StepCost) to 1e-9, for
every attention kind of the catalog, for time models whose host or per-step costs are not zero (a host-bound eager
profile, the engines' step overheads, measured kernels), for expert and attention data parallelism, for contexts
past the model's window and the fit's first range, for several prompt chunks in one step and for budgets other than
the default. Each case builds its own FastCost, so the tables it grows are grown by these steps."""
import math

import numpy as np
import pytest

from perfmodel import load_hardware, load_model
from perfmodel.ops import Layout, Precision
from perfmodel.serving import StepCost, fastsim
from perfmodel.specs import load_impl

# eager with a per-step cost (no catalog profile has one: their schedulers overlap it): on llama-3.2-1b the host
# (3.0 ms of launches a step) outlasts the device (1.9 ms), so max(device, host) + step reads every term
STEPPED = load_impl("eager", {"impl.step_overhead": "0.5 ms"})
# calibrated hardware whose BLAS packs the weights of a multi-row product: a step's time is not a sum of rows, so
# every step goes to the exact engine.mixed_step
PACKED = load_hardware("h100-sxm").replace(gemm_weight_passes=3.0)
CASES = [  # model, hardware, layout, mode, implementation profile, token budget
    ("llama-3.2-1b", "h100-sxm", Layout(), "achievable", STEPPED, 1024),
    ("llama-3.1-8b", "h100-sxm", Layout(), "achievable", "eager", None),  # host-bound: t_cpu > t_gpu at small B
    ("llama-3.1-8b", "h100-sxm", Layout(), "achievable", "vllm-0.24", 512),  # per-step and per-sequence costs
    ("llama-3.1-70b", "h200", Layout(4, 1, 1, 1), "achievable", "trtllm-1.3", 8192),
    ("llama-2-13b", "a100-80gb-sxm", Layout(), "roofline", None, 1024),  # MHA; 4,096-token window exceeded below
    ("llama-2-13b-mla", "h100-sxm", Layout(), "achievable", "sglang-0.5", None),  # MLA: prefill through StepCost
    ("llama-2-13b-cla2", "h100-sxm", Layout(), "achievable", "eager-fused", 2048),
    ("llama-2-13b-swa", "h100-sxm", Layout(), "roofline", None, 2048),  # windows: not affine in the context
    ("llama-2-13b-hybrid", "h100-sxm", Layout(), "achievable", "graphs", 2048),
    ("llama-2-13b-linear", "h100-sxm", Layout(), "achievable", "compiled", 2048),
    ("gpt-oss-20b", "h200", Layout(), "achievable", "vllm-0.24", 2048),  # sinks, windows, MoE
    ("qwen3-30b-a3b", "h200", Layout(1, 1, 4, 1), "achievable", "sglang-0.5", 2048),  # attention data parallel
    ("deepseek-v2-lite", "h100-sxm", Layout(2, 1, 2, 1), "achievable", "eager", 2048),  # MLA + tp + ep
    ("llama-3.2-1b", PACKED, Layout(), "roofline", None, 2048),
    ("llama-3.2-1b", "h100-sxm", Layout(), "achievable", "eager", 512),  # host-bound with no step cost
    ("qwen3-30b-a3b", "h100-sxm", Layout(1, 1, 2, 1), "roofline", None, 1024),  # attention DP without MLA
]
IDS = [f"{c[0]}-{'packed' if c[1] is PACKED else c[1]}-{c[3]}-{'eager+step' if c[4] is STEPPED else c[4]}-tp{c[2].tp}ep{c[2].ep}" for c in CASES]


def _pair(model, hw, lay, mode, impl, budget):
    m, h = load_model(model), (load_hardware(hw) if isinstance(hw, str) else hw)
    ref = StepCost(m, h, Precision(), 16, lay, mode, impl)
    return ref, fastsim.FastCost(StepCost(m, h, Precision(), 16, lay, mode, impl), budget)


def _rows(T, S):
    return list(zip(np.asarray(T).tolist(), np.asarray(S).tolist()))


def _same(ref, lay, got, want, S):
    """Equal to 1e-9; past 256 decode rows under attention data parallelism FastCost groups the rows by rank, not
    MixedStep's greedy longest-first, and both leave the busiest group within one row of attention of the other
    (tests/test_capacity.py): there the bound is that row, priced as the step with one more row at the longest
    context in every group."""
    if lay.ep > 1 and len(S) > fastsim.FastCost.GREEDY_ROWS:
        rows = [(1, int(s)) for s in S]
        return abs(got - want) <= ref(rows + [(1, int(max(S)))] * lay.ep) - ref(rows)
    return math.isclose(got, want, rel_tol=1e-9)


@pytest.mark.parametrize("case, step", [(CASES[0], 0.5e-3), (CASES[-2], 0.0)], ids=["step-cost", "no-step-cost"])
def test_two_cases_are_host_bound_so_that_every_term_of_a_step_is_read(case, step):
    """max(device, host) + step: with and without a step cost, host-bound at few rows, device-bound at many."""
    _, fast = _pair(*case)
    for n in (1, 64):
        d, h, s = fast._decode_prefix(n)
        assert h > d and s == pytest.approx(step, abs=0)
    d, h, s = fast._decode_prefix(600)
    assert d > h
    ref = _pair(*case)[0]
    for T, S in (([1, 1, 1, 4], [50, 900, 3000, 4]), ([1, 1, 3, 5], [10, 20, 30, 40]), ([6], [6])):
        T, S = np.array(T), np.array(S)  # small mixed and prefill steps: host-bound as well
        assert math.isclose(fast(T, S), ref(_rows(T, S)), rel_tol=1e-9)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_mixed_step_is_the_op_list_row_by_row(case):
    ref, fast = _pair(*case)
    budget = case[5] or 4096
    rng = np.random.default_rng(17)
    top = 3 * max(load_model(case[0]).max_context, 16384)  # past the window and the first fitted range
    for i in range(30):
        nd = int(rng.integers(0, 300 if i % 3 == 0 else 40))
        npre = int(rng.integers(0, 5)) if nd else int(rng.integers(1, 5))
        T = np.concatenate([np.ones(nd, dtype=np.int64), rng.integers(2, budget, npre)])
        S = np.concatenate([rng.integers(1, 6000 if i % 2 else top, nd), T[nd:] + rng.integers(0, top // 2, npre)])
        want, got = ref(_rows(T, S)), fast(T, S)
        assert _same(ref, case[2], got, want, S), (i, T, S)
    assert fast.calls == 30  # step_evaluations: one per iteration priced


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_decode_only_step_is_the_op_list_row_by_row(case):
    ref, fast = _pair(*case)
    rng = np.random.default_rng(23)
    for n in (1, 3, 64, 257, 600):
        S = rng.integers(1, 3 * load_model(case[0]).max_context, n)
        want = ref([(1, int(s)) for s in S])
        assert _same(ref, case[2], fast(np.ones(n, dtype=np.int64), S), want, S), (n, S)
        before = fast.calls
        assert _same(ref, case[2], fast.decode_only(S), want, S), (n, S)
        assert fast.calls == before + 1  # one evaluation, whichever way it was priced


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_run_of_decode_steps_is_each_step_row_by_row(case):
    """decode_steps(S0, k)[j] is the iteration whose rows are at S0 + j, and counts as k evaluations."""
    ref, fast = _pair(*case)
    rng = np.random.default_rng(29)
    for n, k in ((1, 40), (5, 33), (120, 20), (300, 12)):
        S0 = np.sort(rng.integers(1, 9000, n))
        before = fast.calls
        if not fast.fast_decode:  # no run is exact there: None, and the simulator prices each step (StepCost)
            assert fast.decode_steps(S0, k) is None and fast.calls == before
            continue
        got = np.asarray(fast.decode_steps(S0, k))
        want = np.array([ref([(1, int(s)) for s in S0 + j]) for j in range(k)])
        assert got.shape == (k,) and all(_same(ref, case[2], g, w, S0 + j) for j, (g, w) in enumerate(zip(got, want))), (n, k)
        assert fast.calls - before == k


@pytest.mark.parametrize("case", CASES[:3], ids=IDS[:3])
def test_the_exact_step_cost_is_stepcost_and_counts_each_call(case):
    ref, _ = _pair(*case)
    exact = fastsim.ExactCost(_pair(*case)[0])
    T, S = np.array([1, 1, 300]), np.array([500, 70, 900])
    assert exact(T, S) == ref(_rows(T, S)) and exact(T, S) == ref(_rows(T, S)) and exact.calls == 2


EDGE = [0, 4, 7, 11]  # host-bound with a step cost, MHA, windows (priced row by row), attention data parallel


@pytest.mark.parametrize("case", [CASES[i] for i in EDGE], ids=[IDS[i] for i in EDGE])
def test_a_step_at_the_edge_of_each_table_fastcost_grows_is_priced_as_any_other(case):
    """FastCost grows its tables on demand: by rows (the decode prefix starts at 512 rows), by rounded context (the
    decode attention table at 1,024 x q tokens) and by tokens a step (the prefill prefix at the budget + 1). A step
    that lands exactly on a table's length must grow it, not read past its end."""
    ref, fast = _pair(*case)
    q = ref.q
    for T, S in [([1], [100]),  # builds the decode tables at their first sizes
                 ([1] * 512, list(range(1, 513))),  # rows = the decode prefix's length
                 ([1, 1], [100, 1024 * q]),  # a context at the decode table's length
                 ([1, 1], [100, 2048 * q - 5]),
                 ([10], [10]),  # builds the prefill prefix at budget + 1 tokens
                 ([case[5] + 1], [case[5] + 1]),  # a whole prompt of budget + 1 tokens: the prefill prefix's length
                 ([2 * (case[5] + 1)], [2 * (case[5] + 1)]),
                 ([1] * 1024, [7] * 1024)]:
        T, S = np.array(T), np.array(S)
        assert _same(ref, case[2], fast(T, S), ref(_rows(T, S)), S), (T.size, S.max())
        if T.max() == 1:
            assert _same(ref, case[2], fast.decode_only(S), ref(_rows(T, S)), S)
    for n, S0 in [(1, 1024 * q - 3), (3, 2048 * q - 1)]:  # a run that crosses the table's end
        got = fast.decode_steps(np.full(n, S0), 8)
        assert np.allclose(got, [ref([(1, S0 + j)] * n) for j in range(8)], rtol=1e-9, atol=0)
    # the decode table's end reached by a mixed step's decode rows and by a run, each on a fresh FastCost
    ref, fast = _pair(*case)
    fast(np.array([1]), np.array([100]))
    T, S = np.array([1, 300]), np.array([1024 * q, 300])
    assert math.isclose(fast(T, S), ref(_rows(T, S)), rel_tol=1e-9)
    ref, fast = _pair(*case)
    fast(np.array([1]), np.array([100]))
    assert math.isclose(fast.decode_steps(np.array([1024 * q - 1]), 2)[-1], ref([(1, 1024 * q)]), rel_tol=1e-9)
