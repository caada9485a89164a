"""Attention data parallel: each of ep ranks runs whole sequences, so a prompt chunk is computed on one rank.

The ops with weights of the attention block run on the busiest rank's own rows (engine.busiest_rank), not on
an even 1/ep share of the step's tokens: a 7,373-token prompt beside 3 decodes on 4 ranks is 7,373 rows there.
And MLA's prefill up-projection reads the cached context of the prompt chunks only, not of the decoding rows.
"""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel import catalog_names, engine
from perfmodel.errors import SpecError
from perfmodel.ops import Layout
from perfmodel.specs import load_hardware, load_model


def _lpt(T, ep):
    """Greedy longest-first assignment written plainly: each row to the least-loaded rank (np.argmin)."""
    loads = np.zeros(ep)
    for t in sorted(T, reverse=True):
        loads[int(np.argmin(loads))] += t
    return float(loads.max())


def _busiest(T, ep):
    return engine.busiest_rank(T, np.arange(1.0, len(T) + 1.0), ep)[0]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(units=st.integers(0, 300), chunks=st.lists(st.integers(2, 20000), max_size=6), ep=st.integers(1, 16))
def test_the_busiest_rank_holds_the_tokens_of_greedy_longest_first(units, chunks, ep):
    """busiest_rank's tokens (LPT over the chunks, a water-fill of the decode rows) are the plain greedy
    assignment's busiest rank; None exactly where that is build_ops' own ceil(n / ep) x T (one rank, or equal
    rows). Its chunks hold that many tokens less the decode rows water-filled onto it, and never a decode row."""
    T = np.array([1] * units + chunks, dtype=float)
    if T.size == 0:
        return
    S = np.arange(T.size, dtype=float) + 5000.0
    got, mine = engine.busiest_rank(T, S, ep)
    if ep == 1 or np.all(T == T[0]):
        assert got is None
        assert _lpt(T, ep) == (T.sum() if ep == 1 else math.ceil(T.size / ep) * T[0])  # build_ops' ceil(B/ep) T
    else:
        assert got == _lpt(T, ep)
        assert T.sum() / ep <= got <= T.sum() / ep + T.max()  # the longest-processing-time bound
        assert np.all(mine[0] > 1) and 0 < mine[0].sum() <= got and got - mine[0].sum() <= units
        assert set(zip(mine[0].tolist(), mine[1].tolist())) <= set(zip(T.tolist(), S.tolist()))
    if ep == 1 and not np.all(T == T[0]):  # one rank: every prompt chunk, longest first
        assert sorted(mine[0].tolist()) == sorted(chunks)


def test_a_prompt_lands_whole_on_one_rank():
    assert _busiest([7373, 1, 1, 1], 4) == 7373.0
    assert _busiest([7373, 1, 1, 1], 1) is None
    assert _busiest([512, 512, 1, 1, 1, 1], 2) == 514.0  # one chunk each, the decodes split
    assert _busiest([100, 1, 1, 1, 1, 1], 2) == 100.0  # five decodes on the other rank
    assert _busiest([3, 1, 1, 1, 1, 1, 1, 1], 2) == 5.0  # 3 + 2 | 5: water-filled to 5 each
    T, S = [900, 1, 700, 300, 1], [900, 5000, 4000, 2000, 6000]
    tok, (t, s) = engine.busiest_rank(T, S, 2)  # 900 | 700 + 300; the decodes go to 900's rank: 902 | 1000
    assert tok == 1000.0 and t.tolist() == [700.0, 300.0] and s.tolist() == [4000.0, 2000.0]


def _moe_layouts():
    for name in catalog_names("models"):
        m = load_model(name)
        if m.moe is None:
            continue
        for ep in (2, 4, 8):
            if m.moe.n_experts % ep == 0:
                yield name, ep
                break


@pytest.mark.parametrize("mode", ["roofline", "achievable"])
@pytest.mark.parametrize("name, ep", list(_moe_layouts()))
def test_a_prompt_beside_decodes_costs_at_least_the_prompt_alone(name, ep, mode):
    """Under attention DP the prompt's rank computes all of its rows whatever the other ranks decode, so adding
    decoding sequences to a prompt's step never makes it faster than the prompt alone (every MoE model of the
    catalog; before busiest_tokens the step spread the prompt over the ranks and came out up to 4x faster)."""
    m = load_model(name)
    hw = load_hardware("b200")
    try:
        lay = Layout(tp=1, ep=ep)
        engine.mixed_step(m, hw, [1], [64], layout=lay, mode=mode)
    except SpecError:
        pytest.skip(f"{name} does not take ep={ep}")
    P = 4096.0
    alone = engine.mixed_step(m, hw, [P], [P], layout=lay, mode=mode)["latency_s"]
    beside = engine.mixed_step(m, hw, [P] + [1] * (ep - 1), [P] + [3000] * (ep - 1), layout=lay,
                               mode=mode)["latency_s"]
    assert beside >= alone * (1 - 1e-12)
    # ... and the decodes are a small addition: far less than one more prompt on another rank would cost
    two = engine.mixed_step(m, hw, [P, P], [P, P], layout=Layout(tp=1, ep=ep), mode=mode)["latency_s"]
    assert beside <= two


def test_the_kimi_example_of_the_docs():
    """Kimi-K2.5 at tp4 x dp4 on B200: a 7,373-token prompt beside 3 decodes is priced as the prompt alone plus
    the decodes' small share, not a quarter of the prompt (0.26 s against 0.99 s before in achievable mode)."""
    m, hw, lay = load_model("kimi-k2.5"), load_hardware("b200"), Layout(tp=4, ep=4)
    for mode in ("roofline", "achievable"):
        alone = engine.mixed_step(m, hw, [7373], [7373], layout=lay, mode=mode)["latency_s"]
        beside = engine.mixed_step(m, hw, [7373, 1, 1, 1], [7373, 8000, 8000, 8000], layout=lay, mode=mode)
        assert alone <= beside["latency_s"] <= 1.01 * alone


@pytest.mark.parametrize("mode", ["roofline", "achievable"])
@pytest.mark.parametrize("name", catalog_names("models"))
def test_a_chunk_beside_decodes_costs_no_more_than_the_two_steps_apart(name, mode):
    """Batching a prompt chunk with 64 decoding sequences shares the weight reads, so the mixed step never costs
    more than the chunk's step plus the decodes' step, for every model kind. MLA up-projects the cached latent
    of the prompt chunks only (decode rows read it absorbed), and DSA's top-k runs over each query's own keys:
    priced at n x the mean context, a DeepSeek-R1 step of 512 tokens beside 200 decodes at 8k came out 5x the
    two steps apart (0.48 s against 0.06 s + 0.04 s on H200 tp8)."""
    m = load_model(name)
    hw = load_hardware("b200" if m.moe else "h100-sxm")
    P, S = 512.0, min(8000.0, float(m.max_context) - 1)
    f = lambda T, C: engine.mixed_step(m, hw, T, C, mode=mode)["latency_s"]  # noqa: E731
    assert f([P] + [1] * 64, [P] + [S] * 64) <= f([P], [P]) + f([1] * 64, [S] * 64)


def test_the_step_memo_keys_the_busiest_ranks_tokens():
    """Two steps of the same rows n and tokens M whose busiest ranks differ (one 5-token chunk beside three decodes,
    four 2-token chunks; or MLA chunks at other contexts) are priced apart by the incremental step cost, each as
    engine.mixed_step prices it."""
    from perfmodel.ops import Precision
    from perfmodel.serving.stepcost import MixedStep

    cases = [("mixtral-8x7b", Layout(tp=1, ep=2), (((1, 900), (1, 900), (1, 900), (5, 905)),
                                                  ((2, 900), (2, 900), (2, 900), (2, 900)))),
             # MLA: the same n, M and mean context, the prompt chunk's own context 1,000 or 3,000 (its up-projection)
             ("deepseek-v2-lite", Layout(), (((1, 3000), (4, 1000)), ((1, 1000), (4, 3000))))]
    for name, lay, steps in cases:
        m, hw = load_model(name), load_hardware("h100-sxm")
        tm = engine.time_model("roofline", hw)
        fast = MixedStep(m, hw, Precision(), lay, tm)
        got = []
        for rows in steps:
            a = np.array(rows, dtype=float)
            want = engine.mixed_step(m, hw, a[:, 0], a[:, 1], Precision(), layout=lay, tm=tm)["latency_s"]
            got.append(fast(rows))
            assert got[-1] == want
        assert got[0] != got[1]


@pytest.mark.parametrize("name, sets", [("deepseek-v2-lite", None), ("deepseek-r1", None), ("glm-5", None),
                                        ("deepseek-v2-lite", {"sliding_window": 1024, "layer_pattern": "LG"})])
def test_a_mixed_steps_mla_up_projection_is_its_prompt_chunks_own(name, sets):
    """In a step of two prompt chunks and 40 decodes, MLA's up-projection of the cached latent does the work of the
    two chunks' own up-projections (their keys: the context, or the window's last W + T - 1), and none for the
    decode rows, which read the latent absorbed."""
    from perfmodel.ops import build_ops, build_step_ops

    m = load_model(name, sets)
    T = np.array([700.0, 300.0] + [1.0] * 40)
    S = np.array([5000.0, 2300.0] + [6000.0] * 40)
    busy, chunks = engine.busiest_rank(T, S, 1)
    for f in ("flops", "act_read", "act_write"):  # FLOPs, the latent and rope keys read, the K and V written
        up = lambda ops: sum(getattr(op, f) * op.count for op in ops if op.name == "mla_kv_up")  # noqa: E731
        mixed = up(build_step_ops(m, T.size, T.mean(), S.mean(), "prefill", busiest=busy, chunks=chunks))
        apart = sum(up(build_ops(m, 1, t, s, "prefill")) for t, s in zip(T[:2], S[:2]))
        assert mixed == pytest.approx(apart, rel=1e-12) and mixed > 0, f
