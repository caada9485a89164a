"""Laws of inference that hold for any model shape (hypothesis), stated as the BRIEF states them."""
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import perfmodel as pm
from perfmodel import engine
from perfmodel.ops import Precision
from perfmodel.specs import model_from_dict
from perfmodel.units import fmt_bytes, parse_quantity

from helpers import intensity, phase_ops, total

H100 = pm.load_hardware("h100-sxm")


@st.composite
def models(draw, **fixed):
    K = draw(st.sampled_from([1, 2, 4, 8]))
    group = draw(st.sampled_from([1, 2, 4, 8]))
    H = draw(st.sampled_from([32, 64, 128]))
    d = dict(name="m", source="test", vocab_size=draw(st.integers(1000, 200_000)), n_heads=K * group,
             n_kv_heads=K, head_dim=H, d_model=K * group * H, d_ff=draw(st.integers(256, 60_000)),
             n_layers=draw(st.integers(1, 96)), max_context=131072, mlp=draw(st.sampled_from(["gated", "plain"])),
             tied_embeddings=draw(st.booleans()))
    d.update(fixed)
    return model_from_dict(d, "test")


batches = st.integers(1, 4096)
contexts = st.integers(1, 131072)


@given(st.integers(1, 64), st.integers(2**12, 2**16), st.integers(2**12, 2**16))
def test_bf16_matmul_counts_2BDF_flops_and_2BD_2DF_2BF_bytes(B, D, F):
    m = model_from_dict(dict(name="m", source="t", vocab_size=10, d_model=D, n_layers=1, n_heads=1, head_dim=D,
                             d_ff=F, max_context=8, mlp="plain"), "t")
    (up,) = [o for o in phase_ops(m, B, 8) if o.name == "mlp_up"]
    assert up.flops == 2 * B * D * F
    assert up.bytes == 2 * B * D + 2 * D * F + 2 * B * F
    # ... so its intensity tends to B as D and F grow (B << D, F)
    assert up.flops / up.bytes == pytest.approx(B, rel=B / min(D, F) * 2)


@given(models(), st.integers(1, 64), contexts)
def test_decode_attention_intensity_is_S_over_S_plus_1_times_N_over_K_whatever_B(m, B, S):
    g = m.N / m.K
    i1 = intensity(phase_ops(m, B, S), {"attn_qk", "attn_av"})
    i2 = intensity(phase_ops(m, 4 * B, S), {"attn_qk", "attn_av"})
    # 4BSNH FLOPs / (2 * 2BNH Q,O + 2 * 2BSKH K,V) bytes = (N/K) * S / (S + N/K)
    assert i1 == pytest.approx(g * S / (S + g), rel=1e-12)
    assert i1 == pytest.approx(i2, rel=1e-12)  # batching amortises nothing in attention


@given(models(), st.integers(1, 32))
def test_mlp_decode_intensity_is_about_B_when_B_is_much_smaller_than_D(m, B):
    assume(B * 50 <= min(m.D, m.F))
    names = {"mlp_up_gate", "mlp_up", "mlp_down"}
    assert intensity(phase_ops(m, B, 1024), names) == pytest.approx(B, rel=0.1)


@given(models(), st.integers(1, 512), contexts)
def test_kv_cache_is_linear_in_B_and_S(m, B, S):
    kv = lambda b, s: engine.memory(phase_ops(m, b, s), m, b, s, Precision())["kv_cache_bytes"]  # noqa: E731
    assert kv(2 * B, S) == pytest.approx(2 * kv(B, S), rel=1e-12)
    assert kv(B, 2 * S) == pytest.approx(2 * kv(B, S), rel=1e-12)
    assert kv(B, S) == 2 * B * S * m.K * m.H * m.L * 2  # 2 (K, V) * B * S * K * H * L * bytes


@given(models(), st.integers(1, 512), st.integers(1, 8192))
def test_kv_cache_is_linear_in_L_and_divided_by_N_over_K(m, B, S):
    per_seq = lambda mm: float(engine.per_sequence(mm, float(S))["kv_bytes_per_seq"])  # noqa: E731
    assert per_seq(m.replace(n_layers=2 * m.L)) == pytest.approx(2 * per_seq(m), rel=1e-12)
    mha = m.replace(n_kv_heads=m.N)
    assert per_seq(mha) / per_seq(m) == pytest.approx(m.N / m.K, rel=1e-12)


def test_cache_depends_only_on_resident_tokens():
    m = pm.load_model("llama-2-13b")
    a = engine.memory(phase_ops(m, 32, 2048), m, 32, 2048, Precision())["kv_cache_bytes"]
    b = engine.memory(phase_ops(m, 128, 512), m, 128, 512, Precision())["kv_cache_bytes"]
    assert a == b


@given(models(), contexts, st.sampled_from(["roofline", "simple"]))
def test_step_latency_and_throughput_do_not_decrease_as_B_grows(m, S, mode):
    B = np.unique(np.geomspace(1, 8192, 30).round())
    r = engine.evaluate(m, H100, B, S, "decode", mode)
    assert np.all(np.diff(r["latency_s"].ravel()) >= 0)
    assert np.all(np.diff(r["throughput_tok_s"].ravel()) >= -1e-9 * r["throughput_tok_s"].max())


@given(models(), batches, contexts)
def test_simple_is_a_lower_bound_of_roofline_up_to_the_embedding_rows_a_lookup_skips(m, B, S):
    s = engine.evaluate(m, H100, B, S, "decode", "simple")["latency_s"]
    r = engine.evaluate(m, H100, B, S, "decode", "roofline")["latency_s"]
    # simple streams every weight; the embedding lookup of a roofline step reads only B of its V rows
    skipped = 0 if m.tied_embeddings else max(m.V - B, 0) * m.D * 2 / H100.memory_bandwidth
    assert s - skipped <= r * (1 + 1e-12)
    if m.tied_embeddings:
        assert s <= r


@given(st.floats(1e-3, 1e6), st.sampled_from(["B", "kB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB"]))
def test_units_round_trip(x, unit):
    v = parse_quantity(f"{x!r} {unit}", "bytes")
    assert parse_quantity(f"{v!r} B", "bytes") == v
    assert parse_quantity(fmt_bytes(v), "bytes") == pytest.approx(v, rel=1e-3)


@pytest.mark.parametrize("text, dim, value", [
    ("80 GB", "bytes", 80e9), ("80 GiB", "bytes", 80 * 2**30), ("4 TiB", "bytes", 4 * 2**40), ("1 KiB/s", "bytes/s", 1024),
    (".5 kB", "bytes", 500), ("+1e3 B", "bytes", 1e3), ("1 bytes", "bytes", 1), ("2 MB", "bytes", 2e6),
    ("3 PB", "bytes", 3e15), ("1 EB", "bytes", 1e18), ("1 KB", "bytes", 1e3), ("2 PiB", "bytes", 2 * 2**50), ("400 Gbps", "bytes/s", 50e9), ("8 kb/s", "bytes/s", 1e3),
    ("2 PFLOPS", "flop/s", 2e15), ("130 TOPS", "flop/s", 130e12), ("5 MFLOP/s", "flop/s", 5e6),
    ("700 W", "W", 700), ("1 kW", "W", 1e3), ("1.2 kW", "W", 1200), ("50 ms", "s", 0.05), ("12 us", "s", 12e-6),
    ("3 µs", "s", 3e-6), ("7 ns", "s", 7e-9), ("2 s", "s", 2), ("$2.49/h", "USD/h", 2.49), ("3 USD/hr", "USD/h", 3),
    (42, "bytes", 42.0), (1.5, "s", 1.5)])
def test_quantities_are_read_in_si_units_with_decimal_and_binary_prefixes(text, dim, value):
    """units.py: decimal prefixes are powers of 1000, binary (Ki, Mi, ...) of 1024, bits are 1/8 byte."""
    assert parse_quantity(text, dim) == pytest.approx(value, rel=1e-15)


@pytest.mark.parametrize("text, value", [("128k", 128_000), ("128K", 128_000), ("3M", 3e6), ("1G", 1e9), ("128Ki", 131_072),
                                         ("2Mi", 2 * 2**20), ("1Gi", 2**30), ("1.5k", 1500), ("7", 7)])
def test_counts_take_decimal_and_binary_suffixes(text, value):
    """units.parse_count: k/K/M/G are powers of 1000 (128k = 128,000 tokens), Ki/Mi/Gi of 1024."""
    from perfmodel.units import parse_count
    assert parse_count(text) == value


@pytest.mark.parametrize("x, text", [(0, "0 B"), (1, "1 B"), (999, "999 B"), (1000, "1 kB"), (1.5e9, "1.5 GB")])
def test_byte_counts_print_with_the_largest_decimal_prefix_below_them(x, text):
    assert fmt_bytes(x) == text


@pytest.mark.parametrize("text, dim", [("80 GB", "bytes/s"), ("3 TB/s", "bytes"), ("1 furlong", "bytes"), ("", "bytes"),
                                       ("-1 GB", "bytes"), ("0 GB", "bytes"), (True, "bytes"), ([1], "bytes"),
                                       ("inf GB", "bytes"), ("１ GB", "bytes"), ("1e400 B", "bytes")])
def test_a_quantity_of_the_wrong_dimension_sign_or_spelling_is_refused(text, dim):
    with pytest.raises(ValueError):
        parse_quantity(text, dim)
    assert parse_quantity("0 GB", "bytes", allow_zero=True) == 0.0


@pytest.mark.parametrize("fmt, x, text", [
    ("fmt_bytes", 0, "0 B"), ("fmt_bytes", 512, "512 B"), ("fmt_bytes", 26.03e9, "26.03 GB"),
    ("fmt_bytes", 838_860_800, "838.9 MB"), ("fmt_bytes", 1e22, "1e+04 EB"), ("fmt_bytes", -2e6, "-2 MB"),
    ("fmt_bytes_bin", 2**30, "1 GiB"), ("fmt_bytes_bin", 1536, "1.5 KiB"), ("fmt_rate", 3.35e12, "3.35 TB/s"),
    ("fmt_flops", 989e12, "989 TFLOP/s"), ("fmt_count", 13_015_864_320, "13.02 G"), ("fmt_count", 124.67, "124.7"),
    ("fmt_time", 8.021e-3, "8.021 ms"), ("fmt_time", 1.5, "1.5 s"), ("fmt_time", 120, "120 s"),
    ("fmt_time", 3e-7, "300 ns"), ("fmt_time", 2.5e-5, "25 µs"), ("fmt_time", 0, "0 ns"), ("fmt_time", 1e-3, "1 ms"),
    ("fmt_bytes", float("nan"), "-"), ("fmt_bytes", None, "-"), ("fmt_time", float("inf"), "-"), ("fmt_time", None, "-")])
def test_numbers_print_with_4_significant_digits_in_the_largest_unit_they_reach(fmt, x, text):
    """units.py: a value is shown in the largest prefix it reaches (1000 or 1024 apart), to 4 significant
    digits; what is not a finite number prints as -."""
    from perfmodel import units
    assert getattr(units, fmt)(x) == text


def test_GB_and_GiB_are_different_units():
    assert parse_quantity("80 GB", "bytes") == 80e9
    assert parse_quantity("80 GiB", "bytes") == 80 * 2**30
    assert parse_quantity("3.35 TB/s", "bytes/s") == 3.35e12
    assert parse_quantity("400 Gb/s", "bytes/s") == 50e9
    assert parse_quantity("989 TFLOP/s", "flop/s") == 989e12


@given(models(), st.integers(1, 256), st.integers(16, 8192))
def test_fused_attention_moves_no_more_bytes_than_unfused(m, B, S):
    f = total(phase_ops(m, B, S, "prefill", attention="fused"), {"attn_qk", "attn_av", "attn_softmax"}, "bytes")
    u = total(phase_ops(m, B, S, "prefill", attention="unfused"), {"attn_qk", "attn_av", "attn_softmax"}, "bytes")
    assert f < u


def test_unfused_score_matrix_is_134217728_bytes_per_head_at_8192_fp16():
    # BRIEF: N = 8192 tokens, fp16: the S x T score matrix is 134,217,728 bytes per head
    m = model_from_dict(dict(name="m", source="t", vocab_size=10, d_model=128, n_layers=1, n_heads=1,
                             d_ff=128, max_context=8192), "t")
    ops = phase_ops(m, 1, 8192, "prefill", attention="unfused", prec=Precision(act="fp16"))
    (qk,) = [o for o in ops if o.name == "attn_qk"]
    assert qk.act_write == 134_217_728


@given(models(), st.integers(1, 64), st.integers(1, 4096))
def test_causal_skipping_counts_half_the_pairs_plus_the_diagonal(m, B, S):
    full = total(phase_ops(m, B, S, "prefill", causal_skip=False), {"attn_qk"})
    skip = total(phase_ops(m, B, S, "prefill"), {"attn_qk"})
    assert skip / full == pytest.approx((S + 1) / (2 * S), rel=1e-12)


# ---------------------------------------------------------------- serving: what a sequence holds, and TPOT
from perfmodel.serving import StepCost, Traffic, simulate  # noqa: E402
from perfmodel.serving.kvmemory import Contiguous, Group, KVSizes, Paged, kv_sizes  # noqa: E402

SERVE_M = pm.load_model("llama-2-13b")
SERVE_COST = StepCost(SERVE_M, H100, Precision(), 16)
SERVE_SIZES = kv_sizes(SERVE_M, H100)


def _one_request(prompt, outs):
    out = np.array([outs])
    return Traffic(np.zeros(1), np.array([prompt]), out, int(out.max()), 0, ["r0"])


def _blocks(prompt, outs, block, share):
    """Blocks a request needs at its peak: each sample holds prompt + output - 1 tokens (its last token is
    never fed back); with sharing the samples share the prompt's full blocks."""
    if share:
        base = prompt // block
        return base + sum(-(-(prompt + o - 1 - base * block) // block) for o in outs)
    return sum(-(-(prompt + o - 1) // block) for o in outs)


@given(st.integers(1, 400), st.lists(st.integers(1, 60), min_size=1, max_size=3), st.sampled_from([1, 7, 16]),
       st.booleans())
def test_a_sequence_holds_at_most_prompt_plus_output_minus_1_tokens(prompt, outs, block, share):
    """The last generated token is never fed back, so a sequence's cache peaks at prompt + output - 1 tokens
    (docs/serving.md): a paged device with exactly those blocks admits the request and runs it to the end
    without preempting it; one block less refuses it up front."""
    need = _blocks(prompt, outs, block, share)
    sizes = KVSizes(1.0, 0.0, 0.0, float(need * block), 10**6)
    assert Paged(sizes, block, share).fits_alone(Group(0, prompt, outs))
    assert not Paged(KVSizes(1.0, 0.0, 0.0, float(need * block - 1), 10**6), block, share).fits_alone(
        Group(0, prompt, outs))
    hw = H100.replace(memory_capacity=SERVE_SIZES.weights + need * block * SERVE_SIZES.per_token)
    r = simulate(SERVE_M, hw, _one_request(prompt, outs), "continuous", None, "paged", block, share, cost=SERVE_COST)
    assert r.summary["preemptions"] == 0 and r.summary["tokens"] == sum(outs)
    assert r.summary["peak_kv_reserved_bytes"] <= need * block * SERVE_SIZES.per_token * (1 + 1e-12)


@given(st.integers(1, 400), st.integers(1, 60), st.integers(0, 60))
def test_a_contiguous_region_wastes_what_its_sequence_never_fills(prompt, out, spare):
    """A contiguous reservation of R = prompt + max_output tokens: the sequence fills prompt + output - 1 of
    them, so R - (prompt + output - 1) is internal fragmentation from admission on; what it holds now is
    `used`, the rest `future`; a region is one hole-free range, so an empty arena has no external waste."""
    max_output = out + spare
    sizes = KVSizes(1.0, 5.0, 0.0, 10.0**6, 10**6)  # 1 byte per token, 5 bytes of fixed state per sequence
    mgr = Contiguous(sizes, max_output)
    g = Group(0, prompt, [out])
    assert mgr.admit(g)
    used, reserved, internal, future, external, saved = mgr.snapshot()
    assert reserved == prompt + max_output + 5 and used == prompt + 5
    assert internal == prompt + max_output - (prompt + out - 1)
    assert future == out - 1 and external == 0 and saved == 0
    assert [h for h in mgr.holes() if h] == [10.0**6 - reserved]  # the region starts at 0: one hole after it
    assert mgr.free_bytes() == 10.0**6 - reserved
    mgr.release(g)
    assert mgr.snapshot()[:3] == (0.0, 0.0, 0.0) and mgr.holes() == [10.0**6]


@given(st.integers(1, 600), st.integers(2, 40), st.sampled_from(["static", "continuous"]))
def test_tpot_of_a_lone_request_is_its_mean_decode_step(prompt, out, policy):
    """TPOT = (last token - first token) / (output - 1): the first token ends the prefill and each of the
    other output - 1 tokens takes one decode step, so alone on a server it is the mean decode step."""
    r = simulate(SERVE_M, H100, _one_request(prompt, [out]), policy, 8, cost=SERVE_COST)
    steps = r.timeline["duration_s"]
    assert len(steps) == out and list(r.timeline["kind"][1:]) == ["decode"] * (out - 1)
    tpot = r.requests["tpot_s"][0]
    assert tpot == pytest.approx(steps[1:].sum() / (out - 1), rel=1e-9)
    assert r.requests["ttft_s"][0] == pytest.approx(steps[0], rel=1e-12)
    assert r.summary["mean_tpot_s"] == pytest.approx(tpot, rel=1e-12)
    assert r.requests["latency_s"][0] == pytest.approx(steps.sum(), rel=1e-12)
    assert r.requests["samples"][0] == 1 and r.requests["output_tokens"][0] == out
    tl = r.timeline
    if prompt > 1:  # (continuous batching counts a one-token prompt chunk as a decode row)
        assert list(tl["decode_rows"]) == [0] + [1] * (out - 1)
        assert list(tl["prefill_tokens"]) == [prompt] + [0] * (out - 1)
    if policy == "continuous":  # the cache covers the prompt and one more token per step; it is freed at the end
        assert list(tl["kv_used_bytes"] / SERVE_SIZES.per_token) == [prompt + j for j in range(out - 1)] + [0]
        assert list(tl["slots_used"]) == list(tl["running"]) == [1] * (out - 1) + [0]


@settings(max_examples=20)
@given(st.integers(2, 4000), st.integers(1, 1000), st.integers(1, 1000), st.integers(1, 40))
def test_with_expert_parallelism_a_step_waits_for_the_attention_of_its_busiest_group(big, a, b, d):
    """ep device groups run attention data-parallel, each on whole sequences of its own (docs/parallelism.md):
    the greedy longest-first placement puts a long sequence alone on one group, so the step's attention is
    that group's. Changing the contexts of the sequences on the other group changes nothing; changing the
    long one's does."""
    m = pm.load_model("mixtral-8x7b")
    lay = pm.Layout(ep=2)
    big = big + a + b  # the long sequence outweighs the two others together
    step = lambda S: engine.mixed_step(m, H100, [1] * len(S), S, layout=lay)["latency_s"]  # noqa: E731
    assert step([big, a, b]) == step([big, b, a]) == step([big, 1, 1])
    assert step([big, a]) == step([big, b])  # two sequences: one on each group
    assert step([big + d, a, b]) > step([big, a, b]) and step([big + d, a]) > step([big, a])
    flops = lambda S: engine.mixed_step(m, H100, [1] * len(S), S, layout=lay)["flops"]  # noqa: E731
    assert flops([big, a, b]) == flops([big, 1, 1]) < flops([big, big, big])


@given(st.lists(st.tuples(st.integers(1, 300), st.integers(1, 40)), min_size=1, max_size=10),
       st.sampled_from([1, 7, 16]), st.booleans(), st.sampled_from([0.0, 3.0]), st.integers(50, 3000))
def test_a_paged_device_admits_a_request_exactly_when_its_blocks_and_state_fit(reqs, block, share, state, cap):
    """Paged: a request's prompt takes ceil(prompt / block) blocks plus its sequence's fixed state; it is
    admitted exactly when that fits in what is free, and growing by a token takes a new block only when the
    last one is full. Reserved = blocks x block bytes + sequences x state; used = tokens held + state."""
    mgr = Paged(KVSizes(1.0, state, 0.0, float(cap), 10**6), block, share)
    held, blocks, seqs, admitted = 0, 0, 0, []
    for i, (p, o) in enumerate(reqs):
        g = Group(i, p, [o])
        assert g.seqs[0].left == p  # the whole prompt before its first token
        need = -(-p // block)
        free = mgr.free_bytes()
        assert free == cap - blocks * block - seqs * state
        ok = mgr.admit(g)
        assert ok == (need * block + state <= free)
        if not ok:
            continue
        held, blocks, seqs = held + p, blocks + need, seqs + 1
        g.seqs[0].known += 1  # its first token: a new block only if the prompt filled its last one
        grow = -(-(p + 1) // block) - need
        room = mgr.free_bytes() >= grow * block
        assert mgr.update(g) == room
        if room:
            held, blocks = held + 1, blocks + grow
        else:
            g.seqs[0].known -= 1
        used, reserved, internal, future, external, saved = mgr.snapshot()
        assert used == held + seqs * state and reserved == blocks * block + seqs * state
        assert internal == reserved - used and future == external == saved == 0
        admitted.append(g)
    for g in admitted:  # everything goes back
        mgr.release(g)
    assert mgr.snapshot()[:2] == (0.0, 0.0) and mgr.free_bytes() == cap


def test_a_full_paged_device_still_lets_a_sequence_grow_inside_its_last_block():
    """Growth that needs no new block needs no free memory: a device filled to the last byte still serves it."""
    mgr = Paged(KVSizes(1.0, 0.0, 0.0, 16.0, 10**6), 16, False)
    g = Group(0, 10, [5])
    assert mgr.admit(g) and mgr.free_bytes() == 0
    g.seqs[0].known += 1
    assert mgr.update(g) and mgr.update_from([g]) == 1 and mgr.snapshot()[0] == 11
    g.seqs[0].known = 17  # the 17th token needs a second block, and there is none
    assert not mgr.update(g) and mgr.update_from([g]) == 0 and mgr.snapshot()[0] == 11


@settings(max_examples=40)
@given(st.lists(st.tuples(st.integers(1, 300), st.lists(st.integers(1, 50), min_size=1, max_size=3),
                          st.integers(0, 60)), min_size=1, max_size=8),
       st.integers(0, 100), st.sampled_from([1, 16, 32]), st.booleans(), st.sampled_from([0.0, 3.0]))
def test_updating_every_group_at_once_is_updating_them_one_by_one(groups, prefix, block, share, state):
    """Paged.update_from (the simulator's hot loop, its common case inlined) leaves the manager exactly as
    update() on each group in order does, stopping at the same group when memory runs out."""
    cap = 2000.0
    a, b = (Paged(KVSizes(1.0, state, 0.0, cap, 10**6), block, share, prefix) for _ in range(2))
    ga, gb = [], []
    for i, (p, outs, grow) in enumerate(groups):
        for mgr, gs in ((a, ga), (b, gb)):
            g = Group(i, prefix + p, outs)
            if mgr.admit(g):
                gs.append(g)
    assert len(ga) == len(gb)
    for g1, g2 in zip(ga, gb):  # each admitted group forks (when it has samples) and grows
        grow = groups[g1.rid][2]
        for g in (g1, g2):
            if len(g.outs) > 1:
                g.fork()
            for s in g.seqs:
                s.known += grow
    stop_a = a.update_from(ga)
    stop_b = next((i for i, g in enumerate(gb) if not b.update(g)), len(gb))
    assert stop_a == stop_b
    assert a.snapshot() == b.snapshot() and a.free_bytes() == b.free_bytes()
    assert [g.mem for g in ga] == [g.mem for g in gb]


def test_a_replica_with_ep_groups_caches_in_what_each_group_leaves_after_its_weights():
    """kv_sizes: ep device groups each hold their own sequences, so a replica's KV capacity is ep x what one
    device leaves after its weights, and a cached token costs what it costs on the device that holds it."""
    m, hw = pm.load_model("mixtral-8x7b"), H100.replace(memory_capacity=200e9)
    one, two = kv_sizes(m, hw), kv_sizes(m, hw, layout=pm.Layout(ep=2))
    w2 = float(engine.per_sequence(m, 1.0, layout=pm.Layout(ep=2))["weight_bytes"])
    assert two.weights == w2 < one.weights
    assert two.capacity == 2 * (200e9 - w2) and one.capacity == 200e9 - one.weights
    assert two.per_token == one.per_token == engine.kv_growth_per_token(m)


def _traffic(prompts, outs, gap, prefix=0):
    arr = np.arange(len(prompts)) * gap
    out = np.array(outs)[:, None]
    return Traffic(arr, np.array(prompts), out, int(out.max()), prefix, [f"r{i}" for i in range(len(prompts))])


@settings(max_examples=15)
@given(st.lists(st.integers(2, 200), min_size=1, max_size=5), st.integers(0, 100), st.sampled_from([1, 16]),
       st.booleans())
def test_a_shared_system_prompt_is_prefilled_once_while_someone_holds_it_and_never_skipped_without_sharing(
        prompts, prefix, block, share):
    """Prefix caching: with sharing, the full blocks of a system prompt are computed by the first request and
    skipped by every request that arrives while it is still resident; without sharing every request
    prefills its whole prompt. Requests here overlap (they arrive 10 ms apart and generate 200 tokens)."""
    tr = _traffic(prompts, [200] * len(prompts), 0.01, prefix)
    r = simulate(SERVE_M, H100, tr, "continuous", None, "paged", block, share, cost=SERVE_COST)
    assert r.summary["preemptions"] == 0
    full = sum(p + prefix for p in prompts)
    skipped = (len(prompts) - 1) * (prefix // block * block) if share else 0
    assert r.timeline["prefill_tokens"].sum() == full - skipped
    # requests 100 s apart never overlap: the prefix leaves with its last user and is computed again
    apart = simulate(SERVE_M, H100, _traffic(prompts, [5] * len(prompts), 100.0, prefix), "continuous", None,
                     "paged", block, share, cost=SERVE_COST)
    assert apart.timeline["prefill_tokens"].sum() == full


def test_every_preemption_is_counted_once_per_victim():
    """When a running request needs a block and none is free, the newest is preempted: the timeline, the
    requests and the summary count the same preemptions."""
    tr = _traffic([64] * 6, [100] * 6, 0.0)
    hw = H100.replace(memory_capacity=SERVE_SIZES.weights + 400 * SERVE_SIZES.per_token)
    r = simulate(SERVE_M, hw, tr, "continuous", None, "paged", 16, False, cost=SERVE_COST)
    n = r.summary["preemptions"]
    assert n > 0 and n == r.timeline["preempted"].sum() == r.requests["preemptions"].sum()
    np.testing.assert_array_equal(r.timeline["slots_used"], r.timeline["running"])  # one slot per sequence
    assert np.all(r.requests["completions"] == 1) and r.summary["tokens"] == 600

def test_a_hole_exactly_as_big_as_the_next_region_is_not_external_fragmentation():
    """Contiguous: free memory is external fragmentation when it lies in holes too small for the next request's
    region; a hole of exactly that size is usable."""
    sizes = KVSizes(1.0, 0.0, 0.0, 300.0, 10**6)
    mgr = Contiguous(sizes, 50)  # each region: prompt + 50 tokens
    gs = [Group(i, 50, [10]) for i in range(3)]  # three regions of 100 fill the arena
    assert all(mgr.admit(g) for g in gs) and mgr.free_bytes() == 0 and not mgr.admit(Group(3, 1, [1]))
    mgr.release(gs[1])  # a hole of 100 in the middle
    assert mgr.snapshot(Group(4, 50, [1]))[4] == 0  # needs 100: fits the hole
    assert mgr.snapshot(Group(5, 51, [1]))[4] == 100  # needs 101: the hole is waste
    assert mgr.admit(Group(6, 50, [3])) and mgr.free_bytes() == 0


def test_static_batches_take_up_to_slots_sequences_each():
    """Static batching: an idle server takes up to `slots` waiting sequences as one padded batch; 7 requests
    on 3 slots run as batches of 3, 3 and 1, every iteration of a batch over all of its rows."""
    tr = _traffic([32] * 7, [4, 2, 3, 4, 1, 2, 3], 0.0)
    r = simulate(SERVE_M, H100, tr, "static", 3, cost=SERVE_COST)
    rows = list(r.timeline["rows"])
    assert rows == [3] * 4 + [3] * 4 + [1] * 3  # each batch runs to its longest output
    assert list(r.timeline["kind"]) == ["prefill", "decode", "decode", "decode"] * 2 + ["prefill", "decode", "decode"]
    assert r.timeline["generated"].sum() == 19 == r.summary["tokens"]
    assert list(r.timeline["decode_rows"]) == [0, 3, 3, 3] * 2 + [0, 1, 1]
    assert list(r.timeline["prefill_tokens"]) == [96, 0, 0, 0] * 2 + [32, 0, 0]

@settings(max_examples=20)
@given(st.lists(st.tuples(st.integers(1, 300), st.integers(1, 30)), min_size=1, max_size=10),
       st.sampled_from(["chunked", "separate"]), st.sampled_from([None, 64, 300]), st.sampled_from([None, 3]))
def test_each_iteration_is_labelled_by_what_it_carries_and_keeps_to_the_token_budget(reqs, prefill, budget, slots):
    """An iteration is `decode` when every row decodes, `prefill` when none does (separate prefill: prompts
    only, the decodes wait) and `mixed` otherwise. Chunked prefill carries every decode and prompt chunks up to
    the token budget; separate prefill takes whole prompts up to the budget, at least one."""
    tr = _traffic([p for p, _ in reqs], [o for _, o in reqs], 0.001)
    r = simulate(SERVE_M, H100, tr, "continuous", slots, "paged", 16, True, prefill, budget, cost=SERVE_COST)
    tl = r.timeline
    rows, dec, pre = tl["rows"], tl["decode_rows"], tl["prefill_tokens"]
    kinds = tl["kind"]
    assert np.all(dec <= rows)
    assert np.all((kinds == "decode") == (dec == rows))
    assert np.all((kinds == "prefill") == ((dec == 0) & (rows > 0) & (prefill == "separate") & (pre > 0)))
    if prefill == "separate":
        assert "mixed" not in set(kinds)
        if budget:
            assert np.all((pre <= budget) | (rows == 1))
    elif budget:  # the decodes first, then prompt chunks while the budget lasts
        assert np.all(pre <= np.maximum(budget - dec, 0))
    label = prefill if budget is None else f"{prefill}/{budget}"
    assert r.summary["prefill"] == label and r.summary["kv_manager"] == "paged+shared"
    assert r.summary["slots"] == (np.inf if slots is None else slots)
    if slots:
        assert np.all(tl["slots_used"] <= slots)


@given(st.integers(1, 200), st.integers(1, 60), st.integers(0, 60), st.integers(1, 3), st.sampled_from([-1, 0]))
def test_static_batching_does_not_fit_a_request_exactly_when_its_padded_rows_cannot_fit_alone(prompt, out, spare, n, off):
    """A padded batch reserves min(max_context, prompt + max_output) tokens per row: a request of n samples
    runs when n such rows fit after the weights, and when they do not the run does not fit, decided up front (not
    half-run): a result with nothing served and the request named."""
    max_out = out + spare
    tr = Traffic(np.zeros(1), np.array([prompt]), np.array([[out] * n]), max_out, 0, ["r0"])
    tokens = n * (prompt + max_out)
    hw = H100.replace(memory_capacity=SERVE_SIZES.weights + (tokens + off) * SERVE_SIZES.per_token)
    if off < 0:
        r = simulate(SERVE_M, hw, tr, "static", 8, cost=SERVE_COST)
        assert r.summary["does_not_fit"].startswith("r0: its KV cache does not fit")
        assert r.summary["tokens"] == 0 and r.summary["steps"] == 0 and np.isnan(r.summary["mean_latency_s"])
    else:
        r = simulate(SERVE_M, hw, tr, "static", 8, cost=SERVE_COST)
        assert r.summary["tokens"] == n * out and r.summary["kv_manager"] == "padded"
        assert r.summary["peak_kv_reserved_bytes"] == pytest.approx(tokens * SERVE_SIZES.per_token, rel=1e-12)
        assert list(r.requests["samples"]) == [n]

@settings(max_examples=30)
@given(st.lists(st.tuples(st.sampled_from([1, 1, 2, 7, 300]), st.integers(1, 3000)), min_size=1, max_size=8),
       st.integers(1, 64))
def test_the_step_cost_charges_decode_rows_at_their_context_rounded_up_to_the_quantum(rows, q):
    """StepCost caches step times on the batch composition with each decode row's context rounded up to a
    multiple of the quantum (16 by default); prompt rows (T > 1) are exact."""
    rows = [(t, max(s, t)) for t, s in rows]
    rounded = [(t, -(-s // q) * q if t == 1 else s) for t, s in rows]
    want = engine.mixed_step(SERVE_M, H100, [t for t, _ in rounded], [s for _, s in rounded])["latency_s"]
    assert StepCost(SERVE_M, H100, Precision(), q)(rows) == pytest.approx(want, rel=1e-12)
    assert StepCost(SERVE_M, H100, Precision()).q == 16


@pytest.mark.parametrize("rows", [[(1, 1)], [(1, 5), (1, 9), (7, 7)]])
@pytest.mark.parametrize("passes", [{"gemm_weight_passes": 3.0}, {"attention_kv_passes": 2.0}])
def test_on_a_calibrated_device_that_packs_operands_the_step_cost_is_still_mixed_step(rows, passes):
    """A BLAS that packs the streamed operand prices each op by its per-row `rows` field, which the incremental
    replay does not keep: the step cost then is engine.mixed_step itself, to the last bit."""
    hw = H100.replace(**passes)
    want = engine.mixed_step(SERVE_M, hw, [t for t, _ in rows], [s for _, s in rows])["latency_s"]
    assert isinstance(want, float) and want > 0
    assert StepCost(SERVE_M, hw, Precision(), 1)(rows) == want

@pytest.mark.parametrize("name", ["llama-2-13b", "llama-3.1-8b", "mixtral-8x7b", "deepseek-v2-lite"])
@pytest.mark.parametrize("passes", [{"gemm_weight_passes": 3.0}, {"attention_kv_passes": 2.0}])
def test_on_a_device_that_packs_operands_equal_rows_of_a_mixed_step_are_one_plain_step(name, passes):
    """The varlen attention kernel of a mixed step packs each shared K/V head as one sequence's kernel does:
    16 equal decodes cost one decode step at B = 16, and 4 equal prompt chunks one prefill at B = 4."""
    m, hw = pm.load_model(name), H100.replace(**passes)
    mixed = engine.mixed_step(m, hw, np.ones(16), np.full(16, 1024.0))["latency_s"]
    assert mixed == pytest.approx(engine.evaluate(m, hw, 16, 1024)["latency_s"][0, 0], rel=1e-12)
    chunk = engine.mixed_step(m, hw, np.full(4, 512.0), np.full(4, 512.0))["latency_s"]
    assert chunk == pytest.approx(engine.evaluate(m, hw, 4, 512, "prefill")["latency_s"][0, 0], rel=1e-12)
    base = engine.mixed_step(m, H100, np.ones(16), np.full(16, 1024.0))["latency_s"]
    # packing costs time where a streamed operand is shared by several rows: always for weights at B = 16,
    # for a K/V head only where query heads share it (GQA: N / K rows; MLA: the latent, N rows); MHA decode
    # has one row per head and packs nothing
    assert mixed > base if ("gemm_weight_passes" in passes or m.N > m.K or m.mla) else mixed == base


# ---------------------------------------------------------------- layouts and plans
from perfmodel import parallel  # noqa: E402
from perfmodel.errors import SpecError  # noqa: E402


@given(st.integers(1, 20000))
def test_the_divisors_of_a_device_count_are_exactly_the_numbers_that_divide_it(n):
    assert parallel._divisors(n) == [d for d in range(1, n + 1) if n % d == 0]


@pytest.mark.parametrize("n", [9, 25, 49, 121, 2 * 3 * 5 * 7 * 11 * 13, 2**10 * 3**4, 997 * 991, 10**12])
def test_squares_primes_and_highly_composite_counts_factor_completely(n):
    divs = parallel._divisors(n)
    assert all(n % d == 0 for d in divs) and divs == sorted(set(divs))
    assert np.prod([p**e for p, e in parallel._factors(n).items()]) == n
    assert len(divs) == np.prod([e + 1 for e in parallel._factors(n).values()])


@pytest.mark.parametrize("name", ["llama-2-13b", "llama-3.1-8b", "mixtral-8x7b", "deepseek-v2-lite"])
@given(n=st.integers(1, 48))
def test_plan_layouts_are_every_split_of_the_devices_the_heads_layers_and_experts_allow(name, n):
    m = pm.load_model(name)
    want = {(tp, pp, ep, n // (tp * pp * ep)) for tp in range(1, n + 1) for pp in range(1, n + 1)
            for ep in range(1, n + 1) if n % (tp * pp * ep) == 0 and m.N % tp == 0 and (m.K % tp == 0 or tp % m.K == 0)
            and pp <= m.n_layers and (ep == 1 or (m.moe and m.moe.n_experts % ep == 0))}
    got = [(x.tp, x.pp, x.ep, x.replicas) for x in parallel.layouts(m, n)]
    assert sorted(got) == sorted(want) and len(got) == len(set(got))


def test_plan_skips_layouts_that_need_a_missing_network_and_counts_throughput_per_device():
    hw = H100.replace(devices_per_node=2, network_bandwidth=None, link_bandwidth=450e9, link_latency=2e-6)
    t, s = parallel.plan("llama-2-13b", hw, 4, 1024, [1, 8])
    # layouts of 4: (tp, pp) = (1,1) (1,2) (2,1) stay within a node of 2; (1,4) (2,2) (4,1) cross it
    assert s["skipped"] == 3
    assert sorted(set(zip(t["tp"], t["pp"], t["replicas"]))) == [(1, 1, 4), (1, 2, 2), (2, 1, 2)]
    np.testing.assert_allclose(t["throughput_per_device"], t["throughput_tok_s"] / 4, rtol=1e-15)
    assert np.all(t["devices"] == 4)


def test_a_pipeline_without_micro_batches_is_refused():
    with pytest.raises(SpecError):
        pm.build_ops(pm.load_model("llama-2-7b"), 8, 1, 128, "decode", layout=pm.Layout(pp=2, microbatches=0))


# ---------------------------------------------------------------- what-ifs
from perfmodel import whatif  # noqa: E402
from perfmodel.formats import get_format, known_formats  # noqa: E402
from perfmodel.ops import build_ops  # noqa: E402

SMALL = model_from_dict(dict(name="small", source="test", vocab_size=32000, d_model=256, n_layers=2, n_heads=4,
                             n_kv_heads=2, d_ff=512, max_context=16384), "test")


def _fl(m, B, T, S, phase, what="flops", names=None):
    return sum(float(np.sum(getattr(o, what) + 0 * np.asarray(S, float))) * o.count
               for o in build_ops(m, B, T, S, phase) if names is None or o.name in names)


@pytest.mark.parametrize("T", [1, 2, 7])
def test_generation_cost_sums_one_forward_per_generated_token_with_and_without_a_cache(T):
    """generation-cost: with a cache, step t is a decode step at context t; without, a prefill over t tokens;
    MACs are FLOPs / 2; memory is the last step's (without a cache: no KV at all)."""
    r = whatif.generation_cost(SMALL, [T], batch=3)
    steps = range(1, T + 1)
    assert r["macs_cached"][0] == pytest.approx(sum(_fl(SMALL, 3, 1, t, "decode") for t in steps) / 2, rel=1e-12)
    assert r["macs_uncached"][0] == pytest.approx(sum(_fl(SMALL, 3, t, t, "prefill") for t in steps) / 2, rel=1e-12)
    assert r["bytes_cached"][0] == pytest.approx(sum(_fl(SMALL, 3, 1, t, "decode", "bytes") for t in steps), rel=1e-12)
    assert r["bytes_uncached"][0] == pytest.approx(sum(_fl(SMALL, 3, t, t, "prefill", "bytes") for t in steps),
                                                   rel=1e-12)
    att = {"attn_qk", "attn_av"}
    assert r["attention_macs_cached"][0] == pytest.approx(sum(_fl(SMALL, 3, 1, t, "decode", names=att)
                                                              for t in steps) / 2, rel=1e-12)
    assert r["attention_macs_uncached"][0] == pytest.approx(sum(_fl(SMALL, 3, t, t, "prefill", names=att)
                                                                for t in steps) / 2, rel=1e-12)
    dec = engine.evaluate(SMALL, H100, 3, T)
    pre = engine.evaluate(SMALL, H100, 3, T, "prefill")
    assert r["memory_cached"][0] == dec["memory_bytes"][0, 0]
    assert r["memory_uncached"][0] == pre["memory_bytes"][0, 0] - pre["kv_cache_bytes"][0, 0]
    assert r["macs_ratio"][0] == r["macs_uncached"][0] / r["macs_cached"][0]
    assert r["bytes_ratio"][0] == r["bytes_uncached"][0] / r["bytes_cached"][0]
    assert list(r["batch"]) == [3.0] and list(r["tokens"]) == [T]


def test_generation_cost_over_many_chunks_is_the_closed_form_sum():
    """Over T = 20000 steps (three chunks of the step axis): decode FLOPs are linear in t and prefill FLOPs
    quadratic, so the sums have closed forms; the chunked sums must equal them."""
    T = 20000
    r = whatif.generation_cost(SMALL, [T])
    d1, d2 = (_fl(SMALL, 1, 1, t, "decode") for t in (1, 2))
    b = d2 - d1
    cached = T * (d1 - b) + b * T * (T + 1) / 2
    p1, p2, p3 = (_fl(SMALL, 1, t, t, "prefill") for t in (1, 2, 3))
    c2 = (p3 - 2 * p2 + p1) / 2
    c1 = p2 - p1 - 3 * c2
    c0 = p1 - c1 - c2
    uncached = c0 * T + c1 * T * (T + 1) / 2 + c2 * T * (T + 1) * (2 * T + 1) / 6
    assert r["macs_cached"][0] == pytest.approx(cached / 2, rel=1e-9)
    assert r["macs_uncached"][0] == pytest.approx(uncached / 2, rel=1e-9)


def test_the_format_table_lists_every_format_with_its_bits_bytes_and_peak():
    t = whatif.formats()
    assert list(t["format"]) == known_formats()
    for name, bits, nbytes, peak in zip(t["format"], t["bits_per_weight"], t["bytes_per_weight"], t["compute_peak"]):
        fm = get_format(name)
        assert bits == fm.bits_per_element(row=4096 if fm.group is None else None)
        assert nbytes == bits / 8 and peak == fm.peak
    assert dict(zip(t["format"], t["bits_per_weight"]))["int8"] == 8 + 16 / 4096


@pytest.mark.parametrize("name, fmt", [("llama-2-13b", "int4"), ("mixtral-8x7b", "fp8"), ("gpt-oss-20b", "bf16"),
                                       ("llama-3.2-1b", "nf4")])
def test_the_weight_breakdown_adds_up_and_states_each_components_bits(name, fmt):
    m = pm.load_model(name)
    t = whatif.weights(m, fmt)
    assert t["params"].sum() == pm.param_count(m)
    assert t["weight_bytes"].sum() == pytest.approx(engine.per_sequence(m, 1.0, Precision(fmt))["weight_bytes"], rel=1e-12)
    np.testing.assert_allclose(t["bits_per_weight"], 8 * t["weight_bytes"] / t["params"], rtol=1e-15)
    assert set(t["component"]) >= {"attention", "norms", "embedding"}
    assert ("lm_head" in set(t["component"])) == (not m.tied_embeddings)  # a tied head stores nothing


def test_compare_reports_each_models_numbers_and_its_ratios_to_the_first():
    names = ["llama-2-13b", "llama-2-13b-gqa8", "llama-2-13b-mla"]
    t = whatif.compare(names, batch=[1, 64], context=[1024, 8192])
    n = 4  # rows per model
    for i, name in enumerate(names):
        m = pm.load_model(name)
        rows = slice(i * n, (i + 1) * n)
        r = engine.evaluate(m, H100, [1, 64], [1024, 8192])
        np.testing.assert_array_equal(t["latency_s"][rows], r["latency_s"].ravel())
        S = t["context"][rows]
        kv = engine.per_sequence(m, S)["kv_bytes_per_seq"]
        np.testing.assert_allclose(t["kv_bytes_per_seq"][rows], kv, rtol=1e-15)
        np.testing.assert_allclose(t["kv_bytes_per_token"][rows], kv / S, rtol=1e-15)
        np.testing.assert_array_equal(t["max_batch"][rows], engine.max_batch(m, H100.memory_capacity, S))
        for col, ratio in (("kv_bytes_per_seq", "kv_ratio"), ("latency_s", "latency_ratio"),
                           ("throughput_tok_s", "throughput_ratio"), ("max_batch", "max_batch_ratio")):
            np.testing.assert_allclose(t[ratio][rows], t[col][rows] / t[col][:n], rtol=1e-12)


@given(st.lists(st.floats(0, 1), min_size=1, max_size=3), st.lists(st.integers(1, 12), min_size=1, max_size=3,
                                                                   unique=True),
       st.lists(st.floats(0.01, 1), min_size=1, max_size=2))
def test_the_speculative_grid_is_the_closed_form_at_every_alpha_gamma_and_draft_cost(alphas, gammas, costs):
    """E = sum_{i=0}^{gamma} alpha^i tokens per round over gamma*c + 1 target steps; slower when below 1;
    best gamma: the gamma in 1..32 with the largest speedup."""
    t = whatif.speculative(alpha=alphas, gamma=gammas, draft_cost=costs)
    assert len(t["alpha"]) == len(alphas) * len(gammas) * len(costs)
    for a, g, c, e, sp, slow, best in zip(t["alpha"], t["gamma"], t["draft_cost"], t["expected_tokens"], t["speedup"],
                                          t["slower"], t["best_gamma"]):
        assert e == pytest.approx(sum(a**i for i in range(int(g) + 1)), rel=1e-9, abs=1e-12)
        assert sp == pytest.approx(e / (g * c + 1), rel=1e-9)
        assert slow == (sp < 1)
        brute = max(range(1, 33), key=lambda k: (sum(a**i for i in range(k + 1)) / (k * c + 1), -k))
        assert whatif.speedup(a, best, c) == pytest.approx(whatif.speedup(a, brute, c), rel=1e-9)


def test_speculative_costs_from_the_engine_are_ratios_of_roofline_steps():
    """With models: c = draft step / target step, and verifying gamma tokens is one target forward over
    gamma + 1 tokens per sequence, as a fraction of a plain target step."""
    B, S = 8, 2048
    t = whatif.speculative(alpha=[0.7], gamma=[1, 4], draft="llama-3.2-1b", target="llama-3.1-8b", batch=B, context=S)
    step = lambda name, T: float(engine.roofline(build_ops(pm.load_model(name), B, T, S, "decode"), H100,  # noqa: E731
                                                 Precision())["time"])
    t1 = step("llama-3.1-8b", 1.0)
    assert t["target_step_s"][0] == pytest.approx(t1, rel=1e-12)
    assert t["draft_cost"][0] == pytest.approx(step("llama-3.2-1b", 1.0) / t1, rel=1e-12)
    for g, v, sp, c in zip(t["gamma"], t["verify_cost"], t["speedup"], t["draft_cost"]):
        assert v == pytest.approx(step("llama-3.1-8b", g + 1.0) / t1, rel=1e-12)
        assert sp == pytest.approx(whatif.expected_tokens(0.7, g) / (g * c + v), rel=1e-12)
    assert t["best_gamma"][0] == t["best_gamma"][1] and 1 <= t["best_gamma"][0] <= 32


@pytest.mark.parametrize("S, N, B", [(64, 1, 1), (1000, 8, 2), (8192, 32, 1)])
def test_the_attention_kernel_table_counts_one_layers_score_matrix_and_traffic(S, N, B):
    t = whatif.attention_kernels([S], heads=N, head_dim=64, batch=B, dtype="fp16")
    assert t["score_bytes_per_head"][0] == S * S * 2 and t["score_bytes_per_layer"][0] == S * S * 2 * N * B
    assert t["flops"][0] == 2 * 2 * B * (S * (S + 1) / 2) * N * 64  # QK^T and AV over the causal pairs
    # fused: Q, K, V read and O written once (2 bytes each); unfused adds 4 passes over the score matrix
    fused = 4 * B * S * N * 64 * 2
    assert t["fused_hbm_bytes"][0] == fused
    assert t["unfused_hbm_bytes"][0] == fused + 4 * B * N * S * S * 2
    assert t["traffic_ratio"][0] == t["unfused_hbm_bytes"][0] / fused


# ---------------------------------------------------------------- traffic
from perfmodel.serving import make_traffic, parse_lengths  # noqa: E402
from perfmodel.serving.traffic import Lengths, read_trace  # noqa: E402


@pytest.mark.parametrize("a, b", [("512", "fixed:512"), ("fixed:n=512", " Fixed : 512 "), ("uniform:64,1024", "uniform:min=64,max=1024"),
                                  ("lognormal:median=18,max=231", "lognormal:max=231,median=18,sigma=1"),
                                  ("uniform:7,7", "fixed:7")])
def test_length_distributions_have_one_meaning_however_they_are_written(a, b):
    la, lb = parse_lengths(a, "o"), parse_lengths(b, "o")
    if "uniform:7,7" in a:
        assert (la.lo, la.hi) == (lb.lo, lb.hi) == (7, 7)
    else:
        assert la == lb
    assert parse_lengths(la, "o") is la


def test_a_lognormal_median_need_not_be_a_whole_number_of_tokens():
    """The median of a lognormal length is a real number (its cap and the drawn lengths are whole)."""
    la = parse_lengths("lognormal:median=18.5,max=231", "--output-len")
    assert la.median == 18.5 and la.hi == 231


@pytest.mark.parametrize("spec", ["uniform:0,5", "fixed:5,6", "uniform:min=3", "lognormal:median=3,max=9,mu=2",
                                  "lognormal:median=0.5,max=9", "lognormal:median=9,max=8", "lognormal:median=3,max=9,sigma=-1",
                                  "fixed:-2", "uniform:2.5,4", "fixed:", "uniform:1,5,min=1"])
def test_a_length_distribution_outside_its_domain_is_refused(spec):
    from perfmodel.errors import SpecError
    with pytest.raises(SpecError):
        parse_lengths(spec, "--output-len")


def test_lengths_are_drawn_inside_their_range_and_a_zero_spread_lognormal_is_its_median():
    rng = np.random.default_rng(0)
    assert set(parse_lengths("lognormal:median=40,max=100,sigma=0", "o").draw(rng, 50)) == {40}
    x = parse_lengths("lognormal:median=40,max=60,sigma=2", "o").draw(rng, 20000)
    assert x.min() == 1 and x.max() == 60 and np.median(x) == 40
    u = parse_lengths("uniform:3,4", "o")
    assert (u.lo, u.hi, u.max) == (3, 4, 4) and set(u.draw(rng, (40, 3)).ravel()) == {3, 4}
    assert parse_lengths("lognormal:median=18,max=231", "o").sigma == 1.0
    assert Lengths("fixed", 5, 5).draw(rng, (2, 3)).shape == (2, 3)


def test_poisson_arrivals_start_at_zero_with_exponential_gaps_of_mean_one_over_the_rate():
    tr = make_traffic(20000, rate=4.0, seed=3)
    gaps = np.diff(tr.arrival)
    assert tr.arrival[0] == 0 and np.all(gaps >= 0)
    assert gaps.mean() == pytest.approx(0.25, rel=0.03) and np.median(gaps) == pytest.approx(0.25 * np.log(2), rel=0.05)
    all_at_once = make_traffic(8, output_len="fixed:9", samples=3, shared_prefix=100)
    assert np.all(all_at_once.arrival == 0) and all_at_once.outputs.shape == (8, 3) and all_at_once.max_output == 9
    assert all_at_once.shared_prefix == 100 and all_at_once.where[7] == "request 7" and all_at_once.n == 8
    assert make_traffic().n == 64 and make_traffic(output_len="uniform:5,9").max_output == 9


@pytest.mark.parametrize("kw", [dict(rate=0), dict(rate=-1.0), dict(rate=float("nan")), dict(rate=float("inf")),
                                dict(samples=0), dict(shared_prefix=-1), dict(requests=0), dict(requests=2.5)])
def test_traffic_outside_its_domain_is_refused(kw):
    from perfmodel.errors import SpecError
    with pytest.raises(SpecError):
        make_traffic(**{"requests": 4, **kw})
    assert make_traffic(4, shared_prefix=0).shared_prefix == 0


def test_a_trace_is_read_in_any_column_order_sorted_by_arrival_and_truncated_on_request(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("output_tokens,extra,arrival_s,prompt_tokens\n7,x,2.5,100\n\n3,y,0.5,40\n9,z,0.5,60\n")
    arr, pr, out, lines = read_trace(p)
    assert list(arr) == [2.5, 0.5, 0.5] and list(pr) == [100, 40, 60] and list(out) == [7, 3, 9]
    assert lines == [2, 4, 5]  # the file's row numbers (the blank line is skipped)
    tr = make_traffic(trace=p, samples=2)
    assert list(tr.arrival) == [0.5, 0.5, 2.5] and list(tr.prompt) == [40, 60, 100]  # stable for equal times
    assert tr.outputs.tolist() == [[3, 3], [9, 9], [7, 7]] and tr.max_output == 9
    assert tr.where == [f"{p}: row 4", f"{p}: row 5", f"{p}: row 2"]
    two = make_traffic(trace=p, requests=2)
    assert two.n == 2 and list(two.prompt) == [40, 100]  # the first two rows of the file, then sorted


@pytest.mark.parametrize("text, kw", [("arrival_s,prompt_tokens,output_tokens\n0,5,0\n", {}),
                                      ("arrival_s,prompt_tokens,output_tokens\n-1,5,3\n", {}),
                                      ("arrival_s,prompt_tokens,output_tokens\n0,5.5,3\n", {}),
                                      ("arrival_s,prompt_tokens,output_tokens\n0,5\n", {}),
                                      ("arrival_s,prompt_tokens\n0,5\n", {}),
                                      ("arrival_s,prompt_tokens,output_tokens\n", {}), ("", {}),
                                      ("arrival_s,prompt_tokens,output_tokens\n0,5,3\n", {"requests": 2}),
                                      ("arrival_s,prompt_tokens,output_tokens\n0,5,3\n", {"rate": 2.0}),
                                      ("arrival_s,prompt_tokens,output_tokens\n0,5,3\n", {"prompt_len": "9"})])
def test_a_trace_outside_its_domain_is_refused(tmp_path, text, kw):
    from perfmodel.errors import SpecError
    p = tmp_path / "t.csv"
    p.write_text(text)
    with pytest.raises(SpecError):
        make_traffic(trace=p, **kw)


@pytest.mark.parametrize("prec, parts", [
    (Precision("int4"), ["weights int4-g128 (4.125 bits)", "kept in bf16", "weight-only", "bf16 rate"]),
    (Precision("fp8", "fp8"), ["weights fp8 (8 bits)", "kept in bf16", "activations fp8", "fp8 tensor rate"]),
    (Precision(), ["weights bf16 (16 bits)", "bf16 tensor rate"]),
    (Precision("int8", kv="fp8"), ["(8.004 bits)", "KV cache fp8", "weight-only"]),  # 8 + 16/4096 bits per weight
    (Precision("int4", quantize_embeddings=True), ["int4-g128", "weight-only"])])
def test_the_quantization_note_says_what_is_quantized_and_at_which_rate_the_math_runs(prec, parts):
    note = whatif.quantization_note(prec)
    assert all(p in note for p in parts), note
    wf, af, _, hf = prec.formats()
    assert ("kept in" in note) == (hf is not wf) and ("weight-only" in note) == (wf.bits < af.bits)
